// SPDX-License-Identifier: MIT
/*
 * The differential fuzzer's judge: a fast-path reply and the socket path's, each decoded on its
 * own (every name decompressed, every RR's RDATA taken apart by type), then compared as DNS
 * messages rather than as bytes, so that a new table layout may write the same answer another
 * way (another order of RRs, other compression) and still agree.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_diff.h"

#define RR_MAX 512
#define ARENA 32768

struct rr {
	uint8_t sec; /* 0 answer, 1 authority, 2 additional */
	uint16_t type, rclass;
	uint32_t ttl;
	uint32_t off, len; /* the key in the arena: owner (lowercase), type, class, RDATA */
};

struct msg {
	uint16_t id, flags, count[4];
	const uint8_t *question;
	size_t qlen;
	size_t n;
	struct rr rr[RR_MAX];
	uint8_t arena[ARENA];
	size_t used;
	char err[96];
};

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int put(struct msg *m, const uint8_t *p, size_t n)
{
	if (m->used + n > ARENA)
		return -ENOSPC;
	memcpy(m->arena + m->used, p, n);
	m->used += n;
	return 0;
}

/* A name at *pos of the message into the arena, decompressed (lowercased when asked). */
static int put_name(struct msg *m, const uint8_t *pkt, size_t len, size_t *pos, bool lower)
{
	uint8_t name[NDC_NAME_MAX];
	size_t nlen;

	if (ndc_name_unpack(pkt, len, pos, name, &nlen))
		return -EBADMSG;
	if (lower)
		ndc_name_lower(name, name, nlen);
	return put(m, name, nlen);
}

/*
 * RDATA in canonical form: names of the types that may be compressed (RFC 3597 4) and SRV's,
 * decompressed and lowercased (a pointer into the question gives them its 0x20 case).
 */
static int put_rdata(struct msg *m, const uint8_t *pkt, size_t end, size_t pos, uint16_t type)
{
	size_t fixed = 0, names = 0;

	switch (type) {
	case NDC_T_NS:
	case NDC_T_CNAME:
	case NDC_T_PTR:
		names = 1;
		break;
	case NDC_T_MX:
		fixed = 2;
		names = 1;
		break;
	case NDC_T_SRV:
		fixed = 6;
		names = 1;
		break;
	case NDC_T_SOA:
		names = 2;
		break;
	default:
		return put(m, pkt + pos, end - pos);
	}
	if (pos + fixed > end || put(m, pkt + pos, fixed))
		return -EBADMSG;
	pos += fixed;
	for (size_t i = 0; i < names; i++)
		if (put_name(m, pkt, end, &pos, true))
			return -EBADMSG;
	/* what follows the names (SOA's five numbers) as it is */
	return pos > end ? -EBADMSG : put(m, pkt + pos, end - pos);
}

static int fail(struct msg *m, const char *why, size_t at)
{
	snprintf(m->err, sizeof(m->err), "%s at byte %zu", why, at);
	return -EBADMSG;
}

static int decode(const uint8_t *pkt, size_t len, struct msg *m)
{
	size_t pos = NDC_DNS_HDR_LEN;
	uint8_t name[NDC_NAME_MAX];
	size_t nlen, total;

	m->n = 0;
	m->used = 0;
	m->err[0] = 0;
	if (len < NDC_DNS_HDR_LEN)
		return fail(m, "shorter than a header", len);
	m->id = get16(pkt);
	m->flags = get16(pkt + 2);
	for (int i = 0; i < 4; i++)
		m->count[i] = get16(pkt + 4 + 2 * i);
	m->question = pkt + pos;
	for (uint16_t i = 0; i < m->count[0]; i++) {
		if (ndc_name_unpack(pkt, len, &pos, name, &nlen) || pos + 4 > len)
			return fail(m, "bad question", pos);
		pos += 4;
	}
	m->qlen = pos - NDC_DNS_HDR_LEN;
	total = (size_t)m->count[1] + m->count[2] + m->count[3];
	if (total > RR_MAX)
		return fail(m, "too many RRs", pos);
	for (size_t i = 0; i < total; i++) {
		struct rr *rr = &m->rr[m->n++];
		size_t rdlen;

		rr->sec = i < m->count[1] ? 0 : i < (size_t)m->count[1] + m->count[2] ? 1 : 2;
		rr->off = (uint32_t)m->used;
		if (put_name(m, pkt, len, &pos, true) || pos + 10 > len)
			return fail(m, "bad RR owner", pos);
		rr->type = get16(pkt + pos);
		rr->rclass = get16(pkt + pos + 2);
		rr->ttl = get32(pkt + pos + 4);
		rdlen = get16(pkt + pos + 8);
		if (put(m, pkt + pos, 4))
			return fail(m, "too big", pos);
		pos += 10;
		if (pos + rdlen > len)
			return fail(m, "RDATA past the end", pos);
		if (put_rdata(m, pkt, pos + rdlen, pos, rr->type))
			return fail(m, "bad RDATA", pos);
		pos += rdlen;
		rr->len = (uint32_t)(m->used - rr->off);
	}
	if (pos != len)
		return fail(m, "trailing bytes", pos);
	return 0;
}

