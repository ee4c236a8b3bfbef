// SPDX-License-Identifier: MIT
/*
 * The DPDK answer function on crafted mbufs, IPv4 and IPv6: the sample cluster is published into
 * the DPDK table with the table's own calls (what the publisher does), queries go in as Ethernet
 * frames in mbufs of a real pool, and every reply must be byte-equal to what the socket path
 * writes for the same query (ndc_dns_write_reply), with addresses, ports, lengths and checksums
 * checked independently (tests/bpf/answer_rows.c and packets.c, shared with the BPF tests). Every
 * query that must not be answered must stay untouched with the same reason the BPF program gives
 * (tests/bpf/test_fastpath_bpf.c has the same rows). Also: TTL countdown and expiry of cached
 * answers, pass markers, unpublishing, a buffer too small for the reply, and readers answering
 * while a writer replaces the entries they read (RCU QSBR reclamation, under ASan in CI).
 *
 * The EAL runs with --no-huge --no-pci -m 64 and no worker lcore: the test thread reads the
 * table as an lcore does.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <arpa/inet.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_rcu_qsbr.h>

#include <ndc/abi.h>
#include <ndc/dns_wire.h>

#include "dpdk/internal.h"
#include "objects/objects.h"
#include "answer_rows.h"
#include "packets.h"
#include "records/records.h"

#define NS 1000000000ull
#define NONE NDC_DP_NOT_OURS

static struct {
	struct ndc_k8s_objects objs;
	struct ndc_records *rec;
	struct ndc_dpdk_table *t;
	struct rte_mempool *pool;
	union {
		struct ndc_answer a;
		uint8_t b[sizeof(struct ndc_answer) + NDC_FP_DATA_MAX];
	} nx;
} env;

static int publish_one(void *arg, const uint8_t *lname, size_t nlen, uint16_t qtype,
		       const struct ndc_answer *a)
{
	(void)arg;
	return ndc_dpdk_table_publish(env.t, lname, nlen, qtype, a, 0);
}

static int setup(void **state)
{
	char prefix[64], err[256];
	char *argv[] = {"test_dpdk_answer", "--no-huge",      "--no-pci",   "-m",   "64",
			"--no-shconf",	    "--no-telemetry", "--lcores=0", prefix, NULL};
	uint8_t zone[NDC_NAME_MAX], pass[NDC_NAME_MAX];
	struct ndc_fp_config cfg = {.abi_version = NDC_ABI_VERSION};
	size_t zlen, plen;

	(void)state;
	snprintf(prefix, sizeof(prefix), "--file-prefix=ndc-test-%d", (int)getpid());
	if (rte_eal_init(9, argv) < 0) {
		fprintf(stderr, "rte_eal_init failed: %s\n", rte_strerror(rte_errno));
		return -1;
	}
	env.pool =
	    rte_pktmbuf_pool_create("test", 255, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
	assert_non_null(env.pool);

	assert_int_equal(ndc_snapshot_parse(ndc_sample_cluster, ndc_sample_cluster_len, &env.objs,
					    err, sizeof(err)),
			 0);
	struct ndc_records_opts ro = {.zone = "cluster.local", .ttl = 5};
	assert_int_equal(ndc_records_build(&env.objs, &ro, &env.rec), 0);

	assert_int_equal(ndc_name_from_text("cluster.local", zone, sizeof(zone), &zlen), 0);
	assert_int_equal(ndc_name_from_text("pod.cluster.local", pass, sizeof(pass), &plen), 0);
	memcpy(&cfg.addr4[0], ndc_pkt_node4, 4);
	cfg.n_addr4 = 1;
	memcpy(cfg.addr6[0], ndc_pkt_node6, 16);
	cfg.n_addr6 = 1;
	cfg.port = htons(53);
	memcpy(cfg.zone, zone, zlen);
	cfg.zone_len = (uint8_t)zlen;
	memcpy(cfg.pass, pass, plen);
	cfg.pass_len = (uint8_t)plen;
	struct ndc_dpdk_table_opts to = {.max_entries = 4096, .max_readers = 1, .config = &cfg};
	assert_int_equal(ndc_dpdk_table_new(&to, &env.t), 0);

	/* What the publisher does for a record table. */
	assert_int_equal(ndc_records_foreach(env.rec, publish_one, NULL), 0);
	assert_int_equal(ndc_records_nxdomain(env.rec, &env.nx.a, NDC_FP_DATA_MAX), 0);
	assert_int_equal(ndc_dpdk_table_set_nx(env.t, &env.nx.a), 0);
	assert_int_equal(ndc_dpdk_table_set_synced(env.t, true), 0);
	return 0;
}

