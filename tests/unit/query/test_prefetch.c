// SPDX-License-Identifier: MIT
/*
 * Prefetch against a real forwarder and cache, with a small upstream on loopback of this test's
 * own: it answers A queries with TTL 2 (a fresh address each time, so a refresh is visible) or
 * drops everything, and counts what it was asked.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "query/query.h"

#define TTL 2

struct upstream {
	int fd;
	uint16_t port;
	pthread_t thread;
	_Atomic bool stop;
	_Atomic bool drop; /* answer nothing */
	_Atomic unsigned queries;
};

/* The question's end in a query of len bytes, or 0. */
static size_t question_end(const uint8_t *q, size_t len)
{
	size_t off = 12;

	while (off < len && q[off])
		off += 1u + q[off];
	off += 1 + 4;
	return off <= len ? off : 0;
}

static void *upstream_thread(void *arg)
{
	struct upstream *u = arg;
	uint8_t buf[512];

	while (!u->stop) {
		struct pollfd pfd = {.fd = u->fd, .events = POLLIN};
		struct sockaddr_storage from;
		socklen_t fl = sizeof(from);
		ssize_t n;
		size_t qe;
		unsigned k;

		if (poll(&pfd, 1, 50) <= 0)
			continue;
		n = recvfrom(u->fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fl);
		if (n < 12 || !(qe = question_end(buf, (size_t)n)) || qe + 16 > sizeof(buf))
			continue;
		k = ++u->queries;
		if (u->drop)
			continue;
		/* QR, RD and RA; one answer, the question echoed, no EDNS. */
		buf[2] = 0x81;
		buf[3] = 0x80;
		memcpy(buf + 4, "\0\1\0\1\0\0\0\0", 8);
		memcpy(buf + qe, "\xc0\x0c\0\1\0\1\0\0\0", 9);
		buf[qe + 9] = TTL;
		memcpy(buf + qe + 10, "\0\4\xa9\xfe", 4);
		buf[qe + 14] = (uint8_t)(k >> 8);
		buf[qe + 15] = (uint8_t)k;
		sendto(u->fd, buf, qe + 16, 0, (struct sockaddr *)&from, fl);
	}
	return NULL;
}

static void upstream_start(struct upstream *u)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);

	memset(u, 0, sizeof(*u));
	u->fd = socket(AF_INET, SOCK_DGRAM, 0);
	assert_true(u->fd >= 0);
	assert_int_equal(bind(u->fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(u->fd, (struct sockaddr *)&a, &al), 0);
	u->port = ntohs(a.sin_port);
	assert_int_equal(pthread_create(&u->thread, NULL, upstream_thread, u), 0);
}

static void upstream_stop(struct upstream *u)
{
	u->stop = true;
	pthread_join(u->thread, NULL);
	close(u->fd);
}

struct env {
	struct upstream up;
	struct ndc_cache *cache;
	struct ndc_forwarder *fwd;
	struct ndc_prefetch *pf;
};

static void env_init(struct env *e, uint32_t min_hits, uint32_t timeout_ms)
{
	struct ndc_cache_opts co = {.max_entries = 1000,
				    .max_bytes = 1 << 20,
				    .max_ttl = 3600,
				    .neg_max_ttl = 60,
				    .stale_max = 60};
	struct sockaddr_storage ss;
	struct sockaddr_in *in = (struct sockaddr_in *)&ss;
	struct ndc_forwarder_opts fo = {
	    .n_upstreams = 1, .upstreams = &ss, .timeout_ms = timeout_ms};
	struct ndc_prefetch_opts po = {.min_hits = min_hits, .before_pct = 10};

	upstream_start(&e->up);
	memset(&ss, 0, sizeof(ss));
	in->sin_family = AF_INET;
	in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	in->sin_port = htons(e->up.port);
	assert_int_equal(ndc_cache_new(&co, &e->cache), 0);
	assert_int_equal(ndc_forwarder_new(&fo, e->cache, &e->fwd), 0);
	assert_int_equal(ndc_prefetch_new(&po, e->cache, e->fwd, &e->pf), 0);
}

