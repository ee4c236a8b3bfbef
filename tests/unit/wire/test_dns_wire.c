// SPDX-License-Identifier: MIT
/*
 * DNS wire module: names, query parsing and its error classes, the answer builder's compression
 * (byte-exact), reply assembly (TTLs, OPT, truncation), upstream response parsing, and a
 * cross-check of our replies with libknot's parser when libknot is linked in.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <ndc/dns_wire.h>

#define A_CAP 4096

/* struct ndc_answer followed by its data (a flexible array cannot be a struct member in C) */
struct answer_buf {
	union {
		struct ndc_answer a;
		uint8_t mem[sizeof(struct ndc_answer) + A_CAP];
	};
};

static size_t wire(const char *text, uint8_t *out)
{
	size_t len;

	assert_int_equal(ndc_name_from_text(text, out, NDC_NAME_MAX, &len), 0);
	return len;
}

/* A query packet: header, question, and an optional raw tail (OPT or garbage). */
static size_t mkquery(uint8_t *buf, uint16_t flags, const char *name, uint16_t qtype,
		      uint16_t arcount, const uint8_t *tail, size_t tail_len)
{
	uint8_t n[NDC_NAME_MAX];
	size_t nlen = wire(name, n);
	struct ndc_wbuf w;

	ndc_wbuf_init(&w, buf, 2048);
	ndc_wbuf_u16(&w, 0xbeef);
	ndc_wbuf_u16(&w, flags);
	ndc_wbuf_u16(&w, 1);
	ndc_wbuf_u16(&w, 0);
	ndc_wbuf_u16(&w, 0);
	ndc_wbuf_u16(&w, arcount);
	ndc_wbuf_bytes(&w, n, nlen);
	ndc_wbuf_u16(&w, qtype);
	ndc_wbuf_u16(&w, NDC_C_IN);
	ndc_wbuf_bytes(&w, tail, tail_len);
	assert_int_equal(w.err, 0);
	return w.len;
}

/* OPT RR: udp size, version, DO, optional options. */
static size_t mkopt(uint8_t *buf, uint16_t udp, uint8_t version, bool do_bit, const uint8_t *opts,
		    uint16_t opts_len)
{
	struct ndc_wbuf w;

	ndc_wbuf_init(&w, buf, 512);
	ndc_wbuf_u8(&w, 0);
	ndc_wbuf_u16(&w, NDC_T_OPT);
	ndc_wbuf_u16(&w, udp);
	ndc_wbuf_u32(&w, (uint32_t)version << 16 | (do_bit ? NDC_EDNS_DO : 0));
	ndc_wbuf_u16(&w, opts_len);
	ndc_wbuf_bytes(&w, opts, opts_len);
	return w.len;
}

/* ------------------------------------------------------------------------------------------- */

static void test_name_from_text(void **state)
{
	static const uint8_t www[] = {3,   'w', 'w', 'w', 7,   'e', 'x', 'a', 'm',
				      'p', 'l', 'e', 3,	  'c', 'o', 'm', 0};
	uint8_t out[NDC_NAME_MAX];
	char text[400];
	size_t len;
	(void)state;

	assert_int_equal(ndc_name_from_text("www.example.com", out, sizeof(out), &len), 0);
	assert_int_equal(len, sizeof(www));
	assert_memory_equal(out, www, sizeof(www));
	assert_int_equal(ndc_name_from_text("www.example.com.", out, sizeof(out), &len), 0);
	assert_int_equal(len, sizeof(www));
	assert_memory_equal(out, www, sizeof(www));
	assert_int_equal(ndc_name_from_text(".", out, sizeof(out), &len), 0);
	assert_int_equal(len, 1);
	assert_int_equal(out[0], 0);

	assert_int_equal(ndc_name_from_text("", out, sizeof(out), &len), -EINVAL);
	assert_int_equal(ndc_name_from_text("a..b", out, sizeof(out), &len), -EINVAL);
	assert_int_equal(ndc_name_from_text(".a", out, sizeof(out), &len), -EINVAL);
	assert_int_equal(ndc_name_from_text("a..", out, sizeof(out), &len), -EINVAL);
	assert_int_equal(ndc_name_from_text("a\\.b", out, sizeof(out), &len), -EINVAL);
	/* 63 is the longest label */
	memset(text, 'x', 63);
	text[63] = '\0';
	assert_int_equal(ndc_name_from_text(text, out, sizeof(out), &len), 0);
	assert_int_equal(len, 65);
	text[63] = 'x';
	text[64] = '\0';
	assert_int_equal(ndc_name_from_text(text, out, sizeof(out), &len), -EINVAL);
	/* 3 * 64 + (1 + 61) + 1 = 255 is the longest name, one more byte is too long */
	memset(text, 'x', sizeof(text));
	text[63] = text[127] = text[191] = '.';
	text[253] = '\0';
	assert_int_equal(ndc_name_from_text(text, out, sizeof(out), &len), 0);
	assert_int_equal(len, 255);
	text[253] = 'x';
	text[254] = '\0';
	assert_int_equal(ndc_name_from_text(text, out, sizeof(out), &len), -EINVAL);
	assert_int_equal(ndc_name_from_text("www.example.com", out, 16, &len), -ENOSPC);
	assert_int_equal(ndc_name_from_text("www.example.com", out, 17, &len), 0);
}

static void test_name_to_text(void **state)
{
	static const uint8_t odd[] = {4, 'a', '.', '\\', ' ', 2, 0x00, 0xff, 0};
	uint8_t n[NDC_NAME_MAX];
	char text[64];
	size_t len = wire("WwW.Example.com", n);
	(void)state;

	assert_int_equal(ndc_name_to_text(n, len, text, sizeof(text)), 0);
	assert_string_equal(text, "WwW.Example.com.");
	assert_int_equal(ndc_name_to_text((const uint8_t *)"", 1, text, sizeof(text)), 0);
	assert_string_equal(text, ".");
	assert_int_equal(ndc_name_to_text(odd, sizeof(odd), text, sizeof(text)), 0);
	assert_string_equal(text, "a\\.\\\\\\032.\\000\\255.");
	/* exactly enough room, then one byte less */
	assert_int_equal(ndc_name_to_text(n, len, text, 17), 0);
	assert_int_equal(ndc_name_to_text(n, len, text, 16), -ENOSPC);
	/* malformed: runs past len, pointer, label type 01 */
	assert_int_equal(ndc_name_to_text(n, len - 1, text, sizeof(text)), -EINVAL);
	assert_int_equal(ndc_name_to_text((const uint8_t *)"\xc0\x0c", 2, text, sizeof(text)),
			 -EINVAL);
	assert_int_equal(ndc_name_to_text((const uint8_t *)"\x41x", 2, text, sizeof(text)),
			 -EINVAL);
}

static void test_name_helpers(void **state)
{
	uint8_t n[NDC_NAME_MAX], z[NDC_NAME_MAX], l[NDC_NAME_MAX];
	size_t nlen = wire("a.svc.cluster.local", n), zlen = wire("cluster.local", z), len;
	(void)state;

	assert_int_equal(ndc_name_check(n, nlen, &len), 0);
	assert_int_equal(len, nlen);
	assert_int_equal(ndc_name_check(n, nlen - 1, &len), -EINVAL);
	assert_int_equal(ndc_name_labels(n, nlen), 4);
	assert_int_equal(ndc_name_labels((const uint8_t *)"", 1), 0);
	assert_true(ndc_name_in_zone(n, nlen, z, zlen));
	assert_true(ndc_name_in_zone(z, zlen, z, zlen));
	assert_true(ndc_name_in_zone(n, nlen, (const uint8_t *)"", 1));
	/* suffix match must sit on a label boundary */
	zlen = wire("luster.local", z);
	assert_false(ndc_name_in_zone(n, nlen, z, zlen));
	zlen = wire("b.svc.cluster.local", z);
	assert_false(ndc_name_in_zone(n, nlen, z, zlen));
	len = wire("MiXeD.CaSe", n);
	ndc_name_lower(l, n, len);
	assert_memory_equal(l, "\5mixed\4case", len);
	ndc_name_lower(n, n, len);
	assert_memory_equal(n, l, len);
}

