/* SPDX-License-Identifier: MIT */
/*
 * Incremental versions of the record table. A change of the object store is turned into whole
 * nodes (a name and every answer it has, or a deletion marker) by running the same builder and
 * renderer as a full build on just the objects that make those names. A version is its base (the
 * built blob, shared) plus an overlay of such nodes consulted first. The overlay is a directory
 * of buckets: a new version copies the directory and only the buckets its names fall in, so one
 * change costs a few small copies whatever the size of the cluster, and every older version
 * stays intact for the readers still holding it. Entries and buckets are reference counted
 * across versions; versions are freed by the writer after an RCU grace period.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define OVL_MIN_BITS 6
#define OVL_LOAD 4 /* mean entries per bucket before the directory doubles */

struct ndc_records_patch {
	const struct ndc_records_opts *opts;
	struct ndc_rec_oent **tab; /* open addressing by name */
	size_t cap, n;
	struct ndc_records scratch; /* only its blob: where nodes are rendered */
	struct ndc_answer *ans;
};

/* ---------------------------------------------------------------------------------------------
 * Patches: changes to whole nodes.
 */
int ndc_records_patch_new(const struct ndc_records_opts *opts, struct ndc_records_patch **ret)
{
	struct ndc_records_patch *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	p->opts = opts;
	p->cap = 64;
	p->tab = calloc(p->cap, sizeof(*p->tab));
	p->ans = malloc(sizeof(*p->ans) + NDC_MSG_MAX);
	if (!p->tab || !p->ans) {
		ndc_records_patch_free(p);
		return -ENOMEM;
	}
	*ret = p;
	return 0;
}

void ndc_records_patch_free(struct ndc_records_patch *p)
{
	if (!p)
		return;
	for (size_t i = 0; p->tab && i < p->cap; i++)
		ndc_rec_oent_put(p->tab[i]);
	free(p->tab);
	free(p->scratch.blob);
	free(p->ans);
	free(p);
}

size_t ndc_records_patch_size(const struct ndc_records_patch *p)
{
	return p->n;
}

int ndc_records_patch_foreach(const struct ndc_records_patch *p,
			      int (*fn)(void *arg, const uint8_t *lname, size_t nlen), void *arg)
{
	for (size_t i = 0; i < p->cap; i++) {
		const struct ndc_rec_node_r *nd = p->tab[i] ? ndc_rec_oent_node(p->tab[i]) : NULL;
		int err = nd ? fn(arg, nd->name, nd->nlen) : 0;

		if (err)
			return err;
	}
	return 0;
}

static struct ndc_rec_oent **pslot(struct ndc_rec_oent **tab, size_t cap, const uint8_t *n,
				   size_t len, uint32_t h)
{
	for (size_t i = h & (cap - 1);; i = (i + 1) & (cap - 1))
		if (!tab[i] || ndc_rec_oent_is(tab[i], n, len, h))
			return &tab[i];
}

static int pgrow(struct ndc_records_patch *p)
{
	size_t cap = p->cap * 2;
	struct ndc_rec_oent **tab = calloc(cap, sizeof(*tab));

	if (!tab)
		return -ENOMEM;
	for (size_t i = 0; i < p->cap; i++) {
		const struct ndc_rec_node_r *nd = p->tab[i] ? ndc_rec_oent_node(p->tab[i]) : NULL;

		if (nd)
			*pslot(tab, cap, nd->name, nd->nlen, nd->hash) = p->tab[i];
	}
	free(p->tab);
	p->tab = tab;
	p->cap = cap;
	return 0;
}

