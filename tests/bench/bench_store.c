// SPDX-License-Identifier: MIT
/*
 * Benchmark, not a test: heap memory of the object store and of the record table at scale. A
 * snapshot (a Kubernetes List, e.g. from gen_k8s_scale.py) is fed through the store's watch
 * callbacks as lists, as the API client would, and malloc's own count is read at each stage.
 * Usage: bench_store FILE.json [EVENTS]: EVENTS > 0 then times that many watch events (Services
 * and EndpointSlices of the snapshot delivered again as MODIFIED, each Service with a new
 * ClusterIP, as k8s_bench.sh's load changes them), each a patch of the table, and counts the heap
 * they leave behind: the overlay of changed names that the next full build folds.
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <json-c/json.h>
#include "store/store.h"

static struct ndc_records *cur;
static void on_table(void *arg, struct ndc_records *rec, const struct ndc_records_patch *ch)
{
	(void)arg;
	(void)ch;
	ndc_records_free(cur);
	cur = rec;
}
static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}
static size_t used(void)
{
	struct mallinfo2 m = mallinfo2();
	return m.uordblks + m.hblkhd;
}
int main(int argc, char **argv)
{
	if (argc != 2 && argc != 3) {
		fprintf(stderr, "usage: %s SNAPSHOT.json [EVENTS]\n", argv[0]);
		return 2;
	}
	struct ndc_records_opts opts = {.zone = "cluster.local", .ttl = 5, .serial = 1};
	struct ndc_k8s_store *s;
	json_object *root = json_object_from_file(argv[1]), *items;

	if (!root || !json_object_object_get_ex(root, "items", &items)) {
		fprintf(stderr, "%s: not a List\n", argv[1]);
		return 1;
	}
	size_t n = json_object_array_length(items);
	size_t u0 = used();
	if (ndc_k8s_store_new(&opts, 0x7, on_table, NULL, &s))
		return 1;
	const char *kinds[] = {"Namespace", "Service", "EndpointSlice"};
	double tl = now();
	for (int k = 0; k < 3; k++) {
		ndc_k8s_store_ops.list_begin(s, k);
		for (size_t i = 0; i < n; i++) {
			json_object *it = json_object_array_get_idx(items, i), *kd;
			json_object_object_get_ex(it, "kind", &kd);
			if (!strcmp(json_object_get_string(kd), kinds[k]))
				ndc_k8s_store_ops.list_item(s, k, it);
		}
		size_t u = used();
		fprintf(stderr, "after listing %s: +%.1f MB\n", kinds[k], (u - u0) / 1e6);
		if (k < 2)
			ndc_k8s_store_ops.list_end(s, k);
	}
	size_t u1 = used();
	fprintf(stderr, "listing: %.2f s\n", now() - tl);
	ndc_k8s_store_ops.list_end(s, 2);
	ndc_k8s_store_flush(s, 60000);
	size_t u2 = used();
	fprintf(
	    stderr,
	    "store objects + indexes: %.1f MB; table and the rest: %.1f MB (table bytes %.1f MB)\n",
	    (u1 - u0) / 1e6, (u2 - u1) / 1e6, ndc_records_bytes(cur) / 1e6);
	size_t want_ev = argc == 3 ? strtoul(argv[2], NULL, 10) : 0, n_ev = 0;
	double t0 = now();
	for (size_t i = 0; n_ev < want_ev && i < n; i += 1 + n / (want_ev + 1)) {
		json_object *it = json_object_array_get_idx(items, i), *kd;
		json_object_object_get_ex(it, "kind", &kd);
		const char *k = json_object_get_string(kd);
		int kind = !strcmp(k, "Service") ? 1 : !strcmp(k, "EndpointSlice") ? 2 : -1;
		if (kind < 0)
			continue;
		json_object *spec;
		if (kind == 1 && json_object_object_get_ex(it, "spec", &spec)) {
			char ip[32];

			snprintf(ip, sizeof(ip), "10.250.%zu.%zu", (n_ev >> 8) & 255, n_ev & 255);
			json_object_object_add(spec, "clusterIP", json_object_new_string(ip));
			json_object_object_del(spec, "clusterIPs");
		}
		ndc_k8s_store_ops.event(s, kind, NDC_K8S_MODIFIED, it);
		n_ev++;
	}
	double t1 = now();
	ndc_k8s_store_flush(s, 60000);
	if (n_ev) {
		size_t u3 = used();

		fprintf(stderr, "%zu events: %.1f us each to apply (%.2f s to flush)\n", n_ev,
			(t1 - t0) * 1e6 / n_ev, now() - t1);
		fprintf(stderr,
			"after them: %zu names in the overlay, heap +%.1f MB (%.0f B per event)\n",
			ndc_records_overlay_size(cur), ((double)u3 - (double)u2) / 1e6,
			((double)u3 - (double)u2) / (double)n_ev);
	}
	json_object_put(root);
	malloc_trim(0);
	fprintf(stderr, "total in use after freeing the JSON: %.1f MB\n", (used() - 0) / 1e6);
	ndc_k8s_store_free(s);
	ndc_records_free(cur);
	return 0;
}
