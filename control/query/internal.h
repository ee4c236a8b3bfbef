/* SPDX-License-Identifier: MIT */
/*
 * Private to control/query: the forwarder's route table (routes.c), which forwarder.c builds,
 * matches names against and compares (plain data, immutable once built, shared by reference
 * count between the thread that reconfigures the forwarder and the forwarder thread); and the
 * query log's lines (querylog.c), which resolver.c writes; the question hash the cache and the
 * forwarder both key on; the forwarder's insides, shared by its modules. Those call one way,
 * bottom to top: attempt.c and upstream.c, tcp_pool.c, transport.c, loopcheck.c, forwarder.c;
 * the flow's steps a lower module needs are reached through f->ops (struct fwd_ops), which
 * forwarder.c fills in.
 */
#ifndef NDC_QUERY_INTERNAL_H
#define NDC_QUERY_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <ndc/dns_wire.h>

#include "query/query.h"

/*
 * The hash of a question (lowercase name, type, class) that the cache and the forwarder's
 * in-flight table both key on: FNV-1a, then a final mix so that both the low (bucket) and high
 * (shard) bits are good.
 */
static inline uint64_t ndc_query_key_hash(const uint8_t *lname, size_t nlen, uint16_t qtype,
					  uint16_t qclass)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < nlen; i++)
		h = (h ^ lname[i]) * 0x100000001b3ULL;
	h = (h ^ qtype) * 0x100000001b3ULL;
	h = (h ^ qclass) * 0x100000001b3ULL;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	return h;
}

/* One zone and where its names go: srv[] are indexes into the table's servers. */
struct ndc_route {
	uint8_t zone[NDC_NAME_MAX]; /* lowercase wire; the root ("\0") for the default route */
	uint8_t zlen;
	uint8_t n_up;
	uint8_t srv[NDC_FWD_MAX_UPSTREAMS];
};

struct ndc_routes {
	atomic_uint refs;
	size_t n_routes; /* longest zone first; the default route (the root) is always last */
	struct ndc_route *routes;
	size_t n_servers; /* distinct addresses of every route, in order of first appearance */
	struct sockaddr_storage servers[NDC_FWD_MAX_SERVERS];
};

/*
 * Builds the table of opts (upstreams: the default route; routes: the zones), one reference
 * held. -EINVAL: a zone that is not a name, the same zone twice, an address that is not IPv4 or
 * IPv6; -E2BIG: more than NDC_FWD_MAX_UPSTREAMS servers in a route, NDC_FWD_MAX_ROUTES routes
 * or NDC_FWD_MAX_SERVERS distinct servers; -ENOMEM.
 */
int ndc_routes_new(const struct ndc_forwarder_opts *opts, struct ndc_routes **ret);

/* Takes a reference / drops one (the last frees). NULL is fine for both. */
struct ndc_routes *ndc_routes_ref(struct ndc_routes *t);
void ndc_routes_unref(struct ndc_routes *t);

/* The route of a lowercase wire name: the longest zone it is in, else the default. */
const struct ndc_route *ndc_routes_match(const struct ndc_routes *t, const uint8_t *lname,
					 size_t nlen);

/* Whether two routes (of tables a and b) send to the same servers in the same order. */
bool ndc_routes_same(const struct ndc_routes *a, const struct ndc_route *ra,
		     const struct ndc_routes *b, const struct ndc_route *rb);

/* "192.0.2.10:53" or "[2001:db8::53]:53", for logs and metric labels. */
void ndc_routes_addr_name(const struct sockaddr_storage *ss, char *buf, size_t len);

/* ---- query logging (querylog.c), for the resolver ---- */

/* A sampled query: what its line needs besides the query and the reply. */
struct ndc_qlog {
	bool on;
	bool tcp;
	uint16_t size; /* of the query */
	uint64_t t0_us;
	struct sockaddr_storage peer;
};

/* Whether this query is one of ppm per million (a thread-local generator, no lock). */
bool ndc_qlog_sampled(uint32_t ppm);

/* Starts lg for a query of len bytes: the time, the transport, the client (peer NULL: unknown). */
void ndc_qlog_begin(struct ndc_qlog *lg, bool tcp, const struct sockaddr_storage *peer, size_t len);

/* The line, for a reply of rlen bytes (0: none was sent) that source gave. */
void ndc_qlog_end(const struct ndc_qlog *lg, const struct ndc_query *q, const uint8_t *reply,
		  size_t rlen, const char *source);

