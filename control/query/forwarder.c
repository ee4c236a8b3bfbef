// SPDX-License-Identifier: MIT
/*
 * Upstream forwarder. ndc_forwarder_resolve (any thread) finds or creates the in-flight request
 * for a key under f->lock and hands new ones to the forwarder thread through a queue and an
 * eventfd; the thread owns every socket and timer and calls the waiters.
 *
 * Choices the header leaves open:
 * - Upstreams are tried in the order forward.policy gives each request (upstream.c), each once
 *   per request: by default the configured order, a primary and fallbacks (resolv.conf
 *   semantics), as the kube-dns ClusterIP behind it already spreads load.
 *   One that is down is skipped while an untried one is up (see the header); a failure that is
 *   the name's (SERVFAIL, a bad answer) says nothing of the upstream's health, nor does a local
 *   one (socket(), no memory). Backoff only grows on a failed probe: the requests already in
 *   flight to an upstream when it went down time out without doubling it.
 * - A probe is an ordinary query: the request that finds a down upstream due for one sends it
 *   there, or, while an up one remains for the request, sends a copy of itself there (a shadow:
 *   no waiters, never moves on, its answer only cached), so no client waits on the probe.
 * - Every attempt has timeout_ms (0: NDC_FWD_TIMEOUT_MS); a TC retry over TCP to the same upstream
 *   gets a fresh timeout_ms of its own. All deadlines are now + the same timeout, so the timer
 *   list is kept sorted by appending, and one epoll timeout covers it.
 * - max_inflight 0 means NDC_FWD_INFLIGHT_MAX, max_pending 0 NDC_FWD_PENDING_MAX. Beyond them
 *   (-EBUSY, counted as rejected), and with no upstreams (-ENOTCONN), resolve returns the error
 *   and never calls done: the caller answers SERVFAIL at once, holding nothing.
 * - A request fails over to the next upstream on timeout, ICMP unreachable on the connected
 *   socket (-ECONNREFUSED), a broken TCP exchange, or an rcode other than NOERROR/NXDOMAIN
 *   (-EREMOTEIO: SERVFAIL, REFUSED, FORMERR, NOTIMP are never cached), or an answer to its ID
 *   that cannot be used (no question section, not parseable: a bad answer, at once rather than
 *   after timeout_ms). When all fail, a cached (possibly stale, RFC 8767) answer is the result,
 *   else the last attempt's error. Only timeouts and refused or unreachable connections mark an
 *   upstream down (upstream.c): a name that gets odd answers costs that name, not everyone.
 * - Query names carry 0x20 random case; a UDP response must echo it exactly. An upstream that
 *   answers with the right ID and question in other case gets asked again once without it.
 * - Stats: as ndc_forwarder_stats says; per upstream, counters are atomics the thread bumps.
 * - Routes (stub domains, routes.c): a request takes its route when the thread starts it, from
 *   the upstream set then in use, and keeps both to its end. A reconfiguration makes a new set
 *   whose upstreams with an address of the old one are the old ones (health and counters go on);
 *   a set lives while it is in use or a request holds it. Only requests of the set in use fill
 *   the cache, so an answer of an upstream no longer configured is never cached.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <ndc/log.h>

#include "internal.h"

#define NDC_FWD_INFLIGHT_MAX 4096
#define NDC_FWD_EVENTS 64

static struct request **table_find(struct ndc_forwarder *f, uint64_t hash, const uint8_t *lname,
				   size_t nlen, uint16_t qtype, uint16_t qclass)
{
	struct request **pp = &f->table[hash & (f->nbuckets - 1)];

	for (; *pp; pp = &(*pp)->hnext) {
		struct request *r = *pp;

		if (r->hash == hash && r->nlen == nlen && r->qtype == qtype &&
		    r->qclass == qclass && !memcmp(r->lname, lname, nlen))
			return pp;
	}
	return pp;
}

/* Removes r from the table and calls every waiter with res; frees r. */
static void finish(struct ndc_forwarder *f, struct request *r, const struct ndc_fwd_result *res)
{
	struct request **pp;
	struct fwd_waiter *w = NULL;

	if (!r->shadow) {
		pthread_mutex_lock(&f->lock);
		pp = &f->table[r->hash & (f->nbuckets - 1)];
		while (*pp && *pp != r)
			pp = &(*pp)->hnext;
		if (*pp)
			*pp = r->hnext;
		w = r->waiters;
		r->waiters = NULL;
		f->inflight--;
		__atomic_store_n(&f->pending, f->pending - r->nwaiters, __ATOMIC_RELAXED);
		pthread_mutex_unlock(&f->lock);
	}

	/* Unlocked: a callback may call ndc_forwarder_resolve, even for this very key. */
	while (w) {
		struct fwd_waiter *next = w->next;

		w->done(w->arg, res);
		free(w);
		w = next;
	}
	ndc_fwd_tcp_detach(r); /* nothing may find it by ID any more */
	if (r->own_rt)
		ndc_fwd_loop_done(f, r);
	ndc_fwd_set_drop(r->rs);
	free(r->own_rt);
	free(r);
}

