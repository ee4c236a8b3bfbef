// SPDX-License-Identifier: MIT
/*
 * One change of the object store, and what it takes to turn it into a patch of names. A name
 * can be made by more than the changed object: a PTR name by every Service (or endpoint) with
 * that address, a pod name by every pod with that IP in the namespace, <ns>.svc.<zone> by the
 * Namespace and by every Service in it. The patch must see all of them, so the store keeps what
 * finds them: a Service's EndpointSlices by label, counts of what makes a namespace exist, pod
 * IPs per namespace; and for PTR names the current table itself, whose PTR targets name their
 * Services. An ExternalName whose target is a name of the zone answers what the target answers
 * (followed at lookup), so its name is touched by whatever changes the target: the store keeps
 * the ExternalNames by what makes their target.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <json-c/linkhash.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "internal.h"

/* ---------------------------------------------------------------------------------------------
 * Collections of objects.
 */
/* Appends n elements of size sz from src to *dst (count *n_dst, capacity *cap). */
static int append(void **dst, size_t *n_dst, size_t *cap, const void *src, size_t n, size_t sz)
{
	if (!n)
		return 0; /* src may be NULL then, and memcpy must not see it */
	if (*n_dst + n > *cap) {
		size_t c = *cap ? *cap * 2 : 16;
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

int ndc_k8s_coll_add(struct ndc_k8s_coll *c, const struct ndc_k8s_objects *one)
{
	struct ndc_k8s_objects *o = &c->o;
	int err;

	err = append((void **)&o->namespaces, &o->n_namespaces, &c->cap[0], one->namespaces,
		     one->n_namespaces, sizeof(*o->namespaces));
	err = err
		  ?: append((void **)&o->services, &o->n_services, &c->cap[1], one->services,
			    one->n_services, sizeof(*o->services));
	err = err
		  ?: append((void **)&o->slices, &o->n_slices, &c->cap[2], one->slices,
			    one->n_slices, sizeof(*o->slices));
	err = err
		  ?: append((void **)&o->pods, &o->n_pods, &c->cap[3], one->pods, one->n_pods,
			    sizeof(*o->pods));
	return err
		   ?: append((void **)&o->imports, &o->n_imports, &c->cap[4], one->imports,
			     one->n_imports, sizeof(*o->imports));
}

/* Adds obj once, holding a reference. */
static int coll_obj(struct ndc_k8s_coll *c, struct ndc_k8s_obj *obj)
{
	for (size_t i = 0; i < c->n_held; i++)
		if (c->held[i] == obj)
			return 0;
	int err = append((void **)&c->held, &c->n_held, &c->cap_held, &obj, 1, sizeof(obj));

	if (err)
		return err;
	struct ndc_k8s_objects v = ndc_k8s_obj_view(obj);

	atomic_fetch_add(&obj->refs, 1);
	return ndc_k8s_coll_add(c, &v);
}

void ndc_k8s_coll_free(struct ndc_k8s_coll *c)
{
	for (size_t i = 0; i < c->n_held; i++)
		ndc_k8s_obj_put(c->held[i]);
	free(c->held);
	/* Shallow: only the arrays are ours. */
	free(c->o.namespaces);
	free(c->o.services);
	free(c->o.slices);
	free(c->o.pods);
	free(c->o.imports);
	memset(c, 0, sizeof(*c));
}

/* ---------------------------------------------------------------------------------------------
 * Indexes.
 */
/* What makes <ns>.svc.<zone> (and <ns>.pod.<zone>) exist; svc counts ServiceImports too. */
struct nsst {
	uint32_t obj, svc, pod;
};

static void free_key(struct lh_entry *e)
{
	free((void *)lh_entry_k(e));
}

static void nsst_free(struct lh_entry *e)
{
	free((void *)lh_entry_k(e));
	free(lh_entry_v(e));
}

/* The ExternalName Services ("ns/name") whose target one key of aliases names. */
struct aliases {
	size_t n, cap;
	char **v;
};

static void aliases_free(struct lh_entry *e)
{
	struct aliases *al = lh_entry_v(e);

	for (size_t i = 0; al && i < al->n; i++)
		free(al->v[i]);
	if (al)
		free(al->v);
	free(al);
	free((void *)lh_entry_k(e));
}

static void index_drop(struct ndc_k8s_index *x)
{
	ndc_k8s_slicetab_free(x->slices);
	ndc_k8s_slicetab_free(x->mcslices);
	if (x->ns)
		lh_table_free(x->ns);
	if (x->podips)
		lh_table_free(x->podips);
	if (x->aliases)
		lh_table_free(x->aliases);
	x->slices = x->mcslices = NULL;
	x->ns = x->podips = x->aliases = NULL;
}

static int index_new(struct ndc_k8s_index *x)
{
	x->slices = ndc_k8s_slicetab_new(false);
	x->mcslices = ndc_k8s_slicetab_new(true);
	x->ns = lh_kchar_table_new(64, nsst_free);
	x->podips = lh_kchar_table_new(64, free_key);
	x->aliases = lh_kchar_table_new(16, aliases_free);
	if (x->slices && x->mcslices && x->ns && x->podips && x->aliases)
		return 0;
	index_drop(x);
	return -ENOMEM;
}

int ndc_k8s_index_init(struct ndc_k8s_index *x, const struct ndc_records_opts *ropts)
{
	uint8_t zone[NDC_NAME_MAX];
	size_t zl;

	memset(x, 0, sizeof(*x));
	x->ropts = ropts;
	if (!ropts->zone || ndc_name_from_text(ropts->zone, zone, sizeof(zone), &zl) ||
	    zl + 4 > sizeof(x->svcz))
		return -EINVAL;
	ndc_name_lower(zone, zone, zl);
	memcpy(x->svcz, "\3svc", 4);
	memcpy(x->svcz + 4, zone, zl);
	x->svczlen = zl + 4;
	memcpy(x->podz, "\3pod", 4);
	memcpy(x->podz + 4, zone, zl);
	x->podzlen = zl + 4;
	return index_new(x);
}

void ndc_k8s_index_free(struct ndc_k8s_index *x)
{
	index_drop(x);
}

static int podip_key(const char *ns, const struct ndc_ip *ip, char *buf, size_t len)
{
	char a[INET6_ADDRSTRLEN];

	if (!ns || !inet_ntop(ip->family, ip->addr, a, sizeof(a)))
		return -EINVAL;
	return snprintf(buf, len, "%s|%s", ns, a) < (int)len ? 0 : -EINVAL;
}

static struct nsst *nsst_get(struct ndc_k8s_index *x, const char *ns, bool create)
{
	void *v;

	if (lh_table_lookup_ex(x->ns, ns, &v))
		return v;
	if (!create)
		return NULL;
	struct nsst *st = calloc(1, sizeof(*st));
	char *k = strdup(ns);

	if (!st || !k || lh_table_insert(x->ns, k, st)) {
		free(st);
		free(k);
		return NULL;
	}
	return st;
}

static int nsst_add(struct ndc_k8s_index *x, const char *ns, int which, int delta)
{
	struct nsst *st = ns ? nsst_get(x, ns, delta > 0) : NULL;
	uint32_t *f;

	if (!st)
		return ns && delta > 0 ? -ENOMEM : 0;
	f = which == 0 ? &st->obj : which == 1 ? &st->svc : &st->pod;
	*f += (uint32_t)delta;
	if (!st->obj && !st->svc && !st->pod)
		lh_table_delete(x->ns, ns);
	return 0;
}

/* A slice goes in each table whose label it has (a Service's, a ServiceImport's, or both). */
static int slices_add(struct ndc_k8s_index *x, struct ndc_k8s_obj *o, int delta)
{
	int err;

	if (delta > 0) {
		err = ndc_k8s_slicetab_add(x->slices, o);
		if (!err)
			err = ndc_k8s_slicetab_add(x->mcslices, o);
		if (err)
			ndc_k8s_slicetab_del(x->slices, o);
		return err;
	}
	ndc_k8s_slicetab_del(x->slices, o);
	ndc_k8s_slicetab_del(x->mcslices, o);
	return 0;
}

static int podips_add(struct ndc_k8s_index *x, const struct ndc_k8s_pod *p, int delta)
{
	char key[512];
	void *v;

	for (size_t i = 0; i < p->n_ips && i < 2; i++) {
		uintptr_t n = 0;

		if (podip_key(p->ns, &p->ips[i], key, sizeof(key)))
			continue;
		if (lh_table_lookup_ex(x->podips, key, &v))
			n = (uintptr_t)v;
		n += (uintptr_t)(intptr_t)delta;
		if (!n) {
			lh_table_delete(x->podips, key);
		} else if (n == 1 && delta > 0) {
			char *k = strdup(key);

			if (!k || lh_table_insert(x->podips, k, (void *)n)) {
				free(k);
				return -ENOMEM;
			}
		} else {
			struct lh_entry *e = lh_table_lookup_entry(x->podips, key);

			if (e)
				e->v = (void *)n;
		}
	}
	return 0;
}

/*
 * The key of what makes a name of the zone: "s/<ns>/<svc>" at or below <svc>.<ns>.svc.<zone> (the
 * Service and its slices), "n/<ns>" for <ns>.svc.<zone> and below <ns>.pod.<zone> (whatever makes
 * the namespace exist, its pods). Lowercase, as the table's names are. -EINVAL: too long.
 */
static int dep_key(char *buf, size_t len, const char *ns, const char *svc)
{
	int n = svc ? snprintf(buf, len, "s/%s/%s", ns, svc) : snprintf(buf, len, "n/%s", ns);

	if (n < 0 || (size_t)n >= len)
		return -EINVAL;
	for (char *p = buf; *p; p++)
		if (*p >= 'A' && *p <= 'Z')
			*p = (char)(*p + 32);
	return 0;
}

/*
 * The key of what makes an ExternalName's target answer what it does. -ENOENT: nothing in the
 * store does (outside the zone, or the apex's names: svc.<zone>, pod.<zone>, the rest).
 */
static int alias_key(const struct ndc_k8s_index *x, const char *target, char *buf, size_t len)
{
	uint8_t n[NDC_NAME_MAX];
	size_t nl, pos = 0, lab[NDC_NAME_MAX / 2], k = 0, plen;
	char ns[NDC_LABEL_MAX + 1], svc[NDC_LABEL_MAX + 1];
	bool under_svc;

	if (!target || ndc_name_from_text(target, n, sizeof(n), &nl))
		return -ENOENT;
	ndc_name_lower(n, n, nl);
	under_svc = ndc_name_in_zone(n, nl, x->svcz, x->svczlen);
	if (!under_svc && !ndc_name_in_zone(n, nl, x->podz, x->podzlen))
		return -ENOENT;
	plen = nl - (under_svc ? x->svczlen : x->podzlen);
	while (pos < plen && k < NDC_NAME_MAX / 2) {
		lab[k++] = pos;
		pos += 1u + n[pos];
	}
	if (!k)
		return -ENOENT;
	snprintf(ns, sizeof(ns), "%.*s", n[lab[k - 1]], (const char *)n + lab[k - 1] + 1);
	if (under_svc && k >= 2)
		snprintf(svc, sizeof(svc), "%.*s", n[lab[k - 2]], (const char *)n + lab[k - 2] + 1);
	return dep_key(buf, len, ns, under_svc && k >= 2 ? svc : NULL) ? -ENOENT : 0;
}

/* Adds (delta 1) or removes (-1) ExternalName s under the key of its target, if any. */
static int aliases_add(struct ndc_k8s_index *x, const struct ndc_k8s_service *s, int delta)
{
	char key[600], id[520];
	struct aliases *al = NULL;
	void *v;

	if (s->type != NDC_SVC_EXTERNAL_NAME || !s->ns || !s->name ||
	    alias_key(x, s->external_name, key, sizeof(key)) ||
	    snprintf(id, sizeof(id), "%s/%s", s->ns, s->name) >= (int)sizeof(id))
		return 0;
	if (lh_table_lookup_ex(x->aliases, key, &v))
		al = v;
	if (delta < 0) {
		for (size_t i = 0; al && i < al->n; i++) {
			if (strcmp(al->v[i], id))
				continue;
			free(al->v[i]);
			al->v[i] = al->v[--al->n];
			if (!al->n)
				lh_table_delete(x->aliases, key);
			break;
		}
		return 0;
	}
	if (!al) {
		char *k = strdup(key);

		al = calloc(1, sizeof(*al));
		if (!k || !al || lh_table_insert(x->aliases, k, al)) {
			free(k);
			free(al);
			return -ENOMEM;
		}
	}
	char *dup = strdup(id);
	int err = dup ? append((void **)&al->v, &al->n, &al->cap, &dup, 1, sizeof(dup)) : -ENOMEM;

	if (err)
		free(dup);
	return err;
}

/* Adds (delta 1) or removes (-1) o of kind in the indexes. */
static int index_obj(struct ndc_k8s_index *x, enum ndc_k8s_kind kind, struct ndc_k8s_obj *o,
		     int delta)
{
	const struct ndc_k8s_objects v = ndc_k8s_obj_view(o), *one = &v;
	int err;

	if (!x->slices || !x->mcslices || !x->ns || !x->podips || !x->aliases)
		return -ENOMEM; /* a rebuild ran out of memory: nothing to keep in step */

	switch (kind) {
	case NDC_K8S_NAMESPACES:
		return one->n_namespaces ? nsst_add(x, one->namespaces[0], 0, delta) : 0;
	case NDC_K8S_SERVICES:
		if (!one->n_services)
			return 0;
		err = nsst_add(x, one->services[0].ns, 1, delta);
		return err ?: aliases_add(x, &one->services[0], delta);
	case NDC_K8S_SERVICEIMPORTS: /* makes its namespace exist, as a Service does */
		return one->n_imports ? nsst_add(x, one->imports[0].ns, 1, delta) : 0;
	case NDC_K8S_ENDPOINTSLICES:
		return one->n_slices ? slices_add(x, o, delta) : 0;
	case NDC_K8S_PODS:
		if (!one->n_pods || !one->pods[0].n_ips)
			return 0;
		err = nsst_add(x, one->pods[0].ns, 2, delta);
		return err ?: podips_add(x, &one->pods[0], delta);
	default:
		return 0;
	}
}

int ndc_k8s_index_rebuild(struct ndc_k8s_index *x, struct ndc_k8s_objtab *const *tab)
{
	int err;

	index_drop(x);
	err = index_new(x);
	for (int k = 0; k < NDC_K8S_KINDS && !err; k++) {
		struct ndc_k8s_obj *o;
		size_t pos = 0;

		while (!err && (o = ndc_k8s_objtab_next(tab[k], &pos)))
			err = index_obj(x, (enum ndc_k8s_kind)k, o, 1);
	}
	return err;
}

/* ---------------------------------------------------------------------------------------------
 * Changes.
 */
struct unit {
	char ns[256];
	char svc[256];
};

struct names {
	char **v;
	size_t n, cap;
};

struct ctx_walk {
	const struct ndc_k8s_change *c;
	struct ndc_k8s_coll *ctx;
	int err;
};

static struct ndc_k8s_obj *lookup(const struct ndc_k8s_objtab *t, const char *key)
{
	return ndc_k8s_objtab_get(t, key);
}

/*
 * The Service ns/svc and every EndpointSlice labelled for it; and the ServiceImport ns/svc with
 * the slices labelled for it, whose names share the same <svc>.<ns> in the multicluster zones
 * (the cluster domain's, when it is one): taking both is never wrong, only a little more work.
 */
static int unit_add(const struct ndc_k8s_change *c, struct ndc_k8s_coll *into, const char *ns,
		    const char *svc)
{
	char key[520];
	struct ndc_k8s_obj *o;
	size_t pos = 0;
	int err = 0;

	snprintf(key, sizeof(key), "%s/%s", ns, svc);
	o = lookup(c->tab[NDC_K8S_SERVICES], key);
	if (o)
		err = coll_obj(into, o);
	while (!err && (o = ndc_k8s_slicetab_next(c->idx->slices, ns, svc, &pos)))
		err = coll_obj(into, o);
	o = err ? NULL : lookup(c->tab[NDC_K8S_SERVICEIMPORTS], key);
	if (o)
		err = coll_obj(into, o);
	pos = 0;
	while (!err && (o = ndc_k8s_slicetab_next(c->idx->mcslices, ns, svc, &pos)))
		err = coll_obj(into, o);
	return err;
}

/* A PTR target names its Service: [<host>.]<svc>.<ns>.svc.<zone>. */
static int ptr_target(void *arg, const uint8_t *t, size_t tl)
{
	struct ctx_walk *w = arg;
	const struct ndc_k8s_index *x = w->c->idx;
	size_t pos = 0, lab[NDC_NAME_MAX / 2], n = 0, plen;
	struct unit u;

	if (!ndc_name_in_zone(t, tl, x->svcz, x->svczlen) || tl <= x->svczlen)
		return 0;
	plen = tl - x->svczlen;
	while (pos < plen && n < NDC_NAME_MAX / 2) {
		lab[n++] = pos;
		pos += 1u + t[pos];
	}
	if (n < 2)
		return 0;
	snprintf(u.svc, sizeof(u.svc), "%.*s", t[lab[n - 2]], (const char *)t + lab[n - 2] + 1);
	snprintf(u.ns, sizeof(u.ns), "%.*s", t[lab[n - 1]], (const char *)t + lab[n - 1] + 1);
	w->err = unit_add(w->c, w->ctx, u.ns, u.svc);
	return w->err;
}

static int ip_contributors(struct ctx_walk *w, const struct ndc_ip *ip)
{
	uint8_t rev[NDC_NAME_MAX];
	size_t rl;

	if (ip->family != AF_INET && ip->family != AF_INET6)
		return 0;
	rl = ndc_records_reverse_name(ip, rev);
	ndc_records_ptr_targets(w->c->cur, w->c->patch, rev, rl, ptr_target, w);
	return w->err;
}

/* Every Service that makes a PTR name of an address in o. */
static int ptr_contributors(struct ctx_walk *w, const struct ndc_k8s_objects *o)
{
	int err = 0;

	for (size_t i = 0; i < o->n_services && !err; i++)
		for (size_t k = 0; k < o->services[i].n_ips && !err; k++)
			err = ip_contributors(w, &o->services[i].ips[k]);
	for (size_t i = 0; i < o->n_slices && !err; i++) {
		const struct ndc_k8s_slice *sl = &o->slices[i];

		for (size_t e = 0; e < sl->n_endpoints && !err; e++)
			for (size_t a = 0; a < sl->endpoints[e].n_addrs && !err; a++)
				err = ip_contributors(w, &sl->endpoints[e].addrs[a]);
	}
	return err;
}

/* A pod with each of p's IPs that some pod in p's namespace still has: they make the names. */
static int pod_contributors(const struct ndc_k8s_change *c, struct ndc_k8s_coll *ctx,
			    const struct ndc_k8s_pod *p)
{
	char key[512];
	void *v;
	int err = 0;

	for (size_t i = 0; i < p->n_ips && i < 2 && !err; i++) {
		struct ndc_k8s_pod one = {.ns = p->ns, .name = p->name, .n_ips = 1};

		if (podip_key(p->ns, &p->ips[i], key, sizeof(key)) ||
		    !lh_table_lookup_ex(c->idx->podips, key, &v))
			continue;
		one.ips[0] = p->ips[i];
		err = append((void **)&ctx->o.pods, &ctx->o.n_pods, &ctx->cap[3], &one, 1,
			     sizeof(one));
	}
	return err;
}

/*
 * Namespace ns as it exists apart from the change: a Namespace object, a Service or a ServiceImport
 * in it makes <ns>.svc.<zone> and <ns>.pod.<zone>; pods alone make only the second.
 */
static int ctx_ns(const struct ndc_k8s_change *c, struct ndc_k8s_coll *ctx, struct names *pod_ns,
		  const char *ns)
{
	struct lh_entry *e = ns ? lh_table_lookup_entry(c->idx->ns, ns) : NULL;
	const struct nsst *st = e ? (const struct nsst *)lh_entry_v(e) : NULL;
	char *name = e ? (char *)lh_entry_k(e) : NULL;
	bool pods_only = st && !st->obj && !st->svc;
	char ***v = pods_only ? &pod_ns->v : &ctx->o.namespaces;
	size_t *n = pods_only ? &pod_ns->n : &ctx->o.n_namespaces;

	if (!name)
		return 0;
	for (size_t i = 0; i < *n; i++)
		if (!strcmp((*v)[i], name))
			return 0;
	return append((void **)v, n, pods_only ? &pod_ns->cap : &ctx->cap[0], &name, 1,
		      sizeof(name));
}

/* Adds ns/svc to the units u[0..n) unless it is there; returns the new count. */
static int unit_once(struct unit *u, int n, const char *ns, const char *svc)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(u[i].ns, ns) && !strcmp(u[i].svc, svc))
			return n;
	snprintf(u[n].ns, sizeof(u[n].ns), "%s", ns);
	snprintf(u[n].svc, sizeof(u[n].svc), "%s", svc);
	return n + 1;
}

