/* SPDX-License-Identifier: MIT */
/*
 * Configuration changes without a restart. One thread owns them:
 *   - the config file: its directory is watched with inotify (a ConfigMap volume is updated by
 *     swapping the `..data` symlink, which no watch on the file itself would see), with a stat
 *     check every few seconds as a backstop, and SIGHUP (ndc_reload_request) reads it again;
 *   - with a Kubernetes source, the kube-dns ConfigMap (kube-system/kube-dns): stubDomains and
 *     upstreamNameservers, applied as NodeLocal DNSCache applies them.
 * A new file is parsed whole first; a broken one changes nothing (the running configuration
 * stays, the reason is logged, ndcache_config_reload_failures_total counts it and
 * ndcache_config_last_reload_success drops to 0; /ready is not touched). A good one is applied
 * key by key, without dropping a query:
 *   live:     upstream, stub_domains, records.*, cache.* (cache.prefetch too), forward.*
 *             (forward.per_client too), log.*
 *   restart:  cluster_domain, listen, port, source, dataplane.*, http.listen, workers,
 *             tcp_idle_ms, tcp_max_conns; also records.pods: insecure while the fast path is
 *             loaded (its pass-through suffix is set at load)
 * Restart keys that differ from the running configuration are logged by name and keep their
 * running values (ndcache_config_restart_needed is 1 until a restart).
 */
#ifndef NDC_RELOAD_H
#define NDC_RELOAD_H

#include <stdbool.h>

#include "config/config.h"
#include "k8s/k8s.h"
#include "metrics/metrics.h"
#include "query/query.h"
#include "records/records.h"

struct ndc_reload;

/* What the live keys change. Everything here is the caller's and outlives the reload. */
struct ndc_reload_targets {
	struct ndc_cache *cache;
	struct ndc_forwarder *fwd;
	struct ndc_resolver *res;
	struct ndc_prefetch *prefetch; /* cache.prefetch; NULL: not reloaded */
	struct ndc_ratelimit *limiter; /* forward.per_client; NULL: not reloaded */
	bool fastpath;		       /* the fast path is loaded */
	/*
	 * records.* changed: build the table with cfg's records options and serve it. Blocks until
	 * the new table serves (the old one serving until then) or it failed: 0 or -errno, logged
	 * by the callee. cfg is valid during the call only.
	 */
	int (*rebuild)(void *arg, const struct ndc_config *cfg);
	void *arg;
};

struct ndc_reload_opts {
	const char *path; /* the config file; NULL: none (SIGHUP says so) */
	const char *text; /* what running was parsed from (NULL: read it now) */
	size_t len;
	const struct ndc_config *running; /* what the agent started with; outlives the reload */
	const char *kubeconfig;		  /* --kubeconfig: replaces source in every file read */
	bool log_level_fixed;		  /* --log-level: log.level is not applied */
	/* A Kubernetes source: the connection for the kube-dns ConfigMap (copied). */
	const struct ndc_k8s_conn *conn;
};

/*
 * Applies what the running configuration says beyond the agent's start (stub domains, query
 * logging), starts the thread, the file watch and, with a Kubernetes source and
 * source.kubernetes.kube_dns_configmap, the ConfigMap's watch. A watch that cannot be set up is
 * logged and left out (SIGHUP still reloads). 0, or -errno (nothing runs then).
 */
int ndc_reload_start(const struct ndc_reload_opts *opts, const struct ndc_reload_targets *t,
		     struct ndc_reload **ret);

/*
 * The agent has started everything a reload may change (the Kubernetes source included): until
 * then changes of the file are noted, not applied. A file that differs from what the running
 * configuration was parsed from is applied now.
 */
void ndc_reload_arm(struct ndc_reload *rl);

/* Reads the config file again, soon, on the reload thread (SIGHUP). Any thread. */
void ndc_reload_request(struct ndc_reload *rl);

/*
 * Whether dataplane.failopen would send to an upstream on loopback (127.0.0.0/8, ::1): the
 * kernel does not route a packet rewritten on a pod's link there, so fail-open does nothing for
 * it. True with the addresses ("127.0.0.53:53") in buf. Checks the config only (failopen, the
 * first upstream of each family), not whether a fast path runs.
 */
bool ndc_reload_failopen_loopback(const struct ndc_config *cfg, char *buf, size_t len);

/* ndcache_config_* and ndcache_kube_dns_configmap_* metrics. */
void ndc_reload_metrics(struct ndc_reload *rl, struct ndc_metrics_buf *b);

/* Stops the watches and the thread (a reload under way finishes first). NULL is fine. */
void ndc_reload_stop(struct ndc_reload *rl);

#endif