/* Answers r from the cache, stale if need be (RFC 8767): true if it did (r is then freed). */
static bool serve_cached(struct ndc_forwarder *f, struct request *r)
{
	struct ndc_fwd_result res = {.status = 0, .answer = f->ans};
	uint32_t age = 0;
	int err;

	if (!f->cache || r->shadow)
		return false;
	err = ndc_cache_get(f->cache, r->lname, r->nlen, r->qtype, r->qclass, ndc_now_ms(), true,
			    f->ans, NDC_MSG_MAX, &age);
	if (err != 0 && err != -ESTALE)
		return false;
	res.age = age;
	res.stale = err == -ESTALE;
	if (res.stale)
		STAT_INC(f, stale_served);
	finish(f, r, &res);
	return true;
}

/* Serves a cached answer, stale if need be (RFC 8767), or the last error. */
static void fail_request(struct ndc_forwarder *f, struct request *r)
{
	struct ndc_fwd_result res = {.status = r->last_err ? r->last_err : -ETIMEDOUT};

	if (!serve_cached(f, r))
		finish(f, r, &res);
}

/* Starts r's attempt on upstream i: true if under way, else the error is recorded. */
static bool try_upstream(struct ndc_forwarder *f, struct request *r, size_t i)
{
	int err;

	r->up = i;
	r->tried |= 1u << i;
	if (r->probe)
		UP_INC(up_of(r, i), probes);
	r->resent = false;
	r->tcp = f->protocol == NDC_FWD_TCP;
	err = r->tcp ? ndc_fwd_tcp_start(f, r) : ndc_fwd_udp_start(f, r);
	if (!err)
		return true;
	ndc_fwd_attempt_end(r);
	r->last_err = err;
	STAT_INC(f, errors);
	UP_INC(up_of(r, i), errors);
	ndc_fwd_up_failed(f, r, err);
	ndc_debug("forwarder: upstream %s: %s", up_of(r, i)->name, strerror(-err));
	return false;
}

/* Sends a copy of r to the down upstream i, as its probe, for no client to wait on. */
static void probe_shadow(struct ndc_forwarder *f, const struct request *r, size_t i)
{
	static const struct ndc_fwd_result res = {.status = -ECANCELED};
	struct request *p = calloc(1, sizeof(*p));

	if (!p)
		return;
	p->rs = ndc_fwd_set_hold(r->rs);
	p->rt = r->rt;
	p->hash = r->hash;
	p->qtype = r->qtype;
	p->qclass = r->qclass;
	p->nlen = r->nlen;
	memcpy(p->lname, r->lname, r->nlen);
	p->caps = true;
	p->shadow = true;
	p->io = FWD_IO_REQ;
	p->fd = -1;
	p->tried = ~0u; /* this one upstream, never the next */
	p->probe = true;
	up_of(r, i)->probing = true;
	if (!try_upstream(f, p, i))
		finish(f, p, &res);
}

/*
 * The upstream for r's next attempt: the first untried one that is up in r's order (the
 * policy's), going past (and counting) the down ones before it. A down one past its backoff
 * with no probe out gets one: r itself when no untried upstream is up and r has made no attempt
 * yet (a client waits on one dead upstream at most, once all are known down), else a shadow of
 * r. -1: none.
 */
