// SPDX-License-Identifier: MIT
/*
 * Fuzz target for what the API server sends: a watch stream, split into chunks at arbitrary
 * points, parsed by the client's stream parser; every event's object goes through the same
 * conversion the object store uses, and small results through a full record build. The first
 * byte picks the kind and the chunk size. Invariants checked: conversion either adds an object
 * or fails with a message; the record table answers its own apex.
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
	size_t events;
};

static void on_event(void *arg, enum ndc_k8s_kind kind, enum ndc_k8s_event ev,
		     struct json_object *obj)
{
	struct sink *s = arg;
	size_t before =
	    s->o.n_namespaces + s->o.n_services + s->o.n_slices + s->o.n_pods + s->o.n_imports;
	char err[256] = "";

	(void)kind;
	s->events++;
	if (ev == NDC_K8S_DELETED)
		return;
	if (ndc_k8s_object_add(&s->o, obj, err, sizeof(err)) < 0) {
		if (!err[0])
			abort(); /* a rejection must say why */
		if (s->o.n_namespaces + s->o.n_services + s->o.n_slices + s->o.n_pods +
			s->o.n_imports !=
		    before)
			abort(); /* and must not leave half an object behind */
	}
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
	static const struct ndc_k8s_watch_ops ops = {.event = on_event};
	struct sink s = {0};

	ndc_log_level = -1; /* rejections are expected here */
	if (size < 1)
		return 0;
	ndc_k8s_stream_replay(fuzz_kind(data[0]), (const char *)data + 1, size - 1,
			      1 + ((data[0] >> 2) & 0x1f), &ops, &s);
	fuzz_check_records(&s.o);
	ndc_k8s_objects_free(&s.o);
	return 0;
}
