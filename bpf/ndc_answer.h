/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * The answer core: a UDP query to a node-local address answered in the packet's own buffer from
 * the answer table (lookup order: include/ndc/abi.h top comment), or passed with the reason.
 * Written once for every dataplane, so that the kernel program and the DPDK lcore cannot drift
 * apart (they did, when each had its copy: issue 36). The context (ndc_ctx.h) says where the frame
 * is and how it is resized and sent; the backend brings the rest through the ndc_be_* functions
 * below, which it defines before including this header:
 *
 *   kernel (bpf/ndc_fastpath.bpf.c): the config and counter maps, the table read into the per-CPU
 *     scratch under the slot's sequence counter (ndc_table.h), bpf_ktime_get_ns;
 *   DPDK (dataplane/dpdk/answer.c): the rte-free table of dataplane/dpdk/table.c, read in place
 *     (its values are never written once published), the burst's clock, and the verdict returned
 *     for the lcore to count.
 *
 * Steps: ndc_answer_l4 (layers 2 to 4), the query's header, then either the backend's memo
 * (ndc_be_recall: a question seen lately, byte for byte) or the name and tail (ndc_dns.h) and the
 * table (ndc_be_get), ndc_answer_result (the lookup order), then the reply written over the query.
 * What it observes for the operator (issue 37) is the backend's too: ndc_be_client names the client
 * of every query to us, ndc_be_count then says what became of it, ndc_be_reply shows the reply as
 * sent.
 */
#ifndef NDC_ANSWER_H
#define NDC_ANSWER_H

#include <linux/bpf.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>

#include <ndc/abi.h>

#include "ndc_ctx.h"
#include "ndc_parse.h"
#include "ndc_csum.h"
#include "ndc_swap.h"
#include "ndc_dns.h"
#include "ndc_l4.h"
#include "ndc_lookup.h"

#define NDC_TCP_OURS (NDC_FP_COUNTER_MAX + 1) /* TCP to a node-local address: fail-open's */
#define NDC_NSEC_PER_SEC 1000000000ULL

/* The largest offsets ndc_answer_l4 can return: Ethernet, NDC_VLAN_MAX tags, IPv6. */
#define NDC_L3_OFF_MAX (14 + 4 * NDC_VLAN_MAX)
#define NDC_L4_OFF_MAX (NDC_L3_OFF_MAX + 40)
/* ... and where the answer starts: UDP and DNS headers, the longest name, QTYPE and QCLASS */
#define NDC_ANS_OFF_MAX (NDC_L4_OFF_MAX + 8 + 12 + NDC_FP_NAME_MAX + 4)

/*
 * The backend: its state (struct ndc_be, its own) and its functions, defined by the file that
 * includes this header. Declared here so that the core reads, and compiles, on its own; a backend
 * that leaves one out does not link.
 */
struct ndc_be;
#ifdef __clang__
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wundefined-internal"
#endif
/* The config, or NULL when there is none yet (then nothing is answered); kept for the calls below.
 */
static __always_inline const struct ndc_fp_config *ndc_be_config(struct ndc_be *be);
/* Where the question's name is keyed (s->name) and the answer may be copied (s->v); NULL: pass. */
static __always_inline struct ndc_fp_scratch *ndc_be_scratch(struct ndc_be *be);
/* After dns_name_to_key filled s->name: whatever the table read needs of the rest of s. */
static __always_inline void ndc_be_keyed(struct ndc_be *be, struct ndc_fp_scratch *s,
					 const struct ndc_question *q);
/*
 * The entry for (q's name, q->qtype), else for (name, NDC_FP_QTYPE_OTHER), in *ret_v with what it
 * is: EXACT or OTHER (its name checked against s->name), ABSENT, COLLISION or BUSY.
 */
static __always_inline enum ndc_table_res ndc_be_get(struct ndc_be *be, struct ndc_fp_scratch *s,
						     const struct ndc_question *q, __u64 hash,
						     const struct ndc_fp_value **ret_v);
