// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
/*
 * The benchmark's floor that answers (issue 35): the work any in-place answer to a UDP query must
 * do, and nothing else. It parses to the question (the product's dns_check_header, dns_walk_name
 * and dns_check_tail, OPT included), grows the packet by the size of a typical service answer (an
 * A record behind a compression pointer to the question: 16 bytes; plus the OPT when the query
 * has one, as ndcache replies), copies a constant answer in, sets the reply header, swaps
 * addresses and ports and fixes the checksums with the product's own headers (ndc_ctx.h resize
 * and copy, ndc_swap.h, ndc_csum.h: the IPv4 header sum; UDP over IPv4 without a checksum,
 * UDP over IPv6 with one, as ndcache sends them) and sends the reply back.
 *
 * No table, no hash, no TTL countdown, no counters: what ndcache costs over this is its own
 * (lookup, copies, bookkeeping); what this costs over the bare reflector (ndc_reflector.bpf.c) is
 * what answering costs anyone. Every answer carries the same address, whatever the name: the
 * benchmark's prober and kxdpgun only count replies here (latency_bench.sh passes the prober -e
 * for every reflector). Not product: built only when a benchmark names it.
 *
 * Built once more with NDC_REFLECT_LOAD (ndc_answer_reflector_load.bpf.o, answer-reflector-load):
 * the question's table line read too, as the load reflector reads it (ndc_reflect_load.h): the
 * floor that answers from a table of every name, for the saturation run over every name.
 *
 * Built with NDC_REFLECT_HOT_LINES=N (ndc_answer_reflector_hotN.bpf.o, answer-reflector-hotN): N
 * more lines of map memory read for every query, each in a page of its own, the same N for every
 * query a CPU answers: the kind of lines ndcache's hit reads beyond the floor's (its config, its
 * CPU's scratch, memo tags and entry, counter and client slot: about 9), so that a run shows what
 * a line costs a program under the benchmark's traffic (an experiment: docs/bench/FASTPATH.md).
 * Built with NDC_REFLECT_CODE_BLOCKS=N (ndc_answer_reflector_codeN.bpf.o, answer-reflector-codeN):
 * N blocks of code run for every query, each a compare and a branch taken over code never run,
 * so that a query runs 2N more instructions spread over N lines of code, N of them taken
 * branches: what a program's code footprint costs under that traffic (ndcache's tc program is
 * 20 KB of JITed code, the answer reflector's 3 KB).
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

#include <ndc/abi.h>

#include "ndc_ctx.h"
#include "ndc_parse.h"
#include "ndc_csum.h"
#include "ndc_swap.h"
#include "ndc_dns.h"
#ifdef NDC_REFLECT_LOAD
#include "ndc_reflect_load.h"
#endif

#define NDC_AR_PORT 53
#define NDC_AR_LEN 16 /* owner pointer 2, TYPE 2, CLASS 2, TTL 4, RDLENGTH 2, address 4 */
/* as in ndc_answer.h: Ethernet and NDC_VLAN_MAX tags, IPv6, UDP, DNS header, name, QTYPE/QCLASS */
#define NDC_AR_L3_MAX (14 + 4 * NDC_VLAN_MAX)
#define NDC_AR_L4_MAX (NDC_AR_L3_MAX + 40)
#define NDC_AR_ANS_MAX (NDC_AR_L4_MAX + 8 + 12 + NDC_FP_NAME_MAX + 4)

/*
 * The answer: a pointer to the question's name (offset 12), A, IN, TTL 30, 169.254.20.10; the
 * bytes c0 0c 00 01 00 01 00 00 00 1e 00 04 a9 fe 14 0a as little-endian words.
 */
static const __u64 ndc_ar_answer[NDC_AR_LEN / 8] = {0x0000010001000cc0ULL, 0x0a14fea904001e00ULL};

/*
 * verifier: the offsets laundered through memory as the fast path does (ctx_launder), or the
 * paths multiply past the instruction budget; per CPU, as its scratch (one lookup, as its one).
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32[4]);
} ndc_ar_launder SEC(".maps");

#ifdef NDC_REFLECT_HOT_LINES
#define NDC_AR_HOT_CPUS 64 /* CPUs with lines of their own; a CPU above reads none */
#define NDC_AR_HOT_PAGES (NDC_AR_HOT_CPUS * NDC_REFLECT_HOT_LINES)