/*
 * The Services and ServiceImports (ns/name) a change of kind reads its names from: its own, or
 * its slice's (a slice may be labelled for one of each). u has room for 4.
 */
static int units_of(enum ndc_k8s_kind kind, const char *key, const struct ndc_k8s_obj *o,
		    struct unit *u, int n)
{
	if ((kind == NDC_K8S_SERVICES || kind == NDC_K8S_SERVICEIMPORTS) && n == 0) {
		const char *slash = strchr(key, '/');

		if (!slash)
			return n;
		snprintf(u[n].ns, sizeof(u[n].ns), "%.*s", (int)(slash - key), key);
		snprintf(u[n].svc, sizeof(u[n].svc), "%s", slash + 1);
		return n + 1;
	}
	if (kind == NDC_K8S_ENDPOINTSLICES && o && o->kind == NDC_K8S_ENDPOINTSLICES) {
		const struct ndc_k8s_slice *sl = ndc_k8s_obj_slice(o);

		if (sl->ns && sl->service)
			n = unit_once(u, n, sl->ns, sl->service);
		if (sl->ns && sl->mc_service)
			n = unit_once(u, n, sl->ns, sl->mc_service);
		return n;
	}
	return n;
}

static const char *ns_of(enum ndc_k8s_kind kind, const struct ndc_k8s_obj *o)
{
	if (!o)
		return NULL;
	if (kind == NDC_K8S_NAMESPACES && o->kind == NDC_K8S_NAMESPACES)
		return ((char *const *)o->elem)[0];
	if (kind == NDC_K8S_PODS && o->kind == NDC_K8S_PODS)
		return ndc_k8s_obj_pod(o)->ns;
	return NULL;
}

