// SPDX-License-Identifier: MIT
/*
 * ndcache: node-local DNS cache agent. Loads the config and the cluster objects, builds the
 * record table, starts the cache, the forwarder and the socket server, then waits for a signal.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ndc/log.h>

#include "cache.h"
#include "config.h"
#include "fastpath.h"
#include "forwarder.h"
#include "k8s_objects.h"
#include "publisher.h"
#include "records.h"
#include "resolver.h"
#include "server.h"

struct opts {
	const char *config;
	const char *kubeconfig;
	bool check;
};

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: ndcache [--config FILE] [--kubeconfig FILE] [--check-config]\n"
	    "               [--log-level error|warning|info|debug] [--version] [--help]\n"
	    "\n"
	    "Node-local DNS cache for Kubernetes. Without --config it serves the sample cluster\n"
	    "compiled into the binary on 169.254.20.10:53. See deploy/examples/ndcache.yaml.\n");
}

static int parse_args(int argc, char **argv, struct opts *o)
{
	static const struct option longopts[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"kubeconfig", required_argument, NULL, 'k'},
	    {"check-config", no_argument, NULL, 'C'},
	    {"log-level", required_argument, NULL, 'l'},
	    {"version", no_argument, NULL, 'V'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	static const char *const levels[] = {"error", "warning", "info", "debug"};
	int c;

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
			ndc_log_level = -1;
			for (int i = 0; i < 4; i++)
				if (!strcmp(optarg, levels[i]))
					ndc_log_level = i;
			if (ndc_log_level < 0) {
				fprintf(stderr, "ndcache: --log-level: unknown level '%s'\n",
					optarg);
				return 2;
			}
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

static int load_objects(const struct ndc_config *cfg, struct ndc_k8s_objects *objs)
{
	char err[256] = "";
	int ret;

	switch (cfg->source.kind) {
	case NDC_SOURCE_EMBEDDED:
		ret = ndc_snapshot_parse(ndc_sample_cluster, ndc_sample_cluster_len, objs, err,
					 sizeof(err));
		if (ret < 0)
			ndc_err("embedded sample cluster: %s", err);
		return ret;
	case NDC_SOURCE_SNAPSHOT:
		ret = ndc_snapshot_load(cfg->source.snapshot, objs, err, sizeof(err));
		if (ret < 0)
			ndc_err("source.snapshot: %s: %s", cfg->source.snapshot, err);
		return ret;
	case NDC_SOURCE_KUBERNETES:
		break;
	}
	ndc_err("source.kubernetes: the API server client is not in this build yet; "
		"use source.snapshot");
	return -EOPNOTSUPP;
}

static void log_summary(const struct ndc_config *cfg, const struct ndc_records *rec,
			unsigned workers)
{
	char addrs[512] = "", ups[512] = "";
	size_t n = 0;

	for (size_t i = 0; i < cfg->n_listen; i++) {
		char a[INET6_ADDRSTRLEN];
		inet_ntop(cfg->listen[i].family, cfg->listen[i].addr, a, sizeof(a));
		n += (size_t)snprintf(addrs + n, sizeof(addrs) - n, "%s%s", i ? ", " : "", a);
		if (n >= sizeof(addrs))
			break;
	}
	n = 0;
	for (size_t i = 0; i < cfg->n_upstream; i++) {
		const struct sockaddr_storage *ss = &cfg->upstream[i];
		char a[INET6_ADDRSTRLEN];
		uint16_t port;
		if (ss->ss_family == AF_INET6) {
			const struct sockaddr_in6 *s6 = (const void *)ss;
			inet_ntop(AF_INET6, &s6->sin6_addr, a, sizeof(a));
			port = ntohs(s6->sin6_port);
		} else {
			const struct sockaddr_in *s4 = (const void *)ss;
			inet_ntop(AF_INET, &s4->sin_addr, a, sizeof(a));
			port = ntohs(s4->sin_port);
		}
		n += (size_t)snprintf(ups + n, sizeof(ups) - n, "%s%s port %u", i ? ", " : "", a,
				      port);
		if (n >= sizeof(ups))
			break;
	}
	ndc_info("serving %zu RRsets of %s on %s port %u (udp, tcp), %u workers; upstream: %s",
		 ndc_records_count(rec), cfg->cluster_domain, addrs, cfg->port, workers,
		 cfg->n_upstream ? ups : "none (names outside the cluster get SERVFAIL)");
}

/*
 * Loads and attaches the fast path and publishes the records into it. Failing here is not fatal:
 * the socket path answers everything the kernel would have (fail open), so it is logged once.
 */
