// SPDX-License-Identifier: MIT
/*
 * The fast-path publisher. Cluster records are published once per record table, each name's
 * answers before its any-other-type entry, so that entry can become a pass marker when one of
 * them did not make it. Upstream answers arrive through the cache hook. Their expiry is tracked
 * in a timing wheel of one-second buckets: the sweep looks at the keys of each second that has
 * passed and deletes those whose entry in the table has really expired.
 *
 * Each key has one filing at most, found through a hash index: a key published again moves to
 * its new second, and a key the cache drops (evicted, or too big for the table now) loses its
 * filing with its entry. So the filings are bounded by the cache's entries, not by the distinct
 * names ever forwarded (a random-subdomain flood left one 24-byte filing per name until its TTL
 * ran out, whatever cache.max_entries said), and the index shrinks as they go. A filing keeps its
 * name, so that every upstream answer in the table can be found and taken out (a purge, below).
 *
 * The cache hook runs under a cache shard's lock, and a table write can rebuild the table, which
 * waits for RCU grace periods (tens of ms): so the hook writes nothing. It copies each publish and
 * delete into a bounded FIFO queue (entries and bytes) that a drain thread applies in order; a put
 * and a delete of one key are queued under that key's shard lock, so they reach the table in the
 * cache's order. When the queue is full the kernel entry goes, never stays wrong: a put that does
 * not fit (puts may fill QUEUE_PUT_PCT of it) is queued as a delete of its key, and a delete that
 * does not fit either (the rest is theirs) sets a purge: once the drain thread has applied what
 * was queued, it takes every upstream answer out of the table (user space answers them from the
 * cache). Both are counted (ndcache_publisher_queue_dropped_total, _purges_total).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ndc/entry.h>
#include <ndc/log.h>

#include "metrics/metrics.h"
#include "publisher.h"

#define WHEEL_SECONDS 4096  /* longer TTLs stay filed for as many rounds as they need */
#define INDEX_MIN 1024	    /* index buckets; grows past one filing per bucket, halves below 1/4 */
#define SWEEP_BATCH 256	    /* filings deleted per hold of the lock the drain thread needs too */
#define QUEUE_PUT_PCT 75    /* of either bound, for puts; deletes may use all of it */
#define QUEUE_STALE_MS 1000 /* a put queued this long is dropped: its TTLs would read too high */

/* due_sec: the second the entry has expired by; rounds of the wheel later for a long TTL */
struct filing {
	struct ndc_fp_key key;
	uint64_t due_sec;
	struct filing *hnext;		/* index chain */
	struct filing *wnext, **wpprev; /* wheel bucket list */
	uint8_t name[];			/* key.name_len bytes: for a purge */
};

/* A queued publish (ans with its data) or delete (ans.len 0, no data) of (name, qtype). */
struct job {
	struct job *next;
	uint64_t enq_ms;
	size_t size; /* what it counts against the byte bound */
	uint32_t ttl;
	uint16_t qtype;
	bool put;
	uint8_t nlen;
	uint8_t name[NDC_FP_NAME_MAX];
	struct ndc_answer ans; /* its data follows */
};

struct ndc_publisher {
	const struct ndc_answer_table_ops *ops; /* the table's backend, whichever it is */
	void *table;
	pthread_t thread;
	bool started;
	pthread_mutex_t lock; /* the wheel and stop */
	pthread_cond_t cond;
	bool stop;
	uint64_t swept_sec; /* every second up to this one has been swept */
	struct filing *wheel[WHEEL_SECONDS];
	struct filing **index; /* by key; nindex buckets, a power of two */
	uint32_t nindex;
	_Atomic uint64_t tracked; /* filings; written under lock */
	_Atomic uint64_t published, too_big, table_full, passed, removed;

	/* The queue from the cache hook to the drain thread. */
	pthread_t drainer;
	bool drainer_started;
	pthread_mutex_t qlock; /* everything down to qstop */
	pthread_cond_t qcond;  /* the drain thread: work, or stop */
	pthread_cond_t qidle;  /* ndc_publisher_flush: all applied */
	struct job *qhead, **qtail;
	uint32_t qdepth, qmax_entries; /* queued or being applied */
	uint64_t qbytes, qmax_bytes;
	bool purge;    /* a delete did not fit: every upstream answer leaves the table */
	bool draining; /* the drain thread holds a batch */
	bool qstop;
	_Atomic uint64_t qdropped, qpurges;
};

