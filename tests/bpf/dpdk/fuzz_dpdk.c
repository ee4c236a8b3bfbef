// SPDX-License-Identifier: MIT
/*
 * The DPDK side of the differential fuzzer (fuzz_diff.c --dpdk): the DPDK answer table beside the
 * kernel's, filled by a publisher of its own from the same record table and cache hook, and its
 * answer function (ndc_dpdk_answer) run on a plain buffer, no NIC. The EAL runs with --no-huge
 * --no-pci and no worker lcore: the fuzzer's thread reads the table as an lcore does, reporting a
 * quiescent state after each frame.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_rcu_qsbr.h>

#include "dpdk/internal.h"
#include "fastpath/fastpath.h"
#include "bpf/fuzz_diff.h" /* tests/bpf/ */
#include "publisher.h"

static struct {
	struct ndc_dpdk_table *t;
	struct ndc_publisher *pub;
	struct rte_rcu_qsbr *qsbr;
	char runtime_dir[PATH_MAX];
	bool eal;
} dp;

/* The publisher's table calls, straight onto the table (the agent's go through struct ndc_dpdk). */
static int publish(void *t, const uint8_t *lname, size_t nlen, uint16_t qtype,
		   const struct ndc_answer *a, uint32_t ttl_s)
{
	return ndc_dpdk_table_publish(t, lname, nlen, qtype, a, ttl_s);
}

static int unpublish(void *t, const uint8_t *lname, size_t nlen, uint16_t qtype)
{
	return ndc_dpdk_table_unpublish(t, lname, nlen, qtype);
}

static int unpublish_expired(void *t, const struct ndc_fp_key *k)
{
	return ndc_dpdk_table_unpublish_expired(t, k);
}

static int set_nx(void *t, const struct ndc_answer *nx)
{
	return ndc_dpdk_table_set_nx(t, nx);
}

static int set_synced(void *t, bool synced)
{
	return ndc_dpdk_table_set_synced(t, synced);
}

static const struct ndc_answer_table_ops table_ops = {
    .publish = publish,
    .unpublish = unpublish,
    .unpublish_expired = unpublish_expired,
    .set_nx = set_nx,
    .set_synced = set_synced,
};

int fz_dpdk_open(const struct ndc_fastpath_opts *fo, const struct ndc_records *rec)
{
	char prefix[64];
	char *argv[] = {"test_fuzz_diff", "--no-huge",	    "--no-pci",	  "-m",	  "64",
			"--no-shconf",	  "--no-telemetry", "--lcores=0", prefix, NULL};
	struct ndc_fp_config cfg;
	int r;

	snprintf(prefix, sizeof(prefix), "--file-prefix=ndc-fuzz-%d", (int)getpid());
	if (rte_eal_init(9, argv) < 0) {
		fprintf(stderr, "fuzz_diff: rte_eal_init failed: %s\n", rte_strerror(rte_errno));
		return -EIO;
	}
	dp.eal = true;
	snprintf(dp.runtime_dir, sizeof(dp.runtime_dir), "%s", rte_eal_get_runtime_dir());
	/* the config the kernel's table gets from the same options, by the same code */
	r = ndc_fastpath_config_of(fo, &cfg);
	if (r)
		return r;
	struct ndc_dpdk_table_opts to = {
	    .max_entries = fo->max_entries, .max_readers = 1, .config = &cfg};
	r = ndc_dpdk_table_new(&to, &dp.t);
	if (r)
		return r;
	dp.qsbr = ndc_dpdk_table_qsbr(dp.t);
	if (rte_rcu_qsbr_thread_register(dp.qsbr, 0))
		return -EINVAL;
	rte_rcu_qsbr_thread_online(dp.qsbr, 0);
	r = ndc_publisher_new(&table_ops, dp.t, &dp.pub);
	if (!r)
		r = ndc_publisher_load_records(dp.pub, rec);
	return r;
}

void fz_dpdk_cache_hook(const struct ndc_answer *a, const uint8_t *lname, size_t nlen,
			uint16_t qtype, uint16_t qclass, uint32_t ttl)
{
	ndc_publisher_cache_hook(dp.pub, a, lname, nlen, qtype, qclass, ttl);
}

void fz_dpdk_flush(void)
{
	/* the drain thread may wait for this reader's report while it publishes */
	rte_rcu_qsbr_thread_offline(dp.qsbr, 0);
	ndc_publisher_flush(dp.pub);
	rte_rcu_qsbr_thread_online(dp.qsbr, 0);
}

int fz_dpdk_answer(const uint8_t *in, size_t inlen, uint64_t now_ns, uint8_t *out, size_t *ret_len)
{
	uint32_t len = 0;
	int verdict;

	memcpy(out, in, inlen);
	verdict = ndc_dpdk_answer(dp.t, out, (uint32_t)inlen, NDC_PKT_MAX, now_ns, &len);
	*ret_len = ndc_dpdk_answered(verdict) ? len : inlen;
	rte_rcu_qsbr_quiescent(dp.qsbr, 0);
	return verdict;
}

bool fz_dpdk_answered(int verdict)
{
	return ndc_dpdk_answered(verdict);
}

void fz_dpdk_close(void)
{
	if (dp.qsbr) {
		rte_rcu_qsbr_thread_offline(dp.qsbr, 0);
		rte_rcu_qsbr_thread_unregister(dp.qsbr, 0);
	}
	ndc_publisher_free(dp.pub);
	ndc_dpdk_table_free(dp.t);
	if (dp.eal) {
		rte_eal_cleanup();
		rmdir(dp.runtime_dir); /* the EAL leaves its (empty) runtime directory */
	}
	memset(&dp, 0, sizeof(dp));
}
