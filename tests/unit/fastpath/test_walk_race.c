// SPDX-License-Identifier: MIT
/*
 * The kernel's walk (bpf/ndc_table.h, table_walk) against a Robin Hood move made between its two
 * reads of a bucket: the tag word, then the slot its tag names. The walk is compiled here in user
 * space, its map lookups answered from the writer's chunks in plain memory, so the insert that
 * moves the key on can be run exactly there, inside the lookup of the slot: the interleaving the
 * kernel meets only by chance (a22b889), made on demand.
 *
 * The scenario, in a table of one chunk: bucket B - 1 and bucket B each hold seven keys homed
 * there (both full, neither overflowed). Key N, homed at B - 1, finds no place there and takes
 * slot 0 of B from K, homed at B (Robin Hood: K is the first entry of B no farther from home than
 * N would be), which goes on to B + 1: K is copied to B + 1, B is flagged overflowed, and only
 * then slot 0 is overwritten with N. A walk for K that read B's tag word before the move and the
 * slot after it finds N where its tag pointed. The old word says B never overflowed: going by it
 * the walk ends, and a name present before and after the insert is called absent. The walk must
 * read the tag word again and pass the query as busy.
 *
 * Built twice (tests/meson.build): as is, where the walk must end busy; and with
 * NDC_FP_PLANT_NO_RECHECK, the walk without its second read, where it must end absent. The second
 * shows the interleaving really is the one that loses the name.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include <ndc/dns_wire.h>

#include "fastpath/internal.h"

/* The walk's lookups, answered from the test's chunks (below). */
static void *shim_lookup(void *map, const void *key);
#define bpf_map_lookup_elem(map, key) shim_lookup((void *)(map), (key))
#include "ndc_table.h"

#define HALF_CHUNKS 4
#define CANDIDATES 100000 /* names tried for the buckets' keys (about 98 homed in each) */

/* Plain-memory chunks for the writer, as tests/unit/fastpath/test_fastpath_table.c has them. */
static struct {
	void *slots[2 * HALF_CHUNKS], *bigs[2 * HALF_CHUNKS];
	uint64_t geom;
} mem;

static int mem_add(void *ctx, enum ndc_fp_chunk_kind kind, uint32_t idx, void **ret)
{
	void **where = kind == NDC_FP_CHUNK_SLOTS ? mem.slots : mem.bigs;

	(void)ctx;
	assert_true(idx < 2 * HALF_CHUNKS);
	where[idx] = calloc(1, ndc_fp_chunk_bytes(kind));
	assert_non_null(where[idx]);
	*ret = where[idx];
	return 0;
}

static int mem_commit(void *ctx)
{
	(void)ctx;
	return 0;
}

static void mem_drop(void *ctx, enum ndc_fp_chunk_kind kind, uint32_t idx, void *p)
{
	void **where = kind == NDC_FP_CHUNK_SLOTS ? mem.slots : mem.bigs;

	(void)ctx;
	free(p);
	where[idx] = NULL;
}

static void mem_geom(void *ctx, uint64_t geom)
{
	(void)ctx;
	mem.geom = geom;
}

static void mem_wait(void *ctx)
{
	(void)ctx;
}

static const struct ndc_fp_table_ops mem_ops = {.add = mem_add,
						.commit = mem_commit,
						.drop = mem_drop,
						.set_geom = mem_geom,
						.wait_readers = mem_wait};

/*
 * The kernel's maps, seen from here: ndc_answers' entry i is chunks[i], a handle on mem.slots[i];
 * a chunk's entry i is the slot-sized element i of its memory. The first lookup of a slot (not a
 * tag entry) after a tag entry's while `between` is set runs it first: the writer's step between
 * the walk's reads. (The walk reads the key's preferred slot before the tag word, abi.h
 * ndc_fp_mix_pref: a read ahead, not the slot the tag word chooses.)
 */
struct chunk_handle {
	uint8_t *mem;
};

static struct chunk_handle chunks[2 * HALF_CHUNKS];
static void (*between)(void);
static unsigned slot_lookups;
static bool tag_read;

