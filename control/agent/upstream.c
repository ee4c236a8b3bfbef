// SPDX-License-Identifier: MIT
/*
 * The agent's upstream side beyond the forwarder itself: /ready while every upstream loops, and
 * fail-open to an upstream on loopback.
 */
#include <stdio.h>
#include <string.h>

#include <ndc/log.h>

#include "agent_upstream.h"
#include "reload/reload.h"

bool ndc_agent_upstream_unready(void *fwd, char *why, size_t len)
{
	struct ndc_forwarder_stats fs;
	size_t off, n = 0;

	ndc_forwarder_stats(fwd, &fs);
	if (!fs.all_looping)
		return false;
	off = (size_t)snprintf(why, len, "no upstream left: ");
	for (size_t i = 0; i < fs.n_upstreams && off < len; i++)
		if (fs.upstream[i].looping)
			off += (size_t)snprintf(why + off, len - off, "%s%s", n++ ? ", " : "",
						fs.upstream[i].name);
	if (off < len)
		snprintf(why + off, len - off, " forward%s ndcache's queries back to it (a loop)",
			 n > 1 ? "" : "s");
	return true;
}

void ndc_agent_failopen_check(const struct ndc_config *cfg, bool fastpath)
{
	char lo[160];

	if (fastpath && ndc_reload_failopen_loopback(cfg, lo, sizeof(lo)))
		ndc_warn(
		    "dataplane.failopen: upstream %s is on loopback, where the kernel does not "
		    "route a query rewritten on a pod's link: with no agent running, queries "
		    "that are not answered in the kernel are lost. List an upstream on a "
		    "routable address (the kube-dns Service) first",
		    lo);
}

void ndc_agent_failopen_metrics(const struct ndc_config *cfg, bool fastpath,
				struct ndc_metrics_buf *b)
{
	char lo[160];
	bool on = fastpath && ndc_reload_failopen_loopback(cfg, lo, sizeof(lo));

	ndc_metric_u64(
	    b, "ndcache_failopen_loopback_upstream", "gauge",
	    "1 when dataplane.failopen's upstream is on loopback (127.0.0.0/8, ::1), "
	    "where the kernel does not route a pod's query: fail-open does nothing then.",
	    NULL, on);
}
