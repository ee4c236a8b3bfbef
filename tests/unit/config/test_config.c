// SPDX-License-Identifier: MIT
/* Config parser: defaults, the shipped example, every key, and the exact text of each error. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"

#include "dnstap/dnstap.h"

#define EXAMPLE "deploy/examples/ndcache.yaml"
#define THIS_FILE "tests/unit/config/test_config.c"

static int parse(const char *yaml, struct ndc_config *cfg, char *err, size_t errlen)
{
	return ndc_config_parse(yaml, strlen(yaml), cfg, err, errlen);
}

static void expect_error(const char *yaml, const char *msg)
{
	struct ndc_config cfg;
	char err[512] = "unset";
	int r = parse(yaml, &cfg, err, sizeof(err));

	if (r != -EINVAL || strcmp(err, msg))
		print_error("input:\n%s\n", yaml);
	assert_int_equal(r, -EINVAL);
	assert_string_equal(err, msg);
	ndc_config_free(&cfg);
}

static void expect_ok(const char *yaml, struct ndc_config *cfg)
{
	char err[512] = "";
	int r = parse(yaml, cfg, err, sizeof(err));

	if (r)
		print_error("input:\n%s\nerror: %s\n", yaml, err);
	assert_int_equal(r, 0);
	assert_string_equal(err, "");
}

static void assert_v4(const struct ndc_ip *ip, const char *s)
{
	uint8_t want[4];

	assert_int_equal(inet_pton(AF_INET, s, want), 1);
	assert_int_equal(ip->family, AF_INET);
	assert_memory_equal(ip->addr, want, 4);
}

static void assert_v6(const struct ndc_ip *ip, const char *s)
{
	uint8_t want[16];

	assert_int_equal(inet_pton(AF_INET6, s, want), 1);
	assert_int_equal(ip->family, AF_INET6);
	assert_memory_equal(ip->addr, want, 16);
}

static void assert_sa(const struct sockaddr_storage *ss, const char *ip, uint16_t port)
{
	char buf[INET6_ADDRSTRLEN];

	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)ss;
		assert_non_null(inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof(buf)));
		assert_int_equal(ntohs(sin->sin_port), port);
	} else {
		const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)ss;
		assert_int_equal(ss->ss_family, AF_INET6);
		assert_non_null(inet_ntop(AF_INET6, &sin6->sin6_addr, buf, sizeof(buf)));
		assert_int_equal(ntohs(sin6->sin6_port), port);
	}
	assert_string_equal(buf, ip);
}

static void assert_strv(char **v, size_t n, const char *const *want, size_t n_want)
{
	assert_int_equal(n, n_want);
	for (size_t i = 0; i < n; i++)
		assert_string_equal(v[i], want[i]);
}

static void assert_defaults(const struct ndc_config *c)
{
	static const char *const ifaces[] = {"veth*", "cali*", "lxc*", "cni*"};

	assert_string_equal(c->cluster_domain, "cluster.local");
	assert_int_equal(c->n_listen, 1);
	assert_v4(&c->listen[0], "169.254.20.10");
	assert_int_equal(c->port, 53);
	assert_int_equal(c->n_upstream, 0);
	assert_int_equal(c->source.kind, NDC_SOURCE_EMBEDDED);
	assert_null(c->source.snapshot);
	assert_null(c->source.kubeconfig);
	assert_int_equal(c->records.ttl, 5);
	assert_int_equal(c->records.pods, NDC_PODS_DISABLED);
	assert_false(c->records.endpoint_pod_names);
	assert_false(c->records.ignore_empty_service);
	assert_int_equal(c->records.n_namespaces, 0);
	assert_int_equal(c->dataplane.mode, NDC_DP_TC);
	assert_strv(c->dataplane.interfaces, c->dataplane.n_interfaces, ifaces, 4);
	assert_int_equal(c->dataplane.table_size, 262144);
	assert_false(c->dataplane.redirect_peer);
	assert_true(c->dataplane.failopen);
	assert_int_equal(c->dataplane.tc_order, NDC_TC_ORDER_AFTER);
	assert_string_equal(c->http.listen, "127.0.0.1:9254");
	assert_int_equal(c->cache.max_entries, 100000);
	assert_int_equal(c->cache.max_bytes, 64ULL << 20);
	assert_int_equal(c->cache.max_ttl, 86400);
	assert_int_equal(c->cache.neg_max_ttl, 3600);
	assert_int_equal(c->cache.stale_max, 86400);
	assert_int_equal(c->forward.timeout_ms, 1000);
	assert_int_equal(c->forward.max_pending, 10000);
	assert_true(c->cache.prefetch.on);
	assert_int_equal(c->cache.prefetch.min_hits, 2);
	assert_int_equal(c->cache.prefetch.before_pct, 10);
	assert_int_equal(c->forward.per_client.qps, 1000);
	assert_int_equal(c->forward.per_client.burst, 2000);
	assert_int_equal(c->workers, 0);
	assert_int_equal(c->tcp_idle_ms, 10000);
	assert_int_equal(c->tcp_max_conns, 1024);
	assert_int_equal(c->upgrade.wait_s, 30);
	assert_int_equal(c->upgrade.join_wait_ms, 2000);
	assert_int_equal(c->n_stub_domains, 0);
	assert_null(c->stub_domains);
	assert_true(c->source.kube_dns_configmap);
	assert_int_equal(c->log.level, 2);
	assert_false(c->log.queries);
	assert_int_equal(c->log.sample_ppm, 1000000);
}

static void test_defaults(void **state)
{
	static const char *const empties[] = {
	    "", "\n", "# only a comment\n", "---\n", "~\n", "--- \n...\n", "null\n"};
	struct ndc_config cfg;

	(void)state;
	ndc_config_defaults(&cfg);
	assert_defaults(&cfg);
	ndc_config_free(&cfg);
	for (size_t i = 0; i < sizeof(empties) / sizeof(empties[0]); i++) {
		expect_ok(empties[i], &cfg);
		assert_defaults(&cfg);
		ndc_config_free(&cfg);
	}
	/* Sections left empty keep their defaults. */
	expect_ok("records:\ncache:\n# ttl: 9\nsource:\ndataplane: {}\n", &cfg);
	assert_defaults(&cfg);
	ndc_config_free(&cfg);
}

/*
 * The example is read from the source tree. Meson compiles with __FILE__ relative to the build
 * directory ("../tests/unit/config/test_config.c") or absolute; the test may run from the build
 * directory, the source root, or elsewhere, so try __FILE__ against the cwd and against the
 * build directory two levels above the executable. NDC_SOURCE_DIR overrides.
 */
