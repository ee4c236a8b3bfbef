// SPDX-License-Identifier: MIT
/* Config: the dataplane.dpdk keys, their defaults, and the exact text of each error. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "config/config.h"

static void expect_error(const char *yaml, const char *msg)
{
	struct ndc_config cfg;
	char err[512] = "unset";
	int r = ndc_config_parse(yaml, strlen(yaml), &cfg, err, sizeof(err));

	if (r != -EINVAL || strcmp(err, msg))
		print_error("input:\n%s\n", yaml);
	assert_int_equal(r, -EINVAL);
	assert_string_equal(err, msg);
	ndc_config_free(&cfg);
}

static void expect_ok(const char *yaml, struct ndc_config *cfg)
{
	char err[512] = "";
	int r = ndc_config_parse(yaml, strlen(yaml), cfg, err, sizeof(err));

	if (r)
		print_error("input:\n%s\nerror: %s\n", yaml, err);
	assert_int_equal(r, 0);
}

static void assert_dpdk_defaults(const struct ndc_config *c)
{
	assert_int_equal(c->dataplane.dpdk.n_eal_args, 0);
	assert_null(c->dataplane.dpdk.eal_args);
	assert_int_equal(c->dataplane.dpdk.n_ports, 0);
	assert_int_equal(c->dataplane.dpdk.n_lcores, 0);
	assert_int_equal(c->dataplane.dpdk.queues, 1);
	assert_int_equal(c->dataplane.dpdk.burst, 32);
	assert_int_equal(c->dataplane.dpdk.poll_sleep_us, 0);
	assert_string_equal(c->dataplane.dpdk.tap_prefix, "ndc-tap");
}

static void test_defaults(void **state)
{
	struct ndc_config cfg;

	(void)state;
	ndc_config_defaults(&cfg);
	assert_dpdk_defaults(&cfg);
	ndc_config_free(&cfg);
	expect_ok("dataplane: {mode: dpdk}\n", &cfg);
	assert_int_equal(cfg.dataplane.mode, NDC_DP_DPDK);
	assert_dpdk_defaults(&cfg);
	ndc_config_free(&cfg);
	expect_ok("dataplane:\n  dpdk:\n", &cfg);
	assert_dpdk_defaults(&cfg);
	ndc_config_free(&cfg);
	/* Empty lists are the defaults too. */
	expect_ok("dataplane: {dpdk: {eal_args: [], ports: [], lcores: []}}\n", &cfg);
	assert_dpdk_defaults(&cfg);
	ndc_config_free(&cfg);
}

static void test_every_key(void **state)
{
	static const char yaml[] = "dataplane:\n"
				   "  mode: dpdk\n"
				   "  dpdk:\n"
				   "    eal_args: [\"--no-huge\", \"-m\", \"256\",\n"
				   "               \"--vdev=net_af_packet0,iface=eth1\"]\n"
				   "    ports: [0, 2]\n"
				   "    queues: 4\n"
				   "    lcores: [1, 3]\n"
				   "    burst: 64\n"
				   "    poll_sleep_us: 50\n"
				   "    tap_prefix: dns-exc\n";
	static const char *const args[] = {"--no-huge", "-m", "256",
					   "--vdev=net_af_packet0,iface=eth1"};
	struct ndc_config cfg;

	(void)state;
	expect_ok(yaml, &cfg);
	assert_int_equal(cfg.dataplane.dpdk.n_eal_args, 4);
	for (size_t i = 0; i < 4; i++)
		assert_string_equal(cfg.dataplane.dpdk.eal_args[i], args[i]);
	assert_int_equal(cfg.dataplane.dpdk.n_ports, 2);
	assert_int_equal(cfg.dataplane.dpdk.ports[0], 0);
	assert_int_equal(cfg.dataplane.dpdk.ports[1], 2);
	assert_int_equal(cfg.dataplane.dpdk.queues, 4);
	assert_int_equal(cfg.dataplane.dpdk.n_lcores, 2);
	assert_int_equal(cfg.dataplane.dpdk.lcores[0], 1);
	assert_int_equal(cfg.dataplane.dpdk.lcores[1], 3);
	assert_int_equal(cfg.dataplane.dpdk.burst, 64);
	assert_int_equal(cfg.dataplane.dpdk.poll_sleep_us, 50);
	assert_string_equal(cfg.dataplane.dpdk.tap_prefix, "dns-exc");
	ndc_config_free(&cfg);
	assert_null(cfg.dataplane.dpdk.eal_args);
	ndc_config_free(&cfg);
	/* A PCI address and an lcore list in eal_args, no lcores key: fine. */
	expect_ok("dataplane:\n  dpdk:\n    eal_args: [-l, 0-2, -a, '0000:3b:00.1']\n", &cfg);
	assert_int_equal(cfg.dataplane.dpdk.n_eal_args, 4);
	ndc_config_free(&cfg);
}

