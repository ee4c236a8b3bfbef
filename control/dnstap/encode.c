// SPDX-License-Identifier: MIT
/* One event as a dnstap protobuf message (dnstap.proto), packed into a caller's buffer. */
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "dnstap.pb-c.h"
#include "internal.h"

static ProtobufCBinaryData bytes(const void *p, size_t len)
{
	return (ProtobufCBinaryData){.len = len, .data = (uint8_t *)(uintptr_t)p};
}

int ndc_dnstap_encode(const struct ndc_dnstap_event *ev, const char *identity, const char *version,
		      uint8_t *buf, size_t cap, size_t *ret_len)
{
	Dnstap__Dnstap dt = DNSTAP__DNSTAP__INIT;
	Dnstap__Message m = DNSTAP__MESSAGE__INIT;
	size_t alen = ev->family == AF_INET6 ? 16 : 4;
	bool query = ev->type == NDC_DNSTAP_CLIENT_QUERY || ev->type == NDC_DNSTAP_FORWARDER_QUERY;

	dt.type = DNSTAP__DNSTAP__TYPE__MESSAGE;
	dt.message = &m;
	if (identity) {
		dt.has_identity = 1;
		dt.identity = bytes(identity, strlen(identity));
	}
	if (version) {
		dt.has_version = 1;
		dt.version = bytes(version, strlen(version));
	}
	if (ev->extra_len) {
		dt.has_extra = 1;
		dt.extra = bytes(ev->extra, ev->extra_len);
	}
	m.type = (Dnstap__Message__Type)ev->type;
	m.has_socket_family = 1;
	m.socket_family =
	    ev->family == AF_INET6 ? DNSTAP__SOCKET_FAMILY__INET6 : DNSTAP__SOCKET_FAMILY__INET;
	m.has_socket_protocol = 1;
	m.socket_protocol = ev->protocol == IPPROTO_TCP ? DNSTAP__SOCKET_PROTOCOL__TCP
							: DNSTAP__SOCKET_PROTOCOL__UDP;
	if (ev->query_addr) {
		m.has_query_address = 1;
		m.query_address = bytes(ev->query_addr, alen);
	}
	if (ev->response_addr) {
		m.has_response_address = 1;
		m.response_address = bytes(ev->response_addr, alen);
	}
	if (ev->query_port) {
		m.has_query_port = 1;
		m.query_port = ev->query_port;
	}
	if (ev->response_port) {
		m.has_response_port = 1;
		m.response_port = ev->response_port;
	}
	if (ev->query_time.tv_sec) {
		m.has_query_time_sec = m.has_query_time_nsec = 1;
		m.query_time_sec = (uint64_t)ev->query_time.tv_sec;
		m.query_time_nsec = (uint32_t)ev->query_time.tv_nsec;
	}
	if (ev->response_time.tv_sec) {
		m.has_response_time_sec = m.has_response_time_nsec = 1;
		m.response_time_sec = (uint64_t)ev->response_time.tv_sec;
		m.response_time_nsec = (uint32_t)ev->response_time.tv_nsec;
	}
	if (query) {
		m.has_query_message = 1;
		m.query_message = bytes(ev->wire, ev->wire_len);
	} else {
		m.has_response_message = 1;
		m.response_message = bytes(ev->wire, ev->wire_len);
	}
	/* packed_size walks the message once more; it is the writer thread's cost, not the caller's
	 */
	if (dnstap__dnstap__get_packed_size(&dt) > cap)
		return -ENOBUFS;
	*ret_len = dnstap__dnstap__pack(&dt, buf);
	return 0;
}
