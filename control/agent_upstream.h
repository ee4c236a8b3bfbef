/* SPDX-License-Identifier: MIT */
/*
 * The agent's upstream side beyond the forwarder itself (agent_upstream.c): what /metrics says
 * of each upstream.
 */
#ifndef NDC_AGENT_UPSTREAM_H
#define NDC_AGENT_UPSTREAM_H

#include "http/http.h"
#include "query/query.h"

/* ndcache_upstream_{healthy,backoff_ms,server_*}{upstream="..."}: one set per upstream in use. */
void ndc_agent_upstream_metrics(const struct ndc_forwarder_stats *fs, struct ndc_metrics_buf *b);

#endif
