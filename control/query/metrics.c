// SPDX-License-Identifier: MIT
/*
 * The query path's sections of /metrics: the resolver's answers, the cache, the forwarder and
 * each upstream it uses, prefetch and forward.per_client. Each function is an
 * ndc_metrics_fn (http.h) over its module's object; the agent registers them. They read the
 * modules' stats functions only, so the modules never call back here.
 */
#include <stdio.h>

#include "metrics/metrics.h"
#include "internal.h"

#define F(stype, ...) NDC_METRIC_FIELD(struct stype, __VA_ARGS__)

static const char answers_help[] = "Socket-path answers by source.";
static const char refused_help[] =
    "Questions answered without a lookup for their type (reserved or meta: FORMERR; AXFR/IXFR: "
    "REFUSED) or class (not IN: REFUSED); never forwarded, cached or published.";

static const struct ndc_metric_field resolver_fields[] = {
    F(ndc_resolver_stats, queries, "queries_total", "counter",
      "Queries that reached the socket path.", NULL),
    F(ndc_resolver_stats, local, "answers_total", "counter", answers_help, "source=\"cluster\""),
    F(ndc_resolver_stats, cache_hits, "answers_total", "counter", answers_help, "source=\"cache\""),
    F(ndc_resolver_stats, forwarded, "answers_total", "counter", answers_help,
      "source=\"upstream\""),
    F(ndc_resolver_stats, servfail, "servfail_total", "counter", "SERVFAIL answers.", NULL),
    F(ndc_resolver_stats, errors, "malformed_total", "counter",
      "Malformed or unsupported queries, answered FORMERR, NOTIMP or BADVERS (questions "
      "refused for their type or class: ndcache_questions_refused_total).",
      NULL),
    F(ndc_resolver_stats, dropped, "dropped_total", "counter",
      "Datagrams dropped (responses, runts).", NULL),
    F(ndc_resolver_stats, refused_qtype, "questions_refused_total", "counter", refused_help,
      "reason=\"qtype\""),
    F(ndc_resolver_stats, refused_qclass, "questions_refused_total", "counter", refused_help,
      "reason=\"qclass\""),
};

void ndc_resolver_metrics(void *res, struct ndc_metrics_buf *b)
{
	struct ndc_resolver_stats st;

	ndc_resolver_stats(res, &st);
	NDC_METRIC_TABLE(b, resolver_fields, &st, NULL);
}

static const struct ndc_metric_field cache_fields[] = {
    F(ndc_cache_stats, hits, "cache_hits_total", "counter", "Cache hits.", NULL),
    F(ndc_cache_stats, misses, "cache_misses_total", "counter", "Cache misses.", NULL),
    F(ndc_cache_stats, stale_hits, "cache_stale_total", "counter",
      "Expired answers served stale (RFC 8767).", NULL),
    F(ndc_cache_stats, evictions, "cache_evictions_total", "counter", "Cache entries evicted.",
      NULL),
    F(ndc_cache_stats, entries, "cache_entries", "gauge", "Answers in the cache.", NULL),
    F(ndc_cache_stats, bytes, "cache_bytes", "gauge", "Bytes of answers in the cache.", NULL),
    F(ndc_cache_stats, lock_wait_max_us, "cache_lock_wait_max_us", "gauge",
      "The longest a resolver worker waited for a cache shard's lock since the start "
      "(microseconds).",
      NULL),
    F(ndc_cache_stats, lock_hold_max_us, "cache_lock_hold_max_us", "gauge",
      "The longest a cache insert held a shard's lock, the fast-path publisher's hook "
      "included, since the start (microseconds).",
      NULL),
    F(ndc_cache_stats, lock_contended, "cache_lock_contended_total", "counter",
      "Cache shard lock acquisitions by lookups and inserts that found it taken and waited.", NULL),
};

void ndc_cache_metrics(void *cache, struct ndc_metrics_buf *b)
{
	struct ndc_cache_stats st;

	ndc_cache_stats(cache, &st);
	NDC_METRIC_TABLE(b, cache_fields, &st, NULL);
}

/* ndcache_upstream_limited_total: the forwarder's reason here, forward.per_client's below. */
#define LIMITED_HELP                                                                         \
	"Misses answered SERVFAIL at once instead of going upstream, by reason: per_client " \
	"(forward.per_client), max_pending (forward.max_pending or the in-flight limit)."

