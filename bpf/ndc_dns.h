/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * DNS for the fast path: the query checks (one straight line, one reason per check), the question
 * name into the lookup key, the EDNS OPT check, suffix matching for NXDOMAIN synthesis, and the
 * parts of a reply that are DNS (header, OPT, TTL countdown). The reply bytes must equal what
 * user space's ndc_dns_write_reply writes for the same query and answer, ID included.
 *
 * Every check that fails returns the ndc_fp_counter to count before passing the packet up;
 * NDC_GO (never a pass reason) means go on.
 */
#ifndef NDC_DNS_H
#define NDC_DNS_H

#include <linux/bpf.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include <ndc/abi.h>

#include "ndc_parse.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the name copy and the masks below assume little-endian words (bpfel)"
#endif

#define NDC_GO 0 /* NDC_FP_HIT is not a pass reason */

#define NDC_DNS_HDR_LEN 12
#define NDC_DNS_QFIXED 4	  /* QTYPE, QCLASS */
#define NDC_DNS_OPT_LEN 11	  /* root owner, TYPE, CLASS, TTL, RDLEN */
#define NDC_DNS_LABEL_MAX 63	  /* RFC 1035 2.3.4; larger length bytes are pointers or RFC 6891 */
#define NDC_DNS_UDP_MIN 512	  /* RFC 1035 4.2.1 */
#define NDC_DNS_EDNS_UDP_MAX 1232 /* what user space accepts and advertises */
#define NDC_DNS_LABELS_MAX (NDC_FP_NAME_MAX / 2) /* a label takes at least two bytes */
#define NDC_DNS_NAME_WORDS (NDC_FP_NAME_MAX / 8)

#define NDC_DNS_T_OPT 41
#define NDC_DNS_OPT_COOKIE 10 /* RFC 7873 */
#define NDC_DNS_T_IXFR 251
#define NDC_DNS_T_AXFR 252
#define NDC_DNS_T_ANY 255
#define NDC_DNS_C_IN 1
#define NDC_DNS_RCODE_NXDOMAIN 3

#define NDC_DNS_F_QR 0x8000
#define NDC_DNS_F_OPCODE 0x7800
#define NDC_DNS_F_AA 0x0400
#define NDC_DNS_F_RD 0x0100
#define NDC_DNS_F_RA 0x0080
#define NDC_DNS_F_CD 0x0010
#define NDC_DNS_EDNS_DO 0x8000

struct ndc_dnshdr {
	__be16 id;
	__be16 flags;
	__be16 qdcount;
	__be16 ancount;
	__be16 nscount;
	__be16 arcount;
};

/*
 * The per-CPU scratch the lowercase name is copied to, for the comparison with the entry's stored
 * name and for suffix matching. Suffix matching reads whole words at variable offsets past the
 * name, so it is followed by slack that keeps those reads inside the value. Bytes after the name's
 * last word are left from earlier queries: nothing reads them unmasked. v: the answer found, as
 * copied out of the table (ndc_table.h); its name is not copied. launder, which every query uses,
 * comes last and starts a cache line (when the scratch does): a backend's own words for a query
 * right after the scratch share its line (the kernel's: struct ndc_kscratch).
 */
#define NDC_FP_SCRATCH_HEAD (2 * NDC_FP_NAME_MAX + 8 + sizeof(struct ndc_fp_value))
struct ndc_fp_scratch {
	__u8 name[NDC_FP_NAME_MAX];
	__u8 slack[NDC_FP_NAME_MAX];
	__u64 fence; /* see table_rmb() in ndc_table.h */
	struct ndc_fp_value v;
	__u8 pad[(64 - NDC_FP_SCRATCH_HEAD % 64) % 64];
	__u32 launder[4]; /* see ctx_launder() in ndc_ctx.h */
};

_Static_assert(__builtin_offsetof(struct ndc_fp_scratch, launder) % 64 == 0,
	       "launder starts a line");
_Static_assert(sizeof(struct ndc_fp_scratch) ==
		   __builtin_offsetof(struct ndc_fp_scratch, launder) + 16,
	       "launder is last: what follows the scratch shares its line");

