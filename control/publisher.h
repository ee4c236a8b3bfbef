/* SPDX-License-Identifier: MIT */
/*
 * Keeps the fast-path table equal to what the socket path answers: every cluster record from the
 * record table, and every cacheable upstream answer as the cache stores and drops it. Expired
 * upstream answers are deleted from the table by a sweep once a second (the fast path already
 * passes them to user space from the moment they expire; the sweep frees their slots). What it
 * keeps per upstream answer is bounded by the cache: it goes when the cache drops the answer.
 */
#ifndef NDC_PUBLISHER_H
#define NDC_PUBLISHER_H

#include <stdint.h>

#include <ndc/answer_table.h>

#include "query/query.h"
#include "records/records.h"

struct ndc_publisher;

struct ndc_publisher_stats {
	uint64_t published;  /* entries written */
	uint64_t too_big;    /* answers left to user space: too big or too long a name */
	uint64_t table_full; /* entries that did not fit the table */
	uint64_t passed;  /* names marked NDC_FP_V_PASS because one of their answers is missing */
	uint64_t removed; /* cache drops and expiries deleted */
	uint64_t tracked; /* gauge: upstream answers whose expiry is tracked (<= cache entries) */
	uint64_t queue_depth;	/* gauge: hook publishes and deletes not yet applied */
	uint64_t queue_dropped; /* puts not published: queue full (or waited over 1 s) */
	uint64_t queue_purges;	/* deletes that did not fit: every upstream answer taken out */
};

/*
 * The cache hook's queue bounds (ndc_publisher_queue_limits): puts may fill 3/4 of either, the
 * rest is kept for deletes. At 10,000 misses a second 16,384 entries are over a second of work.
 */
#define NDC_PUBLISHER_QUEUE_ENTRIES 16384
#define NDC_PUBLISHER_QUEUE_BYTES (8u << 20)

/*
 * Starts the sweep thread. The publisher writes one table through ops (<ndc/answer_table.h>:
 * ndc_fastpath_answer_table with a struct ndc_fp, ndc_dpdk_answer_table with a struct ndc_dpdk)
 * and never asks which. table stays owned by the caller and must outlive the publisher.
 * -EOPNOTSUPP when ops lacks a writing operation (a backend not in this build).
 */
int ndc_publisher_new(const struct ndc_answer_table_ops *ops, void *table,
		      struct ndc_publisher **ret);

/*
 * Publishes every answer of r, the NXDOMAIN template, then marks the table synced, unless some
 * name could not be covered (its pass marker did not fit): then NXDOMAIN synthesis stays off and
 * misses go to user space. Returns 0 or -errno of a failure other than a full table.
 */
int ndc_publisher_load_records(struct ndc_publisher *p, const struct ndc_records *r);

/*
 * Replaces the table's cluster records with now's: publishes now (as load_records), then removes
 * what old had and now does not. old may be NULL.
 */
int ndc_publisher_update_records(struct ndc_publisher *p, const struct ndc_records *old,
				 const struct ndc_records *now);

/*
 * The same for the names of a patch only: each one's answers in now go in first, then what old
 * had of it and now has not leaves. A name that no longer exists loses every entry, so the
 * kernel answers NXDOMAIN for it from then on.
 */
int ndc_publisher_update_names(struct ndc_publisher *p, const struct ndc_records *old,
			       const struct ndc_records *now,
			       const struct ndc_records_patch *changed);

/*
 * The ndc_cache_hook_fn to give ndc_cache_set_hook, with the publisher as arg. It never writes
 * the table (the cache calls it under a shard's lock, and a write may rebuild the table, which
 * waits for RCU grace periods): it queues a copy for the drain thread, in the cache's order. When
 * the queue is full the key's entry is deleted instead, and when a delete does not fit either,
 * every upstream answer is (after what is queued): the table may lack an answer, never hold a
 * wrong one. The table lags the cache by the queue (microseconds; a rebuild's tens of ms).
 */
void ndc_publisher_cache_hook(void *arg, const struct ndc_answer *a, const uint8_t *lname,
			      size_t nlen, uint16_t qtype, uint16_t qclass, uint32_t ttl);

/* Waits until every hook call made before it is in the table (tests; free does it too). */
void ndc_publisher_flush(struct ndc_publisher *p);

/* Other queue bounds than NDC_PUBLISHER_QUEUE_*: for tests. */
void ndc_publisher_queue_limits(struct ndc_publisher *p, uint32_t max_entries, uint64_t max_bytes);

void ndc_publisher_stats(struct ndc_publisher *p, struct ndc_publisher_stats *ret);

/* ndcache_fastpath_table_full_total, ndcache_fastpath_too_big_total, ndcache_kernel_expiry_tracked,
 * ndcache_publisher_queue_*: an ndc_metrics_fn (metrics/metrics.h) over a publisher. */
struct ndc_metrics_buf;
void ndc_publisher_metrics(void *pub, struct ndc_metrics_buf *b);

/* ---- kernel hit counters, for cache.prefetch (issue 22) ---- */

/*
 * The number of times the kernel answered the entry published for (lowercase wire name, qtype)
 * since it was last published, saturating at 255: 0 with *ret_hits; -ENOENT when no such entry
 * is in the table; -EOPNOTSUPP when its table counts no hits (DPDK) or there is none (socket
 * mode: p NULL). Any thread.
 */
int ndc_publisher_kernel_hits(struct ndc_publisher *p, const uint8_t *lname, size_t nlen,
			      uint16_t qtype, uint32_t *ret_hits);

/*
 * Applies what is queued, then stops the threads; the table keeps its entries (ndc_fastpath_close
 * removes it). The cache's hook must be unset first. NULL is fine.
 */
void ndc_publisher_free(struct ndc_publisher *p);

#endif
