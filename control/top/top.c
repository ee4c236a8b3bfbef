// SPDX-License-Identifier: MIT
/*
 * The per-client table and the Space-Saving sketches (top.h). A sketch is small (8 or 64
 * counters): a linear scan for the name and for the smallest counter costs less than any index
 * would to keep up to date.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "top.h"

#define PER_STRIPE (NDC_TOP_CLIENTS / NDC_TOP_STRIPES)
_Static_assert(PER_STRIPE *NDC_TOP_STRIPES == NDC_TOP_CLIENTS, "stripes split the table");

/* A slot's counters, atomics bumped without the stripe's lock. */
enum { C_QUERIES, C_LOCAL, C_CACHE, C_FORWARDED, C_LIMITED, C_NXDOMAIN, C_SERVFAIL, C_MAX };

/*
 * One client. used and the counters are read and bumped without a lock: a query of a client
 * already in the table takes no lock for its counts (one hot client, every worker at once, is
 * the case this is for). addr is written under the stripe's lock before used is set (release).
 * A slot given to a new address (its old one idle for NDC_TOP_IDLE_MS) may take one late count
 * of the old address at that moment: accepted for a table of counts, not of answers.
 */
struct slot {
	atomic_bool used;
	struct ndc_ip addr;
	_Atomic uint64_t last_ms;
	_Atomic uint64_t c[C_MAX];
	/* under the stripe's lock */
	struct ndc_top_name names[NDC_TOP_CLIENT_NAMES];
	size_t n_names;
};

/*
 * A stripe's clients and its own sketch of every name its clients ask; the stripes' sketches
 * are merged at a snapshot (Space-Saving summaries merge by adding counts and errors: Agarwal et
 * al., "Mergeable summaries", 2012). The sketches are updated under the stripe's lock, tried,
 * never waited for: a name that finds it taken is not sketched (names_skipped), so the sketches
 * are a sample of the names under contention while the counts stay exact.
 */
struct stripe {
	pthread_mutex_t lock;
	struct slot slots[PER_STRIPE];
	uint64_t names_total; /* under lock */
	struct ndc_top_name names[NDC_TOP_NAMES];
	size_t n_names;
	_Atomic uint64_t names_skipped;
};

struct ndc_top {
	struct stripe stripes[NDC_TOP_STRIPES];
	pthread_mutex_t other_lock; /* the "other" row: addresses that found no slot */
	struct slot other;
	uint64_t overflow;
};

static uint64_t mono_ms(void)
{
	struct timespec ts;

	/* coarse: a slot's idle time is minutes, and a tick's clock read is cheaper per query */
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* FNV-1a over the address: spreads pods of one subnet (they differ in the last bytes). */
static size_t addr_hash(const struct ndc_ip *a)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < sizeof(a->addr); i++)
		h = (h ^ a->addr[i]) * 16777619u;
	return (size_t)(h ^ a->family);
}

static bool same_addr(const struct ndc_ip *a, const struct ndc_ip *b)
{
	return a->family == b->family && !memcmp(a->addr, b->addr, sizeof(a->addr));
}

static uint32_t name_hash(const uint8_t *lname, size_t nlen)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < nlen; i++)
		h = (h ^ lname[i]) * 16777619u;
	return h;
}

/* Space-Saving: count name (hash h) in the k counters of names (n in use). */
static void sketch_add(struct ndc_top_name *names, size_t *n, size_t k, const uint8_t *lname,
		       size_t nlen, uint32_t h, uint64_t add)
{
	size_t min = 0;

	for (size_t i = 0; i < *n; i++) {
		if (names[i].hash == h && names[i].nlen == nlen &&
		    !memcmp(names[i].lname, lname, nlen)) {
			names[i].count += add;
			return;
		}
		if (names[i].count < names[min].count)
			min = i;
	}
	if (*n < k) {
		min = (*n)++;
		names[min].count = 0;
		names[min].error = 0;
	} else {
		names[min].error = names[min].count;
	}
	memcpy(names[min].lname, lname, nlen);
	names[min].nlen = (uint8_t)nlen;
	names[min].hash = h;
	names[min].count += add;
}

