// SPDX-License-Identifier: MIT
/*
 * What the kernel shows of its clients (issue 37): the config words that turn per-client counting
 * and answer sampling on, the per-client table's walk (summed over CPUs) and the sampled answers'
 * ring. fastpath.c loads the maps; this file reads them.
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

int ndc_fastpath_clients(struct ndc_fp *fp, int (*cb)(const struct ndc_fp_client *c, void *arg),
			 void *arg)
{
	int ncpu = libbpf_num_possible_cpus(), fd, r = 0;
	struct ndc_fp_client_key key, next;
	struct ndc_fp_client_counts *vals;
	bool first = true;

	if (!fp || !cb)
		return -EINVAL;
	if (ncpu <= 0)
		return ncpu < 0 ? ncpu : -EINVAL;
	fd = bpf_map__fd(fp->skel->maps.ndc_clients);
	/* per CPU: one 8-byte-aligned value each (32 bytes) */
	vals = calloc((size_t)ncpu, sizeof(*vals));
	if (!vals)
		return -ENOMEM;
	/*
	 * The kernel adds and evicts clients meanwhile: a key gone between next_key and lookup is
	 * skipped; one evicted under the walk may restart it from the first key, so a client can
	 * be seen twice then (rare: the table is far from full on a node).
	 */
	while (bpf_map_get_next_key(fd, first ? NULL : &key, &next) == 0) {
		struct ndc_fp_client c = {0};

		first = false;
		key = next;
		if (bpf_map_lookup_elem(fd, &key, vals) < 0) {
			if (errno == ENOENT)
				continue;
			r = -errno;
			break;
		}
		client_ip(key.addr, &c.addr);
		for (int i = 0; i < ncpu; i++) {
			c.queries += vals[i].queries;
			c.answered += vals[i].answered;
			c.nxdomain += vals[i].nxdomain;
			c.passed += vals[i].passed;
		}
		r = cb(&c, arg);
		if (r)
			break;
	}
	free(vals);
	return r;
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
