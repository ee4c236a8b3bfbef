// SPDX-License-Identifier: MIT
/*
 * The Prometheus text encoder (control/metrics/) alone, linked without the HTTP server: the text
 * it renders (families grouped, escapes, histograms, doubles that read back exactly) and its
 * sticky errors. What the server does with the text is tests/unit/http/test_http.c's.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/metrics.h"

static void render_sample(void *arg, struct ndc_metrics_buf *b)
{
	(void)arg;
	ndc_metric(b, "a_gauge", "gauge", "Help with \\ and\nnewline.", NULL, 0.5);
	ndc_metric_u64(b, "b_total", "counter", NULL, "x=\"1\"", UINT64_MAX);
	ndc_metric(b, "a_gauge", "gauge", "ignored: the first help counts", "k=\"q\\\"uote\"",
		   1e-9);
	ndc_metric(b, "a_gauge", "gauge", NULL, "", 0.1);
	ndc_metric(b, "c:sub_ns", "gauge", "", "a=\"\",b_2=\"v\\n\\\\\"", NAN);
	ndc_metric(b, "c:sub_ns", "gauge", "", NULL, INFINITY);
	ndc_metric(b, "c:sub_ns", "gauge", "", NULL, -INFINITY);
	ndc_metric(b, "c:sub_ns", "gauge", "", NULL, 1234567890123.0);
	ndc_metric(b, "c:sub_ns", "gauge", "", NULL, -2.5e300);
	ndc_metric_u64(b, "b_total", "counter", "late help is ignored", "x=\"2\"", 0);
}

static void render_histogram(void *arg, struct ndc_metrics_buf *b)
{
	static const uint64_t bounds[] = {100, 1000, UINT64_MAX};
	static const uint64_t counts[] = {3, 0, 2};

	(void)arg;
	ndc_metric_histogram(b, "lat_us", "Latency.", bounds, counts, 3, 4321);
	/* The histogram's name is its family's: a gauge of the same name is an error. */
	ndc_metric_u64(b, "lat_us", "gauge", "x", NULL, 1);
}

static void render_histogram_ok(void *arg, struct ndc_metrics_buf *b)
{
	static const uint64_t bounds[] = {100, 1000, UINT64_MAX};
	static const uint64_t counts[] = {3, 0, 2};

	(void)arg;
	ndc_metric_histogram(b, "lat_us", "Latency.", bounds, counts, 3, 4321);
}

/* Buckets are cumulative, +Inf last, then _sum and _count, under one HELP/TYPE. */
static void test_metrics_histogram(void **state)
{
	static const char want[] = "# HELP lat_us Latency.\n"
				   "# TYPE lat_us histogram\n"
				   "lat_us_bucket{le=\"100\"} 3\n"
				   "lat_us_bucket{le=\"1000\"} 3\n"
				   "lat_us_bucket{le=\"+Inf\"} 5\n"
				   "lat_us_sum 4321\n"
				   "lat_us_count 5\n";
	char *text = NULL;
	size_t len;

	(void)state;
	assert_int_equal(ndc_metrics_render(render_histogram_ok, NULL, &text, &len), 0);
	assert_string_equal(text, want);
	free(text);
	text = NULL;
	assert_int_equal(ndc_metrics_render(render_histogram, NULL, &text, &len), -EINVAL);
	assert_null(text);
}

static void test_metrics_render(void **state)
{
	static const char want[] = "# HELP a_gauge Help with \\\\ and\\nnewline.\n"
				   "# TYPE a_gauge gauge\n"
				   "a_gauge 0.5\n"
				   "a_gauge{k=\"q\\\"uote\"} 1e-09\n"
				   "a_gauge 0.1\n"
				   "# TYPE b_total counter\n"
				   "b_total{x=\"1\"} 18446744073709551615\n"
				   "b_total{x=\"2\"} 0\n"
				   "# HELP c:sub_ns \n"
				   "# TYPE c:sub_ns gauge\n"
				   "c:sub_ns{a=\"\",b_2=\"v\\n\\\\\"} NaN\n"
				   "c:sub_ns +Inf\n"
				   "c:sub_ns -Inf\n"
				   "c:sub_ns 1234567890123\n"
				   "c:sub_ns -2.5e+300\n";
	char *text = NULL;
	size_t len = 0;

	(void)state;
	assert_int_equal(ndc_metrics_render(render_sample, NULL, &text, &len), 0);
	assert_string_equal(text, want);
	assert_int_equal(len, strlen(want));
	free(text);

	/* No callback: an empty page. */
	assert_int_equal(ndc_metrics_render(NULL, NULL, &text, &len), 0);
	assert_int_equal(len, 0);
	assert_string_equal(text, "");
	free(text);
}

