// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
/*
 * The in-kernel DNS fast path: UDP queries to the node-local address are answered in the
 * packet's own buffer from the answer table user space publishes (lookup order: include/ndc/abi.h
 * top comment). Anything not fully understood goes up the stack untouched, with the reason
 * counted. One core, two entry points: tc ingress (pod veths) and XDP (NICs).
 */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include <ndc/abi.h>

#include "ndc_ctx.h"
#include "ndc_parse.h"
#include "ndc_csum.h"
#include "ndc_swap.h"
#include "ndc_dns.h"
#include "ndc_l4.h"
#include "ndc_table.h"

/* mmapable: user space switches the table's geom and the synced flag with one store each */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct ndc_fp_config);
} ndc_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NDC_FP_COUNTER_MAX);
	__type(key, __u32);
	__type(value, __u64);
} ndc_counters SEC(".maps");

/*
 * Where the lowercase name is copied: a map value, not the stack, because suffix matching reads it
 * at variable offsets. Per CPU is enough: tc ingress and XDP run with bottom halves disabled and do
 * not nest on one CPU.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ndc_fp_scratch);
} ndc_scratch SEC(".maps");

#define NDC_TCP_OURS (NDC_FP_COUNTER_MAX + 1) /* TCP to a node-local address: fail-open's */
#define NSEC_PER_SEC 1000000000ULL

/* The largest offsets ndc_l4 can return: Ethernet, NDC_VLAN_MAX tags, IPv6. */
#define NDC_L3_OFF_MAX (14 + 4 * NDC_VLAN_MAX)
#define NDC_L4_OFF_MAX (NDC_L3_OFF_MAX + 40)
/* ... and where the answer starts: UDP and DNS headers, the longest name, QTYPE and QCLASS */
#define NDC_ANS_OFF_MAX (NDC_L4_OFF_MAX + 8 + 12 + NDC_FP_NAME_MAX + 4)

/*
 * verifier: a value that reaches a point along several paths (VLAN depth, IP version, where the
 * name ends) has a different exact range on each, and everything after that point would be
 * verified once per path (the product of them overflows the 1M instruction budget). Passing it
 * through memory turns it into one unknown value, which the caller bounds again.
 */
static __always_inline __u32 launder(volatile __u32 *slot, __u32 v)
{
	*slot = v;
	return *slot;
}

static __always_inline void count(__u32 idx)
{
	__u64 *c = bpf_map_lookup_elem(&ndc_counters, &idx);

	if (c)
		*c += 1;
}

static __always_inline int pass(const enum ndc_hook hook, __u32 why, __u32 *ret_why)
{
	if (why < NDC_FP_COUNTER_MAX)
		count(why);
	*ret_why = why;
	return ctx_pass(hook);
}

static __always_inline const struct ndc_fp_config *config_get(void)
{
	__u32 zero = 0;
	const struct ndc_fp_config *cfg = bpf_map_lookup_elem(&ndc_config, &zero);

	return cfg && cfg->abi_version == NDC_ABI_VERSION ? cfg : NULL;
}

/*
 * Layers 2 to 4 (bpf/ndc_l4.h): NDC_GO for a whole UDP datagram to config's port at one of its
 * addresses (then readable in full from ctx_data), NDC_TCP_OURS for TCP to one of them,
 * NDC_NOT_OURS for other traffic, or a pass reason. The config is looked up for IP traffic only.
 */
static __always_inline int ndc_l4(void *ctx, const enum ndc_hook hook, struct ndc_pkt *pk,
				  const struct ndc_fp_config **ret_cfg)
{
	void *data = ctx_data(ctx, hook), *data_end = ctx_data_end(ctx, hook);
	const struct ndc_fp_config *cfg;
	struct ndc_cursor c;
	struct ndc_l3 l3;
	int why;

	cursor_init(&c, data, data_end);
	why = ndc_parse_l3(&c, pk, &l3);
	if (why != NDC_GO)
		return why;
	cfg = config_get();
	if (l3.tcp)
		return cfg && ndc_l3_ours(cfg, &l3) ? NDC_TCP_OURS : NDC_NOT_OURS;
	if (!cfg)
		return NDC_FP_PASS_CONFIG;
	if (!ndc_l3_ours(cfg, &l3))
		return NDC_NOT_OURS;
	why = ndc_parse_udp(&c, cfg, &l3, ctx_len(ctx, hook), pk);
	if (why != NDC_GO)
		return why;
	/* tc: a query whose payload is not in the linear part (rare for a small datagram) */
	if (data + pk->l4_off + pk->udp_len > data_end &&
	    ctx_pull(ctx, hook, pk->l4_off + pk->udp_len))
		return NDC_FP_PASS_FORMAT;
	*ret_cfg = cfg;
	return NDC_GO;
}

