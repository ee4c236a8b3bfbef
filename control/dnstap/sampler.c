// SPDX-License-Identifier: MIT
/* The caller-side sampling rate (log.dnstap's sample, kernel_sample); the draw is inline. */
#include <math.h>
#include <time.h>

#include "dnstap.h"

int ndc_dnstap_sampler_init(struct ndc_dnstap_sampler *s, double rate, uint64_t seed)
{
	struct timespec ts;

	if (!(rate >= 0.0 && rate <= 1.0)) /* NaN fails both */
		return -EINVAL;
	if (!seed) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		seed = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ULL ^ (uint64_t)ts.tv_sec ^
		       (uint64_t)(uintptr_t)s;
	}
	s->state = seed ? seed : 1; /* xorshift's one fixed point is 0 */
	s->all = rate >= 1.0;
	/* rate * 2^64, with 0 exactly never (the draw is never below 0) */
	s->threshold = rate <= 0.0 ? 0 : (uint64_t)ldexp(rate, 64);
	return 0;
}
