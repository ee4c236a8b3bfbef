/* SPDX-License-Identifier: MIT */
/*
 * Forwards misses to the upstream list and caches what comes back. One thread with its own epoll
 * loop; ndc_forwarder_resolve may be called from any thread. Each upstream query uses a random ID
 * and a fresh socket (random source port); the response must come from the upstream's address,
 * carry our ID and our question. TC means retry over TCP; a timeout moves to the next upstream.
 * Identical concurrent misses (same lname, qtype, qclass) share one upstream query.
 *
 * Upstream health: an upstream that times out (or refuses, or is unreachable) is down, and skipped
 * while another is up, for a backoff of 1 s doubling up to 30 s; when the backoff is over one
 * query is also sent to it as a probe, and any answer brings it back. No client waits on a dead
 * upstream it already knows is dead, except when all are down: then each request still makes
 * one attempt (an upstream may be back), so a never-seen name gets its SERVFAIL within one
 * timeout_ms; a name with a cached (even expired) answer gets that at once (RFC 8767 5).
 */
#ifndef NDC_FORWARDER_H
#define NDC_FORWARDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <ndc/dns_wire.h>

#include "cache.h"

struct ndc_forwarder;

#define NDC_FWD_MAX_UPSTREAMS 8
#define NDC_FWD_PENDING_MAX 10000 /* max_pending 0 */

struct ndc_forwarder_opts {
	size_t n_upstreams; /* at most NDC_FWD_MAX_UPSTREAMS (-E2BIG) */
	const struct sockaddr_storage *upstreams;
	uint32_t timeout_ms;   /* per attempt */
	uint32_t max_inflight; /* distinct upstream queries at once; more: fail with -EBUSY */
	/* Resolves waiting for their callback (coalesced ones included): each is a client query
	 * held in memory. More: fail with -EBUSY. 0: NDC_FWD_PENDING_MAX. */
	uint32_t max_pending;
};

struct ndc_fwd_result {
	int status; /* 0: answer valid; else -ETIMEDOUT, -ECONNREFUSED, -EBUSY ...: SERVFAIL */
	const struct ndc_answer *answer; /* valid only during the callback */
	uint32_t age;			 /* seconds to subtract from TTLs */
	bool stale;			 /* served from an expired cache entry (RFC 8767): TTL 30 */
};

/* Runs on the forwarder thread (or inline in ndc_forwarder_resolve for immediate failures). */
typedef void (*ndc_fwd_done_fn)(void *arg, const struct ndc_fwd_result *res);

/* Starts the forwarder thread. cache may be NULL (nothing cached, no stale serving). */
int ndc_forwarder_new(const struct ndc_forwarder_opts *opts, struct ndc_cache *cache,
		      struct ndc_forwarder **ret);

/*
 * Resolves (lname, qtype, qclass) upstream; done(arg, ...) is called exactly once, unless this
 * returns an error (then never). When every upstream fails and the cache has a stale entry, that
 * entry is the result with stale set. With no upstreams configured the result is -ENOTCONN.
 */
int ndc_forwarder_resolve(struct ndc_forwarder *f, const uint8_t *lname, size_t nlen,
			  uint16_t qtype, uint16_t qclass, ndc_fwd_done_fn done, void *arg);

/* Stops the thread; pending callbacks are called with -ECANCELED first. */
void ndc_forwarder_free(struct ndc_forwarder *f);

/* One upstream, in configured order. Counters only grow; healthy and backoff_ms are gauges. */
struct ndc_fwd_upstream_stats {
	char name[64];	     /* "192.0.2.10:53", "[2001:db8::53]:53": for a metric label */
	bool healthy;	     /* not down: tried in its turn */
	uint32_t backoff_ms; /* while down: the current backoff (1000..30000); 0 when healthy */
	uint64_t queries;    /* attempts sent (UDP and TCP, probes included) */
	uint64_t responses;  /* responses accepted from it (any rcode: it is alive) */
	uint64_t timeouts;   /* attempts that timed out */
	uint64_t errors;     /* other failed attempts (refused, unreachable, bad answer) */
	uint64_t probes;     /* attempts sent while it was down, to learn whether it is back */
	uint64_t skipped;    /* requests that went past it because it was down */
};

/*
 * queries = attempts sent, coalesced = resolves that joined a request in flight, responses =
 * answers accepted, timeouts = attempts timed out, tcp_retries = TC retries over TCP, errors =
 * other failed attempts, stale_served = failed requests answered with a stale cache entry,
 * rejected = resolves refused with -EBUSY (max_pending or max_inflight reached); pending (gauge)
 * = resolves waiting for their callback now.
 */
struct ndc_forwarder_stats {
	uint64_t queries, coalesced, responses, timeouts, tcp_retries, errors, stale_served;
	uint64_t rejected, pending;
	size_t n_upstreams;
	struct ndc_fwd_upstream_stats upstream[NDC_FWD_MAX_UPSTREAMS];
};
void ndc_forwarder_stats(struct ndc_forwarder *f, struct ndc_forwarder_stats *ret);

#endif
