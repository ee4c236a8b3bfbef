// SPDX-License-Identifier: MIT
/*
 * The forwarder's upstreams: the sets of them a route table makes, the order a request tries a
 * route's upstreams in (forward.policy), and each one's health (down after a failure that is its
 * own, backoff, probes bring it back): forwarder.c says how. The bottom of the forwarder's
 * modules with attempt.c: an upstream freed closes its connections through f->ops.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <ndc/log.h>

#include "internal.h"

#define NDC_FWD_BACKOFF_MIN_MS 1000
#define NDC_FWD_BACKOFF_MAX_MS 30000

/* ---- upstream sets ------------------------------------------------------------------------- */

static void set_free(struct fwd_set *s)
{
	for (size_t i = 0; s->routes && i < s->routes->n_servers; i++)
		if (s->up[i] && --s->up[i]->refs == 0) {
			s->up[i]->f->ops->upstream_gone(s->up[i]);
			free(s->up[i]);
		}
	ndc_routes_unref(s->routes);
	free(s->rr);
	free(s);
}

/* A set over routes (taking the caller's reference), with fresh upstreams of refs 1. */
int ndc_fwd_set_new(struct ndc_forwarder *f, struct ndc_routes *routes,
		    const struct ndc_forwarder_opts *opts, struct fwd_set **ret)
{
	struct fwd_set *s = calloc(1, sizeof(*s));

	if (!s) {
		ndc_routes_unref(routes);
		return -ENOMEM;
	}
	s->refs = 1;
	s->routes = routes;
	s->timeout_ms = opts->timeout_ms ? opts->timeout_ms : NDC_FWD_TIMEOUT_MS;
	s->protocol = opts->protocol;
	s->tcp_idle_ms = opts->tcp_idle_ms ? opts->tcp_idle_ms : NDC_FWD_TCP_IDLE_MS;
	s->policy = opts->policy;
	s->rr = calloc(routes->n_routes ? routes->n_routes : 1, sizeof(*s->rr));
	if (!s->rr) {
		set_free(s);
		return -ENOMEM;
	}
	for (size_t i = 0; i < routes->n_servers; i++) {
		struct upstream *u = calloc(1, sizeof(*u));

		if (!u) {
			set_free(s);
			return -ENOMEM;
		}
		u->f = f;
		u->addr = routes->servers[i];
		u->refs = 1;
		u->st_healthy = true;
		ndc_routes_addr_name(&u->addr, u->name, sizeof(u->name));
		s->up[i] = u;
	}
	*ret = s;
	return 0;
}

struct fwd_set *ndc_fwd_set_hold(struct fwd_set *s)
{
	s->refs++;
	return s;
}

void ndc_fwd_set_drop(struct fwd_set *s)
{
	if (s && --s->refs == 0)
		set_free(s);
}

/*
 * Thread: makes s the set in use. Its upstreams with an address of the set before are replaced
 * by those, whose health and counters go on.
 */
void ndc_fwd_set_install(struct ndc_forwarder *f, struct fwd_set *s)
{
	struct fwd_set *old = f->cur;

	for (size_t i = 0; old && i < s->routes->n_servers; i++) {
		for (size_t j = 0; j < old->routes->n_servers; j++) {
			if (strcmp(old->up[j]->name, s->up[i]->name))
				continue;
			free(s->up[i]);
			s->up[i] = old->up[j];
			s->up[i]->refs++;
			break;
		}
	}
	pthread_mutex_lock(&f->stats_lock);
	f->cur = s;
	pthread_mutex_unlock(&f->stats_lock);
	f->timeout_ms = s->timeout_ms;
	f->protocol = s->protocol;
	f->tcp_idle_ms = s->tcp_idle_ms;
	ndc_fwd_set_drop(old);
}

/* ---- policy ------------------------------------------------------------------------------ */