static void test_name_unpack(void **state)
{
	/* header, then "example.com" at 12, then "www" + pointer at 25, then a forward pointer */
	uint8_t msg[64] = {0};
	uint8_t out[NDC_NAME_MAX], exp[NDC_NAME_MAX];
	size_t pos, len, elen;
	(void)state;

	memcpy(msg + 12, "\7example\3com\0", 13);
	memcpy(msg + 25, "\3www\xc0\x0c", 6);
	memcpy(msg + 31, "\xc0\x19", 2);    /* pointer to 25: pointer to pointer */
	memcpy(msg + 33, "\xc0\x21", 2);    /* points to itself */
	memcpy(msg + 35, "\1a\xc0\x23", 4); /* "a" + pointer back to its own start: a loop */
	pos = 12;
	assert_int_equal(ndc_name_unpack(msg, sizeof(msg), &pos, out, &len), 0);
	assert_int_equal(pos, 25);
	elen = wire("example.com", exp);
	assert_int_equal(len, elen);
	assert_memory_equal(out, exp, elen);
	pos = 25;
	assert_int_equal(ndc_name_unpack(msg, sizeof(msg), &pos, out, &len), 0);
	assert_int_equal(pos, 31);
	elen = wire("www.example.com", exp);
	assert_int_equal(len, elen);
	assert_memory_equal(out, exp, elen);
	pos = 31;
	assert_int_equal(ndc_name_unpack(msg, sizeof(msg), &pos, out, &len), 0);
	assert_int_equal(pos, 33);
	assert_memory_equal(out, exp, elen);
	pos = 33;
	assert_int_equal(ndc_name_unpack(msg, sizeof(msg), &pos, out, &len), -EBADMSG);
	pos = 35;
	assert_int_equal(ndc_name_unpack(msg, sizeof(msg), &pos, out, &len), -EBADMSG);
	/* forward pointer, pointer into the header, truncated name, truncated pointer */
	memcpy(msg + 41, "\xc0\x30", 2);
	pos = 41;
	assert_int_equal(ndc_name_unpack(msg, sizeof(msg), &pos, out, &len), -EBADMSG);
	memcpy(msg + 41, "\xc0\x02", 2);
	pos = 41;
	assert_int_equal(ndc_name_unpack(msg, sizeof(msg), &pos, out, &len), -EBADMSG);
	pos = 12;
	assert_int_equal(ndc_name_unpack(msg, 20, &pos, out, &len), -EBADMSG);
	pos = 29;
	assert_int_equal(ndc_name_unpack(msg, 30, &pos, out, &len), -EBADMSG);
}

static void test_name_unpack_too_long(void **state)
{
	/* Each name adds 4 labels of 63 bytes (256 bytes) in front of the previous: too long. */
	uint8_t msg[600] = {0};
	uint8_t out[NDC_NAME_MAX];
	size_t pos = 12, len;
	(void)state;

	for (int i = 0; i < 4; i++) {
		msg[pos] = 63;
		memset(msg + pos + 1, 'x', 63);
		pos += 64;
	}
	msg[pos++] = 0;
	pos = 12;
	assert_int_equal(ndc_name_unpack(msg, sizeof(msg), &pos, out, &len), -EBADMSG);
	/* the same via a pointer: 3 labels + pointer to a name of 64 + 1 bytes */
	memset(msg, 0, sizeof(msg));
	msg[12] = 63;
	memset(msg + 13, 'y', 63);
	msg[76] = 0;
	pos = 77;
	for (int i = 0; i < 3; i++) {
		msg[pos] = 63;
		memset(msg + pos + 1, 'x', 63);
		pos += 64;
	}
	msg[pos] = 0xc0;
	msg[pos + 1] = 12;
	pos = 77;
	assert_int_equal(ndc_name_unpack(msg, sizeof(msg), &pos, out, &len), -EBADMSG);
}

/* ------------------------------------------------------------------------------------------- */

static void test_parse_query_plain(void **state)
{
	uint8_t pkt[512], n[NDC_NAME_MAX];
	size_t len = mkquery(pkt, NDC_F_RD, "www.example.com", NDC_T_AAAA, 0, NULL, 0);
	size_t nlen = wire("www.example.com", n);
	struct ndc_query q;
	(void)state;

	assert_int_equal(ndc_dns_parse_query(pkt, len, &q), 0);
	assert_int_equal(q.id, 0xbeef);
	assert_int_equal(q.flags, NDC_F_RD);
	assert_int_equal(q.qtype, NDC_T_AAAA);
	assert_int_equal(q.qclass, NDC_C_IN);
	assert_int_equal(q.qname_len, nlen);
	assert_memory_equal(q.qname, n, nlen);
	assert_memory_equal(q.lname, n, nlen);
	assert_true(q.hdr_ok);
	assert_true(q.question_ok);
	assert_false(q.has_edns);
	assert_int_equal(q.udp_size, 0);
	assert_int_equal(q.rcode, NDC_RCODE_NOERROR);
	assert_int_equal(ndc_dns_udp_limit(&q), 512);
}

static void test_parse_query_0x20(void **state)
{
	uint8_t pkt[512], n[NDC_NAME_MAX], l[NDC_NAME_MAX];
	size_t len = mkquery(pkt, 0, "wWw.ExAmPlE.CoM", NDC_T_A, 0, NULL, 0);
	size_t nlen = wire("wWw.ExAmPlE.CoM", n);
	struct ndc_query q;
	(void)state;

	wire("www.example.com", l);
	assert_int_equal(ndc_dns_parse_query(pkt, len, &q), 0);
	assert_memory_equal(q.qname, n, nlen);
	assert_memory_equal(q.lname, l, nlen);
}

static void test_parse_query_edns(void **state)
{
	static const uint8_t cookie[] = {0, 10, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8};
	uint8_t pkt[512], opt[64];
	size_t olen = mkopt(opt, 4096, 0, true, cookie, sizeof(cookie));
	size_t len = mkquery(pkt, NDC_F_RD, "example.com", NDC_T_A, 1, opt, olen);
	struct ndc_query q;
	(void)state;

	assert_int_equal(ndc_dns_parse_query(pkt, len, &q), 0);
	assert_true(q.has_edns);
	assert_true(q.do_bit);
	assert_int_equal(q.udp_size, 4096);
	assert_int_equal(q.edns_version, 0);
	assert_int_equal(q.edns_opts_len, sizeof(cookie));
	assert_int_equal(q.edns_opts_off, len - sizeof(cookie));
	assert_memory_equal(pkt + q.edns_opts_off, cookie, sizeof(cookie));
	assert_int_equal(ndc_dns_udp_limit(&q), NDC_EDNS_UDP_MAX);

	olen = mkopt(opt, 1000, 0, false, NULL, 0);
	len = mkquery(pkt, 0, "example.com", NDC_T_A, 1, opt, olen);
	assert_int_equal(ndc_dns_parse_query(pkt, len, &q), 0);
	assert_false(q.do_bit);
	assert_int_equal(q.edns_opts_len, 0);
	assert_int_equal(ndc_dns_udp_limit(&q), 1000);
	olen = mkopt(opt, 100, 0, false, NULL, 0);
	len = mkquery(pkt, 0, "example.com", NDC_T_A, 1, opt, olen);
	assert_int_equal(ndc_dns_parse_query(pkt, len, &q), 0);
	assert_int_equal(ndc_dns_udp_limit(&q), 512);

	/* version 1: BADVERS, with what is needed for the reply */
	olen = mkopt(opt, 1232, 1, true, NULL, 0);
	len = mkquery(pkt, 0, "example.com", NDC_T_A, 1, opt, olen);
	assert_int_equal(ndc_dns_parse_query(pkt, len, &q), -ENOTSUP);
	assert_int_equal(q.rcode, NDC_RCODE_BADVERS);
	assert_true(q.has_edns);
	assert_true(q.question_ok);
	assert_int_equal(q.edns_version, 1);
}

static void expect_formerr(const uint8_t *pkt, size_t len, bool question_ok)
{
	struct ndc_query q;

	assert_int_equal(ndc_dns_parse_query(pkt, len, &q), -EBADMSG);
	assert_int_equal(q.rcode, NDC_RCODE_FORMERR);
	assert_true(q.hdr_ok);
	assert_int_equal(q.question_ok, question_ok);
}

