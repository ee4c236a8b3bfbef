/* SPDX-License-Identifier: MIT */
/*
 * Private to the agent (control/agent/): the running agent's state, shared by its modules.
 *   agent.c      the start-up steps and their undo, the signal loop; the wiring of /metrics
 *   source.c     the record table: where it comes from, where it goes; a records.* reload
 *   dataplane.c  the dataplane's ops (socket only, tc/xdp fast path, DPDK); their figures
 *   upgrade.c    handover from and to another agent; attaching the fast path
 *   forwarding.c the upstream side beyond the forwarder: /ready, fail-open, upstream shares
 *   observe.c    who asks what: pod identity, per-client counts, dnstap, /debug/top
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
#include "pods/pods.h"

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

/* The dataplane's operations (dataplane.c), chosen once at start by dataplane.mode. */
struct ndc_agent_dataplane_ops;
struct ndc_fp_client;
struct ndc_fp_sample;

/*
 * The running agent, grouped by the start-up step that owns each part (agent.c's table of steps:
 * each group is made by its step and freed by that step's undo). A lock sits beside what it
 * guards.
 */
struct agent {
	/* What ndc_agent_run was given: read-only while it runs. */
	const struct ndc_config *cfg;
	const struct ndc_agent_opts *opts;
	const struct ndc_k8s_conn *conn;
	struct ndc_agent_join *join; /* until step "join" takes it */

	/* Step "state": the signals the main thread waits for (blocked in every thread). */
	sigset_t signals;

	/*
	 * Steps "pods" and "dnstap" (observe.c): who asks what. Read by the query path (the
	 * resolver's observer, the forwarder's tap) until every step's stop has run.
	 */
	struct {
		char node[NDC_POD_NAME_MAX + 1]; /* env NODE_NAME; "" without */
		struct ndc_pods *pods;		 /* NULL: no identity (clients by address) */
		struct ndc_k8s_watch *pods_watch;
		struct ndc_top *top;	/* log.clients; NULL: off */
		struct ndc_dnstap *tap; /* log.dnstap; NULL: off */
		/* step "kernel samples": the thread that reads the kernel's sampled answers */
		pthread_t samples;
		bool samples_run;
		atomic_bool samples_stop;
	} obs;

	/* Steps "cache" to "resolver" (query/): what answers a query on the socket path. */
	struct {
		struct ndc_cache *cache;
		struct ndc_forwarder *fwd;
		struct ndc_prefetch *prefetch; /* cache.prefetch */
		struct ndc_ratelimit *limiter; /* forward.per_client */
		struct ndc_resolver *res;
	} query;

	/* Step "dataplane" (dataplane.c): what answers besides the sockets, and what fills it. */
	struct {
		const struct ndc_agent_dataplane_ops *ops; /* never NULL once the step ran */
		/* ops' handle; NULL: none runs (socket mode, or the fast path did not load) */
		void *h;
		struct ndc_publisher *pub; /* fills h's answer table from the cache and records */
	} dp;

	/* Steps "reload", "http", "server": the threads that take requests from outside. */
	struct ndc_reload *reload;
	struct ndc_http *http; /* NULL again once stopped (under up.attach_lock) */
	struct ndc_socket *srv;

	/* Steps "records" and "watch" (source.c): the record table and where it comes from. */
	struct {
		struct ndc_records_opts ropts;
		/* the snapshot's (or the embedded) table until step "records" installs it */
		struct ndc_records *first;
		/*
		 * The Kubernetes source (NULL: snapshot or embedded) and, during a records.*
		 * reload, the one that replaces it. source_lock orders their tables; src_lock
		 * guards src for /metrics.
		 */
		pthread_mutex_t source_lock;
		pthread_cond_t source_cond;
		struct source *next_src; /* under source_lock */
		bool stopping; /* under source_lock: a reload waiting for a new source gives up */
		pthread_mutex_t src_lock;
		struct source *src;
		pthread_mutex_t install_lock;  /* one writer of the record table at a time */
		const struct ndc_records *rec; /* what the resolver serves, under install_lock */
		_Atomic uint64_t rrsets;
		_Atomic uint64_t records_bytes; /* of the base table the served version shares */
		_Atomic uint64_t overlay_names; /* changed since that base was built */
		_Atomic bool synced;
	} table;

