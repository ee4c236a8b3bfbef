// SPDX-License-Identifier: MIT
/* The dnstap encoder, decoded back with protobuf-c's own unpacker (the generated schema). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "dnstap.pb-c.h"
#include "dnstap/internal.h"

/* www.example.org. A IN, id 0x1234, RD */
static const uint8_t query[] = {0x12, 0x34, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00,
				0x00, 3,    'w',  'w',	'w',  7,    'e',  'x',	'a',  'm',  'p',
				'l',  'e',  3,	  'o',	'r',  'g',  0,	  0x00, 0x01, 0x00, 0x01};

static Dnstap__Dnstap *roundtrip(const struct ndc_dnstap_event *ev, const char *id, const char *ver)
{
	static uint8_t buf[NDC_DNSTAP_FRAME_MAX];
	Dnstap__Dnstap *dt;
	size_t len = 0;

	assert_int_equal(ndc_dnstap_encode(ev, id, ver, buf, sizeof(buf), &len), 0);
	assert_true(len > 0);
	dt = dnstap__dnstap__unpack(NULL, len, buf);
	assert_non_null(dt);
	assert_int_equal(dt->type, DNSTAP__DNSTAP__TYPE__MESSAGE);
	assert_non_null(dt->message);
	return dt;
}

static void test_client_query_v4(void **state)
{
	struct in_addr client, node;
	const char *extra = "default/web-7d4b9c";
	struct ndc_dnstap_event ev = {
	    .type = NDC_DNSTAP_CLIENT_QUERY,
	    .family = AF_INET,
	    .protocol = IPPROTO_UDP,
	    .query_addr = &client,
	    .response_addr = &node,
	    .query_port = 40123,
	    .response_port = 53,
	    .query_time = {.tv_sec = 1764000000, .tv_nsec = 123456789},
	    .wire = query,
	    .wire_len = sizeof(query),
	    .extra = extra,
	    .extra_len = strlen(extra),
	};
	Dnstap__Dnstap *dt;
	Dnstap__Message *m;

	(void)state;
	inet_pton(AF_INET, "169.254.100.2", &client);
	inet_pton(AF_INET, "169.254.20.10", &node);
	dt = roundtrip(&ev, "node-a", "ndcache test");
	m = dt->message;
	assert_true(dt->has_identity);
	assert_memory_equal(dt->identity.data, "node-a", 6);
	assert_int_equal(dt->identity.len, 6);
	assert_true(dt->has_version);
	assert_int_equal(dt->version.len, strlen("ndcache test"));
	assert_true(dt->has_extra);
	assert_int_equal(dt->extra.len, strlen(extra));
	assert_memory_equal(dt->extra.data, extra, strlen(extra));
	assert_int_equal(m->type, DNSTAP__MESSAGE__TYPE__CLIENT_QUERY);
	assert_int_equal(m->type, 5); /* the protocol's number, not just the same enum */
	assert_true(m->has_socket_family);
	assert_int_equal(m->socket_family, DNSTAP__SOCKET_FAMILY__INET);
	assert_true(m->has_socket_protocol);
	assert_int_equal(m->socket_protocol, DNSTAP__SOCKET_PROTOCOL__UDP);
	assert_int_equal(m->query_address.len, 4);
	assert_memory_equal(m->query_address.data, &client, 4);
	assert_int_equal(m->response_address.len, 4);
	assert_memory_equal(m->response_address.data, &node, 4);
	assert_int_equal(m->query_port, 40123);
	assert_int_equal(m->response_port, 53);
	assert_true(m->has_query_time_sec && m->has_query_time_nsec);
	assert_int_equal(m->query_time_sec, 1764000000);
	assert_int_equal(m->query_time_nsec, 123456789);
	assert_false(m->has_response_time_sec);
	assert_true(m->has_query_message);
	assert_int_equal(m->query_message.len, sizeof(query));
	assert_memory_equal(m->query_message.data, query, sizeof(query));
	assert_false(m->has_response_message);
	dnstap__dnstap__free_unpacked(dt, NULL);
}

static void test_forwarder_response_v6_tcp(void **state)
{
	struct in6_addr self, upstream;
	uint8_t resp[sizeof(query)];
	struct ndc_dnstap_event ev = {
	    .type = NDC_DNSTAP_FORWARDER_RESPONSE,
	    .family = AF_INET6,
	    .protocol = IPPROTO_TCP,
	    .query_addr = &self,
	    .response_addr = &upstream,
	    .query_port = 51000,
	    .response_port = 53,
	    .query_time = {.tv_sec = 1764000000, .tv_nsec = 1},
	    .response_time = {.tv_sec = 1764000001, .tv_nsec = 999999999},
	    .wire = resp,
	    .wire_len = sizeof(resp),
	};
	Dnstap__Dnstap *dt;
	Dnstap__Message *m;

	(void)state;
	memcpy(resp, query, sizeof(resp));
	resp[2] |= 0x80; /* QR */
	inet_pton(AF_INET6, "fd00::1", &self);
	inet_pton(AF_INET6, "fd00::53", &upstream);
	dt = roundtrip(&ev, NULL, NULL);
	m = dt->message;
	assert_false(dt->has_identity);
	assert_false(dt->has_version);
	assert_false(dt->has_extra);
	assert_int_equal(m->type, 8);
	assert_int_equal(m->socket_family, DNSTAP__SOCKET_FAMILY__INET6);
	assert_int_equal(m->socket_protocol, DNSTAP__SOCKET_PROTOCOL__TCP);
	assert_int_equal(m->query_address.len, 16);
	assert_memory_equal(m->query_address.data, &self, 16);
	assert_memory_equal(m->response_address.data, &upstream, 16);
	assert_int_equal(m->response_time_sec, 1764000001);
	assert_int_equal(m->response_time_nsec, 999999999);
	assert_true(m->has_response_message);
	assert_memory_equal(m->response_message.data, resp, sizeof(resp));
	assert_false(m->has_query_message);
	dnstap__dnstap__free_unpacked(dt, NULL);
}

