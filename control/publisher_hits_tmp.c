// SPDX-License-Identifier: MIT
/*
 * TEMPORARY (branch i22-cache): a stand-in for ndc_publisher_kernel_hits so this branch builds
 * before the kernel table carries hit counters. The lead replaces this file with the real
 * definition in publisher.c (issue 21's table); until then prefetch counts user-space hits only,
 * which is every hit in socket mode.
 */
#include <errno.h>

#include "publisher.h"

int ndc_publisher_kernel_hits(struct ndc_publisher *p, const uint8_t *lname, size_t nlen,
			      uint16_t qtype, uint32_t *ret_hits)
{
	(void)p;
	(void)lname;
	(void)nlen;
	(void)qtype;
	(void)ret_hits;
	return -EOPNOTSUPP;
}
