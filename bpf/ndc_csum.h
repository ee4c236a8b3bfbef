/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * Internet checksums (RFC 1071) computed from scratch. Sums are taken over words in memory order
 * and the folded result is stored as is, which is byte-order independent (RFC 1071 2(B)).
 * Incremental updates (RFC 1624) are not an option here: a query sent from a socket over veth
 * carries CHECKSUM_PARTIAL, so its UDP checksum field holds only the pseudo-header sum.
 */
#ifndef NDC_CSUM_H
#define NDC_CSUM_H

#include <linux/bpf.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "ndc_parse.h"

/* UDP header plus the largest reply the fast path sends, in 8-byte words. */
#define NDC_CSUM_WORDS_MAX ((8 + 1232) / 8)

static __always_inline __u16 csum_fold64(__u64 sum)
{
	/* four folds take any 64-bit sum down to 16 bits */
	sum = (sum & 0xffffffff) + (sum >> 32);
	sum = (sum & 0xffffffff) + (sum >> 32);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)sum;
}

/*
 * Unfolded sum of the len bytes at data + off; ~0ULL if they are not all inside the packet (a
 * real sum of at most NDC_CSUM_WORDS_MAX words never comes near it).
 */
static __always_inline __u64 csum_pkt(void *data, void *data_end, __u32 off, __u32 len)
{
	__u32 words = len / 8, rest = len & 7;
	__u64 sum = 0;
	__u8 *t;

	if (words > NDC_CSUM_WORDS_MAX)
		return ~0ULL;
	/*
	 * verifier: constant bound; each word is bounds-checked right before it is read. Nothing
	 * after the loop uses words (the tail offset comes from len), so its exits merge.
	 */
	for (__u32 i = 0; i < NDC_CSUM_WORDS_MAX; i++) {
		__u64 *w;

		if (i >= words)
			break;
		w = pkt_at(data, off + i * 8);
		if ((void *)(w + 1) > data_end)
			return ~0ULL;
		sum += (*w & 0xffffffff) + (*w >> 32);
	}
	/* the last 0..7 bytes, as they sit in memory, zero-padded to the next 16-bit word */
	asm volatile("" : "+r"(len)); /* verifier: keep clang from reusing words here */
	t = pkt_at(data, off + (len & ~7U));
	if (rest >= 4) {
		if ((void *)(t + 4) > data_end)
			return ~0ULL;
		sum += *(__u32 *)t;
		t += 4;
		rest -= 4;
	}
	if (rest >= 2) {
		if ((void *)(t + 2) > data_end)
			return ~0ULL;
		sum += *(__u16 *)t;
		t += 2;
		rest -= 2;
	}
	if (rest) {
		union {
			__u16 w;
			__u8 b[2];
		} last = {.w = 0};

		if ((void *)(t + 1) > data_end)
			return ~0ULL;
		last.b[0] = *t;
		sum += last.w;
	}
	return sum;
}

/* RFC 8200 8.1: UDP over IPv6 always carries a checksum, over the pseudo-header and datagram. */
static __always_inline int ipv6_udp_csum_set(void *data, void *data_end, __u32 l3_off, __u32 l4_off,
					     __u32 udp_len)
{
	struct ipv6hdr *ip6h = data + l3_off;
	struct udphdr *uh = data + l4_off;
	__u32 *a;
	__u64 sum;

	if ((void *)(ip6h + 1) > data_end || (void *)(uh + 1) > data_end)
		return -1;
	uh->check = 0;
	a = (__u32 *)&ip6h->saddr; /* saddr and daddr: 32 contiguous bytes */
	sum = (__u64)a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
	/* 64-bit adds: two big-endian words in a 32-bit add can carry out and lose it */
	sum += (__u64)bpf_htonl(udp_len) + (__u64)bpf_htonl(IPPROTO_UDP);
	/* verifier: re-derive the bounds, the header pointers above do not carry over */
	__u64 body = csum_pkt(data, data_end, l4_off, udp_len);
	if (body == ~0ULL)
		return -1;
	__u16 c = (__u16)~csum_fold64(sum + body);

	uh = data + l4_off;
	if ((void *)(uh + 1) > data_end)
		return -1;
	uh->check = c ? c : 0xffff; /* RFC 768: a computed zero is sent as all ones */
	return 0;
}

#endif
