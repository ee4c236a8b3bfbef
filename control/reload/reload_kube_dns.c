// SPDX-License-Identifier: MIT
/*
 * The kube-dns ConfigMap (kube-system/kube-dns): its watch thread parses stubDomains and
 * upstreamNameservers as they change (a bad key keeps its last good value) and hands them to the
 * reload thread, which applies their routes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include <ndc/log.h>

#include "internal.h"

const char *const ndc_reload_cm_keys[CM_KEYS] = {"stubDomains", "upstreamNameservers"};

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

	if (ndc_reload_same_str(text, rl->cm_raw[k]))
		return;
	free(rl->cm_raw[k]);
	rl->cm_raw[k] = text ? strdup(text) : NULL;
	if (k == CM_STUBS) {
		struct ndc_stub_domain *v = NULL;
		size_t n = 0;

		r = text ? ndc_kube_dns_stub_domains(text, strlen(text), &v, &n, err, sizeof(err))
			 : 0;
		inzone = r ? NULL : ndc_reload_stub_in_zone(v, n, rl->running->cluster_domain);
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
			 r == -ENOMEM ? "out of memory" : err, ndc_reload_cm_keys[k]);
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
			if (json_object_object_get_ex(data, ndc_reload_cm_keys[k], &v))
				text[k] = json_object_is_type(v, json_type_string)
					      ? json_object_get_string(v)
					      : "<not a string>";
	}
	pthread_mutex_lock(&rl->lock);
	for (int k = 0; k < CM_KEYS; k++)
		cm_key(rl, k, text[k], &rl->kd);
	rl->want_routes = true;
	pthread_mutex_unlock(&rl->lock);
	ndc_reload_wake(rl);
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
void ndc_reload_apply_kube_dns(struct ndc_reload *rl)
{
	struct kube_dns kd = {0};
	struct routes rt;
	char text[1024] = "", ups[600];
	int r;

	pthread_mutex_lock(&rl->lock);
	rl->want_routes = false;
	r = ndc_reload_kd_copy(&kd, &rl->kd);
	pthread_mutex_unlock(&rl->lock);
	if (r < 0)
		return;
	ndc_reload_routes_make(ndc_reload_current(rl), rl->running->cluster_domain, &kd, true, &rt);
	r = ndc_reload_routes_apply(rl, &rt);
	if (r < 0) {
		ndc_err("kube-dns ConfigMap: not applied, the last good routes stay: %s",
			ndc_reload_routes_error(r));
		atomic_fetch_add(&rl->cm_errors[CM_STUBS], 1);
		/* The next file reload must not fail on the ConfigMap's values. */
		pthread_mutex_lock(&rl->lock);
		ndc_reload_kd_copy(&rl->kd, &rl->kd_applied);
		pthread_mutex_unlock(&rl->lock);
		ndc_reload_kd_free(&kd);
		return;
	}
	ndc_reload_kd_free(&rl->kd_applied);
	rl->kd_applied = kd;
	if (r == 0)
		return;
	atomic_fetch_add(&rl->cm_updates, 1);
	for (size_t i = 0; i < kd.n_stubs; i++)
		ndc_reload_list_add(text, kd.stubs[i].zone);
	ndc_reload_servers_text(kd.ups, kd.n_ups, ups, sizeof(ups));
	ndc_info("kube-dns ConfigMap: applied: stubDomains %s; upstreamNameservers %s",
		 text[0] ? text : "none", kd.n_ups ? ups : "none (upstream)");
}

int ndc_reload_watch_kube_dns(struct ndc_reload *rl, const struct ndc_k8s_conn *conn)
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
