// SPDX-License-Identifier: MIT
/*
 * How the client gets each kind's whole state (issue 25), against tests/fakeapi/fake_apiserver.py:
 * streamed over the watch where the server offers it (asked once per watch), else listed from the
 * watch cache, else the consistent paginated list; each fallback when the server refuses the
 * cheaper way, and relists after 410 the same way. The server's per-client counters say which
 * requests were made; the watcher's stats say how each state arrived.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include <json-c/json.h>

#include "k8s/k8s.h"

#include "fixture.h"

/* This client's counter on the fake server (token TOKEN: client "-"). */
static int64_t client_stat(const char *key)
{
	json_object *o = control_req("/stats", NULL), *c, *v;
	int64_t n = -1;

	if (json_object_object_get_ex(o, "clients", &c) && json_object_object_get_ex(c, "-", &c) &&
	    json_object_object_get_ex(c, key, &v))
		n = json_object_get_int64(v);
	json_object_put(o);
	return n;
}

static struct ndc_k8s_watch_stats stats(struct fx *f)
{
	struct ndc_k8s_watch_stats st;

	ndc_k8s_watch_stats(f->w, &st);
	return st;
}

static void all_listed(struct fx *f)
{
	pthread_mutex_lock(&f->rec.m);
	assert_int_equal(f->rec.listed[NDC_K8S_NAMESPACES], N_NS);
	assert_int_equal(f->rec.listed[NDC_K8S_SERVICES], N_SVC);
	assert_int_equal(f->rec.listed[NDC_K8S_ENDPOINTSLICES], N_SLICE);
	assert_int_equal(f->rec.bad_kind, 0);
	pthread_mutex_unlock(&f->rec.m);
	assert_true(listed_name(&f->rec, NDC_K8S_SERVICES, "app/svc-4"));
}

/* A change reaches the watcher: the watch after the state works. */
static void change_arrives(struct fx *f, const char *name)
{
	char line[128];

	apply_service(name);
	snprintf(line, sizeof(line), "ADDED Service app/%s", name);
	expect_line(f, line, 3000);
}

/* The default server streams: one request per kind gives its state and then its changes. */
static void streamed(void **state)
{
	struct fx *f = *state;
	struct ndc_k8s_watch_stats st;

	start(f);
	synced(f, ALL_KINDS, 1);
	all_listed(f);
	st = stats(f);
	assert_int_equal(st.syncs_stream, 3);
	assert_int_equal(st.syncs_cache + st.syncs_consistent + st.fallbacks, 0);
	assert_int_equal(client_stat("initial_streams"), 3);
	assert_int_equal(client_stat("lists_cache") + client_stat("lists_consistent"), 0);
	change_arrives(f, "after");
	/* The change came on the stream that carried the state: no second watch. */
	assert_int_equal(client_stat("watches"), 3);
	assert_int_equal(client_stat("refused"), 0);
	pthread_mutex_lock(&f->rec.m);
	assert_int_equal(f->rec.n_log, 1);
	pthread_mutex_unlock(&f->rec.m);
}

/* WatchList off (422): asked once for all kinds, then lists from the watch cache. */
static void stream_refused(void **state)
{
	struct fx *f = *state;
	struct ndc_k8s_watch_stats st;

	control("{\"op\":\"refuse\",\"ways\":[\"stream\"]}");
	start(f);
	synced(f, ALL_KINDS, 1);
	all_listed(f);
	st = stats(f);
	assert_int_equal(st.syncs_cache, 3);
	assert_int_equal(st.syncs_stream + st.syncs_consistent, 0);
	assert_int_equal(st.fallbacks, 1);
	assert_int_equal(client_stat("refused"), 1);
	assert_int_equal(client_stat("lists_cache"), 3);
	assert_int_equal(client_stat("lists_consistent"), 0);
	change_arrives(f, "after");
}

