// SPDX-License-Identifier: MIT
/*
 * The kernel's answer table from user space (layout and protocol: include/ndc/abi.h, "The answer
 * table"): the writer, through shared mappings of the chunks it adds. The walk it finds keys with
 * is table_walk.c's (the kernel's, bpf/ndc_table.h); an entry's layout in a slot is slot.c's.
 *
 * The table follows its content: it starts at one chunk, and when it needs more buckets (or
 * fewer, or too many of its buckets have overflowed) it is rebuilt whole in the other half of the
 * outer maps, switched to in one store, and the old half is dropped once no reader can be in it.
 * Chunks come from the ops the loader gives (BPF maps in fastpath.c; plain memory in the unit
 * tests).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define NONE UINT32_MAX
#define SLOTS_PER_CHUNK (NDC_FP_CHUNK_BUCKETS * NDC_FP_BUCKET)

/*
 * Loads: a rebuild sizes the table for LOAD_TARGET of its slots; more than LOAD_GROW used grows
 * it, fewer than LOAD_SHRINK used shrinks it (hysteresis: both are far from the target). Percent.
 * Placement is Robin Hood's (place_plan), which keeps every key within NDC_FP_PROBE_BUCKETS of
 * its home at these loads: first come, first placed filled one chunk to only 80% (and tables of
 * 20,000 buckets to 70%) before some key found no bucket within reach. A bucket that overflowed
 * costs a walk little: the next bucket's tags are in the same line.
 */
#define LOAD_TARGET 85
#define LOAD_GROW 93
#define LOAD_SHRINK 65

static bool name_is(const struct ndc_fp_value *v, const uint8_t *name, size_t len)
{
	return v->name_len == len && memcmp(v->name, name, len) == 0;
}

/* ---------------------------------------------------------------------------------------------
 * The writer: one at a time (t->lock), against readers in the kernel that never wait.
 */

