// SPDX-License-Identifier: MIT
/*
 * API objects (json-c trees) reduced to the structs of objects/objects.h. Every field DNS reads is
 * type-checked; all others are ignored, so fields added by newer API versions never break a
 * snapshot. An object is converted into a local struct and appended only once complete: a failure
 * leaves the store as it was.
 *
 * This file packs a converted object into one block, places it in struct ndc_k8s_objects (or
 * behind the caller's header) and frees it; reading the JSON is in k8s_objects_conv.c, split off
 * to keep each file to one concern and well under a thousand lines.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "internal.h"

static void free_service(void *e)
{
	struct ndc_k8s_service *s = e;

	if (s->mem) {
		free(s->mem);
		return;
	}
	free(s->ns);
	free(s->name);
	free(s->external_name);
	ndc_k8s_conv_free_ports(s->ports, s->n_ports);
}

/*
 * Packing: a converted object is built from separate allocations (simple to unwind on a bad
 * field), then copied into one block. At 100,000 Services and as many EndpointSlices the
 * separate small allocations and their malloc headers were most of the objects' memory.
 * Arrays of structs with pointers come first (the block is malloc-aligned and their sizes are
 * multiples of 8), then the byte-aligned addresses, then the strings.
 */
struct pack {
	char *base;
	size_t off;
};

static size_t str_size(const char *s)
{
	return s ? strlen(s) + 1 : 0;
}

static void *pack_mem(struct pack *p, const void *src, size_t n)
{
	void *dst = p->base + p->off;

	if (!n)
		return NULL;
	memcpy(dst, src, n);
	p->off += n;
	return dst;
}

static char *pack_str(struct pack *p, const char *s)
{
	return pack_mem(p, s, str_size(s));
}

static size_t ports_size(const struct ndc_k8s_port *ports, uint32_t n)
{
	size_t size = n * sizeof(*ports);

	for (uint32_t i = 0; i < n; i++)
		size += str_size(ports[i].name);
	return size;
}

/* The array first, then (after whatever else the caller packs) the names: see pack_port_names. */
static struct ndc_k8s_port *pack_ports(struct pack *p, const struct ndc_k8s_port *ports, uint32_t n)
{
	return pack_mem(p, ports, n * sizeof(*ports));
}

static void pack_port_names(struct pack *p, struct ndc_k8s_port *ports, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		ports[i].name = pack_str(p, ports[i].name);
}

static int compact_service(const struct conv *c, void *e, size_t head)
{
	struct ndc_k8s_service *s = e;
	struct ndc_k8s_service t = *s;
	struct pack p = {.off = head};
	size_t size;

	size = head + ports_size(s->ports, s->n_ports) + str_size(s->ns) + str_size(s->name) +
	       str_size(s->external_name);
	p.base = malloc(size);
	if (!p.base)
		return ndc_k8s_conv_oom(c);
	t.mem = p.base;
	t.ports = pack_ports(&p, s->ports, s->n_ports);
	pack_port_names(&p, t.ports, t.n_ports);
	t.ns = pack_str(&p, s->ns);
	t.name = pack_str(&p, s->name);
	t.external_name = pack_str(&p, s->external_name);
	free_service(s);
	*s = t;
	return 0;
}

static void free_endpoint(struct ndc_k8s_endpoint *e)
{
	free(e->addrs);
	free(e->hostname);
	free(e->pod_name);
}

static void free_slice(void *e)
{
	struct ndc_k8s_slice *s = e;

	if (s->mem) {
		free(s->mem);
		return;
	}
	free(s->ns);
	free(s->name);
	free(s->service);
	free(s->mc_service);
	free(s->cluster);
	ndc_k8s_conv_free_ports(s->ports, s->n_ports);
	for (size_t i = 0; i < s->n_endpoints; i++)
		free_endpoint(&s->endpoints[i]);
	free(s->endpoints);
}