/*
 * A question this CPU answered lately, byte for byte (the question at data + off of a message
 * that ends at msg_end, which a memo takes only in the plain shape: dns_question_span): EXACT or
 * OTHER with the answer in *ret_v and q's name_len, qtype, qclass (and udp_size, with an OPT) set
 * as the full read would have set them; NDC_TABLE_ABSENT when not recalled (then the whole
 * question is read: dns_walk_name and on). A backend without a memo returns NDC_TABLE_ABSENT and
 * reads nothing.
 */
static __always_inline enum ndc_table_res ndc_be_recall(struct ndc_be *be, struct ndc_fp_scratch *s,
							void *data, void *data_end, __u32 off,
							__u32 msg_end, struct ndc_question *q,
							const struct ndc_fp_value **ret_v);
/*
 * Whether the table is known to hold neither (q's name, qtype) nor (name, NDC_FP_QTYPE_OTHER), read
 * for this very question before the core began, with s->name keyed as dns_name_to_key keys it
 * (the kernel's express lane); then ndc_be_get is not called, and the walk of the name and the
 * check of its tail decide the rest (NXDOMAIN or a pass) as they would after a read that found
 * nothing. A backend that never reads ahead returns 0.
 */
static __always_inline int ndc_be_read_absent(struct ndc_be *be, struct ndc_fp_scratch *s);
/*
 * After ndc_be_get gave r for the question at off of the frame in ctx, walked and checked in full:
 * the backend's chance to remember the answer for ndc_be_recall.
 */
static __always_inline void ndc_be_remember(struct ndc_be *be, void *ctx, const enum ndc_hook hook,
					    __u32 off, const struct ndc_question *q,
					    enum ndc_table_res r);
/* The NXDOMAIN template in *ret_v (rcode 0 before one is published): 0, or -1 while it changes. */
static __always_inline int ndc_be_nx(struct ndc_be *be, struct ndc_fp_scratch *s,
				     const struct ndc_fp_value **ret_v);
/* The config's flags word (NDC_FP_C_SYNCED changes while the dataplane runs). */
static __always_inline __u32 ndc_be_flags(struct ndc_be *be);
/* CLOCK_MONOTONIC in ns: the clock of the values' insert_ns and expire_ns. */
static __always_inline __u64 ndc_be_now(struct ndc_be *be);
/* Counts an answer (NDC_FP_HIT, NODATA, NXDOMAIN) or a pass reason. */
static __always_inline void ndc_be_count(struct ndc_be *be, __u32 idx);
/* v, found by ndc_be_get or ndc_be_nx, was sent: for the backend's hit counts (prefetch). */
static __always_inline void ndc_be_answered(struct ndc_be *be, const struct ndc_fp_value *v);
/*
 * A UDP query to one of the config's addresses and its port (or a fragment to the address): from
 * l3's source and pk->sport (0 when unread). Every one is counted by ndc_be_count afterwards,
 * once: the per-client counts' hook (kernel: map ndc_clients).
 */
static __always_inline void ndc_be_client(struct ndc_be *be, const struct ndc_l3 *l3,
					  const struct ndc_pkt *pk);
/*
 * The reply is written, dns_len bytes of DNS message at dns_off in the frame, about to be sent:
 * the sampled answers' hook (kernel: ring buffer ndc_samples).
 */
static __always_inline void ndc_be_reply(struct ndc_be *be, void *ctx, const enum ndc_hook hook,
					 __u32 dns_off, __u32 dns_len);
#ifdef __clang__
#pragma clang diagnostic pop
#endif

static __always_inline int ndc_answer_pass(struct ndc_be *be, const enum ndc_hook hook, __u32 why,
					   __u32 *ret_why)
{
	if (why < NDC_FP_COUNTER_MAX)
		ndc_be_count(be, why);
	*ret_why = why;
	return ctx_pass(hook);
}

