// SPDX-License-Identifier: MIT
/*
 * Fuzz target for the DNS wire module. The input is treated as a query (parse, then an answer
 * built for it and written under limits taken from the input, or an error reply), as an upstream
 * response (parse, write it back, parse again: the result must be a fixed point) and as a bag of
 * compressed names. Every invariant failure calls abort().
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <ndc/dns_wire.h>

/* struct ndc_answer followed by its data (a flexible array cannot be a struct member in C) */
struct answer_buf {
	union {
		struct ndc_answer a;
		uint8_t mem[sizeof(struct ndc_answer) + NDC_ANSWER_DATA_MAX];
	};
};

#define DATA_CAP NDC_ANSWER_DATA_MAX

static struct answer_buf ab, back, again;
static uint8_t out[NDC_MSG_MAX], out2[NDC_MSG_MAX];

#define check(cond)              \
	do {                     \
		if (!(cond))     \
			abort(); \
	} while (0)

static uint8_t byte_at(const uint8_t *d, size_t n, size_t i)
{
	return n ? d[i % n] : 0;
}

/* name with one more label in front, or name itself when that would be too long */
static size_t prefixed(uint8_t *dst, const uint8_t *name, size_t len, char c)
{
	if (len + 2 > NDC_NAME_MAX) {
		memcpy(dst, name, len);
		return len;
	}
	dst[0] = 1;
	dst[1] = (uint8_t)c;
	memcpy(dst + 2, name, len);
	return len + 2;
}

static bool same_answer_prefix(const struct ndc_answer *x, const struct ndc_answer *y)
{
	return x->len <= y->len && memcmp(x->data, y->data, x->len) == 0;
}

/* A successfully parsed query: answer it and check the reply. */
static void fuzz_reply(const struct ndc_query *q, const uint8_t *d, size_t n)
{
	uint8_t tgt[NDC_NAME_MAX], rd[2 * NDC_NAME_MAX + 32];
	size_t tlen, rdlen, len, limit, hq;
	uint32_t ttl_sub, ttl_cap;
	struct ndc_ab b;
	bool tc;
	int err;

	/* the query as parsed */
	check(ndc_name_check(q->qname, q->qname_len, &len) == 0 && len == q->qname_len);
	for (size_t i = 0; i < len; i++)
		check(q->lname[i] ==
		      (q->qname[i] >= 'A' && q->qname[i] <= 'Z' ? q->qname[i] + 32 : q->qname[i]));
	check(ndc_dns_udp_limit(q) >= NDC_UDP_MIN && ndc_dns_udp_limit(q) <= NDC_EDNS_UDP_MAX);
	check(!q->has_edns || (size_t)q->edns_opts_off + q->edns_opts_len == n);

	ndc_ab_init(&b, &ab.a, DATA_CAP, q->lname, q->qname_len);
	ndc_ab_rr(&b, NDC_SEC_ANSWER, q->lname, q->qname_len, NDC_T_A, NDC_C_IN,
		  byte_at(d, n, 3) * 7u, (const uint8_t *)"\12\0\0\1", 4);
	tlen = prefixed(tgt, q->lname, q->qname_len, 'x');
	ndc_ab_rr(&b, NDC_SEC_ANSWER, q->lname, q->qname_len, NDC_T_CNAME, NDC_C_IN,
		  byte_at(d, n, 5), tgt, tlen);
	memcpy(rd, "\0\1\0\2\0\x35", 6);
	memcpy(rd + 6, tgt, tlen);
	ndc_ab_rr(&b, NDC_SEC_ANSWER, q->qname, q->qname_len, NDC_T_SRV, NDC_C_IN, 300, rd,
		  6 + tlen);
	rdlen = prefixed(rd, q->lname, q->qname_len, 'n');
	rdlen += prefixed(rd + rdlen, q->lname, q->qname_len, 'h');
	memset(rd + rdlen, 0, 20);
	rdlen += 20;
	ndc_ab_rr(&b, NDC_SEC_AUTHORITY, q->lname, q->qname_len, NDC_T_SOA, NDC_C_IN, 3600, rd,
		  rdlen);
	ndc_ab_rr(&b, NDC_SEC_ADDITIONAL, tgt, tlen, NDC_T_AAAA, NDC_C_IN, 30,
		  (const uint8_t *)"0123456789abcdef", 16);
	check(ndc_ab_finish(&b, byte_at(d, n, 7) & 0xf, byte_at(d, n, 8) & 1) == 0);
	check(ab.a.ancount == 3 && ab.a.nscount == 1 && ab.a.arcount == 1);

	limit = (size_t)byte_at(d, n, n - 1) * 5 + byte_at(d, n, n - 2);
	ttl_sub = byte_at(d, n, n - 3) & 1 ? byte_at(d, n, n - 4) : 0;
	ttl_cap = byte_at(d, n, n - 3) & 2 ? byte_at(d, n, n - 5) : 0;
	hq = NDC_DNS_HDR_LEN + q->qname_len + 4 + (q->has_edns ? 11 : 0);
	err = ndc_dns_write_reply(q, &ab.a, ttl_sub, ttl_cap, limit, out, sizeof(out), &len);
	if (hq > limit) {
		check(err == -ENOSPC);
		return;
	}
	check(err == 0 && len <= limit && len >= hq);
	check(ndc_get16(out) == q->id && (ndc_get16(out + 2) & NDC_F_QR));
	check(memcmp(out + NDC_DNS_HDR_LEN, q->qname, q->qname_len) == 0);

	/* our reply parses back to what we built (less what limit left out) */
	err = ndc_dns_parse_response(out, len, q->lname, q->qname_len, q->qtype, q->qclass, &back.a,
				     DATA_CAP, &tc);
	check(err == 0);
	check(tc == !!(ndc_get16(out + 2) & NDC_F_TC));
	check(back.a.rcode == ab.a.rcode && back.a.aa == ab.a.aa);
	if (tc) {
		check(len == hq && back.a.len == 0);
	} else {
		check(back.a.ancount == 3 && back.a.nscount == 1);
		if (!ttl_sub && !ttl_cap)
			check(same_answer_prefix(&back.a, &ab.a));
	}
}

