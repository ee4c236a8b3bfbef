/* SPDX-License-Identifier: MIT */
/*
 * The answer table as its writer (control/publisher.c) sees it: one table of operations, as DPDK's
 * l3fwd keeps each lookup backend behind one struct of function pointers. Two backends implement
 * it: the kernel fast path's table (dataplane/fastpath/fastpath.h, ndc_fastpath_answer_table, table
 * a struct ndc_fp) and the DPDK backend's (dataplane/dpdk/dpdk.h, ndc_dpdk_answer_table, table a
 * struct ndc_dpdk). The caller picks one once and never asks which it has: both hold the same
 * entries (abi.h's key and logical value, converted by the same code), so every call means the
 * same in both. Every call may come from any thread; a backend serialises its writers.
 */
#ifndef NDC_ANSWER_TABLE_H
#define NDC_ANSWER_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ndc/abi.h>
#include <ndc/dns_wire.h>

struct ndc_answer_table_ops {
	/* Each entry: (lname, qtype). */

	/*
	 * Publishes the answer for (lname, qtype); qtype NDC_FP_QTYPE_OTHER for the answer to every
	 * type not published at that name. ttl_s 0: a cluster record (never expires, TTLs as they
	 * are); else the entry expires ttl_s seconds from now and every RR's TTL counts down from
	 * its value in a. a NULL: the pass marker at (lname, NDC_FP_QTYPE_OTHER), whatever qtype
	 * (an entry with NDC_FP_V_PASS and no data, for a name one of whose answers could not be
	 * published). -E2BIG: too big for NDC_FP_DATA_MAX or more than NDC_FP_TTL_MAX RRs;
	 * -ENAMETOOLONG: name over NDC_FP_NAME_MAX; -ENOSPC: the table is full, or the key is held
	 * by another name whose hash collides with this one's (abi.h; that name keeps the entry).
	 * In all three cases user space keeps answering. -EINVAL: a->qname_len != nlen (the
	 * pointers in data would be wrong) or malformed data.
	 */
	int (*publish)(void *table, const uint8_t *lname, size_t nlen, uint16_t qtype,
		       const struct ndc_answer *a, uint32_t ttl_s);
	/* Removes (lname, qtype); -ENOENT if it was not there (nor when another name holds it). */
	int (*unpublish)(void *table, const uint8_t *lname, size_t nlen, uint16_t qtype);
	/*
	 * Removes the entry at k (ndc_fastpath_key's; whichever name it holds) if it has expired
	 * (expire_ns set and passed): 0; -EAGAIN when it has not (published again since, or never
	 * expires); -ENOENT when it is not there. Not atomic: a publish of k between the check and
	 * the delete is lost, which costs a miss (user space answers and republishes), never a
	 * wrong answer.
	 */
	int (*unpublish_expired)(void *table, const struct ndc_fp_key *k);
	/*
	 * How many times the table answered the cached entry (lname, qtype) since it was published,
	 * up to NDC_FP_HITS_MAX (entries with a TTL only: cluster records count 0): 0 with
	 * *ret_hits, -ENOENT when there is no such entry of that name. NULL in a backend that
	 * counts no hits (the DPDK lcores would write a shared line per answer).
	 */
	int (*hits)(void *table, const uint8_t *lname, size_t nlen, uint16_t qtype,
		    uint32_t *ret_hits);

	/* The whole table. */

	/*
	 * The NXDOMAIN answer. It serves questions of any length, and a pointer's target moves with
	 * the question's length, so its data must hold no compression pointer at all: -EINVAL when
	 * an owner name or a name in NS/CNAME/PTR/MX/SOA RDATA has one (write it uncompressed).
	 */
	int (*set_nx)(void *table, const struct ndc_answer *nx);
	/* Synced: the table holds every cluster name, so misses under the zone are NXDOMAIN. */
	int (*set_synced)(void *table, bool synced);
};

#endif