static FILE *open_example(char *path, size_t len)
{
	const char *env = getenv("NDC_SOURCE_DIR");
	size_t flen = strlen(__FILE__), tlen = strlen(THIS_FILE);
	char prefix[PATH_MAX] = "", exe[PATH_MAX];
	ssize_t n;
	FILE *f;

	if (env) {
		snprintf(path, len, "%s/%s", env, EXAMPLE);
		return fopen(path, "r");
	}
	if (flen >= tlen && !strcmp(&__FILE__[flen - tlen], THIS_FILE))
		snprintf(prefix, sizeof(prefix), "%.*s", (int)(flen - tlen), __FILE__);
	snprintf(path, len, "%s%s", prefix, EXAMPLE);
	f = fopen(path, "r");
	if (f || prefix[0] == '/')
		return f;
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return NULL;
	exe[n] = '\0';
	for (int up = 0; up < 2; up++) {
		char *slash = strrchr(exe, '/');
		if (slash)
			*slash = '\0';
	}
	snprintf(path, len, "%s/%s%s", exe, prefix, EXAMPLE);
	return fopen(path, "r");
}

static void test_example_file(void **state)
{
	char path[PATH_MAX * 2 + 64], err[512] = "";
	struct ndc_config cfg;
	FILE *f;

	(void)state;
	f = open_example(path, sizeof(path));
	if (!f)
		fail_msg("cannot find %s (set NDC_SOURCE_DIR to the source root)", EXAMPLE);
	fclose(f);
	assert_int_equal(ndc_config_load(path, &cfg, err, sizeof(err)), 0);
	assert_string_equal(err, "");
	/* The reference shows every default, so it must parse to exactly the defaults. */
	assert_defaults(&cfg);
	ndc_config_free(&cfg);
}

static void test_every_key(void **state)
{
	static const char yaml[] = "cluster_domain: Example.ORG.\n"
				   "listen: [169.254.20.10, 'fd00::a']\n"
				   "port: 5353\n"
				   "upstream:\n"
				   "  - 10.96.0.10\n"
				   "  - 10.96.0.11:5300\n"
				   "  - \"[fd00::10]:54\"\n"
				   "  - fd00::11\n"
				   "  - '[::1]'\n"
				   "source:\n"
				   "  snapshot: /var/lib/ndcache/objects.json\n"
				   "records:\n"
				   "  ttl: 30\n"
				   "  pods: verified\n"
				   "  endpoint_pod_names: yes\n"
				   "  ignore_empty_service: TRUE\n"
				   "  namespaces: [default, kube-system]\n"
				   "dataplane:\n"
				   "  mode: xdp\n"
				   "  interfaces: [eth0, \"en[op]*\"]\n"
				   "  tc_order: first\n"
				   "http: {listen: \"[::1]:9000\"}\n"
				   "cache:\n"
				   "  max_entries: 10000000\n"
				   "  max_bytes: 1G\n"
				   "  max_ttl: 604800\n"
				   "  neg_max_ttl: 0\n"
				   "  stale_max: 0\n"
				   "  prefetch: {min_hits: 1000000, before_pct: 99}\n"
				   "forward:\n"
				   "  timeout_ms: 10\n"
				   "  max_pending: 1000000\n"
				   "  per_client:\n"
				   "    qps: 10000000\n"
				   "    burst: 1\n"
				   "stub_domains:\n"
				   "  Acme.Local.: [169.254.53.11, '169.254.53.12:5353']\n"
				   "  corp.example: '[fd00::53]:54'\n"
				   "log: {level: debug, queries: yes, sample: 0.25}\n"
				   "workers: 256\n"
				   "tcp_idle_ms: 100\n"
				   "tcp_max_conns: 65536\n"
				   "upgrade: {wait_s: 3600, join_wait_ms: 60000}\n";
	static const char *const ns[] = {"default", "kube-system"};
	static const char *const ifs[] = {"eth0", "en[op]*"};
	struct ndc_config cfg;

	(void)state;
	expect_ok(yaml, &cfg);
	assert_string_equal(cfg.cluster_domain, "example.org");
	assert_int_equal(cfg.n_listen, 2);
	assert_v4(&cfg.listen[0], "169.254.20.10");
	assert_v6(&cfg.listen[1], "fd00::a");
	assert_int_equal(cfg.port, 5353);
	assert_int_equal(cfg.n_upstream, 5);
	assert_sa(&cfg.upstream[0], "10.96.0.10", 53);
	assert_sa(&cfg.upstream[1], "10.96.0.11", 5300);
	assert_sa(&cfg.upstream[2], "fd00::10", 54);
	assert_sa(&cfg.upstream[3], "fd00::11", 53);
	assert_sa(&cfg.upstream[4], "::1", 53);
	assert_int_equal(cfg.source.kind, NDC_SOURCE_SNAPSHOT);
	assert_string_equal(cfg.source.snapshot, "/var/lib/ndcache/objects.json");
	assert_null(cfg.source.kubeconfig);
	assert_int_equal(cfg.records.ttl, 30);
	assert_int_equal(cfg.records.pods, NDC_PODS_VERIFIED);
	assert_true(cfg.records.endpoint_pod_names);
	assert_true(cfg.records.ignore_empty_service);
	assert_strv(cfg.records.namespaces, cfg.records.n_namespaces, ns, 2);
	assert_int_equal(cfg.dataplane.mode, NDC_DP_XDP);
	assert_strv(cfg.dataplane.interfaces, cfg.dataplane.n_interfaces, ifs, 2);
	assert_int_equal(cfg.dataplane.tc_order, NDC_TC_ORDER_FIRST);
	assert_string_equal(cfg.http.listen, "[::1]:9000");
	assert_int_equal(cfg.cache.max_entries, 10000000);
	assert_int_equal(cfg.cache.max_bytes, 1ULL << 30);
	assert_int_equal(cfg.cache.max_ttl, 604800);
	assert_int_equal(cfg.cache.neg_max_ttl, 0);
	assert_int_equal(cfg.cache.stale_max, 0);
	assert_int_equal(cfg.forward.timeout_ms, 10);
	assert_int_equal(cfg.forward.max_pending, 1000000);
	assert_true(cfg.cache.prefetch.on);
	assert_int_equal(cfg.cache.prefetch.min_hits, 1000000);
	assert_int_equal(cfg.cache.prefetch.before_pct, 99);
	assert_int_equal(cfg.forward.per_client.qps, 10000000);
	assert_int_equal(cfg.forward.per_client.burst, 1);
	assert_int_equal(cfg.n_stub_domains, 2);
	assert_string_equal(cfg.stub_domains[0].zone, "acme.local");
	assert_int_equal(cfg.stub_domains[0].n_servers, 2);
	assert_sa(&cfg.stub_domains[0].servers[0], "169.254.53.11", 53);
	assert_sa(&cfg.stub_domains[0].servers[1], "169.254.53.12", 5353);
	assert_string_equal(cfg.stub_domains[1].zone, "corp.example");
	assert_int_equal(cfg.stub_domains[1].n_servers, 1);
	assert_sa(&cfg.stub_domains[1].servers[0], "fd00::53", 54);
	assert_int_equal(cfg.log.level, 3);
	assert_true(cfg.log.queries);
	assert_int_equal(cfg.log.sample_ppm, 250000);
	assert_int_equal(cfg.workers, 256);
	assert_int_equal(cfg.tcp_idle_ms, 100);
	assert_int_equal(cfg.tcp_max_conns, 65536);
	assert_int_equal(cfg.upgrade.wait_s, 3600);
	assert_int_equal(cfg.upgrade.join_wait_ms, 60000);
	ndc_config_free(&cfg);
	/* Freeing leaves a zeroed struct that can be freed again. */
	assert_null(cfg.cluster_domain);
	assert_int_equal(cfg.n_listen, 0);
	ndc_config_free(&cfg);
	ndc_config_free(NULL);
}

