// SPDX-License-Identifier: MIT
/*
 * What the kernel shows of its queries (issue 37), through BPF_PROG_TEST_RUN on both entry points:
 * the per-client counts (map ndc_clients, ndc_fastpath_clients) equal to what each address sent,
 * answered, NXDOMAIN and passed apart, one row per address however many CPUs counted it; the
 * table's replacement (ABI 11: two slots per client, a new client takes an empty one, else the one
 * with fewer queries, and the takeover is counted), shown on addresses whose two slots are the
 * same; nothing counted with counting off; a full table (more addresses than slots) never failing
 * a query, the newest address always counted and every arrival either filling a slot or taking
 * one over; the sampled answers (ring ndc_samples, ndc_fastpath_samples_poll) at the configured
 * rate, each the reply byte for byte with its client, and none at rate 0. Runs pinned to one CPU
 * (BPF_PROG_TEST_RUN runs the program on the calling CPU; a second CPU for one check). Needs root
 * (exit 77 otherwise). NDC_TEST_OBJECT=FILE runs another build of the BPF object
 * (ndc_fastpath_opts object), e.g. one with a planted bug, to see the test fail.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <linux/bpf.h>
#include <linux/pkt_cls.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <ndc/abi.h>
#include <ndc/dns_wire.h>

#include "fastpath/fastpath.h"
#include "fastpath/fastpath_test.h"
#include "objects/objects.h"
#include "packets.h"
#include "records/records.h"

enum hook { TC = 0, XDP = 1 };

#define NAME_HIT "kubernetes.default.svc.cluster.local"
#define NAME_NX "nope.default.svc.cluster.local"
#define NAME_PASS "example.com" /* outside the zone: user space's */
#define SAMPLE_N 10000
#define SAMPLE_RATE 0.05 /* 500 expected: 20% is 4.6 standard deviations */

static struct {
	struct ndc_k8s_objects objs;
	struct ndc_records *rec;
	struct ndc_fp *fp;
	char pin_dir[64];
	int prog[2];
	int cpu, other_cpu; /* the CPU the tests run on; another one allowed, or -1 */
	union {
		struct ndc_answer a;
		uint8_t b[sizeof(struct ndc_answer) + NDC_FP_DATA_MAX];
	} nx;
} env;

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
	char err[256];

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
	snprintf(env.pin_dir, sizeof(env.pin_dir), "/sys/fs/bpf/ndc-test-obs-%d", (int)getpid());
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
	    .clients = true,
	    .object = object_from_env(&planted),
	};
	assert_int_equal(ndc_fastpath_open(&fo, &env.fp), 0);
	env.prog[TC] = ndc_fastpath_prog_fd(env.fp, NDC_FP_ATTACH_TC);
	env.prog[XDP] = ndc_fastpath_prog_fd(env.fp, NDC_FP_ATTACH_XDP);
	assert_true(env.prog[TC] >= 0 && env.prog[XDP] >= 0);
	assert_int_equal(ndc_records_foreach(env.rec, publish_one, NULL), 0);
	assert_int_equal(ndc_records_nxdomain(env.rec, &env.nx.a, NDC_FP_DATA_MAX), 0);
	assert_int_equal(ndc_fastpath_set_nx(env.fp, &env.nx.a), 0);
	assert_int_equal(ndc_fastpath_set_synced(env.fp, true), 0);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	ndc_fastpath_close(env.fp);
	ndc_records_free(env.rec);
	ndc_k8s_objects_free(&env.objs);
	free(planted.iov_base);
	return 0;
}

/* A client: IPv4 (the first 4 bytes of addr) or IPv6, and its port. */
struct client {
	bool v6;
	uint8_t addr[16];
	uint16_t port;
};

/*
 * One A query for name from c through hook h; true when answered (then the reply's DNS message
 * in dns, *dlen bytes, when dns is not NULL), false when passed. Any other verdict fails.
 */
