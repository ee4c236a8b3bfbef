// SPDX-License-Identifier: MIT
/*
 * The agent's start-up order and its shutdown in reverse, the signal loop, and the wiring of
 * /metrics. What it starts: the table (source.c), the dataplane (dataplane.c), upgrades
 * (upgrade.c), the upstream side (upstream.c); the subsystems themselves are query/, store/,
 * k8s/, http/, reload/.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ndc/log.h>

#include "handover.h"
#include "http/http.h"
#include "internal.h"
#include "publisher.h"
#include "query/query.h"
#include "reload/reload.h"
#include "socket/socket.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* The resolver answers the socket server's queries through the server's own calls. */
static const struct ndc_query_io socket_io = {
    .is_tcp = ndc_server_req_is_tcp,
    .peer = ndc_server_req_peer,
    .detain = ndc_server_detain,
    .complete = ndc_server_complete,
};

/* ---------------------------------------------------------------------------------------------
 * Metrics: each subsystem writes its own section (query.h, store.h, k8s.h, publisher.h,
 * reload.h); here only what the agent itself holds, and the wiring.
 */
/*
 * The process: where the memory goes (the resident set is what a DaemonSet's memory limit is
 * checked against; the record table's share is in ndc_agent_records_metrics), and whether a
 * successor took over. Not malloc's own statistics: mallinfo2 walks every arena's free lists under
 * its lock, which stalled the table's writers for tens of milliseconds per scrape at 100,000
 * Services (tests/bench/bench_store has the heap's breakdown).
 */
static void process_metrics(void *arg, struct ndc_metrics_buf *b)
{
	struct agent *ag = arg;
	struct ndc_handover_stats hs;
	unsigned long size = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "re");

	if (f) {
		if (fscanf(f, "%lu %lu", &size, &resident) != 2)
			resident = 0;
		fclose(f);
	}
	if (resident)
		ndc_metric_u64(b, "process_resident_memory_bytes", "gauge",
			       "Resident memory size in bytes.", NULL,
			       (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE));
	ndc_metric_u64(b, "ndcache_handed_over", "gauge",
		       "1 once a successor agent has taken over (this one exits on SIGTERM leaving "
		       "the fast path to it).",
		       NULL, ndc_handover_taken(ag->ho));
	ndc_agent_upgrade_metrics(ag, b);
	ndc_handover_stats(ag->ho, &hs);
	for (int i = 0; i < NDC_HANDOVER_REFUSED_MAX; i++) {
		char l[32];

		snprintf(l, sizeof(l), "reason=\"%s\"", ndc_handover_refusal_name(i));
		ndc_metric_u64(b, "ndcache_handover_peers_refused_total", "counter",
			       "Connections to the handover socket refused: another uid than the "
			       "agent's (uid), no HELLO in time (timeout), every slot held (full), "
			       "not the protocol (protocol).",
			       l, hs.refused[i]);
	}
}

static void reload_metrics(void *arg, struct ndc_metrics_buf *b)
{
	ndc_reload_metrics(arg, b);
}

/* Every section of /metrics, once each subsystem exists (the reload's included). */
static void metrics_start(struct agent *ag)
{
	const struct ndc_metrics_source sources[] = {
	    {"resolver", ndc_resolver_metrics, ag->res},
	    {"dataplane", ndc_agent_dataplane_metrics, ag},
	    {"cache", ndc_cache_metrics, ag->cache},
	    {"forwarder", ndc_forwarder_metrics, ag->fwd},
	    {"failopen", ndc_agent_failopen_metrics, ag},
	    {"per_client", ndc_ratelimit_metrics, ag->limiter},
	    {"prefetch", ndc_prefetch_metrics, ag->prefetch},
	    {"records", ndc_agent_records_metrics, ag},
	    {"process", process_metrics, ag},
	    {"reload", reload_metrics, ag->reload},
	    {"publisher", ndc_publisher_metrics, ag->pub},
	};

	for (size_t i = 0; i < N(sources); i++)
		if (sources[i].arg)
			ndc_http_add_metrics(ag->http, &sources[i]);
}

