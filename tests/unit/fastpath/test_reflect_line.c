// SPDX-License-Identifier: MIT
/*
 * The load reflector's line (tests/bench/bpf/ndc_reflect_line.h) spreads the latency benchmark's
 * names over its table as a random choice would: the benchmark reads a table load's cost from it,
 * and a hash that folds many names onto few lines measures a cache hit instead (the first version
 * put the 10,000 names on 988 of 32,768 lines; the last test below shows that such a hash fails
 * here).
 *
 * The names are the benchmark's (tests/bench/gen_cluster.py, 100 namespaces): kubernetes.default
 * and svc-NNNNN.<ns>.svc.cluster.local, ns "default" or ns-NNN by the service's number modulo 100;
 * each question as the reflector reads it: the name in wire form, then type A and class IN.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ndc/dns_wire.h>

#include "../../bench/bpf/ndc_reflect_line.h"

#define N_NAMES 10000
#define N_NS 100

/* The question of the benchmark's name i, zero-padded, as words. */
static void question(unsigned i, __u64 w[NDC_REFLECT_KEY_WORDS])
{
	uint8_t q[NDC_NAME_MAX + 4 + 8 * NDC_REFLECT_KEY_WORDS] = {0};
	char ns[16], text[128];
	size_t len;

	if (i == 0) {
		snprintf(text, sizeof(text), "kubernetes.default.svc.cluster.local");
	} else {
		if (i % N_NS)
			snprintf(ns, sizeof(ns), "ns-%03u", i % N_NS);
		else
			snprintf(ns, sizeof(ns), "default");
		snprintf(text, sizeof(text), "svc-%05u.%s.svc.cluster.local", i, ns);
	}
	assert_int_equal(ndc_name_from_text(text, q, NDC_NAME_MAX, &len), 0);
	memcpy(q + len, "\0\1\0\1", 4); /* A, IN */
	memcpy(w, q, 8 * NDC_REFLECT_KEY_WORDS);
}

/* Distinct lines of lines the names fall on, by line(). */
static unsigned distinct(__u32 lines, __u32 (*line)(const __u64 *w, __u32 lines))
{
	uint8_t *seen = calloc(lines, 1);
	unsigned n = 0;
	__u64 w[NDC_REFLECT_KEY_WORDS];

	assert_non_null(seen);
	for (unsigned i = 0; i < N_NAMES; i++) {
		question(i, w);
		__u32 l = line(w, lines);

		assert_true(l < lines);
		n += !seen[l];
		seen[l] = 1;
	}
	free(seen);
	return n;
}

/* What N_NAMES random choices of lines give, on average. */
static double expected(__u32 lines)
{
	return lines * (1.0 - pow(1.0 - 1.0 / lines, N_NAMES));
}

static __u32 reflector_line(const __u64 *w, __u32 lines)
{
	return ndc_reflect_line(ndc_reflect_hash(w), lines);
}

/* The first version: bits 40 and up of the multiply chain, no finish. */
static __u32 unfinished_line(const __u64 *w, __u32 lines)
{
	__u64 h = 0x9e3779b97f4a7c15ULL;

	for (int i = 0; i < NDC_REFLECT_KEY_WORDS; i++)
		h = (h ^ w[i]) * 0xff51afd7ed558ccdULL;
	return (__u32)(h >> 40) & (lines - 1);
}

/* Each table size the benchmark and its experiments use: within 2% of a random choice. */
static void test_spread(void **state)
{
	static const __u32 sizes[] = {32768, 65536, 131072, 524288};

	(void)state;
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		unsigned n = distinct(sizes[k], reflector_line);
		double e = expected(sizes[k]);

		print_message("%u lines: %u distinct (random: %.0f)\n", sizes[k], n, e);
		assert_true(n >= 0.98 * e);
	}
}

/* The tag word's index (NDC_REFLECT_TAGS, from the hash's high half). */
static __u32 tag_line(const __u64 *w, __u32 lines)
{
	return ndc_reflect_line(ndc_reflect_hash(w) >> 32, lines);
}

/* The tag word's index spreads too. */
static void test_spread_tags(void **state)
{
	(void)state;
	assert_true(distinct(1024, tag_line) >= 0.98 * expected(1024));
}

/* The check above fails the first version's hash: it is a test that can fail. */
static void test_unfinished_fails(void **state)
{
	unsigned n = distinct(32768, unfinished_line);

	(void)state;
	print_message("unfinished: %u distinct of 32768 (random: %.0f)\n", n, expected(32768));
	assert_true(n < 0.98 * expected(32768));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_spread),
	    cmocka_unit_test(test_spread_tags),
	    cmocka_unit_test(test_unfinished_fails),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
