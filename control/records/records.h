/* SPDX-License-Identifier: MIT */
/*
 * The record model: every record of the Kubernetes DNS specification (schema 1.1.0), built from
 * the object store, with CoreDNS kubernetes-plugin behaviour where the spec is silent. The table
 * is immutable once built; readers on any thread may look up concurrently without locks.
 */
#ifndef NDC_RECORDS_H
#define NDC_RECORDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ndc/dns_wire.h>

#include "objects/objects.h"

/* records.multicluster_zones: at most this many zones. */
#define NDC_RECORDS_MAX_MC_ZONES 8

/* Pod records (records.pods), as CoreDNS's kubernetes plugin's "pods" option. */
enum ndc_pods_mode { NDC_PODS_DISABLED = 0, NDC_PODS_INSECURE, NDC_PODS_VERIFIED };

struct ndc_records;

/* A build's options; the agent makes them from its config (config.h). */
struct ndc_records_opts {
	const char *zone; /* cluster domain, "cluster.local" */
	uint32_t ttl;
	enum ndc_pods_mode pods;
	bool endpoint_pod_names;
	bool ignore_empty_service;
	size_t n_namespaces; /* 0: every namespace is served */
	char *const *namespaces;
	/*
	 * Multicluster zones (records.multicluster_zones): names from ServiceImports and the
	 * EndpointSlices labelled for them, as CoreDNS's `multicluster` option answers them. The
	 * cluster domain may be one of them: it then answers from ServiceImports, not Services.
	 */
	size_t n_mc_zones;
	char *const *mc_zones;
	size_t n_ns_addrs; /* A/AAAA of the apex NS target (ns.dns.<zone>): the listen addresses */
	const struct ndc_ip *ns_addrs;
	/*
	 * SOA serial; 0: the build time. Incremental versions keep their base's SOA, so a store
	 * that rebuilds its base now and then fixes the serial: the negative answers then stay the
	 * same bytes across rebuilds, as the fast-path table holds them.
	 */
	uint32_t serial;
	/*
	 * Render every answer at build time. Off, reverse names and SRV sets are kept as pointers
	 * to the names they hold and their answers made at lookup: the same bytes in a third less
	 * memory. On: tests and benchmarks compare the two.
	 */
	bool render_all;
};

/* Builds the table. -ENOMEM, or -EINVAL for a zone that is not a valid name. */
int ndc_records_build(const struct ndc_k8s_objects *o, const struct ndc_records_opts *opts,
		      struct ndc_records **ret);

/*
 * As ndc_records_build, calling done(arg) exactly once, as soon as o is no longer read (before
 * the answers are rendered, or on failure before that): the caller frees what it built o from
 * while the rest of the build runs, which lowers the build's peak memory by that much.
 */
int ndc_records_build_from(const struct ndc_k8s_objects *o, const struct ndc_records_opts *opts,
			   void (*done)(void *arg), void *arg, struct ndc_records **ret);

void ndc_records_free(struct ndc_records *r);

/*
 * Answers (lname, qtype) for class IN. lname: lowercase wire name. An ExternalName whose target
 * is a name of the zone answers every type but CNAME and ANY with its chain of aliases followed
 * inside the zone (at most 8) and what the last name answers, its RCODE included. Returns
 *   0        out holds the authoritative answer: records, NODATA or NXDOMAIN (SOA in authority)
 *   -ENOENT  not ours: the name is outside our zones, or a reverse name of an IP the store
 *            does not know (fallthrough: forward it)
 *   -ENOSPC  the answer does not fit cap bytes of out->data
 */
int ndc_records_lookup(const struct ndc_records *r, const uint8_t *lname, size_t nlen,
		       uint16_t qtype, struct ndc_answer *out, size_t cap);

/*
 * True when lname is inside the cluster zone or a multicluster zone (answered authoritatively,
 * never forwarded).
 */
bool ndc_records_is_local(const struct ndc_records *r, const uint8_t *lname, size_t nlen);

/*
 * Calls fn for every answer the table holds: each (name, type) RRset; for names inside the zone
 * also (name, ANY) with the answer ndc_records_lookup gives for ANY, and (name, 0) with the
 * answer to every type the name does not have (NODATA with SOA, or the CNAME). An alias followed
 * inside the zone also gets (name, type) for each type the chain's last name has, and its
 * (name, 0) is the chain with that name's answer to any other type; each name's (name, 0) comes
 * after its other answers. Reverse names get only their PTR. Every answer is the one
 * ndc_records_lookup gives. A non-zero return from fn stops the walk and is returned.
 */
typedef int (*ndc_records_fn)(void *arg, const uint8_t *lname, size_t nlen, uint16_t qtype,
			      const struct ndc_answer *a);
int ndc_records_foreach(const struct ndc_records *r, ndc_records_fn fn, void *arg);

