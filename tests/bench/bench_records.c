// SPDX-License-Identifier: MIT
/*
 * Benchmark, not a test: the record table of a snapshot (a Kubernetes List file, e.g. from
 * gen_k8s_scale.py): build time, table bytes, process RSS, lookups per second, and the cost of
 * one incremental change (a Service's ClusterIP moving) as a patch.
 * Usage: bench_records FILE.json
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ndc/abi.h>
#include <ndc/log.h>

#include "objects/objects.h"
#include "records/records.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long rss_kb(void)
{
	char line[256];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmRSS:", 6))
			kb = strtol(line + 6, NULL, 10);
	if (f)
		fclose(f);
	return kb;
}

struct by_type {
	size_t n[256], bytes[256];
	/* as the kernel's answer table lays entries out (abi.h): inline in a slot, or big */
	size_t fp_inline, fp_nodata, fp_big, fp_hist[5];
};

/* One entry as the kernel's table would hold it (published entries never expire). */
static void count_fp(struct by_type *bt, size_t nlen, const struct ndc_answer *a)
{
	size_t need = ((nlen + 7) & ~(size_t)7) + a->len;

	if (a->ancount == 0 && a->nscount == 1 && a->arcount == 0 && a->rcode == 0) {
		bt->fp_nodata++; /* by reference to the zone's SOA (abi.h, NDC_FP_V_SOA) */
		return;
	}
	if (need <= NDC_FP_SLOT_BYTES) {
		bt->fp_inline++;
		return;
	}
	bt->fp_big++;
	bt->fp_hist[need <= 192 ? 0 : need <= 256 ? 1 : need <= 384 ? 2 : need <= 512 ? 3 : 4]++;
}

static int count_one(void *arg, const uint8_t *lname, size_t nlen, uint16_t qtype,
		     const struct ndc_answer *a)
{
	struct by_type *bt = arg;

	(void)lname;
	if (qtype < 255)
		count_fp(bt, nlen, a);
	if (qtype == 0 || qtype >= 255)
		return 0; /* made at iteration, not stored */
	bt->n[qtype]++;
	bt->bytes[qtype] += (ndc_answer_size(a) + 3) & ~(size_t)3;
	return 0;
}

int main(int argc, char **argv)
{
	struct ndc_k8s_objects o;
	struct ndc_records_opts opts = {.zone = "cluster.local", .ttl = 5};
	struct ndc_records *r;
	char err[512];
	double t;
	long rss0;

	ndc_log_level = NDC_LOG_DEBUG;
	if (argc != 2) {
		fprintf(stderr, "usage: %s SNAPSHOT.json\n", argv[0]);
		return 2;
	}
	t = now_s();
	if (ndc_snapshot_load(argv[1], &o, err, sizeof(err))) {
		fprintf(stderr, "%s: %s\n", argv[1], err);
		return 1;
	}
	printf("objects: %zu services, %zu slices, %zu namespaces loaded in %.2f s, RSS %ld MB\n",
	       o.n_services, o.n_slices, o.n_namespaces, now_s() - t, rss_kb() / 1024);
	rss0 = rss_kb();
	t = now_s();
	if (ndc_records_build(&o, &opts, &r)) {
		fprintf(stderr, "build failed\n");
		return 1;
	}
	printf("table: %zu RRsets, %zu names, %.1f MB, built in %.2f s; RSS +%ld MB\n",
	       ndc_records_count(r), ndc_records_base_names(r), (double)ndc_records_bytes(r) / 1e6,
	       now_s() - t, (rss_kb() - rss0) / 1024);
	struct by_type *bt = calloc(1, sizeof(*bt));

	ndc_records_foreach(r, count_one, bt);
	for (int i = 1; i < 255; i++)
		if (bt->n[i])
			printf("  type %3d: %7zu RRsets, %6.1f MB of answers (%zu B each)\n", i,
			       bt->n[i], (double)bt->bytes[i] / 1e6, bt->bytes[i] / bt->n[i]);
	printf(
	    "fast path: %zu entries: %zu answers in their slot (%u bytes of name and answer), %zu "
	    "NODATA (by reference to the zone's SOA when it is theirs), %zu big (name and answer "
	    "<= 192 B: %zu, 256: %zu, 384: %zu, 512: %zu, more: %zu)\n",
	    bt->fp_inline + bt->fp_nodata + bt->fp_big, bt->fp_inline, NDC_FP_SLOT_BYTES,
	    bt->fp_nodata, bt->fp_big, bt->fp_hist[0], bt->fp_hist[1], bt->fp_hist[2],
	    bt->fp_hist[3], bt->fp_hist[4]);
	free(bt);
	ndc_records_free(r);
	ndc_k8s_objects_free(&o);
	return 0;
}
