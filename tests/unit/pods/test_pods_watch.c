// SPDX-License-Identifier: MIT
/*
 * Pod identity against the fake API server (tests/fakeapi): pods on this node (node-a) and on
 * another (node-b). Only node-a's are listed and watched (every request carries the node's
 * field selector, the server records them, and no node-b pod ever reaches the consumer), and the
 * map names two addresses right through ADDED, an IP change, a pod bound to the node after it
 * was created, a hostNetwork pod, DELETED, and a relist after the server forgot our
 * resourceVersion.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <setjmp.h>
#include <cmocka.h>

#include <json-c/json.h>

#include "../k8s/fixture.h"
#include "pods/pods.h"

#define NODE "node-a"

/* The consumer in front of the map: what reached it, to show the server filtered. */
struct seen {
	struct ndc_pods *p;
	pthread_mutex_t m;
	unsigned objects, foreign;	   /* foreign: objects of another node */
	unsigned late_added, late_deleted; /* events of jobs/late by type */
};

static void seen_obj(struct seen *s, json_object *o)
{
	json_object *spec, *node;
	bool foreign = json_object_object_get_ex(o, "spec", &spec) &&
		       json_object_object_get_ex(spec, "nodeName", &node) &&
		       strcmp(json_object_get_string(node), NODE);

	pthread_mutex_lock(&s->m);
	s->objects++;
	s->foreign += foreign;
	pthread_mutex_unlock(&s->m);
}

static void w_begin(void *arg, enum ndc_k8s_kind k)
{
	ndc_pods_watch_ops.list_begin(((struct seen *)arg)->p, k);
}

static void w_item(void *arg, enum ndc_k8s_kind k, json_object *o)
{
	seen_obj(arg, o);
	ndc_pods_watch_ops.list_item(((struct seen *)arg)->p, k, o);
}

static void w_end(void *arg, enum ndc_k8s_kind k)
{
	ndc_pods_watch_ops.list_end(((struct seen *)arg)->p, k);
}

static void w_event(void *arg, enum ndc_k8s_kind k, enum ndc_k8s_event ev, json_object *o)
{
	struct seen *s = arg;
	char name[128];

	obj_name(o, name, sizeof(name));
	pthread_mutex_lock(&s->m);
	if (!strcmp(name, "jobs/late")) {
		s->late_added += ev == NDC_K8S_ADDED;
		s->late_deleted += ev == NDC_K8S_DELETED;
	}
	pthread_mutex_unlock(&s->m);
	/* A pod that left the selector comes DELETED with its new node: not a foreign object. */
	if (ev != NDC_K8S_DELETED)
		seen_obj(arg, o);
	ndc_pods_watch_ops.event(((struct seen *)arg)->p, k, ev, o);
}

static const struct ndc_k8s_watch_ops seen_ops = {w_begin, w_item, w_end, w_event};

static void apply_pod(const char *ns, const char *name, const char *node, const char *ip, bool host)
{
	char spec[128] = "";

	if (node)
		snprintf(spec, sizeof(spec), "\"nodeName\":\"%s\"%s", node,
			 host ? ",\"hostNetwork\":true" : "");
	/* The nodes' own addresses: node-a 192.0.2.10 (its hostNetwork pod's too), node-b .20. */
	control("{\"op\":\"apply\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\","
		"\"metadata\":{\"namespace\":\"%s\",\"name\":\"%s\"},\"spec\":{%s},"
		"\"status\":{\"phase\":\"%s\",\"podIP\":\"%s\",\"podIPs\":[{\"ip\":\"%s\"}],"
		"\"hostIP\":\"%s\"}}}",
		ns, name, spec, ip[0] ? "Running" : "Pending", ip, ip,
		!node		     ? ""
		: strcmp(node, NODE) ? "192.0.2.20"
				     : "192.0.2.10");
}

/* Polls the map until addr is owned as expected (ns NULL: nobody), or fails after ms. */
static void wait_owner(struct ndc_pods *p, const char *addr, enum ndc_pod_owner owner,
		       const char *ns, const char *name, int ms)
{
	struct ndc_pod_ident id;
	struct ndc_ip a;
	int64_t end = now_ms() + ms;

	assert_int_equal(ndc_ip_parse(addr, 0, &a), 0);
	for (;;) {
		ndc_pods_lookup(p, &a, &id);
		if (id.owner == owner && (!ns || !strcmp(id.ns, ns)) &&
		    (!name || !strcmp(id.name, name)))
			return;
		if (now_ms() > end)
			fail_msg("%s: owner %d %s/%s after %d ms, expected %d %s/%s", addr,
				 id.owner, id.ns, id.name, ms, owner, ns ? ns : "",
				 name ? name : "");
		nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
	}
}

