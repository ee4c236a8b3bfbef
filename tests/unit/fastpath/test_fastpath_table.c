// SPDX-License-Identifier: MIT
/*
 * The answer table's writer (dataplane/fastpath/table.c) over plain memory: every key put is
 * found with its value, growth and shrink lose nothing, the loads and the overflowed buckets
 * stay where the table's rules keep them, and the bytes stay within twice what the keys need.
 * The kernel's reader walks the same layout (tests/bpf/test_fastpath_bpf.c runs it).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fastpath/internal.h"

struct mem {
	void *slots[8192], *bigs[8192];
	uint64_t geom;
	int waits, chunks, commits;
};

static int mem_add(void *ctx, enum ndc_fp_chunk_kind kind, uint32_t idx, void **ret)
{
	struct mem *m = ctx;
	void **where = kind == NDC_FP_CHUNK_SLOTS ? m->slots : m->bigs;

	assert_true(idx < 8192);
	assert_null(where[idx]);
	where[idx] = calloc(1, ndc_fp_chunk_bytes(kind));
	if (!where[idx])
		return -ENOMEM;
	m->chunks++;
	*ret = where[idx];
	return 0;
}

static int mem_commit(void *ctx)
{
	((struct mem *)ctx)->commits++;
	return 0;
}

static void mem_drop(void *ctx, enum ndc_fp_chunk_kind kind, uint32_t idx, void *p)
{
	struct mem *m = ctx;
	void **where = kind == NDC_FP_CHUNK_SLOTS ? m->slots : m->bigs;

	assert_ptr_equal(where[idx], p);
	free(p);
	where[idx] = NULL;
	m->chunks--;
}

static void mem_geom(void *ctx, uint64_t geom)
{
	((struct mem *)ctx)->geom = geom;
}

static void mem_wait(void *ctx)
{
	((struct mem *)ctx)->waits++;
}

static const struct ndc_fp_table_ops mem_ops = {.add = mem_add,
						.commit = mem_commit,
						.drop = mem_drop,
						.set_geom = mem_geom,
						.wait_readers = mem_wait};

/* Text (lowercase) to wire form; its length. */
static size_t wire(const char *text, uint8_t *out)
{
	char t[256];
	size_t n = 0;

	snprintf(t, sizeof(t), "%s", text);
	for (char *label = strtok(t, "."); label; label = strtok(NULL, ".")) {
		size_t l = strlen(label);

		out[n++] = (uint8_t)l;
		memcpy(out + n, label, l);
		n += l;
	}
	out[n++] = 0;
	return n;
}

/* Name i in wire form ("n<i>.ns<i%50>.svc.cluster.local"), its length. */
static size_t name_of(uint32_t i, uint8_t *out)
{
	char text[64];

	snprintf(text, sizeof(text), "n%u.ns%u.svc.cluster.local", i, i % 50);
	return wire(text, out);
}

/* Key and value of (name i, qtype): an answer of len bytes (a slot's, or a big one's). */
static void entry(uint32_t i, uint16_t qtype, uint16_t len, struct ndc_fp_key *k,
		  struct ndc_fp_value *v)
{
	uint8_t name[NDC_FP_NAME_MAX];
	size_t n = name_of(i, name);

	assert_int_equal(ndc_fastpath_key(name, n, qtype, k), 0);
	memset(v, 0, sizeof(*v));
	v->name_len = (uint8_t)n;
	memcpy(v->name, name, n);
	v->len = len;
	v->ancount = 1;
	for (uint16_t b = 0; b < len; b++)
		v->data[b] = (uint8_t)(i * 31 + qtype + b);
}

static uint16_t len_of(uint32_t i, uint16_t qtype)
{
	/* one in 5 A answers is big: of one, two and three records (abi.h, ndc_fp_ext_bytes) */
	static const uint16_t big[] = {90, 300, 500};

	return i % 5 == 0 && qtype == 1 ? big[(i / 5) % 3] : 16;
}

static void check_all(struct ndc_fp_table *t, uint32_t from, uint32_t to, bool present)
{
	static const uint16_t types[] = {1, 28, NDC_FP_QTYPE_OTHER};
	struct ndc_fp_key k;
	struct ndc_fp_value v, got;

	for (uint32_t i = from; i < to; i++)
		for (size_t q = 0; q < 3; q++) {
			entry(i, types[q], len_of(i, types[q]), &k, &v);
			if (!present) {
				assert_int_equal(ndc_fp_table_get(t, &k, &got), -ENOENT);
				continue;
			}
			if (ndc_fp_table_get(t, &k, &got))
				fail_msg("name %u type %u: not found", i, types[q]);
			assert_memory_equal(&got, &v, sizeof(v));
		}
}

