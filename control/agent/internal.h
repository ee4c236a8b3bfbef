/* SPDX-License-Identifier: MIT */
/*
 * Private to the agent (control/agent/): the running agent's state, shared by its modules.
 *   agent.c      start-up order, the signal loop, shutdown; the wiring of /metrics
 *   source.c     the record table: where it comes from, where it goes; a records.* reload
 *   dataplane.c  the fast path and the DPDK dataplane started and stopped; their figures
 *   upgrade.c    handover from and to another agent; attaching the fast path
 *   upstream.c   the upstream side beyond the forwarder: /ready, fail-open, upstream shares
 * Calls run one way: agent.c calls the others, source.c calls upgrade.c (attach once synced).
 */
#ifndef NDC_AGENT_INTERNAL_H
#define NDC_AGENT_INTERNAL_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent.h"
#include "config/config_opts.h"

struct agent;
struct ndc_metrics_buf;

/* How a wait at SIGTERM for a successor's takeover ended. */
enum ndc_upgrade_wait {
	NDC_UPGRADE_WAIT_TAKEOVER,
	NDC_UPGRADE_WAIT_GONE,
	NDC_UPGRADE_WAIT_TIMEOUT,
	NDC_UPGRADE_WAIT_NONE, /* no successor joined within upgrade.join_wait_ms */
	NDC_UPGRADE_WAIT_MAX,
};

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
	bool closing;		     /* shutting down: no sockets for a successor any more */
	/* SIGTERM before a joined successor's takeover (ndc_agent_upgrade_wait) */
	_Atomic uint64_t upgrade_waits[NDC_UPGRADE_WAIT_MAX];
	atomic_bool upgrade_waiting;
};

/* ---- source.c ---- */

/* Installs a new table everywhere it is read (ownership passes); changed: what changed since
 * the table it replaces (NULL: everything). Under source_lock. */
void ndc_agent_install(struct agent *ag, struct ndc_records *rec,
		       const struct ndc_records_patch *changed);
/* The Kubernetes source: listed, then watched. 0 or -errno, logged. */
int ndc_agent_watch_start(struct agent *ag, const struct ndc_k8s_conn *conn);
void ndc_agent_source_free(struct source *src);
/* The reload's records.* hook (reload.h's rebuild), arg the agent. */
int ndc_agent_rebuild_records(void *arg, const struct ndc_config *cfg);
/* ndcache_records, _synced, _records_bytes, _records_overlay_names and the source's sections:
 * an ndc_http_metrics_fn over the agent. */
void ndc_agent_records_metrics(void *arg, struct ndc_metrics_buf *b);

/* ---- dataplane.c ---- */

/* Loads the fast path (not attached: ndc_agent_maybe_attach); failing is logged, not fatal. */
void ndc_agent_fastpath_start(struct agent *ag);
void ndc_agent_fastpath_stop(struct agent *ag);
/* mode dpdk: failing is fatal, 0 or -errno, logged. */
int ndc_agent_dpdk_start(struct agent *ag);
void ndc_agent_dpdk_stop(struct agent *ag);
/* The socket server's, the fast path's and DPDK's samples: an ndc_http_metrics_fn over the
 * agent. */
void ndc_agent_dataplane_metrics(void *arg, struct ndc_metrics_buf *b);

/* ---- upgrade.c ---- */

/* Attaches the fast path once synced and serving, then tells the predecessor. Any thread. */
void ndc_agent_maybe_attach(struct agent *ag);
/* Listens for a successor (a failure is logged: upgrades then rebind). */
void ndc_agent_handover_serve(struct agent *ag);
/* At shutdown, a successor having taken over: stop reading, finish what is upstream. */
void ndc_agent_hand_over(struct agent *ag);
/*
 * At SIGTERM with a successor joined but not taken over: serves on until it takes over (true),
 * goes away, upgrade.wait_s passes or signals (SIGTERM, SIGINT) come again (false). Logged,
 * counted.
 */
bool ndc_agent_upgrade_wait(struct agent *ag, const sigset_t *signals);
/*
 * At SIGTERM with no successor joined: serves on until one joins (true: then
 * ndc_agent_upgrade_wait), upgrade.join_wait_ms passes, or a second SIGTERM or SIGINT comes.
 * Logged, counted.
 */
bool ndc_agent_upgrade_join_wait(struct agent *ag, const sigset_t *signals);
/* ndcache_upgrade_sigterm_waits_total{outcome}, ndcache_upgrade_sigterm_waiting. */
void ndc_agent_upgrade_metrics(struct agent *ag, struct ndc_metrics_buf *b);

/* ---- upstream.c ---- */

/* The unready check of /ready (ndc_http_unready_fn), fwd the forwarder: every upstream of the
 * default route loops. */
bool ndc_agent_upstream_unready(void *fwd, char *why, size_t len);
/* At start: the warning when dataplane.failopen goes to an upstream on loopback (fastpath: the
 * fast path is loaded, so fail-open would be in effect). */
void ndc_agent_failopen_check(const struct ndc_config *cfg, bool fastpath);
/* ndcache_failopen_loopback_upstream: an ndc_http_metrics_fn over the agent. */
void ndc_agent_failopen_metrics(void *arg, struct ndc_metrics_buf *b);
/* cache.prefetch and forward.per_client, once the forwarder runs. 0 or -errno, logged. */
int ndc_agent_upstream_share_start(struct agent *ag);

#endif
