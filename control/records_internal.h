/* SPDX-License-Identifier: MIT */
/*
 * Private to libndc_records: the build state shared by its two stages. record_build.c turns the
 * object store into pending RRs grouped by owner name (struct ndc_rec_bld); records.c renders
 * each pending RRset once into the immutable table and answers from it. Nothing here is
 * reachable from outside the library.
 */
#ifndef NDC_RECORDS_INTERNAL_H
#define NDC_RECORDS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ndc/dns_wire.h>

#include "k8s_objects.h"
#include "records.h"

/* SRV weight of a service's own records; headless endpoints share it at render time. */
#define NDC_REC_SRV_WEIGHT 100
/* SOA RDATA: MNAME, RNAME, then SERIAL REFRESH RETRY EXPIRE MINIMUM (RFC 1035 3.3.13). */
#define NDC_REC_SOA_MAX (2 * NDC_NAME_MAX + 20)

struct ndc_rec_chunk;

/* One pending RR. */
struct ndc_rec_rr {
	struct ndc_rec_rr *next;
	uint16_t type;
	uint16_t rdlen;
	bool split_weight; /* SRV: weight is 100 / (records in the answer), set at render */
	uint8_t rdata[];
};

/* One owner name and its pending RRs, in the order they were added. */
struct ndc_rec_node {
	struct ndc_rec_rr *head;
	struct ndc_rec_rr *tail;
	uint32_t off; /* in the blob, once rendered */
	uint32_t hash;
	uint8_t nlen;
	uint8_t name[];
};

/*
 * Build scratch: an arena (freed whole by ndc_rec_bld_free) and an open-addressing table of owner
 * names, tab[tcap] with tcount used. The error is sticky: the first failure is kept in err and
 * later additions do nothing, so the caller checks once after adding everything.
 */
struct ndc_rec_bld {
	const struct ndc_records_opts *opts;
	struct ndc_rec_chunk *chunks;
	size_t arena_bytes;
	struct ndc_rec_node **tab;
	size_t tcap;
	size_t tcount;
	struct ndc_rec_rr **vec; /* one RRset being rendered */
	size_t vcap;
	int err;
	size_t skipped; /* objects whose names are not valid DNS names */
	char first_skip[160];
	size_t zlen, svczlen, podzlen;
	uint8_t zone[NDC_NAME_MAX]; /* lowercase wire names */
	uint8_t svcz[NDC_NAME_MAX]; /* svc.<zone> */
	uint8_t podz[NDC_NAME_MAX]; /* pod.<zone> */
};

/* FNV-1a folded to 32 bits; build and lookup must hash names alike. Inline: it is per query. */
static inline uint32_t ndc_rec_name_hash(const uint8_t *n, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < len; i++) {
		h ^= n[i];
		h *= 0x100000001b3ULL;
	}
	return (uint32_t)(h ^ (h >> 32));
}

/*
 * Zeroes b and sets it up for opts. -EINVAL for a zone that is not a valid name, or -ENOMEM; on
 * failure b holds nothing to free.
 */
int ndc_rec_bld_init(struct ndc_rec_bld *b, const struct ndc_records_opts *opts);

/* Frees the scratch; b may be partly initialised. */
void ndc_rec_bld_free(struct ndc_rec_bld *b);

/*
 * The apex: SOA, NS, the NS target's addresses, the dns-version TXT and the svc/pod non-terminals.
 * The SOA RDATA is also written to soa (NDC_REC_SOA_MAX bytes) for the negative answers. Failure
 * is left in b->err.
 */
void ndc_rec_add_apex(struct ndc_rec_bld *b, uint8_t *soa, size_t *ret_soa_len);

/*
 * Namespaces, services with their EndpointSlices, and pods (when verified) of o. Returns 0 or
 * -ENOMEM for its own temporary index; failures while adding are left in b->err.
 */
int ndc_rec_add_objects(struct ndc_rec_bld *b, const struct ndc_k8s_objects *o);

/* The pending node named n (lowercase wire name), or NULL. */
struct ndc_rec_node *ndc_rec_find(const struct ndc_rec_bld *b, const uint8_t *n, size_t len);

#endif
