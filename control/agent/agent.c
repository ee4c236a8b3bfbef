// SPDX-License-Identifier: MIT
/*
 * The agent's start-up as a table of steps, each with its undo, run in order and undone in
 * reverse (on a failure or at shutdown); the signal loop; the wiring of /metrics. What it starts:
 * the table (source.c), the dataplane (dataplane.c), upgrades (upgrade.c), the upstream side
 * (forwarding.c); the subsystems themselves are query/, store/, k8s/, http/, reload/.
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
    .is_tcp = ndc_socket_req_is_tcp,
    .peer = ndc_socket_req_peer,
    .detain = ndc_socket_detain,
    .complete = ndc_socket_complete,
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
	const char *reasons[NDC_HANDOVER_REFUSED_MAX];
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
		       NULL, ndc_handover_taken(ag->up.ho));
	ndc_agent_upgrade_metrics(ag, b);
	ndc_handover_stats(ag->up.ho, &hs);
	for (int i = 0; i < NDC_HANDOVER_REFUSED_MAX; i++)
		reasons[i] = ndc_handover_refusal_name(i);
	ndc_metric_u64_each(b, "ndcache_handover_peers_refused_total", "counter",
			    "Connections to the handover socket refused: another uid than the "
			    "agent's (uid), no HELLO in time (timeout), every slot held (full), "
			    "not the protocol (protocol).",
			    "reason", reasons, hs.refused, NDC_HANDOVER_REFUSED_MAX);
}

static void reload_metrics(void *arg, struct ndc_metrics_buf *b)
{
	ndc_reload_metrics(arg, b);
}

/* Every section of /metrics, once each subsystem exists (the reload's included). */
static void metrics_add(struct agent *ag)
{
	const struct ndc_metrics_source sources[] = {
	    {"resolver", ndc_resolver_metrics, ag->query.res},
	    {"dataplane", ndc_agent_dataplane_metrics, ag},
	    {"cache", ndc_cache_metrics, ag->query.cache},
	    {"forwarder", ndc_forwarder_metrics, ag->query.fwd},
	    {"failopen", ndc_agent_failopen_metrics, ag},
	    {"per_client", ndc_ratelimit_metrics, ag->query.limiter},
	    {"prefetch", ndc_prefetch_metrics, ag->query.prefetch},
	    {"records", ndc_agent_records_metrics, ag},
	    {"process", process_metrics, ag},
	    {"reload", reload_metrics, ag->reload},
	    {"publisher", ndc_publisher_metrics, ag->dp.pub},
	    {"observe", ndc_agent_observe_metrics, ag},
	};

	for (size_t i = 0; i < N(sources); i++)
		if (sources[i].arg)
			ndc_http_add_metrics(ag->http, &sources[i]);
}

/* ---------------------------------------------------------------------------------------------
 * Start and stop.
 */
/* The line that says the agent runs, and where. */
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

/* ---------------------------------------------------------------------------------------------
 * The start-up steps. Each makes its part of struct agent (internal.h groups the fields by step)
 * from what the steps before it made; its undo comes in two halves, so that nothing that still
 * runs ever reaches a freed part:
 *   stop  stops it calling into the parts of earlier steps (threads joined, nothing new taken
 *         in): every started step's stop runs first, in reverse order;
 *   free  frees what it made: every started step's free runs then, in reverse order.
 * A step that fails is undone with the ones before it, so each undo takes what its step left
 * half made (NULL: nothing).
 */
/* "join": the running agent we joined (ndc_agent_join, before anything slow) and its sockets. */
static int join_take(struct agent *ag)
{
	if (ag->join) {
		ag->up.pred = ag->join->pred;
		ag->up.inherit = ag->join->fds;
		ag->up.n_inherit = ag->join->n_fds;
		*ag->join = (struct ndc_agent_join){0};
	}
	return 0;
}

/* What the server did not take (a start that failed before it), and the predecessor. */
static void join_free(struct agent *ag)
{
	for (size_t i = 0; i < ag->up.n_inherit; i++)
		close(ag->up.inherit[i]);
	free(ag->up.inherit);
	ndc_handover_peer_free(ag->up.pred);
}

/*
 * "state": the locks, and the signals blocked before any thread starts so that only the main
 * thread's sigwait sees them.
 */
