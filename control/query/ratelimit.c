// SPDX-License-Identifier: MIT
/*
 * Per-client token buckets for the queries that go upstream. The table is set-associative: a
 * client's set is chosen by a hash keyed with a random seed (so no one can aim a flood of source
 * addresses at another pod's set), and a set is NDC_RL_WAYS slots looked at in a row. Sets are
 * guarded by lock stripes: a lookup is one short mutex and at most eight 16-byte compares.
 *
 * Tokens are kept in thousandths, so that qps tokens a second are exactly qps thousandths a
 * millisecond and refilling needs no division.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <ndc/log.h>

#include "internal.h"

#define NDC_RL_SETS (NDC_RL_CLIENTS / NDC_RL_WAYS)
#define NDC_RL_STRIPES 64
#define NDC_RL_LOG_MS 1000 /* at most one warning a second */
#define MILLI 1000ULL

_Static_assert((NDC_RL_SETS & (NDC_RL_SETS - 1)) == 0, "sets: a power of two");

struct client {
	uint8_t addr[16]; /* IPv6, or IPv4-mapped */
	bool used;
	uint64_t tokens; /* thousandths of a token */
	uint64_t last_ms;
};

struct stripe {
	pthread_mutex_t lock;
} __attribute__((aligned(64)));

struct ndc_ratelimit {
	uint32_t qps, burst; /* atomic loads: configure changes them live */
	uint64_t seed[2];
	struct stripe stripes[NDC_RL_STRIPES];
	struct client *table;				    /* NDC_RL_SETS sets of NDC_RL_WAYS */
	uint64_t allowed, limited, evicted_active, clients; /* atomics */
	uint64_t log_ms;				    /* last warning; atomic */
	uint64_t unlogged;				    /* limited since then; atomic */
};

#define INC(rl, field) __atomic_fetch_add(&(rl)->field, 1, __ATOMIC_RELAXED)
#define LOAD(p) __atomic_load_n(p, __ATOMIC_RELAXED)

static int check(const struct ndc_ratelimit_opts *o)
{
	return !o || (o->qps && !o->burst) ? -EINVAL : 0;
}

int ndc_ratelimit_new(const struct ndc_ratelimit_opts *opts, struct ndc_ratelimit **ret)
{
	struct ndc_ratelimit *rl;
	int err = check(opts);

	if (err)
		return err;
	rl = calloc(1, sizeof(*rl));
	if (!rl)
		return -ENOMEM;
	rl->table = calloc(NDC_RL_CLIENTS, sizeof(*rl->table));
	if (!rl->table) {
		free(rl);
		return -ENOMEM;
	}
	/* Without randomness the sets are still right, only predictable. */
	if (getrandom(rl->seed, sizeof(rl->seed), GRND_NONBLOCK) != sizeof(rl->seed))
		rl->seed[0] = (uint64_t)(uintptr_t)rl ^ 0x9e3779b97f4a7c15ULL;
	for (size_t i = 0; i < NDC_RL_STRIPES; i++)
		pthread_mutex_init(&rl->stripes[i].lock, NULL);
	rl->qps = opts->qps;
	rl->burst = opts->burst;
	*ret = rl;
	return 0;
}

void ndc_ratelimit_free(struct ndc_ratelimit *rl)
{
	if (!rl)
		return;
	for (size_t i = 0; i < NDC_RL_STRIPES; i++)
		pthread_mutex_destroy(&rl->stripes[i].lock);
	free(rl->table);
	free(rl);
}

int ndc_ratelimit_configure(struct ndc_ratelimit *rl, const struct ndc_ratelimit_opts *opts)
{
	int err = check(opts);

	if (err)
		return err;
	/* A reader may see the new qps with the old burst for one query: both are sane limits. */
	__atomic_store_n(&rl->burst, opts->burst, __ATOMIC_RELAXED);
	__atomic_store_n(&rl->qps, opts->qps, __ATOMIC_RELAXED);
	return 0;
}

/* The 16-byte key of a peer: false for a family that is not IP. */
static bool peer_key(const struct sockaddr_storage *ss, uint8_t key[16])
{
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)ss;

		memset(key, 0, 10);
		key[10] = key[11] = 0xff;
		memcpy(key + 12, &in->sin_addr, 4);
		return true;
	}
	if (ss->ss_family == AF_INET6) {
		memcpy(key, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
		return true;
	}
	return false;
}

/* The address alone: the source port of a query says nothing of who sent it. */
static void peer_text(const uint8_t key[16], char *buf, size_t len)
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

	if (!memcmp(key, mapped, sizeof(mapped)))
		inet_ntop(AF_INET, key + 12, buf, (socklen_t)len);
	else
		inet_ntop(AF_INET6, key, buf, (socklen_t)len);
}

