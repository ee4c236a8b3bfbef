// SPDX-License-Identifier: MIT
/*
 * The fast path's conversions (no privileges needed): key layout and the name hash, value counts
 * and flags, the TTL offsets the kernel counts down (checked against the TTLs the builder wrote),
 * and the limits and malformed-data errors.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ndc/abi.h>
#include <ndc/dns_wire.h>

#include "fastpath/fastpath.h"

#define A_CAP 4096
#define NOW 1000000000000ull /* 1000 s of uptime */

/* struct ndc_answer followed by its data (a flexible array cannot be a struct member in C) */
struct answer_buf {
	union {
		struct ndc_answer a;
		uint8_t mem[sizeof(struct ndc_answer) + A_CAP];
	};
};

static size_t wire(const char *text, uint8_t *out)
{
	size_t len;

	assert_int_equal(ndc_name_from_text(text, out, NDC_NAME_MAX, &len), 0);
	return len;
}

static const uint8_t ip1[4] = {10, 96, 0, 1}, ip2[4] = {10, 96, 0, 2};

static void test_key(void **state)
{
	uint8_t n[NDC_NAME_MAX];
	size_t nlen = wire("kubernetes.default.svc.cluster.local", n);
	struct ndc_fp_key k;

	(void)state;
	memset(&k, 0xaa, sizeof(k));
	assert_int_equal(ndc_fastpath_key(n, nlen, NDC_T_AAAA, &k), 0);
	assert_int_equal(k.hash, ndc_fp_name_hash(n, (uint32_t)nlen));
	assert_int_equal(k.qtype, NDC_T_AAAA);
	assert_int_equal(k.name_len, nlen);
	for (size_t i = 0; i < sizeof(k.pad); i++)
		assert_int_equal(k.pad[i], 0);

	assert_int_equal(ndc_fastpath_key(n, nlen, NDC_FP_QTYPE_OTHER, &k), 0);
	assert_int_equal(k.qtype, 0);
	assert_int_equal(k.hash, ndc_fp_name_hash(n, (uint32_t)nlen));
}

static void test_key_length(void **state)
{
	uint8_t n[NDC_NAME_MAX];
	struct ndc_fp_key k;

	(void)state;
	memset(n, 1, sizeof(n));
	assert_int_equal(ndc_fastpath_key(n, NDC_FP_NAME_MAX, NDC_T_A, &k), 0);
	assert_int_equal(k.name_len, NDC_FP_NAME_MAX);
	assert_int_equal(ndc_fastpath_key(n, NDC_FP_NAME_MAX + 1, NDC_T_A, &k), -ENAMETOOLONG);
	assert_int_equal(ndc_fastpath_key(n, 0, NDC_T_A, &k), -EINVAL);
}

/*
 * The hash is part of the ABI: the BPF program computes it too. Pinned values, worked out by hand
 * from the definition in abi.h (little-endian words, multiply, xorshift) independently of the C.
 */
static void test_hash_pinned(void **state)
{
	uint8_t n[NDC_NAME_MAX];
	size_t nlen = wire("kubernetes.default.svc.cluster.local", n);
	const uint8_t root = 0;

	(void)state;
	assert_int_equal(nlen, 38);
	assert_int_equal(ndc_fp_name_hash(n, (uint32_t)nlen), 0x1c06b536277aa93dull);
	assert_int_equal(ndc_fp_name_hash(&root, 1), 0x69c53c07235124b6ull);
}

/* Bytes past the name never count: the kernel zeroes them in its last word. */
static void test_hash_tail(void **state)
{
	uint8_t a[NDC_FP_NAME_MAX + 8], b[NDC_FP_NAME_MAX + 8];

	(void)state;
	for (size_t i = 0; i < sizeof(a); i++)
		a[i] = (uint8_t)(i * 7 + 1);
	for (uint32_t len = 1; len <= NDC_FP_NAME_MAX; len++) {
		memset(b, 0, sizeof(b));
		memcpy(b, a, len);
		memset(b + len, 0xff, sizeof(b) - len);
		assert_int_equal(ndc_fp_name_hash(a, len), ndc_fp_name_hash(b, len));
	}
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

	return a < b ? -1 : a > b;
}