static void test_value_forms(void **state)
{
	struct ndc_config cfg;

	(void)state;
	/* Single scalars for the address lists; other enum values; no/false. */
	expect_ok(
	    "listen: fd00::53\nupstream: 10.0.0.1:54\n"
	    "records: {pods: insecure, endpoint_pod_names: No, ignore_empty_service: false}\n"
	    "dataplane: {mode: socket, interfaces: [], table_size: 1024, redirect_peer: yes,\n"
	    "  failopen: no, pin_dir: /sys/fs/bpf/x}\n",
	    &cfg);
	assert_int_equal(cfg.n_listen, 1);
	assert_v6(&cfg.listen[0], "fd00::53");
	assert_int_equal(cfg.n_upstream, 1);
	assert_sa(&cfg.upstream[0], "10.0.0.1", 54);
	assert_int_equal(cfg.records.pods, NDC_PODS_INSECURE);
	assert_false(cfg.records.endpoint_pod_names);
	assert_false(cfg.records.ignore_empty_service);
	assert_int_equal(cfg.dataplane.mode, NDC_DP_SOCKET);
	assert_int_equal(cfg.dataplane.n_interfaces, 0);
	assert_int_equal(cfg.dataplane.table_size, 1024);
	assert_true(cfg.dataplane.redirect_peer);
	assert_false(cfg.dataplane.failopen);
	assert_string_equal(cfg.dataplane.pin_dir, "/sys/fs/bpf/x");
	ndc_config_free(&cfg);
	expect_error("dataplane:\n  table_size: 100\n",
		     "line 2: dataplane.table_size: expected an integer 1024..16777216, got '100'");

	expect_ok("dataplane: {mode: dpdk}\ncache: {max_bytes: 65536}\nupstream: ~\n", &cfg);
	assert_int_equal(cfg.dataplane.mode, NDC_DP_DPDK);
	assert_int_equal(cfg.cache.max_bytes, 65536);
	assert_int_equal(cfg.n_upstream, 0);
	ndc_config_free(&cfg);

	/* Size suffixes, 1024-based, Kubernetes style too; the bounds are inclusive. */
	expect_ok("cache: {max_bytes: 64K}\n", &cfg);
	assert_int_equal(cfg.cache.max_bytes, 65536);
	ndc_config_free(&cfg);
	expect_ok("cache: {max_bytes: 16G}\n", &cfg);
	assert_int_equal(cfg.cache.max_bytes, 16ULL << 30);
	ndc_config_free(&cfg);
	expect_ok("cache: {max_bytes: 512Mi}\n", &cfg);
	assert_int_equal(cfg.cache.max_bytes, 512ULL << 20);
	ndc_config_free(&cfg);

	/* Kubernetes source: with a kubeconfig, and in-cluster as {} or null. */
	expect_ok("source:\n  kubernetes:\n    kubeconfig: /etc/kubeconfig\n", &cfg);
	assert_int_equal(cfg.source.kind, NDC_SOURCE_KUBERNETES);
	assert_string_equal(cfg.source.kubeconfig, "/etc/kubeconfig");
	assert_null(cfg.source.snapshot);
	ndc_config_free(&cfg);
	expect_ok("source: {kubernetes: {}}\n", &cfg);
	assert_int_equal(cfg.source.kind, NDC_SOURCE_KUBERNETES);
	assert_null(cfg.source.kubeconfig);
	ndc_config_free(&cfg);
	expect_ok("source:\n  kubernetes:\n", &cfg);
	assert_int_equal(cfg.source.kind, NDC_SOURCE_KUBERNETES);
	assert_null(cfg.source.kubeconfig);
	ndc_config_free(&cfg);

	/* Eight addresses is the most; a single-label domain; '_' in labels. */
	expect_ok("listen: [1.1.1.1, 1.1.1.2, 1.1.1.3, 1.1.1.4, 1.1.1.5, 1.1.1.6, 1.1.1.7, '::8']\n"
		  "cluster_domain: my_zone\n",
		  &cfg);
	assert_int_equal(cfg.n_listen, 8);
	assert_v6(&cfg.listen[7], "::8");
	assert_string_equal(cfg.cluster_domain, "my_zone");
	ndc_config_free(&cfg);
}

/* cache.prefetch and forward.per_client: a mapping, true (defaults), false (off), null. */
static void test_switch_sections(void **state)
{
	struct ndc_config cfg;

	(void)state;
	expect_ok("cache: {prefetch: false}\nforward: {per_client: no}\n", &cfg);
	assert_false(cfg.cache.prefetch.on);
	assert_int_equal(cfg.forward.per_client.qps, 0);
	ndc_config_free(&cfg);
	expect_ok("cache: {prefetch: true}\nforward: {per_client: True}\n", &cfg);
	assert_true(cfg.cache.prefetch.on);
	assert_int_equal(cfg.cache.prefetch.min_hits, 2);
	assert_int_equal(cfg.cache.prefetch.before_pct, 10);
	assert_int_equal(cfg.forward.per_client.qps, 1000);
	assert_int_equal(cfg.forward.per_client.burst, 2000);
	ndc_config_free(&cfg);
	/* A key not given keeps its default; null or {} are the defaults. */
	expect_ok("cache:\n  prefetch: {before_pct: 50}\nforward:\n  per_client:\n", &cfg);
	assert_true(cfg.cache.prefetch.on);
	assert_int_equal(cfg.cache.prefetch.min_hits, 2);
	assert_int_equal(cfg.cache.prefetch.before_pct, 50);
	assert_int_equal(cfg.forward.per_client.qps, 1000);
	ndc_config_free(&cfg);
	expect_ok("cache: {prefetch: {min_hits: 1}}\nforward: {per_client: {burst: 5}}\n", &cfg);
	assert_int_equal(cfg.cache.prefetch.min_hits, 1);
	assert_int_equal(cfg.cache.prefetch.before_pct, 10);
	assert_int_equal(cfg.forward.per_client.qps, 1000);
	assert_int_equal(cfg.forward.per_client.burst, 5);
	ndc_config_free(&cfg);

	expect_error("cache:\n  prefetch: sometimes\n",
		     "line 2: cache.prefetch: expected a mapping, true or false, got 'sometimes'");
	expect_error("forward: {per_client: [1]}\n",
		     "line 1: forward.per_client: expected a mapping, true or false, got a list");
	expect_error("cache: {prefetch: {before_pct: 0}}\n",
		     "line 1: cache.prefetch.before_pct: expected an integer 1..99, got '0'");
	expect_error("cache: {prefetch: {before_pct: 100}}\n",
		     "line 1: cache.prefetch.before_pct: expected an integer 1..99, got '100'");
	expect_error("cache: {prefetch: {min_hits: 0}}\n",
		     "line 1: cache.prefetch.min_hits: expected an integer 1..1000000, got '0'");
	expect_error("cache: {prefetch: {hits: 3}}\n",
		     "line 1: cache.prefetch.hits: unknown key (known keys: min_hits, before_pct)");
	expect_error("forward:\n  per_client: {qps: 0}\n",
		     "line 2: forward.per_client.qps: expected an integer 1..10000000, got '0'");
	expect_error("forward:\n  per_client: {qps: 5, burst: 10000001}\n",
		     "line 2: forward.per_client.burst: expected an integer 1..10000000, got "
		     "'10000001'");
}

