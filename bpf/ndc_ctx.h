/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * Context abstraction: one DNS core (ndc_answer.h), three contexts: the kernel's two hooks, and
 * a frame in a user-space buffer (the DPDK lcore, dataplane/dpdk/answer.c). Every access to the
 * packet context goes through these helpers, which take the hook as a compile-time constant. The
 * core is __always_inline all the way down, so each entry point compiles to straight code for its
 * own context type: the verifier never sees the other hook's context accesses or helpers, and the
 * DPDK build never calls a BPF helper.
 */
#ifndef NDC_CTX_H
#define NDC_CTX_H

#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <ndc/abi.h>

#include "ndc_parse.h"

enum ndc_hook { NDC_HOOK_TC, NDC_HOOK_XDP, NDC_HOOK_BUF };

/*
 * NDC_HOOK_BUF's context: a frame of len bytes at data with room bytes writable from data (an
 * mbuf's one segment). Resizing it sets len, after checking room, so a frame that cannot hold its
 * reply is passed before anything is written. Its verdicts are NDC_BUF_PASS and NDC_BUF_TX.
 */
struct ndc_ctx_buf {
	__u8 *data;
	__u32 len;
	__u32 room;
};

enum { NDC_BUF_PASS, NDC_BUF_TX };

/*
 * verifier: a value that reaches a point along several paths (VLAN depth, IP version, where the
 * name ends) has a different exact range on each, and everything after that point would be
 * verified once per path (the product of them overflows the 1M instruction budget). Passing it
 * through memory turns it into one unknown value, which the caller bounds again. A CPU needs
 * none of this: the buffer context keeps the value.
 */
static __always_inline __u32 ctx_launder(const enum ndc_hook hook, volatile __u32 *slot, __u32 v)
{
	if (hook == NDC_HOOK_BUF)
		return v;
	*slot = v;
	return *slot;
}

static __always_inline void *ctx_data(void *ctx, const enum ndc_hook hook)
{
	if (hook == NDC_HOOK_BUF)
		return ((struct ndc_ctx_buf *)ctx)->data;
	if (hook == NDC_HOOK_XDP)
		return (void *)(long)((struct xdp_md *)ctx)->data;
	return (void *)(long)((struct __sk_buff *)ctx)->data;
}

static __always_inline void *ctx_data_end(void *ctx, const enum ndc_hook hook)
{
	if (hook == NDC_HOOK_BUF)
		return ((struct ndc_ctx_buf *)ctx)->data + ((struct ndc_ctx_buf *)ctx)->len;
	if (hook == NDC_HOOK_XDP)
		return (void *)(long)((struct xdp_md *)ctx)->data_end;
	return (void *)(long)((struct __sk_buff *)ctx)->data_end;
}

/* Whole packet length from the link-layer header on (tc: linear part plus fragments). */
static __always_inline __u32 ctx_len(void *ctx, const enum ndc_hook hook)
{
	if (hook == NDC_HOOK_BUF)
		return ((struct ndc_ctx_buf *)ctx)->len;
	if (hook == NDC_HOOK_XDP) {
		__u32 len = (__u32)(ctx_data_end(ctx, hook) - ctx_data(ctx, hook));

		/* verifier: keep clang from folding later arithmetic on len into pkt_end */
		asm volatile("" : "+r"(len));
		return len;
	}
	return ((struct __sk_buff *)ctx)->len;
}

/*
 * Makes the first len bytes directly readable; 0 or negative. An XDP program without the frags
 * flag only ever sees one linear buffer, and a buffer is one by definition, so there a short
 * linear part means a short packet.
 */
static __always_inline int ctx_pull(void *ctx, const enum ndc_hook hook, __u32 len)
{
	if (hook == NDC_HOOK_XDP || hook == NDC_HOOK_BUF)
		return -1;
	return (int)bpf_skb_pull_data(ctx, len);
}