/* ---- the forwarder's insides (forwarder.c and the modules under it) ---- */
/*
 * A request is one upstream query in flight for a key, with the client queries (waiters) that
 * wait on it; forwarder.c runs its flow (which upstream next, the cache, the waiters), upstream.c
 * keeps each upstream's health, transport.c and tcp_pool.c carry one attempt on the wire,
 * loopcheck.c looks for forwarding loops.
 */
#include <pthread.h>

#define NDC_FWD_TIMEOUT_MS 1000
#define NDC_FWD_QUERY_MAX (NDC_DNS_HDR_LEN + NDC_NAME_MAX + 4 + 11 + 64)

/* Pooled TCP (tcp_pool.c): connections per upstream, the outstanding queries each may carry
 * before another is opened, and how long one may stay idle (RFC 7766 6.2.2, 6.2.3). */
#define NDC_FWD_TCP_CONNS 2
#define NDC_FWD_TCP_PIPELINE 64
#define NDC_FWD_TCP_IDLE_MS 5000
#define NDC_FWD_TCP_BACKOFF_MIN_MS 100
#define NDC_FWD_TCP_BACKOFF_MAX_MS 5000
#define NDC_FWD_CONN_BUCKETS 64 /* a connection's outstanding queries, by ID */
/* Bytes queued on one connection that the kernel has not taken (a peer that stops reading):
 * a few hundred queries; beyond it a query goes elsewhere. */
#define NDC_FWD_TCP_QUEUE_MAX 65536

enum att_state { ATT_NONE, ATT_UDP, ATT_TCP };

/* What an epoll event's data.ptr points at (the eventfd's is NULL): the first member of each. */
enum fwd_io { FWD_IO_REQ = 1, FWD_IO_CONN };

struct fwd_conn;

struct fwd_waiter {
	struct fwd_waiter *next;
	ndc_fwd_done_fn done;
	void *arg;
};

struct fwd_set;

struct request {
	enum fwd_io io;		       /* FWD_IO_REQ */
	struct request *hnext;	       /* in-flight table, under f->lock */
	struct request *qnext;	       /* submit queue, under f->lock */
	struct request *tprev, *tnext; /* timer list: every started request, thread only */
	uint64_t hash;
	struct fwd_waiter *waiters, **wtail; /* under f->lock */
	uint16_t qtype, qclass;
	uint8_t nlen;
	uint8_t lname[NDC_NAME_MAX];
	uint8_t qname[NDC_NAME_MAX]; /* lname with 0x20 random case while caps */
	bool caps;
	bool shadow;	   /* a probe's copy of a request: no waiters, not in the table */
	uint32_t nwaiters; /* under f->lock */
	/* Its route, taken when the thread starts it (thread only). */
	struct fwd_set *rs;
	const struct ndc_route *rt;
	/* The current attempt (thread only). */
	uint8_t order[NDC_FWD_MAX_UPSTREAMS]; /* rt's upstreams in the order the policy gave */
	uint32_t tried; /* bit per upstream of rt attempted (or, for a shadow, not to attempt) */
	bool probe;	/* this attempt is its upstream's probe (u->probing) */
	size_t up;	/* index in rt */
	int fd;
	enum att_state st;
	uint16_t id;
	int last_err;
	uint64_t deadline;
	/* ATT_TCP: the pooled connection it waits on, in its table by ID. */
	struct fwd_conn *conn;
	struct request *cnext;
	bool resent; /* moved once already from a connection that died */
	/* A loop check (loopcheck.c): its own one-upstream route; whether anything came back. */
	struct ndc_route *own_rt;
	bool loop_answered;
	bool tcp; /* this attempt goes over TCP (forward.protocol, TC, a UDP timeout) */
};

/* An upstream's TCP connections (tcp_pool.c), thread only. */
struct fwd_pool {
	struct fwd_conn *conns; /* open or opening */
	unsigned n;
	unsigned fails;	     /* connections in a row that died before any answer */
	uint32_t backoff_ms; /* after two of them: no new one before retry_ms */
	uint64_t retry_ms;
	int last_err;
};

struct upstream {
	struct ndc_forwarder *f;
	struct sockaddr_storage addr;
	char name[64];
	unsigned refs; /* sets using it, thread only */
	/* Health, thread only. */
	bool down;
	bool probing; /* a probe is in flight */
	uint32_t backoff_ms;
	uint64_t retry_ms; /* while down: probe again from then on */
	struct fwd_pool pool;
	/* Loop detection (loopcheck.c): the check out (0: none), set by the thread; whether its
	 * name came back to a listener, set by any thread; looping, thread only, published. */
	_Atomic uint64_t loop_token;
	_Atomic bool loop_seen;
	bool looping, st_looping;
	/* Published for stats. */
	bool st_healthy;
	uint32_t st_backoff_ms;
	uint32_t tcp_open; /* connections open now */
	uint64_t queries, responses, timeouts, errors, probes, skipped;
	uint64_t tcp_queries, tcp_conns, tcp_resent;
	uint64_t bad_answers, tcp_stalled, tcp_queue_full;
};

