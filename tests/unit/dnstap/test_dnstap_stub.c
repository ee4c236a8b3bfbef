// SPDX-License-Identifier: MIT
/*
 * The dnstap module compiled out (control/dnstap/stub.c, what a build without libfstrm or
 * libprotobuf-c links): open refuses with -EOPNOTSUPP, the rest are harmless no-ops, and the
 * sampler (in every build) still works. Built from the stub's source in every build.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "dnstap/dnstap.h"

static void test_compiled_out(void **state)
{
	struct ndc_dnstap_opts o = {.socket_path = "/tmp/x.sock"};
	struct ndc_dnstap *d = (struct ndc_dnstap *)&o;
	struct ndc_dnstap_stats st = {.written = 7};
	struct ndc_dnstap_event ev = {0};
	struct ndc_dnstap_sampler s;

	(void)state;
	assert_false(ndc_dnstap_available());
	assert_int_equal(ndc_dnstap_open(&o, &d), -EOPNOTSUPP);
	assert_null(d);
	assert_int_equal(ndc_dnstap_log(d, &ev), -EOPNOTSUPP);
	assert_false(ndc_dnstap_drop_unread(d));
	ndc_dnstap_stats(d, &st);
	assert_int_equal(st.written, 0);
	ndc_dnstap_close(d);
	assert_int_equal(ndc_dnstap_sampler_init(&s, 1, 1), 0);
	assert_true(ndc_dnstap_sample(&s));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_compiled_out),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