static void fastpath_start(const struct ndc_config *cfg, const struct ndc_records *rec,
			   struct ndc_cache *cache, struct ndc_fp **ret_fp,
			   struct ndc_publisher **ret_pub)
{
	uint8_t zone[NDC_NAME_MAX], pass[NDC_NAME_MAX];
	struct ndc_fastpath_opts fo = {
	    .attach = cfg->dataplane.mode == NDC_DP_XDP ? NDC_FP_ATTACH_XDP : NDC_FP_ATTACH_TC,
	    .n_patterns = cfg->dataplane.n_interfaces,
	    .patterns = cfg->dataplane.interfaces,
	    .n_addrs = cfg->n_listen,
	    .addrs = cfg->listen,
	    .port = cfg->port,
	    .max_entries = cfg->dataplane.table_size,
	    .redirect_peer = cfg->dataplane.redirect_peer,
	};
	struct ndc_publisher_stats ps;
	struct ndc_publisher *pub = NULL;
	struct ndc_fp *fp = NULL;
	size_t zlen;
	int err;

	*ret_fp = NULL;
	*ret_pub = NULL;
	err = ndc_name_from_text(cfg->cluster_domain, zone, sizeof(zone), &zlen);
	if (err)
		goto fail;
	ndc_name_lower(zone, zone, zlen);
	fo.zone = zone;
	fo.zone_len = zlen;
	/* Insecure pod names are computed per query in user space: never NXDOMAIN them here. */
	if (cfg->records.pods == NDC_PODS_INSECURE && zlen + 4 <= sizeof(pass)) {
		memcpy(pass, "\3pod", 4);
		memcpy(pass + 4, zone, zlen);
		fo.pass = pass;
		fo.pass_len = zlen + 4;
	}
	err = ndc_fastpath_open(&fo, &fp);
	if (err)
		goto fail;
	err = ndc_publisher_new(fp, &pub);
	if (!err)
		err = ndc_publisher_load_records(pub, rec);
	if (err)
		goto fail;
	ndc_cache_set_hook(cache, ndc_publisher_cache_hook, pub);
	ndc_publisher_stats(pub, &ps);
	ndc_info("fast path: %s on links matching dataplane.interfaces, %lu answers published, "
		 "%lu left to user space (too big), %lu did not fit the table",
		 fo.attach == NDC_FP_ATTACH_XDP ? "xdp" : "tc", (unsigned long)ps.published,
		 (unsigned long)ps.too_big, (unsigned long)ps.table_full);
	*ret_fp = fp;
	*ret_pub = pub;
	return;
fail:
	ndc_publisher_free(pub);
	ndc_fastpath_close(fp);
	ndc_warn("fast path unavailable (%s); answering from sockets only",
		 err == -EOPNOTSUPP ? "this build has no BPF support" : strerror(-err));
}

static void fastpath_stop(struct ndc_fp *fp, struct ndc_publisher *pub)
{
	uint64_t c[NDC_FP_COUNTER_MAX];

	if (!fp)
		return;
	ndc_publisher_free(pub);
	if (!ndc_fastpath_counters(fp, c))
		ndc_info("fast path: %lu answered, %lu NODATA, %lu NXDOMAIN; passed: %lu miss, "
			 "%lu expired, %lu EDNS, %lu size, %lu format, %lu fragment",
			 (unsigned long)c[NDC_FP_HIT], (unsigned long)c[NDC_FP_NODATA],
			 (unsigned long)c[NDC_FP_NXDOMAIN], (unsigned long)c[NDC_FP_PASS_MISS],
			 (unsigned long)c[NDC_FP_PASS_EXPIRED], (unsigned long)c[NDC_FP_PASS_EDNS],
			 (unsigned long)c[NDC_FP_PASS_SIZE], (unsigned long)c[NDC_FP_PASS_FORMAT],
			 (unsigned long)c[NDC_FP_PASS_FRAG]);
	ndc_fastpath_close(fp);
}