#define count(p, field) atomic_fetch_add_explicit(&(p)->field, 1, memory_order_relaxed)

static uint64_t now_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec;
}

/* Publishes one answer, counting the outcome; returns the tables' error. */
static int publish(struct ndc_publisher *p, const uint8_t *lname, size_t nlen, uint16_t qtype,
		   const struct ndc_answer *a, uint32_t ttl)
{
	int err = p->ops->publish(p->table, lname, nlen, qtype, a, ttl);

	if (!err)
		count(p, published);
	else if (err == -E2BIG || err == -ENAMETOOLONG)
		count(p, too_big);
	else if (err == -ENOSPC)
		count(p, table_full);
	return err;
}

/* ---------------------------------------------------------------------------------------------
 * Cluster records.
 */
struct load {
	struct ndc_publisher *p;
	uint8_t name[NDC_NAME_MAX];
	size_t nlen;
	bool missing;	/* an answer of the current name is not in the table */
	bool uncovered; /* some name is neither fully published nor marked */
	int err;
};

/*
 * ANY is answered in user space: both fast paths pass an ANY that finds no entry of its own
 * (abi.h), never synthesising NODATA for it; pods hardly ask it (getaddrinfo in glibc and musl
 * asks A and AAAA), while an ANY entry per name was a fifth of a cluster's table (at 10,000
 * services 26,003 of 136,213 entries: docs/bench/MEMORY.md). Cached upstream answers are another
 * matter: an ANY the cache holds is published like any other type (ndc_publisher_cache_hook).
 */
static int load_one(void *arg, const uint8_t *lname, size_t nlen, uint16_t qtype,
		    const struct ndc_answer *a)
{
	struct load *l = arg;
	int err;

	if (nlen != l->nlen || memcmp(lname, l->name, nlen)) {
		memcpy(l->name, lname, nlen);
		l->nlen = nlen;
		l->missing = false;
	}
	if (qtype == NDC_T_ANY)
		return 0; /* answered in user space (above) */
	if (qtype != NDC_FP_QTYPE_OTHER) {
		err = publish(l->p, lname, nlen, qtype, a, 0);
		if (err == -E2BIG || err == -ENAMETOOLONG || err == -ENOSPC)
			l->missing = true;
		else if (err)
			return l->err = err;
		return 0;
	}
	if (!l->missing) {
		err = publish(l->p, lname, nlen, qtype, a, 0);
		if (!err)
			return 0;
		if (err != -E2BIG && err != -ENAMETOOLONG && err != -ENOSPC)
			return l->err = err;
	}
	/* Some answer of this name lives in user space only: send every other type there too. */
	err = l->p->ops->publish(l->p->table, lname, nlen, NDC_FP_QTYPE_OTHER, NULL, 0);
	if (!err) {
		count(l->p, passed);
		return 0;
	}
	if (err != -ENOSPC && err != -ENAMETOOLONG)
		return l->err = err;
	/*
	 * Not even the marker fits: this name would read as missing, so no NXDOMAIN may be
	 * synthesised. A name too long for the table is never looked up by the kernel at all.
	 */
	if (err == -ENOSPC)
		l->uncovered = true;
	return 0;
}

int ndc_publisher_load_records(struct ndc_publisher *p, const struct ndc_records *r)
{
	union {
		struct ndc_answer a;
		uint8_t b[sizeof(struct ndc_answer) + NDC_FP_DATA_MAX];
	} nx;
	struct load l = {.p = p};
	int err;

	err = p->ops->set_synced(p->table, false);
	if (err)
		return err;
	/* the template first: NODATA entries with its SOA are published pointing at it */
	err = ndc_records_nxdomain(r, &nx.a, NDC_FP_DATA_MAX);
	if (!err)
		err = p->ops->set_nx(p->table, &nx.a);
	if (err)
		return err;
	err = ndc_records_foreach(r, load_one, &l);
	if (err)
		return l.err ? l.err : err;
	if (l.uncovered) {
		ndc_warn("fast path: table too small for every cluster name; NXDOMAIN answers "
			 "stay in user space (raise dataplane.table_size)");
		return 0;
	}
	return p->ops->set_synced(p->table, true);
}