static void test_errors(void **state)
{
	(void)state;
	expect_error("dataplane:\n  dpdk:\n    cores: [1]\n",
		     "line 3: dataplane.dpdk.cores: unknown key (known keys: eal_args, ports, "
		     "queues, lcores, burst, poll_sleep_us, tap_prefix)");
	expect_error("dataplane:\n  dpdk: [1]\n",
		     "line 2: dataplane.dpdk: expected a mapping, got a list");
	expect_error("dataplane:\n  dpdk:\n    eal_args: --no-huge\n",
		     "line 3: dataplane.dpdk.eal_args: expected a list of strings, got "
		     "'--no-huge'");
	expect_error("dataplane:\n  dpdk:\n    eal_args: [--no-huge, [x]]\n",
		     "line 3: dataplane.dpdk.eal_args[1]: expected a string of 1..1024 bytes, "
		     "got a list");
	expect_error("dataplane:\n  dpdk:\n    eal_args: ['']\n",
		     "line 3: dataplane.dpdk.eal_args[0]: expected a string of 1..1024 bytes, got "
		     "an empty value");
	expect_error("dataplane:\n  dpdk:\n    ports: [0, 1024]\n",
		     "line 3: dataplane.dpdk.ports[1]: expected an integer 0..1023, got '1024'");
	expect_error("dataplane:\n  dpdk:\n    ports: [1, 1]\n",
		     "line 3: dataplane.dpdk.ports[1]: 1 is listed twice");
	expect_error("dataplane:\n  dpdk:\n    lcores: [-1]\n",
		     "line 3: dataplane.dpdk.lcores[0]: expected an integer 0..1023, got '-1'");
	expect_error("dataplane:\n  dpdk:\n    lcores: 1\n",
		     "line 3: dataplane.dpdk.lcores: expected a list of integers, got '1'");
	expect_error("dataplane:\n  dpdk:\n    queues: 0\n",
		     "line 3: dataplane.dpdk.queues: expected an integer 1..16, got '0'");
	expect_error("dataplane:\n  dpdk:\n    burst: 513\n",
		     "line 3: dataplane.dpdk.burst: expected an integer 1..512, got '513'");
	expect_error("dataplane:\n  dpdk:\n    poll_sleep_us: 100001\n",
		     "line 3: dataplane.dpdk.poll_sleep_us: expected an integer 0..100000, got "
		     "'100001'");
	expect_error("dataplane:\n  dpdk:\n    tap_prefix: a-very-long-tap\n",
		     "line 3: dataplane.dpdk.tap_prefix: expected 1..12 characters of an interface "
		     "name (no '/', ':', spaces or globs), got 'a-very-long-tap'");
	expect_error("dataplane:\n  dpdk:\n    tap_prefix: 'tap*'\n",
		     "line 3: dataplane.dpdk.tap_prefix: expected 1..12 characters of an interface "
		     "name (no '/', ':', spaces or globs), got 'tap*'");
	expect_error("dataplane:\n  dpdk:\n    lcores: [1]\n    eal_args: ['--lcores=0@0,1@1']\n",
		     "line 3: dataplane.dpdk: lcores and an lcore option in eal_args "
		     "('--lcores=0@0,1@1'): give the polling CPUs in one of them");
	expect_error("dataplane:\n  dpdk:\n    eal_args: [-l, '0-1']\n    lcores: [1]\n",
		     "line 3: dataplane.dpdk: lcores and an lcore option in eal_args ('-l'): give "
		     "the polling CPUs in one of them");
	expect_error("dataplane:\n  dpdk:\n    burst: 32\n    burst: 64\n",
		     "line 4: dataplane.dpdk.burst: duplicate key (first at line 3)");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_defaults),
	    cmocka_unit_test(test_every_key),
	    cmocka_unit_test(test_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
