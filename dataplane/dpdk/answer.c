// SPDX-License-Identifier: MIT
/*
 * A frame answered in place by the BPF program's rules, with the BPF program's own code: the
 * header parsers and layers 2 to 4 (bpf/ndc_parse.h, bpf/ndc_l4.h), the DNS checks, name key,
 * suffix match, reply header, OPT and TTL countdown (bpf/ndc_dns.h), the MAC/IP/port swap
 * (bpf/ndc_swap.h) and the checksums (bpf/ndc_csum.h) are compiled here unchanged. What this file
 * adds is what bpf/ndc_fastpath.bpf.c does around them with maps and helpers: the config at hand,
 * the lookup order (ndc_lookup) and the reply's assembly (ndc_handle), step for step in the same
 * order with the same reasons, minus the verifier's workarounds. One difference by design: an mbuf
 * is resized by setting its length, and the frame is checked to fit the buffer before anything is
 * written, so a passed frame is always untouched.
 *
 * The BPF headers read packet words through casts, unaligned: fine on the architectures DPDK
 * and BPF run on here (x86-64, arm64), and why this file is built with -fno-strict-aliasing and
 * without UBSan's alignment check.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <ndc/abi.h>

#include "ndc_parse.h"
#include "ndc_csum.h"
#include "ndc_swap.h"
#include "ndc_dns.h"
#include "ndc_l4.h"

#include "internal.h"

#define NSEC_PER_SEC 1000000000ULL

_Static_assert(offsetof(struct ndc_fp_scratch, slack) == NDC_FP_NAME_MAX,
	       "the word after a full-length name is in the slack");

_Static_assert(NDC_DP_NOT_OURS == NDC_NOT_OURS, "one value for traffic that is not ours");

/*
 * ndc_l4 (bpf/ndc_l4.h's steps): NDC_GO for a whole UDP datagram to the config's port at one of
 * its addresses, NDC_DP_NOT_OURS for other traffic (TCP to us included: the kernel's socket
 * path), or a pass reason.
 */
static int l4(const struct ndc_fp_config *cfg, void *data, void *data_end, uint32_t len,
	      struct ndc_pkt *pk)
{
	struct ndc_cursor c;
	struct ndc_l3 l3;

	cursor_init(&c, data, data_end);
	if (ndc_parse_l3(&c, pk, &l3) != NDC_GO || l3.tcp || !ndc_l3_ours(cfg, &l3))
		return NDC_DP_NOT_OURS;
	return ndc_parse_udp(&c, cfg, &l3, len, pk);
}

/* ndc_lookup: steps 1 to 3 of the lookup in abi.h; NULL with *ret_why when passed. */
static const struct ndc_fp_value *lookup(const struct ndc_dpdk_table *t,
					 const struct ndc_fp_config *cfg,
					 const struct ndc_fp_scratch *s,
					 const struct ndc_question *q, uint64_t hash,
					 uint32_t *ret_hit, uint32_t *ret_why)
{
	struct ndc_fp_key key = {.hash = hash,
				 .qtype = q->qtype,
				 .name_len = (uint8_t)q->name_len,
				 .region = ndc_fp_key_region(s->name, q->name_len, q->qtype)};
	const struct ndc_fp_value *v;
	uint32_t flags;

	*ret_why = NDC_FP_PASS_MISS;
	v = ndc_dpdk_table_lookup(t, &key);
	if (v) {
		/* Another name with the same key: user space knows this one, NXDOMAIN or not. */
		if (!dns_name_is(v, (const __u64 *)s->name, q))
			return NULL;
		*ret_hit = NDC_FP_HIT;
		return v->flags & NDC_FP_V_PASS ? NULL : v;
	}
	key.qtype = NDC_FP_QTYPE_OTHER;
	key.region = ndc_fp_key_region(s->name, q->name_len, NDC_FP_QTYPE_OTHER);
	v = ndc_dpdk_table_lookup(t, &key);
	if (v) {
		/* A pass marker: some answer at this name lives in user space only. ANY: the
		 * table has it when the name has records; without, user space answers. */
		if (!dns_name_is(v, (const __u64 *)s->name, q) || v->flags & NDC_FP_V_PASS ||
		    q->qtype == NDC_DNS_T_ANY)
			return NULL;
		*ret_hit = NDC_FP_NODATA;
		return v;
	}
	flags = ndc_dpdk_table_flags(t);
	if (!dns_nx_allowed(flags, cfg, s->name, q))
		return NULL;
	v = ndc_dpdk_table_nx(t);
	if (!v || v->rcode != NDC_DNS_RCODE_NXDOMAIN)
		return NULL; /* no NXDOMAIN template published yet */
	*ret_hit = NDC_FP_NXDOMAIN;
	return v;
}