static const struct msg *sort_msg;

static int rr_cmp(const void *pa, const void *pb)
{
	const struct rr *a = pa, *b = pb;
	size_t n = a->len < b->len ? a->len : b->len;
	int c;

	if (a->sec != b->sec)
		return a->sec - b->sec;
	c = memcmp(sort_msg->arena + a->off, sort_msg->arena + b->off, n);
	if (c)
		return c;
	return a->len < b->len ? -1 : a->len > b->len;
}

static void sort_rrs(struct msg *m)
{
	sort_msg = m;
	qsort(m->rr, m->n, sizeof(m->rr[0]), rr_cmp);
}

static void rr_text(const struct msg *m, const struct rr *rr, char *out, size_t cap)
{
	char name[NDC_NAME_MAX * 4];
	const uint8_t *k = m->arena + rr->off;
	size_t nlen = 0;

	while (nlen < rr->len && k[nlen])
		nlen += (size_t)k[nlen] + 1;
	if (ndc_name_to_text(k, nlen + 1, name, sizeof(name)) < 0)
		snprintf(name, sizeof(name), "?");
	snprintf(out, cap, "%s %.200s type %u class %u TTL %u (%u bytes)",
		 rr->sec == 0	? "answer"
		 : rr->sec == 1 ? "authority"
				: "additional",
		 name, rr->type, rr->rclass, rr->ttl, rr->len);
}

int fz_compare(const uint8_t *query, size_t qlen, const uint8_t *fast, size_t flen,
	       const uint8_t *sock, size_t slen, bool counting_down, char *why, size_t whylen)
{
	static struct msg f, s; /* 2 x 50 kB: not on the stack */
	static const char *const sec[] = {"questions", "answers", "authority RRs",
					  "additional RRs"};
	char a[400], b[400];

	if (decode(fast, flen, &f)) {
		snprintf(why, whylen, "the fast path's reply does not decode: %s", f.err);
		return -1;
	}
	if (decode(sock, slen, &s)) {
		snprintf(why, whylen, "the socket path's reply does not decode: %s", s.err);
		return -1;
	}
	if (f.id != s.id) {
		snprintf(why, whylen, "ID 0x%04x, the socket path's 0x%04x", f.id, s.id);
		return -1;
	}
	if (f.flags != s.flags) {
		snprintf(why, whylen,
			 "header flags 0x%04x (rcode %u), the socket path's 0x%04x "
			 "(rcode %u)",
			 f.flags, f.flags & 15, s.flags, s.flags & 15);
		return -1;
	}
	for (int i = 0; i < 4; i++) {
		if (f.count[i] != s.count[i]) {
			snprintf(why, whylen, "%u %s, the socket path's %u", f.count[i], sec[i],
				 s.count[i]);
			return -1;
		}
	}
	if (f.qlen != s.qlen || memcmp(f.question, s.question, f.qlen)) {
		snprintf(why, whylen, "question section differs from the socket path's");
		return -1;
	}
	if (f.qlen && (qlen < NDC_DNS_HDR_LEN + f.qlen ||
		       memcmp(f.question, query + NDC_DNS_HDR_LEN, f.qlen))) {
		snprintf(why, whylen, "question not echoed as asked (0x20 case included)");
		return -1;
	}
	sort_rrs(&f);
	sort_rrs(&s);
	for (size_t i = 0; i < f.n; i++) {
		const struct rr *x = &f.rr[i], *y = &s.rr[i];
		uint32_t d = x->ttl > y->ttl ? x->ttl - y->ttl : y->ttl - x->ttl;

		if (x->sec != y->sec || x->len != y->len ||
		    memcmp(f.arena + x->off, s.arena + y->off, x->len)) {
			rr_text(&f, x, a, sizeof(a));
			rr_text(&s, y, b, sizeof(b));
			snprintf(why, whylen, "RR sets differ: %s where the socket path has %s", a,
				 b);
			return -1;
		}
		/* OPT's "TTL" is its extended RCODE, version and flags: always exact */
		if (d > (counting_down && x->type != NDC_T_OPT ? 1u : 0u)) {
			rr_text(&f, x, a, sizeof(a));
			snprintf(why, whylen, "TTL %u where the socket path has %u: %s", x->ttl,
				 y->ttl, a);
			return -1;
		}
	}
	return 0;
}
