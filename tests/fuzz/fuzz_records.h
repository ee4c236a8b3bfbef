/* SPDX-License-Identifier: MIT */
/*
 * Shared by the fuzz targets that turn API objects into records: a small object set (every
 * valid one the fuzzer made) must build into a table that answers its own apex, and the table
 * with lazy answers (SRV sets, reverse names: made at lookup) must answer every question exactly
 * as the same table rendered whole at build time (records_opts.render_all), both ways round.
 */
#ifndef NDC_FUZZ_RECORDS_H
#define NDC_FUZZ_RECORDS_H

#include <stdlib.h>
#include <string.h>

#include "objects/objects.h"
#include "records/records.h"

struct fuzz_cmp {
	const struct ndc_records *other;
	struct ndc_answer *got;
};

/* Every answer one table yields must come out of the other byte for byte. */
static inline int fuzz_cmp_fn(void *arg, const uint8_t *lname, size_t nlen, uint16_t qtype,
			      const struct ndc_answer *a)
{
	const struct fuzz_cmp *c = arg;
	const struct ndc_answer *g = c->got;

	if (!qtype)
		return 0; /* the "other type" entry: a negative answer or a CNAME, never lazy */
	if (ndc_records_lookup(c->other, lname, nlen, qtype, c->got, 65536) ||
	    g->rcode != a->rcode || g->aa != a->aa || g->ancount != a->ancount ||
	    g->nscount != a->nscount || g->arcount != a->arcount || g->min_ttl != a->min_ttl ||
	    g->len != a->len || memcmp(g->data, a->data, a->len))
		abort();
	return 0;
}

static inline void fuzz_check_records(const struct ndc_k8s_objects *o)
{
	static const uint8_t apex[] = "\7cluster\5local";
	/* ServiceImports make names in a multicluster zone of their own */
	static char *mc_zones[] = {"clusterset.local"};
	/* a fixed serial: both builds must give the same SOA whatever second they run in */
	struct ndc_records_opts ro = {.zone = "cluster.local",
				      .ttl = 5,
				      .pods = NDC_PODS_VERIFIED,
				      .serial = 1,
				      .n_mc_zones = 1,
				      .mc_zones = mc_zones};
	struct ndc_records *rec = NULL, *eager = NULL;

	if (o->n_services + o->n_slices + o->n_namespaces + o->n_pods + o->n_imports > 64 ||
	    ndc_records_build(o, &ro, &rec))
		return;
	ro.render_all = true;
	if (ndc_records_build(o, &ro, &eager)) {
		ndc_records_free(rec);
		return; /* out of memory: nothing to compare */
	}
	union {
		struct ndc_answer a;
		uint8_t b[sizeof(struct ndc_answer) + 65536];
	} *out = malloc(sizeof(*out));

	if (out) {
		struct fuzz_cmp to_lazy = {.other = rec, .got = &out->a};
		struct fuzz_cmp to_eager = {.other = eager, .got = &out->a};

		if (ndc_records_lookup(rec, apex, sizeof(apex), NDC_T_SOA, &out->a, 65536) ||
		    ndc_records_foreach(eager, fuzz_cmp_fn, &to_lazy) ||
		    ndc_records_foreach(rec, fuzz_cmp_fn, &to_eager) ||
		    ndc_records_count(rec) != ndc_records_count(eager))
			abort();
	}
	free(out);
	ndc_records_free(eager);
	ndc_records_free(rec);
}

#endif
