/* SPDX-License-Identifier: MIT */
/*
 * The fast path's entry points that only tests and benchmarks call (tests/bpf/, tests/bench/): kept
 * out of fastpath.h so that the product's interface is what the agent and the publisher use.
 * Implemented in fastpath.c (fastpath_stub.c without BPF: -EOPNOTSUPP).
 */
#ifndef NDC_FASTPATH_TEST_H
#define NDC_FASTPATH_TEST_H

#include <stddef.h>

#include "fastpath/fastpath.h"

/*
 * Writes the logical entry v (its name included) at k as it is, whatever name k holds: for tests
 * (a forced hash collision, an expired entry) and tools. 0, or -ENOSPC as ndc_fastpath_publish.
 */
int ndc_fastpath_put(struct ndc_fp *fp, const struct ndc_fp_key *k, const struct ndc_fp_value *v);

/*
 * Reading a table through its maps' fds (the pins <pin_dir>/ndc_answers, ndc_big, ndc_nx and
 * ndc_config, or another process's), as the kernel reads it: the entry at k in the logical format
 * (0, -ENOENT, -EINVAL when the maps are not one table's, -errno); the number of entries; the
 * NXDOMAIN template (<pin_dir>/ndc_nx). For tests and inspection: a syscall per slot looked at.
 */
int ndc_fastpath_lookup(int answers_fd, int big_fd, int nx_fd, int config_fd,
			const struct ndc_fp_key *k, struct ndc_fp_value *ret);
int ndc_fastpath_count(int answers_fd, size_t *ret);
int ndc_fastpath_nx_read(int nx_fd, struct ndc_fp_value *ret);

/*
 * Rebuilds the answer table at its present size, for tests: a table that never grew has one
 * region (include/ndc/abi.h) until then. 0 or a negative errno (the table left as it was).
 */
int ndc_fastpath_table_rebuild(struct ndc_fp *fp);

/* The program fds, for BPF_PROG_TEST_RUN in tests and benchmarks. */
int ndc_fastpath_prog_fd(struct ndc_fp *fp, enum ndc_fp_attach which);
/* The tc egress program (fail-open replies), for tests. */
int ndc_fastpath_egress_prog_fd(struct ndc_fp *fp);

#endif
