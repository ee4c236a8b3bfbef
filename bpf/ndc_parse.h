/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * Header parsing with a cursor. The cursor holds an offset from the start of the packet rather
 * than a pointer: offsets stay valid across helpers that move the packet (change_tail,
 * store_bytes), and their bounds are plain scalars the verifier tracks. Each parse_* helper
 * checks its own bounds right before the access and advances the cursor past its header.
 */
#ifndef NDC_PARSE_H
#define NDC_PARSE_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define NDC_VLAN_MAX 2 /* 802.1ad outer + 802.1Q inner; deeper stacks are passed */

#define NDC_IP_MF 0x2000
#define NDC_IP_OFFSET 0x1fff

struct ndc_cursor {
	void *data;
	void *data_end;
	__u32 off; /* from data: start of the next header */
};

struct ndc_vlan_hdr {
	__be16 tci;
	__be16 proto;
};

/*
 * data + off as a pointer of its own. verifier: bounds checks on a pointer refine every pointer
 * derived from the same base; when clang strength-reduces a loop to one base pointer, each way
 * out of an iteration leaves a different range on it and the states stop pruning. Hiding the
 * offset gives each access a fresh pointer whose check refines nothing else.
 */
static __always_inline void *pkt_at(void *data, __u32 off)
{
	asm volatile("" : "+r"(off));
	return data + off;
}

static __always_inline void cursor_init(struct ndc_cursor *c, void *data, void *data_end)
{
	c->data = data;
	c->data_end = data_end;
	c->off = 0;
}

/* Ethernet and up to NDC_VLAN_MAX tags; returns the ethertype (network order), 0 if cut short. */
static __always_inline __be16 parse_eth(struct ndc_cursor *c)
{
	struct ethhdr *eth = c->data;
	__be16 proto;

	if ((void *)(eth + 1) > c->data_end)
		return 0;
	proto = eth->h_proto;
	c->off = sizeof(*eth);
	/* verifier: constant bound, the offset grows by a constant per tag */
	for (int i = 0; i < NDC_VLAN_MAX; i++) {
		struct ndc_vlan_hdr *vh;

		if (proto != bpf_htons(ETH_P_8021Q) && proto != bpf_htons(ETH_P_8021AD))
			break;
		vh = c->data + c->off;
		if ((void *)(vh + 1) > c->data_end)
			return 0;
		proto = vh->proto;
		c->off += sizeof(*vh);
	}
	return proto;
}

static __always_inline struct iphdr *parse_ipv4(struct ndc_cursor *c)
{
	struct iphdr *iph = c->data + c->off;

	if ((void *)(iph + 1) > c->data_end)
		return NULL;
	c->off += sizeof(*iph); /* options are passed by the caller, never skipped */
	return iph;
}

static __always_inline struct ipv6hdr *parse_ipv6(struct ndc_cursor *c)
{
	struct ipv6hdr *ip6h = c->data + c->off;

	if ((void *)(ip6h + 1) > c->data_end)
		return NULL;
	c->off += sizeof(*ip6h); /* extension headers are passed by the caller */
	return ip6h;
}

static __always_inline struct udphdr *parse_udp(struct ndc_cursor *c)
{
	struct udphdr *uh = c->data + c->off;

	if ((void *)(uh + 1) > c->data_end)
		return NULL;
	c->off += sizeof(*uh);
	return uh;
}

/* IPv6 extension headers (RFC 8200 4, RFC 7045): a query behind any of them is passed. */
static __always_inline int ipv6_is_ext(__u8 nexthdr)
{
	switch (nexthdr) {
	case IPPROTO_HOPOPTS:
	case IPPROTO_ROUTING:
	case IPPROTO_FRAGMENT:
	case IPPROTO_ESP:
	case IPPROTO_AH:
	case IPPROTO_DSTOPTS:
	case IPPROTO_MH:
	case 139: /* HIP */
	case 140: /* Shim6 */
		return 1;
	}
	return 0;
}

#endif