/*
 * Steps 1 to 3 of the lookup in abi.h: the answer, copied into s->v; NULL with *ret_why set when
 * the query is passed.
 */
static __always_inline const struct ndc_fp_value *
ndc_lookup(const struct ndc_fp_config *cfg, struct ndc_fp_scratch *s, const struct ndc_question *q,
	   __u64 hash, struct ndc_fp_slot **ret_slot, __u32 *ret_hit, __u32 *ret_why)
{
	const struct ndc_fp_value *v = &s->v;

	*ret_why = NDC_FP_PASS_MISS;
	switch (table_get(s, cfg, q, hash, ret_slot)) {
	case NDC_TABLE_EXACT:
		*ret_hit = NDC_FP_HIT;
		return v->flags & NDC_FP_V_PASS ? NULL : v;
	case NDC_TABLE_OTHER:
		/* A pass marker: some answer at this name lives in user space only. ANY: the
		 * table has it when the name has records; without, user space answers. */
		if (v->flags & NDC_FP_V_PASS || q->qtype == NDC_DNS_T_ANY)
			return NULL;
		/* An ExternalName's CNAME answers any type: an answer, not NODATA. */
		*ret_hit = v->ancount ? NDC_FP_HIT : NDC_FP_NODATA;
		return v;
	case NDC_TABLE_ABSENT:
		break;
	case NDC_TABLE_BUSY:
		*ret_why = NDC_FP_PASS_BUSY; /* never NXDOMAIN for a name being rewritten */
		return NULL;
	default:
		return NULL; /* another name with the same key: user space knows this one */
	}
	if (!dns_nx_allowed(cfg->flags, cfg, s->name, q))
		return NULL;
	*ret_slot = NULL;
	if (table_nx(s)) {
		*ret_why = NDC_FP_PASS_BUSY;
		return NULL;
	}
	if (v->rcode != NDC_DNS_RCODE_NXDOMAIN)
		return NULL; /* no NXDOMAIN template published yet */
	*ret_hit = NDC_FP_NXDOMAIN;
	return v;
}

/*
 * Answers in place (the verdict that sends the reply) or passes (ctx_pass) with *ret_why: a pass
 * reason, NDC_NOT_OURS or NDC_TCP_OURS.
 */
