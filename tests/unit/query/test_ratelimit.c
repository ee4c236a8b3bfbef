// SPDX-License-Identifier: MIT
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "query/query.h"

#define T0 5000000 /* an arbitrary "now" in ms: the limiter must only use what it is given */

static struct sockaddr_storage v4(uint32_t host)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *in = (struct sockaddr_in *)&ss;

	memset(&ss, 0, sizeof(ss));
	in->sin_family = AF_INET;
	in->sin_addr.s_addr = htonl(host);
	in->sin_port = htons((uint16_t)(1024 + host % 50000));
	return ss;
}

static struct sockaddr_storage v6(const char *text)
{
	struct sockaddr_storage ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;

	memset(&ss, 0, sizeof(ss));
	in6->sin6_family = AF_INET6;
	assert_int_equal(inet_pton(AF_INET6, text, &in6->sin6_addr), 1);
	return ss;
}

static struct ndc_ratelimit *new_rl(uint32_t qps, uint32_t burst)
{
	struct ndc_ratelimit_opts o = {.qps = qps, .burst = burst};
	struct ndc_ratelimit *rl = NULL;

	assert_int_equal(ndc_ratelimit_new(&o, &rl), 0);
	return rl;
}

/* How many of n queries from peer at now are let through. */
static unsigned allow_n(struct ndc_ratelimit *rl, const struct sockaddr_storage *peer, uint64_t now,
			unsigned n)
{
	unsigned ok = 0;

	for (unsigned i = 0; i < n; i++)
		ok += ndc_ratelimit_allow(rl, peer, now);
	return ok;
}

static void test_bucket(void **state)
{
	struct ndc_ratelimit *rl = new_rl(10, 5);
	struct sockaddr_storage a = v4(0xa9fe0001);
	struct ndc_ratelimit_stats st;

	(void)state;
	/* A new client starts with a full bucket, then gets qps a second. */
	assert_int_equal(allow_n(rl, &a, T0, 8), 5);
	assert_false(ndc_ratelimit_allow(rl, &a, T0 + 99));
	assert_true(ndc_ratelimit_allow(rl, &a, T0 + 100));
	assert_false(ndc_ratelimit_allow(rl, &a, T0 + 100));
	/* Fractions of a token add up: 50 ms + 50 ms is one token. */
	assert_false(ndc_ratelimit_allow(rl, &a, T0 + 150));
	assert_true(ndc_ratelimit_allow(rl, &a, T0 + 200));
	/* Idle for long: refilled to burst, never beyond. */
	assert_int_equal(allow_n(rl, &a, T0 + 3600 * 1000, 20), 5);
	/* A clock that goes back (another thread's older now) takes nothing away. */
	assert_false(ndc_ratelimit_allow(rl, &a, T0 + 3600 * 1000 - 500));
	ndc_ratelimit_stats(rl, &st);
	assert_int_equal(st.allowed, 5 + 1 + 1 + 5);
	assert_int_equal(st.limited, 3 + 1 + 1 + 1 + 15 + 1);
	assert_int_equal(st.clients, 1);
	ndc_ratelimit_free(rl);
}

/* A flood at 20,000 queries/s for 10 s gets burst + 10 s of qps through, whatever it sends. */
static void test_flood_rate(void **state)
{
	struct ndc_ratelimit *rl = new_rl(1000, 2000);
	struct sockaddr_storage a = v4(0xa9fe0002), b = v4(0xa9fe0003);
	unsigned ok_a = 0, ok_b = 0;

	(void)state;
	for (uint64_t us = 0; us < 10000000; us += 50) {
		ok_a += ndc_ratelimit_allow(rl, &a, T0 + us / 1000);
		/* B at 100 a second is never limited beside it. */
		if (us % 10000 == 0)
			ok_b += ndc_ratelimit_allow(rl, &b, T0 + us / 1000);
	}
	assert_in_range(ok_a, 2000 + 9999, 2000 + 10000);
	assert_int_equal(ok_b, 1000);
	ndc_ratelimit_free(rl);
}

static void test_families(void **state)
{
	struct ndc_ratelimit *rl = new_rl(1, 2);
	struct sockaddr_storage a = v4(0xa9fe0a0b), mapped = v6("::ffff:169.254.10.11");
	struct sockaddr_storage b = v6("fd00::1"), c = v6("fd00::2"), unix_peer;

	(void)state;
	/* An IPv4 client and its IPv4-mapped form are one client, whatever the port. */
	assert_true(ndc_ratelimit_allow(rl, &a, T0));
	assert_true(ndc_ratelimit_allow(rl, &mapped, T0));
	assert_false(ndc_ratelimit_allow(rl, &a, T0));
	/* IPv6 clients are whole addresses. */
	assert_int_equal(allow_n(rl, &b, T0, 3), 2);
	assert_int_equal(allow_n(rl, &c, T0, 3), 2);
	/* Not an IP peer: nothing to key on, never limited. */
	memset(&unix_peer, 0, sizeof(unix_peer));
	unix_peer.ss_family = AF_UNIX;
	assert_int_equal(allow_n(rl, &unix_peer, T0, 10), 10);
	ndc_ratelimit_free(rl);
}

