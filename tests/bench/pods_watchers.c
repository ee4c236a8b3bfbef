// SPDX-License-Identifier: MIT
/*
 * N agents' pod identity watches in one process, for tests/bench/pods_fleet_bench.sh: watch i
 * is node-<i>'s (NDC_K8S_NODE_PODS through ndc_pods_watch_start, its own map), authenticated
 * as TOKEN.agent-<i> so the fake API server counts each apart. --cluster-wide instead watches
 * every pod per agent (NDC_K8S_PODS, what records.pods: verified costs), for comparison.
 * Prints "synced N watches in MS ms" once every watch has its state, then runs until SIGTERM or
 * SIGINT and prints what the maps hold: "pods per map min MIN max MAX rejected R".
 *
 * Usage: pods_watchers URL CA_FILE TOKEN N [--cluster-wide]
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ndc/log.h>

#include "k8s/k8s.h"
#include "pods/pods.h"

#define MAX_AGENTS 500

static atomic_uint listed; /* --cluster-wide: complete lists received */

static void cw_end(void *arg, enum ndc_k8s_kind kind)
{
	(void)arg;
	(void)kind;
	atomic_fetch_add(&listed, 1);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int main(int argc, char **argv)
{
	static const struct ndc_k8s_watch_ops cw_ops = {.list_end = cw_end};
	static struct ndc_pods *maps[MAX_AGENTS];
	static struct ndc_k8s_watch *w[MAX_AGENTS];
	struct ndc_k8s_watch_opts opts = {.timeout_s = 300};
	uint64_t min = UINT64_MAX, max = 0, rejected = 0;
	bool cluster_wide;
	int64_t t0;
	sigset_t ss;
	int n, sig;

	if (argc < 5 || (n = atoi(argv[4])) < 1 || n > MAX_AGENTS) {
		fprintf(stderr, "usage: %s URL CA_FILE TOKEN N(1..%d) [--cluster-wide]\n", argv[0],
			MAX_AGENTS);
		return 2;
	}
	cluster_wide = argc > 5 && !strcmp(argv[5], "--cluster-wide");
	ndc_log_level = NDC_LOG_WARN;
	sigemptyset(&ss);
	sigaddset(&ss, SIGTERM);
	sigaddset(&ss, SIGINT);
	pthread_sigmask(SIG_BLOCK, &ss, NULL); /* the watch threads inherit it */
	t0 = now_ms();
	for (int i = 0; i < n; i++) {
		struct ndc_k8s_conn conn = {.server = argv[1], .ca_file = argv[2]};
		char token[256], node[32];
		int r;

		snprintf(token, sizeof(token), "%s.agent-%d", argv[3], i);
		snprintf(node, sizeof(node), "node-%d", i);
		conn.token = token;
		r = ndc_pods_new(node, &maps[i]);
		if (r == 0 && cluster_wide) {
			opts.kinds = 1u << NDC_K8S_PODS;
			r = ndc_k8s_watch_start(&conn, &opts, &cw_ops, NULL, &w[i]);
		} else if (r == 0) {
			r = ndc_pods_watch_start(maps[i], &conn, &opts, &w[i]);
		}
		if (r < 0) {
			fprintf(stderr, "pods_watchers: watch %d: %s\n", i, strerror(-r));
			return 1;
		}
	}
	for (;;) {
		int synced = 0;

		for (int i = 0; i < n && !cluster_wide; i++) {
			struct ndc_pods_stats st;

			ndc_pods_stats(maps[i], &st);
			synced += st.synced;
		}
		if (cluster_wide)
			synced = (int)atomic_load(&listed);
		if (synced >= n)
			break;
		if (now_ms() - t0 > 120000) {
			fprintf(stderr, "pods_watchers: %d of %d watches synced after 120 s\n",
				synced, n);
			return 1;
		}
		nanosleep(&(struct timespec){0, 5 * 1000 * 1000}, NULL);
	}
	printf("synced %d watches in %lld ms\n", n, (long long)(now_ms() - t0));
	fflush(stdout);
	sigwait(&ss, &sig);
	for (int i = 0; i < n; i++) {
		struct ndc_pods_stats st;

		ndc_k8s_watch_stop(w[i]);
		ndc_pods_stats(maps[i], &st);
		min = st.pods < min ? st.pods : min;
		max = st.pods > max ? st.pods : max;
		rejected += st.rejected;
		ndc_pods_free(maps[i]);
	}
	printf("pods per map min %llu max %llu rejected %llu\n", (unsigned long long)min,
	       (unsigned long long)max, (unsigned long long)rejected);
	return 0;
}
