// SPDX-License-Identifier: MIT
/*
 * Differential fuzzer of the fast path (issue 21): both entry points (tc and XDP), through
 * BPF_PROG_TEST_RUN, get mutated and random queries built around the table's names
 * (fuzz_query.c); every reply either one makes is checked against the socket path's reply to the
 * same query bytes, decoded (fuzz_reply.c). Passing a packet to the stack is always allowed (user
 * space answers it): passes and answers are counted. Needs root (exit 77 otherwise).
 *
 * What is in the table comes the way the agent puts it there: a record table built from a
 * cluster (the embedded sample cluster, or --snapshot FILE), published by the publisher
 * (control/publisher.h) with the NXDOMAIN template, plus cached upstream answers that the cache's
 * hook publishes with their TTLs. The socket path is the real one: the socket server on
 * 127.0.0.1 running the resolver over the same record table and cache.
 *
 * With --dpdk the DPDK answer function (ndc_dpdk_answer, on a buffer: dpdk/fuzz_dpdk.c) gets
 * every frame too, from a DPDK table the same publishing fills: its verdict must be what the kernel
 * counted for each hook (the same counter, or none), a frame it passes must stay as it was, and a
 * reply must be the kernel's byte for byte. Both run the one answer core (bpf/ndc_answer.h): this
 * shows the two backends and contexts around it agree.
 *
 * Usage: test_fuzz_diff [--count N] [--seed S] [--first I] [--object FILE.bpf.o]
 *                       [--snapshot FILE] [--regions] [--dpdk] [--vectors] [--expect-mismatch]
 *                       [--replay HEX]
 *   --count N          cases (default 100000), each a frame run through tc and XDP
 *   --seed S           the run's seed (default: from the clock; always printed); case I of a run
 *                      is made from (S, I) alone: --seed S --first I --count 1 replays it
 *   --object FILE      another build of the BPF object (tests: the planted bug)
 *   --regions          rebuild the table once it is filled, so that it has its two regions
 *                      (include/ndc/abi.h), as a table that grew has; a table of the sample
 *                      cluster never grows and has one
 *   --dpdk             also the DPDK answer function (a build with DPDK), compared with the
 *                      kernel's replies and counters
 *   --vectors          first the vector set: each name of the table and the cache asked
 *                      plainly, for a few types, IPv4 and IPv6, with and without EDNS
 *   --expect-mismatch  succeed at the first mismatch, fail when none is found (the planted bug
 *                      must be caught)
 *   --replay HEX       one frame, as a mismatch report prints it
 * Exit: 0 when every reply agreed (or, with --expect-mismatch, one did not), 1 otherwise.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <linux/bpf.h>
#include <linux/pkt_cls.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <ndc/abi.h>
#include <ndc/dns_wire.h>
#include <ndc/log.h>

#include "fastpath/fastpath.h"
#include "fastpath/fastpath_test.h"
#include "fuzz_diff.h"
#include "objects/objects.h"
#include "publisher.h"
#include "query/query.h"
#include "records/records.h"
#include "socket/socket.h"

#define TTL_CACHED 3600 /* longer than any run: nothing expires while it runs */

enum { TC = 0, XDP = 1 };
/* The resolver answers the socket server's queries, as in the agent. */
static const struct ndc_query_io socket_io = {
    .is_tcp = ndc_socket_req_is_tcp,
    .peer = ndc_socket_req_peer,
    .detain = ndc_socket_detain,
    .complete = ndc_socket_complete,
};

static const char *const hook_name[] = {"tc", "xdp"};
static const uint32_t verdict_pass[] = {(uint32_t)NDC_TC_PASS, XDP_PASS};
static const uint32_t verdict_reply[] = {TC_ACT_REDIRECT, XDP_TX};

static struct {
	struct ndc_k8s_objects objs;
	struct ndc_records *rec;
	struct ndc_fp *fp;
	struct ndc_publisher *pub;
	struct ndc_cache *cache;
	struct ndc_resolver *res;
	struct ndc_socket *srv;
	int client;
	int prog[2];
	char pin_dir[64];
	struct iovec obj;
	struct fz_corpus corpus;
} env = {.client = -1};

static struct {
	uint64_t cases, answered[2], passed[2], asked, compared, identical, mismatches, vectors;
	uint64_t dpdk_answered, dpdk_passed, dpdk_same, dpdk_shifted;
} st;

static struct {
	uint64_t count, seed, first;
	const char *object, *snapshot, *replay;
	bool expect_mismatch, regions, dpdk, vectors;
} opt = {.count = 100000};

