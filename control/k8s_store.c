// SPDX-License-Identifier: MIT
#include <errno.h>
#include <json-c/json.h>
#include <json-c/linkhash.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ndc/log.h>

#include "k8s_store.h"

/* One object, converted, keyed by "namespace/name" (Namespaces: "name"). */
struct obj {
	struct ndc_k8s_objects one;
	char key[];
};

struct ndc_k8s_store {
	const struct ndc_records_opts *ropts;
	uint32_t kinds;
	ndc_k8s_store_fn fn;
	void *arg;

	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct lh_table *tab[NDC_K8S_KINDS];	 /* current state */
	struct lh_table *pending[NDC_K8S_KINDS]; /* a relist being built */
	uint32_t listed;			 /* kinds listed at least once */
	bool dirty;
	uint64_t dirty_since_us;
	bool stop;
	pthread_t thread;
	bool started;

	_Atomic uint64_t events, rejected, rebuilds, last_build_us, last_latency_us, max_latency_us,
	    objects;
};

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static void obj_free(struct lh_entry *e)
{
	struct obj *o = lh_entry_v(e);

	ndc_k8s_objects_free(&o->one);
	free(o);
}

static struct lh_table *table_new(void)
{
	return lh_kchar_table_new(64, obj_free);
}

/* "ns/name" of a watched object into buf; -EINVAL without a name. */
static int obj_key(struct json_object *obj, char *buf, size_t len)
{
	struct json_object *md, *ns, *name;

	if (!json_object_object_get_ex(obj, "metadata", &md) ||
	    !json_object_object_get_ex(md, "name", &name) ||
	    !json_object_is_type(name, json_type_string))
		return -EINVAL;
	if (json_object_object_get_ex(md, "namespace", &ns) &&
	    json_object_is_type(ns, json_type_string))
		snprintf(buf, len, "%s/%s", json_object_get_string(ns),
			 json_object_get_string(name));
	else
		snprintf(buf, len, "%s", json_object_get_string(name));
	return 0;
}

/*
 * Converts obj and puts it in t under its key, replacing what was there. A conversion failure
 * leaves t as it was (the last good version stays) and counts the object as rejected.
 */
static void put(struct ndc_k8s_store *s, struct lh_table *t, struct json_object *obj)
{
	char key[512], err[256];
	struct obj *o;
	size_t klen;

	if (obj_key(obj, key, sizeof(key))) {
		atomic_fetch_add(&s->rejected, 1);
		return;
	}
	klen = strlen(key);
	o = calloc(1, sizeof(*o) + klen + 1);
	if (!o)
		return;
	memcpy(o->key, key, klen + 1);
	if (ndc_k8s_object_add(&o->one, obj, err, sizeof(err)) < 0) {
		atomic_fetch_add(&s->rejected, 1);
		ndc_warn("k8s: %s rejected, keeping its last good state: %s", key, err);
		free(o);
		return;
	}
	lh_table_delete(t, key);
	lh_table_insert(t, o->key, o);
}

static void mark_dirty(struct ndc_k8s_store *s)
{
	if (!s->dirty) {
		s->dirty = true;
		s->dirty_since_us = now_us();
	}
	pthread_cond_signal(&s->cond);
}

static void on_list_begin(void *arg, enum ndc_k8s_kind kind)
{
	struct ndc_k8s_store *s = arg;

	pthread_mutex_lock(&s->lock);
	if (s->pending[kind])
		lh_table_free(s->pending[kind]);
	s->pending[kind] = table_new();
	pthread_mutex_unlock(&s->lock);
}

static void on_list_item(void *arg, enum ndc_k8s_kind kind, struct json_object *obj)
{
	struct ndc_k8s_store *s = arg;

	pthread_mutex_lock(&s->lock);
	if (s->pending[kind])
		put(s, s->pending[kind], obj);
	pthread_mutex_unlock(&s->lock);
}

static void on_list_end(void *arg, enum ndc_k8s_kind kind)
{
	struct ndc_k8s_store *s = arg;

	pthread_mutex_lock(&s->lock);
	if (s->pending[kind]) {
		/* The whole new state at once: nothing disappears while a relist runs. */
		lh_table_free(s->tab[kind]);
		s->tab[kind] = s->pending[kind];
		s->pending[kind] = NULL;
		s->listed |= 1u << kind;
		mark_dirty(s);
	}
	pthread_mutex_unlock(&s->lock);
}

static void on_event(void *arg, enum ndc_k8s_kind kind, enum ndc_k8s_event ev,
		     struct json_object *obj)
{
	struct ndc_k8s_store *s = arg;
	char key[512];

	pthread_mutex_lock(&s->lock);
	atomic_fetch_add(&s->events, 1);
	if (ev == NDC_K8S_DELETED) {
		if (!obj_key(obj, key, sizeof(key)))
			lh_table_delete(s->tab[kind], key);
	} else {
		put(s, s->tab[kind], obj);
	}
	mark_dirty(s);
	pthread_mutex_unlock(&s->lock);
}

