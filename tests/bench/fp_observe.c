// SPDX-License-Identifier: MIT
/*
 * Benchmark tool: sets what a loaded fast path shows of its queries (include/ndc/abi.h: config
 * flag NDC_FP_C_CLIENTS and word sample), as ndc_fastpath_set_observe does from inside the agent,
 * from outside it: latency_bench.sh --clients and --base-clients measure the program's cost with
 * per-client counting on and off without a config key (the agent's is log.clients).
 *
 *   bench_fp_observe PROG_ID on|off [RATE]
 *
 * PROG_ID: a program of the fast path (the one attached to the benchmark's link); its map
 * ndc_config is found among the program's maps and written through a shared mapping with one
 * atomic store per word. RATE: the kernel sample rate, 0 to 1 (default: left as it is).
 * Exit 0, or 1 with a message.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include <ndc/abi.h>

static int config_fd_of(__u32 prog_id)
{
	__u32 ids[64], n = 64;
	struct bpf_prog_info info = {0};
	__u32 len = sizeof(info);
	int pfd = bpf_prog_get_fd_by_id(prog_id), r = -1;

	if (pfd < 0) {
		fprintf(stderr, "fp_observe: no program %u: %s\n", prog_id, strerror(errno));
		return -1;
	}
	info.nr_map_ids = n;
	info.map_ids = (__u64)(unsigned long)ids;
	if (bpf_obj_get_info_by_fd(pfd, &info, &len) < 0) {
		fprintf(stderr, "fp_observe: program %u: %s\n", prog_id, strerror(errno));
		goto out;
	}
	for (__u32 i = 0; i < info.nr_map_ids && i < n && r < 0; i++) {
		struct bpf_map_info mi = {0};
		__u32 mlen = sizeof(mi);
		int fd = bpf_map_get_fd_by_id(ids[i]);

		if (fd < 0)
			continue;
		if (bpf_obj_get_info_by_fd(fd, &mi, &mlen) == 0 &&
		    strcmp(mi.name, "ndc_config") == 0 &&
		    mi.value_size == sizeof(struct ndc_fp_config))
			r = fd;
		else
			close(fd);
	}
	if (r < 0)
		fprintf(stderr, "fp_observe: program %u has no ndc_config of this ABI\n", prog_id);
out:
	close(pfd);
	return r;
}

int main(int argc, char **argv)
{
	struct ndc_fp_config *cfg;
	char *end;
	unsigned long id;
	double rate = -1;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t bytes = (sizeof(*cfg) + page - 1) / page * page;
	int fd;
	int on;

	if (argc < 3 || argc > 4 || (strcmp(argv[2], "on") != 0 && strcmp(argv[2], "off") != 0)) {
		fprintf(stderr, "usage: bench_fp_observe PROG_ID on|off [RATE]\n");
		return 1;
	}
	id = strtoul(argv[1], &end, 10);
	if (*end || !id || id > UINT32_MAX) {
		fprintf(stderr, "fp_observe: bad program id '%s'\n", argv[1]);
		return 1;
	}
	on = strcmp(argv[2], "on") == 0;
	if (argc == 4) {
		rate = strtod(argv[3], &end);
		if (*end || !(rate >= 0 && rate <= 1)) {
			fprintf(stderr, "fp_observe: rate '%s' is not between 0 and 1\n", argv[3]);
			return 1;
		}
	}
	fd = config_fd_of((__u32)id);
	if (fd < 0)
		return 1;
	cfg = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (cfg == MAP_FAILED) {
		fprintf(stderr, "fp_observe: cannot map ndc_config: %s\n", strerror(errno));
		close(fd);
		return 1;
	}
	if (cfg->abi_version != NDC_ABI_VERSION) {
		fprintf(stderr, "fp_observe: ndc_config is ABI %u, this tool %u\n",
			cfg->abi_version, NDC_ABI_VERSION);
		munmap(cfg, bytes);
		close(fd);
		return 1;
	}
	if (on)
		__atomic_fetch_or(&cfg->flags, NDC_FP_C_CLIENTS, __ATOMIC_RELEASE);
	else
		__atomic_fetch_and(&cfg->flags, ~(__u32)NDC_FP_C_CLIENTS, __ATOMIC_RELEASE);
	if (rate >= 0)
		__atomic_store_n(&cfg->sample,
				 rate >= 1 ? UINT32_MAX : (__u32)(rate * 4294967296.0),
				 __ATOMIC_RELEASE);
	printf("program %lu: per-client counting %s, flags 0x%x, sample %u\n", id, argv[2],
	       cfg->flags, cfg->sample);
	munmap(cfg, bytes);
	close(fd);
	return 0;
}
