/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * Layers 2 to 4 of a query: is this frame a whole UDP datagram to a node-local address and port,
 * and where are its headers. The answer core's first step (bpf/ndc_answer.h, whose ndc_answer_l4
 * adds the config lookup, TCP for fail-open and the pull of a non-linear skb); fail-open reads the
 * address checks too.
 *
 * In two steps, so that the kernel can look its config up only for IP traffic: ndc_parse_l3
 * (Ethernet, VLAN tags, IPv4 or IPv6), then, once the destination is known to be ours,
 * ndc_parse_udp.
 */
#ifndef NDC_L4_H
#define NDC_L4_H

#include <ndc/abi.h>

#include "ndc_parse.h"
#include "ndc_dns.h"

#define NDC_NOT_OURS NDC_FP_COUNTER_MAX /* pass without counting: not a query to us */

/* Where a query's headers are, from the start of the frame. */
struct ndc_pkt {
	__u32 l3_off;
	__u32 l4_off;
	__u32 udp_len;
	int v6;
	__be16 sport; /* the UDP source port, once ndc_parse_udp read it; else 0 */
};

/* What ndc_parse_l3 found in the IP header. */
struct ndc_l3 {
	const struct in6_addr *daddr6; /* IPv6: the destination, in the frame; else NULL */
	const struct in6_addr *saddr6; /* IPv6: the source, in the frame (with daddr6) */
	__be32 daddr4;		       /* IPv4: the destination */
	__be32 saddr4;		       /* IPv4: the source */
	__u32 ip_payload;	       /* the bytes after the IP header, by the IP header */
	__u8 tcp;		       /* a TCP segment: the caller's to decide */
	__u8 pass_frag;		       /* IP options, an extension header or a later fragment */
	__u8 first_frag;	       /* the first fragment of several */
};

static __always_inline int addr4_ours(const struct ndc_fp_config *cfg, __be32 daddr)
{
	/* verifier: constant bound */
	for (__u32 i = 0; i < NDC_FP_MAX_ADDRS; i++) {
		if (i >= cfg->n_addr4)
			break;
		if (cfg->addr4[i] == daddr)
			return 1;
	}
	return 0;
}

static __always_inline int addr6_ours(const struct ndc_fp_config *cfg, const struct in6_addr *d)
{
	__u64 d0 = ((const __u64 *)d)[0], d1 = ((const __u64 *)d)[1];

	/* verifier: constant bound */
	for (__u32 i = 0; i < NDC_FP_MAX_ADDRS; i++) {
		const __u64 *a = (const __u64 *)cfg->addr6[i];

		if (i >= cfg->n_addr6)
			break;
		if (a[0] == d0 && a[1] == d1)
			return 1;
	}
	return 0;
}

/* Whether l3's destination is one of the config's node-local addresses. */
static __always_inline int ndc_l3_ours(const struct ndc_fp_config *cfg, const struct ndc_l3 *l3)
{
	return l3->daddr6 ? addr6_ours(cfg, l3->daddr6) : addr4_ours(cfg, l3->daddr4);
}

/*
 * Ethernet, up to NDC_VLAN_MAX tags and the IPv4 or IPv6 header at c: NDC_GO with l3 and pk's
 * l3_off, l4_off and v6 set (c past the IP header), or NDC_NOT_OURS for anything but UDP or TCP
 * over IP (and for a frame cut short). The ethertype and protocol come first: most frames leave
 * after two compares.
 */
static __always_inline int ndc_parse_l3(struct ndc_cursor *c, struct ndc_pkt *pk, struct ndc_l3 *l3)
{
	__be16 proto = parse_eth(c);

	pk->l3_off = c->off;
	pk->sport = 0;
	l3->daddr6 = NULL;
	l3->tcp = 0;
	l3->pass_frag = 0;
	l3->first_frag = 0;
	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *iph = parse_ipv4(c);

		if (!iph)
			return NDC_NOT_OURS;
		l3->daddr4 = iph->daddr;
		l3->saddr4 = iph->saddr;
		pk->v6 = 0;
		if (iph->protocol == IPPROTO_TCP) {
			l3->tcp = 1;
			return NDC_GO;
		}
		if (iph->protocol != IPPROTO_UDP || iph->version != 4)
			return NDC_NOT_OURS;
		/* options (never skipped) or a later fragment (no UDP header): user space */
		l3->pass_frag = iph->ihl != 5 || (iph->frag_off & bpf_htons(NDC_IP_OFFSET)) != 0;
		l3->first_frag = (iph->frag_off & bpf_htons(NDC_IP_MF)) != 0;
		l3->ip_payload = (__u32)bpf_ntohs(iph->tot_len) - sizeof(*iph);
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6h = parse_ipv6(c);

		if (!ip6h)
			return NDC_NOT_OURS;
		l3->daddr4 = 0;
		pk->v6 = 1;
		l3->saddr6 = &ip6h->saddr;
		if (ip6h->nexthdr == IPPROTO_TCP) {
			l3->daddr6 = &ip6h->daddr;
			l3->tcp = 1;
			return NDC_GO;
		}
		if (ip6h->nexthdr != IPPROTO_UDP && !ipv6_is_ext(ip6h->nexthdr))
			return NDC_NOT_OURS;
		l3->daddr6 = &ip6h->daddr;
		l3->pass_frag = ip6h->nexthdr != IPPROTO_UDP; /* extension headers: user space */
		l3->ip_payload = bpf_ntohs(ip6h->payload_len);
	} else {
		return NDC_NOT_OURS;
	}
	pk->l4_off = c->off;
	return NDC_GO;
}

/*
 * After ndc_parse_l3 found a UDP datagram (or a fragment) to one of cfg's addresses: NDC_GO when
 * it is a whole datagram to cfg's port with a DNS header's room, all of it within len (the frame's
 * length), with pk->udp_len set; else NDC_NOT_OURS (another port) or a pass reason.
 */
static __always_inline int ndc_parse_udp(struct ndc_cursor *c, const struct ndc_fp_config *cfg,
					 const struct ndc_l3 *l3, __u32 len, struct ndc_pkt *pk)
{
	struct udphdr *uh;

	if (l3->pass_frag)
		return NDC_FP_PASS_FRAG;
	uh = parse_udp(c);
	if (!uh)
		return NDC_FP_PASS_FORMAT;
	if (uh->dest != cfg->port)
		return NDC_NOT_OURS;
	pk->sport = uh->source;
	if (l3->first_frag)
		return NDC_FP_PASS_FRAG;
	pk->udp_len = bpf_ntohs(uh->len);
	if (pk->udp_len != l3->ip_payload || pk->udp_len < sizeof(*uh) + sizeof(struct ndc_dnshdr))
		return NDC_FP_PASS_FORMAT; /* lengths disagree, or no room for a DNS header */
	if (pk->l4_off + pk->udp_len > len)
		return NDC_FP_PASS_FORMAT; /* cut short */
	return NDC_GO;
}

#endif