	/*
	 * Steps "join", "server" and "handover" (upgrade.c, handover.h): the predecessor we joined
	 * and its sockets, our own listener for a successor, the dataplane's attach state.
	 */
	struct {
		struct ndc_handover_peer *pred;
		int *inherit; /* the predecessor's sockets, until the server owns them */
		size_t n_inherit;
		struct ndc_handover *ho;
		pthread_mutex_t attach_lock; /* serving ... closing; http */
		bool serving;		     /* the server runs (upgrading: held until reading) */
		bool reading;		     /* it reads the DNS sockets */
		bool pred_gone;		     /* the predecessor's connection closed */
		bool attached;		     /* our programs are in (or there is no fast path) */
		bool taken_over;	     /* we told the predecessor */
		bool handed_over;	     /* at shutdown: a successor had taken over from us */
		bool closing;		     /* shutting down: no successor gets sockets */
		/* SIGTERM before a joined successor's takeover (ndc_agent_upgrade_wait) */
		_Atomic uint64_t waits[NDC_UPGRADE_WAIT_MAX];
		atomic_bool waiting;
	} up;
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
 * an ndc_metrics_fn over the agent. */
void ndc_agent_records_metrics(void *arg, struct ndc_metrics_buf *b);

/* ---- dataplane.c ---- */

/*
 * Step "dataplane": chooses the dataplane's operations by dataplane.mode and opens it with the
 * publisher that fills its table (not answering yet: ndc_agent_dataplane_attach). A fast path
 * that cannot load is logged and left out; DPDK that cannot start, or a successor that would
 * serve without the fast path its predecessor has, is fatal: 0 or -errno, logged.
 */
int ndc_agent_dataplane_open(struct agent *ag);
/* The BPF fast path (tc, xdp) is loaded. */
bool ndc_agent_fastpath_loaded(const struct agent *ag);
/* Starts answering (the fast path's programs attached): 0, -errno; 1: nothing to attach. */
int ndc_agent_dataplane_attach(struct agent *ag);
/* A successor's dataplane took over: ours stops answering (a no-op where it does not apply). */
void ndc_agent_dataplane_quiesce(struct agent *ag);
/*
 * The dataplane's own view of its clients (the kernel's per-client counts) and its sampled
 * answers: as ndc_fastpath_clients and ndc_fastpath_samples_poll; -EOPNOTSUPP where the running
 * dataplane has none (sockets only, DPDK, the fast path not loaded).
 */
int ndc_agent_dataplane_clients(struct agent *ag,
				int (*cb)(const struct ndc_fp_client *c, void *arg), void *arg);
int ndc_agent_dataplane_samples_poll(struct agent *ag, int timeout_ms,
				     void (*cb)(const struct ndc_fp_sample *s, void *arg),
				     void *arg);
/*
 * Unhooks the publisher, logs the dataplane's counters and closes it (handed over: leaves the
 * successor its part). Again: nothing.
 */
void ndc_agent_dataplane_close(struct agent *ag);
/* The socket server's, the fast path's and DPDK's samples: an ndc_metrics_fn over the
 * agent. */
void ndc_agent_dataplane_metrics(void *arg, struct ndc_metrics_buf *b);

/* ---- upgrade.c ---- */

/* Attaches the fast path once synced and serving, then tells the predecessor. Any thread. */
void ndc_agent_maybe_attach(struct agent *ag);
/*
 * Step "server" in an upgrade: the server holds the predecessor's sockets unread (the predecessor
 * reads them); they are read from our takeover, or from the moment the predecessor goes (a watch
 * on its connection). A watch that cannot start reads them at once. Under nothing.
 */
void ndc_agent_hold_start(struct agent *ag);
/* The watch stopped (before the server stops reading). Under nothing. */
void ndc_agent_hold_stop(struct agent *ag);
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

/* ---- forwarding.c ---- */

/* The unready check of /ready (ndc_http_unready_fn), fwd the forwarder: every upstream of the
 * default route loops. */
bool ndc_agent_upstream_unready(void *fwd, char *why, size_t len);
/* At start: the warning when dataplane.failopen goes to an upstream on loopback (fastpath: the
 * fast path is loaded, so fail-open would be in effect). */
void ndc_agent_failopen_check(const struct ndc_config *cfg, bool fastpath);
/* ndcache_failopen_loopback_upstream: an ndc_metrics_fn over the agent. */
void ndc_agent_failopen_metrics(void *arg, struct ndc_metrics_buf *b);
/* cache.prefetch and forward.per_client, once the forwarder runs. 0 or -errno, logged. */
int ndc_agent_upstream_share_start(struct agent *ag);

/* ---- observe.c ---- */

/* Step "pods": with a Kubernetes source and env NODE_NAME, the watch of this node's pods. */
int ndc_agent_pods_start(struct agent *ag);
void ndc_agent_pods_stop(struct agent *ag);
void ndc_agent_pods_free(struct agent *ag);
/* Step "dnstap": the per-client table (log.clients) and the dnstap writer (log.dnstap). */
int ndc_agent_dnstap_start(struct agent *ag);
void ndc_agent_dnstap_free(struct agent *ag);
/* Step "kernel samples" (observe.c): the kernel's sampled answers to dnstap and the sketches. */
int ndc_agent_samples_start(struct agent *ag);
void ndc_agent_samples_stop(struct agent *ag);
/* Wiring once the forwarder, the resolver, the HTTP server exist (no-ops when all is off). */
void ndc_agent_observe_forwarder(struct agent *ag);
void ndc_agent_observe_resolver(struct agent *ag);
void ndc_agent_observe_http(struct agent *ag);
/* ndcache_pods_*, ndcache_clients_*, ndcache_namespace_*, ndcache_dnstap_*: over the agent. */
void ndc_agent_observe_metrics(void *arg, struct ndc_metrics_buf *b);
/*
 * One sampled kernel answer (ndc_fastpath_samples_poll's struct ndc_fp_sample:
 * client, client_port, msg, len): its name into the sketches, a dnstap CLIENT_RESPONSE (the
 * kernel sampled it already, at log.dnstap.kernel_sample). Any one thread.
 */
struct ndc_ip;
void ndc_agent_kernel_sample(struct agent *ag, const struct ndc_ip *client, uint16_t port,
			     const uint8_t *msg, size_t len);

#endif
