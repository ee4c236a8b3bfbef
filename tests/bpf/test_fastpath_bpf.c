// SPDX-License-Identifier: MIT
/*
 * The fast path through BPF_PROG_TEST_RUN, both entry points (tc and XDP): the sample cluster's
 * records are published with the real publisher calls (ndc_fastpath_publish, set_nx, set_synced),
 * queries go in as Ethernet frames, and every reply must be byte-equal to what the socket path
 * writes for the same query (ndc_dns_write_reply), with addresses, ports, lengths and checksums
 * checked independently (packets.c). Every query the fast path must not answer must come back
 * untouched with NDC_TC_PASS / XDP_PASS and the right counter moved. Needs root (exit 77
 * otherwise). The table's write protocol is tested with a writer thread on one CPU and the program
 * on another (test_rewrite_while_read).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <linux/bpf.h>
#include <linux/pkt_cls.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include <ndc/abi.h>
#include <ndc/dns_wire.h>

#include "fastpath/fastpath.h"
#include "fastpath/fastpath_test.h"
#include "objects/objects.h"
#include "answer_rows.h"
#include "packets.h"
#include "records/records.h"

#define NONE (-1) /* no counter may move: not a query to us */
#define NS 1000000000ull

enum hook { TC = 0, XDP = 1 };
static const char *const hook_name[] = {"tc", "xdp"};

static struct {
	struct ndc_k8s_objects objs;
	struct ndc_records *rec;
	struct ndc_fp *fp;
	char pin_dir[64];
	int prog[2];
	int config_fd;
	union {
		struct ndc_answer a;
		uint8_t b[sizeof(struct ndc_answer) + NDC_FP_DATA_MAX];
	} nx;
} env;

/* ---------------------------------------------------------------------------------------------
 * Plumbing.
 */

static int publish_one(void *arg, const uint8_t *lname, size_t nlen, uint16_t qtype,
		       const struct ndc_answer *a)
{
	(void)arg;
	return ndc_fastpath_publish(env.fp, lname, nlen, qtype, a, 0);
}

/* NDC_TEST_OBJECT's bytes into *obj (NULL: none set): a build with a planted bug. */
static const struct iovec *object_from_env(struct iovec *obj)
{
	assert_int_equal(ndc_pkt_object_from_env("NDC_TEST_OBJECT", obj), 0);
	return obj->iov_base ? obj : NULL;
}

static struct iovec planted;

static int setup(void **state)
{
	struct ndc_ip addrs[2] = {{.family = AF_INET}, {.family = AF_INET6}};
	uint8_t zone[NDC_NAME_MAX], pass[NDC_NAME_MAX];
	size_t zlen, plen;
	char err[256], path[128];

	(void)state;
	memcpy(addrs[0].addr, ndc_pkt_node4, 4);
	memcpy(addrs[1].addr, ndc_pkt_node6, 16);
	assert_int_equal(ndc_snapshot_parse(ndc_sample_cluster, ndc_sample_cluster_len, &env.objs,
					    err, sizeof(err)),
			 0);
	struct ndc_records_opts ro = {.zone = "cluster.local", .ttl = 5};
	assert_int_equal(ndc_records_build(&env.objs, &ro, &env.rec), 0);

	assert_int_equal(ndc_name_from_text("cluster.local", zone, sizeof(zone), &zlen), 0);
	assert_int_equal(ndc_name_from_text("pod.cluster.local", pass, sizeof(pass), &plen), 0);
	snprintf(env.pin_dir, sizeof(env.pin_dir), "/sys/fs/bpf/ndc-test-%d", (int)getpid());
	struct ndc_fastpath_opts fo = {
	    .attach = NDC_FP_ATTACH_NONE,
	    .n_addrs = 2,
	    .addrs = addrs,
	    .port = 53,
	    .zone = zone,
	    .zone_len = zlen,
	    .pass = pass,
	    .pass_len = plen,
	    .max_entries = 4096,
	    .pin_dir = env.pin_dir,
	    .object = object_from_env(&planted),
	};
	assert_int_equal(ndc_fastpath_open(&fo, &env.fp), 0);
	env.prog[TC] = ndc_fastpath_prog_fd(env.fp, NDC_FP_ATTACH_TC);
	env.prog[XDP] = ndc_fastpath_prog_fd(env.fp, NDC_FP_ATTACH_XDP);
	assert_true(env.prog[TC] >= 0 && env.prog[XDP] >= 0);
	snprintf(path, sizeof(path), "%s/ndc_config", env.pin_dir);
	env.config_fd = bpf_obj_get(path);
	assert_true(env.config_fd >= 0);

	/* What the publisher does for a record table. */
	assert_int_equal(ndc_records_foreach(env.rec, publish_one, NULL), 0);
	assert_int_equal(ndc_records_nxdomain(env.rec, &env.nx.a, NDC_FP_DATA_MAX), 0);
	assert_int_equal(ndc_fastpath_set_nx(env.fp, &env.nx.a), 0);
	assert_int_equal(ndc_fastpath_set_synced(env.fp, true), 0);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	close(env.config_fd);
	ndc_fastpath_close(env.fp);
	ndc_records_free(env.rec);
	ndc_k8s_objects_free(&env.objs);
	free(planted.iov_base);
	planted.iov_base = NULL;
	return 0;
}

static uint32_t run(enum hook h, const uint8_t *in, size_t inlen, uint8_t *out, size_t *outlen)
{
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = in, .data_size_in = (uint32_t)inlen,
		    .data_out = out, .data_size_out = NDC_PKT_MAX, .repeat = 1);

	assert_int_equal(bpf_prog_test_run_opts(env.prog[h], &o), 0);
	*outlen = o.data_size_out;
	return o.retval;
}

static void counters(uint64_t c[NDC_FP_COUNTER_MAX])
{
	assert_int_equal(ndc_fastpath_counters(env.fp, c), 0);
}

/* Exactly counter `which` moved by n (NONE: nothing moved). */
static void assert_counted(const char *what, const uint64_t *before, int which, uint64_t n)
{
	uint64_t after[NDC_FP_COUNTER_MAX];

	counters(after);
	for (int i = 0; i < NDC_FP_COUNTER_MAX; i++) {
		uint64_t want = before[i] + (i == which ? n : 0);

		if (after[i] != want)
			fail_msg("%s: counter %d is %llu, want %llu", what, i,
				 (unsigned long long)after[i], (unsigned long long)want);
	}
}

/* The reply in out answers the query frame in, carrying exactly want. */
static void assert_reply(const char *what, enum hook h, uint32_t verdict, const uint8_t *in,
			 size_t inlen, const uint8_t *out, size_t outlen, const uint8_t *want,
			 size_t wlen)
{
	char where[256];

	snprintf(where, sizeof(where), "%s (%s)", what, hook_name[h]);
	if (verdict != (h == TC ? TC_ACT_REDIRECT : XDP_TX))
		fail_msg("%s: verdict %u, want a reply", where, verdict);
	ndc_row_assert_reply(where, in, inlen, out, outlen, want, wlen);
}

/* Runs a row through hooks first to last: answered like the socket path (src as in
 * ndc_row_socket_reply), or passed untouched. */
static void check_row_on(const struct ndc_row *r, const struct ndc_answer *src, uint32_t age,
			 enum hook first, enum hook last)
{
	uint8_t dns[NDC_PKT_MAX], in[NDC_PKT_MAX], out[NDC_PKT_MAX], want[NDC_PKT_MAX];
	uint64_t before[NDC_FP_COUNTER_MAX];
	size_t dlen, inlen, outlen, wlen = 0;
	bool answered =
	    r->expect == NDC_FP_HIT || r->expect == NDC_FP_NODATA || r->expect == NDC_FP_NXDOMAIN;

	ndc_row_query(r, dns, &dlen);
	ndc_row_frame(r, dns, dlen, in, &inlen);
	if (answered)
		wlen = ndc_row_socket_reply(
		    env.rec, dns, dlen, r->expect == NDC_FP_NXDOMAIN ? &env.nx.a : src, age, want);
	counters(before);
	for (int h = first; h <= (int)last; h++) {
		uint32_t verdict = run(h, in, inlen, out, &outlen);

		if (answered) {
			assert_reply(r->what, h, verdict, in, inlen, out, outlen, want, wlen);
			continue;
		}
		if (verdict != (h == TC ? (uint32_t)NDC_TC_PASS : XDP_PASS))
			fail_msg("%s (%s): verdict %u, want pass", r->what, hook_name[h], verdict);
		if (outlen != inlen || memcmp(out, in, inlen))
			fail_msg("%s (%s): passed packet was modified", r->what, hook_name[h]);
	}
	assert_counted(r->what, before, r->expect, (uint64_t)(last - first + 1));
}

/* Runs a row through both hooks, as check_row_on does. */
static void check_row(const struct ndc_row *r, const struct ndc_answer *src, uint32_t age)
{
	check_row_on(r, src, age, TC, XDP);
}

/* ---------------------------------------------------------------------------------------------
 * Answers from the record table.
 */