static void test_parse_query_formerr(void **state)
{
	static const uint8_t bad_opts[] = {0, 10, 0, 9, 1, 2, 3, 4, 5, 6, 7, 8}; /* 9 > 8 left */
	static const uint8_t short_opt[] = {0, 10};				 /* header cut */
	static const uint8_t a_rr[] = {0, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 10, 0, 0, 1};
	uint8_t pkt[1024], opt[64], tail[128];
	size_t len, olen;
	(void)state;

	len = mkquery(pkt, 0, "example.com", NDC_T_A, 0, NULL, 0);
	pkt[5] = 0; /* QDCOUNT 0 */
	expect_formerr(pkt, len, false);
	pkt[5] = 2;
	expect_formerr(pkt, len, false);
	pkt[5] = 1;
	pkt[7] = 1; /* ANCOUNT */
	expect_formerr(pkt, len, true);
	pkt[7] = 0;
	pkt[9] = 1; /* NSCOUNT */
	expect_formerr(pkt, len, true);
	pkt[9] = 0;
	/* trailing byte, truncated question */
	pkt[len] = 0;
	expect_formerr(pkt, len + 1, true);
	expect_formerr(pkt, len - 1, false);
	expect_formerr(pkt, 13, false);

	/* compression pointer in the question: "www" + pointer to 12 */
	len = mkquery(pkt, 0, "www.x", NDC_T_A, 0, NULL, 0);
	pkt[16] = 0xc0;
	pkt[17] = 12;
	expect_formerr(pkt, len, false);
	/* label length 64 (label type 01) */
	len = mkquery(pkt, 0, "www.x", NDC_T_A, 0, NULL, 0);
	pkt[12] = 0x40;
	expect_formerr(pkt, len, false);
	/* name of 256 bytes: 4 labels of 63 in a question */
	memset(pkt, 0, sizeof(pkt));
	pkt[5] = 1;
	for (int i = 0; i < 4; i++) {
		pkt[12 + i * 64] = 63;
		memset(pkt + 13 + i * 64, 'a', 63);
	}
	expect_formerr(pkt, 12 + 257 + 4, false);

	/* additional section problems */
	olen = mkopt(opt, 1232, 0, false, NULL, 0);
	memcpy(tail, opt, olen);
	memcpy(tail + olen, opt, olen);
	len = mkquery(pkt, 0, "example.com", NDC_T_A, 2, tail, 2 * olen);
	expect_formerr(pkt, len, true);
	len = mkquery(pkt, 0, "example.com", NDC_T_A, 1, a_rr, sizeof(a_rr));
	expect_formerr(pkt, len, true);
	tail[0] = 1; /* OPT owner "a." */
	tail[1] = 'a';
	tail[2] = 0;
	memcpy(tail + 3, opt + 1, olen - 1);
	len = mkquery(pkt, 0, "example.com", NDC_T_A, 1, tail, olen + 2);
	expect_formerr(pkt, len, true);
	olen = mkopt(opt, 1232, 0, false, bad_opts, sizeof(bad_opts));
	len = mkquery(pkt, 0, "example.com", NDC_T_A, 1, opt, olen);
	expect_formerr(pkt, len, true);
	olen = mkopt(opt, 1232, 0, false, short_opt, sizeof(short_opt));
	len = mkquery(pkt, 0, "example.com", NDC_T_A, 1, opt, olen);
	expect_formerr(pkt, len, true);
	/* OPT RDLEN beyond the packet, OPT cut inside its fixed part, trailing byte after OPT */
	olen = mkopt(opt, 1232, 0, false, NULL, 0);
	opt[olen - 1] = 4;
	len = mkquery(pkt, 0, "example.com", NDC_T_A, 1, opt, olen);
	expect_formerr(pkt, len, true);
	opt[olen - 1] = 0;
	len = mkquery(pkt, 0, "example.com", NDC_T_A, 1, opt, olen - 3);
	expect_formerr(pkt, len, true);
	opt[olen] = 0;
	len = mkquery(pkt, 0, "example.com", NDC_T_A, 1, opt, olen + 1);
	expect_formerr(pkt, len, true);
	/* ARCOUNT 1 with no additional section at all */
	len = mkquery(pkt, 0, "example.com", NDC_T_A, 1, NULL, 0);
	expect_formerr(pkt, len, true);
}

static void test_parse_query_notimp_refused_drop(void **state)
{
	uint8_t pkt[512];
	size_t len;
	struct ndc_query q;
	(void)state;

	len = mkquery(pkt, 4 << 11 /* NOTIFY */, "example.com", NDC_T_SOA, 0, NULL, 0);
	assert_int_equal(ndc_dns_parse_query(pkt, len, &q), -EOPNOTSUPP);
	assert_int_equal(q.rcode, NDC_RCODE_NOTIMP);
	assert_true(q.hdr_ok);
	assert_true(q.question_ok);
	/* UPDATE with non-empty sections is still NOTIMP, not FORMERR */
	pkt[7] = 1;
	pkt[2] = 5 << 3;
	assert_int_equal(ndc_dns_parse_query(pkt, len, &q), -EOPNOTSUPP);
	assert_int_equal(q.rcode, NDC_RCODE_NOTIMP);

	len = mkquery(pkt, 0, "example.com", NDC_T_AXFR, 0, NULL, 0);
	assert_int_equal(ndc_dns_parse_query(pkt, len, &q), -EPERM);
	assert_int_equal(q.rcode, NDC_RCODE_REFUSED);
	assert_true(q.question_ok);
	len = mkquery(pkt, 0, "example.com", NDC_T_IXFR, 0, NULL, 0);
	assert_int_equal(ndc_dns_parse_query(pkt, len, &q), -EPERM);
	assert_int_equal(q.rcode, NDC_RCODE_REFUSED);

	len = mkquery(pkt, NDC_F_QR, "example.com", NDC_T_A, 0, NULL, 0);
	assert_int_equal(ndc_dns_parse_query(pkt, len, &q), -EPROTO);
	assert_true(q.hdr_ok);
	assert_int_equal(ndc_dns_parse_query(pkt, 11, &q), -EPROTO);
	assert_false(q.hdr_ok);
	assert_int_equal(ndc_dns_parse_query(pkt, 0, &q), -EPROTO);
}

/* Question hygiene (abi.h ndc_qtype_verdict): reserved and meta types FORMERR, never looked up. */
static void test_parse_query_reserved_types(void **state)
{
	static const uint16_t formerr[] = {
	    0,	NDC_T_OPT, 128, 200, 248, 249 /* TKEY */, 250 /* TSIG */, 253 /* MAILB */,
	    254 /* MAILA */};
	static const uint16_t data[] = {NDC_T_A, 127, 256, NDC_T_ANY, 65280, 65535};
	uint8_t pkt[512];
	struct ndc_query q;
	size_t len;
	(void)state;

	for (size_t i = 0; i < sizeof(formerr) / sizeof(formerr[0]); i++) {
		len = mkquery(pkt, 0x0100, "example.com", formerr[i], 0, NULL, 0);
		assert_int_equal(ndc_dns_parse_query(pkt, len, &q), -EDOM);
		assert_int_equal(q.rcode, NDC_RCODE_FORMERR);
		assert_true(q.question_ok); /* the FORMERR echoes the question */
		assert_int_equal(q.qtype, formerr[i]);
	}
	for (size_t i = 0; i < sizeof(data) / sizeof(data[0]); i++) {
		len = mkquery(pkt, 0x0100, "example.com", data[i], 0, NULL, 0);
		assert_int_equal(ndc_dns_parse_query(pkt, len, &q), 0);
	}
	/* A malformed query stays FORMERR by its malformation: the type is not looked at first. */
	len = mkquery(pkt, 0x0100, "example.com", 0, 0, NULL, 0);
	assert_int_equal(ndc_dns_parse_query(pkt, len + 1, &q), -EBADMSG);
}

/* An answer of RRs of the given types (owner: the question), TTL ttl each; an SOA in authority
 * with the given TTL and MINIMUM when soa_ttl is not 0. */
static void mk_typed_answer(struct answer_buf *ab, uint8_t rcode, const uint16_t *types, size_t n,
			    uint32_t ttl, uint32_t soa_ttl, uint32_t soa_min)
{
	uint8_t q[NDC_NAME_MAX], soa[64];
	size_t qlen = wire("www.example", q), sl = 0;
	struct ndc_ab b;

	ndc_ab_init(&b, &ab->a, A_CAP, q, qlen);
	for (size_t i = 0; i < n; i++) {
		if (types[i] == NDC_T_CNAME)
			ndc_ab_rr(&b, NDC_SEC_ANSWER, q, qlen, NDC_T_CNAME, NDC_C_IN, ttl,
				  (const uint8_t *)"\1t\7example", 11);
		else
			ndc_ab_rr(&b, NDC_SEC_ANSWER, q, qlen, types[i], NDC_C_IN, ttl,
				  (const uint8_t *)"\1\2\3\4", 4);
	}
	if (soa_ttl) {
		sl = wire("ns.example", soa);
		sl += wire("h.example", soa + sl);
		for (int k = 0; k < 4; k++, sl += 4)
			memcpy(soa + sl, "\0\0\0\1", 4);
		soa[sl++] = (uint8_t)(soa_min >> 24), soa[sl++] = (uint8_t)(soa_min >> 16);
		soa[sl++] = (uint8_t)(soa_min >> 8), soa[sl++] = (uint8_t)soa_min;
		ndc_ab_rr(&b, NDC_SEC_AUTHORITY, q + 4, qlen - 4, NDC_T_SOA, NDC_C_IN, soa_ttl, soa,
			  sl);
	}
	assert_int_equal(ndc_ab_finish(&b, rcode, false), 0);
}

