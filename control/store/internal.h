/* SPDX-License-Identifier: MIT */
/*
 * Private to the store: its objects, the indexes that find every object sharing a name with a
 * changed one, and the change itself (k8s_store_change.c). Everything here runs under the
 * store's lock except ndc_k8s_obj_put, which any thread may call.
 */
#ifndef NDC_K8S_STORE_INTERNAL_H
#define NDC_K8S_STORE_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "k8s/k8s.h"
#include "objects/objects.h"
#include "records/records.h"

struct lh_table;

/*
 * One object, converted, keyed by "namespace/name" (Namespaces: "name") as its element names
 * it: no copy of the key is kept. Immutable once made. It is one block, this header followed by
 * the element and what it points to (ndc_k8s_object_convert): a second allocation per object,
 * with its malloc header and rounding, cost 48 to 64 bytes (10 MB at 200,000 objects).
 */
struct ndc_k8s_obj {
	_Atomic uint32_t refs; /* the store's table, plus snapshots being built from */
	uint8_t kind;	       /* enum ndc_k8s_kind */
	void *elem[]; /* char *, struct ndc_k8s_service (also ServiceImports), _slice, _pod */
};

#define NDC_K8S_OBJ_HEAD offsetof(struct ndc_k8s_obj, elem)

static inline const struct ndc_k8s_slice *ndc_k8s_obj_slice(const struct ndc_k8s_obj *o)
{
	return (const struct ndc_k8s_slice *)o->elem;
}

static inline const struct ndc_k8s_pod *ndc_k8s_obj_pod(const struct ndc_k8s_obj *o)
{
	return (const struct ndc_k8s_pod *)o->elem;
}

/* The namespace (NULL for a Namespace) and name o is keyed by. */
static inline void ndc_k8s_obj_id(const struct ndc_k8s_obj *o, const char **ret_ns,
				  const char **ret_name)
{
	switch (o->kind) {
	case NDC_K8S_SERVICES:
	case NDC_K8S_SERVICEIMPORTS:
		*ret_ns = ((const struct ndc_k8s_service *)o->elem)->ns;
		*ret_name = ((const struct ndc_k8s_service *)o->elem)->name;
		return;
	case NDC_K8S_ENDPOINTSLICES:
		*ret_ns = ndc_k8s_obj_slice(o)->ns;
		*ret_name = ndc_k8s_obj_slice(o)->name;
		return;
	case NDC_K8S_PODS:
		*ret_ns = ndc_k8s_obj_pod(o)->ns;
		*ret_name = ndc_k8s_obj_pod(o)->name;
		return;
	default:
		*ret_ns = NULL;
		*ret_name = ((char *const *)o->elem)[0];
		return;
	}
}

/* o as the struct ndc_k8s_objects conversion filled (one element of its kind). */
static inline struct ndc_k8s_objects ndc_k8s_obj_view(const struct ndc_k8s_obj *o)
{
	struct ndc_k8s_objects v = {0};

	switch (o->kind) {
	case NDC_K8S_NAMESPACES:
		v.namespaces = (char **)o->elem;
		v.n_namespaces = v.cap_namespaces = 1;
		break;
	case NDC_K8S_SERVICES:
		v.services = (struct ndc_k8s_service *)o->elem;
		v.n_services = v.cap_services = 1;
		break;
	case NDC_K8S_ENDPOINTSLICES:
		v.slices = (struct ndc_k8s_slice *)o->elem;
		v.n_slices = v.cap_slices = 1;
		break;
	case NDC_K8S_PODS:
		v.pods = (struct ndc_k8s_pod *)o->elem;
		v.n_pods = v.cap_pods = 1;
		break;
	case NDC_K8S_SERVICEIMPORTS:
		v.imports = (struct ndc_k8s_service *)o->elem;
		v.n_imports = v.cap_imports = 1;
		break;
	}
	return v;
}

/* Drops a reference; the last one frees the object (k8s_objtab.c). Any thread. */
void ndc_k8s_obj_put(struct ndc_k8s_obj *o);

/*
 * A table of objects by key (k8s_objtab.c). It holds one reference on each object: put takes the
 * caller's (and drops the one of the object it replaces), del and free drop theirs.
 */
