// SPDX-License-Identifier: MIT
/*
 * Pod identity without a server: the Pod conversion (good pods, and hostile or broken ones each
 * rejected with the field named) and the map (podIPs and podIP, hostNetwork as the node, ended
 * pods, IP changes, deletes, relists, address conflicts, the bound, lookups under a writer).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <setjmp.h>
#include <cmocka.h>

#include <json-c/json.h>

#include <ndc/log.h>

#include "pods/pods.h"

#define NODE "node-a"

static struct ndc_ip ip(const char *s)
{
	struct ndc_ip a;

	assert_int_equal(ndc_ip_parse(s, 0, &a), 0);
	return a;
}

static int conv(const char *json, struct ndc_pod_info *pod, char *err, size_t errlen)
{
	json_object *o = json_tokener_parse(json);
	int r;

	assert_non_null(o);
	r = ndc_pod_convert(o, pod, err, errlen);
	json_object_put(o);
	return r;
}

/* A Pod's JSON: ns/name on node with status; extra is spliced into spec. */
static char *pod_json(const char *ns, const char *name, const char *node, const char *status,
		      const char *extra)
{
	char *s;

	assert_true(
	    asprintf(&s,
		     "{\"kind\":\"Pod\",\"metadata\":{\"namespace\":\"%s\",\"name\":\"%s\"},"
		     "\"spec\":{\"nodeName\":\"%s\"%s},\"status\":%s}",
		     ns, name, node, extra ? extra : "", status) > 0);
	return s;
}

static struct ndc_pod_info pod_of(const char *ns, const char *name, const char *node,
				  const char *status, const char *extra)
{
	struct ndc_pod_info pod;
	char err[256] = "";
	char *j = pod_json(ns, name, node, status, extra);

	if (conv(j, &pod, err, sizeof(err)) != 0)
		fail_msg("%s: %s", j, err);
	free(j);
	return pod;
}

static void expect_pod(struct ndc_pods *p, const char *addr, const char *ns, const char *name)
{
	struct ndc_pod_ident id;
	struct ndc_ip a = ip(addr);

	if (ndc_pods_lookup(p, &a, &id) != 0)
		fail_msg("%s: not mapped (expected %s/%s)", addr, ns, name);
	assert_int_equal(id.owner, NDC_POD_POD);
	assert_string_equal(id.ns, ns);
	assert_string_equal(id.name, name);
}

static void expect_node(struct ndc_pods *p, const char *addr)
{
	struct ndc_pod_ident id;
	struct ndc_ip a = ip(addr);

	assert_int_equal(ndc_pods_lookup(p, &a, &id), 0);
	assert_int_equal(id.owner, NDC_POD_NODE);
	assert_string_equal(id.ns, "");
	assert_string_equal(id.name, NODE);
}

static void expect_none(struct ndc_pods *p, const char *addr)
{
	struct ndc_pod_ident id;
	struct ndc_ip a = ip(addr);

	assert_int_equal(ndc_pods_lookup(p, &a, &id), -ENOENT);
	assert_int_equal(id.owner, NDC_POD_UNKNOWN);
	assert_string_equal(id.name, "");
}

/* ---- conversion ----------------------------------------------------------------------------- */

static void test_conv_dual_stack(void **state)
{
	struct ndc_pod_info pod = pod_of(
	    "shop", "cart-7d9f", NODE,
	    "{\"phase\":\"Running\",\"podIP\":\"10.244.1.5\",\"podIPs\":[{\"ip\":\"10.244.1.5\"},"
	    "{\"ip\":\"fd00:10:244:1::5\"}]}",
	    NULL);
	struct ndc_ip a = ip("10.244.1.5"), b = ip("fd00:10:244:1::5");

	(void)state;
	assert_string_equal(pod.ns, "shop");
	assert_string_equal(pod.name, "cart-7d9f");
	assert_string_equal(pod.node, NODE);
	assert_false(pod.host_network);
	assert_false(pod.ended);
	assert_false(pod.deleting);
	assert_int_equal(pod.n_ips, 2);
	assert_memory_equal(&pod.ips[0], &a, sizeof(a));
	assert_memory_equal(&pod.ips[1], &b, sizeof(b));
	assert_int_equal(pod.n_host_ips, 0);

	/* The node's addresses: hostIPs, else hostIP. */
	pod = pod_of("shop", "cart", NODE,
		     "{\"hostIP\":\"192.0.2.1\",\"hostIPs\":[{\"ip\":\"192.0.2.1\"},"
		     "{\"ip\":\"2001:db8::1\"}]}",
		     NULL);
	assert_int_equal(pod.n_host_ips, 2);
	pod = pod_of("shop", "cart", NODE, "{\"hostIP\":\"192.0.2.1\"}", NULL);
	assert_int_equal(pod.n_host_ips, 1);
	a = ip("192.0.2.1");
	assert_memory_equal(&pod.host_ips[0], &a, sizeof(a));
}

