// SPDX-License-Identifier: MIT
/*
 * The DPDK answer table follows its content (dataplane/dpdk/table.c): it starts small, grows as
 * keys come (a bigger hash filled beside the live one and switched to atomically), shrinks after
 * large removals with hysteresis (grow past 90% load, shrink under 55%, both to 70%), never past
 * its cap (dataplane.table_size). Checked: from the smallest table to 40,000 keys and back, every
 * key present is found with its own answer after every step, every removed key is gone, and the
 * load stays within the bounds; a reader thread (an lcore's QSBR protocol) looking up names that
 * exist throughout while the writer grows and shrinks the table under it never misses one nor
 * reads a torn answer (and under ASan, never reads freed memory: old hashes and values go only
 * after a grace period); the cap holds.
 *
 * The EAL runs with --no-huge --no-pci (no hugepages needed) and no worker lcore: the test's
 * threads read the table as lcores do.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_rcu_qsbr.h>

#include <ndc/abi.h>
#include <ndc/dns_wire.h>

#include "dpdk/internal.h"
#include "fastpath/fastpath.h"

#define MIN_SLOTS 256 /* table.c's MIN_ENTRIES */
#define MANY 40000
#define FEW 100
#define STEP 2000
#define STABLE 500
#define CHURN 30000

union answer {
	struct ndc_answer a;
	uint8_t b[sizeof(struct ndc_answer) + 64];
};

static struct ndc_fp_config cfg = {.abi_version = NDC_ABI_VERSION};

static size_t name_of(unsigned int i, const char *zone, uint8_t *out)
{
	char text[64];
	size_t len;

	snprintf(text, sizeof(text), "n%u.%s", i, zone);
	assert_int_equal(ndc_name_from_text(text, out, NDC_NAME_MAX, &len), 0);
	return len;
}

/* Name i's address: v picks one of two, so a replaced answer is told from its replacement. */
static void ip_of(unsigned int i, unsigned int v, uint8_t ip[4])
{
	ip[0] = (uint8_t)(10 + v);
	ip[1] = (uint8_t)(i >> 16);
	ip[2] = (uint8_t)(i >> 8);
	ip[3] = (uint8_t)i;
}

static void answer_of(unsigned int i, unsigned int v, const uint8_t *lname, size_t nlen,
		      union answer *a)
{
	struct ndc_ab b;
	uint8_t ip[4];

	ip_of(i, v, ip);
	ndc_ab_init(&b, &a->a, sizeof(a->b) - sizeof(a->a), lname, nlen);
	ndc_ab_rr(&b, NDC_SEC_ANSWER, lname, nlen, NDC_T_A, NDC_C_IN, 300, ip, 4);
	assert_int_equal(ndc_ab_finish(&b, NDC_RCODE_NOERROR, true), 0);
}

static int publish(struct ndc_dpdk_table *t, unsigned int i, unsigned int v, const char *zone)
{
	uint8_t lname[NDC_NAME_MAX];
	size_t nlen = name_of(i, zone, lname);
	union answer a;

	answer_of(i, v, lname, nlen, &a);
	return ndc_dpdk_table_publish(t, lname, nlen, NDC_T_A, &a.a, 0);
}

static int unpublish(struct ndc_dpdk_table *t, unsigned int i, const char *zone)
{
	uint8_t lname[NDC_NAME_MAX];
	size_t nlen = name_of(i, zone, lname);

	return ndc_dpdk_table_unpublish(t, lname, nlen, NDC_T_A);
}

/*
 * What a reader finds for name i: 0 when its entry is there, whole and its own (one A RR whose
 * address is variant 0 or 1 of i's); -ENOENT when there is none; -EBADMSG for anything else.
 */
static int look(const struct ndc_dpdk_table *t, unsigned int i, const char *zone)
{
	uint8_t lname[NDC_NAME_MAX], ip0[4], ip1[4];
	size_t nlen = name_of(i, zone, lname);
	const struct ndc_fp_value *v;
	struct ndc_fp_key k;

	if (ndc_fastpath_key(lname, nlen, NDC_T_A, &k))
		return -EINVAL;
	v = ndc_dpdk_table_lookup(t, &k);
	if (!v)
		return -ENOENT;
	ip_of(i, 0, ip0);
	ip_of(i, 1, ip1);
	if (v->name_len != nlen || memcmp(v->name, lname, nlen) || v->ancount != 1 ||
	    v->len != 16 || (memcmp(v->data + 12, ip0, 4) && memcmp(v->data + 12, ip1, 4)))
		return -EBADMSG;
	return 0;
}

static struct ndc_dpdk_table *table_new(uint32_t max_entries)
{
	struct ndc_dpdk_table_opts o = {
	    .max_entries = max_entries, .max_readers = 1, .config = &cfg};
	struct ndc_dpdk_table *t;

	assert_int_equal(ndc_dpdk_table_new(&o, &t), 0);
	return t;
}