static const char *const counter_name[NDC_FP_COUNTER_MAX + 1] = {
    "hit",	 "nodata",    "nxdomain",    "pass miss", "pass expired",
    "pass edns", "pass size", "pass format", "pass frag", "pass config",
    "fwd udp",	 "fwd tcp",   "fwd reply",   "pass busy", "not counted"};

/* ---------------------------------------------------------------------------------------------
 * Setup: the table as the agent fills it, the socket path beside it.
 */
static char *read_file(const char *path, size_t *ret_len)
{
	struct stat sb;
	char *buf = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &sb) || !(buf = malloc((size_t)sb.st_size + 1)) ||
	    read(fd, buf, (size_t)sb.st_size) != sb.st_size) {
		fprintf(stderr, "fuzz_diff: cannot read %s: %s\n", path, strerror(errno));
		free(buf);
		buf = NULL;
	} else {
		buf[sb.st_size] = 0;
		*ret_len = (size_t)sb.st_size;
	}
	if (fd >= 0)
		close(fd);
	return buf;
}

static int add_table_name(void *arg, const uint8_t *lname, size_t nlen, uint16_t qtype,
			  const struct ndc_answer *a)
{
	(void)arg;
	(void)a;
	return fz_names_add(&env.corpus.table, lname, nlen, qtype);
}

/* RDATA helpers for the cached answers. */
static size_t rd_name(uint8_t *out, const char *text)
{
	size_t len = 0;

	return ndc_name_from_text(text, out, NDC_NAME_MAX, &len) ? 0 : len;
}

static size_t rd_soa(uint8_t *out, const char *zone)
{
	char t[128];
	size_t n;

	snprintf(t, sizeof(t), "ns.%s", zone);
	n = rd_name(out, t);
	snprintf(t, sizeof(t), "hostmaster.%s", zone);
	n += rd_name(out + n, t);
	/* serial, refresh, retry, expire, minimum */
	static const uint8_t nums[20] = {0, 0,	0, 1, 0,  0,   14, 16, 0, 0,
					 2, 88, 0, 1, 81, 128, 0,  0,  3, 132};
	memcpy(out + n, nums, sizeof(nums));
	return n + sizeof(nums);
}

struct crr {
	enum ndc_section sec;
	const char *owner;
	uint16_t type;
	uint32_t ttl;
	const char *text; /* a name (CNAME, PTR, MX after its preference), a zone (SOA), an
			     address (A, AAAA), or TXT strings of this many bytes ("200x3") */
};

/* One upstream answer into the cache, which publishes it through the publisher's hook. */
static int cache_answer(const char *qname, uint16_t qtype, uint8_t rcode, const struct crr *rrs,
			size_t n)
{
	union {
		struct ndc_answer a;
		uint8_t b[sizeof(struct ndc_answer) + NDC_ANSWER_DATA_MAX];
	} ans;
	uint8_t lname[NDC_NAME_MAX], owner[NDC_NAME_MAX], rd[1024];
	size_t nlen, olen, rdlen;
	struct ndc_ab ab;

	if (ndc_name_from_text(qname, lname, sizeof(lname), &nlen))
		return -EINVAL;
	ndc_ab_init(&ab, &ans.a, NDC_ANSWER_DATA_MAX, lname, nlen);
	for (size_t i = 0; i < n; i++) {
		const struct crr *c = &rrs[i];
		unsigned len, k;

		if (ndc_name_from_text(c->owner, owner, sizeof(owner), &olen))
			return -EINVAL;
		switch (c->type) {
		case NDC_T_A:
			rdlen = inet_pton(AF_INET, c->text, rd) == 1 ? 4 : 0;
			break;
		case NDC_T_AAAA:
			rdlen = inet_pton(AF_INET6, c->text, rd) == 1 ? 16 : 0;
			break;
		case NDC_T_SOA:
			rdlen = rd_soa(rd, c->text);
			break;
		case NDC_T_MX:
			rd[0] = 0;
			rd[1] = 10;
			rdlen = 2 + rd_name(rd + 2, c->text);
			break;
		case NDC_T_TXT:
			rdlen = 0;
			if (sscanf(c->text, "%ux%u", &len, &k) != 2 || len > 255 ||
			    (len + 1) * k > 1024)
				return -EINVAL;
			for (unsigned j = 0; j < k; j++) {
				rd[rdlen] = (uint8_t)len;
				memset(rd + rdlen + 1, 'a' + (int)j, len);
				rdlen += len + 1;
			}
			break;
		default:
			rdlen = rd_name(rd, c->text);
			break;
		}
		ndc_ab_rr(&ab, c->sec, owner, olen, c->type, NDC_C_IN, c->ttl, rd, rdlen);
	}
	if (ndc_ab_finish(&ab, rcode, false))
		return -EINVAL;
	if (fz_names_add(&env.corpus.cached, lname, nlen, qtype))
		return -ENOMEM;
	return ndc_cache_put(env.cache, lname, nlen, qtype, NDC_C_IN, &ans.a, ans.a.min_ttl,
			     ndc_now_ms());
}

