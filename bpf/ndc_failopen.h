/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * Fail open (tc only; NDC_FP_C_FAILOPEN in include/ndc/abi.h): when no agent runs, a pod's DNS
 * must still work. A query the fast path does not answer, or a TCP connection, to a node-local
 * address at which no socket listens goes on to the upstream (the kube-dns ClusterIP) instead of
 * meeting a closed port:
 *
 *   ingress (pod -> node): destination rewritten to the upstream of the packet's family, the flow
 *     (pod address and port, upstream, protocol) remembered in ndc_flows with the node-local
 *     address it was sent to;
 *   egress (node -> pod): a packet from that upstream to a remembered flow gets the node-local
 *     address and port back as its source, so the pod's resolver accepts it.
 *
 * Whether an agent listens is asked of the socket tables (bpf_sk_lookup_udp, bpf_skc_lookup_tcp)
 * for every packet that would go up the stack, so the first query after the agent binds its
 * sockets goes to it again; a forwarded TCP connection stays with the upstream until it ends.
 * Checksums are updated with the kernel's helpers, which know CHECKSUM_PARTIAL (a query sent from
 * a socket over veth carries only the pseudo-header sum in its checksum field).
 */
#ifndef NDC_FAILOPEN_H
#define NDC_FAILOPEN_H

#include <stddef.h>
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/tcp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include <ndc/abi.h>

#include "ndc_parse.h"
#include "ndc_l4.h"   /* addr4_ours, addr6_ours: the node-local addresses */
#include "ndc_maps.h" /* config_get, count */

/*
 * How long after the pod's last packet a reply still gets the node-local source: a UDP upstream
 * answers within the agent's forward timeout (and a stub resolver gives up after 5 s); an idle
 * TCP connection to DNS is closed by either side well within five minutes (RFC 7766 6.2.3).
 */
#define NDC_FO_UDP_NS (10ULL * 1000000000ULL)
#define NDC_FO_TCP_NS (300ULL * 1000000000ULL)

/* LRU: a flood of fail-open flows evicts the oldest, never grows without bound. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct ndc_fp_flow_key);
	__type(value, struct ndc_fp_flow);
} ndc_flows SEC(".maps");

/* The parts of a packet fail-open reads; addresses as 16 bytes, IPv4 in the first 4. */
struct ndc_fo_pkt {
	__u32 l3_off;
	__u32 l4_off;
	__u32 csum_off; /* of the UDP or TCP checksum */
	__u8 src[16];
	__u8 dst[16];
	__be16 sport;
	__be16 dport;
	__u8 proto;
	__u8 v6;
	__u8 syn; /* TCP SYN without ACK: a new connection */
};

/* 0 for a UDP or TCP packet without fragments, IPv4 options or IPv6 extension headers. */
static __always_inline int fo_parse(struct __sk_buff *skb, struct ndc_fo_pkt *p)
{
	void *data = (void *)(long)skb->data, *data_end = (void *)(long)skb->data_end;
	struct ndc_cursor c;
	__be16 proto;

	cursor_init(&c, data, data_end);
	proto = parse_eth(&c);
	p->l3_off = c.off;
	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *iph = parse_ipv4(&c);

		if (!iph || iph->version != 4 || iph->ihl != 5 ||
		    iph->frag_off & bpf_htons(NDC_IP_MF | NDC_IP_OFFSET))
			return -1;
		p->proto = iph->protocol;
		__builtin_memcpy(p->src, &iph->saddr, 4);
		__builtin_memcpy(p->dst, &iph->daddr, 4);
		p->v6 = 0;
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6h = parse_ipv6(&c);

		if (!ip6h)
			return -1;
		p->proto = ip6h->nexthdr;
		__builtin_memcpy(p->src, &ip6h->saddr, 16);
		__builtin_memcpy(p->dst, &ip6h->daddr, 16);
		p->v6 = 1;
	} else {
		return -1;
	}
	p->l4_off = c.off;
	if (p->proto == IPPROTO_UDP) {
		struct udphdr *uh = parse_udp(&c);

		if (!uh)
			return -1;
		p->sport = uh->source;
		p->dport = uh->dest;
		p->csum_off = p->l4_off + offsetof(struct udphdr, check);
		p->syn = 0;
	} else if (p->proto == IPPROTO_TCP) {
		struct tcphdr *th = (void *)(long)skb->data + p->l4_off;

		if ((void *)(th + 1) > data_end)
			return -1;
		p->sport = th->source;
		p->dport = th->dest;
		p->csum_off = p->l4_off + offsetof(struct tcphdr, check);
		p->syn = th->syn && !th->ack;
	} else {
		return -1;
	}
	return 0;
}