static void test_answers(void **state)
{
	static const struct ndc_row rows[] = {
	    {"A ClusterIP", "kubernetes.default.svc.cluster.local", NDC_T_A, .expect = NDC_FP_HIT},
	    {"AAAA dual-stack", "frontend.shop.svc.cluster.local", NDC_T_AAAA,
	     .expect = NDC_FP_HIT},
	    {"A dual-stack", "frontend.shop.svc.cluster.local", NDC_T_A, .expect = NDC_FP_HIT},
	    {"A headless set", "postgres.data.svc.cluster.local", NDC_T_A, .expect = NDC_FP_HIT},
	    {"A headless publishNotReady", "kafka.data.svc.cluster.local", NDC_T_A,
	     .expect = NDC_FP_HIT},
	    {"A endpoint hostname", "postgres-0.postgres.data.svc.cluster.local", NDC_T_A,
	     .expect = NDC_FP_HIT},
	    {"SRV with additional", "_pg._tcp.postgres.data.svc.cluster.local", NDC_T_SRV,
	     .expect = NDC_FP_HIT},
	    {"SRV ClusterIP", "_https._tcp.kubernetes.default.svc.cluster.local", NDC_T_SRV,
	     .expect = NDC_FP_HIT},
	    {"PTR v4", "1.0.96.10.in-addr.arpa", NDC_T_PTR, .expect = NDC_FP_HIT},
	    {"PTR v6", "4.3.2.1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.1.0.0.0.0.d.f.ip6.arpa",
	     NDC_T_PTR, .expect = NDC_FP_HIT},
	    {"CNAME exact", "payments.shop.svc.cluster.local", NDC_T_CNAME, .expect = NDC_FP_HIT},
	    {"CNAME via other-type entry", "payments.shop.svc.cluster.local", NDC_T_A,
	     .expect = NDC_FP_HIT},
	    {"TXT dns-version", "dns-version.cluster.local", NDC_T_TXT, .expect = NDC_FP_HIT},
	    {"SOA apex", "cluster.local", NDC_T_SOA, .expect = NDC_FP_HIT},
	    {"NS apex", "cluster.local", NDC_T_NS, .expect = NDC_FP_HIT},
	    {"NODATA AAAA of v4-only", "cart.shop.svc.cluster.local", NDC_T_AAAA,
	     .expect = NDC_FP_NODATA},
	    {"NODATA empty non-terminal", "shop.svc.cluster.local", NDC_T_A,
	     .expect = NDC_FP_NODATA},
	    {"ANY at a name with records", "kubernetes.default.svc.cluster.local", NDC_T_ANY,
	     .expect = NDC_FP_HIT},
	    {"NXDOMAIN search path", "api.example.com.default.svc.cluster.local", NDC_T_A,
	     .expect = NDC_FP_NXDOMAIN},
	    {"NXDOMAIN no such port", "_grpc._udp.cart.shop.svc.cluster.local", NDC_T_SRV,
	     .expect = NDC_FP_NXDOMAIN},
	    {"NXDOMAIN not-ready endpoint", "postgres-2.postgres.data.svc.cluster.local", NDC_T_A,
	     .expect = NDC_FP_NXDOMAIN},
	    {"0x20 mixed case", "KuBeRnEtEs.DeFaUlT.sVc.ClUsTeR.LoCaL", NDC_T_A,
	     .expect = NDC_FP_HIT},
	    {"0x20 NXDOMAIN", "NoSuCh.ShOp.SvC.cLuStEr.LoCaL", NDC_T_A, .expect = NDC_FP_NXDOMAIN},
	    {"EDNS 1232", "kubernetes.default.svc.cluster.local", NDC_T_A, .edns = 1232,
	     .expect = NDC_FP_HIT},
	    {"EDNS 4096 (clamped)", "_pg._tcp.postgres.data.svc.cluster.local", NDC_T_SRV,
	     .edns = 4096, .expect = NDC_FP_HIT},
	    {"EDNS 100 (means 512)", "frontend.shop.svc.cluster.local", NDC_T_AAAA, .edns = 100,
	     .expect = NDC_FP_HIT},
	    {"EDNS NODATA", "cart.shop.svc.cluster.local", NDC_T_AAAA, .edns = 1232,
	     .expect = NDC_FP_NODATA},
	    {"EDNS NXDOMAIN", "x.cluster.local", NDC_T_A, .edns = 1232, .expect = NDC_FP_NXDOMAIN},
	    {"IPv6 A", "kubernetes.default.svc.cluster.local", NDC_T_A, .v6 = true,
	     .expect = NDC_FP_HIT},
	    {"IPv6 SRV odd length", "_pg._tcp.postgres.data.svc.cluster.local", NDC_T_SRV,
	     .v6 = true, .expect = NDC_FP_HIT},
	    {"IPv6 EDNS NXDOMAIN", "a.b.cluster.local", NDC_T_AAAA, .v6 = true, .edns = 1232,
	     .expect = NDC_FP_NXDOMAIN},
	    {"IPv6 PTR", "1.0.96.10.in-addr.arpa", NDC_T_PTR, .v6 = true, .expect = NDC_FP_HIT},
	    {"RD clear", "kubernetes.default.svc.cluster.local", NDC_T_A, .flags_xor = NDC_ROW_RD,
	     .expect = NDC_FP_HIT},
	    {"CD echoed", "kubernetes.default.svc.cluster.local", NDC_T_A, .flags_xor = 0x0010,
	     .expect = NDC_FP_HIT},
	    {"AD and Z not echoed", "cart.shop.svc.cluster.local", NDC_T_AAAA, .flags_xor = 0x0060,
	     .expect = NDC_FP_NODATA},
	    {"802.1Q tagged", "kubernetes.default.svc.cluster.local", NDC_T_A, .o.vlan = 7,
	     .expect = NDC_FP_HIT},
	    {"Ethernet padding", "a.cluster.local", NDC_T_A, .o.l2_pad = 10,
	     .expect = NDC_FP_NXDOMAIN},
	    {"padding longer than the answer (shrinks)", "kubernetes.default.svc.cluster.local",
	     NDC_T_A, .o.l2_pad = 40, .expect = NDC_FP_HIT},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		check_row(&rows[i], NULL, 0);
}

static void pin_cpu(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	assert_int_equal(sched_setaffinity(0, sizeof(set), &set), 0);
}

/*
 * The answer core counts in each CPU's scratch (bpf/ndc_fastpath.bpf.c, counts[]), and
 * ndc_fastpath_counters sums every CPU's: an answer, a synthesised NXDOMAIN and a pass run on each
 * CPU this test may use are each counted once per run, on that CPU as on CPU 0 (a scratch read at
 * the wrong place or stride would miss them, or count another CPU's words).
 */
static void test_counted_on_every_cpu(void **state)
{
	static const struct ndc_row rows[] = {
	    {"counted answer", "kubernetes.default.svc.cluster.local", NDC_T_A,
	     .expect = NDC_FP_HIT},
	    {"counted NXDOMAIN", "nosuch.shop.svc.cluster.local", NDC_T_A,
	     .expect = NDC_FP_NXDOMAIN},
	    {"counted pass", "example.org", NDC_T_A, .expect = NDC_FP_PASS_MISS},
	};
	cpu_set_t all;
	int used = 0;

	(void)state;
	assert_int_equal(sched_getaffinity(0, sizeof(all), &all), 0);
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		if (!CPU_ISSET(cpu, &all))
			continue;
		pin_cpu(cpu);
		assert_int_equal(sched_getcpu(), cpu);
		for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
			check_row(&rows[i], NULL, 0);
		used++;
	}
	print_message("counted on %d CPUs\n", used);
	assert_int_equal(sched_setaffinity(0, sizeof(all), &all), 0);
}

/* ---------------------------------------------------------------------------------------------
 * Queries that go to user space.
 */

#define K8S_NAME "kubernetes.default.svc.cluster.local"

/* Queries that go to user space (and a few answered ones beside them): test_memo_shapes asks
 * them too, once the memo holds the name. */
static const struct ndc_row passed_rows[] = {
    /* not ours: no counter */
    {"other UDP port", K8S_NAME, NDC_T_A, .dport = 5353, .expect = NONE},
    {"TCP to 53", K8S_NAME, NDC_T_A, .o.protocol = 6, .expect = NONE},
    {"other destination", K8S_NAME, NDC_T_A, .wrong_dst = true, .expect = NONE},
    {"ICMPv6 to us", K8S_NAME, NDC_T_A, .v6 = true, .o.protocol = 58, .expect = NONE},
    /* misses */
    {"outside the zone", "example.org", NDC_T_A, .expect = NDC_FP_PASS_MISS},
    {"under the pass suffix", "10-244-1-10.shop.pod.cluster.local", NDC_T_A,
     .expect = NDC_FP_PASS_MISS},
    {"unknown reverse name", "9.9.9.9.in-addr.arpa", NDC_T_PTR, .expect = NDC_FP_PASS_MISS},
    {"zone lookalike", "notcluster.local", NDC_T_A, .expect = NDC_FP_PASS_MISS},
    {"root", ".", NDC_T_NS, .expect = NDC_FP_PASS_MISS},
    {"ANY at an empty non-terminal", "shop.svc.cluster.local", NDC_T_ANY,
     .expect = NDC_FP_PASS_MISS, .memo = true},
    /* EDNS */
    {"EDNS client cookie alone: ignored, answered", K8S_NAME, NDC_T_A, .edns = 1232, .opt_len = 12,
     .expect = NDC_FP_HIT},
    {"EDNS cookie and ECS", K8S_NAME, NDC_T_A, .edns = 1232, .opt_len = 20,
     .expect = NDC_FP_PASS_EDNS},
    {"DO bit", K8S_NAME, NDC_T_A, .edns = 1232, .edns_flags = 0x8000, .expect = NDC_FP_PASS_EDNS},
    {"EDNS version 1", K8S_NAME, NDC_T_A, .edns = 1232, .edns_version = 1,
     .expect = NDC_FP_PASS_EDNS},
    /* not a plain query, or malformed */
    {"QR set", K8S_NAME, NDC_T_A, .mutate = ndc_pkt_mut_set_qr, .expect = NDC_FP_PASS_FORMAT},
    {"opcode STATUS", K8S_NAME, NDC_T_A, .mutate = ndc_pkt_mut_set_opcode,
     .expect = NDC_FP_PASS_FORMAT},
    {"QDCOUNT 2", K8S_NAME, NDC_T_A, .mutate = ndc_pkt_mut_qd2, .expect = NDC_FP_PASS_FORMAT},
    {"QDCOUNT 0", K8S_NAME, NDC_T_A, .mutate = ndc_pkt_mut_qd0, .expect = NDC_FP_PASS_FORMAT},
    {"ANCOUNT 1", K8S_NAME, NDC_T_A, .mutate = ndc_pkt_mut_an1, .expect = NDC_FP_PASS_FORMAT},
    {"NSCOUNT 1", K8S_NAME, NDC_T_A, .mutate = ndc_pkt_mut_ns1, .expect = NDC_FP_PASS_FORMAT},
    {"ARCOUNT 2", K8S_NAME, NDC_T_A, .edns = 1232, .mutate = ndc_pkt_mut_ar2,
     .expect = NDC_FP_PASS_FORMAT},
    {"additional RR not OPT", K8S_NAME, NDC_T_A, .mutate = ndc_pkt_mut_ar_not_opt,
     .expect = NDC_FP_PASS_FORMAT},
    {"OPT owner not root", K8S_NAME, NDC_T_A, .edns = 1232, .mutate = ndc_pkt_mut_opt_owner,
     .expect = NDC_FP_PASS_FORMAT},
    {"trailing byte", K8S_NAME, NDC_T_A, .mutate = ndc_pkt_mut_trailing,
     .expect = NDC_FP_PASS_FORMAT},
    {"trailing byte after OPT", K8S_NAME, NDC_T_A, .edns = 1232, .mutate = ndc_pkt_mut_trailing,
     .expect = NDC_FP_PASS_FORMAT},
    {"header only", K8S_NAME, NDC_T_A, .mutate = ndc_pkt_mut_header_only,
     .expect = NDC_FP_PASS_FORMAT},
    {"short header", K8S_NAME, NDC_T_A, .mutate = ndc_pkt_mut_short_header,
     .expect = NDC_FP_PASS_FORMAT},
    {"name cut short", K8S_NAME, NDC_T_A, .mutate = ndc_pkt_mut_cut_name,
     .expect = NDC_FP_PASS_FORMAT},
    {"QCLASS cut short", K8S_NAME, NDC_T_A, .mutate = ndc_pkt_mut_cut_qclass,
     .expect = NDC_FP_PASS_FORMAT},
    {"label of 64", K8S_NAME, NDC_T_A, .mutate = ndc_pkt_mut_label64, .expect = NDC_FP_PASS_FORMAT},
    {"pointer as name", K8S_NAME, NDC_T_A, .mutate = ndc_pkt_mut_pointer_name,
     .expect = NDC_FP_PASS_FORMAT},
    {"pointer after a label", K8S_NAME, NDC_T_A, .mutate = ndc_pkt_mut_pointer_tail,
     .expect = NDC_FP_PASS_FORMAT},
    {"name over 128 bytes",
     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa."
     "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb.svc.cluster.local",
     NDC_T_A, .expect = NDC_FP_PASS_FORMAT},
    {"class CH", "version.bind", NDC_T_TXT, .qclass = 3, .expect = NDC_FP_PASS_FORMAT},
    {"AXFR", "cluster.local", NDC_T_AXFR, .expect = NDC_FP_PASS_FORMAT},
    {"qtype 0", K8S_NAME, 0, .expect = NDC_FP_PASS_FORMAT},
    /* meta types at a name that exists: not its NODATA, user space's FORMERR (abi.h) */
    {"qtype OPT", K8S_NAME, NDC_T_OPT, .expect = NDC_FP_PASS_FORMAT},
    {"qtype 128", K8S_NAME, 128, .expect = NDC_FP_PASS_FORMAT},
    {"qtype TSIG", K8S_NAME, 250, .expect = NDC_FP_PASS_FORMAT},
    {"qtype MAILA", K8S_NAME, 254, .expect = NDC_FP_PASS_FORMAT},
    {"IXFR", K8S_NAME, NDC_T_IXFR, .expect = NDC_FP_PASS_FORMAT},
    {"class ANY", K8S_NAME, NDC_T_A, .qclass = 255, .expect = NDC_FP_PASS_FORMAT},
    {"UDP length short of IP", K8S_NAME, NDC_T_A, .o.udp_len_delta = -1,
     .expect = NDC_FP_PASS_FORMAT},
    {"UDP length past IP", K8S_NAME, NDC_T_A, .o.udp_len_delta = 3, .expect = NDC_FP_PASS_FORMAT},
    /* fragments and IP options */
    {"IPv4 more fragments", K8S_NAME, NDC_T_A, .o.frag_off = 0x2000, .expect = NDC_FP_PASS_FRAG},
    {"IPv4 later fragment", K8S_NAME, NDC_T_A, .o.frag_off = 0x0010, .expect = NDC_FP_PASS_FRAG},
    {"IPv4 DF is fine", K8S_NAME, NDC_T_A, .o.frag_off = 0x4000, .expect = NDC_FP_HIT,
     .memo = true},
    {"IPv4 options", K8S_NAME, NDC_T_A, .o.ihl = 6, .expect = NDC_FP_PASS_FRAG},
    {"IPv6 fragment header", K8S_NAME, NDC_T_A, .v6 = true, .o.ip6_nexthdr = 44,
     .expect = NDC_FP_PASS_FRAG},
    {"IPv6 destination options", K8S_NAME, NDC_T_A, .v6 = true, .o.ip6_nexthdr = 60,
     .expect = NDC_FP_PASS_FRAG},
};

