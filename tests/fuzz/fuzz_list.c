// SPDX-License-Identifier: MIT
/*
 * Fuzz target for a list page as the API server sends it, split into chunks at arbitrary points
 * and run through the client's list parser (the scanner that cuts items out of the page as they
 * arrive, then json-c on each item and on the page's skeleton). Every item goes through the
 * object conversion the store uses, small results through a record build. The first byte picks
 * the kind and the chunk size. Invariants: list_end comes once and only for a page accepted as a
 * List; a rejected conversion says why and leaves nothing behind.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ndc/log.h>

#include "k8s/k8s.h"
#include "objects/objects.h"
#include "fuzz_records.h"
#include "records/records.h"

struct sink {
	struct ndc_k8s_objects o;
	unsigned begins, ends;
	size_t items;
};

static void on_begin(void *arg, enum ndc_k8s_kind kind)
{
	(void)kind;
	((struct sink *)arg)->begins++;
}

static void on_item(void *arg, enum ndc_k8s_kind kind, struct json_object *obj)
{
	struct sink *s = arg;
	size_t before =
	    s->o.n_namespaces + s->o.n_services + s->o.n_slices + s->o.n_pods + s->o.n_imports;
	char err[256] = "";

	(void)kind;
	if (!s->begins)
		abort(); /* items only inside a list */
	s->items++;
	if (ndc_k8s_object_add(&s->o, obj, err, sizeof(err)) < 0) {
		if (!err[0])
			abort();
		if (s->o.n_namespaces + s->o.n_services + s->o.n_slices + s->o.n_pods +
			s->o.n_imports !=
		    before)
			abort();
	}
}

static void on_end(void *arg, enum ndc_k8s_kind kind)
{
	(void)kind;
	((struct sink *)arg)->ends++;
}

/*
 * The first byte: the kind in bits 0-1 (Namespaces .. Pods), or ServiceImports with bit 7 set;
 * the chunk size in bits 2-6.
 */
static enum ndc_k8s_kind fuzz_kind(uint8_t b)
{
	return b & 0x80 ? NDC_K8S_SERVICEIMPORTS : (enum ndc_k8s_kind)(b & 3);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct ndc_k8s_watch_ops ops = {
	    .list_begin = on_begin, .list_item = on_item, .list_end = on_end};
	struct sink s = {0};
	int r;

	ndc_log_level = -1; /* rejections are expected here */
	if (size < 1)
		return 0;
	r = ndc_k8s_list_replay(fuzz_kind(data[0]), (const char *)data + 1, size - 1,
				1 + ((data[0] >> 2) & 0x1f), &ops, &s);
	if (s.ends != (r == 0 ? 1u : 0u))
		abort();
	fuzz_check_records(&s.o);
	ndc_k8s_objects_free(&s.o);
	return 0;
}
