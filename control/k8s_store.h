/* SPDX-License-Identifier: MIT */
/*
 * The object store between the API watch and the record table. It keeps, per kind, each object
 * reduced to the fields DNS needs (struct ndc_k8s_objects of one), applies list and watch events
 * under one lock, and a rebuild thread turns the whole store into a new record table whenever it
 * changed, coalescing bursts of events into one rebuild. A relist is built aside and swapped in
 * at its end, so no name disappears while it runs. An object that fails to convert keeps its
 * last good version. Nothing is published before every expected kind has been listed once.
 */
#ifndef NDC_K8S_STORE_H
#define NDC_K8S_STORE_H

#include <stdint.h>

#include "k8s_client.h"
#include "records.h"

struct ndc_k8s_store;

/* A new table, built on the store's thread; ownership passes to the callee. */
typedef void (*ndc_k8s_store_fn)(void *arg, struct ndc_records *rec);

/* ropts (and what it points to) must outlive the store. kinds: the mask the watch lists. */
int ndc_k8s_store_new(const struct ndc_records_opts *ropts, uint32_t kinds, ndc_k8s_store_fn fn,
		      void *arg, struct ndc_k8s_store **ret);

/* Stops the rebuild thread and frees every object. Stop the watch first. NULL is fine. */
void ndc_k8s_store_free(struct ndc_k8s_store *s);

/* The watch callbacks; arg is the store. */
extern const struct ndc_k8s_watch_ops ndc_k8s_store_ops;

struct ndc_k8s_store_stats {
	uint64_t objects;  /* in the store now */
	uint64_t events;   /* applied */
	uint64_t rejected; /* objects that failed to convert (last good state kept) */
	uint64_t rebuilds;
	uint64_t last_build_us; /* duration of the last rebuild */
	uint64_t
	    last_latency_us; /* first event of the last batch until its table was handed over */
	uint64_t max_latency_us;
};
void ndc_k8s_store_stats(struct ndc_k8s_store *s, struct ndc_k8s_store_stats *ret);

#endif
