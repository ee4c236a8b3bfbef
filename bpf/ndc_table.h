/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * The answer table from the kernel's side (layout and protocol: include/ndc/abi.h, "The answer
 * table"): one walk from the name's home bucket, reading tag words, finds the exact type or else
 * the any-other-type entry (neither: the name is absent), and the answer found is copied into the
 * per-CPU scratch between two reads of its slot's sequence counter. The reply is built from that
 * copy only, so a slot the publisher rewrites meanwhile can never put half an answer in a packet.
 *
 * Every lookup here is in an array (of maps, then in the chunk) and inlined by the verifier: no
 * helper call, no return (each costs a mispredicted return on these machines, DESIGN "Facts
 * measured").
 */
#ifndef NDC_TABLE_H
#define NDC_TABLE_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include <ndc/abi.h>

#include "ndc_dns.h"
#include "ndc_lookup.h" /* what table_get finds: EXACT and OTHER into s->v */

/*
 * An outer map of the answer table and its chunks (abi.h, "The answer table"): an array of maps
 * whose inner maps are mmapable arrays of n values of type value. The loader sets the outer
 * map's entries (2 * config half_chunks or half_bigs). verifier: the inner template gives sizes,
 * not BTF types: clang leaves a type used only there a forward one.
 */
#define NDC_TABLE_MAP(outer, chunk, n, value)             \
	struct chunk {                                    \
		__uint(type, BPF_MAP_TYPE_ARRAY);         \
		__uint(max_entries, n);                   \
		__uint(map_flags, BPF_F_MMAPABLE);        \
		__uint(key_size, sizeof(__u32));          \
		__uint(value_size, sizeof(value));        \
	};                                                \
	struct {                                          \
		__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS); \
		__uint(max_entries, 2);                   \
		__type(key, __u32);                       \
		__array(values, struct chunk);            \
	} outer SEC(".maps")

/* A chunk of slots: its tag words, then its slots. */
NDC_TABLE_MAP(ndc_answers, ndc_chunk, NDC_FP_CHUNK_ENTRIES, struct ndc_fp_slot);
/* A chunk of big answers' records. */
NDC_TABLE_MAP(ndc_big, ndc_big_chunk, NDC_FP_BIG_CHUNK, struct ndc_fp_ext);

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NDC_FP_NX_ENTRIES);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct ndc_fp_big);
} ndc_nx SEC(".maps");

/* ndc_nx's keys, in read-only data: a key on the stack would take stack the program has not */
static const volatile __u32 ndc_nx_keys[NDC_FP_NX_ENTRIES] = {NDC_FP_NX_NXDOMAIN, NDC_FP_NX_NODATA};

/* The table's home key (config home_key), set by the loader: a constant for the JIT. */
const volatile __u64 ndc_home_key = 0;

#define READ_ONCE_U32(x) (*(const volatile __u32 *)&(x))
#define READ_ONCE_U64(x) (*(const volatile __u64 *)&(x))

/*
 * Orders the loads before it against the loads after it (the seqcount read side's smp_rmb).
 * x86-64 never reorders loads with loads and the JIT emits them in program order, so a compiler
 * barrier is enough there. Elsewhere BPF has no read barrier; an atomic fetch-and-add, which the
 * BPF memory model makes fully ordered, on the CPU's own scratch is one without a shared line.
 */
static __always_inline void table_rmb(struct ndc_fp_scratch *s)
{
#if defined(__TARGET_ARCH_x86)
	(void)s;
	asm volatile("" ::: "memory");
#else
	__sync_fetch_and_add(&s->fence, 0);
#endif
}

/*
 * Whether the slot's inline name, its first plen bytes (the rest a config suffix, checked by the
 * caller), is the start of the name in kw (scratch), as dns_name_is for a value. The slot is zero
 * past plen; kw holds the suffix there, masked off.
 */