static int teardown(void **state)
{
	char dir[PATH_MAX];

	(void)state;
	ndc_dpdk_table_free(env.t);
	rte_mempool_free(env.pool);
	ndc_records_free(env.rec);
	ndc_k8s_objects_free(&env.objs);
	snprintf(dir, sizeof(dir), "%s", rte_eal_get_runtime_dir());
	rte_eal_cleanup();
	rmdir(dir); /* the EAL leaves its (empty) runtime directory */
	return 0;
}

/* The frame in a fresh mbuf with tailroom bytes after it (0: what the pool gives). */
static struct rte_mbuf *mbuf_of(const uint8_t *frame, size_t len, size_t tailroom)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(env.pool);
	uint8_t *p;

	assert_non_null(m);
	if (tailroom)
		m->data_off = (uint16_t)(m->buf_len - len - tailroom);
	p = (uint8_t *)rte_pktmbuf_append(m, (uint16_t)len);
	assert_non_null(p);
	memcpy(p, frame, len);
	return m;
}

static void assert_reply(const char *what, const uint8_t *in, size_t inlen, struct rte_mbuf *m,
			 const uint8_t *want, size_t wlen)
{
	assert_int_equal(m->pkt_len, m->data_len);
	ndc_row_assert_reply(what, in, inlen, rte_pktmbuf_mtod(m, const uint8_t *), m->data_len,
			     want, wlen);
}

/*
 * A row through ndc_dpdk_answer_mbuf at now_ns: answered like the socket path (src as in
 * ndc_row_socket_reply, TTLs lowered by age), or passed untouched with the row's reason.
 */
static void check_row_at(const struct ndc_row *r, const struct ndc_answer *src, uint32_t age,
			 uint64_t now_ns, size_t tailroom)
{
	uint8_t dns[NDC_PKT_MAX], in[NDC_PKT_MAX], want[NDC_PKT_MAX];
	size_t dlen, inlen, wlen = 0;
	struct rte_mbuf *m;
	int v;

	ndc_row_query(r, dns, &dlen);
	ndc_row_frame(r, dns, dlen, in, &inlen);
	if (ndc_dpdk_answered(r->expect))
		wlen = ndc_row_socket_reply(
		    env.rec, dns, dlen, r->expect == NDC_FP_NXDOMAIN ? &env.nx.a : src, age, want);
	m = mbuf_of(in, inlen, tailroom);
	v = ndc_dpdk_answer_mbuf(env.t, m, now_ns);
	if (v != r->expect)
		fail_msg("%s: verdict %d, want %d", r->what, v, r->expect);
	if (ndc_dpdk_answered(v)) {
		assert_reply(r->what, in, inlen, m, want, wlen);
	} else if (m->data_len != inlen || memcmp(rte_pktmbuf_mtod(m, void *), in, inlen)) {
		fail_msg("%s: passed frame was modified", r->what);
	}
	rte_pktmbuf_free(m);
}

