/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * Turning a packet around in place: the reply goes back to the sender with the addresses and
 * ports swapped and the lengths of the new payload. VLAN tags stay as they are.
 *
 * Every header is read into registers before any of it is written, and written back in whole
 * words: a load that overlaps an earlier, narrower store to the same bytes cannot be served from
 * the store buffer and stalls until the store retires (measured: the IPv4 checksum read back after
 * the 1- and 2-byte field writes was a tenth of a hit's own run time). Packet accesses may be
 * unaligned here (x86-64, arm64: efficient unaligned access; the verifier allows it without
 * BPF_F_STRICT_ALIGNMENT), which lets the 6-byte MACs move as 4 + 2 bytes instead of the byte
 * copies clang emits for a memcpy of unknown alignment.
 */
#ifndef NDC_SWAP_H
#define NDC_SWAP_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "ndc_csum.h"

#define NDC_REPLY_TTL 64 /* a fresh packet's TTL / hop limit, as the socket path would send */

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the word masks below assume little-endian words (bpfel)"
#endif

static __always_inline int swap_eth(void *data, void *data_end)
{
	__u8 *e = data;
	__u32 d0, s0;
	__u16 d1, s1;

	if ((void *)(e + ETH_HLEN) > data_end)
		return -1;
	d0 = *(__u32 *)e;
	d1 = *(__u16 *)(e + 4);
	s0 = *(__u32 *)(e + 6);
	s1 = *(__u16 *)(e + 10);
	*(__u32 *)e = s0;
	*(__u16 *)(e + 4) = s1;
	*(__u32 *)(e + 6) = d0;
	*(__u16 *)(e + 10) = d1;
	return 0;
}

/* Ports swapped (one 32-bit rotate), length set, checksum 0 (the IPv6 caller sets it later). */
static __always_inline void swap_ports(struct udphdr *uh, __u32 udp_len)
{
	__u32 ports = *(__u32 *)uh;

	*(__u32 *)uh = ports >> 16 | ports << 16;
	*(__u32 *)&uh->len = bpf_htons((__u16)udp_len);
}

/*
 * IPv4 (20-byte header) and UDP; the UDP checksum is left out (0), which RFC 768 allows. The
 * header checksum (RFC 791 3.1) is summed over the new header's words as computed in registers, not
 * updated from the query's (RFC 1624 would do too, but a query with a bad header checksum would
 * then get a reply with one: recomputing costs three adds more).
 */
static __always_inline int swap_ipv4_udp(void *data, void *data_end, __u32 l3_off, __u32 udp_len)
{
	__u32 *w = data + l3_off;
	struct udphdr *uh = data + l3_off + sizeof(struct iphdr);
	__u32 w0, w1, w2, w3, w4;
	__u64 sum;

	if ((void *)(uh + 1) > data_end)
		return -1;
	/* version, IHL, TOS kept; total length new */
	w0 = (w[0] & 0xffff) | (__u32)bpf_htons((__u16)(sizeof(struct iphdr) + udp_len)) << 16;
	w1 = w[1]; /* ID, flags, fragment offset */
	/* TTL new, protocol kept, checksum 0 while summing */
	w2 = (w[2] & 0xff00) | NDC_REPLY_TTL;
	w3 = w[3];
	w4 = w[4];
	sum = (__u64)w0 + w1 + w2 + w3 + w4;
	w2 |= (__u32)(__u16)~csum_fold64(sum) << 16;
	w[0] = w0;
	w[2] = w2;
	w[3] = w4; /* saddr <- daddr */
	w[4] = w3;
	swap_ports(uh, udp_len);
	return 0;
}

/* IPv6 and UDP; the caller sets the UDP checksum once the payload is complete. */
static __always_inline int swap_ipv6_udp(void *data, void *data_end, __u32 l3_off, __u32 udp_len)
{
	struct ipv6hdr *ip6h = data + l3_off;
	struct udphdr *uh = data + l3_off + sizeof(*ip6h);
	__u64 *s, *d, t0, t1;

	if ((void *)(uh + 1) > data_end)
		return -1;
	s = (__u64 *)&ip6h->saddr;
	d = (__u64 *)&ip6h->daddr;
	t0 = s[0];
	t1 = s[1];
	s[0] = d[0];
	s[1] = d[1];
	d[0] = t0;
	d[1] = t1;
	ip6h->hop_limit = NDC_REPLY_TTL;
	ip6h->payload_len = bpf_htons((__u16)udp_len);
	swap_ports(uh, udp_len);
	return 0;
}

#endif
