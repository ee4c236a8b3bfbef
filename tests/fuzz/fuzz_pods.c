// SPDX-License-Identifier: MIT
/*
 * Fuzz target for pod identity: what the API server sends for the node's pods, as a watch
 * stream (bit 7 of the first byte clear) or a list page (set), split into chunks of 1..32 bytes
 * (bits 0-4), through the client's parsers into the pod map's consumer (ndc_pods_watch_ops).
 * Invariants: every converted pod has names the API would accept and at most two addresses of
 * each kind (pod, host); a rejection says why; the map holds at most four addresses per pod and
 * every address it answers for names a valid pod or the node.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include <ndc/log.h>

#include "k8s/k8s.h"
#include "pods/pods.h"

#define NODE "node-a"

struct sink {
	struct ndc_pods *p;
	struct ndc_ip seen[64]; /* addresses of accepted pods, to look up afterwards */
	size_t n_seen;
};

static void check_pod(struct sink *s, json_object *obj)
{
	struct ndc_pod_info pod;
	char err[256] = "";

	if (ndc_pod_convert(obj, &pod, err, sizeof(err)) < 0) {
		if (!err[0] || pod.n_ips || pod.n_host_ips || pod.node[0] || pod.host_network)
			abort(); /* a rejection says why and keeps nothing but the names */
		return;
	}
	if (ndc_pods_node_name_check(pod.name, NULL, 0) < 0 || !pod.ns[0] ||
	    strlen(pod.ns) > NDC_POD_NS_MAX ||
	    strspn(pod.ns, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(pod.ns) ||
	    (pod.node[0] && ndc_pods_node_name_check(pod.node, NULL, 0) < 0) ||
	    pod.n_ips > NDC_POD_MAX_IPS || pod.n_host_ips > NDC_POD_MAX_IPS)
		abort();
	for (int i = 0; i < pod.n_ips && s->n_seen < 64; i++)
		s->seen[s->n_seen++] = pod.ips[i];
}

static void on_begin(void *arg, enum ndc_k8s_kind kind)
{
	ndc_pods_watch_ops.list_begin(((struct sink *)arg)->p, kind);
}

static void on_item(void *arg, enum ndc_k8s_kind kind, json_object *obj)
{
	check_pod(arg, obj);
	ndc_pods_watch_ops.list_item(((struct sink *)arg)->p, kind, obj);
}

static void on_end(void *arg, enum ndc_k8s_kind kind)
{
	ndc_pods_watch_ops.list_end(((struct sink *)arg)->p, kind);
}

static void on_event(void *arg, enum ndc_k8s_kind kind, enum ndc_k8s_event ev, json_object *obj)
{
	check_pod(arg, obj);
	ndc_pods_watch_ops.event(((struct sink *)arg)->p, kind, ev, obj);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct ndc_k8s_watch_ops ops = {on_begin, on_item, on_end, on_event};
	struct sink s = {0};
	struct ndc_pods_stats st;
	struct ndc_pod_ident id;
	size_t chunk;

	ndc_log_level = -1; /* rejections are expected here */
	if (size < 1 || ndc_pods_new(NODE, &s.p) < 0)
		return 0;
	chunk = 1 + (data[0] & 0x1f);
	if (data[0] & 0x80)
		ndc_k8s_list_replay(NDC_K8S_NODE_PODS, (const char *)data + 1, size - 1, chunk,
				    &ops, &s);
	else
		ndc_k8s_stream_replay(NDC_K8S_NODE_PODS, (const char *)data + 1, size - 1, chunk,
				      &ops, &s);
	ndc_pods_stats(s.p, &st);
	if (st.addrs > st.pods * 2 * NDC_POD_MAX_IPS || st.pods > NDC_PODS_MAX)
		abort();
	for (size_t i = 0; i < s.n_seen; i++) {
		if (ndc_pods_lookup(s.p, &s.seen[i], &id) < 0)
			continue; /* deleted, ended, or of another node since */
		if (id.owner == NDC_POD_NODE ? strcmp(id.name, NODE) || id.ns[0]
					     : id.owner != NDC_POD_POD || !id.ns[0] ||
						   ndc_pods_node_name_check(id.name, NULL, 0) < 0)
			abort();
	}
	ndc_pods_free(s.p);
	return 0;
}
