// SPDX-License-Identifier: MIT
/*
 * What a new config file changes, decided from the configurations alone: live keys against what
 * is in effect, restart keys against what the agent started with. Applying is reload_file.c's.
 */
#include <string.h>

#include "internal.h"

static bool same_strv(char *const *a, size_t na, char *const *b, size_t nb)
{
	if (na != nb)
		return false;
	for (size_t i = 0; i < na; i++)
		if (strcmp(a[i], b[i]))
			return false;
	return true;
}

static bool same_u16(const uint16_t *a, size_t na, const uint16_t *b, size_t nb)
{
	return na == nb && (na == 0 || memcmp(a, b, na * sizeof(*a)) == 0);
}

/*
 * Every key of struct ndc_config is either applied live (below: records, upstream, stub_domains,
 * cache, forward, log) or compared here. A field added to the struct without a decision here
 * fails this check at build time: say which it is, then update the size.
 */
_Static_assert(sizeof(struct ndc_config) == 1552,
	       "a new config key: decide in control/reload/reload_diff.c whether it changes live "
	       "or needs a restart");

/* Restart keys of a that differ from r (the running configuration), as names into list. */
static void restart_keys(const struct ndc_config *a, const struct ndc_config *r, char *list)
{
	if (strcmp(a->cluster_domain, r->cluster_domain))
		ndc_reload_list_add(list, "cluster_domain");
	if (a->n_listen != r->n_listen ||
	    memcmp(a->listen, r->listen, a->n_listen * sizeof(a->listen[0])))
		ndc_reload_list_add(list, "listen");
	if (a->port != r->port)
		ndc_reload_list_add(list, "port");
	if (a->source.kind != r->source.kind ||
	    !ndc_reload_same_str(a->source.snapshot, r->source.snapshot) ||
	    !ndc_reload_same_str(a->source.kubeconfig, r->source.kubeconfig) ||
	    a->source.kube_dns_configmap != r->source.kube_dns_configmap)
		ndc_reload_list_add(list, "source");
	if (a->dataplane.mode != r->dataplane.mode)
		ndc_reload_list_add(list, "dataplane.mode");
	if (!same_strv(a->dataplane.interfaces, a->dataplane.n_interfaces, r->dataplane.interfaces,
		       r->dataplane.n_interfaces))
		ndc_reload_list_add(list, "dataplane.interfaces");
	if (a->dataplane.table_size != r->dataplane.table_size)
		ndc_reload_list_add(list, "dataplane.table_size");
	if (a->dataplane.redirect_peer != r->dataplane.redirect_peer)
		ndc_reload_list_add(list, "dataplane.redirect_peer");
	if (a->dataplane.failopen != r->dataplane.failopen)
		ndc_reload_list_add(list, "dataplane.failopen");
	if (a->dataplane.tc_order != r->dataplane.tc_order)
		ndc_reload_list_add(list, "dataplane.tc_order");
	if (!ndc_reload_same_str(a->dataplane.pin_dir, r->dataplane.pin_dir))
		ndc_reload_list_add(list, "dataplane.pin_dir");
	/* The EAL, its ports, queues and lcores are set up once per process. */
	if (!same_strv(a->dataplane.dpdk.eal_args, a->dataplane.dpdk.n_eal_args,
		       r->dataplane.dpdk.eal_args, r->dataplane.dpdk.n_eal_args) ||
	    !same_u16(a->dataplane.dpdk.ports, a->dataplane.dpdk.n_ports, r->dataplane.dpdk.ports,
		      r->dataplane.dpdk.n_ports) ||
	    !same_u16(a->dataplane.dpdk.lcores, a->dataplane.dpdk.n_lcores,
		      r->dataplane.dpdk.lcores, r->dataplane.dpdk.n_lcores) ||
	    a->dataplane.dpdk.queues != r->dataplane.dpdk.queues ||
	    a->dataplane.dpdk.burst != r->dataplane.dpdk.burst ||
	    a->dataplane.dpdk.poll_sleep_us != r->dataplane.dpdk.poll_sleep_us ||
	    !ndc_reload_same_str(a->dataplane.dpdk.tap_prefix, r->dataplane.dpdk.tap_prefix))
		ndc_reload_list_add(list, "dataplane.dpdk");
	if (strcmp(a->http.listen, r->http.listen))
		ndc_reload_list_add(list, "http.listen");
	/* Made at start by the agent's steps "observe" and "dnstap" (control/agent/observe.c). */
	if (a->log.clients != r->log.clients)
		ndc_reload_list_add(list, "log.clients");
	if (a->log.clients_namespaces != r->log.clients_namespaces)
		ndc_reload_list_add(list, "log.clients_namespaces");
	if (!ndc_reload_same_str(a->log.dnstap.socket, r->log.dnstap.socket) ||
	    a->log.dnstap.sample != r->log.dnstap.sample ||
	    a->log.dnstap.kernel_sample != r->log.dnstap.kernel_sample)
		ndc_reload_list_add(list, "log.dnstap");
	if (a->workers != r->workers)
		ndc_reload_list_add(list, "workers");
	if (a->tcp_idle_ms != r->tcp_idle_ms)
		ndc_reload_list_add(list, "tcp_idle_ms");
	if (a->tcp_max_conns != r->tcp_max_conns)
		ndc_reload_list_add(list, "tcp_max_conns");
	/* read at SIGTERM from the configuration the agent started with */
	if (a->upgrade.wait_s != r->upgrade.wait_s)
		ndc_reload_list_add(list, "upgrade.wait_s");
	if (a->upgrade.join_wait_ms != r->upgrade.join_wait_ms)
		ndc_reload_list_add(list, "upgrade.join_wait_ms");
}

