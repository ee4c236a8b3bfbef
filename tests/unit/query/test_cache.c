// SPDX-License-Identifier: MIT
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "query/query.h"

/*
 * Answers whose data the cache can walk (it caps their TTLs), filled with a recognisable pattern:
 * ancount RRs with the root as owner, type TXT, TTL 300, the last one's RDATA taking the rest of
 * len bytes.
 */
struct test_answer {
	struct ndc_answer a;
	uint8_t data[NDC_ANSWER_DATA_MAX + 16];
};

#define T0 1000000  /* an arbitrary "now" in ms: the cache must only use what it is given */
#define RR_FIXED 11 /* root owner, TYPE, CLASS, TTL, RDLENGTH */

static void make_answer(struct test_answer *t, uint8_t rcode, uint16_t ancount, uint16_t len,
			uint8_t fill)
{
	size_t pos = 0;

	memset(t, 0, sizeof(*t));
	t->a.rcode = rcode;
	t->a.ancount = ancount;
	t->a.qname_len = 13;
	t->a.len = len;
	t->a.min_ttl = ancount ? 300 : 0;
	for (uint16_t i = 0; i < len; i++)
		t->a.data[i] = (uint8_t)(fill + i);
	assert_true(len >= (size_t)ancount * RR_FIXED);
	for (uint16_t i = 0; i < ancount; i++) {
		size_t rdlen = i + 1 < ancount ? 0 : len - pos - RR_FIXED;
		uint8_t *p = t->a.data + pos;

		p[0] = 0;
		p[1] = 0, p[2] = 16; /* TXT */
		p[3] = 0, p[4] = 1;  /* IN */
		p[5] = 0, p[6] = 0, p[7] = 300 >> 8, p[8] = 300 & 0xff;
		p[9] = (uint8_t)(rdlen >> 8), p[10] = (uint8_t)rdlen;
		pos += RR_FIXED + rdlen;
	}
}

/* Wire name "<label>.test." from a short text label. */
static size_t make_name(uint8_t *out, const char *label)
{
	size_t l = strlen(label);

	out[0] = (uint8_t)l;
	memcpy(out + 1, label, l);
	memcpy(out + 1 + l, "\4test", 6);
	return l + 7;
}

static struct ndc_cache *new_cache(uint32_t entries, uint64_t bytes, uint32_t max_ttl,
				   uint32_t neg_max_ttl, uint32_t stale_max)
{
	struct ndc_cache_opts o = {
	    .max_entries = entries,
	    .max_bytes = bytes,
	    .max_ttl = max_ttl,
	    .neg_max_ttl = neg_max_ttl,
	    .stale_max = stale_max,
	};
	struct ndc_cache *c = NULL;

	assert_int_equal(ndc_cache_new(&o, &c), 0);
	assert_non_null(c);
	return c;
}

static int get(struct ndc_cache *c, const char *label, uint16_t qtype, uint64_t now,
	       bool allow_stale, struct test_answer *out, uint32_t *age)
{
	uint8_t n[64];
	size_t nl = make_name(n, label);

	return ndc_cache_get(c, n, nl, qtype, NDC_C_IN, now, allow_stale, &out->a,
			     sizeof(out->data), age);
}

static int put(struct ndc_cache *c, const char *label, uint16_t qtype, const struct test_answer *a,
	       uint32_t ttl, uint64_t now)
{
	uint8_t n[64];
	size_t nl = make_name(n, label);

	return ndc_cache_put(c, n, nl, qtype, NDC_C_IN, &a->a, ttl, now);
}

static void test_new_invalid(void **state)
{
	struct ndc_cache_opts o = {.max_entries = 0, .max_bytes = 1000};
	struct ndc_cache *c = NULL;

	(void)state;
	assert_int_equal(ndc_cache_new(&o, &c), -EINVAL);
	o.max_entries = 10;
	o.max_bytes = 0;
	assert_int_equal(ndc_cache_new(&o, &c), -EINVAL);
	assert_null(c);
}

static void test_put_get(void **state)
{
	struct ndc_cache *c = new_cache(1000, 1 << 20, 3600, 600, 0);
	struct test_answer a, out;
	struct ndc_cache_stats st;
	uint32_t age = 99;

	(void)state;
	make_answer(&a, NDC_RCODE_NOERROR, 2, 100, 7);
	a.a.aa = 1;
	assert_int_equal(put(c, "www", NDC_T_A, &a, 300, T0), 0);
	memset(&out, 0xee, sizeof(out));
	assert_int_equal(get(c, "www", NDC_T_A, T0, false, &out, &age), 0);
	assert_int_equal(age, 0);
	assert_memory_equal(&out.a, &a.a, ndc_answer_size(&a.a));
	assert_int_equal(out.a.aa, 1);
	assert_int_equal(out.a.ancount, 2);

	/* Other type, other class, other name: different keys. */
	assert_int_equal(get(c, "www", NDC_T_AAAA, T0, false, &out, &age), -ENOENT);
	assert_int_equal(get(c, "wwx", NDC_T_A, T0, false, &out, &age), -ENOENT);
	{
		uint8_t n[64];
		size_t nl = make_name(n, "www");

		assert_int_equal(
		    ndc_cache_get(c, n, nl, NDC_T_A, 3, T0, false, &out.a, sizeof(out.data), &age),
		    -ENOENT);
	}

	ndc_cache_stats(c, &st);
	assert_int_equal(st.hits, 1);
	assert_int_equal(st.misses, 3);
	assert_int_equal(st.inserts, 1);
	assert_int_equal(st.entries, 1);
	assert_true(st.bytes >= 100 + 9);
	ndc_cache_free(c);
}