/* --regions: the table rebuilt, with both regions (include/ndc/abi.h), which it must show. */
static int split_table(void)
{
	struct ndc_fastpath_table_stats ts;
	int r = ndc_fastpath_table_rebuild(env.fp);

	if (!r)
		r = ndc_fastpath_table_stats(env.fp, &ts);
	if (r) {
		fprintf(stderr, "fuzz_diff: cannot rebuild the table: %s\n", strerror(-r));
		return r;
	}
	printf("fuzz_diff: table rebuilt: %" PRIu64 " of %" PRIu64 " entries rare, %" PRIu64
	       " of %" PRIu64 " slots common\n",
	       ts.rare_keys, ts.keys, ts.common_slots, ts.slots);
	if (ts.rare_keys == 0 || ts.rare_keys == ts.keys || ts.common_slots >= ts.slots) {
		fprintf(stderr, "fuzz_diff: the table has one region after its rebuild\n");
		return -EINVAL;
	}
	return 0;
}

static int fill_cache(void)
{
	const uint32_t t = TTL_CACHED;
	const struct crr www4[] = {{NDC_SEC_ANSWER, "www.example.com", NDC_T_A, t, "192.0.2.10"}};
	const struct crr www6[] = {
	    {NDC_SEC_ANSWER, "www.example.com", NDC_T_AAAA, t, "2001:db8::10"}};
	const struct crr chain[] = {
	    {NDC_SEC_ANSWER, "api.example.org", NDC_T_CNAME, t - 600, "edge.example.net"},
	    {NDC_SEC_ANSWER, "edge.example.net", NDC_T_A, t, "192.0.2.20"},
	    {NDC_SEC_ANSWER, "edge.example.net", NDC_T_A, t, "192.0.2.21"}};
	const struct crr nx[] = {{NDC_SEC_AUTHORITY, "example.net", NDC_T_SOA, t, "example.net"}};
	const struct crr nodata[] = {
	    {NDC_SEC_AUTHORITY, "example.com", NDC_T_SOA, t - 100, "example.com"}};
	const struct crr txt[] = {{NDC_SEC_ANSWER, "txt.example.com", NDC_T_TXT, t, "100x3"}};
	const struct crr huge[] = {{NDC_SEC_ANSWER, "huge.example.com", NDC_T_TXT, t, "200x4"}};
	const struct crr mx[] = {
	    {NDC_SEC_ANSWER, "example.com", NDC_T_MX, t, "mail.example.com"},
	    {NDC_SEC_ADDITIONAL, "mail.example.com", NDC_T_A, t, "192.0.2.25"}};
	const struct crr ptr[] = {
	    {NDC_SEC_ANSWER, "10.2.0.192.in-addr.arpa", NDC_T_PTR, t, "www.example.com"}};
	int err = 0;

	err = err ?: cache_answer("www.example.com", NDC_T_A, 0, www4, 1);
	err = err ?: cache_answer("www.example.com", NDC_T_AAAA, 0, www6, 1);
	err = err ?: cache_answer("api.example.org", NDC_T_A, 0, chain, 3);
	err = err ?: cache_answer("nx.example.net", NDC_T_A, NDC_RCODE_NXDOMAIN, nx, 1);
	err = err ?: cache_answer("nodata.example.com", NDC_T_AAAA, 0, nodata, 1);
	err = err ?: cache_answer("txt.example.com", NDC_T_TXT, 0, txt, 1);
	err = err ?: cache_answer("huge.example.com", NDC_T_TXT, 0, huge, 1);
	err = err ?: cache_answer("example.com", NDC_T_MX, 0, mx, 2);
	err = err ?: cache_answer("10.2.0.192.in-addr.arpa", NDC_T_PTR, 0, ptr, 1);
	if (err)
		return err;
	/*
	 * A pod's TYPE0 (or meta type) question whose NODATA an upstream gave: refused by the
	 * cache, so never published where it would be the name's "any other type" entry (issue 38).
	 * The names go on being asked with these and random types, after their cached answers.
	 */
	static const uint16_t reserved[] = {0, NDC_T_OPT, 128, 250, 254};
	for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++) {
		err = cache_answer("www.example.com", reserved[i], 0, nodata, 1);
		if (err != -EINVAL) {
			fprintf(stderr, "fuzz_diff: the cache took a NODATA of type %u: %d\n",
				reserved[i], err);
			return -EPROTO;
		}
	}
	return 0;
}

