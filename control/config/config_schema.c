// SPDX-License-Identifier: MIT
/*
 * The schema: every key of the config file, its type and range, in tables that mirror struct
 * ndc_config, and the walk of the node tree along them. An unknown or repeated key, a value of the
 * wrong kind and a value out of range are each reported with the key path and line.
 */
#include "internal.h"

#include <string.h>

#define MAX_FIELDS 16 /* the most keys any mapping has, for duplicate tracking */

static int walk_map(struct ctx *c, const struct node *map, const struct field *fields,
		    struct ndc_config *cfg);

/* Section values: a mapping, or null (everything under it commented out) for the defaults. */
static int do_section(struct ctx *c, const struct field *f, const struct node *n,
		      struct ndc_config *cfg)
{
	if (ndc_config_is_null(n))
		return 0;
	if (n->kind != NODE_MAP)
		return ndc_config_bad_value(c, n, "a mapping");
	return walk_map(c, n, f->sub, cfg);
}

static int do_source(struct ctx *c, const struct field *f, const struct node *n,
		     struct ndc_config *cfg)
{
	int r = do_section(c, f, n, cfg);

	if (r < 0 || ndc_config_is_null(n))
		return r;
	if (!n->n)
		return ndc_config_fail(c, n->line, "expected one of snapshot, kubernetes");
	/* walk_map has rejected unknown and repeated keys: two keys means both were given. */
	if (n->n > 2)
		return ndc_config_fail(c, n->kids[2]->line,
				       "give either snapshot or kubernetes, not both");
	/* kubernetes: {} or null means in-cluster configuration. */
	cfg->source.kind =
	    strcmp(n->kids[0]->text, "snapshot") ? NDC_SOURCE_KUBERNETES : NDC_SOURCE_SNAPSHOT;
	return 0;
}

/* An EAL option that places lcores: dataplane.dpdk.lcores must not be given beside it. */
static bool is_lcore_arg(const char *a)
{
	return !strncmp(a, "-l", 2) || !strncmp(a, "-c", 2) || !strcmp(a, "--lcores") ||
	       !strncmp(a, "--lcores=", 9);
}

static int do_dpdk(struct ctx *c, const struct field *f, const struct node *n,
		   struct ndc_config *cfg)
{
	int r = do_section(c, f, n, cfg);

	if (r < 0 || !cfg->dataplane.dpdk.n_lcores)
		return r;
	for (size_t i = 0; i < cfg->dataplane.dpdk.n_eal_args; i++)
		if (is_lcore_arg(cfg->dataplane.dpdk.eal_args[i]))
			return ndc_config_fail(
			    c, n->line,
			    "lcores and an lcore option in eal_args ('%s'): give the "
			    "polling CPUs in one of them",
			    cfg->dataplane.dpdk.eal_args[i]);
	return 0;
}

/*
 * cache.prefetch and forward.per_client: a mapping of their keys (a key not given keeps its
 * default), true for the defaults, or false to turn the feature off.
 */
static int do_switch_section(struct ctx *c, const struct field *f, const struct node *n,
			     struct ndc_config *cfg, bool *ret_on)
{
	static const char what[] = "a mapping, true or false";

	if (n->kind == NODE_SCALAR && !ndc_config_is_null(n))
		return ndc_config_bool(c, n, what, ret_on);
	if (n->kind != NODE_MAP && !ndc_config_is_null(n))
		return ndc_config_bad_value(c, n, what);
	*ret_on = true;
	return do_section(c, f, n, cfg);
}

static int do_prefetch(struct ctx *c, const struct field *f, const struct node *n,
		       struct ndc_config *cfg)
{
	return do_switch_section(c, f, n, cfg, &cfg->cache.prefetch.on);
}

static int do_per_client(struct ctx *c, const struct field *f, const struct node *n,
			 struct ndc_config *cfg)
{
	bool on = true;
	int r = do_switch_section(c, f, n, cfg, &on);

	if (r == 0 && !on)
		cfg->forward.per_client.qps = 0; /* what the limiter reads as off */
	return r;
}

/* log.dnstap: a mapping that names its socket (sample and kernel_sample alone write nowhere). */
static int do_dnstap(struct ctx *c, const struct field *f, const struct node *n,
		     struct ndc_config *cfg)
{
	int r = do_section(c, f, n, cfg);

	if (r == 0 && !ndc_config_is_null(n) && !cfg->log.dnstap.socket)
		r = ndc_config_fail(c, n->line,
				    "socket is required (the dnstap reader's unix "
				    "socket, e.g. /run/ndcache/dnstap.sock)");
	return r;
}

#define SIZEOF_MEMBER(m) sizeof(((struct ndc_config *)0)->m)

/* One key per line: clang-format would split these designated initializers over many. */
/* clang-format off */
#define F_INT(k, m, lo, hi) \
	{ .key = k, .parse = ndc_config_set_int, .off = CFG_OFF(m), .size = SIZEOF_MEMBER(m), .min = lo, .max = hi }