struct ndc_question {
	__u64 starts[2]; /* bitmap: offsets in the name where a label starts */
	__u32 name_len;	 /* wire length, root label included */
	__u16 flags;	 /* query header flags, host order */
	__u16 qtype;
	__u16 qclass;
	__u16 udp_size; /* advertised in the OPT; 0 without one */
	__u8 has_opt;
};

/* RFC 1035 4.1.1: a plain query, one question, nothing but an OPT after it. */
static __always_inline int dns_check_header(const struct ndc_dnshdr *h, struct ndc_question *q)
{
	q->flags = bpf_ntohs(h->flags);
	if (q->flags & (NDC_DNS_F_QR | NDC_DNS_F_OPCODE))
		return NDC_FP_PASS_FORMAT; /* a response, or not opcode QUERY */
	if (h->qdcount != bpf_htons(1))
		return NDC_FP_PASS_FORMAT; /* one question, as every resolver sends */
	if (h->ancount || h->nscount)
		return NDC_FP_PASS_FORMAT; /* a query has nothing to say there */
	if (h->arcount & bpf_htons(0xfffe))
		return NDC_FP_PASS_FORMAT; /* at most the OPT */
	q->has_opt = h->arcount != 0;
	return NDC_GO;
}

/*
 * ASCII lowercase of eight name bytes at once. Only bytes 'A'..'Z' change: label length bytes
 * are at most 63, below 'A', so the wire name can be lowered without walking its labels.
 */
static __always_inline __u64 lower8(__u64 w)
{
	__u64 h = w & 0x7f7f7f7f7f7f7f7fULL;
	__u64 ge_a = h + 0x3f3f3f3f3f3f3f3fULL; /* top bit set from 'A' (0x41) */
	__u64 gt_z = h + 0x2525252525252525ULL; /* top bit set above 'Z' (0x5a) */
	__u64 upper = ge_a & ~gt_z & ~w & 0x8080808080808080ULL;

	return w | upper >> 2;
}

/* Keeps the first n (1..7) bytes of a word as it sits in memory. */
static __always_inline __u64 low_mask(__u32 n)
{
	return (1ULL << (n * 8)) - 1;
}

/*
 * The question name at data + off: validates its labels (no compression pointer: nothing
 * precedes the question it could point at; no label over 63; at most NDC_FP_NAME_MAX bytes) and
 * records where labels start.
 */
static __always_inline int dns_walk_name(void *data, void *data_end, __u32 off,
					 struct ndc_question *q)
{
	__u64 lo = 0, hi = 0;
	__u32 pos = 0;
	int i;

	/* verifier: constant bound; pos is checked below NDC_FP_NAME_MAX before every use */
	for (i = 0; i < NDC_DNS_LABELS_MAX + 1; i++) {
		__u8 *p;
		__u8 c;

		if (pos >= NDC_FP_NAME_MAX)
			return NDC_FP_PASS_FORMAT; /* too long for the key: user space answers */
		p = data + off + pos;
		if ((void *)(p + 1) > data_end)
			return NDC_FP_PASS_FORMAT; /* cut short */
		c = *p;
		if (c == 0)
			break;
		if (c > NDC_DNS_LABEL_MAX)
			return NDC_FP_PASS_FORMAT; /* pointer or extended label type */
		if (pos < 64)
			lo |= 1ULL << pos;
		else
			hi |= 1ULL << (pos - 64);
		pos += c + 1;
	}
	q->starts[0] = lo;
	q->starts[1] = hi;
	q->name_len = pos + 1;
	return NDC_GO;
}

/*
 * Copies the walked name into kw (scratch), lowercased, its last word zero past the name's end,
 * and hashes it on the way (ndc_fp_hash_step over the same words ndc_fp_name_hash reads). QTYPE
 * and QCLASS must be known to follow the name. Reads whole words; the last one may reach up to 3
 * bytes past QCLASS when the question ends the packet, and then is read as 4 bytes instead (it
 * holds at most 3 name bytes then).
 */