static void test_error_unknown_and_duplicate(void **state)
{
	(void)state;
	expect_error("records:\n  tll: 5\n",
		     "line 2: records.tll: unknown key (known keys: ttl, pods, endpoint_pod_names, "
		     "ignore_empty_service, namespaces, multicluster_zones)");
	expect_error("port: 53\nbogus: 1\n",
		     "line 2: bogus: unknown key (known keys: cluster_domain, listen, port, "
		     "upstream, stub_domains, source, records, dataplane, http, cache, forward, "
		     "log, workers, tcp_idle_ms, tcp_max_conns, upgrade)");
	expect_error("source:\n  kubernetes:\n    kubeconfg: /x\n",
		     "line 3: source.kubernetes.kubeconfg: unknown key (known keys: kubeconfig, "
		     "kube_dns_configmap)");
	expect_error("port: 53\nworkers: 2\nport: 54\n",
		     "line 3: port: duplicate key (first at line 1)");
	expect_error("cache:\n  max_ttl: 60\n  max_ttl: 60\n",
		     "line 3: cache.max_ttl: duplicate key (first at line 2)");
	expect_error("? [a, b]\n: 1\n", "line 1: expected a key, got a list");
}

static void test_error_integers(void **state)
{
	(void)state;
	expect_error("# ndcache\ncluster_domain: cluster.local\nrecords:\n  ttl: x\n",
		     "line 4: records.ttl: expected an integer 0..3600, got 'x'");
	expect_error("records:\n  ttl: 3601\n",
		     "line 2: records.ttl: expected an integer 0..3600, got '3601'");
	expect_error("records:\n  ttl: -1\n",
		     "line 2: records.ttl: expected an integer 0..3600, got '-1'");
	expect_error("records:\n  ttl: +5\n",
		     "line 2: records.ttl: expected an integer 0..3600, got '+5'");
	expect_error("records:\n  ttl: 5.0\n",
		     "line 2: records.ttl: expected an integer 0..3600, got '5.0'");
	expect_error("records:\n  ttl: 010\n",
		     "line 2: records.ttl: expected an integer 0..3600, got '010'");
	expect_error("records:\n  ttl: 5s\n",
		     "line 2: records.ttl: expected an integer 0..3600, got '5s'");
	expect_error("records:\n  ttl:\n",
		     "line 2: records.ttl: expected an integer 0..3600, got an empty value");
	expect_error("cache:\n  max_entries: 99999999999999999999999\n",
		     "line 2: cache.max_entries: expected an integer 1..10000000, got "
		     "'99999999999999999999999'");
	/* 2^32 + 1 must not wrap to 1. */
	expect_error("workers: 4294967297\n",
		     "line 1: workers: expected an integer 0..256, got '4294967297'");
	expect_error("port: 0\n", "line 1: port: expected an integer 1..65535, got '0'");
	expect_error("upgrade: {wait_s: 3601}\n",
		     "line 1: upgrade.wait_s: expected an integer 0..3600, got '3601'");
	expect_error("upgrade:\n  join_wait_ms: 60001\n",
		     "line 2: upgrade.join_wait_ms: expected an integer 0..60000, got '60001'");
	expect_error("upgrade: {join_wait: 5}\n",
		     "line 1: upgrade.join_wait: unknown key (known keys: wait_s, join_wait_ms)");
	expect_error("port: 65536\n", "line 1: port: expected an integer 1..65535, got '65536'");
	expect_error(
	    "cache: {max_bytes: 63K}\n",
	    "line 1: cache.max_bytes: expected a size 64K..16G (bytes, or with a K, M or G "
	    "suffix), got '63K'");
	expect_error(
	    "cache: {max_bytes: 17179869184000000000G}\n",
	    "line 1: cache.max_bytes: expected a size 64K..16G (bytes, or with a K, M or G "
	    "suffix), got '17179869184000000000G'");
	expect_error(
	    "cache: {max_bytes: 64MB}\n",
	    "line 1: cache.max_bytes: expected a size 64K..16G (bytes, or with a K, M or G "
	    "suffix), got '64MB'");
	expect_error("forward:\n  timeout_ms: 9\n",
		     "line 2: forward.timeout_ms: expected an integer 10..60000, got '9'");
	expect_error("forward:\n  max_pending: 0\n",
		     "line 2: forward.max_pending: expected an integer 1..1000000, got '0'");
	expect_error("forward: {max_pending: 1000001}\n",
		     "line 1: forward.max_pending: expected an integer 1..1000000, got '1000001'");
}

static void test_error_addresses(void **state)
{
	(void)state;
	expect_error("listen: [169.254.20.10, 300.1.1.1]\n",
		     "line 1: listen[1]: expected an IPv4 or IPv6 address, got '300.1.1.1'");
	expect_error("listen: localhost\n",
		     "line 1: listen: expected an IPv4 or IPv6 address, got 'localhost'");
	expect_error("listen: []\n", "line 1: listen: expected 1..8 addresses, got 0");
	expect_error("listen: [1.1.1.1, 1.1.1.2, 1.1.1.3, 1.1.1.4, 1.1.1.5, 1.1.1.6, 1.1.1.7,\n"
		     "  1.1.1.8, 1.1.1.9]\n",
		     "line 1: listen: expected 1..8 addresses, got 9");
	expect_error("upstream:\n  - 10.96.0.10\n  - 10.0.0.10:70000\n",
		     "line 3: upstream[1]: expected a port 1..65535 in '10.0.0.10:70000'");
	expect_error("upstream: 10.0.0.10:0\n",
		     "line 1: upstream: expected a port 1..65535 in '10.0.0.10:0'");
	expect_error("upstream: '[fd00::1]:'\n",
		     "line 1: upstream: expected a port 1..65535 in '[fd00::1]:'");
	expect_error("upstream: ['[10.0.0.1]:53']\n",
		     "line 1: upstream[0]: expected an address (ip, ip:port or [ipv6]:port), got "
		     "'[10.0.0.1]:53'");
	expect_error("upstream: [kube-dns:53]\n",
		     "line 1: upstream[0]: expected an address (ip, ip:port or [ipv6]:port), got "
		     "'kube-dns:53'");
	expect_error("http:\n  listen: 127.0.0.1\n",
		     "line 2: http.listen: expected a port 1..65535 in '127.0.0.1'");
	expect_error("http:\n  listen: '::1:9254'\n",
		     "line 2: http.listen: expected host:port with an IPv4 or [IPv6] host, got "
		     "'::1:9254'");
	expect_error("http:\n  listen: 'localhost:9254'\n",
		     "line 2: http.listen: expected host:port with an IPv4 or [IPv6] host, got "
		     "'localhost:9254'");
}