/* a page: a value of 4 KiB in an mmapable array (page-aligned) starts a page */
struct ndc_ar_page {
	__u64 w[512];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct ndc_ar_page);
	__uint(max_entries, NDC_AR_HOT_PAGES);
} ndc_ar_hot SEC(".maps");

/*
 * This CPU's N lines: line i of its page i (so that they fall in different cache sets), loaded
 * independently of one another, as ndcache's early reads are, and branched on, as it branches on
 * what it reads. 0 to go on; -1 never (the map is zero).
 */
static __always_inline int hot_lines(void)
{
	__u32 base = bpf_get_smp_processor_id() * NDC_REFLECT_HOT_LINES, i, k;
	struct ndc_ar_page *p;
	__u64 x = 0;

	for (i = 0; i < NDC_REFLECT_HOT_LINES; i++) {
		k = base + i;
		p = bpf_map_lookup_elem(&ndc_ar_hot, &k);
		if (p)
			x |= *(volatile const __u64 *)&p->w[(i * 8) & 511];
	}
	return x == 0x5a5a5a5a5a5a5a5aULL ? -1 : 0;
}
#endif

#ifdef NDC_REFLECT_CODE_BLOCKS
/*
 * One block: taken unless v is the constant (never: v is the DNS header's first word, whose
 * QDCOUNT is 1), over seven 64-bit loads (70 bytes of x86 code) that are never run. v is a word
 * of the packet, which the verifier does not know: it walks both ways, so the code skipped is
 * kept, and r0, which only the block writes, is dead after it, so the two ways' states meet.
 */
#define NDC_AR_BLOCK(v)                                   \
	asm volatile("if %[x] != 0x5a5a5a5a goto +14\n\t" \
		     "r0 = 0x1111111111111111 ll\n\t"     \
		     "r0 = 0x2222222222222222 ll\n\t"     \
		     "r0 = 0x3333333333333333 ll\n\t"     \
		     "r0 = 0x4444444444444444 ll\n\t"     \
		     "r0 = 0x5555555555555555 ll\n\t"     \
		     "r0 = 0x6666666666666666 ll\n\t"     \
		     "r0 = 0x7777777777777777 ll\n\t"     \
		     :                                    \
		     : [x] "r"(v)                         \
		     : "r0")

static __always_inline void code_blocks(__u64 v)
{
#pragma clang loop unroll(full)
	for (int i = 0; i < NDC_REFLECT_CODE_BLOCKS; i++)
		NDC_AR_BLOCK(v);
}
#endif

static __always_inline int answer(void *ctx, const enum ndc_hook hook)
{
	void *data = ctx_data(ctx, hook), *data_end = ctx_data_end(ctx, hook);
	struct ndc_question q = {};
	struct ndc_dnshdr *dh;
	struct ndc_cursor c;
	struct udphdr *uh;
	__u32 l3_off, l4_off, name_off, ans_off, msg_end, reply_len, udp_len;
	__be16 proto;
	__u32 zero = 0, *ld;
	int v6;

	cursor_init(&c, data, data_end);
	proto = parse_eth(&c);
	l3_off = c.off;
	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *iph = parse_ipv4(&c);

		if (!iph || iph->protocol != IPPROTO_UDP || iph->ihl != 5)
			return ctx_pass(hook);
		v6 = 0;
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6h = parse_ipv6(&c);

		if (!ip6h || ip6h->nexthdr != IPPROTO_UDP)
			return ctx_pass(hook);
		v6 = 1;
	} else {
		return ctx_pass(hook);
	}
	l4_off = c.off;
	uh = parse_udp(&c);
	if (!uh || uh->dest != bpf_htons(NDC_AR_PORT))
		return ctx_pass(hook);
	ld = bpf_map_lookup_elem(&ndc_ar_launder, &zero);
	if (!ld)
		return ctx_pass(hook);
	l3_off = ctx_launder(hook, &ld[0], l3_off);
	l4_off = ctx_launder(hook, &ld[1], l4_off);
	msg_end = l4_off + bpf_ntohs(uh->len);
	if (l3_off > NDC_AR_L3_MAX || l4_off > NDC_AR_L4_MAX || msg_end > ctx_len(ctx, hook))
		return ctx_pass(hook);

	/* the question, as the fast path checks it */
	dh = data + l4_off + sizeof(struct udphdr);
	if ((void *)(dh + 1) > data_end || dns_check_header(dh, &q) != NDC_GO)
		return ctx_pass(hook);
	name_off = l4_off + sizeof(struct udphdr) + sizeof(*dh);
	if (dns_walk_name(data, data_end, name_off, &q) != NDC_GO)
		return ctx_pass(hook);
	q.name_len = ctx_launder(hook, &ld[2], q.name_len);
	if (q.name_len == 0 || q.name_len > NDC_FP_NAME_MAX)
		return ctx_pass(hook);
	if (dns_check_tail(data, data_end, name_off + q.name_len, msg_end, &q) != NDC_GO)
		return ctx_pass(hook);