static __always_inline int dns_name_to_key(void *data, void *data_end, __u32 off,
					   const struct ndc_question *q, __u64 *kw, __u64 *ret_hash)
{
	__u32 nwords = (q->name_len + 7) / 8, tail = q->name_len & 7;
	__u64 last = tail ? low_mask(tail) : ~0ULL, h = NDC_FP_HASH_INIT;

	/* verifier: constant bound, every read checked right before it */
	for (__u32 i = 0; i < NDC_DNS_NAME_WORDS; i++) {
		__u8 *p;
		__u64 w;

		if (i >= nwords)
			break;
		p = pkt_at(data, off + i * 8);
		if ((void *)(p + 8) <= data_end)
			w = *(__u64 *)p;
		else if ((void *)(p + 4) <= data_end)
			w = *(__u32 *)p;
		else
			return NDC_FP_PASS_FORMAT;
		w = lower8(w);
		if (i + 1 == nwords)
			w &= last;
		kw[i] = w;
		h = ndc_fp_hash_step(h, w);
	}
	*ret_hash = h;
	return NDC_GO;
}

/*
 * Whether the entry v is the name in kw (scratch, as dns_name_to_key left it): false on a hash
 * collision. Both are zero past the name in its last word, so whole words compare.
 */
static __always_inline int dns_name_is(const struct ndc_fp_value *v, const __u64 *kw,
				       const struct ndc_question *q)
{
	const __u64 *vw = (const __u64 *)v->name;
	__u32 nwords = (q->name_len + 7) / 8;
	__u64 diff = 0;

	if (v->name_len != q->name_len)
		return 0;
	/* verifier: constant bound */
	for (__u32 i = 0; i < NDC_DNS_NAME_WORDS; i++) {
		if (i >= nwords)
			break;
		diff |= vw[i] ^ kw[i];
	}
	return diff == 0;
}

/*
 * Class IN only, and questions for data only (ndc_qtype_verdict, the rule user space answers the
 * rest by: REFUSED, FORMERR); type 0 would read the "other type" entry as an exact one, a meta
 * type would get the name's NODATA. NDC_GO, else NDC_FP_PASS_FORMAT.
 */
static __always_inline int dns_question_kind(const struct ndc_question *q)
{
	if (q->qclass != NDC_DNS_C_IN || ndc_qtype_verdict(q->qtype))
		return NDC_FP_PASS_FORMAT;
	return NDC_GO;
}

/*
 * QTYPE, QCLASS and the optional OPT RR (RFC 6891 6.1.2) at data + off; the message must end
 * exactly after them at msg_end.
 */
static __always_inline int dns_check_tail(void *data, void *data_end, __u32 off, __u32 msg_end,
					  struct ndc_question *q)
{
	__u8 *p = data + off;

	if ((void *)(p + NDC_DNS_QFIXED) > data_end)
		return NDC_FP_PASS_FORMAT;
	q->qtype = bpf_ntohs(*(__be16 *)p);
	q->qclass = bpf_ntohs(*(__be16 *)(p + 2));
	off += NDC_DNS_QFIXED;
	if (q->has_opt) {
		p = data + off;
		if ((void *)(p + NDC_DNS_OPT_LEN) > data_end)
			return NDC_FP_PASS_FORMAT;
		if (p[0] != 0 || *(__be16 *)(p + 1) != bpf_htons(NDC_DNS_T_OPT))
			return NDC_FP_PASS_FORMAT; /* not an OPT: a query carries nothing else */
		__u16 rdlen = bpf_ntohs(*(__be16 *)(p + 9));

		if (rdlen) {
			/*
			 * RFC 7873 5.2.1: a server without cookie support ignores a COOKIE, as
			 * user space does; it answers like no option was there. Anything else
			 * (ECS, several options, ...) goes to user space.
			 */
			__u8 *o = p + NDC_DNS_OPT_LEN;

			if ((void *)(o + 4) > data_end)
				return NDC_FP_PASS_FORMAT;
			__u16 olen = bpf_ntohs(*(__be16 *)(o + 2));

			if (*(__be16 *)o != bpf_htons(NDC_DNS_OPT_COOKIE) || olen < 8 ||
			    olen > 40 || rdlen != 4 + olen)
				return NDC_FP_PASS_EDNS;
			off += rdlen;
		}
		if (p[6])
			return NDC_FP_PASS_EDNS; /* version > 0: BADVERS from user space */
		if (p[7] & (NDC_DNS_EDNS_DO >> 8))
			return NDC_FP_PASS_EDNS; /* DO: no signatures here */
		q->udp_size = bpf_ntohs(*(__be16 *)(p + 3));
		off += NDC_DNS_OPT_LEN;
	}
	if (off != msg_end)
		return NDC_FP_PASS_FORMAT; /* trailing bytes */
	return dns_question_kind(q);
}

