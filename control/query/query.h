/* SPDX-License-Identifier: MIT */
/*
 * Cache of upstream answers, positive and negative (RFC 2308), bounded in entries and bytes with
 * LRU eviction, expired entries kept for serve-stale (RFC 8767) until stale_max. Thread-safe:
 * sharded, each shard under its own short mutex; no allocation on a hit.
 */
#ifndef NDC_CACHE_H
#define NDC_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ndc/dns_wire.h>

struct ndc_cache;

struct ndc_cache_opts {
	uint32_t max_entries;
	uint64_t max_bytes; /* bytes of entries (key + answer + bookkeeping) */
	uint32_t max_ttl;   /* longer TTLs are capped */
	uint32_t neg_max_ttl;
	uint32_t stale_max; /* seconds past expiry an entry may still be served stale */
};

struct ndc_cache_stats {
	uint64_t hits, misses, stale_hits, inserts, evictions;
	uint64_t entries, bytes;
};

int ndc_cache_new(const struct ndc_cache_opts *opts, struct ndc_cache **ret);
void ndc_cache_free(struct ndc_cache *c);

/*
 * Stores a for (lname, qtype, qclass) for ttl seconds from now_ms (0: not stored, returns 0),
 * replacing any entry for the key. ttl is capped at max_ttl (neg_max_ttl for NXDOMAIN/NODATA,
 * i.e. rcode NXDOMAIN or NOERROR with ancount 0). -ENOMEM, -E2BIG if the entry alone is bigger
 * than max_bytes.
 */
int ndc_cache_put(struct ndc_cache *c, const uint8_t *lname, size_t nlen, uint16_t qtype,
		  uint16_t qclass, const struct ndc_answer *a, uint32_t ttl, uint64_t now_ms);

/*
 * Looks up the key. Returns 0 for a fresh entry, copied into out (cap bytes of data), with
 * *ret_age the whole seconds since it was stored (subtract it from every TTL). With allow_stale,
 * an entry expired less than stale_max ago is returned as -ESTALE (copied the same way). Else
 * -ENOENT; -ENOSPC if out is too small.
 */
int ndc_cache_get(struct ndc_cache *c, const uint8_t *lname, size_t nlen, uint16_t qtype,
		  uint16_t qclass, uint64_t now_ms, bool allow_stale, struct ndc_answer *out,
		  size_t cap, uint32_t *ret_age);

void ndc_cache_stats(struct ndc_cache *c, struct ndc_cache_stats *ret);

/*
 * Told of every change, under the shard's lock (keep it short, never call back into the cache):
 * a stored with ttl seconds to live, or a NULL when the key left the cache (evicted, or dead past
 * stale_max). A replaced entry is reported as the new put only. For the fast-path publisher.
 */
typedef void (*ndc_cache_hook_fn)(void *arg, const struct ndc_answer *a, const uint8_t *lname,
				  size_t nlen, uint16_t qtype, uint16_t qclass, uint32_t ttl);

/* Sets the hook; call before the cache is used by other threads. */
void ndc_cache_set_hook(struct ndc_cache *c, ndc_cache_hook_fn fn, void *arg);

/* Monotonic milliseconds, the clock every now_ms argument uses. */
uint64_t ndc_now_ms(void);

#endif
