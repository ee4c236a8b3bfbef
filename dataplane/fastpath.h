/* SPDX-License-Identifier: MIT */
/*
 * The fast path from user space: loads the BPF object (libbpf skeleton), pins its maps under
 * NDC_FP_PIN_DIR, writes the config, attaches the tc (clsact ingress) or XDP program to every
 * link whose name matches one of the patterns, as links appear (rtnetlink watch), and detaches on
 * close. The publisher keeps the answer table equal to what the socket path would answer, one key
 * at a time. Without BPF support in the build every call returns -EOPNOTSUPP (fastpath_stub.c),
 * so callers never need #ifdef.
 */
#ifndef NDC_FASTPATH_H
#define NDC_FASTPATH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ndc/abi.h>
#include <ndc/dns_wire.h>

struct ndc_ip;
struct ndc_fastpath;

enum ndc_fp_attach { NDC_FP_ATTACH_TC = 0, NDC_FP_ATTACH_XDP, NDC_FP_ATTACH_NONE };

struct ndc_fastpath_opts {
	enum ndc_fp_attach attach; /* NONE: load and publish only (tests, BPF_PROG_TEST_RUN) */
	size_t n_patterns;	   /* fnmatch(3) patterns of interface names */
	char *const *patterns;
	size_t n_addrs; /* node-local addresses the fast path answers for */
	const struct ndc_ip *addrs;
	uint16_t port;
	const uint8_t *zone; /* lowercase wire cluster domain: NXDOMAIN synthesis below it */
	size_t zone_len;
	const uint8_t *pass; /* lowercase wire suffix never synthesised (pod.<zone>), or NULL */
	size_t pass_len;
	uint32_t max_entries;  /* answer table size */
	bool redirect_peer;    /* tc replies with bpf_redirect_peer */
	const char *pin_dir;   /* NULL: NDC_FP_PIN_DIR */
};

/* -EOPNOTSUPP without BPF in the build; -EPERM without the privileges; -errno from libbpf. */
int ndc_fastpath_open(const struct ndc_fastpath_opts *opts, struct ndc_fastpath **ret);

/* Detaches from every link, removes the pins, frees. NULL is fine. */
void ndc_fastpath_close(struct ndc_fastpath *fp);

/*
 * Publishes the answer for (lname, qtype); qtype NDC_FP_QTYPE_OTHER for the answer to every type
 * not published at that name. ttl_s 0: a cluster record (never expires, TTLs as they are); else
 * the entry expires ttl_s seconds from now and every RR's TTL counts down from its value in a.
 * -E2BIG: too big for NDC_FP_DATA_MAX or more than NDC_FP_TTL_MAX RRs; -ENAMETOOLONG: name over
 * NDC_FP_NAME_MAX; -ENOSPC: the table is full. In all three cases user space keeps answering.
 */
int ndc_fastpath_publish(struct ndc_fastpath *fp, const uint8_t *lname, size_t nlen,
			 uint16_t qtype, const struct ndc_answer *a, uint32_t ttl_s);

/* Removes (lname, qtype); -ENOENT if it was not there. */
int ndc_fastpath_unpublish(struct ndc_fastpath *fp, const uint8_t *lname, size_t nlen,
			   uint16_t qtype);

/* The NXDOMAIN answer (its data must not compress against the question: it serves any name). */
int ndc_fastpath_set_nx(struct ndc_fastpath *fp, const struct ndc_answer *nx);

/* Synced: the table holds every cluster name, so misses under the zone are NXDOMAIN. */
int ndc_fastpath_set_synced(struct ndc_fastpath *fp, bool synced);

/* Sums the per-CPU counters. */
int ndc_fastpath_counters(struct ndc_fastpath *fp, uint64_t ret[NDC_FP_COUNTER_MAX]);

/* The program fds, for BPF_PROG_TEST_RUN in tests and benchmarks. */
int ndc_fastpath_prog_fd(struct ndc_fastpath *fp, enum ndc_fp_attach which);

/* Conversions, exposed for tests. */
int ndc_fastpath_key(const uint8_t *lname, size_t nlen, uint16_t qtype, struct ndc_fp_key *ret);
int ndc_fastpath_value(const struct ndc_answer *a, uint32_t ttl_s, uint64_t now_ns,
		       struct ndc_fp_value *ret);

#endif
