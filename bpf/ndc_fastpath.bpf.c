// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
/* Placeholder: maps and entry points of the fast path; the DNS core replaces the bodies. */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

#include <ndc/abi.h>

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536); /* the loader sets the configured size before load */
	__type(key, struct ndc_fp_key);
	__type(value, struct ndc_fp_value);
} ndc_answers SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ndc_fp_value);
} ndc_nx SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ndc_fp_config);
} ndc_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NDC_FP_COUNTER_MAX);
	__type(key, __u32);
	__type(value, __u64);
} ndc_counters SEC(".maps");

SEC("tc")
int ndc_tc_ingress(struct __sk_buff *skb)
{
	(void)skb;
	return TC_ACT_OK;
}

SEC("xdp")
int ndc_xdp(struct xdp_md *ctx)
{
	(void)ctx;
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
