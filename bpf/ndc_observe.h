/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * What the kernel's fast path keeps for the operator (issue 37): queries per client, per CPU in
 * ndc_clients (user space sums them: ndc_fastpath_clients), and sampled replies in the ring
 * buffer ndc_samples (ndc_fastpath_samples). The backend (bpf/ndc_fastpath.bpf.c) notes a query's
 * client in its scratch and adds to its counts once the answer core is done; the writes
 * themselves are here.
 */
#ifndef NDC_OBSERVE_H
#define NDC_OBSERVE_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include <ndc/abi.h>

#include "ndc_ctx.h" /* enum ndc_hook */

/*
 * Queries per client (abi.h, struct ndc_fp_client_slot): per CPU, so that a count is a plain add;
 * an array, so that a lookup is inlined (no helper call, no hash of the key in the kernel) and the
 * table stays bounded; two slots a client may hold (NDC_FP_CLIENT_SLOT_A, _B), so that clients
 * whose first slot is taken still get one of their own. Not pinned: user space reads it through
 * the loader (ndc_fastpath_clients). Per CPU by index (ndc_cpu_slot), like the scratch.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NDC_FP_CLIENTS_MAX); /* the loader's: that many per possible CPU */
	__uint(map_flags, BPF_F_MMAPABLE);	 /* page-aligned: each slot one line */
	__type(key, __u32);
	__type(value, struct ndc_fp_client_slot);
} ndc_clients SEC(".maps");

/* This CPU's slot s of ndc_clients (s below NDC_FP_CLIENTS_MAX), or NULL. */
static __always_inline struct ndc_fp_client_slot *ndc_cpu_slot(__u32 s)
{
	__u32 i = NDC_FP_CLIENT_INDEX(bpf_get_smp_processor_id(), s);

	return bpf_map_lookup_elem(&ndc_clients, &i);
}

/* Slots a new client took from another (user space reads it: ndc_fastpath_clients_taken). */
__u64 ndc_clients_taken = 0;

/*
 * Sampled answers (struct ndc_fp_sample_rec). A ring buffer, not a perf event array: one buffer
 * for every CPU in arrival order, and a record reserved in place into which the helpers copy the
 * reply from the frame, so bpf_perf_event_output's packet-append (which copies from the frame's
 * first byte, headers and all, into per-CPU buffers) is not needed.
 */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, NDC_FP_SAMPLES_BYTES);
} ndc_samples SEC(".maps");

/* Samples the ring had no room for (user space reads it: ndc_fastpath_samples_lost). */
__u64 ndc_samples_lost = 0;

/* The 64-bit word of a key whose bytes are lo's, then hi's, as a load of them reads it. */
static __always_inline __u64 key_word(__u32 lo, __u32 hi)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	return (__u64)hi << 32 | lo;
#else
	return (__u64)lo << 32 | hi;
#endif
}

/*
 * The query's counts at its client k: one CPU's, a plain add (no nesting on a CPU). k's slot of
 * its two (slots: abi.h NDC_FP_CLIENT_SLOTS of k's hash, which ndc_counts_touch computed), else a
 * new one: an empty one of the two, else the one with fewer queries, whose owner
 * loses its counts on this CPU (abi.h, struct ndc_fp_client_slot). Inlined, not a global
 * function: no call on every counted query, and the verifier, which walks it at the end of the
 * core's paths, where they have merged into few states, processes 0.3% more instructions for it
 * than for a global function (tc 591,638 -> 593,304 on 6.18; XDP 464,283 -> 464,346).
 */