/* ---------------------------------------------------------------------------------------------
 * Start and stop.
 */
static void log_summary(const struct ndc_config *cfg)
{
	char addrs[512] = "", ups[512] = "";
	size_t n = 0;
	unsigned workers = cfg->workers ? cfg->workers : (unsigned)sysconf(_SC_NPROCESSORS_ONLN);

	for (size_t i = 0; i < cfg->n_listen && n < sizeof(addrs); i++) {
		char a[INET6_ADDRSTRLEN];

		inet_ntop(cfg->listen[i].family, cfg->listen[i].addr, a, sizeof(a));
		n += (size_t)snprintf(addrs + n, sizeof(addrs) - n, "%s%s", i ? ", " : "", a);
	}
	n = 0;
	for (size_t i = 0; i < cfg->n_upstream && n < sizeof(ups); i++) {
		const struct sockaddr_storage *ss = &cfg->upstream[i];
		const struct sockaddr_in6 *s6 = (const void *)ss;
		const struct sockaddr_in *s4 = (const void *)ss;
		char a[INET6_ADDRSTRLEN];
		bool v6 = ss->ss_family == AF_INET6;

		inet_ntop(ss->ss_family,
			  v6 ? (const void *)&s6->sin6_addr : (const void *)&s4->sin_addr, a,
			  sizeof(a));
		n += (size_t)snprintf(ups + n, sizeof(ups) - n, "%s%s port %u", i ? ", " : "", a,
				      ntohs(v6 ? s6->sin6_port : s4->sin_port));
	}
	ndc_info("listening on %s port %u (udp, tcp), %u workers; upstream: %s; http %s", addrs,
		 cfg->port, workers, cfg->n_upstream ? ups : "none (other names get SERVFAIL)",
		 cfg->http.listen);
}

/* The reload (reload.h), once the forwarder and the resolver exist. */
static int reload_start(struct agent *ag)
{
	const struct ndc_agent_opts *o = ag->opts;
	struct ndc_reload_opts ro = {
	    .path = o ? o->config_path : NULL,
	    .text = o ? o->config_text : NULL,
	    .len = o ? o->config_len : 0,
	    .running = ag->cfg,
	    .kubeconfig = o ? o->kubeconfig : NULL,
	    .log_level_fixed = o && o->log_level_fixed,
	    .conn = ag->conn,
	};
	struct ndc_reload_targets t = {
	    .cache = ag->cache,
	    .fwd = ag->fwd,
	    .res = ag->res,
	    .prefetch = ag->prefetch,
	    .limiter = ag->limiter,
	    .fastpath = ag->fp != NULL,
	    .rebuild = ndc_agent_rebuild_records,
	    .arg = ag,
	};

	return ndc_reload_start(&ro, &t, &ag->reload);
}

int ndc_agent_run(const struct ndc_config *cfg, struct ndc_records *rec,
		  const struct ndc_k8s_conn *conn, const struct ndc_agent_opts *opts,
		  struct ndc_agent_join *join)
{
	struct ndc_cache_opts copts;
	struct ndc_forwarder_opts fopts;
	struct ndc_server_opts sopts = {
	    .n_addrs = cfg->n_listen,
	    .addrs = cfg->listen,
	    .port = cfg->port,
	    .workers = cfg->workers,
	    .tcp_idle_ms = cfg->tcp_idle_ms,
	    .tcp_max_conns = cfg->tcp_max_conns,
	};
	struct agent ag = {.cfg = cfg, .opts = opts, .conn = conn};
	pthread_condattr_t ca;
	int *inherit = NULL;
	size_t n_inherit = 0;
	sigset_t set;
	int sig, ret;