/*
 * No two of many close names share a hash: every single-byte change of a name at every position
 * (which abi.h says can never collide), and a generated cluster's worth of service names.
 */
static void test_hash_distinct(void **state)
{
	enum { N_SVC = 20000, N_BYTE = 38 * 255 + 1 };
	static uint64_t h[N_SVC > N_BYTE ? N_SVC : N_BYTE];
	uint8_t n[NDC_NAME_MAX], m[NDC_NAME_MAX];
	size_t nlen = wire("kubernetes.default.svc.cluster.local", n), k = 0;
	char text[NDC_NAME_MAX];

	(void)state;
	h[k++] = ndc_fp_name_hash(n, (uint32_t)nlen);
	for (size_t pos = 0; pos < nlen; pos++) {
		for (unsigned int v = 0; v < 256; v++) {
			if (v == n[pos])
				continue;
			memcpy(m, n, nlen);
			m[pos] = (uint8_t)v;
			h[k++] = ndc_fp_name_hash(m, (uint32_t)nlen);
		}
	}
	assert_int_equal(k, N_BYTE);
	qsort(h, k, sizeof(h[0]), cmp_u64);
	for (size_t i = 1; i < k; i++)
		assert_true(h[i] != h[i - 1]);

	k = 0;
	for (int i = 0; i < N_SVC; i++) {
		snprintf(text, sizeof(text), "svc-%d.ns-%d.svc.cluster.local", i % 1000, i / 1000);
		nlen = wire(text, m);
		h[k++] = ndc_fp_name_hash(m, (uint32_t)nlen);
	}
	qsort(h, k, sizeof(h[0]), cmp_u64);
	for (size_t i = 1; i < k; i++)
		assert_true(h[i] != h[i - 1]);
}

/* Two A RRs at the question name: owner is a pointer to offset 12 (2 bytes). */
static void build_two_a(struct answer_buf *ab, uint32_t ttl1, uint32_t ttl2)
{
	uint8_t q[NDC_NAME_MAX];
	size_t qlen = wire("web.prod.svc.cluster.local", q);
	struct ndc_ab b;

	ndc_ab_init(&b, &ab->a, A_CAP, q, qlen);
	ndc_ab_rr(&b, NDC_SEC_ANSWER, q, qlen, NDC_T_A, NDC_C_IN, ttl1, ip1, 4);
	ndc_ab_rr(&b, NDC_SEC_ANSWER, q, qlen, NDC_T_A, NDC_C_IN, ttl2, ip2, 4);
	assert_int_equal(ndc_ab_finish(&b, NDC_RCODE_NOERROR, true), 0);
}

static void test_value_cluster(void **state)
{
	struct answer_buf ab;
	struct ndc_fp_value v;

	(void)state;
	build_two_a(&ab, 5, 5);
	memset(&v, 0xaa, sizeof(v));
	assert_int_equal(ndc_fastpath_value(&ab.a, 0, NOW, &v), 0);
	assert_int_equal(v.ancount, 2);
	assert_int_equal(v.nscount, 0);
	assert_int_equal(v.arcount, 0);
	assert_int_equal(v.rcode, 0);
	assert_int_equal(v.flags, NDC_FP_V_AA);
	assert_int_equal(v.len, ab.a.len);
	assert_int_equal(v.len, 2 * 16);
	assert_memory_equal(v.data, ab.a.data, ab.a.len);
	/* never expires, TTLs fixed */
	assert_int_equal(v.expire_ns, 0);
	assert_int_equal(v.insert_ns, 0);
	assert_int_equal(v.n_ttl, 0);
	assert_int_equal(v.pad2, 0);
	/* the name is the publisher's to fill in: the conversion does not know it */
	assert_int_equal(v.name_len, 0);
	for (size_t i = 0; i < NDC_FP_NAME_MAX; i++)
		assert_int_equal(v.name[i], 0);
	for (size_t i = v.len; i < NDC_FP_DATA_MAX; i++)
		assert_int_equal(v.data[i], 0);
}