static void test_error_enums_and_names(void **state)
{
	(void)state;
	expect_error("dataplane:\n  mode: ebpf\n",
		     "line 2: dataplane.mode: expected one of tc, xdp, socket, dpdk, got 'ebpf'");
	expect_error("dataplane:\n  tc_order: last\n",
		     "line 2: dataplane.tc_order: expected one of after, first, got 'last'");
	expect_error("records:\n  pods: Verified\n",
		     "line 2: records.pods: expected one of disabled, insecure, verified, got "
		     "'Verified'");
	expect_error(
	    "records:\n  endpoint_pod_names: on\n",
	    "line 2: records.endpoint_pod_names: expected true, false, yes or no, got 'on'");
	expect_error("cluster_domain: -bad.local\n",
		     "line 1: cluster_domain: expected a DNS domain name, got '-bad.local' (label "
		     "starts with '-')");
	expect_error(
	    "cluster_domain: a..b\n",
	    "line 1: cluster_domain: expected a DNS domain name, got 'a..b' (empty label)");
	expect_error(
	    "cluster_domain: 'clus ter.local'\n",
	    "line 1: cluster_domain: expected a DNS domain name, got 'clus ter.local' (only "
	    "a-z, 0-9, '-' and '_' are allowed in labels)");
	expect_error("cluster_domain: .\n",
		     "line 1: cluster_domain: expected a DNS domain name, got '.' (empty name)");
	expect_error(
	    "cluster_domain: "
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.local\n",
	    "line 1: cluster_domain: expected a DNS domain name, got "
	    "'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...' (label longer than 63 characters)");
	expect_error(
	    "records:\n  namespaces: [default, Kube_System]\n",
	    "line 2: records.namespaces[1]: expected a namespace name (RFC 1123 label), got "
	    "'Kube_System'");
	expect_error("dataplane:\n  interfaces: [veth*, averyveryverylongname]\n",
		     "line 2: dataplane.interfaces[1]: expected an interface name or glob (1..15 "
		     "characters, no '/', ':' or spaces), got 'averyveryverylongname'");
	expect_error("source:\n  snapshot: ''\n",
		     "line 2: source.snapshot: expected a file path, got an empty value");
}

static void test_error_kinds(void **state)
{
	(void)state;
	expect_error("records:\n  namespaces: default\n",
		     "line 2: records.namespaces: expected a list of namespaces, got 'default'");
	expect_error("cache: [1]\n", "line 1: cache: expected a mapping, got a list");
	expect_error("port: [53]\n", "line 1: port: expected an integer 1..65535, got a list");
	expect_error("listen: {a: 1}\n",
		     "line 1: listen: expected an IP address or a list of them, got a mapping");
	expect_error("upstream: [[10.0.0.1]]\n",
		     "line 1: upstream[0]: expected an address (ip, ip:port or [ipv6]:port), got a "
		     "list");
	expect_error("- port\n", "line 1: expected a mapping at the top level, got a list");
	expect_error("port\n", "line 1: expected a mapping at the top level, got 'port'");
	expect_error("source: {}\n", "line 1: source: expected one of snapshot, kubernetes");
	expect_error("source: /x.json\n", "line 1: source: expected a mapping, got '/x.json'");
	expect_error("source:\n  kubernetes: /kubeconfig\n",
		     "line 2: source.kubernetes: expected a mapping, got '/kubeconfig'");
	expect_error("cluster_domain: \"a\\0b\"\n",
		     "line 1: cluster_domain: expected a DNS domain name, got a value containing a "
		     "NUL byte");
}

static void test_error_source_both(void **state)
{
	(void)state;
	expect_error("source:\n  snapshot: /a.json\n  kubernetes: {}\n",
		     "line 3: source: give either snapshot or kubernetes, not both");
	expect_error("source:\n  kubernetes:\n    kubeconfig: /k\n  snapshot: /a.json\n",
		     "line 4: source: give either snapshot or kubernetes, not both");
}

