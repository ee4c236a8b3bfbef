// SPDX-License-Identifier: MIT
/*
 * The object store. Watch threads apply each event under the lock and turn it at once into a
 * patch of whole names (records_patch.c): the Service (or slice, pod, namespace) as it was and
 * as it is, plus every object that shares a name with it, run through the record builder. The
 * commit thread applies the pending patch to the current table as a new version, hands it over
 * and starts again, so an event costs work in proportion to the names it touches. A full build
 * runs only for the first sync, for a relist, and now and then to fold the overlay of changed
 * names back into a fresh base; it reads a snapshot of the objects (reference counted) without
 * the lock, so events go on being applied meanwhile, and afterwards the changes newer than the
 * snapshot are carried over onto the new base.
 */
#include <errno.h>
#include <json-c/json.h>
#include <json-c/linkhash.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <ndc/log.h>

#include "metrics/metrics.h"
#include "store/store.h"
#include "internal.h"

/*
 * Overlay names past which the base is rebuilt: a fraction of the base, at least this many. The
 * overlay is what memory grows by between full builds (about 140 B of RSS per name), and a fold
 * holds it beside the old table and the new build: at 100,000 Services and 1,000 changes/s,
 * base/2 let RSS climb to 108 MB in 30 s, base/32 held it at 101 MB and fold peaks at 215 MB,
 * for a 0.6 s build every ~11 s (at nice 10).
 */
#define COMPACT_MIN 16384
#define COMPACT_SHIFT 5 /* overlay > base names / 32 */

enum full { FULL_NONE = 0, FULL_COMPACT, FULL_ALL };

struct ndc_k8s_store {
	const struct ndc_records_opts *ropts;
	uint32_t kinds;
	ndc_k8s_store_fn fn;
	void *arg;

	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_cond_t idle;			   /* the commit thread has nothing left to do */
	struct ndc_k8s_objtab *tab[NDC_K8S_KINDS]; /* current state */
	struct ndc_k8s_objtab *pending[NDC_K8S_KINDS]; /* a relist being built */
	struct ndc_k8s_index idx;
	uint32_t listed;		 /* kinds listed at least once */
	uint64_t seq;			 /* changes applied */
	struct ndc_records_patch *patch; /* changes not yet in cur; NULL: none */
	enum full want;			 /* a full build asked for */
	bool building;			 /* the builder thread is at it */
	struct ndc_records *built;	 /* its result, for the commit thread to take over */
	enum full built_kind;
	const struct ndc_records *cur; /* the newest table handed over */
	uint64_t *arrivals;	       /* arrival time of each change in patch */
	size_t n_arrivals, cap_arrivals;
	uint64_t first_arrival;
	size_t compact_min;
	bool index_ok; /* the indexes match the tables (false after running out of memory) */
	bool busy;     /* a commit round is running (it drops the lock on the way) */
	bool stop;
	pthread_t thread, builder;
	bool started, builder_started;

	_Atomic uint64_t events, rejected, rebuilds, patches, last_build_us, last_latency_us,
	    max_latency_us, objects;
	_Atomic uint64_t lat_hist[NDC_K8S_LAT_BUCKETS];
	_Atomic uint64_t lat_sum_us, lat_count;
};

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/*
 * "ns/name" (a Namespace: "name"), the key the tables find an object by, in buf if it fits, else
 * in a malloc'd string (no length limit: the key must match the one made from the element).
 */
static int fmt_key(const char *ns, const char *name, char *buf, size_t len, char **ret)
{
	size_t nl = strlen(name) + 1, need = (ns ? strlen(ns) + 1 : 0) + nl;
	char *k = need <= len ? buf : malloc(need);

	*ret = k;
	if (!k)
		return -ENOMEM;
	if (ns) {
		memcpy(k, ns, need - nl - 1);
		k[need - nl - 1] = '/';
	}
	memcpy(k + need - nl, name, nl);
	return 0;
}

static void free_key(char *key, const char *buf)
{
	if (key != buf)
		free(key);
}