/* --dpdk: the cache's answers go into both tables, each through its publisher */
static void cache_hook_both(void *arg, const struct ndc_answer *a, const uint8_t *lname,
			    size_t nlen, uint16_t qtype, uint16_t qclass, uint32_t ttl)
{
	ndc_publisher_cache_hook(arg, a, lname, nlen, qtype, qclass, ttl);
	fz_dpdk_cache_hook(a, lname, nlen, qtype, qclass, ttl);
}

static int setup(void)
{
	struct ndc_ip addrs[2] = {{.family = AF_INET}, {.family = AF_INET6}};
	struct ndc_ip lo = {.family = AF_INET, .addr = {127, 0, 0, 1}};
	struct ndc_socket_opts so = {.n_addrs = 1, .addrs = &lo, .workers = 1};
	struct ndc_cache_opts co = {.max_entries = 1000,
				    .max_bytes = 1 << 20,
				    .max_ttl = 86400,
				    .neg_max_ttl = 86400,
				    .stale_max = 86400};
	struct ndc_records_opts ro = {.zone = "cluster.local",
				      .ttl = 5,
				      .pods = NDC_PODS_INSECURE,
				      .n_ns_addrs = 2,
				      .ns_addrs = addrs,
				      .serial = 1};
	uint8_t pass[NDC_NAME_MAX];
	struct sockaddr_in sin = {.sin_family = AF_INET};
	size_t plen, len = 0;
	char err[256], *buf = NULL;
	int r;

	memcpy(addrs[0].addr, fz_node4, 4);
	memcpy(addrs[1].addr, fz_node6, 16);
	if (opt.snapshot && !(buf = read_file(opt.snapshot, &len)))
		return -EIO;
	r = ndc_snapshot_parse(buf ? buf : ndc_sample_cluster, buf ? len : ndc_sample_cluster_len,
			       &env.objs, err, sizeof(err));
	free(buf);
	if (r) {
		fprintf(stderr, "fuzz_diff: the cluster does not parse: %s\n", err);
		return r;
	}
	r = ndc_records_build(&env.objs, &ro, &env.rec);
	if (!r)
		r = ndc_records_foreach(env.rec, add_table_name, NULL);
	if (!r)
		r = ndc_name_from_text("cluster.local", env.corpus.zone, NDC_NAME_MAX,
				       &env.corpus.zone_len);
	if (!r)
		r = ndc_name_from_text("pod.cluster.local", pass, sizeof(pass), &plen);
	if (r)
		return r;

	snprintf(env.pin_dir, sizeof(env.pin_dir), "/sys/fs/bpf/ndc-fuzz-%d", (int)getpid());
	/*
	 * A table of the smallest size for a small cluster: dense enough that entries have
	 * neighbours (a read from the wrong slot then shows), with room for every entry.
	 */
	struct ndc_fastpath_opts fo = {
	    .attach = NDC_FP_ATTACH_NONE,
	    .n_addrs = 2,
	    .addrs = addrs,
	    .port = FZ_PORT,
	    .zone = env.corpus.zone,
	    .zone_len = env.corpus.zone_len,
	    .pass = pass,
	    .pass_len = plen,
	    .max_entries =
		env.corpus.table.n * 2 + 64 > 1024 ? (uint32_t)env.corpus.table.n * 2 + 64 : 1024,
	    .pin_dir = env.pin_dir,
	    .object = opt.object ? &env.obj : NULL,
	};
	if (opt.object) {
		env.obj.iov_base = read_file(opt.object, &env.obj.iov_len);
		if (!env.obj.iov_base)
			return -EIO;
	}
	r = ndc_fastpath_open(&fo, &env.fp);
	if (r) {
		fprintf(stderr, "fuzz_diff: cannot load the fast path: %s\n", strerror(-r));
		return r;
	}
	env.prog[TC] = ndc_fastpath_prog_fd(env.fp, NDC_FP_ATTACH_TC);
	env.prog[XDP] = ndc_fastpath_prog_fd(env.fp, NDC_FP_ATTACH_XDP);
	r = ndc_publisher_new(&ndc_fastpath_answer_table, env.fp, &env.pub);
	if (!r)
		r = ndc_publisher_load_records(env.pub, env.rec);
	if (!r && opt.dpdk && (r = fz_dpdk_open(&fo, env.rec)))
		fprintf(stderr, "fuzz_diff: no DPDK table: %s\n", strerror(-r));
	if (!r)
		r = ndc_cache_new(&co, &env.cache);
	if (r)
		return r;
	ndc_cache_set_hook(env.cache, opt.dpdk ? cache_hook_both : ndc_publisher_cache_hook,
			   env.pub);
	r = fill_cache();
	/* the hook queues its publishes: all of them in the table before any comparison */
	ndc_publisher_flush(env.pub);
	if (opt.dpdk)
		fz_dpdk_flush();
	if (!r && opt.regions)
		r = split_table();
	if (!r)
		r = ndc_resolver_new(env.rec, env.cache, NULL, &socket_io, &env.res);
	if (!r)
		r = ndc_socket_start(&so, ndc_resolver_handle, env.res, &env.srv);
	if (r)
		return r;
	env.client = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = htons(ndc_socket_port(env.srv));
	if (env.client < 0 || connect(env.client, (struct sockaddr *)&sin, sizeof(sin)))
		return -errno;
	return 0;
}