/* records.multicluster_zones: normalised like cluster_domain; checked against other keys. */
static void test_multicluster_zones(void **state)
{
	struct ndc_config cfg;
	char err[512];

	(void)state;
	assert_int_equal(
	    parse("records:\n  multicluster_zones: [ClusterSet.Local., cluster.local]\n", &cfg, err,
		  sizeof(err)),
	    0);
	assert_int_equal(cfg.records.n_multicluster_zones, 2);
	assert_string_equal(cfg.records.multicluster_zones[0], "clusterset.local");
	assert_string_equal(cfg.records.multicluster_zones[1], "cluster.local");
	ndc_config_free(&cfg);
	assert_int_equal(parse("port: 53\n", &cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.records.n_multicluster_zones, 0); /* empty by default */
	ndc_config_free(&cfg);
	expect_error("records:\n  multicluster_zones: [a.b, A.B.]\n",
		     "line 2: records.multicluster_zones: zone a.b given twice");
	expect_error(
	    "records:\n  multicluster_zones: [a..b]\n",
	    "line 2: records.multicluster_zones[0]: expected a DNS domain name, got 'a..b'");
	expect_error(
	    "records:\n  multicluster_zones: [mc.cluster.local]\n",
	    "line 2: records.multicluster_zones[0]: mc.cluster.local is inside "
	    "cluster_domain cluster.local: use the cluster domain itself or a zone outside "
	    "it");
	expect_error("records:\n  multicluster_zones: [clusterset.local]\nstub_domains:\n"
		     "  x.clusterset.local: 10.0.0.1\n",
		     "line 4: records.multicluster_zones[0]: stub domain x.clusterset.local is "
		     "inside multicluster zone clusterset.local, which ndcache answers itself");
}

static void test_error_yaml_features(void **state)
{
	(void)state;
	expect_error("port: &p 53\n", "line 1: port: YAML anchors and aliases are not supported");
	expect_error("records:\n  ttl: *ttl\n",
		     "line 2: records.ttl: YAML anchors and aliases are not supported");
	expect_error("defaults: &d {ttl: 5}\nrecords: *d\n",
		     "line 1: defaults: unknown key (known keys: cluster_domain, listen, port, "
		     "upstream, stub_domains, source, records, dataplane, http, cache, forward, "
		     "log, workers, tcp_idle_ms, tcp_max_conns, upgrade)");
	expect_error("records:\n  namespaces: [default, *ns]\n",
		     "line 2: records.namespaces[1]: YAML anchors and aliases are not supported");
	expect_error("port: !!int 53\n", "line 1: port: YAML tags are not supported");
	expect_error("port: 53\n---\nport: 54\n", "line 2: only one YAML document is allowed");
	expect_error("a: [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]\n",
		     "line 1: nested deeper than 32 levels");
}

static void test_error_syntax(void **state)
{
	(void)state;
	expect_error("records:\n  ttl: [5\nport: 53\n",
		     "line 3: did not find expected ',' or ']' (while parsing a flow sequence at "
		     "line 2)");
	expect_error("port: 53\n  workers: 2\n",
		     "line 2: mapping values are not allowed in this context");
	expect_error("records:\n\tttl: 5\n",
		     "line 2: found character that cannot start any token (while scanning for the "
		     "next token at line 2)");
	expect_error("port: 53\nworkers: \"\xff\"\n",
		     "line 2: invalid leading UTF-8 octet (byte 0xFF)");
}

static void test_error_keeps_parsed(void **state)
{
	struct ndc_config cfg;
	char err[16];

	(void)state;
	/* On error the struct holds what was parsed so far and is freed as usual. */
	assert_int_equal(
	    parse("port: 54\nrecords: {namespaces: [a]}\nworkers: x\n", &cfg, err, sizeof(err)),
	    -EINVAL);
	assert_int_equal(cfg.port, 54);
	assert_int_equal(cfg.records.n_namespaces, 1);
	/* The message is truncated to the buffer, never overrun. */
	assert_string_equal(err, "line 3: workers");
	ndc_config_free(&cfg);
	assert_int_equal(parse("workers: x\n", &cfg, NULL, 0), -EINVAL);
	ndc_config_free(&cfg);
	/* Replacing lists frees the earlier value (checked by LSan). */
	expect_ok("cluster_domain: a.b\nhttp: {listen: '0.0.0.0:1'}\n", &cfg);
	ndc_config_free(&cfg);
}

static char tmp_path[] = "/tmp/ndc-test-config-XXXXXX";

/* Removes the temporary file even when an assertion in test_load failed. */
static int remove_tmp(void **state)
{
	(void)state;
	if (strcmp(tmp_path + strlen(tmp_path) - 6, "XXXXXX"))
		unlink(tmp_path);
	return 0;
}

static void test_load(void **state)
{
	char *path = tmp_path, err[512] = "";
	static const char bad[] = "port: 53\nrecords:\n  ttl: 99999\n";
	struct ndc_config cfg;
	int fd;

	(void)state;
	assert_int_equal(ndc_config_load("/nonexistent/ndcache.yaml", &cfg, err, sizeof(err)),
			 -ENOENT);
	assert_string_equal(err, "/nonexistent/ndcache.yaml: No such file or directory");
	assert_defaults(&cfg);
	ndc_config_free(&cfg);

	assert_int_equal(ndc_config_load("/", &cfg, err, sizeof(err)), -EISDIR);
	assert_string_equal(err, "/: Is a directory");
	ndc_config_free(&cfg);

	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, bad, sizeof(bad) - 1), (ssize_t)(sizeof(bad) - 1));
	close(fd);
	assert_int_equal(ndc_config_load(path, &cfg, err, sizeof(err)), -EINVAL);
	{
		char want[600];
		snprintf(want, sizeof(want),
			 "%s: line 3: records.ttl: expected an integer 0..3600, got '99999'", path);
		assert_string_equal(err, want);
	}
	ndc_config_free(&cfg);
	fd = open(path, O_WRONLY | O_TRUNC);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "port: 5300\n", 11), 11);
	close(fd);
	err[0] = '\0';
	assert_int_equal(ndc_config_load(path, &cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.port, 5300);
	ndc_config_free(&cfg);
}

/* stub_domains and log: forms, then each error naming its key. */
/* log.clients, log.clients_namespaces and log.dnstap (issue 37). */
static void test_log_clients_dnstap(void **state)
{
	struct ndc_config cfg;

	(void)state;
	expect_ok("log: {level: info}\n", &cfg);
	assert_true(cfg.log.clients);
	assert_false(cfg.log.clients_namespaces);
	assert_null(cfg.log.dnstap.socket);
	assert_true(cfg.log.dnstap.sample == 1.0);
	assert_true(cfg.log.dnstap.kernel_sample == 0.01);
	ndc_config_free(&cfg);
	expect_ok("log: {clients: false, clients_namespaces: true}\n", &cfg);
	assert_false(cfg.log.clients);
	assert_true(cfg.log.clients_namespaces);
	ndc_config_free(&cfg);
	expect_error("log: {clients: maybe}\n",
		     "line 1: log.clients: expected true, false, yes or no, got 'maybe'");
	expect_error("log: {dnstap: {sample: 0.5}}\n",
		     "line 1: log.dnstap: socket is required (the dnstap reader's unix socket, "
		     "e.g. /run/ndcache/dnstap.sock)");
	expect_error("log: {dnstap: {socket: run/d.sock}}\n",
		     "line 1: log.dnstap.socket: expected an absolute path of a unix socket (at "
		     "most 107 bytes), got 'run/d.sock'");
	if (!ndc_dnstap_available()) {
		expect_error("log: {dnstap: {socket: /run/d.sock}}\n",
			     "line 1: log.dnstap.socket: this build has no dnstap (libfstrm, "
			     "libprotobuf-c and protoc-c were not found when it was built)");
		return;
	}
	expect_ok("log: {dnstap: {socket: /run/d.sock, sample: 0.25, kernel_sample: 1e-3}}\n",
		  &cfg);
	assert_string_equal(cfg.log.dnstap.socket, "/run/d.sock");
	assert_true(cfg.log.dnstap.sample == 0.25);
	assert_true(cfg.log.dnstap.kernel_sample == 0.001);
	ndc_config_free(&cfg);
	expect_error(
	    "log: {dnstap: {socket: /run/d.sock, sample: 1.5}}\n",
	    "line 1: log.dnstap.sample: expected a rate from 0 to 1 (e.g. 0.01), got '1.5'");
	expect_error(
	    "log: {dnstap: {socket: /run/d.sock, kernel_sample: -0.1}}\n",
	    "line 1: log.dnstap.kernel_sample: expected a rate from 0 to 1 (e.g. 0.01), got "
	    "'-0.1'");
	expect_error(
	    "log: {dnstap: {socket: /run/d.sock, sample: nan}}\n",
	    "line 1: log.dnstap.sample: expected a rate from 0 to 1 (e.g. 0.01), got 'nan'");
}

