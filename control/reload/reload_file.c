// SPDX-License-Identifier: MIT
/*
 * The config file: read whole, compared key by key (live keys with what is in effect, restart
 * keys with what the agent started with) and applied all or nothing.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ndc/log.h>

#include "internal.h"

/* ---- what changed ------------------------------------------------------------------------- */

static bool same_strv(char *const *a, size_t na, char *const *b, size_t nb)
{
	if (na != nb)
		return false;
	for (size_t i = 0; i < na; i++)
		if (strcmp(a[i], b[i]))
			return false;
	return true;
}

static bool same_u16(const uint16_t *a, size_t na, const uint16_t *b, size_t nb)
{
	return na == nb && (na == 0 || memcmp(a, b, na * sizeof(*a)) == 0);
}

/*
 * Every key of struct ndc_config is either applied live (below: records, upstream, stub_domains,
 * cache, forward, log) or compared here. A field added to the struct without a decision here
 * fails this check at build time: say which it is, then update the size.
 */
_Static_assert(sizeof(struct ndc_config) == 1504,
	       "a new config key: decide in control/reload/reload_file.c whether it changes live "
	       "or needs a restart");

/* Restart keys of a that differ from r (the running configuration), as names into list. */
static void restart_keys(const struct ndc_config *a, const struct ndc_config *r, char *list)
{
	if (strcmp(a->cluster_domain, r->cluster_domain))
		ndc_reload_list_add(list, "cluster_domain");
	if (a->n_listen != r->n_listen ||
	    memcmp(a->listen, r->listen, a->n_listen * sizeof(a->listen[0])))
		ndc_reload_list_add(list, "listen");
	if (a->port != r->port)
		ndc_reload_list_add(list, "port");
	if (a->source.kind != r->source.kind ||
	    !ndc_reload_same_str(a->source.snapshot, r->source.snapshot) ||
	    !ndc_reload_same_str(a->source.kubeconfig, r->source.kubeconfig) ||
	    a->source.kube_dns_configmap != r->source.kube_dns_configmap)
		ndc_reload_list_add(list, "source");
	if (a->dataplane.mode != r->dataplane.mode)
		ndc_reload_list_add(list, "dataplane.mode");
	if (!same_strv(a->dataplane.interfaces, a->dataplane.n_interfaces, r->dataplane.interfaces,
		       r->dataplane.n_interfaces))
		ndc_reload_list_add(list, "dataplane.interfaces");
	if (a->dataplane.table_size != r->dataplane.table_size)
		ndc_reload_list_add(list, "dataplane.table_size");
	if (a->dataplane.redirect_peer != r->dataplane.redirect_peer)
		ndc_reload_list_add(list, "dataplane.redirect_peer");
	if (a->dataplane.failopen != r->dataplane.failopen)
		ndc_reload_list_add(list, "dataplane.failopen");
	if (!ndc_reload_same_str(a->dataplane.pin_dir, r->dataplane.pin_dir))
		ndc_reload_list_add(list, "dataplane.pin_dir");
	/* The EAL, its ports, queues and lcores are set up once per process. */
	if (!same_strv(a->dataplane.dpdk.eal_args, a->dataplane.dpdk.n_eal_args,
		       r->dataplane.dpdk.eal_args, r->dataplane.dpdk.n_eal_args) ||
	    !same_u16(a->dataplane.dpdk.ports, a->dataplane.dpdk.n_ports, r->dataplane.dpdk.ports,
		      r->dataplane.dpdk.n_ports) ||
	    !same_u16(a->dataplane.dpdk.lcores, a->dataplane.dpdk.n_lcores,
		      r->dataplane.dpdk.lcores, r->dataplane.dpdk.n_lcores) ||
	    a->dataplane.dpdk.queues != r->dataplane.dpdk.queues ||
	    a->dataplane.dpdk.burst != r->dataplane.dpdk.burst ||
	    a->dataplane.dpdk.poll_sleep_us != r->dataplane.dpdk.poll_sleep_us ||
	    !ndc_reload_same_str(a->dataplane.dpdk.tap_prefix, r->dataplane.dpdk.tap_prefix))
		ndc_reload_list_add(list, "dataplane.dpdk");
	if (strcmp(a->http.listen, r->http.listen))
		ndc_reload_list_add(list, "http.listen");
	if (a->workers != r->workers)
		ndc_reload_list_add(list, "workers");
	if (a->tcp_idle_ms != r->tcp_idle_ms)
		ndc_reload_list_add(list, "tcp_idle_ms");
	if (a->tcp_max_conns != r->tcp_max_conns)
		ndc_reload_list_add(list, "tcp_max_conns");
}