/* RFC 2308: positive, NXDOMAIN, NODATA, and a NODATA behind a CNAME (2.2.1) by the SOA's TTL. */
static void test_answer_cache_ttl(void **state)
{
	static struct answer_buf ab;
	static const uint16_t a[] = {NDC_T_A}, cname[] = {NDC_T_CNAME},
			      chain_a[] = {NDC_T_CNAME, NDC_T_A};
	uint32_t ttl = 0;
	(void)state;

	mk_typed_answer(&ab, NDC_RCODE_NOERROR, a, 1, 300, 0, 0);
	assert_int_equal(ndc_answer_cache_ttl(&ab.a, NDC_T_A, &ttl), 0);
	assert_int_equal(ttl, 300);
	mk_typed_answer(&ab, NDC_RCODE_NOERROR, chain_a, 2, 300, 60, 30);
	assert_int_equal(ndc_answer_cache_ttl(&ab.a, NDC_T_A, &ttl), 0);
	assert_int_equal(ttl, 60); /* positive: min_ttl, every RR's TTL (the SOA's 60 included) */
	mk_typed_answer(&ab, NDC_RCODE_NXDOMAIN, NULL, 0, 0, 900, 60);
	assert_int_equal(ndc_answer_cache_ttl(&ab.a, NDC_T_A, &ttl), 1);
	assert_int_equal(ttl, 60);
	mk_typed_answer(&ab, NDC_RCODE_NOERROR, NULL, 0, 0, 45, 600);
	assert_int_equal(ndc_answer_cache_ttl(&ab.a, NDC_T_AAAA, &ttl), 1);
	assert_int_equal(ttl, 45);
	/* CNAME only, the target has no AAAA: NODATA, by the SOA (60), not the CNAME's 3600. */
	mk_typed_answer(&ab, NDC_RCODE_NOERROR, cname, 1, 3600, 900, 60);
	assert_int_equal(ndc_answer_cache_ttl(&ab.a, NDC_T_AAAA, &ttl), 1);
	assert_int_equal(ttl, 60);
	/* ... and never longer than the CNAME itself lives. */
	mk_typed_answer(&ab, NDC_RCODE_NOERROR, cname, 1, 20, 900, 60);
	assert_int_equal(ndc_answer_cache_ttl(&ab.a, NDC_T_AAAA, &ttl), 1);
	assert_int_equal(ttl, 20);
	/* The CNAME asked for (or ANY): positive. */
	mk_typed_answer(&ab, NDC_RCODE_NOERROR, cname, 1, 3600, 900, 60);
	assert_int_equal(ndc_answer_cache_ttl(&ab.a, NDC_T_CNAME, &ttl), 0);
	assert_int_equal(ndc_answer_cache_ttl(&ab.a, NDC_T_ANY, &ttl), 0);
	/* Aliases alone with no SOA: kept as the upstream gave them. */
	mk_typed_answer(&ab, NDC_RCODE_NOERROR, cname, 1, 3600, 0, 0);
	assert_int_equal(ndc_answer_cache_ttl(&ab.a, NDC_T_A, &ttl), 0);
	assert_int_equal(ttl, 3600);
	/* Negative without an SOA: not cached (RFC 2308 5). */
	mk_typed_answer(&ab, NDC_RCODE_NXDOMAIN, NULL, 0, 0, 0, 0);
	assert_int_equal(ndc_answer_cache_ttl(&ab.a, NDC_T_A, &ttl), -ENOENT);
	mk_typed_answer(&ab, NDC_RCODE_SERVFAIL, NULL, 0, 0, 0, 0);
	assert_int_equal(ndc_answer_cache_ttl(&ab.a, NDC_T_A, &ttl), -EINVAL);
}

static void test_answer_cap_ttls(void **state)
{
	static struct answer_buf ab;
	static const uint16_t chain_a[] = {NDC_T_CNAME, NDC_T_A};
	uint8_t out[512];
	size_t len;
	uint8_t qpkt[512];
	struct ndc_query q;
	(void)state;

	mk_typed_answer(&ab, NDC_RCODE_NOERROR, chain_a, 2, 86400, 7200, 7200);
	assert_int_equal(ndc_answer_cap_ttls(&ab.a, 3600), 0);
	assert_int_equal(ab.a.min_ttl, 3600);
	len = mkquery(qpkt, 0x0100, "www.example", NDC_T_A, 0, NULL, 0);
	assert_int_equal(ndc_dns_parse_query(qpkt, len, &q), 0);
	assert_int_equal(ndc_dns_write_reply(&q, &ab.a, 0, 0, 512, out, sizeof(out), &len), 0);
	/* Every TTL in the reply (answer and authority) is at most the cap: read them back. */
	{
		size_t pos = 12 + 13 + 4;
		unsigned n = ndc_get16(out + 6) + ndc_get16(out + 8);

		assert_int_equal(n, 3);
		for (unsigned i = 0; i < n; i++) {
			uint8_t name[NDC_NAME_MAX];
			size_t nl;

			assert_int_equal(ndc_name_unpack(out, len, &pos, name, &nl), 0);
			assert_true(ndc_get32(out + pos + 4) <= 3600);
			assert_int_equal(ndc_get32(out + pos + 4), 3600);
			pos += 10 + ndc_get16(out + pos + 8);
		}
	}
	/* Below the cap nothing changes. */
	mk_typed_answer(&ab, NDC_RCODE_NOERROR, chain_a, 2, 30, 0, 0);
	assert_int_equal(ndc_answer_cap_ttls(&ab.a, 3600), 0);
	assert_int_equal(ab.a.min_ttl, 30);
	/* Inconsistent data is refused, never half rewritten into something else. */
	ab.a.ancount = 5;
	assert_int_equal(ndc_answer_cap_ttls(&ab.a, 10), -EINVAL);
}

static void test_write_query(void **state)
{
	static const uint8_t exp[] = {0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0,
				      0,    1,	  1,	'a',  0, 0, 1, 0, 1, 0,
				      0,    41,	  0x04, 0xd0, 0, 0, 0, 0, 0, 0};
	uint8_t n[NDC_NAME_MAX], out[64];
	size_t nlen = wire("a", n), len;
	struct ndc_query q;
	(void)state;

	assert_int_equal(
	    ndc_dns_write_query(0x1234, n, nlen, NDC_T_A, NDC_C_IN, 1232, out, sizeof(out), &len),
	    0);
	assert_int_equal(len, sizeof(exp));
	assert_memory_equal(out, exp, sizeof(exp));
	assert_int_equal(ndc_dns_parse_query(out, len, &q), 0);
	assert_true(q.has_edns);
	assert_false(q.do_bit);
	assert_int_equal(
	    ndc_dns_write_query(0x1234, n, nlen, NDC_T_A, NDC_C_IN, 0, out, sizeof(out), &len), 0);
	assert_int_equal(len, 19);
	assert_int_equal(out[11], 0);
	assert_int_equal(ndc_dns_write_query(1, n, nlen, NDC_T_A, NDC_C_IN, 0, out, 18, &len),
			 -ENOSPC);
	assert_int_equal(ndc_dns_write_query(1, n, nlen - 1, NDC_T_A, NDC_C_IN, 0, out, 64, &len),
			 -EINVAL);
}

/* ------------------------------------------------------------------------------------------- */

/* www.example.com: www at 12, example at 16, com at 24; data starts at 12 + 17 + 4 = 33. */
static void build_sample(struct answer_buf *ab, size_t cap)
{
	uint8_t q[NDC_NAME_MAX], n[NDC_NAME_MAX], rd[300];
	size_t qlen = wire("www.example.com", q), nlen, rdlen;
	struct ndc_ab b;

	ndc_ab_init(&b, &ab->a, cap, q, qlen);
	nlen = wire("web.Example.com", rd);
	ndc_ab_rr(&b, NDC_SEC_ANSWER, q, qlen, NDC_T_CNAME, NDC_C_IN, 300, rd, nlen);
	nlen = wire("web.example.com", n);
	ndc_ab_rr(&b, NDC_SEC_ANSWER, n, nlen, NDC_T_A, NDC_C_IN, 60, (const uint8_t *)"\12\0\0\1",
		  4);
	memcpy(rd, "\0\1\0\2\0\x35", 6);
	rdlen = 6 + wire("srv.example.com", rd + 6);
	ndc_ab_rr(&b, NDC_SEC_ANSWER, q, qlen, NDC_T_SRV, NDC_C_IN, 30, rd, rdlen);
	rdlen = wire("ns.example.com", rd);
	rdlen += wire("hostmaster.example.com", rd + rdlen);
	memset(rd + rdlen, 0, 20);
	rd[rdlen + 3] = 7; /* serial 7 */
	rdlen += 20;
	nlen = wire("example.com", n);
	ndc_ab_rr(&b, NDC_SEC_AUTHORITY, n, nlen, NDC_T_SOA, NDC_C_IN, 3600, rd, rdlen);
	nlen = wire("srv.example.com", n);
	ndc_ab_rr(&b, NDC_SEC_ADDITIONAL, n, nlen, NDC_T_A, NDC_C_IN, 5,
		  (const uint8_t *)"\12\0\0\2", 4);
	assert_int_equal(ndc_ab_finish(&b, NDC_RCODE_NOERROR, true), 0);
}