static void test_conv_optional(void **state)
{
	struct ndc_pod_info pod;
	char err[256];

	(void)state;
	/* Only podIP (an old server); hostNetwork; a deletion under way. */
	pod = pod_of("kube-system", "kube-proxy-x", NODE, "{\"podIP\":\"192.0.2.7\"}",
		     ",\"hostNetwork\":true");
	assert_int_equal(pod.n_ips, 1);
	assert_true(pod.host_network);
	/* Pending: no status, no node, podIP "" and podIPs null. */
	assert_int_equal(
	    conv("{\"metadata\":{\"namespace\":\"a\",\"name\":\"b\"}}", &pod, err, sizeof(err)), 0);
	assert_int_equal(pod.n_ips, 0);
	assert_string_equal(pod.node, "");
	assert_int_equal(conv("{\"metadata\":{\"namespace\":\"a\",\"name\":\"b\","
			      "\"deletionTimestamp\":\"2026-01-01T00:00:00Z\"},\"spec\":null,"
			      "\"status\":{\"podIP\":\"\",\"podIPs\":null,\"phase\":\"Failed\"}}",
			      &pod, err, sizeof(err)),
			 0);
	assert_int_equal(pod.n_ips, 0);
	assert_true(pod.deleting);
	assert_true(pod.ended);
}

