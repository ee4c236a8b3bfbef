// SPDX-License-Identifier: MIT
#include <stdarg.h>
#include <stdio.h>

#include <ndc/log.h>

int ndc_log_level = NDC_LOG_INFO;

static const char *const level_names[] = {"error", "warning", "info", "debug"};

void ndc_log(int level, const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	if (level > ndc_log_level)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* One write per line so lines from several threads do not interleave. */
	fprintf(stderr, "ndcache: %s: %s\n", level_names[level & 3], line);
}