/* The key of a watched object as conversion would make it; -EINVAL without a name. */
static int obj_key(struct json_object *obj, char *buf, size_t len, char **ret)
{
	struct json_object *md, *ns = NULL, *name, *kind;

	*ret = NULL;
	if (!json_object_object_get_ex(obj, "metadata", &md) ||
	    !json_object_object_get_ex(md, "name", &name) ||
	    !json_object_is_type(name, json_type_string))
		return -EINVAL;
	/* A Namespace is cluster-scoped: its element has no namespace to key it by. */
	if (json_object_object_get_ex(obj, "kind", &kind) &&
	    json_object_is_type(kind, json_type_string) &&
	    !strcmp(json_object_get_string(kind), "Namespace"))
		ns = NULL;
	else if (!json_object_object_get_ex(md, "namespace", &ns) ||
		 !json_object_is_type(ns, json_type_string))
		ns = NULL;
	return fmt_key(ns ? json_object_get_string(ns) : NULL, json_object_get_string(name), buf,
		       len, ret);
}

static const enum ndc_k8s_kind kind_of_type[] = {
    [NDC_K8S_OBJ_NAMESPACE] = NDC_K8S_NAMESPACES,     [NDC_K8S_OBJ_SERVICE] = NDC_K8S_SERVICES,
    [NDC_K8S_OBJ_SLICE] = NDC_K8S_ENDPOINTSLICES,     [NDC_K8S_OBJ_POD] = NDC_K8S_PODS,
    [NDC_K8S_OBJ_SVCIMPORT] = NDC_K8S_SERVICEIMPORTS,
};

/* Converts obj; NULL when it cannot be (counted, logged: its last good version stays). */
static struct ndc_k8s_obj *convert(struct ndc_k8s_store *s, struct json_object *obj)
{
	char buf[512], err[256], *key;
	enum ndc_k8s_obj_type type;
	struct ndc_k8s_obj *o;
	void *block;

	if (obj_key(obj, buf, sizeof(buf), &key)) {
		atomic_fetch_add(&s->rejected, 1);
		return NULL;
	}
	if (ndc_k8s_object_convert(obj, NDC_K8S_OBJ_HEAD, &type, &block, err, sizeof(err)) < 0) {
		atomic_fetch_add(&s->rejected, 1);
		ndc_warn("k8s: %s rejected, keeping its last good state: %s", key, err);
		free_key(key, buf);
		return NULL;
	}
	free_key(key, buf);
	if (type == NDC_K8S_OBJ_NONE) /* a kind DNS does not read: nothing to keep */
		return NULL;
	o = block;
	atomic_init(&o->refs, 1);
	o->kind = (uint8_t)kind_of_type[type];
	return o;
}

static void mark_dirty(struct ndc_k8s_store *s)
{
	uint64_t t = now_us();

	if (!s->n_arrivals)
		s->first_arrival = t;
	if (s->n_arrivals == s->cap_arrivals) {
		size_t cap = s->cap_arrivals ? s->cap_arrivals * 2 : 256;
		uint64_t *a = realloc(s->arrivals, cap * sizeof(*a));

		if (a) {
			s->arrivals = a;
			s->cap_arrivals = cap;
		}
	}
	if (s->n_arrivals < s->cap_arrivals)
		s->arrivals[s->n_arrivals++] = t;
	pthread_cond_broadcast(&s->cond);
}

/* ---------------------------------------------------------------------------------------------
 * Lists.
 */
static void on_list_begin(void *arg, enum ndc_k8s_kind kind)
{
	struct ndc_k8s_store *s = arg;

	pthread_mutex_lock(&s->lock);
	ndc_k8s_objtab_free(s->pending[kind]);
	s->pending[kind] = ndc_k8s_objtab_new();
	pthread_mutex_unlock(&s->lock);
}

static void on_list_item(void *arg, enum ndc_k8s_kind kind, struct json_object *obj)
{
	struct ndc_k8s_store *s = arg;
	struct ndc_k8s_obj *o = convert(s, obj);

	pthread_mutex_lock(&s->lock);
	if (!o || !s->pending[kind] || ndc_k8s_objtab_put(s->pending[kind], o))
		ndc_k8s_obj_put(o);
	pthread_mutex_unlock(&s->lock);
}