static void teardown(void)
{
	if (env.client >= 0)
		close(env.client);
	ndc_socket_stop(env.srv);
	ndc_resolver_free(env.res);
	/* the cache's drops reach the table through the publisher: it goes after the cache */
	ndc_cache_free(env.cache);
	if (opt.dpdk)
		fz_dpdk_close();
	ndc_publisher_free(env.pub);
	ndc_fastpath_close(env.fp);
	ndc_records_free(env.rec);
	ndc_k8s_objects_free(&env.objs);
	free(env.obj.iov_base);
	fz_names_free(&env.corpus.table);
	fz_names_free(&env.corpus.cached);
}

/* ---------------------------------------------------------------------------------------------
 * One case.
 */
static int run(int h, const uint8_t *in, size_t inlen, uint8_t *out, size_t *outlen,
	       uint32_t *ret_verdict)
{
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = in, .data_size_in = (uint32_t)inlen,
		    .data_out = out, .data_size_out = NDC_PKT_MAX, .repeat = 1);
	int err = bpf_prog_test_run_opts(env.prog[h], &o);

	if (err)
		return err;
	*outlen = o.data_size_out;
	*ret_verdict = o.retval;
	return 0;
}

/* The socket path's reply to these query bytes: its length, or -ETIMEDOUT when it sent none. */
static ssize_t ask_socket(const uint8_t *q, size_t qlen, uint8_t *out, size_t cap)
{
	struct pollfd p = {.fd = env.client, .events = POLLIN};
	uint8_t junk[NDC_PKT_MAX];
	ssize_t n;

	/* a reply that came after an earlier wait gave up is not this one's */
	while (recv(env.client, junk, sizeof(junk), MSG_DONTWAIT) >= 0)
		;
	if (send(env.client, q, qlen, 0) != (ssize_t)qlen)
		return -errno;
	/* a second: the socket path drops nothing the fast path answers, so it never waits */
	if (poll(&p, 1, 1000) != 1)
		return -ETIMEDOUT;
	n = recv(env.client, out, cap, 0);
	return n < 0 ? -errno : n;
}

static void hex(const char *label, const uint8_t *p, size_t n)
{
	printf("  %s (%zu bytes): ", label, n);
	for (size_t i = 0; i < n; i++)
		printf("%02x", p[i]);
	printf("\n");
}

static bool is_cached(const uint8_t *dns, size_t len)
{
	struct ndc_query q;

	if (ndc_dns_parse_query(dns, len, &q))
		return false;
	for (size_t i = 0; i < env.corpus.cached.n; i++) {
		const struct fz_name *c = &env.corpus.cached.v[i];

		if (c->len == q.qname_len && !memcmp(c->name, q.lname, c->len))
			return true;
	}
	return false;
}

/* What the reply frame must be whatever it answers: the query's addresses and ports swapped. */
static const char *check_frame(const uint8_t *in, size_t inlen, const uint8_t *out, size_t outlen,
			       struct ndc_pkt_parsed *rp)
{
	struct ndc_pkt_parsed qp;