static void put_range(struct ndc_fp_table *t, uint32_t from, uint32_t to)
{
	static const uint16_t types[] = {1, 28, NDC_FP_QTYPE_OTHER};
	struct ndc_fp_key k;
	struct ndc_fp_value v;

	for (uint32_t i = from; i < to; i++)
		for (size_t q = 0; q < 3; q++) {
			entry(i, types[q], len_of(i, types[q]), &k, &v);
			assert_int_equal(ndc_fp_table_put(t, &k, &v, false), 0);
		}
}

static void del_range(struct ndc_fp_table *t, uint32_t from, uint32_t to)
{
	static const uint16_t types[] = {1, 28, NDC_FP_QTYPE_OTHER};
	struct ndc_fp_key k;
	struct ndc_fp_value v;

	for (uint32_t i = from; i < to; i++)
		for (size_t q = 0; q < 3; q++) {
			entry(i, types[q], len_of(i, types[q]), &k, &v);
			assert_int_equal(ndc_fp_table_del(t, &k, v.name, v.name_len, 0), 0);
		}
}

/*
 * The loads the rules promise, and the bytes within 2x of the keys' need once the table is more
 * than a few chunks.
 */
static void check_shape(struct ndc_fp_table *t, bool growing)
{
	struct ndc_fp_table_usage u;
	const struct ndc_fp_half *h = &t->h[t->cur];

	ndc_fp_table_stats(t, &u);
	assert_true(u.keys <= u.slots * 93 / 100 + 1); /* LOAD_GROW */
	assert_true(h->overflows <= h->n_buckets);
	/* while it only grows, big answers' records are packed: at most a chunk's worth unused */
	if (growing && u.big_chunks > (u.bigs + NDC_FP_BIG_CHUNK - 1) / NDC_FP_BIG_CHUNK + 1)
		fail_msg("%lu big records in %lu chunks", (unsigned long)u.bigs,
			 (unsigned long)u.big_chunks);
	/* below a few chunks' worth the granularity of one chunk of each kind decides */
	if (u.chunks >= 4 && u.bytes > 2 * u.needed)
		fail_msg("keys %lu slots %lu chunks %lu bigs %lu in %lu chunks: %lu bytes for %lu",
			 (unsigned long)u.keys, (unsigned long)u.slots, (unsigned long)u.chunks,
			 (unsigned long)u.bigs, (unsigned long)u.big_chunks, (unsigned long)u.bytes,
			 (unsigned long)u.needed);
}

static void test_grow_and_shrink(void **state)
{
	struct mem *m = calloc(1, sizeof(*m));
	struct ndc_fp_table t;
	struct ndc_fp_table_usage u;

	(void)state;
	assert_int_equal(ndc_fp_table_init(&t, &mem_ops, m, 100000, 4000, 4000, 0x1234567), 0);
	assert_int_equal(m->chunks, 1);
	put_range(&t, 0, 50);
	check_all(&t, 0, 50, true);
	check_shape(&t, true);
	/* growth, 150 to 30,000 keys */
	for (uint32_t n = 50; n < 10000; n += 995) {
		put_range(&t, n, n + 995);
		check_shape(&t, true);
	}
	check_all(&t, 0, 10000, true);
	ndc_fp_table_stats(&t, &u);
	print_message("30,000 keys: %lu slots (load %lu%%), %lu rebuilds, %lu bytes for %lu\n",
		      (unsigned long)u.slots, (unsigned long)(u.keys * 100 / u.slots),
		      (unsigned long)u.rebuilds, (unsigned long)u.bytes, (unsigned long)u.needed);
	assert_int_equal(u.keys, 30000);
	assert_true(u.rebuilds > 3);
	assert_int_equal(m->waits, (int)u.rebuilds); /* every switch waited for the readers */
	/* one commit per rebuild (and per big chunk added between them), not one per chunk */
	assert_true(m->commits <= 1 + (int)u.rebuilds + (int)u.big_chunks * 2);
	/* and back: what stays is found throughout */
	for (uint32_t n = 10000, m; n > 20; n = m) {
		m = n > 1010 ? n - 990 : 20;
		del_range(&t, m, n);
		check_all(&t, 0, m > 500 ? 500 : m, true);
		check_shape(&t, false);
	}
	check_all(&t, 0, 20, true);
	check_all(&t, 20, 10000, false);
	ndc_fp_table_stats(&t, &u);
	assert_int_equal(u.keys, 60);
	assert_int_equal(u.chunks, 1);
	ndc_fp_table_fini(&t);
	assert_int_equal(m->chunks, 0);
	free(m);
}