static bool ask(enum hook h, const struct client *c, uint16_t id, const char *name, uint8_t *dns,
		size_t *dlen)
{
	uint8_t q[512], in[NDC_PKT_MAX], out[NDC_PKT_MAX];
	size_t qlen, inlen;
	struct ndc_pkt_query pq = {.id = id, .flags = 0x0100, .name = name, .qtype = NDC_T_A};
	struct ndc_pkt_addrs a = {.v6 = c->v6, .sport = c->port, .dport = 53};
	struct ndc_pkt_parsed p;

	memcpy(a.src_mac, ndc_pkt_client_mac, 6);
	memcpy(a.dst_mac, ndc_pkt_node_mac, 6);
	memcpy(a.saddr, c->addr, 16);
	memcpy(a.daddr, c->v6 ? ndc_pkt_node6 : ndc_pkt_node4, 16);
	assert_int_equal(ndc_pkt_dns_query(&pq, q, sizeof(q), &qlen), 0);
	assert_int_equal(ndc_pkt_build(&a, NULL, q, qlen, in, sizeof(in), &inlen), 0);
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = in, .data_size_in = (uint32_t)inlen,
		    .data_out = out, .data_size_out = sizeof(out), .repeat = 1);
	assert_int_equal(bpf_prog_test_run_opts(env.prog[h], &o), 0);
	if (o.retval == (h == TC ? (uint32_t)NDC_TC_PASS : XDP_PASS))
		return false;
	if (o.retval != (h == TC ? TC_ACT_REDIRECT : XDP_TX))
		fail_msg("%s query for %s: verdict %u", h == TC ? "tc" : "xdp", name, o.retval);
	assert_int_equal(ndc_pkt_parse(out, o.data_size_out, &p), 0);
	assert_memory_equal(p.daddr, c->addr, c->v6 ? 16 : 4);
	assert_int_equal(p.dport, c->port);
	if (dns) {
		assert_true(p.plen <= 512);
		memcpy(dns, p.payload, p.plen);
		*dlen = p.plen;
	}
	return true;
}

struct find {
	const struct client *c;
	struct ndc_fp_client got;
	int seen, total;
};

static int find_cb(const struct ndc_fp_client *fc, void *arg)
{
	struct find *f = arg;
	size_t n = f->c->v6 ? 16 : 4;

	f->total++;
	if (fc->addr.family == (f->c->v6 ? AF_INET6 : AF_INET) &&
	    memcmp(fc->addr.addr, f->c->addr, n) == 0) {
		f->got = *fc;
		f->seen++;
	}
	assert_int_equal(fc->queries, fc->answered + fc->passed);
	assert_true(fc->nxdomain <= fc->answered);
	return 0;
}

/* c's counts (zero when not in the table), and how many clients the table has. */
static struct ndc_fp_client counts_of(const struct client *c, int *ret_total)
{
	struct find f = {.c = c};

	assert_int_equal(ndc_fastpath_clients(env.fp, find_cb, &f), 0);
	assert_true(f.seen <= 1);
	if (ret_total)
		*ret_total = f.total;
	return f.got;
}

static const struct client c4 = {.v6 = false, .addr = {169, 254, 1, 2}, .port = 40001};
static const struct client c6 = {.v6 = true, .addr = {0xfe, 0x80, [15] = 0x02}, .port = 40002};

/* Sends hits, nx and passed queries from c through both hooks. */
static void send_mix(const struct client *c, int hits, int nx, int passed)
{
	for (int h = TC; h <= XDP; h++) {
		for (int i = 0; i < hits; i++)
			assert_true(ask(h, c, (uint16_t)i, NAME_HIT, NULL, NULL));
		for (int i = 0; i < nx; i++)
			assert_true(ask(h, c, (uint16_t)i, NAME_NX, NULL, NULL));
		for (int i = 0; i < passed; i++)
			assert_false(ask(h, c, (uint16_t)i, NAME_PASS, NULL, NULL));
	}
}

static void assert_counts(const char *what, const struct ndc_fp_client *got,
			  const struct ndc_fp_client *before, uint64_t ans, uint64_t nx,
			  uint64_t passed)
{
	if (got->answered - before->answered != ans || got->nxdomain - before->nxdomain != nx ||
	    got->passed - before->passed != passed ||
	    got->queries - before->queries != ans + passed)
		fail_msg("%s: counted queries %llu answered %llu nxdomain %llu passed %llu, want "
			 "%llu %llu %llu %llu",
			 what, (unsigned long long)(got->queries - before->queries),
			 (unsigned long long)(got->answered - before->answered),
			 (unsigned long long)(got->nxdomain - before->nxdomain),
			 (unsigned long long)(got->passed - before->passed),
			 (unsigned long long)(ans + passed), (unsigned long long)ans,
			 (unsigned long long)nx, (unsigned long long)passed);
}