#define F_SECTION(k, fn, s) { .key = k, .parse = fn, .sub = s }
#define F_FIELD(k, fn, m, ...) { .key = k, .parse = fn, .off = CFG_OFF(m), __VA_ARGS__ }

static const char *const pods_names[] = { "disabled", "insecure", "verified", NULL };
static const char *const mode_names[] = { "tc", "xdp", "socket", "dpdk", NULL };
static const char *const tc_order_names[] = { "after", "first", NULL };
/* In the order of enum ndc_log_level (ndc/log.h). */
static const char *const level_names[] = { "error", "warning", "info", "debug", NULL };
/* In the order of query.h's enum ndc_fwd_protocol and enum ndc_fwd_policy. */
static const char *const protocol_names[] = { "udp", "tcp", "prefer_udp", NULL };
static const char *const policy_names[] = { "sequential", "random", "round_robin", NULL };

static const struct field kubernetes_fields[] = {
	F_FIELD("kubeconfig", ndc_config_set_path, source.kubeconfig),
	F_FIELD("kube_dns_configmap", ndc_config_set_bool, source.kube_dns_configmap),
	{ 0 },
};

static const struct field source_fields[] = {
	F_FIELD("snapshot", ndc_config_set_path, source.snapshot),
	F_SECTION("kubernetes", do_section, kubernetes_fields),
	{ 0 },
};

static const struct field records_fields[] = {
	F_INT("ttl", records.ttl, 0, 3600),
	F_FIELD("pods", ndc_config_set_enum, records.pods, .names = pods_names),
	F_FIELD("endpoint_pod_names", ndc_config_set_bool, records.endpoint_pod_names),
	F_FIELD("ignore_empty_service", ndc_config_set_bool, records.ignore_empty_service),
	F_FIELD("namespaces", ndc_config_set_names, records.namespaces, .max = 4096),
	F_FIELD("multicluster_zones", ndc_config_set_mc_zones, records.multicluster_zones,
		.max = NDC_CFG_MAX_MC_ZONES),
	{ 0 },
};

static const struct field dpdk_fields[] = {
	F_FIELD("eal_args", ndc_config_set_strings, dataplane.dpdk.eal_args, .max = 128,
		.aux = CFG_OFF(dataplane.dpdk.n_eal_args)),
	F_FIELD("ports", ndc_config_set_u16s, dataplane.dpdk.ports, .max = 64,
		.aux = CFG_OFF(dataplane.dpdk.n_ports)),
	F_INT("queues", dataplane.dpdk.queues, 1, 16),
	F_FIELD("lcores", ndc_config_set_u16s, dataplane.dpdk.lcores, .max = 64,
		.aux = CFG_OFF(dataplane.dpdk.n_lcores)),
	F_INT("burst", dataplane.dpdk.burst, 1, 512),
	F_INT("poll_sleep_us", dataplane.dpdk.poll_sleep_us, 0, 100000),
	F_FIELD("tap_prefix", ndc_config_set_tap_prefix, dataplane.dpdk.tap_prefix),
	{ 0 },
};

static const struct field dataplane_fields[] = {
	F_FIELD("mode", ndc_config_set_enum, dataplane.mode, .names = mode_names),
	F_FIELD("interfaces", ndc_config_set_names, dataplane.interfaces, .max = 64),
	F_INT("table_size", dataplane.table_size, 1024, 16777216),
	F_FIELD("redirect_peer", ndc_config_set_bool, dataplane.redirect_peer),
	F_FIELD("failopen", ndc_config_set_bool, dataplane.failopen),
	F_FIELD("tc_order", ndc_config_set_enum, dataplane.tc_order, .names = tc_order_names),
	F_FIELD("pin_dir", ndc_config_set_path, dataplane.pin_dir),
	F_SECTION("dpdk", do_dpdk, dpdk_fields),
	{ 0 },
};

static const struct field http_fields[] = {
	F_FIELD("listen", ndc_config_set_http_listen, http.listen),
	{ 0 },
};

static const struct field prefetch_fields[] = {
	F_INT("min_hits", cache.prefetch.min_hits, 1, 1000000),
	F_INT("before_pct", cache.prefetch.before_pct, 1, 99),
	{ 0 },
};

static const struct field per_client_fields[] = {
	F_INT("qps", forward.per_client.qps, 1, 10000000),
	F_INT("burst", forward.per_client.burst, 1, 10000000),
	{ 0 },
};

static const struct field cache_fields[] = {
	F_INT("max_entries", cache.max_entries, 1, 10000000),
	F_FIELD("max_bytes", ndc_config_set_size, cache.max_bytes, .min = 64ULL << 10, .max = 16ULL << 30),
	F_INT("max_ttl", cache.max_ttl, 1, 604800),
	F_INT("neg_max_ttl", cache.neg_max_ttl, 0, 86400),
	F_INT("stale_max", cache.stale_max, 0, 604800),
	F_SECTION("prefetch", do_prefetch, prefetch_fields),
	{ 0 },
};