static void env_free(struct env *e)
{
	ndc_prefetch_stop(e->pf);
	ndc_forwarder_free(e->fwd);
	ndc_prefetch_free(e->pf);
	ndc_cache_free(e->cache);
	upstream_stop(&e->up);
}

static size_t name_of(uint8_t *out, int i)
{
	char label[16];
	int l = snprintf(label, sizeof(label), "n%d", i);

	out[0] = (uint8_t)l;
	memcpy(out + 1, label, (size_t)l);
	memcpy(out + 1 + l, "\7example\0", 9);
	return (size_t)l + 10;
}

static _Atomic int resolved;

static void on_done(void *arg, const struct ndc_fwd_result *res)
{
	(void)arg;
	assert_int_equal(res->status, 0);
	resolved++;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/* Resolves names first..first+n-1 through the forwarder (cached), then asks each hits times. */
static void fill_from(struct env *e, int first, int n, int hits)
{
	static uint8_t data[sizeof(struct ndc_answer) + 4096];
	struct ndc_answer *a = (struct ndc_answer *)data;
	uint8_t name[NDC_NAME_MAX];

	resolved = 0;
	for (int i = first; i < first + n; i++)
		assert_int_equal(ndc_forwarder_resolve(e->fwd, name, name_of(name, i), NDC_T_A,
						       NDC_C_IN, on_done, NULL),
				 0);
	for (int t = 0; t < 200 && resolved < n; t++)
		sleep_ms(10);
	assert_int_equal(resolved, n);
	for (int i = first; i < first + n; i++)
		for (int h = 0; h < hits; h++)
			assert_int_equal(ndc_cache_get(e->cache, name, name_of(name, i), NDC_T_A,
						       NDC_C_IN, ndc_now_ms(), false, a, 4096,
						       NULL),
					 0);
}

static void fill(struct env *e, int n, int hits)
{
	fill_from(e, 0, n, hits);
}

static uint64_t gen_of(struct env *e, int i)
{
	uint8_t name[NDC_NAME_MAX];
	uint64_t gen = 0;

	assert_int_equal(ndc_cache_gen(e->cache, name, name_of(name, i), NDC_T_A, NDC_C_IN, &gen),
			 0);
	return gen;
}

/* TTL 2 at 10%: due after 1 s (half its TTL). A hot entry is asked again and replaced. */
static void test_hot_refreshed(void **state)
{
	struct ndc_prefetch_stats st;
	struct env e;
	uint64_t g0;

	(void)state;
	env_init(&e, 2, 500);
	fill(&e, 1, 2);
	g0 = gen_of(&e, 0);
	assert_int_equal(e.up.queries, 1);
	sleep_ms(800);
	/* Not yet due: nothing asked, the entry is the upstream's first answer. */
	assert_int_equal(e.up.queries, 1);
	for (int t = 0; t < 100 && e.up.queries < 2; t++)
		sleep_ms(10);
	sleep_ms(50);
	assert_int_equal(e.up.queries, 2);
	assert_true(gen_of(&e, 0) != g0);
	ndc_prefetch_stats(e.pf, &st);
	assert_int_equal(st.issued, 1);
	assert_int_equal(st.refreshed, 1);
	assert_int_equal(st.failed, 0);
	assert_int_equal(st.cold, 0);
	env_free(&e);
}

/* Asked fewer than min_hits times: left to expire, never asked again. */
static void test_cold_left(void **state)
{
	struct ndc_prefetch_stats st;
	struct env e;

	(void)state;
	env_init(&e, 2, 500);
	fill(&e, 1, 1);
	sleep_ms(1500);
	assert_int_equal(e.up.queries, 1);
	ndc_prefetch_stats(e.pf, &st);
	assert_int_equal(st.issued, 0);
	assert_int_equal(st.cold, 1);
	env_free(&e);
}

static _Atomic unsigned kernel_calls;

static int kernel_hits(void *arg, const uint8_t *lname, size_t nlen, uint16_t qtype,
		       uint32_t *ret_hits)
{
	(void)arg;
	(void)nlen;
	kernel_calls++;
	assert_int_equal(qtype, NDC_T_A);
	/* The kernel answered n0 five times, n1 never (not in its table). */
	if (!memcmp(lname, "\2n0", 3)) {
		*ret_hits = 5;
		return 0;
	}
	return -ENOENT;
}

/* Hits the kernel answered count as hits: an entry user space never saw asked is hot. */
static void test_kernel_hits(void **state)
{
	struct ndc_prefetch_stats st;
	struct env e;

	(void)state;
	env_init(&e, 2, 500);
	ndc_prefetch_set_kernel_hits(e.pf, kernel_hits, NULL);
	fill(&e, 2, 0);
	for (int t = 0; t < 200 && e.up.queries < 3; t++)
		sleep_ms(10);
	sleep_ms(300);
	/* n0 refreshed, n1 cold. */
	assert_int_equal(e.up.queries, 3);
	ndc_prefetch_stats(e.pf, &st);
	assert_int_equal(st.issued, 1);
	assert_int_equal(st.refreshed, 1);
	assert_int_equal(st.cold, 1);
	assert_int_equal(st.kernel_hits, 5);
	assert_int_equal(kernel_calls, 2);
	env_free(&e);
}

/*
 * An upstream that stops answering: 20 hot entries come due at 1 s and are sent (at most
 * max_inflight at once); they time out at 1.2 s, so 20 more coming due at 1.5 s meet the backoff
 * (none sent until 2.2 s), then one at a time, and expire at 2.5 s: no storm.
 */
static void test_failing_upstream_no_storm(void **state)
{
	struct ndc_prefetch_stats st;
	struct env e;
	unsigned first, second;

	(void)state;
	env_init(&e, 1, 200);
	fill_from(&e, 0, 20, 1);
	sleep_ms(500);
	fill_from(&e, 20, 20, 1);
	e.up.drop = true;
	sleep_ms(1000);
	first = e.up.queries - 40;
	sleep_ms(1500);
	second = e.up.queries - 40 - first;
	ndc_prefetch_stats(e.pf, &st);
	print_message("prefetch to a dead upstream: %u for the first 20 hot entries, %u for the 20 "
		      "due during the backoff; issued %lu, failed %lu\n",
		      first, second, (unsigned long)st.issued, (unsigned long)st.failed);
	assert_int_equal(first, 20);
	assert_true(second <= 2);
	assert_int_equal(st.refreshed, 0);
	assert_int_equal(st.failed, st.issued);
	assert_int_equal(st.inflight, 0);
	env_free(&e);
}

/* Off (before_pct 0): no prefetch points, nothing asked; a bad value changes nothing. */
static void test_configure_off(void **state)
{
	struct ndc_prefetch_opts off = {.min_hits = 2, .before_pct = 0};
	struct ndc_prefetch_opts bad = {.min_hits = 2, .before_pct = 100};
	struct ndc_prefetch_stats st;
	struct env e;

	(void)state;
	env_init(&e, 2, 500);
	assert_int_equal(ndc_prefetch_configure(e.pf, &bad), -EINVAL);
	assert_int_equal(ndc_prefetch_configure(e.pf, &off), 0);
	fill(&e, 1, 5);
	sleep_ms(1500);
	assert_int_equal(e.up.queries, 1);
	ndc_prefetch_stats(e.pf, &st);
	assert_int_equal(st.issued + st.cold, 0);
	env_free(&e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_hot_refreshed), cmocka_unit_test(test_cold_left),
	    cmocka_unit_test(test_kernel_hits),	  cmocka_unit_test(test_failing_upstream_no_storm),
	    cmocka_unit_test(test_configure_off),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
