/* SPDX-License-Identifier: MIT */
/*
 * Private to http.c (the server: request parsing, the listen address) and http_metrics.c (the
 * metrics text: metric and label names); included by nothing else. What the two share: the ASCII
 * character classes both check names against.
 */
#ifndef NDC_HTTP_INTERNAL_H
#define NDC_HTTP_INTERNAL_H

#include <stdbool.h>

static inline bool ndc_http_is_alpha(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static inline bool ndc_http_is_digit(char c)
{
	return c >= '0' && c <= '9';
}

#endif