/*
 * The question's length (name, QTYPE, QCLASS) when the message after the header is the question
 * and at most a plain OPT that ends it (root owner, no options, version 0, DO clear: what
 * dns_check_tail answers with, q->udp_size set from it); 0 for any other shape, or a question
 * shorter than NDC_DNS_QFIXED + 1. Nothing about the question itself is checked: what it holds
 * is known only by a walk (dns_walk_name), or by equality with one walked before (the kernel's
 * memo, bpf/ndc_fastpath.bpf.c). off: the question's start; msg_end: the message's end.
 */
static __always_inline __u32 dns_question_span(void *data, void *data_end, __u32 off, __u32 msg_end,
					       struct ndc_question *q)
{
	/* verifier: 64 bits, checked on the register the pointer is made of */
	__u64 len = (__u64)msg_end - off;
	__u8 *p;

	if (q->has_opt) {
		if (len < NDC_DNS_QFIXED + 1 + NDC_DNS_OPT_LEN ||
		    len > NDC_FP_NAME_MAX + NDC_DNS_QFIXED + NDC_DNS_OPT_LEN)
			return 0;
		len -= NDC_DNS_OPT_LEN;
		p = pkt_at(data, off + (__u32)len);
		if ((void *)(p + NDC_DNS_OPT_LEN) > data_end)
			return 0;
		if (p[0] != 0 || *(__be16 *)(p + 1) != bpf_htons(NDC_DNS_T_OPT) || p[6] ||
		    (p[7] & (NDC_DNS_EDNS_DO >> 8)) || *(__u16 *)(p + 9))
			return 0;
		q->udp_size = bpf_ntohs(*(__be16 *)(p + 3));
	}
	if (len < NDC_DNS_QFIXED + 1 || len > NDC_FP_NAME_MAX + NDC_DNS_QFIXED)
		return 0;
	return (__u32)len;
}

/* The client's UDP limit, as ndc_dns_udp_limit: 512 without EDNS, else [512, 1232]. */
static __always_inline __u32 dns_udp_limit(const struct ndc_question *q)
{
	if (!q->has_opt || q->udp_size < NDC_DNS_UDP_MIN)
		return NDC_DNS_UDP_MIN;
	return q->udp_size > NDC_DNS_EDNS_UDP_MAX ? NDC_DNS_EDNS_UDP_MAX : q->udp_size;
}

/*
 * True when the key's name equals suffix or ends with it at a label boundary. name: the key
 * inside struct ndc_fp_scratch (words past the name stay inside the slack); suffix: lowercase
 * wire name of slen bytes inside a map value with NDC_FP_NAME_MAX bytes of room.
 */
static __always_inline int dns_name_under(const __u8 *name, const struct ndc_question *q,
					  const __u8 *suffix, __u32 slen)
{
	__u32 start;

	if (slen == 0 || slen > q->name_len)
		return 0;
	start = q->name_len - slen;
	if (!(q->starts[(start >> 6) & 1] & 1ULL << (start & 63)))
		return 0;
	start &= NDC_FP_NAME_MAX - 1; /* verifier: it is below name_len <= NDC_FP_NAME_MAX */
	/* verifier: constant bound */
	for (__u32 j = 0; j < NDC_DNS_NAME_WORDS; j++) {
		__u64 a, b;

		if (j * 8 >= slen)
			break;
		a = *(const __u64 *)(name + start + j * 8);
		b = *(const __u64 *)(suffix + j * 8);
		if (slen - j * 8 < 8) {
			a &= low_mask(slen - j * 8);
			b &= low_mask(slen - j * 8);
		}
		if (a != b)
			return 0;
	}
	return 1;
}

