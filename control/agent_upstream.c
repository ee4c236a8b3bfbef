// SPDX-License-Identifier: MIT
/*
 * The agent's upstream side beyond the forwarder itself: the per-upstream metrics.
 */
#include <stdio.h>

#include "agent_upstream.h"

void ndc_agent_upstream_metrics(const struct ndc_forwarder_stats *fs, struct ndc_metrics_buf *b)
{
	for (size_t i = 0; i < fs->n_upstreams; i++) {
		const struct ndc_fwd_upstream_stats *u = &fs->upstream[i];
		char l[96];

		snprintf(l, sizeof(l), "upstream=\"%s\"", u->name);
		ndc_metric_u64(b, "ndcache_upstream_healthy", "gauge",
			       "1 while the upstream is tried in its turn, 0 while skipped after a "
			       "failure (backoff).",
			       l, u->healthy);
		ndc_metric_u64(b, "ndcache_upstream_backoff_ms", "gauge",
			       "Backoff of a down upstream (1000..30000), 0 when healthy.", l,
			       u->backoff_ms);
		ndc_metric_u64(b, "ndcache_upstream_server_queries_total", "counter",
			       "Attempts sent to the upstream (probes included).", l, u->queries);
		ndc_metric_u64(b, "ndcache_upstream_server_responses_total", "counter",
			       "Responses accepted from the upstream.", l, u->responses);
		ndc_metric_u64(b, "ndcache_upstream_server_timeouts_total", "counter",
			       "Attempts to the upstream that timed out.", l, u->timeouts);
		ndc_metric_u64(b, "ndcache_upstream_server_errors_total", "counter",
			       "Other failed attempts (refused, unreachable, bad answer).", l,
			       u->errors);
		ndc_metric_u64(b, "ndcache_upstream_server_probes_total", "counter",
			       "Attempts sent while it was down, to learn whether it is back.", l,
			       u->probes);
		ndc_metric_u64(b, "ndcache_upstream_server_skipped_total", "counter",
			       "Queries that went past it because it was down.", l, u->skipped);
		ndc_metric_u64(
		    b, "ndcache_upstream_server_tcp_queries_total", "counter",
		    "Attempts sent to the upstream over TCP (forward.protocol, truncated "
		    "answers).",
		    l, u->tcp_queries);
		ndc_metric_u64(b, "ndcache_upstream_server_tcp_connections_total", "counter",
			       "TCP connections opened to the upstream (the pool keeps at most 2).",
			       l, u->tcp_conns);
		ndc_metric_u64(b, "ndcache_upstream_server_tcp_resent_total", "counter",
			       "Queries sent again on another connection after theirs died.", l,
			       u->tcp_resent);
		ndc_metric_u64(b, "ndcache_upstream_server_tcp_open", "gauge",
			       "TCP connections to the upstream open now.", l, u->tcp_open);
	}
}
