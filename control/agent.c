// SPDX-License-Identifier: MIT
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ndc/log.h>

#include "agent.h"
#include "agent_upstream.h"
#include "dpdk/dpdk.h"
#include "fastpath/fastpath.h"
#include "handover.h"
#include "http/http.h"
#include "publisher.h"
#include "query/query.h"
#include "reload/reload.h"
#include "socket/socket.h"
#include "store/store.h"

/* A records.* reload with a Kubernetes source lists everything again: this long at most. */
#define NDC_RESYNC_TIMEOUT_S 120

struct agent;

/*
 * A Kubernetes source: a store and the watch that fills it, made with one set of record
 * options. A records.* reload makes a new one beside it, which takes over at its first table.
 */
struct source {
	struct agent *ag;
	struct ndc_records_opts ropts;
	char **namespaces; /* ropts.namespaces, this source's own copy */
	size_t n_namespaces;
	char **mc_zones; /* ropts.mc_zones, this source's own copy */
	size_t n_mc_zones;
	struct ndc_k8s_store *store;
	struct ndc_k8s_watch *watch;
};

struct agent {
	const struct ndc_config *cfg;
	const struct ndc_agent_opts *opts;
	const struct ndc_k8s_conn *conn;
	struct ndc_reload *reload;
	struct ndc_records_opts ropts;
	struct ndc_cache *cache;
	struct ndc_fp *fp;
	struct ndc_dpdk *dp; /* mode dpdk */
	struct ndc_publisher *pub;
	struct ndc_forwarder *fwd;
	struct ndc_prefetch *prefetch; /* cache.prefetch */
	struct ndc_ratelimit *limiter; /* forward.per_client */
	struct ndc_resolver *res;
	struct ndc_server *srv;
	struct ndc_http *http;
	/* The Kubernetes source (NULL: snapshot or embedded) and, during a records.* reload, the
	 * one that replaces it. source_lock orders their tables; src_lock guards src for /metrics.
	 */
	struct source *src, *next_src;
	pthread_mutex_t source_lock, src_lock;
	pthread_cond_t source_cond;
	bool stopping; /* under source_lock: a reload waiting for a new source gives up */
	pthread_mutex_t install_lock;  /* one writer of the record table at a time */
	const struct ndc_records *rec; /* what the resolver serves, under install_lock */
	_Atomic uint64_t rrsets;
	_Atomic uint64_t records_bytes; /* of the base table the served version shares */
	_Atomic uint64_t overlay_names; /* changed since that base was built */
	_Atomic bool synced;
	/* Upgrades (handover.h): the predecessor we joined, our own listener for a successor. */
	struct ndc_handover_peer *pred;
	struct ndc_handover *ho;
	pthread_mutex_t attach_lock; /* serving, attached, the fast path's attach state */
	bool serving;		     /* the DNS sockets are read */
	bool attached;		     /* our programs are in (or there is no fast path) */
	bool taken_over;	     /* we told the predecessor */
	bool handed_over;	     /* at shutdown: a successor had taken over from us */
};

static void maybe_attach(struct agent *ag);

/* ---------------------------------------------------------------------------------------------
 * The record table.
 */
/* Installs a new table everywhere it is read: the socket path, then the fast path. */
static void install(struct agent *ag, struct ndc_records *rec,
		    const struct ndc_records_patch *changed)
{
	const struct ndc_records *old;
	int err = 0;

	pthread_mutex_lock(&ag->install_lock);
	old = ndc_resolver_set_records(ag->res, rec);
	ag->rec = rec;
	if (ag->pub)
		err = changed && old ? ndc_publisher_update_names(ag->pub, old, rec, changed)
				     : ndc_publisher_update_records(ag->pub, old, rec);
	if (err)
		ndc_warn("fast path: republishing failed; misses go to user space");
	ndc_records_free((struct ndc_records *)old);
	atomic_store(&ag->rrsets, ndc_records_count(rec));
	atomic_store(&ag->records_bytes, ndc_records_bytes(rec));
	atomic_store(&ag->overlay_names, ndc_records_overlay_size(rec));
	pthread_mutex_unlock(&ag->install_lock);
	if (!atomic_exchange(&ag->synced, true)) {
		ndc_info("records: %zu RRsets of %s: ready", ndc_records_count(rec),
			 ag->cfg->cluster_domain);
		maybe_attach(ag);
		ndc_http_set_ready(ag->http, true);
	}
}

/*
 * A table from a source's store. A replacing source's first one makes it the source (installed
 * whole: its versions are not the old one's); tables of a replaced source are dropped.
 */
static void on_records(void *arg, struct ndc_records *rec, const struct ndc_records_patch *changed)
{
	struct source *src = arg;
	struct agent *ag = src->ag;

	pthread_mutex_lock(&ag->source_lock);
	if (src == ag->next_src) {
		pthread_mutex_lock(&ag->src_lock);
		ag->src = src;
		ag->next_src = NULL;
		pthread_mutex_unlock(&ag->src_lock);
		install(ag, rec, NULL);
		pthread_cond_broadcast(&ag->source_cond);
	} else if (src == ag->src) {
		install(ag, rec, changed);
	} else {
		ndc_records_free(rec);
	}
	pthread_mutex_unlock(&ag->source_lock);
}

/* ---------------------------------------------------------------------------------------------
 * The fast path.
 */
/*
 * The zone below which the fast paths answer NXDOMAIN, and the suffix they never do: insecure pod
 * names are computed per query in user space. Lowercase wire names; *ret_plen 0 for no suffix.
 */
