// SPDX-License-Identifier: MIT
/* The text of one value: numbers, IP addresses with ports, domain names. */
#include "internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>

/* Digits only, leading zeros allowed (a fraction's), no overflow. */
bool ndc_config_u64_digits(const char *s, size_t len, uint64_t *ret)
{
	uint64_t v = 0;

	for (size_t i = 0; i < len; i++) {
		unsigned int d = (unsigned char)s[i] - '0';
		if (d > 9 || v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*ret = v;
	return len > 0;
}

/* Plain decimal only: no sign, no leading zero (YAML 1.1 reads 010 as octal), no overflow. */
bool ndc_config_u64(const char *s, size_t len, uint64_t *ret)
{
	uint64_t v = 0;

	if (len == 0 || (s[0] == '0' && len > 1))
		return false;
	for (size_t i = 0; i < len; i++) {
		unsigned int d = (unsigned char)s[i] - '0';
		if (d > 9 || v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*ret = v;
	return true;
}

bool ndc_config_ip(const char *s, struct ndc_ip *ret)
{
	return ndc_ip_parse(s, 0, ret) == 0;
}

/*
 * "ip", "ip:port", "[v6]", "[v6]:port" or a bare v6 literal; *ret_port is left alone when no port
 * is given. Returns 0, -EINVAL for a bad address, -ERANGE for a bad or (need_port) missing port.
 */
int ndc_config_hostport(const char *s, bool need_port, struct ndc_ip *ret_ip, uint16_t *ret_port)
{
	const char *colon = strchr(s, ':'), *host = s, *port = NULL, *end;
	char buf[INET6_ADDRSTRLEN + 1];
	int family = AF_INET;
	size_t hlen;
	uint64_t v;

	if (s[0] == '[') {
		end = strchr(s, ']');
		if (!end || (end[1] && end[1] != ':'))
			return -EINVAL;
		host = s + 1;
		hlen = (size_t)(end - host);
		port = end[1] ? end + 2 : NULL;
		family = AF_INET6;
	} else if (colon && colon != strrchr(s, ':')) {
		/* Two or more colons: a bare IPv6 literal, which cannot carry a port. */
		hlen = strlen(s);
		family = AF_INET6;
	} else {
		hlen = colon ? (size_t)(colon - s) : strlen(s);
		port = colon ? colon + 1 : NULL;
	}
	if (hlen >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, host, hlen);
	buf[hlen] = '\0';
	if (!ndc_config_ip(buf, ret_ip) || ret_ip->family != family)
		return -EINVAL;
	if (!port)
		return need_port ? -ERANGE : 0;
	if (!ndc_config_u64(port, strlen(port), &v) || v < 1 || v > 65535)
		return -ERANGE;
	*ret_port = (uint16_t)v;
	return 0;
}

const char *ndc_config_check_domain(char *s)
{
	size_t len = strlen(s), label = 0;

	if (len && s[len - 1] == '.')
		s[--len] = '\0';
	if (!len)
		return "empty name";
	if (len > DNS_NAME_MAX)
		return "longer than 253 characters";
	for (size_t i = 0; i <= len; i++) {
		char ch = s[i];
		if (ch >= 'A' && ch <= 'Z')
			s[i] = ch = (char)(ch - 'A' + 'a');
		if (ch == '.' || ch == '\0') {
			if (!label)
				return "empty label";
			if (label > DNS_LABEL_MAX)
				return "label longer than 63 characters";
			if (s[i - 1] == '-')
				return "label ends with '-'";
			label = 0;
			continue;
		}
		if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' ||
		      ch == '_'))
			return "only a-z, 0-9, '-' and '_' are allowed in labels";
		if (ch == '-' && !label)
			return "label starts with '-'";
		label++;
	}
	return NULL;
}

static void to_sockaddr(const struct ndc_ip *ip, uint16_t port, struct sockaddr_storage *ss)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	ss->ss_family = ip->family;
	_Static_assert(offsetof(struct sockaddr_in, sin_port) ==
			   offsetof(struct sockaddr_in6, sin6_port),
		       "both put the port right after the family");
	sin->sin_port = htons(port);
	if (ip->family == AF_INET)
		memcpy(&sin->sin_addr, ip->addr, 4);
	else
		memcpy(&sin6->sin6_addr, ip->addr, 16);
}

int ndc_config_parse_server(const char *s, struct sockaddr_storage *ret)
{
	uint16_t port = 53; /* RFC 1035 4.2 */
	struct ndc_ip ip;
	int r = ndc_config_hostport(s, false, &ip, &port);

	if (r == 0)
		to_sockaddr(&ip, port, ret);
	return r;
}
