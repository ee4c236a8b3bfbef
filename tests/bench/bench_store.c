// SPDX-License-Identifier: MIT
/*
 * Benchmark, not a test: heap memory of the object store and of the record table at scale. A
 * snapshot (a Kubernetes List, e.g. from gen_k8s_scale.py) is fed through the store's watch
 * callbacks as lists, as the API client would, and malloc's own count is read at each stage.
 * Usage: bench_store FILE.json
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <json-c/json.h>
#include "k8s_store.h"

static struct ndc_records *cur;
static void on_table(void *arg, struct ndc_records *rec, const struct ndc_records_patch *ch)
{
	(void)arg;
	(void)ch;
	ndc_records_free(cur);
	cur = rec;
}
static size_t used(void)
{
	struct mallinfo2 m = mallinfo2();
	return m.uordblks + m.hblkhd;
}
int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s SNAPSHOT.json\n", argv[0]);
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
	ndc_k8s_store_ops.list_end(s, 2);
	ndc_k8s_store_flush(s, 60000);
	size_t u2 = used();
	fprintf(
	    stderr,
	    "store objects + indexes: %.1f MB; table and the rest: %.1f MB (table bytes %.1f MB)\n",
	    (u1 - u0) / 1e6, (u2 - u1) / 1e6, ndc_records_bytes(cur) / 1e6);
	json_object_put(root);
	malloc_trim(0);
	fprintf(stderr, "total in use after freeing the JSON: %.1f MB\n", (used() - 0) / 1e6);
	ndc_k8s_store_free(s);
	ndc_records_free(cur);
	return 0;
}
