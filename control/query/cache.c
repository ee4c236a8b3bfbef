// SPDX-License-Identifier: MIT
/*
 * Answer cache. The table is split into shards by key hash, each shard with its own mutex, hash
 * buckets and LRU list, so concurrent lookups of different names rarely contend. One entry is one
 * allocation: bookkeeping, then the struct ndc_answer with its data, then the key name.
 *
 * Bounds: max_entries and max_bytes are divided evenly between the shards. The shard count is a
 * power of two up to 64, lowered for small caches so that every shard can hold at least
 * NDC_SHARD_MIN_ENTRIES entries and the largest possible entry; a small cache is therefore one
 * shard with an exact global LRU, a big one has per-shard LRU order (the usual approximation).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ndc/abi.h>

#include "internal.h"
#include "query/query.h"

#define NDC_SHARDS_MAX 64
#define NDC_SHARD_MIN_ENTRIES 64
/* Entries looked at from the LRU tail for dead (expired past stale_max) ones before evicting a
 * live one: bounded so that a put stays O(1). Lookups remove dead entries they meet as well. */
#define NDC_DEAD_SCAN 8

struct entry {
	struct entry *hnext;
	struct entry *prev, *next; /* LRU: shard head is the most recently used */
	uint64_t hash;
	uint64_t stored_ms;
	uint64_t expire_ms;
	size_t size;	   /* what the entry counts against max_bytes */
	uint64_t gen;	   /* which put made it: ndc_cache_due and ndc_cache_gen tell it */
	uint64_t due_ms;   /* its prefetch point (0: none) */
	uint32_t heap_idx; /* in the shard's due heap, NOT_DUE when not */
	uint32_t hits;	   /* fresh hits since it was stored (user space only) */
	uint16_t qtype, qclass;
	uint8_t nlen;
	struct ndc_answer ans; /* data follows, then the nlen bytes of the name */
};

#define NOT_DUE UINT32_MAX

struct shard {
	pthread_mutex_t lock;
	struct entry **buckets;
	uint32_t nbuckets; /* power of two */
	uint32_t count, max_entries;
	uint64_t bytes, max_bytes;
	struct entry lru; /* sentinel */
	/* Entries with a prefetch point, a binary min-heap on due_ms (prefetch.c reads it). */
	struct entry **due;
	uint32_t ndue, due_cap;
	uint64_t hits, misses, stale_hits, inserts, evictions;
	uint64_t wait_max_ns, hold_max_ns, contended; /* shard_lock, ndc_cache_put */
} __attribute__((aligned(64)));

struct ndc_cache {
	struct ndc_cache_opts opts; /* ndc_cache_set_limits may change them: atomic loads */
	uint32_t nshards;
	struct shard *shards;
	ndc_cache_hook_fn hook; /* set before the cache is shared, never changed after */
	void *hook_arg;
	uint32_t prefetch_pct; /* ndc_cache_set_prefetch; atomic */
	uint64_t gen;	       /* of the last put; atomic */
	uint32_t due_next;     /* the shard ndc_cache_due starts at; atomic */
};

uint64_t ndc_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * Takes a worker's shard lock, timing the wait only when there is one: a free lock costs no
 * clock read, and a wait is measured from just before it blocks (ndcache_cache_lock_wait_max_us).
 */
static void shard_lock(struct shard *s)
{
	uint64_t t0, w;

	if (!pthread_mutex_trylock(&s->lock))
		return;
	t0 = now_ns();
	pthread_mutex_lock(&s->lock);
	w = now_ns() - t0;
	s->contended++;
	if (w > s->wait_max_ns)
		s->wait_max_ns = w;
}

static size_t entry_size(size_t data_len, size_t nlen)
{
	return sizeof(struct entry) + data_len + nlen;
}

static const uint8_t *entry_name(const struct entry *e)
{
	return e->ans.data + e->ans.len;
}

