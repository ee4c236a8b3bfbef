/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * The answer table from the kernel's side (layout and protocol: include/ndc/abi.h, "The answer
 * table"): a walk from the key's home slot finds the exact type, else one from the other home
 * the any-other-type entry (both absent: the name is), and the answer found is copied into the
 * per-CPU scratch between two reads of its slot's sequence counter. The reply is built from that
 * copy only, so a slot the publisher rewrites meanwhile can never put half an answer in a packet.
 *
 * Every lookup here is in an array map and inlined by the verifier: no helper call, no return
 * (each costs a mispredicted return on these machines, DESIGN "Facts measured").
 */
#ifndef NDC_TABLE_H
#define NDC_TABLE_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include <ndc/abi.h>

#include "ndc_dns.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* the loader sets ndc_n_slots before load */
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct ndc_fp_slot);
} ndc_answers SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* the loader sets the size before load */
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct ndc_fp_big);
} ndc_big SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct ndc_fp_big);
} ndc_nx SEC(".maps");

/*
 * ndc_answers' max_entries and the table's home key (config n_slots and home_key), set by the
 * loader: constants for the JIT.
 */
const volatile __u32 ndc_n_slots = 1;
const volatile __u64 ndc_home_key = 0;

/* What table_get found. */
enum ndc_table_res {
	NDC_TABLE_EXACT,     /* (name, qtype): s->v */
	NDC_TABLE_OTHER,     /* (name, NDC_FP_QTYPE_OTHER): s->v */
	NDC_TABLE_ABSENT,    /* neither: the name has no entry */
	NDC_TABLE_COLLISION, /* the key is another name's (abi.h: hash collisions) */
	NDC_TABLE_BUSY,	     /* the entry changed while it was read */
};

#define READ_ONCE_U32(x) (*(const volatile __u32 *)&(x))

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

/* Whether the slot's inline name is the one in kw (scratch), as dns_name_is for a value. */
static __always_inline int slot_name_is(const struct ndc_fp_slot *sl, const __u64 *kw,
					const struct ndc_question *q)
{
	const __u64 *sw = (const __u64 *)sl->bytes;
	__u32 nwords = (q->name_len + 7) / 8;
	__u64 diff = 0;

	/* verifier: constant bound */
	for (__u32 i = 0; i < NDC_FP_SLOT_BYTES / 8; i++) {
		if (i >= nwords)
			break;
		diff |= sw[i] ^ kw[i];
	}
	return diff == 0 && nwords <= NDC_FP_SLOT_BYTES / 8;
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
 * The answer held in the slot's bytes, into s->v: header, data, and with NDC_FP_V_EXPIRES the
 * times and TTL offsets after it. 0, or -1 when the slot's lengths do not fit its bytes (torn: the
 * sequence check decides).
 */