/*
 * Replaces the address at addr_off (4 or 16 bytes) and the port at port_off, keeping the IPv4
 * header and the UDP/TCP checksums right. 0 or a negative errno from the helpers.
 */
static __always_inline int fo_rewrite(struct __sk_buff *skb, const struct ndc_fo_pkt *p,
				      __u32 addr_off, const __u8 *old, const __u8 *new,
				      __u32 port_off, __be16 old_port, __be16 new_port)
{
	/* UDP over IPv4 may carry no checksum (0): it must stay 0 (RFC 768) */
	__u64 mangled = p->proto == IPPROTO_UDP && !p->v6 ? BPF_F_MARK_MANGLED_0 : 0;
	__u32 a4_old, a4_new;
	long r;

	if (p->v6) {
		__u32 o[4], n[4];
		__s64 diff;

		__builtin_memcpy(o, old, 16);
		__builtin_memcpy(n, new, 16);
		diff = bpf_csum_diff(o, 16, n, 16, 0);
		if (diff < 0)
			return (int)diff;
		r = bpf_l4_csum_replace(skb, p->csum_off, 0, (__u64)diff, BPF_F_PSEUDO_HDR);
		if (!r)
			r = bpf_skb_store_bytes(skb, addr_off, n, 16, 0);
	} else {
		__builtin_memcpy(&a4_old, old, 4);
		__builtin_memcpy(&a4_new, new, 4);
		r = bpf_l4_csum_replace(skb, p->csum_off, a4_old, a4_new,
					BPF_F_PSEUDO_HDR | mangled | sizeof(a4_new));
		if (!r)
			r = bpf_l3_csum_replace(skb, p->l3_off + offsetof(struct iphdr, check),
						a4_old, a4_new, sizeof(a4_new));
		if (!r)
			r = bpf_skb_store_bytes(skb, addr_off, &a4_new, sizeof(a4_new), 0);
	}
	if (r)
		return (int)r;
	r = bpf_l4_csum_replace(skb, p->csum_off, old_port, new_port, mangled | sizeof(new_port));
	if (!r)
		r = bpf_skb_store_bytes(skb, port_off, &new_port, sizeof(new_port), 0);
	return (int)r;
}

static __always_inline __u32 fo_addr_off(const struct ndc_fo_pkt *p, int dst)
{
	if (p->v6)
		return p->l3_off +
		       (dst ? offsetof(struct ipv6hdr, daddr) : offsetof(struct ipv6hdr, saddr));
	return p->l3_off + (dst ? offsetof(struct iphdr, daddr) : offsetof(struct iphdr, saddr));
}

/*
 * tc ingress, for a packet the fast path did not answer: sends it to the upstream when no socket
 * listens at its destination. Always NDC_TC_PASS: the stack delivers or routes what comes out.
 * A global function: verified once on its own, not once per path of the answer code.
 */