/* The key is the bytes the caller passes: lowercasing is the caller's job (lname). */
static void test_key_case(void **state)
{
	struct ndc_cache *c = new_cache(1000, 1 << 20, 3600, 600, 0);
	struct test_answer a, out;
	uint32_t age;

	(void)state;
	make_answer(&a, NDC_RCODE_NOERROR, 1, 12, 1);
	assert_int_equal(put(c, "www", NDC_T_A, &a, 300, T0), 0);
	assert_int_equal(get(c, "WwW", NDC_T_A, T0, false, &out, &age), -ENOENT);
	assert_int_equal(get(c, "www", NDC_T_A, T0, false, &out, &age), 0);
	ndc_cache_free(c);
}

static void test_replace(void **state)
{
	struct ndc_cache *c = new_cache(1000, 1 << 20, 3600, 600, 0);
	struct test_answer a, b, out;
	struct ndc_cache_stats st;
	uint32_t age;

	(void)state;
	make_answer(&a, NDC_RCODE_NOERROR, 1, 12, 1);
	make_answer(&b, NDC_RCODE_NOERROR, 3, 50, 9);
	assert_int_equal(put(c, "www", NDC_T_A, &a, 300, T0), 0);
	assert_int_equal(put(c, "www", NDC_T_A, &b, 300, T0 + 5000), 0);
	assert_int_equal(get(c, "www", NDC_T_A, T0 + 6000, false, &out, &age), 0);
	assert_memory_equal(&out.a, &b.a, ndc_answer_size(&b.a));
	assert_int_equal(age, 1);
	ndc_cache_stats(c, &st);
	assert_int_equal(st.entries, 1);
	ndc_cache_free(c);
}

static void test_age(void **state)
{
	struct ndc_cache *c = new_cache(1000, 1 << 20, 3600, 600, 0);
	struct test_answer a, out;
	uint32_t age = 99;

	(void)state;
	make_answer(&a, NDC_RCODE_NOERROR, 1, 12, 1);
	assert_int_equal(put(c, "www", NDC_T_A, &a, 300, T0), 0);
	assert_int_equal(get(c, "www", NDC_T_A, T0 + 999, false, &out, &age), 0);
	assert_int_equal(age, 0);
	assert_int_equal(get(c, "www", NDC_T_A, T0 + 1000, false, &out, &age), 0);
	assert_int_equal(age, 1);
	assert_int_equal(get(c, "www", NDC_T_A, T0 + 2999, false, &out, &age), 0);
	assert_int_equal(age, 2);
	assert_int_equal(get(c, "www", NDC_T_A, T0 + 299999, false, &out, &age), 0);
	assert_int_equal(age, 299);
	/* A clock reading before the store (another thread's older now_ms) is age 0, not a wrap. */
	assert_int_equal(get(c, "www", NDC_T_A, T0 - 5, false, &out, &age), 0);
	assert_int_equal(age, 0);
	ndc_cache_free(c);
}

static void test_expiry_and_stale(void **state)
{
	struct ndc_cache *c = new_cache(1000, 1 << 20, 3600, 600, 60);
	struct test_answer a, out;
	struct ndc_cache_stats st;
	uint32_t age;

	(void)state;
	make_answer(&a, NDC_RCODE_NOERROR, 1, 20, 3);
	assert_int_equal(put(c, "www", NDC_T_A, &a, 10, T0), 0);
	assert_int_equal(get(c, "www", NDC_T_A, T0 + 9999, false, &out, &age), 0);
	assert_int_equal(age, 9);
	assert_int_equal(get(c, "www", NDC_T_A, T0 + 10000, false, &out, &age), -ENOENT);
	memset(&out, 0, sizeof(out));
	assert_int_equal(get(c, "www", NDC_T_A, T0 + 10000, true, &out, &age), -ESTALE);
	assert_memory_equal(&out.a, &a.a, ndc_answer_size(&a.a));
	assert_int_equal(age, 10);
	assert_int_equal(get(c, "www", NDC_T_A, T0 + 69999, true, &out, &age), -ESTALE);
	/* stale_max past expiry: gone, and removed on the way. */
	assert_int_equal(get(c, "www", NDC_T_A, T0 + 70000, true, &out, &age), -ENOENT);
	ndc_cache_stats(c, &st);
	assert_int_equal(st.hits, 1);
	assert_int_equal(st.stale_hits, 2);
	assert_int_equal(st.misses, 2);
	assert_int_equal(st.entries, 0);
	assert_int_equal(st.bytes, 0);
	ndc_cache_free(c);
}