/* Grows or shrinks the packet to new_len bytes; 0 or negative (the packet is unchanged then). */
static __always_inline int ctx_set_len(void *ctx, const enum ndc_hook hook, __u32 cur_len,
				       __u32 new_len)
{
	if (hook == NDC_HOOK_BUF) {
		struct ndc_ctx_buf *b = ctx;

		if (new_len > b->room)
			return -1;
		b->len = new_len;
		return 0;
	}
	if (hook == NDC_HOOK_XDP)
		return (int)bpf_xdp_adjust_tail(ctx, (int)new_len - (int)cur_len);
	return (int)bpf_skb_change_tail(ctx, new_len, 0);
}

/* More than any reply grows: NDC_FP_DATA_MAX plus the OPT, in a frame of at least 14 bytes. */
#define NDC_GROW_MAX 2048

/*
 * Moves the keep bytes at data + d down to data (d > 0: the packet was grown at the head by d).
 * 0, or -1 with nothing written when they are not all inside the packet. Whole words, forward: a
 * word is always read before the stores that could reach it (they only go lower), and the last,
 * overlapping 32 bytes are read before any store, so any d > 0 is safe.
 */
static __always_inline int ctx_move_down(void *data, void *data_end, __u32 d32, __u32 keep32,
					 const __u32 max)
{
	/*
	 * verifier: 64-bit copies, opaque to clang. It knows d's bound from the caller and would
	 * drop the check below, and a 32-bit value is bounded in a zero-extended copy only.
	 */
	__u64 d = d32, keep = keep32, blocks, last_off, l0, l1, l2, l3, *s, *t;

	asm volatile("" : "+r"(d), "+r"(keep));
	if (keep < 32 || keep > max || d > NDC_GROW_MAX || data + d + keep > data_end)
		return -1;
	/* verifier: after the check above, the ones below cannot fail */
	blocks = keep / 32;
	last_off = keep - 32;
	s = data + d + last_off;
	if ((void *)(s + 4) > data_end)
		return -1;
	l0 = s[0];
	l1 = s[1];
	l2 = s[2];
	l3 = s[3];
	/* verifier: constant bound, every access checked right before it; 32 bytes per check */
	for (__u32 i = 0; i < max / 32; i++) {
		__u64 w0, w1, w2, w3;

		if (i >= blocks)
			break;
		s = pkt_at(data, d + i * 32);
		t = pkt_at(data, i * 32);
		if ((void *)(s + 4) > data_end || (void *)(t + 4) > data_end)
			return -1;
		w0 = s[0];
		w1 = s[1];
		w2 = s[2];
		w3 = s[3];
		t[0] = w0;
		t[1] = w1;
		t[2] = w2;
		t[3] = w3;
	}
	t = pkt_at(data, last_off);
	if ((void *)(t + 4) > data_end)
		return -1;
	t[0] = l0;
	t[1] = l1;
	t[2] = l2;
	t[3] = l3;
	return 0;
}

/*
 * Sizes the packet from cur_len to new_len bytes for a reply that begins with the query's first
 * keep bytes (headers and question, rewritten in place afterwards); 0 or negative, the packet
 * unchanged then. Packet pointers must be derived anew afterwards.
 *
 * XDP grows at the head when there is headroom (drivers reserve XDP_PACKET_HEADROOM, 256 bytes):
 * bpf_xdp_adjust_head only moves a pointer, while bpf_xdp_adjust_tail also checks the frame's
 * tailroom and zeroes the new bytes with a memset call. Each call costs a mispredicted return on
 * CPUs with the SRSO "safe RET" mitigation; moving the keep bytes (about 100 for a service name)
 * as words costs less (measured: BPF_PROG_TEST_RUN, docs/bench/FASTPATH.md). tc keeps
 * bpf_skb_change_tail: growing an skb at the head would leave its network and transport header
 * offsets (and csum_start of a CHECKSUM_PARTIAL query) pointing into the moved bytes.
 */
