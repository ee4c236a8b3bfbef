// SPDX-License-Identifier: MIT
/* Each subsystem's options made from a parsed config (config_opts.c), the one place they are. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <string.h>

#include "config/config_opts.h"
#include "query/query.h"
#include "records/records.h"

static const char yaml[] = "cluster_domain: example.internal\n"
			   "listen: [169.254.20.10]\n"
			   "upstream: [\"169.254.20.11:5353\", 169.254.20.12]\n"
			   "records:\n"
			   "  ttl: 7\n"
			   "  pods: verified\n"
			   "  endpoint_pod_names: true\n"
			   "  ignore_empty_service: true\n"
			   "  namespaces: [a, b]\n"
			   "  multicluster_zones: [clusterset.local]\n"
			   "cache:\n"
			   "  max_entries: 1234\n"
			   "  max_bytes: 2M\n"
			   "  max_ttl: 600\n"
			   "  neg_max_ttl: 60\n"
			   "  stale_max: 30\n"
			   "  prefetch: {min_hits: 3, before_pct: 20}\n"
			   "forward:\n"
			   "  timeout_ms: 700\n"
			   "  max_pending: 99\n"
			   "  protocol: prefer_udp\n"
			   "  policy: round_robin\n"
			   "  per_client: {qps: 50, burst: 80}\n";

static void parse(struct ndc_config *cfg, const char *text)
{
	char err[256] = "";

	if (ndc_config_parse(text, strlen(text), cfg, err, sizeof(err)))
		fail_msg("%s", err);
}

static void test_records(void **state)
{
	struct ndc_config cfg;
	struct ndc_records_opts o;

	(void)state;
	parse(&cfg, yaml);
	ndc_records_opts_from_config(&o, &cfg);
	assert_string_equal(o.zone, "example.internal");
	assert_int_equal(o.ttl, 7);
	assert_int_equal(o.pods, NDC_PODS_VERIFIED);
	assert_true(o.endpoint_pod_names);
	assert_true(o.ignore_empty_service);
	assert_int_equal(o.n_namespaces, 2);
	assert_string_equal(o.namespaces[1], "b");
	assert_int_equal(o.n_mc_zones, 1);
	assert_string_equal(o.mc_zones[0], "clusterset.local");
	assert_int_equal(o.n_ns_addrs, 1);
	assert_ptr_equal(o.ns_addrs, cfg.listen);
	assert_int_equal(o.serial, 0);
	assert_false(o.render_all);
	ndc_config_free(&cfg);
}

/* A reload's records.* keys over running options: the zone, addresses and serial stay. */
static void test_records_apply(void **state)
{
	struct ndc_config cfg;
	struct ndc_ip addr = {0};
	struct ndc_records_opts o = {
	    .zone = "cluster.local", .ttl = 5, .n_ns_addrs = 1, .ns_addrs = &addr, .serial = 42};

	(void)state;
	parse(&cfg, yaml);
	ndc_records_opts_apply(&o, &cfg);
	assert_string_equal(o.zone, "cluster.local");
	assert_int_equal(o.serial, 42);
	assert_ptr_equal(o.ns_addrs, &addr);
	assert_int_equal(o.ttl, 7);
	assert_int_equal(o.pods, NDC_PODS_VERIFIED);
	assert_int_equal(o.n_namespaces, 2);
	assert_int_equal(o.n_mc_zones, 1);
	ndc_config_free(&cfg);
}

static void test_query(void **state)
{
	struct ndc_config cfg;
	struct ndc_cache_opts co;
	struct ndc_forwarder_opts fo;
	struct ndc_prefetch_opts po;
	struct ndc_ratelimit_opts lo;
	const struct sockaddr_in *s4;

	(void)state;
	parse(&cfg, yaml);
	ndc_cache_opts_from_config(&co, &cfg);
	assert_int_equal(co.max_entries, 1234);
	assert_int_equal(co.max_bytes, 2u << 20);
	assert_int_equal(co.max_ttl, 600);
	assert_int_equal(co.neg_max_ttl, 60);
	assert_int_equal(co.stale_max, 30);
	ndc_forwarder_opts_from_config(&fo, &cfg);
	assert_int_equal(fo.n_upstreams, 2);
	s4 = (const struct sockaddr_in *)&fo.upstreams[0];
	assert_int_equal(ntohs(s4->sin_port), 5353);
	assert_int_equal(fo.n_routes, 0);
	assert_int_equal(fo.timeout_ms, 700);
	assert_int_equal(fo.max_pending, 99);
	assert_int_equal(fo.protocol, NDC_FWD_PREFER_UDP);
	assert_int_equal(fo.policy, NDC_FWD_ROUND_ROBIN);
	ndc_prefetch_opts_from_config(&po, &cfg);
	assert_int_equal(po.min_hits, 3);
	assert_int_equal(po.before_pct, 20);
	ndc_ratelimit_opts_from_config(&lo, &cfg);
	assert_int_equal(lo.qps, 50);
	assert_int_equal(lo.burst, 80);
	ndc_config_free(&cfg);
	/* prefetch: false turns prefetching off, whatever before_pct was */
	parse(&cfg, "cache:\n  prefetch: false\n");
	ndc_prefetch_opts_from_config(&po, &cfg);
	assert_int_equal(po.before_pct, 0);
	ndc_config_free(&cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_records),
	    cmocka_unit_test(test_records_apply),
	    cmocka_unit_test(test_query),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