static void test_no_stale_window(void **state)
{
	struct ndc_cache *c = new_cache(1000, 1 << 20, 3600, 600, 0);
	struct test_answer a, out;
	uint32_t age;

	(void)state;
	make_answer(&a, NDC_RCODE_NOERROR, 1, 20, 3);
	assert_int_equal(put(c, "www", NDC_T_A, &a, 10, T0), 0);
	assert_int_equal(get(c, "www", NDC_T_A, T0 + 10000, true, &out, &age), -ENOENT);
	ndc_cache_free(c);
}

static void test_ttl_caps(void **state)
{
	struct ndc_cache *c = new_cache(1000, 1 << 20, 50, 5, 0);
	struct test_answer pos, nx, nodata, out;
	struct ndc_cache_stats st;
	uint32_t age;

	(void)state;
	make_answer(&pos, NDC_RCODE_NOERROR, 1, 20, 1);
	make_answer(&nx, NDC_RCODE_NXDOMAIN, 0, 20, 2);
	make_answer(&nodata, NDC_RCODE_NOERROR, 0, 20, 3);
	assert_int_equal(put(c, "pos", NDC_T_A, &pos, 100, T0), 0);
	assert_int_equal(put(c, "nx", NDC_T_A, &nx, 100, T0), 0);
	assert_int_equal(put(c, "nodata", NDC_T_A, &nodata, 100, T0), 0);
	/* Below the caps a TTL is kept as given. */
	assert_int_equal(put(c, "short", NDC_T_A, &nx, 2, T0), 0);

	/* What is served says no more than the cap: the RRs' TTL of 300 became 50. */
	assert_int_equal(get(c, "pos", NDC_T_A, T0, false, &out, &age), 0);
	assert_int_equal(ndc_get32(out.a.data + 5), 50);
	assert_int_equal(out.a.min_ttl, 50);
	assert_int_equal(get(c, "pos", NDC_T_A, T0 + 49999, false, &out, &age), 0);
	assert_int_equal(get(c, "pos", NDC_T_A, T0 + 50000, false, &out, &age), -ENOENT);
	assert_int_equal(get(c, "nx", NDC_T_A, T0 + 4999, false, &out, &age), 0);
	assert_int_equal(out.a.rcode, NDC_RCODE_NXDOMAIN);
	assert_int_equal(get(c, "nx", NDC_T_A, T0 + 5000, false, &out, &age), -ENOENT);
	assert_int_equal(get(c, "nodata", NDC_T_A, T0 + 4999, false, &out, &age), 0);
	assert_int_equal(get(c, "nodata", NDC_T_A, T0 + 5000, false, &out, &age), -ENOENT);
	assert_int_equal(get(c, "short", NDC_T_A, T0 + 1999, false, &out, &age), 0);
	assert_int_equal(get(c, "short", NDC_T_A, T0 + 2000, false, &out, &age), -ENOENT);

	/* A reserved or meta type is never filed: type 0 is the kernel's "any other type" key. */
	assert_int_equal(put(c, "pos", 0, &pos, 100, T0), -EINVAL);
	assert_int_equal(put(c, "pos", NDC_T_OPT, &pos, 100, T0), -EINVAL);
	assert_int_equal(put(c, "pos", 200, &pos, 100, T0), -EINVAL);
	assert_int_equal(get(c, "pos", 0, T0, true, &out, &age), -ENOENT);

	/* TTL 0 is not stored at all. */
	assert_int_equal(put(c, "zero", NDC_T_A, &pos, 0, T0), 0);
	assert_int_equal(get(c, "zero", NDC_T_A, T0, true, &out, &age), -ENOENT);
	ndc_cache_stats(c, &st);
	assert_int_equal(st.inserts, 4);
	ndc_cache_free(c);
}