/*
 * Whether a name the table does not hold may be answered NXDOMAIN: the store is complete
 * (flags: NDC_FP_C_SYNCED), and the name is under the zone and not under the pass-through
 * suffix (names computed at lookup time in user space, such as pods). Both readers, the kernel's
 * and DPDK's, decide it here.
 */
static __always_inline int dns_nx_allowed(__u32 flags, const struct ndc_fp_config *cfg,
					  const __u8 *name, const struct ndc_question *q)
{
	if (!(flags & NDC_FP_C_SYNCED) || cfg->zone_len > NDC_FP_NAME_MAX ||
	    cfg->pass_len > NDC_FP_NAME_MAX)
		return 0;
	/* not ours: reverse names, the rest of the world */
	if (!dns_name_under(name, q, cfg->zone, cfg->zone_len))
		return 0;
	return !dns_name_under(name, q, cfg->pass, cfg->pass_len);
}

/* ndc_dns_write_reply's header: ID, RD and CD echoed, QR and RA set, AA and RCODE from v. */
static __always_inline void dns_reply_header(struct ndc_dnshdr *h, const struct ndc_question *q,
					     const struct ndc_fp_value *v)
{
	__u16 flags = NDC_DNS_F_QR | NDC_DNS_F_RA | (q->flags & (NDC_DNS_F_RD | NDC_DNS_F_CD)) |
		      (v->flags & NDC_FP_V_AA ? NDC_DNS_F_AA : 0) | (v->rcode & 0xf);

	h->flags = bpf_htons(flags);
	h->qdcount = bpf_htons(1);
	h->ancount = bpf_htons(v->ancount);
	h->nscount = bpf_htons(v->nscount);
	h->arcount = bpf_htons(v->arcount + q->has_opt);
}

/* ndc_dns_write_reply's OPT: root, OPT, our 1232 bytes, RCODE 0, version 0, DO clear (DO
 * queries never get here), no options. */
static __always_inline void dns_put_opt(__u8 *p)
{
	p[0] = 0;
	*(__be16 *)(p + 1) = bpf_htons(NDC_DNS_T_OPT);
	*(__be16 *)(p + 3) = bpf_htons(NDC_DNS_EDNS_UDP_MAX);
	*(__u32 *)(p + 5) = 0;
	*(__u16 *)(p + 9) = 0;
}

/* The publisher's TTL offsets must lie inside the answer: checked before the packet is touched. */
static __always_inline int dns_ttl_check(const struct ndc_fp_value *v)
{
	__u32 n = v->n_ttl;

	if (n > NDC_FP_TTL_MAX)
		return NDC_FP_PASS_SIZE;
	/* verifier: constant bound */
	for (__u32 i = 0; i < NDC_FP_TTL_MAX; i++) {
		if (i >= n)
			break;
		if (v->ttl_off[i] + 4u > v->len)
			return NDC_FP_PASS_SIZE;
	}
	return NDC_GO;
}

/*
 * Counts the TTLs of the answer copied to data + off down by age seconds, floored at 0, like
 * ndc_dns_write_reply with ttl_sub = age. Offsets were checked by dns_ttl_check.
 */
static __always_inline int dns_ttl_countdown(void *data, void *data_end, __u32 off,
					     const struct ndc_fp_value *v, __u32 age)
{
	__u32 n = v->n_ttl;

	/* verifier: constant bound */
	for (__u32 i = 0; i < NDC_FP_TTL_MAX; i++) {
		__u32 ttl;
		__u8 *p;

		if (i >= n)
			break;
		p = data + off + (v->ttl_off[i] & (NDC_FP_DATA_MAX - 1));
		if ((void *)(p + 4) > data_end)
			return NDC_FP_PASS_SIZE;
		ttl = bpf_ntohl(*(__be32 *)p);
		*(__be32 *)p = bpf_htonl(ttl > age ? ttl - age : 0);
	}
	return NDC_GO;
}

#endif