static ssize_t pick_upstream(struct ndc_forwarder *f, struct request *r, uint64_t now)
{
	ssize_t up = -1;
	size_t upk = 0;
	bool first = !r->tried;

	for (size_t k = 0; k < r->rt->n_up && up < 0; k++) {
		size_t i = r->order[k];

		if (!(r->tried & (1u << i)) && !up_of(r, i)->down && !up_of(r, i)->looping) {
			up = (ssize_t)i;
			upk = k;
		}
	}
	for (size_t i = 0; i < r->rt->n_up; i++) {
		struct upstream *u = up_of(r, i);

		if ((r->tried & (1u << i)) || !u->down || u->looping || u->probing ||
		    now < u->retry_ms)
			continue;
		if (up < 0 && first) {
			u->probing = true;
			r->probe = true;
			return (ssize_t)i;
		}
		probe_shadow(f, r, i);
	}
	for (size_t k = 0; up >= 0 && k < upk; k++)
		if (!(r->tried & (1u << r->order[k])) && up_of(r, r->order[k])->down)
			UP_INC(up_of(r, r->order[k]), skipped);
	return up;
}

/* The down upstream r has not tried that is due soonest (not a looping one); -1: none. */
static ssize_t soonest_down(const struct request *r)
{
	ssize_t best = -1;

	for (size_t i = 0; i < r->rt->n_up; i++) {
		if ((r->tried & (1u << i)) || up_of(r, i)->looping)
			continue;
		if (best < 0 || up_of(r, i)->retry_ms < up_of(r, (size_t)best)->retry_ms)
			best = (ssize_t)i;
	}
	return best;
}

/* Starts r's next attempt; fails r when no upstream is left for it. */
static void start_next(struct ndc_forwarder *f, struct request *r)
{
	uint64_t now = ndc_now_ms();
	ssize_t i;

	if (!r->rs) {
		r->rs = ndc_fwd_set_hold(f->cur);
		r->rt = ndc_routes_match(r->rs->routes, r->lname, r->nlen);
		ndc_fwd_policy_order(r->rs, r->rt, r->order);
		if (!r->rt->n_up) {
			/* A name outside every stub domain, and no default upstream. */
			r->last_err = -ENOTCONN;
			fail_request(f, r);
			return;
		}
	}
	while ((i = pick_upstream(f, r, now)) >= 0)
		if (try_upstream(f, r, (size_t)i))
			return;
	/*
	 * Every upstream is down, none due for a probe. What the cache has is answered at once
	 * (RFC 8767 5: no client waits on a known failure); anything else still gets one attempt,
	 * to the one due soonest: the name's only chance of an answer but SERVFAIL.
	 */
	if (r->tried || r->shadow) {
		fail_request(f, r);
	} else if (!serve_cached(f, r)) {
		i = soonest_down(r);
		if (i < 0)
			r->last_err = -ELOOP; /* every upstream left sends queries back to us */
		if (i < 0 || !try_upstream(f, r, (size_t)i))
			fail_request(f, r);
	}
}

/* f->ops->send_check: a loop check (loopcheck.c) is a shadow request on its own route. */
static int send_check(struct ndc_forwarder *f, size_t k, const uint8_t *lname, size_t nlen)
{
	static const struct ndc_fwd_result res = {.status = -ECANCELED};
	struct request *p = calloc(1, sizeof(*p));
	struct ndc_route *rt = calloc(1, sizeof(*rt));

	if (!p || !rt || nlen > NDC_NAME_MAX) {
		free(p);
		free(rt);
		return -ENOMEM;
	}
	rt->n_up = 1;
	rt->srv[0] = (uint8_t)k;
	p->own_rt = rt;
	p->rt = rt;
	p->rs = ndc_fwd_set_hold(f->cur);
	p->qtype = NDC_FWD_LOOP_QTYPE;
	p->qclass = NDC_C_IN;
	p->nlen = (uint8_t)nlen;
	memcpy(p->lname, lname, nlen);
	p->shadow = true; /* no waiters, not in the table, never cached */
	p->io = FWD_IO_REQ;
	p->fd = -1;
	p->tried = ~0u;
	if (!try_upstream(f, p, 0))
		finish(f, p, &res);
	return 0;
}

