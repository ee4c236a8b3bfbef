/* SPDX-License-Identifier: MIT */
/*
 * Private to control/query: the forwarder's route table (routes.c), which forwarder.c builds,
 * matches names against and compares (plain data, immutable once built, shared by reference
 * count between the thread that reconfigures the forwarder and the forwarder thread); and the
 * query log's lines (querylog.c), which resolver.c writes.
 */
#ifndef NDC_QUERY_INTERNAL_H
#define NDC_QUERY_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <ndc/dns_wire.h>

#include "query/query.h"

/* One zone and where its names go: srv[] are indexes into the table's servers. */
struct ndc_route {
	uint8_t zone[NDC_NAME_MAX]; /* lowercase wire; the root ("\0") for the default route */
	uint8_t zlen;
	uint8_t n_up;
	uint8_t srv[NDC_FWD_MAX_UPSTREAMS];
};

struct ndc_routes {
	atomic_uint refs;
	size_t n_routes; /* longest zone first; the default route (the root) is always last */
	struct ndc_route *routes;
	size_t n_servers; /* distinct addresses of every route, in order of first appearance */
	struct sockaddr_storage servers[NDC_FWD_MAX_SERVERS];
};

/*
 * Builds the table of opts (upstreams: the default route; routes: the zones), one reference
 * held. -EINVAL: a zone that is not a name, the same zone twice, an address that is not IPv4 or
 * IPv6; -E2BIG: more than NDC_FWD_MAX_UPSTREAMS servers in a route, NDC_FWD_MAX_ROUTES routes
 * or NDC_FWD_MAX_SERVERS distinct servers; -ENOMEM.
 */
int ndc_routes_new(const struct ndc_forwarder_opts *opts, struct ndc_routes **ret);

/* Takes a reference / drops one (the last frees). NULL is fine for both. */
struct ndc_routes *ndc_routes_ref(struct ndc_routes *t);
void ndc_routes_unref(struct ndc_routes *t);

/* The route of a lowercase wire name: the longest zone it is in, else the default. */
const struct ndc_route *ndc_routes_match(const struct ndc_routes *t, const uint8_t *lname,
					 size_t nlen);

/* Whether two routes (of tables a and b) send to the same servers in the same order. */
bool ndc_routes_same(const struct ndc_routes *a, const struct ndc_route *ra,
		     const struct ndc_routes *b, const struct ndc_route *rb);

/* "192.0.2.10:53" or "[2001:db8::53]:53", for logs and metric labels. */
void ndc_routes_addr_name(const struct sockaddr_storage *ss, char *buf, size_t len);

/* ---- query logging (querylog.c), for the resolver ---- */

/* A sampled query: what its line needs besides the query and the reply. */
struct ndc_qlog {
	bool on;
	bool tcp;
	uint16_t size; /* of the query */
	uint64_t t0_us;
	struct sockaddr_storage peer;
};

/* Whether this query is one of ppm per million (a thread-local generator, no lock). */
bool ndc_qlog_sampled(uint32_t ppm);

/* Starts lg for a query of len bytes in req: the time, the client. */
void ndc_qlog_begin(struct ndc_qlog *lg, const struct ndc_server_req *req, size_t len);

/* The line, for a reply of rlen bytes (0: none was sent) that source gave. */
void ndc_qlog_end(const struct ndc_qlog *lg, const struct ndc_query *q, const uint8_t *reply,
		  size_t rlen, const char *source);

#endif