static void test_entry_bound_lru(void **state)
{
	struct ndc_cache *c = new_cache(3, 1 << 20, 3600, 600, 0);
	struct test_answer a, out;
	struct ndc_cache_stats st;
	uint32_t age;

	(void)state;
	make_answer(&a, NDC_RCODE_NOERROR, 1, 20, 1);
	assert_int_equal(put(c, "a", NDC_T_A, &a, 300, T0), 0);
	assert_int_equal(put(c, "b", NDC_T_A, &a, 300, T0), 0);
	assert_int_equal(put(c, "c", NDC_T_A, &a, 300, T0), 0);
	/* Reading "a" makes "b" the least recently used. */
	assert_int_equal(get(c, "a", NDC_T_A, T0, false, &out, &age), 0);
	assert_int_equal(put(c, "d", NDC_T_A, &a, 300, T0), 0);
	assert_int_equal(get(c, "b", NDC_T_A, T0, false, &out, &age), -ENOENT);
	assert_int_equal(get(c, "a", NDC_T_A, T0, false, &out, &age), 0);
	assert_int_equal(get(c, "c", NDC_T_A, T0, false, &out, &age), 0);
	assert_int_equal(get(c, "d", NDC_T_A, T0, false, &out, &age), 0);
	ndc_cache_stats(c, &st);
	assert_int_equal(st.entries, 3);
	assert_int_equal(st.evictions, 1);
	/* Now "a" is the oldest read: it goes next. */
	assert_int_equal(put(c, "e", NDC_T_A, &a, 300, T0), 0);
	assert_int_equal(get(c, "a", NDC_T_A, T0, false, &out, &age), -ENOENT);
	assert_int_equal(get(c, "c", NDC_T_A, T0, false, &out, &age), 0);
	ndc_cache_free(c);
}

/* A dead entry (expired past stale_max) goes before a live one, even a less recent live one. */
static void test_dead_evicted_first(void **state)
{
	struct ndc_cache *c = new_cache(3, 1 << 20, 3600, 600, 10);
	struct test_answer a, out;
	uint32_t age;

	(void)state;
	make_answer(&a, NDC_RCODE_NOERROR, 1, 20, 1);
	assert_int_equal(put(c, "old", NDC_T_A, &a, 300, T0), 0);
	assert_int_equal(put(c, "dead", NDC_T_A, &a, 1, T0 + 1), 0);
	assert_int_equal(put(c, "live", NDC_T_A, &a, 300, T0 + 2), 0);
	assert_int_equal(put(c, "new", NDC_T_A, &a, 300, T0 + 20000), 0);
	assert_int_equal(get(c, "old", NDC_T_A, T0 + 20000, false, &out, &age), 0);
	assert_int_equal(get(c, "live", NDC_T_A, T0 + 20000, false, &out, &age), 0);
	assert_int_equal(get(c, "new", NDC_T_A, T0 + 20000, false, &out, &age), 0);
	assert_int_equal(get(c, "dead", NDC_T_A, T0 + 1001, true, &out, &age), -ENOENT);
	ndc_cache_free(c);
}

static void test_byte_bound_lru(void **state)
{
	struct ndc_cache *probe = new_cache(10, 1 << 20, 3600, 600, 0);
	struct test_answer a, out;
	struct ndc_cache_stats st;
	uint64_t one;
	uint32_t age;
	struct ndc_cache *c;

	(void)state;
	make_answer(&a, NDC_RCODE_NOERROR, 1, 200, 1);
	/* Bookkeeping per entry is the cache's business: measure it with one name of the same
	 * length as the names below. */
	assert_int_equal(put(probe, "x", NDC_T_A, &a, 300, T0), 0);
	ndc_cache_stats(probe, &st);
	one = st.bytes;
	assert_true(one >= 200 + 7);
	ndc_cache_free(probe);

	c = new_cache(1000, 3 * one + one / 2, 3600, 600, 0);
	assert_int_equal(put(c, "a", NDC_T_A, &a, 300, T0), 0);
	assert_int_equal(put(c, "b", NDC_T_A, &a, 300, T0), 0);
	assert_int_equal(put(c, "c", NDC_T_A, &a, 300, T0), 0);
	assert_int_equal(get(c, "a", NDC_T_A, T0, false, &out, &age), 0);
	assert_int_equal(put(c, "d", NDC_T_A, &a, 300, T0), 0);
	assert_int_equal(get(c, "b", NDC_T_A, T0, false, &out, &age), -ENOENT);
	assert_int_equal(get(c, "a", NDC_T_A, T0, false, &out, &age), 0);
	assert_int_equal(get(c, "c", NDC_T_A, T0, false, &out, &age), 0);
	assert_int_equal(get(c, "d", NDC_T_A, T0, false, &out, &age), 0);
	ndc_cache_stats(c, &st);
	assert_int_equal(st.entries, 3);
	assert_int_equal(st.bytes, 3 * one);
	assert_true(st.bytes <= 3 * one + one / 2);

	/* A bigger entry pushes out as many of the oldest as it needs. */
	{
		struct test_answer big;

		make_answer(&big, NDC_RCODE_NOERROR, 1, 200 + (uint16_t)one, 5);
		assert_int_equal(put(c, "e", NDC_T_A, &big, 300, T0), 0);
		ndc_cache_stats(c, &st);
		assert_int_equal(st.entries, 2);
		assert_true(st.bytes <= 3 * one + one / 2);
		assert_int_equal(get(c, "c", NDC_T_A, T0, false, &out, &age), -ENOENT);
		assert_int_equal(get(c, "a", NDC_T_A, T0, false, &out, &age), -ENOENT);
		assert_int_equal(get(c, "d", NDC_T_A, T0, false, &out, &age), 0);
		assert_int_equal(get(c, "e", NDC_T_A, T0, false, &out, &age), 0);
	}
	ndc_cache_free(c);
}