/* The new node of name t (a name of the change) from the context's build bc. */
static int patch_name(struct ndc_records_patch *p, struct ndc_rec_bld *bc,
		      const struct ndc_rec_node *t, uint64_t seq)
{
	const struct ndc_rec_node *c = ndc_rec_find(bc, t->name, t->nlen);
	struct ndc_rec_oent **s, *e;
	bool exists;
	size_t len;
	int err;

	if ((p->n + 1) * 2 > p->cap && (err = pgrow(p)))
		return err;
	s = pslot(p->tab, p->cap, t->name, t->nlen, t->hash);
	if (*s && (*s)->seq == seq)
		return 0; /* before and after both make it: done once */
	/* Out of the zone only PTR owners are names; their non-terminals are never answered. */
	exists = c && (c->head || ndc_rec_bld_zone(bc, t->name, t->nlen));
	if (exists) {
		p->scratch.blob_len = 0;
		err = ndc_rec_render_node(bc, &p->scratch, c, p->ans, true);
		if (err)
			return err;
		len = p->scratch.blob_len;
	} else {
		len = NDC_REC_ALIGN4(sizeof(struct ndc_rec_node_r) + t->nlen);
	}
	e = malloc(sizeof(*e) + len);
	if (!e)
		return -ENOMEM;
	atomic_init(&e->refs, 1);
	e->exists = exists;
	e->seq = seq;
	if (exists) {
		memcpy(e->node, p->scratch.blob, len);
	} else {
		struct ndc_rec_node_r *nd = (struct ndc_rec_node_r *)e->node;

		memset(nd, 0, len);
		nd->hash = t->hash;
		nd->nlen = nd->llen = t->nlen;
		memcpy(nd->name, t->name, t->nlen);
	}
	if (*s)
		ndc_rec_oent_put(*s);
	else
		p->n++;
	*s = e;
	return 0;
}

/*
 * Whether t, a name of the changed objects, is theirs to change (not an apex's): below svc.<zone>
 * of any zone or pod.<zone>, or a reverse name.
 */
static bool changes(const struct ndc_rec_bld *b, const struct ndc_rec_node *t)
{
	if (ndc_name_in_zone(t->name, t->nlen, b->svcz, b->svczlen))
		return t->nlen > b->svczlen;
	if (ndc_name_in_zone(t->name, t->nlen, b->podz, b->podzlen))
		return t->nlen > b->podzlen;
	for (size_t i = 0; i < b->n_mcz; i++)
		if (ndc_name_in_zone(t->name, t->nlen, b->mcz[i].svcz, b->mcz[i].svczlen))
			return t->nlen > b->mcz[i].svczlen;
	return t->head && !ndc_rec_bld_zone(b, t->name, t->nlen);
}

static int build(struct ndc_rec_bld *b, const struct ndc_records_opts *opts,
		 const struct ndc_k8s_objects *o)
{
	int err = ndc_rec_bld_init(b, opts);

	if (err)
		return err;
	err = ndc_rec_add_objects(b, o);
	err = err ?: ndc_rec_add_imports(b, o);
	return err ? err : b->err;
}

int ndc_records_patch_add(struct ndc_records_patch *p, uint64_t seq,
			  const struct ndc_k8s_objects *before, const struct ndc_k8s_objects *after,
			  const struct ndc_k8s_objects *context, char *const *pod_ns,
			  size_t n_pod_ns)
{
	struct ndc_rec_bld b[3] = {0};
	int err;

	err = build(&b[0], p->opts, before);
	err = err ?: build(&b[1], p->opts, after);
	err = err ?: build(&b[2], p->opts, context);
	for (size_t i = 0; i < n_pod_ns && !err; i++) {
		ndc_rec_add_pod_namespace(&b[2], pod_ns[i]);
		err = b[2].err;
	}
	for (int k = 0; k < 2 && !err; k++) {
		for (size_t i = 0; i < b[k].tcap && !err; i++) {
			const struct ndc_rec_node *t = b[k].tab[i];

			if (t && changes(&b[k], t))
				err = patch_name(p, &b[2], t, seq);
		}
	}
	for (int k = 0; k < 3; k++)
		ndc_rec_bld_free(&b[k]);
	return err;
}

/* ---------------------------------------------------------------------------------------------
 * Versions.
 */
