// SPDX-License-Identifier: MIT
/*
 * The config file: read whole, compared key by key (reload_diff.c decides what changed) and
 * applied all or nothing.
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

/*
 * cache.prefetch and forward.per_client: live, for what is asked from then on (an entry already
 * cached keeps the prefetch point it was given; a client keeps the tokens it has, capped at the
 * new burst). Values were checked by the parser, so neither can fail here.
 */
static void upstream_share_keys(struct ndc_reload *rl, const struct ndc_config *a,
				const struct reload_diff *d, char *changed)
{
	if (rl->t.prefetch && d->prefetch) {
		struct ndc_prefetch_opts o;

		ndc_prefetch_opts_from_config(&o, a);
		if (ndc_prefetch_configure(rl->t.prefetch, &o) == 0)
			ndc_reload_list_add(changed, "cache.prefetch");
	}
	if (rl->t.limiter && d->per_client) {
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
	char err[768], changed[LIST_MAX], why[1024];
	struct ndc_config *cfg = NULL;
	struct reload_diff d;
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
	if (r == 0 && rl->kubeconfig)
		r = ndc_config_use_kubeconfig(cfg, rl->kubeconfig);
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

	ndc_reload_diff(cfg, cur, rl->running, rl->t.fastpath, &d);
	if (d.pods_kept)
		cfg->records.pods = cur->records.pods;
	memcpy(changed, d.records, sizeof(changed));

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
		if (d.upstream)
			ndc_reload_list_add(changed, "upstream");
		if (d.stub_domains)
			ndc_reload_list_add(changed, "stub_domains");
		if (d.forward)
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
	if (d.cache) {
		struct ndc_cache_opts co;

		ndc_cache_opts_from_config(&co, cfg);
		if (ndc_cache_set_limits(rl->t.cache, &co) == 0)
			ndc_reload_list_add(changed, "cache");
	}
	upstream_share_keys(rl, cfg, &d, changed);
	/* Set after the lines below: a quieter level must not hide what this reload did. */
	level = d.log_level && !rl->log_level_fixed ? cfg->log.level : -1;
	if (level >= 0)
		ndc_reload_list_add(changed, "log.level");
	if (d.log_queries) {
		ndc_resolver_set_query_log(rl->t.res, cfg->log.queries ? cfg->log.sample_ppm : 0);
		ndc_reload_list_add(changed, "log.queries");
	}
	ndc_config_free(rl->file);
	free(rl->file);
	rl->file = cfg;
	atomic_fetch_add(&rl->reloads, 1);
	atomic_store(&rl->last_ok, true);
	atomic_store(&rl->restart_needed, d.restart[0] != '\0');
	ndc_info("config: reloaded %s: %s%s", rl->path, changed[0] ? "applied " : "nothing changed",
		 changed);
	if (d.restart[0])
		ndc_warn("config: %s: %s differ from the running configuration and need a restart; "
			 "they keep their running values",
			 rl->path, d.restart);
	if (level >= 0)
		ndc_log_set_level(level);
	return;
refused:
	ndc_config_free(cfg);
	free(cfg);
	refuse(rl, why);
}