/* Neither the stream nor the cache: consistent paginated lists, each refusal asked once. */
static void cache_refused(void **state)
{
	struct fx *f = *state;
	struct ndc_k8s_watch_stats st;

	control("{\"op\":\"refuse\",\"ways\":[\"stream\",\"cache\"]}");
	f->opts.page_size = 2;
	start(f);
	synced(f, ALL_KINDS, 1);
	all_listed(f);
	st = stats(f);
	assert_int_equal(st.syncs_consistent, 3);
	assert_int_equal(st.syncs_stream + st.syncs_cache, 0);
	assert_int_equal(st.fallbacks, 2);
	assert_int_equal(client_stat("refused"), 2);
	/* 3 + 5 + 3 objects at 2 a page. */
	assert_int_equal(client_stat("lists_consistent"), 2 + 3 + 2);
	change_arrives(f, "after");
	/* Relists stay consistent: the refusal is kept. */
	compact_past(3, "late");
	control("{\"op\":\"drop\"}");
	synced(f, 1u << NDC_K8S_SERVICES, 2);
	st = stats(f);
	assert_true(st.syncs_consistent >= 4);
	assert_int_equal(st.syncs_stream + st.syncs_cache, 0);
	assert_int_equal(client_stat("refused"), 2);
}

/*
 * A server that ignores sendInitialEvents sends a plain watch (ADDED, then bookmarks without
 * the initial-events-end annotation): the client notices at the first bookmark and lists.
 */
static void stream_ignored(void **state)
{
	struct fx *f = *state;
	struct ndc_k8s_watch_stats st;

	control("{\"op\":\"ignore_initial_events\",\"on\":true}");
	start(f);
	synced(f, ALL_KINDS, 1);
	all_listed(f);
	st = stats(f);
	assert_int_equal(st.syncs_cache, 3);
	assert_int_equal(st.syncs_stream + st.syncs_consistent, 0);
	assert_true(st.fallbacks >= 1);
	/* Each kind's state reached the consumer once, whole: the aborted stream never ended. */
	pthread_mutex_lock(&f->rec.m);
	for (int k = 0; k <= NDC_K8S_ENDPOINTSLICES; k++)
		assert_int_equal(f->rec.ends[k], 1);
	pthread_mutex_unlock(&f->rec.m);
	assert_int_equal(client_stat("lists_consistent"), 0);
	change_arrives(f, "after");
}

/* 410 on the watch: the stream again, from the resourceVersion we had (NotOlderThan). */
static void relist_streamed(void **state)
{
	struct fx *f = *state;
	struct ndc_k8s_watch_stats st;

	relisted_410(f);
	st = stats(f);
	assert_true(st.relists_410 >= 1);
	assert_int_equal(st.syncs_stream, 2);
	assert_int_equal(client_stat("initial_streams"), 2);
	assert_int_equal(client_stat("lists_cache") + client_stat("lists_consistent"), 0);
	assert_true(listed_name(&f->rec, NDC_K8S_SERVICES, "app/late"));
	change_arrives(f, "after");
}

/* 410 on the watch, no stream: a list from the watch cache, not older than what we had. */
static void relist_from_cache(void **state)
{
	struct fx *f = *state;
	struct ndc_k8s_watch_stats st;

	control("{\"op\":\"refuse\",\"ways\":[\"stream\"]}");
	relisted_410(f);
	st = stats(f);
	assert_int_equal(st.syncs_cache, 2);
	assert_int_equal(st.syncs_consistent, 0);
	assert_int_equal(client_stat("lists_cache"), 2);
	assert_int_equal(client_stat("lists_consistent"), 0);
	assert_true(listed_name(&f->rec, NDC_K8S_SERVICES, "app/late"));
	change_arrives(f, "after");
}

/*
 * A relist at our resourceVersion answered 504 (too large: a restored or lagging server) or 410:
 * as client-go, one consistent list re-establishes a resourceVersion, then the cache again.
 */
