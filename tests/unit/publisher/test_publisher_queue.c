// SPDX-License-Identifier: MIT
/*
 * The publisher's queue between the cache hook and the table (issue 34 item 5), against a fake
 * answer table whose writes can be held, as a table rebuild holds them for RCU grace periods:
 *   - order: puts and deletes of one key reach the table in the order the hook saw them;
 *   - a put that finds the queue full deletes its key's entry instead (never the older answer
 *     left), counted as dropped;
 *   - a delete that finds the queue full purges every upstream answer once the queue is applied,
 *     counted: the key whose delete was dropped is not served;
 *   - a cache insert never waits for a table write: held writes, inserts still return (an
 *     alarm fails the test if one waits);
 *   - free applies what is queued.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ndc/abi.h>
#include <ndc/answer_table.h>
#include <ndc/dns_wire.h>

#include "publisher.h"
#include "query/query.h"

/* ---- the fake table: (name, qtype) -> the last byte of the A record, and a log of writes ---- */

#define SLOTS 64
#define LOG_MAX 256

struct slot {
	bool used;
	uint8_t name[NDC_NAME_MAX];
	size_t nlen;
	uint16_t qtype;
	uint8_t version;
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct slot slot[SLOTS];
	char log[LOG_MAX][48]; /* "P name v" or "U name", in the order written */
	size_t nlog;
	bool hold;    /* publishes wait while set (a rebuild) */
	bool holding; /* one is waiting */
} fake = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

static void text_of(const uint8_t *lname, size_t nlen, char *out)
{
	size_t o = 0;

	for (size_t i = 0; i < nlen && lname[i];) {
		size_t l = lname[i++];

		if (o)
			out[o++] = '.';
		memcpy(out + o, lname + i, l);
		o += l;
		i += l;
	}
	out[o] = 0;
}

static struct slot *find(const uint8_t *lname, size_t nlen, uint16_t qtype)
{
	for (int i = 0; i < SLOTS; i++) {
		struct slot *s = &fake.slot[i];

		if (s->used && s->nlen == nlen && s->qtype == qtype &&
		    !memcmp(s->name, lname, nlen))
			return s;
	}
	return NULL;
}

static int fake_publish(void *table, const uint8_t *lname, size_t nlen, uint16_t qtype,
			const struct ndc_answer *a, uint32_t ttl_s)
{
	struct slot *s;
	char name[NDC_NAME_MAX * 4];

	(void)table;
	(void)ttl_s;
	pthread_mutex_lock(&fake.lock);
	while (fake.hold) {
		fake.holding = true;
		pthread_cond_broadcast(&fake.cond);
		pthread_cond_wait(&fake.cond, &fake.lock);
	}
	fake.holding = false;
	s = find(lname, nlen, qtype);
	for (int i = 0; !s && i < SLOTS; i++)
		if (!fake.slot[i].used)
			s = &fake.slot[i];
	assert_non_null(s);
	s->used = true;
	memcpy(s->name, lname, nlen);
	s->nlen = nlen;
	s->qtype = qtype;
	s->version = a->data[a->len - 1];
	text_of(lname, nlen, name);
	if (fake.nlog < LOG_MAX)
		snprintf(fake.log[fake.nlog++], sizeof(fake.log[0]), "P %.30s %u", name,
			 s->version);
	pthread_mutex_unlock(&fake.lock);
	return 0;
}

static int fake_unpublish(void *table, const uint8_t *lname, size_t nlen, uint16_t qtype)
{
	struct slot *s;
	char name[NDC_NAME_MAX * 4];

	(void)table;
	pthread_mutex_lock(&fake.lock);
	s = find(lname, nlen, qtype);
	if (s)
		s->used = false;
	text_of(lname, nlen, name);
	if (fake.nlog < LOG_MAX)
		snprintf(fake.log[fake.nlog++], sizeof(fake.log[0]), "U %.30s", name);
	pthread_mutex_unlock(&fake.lock);
	return s ? 0 : -ENOENT;
}

static int fake_unpublish_expired(void *table, const struct ndc_fp_key *k)
{
	(void)table;
	(void)k;
	return -EAGAIN; /* the tests' TTLs outlive them */
}