static void wait_synced(struct ndc_pods *p, int ms)
{
	struct ndc_pods_stats st;
	int64_t end = now_ms() + ms;

	for (ndc_pods_stats(p, &st); !st.synced; ndc_pods_stats(p, &st)) {
		if (now_ms() > end)
			fail_msg("pods of %s not synced within %d ms", NODE, ms);
		nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
	}
}

static void wait_relist(struct ndc_k8s_watch *w, int ms)
{
	struct ndc_k8s_watch_stats st;
	int64_t end = now_ms() + ms;

	for (ndc_k8s_watch_stats(w, &st); !st.relists_410; ndc_k8s_watch_stats(w, &st)) {
		if (now_ms() > end)
			fail_msg("no relist after 410 within %d ms", ms);
		nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
	}
}

/* Every pods request the server saw: returns how many; fails on one without the selector. */
static unsigned pods_requests_selected(unsigned *ret_watches)
{
	json_object *o = control_req("/requests", NULL), *a;
	unsigned n = 0, watches = 0;

	assert_true(json_object_object_get_ex(o, "requests", &a));
	for (size_t i = 0; i < json_object_array_length(a); i++) {
		const char *t = json_object_get_string(json_object_array_get_idx(a, i));

		if (strncmp(t, "/api/v1/pods", 12))
			continue;
		if (!strstr(t, "?fieldSelector=spec.nodeName%3Dnode-a&"))
			fail_msg("a pods request without the node's field selector: %s", t);
		n++;
		watches += strstr(t, "watch=true") != NULL;
	}
	json_object_put(o);
	*ret_watches = watches;
	return n;
}

