/* SPDX-License-Identifier: MIT */
/*
 * The query path behind the socket server: the resolver answers the cluster zone from the record
 * table, repeat queries from the cache, and hands the rest to the forwarder, which asks upstream
 * and fills the cache. One record model serves every reader. It knows nothing of the server that
 * hands it queries: what it needs of one comes through struct ndc_query_io, which the agent wires.
 */
#ifndef NDC_QUERY_H
#define NDC_QUERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>

#include <ndc/dns_wire.h>
#include <ndc/query_handler.h>

#include "records/records.h"

/* ---- cache: cache.c ----------------------------------------------------------------------------
 */

/*
 * Cache of upstream answers, positive and negative (RFC 2308), bounded in entries and bytes with
 * LRU eviction, expired entries kept for serve-stale (RFC 8767) until stale_max. Thread-safe:
 * sharded, each shard under its own short mutex; no allocation on a hit.
 */
struct ndc_cache;

struct ndc_cache_opts {
	uint32_t max_entries;
	uint64_t max_bytes; /* bytes of entries (key + answer + bookkeeping) */
	uint32_t max_ttl;   /* longer TTLs are capped */
	uint32_t neg_max_ttl;
	uint32_t stale_max; /* seconds past expiry an entry may still be served stale */
};

struct ndc_cache_stats {
	uint64_t hits, misses, stale_hits, inserts, evictions;
	uint64_t entries, bytes;
	/*
	 * The longest a lookup or insert waited for a shard's lock, and the longest an insert held
	 * it (the cache hook runs inside), since the start: microseconds (issue 34).
	 */
	uint64_t lock_wait_max_us, lock_hold_max_us;
	uint64_t lock_contended; /* acquisitions that found the lock taken */
};

int ndc_cache_new(const struct ndc_cache_opts *opts, struct ndc_cache **ret);
void ndc_cache_free(struct ndc_cache *c);

/*
 * Caps the TTLs of a, an answer to a question of type qtype, as ndc_cache_put would store them:
 * for the reply that goes out before the cache serves it. 0 or -EINVAL (data that does not walk).
 */
int ndc_cache_cap_ttls(const struct ndc_cache *c, struct ndc_answer *a, uint16_t qtype);

/*
 * Stores a for (lname, qtype, qclass) for ttl seconds from now_ms (0: not stored, returns 0),
 * replacing any entry for the key. ttl, and the TTL of every RR the entry serves, are capped at
 * max_ttl (neg_max_ttl for a negative answer: NXDOMAIN, NODATA, a NODATA behind a CNAME chain;
 * ndc_answer_cache_ttl). -EINVAL for a reserved or meta qtype (abi.h ndc_qtype_verdict: never
 * filed) or answer data that does not walk, -ENOMEM, -E2BIG if the entry alone is bigger than
 * max_bytes.
 */
int ndc_cache_put(struct ndc_cache *c, const uint8_t *lname, size_t nlen, uint16_t qtype,
		  uint16_t qclass, const struct ndc_answer *a, uint32_t ttl, uint64_t now_ms);

/*
 * Looks up the key. Returns 0 for a fresh entry, copied into out (cap bytes of data), with
 * *ret_age the whole seconds since it was stored (subtract it from every TTL). With allow_stale,
 * an entry expired less than stale_max ago is returned as -ESTALE (copied the same way). Else
 * -ENOENT; -ENOSPC if out is too small.
 */
int ndc_cache_get(struct ndc_cache *c, const uint8_t *lname, size_t nlen, uint16_t qtype,
		  uint16_t qclass, uint64_t now_ms, bool allow_stale, struct ndc_answer *out,
		  size_t cap, uint32_t *ret_age);

void ndc_cache_stats(struct ndc_cache *c, struct ndc_cache_stats *ret);