static struct shard *shard_of(struct ndc_cache *c, uint64_t hash)
{
	return &c->shards[(hash >> 48) & (c->nshards - 1)];
}

static void lru_unlink(struct entry *e)
{
	e->prev->next = e->next;
	e->next->prev = e->prev;
}

static void lru_push_front(struct shard *s, struct entry *e)
{
	e->next = s->lru.next;
	e->prev = &s->lru;
	s->lru.next->prev = e;
	s->lru.next = e;
}

static struct entry **bucket_find(struct shard *s, uint64_t hash, const uint8_t *lname, size_t nlen,
				  uint16_t qtype, uint16_t qclass)
{
	struct entry **pp = &s->buckets[hash & (s->nbuckets - 1)];

	for (; *pp; pp = &(*pp)->hnext) {
		struct entry *e = *pp;

		if (e->hash == hash && e->nlen == nlen && e->qtype == qtype &&
		    e->qclass == qclass && memcmp(entry_name(e), lname, nlen) == 0)
			return pp;
	}
	return pp;
}

/* ---- the due heap ---- */

static void heap_set(struct shard *s, uint32_t i, struct entry *e)
{
	s->due[i] = e;
	e->heap_idx = i;
}

static void heap_up(struct shard *s, uint32_t i)
{
	struct entry *e = s->due[i];

	while (i > 0 && s->due[(i - 1) / 2]->due_ms > e->due_ms) {
		heap_set(s, i, s->due[(i - 1) / 2]);
		i = (i - 1) / 2;
	}
	heap_set(s, i, e);
}

static void heap_down(struct shard *s, uint32_t i)
{
	struct entry *e = s->due[i];

	for (;;) {
		uint32_t k = 2 * i + 1;

		if (k >= s->ndue)
			break;
		if (k + 1 < s->ndue && s->due[k + 1]->due_ms < s->due[k]->due_ms)
			k++;
		if (s->due[k]->due_ms >= e->due_ms)
			break;
		heap_set(s, i, s->due[k]);
		i = k;
	}
	heap_set(s, i, e);
}

/* Without room (no memory to grow) the entry is simply never prefetched. */
static void heap_push(struct shard *s, struct entry *e)
{
	if (s->ndue == s->due_cap) {
		uint32_t cap = s->due_cap ? s->due_cap * 2 : 64;
		struct entry **v = realloc(s->due, cap * sizeof(*v));

		if (!v)
			return;
		s->due = v;
		s->due_cap = cap;
	}
	heap_set(s, s->ndue++, e);
	heap_up(s, s->ndue - 1);
}

static void heap_remove(struct shard *s, struct entry *e)
{
	uint32_t i = e->heap_idx;
	struct entry *m;

	if (i == NOT_DUE)
		return;
	e->heap_idx = NOT_DUE;
	if (i == --s->ndue)
		return;
	m = s->due[s->ndue];
	heap_set(s, i, m);
	heap_up(s, i);
	heap_down(s, m->heap_idx);
}

static void entry_remove(struct ndc_cache *c, struct shard *s, struct entry *e, bool replaced)
{
	struct entry **pp = &s->buckets[e->hash & (s->nbuckets - 1)];

	if (c->hook && !replaced)
		c->hook(c->hook_arg, NULL, entry_name(e), e->nlen, e->qtype, e->qclass, 0);

	while (*pp != e)
		pp = &(*pp)->hnext;
	*pp = e->hnext;
	heap_remove(s, e);
	lru_unlink(e);
	s->count--;
	s->bytes -= e->size;
	free(e);
}

static bool entry_dead(const struct ndc_cache *c, const struct entry *e, uint64_t now_ms)
{
	return now_ms >= e->expire_ms &&
	       now_ms - e->expire_ms >=
		   (uint64_t)__atomic_load_n(&c->opts.stale_max, __ATOMIC_RELAXED) * 1000;
}

static bool shard_full(const struct shard *s, size_t need)
{
	return s->count + 1 > s->max_entries || s->bytes + need > s->max_bytes;
}