/* An owned list of strings; add copies s unless it is there already. */
struct strs {
	char **v;
	size_t n, cap;
};

static int strs_add(struct strs *l, const char *s, bool *ret_added)
{
	char *dup;
	int err;

	*ret_added = false;
	for (size_t i = 0; i < l->n; i++)
		if (!strcmp(l->v[i], s))
			return 0;
	dup = strdup(s);
	err = dup ? append((void **)&l->v, &l->n, &l->cap, &dup, 1, sizeof(dup)) : -ENOMEM;
	if (err)
		free(dup);
	*ret_added = !err;
	return err;
}

static void strs_free(struct strs *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
}

/*
 * Every ExternalName whose alias leads, in any number of steps, to a name the change touches
 * (keys: what makes those names, see dep_key): its Service goes into before, after and context
 * as it is, so that its name is in the patch and the fast path takes its answers again. seen
 * holds the Services ("ns/name") already there.
 */
static int alias_dependents(const struct ndc_k8s_change *c, struct strs *keys, struct strs *seen,
			    struct ndc_k8s_coll *before, struct ndc_k8s_coll *after,
			    struct ndc_k8s_coll *ctx)
{
	int err = 0;

	for (size_t i = 0; i < keys->n && !err; i++) { /* keys grows as dependents are found */
		const struct aliases *al;
		void *v;

		if (!lh_table_lookup_ex(c->idx->aliases, keys->v[i], &v))
			continue;
		al = v;
		for (size_t k = 0; k < al->n && !err; k++) {
			const char *slash = strchr(al->v[k], '/');
			char key[600];
			struct unit u;
			bool added;

			err = strs_add(seen, al->v[k], &added);
			if (err || !added || !slash)
				continue;
			snprintf(u.ns, sizeof(u.ns), "%.*s", (int)(slash - al->v[k]), al->v[k]);
			snprintf(u.svc, sizeof(u.svc), "%s", slash + 1);
			err = unit_add(c, before, u.ns, u.svc);
			err = err ?: unit_add(c, after, u.ns, u.svc);
			err = err ?: unit_add(c, ctx, u.ns, u.svc);
			if (!err && !dep_key(key, sizeof(key), u.ns, u.svc))
				err = strs_add(keys, key, &added);
		}
	}
	return err;
}