static void test_too_big(void **state)
{
	struct ndc_cache *c = new_cache(1000, 100, 3600, 600, 0);
	struct ndc_cache *c2 = new_cache(1000, 1 << 24, 3600, 600, 0);
	struct test_answer a, out;
	uint32_t age;

	(void)state;
	make_answer(&a, NDC_RCODE_NOERROR, 1, 200, 1);
	assert_int_equal(put(c, "a", NDC_T_A, &a, 300, T0), -E2BIG);
	assert_int_equal(get(c, "a", NDC_T_A, T0, false, &out, &age), -ENOENT);
	/* Bigger than an answer is allowed to be, whatever max_bytes says. */
	make_answer(&a, NDC_RCODE_NOERROR, 1, NDC_ANSWER_DATA_MAX + 1, 1);
	assert_int_equal(put(c2, "a", NDC_T_A, &a, 300, T0), -E2BIG);
	make_answer(&a, NDC_RCODE_NOERROR, 1, NDC_ANSWER_DATA_MAX, 1);
	assert_int_equal(put(c2, "a", NDC_T_A, &a, 300, T0), 0);
	assert_int_equal(get(c2, "a", NDC_T_A, T0, false, &out, &age), 0);
	assert_int_equal(out.a.len, NDC_ANSWER_DATA_MAX);
	ndc_cache_free(c);
	ndc_cache_free(c2);
}

static void test_out_too_small(void **state)
{
	struct ndc_cache *c = new_cache(1000, 1 << 20, 3600, 600, 60);
	struct test_answer a;
	struct {
		struct ndc_answer a;
		uint8_t data[16];
	} small;
	uint8_t n[64];
	size_t nl = make_name(n, "a");
	uint32_t age;

	(void)state;
	make_answer(&a, NDC_RCODE_NOERROR, 1, 17, 1);
	assert_int_equal(put(c, "a", NDC_T_A, &a, 300, T0), 0);
	assert_int_equal(ndc_cache_get(c, n, nl, NDC_T_A, NDC_C_IN, T0, false, &small.a,
				       sizeof(small.data), &age),
			 -ENOSPC);
	assert_int_equal(ndc_cache_get(c, n, nl, NDC_T_A, NDC_C_IN, T0 + 310000, true, &small.a,
				       sizeof(small.data), &age),
			 -ENOSPC);
	make_answer(&a, NDC_RCODE_NOERROR, 1, 16, 1);
	assert_int_equal(put(c, "a", NDC_T_A, &a, 300, T0), 0);
	assert_int_equal(ndc_cache_get(c, n, nl, NDC_T_A, NDC_C_IN, T0, false, &small.a,
				       sizeof(small.data), &age),
			 0);
	assert_memory_equal(small.data, a.a.data, 16);
	ndc_cache_free(c);
}

#define CONC_NAMES 8000
#define CONC_ITERS 40000

struct conc_arg {
	struct ndc_cache *c;
	unsigned seed;
	int bad;
	int hits;
};

static void *conc_thread(void *p)
{
	struct conc_arg *arg = p;
	struct test_answer a, out;
	char label[16];
	uint32_t age;

	for (int i = 0; i < CONC_ITERS; i++) {
		unsigned k = (unsigned)rand_r(&arg->seed) % CONC_NAMES;
		int r;

		snprintf(label, sizeof(label), "n%u", k);
		if (i % 3 == 0) {
			make_answer(&a, NDC_RCODE_NOERROR, 1, (uint16_t)(RR_FIXED + k % 64),
				    (uint8_t)k);
			if (put(arg->c, label, NDC_T_A, &a, 300, T0))
				arg->bad++;
			continue;
		}
		r = get(arg->c, label, NDC_T_A, T0, false, &out, &age);
		if (r == -ENOENT)
			continue;
		/* Every hit must be the entry of exactly this key, intact. */
		make_answer(&a, NDC_RCODE_NOERROR, 1, (uint16_t)(RR_FIXED + k % 64), (uint8_t)k);
		if (r != 0 || memcmp(&out.a, &a.a, ndc_answer_size(&a.a)))
			arg->bad++;
		else
			arg->hits++;
	}
	return NULL;
}

static void test_concurrent(void **state)
{
	/* Big enough for 64 shards, small enough that the threads also evict. */
	struct ndc_cache *c = new_cache(64 * 64, 64 * 16384, 3600, 600, 0);
	struct conc_arg args[2] = {{.c = c, .seed = 1}, {.c = c, .seed = 2}};
	struct ndc_cache_stats st;
	pthread_t t[2];

	(void)state;
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&t[i], NULL, conc_thread, &args[i]), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(args[0].bad, 0);
	assert_int_equal(args[1].bad, 0);
	assert_true(args[0].hits + args[1].hits > 1000);
	ndc_cache_stats(c, &st);
	assert_int_equal(st.hits, (uint64_t)(args[0].hits + args[1].hits));
	assert_true(st.entries <= 64 * 64);
	assert_true(st.bytes <= 64 * 16384);
	ndc_cache_free(c);
}