int ndc_top_new(struct ndc_top **ret)
{
	struct ndc_top *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < NDC_TOP_STRIPES; i++)
		pthread_mutex_init(&t->stripes[i].lock, NULL);
	pthread_mutex_init(&t->other_lock, NULL);
	*ret = t;
	return 0;
}

void ndc_top_free(struct ndc_top *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < NDC_TOP_STRIPES; i++)
		pthread_mutex_destroy(&t->stripes[i].lock);
	pthread_mutex_destroy(&t->other_lock);
	free(t);
}

/* The slot of addr in its stripe, without the lock; NULL: not there. */
static struct slot *slot_find(struct stripe *s, const struct ndc_ip *addr)
{
	for (size_t i = 0; i < PER_STRIPE; i++) {
		struct slot *sl = &s->slots[i];

		if (atomic_load_explicit(&sl->used, memory_order_acquire) &&
		    same_addr(&sl->addr, addr))
			return sl;
	}
	return NULL;
}

/* The slot of addr in its stripe (taken or made), under the stripe's lock; NULL: none free. */
static struct slot *slot_of(struct stripe *s, const struct ndc_ip *addr, uint64_t now)
{
	struct slot *free_slot = NULL, *oldest = NULL;

	for (size_t i = 0; i < PER_STRIPE; i++) {
		struct slot *sl = &s->slots[i];

		if (!atomic_load(&sl->used)) {
			if (!free_slot)
				free_slot = sl;
			continue;
		}
		if (same_addr(&sl->addr, addr))
			return sl;
		if (!oldest || atomic_load(&sl->last_ms) < atomic_load(&oldest->last_ms))
			oldest = sl;
	}
	if (!free_slot && oldest && now - atomic_load(&oldest->last_ms) >= NDC_TOP_IDLE_MS)
		free_slot = oldest;
	if (free_slot) {
		atomic_store(&free_slot->used, false);
		for (size_t k = 0; k < C_MAX; k++)
			atomic_store_explicit(&free_slot->c[k], 0, memory_order_relaxed);
		free_slot->n_names = 0;
		free_slot->addr = *addr;
		atomic_store(&free_slot->last_ms, now);
		atomic_store_explicit(&free_slot->used, true, memory_order_release);
	}
	return free_slot;
}

#define BUMP(sl, k) atomic_fetch_add_explicit(&(sl)->c[k], 1, memory_order_relaxed)

static void count_into(struct slot *sl, enum ndc_top_source src, int rcode)
{
	static const int8_t of_src[] = {
	    [NDC_TOP_LOCAL] = C_LOCAL,
	    [NDC_TOP_CACHE] = C_CACHE,
	    [NDC_TOP_FORWARDED] = C_FORWARDED,
	    [NDC_TOP_LIMITED] = C_LIMITED,
	    [NDC_TOP_OTHER] = -1,
	};

	BUMP(sl, C_QUERIES);
	if ((unsigned)src < sizeof(of_src) && of_src[src] >= 0)
		BUMP(sl, of_src[src]);
	if (rcode == 3)
		BUMP(sl, C_NXDOMAIN);
	else if (rcode == 2)
		BUMP(sl, C_SERVFAIL);
}