/* Starts the walk above from what the change touches: its Services, its namespaces. */
static int alias_walk(const struct ndc_k8s_change *c, const struct unit *u, int n,
		      const char *const *nss, int n_nss, struct ndc_k8s_coll *before,
		      struct ndc_k8s_coll *after, struct ndc_k8s_coll *ctx)
{
	struct strs keys = {0}, seen = {0};
	char key[600], id[sizeof(u->ns) + sizeof(u->svc) + 1];
	bool added;
	int err = 0;

	if (!lh_table_length(c->idx->aliases))
		return 0;
	for (int i = 0; i < n && !err; i++) {
		if (snprintf(id, sizeof(id), "%s/%s", u[i].ns, u[i].svc) >= (int)sizeof(id))
			continue; /* no Service has such a key */
		err = strs_add(&seen, id, &added);
		if (!err && !dep_key(key, sizeof(key), u[i].ns, u[i].svc))
			err = strs_add(&keys, key, &added);
		if (!err && !dep_key(key, sizeof(key), u[i].ns, NULL))
			err = strs_add(&keys, key, &added);
	}
	for (int i = 0; i < n_nss && !err; i++)
		if (nss[i] && !dep_key(key, sizeof(key), nss[i], NULL))
			err = strs_add(&keys, key, &added);
	err = err ?: alias_dependents(c, &keys, &seen, before, after, ctx);
	strs_free(&keys);
	strs_free(&seen);
	return err;
}