static void on_list_end(void *arg, enum ndc_k8s_kind kind)
{
	struct ndc_k8s_store *s = arg;

	pthread_mutex_lock(&s->lock);
	if (s->pending[kind]) {
		/* The whole new state at once: nothing disappears while a relist runs. */
		ndc_k8s_objtab_free(s->tab[kind]);
		s->tab[kind] = s->pending[kind];
		s->pending[kind] = NULL;
		s->listed |= 1u << kind;
		s->index_ok = !ndc_k8s_index_rebuild(&s->idx, s->tab);
		if (!s->index_ok)
			ndc_err("k8s: out of memory indexing the store; every change rebuilds the "
				"whole table until the next list");
		s->seq++;
		s->want = FULL_ALL;
		mark_dirty(s);
	}
	pthread_mutex_unlock(&s->lock);
}

/* ---------------------------------------------------------------------------------------------
 * Events: each becomes a patch of the names it touches.
 */
static void on_event(void *arg, enum ndc_k8s_kind kind, enum ndc_k8s_event ev,
		     struct json_object *obj)
{
	struct ndc_k8s_store *s = arg;
	struct ndc_k8s_obj *o = NULL;
	char buf[512], *key;
	int err;

	if (ev != NDC_K8S_DELETED) {
		const char *ns, *name;

		o = convert(s, obj);
		if (!o)
			return;
		ndc_k8s_obj_id(o, &ns, &name);
		if (fmt_key(ns, name, buf, sizeof(buf), &key)) {
			ndc_k8s_obj_put(o);
			return;
		}
	} else if (obj_key(obj, buf, sizeof(buf), &key)) {
		return;
	}
	pthread_mutex_lock(&s->lock);
	atomic_fetch_add(&s->events, 1);
	s->seq++;
	if (!s->patch && ndc_records_patch_new(s->ropts, &s->patch))
		s->patch = NULL;
	/* Without a patch, or an index to find what shares names, only a full build is right. */
	bool patchable = s->patch && s->index_ok;
	struct ndc_k8s_change c = {
	    .idx = &s->idx,
	    .tab = s->tab,
	    .cur = s->cur,
	    .patch = patchable ? s->patch : NULL,
	    .kind = kind,
	    .key = key,
	    .obj = o,
	    .seq = s->seq,
	};
	err = ndc_k8s_change_apply(&c);
	atomic_store(&s->objects, ndc_k8s_objtab_len(s->tab[NDC_K8S_NAMESPACES]) +
				      ndc_k8s_objtab_len(s->tab[NDC_K8S_SERVICES]) +
				      ndc_k8s_objtab_len(s->tab[NDC_K8S_ENDPOINTSLICES]) +
				      ndc_k8s_objtab_len(s->tab[NDC_K8S_PODS]) +
				      ndc_k8s_objtab_len(s->tab[NDC_K8S_SERVICEIMPORTS]));
	if (err || !patchable) {
		/*
		 * The change is in the store but (some of) its names are not in the patch: only a
		 * full build covers it. What the patch has is still right, each name as of its
		 * change.
		 */
		if (err)
			ndc_warn("records: incremental update failed (%s); rebuilding the table",
				 strerror(-err));
		s->want = FULL_ALL;
	}
	mark_dirty(s);
	pthread_mutex_unlock(&s->lock);
	free_key(key, buf);
}

const uint64_t ndc_k8s_lat_bounds_us[NDC_K8S_LAT_BUCKETS] = {
    100, 250, 500, 1000, 2500, 5000, 10000, 25000, 100000, 1000000, 10000000, UINT64_MAX,
};

const struct ndc_k8s_watch_ops ndc_k8s_store_ops = {
    .list_begin = on_list_begin,
    .list_item = on_list_item,
    .list_end = on_list_end,
    .event = on_event,
};

/* ---------------------------------------------------------------------------------------------
 * Full builds, from a snapshot.
 */
struct snapshot {
	struct ndc_k8s_obj **v;
	size_t n;
};

static void snapshot_put(struct snapshot *sn)
{
	for (size_t i = 0; i < sn->n; i++)
		ndc_k8s_obj_put(sn->v[i]);
	free(sn->v);
}

