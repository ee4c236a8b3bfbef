// SPDX-License-Identifier: MIT
/* ndc_ip_parse: the one parser of textual addresses that the base layer gives every layer. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include <ndc/ip.h>

static const struct ndc_ip zero;

static void parses_either_family(void **state)
{
	static const uint8_t v4[16] = {10, 96, 0, 10};
	static const uint8_t v6[16] = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0a};
	struct ndc_ip ip;

	(void)state;
	memset(&ip, 0xee, sizeof(ip));
	assert_int_equal(ndc_ip_parse("10.96.0.10", 0, &ip), 0);
	assert_int_equal(ip.family, AF_INET);
	assert_memory_equal(ip.addr, v4, 16); /* the 12 bytes after an IPv4 address are zero */

	assert_int_equal(ndc_ip_parse("fd00::a", 0, &ip), 0);
	assert_int_equal(ip.family, AF_INET6);
	assert_memory_equal(ip.addr, v6, 16);

	assert_int_equal(ndc_ip_parse("10.96.0.10", AF_INET, &ip), 0);
	assert_int_equal(ip.family, AF_INET);
	assert_int_equal(ndc_ip_parse("fd00::a", AF_INET6, &ip), 0);
	assert_int_equal(ip.family, AF_INET6);
}

static void rejects_other_family_and_junk(void **state)
{
	static const char *const bad[] = {
	    "",		  "None",	 "10.96.0", "10.96.0.256", " 10.96.0.10", "10.96.0.10 ",
	    "fd00::a::b", "example.com",
	};
	struct ndc_ip ip;

	(void)state;
	memset(&ip, 0xee, sizeof(ip));
	assert_int_equal(ndc_ip_parse("fd00::a", AF_INET, &ip), -EINVAL);
	assert_memory_equal(&ip, &zero, sizeof(ip));
	memset(&ip, 0xee, sizeof(ip));
	assert_int_equal(ndc_ip_parse("10.96.0.10", AF_INET6, &ip), -EINVAL);
	assert_memory_equal(&ip, &zero, sizeof(ip));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&ip, 0xee, sizeof(ip));
		assert_int_equal(ndc_ip_parse(bad[i], 0, &ip), -EINVAL);
		assert_memory_equal(&ip, &zero, sizeof(ip));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(parses_either_family),
	    cmocka_unit_test(rejects_other_family_and_junk),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
