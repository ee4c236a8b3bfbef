// SPDX-License-Identifier: MIT
/*
 * The fast path in a build without BPF: every call says so, callers need no #ifdef. The key and
 * value conversions are the base's (dataplane/base/), in every build.
 */
#include <errno.h>

#include "fastpath/fastpath.h"
#include "fastpath/fastpath_test.h"

int ndc_fastpath_open(const struct ndc_fastpath_opts *opts, struct ndc_fp **ret)
{
	(void)opts;
	*ret = NULL;
	return -EOPNOTSUPP;
}

int ndc_fastpath_attach(struct ndc_fp *fp)
{
	(void)fp;
	return -EOPNOTSUPP;
}

void ndc_fastpath_close(struct ndc_fp *fp)
{
	(void)fp;
}

void ndc_fastpath_quiet(struct ndc_fp *fp)
{
	(void)fp;
}

void ndc_fastpath_hand_off(struct ndc_fp *fp)
{
	(void)fp;
}

void ndc_fastpath_release(struct ndc_fp *fp)
{
	(void)fp;
}

int ndc_fastpath_publish(struct ndc_fp *fp, const uint8_t *lname, size_t nlen, uint16_t qtype,
			 const struct ndc_answer *a, uint32_t ttl_s)
{
	(void)fp, (void)lname, (void)nlen, (void)qtype, (void)a, (void)ttl_s;
	return -EOPNOTSUPP;
}

int ndc_fastpath_publish_pass(struct ndc_fp *fp, const uint8_t *lname, size_t nlen)
{
	(void)fp, (void)lname, (void)nlen;
	return -EOPNOTSUPP;
}

int ndc_fastpath_unpublish_expired(struct ndc_fp *fp, const struct ndc_fp_key *k)
{
	(void)fp, (void)k;
	return -EOPNOTSUPP;
}

int ndc_fastpath_unpublish(struct ndc_fp *fp, const uint8_t *lname, size_t nlen, uint16_t qtype)
{
	(void)fp, (void)lname, (void)nlen, (void)qtype;
	return -EOPNOTSUPP;
}

int ndc_fastpath_set_nx(struct ndc_fp *fp, const struct ndc_answer *nx)
{
	(void)fp, (void)nx;
	return -EOPNOTSUPP;
}

int ndc_fastpath_set_synced(struct ndc_fp *fp, bool synced)
{
	(void)fp, (void)synced;
	return -EOPNOTSUPP;
}

int ndc_fastpath_counters(struct ndc_fp *fp, uint64_t ret[NDC_FP_COUNTER_MAX])
{
	(void)fp, (void)ret;
	return -EOPNOTSUPP;
}

uint64_t ndc_fastpath_foreign_programs(struct ndc_fp *fp)
{
	(void)fp;
	return 0;
}

int ndc_fastpath_table_stats(struct ndc_fp *fp, struct ndc_fastpath_table_stats *ret)
{
	(void)fp, (void)ret;
	return -EOPNOTSUPP;
}

int ndc_fastpath_table_rebuild(struct ndc_fp *fp)
{
	(void)fp;
	return -EOPNOTSUPP;
}

int ndc_fastpath_prog_fd(struct ndc_fp *fp, enum ndc_fp_attach which)
{
	(void)fp, (void)which;
	return -EOPNOTSUPP;
}

int ndc_fastpath_egress_prog_fd(struct ndc_fp *fp)
{
	(void)fp;
	return -EOPNOTSUPP;
}

int ndc_fastpath_put(struct ndc_fp *fp, const struct ndc_fp_key *k, const struct ndc_fp_value *v)
{
	(void)fp, (void)k, (void)v;
	return -EOPNOTSUPP;
}

int ndc_fastpath_lookup(int answers_fd, int big_fd, int nx_fd, int config_fd,
			const struct ndc_fp_key *k, struct ndc_fp_value *ret)
{
	(void)answers_fd, (void)big_fd, (void)nx_fd, (void)config_fd, (void)k, (void)ret;
	return -EOPNOTSUPP;
}

int ndc_fastpath_hits(struct ndc_fp *fp, const uint8_t *lname, size_t nlen, uint16_t qtype,
		      uint32_t *ret_hits)
{
	(void)fp;
	(void)lname;
	(void)nlen;
	(void)qtype;
	(void)ret_hits;
	return -EOPNOTSUPP;
}

int ndc_fastpath_count(int answers_fd, size_t *ret)
{
	(void)answers_fd;
	*ret = 0;
	return -EOPNOTSUPP;
}

int ndc_fastpath_nx_read(int nx_fd, struct ndc_fp_value *ret)
{
	(void)nx_fd, (void)ret;
	return -EOPNOTSUPP;
}

int ndc_fastpath_config_of(const struct ndc_fastpath_opts *opts, struct ndc_fp_config *ret)
{
	(void)opts;
	(void)ret;
	return -EOPNOTSUPP;
}

int ndc_fastpath_clients(struct ndc_fp *fp, int (*cb)(const struct ndc_fp_client *c, void *arg),
			 void *arg)
{
	(void)fp, (void)cb, (void)arg;
	return -EOPNOTSUPP;
}

int ndc_fastpath_clients_taken(struct ndc_fp *fp, uint64_t *ret)
{
	(void)fp;
	*ret = 0;
	return -EOPNOTSUPP;
}

int ndc_fastpath_samples_poll(struct ndc_fp *fp, int timeout_ms,
			      void (*cb)(const struct ndc_fp_sample *s, void *arg), void *arg)
{
	(void)fp, (void)timeout_ms, (void)cb, (void)arg;
	return -EOPNOTSUPP;
}

int ndc_fastpath_samples_fd(struct ndc_fp *fp)
{
	(void)fp;
	return -EOPNOTSUPP;
}

int ndc_fastpath_samples_lost(struct ndc_fp *fp, uint64_t *ret)
{
	(void)fp;
	*ret = 0;
	return -EOPNOTSUPP;
}

int ndc_fastpath_set_observe(struct ndc_fp *fp, bool clients, double kernel_sample)
{
	(void)fp, (void)clients, (void)kernel_sample;
	return -EOPNOTSUPP;
}
