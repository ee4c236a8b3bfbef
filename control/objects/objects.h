/* SPDX-License-Identifier: MIT */
/*
 * The Kubernetes objects DNS needs, reduced to the fields the record builder reads. Filled from a
 * snapshot (a List, JSON or YAML) today and from list/watch later. All strings are heap copies
 * owned by the containing struct ndc_k8s_objects and freed by ndc_k8s_objects_free. Optional
 * strings (port names, hostname, pod_name, service, external_name) are NULL when the field is
 * absent, null or empty.
 *
 * ndc_k8s_object_add packs everything a Service, EndpointSlice or Pod points to (strings, ports,
 * endpoints, addresses) into one allocation, recorded in its mem field; ndc_k8s_objects_free
 * frees that block. Structs filled by hand leave mem NULL: each pointer is then freed on its own.
 * Either way the fields read the same, so readers never look at mem.
 */
#ifndef NDC_K8S_OBJECTS_H
#define NDC_K8S_OBJECTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ndc/ip.h>

struct json_object;

struct ndc_k8s_port {
	char *name; /* NULL when absent or "" (unnamed ports get no SRV record) */
	uint16_t port;
	uint8_t proto; /* IPPROTO_TCP, IPPROTO_UDP or IPPROTO_SCTP */
};

enum ndc_svc_type {
	NDC_SVC_CLUSTER_IP = 0,
	NDC_SVC_NODE_PORT,
	NDC_SVC_LOAD_BALANCER,
	NDC_SVC_EXTERNAL_NAME,
};

#define NDC_K8S_MAX_CLUSTER_IPS 2 /* spec.clusterIPs: one per family at most */

/*
 * Field order and count widths below keep the structs small: at 100,000 Services and as many
 * EndpointSlices every 8 bytes of a struct is 0.8 MB (1.6 MB) of the store. Counts are uint32_t
 * where they come from a JSON array and uint8_t where they are capped at 2.
 */
struct ndc_k8s_service {
	char *ns;
	char *name;
	char *external_name; /* spec.externalName (ExternalName only), else NULL */
	struct ndc_k8s_port *ports;
	void *mem; /* the one block the pointers above point into, or NULL (see the top) */
	enum ndc_svc_type type;
	bool headless;		/* spec.clusterIP == "None" */
	bool publish_not_ready; /* spec.publishNotReadyAddresses */
	uint8_t n_ips;		/* spec.clusterIPs, falling back to spec.clusterIP */
	struct ndc_ip ips[NDC_K8S_MAX_CLUSTER_IPS];
	uint32_t n_ports;
};

struct ndc_k8s_endpoint {
	struct ndc_ip *addrs; /* all of the slice's addressType; none for FQDN */
	char *hostname;	      /* endpoints[].hostname or NULL */
	char *pod_name;	      /* targetRef.name when targetRef.kind == "Pod", else NULL */
	uint32_t n_addrs;
	bool ready; /* conditions.ready; absent or null means ready (API reference) */
};

struct ndc_k8s_slice {
	char *ns;
	char *name;
	char *service; /* metadata.labels["kubernetes.io/service-name"]; NULL: slice ignored */
	/*
	 * Multi-cluster Services (KEP-1645): the ServiceImport the slice is labelled for
	 * (multicluster.kubernetes.io/service-name) and the cluster its endpoints live in
	 * (multicluster.kubernetes.io/source-cluster); NULL when absent.
	 */
	char *mc_service;
	char *cluster;
	struct ndc_k8s_port *ports;
	struct ndc_k8s_endpoint *endpoints;
	void *mem;  /* the one block the pointers above point into, or NULL (see the top) */
	int family; /* addressType: AF_INET, AF_INET6, or 0 for FQDN (ignored by DNS) */
	uint32_t n_ports;
	uint32_t n_endpoints;
};

struct ndc_k8s_pod {
	char *ns;
	char *name;
	void *mem;     /* the one block ns and name point into, or NULL (see the top) */
	uint8_t n_ips; /* status.podIPs, falling back to status.podIP */
	struct ndc_ip ips[2];
};