	if (ndc_pkt_parse(in, inlen, &qp) || ndc_pkt_parse(out, outlen, rp))
		return "the reply frame does not parse (lengths or headers)";
	if (memcmp(rp->dst_mac, qp.src_mac, 6) || memcmp(rp->src_mac, qp.dst_mac, 6))
		return "MAC addresses not swapped";
	if (rp->v6 != qp.v6 || memcmp(rp->saddr, qp.daddr, 16) || memcmp(rp->daddr, qp.saddr, 16))
		return "IP addresses not swapped";
	if (rp->sport != qp.dport || rp->dport != qp.sport)
		return "ports not swapped";
	if (!rp->ip_csum_ok || !rp->udp_csum_ok)
		return "checksum wrong";
	if (rp->l2_pad)
		return "reply frame longer than its datagram";
	return NULL;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The one counter that went up from c0 to c1; NDC_FP_COUNTER_MAX: none; -1: several. */
static int counted(const uint64_t *c0, const uint64_t *c1)
{
	int k = NDC_FP_COUNTER_MAX;

	for (int i = 0; i < NDC_FP_COUNTER_MAX; i++) {
		if (c1[i] == c0[i])
			continue;
		if (k != NDC_FP_COUNTER_MAX || c1[i] != c0[i] + 1)
			return -1;
		k = i;
	}
	return k;
}

/* What DPDK made of the frame (fz_dpdk_answer at now_ns). */
struct dpdk_run {
	int verdict;
	uint64_t now_ns;
	uint8_t out[NDC_PKT_MAX];
	size_t outlen;
};

/*
 * Whether DPDK's run d agrees with the kernel's hook h, which counted k and returned verdict with
 * the frame out: NULL, or what differs. A cached answer's TTLs count down by whole seconds since
 * it was published, into each table at a slightly different time: a reply that differs is made
 * again a second either side, which must then be the kernel's.
 */
static const char *dpdk_differs(int h, const struct fz_case *c, int k, uint32_t verdict,
				const uint8_t *out, size_t outlen, struct dpdk_run *d, bool cached,
				char *buf, size_t cap)
{
	if (k < 0)
		return "the kernel counted more than one thing";
	if (d->verdict != k) {
		snprintf(buf, cap, "DPDK: %s, the kernel (%s): %s",
			 d->verdict >= 0 && d->verdict <= NDC_FP_COUNTER_MAX
			     ? counter_name[d->verdict]
			     : "an error",
			 hook_name[h], counter_name[k]);
		return buf;
	}
	if (verdict != verdict_reply[h]) {
		st.dpdk_passed++;
		if (fz_dpdk_answered(d->verdict))
			return "DPDK answered a frame the kernel passed";
		if (d->outlen != c->flen || memcmp(d->out, c->frame, c->flen))
			return "DPDK changed a frame it passed";
		return NULL;
	}
	st.dpdk_answered++;
	if (d->outlen == outlen && !memcmp(d->out, out, outlen)) {
		st.dpdk_same++;
		return NULL;
	}
	for (int s = -1; cached && s <= 1; s += 2) {
		struct dpdk_run again = {.now_ns = d->now_ns + (uint64_t)(s * 1000000000ll)};

		again.verdict =
		    fz_dpdk_answer(c->frame, c->flen, again.now_ns, again.out, &again.outlen);
		if (again.verdict == d->verdict && again.outlen == outlen &&
		    !memcmp(again.out, out, outlen)) {
			st.dpdk_shifted++;
			return NULL;
		}
	}
	return "DPDK's reply is not the kernel's";
}

/* Runs one frame through both hooks (and DPDK); returns the mismatches found (reported here). */
static int check_case(uint64_t index, const struct fz_case *c)
{
	uint8_t out[NDC_PKT_MAX], sock[NDC_PKT_MAX];
	uint64_t c0[NDC_FP_COUNTER_MAX], c1[NDC_FP_COUNTER_MAX];
	const uint8_t *dns = NULL;
	size_t dlen = 0, outlen = 0;
	ssize_t slen = 0;
	bool deliverable = fz_frame_payload(c->frame, c->flen, &dns, &dlen), asked = false;
	struct dpdk_run d = {.now_ns = mono_ns()};
	int bad = 0;

	st.cases++;
	if (opt.dpdk)
		d.verdict = fz_dpdk_answer(c->frame, c->flen, d.now_ns, d.out, &d.outlen);
	for (int h = TC; h <= XDP; h++) {
		struct ndc_pkt_parsed rp;
		const char *why = NULL;
		char buf[1024];
		uint32_t verdict = 0;
		int k = NDC_FP_COUNTER_MAX, err;

		if (opt.dpdk && ndc_fastpath_counters(env.fp, c0))
			k = -1;
		err = run(h, c->frame, c->flen, out, &outlen, &verdict);
		if (opt.dpdk && k >= 0)
			k = ndc_fastpath_counters(env.fp, c1) ? -1 : counted(c0, c1);

		if (err) {
			snprintf(buf, sizeof(buf), "BPF_PROG_TEST_RUN failed: %s", strerror(-err));
			why = buf;
		} else if (verdict == verdict_pass[h]) {
			st.passed[h]++;
			if (outlen != c->flen || memcmp(out, c->frame, outlen))
				why = "a passed frame was changed";
		} else if (verdict != verdict_reply[h]) {
			snprintf(buf, sizeof(buf), "verdict %u, neither a pass nor a reply",
				 verdict);
			why = buf;
		} else if (st.answered[h]++, !deliverable) {
			why = "answered a frame the stack would not give the DNS socket";
		} else if (!(why = check_frame(c->frame, c->flen, out, outlen, &rp))) {
			if (!asked) {
				slen = ask_socket(dns, dlen, sock, sizeof(sock));
				asked = true;
				st.asked++;
			}
			if (slen < 0) {
				why = "the socket path sent no reply to a query the fast path "
				      "answered";
			} else if (fz_compare(dns, dlen, rp.payload, rp.plen, sock, (size_t)slen,
					      is_cached(dns, dlen), buf, sizeof(buf))) {
				why = buf;
			} else {
				st.compared++;
				st.identical +=
				    rp.plen == (size_t)slen && !memcmp(rp.payload, sock, rp.plen);
			}
		}
		if (!why && !err && opt.dpdk)
			why = dpdk_differs(h, c, k, verdict, out, outlen, &d, is_cached(dns, dlen),
					   buf, sizeof(buf));
		if (!why)
			continue;
		bad++;
		if (++st.mismatches > 10 && !opt.expect_mismatch)
			continue;
		printf("MISMATCH: case %" PRIu64 " (--seed %" PRIu64 " --first %" PRIu64
		       " --count 1), %s: %s\n",
		       index, opt.seed, index, hook_name[h], why);
		printf("  case: %s\n", c->what[0] ? c->what : "replayed frame");
		hex("query frame, for --replay", c->frame, c->flen);
		if (!err && verdict == verdict_reply[h])
			hex("fast path reply frame", out, outlen);
		if (asked && slen >= 0)
			hex("socket path reply (DNS)", sock, (size_t)slen);
		if (opt.dpdk && fz_dpdk_answered(d.verdict))
			hex("DPDK reply frame", d.out, d.outlen);
	}
	return bad;
}

/* ---------------------------------------------------------------------------------------------
 * The run.
 */
static int parse_hex(const char *s, struct fz_case *c)
{
	size_t n = strlen(s);

	if (n % 2 || n / 2 > sizeof(c->frame))
		return -EINVAL;
	for (size_t i = 0; i < n / 2; i++) {
		unsigned v;

		if (sscanf(s + 2 * i, "%2x", &v) != 1)
			return -EINVAL;
		c->frame[i] = (uint8_t)v;
	}
	c->flen = n / 2;
	c->what[0] = 0;
	return 0;
}

static int usage(void)
{
	fprintf(stderr, "usage: test_fuzz_diff [--count N] [--seed S] [--first I] [--object FILE] "
			"[--snapshot FILE] [--regions] [--dpdk] [--vectors] [--expect-mismatch] "
			"[--replay HEX]\n");
	return 2;
}

static int parse_args(int argc, char **argv)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	opt.seed = (uint64_t)ts.tv_sec * 1000003u ^ (uint64_t)ts.tv_nsec ^ (uint64_t)getpid();
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		char *end = NULL;

