// SPDX-License-Identifier: MIT
/*
 * What both answer tables write, built one way (dataplane/base/entry.c): the config from the
 * options (the kernel's and the DPDK backend's used to differ on an address of an unknown family:
 * -E2BIG without a word in one, -EINVAL with a log in the other; now -EINVAL in both), and the
 * entry a publish writes (an answer's, the pass marker's), with the errors in publishing's order.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <ndc/abi.h>
#include <ndc/dns_wire.h>
#include <ndc/entry.h>
#include <ndc/ip.h>

static size_t wire(const char *text, uint8_t *out)
{
	size_t len;

	assert_int_equal(ndc_name_from_text(text, out, NDC_NAME_MAX, &len), 0);
	return len;
}

static void test_config(void **state)
{
	struct ndc_ip ips[2] = {{.family = AF_INET, .addr = {169, 254, 20, 10}},
				{.family = AF_INET6, .addr = {0xfe, 0x80, [15] = 0x10}}};
	struct sockaddr_in up = {.sin_family = AF_INET, .sin_port = htons(5353)};
	struct sockaddr_storage ups[1];
	uint8_t zone[NDC_NAME_MAX];
	struct ndc_fp_config_opts o = {.n_addrs = 2, .addrs = ips, .zone = zone};
	struct ndc_fp_config c;

	(void)state;
	o.zone_len = wire("cluster.local", zone);
	up.sin_addr.s_addr = htonl(0xa9fe0101);
	memset(ups, 0, sizeof(ups));
	memcpy(&ups[0], &up, sizeof(up));
	assert_int_equal(ndc_fastpath_config(&o, &c), 0);
	assert_int_equal(c.abi_version, NDC_ABI_VERSION);
	assert_int_equal(c.n_addr4, 1);
	assert_int_equal(c.n_addr6, 1);
	assert_memory_equal(&c.addr4[0], ips[0].addr, 4);
	assert_memory_equal(c.addr6[0], ips[1].addr, 16);
	assert_int_equal(c.port, htons(53));
	assert_int_equal(c.zone_len, o.zone_len);
	assert_memory_equal(c.zone, zone, o.zone_len);
	assert_int_equal(c.pass_len, 0);
	assert_int_equal(c.flags, 0);

	/* What only the kernel table takes: fail-open upstreams and redirect_peer. */
	o.failopen = true;
	o.n_upstreams = 1;
	o.upstreams = ups;
	o.redirect_peer = true;
	o.port = 1053;
	assert_int_equal(ndc_fastpath_config(&o, &c), 0);
	assert_int_equal(c.flags, NDC_FP_C_FAILOPEN | NDC_FP_C_REDIRECT_PEER);
	assert_int_equal(c.has_up4, 1);
	assert_int_equal(c.has_up6, 0);
	assert_int_equal(c.up4, up.sin_addr.s_addr);
	assert_int_equal(c.up4_port, htons(5353));
	assert_int_equal(c.port, htons(1053));
}

static void test_config_errors(void **state)
{
	struct ndc_ip ips[NDC_FP_MAX_ADDRS + 1];
	struct ndc_fp_config_opts o = {.addrs = ips};
	uint8_t zone[NDC_FP_NAME_MAX + 2] = {0};
	struct ndc_fp_config c;

	(void)state;
	for (size_t i = 0; i <= NDC_FP_MAX_ADDRS; i++)
		ips[i] =
		    (struct ndc_ip){.family = AF_INET6, .addr = {0xfe, 0x80, [15] = (uint8_t)i}};
	o.n_addrs = NDC_FP_MAX_ADDRS;
	assert_int_equal(ndc_fastpath_config(&o, &c), 0);
	o.n_addrs = NDC_FP_MAX_ADDRS + 1;
	assert_int_equal(ndc_fastpath_config(&o, &c), -E2BIG);
	/* The drift this file was written for: an unknown family is -EINVAL, never -E2BIG. */
	ips[0].family = AF_UNIX;
	o.n_addrs = 1;
	assert_int_equal(ndc_fastpath_config(&o, &c), -EINVAL);
	ips[0].family = AF_INET;
	o.zone = zone;
	o.zone_len = NDC_FP_NAME_MAX + 1;
	assert_int_equal(ndc_fastpath_config(&o, &c), -ENAMETOOLONG);
	o.zone = NULL;
	o.zone_len = 5;
	assert_int_equal(ndc_fastpath_config(&o, &c), -EINVAL);
}

static void test_entry(void **state)
{
	union {
		struct ndc_answer a;
		uint8_t b[sizeof(struct ndc_answer) + 512];
	} ans;
	static const uint8_t ip[4] = {169, 254, 30, 1};
	uint8_t q[NDC_NAME_MAX], other[NDC_NAME_MAX], big[NDC_FP_NAME_MAX + 2];
	size_t qlen = wire("web.default.svc.cluster.local", q),
	       olen = wire("x.cluster.local", other);
	struct ndc_fp_key k, want;
	struct ndc_fp_value v;
	struct ndc_ab b;

	(void)state;
	ndc_ab_init(&b, &ans.a, 512, q, qlen);
	ndc_ab_rr(&b, NDC_SEC_ANSWER, q, qlen, NDC_T_A, NDC_C_IN, 30, ip, 4);
	assert_int_equal(ndc_ab_finish(&b, NDC_RCODE_NOERROR, true), 0);

	assert_int_equal(ndc_fastpath_entry(q, qlen, NDC_T_A, &ans.a, 0, &k, &v), 0);
	assert_int_equal(ndc_fastpath_key(q, qlen, NDC_T_A, &want), 0);
	assert_memory_equal(&k, &want, sizeof(k));
	assert_int_equal(v.name_len, qlen);
	assert_memory_equal(v.name, q, qlen);
	assert_int_equal(v.ancount, 1);
	assert_int_equal(v.expire_ns, 0);
	assert_int_equal(v.flags & NDC_FP_V_PASS, 0);
	/* A TTL: the entry expires, on CLOCK_MONOTONIC (the clock bpf_ktime_get_ns reads). */
	assert_int_equal(ndc_fastpath_entry(q, qlen, NDC_T_A, &ans.a, 30, &k, &v), 0);
	assert_true(v.expire_ns > v.insert_ns);
	assert_int_equal(v.expire_ns - v.insert_ns, 30000000000ull);

	/* The pass marker: at NDC_FP_QTYPE_OTHER whatever qtype, no data, the name set. */
	assert_int_equal(ndc_fastpath_entry(q, qlen, NDC_T_A, NULL, 0, &k, &v), 0);
	assert_int_equal(ndc_fastpath_key(q, qlen, NDC_FP_QTYPE_OTHER, &want), 0);
	assert_memory_equal(&k, &want, sizeof(k));
	assert_int_equal(v.flags, NDC_FP_V_PASS);
	assert_int_equal(v.len, 0);
	assert_int_equal(v.name_len, qlen);
	assert_memory_equal(v.name, q, qlen);

	/* Errors in publishing's order: the key's first, then the question's length. */
	assert_int_equal(ndc_fastpath_entry(other, olen, NDC_T_A, &ans.a, 0, &k, &v), -EINVAL);
	memset(big, 1, sizeof(big));
	assert_int_equal(ndc_fastpath_entry(big, sizeof(big), NDC_T_A, &ans.a, 0, &k, &v),
			 -ENAMETOOLONG);
	assert_int_equal(ndc_fastpath_entry(q, 0, NDC_T_A, NULL, 0, &k, &v), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_config),
	    cmocka_unit_test(test_config_errors),
	    cmocka_unit_test(test_entry),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
