// SPDX-License-Identifier: MIT
/*
 * The record table the agent serves: where it comes from (a snapshot, the embedded sample, or a
 * Kubernetes source: a store and the watch that fills it) and where it goes (the resolver, then
 * the fast path's table); a records.* reload's new source; the table's /metrics section.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ndc/log.h>

#include "metrics/metrics.h"
#include "internal.h"
#include "publisher.h"
#include "query/query.h"
#include "store/store.h"

/* A records.* reload with a Kubernetes source lists everything again: this long at most. */
#define NDC_RESYNC_TIMEOUT_S 120

/* ---------------------------------------------------------------------------------------------
 * The record table.
 */
/* Installs a new table everywhere it is read: the socket path, then the fast path. */
void ndc_agent_install(struct agent *ag, struct ndc_records *rec,
		       const struct ndc_records_patch *changed)
{
	const struct ndc_records *old;
	int err = 0;

	pthread_mutex_lock(&ag->table.install_lock);
	old = ndc_resolver_set_records(ag->query.res, rec);
	ag->table.rec = rec;
	if (ag->dp.pub)
		err = changed && old ? ndc_publisher_update_names(ag->dp.pub, old, rec, changed)
				     : ndc_publisher_update_records(ag->dp.pub, old, rec);
	if (err)
		ndc_warn("fast path: republishing failed; misses go to user space");
	ndc_records_free((struct ndc_records *)old);
	atomic_store(&ag->table.rrsets, ndc_records_count(rec));
	atomic_store(&ag->table.records_bytes, ndc_records_bytes(rec));
	atomic_store(&ag->table.overlay_names, ndc_records_overlay_size(rec));
	pthread_mutex_unlock(&ag->table.install_lock);
	if (!atomic_exchange(&ag->table.synced, true)) {
		ndc_info("records: %zu RRsets of %s: ready", ndc_records_count(rec),
			 ag->cfg->cluster_domain);
		/* and /ready, once attached (and, in an upgrade, taken over) */
		ndc_agent_maybe_attach(ag);
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

	pthread_mutex_lock(&ag->table.source_lock);
	if (src == ag->table.next_src) {
		pthread_mutex_lock(&ag->table.src_lock);
		ag->table.src = src;
		ag->table.next_src = NULL;
		pthread_mutex_unlock(&ag->table.src_lock);
		ndc_agent_install(ag, rec, NULL);
		pthread_cond_broadcast(&ag->table.source_cond);
	} else if (src == ag->table.src) {
		ndc_agent_install(ag, rec, changed);
	} else {
		ndc_records_free(rec);
	}
	pthread_mutex_unlock(&ag->table.source_lock);
}

void ndc_agent_source_free(struct source *src)
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
	src->ropts = ag->table.ropts;
	if (cfg) {
		ndc_records_opts_apply(&src->ropts, cfg);
		/* cfg goes with the reload: the source keeps its own copy of the names */
		if (strv_copy(cfg->records.namespaces, cfg->records.n_namespaces, &src->namespaces,
			      &src->n_namespaces) ||
		    strv_copy(cfg->records.multicluster_zones, cfg->records.n_multicluster_zones,
			      &src->mc_zones, &src->n_mc_zones)) {
			ndc_agent_source_free(src);
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
		ndc_agent_source_free(src);
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

int ndc_agent_watch_start(struct agent *ag, const struct ndc_k8s_conn *conn)
{
	struct source *src = NULL;
	int err;

	err = source_new(ag, NULL, &src);
	if (!err) {
		pthread_mutex_lock(&ag->table.src_lock);
		ag->table.src = src;
		pthread_mutex_unlock(&ag->table.src_lock);
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
int ndc_agent_rebuild_records(void *arg, const struct ndc_config *cfg)
{
	struct agent *ag = arg;
	struct ndc_records_opts ro = ag->table.ropts;
	struct ndc_records *rec = NULL;
	struct source *old, *next = NULL;
	struct timespec until;
	int err;

	if (!ag->conn) {
		if (!ag->opts || !ag->opts->load_records)
			return -EOPNOTSUPP;
		ndc_records_opts_apply(&ro, cfg);
		err = ag->opts->load_records(ag->cfg, &ro, &rec);
		if (err)
			return err;
		pthread_mutex_lock(&ag->table.source_lock);
		ndc_agent_install(ag, rec, NULL);
		pthread_mutex_unlock(&ag->table.source_lock);
		return 0;
	}
	err = source_new(ag, cfg, &next);
	if (err)
		return err;
	pthread_mutex_lock(&ag->table.source_lock);
	old = ag->table.src;
	ag->table.next_src = next;
	pthread_mutex_unlock(&ag->table.source_lock);
	err = source_watch(next, ag->conn);
	ndc_info("records: listing the cluster again for the new records options; the current "
		 "table answers until the new one is built");
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += NDC_RESYNC_TIMEOUT_S;
	pthread_mutex_lock(&ag->table.source_lock);
	while (!err && ag->table.next_src == next && !ag->table.stopping &&
	       pthread_cond_timedwait(&ag->table.source_cond, &ag->table.source_lock, &until) !=
		   ETIMEDOUT)
		;
	if (!err && ag->table.src == next) {
		pthread_mutex_unlock(&ag->table.source_lock);
		ndc_agent_source_free(old);
		return 0;
	}
	ag->table.next_src = NULL;
	pthread_mutex_unlock(&ag->table.source_lock);
	ndc_agent_source_free(next);
	return err ? err : ag->table.stopping ? -ECANCELED : -ETIMEDOUT;
}

/* ---------------------------------------------------------------------------------------------
 * /metrics: the table served, and the Kubernetes source that fills it (its store's and watch's
 * own sections).
 */
void ndc_agent_records_metrics(void *arg, struct ndc_metrics_buf *b)
{
	struct agent *ag = arg;

	ndc_metric_u64(b, "ndcache_records", "gauge", "RRsets in the record table.", NULL,
		       atomic_load(&ag->table.rrsets));
	ndc_metric_u64(b, "ndcache_synced", "gauge",
		       "1 once the record table has been built from a full sync.", NULL,
		       atomic_load(&ag->table.synced));
	ndc_metric_u64(b, "ndcache_records_bytes", "gauge",
		       "Bytes of the built record table (incremental overlays not counted).", NULL,
		       atomic_load(&ag->table.records_bytes));
	ndc_metric_u64(
	    b, "ndcache_records_overlay_names", "gauge",
	    "Names changed since the table was last built whole (folded in at 1/32 of the table).",
	    NULL, atomic_load(&ag->table.overlay_names));
	pthread_mutex_lock(&ag->table.src_lock);
	if (ag->table.src) {
		ndc_k8s_store_metrics(ag->table.src->store, b);
		ndc_k8s_watch_metrics(ag->table.src->watch, b);
	}
	pthread_mutex_unlock(&ag->table.src_lock);
}