int ndc_k8s_change_apply(const struct ndc_k8s_change *c)
{
	struct ndc_k8s_objtab *t = c->tab[c->kind];
	struct ndc_k8s_obj *old = lookup(t, c->key);
	struct ndc_k8s_coll before = {0}, after = {0}, ctx = {0};
	struct ctx_walk w = {.c = c, .ctx = &ctx};
	struct names pod_ns = {0};
	bool own = c->kind == NDC_K8S_NAMESPACES || c->kind == NDC_K8S_PODS;
	struct unit u[4];
	int n = 0, err = 0, ierr;

	if (old) /* read below after the table lets it go */
		atomic_fetch_add(&old->refs, 1);
	n = units_of(c->kind, c->key, old, u, n);
	n = units_of(c->kind, c->key, c->obj, u, n);
	for (int i = 0; i < n && !err; i++)
		err = unit_add(c, &before, u[i].ns, u[i].svc);
	if (old)
		err = err ?: coll_obj(&before, old);

	/* The store changes whatever happens to the patch. */
	ierr = old ? index_obj(c->idx, c->kind, old, -1) : 0;
	if (old)
		ndc_k8s_objtab_del(t, c->key);
	if (c->obj) {
		int perr = ndc_k8s_objtab_put(t, c->obj);

		if (perr) { /* out of memory: the object is lost to the store, the caller learns it
			     */
			ndc_k8s_obj_put(c->obj);
			err = perr;
			goto out;
		}
		ierr = ierr ?: index_obj(c->idx, c->kind, c->obj, 1);
	}
	err = err ?: ierr;
	if (!c->patch || err)
		goto out;

	for (int i = 0; i < n && !err; i++) {
		err = unit_add(c, &after, u[i].ns, u[i].svc);
		err = err ?: unit_add(c, &ctx, u[i].ns, u[i].svc);
		err = err ?: ctx_ns(c, &ctx, &pod_ns, u[i].ns);
	}
	if (own && c->obj) {
		err = err ?: coll_obj(&after, c->obj);
		err = err ?: coll_obj(&ctx, c->obj);
	}
	if (own) {
		err = err ?: ctx_ns(c, &ctx, &pod_ns, ns_of(c->kind, old));
		err = err ?: ctx_ns(c, &ctx, &pod_ns, ns_of(c->kind, c->obj));
	}
	if (c->kind == NDC_K8S_PODS) {
		if (old && old->kind == NDC_K8S_PODS)
			err = err ?: pod_contributors(c, &ctx, ndc_k8s_obj_pod(old));
		if (c->obj && c->obj->kind == NDC_K8S_PODS)
			err = err ?: pod_contributors(c, &ctx, ndc_k8s_obj_pod(c->obj));
	} else if (!own) {
		err = err ?: ptr_contributors(&w, &before.o);
		err = err ?: ptr_contributors(&w, &after.o);
	}
	if (!err) {
		const char *nss[2] = {ns_of(c->kind, old), ns_of(c->kind, c->obj)};

		err = alias_walk(c, u, n, nss, 2, &before, &after, &ctx);
	}
	if (!err)
		err = ndc_records_patch_add(c->patch, c->seq, &before.o, &after.o, &ctx.o, pod_ns.v,
					    pod_ns.n);
out:
	ndc_k8s_obj_put(old);
	free(pod_ns.v);
	ndc_k8s_coll_free(&before);
	ndc_k8s_coll_free(&after);
	ndc_k8s_coll_free(&ctx);
	return err;
}