static int compact_slice(const struct conv *c, void *e, size_t head)
{
	struct ndc_k8s_slice *s = e;
	struct ndc_k8s_slice t = *s;
	struct pack p = {.off = head};
	size_t size;

	size = head + s->n_endpoints * sizeof(*s->endpoints) + ports_size(s->ports, s->n_ports) +
	       str_size(s->ns) + str_size(s->name) + str_size(s->service) +
	       str_size(s->mc_service) + str_size(s->cluster);
	for (size_t i = 0; i < s->n_endpoints; i++)
		size += s->endpoints[i].n_addrs * sizeof(struct ndc_ip) +
			str_size(s->endpoints[i].hostname) + str_size(s->endpoints[i].pod_name);
	p.base = malloc(size);
	if (!p.base)
		return ndc_k8s_conv_oom(c);
	t.mem = p.base;
	t.endpoints = pack_mem(&p, s->endpoints, s->n_endpoints * sizeof(*s->endpoints));
	t.ports = pack_ports(&p, s->ports, s->n_ports);
	for (size_t i = 0; i < t.n_endpoints; i++) {
		struct ndc_k8s_endpoint *e = &t.endpoints[i];

		e->addrs = pack_mem(&p, e->addrs, e->n_addrs * sizeof(*e->addrs));
	}
	for (size_t i = 0; i < t.n_endpoints; i++) {
		struct ndc_k8s_endpoint *e = &t.endpoints[i];

		e->hostname = pack_str(&p, e->hostname);
		e->pod_name = pack_str(&p, e->pod_name);
	}
	pack_port_names(&p, t.ports, t.n_ports);
	t.ns = pack_str(&p, s->ns);
	t.name = pack_str(&p, s->name);
	t.service = pack_str(&p, s->service);
	t.mc_service = pack_str(&p, s->mc_service);
	t.cluster = pack_str(&p, s->cluster);
	free_slice(s);
	*s = t;
	return 0;
}

static void free_pod(void *e)
{
	struct ndc_k8s_pod *p = e;

	if (p->mem) {
		free(p->mem);
		return;
	}
	free(p->ns);
	free(p->name);
}

static int compact_pod(const struct conv *c, void *e, size_t head)
{
	struct ndc_k8s_pod *p = e;
	struct ndc_k8s_pod t = *p;
	struct pack k = {.off = head};

	k.base = malloc(head + str_size(p->ns) + str_size(p->name));
	if (!k.base)
		return ndc_k8s_conv_oom(c);
	t.mem = k.base;
	t.ns = pack_str(&k, p->ns);
	t.name = pack_str(&k, p->name);
	free_pod(p);
	*p = t;
	return 0;
}

/*
 * The first Service, EndpointSlice or Pod added to an empty struct ndc_k8s_objects shares its
 * element's block: [the element][what it points to], so a struct of one object is one
 * allocation (the object store itself now uses ndc_k8s_object_convert, which adds its header to
 * the same block). The array is then element 0's mem; growing it copies it out and leaves the
 * block to element 0.
 */
#define EMBED_HEAD(size) (((size) + 7) & ~(size_t)7)

#define EMBEDDED(arr, n) ((n) > 0 && (const void *)(arr) == (arr)[0].mem)

/* Returns arr with room for one more element (reallocated if needed), or NULL. */
static void *reserve(void *arr, size_t n, size_t *cap, size_t size, bool embed)
{
	size_t ncap;
	void *p;

	/* A capacity below the count means the arrays were filled by hand: reallocate. */
	if (n < *cap)
		return arr;
	ncap = n ? 2 * n : 8;
	if (!embed) {
		p = reallocarray(arr, ncap, size);
	} else {
		p = calloc(ncap, size);
		if (p)
			memcpy(p, arr, n * size);
	}
	if (p)
		*cap = ncap;
	return p;
}

static int add_namespace(struct ndc_k8s_objects *o, struct conv *c, json_object *obj)
{
	const char *name;
	char *copy, **arr;
	int r;

	r = ndc_k8s_conv_get_meta(c, obj, false, NULL, &name);
	if (r < 0)
		return r;
	r = ndc_k8s_conv_dup_str(c, name, &copy);
	if (r < 0)
		return r;
	arr = reserve(o->namespaces, o->n_namespaces, &o->cap_namespaces, sizeof(*arr), false);
	if (!arr) {
		free(copy);
		return ndc_k8s_conv_oom(c);
	}
	o->namespaces = arr;
	o->namespaces[o->n_namespaces++] = copy;
	return 0;
}