static void attempt_fail(struct ndc_forwarder *f, struct request *r, int err)
{
	struct upstream *u = up_of(r, r->up);
	bool udp = r->st == ATT_UDP;

	ndc_fwd_attempt_end(r);
	r->last_err = err;
	if (err == -ETIMEDOUT) {
		STAT_INC(f, timeouts);
		UP_INC(u, timeouts);
		/* prefer_udp: a datagram lost on the way is asked again over TCP, same upstream;
		 * the TCP attempt's outcome is what says whether the upstream is up. */
		if (udp && f->protocol == NDC_FWD_PREFER_UDP && !r->shadow) {
			r->tcp = true;
			r->resent = false;
			STAT_INC(f, tcp_fallbacks);
			err = ndc_fwd_tcp_start(f, r);
			if (!err)
				return;
			ndc_fwd_attempt_end(r);
			r->last_err = err;
		}
	} else {
		STAT_INC(f, errors);
		UP_INC(u, errors);
	}
	ndc_fwd_up_failed(f, r, err);
	start_next(f, r);
}

static void accept_answer(struct ndc_forwarder *f, struct request *r, struct ndc_answer *a)
{
	struct ndc_fwd_result res = {.status = 0, .answer = a};
	uint32_t ttl = 0;

	/* RFC 1035 4.1.1: AA speaks for the responding server; a cache is not the authority. */
	a->aa = 0;

	if (a->rcode != NDC_RCODE_NOERROR && a->rcode != NDC_RCODE_NXDOMAIN) {
		attempt_fail(f, r, -EREMOTEIO);
		return;
	}
	ndc_fwd_attempt_end(r);
	STAT_INC(f, responses);
	UP_INC(up_of(r, r->up), responses);
	/* The first reply says no more than the cache's copy will (cache.max_ttl, neg_max_ttl). */
	if (f->cache)
		ndc_cache_cap_ttls(f->cache, a, r->qtype);
	/* Started before a reconfiguration: its upstream may no longer be the name's. */
	if (f->cache && r->rs == f->cur && !r->own_rt) {
		/* RFC 2308 5: a negative answer without an SOA is not cached. */
		if (ndc_answer_cache_ttl(a, r->qtype, &ttl) < 0)
			ttl = 0;
		if (ttl)
			ndc_cache_put(f->cache, r->lname, r->nlen, r->qtype, r->qclass, a, ttl,
				      ndc_now_ms());
	}
	finish(f, r, &res);
}

/* The flow's steps the modules under this one call back (internal.h). */
static const struct fwd_ops fwd_ops = {
    .accept_answer = accept_answer,
    .attempt_fail = attempt_fail,
    .send_check = send_check,
    .upstream_gone = ndc_fwd_tcp_close_all,
};

/* A new set from reconfigure first: the requests queued since then start with it. */
static void take_queue(struct ndc_forwarder *f, bool *ret_stop, struct request **ret_q)
{
	struct fwd_set *next;

	pthread_mutex_lock(&f->lock);
	next = f->next;
	pthread_mutex_unlock(&f->lock);
	if (next) {
		ndc_fwd_set_install(f, next);
		/* Every upstream change is checked for loops, once the agent armed the checks. */
		if (atomic_load(&f->loop_armed))
			atomic_store(&f->loop_req, true);
	}
	pthread_mutex_lock(&f->lock);
	if (next)
		f->next = NULL;
	/* Stopping: a reconfigure waiting for the thread must not wait forever either. */
	if (next || f->stop)
		pthread_cond_broadcast(&f->next_cond);
	*ret_q = f->queue;
	f->queue = NULL;
	f->qtail = &f->queue;
	*ret_stop = f->stop;
	pthread_mutex_unlock(&f->lock);
}

static void cancel_all(struct ndc_forwarder *f, struct request *queued)
{
	const struct ndc_fwd_result res = {.status = -ECANCELED};

	while (f->timers.tnext != &f->timers) {
		struct request *r = f->timers.tnext;

		ndc_fwd_attempt_end(r);
		finish(f, r, &res);
	}
	while (queued) {
		struct request *next = queued->qnext;

		finish(f, queued, &res);
		queued = next;
	}
}