static void records_keys(const struct ndc_config *a, const struct ndc_config *b, char *list)
{
	if (a->records.ttl != b->records.ttl)
		ndc_reload_list_add(list, "records.ttl");
	if (a->records.pods != b->records.pods)
		ndc_reload_list_add(list, "records.pods");
	if (a->records.endpoint_pod_names != b->records.endpoint_pod_names)
		ndc_reload_list_add(list, "records.endpoint_pod_names");
	if (a->records.ignore_empty_service != b->records.ignore_empty_service)
		ndc_reload_list_add(list, "records.ignore_empty_service");
	if (!same_strv(a->records.namespaces, a->records.n_namespaces, b->records.namespaces,
		       b->records.n_namespaces))
		ndc_reload_list_add(list, "records.namespaces");
	if (!same_strv(a->records.multicluster_zones, a->records.n_multicluster_zones,
		       b->records.multicluster_zones, b->records.n_multicluster_zones))
		ndc_reload_list_add(list, "records.multicluster_zones");
}

static bool same_stubs(const struct ndc_config *a, const struct ndc_config *b)
{
	if (a->n_stub_domains != b->n_stub_domains)
		return false;
	for (size_t i = 0; i < a->n_stub_domains; i++) {
		const struct ndc_stub_domain *x = &a->stub_domains[i], *y = &b->stub_domains[i];

		if (strcmp(x->zone, y->zone) || x->n_servers != y->n_servers ||
		    memcmp(x->servers, y->servers, x->n_servers * sizeof(x->servers[0])))
			return false;
	}
	return true;
}

static bool same_cache(const struct ndc_config *a, const struct ndc_config *b)
{
	return a->cache.max_entries == b->cache.max_entries &&
	       a->cache.max_bytes == b->cache.max_bytes && a->cache.max_ttl == b->cache.max_ttl &&
	       a->cache.neg_max_ttl == b->cache.neg_max_ttl &&
	       a->cache.stale_max == b->cache.stale_max;
}

/*
 * cache.prefetch and forward.per_client: live, for what is asked from then on (an entry already
 * cached keeps the prefetch point it was given; a client keeps the tokens it has, capped at the
 * new burst). Values were checked by the parser, so neither can fail here.
 */
static void upstream_share_keys(struct ndc_reload *rl, const struct ndc_config *a,
				const struct ndc_config *b, char *changed)
{
	const typeof(a->cache.prefetch) *pa = &a->cache.prefetch, *pb = &b->cache.prefetch;
	const typeof(a->forward.per_client) *ca = &a->forward.per_client,
					    *cb = &b->forward.per_client;

	if (rl->t.prefetch && (pa->on != pb->on || pa->min_hits != pb->min_hits ||
			       pa->before_pct != pb->before_pct)) {
		struct ndc_prefetch_opts o;

		ndc_prefetch_opts_from_config(&o, a);
		if (ndc_prefetch_configure(rl->t.prefetch, &o) == 0)
			ndc_reload_list_add(changed, "cache.prefetch");
	}
	if (rl->t.limiter && (ca->qps != cb->qps || (ca->qps && ca->burst != cb->burst))) {
		struct ndc_ratelimit_opts o;

		ndc_ratelimit_opts_from_config(&o, a);
		if (ndc_ratelimit_configure(rl->t.limiter, &o) == 0)
			ndc_reload_list_add(changed, "forward.per_client");
	}
}

/* ---- the config file ------------------------------------------------------------------------ */