/*
 * Layers 2 to 4 (bpf/ndc_l4.h): NDC_GO for a whole UDP datagram to config's port at one of its
 * addresses (then readable in full from ctx_data), NDC_TCP_OURS for TCP to one of them,
 * NDC_NOT_OURS for other traffic, or a pass reason. The config is looked up for IP traffic only.
 */
static __always_inline int ndc_answer_l4(void *ctx, const enum ndc_hook hook, struct ndc_be *be,
					 struct ndc_pkt *pk, const struct ndc_fp_config **ret_cfg)
{
	void *data = ctx_data(ctx, hook), *data_end = ctx_data_end(ctx, hook);
	const struct ndc_fp_config *cfg;
	struct ndc_cursor c;
	struct ndc_l3 l3 = {}; /* verifier: zeroed (see pk): a shorter walk (FASTPATH.md) */
	int why;

	cursor_init(&c, data, data_end);
	why = ndc_parse_l3(&c, pk, &l3);
	if (why != NDC_GO)
		return why;
	cfg = ndc_be_config(be);
	if (l3.tcp)
		return cfg && ndc_l3_ours(cfg, &l3) ? NDC_TCP_OURS : NDC_NOT_OURS;
	if (!cfg)
		return NDC_FP_PASS_CONFIG;
	if (!ndc_l3_ours(cfg, &l3))
		return NDC_NOT_OURS;
	why = ndc_parse_udp(&c, cfg, &l3, ctx_len(ctx, hook), pk);
	if (why == NDC_NOT_OURS)
		return why;
	ndc_be_client(be, &l3, pk);
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
 * Steps 1 to 3 of the lookup in abi.h, from what the table read (or the memo) gave: r, with the
 * answer v for EXACT and OTHER. The answer, with what to count in *ret_hit; NULL with *ret_why set
 * when the query is passed.
 */
static __always_inline const struct ndc_fp_value *
ndc_answer_result(struct ndc_be *be, const struct ndc_fp_config *cfg, struct ndc_fp_scratch *s,
		  const struct ndc_question *q, enum ndc_table_res r, const struct ndc_fp_value *v,
		  __u32 *ret_hit, __u32 *ret_why)
{
	*ret_why = NDC_FP_PASS_MISS;
	switch (r) {
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
	if (!dns_nx_allowed(ndc_be_flags(be), cfg, s->name, q))
		return NULL;
	if (ndc_be_nx(be, s, &v)) {
		*ret_why = NDC_FP_PASS_BUSY;
		return NULL;
	}
	if (v->rcode != NDC_DNS_RCODE_NXDOMAIN)
		return NULL; /* no NXDOMAIN template published yet */
	*ret_hit = NDC_FP_NXDOMAIN;
	return v;
}

/*
 * The reply written over the query in ctx, which the caller sized (ctx_resize) to l4_off + udp_len
 * bytes: the answer's dlen bytes of data at ans_off (where the question ends), their TTLs counted
 * down by age seconds when the answer expires, the OPT after them when the query had one, the
 * reply header, addresses and ports swapped, the checksums set. NDC_GO, else NDC_FP_PASS_SIZE:
 * never once resized (the checks are the verifier's; packet pointers are derived anew after the
 * resize). One writer for the core's reply (ndc_answer_frame) and the kernel's express lane
 * (bpf/ndc_fastpath.bpf.c), which gives the offsets of its one shape as constants, v6 0 and
 * expires 0 (it answers only what never expires): its inlined copy is the IPv4 one, no countdown.
 */
static __always_inline __u32 ndc_answer_write(void *ctx, const enum ndc_hook hook, __u32 l3_off,
					      __u32 l4_off, int v6, __u32 ans_off, __u32 udp_len,
					      const struct ndc_question *q,
					      const struct ndc_fp_value *v, __u32 dlen,
					      const int expires, __u32 age)
{
	void *data = ctx_data(ctx, hook), *data_end = ctx_data_end(ctx, hook);
	struct ndc_dnshdr *dh;
	__u8 *p;

	if (ctx_copy_in(hook, data, data_end, ans_off, v->data, dlen, NDC_FP_DATA_MAX))
		return NDC_FP_PASS_SIZE;
	if (expires && v->expire_ns && dns_ttl_countdown(data, data_end, ans_off, v, age) != NDC_GO)
		return NDC_FP_PASS_SIZE;
	if (q->has_opt) {
		p = data + ans_off + (dlen & (2 * NDC_FP_DATA_MAX - 1));
		if ((void *)(p + NDC_DNS_OPT_LEN) > data_end)
			return NDC_FP_PASS_SIZE;
		dns_put_opt(p);
	}
	dh = data + l4_off + sizeof(struct udphdr);
	if ((void *)(dh + 1) > data_end)
		return NDC_FP_PASS_SIZE;
	dns_reply_header(dh, q, v);
	if (swap_eth(data, data_end))
		return NDC_FP_PASS_SIZE;
	if (v6) {
		if (swap_ipv6_udp(data, data_end, l3_off, udp_len) ||
		    ipv6_udp_csum_set(data, data_end, l3_off, l4_off, udp_len))
			return NDC_FP_PASS_SIZE;
	} else if (swap_ipv4_udp(data, data_end, l3_off, udp_len)) {
		return NDC_FP_PASS_SIZE;
	}
	return NDC_GO;
}

/*
 * Answers in place (the context's verdict that sends the reply, the answer counted) or passes
 * (ctx_pass) with *ret_why: a pass reason (counted), NDC_NOT_OURS or NDC_TCP_OURS.
 */
static __always_inline int ndc_answer_frame(void *ctx, const enum ndc_hook hook, struct ndc_be *be,
					    __u32 *ret_why)
{
	const struct ndc_fp_config *cfg = NULL;
	const struct ndc_fp_value *v = NULL;
	enum ndc_table_res r;
	struct ndc_question q = {};
	struct ndc_fp_scratch *s;
	struct ndc_dnshdr *dh;
	/*
	 * verifier: zeroed, as l3 is (ndc_answer_l4): a field left unwritten on a path (udp_len of
	 * TCP) reaches the merges undefined, and clang (-mcpu=v3) then spills an undefined register
	 * there, which the verifier refuses
	 */
	struct ndc_pkt pk = {};
	__u32 hit = 0, why = 0, age = 0;
	__u32 name_off, ans_off, dlen, reply_len, udp_len;
	__u64 hash = 0;
	void *data, *data_end;

	why = ndc_answer_l4(ctx, hook, be, &pk, &cfg);
	if (why != NDC_GO || !cfg)
		return ndc_answer_pass(be, hook, why, ret_why);
	s = ndc_be_scratch(be);
	if (!s)
		return ndc_answer_pass(be, hook, NDC_FP_PASS_CONFIG, ret_why);
	pk.l3_off = ctx_launder(hook, &s->launder[0], pk.l3_off);
	pk.l4_off = ctx_launder(hook, &s->launder[1], pk.l4_off);
	if (pk.l3_off > NDC_L3_OFF_MAX || pk.l4_off > NDC_L4_OFF_MAX)
		return ndc_answer_pass(be, hook, NDC_FP_PASS_FORMAT, ret_why);

	/* the query: header, question, OPT; the name goes straight into the scratch, hashed */
	data = ctx_data(ctx, hook);
	data_end = ctx_data_end(ctx, hook);
	dh = data + pk.l4_off + sizeof(struct udphdr);
	if ((void *)(dh + 1) > data_end)
		return ndc_answer_pass(be, hook, NDC_FP_PASS_FORMAT, ret_why);
	why = dns_check_header(dh, &q);
	if (why != NDC_GO)
		return ndc_answer_pass(be, hook, why, ret_why);
	name_off = pk.l4_off + sizeof(struct udphdr) + sizeof(*dh);
	/*
	 * A question the backend answered lately, byte for byte, in a message of the plain shape:
	 * its name was walked and its tail checked when it was remembered, and equal bytes walk
	 * the same way (a wire name ends itself); else the whole question is read.
	 */
	r = ndc_be_recall(be, s, data, data_end, name_off, pk.l4_off + pk.udp_len, &q, &v);
	if (r == NDC_TABLE_ABSENT) {
		why = dns_walk_name(data, data_end, name_off, &q);
		if (why != NDC_GO)
			return ndc_answer_pass(be, hook, why, ret_why);
		q.name_len = ctx_launder(hook, &s->launder[2], q.name_len);
		if (q.name_len == 0 || q.name_len > NDC_FP_NAME_MAX)
			return ndc_answer_pass(be, hook, NDC_FP_PASS_FORMAT, ret_why);
		why = dns_check_tail(data, data_end, name_off + q.name_len, pk.l4_off + pk.udp_len,
				     &q);
		if (why != NDC_GO)
			return ndc_answer_pass(be, hook, why, ret_why);
		/*
		 * a name whose walk and tail check pass is the one the backend read ahead for, if
		 * it did: its bytes before QTYPE, keyed the same
		 */
		if (!ndc_be_read_absent(be, s)) {
			why =
			    dns_name_to_key(data, data_end, name_off, &q, (__u64 *)s->name, &hash);
			if (why != NDC_GO)
				return ndc_answer_pass(be, hook, why, ret_why);
			ndc_be_keyed(be, s, &q);
			r = ndc_be_get(be, s, &q, hash, &v);
			ndc_be_remember(be, ctx, hook, name_off, &q, r);
		}
	}

	v = ndc_answer_result(be, cfg, s, &q, r, v, &hit, &why);
	if (!v)
		return ndc_answer_pass(be, hook, why, ret_why);
	if (v->expire_ns) {
		__u64 now = ndc_be_now(be);

		if (now >= v->expire_ns) /* user space refreshes it */
			return ndc_answer_pass(be, hook, NDC_FP_PASS_EXPIRED, ret_why);
		if (now > v->insert_ns)
			age = (__u32)((now - v->insert_ns) / NDC_NSEC_PER_SEC);
		why = dns_ttl_check(v);
		if (why != NDC_GO)
			return ndc_answer_pass(be, hook, why, ret_why);
	}
	dlen = v->len;
	if (dlen > NDC_FP_DATA_MAX)
		return ndc_answer_pass(be, hook, NDC_FP_PASS_SIZE, ret_why);
	reply_len =
	    sizeof(*dh) + q.name_len + NDC_DNS_QFIXED + dlen + (q.has_opt ? NDC_DNS_OPT_LEN : 0);
	if (reply_len > dns_udp_limit(&q)) /* user space drops additional or sets TC */
		return ndc_answer_pass(be, hook, NDC_FP_PASS_SIZE, ret_why);
	udp_len = sizeof(struct udphdr) + reply_len;

	/*
	 * The reply, in place. Resize first: a failure leaves the query as it was. The resize
	 * invalidates packet pointers: everything after it is derived and checked anew.
	 */
	ans_off = name_off + q.name_len + NDC_DNS_QFIXED;
	if (ctx_resize(ctx, hook, ctx_len(ctx, hook), pk.l4_off + udp_len, ans_off,
		       NDC_ANS_OFF_MAX))
		return ndc_answer_pass(be, hook, NDC_FP_PASS_SIZE, ret_why);
	why = ndc_answer_write(ctx, hook, pk.l3_off, pk.l4_off, pk.v6, ans_off, udp_len, &q, v,
			       dlen, 1, age);
	if (why != NDC_GO)
		return ndc_answer_pass(be, hook, why, ret_why);
	ndc_be_count(be, hit);
	ndc_be_answered(be, v);
	ndc_be_reply(be, ctx, hook, pk.l4_off + sizeof(struct udphdr), reply_len);
	*ret_why = NDC_GO;
	return ctx_reply(ctx, hook, cfg->flags & NDC_FP_C_REDIRECT_PEER);
}

#endif
