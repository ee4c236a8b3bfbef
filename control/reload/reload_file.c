// SPDX-License-Identifier: MIT
/*
 * The config file: read whole, compared key by key (reload_diff.c decides what changed) and
 * applied all or nothing, to one subsystem after another (the table of subsystems below: adding
 * one is a row there and its decision in reload_diff.c).
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

/* ---- the subsystems a new file changes ---------------------------------------------------- */

/* A file being applied: the new configuration, what it changes, what has been applied. */
struct reload_apply {
	struct ndc_reload *rl;
	const struct ndc_config *cur; /* in effect until now */
	struct ndc_config *cfg;	      /* the new file, parsed */
	struct reload_diff d;
	struct routes rt;	/* the routes cfg makes, checked */
	char changed[LIST_MAX]; /* the keys applied, for the log line */
	char why[1024];		/* why the file is refused */
	int level;		/* log.level, set once the reload is logged; -1: unchanged */
};

/*
 * A subsystem a new configuration may change: changed says whether it does (from the diff and
 * the targets alone), apply applies it and adds the keys it applied to a->changed. Applied in
 * the table's order; only the first, the record table, may refuse the file (< 0, a->why set):
 * if it cannot be built, nothing else has changed.
 */
struct reload_subsystem {
	const char *name;
	bool (*changed)(const struct reload_apply *a);
	int (*apply)(struct reload_apply *a);
};

static bool records_changed(const struct reload_apply *a)
{
	return a->d.records[0] != '\0';
}

/* records.*: the table rebuilt with the new records options (the old one answers until then). */
static int records_apply(struct reload_apply *a)
{
	struct ndc_reload *rl = a->rl;
	int r = rl->t.rebuild ? rl->t.rebuild(rl->t.arg, a->cfg) : 0;

	if (r < 0) {
		snprintf(a->why, sizeof(a->why),
			 "%s: %s: the new record table could not be built "
			 "(%s)",
			 rl->path, a->d.records, strerror(-r));
		return r;
	}
	ndc_reload_list_add(a->changed, a->d.records);
	return 0;
}

/* The routes compare themselves with those in effect (the ConfigMap's share them). */
static bool always(const struct reload_apply *a)
{
	(void)a;
	return true;
}

/* upstream, stub_domains, forward.*: the forwarder's routes. */
static int routes_apply(struct reload_apply *a)
{
	struct ndc_reload *rl = a->rl;
	const struct ndc_config *cfg = a->cfg, *cur = a->cur;
	int r = ndc_reload_routes_apply(rl, &a->rt);

	if (r < 0) {
		/* Checked before: only memory can fail here. The table is the new one already. */
		ndc_err("config: %s: upstream and stub_domains not applied: %s", rl->path,
			strerror(-r));
		return 0;
	}
	if (r == 0)
		return 0;
	if (a->d.upstream)
		ndc_reload_list_add(a->changed, "upstream");
	if (a->d.stub_domains)
		ndc_reload_list_add(a->changed, "stub_domains");
	if (a->d.forward)
		ndc_reload_list_add(a->changed, "forward");
	if (rl->t.fastpath && cfg->dataplane.failopen && cfg->n_upstream &&
	    (!cur->n_upstream ||
	     memcmp(&cfg->upstream[0], &cur->upstream[0], sizeof(cfg->upstream[0])))) {
		char addr[64];

		ndc_reload_addr_text(&rl->running->upstream[0], addr, sizeof(addr));
		ndc_info("config: dataplane.failopen: with no agent running the kernel keeps "
			 "forwarding to %s, the first upstream at start, until a restart",
			 rl->running->n_upstream ? addr : "nothing");
	}
	return 0;
}

static bool fastpath_loaded(const struct reload_apply *a)
{
	return a->rl->t.fastpath;
}