static void test_passed(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(passed_rows) / sizeof(passed_rows[0]); i++)
		check_row(&passed_rows[i], NULL, 0);
}

/* Synthesis needs the synced flag; without it the miss goes up. */
static void test_not_synced(void **state)
{
	const struct ndc_row r = {"NXDOMAIN not synced",
				  "api.example.com.default.svc.cluster.local", NDC_T_A,
				  .expect = NDC_FP_PASS_MISS};
	const struct ndc_row hit = {"hit not synced", "kubernetes.default.svc.cluster.local",
				    NDC_T_A, .expect = NDC_FP_HIT};

	(void)state;
	assert_int_equal(ndc_fastpath_set_synced(env.fp, false), 0);
	check_row(&r, NULL, 0);
	check_row(&hit, NULL, 0);
	assert_int_equal(ndc_fastpath_set_synced(env.fp, true), 0);
}

/* A config of another ABI (or none) makes the program pass everything to us. */
static void test_config_abi(void **state)
{
	const struct ndc_row r = {"ABI mismatch", "kubernetes.default.svc.cluster.local", NDC_T_A,
				  .expect = NDC_FP_PASS_CONFIG};
	const struct ndc_row other = {"ABI mismatch, other port",
				      "kubernetes.default.svc.cluster.local", NDC_T_A,
				      .dport = 5353, .expect = NDC_FP_PASS_CONFIG};
	struct ndc_fp_config cfg, bad;
	uint32_t key = 0;

	(void)state;
	assert_int_equal(bpf_map_lookup_elem(env.config_fd, &key, &cfg), 0);
	bad = cfg;
	bad.abi_version = NDC_ABI_VERSION + 1;
	assert_int_equal(bpf_map_update_elem(env.config_fd, &key, &bad, BPF_ANY), 0);
	check_row(&r, NULL, 0);
	check_row(&other, NULL, 0);
	assert_int_equal(bpf_map_update_elem(env.config_fd, &key, &cfg, BPF_ANY), 0);
}

/* tc replies with bpf_redirect_peer when asked; the verdict is the same redirect. */
static void test_redirect_peer(void **state)
{
	const struct ndc_row r = {"redirect_peer", "kubernetes.default.svc.cluster.local", NDC_T_A,
				  .expect = NDC_FP_HIT};
	struct ndc_fp_config cfg, peer;
	uint32_t key = 0;

	(void)state;
	assert_int_equal(bpf_map_lookup_elem(env.config_fd, &key, &cfg), 0);
	peer = cfg;
	peer.flags |= NDC_FP_C_REDIRECT_PEER;
	assert_int_equal(bpf_map_update_elem(env.config_fd, &key, &peer, BPF_ANY), 0);
	check_row(&r, NULL, 0);
	assert_int_equal(bpf_map_update_elem(env.config_fd, &key, &cfg, BPF_ANY), 0);
}

/* ---------------------------------------------------------------------------------------------
 * Cache entries (upstream answers): expiry, TTL countdown, size limits, pass markers.
 */

/* Writes an entry published ago_s seconds in the past with ttl_s to live. */
static void publish_aged(const char *text, uint16_t qtype, const struct ndc_answer *a,
			 uint32_t ttl_s, uint32_t ago_s)
{
	uint8_t lname[NDC_NAME_MAX];
	struct ndc_fp_value v;
	struct ndc_fp_key k;
	size_t nlen;

	assert_int_equal(ndc_name_from_text(text, lname, sizeof(lname), &nlen), 0);
	assert_int_equal(ndc_fastpath_key(lname, nlen, qtype, &k), 0);
	assert_int_equal(ndc_fastpath_value(a, ttl_s, ndc_row_mono_ns() - (uint64_t)ago_s * NS, &v),
			 0);
	v.name_len = (uint8_t)nlen; /* as the publisher does: the kernel checks it */
	memcpy(v.name, lname, nlen);
	assert_int_equal(ndc_fastpath_put(env.fp, &k, &v), 0);
}

static void test_cache_ttl(void **state)
{
	uint8_t lname[NDC_NAME_MAX];
	union ndc_row_answer a;
	size_t nlen;

	(void)state;
	assert_int_equal(ndc_name_from_text("example.com", lname, sizeof(lname), &nlen), 0);
	ndc_row_a_records(&a.a, lname, nlen, 3, 300);

	/* published 7 s ago: every TTL is 7 lower, exactly as the socket path writes it */
	publish_aged("example.com", NDC_T_A, &a.a, 300, 7);
	const struct ndc_row r = {"TTL countdown", "Example.COM", NDC_T_A, .expect = NDC_FP_HIT};
	check_row(&r, &a.a, 7);
	const struct ndc_row r6 = {
	    "TTL countdown IPv6 EDNS", "example.com", NDC_T_A, .v6 = true, .edns = 1232,
	    .expect = NDC_FP_HIT};
	check_row(&r6, &a.a, 7);

	/* TTLs floor at 0: RRs of 3 and 4 s in an entry published 8 s ago, 2 s left to live */
	ndc_row_a_records(&a.a, lname, nlen, 2, 3);
	publish_aged("example.com", NDC_T_A, &a.a, 10, 8);
	const struct ndc_row z = {"TTL floor", "example.com", NDC_T_A, .expect = NDC_FP_HIT};
	check_row(&z, &a.a, 8);

	/* expired: user space refreshes it */
	publish_aged("example.com", NDC_T_A, &a.a, 5, 6);
	const struct ndc_row e = {"expired", "example.com", NDC_T_A, .expect = NDC_FP_PASS_EXPIRED};
	check_row(&e, NULL, 0);

	/* published through the real call: fresh, TTLs as they are */
	ndc_row_a_records(&a.a, lname, nlen, 1, 60);
	assert_int_equal(ndc_fastpath_publish(env.fp, lname, nlen, NDC_T_A, &a.a, 60), 0);
	const struct ndc_row f = {"fresh cache entry", "example.com", NDC_T_A,
				  .expect = NDC_FP_HIT};
	check_row(&f, &a.a, 0);
	assert_int_equal(ndc_fastpath_unpublish(env.fp, lname, nlen, NDC_T_A), 0);
}

/* A reply over the client's limit goes to user space (which drops additional or sets TC). */
static void test_sizes(void **state)
{
	uint8_t lname[NDC_NAME_MAX];
	union ndc_row_answer a;
	size_t nlen;

	(void)state;
	assert_int_equal(ndc_name_from_text("big.example.com", lname, sizeof(lname), &nlen), 0);
	ndc_row_a_records(&a.a, lname, nlen, 30, 300); /* 30 A RRs: 480 bytes of data */
	assert_true(a.a.len > NDC_UDP_MIN - 12 - nlen - 4 && a.a.len <= NDC_FP_DATA_MAX);
	assert_int_equal(ndc_fastpath_publish(env.fp, lname, nlen, NDC_T_A, &a.a, 0), 0);

	const struct ndc_row r512 = {"over 512 without EDNS", "big.example.com", NDC_T_A,
				     .expect = NDC_FP_PASS_SIZE};
	check_row(&r512, NULL, 0);
	const struct ndc_row small = {"over the advertised 512", "big.example.com", NDC_T_A,
				      .edns = 512, .expect = NDC_FP_PASS_SIZE};
	check_row(&small, NULL, 0);
	const struct ndc_row edns = {"fits EDNS 1232", "big.example.com", NDC_T_A, .edns = 1232,
				     .expect = NDC_FP_HIT};
	check_row(&edns, &a.a, 0);
	const struct ndc_row edns6 = {
	    "fits EDNS 1232 IPv6", "BIG.example.com",	NDC_T_A, .v6 = true,
	    .edns = 1232,	   .expect = NDC_FP_HIT};
	check_row(&edns6, &a.a, 0);
	assert_int_equal(ndc_fastpath_unpublish(env.fp, lname, nlen, NDC_T_A), 0);

	/* the largest data the table takes: reply of 12 + 17 + 4 + 512 + 11 bytes */
	assert_int_equal(ndc_name_from_text("max.example.com", lname, sizeof(lname), &nlen), 0);
	struct ndc_ab b;
	uint8_t txt[255];

	memset(txt, 'x', sizeof(txt));
	ndc_ab_init(&b, &a.a, NDC_ANSWER_DATA_MAX, lname, nlen);
	txt[0] = 254;
	ndc_ab_rr(&b, NDC_SEC_ANSWER, lname, nlen, NDC_T_TXT, NDC_C_IN, 30, txt, 255);
	txt[0] = 232;
	ndc_ab_rr(&b, NDC_SEC_ANSWER, lname, nlen, NDC_T_TXT, NDC_C_IN, 30, txt, 233);
	assert_int_equal(ndc_ab_finish(&b, NDC_RCODE_NOERROR, false), 0);
	assert_int_equal(a.a.len, NDC_FP_DATA_MAX);
	assert_int_equal(ndc_fastpath_publish(env.fp, lname, nlen, NDC_T_TXT, &a.a, 30), 0);
	const struct ndc_row max = {"data of NDC_FP_DATA_MAX", "max.example.com", NDC_T_TXT,
				    .edns = 1232, .expect = NDC_FP_HIT};
	check_row(&max, &a.a, 0);
	const struct ndc_row max6 = {"data of NDC_FP_DATA_MAX IPv6",
				     "max.example.com",
				     NDC_T_TXT,
				     .v6 = true,
				     .edns = 1400,
				     .expect = NDC_FP_HIT};
	check_row(&max6, &a.a, 0);
	assert_int_equal(ndc_fastpath_unpublish(env.fp, lname, nlen, NDC_T_TXT), 0);
}

/* A pass marker at the other-type entry sends every unpublished type up, and blocks NXDOMAIN. */
static void test_pass_marker(void **state)
{
	uint8_t lname[NDC_NAME_MAX];
	size_t nlen;

	(void)state;
	assert_int_equal(
	    ndc_name_from_text("kubernetes.default.svc.cluster.local", lname, sizeof(lname), &nlen),
	    0);
	assert_int_equal(ndc_fastpath_publish_pass(env.fp, lname, nlen), 0);
	const struct ndc_row m = {"pass marker", "kubernetes.default.svc.cluster.local", NDC_T_AAAA,
				  .expect = NDC_FP_PASS_MISS};
	check_row(&m, NULL, 0);
	const struct ndc_row h = {"published type next to a marker",
				  "kubernetes.default.svc.cluster.local", NDC_T_A,
				  .expect = NDC_FP_HIT};
	check_row(&h, NULL, 0);
	/* put the real other-type entry back, as the publisher had it */
	union ndc_row_answer a;

	assert_int_equal(
	    ndc_records_lookup(env.rec, lname, nlen, NDC_T_AAAA, &a.a, NDC_ANSWER_DATA_MAX), 0);
	assert_int_equal(ndc_fastpath_publish(env.fp, lname, nlen, NDC_FP_QTYPE_OTHER, &a.a, 0), 0);
	const struct ndc_row back = {"other-type entry restored",
				     "kubernetes.default.svc.cluster.local", NDC_T_AAAA,
				     .expect = NDC_FP_NODATA};
	check_row(&back, NULL, 0);
}

/* ---------------------------------------------------------------------------------------------
 * The hashed key (abi.h): the kernel's hash must equal user space's for every name length, and a
 * key holding another name (a collision, forced by writing the map directly) is never answered.
 */

