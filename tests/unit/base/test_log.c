// SPDX-License-Identifier: MIT
/* Log lines in both formats: what an operator's log shipper reads. JSON is checked by json-c. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include <ndc/log.h>

/* Runs fn with stderr going to a file; returns what it wrote (free it). */
static char *capture(void (*fn)(void))
{
	FILE *tmp = tmpfile();
	int saved = dup(STDERR_FILENO);
	char *out;
	long n;

	assert_non_null(tmp);
	assert_true(saved >= 0);
	assert_int_equal(dup2(fileno(tmp), STDERR_FILENO), STDERR_FILENO);
	fn();
	assert_int_equal(dup2(saved, STDERR_FILENO), STDERR_FILENO);
	close(saved);
	n = ftell(tmp) >= 0 ? lseek(fileno(tmp), 0, SEEK_END) : 0;
	out = calloc(1, (size_t)n + 1);
	assert_non_null(out);
	assert_int_equal(pread(fileno(tmp), out, (size_t)n, 0), n);
	fclose(tmp);
	return out;
}

static void emit_some(void)
{
	const struct ndc_log_field f[] = {
	    NDC_LOG_STR("client", "169.254.100.2:5353"),
	    NDC_LOG_STR("name", "a \"quoted\" name.\n"),
	    NDC_LOG_NUM("id", 4242),
	    NDC_LOG_NUM("neg", -1),
	    NDC_LOG_STR("empty", ""),
	};

	ndc_warn("upstream %s: %s", "169.254.53.1:53", "timed out");
	ndc_log_fields(NDC_LOG_INFO, "query", f, sizeof(f) / sizeof(f[0]));
	ndc_debug("not shown at info");
}

static void test_text(void **state)
{
	char *out;

	(void)state;
	ndc_log_set_format(NDC_LOG_TEXT);
	ndc_log_set_level(NDC_LOG_INFO);
	out = capture(emit_some);
	assert_string_equal(out,
			    "ndcache: warning: upstream 169.254.53.1:53: timed out\n"
			    "ndcache: info: query client=169.254.100.2:5353 "
			    "name=\"a \\\"quoted\\\" name.\\u000a\" id=4242 neg=-1 empty=\"\"\n");
	free(out);
}

static void test_json(void **state)
{
	json_object *o, *v, *fields;
	char *out, *nl;

	(void)state;
	ndc_log_set_format(NDC_LOG_JSON);
	ndc_log_set_level(NDC_LOG_INFO);
	out = capture(emit_some);
	nl = strchr(out, '\n');
	assert_non_null(nl);
	*nl = '\0';
	o = json_tokener_parse(out);
	assert_non_null(o);
	assert_true(json_object_object_get_ex(o, "time", &v));
	/* 2026-11-25T10:00:00.123Z */
	assert_int_equal(strlen(json_object_get_string(v)), 24);
	assert_int_equal(json_object_get_string(v)[23], 'Z');
	assert_true(json_object_object_get_ex(o, "level", &v));
	assert_string_equal(json_object_get_string(v), "warning");
	assert_true(json_object_object_get_ex(o, "msg", &v));
	assert_string_equal(json_object_get_string(v), "upstream 169.254.53.1:53: timed out");
	assert_true(json_object_object_get_ex(o, "fields", &fields));
	assert_int_equal(json_object_object_length(fields), 0);
	json_object_put(o);

	o = json_tokener_parse(nl + 1);
	assert_non_null(o);
	assert_true(json_object_object_get_ex(o, "msg", &v));
	assert_string_equal(json_object_get_string(v), "query");
	assert_true(json_object_object_get_ex(o, "fields", &fields));
	assert_true(json_object_object_get_ex(fields, "name", &v));
	assert_string_equal(json_object_get_string(v), "a \"quoted\" name.\n");
	assert_true(json_object_object_get_ex(fields, "id", &v));
	assert_true(json_object_is_type(v, json_type_int));
	assert_int_equal(json_object_get_int(v), 4242);
	assert_true(json_object_object_get_ex(fields, "neg", &v));
	assert_int_equal(json_object_get_int(v), -1);
	assert_int_equal(strchr(nl + 1, '\n')[1], '\0'); /* two lines, debug dropped */
	json_object_put(o);
	free(out);
	ndc_log_set_format(NDC_LOG_TEXT);
}

/* A message longer than a line holds: cut, still one line of valid JSON. */
static void emit_long(void)
{
	static char big[9000];

	const struct ndc_log_field f[] = {NDC_LOG_NUM("n", 1), NDC_LOG_STR("v", big),
					  NDC_LOG_NUM("after", 2)};

	memset(big, '\\', sizeof(big) - 1);
	ndc_log_fields(NDC_LOG_ERR, big, NULL, 0);
	ndc_log_fields(NDC_LOG_ERR, "short", f, 3);
}

static void test_json_cut(void **state)
{
	json_object *o, *v, *fields;
	char *out, *nl;

	(void)state;
	ndc_log_set_format(NDC_LOG_JSON);
	out = capture(emit_long);
	nl = strchr(out, '\n');
	assert_non_null(nl);
	*nl = '\0';
	assert_true(strlen(out) < 4096);
	o = json_tokener_parse(out);
	assert_non_null(o);
	assert_true(json_object_object_get_ex(o, "msg", &v));
	assert_true(strlen(json_object_get_string(v)) > 1000);
	assert_true(json_object_object_get_ex(o, "fields", &v));
	json_object_put(o);
	assert_int_equal(strchr(nl + 1, '\n')[1], '\0');
	assert_true(strlen(nl + 1) <= 4096);
	o = json_tokener_parse(nl + 1);
	assert_non_null(o);
	assert_true(json_object_object_get_ex(o, "fields", &fields));
	assert_true(json_object_object_get_ex(fields, "n", &v));
	assert_true(json_object_object_get_ex(fields, "v", &v));
	assert_true(strlen(json_object_get_string(v)) > 1000);
	json_object_put(o);
	free(out);
	ndc_log_set_format(NDC_LOG_TEXT);
}

static void test_level_names(void **state)
{
	(void)state;
	assert_int_equal(ndc_log_level_from_name("warning"), NDC_LOG_WARN);
	assert_int_equal(ndc_log_level_from_name("debug"), NDC_LOG_DEBUG);
	assert_int_equal(ndc_log_level_from_name("warn"), -1);
	assert_string_equal(ndc_log_level_name(NDC_LOG_ERR), "error");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_text),
	    cmocka_unit_test(test_json),
	    cmocka_unit_test(test_json_cut),
	    cmocka_unit_test(test_level_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