/* dataplane.failopen (a restart key): where the kernel fails open to now, and after a restart. */
static int failopen_warn(struct reload_apply *a)
{
	char lo[160];

	if (ndc_reload_failopen_loopback(a->rl->running, lo, sizeof(lo)))
		ndc_warn("config: dataplane.failopen: the upstream the kernel fails open to, "
			 "%s, is on loopback, where the kernel does not route a pod's "
			 "query: with no agent running those queries are lost",
			 lo);
	else if (ndc_reload_failopen_loopback(a->cfg, lo, sizeof(lo)))
		ndc_warn("config: dataplane.failopen: upstream %s is on loopback: after a "
			 "restart the kernel would fail open to it, which does nothing",
			 lo);
	return 0;
}

static bool cache_changed(const struct reload_apply *a)
{
	return a->d.cache;
}

static int cache_apply(struct reload_apply *a)
{
	struct ndc_cache_opts co;

	ndc_cache_opts_from_config(&co, a->cfg);
	if (ndc_cache_set_limits(a->rl->t.cache, &co) == 0)
		ndc_reload_list_add(a->changed, "cache");
	return 0;
}

/*
 * cache.prefetch and forward.per_client: live, for what is asked from then on (an entry already
 * cached keeps the prefetch point it was given; a client keeps the tokens it has, capped at the
 * new burst). Values were checked by the parser, so neither can fail here.
 */
static bool prefetch_changed(const struct reload_apply *a)
{
	return a->rl->t.prefetch && a->d.prefetch;
}

static int prefetch_apply(struct reload_apply *a)
{
	struct ndc_prefetch_opts o;

	ndc_prefetch_opts_from_config(&o, a->cfg);
	if (ndc_prefetch_configure(a->rl->t.prefetch, &o) == 0)
		ndc_reload_list_add(a->changed, "cache.prefetch");
	return 0;
}

static bool per_client_changed(const struct reload_apply *a)
{
	return a->rl->t.limiter && a->d.per_client;
}

static int per_client_apply(struct reload_apply *a)
{
	struct ndc_ratelimit_opts o;

	ndc_ratelimit_opts_from_config(&o, a->cfg);
	if (ndc_ratelimit_configure(a->rl->t.limiter, &o) == 0)
		ndc_reload_list_add(a->changed, "forward.per_client");
	return 0;
}

static bool log_level_changed(const struct reload_apply *a)
{
	return a->d.log_level && !a->rl->log_level_fixed;
}

/* Set after the reload is logged: a quieter level must not hide what this reload did. */
static int log_level_apply(struct reload_apply *a)
{
	a->level = a->cfg->log.level;
	ndc_reload_list_add(a->changed, "log.level");
	return 0;
}

static bool log_queries_changed(const struct reload_apply *a)
{
	return a->d.log_queries;
}

static int log_queries_apply(struct reload_apply *a)
{
	ndc_resolver_set_query_log(a->rl->t.res, a->cfg->log.queries ? a->cfg->log.sample_ppm : 0);
	ndc_reload_list_add(a->changed, "log.queries");
	return 0;
}

static const struct reload_subsystem subsystems[] = {
    {"records", records_changed, records_apply}, /* first: the one that may refuse */
    {"routes", always, routes_apply},
    {"failopen", fastpath_loaded, failopen_warn},
    {"cache", cache_changed, cache_apply},
    {"prefetch", prefetch_changed, prefetch_apply},
    {"per_client", per_client_changed, per_client_apply},
    {"log.level", log_level_changed, log_level_apply},
    {"log.queries", log_queries_changed, log_queries_apply},
};

/* ---- one reload ----------------------------------------------------------------------------- */

/*
 * The file's text when it is to be applied (false: it reads as before and force is not set, or it
 * cannot be read: refused). rl keeps the text (last_text).
 */
