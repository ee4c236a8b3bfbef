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

#include "k8s_client.h"
#include "k8s_objects.h"
#include "records.h"

struct sink {
	struct ndc_k8s_objects o;
	size_t events;
};

static void on_event(void *arg, enum ndc_k8s_kind kind, enum ndc_k8s_event ev,
		     struct json_object *obj)
{
	struct sink *s = arg;
	size_t before = s->o.n_namespaces + s->o.n_services + s->o.n_slices + s->o.n_pods;
	char err[256] = "";

	(void)kind;
	s->events++;
	if (ev == NDC_K8S_DELETED)
		return;
	if (ndc_k8s_object_add(&s->o, obj, err, sizeof(err)) < 0) {
		if (!err[0])
			abort(); /* a rejection must say why */
		if (s->o.n_namespaces + s->o.n_services + s->o.n_slices + s->o.n_pods != before)
			abort(); /* and must not leave half an object behind */
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct ndc_k8s_watch_ops ops = {.event = on_event};
	static const uint8_t apex[] = "\7cluster\5local";
	struct ndc_records_opts ro = {.zone = "cluster.local", .ttl = 5, .pods = NDC_PODS_VERIFIED};
	struct sink s = {0};
	struct ndc_records *rec = NULL;

	ndc_log_level = -1; /* rejections are expected here */
	if (size < 1)
		return 0;
	ndc_k8s_stream_replay((enum ndc_k8s_kind)(data[0] & 3), (const char *)data + 1, size - 1,
			      1 + (data[0] >> 2), &ops, &s);
	if (s.o.n_services + s.o.n_slices + s.o.n_namespaces + s.o.n_pods <= 64 &&
	    ndc_records_build(&s.o, &ro, &rec) == 0) {
		union {
			struct ndc_answer a;
			uint8_t b[sizeof(struct ndc_answer) + 65536];
		} *out = malloc(sizeof(*out));

		if (out && ndc_records_lookup(rec, apex, sizeof(apex), NDC_T_SOA, &out->a, 65536))
			abort();
		free(out);
		ndc_records_free(rec);
	}
	ndc_k8s_objects_free(&s.o);
	return 0;
}