static void test_value_ttl_offsets(void **state)
{
	struct answer_buf ab;
	struct ndc_fp_value v;

	(void)state;
	build_two_a(&ab, 300, 120);
	assert_int_equal(ndc_fastpath_value(&ab.a, 120, NOW, &v), 0);
	assert_int_equal(v.insert_ns, NOW);
	assert_int_equal(v.expire_ns, NOW + 120ull * 1000000000ull);
	assert_int_equal(v.n_ttl, 2);
	/* pointer (2) + type + class, then TTL; the second RR starts at 16 */
	assert_int_equal(v.ttl_off[0], 6);
	assert_int_equal(v.ttl_off[1], 22);
	assert_int_equal(ndc_get32(v.data + v.ttl_off[0]), 300);
	assert_int_equal(ndc_get32(v.data + v.ttl_off[1]), 120);
	for (int i = 2; i < NDC_FP_TTL_MAX; i++)
		assert_int_equal(v.ttl_off[i], 0);
}

/* CNAME chain, SOA in authority and an additional A, with distinct TTLs to find each RR by. */
static void test_value_sections(void **state)
{
	uint8_t q[NDC_NAME_MAX], t[NDC_NAME_MAX], z[NDC_NAME_MAX], ns[NDC_NAME_MAX];
	uint8_t rd[2 * NDC_NAME_MAX + 20];
	size_t qlen = wire("www.example.com", q), tlen = wire("cdn.example.net", t);
	size_t zlen = wire("example.net", z), nslen = wire("ns1.example.org", ns);
	static const uint32_t ttls[] = {3600, 60, 900, 30};
	struct answer_buf ab;
	struct ndc_fp_value v;
	struct ndc_ab b;
	size_t rdlen;

	(void)state;
	ndc_ab_init(&b, &ab.a, A_CAP, q, qlen);
	ndc_ab_rr(&b, NDC_SEC_ANSWER, q, qlen, NDC_T_CNAME, NDC_C_IN, ttls[0], t, tlen);
	ndc_ab_rr(&b, NDC_SEC_ANSWER, t, tlen, NDC_T_A, NDC_C_IN, ttls[1], ip1, 4);
	/* SOA: mname, rname, serial, refresh, retry, expire, minimum */
	memcpy(rd, ns, nslen);
	memcpy(rd + nslen, z, zlen);
	memset(rd + nslen + zlen, 0, 20);
	rdlen = nslen + zlen + 20;
	ndc_ab_rr(&b, NDC_SEC_AUTHORITY, z, zlen, NDC_T_SOA, NDC_C_IN, ttls[2], rd, rdlen);
	ndc_ab_rr(&b, NDC_SEC_ADDITIONAL, ns, nslen, NDC_T_A, NDC_C_IN, ttls[3], ip2, 4);
	assert_int_equal(ndc_ab_finish(&b, NDC_RCODE_NOERROR, false), 0);

	assert_int_equal(ndc_fastpath_value(&ab.a, 30, NOW, &v), 0);
	assert_int_equal(v.ancount, 2);
	assert_int_equal(v.nscount, 1);
	assert_int_equal(v.arcount, 1);
	assert_int_equal(v.flags, 0);
	assert_int_equal(v.n_ttl, 4);
	/* the first owner is the question: a pointer, so its TTL sits at 2 + 4 */
	assert_int_equal(v.ttl_off[0], 6);
	for (int i = 0; i < 4; i++) {
		assert_true(v.ttl_off[i] + 6u <= v.len);
		assert_int_equal(ndc_get32(v.data + v.ttl_off[i]), ttls[i]);
		/* the class field right before each TTL */
		assert_int_equal(ndc_get16(v.data + v.ttl_off[i] - 2), NDC_C_IN);
	}
	assert_true(v.ttl_off[1] > v.ttl_off[0] && v.ttl_off[2] > v.ttl_off[1] &&
		    v.ttl_off[3] > v.ttl_off[2]);
}

