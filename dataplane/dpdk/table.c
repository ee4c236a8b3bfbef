// SPDX-License-Identifier: MIT
/*
 * The DPDK answer table. Keys and values are the BPF table's (include/ndc/abi.h), converted by
 * the same code (dataplane/base/value.c, entry.c), and the publishing rules are fastpath.c's:
 * an entry holding another name (a hash collision) is never overwritten nor deleted by this name,
 * so a collision costs a miss, never a wrong answer.
 *
 * Readers are the polling lcores. The hash is created with RTE_HASH_EXTRA_FLAGS_RW_CONCURRENCY_LF
 * (lookups take no lock, a data pointer is replaced with one atomic store) and attached to an RCU
 * QSBR variable in defer-queue mode, so a deleted key's slot and value are reclaimed only after
 * every lcore has passed a quiescent state. A replaced value, or NXDOMAIN template, waits in a
 * FIFO of our own with the QSBR token of its replacement (rte_rcu_qsbr_start) until that token
 * has been acknowledged (rte_rcu_qsbr_check): the rte_rcu_qsbr_dq API does the same but is
 * experimental in DPDK 22.11. Writers (the publisher's threads) are
 * serialised by a mutex: the hash is created without MULTI_WRITER_ADD, whose per-lcore slot
 * caches would be of no use to threads that are not lcores.
 *
 * The table follows its content, as the kernel's does (dataplane/fastpath/table.c): the hash is
 * made for MIN_ENTRIES keys at first; a new key that would load it past LOAD_GROW, or that finds
 * no room, has the writer make a hash for LOAD_TARGET of the keys, copy every key into it (the
 * same value pointers: values are never written in place), and switch the readers to it with one
 * atomic store; a removal that leaves it under LOAD_SHRINK does the same, smaller. The old hash
 * stays whole and unchanged until then, so a reader in it finds every key it held, and it waits
 * in the FIFO above like a replaced value: freed, with the keys deleted from it earlier (its own
 * defer queue, all of whose tokens came before), once every lcore has reported a quiescent state
 * after the switch. dataplane.table_size (max_entries) is a cap, never an allocation.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rte_errno.h>
#include <rte_hash.h>
#include <rte_hash_crc.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_random.h>
#include <rte_rcu_qsbr.h>

#include <ndc/entry.h>
#include <ndc/log.h>

#include "internal.h"

#define DEFAULT_ENTRIES 65536
#define MIN_ENTRIES 256 /* the sample cluster's few hundred entries fit at the target load */
#define VALUE_ALIGN 64
#define RETIRED_MAX 65536 /* then a writer waits for the readers instead of queueing more */

/*
 * Loads, in percent of the keys a hash is made for: a resize makes it for LOAD_TARGET; more
 * than LOAD_GROW grows it, fewer than LOAD_SHRINK shrinks it (hysteresis: both far from the
 * target, so a table at either edge is not rebuilt back and forth). The kernel table's figures.
 */
#define LOAD_TARGET 70
#define LOAD_GROW 90
#define LOAD_SHRINK 55

/* What was replaced (a value, a whole hash), how to free it, and the token readers must ack. */
struct retired {
	void *p;
	void (*release)(void *p);
	uint64_t token;
};

struct ndc_dpdk_table {
	struct rte_hash *h; /* __atomic: the live hash; replaced whole to grow or shrink */
	struct rte_rcu_qsbr *qsbr;
	pthread_mutex_t lock; /* writers, and the retired FIFO */
	struct retired *retired;
	uint32_t r_head, r_len, r_cap; /* a ring: r_len entries from r_head */
	struct ndc_fp_value *nx;       /* __atomic: the NXDOMAIN template */
	struct ndc_fp_config cfg;      /* flags: __atomic */
	uint32_t seed;		       /* of key_hash, the same for every hash */
	/* under lock; read by ndc_dpdk_table_stats */
	uint32_t keys;	     /* in h */
	uint32_t slots;	     /* keys h is made for */
	uint32_t max_keys;   /* the cap */
	uint64_t hash_bytes; /* EAL memory that making h took */
	uint64_t rebuilds;
};

_Static_assert(sizeof(struct ndc_fp_value) % VALUE_ALIGN == 0, "values fill whole cache lines");