static const struct ndc_metric_field forwarder_fields[] = {
    F(ndc_forwarder_stats, queries, "upstream_queries_total", "counter", "Queries sent upstream.",
      NULL),
    F(ndc_forwarder_stats, coalesced, "upstream_coalesced_total", "counter",
      "Misses that joined a query in flight.", NULL),
    F(ndc_forwarder_stats, timeouts, "upstream_timeouts_total", "counter",
      "Upstream attempts that timed out.", NULL),
    F(ndc_forwarder_stats, tcp_retries, "upstream_tcp_retries_total", "counter",
      "Truncated answers retried over TCP.", NULL),
    F(ndc_forwarder_stats, tcp_fallbacks, "upstream_tcp_fallbacks_total", "counter",
      "UDP attempts that timed out, asked again over TCP (forward.protocol prefer_udp).", NULL),
    F(ndc_forwarder_stats, rejected, "upstream_rejected_total", "counter",
      "Misses answered SERVFAIL at once: forward.max_pending or the in-flight limit reached.",
      NULL),
    F(ndc_forwarder_stats, pending, "upstream_pending", "gauge",
      "Client queries waiting for an upstream answer.", NULL),
    F(ndc_forwarder_stats, responses, "upstream_responses_total", "counter",
      "Upstream answers accepted.", NULL),
    F(ndc_forwarder_stats, errors, "upstream_errors_total", "counter",
      "Upstream attempts that failed other than by timeout (refused, broken TCP, SERVFAIL, "
      "REFUSED, FORMERR, NOTIMP).",
      NULL),
    F(ndc_forwarder_stats, stale_served, "upstream_stale_served_total", "counter",
      "Queries every upstream failed, answered from an expired cache entry (RFC 8767).", NULL),
    F(ndc_forwarder_stats, rejected, "upstream_limited_total", "counter", LIMITED_HELP,
      "reason=\"max_pending\""),
};

/* Each upstream in use, labelled upstream="192.0.2.10:53": its counters, then its state. */
static const struct ndc_metric_field upstream_fields[] = {
    F(ndc_fwd_upstream_stats, queries, "upstream_server_queries_total", "counter",
      "Attempts sent to the upstream (probes included).", NULL),
    F(ndc_fwd_upstream_stats, responses, "upstream_server_responses_total", "counter",
      "Responses accepted from the upstream.", NULL),
    F(ndc_fwd_upstream_stats, timeouts, "upstream_server_timeouts_total", "counter",
      "Attempts to the upstream that timed out.", NULL),
    F(ndc_fwd_upstream_stats, errors, "upstream_server_errors_total", "counter",
      "Other failed attempts (refused, unreachable, bad answer).", NULL),
    F(ndc_fwd_upstream_stats, probes, "upstream_server_probes_total", "counter",
      "Attempts sent while it was down, to learn whether it is back.", NULL),
    F(ndc_fwd_upstream_stats, skipped, "upstream_server_skipped_total", "counter",
      "Queries that went past it because it was down.", NULL),
    F(ndc_fwd_upstream_stats, tcp_queries, "upstream_server_tcp_queries_total", "counter",
      "Attempts sent to the upstream over TCP (forward.protocol, truncated answers).", NULL),
    F(ndc_fwd_upstream_stats, tcp_conns, "upstream_server_tcp_connections_total", "counter",
      "TCP connections opened to the upstream (the pool keeps at most 2).", NULL),
    F(ndc_fwd_upstream_stats, tcp_resent, "upstream_server_tcp_resent_total", "counter",
      "Queries sent again on another connection after theirs died.", NULL),
    F(ndc_fwd_upstream_stats, bad_answers, "upstream_server_bad_answers_total", "counter",
      "Answers to an outstanding query (its ID, from the upstream's address and port or on its "
      "connection) that could not be used: no question section (a FORMERR or NOTIMP), not "
      "parseable. Each fails that query's attempt at once (next upstream or SERVFAIL), not "
      "the upstream.",
      NULL),
    F(ndc_fwd_upstream_stats, tcp_stalled, "upstream_tcp_stalled_closes_total", "counter",
      "TCP connections closed because they were sent a query and answered nothing for "
      "forward.timeout_ms (the server behind them gone, or not reading); their queries are "
      "sent again on a new connection.",
      NULL),
    F(ndc_fwd_upstream_stats, tcp_queue_full, "upstream_tcp_queue_full_total", "counter",
      "Queries that found every TCP connection to the upstream with 64 KiB queued unsent (a "
      "peer that stops reading): sent to the next upstream, or SERVFAIL, at once.",
      NULL),
};