/* Every tail length of the last 8-byte word, both hooks, mixed case, up to NDC_FP_NAME_MAX. */
static void test_name_lengths(void **state)
{
	char text[NDC_NAME_MAX * 4], query[NDC_NAME_MAX * 4];
	uint8_t lname[NDC_NAME_MAX];
	size_t nlen, n = 0;
	union ndc_row_answer a;

	(void)state;
	/* wire length = label + 2 + "example" 8 + root 1 */
	for (size_t label = 1; label <= 63; label++) {
		size_t want = label + 2 + 8 + 1;

		memset(text, 'h', label);
		snprintf(text + label, sizeof(text) - label, ".example");
		assert_int_equal(ndc_name_from_text(text, lname, sizeof(lname), &nlen), 0);
		assert_int_equal(nlen, want - 1);
		ndc_row_a_records(&a.a, lname, nlen, 1, 0);
		assert_int_equal(ndc_fastpath_publish(env.fp, lname, nlen, NDC_T_A, &a.a, 0), 0);
		for (size_t i = 0; text[i]; i++)
			query[i] =
			    (char)((i & 1) && text[i] != '.' ? text[i] - 'a' + 'A' : text[i]);
		query[strlen(text)] = '\0';
		const struct ndc_row r = {"name length", query, NDC_T_A, .expect = NDC_FP_HIT};

		check_row(&r, &a.a, 0);
		assert_int_equal(ndc_fastpath_unpublish(env.fp, lname, nlen, NDC_T_A), 0);
		n++;
	}
	/* the longest name the key takes: labels of 63, 62 and 2 bytes and the root, 128 in all */
	memset(text, 'a', 62);
	text[62] = '.';
	memset(text + 63, 'b', 61);
	text[124] = '.';
	text[125] = 'c';
	text[126] = '\0';
	assert_int_equal(ndc_name_from_text(text, lname, sizeof(lname), &nlen), 0);
	assert_int_equal(nlen, NDC_FP_NAME_MAX);
	ndc_row_a_records(&a.a, lname, nlen, 1, 0);
	assert_int_equal(ndc_fastpath_publish(env.fp, lname, nlen, NDC_T_A, &a.a, 0), 0);
	memset(text + 63, 'B', 61); /* the query in upper case: the last word is lowered too */
	const struct ndc_row r = {"name of NDC_FP_NAME_MAX", text, NDC_T_A, .edns = 1232,
				  .expect = NDC_FP_HIT};
	check_row(&r, &a.a, 0);
	assert_int_equal(ndc_fastpath_unpublish(env.fp, lname, nlen, NDC_T_A), 0);
	assert_int_equal(n, 63);
}

/* Writes at the key of (text, qtype) an entry that names other (other_len bytes of it). */
static void plant(const char *text, uint16_t qtype, const uint8_t *other, size_t other_len,
		  const struct ndc_answer *a, uint8_t flags)
{
	uint8_t lname[NDC_NAME_MAX];
	struct ndc_fp_value v;
	struct ndc_fp_key k;
	size_t nlen;

	assert_int_equal(ndc_name_from_text(text, lname, sizeof(lname), &nlen), 0);
	assert_int_equal(ndc_fastpath_key(lname, nlen, qtype, &k), 0);
	assert_int_equal(ndc_fastpath_value(a, 0, 0, &v), 0);
	v.flags |= flags;
	v.name_len = (uint8_t)other_len;
	memcpy(v.name, other, other_len);
	assert_int_equal(ndc_fastpath_put(env.fp, &k, &v), 0);
}

static void unplant(const char *text, uint16_t qtype)
{
	uint8_t lname[NDC_NAME_MAX];
	struct ndc_fp_value v = {.expire_ns = 1}; /* long expired: the sweep removes any name's */
	struct ndc_fp_key k;
	size_t nlen;

	assert_int_equal(ndc_name_from_text(text, lname, sizeof(lname), &nlen), 0);
	assert_int_equal(ndc_fastpath_key(lname, nlen, qtype, &k), 0);
	assert_int_equal(ndc_fastpath_put(env.fp, &k, &v), 0);
	assert_int_equal(ndc_fastpath_unpublish_expired(env.fp, &k), 0);
}

static void test_collision(void **state)
{
	static const char k8s[] = "kubernetes.default.svc.cluster.local";
	static const char fresh[] = "collide.default.svc.cluster.local"; /* no records */
	uint8_t lname[NDC_NAME_MAX], other[NDC_NAME_MAX];
	size_t nlen, olen;
	union ndc_row_answer a, saved;

	(void)state;
	assert_int_equal(ndc_name_from_text(k8s, lname, sizeof(lname), &nlen), 0);
	assert_int_equal(
	    ndc_records_lookup(env.rec, lname, nlen, NDC_T_A, &saved.a, NDC_ANSWER_DATA_MAX), 0);
	/* an answer that would be wrong for the query: another name's address */
	assert_int_equal(
	    ndc_name_from_text("other.default.svc.cluster.local", other, sizeof(other), &olen), 0);
	ndc_row_a_records(&a.a, lname, nlen, 1, 0);

	/* the entry at kubernetes' A key names another name of the same length, one byte off */
	memcpy(other, lname, nlen);
	other[1] = 'K' ^ 0x20 ^ 0x01;
	plant(k8s, NDC_T_A, other, nlen, &a.a, 0);
	const struct ndc_row same_len = {"collision, name differs in one byte", k8s, NDC_T_A,
					 .expect = NDC_FP_PASS_MISS};
	check_row(&same_len, NULL, 0);
	/* ... a prefix of it: the stored length decides */
	plant(k8s, NDC_T_A, lname, nlen - 1, &a.a, 0);
	const struct ndc_row shorter = {"collision, stored name shorter", k8s, NDC_T_A,
					.expect = NDC_FP_PASS_MISS};
	check_row(&shorter, NULL, 0);
	/* ... differing only in the last word, past a byte order slip */
	memcpy(other, lname, nlen);
	other[nlen - 2] = 'x';
	plant(k8s, NDC_T_A, other, nlen, &a.a, 0);
	const struct ndc_row last = {"collision, last word differs", k8s, NDC_T_A, .edns = 1232,
				     .expect = NDC_FP_PASS_MISS};
	check_row(&last, NULL, 0);
	/* the publisher's own entry back: answered again */
	assert_int_equal(ndc_fastpath_publish(env.fp, lname, nlen, NDC_T_A, &saved.a, 0), -ENOSPC);
	plant(k8s, NDC_T_A, lname, nlen, &saved.a, 0);
	const struct ndc_row back = {"own name again", k8s, NDC_T_A, .expect = NDC_FP_HIT};
	check_row(&back, NULL, 0);
	/*
	 * A slot leaves out the name's suffix (abi.h, NDC_FP_V_SFX): kubernetes' entry at the key
	 * of a name with the same first bytes and length but another suffix is not its answer.
	 */
	static const char lookalike[] = "kubernetes.default.svc.cluster.lxcal";
	plant(lookalike, NDC_T_A, lname, nlen, &saved.a, 0);
	const struct ndc_row sfx = {"collision, same stored prefix, other suffix", lookalike,
				    NDC_T_A, .expect = NDC_FP_PASS_MISS};
	check_row(&sfx, NULL, 0);
	unplant(lookalike, NDC_T_A);

	/*
	 * A name without records, under the zone, synced: NXDOMAIN, unless another name sits at
	 * its keys: then user space decides, at the exact type and at the other-type entry alike.
	 */
	const struct ndc_row nx = {"no collision: NXDOMAIN", fresh, NDC_T_A,
				   .expect = NDC_FP_NXDOMAIN};
	check_row(&nx, NULL, 0);
	plant(fresh, NDC_T_A, other, olen, &a.a, 0);
	const struct ndc_row exact = {"collision at the exact type, synced", fresh, NDC_T_A,
				      .v6 = true, .expect = NDC_FP_PASS_MISS};
	check_row(&exact, NULL, 0);
	unplant(fresh, NDC_T_A);
	plant(fresh, NDC_FP_QTYPE_OTHER, other, olen, &a.a, 0);
	const struct ndc_row oth = {"collision at the other-type entry, synced", fresh, NDC_T_A,
				    .expect = NDC_FP_PASS_MISS};
	check_row(&oth, NULL, 0);
	const struct ndc_row any = {"collision at the other-type entry, ANY", fresh, NDC_T_ANY,
				    .expect = NDC_FP_PASS_MISS};
	check_row(&any, NULL, 0);
	unplant(fresh, NDC_FP_QTYPE_OTHER);
	check_row(&nx, NULL, 0);

	/* another name's NODATA entry at kubernetes' other-type key: its AAAA goes up */
	assert_int_equal(
	    ndc_records_lookup(env.rec, lname, nlen, NDC_T_AAAA, &saved.a, NDC_ANSWER_DATA_MAX), 0);
	plant(k8s, NDC_FP_QTYPE_OTHER, other, olen, &saved.a, 0);
	const struct ndc_row nodata = {"collision at a name's other-type entry", k8s, NDC_T_AAAA,
				       .expect = NDC_FP_PASS_MISS};
	check_row(&nodata, NULL, 0);
	assert_int_equal(ndc_fastpath_unpublish(env.fp, lname, nlen, NDC_FP_QTYPE_OTHER), -ENOENT);
	plant(k8s, NDC_FP_QTYPE_OTHER, lname, nlen, &saved.a, 0);
	const struct ndc_row nodata_back = {"other-type entry restored", k8s, NDC_T_AAAA,
					    .expect = NDC_FP_NODATA};
	check_row(&nodata_back, NULL, 0);
}

/* ---------------------------------------------------------------------------------------------
 * Fail open: no socket listens at the node-local address, so the query goes to the upstream and
 * its reply comes back with the node-local source.
 */
static const uint8_t up4[16] = {169, 254, 53, 1};
static const uint8_t up6[16] = {0xfe, 0x80, [14] = 0x53, [15] = 0x01};
#define UP_PORT 5353

static void failopen_config(bool on)
{
	struct ndc_fp_config c;
	uint32_t zero = 0;

	assert_int_equal(bpf_map_lookup_elem(env.config_fd, &zero, &c), 0);
	c.flags = on ? c.flags | NDC_FP_C_FAILOPEN : c.flags & ~NDC_FP_C_FAILOPEN;
	memcpy(&c.up4, up4, 4);
	memcpy(c.up6, up6, 16);
	c.up4_port = c.up6_port = htons(UP_PORT);
	c.has_up4 = c.has_up6 = on;
	assert_int_equal(bpf_map_update_elem(env.config_fd, &zero, &c, BPF_ANY), 0);
}

static uint32_t run_fd(int fd, const uint8_t *in, size_t inlen, uint8_t *out, size_t *outlen)
{
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = in, .data_size_in = (uint32_t)inlen,
		    .data_out = out, .data_size_out = NDC_PKT_MAX, .repeat = 1);

	assert_int_equal(bpf_prog_test_run_opts(fd, &o), 0);
	*outlen = o.data_size_out;
	return o.retval;
}

/* A socket at the node-local address (IP_FREEBIND: the address need not be configured). */
static int listener(bool v6, int type)
{
	struct sockaddr_storage ss = {0};
	socklen_t len;
	int one = 1, fd = socket(v6 ? AF_INET6 : AF_INET, type, 0);

	assert_true(fd >= 0);
	assert_int_equal(setsockopt(fd, IPPROTO_IP, IP_FREEBIND, &one, sizeof(one)), 0);
	if (v6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;

		assert_int_equal(setsockopt(fd, IPPROTO_IPV6, IPV6_FREEBIND, &one, sizeof(one)), 0);
		a->sin6_family = AF_INET6;
		a->sin6_port = htons(53);
		memcpy(&a->sin6_addr, ndc_pkt_node6, 16);
		/* link-local: scoped to lo, where BPF_PROG_TEST_RUN's packets arrive */
		a->sin6_scope_id = 1;
		len = sizeof(*a);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;

		a->sin_family = AF_INET;
		a->sin_port = htons(53);
		memcpy(&a->sin_addr, ndc_pkt_node4, 4);
		len = sizeof(*a);
	}
	if (bind(fd, (struct sockaddr *)&ss, len) < 0)
		fail_msg("binding the node-local address port 53: %s (something listens there?)",
			 strerror(errno));
	if (type == SOCK_STREAM)
		assert_int_equal(listen(fd, 1), 0);
	return fd;
}

/* ---------------------------------------------------------------------------------------------
 * The table's write protocol against a reader on another CPU (include/ndc/abi.h, "Torn reads").
 */

struct churn {
	atomic_bool stop;
	atomic_ulong writes;
	const uint8_t *lname;
	size_t nlen;
	const struct ndc_answer *ans[3];
	int cpu;
};

/*
 * Publishes the name's A answer over and over, going round three answers (one in the slot, one
 * filling it, one in ndc_big), and between two of those adds a name of its own and removes an
 * older one, so that slots near the name's come and go too.
 */