static uint64_t monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * The key already holds a 64-bit hash of the name, but not a keyed one (abi.h): names can be
 * made to collide on purpose. CRC32 over the whole key with a random seed spreads them over the
 * buckets anyway, as the kernel's jhash with its random seed does for the BPF table.
 */
static uint32_t key_hash(const void *key, uint32_t len, uint32_t init)
{
	return rte_hash_crc(key, len, init);
}

static struct ndc_fp_value *value_alloc(void)
{
	return aligned_alloc(VALUE_ALIGN, sizeof(struct ndc_fp_value));
}

/* The hash's defer queue frees a deleted key's value with this. */
static void free_key_data(void *p, void *key_data)
{
	(void)p;
	free(key_data);
}

/* Frees what was retired and whose readers have all moved on (wait: the oldest, waiting). */
static void reclaim(struct ndc_dpdk_table *t, bool wait)
{
	while (t->r_len) {
		struct retired *r = &t->retired[t->r_head];

		if (rte_rcu_qsbr_check(t->qsbr, r->token, wait) != 1)
			return;
		r->release(r->p);
		t->r_head = (t->r_head + 1) % t->r_cap;
		t->r_len--;
		wait = false;
	}
}

/* Frees p with free_fn after the next grace period; under t->lock. */
static void retire(struct ndc_dpdk_table *t, void *p, void (*free_fn)(void *))
{
	uint32_t cap;

	if (!p)
		return;
	reclaim(t, false);
	if (t->r_len == t->r_cap && t->r_cap < RETIRED_MAX) {
		struct retired *n;

		cap = t->r_cap ? t->r_cap * 2 : 64;
		n = malloc(cap * sizeof(*n));
		if (n) {
			for (uint32_t i = 0; i < t->r_len; i++)
				n[i] = t->retired[(t->r_head + i) % t->r_cap];
			free(t->retired);
			t->retired = n;
			t->r_head = 0;
			t->r_cap = cap;
		}
	}
	if (t->r_len == t->r_cap) {
		/* Readers are far behind (or memory is short): wait for the oldest to go. */
		reclaim(t, true);
		if (t->r_len == t->r_cap) { /* nothing was ever queued */
			rte_rcu_qsbr_synchronize(t->qsbr, RTE_QSBR_THRID_INVALID);
			free_fn(p);
			return;
		}
	}
	t->retired[(t->r_head + t->r_len) % t->r_cap] =
	    (struct retired){.p = p, .release = free_fn, .token = rte_rcu_qsbr_start(t->qsbr)};
	t->r_len++;
}

static void free_hash(void *h)
{
	/* Its values are the live hash's (or were freed by its defer queue, which this drains). */
	rte_hash_free(h);
}

/* Bytes allocated from the EAL's heaps, every NUMA socket's. */
static uint64_t heap_bytes(void)
{
	uint64_t n = 0;

	for (unsigned int i = 0; i < rte_socket_count(); i++) {
		struct rte_malloc_socket_stats st;

		if (rte_malloc_get_socket_stats(rte_socket_id_by_idx(i), &st) == 0)
			n += st.heap_allocsz_bytes;
	}
	return n;
}

/*
 * A hash for entries keys, attached to the table's QSBR in defer-queue mode; *ret_bytes: the EAL
 * memory it took (measured: the heaps' growth around it, under t->lock, the only allocator of
 * EAL memory once the dataplane runs). 0, or -errno (logged).
 */
