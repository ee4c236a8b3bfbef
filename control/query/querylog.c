// SPDX-License-Identifier: MIT
/*
 * Query log lines, as CoreDNS's log plugin writes them ({remote}:{port} - {>id} "{type} {class}
 * {name} {proto} {size} {>do} {>bufsize}" {rcode} {>rflags} {rsize} {duration}), as structured
 * fields (ndc/log.h), plus where the answer came from. Off by default and sampled: a line is a
 * write(2), which a query path otherwise never makes.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <ndc/log.h>

#include "internal.h"

/* A name in presentation form: up to 4 bytes (\\DDD) per wire byte. */
#define NAME_TEXT_MAX (NDC_NAME_MAX * 4 + 1)

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

bool ndc_qlog_sampled(uint32_t ppm)
{
	static _Thread_local uint64_t x;

	if (ppm >= 1000000)
		return true;
	if (!x)
		x = now_us() ^ ((uint64_t)(uintptr_t)&x << 16) ^ 0x9e3779b97f4a7c15ULL;
	/* xorshift64*: sampling only, no need for more. */
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	return (x * 0x2545f4914f6cdd1dULL >> 32) % 1000000 < ppm;
}

void ndc_qlog_begin(struct ndc_qlog *lg, bool tcp, const struct sockaddr_storage *peer, size_t len)
{
	lg->on = true;
	lg->tcp = tcp;
	lg->size = (uint16_t)(len > UINT16_MAX ? UINT16_MAX : len);
	lg->t0_us = now_us();
	if (peer)
		lg->peer = *peer;
	else
		lg->peer.ss_family = AF_UNSPEC;
}

static const char *type_name(uint16_t t, char buf[16])
{
	static const struct {
		uint16_t t;
		const char *name;
	} names[] = {
	    {1, "A"},	   {2, "NS"},	  {5, "CNAME"},	 {6, "SOA"},	{12, "PTR"},
	    {15, "MX"},	   {16, "TXT"},	  {28, "AAAA"},	 {33, "SRV"},	{35, "NAPTR"},
	    {39, "DNAME"}, {43, "DS"},	  {46, "RRSIG"}, {47, "NSEC"},	{48, "DNSKEY"},
	    {64, "SVCB"},  {65, "HTTPS"}, {251, "IXFR"}, {252, "AXFR"}, {255, "ANY"},
	    {257, "CAA"},
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i].t == t)
			return names[i].name;
	snprintf(buf, 16, "TYPE%u", t); /* RFC 3597 5 */
	return buf;
}

static const char *rcode_name(unsigned rc, char buf[16])
{
	static const char *const names[] = {"NOERROR",	"FORMERR", "SERVFAIL",
					    "NXDOMAIN", "NOTIMP",  "REFUSED"};

	if (rc < sizeof(names) / sizeof(names[0]))
		return names[rc];
	if (rc == NDC_RCODE_BADVERS)
		return "BADVERS";
	snprintf(buf, 16, "RCODE%u", rc);
	return buf;
}

void ndc_qlog_end(const struct ndc_qlog *lg, const struct ndc_query *q, const uint8_t *reply,
		  size_t rlen, const char *source)
{
	char client[INET6_ADDRSTRLEN + 8] = "-", name[NAME_TEXT_MAX] = "-", tb[16], cb[16], rb[16];
	unsigned rcode = rlen >= NDC_DNS_HDR_LEN ? reply[3] & 0xf : 0;
	const char *type = "-", *class = "-";

	if (lg->peer.ss_family == AF_INET || lg->peer.ss_family == AF_INET6)
		ndc_routes_addr_name(&lg->peer, client, sizeof(client));
	if (q->question_ok) {
		if (ndc_name_to_text(q->lname, q->qname_len, name, sizeof(name)) < 0)
			snprintf(name, sizeof(name), "-");
		type = type_name(q->qtype, tb);
		class = "IN";
		if (q->qclass != NDC_C_IN) {
			snprintf(cb, sizeof(cb), "CLASS%u", q->qclass); /* RFC 3597 5 */
			class = cb;
		}
	}
	/* An error reply to a query with a newer EDNS version: the extended code (RFC 6891). */
	if (rcode == 0 && q->rcode == NDC_RCODE_BADVERS && !strcmp(source, "error"))
		rcode = NDC_RCODE_BADVERS;
	const struct ndc_log_field f[] = {
	    NDC_LOG_STR("client", client),
	    NDC_LOG_NUM("id", q->hdr_ok ? q->id : 0),
	    NDC_LOG_STR("type", type),
	    NDC_LOG_STR("class", class),
	    NDC_LOG_STR("name", name),
	    NDC_LOG_STR("proto", lg->tcp ? "tcp" : "udp"),
	    NDC_LOG_NUM("size", lg->size),
	    NDC_LOG_STR("do", q->do_bit ? "true" : "false"),
	    NDC_LOG_NUM("bufsize", q->has_edns ? q->udp_size : 512),
	    NDC_LOG_STR("rcode", rlen ? rcode_name(rcode, rb) : "-"),
	    NDC_LOG_NUM("rsize", rlen),
	    NDC_LOG_STR("source", source),
	    NDC_LOG_NUM("duration_us", now_us() - lg->t0_us),
	};

	ndc_log_fields(NDC_LOG_INFO, "query", f, sizeof(f) / sizeof(f[0]));
}
