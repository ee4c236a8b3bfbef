// SPDX-License-Identifier: MIT
/*
 * Memory latency of this machine, for tests/bench/latency_bench.sh: how long one load waits when
 * what it reads is not in any cache. The fast path's cost over many names is its wait for the
 * answer's slot, evicted between visits (docs/bench/FASTPATH.md); this is the scale that wait is
 * measured against, in the same run.
 *
 * A pointer chase: every 64-byte line of a buffer holds the address of the next line to read, in
 * one random cycle through all of them, so each load depends on the one before (no overlap) and
 * no prefetcher can guess the next address. With a buffer far beyond the last-level cache nearly
 * every load goes to DRAM. Twice: with 4 KiB pages (as the kernel's vmalloc'd BPF arrays are
 * mapped, so a TLB miss and page walk come with most loads) and with transparent huge pages where
 * the kernel grants them (the load alone, or nearly).
 *
 * Usage: bench_memlat [-m MIB] [-n LOADS]   (pin it with taskset)
 *   -m MIB     buffer size (256; at least 8x the last-level cache for a DRAM figure)
 *   -n LOADS   loads timed per pass (5,000,000)
 * Output: one JSON object: mib, loads, ns_4k, ns_huge (null when no huge page was granted),
 * huge_kib (AnonHugePages of the buffer). Exit 0, 1 on errors, 2 on bad usage.
 */

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define LINE 64

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* xorshift64*: a permutation's randomness, not a secret */
static uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1dULL;
}

/* The buffer's AnonHugePages in KiB, from /proc/self/smaps; -1 when it cannot be read. */
static long huge_kib(const void *buf)
{
	char line[256], want[32];
	FILE *f = fopen("/proc/self/smaps", "r");
	long kib = -1;
	int in = 0;

	if (!f)
		return -1;
	snprintf(want, sizeof(want), "%lx-", (unsigned long)(uintptr_t)buf);
	while (fgets(line, sizeof(line), f)) {
		if (strchr(line, '-') && strchr(line, ' ') && strchr(line, '-') < strchr(line, ' '))
			in = strncmp(line, want, strlen(want)) == 0;
		else if (in && sscanf(line, "AnonHugePages: %ld kB", &kib) == 1)
			break;
	}
	fclose(f);
	return kib;
}

/*
 * One pass: a random cycle through the buffer's lines, then n dependent loads along it. ns per
 * load, or -1 on errors. *ret_huge: the buffer's huge-page KiB.
 */
static double chase(size_t bytes, int huge, long n, long *ret_huge)
{
	size_t lines = bytes / LINE;
	uint32_t *order;
	uint64_t seed = 0x9e3779b97f4a7c15ULL;
	char *buf, *p;
	double t;

	buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED)
		return -1;
	madvise(buf, bytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
	memset(buf, 0, bytes); /* fault every page in now, not during the timed loads */
	order = malloc(lines * sizeof(*order));
	if (!order) {
		munmap(buf, bytes);
		return -1;
	}
	for (size_t i = 0; i < lines; i++)
		order[i] = (uint32_t)i;
	for (size_t i = lines - 1; i > 0; i--) { /* Fisher-Yates */
		size_t j = rnd(&seed) % (i + 1);
		uint32_t x = order[i];

		order[i] = order[j];
		order[j] = x;
	}
	for (size_t i = 0; i < lines; i++)
		*(char **)(buf + (size_t)order[i] * LINE) =
		    buf + (size_t)order[(i + 1) % lines] * LINE;
	free(order);
	*ret_huge = huge_kib(buf);
	p = buf;
	for (long i = 0; i < (long)(lines / 4) && i < n / 4; i++) /* warm the TLB a little */
		p = *(char **)p;
	t = now_s();
	for (long i = 0; i < n; i++)
		p = *(char **)p;
	t = now_s() - t;
	/* keep the chase: its last pointer is used */
	if (p == NULL)
		t = -1;
	munmap(buf, bytes);
	return t < 0 ? -1 : t * 1e9 / (double)n;
}

static int usage(void)
{
	fprintf(stderr, "usage: bench_memlat [-m MIB] [-n LOADS]\n");
	return 2;
}

int main(int argc, char **argv)
{
	long mib = 256, n = 5000000, hk4 = 0, hkh = 0;
	double ns4, nsh;
	char *end;
	int o;

	while ((o = getopt(argc, argv, "m:n:")) != -1) {
		errno = 0;
		switch (o) {
		case 'm':
			mib = strtol(optarg, &end, 10);
			if (errno || *end || mib < 1 || mib > 65536)
				return usage();
			break;
		case 'n':
			n = strtol(optarg, &end, 10);
			if (errno || *end || n < 1000 || n > 1000000000)
				return usage();
			break;
		default:
			return usage();
		}
	}
	if (optind != argc)
		return usage();
	ns4 = chase((size_t)mib << 20, 0, n, &hk4);
	nsh = chase((size_t)mib << 20, 1, n, &hkh);
	if (ns4 < 0 || nsh < 0) {
		fprintf(stderr, "bench_memlat: %ld MiB: %s\n", mib,
			strerror(errno ? errno : ENOMEM));
		return 1;
	}
	printf("{\"mib\": %ld, \"loads\": %ld, \"ns_4k\": %.1f, ", mib, n, ns4);
	if (hkh > 0)
		printf("\"ns_huge\": %.1f, ", nsh);
	else
		printf("\"ns_huge\": null, ");
	printf("\"huge_kib\": %ld}\n", hkh);
	return 0;
}