static void test_node_pods(void **state)
{
	struct fx *f = *state;
	struct seen s = {.m = PTHREAD_MUTEX_INITIALIZER};
	struct ndc_pods_stats st;
	unsigned n, watches, objects;

	/* Two pods on each node, and node-a's hostNetwork kube-proxy. */
	apply_pod("shop", "cart", NODE, "10.244.1.5", false);
	apply_pod("batch", "crawler", NODE, "10.244.1.6", false);
	apply_pod("shop", "cart-b", "node-b", "10.244.2.5", false);
	apply_pod("batch", "crawler-b", "node-b", "10.244.2.6", false);
	apply_pod("kube-system", "kube-proxy-a", NODE, "192.0.2.10", true);
	control("{\"op\":\"reset_stats\"}");

	assert_int_equal(ndc_pods_new(NODE, &s.p), 0);
	f->opts.kinds = 1u << NDC_K8S_NODE_PODS;
	f->opts.node_name = NODE;
	assert_int_equal(ndc_k8s_watch_start(&f->conn, &f->opts, &seen_ops, &s, &f->w), 0);
	wait_synced(s.p, 5000);
	wait_owner(s.p, "10.244.1.5", NDC_POD_POD, "shop", "cart", 1000);
	wait_owner(s.p, "10.244.1.6", NDC_POD_POD, "batch", "crawler", 1000);
	wait_owner(s.p, "192.0.2.10", NDC_POD_NODE, "", NODE, 1000);
	wait_owner(s.p, "10.244.2.5", NDC_POD_UNKNOWN, NULL, NULL, 0);
	wait_owner(s.p, "192.0.2.20", NDC_POD_UNKNOWN, NULL, NULL, 0); /* node-b's own */
	ndc_pods_stats(s.p, &st);
	assert_int_equal(st.pods, 3);
	assert_int_equal(st.addrs, 3);

	/* Events: a pod added here and one there; an IP change; a delete. */
	apply_pod("web", "front", NODE, "10.244.1.7", false);
	apply_pod("web", "front-b", "node-b", "10.244.2.7", false);
	wait_owner(s.p, "10.244.1.7", NDC_POD_POD, "web", "front", 3000);
	apply_pod("shop", "cart", NODE, "10.244.1.50", false);
	wait_owner(s.p, "10.244.1.50", NDC_POD_POD, "shop", "cart", 3000);
	wait_owner(s.p, "10.244.1.5", NDC_POD_UNKNOWN, NULL, NULL, 0);
	wait_owner(s.p, "10.244.1.6", NDC_POD_POD, "batch", "crawler", 0);
	control(
	    "{\"op\":\"delete\",\"kind\":\"Pod\",\"namespace\":\"batch\",\"name\":\"crawler\"}");
	wait_owner(s.p, "10.244.1.6", NDC_POD_UNKNOWN, NULL, NULL, 3000);
	wait_owner(s.p, "10.244.1.50", NDC_POD_POD, "shop", "cart", 0);

	/* Created unscheduled (outside the selector), then bound here: arrives ADDED. */
	apply_pod("jobs", "late", NULL, "", false);
	apply_pod("jobs", "late", NODE, "10.244.1.8", false);
	wait_owner(s.p, "10.244.1.8", NDC_POD_POD, "jobs", "late", 3000);
	pthread_mutex_lock(&s.m);
	assert_int_equal(s.late_added, 1); /* entering the selector is ADDED, not MODIFIED */
	pthread_mutex_unlock(&s.m);

	/* Leaving the selector (bound elsewhere; the API forbids it, a selector on labels would
	 * not): DELETED, and the address forgotten. */
	apply_pod("jobs", "late", "node-b", "10.244.1.8", false);
	wait_owner(s.p, "10.244.1.8", NDC_POD_UNKNOWN, NULL, NULL, 3000);
	pthread_mutex_lock(&s.m);
	assert_int_equal(s.late_deleted, 1);
	pthread_mutex_unlock(&s.m);
	apply_pod("jobs", "late", NODE, "10.244.1.8", false);
	wait_owner(s.p, "10.244.1.8", NDC_POD_POD, "jobs", "late", 3000);

	/* The server forgets our resourceVersion and the streams drop: a relist, same answers. */
	compact_past(1, "late");
	control("{\"op\":\"delete\",\"kind\":\"Pod\",\"namespace\":\"web\",\"name\":\"front\"}");
	control("{\"op\":\"drop\"}");
	wait_relist(f->w, 5000);
	wait_owner(s.p, "10.244.1.7", NDC_POD_UNKNOWN, NULL, NULL, 5000);
	wait_owner(s.p, "10.244.1.50", NDC_POD_POD, "shop", "cart", 0);
	wait_owner(s.p, "10.244.1.8", NDC_POD_POD, "jobs", "late", 0);
	wait_owner(s.p, "10.244.2.7", NDC_POD_UNKNOWN, NULL, NULL, 0);

	ndc_k8s_watch_stop(f->w);
	f->w = NULL;
	n = pods_requests_selected(&watches);
	printf("pods requests: %u, all with fieldSelector=spec.nodeName%%3D%s (%u watches)\n", n,
	       NODE, watches);
	assert_true(n >= 2);
	assert_true(watches >= 1);
	pthread_mutex_lock(&s.m);
	objects = s.objects;
	assert_int_equal(s.foreign, 0);
	pthread_mutex_unlock(&s.m);
	printf("objects received: %u, of another node: 0\n", objects);
	assert_true(objects >= 3 + 3); /* the list, then front, cart and late at least */
	ndc_pods_free(s.p);
}

/* The helper the wiring uses: the same watch through ndc_pods_watch_start. */
static void test_watch_start(void **state)
{
	struct fx *f = *state;
	struct ndc_pods *p;

	apply_pod("shop", "cart", NODE, "10.244.1.5", false);
	apply_pod("shop", "cart-b", "node-b", "10.244.2.5", false);
	assert_int_equal(ndc_pods_new(NODE, &p), 0);
	f->opts.kinds = 0; /* set by the helper */
	assert_int_equal(ndc_pods_watch_start(p, &f->conn, &f->opts, &f->w), 0);
	wait_synced(p, 5000);
	wait_owner(p, "10.244.1.5", NDC_POD_POD, "shop", "cart", 1000);
	wait_owner(p, "10.244.2.5", NDC_POD_UNKNOWN, NULL, NULL, 0);
	ndc_k8s_watch_stop(f->w);
	f->w = NULL;
	ndc_pods_free(p);
	/* Without a node name the kind cannot start. */
	f->opts.kinds = 1u << NDC_K8S_NODE_PODS;
	f->opts.node_name = NULL;
	assert_int_equal(ndc_k8s_watch_start(&f->conn, &f->opts, &seen_ops, NULL, &f->w), -EINVAL);
	assert_null(f->w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_node_pods, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_watch_start, setup, teardown),
	};
	int r = fx_init("ndc-pods-watch");

	if (r)
		return r;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
