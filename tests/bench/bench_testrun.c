// SPDX-License-Identifier: MIT
/*
 * Nanoseconds per packet of the fast path and of the bare reflector, through BPF_PROG_TEST_RUN.
 *
 * Both programs rewrite the packet in place, and a test run with repeat > 1 runs the program
 * again on the rewritten buffer (a reply, which every later run passes). So each case is measured
 * as many single runs, averaging the duration the kernel reports for each. That duration includes
 * the kernel's clock reads around the run: *_overhead_ns is the same figure for a program that
 * returns at once (the reflector given a TCP packet), to subtract; *_repeat_ns measures a pass
 * with repeat, where the clock reads are spread over the repetitions.
 * Output: one "name value" line per case, plain text.
 *
 * The *_many_ns cases cycle through the A queries of N distinct names (default 10000), each
 * published with the kubernetes service's answer: the table's working set is then far bigger than
 * the caches, as it is for a node's pods asking for every service of a big cluster; the
 * reflector's *_many_ns runs on the same frames.
 *
 * Usage: bench_testrun [runs [filter [N [table]]]]   (default 200000 per case; needs root)
 * table: the answer table's size (dataplane.table_size; default 65536).
 * With filter, only the cases whose name contains it (e.g. "xdp_a_hit", for perf record).
 *
 * For tests/bench/steps_bench.sh (issue 35), from the environment:
 *   NDC_BENCH_OBJECT=FILE            the fast path loaded from another build of its object (a
 *                                    build that stops after one step of the hit path)
 *   NDC_BENCH_ANY_VERDICT=1          the verdicts are not checked (such a build passes early)
 *   NDC_BENCH_ANSWER_REFLECTOR=FILE  cases tc_answer_reflector_ns and xdp_answer_reflector_ns:
 *                                    tests/bench/bpf/ndc_answer_reflector.bpf.o on the hit
 *   NDC_BENCH_FAILOPEN=1             fail-open on (an upstream at 169.254.20.53:53, data only), as
 *                                    the agent runs it; case tc_egress_reply_ns: the tc egress
 *                                    program on the tc hit's reply
 *   NDC_BENCH_CLIENTS=1              per-client counting on (log.clients, the agent's default;
 *                                    off here unless set, as in the figures before ABI 11)
 *   NDC_BENCH_COLD_KIB=N             before every run, write one byte of each 64 of an N KiB
 *                                    buffer (not timed): the run finds its lines and pages
 *                                    evicted from this CPU's caches and TLB, as a packet does
 *                                    under traffic (the generator's and the kernel's work
 *                                    between two); pin the process to one CPU. Each case's
 *                                    figure is then the median of its runs, not their mean (a
 *                                    cold run's time has a long tail: the host's other tenants)
 *   NDC_BENCH_COLD_CODE_KIB=N        before every run (and after the above), run N KiB of code
 *                                    (x86-64 only): a chain of 64-byte blocks, each a jump taken
 *                                    over the rest of its line, so that every line is fetched and
 *                                    every block's branch is one more the predictors track: the
 *                                    run finds its program's code and branch history evicted as
 *                                    the stack's and the generator's code between two packets
 *                                    leave them under traffic (not timed; medians, as above)
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <linux/bpf.h>
#include <linux/pkt_cls.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <ndc/abi.h>
#include <ndc/dns_wire.h>

#include "../bpf/packets.h"
#include "fastpath/fastpath.h"
#include "fastpath/fastpath_test.h"
#include "objects/objects.h"
#include "ndc_reflector.skel.h"
#include "records/records.h"

#define REPEAT_PASS 1000000

static const uint8_t node4[16] = {169, 254, 20, 10};
static const uint8_t client4[16] = {169, 254, 1, 2};
static bool any_verdict;
static uint8_t *cold;
static size_t cold_len, cold_stride = 64;
static void (*cold_code)(void);
static size_t cold_code_len;

/*
 * len bytes (a multiple of 64) of code to run before each run: blocks of 64 bytes, each a short
 * jump to the next block (taken) over int3s never run, the last a return. 0 or a negative errno.
 */