/*
 * Appends the converted element e (sz bytes, its block pointer mem_off into it) to the array
 * *arr (count *n, capacity *cap), compacting it into one block first; the first element of an
 * empty array carries the array in that block too. On failure e is still the caller's to free.
 */
static int place(struct conv *c, void **arr, size_t *n, size_t *cap, void *e, size_t sz,
		 size_t mem_off, int (*compact)(const struct conv *, void *, size_t))
{
	void *p;
	int r;

	if (!*arr && !*n) {
		r = compact(c, e, EMBED_HEAD(sz));
		if (r < 0)
			return r;
		*arr = memcpy(*(void **)((char *)e + mem_off), e, sz);
		*n = *cap = 1;
		return 0;
	}
	r = compact(c, e, 0);
	if (r < 0)
		return r;
	p = reserve(*arr, *n, cap, sz, *n && *(void **)((char *)*arr + mem_off) == *arr);
	if (!p)
		return ndc_k8s_conv_oom(c);
	*arr = p;
	memcpy((char *)p + *n * sz, e, sz);
	(*n)++;
	return 0;
}

/*
 * How each kind of element is converted, packed and freed, and where struct ndc_k8s_objects
 * keeps its array: ndc_k8s_object_add and ndc_k8s_object_convert share one path per use.
 */
struct elem_ops {
	size_t size;
	size_t mem_off;
	int (*conv)(struct conv *c, json_object *obj, void *e);
	int (*compact)(const struct conv *c, void *e, size_t head);
	void (*free)(void *e);
	size_t arr_off, n_off, cap_off;
};

