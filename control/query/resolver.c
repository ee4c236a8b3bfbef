// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ndc/dns_wire.h>
#include <ndc/log.h>

#include "internal.h"
#include "rcu.h"

struct ndc_resolver {
	/* Swapped by the writer, read under ndc_rcu_read_lock; NULL until the first full sync. */
	const struct ndc_records *_Atomic records;
	struct ndc_cache *cache;
	struct ndc_forwarder *fwd;
	struct ndc_ratelimit *limiter; /* forward.per_client; NULL: none */
	struct ndc_query_io io;	       /* the server's calls on a request */
	struct ndc_query_observer obs; /* obs.answered NULL: none */
	_Atomic uint32_t qlog_ppm;     /* query log sampling; 0: off */
	_Atomic uint64_t queries, local, cache_hits, forwarded, servfail, errors, dropped;
	_Atomic uint64_t refused_qtype, refused_qclass; /* question hygiene (abi.h) */
};

/* A query waiting for the forwarder: what is needed to write its reply later. */
struct waiter {
	struct ndc_resolver *r;
	struct ndc_pending *pending;
	size_t limit;
	struct ndc_query q;
	struct ndc_qlog lg;	      /* lg.on: this query is logged when answered */
	struct sockaddr_storage peer; /* for the observer (ss_family 0: unknown) */
	struct timespec qtime;
	bool tcp, sampled;
};

/* What handle() leaves the observer of a query that goes upstream (NULL: not observed). */
struct observed {
	struct sockaddr_storage peer;
	struct timespec qtime;
	bool tcp, sampled;
};

/*
 * Per-thread scratch for answers: workers and the forwarder thread each get their own, so the
 * query path never allocates. Sized for the largest message (TCP).
 */
struct scratch {
	struct ndc_answer a;
	uint8_t data[NDC_MSG_MAX];
};
static _Thread_local struct scratch scratch;
static _Thread_local uint8_t reply_buf[NDC_MSG_MAX];

#define count(r, field) atomic_fetch_add_explicit(&(r)->field, 1, memory_order_relaxed)

static enum ndc_verdict error_reply(struct ndc_resolver *r, const struct ndc_query *q,
				    uint16_t rcode, uint8_t *out, size_t cap, size_t *ret_len)
{
	if (ndc_dns_write_error(q, rcode, out, cap, ret_len) < 0) {
		count(r, dropped);
		return NDC_DROP;
	}
	return NDC_SEND;
}

static void forward_done(void *arg, const struct ndc_fwd_result *res)
{
	struct waiter *w = arg;
	struct ndc_resolver *r = w->r;
	size_t len = 0;
	int err = -1;

	if (res->status == 0 && res->answer->qname_len == w->q.qname_len) {
		/* RFC 8767 4: every record of a stale answer goes out with TTL 30, whatever its
		 * original or remaining TTL. */
		uint32_t sub = res->stale ? 0 : res->age;
		uint32_t stale = res->stale ? NDC_STALE_TTL : 0;
		err = ndc_dns_write_reply(&w->q, res->answer, sub, stale, w->limit, reply_buf,
					  sizeof(reply_buf), &len);
	}
	if (err < 0) {
		count(r, servfail);
		if (ndc_dns_write_error(&w->q, NDC_RCODE_SERVFAIL, reply_buf, sizeof(reply_buf),
					&len) < 0)
			len = 0;
	}
	if (w->lg.on)
		ndc_qlog_end(&w->lg, &w->q, reply_buf, len, err < 0 ? "error" : "upstream");
	if (r->obs.answered)
		r->obs.answered(r->obs.arg, &w->peer, w->tcp, &w->q, err < 0 ? "error" : "upstream",
				reply_buf, len, w->sampled, &w->qtime);
	r->io.complete(w->pending, reply_buf, len);
	free(w);
}

static enum ndc_verdict forward(struct ndc_resolver *r, struct ndc_socket_req *req,
				const struct ndc_query *q, size_t limit, const struct ndc_qlog *lg,
				const struct observed *ob, uint8_t *out, size_t cap,
				size_t *ret_len)
{
	struct waiter *w;
	int err;

	if (!r->fwd)
		goto servfail;
	w = malloc(sizeof(*w));
	if (!w)
		goto servfail;
	w->pending = r->io.detain(req);
	if (!w->pending) {
		free(w);
		goto servfail;
	}
	w->r = r;
	w->limit = limit;
	w->q = *q;
	w->lg.on = false;
	if (lg)
		w->lg = *lg;
	w->peer.ss_family = 0;
	w->tcp = w->sampled = false;
	if (ob) {
		w->peer = ob->peer;
		w->qtime = ob->qtime;
		w->tcp = ob->tcp;
		w->sampled = ob->sampled;
	}
	/* Options live in the request buffer, which is gone by the time the answer comes back. */
	w->q.edns_opts_len = 0;
	err = ndc_forwarder_resolve(r->fwd, q->lname, q->qname_len, q->qtype, q->qclass,
				    forward_done, w);
	if (err < 0) {
		struct ndc_fwd_result res = {.status = err};
		forward_done(w, &res);
	} else {
		count(r, forwarded);
	}
	return NDC_PENDING;

servfail:
	count(r, servfail);
	return error_reply(r, q, NDC_RCODE_SERVFAIL, out, cap, ret_len);
}