/* xorshift64*, seeded once per thread from getrandom: an order needs no secrecy, only spread. */
static uint32_t rand32(void)
{
	static _Thread_local uint64_t x;

	if (!x && (getrandom(&x, sizeof(x), 0) != sizeof(x) || !x))
		x = ndc_now_ms() | 1;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	return (uint32_t)((x * 0x2545F4914F6CDD1DULL) >> 32);
}

void ndc_fwd_policy_order(struct fwd_set *s, const struct ndc_route *rt,
			  uint8_t order[NDC_FWD_MAX_UPSTREAMS])
{
	size_t n = rt->n_up, start = 0;

	if (s->policy == NDC_FWD_ROUND_ROBIN && n)
		start = s->rr[rt - s->routes->routes]++ % n;
	for (size_t k = 0; k < n; k++)
		order[k] = (uint8_t)((start + k) % n);
	if (s->policy != NDC_FWD_RANDOM)
		return;
	for (size_t k = n; k > 1; k--) { /* Fisher-Yates */
		size_t j = rand32() % k;
		uint8_t tmp = order[k - 1];

		order[k - 1] = order[j];
		order[j] = tmp;
	}
}

/* ---- health ------------------------------------------------------------------------------ */

/* Is err the upstream's fault (dead, unreachable), not the name's (SERVFAIL) nor ours? */
static bool upstream_fault(int err)
{
	return err == -ETIMEDOUT || err == -ECONNREFUSED || err == -EHOSTUNREACH ||
	       err == -ENETUNREACH || err == -EHOSTDOWN || err == -ECONNRESET;
}

static void up_publish(struct upstream *u)
{
	__atomic_store_n(&u->st_healthy, !u->down, __ATOMIC_RELAXED);
	__atomic_store_n(&u->st_backoff_ms, u->down ? u->backoff_ms : 0, __ATOMIC_RELAXED);
}

/* r's upstream answered (any rcode, or TC): it is up. */
void ndc_fwd_up_alive(struct ndc_forwarder *f, struct request *r)
{
	struct upstream *u = up_of(r, r->up);

	(void)f;
	r->loop_answered = true;
	if (r->probe) {
		u->probing = false;
		r->probe = false;
	}
	if (!u->down)
		return;
	u->down = false;
	u->backoff_ms = 0;
	up_publish(u);
	ndc_info("forwarder: upstream %s answers again", u->name);
}

/* r's attempt on its upstream failed with err. */
void ndc_fwd_up_failed(struct ndc_forwarder *f, struct request *r, int err)
{
	struct upstream *u = up_of(r, r->up);
	bool probe = r->probe;

	(void)f;
	if (probe) {
		u->probing = false;
		r->probe = false;
	}
	if (!upstream_fault(err))
		return;
	if (!u->down) {
		u->down = true;
		u->backoff_ms = NDC_FWD_BACKOFF_MIN_MS;
		ndc_warn("forwarder: upstream %s: %s; skipped while another answers, probed again "
			 "in %u ms",
			 u->name, strerror(-err), u->backoff_ms);
	} else if (probe) {
		u->backoff_ms = u->backoff_ms * 2 < NDC_FWD_BACKOFF_MAX_MS ? u->backoff_ms * 2
									   : NDC_FWD_BACKOFF_MAX_MS;
		ndc_debug("forwarder: upstream %s: probe: %s; next in %u ms", u->name,
			  strerror(-err), u->backoff_ms);
	} else {
		return; /* sent before it was known down, or while every upstream was */
	}
	u->retry_ms = ndc_now_ms() + u->backoff_ms;
	up_publish(u);
}

void ndc_fwd_bad_answer(struct ndc_forwarder *f, struct request *r, int err)
{
	struct upstream *u = up_of(r, r->up);

	UP_INC(u, bad_answers);
	ndc_debug("forwarder: upstream %s: an answer that cannot be used (%s); the query moves on",
		  u->name, strerror(-err));
	f->ops->attempt_fail(f, r, err);
}
