// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
/*
 * The benchmark baseline: bounces every UDP datagram to port 53 back to its sender, addresses and
 * ports swapped, payload untouched. No DNS, no maps, no checksum work beyond what the swap needs
 * (the IPv4 header checksum is unchanged by swapping its two address words; UDP sums are
 * symmetric in the addresses and ports). What the fast path costs on top of this is the DNS work.
 *
 * Over IPv4 the UDP checksum is set to 0 (none, RFC 768), as the fast path's replies have it: a
 * query sent from a socket over veth carries only the pseudo-header sum there (CHECKSUM_PARTIAL),
 * which tc keeps in the skb but XDP loses, so a socket would drop the XDP reflector's reply.
 *
 * Built once more with NDC_REFLECT_LOAD (ndc_reflector_load.bpf.o): before it bounces a query it
 * reads one table line for it (ndc_reflect_load.h). Over many names that line comes from memory:
 * what that variant adds per name over its own hot set is one table load in this path under this
 * traffic, the floor of what a name costs the fast path (its table is never written; one written
 * costs the same, measured with NDC_REFLECT_WRITE: docs/bench/FASTPATH.md;
 * tests/bench/latency_bench.sh, reflector-load).
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "ndc_ctx.h"
#include "ndc_parse.h"

#define NDC_REFLECT_PORT 53

#ifdef NDC_REFLECT_LOAD
#include "ndc_reflect_load.h"
#endif

static __always_inline int reflect(void *ctx, const enum ndc_hook hook)
{
	void *data = ctx_data(ctx, hook), *data_end = ctx_data_end(ctx, hook);
	struct ndc_cursor c;
	struct udphdr *uh;
	struct ethhdr *eth;
	__u8 mac[ETH_ALEN];
	__be16 proto, port;

	cursor_init(&c, data, data_end);
	proto = parse_eth(&c);
	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *iph = parse_ipv4(&c);
		__be32 a;

		if (!iph || iph->protocol != IPPROTO_UDP || iph->ihl != 5)
			return ctx_pass(hook);
		uh = parse_udp(&c);
		if (!uh || uh->dest != bpf_htons(NDC_REFLECT_PORT))
			return ctx_pass(hook);
#ifdef NDC_REFLECT_LOAD
		if (reflect_load(data, data_end, c.off + 12))
			return ctx_pass(hook);
#endif
		a = iph->saddr;
#ifdef NDC_REFLECT_DEP
		a ^= (__u32)reflect_dep;
#endif
		iph->saddr = iph->daddr;
		iph->daddr = a;
		uh->check = 0;
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6h = parse_ipv6(&c);
		struct in6_addr a;

		if (!ip6h || ip6h->nexthdr != IPPROTO_UDP)
			return ctx_pass(hook);
		uh = parse_udp(&c);
		if (!uh || uh->dest != bpf_htons(NDC_REFLECT_PORT))
			return ctx_pass(hook);
#ifdef NDC_REFLECT_LOAD
		if (reflect_load(data, data_end, c.off + 12))
			return ctx_pass(hook);
#endif
		a = ip6h->saddr;
		ip6h->saddr = ip6h->daddr;
		ip6h->daddr = a;
	} else {
		return ctx_pass(hook);
	}
	port = uh->source;
#ifdef NDC_REFLECT_DEP
	port ^= (__u16)reflect_dep;
#endif
	uh->source = uh->dest;
	uh->dest = port;
	eth = data;
	__builtin_memcpy(mac, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, mac, ETH_ALEN);
	return ctx_reply(ctx, hook, 0);
}

SEC("tc")
int ndc_reflect_tc(struct __sk_buff *skb)
{
	return reflect(skb, NDC_HOOK_TC);
}

SEC("xdp")
int ndc_reflect_xdp(struct xdp_md *ctx)
{
	return reflect(ctx, NDC_HOOK_XDP);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