/* Loop detection's share of the thread: marks, checks asked for, rechecks of looping ones. */
static void loop_work(struct ndc_forwarder *f, uint64_t now)
{
	bool any = false;

	if (atomic_exchange(&f->loop_hit, false))
		ndc_fwd_loop_scan(f);
	if (atomic_exchange(&f->loop_req, false))
		ndc_fwd_loop_start(f, false);
	if (!f->loop_next || now < f->loop_next)
		return;
	for (size_t k = 0; k < f->cur->routes->n_servers; k++)
		any |= f->cur->up[k]->looping;
	f->loop_next = any ? now + NDC_FWD_LOOP_RECHECK_MS : 0;
	if (any)
		ndc_fwd_loop_start(f, true);
}

static void *forwarder_thread(void *arg)
{
	struct ndc_forwarder *f = arg;
	struct epoll_event evs[NDC_FWD_EVENTS];
	struct request *q;
	bool stop = false;

	while (!stop) {
		int timeout = -1, n;
		uint64_t now = ndc_now_ms(), wake = ndc_fwd_tcp_sweep(f, now);

		if (f->timers.tnext != &f->timers && (!wake || f->timers.tnext->deadline < wake))
			wake = f->timers.tnext->deadline;
		if (f->loop_next && (!wake || f->loop_next < wake))
			wake = f->loop_next;
		if (wake)
			timeout = wake > now ? (int)(wake - now) : 0;
		n = epoll_wait(f->epfd, evs, NDC_FWD_EVENTS, timeout);
		if (n < 0 && errno != EINTR) {
			ndc_err("forwarder: epoll_wait: %s", strerror(errno));
			pthread_mutex_lock(&f->lock);
			f->stop = true;
			pthread_mutex_unlock(&f->lock);
			n = 0;
		}
		/*
		 * One fd per UDP request at a time and one event per fd per batch: a request freed
		 * while handling its event cannot appear later in the same batch. Requests on TCP
		 * have no fd of their own; a connection closed in the batch is freed after it.
		 */
		for (int i = 0; i < n; i++) {
			enum fwd_io *io = evs[i].data.ptr;

			if (!io) {
				uint64_t v;

				if (read(f->evfd, &v, sizeof(v)) < 0 && errno != EAGAIN)
					ndc_warn("forwarder: eventfd: %s", strerror(errno));
			} else if (*io == FWD_IO_CONN) {
				ndc_fwd_tcp_event(f, (struct fwd_conn *)io, evs[i].events);
			} else {
				ndc_fwd_on_udp(f, (struct request *)io);
			}
		}
		take_queue(f, &stop, &q);
		if (stop) {
			cancel_all(f, q);
			break;
		}
		while (q) {
			struct request *next = q->qnext;

			start_next(f, q);
			q = next;
		}
		now = ndc_now_ms();
		loop_work(f, now);
		while (f->timers.tnext != &f->timers && f->timers.tnext->deadline <= now)
			attempt_fail(f, f->timers.tnext, -ETIMEDOUT);
	}
	return NULL;
}

/* Checks that do not need the thread: the same for a new forwarder and a reconfiguration. */
static int opts_check(const struct ndc_forwarder_opts *opts)
{
	if (!opts || (opts->n_upstreams && !opts->upstreams))
		return -EINVAL;
	if (opts->n_upstreams > NDC_FWD_MAX_UPSTREAMS)
		return -E2BIG;
	for (size_t i = 0; i < opts->n_upstreams; i++)
		if (opts->upstreams[i].ss_family != AF_INET &&
		    opts->upstreams[i].ss_family != AF_INET6)
			return -EAFNOSUPPORT;
	if ((unsigned)opts->protocol > NDC_FWD_PREFER_UDP ||
	    (unsigned)opts->policy > NDC_FWD_ROUND_ROBIN)
		return -EINVAL;
	return 0;
}