/* Tags in use in the live half: one per key, or the writer left a key in two places. */
static uint64_t tags_in_use(const struct ndc_fp_table *t)
{
	const struct ndc_fp_half *h = &t->h[t->cur];
	uint64_t n = 0;

	for (uint32_t b = 0; b < h->n_buckets; b++) {
		uint64_t w = ((const uint64_t *)
				  h->chunks[b / NDC_FP_CHUNK_BUCKETS])[b % NDC_FP_CHUNK_BUCKETS];

		for (uint32_t j = 0; j < NDC_FP_BUCKET; j++)
			n += (uint8_t)(w >> (8 * j)) != NDC_FP_TAG_EMPTY;
	}
	return n;
}

/* A table (over plain memory, in *ret_m) holding names 0 to n - 1, type A, a slot's answer each. */
static void table_with(struct ndc_fp_table *t, struct mem **ret_m, uint32_t n)
{
	struct ndc_fp_key k;
	struct ndc_fp_value v;

	*ret_m = calloc(1, sizeof(**ret_m));
	assert_non_null(*ret_m);
	assert_int_equal(ndc_fp_table_init(t, &mem_ops, *ret_m, 100000, 64, 64, 0x5eed), 0);
	for (uint32_t i = 0; i < n; i++) {
		entry(i, 1, 16, &k, &v);
		assert_int_equal(ndc_fp_table_put(t, &k, &v, false), 0);
	}
}

/*
 * Robin Hood placement fills one chunk to 92% with every key within a walk's reach: no rebuild.
 * (First come, first placed stopped near 80%: some key found no bucket within
 * NDC_FP_PROBE_BUCKETS of home and the table grew.) Holes made by deletions are filled again.
 */
static void test_dense_fill(void **state)
{
	const uint32_t slots = NDC_FP_CHUNK_BUCKETS * NDC_FP_BUCKET, n = slots * 92 / 100;
	struct ndc_fp_table t;
	struct ndc_fp_table_usage u;
	struct ndc_fp_key k;
	struct ndc_fp_value v, got;
	struct mem *m;

	(void)state;
	table_with(&t, &m, n);
	for (uint32_t i = 0; i < n; i += 3) {
		entry(i, 1, 16, &k, &v);
		assert_int_equal(ndc_fp_table_del(&t, &k, v.name, v.name_len, 0), 0);
	}
	for (uint32_t i = 0; i < n; i += 3) {
		entry(i, 1, 16, &k, &v);
		assert_int_equal(ndc_fp_table_put(&t, &k, &v, false), 0);
	}
	ndc_fp_table_stats(&t, &u);
	print_message("%lu keys in %lu slots, %lu rebuilds\n", (unsigned long)u.keys,
		      (unsigned long)u.slots, (unsigned long)u.rebuilds);
	assert_int_equal(u.keys, n);
	assert_int_equal(u.slots, slots);
	assert_int_equal(u.rebuilds, 0);
	assert_int_equal(tags_in_use(&t), n);
	for (uint32_t i = 0; i < n; i++) {
		entry(i, 1, 16, &k, &v);
		if (ndc_fp_table_get(&t, &k, &got))
			fail_msg("name %u: not found", i);
		assert_memory_equal(&got, &v, sizeof(v));
	}
	ndc_fp_table_fini(&t);
	free(m);
}

/*
 * Keys sit in their preferred slot (abi.h, ndc_fp_mix_pref: the slot the kernel's walk reads
 * while it reads the tag word) when it was free: at a table's usual load most of them (about 60%;
 * with the first free slot, as before, about 13%), including after a rebuild.
 */