static int zone_and_pass(const struct ndc_config *cfg, uint8_t zone[NDC_NAME_MAX], size_t *ret_zlen,
			 uint8_t pass[NDC_NAME_MAX], size_t *ret_plen)
{
	int err = ndc_name_from_text(cfg->cluster_domain, zone, NDC_NAME_MAX, ret_zlen);

	if (err)
		return err;
	ndc_name_lower(zone, zone, *ret_zlen);
	*ret_plen = 0;
	if (cfg->records.pods == NDC_PODS_INSECURE && *ret_zlen + 4 <= NDC_NAME_MAX) {
		memcpy(pass, "\3pod", 4);
		memcpy(pass + 4, zone, *ret_zlen);
		*ret_plen = *ret_zlen + 4;
	}
	return 0;
}

/*
 * Loads and attaches the fast path. Failing here is not fatal: the socket path answers everything
 * the kernel would have (fail open), so it is logged once.
 */
static void fastpath_start(struct agent *ag)
{
	const struct ndc_config *cfg = ag->cfg;
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
	    .failopen = cfg->dataplane.failopen,
	    .pin_dir = cfg->dataplane.pin_dir,
	    .n_upstreams = cfg->n_upstream,
	    .upstreams = cfg->upstream,
	    /* attached once the table is full and the sockets are read: maybe_attach */
	    .defer_attach = true,
	};
	int err;

	err = zone_and_pass(cfg, zone, &fo.zone_len, pass, &fo.pass_len);
	if (err)
		goto fail;
	fo.zone = zone;
	fo.pass = fo.pass_len ? pass : NULL;
	err = ndc_fastpath_open(&fo, &ag->fp);
	if (err)
		goto fail;
	err = ndc_publisher_new(&ndc_fastpath_answer_table, ag->fp, &ag->pub);
	if (err)
		goto fail;
	ndc_cache_set_hook(ag->cache, ndc_publisher_cache_hook, ag->pub);
	ndc_info("fast path: %s loaded; attached to links matching dataplane.interfaces once "
		 "the table is filled",
		 fo.attach == NDC_FP_ATTACH_XDP ? "xdp" : "tc");
	return;
fail:
	ndc_publisher_free(ag->pub);
	ndc_fastpath_close(ag->fp);
	ag->pub = NULL;
	ag->fp = NULL;
	ndc_warn("fast path unavailable (%s); answering from sockets only",
		 err == -EOPNOTSUPP ? "this build has no BPF support" : strerror(-err));
}

static void fastpath_stop(struct agent *ag)
{
	uint64_t c[NDC_FP_COUNTER_MAX];

	if (!ag->fp)
		return;
	ndc_publisher_free(ag->pub);
	if (!ndc_fastpath_counters(ag->fp, c))
		ndc_info("fast path: %lu answered, %lu NODATA, %lu NXDOMAIN; passed: %lu miss, "
			 "%lu expired, %lu EDNS, %lu size, %lu format, %lu fragment, %lu busy; "
			 "sent on to the "
			 "upstream with no agent listening: %lu udp, %lu tcp segments",
			 (unsigned long)c[NDC_FP_HIT], (unsigned long)c[NDC_FP_NODATA],
			 (unsigned long)c[NDC_FP_NXDOMAIN], (unsigned long)c[NDC_FP_PASS_MISS],
			 (unsigned long)c[NDC_FP_PASS_EXPIRED], (unsigned long)c[NDC_FP_PASS_EDNS],
			 (unsigned long)c[NDC_FP_PASS_SIZE], (unsigned long)c[NDC_FP_PASS_FORMAT],
			 (unsigned long)c[NDC_FP_PASS_FRAG], (unsigned long)c[NDC_FP_PASS_BUSY],
			 (unsigned long)c[NDC_FP_FWD_UDP], (unsigned long)c[NDC_FP_FWD_TCP]);
	/* Only what is still ours: a successor's programs and pins stay. */
	if (ag->handed_over)
		ndc_fastpath_hand_off(ag->fp);
	else
		ndc_fastpath_close(ag->fp);
}

/* ---------------------------------------------------------------------------------------------
 * The DPDK dataplane (mode dpdk): chosen explicitly, so failing to start it is fatal.
 */
static int dpdk_start(struct agent *ag)
{
	const struct ndc_config *cfg = ag->cfg;
	uint8_t zone[NDC_NAME_MAX], pass[NDC_NAME_MAX];
	struct ndc_dpdk_opts o = {
	    .n_eal_args = cfg->dataplane.dpdk.n_eal_args,
	    .eal_args = cfg->dataplane.dpdk.eal_args,
	    .n_lcores = cfg->dataplane.dpdk.n_lcores,
	    .lcores = cfg->dataplane.dpdk.lcores,
	    .n_ports = cfg->dataplane.dpdk.n_ports,
	    .ports = cfg->dataplane.dpdk.ports,
	    .queues = (uint16_t)cfg->dataplane.dpdk.queues,
	    .burst = (uint16_t)cfg->dataplane.dpdk.burst,
	    .poll_sleep_us = cfg->dataplane.dpdk.poll_sleep_us,
	    .tap_prefix = cfg->dataplane.dpdk.tap_prefix,
	    .max_entries = cfg->dataplane.table_size,
	    .n_addrs = cfg->n_listen,
	    .addrs = cfg->listen,
	    .port = cfg->port,
	};
	int err;

	err = zone_and_pass(cfg, zone, &o.zone_len, pass, &o.pass_len);
	if (err)
		return err;
	o.zone = zone;
	o.pass = o.pass_len ? pass : NULL;
	err = ndc_dpdk_open(&o, &ag->dp);
	if (err == -EOPNOTSUPP)
		ndc_err("dataplane.mode dpdk: this build has no DPDK support (build with meson "
			"-Ddpdk=enabled, libdpdk-dev installed)");
	else if (err)
		ndc_err("dataplane.mode dpdk: cannot start: %s", strerror(-err));
	if (!err)
		err = ndc_publisher_new(&ndc_dpdk_answer_table, ag->dp, &ag->pub);
	if (err)
		return err;
	/* Before the forwarder starts, as for the fast path: its first answer is published. */
	ndc_cache_set_hook(ag->cache, ndc_publisher_cache_hook, ag->pub);
	err = ndc_dpdk_start(ag->dp);
	if (err)
		ndc_err("dataplane.mode dpdk: cannot launch the lcores: %s", strerror(-err));
	return err;
}

