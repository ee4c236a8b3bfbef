/* SPDX-License-Identifier: MIT */
/*
 * Who asks what (issue 37 items 2 and 3): per-client counts of the socket path and a
 * heavy-hitters sketch of the names asked, in fixed memory, for /debug/top and `ndcache top`.
 *
 * Clients: a table of NDC_TOP_CLIENTS source addresses (a node runs tens of pods, kubelet's
 * maxPods is 110), split into NDC_TOP_STRIPES lock stripes picked by a hash of the address. A new
 * address takes a free slot of its stripe, else the slot of the client seen least recently if
 * that one has been idle for NDC_TOP_IDLE_MS (a pod that went away); else it is counted in the
 * "other" row (addr family 0) and in overflow: counts are never lost, only their attribution.
 *
 * Names: Space-Saving (Metwally, Agrawal, El Abbadi 2005) with NDC_TOP_NAMES counters over every
 * client, and NDC_TOP_CLIENT_NAMES per client: a name seen is counted if it has a counter, else
 * it replaces the smallest counter and inherits its count (its error bound). Any name asked more
 * than total/k times is in the sketch; its count is over by at most its error.
 *
 * Thread-safe: a client's counts are atomics (no lock once its address has a slot); the names
 * sketches are updated under a stripe's mutex, tried and never waited for (a name that finds it
 * taken goes unsketched, counted in names_skipped). The socket path calls it once per answered
 * query. No allocation after ndc_top_new. Memory: about
 * 1.4 MB (the per-client sketches' names, 512 x 8 x 272 bytes, and the stripes', 16 x 64 x 272).
 */
#ifndef NDC_TOP_H
#define NDC_TOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ndc/ip.h>

#define NDC_TOP_CLIENTS 512 /* addresses tracked (bound), NDC_TOP_STRIPES x 32 */
#define NDC_TOP_STRIPES 16
#define NDC_TOP_IDLE_MS 300000 /* a slot idle this long may be given to a new address */
#define NDC_TOP_NAMES 64       /* Space-Saving counters over every client */
#define NDC_TOP_CLIENT_NAMES 8 /* per client */
#define NDC_TOP_NAME_TEXT 1024 /* a name as text, every byte escaped (\DDD) at worst */

/* What answered a query of the socket path (one per query, at its answer). */
enum ndc_top_source {
	NDC_TOP_LOCAL,	   /* the record table */
	NDC_TOP_CACHE,	   /* the cache */
	NDC_TOP_FORWARDED, /* sent upstream (its answer's rcode counted too) */
	NDC_TOP_LIMITED,   /* forward.per_client refused it (SERVFAIL) */
	NDC_TOP_OTHER,	   /* refused, malformed, errors */
};

struct ndc_top_counts {
	uint64_t queries;	  /* every query seen (socket path + kernel) */
	uint64_t kernel_answered; /* answered in the kernel (merged rows) */
	uint64_t kernel_passed;	  /* passed by the kernel to the sockets (merged rows) */
	uint64_t local, cache, forwarded, limited;
	uint64_t nxdomain, servfail;
};

/*
 * A row from another counter of the same clients (the kernel's per-client table, issue 37 item
 * 2: dataplane/fastpath's struct ndc_fp_client carries the same four counts): merged into a
 * snapshot by ndc_top_snapshot. Cumulative since that counter's start, as the table's own are.
 */
struct ndc_top_ext_row {
	struct ndc_ip addr;
	uint64_t queries, answered, nxdomain, passed;
};

struct ndc_top_name {
	uint8_t lname[255]; /* wire form as the query path parsed it (ndc_top_name_text) */
	uint8_t nlen;
	uint32_t hash;	       /* of lname: most counters are passed over on it alone */
	uint64_t count, error; /* count over-estimates by at most error */
};

struct ndc_top_client {
	struct ndc_ip addr; /* family 0: the "other" row (clients over NDC_TOP_CLIENTS) */
	struct ndc_top_counts c;
	size_t n_names;
	struct ndc_top_name names[NDC_TOP_CLIENT_NAMES]; /* most asked first */
};

/* A copy of the table at one moment (ndc_top_snapshot), for rendering off the query path. */
struct ndc_top_view {
	uint64_t mono_ms;	/* CLOCK_MONOTONIC when taken */
	uint64_t overflow;	/* queries counted in the "other" row */
	uint64_t names_total;	/* names seen by the sketches */
	uint64_t names_skipped; /* names not sketched: the stripe's lock was taken */
	size_t n_clients;
	struct ndc_top_client clients[NDC_TOP_CLIENTS + 1]; /* queries, most first */
	size_t n_names;
	struct ndc_top_name names[NDC_TOP_NAMES]; /* most asked first */
};

struct ndc_top;

int ndc_top_new(struct ndc_top **ret);
void ndc_top_free(struct ndc_top *t); /* NULL is fine */

/*
 * One query of the socket path answered: from addr, for the wire name lname (nlen bytes, as
 * parsed; NULL when the query had none), answered by src with rcode (the reply's, 0..15; -1:
 * no reply). t NULL: nothing.
 */
void ndc_top_count(struct ndc_top *t, const struct ndc_ip *addr, const uint8_t *lname, size_t nlen,
		   enum ndc_top_source src, int rcode);

/* A name asked by addr that the socket path never saw (a sampled kernel answer): sketches only. */
void ndc_top_name_seen(struct ndc_top *t, const struct ndc_ip *addr, const uint8_t *lname,
		       size_t nlen);

/*
 * The merge point of other counters (the kernel's): fills *ret (allocated, free it) with the
 * table's clients plus ext's n rows added to the row of the same address (a new row when the
 * table has none; past NDC_TOP_CLIENTS in total, the "other" row), sorted by queries. A row's
 * queries add to queries, answered to kernel_answered, nxdomain to nxdomain, passed to
 * kernel_passed: a query the kernel passed is counted again by the socket path, so the total of a
 * client is queries - kernel_passed. 0, -ENOMEM.
 */
int ndc_top_snapshot(struct ndc_top *t, const struct ndc_top_ext_row *ext, size_t n,
		     struct ndc_top_view **ret);

/* A wire name (validated labels, at most 255 bytes) in presentation form, escaped so that the
 * text holds only printable ASCII: out NDC_TOP_NAME_TEXT bytes. */
void ndc_top_name_text(const uint8_t *lname, size_t nlen, char *out);

#endif