static void test_value_nxdomain(void **state)
{
	uint8_t q[NDC_NAME_MAX], z[NDC_NAME_MAX], rd[NDC_NAME_MAX * 2 + 20];
	size_t qlen = wire("nope.default.svc.cluster.local", q), zlen = wire("cluster.local", z);
	struct answer_buf ab;
	struct ndc_fp_value v;
	struct ndc_ab b;

	(void)state;
	memcpy(rd, z, zlen);
	memcpy(rd + zlen, z, zlen);
	memset(rd + 2 * zlen, 0, 20);
	ndc_ab_init(&b, &ab.a, A_CAP, q, qlen);
	ndc_ab_rr(&b, NDC_SEC_AUTHORITY, z, zlen, NDC_T_SOA, NDC_C_IN, 5, rd, 2 * zlen + 20);
	assert_int_equal(ndc_ab_finish(&b, NDC_RCODE_NXDOMAIN, true), 0);
	assert_int_equal(ndc_fastpath_value(&ab.a, 0, NOW, &v), 0);
	assert_int_equal(v.rcode, NDC_RCODE_NXDOMAIN);
	assert_int_equal(v.flags, NDC_FP_V_AA);
	assert_int_equal(v.ancount, 0);
	assert_int_equal(v.nscount, 1);
	/* cached negative answer: its SOA TTL counts down too */
	assert_int_equal(ndc_fastpath_value(&ab.a, 5, NOW, &v), 0);
	assert_int_equal(v.n_ttl, 1);
	assert_int_equal(ndc_get32(v.data + v.ttl_off[0]), 5);
}

static void test_value_too_many_rrs(void **state)
{
	uint8_t q[NDC_NAME_MAX];
	size_t qlen = wire("many.example.com", q);
	struct answer_buf ab;
	struct ndc_fp_value v;
	struct ndc_ab b;
	uint8_t ip[4] = {192, 0, 2, 0};

	(void)state;
	ndc_ab_init(&b, &ab.a, A_CAP, q, qlen);
	for (int i = 0; i < NDC_FP_TTL_MAX; i++) {
		ip[3] = (uint8_t)i;
		ndc_ab_rr(&b, NDC_SEC_ANSWER, q, qlen, NDC_T_A, NDC_C_IN, 60, ip, 4);
	}
	assert_int_equal(ndc_ab_finish(&b, NDC_RCODE_NOERROR, false), 0);
	/* exactly the limit */
	assert_int_equal(ndc_fastpath_value(&ab.a, 60, NOW, &v), 0);
	assert_int_equal(v.n_ttl, NDC_FP_TTL_MAX);
	assert_int_equal(v.ttl_off[NDC_FP_TTL_MAX - 1], (NDC_FP_TTL_MAX - 1) * 16 + 6);

	ndc_ab_rr(&b, NDC_SEC_ANSWER, q, qlen, NDC_T_A, NDC_C_IN, 60, ip1, 4);
	assert_int_equal(ndc_ab_finish(&b, NDC_RCODE_NOERROR, false), 0);
	assert_int_equal(ab.a.ancount, NDC_FP_TTL_MAX + 1);
	assert_int_equal(ndc_fastpath_value(&ab.a, 60, NOW, &v), -E2BIG);
	/* cluster records: no offsets needed, so no limit on RRs */
	assert_int_equal(ndc_fastpath_value(&ab.a, 0, NOW, &v), 0);
	assert_int_equal(v.ancount, NDC_FP_TTL_MAX + 1);
}

