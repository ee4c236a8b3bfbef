/* SPDX-License-Identifier: MIT */
/*
 * Forwards misses to the upstream list and caches what comes back. One thread with its own epoll
 * loop; ndc_forwarder_resolve may be called from any thread. Each upstream query uses a random ID
 * and a fresh socket (random source port); the response must come from the upstream's address,
 * carry our ID and our question. TC means retry over TCP; a timeout moves to the next upstream.
 * Identical concurrent misses (same lname, qtype, qclass) share one upstream query.
 */
#ifndef NDC_FORWARDER_H
#define NDC_FORWARDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <ndc/dns_wire.h>

#include "query/query.h"

struct ndc_forwarder;

struct ndc_forwarder_opts {
	size_t n_upstreams;
	const struct sockaddr_storage *upstreams;
	uint32_t timeout_ms;   /* per attempt */
	uint32_t max_inflight; /* distinct upstream queries at once; more: fail with -EBUSY */
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

struct ndc_forwarder_stats {
	uint64_t queries, coalesced, responses, timeouts, tcp_retries, errors, stale_served;
};
void ndc_forwarder_stats(struct ndc_forwarder *f, struct ndc_forwarder_stats *ret);

#endif