/* Puts e in v's overlay, replacing the entry of the same name; b is v's own once copied. */
static int ovl_set(struct ndc_records *v, struct ndc_rec_oent *e)
{
	struct ndc_rec_ovl *o = v->ovl;
	const struct ndc_rec_node_r *nd = ndc_rec_oent_node(e);
	size_t i = nd->hash & ((1u << o->bits) - 1);
	struct ndc_rec_obkt *b = o->b[i];
	uint32_t k = 0;
	unsigned old;

	if (!b || atomic_load(&b->refs) > 1 || b->n == b->cap) {
		/* Shared with an older version, or full: this version gets its own copy. */
		uint32_t n = b ? b->n : 0, cap = n < 4 ? 4 : n * 2;
		struct ndc_rec_obkt *c = malloc(sizeof(*c) + cap * sizeof(c->e[0]));

		if (!c)
			return -ENOMEM;
		atomic_init(&c->refs, 1);
		c->n = n;
		c->cap = cap;
		for (uint32_t j = 0; j < n; j++) {
			c->e[j] = b->e[j];
			atomic_fetch_add(&c->e[j]->refs, 1);
		}
		ndc_rec_obkt_put(b);
		o->b[i] = b = c;
	}
	while (k < b->n && !ndc_rec_oent_is(b->e[k], nd->name, nd->nlen, nd->hash))
		k++;
	if (k < b->n) {
		old = b->e[k]->exists ? ndc_rec_node_rrsets(ndc_rec_oent_node(b->e[k])) : 0;
		ndc_rec_oent_put(b->e[k]);
	} else {
		old = ndc_rec_base_rrsets(v, nd->name, nd->nlen, nd->hash);
		b->n++;
		o->n++;
	}
	v->n_rrsets -= old;
	v->n_rrsets += e->exists ? ndc_rec_node_rrsets(nd) : 0;
	atomic_fetch_add(&e->refs, 1);
	b->e[k] = e;
	return 0;
}

/* Where nd's answers start, and their bytes in *ret_len. */
static const uint8_t *node_answers(const struct ndc_rec_node_r *nd, size_t *ret_len)
{
	const uint8_t *p = (const uint8_t *)nd + NDC_REC_ALIGN4(sizeof(*nd) + nd->llen), *e = p;

	for (int i = 0; i < nd->ntypes; i++)
		e += NDC_REC_ALIGN4(ndc_answer_size((const struct ndc_answer *)e));
	*ret_len = (size_t)(e - p);
	return p;
}

/*
 * Whether e changes nothing in v: the same answers as v's node of that name, or the deletion of
 * a name v lacks. A change rebuilds every name of the objects it touches (a ClusterIP change:
 * the service, its ports, its endpoints and their reverse names) and most come out the same;
 * keeping those out of the overlay keeps it, and the memory between full builds, small.
 */
static bool ent_unchanged(const struct ndc_records *v, const struct ndc_rec_oent *e)
{
	const struct ndc_rec_node_r *nd = ndc_rec_oent_node(e), *cur = NULL;
	bool in_ovl = v->ovl && !ndc_rec_ovl_find(v->ovl, nd->name, nd->nlen, nd->hash, &cur);
	size_t la, lb;

	if (!in_ovl) {
		union {
			struct ndc_answer a;
			uint8_t b[sizeof(struct ndc_answer) + NDC_REC_LAZY_MAX];
		} rev;

		cur = ndc_rec_base_find(v, nd->name, nd->nlen, nd->hash);
		if (!cur && !ndc_rec_rev_answer(v, nd->name, nd->nlen, &rev.a, NDC_REC_LAZY_MAX)) {
			/* in the reverse index: the same when nd holds that one PTR answer */
			const uint8_t *b = node_answers(nd, &lb);

			return e->exists && !nd->pad && nd->ntypes == 1 &&
			       lb == NDC_REC_ALIGN4(ndc_answer_size(&rev.a)) &&
			       !memcmp(b, &rev.a, ndc_answer_size(&rev.a));
		}
	}
	if (!e->exists || !cur)
		return !e->exists && !cur;
	if (cur->pad != nd->pad || cur->ntypes != nd->ntypes)
		return false;
	const uint8_t *a = node_answers(cur, &la), *b = node_answers(nd, &lb);

	return la == lb && !memcmp(a, b, la);
}

/* A new version of r with ents (those newer than r's base) put in its overlay. */
static int derive(const struct ndc_records *r, struct ndc_rec_oent *const *ents, size_t n,
		  struct ndc_records **ret)
{
	struct ndc_records *o = r->owner ? r->owner : (struct ndc_records *)r;
	const struct ndc_rec_ovl *old = r->ovl;
	size_t total = ndc_rec_ovl_size(old) + n;
	uint32_t bits = old ? old->bits : OVL_MIN_BITS;
	struct ndc_records *v;
	int err = 0;

