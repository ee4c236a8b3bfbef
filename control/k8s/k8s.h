/* SPDX-License-Identifier: MIT */
/*
 * Kubernetes API client: connection settings from a kubeconfig or the in-cluster service account,
 * and list/watch of Namespaces, Services, discovery.k8s.io/v1 EndpointSlices and (optionally)
 * Pods and MCS ServiceImports. libcurl for HTTPS (TLS always verified unless the kubeconfig says
 * insecure), json-c's incremental tokener for the watch streams. One thread per watched kind; the
 * callbacks run on those threads, so the consumer serialises (the object store takes its own
 * lock).
 */
#ifndef NDC_K8S_CLIENT_H
#define NDC_K8S_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct json_object;

struct ndc_k8s_conn {
	char *server;	  /* "https://host:port" */
	char *ca_file;	  /* PEM file, or NULL */
	char *ca_data;	  /* PEM text (decoded certificate-authority-data), or NULL */
	bool insecure;	  /* insecure-skip-tls-verify: true */
	char *token;	  /* bearer token given inline, or NULL */
	char *token_file; /* re-read when it changes and after a 401 */
	char *cert_file;  /* client-certificate */
	char *key_file;	  /* client-key */
	char *cert_data;  /* client-certificate-data, decoded PEM */
	char *key_data;	  /* client-key-data, decoded PEM */
};

/*
 * Reads a kubeconfig (YAML): current-context -> context -> cluster (server,
 * certificate-authority[-data], insecure-skip-tls-verify) and user (token, tokenFile,
 * client-certificate[-data], client-key[-data]). Relative paths are relative to the file's
 * directory. Returns 0 or -EINVAL/-errno with a one-line reason in err.
 */
int ndc_kubeconfig_load(const char *path, struct ndc_k8s_conn *ret, char *err, size_t errlen);

/*
 * In-cluster: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT, token and ca.crt from
 * sa_dir (NULL: /var/run/secrets/kubernetes.io/serviceaccount). -ENOENT with a reason when not
 * running in a cluster.
 */
int ndc_k8s_incluster(const char *sa_dir, struct ndc_k8s_conn *ret, char *err, size_t errlen);

void ndc_k8s_conn_free(struct ndc_k8s_conn *c);

/* Deep copy (the watcher keeps its own). 0 or -ENOMEM (ret then holds nothing to free). */
int ndc_k8s_conn_copy(const struct ndc_k8s_conn *c, struct ndc_k8s_conn *ret);

/* A bearer token file's content without trailing whitespace: 0, -errno, or -EINVAL when it is
 * empty or 64 KiB or more. */
int ndc_k8s_token_read(const char *path, char **ret);

enum ndc_k8s_kind {
	NDC_K8S_NAMESPACES = 0,
	NDC_K8S_SERVICES,
	NDC_K8S_ENDPOINTSLICES,
	NDC_K8S_PODS,
	/*
	 * multicluster.x-k8s.io/v1alpha1 ServiceImports (records.multicluster_zones). A cluster
	 * without the CRD answers the list 404: the kind then counts as listed with nothing in it
	 * and is looked for again every NDC_K8S_ABSENT_RETRY_S, never an error.
	 */
	NDC_K8S_SERVICEIMPORTS,
	/*
	 * One object, not a collection: the ConfigMap kube-system/kube-dns (stubDomains,
	 * upstreamNameservers), listed and watched with fieldSelector=metadata.name=kube-dns in
	 * its namespace, which RBAC can grant by resourceNames. Not an object of the record store.
	 */
	NDC_K8S_CONFIGMAPS,
	/*
	 * The Pods of one node (pod identity, control/pods/): the same collection as
	 * NDC_K8S_PODS, listed and watched with fieldSelector=spec.nodeName=<opts.node_name>, so
	 * the API server sends only the tens of pods scheduled there. A pod bound to the node
	 * arrives as ADDED, one that stops matching as DELETED (field selector semantics).
	 */
	NDC_K8S_NODE_PODS,
	NDC_K8S_KINDS,
};

enum ndc_k8s_event { NDC_K8S_ADDED = 0, NDC_K8S_MODIFIED, NDC_K8S_DELETED };

/*
 * What the watcher tells its consumer. A (re)list is list_begin, list_item for every object,
 * list_end: the consumer builds the new state aside and swaps it in at list_end, so no existing
 * name disappears in between (410 Gone relists the same way). Then events, one object each.
 * obj is owned by the watcher and valid only during the call. A BOOKMARK only moves the
 * resourceVersion and is not reported.
 */