int ndc_forwarder_check(const struct ndc_forwarder_opts *opts)
{
	struct ndc_routes *routes = NULL;
	int err = opts_check(opts);

	if (!err)
		err = ndc_routes_new(opts, &routes);
	ndc_routes_unref(routes);
	return err;
}

int ndc_forwarder_new(const struct ndc_forwarder_opts *opts, struct ndc_cache *cache,
		      struct ndc_forwarder **ret)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
	struct ndc_routes *routes = NULL;
	struct ndc_forwarder *f;
	pthread_condattr_t ca;
	uint32_t nb = 16;
	int err;

	if (!ret)
		return -EINVAL;
	err = opts_check(opts);
	if (!err)
		err = ndc_routes_new(opts, &routes);
	if (err)
		return err;
	f = calloc(1, sizeof(*f));
	if (!f) {
		ndc_routes_unref(routes);
		return -ENOMEM;
	}
	f->ops = &fwd_ops;
	f->epfd = f->evfd = -1;
	f->cache = cache;
	f->max_inflight = opts->max_inflight ? opts->max_inflight : NDC_FWD_INFLIGHT_MAX;
	f->max_pending = opts->max_pending ? opts->max_pending : NDC_FWD_PENDING_MAX;
	f->queue = NULL;
	f->qtail = &f->queue;
	f->timers.tnext = f->timers.tprev = &f->timers;
	pthread_mutex_init(&f->lock, NULL);
	pthread_mutex_init(&f->stats_lock, NULL);
	pthread_mutex_init(&f->reconf_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&f->next_cond, &ca);
	pthread_condattr_destroy(&ca);
	f->any_up = routes->n_servers > 0;
	f->last = ndc_routes_ref(routes);
	err = ndc_fwd_set_new(f, routes, opts, &f->cur);
	if (err)
		goto err;
	f->timeout_ms = f->cur->timeout_ms;
	f->protocol = f->cur->protocol;
	f->tcp_idle_ms = f->cur->tcp_idle_ms;
	err = -ENOMEM;
	while (nb < f->max_inflight && nb < 65536)
		nb *= 2;
	f->nbuckets = nb;
	f->table = calloc(nb, sizeof(*f->table));
	f->msg = malloc(NDC_MSG_MAX);
	f->ans = malloc(sizeof(*f->ans) + NDC_MSG_MAX);
	if (!f->table || !f->msg || !f->ans)
		goto err;
	f->epfd = epoll_create1(EPOLL_CLOEXEC);
	f->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (f->epfd < 0 || f->evfd < 0 || epoll_ctl(f->epfd, EPOLL_CTL_ADD, f->evfd, &ev) < 0) {
		err = -errno;
		ndc_err("forwarder: epoll/eventfd: %s", strerror(errno));
		goto err;
	}
	err = -pthread_create(&f->thread, NULL, forwarder_thread, f);
	if (err) {
		ndc_err("forwarder: thread: %s", strerror(-err));
		goto err;
	}
	f->started = true;
	*ret = f;
	return 0;

err:
	ndc_forwarder_free(f);
	return err;
}

/* The cache drop's test: does the name go elsewhere now? */
struct route_change {
	const struct ndc_routes *old, *new;
};

static bool route_changed(void *arg, const uint8_t *lname, size_t nlen)
{
	const struct route_change *c = arg;

	return !ndc_routes_same(c->old, ndc_routes_match(c->old, lname, nlen), c->new,
				ndc_routes_match(c->new, lname, nlen));
}