static void test_preferred_slots(void **state)
{
	const uint32_t n = NDC_FP_CHUNK_BUCKETS * NDC_FP_BUCKET * 70 / 100;
	struct ndc_fp_table t;
	struct ndc_fp_key k;
	struct ndc_fp_value v;
	struct mem *m;

	(void)state;
	table_with(&t, &m, n);
	for (int round = 0; round < 2; round++) {
		struct ndc_fp_reader r = ndc_fp_reader_mapped(&t, t.cur);
		uint32_t pref = 0, home = 0;

		for (uint32_t i = 0; i < n; i++) {
			struct ndc_fp_place at;
			struct ndc_fp_slot found;

			entry(i, 1, 16, &k, &v);
			assert_int_equal(ndc_fp_walk(&r, &k, &at, &found), 0);
			home += at.p == 0;
			pref +=
			    at.p == 0 &&
			    at.j == ndc_fp_mix_pref(ndc_fp_key_mix(k.hash, t.home_key, k.qtype));
		}
		print_message("%s: %u of %u keys at home, %u in their preferred slot\n",
			      round ? "after a rebuild" : "as put", home, n, pref);
		assert_true(pref * 100 >= n * 50);
		/* a rebuild places every key again, bucket by bucket */
		assert_int_equal(ndc_fp_table_rebuild(&t), 0);
	}
	ndc_fp_table_fini(&t);
	free(m);
}

/*
 * An insert whose big answer finds no record after it has moved other keys (the Robin Hood
 * chain): every key keeps its one place and its answer, the table its count.
 */
static void test_failed_insert_after_moves(void **state)
{
	const uint32_t n = NDC_FP_CHUNK_BUCKETS * NDC_FP_BUCKET * 90 / 100;
	struct mem *m = calloc(1, sizeof(*m));
	struct ndc_fp_table t;
	struct ndc_fp_table_usage u;
	struct ndc_fp_key k;
	struct ndc_fp_value v, got;
	uint32_t i, refused = 0;

	(void)state;
	/* one chunk of big records at most: 1,536 records, 512 answers of three */
	assert_int_equal(ndc_fp_table_init(&t, &mem_ops, m, 100000, 64, 1, 0xfeed), 0);
	for (i = 0; i < n; i++) {
		entry(i, 1, i % 4 ? 16 : 500, &k, &v);
		if (ndc_fp_table_put(&t, &k, &v, false) == -ENOSPC) {
			assert_int_equal(i % 4, 0); /* only a big answer is refused */
			refused++;
		}
	}
	ndc_fp_table_stats(&t, &u);
	print_message("%u keys put, %u big answers refused, %lu rebuilds\n", n, refused,
		      (unsigned long)u.rebuilds);
	assert_true(refused > 0);
	assert_int_equal(u.keys, n - refused);
	assert_int_equal(tags_in_use(&t), u.keys);
	for (i = 0; i < n; i++) {
		int r;

		entry(i, 1, i % 4 ? 16 : 500, &k, &v);
		r = ndc_fp_table_get(&t, &k, &got);
		if (r == -ENOENT && i % 4 == 0)
			continue;
		if (r)
			fail_msg("name %u: %d", i, r);
		assert_memory_equal(&got, &v, sizeof(v));
	}
	ndc_fp_table_fini(&t);
	free(m);
}

/*
 * Slots leave out the suffix a name ends in (abi.h, NDC_FP_V_SFX; the agent's suffixes from
 * ndc_fastpath_config): the longest one at a label's start, none when it is only bytes; every
 * value reads back whole, and a named port's SRV answer (72 bytes after a 49-byte name) is in
 * its slot, not a big record.
 */
