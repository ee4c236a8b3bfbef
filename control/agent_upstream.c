// SPDX-License-Identifier: MIT
/*
 * The agent's upstream side beyond the forwarder itself: the per-upstream metrics, /ready while
 * every upstream loops, and fail-open to an upstream on loopback.
 */
#include <stdio.h>
#include <string.h>

#include <ndc/log.h>

#include "agent_upstream.h"
#include "reload/reload.h"

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
		ndc_metric_u64(
		    b, "ndcache_upstream_loop_detected", "gauge",
		    "1 while the upstream is out of use because ndcache's own query sent "
		    "to it came back to ndcache (a forwarding loop); checked again "
		    "every 30 s and at every upstream change.",
		    l, u->looping);
	}
}

bool ndc_agent_upstream_unready(void *fwd, char *why, size_t len)
{
	struct ndc_forwarder_stats fs;
	size_t off, n = 0;

	ndc_forwarder_stats(fwd, &fs);
	if (!fs.all_looping)
		return false;
	off = (size_t)snprintf(why, len, "no upstream left: ");
	for (size_t i = 0; i < fs.n_upstreams && off < len; i++)
		if (fs.upstream[i].looping)
			off += (size_t)snprintf(why + off, len - off, "%s%s", n++ ? ", " : "",
						fs.upstream[i].name);
	if (off < len)
		snprintf(why + off, len - off, " forward%s ndcache's queries back to it (a loop)",
			 n > 1 ? "" : "s");
	return true;
}

void ndc_agent_failopen_check(const struct ndc_config *cfg, bool fastpath)
{
	char lo[160];

	if (fastpath && ndc_reload_failopen_loopback(cfg, lo, sizeof(lo)))
		ndc_warn(
		    "dataplane.failopen: upstream %s is on loopback, where the kernel does not "
		    "route a query rewritten on a pod's link: with no agent running, queries "
		    "that are not answered in the kernel are lost. List an upstream on a "
		    "routable address (the kube-dns Service) first",
		    lo);
}

void ndc_agent_failopen_metrics(const struct ndc_config *cfg, bool fastpath,
				struct ndc_metrics_buf *b)
{
	char lo[160];
	bool on = fastpath && ndc_reload_failopen_loopback(cfg, lo, sizeof(lo));

	ndc_metric_u64(
	    b, "ndcache_failopen_loopback_upstream", "gauge",
	    "1 when dataplane.failopen's upstream is on loopback (127.0.0.0/8, ::1), "
	    "where the kernel does not route a pod's query: fail-open does nothing then.",
	    NULL, on);
}
