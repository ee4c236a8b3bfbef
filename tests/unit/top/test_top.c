// SPDX-License-Identifier: MIT
/* The per-client table, the Space-Saving sketches and the merge of another counter's rows. */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "top/top.h"

static struct ndc_ip v4(const char *s)
{
	struct ndc_ip ip = {.family = AF_INET};

	inet_pton(AF_INET, s, ip.addr);
	return ip;
}

/* "a.b." as wire: 1 a 1 b 0 */
static size_t wire(const char *text, uint8_t *out)
{
	size_t o = 0;

	while (*text) {
		const char *dot = strchr(text, '.');
		size_t len = dot ? (size_t)(dot - text) : strlen(text);

		out[o++] = (uint8_t)len;
		memcpy(out + o, text, len);
		o += len;
		text += len + (dot ? 1 : 0);
	}
	out[o++] = 0;
	return o;
}

static const struct ndc_top_client *find(const struct ndc_top_view *v, const char *addr)
{
	struct ndc_ip ip = v4(addr);

	for (size_t i = 0; i < v->n_clients; i++)
		if (v->clients[i].addr.family == AF_INET &&
		    !memcmp(v->clients[i].addr.addr, ip.addr, 4))
			return &v->clients[i];
	return NULL;
}

static void test_counts_and_names(void **state)
{
	struct ndc_top *t;
	struct ndc_top_view *v;
	struct ndc_ip a = v4("169.254.100.2"), b = v4("169.254.101.2");
	uint8_t n1[64], n2[64];
	size_t l1 = wire("www.example.com", n1), l2 = wire("x.default.svc.cluster.local", n2);
	char text[NDC_TOP_NAME_TEXT];

	(void)state;
	assert_int_equal(ndc_top_new(&t), 0);
	for (int i = 0; i < 30; i++)
		ndc_top_count(t, &a, n1, l1, NDC_TOP_FORWARDED, 0);
	for (int i = 0; i < 10; i++)
		ndc_top_count(t, &b, n2, l2, NDC_TOP_LOCAL, 3);
	ndc_top_count(t, &b, n2, l2, NDC_TOP_LIMITED, 2);
	assert_int_equal(ndc_top_snapshot(t, NULL, 0, &v), 0);
	assert_int_equal(v->n_clients, 2);
	assert_int_equal(v->clients[0].c.queries, 30); /* most first */
	assert_int_equal(find(v, "169.254.100.2")->c.forwarded, 30);
	assert_int_equal(find(v, "169.254.101.2")->c.nxdomain, 10);
	assert_int_equal(find(v, "169.254.101.2")->c.limited, 1);
	assert_int_equal(find(v, "169.254.101.2")->c.servfail, 1);
	assert_int_equal(v->n_names, 2);
	ndc_top_name_text(v->names[0].lname, v->names[0].nlen, text);
	assert_string_equal(text, "www.example.com.");
	assert_int_equal(v->names[0].count, 30);
	free(v);

	/* The kernel's rows: one client known, one new. */
	struct ndc_top_ext_row rows[] = {
	    {.addr = a, .queries = 100, .answered = 95, .nxdomain = 1, .passed = 5},
	    {.addr = v4("169.254.102.2"), .queries = 7, .answered = 7},
	};
	assert_int_equal(ndc_top_snapshot(t, rows, 2, &v), 0);
	assert_int_equal(v->n_clients, 3);
	assert_int_equal(find(v, "169.254.100.2")->c.queries, 130);
	assert_int_equal(find(v, "169.254.100.2")->c.kernel_answered, 95);
	assert_int_equal(find(v, "169.254.100.2")->c.kernel_passed, 5);
	assert_int_equal(find(v, "169.254.102.2")->c.queries, 7);
	free(v);
	ndc_top_free(t);
}

/* Space-Saving: a name asked more than total/k times is kept, whatever the noise around it. */
static void test_sketch_heavy_hitter(void **state)
{
	struct ndc_top *t;
	struct ndc_top_view *v;
	struct ndc_ip a = v4("169.254.100.2");
	uint8_t n[64], hot[64];
	size_t lh = wire("hot.example.com", hot);
	char text[64];

	(void)state;
	assert_int_equal(ndc_top_new(&t), 0);
	for (int i = 0; i < 5000; i++) {
		snprintf(text, sizeof(text), "n%d.example.com", i);
		ndc_top_count(t, &a, n, wire(text, n), NDC_TOP_FORWARDED, 3);
		if (i % 4 == 0)
			ndc_top_count(t, &a, hot, lh, NDC_TOP_CACHE, 0);
	}
	assert_int_equal(ndc_top_snapshot(t, NULL, 0, &v), 0);
	assert_int_equal(v->n_names, NDC_TOP_NAMES);
	assert_int_equal(v->names[0].nlen, lh);
	assert_memory_equal(v->names[0].lname, hot, lh);
	assert_true(v->names[0].count >= 1250 && v->names[0].count - v->names[0].error <= 1250);
	assert_int_equal(v->clients[0].names[0].nlen, lh);
	free(v);
	ndc_top_free(t);
}

/* More addresses than the table holds: counted in the "other" row, never lost. */
static void test_bound(void **state)
{
	struct ndc_top *t;
	struct ndc_top_view *v;
	uint64_t sum = 0;

	(void)state;
	assert_int_equal(ndc_top_new(&t), 0);
	for (int i = 0; i < 2000; i++) {
		struct ndc_ip ip = {.family = AF_INET};

		ip.addr[0] = 169;
		ip.addr[1] = 254;
		ip.addr[2] = (uint8_t)(i >> 8);
		ip.addr[3] = (uint8_t)i;
		ndc_top_count(t, &ip, NULL, 0, NDC_TOP_OTHER, -1);
	}
	assert_int_equal(ndc_top_snapshot(t, NULL, 0, &v), 0);
	assert_true(v->n_clients <= NDC_TOP_CLIENTS + 1);
	assert_int_equal(v->clients[v->n_clients - 1].addr.family, 0);
	for (size_t i = 0; i < v->n_clients; i++)
		sum += v->clients[i].c.queries;
	assert_int_equal(sum, 2000);
	assert_int_equal(v->overflow, 2000 - (v->n_clients - 1));
	free(v);
	ndc_top_free(t);
}

static void test_name_text(void **state)
{
	const uint8_t odd[] = {3, 'a', '"', 0x07, 1, '\\', 0};
	char text[NDC_TOP_NAME_TEXT];

	(void)state;
	ndc_top_name_text(odd, sizeof(odd), text);
	assert_string_equal(text, "a\\034\\007.\\092.");
	ndc_top_name_text((const uint8_t *)"", 1, text);
	assert_string_equal(text, ".");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_counts_and_names),
	    cmocka_unit_test(test_sketch_heavy_hitter),
	    cmocka_unit_test(test_bound),
	    cmocka_unit_test(test_name_text),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