	/* The running agent we joined (ndc_agent_join, before anything slow) and its sockets. */
	if (join) {
		ag.pred = join->pred;
		inherit = join->fds;
		n_inherit = join->n_fds;
		*join = (struct ndc_agent_join){0};
	}
	ndc_records_opts_from_config(&ag.ropts, cfg);
	ndc_cache_opts_from_config(&copts, cfg);
	ndc_forwarder_opts_from_config(&fopts, cfg);
	/* One SOA serial for the agent's life: rebuilt bases keep negative answers byte-equal. */
	ag.ropts.serial = (uint32_t)time(NULL);
	pthread_mutex_init(&ag.install_lock, NULL);
	pthread_mutex_init(&ag.attach_lock, NULL);
	pthread_mutex_init(&ag.source_lock, NULL);
	pthread_mutex_init(&ag.src_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* ndc_agent_rebuild_records waits */
	pthread_cond_init(&ag.source_cond, &ca);
	pthread_condattr_destroy(&ca);
	/* Block the signals before any thread starts so only sigwait below sees them. */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP); /* reload the config file */
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	ret = ndc_cache_new(&copts, &ag.cache);
	if (ret < 0) {
		ndc_err("cache: %s", strerror(-ret));
		goto out;
	}
	/*
	 * Before the forwarder starts: the cache hook must be in place for its first answer.
	 * Loaded and filled here, attached only in ndc_agent_maybe_attach: until then whatever
	 * program is attached (an earlier agent's) keeps answering.
	 */
	if (cfg->dataplane.mode == NDC_DP_TC || cfg->dataplane.mode == NDC_DP_XDP) {
		ndc_agent_fastpath_start(&ag);
		/*
		 * A successor that would serve with less than it replaces (no capabilities, no BPF
		 * in its build) does not start: the running agent keeps everything.
		 */
		if (ag.pred && !ag.fp) {
			ndc_err("handover: not taking over from the running agent without the fast "
				"path; it keeps serving");
			ret = -EPERM;
			goto out;
		}
	} else if (cfg->dataplane.mode == NDC_DP_DPDK) {
		ret = ndc_agent_dpdk_start(&ag);
		if (ret < 0)
			goto out;
	}
	ret = ndc_forwarder_new(&fopts, ag.cache, &ag.fwd);
	if (ret < 0) {
		ndc_err("forwarder: %s", strerror(-ret));
		goto out;
	}
	ret = ndc_agent_upstream_share_start(&ag);
	if (ret < 0)
		goto out;
	ret = ndc_resolver_new(NULL, ag.cache, ag.fwd, &socket_io, &ag.res);
	if (ret < 0)
		goto out;
	ndc_resolver_set_limiter(ag.res, ag.limiter);
	/* Before the sockets: stub domains and query logging apply from the first query. */
	ret = reload_start(&ag);
	if (ret < 0)
		goto out;
	ret = ndc_http_start_inherit(cfg->http.listen, inherit, n_inherit, NULL, NULL, &ag.http);
	if (ret < 0) {
		ndc_err("http.listen %s: %s", cfg->http.listen, strerror(-ret));
		goto out;
	}
	metrics_start(&ag);
	if (rec) {
		pthread_mutex_lock(&ag.source_lock);
		ndc_agent_install(&ag, rec, NULL);
		pthread_mutex_unlock(&ag.source_lock);
		rec = NULL;
	}
	sopts.inherit = inherit;
	sopts.n_inherit = n_inherit;
	ret = ndc_server_start(&sopts, ndc_resolver_handle, ag.res, &ag.srv);
	free(inherit); /* the server owns the descriptors now */
	inherit = NULL;
	n_inherit = 0;
	if (ret < 0) {
		ndc_err("listen: %s", strerror(-ret));
		goto out;
	}
	/* Our listeners are up: a loop check that comes back can be seen now. */
	ndc_forwarder_loop_check(ag.fwd);
	ndc_http_set_unready_check(ag.http, ndc_agent_upstream_unready, ag.fwd);
	ndc_agent_failopen_check(cfg, ag.fp != NULL);
	pthread_mutex_lock(&ag.attach_lock);
	ag.serving = true;
	pthread_mutex_unlock(&ag.attach_lock);
	ndc_agent_maybe_attach(&ag);
	if (conn) {
		ret = ndc_agent_watch_start(&ag, conn);
		if (ret < 0)
			goto out;
	}
	ndc_agent_handover_serve(&ag);
	log_summary(cfg);
	/* Everything a reload may replace runs now: changes of the file are applied from here. */
	ndc_reload_arm(ag.reload);