		if (!strcmp(a, "--expect-mismatch")) {
			opt.expect_mismatch = true;
			continue;
		}
		if (!strcmp(a, "--regions")) {
			opt.regions = true;
			continue;
		}
		if (!strcmp(a, "--dpdk") || !strcmp(a, "--vectors")) {
			*(a[2] == 'd' ? &opt.dpdk : &opt.vectors) = true;
			continue;
		}
		if (!v)
			return usage();
		i++;
		if (!strcmp(a, "--count") || !strcmp(a, "--seed") || !strcmp(a, "--first")) {
			uint64_t n = strtoull(v, &end, 0);

			if (!*v || *end)
				return usage();
			*(a[2] == 'c' ? &opt.count : a[2] == 's' ? &opt.seed : &opt.first) = n;
		} else if (!strcmp(a, "--object")) {
			opt.object = v;
		} else if (!strcmp(a, "--snapshot")) {
			opt.snapshot = v;
		} else if (!strcmp(a, "--replay")) {
			opt.replay = v;
		} else {
			return usage();
		}
	}
	return 0;
}

static void summary(double secs)
{
	uint64_t c[NDC_FP_COUNTER_MAX], fuzzed = st.cases - st.vectors;

	printf("fuzz_diff: seed %" PRIu64 ", cases %" PRIu64 "..%" PRIu64 ": %" PRIu64
	       " frames x 2 hooks in %.1f s (%.0f frames/s); table: %zu entries from %s, %zu "
	       "cached answers; object: %s\n",
	       opt.seed, opt.first, opt.first + fuzzed - (fuzzed > 0), st.cases, secs,
	       secs > 0 ? (double)st.cases / secs : 0.0, env.corpus.table.n,
	       opt.snapshot ? opt.snapshot : "the sample cluster", env.corpus.cached.n,
	       opt.object ? opt.object : "built in");
	printf("fuzz_diff: tc %" PRIu64 " answered, %" PRIu64 " passed; xdp %" PRIu64
	       " answered, %" PRIu64 " passed\n",
	       st.answered[TC], st.passed[TC], st.answered[XDP], st.passed[XDP]);
	printf("fuzz_diff: %" PRIu64 " replies agreed with the socket path's (%" PRIu64
	       " queries asked, %" PRIu64 " byte-identical); %" PRIu64 " mismatches\n",
	       st.compared, st.asked, st.identical, st.mismatches);
	if (!ndc_fastpath_counters(env.fp, c)) {
		printf("fuzz_diff: fast path counters:");
		for (int i = 0; i < NDC_FP_COUNTER_MAX; i++)
			if (c[i])
				printf(" %s %" PRIu64 ";", counter_name[i], c[i]);
		printf("\n");
	}
	if (opt.vectors)
		printf("fuzz_diff: the vector set: %" PRIu64 " frames, before the fuzzed ones\n",
		       st.vectors);
	if (opt.dpdk)
		printf("fuzz_diff: DPDK against the kernel (per hook): %" PRIu64
		       " replies byte-identical (%" PRIu64 " of them a TTL second apart), %" PRIu64
		       " passes with the same counter and the frame untouched\n",
		       st.dpdk_answered, st.dpdk_shifted, st.dpdk_passed);
}