static void test_stub_domains_and_log(void **state)
{
	static const struct {
		const char *text;
		uint32_t ppm;
	} samples[] = {{"1", 1000000}, {"1.0", 1000000}, {"1.000000", 1000000}, {"0.5", 500000},
		       {".5", 500000}, {"0.000001", 1},	 {"0.01", 10000}};
	struct ndc_config cfg;
	char yaml[128];

	(void)state;
	expect_ok("stub_domains: {}\n", &cfg);
	assert_int_equal(cfg.n_stub_domains, 0);
	ndc_config_free(&cfg);
	expect_ok("stub_domains:\n", &cfg);
	assert_int_equal(cfg.n_stub_domains, 0);
	ndc_config_free(&cfg);
	/* Reverse zones are stub domains too; kube_dns_configmap can be turned off. */
	expect_ok("stub_domains: {10.in-addr.arpa: [10.0.0.53]}\n"
		  "source: {kubernetes: {kube_dns_configmap: false}}\n",
		  &cfg);
	assert_string_equal(cfg.stub_domains[0].zone, "10.in-addr.arpa");
	assert_false(cfg.source.kube_dns_configmap);
	ndc_config_free(&cfg);
	for (size_t i = 0; i < sizeof(samples) / sizeof(samples[0]); i++) {
		snprintf(yaml, sizeof(yaml), "log: {sample: %s}\n", samples[i].text);
		expect_ok(yaml, &cfg);
		assert_int_equal(cfg.log.sample_ppm, samples[i].ppm);
		ndc_config_free(&cfg);
	}

	expect_error("stub_domains: [a.b]\n",
		     "line 1: stub_domains: expected a mapping of zones to server addresses, got "
		     "a list");
	expect_error("stub_domains:\n  acme..local: [1.2.3.4]\n",
		     "line 2: stub_domains.acme..local: expected a DNS domain name, got "
		     "'acme..local' (empty label)");
	expect_error("stub_domains:\n  .: [1.2.3.4]\n",
		     "line 2: stub_domains..: expected a DNS domain name, got '.' (the root is "
		     "not a stub domain: that is upstream)");
	expect_error("stub_domains:\n  acme.local: [1.2.3.4]\n  ACME.local.: [1.2.3.5]\n",
		     "line 3: stub_domains.ACME.local.: zone given twice (first at line 2)");
	expect_error("stub_domains:\n  acme.local: [1.2.3.4, nameserver.acme]\n",
		     "line 2: stub_domains.acme.local[1]: expected an address (ip, ip:port or "
		     "[ipv6]:port), got 'nameserver.acme'");
	expect_error("stub_domains:\n  acme.local: 1.2.3.4:0\n",
		     "line 2: stub_domains.acme.local: expected a port 1..65535 in '1.2.3.4:0'");
	expect_error("stub_domains:\n  acme.local: []\n",
		     "line 2: stub_domains.acme.local: expected 1..8 addresses, got 0");
	expect_error("stub_domains:\n  acme.local:\n",
		     "line 2: stub_domains.acme.local: expected 1..8 addresses, got 0");
	expect_error("stub_domains:\n  [a]: [1.2.3.4]\n",
		     "line 2: stub_domains: expected a zone name, got a list");
	expect_error("cluster_domain: cluster.local\nstub_domains:\n  svc.Cluster.local: "
		     "[1.2.3.4]\n",
		     "line 3: stub_domains.svc.cluster.local: inside cluster_domain "
		     "cluster.local, which ndcache answers itself");
	expect_error("stub_domains:\n  cluster.local: [1.2.3.4]\n",
		     "line 2: stub_domains.cluster.local: inside cluster_domain cluster.local, "
		     "which ndcache answers itself");
	expect_error("log: {level: verbose}\n",
		     "line 1: log.level: expected one of error, warning, info, debug, got "
		     "'verbose'");
	expect_error("log: {queries: sometimes}\n",
		     "line 1: log.queries: expected true, false, yes or no, got 'sometimes'");
	expect_error("log: {sample: 0}\n",
		     "line 1: log.sample: expected a fraction 0.000001..1 (e.g. 0.01), got '0'");
	expect_error("log: {sample: 1.5}\n",
		     "line 1: log.sample: expected a fraction 0.000001..1 (e.g. 0.01), got '1.5'");
	expect_error("log: {sample: 0.0000001}\n",
		     "line 1: log.sample: expected a fraction 0.000001..1 (e.g. 0.01), got "
		     "'0.0000001'");
	expect_error("log: {sample: 1e-3}\n",
		     "line 1: log.sample: expected a fraction 0.000001..1 (e.g. 0.01), got '1e-3'");
	expect_error("log: {sample: 10%}\n",
		     "line 1: log.sample: expected a fraction 0.000001..1 (e.g. 0.01), got '10%'");
	expect_error("log: {sample: .}\n",
		     "line 1: log.sample: expected a fraction 0.000001..1 (e.g. 0.01), got '.'");
	expect_error("log: {sample: -0.5}\n",
		     "line 1: log.sample: expected a fraction 0.000001..1 (e.g. 0.01), got "
		     "'-0.5'");
	expect_error(
	    "log: {format: json}\n",
	    "line 1: log.format: unknown key (known keys: level, queries, sample, clients, "
	    "clients_namespaces, dnstap)");
}

/* The kube-dns ConfigMap's two keys: what NodeLocal DNSCache takes, and errors naming the key. */
/* forward.protocol and forward.policy: each name, the defaults, and a bad one named. */
static void test_forward_protocol_policy(void **state)
{
	static const char *const protos[] = {"udp", "tcp", "prefer_udp"};
	static const char *const policies[] = {"sequential", "random", "round_robin"};
	struct ndc_config cfg;
	char text[128], err[256];

	(void)state;
	ndc_config_defaults(&cfg);
	assert_int_equal(cfg.forward.protocol, 0);
	assert_int_equal(cfg.forward.policy, 0);
	for (int i = 0; i < 3; i++) {
		snprintf(text, sizeof(text), "forward: {protocol: %s, policy: %s}\n", protos[i],
			 policies[i]);
		assert_int_equal(ndc_config_parse(text, strlen(text), &cfg, err, sizeof(err)), 0);
		assert_int_equal(cfg.forward.protocol, i);
		assert_int_equal(cfg.forward.policy, i);
		ndc_config_free(&cfg);
	}
	expect_error("forward:\n  protocol: doh\n",
		     "line 2: forward.protocol: expected one of udp, tcp, prefer_udp, got 'doh'");
	expect_error("forward: {policy: fastest}\n",
		     "line 1: forward.policy: expected one of sequential, random, round_robin, got "
		     "'fastest'");
	expect_error("forward: {protocol: [tcp]}\n",
		     "line 1: forward.protocol: expected one of udp, tcp, prefer_udp, got a list");
}

