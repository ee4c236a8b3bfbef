// SPDX-License-Identifier: MIT
/*
 * Configuration changes without a restart (reload.h). One thread applies every change, from the
 * config file and from the kube-dns ConfigMap, so two never interleave; the ConfigMap's watch
 * thread only parses what it receives and hands over the result.
 *
 * Live keys are compared with what is in effect, restart keys with what the agent started with.
 * A reload is all or nothing: the new file is parsed, the upstream routes it makes are checked,
 * the record table (when records.* changed) is rebuilt and served, and only then do the routes,
 * cache limits and log settings change; a failure at any step leaves everything as it was.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include <ndc/log.h>

#include "reload.h"

/* kubelet's ConfigMap update is a few renames and removals in a row: wait for them to settle. */
#define RELOAD_SETTLE_MS 100
#define RELOAD_SETTLE_MAX_MS 1000
/* A stat of the file this often catches what inotify cannot see (a symlink into another dir). */
#define RELOAD_STAT_MS 2000
#define RELOAD_FILE_MAX (1 << 20)
#define LIST_MAX 512 /* "upstream, stub_domains, ..." */

enum cm_key { CM_STUBS = 0, CM_UPSTREAMS, CM_KEYS };
static const char *const cm_key_names[CM_KEYS] = {"stubDomains", "upstreamNameservers"};

/* The kube-dns ConfigMap's last good values, each key on its own. */
struct kube_dns {
	size_t n_stubs;
	struct ndc_stub_domain *stubs;
	size_t n_ups;
	struct sockaddr_storage ups[NDC_CFG_MAX_ADDRS];
};

struct ndc_reload {
	char *path, *kubeconfig;
	bool log_level_fixed;
	struct ndc_reload_targets t;
	const struct ndc_config *running;

	/* Reload thread only. */
	struct ndc_config *file; /* the last file applied; NULL: the running configuration */
	char *last_text;	 /* the last file read, applied or refused */
	size_t last_len;
	bool have_last;
	struct stat last_st;
	char *routes_key; /* the routes in effect, as text, to tell a change */
	struct kube_dns kd_applied;
	pthread_t thread;
	bool started;
	int efd, ifd;
	bool watching; /* ifd watches the file's directory */

	/* Handed to the thread. */
	pthread_mutex_t lock;
	bool stop, want_file, want_routes;
	bool armed;	       /* the agent is up: file changes are applied (ndc_reload_arm) */
	bool want_check;       /* compare the file with the baseline */
	struct kube_dns kd;    /* the ConfigMap's values, under lock */
	char *cm_raw[CM_KEYS]; /* the last text seen per key (watch thread only) */
	bool cm_in_list;       /* watch thread only */
	struct ndc_k8s_watch *watch;

	/* Metrics. */
	atomic_uint_fast64_t reloads, failures, cm_updates, cm_errors[CM_KEYS];
	atomic_bool last_ok, restart_needed;
	atomic_uint_fast64_t n_stub_zones;
};

static const struct ndc_config *current(const struct ndc_reload *rl)
{
	return rl->file ? rl->file : rl->running;
}

static void wake(struct ndc_reload *rl)
{
	uint64_t one = 1;

	if (write(rl->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		ndc_warn("config: reload eventfd: %s", strerror(errno));
}

static void kd_free(struct kube_dns *kd)
{
	ndc_config_stubs_free(kd->stubs, kd->n_stubs);
	memset(kd, 0, sizeof(*kd));
}

static int kd_copy(struct kube_dns *dst, const struct kube_dns *src)
{
	struct kube_dns k = *src;

	k.stubs = NULL;
	if (src->n_stubs && !(k.stubs = calloc(src->n_stubs, sizeof(*k.stubs))))
		return -ENOMEM;
	for (size_t i = 0; i < src->n_stubs; i++) {
		k.stubs[i] = src->stubs[i];
		if (!(k.stubs[i].zone = strdup(src->stubs[i].zone))) {
			ndc_config_stubs_free(k.stubs, i);
			return -ENOMEM;
		}
	}
	kd_free(dst);
	*dst = k;
	return 0;
}

/* ---- lists of names, for the log ---------------------------------------------------------- */

static void list_add(char *list, const char *name)
{
	size_t n = strlen(list);

	snprintf(list + n, LIST_MAX - n, "%s%s", n ? ", " : "", name);
}

static void addr_text(const struct sockaddr_storage *ss, char *buf, size_t len)
{
	const struct sockaddr_in6 *s6 = (const void *)ss;
	const struct sockaddr_in *s4 = (const void *)ss;
	char ip[INET6_ADDRSTRLEN] = "?";

	if (ss->ss_family == AF_INET6) {
		inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof(ip));
		snprintf(buf, len, "[%s]:%u", ip, ntohs(s6->sin6_port));
	} else {
		inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof(ip));
		snprintf(buf, len, "%s:%u", ip, ntohs(s4->sin_port));
	}
}

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

