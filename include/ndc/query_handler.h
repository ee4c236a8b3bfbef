/* SPDX-License-Identifier: MIT */
/*
 * What passes between a server that receives DNS queries (dataplane/socket/) and the handler that
 * answers them (control/query/, the resolver), so that neither includes the other: the handler's
 * verdict on a query, and the server's objects the handler holds only by pointer. What the
 * handler may do with those it gets from whoever wires the two (query.h, struct ndc_query_io).
 */
#ifndef NDC_QUERY_HANDLER_H
#define NDC_QUERY_HANDLER_H

struct ndc_socket_req; /* a query in hand on a worker: valid during the handler call */
struct ndc_pending;    /* a query detained for a later answer */

/* SEND: the reply is written; DROP: no reply; PENDING: detained, answered later. */
enum ndc_verdict { NDC_SEND = 0, NDC_DROP, NDC_PENDING };

#endif
