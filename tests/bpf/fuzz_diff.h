/* SPDX-License-Identifier: MIT */
/*
 * The differential fuzzer of the fast path (fuzz_diff.c drives it): the test cases it sends
 * (fuzz_query.c) and the comparison of a fast-path reply with the socket path's (fuzz_reply.c).
 */
#ifndef NDC_TEST_FUZZ_DIFF_H
#define NDC_TEST_FUZZ_DIFF_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ndc/dns_wire.h>

#include "packets.h"

/* splitmix64: one state word, so that any case can be made again from (seed, index) alone. */
struct fz_rng {
	uint64_t s;
};

uint64_t fz_rand(struct fz_rng *r);

static inline uint32_t fz_below(struct fz_rng *r, uint32_t n)
{
	return n ? (uint32_t)(fz_rand(r) % n) : 0;
}

static inline bool fz_chance(struct fz_rng *r, unsigned pct)
{
	return fz_below(r, 100) < pct;
}

/* A lowercase wire name, with the type it was found with. */
struct fz_name {
	uint8_t name[NDC_NAME_MAX];
	uint8_t len;
	uint16_t qtype;
};

struct fz_names {
	struct fz_name *v;
	size_t n, cap;
};

/* Appends; -ENOMEM. */
int fz_names_add(struct fz_names *ns, const uint8_t *lname, size_t len, uint16_t qtype);
void fz_names_free(struct fz_names *ns);

/* What the generator builds around. */
struct fz_corpus {
	struct fz_names table;	/* every (name, type) the record table answers */
	struct fz_names cached; /* the cached upstream answers */
	uint8_t zone[NDC_NAME_MAX];
	size_t zone_len;
};

/* The addresses of the node the cases are sent to, and of the client. */
extern const uint8_t fz_node4[16], fz_node6[16];
#define FZ_PORT 53

/* One case: an Ethernet frame, and a few words saying what the generator did. */
struct fz_case {
	uint8_t frame[NDC_PKT_MAX];
	size_t flen;
	char what[160];
};

/* Builds case number index of the run seeded with seed. 0, or -errno of the frame builder. */
int fz_gen_case(uint64_t seed, uint64_t index, const struct fz_corpus *c, struct fz_case *ret);

/*
 * Case index of the vector set (fuzz_query.c: each name of c asked plainly, for a few types, IPv4
 * and IPv6, with and without EDNS). 0, -ENOENT past the set's end, or -errno of the builders.
 */
int fz_vector_case(uint64_t index, const struct fz_corpus *c, struct fz_case *ret);

/*
 * The DNS payload the kernel would hand a UDP socket on fz_node4/fz_node6 port 53 for this frame,
 * or false when it would hand it none (another address or port, not UDP, a fragment, lengths that
 * disagree): then the fast path must pass it.
 */
bool fz_frame_payload(const uint8_t *frame, size_t len, const uint8_t **ret, size_t *ret_len);

/*
 * Compares a fast-path reply with the socket path's to the same query, decoded: ID, every header
 * flag, counts, the question as asked (byte for byte: 0x20 case kept), and each section as a
 * set of RRs (owner names case-insensitive, names in RDATA decompressed). TTLs are equal, or for
 * a cached answer (counting_down) at most a second apart. 0 when they agree; else -1 with the
 * first difference in why.
 */
int fz_compare(const uint8_t *query, size_t qlen, const uint8_t *fast, size_t flen,
	       const uint8_t *sock, size_t slen, bool counting_down, char *why, size_t whylen);

/*
 * The DPDK answer function beside the kernel's (dpdk/fuzz_dpdk.c, --dpdk; builds with DPDK
 * only): its table made with fo's config and filled from rec, then as the cache hook says.
 */
struct ndc_fastpath_opts;
struct ndc_records;
#ifdef NDC_WITH_DPDK
int fz_dpdk_open(const struct ndc_fastpath_opts *fo, const struct ndc_records *rec);
void fz_dpdk_cache_hook(const struct ndc_answer *a, const uint8_t *lname, size_t nlen,
			uint16_t qtype, uint16_t qclass, uint32_t ttl);
/* Waits until every hook call made before it is in the table. */
void fz_dpdk_flush(void);
/*
 * The frame in (copied to out, NDC_PKT_MAX bytes of room) through ndc_dpdk_answer at now_ns:
 * its verdict (a counter of abi.h, or NDC_FP_COUNTER_MAX: not ours), out and *ret_len the frame
 * after it.
 */
int fz_dpdk_answer(const uint8_t *in, size_t inlen, uint64_t now_ns, uint8_t *out, size_t *ret_len);
bool fz_dpdk_answered(int verdict);
void fz_dpdk_close(void);
#else
/* a build without DPDK: --dpdk is refused at start */
static inline int fz_dpdk_open(const struct ndc_fastpath_opts *fo, const struct ndc_records *rec)
{
	(void)fo, (void)rec;
	return -EOPNOTSUPP;
}
static inline void fz_dpdk_cache_hook(const struct ndc_answer *a, const uint8_t *lname, size_t nlen,
				      uint16_t qtype, uint16_t qclass, uint32_t ttl)
{
	(void)a, (void)lname, (void)nlen, (void)qtype, (void)qclass, (void)ttl;
}
static inline void fz_dpdk_flush(void)
{
}
static inline int fz_dpdk_answer(const uint8_t *in, size_t inlen, uint64_t now_ns, uint8_t *out,
				 size_t *ret_len)
{
	(void)in, (void)inlen, (void)now_ns, (void)out, (void)ret_len;
	return -EOPNOTSUPP;
}
static inline bool fz_dpdk_answered(int verdict)
{
	(void)verdict;
	return false;
}
static inline void fz_dpdk_close(void)
{
}
#endif

#endif
