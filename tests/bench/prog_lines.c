// SPDX-License-Identifier: MIT
/*
 * Where each source line of a loaded BPF program landed in its JITed image: one line per line-info
 * record, "address<TAB>file:line<TAB>source", after a header line "# ksym ADDR len N" for each
 * function of its image (the program, then its BPF-to-BPF callees, each JITed apart). With the
 * samples of `perf record -e cpu-clock` (tests/bench/perf_lines.py) this gives a profile per
 * source line of the JITed program, which perf annotate cannot give here (perf 6.1 is built
 * without libopcode for BPF, and bpftool without libbfd cannot dump the JITed image).
 *
 * Usage: bench_prog_lines PROG_ID   (root)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>

int main(int argc, char **argv)
{
	struct bpf_prog_info info = {0};
	struct bpf_line_info *li = NULL;
	struct btf *btf = NULL;
	__u64 *jli = NULL, ksyms[64] = {0};
	__u32 len = sizeof(info), n, nfuncs, flens[64] = {0};
	int fd, err = 1;

	if (argc != 2) {
		fprintf(stderr, "usage: bench_prog_lines PROG_ID\n");
		return 2;
	}
	fd = bpf_prog_get_fd_by_id((__u32)strtoul(argv[1], NULL, 10));
	if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &len)) {
		fprintf(stderr, "bench_prog_lines: program %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	n = info.nr_jited_line_info < info.nr_line_info ? info.nr_jited_line_info
							: info.nr_line_info;
	li = calloc(n ? n : 1, sizeof(*li));
	jli = calloc(n ? n : 1, sizeof(*jli));
	if (!li || !jli)
		goto out;
	__u32 btf_id = info.btf_id;

	nfuncs = info.nr_jited_ksyms < 64 ? info.nr_jited_ksyms : 64;

	memset(&info, 0, sizeof(info));
	info.nr_line_info = n;
	info.line_info_rec_size = sizeof(*li);
	info.line_info = (__u64)(unsigned long)li;
	info.nr_jited_line_info = n;
	info.jited_line_info_rec_size = sizeof(*jli);
	info.jited_line_info = (__u64)(unsigned long)jli;
	info.nr_jited_ksyms = nfuncs;
	info.jited_ksyms = (__u64)(unsigned long)ksyms;
	info.nr_jited_func_lens = nfuncs;
	info.jited_func_lens = (__u64)(unsigned long)flens;
	len = sizeof(info);
	if (bpf_obj_get_info_by_fd(fd, &info, &len)) {
		fprintf(stderr, "bench_prog_lines: line info: %s\n", strerror(errno));
		goto out;
	}
	btf = btf__load_from_kernel_by_id(btf_id);
	for (__u32 f = 0; f < nfuncs; f++)
		printf("# ksym %llx len %u\n", (unsigned long long)ksyms[f], flens[f]);
	for (__u32 i = 0; i < n; i++) {
		const char *file = btf ? btf__name_by_offset(btf, li[i].file_name_off) : NULL;
		const char *src = btf ? btf__name_by_offset(btf, li[i].line_off) : NULL;
		const char *base = file ? strrchr(file, '/') : NULL;

		printf("%llx\t%s:%u\t%s\n", (unsigned long long)jli[i],
		       base ? base + 1 : (file ? file : "?"),
		       BPF_LINE_INFO_LINE_NUM(li[i].line_col), src ? src : "");
	}
	err = 0;
out:
	btf__free(btf);
	free(li);
	free(jli);
	close(fd);
	return err;
}
