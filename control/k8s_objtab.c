// SPDX-License-Identifier: MIT
/*
 * The store's tables over object pointers: open addressing with linear probing, deletion by
 * backward shift so no tombstones pile up under churn. About 11 bytes per object at the largest
 * load, against about 100 for json-c's lh_table (40-byte entries at a load of at most two
 * thirds): 17 MB less at 200,000 objects. Two tables share the core below and differ only in
 * their key: objects by their own key, and EndpointSlices by the Service they are labelled for.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "k8s_store_internal.h"

/* ---------------------------------------------------------------------------------------------
 * The core: slots of object pointers, each table's key hashed by home().
 */
struct ptrtab {
	struct ndc_k8s_obj **slot;
	size_t cap; /* a power of two */
	size_t n;
	size_t (*home)(const struct ndc_k8s_obj *o); /* hash of o's key in this table */
};

/* FNV-1a over a string, continuing from h (start: FNV_BASIS). */
#define FNV_BASIS 0xcbf29ce484222325ULL
static uint64_t fnv(uint64_t h, const char *s)
{
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 0x100000001b3ULL;
	return h;
}

static size_t fold(uint64_t h)
{
	return (size_t)(h ^ (h >> 29));
}

static int tab_init(struct ptrtab *t, size_t (*home)(const struct ndc_k8s_obj *))
{
	t->cap = 64;
	t->n = 0;
	t->home = home;
	t->slot = calloc(t->cap, sizeof(*t->slot));
	return t->slot ? 0 : -ENOMEM;
}

/* Makes room for one more entry: doubles at a load of 3/4. */
static int tab_reserve(struct ptrtab *t)
{
	struct ndc_k8s_obj **slot;
	size_t cap = t->cap * 2;

	if ((t->n + 1) * 4 <= t->cap * 3)
		return 0;
	slot = calloc(cap, sizeof(*slot));
	if (!slot)
		return -ENOMEM;
	for (size_t i = 0; i < t->cap; i++) {
		size_t k;

		if (!t->slot[i])
			continue;
		for (k = t->home(t->slot[i]) & (cap - 1); slot[k]; k = (k + 1) & (cap - 1))
			;
		slot[k] = t->slot[i];
	}
	free(t->slot);
	t->slot = slot;
	t->cap = cap;
	return 0;
}

/* Empties slot i and moves up every entry of the probe run after it that may sit there. */
static void tab_remove_at(struct ptrtab *t, size_t i)
{
	size_t m = t->cap - 1;

	t->slot[i] = NULL;
	t->n--;
	for (size_t j = i;;) {
		j = (j + 1) & m;
		if (!t->slot[j])
			return;
		size_t home = t->home(t->slot[j]) & m;

		/* The entry at j stays unless its home is cyclically outside (i, j]. */
		if (i <= j ? (home > i && home <= j) : (home > i || home <= j))
			continue;
		t->slot[i] = t->slot[j];
		t->slot[j] = NULL;
		i = j;
	}
}

/* ---------------------------------------------------------------------------------------------
 * Objects by their key. The table holds one reference on each.
 */
struct ndc_k8s_objtab {
	struct ptrtab t;
};

static size_t key_home(const struct ndc_k8s_obj *o)
{
	return fold(fnv(FNV_BASIS, o->key));
}

static size_t find(const struct ptrtab *t, const char *key)
{
	size_t m = t->cap - 1;

	for (size_t i = fold(fnv(FNV_BASIS, key)) & m;; i = (i + 1) & m)
		if (!t->slot[i] || !strcmp(t->slot[i]->key, key))
			return i;
}

struct ndc_k8s_objtab *ndc_k8s_objtab_new(void)
{
	struct ndc_k8s_objtab *t = calloc(1, sizeof(*t));

	if (t && tab_init(&t->t, key_home)) {
		free(t);
		t = NULL;
	}
	return t;
}

void ndc_k8s_objtab_free(struct ndc_k8s_objtab *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->t.cap; i++)
		ndc_k8s_obj_put(t->t.slot[i]);
	free(t->t.slot);
	free(t);
}

size_t ndc_k8s_objtab_len(const struct ndc_k8s_objtab *t)
{
	return t->t.n;
}

struct ndc_k8s_obj *ndc_k8s_objtab_get(const struct ndc_k8s_objtab *t, const char *key)
{
	return t->t.slot[find(&t->t, key)];
}