static void test_suffixes(void **state)
{
	static const struct {
		const char *name;
		uint32_t sfx, plen;
	} cases[] = {
	    {"web.shop.svc.cluster.local", 1, 9}, /* "svc." and the zone */
	    {"svc.cluster.local", 1, 0},	  /* the suffix itself */
	    {"web.pod.cluster.local", 2, 8},	  /* the zone */
	    {"1.0.96.10.in-addr.arpa", 3, 10},	  /* a v4 reverse name */
	    {"web.example.org", 0, 17},		  /* none */
	    {"web.xsvc.cluster.local", 2, 9},	  /* "svc" only as the end of a label */
	};
	struct ndc_fp_config_opts o = {0};
	struct ndc_fp_config c;
	struct mem *m = calloc(1, sizeof(*m));
	struct ndc_fp_table t;
	struct ndc_fp_table_usage u;
	struct ndc_fp_key k;
	struct ndc_fp_value v, got;
	uint8_t zone[64], name[NDC_FP_NAME_MAX];
	uint32_t plen;
	size_t n;

	(void)state;
	o.zone = zone;
	o.zone_len = wire("cluster.local", zone);
	assert_int_equal(ndc_fastpath_config(&o, &c), 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		n = wire(cases[i].name, name);
		if (ndc_fp_sfx_pick(&c.sfx, name, (uint32_t)n, &plen) != cases[i].sfx ||
		    plen != cases[i].plen)
			fail_msg("%s: suffix %u, %u bytes kept", cases[i].name,
				 ndc_fp_sfx_pick(&c.sfx, name, (uint32_t)n, &plen), plen);
	}
	/* the bytes of "\3svc\7cluster\5local" inside a label: not a suffix */
	static const uint8_t inside[] = "\5a\3svc\7cluster\5local";
	assert_int_equal(ndc_fp_sfx_pick(&c.sfx, inside, sizeof(inside), &plen), 2);
	assert_int_equal(plen, 6);

	assert_int_equal(ndc_fp_table_init(&t, &mem_ops, m, 100000, 64, 64, 7), 0);
	ndc_fp_table_set_sfx(&t, &c.sfx);
	for (uint32_t i = 0; i < 2000; i++) {
		char text[96];

		snprintf(text, sizeof(text), "_http._tcp.svc-%06u.ns-%04u.svc.cluster.local", i,
			 i % 100);
		n = wire(text, name);
		assert_int_equal(n, 49);
		assert_int_equal(ndc_fastpath_key(name, n, 33, &k), 0);
		memset(&v, 0, sizeof(v));
		v.name_len = (uint8_t)n;
		memcpy(v.name, name, n);
		v.len = 72;
		v.ancount = v.arcount = 1;
		for (uint16_t b = 0; b < v.len; b++)
			v.data[b] = (uint8_t)(i + b);
		assert_int_equal(ndc_fp_table_put(&t, &k, &v, false), 0);
	}
	ndc_fp_table_stats(&t, &u);
	assert_int_equal(u.keys, 2000);
	assert_int_equal(u.bigs, 0);
	for (uint32_t i = 0; i < 2000; i++) {
		char text[96];

		snprintf(text, sizeof(text), "_http._tcp.svc-%06u.ns-%04u.svc.cluster.local", i,
			 i % 100);
		n = wire(text, name);
		assert_int_equal(ndc_fastpath_key(name, n, 33, &k), 0);
		assert_int_equal(ndc_fp_table_get(&t, &k, &got), 0);
		assert_int_equal(got.name_len, n);
		assert_memory_equal(got.name, name, n);
		assert_int_equal(got.len, 72);
		assert_int_equal(got.data[0], (uint8_t)i);
		assert_int_equal(got.flags, 0);
	}
	ndc_fp_table_fini(&t);
	free(m);
}

/* Name i of the rare region: an SRV name ("_p<i>._tcp.n<i>.ns<i%50>.svc.cluster.local"). */
static void rare_entry(uint32_t i, struct ndc_fp_key *k, struct ndc_fp_value *v)
{
	char text[96];
	uint8_t name[NDC_FP_NAME_MAX];
	size_t n;

	snprintf(text, sizeof(text), "_p%u._tcp.n%u.ns%u.svc.cluster.local", i, i, i % 50);
	n = wire(text, name);
	assert_int_equal(ndc_fastpath_key(name, n, 33, k), 0);
	memset(v, 0, sizeof(*v));
	v->name_len = (uint8_t)n;
	memcpy(v->name, name, n);
	v->len = 16;
	v->ancount = 1;
	v->data[0] = (uint8_t)i;
	v->data[1] = (uint8_t)(i >> 8);
}

/* Every key of the live half has its home in its region (as the geom the readers got says). */
static void check_regions(const struct ndc_fp_table *t, const struct mem *m)
{
	const struct ndc_fp_half *h = &t->h[t->cur];
	uint32_t n = NDC_FP_GEOM_BUCKETS(m->geom), nc = NDC_FP_GEOM_COMMON(m->geom);
	uint32_t rb = NDC_FP_GEOM_RARE_BASE(m->geom);
	uint64_t rare = 0;

	assert_int_equal(n, h->n_buckets);
	assert_int_equal(nc, ndc_fp_half_common(h));
	assert_int_equal(rb, h->rare_base);
	for (uint32_t b = 0; b < n; b++) {
		for (uint32_t j = 0; j < NDC_FP_BUCKET; j++) {
			const struct ndc_fp_slot *s =
			    (const struct ndc_fp_slot *)h->chunks[b / NDC_FP_CHUNK_BUCKETS] +
			    NDC_FP_CHUNK_TAG_SLOTS + (b % NDC_FP_CHUNK_BUCKETS) * NDC_FP_BUCKET + j;
			uint32_t region = ndc_fp_slot_region(s), home;

			if (!s->name_len)
				continue;
			/* the flag is the name's region: names here begin with 'n' or '_' */
			assert_int_equal(region, s->qtype == 33);
			home = ndc_fp_home((uint64_t)s->check << 32 | s->hash_lo, t->home_key,
					   s->qtype, region, n, nc, rb);
			if (region ? home < rb || home >= n : home >= nc)
				fail_msg(
				    "bucket %u: a key of region %u homed at %u (%u common, rare "
				    "from %u)",
				    b, region, home, nc, rb);
			rare += region;
		}
	}
	assert_int_equal(rare, h->live_rare);
}