static __always_inline int slot_name_is(const struct ndc_fp_slot *sl, const __u64 *kw, __u32 plen)
{
	const __u64 *sw = (const __u64 *)sl->bytes;
	__u32 nwords = (plen + 7) / 8;
	__u64 diff = 0, w;

	/* verifier: constant bound */
	for (__u32 i = 0; i < NDC_FP_SLOT_BYTES / 8; i++) {
		if (i >= nwords)
			break;
		w = kw[i];
		if (i + 1 == nwords && plen & 7)
			w &= low_mask(plen & 7);
		diff |= sw[i] ^ w;
	}
	return diff == 0 && nwords <= NDC_FP_SLOT_BYTES / 8;
}

/*
 * The bytes of the question's name a slot with these flags holds (abi.h, NDC_FP_V_SFX), when the
 * name ends in the suffix they name; else -1.
 */
static __always_inline int slot_prefix(const struct ndc_fp_config *cfg, const __u8 *name,
				       const struct ndc_question *q, __u8 flags)
{
	__u32 x = (flags & NDC_FP_V_SFX) >> NDC_FP_V_SFX_SHIFT, slen;

	if (!x)
		return q->name_len;
	/* x is 1..NDC_FP_SFX_MAX (two bits); dns_name_under bounds slen by the name's length */
	slen = cfg->sfx.len[x - 1];
	if (!dns_name_under(name, q, cfg->sfx.name[x - 1], slen))
		return -1;
	return q->name_len - slen;
}

/*
 * The word at byte o (a multiple of 8) of the slot's bytes, or -1 when it is past them. verifier:
 * the word index is hidden from clang, which would otherwise add the caller's parts of it to the
 * pointer separately, out of the check's sight.
 *
 * Words are read and written through __u64 pointers here and below, never as *(__u64 *)&b[i]:
 * clang 14 gives that form the alignment of the byte array and reads it a byte at a time.
 */
static __always_inline int slot_word(const struct ndc_fp_slot *sl, __u32 o, __u64 *ret)
{
	__u32 w = o / 8;

	asm volatile("" : "+r"(w));
	if (w >= NDC_FP_SLOT_BYTES / 8)
		return -1;
	*ret = ((const __u64 *)sl->bytes)[w];
	return 0;
}

/*
 * The answer held in the slot's bytes (after the plen bytes of name), into s->v: header, data, and
 * with NDC_FP_V_EXPIRES the times and TTL offsets after it. 0, or -1 when the slot's lengths do not
 * fit its bytes (torn: the sequence check decides).
 */
static __always_inline int slot_copy_inline(struct ndc_fp_scratch *s, const struct ndc_fp_slot *sl,
					    __u8 flags, __u32 plen)
{
	__u32 off = (plen + 7) & ~7U, len = sl->len, n_ttl = 0, o;
	__u64 w;

	s->v.len = len;
	s->v.ancount = sl->ancount;
	s->v.nscount = sl->nscount;
	s->v.arcount = sl->arcount;
	s->v.rcode = sl->rcode;
	s->v.flags = flags & (NDC_FP_V_AA | NDC_FP_V_PASS | NDC_FP_V_SOA);
	s->v.insert_ns = 0;
	s->v.expire_ns = 0;
	if (off + len > NDC_FP_SLOT_BYTES)
		return -1;
	/* verifier: constant bound, every read checked against the slot's bytes */
	for (__u32 i = 0; i < NDC_FP_SLOT_BYTES / 8; i++) {
		if (i * 8 >= len)
			break;
		if (slot_word(sl, off + i * 8, &w))
			return -1;
		((__u64 *)s->v.data)[i] = w;
	}
	if (flags & NDC_FP_V_EXPIRES) {
		o = off + ((len + 7) & ~7U);
		if (slot_word(sl, o, &s->v.insert_ns) || slot_word(sl, o + 8, &s->v.expire_ns))
			return -1;
		n_ttl = sl->n_ttl;
		if (n_ttl > NDC_FP_TTL_MAX)
			return -1;
		/* the offsets as words: four to a word, zero past n_ttl (the publisher's) */
		for (__u32 i = 0; i < NDC_FP_TTL_MAX / 4; i++) {
			if (i * 4 >= n_ttl)
				break;
			if (slot_word(sl, o + 16 + i * 8, &w))
				return -1;
			((__u64 *)s->v.ttl_off)[i] = w;
		}
	}
	s->v.n_ttl = n_ttl;
	return 0;
}

