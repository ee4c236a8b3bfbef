// SPDX-License-Identifier: MIT
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>
#include <time.h>

#include "answer_rows.h"
#include "records/records.h"

void ndc_row_query(const struct ndc_row *r, uint8_t *dns, size_t *len)
{
	/* A client cookie (RFC 7873), then an ECS option (RFC 7871: IPv4, /24, 192.0.2.0). */
	static const uint8_t cookie[20] = {0, 10, 0, 8, 1, 2, 3, 4, 5,	6,
					   7, 8,  0, 8, 0, 4, 0, 1, 24, 0};
	struct ndc_pkt_query q = {
	    .id = 0xbeef,
	    .flags = NDC_ROW_RD ^ r->flags_xor,
	    .name = r->name,
	    .qtype = r->qtype,
	    .qclass = r->qclass,
	    .edns_size = r->edns,
	    .edns_version = r->edns_version,
	    .edns_flags = r->edns_flags,
	    .opts = cookie,
	    .opt_len = r->opt_len,
	};

	assert_int_equal(ndc_pkt_dns_query(&q, dns, NDC_PKT_MAX, len), 0);
	if (r->mutate)
		r->mutate(dns, len);
}

void ndc_row_frame(const struct ndc_row *r, const uint8_t *dns, size_t dlen, uint8_t *frame,
		   size_t *flen)
{
	struct ndc_pkt_addrs a = {.v6 = r->v6, .sport = 40000, .dport = r->dport ? r->dport : 53};

	memcpy(a.src_mac, ndc_pkt_client_mac, 6);
	memcpy(a.dst_mac, ndc_pkt_node_mac, 6);
	memcpy(a.saddr, r->v6 ? ndc_pkt_client6 : ndc_pkt_client4, 16);
	memcpy(a.daddr, r->v6 ? ndc_pkt_node6 : r->wrong_dst ? ndc_pkt_other4 : ndc_pkt_node4, 16);
	assert_int_equal(ndc_pkt_build(&a, &r->o, dns, dlen, frame, NDC_PKT_MAX, flen), 0);
}

size_t ndc_row_socket_reply(const struct ndc_records *rec, const uint8_t *dns, size_t len,
			    const struct ndc_answer *src, uint32_t age, uint8_t *out)
{
	union ndc_row_answer ans;
	struct ndc_query q;
	size_t rlen;

	assert_int_equal(ndc_dns_parse_query(dns, len, &q), 0);
	if (!src) {
		assert_int_equal(ndc_records_lookup(rec, q.lname, q.qname_len, q.qtype, &ans.a,
						    NDC_ANSWER_DATA_MAX),
				 0);
		src = &ans.a;
	}
	if (src->qname_len != q.qname_len) {
		/* the NXDOMAIN template serves every name */
		memcpy(&ans, src, ndc_answer_size(src));
		ans.a.qname_len = q.qname_len;
		src = &ans.a;
	}
	assert_int_equal(
	    ndc_dns_write_reply(&q, src, age, 0, ndc_dns_udp_limit(&q), out, NDC_PKT_MAX, &rlen),
	    0);
	return rlen;
}

void ndc_row_assert_reply(const char *what, const uint8_t *in, size_t inlen, const uint8_t *out,
			  size_t outlen, const uint8_t *want, size_t wlen)
{
	struct ndc_pkt_parsed qp, rp;

	assert_int_equal(ndc_pkt_parse(in, inlen, &qp), 0);
	if (ndc_pkt_parse(out, outlen, &rp) != 0)
		fail_msg("%s: reply frame does not parse (%zu bytes)", what, outlen);
	assert_int_equal(rp.l2_pad, 0); /* the reply is sized to its datagram */
	assert_memory_equal(rp.dst_mac, qp.src_mac, 6);
	assert_memory_equal(rp.src_mac, qp.dst_mac, 6);
	assert_int_equal(rp.v6, qp.v6);
	assert_memory_equal(rp.saddr, qp.daddr, 16);
	assert_memory_equal(rp.daddr, qp.saddr, 16);
	assert_int_equal(rp.sport, qp.dport);
	assert_int_equal(rp.dport, qp.sport);
	assert_int_equal(rp.ttl, 64);
	if (!rp.ip_csum_ok)
		fail_msg("%s: IPv4 header checksum wrong", what);
	if (!rp.udp_csum_ok)
		fail_msg("%s: UDP checksum wrong (0x%04x)", what, rp.udp_csum);
	if (!rp.v6)
		assert_int_equal(rp.udp_csum, 0);
	if (rp.plen != wlen || memcmp(rp.payload, want, wlen)) {
		size_t i = 0;

		while (i < wlen && i < rp.plen && rp.payload[i] == want[i])
			i++;
		fail_msg(
		    "%s: DNS reply differs from the socket path's at byte %zu (%zu vs %zu bytes)",
		    what, i, rp.plen, wlen);
	}
}

void ndc_row_a_records(struct ndc_answer *a, const uint8_t *lname, size_t nlen, int n, uint32_t ttl)
{
	struct ndc_ab b;

	ndc_ab_init(&b, a, NDC_ANSWER_DATA_MAX, lname, nlen);
	for (int i = 0; i < n; i++) {
		uint8_t ip[4] = {192, 0, 2, (uint8_t)(i + 1)};

		ndc_ab_rr(&b, NDC_SEC_ANSWER, lname, nlen, NDC_T_A, NDC_C_IN, ttl + (uint32_t)i, ip,
			  4);
	}
	assert_int_equal(ndc_ab_finish(&b, NDC_RCODE_NOERROR, false), 0);
}

uint64_t ndc_row_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
