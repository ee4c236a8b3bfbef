// SPDX-License-Identifier: MIT
/*
 * The DPDK answer table. Keys and values are the BPF table's (include/ndc/abi.h), converted by
 * the same code (dataplane/fastpath/value.c), and the publishing rules are fastpath.c's: an entry
 * holding another name (a hash collision) is never overwritten nor deleted by this name, so a
 * collision costs a miss, never a wrong answer.
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
#include <rte_malloc.h>
#include <rte_random.h>
#include <rte_rcu_qsbr.h>

#include <ndc/log.h>

#include "fastpath/fastpath.h"
#include "internal.h"

#define DEFAULT_ENTRIES 65536
#define VALUE_ALIGN 64
#define RETIRED_MAX 65536 /* then a writer waits for the readers instead of queueing more */

/* A replaced value and the token its readers must have acknowledged before it is freed. */
struct retired {
	struct ndc_fp_value *v;
	uint64_t token;
};

struct ndc_dpdk_table {
	struct rte_hash *h;
	struct rte_rcu_qsbr *qsbr;
	pthread_mutex_t lock; /* writers, and the retired FIFO */
	struct retired *retired;
	uint32_t r_head, r_len, r_cap; /* a ring: r_len entries from r_head */
	struct ndc_fp_value *nx;       /* __atomic: the NXDOMAIN template */
	struct ndc_fp_config cfg;      /* flags: __atomic */
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

/* Frees the retired values whose readers have all moved on (wait: the oldest, waiting). */
static void reclaim(struct ndc_dpdk_table *t, bool wait)
{
	while (t->r_len) {
		struct retired *r = &t->retired[t->r_head];

		if (rte_rcu_qsbr_check(t->qsbr, r->token, wait) != 1)
			return;
		free(r->v);
		t->r_head = (t->r_head + 1) % t->r_cap;
		t->r_len--;
		wait = false;
	}
}

/* Frees v after the next grace period; under t->lock. */
static void retire(struct ndc_dpdk_table *t, struct ndc_fp_value *v)
{
	uint32_t cap;

	if (!v)
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
			free(v);
			return;
		}
	}
	t->retired[(t->r_head + t->r_len) % t->r_cap] =
	    (struct retired){.v = v, .token = rte_rcu_qsbr_start(t->qsbr)};
	t->r_len++;
}

int ndc_dpdk_table_new(const struct ndc_dpdk_table_opts *o, struct ndc_dpdk_table **ret)
{
	static unsigned int seq;
	uint32_t entries = o->max_entries ? o->max_entries : DEFAULT_ENTRIES;
	struct ndc_dpdk_table *t;
	char name[RTE_HASH_NAMESIZE];
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

	snprintf(name, sizeof(name), "ndc_answers_%u",
		 __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED));
	struct rte_hash_parameters hp = {
	    .name = name,
	    .entries = entries,
	    .key_len = sizeof(struct ndc_fp_key),
	    .hash_func = key_hash,
	    .hash_func_init_val = (uint32_t)rte_rand(),
	    .socket_id = SOCKET_ID_ANY,
	    /*
	     * EXT_TABLE: buckets that overflow chain into extra ones instead of failing an insert
	     * while the table is far from full (cuckoo displacement gives up on long paths).
	     */
	    .extra_flag = RTE_HASH_EXTRA_FLAGS_RW_CONCURRENCY_LF | RTE_HASH_EXTRA_FLAGS_EXT_TABLE,
	};
	t->h = rte_hash_create(&hp);
	if (!t->h) {
		err = rte_errno ? -rte_errno : -ENOMEM;
		ndc_err("dpdk: answer table of %u entries: %s", entries, rte_strerror(-err));
		goto fail;
	}
	struct rte_hash_rcu_config rc = {
	    .v = t->qsbr,
	    .mode = RTE_HASH_QSBR_MODE_DQ,
	    .free_key_data_func = free_key_data,
	    .key_data_ptr = t,
	};
	if (rte_hash_rcu_qsbr_add(t->h, &rc)) {
		err = -rte_errno;
		goto fail;
	}
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
	if (t->h) {
		/* No reader is left: every value still in the table goes now. */
		while (rte_hash_iterate(t->h, &key, &data, &iter) >= 0)
			free(data);
		rte_hash_free(t->h);
	}
	for (uint32_t i = 0; i < t->r_len; i++)
		free(t->retired[(t->r_head + i) % t->r_cap].v);
	free(t->retired);
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

/* Puts val (heap, owned from here on, its name set) at key: fastpath.c's publish. */
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
	if (r < 0)
		cur = NULL;
	r = rte_hash_add_key_data(t->h, key, val);
	if (r < 0)
		goto out;
	retire(t, cur);
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
	retire(t, old);
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

	return rte_hash_lookup_data(t->h, k, &v) >= 0 ? v : NULL;
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