static bool same_str(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

/*
 * Every key of struct ndc_config is either applied live (below: records, upstream, stub_domains,
 * cache, forward, log) or compared here. A field added to the struct without a decision here
 * fails this check at build time: say which it is, then update the size.
 */
_Static_assert(sizeof(struct ndc_config) == 1384,
	       "a new config key: decide in reload.c whether it changes live or needs a restart");

/* Restart keys of a that differ from r (the running configuration), as names into list. */
static void restart_keys(const struct ndc_config *a, const struct ndc_config *r, char *list)
{
	if (strcmp(a->cluster_domain, r->cluster_domain))
		list_add(list, "cluster_domain");
	if (a->n_listen != r->n_listen ||
	    memcmp(a->listen, r->listen, a->n_listen * sizeof(a->listen[0])))
		list_add(list, "listen");
	if (a->port != r->port)
		list_add(list, "port");
	if (a->source.kind != r->source.kind || !same_str(a->source.snapshot, r->source.snapshot) ||
	    !same_str(a->source.kubeconfig, r->source.kubeconfig) ||
	    a->source.kube_dns_configmap != r->source.kube_dns_configmap)
		list_add(list, "source");
	if (a->dataplane.mode != r->dataplane.mode)
		list_add(list, "dataplane.mode");
	if (!same_strv(a->dataplane.interfaces, a->dataplane.n_interfaces, r->dataplane.interfaces,
		       r->dataplane.n_interfaces))
		list_add(list, "dataplane.interfaces");
	if (a->dataplane.table_size != r->dataplane.table_size)
		list_add(list, "dataplane.table_size");
	if (a->dataplane.redirect_peer != r->dataplane.redirect_peer)
		list_add(list, "dataplane.redirect_peer");
	if (a->dataplane.failopen != r->dataplane.failopen)
		list_add(list, "dataplane.failopen");
	if (!same_str(a->dataplane.pin_dir, r->dataplane.pin_dir))
		list_add(list, "dataplane.pin_dir");
	if (strcmp(a->http.listen, r->http.listen))
		list_add(list, "http.listen");
	if (a->workers != r->workers)
		list_add(list, "workers");
	if (a->tcp_idle_ms != r->tcp_idle_ms)
		list_add(list, "tcp_idle_ms");
	if (a->tcp_max_conns != r->tcp_max_conns)
		list_add(list, "tcp_max_conns");
}

static void records_keys(const struct ndc_config *a, const struct ndc_config *b, char *list)
{
	if (a->records.ttl != b->records.ttl)
		list_add(list, "records.ttl");
	if (a->records.pods != b->records.pods)
		list_add(list, "records.pods");
	if (a->records.endpoint_pod_names != b->records.endpoint_pod_names)
		list_add(list, "records.endpoint_pod_names");
	if (a->records.ignore_empty_service != b->records.ignore_empty_service)
		list_add(list, "records.ignore_empty_service");
	if (!same_strv(a->records.namespaces, a->records.n_namespaces, b->records.namespaces,
		       b->records.n_namespaces))
		list_add(list, "records.namespaces");
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

/* ---- routes: the config's upstream and stub domains, and the kube-dns ConfigMap's ---------- */

#define ROUTES_MAX (2 * NDC_CFG_MAX_STUBS + 3)

struct routes {
	struct ndc_forwarder_opts o;
	struct ndc_forwarder_route r[ROUTES_MAX];
	size_t n_zones; /* stub domains among them */
};

static bool has_zone(const struct routes *rt, const char *zone)
{
	for (size_t i = 0; i < rt->o.n_routes; i++)
		if (!strcmp(rt->r[i].zone, zone))
			return true;
	return false;
}

/*
 * What the forwarder gets, as NodeLocal DNSCache builds its Corefile: stub domains (the config
 * file's win over the ConfigMap's for the same zone); upstreamNameservers, when set, for every
 * other name but the cluster domain and the reverse zones, which stay with upstream (the
 * kube-dns-upstream Service); zone_kept is the running cluster domain (a new one in the file
 * waits for a restart). Points into cfg and kd.
 */
static void routes_make(const struct ndc_config *cfg, const char *zone_kept,
			const struct kube_dns *kd, bool log_conflicts, struct routes *rt)
{
	static const char *const kept[] = {NULL, "in-addr.arpa", "ip6.arpa"};

	memset(rt, 0, sizeof(*rt));
	rt->o.routes = rt->r;
	rt->o.timeout_ms = cfg->forward.timeout_ms;
	rt->o.max_pending = cfg->forward.max_pending;
	rt->o.n_upstreams = cfg->n_upstream;
	rt->o.upstreams = cfg->upstream;
	for (size_t i = 0; i < cfg->n_stub_domains; i++)
		rt->r[rt->o.n_routes++] =
		    (struct ndc_forwarder_route){.zone = cfg->stub_domains[i].zone,
						 .n_upstreams = cfg->stub_domains[i].n_servers,
						 .upstreams = cfg->stub_domains[i].servers};
	for (size_t i = 0; i < kd->n_stubs; i++) {
		if (has_zone(rt, kd->stubs[i].zone)) {
			if (log_conflicts)
				ndc_warn("kube-dns ConfigMap: stubDomains: %s is in the config "
					 "file's stub_domains too; the config file's servers are "
					 "used",
					 kd->stubs[i].zone);
			continue;
		}
		rt->r[rt->o.n_routes++] =
		    (struct ndc_forwarder_route){.zone = kd->stubs[i].zone,
						 .n_upstreams = kd->stubs[i].n_servers,
						 .upstreams = kd->stubs[i].servers};
	}
	rt->n_zones = rt->o.n_routes;
	if (!kd->n_ups)
		return;
	rt->o.n_upstreams = kd->n_ups;
	rt->o.upstreams = kd->ups;
	for (size_t i = 0; i < 3 && cfg->n_upstream; i++) {
		const char *zone = kept[i] ? kept[i] : zone_kept;

		if (!has_zone(rt, zone))
			rt->r[rt->o.n_routes++] =
			    (struct ndc_forwarder_route){.zone = zone,
							 .n_upstreams = cfg->n_upstream,
							 .upstreams = cfg->upstream};
	}
}

static void servers_text(const struct sockaddr_storage *v, size_t n, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n && off < len; i++) {
		char a[64];

		addr_text(&v[i], a, sizeof(a));
		off += (size_t)snprintf(buf + off, len - off, "%s%s", i ? "," : "", a);
	}
}

/* The routes as text: equal texts, equal routes. */
static char *routes_text(const struct routes *rt)
{
	size_t cap = 256 + (rt->o.n_routes + 1) * (NDC_CFG_MAX_ADDRS * 56 + 260), off;
	char *s = malloc(cap);

	if (!s)
		return NULL;
	off = (size_t)snprintf(s, cap, "timeout %u pending %u default ", rt->o.timeout_ms,
			       rt->o.max_pending);
	servers_text(rt->o.upstreams, rt->o.n_upstreams, s + off, cap - off);
	for (size_t i = 0; i < rt->o.n_routes; i++) {
		off = strlen(s);
		off += (size_t)snprintf(s + off, cap - off, "; %s ", rt->r[i].zone);
		servers_text(rt->r[i].upstreams, rt->r[i].n_upstreams, s + off, cap - off);
	}
	return s;
}

/*
 * Gives the forwarder routes when they differ from those in effect. 1 when they changed, 0 when
 * not, or -errno (nothing changed then).
 */
static int routes_apply(struct ndc_reload *rl, const struct routes *rt)
{
	char *key = routes_text(rt);
	int err;

	if (!key)
		return -ENOMEM;
	if (rl->routes_key && !strcmp(key, rl->routes_key)) {
		free(key);
		return 0;
	}
	err = ndc_forwarder_reconfigure(rl->t.fwd, &rt->o);
	if (err < 0) {
		free(key);
		return err;
	}
	free(rl->routes_key);
	rl->routes_key = key;
	atomic_store(&rl->n_stub_zones, rt->n_zones);
	return 1;
}

static const char *routes_error(int err)
{
	return err == -E2BIG ? "more than the forwarder takes (8 servers per zone, 32 distinct "
			       "servers, 256 zones in all)"
			     : strerror(-err);
}

/* ---- the config file ------------------------------------------------------------------------ */

/* Reads the file whole (at most RELOAD_FILE_MAX). 0 or -errno. */
static int read_file(const char *path, char **ret, size_t *ret_len, struct stat *ret_st)
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

/* The one check across the running configuration: stub domains stay out of its zone. */
static const char *stub_in_zone(const struct ndc_stub_domain *v, size_t n, const char *zone)
{
	size_t z = strlen(zone);

	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(v[i].zone);

		if (l >= z && !strcmp(v[i].zone + l - z, zone) &&
		    (l == z || v[i].zone[l - z - 1] == '.'))
			return v[i].zone;
	}
	return NULL;
}