static void dpdk_stop(struct agent *ag)
{
	uint64_t c[NDC_FP_COUNTER_MAX];

	if (!ag->dp)
		return;
	ndc_publisher_free(ag->pub);
	ag->pub = NULL;
	ndc_dpdk_counters(ag->dp, c);
	ndc_info("dpdk: %lu answered, %lu NODATA, %lu NXDOMAIN; passed: %lu miss, %lu expired, "
		 "%lu EDNS, %lu size, %lu format, %lu fragment",
		 (unsigned long)c[NDC_FP_HIT], (unsigned long)c[NDC_FP_NODATA],
		 (unsigned long)c[NDC_FP_NXDOMAIN], (unsigned long)c[NDC_FP_PASS_MISS],
		 (unsigned long)c[NDC_FP_PASS_EXPIRED], (unsigned long)c[NDC_FP_PASS_EDNS],
		 (unsigned long)c[NDC_FP_PASS_SIZE], (unsigned long)c[NDC_FP_PASS_FORMAT],
		 (unsigned long)c[NDC_FP_PASS_FRAG]);
	ndc_dpdk_close(ag->dp);
	ag->dp = NULL;
}

/* ---------------------------------------------------------------------------------------------
 * Metrics.
 */
#define C(b, name, help, v) ndc_metric_u64(b, "ndcache_" name, "counter", help, NULL, v)
#define G(b, name, help, v) ndc_metric_u64(b, "ndcache_" name, "gauge", help, NULL, v)

/*
 * Where the memory goes: the resident set (what a DaemonSet's memory limit is checked against)
 * and the record table's share. Not malloc's own statistics: mallinfo2 walks every arena's free
 * lists under its lock, which stalled the table's writers for tens of milliseconds per scrape at
 * 100,000 Services (tests/bench/bench_store has the heap's breakdown).
 */
static void memory_metrics(struct agent *ag, struct ndc_metrics_buf *b)
{
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
	G(b, "records_bytes", "Bytes of the built record table (incremental overlays not counted).",
	  atomic_load(&ag->records_bytes));
	G(b, "records_overlay_names",
	  "Names changed since the table was last built whole (folded in at 1/32 of the table).",
	  atomic_load(&ag->overlay_names));
}

static void dpdk_metric(void *arg, const char *name, const char *type, const char *help,
			const char *labels, uint64_t v)
{
	ndc_metric_u64(arg, name, type, help, labels, v);
}

/*
 * Whether the fast path runs and what did not fit its table. The gauge is always present, so that
 * an alert can tell "not loaded" from "not scraped".
 */
static void fastpath_state_metrics(struct agent *ag, struct ndc_metrics_buf *b)
{
	static const char *const modes[] = {"tc", "xdp", "socket", "dpdk"};
	unsigned m = ag->cfg->dataplane.mode;
	char l[32];

	snprintf(l, sizeof(l), "mode=\"%s\"",
		 m < sizeof(modes) / sizeof(modes[0]) ? modes[m] : "unknown");
	ndc_metric_u64(b, "ndcache_fastpath_loaded", "gauge",
		       "1 while the BPF fast path is loaded (it attaches to matching links as they "
		       "appear); 0 when dataplane.mode is tc or xdp and it could not be loaded, or "
		       "for the other modes.",
		       l, ag->fp != NULL);
	if (ag->pub) {
		struct ndc_publisher_stats ps;

		ndc_publisher_stats(ag->pub, &ps);
		C(b, "fastpath_table_full_total",
		  "Answers that did not fit the kernel's table (full, or a colliding key held by "
		  "another name): user space answers them. Raise dataplane.table_size.",
		  ps.table_full);
		C(b, "fastpath_too_big_total",
		  "Answers too big or with too long a name for the kernel's table (user space "
		  "answers).",
		  ps.too_big);
	}
}

/* Issue 22: prefetch, and each client's share of the upstream (reasons misses were refused). */
static void upstream_share_metrics(struct agent *ag, struct ndc_metrics_buf *b,
				   const struct ndc_forwarder_stats *fs)
{
	if (ag->limiter)
		ndc_ratelimit_metrics(ag->limiter, dpdk_metric, b);
	ndc_metric_u64(b, "ndcache_upstream_limited_total", "counter", NDC_LIMITED_HELP,
		       "reason=\"max_pending\"", fs->rejected);
	if (ag->prefetch)
		ndc_prefetch_metrics(ag->prefetch, dpdk_metric, b);
}

