// SPDX-License-Identifier: MIT
/*
 * What the kernel shows: its counters (ndc_counters' and each CPU's scratch's, summed), and of its
 * clients (issue 37) the config words that turn per-client counting and answer sampling on, the
 * per-client table's walk (summed over CPUs) and the sampled answers' ring. fastpath.c loads and
 * maps the maps; this file reads them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <ndc/ip.h>
#include <ndc/log.h>

#include "fastpath/fastpath.h"
#include "internal.h"
#include "ndc_fastpath.skel.h"

/* CPU c's count k of the answer core, in its scratch: a word only that CPU's program adds to. */
static uint64_t scratch_count(const struct ndc_fp *fp, uint32_t c, uint32_t k)
{
	const uint64_t *counts =
	    (const uint64_t *)(fp->scratch + c * fp->scratch_stride + fp->counts_at);

	return __atomic_load_n(&counts[k], __ATOMIC_RELAXED);
}

/* ndc_counters' (fail-open's, and passes before the scratch was looked up) plus the scratch's. */
int ndc_fastpath_counters(struct ndc_fp *fp, uint64_t ret[NDC_FP_COUNTER_MAX])
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t *vals;
	int r = 0;

	if (ncpu <= 0)
		return ncpu < 0 ? ncpu : -EINVAL;
	/* Per-CPU values come back as one 8-byte-aligned slot per possible CPU. */
	vals = calloc((size_t)ncpu, sizeof(*vals));
	if (!vals)
		return -ENOMEM;
	for (uint32_t k = 0; k < NDC_FP_COUNTER_MAX; k++) {
		r = bpf_map_lookup_elem(fp->counters_fd, &k, vals);
		if (r < 0)
			break;
		ret[k] = 0;
		for (int c = 0; c < ncpu; c++)
			ret[k] += vals[c];
		for (uint32_t c = 0; c < fp->scratch_cpus; c++)
			ret[k] += scratch_count(fp, c, k);
	}
	free(vals);
	return r;
}

/* The kernel's 16-byte client key (IPv4 as ::ffff:a.b.c.d) as the address it stands for. */
static void client_ip(const uint8_t key[16], struct ndc_ip *out)
{
	static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

	if (memcmp(key, v4mapped, sizeof(v4mapped)) == 0) {
		out->family = AF_INET;
		memcpy(out->addr, key + 12, 4);
	} else {
		out->family = AF_INET6;
		memcpy(out->addr, key, 16);
	}
}

/*
 * The config words of what the kernel shows (abi.h NDC_FP_C_CLIENTS, sample): the flag set in or
 * cleared from *flags, the rate as a threshold against a random 32-bit number. -EINVAL for a rate
 * outside [0, 1] (NaN too).
 */
int ndc_fp_observe_words(bool clients, double rate, uint32_t *flags, uint32_t *ret_sample)
{
	if (!(rate >= 0.0 && rate <= 1.0)) {
		ndc_err("fast path: kernel sample rate %g is not between 0 and 1", rate);
		return -EINVAL;
	}
	*flags = clients ? *flags | NDC_FP_C_CLIENTS : *flags & ~(uint32_t)NDC_FP_C_CLIENTS;
	/* 1.0 samples all but one in 2^32 */
	*ret_sample = rate >= 1.0 ? UINT32_MAX : (uint32_t)(rate * 4294967296.0);
	return 0;
}

/* A record of ndc_samples (abi.h struct ndc_fp_sample_rec) to the poll's callback. */
int ndc_fp_on_sample(void *ctx, void *data, size_t size)
{
	const struct ndc_fp_sample_rec *r = data;
	struct ndc_fp *fp = ctx;
	struct ndc_fp_sample smp;

	if (size < sizeof(*r) || !fp->sample_cb)
		return 0;
	memset(&smp, 0, sizeof(smp));
	client_ip(r->client, &smp.client);
	smp.client_port = ntohs(r->client_port);
	smp.ktime_ns = r->ktime_ns;
	smp.len = r->len <= sizeof(smp.msg) ? r->len : sizeof(smp.msg); /* the kernel's word */
	memcpy(smp.msg, r->msg, smp.len);
	fp->sample_cb(&smp, fp->sample_arg);
	return 0;
}

/* A client's counts from one CPU's slot: its key and what that CPU counted there. */
struct client_row {
	struct ndc_fp_client_key key;
	struct ndc_fp_client_counts c;
};

static int row_cmp(const void *x, const void *y)
{
	return memcmp(((const struct client_row *)x)->key.addr,
		      ((const struct client_row *)y)->key.addr, sizeof(struct ndc_fp_client_key));
}

/* The used slots among n appended to *rows. */
static int rows_add(const struct ndc_fp_client_slot *vals, size_t n, struct client_row **rows,
		    size_t *nrows, size_t *cap)
{
	for (size_t i = 0; i < n; i++) {
		if (!vals[i].counts.queries)
			continue; /* empty on that CPU */
		if (*nrows == *cap) {
			size_t ncap = *cap ? *cap * 2 : 64;
			struct client_row *nr = realloc(*rows, ncap * sizeof(*nr));

			if (!nr)
				return -ENOMEM;
			*rows = nr;
			*cap = ncap;
		}
		(*rows)[*nrows].key = vals[i].key;
		(*rows)[*nrows].c = vals[i].counts;
		(*nrows)++;
	}
	return 0;
}

/* The kernel's "operation not supported" (include/linux/errno.h), as old kernels say it. */
#define NDC_ENOTSUPP 524