static void test_conv_rejects(void **state)
{
	static const struct {
		const char *json, *why;
	} bad[] = {
	    {"[]", "must be an object"},
	    {"{}", "metadata: missing"},
	    {"{\"metadata\":[]}", "metadata: expected an object"},
	    {"{\"metadata\":{\"name\":\"a\"}}", "metadata.namespace: missing"},
	    {"{\"metadata\":{\"namespace\":\"a\"}}", "metadata.name: missing"},
	    {"{\"metadata\":{\"namespace\":7,\"name\":\"a\"}}", "expected a string"},
	    /* Names a terminal or a JSON reader would take for something else. */
	    {"{\"metadata\":{\"namespace\":\"a\",\"name\":\"x\\u001b[2J\"}}", "not a valid"},
	    {"{\"metadata\":{\"namespace\":\"a\",\"name\":\"x\\u0000y\"}}", "not a valid"},
	    {"{\"metadata\":{\"namespace\":\"A\",\"name\":\"a\"}}", "not a valid DNS label"},
	    {"{\"metadata\":{\"namespace\":\"a.b\",\"name\":\"a\"}}", "not a valid DNS label"},
	    {"{\"metadata\":{\"namespace\":\"a\",\"name\":\"-a\"}}", "not a valid"},
	    {"{\"metadata\":{\"namespace\":\"a\",\"name\":\"a..b\"}}", "not a valid"},
	    {"{\"metadata\":{\"namespace\":\"a\",\"name\":\"a\\\"b\"}}", "not a valid"},
	    {"{\"metadata\":{\"namespace\":\"a\",\"name\":\"b\"},\"spec\":{\"hostNetwork\":1}}",
	     "spec.hostNetwork: expected a boolean"},
	    {"{\"metadata\":{\"namespace\":\"a\",\"name\":\"b\"},\"spec\":{\"nodeName\":\"N\"}}",
	     "spec.nodeName"},
	    {"{\"metadata\":{\"namespace\":\"a\",\"name\":\"b\"},\"status\":\"Running\"}",
	     "status: expected an object"},
	    {"{\"metadata\":{\"namespace\":\"a\",\"name\":\"b\"},\"status\":{\"podIPs\":[\"1.2.3."
	     "4\"]}}",
	     "status.podIPs[0]: expected an object"},
	    {"{\"metadata\":{\"namespace\":\"a\",\"name\":\"b\"},\"status\":{\"podIPs\":[{}]}}",
	     "status.podIPs[0].ip: missing"},
	    {"{\"metadata\":{\"namespace\":\"a\",\"name\":\"b\"},\"status\":{\"podIPs\":"
	     "[{\"ip\":\"1.2.3.4\"},{\"ip\":\"::1\"},{\"ip\":\"1.2.3.5\"}]}}",
	     "more than 2 addresses"},
	    {"{\"metadata\":{\"namespace\":\"a\",\"name\":\"b\"},\"status\":{\"podIP\":\"1.2.3.4/"
	     "24\"}}",
	     "status.podIP: invalid IP address"},
	    {"{\"metadata\":{\"namespace\":\"a\",\"name\":\"b\"},\"status\":{\"podIP\":"
	     "\"1.2.3.4\\u0000\"}}",
	     "invalid IP address"},
	    {"{\"metadata\":{\"namespace\":\"a\",\"name\":\"b\"},\"status\":{\"hostIPs\":{}}}",
	     "status.hostIPs: expected an array"},
	    {"{\"metadata\":{\"namespace\":\"a\",\"name\":\"b\"},\"status\":{\"hostIP\":\"node-a\"}"
	     "}",
	     "status.hostIP: invalid IP address"},
	};
	struct ndc_pod_info pod;
	char err[256];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		if (conv(bad[i].json, &pod, err, sizeof(err)) != -EINVAL)
			fail_msg("accepted: %s", bad[i].json);
		if (!strstr(err, bad[i].why))
			fail_msg("%s: reason '%s' does not say '%s'", bad[i].json, err, bad[i].why);
		assert_int_equal(pod.n_ips, 0);
	}
	/* A rejected pod keeps its names (to forget what it mapped before), nothing else. */
	assert_int_equal(conv("{\"metadata\":{\"namespace\":\"a\",\"name\":\"b\"},\"status\":"
			      "{\"podIP\":\"nope\"}}",
			      &pod, err, sizeof(err)),
			 -EINVAL);
	assert_string_equal(pod.ns, "a");
	assert_string_equal(pod.name, "b");
	/* 64-byte namespace, 254-byte name: over the API's limits. */
	{
		char j[700], l64[65], l254[255];

		memset(l64, 'a', 64);
		l64[64] = '\0';
		memset(l254, 'a', 254);
		for (int k = 60; k < 254; k += 61)
			l254[k] = '.';
		l254[254] = '\0';
		snprintf(j, sizeof(j), "{\"metadata\":{\"namespace\":\"%s\",\"name\":\"b\"}}", l64);
		assert_int_equal(conv(j, &pod, err, sizeof(err)), -EINVAL);
		snprintf(j, sizeof(j), "{\"metadata\":{\"namespace\":\"a\",\"name\":\"%s\"}}",
			 l254);
		assert_int_equal(conv(j, &pod, err, sizeof(err)), -EINVAL);
		l254[253] = '\0'; /* 253: the longest valid name */
		snprintf(j, sizeof(j), "{\"metadata\":{\"namespace\":\"a\",\"name\":\"%s\"}}",
			 l254);
		assert_int_equal(conv(j, &pod, err, sizeof(err)), 0);
	}
}

static void test_node_name_check(void **state)
{
	char err[256];

	(void)state;
	assert_int_equal(
	    ndc_pods_node_name_check("ip-10-0-1-5.eu-west-1.compute.internal", err, sizeof(err)),
	    0);
	assert_int_equal(ndc_pods_node_name_check("", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "NODE_NAME"));
	assert_int_equal(ndc_pods_node_name_check(NULL, err, sizeof(err)), -EINVAL);
	assert_int_equal(ndc_pods_node_name_check("Node_1", err, sizeof(err)), -EINVAL);
	assert_int_equal(ndc_pods_node_name_check("a&fieldSelector=", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "DNS-1123"));
}

/* ---- the map -------------------------------------------------------------------------------- */