struct ndc_k8s_objtab;
struct ndc_k8s_objtab *ndc_k8s_objtab_new(void);
void ndc_k8s_objtab_free(struct ndc_k8s_objtab *t);
size_t ndc_k8s_objtab_len(const struct ndc_k8s_objtab *t);
struct ndc_k8s_obj *ndc_k8s_objtab_get(const struct ndc_k8s_objtab *t, const char *key);
/* -ENOMEM: the table is unchanged and the caller keeps its reference. */
int ndc_k8s_objtab_put(struct ndc_k8s_objtab *t, struct ndc_k8s_obj *o);
void ndc_k8s_objtab_del(struct ndc_k8s_objtab *t, const char *key);
/* Iteration: *pos starts at 0; NULL at the end. No changes in between. */
struct ndc_k8s_obj *ndc_k8s_objtab_next(const struct ndc_k8s_objtab *t, size_t *pos);

/*
 * EndpointSlices by Service ("ns", "name"), or with mc by ServiceImport (the multicluster label);
 * no references held. Iteration over a Service's slices: *pos starts at 0; NULL at the end. No
 * changes in between.
 */
struct ndc_k8s_slicetab;
struct ndc_k8s_slicetab *ndc_k8s_slicetab_new(bool mc);
void ndc_k8s_slicetab_free(struct ndc_k8s_slicetab *t);
size_t ndc_k8s_slicetab_len(const struct ndc_k8s_slicetab *t);
int ndc_k8s_slicetab_add(struct ndc_k8s_slicetab *t, struct ndc_k8s_obj *o);
void ndc_k8s_slicetab_del(struct ndc_k8s_slicetab *t, struct ndc_k8s_obj *o);
struct ndc_k8s_obj *ndc_k8s_slicetab_next(const struct ndc_k8s_slicetab *t, const char *ns,
					  const char *svc, size_t *pos);

/* Shallow collections of objects' contents, for the record builder. */
struct ndc_k8s_coll {
	struct ndc_k8s_objects o;
	size_t cap[5];
	struct ndc_k8s_obj **held; /* referenced while the collection lives */
	size_t n_held, cap_held;
};
int ndc_k8s_coll_add(struct ndc_k8s_coll *c, const struct ndc_k8s_objects *one);
void ndc_k8s_coll_free(struct ndc_k8s_coll *c);

struct ndc_k8s_index {
	const struct ndc_records_opts *ropts;
	size_t svczlen, podzlen;
	uint8_t svcz[NDC_NAME_MAX];	   /* svc.<zone>: PTR targets name their service below it */
	uint8_t podz[NDC_NAME_MAX];	   /* pod.<zone> */
	struct ndc_k8s_slicetab *slices;   /* the EndpointSlices labelled for each Service */
	struct ndc_k8s_slicetab *mcslices; /* ... and for each ServiceImport */
	struct lh_table *ns;		   /* namespace -> what makes it exist */
	struct lh_table *podips;	   /* "ns|ip" -> pods with that IP there */
	struct lh_table *aliases; /* what makes a name of the zone -> ExternalNames to it */
};

int ndc_k8s_index_init(struct ndc_k8s_index *x, const struct ndc_records_opts *ropts);
/* Indexes tab (every kind) from scratch, after a relist. */
int ndc_k8s_index_rebuild(struct ndc_k8s_index *x, struct ndc_k8s_objtab *const *tab);
void ndc_k8s_index_free(struct ndc_k8s_index *x);

struct ndc_k8s_change {
	struct ndc_k8s_index *idx;
	struct ndc_k8s_objtab *const *tab;
	const struct ndc_records *cur;	 /* newest table, or NULL */
	struct ndc_records_patch *patch; /* NULL: only the store changes */
	enum ndc_k8s_kind kind;
	const char *key;
	struct ndc_k8s_obj
	    *obj; /* the new version (reference passes to the store), NULL: deleted */
	uint64_t seq;
};

/*
 * Puts the change in the store and its indexes, and its names in the patch. The store always
 * changes; an error (-ENOMEM, -ENOSPC) means the patch could not take it.
 */
int ndc_k8s_change_apply(const struct ndc_k8s_change *c);

#endif