static void *churn_writer(void *arg)
{
	struct churn *c = arg;
	union ndc_row_answer a;
	uint8_t other[NDC_NAME_MAX];
	char text[64];
	size_t olen;

	pin_cpu(c->cpu);
	for (unsigned long i = 0; !atomic_load(&c->stop); i++) {
		if (ndc_fastpath_publish(env.fp, c->lname, c->nlen, NDC_T_A, c->ans[i % 3], 0))
			break;
		snprintf(text, sizeof(text), "churn%lu.default.svc.cluster.local", i % 512);
		if (ndc_name_from_text(text, other, sizeof(other), &olen))
			break;
		if (i >= 512)
			ndc_fastpath_unpublish(env.fp, other, olen, NDC_T_A);
		ndc_row_a_records(&a.a, other, olen, 1 + (int)(i % 4), 30);
		if (ndc_fastpath_publish(env.fp, other, olen, NDC_T_A, &a.a, 0))
			break;
		atomic_fetch_add(&c->writes, 1);
	}
	return NULL;
}

static void test_rewrite_while_read(void **state)
{
	static const char name[] = "rewrite.default.svc.cluster.local";
	const struct ndc_row r = {"rewritten", name, NDC_T_A, .expect = NDC_FP_HIT};
	uint8_t dns[NDC_PKT_MAX], in[NDC_PKT_MAX], out[NDC_PKT_MAX], want[3][NDC_PKT_MAX];
	uint8_t lname[NDC_NAME_MAX];
	uint64_t before[NDC_FP_COUNTER_MAX], after[NDC_FP_COUNTER_MAX], seen[3] = {0}, busy = 0;
	size_t dlen, inlen, outlen, wlen[3], nlen;
	union ndc_row_answer a[3];
	struct churn c = {.cpu = 1};
	pthread_t t;
	int n = 0, reader_cpu = 0;

	(void)state;
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
		skip();
		return;
	}
	assert_int_equal(ndc_name_from_text(name, lname, sizeof(lname), &nlen), 0);
	ndc_row_a_records(&a[0].a, lname, nlen, 1, 30);	 /* in its slot */
	ndc_row_a_records(&a[1].a, lname, nlen, 4, 60);	 /* filling the slot */
	ndc_row_a_records(&a[2].a, lname, nlen, 20, 90); /* in ndc_big */
	assert_true(((nlen + 7) & ~7UL) + 4 * 16 <= NDC_FP_SLOT_BYTES &&
		    nlen + 20 * 16 > NDC_FP_SLOT_BYTES);
	ndc_row_query(&r, dns, &dlen);
	ndc_row_frame(&r, dns, dlen, in, &inlen);
	for (int i = 0; i < 3; i++) {
		wlen[i] = ndc_row_socket_reply(env.rec, dns, dlen, &a[i].a, 0, want[i]);
		c.ans[i] = &a[i].a;
	}
	c.lname = lname;
	c.nlen = nlen;
	assert_int_equal(ndc_fastpath_publish(env.fp, lname, nlen, NDC_T_A, &a[0].a, 0), 0);
	counters(before);

	pin_cpu(reader_cpu);
	assert_int_equal(pthread_create(&t, NULL, churn_writer, &c), 0);
	for (n = 0; n < 300000; n++) {
		enum hook h = n & 1 ? XDP : TC;
		uint32_t verdict = run(h, in, inlen, out, &outlen);
		struct ndc_pkt_parsed rp;
		int k;

		if (verdict == (h == TC ? (uint32_t)NDC_TC_PASS : XDP_PASS)) {
			if (outlen != inlen || memcmp(out, in, inlen))
				fail_msg("run %d (%s): passed packet was modified", n,
					 hook_name[h]);
			busy++;
			continue;
		}
		if (ndc_pkt_parse(out, outlen, &rp) != 0)
			fail_msg("run %d (%s): verdict %u, reply does not parse", n, hook_name[h],
				 verdict);
		for (k = 0; k < 3; k++)
			if (rp.plen == wlen[k] && !memcmp(rp.payload, want[k], wlen[k]))
				break;
		if (k == 3)
			fail_msg(
			    "run %d (%s): a reply that is none of the three answers (%zu bytes, "
			    "RCODE %u)",
			    n, hook_name[h], rp.plen, rp.plen > 3 ? rp.payload[3] & 0xf : 0);
		seen[k]++;
	}
	atomic_store(&c.stop, true);
	assert_int_equal(pthread_join(t, NULL), 0);
	counters(after);
	/* every pass was a busy entry, counted as such; the others answers */
	assert_int_equal(after[NDC_FP_PASS_BUSY] - before[NDC_FP_PASS_BUSY], busy);
	assert_int_equal(after[NDC_FP_HIT] - before[NDC_FP_HIT], (uint64_t)n - busy);
	assert_int_equal(after[NDC_FP_NXDOMAIN], before[NDC_FP_NXDOMAIN]);
	print_message("%d runs while %lu rewrites: answers %llu / %llu / %llu, busy %llu\n", n,
		      atomic_load(&c.writes), (unsigned long long)seen[0],
		      (unsigned long long)seen[1], (unsigned long long)seen[2],
		      (unsigned long long)busy);
	assert_true(atomic_load(&c.writes) > 1000);
	assert_true(seen[0] && seen[1] && seen[2]);
	/* leave the table as the other tests expect it */
	assert_int_equal(ndc_fastpath_unpublish(env.fp, lname, nlen, NDC_T_A), 0);
	for (int i = 0; i < 512; i++) {
		char text[64];

		snprintf(text, sizeof(text), "churn%d.default.svc.cluster.local", i);
		assert_int_equal(ndc_name_from_text(text, lname, sizeof(lname), &nlen), 0);
		ndc_fastpath_unpublish(env.fp, lname, nlen, NDC_T_A);
	}
}

static void test_failopen(void **state)
{
	int egress = ndc_fastpath_egress_prog_fd(env.fp);
	uint8_t dns[NDC_PKT_MAX], in[NDC_PKT_MAX], out[NDC_PKT_MAX], back[NDC_PKT_MAX];
	uint64_t before[NDC_FP_COUNTER_MAX], after[NDC_FP_COUNTER_MAX];
	struct ndc_pkt_query q = {
	    .id = 7, .flags = NDC_ROW_RD, .name = "www.example.com", .qtype = 1};
	size_t dlen, inlen, outlen, blen;

	(void)state;
	assert_true(egress >= 0);
	assert_int_equal(ndc_pkt_dns_query(&q, dns, sizeof(dns), &dlen), 0);
	failopen_config(true);
	for (int v6 = 0; v6 <= 1; v6++) {
		struct ndc_pkt_addrs a = {.v6 = v6, .sport = 40000, .dport = 53};
		struct ndc_pkt_addrs r = {.v6 = v6, .sport = UP_PORT, .dport = 40000};
		const uint8_t *node = v6 ? ndc_pkt_node6 : ndc_pkt_node4, *up = v6 ? up6 : up4;
		const uint8_t *client = v6 ? ndc_pkt_client6 : ndc_pkt_client4;
		struct ndc_pkt_parsed p;
		int fd;

		memcpy(a.src_mac, ndc_pkt_client_mac, 6);
		memcpy(a.dst_mac, ndc_pkt_node_mac, 6);
		memcpy(a.saddr, client, 16);
		memcpy(a.daddr, node, 16);
		assert_int_equal(
		    ndc_pkt_build(&a, &(struct ndc_pkt_opts){0}, dns, dlen, in, sizeof(in), &inlen),
		    0);

		/* nobody listens: on to the upstream, checksums still right */
		counters(before);
		assert_int_equal(run(TC, in, inlen, out, &outlen), (uint32_t)NDC_TC_PASS);
		counters(after);
		assert_int_equal(after[NDC_FP_FWD_UDP], before[NDC_FP_FWD_UDP] + 1);
		assert_int_equal(after[NDC_FP_PASS_MISS], before[NDC_FP_PASS_MISS] + 1);
		assert_int_equal(ndc_pkt_parse(out, outlen, &p), 0);
		assert_memory_equal(p.daddr, up, 16);
		assert_memory_equal(p.saddr, client, 16);
		assert_int_equal(p.dport, UP_PORT);
		assert_int_equal(p.sport, 40000);
		assert_true(p.ip_csum_ok);
		if (!p.udp_csum_ok)
			fail_msg("forwarded query (%s): UDP checksum wrong", v6 ? "v6" : "v4");
		assert_int_equal(p.plen, dlen);
		assert_memory_equal(p.payload, dns, dlen);

		/* the upstream's reply gets the node-local source back */
		memcpy(r.src_mac, ndc_pkt_node_mac, 6);
		memcpy(r.dst_mac, ndc_pkt_client_mac, 6);
		memcpy(r.saddr, up, 16);
		memcpy(r.daddr, client, 16);
		assert_int_equal(
		    ndc_pkt_build(&r, &(struct ndc_pkt_opts){0}, dns, dlen, in, sizeof(in), &inlen),
		    0);
		assert_int_equal(run_fd(egress, in, inlen, back, &blen), (uint32_t)NDC_TC_PASS);
		assert_int_equal(ndc_pkt_parse(back, blen, &p), 0);
		assert_memory_equal(p.saddr, node, 16);
		assert_int_equal(p.sport, 53);
		assert_memory_equal(p.daddr, client, 16);
		assert_int_equal(p.dport, 40000);
		assert_true(p.ip_csum_ok);
		if (!p.udp_csum_ok)
			fail_msg("reply (%s): UDP checksum wrong", v6 ? "v6" : "v4");
		counters(after);
		assert_int_equal(after[NDC_FP_FWD_REPLY], before[NDC_FP_FWD_REPLY] + 1);

		/* a reply to a port that asked nobody through us stays as it is */
		r.dport = 40001;
		assert_int_equal(
		    ndc_pkt_build(&r, &(struct ndc_pkt_opts){0}, dns, dlen, in, sizeof(in), &inlen),
		    0);
		assert_int_equal(run_fd(egress, in, inlen, back, &blen), (uint32_t)NDC_TC_PASS);
		assert_int_equal(blen, inlen);
		assert_memory_equal(back, in, inlen);

		/* an agent listens: the query goes up the stack untouched */
		fd = listener(v6, SOCK_DGRAM);
		assert_int_equal(
		    ndc_pkt_build(&a, &(struct ndc_pkt_opts){0}, dns, dlen, in, sizeof(in), &inlen),
		    0);
		counters(before);
		assert_int_equal(run(TC, in, inlen, out, &outlen), (uint32_t)NDC_TC_PASS);
		assert_int_equal(outlen, inlen);
		assert_memory_equal(out, in, inlen);
		counters(after);
		assert_int_equal(after[NDC_FP_FWD_UDP], before[NDC_FP_FWD_UDP]);
		close(fd);

		/* a cluster name is still answered in the kernel, agent or not */
		q.name = "kubernetes.default.svc.cluster.local";
		assert_int_equal(ndc_pkt_dns_query(&q, dns, sizeof(dns), &dlen), 0);
		assert_int_equal(
		    ndc_pkt_build(&a, &(struct ndc_pkt_opts){0}, dns, dlen, in, sizeof(in), &inlen),
		    0);
		assert_int_equal(run(TC, in, inlen, out, &outlen), TC_ACT_REDIRECT);
		q.name = "www.example.com";
		assert_int_equal(ndc_pkt_dns_query(&q, dns, sizeof(dns), &dlen), 0);
	}
	/* off: passed untouched */
	failopen_config(false);
	{
		struct ndc_pkt_addrs a = {.sport = 40000, .dport = 53};

		memcpy(a.src_mac, ndc_pkt_client_mac, 6);
		memcpy(a.dst_mac, ndc_pkt_node_mac, 6);
		memcpy(a.saddr, ndc_pkt_client4, 16);
		memcpy(a.daddr, ndc_pkt_node4, 16);
		assert_int_equal(
		    ndc_pkt_build(&a, &(struct ndc_pkt_opts){0}, dns, dlen, in, sizeof(in), &inlen),
		    0);
		assert_int_equal(run(TC, in, inlen, out, &outlen), (uint32_t)NDC_TC_PASS);
		assert_int_equal(outlen, inlen);
		assert_memory_equal(out, in, inlen);
	}
}