/*
 * Regions (abi.h): the characters that make a name rare; a table of both kinds of names gets its
 * regions in proportion when it is rebuilt, every key homed in its own and found; a table as big
 * as it may be mends regions out of proportion instead of refusing keys; with one kind left it
 * has one region again.
 */
static void test_regions(void **state)
{
	struct mem *m = calloc(1, sizeof(*m));
	struct ndc_fp_table t;
	struct ndc_fp_key k;
	struct ndc_fp_value v, got;
	uint32_t n, nc;

	(void)state;
	/* by the name's first character, for the types pods ask (A 1, AAAA 28, any other 0) */
	for (uint32_t i = 0; i < 3; i++) {
		uint32_t qt = i == 0 ? 1 : i == 1 ? 28 : NDC_FP_QTYPE_OTHER;

		assert_int_equal(ndc_fp_region('_', qt), 1);
		assert_int_equal(ndc_fp_region('0', qt), 1);
		assert_int_equal(ndc_fp_region('9', qt), 1);
		assert_int_equal(ndc_fp_region('a', qt), 0);
		assert_int_equal(ndc_fp_region('z', qt), 0);
		assert_int_equal(ndc_fp_region('-', qt), 0);
		assert_int_equal(ndc_fp_region('/', qt), 0); /* '0' - 1 */
		assert_int_equal(ndc_fp_region(':', qt), 0); /* '9' + 1 */
		assert_int_equal(ndc_fp_region(0, qt), 0);   /* the root */
		assert_int_equal(ndc_fp_region(0xff, qt), 0);
		assert_int_equal(ndc_fp_key_region((const uint8_t *)"", 1, qt), 0);
	}
	/* any other type is rare whatever the name: SRV 33, TXT 16, PTR 12, NS 2, CNAME 5, ANY */
	assert_int_equal(ndc_fp_region('a', 33), 1);
	assert_int_equal(ndc_fp_region('a', 16), 1);
	assert_int_equal(ndc_fp_region('a', 12), 1);
	assert_int_equal(ndc_fp_region('a', 2), 1);
	assert_int_equal(ndc_fp_region('a', 5), 1);
	assert_int_equal(ndc_fp_region('a', 255), 1);
	assert_int_equal(ndc_fp_region('a', 65535), 1);
	assert_int_equal(ndc_fp_region(0, 6), 1); /* the root's SOA */
	assert_int_equal(ndc_fp_region('_', 33), 1);
	assert_int_equal(ndc_fp_region('a', 1 + 256), 1);
	assert_int_equal(ndc_fp_region('a', 28 + 65536), 1);

	/* at most two chunks: 3,500 names of each kind grow it to two, split half and half */
	assert_int_equal(ndc_fp_table_init(&t, &mem_ops, m, 100000, 2, 4000, 0x9abcdef), 0);
	for (uint32_t i = 0; i < 3500; i++) {
		entry(i, 1, 16, &k, &v);
		assert_int_equal(k.region, NDC_FP_REGION_COMMON);
		assert_int_equal(ndc_fp_table_put(&t, &k, &v, false), 0);
		rare_entry(i, &k, &v);
		assert_int_equal(k.region, NDC_FP_REGION_RARE);
		assert_int_equal(ndc_fp_table_put(&t, &k, &v, false), 0);
	}
	n = NDC_FP_GEOM_BUCKETS(m->geom);
	nc = NDC_FP_GEOM_COMMON(m->geom);
	assert_int_equal(n, 2 * NDC_FP_CHUNK_BUCKETS);
	assert_true(m->geom >> 33 & 1);
	assert_int_equal(NDC_FP_GEOM_RARE_BASE(m->geom), nc);
	assert_true(nc > n * 2 / 5 && nc < n * 3 / 5);
	check_regions(&t, m);
	/*
	 * 5,500 more common names: 9,000 of them do not fit the common region's 7,168 slots. At
	 * the cap, the table is rebuilt with its regions in proportion and takes them all.
	 */
	for (uint32_t i = 3500; i < 9000; i++) {
		entry(i, 1, 16, &k, &v);
		if (ndc_fp_table_put(&t, &k, &v, false))
			fail_msg("common name %u of 9,000 refused (%u of %u buckets common)", i,
				 ndc_fp_half_common(&t.h[t.cur]), t.h[t.cur].n_buckets);
	}
	nc = NDC_FP_GEOM_COMMON(m->geom);
	assert_true(nc > n * 6 / 10);
	check_regions(&t, m);
	for (uint32_t i = 0; i < 9000; i++) {
		entry(i, 1, 16, &k, &v);
		assert_int_equal(ndc_fp_table_get(&t, &k, &got), 0);
		assert_memory_equal(&got, &v, sizeof(v));
		if (i >= 3500)
			continue;
		rare_entry(i, &k, &v);
		assert_int_equal(ndc_fp_table_get(&t, &k, &got), 0);
		assert_memory_equal(&got, &v, sizeof(v));
	}
	/* the rare names go, and with the shrink that follows the table has one region again */
	for (uint32_t i = 0; i < 3500; i++) {
		rare_entry(i, &k, &v);
		assert_int_equal(ndc_fp_table_del(&t, &k, v.name, v.name_len, 0), 0);
	}
	for (uint32_t i = 3000; i < 9000; i++) {
		entry(i, 1, 16, &k, &v);
		assert_int_equal(ndc_fp_table_del(&t, &k, v.name, v.name_len, 0), 0);
	}
	assert_int_equal(NDC_FP_GEOM_BUCKETS(m->geom), NDC_FP_CHUNK_BUCKETS);
	assert_false(m->geom >> 33 & 1);
	assert_int_equal(NDC_FP_GEOM_COMMON(m->geom), NDC_FP_CHUNK_BUCKETS);
	check_regions(&t, m);
	check_all(&t, 0, 0, true);
	for (uint32_t i = 0; i < 3000; i++) {
		entry(i, 1, 16, &k, &v);
		assert_int_equal(ndc_fp_table_get(&t, &k, &got), 0);
	}
	ndc_fp_table_fini(&t);
	free(m);
}