static int fake_set_nx(void *table, const struct ndc_answer *nx)
{
	(void)table;
	(void)nx;
	return 0;
}

static int fake_set_synced(void *table, bool synced)
{
	(void)table;
	(void)synced;
	return 0;
}

static const struct ndc_answer_table_ops fake_ops = {
    .publish = fake_publish,
    .unpublish = fake_unpublish,
    .unpublish_expired = fake_unpublish_expired,
    .set_nx = fake_set_nx,
    .set_synced = fake_set_synced,
};

/* Holds the table's writes (wait_holding: until the drain thread waits in one). */
static void hold_writes(void)
{
	pthread_mutex_lock(&fake.lock);
	fake.hold = true;
	pthread_mutex_unlock(&fake.lock);
}

static void wait_holding(void)
{
	pthread_mutex_lock(&fake.lock);
	while (!fake.holding)
		pthread_cond_wait(&fake.cond, &fake.lock);
	pthread_mutex_unlock(&fake.lock);
}

static void release_writes(void)
{
	pthread_mutex_lock(&fake.lock);
	fake.hold = false;
	pthread_cond_broadcast(&fake.cond);
	pthread_mutex_unlock(&fake.lock);
}

/* ---- answers ---- */

union answer_buf {
	struct ndc_answer a;
	uint8_t b[sizeof(struct ndc_answer) + NDC_ANSWER_DATA_MAX];
};

static size_t wire(const char *text, uint8_t *out)
{
	size_t o = 0;

	while (*text) {
		const char *dot = strchr(text, '.');
		size_t l = dot ? (size_t)(dot - text) : strlen(text);

		out[o++] = (uint8_t)l;
		memcpy(out + o, text, l);
		o += l;
		text += l + (dot ? 1 : 0);
	}
	out[o++] = 0;
	return o;
}

/* An A answer of 192.0.2.version for name. */
static void build(union answer_buf *b, const uint8_t *lname, size_t nlen, uint8_t version)
{
	struct ndc_ab ab;
	uint8_t ip[4] = {192, 0, 2, version};

	ndc_ab_init(&ab, &b->a, NDC_ANSWER_DATA_MAX, lname, nlen);
	ndc_ab_rr(&ab, NDC_SEC_ANSWER, lname, nlen, NDC_T_A, NDC_C_IN, 300, ip, 4);
	assert_int_equal(ndc_ab_finish(&ab, NDC_RCODE_NOERROR, false), 0);
}

/* What the cache hook is called with for a put (version > 0) or a delete (0) of name A. */
static void hook(struct ndc_publisher *p, const char *name, uint8_t version)
{
	uint8_t lname[NDC_NAME_MAX];
	size_t nlen = wire(name, lname);
	union answer_buf a;

	if (version)
		build(&a, lname, nlen, version);
	ndc_publisher_cache_hook(p, version ? &a.a : NULL, lname, nlen, NDC_T_A, NDC_C_IN, 300);
}

/* The version the table holds for name, 0 when it has none. */
static int in_table(const char *name)
{
	uint8_t lname[NDC_NAME_MAX];
	size_t nlen = wire(name, lname);
	struct slot *s;
	int v;

	pthread_mutex_lock(&fake.lock);
	s = find(lname, nlen, NDC_T_A);
	v = s ? s->version : 0;
	pthread_mutex_unlock(&fake.lock);
	return v;
}

static int setup(void **state)
{
	struct ndc_publisher *p;

	pthread_mutex_lock(&fake.lock);
	memset(fake.slot, 0, sizeof(fake.slot));
	fake.nlog = 0;
	fake.hold = fake.holding = false;
	pthread_mutex_unlock(&fake.lock);
	assert_int_equal(ndc_publisher_new(&fake_ops, NULL, &p), 0);
	*state = p;
	return 0;
}

static int teardown(void **state)
{
	release_writes();
	ndc_publisher_free(*state);
	return 0;
}

/* ---- the tests ---- */