/* ---------------------------------------------------------------------------------------------
 * The memo (bpf/ndc_fastpath.bpf.c): answers a CPU read lately are taken from its memo while the
 * config's gen is unchanged. Every change user space makes must show in the next answer on that
 * CPU, never the remembered one: a changed answer, a removed name, a type added next to the
 * other-type entry. tests/planted/memo_no_gen/ (test fastpath_bpf_planted_memo) ignores gen and
 * must fail here.
 */

/* Runs the query for (name, qtype) through both hooks twice (the second from the memo): the
 * socket path's reply for src (NULL: the record table's; expect NXDOMAIN: the template). */
static void memo_check(const char *what, const char *name, uint16_t qtype, int expect,
		       const struct ndc_answer *src)
{
	const struct ndc_row r = {what, name, qtype, .expect = expect};

	check_row(&r, src, 0);
	check_row(&r, src, 0);
}

/* test_memo got its first answer right: a planted build then fails later, not at the start */
static bool memo_started;

static void test_memo(void **state)
{
	static const char name[] = "memo.default.svc.cluster.local";
	union ndc_row_answer a[2], other;
	uint8_t lname[NDC_NAME_MAX];
	size_t nlen;

	(void)state;
	pin_cpu(0); /* BPF_PROG_TEST_RUN runs on the calling CPU: one CPU's memo throughout */
	assert_int_equal(ndc_name_from_text(name, lname, sizeof(lname), &nlen), 0);
	ndc_row_a_records(&a[0].a, lname, nlen, 1, 30);
	ndc_row_a_records(&a[1].a, lname, nlen, 2, 30);
	assert_int_equal(ndc_fastpath_publish(env.fp, lname, nlen, NDC_T_A, &a[0].a, 0), 0);
	memo_check("memo: first answer", name, NDC_T_A, NDC_FP_HIT, &a[0].a);
	memo_started = true;
	assert_int_equal(ndc_fastpath_publish(env.fp, lname, nlen, NDC_T_A, &a[1].a, 0), 0);
	memo_check("memo: the answer changed", name, NDC_T_A, NDC_FP_HIT, &a[1].a);

	/* NODATA from the other-type entry (no RRs), then the type itself published (its bytes
	 * are a's: the kernel copies what it is given) */
	ndc_row_a_records(&other.a, lname, nlen, 0, 30);
	assert_int_equal(ndc_fastpath_publish(env.fp, lname, nlen, NDC_FP_QTYPE_OTHER, &other.a, 0),
			 0);
	memo_check("memo: NODATA from the other-type entry", name, NDC_T_AAAA, NDC_FP_NODATA,
		   &other.a);
	assert_int_equal(ndc_fastpath_publish(env.fp, lname, nlen, NDC_T_AAAA, &a[0].a, 0), 0);
	memo_check("memo: the type published", name, NDC_T_AAAA, NDC_FP_HIT, &a[0].a);

	/* gone: NXDOMAIN (the name has no entry left), not the answer remembered */
	assert_int_equal(ndc_fastpath_unpublish(env.fp, lname, nlen, NDC_T_A), 0);
	assert_int_equal(ndc_fastpath_unpublish(env.fp, lname, nlen, NDC_T_AAAA), 0);
	assert_int_equal(ndc_fastpath_unpublish(env.fp, lname, nlen, NDC_FP_QTYPE_OTHER), 0);
	memo_check("memo: the name removed", name, NDC_T_A, NDC_FP_NXDOMAIN, NULL);
}

/*
 * A member of CPU 0's scratch (struct ndc_kscratch in bpf/ndc_fastpath.bpf.c; key 0: one value per
 * CPU, by index), len bytes of it into out, found through the program's maps and the value type's
 * BTF, so that the test follows the layout instead of repeating it.
 */
static void scratch_cpu0(const char *member, void *out, size_t out_len)
{
	struct bpf_prog_info pi = {0};
	struct bpf_map_info mi = {0};
	uint32_t ids[16], n = sizeof(ids) / sizeof(ids[0]), len = sizeof(pi), zero = 0;
	int fd = -1, ncpu = libbpf_num_possible_cpus();

	pi.nr_map_ids = n;
	pi.map_ids = (uint64_t)(uintptr_t)ids;
	assert_int_equal(bpf_obj_get_info_by_fd(env.prog[TC], &pi, &len), 0);
	for (uint32_t i = 0; i < pi.nr_map_ids && i < n && fd < 0; i++) {
		int m = bpf_map_get_fd_by_id(ids[i]);

		assert_true(m >= 0);
		len = sizeof(mi);
		memset(&mi, 0, sizeof(mi));
		assert_int_equal(bpf_obj_get_info_by_fd(m, &mi, &len), 0);
		if (!strcmp(mi.name, "ndc_scratch"))
			fd = m;
		else
			close(m);
	}
	assert_true(fd >= 0 && ncpu > 0);
	struct btf *btf = btf__load_from_kernel_by_id(mi.btf_id);
	const struct btf_type *t = btf ? btf__type_by_id(btf, mi.btf_value_type_id) : NULL;
	long off = -1;

	assert_non_null(t);
	for (uint16_t i = 0; i < btf_vlen(t); i++) {
		const struct btf_member *m = btf_members(t) + i;

		if (!strcmp(btf__name_by_offset(btf, m->name_off), member))
			off = (long)(btf_member_bit_offset(t, i) / 8);
	}
	btf__free(btf);
	if (off < 0)
		fail_msg("ndc_scratch's value has no member '%s'", member);
	if (mi.max_entries != (uint32_t)ncpu)
		fail_msg("ndc_scratch: %u values for %d CPUs", mi.max_entries, ncpu);
	if ((size_t)off + out_len > mi.value_size)
		fail_msg("ndc_scratch: %zu bytes of '%s' pass its value's end", out_len, member);
	uint8_t *vals = calloc(1, mi.value_size);

	assert_non_null(vals);
	assert_int_equal(bpf_map_lookup_elem(fd, &zero, vals), 0);
	memcpy(out, vals + off, out_len);
	free(vals);
	close(fd);
}

/* How many questions CPU 0 found in its memo: its scratch's `recalled`. */
static uint32_t recalled_cpu0(void)
{
	uint32_t v;

	scratch_cpu0("recalled", &v, sizeof(v));
	return v;
}

/* How many of them CPU 0's express lane answered: its scratch's `expressed`. */
static uint32_t expressed_cpu0(void)
{
	uint32_t v;

	scratch_cpu0("expressed", &v, sizeof(v));
	return v;
}

/* Runs row r through both hooks as check_row does, and checks whether CPU 0 found it in its memo
 * both times (recalled) or never. */
static void memo_row(const struct ndc_row *r, const struct ndc_answer *src, bool recalled)
{
	uint32_t before = recalled_cpu0(), after;

	check_row(r, src, 0);
	after = recalled_cpu0();
	if (after - before != (recalled ? 2u : 0u))
		fail_msg("%s: found in the memo %llu times of 2, want %s", r->what,
			 (unsigned long long)(after - before), recalled ? "both" : "none");
}

/* arcount 0: an OPT the header does not announce is trailing bytes */
static void mut_ar0(uint8_t *d, size_t *len)
{
	(void)len;
	d[10] = 0;
	d[11] = 0;
}

/*
 * The memo takes a question only as the bytes a full read walked and checked, in a message of the
 * plain shape (the question alone, or with a plain OPT last): every other message that carries
 * the same question bytes is read in full again and gets the full read's verdict, and the same
 * name in another case is a question of its own, answered with its own case.
 */
static void test_memo_shapes(void **state)
{
	static const struct ndc_row seed[] = {
	    {"plain", K8S_NAME, NDC_T_A, .expect = NDC_FP_HIT},
	    {"with a plain OPT", K8S_NAME, NDC_T_A, .edns = 1232, .expect = NDC_FP_HIT},
	    {"with a plain OPT of 512", K8S_NAME, NDC_T_A, .edns = 512, .expect = NDC_FP_HIT},
	    {"another case", "KuBeRnEtEs.default.svc.CLUSTER.local", NDC_T_A, .expect = NDC_FP_HIT},
	    {"IPv6", K8S_NAME, NDC_T_A, .v6 = true, .expect = NDC_FP_HIT},
	};
	static const struct ndc_row not_announced = {
	    "an OPT not announced", K8S_NAME,	       NDC_T_A,
	    .edns = 1232,	    .mutate = mut_ar0, .expect = NDC_FP_PASS_FORMAT};

	(void)state;
	pin_cpu(0);
	/* each once to be remembered, then from the memo */
	for (size_t i = 0; i < sizeof(seed) / sizeof(seed[0]); i++) {
		check_row(&seed[i], NULL, 0);
		memo_row(&seed[i], NULL, true);
	}
	/*
	 * every query of test_passed, twice (the first must not be remembered either): only those
	 * marked memo are found there (IPv4 with DF set; ANY at a name with records only of other
	 * types, passed by rule from the memo as from the table); every other shape, type, class,
	 * name or malformation is read in full and gets its own verdict
	 */
	for (size_t i = 0; i < sizeof(passed_rows) / sizeof(passed_rows[0]); i++) {
		const struct ndc_row *r = &passed_rows[i];
		if (r->memo)
			check_row(r, NULL, 0); /* asked twice: noted, then remembered */
		memo_row(r, NULL, r->memo);
		memo_row(r, NULL, r->memo);
	}
	memo_row(&not_announced, NULL, false);
	memo_row(&not_announced, NULL, false);
	/* the plain ones still come from the memo after all that */
	for (size_t i = 0; i < sizeof(seed) / sizeof(seed[0]); i++)
		memo_row(&seed[i], NULL, true);
	/*
	 * the longest question it holds (104 bytes: a name of 100, in the answer's unused name
	 * after the entry's head) and one byte longer, read in full every time (last: a publish
	 * makes every entry old)
	 */
	for (int extra = 0; extra < 2; extra++) {
		static const char l1[] = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"; /* 40 */
		static const char l2[] = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";	     /* 33 */
		char name[256];
		uint8_t lname[NDC_NAME_MAX];
		union ndc_row_answer a;
		size_t nlen;

		/* 41 + (32 + extra) + 27 (default.svc.cluster.local) wire bytes */
		snprintf(name, sizeof(name), "%s.%.*s.default.svc.cluster.local", l1, 31 + extra,
			 l2);
		assert_int_equal(ndc_name_from_text(name, lname, sizeof(lname), &nlen), 0);
		assert_int_equal(nlen, 100u + (size_t)extra);
		ndc_row_a_records(&a.a, lname, nlen, 1, 30);
		assert_int_equal(ndc_fastpath_publish(env.fp, lname, nlen, NDC_T_A, &a.a, 0), 0);
		struct ndc_row r = {extra ? "a question of 105 bytes" : "a question of 104 bytes",
				    name, NDC_T_A, .expect = NDC_FP_HIT};
		check_row(&r, &a.a, 0); /* noted, then remembered when it may be */
		memo_row(&r, &a.a, !extra);
		memo_row(&r, &a.a, !extra);
		assert_int_equal(ndc_fastpath_unpublish(env.fp, lname, nlen, NDC_T_A), 0);
	}
}

#define MEMO_ENTRIES 32 /* NDC_MEMO_ENTRIES in bpf/ndc_fastpath.bpf.c */

/*
 * A question's two memo places and tag, as memo_match computes them (a multiply of the question's
 * first two words, its last word and its length). A copy of the program's formula, so that the
 * test can pick two questions of one first place; the test checks the copy against the
 * program's own notes (the scratch's `seen`) before it relies on it.
 */
static void memo_places(const uint8_t *q, size_t qlen, unsigned *a, unsigned *b, uint32_t *tag)
{
	uint64_t w0, w1, w, wl, h;

	memcpy(&w0, q, 8);
	memcpy(&w1, q + 8, 8);
	memcpy(&w, q + qlen - 8, 8);
	wl = w >> (((8 - (qlen & 7)) & 7) * 8);
	h = (w0 ^ w1 << 1 ^ wl ^ (uint64_t)qlen << 56) * NDC_FP_HASH_MUL;
	*a = (unsigned)(h >> 59) & (MEMO_ENTRIES - 1);
	*b = (unsigned)(h >> 54) & (MEMO_ENTRIES - 1);
	*tag = (uint32_t)h | 1;
}