#define ELEM_OPS(t, arr)                                                                          \
	{                                                                                         \
		.size = sizeof(struct ndc_k8s_##t), .mem_off = offsetof(struct ndc_k8s_##t, mem), \
		.conv = ndc_k8s_conv_##t, .compact = compact_##t, .free = free_##t,               \
		.arr_off = offsetof(struct ndc_k8s_objects, arr),                                 \
		.n_off = offsetof(struct ndc_k8s_objects, n_##arr),                               \
		.cap_off = offsetof(struct ndc_k8s_objects, cap_##arr),                           \
	}

static const struct elem_ops elem_ops[] = {
    [NDC_K8S_OBJ_SERVICE] = ELEM_OPS(service, services),
    [NDC_K8S_OBJ_SLICE] = ELEM_OPS(slice, slices),
    [NDC_K8S_OBJ_POD] = ELEM_OPS(pod, pods),
    /* A ServiceImport is kept as a Service: packed and freed alike, in its own array. */
    [NDC_K8S_OBJ_SVCIMPORT] =
	{
	    .size = sizeof(struct ndc_k8s_service),
	    .mem_off = offsetof(struct ndc_k8s_service, mem),
	    .conv = ndc_k8s_conv_svcimport,
	    .compact = compact_service,
	    .free = free_service,
	    .arr_off = offsetof(struct ndc_k8s_objects, imports),
	    .n_off = offsetof(struct ndc_k8s_objects, n_imports),
	    .cap_off = offsetof(struct ndc_k8s_objects, cap_imports),
	},
};

/* Room for any one element while it is converted. */
union elem {
	struct ndc_k8s_service service;
	struct ndc_k8s_slice slice;
	struct ndc_k8s_pod pod;
};

static int add_elem(struct ndc_k8s_objects *o, struct conv *c, json_object *obj,
		    enum ndc_k8s_obj_type type)
{
	const struct elem_ops *k = &elem_ops[type];
	char *base = (char *)o;
	union elem e;
	int r;

	memset(&e, 0, sizeof(e));
	r = k->conv(c, obj, &e);
	if (r >= 0)
		r = place(c, (void **)(base + k->arr_off), (size_t *)(base + k->n_off),
			  (size_t *)(base + k->cap_off), &e, k->size, k->mem_off, k->compact);
	if (r < 0)
		k->free(&e);
	return r;
}

int ndc_k8s_object_add_at(struct ndc_k8s_objects *o, struct json_object *obj, const char *where,
			  char *err, size_t errlen)
{
	struct conv c = {.err = err, .errlen = errlen, .where = where};
	enum ndc_k8s_obj_type type;
	int r;

	r = ndc_k8s_conv_type(&c, obj, &type);
	if (r < 0)
		return r;
	if (type == NDC_K8S_OBJ_NAMESPACE)
		return add_namespace(o, &c, obj);
	return type == NDC_K8S_OBJ_NONE ? 0 : add_elem(o, &c, obj, type);
}

int ndc_k8s_object_add(struct ndc_k8s_objects *o, struct json_object *obj, char *err, size_t errlen)
{
	return ndc_k8s_object_add_at(o, obj, NULL, err, errlen);
}

static int convert_namespace(struct conv *c, json_object *obj, size_t head, void **ret_block)
{
	const char *name;
	size_t len;
	char *block;
	int r;

	r = ndc_k8s_conv_get_meta(c, obj, false, NULL, &name);
	if (r < 0)
		return r;
	len = strlen(name) + 1;
	block = malloc(head + sizeof(char *) + len);
	if (!block)
		return ndc_k8s_conv_oom(c);
	memset(block, 0, head);
	memcpy(block + head + sizeof(char *), name, len);
	*(char **)(block + head) = block + head + sizeof(char *);
	*ret_block = block;
	return 0;
}

/*
 * The element compacted behind head bytes and copied in front of what it points to:
 * [head][element][its data], one block. Element sizes are multiples of 8 (below), so what follows
 * stays aligned.
 */
static int convert_elem(struct conv *c, json_object *obj, enum ndc_k8s_obj_type type, size_t head,
			void **ret_block)
{
	const struct elem_ops *k = &elem_ops[type];
	union elem e;
	char *block;
	int r;

	memset(&e, 0, sizeof(e));
	r = k->conv(c, obj, &e);
	if (r >= 0)
		r = k->compact(c, &e, head + k->size);
	if (r < 0) {
		k->free(&e);
		return r;
	}
	block = *(void **)((char *)&e + k->mem_off);
	memset(block, 0, head);
	memcpy(block + head, &e, k->size);
	*ret_block = block;
	return 0;
}

_Static_assert(sizeof(struct ndc_k8s_service) % 8 == 0, "packing keeps 8-byte alignment");
_Static_assert(sizeof(struct ndc_k8s_slice) % 8 == 0, "packing keeps 8-byte alignment");
_Static_assert(sizeof(struct ndc_k8s_pod) % 8 == 0, "packing keeps 8-byte alignment");

int ndc_k8s_object_convert(struct json_object *obj, size_t head, enum ndc_k8s_obj_type *ret_type,
			   void **ret_block, char *err, size_t errlen)
{
	struct conv c = {.err = err, .errlen = errlen};
	enum ndc_k8s_obj_type type;
	int r;

	*ret_type = NDC_K8S_OBJ_NONE;
	*ret_block = NULL;
	if (head % 8)
		return -EINVAL;
	r = ndc_k8s_conv_type(&c, obj, &type);
	if (r < 0)
		return r;
	if (type == NDC_K8S_OBJ_NAMESPACE)
		r = convert_namespace(&c, obj, head, ret_block);
	else if (type != NDC_K8S_OBJ_NONE)
		r = convert_elem(&c, obj, type, head, ret_block);
	if (r >= 0)
		*ret_type = type;
	return r;
}

void ndc_k8s_objects_free(struct ndc_k8s_objects *o)
{
	bool emb;

	if (!o)
		return;
	for (size_t i = 0; i < o->n_namespaces; i++)
		free(o->namespaces[i]);
	free(o->namespaces);
	/* An embedded array goes with its element 0 (see EMBED_HEAD). */
	emb = EMBEDDED(o->services, o->n_services);
	for (size_t i = 0; i < o->n_services; i++)
		free_service(&o->services[i]);
	if (!emb)
		free(o->services);
	emb = EMBEDDED(o->slices, o->n_slices);
	for (size_t i = 0; i < o->n_slices; i++)
		free_slice(&o->slices[i]);
	if (!emb)
		free(o->slices);
	emb = EMBEDDED(o->pods, o->n_pods);
	for (size_t i = 0; i < o->n_pods; i++)
		free_pod(&o->pods[i]);
	if (!emb)
		free(o->pods);
	emb = EMBEDDED(o->imports, o->n_imports);
	for (size_t i = 0; i < o->n_imports; i++)
		free_service(&o->imports[i]);
	if (!emb)
		free(o->imports);
	memset(o, 0, sizeof(*o));
}
