// SPDX-License-Identifier: MIT
/*
 * Loop detection (query.h says what it does). The forwarder thread sends each check and owns
 * each upstream's verdict; a resolver thread that sees a check's name come back only sets that
 * upstream's loop_seen and wakes the thread, which marks it. A check's name is its token in
 * 16 hex digits: 64 random bits a client cannot guess to take an upstream out of use.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <ndc/log.h>

#include "internal.h"

/* "\014ndcache-loop\007invalid\0": NDC_FWD_LOOP_ZONE in wire form. */
static const uint8_t loop_zone[] = "\014ndcache-loop\007invalid";
#define LOOP_ZONE_LEN sizeof(loop_zone) /* with the root label */

static void token_name(uint64_t token, uint8_t *out, size_t *ret_len)
{
	char hex[17];

	snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)token);
	out[0] = 16;
	memcpy(out + 1, hex, 16);
	memcpy(out + 17, loop_zone, LOOP_ZONE_LEN);
	*ret_len = 17 + LOOP_ZONE_LEN;
}

static void publish(struct upstream *u)
{
	__atomic_store_n(&u->st_looping, u->looping, __ATOMIC_RELAXED);
}

static void mark(struct ndc_forwarder *f, struct upstream *u)
{
	if (u->looping)
		return;
	u->looping = true;
	publish(u);
	ndc_err(
	    "forwarder: upstream %s sends ndcache's own queries back to it (a forwarding loop): "
	    "taken out of use; checked again every %u s",
	    u->name, NDC_FWD_LOOP_RECHECK_MS / 1000);
	if (!f->loop_next)
		f->loop_next = ndc_now_ms() + NDC_FWD_LOOP_RECHECK_MS;
}

void ndc_fwd_loop_start(struct ndc_forwarder *f, bool only_looping)
{
	struct fwd_set *s = f->cur;

	for (size_t k = 0; k < s->routes->n_servers; k++) {
		struct upstream *u = s->up[k];
		uint8_t name[NDC_NAME_MAX];
		uint64_t token = 0;
		size_t nlen;
		int err;

		if ((only_looping && !u->looping) || atomic_load(&u->loop_token))
			continue;
		if (getrandom(&token, sizeof(token), 0) != sizeof(token) || !token)
			continue;
		token_name(token, name, &nlen);
		atomic_store(&u->loop_seen, false);
		atomic_store(&u->loop_token, token);
		err = f->ops->send_check(f, k, name, nlen);
		if (err) {
			atomic_store(&u->loop_token, 0);
			ndc_debug("forwarder: upstream %s: loop check not sent: %s", u->name,
				  strerror(-err));
		}
	}
}

void ndc_fwd_loop_scan(struct ndc_forwarder *f)
{
	struct fwd_set *s = f->cur;

	for (size_t k = 0; k < s->routes->n_servers; k++)
		if (atomic_load_explicit(&s->up[k]->loop_seen, memory_order_acquire))
			mark(f, s->up[k]);
}

void ndc_fwd_loop_done(struct ndc_forwarder *f, struct request *r)
{
	struct upstream *u = up_of(r, 0);

	/* Our REFUSED to the check's name went out before the upstream could answer the check:
	 * a check answered and not seen did not come around. */
	if (atomic_load_explicit(&u->loop_seen, memory_order_acquire))
		mark(f, u);
	else if (r->loop_answered && u->looping) {
		u->looping = false;
		publish(u);
		ndc_info("forwarder: upstream %s no longer sends queries back: in use again",
			 u->name);
	}
	atomic_store(&u->loop_token, 0);
}

bool ndc_forwarder_loop_name(struct ndc_forwarder *f, const uint8_t *lname, size_t nlen)
{
	uint64_t token = 0;
	struct fwd_set *s;
	uint64_t one = 1;
	bool hit = false;

	if (nlen < LOOP_ZONE_LEN || memcmp(lname + nlen - LOOP_ZONE_LEN, loop_zone, LOOP_ZONE_LEN))
		return false;
	if (nlen != 17 + LOOP_ZONE_LEN || lname[0] != 16)
		return true; /* ours, not a check: answered all the same */
	for (size_t i = 1; i <= 16; i++) {
		uint8_t c = lname[i];

		if (c >= '0' && c <= '9')
			token = token << 4 | (uint64_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			token = token << 4 | (uint64_t)(c - 'a' + 10);
		else
			return true;
	}
	/* f->cur stays while stats_lock is held; a check of a set replaced meanwhile is over. */
	pthread_mutex_lock(&f->stats_lock);
	s = f->cur;
	for (size_t k = 0; token && k < s->routes->n_servers; k++) {
		if (atomic_load(&s->up[k]->loop_token) != token)
			continue;
		atomic_store_explicit(&s->up[k]->loop_seen, true, memory_order_release);
		hit = true;
	}
	pthread_mutex_unlock(&f->stats_lock);
	if (hit) {
		atomic_store(&f->loop_hit, true);
		if (write(f->evfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
			ndc_warn("forwarder: eventfd: %s", strerror(errno));
	}
	return true;
}

void ndc_forwarder_loop_check(struct ndc_forwarder *f)
{
	uint64_t one = 1;

	atomic_store(&f->loop_armed, true);
	atomic_store(&f->loop_req, true);
	if (write(f->evfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		ndc_warn("forwarder: eventfd: %s", strerror(errno));
}