/*
 * New limits while the cache is in use (max_entries, max_bytes, the TTL caps, stale_max): what
 * is over the new size is evicted at once, least recently used first (the hook is told). The
 * shard layout stays the one made for the first limits, and each shard keeps room for 64 entries
 * and the largest entry: a cache made much smaller than it started may hold a little more than
 * asked, until a restart. Entries already stored keep their expiry.
 * -EINVAL for zero max_entries or max_bytes.
 */
int ndc_cache_set_limits(struct ndc_cache *c, const struct ndc_cache_opts *opts);

/* Removes every entry whose name match() says (the hook is told); returns how many. match runs
 * under a shard's lock: it must not call into the cache. */
size_t ndc_cache_drop(struct ndc_cache *c,
		      bool (*match)(void *arg, const uint8_t *lname, size_t nlen), void *arg);

/*
 * Told of every change, under the shard's lock (keep it short, never call back into the cache):
 * a stored with ttl seconds to live, or a NULL when the key left the cache (evicted, or dead past
 * stale_max). A replaced entry is reported as the new put only. For the fast-path publisher.
 */
typedef void (*ndc_cache_hook_fn)(void *arg, const struct ndc_answer *a, const uint8_t *lname,
				  size_t nlen, uint16_t qtype, uint16_t qclass, uint32_t ttl);

/* Sets the hook; call before the cache is used by other threads. */
void ndc_cache_set_hook(struct ndc_cache *c, ndc_cache_hook_fn fn, void *arg);

/*
 * Prefetch points, for prefetch.c. With before_pct set (1..99; 0: off), every answer stored from
 * then on gets a prefetch point: before_pct of its TTL before expiry, rounded up to whole
 * seconds, but not before half its TTL has gone. Entries stored before keep theirs.
 */
void ndc_cache_set_prefetch(struct ndc_cache *c, uint32_t before_pct);

/* An entry at its prefetch point: its key, its fresh hits so far, and which put made it. */
struct ndc_cache_due {
	uint8_t lname[NDC_NAME_MAX];
	uint8_t nlen;
	uint16_t qtype, qclass;
	uint32_t hits; /* fresh hits from ndc_cache_get since the entry was stored */
	uint64_t gen;
	uint64_t expire_ms;
};

/*
 * Takes up to max entries whose prefetch point is at or before now_ms and that have not expired,
 * earliest first within a shard; each entry is given once in its life. Returns how many.
 */
size_t ndc_cache_due(struct ndc_cache *c, uint64_t now_ms, struct ndc_cache_due *out, size_t max);

/* The gen of the key's entry now (a different one than a due entry's: it was replaced since);
 * -ENOENT if there is none. */
int ndc_cache_gen(struct ndc_cache *c, const uint8_t *lname, size_t nlen, uint16_t qtype,
		  uint16_t qclass, uint64_t *ret_gen);

/* Monotonic milliseconds, the clock every now_ms argument uses. */
uint64_t ndc_now_ms(void);

/* ---- forwarder: forwarder.c --------------------------------------------------------------------
 */

/*
 * Forwards misses to the upstream list and caches what comes back. One thread with its own epoll
 * loop; ndc_forwarder_resolve may be called from any thread. Each upstream query uses a random ID;
 * over UDP a fresh socket (random source port), over TCP a pooled connection (forward.protocol,
 * below); the response must come from the upstream's address, carry our ID and our question. TC
 * means retry over TCP; a timeout moves to the next upstream.
 * Identical concurrent misses (same lname, qtype, qclass) share one upstream query.
 *
 * Upstream health: an upstream that times out (or refuses, or is unreachable) is down, and skipped
 * while another is up, for a backoff of 1 s doubling up to 30 s; when the backoff is over one
 * query is also sent to it as a probe, and any answer brings it back. No client waits on a dead
 * upstream it already knows is dead, except when all are down: then each request still makes
 * one attempt (an upstream may be back), so a never-seen name gets its SERVFAIL within one
 * timeout_ms; a name with a cached (even expired) answer gets that at once (RFC 8767 5).
 */
struct ndc_forwarder;

