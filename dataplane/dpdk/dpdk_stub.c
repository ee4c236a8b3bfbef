// SPDX-License-Identifier: MIT
/* The DPDK dataplane in a build without DPDK: every call says so, callers need no #ifdef. */
#include <errno.h>
#include <string.h>

#include "dpdk/dpdk.h"

int ndc_dpdk_open(const struct ndc_dpdk_opts *opts, struct ndc_dpdk **ret)
{
	(void)opts;
	*ret = NULL;
	return -EOPNOTSUPP;
}

int ndc_dpdk_start(struct ndc_dpdk *dp)
{
	(void)dp;
	return -EOPNOTSUPP;
}

void ndc_dpdk_close(struct ndc_dpdk *dp)
{
	(void)dp;
}

int ndc_dpdk_publish(struct ndc_dpdk *dp, const uint8_t *lname, size_t nlen, uint16_t qtype,
		     const struct ndc_answer *a, uint32_t ttl_s)
{
	(void)dp, (void)lname, (void)nlen, (void)qtype, (void)a, (void)ttl_s;
	return -EOPNOTSUPP;
}

int ndc_dpdk_publish_pass(struct ndc_dpdk *dp, const uint8_t *lname, size_t nlen)
{
	(void)dp, (void)lname, (void)nlen;
	return -EOPNOTSUPP;
}

int ndc_dpdk_unpublish(struct ndc_dpdk *dp, const uint8_t *lname, size_t nlen, uint16_t qtype)
{
	(void)dp, (void)lname, (void)nlen, (void)qtype;
	return -EOPNOTSUPP;
}

int ndc_dpdk_unpublish_expired(struct ndc_dpdk *dp, const struct ndc_fp_key *k)
{
	(void)dp, (void)k;
	return -EOPNOTSUPP;
}

int ndc_dpdk_set_nx(struct ndc_dpdk *dp, const struct ndc_answer *nx)
{
	(void)dp, (void)nx;
	return -EOPNOTSUPP;
}

int ndc_dpdk_set_synced(struct ndc_dpdk *dp, bool synced)
{
	(void)dp, (void)synced;
	return -EOPNOTSUPP;
}

int ndc_dpdk_counters(struct ndc_dpdk *dp, uint64_t ret[NDC_FP_COUNTER_MAX])
{
	(void)dp;
	memset(ret, 0, NDC_FP_COUNTER_MAX * sizeof(ret[0]));
	return -EOPNOTSUPP;
}

void ndc_dpdk_metrics(struct ndc_dpdk *dp, ndc_dpdk_metric_fn fn, void *arg)
{
	(void)dp, (void)fn, (void)arg;
}
