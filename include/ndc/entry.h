/* SPDX-License-Identifier: MIT */
/*
 * The answer table's entries as both tables hold them (abi.h's key, logical value and config),
 * built from an answer by one piece of code (dataplane/base/: value.c, entry.c) that the kernel
 * table (dataplane/fastpath/), the DPDK table (dataplane/dpdk/) and the publisher
 * (control/publisher.c) all use; so a key or an entry means the same in every table. Plain
 * functions of their arguments (entry and config read the clock or log, nothing else): any thread.
 */
#ifndef NDC_ENTRY_H
#define NDC_ENTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <ndc/abi.h>
#include <ndc/dns_wire.h>

struct ndc_ip;

/*
 * Conversions (value.c). key: the name's hash (ndc_fp_name_hash), qtype and nlen, padding zero
 * (-EINVAL for nlen 0, -ENAMETOOLONG over NDC_FP_NAME_MAX). value: ttl_s 0 gives expire_ns 0 and
 * no TTL offsets; else insert_ns = now_ns, expire_ns = now_ns + ttl_s s, and every RR's TTL
 * offset in data (-E2BIG over NDC_FP_TTL_MAX RRs or NDC_FP_DATA_MAX bytes, -EINVAL when data does
 * not hold exactly the counted RRs); name_len 0 and name zero: publishing sets them.
 */
int ndc_fastpath_key(const uint8_t *lname, size_t nlen, uint16_t qtype, struct ndc_fp_key *ret);
int ndc_fastpath_value(const struct ndc_answer *a, uint32_t ttl_s, uint64_t now_ns,
		       struct ndc_fp_value *ret);
/*
 * The NXDOMAIN template's value: as ndc_fastpath_value, and -EINVAL when its data holds a
 * compression pointer (<ndc/answer_table.h>, set_nx, says why).
 */
int ndc_fastpath_nx_value(const struct ndc_answer *nx, struct ndc_fp_value *ret);

/*
 * The entry (entry.c): the key and the value with its name that publishing (lname, qtype)
 * writes, from a as ndc_fastpath_value (its clock CLOCK_MONOTONIC, now), or with a NULL the pass
 * marker at (lname, NDC_FP_QTYPE_OTHER); errors as publishing's.
 */
int ndc_fastpath_entry(const uint8_t *lname, size_t nlen, uint16_t qtype,
		       const struct ndc_answer *a, uint32_t ttl_s, struct ndc_fp_key *ret_key,
		       struct ndc_fp_value *ret_val);

/* What a table's config is made of: the part of each backend's options that both share. */
struct ndc_fp_config_opts {
	size_t n_addrs; /* node-local addresses the table answers for */
	const struct ndc_ip *addrs;
	uint16_t port;	     /* host order; 0: 53 */
	const uint8_t *zone; /* lowercase wire cluster domain: NXDOMAIN synthesis below it */
	size_t zone_len;
	const uint8_t *pass; /* lowercase wire suffix never synthesised (pod.<zone>), or NULL */
	size_t pass_len;
	/* the kernel table's only: */
	bool redirect_peer; /* tc replies with bpf_redirect_peer */
	bool failopen;	    /* fail open to the first upstream of each family */
	size_t n_upstreams;
	const struct sockaddr_storage *upstreams;
};

/*
 * The config (entry.c): the table's config from o (abi_version set, not synced): -E2BIG more than
 * NDC_FP_MAX_ADDRS addresses of one family, -ENAMETOOLONG zone or pass over NDC_FP_NAME_MAX,
 * -EINVAL an address of another family or a length without its name; logged.
 */
int ndc_fastpath_config(const struct ndc_fp_config_opts *o, struct ndc_fp_config *ret);

#endif