#define NDC_FWD_MAX_UPSTREAMS 8	  /* per route */
#define NDC_FWD_MAX_ROUTES 256	  /* zones with upstreams of their own (stub domains) */
#define NDC_FWD_MAX_SERVERS 32	  /* distinct upstream addresses over every route */
#define NDC_FWD_PENDING_MAX 10000 /* max_pending 0 */

/*
 * Names under zone (at a label boundary, the longest zone winning) go to these upstreams
 * instead of the default ones: stub domains. Each route is a list of its own, tried in order as
 * above; an upstream in several routes (same address and port) is one upstream, with one health.
 */
struct ndc_forwarder_route {
	const char *zone;   /* text, case-insensitive, trailing dot optional; not the root */
	size_t n_upstreams; /* 1..NDC_FWD_MAX_UPSTREAMS */
	const struct sockaddr_storage *upstreams;
};

/*
 * forward.protocol. udp: UDP, a truncated answer (TC) asked again over TCP of the same upstream.
 * tcp: TCP only (NodeLocal DNSCache's force_tcp: no UDP conntrack entries to race). prefer_udp:
 * UDP, and TCP to the same upstream both for a truncated answer and for a UDP attempt that
 * timed out (a datagram lost on the way, as conntrack races lose them), before the next upstream.
 * TCP is pooled: at most NDC_FWD_TCP_CONNS connections per upstream, queries pipelined on them
 * and answers matched by ID in any order (RFC 7766 6.2.1.1), closed when idle for tcp_idle_ms;
 * the queries of a connection that dies are sent again, once, on another; after a connection
 * that failed (refused, reset before any answer) no new one is opened for a backoff of 100 ms
 * doubling to 5 s, and attempts meanwhile fail at once with its error.
 */
enum ndc_fwd_protocol { NDC_FWD_UDP = 0, NDC_FWD_TCP, NDC_FWD_PREFER_UDP };

/*
 * forward.policy: which upstream of a route a request tries first. sequential: the configured
 * order (a primary and fallbacks); round_robin: each request starts one further along the
 * route's list; random: each request tries them in an order of its own. Every request still
 * tries each upstream at most once, in that order, and down ones are skipped as described above.
 */
enum ndc_fwd_policy { NDC_FWD_SEQUENTIAL = 0, NDC_FWD_RANDOM, NDC_FWD_ROUND_ROBIN };