static int run(const struct ndc_config *cfg, const struct ndc_records *rec)
{
	struct ndc_cache_opts copts = {
	    .max_entries = cfg->cache.max_entries,
	    .max_bytes = cfg->cache.max_bytes,
	    .max_ttl = cfg->cache.max_ttl,
	    .neg_max_ttl = cfg->cache.neg_max_ttl,
	    .stale_max = cfg->cache.stale_max,
	};
	struct ndc_forwarder_opts fopts = {
	    .n_upstreams = cfg->n_upstream,
	    .upstreams = cfg->upstream,
	    .timeout_ms = cfg->forward.timeout_ms,
	};
	struct ndc_server_opts sopts = {
	    .n_addrs = cfg->n_listen,
	    .addrs = cfg->listen,
	    .port = cfg->port,
	    .workers = cfg->workers,
	    .tcp_idle_ms = cfg->tcp_idle_ms,
	    .tcp_max_conns = cfg->tcp_max_conns,
	};
	struct ndc_cache *cache = NULL;
	struct ndc_forwarder *fwd = NULL;
	struct ndc_resolver *res = NULL;
	struct ndc_server *srv = NULL;
	struct ndc_publisher *pub = NULL;
	struct ndc_fp *fp = NULL;
	sigset_t set;
	int sig, ret;

	/* Block the signals before any thread starts so only sigwait below sees them. */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	ret = ndc_cache_new(&copts, &cache);
	if (ret < 0) {
		ndc_err("cache: %s", strerror(-ret));
		goto out;
	}
	/* Before the forwarder starts: the cache hook must be in place for its first answer. */
	if (cfg->dataplane.mode == NDC_DP_TC || cfg->dataplane.mode == NDC_DP_XDP)
		fastpath_start(cfg, rec, cache, &fp, &pub);
	else if (cfg->dataplane.mode == NDC_DP_DPDK)
		ndc_warn("dataplane.mode dpdk: the DPDK backend is not in this build; answering "
			 "from sockets only");
	ret = ndc_forwarder_new(&fopts, cache, &fwd);
	if (ret < 0) {
		ndc_err("forwarder: %s", strerror(-ret));
		goto out;
	}
	ret = ndc_resolver_new(rec, cache, fwd, &res);
	if (ret < 0)
		goto out;
	ret = ndc_server_start(&sopts, ndc_resolver_handle, res, &srv);
	if (ret < 0) {
		ndc_err("listen: %s", strerror(-ret));
		goto out;
	}
	log_summary(cfg, rec,
		    cfg->workers ? cfg->workers : (unsigned)sysconf(_SC_NPROCESSORS_ONLN));

	sigwait(&set, &sig);
	ndc_info("%s: shutting down", strsignal(sig));
	ret = 0;

out:
	/* The forwarder first: it completes every detained query before the server goes away. */
	if (fwd)
		ndc_forwarder_free(fwd);
	if (srv)
		ndc_server_stop(srv);
	fastpath_stop(fp, pub);
	if (res) {
		struct ndc_resolver_stats st;
		ndc_resolver_stats(res, &st);
		ndc_info("queries %lu: cluster %lu, cache %lu, forwarded %lu, servfail %lu, "
			 "bad %lu, dropped %lu",
			 (unsigned long)st.queries, (unsigned long)st.local,
			 (unsigned long)st.cache_hits, (unsigned long)st.forwarded,
			 (unsigned long)st.servfail, (unsigned long)st.errors,
			 (unsigned long)st.dropped);
		ndc_resolver_free(res);
	}
	if (cache)
		ndc_cache_free(cache);
	return ret < 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct ndc_k8s_objects objs = {0};
	struct ndc_records_opts ropts;
	struct ndc_records *rec = NULL;
	struct ndc_config cfg;
	struct opts o = {0};
	char err[512] = "";
	int ret;

	ret = parse_args(argc, argv, &o);
	if (ret >= 0)
		return ret;

	ndc_config_defaults(&cfg);
	if (o.config && ndc_config_load(o.config, &cfg, err, sizeof(err)) < 0) {
		fprintf(stderr, "ndcache: %s: %s\n", o.config, err);
		ndc_config_free(&cfg);
		return 1;
	}
	if (o.kubeconfig) {
		free(cfg.source.snapshot);
		free(cfg.source.kubeconfig);
		cfg.source.snapshot = NULL;
		cfg.source.kubeconfig = strdup(o.kubeconfig);
		cfg.source.kind = NDC_SOURCE_KUBERNETES;
	}

	ret = load_objects(&cfg, &objs);
	if (ret < 0)
		goto out;
	ndc_records_opts_from_config(&ropts, &cfg);
	ret = ndc_records_build(&objs, &ropts, &rec);
	ndc_k8s_objects_free(&objs);
	if (ret < 0) {
		ndc_err("building records: %s", strerror(-ret));
		goto out;
	}
	if (o.check) {
		printf("ndcache: configuration ok (%zu RRsets)\n", ndc_records_count(rec));
		goto out;
	}
	ret = run(&cfg, rec) ? -1 : 0;

out:
	ndc_records_free(rec);
	ndc_config_free(&cfg);
	return ret < 0 ? 1 : 0;
}