/* On CPU cpu from now on (BPF_PROG_TEST_RUN runs the program where it is called). */
static void pin(int cpu)
{
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	assert_int_equal(sched_setaffinity(0, sizeof(one), &one), 0);
}

/* c's two slots in ndc_clients (abi.h NDC_FP_CLIENT_SLOT_A, _B of its key). */
static void slots_of(const struct client *c, uint32_t *ret_a, uint32_t *ret_b)
{
	uint8_t key[16] = {0};
	uint64_t w[2], h;

	if (c->v6) {
		memcpy(key, c->addr, 16);
	} else {
		key[10] = key[11] = 0xff;
		memcpy(key + 12, c->addr, 4);
	}
	memcpy(w, key, sizeof(w));
	h = NDC_FP_CLIENT_HASH(w[0], w[1]);
	*ret_a = NDC_FP_CLIENT_SLOT_A(h);
	*ret_b = NDC_FP_CLIENT_SLOT_B(h);
}

static uint64_t taken(void)
{
	uint64_t n;

	assert_int_equal(ndc_fastpath_clients_taken(env.fp, &n), 0);
	return n;
}

/* n answered queries from c, over both hooks by turns. */
static void send_hits(const struct client *c, int n)
{
	for (int i = 0; i < n; i++)
		assert_true(ask(i % 2 ? XDP : TC, c, (uint16_t)i, NAME_HIT, NULL, NULL));
}

static void expect_queries(const char *what, const struct client *c, uint64_t want)
{
	struct ndc_fp_client g = counts_of(c, NULL);

	if (g.queries != want || g.answered != want)
		fail_msg("%s: %llu queries (%llu answered), want %llu", what,
			 (unsigned long long)g.queries, (unsigned long long)g.answered,
			 (unsigned long long)want);
}

/* test_collide's three addresses, for test_cpus_apart */
static struct client trio[3];
static bool trio_found;

/*
 * Three addresses with the same two slots, on an empty table (the first test): X takes the first,
 * Y the second (empty); Z takes Y's (fewer queries than X's), Y's counts lost and the takeover
 * counted; Y back takes Z's; X, found in its slot, keeps counting.
 */
static void test_collide(void **state)
{
	struct client x = {.v6 = true, .addr = {0xfe, 0x80}, .port = 40010}, y = x, z = x;
	struct client *more[2] = {&y, &z};
	uint32_t xa, xb, a, b;
	uint64_t i = 1, t0;
	int found = 0;

	(void)state;
	assert_int_equal(ndc_fastpath_set_observe(env.fp, true, 0), 0);
	/* fe80::i: X the first whose slots differ, Y and Z the next two with the same slots */
	for (;; i++) {
		memcpy(x.addr + 8, &i, 8);
		slots_of(&x, &xa, &xb);
		if (xa != xb)
			break;
	}
	for (uint64_t j = i + 1; found < 2 && j < i + (1ULL << 30); j++) {
		memcpy(more[found]->addr + 8, &j, 8);
		slots_of(more[found], &a, &b);
		if (a == xa && b == xb)
			found++;
	}
	assert_int_equal(found, 2);
	printf("collide: three addresses in slots %u and %u\n", xa, xb);
	t0 = taken();
	send_hits(&x, 3);
	send_hits(&y, 2);
	expect_queries("X, then Y in", &x, 3);
	expect_queries("Y in the empty slot", &y, 2);
	assert_int_equal(taken() - t0, 0);
	send_hits(&z, 1);
	expect_queries("X, Z in", &x, 3);
	expect_queries("Y, taken over by Z", &y, 0);
	expect_queries("Z, in Y's slot", &z, 1);
	assert_int_equal(taken() - t0, 1);
	send_hits(&y, 1);
	expect_queries("Y back, in Z's slot", &y, 1);
	expect_queries("Z, taken over by Y", &z, 0);
	send_hits(&x, 1);
	expect_queries("X, counted on in its slot", &x, 4);
	assert_int_equal(taken() - t0, 2);
	trio[0] = x;
	trio[1] = y;
	trio[2] = z;
	trio_found = true;
}