struct ndc_forwarder_opts {
	size_t n_upstreams; /* the default route: at most NDC_FWD_MAX_UPSTREAMS (-E2BIG) */
	const struct sockaddr_storage *upstreams;
	size_t n_routes; /* at most NDC_FWD_MAX_ROUTES, distinct zones (-EINVAL) */
	const struct ndc_forwarder_route *routes;
	uint32_t timeout_ms;   /* per attempt */
	uint32_t max_inflight; /* distinct upstream queries at once; more: fail with -EBUSY */
	/* Resolves waiting for their callback (coalesced ones included): each is a client query
	 * held in memory. More: fail with -EBUSY. 0: NDC_FWD_PENDING_MAX. */
	uint32_t max_pending;
	enum ndc_fwd_protocol protocol;
	enum ndc_fwd_policy policy;
	uint32_t tcp_idle_ms; /* pooled TCP connections idle this long are closed; 0: 5000 */
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

/*
 * Replaces the upstreams and routes, timeout_ms, max_pending, protocol, policy and tcp_idle_ms
 * (max_inflight stays) while queries go on: it returns once the forwarder thread uses the new
 * ones (requests not started yet included). Requests in flight finish on the upstreams they started
 * with, and their answers are given to their clients but not cached. An upstream kept (same address
 * and port) keeps its health and counters. Cached answers of every name whose route changed (other
 * upstreams, or the same in another order) are dropped, so the next query asks the new upstreams;
 * the cache hook is told. Returns 0, or the error of ndc_forwarder_new's checks (nothing changed
 * then).
 */
int ndc_forwarder_reconfigure(struct ndc_forwarder *f, const struct ndc_forwarder_opts *opts);

/* What ndc_forwarder_new and ndc_forwarder_reconfigure would say of opts, changing nothing. */
int ndc_forwarder_check(const struct ndc_forwarder_opts *opts);

/*
 * Loop detection. Each upstream is sent a query of its own, HINFO of "<16 random hex
 * digits>.ndcache-loop.invalid" (a name under a zone no one else answers: RFC 6761 6.4; outside
 * the cluster domain, so that the kernel's fast path, which answers NXDOMAIN for unknown cluster
 * names, passes it to the sockets), and the resolver tells the forwarder of every query under
 * that zone that reaches a listener (ndc_forwarder_loop_name). The one that comes back names
 * the upstream that forwarded it to us: that upstream is taken out of use (never picked, never
 * probed as a down one is), logged once as an error and counted (stats: looping). Requests of a
 * route whose upstreams all loop fail at once with -ELOOP (a cached answer, stale or not, is
 * still given). Checks run when ndc_forwarder_loop_check is called, after every reconfiguration
 * from then on, and every 30 s for an upstream marked looping: an answer to its check that did
 * not come back around puts it in use again.
 *
 * While a check is out, client queries forwarded to a looping upstream come back as well: each
 * is the same name and type as the request that sent it, so it joins that request (coalescing)
 * instead of going upstream again; one query per client query goes around, once, until the
 * request times out. There is no storm to wait out, and the check itself is answered REFUSED.
 */
#define NDC_FWD_LOOP_ZONE "ndcache-loop.invalid"

/* Starts loop checks of every upstream in use: once the listeners are up. Any thread. */
void ndc_forwarder_loop_check(struct ndc_forwarder *f);

/*
 * Whether lname (a query that reached a listener, lowercase wire) is under NDC_FWD_LOOP_ZONE;
 * if it is a check's name, its upstream loops. The caller answers it itself (REFUSED), never
 * forwards it. Any thread.
 */
bool ndc_forwarder_loop_name(struct ndc_forwarder *f, const uint8_t *lname, size_t nlen);

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

	/* Pooled TCP: of queries, those sent over TCP; connections opened (connect() called);
	 * queries sent again after their connection died; connections open now (a gauge). */
	uint64_t tcp_queries, tcp_conns, tcp_resent;
	uint32_t tcp_open;
	/* Answers to our ID that could not be used (no question, not parseable), each failing
	 * its attempt at once; TCP connections closed for answering nothing for timeout_ms with a
	 * query sent; queries that found every TCP connection's queue full (went elsewhere). */
	uint64_t bad_answers, tcp_stalled, tcp_queue_full;
	bool looping; /* out of use: queries sent to it came back to ndcache (loop detection) */
};

/*
 * queries = attempts sent, coalesced = resolves that joined a request in flight, responses =
 * answers accepted, timeouts = attempts timed out, tcp_retries = TC retries over TCP,
 * tcp_fallbacks = UDP timeouts asked again over TCP (prefer_udp), errors =
 * other failed attempts, stale_served = failed requests answered with a stale cache entry,
 * rejected = resolves refused with -EBUSY (max_pending or max_inflight reached); pending (gauge)
 * = resolves waiting for their callback now.
 */
struct ndc_forwarder_stats {
	uint64_t queries, coalesced, responses, timeouts, tcp_retries, tcp_fallbacks, errors;
	uint64_t stale_served;
	uint64_t rejected, pending;
	size_t n_upstreams; /* distinct upstreams of the routes in use, default route first */
	bool all_looping;   /* the default route has upstreams, and every one of them loops */
	struct ndc_fwd_upstream_stats upstream[NDC_FWD_MAX_SERVERS];
};
void ndc_forwarder_stats(struct ndc_forwarder *f, struct ndc_forwarder_stats *ret);

/* ---- prefetch: prefetch.c ----------------------------------------------------------------------
 */