static void upstream_metrics(const struct ndc_fwd_upstream_stats *u, struct ndc_metrics_buf *b)
{
	char l[96];

	snprintf(l, sizeof(l), "upstream=\"%s\"", u->name);
	NDC_METRIC_TABLE(b, upstream_fields, u, l);
	ndc_metric_u64(b, "ndcache_upstream_healthy", "gauge",
		       "1 while the upstream is tried in its turn, 0 while skipped after a failure "
		       "(backoff).",
		       l, u->healthy);
	ndc_metric_u64(b, "ndcache_upstream_backoff_ms", "gauge",
		       "Backoff of a down upstream (1000..30000), 0 when healthy.", l,
		       u->backoff_ms);
	ndc_metric_u64(b, "ndcache_upstream_server_tcp_open", "gauge",
		       "TCP connections to the upstream open now.", l, u->tcp_open);
	ndc_metric_u64(b, "ndcache_upstream_loop_detected", "gauge",
		       "1 while the upstream is out of use because ndcache's own query sent to it "
		       "came back to ndcache (a forwarding loop); checked again every 30 s and at "
		       "every upstream change.",
		       l, u->looping);
}

void ndc_forwarder_metrics(void *fwd, struct ndc_metrics_buf *b)
{
	struct ndc_forwarder_stats st;

	ndc_forwarder_stats(fwd, &st);
	NDC_METRIC_TABLE(b, forwarder_fields, &st, NULL);
	for (size_t i = 0; i < st.n_upstreams; i++)
		upstream_metrics(&st.upstream[i], b);
}

static const char prefetch_help[] =
    "Prefetches of hot cache entries (cache.prefetch) by result: refreshed (the upstream's "
    "answer replaced the entry) or failed (it did not: the upstream failed, or the answer was "
    "not cacheable; prefetching then backs off 1 s doubling to 30 s).";

static const struct ndc_metric_field prefetch_fields[] = {
    F(ndc_prefetch_stats, refreshed, "prefetch_total", "counter", prefetch_help,
      "result=\"refreshed\""),
    F(ndc_prefetch_stats, failed, "prefetch_total", "counter", prefetch_help, "result=\"failed\""),
    F(ndc_prefetch_stats, cold, "prefetch_cold_total", "counter",
      "Cache entries that reached their prefetch point asked fewer than cache.prefetch.min_hits "
      "times: left to expire.",
      NULL),
    F(ndc_prefetch_stats, kernel_hits, "prefetch_kernel_hits_total", "counter",
      "Hits the fast path answered, read from the kernel's table at prefetch points.", NULL),
    F(ndc_prefetch_stats, inflight, "prefetch_inflight", "gauge",
      "Prefetches waiting for the upstream now.", NULL),
};

void ndc_prefetch_metrics(void *prefetch, struct ndc_metrics_buf *b)
{
	struct ndc_prefetch_stats st;

	ndc_prefetch_stats(prefetch, &st);
	NDC_METRIC_TABLE(b, prefetch_fields, &st, NULL);
}

static const struct ndc_metric_field ratelimit_fields[] = {
    F(ndc_ratelimit_stats, limited, "upstream_limited_total", "counter", LIMITED_HELP,
      "reason=\"per_client\""),
    F(ndc_ratelimit_stats, clients, "per_client_clients", "gauge",
      "Source addresses in forward.per_client's table (at most 8192; idle ones make room).", NULL),
    F(ndc_ratelimit_stats, evicted_active, "per_client_evicted_active_total", "counter",
      "Clients replaced in forward.per_client's table before their bucket had refilled (more "
      "active clients than it holds: their limit was lenient).",
      NULL),
};

void ndc_ratelimit_metrics(void *limiter, struct ndc_metrics_buf *b)
{
	struct ndc_ratelimit_stats st;

	ndc_ratelimit_stats(limiter, &st);
	NDC_METRIC_TABLE(b, ratelimit_fields, &st, NULL);
}