/* Reads, checks and applies the file. force: even when it reads as before (SIGHUP). */
static void reload_file(struct ndc_reload *rl, bool force)
{
	const struct ndc_config *cur = current(rl);
	char err[768], changed[LIST_MAX] = "", restart[LIST_MAX] = "", why[1024];
	struct ndc_config *cfg = NULL;
	const char *inzone;
	struct routes rt;
	struct stat st;
	char *text;
	size_t len;
	int r, level;

	r = read_file(rl->path, &text, &len, &st);
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
	inzone = stub_in_zone(cfg->stub_domains, cfg->n_stub_domains, rl->running->cluster_domain);
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
		list_add(restart, "records.pods (insecure, with the fast path)");
		cfg->records.pods = cur->records.pods;
	}
	records_keys(cfg, cur, changed);

	routes_make(cfg, rl->running->cluster_domain, &rl->kd_applied, false, &rt);
	r = ndc_forwarder_check(&rt.o);
	if (r < 0) {
		snprintf(why, sizeof(why), "%s: upstream and stub_domains: %s", rl->path,
			 routes_error(r));
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
	r = routes_apply(rl, &rt);
	if (r < 0) {
		/* Checked above: only memory can fail here. The table is the new one already. */
		ndc_err("config: %s: upstream and stub_domains not applied: %s", rl->path,
			strerror(-r));
	} else if (r > 0) {
		if (cfg->n_upstream != cur->n_upstream ||
		    memcmp(cfg->upstream, cur->upstream,
			   cfg->n_upstream * sizeof(cfg->upstream[0])))
			list_add(changed, "upstream");
		if (!same_stubs(cfg, cur))
			list_add(changed, "stub_domains");
		if (cfg->forward.timeout_ms != cur->forward.timeout_ms ||
		    cfg->forward.max_pending != cur->forward.max_pending)
			list_add(changed, "forward");
		if (rl->t.fastpath && cfg->dataplane.failopen && cfg->n_upstream &&
		    (!cur->n_upstream ||
		     memcmp(&cfg->upstream[0], &cur->upstream[0], sizeof(cfg->upstream[0])))) {
			char a[64];

			addr_text(&rl->running->upstream[0], a, sizeof(a));
			ndc_info(
			    "config: dataplane.failopen: with no agent running the kernel keeps "
			    "forwarding to %s, the first upstream at start, until a restart",
			    rl->running->n_upstream ? a : "nothing");
		}
	}
	if (!same_cache(cfg, cur)) {
		struct ndc_cache_opts co = {
		    .max_entries = cfg->cache.max_entries,
		    .max_bytes = cfg->cache.max_bytes,
		    .max_ttl = cfg->cache.max_ttl,
		    .neg_max_ttl = cfg->cache.neg_max_ttl,
		    .stale_max = cfg->cache.stale_max,
		};

		if (ndc_cache_set_limits(rl->t.cache, &co) == 0)
			list_add(changed, "cache");
	}
	/* Set after the lines below: a quieter level must not hide what this reload did. */
	level = cfg->log.level != cur->log.level && !rl->log_level_fixed ? cfg->log.level : -1;
	if (level >= 0)
		list_add(changed, "log.level");
	if (cfg->log.queries != cur->log.queries || cfg->log.sample_ppm != cur->log.sample_ppm) {
		ndc_resolver_set_query_log(rl->t.res, cfg->log.queries ? cfg->log.sample_ppm : 0);
		list_add(changed, "log.queries");
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

/* ---- the kube-dns ConfigMap (its watch thread) ------------------------------------------------
 */

/*
 * One key's value (NULL: the key is absent) into kd. A bad value is logged with the key and
 * counted, and the key keeps its last good value. Unchanged text is not parsed again.
 */
static void cm_key(struct ndc_reload *rl, enum cm_key k, const char *text, struct kube_dns *kd)
{
	char err[512];
	const char *inzone;
	int r;

	if (same_str(text, rl->cm_raw[k]))
		return;
	free(rl->cm_raw[k]);
	rl->cm_raw[k] = text ? strdup(text) : NULL;
	if (k == CM_STUBS) {
		struct ndc_stub_domain *v = NULL;
		size_t n = 0;

		r = text ? ndc_kube_dns_stub_domains(text, strlen(text), &v, &n, err, sizeof(err))
			 : 0;
		inzone = r ? NULL : stub_in_zone(v, n, rl->running->cluster_domain);
		if (inzone) {
			snprintf(err, sizeof(err),
				 "stubDomains: %s: inside the cluster domain %s, which ndcache "
				 "answers itself",
				 inzone, rl->running->cluster_domain);
			ndc_config_stubs_free(v, n);
			r = -EINVAL;
		}
		if (r == 0) {
			ndc_config_stubs_free(kd->stubs, kd->n_stubs);
			kd->stubs = v;
			kd->n_stubs = n;
		}
	} else {
		struct sockaddr_storage ups[NDC_CFG_MAX_ADDRS];
		size_t n = 0;

		r = text ? ndc_kube_dns_upstreams(text, strlen(text), ups, &n, err, sizeof(err))
			 : 0;
		if (r == 0) {
			memcpy(kd->ups, ups, sizeof(ups));
			kd->n_ups = n;
		}
	}
	if (r < 0) {
		atomic_fetch_add(&rl->cm_errors[k], 1);
		ndc_warn("kube-dns ConfigMap: %s; the last good %s stays",
			 r == -ENOMEM ? "out of memory" : err, cm_key_names[k]);
	}
}

/* The ConfigMap as it is now (NULL: there is none), handed to the reload thread. */
static void cm_update(struct ndc_reload *rl, json_object *cm)
{
	json_object *data = NULL, *v;
	const char *text[CM_KEYS] = {NULL, NULL};

	if (cm && json_object_object_get_ex(cm, "data", &data) &&
	    json_object_is_type(data, json_type_object)) {
		for (int k = 0; k < CM_KEYS; k++)
			if (json_object_object_get_ex(data, cm_key_names[k], &v))
				text[k] = json_object_is_type(v, json_type_string)
					      ? json_object_get_string(v)
					      : "<not a string>";
	}
	pthread_mutex_lock(&rl->lock);
	for (int k = 0; k < CM_KEYS; k++)
		cm_key(rl, k, text[k], &rl->kd);
	rl->want_routes = true;
	pthread_mutex_unlock(&rl->lock);
	wake(rl);
}

static void cm_begin(void *arg, enum ndc_k8s_kind kind)
{
	struct ndc_reload *rl = arg;

	(void)kind;
	rl->cm_in_list = false;
}

static void cm_item(void *arg, enum ndc_k8s_kind kind, json_object *obj)
{
	struct ndc_reload *rl = arg;

	(void)kind;
	rl->cm_in_list = true;
	cm_update(rl, obj);
}

static void cm_end(void *arg, enum ndc_k8s_kind kind)
{
	struct ndc_reload *rl = arg;

	(void)kind;
	if (!rl->cm_in_list)
		cm_update(rl, NULL);
}

static void cm_event(void *arg, enum ndc_k8s_kind kind, enum ndc_k8s_event ev, json_object *obj)
{
	(void)kind;
	cm_update(arg, ev == NDC_K8S_DELETED ? NULL : obj);
}

static const struct ndc_k8s_watch_ops cm_ops = {
    .list_begin = cm_begin,
    .list_item = cm_item,
    .list_end = cm_end,
    .event = cm_event,
};

/* The ConfigMap's values, applied on the reload thread. */
static void apply_kube_dns(struct ndc_reload *rl)
{
	struct kube_dns kd = {0};
	struct routes rt;
	char text[1024] = "", ups[600];
	int r;

	pthread_mutex_lock(&rl->lock);
	rl->want_routes = false;
	r = kd_copy(&kd, &rl->kd);
	pthread_mutex_unlock(&rl->lock);
	if (r < 0)
		return;
	routes_make(current(rl), rl->running->cluster_domain, &kd, true, &rt);
	r = routes_apply(rl, &rt);
	if (r < 0) {
		ndc_err("kube-dns ConfigMap: not applied, the last good routes stay: %s",
			routes_error(r));
		atomic_fetch_add(&rl->cm_errors[CM_STUBS], 1);
		/* The next file reload must not fail on the ConfigMap's values. */
		pthread_mutex_lock(&rl->lock);
		kd_copy(&rl->kd, &rl->kd_applied);
		pthread_mutex_unlock(&rl->lock);
		kd_free(&kd);
		return;
	}
	kd_free(&rl->kd_applied);
	rl->kd_applied = kd;
	if (r == 0)
		return;
	atomic_fetch_add(&rl->cm_updates, 1);
	for (size_t i = 0; i < kd.n_stubs; i++)
		list_add(text, kd.stubs[i].zone);
	servers_text(kd.ups, kd.n_ups, ups, sizeof(ups));
	ndc_info("kube-dns ConfigMap: applied: stubDomains %s; upstreamNameservers %s",
		 text[0] ? text : "none", kd.n_ups ? ups : "none (upstream)");
}

/* ---- the thread ----------------------------------------------------------------------------- */

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A file whose identity (through symlinks) changed since it was last read. */
static bool stat_changed(struct ndc_reload *rl)
{
	struct stat st;

	if (stat(rl->path, &st) < 0)
		return rl->last_text != NULL;
	return st.st_ino != rl->last_st.st_ino || st.st_dev != rl->last_st.st_dev ||
	       st.st_size != rl->last_st.st_size ||
	       st.st_mtim.tv_sec != rl->last_st.st_mtim.tv_sec ||
	       st.st_mtim.tv_nsec != rl->last_st.st_mtim.tv_nsec;
}

static int watch_dir(struct ndc_reload *rl)
{
	char *copy = strdup(rl->path);
	int wd;

	if (!copy)
		return -ENOMEM;
	rl->watching = false;
	wd = inotify_add_watch(rl->ifd, dirname(copy),
			       IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE |
				   IN_DELETE | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF);
	if (wd < 0)
		ndc_warn("config: cannot watch the directory of %s (%s): changes are seen by a "
			 "stat every %d ms and SIGHUP",
			 rl->path, strerror(errno), RELOAD_STAT_MS);
	free(copy);
	rl->watching = wd >= 0;
	return wd < 0 ? -errno : 0;
}

static void *reload_main(void *arg)
{
	struct ndc_reload *rl = arg;
	uint64_t settle_at = 0, settle_max = 0, next_stat = now_ms() + RELOAD_STAT_MS;
	bool armed = false;

	for (;;) {
		struct pollfd p[2] = {{.fd = rl->efd, .events = POLLIN},
				      {.fd = rl->ifd, .events = POLLIN}};
		uint64_t now = now_ms(), due = next_stat;
		bool stop, want_file, want_routes, want_check;
		int timeout;

		/* Before the agent arms the reload a settled change waits (no busy loop). */
		if (armed && settle_at && settle_at < due)
			due = settle_at;
		timeout = due > now ? (int)(due - now) : 0;
		if (poll(p, rl->ifd >= 0 ? 2 : 1, timeout) < 0 && errno != EINTR)
			ndc_warn("config: reload poll: %s", strerror(errno));
		if (p[0].revents & POLLIN) {
			uint64_t v;

			if (read(rl->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
				ndc_warn("config: reload eventfd: %s", strerror(errno));
		}
		if (rl->ifd >= 0 && (p[1].revents & POLLIN)) {
			char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
			ssize_t n = read(rl->ifd, buf, sizeof(buf));

			for (ssize_t off = 0; off < n;) {
				const struct inotify_event *ev = (const void *)(buf + off);

				if (ev->mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF))
					rl->watching = false;
				off += (ssize_t)(sizeof(*ev) + ev->len);
			}
			now = now_ms();
			/* Settle: 100 ms after the last event, at most 1 s after the first. */
			if (!settle_at)
				settle_max = now + RELOAD_SETTLE_MAX_MS;
			settle_at = now + RELOAD_SETTLE_MS;
			if (settle_at > settle_max)
				settle_at = settle_max;
		}
		pthread_mutex_lock(&rl->lock);
		stop = rl->stop;
		want_file = rl->want_file;
		want_routes = rl->want_routes;
		armed = rl->armed;
		want_check = rl->want_check;
		rl->want_file = rl->want_check = false;
		pthread_mutex_unlock(&rl->lock);
		if (stop)
			break;
		now = now_ms();
		if (rl->path && now >= next_stat) {
			next_stat = now + RELOAD_STAT_MS;
			if (!rl->watching && rl->ifd >= 0)
				watch_dir(rl);
			if (stat_changed(rl) && !settle_at)
				settle_at = now;
		}
		if (want_routes)
			apply_kube_dns(rl);
		/* Not yet: the agent is still starting what a reload may replace. */
		if (!armed) {
			if (want_file) {
				pthread_mutex_lock(&rl->lock);
				rl->want_file = true;
				pthread_mutex_unlock(&rl->lock);
			}
			continue;
		}
		if (want_check && !settle_at)
			settle_at = now;
		if (want_file) {
			if (rl->path)
				reload_file(rl, true);
			else
				ndc_warn(
				    "config: SIGHUP: ndcache runs without --config: nothing to "
				    "reload");
		} else if (settle_at && now >= settle_at) {
			reload_file(rl, false);
		}
		if (want_file || (settle_at && now >= settle_at))
			settle_at = 0;
	}
	return NULL;
}

/* ---- API ------------------------------------------------------------------------------------ */

static int watch_kube_dns(struct ndc_reload *rl, const struct ndc_k8s_conn *conn)
{
	struct ndc_k8s_watch_opts wo = {
	    .page_size = 500,
	    .timeout_s = 300,
	    .backoff_min_ms = 250,
	    .backoff_max_ms = 30000,
	};
	int err;

	/* tests/deploy/check_manifests.py reads this condition for the RBAC it requires. */
	if (rl->running->source.kube_dns_configmap)
		wo.kinds |= 1u << NDC_K8S_CONFIGMAPS;
	if (!wo.kinds)
		return 0;
	err = ndc_k8s_watch_start(conn, &wo, &cm_ops, rl, &rl->watch);
	if (err < 0)
		ndc_warn("kube-dns ConfigMap: cannot watch kube-system/kube-dns: %s; stubDomains "
			 "and upstreamNameservers are not applied",
			 strerror(-err));
	else
		ndc_info("kube-dns ConfigMap: watching kube-system/kube-dns for stubDomains and "
			 "upstreamNameservers");
	return err;
}

int ndc_reload_start(const struct ndc_reload_opts *o, const struct ndc_reload_targets *t,
		     struct ndc_reload **ret)
{
	struct ndc_reload *rl = calloc(1, sizeof(*rl));
	struct kube_dns none = {0};
	struct routes rt;
	int err;

	if (!rl)
		return -ENOMEM;
	rl->efd = rl->ifd = -1;
	rl->running = o->running;
	rl->t = *t;
	rl->log_level_fixed = o->log_level_fixed;
	atomic_store(&rl->last_ok, true);
	pthread_mutex_init(&rl->lock, NULL);
	err = -ENOMEM;
	if ((o->path && !(rl->path = strdup(o->path))) ||
	    (o->kubeconfig && !(rl->kubeconfig = strdup(o->kubeconfig))))
		goto fail;
	/* What the agent's start did not apply: stub domains, query logging. */
	routes_make(rl->running, rl->running->cluster_domain, &none, false, &rt);
	err = routes_apply(rl, &rt);
	if (err < 0) {
		ndc_err("config: upstream and stub_domains: %s", routes_error(err));
		goto fail;
	}
	if (rl->running->log.queries)
		ndc_resolver_set_query_log(t->res, rl->running->log.sample_ppm);
	if (rl->path) {
		struct stat st;
		char *text;
		size_t len;

		/*
		 * The baseline is the text the running configuration was parsed from: a file
		 * changed since is applied when the agent arms the reload.
		 */
		if (o->text && (rl->last_text = malloc(o->len + 1))) {
			memcpy(rl->last_text, o->text, o->len + 1);
			rl->last_len = o->len;
			rl->have_last = true;
		} else if (read_file(rl->path, &text, &len, &st) == 0) {
			rl->last_text = text;
			rl->last_len = len;
			rl->last_st = st;
			rl->have_last = true;
		}
		rl->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
		if (rl->ifd < 0)
			ndc_warn(
			    "config: inotify: %s: changes to %s are seen by a stat every %d ms "
			    "and SIGHUP",
			    strerror(errno), rl->path, RELOAD_STAT_MS);
		else
			watch_dir(rl);
	}
	rl->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (rl->efd < 0) {
		err = -errno;
		goto fail;
	}
	err = -pthread_create(&rl->thread, NULL, reload_main, rl);
	if (err)
		goto fail;
	rl->started = true;
	if (o->conn && rl->running->source.kind == NDC_SOURCE_KUBERNETES)
		watch_kube_dns(rl, o->conn);
	*ret = rl;
	return 0;
fail:
	ndc_reload_stop(rl);
	return err;
}

void ndc_reload_arm(struct ndc_reload *rl)
{
	if (!rl)
		return;
	pthread_mutex_lock(&rl->lock);
	rl->armed = true;
	/* Compared with the baseline now, not at the next stat (unchanged: nothing happens). */
	rl->want_check = rl->path != NULL;
	pthread_mutex_unlock(&rl->lock);
	wake(rl);
}

void ndc_reload_request(struct ndc_reload *rl)
{
	if (!rl)
		return;
	pthread_mutex_lock(&rl->lock);
	rl->want_file = true;
	pthread_mutex_unlock(&rl->lock);
	wake(rl);
}

void ndc_reload_metrics(struct ndc_reload *rl, struct ndc_metrics_buf *b)
{
	if (!rl)
		return;
	ndc_metric_u64(b, "ndcache_config_reloads_total", "counter",
		       "Config file reloads applied (SIGHUP, or the file changed).", NULL,
		       atomic_load(&rl->reloads));
	ndc_metric_u64(b, "ndcache_config_reload_failures_total", "counter",
		       "Config file reloads refused (unreadable or invalid): the running "
		       "configuration stays.",
		       NULL, atomic_load(&rl->failures));
	ndc_metric_u64(b, "ndcache_config_last_reload_success", "gauge",
		       "1 unless the last config file read was refused.", NULL,
		       atomic_load(&rl->last_ok));
	ndc_metric_u64(b, "ndcache_config_restart_needed", "gauge",
		       "1 while the config file has keys only a restart applies (logged by name).",
		       NULL, atomic_load(&rl->restart_needed));
	ndc_metric_u64(b, "ndcache_stub_domains", "gauge",
		       "Zones forwarded to upstreams of their own (stub_domains and the kube-dns "
		       "ConfigMap's stubDomains).",
		       NULL, atomic_load(&rl->n_stub_zones));
	if (!rl->watch)
		return;
	ndc_metric_u64(b, "ndcache_kube_dns_configmap_updates_total", "counter",
		       "Changes of the kube-dns ConfigMap's routes applied.", NULL,
		       atomic_load(&rl->cm_updates));
	for (int k = 0; k < CM_KEYS; k++) {
		char l[64];

		snprintf(l, sizeof(l), "key=\"%s\"", cm_key_names[k]);
		ndc_metric_u64(
		    b, "ndcache_kube_dns_configmap_errors_total", "counter",
		    "Bad values in the kube-dns ConfigMap (logged; the key keeps its last "
		    "good value).",
		    l, atomic_load(&rl->cm_errors[k]));
	}
}

void ndc_reload_stop(struct ndc_reload *rl)
{
	if (!rl)
		return;
	/* The watch first: its callbacks reach the thread. */
	ndc_k8s_watch_stop(rl->watch);
	if (rl->started) {
		pthread_mutex_lock(&rl->lock);
		rl->stop = true;
		pthread_mutex_unlock(&rl->lock);
		wake(rl);
		pthread_join(rl->thread, NULL);
	}
	if (rl->efd >= 0)
		close(rl->efd);
	if (rl->ifd >= 0)
		close(rl->ifd);
	kd_free(&rl->kd);
	kd_free(&rl->kd_applied);
	for (int k = 0; k < CM_KEYS; k++)
		free(rl->cm_raw[k]);
	ndc_config_free(rl->file);
	free(rl->file);
	free(rl->last_text);
	free(rl->routes_key);
	free(rl->path);
	free(rl->kubeconfig);
	pthread_mutex_destroy(&rl->lock);
	free(rl);
}