int ndc_dpdk_answer(const struct ndc_dpdk_table *t, uint8_t *data, uint32_t len, uint32_t room,
		    uint64_t now_ns, uint32_t *ret_len)
{
	const struct ndc_fp_config *cfg = ndc_dpdk_table_config(t);
	void *data_end = data + len;
	const struct ndc_fp_value *v;
	struct ndc_question q = {0};
	struct ndc_fp_scratch s;
	struct ndc_dnshdr *dh;
	struct ndc_pkt pk;
	uint32_t hit = 0, why, age = 0, nwords;
	uint32_t name_off, ans_off, dlen, reply_len, udp_len;
	__u64 hash = 0;

	why = (uint32_t)l4(cfg, data, data_end, len, &pk);
	if (why != NDC_GO)
		return (int)why;

	/* the query: header, question, OPT; the name goes straight into the scratch, hashed */
	dh = (struct ndc_dnshdr *)(data + pk.l4_off + sizeof(struct udphdr));
	why = (uint32_t)dns_check_header(dh, &q);
	if (why != NDC_GO)
		return (int)why;
	name_off = pk.l4_off + sizeof(struct udphdr) + sizeof(*dh);
	why = (uint32_t)dns_walk_name(data, data_end, name_off, &q);
	if (why != NDC_GO)
		return (int)why;
	if (q.name_len == 0 || q.name_len > NDC_FP_NAME_MAX)
		return NDC_FP_PASS_FORMAT;
	why = (uint32_t)dns_check_tail(data, data_end, name_off + q.name_len,
				       pk.l4_off + pk.udp_len, &q);
	if (why != NDC_GO)
		return (int)why;
	why = (uint32_t)dns_name_to_key(data, data_end, name_off, &q, (__u64 *)s.name, &hash);
	if (why != NDC_GO)
		return (int)why;
	/* suffix matching reads one word past the name's last: make it defined */
	nwords = (q.name_len + 7) / 8;
	memset((uint8_t *)&s + nwords * 8, 0, 8); /* name and slack are contiguous */

	v = lookup(t, cfg, &s, &q, hash, &hit, &why);
	if (!v)
		return (int)why;
	if (v->expire_ns) {
		if (now_ns >= v->expire_ns)
			return NDC_FP_PASS_EXPIRED; /* user space refreshes it */
		if (now_ns > v->insert_ns)
			age = (uint32_t)((now_ns - v->insert_ns) / NSEC_PER_SEC);
		why = (uint32_t)dns_ttl_check(v);
		if (why != NDC_GO)
			return (int)why;
	}
	dlen = v->len;
	if (dlen > NDC_FP_DATA_MAX)
		return NDC_FP_PASS_SIZE;
	reply_len =
	    sizeof(*dh) + q.name_len + NDC_DNS_QFIXED + dlen + (q.has_opt ? NDC_DNS_OPT_LEN : 0);
	if (reply_len > dns_udp_limit(&q))
		return NDC_FP_PASS_SIZE; /* user space drops additional or sets TC */
	udp_len = sizeof(struct udphdr) + reply_len;
	if (pk.l4_off + udp_len > room)
		return NDC_FP_PASS_SIZE; /* the buffer cannot hold the reply */

	/* The reply, in place: nothing below fails. */
	ans_off = name_off + q.name_len + NDC_DNS_QFIXED;
	data_end = data + pk.l4_off + udp_len;
	memcpy(data + ans_off, v->data, dlen);
	if (v->expire_ns)
		dns_ttl_countdown(data, data_end, ans_off, v, age);
	if (q.has_opt)
		dns_put_opt(data + ans_off + dlen);
	dns_reply_header(dh, &q, v);
	swap_eth(data, data_end);
	if (pk.v6) {
		swap_ipv6_udp(data, data_end, pk.l3_off, udp_len);
		ipv6_udp_csum_set(data, data_end, pk.l3_off, pk.l4_off, udp_len);
	} else {
		swap_ipv4_udp(data, data_end, pk.l3_off, udp_len);
	}
	*ret_len = pk.l4_off + udp_len;
	return (int)hit;
}