/*
 * Refreshes hot cache entries before they expire (cache.prefetch, as CoreDNS's cache prefetch):
 * an entry asked at least min_hits times by the time before_pct of its TTL is left (see
 * ndc_cache_set_prefetch) is asked upstream again in the background, through the forwarder, whose
 * answer replaces it. Until then clients get the old entry, its TTL counting down from the
 * upstream's answer: a prefetch in flight never raises it.
 *
 * Hits are the cache's own (socket path) plus, through the kernel_hits hook, those the fast path
 * answered, which user space never sees. One thread looks at due entries every
 * NDC_PREFETCH_TICK_MS, each entry once. Bounded: at most max_inflight prefetches at once; after
 * one fails (the upstream did not refresh the entry), none for 1 s doubling to 30 s, then one at a
 * time until one succeeds, so a failing upstream gets no storm.
 */
struct ndc_prefetch;

#define NDC_PREFETCH_TICK_MS 100
#define NDC_PREFETCH_INFLIGHT 128 /* max_inflight 0 */

struct ndc_prefetch_opts {
	uint32_t min_hits;     /* 1.. (0 is taken as 1) */
	uint32_t before_pct;   /* 1..99; 0: off */
	uint32_t max_inflight; /* 0: NDC_PREFETCH_INFLIGHT */
};

/*
 * Hits the fast path answered for (lname, qtype) of class IN since it was last published: 0 and
 * *ret_hits, -ENOENT (not in the kernel's table), -EOPNOTSUPP (no kernel table). Any thread.
 */
typedef int (*ndc_prefetch_hits_fn)(void *arg, const uint8_t *lname, size_t nlen, uint16_t qtype,
				    uint32_t *ret_hits);

/*
 * Starts the thread. cache and fwd stay the caller's: stop the prefetcher before freeing the
 * forwarder, free it after (the forwarder completes the prefetches in flight). -EINVAL for
 * before_pct >= 100.
 */
int ndc_prefetch_new(const struct ndc_prefetch_opts *opts, struct ndc_cache *cache,
		     struct ndc_forwarder *fwd, struct ndc_prefetch **ret);

/* The kernel's hits; set before entries come due (NULL: the cache's hits only). */
void ndc_prefetch_set_kernel_hits(struct ndc_prefetch *p, ndc_prefetch_hits_fn fn, void *arg);

/* New options (live: entries stored from now on get the new prefetch point). */
int ndc_prefetch_configure(struct ndc_prefetch *p, const struct ndc_prefetch_opts *opts);

/*
 * issued: prefetches sent; refreshed: those whose answer replaced the entry; failed: those that
 * did not (upstream failure, an uncacheable answer); cold: entries that came due asked fewer than
 * min_hits times (left to expire); kernel_hits: hits the kernel hook added; inflight: gauge.
 */
struct ndc_prefetch_stats {
	uint64_t issued, refreshed, failed, cold, kernel_hits;
	uint64_t inflight;
};
void ndc_prefetch_stats(struct ndc_prefetch *p, struct ndc_prefetch_stats *ret);

/* Stops the thread: no prefetch is sent from then on. Idempotent. */
void ndc_prefetch_stop(struct ndc_prefetch *p);

/* Stops, waits for the prefetches in flight (call after ndc_forwarder_free), frees. NULL is fine.
 */
void ndc_prefetch_free(struct ndc_prefetch *p);

/* ---- per-client limit: ratelimit.c -------------------------------------------------------------
 */

/*
 * A fair share of the upstream per client (forward.per_client): a token bucket per source
 * address, qps tokens a second up to burst, one token per query that must go upstream. Only
 * misses are asked: cluster names and cached answers never are. Thread-safe (the table is split
 * into lock stripes), no allocation and no syscall per query.
 *
 * The table of clients is fixed at NDC_RL_CLIENTS (NDC_RL_WAYS ways per set, sets picked by a
 * keyed hash of the address): a new client takes the least recently seen one of its set. A client
 * idle long enough to have refilled its bucket is the same as a new one, so that eviction changes
 * nothing; one evicted while its bucket was still short (more active clients in a set than ways)
 * is counted, and only ever gets more than its share, never less.
 */