static __always_inline int ndc_handle(void *ctx, const enum ndc_hook hook, __u32 *ret_why)
{
	const struct ndc_fp_config *cfg = NULL;
	struct ndc_fp_slot *sl = NULL;
	const struct ndc_fp_value *v;
	struct ndc_question q = {};
	struct ndc_fp_scratch *s;
	struct ndc_dnshdr *dh;
	struct ndc_pkt pk;
	__u32 zero = 0, hit = 0, why = 0, age = 0;
	__u32 name_off, ans_off, dlen, reply_len, udp_len;
	__u64 hash = 0;
	void *data, *data_end;
	__u8 *p;

	why = ndc_l4(ctx, hook, &pk, &cfg);
	if (why != NDC_GO || !cfg)
		return pass(hook, why, ret_why);
	s = bpf_map_lookup_elem(&ndc_scratch, &zero);
	if (!s)
		return pass(hook, NDC_FP_PASS_CONFIG, ret_why);
	pk.l3_off = launder(&s->launder[0], pk.l3_off);
	pk.l4_off = launder(&s->launder[1], pk.l4_off);
	if (pk.l3_off > NDC_L3_OFF_MAX || pk.l4_off > NDC_L4_OFF_MAX)
		return pass(hook, NDC_FP_PASS_FORMAT, ret_why);

	/* the query: header, question, OPT; the name goes straight into the scratch, hashed */
	data = ctx_data(ctx, hook);
	data_end = ctx_data_end(ctx, hook);
	dh = data + pk.l4_off + sizeof(struct udphdr);
	if ((void *)(dh + 1) > data_end)
		return pass(hook, NDC_FP_PASS_FORMAT, ret_why);
	why = dns_check_header(dh, &q);
	if (why != NDC_GO)
		return pass(hook, why, ret_why);
	name_off = pk.l4_off + sizeof(struct udphdr) + sizeof(*dh);
	why = dns_walk_name(data, data_end, name_off, &q);
	if (why != NDC_GO)
		return pass(hook, why, ret_why);
	q.name_len = launder(&s->launder[2], q.name_len);
	if (q.name_len == 0 || q.name_len > NDC_FP_NAME_MAX)
		return pass(hook, NDC_FP_PASS_FORMAT, ret_why);
	why = dns_check_tail(data, data_end, name_off + q.name_len, pk.l4_off + pk.udp_len, &q);
	if (why != NDC_GO)
		return pass(hook, why, ret_why);
	why = dns_name_to_key(data, data_end, name_off, &q, (__u64 *)s->name, &hash);
	if (why != NDC_GO)
		return pass(hook, why, ret_why);

	v = ndc_lookup(cfg, s, &q, hash, &sl, &hit, &why);
	if (!v)
		return pass(hook, why, ret_why);
	if (v->expire_ns) {
		__u64 now = bpf_ktime_get_ns();

		if (now >= v->expire_ns)
			return pass(hook, NDC_FP_PASS_EXPIRED,
				    ret_why); /* user space refreshes it */
		if (now > v->insert_ns)
			age = (__u32)((now - v->insert_ns) / NSEC_PER_SEC);
		why = dns_ttl_check(v);
		if (why != NDC_GO)
			return pass(hook, why, ret_why);
	}
	dlen = v->len;
	if (dlen > NDC_FP_DATA_MAX)
		return pass(hook, NDC_FP_PASS_SIZE, ret_why);
	reply_len =
	    sizeof(*dh) + q.name_len + NDC_DNS_QFIXED + dlen + (q.has_opt ? NDC_DNS_OPT_LEN : 0);
	if (reply_len > dns_udp_limit(&q))
		return pass(hook, NDC_FP_PASS_SIZE,
			    ret_why); /* user space drops additional or sets TC */
	udp_len = sizeof(struct udphdr) + reply_len;

	/*
	 * The reply, in place. Resize first: a failure leaves the query as it was. The resize
	 * invalidates packet pointers: everything after it is derived and checked anew.
	 */
	ans_off = name_off + q.name_len + NDC_DNS_QFIXED;
	if (ctx_resize(ctx, hook, ctx_len(ctx, hook), pk.l4_off + udp_len, ans_off,
		       NDC_ANS_OFF_MAX))
		return pass(hook, NDC_FP_PASS_SIZE, ret_why);
	data = ctx_data(ctx, hook);
	data_end = ctx_data_end(ctx, hook);
	if (ctx_copy_in(data, data_end, ans_off, v->data, dlen, NDC_FP_DATA_MAX))
		return pass(hook, NDC_FP_PASS_SIZE, ret_why);
	if (v->expire_ns && dns_ttl_countdown(data, data_end, ans_off, v, age) != NDC_GO)
		return pass(hook, NDC_FP_PASS_SIZE, ret_why);
	/* nothing below fails once resized: these checks are for the verifier */
	if (q.has_opt) {
		p = data + ans_off + (dlen & (2 * NDC_FP_DATA_MAX - 1));
		if ((void *)(p + NDC_DNS_OPT_LEN) > data_end)
			return pass(hook, NDC_FP_PASS_SIZE, ret_why);
		dns_put_opt(p);
	}
	dh = data + pk.l4_off + sizeof(struct udphdr);
	if ((void *)(dh + 1) > data_end)
		return pass(hook, NDC_FP_PASS_SIZE, ret_why);
	dns_reply_header(dh, &q, v);
	if (swap_eth(data, data_end))
		return pass(hook, NDC_FP_PASS_SIZE, ret_why);
	if (pk.v6) {
		if (swap_ipv6_udp(data, data_end, pk.l3_off, udp_len) ||
		    ipv6_udp_csum_set(data, data_end, pk.l3_off, pk.l4_off, udp_len))
			return pass(hook, NDC_FP_PASS_SIZE, ret_why);
	} else if (swap_ipv4_udp(data, data_end, pk.l3_off, udp_len)) {
		return pass(hook, NDC_FP_PASS_SIZE, ret_why);
	}
	count(hit);
	/* a cached answer's kernel hits, for prefetch: written only while it counts */
	if (sl && v->expire_ns && sl->hits < NDC_FP_HITS_MAX)
		sl->hits++;
	*ret_why = NDC_GO;
	return ctx_reply(ctx, hook, cfg->flags & NDC_FP_C_REDIRECT_PEER);
}

#include "ndc_failopen.h"

SEC("tc")
int ndc_tc_ingress(struct __sk_buff *skb)
{
	__u32 why = NDC_NOT_OURS;
	int verdict = ndc_handle(skb, NDC_HOOK_TC, &why);

	/* passed queries and TCP to us: on to the upstream if no agent listens */
	if (verdict != NDC_TC_PASS || why == NDC_NOT_OURS || why == NDC_FP_PASS_CONFIG)
		return verdict;
	return ndc_failopen_in(skb);
}

/* Replies of fail-open flows (clsact egress of the same links). */
SEC("tc")
int ndc_tc_egress(struct __sk_buff *skb)
{
	return ndc_failopen_out(skb);
}

/*
 * XDP mode's partner at tc ingress: what XDP passed (already counted there) goes to the upstream
 * when no agent listens. It answers nothing itself.
 */
SEC("tc")
int ndc_tc_failopen(struct __sk_buff *skb)
{
	return ndc_failopen_in(skb);
}

SEC("xdp")
int ndc_xdp(struct xdp_md *ctx)
{
	__u32 why;

	return ndc_handle(ctx, NDC_HOOK_XDP, &why);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