static void test_map_add_change_delete(void **state)
{
	struct ndc_pods *p;
	struct ndc_pods_stats st;

	(void)state;
	assert_int_equal(ndc_pods_new(NODE, &p), 0);
	expect_none(p, "10.244.1.5");
	assert_int_equal(ndc_pods_put(p, &(struct ndc_pod_info){0}), 0); /* another node's: no-op */

	struct ndc_pod_info a =
	    pod_of("shop", "cart", NODE,
		   "{\"podIPs\":[{\"ip\":\"10.244.1.5\"},{\"ip\":\"fd00::5\"}]}", NULL);
	struct ndc_pod_info b =
	    pod_of("batch", "crawler", NODE, "{\"podIP\":\"10.244.1.6\"}", NULL);
	assert_int_equal(ndc_pods_put(p, &a), 0);
	assert_int_equal(ndc_pods_put(p, &b), 0);
	expect_pod(p, "10.244.1.5", "shop", "cart");
	expect_pod(p, "fd00::5", "shop", "cart");
	expect_pod(p, "10.244.1.6", "batch", "crawler");
	expect_pod(p, "::ffff:10.244.1.6", "batch", "crawler"); /* a dual-stack socket's view */
	expect_none(p, "10.244.1.7");

	/* IP change: the old address is forgotten. */
	b = pod_of("batch", "crawler", NODE, "{\"podIP\":\"10.244.1.9\"}", NULL);
	assert_int_equal(ndc_pods_put(p, &b), 0);
	expect_none(p, "10.244.1.6");
	expect_pod(p, "10.244.1.9", "batch", "crawler");

	/* Ended: its address goes to the next pod. */
	b = pod_of("batch", "crawler", NODE, "{\"phase\":\"Succeeded\",\"podIP\":\"10.244.1.9\"}",
		   NULL);
	assert_int_equal(ndc_pods_put(p, &b), 0);
	expect_none(p, "10.244.1.9");

	/* Moved off the node (left the selector): removed. */
	a.node[0] = '\0';
	strcpy(a.node, "node-b");
	assert_int_equal(ndc_pods_put(p, &a), 0);
	expect_none(p, "10.244.1.5");

	assert_int_equal(ndc_pods_del(p, "batch", "crawler"), 0);
	assert_int_equal(ndc_pods_del(p, "batch", "crawler"), -ENOENT);
	ndc_pods_stats(p, &st);
	assert_int_equal(st.pods, 0);
	assert_int_equal(st.addrs, 0);
	ndc_pods_free(p);
}

static void test_map_host_network_and_conflicts(void **state)
{
	struct ndc_pods *p;
	struct ndc_pods_stats st;

	(void)state;
	assert_int_equal(ndc_pods_new(NODE, &p), 0);
	/* Three hostNetwork pods share the node's address: the node, no conflict. */
	for (int i = 0; i < 3; i++) {
		char name[16];

		snprintf(name, sizeof(name), "host-%d", i);
		struct ndc_pod_info h =
		    pod_of("kube-system", name, NODE, "{\"podIP\":\"192.0.2.10\"}",
			   ",\"hostNetwork\":true");
		assert_int_equal(ndc_pods_put(p, &h), 0);
	}
	expect_node(p, "192.0.2.10");
	ndc_pods_stats(p, &st);
	assert_int_equal(st.pods, 3);
	assert_int_equal(st.addrs, 1);
	assert_int_equal(st.node_addrs, 1);
	assert_int_equal(st.conflicts, 0);

	/* Any pod's hostIP is the node's address, even with no hostNetwork pod. */
	struct ndc_pod_info plain = pod_of(
	    "web", "plain", NODE, "{\"podIP\":\"10.244.1.30\",\"hostIP\":\"192.0.2.11\"}", NULL);
	assert_int_equal(ndc_pods_put(p, &plain), 0);
	expect_node(p, "192.0.2.11");
	expect_pod(p, "10.244.1.30", "web", "plain");
	plain.ended = true; /* the node's address stays known after the pod ends */
	assert_int_equal(ndc_pods_put(p, &plain), 0);
	expect_node(p, "192.0.2.11");
	expect_none(p, "10.244.1.30");
	assert_int_equal(ndc_pods_del(p, "web", "plain"), 0);
	expect_none(p, "192.0.2.11");

	/* An IP reused while its old pod terminates: the live pod wins, whatever the order. */
	struct ndc_pod_info live = pod_of("web", "new", NODE, "{\"podIP\":\"10.244.1.20\"}", NULL);
	assert_int_equal(ndc_pods_put(p, &live), 0);
	struct ndc_pod_info old = pod_of("web", "old", NODE, "{\"podIP\":\"10.244.1.20\"}", NULL);
	old.deleting = true;
	assert_int_equal(ndc_pods_put(p, &old), 0);
	expect_pod(p, "10.244.1.20", "web", "new");
	ndc_pods_stats(p, &st);
	assert_int_equal(st.conflicts, 1);
	/* Two live claims: the one changed last. */
	old.deleting = false;
	assert_int_equal(ndc_pods_put(p, &old), 0);
	expect_pod(p, "10.244.1.20", "web", "old");
	assert_int_equal(ndc_pods_put(p, &live), 0);
	expect_pod(p, "10.244.1.20", "web", "new");
	assert_int_equal(ndc_pods_del(p, "web", "new"), 0);
	expect_pod(p, "10.244.1.20", "web", "old");
	ndc_pods_free(p);
}