static void test_cap_and_collision(void **state)
{
	struct mem *m = calloc(1, sizeof(*m));
	struct ndc_fp_table t;
	struct ndc_fp_key k;
	struct ndc_fp_value v, other;

	(void)state;
	assert_int_equal(ndc_fp_table_init(&t, &mem_ops, m, 30, 8, 8, 42), 0);
	put_range(&t, 0, 10); /* 30 keys: the cap */
	entry(10, 1, 16, &k, &v);
	assert_int_equal(ndc_fp_table_put(&t, &k, &v, false), -ENOSPC);
	/* the key of name 0 holding name 1: a collision; the first name keeps it */
	entry(0, 1, len_of(0, 1), &k, &v);
	entry(1, 1, 16, &k, &other);
	entry(0, 1, len_of(0, 1), &k, &v);
	assert_int_equal(ndc_fp_table_put(&t, &k, &other, false), -ENOSPC);
	assert_int_equal(ndc_fp_table_del(&t, &k, other.name, other.name_len, 0), -ENOENT);
	ndc_fp_table_fini(&t);
	free(m);
}

/*
 * The zone's SOA after a name of qlen bytes ending in "cluster.local": uncompressed (qlen 0, as
 * the NXDOMAIN template holds it) or compressed against the question as the socket path writes it.
 */
static uint16_t soa_rr(size_t qlen, uint32_t ttl, uint8_t *out)
{
	static const uint8_t zone[] = "\7cluster\5local";
	uint8_t ptr[2] = {(uint8_t)(0xc0 | (12 + qlen - sizeof(zone)) >> 8),
			  (uint8_t)(12 + qlen - sizeof(zone))};
	size_t n = 0, rd;

#define PUT(p, l) (memcpy(out + n, p, l), n += l)
#define ZONE() (qlen ? PUT(ptr, 2) : PUT(zone, sizeof(zone)))
	ZONE();
	PUT("\0\6\0\1", 4);
	out[n++] = (uint8_t)(ttl >> 24), out[n++] = (uint8_t)(ttl >> 16);
	out[n++] = (uint8_t)(ttl >> 8), out[n++] = (uint8_t)ttl;
	n += 2;
	rd = n;
	PUT("\2ns\3dns", 7);
	ZONE();
	PUT("\12hostmaster", 11);
	ZONE();
	for (int i = 0; i < 20; i++)
		out[n++] = (uint8_t)i;
	out[rd - 2] = (uint8_t)((n - rd) >> 8), out[rd - 1] = (uint8_t)(n - rd);
#undef ZONE
#undef PUT
	return (uint16_t)n;
}