/* Every name of [0, n) is there with its own answer, every one of [n, end) is not. */
static void check_range(const struct ndc_dpdk_table *t, unsigned int n, unsigned int end)
{
	for (unsigned int i = 0; i < end; i++) {
		int r = look(t, i, "grow.test");

		if (r != (i < n ? 0 : -ENOENT))
			fail_msg("name %u of %u: %d (%s)", i, n, r,
				 i < n ? "must be there" : "gone");
	}
}

/* The counts agree and the load is where the policy keeps it. */
static void check_stats(struct ndc_dpdk_table *t, unsigned int n, bool shrinking)
{
	struct ndc_dpdk_table_stats s;

	ndc_dpdk_table_stats(t, &s);
	assert_int_equal(s.keys, n);
	assert_int_equal(s.max_keys, 65536);
	assert_true(s.slots >= MIN_SLOTS && s.slots <= s.max_keys);
	if (s.keys * 100 > s.slots * 90)
		fail_msg("%u keys load %lu slots past 90%%", n, (unsigned long)s.slots);
	if (shrinking && s.slots > MIN_SLOTS && s.keys * 100 < s.slots * 55)
		fail_msg("%u keys left in %lu slots: under 55%%, not shrunk", n,
			 (unsigned long)s.slots);
	assert_true(s.bytes > 0);
	assert_int_equal(s.needed, n * (sizeof(struct ndc_fp_key) + sizeof(struct ndc_fp_value)));
}

static void test_grow_and_shrink(void **state)
{
	struct ndc_dpdk_table *t = table_new(0);
	struct ndc_dpdk_table_stats s;
	uint64_t grown, shrunk;

	(void)state;
	ndc_dpdk_table_stats(t, &s);
	assert_int_equal(s.slots, MIN_SLOTS); /* small to start with, whatever the cap */
	assert_int_equal(s.rebuilds, 0);
	for (unsigned int i = 0; i < MANY; i++) {
		assert_int_equal(publish(t, i, 0, "grow.test"), 0);
		if ((i + 1) % STEP == 0 || i < 600) {
			check_range(t, i + 1, i + 1 < MANY ? i + 2 : MANY);
			check_stats(t, i + 1, false);
		}
	}
	ndc_dpdk_table_stats(t, &s);
	grown = s.rebuilds;
	print_message("%u keys: %lu slots, %lu bytes for %lu needed (%.2fx), %lu rebuilds\n", MANY,
		      (unsigned long)s.slots, (unsigned long)s.bytes, (unsigned long)s.needed,
		      (double)s.bytes / (double)s.needed, (unsigned long)s.rebuilds);
	assert_true(grown >= 10);
	assert_true(s.slots <= (uint64_t)MANY * 100 / 70 * 9 / 8 + 1);
	assert_true(s.bytes <= 2 * s.needed);

	/* Replacing what is there moves nothing; nor does a key out and in at the target load. */
	for (unsigned int i = 0; i < MANY; i += 7)
		assert_int_equal(publish(t, i, 1, "grow.test"), 0);
	for (int round = 0; round < 100; round++) {
		assert_int_equal(unpublish(t, MANY - 1, "grow.test"), 0);
		assert_int_equal(publish(t, MANY - 1, 0, "grow.test"), 0);
	}
	ndc_dpdk_table_stats(t, &s);
	assert_int_equal(s.rebuilds, grown);
	check_range(t, MANY, MANY);

	for (unsigned int n = MANY; n > FEW; n--) {
		assert_int_equal(unpublish(t, n - 1, "grow.test"), 0);
		if ((n - 1) % STEP == 0 || n - 1 < 600) {
			check_range(t, n - 1, MANY);
			check_stats(t, n - 1, true);
		}
	}
	ndc_dpdk_table_stats(t, &s);
	shrunk = s.rebuilds - grown;
	print_message("back to %u keys: %lu slots, %lu shrinking rebuilds\n", FEW,
		      (unsigned long)s.slots, (unsigned long)shrunk);
	assert_int_equal(s.slots, MIN_SLOTS);
	assert_true(shrunk >= 5);

	/* Hysteresis: one key in and out at a load between the bounds rebuilds nothing. */
	for (unsigned int n = FEW; n < 150; n++)
		assert_int_equal(publish(t, n, 0, "grow.test"), 0);
	ndc_dpdk_table_stats(t, &s);
	grown = s.rebuilds;
	for (int round = 0; round < 100; round++) {
		assert_int_equal(publish(t, 150, 0, "grow.test"), 0);
		assert_int_equal(unpublish(t, 150, "grow.test"), 0);
	}
	ndc_dpdk_table_stats(t, &s);
	assert_int_equal(s.rebuilds, grown);
	check_range(t, 150, 200);
	ndc_dpdk_table_free(t);
}

/* ---------------------------------------------------------------------------------------------
 * A reader while the table grows and shrinks under it.
 */