/*
 * Each CPU has slots of its own (abi.h NDC_FP_CLIENT_INDEX: one array, CPU c's from c * 4,096),
 * after test_table_full: X and Y made to hold both of their slots on this CPU (X with more
 * queries than anyone there, so Y takes the other); Z, whose two slots are theirs, then asks on
 * another CPU, where those slots are empty: no takeover, X and Y keep their counts. Slots shared
 * between CPUs would give Z one of theirs.
 */
static void test_cpus_apart(void **state)
{
	struct ndc_fp_client gx, gy, gz;
	uint64_t t0;

	(void)state;
	if (env.other_cpu < 0 || !trio_found) {
		printf("CPUs apart: skipped (%s)\n",
		       env.other_cpu < 0 ? "one CPU allowed" : "test_collide did not run");
		skip();
	}
	assert_int_equal(ndc_fastpath_set_observe(env.fp, true, 0), 0);
	send_hits(&trio[0], 3);
	send_hits(&trio[1], 2);
	gx = counts_of(&trio[0], NULL);
	gy = counts_of(&trio[1], NULL);
	gz = counts_of(&trio[2], NULL);
	t0 = taken();
	pin(env.other_cpu);
	send_hits(&trio[2], 1);
	pin(env.cpu);
	if (taken() != t0)
		fail_msg("Z on another CPU took %llu slots over, want none (slots shared by CPUs?)",
			 (unsigned long long)(taken() - t0));
	expect_queries("X, Z counted on another CPU", &trio[0], gx.queries);
	expect_queries("Y, Z counted on another CPU", &trio[1], gy.queries);
	expect_queries("Z, counted on another CPU", &trio[2], gz.queries + 1);
}

/* Two addresses, each counted exactly as it sent: answered (NXDOMAIN among them) and passed. */
static void test_counts(void **state)
{
	struct ndc_fp_client b4, b6, g4, g6;
	struct client other = c4;

	(void)state;
	assert_int_equal(ndc_fastpath_set_observe(env.fp, true, 0), 0);
	b4 = counts_of(&c4, NULL);
	b6 = counts_of(&c6, NULL);
	send_mix(&c4, 5, 3, 2);
	send_mix(&c6, 4, 0, 1);
	g4 = counts_of(&c4, NULL);
	g6 = counts_of(&c6, NULL);
	/* both hooks: twice what send_mix was given */
	assert_counts("IPv4 client", &g4, &b4, 16, 6, 4);
	assert_counts("IPv6 client", &g6, &b6, 8, 0, 2);

	/* counted on two CPUs (its slots on each): one row, the sum (counts_of: seen at most once)
	 */
	if (env.other_cpu >= 0) {
		pin(env.other_cpu);
		send_mix(&c4, 1, 1, 1);
		pin(env.cpu);
		g6 = counts_of(&c4, NULL);
		assert_counts("IPv4 client, also on a second CPU", &g6, &b4, 20, 8, 6);
	} else {
		printf("counts on two CPUs: skipped (one CPU allowed)\n");
	}

	/* a query to another address is not ours: not counted */
	other.addr[3] = 99;
	{
		uint8_t q[512], in[NDC_PKT_MAX], out[NDC_PKT_MAX];
		size_t qlen, inlen;
		struct ndc_pkt_query pq = {.id = 1, .name = NAME_HIT, .qtype = NDC_T_A};
		struct ndc_pkt_addrs a = {.sport = 5353, .dport = 53};

		memcpy(a.saddr, other.addr, 4);
		memcpy(a.daddr, ndc_pkt_other4, 4);
		assert_int_equal(ndc_pkt_dns_query(&pq, q, sizeof(q), &qlen), 0);
		assert_int_equal(ndc_pkt_build(&a, NULL, q, qlen, in, sizeof(in), &inlen), 0);
		LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = in, .data_size_in = (uint32_t)inlen,
			    .data_out = out, .data_size_out = sizeof(out), .repeat = 1);
		assert_int_equal(bpf_prog_test_run_opts(env.prog[TC], &o), 0);
		assert_int_equal(o.retval, (uint32_t)NDC_TC_PASS);
	}
	g4 = counts_of(&other, NULL);
	assert_int_equal(g4.queries, 0);
}

