/* SPDX-License-Identifier: MIT */
/*
 * DNS wire format for everything in user space: a sticky-error writer, domain names, query
 * parsing, the precomputed answer ("everything after the question") that both the socket path
 * and the fast-path publisher serve, the builder that makes one, and reply assembly.
 *
 * Conventions: names are in wire form (length-prefixed labels, terminating zero byte included in
 * every length). "lname" means the lowercase form used as a lookup key. Functions return 0 or a
 * negative errno, results go through ret_* out-parameters.
 */
#ifndef NDC_DNS_WIRE_H
#define NDC_DNS_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define NDC_DNS_HDR_LEN 12
#define NDC_NAME_MAX 255 /* RFC 1035 2.3.4, wire form including the root label */
#define NDC_LABEL_MAX 63
#define NDC_UDP_MIN 512	      /* RFC 1035 4.2.1: the limit without EDNS */
#define NDC_EDNS_UDP_MAX 1232 /* what we accept and advertise: DNS flag day 2020 */
#define NDC_MSG_MAX 65535     /* TCP, RFC 1035 4.2.2 */
#define NDC_STALE_TTL 30      /* RFC 8767 4: TTL of an answer served stale */

enum ndc_rrtype {
	NDC_T_A = 1,
	NDC_T_NS = 2,
	NDC_T_CNAME = 5,
	NDC_T_SOA = 6,
	NDC_T_PTR = 12,
	NDC_T_MX = 15,
	NDC_T_TXT = 16,
	NDC_T_AAAA = 28,
	NDC_T_SRV = 33,
	NDC_T_DNAME = 39,
	NDC_T_OPT = 41,
	NDC_T_IXFR = 251,
	NDC_T_AXFR = 252,
	NDC_T_ANY = 255,
};

#define NDC_C_IN 1

enum ndc_rcode {
	NDC_RCODE_NOERROR = 0,
	NDC_RCODE_FORMERR = 1,
	NDC_RCODE_SERVFAIL = 2,
	NDC_RCODE_NXDOMAIN = 3,
	NDC_RCODE_NOTIMP = 4,
	NDC_RCODE_REFUSED = 5,
	NDC_RCODE_BADVERS = 16, /* extended: upper 8 bits travel in the OPT TTL (RFC 6891 6.1.3) */
};

/* Header flag bits (second 16-bit word of the header, host order). */
#define NDC_F_QR 0x8000
#define NDC_F_OPCODE_MASK 0x7800
#define NDC_F_AA 0x0400
#define NDC_F_TC 0x0200
#define NDC_F_RD 0x0100
#define NDC_F_RA 0x0080
#define NDC_F_AD 0x0020
#define NDC_F_CD 0x0010
#define NDC_F_RCODE_MASK 0x000f
#define NDC_OPCODE_QUERY 0

#define NDC_EDNS_DO 0x8000 /* in the OPT TTL's low 16 bits */

/* ---------------------------------------------------------------------------------------------
 * Sticky-error writer: any overrun sets err = -ENOSPC and every later call does nothing; the
 * caller checks err once at the end.
 */
struct ndc_wbuf {
	uint8_t *p;
	size_t len;
	size_t cap;
	int err;
};

static inline void ndc_wbuf_init(struct ndc_wbuf *w, uint8_t *p, size_t cap)
{
	w->p = p;
	w->len = 0;
	w->cap = cap;
	w->err = 0;
}

static inline bool ndc_wbuf_room(struct ndc_wbuf *w, size_t n)
{
	if (w->err)
		return false;
	if (w->cap - w->len < n) {
		w->err = -28; /* -ENOSPC without pulling errno.h into every includer */
		return false;
	}
	return true;
}

static inline void ndc_wbuf_bytes(struct ndc_wbuf *w, const void *src, size_t n)
{
	if (!ndc_wbuf_room(w, n))
		return;
	if (n)
		memcpy(w->p + w->len, src, n);
	w->len += n;
}

static inline void ndc_wbuf_u8(struct ndc_wbuf *w, uint8_t v)
{
	ndc_wbuf_bytes(w, &v, 1);
}