static const uint8_t sample_data[] = {
    /* www CNAME web.example.com: owner is the question, target shares "example.com" */
    0xc0, 0x0c, 0, 5, 0, 1, 0, 0, 1, 44, 0, 6, 3, 'w', 'e', 'b', 0xc0, 0x10,
    /* web.example.com A: points at the CNAME target (33 + 12 = 45) */
    0xc0, 0x2d, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 10, 0, 0, 1,
    /* SRV: target not compressed (RFC 2782) */
    0xc0, 0x0c, 0, 33, 0, 1, 0, 0, 0, 30, 0, 23, 0, 1, 0, 2, 0, 0x35, 3, 's', 'r', 'v', 7, 'e', 'x',
    'a', 'm', 'p', 'l', 'e', 3, 'c', 'o', 'm', 0,
    /* SOA in authority: owner and both names compressed */
    0xc0, 0x10, 0, 6, 0, 1, 0, 0, 0x0e, 0x10, 0, 38, 2, 'n', 's', 0xc0, 0x10, 10, 'h', 'o', 's',
    't', 'm', 'a', 's', 't', 'e', 'r', 0xc0, 0x10, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0,
    /* additional A for srv.example.com: SRV targets are not pointer targets either */
    3, 's', 'r', 'v', 0xc0, 0x10, 0, 1, 0, 1, 0, 0, 0, 5, 0, 4, 10, 0, 0, 2};

static void test_builder_compression(void **state)
{
	static struct answer_buf ab;
	(void)state;

	build_sample(&ab, A_CAP);
	assert_int_equal(ab.a.ancount, 3);
	assert_int_equal(ab.a.nscount, 1);
	assert_int_equal(ab.a.arcount, 1);
	assert_int_equal(ab.a.qname_len, 17);
	assert_int_equal(ab.a.min_ttl, 5);
	assert_int_equal(ab.a.aa, 1);
	assert_int_equal(ab.a.len, sizeof(sample_data));
	assert_memory_equal(ab.a.data, sample_data, sizeof(sample_data));
}

static void test_builder_errors(void **state)
{
	static struct answer_buf ab;
	uint8_t q[NDC_NAME_MAX];
	size_t qlen = wire("x.example", q);
	struct ndc_ab b;
	(void)state;

	/* section order */
	ndc_ab_init(&b, &ab.a, A_CAP, q, qlen);
	ndc_ab_rr(&b, NDC_SEC_AUTHORITY, q, qlen, NDC_T_A, NDC_C_IN, 1, (const uint8_t *)"1234", 4);
	ndc_ab_rr(&b, NDC_SEC_ANSWER, q, qlen, NDC_T_A, NDC_C_IN, 1, (const uint8_t *)"1234", 4);
	assert_int_equal(ndc_ab_finish(&b, 0, false), -EINVAL);
	/* CNAME rdata that is not one name; MX without its name; bad owner */
	ndc_ab_init(&b, &ab.a, A_CAP, q, qlen);
	ndc_ab_rr(&b, NDC_SEC_ANSWER, q, qlen, NDC_T_CNAME, NDC_C_IN, 1, q, qlen - 1);
	assert_int_equal(ndc_ab_finish(&b, 0, false), -EINVAL);
	ndc_ab_init(&b, &ab.a, A_CAP, q, qlen);
	ndc_ab_rr(&b, NDC_SEC_ANSWER, q, qlen, NDC_T_CNAME, NDC_C_IN, 1, (const uint8_t *)"\0\0",
		  2);
	assert_int_equal(ndc_ab_finish(&b, 0, false), -EINVAL);
	ndc_ab_init(&b, &ab.a, A_CAP, q, qlen);
	ndc_ab_rr(&b, NDC_SEC_ANSWER, q, qlen, NDC_T_MX, NDC_C_IN, 1, (const uint8_t *)"\0\1", 2);
	assert_int_equal(ndc_ab_finish(&b, 0, false), -EINVAL);
	ndc_ab_init(&b, &ab.a, A_CAP, q, qlen);
	ndc_ab_rr(&b, NDC_SEC_ANSWER, (const uint8_t *)"\xc0\x0c", 2, NDC_T_A, NDC_C_IN, 1,
		  (const uint8_t *)"1234", 4);
	assert_int_equal(ndc_ab_finish(&b, 0, false), -EINVAL);
	/* does not fit; then an empty answer: NXDOMAIN with min_ttl 0 */
	ndc_ab_init(&b, &ab.a, 15, q, qlen);
	ndc_ab_rr(&b, NDC_SEC_ANSWER, q, qlen, NDC_T_A, NDC_C_IN, 1, (const uint8_t *)"1234", 4);
	assert_int_equal(ndc_ab_finish(&b, 0, false), -ENOSPC);
	ndc_ab_init(&b, &ab.a, 16, q, qlen);
	ndc_ab_rr(&b, NDC_SEC_ANSWER, q, qlen, NDC_T_A, NDC_C_IN, 1, (const uint8_t *)"1234", 4);
	assert_int_equal(ndc_ab_finish(&b, 0, false), 0);
	assert_int_equal(ab.a.len, 16);
	ndc_ab_init(&b, &ab.a, 16, q, qlen);
	assert_int_equal(ndc_ab_finish(&b, NDC_RCODE_NXDOMAIN, true), 0);
	assert_int_equal(ab.a.len, 0);
	assert_int_equal(ab.a.min_ttl, 0);
	assert_int_equal(ab.a.rcode, NDC_RCODE_NXDOMAIN);
	/* case-insensitive match against the question; the root owner is never compressed */
	ndc_ab_init(&b, &ab.a, A_CAP, q, qlen);
	ndc_ab_rr(&b, NDC_SEC_ANSWER, (const uint8_t *)"\7EXAMPLE", 9, NDC_T_NS, NDC_C_IN, 1,
		  (const uint8_t *)"", 1);
	assert_int_equal(ndc_ab_finish(&b, 0, false), 0);
	assert_int_equal(ab.a.len, 13);
	assert_memory_equal(ab.a.data, "\xc0\x0e\0\2\0\1\0\0\0\1\0\1\0", 13);
}

/* ------------------------------------------------------------------------------------------- */

static void parse_q(struct ndc_query *q, uint8_t *pkt, uint16_t flags, const char *name,
		    uint16_t qtype, bool edns, bool do_bit)
{
	uint8_t opt[32];
	size_t olen = edns ? mkopt(opt, 1232, 0, do_bit, NULL, 0) : 0;
	size_t len = mkquery(pkt, flags, name, qtype, edns, opt, olen);

	assert_int_equal(ndc_dns_parse_query(pkt, len, q), 0);
}