/* Counting off: nothing counted, for a known client nor a new one; answers as ever. */
static void test_counts_off(void **state)
{
	struct client fresh = c4;
	struct ndc_fp_client b4, g;
	int before, after;

	(void)state;
	fresh.addr[3] = 77;
	assert_int_equal(ndc_fastpath_set_observe(env.fp, false, 0), 0);
	b4 = counts_of(&c4, &before);
	send_mix(&c4, 2, 1, 1);
	send_mix(&fresh, 2, 1, 1);
	g = counts_of(&c4, &after);
	assert_counts("IPv4 client, counting off", &g, &b4, 0, 0, 0);
	g = counts_of(&fresh, NULL);
	assert_int_equal(g.queries, 0);
	assert_int_equal(after, before);
	assert_int_equal(ndc_fastpath_set_observe(env.fp, true, 0), 0);
}

/*
 * More addresses than the table holds, each sending once, on one CPU after test_collide (X and Y
 * hold a slot each, nothing else counted yet): every query answered; the newest address counted
 * (a new client always gets a slot); each address in at most one slot of this CPU, so at most
 * NDC_FP_CLIENTS_MAX rows; and each arrival either filled an empty slot (a row more) or took
 * one over (counted): takeovers = arrivals - new rows, exactly.
 */
static void test_table_full(void **state)
{
	const int n = NDC_FP_CLIENTS_MAX + 1000;
	struct client c = {.v6 = false, .addr = {169, 254}, .port = 1000};
	struct ndc_fp_client g;
	int total0, total;
	uint64_t t0, t1;

	(void)state;
	assert_int_equal(ndc_fastpath_set_observe(env.fp, true, 0), 0);
	c.addr[2] = 100;
	c.addr[3] = 1;
	g = counts_of(&c, &total0);
	assert_int_equal(g.queries, 0);
	assert_int_equal(total0, 2);
	t0 = taken();
	for (int i = 0; i < n; i++) {
		c.addr[2] = (uint8_t)(100 + i / 250);
		c.addr[3] = (uint8_t)(1 + i % 250);
		if (!ask(i % 2 ? XDP : TC, &c, (uint16_t)i, NAME_HIT, NULL, NULL))
			fail_msg("query %d from a new client passed, want answered", i);
	}
	g = counts_of(&c, &total);
	t1 = taken();
	assert_int_equal(g.queries, 1);
	assert_int_equal(g.answered, 1);
	if (total > NDC_FP_CLIENTS_MAX)
		fail_msg("%d clients in a table of %d slots on one CPU", total, NDC_FP_CLIENTS_MAX);
	if (t1 - t0 != (uint64_t)(n - (total - total0)))
		fail_msg("%llu takeovers, want %d arrivals less %d new rows",
			 (unsigned long long)(t1 - t0), n, total - total0);
	printf("table full: %d queries from %d addresses answered, %d clients kept (max %d), "
	       "%llu takeovers\n",
	       n, n, total, NDC_FP_CLIENTS_MAX, (unsigned long long)(t1 - t0));
}

struct sent {
	uint8_t dns[512];
	size_t len;
	const struct client *c;
};

struct sampled {
	struct sent *sent;
	int n, bad;
};

static void sample_cb(const struct ndc_fp_sample *s, void *arg)
{
	struct sampled *sd = arg;
	uint16_t id;
	const struct sent *x;

	sd->n++;
	if (s->len < 12) {
		sd->bad++;
		return;
	}
	id = (uint16_t)(s->msg[0] << 8 | s->msg[1]);
	x = &sd->sent[id];
	if (id >= SAMPLE_N || !x->len || s->len != x->len || memcmp(s->msg, x->dns, x->len) != 0 ||
	    s->client_port != x->c->port || s->client.family != (x->c->v6 ? AF_INET6 : AF_INET) ||
	    memcmp(s->client.addr, x->c->addr, x->c->v6 ? 16 : 4) != 0 || !s->ktime_ns) {
		fprintf(stderr, "sample of id %u: len %u, want %zu; port %u\n", id, s->len, x->len,
			s->client_port);
		sd->bad++;
	}
}