struct prune {
	struct ndc_publisher *p;
	const struct ndc_records *now;
};

static int prune_one(void *arg, const uint8_t *lname, size_t nlen, uint16_t qtype,
		     const struct ndc_answer *a)
{
	struct prune *pr = arg;

	(void)a;
	if (qtype != NDC_T_ANY && !ndc_records_has(pr->now, lname, nlen, qtype) &&
	    !pr->p->ops->unpublish(pr->p->table, lname, nlen, qtype))
		count(pr->p, removed);
	return 0;
}

int ndc_publisher_update_records(struct ndc_publisher *p, const struct ndc_records *old,
				 const struct ndc_records *now)
{
	struct prune pr = {.p = p, .now = now};
	int err;

	/*
	 * The new table goes in over the old one first, so no name that exists in both ever
	 * misses; only then do keys that are gone leave. In between, a name removed from the
	 * cluster may still be answered for a moment: the same as a cache with its TTL.
	 */
	err = ndc_publisher_load_records(p, now);
	if (err || !old)
		return err;
	return ndc_records_foreach(old, prune_one, &pr);
}

struct names {
	struct load l;
	struct prune pr;
	const struct ndc_records *old;
};

static int update_name(void *arg, const uint8_t *lname, size_t nlen)
{
	struct names *w = arg;
	int err;

	w->l.nlen = 0; /* a new name: nothing of it missing yet */
	err = ndc_records_foreach_name(w->pr.now, lname, nlen, load_one, &w->l);
	if (err)
		return w->l.err ? w->l.err : err;
	return w->old ? ndc_records_foreach_name(w->old, lname, nlen, prune_one, &w->pr) : 0;
}