static void test_now_ms_monotonic(void **state)
{
	uint64_t a = ndc_now_ms(), b;
	struct timespec ts = {.tv_nsec = 20 * 1000 * 1000};

	(void)state;
	nanosleep(&ts, NULL);
	b = ndc_now_ms();
	assert_true(b >= a + 19);
	assert_true(b < a + 5000);
}

/* The hook sees every put, and a removal for every key that leaves, never for a replacement. */
struct hook_log {
	int puts, drops;
	char last[32];
	uint32_t last_ttl;
	uint16_t last_len;
};

static void hook(void *arg, const struct ndc_answer *a, const uint8_t *lname, size_t nlen,
		 uint16_t qtype, uint16_t qclass, uint32_t ttl)
{
	struct hook_log *h = arg;

	assert_int_equal(qtype, NDC_T_A);
	assert_int_equal(qclass, NDC_C_IN);
	assert_true(nlen > 7 && lname[0] < sizeof(h->last));
	memcpy(h->last, lname + 1, lname[0]);
	h->last[lname[0]] = 0;
	if (a) {
		h->puts++;
		h->last_ttl = ttl;
		h->last_len = a->len;
	} else {
		h->drops++;
	}
}

static void test_hook(void **state)
{
	struct ndc_cache *c = new_cache(2, 1 << 20, 600, 600, 10);
	struct test_answer a, out;
	struct hook_log h = {0};
	uint32_t age;

	(void)state;
	ndc_cache_set_hook(c, hook, &h);
	make_answer(&a, NDC_RCODE_NOERROR, 1, 20, 1);
	assert_int_equal(put(c, "a", NDC_T_A, &a, 300, T0), 0);
	assert_int_equal(h.puts, 1);
	assert_string_equal(h.last, "a");
	assert_int_equal(h.last_ttl, 300);
	assert_int_equal(h.last_len, 20);
	/* TTLs are reported after the cap. */
	assert_int_equal(put(c, "a", NDC_T_A, &a, 9000, T0), 0);
	assert_int_equal(h.puts, 2);
	assert_int_equal(h.drops, 0);
	assert_int_equal(h.last_ttl, 600);
	/* A TTL of 0 stores nothing and reports nothing. */
	assert_int_equal(put(c, "z", NDC_T_A, &a, 0, T0), 0);
	assert_int_equal(h.puts, 2);
	/* The third entry evicts the least recently used. */
	assert_int_equal(put(c, "b", NDC_T_A, &a, 300, T0), 0);
	assert_int_equal(put(c, "c", NDC_T_A, &a, 300, T0), 0);
	assert_int_equal(h.drops, 1);
	assert_string_equal(h.last, "c");
	/* A lookup that finds an entry dead past stale_max removes it and says so. */
	assert_int_equal(get(c, "b", NDC_T_A, T0 + 311 * 1000, true, &out, &age), -ENOENT);
	assert_int_equal(h.drops, 2);
	assert_string_equal(h.last, "b");
	ndc_cache_free(c);
}

/* New limits in use: smaller evicts at once, oldest first (the hook is told); TTL caps apply
 * to later puts. */
static void test_set_limits(void **state)
{
	struct ndc_cache *c = new_cache(8, 1 << 20, 600, 600, 10);
	struct ndc_cache_opts o = {.max_entries = 3,
				   .max_bytes = 1 << 20,
				   .max_ttl = 60,
				   .neg_max_ttl = 30,
				   .stale_max = 10};
	struct ndc_cache_stats st;
	struct test_answer a, out;
	struct hook_log h = {0};
	char label[8];
	uint32_t age;

	(void)state;
	ndc_cache_set_hook(c, hook, &h);
	make_answer(&a, NDC_RCODE_NOERROR, 1, 20, 1);
	for (int i = 0; i < 6; i++) {
		snprintf(label, sizeof(label), "n%d", i);
		assert_int_equal(put(c, label, NDC_T_A, &a, 300, T0), 0);
	}
	/* n0 used last: it stays, n1..n3 go. */
	assert_int_equal(get(c, "n0", NDC_T_A, T0, false, &out, &age), 0);
	assert_int_equal(ndc_cache_set_limits(c, &o), 0);
	ndc_cache_stats(c, &st);
	assert_int_equal(st.entries, 3);
	assert_int_equal(h.drops, 3);
	assert_int_equal(get(c, "n0", NDC_T_A, T0, false, &out, &age), 0);
	assert_int_equal(get(c, "n5", NDC_T_A, T0, false, &out, &age), 0);
	assert_int_equal(get(c, "n1", NDC_T_A, T0, false, &out, &age), -ENOENT);
	/* The new max_ttl caps the next put: fresh at 59 s, not at 61 s. */
	assert_int_equal(put(c, "x", NDC_T_A, &a, 300, T0), 0);
	assert_int_equal(h.last_ttl, 60);
	assert_int_equal(get(c, "x", NDC_T_A, T0 + 61 * 1000, false, &out, &age), -ENOENT);
	/* Bigger again: room for more. */
	o.max_entries = 100;
	assert_int_equal(ndc_cache_set_limits(c, &o), 0);
	for (int i = 0; i < 10; i++) {
		snprintf(label, sizeof(label), "m%d", i);
		assert_int_equal(put(c, label, NDC_T_A, &a, 300, T0), 0);
	}
	ndc_cache_stats(c, &st);
	assert_int_equal(st.entries, 13);
	o.max_entries = 0;
	assert_int_equal(ndc_cache_set_limits(c, &o), -EINVAL);
	ndc_cache_free(c);
}