static void metrics(void *arg, struct ndc_metrics_buf *b)
{
	struct agent *ag = arg;
	struct ndc_resolver_stats rs;
	struct ndc_cache_stats cs;
	struct ndc_forwarder_stats fs;
	struct ndc_server_stats ss;

	ndc_resolver_stats(ag->res, &rs);
	C(b, "queries_total", "Queries that reached the socket path.", rs.queries);
	ndc_metric_u64(b, "ndcache_answers_total", "counter", "Socket-path answers by source.",
		       "source=\"cluster\"", rs.local);
	ndc_metric_u64(b, "ndcache_answers_total", "counter", "Socket-path answers by source.",
		       "source=\"cache\"", rs.cache_hits);
	ndc_metric_u64(b, "ndcache_answers_total", "counter", "Socket-path answers by source.",
		       "source=\"upstream\"", rs.forwarded);
	C(b, "servfail_total", "SERVFAIL answers.", rs.servfail);
	C(b, "malformed_total", "Queries answered FORMERR, NOTIMP, REFUSED or BADVERS.", rs.errors);
	C(b, "dropped_total", "Datagrams dropped (responses, runts).", rs.dropped);
	if (ag->srv) {
		ndc_server_stats(ag->srv, &ss);
		C(b, "udp_queries_total", "UDP queries received.", ss.udp_queries);
		C(b, "tcp_queries_total", "TCP queries received.", ss.tcp_queries);
		C(b, "tcp_connections_total", "TCP connections accepted.", ss.tcp_conns);
	}
	ndc_cache_stats(ag->cache, &cs);
	C(b, "cache_hits_total", "Cache hits.", cs.hits);
	C(b, "cache_misses_total", "Cache misses.", cs.misses);
	C(b, "cache_stale_total", "Expired answers served stale (RFC 8767).", cs.stale_hits);
	C(b, "cache_evictions_total", "Cache entries evicted.", cs.evictions);
	G(b, "cache_entries", "Answers in the cache.", cs.entries);
	G(b, "cache_bytes", "Bytes of answers in the cache.", cs.bytes);
	ndc_forwarder_stats(ag->fwd, &fs);
	C(b, "upstream_queries_total", "Queries sent upstream.", fs.queries);
	C(b, "upstream_coalesced_total", "Misses that joined a query in flight.", fs.coalesced);
	C(b, "upstream_timeouts_total", "Upstream attempts that timed out.", fs.timeouts);
	C(b, "upstream_tcp_retries_total", "Truncated answers retried over TCP.", fs.tcp_retries);
	C(b, "upstream_tcp_fallbacks_total",
	  "UDP attempts that timed out, asked again over TCP (forward.protocol prefer_udp).",
	  fs.tcp_fallbacks);
	C(b, "upstream_rejected_total",
	  "Misses answered SERVFAIL at once: forward.max_pending or the in-flight limit reached.",
	  fs.rejected);
	G(b, "upstream_pending", "Client queries waiting for an upstream answer.", fs.pending);
	ndc_agent_upstream_metrics(&fs, b);
	ndc_agent_failopen_metrics(ag->cfg, ag->fp != NULL, b);
	upstream_share_metrics(ag, b, &fs);
	if (ag->pub) {
		struct ndc_publisher_stats ps;

		ndc_publisher_stats(ag->pub, &ps);
		G(b, "kernel_expiry_tracked",
		  "Cached upstream answers in the kernel table whose expiry is tracked (at most "
		  "cache entries).",
		  ps.tracked);
	}
	C(b, "upstream_responses_total", "Upstream answers accepted.", fs.responses);
	C(b, "upstream_errors_total",
	  "Upstream attempts that failed other than by timeout (refused, broken TCP, SERVFAIL, "
	  "REFUSED, FORMERR, NOTIMP).",
	  fs.errors);
	C(b, "upstream_stale_served_total",
	  "Queries every upstream failed, answered from an expired cache entry (RFC 8767).",
	  fs.stale_served);
	G(b, "records", "RRsets in the record table.", atomic_load(&ag->rrsets));
	G(b, "synced", "1 once the record table has been built from a full sync.",
	  atomic_load(&ag->synced));
	G(b, "handed_over",
	  "1 once a successor agent has taken over (this one exits on SIGTERM "
	  "leaving the fast path to it).",
	  ndc_handover_taken(ag->ho));
	memory_metrics(ag, b);
	fastpath_state_metrics(ag, b);
	if (ag->fp) {
		static const char *const why[] = {"miss",   "expired",	"edns",	 "size",
						  "format", "fragment", "config"};
		struct ndc_fastpath_table_stats ts;
		uint64_t c[NDC_FP_COUNTER_MAX];
		char l[64];

		if (!ndc_fastpath_table_stats(ag->fp, &ts)) {
			G(b, "fastpath_table_entries", "Entries in the kernel's answer table.",
			  ts.keys);
			G(b, "fastpath_table_capacity",
			  "Entries the kernel's answer table may hold (dataplane.table_size, a "
			  "cap).",
			  ts.max_keys);
			G(b, "fastpath_table_slots",
			  "Slots of the kernel's answer table now: it grows and shrinks with its "
			  "entries.",
			  ts.slots);
			G(b, "fastpath_table_bytes",
			  "Kernel memory of the answer table now, charged to the pod; mapped into "
			  "the "
			  "agent, so part of its resident memory too.",
			  ts.bytes);
			G(b, "fastpath_table_needed_bytes",
			  "What the answer table's entries need: a slot each and their big "
			  "answers.",
			  ts.needed);
			C(b, "fastpath_table_rebuilds_total",
			  "Times the answer table was rebuilt to grow or shrink.", ts.rebuilds);
		}
		if (!ndc_fastpath_counters(ag->fp, c)) {
			const char *help = "Queries answered in the kernel.";

			ndc_metric_u64(b, "ndcache_kernel_answers_total", "counter", help,
				       "kind=\"answer\"", c[NDC_FP_HIT]);
			ndc_metric_u64(b, "ndcache_kernel_answers_total", "counter", help,
				       "kind=\"nodata\"", c[NDC_FP_NODATA]);
			ndc_metric_u64(b, "ndcache_kernel_answers_total", "counter", help,
				       "kind=\"nxdomain\"", c[NDC_FP_NXDOMAIN]);
			for (int i = NDC_FP_PASS_MISS; i <= NDC_FP_PASS_CONFIG; i++) {
				snprintf(l, sizeof(l), "reason=\"%s\"", why[i - NDC_FP_PASS_MISS]);
				ndc_metric_u64(b, "ndcache_kernel_passed_total", "counter",
					       "Queries the kernel passed to user space.", l, c[i]);
			}
			/* after the others: its counter came later (ABI 4) */
			ndc_metric_u64(b, "ndcache_kernel_passed_total", "counter",
				       "Queries the kernel passed to user space.",
				       "reason=\"busy\"", c[NDC_FP_PASS_BUSY]);
			help =
			    "Packets the kernel sent on to the upstream (or back from it) while no "
			    "agent listened (dataplane.failopen).";
			ndc_metric_u64(b, "ndcache_kernel_failopen_total", "counter", help,
				       "kind=\"udp\"", c[NDC_FP_FWD_UDP]);
			ndc_metric_u64(b, "ndcache_kernel_failopen_total", "counter", help,
				       "kind=\"tcp\"", c[NDC_FP_FWD_TCP]);
			ndc_metric_u64(b, "ndcache_kernel_failopen_total", "counter", help,
				       "kind=\"reply\"", c[NDC_FP_FWD_REPLY]);
		}
	}
	if (ag->dp)
		ndc_dpdk_metrics(ag->dp, dpdk_metric, b);
	ndc_reload_metrics(ag->reload, b);
	pthread_mutex_lock(&ag->src_lock);
	if (ag->src) {
		struct ndc_k8s_store_stats ks;
		struct ndc_k8s_watch_stats ws;

		ndc_k8s_store_stats(ag->src->store, &ks);
		G(b, "k8s_objects", "Objects in the store.", ks.objects);
		C(b, "k8s_events_total", "Watch events applied.", ks.events);
		C(b, "k8s_rejected_total", "Objects rejected (last good state kept).", ks.rejected);
		C(b, "records_rebuilds_total",
		  "Record tables built whole (first sync, relists, overlay folds).", ks.rebuilds);
		C(b, "records_patches_total", "Incremental record table versions served.",
		  ks.patches);
		ndc_metric_histogram(b, "ndcache_programming_latency_us",
				     "Each object change, from its arrival until answers come from "
				     "it, microseconds.",
				     ndc_k8s_lat_bounds_us, ks.lat_hist, NDC_K8S_LAT_BUCKETS,
				     ks.lat_sum_us);
		G(b, "programming_latency_last_us",
		  "Slowest change of the last table handed over, microseconds.",
		  ks.last_latency_us);
		G(b, "programming_latency_max_us",
		  "Largest programming latency seen, microseconds.", ks.max_latency_us);
		G(b, "records_build_last_us",
		  "Duration of the last record table build, microseconds.", ks.last_build_us);
		ndc_k8s_watch_stats(ag->src->watch, &ws);
		C(b, "k8s_relists_total", "Relists after 410 Gone.", ws.relists_410);
		C(b, "k8s_reconnects_total", "Watch reconnects.", ws.reconnects);
		C(b, "k8s_auth_failures_total", "401 answers from the API server.",
		  ws.auth_failures);
		/* Issue 25: how each kind's whole state came, what the API server paid for it. */
		static const char sync_help[] =
		    "Whole states of a kind received: streamed over the watch, listed from the "
		    "watch cache, or a consistent paginated list.";
		ndc_metric_u64(b, "ndcache_k8s_syncs_total", "counter", sync_help, "how=\"stream\"",
			       ws.syncs_stream);
		ndc_metric_u64(b, "ndcache_k8s_syncs_total", "counter", sync_help, "how=\"cache\"",
			       ws.syncs_cache);
		ndc_metric_u64(b, "ndcache_k8s_syncs_total", "counter", sync_help,
			       "how=\"consistent\"", ws.syncs_consistent);
		C(b, "k8s_sync_fallbacks_total",
		  "A cheaper way to get the state refused by the API server, or a relist at our "
		  "resourceVersion it no longer knew.",
		  ws.fallbacks);
	}
	pthread_mutex_unlock(&ag->src_lock);
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

static void source_free(struct source *src)
{
	if (!src)
		return;
	ndc_k8s_watch_stop(src->watch);
	ndc_k8s_store_free(src->store);
	for (size_t i = 0; i < src->n_namespaces; i++)
		free(src->namespaces[i]);
	free(src->namespaces);
	for (size_t i = 0; i < src->n_mc_zones; i++)
		free(src->mc_zones[i]);
	free(src->mc_zones);
	free(src);
}

/* A copy of the n strings v into *ret (counted in *ret_n as they are made). */
static int strv_copy(char *const *v, size_t n, char ***ret, size_t *ret_n)
{
	*ret = calloc(n + 1, sizeof(char *));
	if (!*ret)
		return -ENOMEM;
	for (*ret_n = 0; *ret_n < n; (*ret_n)++)
		if (!((*ret)[*ret_n] = strdup(v[*ret_n])))
			return -ENOMEM;
	return 0;
}

/*
 * A source whose records options are cfg's records.* (NULL: the agent's own), the rest (zone,
 * name server addresses, SOA serial) the agent's: a store, not yet watched (source_watch).
 */
static int source_new(struct agent *ag, const struct ndc_config *cfg, struct source **ret)
{
	struct source *src = calloc(1, sizeof(*src));
	uint32_t kinds =
	    1u << NDC_K8S_NAMESPACES | 1u << NDC_K8S_SERVICES | 1u << NDC_K8S_ENDPOINTSLICES;
	int err;

	if (!src)
		return -ENOMEM;
	src->ag = ag;
	src->ropts = ag->ropts;
	if (cfg) {
		src->ropts.ttl = cfg->records.ttl;
		src->ropts.pods = cfg->records.pods;
		src->ropts.endpoint_pod_names = cfg->records.endpoint_pod_names;
		src->ropts.ignore_empty_service = cfg->records.ignore_empty_service;
		if (strv_copy(cfg->records.namespaces, cfg->records.n_namespaces, &src->namespaces,
			      &src->n_namespaces) ||
		    strv_copy(cfg->records.multicluster_zones, cfg->records.n_multicluster_zones,
			      &src->mc_zones, &src->n_mc_zones)) {
			source_free(src);
			return -ENOMEM;
		}
		src->ropts.n_namespaces = src->n_namespaces;
		src->ropts.namespaces = src->namespaces;
		src->ropts.n_mc_zones = src->n_mc_zones;
		src->ropts.mc_zones = src->mc_zones;
	}
	/* Pods are only needed to verify pod names (CoreDNS "pods verified"). */
	if (src->ropts.pods == NDC_PODS_VERIFIED)
		kinds |= 1u << NDC_K8S_PODS;
	/* MCS ServiceImports only for multicluster zones (a cluster without the CRD is fine). */
	if (src->ropts.n_mc_zones)
		kinds |= 1u << NDC_K8S_SERVICEIMPORTS;
	err = ndc_k8s_store_new(&src->ropts, kinds, on_records, src, &src->store);
	if (err) {
		source_free(src);
		return err;
	}
	*ret = src;
	return 0;
}

static int source_watch(struct source *src, const struct ndc_k8s_conn *conn)
{
	struct ndc_k8s_watch_opts wo = {
	    .kinds =
		1u << NDC_K8S_NAMESPACES | 1u << NDC_K8S_SERVICES | 1u << NDC_K8S_ENDPOINTSLICES,
	    .page_size = 500,
	    .timeout_s = 300,
	    .backoff_min_ms = 250,
	    .backoff_max_ms = 30000,
	};

	if (src->ropts.pods == NDC_PODS_VERIFIED)
		wo.kinds |= 1u << NDC_K8S_PODS;
	if (src->ropts.n_mc_zones)
		wo.kinds |= 1u << NDC_K8S_SERVICEIMPORTS;
	return ndc_k8s_watch_start(conn, &wo, &ndc_k8s_store_ops, src->store, &src->watch);
}

static int watch_start(struct agent *ag, const struct ndc_k8s_conn *conn)
{
	struct source *src = NULL;
	int err;

	err = source_new(ag, NULL, &src);
	if (!err) {
		pthread_mutex_lock(&ag->src_lock);
		ag->src = src;
		pthread_mutex_unlock(&ag->src_lock);
		err = source_watch(src, conn);
	}
	if (err)
		ndc_err("kubernetes source: %s", strerror(-err));
	else
		ndc_info("kubernetes source: syncing from %s; forwarding cluster names until then",
			 conn->server);
	return err;
}

/*
 * The reload's records.* hook (reload.h): the table rebuilt with cfg's records options. A
 * snapshot (or the embedded sample) is read and built again; a Kubernetes source is listed and
 * watched again by a new source, which replaces the running one at its first table. The old
 * table answers until then.
 */
static int rebuild_records(void *arg, const struct ndc_config *cfg)
{
	struct agent *ag = arg;
	struct ndc_records_opts ro = ag->ropts;
	struct ndc_records *rec = NULL;
	struct source *old, *next = NULL;
	struct timespec until;
	int err;

	if (!ag->conn) {
		if (!ag->opts || !ag->opts->load_records)
			return -EOPNOTSUPP;
		ro.ttl = cfg->records.ttl;
		ro.pods = cfg->records.pods;
		ro.endpoint_pod_names = cfg->records.endpoint_pod_names;
		ro.ignore_empty_service = cfg->records.ignore_empty_service;
		ro.n_namespaces = cfg->records.n_namespaces;
		ro.namespaces = cfg->records.namespaces;
		ro.n_mc_zones = cfg->records.n_multicluster_zones;
		ro.mc_zones = cfg->records.multicluster_zones;
		err = ag->opts->load_records(ag->cfg, &ro, &rec);
		if (err)
			return err;
		pthread_mutex_lock(&ag->source_lock);
		install(ag, rec, NULL);
		pthread_mutex_unlock(&ag->source_lock);
		return 0;
	}
	err = source_new(ag, cfg, &next);
	if (err)
		return err;
	pthread_mutex_lock(&ag->source_lock);
	old = ag->src;
	ag->next_src = next;
	pthread_mutex_unlock(&ag->source_lock);
	err = source_watch(next, ag->conn);
	ndc_info("records: listing the cluster again for the new records options; the current "
		 "table answers until the new one is built");
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += NDC_RESYNC_TIMEOUT_S;
	pthread_mutex_lock(&ag->source_lock);
	while (!err && ag->next_src == next && !ag->stopping &&
	       pthread_cond_timedwait(&ag->source_cond, &ag->source_lock, &until) != ETIMEDOUT)
		;
	if (!err && ag->src == next) {
		pthread_mutex_unlock(&ag->source_lock);
		source_free(old);
		return 0;
	}
	ag->next_src = NULL;
	pthread_mutex_unlock(&ag->source_lock);
	source_free(next);
	return err ? err : ag->stopping ? -ECANCELED : -ETIMEDOUT;
}

/* ---------------------------------------------------------------------------------------------
 * Upgrades: taking over from a running agent, handing over to the next (handover.h).
 */
/*
 * Attaches the fast path once the table is filled (synced) and the sockets are read, so that what
 * it replaces (an earlier agent's program, still answering from its own table) is never replaced
 * by less; then tells the predecessor, which leaves the fast path to us from then on.
 */
static void maybe_attach(struct agent *ag)
{
	int err;

	pthread_mutex_lock(&ag->attach_lock);
	if (!ag->serving || !atomic_load(&ag->synced) || ag->attached)
		goto out;
	if (ag->fp) {
		err = ndc_fastpath_attach(ag->fp);
		if (err < 0)
			ndc_warn("fast path: cannot attach (%s); answering from sockets only",
				 strerror(-err));
	}
	ag->attached = true;
	if (ag->pred && !ag->taken_over) {
		err = ndc_handover_takeover(ag->pred, 2000);
		if (err < 0)
			ndc_warn("handover: the previous agent did not confirm the takeover: %s",
				 strerror(-err));
		else
			ndc_info("handover: took over from the previous agent");
		ag->taken_over = true;
	}
out:
	pthread_mutex_unlock(&ag->attach_lock);
}

static size_t handover_fds(void *arg, int *out, size_t cap)
{
	struct agent *ag = arg;
	size_t n = ag->srv ? ndc_server_fds(ag->srv, out, cap) : 0;

	if (ag->http && n < cap)
		out[n++] = ndc_http_fd(ag->http);
	return n;
}

/* On the handover thread: a successor took over (its programs replace ours), or died. */
static void handover_taken(void *arg, bool taken)
{
	struct agent *ag = arg;

	pthread_mutex_lock(&ag->attach_lock);
	if (taken) {
		ndc_fastpath_quiet(ag->fp);
	} else if (ag->fp && ndc_fastpath_attach(ag->fp) == 0) {
		ndc_info("fast path: attached again");
	}
	pthread_mutex_unlock(&ag->attach_lock);
}

static void handover_name(const struct ndc_config *cfg, char *out, size_t cap)
{
	char a[INET6_ADDRSTRLEN] = "none";

	if (cfg->n_listen)
		inet_ntop(cfg->listen[0].family, cfg->listen[0].addr, a, sizeof(a));
	ndc_handover_name(a, cfg->port, out, cap);
}

/*
 * Joins a running agent with the same listen address and port, if any: its sockets are ours too
 * from here on.
 */
static void handover_join(struct agent *ag, int **ret_fds, size_t *ret_n)
{
	char name[128];
	int err;

	handover_name(ag->cfg, name, sizeof(name));
	err = ndc_handover_join(name, 2000, &ag->pred, ret_fds, ret_n);
	if (err == -ENOENT)
		return;
	if (err < 0)
		ndc_warn("handover: an agent runs at %s but the handover failed (%s); binding "
			 "anew",
			 name, strerror(-err));
	else
		ndc_info("handover: joined the running agent: %zu sockets handed over", *ret_n);
}

/*
 * A successor took over: stop reading (what is queued stays in the sockets it shares), answer
 * what is in flight upstream, leave the fast path and its pins to it.
 */
static void hand_over(struct agent *ag)
{
	/* a query detained upstream is answered within the timeout of every upstream in turn */
	uint64_t wait_ms = (uint64_t)ag->cfg->forward.timeout_ms * (ag->cfg->n_upstream + 1) + 500;
	struct timespec t0, t;
	size_t left;

	ndc_info("handover: a successor serves; stopping without detaching");
	ndc_server_quiesce(ag->srv);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while ((left = ndc_server_outstanding(ag->srv)) > 0) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((uint64_t)((t.tv_sec - t0.tv_sec) * 1000 +
			       (t.tv_nsec - t0.tv_nsec) / 1000000) >= wait_ms) {
			ndc_warn("handover: %zu queries still upstream after %lu ms", left,
				 (unsigned long)wait_ms);
			break;
		}
		nanosleep(&(struct timespec){.tv_nsec = 10 * 1000000}, NULL);
	}
}

