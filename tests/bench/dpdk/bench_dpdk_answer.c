// SPDX-License-Identifier: MIT
/*
 * Benchmark, not a test: what the DPDK lcore itself spends per query, without any I/O. Frames of
 * one kind (an A hit, a search-path NXDOMAIN, a miss passed to the kernel) are copied into a
 * burst of mbufs, and ndc_dpdk_answer_mbuf runs over the burst with the clock read around it
 * only; the copies that restore the queries are not timed. The sample cluster is published into
 * the table as the publisher does. Prints ns per frame, the median of the rounds.
 *
 * Usage: bench_dpdk_answer [ROUNDS]   (root, like any EAL program; --no-huge, no port)
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <ndc/abi.h>
#include <ndc/dns_wire.h>

#include "dpdk/internal.h"
#include "objects/objects.h"
#include "packets.h"
#include "records/records.h"

#define BURST 32
#define NS 1000000000ull

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NS + (uint64_t)ts.tv_nsec;
}

static struct ndc_dpdk_table *table;

static int publish_one(void *arg, const uint8_t *lname, size_t nlen, uint16_t qtype,
		       const struct ndc_answer *a)
{
	(void)arg;
	return ndc_dpdk_table_publish(table, lname, nlen, qtype, a, 0);
}

static int frame(const char *name, uint8_t *out, size_t *len)
{
	static const uint8_t node[16] = {169, 254, 20, 10}, client[16] = {169, 254, 100, 2};
	struct ndc_pkt_query q = {.id = 1, .flags = 0x0100, .name = name, .qtype = NDC_T_A};
	struct ndc_pkt_addrs a = {.sport = 40000, .dport = 53};
	uint8_t dns[NDC_PKT_MAX];
	size_t dlen;

	memcpy(a.saddr, client, 16);
	memcpy(a.daddr, node, 16);
	a.src_mac[0] = 2;
	a.dst_mac[0] = 2;
	a.dst_mac[5] = 1;
	if (ndc_pkt_dns_query(&q, dns, sizeof(dns), &dlen))
		return -EINVAL;
	return ndc_pkt_build(&a, &(struct ndc_pkt_opts){0}, dns, dlen, out, NDC_PKT_MAX, len);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Median ns per frame over rounds bursts of the frame of name; the verdict every time. */
static int run(struct rte_mempool *pool, const char *name, int want, int rounds, double *ret_ns)
{
	struct rte_mbuf *m[BURST];
	uint8_t f[NDC_PKT_MAX];
	uint64_t *t = calloc((size_t)rounds, sizeof(*t));
	size_t len;

	if (!t || frame(name, f, &len) || rte_pktmbuf_alloc_bulk(pool, m, BURST))
		return -ENOMEM;
	for (int r = 0; r < rounds; r++) {
		uint64_t t0, now = mono_ns();

		for (int i = 0; i < BURST; i++) {
			rte_pktmbuf_reset(m[i]);
			memcpy(rte_pktmbuf_append(m[i], (uint16_t)len), f, len);
		}
		t0 = mono_ns();
		for (int i = 0; i < BURST; i++)
			if (ndc_dpdk_answer_mbuf(table, m[i], now) != want)
				return -EBADMSG;
		t[r] = mono_ns() - t0;
	}
	qsort(t, (size_t)rounds, sizeof(*t), cmp_u64);
	*ret_ns = (double)t[rounds / 2] / BURST;
	rte_pktmbuf_free_bulk(m, BURST);
	free(t);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *what, *name;
		int verdict;
	} kinds[] = {
	    {"A hit", "kubernetes.default.svc.cluster.local", NDC_FP_HIT},
	    {"search-path NXDOMAIN", "api.example.com.default.svc.cluster.local", NDC_FP_NXDOMAIN},
	    {"miss (passed)", "www.example.org", NDC_FP_PASS_MISS},
	};
	char prefix[64], err[256];
	char *eal[] = {argv[0],	      "--no-huge",	"--no-pci",   "-m",   "128",
		       "--no-shconf", "--no-telemetry", "--lcores=0", prefix, NULL};
	int rounds = argc > 1 ? atoi(argv[1]) : 20000;
	struct ndc_fp_config cfg = {.abi_version = NDC_ABI_VERSION, .n_addr4 = 1};
	struct ndc_k8s_objects objs;
	struct ndc_records *rec;
	struct rte_mempool *pool;
	union {
		struct ndc_answer a;
		uint8_t b[sizeof(struct ndc_answer) + NDC_FP_DATA_MAX];
	} nx;
	size_t zlen;

	snprintf(prefix, sizeof(prefix), "--file-prefix=ndc-bench-%d", (int)getpid());
	if (rounds < 1 || rte_eal_init(9, eal) < 0) {
		fprintf(stderr, "bench_dpdk_answer: EAL: %s\n", rte_strerror(rte_errno));
		return 1;
	}
	pool =
	    rte_pktmbuf_pool_create("bench", 1023, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
	struct ndc_records_opts ro = {.zone = "cluster.local", .ttl = 5};
	if (!pool ||
	    ndc_snapshot_parse(ndc_sample_cluster, ndc_sample_cluster_len, &objs, err,
			       sizeof(err)) ||
	    ndc_records_build(&objs, &ro, &rec))
		return 1;
	cfg.addr4[0] = htonl(0xa9fe140a); /* 169.254.20.10 */
	cfg.port = htons(53);
	if (ndc_name_from_text("cluster.local", cfg.zone, sizeof(cfg.zone), &zlen))
		return 1;
	cfg.zone_len = (uint8_t)zlen;
	struct ndc_dpdk_table_opts to = {.max_entries = 4096, .max_readers = 1, .config = &cfg};
	if (ndc_dpdk_table_new(&to, &table) || ndc_records_foreach(rec, publish_one, NULL) ||
	    ndc_records_nxdomain(rec, &nx.a, NDC_FP_DATA_MAX) ||
	    ndc_dpdk_table_set_nx(table, &nx.a) || ndc_dpdk_table_set_synced(table, true))
		return 1;
	printf("ndc_dpdk_answer_mbuf, bursts of %d, median of %d rounds (no I/O):\n", BURST,
	       rounds);
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		double ns;

		if (run(pool, kinds[i].name, kinds[i].verdict, rounds, &ns)) {
			fprintf(stderr, "bench_dpdk_answer: %s: wrong verdict\n", kinds[i].what);
			return 1;
		}
		printf("  %-22s %7.1f ns per frame\n", kinds[i].what, ns);
	}
	ndc_dpdk_table_free(table);
	rte_mempool_free(pool);
	ndc_records_free(rec);
	ndc_k8s_objects_free(&objs);
	snprintf(err, sizeof(err), "%s", rte_eal_get_runtime_dir());
	rte_eal_cleanup();
	rmdir(err); /* the EAL leaves its (empty) runtime directory */
	return 0;
}
