// SPDX-License-Identifier: MIT
/*
 * The kernel table behind the answer-table interface (<ndc/answer_table.h>): the publisher holds
 * these operations with a struct ndc_fp as their table and never asks which backend it has.
 * Built without BPF too: then every call is fastpath_stub.c's -EOPNOTSUPP.
 */
#include "fastpath/fastpath.h"

static int publish(void *fp, const uint8_t *lname, size_t nlen, uint16_t qtype,
		   const struct ndc_answer *a, uint32_t ttl_s)
{
	return ndc_fastpath_publish(fp, lname, nlen, qtype, a, ttl_s);
}

static int unpublish(void *fp, const uint8_t *lname, size_t nlen, uint16_t qtype)
{
	return ndc_fastpath_unpublish(fp, lname, nlen, qtype);
}

static int unpublish_expired(void *fp, const struct ndc_fp_key *k)
{
	return ndc_fastpath_unpublish_expired(fp, k);
}

static int hits(void *fp, const uint8_t *lname, size_t nlen, uint16_t qtype, uint32_t *ret_hits)
{
	return ndc_fastpath_hits(fp, lname, nlen, qtype, ret_hits);
}

static int set_nx(void *fp, const struct ndc_answer *nx)
{
	return ndc_fastpath_set_nx(fp, nx);
}

static int set_synced(void *fp, bool synced)
{
	return ndc_fastpath_set_synced(fp, synced);
}

const struct ndc_answer_table_ops ndc_fastpath_answer_table = {
    .publish = publish,
    .unpublish = unpublish,
    .unpublish_expired = unpublish_expired,
    .hits = hits,
    .set_nx = set_nx,
    .set_synced = set_synced,
};
