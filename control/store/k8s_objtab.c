// SPDX-License-Identifier: MIT
/*
 * The store's tables over object pointers: open addressing with linear probing, deletion by
 * backward shift so no tombstones pile up under churn. About 11 bytes per object at the largest
 * load, against about 100 for json-c's lh_table (40-byte entries at a load of at most two
 * thirds): 17 MB less at 200,000 objects. Two tables share the core below and differ only in
 * their key: objects by their own key, and EndpointSlices by the Service they are labelled for.
 * Neither stores a key: both hash and compare the names in the object's element, which saves a
 * copy of "ns/name" per object.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/*
 * An object's last reference: the tables hold one each, and so do the store's snapshots and
 * changes in flight; so the object's lifetime lives here, below everything that holds one.
 */
void ndc_k8s_obj_put(struct ndc_k8s_obj *o)
{
	/* One block: the header, the element and what it points to (ndc_k8s_object_convert). */
	if (o && atomic_fetch_sub(&o->refs, 1) == 1)
		free(o);
}

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

/*
 * Makes room for one more entry: doubles past a load of 4/5. A probe past a slot that is not the
 * key costs a look into the object (the key is not stored): about 3 probes to find a key and 13
 * to miss one at the largest load, a few microseconds beside the patch an event builds, for a
 * fifth fewer slots (100,000 objects fit 131,072).
 */
static int tab_reserve(struct ptrtab *t)
{
	struct ndc_k8s_obj **slot;
	size_t cap = t->cap * 2;

	if ((t->n + 1) * 5 <= t->cap * 4)
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

/* The hash of "ns/name" (a Namespace: "name"), as one string: what find() hashes. */
static size_t key_home(const struct ndc_k8s_obj *o)
{
	const char *ns, *name;
	uint64_t h = FNV_BASIS;

	ndc_k8s_obj_id(o, &ns, &name);
	if (ns)
		h = fnv(fnv(h, ns), "/");
	return fold(fnv(h, name));
}

/*
 * The key of o read a byte at a time, so it compares as the string "ns/name" would (two
 * splits of one string are one key, as they were when the key was stored) without making it.
 */
struct keycur {
	const char *part[3];
	int i;
};

static void keycur_init(struct keycur *k, const struct ndc_k8s_obj *o)
{
	const char *ns, *name;

	ndc_k8s_obj_id(o, &ns, &name);
	k->part[0] = ns ? ns : "";
	k->part[1] = ns ? "/" : "";
	k->part[2] = name;
	k->i = 0;
}

static char keycur_next(struct keycur *k)
{
	while (k->i < 3 && !*k->part[k->i])
		k->i++;
	return k->i < 3 ? *k->part[k->i]++ : 0;
}

static bool key_is(const struct ndc_k8s_obj *o, const char *key)
{
	struct keycur k;
	char c;

	keycur_init(&k, o);
	do {
		c = keycur_next(&k);
		if (c != *key++)
			return false;
	} while (c);
	return true;
}

static bool same_key(const struct ndc_k8s_obj *a, const struct ndc_k8s_obj *b)
{
	struct keycur x, y;
	char c;

	keycur_init(&x, a);
	keycur_init(&y, b);
	do {
		c = keycur_next(&x);
		if (c != keycur_next(&y))
			return false;
	} while (c);
	return true;
}

static size_t find(const struct ptrtab *t, const char *key)
{
	size_t m = t->cap - 1;

	for (size_t i = fold(fnv(FNV_BASIS, key)) & m;; i = (i + 1) & m)
		if (!t->slot[i] || key_is(t->slot[i], key))
			return i;
}

/* The slot of the object with o's key, or the empty one where o goes. */
static size_t find_obj(const struct ptrtab *t, const struct ndc_k8s_obj *o)
{
	size_t m = t->cap - 1;

	for (size_t i = key_home(o) & m;; i = (i + 1) & m)
		if (!t->slot[i] || same_key(t->slot[i], o))
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
	i = find_obj(&t->t, o);
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
 * EndpointSlices by the Service they are labelled for (or, in the multicluster table, by the
 * ServiceImport): one slot per slice, the slices of a Service in the probe run from its home (a
 * multimap: a lookup walks the run to its end). Kept in the table rather than chained through the
 * objects, which would cost every object a pointer. The index holds no references: the store adds
 * and removes slices as its object table gains and loses them.
 */
struct ndc_k8s_slicetab {
	struct ptrtab t;
	bool mc; /* by the ServiceImport (multicluster.kubernetes.io/service-name) instead */
};

static size_t svc_hash(const char *ns, const char *svc)
{
	return fold(fnv(fnv(fnv(FNV_BASIS, ns), "/"), svc));
}

/* The Service (or ServiceImport) a slice is labelled for in t, or NULL. */
static const char *label_of(const struct ndc_k8s_slicetab *t, const struct ndc_k8s_slice *sl)
{
	return t->mc ? sl->mc_service : sl->service;
}

static size_t svc_home(const struct ndc_k8s_obj *o)
{
	return svc_hash(ndc_k8s_obj_slice(o)->ns, ndc_k8s_obj_slice(o)->service);
}

static size_t import_home(const struct ndc_k8s_obj *o)
{
	return svc_hash(ndc_k8s_obj_slice(o)->ns, ndc_k8s_obj_slice(o)->mc_service);
}

static bool indexed(const struct ndc_k8s_slicetab *t, const struct ndc_k8s_obj *o)
{
	return o->kind == NDC_K8S_ENDPOINTSLICES && ndc_k8s_obj_slice(o)->ns &&
	       label_of(t, ndc_k8s_obj_slice(o));
}

struct ndc_k8s_slicetab *ndc_k8s_slicetab_new(bool mc)
{
	struct ndc_k8s_slicetab *t = calloc(1, sizeof(*t));

	if (t)
		t->mc = mc;
	if (t && tab_init(&t->t, mc ? import_home : svc_home)) {
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

size_t ndc_k8s_slicetab_len(const struct ndc_k8s_slicetab *t)
{
	return t->t.n;
}

int ndc_k8s_slicetab_add(struct ndc_k8s_slicetab *t, struct ndc_k8s_obj *o)
{
	size_t m, i;
	int err;

	if (!indexed(t, o))
		return 0;
	err = tab_reserve(&t->t);
	if (err)
		return err;
	m = t->t.cap - 1;
	for (i = t->t.home(o) & m; t->t.slot[i]; i = (i + 1) & m)
		;
	t->t.slot[i] = o;
	t->t.n++;
	return 0;
}

void ndc_k8s_slicetab_del(struct ndc_k8s_slicetab *t, struct ndc_k8s_obj *o)
{
	size_t m = t->t.cap - 1, i;

	if (!indexed(t, o))
		return;
	for (i = t->t.home(o) & m; t->t.slot[i]; i = (i + 1) & m) {
		if (t->t.slot[i] == o) {
			tab_remove_at(&t->t, i);
			return;
		}
	}
}

struct ndc_k8s_obj *ndc_k8s_slicetab_next(const struct ndc_k8s_slicetab *t, const char *ns,
					  const char *svc, size_t *pos)
{
	size_t m = t->t.cap - 1;

	/* *pos counts the slots of the run already looked at. */
	for (size_t i = (svc_hash(ns, svc) + *pos) & m; t->t.slot[i]; i = (i + 1) & m) {
		const struct ndc_k8s_slice *sl = ndc_k8s_obj_slice(t->t.slot[i]);

		(*pos)++;
		if (!strcmp(sl->ns, ns) && !strcmp(label_of(t, sl), svc))
			return t->t.slot[i];
	}
	return NULL;
}