static bool starts_with_d(void *arg, const uint8_t *lname, size_t nlen)
{
	int *calls = arg;

	(*calls)++;
	return nlen > 1 && lname[1] == 'd';
}

static void test_drop(void **state)
{
	struct ndc_cache *c = new_cache(100, 1 << 20, 600, 600, 10);
	struct test_answer a, out;
	struct hook_log h = {0};
	uint32_t age;
	int calls = 0;

	(void)state;
	ndc_cache_set_hook(c, hook, &h);
	make_answer(&a, NDC_RCODE_NOERROR, 1, 20, 1);
	assert_int_equal(put(c, "d1", NDC_T_A, &a, 300, T0), 0);
	assert_int_equal(put(c, "keep", NDC_T_A, &a, 300, T0), 0);
	assert_int_equal(put(c, "d2", NDC_T_A, &a, 300, T0), 0);
	assert_int_equal(ndc_cache_drop(c, starts_with_d, &calls), 2);
	assert_int_equal(calls, 3);
	assert_int_equal(h.drops, 2);
	assert_int_equal(get(c, "keep", NDC_T_A, T0, false, &out, &age), 0);
	assert_int_equal(get(c, "d1", NDC_T_A, T0, false, &out, &age), -ENOENT);
	assert_int_equal(get(c, "d2", NDC_T_A, T0, true, &out, &age), -ENOENT);
	ndc_cache_free(c);
}

/* ---- prefetch points (cache.prefetch) ---- */

/* Due entries at now, as "label:hits" joined by spaces, into buf. */
static size_t due_text(struct ndc_cache *c, uint64_t now, size_t max, char *buf, size_t len)
{
	struct ndc_cache_due d[64];
	size_t n = ndc_cache_due(c, now, d, max), off = 0;

	buf[0] = 0;
	for (size_t i = 0; i < n && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%.*s:%u", i ? " " : "",
					d[i].lname[0], (const char *)d[i].lname + 1, d[i].hits);
	return n;
}

