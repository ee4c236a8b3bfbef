/* SPDX-License-Identifier: MIT */
/*
 * An IP address of either family, as every layer passes it: the object store and the record
 * builder (Kubernetes addresses), the config (listen addresses), the socket path, the kernel and
 * DPDK tables. Part of the base layer (dataplane/wire/): includes nothing of the project.
 */
#ifndef NDC_IP_H
#define NDC_IP_H

#include <stdint.h>

struct ndc_ip {
	uint8_t family;	  /* AF_INET or AF_INET6 */
	uint8_t addr[16]; /* network order; IPv4 in the first 4 bytes, the rest zero */
};

/*
 * Parses s in the textual form of family (AF_INET, AF_INET6, or 0 for either) into *ret_ip,
 * zeroed first. 0, or -EINVAL when s is no address of that family (*ret_ip stays zeroed).
 */
int ndc_ip_parse(const char *s, int family, struct ndc_ip *ret_ip);

#endif