/* A template of ndc_nx into s->v. */
static __always_inline void big_copy(struct ndc_fp_scratch *s, const struct ndc_fp_value *b)
{
	__u32 len = b->len;

	/* the header: four words, as laid out */
	*(__u64 *)&s->v.insert_ns = *(const __u64 *)&b->insert_ns;
	*(__u64 *)&s->v.expire_ns = *(const __u64 *)&b->expire_ns;
	*(__u64 *)&s->v.len = *(const __u64 *)&b->len;
	*(__u64 *)&s->v.rcode = *(const __u64 *)&b->rcode;
	/* verifier: constant bound */
	for (__u32 i = 0; i < NDC_FP_DATA_MAX / 8; i++) {
		if (i * 8 >= len)
			break;
		((__u64 *)s->v.data)[i] = ((const __u64 *)b->data)[i];
	}
	if (b->n_ttl) {
		/* verifier: constant bound */
		for (__u32 i = 0; i < NDC_FP_TTL_MAX / 4; i++)
			((__u64 *)s->v.ttl_off)[i] = ((const __u64 *)b->ttl_off)[i];
	}
}

/*
 * The big answer whose first record is b, of the half whose ndc_big chunks start at base, into
 * s->v: the bytes of the value its records hold (abi.h, ndc_fp_ext_bytes; its name is compared by
 * the caller). 0, or -1 when a record is not there or the lengths do not fit (torn: the sequence
 * check decides).
 */
static __always_inline int ext_copy(struct ndc_fp_scratch *s, __u32 base, __u32 b)
{
	__u32 ci = base + b / NDC_FP_BIG_CHUNK, bi = b % NDC_FP_BIG_CHUNK, end, o;
	const struct ndc_fp_value *head;
	__u64 *dst = (__u64 *)&s->v;
	const struct ndc_fp_ext *e;
	void *chunk;

	chunk = bpf_map_lookup_elem(&ndc_big, &ci);
	if (!chunk)
		return -1;
	e = bpf_map_lookup_elem(chunk, &bi);
	if (!e)
		return -1;
	head = (const struct ndc_fp_value *)e; /* the first record starts with the header */
	end = ndc_fp_ext_bytes(head->len, head->n_ttl);
	if (head->len > NDC_FP_DATA_MAX || end > sizeof(struct ndc_fp_value))
		return -1;
	/* verifier: constant bounds; the records of one answer are consecutive in one chunk */
	for (__u32 r = 0; r < NDC_FP_EXT_MAX; r++) {
		if (r * NDC_FP_EXT_BYTES >= end)
			break;
		if (r) {
			bi++; /* the key's stack slot reused: the program's stack is full */
			e = bpf_map_lookup_elem(chunk, &bi);
			if (!e)
				return -1;
		}
		for (__u32 i = 0; i < NDC_FP_EXT_BYTES / 8; i++) {
			o = r * (NDC_FP_EXT_BYTES / 8) + i;
			if (o * 8 >= end || o >= sizeof(struct ndc_fp_value) / 8)
				break;
			dst[o] = e->w[i];
		}
	}
	return 0;
}

/*
 * Copies the slot's answer (inline or big) into s->v between two reads of its sequence counter,
 * checking that it still holds the key and that its name is the one in s->name.
 */
