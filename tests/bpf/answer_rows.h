/* SPDX-License-Identifier: MIT */
/*
 * The rows of the answer tests, shared by the kernel's (test_fastpath_bpf.c, through
 * BPF_PROG_TEST_RUN) and DPDK's (test_dpdk_answer.c, on mbufs): a row is a query and the frame
 * around it (packets.h's test network), and the verdict expected of the answer table. A row that
 * is answered must get what the socket path writes for the same query (ndc_dns_write_reply),
 * checked here independently of the code under test. cmocka tests: failures are cmocka's.
 */
#ifndef NDC_TEST_ANSWER_ROWS_H
#define NDC_TEST_ANSWER_ROWS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ndc/dns_wire.h>

#include "packets.h"

struct ndc_records;

#define NDC_ROW_RD 0x0100 /* the query's flags: RD, unless flags_xor clears it */

struct ndc_row {
	const char *what;
	const char *name;
	uint16_t qtype;
	uint16_t edns; /* advertised UDP size; 0: no OPT */
	uint16_t edns_flags;
	uint8_t edns_version;
	uint8_t opt_len; /* bytes of EDNS options: 12 a client cookie, 20 cookie and ECS */
	bool v6;
	bool wrong_dst;
	uint16_t dport; /* 0: 53 */
	uint16_t qclass;
	uint16_t flags_xor; /* query header flags: NDC_ROW_RD ^ this */
	struct ndc_pkt_opts o;
	void (*mutate)(uint8_t *dns, size_t *len); /* malformed queries: ndc_pkt_mut_* */
	int expect; /* the verdict (a counter of abi.h, or the test's own "not ours") */
	/*
	 * test_memo_shapes: the kernel's memo holds it once asked twice (a message of the plain
	 * shape whose table read found an entry that never expires: answered, or passed by rule)
	 */
	bool memo;
};

/* An answer with room for data, on the stack. */
union ndc_row_answer {
	struct ndc_answer a;
	uint8_t b[sizeof(struct ndc_answer) + NDC_ANSWER_DATA_MAX];
};

/* The DNS payload of a row (NDC_PKT_MAX bytes of room), mutated as the row says. */
void ndc_row_query(const struct ndc_row *r, uint8_t *dns, size_t *len);

/* The frame from the client to the node (or to another address: wrong_dst) around dns. */
void ndc_row_frame(const struct ndc_row *r, const uint8_t *dns, size_t dlen, uint8_t *frame,
		   size_t *flen);

/*
 * The socket path's reply to the query dns: the answer src (or, when NULL, what the record table
 * rec answers), TTLs lowered by age, within the client's UDP limit. Returns its length.
 */
size_t ndc_row_socket_reply(const struct ndc_records *rec, const uint8_t *dns, size_t len,
			    const struct ndc_answer *src, uint32_t age, uint8_t *out);

/*
 * The frame out answers the query frame in (addresses and ports swapped, TTL 64, checksums
 * right, no padding) and carries exactly want. what names the row in a failure.
 */
void ndc_row_assert_reply(const char *what, const uint8_t *in, size_t inlen, const uint8_t *out,
			  size_t outlen, const uint8_t *want, size_t wlen);

/* n A records at lname (192.0.2.1, .2, ...) with TTLs ttl, ttl + 1, ..., as the cache holds them.
 */
void ndc_row_a_records(struct ndc_answer *a, const uint8_t *lname, size_t nlen, int n,
		       uint32_t ttl);

/* CLOCK_MONOTONIC in ns: the clock of the tables' expiry. */
uint64_t ndc_row_mono_ns(void);

#endif