static int hash_new(struct ndc_dpdk_table *t, uint32_t entries, struct rte_hash **ret,
		    uint64_t *ret_bytes)
{
	static unsigned int seq;
	uint64_t before = heap_bytes();
	char name[RTE_HASH_NAMESIZE];
	struct rte_hash *h;

	/*
	 * Unique among the hashes alive (a retired one lives on for a grace period), and short: the
	 * defer queue's ring is named "RCU_DQ_HASH_RCU_<name>", cut at 29 characters.
	 */
	snprintf(name, sizeof(name), "ndc_t%06x",
		 __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED) & 0xffffff);
	struct rte_hash_parameters hp = {
	    .name = name,
	    .entries = entries,
	    .key_len = sizeof(struct ndc_fp_key),
	    .hash_func = key_hash,
	    .hash_func_init_val = t->seed,
	    .socket_id = SOCKET_ID_ANY,
	    /*
	     * EXT_TABLE: buckets that overflow chain into extra ones instead of failing an insert
	     * while the table is far from full (cuckoo displacement gives up on long paths).
	     */
	    .extra_flag = RTE_HASH_EXTRA_FLAGS_RW_CONCURRENCY_LF | RTE_HASH_EXTRA_FLAGS_EXT_TABLE,
	};
	h = rte_hash_create(&hp);
	if (!h) {
		int err = rte_errno ? -rte_errno : -ENOMEM;

		ndc_err("dpdk: answer table of %u entries: %s", entries, rte_strerror(-err));
		return err;
	}
	struct rte_hash_rcu_config rc = {
	    .v = t->qsbr,
	    .mode = RTE_HASH_QSBR_MODE_DQ,
	    .free_key_data_func = free_key_data,
	    .key_data_ptr = t,
	};
	if (rte_hash_rcu_qsbr_add(h, &rc)) {
		int err = -rte_errno;

		ndc_err("dpdk: answer table's RCU: %s", rte_strerror(rte_errno));
		rte_hash_free(h);
		return err;
	}
	*ret = h;
	*ret_bytes = heap_bytes() - before;
	return 0;
}

/* The keys a hash is made for to hold n at the target load, within [MIN_ENTRIES, the cap]. */
static uint32_t entries_for(const struct ndc_dpdk_table *t, uint64_t n)
{
	uint64_t e = (n * 100 + LOAD_TARGET - 1) / LOAD_TARGET;

	if (e < MIN_ENTRIES)
		e = MIN_ENTRIES;
	return e > t->max_keys ? t->max_keys : (uint32_t)e;
}

/*
 * Copies every key of the live hash into a new one made for entries keys, switches the readers
 * to it, and retires the old one. Under t->lock. On failure the live hash stays as it was.
 */
static int rebuild(struct ndc_dpdk_table *t, uint32_t entries)
{
	struct rte_hash *old = t->h, *h;
	uint32_t iter = 0;
	const void *key;
	uint64_t bytes;
	void *data;
	int r;

	r = hash_new(t, entries, &h, &bytes);
	if (r < 0)
		return r;
	while (rte_hash_iterate(old, &key, &data, &iter) >= 0) {
		r = rte_hash_add_key_data(h, key, data);
		if (r < 0) {
			rte_hash_free(h); /* nothing deleted from it: no value of ours freed */
			return r;
		}
	}
	__atomic_store_n(&t->h, h, __ATOMIC_RELEASE);
	t->slots = entries;
	t->hash_bytes = bytes;
	t->rebuilds++;
	retire(t, old, free_hash);
	return 0;
}

/*
 * Room for one more key: grows when it would pass LOAD_GROW (or, with full, when the hash found
 * no room for it), to LOAD_TARGET and at least an eighth more. -ENOSPC at the cap.
 */
static int make_room(struct ndc_dpdk_table *t, bool full)
{
	uint64_t want = (uint64_t)t->keys + 1;
	uint32_t e;

	if (t->keys >= t->max_keys)
		return -ENOSPC;
	if (!full && want * 100 <= (uint64_t)t->slots * LOAD_GROW)
		return 0;
	if (t->slots == t->max_keys)
		return full ? -ENOSPC : 0;
	e = entries_for(t, want);
	if (e < t->slots + t->slots / 8 + 1)
		e = entries_for(t, ((uint64_t)t->slots + t->slots / 8 + 1) * LOAD_TARGET / 100);
	if (e <= t->slots)
		e = t->max_keys;
	return rebuild(t, e);
}

/* After a removal: a smaller hash when the load is under LOAD_SHRINK. */
static void maybe_shrink(struct ndc_dpdk_table *t)
{
	uint32_t e = entries_for(t, t->keys);

	if ((uint64_t)t->keys * 100 < (uint64_t)t->slots * LOAD_SHRINK && e < t->slots)
		(void)rebuild(t, e); /* failing leaves the table as it is: still right, bigger */
}