#ifdef NDC_REFLECT_LOAD
	/* answer-reflector-load: one table line for the question, as the load reflector reads */
	if (reflect_load(data, data_end, name_off))
		return ctx_pass(hook);
#endif
#ifdef NDC_REFLECT_HOT_LINES
	if (hot_lines())
		return ctx_pass(hook);
#endif
#ifdef NDC_REFLECT_CODE_BLOCKS
	code_blocks(*(const __u64 *)dh);
#endif

	/* the reply: resized, the answer and the OPT copied in, the header set */
	ans_off = name_off + q.name_len + NDC_DNS_QFIXED;
	reply_len = sizeof(*dh) + q.name_len + NDC_DNS_QFIXED + NDC_AR_LEN +
		    (q.has_opt ? NDC_DNS_OPT_LEN : 0);
	if (reply_len > dns_udp_limit(&q)) /* never for this answer; verifier: bounds udp_len */
		return ctx_pass(hook);
	udp_len = sizeof(struct udphdr) + reply_len;
	if (ctx_resize(ctx, hook, ctx_len(ctx, hook), l4_off + udp_len, ans_off, NDC_AR_ANS_MAX))
		return ctx_pass(hook);
	data = ctx_data(ctx, hook);
	data_end = ctx_data_end(ctx, hook);
	if (ctx_copy_in(hook, data, data_end, ans_off, (const __u8 *)ndc_ar_answer, NDC_AR_LEN,
			NDC_AR_LEN))
		return ctx_pass(hook);
	if (q.has_opt) {
		__u8 *p = pkt_at(data, ans_off + NDC_AR_LEN);

		if ((void *)(p + NDC_DNS_OPT_LEN) > data_end)
			return ctx_pass(hook);
		dns_put_opt(p);
	}
	dh = data + l4_off + sizeof(struct udphdr);
	if ((void *)(dh + 1) > data_end)
		return ctx_pass(hook);
	dh->flags = bpf_htons(NDC_DNS_F_QR | NDC_DNS_F_RA | NDC_DNS_F_AA |
			      (q.flags & (NDC_DNS_F_RD | NDC_DNS_F_CD)));
	dh->qdcount = bpf_htons(1);
	dh->ancount = bpf_htons(1);
	dh->nscount = 0;
	dh->arcount = bpf_htons(q.has_opt);

	/* turned around, checksums set */
	if (swap_eth(data, data_end))
		return ctx_pass(hook);
	if (v6) {
		if (swap_ipv6_udp(data, data_end, l3_off, udp_len) ||
		    ipv6_udp_csum_set(data, data_end, l3_off, l4_off, udp_len))
			return ctx_pass(hook);
	} else if (swap_ipv4_udp(data, data_end, l3_off, udp_len)) {
		return ctx_pass(hook);
	}
	return ctx_reply(ctx, hook, 0);
}

SEC("tc")
int ndc_answer_reflect_tc(struct __sk_buff *skb)
{
	return answer(skb, NDC_HOOK_TC);
}

SEC("xdp")
int ndc_answer_reflect_xdp(struct xdp_md *ctx)
{
	return answer(ctx, NDC_HOOK_XDP);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