struct door_q {
	char name[64];
	uint8_t lname[NDC_NAME_MAX];
	size_t nlen;
	unsigned a, b;
	uint32_t tag;
	union ndc_row_answer ans;
};

/* Question i of a test's own names (prefix: the test's; the memo's notes outlive a test). */
static void door_q_make(struct door_q *d, const char *prefix, unsigned i)
{
	uint8_t q[NDC_NAME_MAX + 4];

	snprintf(d->name, sizeof(d->name), "%s-%u.default.svc.cluster.local", prefix, i);
	assert_int_equal(ndc_name_from_text(d->name, d->lname, sizeof(d->lname), &d->nlen), 0);
	memcpy(q, d->lname, d->nlen);
	q[d->nlen] = 0;
	q[d->nlen + 1] = NDC_T_A; /* QTYPE A, QCLASS IN, big-endian */
	q[d->nlen + 2] = 0;
	q[d->nlen + 3] = 1;
	memo_places(q, d->nlen + 4, &d->a, &d->b, &d->tag);
}

/* Asks d once on tc, answered with its record; recalled: whether from the memo. */
static void door_ask(const struct door_q *d, const char *what, bool recalled)
{
	const struct ndc_row r = {what, d->name, NDC_T_A, .expect = NDC_FP_HIT};
	uint32_t before = recalled_cpu0();

	check_row_on(&r, &d->ans.a, 0, TC, TC);
	if (recalled_cpu0() - before != (recalled ? 1u : 0u))
		fail_msg("%s (%s): %s the memo", what, d->name,
			 recalled ? "not found in" : "found in");
}

/*
 * Two hot questions of the same first memo place, asked in turn (A, B, A, B), are both
 * remembered at their second full read: the doorkeeper notes a question at both its places, so
 * B's note at the shared one leaves A's at A's other. With one note, at the first place, each
 * overwrote the other's and neither was ever remembered: two of the latency benchmark's 8 hot
 * names, a quarter of its hot queries, took the table every time.
 */
static void test_memo_doorkeeper(void **state)
{
	struct door_q q[2];
	uint32_t seen[MEMO_ENTRIES];
	unsigned i = 0;

	(void)state;
	pin_cpu(0); /* BPF_PROG_TEST_RUN runs on the calling CPU: one CPU's memo throughout */
	door_q_make(&q[0], "door", i);
	for (i = 1; i < 100000; i++) {
		door_q_make(&q[1], "door", i);
		if (q[1].a == q[0].a && q[1].b != q[0].b && q[0].b != q[0].a && q[1].b != q[1].a)
			break;
	}
	assert_true(i < 100000);
	for (int k = 0; k < 2; k++) {
		ndc_row_a_records(&q[k].ans.a, q[k].lname, q[k].nlen, 1 + k, 30);
		assert_int_equal(
		    ndc_fastpath_publish(env.fp, q[k].lname, q[k].nlen, NDC_T_A, &q[k].ans.a, 0),
		    0);
	}
	door_ask(&q[0], "A, first: read in full, noted", false);
	/* the premise: the program noted A at the first place and with the tag the test's copy of
	 * its formula gives (a formula changed since leaves A elsewhere) */
	scratch_cpu0("seen", seen, sizeof(seen));
	if (seen[q[0].a] != q[0].tag)
		fail_msg(
		    "A's note at %u is %08x, want its tag %08x: the test's copy of memo_match's "
		    "formula is out of date",
		    q[0].a, seen[q[0].a], q[0].tag);
	door_ask(&q[1], "B, first: read in full, noted (over A's note at their shared place)",
		 false);
	door_ask(&q[0], "A, second: read in full, remembered", false);
	door_ask(&q[1], "B, second: read in full, remembered", false);
	door_ask(&q[0], "A, third", true);
	door_ask(&q[1], "B, third", true);
	door_ask(&q[0], "A, fourth", true);
	for (int k = 0; k < 2; k++)
		assert_int_equal(ndc_fastpath_unpublish(env.fp, q[k].lname, q[k].nlen, NDC_T_A), 0);
}

/* The first i >= *from (past it after) whose question has first place a and second place b
 * (b any: ~0u), its second place not in avoid[0..n). */
static void door_find(struct door_q *d, unsigned *from, unsigned a, unsigned b,
		      const unsigned *avoid, size_t n)
{
	for (; *from < 200000; (*from)++) {
		bool ok;

		door_q_make(d, "place", *from);
		ok = d->a == a && (b == ~0u || d->b == b) && d->b != d->a;
		for (size_t k = 0; ok && k < n; k++)
			ok = d->b != avoid[k];
		if (ok) {
			(*from)++;
			return;
		}
	}
	fail_msg("no question place-N of places (%u, %d) in 200000", a, b == ~0u ? -1 : (int)b);
}

/*
 * Where a question remembered goes when both its places hold answers of this gen: to the one not
 * put or found since the last question passed over it (a clock's second chance), else nowhere,
 * and both lose their marks. A and B share their first place; B's second holds F, remembered
 * and never asked since. A and B asked strictly in turn, as the latency benchmark's kxdpgun asks
 * its hot names: B first finds both places marked (A and F just put) and passes, then takes F's
 * place, and both stay in the memo. Taking the first place (the rule before) or a mark set by
 * hits only, each took the other's place before its next ask, for good (two of the benchmark's 8
 * hot names, a quarter of its hot queries). C has A's and B's places: while they are found
 * between C's asks, C is read in full and not remembered; asked twice with no hit between, C
 * takes the first.
 */
static void test_memo_placement(void **state)
{
	struct door_q a, b, f, c;
	unsigned from = 0, avoid[2];
	uint32_t tag[MEMO_ENTRIES];

	(void)state;
	pin_cpu(0);
	door_q_make(&a, "place", from++);
	while (a.a == a.b)
		door_q_make(&a, "place", from++);
	avoid[0] = a.b;
	door_find(&b, &from, a.a, ~0u, avoid, 1); /* B: A's first place, another second */
	avoid[0] = a.a;
	avoid[1] = b.b;
	door_find(&f, &from, b.b, ~0u, avoid, 2); /* F: first at B's second */
	door_find(&c, &from, a.a, b.b, NULL, 0);  /* C: A's and B's places */
	struct door_q *all[] = {&a, &b, &f, &c};

	for (size_t k = 0; k < 4; k++) {
		ndc_row_a_records(&all[k]->ans.a, all[k]->lname, all[k]->nlen, 1 + (int)k, 30);
		assert_int_equal(ndc_fastpath_publish(env.fp, all[k]->lname, all[k]->nlen, NDC_T_A,
						      &all[k]->ans.a, 0),
				 0);
	}
	/* the gen is now constant: every entry before is old, F takes its first place */
	door_ask(&f, "F, first", false);
	door_ask(&f, "F, second: remembered", false);
	door_ask(&a, "A, first", false);
	door_ask(&b, "B, first", false);
	door_ask(&a, "A, second: remembered", false);
	/* the premise: A at its first place, F at B's second (the test's copy of the formula) */
	scratch_cpu0("tag", tag, sizeof(tag));
	if (tag[a.a] != a.tag || tag[b.b] != f.tag)
		fail_msg("tags at %u and %u are %08x and %08x, want A's %08x and F's %08x: the "
			 "test's copy of memo_match's formula is out of date",
			 a.a, b.b, tag[a.a], tag[b.b], a.tag, f.tag);
	door_ask(&b, "B, second: both places just put, not remembered", false);
	door_ask(&a, "A, third: kept", true);
	door_ask(&b, "B, third: remembered at F's place, not A's", false);
	for (int k = 0; k < 3; k++) {
		door_ask(&a, "A, in turn with B", true);
		door_ask(&b, "B, in turn with A", true);
	}
	door_ask(&f, "F, after B took its place", false);
	/* C: both its places found between its asks: never remembered */
	door_ask(&c, "C, first", false);
	for (int k = 0; k < 3; k++) {
		door_ask(&c, "C, with A and B found since its last ask", false);
		door_ask(&a, "A, kept against C", true);
		door_ask(&b, "B, kept against C", true);
	}
	door_ask(&c, "C, A and B found since: not remembered, their marks cleared", false);
	/* asked again with no hit between: A's place, the first of the two */
	door_ask(&c, "C, A and B not found since its last ask: remembered", false);
	door_ask(&c, "C, then", true);
	door_ask(&a, "A, evicted by C (the first place)", false);
	door_ask(&b, "B, still", true);
	for (size_t k = 0; k < 4; k++)
		assert_int_equal(
		    ndc_fastpath_unpublish(env.fp, all[k]->lname, all[k]->nlen, NDC_T_A), 0);
}

/* ---------------------------------------------------------------------------------------------
 * The express lane (bpf/ndc_fastpath.bpf.c, ndc_express): a question the memo holds, in an
 * untagged IPv4 frame of the plain shape, answered before the core with the core's reply and
 * counts; every other frame that carries a question the memo holds is left to the core, which
 * gives it its own verdict. tests/planted/express_frag/ (test fastpath_bpf_planted_express) lets
 * the lane answer a first fragment and must fail here.
 */

/* test_express saw the lane answer right: a planted build then fails later, not at the start */
static bool express_started;

/*
 * Row r through both hooks (check_row: the socket path's reply and counts), and how CPU 0 got it:
 * from the memo by the lane (lane), by the core (recalled), or by a full read (neither).
 */
static void express_row(const struct ndc_row *r, bool lane, bool recalled)
{
	uint32_t rec0 = recalled_cpu0(), xp0 = expressed_cpu0(), rec, xp;

	check_row(r, NULL, 0);
	rec = recalled_cpu0() - rec0;
	xp = expressed_cpu0() - xp0;
	if (xp != (lane ? 2u : 0u) || rec != (lane || recalled ? 2u : 0u))
		fail_msg("%s: %u of 2 answered by the express lane, %u found in the memo; want %s",
			 r->what, xp, rec,
			 lane	    ? "both by the lane"
			 : recalled ? "both by the core from the memo"
				    : "none from the memo");
}

