// SPDX-License-Identifier: MIT
/*
 * DNS wire format: names, query parsing, the answer builder, upstream response parsing and reply
 * assembly. Everything here can run per query: no allocation, no logging, no syscalls.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <ndc/abi.h>
#include <ndc/dns_wire.h>

/* A 255-byte name has at most 127 labels: any walk taking more steps is a pointer loop. */
#define NAME_STEPS_MAX 128
#define PTR_BITS 0xc0
#define PTR_LIMIT 0x4000 /* 14-bit offsets (RFC 1035 4.1.4) */
#define OPT_RR_LEN 11	 /* root owner, type, class, ttl, rdlen 0 */
#define T_SIG 24
#define T_TSIG 250

static inline uint8_t lower(uint8_t c)
{
	return c >= 'A' && c <= 'Z' ? (uint8_t)(c + ('a' - 'A')) : c;
}

/* ---------------------------------------------------------------------------------------------
 * Names.
 */

int ndc_name_check(const uint8_t *name, size_t max, size_t *ret_len)
{
	size_t pos = 0;

	for (;;) {
		/* A label starting at 255 could not be followed by the root within 255 bytes. */
		if (pos >= max || pos >= NDC_NAME_MAX)
			return -EINVAL;
		if (name[pos] == 0)
			break;
		/* 0x40 and up: compression pointers and the obsolete label types (RFC 6891 5) */
		if (name[pos] > NDC_LABEL_MAX)
			return -EINVAL;
		pos += 1 + name[pos];
	}
	*ret_len = pos + 1;
	return 0;
}

int ndc_name_from_text(const char *text, uint8_t *out, size_t cap, size_t *ret_len)
{
	size_t tlen = strlen(text), i = 0, o = 0;

	if (tlen == 0)
		return -EINVAL;
	if (tlen == 1 && text[0] == '.')
		tlen = 0; /* the root: no labels */
	while (i < tlen) {
		size_t start = i, l;

		while (i < tlen && text[i] != '.') {
			/* Escapes are not supported: refuse rather than misread "a\.b". */
			if (text[i] == '\\')
				return -EINVAL;
			i++;
		}
		l = i - start;
		if (l == 0 || l > NDC_LABEL_MAX || o + 1 + l + 1 > NDC_NAME_MAX)
			return -EINVAL;
		if (o + 1 + l > cap)
			return -ENOSPC;
		out[o] = (uint8_t)l;
		memcpy(out + o + 1, text + start, l);
		o += 1 + l;
		if (i < tlen)
			i++; /* the dot; a trailing one ends the loop */
	}
	if (o + 1 > cap)
		return -ENOSPC;
	out[o++] = 0;
	*ret_len = o;
	return 0;
}

static bool text_put(char *out, size_t cap, size_t *o, const char *s, size_t n)
{
	if (cap - *o < n + 1) /* keep room for the NUL */
		return false;
	memcpy(out + *o, s, n);
	*o += n;
	return true;
}

int ndc_name_to_text(const uint8_t *name, size_t len, char *out, size_t cap)
{
	size_t nlen, pos = 0, o = 0;

	if (ndc_name_check(name, len, &nlen) < 0)
		return -EINVAL;
	if (cap == 0)
		return -ENOSPC;
	if (name[0] == 0 && !text_put(out, cap, &o, ".", 1))
		return -ENOSPC;
	while (name[pos]) {
		size_t end = pos + 1 + name[pos];

		for (pos++; pos < end; pos++) {
			uint8_t c = name[pos];
			char esc[8];
			bool ok;

			/* RFC 1035 5.1 presentation format */
			if (c == '.' || c == '\\') {
				esc[0] = '\\';
				esc[1] = (char)c;
				ok = text_put(out, cap, &o, esc, 2);
			} else if (c < '!' || c > '~') {
				snprintf(esc, sizeof(esc), "\\%03u", c);
				ok = text_put(out, cap, &o, esc, 4);
			} else {
				ok = text_put(out, cap, &o, (const char *)&c, 1);
			}
			if (!ok)
				return -ENOSPC;
		}
		if (!text_put(out, cap, &o, ".", 1))
			return -ENOSPC;
	}
	out[o] = '\0';
	return 0;
}

void ndc_name_lower(uint8_t *dst, const uint8_t *src, size_t len)
{
	/* Label lengths are <= 63, below 'A': lowering the whole wire form is safe. */
	for (size_t i = 0; i < len; i++)
		dst[i] = lower(src[i]);
}

