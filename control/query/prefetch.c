// SPDX-License-Identifier: MIT
/*
 * Prefetch: a thread that takes the cache's due entries every NDC_PREFETCH_TICK_MS and asks the
 * forwarder again for the hot ones. The forwarder does the rest: one upstream query per key (a
 * client's miss for the same key joins it), its answer cached over the old entry, which the cache
 * hook republishes to the fast path.
 *
 * Whether a prefetch worked is read back from the cache: the entry the prefetch was for (its gen)
 * is still there when the upstream did not answer (the forwarder then serves the waiter from the
 * cache) or answered something not cacheable; a new one means it was refreshed.
 *
 * Choices the header leaves open:
 * - Only as many due entries are taken as there is room in flight: the others stay due in the
 *   cache and are taken at a later tick while still fresh, so a burst of hot entries is spread
 *   out, not dropped.
 * - At most NDC_PREFETCH_SCAN entries are looked at per tick, so that a cache full of cold
 *   entries coming due at once cannot keep the thread busy; the rest wait for the next tick.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ndc/log.h>

#include "internal.h"

#define NDC_PREFETCH_BATCH 64
#define NDC_PREFETCH_SCAN 4096
#define NDC_PREFETCH_BACKOFF_MIN_MS 1000
#define NDC_PREFETCH_BACKOFF_MAX_MS 30000

struct ndc_prefetch {
	struct ndc_cache *cache;
	struct ndc_forwarder *fwd;
	uint32_t min_hits, before_pct, max_inflight; /* configure changes them: atomic */
	ndc_prefetch_hits_fn hits_fn;
	void *hits_arg;

	pthread_mutex_t lock;
	pthread_cond_t cond; /* stop, and the last prefetch in flight done */
	bool stop, started;
	uint32_t inflight;   /* under lock */
	uint32_t backoff_ms; /* under lock: 0 while prefetches work */
	uint64_t resume_ms;  /* under lock: none sent before */
	pthread_t thread;

	struct ndc_cache_due batch[NDC_PREFETCH_BATCH];	       /* thread only */
	uint64_t issued, refreshed, failed, cold, kernel_hits; /* atomics */
};

/* One prefetch in flight: the entry it was sent for. */
struct pf_req {
	struct ndc_prefetch *p;
	uint64_t gen;
	uint16_t qtype, qclass;
	uint8_t nlen;
	uint8_t lname[NDC_NAME_MAX];
};

#define INC(p, field, n) __atomic_fetch_add(&(p)->field, (n), __ATOMIC_RELAXED)
#define LOAD(x) __atomic_load_n(x, __ATOMIC_RELAXED)

static void done(void *arg, const struct ndc_fwd_result *res)
{
	struct pf_req *q = arg;
	struct ndc_prefetch *p = q->p;
	uint64_t gen = 0;
	int err = ndc_cache_gen(p->cache, q->lname, q->nlen, q->qtype, q->qclass, &gen);
	bool refreshed = err == 0 && gen != q->gen;
	/* Still the same entry: the upstream did not give a fresh answer. Gone (evicted, dropped
	 * by a reconfiguration) or cancelled at shutdown says nothing of the upstream. */
	bool upstream_failed = !refreshed && err == 0 && res->status != -ECANCELED;

	INC(p, refreshed, refreshed);
	INC(p, failed, !refreshed);
	pthread_mutex_lock(&p->lock);
	p->inflight--;
	if (refreshed) {
		p->backoff_ms = 0;
	} else if (upstream_failed) {
		p->backoff_ms = p->backoff_ms ? p->backoff_ms * 2 : NDC_PREFETCH_BACKOFF_MIN_MS;
		if (p->backoff_ms > NDC_PREFETCH_BACKOFF_MAX_MS)
			p->backoff_ms = NDC_PREFETCH_BACKOFF_MAX_MS;
		p->resume_ms = ndc_now_ms() + p->backoff_ms;
	}
	if (!p->inflight)
		pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	free(q);
}

static void issue(struct ndc_prefetch *p, const struct ndc_cache_due *d)
{
	struct pf_req *q = malloc(sizeof(*q));
	int err;

	if (!q)
		return;
	q->p = p;
	q->gen = d->gen;
	q->qtype = d->qtype;
	q->qclass = d->qclass;
	q->nlen = d->nlen;
	memcpy(q->lname, d->lname, d->nlen);
	pthread_mutex_lock(&p->lock);
	p->inflight++;
	pthread_mutex_unlock(&p->lock);
	INC(p, issued, 1);
	err = ndc_forwarder_resolve(p->fwd, q->lname, q->nlen, q->qtype, q->qclass, done, q);
	if (err) {
		/* The forwarder is full or has no upstream: this entry expires as it would have. */
		ndc_debug("prefetch: not sent: %s", strerror(-err));
		INC(p, failed, 1);
		pthread_mutex_lock(&p->lock);
		if (!--p->inflight)
			pthread_cond_broadcast(&p->cond);
		pthread_mutex_unlock(&p->lock);
		free(q);
	}
}

/* How many more may be sent now: 0 during a backoff, 1 after one until a prefetch works. */
static uint32_t room(struct ndc_prefetch *p, uint64_t now)
{
	uint32_t cap = LOAD(&p->max_inflight), r = 0;

	pthread_mutex_lock(&p->lock);
	if (p->backoff_ms)
		cap = 1;
	if (now >= p->resume_ms && p->inflight < cap)
		r = cap - p->inflight;
	pthread_mutex_unlock(&p->lock);
	return r;
}

