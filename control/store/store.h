/* SPDX-License-Identifier: MIT */
/*
 * The object store between the API watch and the record table. It keeps, per kind, each object
 * reduced to the fields DNS needs (one block each: ndc_k8s_object_convert) and applies list and
 * watch events under one lock. Each event becomes a patch of just the names it touches (the record
 * builder run on the objects that make those names); a commit thread applies pending patches as
 * new versions of the table, coalescing bursts. A relist is built aside and swapped in at its
 * end, so no name disappears while it runs, then the table is rebuilt whole. An object that
 * fails to convert keeps its last good version. Nothing is published before every expected kind
 * has been listed once.
 */
#ifndef NDC_K8S_STORE_H
#define NDC_K8S_STORE_H

#include <stdint.h>

#include "k8s/k8s.h"
#include "records/records.h"

struct ndc_k8s_store;

/*
 * A new table, made on the store's thread; ownership passes to the callee. changed: the names
 * that differ from the table handed over before (the patch is the store's and valid during the
 * call only), or NULL when anything may have changed (the first table, a relist).
 */
typedef void (*ndc_k8s_store_fn)(void *arg, struct ndc_records *rec,
				 const struct ndc_records_patch *changed);

/* ropts (and what it points to) must outlive the store. kinds: the mask the watch lists. */
int ndc_k8s_store_new(const struct ndc_records_opts *ropts, uint32_t kinds, ndc_k8s_store_fn fn,
		      void *arg, struct ndc_k8s_store **ret);

/* Stops the rebuild thread and frees every object. Stop the watch first. NULL is fine. */
void ndc_k8s_store_free(struct ndc_k8s_store *s);

/*
 * Waits until every change applied so far has been handed over (or, before every kind has been
 * listed, returns at once). -ETIMEDOUT after timeout_ms. For tests and benchmarks.
 */
int ndc_k8s_store_flush(struct ndc_k8s_store *s, unsigned timeout_ms);

/*
 * The overlay of changed names is folded into a fresh base once it holds more than half the
 * base's names plus min_names (default 16384). Tests lower it to exercise the fold.
 */
void ndc_k8s_store_set_compact(struct ndc_k8s_store *s, size_t min_names);

/* The watch callbacks; arg is the store. */
extern const struct ndc_k8s_watch_ops ndc_k8s_store_ops;

/* Upper bounds (microseconds) of the programming-latency histogram's buckets; the last is +Inf. */
#define NDC_K8S_LAT_BUCKETS 12
extern const uint64_t ndc_k8s_lat_bounds_us[NDC_K8S_LAT_BUCKETS];

struct ndc_k8s_store_stats {
	uint64_t objects;	/* in the store now */
	uint64_t events;	/* applied */
	uint64_t rejected;	/* objects that failed to convert (last good state kept) */
	uint64_t rebuilds;	/* full builds: first sync, relists, overlay folds */
	uint64_t patches;	/* incremental versions handed over */
	uint64_t last_build_us; /* duration of the last rebuild */
	uint64_t
	    last_latency_us; /* first event of the last batch until its table was handed over */
	uint64_t max_latency_us;
	/* Each change, from its arrival to its table handed over (answers served from it). */
	uint64_t lat_hist[NDC_K8S_LAT_BUCKETS];
	uint64_t lat_sum_us, lat_count;
};
void ndc_k8s_store_stats(struct ndc_k8s_store *s, struct ndc_k8s_store_stats *ret);

/* ndcache_k8s_objects, ndcache_records_*, ndcache_programming_latency_*: an ndc_metrics_fn
 * (metrics/metrics.h) over a store. */
struct ndc_metrics_buf;
void ndc_k8s_store_metrics(void *store, struct ndc_metrics_buf *b);

#endif
