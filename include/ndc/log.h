/* SPDX-License-Identifier: MIT */
/* Logging to stderr, one line per event: "ndcache: <level>: <message>". Not for hot paths. */
#ifndef NDC_LOG_H
#define NDC_LOG_H

enum ndc_log_level { NDC_LOG_ERR = 0, NDC_LOG_WARN, NDC_LOG_INFO, NDC_LOG_DEBUG };

/* Messages above this level are dropped; default NDC_LOG_INFO. */
extern int ndc_log_level;

void ndc_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define ndc_err(...) ndc_log(NDC_LOG_ERR, __VA_ARGS__)
#define ndc_warn(...) ndc_log(NDC_LOG_WARN, __VA_ARGS__)
#define ndc_info(...) ndc_log(NDC_LOG_INFO, __VA_ARGS__)
#define ndc_debug(...) ndc_log(NDC_LOG_DEBUG, __VA_ARGS__)

#endif