int ndc_dpdk_table_new(const struct ndc_dpdk_table_opts *o, struct ndc_dpdk_table **ret)
{
	struct ndc_dpdk_table *t;
	size_t qsz;
	int err;

	if (!o->config || o->max_readers == 0)
		return -EINVAL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	pthread_mutex_init(&t->lock, NULL);
	t->cfg = *o->config;
	t->cfg.flags &= ~(uint32_t)NDC_FP_C_SYNCED;
	t->max_keys = o->max_entries ? o->max_entries : DEFAULT_ENTRIES;
	t->seed = (uint32_t)rte_rand();

	qsz = rte_rcu_qsbr_get_memsize(o->max_readers);
	t->qsbr = rte_zmalloc("ndc_qsbr", qsz, RTE_CACHE_LINE_SIZE);
	if (!t->qsbr) {
		err = -ENOMEM;
		goto fail;
	}
	if (rte_rcu_qsbr_init(t->qsbr, o->max_readers)) {
		err = -rte_errno;
		goto fail;
	}
	t->slots = entries_for(t, 0);
	err = hash_new(t, t->slots, &t->h, &t->hash_bytes);
	if (err)
		goto fail;
	*ret = t;
	return 0;
fail:
	ndc_dpdk_table_free(t);
	return err ? err : -ENOMEM;
}

