/* SPDX-License-Identifier: MIT */
/*
 * The query path of the socket server: parse, answer the cluster zone from the record table,
 * answer repeat queries from the cache, forward the rest. One record model serves every reader.
 */
#ifndef NDC_RESOLVER_H
#define NDC_RESOLVER_H

#include <stddef.h>
#include <stdint.h>

#include "query/query.h"
#include "query/forwarder.h"
#include "records/records.h"
#include "socket/socket.h"

struct ndc_resolver;

struct ndc_resolver_stats {
	uint64_t queries, local, cache_hits, forwarded, servfail, errors, dropped;
};

/* records, cache and fwd stay owned by the caller and must outlive the resolver; cache and fwd
 * may be NULL (then every non-local name gets SERVFAIL). */
int ndc_resolver_new(const struct ndc_records *records, struct ndc_cache *cache,
		     struct ndc_forwarder *fwd, struct ndc_resolver **ret);
void ndc_resolver_free(struct ndc_resolver *r);

/*
 * Installs a new record table (NULL: none) and returns the old one once no query can still be
 * reading it, for the caller to free. Writers only, one at a time.
 */
const struct ndc_records *ndc_resolver_set_records(struct ndc_resolver *r,
						   const struct ndc_records *rec);

/* The ndc_server_handler: ctx is the struct ndc_resolver. */
enum ndc_verdict ndc_resolver_handle(void *ctx, struct ndc_server_req *req, const uint8_t *msg,
				     size_t len, uint8_t *out, size_t cap, size_t *ret_len);

void ndc_resolver_stats(struct ndc_resolver *r, struct ndc_resolver_stats *ret);

#endif