static inline void ndc_wbuf_u16(struct ndc_wbuf *w, uint16_t v)
{
	uint8_t b[2] = {(uint8_t)(v >> 8), (uint8_t)v};
	ndc_wbuf_bytes(w, b, 2);
}

static inline void ndc_wbuf_u32(struct ndc_wbuf *w, uint32_t v)
{
	uint8_t b[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
	ndc_wbuf_bytes(w, b, 4);
}

static inline uint16_t ndc_get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static inline uint32_t ndc_get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline void ndc_put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void ndc_put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* ---------------------------------------------------------------------------------------------
 * Names.
 */

/*
 * Text ("a.b.c" or "a.b.c.", "." for the root) to wire form. \DDD and \X escapes are not
 * supported (cluster names never need them). -EINVAL: empty text or label, label > 63,
 * name > 255, a backslash. -ENOSPC: out too small.
 */
int ndc_name_from_text(const char *text, uint8_t *out, size_t cap, size_t *ret_len);

/* Wire form to text with a trailing dot ("." for the root), NUL-terminated; inside a label '.'
 * and '\' as \. and \\, bytes outside [!-~] as \DDD (RFC 1035 5.1). The name must end within
 * len bytes. -ENOSPC if cap is too small, -EINVAL for a malformed wire name. */
int ndc_name_to_text(const uint8_t *name, size_t len, char *out, size_t cap);

/* ASCII lowercase copy (dst may equal src). */
void ndc_name_lower(uint8_t *dst, const uint8_t *src, size_t len);

/* Validates an uncompressed wire name within [name, name + max): 0 and *ret_len, or -EINVAL. */
int ndc_name_check(const uint8_t *name, size_t max, size_t *ret_len);

/* True when name equals zone or ends with it at a label boundary; both lowercase wire. */
bool ndc_name_in_zone(const uint8_t *name, size_t len, const uint8_t *zone, size_t zlen);

/* Number of labels, not counting the root; -EINVAL for a malformed name. */
int ndc_name_labels(const uint8_t *name, size_t len);

/*
 * Reads a possibly compressed name at msg[*pos], writes it uncompressed to out (NDC_NAME_MAX
 * bytes), advances *pos past the name as it stands in the message. Pointer loops, forward-only
 * tricks and overruns give -EBADMSG: a pointer must point before the labels that lead to it and
 * not into the header.
 */
int ndc_name_unpack(const uint8_t *msg, size_t msglen, size_t *pos, uint8_t *out, size_t *ret_len);

/* ---------------------------------------------------------------------------------------------
 * Queries.
 */
struct ndc_query {
	uint16_t id;
	uint16_t flags;		     /* header flags as received, host order */
	uint8_t qname[NDC_NAME_MAX]; /* as received: 0x20 mixed case is echoed back */
	uint8_t lname[NDC_NAME_MAX]; /* lowercase: the lookup key */
	uint8_t qname_len;	     /* wire length, root label included */
	uint16_t qtype;
	uint16_t qclass;
	bool has_edns;
	bool do_bit;
	uint8_t edns_version;
	uint16_t udp_size;	/* from OPT, 0 without EDNS */
	uint16_t edns_opts_off; /* OPT RDATA (options) in the packet: valid while it is */
	uint16_t edns_opts_len;
	uint8_t rcode;	  /* set when ndc_dns_parse_query fails: what to answer with */
	bool hdr_ok;	  /* the 12-byte header was readable (id/flags valid) */
	bool question_ok; /* the question was parsed (qname etc. valid) */
};

/*
 * Parses a query. Returns 0 for a well-formed standard query with one question. On failure
 * returns a negative errno and sets q->rcode to the answer the server owes, or -EPROTO with no
 * answer owed (the packet is a response, or shorter than a header: drop it):
 *   -EBADMSG   malformed (QDCOUNT != 1, truncated, bad name, trailing garbage, two OPTs, OPT
 *              not in additional, ...): FORMERR
 *   -EOPNOTSUPP opcode other than QUERY: NOTIMP
 *   -EPERM     AXFR/IXFR: REFUSED
 *   -EDOM      a reserved or meta QTYPE (0, OPT, 128-254 but AXFR/IXFR; ndc_qtype_verdict):
 *              FORMERR
 *   -ENOTSUP   EDNS version > 0: BADVERS (RFC 6891 6.1.3)
 *   -EPROTO    drop, nothing to send (hdr_ok is false only when len < 12)
 * On Linux ENOTSUP and EOPNOTSUPP are the same number: tell NOTIMP from BADVERS by q->rcode.
 * Precedence: drop, then NOTIMP (the rest is still parsed as far as it goes, for the echo), then
 * FORMERR, BADVERS, REFUSED or FORMERR by type. hdr_ok / question_ok say what an error reply can
 * echo.
 */
int ndc_dns_parse_query(const uint8_t *pkt, size_t len, struct ndc_query *q);

/* The largest reply the client accepts over UDP: 512 without EDNS, else the advertised size
 * clamped to [512, NDC_EDNS_UDP_MAX]. */
uint16_t ndc_dns_udp_limit(const struct ndc_query *q);

/*
 * Writes a query for (name, qtype, qclass) with the given ID and RD set, plus an OPT RR
 * advertising udp_size (0: no OPT). For the forwarder.
 */
int ndc_dns_write_query(uint16_t id, const uint8_t *name, size_t nlen, uint16_t qtype,
			uint16_t qclass, uint16_t udp_size, uint8_t *out, size_t cap,
			size_t *ret_len);

/* ---------------------------------------------------------------------------------------------
 * Precomputed answers.
 *
 * struct ndc_answer holds everything of a reply after the question section except the OPT RR:
 * answer, authority and additional RRs in wire form. Compression pointers in data assume the
 * question name (qname_len bytes) sits at offset 12, so data starts at offset 12 + qname_len + 4
 * of the reply. The same bytes serve any capitalisation of the question. TTLs in data are the
 * original ones; the reply writer subtracts the entry's age.
 */
#define NDC_ANSWER_DATA_MAX 4096 /* bigger answers are not cached or served precomputed */

struct ndc_answer {
	uint8_t rcode;	   /* low 4 bits of the header RCODE */
	uint8_t aa;	   /* authoritative answer */
	uint8_t qname_len; /* the question length the compression pointers assume */
	uint8_t pad;
	uint16_t ancount;
	uint16_t nscount;
	uint16_t arcount;
	uint16_t len;	  /* bytes in data */
	uint32_t min_ttl; /* smallest TTL of all RRs (0 with none) */
	uint8_t data[];
};

/* Bytes a struct ndc_answer with len bytes of data occupies. */
static inline size_t ndc_answer_size(const struct ndc_answer *a)
{
	return sizeof(*a) + a->len;
}

/* Sections, in the order the builder requires them to be added. */
enum ndc_section { NDC_SEC_ANSWER = 0, NDC_SEC_AUTHORITY = 1, NDC_SEC_ADDITIONAL = 2 };

#define NDC_AB_MAX_PTRS 64 /* names remembered for compression */

/*
 * Builds a struct ndc_answer into caller memory. Sticky error: check the return of
 * ndc_ab_finish only. Names in the RDATA of NS, CNAME, PTR, MX, SOA (RFC 3597 4: the only types
 * that may be compressed) and owner names are compressed against the question and earlier names;
 * SRV targets are not (RFC 2782).
 */
struct ndc_ab {
	struct ndc_answer *a;
	size_t cap; /* capacity of a->data */
	const uint8_t *qname;
	int err;
	int section;
	uint32_t min_ttl;
	bool have_ttl;
	uint16_t n_ptrs;
	uint16_t ptrs[NDC_AB_MAX_PTRS]; /* message offsets of names that can be pointed at */
};

/* data_cap: bytes available in a->data. qname: the lowercase question name. */
void ndc_ab_init(struct ndc_ab *b, struct ndc_answer *a, size_t data_cap, const uint8_t *qname,
		 size_t qname_len);

/*
 * Appends one RR. owner: uncompressed wire name. rdata: uncompressed wire RDATA (names inside
 * it uncompressed). Adding to an earlier section than the last one used is -EINVAL.
 */
void ndc_ab_rr(struct ndc_ab *b, enum ndc_section sec, const uint8_t *owner, size_t owner_len,
	       uint16_t type, uint16_t rclass, uint32_t ttl, const uint8_t *rdata, size_t rdlen);

/* Sets rcode and aa; returns 0, -ENOSPC (did not fit) or -EINVAL (bad RR or section order). */
int ndc_ab_finish(struct ndc_ab *b, uint8_t rcode, bool aa);

/*
 * Parses an upstream response to the question (lname, qtype, qclass) into an answer: checks QR,
 * one question equal to ours (case-insensitive), RCODE; decompresses every RR and rebuilds it
 * with ndc_ab (OPT, TSIG and SIG(0) are dropped). cap: bytes available in out->data, as for
 * ndc_ab_init. Returns 0, -EBADMSG (malformed, not our question, or an extended RCODE in the OPT
 * that the answer cannot carry), -ENOSPC (does not fit cap), -EINVAL (lname malformed).
 * *ret_tc is set when the response had TC (retry over TCP, do not cache): then parsing stops at
 * the first RR that does not parse (a cut message ends mid-RR) and 0 is returned with the RRs
 * before it; trailing bytes are ignored too. TTLs with the top bit set become 0 (RFC 2181 8).
 */
int ndc_dns_parse_response(const uint8_t *msg, size_t len, const uint8_t *lname, size_t nlen,
			   uint16_t qtype, uint16_t qclass, struct ndc_answer *out, size_t cap,
			   bool *ret_tc);

/*
 * Caps the TTL of every RR of a at cap (a cache's max_ttl or neg_max_ttl: what it serves never
 * says more than it will keep), and min_ttl with them. 0, or -EINVAL for inconsistent data.
 */
int ndc_answer_cap_ttls(struct ndc_answer *a, uint32_t cap);

/*
 * How long a cache may keep an upstream's answer to a question of type qtype (RFC 2308):
 *   positive (NOERROR with a record that is not an alias, or aliases alone and no SOA, or a
 *   question for CNAME, DNAME or ANY): *ret_ttl = min_ttl, returns 0;
 *   negative (NXDOMAIN; NODATA: no answer, or only the CNAME/DNAME chain with the SOA in
 *   authority, RFC 2308 2.2.1): *ret_ttl = min(SOA TTL, SOA MINIMUM, the chain's TTLs), returns 1;
 *   negative without an SOA: -ENOENT (not cached, RFC 2308 5); another RCODE or bad data: -EINVAL.
 */
int ndc_answer_cache_ttl(const struct ndc_answer *a, uint16_t qtype, uint32_t *ret_ttl);

/*
 * Writes the reply to q: header (ID, RD and CD echoed, QR and RA set, AA and RCODE from a),
 * the question exactly as received, a's data with every TTL lowered by ttl_sub (floored at 0),
 * or, if ttl_stale is non-zero, every TTL set to ttl_stale (RFC 8767 4: an answer served stale
 * goes out with NDC_STALE_TTL, whatever its records' original TTLs), then an OPT RR when the
 * query had one.
 * When the reply exceeds limit, the additional section is left out (RFC 2181 9: no TC for that);
 * if it still does not fit, it is cut to header + question (+ OPT) with TC set, AN/NS counts 0.
 * a->qname_len must equal q->qname_len (-EINVAL otherwise, also for inconsistent a->data);
 * -ENOSPC when the reply does not fit cap, or not even the truncated reply fits limit.
 */
int ndc_dns_write_reply(const struct ndc_query *q, const struct ndc_answer *a, uint32_t ttl_sub,
			uint32_t ttl_stale, size_t limit, uint8_t *out, size_t cap,
			size_t *ret_len);

/*
 * Writes an error reply with the given rcode (FORMERR, NOTIMP, REFUSED, SERVFAIL, BADVERS):
 * the question echoed when q->question_ok, header only otherwise; OPT when q->has_edns (and
 * always for BADVERS: low 4 bits in the header, the rest in the OPT TTL). ID, opcode, RD and CD
 * are echoed, QR and RA set. Needs q->hdr_ok (-EINVAL otherwise).
 */
int ndc_dns_write_error(const struct ndc_query *q, uint16_t rcode, uint8_t *out, size_t cap,
			size_t *ret_len);

#endif