static void test_write_reply_exact(void **state)
{
	static struct answer_buf ab;
	uint8_t pkt[512], out[1500], exp[1500];
	struct ndc_query q;
	size_t len, hq = 12 + 17 + 4;
	(void)state;

	build_sample(&ab, A_CAP);
	parse_q(&q, pkt, NDC_F_RD | NDC_F_CD, "WWW.example.COM", NDC_T_CNAME, false, false);
	assert_int_equal(ndc_dns_write_reply(&q, &ab.a, 0, 0, 512, out, sizeof(out), &len), 0);
	/* header: ID, QR AA RD RA CD, counts; then the question as received, then the data */
	memcpy(exp, "\xbe\xef\x85\x90\0\1\0\3\0\1\0\1", 12);
	memcpy(exp + 12, pkt + 12, 21);
	memcpy(exp + hq, sample_data, sizeof(sample_data));
	assert_int_equal(len, hq + sizeof(sample_data));
	assert_memory_equal(out, exp, len);

	/* age 100: 300 -> 200, 60/30/5 -> 0, 3600 -> 3500 */
	assert_int_equal(ndc_dns_write_reply(&q, &ab.a, 100, 0, 512, out, sizeof(out), &len), 0);
	ndc_put32(exp + hq + 6, 200);
	ndc_put32(exp + hq + 18 + 6, 0);
	ndc_put32(exp + hq + 34 + 6, 0);
	ndc_put32(exp + hq + 69 + 6, 3500);
	ndc_put32(exp + hq + 119 + 10, 0);
	assert_memory_equal(out, exp, len);
	/* stale (RFC 8767 4): every TTL 30, the ones below it (the additional A's 5) included,
	 * whatever the age */
	for (uint32_t age = 0; age <= 100000; age += 100000) {
		assert_int_equal(
		    ndc_dns_write_reply(&q, &ab.a, age, NDC_STALE_TTL, 512, out, sizeof(out), &len),
		    0);
		ndc_put32(exp + hq + 6, 30);
		ndc_put32(exp + hq + 18 + 6, 30);
		ndc_put32(exp + hq + 34 + 6, 30);
		ndc_put32(exp + hq + 69 + 6, 30);
		ndc_put32(exp + hq + 119 + 10, 30);
		assert_memory_equal(out, exp, len);
	}
	/* the answer data itself is untouched */
	assert_memory_equal(ab.a.data, sample_data, sizeof(sample_data));

	/* cap too small, question length mismatch */
	assert_int_equal(ndc_dns_write_reply(&q, &ab.a, 0, 0, 512, out, len - 1, &len), -ENOSPC);
	parse_q(&q, pkt, 0, "ww.example.com", NDC_T_A, false, false);
	assert_int_equal(ndc_dns_write_reply(&q, &ab.a, 0, 0, 512, out, sizeof(out), &len),
			 -EINVAL);
}

static void test_write_reply_edns_and_truncation(void **state)
{
	static struct answer_buf ab;
	static const uint8_t opt_do[] = {0, 0, 41, 0x04, 0xd0, 0, 0, 0x80, 0, 0, 0};
	uint8_t pkt[512], out[1500];
	struct ndc_query q;
	size_t len, full, hq = 12 + 17 + 4;
	(void)state;

	build_sample(&ab, A_CAP);
	parse_q(&q, pkt, 0, "www.example.com", NDC_T_A, true, true);
	full = hq + sizeof(sample_data) + 11;
	assert_int_equal(ndc_dns_write_reply(&q, &ab.a, 0, 0, 1232, out, sizeof(out), &len), 0);
	assert_int_equal(len, full);
	assert_int_equal(ndc_get16(out + 10), 2); /* the additional A and the OPT */
	assert_memory_equal(out + len - 11, opt_do, 11);
	assert_int_equal(ndc_get16(out + 2) & NDC_F_TC, 0);

	/* one byte short: the additional A goes, no TC */
	assert_int_equal(ndc_dns_write_reply(&q, &ab.a, 0, 0, full - 1, out, sizeof(out), &len), 0);
	assert_int_equal(len, full - 20);
	assert_int_equal(ndc_get16(out + 2) & NDC_F_TC, 0);
	assert_int_equal(ndc_get16(out + 6), 3);
	assert_int_equal(ndc_get16(out + 8), 1);
	assert_int_equal(ndc_get16(out + 10), 1);
	assert_memory_equal(out + hq, sample_data, sizeof(sample_data) - 20);
	assert_memory_equal(out + len - 11, opt_do, 11);

	/* the answer itself does not fit: TC, empty sections, OPT kept */
	assert_int_equal(ndc_dns_write_reply(&q, &ab.a, 0, 0, full - 21, out, sizeof(out), &len),
			 0);
	assert_int_equal(len, hq + 11);
	assert_int_equal(ndc_get16(out + 2), NDC_F_QR | NDC_F_RA | NDC_F_AA | NDC_F_TC);
	assert_int_equal(ndc_get16(out + 4), 1);
	assert_int_equal(ndc_get16(out + 6), 0);
	assert_int_equal(ndc_get16(out + 8), 0);
	assert_int_equal(ndc_get16(out + 10), 1);
	assert_memory_equal(out + hq, opt_do, 11);

	/* without EDNS: TC reply is header + question only */
	parse_q(&q, pkt, NDC_F_RD, "www.example.com", NDC_T_A, false, false);
	assert_int_equal(ndc_dns_write_reply(&q, &ab.a, 0, 0, 100, out, sizeof(out), &len), 0);
	assert_int_equal(len, hq);
	assert_int_equal(ndc_get16(out + 2), NDC_F_QR | NDC_F_RA | NDC_F_RD | NDC_F_AA | NDC_F_TC);
	assert_int_equal(ndc_get16(out + 10), 0);
	/* not even that fits the limit */
	assert_int_equal(ndc_dns_write_reply(&q, &ab.a, 0, 0, hq - 1, out, sizeof(out), &len),
			 -ENOSPC);
}

static void test_write_reply_big_answer_udp(void **state)
{
	/* 40 A records do not fit 512 bytes but do fit 1232: TC only at 512 */
	static struct answer_buf ab;
	uint8_t pkt[512], out[1500], q[NDC_NAME_MAX];
	size_t qlen = wire("many.example", q), len;
	struct ndc_query qq;
	struct ndc_ab b;
	(void)state;

	ndc_ab_init(&b, &ab.a, A_CAP, q, qlen);
	for (int i = 0; i < 40; i++) {
		uint8_t ip[4] = {10, 0, 0, (uint8_t)i};

		ndc_ab_rr(&b, NDC_SEC_ANSWER, q, qlen, NDC_T_A, NDC_C_IN, 30, ip, 4);
	}
	assert_int_equal(ndc_ab_finish(&b, 0, false), 0);
	assert_int_equal(ab.a.len, 40 * 16);
	parse_q(&qq, pkt, 0, "many.example", NDC_T_A, false, false);
	assert_int_equal(
	    ndc_dns_write_reply(&qq, &ab.a, 0, 0, ndc_dns_udp_limit(&qq), out, sizeof(out), &len),
	    0);
	assert_true(ndc_get16(out + 2) & NDC_F_TC);
	assert_int_equal(len, 12 + qlen + 4);
	parse_q(&qq, pkt, 0, "many.example", NDC_T_A, true, false);
	assert_int_equal(
	    ndc_dns_write_reply(&qq, &ab.a, 0, 0, ndc_dns_udp_limit(&qq), out, sizeof(out), &len),
	    0);
	assert_false(ndc_get16(out + 2) & NDC_F_TC);
	assert_int_equal(ndc_get16(out + 6), 40);
	assert_int_equal(len, 12 + qlen + 4 + 640 + 11);
}

static void test_write_error(void **state)
{
	uint8_t pkt[512], opt[32], out[512];
	struct ndc_query q;
	size_t len, plen, olen;
	(void)state;

	/* FORMERR with the question echoed (trailing garbage after it) */
	plen = mkquery(pkt, NDC_F_RD, "Example.com", NDC_T_A, 0, NULL, 0);
	pkt[plen] = 0xff;
	assert_int_equal(ndc_dns_parse_query(pkt, plen + 1, &q), -EBADMSG);
	assert_int_equal(ndc_dns_write_error(&q, q.rcode, out, sizeof(out), &len), 0);
	assert_int_equal(len, plen);
	assert_memory_equal(out, "\xbe\xef\x81\x81\0\1\0\0\0\0\0\0", 12);
	assert_memory_equal(out + 12, pkt + 12, plen - 12);

	/* FORMERR header only (QDCOUNT 2) */
	pkt[5] = 2;
	assert_int_equal(ndc_dns_parse_query(pkt, plen, &q), -EBADMSG);
	assert_false(q.question_ok);
	assert_int_equal(ndc_dns_write_error(&q, q.rcode, out, sizeof(out), &len), 0);
	assert_int_equal(len, 12);
	assert_memory_equal(out, "\xbe\xef\x81\x81\0\0\0\0\0\0\0\0", 12);

	/* NOTIMP echoes the opcode */
	plen = mkquery(pkt, 4 << 11, "example.com", NDC_T_SOA, 0, NULL, 0);
	assert_int_equal(ndc_dns_parse_query(pkt, plen, &q), -EOPNOTSUPP);
	assert_int_equal(ndc_dns_write_error(&q, q.rcode, out, sizeof(out), &len), 0);
	assert_int_equal(ndc_get16(out + 2), NDC_F_QR | NDC_F_RA | 4 << 11 | NDC_RCODE_NOTIMP);

	/* BADVERS: rcode 0 in the header, 1 in the OPT TTL's top byte, DO echoed */
	olen = mkopt(opt, 4096, 2, true, NULL, 0);
	plen = mkquery(pkt, 0, "example.com", NDC_T_A, 1, opt, olen);
	assert_int_equal(ndc_dns_parse_query(pkt, plen, &q), -ENOTSUP);
	assert_int_equal(ndc_dns_write_error(&q, q.rcode, out, sizeof(out), &len), 0);
	assert_int_equal(len, plen);
	assert_int_equal(ndc_get16(out + 2), NDC_F_QR | NDC_F_RA);
	assert_int_equal(ndc_get16(out + 10), 1);
	assert_memory_equal(out + plen - 11, "\0\0\x29\x04\xd0\x01\0\x80\0\0\0", 11);

	/* SERVFAIL with EDNS: plain OPT */
	olen = mkopt(opt, 4096, 0, false, NULL, 0);
	plen = mkquery(pkt, NDC_F_RD, "example.com", NDC_T_A, 1, opt, olen);
	assert_int_equal(ndc_dns_parse_query(pkt, plen, &q), 0);
	assert_int_equal(ndc_dns_write_error(&q, NDC_RCODE_SERVFAIL, out, sizeof(out), &len), 0);
	assert_int_equal(ndc_get16(out + 2), NDC_F_QR | NDC_F_RA | NDC_F_RD | 2);
	assert_memory_equal(out + plen - 11, "\0\0\x29\x04\xd0\0\0\0\0\0\0", 11);
	assert_int_equal(ndc_dns_write_error(&q, NDC_RCODE_SERVFAIL, out, plen - 1, &len), -ENOSPC);

	/* nothing to answer without a header */
	assert_int_equal(ndc_dns_parse_query(pkt, 5, &q), -EPROTO);
	assert_int_equal(ndc_dns_write_error(&q, NDC_RCODE_FORMERR, out, sizeof(out), &len),
			 -EINVAL);
}