static void test_kube_dns(void **state)
{
	struct sockaddr_storage ups[NDC_CFG_MAX_ADDRS];
	struct ndc_stub_domain *sd;
	char err[256];
	size_t n;

#define STUB(json) ndc_kube_dns_stub_domains(json, strlen(json), &sd, &n, err, sizeof(err))
#define UPS(json) ndc_kube_dns_upstreams(json, strlen(json), ups, &n, err, sizeof(err))
	(void)state;
	assert_int_equal(STUB("{\"Acme.local.\": [\"1.2.3.4\", \"1.2.3.5:5353\"], "
			      "\"corp\": [\"[fd00::1]:54\"]}"),
			 0);
	assert_int_equal(n, 2);
	assert_string_equal(sd[0].zone, "acme.local");
	assert_int_equal(sd[0].n_servers, 2);
	assert_sa(&sd[0].servers[1], "1.2.3.5", 5353);
	assert_string_equal(sd[1].zone, "corp");
	assert_sa(&sd[1].servers[0], "fd00::1", 54);
	ndc_config_stubs_free(sd, n);
	/* Empty or absent: nothing. */
	assert_int_equal(STUB(""), 0);
	assert_int_equal(n, 0);
	assert_int_equal(STUB(" {}\n"), 0);
	assert_int_equal(n, 0);
	ndc_config_stubs_free(sd, n);
	assert_int_equal(UPS("[\"8.8.8.8\", \"[2001:db8::1]:5353\"]"), 0);
	assert_int_equal(n, 2);
	assert_sa(&ups[0], "8.8.8.8", 53);
	assert_sa(&ups[1], "2001:db8::1", 5353);
	assert_int_equal(UPS("[]"), 0);
	assert_int_equal(n, 0);

	assert_int_equal(STUB("{\"acme.local\": [\"1.2.3.4\""), -EINVAL);
	assert_string_equal(err, "stubDomains: not JSON: unexpected end of text");
	assert_int_equal(STUB("{\"a\": [\"1.2.3.4\"]} x"), -EINVAL);
	assert_string_equal(err, "stubDomains: not JSON: text after the value");
	assert_int_equal(STUB("[\"1.2.3.4\"]"), -EINVAL);
	assert_string_equal(err,
			    "stubDomains: expected a JSON object of zones to lists of addresses");
	assert_int_equal(STUB("{\"acme..local\": [\"1.2.3.4\"]}"), -EINVAL);
	assert_string_equal(err, "stubDomains: acme..local: not a zone name (empty label)");
	assert_int_equal(STUB("{\".\": [\"1.2.3.4\"]}"), -EINVAL);
	assert_string_equal(err, "stubDomains: .: not a zone name (the root is not a stub domain: "
				 "that is upstreamNameservers)");
	assert_int_equal(STUB("{\"a.b\": [\"1.2.3.4\"], \"A.B.\": [\"1.2.3.5\"]}"), -EINVAL);
	assert_string_equal(err, "stubDomains: A.B.: zone given twice");
	assert_int_equal(STUB("{\"acme.local\": \"1.2.3.4\"}"), -EINVAL);
	assert_string_equal(err, "stubDomains: acme.local: expected a list of addresses");
	assert_int_equal(STUB("{\"acme.local\": []}"), -EINVAL);
	assert_string_equal(err, "stubDomains: acme.local: expected 1..8 addresses, got 0");
	assert_int_equal(STUB("{\"acme.local\": [\"1.2.3.4\", \"ns.acme.local\"]}"), -EINVAL);
	assert_string_equal(err, "stubDomains: acme.local[1]: expected an address (ip, ip:port "
				 "or [ipv6]:port), got 'ns.acme.local'");
	assert_int_equal(STUB("{\"acme.local\": [53]}"), -EINVAL);
	assert_string_equal(err, "stubDomains: acme.local[0]: expected an address string");
	assert_int_equal(STUB("{\"acme.local\": [\"1.2.3.4:99999\"]}"), -EINVAL);
	assert_string_equal(
	    err, "stubDomains: acme.local[0]: expected a port 1..65535 in '1.2.3.4:99999'");
	assert_int_equal(STUB("{\"a\": [[[[[[[[[[\"1.2.3.4\"]]]]]]]]]]}"), -EINVAL);
	assert_int_equal(strncmp(err, "stubDomains: not JSON: ", 23), 0);
	assert_int_equal(UPS("{\"a\": 1}"), -EINVAL);
	assert_string_equal(err, "upstreamNameservers: expected a JSON list of addresses");
	assert_int_equal(UPS("[\"8.8.8.8\", \"dns.google\"]"), -EINVAL);
	assert_string_equal(err, "upstreamNameservers[1]: expected an address (ip, ip:port or "
				 "[ipv6]:port), got 'dns.google'");
	assert_int_equal(UPS("[\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\"]"), -EINVAL);
	assert_string_equal(err, "upstreamNameservers: expected 1..8 addresses, got 9");
#undef STUB
#undef UPS
}

/* --kubeconfig replaces whatever source the file gave, at start and at every reload alike. */
static void test_use_kubeconfig(void **state)
{
	struct ndc_config cfg;

	(void)state;
	expect_ok("source: {snapshot: /tmp/cluster.json}\n", &cfg);
	assert_int_equal(ndc_config_use_kubeconfig(&cfg, "/etc/kube/config"), 0);
	assert_int_equal(cfg.source.kind, NDC_SOURCE_KUBERNETES);
	assert_null(cfg.source.snapshot);
	assert_string_equal(cfg.source.kubeconfig, "/etc/kube/config");
	ndc_config_free(&cfg);

	expect_ok("source:\n  kubernetes: {kubeconfig: /a, kube_dns_configmap: false}\n", &cfg);
	assert_int_equal(ndc_config_use_kubeconfig(&cfg, "/b"), 0);
	assert_int_equal(cfg.source.kind, NDC_SOURCE_KUBERNETES);
	assert_string_equal(cfg.source.kubeconfig, "/b");
	assert_false(cfg.source.kube_dns_configmap); /* the rest of the source section stays */
	ndc_config_free(&cfg);

	expect_ok("", &cfg);
	assert_int_equal(cfg.source.kind, NDC_SOURCE_EMBEDDED);
	assert_int_equal(ndc_config_use_kubeconfig(&cfg, "/c"), 0);
	assert_int_equal(cfg.source.kind, NDC_SOURCE_KUBERNETES);
	assert_string_equal(cfg.source.kubeconfig, "/c");
	ndc_config_free(&cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_defaults),
	    cmocka_unit_test(test_example_file),
	    cmocka_unit_test(test_every_key),
	    cmocka_unit_test(test_value_forms),
	    cmocka_unit_test(test_switch_sections),
	    cmocka_unit_test(test_error_unknown_and_duplicate),
	    cmocka_unit_test(test_error_integers),
	    cmocka_unit_test(test_error_addresses),
	    cmocka_unit_test(test_error_enums_and_names),
	    cmocka_unit_test(test_error_kinds),
	    cmocka_unit_test(test_error_source_both),
	    cmocka_unit_test(test_multicluster_zones),
	    cmocka_unit_test(test_error_yaml_features),
	    cmocka_unit_test(test_error_syntax),
	    cmocka_unit_test(test_error_keeps_parsed),
	    cmocka_unit_test(test_stub_domains_and_log),
	    cmocka_unit_test(test_log_clients_dnstap),
	    cmocka_unit_test(test_kube_dns),
	    cmocka_unit_test(test_forward_protocol_policy),
	    cmocka_unit_test(test_use_kubeconfig),
	    cmocka_unit_test_teardown(test_load, remove_tmp),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
