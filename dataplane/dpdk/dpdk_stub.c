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

/* Nothing to publish to: ndc_dpdk_open fails first. */
const struct ndc_answer_table_ops ndc_dpdk_answer_table = {0};

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