int ndc_publisher_update_names(struct ndc_publisher *p, const struct ndc_records *old,
			       const struct ndc_records *now,
			       const struct ndc_records_patch *changed)
{
	struct names w = {.l = {.p = p}, .pr = {.p = p, .now = now}, .old = old};
	int err = ndc_records_patch_foreach(changed, update_name, &w);

	if (err)
		return err;
	if (w.l.uncovered) {
		ndc_warn("fast path: table too small for every cluster name; NXDOMAIN answers "
			 "stay in user space (raise dataplane.table_size)");
		return p->ops->set_synced(p->table, false);
	}
	return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Upstream answers and their expiry.
 */
static uint32_t key_bucket(const struct ndc_fp_key *k, uint32_t n)
{
	/* The name hash is already well mixed (abi.h); qtype separates a name's types. */
	uint64_t h = k->hash ^ ((uint64_t)k->qtype * 0x9e3779b97f4a7c15ULL);

	return (uint32_t)(h ^ (h >> 32)) & (n - 1);
}

static struct filing **index_find(struct ndc_publisher *p, const struct ndc_fp_key *k)
{
	struct filing **pp = &p->index[key_bucket(k, p->nindex)];

	while (*pp && memcmp(&(*pp)->key, k, sizeof(*k)))
		pp = &(*pp)->hnext;
	return pp;
}

/* Rehashes into n buckets; on -ENOMEM keeps the old size (only chains get longer). */
static void index_resize(struct ndc_publisher *p, uint32_t n)
{
	struct filing **nb = calloc(n, sizeof(*nb));

	if (!nb)
		return;
	for (uint32_t i = 0; i < p->nindex; i++) {
		struct filing *fl = p->index[i], *next;

		for (; fl; fl = next) {
			uint32_t b = key_bucket(&fl->key, n);

			next = fl->hnext;
			fl->hnext = nb[b];
			nb[b] = fl;
		}
	}
	free(p->index);
	p->index = nb;
	p->nindex = n;
}

static void wheel_link(struct ndc_publisher *p, struct filing *fl, uint64_t due_sec)
{
	struct filing **head = &p->wheel[due_sec % WHEEL_SECONDS];

	fl->due_sec = due_sec;
	fl->wnext = *head;
	fl->wpprev = head;
	if (*head)
		(*head)->wpprev = &fl->wnext;
	*head = fl;
}

static void wheel_unlink(struct filing *fl)
{
	*fl->wpprev = fl->wnext;
	if (fl->wnext)
		fl->wnext->wpprev = fl->wpprev;
}

/* Takes fl out of the index (at *pp) and the wheel; the caller frees it. Under p->lock. */
static void unfile(struct ndc_publisher *p, struct filing **pp)
{
	struct filing *fl = *pp;
	uint64_t n = atomic_load_explicit(&p->tracked, memory_order_relaxed) - 1;

	*pp = fl->hnext;
	wheel_unlink(fl);
	atomic_store_explicit(&p->tracked, n, memory_order_relaxed);
	if (p->nindex > INDEX_MIN && n < p->nindex / 4)
		index_resize(p, p->nindex / 2);
}

/*
 * Files k (whose name is lname) for due_sec, moving its filing if it has one. Under p->lock.
 * false without memory: then the caller takes the entry out (a purge must find every one).
 */
static bool file_key(struct ndc_publisher *p, const struct ndc_fp_key *k, const uint8_t *lname,
		     uint64_t due_sec)
{
	struct filing **pp = index_find(p, k), *fl = *pp;
	uint64_t n;

	if (fl && !memcmp(fl->name, lname, k->name_len)) {
		wheel_unlink(fl);
		wheel_link(p, fl, due_sec);
		return true;
	}
	if (fl) {
		/* Another name of the same hash had the key once: this one holds it now. */
		unfile(p, pp);
		free(fl);
		pp = index_find(p, k);
	}
	fl = malloc(sizeof(*fl) + k->name_len);
	if (!fl)
		return false;
	fl->key = *k;
	memcpy(fl->name, lname, k->name_len);
	fl->hnext = NULL;
	*pp = fl;
	wheel_link(p, fl, due_sec);
	n = atomic_load_explicit(&p->tracked, memory_order_relaxed) + 1;
	atomic_store_explicit(&p->tracked, n, memory_order_relaxed);
	if (n > p->nindex && p->nindex < (1u << 31))
		index_resize(p, p->nindex * 2);
	return true;
}

/* The table no longer has k's answer: its filing goes too. */
static void unfile_key(struct ndc_publisher *p, const struct ndc_fp_key *k)
{
	struct filing **pp, *fl;

	pthread_mutex_lock(&p->lock);
	pp = index_find(p, k);
	fl = *pp;
	if (fl)
		unfile(p, pp);
	pthread_mutex_unlock(&p->lock);
	free(fl);
}

static void unpublish_key(struct ndc_publisher *p, const uint8_t *lname, size_t nlen,
			  uint16_t qtype, const struct ndc_fp_key *k)
{
	if (!p->ops->unpublish(p->table, lname, nlen, qtype))
		count(p, removed);
	unfile_key(p, k);
}

/* ---------------------------------------------------------------------------------------------
 * The queue: the cache hook's side, under a cache shard's lock. Nothing here writes the table.
 */

static bool queue_room(const struct ndc_publisher *p, size_t size, bool put)
{
	uint64_t entries = p->qmax_entries, bytes = p->qmax_bytes;

	if (put) {
		entries = entries * QUEUE_PUT_PCT / 100;
		bytes = bytes * QUEUE_PUT_PCT / 100;
	}
	return p->qdepth < entries && p->qbytes + size <= bytes;
}

/* Links j at the tail. Under qlock. */
static void queue_link(struct ndc_publisher *p, struct job *j)
{
	j->next = NULL;
	*p->qtail = j;
	p->qtail = &j->next;
	p->qdepth++;
	p->qbytes += j->size;
	pthread_cond_signal(&p->qcond);
}

static struct job *job_new(const uint8_t *lname, size_t nlen, uint16_t qtype,
			   const struct ndc_answer *a, uint32_t ttl)
{
	size_t size = sizeof(struct job) + (a ? a->len : 0);
	struct job *j = malloc(size);

	if (!j)
		return NULL;
	j->size = size;
	j->enq_ms = ndc_now_ms();
	j->ttl = ttl;
	j->qtype = qtype;
	j->put = a != NULL;
	j->nlen = (uint8_t)nlen;
	memcpy(j->name, lname, nlen);
	if (a)
		memcpy(&j->ans, a, ndc_answer_size(a));
	else
		memset(&j->ans, 0, sizeof(j->ans));
	return j;
}

void ndc_publisher_cache_hook(void *arg, const struct ndc_answer *a, const uint8_t *lname,
			      size_t nlen, uint16_t qtype, uint16_t qclass, uint32_t ttl)
{
	struct ndc_publisher *p = arg;
	struct ndc_fp_key k;
	bool dropped = false;
	struct job *j;

	/*
	 * The table has no class in its key: only IN is ever answered in the kernel. A reserved
	 * or meta type never reaches the cache (abi.h); were one to, type 0 would land on the
	 * name's "any other type" entry: never published. A name too long for the table is never
	 * in it: nothing to queue either.
	 */
	if (qclass != NDC_C_IN || ndc_qtype_verdict(qtype) ||
	    ndc_fastpath_key(lname, nlen, qtype, &k))
		return;
	if (a && a->len > NDC_FP_DATA_MAX) {
		/*
		 * The cache replaced the key's answer with one the table cannot hold: the earlier
		 * answer must not go on being served in the kernel instead of it.
		 */
		count(p, too_big);
		a = NULL;
	}
	j = job_new(lname, nlen, qtype, a, ttl);
	pthread_mutex_lock(&p->qlock);
	if (j && j->put && !queue_room(p, j->size, true)) {
		/* No room for the answer: the key's entry leaves the table instead. */
		dropped = true;
		free(j);
		j = job_new(lname, nlen, qtype, NULL, 0);
	}
	if (j && queue_room(p, j->size, false)) {
		queue_link(p, j);
	} else {
		/* Not even the delete: every upstream answer leaves, once the queue is applied. */
		dropped = true;
		free(j);
		p->purge = true;
		pthread_cond_signal(&p->qcond);
	}
	pthread_mutex_unlock(&p->qlock);
	if (dropped)
		count(p, qdropped);
}

/* ---------------------------------------------------------------------------------------------
 * The drain thread: applies the queue in order, then a purge if one was asked for.
 */

static void apply(struct ndc_publisher *p, struct job *j)
{
	struct ndc_fp_key k;
	bool filed;

	if (ndc_fastpath_key(j->name, j->nlen, j->qtype, &k))
		return; /* the hook checked it */
	if (j->put && ndc_now_ms() - j->enq_ms >= QUEUE_STALE_MS) {
		count(p, qdropped);
		j->put = false;
	}
	if (!j->put || publish(p, j->name, j->nlen, j->qtype, &j->ans, j->ttl)) {
		unpublish_key(p, j->name, j->nlen, j->qtype, &k);
		return;
	}
	pthread_mutex_lock(&p->lock);
	filed = file_key(p, &k, j->name, now_sec() + j->ttl + 1);
	pthread_mutex_unlock(&p->lock);
	if (!filed && !p->ops->unpublish(p->table, j->name, j->nlen, j->qtype))
		count(p, removed); /* unfiled, a purge could not find it */
}

/* Every upstream answer out of the table, SWEEP_BATCH at a time as the sweep does. */
static void purge_all(struct ndc_publisher *p)
{
	struct filing *batch[SWEEP_BATCH];
	size_t n;

	count(p, qpurges);
	/* Until a scan finds nothing: an unfile may halve the index under the scan. */
	do {
		n = 0;
		pthread_mutex_lock(&p->lock);
		for (uint32_t i = 0; i < p->nindex && n < SWEEP_BATCH; i++) {
			while (p->index[i] && n < SWEEP_BATCH) {
				batch[n++] = p->index[i];
				unfile(p, &p->index[i]);
			}
		}
		pthread_mutex_unlock(&p->lock);
		for (size_t i = 0; i < n; i++) {
			struct filing *fl = batch[i];

			if (!p->ops->unpublish(p->table, fl->name, fl->key.name_len, fl->key.qtype))
				count(p, removed);
			free(fl);
		}
	} while (n);
}

static void *drain(void *arg)
{
	struct ndc_publisher *p = arg;

	pthread_mutex_lock(&p->qlock);
	for (;;) {
		struct job *j;
		bool purge;

		while (!p->qhead && !p->purge && !p->qstop)
			pthread_cond_wait(&p->qcond, &p->qlock);
		if (!p->qhead && !p->purge)
			break; /* stopped, with everything applied */
		j = p->qhead;
		p->qhead = NULL;
		p->qtail = &p->qhead;
		purge = p->purge;
		p->purge = false;
		p->draining = true;
		pthread_mutex_unlock(&p->qlock);
		while (j) {
			struct job *next = j->next;
			size_t size = j->size;

			apply(p, j);
			free(j);
			pthread_mutex_lock(&p->qlock);
			p->qdepth--;
			p->qbytes -= size;
			pthread_mutex_unlock(&p->qlock);
			j = next;
		}
		/* After what came before the dropped delete; what came after is only lost too. */
		if (purge)
			purge_all(p);
		pthread_mutex_lock(&p->qlock);
		p->draining = false;
		pthread_cond_broadcast(&p->qidle);
	}
	pthread_mutex_unlock(&p->qlock);
	return NULL;
}

void ndc_publisher_flush(struct ndc_publisher *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->qlock);
	while (p->qhead || p->purge || p->draining)
		pthread_cond_wait(&p->qidle, &p->qlock);
	pthread_mutex_unlock(&p->qlock);
}