struct ndc_k8s_objects {
	size_t n_namespaces;
	char **namespaces;
	size_t n_services;
	struct ndc_k8s_service *services;
	size_t n_slices;
	struct ndc_k8s_slice *slices;
	size_t n_pods;
	struct ndc_k8s_pod *pods;
	/*
	 * multicluster.x-k8s.io/v1alpha1 ServiceImports, in the Service struct: spec.ips as ips,
	 * spec.type Headless as headless (type is always NDC_SVC_CLUSTER_IP, external_name NULL).
	 */
	size_t n_imports;
	struct ndc_k8s_service *imports;
	/*
	 * Allocated lengths of the arrays above, for ndc_k8s_object_add only. Leave them 0 when
	 * filling the struct by hand: a capacity below the count means "unknown, reallocate".
	 */
	size_t cap_namespaces, cap_services, cap_slices, cap_pods, cap_imports;
};

void ndc_k8s_objects_free(struct ndc_k8s_objects *o);

/*
 * Adds one object (a Namespace, Service, EndpointSlice, Pod or ServiceImport as the API server
 * returns it) to o.
 * Other kinds are ignored (0). A object of a known kind with a field of the wrong type or a
 * missing name gives -EINVAL and a one-line reason in err; o is unchanged then.
 */
int ndc_k8s_object_add(struct ndc_k8s_objects *o, struct json_object *obj, char *err,
		       size_t errlen);

/*
 * As ndc_k8s_object_add, with where (e.g. "items[3]", or NULL) prefixed to the reason:
 * "items[3] (Service shop/cart): spec.ports[1].port: expected integer 1..65535".
 */
int ndc_k8s_object_add_at(struct ndc_k8s_objects *o, struct json_object *obj, const char *where,
			  char *err, size_t errlen);

/* What ndc_k8s_object_convert made of an object. */
enum ndc_k8s_obj_type {
	NDC_K8S_OBJ_NONE = 0, /* a kind DNS does not read */
	NDC_K8S_OBJ_NAMESPACE,
	NDC_K8S_OBJ_SERVICE,
	NDC_K8S_OBJ_SLICE,
	NDC_K8S_OBJ_POD,
	NDC_K8S_OBJ_SVCIMPORT, /* a struct ndc_k8s_service (see imports above) */
};

/*
 * Converts one object as ndc_k8s_object_add does, for a caller that keeps objects one by one (the
 * object store): into a single malloc'd block of head bytes for the caller (a multiple of 8,
 * zeroed), then the element at block + head (a char * naming a Namespace, or a struct
 * ndc_k8s_service, _slice or _pod, whose mem is the block), then everything it points to. The
 * caller frees the block with free(). Other kinds give 0, NDC_K8S_OBJ_NONE and a NULL block.
 * Errors and messages as ndc_k8s_object_add; nothing is allocated then.
 */
int ndc_k8s_object_convert(struct json_object *obj, size_t head, enum ndc_k8s_obj_type *ret_type,
			   void **ret_block, char *err, size_t errlen);

/*
 * Parses a snapshot: a Kubernetes List ({"kind":"List","items":[...]}, or any *List kind) or a
 * single object, in JSON or YAML (detected from the first non-space byte: '{' means JSON). YAML
 * must be one document without aliases; plain scalars resolve as in the YAML 1.2 core schema
 * (booleans, nulls, integers; anything else, and every quoted scalar, is a string).
 * Returns 0 and fills *o (zeroed first), or -EINVAL (-ENOMEM) with a one-line reason in err: byte
 * offset and line for JSON, line for YAML. Items that fail ndc_k8s_object_add fail the whole
 * snapshot: a snapshot is all or nothing, and *o is empty after a failure.
 */
int ndc_snapshot_parse(const char *buf, size_t len, struct ndc_k8s_objects *o, char *err,
		       size_t errlen);

/*
 * The fast path of ndc_snapshot_parse for JSON: a List converted item by item, each item's tree
 * freed before the next is parsed, never the whole file's. 0 and *o filled (zeroed first);
 * -EAGAIN (*o empty) when the input is anything else than a well-formed List of objects that all
 * convert (then ndc_snapshot_parse parses it whole, for the error or the single object);
 * -ENOMEM. Public for the tests, which check which inputs take it.
 */
int ndc_snapshot_stream_json(const char *buf, size_t len, struct ndc_k8s_objects *o);

/* Reads and parses a snapshot file; -errno from open/read, else as ndc_snapshot_parse. */
int ndc_snapshot_load(const char *path, struct ndc_k8s_objects *o, char *err, size_t errlen);

/* The sample cluster compiled into the binary (deploy/examples/sample-cluster.json). */
extern const char ndc_sample_cluster[];
extern const size_t ndc_sample_cluster_len;

#endif