static __always_inline enum ndc_table_res
slot_read(struct ndc_fp_scratch *s, const struct ndc_fp_config *cfg, const struct ndc_fp_slot *sl,
	  const struct ndc_question *q, __u32 check, __u16 qtype, __u32 big_base)
{
	__u32 seq = READ_ONCE_U32(sl->seq);
	int same, plen;
	__u8 flags;

	if (seq & 1)
		return NDC_TABLE_BUSY;
	table_rmb(s);
	if (sl->check != check || sl->qtype != qtype || sl->name_len != q->name_len)
		return NDC_TABLE_BUSY; /* it was changed between the walk and now */
	flags = sl->flags;
	if (flags & NDC_FP_V_BIG) {
		if (ext_copy(s, big_base, sl->big))
			return NDC_TABLE_BUSY;
		same = dns_name_is(&s->v, (const __u64 *)s->name, q);
	} else {
		plen = slot_prefix(cfg, s->name, q, flags);
		same = plen >= 0 && slot_name_is(sl, (const __u64 *)s->name, (__u32)plen);
		if (same && slot_copy_inline(s, sl, flags, (__u32)plen))
			return NDC_TABLE_BUSY;
	}
	table_rmb(s);
	if (READ_ONCE_U32(sl->seq) != seq)
		return NDC_TABLE_BUSY;
	return same ? NDC_TABLE_EXACT : NDC_TABLE_COLLISION;
}

/* Slot j of bucket bi of a chunk. */
static __always_inline struct ndc_fp_slot *chunk_slot(void *chunk, __u32 bi, __u32 j)
{
	__u32 idx = NDC_FP_CHUNK_TAG_SLOTS + bi * NDC_FP_BUCKET + j;

	return bpf_map_lookup_elem(chunk, &idx);
}

/*
 * The bytes of a tag word equal to tag, as bit 8k+7 for slot k (SWAR: a byte is zero in x when
 * (x - 0x01..) & ~x has its top bit; bytes above a zero one may show too, so only the lowest set
 * bit is sure, and a tag is in a bucket at most once). Byte 7 is the flags, never a slot.
 */
static __always_inline __u64 tags_match(__u64 tags, __u8 tag)
{
	__u64 x = tags ^ (tag * 0x0101010101010101ULL);

	return (x - 0x0101010101010101ULL) & ~x & 0x0080808080808080ULL;
}

/* Slot k of the lowest match in m (not 0): its bit 8k+7 times the byte ladder puts k on top. */
static __always_inline __u32 match_slot(__u64 m)
{
	return (__u32)((((m & -m) >> 7) * 0x0001020304050607ULL) >> 56);
}

/* The slot with tag in the bucket whose tags and place are given, or NULL: no slot has it. */
static __always_inline struct ndc_fp_slot *bucket_slot(void *chunk, __u32 bi, __u64 tags, __u8 tag)
{
	__u64 m = tags_match(tags, tag);

	return m ? chunk_slot(chunk, bi, match_slot(m)) : NULL;
}

/*
 * The slot of (q's name, qtype), or NULL. The walk reads tag words, and the key of the one slot
 * per bucket whose tag is the key's; the slot it returns is read again in full, under its
 * sequence counter, by slot_read.
 *
 * A slot with the key's tag that holds another key is another key's tag, or the key's slot
 * rewritten since its tag word was read: an insert moved the key on to a later bucket (abi.h:
 * the entry is copied there, the buckets on its way flagged overflowed, and only then is its old
 * slot overwritten). The tag word read again tells them apart: changed, *ret_busy is set and the
 * walk ends (the query goes to user space; going by the old word, which may lack the overflow
 * flag, the walk would have ended here and called a present name absent).
 */
