// SPDX-License-Identifier: MIT
/*
 * The kube-dns ConfigMap's stubDomains and upstreamNameservers parsers (config_kube_dns.c): any
 * bytes go to both, and what a success promises is checked; an error is one line.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "config/config.h"

static void check(bool ok)
{
	if (!ok)
		abort();
}

static void check_servers(const struct sockaddr_storage *v, size_t n)
{
	check(n >= 1 && n <= NDC_CFG_MAX_ADDRS);
	for (size_t i = 0; i < n; i++) {
		check(v[i].ss_family == AF_INET || v[i].ss_family == AF_INET6);
		check(((const struct sockaddr_in *)&v[i])->sin_port != 0);
	}
}

static void check_err(int r, const char *err, size_t cap)
{
	check(r == -EINVAL || r == -ENOMEM);
	check(r == -ENOMEM || (err[0] && strlen(err) < cap && !strchr(err, '\n')));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sockaddr_storage ups[NDC_CFG_MAX_ADDRS];
	struct ndc_stub_domain *sd = NULL;
	char err[256] = "";
	size_t n = 0;
	int r;

	r = ndc_kube_dns_stub_domains((const char *)data, size, &sd, &n, err, sizeof(err));
	if (r == 0) {
		check(n <= NDC_CFG_MAX_STUBS && (!n || sd));
		for (size_t i = 0; i < n; i++) {
			size_t len = strlen(sd[i].zone);

			check(len >= 1 && len <= 253 && sd[i].zone[len - 1] != '.');
			for (size_t j = 0; j < len; j++)
				check(!(sd[i].zone[j] >= 'A' && sd[i].zone[j] <= 'Z'));
			for (size_t j = 0; j < i; j++)
				check(strcmp(sd[i].zone, sd[j].zone));
			check_servers(sd[i].servers, sd[i].n_servers);
		}
		ndc_config_stubs_free(sd, n);
	} else {
		check(!sd && !n);
		check_err(r, err, sizeof(err));
	}
	err[0] = '\0';
	r = ndc_kube_dns_upstreams((const char *)data, size, ups, &n, err, sizeof(err));
	if (r == 0) {
		if (n)
			check_servers(ups, n);
	} else {
		check_err(r, err, sizeof(err));
	}
	return 0;
}
