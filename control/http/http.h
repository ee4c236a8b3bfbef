/* SPDX-License-Identifier: MIT */
/*
 * Tiny HTTP/1.1 server for /metrics (Prometheus text exposition format 0.0.4), /health and
 * /ready. One thread with a poll loop over non-blocking sockets; at most NDC_HTTP_CONN_MAX
 * connections at once (more wait in the listen backlog). Every response carries
 * "Connection: close" and the connection is closed after it: scrapers and probes send one request
 * per connection anyway, and it keeps the server free of keep-alive and pipelining state.
 *
 * Requests: GET and HEAD (RFC 9110 §9.1 requires both of a general-purpose server); other methods
 * get 405. The request line and headers must arrive within NDC_HTTP_TIMEOUT_MS of the accept and
 * fit in NDC_HTTP_HEADER_MAX bytes (else 431), otherwise the connection is closed without an
 * answer. Malformed requests get 400, HTTP major versions other than 1 get 505. Request bodies
 * are never interpreted (nothing here takes one) and the query string is ignored.
 *   /metrics  200 "text/plain; version=0.0.4", the metrics callback's output written by the
 *             encoder (metrics/metrics.h; 500 if it failed)
 *   /health   200 "ok\n" while the server thread runs (the process is alive)
 *   /ready    200 "ready\n" after ndc_http_set_ready(h, true), else 503 "not ready\n"; also 503
 *             "not ready: REASON\n" while the unready check (ndc_http_set_unready_check) says so
 *   pages     added with ndc_http_add_page (the agent's /debug/top)
 *   other     404
 */
#ifndef NDC_HTTP_H
#define NDC_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "metrics/metrics.h" /* what /metrics serves: ndc_metrics_fn, sources */

#define NDC_HTTP_CONN_MAX 64
#define NDC_HTTP_HEADER_MAX 8192 /* request line + headers, bytes */
#define NDC_HTTP_TIMEOUT_MS 5000 /* to receive the request; again to send the response */

struct ndc_http;

/*
 * Binds listen, "a.b.c.d:port" or "[v6]:port" (numeric addresses only: no name lookups from a
 * DNS cache; port 0 picks an ephemeral port, see ndc_http_port) and starts the server thread,
 * not ready. fn may be NULL (empty /metrics). Returns 0, -EINVAL for a malformed address, or the
 * socket/bind/listen error (-EADDRINUSE, -EADDRNOTAVAIL, ...), logged once with the address.
 */
int ndc_http_start(const char *listen, ndc_metrics_fn fn, void *arg, struct ndc_http **ret);

/* The bound port (host order). */
uint16_t ndc_http_port(const struct ndc_http *h);

/* What /ready reports; any thread, at any time. */
void ndc_http_set_ready(struct ndc_http *h, bool ready);

/*
 * A second condition for /ready, asked on the HTTP thread at each request once ready is set:
 * true with a one-line reason in why (len bytes, NUL-terminated) while the agent cannot serve
 * though its table is built (no upstream left, say). Any thread, at any time; NULL removes it.
 */
typedef bool (*ndc_http_unready_fn)(void *arg, char *why, size_t len);
void ndc_http_set_unready_check(struct ndc_http *h, ndc_http_unready_fn fn, void *arg);

/*
 * Adds a section to /metrics, written after the start's fn and the sections added before it.
 * Any thread; src is copied, its arg must outlive h. -ENOSPC past NDC_HTTP_SOURCES_MAX (a
 * wiring mistake: logged).
 */
#define NDC_HTTP_SOURCES_MAX 32
int ndc_http_add_metrics(struct ndc_http *h, const struct ndc_metrics_source *src);

/*
 * Adds a page at path (exact match, e.g. "/debug/top"): fn makes its body on the HTTP thread at
 * each GET (0 and *ret_body, malloc'ed, taken over; -errno: 500), served as ctype. Any thread;
 * path and ctype are not copied (literals), arg must outlive h. -ENOSPC past NDC_HTTP_PAGES_MAX,
 * -EEXIST for a path taken (logged: a wiring mistake).
 */
#define NDC_HTTP_PAGES_MAX 8
typedef int (*ndc_http_page_fn)(void *arg, char **ret_body, size_t *ret_len);
int ndc_http_add_page(struct ndc_http *h, const char *path, const char *ctype, ndc_http_page_fn fn,
		      void *arg);

/* Stops the thread, closes every connection (answered or not) and frees h. NULL is a no-op. */
void ndc_http_stop(struct ndc_http *h);

/*
 * ndc_http_start, but a listening socket among inherit (handed over by a predecessor) that is
 * bound to the same address is used instead of a new one, and set to -1 there.
 */
int ndc_http_start_inherit(const char *listen, int *inherit, size_t n_inherit, ndc_metrics_fn fn,
			   void *arg, struct ndc_http **ret);

/* The listening socket, for a successor (stays ours). */
int ndc_http_fd(const struct ndc_http *h);

#endif