void ndc_dpdk_table_free(struct ndc_dpdk_table *t)
{
	const void *key;
	void *data;
	uint32_t iter = 0;

	if (!t)
		return;
	/* No reader is left: retired hashes (sharing the live one's values) and values go first. */
	for (uint32_t i = 0; i < t->r_len; i++) {
		struct retired *r = &t->retired[(t->r_head + i) % t->r_cap];

		r->release(r->p);
	}
	free(t->retired);
	if (t->h) {
		/* every value still in the table goes now */
		while (rte_hash_iterate(t->h, &key, &data, &iter) >= 0)
			free(data);
		rte_hash_free(t->h);
	}
	free(t->nx);
	rte_free(t->qsbr);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

struct rte_rcu_qsbr *ndc_dpdk_table_qsbr(struct ndc_dpdk_table *t)
{
	return t->qsbr;
}

/* ---------------------------------------------------------------------------------------------
 * Writers.
 */

static bool value_is(const struct ndc_fp_value *v, const uint8_t *lname, size_t nlen)
{
	return v->name_len == nlen && memcmp(v->name, lname, nlen) == 0;
}

/*
 * Puts val (heap, owned from here on, its name set) at key: fastpath.c's publish. A new key may
 * have the hash grow first (make_room), or again when the hash found no room for it.
 */
static int put(struct ndc_dpdk_table *t, const struct ndc_fp_key *key, struct ndc_fp_value *val)
{
	void *cur = NULL;
	int r;

	pthread_mutex_lock(&t->lock);
	r = rte_hash_lookup_data(t->h, key, &cur);
	if (r >= 0 && !value_is(cur, val->name, val->name_len)) {
		r = -ENOSPC; /* another name holds the key: it stays */
		goto out;
	}
	if (r < 0) {
		cur = NULL;
		r = make_room(t, false);
		if (r < 0)
			goto out;
	}
	r = rte_hash_add_key_data(t->h, key, val);
	if (r == -ENOSPC && !cur) {
		/* slots of deleted keys still waiting for their grace period, or a full bucket */
		r = make_room(t, true);
		if (r == 0)
			r = rte_hash_add_key_data(t->h, key, val);
	}
	if (r < 0)
		goto out;
	if (!cur)
		t->keys++;
	retire(t, cur, free);
	val = NULL;
out:
	pthread_mutex_unlock(&t->lock);
	free(val);
	return r < 0 ? r : 0;
}

int ndc_dpdk_table_publish(struct ndc_dpdk_table *t, const uint8_t *lname, size_t nlen,
			   uint16_t qtype, const struct ndc_answer *a, uint32_t ttl_s)
{
	struct ndc_fp_value *val = value_alloc();
	struct ndc_fp_key key;
	int r;

	if (!val)
		return -ENOMEM;
	r = ndc_fastpath_entry(lname, nlen, qtype, a, ttl_s, &key, val);
	if (r < 0) {
		free(val);
		return r;
	}
	return put(t, &key, val);
}

int ndc_dpdk_table_publish_pass(struct ndc_dpdk_table *t, const uint8_t *lname, size_t nlen)
{
	return ndc_dpdk_table_publish(t, lname, nlen, NDC_FP_QTYPE_OTHER, NULL, 0);
}

/* Deletes key if check() says 0 of its entry; the hash frees the value after a grace period. */
static int del_if(struct ndc_dpdk_table *t, const struct ndc_fp_key *key,
		  int (*check)(const struct ndc_fp_value *v, const void *arg), const void *arg)
{
	void *cur;
	int r;

	pthread_mutex_lock(&t->lock);
	r = rte_hash_lookup_data(t->h, key, &cur);
	if (r >= 0)
		r = check(cur, arg);
	if (r >= 0)
		r = rte_hash_del_key(t->h, key);
	if (r >= 0) {
		t->keys--;
		maybe_shrink(t);
	}
	pthread_mutex_unlock(&t->lock);
	return r < 0 ? r : 0;
}

struct name_arg {
	const uint8_t *lname;
	size_t nlen;
};

static int holds_name(const struct ndc_fp_value *v, const void *arg)
{
	const struct name_arg *n = arg;

	return value_is(v, n->lname, n->nlen) ? 0 : -ENOENT;
}

static int has_expired(const struct ndc_fp_value *v, const void *arg)
{
	(void)arg;
	return v->expire_ns && monotonic_ns() >= v->expire_ns ? 0 : -EAGAIN;
}

int ndc_dpdk_table_unpublish(struct ndc_dpdk_table *t, const uint8_t *lname, size_t nlen,
			     uint16_t qtype)
{
	struct name_arg n = {lname, nlen};
	struct ndc_fp_key key;
	int r;

	r = ndc_fastpath_key(lname, nlen, qtype, &key);
	if (r < 0)
		return r;
	return del_if(t, &key, holds_name, &n);
}

int ndc_dpdk_table_unpublish_expired(struct ndc_dpdk_table *t, const struct ndc_fp_key *k)
{
	return del_if(t, k, has_expired, NULL);
}

int ndc_dpdk_table_set_nx(struct ndc_dpdk_table *t, const struct ndc_answer *nx)
{
	struct ndc_fp_value *val = value_alloc(), *old;
	int r;

	if (!val)
		return -ENOMEM;
	r = ndc_fastpath_nx_value(nx, val);
	if (r < 0) {
		free(val);
		return r;
	}
	pthread_mutex_lock(&t->lock);
	old = __atomic_exchange_n(&t->nx, val, __ATOMIC_RELEASE);
	retire(t, old, free);
	pthread_mutex_unlock(&t->lock);
	return 0;
}

int ndc_dpdk_table_set_synced(struct ndc_dpdk_table *t, bool synced)
{
	if (synced)
		__atomic_fetch_or(&t->cfg.flags, NDC_FP_C_SYNCED, __ATOMIC_RELEASE);
	else
		__atomic_fetch_and(&t->cfg.flags, ~(uint32_t)NDC_FP_C_SYNCED, __ATOMIC_RELEASE);
	return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Readers.
 */

const struct ndc_fp_value *ndc_dpdk_table_lookup(const struct ndc_dpdk_table *t,
						 const struct ndc_fp_key *k)
{
	void *v;

	/* the hash this lcore reads stays whole until its next quiescent report */
	const struct rte_hash *h = __atomic_load_n(&t->h, __ATOMIC_ACQUIRE);

	return rte_hash_lookup_data(h, k, &v) >= 0 ? v : NULL;
}

const struct ndc_fp_value *ndc_dpdk_table_nx(const struct ndc_dpdk_table *t)
{
	return __atomic_load_n(&t->nx, __ATOMIC_ACQUIRE);
}

const struct ndc_fp_config *ndc_dpdk_table_config(const struct ndc_dpdk_table *t)
{
	return &t->cfg;
}

uint32_t ndc_dpdk_table_flags(const struct ndc_dpdk_table *t)
{
	return __atomic_load_n(&t->cfg.flags, __ATOMIC_ACQUIRE);
}

void ndc_dpdk_table_stats(struct ndc_dpdk_table *t, struct ndc_dpdk_table_stats *ret)
{
	pthread_mutex_lock(&t->lock);
	ret->keys = t->keys;
	ret->max_keys = t->max_keys;
	ret->slots = t->slots;
	/* the values are malloc(3)'s: one each, a whole number of cache lines */
	ret->bytes = t->hash_bytes + (uint64_t)t->keys * sizeof(struct ndc_fp_value);
	ret->needed = (uint64_t)t->keys * (sizeof(struct ndc_fp_key) + sizeof(struct ndc_fp_value));
	ret->rebuilds = t->rebuilds;
	pthread_mutex_unlock(&t->lock);
}