static void see(struct ndc_top *t, const struct ndc_ip *addr, const uint8_t *lname, size_t nlen,
		bool counted, enum ndc_top_source src, int rcode)
{
	struct stripe *s = &t->stripes[addr_hash(addr) % NDC_TOP_STRIPES];
	bool valid = lname && nlen && nlen <= 255;
	uint32_t h = valid ? name_hash(lname, nlen) : 0;
	uint64_t now = mono_ms();
	struct slot *sl = slot_find(s, addr);

	if (!sl) {
		pthread_mutex_lock(&s->lock);
		sl = slot_of(s, addr, now);
		pthread_mutex_unlock(&s->lock);
	}
	if (sl) {
		if (atomic_load_explicit(&sl->last_ms, memory_order_relaxed) != now)
			atomic_store_explicit(&sl->last_ms, now, memory_order_relaxed);
		if (counted)
			count_into(sl, src, rcode);
		if (!valid)
			return;
		if (pthread_mutex_trylock(&s->lock) != 0) {
			atomic_fetch_add_explicit(&s->names_skipped, 1, memory_order_relaxed);
			return;
		}
		s->names_total++;
		sketch_add(s->names, &s->n_names, NDC_TOP_NAMES, lname, nlen, h, 1);
		sketch_add(sl->names, &sl->n_names, NDC_TOP_CLIENT_NAMES, lname, nlen, h, 1);
		pthread_mutex_unlock(&s->lock);
		return;
	}
	/* No room: the "other" row (rare: 512 addresses active in the last minutes). */
	pthread_mutex_lock(&t->other_lock);
	if (counted) {
		t->overflow++;
		count_into(&t->other, src, rcode);
	}
	if (valid)
		sketch_add(t->other.names, &t->other.n_names, NDC_TOP_CLIENT_NAMES, lname, nlen, h,
			   1);
	pthread_mutex_unlock(&t->other_lock);
}

/* Adds a stripe's sketch into the view's (NDC_TOP_NAMES * NDC_TOP_STRIPES at most, in all). */
static void merge_names(struct ndc_top_name *all, size_t *n, const struct ndc_top_name *names,
			size_t k)
{
	for (size_t i = 0; i < k; i++) {
		size_t j;

		for (j = 0; j < *n; j++)
			if (all[j].hash == names[i].hash && all[j].nlen == names[i].nlen &&
			    !memcmp(all[j].lname, names[i].lname, names[i].nlen))
				break;
		if (j == *n)
			all[(*n)++] = names[i];
		else {
			all[j].count += names[i].count;
			all[j].error += names[i].error;
		}
	}
}

void ndc_top_count(struct ndc_top *t, const struct ndc_ip *addr, const uint8_t *lname, size_t nlen,
		   enum ndc_top_source src, int rcode)
{
	if (t && addr)
		see(t, addr, lname, nlen, true, src, rcode);
}

void ndc_top_name_seen(struct ndc_top *t, const struct ndc_ip *addr, const uint8_t *lname,
		       size_t nlen)
{
	if (t && addr)
		see(t, addr, lname, nlen, false, NDC_TOP_OTHER, -1);
}

static int by_count(const void *a, const void *b)
{
	const struct ndc_top_name *x = a, *y = b;

	return x->count < y->count ? 1 : x->count > y->count ? -1 : 0;
}

static int by_queries(const void *a, const void *b)
{
	const struct ndc_top_client *x = a, *y = b;

	/* the "other" row last, whatever its count */
	if (!x->addr.family != !y->addr.family)
		return !x->addr.family ? 1 : -1;
	return x->c.queries < y->c.queries ? 1 : x->c.queries > y->c.queries ? -1 : 0;
}

static void view_add(struct ndc_top_view *v, struct slot *sl)
{
	struct ndc_top_client *cl = &v->clients[v->n_clients++];

	cl->addr = sl->addr;
	cl->c.queries = atomic_load_explicit(&sl->c[C_QUERIES], memory_order_relaxed);
	cl->c.local = atomic_load_explicit(&sl->c[C_LOCAL], memory_order_relaxed);
	cl->c.cache = atomic_load_explicit(&sl->c[C_CACHE], memory_order_relaxed);
	cl->c.forwarded = atomic_load_explicit(&sl->c[C_FORWARDED], memory_order_relaxed);
	cl->c.limited = atomic_load_explicit(&sl->c[C_LIMITED], memory_order_relaxed);
	cl->c.nxdomain = atomic_load_explicit(&sl->c[C_NXDOMAIN], memory_order_relaxed);
	cl->c.servfail = atomic_load_explicit(&sl->c[C_SERVFAIL], memory_order_relaxed);
	cl->n_names = sl->n_names;
	memcpy(cl->names, sl->names, sl->n_names * sizeof(sl->names[0]));
	qsort(cl->names, cl->n_names, sizeof(cl->names[0]), by_count);
}