/* What the caller leaves out is absent in the record, not zero. */
static void test_absent_fields(void **state)
{
	struct ndc_dnstap_event ev = {
	    .type = NDC_DNSTAP_CLIENT_RESPONSE,
	    .family = AF_INET,
	    .protocol = IPPROTO_UDP,
	    .wire = query,
	    .wire_len = sizeof(query),
	};
	Dnstap__Dnstap *dt;
	Dnstap__Message *m;

	(void)state;
	dt = roundtrip(&ev, NULL, NULL);
	m = dt->message;
	assert_int_equal(m->type, 6);
	assert_false(m->has_query_address);
	assert_false(m->has_response_address);
	assert_false(m->has_query_port);
	assert_false(m->has_response_port);
	assert_false(m->has_query_time_sec);
	assert_false(m->has_response_time_sec);
	assert_false(m->has_query_zone);
	dnstap__dnstap__free_unpacked(dt, NULL);
}

/* The largest event fits NDC_DNSTAP_FRAME_MAX; a small buffer is refused, not overrun. */
static void test_sizes(void **state)
{
	static uint8_t wire[65535], buf[NDC_DNSTAP_FRAME_MAX + 16];
	char extra[NDC_DNSTAP_EXTRA_MAX], id[NDC_DNSTAP_IDENTITY_MAX + 1];
	struct in6_addr a = IN6ADDR_LOOPBACK_INIT;
	struct ndc_dnstap_event ev = {
	    .type = NDC_DNSTAP_FORWARDER_QUERY,
	    .family = AF_INET6,
	    .protocol = IPPROTO_TCP,
	    .query_addr = &a,
	    .response_addr = &a,
	    .query_port = 65535,
	    .response_port = 65535,
	    .query_time = {.tv_sec = INT32_MAX, .tv_nsec = 999999999},
	    .response_time = {.tv_sec = INT32_MAX, .tv_nsec = 999999999},
	    .wire = wire,
	    .wire_len = sizeof(wire),
	    .extra = extra,
	    .extra_len = sizeof(extra),
	};
	size_t len = 0;

	(void)state;
	memset(extra, 'x', sizeof(extra));
	memset(id, 'i', sizeof(id) - 1);
	id[sizeof(id) - 1] = 0;
	buf[NDC_DNSTAP_FRAME_MAX] = 0xa5;
	assert_int_equal(ndc_dnstap_event_check(&ev), 0);
	assert_int_equal(ndc_dnstap_encode(&ev, id, id, buf, NDC_DNSTAP_FRAME_MAX, &len), 0);
	assert_true(len <= NDC_DNSTAP_FRAME_MAX);
	assert_int_equal(buf[NDC_DNSTAP_FRAME_MAX], 0xa5);
	assert_int_equal(ndc_dnstap_encode(&ev, id, id, buf, len - 1, &len), -ENOBUFS);
}

static void test_event_check(void **state)
{
	char big[NDC_DNSTAP_EXTRA_MAX + 1] = {0};
	struct ndc_dnstap_event ok = {
	    .type = NDC_DNSTAP_CLIENT_QUERY,
	    .family = AF_INET,
	    .protocol = IPPROTO_UDP,
	    .wire = query,
	    .wire_len = sizeof(query),
	};
	struct ndc_dnstap_event ev;

	(void)state;
	assert_int_equal(ndc_dnstap_event_check(&ok), 0);
	ev = ok;
	ev.type = 4;
	assert_int_equal(ndc_dnstap_event_check(&ev), -EINVAL);
	ev = ok;
	ev.type = 9;
	assert_int_equal(ndc_dnstap_event_check(&ev), -EINVAL);
	ev = ok;
	ev.family = AF_UNIX;
	assert_int_equal(ndc_dnstap_event_check(&ev), -EINVAL);
	ev = ok;
	ev.protocol = IPPROTO_SCTP;
	assert_int_equal(ndc_dnstap_event_check(&ev), -EINVAL);
	ev = ok;
	ev.wire_len = 0;
	assert_int_equal(ndc_dnstap_event_check(&ev), -EINVAL);
	ev = ok;
	ev.wire_len = 65536;
	assert_int_equal(ndc_dnstap_event_check(&ev), -EINVAL);
	ev = ok;
	ev.wire = NULL;
	assert_int_equal(ndc_dnstap_event_check(&ev), -EINVAL);
	ev = ok;
	ev.extra_len = 3;
	assert_int_equal(ndc_dnstap_event_check(&ev), -EINVAL); /* length without bytes */
	ev = ok;
	ev.extra = big;
	ev.extra_len = sizeof(big);
	assert_int_equal(ndc_dnstap_event_check(&ev), -EMSGSIZE);
	ev = ok;
	ev.query_time.tv_nsec = 1000000000;
	assert_int_equal(ndc_dnstap_event_check(&ev), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_client_query_v4),
	    cmocka_unit_test(test_forwarder_response_v6_tcp),
	    cmocka_unit_test(test_absent_fields),
	    cmocka_unit_test(test_sizes),
	    cmocka_unit_test(test_event_check),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
