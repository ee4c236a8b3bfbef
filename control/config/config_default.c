// SPDX-License-Identifier: MIT
/*
 * The defaults (deploy/examples/ndcache.yaml documents each), and freeing what parsing allocated.
 * Default strings and arrays are static (ndc_config_defaults cannot ndc_config_fail); everything
 * parsed is heap, and ndc_config_free tells them apart by address.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

char ndc_config_default_domain[] = "cluster.local";
char ndc_config_default_http[] = "127.0.0.1:9254";
static char if_veth[] = "veth*", if_cali[] = "cali*", if_lxc[] = "lxc*", if_cni[] = "cni*";
char *ndc_config_default_ifaces[] = {if_veth, if_cali, if_lxc, if_cni};
char ndc_config_default_tap_prefix[] = "ndc-tap";

void ndc_config_defaults(struct ndc_config *cfg)
{
	static const uint8_t node_local[4] = {169, 254, 20, 10};

	/* Zero: source embedded, no upstream, pods disabled, dataplane tc, one worker per CPU. */
	memset(cfg, 0, sizeof(*cfg));
	cfg->cluster_domain = ndc_config_default_domain;
	cfg->n_listen = 1;
	cfg->listen[0].family = AF_INET;
	memcpy(cfg->listen[0].addr, node_local, sizeof(node_local));
	cfg->port = 53;
	cfg->records.ttl = 5;
	cfg->dataplane.n_interfaces =
	    sizeof(ndc_config_default_ifaces) / sizeof(ndc_config_default_ifaces[0]);
	cfg->dataplane.interfaces = ndc_config_default_ifaces;
	cfg->dataplane.table_size = 262144;
	cfg->dataplane.failopen = true;
	cfg->dataplane.tc_order = NDC_TC_ORDER_AFTER;
	cfg->dataplane.dpdk.queues = 1;
	cfg->dataplane.dpdk.burst = 32;
	cfg->dataplane.dpdk.tap_prefix = ndc_config_default_tap_prefix;
	cfg->http.listen = ndc_config_default_http;
	cfg->cache.max_entries = 100000;
	cfg->cache.max_bytes = 64ULL << 20;
	cfg->cache.max_ttl = 86400;
	cfg->cache.neg_max_ttl = 3600;
	cfg->cache.stale_max = 86400;
	cfg->forward.timeout_ms = 1000;
	cfg->forward.max_pending = 10000;
	cfg->cache.prefetch.on = true;
	cfg->cache.prefetch.min_hits = 2;
	cfg->cache.prefetch.before_pct = 10;
	cfg->forward.per_client.qps = NDC_CFG_PER_CLIENT_QPS;
	cfg->forward.per_client.burst = NDC_CFG_PER_CLIENT_BURST;
	cfg->source.kube_dns_configmap = true;
	cfg->log.level = 2; /* NDC_LOG_INFO: config.h does not need ndc/log.h */
	cfg->log.sample_ppm = NDC_CFG_SAMPLE_ONE;
	cfg->log.clients = true;
	cfg->log.dnstap.sample = 1.0;
	cfg->log.dnstap.kernel_sample = 0.01;
	cfg->tcp_idle_ms = 10000;
	cfg->upgrade.wait_s = 30;
	cfg->upgrade.join_wait_ms = 2000;
	cfg->tcp_max_conns = 1024;
}

void ndc_config_strv_free(char **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

void ndc_config_stubs_free(struct ndc_stub_domain *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i].zone);
	free(v);
}

void ndc_config_free(struct ndc_config *cfg)
{
	if (!cfg)
		return;
	if (cfg->cluster_domain != ndc_config_default_domain)
		free(cfg->cluster_domain);
	free(cfg->source.snapshot);
	free(cfg->source.kubeconfig);
	free(cfg->dataplane.pin_dir);
	free(cfg->log.dnstap.socket);
	ndc_config_strv_free(cfg->dataplane.dpdk.eal_args, cfg->dataplane.dpdk.n_eal_args);
	free(cfg->dataplane.dpdk.ports);
	free(cfg->dataplane.dpdk.lcores);
	if (cfg->dataplane.dpdk.tap_prefix != ndc_config_default_tap_prefix)
		free(cfg->dataplane.dpdk.tap_prefix);
	ndc_config_stubs_free(cfg->stub_domains, cfg->n_stub_domains);
	ndc_config_strv_free(cfg->records.namespaces, cfg->records.n_namespaces);
	ndc_config_strv_free(cfg->records.multicluster_zones, cfg->records.n_multicluster_zones);
	if (cfg->dataplane.interfaces != ndc_config_default_ifaces)
		ndc_config_strv_free(cfg->dataplane.interfaces, cfg->dataplane.n_interfaces);
	if (cfg->http.listen != ndc_config_default_http)
		free(cfg->http.listen);
	memset(cfg, 0, sizeof(*cfg));
}
