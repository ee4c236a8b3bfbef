/* SPDX-License-Identifier: MIT */
/*
 * The agent's upstream side beyond the forwarder itself (agent_upstream.c): /ready while every
 * upstream loops, fail-open to a loopback upstream.
 */
#ifndef NDC_AGENT_UPSTREAM_H
#define NDC_AGENT_UPSTREAM_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "http/http.h"
#include "query/query.h"

/* The unready check of /ready (ndc_http_unready_fn), fwd the forwarder: every upstream of the
 * default route loops. */
bool ndc_agent_upstream_unready(void *fwd, char *why, size_t len);

/* At start: the warning when dataplane.failopen goes to an upstream on loopback (fastpath: the
 * fast path is loaded, so fail-open would be in effect). */
void ndc_agent_failopen_check(const struct ndc_config *cfg, bool fastpath);

/* ndcache_failopen_loopback_upstream: 1 while that is so. */
void ndc_agent_failopen_metrics(const struct ndc_config *cfg, bool fastpath,
				struct ndc_metrics_buf *b);

#endif
