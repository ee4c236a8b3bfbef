// SPDX-License-Identifier: MIT
/*
 * The Prometheus text exposition format 0.0.4 behind /metrics: ndc_metric, ndc_metric_u64 and
 * ndc_metric_histogram append samples to a buffer of families (grouped by name, as the format
 * requires), with name and label checks and a sticky error; ndc_metrics_render joins them
 * into the response body. Kept apart from the server (control/http/), which only calls
 * ndc_metrics_render: building the text involves no socket, and tests and debugging dumps
 * use it without a server.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/metrics.h"

static bool is_alpha(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

struct family {
	char *name;
	const char *type;
	char *text; /* "# HELP", "# TYPE", then the samples */
	size_t len, cap;
};

/* Families are looked up by a linear scan after a check of the last one used: there are tens of
 * names, while the many labelled samples of one name usually come in a row. */
struct ndc_metrics_buf {
	struct family *fam;
	size_t nfam, capfam;
	size_t last;
	size_t total; /* bytes of text over all families */
	int error;
};

static bool valid_metric_name(const char *s)
{
	if (!s || !(is_alpha(*s) || *s == '_' || *s == ':'))
		return false;
	for (s++; *s; s++)
		if (!(is_alpha(*s) || is_digit(*s) || *s == '_' || *s == ':'))
			return false;
	return true;
}

/* label="value"(,label="value")*, values escaped as the format defines: \\, \" and \n only. */
static bool valid_labels(const char *s)
{
	for (;;) {
		if (!(is_alpha(*s) || *s == '_'))
			return false;
		for (s++; is_alpha(*s) || is_digit(*s) || *s == '_'; s++)
			;
		if (*s++ != '=' || *s++ != '"')
			return false;
		for (; *s != '"'; s++) {
			if (*s == '\0' || *s == '\n')
				return false;
			if (*s == '\\') {
				s++;
				if (*s != '\\' && *s != '"' && *s != 'n')
					return false;
			}
		}
		s++;
		if (*s == '\0')
			return true;
		if (*s++ != ',')
			return false;
	}
}

static void fam_append(struct ndc_metrics_buf *b, struct family *f, const char *s, size_t n)
{
	if (b->error)
		return;
	if (n > NDC_METRICS_MAX - b->total) {
		b->error = -E2BIG;
		return;
	}
	if (f->cap - f->len < n) {
		size_t cap = f->cap ? f->cap : 256;
		char *p;

		while (cap - f->len < n)
			cap *= 2;
		p = realloc(f->text, cap);
		if (!p) {
			b->error = -ENOMEM;
			return;
		}
		f->text = p;
		f->cap = cap;
	}
	memcpy(f->text + f->len, s, n);
	f->len += n;
	b->total += n;
}

/* Appends each string up to a NULL: one line of the text, in its pieces. */
static void fam_puts(struct ndc_metrics_buf *b, struct family *f, ...) __attribute__((sentinel));
static void fam_puts(struct ndc_metrics_buf *b, struct family *f, ...)
{
	va_list ap;
	const char *s;

	va_start(ap, f);
	while ((s = va_arg(ap, const char *)))
		fam_append(b, f, s, strlen(s));
	va_end(ap);
}

/* HELP text: backslash and line feed escaped, nothing else. */
static void fam_put_help(struct ndc_metrics_buf *b, struct family *f, const char *s)
{
	while (*s) {
		size_t n = strcspn(s, "\\\n");

		fam_append(b, f, s, n);
		s += n;
		if (*s) {
			fam_puts(b, f, *s == '\\' ? "\\\\" : "\\n", NULL);
			s++;
		}
	}
}

static struct family *family_find(struct ndc_metrics_buf *b, const char *name)
{
	if (b->last < b->nfam && strcmp(b->fam[b->last].name, name) == 0)
		return &b->fam[b->last];
	for (size_t i = 0; i < b->nfam; i++) {
		if (strcmp(b->fam[i].name, name) == 0) {
			b->last = i;
			return &b->fam[i];
		}
	}
	return NULL;
}

static struct family *family_add(struct ndc_metrics_buf *b, const char *name, const char *type,
				 const char *help)
{
	struct family *f;

	if (b->nfam == b->capfam) {
		size_t cap = b->capfam ? b->capfam * 2 : 16;
		struct family *p = realloc(b->fam, cap * sizeof(*p));

		if (!p) {
			b->error = -ENOMEM;
			return NULL;
		}
		b->fam = p;
		b->capfam = cap;
	}
	f = &b->fam[b->nfam];
	*f = (struct family){.name = strdup(name), .type = type};
	if (!f->name) {
		b->error = -ENOMEM;
		return NULL;
	}
	b->last = b->nfam++;
	if (help) {
		fam_puts(b, f, "# HELP ", name, " ", NULL);
		fam_put_help(b, f, help);
		fam_puts(b, f, "\n", NULL);
	}
	fam_puts(b, f, "# TYPE ", name, " ", type, "\n", NULL);
	return f;
}