static void *shim_lookup(void *map, const void *key)
{
	uint32_t i = *(const uint32_t *)key;
	struct chunk_handle *c;

	if (map == &ndc_answers) {
		if (i >= 2 * HALF_CHUNKS || !mem.slots[i])
			return NULL;
		chunks[i].mem = mem.slots[i];
		return &chunks[i];
	}
	c = map;
	assert_true(c >= chunks && c < chunks + 2 * HALF_CHUNKS);
	if (i >= NDC_FP_CHUNK_ENTRIES)
		return NULL;
	if (i < NDC_FP_CHUNK_TAG_SLOTS)
		tag_read = true;
	else if (tag_read) {
		slot_lookups++;
		if (between) {
			void (*step)(void) = between;

			between = NULL;
			step();
		}
	}
	return c->mem + (size_t)i * sizeof(struct ndc_fp_slot);
}

static struct ndc_fp_table table;

/* Name i in wire form ("r<i>.ns.svc.cluster.local"), with its key and a one-A value. */
struct name {
	struct ndc_fp_key k;
	struct ndc_fp_value v;
	uint32_t home;
	uint8_t tag;
};

static void name_make(uint32_t i, struct name *ret)
{
	char text[64];
	uint8_t *w = ret->v.name;
	size_t n = 0;

	memset(ret, 0, sizeof(*ret));
	snprintf(text, sizeof(text), "r%u.ns.svc.cluster.local", i);
	assert_int_equal(ndc_name_from_text(text, w, NDC_FP_NAME_MAX, &n), 0);
	assert_int_equal(ndc_fastpath_key(w, n, 1, &ret->k), 0);
	ret->v.name_len = (uint8_t)n;
	ret->v.len = 16;
	ret->v.ancount = 1;
	memset(ret->v.data, (int)(i & 0xff), 16);
	ret->home =
	    ndc_fp_home(ret->k.hash, ndc_home_key, 1, ret->k.region, NDC_FP_GEOM_BUCKETS(mem.geom),
			NDC_FP_GEOM_COMMON(mem.geom), NDC_FP_GEOM_RARE_BASE(mem.geom));
	ret->tag = ndc_fp_tag(ret->k.hash, ndc_home_key, 1);
}

/* The kernel's walk for name x: its slot, or NULL with *ret_busy set or not. */
static struct ndc_fp_slot *kernel_walk(const struct name *x, int *ret_busy)
{
	struct ndc_fp_scratch s = {0};
	struct ndc_question q = {0};

	q.name_len = x->v.name_len;
	*ret_busy = 0;
	return table_walk(&s, mem.geom, HALF_CHUNKS, &q, x->k.hash, 1, x->k.region, ret_busy);
}

static uint64_t tag_word_of(uint32_t b)
{
	return *ndc_fp_tag_word(&table.h[table.cur], b);
}

static struct name in_prev[7], in_b[7], newcomer;

static void insert_newcomer(void)
{
	assert_int_equal(ndc_fp_table_put(&table, &newcomer.k, &newcomer.v, false), 0);
}

