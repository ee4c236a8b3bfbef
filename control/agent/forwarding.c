// SPDX-License-Identifier: MIT
/*
 * The agent's upstream side beyond the forwarder itself: /ready while every upstream loops,
 * fail-open to an upstream on loopback, prefetch and each client's share of the upstream.
 */
#include <stdio.h>
#include <string.h>

#include <ndc/log.h>

#include "metrics/metrics.h"
#include "internal.h"
#include "publisher.h"
#include "query/query.h"
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

void ndc_agent_failopen_metrics(void *arg, struct ndc_metrics_buf *b)
{
	struct agent *ag = arg;
	char lo[160];
	bool on =
	    ndc_agent_fastpath_loaded(ag) && ndc_reload_failopen_loopback(ag->cfg, lo, sizeof(lo));

	ndc_metric_u64(
	    b, "ndcache_failopen_loopback_upstream", "gauge",
	    "1 when dataplane.failopen's upstream is on loopback (127.0.0.0/8, ::1), "
	    "where the kernel does not route a pod's query: fail-open does nothing then.",
	    NULL, on);
}

/* ndc_prefetch_hits_fn over the publisher's kernel hit counters. */
static int kernel_hits(void *arg, const uint8_t *lname, size_t nlen, uint16_t qtype,
		       uint32_t *ret_hits)
{
	return ndc_publisher_kernel_hits(arg, lname, nlen, qtype, ret_hits);
}

/*
 * Issue 22: cache.prefetch (once the forwarder runs) and forward.per_client (the resolver asks
 * it). Both stay for the agent's life: a reload changes their options, and prefetch: false only
 * stops new prefetch points.
 */
int ndc_agent_upstream_share_start(struct agent *ag)
{
	struct ndc_prefetch_opts po;
	struct ndc_ratelimit_opts lo;
	int err;

	ndc_prefetch_opts_from_config(&po, ag->cfg);
	ndc_ratelimit_opts_from_config(&lo, ag->cfg);
	err = ndc_ratelimit_new(&lo, &ag->query.limiter);
	if (err < 0) {
		ndc_err("forward.per_client: %s", strerror(-err));
		return err;
	}
	err = ndc_prefetch_new(&po, ag->query.cache, ag->query.fwd, &ag->query.prefetch);
	if (err < 0) {
		ndc_err("cache.prefetch: %s", strerror(-err));
		return err;
	}
	if (ag->dp.pub)
		ndc_prefetch_set_kernel_hits(ag->query.prefetch, kernel_hits, ag->dp.pub);
	return 0;
}