static const struct field forward_fields[] = {
	F_INT("timeout_ms", forward.timeout_ms, 10, 60000),
	F_INT("max_pending", forward.max_pending, 1, 1000000),
	F_FIELD("protocol", ndc_config_set_enum, forward.protocol, .names = protocol_names),
	F_FIELD("policy", ndc_config_set_enum, forward.policy, .names = policy_names),
	F_SECTION("per_client", do_per_client, per_client_fields),
	{ 0 },
};

static const struct field dnstap_fields[] = {
	F_FIELD("socket", ndc_config_set_socket_path, log.dnstap.socket),
	F_FIELD("sample", ndc_config_set_rate, log.dnstap.sample),
	F_FIELD("kernel_sample", ndc_config_set_rate, log.dnstap.kernel_sample),
	{ 0 },
};

static const struct field log_fields[] = {
	F_FIELD("level", ndc_config_set_enum, log.level, .names = level_names),
	F_FIELD("queries", ndc_config_set_bool, log.queries),
	F_FIELD("sample", ndc_config_set_sample, log.sample_ppm),
	F_FIELD("clients", ndc_config_set_bool, log.clients),
	F_FIELD("clients_namespaces", ndc_config_set_bool, log.clients_namespaces),
	F_SECTION("dnstap", do_dnstap, dnstap_fields),
	{ 0 },
};

static const struct field upgrade_fields[] = {
	F_INT("wait_s", upgrade.wait_s, 0, 3600),
	F_INT("join_wait_ms", upgrade.join_wait_ms, 0, 60000),
	{ 0 },
};

static const struct field top_fields[] = {
	F_FIELD("cluster_domain", ndc_config_set_domain, cluster_domain),
	F_FIELD("listen", ndc_config_set_addrs, listen, .min = 1, .max = NDC_CFG_MAX_ADDRS),
	F_INT("port", port, 1, 65535),
	F_FIELD("upstream", ndc_config_set_addrs, upstream, .min = 0, .max = NDC_CFG_MAX_ADDRS),
	F_FIELD("stub_domains", ndc_config_set_stub_domains, stub_domains),
	F_SECTION("source", do_source, source_fields),
	F_SECTION("records", do_section, records_fields),
	F_SECTION("dataplane", do_section, dataplane_fields),
	F_SECTION("http", do_section, http_fields),
	F_SECTION("cache", do_section, cache_fields),
	F_SECTION("forward", do_section, forward_fields),
	F_SECTION("log", do_section, log_fields),
	F_INT("workers", workers, 0, 256),
	F_INT("tcp_idle_ms", tcp_idle_ms, 100, 600000),
	F_INT("tcp_max_conns", tcp_max_conns, 1, 65536),
	F_SECTION("upgrade", do_section, upgrade_fields),
	{ 0 },
};
/* clang-format on */

#define FIELDS_FIT(t) _Static_assert(sizeof(t) / sizeof(t[0]) <= MAX_FIELDS + 1, #t " too long")
FIELDS_FIT(top_fields);
FIELDS_FIT(log_fields);
FIELDS_FIT(records_fields);
FIELDS_FIT(cache_fields);
FIELDS_FIT(dataplane_fields);
FIELDS_FIT(dpdk_fields);

static int walk_map(struct ctx *c, const struct node *map, const struct field *fields,
		    struct ndc_config *cfg)
{
	unsigned int first[MAX_FIELDS] = {0};

	for (size_t i = 0; i + 1 < map->n; i += 2) {
		const struct node *key = map->kids[i], *val = map->kids[i + 1];
		char known[256] = "", q[QUOTE_BUF];
		size_t mark, idx;
		int r = ndc_config_check_node(c, key);

		if (r == 0 && key->kind != NODE_SCALAR)
			r = ndc_config_bad_value(c, key, "a key");
		if (r < 0)
			return r;
		for (idx = 0; fields[idx].key; idx++)
			if (strlen(fields[idx].key) == key->len &&
			    !memcmp(fields[idx].key, key->text, key->len))
				break;
		mark = ndc_config_path_push(c, "%s%s", c->plen ? "." : "",
					    ndc_config_sanitize(q, key->text, key->len));
		if (!fields[idx].key) {
			for (size_t k = 0; fields[k].key; k++) {
				strncat(known, k ? ", " : "", sizeof(known) - strlen(known) - 1);
				strncat(known, fields[k].key, sizeof(known) - strlen(known) - 1);
			}
			r = ndc_config_fail(c, key->line, "unknown key (known keys: %s)", known);
		} else if (first[idx]) {
			r = ndc_config_fail(c, key->line, "duplicate key (first at line %u)",
					    first[idx]);
		}
		if (r == 0) {
			first[idx] = key->line;
			r = ndc_config_check_node(c, val);
		}
		if (r == 0)
			r = fields[idx].parse(c, &fields[idx], val, cfg);
		ndc_config_path_pop(c, mark);
		if (r < 0)
			return r;
	}
	return 0;
}

int ndc_config_walk(struct ctx *c, const struct node *root, struct ndc_config *cfg)
{
	return walk_map(c, root, top_fields, cfg);
}