/* ------------------------------------------------------------------------------------------- */

static void test_parse_response_round_trip(void **state)
{
	static struct answer_buf ab, back;
	uint8_t pkt[512], out[1500], l[NDC_NAME_MAX];
	size_t len, llen = wire("www.example.com", l);
	struct ndc_query q;
	bool tc = true;
	(void)state;

	build_sample(&ab, A_CAP);
	/* 0x20 question, EDNS on: the OPT must be dropped, the question compared caselessly */
	parse_q(&q, pkt, NDC_F_RD, "wWw.eXample.com", NDC_T_A, true, true);
	assert_int_equal(ndc_dns_write_reply(&q, &ab.a, 0, 0, 1232, out, sizeof(out), &len), 0);
	assert_int_equal(
	    ndc_dns_parse_response(out, len, l, llen, NDC_T_A, NDC_C_IN, &back.a, A_CAP, &tc), 0);
	assert_false(tc);
	assert_int_equal(back.a.ancount, 3);
	assert_int_equal(back.a.nscount, 1);
	assert_int_equal(back.a.arcount, 1);
	assert_int_equal(back.a.aa, 1);
	assert_int_equal(back.a.rcode, 0);
	assert_int_equal(back.a.min_ttl, 5);
	assert_int_equal(back.a.qname_len, llen);
	assert_int_equal(back.a.len, ab.a.len);
	assert_memory_equal(back.a.data, ab.a.data, ab.a.len);

	/* wrong question: name, type, class */
	wire("xxx.example.com", l);
	assert_int_equal(
	    ndc_dns_parse_response(out, len, l, llen, NDC_T_A, NDC_C_IN, &back.a, A_CAP, &tc),
	    -EBADMSG);
	wire("www.example.com", l);
	assert_int_equal(
	    ndc_dns_parse_response(out, len, l, llen, NDC_T_AAAA, NDC_C_IN, &back.a, A_CAP, &tc),
	    -EBADMSG);
	assert_int_equal(ndc_dns_parse_response(out, len, l, llen, NDC_T_A, 3, &back.a, A_CAP, &tc),
			 -EBADMSG);
	/* too small */
	assert_int_equal(
	    ndc_dns_parse_response(out, len, l, llen, NDC_T_A, NDC_C_IN, &back.a, 100, &tc),
	    -ENOSPC);
	/* not a response; trailing byte; cut mid-RR without TC */
	out[2] &= 0x7f;
	assert_int_equal(
	    ndc_dns_parse_response(out, len, l, llen, NDC_T_A, NDC_C_IN, &back.a, A_CAP, &tc),
	    -EBADMSG);
	out[2] |= 0x80;
	out[len] = 0;
	assert_int_equal(
	    ndc_dns_parse_response(out, len + 1, l, llen, NDC_T_A, NDC_C_IN, &back.a, A_CAP, &tc),
	    -EBADMSG);
	assert_int_equal(
	    ndc_dns_parse_response(out, len - 20, l, llen, NDC_T_A, NDC_C_IN, &back.a, A_CAP, &tc),
	    -EBADMSG);
	/* with TC the same cut message is fine: the RRs before the cut, and tc reported */
	out[2] |= NDC_F_TC >> 8;
	assert_int_equal(
	    ndc_dns_parse_response(out, len - 20, l, llen, NDC_T_A, NDC_C_IN, &back.a, A_CAP, &tc),
	    0);
	assert_true(tc);
	assert_int_equal(back.a.ancount, 3);
	assert_int_equal(back.a.nscount, 1);
	assert_int_equal(back.a.arcount, 0);
}

/* A response as an upstream would send it, compressed in ways our builder never does. */
static size_t upstream_response(uint8_t *m)
{
	struct ndc_wbuf w;

	ndc_wbuf_init(&w, m, 512);
	ndc_wbuf_bytes(&w, "\x12\x34\x81\x83\0\1\0\2\0\1\0\1", 12);   /* NXDOMAIN, RD RA */
	ndc_wbuf_bytes(&w, "\1a\3SvC\0\0\x21\0\1", 11);		      /* a.SvC SRV IN, 12..22 */
	ndc_wbuf_bytes(&w, "\xc0\x0c\0\x21\0\1\0\0\0\x0a\0\x0a", 12); /* 23: SRV, ttl 10 */
	ndc_wbuf_bytes(&w, "\0\1\0\2\0\3\1t\xc0\x0e", 10); /* 35: target t.svc compressed */
	ndc_wbuf_bytes(&w, "\xc0\x0c\0\x0c\0\1\0\0\0\x14\0\x04", 12); /* 45: PTR, ttl 20 */
	ndc_wbuf_bytes(&w, "\1p\xc0\x29", 4);			      /* 57: p.t.svc (t at 41) */
	ndc_wbuf_bytes(&w, "\xc0\x0e\0\x63\0\1\0\0\0\x09\0\x02\xab\xcd", 14); /* 61: SPF=99 raw */
	ndc_wbuf_bytes(&w, "\0\0\x29\x10\0\0\0\0\0\0\0", 11);		      /* 75: OPT */
	assert_int_equal(w.err, 0);
	return w.len;
}

static void test_parse_response_decompress(void **state)
{
	static struct answer_buf back;
	static const uint8_t exp[] = {
	    0xc0, 0x0c, 0,   33,  0,   1, 0, 0, 0, 10, 0, 13, 0,    1,	 0, 2,	 0,    3,    1,
	    't',  3,	'S', 'v', 'C', 0, /* SRV target written out in full, case as the upstream
					     had it */
	    0xc0, 0x0c, 0,   12,  0,   1, 0, 0, 0, 20, 0, 6,  1,    'p', 1, 't', 0xc0, 0x0e, /* PTR
											      */
	    0xc0, 0x0e, 0,   99,  0,   1, 0, 0, 0, 9,  0, 2,  0xab, 0xcd};
	uint8_t m[512], l[NDC_NAME_MAX];
	size_t len = upstream_response(m), llen = wire("a.svc", l);
	bool tc;
	(void)state;

	assert_int_equal(
	    ndc_dns_parse_response(m, len, l, llen, NDC_T_SRV, NDC_C_IN, &back.a, A_CAP, &tc), 0);
	assert_int_equal(back.a.rcode, NDC_RCODE_NXDOMAIN);
	assert_int_equal(back.a.aa, 0);
	assert_int_equal(back.a.ancount, 2);
	assert_int_equal(back.a.nscount, 1);
	assert_int_equal(back.a.arcount, 0);
	assert_int_equal(back.a.min_ttl, 9);
	assert_int_equal(back.a.len, sizeof(exp));
	assert_memory_equal(back.a.data, exp, sizeof(exp));
	/* RFC 2181 8: a TTL with the top bit set is read as zero */
	m[67] = 0x80;
	assert_int_equal(
	    ndc_dns_parse_response(m, len, l, llen, NDC_T_SRV, NDC_C_IN, &back.a, A_CAP, &tc), 0);
	assert_int_equal(back.a.min_ttl, 0);
	assert_int_equal(ndc_get32(back.a.data + sizeof(exp) - 8), 0);
}

