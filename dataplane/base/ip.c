// SPDX-License-Identifier: MIT
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include <ndc/ip.h>

int ndc_ip_parse(const char *s, int family, struct ndc_ip *ret_ip)
{
	memset(ret_ip, 0, sizeof(*ret_ip));
	if ((family == 0 || family == AF_INET) && inet_pton(AF_INET, s, ret_ip->addr) == 1) {
		ret_ip->family = AF_INET;
		return 0;
	}
	if ((family == 0 || family == AF_INET6) && inet_pton(AF_INET6, s, ret_ip->addr) == 1) {
		ret_ip->family = AF_INET6;
		return 0;
	}
	/* POSIX does not say what inet_pton leaves in dst when it fails */
	memset(ret_ip, 0, sizeof(*ret_ip));
	return -EINVAL;
}
