// SPDX-License-Identifier: MIT
/*
 * ndcache: node-local DNS cache agent. Loads the config and the cluster objects, builds the
 * record table, starts the cache, the forwarder and the socket server, then waits for a signal.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <ndc/log.h>

#include "agent/agent.h"
#include "config/config.h"
#include "config/config_opts.h"
#include "k8s/k8s.h"
#include "objects/objects.h"
#include "records/records.h"
#include "top/cli.h"

struct opts {
	const char *config;
	const char *kubeconfig;
	bool check;
	bool log_level; /* --log-level given: it wins over log.level */
};

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: ndcache [--config FILE] [--kubeconfig FILE] [--check-config]\n"
	    "               [--log-level error|warning|info|debug] [--log-format text|json]\n"
	    "               [--version] [--help]\n"
	    "       ndcache top [--addr ADDR:PORT | --config FILE] [--once] [--json]\n"
	    "\n"
	    "Node-local DNS cache for Kubernetes. Without --config it serves the sample cluster\n"
	    "compiled into the binary on 169.254.20.10:53. See deploy/examples/ndcache.yaml.\n"
	    "The config file is reloaded when it changes and on SIGHUP.\n");
}

static int parse_args(int argc, char **argv, struct opts *o)
{
	static const struct option longopts[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"kubeconfig", required_argument, NULL, 'k'},
	    {"check-config", no_argument, NULL, 'C'},
	    {"log-level", required_argument, NULL, 'l'},
	    {"log-format", required_argument, NULL, 'f'},
	    {"version", no_argument, NULL, 'V'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	int c, level;

	while ((c = getopt_long(argc, argv, "c:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'c':
			o->config = optarg;
			break;
		case 'k':
			o->kubeconfig = optarg;
			break;
		case 'C':
			o->check = true;
			break;
		case 'l':
			level = ndc_log_level_from_name(optarg);
			if (level < 0) {
				fprintf(stderr, "ndcache: --log-level: unknown level '%s'\n",
					optarg);
				return 2;
			}
			ndc_log_set_level(level);
			o->log_level = true;
			break;
		case 'f':
			if (strcmp(optarg, "text") && strcmp(optarg, "json")) {
				fprintf(stderr,
					"ndcache: --log-format: expected text or json, got '%s'\n",
					optarg);
				return 2;
			}
			ndc_log_set_format(strcmp(optarg, "json") ? NDC_LOG_TEXT : NDC_LOG_JSON);
			break;
		case 'V':
			printf("ndcache %s\n", NDC_VERSION);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "ndcache: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	return -1;
}

static void objects_done(void *arg)
{
	ndc_k8s_objects_free(arg);
}

/*
 * A snapshot source (a file, or the sample cluster compiled in) into a record table, built with
 * ropts (NULL: the config's). Also the agent's load_records: a records.* reload reads it again.
 */
static int load_records(const struct ndc_config *cfg, const struct ndc_records_opts *ropts,
			struct ndc_records **ret)
{
	struct ndc_k8s_objects objs = {0};
	struct ndc_records_opts ro;
	char err[256] = "";
	int r;

	if (cfg->source.kind == NDC_SOURCE_SNAPSHOT) {
		r = ndc_snapshot_load(cfg->source.snapshot, &objs, err, sizeof(err));
		if (r < 0)
			ndc_err("source.snapshot: %s", err);
	} else {
		r = ndc_snapshot_parse(ndc_sample_cluster, ndc_sample_cluster_len, &objs, err,
				       sizeof(err));
		if (r < 0)
			ndc_err("embedded sample cluster: %s", err);
	}
	if (r < 0)
		return r;
	if (!ropts) {
		ndc_records_opts_from_config(&ro, cfg);
		ropts = &ro;
	}
	r = ndc_records_build_from(&objs, ropts, objects_done, &objs, ret);
	if (r < 0)
		ndc_err("building records: %s", strerror(-r));
	return r;
}

/* The API server's address and credentials: a kubeconfig, or the in-cluster service account. */
static int load_conn(const struct ndc_config *cfg, struct ndc_k8s_conn *conn)
{
	char err[512] = "";
	int r;

	if (cfg->source.kubeconfig)
		r = ndc_kubeconfig_load(cfg->source.kubeconfig, conn, err, sizeof(err));
	else
		r = ndc_k8s_incluster(NULL, conn, err, sizeof(err));
	if (r < 0)
		ndc_err("source.kubernetes: %s", err);
	return r;
}

/*
 * glibc raises its mmap threshold (up to 32 MiB) each time an mmap'd block is freed, so after
 * the first record table was replaced, the next tables' large arrays came from the heap, and a
 * freed heap region below a live one is never given back: at 100,000 Services about 100 MB of
 * resident memory was free heap. A fixed threshold keeps large blocks in mmap, returned on free.
 * Per-query paths do not allocate, so the mmap/munmap per large block costs nothing there.
 */
#define NDC_MMAP_THRESHOLD (256 << 10)

static void malloc_setup(void)
{
	mallopt(M_MMAP_THRESHOLD, NDC_MMAP_THRESHOLD);
}

/*
 * Every TCP client and every upstream query (a fresh socket each) takes a file descriptor: the
 * usual soft limit of 1024 is below what the defaults allow (1024 TCP connections per worker,
 * forward.max_pending). The soft limit goes up to the hard one (capped at 2^20: the kernel's
 * default nr_open); the server pauses accepting when it still runs out.
 */
#define NDC_NOFILE_MAX (1u << 20)

static void nofile_setup(void)
{
	struct rlimit rl;
	rlim_t want;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return;
	want = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > NDC_NOFILE_MAX ? NDC_NOFILE_MAX
									    : rl.rlim_max;
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
		rl.rlim_cur = want;
		setrlimit(RLIMIT_NOFILE, &rl); /* best effort: the old limit still works */
	}
}

int main(int argc, char **argv)
{
	struct ndc_k8s_conn conn = {0};
	struct ndc_records *rec = NULL;
	struct ndc_agent_opts ao = {.load_records = load_records};
	struct ndc_agent_join join = {0};
	char *cfg_text = NULL;
	size_t cfg_len = 0;
	struct ndc_config cfg;
	struct opts o = {0};
	char err[512] = "";
	bool k8s;
	int ret;

	/* Subcommands: the first argument names one. */
	if (argc > 1 && !strcmp(argv[1], "top"))
		return ndc_top_cli(argc - 1, argv + 1);
	ret = parse_args(argc, argv, &o);
	if (ret >= 0)
		return ret;
	malloc_setup();
	nofile_setup();

	ndc_config_defaults(&cfg);
	if (o.config &&
	    ndc_config_load_text(o.config, &cfg, &cfg_text, &cfg_len, err, sizeof(err)) < 0) {
		/* The message starts with the file's path and names the key and line. */
		fprintf(stderr, "ndcache: %s\n", err);
		ndc_config_free(&cfg);
		return 1;
	}
	if (o.kubeconfig && ndc_config_use_kubeconfig(&cfg, o.kubeconfig) < 0) {
		fprintf(stderr, "ndcache: --kubeconfig: out of memory\n");
		ndc_config_free(&cfg);
		free(cfg_text);
		return 1;
	}
	if (!o.log_level)
		ndc_log_set_level(cfg.log.level);
	k8s = cfg.source.kind == NDC_SOURCE_KUBERNETES;
	/*
	 * An upgrade: the running agent's sockets first, before the snapshot or the credentials
	 * are read. Told to stop, it waits only upgrade.join_wait_ms for us to join, and, once we
	 * have, serves on until we take over (upgrade.wait_s).
	 */
	if (!o.check)
		ndc_agent_join(&cfg, &join);
	ret = k8s ? load_conn(&cfg, &conn) : load_records(&cfg, NULL, &rec);
	if (ret < 0)
		goto out;
	if (o.check) {
		if (k8s)
			printf("ndcache: configuration ok (kubernetes source: %s)\n", conn.server);
		else
			printf("ndcache: configuration ok (%zu RRsets)\n", ndc_records_count(rec));
		goto out;
	}
	ao.config_path = o.config;
	ao.config_text = cfg_text;
	ao.config_len = cfg_len;
	ao.kubeconfig = o.kubeconfig;
	ao.log_level_fixed = o.log_level;
	ret = ndc_agent_run(&cfg, rec, k8s ? &conn : NULL, &ao, &join) ? -1 : 0;
	rec = NULL; /* the agent owns it now */

out:
	ndc_agent_join_release(&join);
	ndc_records_free(rec);
	ndc_k8s_conn_free(&conn);
	ndc_config_free(&cfg);
	free(cfg_text);
	return ret < 0 ? 1 : 0;
}