static struct {
	struct ndc_dpdk_table *t;
	volatile bool stop;
	unsigned long lookups, missed, torn;
} rd;

static void *reader(void *arg)
{
	struct rte_rcu_qsbr *v = ndc_dpdk_table_qsbr(rd.t);

	(void)arg;
	if (rte_rcu_qsbr_thread_register(v, 0))
		return (void *)1;
	rte_rcu_qsbr_thread_online(v, 0);
	while (!__atomic_load_n(&rd.stop, __ATOMIC_RELAXED)) {
		for (unsigned int i = 0; i < STABLE; i++) {
			int r = look(rd.t, i, "stable.test");

			rd.lookups++;
			if (r == -ENOENT)
				rd.missed++;
			else if (r)
				rd.torn++;
			if (i % 50 == 49)
				rte_rcu_qsbr_quiescent(v, 0); /* as an lcore after each burst */
		}
	}
	rte_rcu_qsbr_thread_offline(v, 0);
	rte_rcu_qsbr_thread_unregister(v, 0);
	return NULL;
}

static void test_readers_while_resizing(void **state)
{
	struct ndc_dpdk_table_stats s;
	pthread_t th;
	void *ret;

	(void)state;
	memset(&rd, 0, sizeof(rd));
	rd.t = table_new(0);
	for (unsigned int i = 0; i < STABLE; i++)
		assert_int_equal(publish(rd.t, i, 0, "stable.test"), 0);
	assert_int_equal(pthread_create(&th, NULL, reader, NULL), 0);
	for (int cycle = 0; cycle < 2; cycle++) {
		for (unsigned int i = 0; i < CHURN; i++) {
			assert_int_equal(publish(rd.t, i, 0, "churn.test"), 0);
			/* the stable names' answers are replaced under the reader too */
			if (i % 64 == 0)
				assert_int_equal(
				    publish(rd.t, (i / 64) % STABLE, (i / 64) & 1, "stable.test"),
				    0);
		}
		for (unsigned int i = 0; i < CHURN; i++)
			assert_int_equal(unpublish(rd.t, i, "churn.test"), 0);
	}
	__atomic_store_n(&rd.stop, true, __ATOMIC_RELAXED);
	assert_int_equal(pthread_join(th, &ret), 0);
	assert_null(ret);
	ndc_dpdk_table_stats(rd.t, &s);
	print_message("reader: %lu lookups, %lu missed, %lu torn, over %lu rebuilds\n", rd.lookups,
		      rd.missed, rd.torn, (unsigned long)s.rebuilds);
	assert_int_equal(rd.missed, 0);
	assert_int_equal(rd.torn, 0);
	assert_true(rd.lookups > 0);
	assert_true(s.rebuilds >= 20); /* two rounds up to 30,500 keys and back */
	assert_int_equal(s.keys, STABLE);
	assert_true(s.slots <= 1024);
	for (unsigned int i = 0; i < STABLE; i++)
		assert_int_equal(look(rd.t, i, "stable.test"), 0);
	ndc_dpdk_table_free(rd.t);
}

/* dataplane.table_size stays a cap: full at it, replacing still works, nothing lost. */
static void test_cap(void **state)
{
	struct ndc_dpdk_table *t = table_new(1000);
	struct ndc_dpdk_table_stats s;

	(void)state;
	for (unsigned int i = 0; i < 1000; i++)
		assert_int_equal(publish(t, i, 0, "grow.test"), 0);
	assert_int_equal(publish(t, 1000, 0, "grow.test"), -ENOSPC);
	assert_int_equal(publish(t, 5, 1, "grow.test"), 0);
	ndc_dpdk_table_stats(t, &s);
	assert_int_equal(s.keys, 1000);
	assert_int_equal(s.max_keys, 1000);
	assert_int_equal(s.slots, 1000);
	check_range(t, 1000, 1001);
	ndc_dpdk_table_free(t);
}

static int setup(void **state)
{
	char prefix[64];
	char *argv[] = {"test_dpdk_table", "--no-huge",	     "--no-pci",   "-m",   "256",
			"--no-shconf",	   "--no-telemetry", "--lcores=0", prefix, NULL};

	(void)state;
	snprintf(prefix, sizeof(prefix), "--file-prefix=ndc-test-table-%d", (int)getpid());
	if (rte_eal_init(9, argv) < 0) {
		fprintf(stderr, "rte_eal_init failed: %s\n", rte_strerror(rte_errno));
		return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	char dir[PATH_MAX];

	(void)state;
	snprintf(dir, sizeof(dir), "%s", rte_eal_get_runtime_dir());
	rte_eal_cleanup();
	rmdir(dir); /* the EAL leaves its (empty) runtime directory */
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_grow_and_shrink),
	    cmocka_unit_test(test_readers_while_resizing),
	    cmocka_unit_test(test_cap),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