/* ndc_prefetch_hits_fn over the publisher's kernel hit counters. */
static int kernel_hits(void *arg, const uint8_t *lname, size_t nlen, uint16_t qtype,
		       uint32_t *ret_hits)
{
	return ndc_publisher_kernel_hits(arg, lname, nlen, qtype, ret_hits);
}

/*
 * Issue 22: cache.prefetch (once the forwarder runs) and forward.per_client (the resolver asks
 * it). Both stay for the agent's life: a reload changes their options, and prefetch: false only
 * stops new prefetch points.
 */
static int upstream_share_start(struct agent *ag)
{
	const struct ndc_config *cfg = ag->cfg;
	struct ndc_prefetch_opts po = {
	    .min_hits = cfg->cache.prefetch.min_hits,
	    .before_pct = cfg->cache.prefetch.on ? cfg->cache.prefetch.before_pct : 0,
	};
	struct ndc_ratelimit_opts lo = {
	    .qps = cfg->forward.per_client.qps,
	    .burst = cfg->forward.per_client.burst,
	};
	int err = ndc_ratelimit_new(&lo, &ag->limiter);

	if (err < 0) {
		ndc_err("forward.per_client: %s", strerror(-err));
		return err;
	}
	err = ndc_prefetch_new(&po, ag->cache, ag->fwd, &ag->prefetch);
	if (err < 0) {
		ndc_err("cache.prefetch: %s", strerror(-err));
		return err;
	}
	if (ag->pub)
		ndc_prefetch_set_kernel_hits(ag->prefetch, kernel_hits, ag->pub);
	return 0;
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
	    .rebuild = rebuild_records,
	    .arg = ag,
	};

	return ndc_reload_start(&ro, &t, &ag->reload);
}