static void test_off_and_configure(void **state)
{
	struct ndc_ratelimit_opts bad = {.qps = 5, .burst = 0}, off = {0}, tight = {1, 1};
	struct ndc_ratelimit *rl = new_rl(0, 0), *none = NULL;
	struct sockaddr_storage a = v4(0xa9fe0004);

	(void)state;
	assert_int_equal(ndc_ratelimit_new(&bad, &none), -EINVAL);
	assert_null(none);
	/* qps 0: off. */
	assert_int_equal(allow_n(rl, &a, T0, 100000), 100000);
	/* Live: the next query meets the new limit; a bad one changes nothing. */
	assert_int_equal(ndc_ratelimit_configure(rl, &tight), 0);
	assert_int_equal(allow_n(rl, &a, T0, 3), 1);
	assert_int_equal(ndc_ratelimit_configure(rl, &bad), -EINVAL);
	assert_false(ndc_ratelimit_allow(rl, &a, T0));
	assert_int_equal(ndc_ratelimit_configure(rl, &off), 0);
	assert_true(ndc_ratelimit_allow(rl, &a, T0));
	ndc_ratelimit_free(rl);
}

/* The table stays at NDC_RL_CLIENTS; idle clients make room and lose nothing by it. */
static void test_bounded(void **state)
{
	struct ndc_ratelimit *rl = new_rl(10, 3);
	struct sockaddr_storage a = v4(0xa9fe0005);
	struct ndc_ratelimit_stats st;

	(void)state;
	assert_int_equal(allow_n(rl, &a, T0, 3), 3);
	/* 100,000 others, one query each, one second later: a's bucket has refilled by then. */
	for (uint32_t i = 0; i < 100000; i++) {
		struct sockaddr_storage p = v4(0x0a000000 + i);

		assert_true(ndc_ratelimit_allow(rl, &p, T0 + 1000));
	}
	ndc_ratelimit_stats(rl, &st);
	assert_true(st.clients <= NDC_RL_CLIENTS);
	assert_true(st.clients >= NDC_RL_CLIENTS / 2);
	/* Each of them still had 2 of 3 tokens when replaced: counted as active evictions. */
	assert_true(st.evicted_active > 0);
	/* Whether a was evicted or not, it is at a full bucket: 3, not more. */
	assert_int_equal(allow_n(rl, &a, T0 + 1000, 5), 3);
	ndc_ratelimit_free(rl);
}

/* An idle client replaced is not counted as an active eviction. */
static void test_idle_eviction(void **state)
{
	struct ndc_ratelimit *rl = new_rl(1000, 1);
	struct ndc_ratelimit_stats st;

	(void)state;
	for (uint32_t i = 0; i < 4 * NDC_RL_CLIENTS; i++) {
		struct sockaddr_storage p = v4(0x0b000000 + i);

		/* Every client refills within a millisecond: by the next one's turn it is idle. */
		assert_true(ndc_ratelimit_allow(rl, &p, T0 + 1 + i));
	}
	ndc_ratelimit_stats(rl, &st);
	assert_int_equal(st.evicted_active, 0);
	assert_int_equal(st.clients, NDC_RL_CLIENTS);
	ndc_ratelimit_free(rl);
}

struct hammer {
	struct ndc_ratelimit *rl;
	struct sockaddr_storage peer;
	unsigned ok;
};

static void *hammer_thread(void *arg)
{
	struct hammer *h = arg;

	h->ok = allow_n(h->rl, &h->peer, T0, 20000);
	return NULL;
}

/* Threads on one client at one instant share its burst exactly: no token is spent twice. */
static void test_threads(void **state)
{
	struct ndc_ratelimit *rl = new_rl(1, 5000);
	struct hammer h[4];
	pthread_t t[4];
	unsigned total = 0;

	(void)state;
	for (int i = 0; i < 4; i++) {
		h[i] = (struct hammer){.rl = rl, .peer = v4(0xa9fe0006)};
		assert_int_equal(pthread_create(&t[i], NULL, hammer_thread, &h[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		total += h[i].ok;
	}
	assert_int_equal(total, 5000);
	ndc_ratelimit_free(rl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bucket),   cmocka_unit_test(test_flood_rate),
	    cmocka_unit_test(test_families), cmocka_unit_test(test_off_and_configure),
	    cmocka_unit_test(test_bounded),  cmocka_unit_test(test_idle_eviction),
	    cmocka_unit_test(test_threads),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
