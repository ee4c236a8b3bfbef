// SPDX-License-Identifier: MIT
/*
 * A frame answered in place by the BPF program's own code: the answer core (bpf/ndc_answer.h:
 * layers 2 to 4, the query's checks, the lookup order, the reply written over the query) compiled
 * here on a buffer context (bpf/ndc_ctx.h, NDC_HOOK_BUF). What this file adds is the core's DPDK
 * backend: the rte-free table of table.c, read in place (a value is never written once published,
 * and stays valid until the lcore's next quiescent report), the burst's clock, and the verdict
 * returned for the lcore to count.
 *
 * The BPF headers read packet words through casts, unaligned: fine on the architectures DPDK
 * and BPF run on here (x86-64, arm64), and why this file is built with -fno-strict-aliasing and
 * without UBSan's alignment check.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <ndc/abi.h>

#include "ndc_dns.h" /* struct ndc_fp_scratch */

#include "internal.h"

struct ndc_be {
	const struct ndc_dpdk_table *t;
	uint64_t now_ns;
	uint32_t counted; /* what the core counted last: the answer, when it sent one */
	struct ndc_fp_scratch s;
};

#include "ndc_answer.h"

_Static_assert(offsetof(struct ndc_fp_scratch, slack) == NDC_FP_NAME_MAX,
	       "the word after a full-length name is in the slack");

_Static_assert(NDC_DP_NOT_OURS == NDC_NOT_OURS, "one value for traffic that is not ours");

static inline const struct ndc_fp_config *ndc_be_config(struct ndc_be *be)
{
	return ndc_dpdk_table_config(be->t);
}

static inline struct ndc_fp_scratch *ndc_be_scratch(struct ndc_be *be)
{
	return &be->s;
}

static inline void ndc_be_keyed(struct ndc_be *be, struct ndc_fp_scratch *s,
				const struct ndc_question *q)
{
	/* suffix matching reads one word past the name's last: make it defined */
	(void)be;
	memset((uint8_t *)s->name + (q->name_len + 7) / 8 * 8, 0, 8); /* name, slack: contiguous */
}

static inline enum ndc_table_res ndc_be_get(struct ndc_be *be, struct ndc_fp_scratch *s,
					    const struct ndc_question *q, __u64 hash,
					    const struct ndc_fp_value **ret_v)
{
	struct ndc_fp_key key = {.hash = hash,
				 .qtype = q->qtype,
				 .name_len = (uint8_t)q->name_len,
				 .region = ndc_fp_key_region(s->name, q->name_len, q->qtype)};
	enum ndc_table_res r = NDC_TABLE_EXACT;
	const struct ndc_fp_value *v;

	v = ndc_dpdk_table_lookup(be->t, &key);
	if (!v) {
		key.qtype = NDC_FP_QTYPE_OTHER;
		key.region = ndc_fp_key_region(s->name, q->name_len, NDC_FP_QTYPE_OTHER);
		v = ndc_dpdk_table_lookup(be->t, &key);
		r = NDC_TABLE_OTHER;
	}
	if (!v)
		return NDC_TABLE_ABSENT;
	/* another name with the same key: user space knows this one, NXDOMAIN or not */
	if (!dns_name_is(v, (const __u64 *)s->name, q))
		return NDC_TABLE_COLLISION;
	*ret_v = v;
	return r;
}

static inline enum ndc_table_res ndc_be_recall(struct ndc_be *be, struct ndc_fp_scratch *s,
					       void *data, void *data_end, __u32 off, __u32 msg_end,
					       struct ndc_question *q,
					       const struct ndc_fp_value **ret_v)
{
	/* no memo: the table is read in place, without the kernel's copy under a counter */
	(void)be, (void)s, (void)data, (void)data_end, (void)off, (void)msg_end, (void)q,
	    (void)ret_v;
	return NDC_TABLE_ABSENT;
}

static inline int ndc_be_read_absent(struct ndc_be *be, struct ndc_fp_scratch *s)
{
	(void)be, (void)s;
	return 0; /* the lcore reads the table only where the core does */
}

static inline void ndc_be_remember(struct ndc_be *be, void *ctx, const enum ndc_hook hook,
				   __u32 off, const struct ndc_question *q, enum ndc_table_res r)
{
	(void)be, (void)ctx, (void)hook, (void)off, (void)q, (void)r;
}

static inline int ndc_be_nx(struct ndc_be *be, struct ndc_fp_scratch *s,
			    const struct ndc_fp_value **ret_v)
{
	static const struct ndc_fp_value none; /* rcode 0: no template yet */
	const struct ndc_fp_value *v = ndc_dpdk_table_nx(be->t);

	(void)s;
	*ret_v = v ? v : &none;
	return 0;
}

static inline __u32 ndc_be_flags(struct ndc_be *be)
{
	return ndc_dpdk_table_flags(be->t);
}

static inline __u64 ndc_be_now(struct ndc_be *be)
{
	return be->now_ns;
}

static inline void ndc_be_count(struct ndc_be *be, __u32 idx)
{
	be->counted = idx;
}

static inline void ndc_be_answered(struct ndc_be *be, const struct ndc_fp_value *v)
{
	/* DPDK keeps no hit counts: prefetch follows the kernel's */
	(void)be;
	(void)v;
}

static inline void ndc_be_client(struct ndc_be *be, const struct ndc_l3 *l3,
				 const struct ndc_pkt *pk)
{
	/* per-client counts and sampled answers are the kernel's for now (issue 37) */
	(void)be;
	(void)l3;
	(void)pk;
}

static inline void ndc_be_reply(struct ndc_be *be, void *ctx, const enum ndc_hook hook,
				__u32 dns_off, __u32 dns_len)
{
	(void)be, (void)ctx, (void)hook, (void)dns_off, (void)dns_len;
}

int ndc_dpdk_answer(const struct ndc_dpdk_table *t, uint8_t *data, uint32_t len, uint32_t room,
		    uint64_t now_ns, uint32_t *ret_len)
{
	struct ndc_ctx_buf b = {.data = data, .len = len, .room = room};
	struct ndc_be be;
	__u32 why = NDC_NOT_OURS;

	be.t = t;
	be.now_ns = now_ns;
	/* passed: NDC_NOT_OURS, or NDC_TCP_OURS (TCP is the kernel's here), or a reason */
	if (ndc_answer_frame(&b, NDC_HOOK_BUF, &be, &why) != NDC_BUF_TX)
		return why < NDC_FP_COUNTER_MAX ? (int)why : NDC_DP_NOT_OURS;
	*ret_len = b.len;
	return (int)be.counted;
}
