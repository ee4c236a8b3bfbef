// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
/* Placeholder: the benchmark baseline reflector. */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

SEC("tc")
int ndc_reflect_tc(struct __sk_buff *skb)
{
	(void)skb;
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