static int state_init(struct agent *ag)
{
	pthread_condattr_t ca;

	ndc_records_opts_from_config(&ag->table.ropts, ag->cfg);
	/* One SOA serial for the agent's life: rebuilt bases keep negative answers byte-equal. */
	ag->table.ropts.serial = (uint32_t)time(NULL);
	pthread_mutex_init(&ag->table.install_lock, NULL);
	pthread_mutex_init(&ag->up.attach_lock, NULL);
	pthread_mutex_init(&ag->table.source_lock, NULL);
	pthread_mutex_init(&ag->table.src_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* ndc_agent_rebuild_records waits */
	pthread_cond_init(&ag->table.source_cond, &ca);
	pthread_condattr_destroy(&ca);
	sigemptyset(&ag->signals);
	sigaddset(&ag->signals, SIGINT);
	sigaddset(&ag->signals, SIGTERM);
	sigaddset(&ag->signals, SIGHUP); /* reload the config file */
	pthread_sigmask(SIG_BLOCK, &ag->signals, NULL);
	signal(SIGPIPE, SIG_IGN);
	return 0;
}

static void state_free(struct agent *ag)
{
	ndc_records_free(ag->table.first); /* a snapshot's table never installed */
	pthread_cond_destroy(&ag->table.source_cond);
	pthread_mutex_destroy(&ag->table.src_lock);
	pthread_mutex_destroy(&ag->table.source_lock);
	pthread_mutex_destroy(&ag->up.attach_lock);
	pthread_mutex_destroy(&ag->table.install_lock);
}

static int cache_start(struct agent *ag)
{
	struct ndc_cache_opts copts;
	int ret;

	ndc_cache_opts_from_config(&copts, ag->cfg);
	ret = ndc_cache_new(&copts, &ag->query.cache);
	if (ret < 0)
		ndc_err("cache: %s", strerror(-ret));
	return ret;
}

static void cache_free(struct agent *ag)
{
	if (ag->query.cache)
		ndc_cache_free(ag->query.cache);
}

static int forwarder_start(struct agent *ag)
{
	struct ndc_forwarder_opts fopts;
	int ret;

	ndc_forwarder_opts_from_config(&fopts, ag->cfg);
	ret = ndc_forwarder_new(&fopts, ag->query.cache, &ag->query.fwd);
	if (ret < 0)
		ndc_err("forwarder: %s", strerror(-ret));
	else
		ndc_agent_observe_forwarder(ag); /* before any resolve */
	return ret;
}

/*
 * Its stop is its free: the forwarder completes every detained query (answered through the
 * server's sockets, which are closed only in the server's free) and every prefetch in flight.
 */
static void forwarder_stop(struct agent *ag)
{
	if (ag->query.fwd)
		ndc_forwarder_free(ag->query.fwd);
	ag->query.fwd = NULL;
}

/* No prefetch is sent to a forwarder going away; those in flight complete in its free. */
static void share_stop(struct agent *ag)
{
	ndc_prefetch_stop(ag->query.prefetch);
}

static void share_free(struct agent *ag)
{
	ndc_prefetch_free(ag->query.prefetch);
	ndc_ratelimit_free(ag->query.limiter);
}

static int resolver_start(struct agent *ag)
{
	int ret =
	    ndc_resolver_new(NULL, ag->query.cache, ag->query.fwd, &socket_io, &ag->query.res);

	if (ret == 0) {
		ndc_resolver_set_limiter(ag->query.res, ag->query.limiter);
		ndc_agent_observe_resolver(ag);
	}
	return ret;
}

/* The last figures, logged; the table it served goes with it. */
static void resolver_free(struct agent *ag)
{
	struct ndc_resolver_stats st;

	if (!ag->query.res)
		return;
	ndc_resolver_stats(ag->query.res, &st);
	ndc_info("queries %lu: cluster %lu, cache %lu, forwarded %lu, servfail %lu, "
		 "bad %lu, dropped %lu",
		 (unsigned long)st.queries, (unsigned long)st.local, (unsigned long)st.cache_hits,
		 (unsigned long)st.forwarded, (unsigned long)st.servfail, (unsigned long)st.errors,
		 (unsigned long)st.dropped);
	ndc_records_free((struct ndc_records *)ndc_resolver_set_records(ag->query.res, NULL));
	ndc_resolver_free(ag->query.res);
}

/*
 * The reload (reload.h), once the forwarder and the resolver exist, before the sockets: stub
 * domains and query logging apply from the first query.
 */
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
	    .cache = ag->query.cache,
	    .fwd = ag->query.fwd,
	    .res = ag->query.res,
	    .prefetch = ag->query.prefetch,
	    .limiter = ag->query.limiter,
	    .fastpath = ndc_agent_fastpath_loaded(ag),
	    .rebuild = ndc_agent_rebuild_records,
	    .arg = ag,
	};

	return ndc_reload_start(&ro, &t, &ag->reload);
}