/* The upstreams of a route table: up[i] is the state of routes->servers[i]. */
struct fwd_set {
	unsigned refs; /* thread only: the set in use, and every started request holding it */
	struct ndc_routes *routes;
	struct upstream *up[NDC_FWD_MAX_SERVERS];
	uint32_t timeout_ms;
	enum ndc_fwd_protocol protocol;
	uint32_t tcp_idle_ms;
	enum ndc_fwd_policy policy;
	uint32_t *rr; /* round_robin: per route, the next first upstream (thread only) */
};

/*
 * The request's flow, for the modules under forwarder.c: filled in by forwarder.c (f->ops), so
 * that what an attempt's outcome starts (the cache, the waiters, the next upstream) stays there
 * and calls run one way. Thread only, like everything they touch.
 */
struct fwd_ops {
	/* r's attempt got answer a (parsed, r's question): cached and given to the waiters. */
	void (*accept_answer)(struct ndc_forwarder *f, struct request *r, struct ndc_answer *a);
	/* r's attempt failed with err: the next upstream, or the end of r. */
	void (*attempt_fail)(struct ndc_forwarder *f, struct request *r, int err);
	/* Sends a loop check (name lname) to upstream k of the set in use, as a request of its
	 * own: 0 or -errno. */
	int (*send_check)(struct ndc_forwarder *f, size_t k, const uint8_t *lname, size_t nlen);
	/* u is in no set any more and about to be freed: its TCP connections close. */
	void (*upstream_gone)(struct upstream *u);
};

struct ndc_forwarder {
	const struct fwd_ops *ops;	/* set before anything else, never changed */
	uint32_t timeout_ms;		/* thread only, from the set in use */
	enum ndc_fwd_protocol protocol; /* thread only, from the set in use */
	uint32_t max_inflight;
	uint32_t max_pending; /* under lock */
	struct ndc_cache *cache;
	ndc_fwd_tap_fn tap; /* dnstap's FORWARDER_*: set before use (ndc_forwarder_set_tap) */
	void *tap_arg;

	pthread_mutex_t lock;
	struct request **table;
	uint32_t nbuckets;
	uint32_t inflight;
	uint32_t pending; /* waiters of every request; written under lock, read atomically */
	struct request *queue, **qtail;
	bool stop;
	bool any_up;		  /* some route has an upstream; under lock (resolve reads it) */
	struct fwd_set *next;	  /* handed to the thread by reconfigure, under lock */
	pthread_cond_t next_cond; /* the thread took next */

	/* The set in use: replaced by the thread under stats_lock, read by stats under it. */
	pthread_mutex_t stats_lock;
	struct fwd_set *cur;

	/* Reconfiguration side: one at a time; the routes last given, for the cache to compare. */
	pthread_mutex_t reconf_lock;
	struct ndc_routes *last;

	/* Thread only. */
	pthread_t thread;
	bool started;
	int epfd, evfd;
	struct request timers;	 /* sentinel */
	uint8_t *msg;		 /* receive buffer, NDC_MSG_MAX */
	struct ndc_answer *ans;	 /* NDC_MSG_MAX bytes of data */
	struct fwd_conn *closed; /* closed during an event batch: freed after it */
	_Atomic bool loop_req;	 /* ndc_forwarder_loop_check asked: checks to start */
	_Atomic bool loop_hit;	 /* a check's name came back: upstreams to mark */
	_Atomic bool loop_armed; /* checks run (after reconfigurations too) */
	uint64_t loop_next;	 /* while an upstream loops: check it again from then on */
	uint64_t next_sweep;	 /* idle TCP connections: closed from then on */
	uint32_t tcp_idle_ms;

	struct ndc_forwarder_stats stats; /* updated atomically */
};

#define STAT_INC(f, field) __atomic_fetch_add(&(f)->stats.field, 1, __ATOMIC_RELAXED)
#define UP_INC(u, field) __atomic_fetch_add(&(u)->field, 1, __ATOMIC_RELAXED)

/* Upstream i of r's route. */
static inline struct upstream *up_of(const struct request *r, size_t i)
{
	return r->rs->up[r->rt->srv[i]];
}

/* ---- what every attempt shares, UDP or TCP (attempt.c) ---- */

/* Sets r's deadline, now + f->timeout_ms, in the sorted timer list / takes it out. */
void ndc_fwd_timer_append(struct ndc_forwarder *f, struct request *r);
void ndc_fwd_timer_unlink(struct request *r);

