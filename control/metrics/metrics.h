/* SPDX-License-Identifier: MIT */
/*
 * The Prometheus text exposition format 0.0.4: every subsystem writes its figures with these
 * calls into a buffer, and the HTTP server (http/http.h) serves what ndc_metrics_render
 * makes of them at /metrics. Building the text involves no socket: a subsystem that exports
 * metrics includes this header, not the server's; tests and debugging dumps use it without one.
 */
#ifndef NDC_METRICS_H
#define NDC_METRICS_H

#include <stddef.h>
#include <stdint.h>

#define NDC_METRICS_MAX (4u << 20) /* bytes of /metrics output */

struct ndc_metrics_buf;

/*
 * Appends the metrics text to b with ndc_metric / ndc_metric_u64. Runs on the HTTP thread, once
 * per /metrics request (and HEAD), so it must be safe against the threads that own the numbers.
 */
typedef void (*ndc_metrics_fn)(void *arg, struct ndc_metrics_buf *b);

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
 * ndc_metrics_fn over arg), the agent only registers them (ndc_http_add_metrics). name says
 * whose section it is, for logs.
 */
struct ndc_metrics_source {
	const char *name;
	ndc_metrics_fn write;
	void *arg;
};

/*
 * Runs fn into a fresh buffer and returns the exposition text (NUL-terminated, *ret_len bytes
 * without the NUL; free() it). Returns 0 or the buffer's sticky error (then *ret_text is NULL).
 * What /metrics serves; also for tests and debugging dumps.
 */
int ndc_metrics_render(ndc_metrics_fn fn, void *arg, char **ret_text, size_t *ret_len);

#endif