void ndc_publisher_queue_limits(struct ndc_publisher *p, uint32_t max_entries, uint64_t max_bytes)
{
	pthread_mutex_lock(&p->qlock);
	p->qmax_entries = max_entries;
	p->qmax_bytes = max_bytes;
	pthread_mutex_unlock(&p->qlock);
}

/*
 * Deletes the expired entries filed for second sec, SWEEP_BATCH at a time: the filings are taken
 * out under the lock, the map is written without it (the drain thread waits on this lock, and the
 * cache's queue behind it). A key published again meanwhile has a new filing and a later expiry:
 * unpublish_expired leaves it (-EAGAIN), as it does one the cache dropped (-ENOENT).
 */
static void sweep_second(struct ndc_publisher *p, uint64_t sec)
{
	struct filing *batch[SWEEP_BATCH];
	size_t n;

	do {
		struct filing *fl = p->wheel[sec % WHEEL_SECONDS];

		n = 0;
		while (fl && n < SWEEP_BATCH) {
			struct filing *next = fl->wnext;

			/* A TTL longer than the wheel: a later round. */
			if (fl->due_sec <= sec) {
				unfile(p, index_find(p, &fl->key));
				batch[n++] = fl;
			}
			fl = next;
		}
		pthread_mutex_unlock(&p->lock);
		for (size_t i = 0; i < n; i++) {
			if (!p->ops->unpublish_expired(p->table, &batch[i]->key))
				count(p, removed);
			free(batch[i]);
		}
		pthread_mutex_lock(&p->lock);
	} while (n == SWEEP_BATCH);
}

