/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * The maps the kernel's entry points share besides the answer table (bpf/ndc_table.h): the config
 * and the counters, with their accessors. A header of their own because two users need them
 * before either is complete: the answer's kernel glue (ndc_fastpath.bpf.c) and fail-open
 * (ndc_failopen.h), which is not given the answer's names.
 */
#ifndef NDC_MAPS_H
#define NDC_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include <ndc/abi.h>

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

static __always_inline void count(__u32 idx)
{
	__u64 *c = bpf_map_lookup_elem(&ndc_counters, &idx);

	if (c)
		*c += 1;
}

/* The config, or NULL before user space wrote one of this ABI. */
static __always_inline const struct ndc_fp_config *config_get(void)
{
	__u32 zero = 0;
	const struct ndc_fp_config *cfg = bpf_map_lookup_elem(&ndc_config, &zero);

	return cfg && cfg->abi_version == NDC_ABI_VERSION ? cfg : NULL;
}

#endif