	while (total > ((size_t)OVL_LOAD << bits))
		bits++;
	v = malloc(sizeof(*v));
	if (!v)
		return -ENOMEM;
	memcpy(v, r, sizeof(*v));
	v->owner = o;
	atomic_init(&v->refs, 0);
	atomic_fetch_add(&o->refs, 1);
	v->ovl = calloc(1, sizeof(*v->ovl) + ((size_t)1 << bits) * sizeof(v->ovl->b[0]));
	if (!v->ovl) {
		ndc_records_free(v);
		return -ENOMEM;
	}
	v->ovl->bits = bits;
	if (old && bits == old->bits) {
		for (size_t i = 0; i < (size_t)1 << bits; i++) {
			v->ovl->b[i] = old->b[i];
			if (old->b[i])
				atomic_fetch_add(&old->b[i]->refs, 1);
		}
		v->ovl->n = old->n;
	} else if (old) {
		/* The directory doubled: every entry moves to its new bucket. */
		size_t rrsets = v->n_rrsets;

		for (size_t i = 0; i < (size_t)1 << old->bits && !err; i++)
			for (uint32_t k = 0; old->b[i] && k < old->b[i]->n && !err; k++)
				err = ovl_set(v, old->b[i]->e[k]);
		v->n_rrsets = rrsets; /* r's count already holds them */
	}
	for (size_t i = 0; i < n && !err; i++)
		if (ents[i]->seq > v->seq && !ent_unchanged(v, ents[i]))
			err = ovl_set(v, ents[i]);
	if (err) {
		ndc_records_free(v);
		return err;
	}
	*ret = v;
	return 0;
}

int ndc_records_apply(const struct ndc_records *r, const struct ndc_records_patch *p,
		      struct ndc_records **ret)
{
	struct ndc_rec_oent **ents = malloc((p->n + 1) * sizeof(*ents));
	size_t n = 0;
	int err;

	if (!ents)
		return -ENOMEM;
	for (size_t i = 0; i < p->cap; i++)
		if (p->tab[i])
			ents[n++] = p->tab[i];
	err = derive(r, ents, n, ret);
	free(ents);
	return err;
}

int ndc_records_rebase(const struct ndc_records *cur, const struct ndc_records *base,
		       struct ndc_records **ret)
{
	const struct ndc_rec_ovl *o = cur->ovl;
	struct ndc_rec_oent **ents = malloc((ndc_rec_ovl_size(o) + 1) * sizeof(*ents));
	size_t n = 0;
	int err;

	if (!ents)
		return -ENOMEM;
	for (size_t i = 0; o && i < (size_t)1 << o->bits; i++)
		for (uint32_t k = 0; o->b[i] && k < o->b[i]->n; k++)
			if (o->b[i]->e[k]->seq > base->seq)
				ents[n++] = o->b[i]->e[k];
	err = derive(base, ents, n, ret);
	free(ents);
	return err;
}

void ndc_records_set_seq(struct ndc_records *r, uint64_t seq)
{
	r->seq = seq;
}

uint64_t ndc_records_seq(const struct ndc_records *r)
{
	return r->seq;
}

size_t ndc_records_overlay_size(const struct ndc_records *r)
{
	return ndc_rec_ovl_size(r->ovl);
}

size_t ndc_records_base_names(const struct ndc_records *r)
{
	return r->n_names;
}

/* ---------------------------------------------------------------------------------------------
 * PTR targets, for the store to find every service that shares an address.
 */
int ndc_records_ptr_targets(const struct ndc_records *r, const struct ndc_records_patch *p,
			    const uint8_t *rev, size_t len,
			    int (*fn)(void *arg, const uint8_t *target, size_t tlen), void *arg)
{
	uint32_t h = ndc_rec_name_hash(rev, len);
	const struct ndc_rec_node_r *nd = NULL;

	if (p) {
		struct ndc_rec_oent *const *s = pslot(p->tab, p->cap, rev, len, h);

		if (*s) {
			nd = (*s)->exists ? ndc_rec_oent_node(*s) : NULL;
			return nd ? ndc_rec_node_ptr_targets(r, nd, rev, len, fn, arg) : 0;
		}
	}
	if (!r)
		return 0;
	if (r->ovl && !ndc_rec_ovl_find(r->ovl, rev, len, h, &nd))
		return nd ? ndc_rec_node_ptr_targets(r, nd, rev, len, fn, arg) : 0;
	nd = ndc_rec_base_find(r, rev, len, h);
	/* Lazy nodes and the reverse index live in the base only: r has their targets. */
	return nd ? ndc_rec_node_ptr_targets(r, nd, rev, len, fn, arg)
		  : ndc_rec_rev_targets(r, rev, len, fn, arg);
}
