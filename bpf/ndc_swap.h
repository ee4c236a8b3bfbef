/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * Turning a packet around in place: the reply goes back to the sender with the addresses and
 * ports swapped and the lengths of the new payload. VLAN tags stay as they are.
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

static __always_inline int swap_eth(void *data, void *data_end)
{
	struct ethhdr *eth = data;
	__u8 mac[ETH_ALEN];

	if ((void *)(eth + 1) > data_end)
		return -1;
	__builtin_memcpy(mac, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, mac, ETH_ALEN);
	return 0;
}

static __always_inline void swap_ports(struct udphdr *uh, __u32 udp_len)
{
	__be16 port = uh->source;

	uh->source = uh->dest;
	uh->dest = port;
	uh->len = bpf_htons((__u16)udp_len);
}

/* IPv4 (20-byte header) and UDP; the UDP checksum is left out (0), which RFC 768 allows. */
static __always_inline int swap_ipv4_udp(void *data, void *data_end, __u32 l3_off, __u32 udp_len)
{
	struct iphdr *iph = data + l3_off;
	struct udphdr *uh = data + l3_off + sizeof(*iph);
	__be32 addr;

	if ((void *)(uh + 1) > data_end)
		return -1;
	addr = iph->saddr;
	iph->saddr = iph->daddr;
	iph->daddr = addr;
	iph->ttl = NDC_REPLY_TTL;
	iph->tot_len = bpf_htons((__u16)(sizeof(*iph) + udp_len));
	ipv4_csum_set(iph);
	swap_ports(uh, udp_len);
	uh->check = 0;
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