/* True when ndc_records_foreach yields (lname, qtype): the fast-path publisher's diff. */
bool ndc_records_has(const struct ndc_records *r, const uint8_t *lname, size_t nlen,
		     uint16_t qtype);

/*
 * The cluster domain's NXDOMAIN answer (SOA in authority) with no name compressed against the
 * question, so the same bytes follow any question: the fast path's template (it synthesises
 * negative answers under the cluster domain only; a multicluster zone's missing names pass to
 * user space). -ENOSPC if cap is too small.
 */
int ndc_records_nxdomain(const struct ndc_records *r, struct ndc_answer *out, size_t cap);

/* The reverse name of ip (NDC_NAME_MAX bytes): in-addr.arpa or ip6.arpa. Returns its length. */
size_t ndc_records_reverse_name(const struct ndc_ip *ip, uint8_t *out);

/* ndc_records_foreach restricted to one name (nothing when the name does not exist). */
int ndc_records_foreach_name(const struct ndc_records *r, const uint8_t *lname, size_t nlen,
			     ndc_records_fn fn, void *arg);

/*
 * Incremental updates (records_patch.c). A patch holds new contents for the names some changes
 * of the object store touched, each computed from the objects that make that name; applying it
 * gives a new version of a table that shares everything else with it. The old version stays
 * valid and unchanged, so readers holding it (under RCU) never see half an update, and a
 * version is freed with ndc_records_free like a built table.
 *
 * Versions and patch entries carry the store's change counter (seq): applying skips entries
 * the table already reflects (seq <= ndc_records_seq), which lets a base rebuilt from a snapshot
 * of the store taken at seq S take over from a version with changes after S
 * (ndc_records_rebase).
 */
struct ndc_records_patch;

/* opts (the table's) must outlive the patch. */
int ndc_records_patch_new(const struct ndc_records_opts *opts, struct ndc_records_patch **ret);
void ndc_records_patch_free(struct ndc_records_patch *p);

/*
 * One change, the store at seq. before: the changed objects as they were; after: the same
 * objects as they are now; context: after plus every other object that makes one of their
 * names (other services with the same IP for a PTR name, other pods with the same IP in the
 * namespace), and the namespace in context->namespaces when it exists regardless of the change
 * (a Namespace object, or services in it); pod_ns lists namespaces where pods alone make
 * <ns>.pod.<zone> exist. Each name before or after makes below
 * svc.<zone> or pod.<zone>, and each reverse name, gets what context makes of it: its records,
 * an empty non-terminal, or nothing (deleted). A later change to the same name replaces an
 * earlier one. -ENOMEM, or -ENOSPC when an answer does not fit a message: the patch is then
 * unusable and the caller rebuilds the whole table instead.
 */
int ndc_records_patch_add(struct ndc_records_patch *p, uint64_t seq,
			  const struct ndc_k8s_objects *before, const struct ndc_k8s_objects *after,
			  const struct ndc_k8s_objects *context, char *const *pod_ns,
			  size_t n_pod_ns);

/*
 * Calls fn with each target of the PTR RRset at rev as p has it (p: newest) or else r (either
 * may be NULL). Returns 0 or what fn returned.
 */
int ndc_records_ptr_targets(const struct ndc_records *r, const struct ndc_records_patch *p,
			    const uint8_t *rev, size_t len,
			    int (*fn)(void *arg, const uint8_t *target, size_t tlen), void *arg);

/* Names in the patch. */
size_t ndc_records_patch_size(const struct ndc_records_patch *p);

/* Calls fn for each name in the patch; a non-zero return stops the walk and is returned. */
int ndc_records_patch_foreach(const struct ndc_records_patch *p,
			      int (*fn)(void *arg, const uint8_t *lname, size_t nlen), void *arg);

/* A new version: r with the patch's names replaced. -ENOMEM. */
int ndc_records_apply(const struct ndc_records *r, const struct ndc_records_patch *p,
		      struct ndc_records **ret);

/*
 * A new version of base (built from the store at ndc_records_seq(base)) carrying every change of
 * cur newer than that: cur's content, on a fresh base. base stays the caller's to free.
 */
int ndc_records_rebase(const struct ndc_records *cur, const struct ndc_records *base,
		       struct ndc_records **ret);

void ndc_records_set_seq(struct ndc_records *r, uint64_t seq);
uint64_t ndc_records_seq(const struct ndc_records *r);

/* Names changed since the base was built (the overlay), and the base's names: when the first
 * grows large against the second, a rebuild keeps lookups and memory lean. */
size_t ndc_records_overlay_size(const struct ndc_records *r);
size_t ndc_records_base_names(const struct ndc_records *r);

/* Number of (name, type) RRsets in the table, for metrics and tests. */
size_t ndc_records_count(const struct ndc_records *r);

/* Heap bytes the table holds (blob, index, handle), for metrics and sizing. */
size_t ndc_records_bytes(const struct ndc_records *r);

#endif