static void test_map_bound(void **state)
{
	struct ndc_pods *p;
	struct ndc_pods_stats st;
	struct ndc_pod_info pod;

	(void)state;
	ndc_log_level = NDC_LOG_ERR; /* the one warning is expected */
	assert_int_equal(ndc_pods_new(NODE, &p), 0);
	pod = pod_of("a", "x", NODE, "{}", NULL);
	for (int i = 0; i < NDC_PODS_MAX; i++) {
		snprintf(pod.name, sizeof(pod.name), "p-%d", i);
		assert_int_equal(ndc_pods_put(p, &pod), 0);
	}
	strcpy(pod.name, "one-more");
	assert_int_equal(ndc_pods_put(p, &pod), -ENOSPC);
	snprintf(pod.name, sizeof(pod.name), "p-%d", 7); /* a replace still works */
	assert_int_equal(ndc_pods_put(p, &pod), 0);
	ndc_pods_stats(p, &st);
	assert_int_equal(st.pods, NDC_PODS_MAX);
	assert_int_equal(st.full, 1);
	ndc_pods_free(p);
}

/* The watch's consumer: relist swaps at list_end; events; rejected objects; other kinds. */
static void feed(struct ndc_pods *p, enum ndc_k8s_event ev, const char *json)
{
	json_object *o = json_tokener_parse(json);

	assert_non_null(o);
	ndc_pods_watch_ops.event(p, NDC_K8S_NODE_PODS, ev, o);
	json_object_put(o);
}

static void item(struct ndc_pods *p, const char *json)
{
	json_object *o = json_tokener_parse(json);

	assert_non_null(o);
	ndc_pods_watch_ops.list_item(p, NDC_K8S_NODE_PODS, o);
	json_object_put(o);
}

