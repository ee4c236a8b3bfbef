/* SPDX-License-Identifier: MIT */
/*
 * Private to control/reload, five files called one way:
 *   reload.c            the thread, its file watch and the public API
 *   reload_file.c       the config file: read, checked and applied
 *   reload_diff.c       what a new file changes: live keys, restart keys (no side effect)
 *   reload_kube_dns.c   the kube-dns ConfigMap: its watch, its keys, their routes applied
 *   reload_routes.c     what both make for the forwarder (the routes), and small helpers
 * reload.c -> reload_file.c -> reload_diff.c, reload_kube_dns.c -> reload_routes.c.
 */
#ifndef NDC_RELOAD_INTERNAL_H
#define NDC_RELOAD_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "config/config_opts.h"
#include "reload/reload.h"

/* kubelet's ConfigMap update is a few renames and removals in a row: wait for them to settle. */
#define RELOAD_SETTLE_MS 100
#define RELOAD_SETTLE_MAX_MS 1000
/* A stat of the file this often catches what inotify cannot see (a symlink into another dir). */
#define RELOAD_STAT_MS 2000
#define RELOAD_FILE_MAX (1 << 20)
#define LIST_MAX 512 /* "upstream, stub_domains, ..." */

enum cm_key { CM_STUBS = 0, CM_UPSTREAMS, CM_KEYS };
extern const char *const ndc_reload_cm_keys[CM_KEYS]; /* "stubDomains", "upstreamNameservers" */

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

#define ROUTES_MAX (2 * NDC_CFG_MAX_STUBS + 3)

struct routes {
	struct ndc_forwarder_opts o;
	struct ndc_forwarder_route r[ROUTES_MAX];
	size_t n_zones; /* stub domains among them */
};

/* ---- reload_routes.c ---- */

/* The running configuration, or the last file applied over it. */
const struct ndc_config *ndc_reload_current(const struct ndc_reload *rl);
/* Wakes the thread (a request, a ConfigMap change). */
void ndc_reload_wake(struct ndc_reload *rl);
bool ndc_reload_same_str(const char *a, const char *b);
void ndc_reload_kd_free(struct kube_dns *kd);
/* A deep copy into dst (what dst held is freed): 0 or -ENOMEM (dst unchanged). */
int ndc_reload_kd_copy(struct kube_dns *dst, const struct kube_dns *src);
/* Appends ", name" (or "name") to a list of LIST_MAX bytes. */
void ndc_reload_list_add(char *list, const char *name);
void ndc_reload_addr_text(const struct sockaddr_storage *ss, char *buf, size_t len);
void ndc_reload_servers_text(const struct sockaddr_storage *v, size_t n, char *buf, size_t len);
/* The first of v's zones at or under zone, or NULL. */
const char *ndc_reload_stub_in_zone(const struct ndc_stub_domain *v, size_t n, const char *zone);
void ndc_reload_routes_make(const struct ndc_config *cfg, const char *zone_kept,
			    const struct kube_dns *kd, bool log_conflicts, struct routes *rt);
int ndc_reload_routes_apply(struct ndc_reload *rl, const struct routes *rt);
const char *ndc_reload_routes_error(int err);

/* ---- reload_diff.c ---- */

/* What a new file changes, from the configurations alone (no target is touched). */
struct reload_diff {
	char restart[LIST_MAX]; /* restart keys that differ from the running configuration */
	char records[LIST_MAX]; /* records.* keys that differ from what is in effect */
	/* records.pods: insecure asked for with the fast path loaded: a restart key, kept */
	bool pods_kept;
	/* Live keys that differ from what is in effect. */
	bool upstream, stub_domains, forward; /* the routes */
	bool cache, prefetch, per_client;     /* cache.*, cache.prefetch, forward.per_client */
	bool log_level, log_queries;	      /* log.level; log.queries and log.sample */
};

/*
 * next against cur (what is in effect: the running configuration or the last file applied) for
 * the live keys, against running (what the agent started with) for the restart keys; fastpath:
 * the fast path is loaded.
 */
void ndc_reload_diff(const struct ndc_config *next, const struct ndc_config *cur,
		     const struct ndc_config *running, bool fastpath, struct reload_diff *ret);

/* ---- reload_file.c ---- */

/* The file whole (at most RELOAD_FILE_MAX): 0 or -errno. */
int ndc_reload_read_file(const char *path, char **ret, size_t *ret_len, struct stat *ret_st);
/* Reads, checks and applies the file. force: even when it reads as before (SIGHUP). */
void ndc_reload_file(struct ndc_reload *rl, bool force);

/* ---- reload_kube_dns.c ---- */

/* Starts the ConfigMap's watch (when the running configuration asks for it): 0 or -errno. */
int ndc_reload_watch_kube_dns(struct ndc_reload *rl, const struct ndc_k8s_conn *conn);
/* The ConfigMap's values, applied on the reload thread. */
void ndc_reload_apply_kube_dns(struct ndc_reload *rl);

#endif