	while (sigwait(&set, &sig) == 0 && sig == SIGHUP)
		ndc_reload_request(ag.reload);
	ndc_info("%s: shutting down", strsignal(sig));
	ret = 0;
	ag.handed_over = ndc_handover_taken(ag.ho);
	if (!ag.handed_over &&
	    (ndc_handover_joined(ag.ho) || ndc_agent_upgrade_join_wait(&ag, &set)))
		ag.handed_over = ndc_agent_upgrade_wait(&ag, &set);
	if (ag.handed_over)
		ndc_agent_hand_over(&ag);

out:
	for (size_t i = 0; i < n_inherit; i++)
		close(inherit[i]);
	free(inherit);
	/*
	 * Stopped in the reverse order of what depends on what: first everything that calls into
	 * the others (/metrics, the reload, the watch, the server's workers, prefetches), then
	 * what they call (the forwarder, the resolver, the fast path, the cache), so that no query
	 * and no scrape ever reaches a freed component.
	 */
	/* A successor that says HELLO from here on gets no sockets: they are about to close. */
	pthread_mutex_lock(&ag.attach_lock);
	ag.closing = true;
	pthread_mutex_unlock(&ag.attach_lock);
	/* /metrics reads every component: it goes first. */
	ndc_http_stop(ag.http);
	/* A reload waiting for a new source gives up; no reload changes anything after this. */
	pthread_mutex_lock(&ag.source_lock);
	ag.stopping = true;
	pthread_cond_broadcast(&ag.source_cond);
	pthread_mutex_unlock(&ag.source_lock);
	ndc_reload_stop(ag.reload);
	/* No new tables. */
	ndc_agent_source_free(ag.src);
	/*
	 * No new queries: the workers answer what they have read and are joined, so none calls
	 * into the resolver, the cache or the forwarder again. The sockets stay open for the
	 * answers still upstream (a no-op after ndc_agent_hand_over, which did it already).
	 */
	if (ag.srv)
		ndc_server_quiesce(ag.srv);
	/* No prefetch is sent to a forwarder going away; those in flight complete in its free. */
	ndc_prefetch_stop(ag.prefetch);
	/* The forwarder completes every detained query before the server goes away. */
	if (ag.fwd)
		ndc_forwarder_free(ag.fwd);
	ndc_prefetch_free(ag.prefetch);
	if (ag.srv)
		ndc_server_stop(ag.srv);
	/* Before the fast path: a successor that dies from here on finds nothing to reattach. */
	ndc_handover_stop(ag.ho);
	ndc_agent_fastpath_stop(&ag);
	ndc_agent_dpdk_stop(&ag);
	ndc_handover_peer_free(ag.pred);
	if (ag.res) {
		struct ndc_resolver_stats st;

		ndc_resolver_stats(ag.res, &st);
		ndc_info("queries %lu: cluster %lu, cache %lu, forwarded %lu, servfail %lu, "
			 "bad %lu, dropped %lu",
			 (unsigned long)st.queries, (unsigned long)st.local,
			 (unsigned long)st.cache_hits, (unsigned long)st.forwarded,
			 (unsigned long)st.servfail, (unsigned long)st.errors,
			 (unsigned long)st.dropped);
		ndc_records_free((struct ndc_records *)ndc_resolver_set_records(ag.res, NULL));
		ndc_resolver_free(ag.res);
	}
	ndc_records_free(rec);
	ndc_ratelimit_free(ag.limiter);
	if (ag.cache)
		ndc_cache_free(ag.cache);
	pthread_cond_destroy(&ag.source_cond);
	pthread_mutex_destroy(&ag.src_lock);
	pthread_mutex_destroy(&ag.source_lock);
	pthread_mutex_destroy(&ag.attach_lock);
	pthread_mutex_destroy(&ag.install_lock);
	return ret < 0 ? 1 : 0;
}