/* seqcount write side: odd, then the writes, then even, with release ordering at both ends. */
static void seq_begin(uint32_t *seq)
{
	__atomic_store_n(seq, *seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
}

static void seq_end(uint32_t *seq)
{
	__atomic_store_n(seq, *seq + 1, __ATOMIC_RELEASE);
}

/* A write readers may see is complete: after seq_end, the geom or a template (ops->changed). */
static void changed(const struct ndc_fp_table *t)
{
	if (t->ops->changed)
		t->ops->changed(t->ctx);
}

static void tag_set(struct ndc_fp_half *h, uint32_t b, uint32_t j, uint8_t tag)
{
	uint64_t *w = ndc_fp_tag_word(h, b), v = *w;

	v &= ~((uint64_t)0xff << (8 * j));
	v |= (uint64_t)tag << (8 * j);
	__atomic_store_n(w, v, __ATOMIC_RELEASE);
}

static size_t chunk_bytes(enum ndc_fp_chunk_kind kind)
{
	return kind == NDC_FP_CHUNK_SLOTS ? NDC_FP_CHUNK_ENTRIES * sizeof(struct ndc_fp_slot)
					  : NDC_FP_BIG_CHUNK * sizeof(struct ndc_fp_ext);
}

static uint32_t half_base(const struct ndc_fp_table *t, int half, enum ndc_fp_chunk_kind kind)
{
	return (uint32_t)half * (kind == NDC_FP_CHUNK_SLOTS ? t->half_chunks : t->half_bigs);
}

/* Keeps a run of n free records from b for reuse: 0, or -ENOMEM (then lost until a rebuild). */
static int big_keep(struct ndc_fp_half *h, uint32_t b, uint32_t n)
{
	uint32_t l = n - 1, *nf;

	if (h->n_big_free[l] == h->cap_big_free[l]) {
		uint32_t c = h->cap_big_free[l] ? 2 * h->cap_big_free[l] : 256;

		nf = realloc(h->big_free[l], (size_t)c * sizeof(*nf));
		if (!nf)
			return -ENOMEM;
		h->big_free[l] = nf;
		h->cap_big_free[l] = c;
	}
	h->big_free[l][h->n_big_free[l]++] = b;
	return 0;
}

/* Adds a big chunk to half h (the bump is at the end of its last one): 0, -ENOSPC, ops' error. */
static int big_grow(struct ndc_fp_table *t, int half)
{
	struct ndc_fp_half *h = &t->h[half];
	uint32_t c = h->n_big_chunks;
	void *p;
	int err;

	if (c == t->half_bigs)
		return -ENOSPC;
	err = t->ops->add(t->ctx, NDC_FP_CHUNK_BIG, half_base(t, half, NDC_FP_CHUNK_BIG) + c, &p);
	if (err)
		return err;
	h->bigs[c] = p;
	h->n_big_chunks = c + 1;
	return t->ops->commit(t->ctx);
}

/* n consecutive records of one chunk for a big answer, at *ret: 0, -ENOSPC, -ENOMEM, ops' error. */
static int big_alloc(struct ndc_fp_table *t, int half, uint32_t n, uint32_t *ret)
{
	struct ndc_fp_half *h = &t->h[half];
	int err;

	/* a freed run of n, else a longer one split */
	for (uint32_t l = n - 1; l < NDC_FP_EXT_MAX; l++) {
		if (!h->n_big_free[l])
			continue;
		*ret = h->big_free[l][--h->n_big_free[l]];
		if (l + 1 > n)
			(void)big_keep(h, *ret + n, l + 1 - n);
		h->big_used += n;
		return 0;
	}
	/* from the bump, within its chunk (a run never spans two: the kernel reads one) */
	if (h->bump % NDC_FP_BIG_CHUNK + n > NDC_FP_BIG_CHUNK) {
		uint32_t next = (h->bump / NDC_FP_BIG_CHUNK + 1) * NDC_FP_BIG_CHUNK;

		(void)big_keep(h, h->bump, next - h->bump);
		h->bump = next;
	}
	if (h->bump + n > h->n_big_chunks * NDC_FP_BIG_CHUNK) {
		err = big_grow(t, half);
		if (err)
			return err;
	}
	*ret = h->bump;
	h->bump += n;
	h->big_used += n;
	return 0;
}

/* Frees the big answer whose first record is i (its length read from it). */
static void big_free(struct ndc_fp_half *h, uint32_t i)
{
	const struct ndc_fp_value *head;
	uint32_t n;

	if (i >= h->n_big_chunks * NDC_FP_BIG_CHUNK)
		return;
	head = (const struct ndc_fp_value *)ndc_fp_big_of(h, i);
	n = ndc_fp_ext_count(head->len, head->n_ttl);
	if (n > NDC_FP_EXT_MAX || n > h->big_used)
		return; /* not a big answer we wrote */
	(void)big_keep(h, i, n);
	h->big_used -= n;
}

/* Drops every chunk of half h (no reader can reach it any more) and forgets it. */
static void half_drop(struct ndc_fp_table *t, int half)
{
	struct ndc_fp_half *h = &t->h[half];

	for (uint32_t c = 0; c < h->n_chunks; c++)
		t->ops->drop(t->ctx, NDC_FP_CHUNK_SLOTS, half_base(t, half, NDC_FP_CHUNK_SLOTS) + c,
			     h->chunks[c]);
	for (uint32_t c = 0; c < h->n_big_chunks; c++)
		t->ops->drop(t->ctx, NDC_FP_CHUNK_BIG, half_base(t, half, NDC_FP_CHUNK_BIG) + c,
			     h->bigs[c]);
	memset(h->chunks, 0, (size_t)t->half_chunks * sizeof(*h->chunks));
	memset(h->bigs, 0, (size_t)t->half_bigs * sizeof(*h->bigs));
	h->n_chunks = h->n_buckets = h->n_big_chunks = 0;
	for (int l = 0; l < NDC_FP_EXT_MAX; l++) {
		free(h->big_free[l]);
		h->big_free[l] = NULL;
		h->n_big_free[l] = h->cap_big_free[l] = 0;
	}
	h->bump = h->big_used = 0;
	h->live = h->overflows = h->live_rare = h->rare_base = 0;
}

/*
 * Gives half h n_chunks empty chunks of slots and n_bigs of big answers, all made visible in one
 * commit: 0 or the ops' error (h then holds what it got, for half_drop).
 */
static int half_make(struct ndc_fp_table *t, int half, uint32_t n_chunks, uint32_t n_bigs)
{
	struct ndc_fp_half *h = &t->h[half];
	void *p;
	int err;

	if (n_bigs > t->half_bigs)
		n_bigs = t->half_bigs;
	for (uint32_t c = 0; c < n_chunks; c++) {
		err = t->ops->add(t->ctx, NDC_FP_CHUNK_SLOTS,
				  half_base(t, half, NDC_FP_CHUNK_SLOTS) + c, &p);
		if (err)
			return err;
		h->chunks[c] = p;
		h->n_chunks = c + 1;
	}
	h->n_buckets = n_chunks * NDC_FP_CHUNK_BUCKETS;
	for (uint32_t c = 0; c < n_bigs; c++) {
		err = t->ops->add(t->ctx, NDC_FP_CHUNK_BIG,
				  half_base(t, half, NDC_FP_CHUNK_BIG) + c, &p);
		if (err)
			return err;
		h->bigs[c] = p;
		h->n_big_chunks = c + 1;
	}
	h->bump = 0;
	return t->ops->commit(t->ctx);
}

/* The at.p buckets before at.b lead a walk on to at (flagged overflowed), before its tag shows. */
static void set_overflows(struct ndc_fp_half *h, struct ndc_fp_place at)
{
	for (uint32_t p = 0, b = at.b; p < at.p; p++) {
		uint64_t *w;

		b = b == 0 ? h->n_buckets - 1 : b - 1;
		w = ndc_fp_tag_word(h, b);
		if (!ndc_fp_overflowed(*w)) {
			__atomic_store_n(w, *w | (uint64_t)NDC_FP_BUCKET_OVERFLOW << 56,
					 __ATOMIC_RELEASE);
			h->overflows++;
		}
	}
}

/*
 * Writes v at place at of half h: the key too when insert (then the tag last, after the slot is
 * whole). A big answer is written to a free big record before the slot points at it, and the one
 * it replaces is freed after.
 */
static int write_at(struct ndc_fp_table *t, int half, struct ndc_fp_place at,
		    const struct ndc_fp_key *k, const struct ndc_fp_value *v, bool insert)
{
	struct ndc_fp_half *h = &t->h[half];
	struct ndc_fp_slot *s = ndc_fp_slot_of(h, at.b, at.j), img;
	uint32_t b = NONE, old = NONE, plen = NDC_FP_NAME_MAX, sfx = 0;
	size_t data, ttl;
	bool soa;
	int err;

	if (!insert && s->flags & NDC_FP_V_BIG)
		old = s->big;
	if (v->name_len <= NDC_FP_NAME_MAX)
		sfx = ndc_fp_sfx_pick(&t->sfx, v->name, v->name_len, &plen);
	/* a name of another length than the key's (only ndc_fastpath_put writes one) keeps its own
	 */
	soa = v->name_len == k->name_len && plen <= NDC_FP_SLOT_BYTES &&
	      ndc_fp_soa_matches(ndc_fp_table_soa(t), v);
	if (!soa && (v->name_len != k->name_len || !ndc_fp_slot_fits(v, plen, &data, &ttl))) {
		uint32_t n = ndc_fp_ext_count(v->len, v->n_ttl),
			 bytes = ndc_fp_ext_bytes(v->len, v->n_ttl);

		if (v->len > NDC_FP_DATA_MAX || v->n_ttl > NDC_FP_TTL_MAX)
			return -E2BIG;
		err = big_alloc(t, half, n, &b);
		if (err)
			return err;
		/* not yet pointed at: nobody reads it */
		memcpy(ndc_fp_big_of(h, b), v, bytes);
		memset((uint8_t *)ndc_fp_big_of(h, b) + bytes, 0,
		       (size_t)n * NDC_FP_EXT_BYTES - bytes);
	}
	ndc_fp_slot_encode(v, b == NONE, soa, b, sfx, plen, &img);
	seq_begin(&s->seq);
	s->qtype = k->qtype;
	s->name_len = k->name_len;
	s->check = (uint32_t)(k->hash >> 32);
	s->hash_lo = (uint32_t)k->hash;
	s->flags = img.flags | (k->region ? NDC_FP_V_RARE : 0);
	s->len = img.len;
	s->ancount = img.ancount;
	s->nscount = img.nscount;
	s->arcount = img.arcount;
	s->rcode = img.rcode;
	s->n_ttl = img.n_ttl;
	s->hits = 0;
	memcpy(s->bytes, img.bytes, sizeof(s->bytes));
	seq_end(&s->seq);
	changed(t);
	if (insert) {
		set_overflows(h, at);
		tag_set(h, at.b, at.j, ndc_fp_tag(k->hash, t->home_key, k->qtype));
		h->live++;
		h->live_rare += k->region ? 1 : 0;
	}
	if (old != NONE)
		big_free(h, old);
	return 0;
}

/* Removes the key at place at: its slot is empty again (overflow flags stay until a rebuild). */
static void remove_at(struct ndc_fp_table *t, struct ndc_fp_place at)
{
	struct ndc_fp_half *h = &t->h[t->cur];
	struct ndc_fp_slot *s = ndc_fp_slot_of(h, at.b, at.j);
	uint32_t old = s->flags & NDC_FP_V_BIG ? s->big : NONE;

	tag_set(h, at.b, at.j, NDC_FP_TAG_EMPTY);
	h->live_rare -= ndc_fp_slot_region(s) == NDC_FP_REGION_RARE;
	seq_begin(&s->seq);
	s->name_len = 0;
	s->flags = 0;
	seq_end(&s->seq);
	changed(t);
	h->live--;
	if (old != NONE)
		big_free(h, old);
}

/*
 * Robin Hood placement. A new key takes the first bucket from its home with a free slot, unless
 * on the way it meets an entry nearer its own home than the key is to its: the key takes that
 * entry's slot and the entry goes on looking, from the next bucket, with its own distance. Keys
 * far from home are few and none is very far, so tables fill to over 90% with every key within
 * NDC_FP_PROBE_BUCKETS of home (the walk the kernel makes is the same: overflow flags lead it
 * from a key's home to where the key is).
 */
#define CHAIN_MAX 32 /* entries one insert may move */

/* A step of a placement: who goes where (at.p: buckets from its home), with its tag. */
struct move {
	struct ndc_fp_place at;
	uint8_t tag;
};

/* The home bucket of the entry in slot s of half h. */
static uint32_t home_of(const struct ndc_fp_table *t, const struct ndc_fp_half *h,
			const struct ndc_fp_slot *s)
{
	uint64_t hash = (uint64_t)s->check << 32 | s->hash_lo;

	return ndc_fp_home(hash, t->home_key, s->qtype, ndc_fp_slot_region(s), h->n_buckets,
			   ndc_fp_half_common(h), h->rare_base);
}

/*
 * Plans the placement of key k (absent from half h) into moves: moves[0] is where k goes,
 * moves[i] where the entry that held moves[i - 1] goes. 0 with their number in *ret_n, or
 * -EAGAIN when some key would end NDC_FP_PROBE_BUCKETS or more from home (the table needs more
 * buckets). Nothing is written.
 */
static int place_plan(const struct ndc_fp_table *t, const struct ndc_fp_half *h,
		      const struct ndc_fp_key *k, struct move *moves, uint32_t *ret_n)
{
	uint32_t n = h->n_buckets, m = 0, d = 0, home;
	uint64_t mix = ndc_fp_key_mix(k->hash, t->home_key, k->qtype);
	uint32_t pref = ndc_fp_mix_pref(mix);
	uint8_t tag = ndc_fp_mix_tag(mix);

	if (n == 0)
		return -EAGAIN;
	home = ndc_fp_region_home(mix, n, ndc_fp_half_common(h), h->rare_base, k->region);
	for (;;) {
		uint32_t b = (uint32_t)(((uint64_t)home + d) % n), empty = NONE, same = NONE;
		uint32_t victim = NONE, vd = d;
		uint64_t tags;

		if (d >= NDC_FP_PROBE_BUCKETS || d >= n)
			return -EAGAIN;
		tags = *ndc_fp_tag_word(h, b);
		for (uint32_t j = 0; j < NDC_FP_BUCKET; j++) {
			uint8_t tj = ndc_fp_tag_at(tags, j);

			if (tj == NDC_FP_TAG_EMPTY && empty == NONE)
				empty = j;
			else if (tj == tag)
				same = j;
		}
		/* a new key at home takes its preferred slot when free (abi.h, ndc_fp_mix_pref) */
		if (m == 0 && d == 0 && empty != NONE &&
		    ndc_fp_tag_at(tags, pref) == NDC_FP_TAG_EMPTY)
			empty = pref;
		/* a tag is in a bucket at most once (abi.h) */
		if (empty != NONE && same == NONE) {
			moves[m++] = (struct move){{b, empty, d}, tag};
			*ret_n = m;
			return 0;
		}
		for (uint32_t j = 0; j < NDC_FP_BUCKET && m + 1 < CHAIN_MAX; j++) {
			uint32_t jd;

			if (ndc_fp_tag_at(tags, j) == NDC_FP_TAG_EMPTY ||
			    (same != NONE && j != same))
				continue;
			jd = (b + n - home_of(t, h, ndc_fp_slot_of(h, b, j))) % n;
			if (jd < vd) {
				victim = j;
				vd = jd;
			}
		}
		if (victim == NONE) {
			d++;
			continue;
		}
		moves[m++] = (struct move){{b, victim, d}, tag};
		/* the entry displaced goes on from the next bucket */
		tag = ndc_fp_tag_at(tags, victim);
		home = (b + n - vd) % n;
		d = vd + 1;
	}
}

/*
 * Copies the entry of slot src into place at (free, or one whose entry is already in its next
 * place), with its tag: its big answer, if any, is the copy's from now on.
 */
static void slot_move(const struct ndc_fp_table *t, struct ndc_fp_half *h, struct ndc_fp_place at,
		      const struct ndc_fp_slot *src, uint8_t tag)
{
	struct ndc_fp_slot *s = ndc_fp_slot_of(h, at.b, at.j);

	seq_begin(&s->seq);
	memcpy((uint8_t *)s + sizeof(s->seq), (const uint8_t *)src + sizeof(src->seq),
	       sizeof(*s) - sizeof(s->seq));
	seq_end(&s->seq);
	changed(t);
	set_overflows(h, at);
	tag_set(h, at.b, at.j, tag);
}

/*
 * Inserts k (absent) with v in half h, Robin Hood style: the entries the plan moves go to their
 * new places first, last one first, so each is in its new place before its old one is
 * overwritten (a reader may find one twice, never none). 0 with k's place in *ret_at, -EAGAIN
 * (no place within reach: nothing written), or write_at's error (then the entry k would have
 * displaced is left in its new place only).
 */
static int place(struct ndc_fp_table *t, int half, const struct ndc_fp_key *k,
		 const struct ndc_fp_value *v, struct ndc_fp_place *ret_at)
{
	struct ndc_fp_half *h = &t->h[half];
	struct move moves[CHAIN_MAX];
	uint32_t m = 0;
	int err = place_plan(t, h, k, moves, &m);

	if (err)
		return err;
	for (uint32_t i = m - 1; i > 0; i--)
		slot_move(t, h, moves[i].at,
			  ndc_fp_slot_of(h, moves[i - 1].at.b, moves[i - 1].at.j), moves[i].tag);
	err = write_at(t, half, moves[0].at, k, v, true);
	if (err && m > 1) {
		/* its entry is in moves[1] now: the slot is free again */
		struct ndc_fp_slot *s = ndc_fp_slot_of(h, moves[0].at.b, moves[0].at.j);

		tag_set(h, moves[0].at.b, moves[0].at.j, NDC_FP_TAG_EMPTY);
		seq_begin(&s->seq);
		s->name_len = 0;
		s->flags = 0;
		seq_end(&s->seq);
		changed(t);
	}
	if (!err && ret_at)
		*ret_at = moves[0].at;
	return err;
}

/* Chunks for n keys at the target load, within [1, half_chunks]. */
static uint32_t chunks_for(const struct ndc_fp_table *t, uint64_t n)
{
	uint64_t slots = (n * 100 + LOAD_TARGET - 1) / LOAD_TARGET;
	uint64_t c = (slots + SLOTS_PER_CHUNK - 1) / SLOTS_PER_CHUNK;

	return c < 1 ? 1 : c > t->half_chunks ? t->half_chunks : (uint32_t)c;
}

/*
 * The common region's buckets of n for live keys, rare of them (abi.h, regions): in proportion,
 * at least one bucket each; 0 (one region) while either has no key.
 */
static uint32_t split_for(uint32_t n, uint64_t live, uint64_t rare)
{
	uint64_t c;

	if (rare == 0 || rare >= live || n < 2)
		return 0;
	c = ((live - rare) * n + live / 2) / live;
	return c < 1 ? 1 : c > n - 1 ? n - 1 : (uint32_t)c;
}

/*
 * Whether the regions of half h are off (by more than 1/64 of the table) from their keys' shares:
 * so many keys came since the last rebuild that one is worth doing for them.
 */
static bool split_stale(const struct ndc_fp_half *h)
{
	uint32_t want = split_for(h->n_buckets, h->live, h->live_rare), have = h->rare_base;

	return (want > have ? want - have : have - want) > h->n_buckets / 64;
}

/*
 * Whether one more key of region would load its region (the table, when it has one) past
 * LOAD_GROW.
 */
static bool region_full(const struct ndc_fp_half *h, uint8_t region)
{
	uint64_t n = h->n_buckets, keys = h->live + 1;

	if (h->rare_base) {
		n = region ? h->n_buckets - h->rare_base : h->rare_base;
		keys = (region ? h->live_rare : h->live - h->live_rare) + 1;
	}
	return keys * 100 > n * NDC_FP_BUCKET * LOAD_GROW;
}

/*
 * Copies every key of the live half into the other one, rebuilt with n_chunks chunks, switches
 * the readers to it and drops the old half. On failure (no memory, or a key that finds no place:
 * the caller asks for more chunks) the live half stays as it was.
 */
static int rebuild(struct ndc_fp_table *t, uint32_t n_chunks)
{
	int from = t->cur, to = !t->cur;
	struct ndc_fp_half *src = &t->h[from], *dst = &t->h[to];
	struct ndc_fp_reader r;
	int err;

	/* the big answers' chunks too, so that one commit makes the whole half visible */
	err = half_make(t, to, n_chunks, (src->big_used + NDC_FP_BIG_CHUNK - 1) / NDC_FP_BIG_CHUNK);
	if (!err)
		dst->rare_base = split_for(dst->n_buckets, src->live, src->live_rare);
	r = ndc_fp_reader_mapped(t, to);
	for (uint32_t b = 0; !err && b < src->n_buckets; b++) {
		uint64_t tags = *ndc_fp_tag_word(src, b);

		for (uint32_t j = 0; !err && j < NDC_FP_BUCKET; j++) {
			const struct ndc_fp_slot *s = ndc_fp_slot_of(src, b, j);
			struct ndc_fp_key k = {0};
			struct ndc_fp_value v, bv;
			struct ndc_fp_slot found;
			struct ndc_fp_place at;

			if (ndc_fp_tag_at(tags, j) == NDC_FP_TAG_EMPTY)
				continue;
			k.hash = (uint64_t)s->check << 32 | s->hash_lo;
			k.qtype = s->qtype;
			k.name_len = s->name_len;
			k.region = ndc_fp_slot_region(s);
			err = 0;
			if (s->flags & NDC_FP_V_BIG)
				err = s->big < src->n_big_chunks * NDC_FP_BIG_CHUNK
					  ? ndc_fp_ext_decode(
						ndc_fp_big_of(src, s->big),
						NDC_FP_BIG_CHUNK - s->big % NDC_FP_BIG_CHUNK, &bv)
					  : -EIO;
			if (!err)
				err = ndc_fp_slot_decode(s, &bv, ndc_fp_table_soa(t), &t->sfx, &v);
			if (err)
				break;
			err = ndc_fp_walk(&r, &k, &at, &found);
			if (err == 0)
				err = -EEXIST; /* the same key twice: not a table we wrote */
			else if (err == -ENOENT)
				err = place(t, to, &k, &v, &at);
			if (err == -EAGAIN)
				err = -ENOSPC; /* the caller asks for more buckets */
			if (err == 0)
				ndc_fp_slot_of(dst, at.b, at.j)->hits = s->hits;
		}
	}
	if (err) {
		half_drop(t, to);
		return err;
	}
	t->ops->set_geom(
	    t->ctx, NDC_FP_GEOM(to, dst->n_buckets, ndc_fp_half_common(dst), dst->rare_base != 0));
	t->cur = to;
	changed(t);
	/* every reader that may have seen the old geom is done before its chunks go */
	t->ops->wait_readers(t->ctx);
	half_drop(t, from);
	t->rebuilds++;
	return 0;
}

/*
 * A rebuild for more room, with at least min_chunks: bigger until the keys fit, or the table is as
 * big as it may be.
 */
static int grow(struct ndc_fp_table *t, uint64_t want, uint32_t min_chunks)
{
	uint32_t c = chunks_for(t, want), cur = t->h[t->cur].n_chunks;
	int err;

	if (c < min_chunks)
		c = min_chunks > t->half_chunks ? t->half_chunks : min_chunks;
	for (;;) {
		err = rebuild(t, c);
		if (err != -ENOSPC || c == t->half_chunks)
			return err;
		c = c + c / 8 + 1 > t->half_chunks ? t->half_chunks : c + c / 8 + 1;
		if (c <= cur)
			c = cur + 1 > t->half_chunks ? t->half_chunks : cur + 1;
	}
}

int ndc_fp_table_init(struct ndc_fp_table *t, const struct ndc_fp_table_ops *ops, void *ctx,
		      uint32_t max_entries, uint32_t half_chunks, uint32_t half_bigs,
		      uint64_t home_key)
{
	int err;

	*t = (struct ndc_fp_table){.ops = ops,
				   .ctx = ctx,
				   .max_entries = max_entries,
				   .half_chunks = half_chunks,
				   .half_bigs = half_bigs,
				   .home_key = home_key};
	if (!max_entries || !half_chunks || !half_bigs)
		return -EINVAL;
	for (int i = 0; i < 2; i++) {
		t->h[i].chunks = calloc(half_chunks, sizeof(void *));
		t->h[i].bigs = calloc(half_bigs, sizeof(void *));
		if (!t->h[i].chunks || !t->h[i].bigs) {
			err = -ENOMEM;
			goto fail;
		}
	}
	pthread_mutex_init(&t->lock, NULL);
	t->inited = true;
	err = half_make(t, 0, 1, 0);
	if (err)
		goto fail;
	t->ops->set_geom(t->ctx,
			 NDC_FP_GEOM(0, t->h[0].n_buckets, ndc_fp_half_common(&t->h[0]), 0));
	return 0;
fail:
	ndc_fp_table_fini(t);
	return err;
}

void ndc_fp_table_set_sfx(struct ndc_fp_table *t, const struct ndc_fp_sfx *x)
{
	pthread_mutex_lock(&t->lock);
	t->sfx = *x;
	changed(t);
	pthread_mutex_unlock(&t->lock);
}

void ndc_fp_table_forget(struct ndc_fp_table *t)
{
	for (int i = 0; i < 2; i++) {
		free(t->h[i].chunks);
		free(t->h[i].bigs);
		for (int l = 0; l < NDC_FP_EXT_MAX; l++)
			free(t->h[i].big_free[l]);
	}
	if (t->inited)
		pthread_mutex_destroy(&t->lock);
	memset(t, 0, sizeof(*t));
}

void ndc_fp_table_fini(struct ndc_fp_table *t)
{
	if (t->inited) {
		half_drop(t, 0);
		half_drop(t, 1);
		pthread_mutex_destroy(&t->lock);
	}
	for (int i = 0; i < 2; i++) {
		free(t->h[i].chunks);
		free(t->h[i].bigs);
	}
	memset(t, 0, sizeof(*t));
}

/* After a removal: shrink, or rebuild long walks away, when the loads say so. */
static void maybe_shrink(struct ndc_fp_table *t)
{
	const struct ndc_fp_half *h = &t->h[t->cur];
	uint64_t slots = (uint64_t)h->n_buckets * NDC_FP_BUCKET;
	uint32_t want = chunks_for(t, h->live);
	uint64_t bigs = (uint64_t)h->n_big_chunks * NDC_FP_BIG_CHUNK;

	if ((h->n_chunks > 1 && h->live * 100 < slots * LOAD_SHRINK && want < h->n_chunks) ||
	    (h->n_big_chunks > 1 && (uint64_t)h->big_used * 2 + NDC_FP_BIG_CHUNK < bigs))
		/* failing leaves the table as it is: still right, only bigger */
		(void)rebuild(t, want);
}

int ndc_fp_table_put(struct ndc_fp_table *t, const struct ndc_fp_key *k,
		     const struct ndc_fp_value *v, bool any_name)
{
	struct ndc_fp_value cur;
	struct ndc_fp_slot s;
	struct ndc_fp_place at;
	struct ndc_fp_reader r;
	struct ndc_fp_half *h;
	int err;

	pthread_mutex_lock(&t->lock);
	r = ndc_fp_reader_mapped(t, t->cur);
	err = ndc_fp_walk(&r, k, &at, &s);
	if (err == 0) {
		if (!any_name) {
			err = ndc_fp_walk_decode(&r, &s, &cur);
			if (err == 0 && !name_is(&cur, v->name, v->name_len))
				err = -ENOSPC; /* a collision: the name published first keeps it */
		}
		if (err == 0)
			err = write_at(t, t->cur, at, k, v, false);
		goto out;
	}
	if (err != -ENOENT)
		goto out;
	h = &t->h[t->cur];
	if (h->live >= t->max_entries) {
		err = -ENOSPC;
		goto out;
	}
	/* a full region is rebuilt with the table's regions in proportion again, bigger if need be
	 */
	if (h->n_chunks < t->half_chunks && region_full(h, k->region)) {
		err = grow(t, (uint64_t)h->live + 1, 1);
		if (err)
			goto out;
	}
	for (int tries = 0;; tries++) {
		err = place(t, t->cur, k, v, NULL);
		if (err != -EAGAIN)
			break;
		/*
		 * No place within reach at a load that should have one: regions out of proportion
		 * are split again at the same size first, else the table needs more buckets.
		 */
		h = &t->h[t->cur];
		if (tries == 3) {
			err = -ENOSPC;
			break;
		}
		if (tries == 0 && split_stale(h)) {
			err = rebuild(t, h->n_chunks);
			if (err == 0)
				continue;
			if (err != -ENOSPC)
				break;
		}
		if (h->n_chunks == t->half_chunks) {
			err = -ENOSPC; /* as big as it may be */
			break;
		}
		err = grow(t, (uint64_t)h->live + 1, h->n_chunks + h->n_chunks / 8 + 1);
		if (err)
			break;
	}
out:
	pthread_mutex_unlock(&t->lock);
	return err == -ENOMEM || err == -E2BIG ? -ENOSPC : err;
}

int ndc_fp_table_rebuild(struct ndc_fp_table *t)
{
	int err;

	pthread_mutex_lock(&t->lock);
	err = rebuild(t, t->h[t->cur].n_chunks);
	pthread_mutex_unlock(&t->lock);
	return err;
}

int ndc_fp_table_get(struct ndc_fp_table *t, const struct ndc_fp_key *k, struct ndc_fp_value *ret)
{
	struct ndc_fp_reader r;
	int err;

	pthread_mutex_lock(&t->lock);
	r = ndc_fp_reader_mapped(t, t->cur);
	err = ndc_fp_walk_get(&r, k, ret);
	pthread_mutex_unlock(&t->lock);
	return err;
}

/*
 * The live entry at k, with its place and value, when it holds name (any name when NULL): 0, or
 * -ENOENT (absent, or another name's). The caller holds the lock.
 */
static int find_named(struct ndc_fp_table *t, const struct ndc_fp_key *k, const uint8_t *name,
		      size_t name_len, struct ndc_fp_place *ret_at, struct ndc_fp_value *ret)
{
	struct ndc_fp_reader r = ndc_fp_reader_mapped(t, t->cur);
	struct ndc_fp_slot s;
	int err = ndc_fp_walk(&r, k, ret_at, &s);

	if (err == 0)
		err = ndc_fp_walk_decode(&r, &s, ret);
	if (err == 0 && name && !name_is(ret, name, name_len))
		err = -ENOENT;
	return err;
}

int ndc_fp_table_hits(struct ndc_fp_table *t, const struct ndc_fp_key *k, const uint8_t *name,
		      size_t name_len, uint32_t *ret)
{
	struct ndc_fp_value cur;
	struct ndc_fp_place at;
	int err;

	pthread_mutex_lock(&t->lock);
	err = find_named(t, k, name, name_len, &at, &cur);
	if (err == 0)
		*ret = __atomic_load_n(&ndc_fp_slot_of(&t->h[t->cur], at.b, at.j)->hits,
				       __ATOMIC_RELAXED);
	pthread_mutex_unlock(&t->lock);
	return err;
}

int ndc_fp_table_del(struct ndc_fp_table *t, const struct ndc_fp_key *k, const uint8_t *name,
		     size_t name_len, uint64_t expired_at)
{
	struct ndc_fp_value cur;
	struct ndc_fp_place at;
	int err;

	pthread_mutex_lock(&t->lock);
	/* another name's entry is not ours to remove */
	err = find_named(t, k, name, name_len, &at, &cur);
	if (err == 0 && expired_at && (cur.expire_ns == 0 || expired_at < cur.expire_ns))
		err = -EAGAIN;
	if (err == 0) {
		remove_at(t, at);
		maybe_shrink(t);
	}
	pthread_mutex_unlock(&t->lock);
	return err;
}

void ndc_fp_table_stats(struct ndc_fp_table *t, struct ndc_fp_table_usage *ret)
{
	const struct ndc_fp_half *h;

	pthread_mutex_lock(&t->lock);
	h = &t->h[t->cur];
	ret->keys = h->live;
	ret->max_keys = t->max_entries;
	ret->slots = (uint64_t)h->n_buckets * NDC_FP_BUCKET;
	ret->chunks = h->n_chunks;
	ret->big_chunks = h->n_big_chunks;
	ret->bigs = h->big_used;
	ret->bytes = (uint64_t)h->n_chunks * chunk_bytes(NDC_FP_CHUNK_SLOTS) +
		     (uint64_t)h->n_big_chunks * chunk_bytes(NDC_FP_CHUNK_BIG);
	ret->needed = (uint64_t)h->live * sizeof(struct ndc_fp_slot) +
		      (uint64_t)h->big_used * sizeof(struct ndc_fp_ext);
	ret->rebuilds = t->rebuilds;
	ret->rare_keys = h->live_rare;
	ret->common_slots = (uint64_t)ndc_fp_half_common(h) * NDC_FP_BUCKET;
	pthread_mutex_unlock(&t->lock);
}

void ndc_fp_table_set_nx(struct ndc_fp_table *t, struct ndc_fp_big *nx,
			 const struct ndc_fp_value *v)
{
	struct ndc_fp_big *soa = nx + NDC_FP_NX_NODATA;
	struct ndc_fp_value tpl;

	pthread_mutex_lock(&t->lock);
	seq_begin(&nx->seq);
	nx->v = *v;
	seq_end(&nx->seq);
	changed(t);
	/*
	 * NODATA entries published by reference before keep theirs: the zone's SOA does not change
	 * in an agent's life (one serial; a new TTL republishes every answer that carries it).
	 */
	if (ndc_fp_soa_template(v, &tpl) == 0) {
		seq_begin(&soa->seq);
		soa->v = tpl;
		seq_end(&soa->seq);
		changed(t);
		t->soa = tpl;
	}
	pthread_mutex_unlock(&t->lock);
}

size_t ndc_fp_chunk_bytes(enum ndc_fp_chunk_kind kind)
{
	return chunk_bytes(kind);
}
