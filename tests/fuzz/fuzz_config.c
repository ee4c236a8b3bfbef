// SPDX-License-Identifier: MIT
/*
 * Config parser fuzz target: any bytes, parse, check what a successful parse promises, free
 * (twice: free must leave the struct safe to free again).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "config/config.h"

static void check(bool ok)
{
	if (!ok)
		abort();
}

static bool is_name(const char *s, size_t max)
{
	return s && strlen(s) >= 1 && strlen(s) <= max;
}

static void check_config(const struct ndc_config *c)
{
	check(is_name(c->cluster_domain, 253));
	for (const char *p = c->cluster_domain; *p; p++)
		check(!(*p >= 'A' && *p <= 'Z'));
	check(c->cluster_domain[strlen(c->cluster_domain) - 1] != '.');
	check(c->n_listen >= 1 && c->n_listen <= NDC_CFG_MAX_ADDRS);
	for (size_t i = 0; i < c->n_listen; i++)
		check(c->listen[i].family == AF_INET || c->listen[i].family == AF_INET6);
	check(c->port != 0);
	check(c->n_upstream <= NDC_CFG_MAX_ADDRS);
	for (size_t i = 0; i < c->n_upstream; i++) {
		const struct sockaddr_storage *ss = &c->upstream[i];
		check(ss->ss_family == AF_INET || ss->ss_family == AF_INET6);
		/* sin_port and sin6_port share an offset */
		check(((const struct sockaddr_in *)ss)->sin_port != 0);
	}
	switch (c->source.kind) {
	case NDC_SOURCE_EMBEDDED:
		check(!c->source.snapshot && !c->source.kubeconfig);
		break;
	case NDC_SOURCE_SNAPSHOT:
		check(is_name(c->source.snapshot, SIZE_MAX) && !c->source.kubeconfig);
		break;
	case NDC_SOURCE_KUBERNETES:
		check(!c->source.snapshot);
		check(!c->source.kubeconfig || is_name(c->source.kubeconfig, SIZE_MAX));
		break;
	default:
		check(false);
	}
	check(c->records.ttl <= 3600);
	check(c->records.pods <= NDC_PODS_VERIFIED);
	check(c->records.n_namespaces <= 4096);
	check(!c->records.n_namespaces || c->records.namespaces);
	for (size_t i = 0; i < c->records.n_namespaces; i++)
		check(is_name(c->records.namespaces[i], 63));
	check(c->dataplane.mode <= NDC_DP_DPDK);
	check(c->dataplane.n_interfaces <= 64);
	for (size_t i = 0; i < c->dataplane.n_interfaces; i++)
		check(is_name(c->dataplane.interfaces[i], 15));
	check(is_name(c->http.listen, SIZE_MAX));
	check(c->cache.max_entries >= 1 && c->cache.max_entries <= 10000000);
	check(c->cache.max_bytes >= 64ULL << 10 && c->cache.max_bytes <= 16ULL << 30);
	check(c->cache.max_ttl >= 1 && c->cache.max_ttl <= 604800);
	check(c->cache.neg_max_ttl <= 86400);
	check(c->cache.stale_max <= 604800);
	check(c->forward.timeout_ms >= 10 && c->forward.timeout_ms <= 60000);
	check(c->n_stub_domains <= NDC_CFG_MAX_STUBS);
	check(!c->n_stub_domains || c->stub_domains);
	for (size_t i = 0; i < c->n_stub_domains; i++) {
		const struct ndc_stub_domain *sd = &c->stub_domains[i];

		check(is_name(sd->zone, 253) && sd->zone[strlen(sd->zone) - 1] != '.');
		check(strcmp(sd->zone, c->cluster_domain));
		for (size_t j = 0; j < i; j++)
			check(strcmp(sd->zone, c->stub_domains[j].zone));
		check(sd->n_servers >= 1 && sd->n_servers <= NDC_CFG_MAX_ADDRS);
		for (size_t j = 0; j < sd->n_servers; j++)
			check(sd->servers[j].ss_family == AF_INET ||
			      sd->servers[j].ss_family == AF_INET6);
	}
	check(c->log.level >= 0 && c->log.level <= 3);
	check(c->log.sample_ppm >= 1 && c->log.sample_ppm <= NDC_CFG_SAMPLE_ONE);
	check(c->workers <= 256);
	check(c->tcp_idle_ms >= 100 && c->tcp_idle_ms <= 600000);
	check(c->tcp_max_conns >= 1 && c->tcp_max_conns <= 65536);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ndc_config cfg;
	char err[256];
	int r;

	err[0] = '\0';
	r = ndc_config_parse((const char *)data, size, &cfg, err, sizeof(err));
	if (r == 0)
		check_config(&cfg);
	else
		check(err[0] != '\0' && strlen(err) < sizeof(err) && !strchr(err, '\n'));
	ndc_config_free(&cfg);
	ndc_config_free(&cfg);
	return 0;
}