/*
 * Whether the client may send one more query upstream (forward.per_client). SERVFAIL, not
 * REFUSED, for those over: the limit is temporary, and stub resolvers read SERVFAIL as "try again
 * later" (glibc: EAI_AGAIN, and it goes on down the search list) but REFUSED as "this server will
 * never answer you" (glibc: NO_RECOVERY); it is also what a full forwarder answers.
 */
static bool client_allowed(struct ndc_resolver *r, const struct ndc_socket_req *req)
{
	struct sockaddr_storage peer;

	if (!r->limiter || r->io.peer(req, &peer) < 0)
		return true;
	return ndc_ratelimit_allow(r->limiter, &peer, ndc_now_ms());
}

/*
 * Answers one query; *ret_source says who did, for the query log (lg non-NULL when this one is
 * logged: a forwarded query carries it to its answer).
 */
static enum ndc_verdict handle(struct ndc_resolver *r, struct ndc_socket_req *req,
			       const uint8_t *msg, size_t len, struct ndc_query *q,
			       const struct ndc_qlog *lg, const struct observed *ob, uint8_t *out,
			       size_t cap, size_t *ret_len, const char **ret_source)
{
	struct ndc_answer *a = &scratch.a;
	enum ndc_verdict v;
	uint32_t age;
	size_t limit;
	int err;

	*ret_source = "error";
	err = ndc_dns_parse_query(msg, len, q);
	if (err == -EPROTO) {
		count(r, dropped);
		return NDC_DROP;
	}
	/*
	 * Only class IN exists in a cluster; CHAOS and friends are not ours to answer. Before the
	 * type's verdict: a question of another class is refused whatever its type.
	 */
	if (q->question_ok && q->qclass != NDC_C_IN && (err == 0 || err == -EDOM)) {
		count(r, refused_qclass);
		return error_reply(r, q, NDC_RCODE_REFUSED, out, cap, ret_len);
	}
	if (err == -EDOM || err == -EPERM) {
		count(r, refused_qtype); /* never looked up, forwarded, cached or published */
		return error_reply(r, q, q->rcode, out, cap, ret_len);
	}
	if (err < 0) {
		count(r, errors);
		return error_reply(r, q, q->rcode, out, cap, ret_len);
	}
	/* A loop check's name came back to us (query.h): never forwarded, never looked up. */
	if (r->fwd && ndc_forwarder_loop_name(r->fwd, q->lname, q->qname_len))
		return error_reply(r, q, NDC_RCODE_REFUSED, out, cap, ret_len);

	limit = r->io.is_tcp(req) ? NDC_MSG_MAX : ndc_dns_udp_limit(q);
	if (limit > cap)
		limit = cap;

	/* Before the first full sync nothing is ours: the upstream answers the cluster too. */
	ndc_rcu_read_lock();
	const struct ndc_records *rec = atomic_load_explicit(&r->records, memory_order_acquire);
	err =
	    rec ? ndc_records_lookup(rec, q->lname, q->qname_len, q->qtype, a, sizeof(scratch.data))
		: -ENOENT;
	ndc_rcu_read_unlock();
	if (err == 0) {
		count(r, local);
		*ret_source = "cluster";
		goto reply;
	}
	if (err != -ENOENT) {
		count(r, servfail);
		return error_reply(r, q, NDC_RCODE_SERVFAIL, out, cap, ret_len);
	}

	if (r->cache && ndc_cache_get(r->cache, q->lname, q->qname_len, q->qtype, q->qclass,
				      ndc_now_ms(), false, a, sizeof(scratch.data), &age) == 0) {
		count(r, cache_hits);
		*ret_source = "cache";
		if (ndc_dns_write_reply(q, a, age, 0, limit, out, cap, ret_len) < 0)
			return error_reply(r, q, NDC_RCODE_SERVFAIL, out, cap, ret_len);
		return NDC_SEND;
	}
	if (!client_allowed(r, req)) {
		count(r, servfail);
		*ret_source = "limited";
		return error_reply(r, q, NDC_RCODE_SERVFAIL, out, cap, ret_len);
	}
	v = forward(r, req, q, limit, lg, ob, out, cap, ret_len);
	*ret_source = v == NDC_PENDING ? "upstream" : "error";
	return v;

reply:
	if (ndc_dns_write_reply(q, a, 0, 0, limit, out, cap, ret_len) < 0) {
		count(r, servfail);
		*ret_source = "error";
		return error_reply(r, q, NDC_RCODE_SERVFAIL, out, cap, ret_len);
	}
	return NDC_SEND;
}