/* A keyed mix of the two halves (not cryptographic: it only has to spread unknown keys). */
static uint64_t key_hash(const struct ndc_ratelimit *rl, const uint8_t key[16])
{
	uint64_t a, b, h;

	memcpy(&a, key, 8);
	memcpy(&b, key + 8, 8);
	h = (a ^ rl->seed[0]) * 0x9e3779b97f4a7c15ULL;
	h ^= (b ^ rl->seed[1]) + (h >> 29);
	h *= 0xbf58476d1ce4e5b9ULL;
	h ^= h >> 32;
	h *= 0x94d049bb133111ebULL;
	return h ^ (h >> 31);
}

/* The client's bucket refilled to now. */
static uint64_t refilled(const struct client *c, uint64_t now_ms, uint32_t qps, uint32_t burst)
{
	uint64_t cap = burst * MILLI;
	uint64_t el = now_ms > c->last_ms ? now_ms - c->last_ms : 0;

	/* Past a full refill the product could only overflow: cap it before multiplying. */
	if (el >= cap / (qps ? qps : 1) + 1)
		return cap;
	return c->tokens + el * qps < cap ? c->tokens + el * qps : cap;
}

static void warn_limited(struct ndc_ratelimit *rl, const uint8_t key[16], uint64_t now_ms,
			 uint32_t qps, uint32_t burst)
{
	uint64_t last = LOAD(&rl->log_ms);
	char addr[64];
	uint64_t more;

	__atomic_fetch_add(&rl->unlogged, 1, __ATOMIC_RELAXED);
	if (last && now_ms - last < NDC_RL_LOG_MS)
		return;
	if (!__atomic_compare_exchange_n(&rl->log_ms, &last, now_ms, false, __ATOMIC_RELAXED,
					 __ATOMIC_RELAXED))
		return; /* another thread logs this second */
	more = __atomic_exchange_n(&rl->unlogged, 0, __ATOMIC_RELAXED);
	peer_text(key, addr, sizeof(addr));
	ndc_warn("forward.per_client: client %s over %u queries/s (burst %u) to the upstream: "
		 "answered SERVFAIL; %llu limited in all since the last such line",
		 addr, qps, burst, (unsigned long long)more);
}

bool ndc_ratelimit_allow(struct ndc_ratelimit *rl, const struct sockaddr_storage *peer,
			 uint64_t now_ms)
{
	uint32_t qps = LOAD(&rl->qps), burst = LOAD(&rl->burst);
	struct client *set, *c = NULL, *victim;
	struct stripe *st;
	uint8_t key[16];
	uint64_t h;
	bool ok;

	if (!qps || !peer_key(peer, key)) {
		INC(rl, allowed);
		return true;
	}
	h = key_hash(rl, key);
	set = &rl->table[(h & (NDC_RL_SETS - 1)) * NDC_RL_WAYS];
	/* The stripe is a function of the set: two threads never hold one set under two locks. */
	st = &rl->stripes[(h & (NDC_RL_SETS - 1)) % NDC_RL_STRIPES];
	pthread_mutex_lock(&st->lock);
	victim = &set[0];
	for (size_t i = 0; i < NDC_RL_WAYS; i++) {
		struct client *s = &set[i];

		if (s->used && !memcmp(s->addr, key, 16)) {
			c = s;
			break;
		}
		/* An empty slot first, else the least recently seen. */
		if (victim->used && (!s->used || s->last_ms < victim->last_ms))
			victim = s;
	}
	if (!c) {
		c = victim;
		if (!c->used)
			INC(rl, clients);
		else if (refilled(c, now_ms, qps, burst) < burst * MILLI)
			INC(rl, evicted_active);
		memcpy(c->addr, key, 16);
		c->used = true;
		c->tokens = burst * MILLI;
		c->last_ms = now_ms;
	}
	c->tokens = refilled(c, now_ms, qps, burst);
	if (now_ms > c->last_ms)
		c->last_ms = now_ms;
	ok = c->tokens >= MILLI;
	if (ok)
		c->tokens -= MILLI;
	pthread_mutex_unlock(&st->lock);
	if (ok) {
		INC(rl, allowed);
	} else {
		INC(rl, limited);
		warn_limited(rl, key, now_ms, qps, burst);
	}
	return ok;
}

void ndc_ratelimit_stats(struct ndc_ratelimit *rl, struct ndc_ratelimit_stats *ret)
{
	ret->allowed = LOAD(&rl->allowed);
	ret->limited = LOAD(&rl->limited);
	ret->evicted_active = LOAD(&rl->evicted_active);
	ret->clients = LOAD(&rl->clients);
}