static void test_value_too_big(void **state)
{
	uint8_t q[NDC_NAME_MAX], txt[256];
	size_t qlen = wire("big.example.com", q);
	struct answer_buf ab;
	struct ndc_fp_value v;
	struct ndc_ab b;

	(void)state;
	memset(txt, 'x', sizeof(txt));
	txt[0] = 255;
	ndc_ab_init(&b, &ab.a, A_CAP, q, qlen);
	ndc_ab_rr(&b, NDC_SEC_ANSWER, q, qlen, NDC_T_TXT, NDC_C_IN, 60, txt, sizeof(txt));
	ndc_ab_rr(&b, NDC_SEC_ANSWER, q, qlen, NDC_T_TXT, NDC_C_IN, 60, txt, sizeof(txt) - 10);
	assert_int_equal(ndc_ab_finish(&b, NDC_RCODE_NOERROR, false), 0);
	/* 2 * 12 + 256 + 246 = 526 */
	assert_true(ab.a.len > NDC_FP_DATA_MAX);
	assert_int_equal(ndc_fastpath_value(&ab.a, 60, NOW, &v), -E2BIG);
	assert_int_equal(ndc_fastpath_value(&ab.a, 0, NOW, &v), -E2BIG);
}

/* Hand-made data: counts and bytes disagree, bad labels, overruns. */
static void expect_malformed(const uint8_t *data, size_t len, uint16_t ancount)
{
	struct answer_buf ab;
	struct ndc_fp_value v;

	memset(&ab.a, 0, sizeof(ab.a));
	ab.a.ancount = ancount;
	ab.a.len = (uint16_t)len;
	memcpy(ab.a.data, data, len);
	assert_int_equal(ndc_fastpath_value(&ab.a, 60, NOW, &v), -EINVAL);
}

static void test_value_malformed(void **state)
{
	/* one A RR at the question */
	static const uint8_t rr[] = {0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 10, 0, 0, 1};
	uint8_t buf[64];
	struct answer_buf ab;
	struct ndc_fp_value v;

	(void)state;
	/* the reference: well-formed */
	memset(&ab.a, 0, sizeof(ab.a));
	ab.a.ancount = 1;
	ab.a.len = sizeof(rr);
	memcpy(ab.a.data, rr, sizeof(rr));
	assert_int_equal(ndc_fastpath_value(&ab.a, 60, NOW, &v), 0);
	assert_int_equal(v.ttl_off[0], 6);

	expect_malformed(rr, sizeof(rr), 2);	 /* fewer RRs than counted */
	expect_malformed(rr, sizeof(rr) - 1, 1); /* RDATA cut */
	expect_malformed(rr, 8, 1);		 /* fixed part cut */
	expect_malformed(rr, 1, 1);		 /* pointer cut */
	memcpy(buf, rr, sizeof(rr));
	buf[sizeof(rr)] = 0;
	expect_malformed(buf, sizeof(rr) + 1, 1); /* trailing byte */
	memcpy(buf, rr, sizeof(rr));
	buf[0] = 0x40; /* extended label type */
	expect_malformed(buf, sizeof(rr), 1);
	/* an uncompressed owner whose label runs past the end */
	static const uint8_t cut_label[] = {5, 'a', 'b'};
	expect_malformed(cut_label, sizeof(cut_label), 1);
	/* no data at all */
	expect_malformed(buf, 0, 1);
	/* a name longer than 255 bytes (RFC 1035 2.3.4), even though the bytes are there */
	uint8_t longname[5 * 64 + 1 + 10];
	for (int i = 0; i < 5; i++) {
		longname[i * 64] = 63;
		memset(longname + i * 64 + 1, 'a', 63);
	}
	memset(longname + 5 * 64, 0, 11);
	expect_malformed(longname, sizeof(longname), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_key),
	    cmocka_unit_test(test_key_length),
	    cmocka_unit_test(test_hash_pinned),
	    cmocka_unit_test(test_hash_tail),
	    cmocka_unit_test(test_hash_distinct),
	    cmocka_unit_test(test_value_cluster),
	    cmocka_unit_test(test_value_ttl_offsets),
	    cmocka_unit_test(test_value_sections),
	    cmocka_unit_test(test_value_nxdomain),
	    cmocka_unit_test(test_value_too_many_rrs),
	    cmocka_unit_test(test_value_too_big),
	    cmocka_unit_test(test_value_malformed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