static void test_order(void **state)
{
	struct ndc_publisher *p = *state;
	struct ndc_publisher_stats st;
	static const char *const want[] = {
	    "P gate.example.com 1", "P k.example.com 1",    "U k.example.com",
	    "P k.example.com 2",    "P k.example.com 3",    "U k.example.com",
	    "P k.example.com 4",    "P gone.example.com 1", "U gone.example.com",
	};

	/* Everything below is queued behind a held write, as behind a rebuild. */
	hold_writes();
	hook(p, "gate.example.com", 1);
	wait_holding();
	hook(p, "k.example.com", 1);
	hook(p, "k.example.com", 0);
	hook(p, "k.example.com", 2);
	hook(p, "k.example.com", 3);
	hook(p, "k.example.com", 0);
	hook(p, "k.example.com", 4);
	hook(p, "gone.example.com", 1);
	hook(p, "gone.example.com", 0);
	ndc_publisher_stats(p, &st);
	assert_int_equal(st.queue_depth, 9); /* the held one counts until it is written */
	assert_int_equal(in_table("k.example.com"), 0);
	release_writes();
	ndc_publisher_flush(p);

	assert_int_equal(fake.nlog, sizeof(want) / sizeof(want[0]));
	for (size_t i = 0; i < fake.nlog; i++)
		assert_string_equal(fake.log[i], want[i]);
	assert_int_equal(in_table("k.example.com"), 4);
	assert_int_equal(in_table("gone.example.com"), 0);
	ndc_publisher_stats(p, &st);
	assert_int_equal(st.queue_depth, 0);
	assert_int_equal(st.queue_dropped, 0);
	assert_int_equal(st.queue_purges, 0);
	assert_int_equal(st.tracked, 2); /* gate and k */
}

static void test_full_put_deletes(void **state)
{
	struct ndc_publisher *p = *state;
	struct ndc_publisher_stats st;
	char name[64];

	/* 8 entries: puts may fill 6 of them, deletes all 8. */
	ndc_publisher_queue_limits(p, 8, 1u << 20);
	hook(p, "k.example.com", 1);
	ndc_publisher_flush(p);
	assert_int_equal(in_table("k.example.com"), 1);

	hold_writes();
	hook(p, "gate.example.com", 1);
	wait_holding();
	hook(p, "k.example.com", 2); /* queued: 2 */
	for (int i = 0; i < 4; i++) {
		snprintf(name, sizeof(name), "f%d.example.com", i);
		hook(p, name, 1); /* 3..6 */
	}
	ndc_publisher_stats(p, &st);
	assert_int_equal(st.queue_depth, 6);
	assert_int_equal(st.queue_dropped, 0);

	/* The cache replaced k's answer: no room for 3, so k's entry must go, not stay at 2. */
	hook(p, "k.example.com", 3);
	ndc_publisher_stats(p, &st);
	assert_int_equal(st.queue_depth, 7); /* its delete */
	assert_int_equal(st.queue_dropped, 1);
	release_writes();
	ndc_publisher_flush(p);
	assert_int_equal(in_table("k.example.com"), 0);
	for (int i = 0; i < 4; i++) {
		snprintf(name, sizeof(name), "f%d.example.com", i);
		assert_int_equal(in_table(name), 1);
	}
	ndc_publisher_stats(p, &st);
	assert_int_equal(st.queue_depth, 0);
	assert_int_equal(st.queue_purges, 0);

	/* The bytes bound as well: room for the gate's put, not for a second one. */
	ndc_publisher_queue_limits(p, 100, 400);
	hold_writes();
	hook(p, "gate.example.com", 2);
	wait_holding();
	hook(p, "f0.example.com", 2);
	ndc_publisher_stats(p, &st);
	assert_int_equal(st.queue_dropped, 2);
	release_writes();
	ndc_publisher_flush(p);
	assert_int_equal(in_table("f0.example.com"), 0);
	assert_int_equal(in_table("gate.example.com"), 2);
}