static bool read_new(struct ndc_reload *rl, bool force, char **ret, size_t *ret_len)
{
	char why[1024];
	struct stat st;
	char *text;
	size_t len;
	int r;

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
		return false;
	}
	rl->last_st = st;
	if (!force && rl->have_last && rl->last_text && rl->last_len == len &&
	    !memcmp(rl->last_text, text, len)) {
		free(text);
		return false;
	}
	free(rl->last_text);
	rl->last_text = text;
	rl->last_len = len;
	rl->have_last = true;
	*ret = text;
	*ret_len = len;
	return true;
}

/*
 * Parses and checks the new file, with no side effect: a->cfg, what it changes (a->d) and the
 * routes it makes (a->rt), checked. 0, or -errno with a->why set.
 */
static int check(struct reload_apply *a, const char *text, size_t len)
{
	struct ndc_reload *rl = a->rl;
	const char *zone = rl->running->cluster_domain, *inzone;
	char err[768];
	int r;

	a->cfg = calloc(1, sizeof(*a->cfg));
	if (!a->cfg) {
		snprintf(a->why, sizeof(a->why), "out of memory");
		return -ENOMEM;
	}
	r = ndc_config_parse(text, len, a->cfg, err, sizeof(err));
	if (r == 0 && rl->kubeconfig)
		r = ndc_config_use_kubeconfig(a->cfg, rl->kubeconfig);
	if (r < 0) {
		snprintf(a->why, sizeof(a->why), "%s: %s", rl->path,
			 r == -ENOMEM ? "out of memory" : err);
		return r;
	}
	inzone = ndc_reload_stub_in_zone(a->cfg->stub_domains, a->cfg->n_stub_domains, zone);
	if (inzone) {
		snprintf(a->why, sizeof(a->why),
			 "%s: stub_domains.%s: inside cluster_domain %s, which ndcache answers "
			 "itself",
			 rl->path, inzone, zone);
		return -EINVAL;
	}
	ndc_reload_diff(a->cfg, a->cur, rl->running, rl->t.fastpath, &a->d);
	if (a->d.pods_kept)
		a->cfg->records.pods = a->cur->records.pods;
	ndc_reload_routes_make(a->cfg, zone, &rl->kd_applied, false, &a->rt);
	r = ndc_forwarder_check(&a->rt.o);
	if (r < 0)
		snprintf(a->why, sizeof(a->why), "%s: upstream and stub_domains: %s", rl->path,
			 ndc_reload_routes_error(r));
	return r;
}

/* The file applied is what is in effect from now on: counted and logged. */
static void commit(struct reload_apply *a)
{
	struct ndc_reload *rl = a->rl;
	const char *restart = a->d.restart;

	ndc_config_free(rl->file);
	free(rl->file);
	rl->file = a->cfg;
	atomic_fetch_add(&rl->reloads, 1);
	atomic_store(&rl->last_ok, true);
	atomic_store(&rl->restart_needed, restart[0] != '\0');
	ndc_info("config: reloaded %s: %s%s", rl->path,
		 a->changed[0] ? "applied " : "nothing changed", a->changed);
	if (restart[0])
		ndc_warn("config: %s: %s differ from the running configuration and need a restart; "
			 "they keep their running values",
			 rl->path, restart);
	if (a->level >= 0)
		ndc_log_set_level(a->level);
}

/* Reads, checks and applies the file, all or nothing. force: even when it reads as before. */
void ndc_reload_file(struct ndc_reload *rl, bool force)
{
	struct reload_apply a = {.rl = rl, .cur = ndc_reload_current(rl), .level = -1};
	char *text;
	size_t len;

	if (!read_new(rl, force, &text, &len))
		return;
	if (check(&a, text, len) < 0)
		goto refused;
	for (size_t i = 0; i < sizeof(subsystems) / sizeof(subsystems[0]); i++)
		if (subsystems[i].changed(&a) && subsystems[i].apply(&a) < 0)
			goto refused;
	commit(&a);
	return;
refused:
	ndc_config_free(a.cfg);
	free(a.cfg);
	refuse(rl, a.why);
}