int ndc_agent_run(const struct ndc_config *cfg, struct ndc_records *rec,
		  const struct ndc_k8s_conn *conn, const struct ndc_agent_opts *opts)
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
	    .max_pending = cfg->forward.max_pending,
	    .protocol = (enum ndc_fwd_protocol)cfg->forward.protocol,
	    .policy = (enum ndc_fwd_policy)cfg->forward.policy,
	};
	struct ndc_server_opts sopts = {
	    .n_addrs = cfg->n_listen,
	    .addrs = cfg->listen,
	    .port = cfg->port,
	    .workers = cfg->workers,
	    .tcp_idle_ms = cfg->tcp_idle_ms,
	    .tcp_max_conns = cfg->tcp_max_conns,
	};
	struct ndc_handover_ops hops = {.fds = handover_fds, .taken = handover_taken};
	struct agent ag = {.cfg = cfg, .opts = opts, .conn = conn};
	pthread_condattr_t ca;
	int *inherit = NULL;
	size_t n_inherit = 0;
	char name[128];
	sigset_t set;
	int sig, ret;

	ndc_records_opts_from_config(&ag.ropts, cfg);
	/* One SOA serial for the agent's life: rebuilt bases keep negative answers byte-equal. */
	ag.ropts.serial = (uint32_t)time(NULL);
	pthread_mutex_init(&ag.install_lock, NULL);
	pthread_mutex_init(&ag.attach_lock, NULL);
	pthread_mutex_init(&ag.source_lock, NULL);
	pthread_mutex_init(&ag.src_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* rebuild_records waits on it */
	pthread_cond_init(&ag.source_cond, &ca);
	pthread_condattr_destroy(&ca);
	hops.arg = &ag;
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
	 * Loaded and filled here, attached only in maybe_attach: until then whatever program is
	 * attached (an earlier agent's) keeps answering.
	 */
	/* A running agent's sockets (an upgrade): shared from here on, nothing is rebound. */
	handover_join(&ag, &inherit, &n_inherit);
	if (cfg->dataplane.mode == NDC_DP_TC || cfg->dataplane.mode == NDC_DP_XDP) {
		fastpath_start(&ag);
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
		ret = dpdk_start(&ag);
		if (ret < 0)
			goto out;
	}
	ret = ndc_forwarder_new(&fopts, ag.cache, &ag.fwd);
	if (ret < 0) {
		ndc_err("forwarder: %s", strerror(-ret));
		goto out;
	}
	ret = upstream_share_start(&ag);
	if (ret < 0)
		goto out;
	ret = ndc_resolver_new(NULL, ag.cache, ag.fwd, &ag.res);
	if (ret < 0)
		goto out;
	ndc_resolver_set_limiter(ag.res, ag.limiter);
	/* Before the sockets: stub domains and query logging apply from the first query. */
	ret = reload_start(&ag);
	if (ret < 0)
		goto out;
	ret = ndc_http_start_inherit(cfg->http.listen, inherit, n_inherit, metrics, &ag, &ag.http);
	if (ret < 0) {
		ndc_err("http.listen %s: %s", cfg->http.listen, strerror(-ret));
		goto out;
	}
	if (rec) {
		pthread_mutex_lock(&ag.source_lock);
		install(&ag, rec, NULL);
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
	maybe_attach(&ag);
	if (conn) {
		ret = watch_start(&ag, conn);
		if (ret < 0)
			goto out;
	}
	handover_name(cfg, name, sizeof(name));
	if (ndc_handover_serve(name, &hops, &ag.ho) < 0)
		ndc_warn("handover: cannot listen at %s: upgrades of this agent will rebind", name);
	log_summary(cfg);
	/* Everything a reload may replace runs now: changes of the file are applied from here. */
	ndc_reload_arm(ag.reload);

	while (sigwait(&set, &sig) == 0 && sig == SIGHUP)
		ndc_reload_request(ag.reload);
	ndc_info("%s: shutting down", strsignal(sig));
	ret = 0;
	ag.handed_over = ndc_handover_taken(ag.ho);
	if (ag.handed_over)
		hand_over(&ag);

out:
	for (size_t i = 0; i < n_inherit; i++)
		close(inherit[i]);
	free(inherit);
	/* /metrics reads every component: it goes first. */
	ndc_http_stop(ag.http);
	/* A reload waiting for a new source gives up; no reload changes anything after this. */
	pthread_mutex_lock(&ag.source_lock);
	ag.stopping = true;
	pthread_cond_broadcast(&ag.source_cond);
	pthread_mutex_unlock(&ag.source_lock);
	ndc_reload_stop(ag.reload);
	/* No new tables, then no new answers upstream, then no more queries. */
	source_free(ag.src);
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
	fastpath_stop(&ag);
	dpdk_stop(&ag);
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