/* Slots read at once (64 bytes each). */
#define BATCH 1024

/*
 * Every used slot of ndc_clients (abi.h, struct ndc_fp_client_slot: nkeys, every CPU's) into
 * *rows: in batches, else (a kernel without batch lookups of arrays) key by key.
 */
static int rows_read(int fd, __u32 nkeys, struct client_row **rows, size_t *nrows)
{
	struct ndc_fp_client_slot *vals = calloc(BATCH, sizeof(*vals));
	__u32 keys[BATCH], in = 0, out = 0, idx;
	bool started = false;
	size_t cap = 0;
	int r = 0;

	if (!vals)
		return -ENOMEM;
	for (;;) {
		__u32 n = BATCH;
		int e;

		LIBBPF_OPTS(bpf_map_batch_opts, o);
		e = bpf_map_lookup_batch(fd, started ? &in : NULL, &out, keys, vals, &n, &o) < 0
			? errno
			: 0;
		if (e && e != ENOENT) {
			r = -e;
			break;
		}
		/* ENOENT: the end, n the last keys read */
		r = rows_add(vals, n, rows, nrows, &cap);
		if (r < 0 || e == ENOENT || n == 0)
			break;
		in = out;
		started = true;
	}
	if (r == -EINVAL || r == -EOPNOTSUPP || r == -NDC_ENOTSUPP) {
		/* no batch ops: one key at a time */
		*nrows = 0;
		r = 0;
		for (idx = 0; idx < nkeys && r == 0; idx++) {
			if (bpf_map_lookup_elem(fd, &idx, vals) < 0) {
				r = -errno;
				break;
			}
			r = rows_add(vals, 1, rows, nrows, &cap);
		}
	}
	free(vals);
	return r;
}

int ndc_fastpath_clients(struct ndc_fp *fp, int (*cb)(const struct ndc_fp_client *c, void *arg),
			 void *arg)
{
	struct client_row *rows = NULL;
	size_t nrows = 0;
	int r;

	if (!fp || !cb)
		return -EINVAL;
	/*
	 * The kernel takes slots over meanwhile: a slot read while its CPU rewrites it may show its
	 * new key with part of the old owner's counts (counts are approximate, never a crash). A
	 * client can hold different slots on different CPUs: sorted by key, each address once.
	 */
	r = rows_read(bpf_map__fd(fp->skel->maps.ndc_clients),
		      bpf_map__max_entries(fp->skel->maps.ndc_clients), &rows, &nrows);
	if (r < 0)
		goto cleanup;
	if (nrows) /* qsort's base must not be NULL, even for no rows (UBSan) */
		qsort(rows, nrows, sizeof(*rows), row_cmp);
	for (size_t i = 0; i < nrows;) {
		struct ndc_fp_client c = {0};
		size_t j = i;

		client_ip(rows[i].key.addr, &c.addr);
		for (; j < nrows && row_cmp(&rows[i], &rows[j]) == 0; j++) {
			c.queries += rows[j].c.queries;
			c.answered += rows[j].c.answered;
			c.nxdomain += rows[j].c.nxdomain;
			c.passed += rows[j].c.passed;
		}
		i = j;
		r = cb(&c, arg);
		if (r)
			break;
	}
cleanup:
	free(rows);
	return r;
}

int ndc_fastpath_clients_taken(struct ndc_fp *fp, uint64_t *ret)
{
	if (!fp)
		return -EINVAL;
	/* the program's global, through the skeleton's mapping of .bss */
	*ret = __atomic_load_n(&fp->skel->bss->ndc_clients_taken, __ATOMIC_RELAXED);
	return 0;
}

int ndc_fastpath_samples_poll(struct ndc_fp *fp, int timeout_ms,
			      void (*cb)(const struct ndc_fp_sample *s, void *arg), void *arg)
{
	int r;

	if (!fp || !cb)
		return -EINVAL;
	fp->sample_cb = cb;
	fp->sample_arg = arg;
	r = ring_buffer__poll(fp->samples, timeout_ms);
	fp->sample_cb = NULL;
	fp->sample_arg = NULL;
	return r;
}

int ndc_fastpath_samples_fd(struct ndc_fp *fp)
{
	return fp ? ring_buffer__epoll_fd(fp->samples) : -EINVAL;
}

int ndc_fastpath_samples_lost(struct ndc_fp *fp, uint64_t *ret)
{
	if (!fp)
		return -EINVAL;
	/* the program's global, through the skeleton's mapping of .bss */
	*ret = __atomic_load_n(&fp->skel->bss->ndc_samples_lost, __ATOMIC_RELAXED);
	return 0;
}

int ndc_fastpath_set_observe(struct ndc_fp *fp, bool clients, double kernel_sample)
{
	uint32_t flags = 0, sample;
	int r;

	if (!fp)
		return -EINVAL;
	r = ndc_fp_observe_words(clients, kernel_sample, &flags, &sample);
	if (r < 0)
		return r;
	/* one atomic store each, through the mapping the program reads (as set_synced) */
	if (clients)
		__atomic_fetch_or(&fp->cfg->flags, NDC_FP_C_CLIENTS, __ATOMIC_RELEASE);
	else
		__atomic_fetch_and(&fp->cfg->flags, ~(uint32_t)NDC_FP_C_CLIENTS, __ATOMIC_RELEASE);
	__atomic_store_n(&fp->cfg->sample, sample, __ATOMIC_RELEASE);
	return 0;
}