/* Makes room for an entry of need bytes: dead entries near the tail first, then the LRU tail. */
static void shard_make_room(struct ndc_cache *c, struct shard *s, size_t need, uint64_t now_ms)
{
	struct entry *e = s->lru.prev;

	for (int i = 0; i < NDC_DEAD_SCAN && e != &s->lru && shard_full(s, need); i++) {
		struct entry *prev = e->prev;

		if (entry_dead(c, e, now_ms)) {
			entry_remove(c, s, e, false);
			s->evictions++;
		}
		e = prev;
	}
	while (s->lru.prev != &s->lru && shard_full(s, need)) {
		entry_remove(c, s, s->lru.prev, false);
		s->evictions++;
	}
}

/* Each shard's share of the limits, never below what one shard needs to work. */
static void shard_limits(const struct ndc_cache_opts *opts, uint32_t n, uint32_t *ret_entries,
			 uint64_t *ret_bytes)
{
	uint64_t biggest = entry_size(NDC_ANSWER_DATA_MAX, NDC_NAME_MAX);

	*ret_entries = opts->max_entries / n;
	*ret_bytes = opts->max_bytes / n;
	if (n > 1 && *ret_entries < NDC_SHARD_MIN_ENTRIES)
		*ret_entries = NDC_SHARD_MIN_ENTRIES;
	if (n > 1 && *ret_bytes < biggest)
		*ret_bytes = biggest;
}

int ndc_cache_new(const struct ndc_cache_opts *opts, struct ndc_cache **ret)
{
	struct ndc_cache *c;
	uint32_t n = NDC_SHARDS_MAX, i;
	uint64_t biggest = entry_size(NDC_ANSWER_DATA_MAX, NDC_NAME_MAX);

	if (!opts || !ret || !opts->max_entries || !opts->max_bytes)
		return -EINVAL;
	while (n > 1 &&
	       (opts->max_entries / n < NDC_SHARD_MIN_ENTRIES || opts->max_bytes / n < biggest))
		n /= 2;

	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->opts = *opts;
	c->nshards = n;
	if (posix_memalign((void **)&c->shards, 64, n * sizeof(*c->shards)))
		goto err_cache;
	memset(c->shards, 0, n * sizeof(*c->shards));
	for (i = 0; i < n; i++) {
		struct shard *s = &c->shards[i];
		uint64_t fit;
		uint32_t nb = 16;

		shard_limits(opts, n, &s->max_entries, &s->max_bytes);
		fit = s->max_bytes / sizeof(struct entry);
		/* Load factor at most 1 when full; no resizing, ever. */
		while (nb < s->max_entries && nb < fit && nb < (1u << 24))
			nb *= 2;
		s->nbuckets = nb;
		s->buckets = calloc(nb, sizeof(*s->buckets));
		if (!s->buckets)
			goto err_shards;
		s->lru.next = s->lru.prev = &s->lru;
		pthread_mutex_init(&s->lock, NULL);
	}
	*ret = c;
	return 0;

err_shards:
	while (i--) {
		pthread_mutex_destroy(&c->shards[i].lock);
		free(c->shards[i].buckets);
	}
	free(c->shards);
err_cache:
	free(c);
	return -ENOMEM;
}

void ndc_cache_free(struct ndc_cache *c)
{
	if (!c)
		return;
	for (uint32_t i = 0; i < c->nshards; i++) {
		struct shard *s = &c->shards[i];

		while (s->lru.next != &s->lru) {
			struct entry *e = s->lru.next;

			lru_unlink(e);
			free(e);
		}
		free(s->buckets);
		free(s->due);
		pthread_mutex_destroy(&s->lock);
	}
	free(c->shards);
	free(c);
}

/* NXDOMAIN or NODATA, a NODATA behind a CNAME chain included (RFC 2308 2.2.1). */
static bool answer_negative(const struct ndc_answer *a, uint16_t qtype)
{
	uint32_t ttl;

	return ndc_answer_cache_ttl(a, qtype, &ttl) != 0 || a->rcode == NDC_RCODE_NXDOMAIN;
}