struct ndc_ratelimit;

#define NDC_RL_WAYS 8
#define NDC_RL_CLIENTS 8192 /* a node runs at most a few hundred pods (kubelet maxPods 110) */

struct ndc_ratelimit_opts {
	uint32_t qps;	/* tokens a second; 0: no limit */
	uint32_t burst; /* bucket size, >= 1 when qps is set */
};

struct ndc_ratelimit_stats {
	uint64_t allowed, limited; /* queries let through, queries over their client's limit */
	uint64_t evicted_active;   /* clients replaced before their bucket had refilled */
	uint64_t clients;	   /* gauge: addresses in the table (at most NDC_RL_CLIENTS) */
};

/* -EINVAL: qps set and burst 0. */
int ndc_ratelimit_new(const struct ndc_ratelimit_opts *opts, struct ndc_ratelimit **ret);
void ndc_ratelimit_free(struct ndc_ratelimit *rl);

/* New limits, any thread, at any time; buckets already full stay full, others are capped. */
int ndc_ratelimit_configure(struct ndc_ratelimit *rl, const struct ndc_ratelimit_opts *opts);

/*
 * Whether a query from peer may go upstream now (a token is taken). IPv4 and IPv4-mapped IPv6
 * addresses are one client; another family, or none, is always let through. Over the limit, a
 * warning names the client at most once a second, with how many were limited in between.
 */
bool ndc_ratelimit_allow(struct ndc_ratelimit *rl, const struct sockaddr_storage *peer,
			 uint64_t now_ms);

void ndc_ratelimit_stats(struct ndc_ratelimit *rl, struct ndc_ratelimit_stats *ret);

/* ---- resolver: resolver.c ----------------------------------------------------------------------
 */

/*
 * The query path of the socket server: parse, answer the cluster zone from the record table,
 * answer repeat queries from the cache, forward the rest. One record model serves every reader.
 */
struct ndc_resolver;

struct ndc_resolver_stats {
	uint64_t queries, local, cache_hits, forwarded, servfail, errors, dropped;
	uint64_t refused_qtype, refused_qclass; /* reserved/meta QTYPE, AXFR/IXFR; class not IN */
};

/*
 * What the resolver needs of the server that hands it queries (the socket server's
 * ndc_socket_req_is_tcp, ndc_socket_req_peer, ndc_socket_detain and ndc_socket_complete; the
 * agent wires them): whether req came over TCP (its reply may use the full 64 KiB); the client's
 * address (0 or -errno), for the per-client limit and the query log; keeping what is needed to
 * answer req later (NULL when out of memory); the later answer to a detained query, from any
 * thread (len 0: none), which frees it.
 */
struct ndc_query_io {
	bool (*is_tcp)(const struct ndc_socket_req *req);
	int (*peer)(const struct ndc_socket_req *req, struct sockaddr_storage *ret);
	struct ndc_pending *(*detain)(struct ndc_socket_req *req);
	void (*complete)(struct ndc_pending *p, const uint8_t *msg, size_t len);
};

/* records, cache and fwd stay owned by the caller and must outlive the resolver; cache and fwd
 * may be NULL (then every non-local name gets SERVFAIL). io is copied; -EINVAL when it or one of
 * its calls is NULL. */
int ndc_resolver_new(const struct ndc_records *records, struct ndc_cache *cache,
		     struct ndc_forwarder *fwd, const struct ndc_query_io *io,
		     struct ndc_resolver **ret);
void ndc_resolver_free(struct ndc_resolver *r);

/*
 * Misses of a client over its share (forward.per_client) get SERVFAIL at once; cluster names and
 * cached answers are never limited. rl (NULL: no limit) stays the caller's and outlives the
 * resolver; set it before the resolver serves.
 */
void ndc_resolver_set_limiter(struct ndc_resolver *r, struct ndc_ratelimit *rl);