static void test_full_delete_purges(void **state)
{
	struct ndc_publisher *p = *state;
	struct ndc_publisher_stats st;

	/* 4 entries: puts may fill 3. */
	ndc_publisher_queue_limits(p, 4, 1u << 20);
	hook(p, "old.example.com", 1);
	hook(p, "kept.example.com", 1);
	ndc_publisher_flush(p);
	assert_int_equal(in_table("old.example.com"), 1);

	hold_writes();
	hook(p, "gate.example.com", 1); /* 1 */
	wait_holding();
	hook(p, "a.example.com", 1);   /* 2 */
	hook(p, "b.example.com", 1);   /* 3 */
	hook(p, "x.example.com", 0);   /* 4: deletes may use the rest */
	hook(p, "old.example.com", 0); /* no room even for a delete */
	ndc_publisher_stats(p, &st);
	assert_int_equal(st.queue_depth, 4);
	assert_int_equal(st.queue_dropped, 1);
	release_writes();
	ndc_publisher_flush(p);

	/* The cache dropped old: the kernel must not go on serving it. Nor anything else cached. */
	assert_int_equal(in_table("old.example.com"), 0);
	assert_int_equal(in_table("kept.example.com"), 0);
	assert_int_equal(in_table("a.example.com"), 0);
	assert_int_equal(in_table("gate.example.com"), 0);
	ndc_publisher_stats(p, &st);
	assert_int_equal(st.queue_purges, 1);
	assert_int_equal(st.tracked, 0);
	assert_int_equal(st.queue_depth, 0);

	/* And it publishes again afterwards. */
	hook(p, "new.example.com", 5);
	ndc_publisher_flush(p);
	assert_int_equal(in_table("new.example.com"), 5);
}

static void on_alarm(int sig)
{
	static const char msg[] = "test_publisher_queue: a cache insert waited for a held table "
				  "write (the hook writes the table under the shard's lock)\n";

	(void)sig;
	(void)!write(2, msg, sizeof(msg) - 1);
	_exit(1);
}

static void test_insert_never_waits(void **state)
{
	struct ndc_publisher *p = *state;
	struct ndc_cache_opts o = {
	    .max_entries = 64, /* one shard */
	    .max_bytes = 1u << 20,
	    .max_ttl = 86400,
	    .neg_max_ttl = 3600,
	    .stale_max = 3600,
	};
	struct ndc_cache *c;
	struct ndc_cache_stats cs;
	union answer_buf a;
	uint8_t lname[NDC_NAME_MAX];
	char name[64];
	size_t nlen;

	assert_int_equal(ndc_cache_new(&o, &c), 0);
	ndc_cache_set_hook(c, ndc_publisher_cache_hook, p);
	hold_writes();
	nlen = wire("gate.example.com", lname);
	build(&a, lname, nlen, 1);
	assert_int_equal(ndc_cache_put(c, lname, nlen, NDC_T_A, NDC_C_IN, &a.a, 300, ndc_now_ms()),
			 0);
	wait_holding();

	/* The table's writer is stuck (a rebuild): 200 inserts and evictions still go through. */
	signal(SIGALRM, on_alarm);
	alarm(10);
	for (int i = 0; i < 200; i++) {
		snprintf(name, sizeof(name), "n%d.example.com", i);
		nlen = wire(name, lname);
		build(&a, lname, nlen, 1);
		assert_int_equal(
		    ndc_cache_put(c, lname, nlen, NDC_T_A, NDC_C_IN, &a.a, 300, ndc_now_ms()), 0);
	}
	alarm(0);
	ndc_cache_stats(c, &cs);
	assert_int_equal(cs.evictions, 201 - 64);
	release_writes();
	ndc_publisher_flush(p);
	/* The last 64 are the cache's: exactly those in the table. */
	assert_int_equal(in_table("n0.example.com"), 0);
	assert_int_equal(in_table("n136.example.com"), 1);
	assert_int_equal(in_table("n199.example.com"), 1);
	assert_int_equal(in_table("gate.example.com"), 0);
	ndc_cache_set_hook(c, NULL, NULL);
	ndc_cache_free(c);
}

static void test_free_applies(void **state)
{
	struct ndc_publisher *p = *state;

	hold_writes();
	hook(p, "gate.example.com", 1);
	wait_holding();
	hook(p, "last.example.com", 7);
	release_writes();
	ndc_publisher_free(p);
	*state = NULL;
	assert_int_equal(in_table("last.example.com"), 7);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_order, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_full_put_deletes, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_full_delete_purges, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_insert_never_waits, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_free_applies, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
