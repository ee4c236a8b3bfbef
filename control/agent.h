/* SPDX-License-Identifier: MIT */
/*
 * The running agent: cache, fast path and publisher, forwarder, resolver, socket server, the
 * metrics/health/ready endpoint and, for a Kubernetes source, the watch and the object store.
 * Started in dependency order, stopped in reverse, on SIGINT or SIGTERM.
 */
#ifndef NDC_AGENT_H
#define NDC_AGENT_H

#include "config.h"
#include "k8s/k8s.h"
#include "records/records.h"

/*
 * Runs until a signal. rec: the record table of a snapshot source (ownership passes), or NULL
 * with conn set: objects come from the API server and until the first full sync every name is
 * forwarded. Returns 0 after a clean stop, 1 when something could not start.
 */
int ndc_agent_run(const struct ndc_config *cfg, struct ndc_records *rec,
		  const struct ndc_k8s_conn *conn);

#endif