static __always_inline int ctx_resize(void *ctx, const enum ndc_hook hook, __u32 cur_len,
				      __u32 new_len, __u32 keep, const __u32 keep_max)
{
	if (hook == NDC_HOOK_XDP && new_len > cur_len) {
		__u32 d = new_len - cur_len;

		if (!bpf_xdp_adjust_head(ctx, -(int)d)) {
			void *data = ctx_data(ctx, hook), *data_end = ctx_data_end(ctx, hook);

			/* the query's keep bytes now start at data + d, inside the grown frame */
			if (!ctx_move_down(data, data_end, d, keep, keep_max))
				return 0;
			bpf_xdp_adjust_head(ctx, (int)d); /* back to the query, untouched */
			return -1;
		}
	}
	return ctx_set_len(ctx, hook, cur_len, new_len);
}

/*
 * Copies len (<= max, a multiple of 8) bytes from src, a map value with at least max readable
 * bytes from an 8-byte boundary, into the packet at off, which must end at or after off + len. 0 or
 * -1.
 *
 * Direct writes, not bpf_skb_store_bytes / bpf_xdp_store_bytes: a helper costs a call and
 * several returns inside the kernel, and on these machines (AMD, SRSO "safe RET" mitigation)
 * each return is expensive; the store helper alone cost more than the whole copy of a typical
 * answer. A CPU copies with memcpy: the checked word loop the verifier needs cost the DPDK lcore
 * 9 ns more per NXDOMAIN (tests/bench/dpdk/bench_dpdk_answer.c).
 */
static __always_inline int ctx_copy_in(const enum ndc_hook hook, void *data, void *data_end,
				       __u32 off, const __u8 *src, __u32 len, const __u32 max)
{
	const __u64 *sw = (const __u64 *)src; /* see slot_word() in ndc_table.h */
	__u32 words = len / 8, rest = len & 7, tail;
	__u8 *t;

	if (hook == NDC_HOOK_BUF) {
		if (len > max || (__u8 *)data + off + len > (__u8 *)data_end)
			return -1;
		__builtin_memcpy((__u8 *)data + off, src, len);
		return 0;
	}
	/* verifier: constant bound, every write checked right before it */
	for (__u32 i = 0; i < max / 8; i++) {
		__u64 *d;

		if (i >= words)
			break;
		d = pkt_at(data, off + i * 8);
		if ((void *)(d + 1) > data_end)
			return -1;
		*d = sw[i];
	}
	if (!rest)
		return 0;
	/* verifier: below max - 8 whenever there is a rest, which keeps src + tail + 8 inside */
	tail = len & (max - 8);
	t = pkt_at(data, off + tail);
	src += tail;
	if (rest & 4) {
		if ((void *)(t + 4) > data_end)
			return -1;
		*(__u32 *)t = *(const __u32 *)src;
		t += 4;
		src += 4;
	}
	if (rest & 2) {
		if ((void *)(t + 2) > data_end)
			return -1;
		*(__u16 *)t = *(const __u16 *)src;
		t += 2;
		src += 2;
	}
	if (rest & 1) {
		if ((void *)(t + 1) > data_end)
			return -1;
		*t = *src;
	}
	return 0;
}

static __always_inline int ctx_pass(const enum ndc_hook hook)
{
	if (hook == NDC_HOOK_BUF)
		return NDC_BUF_PASS;
	return hook == NDC_HOOK_XDP ? XDP_PASS : NDC_TC_PASS;
}

/*
 * Sends the rewritten packet back where it came from. tc ingress: out of the same device (to
 * the pod behind a veth), or straight into the peer's ingress, which skips the host-side veth
 * transmit (DESIGN: fastest for socket clients, but invisible to an XDP receiver in the pod).
 */
static __always_inline int ctx_reply(void *ctx, const enum ndc_hook hook, int peer)
{
	if (hook == NDC_HOOK_BUF)
		return NDC_BUF_TX; /* the caller sends it */
	if (hook == NDC_HOOK_XDP)
		return XDP_TX;
	if (peer)
		return (int)bpf_redirect_peer(((struct __sk_buff *)ctx)->ifindex, 0);
	return (int)bpf_redirect(((struct __sk_buff *)ctx)->ifindex, 0);
}

#endif