__attribute__((noinline)) int ndc_failopen_in(struct __sk_buff *skb)
{
	const struct ndc_fp_config *cfg = config_get();
	struct ndc_fp_flow_key k = {};
	/* the socket lookup's tuple, then the flow: one stack slot (the stack is the limit) */
	union {
		struct bpf_sock_tuple t;
		struct ndc_fp_flow f;
	} u = {};
	struct bpf_sock_tuple *t = &u.t;
	struct ndc_fp_flow *f = &u.f, *cur;
	struct ndc_fo_pkt p = {};
	struct bpf_sock *sk;
	const __u8 *up;
	__be16 up_port;
	__u32 tlen;
	__u64 now;

	if (!skb || !cfg || !(cfg->flags & NDC_FP_C_FAILOPEN) || fo_parse(skb, &p))
		return NDC_TC_PASS;
	if (p.dport != cfg->port)
		return NDC_TC_PASS;
	if (p.v6) {
		if (!cfg->has_up6 || !addr6_ours(cfg, (const struct in6_addr *)p.dst))
			return NDC_TC_PASS;
		up = cfg->up6;
		up_port = cfg->up6_port;
		__builtin_memcpy(t->ipv6.saddr, p.src, 16);
		__builtin_memcpy(t->ipv6.daddr, p.dst, 16);
		t->ipv6.sport = p.sport;
		t->ipv6.dport = p.dport;
		tlen = sizeof(t->ipv6);
	} else {
		__be32 d;

		__builtin_memcpy(&d, p.dst, 4);
		if (!cfg->has_up4 || !addr4_ours(cfg, d))
			return NDC_TC_PASS;
		up = (const __u8 *)&cfg->up4;
		up_port = cfg->up4_port;
		__builtin_memcpy(&t->ipv4.saddr, p.src, 4);
		t->ipv4.daddr = d;
		t->ipv4.sport = p.sport;
		t->ipv4.dport = p.dport;
		tlen = sizeof(t->ipv4);
	}
	__builtin_memcpy(k.pod, p.src, 16);
	if (p.v6)
		__builtin_memcpy(k.up, up, 16);
	else
		__builtin_memcpy(k.up, up, 4);
	k.pod_port = p.sport;
	k.up_port = up_port;
	k.proto = p.proto;
	k.v6 = p.v6;
	now = bpf_ktime_get_ns();

	if (p.proto == IPPROTO_TCP && !p.syn) {
		/* mid-connection: only a connection that went to the upstream stays there */
		cur = bpf_map_lookup_elem(&ndc_flows, &k);
		if (!cur)
			return NDC_TC_PASS;
		cur->last_ns = now;
	} else {
		if (p.proto == IPPROTO_UDP)
			sk = bpf_sk_lookup_udp(skb, t, tlen, BPF_F_CURRENT_NETNS, 0);
		else
			sk = (struct bpf_sock *)bpf_skc_lookup_tcp(skb, t, tlen,
								   BPF_F_CURRENT_NETNS, 0);
		if (sk) {
			bpf_sk_release(sk);
			return NDC_TC_PASS; /* an agent listens: it answers */
		}
		__builtin_memset(f, 0, sizeof(*f));
		__builtin_memcpy(f->local, p.dst, 16);
		f->local_port = p.dport;
		f->last_ns = now;
		if (bpf_map_update_elem(&ndc_flows, &k, f, BPF_ANY))
			return NDC_TC_PASS;
	}
	if (fo_rewrite(skb, &p, fo_addr_off(&p, 1), p.dst, up, p.l4_off + 2, p.dport, up_port))
		return NDC_TC_PASS;
	count(p.proto == IPPROTO_UDP ? NDC_FP_FWD_UDP : NDC_FP_FWD_TCP);
	return NDC_TC_PASS;
}

/*
 * tc egress (towards the pod): an upstream's reply to a fail-open flow gets the node-local
 * address and port back as its source. Other packets leave after a compare or two.
 */
static __always_inline int ndc_failopen_out(struct __sk_buff *skb)
{
	const struct ndc_fp_config *cfg = config_get();
	struct ndc_fp_flow_key k = {};
	struct ndc_fo_pkt p = {};
	struct ndc_fp_flow *f;
	__u8 local[16];
	__u64 now;

	if (!cfg || !(cfg->flags & NDC_FP_C_FAILOPEN) || fo_parse(skb, &p))
		return NDC_TC_PASS;
	if (p.v6) {
		const __u64 *s = (const __u64 *)p.src, *u = (const __u64 *)cfg->up6;

		if (!cfg->has_up6 || p.sport != cfg->up6_port || s[0] != u[0] || s[1] != u[1])
			return NDC_TC_PASS;
	} else {
		__be32 s;

		__builtin_memcpy(&s, p.src, 4);
		if (!cfg->has_up4 || p.sport != cfg->up4_port || s != cfg->up4)
			return NDC_TC_PASS;
	}
	__builtin_memcpy(k.pod, p.dst, 16);
	__builtin_memcpy(k.up, p.src, 16);
	k.pod_port = p.dport;
	k.up_port = p.sport;
	k.proto = p.proto;
	k.v6 = p.v6;
	f = bpf_map_lookup_elem(&ndc_flows, &k);
	if (!f)
		return NDC_TC_PASS;
	now = bpf_ktime_get_ns();
	if (now - f->last_ns > (p.proto == IPPROTO_UDP ? NDC_FO_UDP_NS : NDC_FO_TCP_NS))
		return NDC_TC_PASS;
	__builtin_memcpy(local, f->local, 16);
	if (fo_rewrite(skb, &p, fo_addr_off(&p, 0), p.src, local, p.l4_off, p.sport, f->local_port))
		return NDC_TC_PASS;
	count(NDC_FP_FWD_REPLY);
	return NDC_TC_PASS;
}

#endif