static void tick(struct ndc_prefetch *p)
{
	uint64_t now = ndc_now_ms();
	uint32_t min_hits = LOAD(&p->min_hits);
	ndc_prefetch_hits_fn hits_fn;
	void *hits_arg;
	size_t seen = 0;

	if (!LOAD(&p->before_pct))
		return;
	pthread_mutex_lock(&p->lock);
	hits_fn = p->hits_fn;
	hits_arg = p->hits_arg;
	pthread_mutex_unlock(&p->lock);
	while (seen < NDC_PREFETCH_SCAN) {
		uint32_t r = room(p, now);
		size_t n;

		if (!r)
			return;
		n = ndc_cache_due(p->cache, now, p->batch,
				  r < NDC_PREFETCH_BATCH ? r : NDC_PREFETCH_BATCH);
		if (!n)
			return;
		seen += n;
		for (size_t i = 0; i < n; i++) {
			const struct ndc_cache_due *d = &p->batch[i];
			uint32_t hits = d->hits, kh = 0;

			/* The kernel answers class IN only. */
			if (hits_fn && d->qclass == NDC_C_IN &&
			    hits_fn(hits_arg, d->lname, d->nlen, d->qtype, &kh) == 0) {
				hits += kh;
				INC(p, kernel_hits, kh);
			}
			if (hits < min_hits) {
				INC(p, cold, 1);
				continue;
			}
			issue(p, d);
		}
	}
}

static void *prefetch_thread(void *arg)
{
	struct ndc_prefetch *p = arg;

	pthread_mutex_lock(&p->lock);
	while (!p->stop) {
		struct timespec ts;

		pthread_mutex_unlock(&p->lock);
		tick(p);
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += NDC_PREFETCH_TICK_MS * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_mutex_lock(&p->lock);
		if (!p->stop)
			pthread_cond_timedwait(&p->cond, &p->lock, &ts);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

static int opts_check(const struct ndc_prefetch_opts *o)
{
	return !o || o->before_pct >= 100 ? -EINVAL : 0;
}

static void opts_store(struct ndc_prefetch *p, const struct ndc_prefetch_opts *o)
{
	__atomic_store_n(&p->min_hits, o->min_hits ? o->min_hits : 1, __ATOMIC_RELAXED);
	__atomic_store_n(&p->max_inflight,
			 o->max_inflight ? o->max_inflight : NDC_PREFETCH_INFLIGHT,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&p->before_pct, o->before_pct, __ATOMIC_RELAXED);
	ndc_cache_set_prefetch(p->cache, o->before_pct);
}

int ndc_prefetch_new(const struct ndc_prefetch_opts *opts, struct ndc_cache *cache,
		     struct ndc_forwarder *fwd, struct ndc_prefetch **ret)
{
	struct ndc_prefetch *p;
	pthread_condattr_t ca;
	int err = opts_check(opts);

	if (err || !cache || !fwd || !ret)
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->cache = cache;
	p->fwd = fwd;
	pthread_mutex_init(&p->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->cond, &ca);
	pthread_condattr_destroy(&ca);
	opts_store(p, opts);
	err = -pthread_create(&p->thread, NULL, prefetch_thread, p);
	if (err) {
		ndc_err("prefetch: thread: %s", strerror(-err));
		ndc_prefetch_free(p);
		return err;
	}
	p->started = true;
	*ret = p;
	return 0;
}

void ndc_prefetch_set_kernel_hits(struct ndc_prefetch *p, ndc_prefetch_hits_fn fn, void *arg)
{
	/* Under the lock: the thread reads both between ticks, never half of a change. */
	pthread_mutex_lock(&p->lock);
	p->hits_fn = fn;
	p->hits_arg = arg;
	pthread_mutex_unlock(&p->lock);
}

int ndc_prefetch_configure(struct ndc_prefetch *p, const struct ndc_prefetch_opts *opts)
{
	int err = opts_check(opts);

	if (err)
		return err;
	opts_store(p, opts);
	return 0;
}

void ndc_prefetch_stats(struct ndc_prefetch *p, struct ndc_prefetch_stats *ret)
{
	ret->issued = LOAD(&p->issued);
	ret->refreshed = LOAD(&p->refreshed);
	ret->failed = LOAD(&p->failed);
	ret->cold = LOAD(&p->cold);
	ret->kernel_hits = LOAD(&p->kernel_hits);
	pthread_mutex_lock(&p->lock);
	ret->inflight = p->inflight;
	pthread_mutex_unlock(&p->lock);
}

void ndc_prefetch_stop(struct ndc_prefetch *p)
{
	bool join;

	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	join = p->started;
	p->started = false;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	if (join)
		pthread_join(p->thread, NULL);
}

void ndc_prefetch_free(struct ndc_prefetch *p)
{
	if (!p)
		return;
	ndc_prefetch_stop(p);
	pthread_mutex_lock(&p->lock);
	while (p->inflight)
		pthread_cond_wait(&p->cond, &p->lock);
	pthread_mutex_unlock(&p->lock);
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
	free(p);
}