static __always_inline struct ndc_fp_slot *table_walk(struct ndc_fp_scratch *s, __u64 geom,
						      __u32 half_chunks,
						      const struct ndc_question *q, __u64 hash,
						      __u16 qtype, __u32 region, int *ret_busy)
{
	__u32 n = NDC_FP_GEOM_BUCKETS(geom), base = NDC_FP_GEOM_HALF(geom) * half_chunks;
	__u64 mix = ndc_fp_key_mix(hash, ndc_home_key, qtype);
	__u32 check = (__u32)(hash >> 32), b, ci, bi, ti;
	__u8 tag = ndc_fp_mix_tag(mix);
	struct ndc_fp_slot *sl = NULL, *c;
	const __u64 *tw;
	void *chunk;
	__u64 tags;

	if (n == 0)
		return NULL;
	b = ndc_fp_region_home(mix, n, NDC_FP_GEOM_COMMON(geom), NDC_FP_GEOM_RARE_BASE(geom),
			       region);
	/* verifier: constant bound; the walk ends at the first bucket that never overflowed */
	for (__u32 p = 0; p < NDC_FP_PROBE_BUCKETS; p++) {
		ci = base + b / NDC_FP_CHUNK_BUCKETS;
		bi = b % NDC_FP_CHUNK_BUCKETS;
		chunk = bpf_map_lookup_elem(&ndc_answers, &ci);
		if (!chunk)
			break;
		if (p == 0) {
			/*
			 * The key's preferred slot (abi.h, ndc_fp_mix_pref) read first: its line
			 * comes from memory while the tag word does, not after it.
			 */
			c = chunk_slot(chunk, bi, ndc_fp_mix_pref(mix));
			if (c) {
				__u32 x = READ_ONCE_U32(c->check);

				barrier_var(x);
			}
		}
		ti = bi / 16;
		tw = bpf_map_lookup_elem(chunk, &ti);
		if (!tw)
			break;
		tags = READ_ONCE_U64(tw[bi % 16]);
		c = bucket_slot(chunk, bi, tags, tag);
		if (c) {
			if (c->check == check && c->name_len == q->name_len && c->qtype == qtype) {
				sl = c;
				break;
			}
			/*
			 * Without this read tests/unit/fastpath/test_walk_race.c sees its scenario
			 * lose the name (walk_race_planted: tests/planted/no_recheck/).
			 */
			table_rmb(s);
			if (READ_ONCE_U64(tw[bi % 16]) != tags) {
				*ret_busy = 1;
				break;
			}
		}
		if (!(tags >> 56 & NDC_FP_BUCKET_OVERFLOW))
			break;
		b = b + 1 == n ? 0 : b + 1;
	}
	return sl;
}

/* below: the authority of a NODATA published by reference */
static __noinline int table_soa(struct ndc_fp_scratch *s, __u32 qlen);

/*
 * The entry for (q's name, q->qtype), else for (name, NDC_FP_QTYPE_OTHER), copied into s->v as the
 * slot holds it (a NODATA by reference without its authority: table_get adds it); the slot it
 * came from in *ret_slot (for the hit count), the type it was found for in *ret_qtype. EXACT for
 * either type, ABSENT, BUSY or COLLISION.
 */
static __always_inline enum ndc_table_res
table_find(struct ndc_fp_scratch *s, const struct ndc_fp_config *cfg, const struct ndc_question *q,
	   __u64 hash, struct ndc_fp_slot **ret_slot, __u16 *ret_qtype)
{
	__u64 geom = READ_ONCE_U64(cfg->geom);
	__u32 c = s->name[1]; /* the root's: 0, its byte past the end */
	struct ndc_fp_slot *sl = NULL;
	__u16 qtype = q->qtype;
	int busy = 0;

	/* one walk in the code, run once or twice: the program's size is its cold cost */
	for (int k = 0; k < 2; k++) {
		qtype = k ? NDC_FP_QTYPE_OTHER : q->qtype;
		sl = table_walk(s, geom, cfg->half_chunks, q, hash, qtype, ndc_fp_region(c, qtype),
				&busy);
		if (sl || busy)
			break;
	}
	if (busy)
		return NDC_TABLE_BUSY;
	if (!sl)
		return NDC_TABLE_ABSENT;
	*ret_slot = sl;
	*ret_qtype = qtype;
	return slot_read(s, cfg, sl, q, (__u32)(hash >> 32), qtype,
			 NDC_FP_GEOM_HALF(geom) * cfg->half_bigs);
}