static void test_prefetch_points(void **state)
{
	struct ndc_cache *c = new_cache(1000, 1 << 20, 86400, 3600, 0);
	struct test_answer a, out;
	char buf[256];

	(void)state;
	make_answer(&a, NDC_RCODE_NOERROR, 1, 16, 0);
	/* Off by default: no points. */
	assert_int_equal(put(c, "off", NDC_T_A, &a, 5, T0), 0);
	ndc_cache_set_prefetch(c, 10);
	/* TTL 5 at 10%: 1 s before expiry (0.5 s rounded up to a second). */
	assert_int_equal(put(c, "five", NDC_T_A, &a, 5, T0), 0);
	/* TTL 1: not in the first half of its life. */
	assert_int_equal(put(c, "one", NDC_T_A, &a, 1, T0), 0);
	/* TTL 300: 30 s before. */
	assert_int_equal(put(c, "long", NDC_T_A, &a, 300, T0), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(get(c, "five", NDC_T_A, T0 + 100, false, &out, NULL), 0);

	assert_int_equal(due_text(c, T0 + 499, 64, buf, sizeof(buf)), 0);
	assert_int_equal(due_text(c, T0 + 500, 64, buf, sizeof(buf)), 1);
	assert_string_equal(buf, "one:0");
	assert_int_equal(due_text(c, T0 + 3999, 64, buf, sizeof(buf)), 0);
	assert_int_equal(due_text(c, T0 + 4000, 64, buf, sizeof(buf)), 1);
	assert_string_equal(buf, "five:3");
	/* Each entry once in its life. */
	assert_int_equal(due_text(c, T0 + 4500, 64, buf, sizeof(buf)), 0);
	assert_int_equal(due_text(c, T0 + 269999, 64, buf, sizeof(buf)), 0);
	assert_int_equal(due_text(c, T0 + 270000, 64, buf, sizeof(buf)), 1);
	assert_string_equal(buf, "long:0");
	/* Never given a point (stored while off): never due. */
	assert_int_equal(due_text(c, T0 + 1000000, 64, buf, sizeof(buf)), 0);
	ndc_cache_free(c);
}

static void test_prefetch_replace_and_evict(void **state)
{
	struct ndc_cache *c = new_cache(64, 1 << 20, 86400, 3600, 0);
	struct test_answer a, out;
	uint8_t n[64];
	size_t nl = make_name(n, "x");
	uint64_t g1 = 0, g2 = 0;
	char buf[1024], label[16];

	(void)state;
	make_answer(&a, NDC_RCODE_NOERROR, 1, 16, 0);
	ndc_cache_set_prefetch(c, 50);
	assert_int_equal(ndc_cache_gen(c, n, nl, NDC_T_A, NDC_C_IN, &g1), -ENOENT);
	assert_int_equal(put(c, "x", NDC_T_A, &a, 10, T0), 0);
	assert_int_equal(ndc_cache_gen(c, n, nl, NDC_T_A, NDC_C_IN, &g1), 0);
	assert_int_equal(get(c, "x", NDC_T_A, T0 + 1, false, &out, NULL), 0);
	/* Replaced: a new gen, hits from zero, a point from the new put (10 s at 50%: 5 s). */
	assert_int_equal(put(c, "x", NDC_T_A, &a, 10, T0 + 2000), 0);
	assert_int_equal(ndc_cache_gen(c, n, nl, NDC_T_A, NDC_C_IN, &g2), 0);
	assert_true(g2 > g1);
	assert_int_equal(due_text(c, T0 + 5000, 64, buf, sizeof(buf)), 0);
	assert_int_equal(due_text(c, T0 + 7000, 64, buf, sizeof(buf)), 1);
	assert_string_equal(buf, "x:0");

	/* 200 puts through a 64-entry cache: evicted entries leave the heap with them. */
	for (int i = 0; i < 200; i++) {
		snprintf(label, sizeof(label), "e%d", i);
		assert_int_equal(put(c, label, NDC_T_A, &a, 10, T0 + (uint64_t)i), 0);
	}
	assert_int_equal(due_text(c, T0 + 100000, 64, buf, sizeof(buf)), 0); /* all expired */
	for (int i = 0; i < 200; i++) {
		snprintf(label, sizeof(label), "f%d", i);
		assert_int_equal(put(c, label, NDC_T_A, &a, 10 + (uint32_t)(i % 7), T0 + 200000),
				 0);
	}
	/* At most max at a time, the rest stays due for the next call. */
	assert_int_equal(due_text(c, T0 + 200000 + 9000, 10, buf, sizeof(buf)), 10);
	assert_int_equal(due_text(c, T0 + 200000 + 9000, 64, buf, sizeof(buf)), 54);
	assert_int_equal(due_text(c, T0 + 200000 + 9000, 64, buf, sizeof(buf)), 0);
	ndc_cache_free(c);
}

/* An entry that expires before it is taken is never given. */
static void test_prefetch_expired_skipped(void **state)
{
	struct ndc_cache *c = new_cache(1000, 1 << 20, 86400, 3600, 3600);
	struct test_answer a;
	char buf[64];

	(void)state;
	make_answer(&a, NDC_RCODE_NOERROR, 1, 16, 0);
	ndc_cache_set_prefetch(c, 10);
	assert_int_equal(put(c, "late", NDC_T_A, &a, 5, T0), 0);
	assert_int_equal(due_text(c, T0 + 5000, 64, buf, sizeof(buf)), 0);
	assert_int_equal(due_text(c, T0 + 4000, 64, buf, sizeof(buf)), 0);
	ndc_cache_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_new_invalid),
	    cmocka_unit_test(test_put_get),
	    cmocka_unit_test(test_key_case),
	    cmocka_unit_test(test_replace),
	    cmocka_unit_test(test_age),
	    cmocka_unit_test(test_expiry_and_stale),
	    cmocka_unit_test(test_no_stale_window),
	    cmocka_unit_test(test_ttl_caps),
	    cmocka_unit_test(test_entry_bound_lru),
	    cmocka_unit_test(test_dead_evicted_first),
	    cmocka_unit_test(test_byte_bound_lru),
	    cmocka_unit_test(test_too_big),
	    cmocka_unit_test(test_out_too_small),
	    cmocka_unit_test(test_concurrent),
	    cmocka_unit_test(test_now_ms_monotonic),
	    cmocka_unit_test(test_hook),
	    cmocka_unit_test(test_set_limits),
	    cmocka_unit_test(test_drop),
	    cmocka_unit_test(test_prefetch_points),
	    cmocka_unit_test(test_prefetch_replace_and_evict),
	    cmocka_unit_test(test_prefetch_expired_skipped),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