/* A reload waiting for a new source gives up; no reload changes anything after this. */
static void reload_stop(struct agent *ag)
{
	pthread_mutex_lock(&ag->table.source_lock);
	ag->table.stopping = true;
	pthread_cond_broadcast(&ag->table.source_cond);
	pthread_mutex_unlock(&ag->table.source_lock);
	ndc_reload_stop(ag->reload);
	ag->reload = NULL;
}

/* /metrics, /health and /ready (on the predecessor's socket in an upgrade), every section. */
static int http_start(struct agent *ag)
{
	const char *listen = ag->cfg->http.listen;
	int ret =
	    ndc_http_start_inherit(listen, ag->up.inherit, ag->up.n_inherit, NULL, NULL, &ag->http);

	if (ret < 0) {
		ndc_err("http.listen %s: %s", listen, strerror(-ret));
		return ret;
	}
	metrics_add(ag);
	ndc_agent_observe_http(ag);
	return 0;
}

/* /metrics reads every part: after it stops, none is read from outside any more. */
static void http_stop(struct agent *ag)
{
	struct ndc_http *h = ag->http;

	pthread_mutex_lock(&ag->up.attach_lock);
	ag->http = NULL;
	pthread_mutex_unlock(&ag->up.attach_lock);
	ndc_http_stop(h);
}

/* A snapshot's (or the embedded) table, served from here on. */
static int records_start(struct agent *ag)
{
	if (ag->table.first) {
		pthread_mutex_lock(&ag->table.source_lock);
		ndc_agent_install(ag, ag->table.first, NULL);
		pthread_mutex_unlock(&ag->table.source_lock);
		ag->table.first = NULL;
	}
	return 0;
}

/*
 * The sockets read, then the checks that need our listeners, then the dataplane attached once the
 * table is filled (ndc_agent_maybe_attach: now, or when the first table comes).
 */
static int server_start(struct agent *ag)
{
	const struct ndc_config *cfg = ag->cfg;
	struct ndc_socket_opts sopts = {
	    .n_addrs = cfg->n_listen,
	    .addrs = cfg->listen,
	    .port = cfg->port,
	    .workers = cfg->workers,
	    .tcp_idle_ms = cfg->tcp_idle_ms,
	    .tcp_max_conns = cfg->tcp_max_conns,
	    .inherit = ag->up.inherit,
	    .n_inherit = ag->up.n_inherit,
	    .hold = ag->up.pred != NULL, /* ndc_agent_hold_start */
	};
	int ret = ndc_socket_start(&sopts, ndc_resolver_handle, ag->query.res, &ag->srv);

	free(ag->up.inherit); /* the server owns the descriptors now */
	ag->up.inherit = NULL;
	ag->up.n_inherit = 0;
	if (ret < 0) {
		ndc_err("listen: %s", strerror(-ret));
		return ret;
	}
	ndc_agent_hold_start(ag); /* reads the sockets now, with no predecessor */
	ndc_http_set_unready_check(ag->http, ndc_agent_upstream_unready, ag->query.fwd);
	ndc_agent_failopen_check(cfg, ndc_agent_fastpath_loaded(ag));
	pthread_mutex_lock(&ag->up.attach_lock);
	ag->up.serving = true;
	pthread_mutex_unlock(&ag->up.attach_lock);
	ndc_agent_maybe_attach(ag);
	return 0;
}

/*
 * No new queries: the workers answer what they have read and are joined, so none calls into the
 * resolver, the cache or the forwarder again. The sockets stay open for the answers still
 * upstream (a no-op after ndc_agent_hand_over, which did it already).
 */
static void server_stop(struct agent *ag)
{
	ndc_agent_hold_stop(ag);
	if (ag->srv)
		ndc_socket_quiesce(ag->srv);
}

/*
 * The sockets closed (the forwarder has answered what it detained), then the attach undone: the
 * dataplane detached and closed, its counters logged (step "dataplane" closes one that was never
 * attached, after a failed start).
 */
static void server_free(struct agent *ag)
{
	if (ag->srv)
		ndc_socket_stop(ag->srv);
	ndc_agent_dataplane_close(ag);
}

/* A Kubernetes source's list and watch; it fills the table from another thread. */
static int watch_start(struct agent *ag)
{
	return ag->conn ? ndc_agent_watch_start(ag, ag->conn) : 0;
}