/* Doubles come back exactly, in the fewest digits %.15g..%.17g allow. */
static void render_doubles(void *arg, struct ndc_metrics_buf *b)
{
	const double *v = arg;

	for (int i = 0; i < 6; i++)
		ndc_metric(b, "d", "gauge", NULL, NULL, v[i]);
}

static void test_metrics_doubles(void **state)
{
	static const double v[6] = {0.1 + 0.2, 1.0 / 3, 9007199254740993.0, 5e-324, -0.0, 100};
	char *text, *p;
	size_t len;

	(void)state;
	assert_int_equal(ndc_metrics_render(render_doubles, (void *)v, &text, &len), 0);
	p = strstr(text, "d 0.30000000000000004\nd 0.3333333333333333\nd 9007199254740992\n");
	assert_non_null(p);
	p = text;
	for (int i = 0; i < 6; i++) {
		p = strstr(p, "\nd ");
		assert_non_null(p);
		p += 3;
		assert_true(strtod(p, NULL) == v[i]);
		assert_int_equal(signbit(strtod(p, NULL)) != 0, signbit(v[i]) != 0);
	}
	assert_non_null(strstr(text, "\nd 100\n"));
	free(text);
}

struct bad_case {
	const char *name, *type, *labels;
};

static void render_bad(void *arg, struct ndc_metrics_buf *b)
{
	const struct bad_case *c = arg;

	ndc_metric(b, "good", "gauge", NULL, NULL, 1);
	ndc_metric(b, c->name, c->type, "h", c->labels, 1);
	/* Sticky: nothing later clears the error. */
	ndc_metric(b, "good", "gauge", NULL, NULL, 2);
}

static void render_conflict(void *arg, struct ndc_metrics_buf *b)
{
	(void)arg;
	ndc_metric(b, "m", "gauge", NULL, NULL, 1);
	ndc_metric(b, "m", "counter", NULL, NULL, 2);
}

static void render_huge(void *arg, struct ndc_metrics_buf *b)
{
	static char labels[1100];
	unsigned *n = arg;

	memcpy(labels, "v=\"", 3);
	memset(labels + 3, 'x', 1024);
	strcpy(labels + 3 + 1024, "\"");
	/* About 1040 bytes a sample; NDC_METRICS_MAX / 1040 of them fit. */
	for (*n = 0; *n < 8192; (*n)++)
		ndc_metric_u64(b, "big", "gauge", NULL, labels, *n);
}

static void test_metrics_errors(void **state)
{
	static const struct bad_case cases[] = {
	    {"1abc", "gauge", NULL},
	    {"a-b", "gauge", NULL},
	    {"", "gauge", NULL},
	    {NULL, "gauge", NULL},
	    {"a b", "gauge", NULL},
	    {"ok", "histogram", NULL},
	    {"ok", NULL, NULL},
	    {"ok", "Gauge", NULL},
	    {"ok", "gauge", "a=b"},
	    {"ok", "gauge", "a=\"x"},
	    {"ok", "gauge", "a=\"x\","},
	    {"ok", "gauge", "a=\"\\q\""},
	    {"ok", "gauge", "=\"x\""},
	    {"ok", "gauge", "1a=\"x\""},
	    {"ok", "gauge", "a=\"x\nb\""},
	    {"ok", "gauge", "a=\"x\"}\nevil 1"},
	    {"ok", "gauge", "a=\"x\" "},
	};
	char *text = (char *)"unchanged";
	size_t len;
	unsigned n = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(ndc_metrics_render(render_bad, (void *)&cases[i], &text, &len),
				 -EINVAL);
		assert_string_equal(text, "unchanged");
	}
	assert_int_equal(ndc_metrics_render(render_conflict, NULL, &text, &len), -EINVAL);
	assert_int_equal(ndc_metrics_render(render_huge, &n, &text, &len), -E2BIG);
	assert_int_equal(n, 8192);
	assert_string_equal(text, "unchanged");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_metrics_render),
	    cmocka_unit_test(test_metrics_histogram),
	    cmocka_unit_test(test_metrics_doubles),
	    cmocka_unit_test(test_metrics_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