static void relist_unknown_rv(void **state)
{
	struct fx *f = *state;
	static const int codes[] = {504, 410};
	struct ndc_k8s_watch_stats st;

	control("{\"op\":\"refuse\",\"ways\":[\"stream\"]}");
	f->opts.kinds = 1u << NDC_K8S_SERVICES;
	start(f);
	synced(f, f->opts.kinds, 1);
	for (unsigned i = 0; i < 2; i++) {
		char late[16];

		snprintf(late, sizeof(late), "late-%u", i);
		compact_past(1, late);
		control("{\"op\":\"fail\",\"count\":1,\"status\":%d,\"path\":\"/api/v1/services\","
			"\"watch\":false}",
			codes[i]);
		control("{\"op\":\"drop\"}");
		synced(f, f->opts.kinds, 2 + i);
		st = stats(f);
		assert_int_equal(st.syncs_consistent, 1 + i);
		assert_int_equal(st.syncs_cache, 1);
		assert_int_equal(st.fallbacks, 2 + i);
	}
	assert_int_equal(client_stat("lists_consistent"), 2);
	change_arrives(f, "after");
}

/* A 410 to the streamed state itself: streamed again, as a consistent read (no resourceVersion). */
static void stream_410(void **state)
{
	struct fx *f = *state;
	struct ndc_k8s_watch_stats st;

	control("{\"op\":\"fail\",\"count\":1,\"status\":410,\"path\":\"/api/v1/services\","
		"\"watch\":true}");
	f->opts.kinds = 1u << NDC_K8S_SERVICES;
	start(f);
	synced(f, f->opts.kinds, 1);
	st = stats(f);
	assert_int_equal(st.relists_410, 1);
	assert_int_equal(st.syncs_stream, 1);
	assert_int_equal(st.fallbacks, 0);
	assert_int_equal(client_stat("lists_cache") + client_stat("lists_consistent"), 0);
	change_arrives(f, "after");
}

/* A server error to the first stream decides nothing: the stream is asked again and works. */
static void stream_error_asks_again(void **state)
{
	struct fx *f = *state;
	struct ndc_k8s_watch_stats st;

	control("{\"op\":\"fail\",\"count\":1,\"status\":503,\"watch\":true}");
	start(f);
	synced(f, ALL_KINDS, 1);
	st = stats(f);
	assert_int_equal(st.syncs_stream, 3);
	assert_int_equal(st.errors, 1);
	assert_int_equal(st.fallbacks, 0);
}

enum req_type { REQ_LISTS, REQ_WATCHES, REQ_ALL };

/*
 * The targets of the fake server's recent requests to path (exact, before the query) of type,
 * in order, each strdup'ed into out; returns how many.
 */
static size_t requests_to(const char *path, enum req_type type, char **out, size_t max)
{
	json_object *o = control_req("/requests", NULL), *a;
	size_t n = 0, plen = strlen(path);

	assert_true(json_object_object_get_ex(o, "requests", &a));
	for (size_t i = 0; i < json_object_array_length(a) && n < max; i++) {
		const char *r = json_object_get_string(json_object_array_get_idx(a, i));

		if (strncmp(r, path, plen) || (r[plen] != '?' && r[plen] != '\0'))
			continue;
		if (type == REQ_ALL || (strstr(r, "watch=true") != NULL) == (type == REQ_WATCHES))
			out[n++] = strdup(r);
	}
	json_object_put(o);
	return n;
}

static void free_all(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
}

/*
 * A relist that fails keeps the resourceVersion it had: the next list asks not older than it
 * again, never resourceVersion=0 ("any", which a lagging API server may answer with an older
 * state than the one the agent serves).
 */