/*
 * Installs a new record table (NULL: none) and returns the old one once no query can still be
 * reading it, for the caller to free. Writers only, one at a time.
 */
const struct ndc_records *ndc_resolver_set_records(struct ndc_resolver *r,
						   const struct ndc_records *rec);

/* The socket server's handler (ndc_socket_handler): ctx is the struct ndc_resolver. */
enum ndc_verdict ndc_resolver_handle(void *ctx, struct ndc_socket_req *req, const uint8_t *msg,
				     size_t len, uint8_t *out, size_t cap, size_t *ret_len);

void ndc_resolver_stats(struct ndc_resolver *r, struct ndc_resolver_stats *ret);

/*
 * Query logging, as CoreDNS's log plugin: sample_ppm per million queries answered here (0: off,
 * the default) get an info line "query" with client, id, type, class, name, proto, size, do,
 * bufsize, rcode, rsize, source (cluster, cache, upstream, error) and duration_us. Any thread, at
 * any time. Queries the kernel answers never reach the resolver and are not logged.
 */
void ndc_resolver_set_query_log(struct ndc_resolver *r, uint32_t sample_ppm);

/*
 * Who asks what (issue 37): told of every query the resolver answers, for per-client counts,
 * the names sketch and dnstap; the agent wires it (control/agent/observe.c), so that the query
 * path knows nothing of pods or dnstap. query: a query arrived from peer (msg its wire, time
 * CLOCK_REALTIME); returns whether this one is sampled (dnstap), which answered is told again.
 * answered: its reply (len 0: none sent), q as parsed (q->qname_len 0: no question),
 * source one of "cluster", "cache", "upstream", "limited", "error". Both run on the thread that
 * answers (a worker, or the forwarder's for answers from upstream): no blocking, no allocation.
 */
struct ndc_query_observer {
	bool (*query)(void *arg, const struct sockaddr_storage *peer, bool tcp, const uint8_t *msg,
		      size_t len, const struct timespec *time);
	void (*answered)(void *arg, const struct sockaddr_storage *peer, bool tcp,
			 const struct ndc_query *q, const char *source, const uint8_t *reply,
			 size_t len, bool sampled, const struct timespec *qtime);
	void *arg;
};

/* Sets the observer (NULL: none), copied; before the resolver serves. */
void ndc_resolver_set_observer(struct ndc_resolver *r, const struct ndc_query_observer *obs);

/*
 * The forwarder's upstream messages as sent and received (dnstap FORWARDER_QUERY and
 * FORWARDER_RESPONSE), over UDP and TCP (msg without TCP's length prefix): response false for a
 * query sent to up, true for the answer accepted from it. Runs on the forwarder thread. Set
 * before the forwarder is used (NULL: none).
 */
typedef void (*ndc_fwd_tap_fn)(void *arg, bool response, bool tcp,
			       const struct sockaddr_storage *up, const uint8_t *msg, size_t len);
void ndc_forwarder_set_tap(struct ndc_forwarder *f, ndc_fwd_tap_fn fn, void *arg);

/* ---- /metrics: metrics.c -------------------------------------------------------------------
 */

/*
 * The query path's sections, each an ndc_metrics_fn (metrics/metrics.h) over its object: the
 * resolver's queries and answers by source; the cache; the forwarder with one set of
 * ndcache_upstream_* samples per upstream in use; ndcache_prefetch_*; forward.per_client's
 * ndcache_per_client_* (ndcache_upstream_limited_total: reason per_client here, max_pending in
 * the forwarder's).
 */
struct ndc_metrics_buf;
void ndc_resolver_metrics(void *resolver, struct ndc_metrics_buf *b);
void ndc_cache_metrics(void *cache, struct ndc_metrics_buf *b);
void ndc_forwarder_metrics(void *fwd, struct ndc_metrics_buf *b);
void ndc_prefetch_metrics(void *prefetch, struct ndc_metrics_buf *b);
void ndc_ratelimit_metrics(void *limiter, struct ndc_metrics_buf *b);

#endif