/* The input as an upstream response: parse, write, parse again; must reach a fixed point. */
static void fuzz_response(const uint8_t *d, size_t n, const uint8_t *lname, size_t nlen,
			  uint16_t qtype, uint16_t qclass)
{
	struct ndc_query q;
	size_t len;
	bool tc, tc2;
	int err;

	err = ndc_dns_parse_response(d, n, lname, nlen, qtype, qclass, &back.a, DATA_CAP, &tc);
	if (err)
		return;
	check(back.a.qname_len == nlen && back.a.len <= DATA_CAP);
	memset(&q, 0, sizeof(q));
	q.id = 1;
	memcpy(q.qname, lname, nlen);
	memcpy(q.lname, lname, nlen);
	q.qname_len = (uint8_t)nlen;
	q.qtype = qtype;
	q.qclass = qclass;
	q.has_edns = byte_at(d, n, 2) & 1;
	q.hdr_ok = q.question_ok = true;
	check(ndc_dns_write_reply(&q, &back.a, 0, 0, NDC_MSG_MAX, out2, sizeof(out2), &len) == 0);
	err =
	    ndc_dns_parse_response(out2, len, lname, nlen, qtype, qclass, &again.a, DATA_CAP, &tc2);
	check(err == 0 && !tc2);
	check(again.a.len == back.a.len && memcmp(again.a.data, back.a.data, back.a.len) == 0);
	check(again.a.ancount == back.a.ancount && again.a.nscount == back.a.nscount &&
	      again.a.arcount == back.a.arcount && again.a.rcode == back.a.rcode &&
	      again.a.aa == back.a.aa && again.a.min_ttl == back.a.min_ttl);
}

static void fuzz_names(const uint8_t *d, size_t n)
{
	uint8_t name[NDC_NAME_MAX], name2[NDC_NAME_MAX];
	char text[NDC_NAME_MAX * 4 + 2];

	for (size_t i = 0; i < 4 && n; i++) {
		size_t pos = (i == 0) ? NDC_DNS_HDR_LEN : byte_at(d, n, i) % n, start = pos, len,
		       l2;

		if (ndc_name_unpack(d, n, &pos, name, &len) < 0)
			continue;
		check(pos > start && pos <= n && len >= 1 && len <= NDC_NAME_MAX);
		check(ndc_name_check(name, len, &l2) == 0 && l2 == len);
		check(ndc_name_labels(name, len) >= 0);
		check(ndc_name_to_text(name, len, text, sizeof(text)) == 0);
		if (!strchr(text, '\\')) {
			check(ndc_name_from_text(text, name2, sizeof(name2), &l2) == 0);
			check(l2 == len && memcmp(name, name2, len) == 0);
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t fixed[] = {7, 'e', 'x', 'a', 'm', 'p', 'l', 'e', 3, 'c', 'o', 'm', 0};
	uint8_t lname[NDC_NAME_MAX];
	struct ndc_query q;
	size_t len, pos = NDC_DNS_HDR_LEN, nlen;
	int err;

	err = ndc_dns_parse_query(data, size, &q);
	check(err == 0 || err == -EPROTO || err == -EBADMSG || err == -EOPNOTSUPP ||
	      err == -EPERM || err == -ENOTSUP);
	check(q.hdr_ok == (size >= NDC_DNS_HDR_LEN));
	if (err == 0) {
		fuzz_reply(&q, data, size);
	} else if (err != -EPROTO) {
		check(q.hdr_ok);
		check(ndc_dns_write_error(&q, q.rcode, out, 512, &len) == 0);
		check(len >= NDC_DNS_HDR_LEN && len <= 12 + 255 + 4 + 11);
		check((ndc_get16(out + 2) & NDC_F_RCODE_MASK) == (q.rcode & 0xf));
		if (q.question_ok && !(q.flags & NDC_F_OPCODE_MASK) &&
		    q.rcode != NDC_RCODE_BADVERS) {
			bool tc;

			check(ndc_dns_parse_response(out, len, q.lname, q.qname_len, q.qtype,
						     q.qclass, &back.a, DATA_CAP, &tc) == 0);
			check(back.a.rcode == q.rcode && back.a.len == 0 && !tc);
		}
	}

	if (q.question_ok) {
		fuzz_response(data, size, q.lname, q.qname_len, q.qtype, q.qclass);
	} else if (size >= NDC_DNS_HDR_LEN + 5 &&
		   ndc_name_unpack(data, size, &pos, lname, &nlen) == 0 && size - pos >= 4) {
		ndc_name_lower(lname, lname, nlen);
		fuzz_response(data, size, lname, nlen, ndc_get16(data + pos),
			      ndc_get16(data + pos + 2));
	} else {
		fuzz_response(data, size, fixed, sizeof(fixed), NDC_T_A, NDC_C_IN);
	}
	fuzz_names(data, size);
	return 0;
}