static __always_inline int slot_copy_inline(struct ndc_fp_scratch *s, const struct ndc_fp_slot *sl,
					    __u8 flags)
{
	__u32 off = ((__u32)sl->name_len + 7) & ~7U, len = sl->len, n_ttl = 0, o;
	__u64 w;

	s->v.len = len;
	s->v.ancount = sl->ancount;
	s->v.nscount = sl->nscount;
	s->v.arcount = sl->arcount;
	s->v.rcode = sl->rcode;
	s->v.flags = flags & (NDC_FP_V_AA | NDC_FP_V_PASS);
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

/* The answer of a struct ndc_fp_big into s->v (its name is compared by the caller). */
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
 * Copies the slot's answer (inline or big) into s->v between two reads of its sequence counter,
 * checking that it still holds the key and that its name is the one in s->name.
 */
static __always_inline enum ndc_table_res slot_read(struct ndc_fp_scratch *s,
						    const struct ndc_fp_slot *sl,
						    const struct ndc_question *q, __u64 hash,
						    __u16 qtype)
{
	__u32 seq = READ_ONCE_U32(sl->seq), b;
	const struct ndc_fp_big *big;
	int same;
	__u8 flags;

	if (seq & 1)
		return NDC_TABLE_BUSY;
	table_rmb(s);
	if (sl->state != NDC_FP_SLOT_FULL || sl->hash != hash || sl->qtype != qtype ||
	    sl->name_len != q->name_len)
		return NDC_TABLE_BUSY; /* it was changed between the walk and now */
	flags = sl->flags;
	if (flags & NDC_FP_V_BIG) {
		b = sl->big;
		big = bpf_map_lookup_elem(&ndc_big, &b);
		if (!big)
			return NDC_TABLE_BUSY;
		same = dns_name_is(&big->v, (const __u64 *)s->name, q);
		if (same)
			big_copy(s, &big->v);
	} else {
		same = slot_name_is(sl, (const __u64 *)s->name, q);
		if (same && slot_copy_inline(s, sl, flags))
			return NDC_TABLE_BUSY;
	}
	table_rmb(s);
	if (READ_ONCE_U32(sl->seq) != seq)
		return NDC_TABLE_BUSY;
	return same ? NDC_TABLE_EXACT : NDC_TABLE_COLLISION;
}

/*
 * The slot of (hash, qtype, q's name length), or NULL. The walk reads only the state and key of
 * the slots it passes; the one it finds is read again in full, under its sequence counter, by
 * slot_read.
 */
static __always_inline const struct ndc_fp_slot *table_walk(const struct ndc_question *q,
							    __u64 hash, __u16 qtype)
{
	__u32 n = ndc_n_slots, home = ndc_fp_home(hash, qtype, ndc_home_key, n);
	const struct ndc_fp_slot *sl;
	__u8 st;

	/* verifier: constant bound; ends at the first empty slot */
	for (__u32 p = 0; p < NDC_FP_PROBE_MAX; p++) {
		__u32 i = home + p;

		if (i >= n)
			i -= n;
		sl = bpf_map_lookup_elem(&ndc_answers, &i);
		if (!sl)
			return NULL;
		st = sl->state;
		if (st == NDC_FP_SLOT_EMPTY)
			return NULL;
		if (st == NDC_FP_SLOT_FULL && sl->hash == hash && sl->qtype == qtype &&
		    sl->name_len == q->name_len)
			return sl;
	}
	return NULL;
}

/* The entry for (q's name, q->qtype), else for (name, NDC_FP_QTYPE_OTHER), copied into s->v. */
static __always_inline enum ndc_table_res table_get(struct ndc_fp_scratch *s,
						    const struct ndc_question *q, __u64 hash)
{
	const struct ndc_fp_slot *sl = NULL;
	enum ndc_table_res r;
	__u16 qtype = q->qtype;

	/* one walk in the code, run once or twice: the program's size is its cold cost */
	for (int k = 0; k < 2; k++) {
		qtype = k ? NDC_FP_QTYPE_OTHER : q->qtype;
		sl = table_walk(q, hash, qtype);
		if (sl)
			break;
	}
	if (!sl)
		return NDC_TABLE_ABSENT;
	r = slot_read(s, sl, q, hash, qtype);
#ifdef NDC_FP_PLANT_WRONG_SLOT
	/*
	 * PLANTED BUG, never in a shipped object: tests/meson.build builds one object with it for
	 * the differential fuzzer (tests/bpf/fuzz_diff.c), which must catch it. The answer held in
	 * the home slot's neighbour, when it holds an inline one, replaces the answer found.
	 */
	if (r == NDC_TABLE_EXACT) {
		__u32 nb = ndc_fp_home(hash, qtype, ndc_home_key, ndc_n_slots) + 1;
		const struct ndc_fp_slot *w;

		if (nb >= ndc_n_slots)
			nb = 0;
		w = bpf_map_lookup_elem(&ndc_answers, &nb);
		if (w && w != sl && w->state == NDC_FP_SLOT_FULL && !(w->flags & NDC_FP_V_BIG))
			slot_copy_inline(s, w, w->flags);
	}
#endif
	return r == NDC_TABLE_EXACT && qtype != q->qtype ? NDC_TABLE_OTHER : r;
}

/* The NXDOMAIN template into s->v: 0, or -1 when it changed while it was read. */
static __always_inline int table_nx(struct ndc_fp_scratch *s)
{
	const struct ndc_fp_big *nx;
	__u32 zero = 0, seq;

	nx = bpf_map_lookup_elem(&ndc_nx, &zero);
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

#endif