static void check_row(const struct ndc_row *r)
{
	check_row_at(r, NULL, 0, ndc_row_mono_ns(), 0);
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
	    {"A headless set", "postgres.data.svc.cluster.local", NDC_T_A, .expect = NDC_FP_HIT},
	    {"A endpoint hostname", "postgres-0.postgres.data.svc.cluster.local", NDC_T_A,
	     .expect = NDC_FP_HIT},
	    {"SRV with additional", "_pg._tcp.postgres.data.svc.cluster.local", NDC_T_SRV,
	     .expect = NDC_FP_HIT},
	    {"PTR v4", "1.0.96.10.in-addr.arpa", NDC_T_PTR, .expect = NDC_FP_HIT},
	    {"CNAME exact", "payments.shop.svc.cluster.local", NDC_T_CNAME, .expect = NDC_FP_HIT},
	    /* an ExternalName's CNAME answers any type: a hit, as the kernel counts it */
	    {"CNAME via other-type entry", "payments.shop.svc.cluster.local", NDC_T_A,
	     .expect = NDC_FP_HIT},
	    {"TXT dns-version", "dns-version.cluster.local", NDC_T_TXT, .expect = NDC_FP_HIT},
	    {"SOA apex", "cluster.local", NDC_T_SOA, .expect = NDC_FP_HIT},
	    {"NS apex", "cluster.local", NDC_T_NS, .expect = NDC_FP_HIT},
	    {"NODATA AAAA of v4-only", "cart.shop.svc.cluster.local", NDC_T_AAAA,
	     .expect = NDC_FP_NODATA},
	    {"ANY at a name with records", "kubernetes.default.svc.cluster.local", NDC_T_ANY,
	     .expect = NDC_FP_HIT},
	    {"NXDOMAIN search path", "api.example.com.default.svc.cluster.local", NDC_T_A,
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
	    {"EDNS client cookie ignored", "kubernetes.default.svc.cluster.local", NDC_T_A,
	     .edns = 1232, .opt_len = 12, .expect = NDC_FP_HIT},
	    {"EDNS NXDOMAIN", "x.cluster.local", NDC_T_A, .edns = 1232, .expect = NDC_FP_NXDOMAIN},
	    {"IPv6 A", "kubernetes.default.svc.cluster.local", NDC_T_A, .v6 = true,
	     .expect = NDC_FP_HIT},
	    {"IPv6 AAAA", "frontend.shop.svc.cluster.local", NDC_T_AAAA, .v6 = true,
	     .expect = NDC_FP_HIT},
	    {"IPv6 SRV odd length", "_pg._tcp.postgres.data.svc.cluster.local", NDC_T_SRV,
	     .v6 = true, .expect = NDC_FP_HIT},
	    {"IPv6 EDNS NXDOMAIN", "a.b.cluster.local", NDC_T_AAAA, .v6 = true, .edns = 1232,
	     .expect = NDC_FP_NXDOMAIN},
	    {"IPv6 NODATA", "cart.shop.svc.cluster.local", NDC_T_AAAA, .v6 = true,
	     .expect = NDC_FP_NODATA},
	    {"RD clear", "kubernetes.default.svc.cluster.local", NDC_T_A, .flags_xor = NDC_ROW_RD,
	     .expect = NDC_FP_HIT},
	    {"CD echoed", "kubernetes.default.svc.cluster.local", NDC_T_A, .flags_xor = 0x0010,
	     .expect = NDC_FP_HIT},
	    {"802.1Q tagged", "kubernetes.default.svc.cluster.local", NDC_T_A, .o.vlan = 7,
	     .expect = NDC_FP_HIT},
	    {"802.1Q tagged IPv6", "frontend.shop.svc.cluster.local", NDC_T_AAAA, .v6 = true,
	     .o.vlan = 7, .expect = NDC_FP_HIT},
	    {"Ethernet padding", "a.cluster.local", NDC_T_A, .o.l2_pad = 10,
	     .expect = NDC_FP_NXDOMAIN},
	    {"IPv4 DF is fine", "kubernetes.default.svc.cluster.local", NDC_T_A,
	     .o.frag_off = 0x4000, .expect = NDC_FP_HIT},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		check_row(&rows[i]);
}

/* ---------------------------------------------------------------------------------------------
 * Frames that go to the kernel, with the BPF program's reasons.
 */

static void test_passed(void **state)
{
	static const char *const k8s = "kubernetes.default.svc.cluster.local";
	static const struct ndc_row rows[] = {
	    {"other UDP port", k8s, NDC_T_A, .dport = 5353, .expect = NONE},
	    {"TCP to 53", k8s, NDC_T_A, .o.protocol = 6, .expect = NONE},
	    {"other destination", k8s, NDC_T_A, .wrong_dst = true, .expect = NONE},
	    {"ICMPv6 to us", k8s, NDC_T_A, .v6 = true, .o.protocol = 58, .expect = NONE},
	    {"TCP to 53 over IPv6", k8s, NDC_T_A, .v6 = true, .o.protocol = 6, .expect = NONE},
	    {"outside the zone", "example.org", NDC_T_A, .expect = NDC_FP_PASS_MISS},
	    {"under the pass suffix", "10-244-1-10.shop.pod.cluster.local", NDC_T_A,
	     .expect = NDC_FP_PASS_MISS},
	    {"unknown reverse name", "9.9.9.9.in-addr.arpa", NDC_T_PTR, .expect = NDC_FP_PASS_MISS},
	    {"zone lookalike", "notcluster.local", NDC_T_A, .expect = NDC_FP_PASS_MISS},
	    {"ANY at an empty non-terminal", "shop.svc.cluster.local", NDC_T_ANY,
	     .expect = NDC_FP_PASS_MISS},
	    {"IPv6 miss", "example.org", NDC_T_AAAA, .v6 = true, .expect = NDC_FP_PASS_MISS},
	    {"EDNS cookie and ECS", k8s, NDC_T_A, .edns = 1232, .opt_len = 20,
	     .expect = NDC_FP_PASS_EDNS},
	    {"DO bit", k8s, NDC_T_A, .edns = 1232, .edns_flags = 0x8000,
	     .expect = NDC_FP_PASS_EDNS},
	    {"EDNS version 1", k8s, NDC_T_A, .edns = 1232, .edns_version = 1,
	     .expect = NDC_FP_PASS_EDNS},
	    {"QR set", k8s, NDC_T_A, .mutate = ndc_pkt_mut_set_qr, .expect = NDC_FP_PASS_FORMAT},
	    {"QDCOUNT 2", k8s, NDC_T_A, .mutate = ndc_pkt_mut_qd2, .expect = NDC_FP_PASS_FORMAT},
	    {"ANCOUNT 1", k8s, NDC_T_A, .mutate = ndc_pkt_mut_an1, .expect = NDC_FP_PASS_FORMAT},
	    {"trailing byte", k8s, NDC_T_A, .mutate = ndc_pkt_mut_trailing,
	     .expect = NDC_FP_PASS_FORMAT},
	    {"header only", k8s, NDC_T_A, .mutate = ndc_pkt_mut_header_only,
	     .expect = NDC_FP_PASS_FORMAT},
	    {"QCLASS cut short", k8s, NDC_T_A, .mutate = ndc_pkt_mut_cut_qclass,
	     .expect = NDC_FP_PASS_FORMAT},
	    {"label of 64", k8s, NDC_T_A, .mutate = ndc_pkt_mut_label64,
	     .expect = NDC_FP_PASS_FORMAT},
	    {"pointer as name", k8s, NDC_T_A, .mutate = ndc_pkt_mut_pointer_name,
	     .expect = NDC_FP_PASS_FORMAT},
	    {"name over 128 bytes",
	     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa."
	     "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb.svc.cluster.local",
	     NDC_T_A, .expect = NDC_FP_PASS_FORMAT},
	    {"class CH", "version.bind", NDC_T_TXT, .qclass = 3, .expect = NDC_FP_PASS_FORMAT},
	    {"AXFR", "cluster.local", NDC_T_AXFR, .expect = NDC_FP_PASS_FORMAT},
	    {"qtype 0", k8s, 0, .expect = NDC_FP_PASS_FORMAT},
	    {"UDP length short of IP", k8s, NDC_T_A, .o.udp_len_delta = -1,
	     .expect = NDC_FP_PASS_FORMAT},
	    {"UDP length past IP", k8s, NDC_T_A, .o.udp_len_delta = 3,
	     .expect = NDC_FP_PASS_FORMAT},
	    {"IPv4 more fragments", k8s, NDC_T_A, .o.frag_off = 0x2000, .expect = NDC_FP_PASS_FRAG},
	    {"IPv4 later fragment", k8s, NDC_T_A, .o.frag_off = 0x0010, .expect = NDC_FP_PASS_FRAG},
	    {"IPv4 options", k8s, NDC_T_A, .o.ihl = 6, .expect = NDC_FP_PASS_FRAG},
	    {"IPv6 fragment header", k8s, NDC_T_A, .v6 = true, .o.ip6_nexthdr = 44,
	     .expect = NDC_FP_PASS_FRAG},
	    {"IPv6 destination options", k8s, NDC_T_A, .v6 = true, .o.ip6_nexthdr = 60,
	     .expect = NDC_FP_PASS_FRAG},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		check_row(&rows[i]);
}

/* Frames the answer function must leave alone: ARP, runts, a truncated IP header. */
static void test_not_ip(void **state)
{
	static const uint8_t arp[42] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0,
					2,    0x08, 0x06, 0,	1,    8,    0, 6, 4, 0, 1};
	uint8_t frame[NDC_PKT_MAX];
	struct rte_mbuf *m;

	(void)state;
	m = mbuf_of(arp, sizeof(arp), 0);
	assert_int_equal(ndc_dpdk_answer_mbuf(env.t, m, ndc_row_mono_ns()), NONE);
	assert_memory_equal(rte_pktmbuf_mtod(m, void *), arp, sizeof(arp));
	rte_pktmbuf_free(m);
	for (size_t len = 0; len < 14 + 20 + 8 + 12; len += 7) {
		uint8_t dns[NDC_PKT_MAX];
		size_t dlen, flen;
		const struct ndc_row r = {"runt", "kubernetes.default.svc.cluster.local", NDC_T_A,
					  .expect = NONE};

		ndc_row_query(&r, dns, &dlen);
		ndc_row_frame(&r, dns, dlen, frame, &flen);
		m = mbuf_of(frame, len, 0);
		int v = ndc_dpdk_answer_mbuf(env.t, m, ndc_row_mono_ns());
		assert_false(ndc_dpdk_answered(v));
		assert_memory_equal(rte_pktmbuf_mtod(m, void *), frame, len);
		rte_pktmbuf_free(m);
	}
}

/* ---------------------------------------------------------------------------------------------
 * Cached answers, markers, removals, room.
 */

static void test_cache_ttl(void **state)
{
	uint8_t lname[NDC_NAME_MAX];
	union ndc_row_answer a;
	uint64_t t0;
	size_t nlen;

	(void)state;
	assert_int_equal(ndc_name_from_text("example.com", lname, sizeof(lname), &nlen), 0);
	ndc_row_a_records(&a.a, lname, nlen, 3, 300);
	t0 = ndc_row_mono_ns();
	assert_int_equal(ndc_dpdk_table_publish(env.t, lname, nlen, NDC_T_A, &a.a, 300), 0);

	/* 7 s later every TTL is 7 lower, exactly as the socket path writes it */
	const struct ndc_row r = {"TTL countdown", "Example.COM", NDC_T_A, .expect = NDC_FP_HIT};
	check_row_at(&r, &a.a, 7, t0 + 7 * NS + NS / 2, 0);
	const struct ndc_row r6 = {
	    "TTL countdown IPv6 EDNS", "example.com", NDC_T_A, .v6 = true, .edns = 1232,
	    .expect = NDC_FP_HIT};
	check_row_at(&r6, &a.a, 7, t0 + 7 * NS + NS / 2, 0);
	/* expired: the socket path refreshes it */
	const struct ndc_row x = {"expired", "example.com", NDC_T_A, .expect = NDC_FP_PASS_EXPIRED};
	check_row_at(&x, NULL, 0, t0 + 301 * NS, 0);
	/* the sweep's removal only takes entries that have expired */
	struct ndc_fp_key k = {0};
	k.hash = ndc_fp_name_hash(lname, (uint32_t)nlen);
	k.qtype = NDC_T_A;
	k.name_len = (uint8_t)nlen;
	assert_int_equal(ndc_dpdk_table_unpublish_expired(env.t, &k), -EAGAIN);
	assert_int_equal(ndc_dpdk_table_unpublish(env.t, lname, nlen, NDC_T_A), 0);
	assert_int_equal(ndc_dpdk_table_unpublish(env.t, lname, nlen, NDC_T_A), -ENOENT);
	const struct ndc_row gone = {"unpublished", "example.com", NDC_T_A,
				     .expect = NDC_FP_PASS_MISS};
	check_row(&gone);
}

static void test_pass_marker_and_removal(void **state)
{
	static const char *const name = "cart.shop.svc.cluster.local";
	uint8_t lname[NDC_NAME_MAX];
	size_t nlen;

	(void)state;
	assert_int_equal(ndc_name_from_text(name, lname, sizeof(lname), &nlen), 0);
	/* A pass marker at the other-type entry: NODATA is no longer answered here */
	assert_int_equal(ndc_dpdk_table_publish_pass(env.t, lname, nlen), 0);
	const struct ndc_row r = {"pass marker", name, NDC_T_AAAA, .expect = NDC_FP_PASS_MISS};
	check_row(&r);
	const struct ndc_row a = {"exact entry beside a marker", name, NDC_T_A,
				  .expect = NDC_FP_HIT};
	check_row(&a);
	/* A name without entries, once synced, is NXDOMAIN: as after a Service is deleted */
	assert_int_equal(ndc_dpdk_table_unpublish(env.t, lname, nlen, NDC_T_A), 0);
	assert_int_equal(ndc_dpdk_table_unpublish(env.t, lname, nlen, NDC_FP_QTYPE_OTHER), 0);
	const struct ndc_row nx = {"deleted name", name, NDC_T_A, .expect = NDC_FP_NXDOMAIN};
	check_row(&nx);
	/* not synced: no NXDOMAIN synthesis */
	assert_int_equal(ndc_dpdk_table_set_synced(env.t, false), 0);
	const struct ndc_row ns = {"deleted name, not synced", name, NDC_T_A,
				   .expect = NDC_FP_PASS_MISS};
	check_row(&ns);
	assert_int_equal(ndc_dpdk_table_set_synced(env.t, true), 0);
	/* published again, as the publisher does for a name of a patch */
	assert_int_equal(ndc_records_foreach_name(env.rec, lname, nlen, publish_one, NULL), 0);
	check_row(&a);
	const struct ndc_row nd = {"NODATA again", name, NDC_T_AAAA, .expect = NDC_FP_NODATA};
	check_row(&nd);
}

/* Publishing errors are the fast path's. */
static void test_publish_errors(void **state)
{
	uint8_t lname[NDC_NAME_MAX] = {0};
	union ndc_row_answer a;

	(void)state;
	ndc_row_a_records(&a.a, (const uint8_t *)"\1x\0", 3, 1, 60);
	assert_int_equal(ndc_dpdk_table_publish(env.t, lname, 0, NDC_T_A, &a.a, 0), -EINVAL);
	assert_int_equal(
	    ndc_dpdk_table_publish(env.t, lname, NDC_FP_NAME_MAX + 1, NDC_T_A, &a.a, 0),
	    -ENAMETOOLONG);
	/* the answer's question length must be the name's: its pointers depend on it */
	assert_int_equal(
	    ndc_dpdk_table_publish(env.t, (const uint8_t *)"\2xy\0", 4, NDC_T_A, &a.a, 0), -EINVAL);
	ndc_row_a_records(&a.a, (const uint8_t *)"\1x\0", 3, NDC_FP_TTL_MAX + 1, 60);
	assert_int_equal(
	    ndc_dpdk_table_publish(env.t, (const uint8_t *)"\1x\0", 3, NDC_T_A, &a.a, 60), -E2BIG);
}

/* A reply that does not fit the mbuf: passed, the frame untouched. */
static void test_no_room(void **state)
{
	const struct ndc_row big = {"no room for the reply",
				    "_pg._tcp.postgres.data.svc.cluster.local", NDC_T_SRV,
				    .expect = NDC_FP_PASS_SIZE};
	const struct ndc_row fits = {"room enough", "_pg._tcp.postgres.data.svc.cluster.local",
				     NDC_T_SRV, .expect = NDC_FP_HIT};

	(void)state;
	check_row_at(&big, NULL, 0, ndc_row_mono_ns(), 1);
	check_row_at(&fits, NULL, 0, ndc_row_mono_ns(), 600);
}

/* ---------------------------------------------------------------------------------------------
 * Readers while a writer replaces what they read: every answer stays whole, and nothing read is
 * freed under a reader (ASan would catch it) because values go only after a grace period.
 */
static volatile bool writer_stop;

static void *writer(void *arg)
{
	uint8_t lname[NDC_NAME_MAX];
	union ndc_row_answer a[2];
	size_t nlen;
	unsigned int i = 0;

	(void)arg;
	assert_int_equal(ndc_name_from_text("churn.example.com", lname, sizeof(lname), &nlen), 0);
	ndc_row_a_records(&a[0].a, lname, nlen, 1, 100);
	ndc_row_a_records(&a[1].a, lname, nlen, 2, 200);
	while (!writer_stop) {
		ndc_dpdk_table_publish(env.t, lname, nlen, NDC_T_A, &a[i & 1].a, 3600);
		if ((i & 15) == 0)
			ndc_dpdk_table_unpublish(env.t, lname, nlen, NDC_T_A);
		i++;
	}
	return NULL;
}

static void test_rcu_readers(void **state)
{
	struct rte_rcu_qsbr *v = ndc_dpdk_table_qsbr(env.t);
	uint8_t dns[NDC_PKT_MAX], in[NDC_PKT_MAX];
	size_t dlen, inlen;
	unsigned int answered = 0, missed = 0;
	pthread_t th;
	uint64_t end;
	const struct ndc_row r = {"churn", "churn.example.com", NDC_T_A, .expect = NDC_FP_HIT};

	(void)state;
	ndc_row_query(&r, dns, &dlen);
	ndc_row_frame(&r, dns, dlen, in, &inlen);
	assert_int_equal(rte_rcu_qsbr_thread_register(v, 0), 0);
	rte_rcu_qsbr_thread_online(v, 0);
	writer_stop = false;
	assert_int_equal(pthread_create(&th, NULL, writer, NULL), 0);
	end = ndc_row_mono_ns() + NS;
	while (ndc_row_mono_ns() < end) {
		struct rte_mbuf *m = mbuf_of(in, inlen, 0);
		int verdict = ndc_dpdk_answer_mbuf(env.t, m, ndc_row_mono_ns());
		struct ndc_pkt_parsed p;

		if (ndc_dpdk_answered(verdict)) {
			assert_int_equal(verdict, NDC_FP_HIT);
			assert_int_equal(
			    ndc_pkt_parse(rte_pktmbuf_mtod(m, uint8_t *), m->data_len, &p), 0);
			/* one RR or two, never a mix: ANCOUNT and the data agree */
			uint16_t an = ndc_get16(p.payload + 6);
			size_t want = 12 + 19 + 4 + (size_t)an * 16;
			if ((an != 1 && an != 2) || p.plen != want)
				fail_msg("torn answer: ANCOUNT %u in %zu bytes", an, p.plen);
			answered++;
		} else {
			assert_int_equal(verdict, NDC_FP_PASS_MISS);
			missed++;
		}
		rte_pktmbuf_free(m);
		rte_rcu_qsbr_quiescent(v, 0);
	}
	writer_stop = true;
	/* the writer may wait for this reader's report: keep reporting until it is done */
	rte_rcu_qsbr_thread_offline(v, 0);
	pthread_join(th, NULL);
	rte_rcu_qsbr_thread_unregister(v, 0);
	print_message("churn: %u answered, %u missed\n", answered, missed);
	assert_true(answered > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_answers),
	    cmocka_unit_test(test_passed),
	    cmocka_unit_test(test_not_ip),
	    cmocka_unit_test(test_cache_ttl),
	    cmocka_unit_test(test_pass_marker_and_removal),
	    cmocka_unit_test(test_publish_errors),
	    cmocka_unit_test(test_no_room),
	    cmocka_unit_test(test_rcu_readers),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