/*
 * When an answer stored at now_ms for ttl seconds is refreshed: before_pct of its TTL ahead of
 * expiry, in whole seconds rounded up as CoreDNS counts it (TTL 5 at 10%: 1 s before, when a
 * client would see TTL 1), but never in the first half of its life, so that an entry of a few
 * seconds can still gather its hits first. 0: no prefetch.
 */
static uint64_t prefetch_point(uint32_t before_pct, uint32_t ttl, uint64_t now_ms)
{
	uint64_t window;

	if (!before_pct)
		return 0;
	window = ((uint64_t)ttl * before_pct + 99) / 100 * 1000;
	if (window > (uint64_t)ttl * 500)
		window = (uint64_t)ttl * 500;
	return now_ms + (uint64_t)ttl * 1000 - window;
}

/* The cap of what an answer to qtype may say and live: max_ttl, neg_max_ttl if negative. */
static uint32_t ttl_cap(const struct ndc_cache *c, const struct ndc_answer *a, uint16_t qtype)
{
	return answer_negative(a, qtype) ? __atomic_load_n(&c->opts.neg_max_ttl, __ATOMIC_RELAXED)
					 : __atomic_load_n(&c->opts.max_ttl, __ATOMIC_RELAXED);
}

int ndc_cache_cap_ttls(const struct ndc_cache *c, struct ndc_answer *a, uint16_t qtype)
{
	return ndc_answer_cap_ttls(a, ttl_cap(c, a, qtype));
}