int ndc_k8s_objtab_put(struct ndc_k8s_objtab *t, struct ndc_k8s_obj *o)
{
	int err = tab_reserve(&t->t);
	size_t i;

	if (err)
		return err;
	i = find(&t->t, o->key);
	if (t->t.slot[i])
		ndc_k8s_obj_put(t->t.slot[i]);
	else
		t->t.n++;
	t->t.slot[i] = o;
	return 0;
}

void ndc_k8s_objtab_del(struct ndc_k8s_objtab *t, const char *key)
{
	size_t i = find(&t->t, key);
	struct ndc_k8s_obj *o = t->t.slot[i];

	if (!o)
		return;
	tab_remove_at(&t->t, i);
	ndc_k8s_obj_put(o);
}

struct ndc_k8s_obj *ndc_k8s_objtab_next(const struct ndc_k8s_objtab *t, size_t *pos)
{
	while (*pos < t->t.cap) {
		struct ndc_k8s_obj *o = t->t.slot[(*pos)++];

		if (o)
			return o;
	}
	return NULL;
}

/* ---------------------------------------------------------------------------------------------
 * EndpointSlices by the Service they are labelled for: one slot per Service, the slices of a
 * Service chained through their objects (sib). The index holds no references: the store adds
 * and removes slices as its object table gains and loses them.
 */
struct ndc_k8s_slicetab {
	struct ptrtab t; /* the first slice of each Service */
};

static const struct ndc_k8s_slice *slice_of(const struct ndc_k8s_obj *o)
{
	return (const struct ndc_k8s_slice *)o->elem;
}

static size_t svc_hash(const char *ns, const char *svc)
{
	return fold(fnv(fnv(fnv(FNV_BASIS, ns), "/"), svc));
}

static size_t svc_home(const struct ndc_k8s_obj *o)
{
	return svc_hash(slice_of(o)->ns, slice_of(o)->service);
}

static size_t sfind(const struct ptrtab *t, const char *ns, const char *svc)
{
	size_t m = t->cap - 1;

	for (size_t i = svc_hash(ns, svc) & m;; i = (i + 1) & m) {
		const struct ndc_k8s_slice *sl = t->slot[i] ? slice_of(t->slot[i]) : NULL;

		if (!sl || (!strcmp(sl->ns, ns) && !strcmp(sl->service, svc)))
			return i;
	}
}

struct ndc_k8s_slicetab *ndc_k8s_slicetab_new(void)
{
	struct ndc_k8s_slicetab *t = calloc(1, sizeof(*t));

	if (t && tab_init(&t->t, svc_home)) {
		free(t);
		t = NULL;
	}
	return t;
}

void ndc_k8s_slicetab_free(struct ndc_k8s_slicetab *t)
{
	if (t)
		free(t->t.slot);
	free(t);
}

int ndc_k8s_slicetab_add(struct ndc_k8s_slicetab *t, struct ndc_k8s_obj *o)
{
	const struct ndc_k8s_slice *sl = slice_of(o);
	size_t i;
	int err;

	if (!sl->ns || !sl->service)
		return 0;
	err = tab_reserve(&t->t);
	if (err)
		return err;
	i = sfind(&t->t, sl->ns, sl->service);
	t->t.n += !t->t.slot[i];
	o->sib = t->t.slot[i];
	t->t.slot[i] = o;
	return 0;
}

void ndc_k8s_slicetab_del(struct ndc_k8s_slicetab *t, struct ndc_k8s_obj *o)
{
	const struct ndc_k8s_slice *sl = slice_of(o);
	struct ndc_k8s_obj **p;
	size_t i;

	if (!sl->ns || !sl->service)
		return;
	i = sfind(&t->t, sl->ns, sl->service);
	for (p = &t->t.slot[i]; *p && *p != o; p = &(*p)->sib)
		;
	if (!*p)
		return;
	*p = o->sib;
	o->sib = NULL;
	if (!t->t.slot[i]) /* the Service's last slice went */
		tab_remove_at(&t->t, i);
}

struct ndc_k8s_obj *ndc_k8s_slicetab_first(const struct ndc_k8s_slicetab *t, const char *ns,
					   const char *svc)
{
	return t->t.slot[sfind(&t->t, ns, svc)];
}