/*
 * The entry for (q's name, q->qtype), else for (name, NDC_FP_QTYPE_OTHER), copied into s->v (a
 * NODATA by reference with its authority); the slot it came from in *ret_slot (for the hit count).
 */
static __always_inline enum ndc_table_res table_get(struct ndc_fp_scratch *s,
						    const struct ndc_fp_config *cfg,
						    const struct ndc_question *q, __u64 hash,
						    struct ndc_fp_slot **ret_slot)
{
	__u16 qtype = q->qtype;
	enum ndc_table_res r;

	r = table_find(s, cfg, q, hash, ret_slot, &qtype);
	/* a NODATA by reference gets its authority here, for whichever type found it */
	if (r == NDC_TABLE_EXACT && s->v.flags & NDC_FP_V_SOA && table_soa(s, q->name_len))
		r = NDC_TABLE_BUSY;
	return r == NDC_TABLE_EXACT && qtype != q->qtype ? NDC_TABLE_OTHER : r;
}

/* The NXDOMAIN template into s->v: 0, or -1 when it changed while it was read. */
static __always_inline int table_nx(struct ndc_fp_scratch *s)
{
	const struct ndc_fp_big *nx;
	__u32 seq;

	nx = bpf_map_lookup_elem(&ndc_nx, (const void *)&ndc_nx_keys[NDC_FP_NX_NXDOMAIN]);
	if (!nx)
		return -1;
	seq = READ_ONCE_U32(nx->seq);
	if (seq & 1)
		return -1;
	table_rmb(s);
	big_copy(s, &nx->v);
	table_rmb(s);
	return READ_ONCE_U32(nx->seq) == seq ? 0 : -1;
}

/*
 * The authority of a NODATA published by reference (NDC_FP_V_SOA) for a question of qlen bytes,
 * into s->v (its name, counts and RCODE kept): the template's data with its zone pointers set,
 * and NSCOUNT 1 (abi.h). 0, or -1 when the template changed while it was read, is not there yet,
 * or does not fit the question. A function of its own (a call only NODATA answers pay): inlined,
 * its registers pushed the program's stack past the 512 bytes the verifier allows.
 */
static __noinline int table_soa(struct ndc_fp_scratch *s, __u32 qlen)
{
	const struct ndc_fp_big *t;
	__u32 seq, len, zlen, np, ptr, o;
	int ok;

	t = bpf_map_lookup_elem(&ndc_nx, (const void *)&ndc_nx_keys[NDC_FP_NX_NODATA]);
	if (!t)
		return -1;
	seq = READ_ONCE_U32(t->seq);
	if (seq & 1)
		return -1;
	table_rmb(s);
	len = t->v.len;
	zlen = t->v.name_len;
	np = t->v.n_ttl;
	ok = t->v.nscount == 1 && len > 0 && len <= NDC_FP_DATA_MAX && np <= NDC_FP_SOA_PTRS &&
	     zlen > 0 && zlen <= qlen;
	if (ok) {
		/* verifier: constant bound */
		for (__u32 i = 0; i < NDC_FP_DATA_MAX / 8; i++) {
			if (i * 8 >= len)
				break;
			((__u64 *)s->v.data)[i] = ((const __u64 *)t->v.data)[i];
		}
		ptr = 0xc000 | (sizeof(struct ndc_dnshdr) + qlen - zlen);
		for (__u32 i = 0; i < NDC_FP_SOA_PTRS; i++) {
			if (i >= np)
				break;
			o = t->v.ttl_off[i];
			if (o > NDC_FP_DATA_MAX - 2) {
				ok = 0;
				break;
			}
			s->v.data[o] = (__u8)(ptr >> 8);
			s->v.data[o + 1] = (__u8)ptr;
		}
	}
	table_rmb(s);
	if (!ok || READ_ONCE_U32(t->seq) != seq)
		return -1;
	s->v.len = len;
	s->v.nscount = 1;
	return 0;
}

#endif