static void relist_fails_keeps_rv(void **state)
{
	struct fx *f = *state;
	char *lists[8], want[160];
	const char *rv;
	size_t n;

	control("{\"op\":\"refuse\",\"ways\":[\"stream\"]}");
	f->opts.kinds = 1u << NDC_K8S_SERVICES;
	start(f);
	synced(f, f->opts.kinds, 1);
	compact_past(1, "late");
	/* The watch gets 410, the relist at our resourceVersion 500, the next relist works. */
	control("{\"op\":\"fail\",\"count\":1,\"status\":500,\"path\":\"/api/v1/services\","
		"\"watch\":false}");
	control("{\"op\":\"drop\"}");
	synced(f, f->opts.kinds, 2);
	assert_int_equal(server_stat("injected_failures", NULL), 1);
	assert_true(listed_name(&f->rec, NDC_K8S_SERVICES, "app/late"));
	n = requests_to("/api/v1/services", REQ_LISTS, lists, 8);
	assert_int_equal(n, 3);
	/* The first list, with nothing yet: "any" from the cache, as client-go. */
	assert_non_null(strstr(lists[0], "resourceVersion=0&"));
	rv = strstr(lists[1], "resourceVersion=");
	assert_non_null(rv);
	assert_null(strstr(lists[1], "resourceVersion=0&"));
	assert_non_null(strstr(lists[1], "resourceVersionMatch=NotOlderThan"));
	/* The retry after the failure: the same resourceVersion, not 0. */
	snprintf(want, sizeof(want), "%s", rv);
	if (!strstr(lists[2], want))
		fail_msg("the list after a failed relist was '%s', wanted '%s'", lists[2], want);
	free_all(lists, n);
	change_arrives(f, "after");
}

/*
 * A DELETED event in the streamed initial state (ADDED only, KEP-3157) is a server that does not
 * stream it: the next request is a list, at once (no second stream, no backoff), and the state
 * reaches the consumer once, whole.
 */
static void stream_deleted_lists(void **state)
{
	struct fx *f = *state;
	struct ndc_k8s_watch_stats st;
	char *reqs[8];
	size_t n;

	control("{\"op\":\"initial_deleted\",\"count\":1}");
	f->opts.kinds = 1u << NDC_K8S_SERVICES;
	start(f);
	synced(f, f->opts.kinds, 1);
	st = stats(f);
	assert_int_equal(st.syncs_cache, 1);
	assert_int_equal(st.syncs_stream, 0);
	assert_int_equal(st.fallbacks, 1);
	assert_int_equal(st.errors, 0);
	assert_int_equal(client_stat("initial_streams"), 1);
	assert_int_equal(client_stat("lists_cache"), 1);
	pthread_mutex_lock(&f->rec.m);
	assert_int_equal(f->rec.ends[NDC_K8S_SERVICES], 1);
	assert_int_equal(f->rec.listed[NDC_K8S_SERVICES], N_SVC);
	pthread_mutex_unlock(&f->rec.m);
	/* Request order: the stream, then the list, then the plain watch from the list. */
	n = requests_to("/api/v1/services", REQ_ALL, reqs, 8);
	assert_true(n >= 3);
	assert_non_null(strstr(reqs[0], "sendInitialEvents=true"));
	if (strstr(reqs[1], "watch=true"))
		fail_msg("after a DELETED in the streamed state came '%s', not a list", reqs[1]);
	for (size_t i = 2; i < n; i++) {
		assert_non_null(strstr(reqs[i], "watch=true"));
		assert_null(strstr(reqs[i], "sendInitialEvents"));
	}
	free_all(reqs, n);
	change_arrives(f, "after");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(streamed, setup, teardown),
	    cmocka_unit_test_setup_teardown(stream_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(cache_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(stream_ignored, setup, teardown),
	    cmocka_unit_test_setup_teardown(relist_streamed, setup, teardown),
	    cmocka_unit_test_setup_teardown(relist_from_cache, setup, teardown),
	    cmocka_unit_test_setup_teardown(relist_unknown_rv, setup, teardown),
	    cmocka_unit_test_setup_teardown(stream_410, setup, teardown),
	    cmocka_unit_test_setup_teardown(stream_error_asks_again, setup, teardown),
	    cmocka_unit_test_setup_teardown(relist_fails_keeps_rv, setup, teardown),
	    cmocka_unit_test_setup_teardown(stream_deleted_lists, setup, teardown),
	};
	int r = fx_init("ndc-k8s-sync");

	if (r)
		return r;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