int ndc_forwarder_reconfigure(struct ndc_forwarder *f, const struct ndc_forwarder_opts *opts)
{
	struct ndc_routes *routes = NULL, *old;
	struct fwd_set *set;
	uint64_t one = 1;
	int err = opts_check(opts);

	if (!err)
		err = ndc_routes_new(opts, &routes);
	if (!err)
		err = ndc_fwd_set_new(f, ndc_routes_ref(routes), opts, &set);
	if (err) {
		ndc_routes_unref(routes);
		return err;
	}
	pthread_mutex_lock(&f->reconf_lock);
	pthread_mutex_lock(&f->lock);
	f->next = set;
	f->max_pending = opts->max_pending ? opts->max_pending : NDC_FWD_PENDING_MAX;
	f->any_up = routes->n_servers > 0;
	pthread_mutex_unlock(&f->lock);
	if (write(f->evfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		ndc_warn("forwarder: eventfd: %s", strerror(errno));
	pthread_mutex_lock(&f->lock);
	while (f->next == set && !f->stop)
		pthread_cond_wait(&f->next_cond, &f->lock);
	pthread_mutex_unlock(&f->lock);
	old = f->last;
	f->last = routes;
	if (f->cache) {
		struct route_change c = {.old = old, .new = routes};
		size_t n = ndc_cache_drop(f->cache, route_changed, &c);

		if (n)
			ndc_info("forwarder: %zu cached answers dropped: their names go to other "
				 "upstreams now",
				 n);
	}
	ndc_routes_unref(old);
	pthread_mutex_unlock(&f->reconf_lock);
	return 0;
}

int ndc_forwarder_resolve(struct ndc_forwarder *f, const uint8_t *lname, size_t nlen,
			  uint16_t qtype, uint16_t qclass, ndc_fwd_done_fn done, void *arg)
{
	uint64_t hash = ndc_query_key_hash(lname, nlen, qtype, qclass);
	struct request **pp, *r;
	struct fwd_waiter *w;
	uint64_t one = 1;
	int err = 0;

	if (!__atomic_load_n(&f->any_up, __ATOMIC_RELAXED))
		return -ENOTCONN;
	if (!nlen || nlen > NDC_NAME_MAX || !done)
		return -EINVAL;
	w = malloc(sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->next = NULL;
	w->done = done;
	w->arg = arg;

	pthread_mutex_lock(&f->lock);
	if (f->stop) {
		err = -ECANCELED;
		goto out_unlock;
	}
	/* Each waiter is a client query held in memory until its answer: bounded. */
	if (f->pending >= f->max_pending) {
		err = -EBUSY;
		goto out_unlock;
	}
	pp = table_find(f, hash, lname, nlen, qtype, qclass);
	if (*pp) {
		r = *pp;
		*r->wtail = w;
		r->wtail = &w->next;
		r->nwaiters++;
		__atomic_store_n(&f->pending, f->pending + 1, __ATOMIC_RELAXED);
		STAT_INC(f, coalesced);
		pthread_mutex_unlock(&f->lock);
		return 0;
	}
	if (f->inflight >= f->max_inflight) {
		err = -EBUSY;
		goto out_unlock;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		err = -ENOMEM;
		goto out_unlock;
	}
	r->hash = hash;
	r->qtype = qtype;
	r->qclass = qclass;
	r->nlen = (uint8_t)nlen;
	memcpy(r->lname, lname, nlen);
	r->caps = true;
	r->io = FWD_IO_REQ;
	r->fd = -1;
	r->waiters = w;
	r->wtail = &w->next;
	r->nwaiters = 1;
	*pp = r;
	*f->qtail = r;
	f->qtail = &r->qnext;
	f->inflight++;
	__atomic_store_n(&f->pending, f->pending + 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&f->lock);
	if (write(f->evfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		ndc_warn("forwarder: eventfd: %s", strerror(errno));
	return 0;

out_unlock:
	pthread_mutex_unlock(&f->lock);
	if (err == -EBUSY)
		STAT_INC(f, rejected);
	free(w);
	return err;
}

void ndc_forwarder_free(struct ndc_forwarder *f)
{
	uint64_t one = 1;

	if (!f)
		return;
	if (f->started) {
		pthread_mutex_lock(&f->lock);
		f->stop = true;
		pthread_mutex_unlock(&f->lock);
		if (write(f->evfd, &one, sizeof(one)) < 0)
			ndc_warn("forwarder: eventfd: %s", strerror(errno));
		pthread_join(f->thread, NULL);
	}
	if (f->epfd >= 0)
		close(f->epfd);
	if (f->evfd >= 0)
		close(f->evfd);
	if (f->next)
		ndc_fwd_set_drop(f->next);
	if (f->cur)
		ndc_fwd_set_drop(f->cur);
	ndc_fwd_tcp_reap(f);
	ndc_routes_unref(f->last);
	pthread_cond_destroy(&f->next_cond);
	pthread_mutex_destroy(&f->reconf_lock);
	pthread_mutex_destroy(&f->stats_lock);
	pthread_mutex_destroy(&f->lock);
	free(f->ans);
	free(f->msg);
	free(f->table);
	free(f);
}

void ndc_forwarder_stats(struct ndc_forwarder *f, struct ndc_forwarder_stats *ret)
{
	ret->queries = __atomic_load_n(&f->stats.queries, __ATOMIC_RELAXED);
	ret->coalesced = __atomic_load_n(&f->stats.coalesced, __ATOMIC_RELAXED);
	ret->responses = __atomic_load_n(&f->stats.responses, __ATOMIC_RELAXED);
	ret->timeouts = __atomic_load_n(&f->stats.timeouts, __ATOMIC_RELAXED);
	ret->tcp_retries = __atomic_load_n(&f->stats.tcp_retries, __ATOMIC_RELAXED);
	ret->tcp_fallbacks = __atomic_load_n(&f->stats.tcp_fallbacks, __ATOMIC_RELAXED);
	ret->errors = __atomic_load_n(&f->stats.errors, __ATOMIC_RELAXED);
	ret->stale_served = __atomic_load_n(&f->stats.stale_served, __ATOMIC_RELAXED);
	ret->rejected = __atomic_load_n(&f->stats.rejected, __ATOMIC_RELAXED);
	ret->pending = __atomic_load_n(&f->pending, __ATOMIC_RELAXED);
	pthread_mutex_lock(&f->stats_lock);
	ret->n_upstreams = f->cur->routes->n_servers;
	{
		const struct ndc_routes *rts = f->cur->routes;
		const struct ndc_route *def = &rts->routes[rts->n_routes - 1];

		ret->all_looping = def->n_up > 0;
		for (size_t i = 0; i < def->n_up; i++)
			if (!__atomic_load_n(&f->cur->up[def->srv[i]]->st_looping,
					     __ATOMIC_RELAXED))
				ret->all_looping = false;
	}
	for (size_t i = 0; i < ret->n_upstreams; i++) {
		struct ndc_fwd_upstream_stats *o = &ret->upstream[i];
		struct upstream *u = f->cur->up[i];

		memcpy(o->name, u->name, sizeof(o->name));
		o->healthy = __atomic_load_n(&u->st_healthy, __ATOMIC_RELAXED);
		o->backoff_ms = __atomic_load_n(&u->st_backoff_ms, __ATOMIC_RELAXED);
		o->queries = __atomic_load_n(&u->queries, __ATOMIC_RELAXED);
		o->responses = __atomic_load_n(&u->responses, __ATOMIC_RELAXED);
		o->timeouts = __atomic_load_n(&u->timeouts, __ATOMIC_RELAXED);
		o->errors = __atomic_load_n(&u->errors, __ATOMIC_RELAXED);
		o->probes = __atomic_load_n(&u->probes, __ATOMIC_RELAXED);
		o->skipped = __atomic_load_n(&u->skipped, __ATOMIC_RELAXED);
		o->tcp_queries = __atomic_load_n(&u->tcp_queries, __ATOMIC_RELAXED);
		o->tcp_conns = __atomic_load_n(&u->tcp_conns, __ATOMIC_RELAXED);
		o->tcp_resent = __atomic_load_n(&u->tcp_resent, __ATOMIC_RELAXED);
		o->tcp_open = __atomic_load_n(&u->tcp_open, __ATOMIC_RELAXED);
		o->bad_answers = __atomic_load_n(&u->bad_answers, __ATOMIC_RELAXED);
		o->tcp_stalled = __atomic_load_n(&u->tcp_stalled, __ATOMIC_RELAXED);
		o->tcp_queue_full = __atomic_load_n(&u->tcp_queue_full, __ATOMIC_RELAXED);
		o->looping = __atomic_load_n(&u->st_looping, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&f->stats_lock);
}

void ndc_forwarder_set_tap(struct ndc_forwarder *f, ndc_fwd_tap_fn fn, void *arg)
{
	f->tap_arg = arg;
	f->tap = fn;
}
