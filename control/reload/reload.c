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
#include <errno.h>
#include <libgen.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <ndc/log.h>

#include "internal.h"

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
			ndc_reload_apply_kube_dns(rl);
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
				ndc_reload_file(rl, true);
			else
				ndc_warn(
				    "config: SIGHUP: ndcache runs without --config: nothing to "
				    "reload");
		} else if (settle_at && now >= settle_at) {
			ndc_reload_file(rl, false);
		}
		if (want_file || (settle_at && now >= settle_at))
			settle_at = 0;
	}
	return NULL;
}

/* ---- API ------------------------------------------------------------------------------------ */

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
	ndc_reload_routes_make(rl->running, rl->running->cluster_domain, &none, false, &rt);
	err = ndc_reload_routes_apply(rl, &rt);
	if (err < 0) {
		ndc_err("config: upstream and stub_domains: %s", ndc_reload_routes_error(err));
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
		} else if (ndc_reload_read_file(rl->path, &text, &len, &st) == 0) {
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
		ndc_reload_watch_kube_dns(rl, o->conn);
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
	ndc_reload_wake(rl);
}

void ndc_reload_request(struct ndc_reload *rl)
{
	if (!rl)
		return;
	pthread_mutex_lock(&rl->lock);
	rl->want_file = true;
	pthread_mutex_unlock(&rl->lock);
	ndc_reload_wake(rl);
}

void ndc_reload_metrics(struct ndc_reload *rl, struct ndc_metrics_buf *b)
{
	uint64_t errs[CM_KEYS];

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
	for (int k = 0; k < CM_KEYS; k++)
		errs[k] = atomic_load(&rl->cm_errors[k]);
	ndc_metric_u64_each(b, "ndcache_kube_dns_configmap_errors_total", "counter",
			    "Bad values in the kube-dns ConfigMap (logged; the key keeps its last "
			    "good value).",
			    "key", ndc_reload_cm_keys, errs, CM_KEYS);
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
		ndc_reload_wake(rl);
		pthread_join(rl->thread, NULL);
	}
	if (rl->efd >= 0)
		close(rl->efd);
	if (rl->ifd >= 0)
		close(rl->ifd);
	ndc_reload_kd_free(&rl->kd);
	ndc_reload_kd_free(&rl->kd_applied);
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
