/* SPDX-License-Identifier: MIT */
/*
 * Private to k8s_objects.c (packing, placing, the public API) and k8s_objects_conv.c (JSON
 * checks and the per-kind conversions); included by nothing else. What the two share: the
 * error context every check reports through, and the conversion steps the API calls. Every
 * function here returns 0 or a negative errno and, on error, has written the message to c->err.
 */
#ifndef NDC_K8S_OBJECTS_INTERNAL_H
#define NDC_K8S_OBJECTS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "objects/objects.h"

struct json_object;

/* What an error message names: "items[3] (Service shop/cart): " */
struct conv {
	char *err;
	size_t errlen;
	const char *where;
	const char *kind;
	const char *ns;
	const char *name;
};

/* Reports "out of memory" and returns -ENOMEM. */
int ndc_k8s_conv_oom(const struct conv *c);

/*
 * metadata.name, and metadata.namespace when namespaced (ret_ns is left alone otherwise and may be
 * NULL), both required; names the object in c first, so that even their own errors say which.
 */
int ndc_k8s_conv_get_meta(struct conv *c, struct json_object *obj, bool namespaced,
			  const char **ret_ns, const char **ret_name);

/* *ret = a heap copy of s, or NULL for s NULL. */
int ndc_k8s_conv_dup_str(const struct conv *c, const char *s, char **ret);

/* Frees the unpacked ports array parse_ports made (each name, then the array). */
void ndc_k8s_conv_free_ports(struct ndc_k8s_port *p, uint32_t n);

/* The object's kind (naming it in c), NDC_K8S_OBJ_NONE for kinds DNS does not read. */
int ndc_k8s_conv_type(struct conv *c, struct json_object *obj, enum ndc_k8s_obj_type *ret);

/*
 * Fill the zeroed element e (struct ndc_k8s_service, _slice or _pod) from obj as separate
 * allocations, mem NULL. On error e may be half filled: the caller frees it (free_* in
 * k8s_objects.c).
 */
int ndc_k8s_conv_service(struct conv *c, struct json_object *obj, void *e);
int ndc_k8s_conv_slice(struct conv *c, struct json_object *obj, void *e);
int ndc_k8s_conv_pod(struct conv *c, struct json_object *obj, void *e);
/* A multicluster.x-k8s.io ServiceImport into a struct ndc_k8s_service (objects.h: imports). */
int ndc_k8s_conv_svcimport(struct conv *c, struct json_object *obj, void *e);

#endif
