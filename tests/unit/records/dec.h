/* SPDX-License-Identifier: MIT */
/*
 * The record tests' reader: answers decoded from wire form into one text line per RR, and a
 * lookup that decodes. Included by each records test (static functions: one copy per test).
 */
#ifndef NDC_TEST_RECORDS_DEC_H
#define NDC_TEST_RECORDS_DEC_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "records/records.h"

/* ---------------------------------------------------------------------------------------------
 * Decoding answers into one text line per RR: "<sec> <owner> <ttl> <TYPE> <rdata>".
 */
#define DEC_MAX 128

struct dec {
	uint8_t rcode;
	uint8_t aa;
	int an, ns, ar;
	uint32_t min_ttl;
	int n;
	char line[DEC_MAX][600];
	uint16_t type[DEC_MAX];
	uint32_t ttl[DEC_MAX];
};

static const char *type_name(uint16_t t)
{
	switch (t) {
	case NDC_T_A:
		return "A";
	case NDC_T_NS:
		return "NS";
	case NDC_T_CNAME:
		return "CNAME";
	case NDC_T_SOA:
		return "SOA";
	case NDC_T_PTR:
		return "PTR";
	case NDC_T_TXT:
		return "TXT";
	case NDC_T_AAAA:
		return "AAAA";
	case NDC_T_SRV:
		return "SRV";
	}
	return "?";
}

static void name_at(const uint8_t *msg, size_t len, size_t *pos, char *out, size_t cap)
{
	uint8_t n[NDC_NAME_MAX];
	size_t nl;

	assert_int_equal(ndc_name_unpack(msg, len, pos, n, &nl), 0);
	assert_int_equal(ndc_name_to_text(n, nl, out, cap), 0);
}

static void decode(const struct ndc_answer *a, const uint8_t *q, size_t qlen, struct dec *d)
{
	static uint8_t msg[NDC_DNS_HDR_LEN + NDC_NAME_MAX + 4 + NDC_MSG_MAX];
	size_t len = NDC_DNS_HDR_LEN + qlen + 4 + a->len, pos = NDC_DNS_HDR_LEN + qlen + 4;
	static const char *sec[] = {"an", "ns", "ar"};

	memset(d, 0, sizeof(*d));
	assert_int_equal(a->qname_len, qlen);
	memset(msg, 0, NDC_DNS_HDR_LEN);
	memcpy(msg + NDC_DNS_HDR_LEN, q, qlen);
	memset(msg + NDC_DNS_HDR_LEN + qlen, 0, 4);
	memcpy(msg + pos, a->data, a->len);
	d->rcode = a->rcode;
	d->aa = a->aa;
	d->an = a->ancount;
	d->ns = a->nscount;
	d->ar = a->arcount;
	d->min_ttl = a->min_ttl;
	d->n = a->ancount + a->nscount + a->arcount;
	assert_true(d->n <= DEC_MAX);
	for (int i = 0; i < d->n; i++) {
		char owner[1024], rd[1100];
		const char *s = sec[i < d->an ? 0 : i < d->an + d->ns ? 1 : 2];

		name_at(msg, len, &pos, owner, sizeof(owner));
		assert_true(pos + 10 <= len);
		uint16_t type = ndc_get16(msg + pos), cls = ndc_get16(msg + pos + 2);
		uint32_t ttl = ndc_get32(msg + pos + 4);
		size_t rdlen = ndc_get16(msg + pos + 8), rp;

		assert_int_equal(cls, NDC_C_IN);
		pos += 10;
		assert_true(pos + rdlen <= len);
		rp = pos;
		switch (type) {
		case NDC_T_A:
		case NDC_T_AAAA:
			assert_int_equal(rdlen, type == NDC_T_A ? 4 : 16);
			inet_ntop(type == NDC_T_A ? AF_INET : AF_INET6, msg + pos, rd, sizeof(rd));
			rp += rdlen;
			break;
		case NDC_T_NS:
		case NDC_T_CNAME:
		case NDC_T_PTR:
			name_at(msg, len, &rp, rd, sizeof(rd));
			break;
		case NDC_T_SRV: {
			char t[1024];

			rp += 6;
			name_at(msg, len, &rp, t, sizeof(t));
			snprintf(rd, sizeof(rd), "%u %u %u %s", ndc_get16(msg + pos),
				 ndc_get16(msg + pos + 2), ndc_get16(msg + pos + 4), t);
			break;
		}
		case NDC_T_SOA: {
			char m[300], r[300];

			name_at(msg, len, &rp, m, sizeof(m));
			name_at(msg, len, &rp, r, sizeof(r));
			snprintf(rd, sizeof(rd), "%s %s %u %u %u %u %u", m, r, ndc_get32(msg + rp),
				 ndc_get32(msg + rp + 4), ndc_get32(msg + rp + 8),
				 ndc_get32(msg + rp + 12), ndc_get32(msg + rp + 16));
			rp += 20;
			break;
		}
		case NDC_T_TXT:
			assert_int_equal(msg[pos] + 1, rdlen);
			snprintf(rd, sizeof(rd), "\"%.*s\"", msg[pos], (const char *)msg + pos + 1);
			rp += rdlen;
			break;
		default:
			fail_msg("unexpected type %u", type);
		}
		assert_int_equal(rp, pos + rdlen); /* RDLENGTH matches what the RDATA holds */
		pos += rdlen;
		d->type[i] = type;
		d->ttl[i] = ttl;
		int w = snprintf(d->line[i], sizeof(d->line[i]), "%s %s %u %s %s", s, owner, ttl,
				 type_name(type), rd);
		assert_true(w > 0 && (size_t)w < sizeof(d->line[i]));
	}
	assert_int_equal(pos, len); /* nothing after the last RR */
}

static bool has(const struct dec *d, const char *line)
{
	for (int i = 0; i < d->n; i++)
		if (!strcmp(d->line[i], line))
			return true;
	return false;
}

static void dump(const struct dec *d)
{
	for (int i = 0; i < d->n; i++)
		print_message("  %s\n", d->line[i]);
}

#define assert_has(d, l)                            \
	do {                                        \
		if (!has(d, l)) {                   \
			dump(d);                    \
			fail_msg("missing: %s", l); \
		}                                   \
	} while (0)

static union {
	struct ndc_answer a;
	uint8_t b[sizeof(struct ndc_answer) + NDC_MSG_MAX];
} abuf;

static size_t wire(const char *name, uint8_t *w)
{
	size_t l;

	assert_int_equal(ndc_name_from_text(name, w, NDC_NAME_MAX, &l), 0);
	ndc_name_lower(w, w, l);
	return l;
}

/* Looks name up; on 0 decodes the answer into d. */
static int q(const struct ndc_records *r, const char *name, uint16_t type, struct dec *d)
{
	uint8_t w[NDC_NAME_MAX];
	size_t l = wire(name, w);
	int rc = ndc_records_lookup(r, w, l, type, &abuf.a, NDC_MSG_MAX);

	if (!rc)
		decode(&abuf.a, w, l, d);
	return rc;
}

#endif