static int cold_code_make(size_t len)
{
#if defined(__x86_64__)
	uint8_t *c;

	if (len < 64 || len % 64)
		return -EINVAL;
	c = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (c == MAP_FAILED)
		return -errno;
	memset(c, 0xcc, len); /* int3 */
	for (size_t b = 0; b + 64 < len; b += 64) {
		c[b] = 0xeb;	   /* jmp rel8 */
		c[b + 1] = 64 - 2; /* to the next block */
	}
	c[len - 64] = 0xc3; /* ret */
	if (mprotect(c, len, PROT_READ | PROT_EXEC)) {
		int err = -errno;

		munmap(c, len);
		return err;
	}
	cold_code = (void (*)(void))(void *)c;
	cold_code_len = len;
	return 0;
#else
	(void)len;
	return -EOPNOTSUPP;
#endif
}

/* Whether the environment sets name to 1. */
static bool env_on(const char *name)
{
	const char *v = getenv(name);

	return v && !strcmp(v, "1");
}

struct frame {
	uint8_t b[NDC_PKT_MAX];
	size_t len;
};

static int query_frame(const char *name, uint16_t qtype, uint8_t protocol, uint16_t dport,
		       struct frame *f)
{
	struct ndc_pkt_addrs a = {.sport = 40000,
				  .dport = dport,
				  .src_mac = {2, 0, 0, 0, 0, 2},
				  .dst_mac = {2, 0, 0, 0, 0, 1}};
	struct ndc_pkt_opts o = {.protocol = protocol};
	struct ndc_pkt_query q = {.id = 0x1234, .flags = 0x0100, .name = name, .qtype = qtype};
	uint8_t dns[NDC_PKT_MAX];
	size_t dlen;
	int err;

	memcpy(a.saddr, client4, 4);
	memcpy(a.daddr, node4, 4);
	err = ndc_pkt_dns_query(&q, dns, sizeof(dns), &dlen);
	if (!err)
		err = ndc_pkt_build(&a, &o, dns, dlen, f->b, sizeof(f->b), &f->len);
	return err;
}

/*
 * Average ns of one program run over runs single test runs (or one run with repeat), cycling
 * through the nf frames at f.
 */
static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

/*
 * SIGINT or SIGTERM (perf_lines.py's recipe ends a run with kill): the case in progress stops,
 * and main closes the fast path, which removes its pins (/sys/fs/bpf/ndc-bench-PID), as at a
 * normal end.
 */
static volatile sig_atomic_t stopped;

static void on_stop(int sig)
{
	(void)sig;
	stopped = 1;
}

static int measure(int prog_fd, const struct frame *f, size_t nf, uint32_t want, unsigned int runs,
		   unsigned int repeat, double *ret_ns)
{
	uint8_t out[NDC_PKT_MAX];
	uint64_t total = 0;
	bool median = cold_len || cold_code;
	uint32_t *each = median ? calloc(runs, sizeof(*each)) : NULL;

	if (median && !each)
		return -ENOMEM;

	for (unsigned int i = 0; i < runs; i++) {
		const struct frame *fi = &f[i % nf];
		LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = fi->b,
			    .data_size_in = (uint32_t)fi->len, .data_out = out,
			    .data_size_out = sizeof(out), .repeat = repeat);
		int err;

		if (stopped) {
			free(each);
			return -EINTR;
		}
		/* volatile: the writes are what evicts, never elided */
		for (size_t j = 0; j < cold_len; j += cold_stride)
			((volatile uint8_t *)cold)[j] = (uint8_t)i;
		if (cold_code)
			cold_code();
		err = bpf_prog_test_run_opts(prog_fd, &o);
		if (!err && o.retval != want && !any_verdict) {
			fprintf(stderr, "bench_testrun: verdict %u, expected %u\n", o.retval, want);
			err = -EPROTO;
		}
		if (err) {
			free(each);
			return err;
		}
		total += o.duration;
		if (each)
			each[i] = o.duration;
	}
	*ret_ns = (double)total / runs;
	if (each) {
		qsort(each, runs, sizeof(*each), cmp_u32);
		*ret_ns = each[runs / 2];
		free(each);
	}
	return 0;
}

