/* SPDX-License-Identifier: MIT */
/*
 * Shared by the fuzz targets that turn API objects into records: a small object set (every
 * valid one the fuzzer made) must build into a table that answers its own apex.
 */
#ifndef NDC_FUZZ_RECORDS_H
#define NDC_FUZZ_RECORDS_H

#include <stdlib.h>

#include "k8s_objects.h"
#include "records.h"

static inline void fuzz_check_records(const struct ndc_k8s_objects *o)
{
	static const uint8_t apex[] = "\7cluster\5local";
	struct ndc_records_opts ro = {.zone = "cluster.local", .ttl = 5, .pods = NDC_PODS_VERIFIED};
	struct ndc_records *rec = NULL;

	if (o->n_services + o->n_slices + o->n_namespaces + o->n_pods > 64 ||
	    ndc_records_build(o, &ro, &rec))
		return;
	union {
		struct ndc_answer a;
		uint8_t b[sizeof(struct ndc_answer) + 65536];
	} *out = malloc(sizeof(*out));

	if (out && ndc_records_lookup(rec, apex, sizeof(apex), NDC_T_SOA, &out->a, 65536))
		abort();
	free(out);
	ndc_records_free(rec);
}

#endif