enum ndc_verdict ndc_resolver_handle(void *ctx, struct ndc_socket_req *req, const uint8_t *msg,
				     size_t len, uint8_t *out, size_t cap, size_t *ret_len)
{
	struct ndc_resolver *r = ctx;
	uint32_t ppm = atomic_load_explicit(&r->qlog_ppm, memory_order_relaxed);
	struct ndc_qlog lg = {.on = false};
	struct observed ob = {.tcp = false};
	const char *source;
	struct ndc_query q;
	enum ndc_verdict v;

	count(r, queries);
	q.qname_len = 0;
	q.question_ok = false;
	if (r->obs.answered) {
		ob.tcp = r->io.is_tcp(req);
		if (r->io.peer(req, &ob.peer) < 0)
			ob.peer.ss_family = 0;
		/* the time is dnstap's (obs.query): counting alone reads no clock */
		if (r->obs.query) {
			clock_gettime(CLOCK_REALTIME, &ob.qtime);
			ob.sampled =
			    r->obs.query(r->obs.arg, &ob.peer, ob.tcp, msg, len, &ob.qtime);
		}
	}
	if (ppm && ndc_qlog_sampled(ppm)) {
		struct sockaddr_storage peer;

		ndc_qlog_begin(&lg, r->io.is_tcp(req), r->io.peer(req, &peer) < 0 ? NULL : &peer,
			       len);
	}
	v = handle(r, req, msg, len, &q, lg.on ? &lg : NULL, r->obs.answered ? &ob : NULL, out, cap,
		   ret_len, &source);
	/* Forwarded queries are told when answered (forward_done). */
	if (r->obs.answered && v != NDC_PENDING)
		r->obs.answered(r->obs.arg, &ob.peer, ob.tcp, &q, source,
				v == NDC_SEND ? out : NULL, v == NDC_SEND ? *ret_len : 0,
				ob.sampled, &ob.qtime);
	/* Forwarded queries are logged when answered; dropped ones have no reply to log. */
	if (lg.on && v == NDC_SEND)
		ndc_qlog_end(&lg, &q, out, *ret_len, source);
	return v;
}

void ndc_resolver_set_query_log(struct ndc_resolver *r, uint32_t sample_ppm)
{
	atomic_store_explicit(&r->qlog_ppm, sample_ppm, memory_order_relaxed);
}

int ndc_resolver_new(const struct ndc_records *records, struct ndc_cache *cache,
		     struct ndc_forwarder *fwd, const struct ndc_query_io *io,
		     struct ndc_resolver **ret)
{
	struct ndc_resolver *r;

	if (!io || !io->is_tcp || !io->peer || !io->detain || !io->complete)
		return -EINVAL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->records = records;
	r->cache = cache;
	r->fwd = fwd;
	r->io = *io;
	*ret = r;
	return 0;
}

const struct ndc_records *ndc_resolver_set_records(struct ndc_resolver *r,
						   const struct ndc_records *rec)
{
	const struct ndc_records *old = atomic_exchange(&r->records, rec);

	/* Every query that may still read the old table finishes before it is handed back. */
	ndc_rcu_synchronize();
	return old;
}

void ndc_resolver_set_observer(struct ndc_resolver *r, const struct ndc_query_observer *obs)
{
	if (obs)
		r->obs = *obs;
	else
		memset(&r->obs, 0, sizeof(r->obs));
}

void ndc_resolver_set_limiter(struct ndc_resolver *r, struct ndc_ratelimit *rl)
{
	r->limiter = rl;
}

void ndc_resolver_free(struct ndc_resolver *r)
{
	free(r);
}

void ndc_resolver_stats(struct ndc_resolver *r, struct ndc_resolver_stats *ret)
{
	ret->queries = atomic_load(&r->queries);
	ret->local = atomic_load(&r->local);
	ret->cache_hits = atomic_load(&r->cache_hits);
	ret->forwarded = atomic_load(&r->forwarded);
	ret->servfail = atomic_load(&r->servfail);
	ret->errors = atomic_load(&r->errors);
	ret->dropped = atomic_load(&r->dropped);
	ret->refused_qtype = atomic_load(&r->refused_qtype);
	ret->refused_qclass = atomic_load(&r->refused_qclass);
}