/* The bytes of path in *ret (free the base), or a negative errno. */
static int read_all(const char *path, struct iovec *ret)
{
	struct stat sb;
	int fd = open(path, O_RDONLY | O_CLOEXEC), err = 0;

	ret->iov_base = NULL;
	if (fd < 0 || fstat(fd, &sb))
		err = -errno;
	else if (!(ret->iov_base = malloc((size_t)sb.st_size + 1)))
		err = -ENOMEM;
	else if (read(fd, ret->iov_base, (size_t)sb.st_size) != sb.st_size)
		err = -EIO;
	ret->iov_len = (size_t)sb.st_size;
	if (fd >= 0)
		close(fd);
	if (err)
		fprintf(stderr, "bench_testrun: cannot read %s: %s\n", path, strerror(-err));
	return err;
}

/* The frame the program at fd makes of f (its reply), in *ret. */
static int reply_of(int fd, const struct frame *f, struct frame *ret)
{
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = f->b, .data_size_in = (uint32_t)f->len,
		    .data_out = ret->b, .data_size_out = sizeof(ret->b), .repeat = 1);
	int err = bpf_prog_test_run_opts(fd, &o);

	ret->len = o.data_size_out;
	return err;
}

int main(int argc, char **argv)
{
	unsigned int runs = argc > 1 ? (unsigned int)strtoul(argv[1], NULL, 10) : 200000;
	const char *filter = argc > 2 ? argv[2] : NULL;
	size_t n_many = argc > 3 ? strtoul(argv[3], NULL, 10) : 10000;
	uint32_t table = argc > 4 ? (uint32_t)strtoul(argv[4], NULL, 10) : 0;
	struct frame *many = NULL;
	struct ndc_ip addr = {.family = AF_INET};
	uint8_t zone[NDC_NAME_MAX], lname[NDC_NAME_MAX];
	union {
		struct ndc_answer a;
		uint8_t b[sizeof(struct ndc_answer) + NDC_ANSWER_DATA_MAX];
	} ans;
	struct ndc_k8s_objects objs = {0};
	struct ndc_reflector *refl = NULL;
	struct ndc_records *rec = NULL;
	struct frame hit, nx, tcp, reply;
	const char *object = getenv("NDC_BENCH_OBJECT");
	const char *answer_refl = getenv("NDC_BENCH_ANSWER_REFLECTOR");
	bool failopen = env_on("NDC_BENCH_FAILOPEN");
	struct iovec obj = {0};
	struct bpf_object *aref = NULL;
	struct sockaddr_storage up = {0};
	struct sockaddr_in *up4 = (struct sockaddr_in *)&up;
	struct ndc_fp *fp = NULL;
	char pin_dir[64], err_text[256];
	size_t zlen, nlen;
	int err, tc, xdp;
	struct {
		const char *name;
		int fd;
		const struct frame *f;
		size_t nf;
		uint32_t want;
		unsigned int repeat;
	} cases[20];
	int n = 0;
	struct sigaction stop_action = {.sa_handler = on_stop};

	if (geteuid() != 0) {
		fprintf(stderr, "bench_testrun: needs root to load BPF programs\n");
		return 77;
	}
	if (runs == 0)
		runs = 1;
	if (sigaction(SIGINT, &stop_action, NULL) || sigaction(SIGTERM, &stop_action, NULL)) {
		perror("bench_testrun: sigaction");
		return 1;
	}
	memcpy(addr.addr, node4, 4);
	any_verdict = env_on("NDC_BENCH_ANY_VERDICT");
	if (getenv("NDC_BENCH_COLD_KIB")) {
		cold_len = strtoul(getenv("NDC_BENCH_COLD_KIB"), NULL, 10) * 1024;
		const char *how = getenv("NDC_BENCH_COLD_HOW");

		if (how && !strcmp(how, "pages"))
			cold_stride = 4096;
		if (cold_len && posix_memalign((void **)&cold, 2 << 20, cold_len)) {
			err = -ENOMEM;
			goto out;
		}
		if (cold_len)
			madvise(cold, cold_len,
				how && !strcmp(how, "huge") ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
	}
	if (getenv("NDC_BENCH_COLD_CODE_KIB")) {
		size_t kib = strtoul(getenv("NDC_BENCH_COLD_CODE_KIB"), NULL, 10);

		if (kib && (err = cold_code_make(kib * 1024))) {
			fprintf(stderr, "bench_testrun: NDC_BENCH_COLD_CODE_KIB: %s\n",
				strerror(-err));
			goto out;
		}
	}
	up4->sin_family = AF_INET;
	up4->sin_port = htons(53);
	up4->sin_addr.s_addr = htonl(0xa9fe1435); /* 169.254.20.53: data, nothing is sent */
	if (object && (err = read_all(object, &obj)))
		goto out;
	err = ndc_snapshot_parse(ndc_sample_cluster, ndc_sample_cluster_len, &objs, err_text,
				 sizeof(err_text));
	struct ndc_records_opts ro = {.zone = "cluster.local", .ttl = 5};
	if (!err)
		err = ndc_records_build(&objs, &ro, &rec);
	if (!err)
		err = ndc_name_from_text("cluster.local", zone, sizeof(zone), &zlen);
	if (err)
		goto out;
	snprintf(pin_dir, sizeof(pin_dir), "/sys/fs/bpf/ndc-bench-%d", (int)getpid());
	struct ndc_fastpath_opts fo = {.attach = NDC_FP_ATTACH_NONE,
				       .n_addrs = 1,
				       .addrs = &addr,
				       .port = 53,
				       .zone = zone,
				       .zone_len = zlen,
				       .pin_dir = pin_dir,
				       .max_entries = table,
				       .failopen = failopen,
				       .n_upstreams = failopen ? 1 : 0,
				       .upstreams = failopen ? &up : NULL,
				       .clients = env_on("NDC_BENCH_CLIENTS"),
				       .object = object ? &obj : NULL};
	err = ndc_fastpath_open(&fo, &fp);
	if (err)
		goto out;

	/* kubernetes.default.svc.cluster.local A, and the NXDOMAIN template, synced */
	err =
	    ndc_name_from_text("kubernetes.default.svc.cluster.local", lname, sizeof(lname), &nlen);
	if (!err)
		err = ndc_records_lookup(rec, lname, nlen, NDC_T_A, &ans.a, NDC_ANSWER_DATA_MAX);
	if (!err)
		err = ndc_fastpath_publish(fp, lname, nlen, NDC_T_A, &ans.a, 0);
	if (!err)
		err = ndc_records_nxdomain(rec, &ans.a, NDC_FP_DATA_MAX);
	if (!err)
		err = ndc_fastpath_set_nx(fp, &ans.a);
	if (!err)
		err = ndc_fastpath_set_synced(fp, true);
	if (!err)
		err = query_frame("kubernetes.default.svc.cluster.local", NDC_T_A, 0, 53, &hit);
	if (!err)
		err = query_frame("api.example.com.default.svc.cluster.local", NDC_T_A, 0, 53, &nx);
	if (!err)
		err = query_frame("kubernetes.default.svc.cluster.local", NDC_T_A, 6, 443, &tcp);
	if (err)
		goto out;
	/* N more names with the same answer: it points at the question, whatever its name */
	if (n_many == 0)
		n_many = 1;
	many = calloc(n_many, sizeof(*many));
	if (!many) {
		err = -ENOMEM;
		goto out;
	}
	err =
	    ndc_name_from_text("kubernetes.default.svc.cluster.local", lname, sizeof(lname), &nlen);
	if (!err)
		err = ndc_records_lookup(rec, lname, nlen, NDC_T_A, &ans.a, NDC_ANSWER_DATA_MAX);
	for (size_t i = 0; !err && i < n_many; i++) {
		char text[64];

		snprintf(text, sizeof(text), "svc-%05zu.ns-%03zu.svc.cluster.local", i, i % 100);
		err = ndc_name_from_text(text, lname, sizeof(lname), &nlen);
		if (!err) {
			ans.a.qname_len = (uint8_t)nlen;
			err = ndc_fastpath_publish(fp, lname, nlen, NDC_T_A, &ans.a, 0);
		}
		if (!err)
			err = query_frame(text, NDC_T_A, 0, 53, &many[i]);
	}
	if (err)
		goto out;
	refl = ndc_reflector__open_and_load();
	if (!refl) {
		err = -errno;
		goto out;
	}

	tc = ndc_fastpath_prog_fd(fp, NDC_FP_ATTACH_TC);
	xdp = ndc_fastpath_prog_fd(fp, NDC_FP_ATTACH_XDP);
	if (answer_refl) {
		aref = bpf_object__open_file(answer_refl, NULL);
		err = aref ? bpf_object__load(aref) : -errno;
		if (err)
			goto out;
	}
	err = reply_of(tc, &hit, &reply);
	if (err)
		goto out;
#define CASE(nm, f_, p, w, r) cases[n++] = (typeof(cases[0])){nm, p, f_, 1, w, r}
	CASE("tc_a_hit_ns", &hit, tc, TC_ACT_REDIRECT, 1);
	CASE("tc_nxdomain_ns", &nx, tc, TC_ACT_REDIRECT, 1);
	CASE("xdp_a_hit_ns", &hit, xdp, XDP_TX, 1);
	CASE("tc_nondns_pass_ns", &tcp, tc, NDC_TC_PASS, 1);
	CASE("tc_reflector_ns", &hit, bpf_program__fd(refl->progs.ndc_reflect_tc), TC_ACT_REDIRECT,
	     1);
	CASE("xdp_nxdomain_ns", &nx, xdp, XDP_TX, 1);
	CASE("xdp_reflector_ns", &hit, bpf_program__fd(refl->progs.ndc_reflect_xdp), XDP_TX, 1);
	CASE("tc_nondns_pass_repeat_ns", &tcp, tc, NDC_TC_PASS, REPEAT_PASS);
	CASE("tc_overhead_ns", &tcp, bpf_program__fd(refl->progs.ndc_reflect_tc), NDC_TC_PASS, 1);
	CASE("xdp_overhead_ns", &tcp, bpf_program__fd(refl->progs.ndc_reflect_xdp), XDP_PASS, 1);
	if (aref) {
		struct bpf_program *at =
		    bpf_object__find_program_by_name(aref, "ndc_answer_reflect_tc");
		struct bpf_program *ax =
		    bpf_object__find_program_by_name(aref, "ndc_answer_reflect_xdp");

		if (!at || !ax) {
			err = -ENOENT;
			goto out;
		}
		CASE("tc_answer_reflector_ns", &hit, bpf_program__fd(at), TC_ACT_REDIRECT, 1);
		CASE("xdp_answer_reflector_ns", &hit, bpf_program__fd(ax), XDP_TX, 1);
	}
	CASE("tc_egress_reply_ns", &reply, ndc_fastpath_egress_prog_fd(fp), NDC_TC_PASS, 1);
#undef CASE
	cases[n++] = (typeof(cases[0])){"tc_a_hit_many_ns", tc, many, n_many, TC_ACT_REDIRECT, 1};
	cases[n++] = (typeof(cases[0])){"xdp_a_hit_many_ns", xdp, many, n_many, XDP_TX, 1};
	cases[n++] = (typeof(cases[0])){"tc_reflector_many_ns",
					bpf_program__fd(refl->progs.ndc_reflect_tc),
					many,
					n_many,
					TC_ACT_REDIRECT,
					1};
	cases[n++] = (typeof(cases[0])){"xdp_reflector_many_ns",
					bpf_program__fd(refl->progs.ndc_reflect_xdp),
					many,
					n_many,
					XDP_TX,
					1};
	for (int i = 0; i < n; i++) {
		double ns;

		if (filter && !strstr(cases[i].name, filter))
			continue;
		err = measure(cases[i].fd, cases[i].f, cases[i].nf, cases[i].want,
			      cases[i].repeat > 1 ? 1 : runs, cases[i].repeat, &ns);
		if (err)
			goto out;
		printf("%s %.1f\n", cases[i].name, ns);
	}

out:
	if (err && stopped)
		fprintf(stderr, "bench_testrun: stopped by a signal\n");
	else if (err)
		fprintf(stderr, "bench_testrun: %s\n", strerror(err < 0 ? -err : err));
	free(many);
	free(cold);
	if (cold_code)
		munmap((void *)cold_code, cold_code_len);
	free(obj.iov_base);
	bpf_object__close(aref);
	ndc_reflector__destroy(refl);
	ndc_fastpath_close(fp);
	ndc_records_free(rec);
	ndc_k8s_objects_free(&objs);
	return err ? 1 : 0;
}