/* Every object, each held by a reference so the build can read them without the lock. */
static int snapshot_take(struct ndc_k8s_store *s, struct snapshot *sn)
{
	size_t n = 0;

	for (int k = 0; k < NDC_K8S_KINDS; k++)
		n += ndc_k8s_objtab_len(s->tab[k]);
	sn->n = 0;
	sn->v = malloc((n + 1) * sizeof(*sn->v));
	if (!sn->v)
		return -ENOMEM;
	for (int k = 0; k < NDC_K8S_KINDS; k++) {
		struct ndc_k8s_obj *o;
		size_t pos = 0;

		while ((o = ndc_k8s_objtab_next(s->tab[k], &pos))) {
			atomic_fetch_add(&o->refs, 1);
			sn->v[sn->n++] = o;
		}
	}
	atomic_store(&s->objects, sn->n);
	return 0;
}

static void coll_done(void *arg)
{
	ndc_k8s_coll_free(arg);
}

static int snapshot_build(struct ndc_k8s_store *s, const struct snapshot *sn,
			  struct ndc_records **ret)
{
	struct ndc_k8s_coll all = {0};
	int err = 0;

	for (size_t i = 0; i < sn->n && !err; i++) {
		struct ndc_k8s_objects v = ndc_k8s_obj_view(sn->v[i]);

		err = ndc_k8s_coll_add(&all, &v);
	}
	if (err) {
		ndc_k8s_coll_free(&all);
		return err;
	}
	/* The arrays (15 MB at 100,000 Services) go before rendering, not after. */
	return ndc_records_build_from(&all.o, s->ropts, coll_done, &all, ret);
}

/* ---------------------------------------------------------------------------------------------
 * The builder thread: full builds, from a snapshot, while the commit thread goes on patching.
 */