static void add_sample_as(struct ndc_metrics_buf *b, const char *name, const char *sample,
			  const char *type, const char *help, const char *labels, const char *value)
{
	/* The family keeps a pointer into types[], never the caller's string. */
	static const char *const types[] = {"counter", "gauge", "histogram"};
	const char *t = NULL;
	struct family *f;

	if (b->error)
		return;
	for (size_t i = 0; type && i < 3; i++)
		if (strcmp(type, types[i]) == 0)
			t = types[i];
	type = t;
	if (labels && !*labels)
		labels = NULL;
	if (!type || !valid_metric_name(name) || !valid_metric_name(sample) ||
	    (labels && !valid_labels(labels))) {
		b->error = -EINVAL;
		return;
	}
	f = family_find(b, name);
	if (!f)
		f = family_add(b, name, type, help);
	else if (f->type != type)
		b->error = -EINVAL;
	if (!f || b->error)
		return;
	if (labels)
		fam_puts(b, f, sample, "{", labels, "} ", value, "\n", NULL);
	else
		fam_puts(b, f, sample, " ", value, "\n", NULL);
}

/* Counters and gauges: histograms go through ndc_metric_histogram. */
static void add_sample(struct ndc_metrics_buf *b, const char *name, const char *type,
		       const char *help, const char *labels, const char *value)
{
	if (type && !strcmp(type, "histogram"))
		type = NULL;
	add_sample_as(b, name, name, type, help, labels, value);
}

void ndc_metric_histogram(struct ndc_metrics_buf *b, const char *name, const char *help,
			  const uint64_t *bounds, const uint64_t *counts, size_t n, uint64_t sum)
{
	char sample[256], le[48], v[24];
	uint64_t cum = 0;

	if (snprintf(sample, sizeof(sample), "%s_bucket", name) >= (int)sizeof(sample)) {
		b->error = -EINVAL;
		return;
	}
	/* One family: its samples are name_bucket, name_sum, name_count. */
	for (size_t i = 0; i < n; i++) {
		cum += counts[i];
		if (bounds[i] == UINT64_MAX)
			snprintf(le, sizeof(le), "le=\"+Inf\"");
		else
			snprintf(le, sizeof(le), "le=\"%" PRIu64 "\"", bounds[i]);
		snprintf(v, sizeof(v), "%" PRIu64, cum);
		add_sample_as(b, name, sample, "histogram", help, le, v);
	}
	snprintf(sample, sizeof(sample), "%s_sum", name);
	snprintf(v, sizeof(v), "%" PRIu64, sum);
	add_sample_as(b, name, sample, "histogram", help, NULL, v);
	snprintf(sample, sizeof(sample), "%s_count", name);
	snprintf(v, sizeof(v), "%" PRIu64, cum);
	add_sample_as(b, name, sample, "histogram", help, NULL, v);
}

void ndc_metric(struct ndc_metrics_buf *b, const char *name, const char *type, const char *help,
		const char *labels, double value)
{
	char s[32];

	if (isnan(value)) {
		strcpy(s, "NaN");
	} else if (isinf(value)) {
		strcpy(s, value > 0 ? "+Inf" : "-Inf");
	} else {
		/* Shortest of %.15g..%.17g that reads back as the same double (17 always does). The
		 * process never calls setlocale, so the decimal point is '.'. */
		for (int prec = 15; prec <= 17; prec++) {
			snprintf(s, sizeof(s), "%.*g", prec, value);
			if (strtod(s, NULL) == value)
				break;
		}
	}
	add_sample(b, name, type, help, labels, s);
}

void ndc_metric_u64(struct ndc_metrics_buf *b, const char *name, const char *type, const char *help,
		    const char *labels, uint64_t value)
{
	char s[24];

	snprintf(s, sizeof(s), "%" PRIu64, value);
	add_sample(b, name, type, help, labels, s);
}

void ndc_metric_u64_each(struct ndc_metrics_buf *b, const char *name, const char *type,
			 const char *help, const char *key, const char *const *values,
			 const uint64_t *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char l[128];

		snprintf(l, sizeof(l), "%s=\"%s\"", key, values[i]);
		ndc_metric_u64(b, name, type, help, l, v[i]);
	}
}

void ndc_metric_fields(struct ndc_metrics_buf *b, const struct ndc_metric_field *f, size_t n,
		       const void *stats, const char *labels)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t v;

		memcpy(&v, (const char *)stats + f[i].off, sizeof(v));
		ndc_metric_u64(b, f[i].name, f[i].type, f[i].help,
			       f[i].labels ? f[i].labels : labels, v);
	}
}

int ndc_metrics_render(ndc_metrics_fn fn, void *arg, char **ret_text, size_t *ret_len)
{
	struct ndc_metrics_buf b = {0};
	char *text = NULL;
	size_t off = 0;
	int r;

	if (fn)
		fn(arg, &b);
	r = b.error;
	if (r == 0) {
		text = malloc(b.total + 1);
		if (!text)
			r = -ENOMEM;
	}
	for (size_t i = 0; i < b.nfam; i++) {
		if (text) {
			memcpy(text + off, b.fam[i].text, b.fam[i].len);
			off += b.fam[i].len;
		}
		free(b.fam[i].name);
		free(b.fam[i].text);
	}
	free(b.fam);
	if (r < 0)
		return r;
	text[off] = '\0';
	*ret_text = text;
	*ret_len = off;
	return 0;
}