struct ndc_k8s_watch_ops {
	void (*list_begin)(void *arg, enum ndc_k8s_kind kind);
	void (*list_item)(void *arg, enum ndc_k8s_kind kind, struct json_object *obj);
	void (*list_end)(void *arg, enum ndc_k8s_kind kind);
	void (*event)(void *arg, enum ndc_k8s_kind kind, enum ndc_k8s_event ev,
		      struct json_object *obj);
};

/* Zero fields take the defaults noted. */
struct ndc_k8s_watch_opts {
	uint32_t kinds;		 /* bit mask of 1u << enum ndc_k8s_kind */
	uint32_t page_size;	 /* list limit=, 500 */
	uint32_t timeout_s;	 /* watch timeoutSeconds=, 300 (server-side timeouts are normal) */
	uint32_t backoff_min_ms; /* 250: jittered exponential backoff between reconnects */
	uint32_t backoff_max_ms; /* 30000 */
	/*
	 * spec.nodeName of NDC_K8S_NODE_PODS (the downward API's, env NODE_NAME in the DaemonSet):
	 * required with that kind (-EINVAL without), URL-encoded into its field selector, copied.
	 */
	const char *node_name;
};

struct ndc_k8s_watch;

/*
 * Starts one thread per kind: gets the kind's state, then watches from its resourceVersion with
 * allowWatchBookmarks=true, forever, reconnecting with backoff. The state comes the cheapest way
 * the server offers: streamed at the start of the watch (sendInitialEvents=true, asked once per
 * watch and remembered when refused), else listed from its watch cache (resourceVersion=0 at
 * first, not older than ours on a relist), else a consistent paginated list (limit/continue).
 */
int ndc_k8s_watch_start(const struct ndc_k8s_conn *conn, const struct ndc_k8s_watch_opts *opts,
			const struct ndc_k8s_watch_ops *ops, void *arg, struct ndc_k8s_watch **ret);

/* Stops and joins the threads (aborting transfers in progress). NULL is fine. */
void ndc_k8s_watch_stop(struct ndc_k8s_watch *w);

/*
 * lists: complete states received, each way: syncs_stream (streamed over the watch,
 * sendInitialEvents), syncs_cache (listed from the watch cache), syncs_consistent (consistent
 * paginated lists); fallbacks: refusals that made the client give up a cheaper way (once per way
 * and watch: a refused stream, a refused cache list), or a list at our resourceVersion that the
 * server no longer knew (410/504: a consistent list instead, as client-go does).
 */
struct ndc_k8s_watch_stats {
	uint64_t lists, events, bookmarks, relists_410, reconnects, auth_failures, errors;
	uint64_t syncs_stream, syncs_cache, syncs_consistent, fallbacks;
};
void ndc_k8s_watch_stats(struct ndc_k8s_watch *w, struct ndc_k8s_watch_stats *ret);

/* ndcache_k8s_relists_total .. ndcache_k8s_sync_fallbacks_total: an ndc_metrics_fn
 * (metrics/metrics.h) over a watch (NULL: zeros). */
struct ndc_metrics_buf;
void ndc_k8s_watch_metrics(void *watch, struct ndc_metrics_buf *b);

/*
 * Feeds a watch stream (what the API server sends after the headers) through the same parser
 * the watch threads use, chunk bytes at a time, calling ops->event for each event: the fuzz
 * target's entry and the tests'. Returns 0, -ESTALE after an ERROR 410 event, -EBADMSG for bad
 * JSON or an oversized event (the watch would reconnect).
 */
int ndc_k8s_stream_replay(enum ndc_k8s_kind kind, const char *data, size_t len, size_t chunk,
			  const struct ndc_k8s_watch_ops *ops, void *arg);

/*
 * The same for one list page (a response body), through the list parser the watch threads use:
 * list_begin and list_item for each object as it completes, then, when the rest of the page is a
 * List skeleton (metadata, an "items" array and nothing broken), list_end. Returns 0, -EBADMSG
 * for a page that is not a List, -E2BIG for an item or skeleton over the size limit.
 */
int ndc_k8s_list_replay(enum ndc_k8s_kind kind, const char *data, size_t len, size_t chunk,
			const struct ndc_k8s_watch_ops *ops, void *arg);

#endif