/* A new ID and 0x20 case for r's next attempt: 0 or -errno. */
int ndc_fwd_attempt_prepare(struct request *r);

enum fwd_qmatch { Q_NO, Q_CASE, Q_YES };

/* Is msg a response to r's question? Q_CASE: yes, but the 0x20 case was not echoed. */
enum fwd_qmatch ndc_fwd_question_match(const struct request *r, const uint8_t *msg, size_t len);

/* Address length for connect(). */
socklen_t ndc_fwd_addr_len(const struct sockaddr_storage *ss);

/* ---- upstream sets and health (upstream.c) ---- */

/* A set over routes (taking the caller's reference), with fresh upstreams of refs 1. */
int ndc_fwd_set_new(struct ndc_forwarder *f, struct ndc_routes *routes,
		    const struct ndc_forwarder_opts *opts, struct fwd_set **ret);
struct fwd_set *ndc_fwd_set_hold(struct fwd_set *s);
void ndc_fwd_set_drop(struct fwd_set *s);

/*
 * Thread: makes s the set in use. Its upstreams with an address of the set before are replaced
 * by those, whose health and counters go on.
 */
void ndc_fwd_set_install(struct ndc_forwarder *f, struct fwd_set *s);

/* The order in which a request tries rt's upstreams (rt of s), as s's policy says. */
void ndc_fwd_policy_order(struct fwd_set *s, const struct ndc_route *rt,
			  uint8_t order[NDC_FWD_MAX_UPSTREAMS]);

/* r's upstream answered (any rcode, or TC): it is up. */
void ndc_fwd_up_alive(struct ndc_forwarder *f, struct request *r);

/* r's attempt on its upstream failed with err. */
void ndc_fwd_up_failed(struct ndc_forwarder *f, struct request *r, int err);

/*
 * r's upstream answered r's attempt (its ID, from its address or on its connection) with
 * something useless (no question, not parseable: err): counted, and the attempt fails now with
 * err, which is not the upstream's fault.
 */
void ndc_fwd_bad_answer(struct ndc_forwarder *f, struct request *r, int err);

/* ---- pooled TCP (tcp_pool.c) ---- */

/*
 * Sends r's query over one of its upstream's pooled connections (opening one if none has room),
 * pipelined behind the others; its answer is matched by ID. Sets r's timer. 0, or -errno (the
 * pool in backoff after a connection failed: the error that failed it).
 */
int ndc_fwd_tcp_start(struct ndc_forwarder *f, struct request *r);

/* Takes r off its connection (its answer, if it comes, is ignored). */
void ndc_fwd_tcp_detach(struct request *r);

/* An epoll event on connection c (data.ptr). */
void ndc_fwd_tcp_event(struct ndc_forwarder *f, struct fwd_conn *c, uint32_t events);

/* Closes the connections idle for tcp_idle_ms and frees those closed during the last event
 * batch. Returns when it wants to run next (0: no connection open). */
uint64_t ndc_fwd_tcp_sweep(struct ndc_forwarder *f, uint64_t now);

/* Closes every connection of u (no request may be on them any more); freed by the next sweep.
 * forwarder.c's f->ops->upstream_gone. */
void ndc_fwd_tcp_close_all(struct upstream *u);

/* Frees what the sweeps have not: at the forwarder's end. */
void ndc_fwd_tcp_reap(struct ndc_forwarder *f);

/* ---- one attempt on the wire (transport.c) ---- */

/* Starts r's attempt over UDP on upstream r->up (its timer set): 0, or -errno. */
int ndc_fwd_udp_start(struct ndc_forwarder *f, struct request *r);

/* Ends r's attempt: its socket closed, its timer off. */
void ndc_fwd_attempt_end(struct request *r);

/* Events on the socket of r's UDP attempt. */
void ndc_fwd_on_udp(struct ndc_forwarder *f, struct request *r);

/* ---- loop detection (loopcheck.c) ---- */

#define NDC_FWD_LOOP_RECHECK_MS 30000
#define NDC_FWD_LOOP_QTYPE 13 /* HINFO, as CoreDNS's loop plugin: nobody caches it */

/* Thread: sends a check to every upstream of the set in use (only_looping: those marked looping)
 * that has none out. */
void ndc_fwd_loop_start(struct ndc_forwarder *f, bool only_looping);

/* Thread: marks the upstreams whose check came back (f->loop_req was set). */
void ndc_fwd_loop_scan(struct ndc_forwarder *f);

/* Thread: check r ended (its callback time): the verdict for its upstream. */
void ndc_fwd_loop_done(struct ndc_forwarder *f, struct request *r);

#endif
