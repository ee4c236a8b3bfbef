/* SPDX-License-Identifier: MIT */
/*
 * Aliases at the wire level: the target of a CNAME answer, and another name's answer spliced in
 * behind the alias. A precomputed answer's names are compressed against its own question (struct
 * ndc_answer), so records moved into the answer to another question are read back whole and
 * written again by the answer builder. The reader sees the message an answer belongs to without
 * building it: the question name at offset 12, then QTYPE and QCLASS, then the answer's data.
 * Lookups (records_lookup.c) call down to here; nothing here allocates or reads the table.
 */
#include <errno.h>
#include <string.h>

#include "internal.h"

/* The message an answer belongs to, read in place. */
struct vmsg {
	const uint8_t *q; /* question name, at offset NDC_DNS_HDR_LEN */
	size_t qlen;
	const uint8_t *d; /* the answer's data, right after QTYPE and QCLASS */
	size_t dlen;
};

static size_t data_off(const struct vmsg *m)
{
	return NDC_DNS_HDR_LEN + m->qlen + 4;
}

/* The byte at message offset off; -1 where no name can be (header, QTYPE, QCLASS, the end). */
static int vbyte(const struct vmsg *m, size_t off)
{
	if (off >= NDC_DNS_HDR_LEN && off < NDC_DNS_HDR_LEN + m->qlen)
		return m->q[off - NDC_DNS_HDR_LEN];
	if (off >= data_off(m) && off - data_off(m) < m->dlen)
		return m->d[off - data_off(m)];
	return -1;
}

/*
 * The name at message offset *pos, uncompressed, into out (NDC_NAME_MAX bytes); *pos moves past
 * it. Pointers must point backwards (RFC 1035 4.1.4 names earlier data), which also ends any
 * loop. -EBADMSG.
 */
static int vname(const struct vmsg *m, size_t *pos, uint8_t *out, size_t *ret_len)
{
	size_t p = *pos, len = 0, after = 0;

	for (;;) {
		int c = vbyte(m, p);

		if (c < 0)
			return -EBADMSG;
		if ((c & 0xc0) == 0xc0) {
			int lo = vbyte(m, p + 1);
			size_t to = (size_t)(c & 0x3f) << 8 | (size_t)(lo < 0 ? 0 : lo);

			if (lo < 0 || to >= p)
				return -EBADMSG;
			if (!after)
				after = p + 2;
			p = to;
			continue;
		}
		if (c & 0xc0 || len + 1u + (size_t)c > NDC_NAME_MAX)
			return -EBADMSG;
		out[len++] = (uint8_t)c;
		if (!c)
			break;
		for (int i = 1; i <= c; i++) {
			int b = vbyte(m, p + (size_t)i);

			if (b < 0)
				return -EBADMSG;
			out[len++] = (uint8_t)b;
		}
		p += 1u + (size_t)c;
	}
	*pos = after ? after : p + 1;
	*ret_len = len;
	return 0;
}

int ndc_rec_cname_target(const struct ndc_answer *a, const uint8_t *qname, size_t qlen,
			 uint8_t *out, size_t *ret_len)
{
	const struct vmsg m = {.q = qname, .qlen = qlen, .d = a->data, .dlen = a->len};
	size_t pos = data_off(&m), end = pos + a->len;
	uint8_t owner[NDC_NAME_MAX];
	size_t ol;

	if (!a->ancount || vname(&m, &pos, owner, &ol) || pos + 10 > end ||
	    ndc_get16(a->data + pos - data_off(&m)) != NDC_T_CNAME)
		return -EBADMSG;
	pos += 10;
	return vname(&m, &pos, out, ret_len);
}

int ndc_rec_splice(struct ndc_ab *b, const uint8_t *qname, size_t qlen, const struct ndc_answer *a,
		   unsigned max_an, bool additional)
{
	const struct vmsg m = {.q = qname, .qlen = qlen, .d = a->data, .dlen = a->len};
	size_t pos = data_off(&m), end = pos + a->len;
	bool whole = max_an >= a->ancount;
	unsigned n = (unsigned)a->ancount + (whole ? a->nscount : 0) +
		     (whole && additional ? a->arcount : 0);

	for (unsigned i = 0; i < n; i++) {
		enum ndc_section sec = i < a->ancount		     ? NDC_SEC_ANSWER
				       : i < a->ancount + a->nscount ? NDC_SEC_AUTHORITY
								     : NDC_SEC_ADDITIONAL;
		bool take = sec != NDC_SEC_ANSWER || i < max_an;
		uint8_t owner[NDC_NAME_MAX], rd[6 + 2 * NDC_NAME_MAX + 20];
		size_t ol, rl = 0, nl, pre = 0, post = 0, rdend;
		int names = 0;

		if (vname(&m, &pos, owner, &ol) || pos + 10 > end)
			return -EBADMSG;
		const uint8_t *f = a->data + pos - data_off(&m);
		uint16_t type = ndc_get16(f), rdlen = ndc_get16(f + 8);

		pos += 10;
		rdend = pos + rdlen;
		if (rdend > end)
			return -EBADMSG;
		/* RFC 3597 4: the types whose RDATA names may be compressed, and SRV's. */
		switch (type) {
		case NDC_T_CNAME:
		case NDC_T_NS:
		case NDC_T_PTR:
			names = 1;
			break;
		case NDC_T_SOA:
			names = 2;
			post = 20;
			break;
		case NDC_T_SRV:
			pre = 6;
			names = 1;
			break;
		}
		if (pre > rdlen)
			return -EBADMSG;
		memcpy(rd, f + 10, pre);
		rl = pre;
		pos += pre;
		for (int k = 0; k < names; k++) {
			if (vname(&m, &pos, rd + rl, &nl))
				return -EBADMSG;
			rl += nl;
		}
		if (!names) {
			rl = rdlen; /* no names: the RDATA as it is */
			pos = rdend;
		} else if (pos + post != rdend) {
			return -EBADMSG;
		} else {
			memcpy(rd + rl, a->data + pos - data_off(&m), post);
			rl += post;
			pos = rdend;
		}
		if (take)
			ndc_ab_rr(b, sec, owner, ol, type, ndc_get16(f + 2), ndc_get32(f + 4),
				  names ? rd : f + 10, rl);
	}
	return 0;
}