/* records.* keys of a that differ from b (what is in effect); pods_kept: records.pods stays. */
static void records_keys(const struct ndc_config *a, const struct ndc_config *b, bool pods_kept,
			 char *list)
{
	if (a->records.ttl != b->records.ttl)
		ndc_reload_list_add(list, "records.ttl");
	if (!pods_kept && a->records.pods != b->records.pods)
		ndc_reload_list_add(list, "records.pods");
	if (a->records.endpoint_pod_names != b->records.endpoint_pod_names)
		ndc_reload_list_add(list, "records.endpoint_pod_names");
	if (a->records.ignore_empty_service != b->records.ignore_empty_service)
		ndc_reload_list_add(list, "records.ignore_empty_service");
	if (!same_strv(a->records.namespaces, a->records.n_namespaces, b->records.namespaces,
		       b->records.n_namespaces))
		ndc_reload_list_add(list, "records.namespaces");
	if (!same_strv(a->records.multicluster_zones, a->records.n_multicluster_zones,
		       b->records.multicluster_zones, b->records.n_multicluster_zones))
		ndc_reload_list_add(list, "records.multicluster_zones");
}

static bool same_stubs(const struct ndc_config *a, const struct ndc_config *b)
{
	if (a->n_stub_domains != b->n_stub_domains)
		return false;
	for (size_t i = 0; i < a->n_stub_domains; i++) {
		const struct ndc_stub_domain *x = &a->stub_domains[i], *y = &b->stub_domains[i];

		if (strcmp(x->zone, y->zone) || x->n_servers != y->n_servers ||
		    memcmp(x->servers, y->servers, x->n_servers * sizeof(x->servers[0])))
			return false;
	}
	return true;
}

static bool same_cache(const struct ndc_config *a, const struct ndc_config *b)
{
	return a->cache.max_entries == b->cache.max_entries &&
	       a->cache.max_bytes == b->cache.max_bytes && a->cache.max_ttl == b->cache.max_ttl &&
	       a->cache.neg_max_ttl == b->cache.neg_max_ttl &&
	       a->cache.stale_max == b->cache.stale_max;
}

static bool same_upstream(const struct ndc_config *a, const struct ndc_config *b)
{
	return a->n_upstream == b->n_upstream &&
	       !memcmp(a->upstream, b->upstream, a->n_upstream * sizeof(a->upstream[0]));
}

void ndc_reload_diff(const struct ndc_config *next, const struct ndc_config *cur,
		     const struct ndc_config *running, bool fastpath, struct reload_diff *ret)
{
	const typeof(next->cache.prefetch) *pa = &next->cache.prefetch, *pb = &cur->cache.prefetch;
	const typeof(next->forward.per_client) *ca = &next->forward.per_client,
					       *cb = &cur->forward.per_client;

	memset(ret, 0, sizeof(*ret));
	restart_keys(next, running, ret->restart);
	/* The kernel's pass-through suffix for computed pod names is set when it loads. */
	ret->pods_kept = fastpath && next->records.pods == NDC_PODS_INSECURE &&
			 running->records.pods != NDC_PODS_INSECURE;
	if (ret->pods_kept)
		ndc_reload_list_add(ret->restart, "records.pods (insecure, with the fast path)");
	records_keys(next, cur, ret->pods_kept, ret->records);
	ret->upstream = !same_upstream(next, cur);
	ret->stub_domains = !same_stubs(next, cur);
	ret->forward = next->forward.timeout_ms != cur->forward.timeout_ms ||
		       next->forward.max_pending != cur->forward.max_pending ||
		       next->forward.protocol != cur->forward.protocol ||
		       next->forward.policy != cur->forward.policy;
	ret->cache = !same_cache(next, cur);
	ret->prefetch =
	    pa->on != pb->on || pa->min_hits != pb->min_hits || pa->before_pct != pb->before_pct;
	/* With qps 0 the limiter is off: its burst means nothing. */
	ret->per_client = ca->qps != cb->qps || (ca->qps && ca->burst != cb->burst);
	ret->log_level = next->log.level != cur->log.level;
	/* The sample rate means nothing while queries are not logged. */
	ret->log_queries = next->log.queries != cur->log.queries ||
			   (next->log.queries && next->log.sample_ppm != cur->log.sample_ppm);
}