int main(int argc, char **argv)
{
	struct timespec t0, t1;
	struct fz_case c;
	int r = parse_args(argc, argv);

	if (r)
		return r;
	if (geteuid() != 0) {
		fprintf(stderr, "fuzz_diff: needs root (BPF_PROG_TEST_RUN): skipped\n");
		return 77;
	}
	ndc_log_set_level(NDC_LOG_WARN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (setup()) {
		teardown();
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (opt.replay) {
		if (parse_hex(opt.replay, &c)) {
			fprintf(stderr, "fuzz_diff: --replay wants a frame in hex\n");
			teardown();
			return 2;
		}
		check_case(0, &c);
	}
	for (uint64_t i = 0; opt.vectors && !opt.replay; i++) {
		int r = fz_vector_case(i, &env.corpus, &c);

		if (r == -ENOENT)
			break;
		if (r) {
			fprintf(stderr, "fuzz_diff: vector %" PRIu64 " does not fit a frame\n", i);
			continue;
		}
		st.vectors++;
		if (check_case(i, &c) && opt.expect_mismatch)
			break;
	}
	for (uint64_t i = opt.first; !opt.replay && i < opt.first + opt.count; i++) {
		if (fz_gen_case(opt.seed, i, &env.corpus, &c)) {
			fprintf(stderr, "fuzz_diff: case %" PRIu64 " does not fit a frame\n", i);
			continue;
		}
		if (check_case(i, &c) && opt.expect_mismatch)
			break;
		if (opt.count >= 2000000 && (i - opt.first + 1) % 1000000 == 0)
			fprintf(stderr, "fuzz_diff: %" PRIu64 " frames, %" PRIu64 " mismatches\n",
				i - opt.first + 1, st.mismatches);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	summary((double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	teardown();
	if (opt.expect_mismatch) {
		printf("fuzz_diff: %s\n",
		       st.mismatches ? "the planted bug was caught: PASS"
				     : "no mismatch: the planted bug was NOT caught: FAIL");
		return st.mismatches ? 0 : 1;
	}
	printf("fuzz_diff: %s\n", st.mismatches ? "FAIL" : "PASS");
	return st.mismatches ? 1 : 0;
}