/* No new tables (after the reload's stop: no reload replaces the source any more). */
static void watch_free(struct agent *ag)
{
	ndc_agent_source_free(ag->table.src);
}

static int handover_start(struct agent *ag)
{
	ndc_agent_handover_serve(ag);
	return 0;
}

/*
 * Before the server stops reading: a successor that joined but has not taken over (the wait for
 * it ended) sees the connection close and reads the sockets from then on. No successor gets
 * sockets, nor finds anything to reattach, from here on.
 */
static void handover_stop(struct agent *ag)
{
	pthread_mutex_lock(&ag->up.attach_lock);
	ag->up.closing = true;
	pthread_mutex_unlock(&ag->up.attach_lock);
	ndc_handover_close(ag->up.ho);
}

static void handover_free(struct agent *ag)
{
	ndc_handover_stop(ag->up.ho);
}

/* Everything a reload may replace runs now: changes of the file are applied from here. */
static int armed_start(struct agent *ag)
{
	log_summary(ag->cfg);
	ndc_reload_arm(ag->reload);
	return 0;
}

static const struct step {
	const char *name;
	int (*start)(struct agent *ag); /* 0 or -errno, logged */
	void (*stop)(struct agent *ag); /* NULL: nothing runs that calls into the others */
	void (*free)(struct agent *ag); /* NULL: nothing to free */
} steps[] = {
    {"join", join_take, NULL, join_free},
    {"state", state_init, NULL, state_free},
    /*
     * Who asks what, before the query path that reports to it: the watch of this node's pods
     * stops with the other threads, its map and the dnstap writer are freed after every stop.
     */
    {"pods", ndc_agent_pods_start, ndc_agent_pods_stop, ndc_agent_pods_free},
    {"dnstap", ndc_agent_dnstap_start, NULL, ndc_agent_dnstap_free},
    {"cache", cache_start, NULL, cache_free},
    /*
     * Before the forwarder starts: the cache hook must be in place for its first answer. Loaded
     * here, filled as the table is installed and the cache fills, attached only in
     * ndc_agent_maybe_attach: until then whatever program is attached (an earlier agent's) keeps
     * answering.
     */
    {"dataplane", ndc_agent_dataplane_open, NULL, ndc_agent_dataplane_close},
    /* stopped (joined) before the dataplane and the dnstap writer it uses are freed */
    {"kernel samples", ndc_agent_samples_start, ndc_agent_samples_stop, NULL},
    {"forwarder", forwarder_start, forwarder_stop, NULL},
    {"upstream share", ndc_agent_upstream_share_start, share_stop, share_free},
    {"resolver", resolver_start, NULL, resolver_free},
    {"reload", reload_start, reload_stop, NULL},
    {"http", http_start, http_stop, NULL},
    {"records", records_start, NULL, NULL},
    {"server", server_start, server_stop, server_free},
    {"watch", watch_start, NULL, watch_free},
    {"handover", handover_start, handover_stop, handover_free},
    {"armed", armed_start, NULL, NULL},
};

/* Serves until SIGINT or SIGTERM (SIGHUP: a reload), then waits for a successor, if any. */
static void serve(struct agent *ag)
{
	int sig = 0;

	while (sigwait(&ag->signals, &sig) == 0 && sig == SIGHUP)
		ndc_reload_request(ag->reload);
	ndc_info("%s: shutting down", strsignal(sig));
	ag->up.handed_over = ndc_handover_taken(ag->up.ho);
	if (!ag->up.handed_over &&
	    (ndc_handover_joined(ag->up.ho) || ndc_agent_upgrade_join_wait(ag, &ag->signals)))
		ag->up.handed_over = ndc_agent_upgrade_wait(ag, &ag->signals);
	if (ag->up.handed_over)
		ndc_agent_hand_over(ag);
}

int ndc_agent_run(const struct ndc_config *cfg, struct ndc_records *rec,
		  const struct ndc_k8s_conn *conn, const struct ndc_agent_opts *opts,
		  struct ndc_agent_join *join)
{
	struct agent ag = {.cfg = cfg, .opts = opts, .conn = conn, .join = join};
	size_t started = 0, i;
	int ret = 0;

	ag.table.first = rec;
	while (started < N(steps) && ret == 0)
		ret = steps[started++].start(&ag);
	if (ret == 0)
		serve(&ag);
	for (i = started; i-- > 0;)
		if (steps[i].stop)
			steps[i].stop(&ag);
	for (i = started; i-- > 0;)
		if (steps[i].free)
			steps[i].free(&ag);
	return ret < 0 ? 1 : 0;
}