static __always_inline int ndc_client_add_key(__u64 w0, __u64 w1, __u32 slots, __u32 idx)
{
	__u64 answered = idx <= NDC_FP_NXDOMAIN, nx = idx == NDC_FP_NXDOMAIN;
	struct ndc_fp_client_slot *a, *b, *s;
	__u32 ia = NDC_FP_CLIENT_SLOTS_A(slots), ib = NDC_FP_CLIENT_SLOTS_B(slots);

	a = ndc_cpu_slot(ia);
	if (!a)
		return 0; /* never: both indexes are below max_entries */
	/* an empty slot's key is all zero (never written): found for :: with zero counts, right */
	if (((__u64 *)a->key.addr)[0] == w0 && ((__u64 *)a->key.addr)[1] == w1) {
		s = a;
		goto count; /* the usual case: the second slot is not looked up */
	}
	b = ndc_cpu_slot(ib);
	if (!b)
		return 0;
	if (((__u64 *)b->key.addr)[0] == w0 && ((__u64 *)b->key.addr)[1] == w1) {
		s = b;
	} else {
		/* empty (0 queries) or fewer; a on a tie */
		s = b->counts.queries < a->counts.queries ? b : a;
		if (s->counts.queries)
			__sync_fetch_and_add(&ndc_clients_taken, 1);
		((__u64 *)s->key.addr)[0] = w0;
		((__u64 *)s->key.addr)[1] = w1;
		s->counts.queries = 0;
		s->counts.answered = 0;
		s->counts.nxdomain = 0;
		s->counts.passed = 0;
	}
count:
	s->counts.queries++;
	s->counts.answered += answered;
	s->counts.nxdomain += nx;
	s->counts.passed += answered ^ 1;
	return 0;
}

/* The same for the key at k, as ndc_be_client keeps it in the scratch. */
static __always_inline int ndc_client_add(const struct ndc_fp_client_key *k, __u32 slots, __u32 idx)
{
	if (!k)
		return 0;
	/* the key is 8-aligned in the scratch (a map value), as in the slot */
	return ndc_client_add_key(((const __u64 *)k->addr)[0], ((const __u64 *)k->addr)[1], slots,
				  idx);
}

/*
 * verifier: the sample is a global function, verified once on its own, not once for every path
 * through the core that reaches it (it has thousands).
 */

/* dns_len bytes of DNS message at dns_off of the reply in ctx, to k at port: a sample record. */
static __always_inline int sample_put(void *ctx, const enum ndc_hook hook, __u32 dns_off,
				      __u32 dns_len, const struct ndc_fp_client_key *k, __u32 port)
{
	struct ndc_fp_sample_rec *r;
	__u64 n;
	long err;

	if (!k)
		return 0;
	r = bpf_ringbuf_reserve(&ndc_samples, sizeof(*r), 0);
	if (!r) {
		__sync_fetch_and_add(&ndc_samples_lost, 1);
		return 0;
	}
	/* verifier: 64 bits, so that the length checked is the register passed (no zero extension)
	 */
	n = dns_len;
	barrier_var(n);
	if (n > NDC_FP_SAMPLE_MSG_MAX)
		n = NDC_FP_SAMPLE_MSG_MAX;
	if (n < 1) {
		bpf_ringbuf_discard(r, 0);
		return 0;
	}
	if (hook == NDC_HOOK_XDP)
		err = bpf_xdp_load_bytes(ctx, dns_off, r->msg, n);
	else
		err = bpf_skb_load_bytes(ctx, dns_off, r->msg, n);
	if (err) {
		bpf_ringbuf_discard(r, 0);
		return 0;
	}
	r->ktime_ns = bpf_ktime_get_ns();
	__builtin_memcpy(r->client, k->addr, sizeof(r->client));
	r->client_port = (__be16)port;
	r->len = (__u16)n;
	r->pad = 0;
	bpf_ringbuf_submit(r, 0);
	return 0;
}

__noinline int ndc_sample_skb(struct __sk_buff *skb, __u32 dns_off, __u32 dns_len,
			      const struct ndc_fp_client_key *k, __u32 port)
{
	return sample_put(skb, NDC_HOOK_TC, dns_off, dns_len, k, port);
}

__noinline int ndc_sample_xdp(struct xdp_md *xdp, __u32 dns_off, __u32 dns_len,
			      const struct ndc_fp_client_key *k, __u32 port)
{
	return sample_put(xdp, NDC_HOOK_XDP, dns_off, dns_len, k, port);
}

#endif
