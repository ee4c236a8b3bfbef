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
 *   /metrics  200 "text/plain; version=0.0.4", the metrics callback's output (500 if it failed)
 *   /health   200 "ok\n" while the server thread runs (the process is alive)
 *   /ready    200 "ready\n" after ndc_http_set_ready(h, true), else 503 "not ready\n"; also 503
 *             "not ready: REASON\n" while the unready check (ndc_http_set_unready_check) says so
 *   other     404
 */
#ifndef NDC_HTTP_H
#define NDC_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NDC_HTTP_CONN_MAX 64
#define NDC_HTTP_HEADER_MAX 8192   /* request line + headers, bytes */
#define NDC_HTTP_TIMEOUT_MS 5000   /* to receive the request; again to send the response */
#define NDC_METRICS_MAX (4u << 20) /* bytes of /metrics output */

struct ndc_http;
struct ndc_metrics_buf;

/*
 * Appends the metrics text to b with ndc_metric / ndc_metric_u64. Runs on the HTTP thread, once
 * per /metrics request (and HEAD), so it must be safe against the threads that own the numbers.
 */
typedef void (*ndc_http_metrics_fn)(void *arg, struct ndc_metrics_buf *b);

/*
 * Adds one sample "name{labels} value". The first sample of a name also writes its "# HELP" and
 * "# TYPE" lines; samples of one name are grouped together in the output (the format requires
 * it) in the order they were added, names in order of first appearance, so calls for different
 * names may interleave. name must match [a-zA-Z_:][a-zA-Z0-9_:]*, type is "counter" or "gauge"
 * (the first one given for a name counts; another type later is an error), help is escaped as
 * the format needs. labels is NULL or "" for none, else the text between the braces, e.g.
 * "path=\"kernel\",rcode=\"NXDOMAIN\"", with values already escaped (\\, \", \n): it is checked,
 * not rewritten. Errors are sticky: the first one (-EINVAL for a bad name, type or labels,
 * -E2BIG past NDC_METRICS_MAX, -ENOMEM) makes later calls no-ops and /metrics answer 500.
 * Doubles are written so that they read back exactly; NaN and infinities as NaN, +Inf, -Inf.
 */
void ndc_metric(struct ndc_metrics_buf *b, const char *name, const char *type, const char *help,
		const char *labels, double value);
void ndc_metric_u64(struct ndc_metrics_buf *b, const char *name, const char *type, const char *help,
		    const char *labels, uint64_t value);

/* One sample per value of one label: name{key="values[i]"} v[i], for i below n. */
void ndc_metric_u64_each(struct ndc_metrics_buf *b, const char *name, const char *type,
			 const char *help, const char *key, const char *const *values,
			 const uint64_t *v, size_t n);

/*
 * A histogram family: counts[i] observations fell in (bounds[i-1], bounds[i]] (UINT64_MAX: +Inf,
 * the last); written cumulatively as name_bucket{le=...}, then name_sum and name_count.
 */
void ndc_metric_histogram(struct ndc_metrics_buf *b, const char *name, const char *help,
			  const uint64_t *bounds, const uint64_t *counts, size_t n, uint64_t sum);

/*
 * A sample read from a stats struct: a subsystem's section is a table of these, written by
 * ndc_metric_fields. off is where the sample's uint64_t sits in the struct: NDC_METRIC_OFF
 * (which fails to compile for a member of another type). NDC_METRIC_FIELD makes a row
 * ndcache_<name> of stype's member; a section names its struct once in a shorthand of its own.
 */
struct ndc_metric_field {
	const char *name;
	const char *type;
	const char *help;
	const char *labels; /* NULL: the labels ndc_metric_fields is given */
	size_t off;
};
#define NDC_METRIC_OFF(stype, member) \
	(offsetof(stype, member) + 0 * sizeof(&((stype *)0)->member == (uint64_t *)0))
#define NDC_METRIC_FIELD(stype, member, name, type, help, labels)                  \
	{                                                                          \
		"ndcache_" name, type, help, labels, NDC_METRIC_OFF(stype, member) \
	}

/* ndc_metric_u64 for each of the n fields of stats, in order. labels: as ndc_metric_u64's. */
void ndc_metric_fields(struct ndc_metrics_buf *b, const struct ndc_metric_field *f, size_t n,
		       const void *stats, const char *labels);
/* The same for a whole array of fields. */
#define NDC_METRIC_TABLE(b, fields, stats, labels) \
	ndc_metric_fields(b, fields, sizeof(fields) / sizeof((fields)[0]), stats, labels)

/*
 * One subsystem's section of /metrics: each subsystem writes its own figures (write, an
 * ndc_http_metrics_fn over arg), the agent only registers them (ndc_http_add_metrics). name says
 * whose section it is, for logs.
 */
struct ndc_metrics_source {
	const char *name;
	ndc_http_metrics_fn write;
	void *arg;
};

/*
 * Runs fn into a fresh buffer and returns the exposition text (NUL-terminated, *ret_len bytes
 * without the NUL; free() it). Returns 0 or the buffer's sticky error (then *ret_text is NULL).
 * What /metrics serves; also for tests and debugging dumps.
 */
int ndc_http_render_metrics(ndc_http_metrics_fn fn, void *arg, char **ret_text, size_t *ret_len);

/*
 * Binds listen, "a.b.c.d:port" or "[v6]:port" (numeric addresses only: no name lookups from a
 * DNS cache; port 0 picks an ephemeral port, see ndc_http_port) and starts the server thread,
 * not ready. fn may be NULL (empty /metrics). Returns 0, -EINVAL for a malformed address, or the
 * socket/bind/listen error (-EADDRINUSE, -EADDRNOTAVAIL, ...), logged once with the address.
 */
int ndc_http_start(const char *listen, ndc_http_metrics_fn fn, void *arg, struct ndc_http **ret);

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

/* Stops the thread, closes every connection (answered or not) and frees h. NULL is a no-op. */
void ndc_http_stop(struct ndc_http *h);

/*
 * ndc_http_start, but a listening socket among inherit (handed over by a predecessor) that is
 * bound to the same address is used instead of a new one, and set to -1 there.
 */
int ndc_http_start_inherit(const char *listen, int *inherit, size_t n_inherit,
			   ndc_http_metrics_fn fn, void *arg, struct ndc_http **ret);

/* The listening socket, for a successor (stays ours). */
int ndc_http_fd(const struct ndc_http *h);

#endif
