// SPDX-License-Identifier: MIT
/*
 * The config turned into each subsystem's options, in one place: the agent at start, main for a
 * snapshot's records, the reload for what it applies again. The subsystems know nothing of the
 * config; their options point into cfg, which outlives them where they are kept.
 */
#include <string.h>

#include "config/config_opts.h"
#include "query/query.h"
#include "records/records.h"

void ndc_records_opts_from_config(struct ndc_records_opts *opts, const struct ndc_config *cfg)
{
	memset(opts, 0, sizeof(*opts));
	opts->zone = cfg->cluster_domain;
	opts->n_ns_addrs = cfg->n_listen;
	opts->ns_addrs = cfg->listen;
	ndc_records_opts_apply(opts, cfg);
}

void ndc_records_opts_apply(struct ndc_records_opts *opts, const struct ndc_config *cfg)
{
	opts->ttl = cfg->records.ttl;
	opts->pods = cfg->records.pods;
	opts->endpoint_pod_names = cfg->records.endpoint_pod_names;
	opts->ignore_empty_service = cfg->records.ignore_empty_service;
	opts->n_namespaces = cfg->records.n_namespaces;
	opts->namespaces = cfg->records.namespaces;
	opts->n_mc_zones = cfg->records.n_multicluster_zones;
	opts->mc_zones = cfg->records.multicluster_zones;
}

void ndc_cache_opts_from_config(struct ndc_cache_opts *opts, const struct ndc_config *cfg)
{
	*opts = (struct ndc_cache_opts){
	    .max_entries = cfg->cache.max_entries,
	    .max_bytes = cfg->cache.max_bytes,
	    .max_ttl = cfg->cache.max_ttl,
	    .neg_max_ttl = cfg->cache.neg_max_ttl,
	    .stale_max = cfg->cache.stale_max,
	};
}

void ndc_forwarder_opts_from_config(struct ndc_forwarder_opts *opts, const struct ndc_config *cfg)
{
	*opts = (struct ndc_forwarder_opts){
	    .n_upstreams = cfg->n_upstream,
	    .upstreams = cfg->upstream,
	    .timeout_ms = cfg->forward.timeout_ms,
	    .max_pending = cfg->forward.max_pending,
	    /* config.h keeps them in the order of query.h's enums */
	    .protocol = (enum ndc_fwd_protocol)cfg->forward.protocol,
	    .policy = (enum ndc_fwd_policy)cfg->forward.policy,
	};
}

void ndc_prefetch_opts_from_config(struct ndc_prefetch_opts *opts, const struct ndc_config *cfg)
{
	*opts = (struct ndc_prefetch_opts){
	    .min_hits = cfg->cache.prefetch.min_hits,
	    .before_pct = cfg->cache.prefetch.on ? cfg->cache.prefetch.before_pct : 0,
	};
}

void ndc_ratelimit_opts_from_config(struct ndc_ratelimit_opts *opts, const struct ndc_config *cfg)
{
	*opts = (struct ndc_ratelimit_opts){
	    .qps = cfg->forward.per_client.qps,
	    .burst = cfg->forward.per_client.burst,
	};
}
