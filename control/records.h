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

#include "config.h"
#include "k8s_objects.h"

struct ndc_records;

struct ndc_records_opts {
	const char *zone; /* cluster domain, "cluster.local" */
	uint32_t ttl;
	enum ndc_pods_mode pods;
	bool endpoint_pod_names;
	bool ignore_empty_service;
	size_t n_namespaces; /* 0: every namespace is served */
	char *const *namespaces;
	size_t n_ns_addrs; /* A/AAAA of the apex NS target (ns.dns.<zone>): the listen addresses */
	const struct ndc_ip *ns_addrs;
};

/* Fills opts from a config (pointers into cfg). */
void ndc_records_opts_from_config(struct ndc_records_opts *opts, const struct ndc_config *cfg);

/* Builds the table. -ENOMEM, or -EINVAL for a zone that is not a valid name. */
int ndc_records_build(const struct ndc_k8s_objects *o, const struct ndc_records_opts *opts,
		      struct ndc_records **ret);

void ndc_records_free(struct ndc_records *r);

/*
 * Answers (lname, qtype) for class IN. lname: lowercase wire name. Returns
 *   0        out holds the authoritative answer: records, NODATA or NXDOMAIN (SOA in authority)
 *   -ENOENT  not ours: the name is outside the cluster zone, or a reverse name of an IP the store
 *            does not know (fallthrough: forward it)
 *   -ENOSPC  the answer does not fit cap bytes of out->data
 */
int ndc_records_lookup(const struct ndc_records *r, const uint8_t *lname, size_t nlen,
		       uint16_t qtype, struct ndc_answer *out, size_t cap);

/* True when lname is inside the cluster zone (answered authoritatively, never forwarded). */
bool ndc_records_is_local(const struct ndc_records *r, const uint8_t *lname, size_t nlen);

/*
 * Calls fn for every answer the table holds: each (name, type) RRset; for names inside the zone
 * also (name, ANY) with the answer ndc_records_lookup gives for ANY, and (name, 0) with the
 * answer to every type the name does not have (NODATA with SOA, or the CNAME). Reverse names get
 * only their PTR. A non-zero return from fn stops the walk and is returned.
 */
typedef int (*ndc_records_fn)(void *arg, const uint8_t *lname, size_t nlen, uint16_t qtype,
			      const struct ndc_answer *a);
int ndc_records_foreach(const struct ndc_records *r, ndc_records_fn fn, void *arg);

/* True when ndc_records_foreach yields (lname, qtype): the fast-path publisher's diff. */
bool ndc_records_has(const struct ndc_records *r, const uint8_t *lname, size_t nlen,
		     uint16_t qtype);

/*
 * The NXDOMAIN answer (SOA in authority) with no name compressed against the question, so the
 * same bytes follow any question: the fast path's template. -ENOSPC if cap is too small.
 */
int ndc_records_nxdomain(const struct ndc_records *r, struct ndc_answer *out, size_t cap);

/* Number of (name, type) RRsets in the table, for metrics and tests. */
size_t ndc_records_count(const struct ndc_records *r);

/* Heap bytes the table holds (blob, index, handle), for metrics and sizing. */
size_t ndc_records_bytes(const struct ndc_records *r);

#endif
