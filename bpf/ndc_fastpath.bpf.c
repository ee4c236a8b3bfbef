// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
/*
 * The in-kernel DNS fast path: UDP queries to the node-local address are answered in the
 * packet's own buffer from the answer table user space publishes (lookup order: include/ndc/abi.h
 * top comment). Anything not fully understood goes up the stack untouched, with the reason
 * counted. The answer itself is the core every dataplane compiles (ndc_answer.h); this file is
 * its kernel backend (maps, table read, clock, counters) and the entry points: tc ingress (pod
 * veths) and XDP (NICs), and fail-open's.
 */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include <ndc/abi.h>

#include "ndc_table.h"
#include "ndc_maps.h"
#include "ndc_answer.h"

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

/*
 * The kernel's backend of the answer core (ndc_answer.h): the config and counters of ndc_maps.h,
 * and the table read into the per-CPU scratch (ndc_table.h), whose answers are always s->v. The
 * slot an answer came from is kept for its hit count.
 */
struct ndc_be {
	const struct ndc_fp_config *cfg;
	struct ndc_fp_slot *sl;
};

static __always_inline const struct ndc_fp_config *ndc_be_config(struct ndc_be *be)
{
	be->cfg = config_get();
	return be->cfg;
}

static __always_inline struct ndc_fp_scratch *ndc_be_scratch(struct ndc_be *be)
{
	__u32 zero = 0;

	(void)be;
	return bpf_map_lookup_elem(&ndc_scratch, &zero);
}

static __always_inline void ndc_be_keyed(struct ndc_be *be, struct ndc_fp_scratch *s,
					 const struct ndc_question *q)
{
	/* the word past the name's last, read by suffix matching, is a map value's: defined */
	(void)be;
	(void)s;
	(void)q;
}

static __always_inline enum ndc_table_res ndc_be_get(struct ndc_be *be, struct ndc_fp_scratch *s,
						     const struct ndc_question *q, __u64 hash,
						     const struct ndc_fp_value **ret_v)
{
	*ret_v = &s->v;
	return table_get(s, be->cfg, q, hash, &be->sl);
}

static __always_inline int ndc_be_nx(struct ndc_be *be, struct ndc_fp_scratch *s,
				     const struct ndc_fp_value **ret_v)
{
	be->sl = NULL;
	*ret_v = &s->v;
	return table_nx(s);
}

static __always_inline __u32 ndc_be_flags(struct ndc_be *be)
{
	return be->cfg->flags;
}

static __always_inline __u64 ndc_be_now(struct ndc_be *be)
{
	(void)be;
	return bpf_ktime_get_ns();
}

static __always_inline void ndc_be_count(struct ndc_be *be, __u32 idx)
{
	(void)be;
	count(idx);
}

static __always_inline void ndc_be_answered(struct ndc_be *be, const struct ndc_fp_value *v)
{
	/* a cached answer's kernel hits, for prefetch: written only while it counts */
	if (be->sl && v->expire_ns && be->sl->hits < NDC_FP_HITS_MAX)
		be->sl->hits++;
}

static __always_inline int ndc_handle(void *ctx, const enum ndc_hook hook, __u32 *ret_why)
{
	struct ndc_be be = {};

	return ndc_answer_frame(ctx, hook, &be, ret_why);
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