static void *sweep(void *arg)
{
	struct ndc_publisher *p = arg;

	pthread_mutex_lock(&p->lock);
	while (!p->stop) {
		struct timespec ts;
		uint64_t now = now_sec();

		/* A long stall sweeps the whole wheel once, not once per missed second. */
		if (now - p->swept_sec > WHEEL_SECONDS)
			p->swept_sec = now - WHEEL_SECONDS;
		while (p->swept_sec < now && !p->stop) {
			p->swept_sec++;
			sweep_second(p, p->swept_sec);
		}
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		pthread_cond_timedwait(&p->cond, &p->lock, &ts);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

int ndc_publisher_new(const struct ndc_answer_table_ops *ops, void *table,
		      struct ndc_publisher **ret)
{
	struct ndc_publisher *p;
	int err;

	if (!ops->publish || !ops->unpublish || !ops->unpublish_expired || !ops->set_nx ||
	    !ops->set_synced)
		return -EOPNOTSUPP;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->ops = ops;
	p->table = table;
	p->swept_sec = now_sec();
	p->nindex = INDEX_MIN;
	p->index = calloc(p->nindex, sizeof(*p->index));
	if (!p->index) {
		free(p);
		return -ENOMEM;
	}
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	pthread_mutex_init(&p->qlock, NULL);
	pthread_cond_init(&p->qcond, NULL);
	pthread_cond_init(&p->qidle, NULL);
	p->qtail = &p->qhead;
	p->qmax_entries = NDC_PUBLISHER_QUEUE_ENTRIES;
	p->qmax_bytes = NDC_PUBLISHER_QUEUE_BYTES;
	err = -pthread_create(&p->thread, NULL, sweep, p);
	if (err) {
		ndc_publisher_free(p);
		return err;
	}
	p->started = true;
	err = -pthread_create(&p->drainer, NULL, drain, p);
	if (err) {
		ndc_publisher_free(p);
		return err;
	}
	p->drainer_started = true;
	*ret = p;
	return 0;
}

void ndc_publisher_free(struct ndc_publisher *p)
{
	if (!p)
		return;
	if (p->drainer_started) {
		/* What is queued is applied first: the table is as the cache left it. */
		pthread_mutex_lock(&p->qlock);
		p->qstop = true;
		pthread_cond_signal(&p->qcond);
		pthread_mutex_unlock(&p->qlock);
		pthread_join(p->drainer, NULL);
	}
	if (p->started) {
		pthread_mutex_lock(&p->lock);
		p->stop = true;
		pthread_cond_signal(&p->cond);
		pthread_mutex_unlock(&p->lock);
		pthread_join(p->thread, NULL);
	}
	for (size_t i = 0; i < WHEEL_SECONDS; i++) {
		struct filing *fl = p->wheel[i], *next;

		for (; fl; fl = next) {
			next = fl->wnext;
			free(fl);
		}
	}
	for (struct job *j = p->qhead, *next; j; j = next) {
		next = j->next;
		free(j);
	}
	free(p->index);
	pthread_cond_destroy(&p->qidle);
	pthread_cond_destroy(&p->qcond);
	pthread_mutex_destroy(&p->qlock);
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

void ndc_publisher_stats(struct ndc_publisher *p, struct ndc_publisher_stats *ret)
{
	ret->published = atomic_load(&p->published);
	ret->too_big = atomic_load(&p->too_big);
	ret->table_full = atomic_load(&p->table_full);
	ret->passed = atomic_load(&p->passed);
	ret->removed = atomic_load(&p->removed);
	ret->tracked = atomic_load(&p->tracked);
	ret->queue_dropped = atomic_load(&p->qdropped);
	ret->queue_purges = atomic_load(&p->qpurges);
	pthread_mutex_lock(&p->qlock);
	ret->queue_depth = p->qdepth;
	pthread_mutex_unlock(&p->qlock);
}

int ndc_publisher_kernel_hits(struct ndc_publisher *p, const uint8_t *lname, size_t nlen,
			      uint16_t qtype, uint32_t *ret_hits)
{
	if (!p || !p->ops->hits)
		return -EOPNOTSUPP;
	return p->ops->hits(p->table, lname, nlen, qtype, ret_hits);
}

/* ---------------------------------------------------------------------------------------------
 * /metrics: what the answer table was refused, and the upstream answers it tracks.
 */
#define F(...) NDC_METRIC_FIELD(struct ndc_publisher_stats, __VA_ARGS__, NULL)

static const struct ndc_metric_field publisher_fields[] = {
    F(tracked, "kernel_expiry_tracked", "gauge",
      "Cached upstream answers in the kernel table whose expiry is tracked (at most cache "
      "entries)."),
    F(table_full, "fastpath_table_full_total", "counter",
      "Answers that did not fit the kernel's table (full, or a colliding key held by another "
      "name): user space answers them. Raise dataplane.table_size."),
    F(too_big, "fastpath_too_big_total", "counter",
      "Answers too big or with too long a name for the kernel's table (user space answers)."),
    F(queue_depth, "publisher_queue_depth", "gauge",
      "Cache publishes and deletes queued for the kernel's table, not yet applied."),
    F(queue_dropped, "publisher_queue_dropped_total", "counter",
      "Cached answers not published to the kernel's table because the publisher's queue was "
      "full (their key's entry is deleted instead, or all are, a purge) or they waited in it "
      "over 1 s: user space answers them."),
    F(queue_purges, "publisher_queue_purges_total", "counter",
      "Times a delete did not fit the full queue, so every cached upstream answer was taken out "
      "of the kernel's table."),
};

void ndc_publisher_metrics(void *pub, struct ndc_metrics_buf *b)
{
	struct ndc_publisher_stats st;

	ndc_publisher_stats(pub, &st);
	NDC_METRIC_TABLE(b, publisher_fields, &st, NULL);
}
