/* SPDX-License-Identifier: MIT */
/*
 * Private to the three files of the Kubernetes client; included by nothing else:
 * - k8s_client.c: the list/watch protocol, the per-kind threads and the public API;
 * - k8s_transfer.c: one HTTP request to the API server (bearer token, curl handle options, the
 *   transfer loop and its write callback);
 * - k8s_stream.c: reading what the server sends (watch stream, list pages, Status bodies) and the
 *   replays that feed the same parsers without a connection.
 * What they share: the watch and per-kind worker state, and the steps that cross between them.
 */
#ifndef NDC_K8S_CLIENT_INTERNAL_H
#define NDC_K8S_CLIENT_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include <curl/curl.h>

#include "k8s/k8s.h"

struct json_object;
struct json_tokener;

/* API objects nest ~10 levels; managedFields on Pods go deeper than json-c's default of 32. */
#define NDC_K8S_JSON_DEPTH 64
/* One list page (page_size objects) or one watch event: beyond this the server is broken. */
#define NDC_K8S_MAX_BODY ((size_t)256 << 20)

struct kind_info {
	const char *path, *kind, *api_version, *name;
	const char *query; /* NULL, or parameters every list and watch adds ("fieldSelector=...") */
	bool by_node; /* query ends in "=": the node's name (opts.node_name) follows, encoded */
};

struct buf {
	char *p;
	size_t len, cap, max;
};

/*
 * Why a transfer ended early (set by the write callback, which then aborts it). ABORT_NOSTREAM:
 * asked for the initial state over the watch, the server sent a plain watch (a bookmark without
 * the initial-events-end annotation): it ignored sendInitialEvents. ABORT_NOSTREAM_DELETED: it
 * sent a DELETED event inside the initial state, which is ADDED events only: the same verdict.
 */
enum abort_reason {
	ABORT_NONE = 0,
	ABORT_STOP,
	ABORT_RELIST,
	ABORT_BAD,
	ABORT_TOO_BIG,
	ABORT_NOSTREAM,
	ABORT_NOSTREAM_DELETED
};

/*
 * The three ways to get a kind's whole state, cheapest for the API server first (k8s_client.c
 * says when each is used): streamed over the watch from the watch cache (WatchList), listed from
 * the watch cache (resourceVersion=0, or not older than ours), a consistent paginated list
 * (served from etcd by API servers before 1.31).
 */
enum sync_how { SYNC_STREAM = 0, SYNC_CACHE, SYNC_CONSISTENT, SYNC_HOWS };

/*
 * Whether the API server offers a way (SYNC_STREAM, SYNC_CACHE): decided once per watch, by the
 * one worker whose request asks while the others wait for its answer, and kept when refused.
 */
enum offer { OFFER_UNKNOWN = 0, OFFER_ASKING, OFFER_YES, OFFER_NO };

struct worker {
	struct ndc_k8s_watch *w;
	enum ndc_k8s_kind kind;
	const struct kind_info *ki;
	char *query; /* ki->query, with the node's name when by_node; NULL: none */
	pthread_t tid;
	bool started;
	CURL *easy;
	CURLM *multi;
	struct json_tokener *tok;
	char errbuf[CURL_ERROR_SIZE];
	uint64_t rand;
	unsigned failures;
	bool absent; /* an optional kind not served (404), reported empty once */
	char rv[128];
	/* The server no longer knows rv (410 or 504 to a list at it): the next list is consistent.
	 */
	bool rv_unavailable;
	enum sync_how asking; /* the way this worker's request asks about, or SYNC_HOWS */

	/* One transfer. */
	bool watching;
	bool initial;	   /* a streamed initial state: events are list items until its end */
	bool initial_done; /* ... and its end bookmark arrived */
	long status;
	struct buf body; /* error bodies; for a list page its skeleton (all but the items) */
	enum abort_reason abort;
	unsigned received; /* watch events and bookmarks */