static void test_watch_ops(void **state)
{
	struct ndc_pods *p;
	struct ndc_pods_stats st;
	char *a = pod_json("shop", "cart", NODE, "{\"podIP\":\"10.244.1.5\"}", NULL);
	char *b = pod_json("batch", "crawler", NODE, "{\"podIP\":\"10.244.1.6\"}", NULL);
	char *b2 = pod_json("batch", "crawler", NODE, "{\"podIP\":\"10.244.1.8\"}", NULL);
	char *other = pod_json("batch", "far", "node-b", "{\"podIP\":\"10.244.2.6\"}", NULL);

	(void)state;
	ndc_log_level = -1; /* rejections are expected */
	assert_int_equal(ndc_pods_new(NODE, &p), 0);
	ndc_pods_watch_ops.list_begin(p, NDC_K8S_NODE_PODS);
	item(p, a);
	item(p, other);
	expect_none(p, "10.244.1.5"); /* not before list_end */
	ndc_pods_watch_ops.list_end(p, NDC_K8S_NODE_PODS);
	expect_pod(p, "10.244.1.5", "shop", "cart");
	expect_none(p, "10.244.2.6");
	ndc_pods_stats(p, &st);
	assert_true(st.synced);

	feed(p, NDC_K8S_ADDED, b);
	expect_pod(p, "10.244.1.6", "batch", "crawler");
	feed(p, NDC_K8S_MODIFIED, b2);
	expect_none(p, "10.244.1.6");
	expect_pod(p, "10.244.1.8", "batch", "crawler");
	/* A broken version of the pod: rejected, and what it mapped is forgotten. */
	feed(p, NDC_K8S_MODIFIED,
	     "{\"metadata\":{\"namespace\":\"batch\",\"name\":\"crawler\"},\"status\":7}");
	expect_none(p, "10.244.1.8");
	ndc_pods_stats(p, &st);
	assert_int_equal(st.rejected, 1);
	feed(p, NDC_K8S_DELETED, a);
	expect_none(p, "10.244.1.5");
	/* Another kind's callbacks (a shared consumer): ignored. */
	{
		json_object *o = json_tokener_parse(b);

		ndc_pods_watch_ops.event(p, NDC_K8S_PODS, NDC_K8S_ADDED, o);
		json_object_put(o);
	}
	expect_none(p, "10.244.1.6");

	/* A relist drops what is gone and keeps what stays. */
	feed(p, NDC_K8S_ADDED, a);
	feed(p, NDC_K8S_ADDED, b);
	ndc_pods_watch_ops.list_begin(p, NDC_K8S_NODE_PODS);
	item(p, b);
	ndc_pods_watch_ops.list_end(p, NDC_K8S_NODE_PODS);
	expect_none(p, "10.244.1.5");
	expect_pod(p, "10.244.1.6", "batch", "crawler");
	ndc_pods_free(p);
	free(a);
	free(b);
	free(b2);
	free(other);
}

/* Readers on other threads while the writer flips an address between two pods: never a torn
 * or foreign answer (ASan/TSan builds catch a freed table). */
struct race {
	struct ndc_pods *p;
	atomic_bool stop;
	atomic_ulong lookups, bad;
};

static void *reader(void *arg)
{
	struct race *r = arg;
	struct ndc_ip a = ip("10.244.1.5");
	struct ndc_pod_ident id;

	while (!atomic_load(&r->stop)) {
		if (ndc_pods_lookup(r->p, &a, &id) == 0 &&
		    (id.owner != NDC_POD_POD || strcmp(id.ns, "shop") ||
		     (strcmp(id.name, "one") && strcmp(id.name, "two"))))
			atomic_fetch_add(&r->bad, 1);
		atomic_fetch_add(&r->lookups, 1);
	}
	return NULL;
}

static void test_map_readers(void **state)
{
	struct race r = {0};
	pthread_t t[2];
	struct ndc_pod_info one = pod_of("shop", "one", NODE, "{\"podIP\":\"10.244.1.5\"}", NULL);
	struct ndc_pod_info two = pod_of("shop", "two", NODE, "{\"podIP\":\"10.244.1.5\"}", NULL);

	(void)state;
	assert_int_equal(ndc_pods_new(NODE, &r.p), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&t[i], NULL, reader, &r), 0);
	/* Until the readers have looked up a good many times across changes (20 s at most). */
	time_t end = time(NULL) + 20;

	for (int i = 0; i < 2000 || (atomic_load(&r.lookups) < 100000 && time(NULL) < end); i++) {
		assert_int_equal(ndc_pods_put(r.p, i & 1 ? &one : &two), 0);
		if (i % 3 == 0)
			ndc_pods_del(r.p, "shop", i & 1 ? "two" : "one");
	}
	atomic_store(&r.stop, true);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(atomic_load(&r.bad), 0);
	assert_true(atomic_load(&r.lookups) > 0);
	ndc_pods_free(r.p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_conv_dual_stack),
	    cmocka_unit_test(test_conv_optional),
	    cmocka_unit_test(test_conv_rejects),
	    cmocka_unit_test(test_node_name_check),
	    cmocka_unit_test(test_map_add_change_delete),
	    cmocka_unit_test(test_map_host_network_and_conflicts),
	    cmocka_unit_test(test_map_bound),
	    cmocka_unit_test(test_watch_ops),
	    cmocka_unit_test(test_map_readers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