static void test_move_between_reads(void **state)
{
	uint32_t n, b = 0, n_prev = 0, n_b = 0, victim = 7;
	struct ndc_fp_place at;
	struct ndc_fp_slot *sl;
	struct ndc_fp_reader r;
	struct ndc_fp_slot found;
	bool have_newcomer = false;
	struct name c;
	int busy;

	(void)state;
	/* home key 0: the program's ndc_home_key, a constant in read-only data here */
	assert_int_equal(ndc_fp_table_init(&table, &mem_ops, NULL, 1000, HALF_CHUNKS, 1, 0), 0);
	n = NDC_FP_GEOM_BUCKETS(mem.geom);
	assert_int_equal(n, NDC_FP_CHUNK_BUCKETS);
	/* B: name 0's home, kept off the chunk's ends (room for B - 1 and B + 1) */
	name_make(0, &c);
	b = c.home % (n - 3) + 1;
	for (uint32_t i = 0; i < CANDIDATES && (n_prev < 7 || n_b < 7); i++) {
		name_make(i, &c);
		if (c.home == b - 1 && n_prev < 7)
			in_prev[n_prev++] = c;
		else if (c.home == b && n_b < 7)
			in_b[n_b++] = c;
	}
	assert_int_equal(n_prev, 7);
	assert_int_equal(n_b, 7);
	for (int i = 0; i < 7; i++) {
		assert_int_equal(ndc_fp_table_put(&table, &in_prev[i].k, &in_prev[i].v, false), 0);
		assert_int_equal(ndc_fp_table_put(&table, &in_b[i].k, &in_b[i].v, false), 0);
	}
	/* both buckets full, neither overflowed: every key in its home bucket */
	for (uint32_t j = 0; j < NDC_FP_BUCKET; j++) {
		assert_int_not_equal(ndc_fp_tag_at(tag_word_of(b - 1), j), NDC_FP_TAG_EMPTY);
		assert_int_not_equal(ndc_fp_tag_at(tag_word_of(b), j), NDC_FP_TAG_EMPTY);
	}
	assert_false(ndc_fp_overflowed(tag_word_of(b - 1)));
	assert_false(ndc_fp_overflowed(tag_word_of(b)));
	/* K: the key in slot 0 of B, which the newcomer will take */
	r = ndc_fp_reader_mapped(&table, table.cur);
	for (int i = 0; i < 7; i++) {
		assert_int_equal(ndc_fp_walk(&r, &in_b[i].k, &at, &found), 0);
		assert_int_equal(at.b, b);
		if (at.j == 0)
			victim = (uint32_t)i;
	}
	assert_true(victim < 7);
	/* N: homed at B - 1, its tag in neither bucket (then Robin Hood takes slot 0 of B) */
	for (uint32_t i = 0; i < CANDIDATES; i++) {
		bool clash = false;

		name_make(i, &c);
		if (c.home != b - 1)
			continue;
		for (uint32_t j = 0; j < NDC_FP_BUCKET; j++)
			clash |= ndc_fp_tag_at(tag_word_of(b - 1), j) == c.tag ||
				 ndc_fp_tag_at(tag_word_of(b), j) == c.tag;
		for (int p = 0; p < 7; p++)
			clash |= memcmp(&c.k, &in_prev[p].k, sizeof(c.k)) == 0;
		if (!clash) {
			newcomer = c;
			have_newcomer = true;
			break;
		}
	}
	assert_true(have_newcomer);
	assert_int_equal(newcomer.home, b - 1);

	/* before: the kernel's walk finds K in slot 0 of B */
	sl = kernel_walk(&in_b[victim], &busy);
	assert_non_null(sl);
	assert_int_equal(busy, 0);

	/* the insert between the walk's read of B's tag word and its read of slot 0 */
	slot_lookups = 0;
	tag_read = false;
	between = insert_newcomer;
	sl = kernel_walk(&in_b[victim], &busy);
	assert_null(between); /* it ran */
	assert_int_equal(slot_lookups, 1);
	print_message("    walk for K across the move: slot %s, busy %d\n", sl ? "found" : "none",
		      busy);
#ifdef NDC_FP_PLANT_NO_RECHECK
	/* without the second read: K, present before and after, is called absent */
	assert_null(sl);
	assert_int_equal(busy, 0);
#else
	assert_null(sl);
	assert_int_equal(busy, 1);
#endif

	/* after: K was moved on to B + 1, B is flagged, and every walk finds K and N */
	assert_true(ndc_fp_overflowed(tag_word_of(b)));
	r = ndc_fp_reader_mapped(&table, table.cur);
	assert_int_equal(ndc_fp_walk(&r, &in_b[victim].k, &at, &found), 0);
	assert_int_equal(at.b, b + 1);
	assert_int_equal(ndc_fp_walk(&r, &newcomer.k, &at, &found), 0);
	assert_int_equal(at.b, b);
	assert_int_equal(at.j, 0);
	sl = kernel_walk(&in_b[victim], &busy);
	assert_non_null(sl);
	assert_int_equal(busy, 0);
	assert_int_equal(sl->check, (uint32_t)(in_b[victim].k.hash >> 32));
	sl = kernel_walk(&newcomer, &busy);
	assert_non_null(sl);
	ndc_fp_table_fini(&table);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_move_between_reads),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