	/* A list page, split into items as it arrives (see ndc_k8s_list_feed). */
	struct {
		enum { LS_OUT, LS_ITEMS, LS_ITEM } state;
		unsigned depth;
		bool in_str, esc, comma;
		size_t n_page;
	} ls;
	struct buf item;
	bool list_begun;
	size_t list_items;
};

struct ndc_k8s_watch {
	struct ndc_k8s_conn conn;
	struct ndc_k8s_watch_opts opts;
	struct ndc_k8s_watch_ops ops;
	void *arg;
	atomic_bool stop;
	pthread_mutex_t lock; /* backoff sleeps, offers */
	pthread_cond_t cond;
	enum offer offer[SYNC_CONSISTENT]; /* of SYNC_STREAM and SYNC_CACHE */
	/*
	 * The protocol's hook for the transfer (which sits below it): the request that asks about
	 * a way (worker.asking) got a 200, so the server offers it.
	 */
	void (*answered)(struct worker *t);

	pthread_mutex_t token_lock;
	char *token; /* current bearer token: token_file's content, else conn.token */
	struct stat token_st;
	bool token_st_valid;

	struct {
		atomic_uint_fast64_t lists, events, bookmarks, relists_410, reconnects,
		    auth_failures, errors, fallbacks;
		atomic_uint_fast64_t syncs[SYNC_HOWS];
	} st;
	struct worker workers[NDC_K8S_KINDS];
};

/* Path, kind and apiVersion of each kind, indexed by enum ndc_k8s_kind (in k8s_stream.c). */
extern const struct kind_info ndc_k8s_kind_info[NDC_K8S_KINDS];

static inline void ndc_k8s_count(atomic_uint_fast64_t *c)
{
	atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

static inline bool ndc_k8s_stopping(struct ndc_k8s_watch *w)
{
	return atomic_load_explicit(&w->stop, memory_order_acquire);
}

/* ---- k8s_transfer.c ---- */

/*
 * Re-reads conn.token_file when it changed (force: after a 401, read it regardless). Returns
 * true when the token changed.
 */
bool ndc_k8s_token_refresh(struct ndc_k8s_watch *w, bool force);

/* The options that stay the same for every request of t->easy. 0 or -EINVAL. */
int ndc_k8s_setup_easy(struct worker *t);

/*
 * One request to url, the response body going to the parsers below. Returns 0 with t->status
 * set (t->abort says if the write callback cut it short), -EACCES after a 401, -ECANCELED on
 * stop, -ENOMEM, or -EIO on a transport error (logged).
 */
int ndc_k8s_request(struct worker *t, const char *url);

/* ---- k8s_stream.c ---- */

/* Appends to b (kept NUL-terminated): 0, -E2BIG past b->max, or -ENOMEM. */
int ndc_k8s_buf_add(struct buf *b, const char *data, size_t len);

/* t->rv = obj's metadata.resourceVersion, when it has one that fits. */
void ndc_k8s_set_rv(struct worker *t, struct json_object *obj);

/*
 * The write callback's halves for a 200 response: a watch stream (events go to ops->event) and a
 * list page (items go to ops->list_begin/list_item). Return len, or CURL_WRITEFUNC_ERROR with
 * t->abort set.
 */
size_t ndc_k8s_feed_stream(struct worker *t, const char *data, size_t len);
size_t ndc_k8s_list_feed(struct worker *t, const char *data, size_t len);

/*
 * The rest of a list page once its items are gone (the caller puts it), *ret_md its metadata;
 * NULL unless it is a List skeleton.
 */
struct json_object *ndc_k8s_page_skeleton(struct worker *t, struct json_object **ret_md);

/*
 * A kind's whole state has arrived (how): counts it, tells the consumer (list_end). The list
 * and the streamed initial state end the same way.
 */
void ndc_k8s_sync_done(struct worker *t, enum sync_how how);

/* An error body's Status message, for the log (a thread-local buffer or a constant). */
const char *ndc_k8s_status_message(struct worker *t);

#endif