bool ndc_name_in_zone(const uint8_t *name, size_t len, const uint8_t *zone, size_t zlen)
{
	size_t pos = 0;

	for (;;) {
		if (len - pos < zlen)
			return false;
		if (len - pos == zlen)
			return memcmp(name + pos, zone, zlen) == 0;
		if (name[pos] == 0 || name[pos] > NDC_LABEL_MAX)
			return false;
		pos += 1 + name[pos];
		if (pos > len)
			return false;
	}
}

int ndc_name_labels(const uint8_t *name, size_t len)
{
	size_t nlen, pos = 0;
	int n = 0;

	if (ndc_name_check(name, len, &nlen) < 0)
		return -EINVAL;
	for (; name[pos]; pos += 1 + name[pos])
		n++;
	return n;
}

static bool name_eq_ci(const uint8_t *a, const uint8_t *b, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (lower(a[i]) != lower(b[i]))
			return false;
	return true;
}

int ndc_name_unpack(const uint8_t *msg, size_t msglen, size_t *pos, uint8_t *out, size_t *ret_len)
{
	size_t p = *pos, seg = *pos, next = 0, o = 0;
	int hops = 0;

	for (;;) {
		uint8_t c;

		if (p >= msglen)
			return -EBADMSG;
		c = msg[p];
		if ((c & PTR_BITS) == PTR_BITS) {
			size_t t;

			if (msglen - p < 2)
				return -EBADMSG;
			t = (size_t)(c & ~PTR_BITS) << 8 | msg[p + 1];
			/*
			 * Only strictly before the run of labels being read, and never into the
			 * header: every jump goes further back, so no loop can form.
			 */
			if (t >= seg || t < NDC_DNS_HDR_LEN || ++hops > NAME_STEPS_MAX)
				return -EBADMSG;
			if (!next)
				next = p + 2;
			p = seg = t;
			continue;
		}
		if (c > NDC_LABEL_MAX)
			return -EBADMSG;
		if (c == 0) {
			out[o++] = 0;
			break;
		}
		if (o + 1 + c + 1 > NDC_NAME_MAX || msglen - p < 1 + (size_t)c)
			return -EBADMSG;
		memcpy(out + o, msg + p, 1 + (size_t)c);
		o += 1 + (size_t)c;
		p += 1 + (size_t)c;
	}
	*pos = next ? next : p + 1;
	*ret_len = o;
	return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Queries.
 */

static int parse_opt(const uint8_t *pkt, size_t len, size_t *pos, struct ndc_query *q)
{
	size_t p = *pos;
	uint32_t ttl;
	uint16_t rdlen;

	/* RFC 6891 6.1.2: the owner is the root; our only additional RR may be the OPT. */
	if (p >= len || pkt[p] != 0)
		return -EBADMSG;
	p++;
	if (len - p < 10 || ndc_get16(pkt + p) != NDC_T_OPT)
		return -EBADMSG;
	ttl = ndc_get32(pkt + p + 4);
	rdlen = ndc_get16(pkt + p + 8);
	p += 10;
	if (len - p < rdlen)
		return -EBADMSG;
	/* RFC 6891 6.1.2: {code, length, data} options filling RDLEN exactly */
	for (size_t o = 0; o < rdlen;) {
		if (rdlen - o < 4 || rdlen - o - 4 < ndc_get16(pkt + p + o + 2))
			return -EBADMSG;
		o += 4 + ndc_get16(pkt + p + o + 2);
	}
	q->has_edns = true;
	q->udp_size = ndc_get16(pkt + p - 8);
	q->edns_version = (uint8_t)(ttl >> 16);
	q->do_bit = ttl & NDC_EDNS_DO;
	q->edns_opts_off = (uint16_t)p;
	q->edns_opts_len = rdlen;
	*pos = p + rdlen;
	return 0;
}

static int parse_query_body(const uint8_t *pkt, size_t len, struct ndc_query *q)
{
	uint16_t ar = ndc_get16(pkt + 10);
	size_t pos = NDC_DNS_HDR_LEN, nlen;
	int err;

	q->rcode = NDC_RCODE_FORMERR;
	if (len > NDC_MSG_MAX || ndc_get16(pkt + 4) != 1)
		return -EBADMSG;
	/* Nothing precedes the question that a pointer could name: any pointer is malformed. */
	if (ndc_name_check(pkt + pos, len - pos, &nlen) < 0 || len - pos - nlen < 4)
		return -EBADMSG;
	memcpy(q->qname, pkt + pos, nlen);
	ndc_name_lower(q->lname, q->qname, nlen);
	q->qname_len = (uint8_t)nlen;
	pos += nlen;
	q->qtype = ndc_get16(pkt + pos);
	q->qclass = ndc_get16(pkt + pos + 2);
	pos += 4;
	q->question_ok = true;
	/* A query has nothing to say in answer or authority; additional holds at most the OPT. */
	if (ndc_get16(pkt + 6) || ndc_get16(pkt + 8) || ar > 1)
		return -EBADMSG;
	if (ar) {
		err = parse_opt(pkt, len, &pos, q);
		if (err)
			return err;
	}
	if (pos != len)
		return -EBADMSG;
	/* RFC 6891 6.1.3: BADVERS before looking at anything else in the query */
	if (q->edns_version > 0) {
		q->rcode = NDC_RCODE_BADVERS;
		return -ENOTSUP;
	}
	/* Questions for data only: the rule the fast path passes the rest by (ndc_qtype_verdict).
	 */
	switch (ndc_qtype_verdict(q->qtype)) {
	case NDC_QTYPE_REFUSED:
		q->rcode = NDC_RCODE_REFUSED;
		return -EPERM;
	case NDC_QTYPE_FORMERR:
		q->rcode = NDC_RCODE_FORMERR;
		return -EDOM;
	}
	q->rcode = NDC_RCODE_NOERROR;
	return 0;
}

int ndc_dns_parse_query(const uint8_t *pkt, size_t len, struct ndc_query *q)
{
	int err;

	q->hdr_ok = false;
	q->question_ok = false;
	q->has_edns = false;
	q->do_bit = false;
	q->edns_version = 0;
	q->udp_size = 0;
	q->edns_opts_off = 0;
	q->edns_opts_len = 0;
	q->qname_len = 0;
	q->qtype = 0;
	q->qclass = 0;
	q->rcode = NDC_RCODE_FORMERR;
	if (len < NDC_DNS_HDR_LEN)
		return -EPROTO;
	q->id = ndc_get16(pkt);
	q->flags = ndc_get16(pkt + 2);
	q->hdr_ok = true;
	/* Never answer a response: two servers could bounce replies forever. */
	if (q->flags & NDC_F_QR)
		return -EPROTO;
	/* Parsed even for other opcodes, so the NOTIMP reply can echo what it can. */
	err = parse_query_body(pkt, len, q);
	if (q->flags & NDC_F_OPCODE_MASK) {
		q->rcode = NDC_RCODE_NOTIMP;
		return -EOPNOTSUPP;
	}
	return err;
}

uint16_t ndc_dns_udp_limit(const struct ndc_query *q)
{
	/* RFC 6891 6.2.3: advertised sizes below 512 mean 512 */
	if (!q->has_edns || q->udp_size < NDC_UDP_MIN)
		return NDC_UDP_MIN;
	return q->udp_size > NDC_EDNS_UDP_MAX ? NDC_EDNS_UDP_MAX : q->udp_size;
}

static void put_opt(struct ndc_wbuf *w, uint16_t udp_size, uint8_t ext_rcode, bool do_bit)
{
	ndc_wbuf_u8(w, 0);
	ndc_wbuf_u16(w, NDC_T_OPT);
	ndc_wbuf_u16(w, udp_size);
	/* RFC 6891 6.1.3: extended RCODE, version 0, DO (RFC 3225 3: echoed) */
	ndc_wbuf_u32(w, (uint32_t)ext_rcode << 24 | (do_bit ? NDC_EDNS_DO : 0));
	ndc_wbuf_u16(w, 0);
}

static void put_header(struct ndc_wbuf *w, uint16_t id, uint16_t flags, uint16_t qd, uint16_t an,
		       uint16_t ns, uint16_t ar)
{
	ndc_wbuf_u16(w, id);
	ndc_wbuf_u16(w, flags);
	ndc_wbuf_u16(w, qd);
	ndc_wbuf_u16(w, an);
	ndc_wbuf_u16(w, ns);
	ndc_wbuf_u16(w, ar);
}

int ndc_dns_write_query(uint16_t id, const uint8_t *name, size_t nlen, uint16_t qtype,
			uint16_t qclass, uint16_t udp_size, uint8_t *out, size_t cap,
			size_t *ret_len)
{
	struct ndc_wbuf w;
	size_t l;

	if (ndc_name_check(name, nlen, &l) < 0 || l != nlen)
		return -EINVAL;
	ndc_wbuf_init(&w, out, cap);
	put_header(&w, id, NDC_F_RD, 1, 0, 0, udp_size ? 1 : 0);
	ndc_wbuf_bytes(&w, name, nlen);
	ndc_wbuf_u16(&w, qtype);
	ndc_wbuf_u16(&w, qclass);
	if (udp_size)
		put_opt(&w, udp_size, 0, false);
	if (w.err)
		return w.err;
	*ret_len = w.len;
	return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Answer builder.
 */

/*
 * RDATA holding domain names: fixed bytes, names, fixed bytes. RFC 3597 4: only the RFC 1035 types
 * may carry compressed names, and we compress only the common ones; the rest is listed so upstream
 * responses from old servers that compressed them anyway (RFC 2052 SRV, ...) are decompressed.
 */
struct rdata_layout {
	uint16_t type;
	uint8_t pre;
	uint8_t names;
	uint8_t post;
	bool compress;
};

/* clang-format off */
static const struct rdata_layout layouts[] = {
	{NDC_T_NS, 0, 1, 0, true},
	{3 /* MD */, 0, 1, 0, false},
	{4 /* MF */, 0, 1, 0, false},
	{NDC_T_CNAME, 0, 1, 0, true},
	{NDC_T_SOA, 0, 2, 20, true},
	{7 /* MB */, 0, 1, 0, false},
	{8 /* MG */, 0, 1, 0, false},
	{9 /* MR */, 0, 1, 0, false},
	{NDC_T_PTR, 0, 1, 0, true},
	{14 /* MINFO */, 0, 2, 0, false},
	{NDC_T_MX, 2, 1, 0, true},
	{17 /* RP */, 0, 2, 0, false},
	{18 /* AFSDB */, 2, 1, 0, false},
	{21 /* RT */, 2, 1, 0, false},
	{26 /* PX */, 2, 2, 0, false},
	{NDC_T_SRV, 6, 1, 0, false},
	{36 /* KX */, 2, 1, 0, false},
	{NDC_T_DNAME, 0, 1, 0, false},
};
/* clang-format on */

#define RDATA_NAMES_MAX (6 + 2 * NDC_NAME_MAX + 20) /* the largest layout, uncompressed */

static const struct rdata_layout *layout_of(uint16_t type)
{
	for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++)
		if (layouts[i].type == type)
			return &layouts[i];
	return NULL;
}

static bool rdata_valid(const struct rdata_layout *L, const uint8_t *rd, size_t rdlen)
{
	size_t pos = L->pre, l;

	if (rdlen < pos)
		return false;
	for (int i = 0; i < L->names; i++) {
		if (ndc_name_check(rd + pos, rdlen - pos, &l) < 0)
			return false;
		pos += l;
	}
	return rdlen - pos == L->post;
}

static size_t ab_data_off(const struct ndc_ab *b)
{
	return NDC_DNS_HDR_LEN + b->a->qname_len + 4;
}

static uint8_t *ab_reserve(struct ndc_ab *b, size_t n)
{
	uint8_t *p;

	if (b->err)
		return NULL;
	if (b->cap - b->a->len < n) {
		b->err = -ENOSPC;
		return NULL;
	}
	p = b->a->data + b->a->len;
	b->a->len = (uint16_t)(b->a->len + n);
	return p;
}

static void ab_bytes(struct ndc_ab *b, const uint8_t *src, size_t n)
{
	uint8_t *p = ab_reserve(b, n);

	if (p && n)
		memcpy(p, src, n);
}

/* The reply's byte at message offset off, as far as the builder knows it; -1 outside. */
static int ab_byte(const struct ndc_ab *b, size_t off)
{
	size_t doff = ab_data_off(b);

	if (off >= NDC_DNS_HDR_LEN && off < (size_t)NDC_DNS_HDR_LEN + b->a->qname_len)
		return b->qname[off - NDC_DNS_HDR_LEN];
	if (off >= doff && off - doff < b->a->len)
		return b->a->data[off - doff];
	return -1;
}

/* Does the (possibly compressed) name at message offset off equal name, ignoring case? */
static bool ab_name_eq(const struct ndc_ab *b, size_t off, const uint8_t *name)
{
	size_t n = 0;

	for (int steps = 0; steps < 2 * NAME_STEPS_MAX; steps++) {
		int c = ab_byte(b, off), x;

		if (c < 0)
			return false;
		if ((c & PTR_BITS) == PTR_BITS) {
			x = ab_byte(b, off + 1);
			if (x < 0)
				return false;
			off = (size_t)(c & ~PTR_BITS) << 8 | (size_t)x;
			continue;
		}
		if (c != name[n])
			return false;
		if (c == 0)
			return true;
		for (int k = 1; k <= c; k++) {
			x = ab_byte(b, off + k);
			if (x < 0 || lower((uint8_t)x) != lower(name[n + k]))
				return false;
		}
		off += 1 + (size_t)c;
		n += 1 + (size_t)c;
	}
	return false;
}

/* Writes a checked name; with compress, points at the longest suffix already in the message. */
static void ab_name(struct ndc_ab *b, const uint8_t *name, bool compress)
{
	size_t pos = 0;

	while (name[pos]) {
		if (compress) {
			size_t off;

			for (int i = 0; i < b->n_ptrs; i++) {
				if (ab_name_eq(b, b->ptrs[i], name + pos)) {
					uint8_t ptr[2];

					ndc_put16(ptr, (uint16_t)(0xc000 | b->ptrs[i]));
					ab_bytes(b, ptr, 2);
					return;
				}
			}
			off = ab_data_off(b) + b->a->len;
			if (b->n_ptrs < NDC_AB_MAX_PTRS && off < PTR_LIMIT && !b->err)
				b->ptrs[b->n_ptrs++] = (uint16_t)off;
		}
		ab_bytes(b, name + pos, 1 + (size_t)name[pos]);
		pos += 1 + (size_t)name[pos];
	}
	ab_bytes(b, name + pos, 1);
}

void ndc_ab_init(struct ndc_ab *b, struct ndc_answer *a, size_t data_cap, const uint8_t *qname,
		 size_t qname_len)
{
	size_t l;

	memset(a, 0, sizeof(*a));
	b->a = a;
	b->cap = data_cap > UINT16_MAX ? UINT16_MAX : data_cap;
	b->qname = qname;
	b->err = 0;
	b->section = NDC_SEC_ANSWER;
	b->min_ttl = 0;
	b->have_ttl = false;
	b->n_ptrs = 0;
	if (ndc_name_check(qname, qname_len, &l) < 0 || l != qname_len) {
		b->err = -EINVAL;
		return;
	}
	a->qname_len = (uint8_t)qname_len;
	for (size_t pos = 0; qname[pos] && b->n_ptrs < NDC_AB_MAX_PTRS; pos += 1 + qname[pos])
		b->ptrs[b->n_ptrs++] = (uint16_t)(NDC_DNS_HDR_LEN + pos);
}

void ndc_ab_rr(struct ndc_ab *b, enum ndc_section sec, const uint8_t *owner, size_t owner_len,
	       uint16_t type, uint16_t rclass, uint32_t ttl, const uint8_t *rdata, size_t rdlen)
{
	const struct rdata_layout *L = layout_of(type);
	size_t l, rdstart;
	uint8_t *fixed;

	if (b->err)
		return;
	if ((int)sec < b->section || (int)sec > NDC_SEC_ADDITIONAL ||
	    ndc_name_check(owner, owner_len, &l) < 0 || l != owner_len || rdlen > UINT16_MAX ||
	    (L && !rdata_valid(L, rdata, rdlen))) {
		b->err = -EINVAL;
		return;
	}
	b->section = (int)sec;
	ab_name(b, owner, true);
	fixed = ab_reserve(b, 10);
	if (!fixed)
		return;
	ndc_put16(fixed, type);
	ndc_put16(fixed + 2, rclass);
	ndc_put32(fixed + 4, ttl);
	rdstart = b->a->len;
	if (L) {
		size_t pos = L->pre;

		ab_bytes(b, rdata, L->pre);
		for (int i = 0; i < L->names; i++) {
			ndc_name_check(rdata + pos, rdlen - pos, &l);
			ab_name(b, rdata + pos, L->compress);
			pos += l;
		}
		ab_bytes(b, rdata + pos, L->post);
	} else {
		ab_bytes(b, rdata, rdlen);
	}
	if (b->err)
		return;
	ndc_put16(fixed + 8, (uint16_t)(b->a->len - rdstart));
	if (sec == NDC_SEC_ANSWER)
		b->a->ancount++;
	else if (sec == NDC_SEC_AUTHORITY)
		b->a->nscount++;
	else
		b->a->arcount++;
	if (!b->have_ttl || ttl < b->min_ttl)
		b->min_ttl = ttl;
	b->have_ttl = true;
}

int ndc_ab_finish(struct ndc_ab *b, uint8_t rcode, bool aa)
{
	if (b->err)
		return b->err;
	b->a->rcode = rcode & NDC_F_RCODE_MASK;
	b->a->aa = aa;
	b->a->min_ttl = b->have_ttl ? b->min_ttl : 0;
	return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Upstream responses.
 */

/* One RR at msg[*pos] into the builder: 0, -EBADMSG, or the builder's sticky error. */
static int response_rr(struct ndc_ab *b, const uint8_t *msg, size_t len, size_t *pos,
		       enum ndc_section sec)
{
	uint8_t owner[NDC_NAME_MAX], rd[RDATA_NAMES_MAX];
	const struct rdata_layout *L;
	size_t p = *pos, olen, end, rdl = 0;
	uint16_t type, rclass, rdlen;
	uint32_t ttl;

	if (ndc_name_unpack(msg, len, &p, owner, &olen) < 0 || len - p < 10)
		return -EBADMSG;
	type = ndc_get16(msg + p);
	rclass = ndc_get16(msg + p + 2);
	ttl = ndc_get32(msg + p + 4);
	rdlen = ndc_get16(msg + p + 8);
	p += 10;
	/* RFC 2181 8: a TTL with the top bit set means zero, not 68 years */
	if (ttl & 0x80000000u && type != NDC_T_OPT)
		ttl = 0;
	if (len - p < rdlen)
		return -EBADMSG;
	end = p + rdlen;
	*pos = end;
	if (type == NDC_T_OPT || type == T_TSIG || (type == T_SIG && sec == NDC_SEC_ADDITIONAL)) {
		/* Hop-by-hop (RFC 6891 6.1.1, RFC 8945 5.3): never cached, never forwarded. */
		if (sec != NDC_SEC_ADDITIONAL)
			return -EBADMSG;
		/* An extended RCODE (BADVERS, BADCOOKIE) does not fit in ndc_answer's 4 bits. */
		if (type == NDC_T_OPT && ttl >> 24)
			return -EBADMSG;
		return 0;
	}
	L = layout_of(type);
	if (L) {
		if (rdlen < L->pre)
			return -EBADMSG;
		memcpy(rd, msg + p, L->pre);
		rdl = L->pre;
		p += L->pre;
		for (int i = 0; i < L->names; i++) {
			size_t l;

			/* Bounded by end: a name's own labels must stay inside its RDATA. */
			if (ndc_name_unpack(msg, end, &p, rd + rdl, &l) < 0)
				return -EBADMSG;
			rdl += l;
		}
		if (end - p != L->post)
			return -EBADMSG;
		memcpy(rd + rdl, msg + p, L->post);
		rdl += L->post;
	}
	ndc_ab_rr(b, sec, owner, olen, type, rclass, ttl, L ? rd : msg + end - rdlen,
		  L ? rdl : rdlen);
	return b->err == -EINVAL ? -EBADMSG : b->err;
}

int ndc_dns_parse_response(const uint8_t *msg, size_t len, const uint8_t *lname, size_t nlen,
			   uint16_t qtype, uint16_t qclass, struct ndc_answer *out, size_t cap,
			   bool *ret_tc)
{
	uint8_t qname[NDC_NAME_MAX];
	size_t pos = NDC_DNS_HDR_LEN, l;
	struct ndc_ab b;
	uint16_t flags, an, ns, ar;
	bool tc;
	int err;

	*ret_tc = false;
	if (len < NDC_DNS_HDR_LEN)
		return -EBADMSG;
	flags = ndc_get16(msg + 2);
	an = ndc_get16(msg + 6);
	ns = ndc_get16(msg + 8);
	ar = ndc_get16(msg + 10);
	if (!(flags & NDC_F_QR) || (flags & NDC_F_OPCODE_MASK) || ndc_get16(msg + 4) != 1)
		return -EBADMSG;
	tc = flags & NDC_F_TC;
	*ret_tc = tc;
	if (ndc_name_unpack(msg, len, &pos, qname, &l) < 0 || l != nlen ||
	    !name_eq_ci(qname, lname, l) || len - pos < 4 || ndc_get16(msg + pos) != qtype ||
	    ndc_get16(msg + pos + 2) != qclass)
		return -EBADMSG;
	pos += 4;
	ndc_ab_init(&b, out, cap, lname, nlen);
	if (b.err)
		return -EINVAL;
	for (uint32_t i = 0; i < (uint32_t)an + ns + ar; i++) {
		enum ndc_section sec = NDC_SEC_ADDITIONAL;

		if (i < an)
			sec = NDC_SEC_ANSWER;
		else if (i < (uint32_t)an + ns)
			sec = NDC_SEC_AUTHORITY;
		err = response_rr(&b, msg, len, &pos, sec);
		if (err == -EBADMSG && tc)
			break; /* cut short: the caller retries over TCP anyway */
		if (err)
			return err;
	}
	if (pos != len && !tc)
		return -EBADMSG;
	return ndc_ab_finish(&b, flags & NDC_F_RCODE_MASK, flags & NDC_F_AA);
}

/* ---------------------------------------------------------------------------------------------
 * Replies.
 */

/* Skips an RR in answer data, where names may be compressed; returns its TTL's offset. */
static int data_skip_rr(const uint8_t *d, size_t len, size_t *pos, size_t *ret_ttl_off)
{
	size_t p = *pos;
	uint8_t c;

	for (;;) {
		if (p >= len)
			return -EINVAL;
		if ((d[p] & PTR_BITS) == PTR_BITS) {
			p += 2;
			break;
		}
		c = d[p];
		if (c > NDC_LABEL_MAX)
			return -EINVAL;
		p += 1 + (size_t)c;
		if (c == 0)
			break;
	}
	if (p > len || len - p < 10 || len - p - 10 < ndc_get16(d + p + 8))
		return -EINVAL;
	*ret_ttl_off = p + 4;
	*pos = p + 10 + ndc_get16(d + p + 8);
	return 0;
}

/* Offset in a->data where the first n RRs end, or -EINVAL for inconsistent data. */
static int data_rrs_end(const struct ndc_answer *a, uint32_t n, size_t *ret_off)
{
	size_t pos = 0, ttl_off;

	for (uint32_t i = 0; i < n; i++)
		if (data_skip_rr(a->data, a->len, &pos, &ttl_off) < 0)
			return -EINVAL;
	*ret_off = pos;
	return 0;
}

/* Rewrites the TTLs of the n RRs in d (a copy of answer data): the entry's age off, or all
 * set to stale. */
static int data_adjust_ttls(uint8_t *d, size_t len, uint32_t n, uint32_t sub, uint32_t stale)
{
	size_t pos = 0, ttl_off;

	for (uint32_t i = 0; i < n; i++) {
		uint32_t ttl;

		if (data_skip_rr(d, len, &pos, &ttl_off) < 0)
			return -EINVAL;
		ttl = ndc_get32(d + ttl_off);
		ttl = ttl > sub ? ttl - sub : 0;
		if (stale)
			ttl = stale;
		ndc_put32(d + ttl_off, ttl);
	}
	return 0;
}

int ndc_answer_cap_ttls(struct ndc_answer *a, uint32_t cap)
{
	uint32_t n = (uint32_t)a->ancount + a->nscount + a->arcount, min = UINT32_MAX;
	size_t pos = 0, ttl_off;

	for (uint32_t i = 0; i < n; i++) {
		uint32_t ttl;

		if (data_skip_rr(a->data, a->len, &pos, &ttl_off) < 0)
			return -EINVAL;
		ttl = ndc_get32(a->data + ttl_off);
		if (ttl > cap) {
			ttl = cap;
			ndc_put32(a->data + ttl_off, ttl);
		}
		if (ttl < min)
			min = ttl;
	}
	a->min_ttl = n ? min : 0;
	return 0;
}

int ndc_answer_cache_ttl(const struct ndc_answer *a, uint16_t qtype, uint32_t *ret_ttl)
{
	uint32_t n = (uint32_t)a->ancount + a->nscount, chain_ttl = UINT32_MAX;
	bool chain_only =
	    a->ancount > 0 && qtype != NDC_T_CNAME && qtype != NDC_T_DNAME && qtype != NDC_T_ANY;
	size_t pos = 0, ttl_off;

	if (a->rcode != NDC_RCODE_NOERROR && a->rcode != NDC_RCODE_NXDOMAIN)
		return -EINVAL;
	/* The answer section: a positive answer has a record that is not an alias. */
	for (uint32_t i = 0; i < a->ancount; i++) {
		uint16_t type;
		uint32_t ttl;

		if (data_skip_rr(a->data, a->len, &pos, &ttl_off) < 0)
			return -EINVAL;
		type = ndc_get16(a->data + ttl_off - 4);
		ttl = ndc_get32(a->data + ttl_off);
		if (type != NDC_T_CNAME && type != NDC_T_DNAME)
			chain_only = false;
		if (ttl < chain_ttl)
			chain_ttl = ttl;
	}
	if (a->rcode == NDC_RCODE_NOERROR && a->ancount && !chain_only) {
		*ret_ttl = a->min_ttl;
		return 0;
	}
	/* Negative (RFC 2308 5): min(SOA TTL, SOA MINIMUM) of the authority's SOA. */
	for (uint32_t i = a->ancount; i < n; i++) {
		uint32_t ttl, minimum;

		if (data_skip_rr(a->data, a->len, &pos, &ttl_off) < 0)
			return -EINVAL;
		/* Two names of at least one byte each, then five 32-bit fields: MINIMUM last. */
		if (ndc_get16(a->data + ttl_off - 4) != NDC_T_SOA ||
		    ndc_get16(a->data + ttl_off + 4) < 22)
			continue;
		ttl = ndc_get32(a->data + ttl_off);
		minimum = ndc_get32(a->data + pos - 4);
		ttl = ttl < minimum ? ttl : minimum;
		/* RFC 2308 2.2.1: a NODATA behind aliases; the aliases live no longer than theirs.
		 */
		*ret_ttl = ttl < chain_ttl ? ttl : chain_ttl;
		return 1;
	}
	if (chain_only && a->rcode == NDC_RCODE_NOERROR) {
		/* The aliases alone, no SOA: an answer the upstream gave as is; kept as positive.
		 */
		*ret_ttl = a->min_ttl;
		return 0;
	}
	return -ENOENT;
}

static void put_question(struct ndc_wbuf *w, const struct ndc_query *q)
{
	ndc_wbuf_bytes(w, q->qname, q->qname_len);
	ndc_wbuf_u16(w, q->qtype);
	ndc_wbuf_u16(w, q->qclass);
}

int ndc_dns_write_reply(const struct ndc_query *q, const struct ndc_answer *a, uint32_t ttl_sub,
			uint32_t ttl_stale, size_t limit, uint8_t *out, size_t cap, size_t *ret_len)
{
	size_t fixed = NDC_DNS_HDR_LEN + q->qname_len + 4 + (q->has_edns ? OPT_RR_LEN : 0);
	size_t dlen = a->len;
	uint16_t flags = NDC_F_QR | NDC_F_RA | (q->flags & (NDC_F_RD | NDC_F_CD)) |
			 (a->aa ? NDC_F_AA : 0) | (a->rcode & NDC_F_RCODE_MASK);
	uint16_t an = a->ancount, ns = a->nscount, ar = a->arcount;
	struct ndc_wbuf w;

	if (a->qname_len != q->qname_len)
		return -EINVAL;
	if (fixed + dlen > limit) {
		/* RFC 2181 9: leaving out additional data needs no TC */
		if (data_rrs_end(a, (uint32_t)an + ns, &dlen) < 0)
			return -EINVAL;
		ar = 0;
	}
	if (fixed + dlen > limit) {
		/* RFC 1035 4.2.1, RFC 2181 9: TC and nothing partial; the client retries on TCP. */
		flags |= NDC_F_TC;
		dlen = 0;
		an = ns = 0;
		if (fixed > limit)
			return -ENOSPC;
	}
	ndc_wbuf_init(&w, out, cap);
	put_header(&w, q->id, flags, 1, an, ns, (uint16_t)(ar + (q->has_edns ? 1 : 0)));
	put_question(&w, q);
	if (ndc_wbuf_room(&w, dlen)) {
		uint8_t *d = out + w.len;

		memcpy(d, a->data, dlen);
		w.len += dlen;
		if ((ttl_sub || ttl_stale) &&
		    data_adjust_ttls(d, dlen, (uint32_t)an + ns + ar, ttl_sub, ttl_stale) < 0)
			return -EINVAL;
	}
	if (q->has_edns)
		put_opt(&w, NDC_EDNS_UDP_MAX, 0, q->do_bit);
	if (w.err)
		return w.err;
	*ret_len = w.len;
	return 0;
}

int ndc_dns_write_error(const struct ndc_query *q, uint16_t rcode, uint8_t *out, size_t cap,
			size_t *ret_len)
{
	/* RFC 6891 7: BADVERS only exists in an OPT RR */
	bool edns = q->has_edns || rcode == NDC_RCODE_BADVERS;
	uint16_t flags = NDC_F_QR | NDC_F_RA |
			 (q->flags & (NDC_F_OPCODE_MASK | NDC_F_RD | NDC_F_CD)) |
			 (rcode & NDC_F_RCODE_MASK);
	struct ndc_wbuf w;

	if (!q->hdr_ok || rcode > 0xfff)
		return -EINVAL;
	ndc_wbuf_init(&w, out, cap);
	put_header(&w, q->id, flags, q->question_ok ? 1 : 0, 0, 0, edns ? 1 : 0);
	if (q->question_ok)
		put_question(&w, q);
	if (edns)
		put_opt(&w, NDC_EDNS_UDP_MAX, (uint8_t)(rcode >> 4), q->do_bit);
	if (w.err)
		return w.err;
	*ret_len = w.len;
	return 0;
}