static void test_parse_response_malformed(void **state)
{
	static struct answer_buf back;
	uint8_t m[512], l[NDC_NAME_MAX];
	size_t len, llen = wire("a.svc", l);
	bool tc;
	(void)state;

	/* pointer loop in the PTR target: points at itself */
	len = upstream_response(m);
	memcpy(m + 57, "\xc0\x39\0\0", 4);
	assert_int_equal(
	    ndc_dns_parse_response(m, len, l, llen, NDC_T_SRV, NDC_C_IN, &back.a, A_CAP, &tc),
	    -EBADMSG);
	/* RDLEN one past the end of the PTR's name, and one short */
	len = upstream_response(m);
	m[56] = 5;
	assert_int_equal(
	    ndc_dns_parse_response(m, len, l, llen, NDC_T_SRV, NDC_C_IN, &back.a, A_CAP, &tc),
	    -EBADMSG);
	m[56] = 3;
	assert_int_equal(
	    ndc_dns_parse_response(m, len, l, llen, NDC_T_SRV, NDC_C_IN, &back.a, A_CAP, &tc),
	    -EBADMSG);
	/* RDLEN of the last RR past the message */
	len = upstream_response(m);
	m[len - 1] = 1;
	assert_int_equal(
	    ndc_dns_parse_response(m, len, l, llen, NDC_T_SRV, NDC_C_IN, &back.a, A_CAP, &tc),
	    -EBADMSG);
	/* extended RCODE in the OPT */
	len = upstream_response(m);
	m[len - 6] = 1;
	assert_int_equal(
	    ndc_dns_parse_response(m, len, l, llen, NDC_T_SRV, NDC_C_IN, &back.a, A_CAP, &tc),
	    -EBADMSG);
	/* OPT in the answer section: counts 4/0/0 */
	len = upstream_response(m);
	m[7] = 4;
	m[9] = 0;
	m[11] = 0;
	assert_int_equal(
	    ndc_dns_parse_response(m, len, l, llen, NDC_T_SRV, NDC_C_IN, &back.a, A_CAP, &tc),
	    -EBADMSG);
	/* a count larger than the RRs present */
	len = upstream_response(m);
	m[11] = 2;
	assert_int_equal(
	    ndc_dns_parse_response(m, len, l, llen, NDC_T_SRV, NDC_C_IN, &back.a, A_CAP, &tc),
	    -EBADMSG);
	/* opcode, QDCOUNT, short */
	len = upstream_response(m);
	m[2] |= 0x08;
	assert_int_equal(
	    ndc_dns_parse_response(m, len, l, llen, NDC_T_SRV, NDC_C_IN, &back.a, A_CAP, &tc),
	    -EBADMSG);
	len = upstream_response(m);
	m[5] = 0;
	assert_int_equal(
	    ndc_dns_parse_response(m, len, l, llen, NDC_T_SRV, NDC_C_IN, &back.a, A_CAP, &tc),
	    -EBADMSG);
	assert_int_equal(
	    ndc_dns_parse_response(m, 11, l, llen, NDC_T_SRV, NDC_C_IN, &back.a, A_CAP, &tc),
	    -EBADMSG);
}

/* ------------------------------------------------------------------------------------------- */

/*
 * libknot, when the build found it (the test suite's dependencies install it), is an independent
 * decoder of what we write.
 */
#ifdef NDC_WITH_LIBKNOT
#include <libknot/libknot.h>
#define HAVE_KNOT_HEADERS 1
#endif

static void test_libknot_cross_check(void **state)
{
	(void)state;
#ifdef HAVE_KNOT_HEADERS
	static struct answer_buf ab;
	uint8_t pkt[512], out[1500], err_out[512], opt[32];
	struct ndc_query q;
	size_t len, elen, olen;
	char text[NDC_NAME_MAX * 4];
	static const char *const owners[] = {"www.example.com.", "web.example.com.",
					     "www.example.com.", "example.com.",
					     "srv.example.com."};
	int i = 0;

	build_sample(&ab, A_CAP);
	parse_q(&q, pkt, NDC_F_RD, "WWW.example.com", NDC_T_CNAME, true, true);
	assert_int_equal(ndc_dns_write_reply(&q, &ab.a, 10, 0, 1232, out, sizeof(out), &len), 0);
	knot_pkt_t *kp = knot_pkt_new(out, (uint16_t)len, NULL);
	assert_non_null(kp);
	assert_int_equal(knot_pkt_parse(kp, 0), KNOT_EOK);
	assert_int_equal(knot_wire_get_rcode(out), 0);
	assert_true(knot_wire_get_aa(out));
	assert_int_equal(knot_pkt_qtype(kp), NDC_T_CNAME);
	assert_non_null(knot_dname_to_str(text, knot_pkt_qname(kp), sizeof(text)));
	assert_string_equal(text, "www.example.com.");
	assert_true(knot_pkt_has_edns(kp));
	assert_true(knot_pkt_has_dnssec(kp));
	for (int s = KNOT_ANSWER; s <= KNOT_ADDITIONAL; s++) {
		const knot_pktsection_t *sec = knot_pkt_section(kp, s);
		/* libknot keeps the OPT in the additional section */
		static const int counts[] = {3, 1, 2};

		assert_int_equal(sec->count, counts[s]);
		for (int k = 0; k < sec->count; k++) {
			const knot_rrset_t *rr = knot_pkt_rr(sec, k);

			if (rr->type == NDC_T_OPT)
				continue;
			assert_true(i < 5);

			assert_non_null(knot_dname_to_str(text, rr->owner, sizeof(text)));
			/* knot lowercases nothing: the owner from the question keeps its case */
			assert_true(strcasecmp(text, owners[i]) == 0);
			if (rr->type == NDC_T_CNAME) {
				knot_rdata_t *rd = knot_rdataset_at(&rr->rrs, 0);

				knot_dname_to_str(text, rd->data, sizeof(text));
				assert_string_equal(text, "web.example.com.");
				assert_int_equal(rr->ttl, 290);
			}
			if (rr->type == NDC_T_SRV) {
				knot_rdata_t *rd = knot_rdataset_at(&rr->rrs, 0);

				knot_dname_to_str(text, rd->data + 6, sizeof(text));
				assert_string_equal(text, "srv.example.com.");
			}
			i++;
		}
	}
	assert_int_equal(i, 5);
	knot_pkt_free(kp);

	/* BADVERS as libknot reads it: extended rcode 16 */
	olen = mkopt(opt, 1232, 1, false, NULL, 0);
	len = mkquery(pkt, 0, "example.com", NDC_T_A, 1, opt, olen);
	assert_int_equal(ndc_dns_parse_query(pkt, len, &q), -ENOTSUP);
	assert_int_equal(ndc_dns_write_error(&q, q.rcode, err_out, sizeof(err_out), &elen), 0);
	kp = knot_pkt_new(err_out, (uint16_t)elen, NULL);
	assert_non_null(kp);
	assert_int_equal(knot_pkt_parse(kp, 0), KNOT_EOK);
	assert_int_equal(knot_pkt_ext_rcode(kp), KNOT_RCODE_BADVERS);
	knot_pkt_free(kp);
#else
	skip();
#endif
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_name_from_text),
	    cmocka_unit_test(test_name_to_text),
	    cmocka_unit_test(test_name_helpers),
	    cmocka_unit_test(test_name_unpack),
	    cmocka_unit_test(test_name_unpack_too_long),
	    cmocka_unit_test(test_parse_query_plain),
	    cmocka_unit_test(test_parse_query_0x20),
	    cmocka_unit_test(test_parse_query_edns),
	    cmocka_unit_test(test_parse_query_formerr),
	    cmocka_unit_test(test_parse_query_notimp_refused_drop),
	    cmocka_unit_test(test_parse_query_reserved_types),
	    cmocka_unit_test(test_answer_cache_ttl),
	    cmocka_unit_test(test_answer_cap_ttls),
	    cmocka_unit_test(test_write_query),
	    cmocka_unit_test(test_builder_compression),
	    cmocka_unit_test(test_builder_errors),
	    cmocka_unit_test(test_write_reply_exact),
	    cmocka_unit_test(test_write_reply_edns_and_truncation),
	    cmocka_unit_test(test_write_reply_big_answer_udp),
	    cmocka_unit_test(test_write_error),
	    cmocka_unit_test(test_parse_response_round_trip),
	    cmocka_unit_test(test_parse_response_decompress),
	    cmocka_unit_test(test_parse_response_malformed),
	    cmocka_unit_test(test_libknot_cross_check),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