static void *builder_thread(void *arg)
{
	struct ndc_k8s_store *s = arg;

	/*
	 * Background work: on a busy node the watch threads and the commit thread, which decide
	 * programming latency, go first (a thread's nice value is its own on Linux).
	 */
	if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10))
		ndc_debug("records: builder thread keeps its priority: %s", strerror(errno));
	pthread_mutex_lock(&s->lock);
	for (;;) {
		while (!s->stop &&
		       (s->want == FULL_NONE || s->built || (s->listed & s->kinds) != s->kinds))
			pthread_cond_wait(&s->cond, &s->lock);
		if (s->stop)
			break;
		enum full kind = s->want;
		uint64_t seq = s->seq, t0 = now_us();
		struct ndc_records *base = NULL;
		struct snapshot sn;
		int err;

		s->want = FULL_NONE;
		s->building = true;
		err = snapshot_take(s, &sn);
		pthread_mutex_unlock(&s->lock);
		if (!err) {
			err = snapshot_build(s, &sn, &base);
			snapshot_put(&sn);
		}
		pthread_mutex_lock(&s->lock);
		s->building = false;
		if (err) {
			struct timespec ts;

			ndc_err(
			    "records: build failed (%s); serving the previous table, again in 1 s",
			    strerror(-err));
			if (s->want < kind)
				s->want = kind;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += 1;
			pthread_cond_timedwait(&s->cond, &s->lock, &ts);
			continue;
		}
		ndc_records_set_seq(base, seq);
		atomic_store(&s->last_build_us, now_us() - t0);
		atomic_fetch_add(&s->rebuilds, 1);
		s->built = base;
		s->built_kind = kind;
		pthread_cond_broadcast(&s->cond);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

/* ---------------------------------------------------------------------------------------------
 * The commit thread.
 */
static void record_latency(struct ndc_k8s_store *s, const uint64_t *arrivals, size_t n,
			   uint64_t first)
{
	uint64_t t = now_us(), worst = 0;

	for (size_t i = 0; i < n; i++) {
		uint64_t d = t - arrivals[i];
		int b = 0;

		while (b < NDC_K8S_LAT_BUCKETS - 1 && d > ndc_k8s_lat_bounds_us[b])
			b++;
		atomic_fetch_add(&s->lat_hist[b], 1);
		atomic_fetch_add(&s->lat_sum_us, d);
		worst = d > worst ? d : worst;
	}
	atomic_fetch_add(&s->lat_count, n);
	if (first && t - first > worst)
		worst = t - first;
	atomic_store(&s->last_latency_us, worst);
	if (worst > atomic_load(&s->max_latency_us))
		atomic_store(&s->max_latency_us, worst);
}

/*
 * One round, lock held on entry and exit (dropped while handing over): take over a new base if
 * the builder made one, apply the pending patch, hand the new table over.
 */
static void commit(struct ndc_k8s_store *s)
{
	struct ndc_records *mid = NULL, *next = NULL;
	struct ndc_records_patch *patch;
	enum full kind = FULL_NONE;
	uint64_t first = s->first_arrival, *arrivals;
	size_t n_arrivals;
	int err = 0;

	if (s->built) {
		/* Changes after the snapshot, already in cur, ride on the new base. */
		kind = s->built_kind;
		if (s->cur) {
			err = ndc_records_rebase(s->cur, s->built, &mid);
			ndc_records_free(s->built);
		} else {
			mid = s->built;
		}
		s->built = NULL;
		pthread_cond_broadcast(&s->cond); /* the builder may be waiting to start another */
		if (err)
			goto fail;
	}
	patch = s->patch;
	s->patch = NULL;
	if (patch && ndc_records_patch_size(patch) && (mid || s->cur)) {
		err = ndc_records_apply(mid ? mid : s->cur, patch, &next);
		ndc_records_free(mid);
		if (err) {
			ndc_records_patch_free(patch);
			goto fail;
		}
	} else {
		next = mid;
	}
	arrivals = s->arrivals;
	n_arrivals = s->n_arrivals;
	s->arrivals = NULL;
	s->n_arrivals = s->cap_arrivals = 0;
	if (!next) { /* changes that touched no name, or before the first table */
		ndc_records_patch_free(patch);
		free(arrivals);
		return;
	}
	s->cur = next;
	pthread_mutex_unlock(&s->lock);

	/* After a relist anything may have changed: the consumer republishes the whole table. */
	s->fn(s->arg, next, kind == FULL_ALL ? NULL : patch);
	if (kind == FULL_NONE)
		atomic_fetch_add(&s->patches, 1);
	record_latency(s, arrivals, n_arrivals, kind == FULL_ALL ? first : 0);
	free(arrivals);
	ndc_records_patch_free(patch);

	pthread_mutex_lock(&s->lock);
	if (s->want == FULL_NONE && !s->building && !s->built &&
	    ndc_records_overlay_size(s->cur) >
		(ndc_records_base_names(s->cur) >> COMPACT_SHIFT) + s->compact_min) {
		s->want = FULL_COMPACT;
		pthread_cond_broadcast(&s->cond);
	}
	return;
fail:
	ndc_err("records: update failed (%s); serving the previous table, rebuilding",
		strerror(-err));
	s->want = FULL_ALL;
	pthread_cond_broadcast(&s->cond);
}

/* Whether the commit thread has something to hand over. */
static bool work(const struct ndc_k8s_store *s)
{
	if (s->built)
		return true;
	return s->cur && (s->n_arrivals || (s->patch && ndc_records_patch_size(s->patch)));
}

/* Whether anything is still on its way to a table (for flush). */
static bool pending(const struct ndc_k8s_store *s)
{
	if ((s->listed & s->kinds) != s->kinds)
		return false;
	return work(s) || s->busy || s->building || s->want != FULL_NONE || !s->cur;
}

static void *commit_thread(void *arg)
{
	struct ndc_k8s_store *s = arg;

	pthread_mutex_lock(&s->lock);
	for (;;) {
		while (!s->stop && !work(s)) {
			pthread_cond_broadcast(&s->idle);
			pthread_cond_wait(&s->cond, &s->lock);
		}
		if (s->stop)
			break;
		s->busy = true;
		commit(s);
		s->busy = false;
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

int ndc_k8s_store_new(const struct ndc_records_opts *ropts, uint32_t kinds, ndc_k8s_store_fn fn,
		      void *arg, struct ndc_k8s_store **ret)
{
	struct ndc_k8s_store *s = calloc(1, sizeof(*s));
	int err;

	if (!s)
		return -ENOMEM;
	s->ropts = ropts;
	s->kinds = kinds;
	s->fn = fn;
	s->arg = arg;
	s->compact_min = COMPACT_MIN;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	pthread_cond_init(&s->idle, NULL);
	err = ndc_k8s_index_init(&s->idx, ropts);
	s->index_ok = !err;
	for (int k = 0; k < NDC_K8S_KINDS && !err; k++) {
		s->tab[k] = ndc_k8s_objtab_new();
		if (!s->tab[k])
			err = -ENOMEM;
	}
	if (!err)
		err = -pthread_create(&s->thread, NULL, commit_thread, s);
	s->started = !err;
	if (!err)
		err = -pthread_create(&s->builder, NULL, builder_thread, s);
	s->builder_started = !err;
	if (err) {
		ndc_k8s_store_free(s);
		return err;
	}
	*ret = s;
	return 0;
}

void ndc_k8s_store_free(struct ndc_k8s_store *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	s->stop = true;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	if (s->started)
		pthread_join(s->thread, NULL);
	if (s->builder_started)
		pthread_join(s->builder, NULL);
	ndc_records_patch_free(s->patch);
	ndc_records_free(s->built);
	ndc_k8s_index_free(&s->idx);
	for (int k = 0; k < NDC_K8S_KINDS; k++) {
		ndc_k8s_objtab_free(s->tab[k]);
		ndc_k8s_objtab_free(s->pending[k]);
	}
	free(s->arrivals);
	pthread_cond_destroy(&s->cond);
	pthread_cond_destroy(&s->idle);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

int ndc_k8s_store_flush(struct ndc_k8s_store *s, unsigned timeout_ms)
{
	struct timespec ts;
	int err = 0;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += timeout_ms / 1000;
	ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&s->lock);
	pthread_cond_broadcast(&s->cond);
	while (pending(s) && !err)
		err = pthread_cond_timedwait(&s->idle, &s->lock, &ts);
	pthread_mutex_unlock(&s->lock);
	return err ? -ETIMEDOUT : 0;
}

void ndc_k8s_store_set_compact(struct ndc_k8s_store *s, size_t min_names)
{
	pthread_mutex_lock(&s->lock);
	s->compact_min = min_names;
	pthread_mutex_unlock(&s->lock);
}

void ndc_k8s_store_stats(struct ndc_k8s_store *s, struct ndc_k8s_store_stats *ret)
{
	ret->objects = atomic_load(&s->objects);
	ret->events = atomic_load(&s->events);
	ret->rejected = atomic_load(&s->rejected);
	ret->rebuilds = atomic_load(&s->rebuilds);
	ret->patches = atomic_load(&s->patches);
	ret->last_build_us = atomic_load(&s->last_build_us);
	ret->last_latency_us = atomic_load(&s->last_latency_us);
	ret->max_latency_us = atomic_load(&s->max_latency_us);
	for (int i = 0; i < NDC_K8S_LAT_BUCKETS; i++)
		ret->lat_hist[i] = atomic_load(&s->lat_hist[i]);
	ret->lat_sum_us = atomic_load(&s->lat_sum_us);
	ret->lat_count = atomic_load(&s->lat_count);
}

#define F(...) NDC_METRIC_FIELD(struct ndc_k8s_store_stats, __VA_ARGS__, NULL)

static const struct ndc_metric_field store_fields[] = {
    F(objects, "k8s_objects", "gauge", "Objects in the store."),
    F(events, "k8s_events_total", "counter", "Watch events applied."),
    F(rejected, "k8s_rejected_total", "counter", "Objects rejected (last good state kept)."),
    F(rebuilds, "records_rebuilds_total", "counter",
      "Record tables built whole (first sync, relists, overlay folds)."),
    F(patches, "records_patches_total", "counter", "Incremental record table versions served."),
    F(last_latency_us, "programming_latency_last_us", "gauge",
      "Slowest change of the last table handed over, microseconds."),
    F(max_latency_us, "programming_latency_max_us", "gauge",
      "Largest programming latency seen, microseconds."),
    F(last_build_us, "records_build_last_us", "gauge",
      "Duration of the last record table build, microseconds."),
};

void ndc_k8s_store_metrics(void *store, struct ndc_metrics_buf *b)
{
	struct ndc_k8s_store_stats st;

	ndc_k8s_store_stats(store, &st);
	NDC_METRIC_TABLE(b, store_fields, &st, NULL);
	ndc_metric_histogram(b, "ndcache_programming_latency_us",
			     "Each object change, from its arrival until answers come from it, "
			     "microseconds.",
			     ndc_k8s_lat_bounds_us, st.lat_hist, NDC_K8S_LAT_BUCKETS,
			     st.lat_sum_us);
}