int ndc_cache_put(struct ndc_cache *c, const uint8_t *lname, size_t nlen, uint16_t qtype,
		  uint16_t qclass, const struct ndc_answer *a, uint32_t ttl, uint64_t now_ms)
{
	uint32_t cap = ttl_cap(c, a, qtype);
	size_t size = entry_size(a->len, nlen);
	uint64_t hash, t_locked;
	struct shard *s;
	struct entry *e, **pp;

	/* Never a question of a reserved or meta type (abi.h): nothing may be filed under it. */
	if (!nlen || nlen > NDC_NAME_MAX || ndc_qtype_verdict(qtype))
		return -EINVAL;
	if (ttl > cap)
		ttl = cap;
	if (!ttl)
		return 0;
	if (a->len > NDC_ANSWER_DATA_MAX ||
	    size > __atomic_load_n(&c->opts.max_bytes, __ATOMIC_RELAXED))
		return -E2BIG;

	/* Built outside the lock: only the table update is serialised. */
	e = malloc(size);
	if (!e)
		return -ENOMEM;
	hash = ndc_query_key_hash(lname, nlen, qtype, qclass);
	e->hash = hash;
	e->stored_ms = now_ms;
	e->expire_ms = now_ms + (uint64_t)ttl * 1000;
	e->gen = __atomic_add_fetch(&c->gen, 1, __ATOMIC_RELAXED);
	e->due_ms =
	    prefetch_point(__atomic_load_n(&c->prefetch_pct, __ATOMIC_RELAXED), ttl, now_ms);
	e->heap_idx = NOT_DUE;
	e->hits = 0;
	e->size = size;
	e->qtype = qtype;
	e->qclass = qclass;
	e->nlen = (uint8_t)nlen;
	memcpy(&e->ans, a, ndc_answer_size(a));
	memcpy(e->ans.data + a->len, lname, nlen);
	/* What it serves, in user space and in the kernel, never outlives the cap either. */
	if (ndc_answer_cap_ttls(&e->ans, cap) < 0) {
		free(e);
		return -EINVAL;
	}

	s = shard_of(c, hash);
	shard_lock(s);
	t_locked = now_ns();
	pp = bucket_find(s, hash, lname, nlen, qtype, qclass);
	if (*pp)
		entry_remove(c, s, *pp, true);
	shard_make_room(c, s, size, now_ms);
	pp = &s->buckets[hash & (s->nbuckets - 1)];
	e->hnext = *pp;
	*pp = e;
	lru_push_front(s, e);
	if (e->due_ms)
		heap_push(s, e);
	s->count++;
	s->bytes += size;
	s->inserts++;
	/* Under the shard lock, so a hook never sees a put and a remove of one key reordered. */
	if (c->hook)
		c->hook(c->hook_arg, &e->ans, lname, nlen, qtype, qclass, ttl);
	t_locked = now_ns() - t_locked;
	if (t_locked > s->hold_max_ns)
		s->hold_max_ns = t_locked;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

int ndc_cache_get(struct ndc_cache *c, const uint8_t *lname, size_t nlen, uint16_t qtype,
		  uint16_t qclass, uint64_t now_ms, bool allow_stale, struct ndc_answer *out,
		  size_t cap, uint32_t *ret_age)
{
	uint64_t hash = ndc_query_key_hash(lname, nlen, qtype, qclass);
	struct shard *s = shard_of(c, hash);
	struct entry *e;
	int r;

	shard_lock(s);
	e = *bucket_find(s, hash, lname, nlen, qtype, qclass);
	if (!e) {
		r = -ENOENT;
	} else if (now_ms < e->expire_ms) {
		r = 0;
	} else if (entry_dead(c, e, now_ms)) {
		entry_remove(c, s, e, false);
		s->evictions++;
		e = NULL;
		r = -ENOENT;
	} else {
		r = allow_stale ? -ESTALE : -ENOENT;
	}
	if (r != -ENOENT && e->ans.len > cap)
		r = -ENOSPC;
	if (r == 0 || r == -ESTALE) {
		memcpy(out, &e->ans, ndc_answer_size(&e->ans));
		if (ret_age)
			*ret_age =
			    now_ms > e->stored_ms ? (uint32_t)((now_ms - e->stored_ms) / 1000) : 0;
		lru_unlink(e);
		lru_push_front(s, e);
		if (r == 0 && e->hits < UINT32_MAX)
			e->hits++;
		if (r == 0)
			s->hits++;
		else
			s->stale_hits++;
	} else {
		s->misses++;
	}
	pthread_mutex_unlock(&s->lock);
	return r;
}

void ndc_cache_stats(struct ndc_cache *c, struct ndc_cache_stats *ret)
{
	memset(ret, 0, sizeof(*ret));
	for (uint32_t i = 0; i < c->nshards; i++) {
		struct shard *s = &c->shards[i];

		pthread_mutex_lock(&s->lock);
		ret->hits += s->hits;
		ret->misses += s->misses;
		ret->stale_hits += s->stale_hits;
		ret->inserts += s->inserts;
		ret->evictions += s->evictions;
		ret->entries += s->count;
		ret->bytes += s->bytes;
		ret->lock_contended += s->contended;
		if (s->wait_max_ns / 1000 > ret->lock_wait_max_us)
			ret->lock_wait_max_us = s->wait_max_ns / 1000;
		if (s->hold_max_ns / 1000 > ret->lock_hold_max_us)
			ret->lock_hold_max_us = s->hold_max_ns / 1000;
		pthread_mutex_unlock(&s->lock);
	}
}

int ndc_cache_set_limits(struct ndc_cache *c, const struct ndc_cache_opts *opts)
{
	if (!opts->max_entries || !opts->max_bytes)
		return -EINVAL;
	__atomic_store_n(&c->opts.max_entries, opts->max_entries, __ATOMIC_RELAXED);
	__atomic_store_n(&c->opts.max_bytes, opts->max_bytes, __ATOMIC_RELAXED);
	__atomic_store_n(&c->opts.max_ttl, opts->max_ttl, __ATOMIC_RELAXED);
	__atomic_store_n(&c->opts.neg_max_ttl, opts->neg_max_ttl, __ATOMIC_RELAXED);
	__atomic_store_n(&c->opts.stale_max, opts->stale_max, __ATOMIC_RELAXED);
	for (uint32_t i = 0; i < c->nshards; i++) {
		struct shard *s = &c->shards[i];

		pthread_mutex_lock(&s->lock);
		shard_limits(opts, c->nshards, &s->max_entries, &s->max_bytes);
		/* What is over the new limits goes, least recently used first. */
		while (s->lru.prev != &s->lru &&
		       (s->count > s->max_entries || s->bytes > s->max_bytes)) {
			entry_remove(c, s, s->lru.prev, false);
			s->evictions++;
		}
		pthread_mutex_unlock(&s->lock);
	}
	return 0;
}

size_t ndc_cache_drop(struct ndc_cache *c,
		      bool (*match)(void *arg, const uint8_t *lname, size_t nlen), void *arg)
{
	size_t n = 0;

	for (uint32_t i = 0; i < c->nshards; i++) {
		struct shard *s = &c->shards[i];
		struct entry *e, *prev;

		pthread_mutex_lock(&s->lock);
		for (e = s->lru.prev; e != &s->lru; e = prev) {
			prev = e->prev;
			if (match(arg, entry_name(e), e->nlen)) {
				entry_remove(c, s, e, false);
				n++;
			}
		}
		pthread_mutex_unlock(&s->lock);
	}
	return n;
}

void ndc_cache_set_hook(struct ndc_cache *c, ndc_cache_hook_fn fn, void *arg)
{
	c->hook = fn;
	c->hook_arg = arg;
}

/* ---- prefetch (prefetch.c) ---- */

void ndc_cache_set_prefetch(struct ndc_cache *c, uint32_t before_pct)
{
	__atomic_store_n(&c->prefetch_pct, before_pct < 100 ? before_pct : 0, __ATOMIC_RELAXED);
}

/* Takes the shard's due entries, earliest first, into out from *n on; expired ones only leave. */
static void shard_due(struct shard *s, uint64_t now_ms, struct ndc_cache_due *out, size_t max,
		      size_t *n)
{
	while (*n < max && s->ndue && s->due[0]->due_ms <= now_ms) {
		struct entry *e = s->due[0];
		struct ndc_cache_due *d = &out[*n];

		heap_remove(s, e);
		if (now_ms >= e->expire_ms)
			continue; /* too late to refresh: the next client's miss asks */
		memcpy(d->lname, entry_name(e), e->nlen);
		d->nlen = e->nlen;
		d->qtype = e->qtype;
		d->qclass = e->qclass;
		d->hits = e->hits;
		d->gen = e->gen;
		d->expire_ms = e->expire_ms;
		(*n)++;
	}
}

size_t ndc_cache_due(struct ndc_cache *c, uint64_t now_ms, struct ndc_cache_due *out, size_t max)
{
	uint32_t first = __atomic_fetch_add(&c->due_next, 1, __ATOMIC_RELAXED);
	size_t n = 0;

	/* Each call starts at the next shard: a small max cannot starve the last ones. */
	for (uint32_t i = 0; i < c->nshards && n < max; i++) {
		struct shard *s = &c->shards[(first + i) & (c->nshards - 1)];

		pthread_mutex_lock(&s->lock);
		shard_due(s, now_ms, out, max, &n);
		pthread_mutex_unlock(&s->lock);
	}
	return n;
}

int ndc_cache_gen(struct ndc_cache *c, const uint8_t *lname, size_t nlen, uint16_t qtype,
		  uint16_t qclass, uint64_t *ret_gen)
{
	uint64_t hash = ndc_query_key_hash(lname, nlen, qtype, qclass);
	struct shard *s = shard_of(c, hash);
	struct entry *e;

	pthread_mutex_lock(&s->lock);
	e = *bucket_find(s, hash, lname, nlen, qtype, qclass);
	if (e)
		*ret_gen = e->gen;
	pthread_mutex_unlock(&s->lock);
	return e ? 0 : -ENOENT;
}