/* Reads the file whole (at most RELOAD_FILE_MAX). 0 or -errno. */
int ndc_reload_read_file(const char *path, char **ret, size_t *ret_len, struct stat *ret_st)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	char *buf = NULL;
	size_t len = 0;
	int err = 0;

	if (fd < 0)
		return -errno;
	if (fstat(fd, ret_st) < 0) {
		err = -errno;
		goto out;
	}
	buf = malloc(RELOAD_FILE_MAX + 1);
	if (!buf) {
		err = -ENOMEM;
		goto out;
	}
	for (;;) {
		ssize_t n = read(fd, buf + len, RELOAD_FILE_MAX + 1 - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = -errno;
			goto out;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len > RELOAD_FILE_MAX) {
			err = -EFBIG;
			goto out;
		}
	}
	buf[len] = '\0';
out:
	close(fd);
	if (err) {
		free(buf);
		return err;
	}
	*ret = buf;
	*ret_len = len;
	return 0;
}

static void refuse(struct ndc_reload *rl, const char *why)
{
	atomic_fetch_add(&rl->failures, 1);
	atomic_store(&rl->last_ok, false);
	ndc_err("config: reload of %s refused, the running configuration stays: %s", rl->path, why);
}

/* Reads, checks and applies the file. force: even when it reads as before (SIGHUP). */
void ndc_reload_file(struct ndc_reload *rl, bool force)
{
	const struct ndc_config *cur = ndc_reload_current(rl);
	char err[768], changed[LIST_MAX] = "", restart[LIST_MAX] = "", why[1024];
	struct ndc_config *cfg = NULL;
	const char *inzone;
	struct routes rt;
	struct stat st;
	char *text;
	size_t len;
	int r, level;

	r = ndc_reload_read_file(rl->path, &text, &len, &st);
	if (r < 0) {
		/* The same missing file is reported once, not on every event near it. */
		if (force || !rl->have_last || rl->last_text) {
			snprintf(why, sizeof(why), "%s: %s", rl->path, strerror(-r));
			refuse(rl, why);
		}
		free(rl->last_text);
		rl->last_text = NULL;
		rl->have_last = true;
		return;
	}
	rl->last_st = st;
	if (!force && rl->have_last && rl->last_text && rl->last_len == len &&
	    !memcmp(rl->last_text, text, len)) {
		free(text);
		return;
	}
	free(rl->last_text);
	rl->last_text = text;
	rl->last_len = len;
	rl->have_last = true;

	cfg = calloc(1, sizeof(*cfg));
	if (!cfg) {
		refuse(rl, "out of memory");
		return;
	}
	r = ndc_config_parse(text, len, cfg, err, sizeof(err));
	if (r == 0 && rl->kubeconfig) {
		free(cfg->source.snapshot);
		free(cfg->source.kubeconfig);
		cfg->source.snapshot = NULL;
		cfg->source.kubeconfig = strdup(rl->kubeconfig);
		cfg->source.kind = NDC_SOURCE_KUBERNETES;
		if (!cfg->source.kubeconfig)
			r = -ENOMEM;
	}
	if (r < 0) {
		snprintf(why, sizeof(why), "%s: %s", rl->path,
			 r == -ENOMEM ? "out of memory" : err);
		goto refused;
	}
	inzone = ndc_reload_stub_in_zone(cfg->stub_domains, cfg->n_stub_domains,
					 rl->running->cluster_domain);
	if (inzone) {
		snprintf(why, sizeof(why),
			 "%s: stub_domains.%s: inside cluster_domain %s, which ndcache answers "
			 "itself",
			 rl->path, inzone, rl->running->cluster_domain);
		goto refused;
	}

	restart_keys(cfg, rl->running, restart);
	/* The kernel's pass-through suffix for computed pod names is set when it loads. */
	if (rl->t.fastpath && cfg->records.pods == NDC_PODS_INSECURE &&
	    rl->running->records.pods != NDC_PODS_INSECURE) {
		ndc_reload_list_add(restart, "records.pods (insecure, with the fast path)");
		cfg->records.pods = cur->records.pods;
	}
	records_keys(cfg, cur, changed);

	ndc_reload_routes_make(cfg, rl->running->cluster_domain, &rl->kd_applied, false, &rt);
	r = ndc_forwarder_check(&rt.o);
	if (r < 0) {
		snprintf(why, sizeof(why), "%s: upstream and stub_domains: %s", rl->path,
			 ndc_reload_routes_error(r));
		goto refused;
	}
	/* The table first: if it cannot be built, nothing else has changed. */
	if (changed[0] && rl->t.rebuild) {
		r = rl->t.rebuild(rl->t.arg, cfg);
		if (r < 0) {
			snprintf(why, sizeof(why),
				 "%s: %s: the new record table could not be built "
				 "(%s)",
				 rl->path, changed, strerror(-r));
			goto refused;
		}
	}
	r = ndc_reload_routes_apply(rl, &rt);
	if (r < 0) {
		/* Checked above: only memory can fail here. The table is the new one already. */
		ndc_err("config: %s: upstream and stub_domains not applied: %s", rl->path,
			strerror(-r));
	} else if (r > 0) {
		if (cfg->n_upstream != cur->n_upstream ||
		    memcmp(cfg->upstream, cur->upstream,
			   cfg->n_upstream * sizeof(cfg->upstream[0])))
			ndc_reload_list_add(changed, "upstream");
		if (!same_stubs(cfg, cur))
			ndc_reload_list_add(changed, "stub_domains");
		if (cfg->forward.timeout_ms != cur->forward.timeout_ms ||
		    cfg->forward.max_pending != cur->forward.max_pending ||
		    cfg->forward.protocol != cur->forward.protocol ||
		    cfg->forward.policy != cur->forward.policy)
			ndc_reload_list_add(changed, "forward");
		if (rl->t.fastpath && cfg->dataplane.failopen && cfg->n_upstream &&
		    (!cur->n_upstream ||
		     memcmp(&cfg->upstream[0], &cur->upstream[0], sizeof(cfg->upstream[0])))) {
			char a[64];

			ndc_reload_addr_text(&rl->running->upstream[0], a, sizeof(a));
			ndc_info(
			    "config: dataplane.failopen: with no agent running the kernel keeps "
			    "forwarding to %s, the first upstream at start, until a restart",
			    rl->running->n_upstream ? a : "nothing");
		}
	}
	if (rl->t.fastpath) {
		char lo[160];

		if (ndc_reload_failopen_loopback(rl->running, lo, sizeof(lo)))
			ndc_warn(
			    "config: dataplane.failopen: the upstream the kernel fails open to, "
			    "%s, is on loopback, where the kernel does not route a pod's "
			    "query: with no agent running those queries are lost",
			    lo);
		else if (ndc_reload_failopen_loopback(cfg, lo, sizeof(lo)))
			ndc_warn("config: dataplane.failopen: upstream %s is on loopback: after a "
				 "restart the kernel would fail open to it, which does nothing",
				 lo);
	}
	if (!same_cache(cfg, cur)) {
		struct ndc_cache_opts co;

		ndc_cache_opts_from_config(&co, cfg);
		if (ndc_cache_set_limits(rl->t.cache, &co) == 0)
			ndc_reload_list_add(changed, "cache");
	}
	upstream_share_keys(rl, cfg, cur, changed);
	/* Set after the lines below: a quieter level must not hide what this reload did. */
	level = cfg->log.level != cur->log.level && !rl->log_level_fixed ? cfg->log.level : -1;
	if (level >= 0)
		ndc_reload_list_add(changed, "log.level");
	if (cfg->log.queries != cur->log.queries ||
	    (cfg->log.queries && cfg->log.sample_ppm != cur->log.sample_ppm)) {
		ndc_resolver_set_query_log(rl->t.res, cfg->log.queries ? cfg->log.sample_ppm : 0);
		ndc_reload_list_add(changed, "log.queries");
	}
	ndc_config_free(rl->file);
	free(rl->file);
	rl->file = cfg;
	atomic_fetch_add(&rl->reloads, 1);
	atomic_store(&rl->last_ok, true);
	atomic_store(&rl->restart_needed, restart[0] != '\0');
	ndc_info("config: reloaded %s: %s%s", rl->path, changed[0] ? "applied " : "nothing changed",
		 changed);
	if (restart[0])
		ndc_warn("config: %s: %s differ from the running configuration and need a restart; "
			 "they keep their running values",
			 rl->path, restart);
	if (level >= 0)
		ndc_log_set_level(level);
	return;
refused:
	ndc_config_free(cfg);
	free(cfg);
	refuse(rl, why);
}