/* rate: the sample of SAMPLE_N answers within 20% of it, each the reply sent to its client. */
static void test_samples(void **state)
{
	struct sampled sd = {.sent = calloc(SAMPLE_N, sizeof(struct sent))};
	double want = SAMPLE_N * SAMPLE_RATE;
	uint64_t lost0, lost1;
	int r;

	(void)state;
	assert_non_null(sd.sent);
	assert_int_equal(ndc_fastpath_samples_lost(env.fp, &lost0), 0);
	while (ndc_fastpath_samples_poll(env.fp, 0, sample_cb, &sd) > 0) /* none yet */
		;
	assert_int_equal(sd.n, 0);
	assert_int_equal(ndc_fastpath_set_observe(env.fp, true, SAMPLE_RATE), 0);
	for (int i = 0; i < SAMPLE_N; i++) {
		const struct client *c = i % 4 < 2 ? &c4 : &c6;
		/* every other an NXDOMAIN, over both hooks */
		const char *name = i % 2 ? NAME_NX : NAME_HIT;

		sd.sent[i].c = c;
		assert_true(ask(i % 4 == 1 || i % 4 == 2 ? XDP : TC, c, (uint16_t)i, name,
				sd.sent[i].dns, &sd.sent[i].len));
		if (i % 256 == 255)
			assert_true(ndc_fastpath_samples_poll(env.fp, 0, sample_cb, &sd) >= 0);
	}
	do
		r = ndc_fastpath_samples_poll(env.fp, 0, sample_cb, &sd);
	while (r > 0);
	assert_true(r >= 0);
	assert_int_equal(ndc_fastpath_samples_lost(env.fp, &lost1), 0);
	printf("samples: %d of %d answers at rate %.2f (want %.0f +- 20%%), %d bad, %llu lost\n",
	       sd.n, SAMPLE_N, SAMPLE_RATE, want, sd.bad, (unsigned long long)(lost1 - lost0));
	assert_int_equal(sd.bad, 0);
	assert_int_equal(lost1, lost0);
	if (sd.n < want * 0.8 || sd.n > want * 1.2)
		fail_msg("%d samples of %d answers, want %.0f +- 20%%", sd.n, SAMPLE_N, want);

	/* rate 0: none */
	assert_int_equal(ndc_fastpath_set_observe(env.fp, true, 0), 0);
	sd.n = 0;
	for (int i = 0; i < 2000; i++)
		assert_true(ask(i % 2 ? XDP : TC, &c4, (uint16_t)i, NAME_HIT, NULL, NULL));
	do
		r = ndc_fastpath_samples_poll(env.fp, 0, sample_cb, &sd);
	while (r > 0);
	assert_int_equal(sd.n, 0);
	free(sd.sent);
}

/* Bad rates are refused with -EINVAL and leave the config as it was. */
static void test_bad_rate(void **state)
{
	(void)state;
	assert_int_equal(ndc_fastpath_set_observe(env.fp, true, -0.1), -EINVAL);
	assert_int_equal(ndc_fastpath_set_observe(env.fp, true, 1.5), -EINVAL);
	assert_int_equal(ndc_fastpath_set_observe(env.fp, true, NAN), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    /* in this order: test_collide wants an empty table, test_table_full knows what it left
	     */
	    cmocka_unit_test(test_collide),    cmocka_unit_test(test_table_full),
	    cmocka_unit_test(test_cpus_apart), cmocka_unit_test(test_counts),
	    cmocka_unit_test(test_counts_off), cmocka_unit_test(test_samples),
	    cmocka_unit_test(test_bad_rate),
	};
	cpu_set_t one, all;
	int cpu = sched_getcpu();

	if (geteuid() != 0) {
		fprintf(stderr,
			"test_fastpath_observe: needs root to load BPF programs: skipped\n");
		return 77;
	}
	/* one CPU: the program runs where BPF_PROG_TEST_RUN is called */
	env.cpu = cpu < 0 ? 0 : cpu;
	env.other_cpu = -1;
	CPU_ZERO(&all);
	if (sched_getaffinity(0, sizeof(all), &all) == 0)
		for (int i = 0; i < CPU_SETSIZE && env.other_cpu < 0; i++)
			if (i != env.cpu && CPU_ISSET(i, &all))
				env.other_cpu = i;
	CPU_ZERO(&one);
	CPU_SET(cpu < 0 ? 0 : cpu, &one);
	if (sched_setaffinity(0, sizeof(one), &one) < 0) {
		perror("sched_setaffinity");
		return 1;
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}