/* NODATA i: a long name (its SOA does not fit a slot beside it) with the zone's SOA of ttl. */
static void nodata(uint32_t i, uint32_t ttl, struct ndc_fp_key *k, struct ndc_fp_value *v)
{
	char text[96];
	size_t n = 0;

	memset(v, 0, sizeof(*v));
	snprintf(text, sizeof(text), "a-rather-long-service-name-%u.namespace%u.svc.cluster.local",
		 i, i % 7);
	for (char *label = strtok(text, "."); label; label = strtok(NULL, ".")) {
		size_t l = strlen(label);

		v->name[n++] = (uint8_t)l;
		memcpy(v->name + n, label, l);
		n += l;
	}
	v->name[n++] = 0;
	v->name_len = (uint8_t)n;
	v->nscount = 1;
	v->flags = NDC_FP_V_AA;
	v->len = soa_rr(n, ttl, v->data);
	assert_int_equal(ndc_fastpath_key(v->name, n, NDC_FP_QTYPE_OTHER, k), 0);
}

/*
 * NODATA by reference (abi.h, NDC_FP_V_SOA): answers whose SOA is the template's take no big
 * record and read back byte for byte, through growth too; another SOA (a TTL of its own) is
 * kept whole.
 */
static void test_nodata_by_reference(void **state)
{
	struct mem *m = calloc(1, sizeof(*m));
	struct ndc_fp_big nx[NDC_FP_NX_ENTRIES] = {0};
	struct ndc_fp_value tpl = {0}, v, got;
	struct ndc_fp_table_usage u;
	struct ndc_fp_table t;
	struct ndc_fp_key k;
	const uint32_t n = 12000; /* past one chunk: rebuilds move them */

	(void)state;
	assert_int_equal(ndc_fp_table_init(&t, &mem_ops, m, 100000, 64, 64, 42), 0);
	nodata(0, 5, &k, &v);
	assert_true(((v.name_len + 7) & ~7) + v.len > NDC_FP_SLOT_BYTES); /* else no test */
	tpl.rcode = 3;
	tpl.flags = NDC_FP_V_AA;
	tpl.nscount = 1;
	tpl.len = soa_rr(0, 5, tpl.data);
	ndc_fp_table_set_nx(&t, nx, &tpl);
	assert_int_equal(nx[NDC_FP_NX_NODATA].v.n_ttl,
			 3); /* owner, MNAME, RNAME point at the zone */
	for (uint32_t i = 0; i < n; i++) {
		nodata(i, 5, &k, &v);
		assert_int_equal(ndc_fp_table_put(&t, &k, &v, false), 0);
	}
	ndc_fp_table_stats(&t, &u);
	assert_int_equal(u.bigs, 0);
	assert_true(u.rebuilds > 0);
	for (uint32_t i = 0; i < n; i++) {
		nodata(i, 5, &k, &v);
		assert_int_equal(ndc_fp_table_get(&t, &k, &got), 0);
		assert_memory_equal(&got, &v, sizeof(v));
	}
	/* another TTL: not the zone's SOA as the template has it */
	for (uint32_t i = 0; i < 100; i++) {
		nodata(i, 30, &k, &v);
		assert_int_equal(ndc_fp_table_put(&t, &k, &v, false), 0);
		assert_int_equal(ndc_fp_table_get(&t, &k, &got), 0);
		assert_memory_equal(&got, &v, sizeof(v));
	}
	ndc_fp_table_stats(&t, &u);
	assert_int_equal(u.bigs, 100);
	ndc_fp_table_fini(&t);
	free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_grow_and_shrink),
	    cmocka_unit_test(test_cap_and_collision),
	    cmocka_unit_test(test_dense_fill),
	    cmocka_unit_test(test_preferred_slots),
	    cmocka_unit_test(test_suffixes),
	    cmocka_unit_test(test_failed_insert_after_moves),
	    cmocka_unit_test(test_nodata_by_reference),
	    cmocka_unit_test(test_regions),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
