/* SPDX-License-Identifier: MIT */
/*
 * Logging to stderr, one line per event, one write(2) per line (lines from several threads never
 * interleave). Not for hot paths: the one caller on a query path, query logging, is sampled and
 * off by default. Two formats:
 *   text  "ndcache: <level>: <message>[ key=value ...]" (values with spaces or quotes quoted)
 *   json  {"time":"2026-11-25T10:00:00.123Z","level":"info","msg":"<message>","fields":{...}}
 *         one object a line, time in UTC (RFC 3339, milliseconds); fields: strings and
 *         integers, {} when there are none.
 */
#ifndef NDC_LOG_H
#define NDC_LOG_H

#include <stddef.h>

enum ndc_log_level { NDC_LOG_ERR = 0, NDC_LOG_WARN, NDC_LOG_INFO, NDC_LOG_DEBUG };
enum ndc_log_format { NDC_LOG_TEXT = 0, NDC_LOG_JSON };

/*
 * Messages above this level are dropped; default NDC_LOG_INFO. Set it with ndc_log_set_level
 * once other threads run (a reload changes it under way); reading it directly is fine.
 */
extern int ndc_log_level;

void ndc_log_set_level(int level);
void ndc_log_set_format(enum ndc_log_format format);

/* "error", "warning", "info", "debug" to the level (-1 for anything else), and back. */
int ndc_log_level_from_name(const char *name);
const char *ndc_log_level_name(int level);

void ndc_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* One field of a structured line: a string (str set) or an integer (str NULL). */
struct ndc_log_field {
	const char *key; /* [a-z_]+ */
	const char *str;
	long long num;
};

#define NDC_LOG_STR(k, v) ((struct ndc_log_field){.key = (k), .str = (v)})
#define NDC_LOG_NUM(k, v) ((struct ndc_log_field){.key = (k), .num = (long long)(v)})

/* A line with msg and n fields; the line is cut (still one line, still valid JSON) at 4 KiB. */
void ndc_log_fields(int level, const char *msg, const struct ndc_log_field *f, size_t n);

/*
 * For parsers that explain a refusal to their caller: writes the message into err (when err and
 * errlen are given; cut to fit) and returns r, so that `return ndc_errf(-EINVAL, err, errlen,
 * "...")` reports and fails in one step.
 */
int ndc_errf(int r, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define ndc_err(...) ndc_log(NDC_LOG_ERR, __VA_ARGS__)
#define ndc_warn(...) ndc_log(NDC_LOG_WARN, __VA_ARGS__)
#define ndc_info(...) ndc_log(NDC_LOG_INFO, __VA_ARGS__)
#define ndc_debug(...) ndc_log(NDC_LOG_DEBUG, __VA_ARGS__)

#endif