int ndc_top_snapshot(struct ndc_top *t, const struct ndc_top_ext_row *ext, size_t n,
		     struct ndc_top_view **ret)
{
	struct ndc_top_view *v = calloc(1, sizeof(*v));
	struct ndc_top_name *all = calloc(NDC_TOP_NAMES * NDC_TOP_STRIPES, sizeof(*all));
	struct ndc_top_client *other;
	size_t n_all = 0;

	if (!v || !all) {
		free(v);
		free(all);
		return -ENOMEM;
	}
	v->mono_ms = mono_ms();
	for (size_t i = 0; i < NDC_TOP_STRIPES; i++) {
		struct stripe *s = &t->stripes[i];

		pthread_mutex_lock(&s->lock);
		for (size_t j = 0; j < PER_STRIPE; j++)
			if (atomic_load(&s->slots[j].used))
				view_add(v, &s->slots[j]);
		v->names_total += s->names_total;
		v->names_skipped += atomic_load(&s->names_skipped);
		merge_names(all, &n_all, s->names, s->n_names);
		pthread_mutex_unlock(&s->lock);
	}
	qsort(all, n_all, sizeof(all[0]), by_count);
	v->n_names = n_all < NDC_TOP_NAMES ? n_all : NDC_TOP_NAMES;
	memcpy(v->names, all, v->n_names * sizeof(all[0]));
	free(all);
	pthread_mutex_lock(&t->other_lock);
	v->overflow = t->overflow;
	view_add(v, &t->other); /* always there, family 0; dropped below when empty */
	pthread_mutex_unlock(&t->other_lock);
	other = &v->clients[v->n_clients - 1];

	/* The merge of another counter's rows (the kernel's per-client table). */
	for (size_t i = 0; i < n; i++) {
		struct ndc_top_client *cl = NULL;

		for (size_t j = 0; j + 1 < v->n_clients && !cl; j++)
			if (same_addr(&v->clients[j].addr, &ext[i].addr))
				cl = &v->clients[j];
		if (!cl && v->n_clients < NDC_TOP_CLIENTS + 1) {
			/* before the "other" row, which stays last */
			cl = other;
			*++other = *cl;
			v->n_clients++;
			memset(cl, 0, sizeof(*cl));
			cl->addr = ext[i].addr;
		}
		if (!cl) {
			cl = other;
			v->overflow += ext[i].queries;
		}
		cl->c.queries += ext[i].queries;
		cl->c.kernel_answered += ext[i].answered;
		cl->c.nxdomain += ext[i].nxdomain;
		cl->c.kernel_passed += ext[i].passed;
	}
	if (!other->c.queries && !other->n_names)
		v->n_clients--;
	qsort(v->clients, v->n_clients, sizeof(v->clients[0]), by_queries);
	*ret = v;
	return 0;
}

void ndc_top_name_text(const uint8_t *lname, size_t nlen, char *out)
{
	size_t o = 0, i = 0;

	while (i < nlen && lname[i] && i + 1 + lname[i] <= nlen) {
		size_t len = lname[i++];

		for (size_t k = 0; k < len; k++, i++) {
			unsigned char ch = lname[i];

			if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
			    (ch >= '0' && ch <= '9') || ch == '-' || ch == '_')
				out[o++] = (char)ch;
			else
				o += (size_t)snprintf(out + o, NDC_TOP_NAME_TEXT - o, "\\%03u", ch);
		}
		out[o++] = '.';
	}
	if (!o)
		out[o++] = '.';
	out[o] = '\0';
}