const struct ndc_k8s_watch_ops ndc_k8s_store_ops = {
    .list_begin = on_list_begin,
    .list_item = on_list_item,
    .list_end = on_list_end,
    .event = on_event,
};

/* Appends n elements of size sz from src to *dst (count *n_dst, capacity *cap). */
static int append(void **dst, size_t *n_dst, size_t *cap, const void *src, size_t n, size_t sz)
{
	if (!n)
		return 0; /* src may be NULL then, and memcpy must not see it */
	if (*n_dst + n > *cap) {
		size_t c = *cap ? *cap * 2 : 256;
		void *p;

		while (c < *n_dst + n)
			c *= 2;
		p = realloc(*dst, c * sz);
		if (!p)
			return -ENOMEM;
		*dst = p;
		*cap = c;
	}
	memcpy((char *)*dst + *n_dst * sz, src, n * sz);
	*n_dst += n;
	return 0;
}

/*
 * Builds a table from the whole store. The objects array holds shallow copies: they point into
 * the store's objects, so the lock is held until the build is done.
 */
static int rebuild(struct ndc_k8s_store *s, struct ndc_records **ret)
{
	struct ndc_k8s_objects all = {0};
	size_t cap[4] = {0};
	struct lh_entry *e;
	uint64_t n = 0;
	int err = 0;

	for (int k = 0; k < NDC_K8S_KINDS && !err; k++) {
		lh_foreach(s->tab[k], e)
		{
			const struct ndc_k8s_objects *o = &((const struct obj *)lh_entry_v(e))->one;

			n++;
			err = append((void **)&all.namespaces, &all.n_namespaces, &cap[0],
				     o->namespaces, o->n_namespaces, sizeof(*o->namespaces));
			err = err
				  ?: append((void **)&all.services, &all.n_services, &cap[1],
					    o->services, o->n_services, sizeof(*o->services));
			err = err
				  ?: append((void **)&all.slices, &all.n_slices, &cap[2], o->slices,
					    o->n_slices, sizeof(*o->slices));
			err = err
				  ?: append((void **)&all.pods, &all.n_pods, &cap[3], o->pods,
					    o->n_pods, sizeof(*o->pods));
			if (err)
				break;
		}
	}
	atomic_store(&s->objects, n);
	if (!err)
		err = ndc_records_build(&all, s->ropts, ret);
	/* Shallow: only the arrays are ours. */
	free(all.namespaces);
	free(all.services);
	free(all.slices);
	free(all.pods);
	return err;
}

static void *rebuild_thread(void *arg)
{
	struct ndc_k8s_store *s = arg;

	pthread_mutex_lock(&s->lock);
	for (;;) {
		while (!s->stop && (!s->dirty || (s->listed & s->kinds) != s->kinds))
			pthread_cond_wait(&s->cond, &s->lock);
		if (s->stop)
			break;
		uint64_t since = s->dirty_since_us, t0 = now_us();
		struct ndc_records *rec = NULL;
		int err;

		s->dirty = false;
		err = rebuild(s, &rec);
		pthread_mutex_unlock(&s->lock);
		if (err) {
			ndc_err("records: rebuild failed (%s); serving the previous table",
				strerror(-err));
		} else {
			uint64_t t1 = now_us();

			s->fn(s->arg, rec);
			atomic_store(&s->last_build_us, t1 - t0);
			atomic_store(&s->last_latency_us, now_us() - since);
			if (now_us() - since > atomic_load(&s->max_latency_us))
				atomic_store(&s->max_latency_us, now_us() - since);
			atomic_fetch_add(&s->rebuilds, 1);
		}
		pthread_mutex_lock(&s->lock);
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
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	for (int k = 0; k < NDC_K8S_KINDS; k++) {
		s->tab[k] = table_new();
		if (!s->tab[k]) {
			ndc_k8s_store_free(s);
			return -ENOMEM;
		}
	}
	err = -pthread_create(&s->thread, NULL, rebuild_thread, s);
	if (err) {
		ndc_k8s_store_free(s);
		return err;
	}
	s->started = true;
	*ret = s;
	return 0;
}

void ndc_k8s_store_free(struct ndc_k8s_store *s)
{
	if (!s)
		return;
	if (s->started) {
		pthread_mutex_lock(&s->lock);
		s->stop = true;
		pthread_cond_signal(&s->cond);
		pthread_mutex_unlock(&s->lock);
		pthread_join(s->thread, NULL);
	}
	for (int k = 0; k < NDC_K8S_KINDS; k++) {
		if (s->tab[k])
			lh_table_free(s->tab[k]);
		if (s->pending[k])
			lh_table_free(s->pending[k]);
	}
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

void ndc_k8s_store_stats(struct ndc_k8s_store *s, struct ndc_k8s_store_stats *ret)
{
	ret->objects = atomic_load(&s->objects);
	ret->events = atomic_load(&s->events);
	ret->rejected = atomic_load(&s->rejected);
	ret->rebuilds = atomic_load(&s->rebuilds);
	ret->last_build_us = atomic_load(&s->last_build_us);
	ret->last_latency_us = atomic_load(&s->last_latency_us);
	ret->max_latency_us = atomic_load(&s->max_latency_us);
}