static void test_express(void **state)
{
	/* the lane's: asked twice (noted, remembered), then from the lane in both hooks */
	static const struct ndc_row lane[] = {
	    {"plain", K8S_NAME, NDC_T_A, .expect = NDC_FP_HIT},
	    {"with a plain OPT of 1232", K8S_NAME, NDC_T_A, .edns = 1232, .expect = NDC_FP_HIT},
	    {"with a plain OPT of 100 (means 512)", K8S_NAME, NDC_T_A, .edns = 100,
	     .expect = NDC_FP_HIT},
	    {"RD clear", K8S_NAME, NDC_T_A, .flags_xor = NDC_ROW_RD, .expect = NDC_FP_HIT},
	    {"CD echoed, AD and Z not", K8S_NAME, NDC_T_A, .flags_xor = 0x0070,
	     .expect = NDC_FP_HIT},
	    {"NODATA from the other-type entry", "cart.shop.svc.cluster.local", NDC_T_AAAA,
	     .expect = NDC_FP_NODATA},
	    {"SRV of odd length", "_pg._tcp.postgres.data.svc.cluster.local", NDC_T_SRV,
	     .expect = NDC_FP_HIT},
	    {"DF set", K8S_NAME, NDC_T_A, .o.frag_off = 0x4000, .expect = NDC_FP_HIT},
	    {"Ethernet padding", K8S_NAME, NDC_T_A, .o.l2_pad = 10, .expect = NDC_FP_HIT},
	};
	/* the same question in frames the lane leaves to the core: from the memo there */
	static const struct ndc_row core_memo[] = {
	    {"802.1Q tagged", K8S_NAME, NDC_T_A, .o.vlan = 7, .expect = NDC_FP_HIT},
	    {"IPv6", K8S_NAME, NDC_T_A, .v6 = true, .expect = NDC_FP_HIT},
	};
	/* ... and in frames the core passes (or that are not ours), never from the memo */
	static const struct ndc_row core_pass[] = {
	    {"first fragment", K8S_NAME, NDC_T_A, .o.frag_off = 0x2000, .expect = NDC_FP_PASS_FRAG},
	    {"later fragment", K8S_NAME, NDC_T_A, .o.frag_off = 0x0010, .expect = NDC_FP_PASS_FRAG},
	    {"IPv4 options", K8S_NAME, NDC_T_A, .o.ihl = 6, .expect = NDC_FP_PASS_FRAG},
	    {"UDP length short of IP", K8S_NAME, NDC_T_A, .o.udp_len_delta = -1,
	     .expect = NDC_FP_PASS_FORMAT},
	    {"UDP length past IP", K8S_NAME, NDC_T_A, .o.udp_len_delta = 3,
	     .expect = NDC_FP_PASS_FORMAT},
	    {"trailing byte", K8S_NAME, NDC_T_A, .mutate = ndc_pkt_mut_trailing,
	     .expect = NDC_FP_PASS_FORMAT},
	    {"QR set", K8S_NAME, NDC_T_A, .mutate = ndc_pkt_mut_set_qr,
	     .expect = NDC_FP_PASS_FORMAT},
	    {"OPT not announced", K8S_NAME, NDC_T_A, .edns = 1232, .mutate = mut_ar0,
	     .expect = NDC_FP_PASS_FORMAT},
	    {"DO bit", K8S_NAME, NDC_T_A, .edns = 1232, .edns_flags = 0x8000,
	     .expect = NDC_FP_PASS_EDNS},
	    {"other UDP port", K8S_NAME, NDC_T_A, .dport = 5353, .expect = NONE},
	    {"other destination", K8S_NAME, NDC_T_A, .wrong_dst = true, .expect = NONE},
	    {"TCP to 53", K8S_NAME, NDC_T_A, .o.protocol = 6, .expect = NONE},
	};
	const struct ndc_row pass_marker = {"ANY at an empty non-terminal",
					    "shop.svc.cluster.local", NDC_T_ANY,
					    .expect = NDC_FP_PASS_MISS};

	(void)state;
	pin_cpu(0);
	for (size_t i = 0; i < sizeof(lane) / sizeof(lane[0]); i++) {
		check_row(&lane[i], NULL, 0); /* noted, then remembered */
		express_row(&lane[i], true, false);
		express_started = true;
		express_row(&lane[i], true, false);
	}
	for (size_t i = 0; i < sizeof(core_memo) / sizeof(core_memo[0]); i++) {
		check_row(&core_memo[i], NULL, 0);
		express_row(&core_memo[i], false, true);
	}
	for (size_t i = 0; i < sizeof(core_pass) / sizeof(core_pass[0]); i++) {
		express_row(&core_pass[i], false, false);
		express_row(&core_pass[i], false, false);
	}
	/* ANY, passed by rule, from the memo by the core (which counts it), not by the lane */
	check_row(&pass_marker, NULL, 0);
	express_row(&pass_marker, false, true);
	/* the plain one still from the lane after all that */
	express_row(&lane[0], true, false);
}

/* ---------------------------------------------------------------------------------------------
 * The express lane's table read (ndc_express_get): a question of the lane's shape that the memo
 * does not hold is keyed and read from the table by the lane itself, its name compared, not
 * walked; whatever the lane cannot answer that way goes to the core untouched, which decides as
 * it always did. tests/planted/express_class/ (test fastpath_bpf_planted_express_table) lets the
 * lane answer a question of another class and must fail here.
 */

static bool express_table_started;

/* Questions CPU 0's express lane answered from the table: the last word of its scratch's counts
 * (NDC_KS_LANE_READS in bpf/ndc_fastpath.bpf.c, past every counter of abi.h). */
static uint64_t lane_reads_cpu0(void)
{
	uint64_t counts[16];

	_Static_assert(NDC_FP_COUNTER_MAX < 16, "the lane's count is past every counter");
	scratch_cpu0("counts", counts, sizeof(counts));
	return counts[15];
}

#define LANE_ANY 3 /* lane_row: both answered by the lane, from the table or the memo */

/*
 * Row r through both hooks (check_row: the socket path's reply and counts), and how many of the
 * two CPU 0's lane answered from the table (tables) and from the memo (memo); with tables LANE_ANY,
 * that the lane answered both (which of them the memo held depends on the placement of the
 * questions asked before: test_memo_placement).
 */
static void lane_row(const struct ndc_row *r, const struct ndc_answer *src, uint32_t age,
		     uint32_t tables, uint32_t memo)
{
	uint64_t t0 = lane_reads_cpu0(), t;
	uint32_t xp0 = expressed_cpu0(), xp;

	check_row(r, src, age);
	t = lane_reads_cpu0() - t0;
	xp = expressed_cpu0() - xp0;
	if (tables == LANE_ANY ? t + xp != 2 : t != tables || xp != memo)
		fail_msg("%s: %llu of 2 answered by the lane from the table and %u from the memo; "
			 "want %u and %u",
			 r->what, (unsigned long long)t, xp, tables, memo);
}

/* the first label's length byte (10, "kubernetes") as 'J': lowercased it is 'j', never 10 */
static void mut_len_upper(uint8_t *d, size_t *len)
{
	(void)len;
	d[12] = 'J';
}

static void test_express_table(void **state)
{
	/*
	 * answered by the lane from the table the first time they are asked, in both hooks: in a
	 * case no other test asks them in, within the first 16 bytes (memo_match's tag is of those
	 * and the last word), so that the doorkeeper has no note of them yet
	 */
	static const struct ndc_row table[] = {
	    {"A ClusterIP", "kUBERNETES.default.svc.cluster.local", NDC_T_A, .expect = NDC_FP_HIT},
	    {"A in another case", "KUBErnetes.Default.Svc.Cluster.Local", NDC_T_A,
	     .expect = NDC_FP_HIT},
	    {"AAAA dual-stack", "Frontend.shop.svc.cluster.local", NDC_T_AAAA,
	     .expect = NDC_FP_HIT},
	    {"A headless set", "Postgres.data.svc.cluster.local", NDC_T_A, .expect = NDC_FP_HIT},
	    {"SRV with additional", "_PG._tcp.postgres.data.svc.cluster.local", NDC_T_SRV,
	     .expect = NDC_FP_HIT},
	    {"PTR v4 (a digit first: the rare region)", "1.0.96.10.IN-ADDR.arpa", NDC_T_PTR,
	     .expect = NDC_FP_HIT},
	    {"CNAME exact", "Payments.shop.svc.cluster.local", NDC_T_CNAME, .expect = NDC_FP_HIT},
	    {"with a plain OPT of 1232", "Kafka.data.svc.cluster.local", NDC_T_A, .edns = 1232,
	     .expect = NDC_FP_HIT},
	    {"NODATA from the other-type entry", "CART.shop.svc.cluster.local", NDC_T_AAAA,
	     .expect = NDC_FP_NODATA},
	    {"NODATA empty non-terminal", "Shop.svc.cluster.local", NDC_T_A,
	     .expect = NDC_FP_NODATA},
	};
	/* left to the core by the lane (its read finds nothing, or not what it answers) */
	static const struct ndc_row core[] = {
	    {"NXDOMAIN search path", "api.example.com.default.svc.cluster.local", NDC_T_A,
	     .expect = NDC_FP_NXDOMAIN},
	    {"class CH of a name in the table", K8S_NAME, NDC_T_A, .qclass = 3,
	     .expect = NDC_FP_PASS_FORMAT},
	    {"TYPE0 of a name in the table", K8S_NAME, 0, .expect = NDC_FP_PASS_FORMAT},
	    {"a length byte in 'A'..'Z'", K8S_NAME, NDC_T_A, .mutate = mut_len_upper,
	     .expect = NDC_FP_PASS_FORMAT},
	    {"the name a pointer", K8S_NAME, NDC_T_A, .mutate = ndc_pkt_mut_pointer_name,
	     .expect = NDC_FP_PASS_FORMAT},
	    {"a label and then a pointer", K8S_NAME, NDC_T_A, .mutate = ndc_pkt_mut_pointer_tail,
	     .expect = NDC_FP_PASS_FORMAT},
	    {"DO bit", K8S_NAME, NDC_T_A, .edns = 1232, .edns_flags = 0x8000,
	     .expect = NDC_FP_PASS_EDNS},
	    {"IPv6", "frontend.shop.svc.cluster.local", NDC_T_A, .v6 = true, .expect = NDC_FP_HIT},
	};
	uint8_t lname[NDC_NAME_MAX];
	union ndc_row_answer a;
	size_t nlen;

	(void)state;
	pin_cpu(0);
	/*
	 * The records published again, as the agent publishes them once its NXDOMAIN template is
	 * set (setup set it after): the zone's NODATA answers by reference now (abi.h,
	 * NDC_FP_V_SOA), which the lane answers with their authority added (table_soa). And a
	 * change: every answer the memo holds is of an old gen now.
	 */
	assert_int_equal(ndc_records_foreach(env.rec, publish_one, NULL), 0);
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		/* tc notes it, XDP's read remembers it (if its places let it: memo_put) */
		lane_row(&table[i], NULL, 0, 2, 0);
		express_table_started = true;
		lane_row(&table[i], NULL, 0, LANE_ANY, 0);
	}
	for (size_t i = 0; i < sizeof(core) / sizeof(core[0]); i++)
		lane_row(&core[i], NULL, 0, 0, 0);

	/* a cached answer (it expires): the lane reads it, the core counts its TTLs down */
	assert_int_equal(ndc_name_from_text("example.org", lname, sizeof(lname), &nlen), 0);
	ndc_row_a_records(&a.a, lname, nlen, 2, 300);
	publish_aged("example.org", NDC_T_A, &a.a, 300, 5);
	const struct ndc_row cached = {"a cached answer", "example.org", NDC_T_A,
				       .expect = NDC_FP_HIT};
	lane_row(&cached, &a.a, 5, 0, 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_answers),
	    cmocka_unit_test(test_counted_on_every_cpu),
	    cmocka_unit_test(test_passed),
	    cmocka_unit_test(test_not_synced),
	    cmocka_unit_test(test_config_abi),
	    cmocka_unit_test(test_redirect_peer),
	    cmocka_unit_test(test_cache_ttl),
	    cmocka_unit_test(test_sizes),
	    cmocka_unit_test(test_pass_marker),
	    cmocka_unit_test(test_name_lengths),
	    cmocka_unit_test(test_collision),
	    cmocka_unit_test(test_failopen),
	    cmocka_unit_test(test_rewrite_while_read),
	    cmocka_unit_test(test_memo),
	    cmocka_unit_test(test_memo_shapes),
	    cmocka_unit_test(test_memo_doorkeeper),
	    cmocka_unit_test(test_memo_placement),
	    cmocka_unit_test(test_express),
	    cmocka_unit_test(test_express_table),
	};
	/*
	 * --planted OBJ [memo|express|express_table]: the memo's test (the default), the express
	 * lane's or the lane's table read's alone, on OBJ, a build with a planted bug it must catch
	 */
	const struct CMUnitTest memo_only[] = {cmocka_unit_test(test_memo)};
	const struct CMUnitTest express_only[] = {cmocka_unit_test(test_express)};
	const struct CMUnitTest express_table_only[] = {cmocka_unit_test(test_express_table)};

	if (geteuid() != 0) {
		fprintf(stderr, "test_fastpath_bpf: needs root to load BPF programs: skipped\n");
		return 77;
	}
	if (argc > 2 && !strcmp(argv[1], "--planted")) {
		const char *which = argc > 3 ? argv[3] : "memo";
		bool started;
		int failed;

		setenv("NDC_TEST_OBJECT", argv[2], 1);
		if (!strcmp(which, "express")) {
			failed = cmocka_run_group_tests(express_only, setup, teardown);
			started = express_started;
		} else if (!strcmp(which, "express_table")) {
			failed = cmocka_run_group_tests(express_table_only, setup, teardown);
			started = express_table_started;
		} else if (!strcmp(which, "memo")) {
			failed = cmocka_run_group_tests(memo_only, setup, teardown);
			started = memo_started;
		} else {
			fprintf(stderr,
				"test_fastpath_bpf --planted OBJ [memo|express|express_table]: "
				"no test '%s'\n",
				which);
			return 2;
		}
		fprintf(stderr,
			"test_fastpath_bpf --planted: the %s test %s%s (must fail after its "
			"first answer)\n",
			which, failed ? "failed" : "passed",
			started ? " after its first answer" : "");
		return failed == 1 && started ? 0 : 1;
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}
