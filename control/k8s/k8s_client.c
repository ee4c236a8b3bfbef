// SPDX-License-Identifier: MIT
/*
 * List/watch of the kinds DNS needs, one thread per kind, the way client-go's reflector does it:
 * the state (streamed at the start of the watch, or listed) gives the objects and a
 * resourceVersion, a watch from there gives the changes (bookmarks move the resourceVersion
 * forward while nothing changes), 410 Gone means the server's history no longer reaches back
 * that far and only a new state can resync.
 *
 * Each thread owns one curl easy handle inside its own multi handle: the multi keeps the TLS
 * connection alive between requests, and curl_multi_wakeup() lets ndc_k8s_watch_stop() interrupt
 * a transfer at once instead of waiting for the next progress callback.
 *
 * The requests themselves (token, curl options, the transfer loop) are in k8s_transfer.c and the
 * parsing of what the server sends in k8s_stream.c; this file is the protocol on top: when to
 * list, from where to watch, when to back off, and the threads that do it.
 */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <json-c/json.h>

#include <ndc/log.h>

#include "metrics/metrics.h"

#include "internal.h"

/* ---- the initial state ------------------------------------------------------------------------
 *
 * Every agent of a fleet lists every kind at its start, and again after a 410 or an API server
 * restart: that is the fleet's cost to the API server. The state comes the cheapest way the
 * server offers (the facts, with the API server versions, are in docs/FLEET.md):
 *
 * 1. Streamed over the watch itself (KEP-3157 WatchList): watch=true&sendInitialEvents=true&
 *    resourceVersionMatch=NotOlderThan, ADDED for every object, then a bookmark annotated
 *    k8s.io/initial-events-end, then the watch goes on. Served from the watch cache, one request,
 *    no list response held in the server's memory. Servers with the WatchList gate off refuse it
 *    with 422 Invalid (older ones refuse resourceVersionMatch on a watch, also 422); one that
 *    ignored both would send a plain watch, whose bookmarks lack the annotation. Asked by one
 *    worker per watch; the others wait for its answer, and a refusal is kept.
 * 2. Listed from the watch cache, as client-go's reflector lists: resourceVersion=0 at first
 *    ("any": the cache, however old a page limit makes the request look), and on a relist
 *    resourceVersion=<ours>&resourceVersionMatch=NotOlderThan without a limit, so that a relist
 *    is never older than what we had and stays in the cache on servers that send limited lists
 *    at a resourceVersion to etcd. 400/422/501 is a server that will not: kept, as above.
 *    A relist that fails keeps the resourceVersion we had, so the next one asks not older than
 *    it again: "any" once we had a state could be answered by a lagging API server (a new
 *    replica still filling its cache) with an older one, and the store would go back in time.
 * 3. The consistent paginated list (limit/continue, no resourceVersion), served from etcd before
 *    the ConsistentListFromCache feature (beta, on by default, in 1.31). Also the one list after
 *    the server answered 410 (Expired) or 504 (resourceVersion too large) to a list at ours.
 */

/*
 * A kind served only where its CRD is installed (MCS ServiceImports): a cluster without it is
 * normal, so its 404 is not an error but an empty kind, looked for again now and then.
 */
static bool optional_kind(enum ndc_k8s_kind kind)
{
	return kind == NDC_K8S_SERVICEIMPORTS;
}

static bool refused_status(long status)
{
	return status == 400 || status == 422 || status == 501;
}

/*
 * Whether the server offers how, as far as known; unknown: this worker's request asks (t->asking)
 * while the others wait here for its answer.
 */
static bool offered(struct worker *t, enum sync_how how)
{
	struct ndc_k8s_watch *w = t->w;
	enum offer o;

	pthread_mutex_lock(&w->lock);
	while ((o = w->offer[how]) == OFFER_ASKING && !ndc_k8s_stopping(w))
		pthread_cond_wait(&w->cond, &w->lock);
	if (o == OFFER_UNKNOWN) {
		w->offer[how] = OFFER_ASKING;
		t->asking = how;
	}
	pthread_mutex_unlock(&w->lock);
	return o != OFFER_NO;
}

/*
 * What a request said about how: OFFER_YES, OFFER_NO (any worker may find that), or
 * OFFER_UNKNOWN (it failed otherwise: the next request asks again). Returns true when this made
 * it OFFER_NO (counted as a fallback: the caller says why, once).
 */
static bool verdict(struct worker *t, enum sync_how how, enum offer o)
{
	struct ndc_k8s_watch *w = t->w;
	bool refused = false;

	if (t->asking != how && o != OFFER_NO)
		return false;
	pthread_mutex_lock(&w->lock);
	if (o == OFFER_NO)
		refused = w->offer[how] != OFFER_NO;
	if (o == OFFER_NO || w->offer[how] == OFFER_ASKING)
		w->offer[how] = o;
	if (t->asking == how)
		t->asking = SYNC_HOWS;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	if (refused)
		ndc_k8s_count(&w->st.fallbacks);
	return refused;
}

/* The transfer's hook (w->answered): a 200 to the request that asks. */
static void answered(struct worker *t)
{
	verdict(t, t->asking, OFFER_YES);
}

/* The request of one list page (cont: the continue token of the next page, or NULL). */
static char *list_url(struct worker *t, enum sync_how how, const char *at, const char *cont)
{
	struct ndc_k8s_watch *w = t->w;
	const char *q = t->query ? t->query : "", *amp = t->query ? "&" : "";
	char *url = NULL, *esc;
	int n;

	esc = curl_easy_escape(t->easy, cont ? cont : at, 0);
	if (!esc)
		return NULL;
	if (cont) /* continue carries the list's resourceVersion: no other may be given */
		n = asprintf(&url, "%s%s?%s%slimit=%u&continue=%s", w->conn.server, t->ki->path, q,
			     amp, w->opts.page_size, esc);
	else if (how == SYNC_CACHE && at[0])
		n = asprintf(&url, "%s%s?%s%sresourceVersion=%s&resourceVersionMatch=NotOlderThan",
			     w->conn.server, t->ki->path, q, amp, esc);
	else if (how == SYNC_CACHE)
		n = asprintf(&url, "%s%s?%s%sresourceVersion=0&limit=%u", w->conn.server,
			     t->ki->path, q, amp, w->opts.page_size);
	else
		n = asprintf(&url, "%s%s?%s%slimit=%u", w->conn.server, t->ki->path, q, amp,
			     w->opts.page_size);
	curl_free(esc);
	return n < 0 ? NULL : url;
}

/*
 * One complete list: list_begin, list_item for every object, list_end. From the watch cache
 * unless it was refused or the server no longer knows our resourceVersion; a refusal there falls
 * back to the consistent list at once. Returns 0 (rv set), -ESTALE when a continue token expired
 * (410: start over), or another negative errno.
 */
static int do_list(struct worker *t)
{
	struct ndc_k8s_watch *w = t->w;
	enum sync_how how = SYNC_CACHE;
	char *cont = NULL, *url = NULL, at[sizeof(t->rv)];
	int r;

	if (t->rv_unavailable || !offered(t, SYNC_CACHE))
		how = SYNC_CONSISTENT;
	memcpy(at, t->rv, sizeof(at));
	t->watching = false;
	t->initial = false;
restart:
	t->rv[0] = '\0';
	t->list_begun = false;
	t->list_items = 0;
	for (;;) {
		json_object *root = NULL, *md, *v;

		free(url);
		url = list_url(t, how, at, cont);
		if (!url) {
			r = -ENOMEM;
			goto out;
		}
		r = ndc_k8s_request(t, url);
		if (r < 0)
			goto out;
		if (!cont && how == SYNC_CACHE && refused_status(t->status)) {
			if (verdict(t, SYNC_CACHE, OFFER_NO)) {
				ndc_warn(
				    "k8s %s: list from the watch cache refused (HTTP %ld: %s): "
				    "consistent lists from now on",
				    t->ki->name, t->status, ndc_k8s_status_message(t));
			}
			how = SYNC_CONSISTENT;
			goto restart;
		}
		if (!cont && how == SYNC_CACHE && at[0] && (t->status == 410 || t->status == 504)) {
			/* Expired, or "too large resource version": as client-go, a consistent
			 * list re-establishes a resourceVersion the server knows (and the next
			 * one, should this one fail). */
			t->rv_unavailable = true;
			verdict(t, SYNC_CACHE, OFFER_UNKNOWN);
			ndc_k8s_count(&w->st.fallbacks);
			ndc_info("k8s %s: list at resourceVersion %s: HTTP %ld (%s), listing "
				 "consistently",
				 t->ki->name, at, t->status, ndc_k8s_status_message(t));
			how = SYNC_CONSISTENT;
			goto restart;
		}
		if (t->abort == ABORT_TOO_BIG) {
			ndc_warn("k8s %s: list page or item larger than %zu bytes", t->ki->name,
				 NDC_K8S_MAX_BODY);
			r = -E2BIG;
			goto out;
		}
		if (t->abort == ABORT_BAD) {
			ndc_warn("k8s %s: list: response is not a List", t->ki->name);
			r = -EBADMSG;
			goto out;
		}
		if (t->status == 410) {
			ndc_info("k8s %s: list: 410 Gone (%s), listing again", t->ki->name,
				 ndc_k8s_status_message(t));
			r = -ESTALE;
			goto out;
		}
		if (t->status == 404 && optional_kind(t->kind)) {
			r = -ENOENT; /* the CRD is not installed: absent() decides */
			goto out;
		}
		if (t->status != 200) {
			ndc_warn("k8s %s: list: HTTP %ld: %s", t->ki->name, t->status,
				 ndc_k8s_status_message(t));
			r = -EIO;
			goto out;
		}
		root = ndc_k8s_page_skeleton(t, &md);
		if (!root) {
			ndc_warn("k8s %s: list: response is not a List", t->ki->name);
			r = -EBADMSG;
			goto out;
		}
		if (!t->list_begun && w->ops.list_begin)
			w->ops.list_begin(w->arg, t->kind);
		t->list_begun = true;
		/* Every page carries the list's resourceVersion (the first page's snapshot). */
		ndc_k8s_set_rv(t, root);
		free(cont);
		cont = NULL;
		if (json_object_object_get_ex(md, "continue", &v) &&
		    json_object_is_type(v, json_type_string) && json_object_get_string_len(v) > 0)
			cont = strdup(json_object_get_string(v));
		json_object_put(root);
		if (!cont)
			break;
		if (ndc_k8s_stopping(w)) {
			r = -ECANCELED;
			goto out;
		}
	}
	if (!t->rv[0]) {
		ndc_warn("k8s %s: list without a resourceVersion", t->ki->name);
		r = -EBADMSG;
		goto out;
	}
	ndc_k8s_sync_done(t, how);
	r = 0;
out:
	/* A failed list leaves what we had: the next asks not older than it (see the top). */
	if (r < 0)
		memcpy(t->rv, at, sizeof(at));
	verdict(t, SYNC_CACHE, OFFER_UNKNOWN); /* failed before an answer: ask again */
	free(cont);
	free(url);
	return r;
}

/* ---- watch ------------------------------------------------------------------------------------
 */

enum watch_end {
	WATCH_TIMEOUT, /* the server ended the stream (timeoutSeconds): rewatch */
	WATCH_RELIST,  /* 410 Gone */
	WATCH_ERROR,   /* back off, then rewatch */
	WATCH_STOP,
	WATCH_REFUSED, /* no streamed initial state from this server: list */
};

/*
 * A watch from t->rv; initial: with the state streamed first (sendInitialEvents), from the
 * resourceVersion a relist would use (none at first or after a 410 to ours: a consistent read
 * from the cache, as client-go asks). t->initial_done tells whether the state arrived.
 */
static enum watch_end do_watch(struct worker *t, bool initial)
{
	struct ndc_k8s_watch *w = t->w;
	const char *q = t->query ? t->query : "", *amp = t->query ? "&" : "";
	char *url = NULL, *esc;
	int r;

	t->watching = true;
	t->initial = initial;
	t->initial_done = false;
	t->list_begun = false;
	t->list_items = 0;
	esc = curl_easy_escape(t->easy, t->rv, 0);
	if (!esc)
		return WATCH_ERROR;
	if (!initial)
		r = asprintf(&url,
			     "%s%s?%s%swatch=true&resourceVersion=%s&allowWatchBookmarks=true"
			     "&timeoutSeconds=%u",
			     w->conn.server, t->ki->path, q, amp, esc, w->opts.timeout_s);
	else
		r = asprintf(&url,
			     "%s%s?%s%swatch=true&sendInitialEvents=true"
			     "&resourceVersionMatch=NotOlderThan%s%s&allowWatchBookmarks=true"
			     "&timeoutSeconds=%u",
			     w->conn.server, t->ki->path, q, amp,
			     t->rv[0] && !t->rv_unavailable ? "&resourceVersion=" : "",
			     t->rv[0] && !t->rv_unavailable ? esc : "", w->opts.timeout_s);
	curl_free(esc);
	if (r < 0)
		return WATCH_ERROR;
	r = ndc_k8s_request(t, url);
	free(url);
	t->initial = false;
	if (r == -ECANCELED) {
		verdict(t, SYNC_STREAM, OFFER_UNKNOWN);
		return WATCH_STOP;
	}
	if (initial && r == 0 &&
	    (refused_status(t->status) || t->abort == ABORT_NOSTREAM ||
	     t->abort == ABORT_NOSTREAM_DELETED)) {
		if (!verdict(t, SYNC_STREAM, OFFER_NO))
			return WATCH_REFUSED;
		if (t->abort == ABORT_NOSTREAM)
			ndc_warn("k8s %s: the API server ignored sendInitialEvents (a bookmark "
				 "without k8s.io/initial-events-end): listing from now on",
				 t->ki->name);
		else if (t->abort == ABORT_NOSTREAM_DELETED)
			ndc_warn("k8s %s: the API server sent DELETED in the streamed initial "
				 "state (it sends ADDED only where it supports sendInitialEvents): "
				 "listing from now on",
				 t->ki->name);
		else
			ndc_info("k8s %s: no streamed initial state (HTTP %ld: %s): listing from "
				 "now on",
				 t->ki->name, t->status, ndc_k8s_status_message(t));
		return WATCH_REFUSED;
	}
	/* Any other failure says nothing about the offer: the next request asks again. */
	verdict(t, SYNC_STREAM, OFFER_UNKNOWN);
	if (r < 0)
		return WATCH_ERROR;
	if (t->status == 410 || t->abort == ABORT_RELIST) {
		if (initial) /* not even as a lower bound: the next stream is a consistent read */
			t->rv_unavailable = true;
		return WATCH_RELIST;
	}
	if (t->status == 404 && optional_kind(t->kind))
		return WATCH_RELIST; /* the CRD went away: the list says so (absent) */
	if (t->status != 200) {
		ndc_warn("k8s %s: watch: HTTP %ld: %s", t->ki->name, t->status,
			 ndc_k8s_status_message(t));
		return WATCH_ERROR;
	}
	if (t->abort == ABORT_TOO_BIG)
		ndc_warn("k8s %s: watch event larger than %zu bytes", t->ki->name,
			 NDC_K8S_MAX_BODY);
	if (t->abort != ABORT_NONE)
		return WATCH_ERROR;
	return WATCH_TIMEOUT;
}

/* ---- the per-kind thread ----------------------------------------------------------------------
 */

static uint64_t next_rand(struct worker *t)
{
	/* xorshift64: jitter only, no need for quality. */
	t->rand ^= t->rand << 13;
	t->rand ^= t->rand >> 7;
	t->rand ^= t->rand << 17;
	return t->rand;
}

/* Sleeps ms (or until stop); true when stopping. */
static bool sleep_ms(struct ndc_k8s_watch *w, uint64_t ms)
{
	struct timespec until;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += (time_t)(ms / 1000);
	until.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&w->lock);
	while (!ndc_k8s_stopping(w) &&
	       pthread_cond_timedwait(&w->cond, &w->lock, &until) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&w->lock);
	return ndc_k8s_stopping(w);
}

/* Full jitter over the upper half, so many agents restarting together spread out. */
static void backoff(struct worker *t)
{
	struct ndc_k8s_watch *w = t->w;
	unsigned shift = t->failures < 16 ? t->failures : 16;
	uint64_t ms = (uint64_t)w->opts.backoff_min_ms << shift;

	if (ms > w->opts.backoff_max_ms)
		ms = w->opts.backoff_max_ms;
	ms = ms / 2 + next_rand(t) % (ms / 2 + 1);
	t->failures++;
	ndc_info("k8s %s: retrying in %llu ms", t->ki->name, (unsigned long long)ms);
	sleep_ms(w, ms);
}

/*
 * An optional kind's list found no such resource (404: its CRD is not installed). The first time
 * the consumer gets an empty list, so the kind counts as listed (the agent gets ready and a kind
 * that had objects loses them), and one line at info; then the list is tried again every
 * backoff_max_ms, quietly, until the CRD appears.
 */
static void absent(struct worker *t)
{
	struct ndc_k8s_watch *w = t->w;

	if (!t->absent) {
		ndc_info("k8s %s: not served (HTTP 404: no such CRD in this cluster); it counts as "
			 "empty and is looked for again every %u s",
			 t->ki->name, (w->opts.backoff_max_ms + 999) / 1000);
		if (w->ops.list_begin)
			w->ops.list_begin(w->arg, t->kind);
		if (w->ops.list_end)
			w->ops.list_end(w->arg, t->kind);
		t->absent = true;
	}
	sleep_ms(w, w->opts.backoff_max_ms);
}

/* A list failed with r: back off unless it is worth an immediate retry. */
static void list_failed(struct worker *t, int r)
{
	struct ndc_k8s_watch *w = t->w;

	if (r == -ESTALE) {
		ndc_k8s_count(&w->st.relists_410);
		/* Straight away the first time: the next list starts a new snapshot. */
		if (t->failures++ == 0)
			return;
	} else {
		ndc_k8s_count(&w->st.errors);
	}
	backoff(t);
}

static void *worker_main(void *arg)
{
	struct worker *t = arg;
	struct ndc_k8s_watch *w = t->w;
	bool need_list = true, after_list = false;

	while (!ndc_k8s_stopping(w)) {
		struct timespec t0, t1;
		bool initial = false;
		enum watch_end end;

		if (need_list) {
			int r;

			initial = offered(t, SYNC_STREAM);
			if (ndc_k8s_stopping(w))
				break;
			if (!initial) {
				r = do_list(t);
				if (r == -ECANCELED)
					break;
				if (r == 0) {
					if (t->absent)
						ndc_info("k8s %s: now served", t->ki->name);
					t->absent = false;
					need_list = false;
					after_list = true;
					t->failures = 0;
				} else if (r == -ENOENT) {
					absent(t);
				} else {
					list_failed(t, r);
				}
				continue;
			}
		} else if (!after_list) {
			ndc_k8s_count(&w->st.reconnects);
		}
		after_list = false;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		end = do_watch(t, initial);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (initial && t->initial_done) {
			if (t->absent)
				ndc_info("k8s %s: now served", t->ki->name);
			t->absent = false;
			need_list = false;
			t->failures = 0;
		}
		if (end == WATCH_RELIST && t->status == 404 && optional_kind(t->kind)) {
			/* no CRD (a streamed state asked for, or it went away): empty, and slowly
			 */
			absent(t);
			need_list = true;
			continue;
		}
		switch (end) {
		case WATCH_STOP:
		case WATCH_REFUSED: /* list at once */
			break;
		case WATCH_RELIST:
			ndc_k8s_count(&w->st.relists_410);
			ndc_info("k8s %s: resourceVersion %s is too old (410 Gone), listing again",
				 t->ki->name, t->rv);
			need_list = true;
			break;
		case WATCH_TIMEOUT:
			/* A stream that ends at once without a single event is a server in trouble.
			 */
			if (t->received > 0 || t1.tv_sec - t0.tv_sec >= 1) {
				t->failures = 0;
				ndc_debug("k8s %s: watch ended, watching again from %s",
					  t->ki->name, t->rv);
				break;
			}
			backoff(t);
			break;
		case WATCH_ERROR:
			ndc_k8s_count(&w->st.errors);
			if (t->received > 0)
				t->failures = 0;
			backoff(t);
			break;
		}
	}
	return NULL;
}

/* ---- setup ------------------------------------------------------------------------------------
 */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_result;

static void curl_init(void)
{
	curl_init_result = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* The kind's query parameters; a node's kind gets the node's name, percent-encoded. */
static int worker_query(struct worker *t, const char *node)
{
	char *esc;
	int n;

	if (!t->ki->query)
		return 0;
	if (!t->ki->by_node) {
		t->query = strdup(t->ki->query);
		return t->query ? 0 : -ENOMEM;
	}
	esc = curl_easy_escape(t->easy, node, 0);
	if (!esc)
		return -ENOMEM;
	n = asprintf(&t->query, "%s%s", t->ki->query, esc);
	curl_free(esc);
	if (n < 0) {
		t->query = NULL;
		return -ENOMEM;
	}
	return 0;
}

static void watch_free(struct ndc_k8s_watch *w)
{
	for (int k = 0; k < NDC_K8S_KINDS; k++) {
		struct worker *t = &w->workers[k];

		if (t->easy)
			curl_easy_cleanup(t->easy);
		if (t->multi)
			curl_multi_cleanup(t->multi);
		if (t->tok)
			json_tokener_free(t->tok);
		free(t->body.p);
		free(t->item.p);
		free(t->query);
	}
	if (w->token)
		explicit_bzero(w->token, strlen(w->token));
	free(w->token);
	ndc_k8s_conn_free(&w->conn);
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
	pthread_mutex_destroy(&w->token_lock);
	free(w);
}

int ndc_k8s_watch_start(const struct ndc_k8s_conn *conn, const struct ndc_k8s_watch_opts *opts,
			const struct ndc_k8s_watch_ops *ops, void *arg, struct ndc_k8s_watch **ret)
{
	struct ndc_k8s_watch *w;
	pthread_condattr_t ca;
	struct timespec now;
	int r;

	*ret = NULL;
	if (!conn || !conn->server || !ops || !opts || !opts->kinds ||
	    opts->kinds >= 1u << NDC_K8S_KINDS)
		return -EINVAL;
	if (opts->kinds & 1u << NDC_K8S_NODE_PODS && (!opts->node_name || !opts->node_name[0]))
		return -EINVAL;
	pthread_once(&curl_once, curl_init);
	if (curl_init_result != CURLE_OK)
		return -ENOMEM;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	pthread_mutex_init(&w->lock, NULL);
	pthread_mutex_init(&w->token_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cond, &ca);
	pthread_condattr_destroy(&ca);
	w->opts = *opts;
	w->opts.node_name = NULL; /* the caller's: only the workers' queries keep it */
	if (!w->opts.page_size)
		w->opts.page_size = 500;
	if (!w->opts.timeout_s)
		w->opts.timeout_s = 300;
	if (!w->opts.backoff_min_ms)
		w->opts.backoff_min_ms = 250;
	if (!w->opts.backoff_max_ms)
		w->opts.backoff_max_ms = 30000;
	if (w->opts.backoff_max_ms < w->opts.backoff_min_ms)
		w->opts.backoff_max_ms = w->opts.backoff_min_ms;
	w->ops = *ops;
	w->arg = arg;
	w->answered = answered;
	r = ndc_k8s_conn_copy(conn, &w->conn);
	if (r < 0)
		goto fail;
	if (conn->token) {
		w->token = strdup(conn->token);
		if (!w->token) {
			r = -ENOMEM;
			goto fail;
		}
	}
	ndc_k8s_token_refresh(w, true);
	if (w->conn.insecure)
		ndc_warn("k8s: TLS verification of %s is off (insecure-skip-tls-verify)",
			 w->conn.server);
	clock_gettime(CLOCK_REALTIME, &now);
	for (int k = 0; k < NDC_K8S_KINDS; k++) {
		struct worker *t = &w->workers[k];

		if (!(opts->kinds & 1u << k))
			continue;
		t->w = w;
		t->kind = (enum ndc_k8s_kind)k;
		t->ki = &ndc_k8s_kind_info[k];
		t->asking = SYNC_HOWS;
		t->rand = ((uint64_t)now.tv_nsec << 20) ^ (uint64_t)now.tv_sec ^
			  ((uint64_t)getpid() << 40) ^ ((uint64_t)k + 1) * 0x9e3779b97f4a7c15ull;
		if (!t->rand)
			t->rand = 1;
		t->easy = curl_easy_init();
		t->multi = curl_multi_init();
		t->tok = json_tokener_new_ex(NDC_K8S_JSON_DEPTH);
		if (!t->easy || !t->multi || !t->tok) {
			r = -ENOMEM;
			goto fail;
		}
		r = ndc_k8s_setup_easy(t);
		if (r < 0) {
			ndc_err("k8s: libcurl rejected the TLS settings for %s", w->conn.server);
			goto fail;
		}
		r = worker_query(t, opts->node_name);
		if (r < 0)
			goto fail;
	}
	for (int k = 0; k < NDC_K8S_KINDS; k++) {
		struct worker *t = &w->workers[k];

		if (!t->w)
			continue;
		r = -pthread_create(&t->tid, NULL, worker_main, t);
		if (r < 0) {
			ndc_k8s_watch_stop(w);
			return r;
		}
		t->started = true;
	}
	*ret = w;
	return 0;
fail:
	watch_free(w);
	return r;
}

void ndc_k8s_watch_stop(struct ndc_k8s_watch *w)
{
	if (!w)
		return;
	atomic_store_explicit(&w->stop, true, memory_order_release);
	pthread_mutex_lock(&w->lock);
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	for (int k = 0; k < NDC_K8S_KINDS; k++)
		if (w->workers[k].started)
			curl_multi_wakeup(w->workers[k].multi);
	for (int k = 0; k < NDC_K8S_KINDS; k++)
		if (w->workers[k].started)
			pthread_join(w->workers[k].tid, NULL);
	watch_free(w);
}

void ndc_k8s_watch_stats(struct ndc_k8s_watch *w, struct ndc_k8s_watch_stats *ret)
{
	memset(ret, 0, sizeof(*ret));
	if (!w)
		return;
	ret->lists = atomic_load_explicit(&w->st.lists, memory_order_relaxed);
	ret->events = atomic_load_explicit(&w->st.events, memory_order_relaxed);
	ret->bookmarks = atomic_load_explicit(&w->st.bookmarks, memory_order_relaxed);
	ret->relists_410 = atomic_load_explicit(&w->st.relists_410, memory_order_relaxed);
	ret->reconnects = atomic_load_explicit(&w->st.reconnects, memory_order_relaxed);
	ret->auth_failures = atomic_load_explicit(&w->st.auth_failures, memory_order_relaxed);
	ret->errors = atomic_load_explicit(&w->st.errors, memory_order_relaxed);
	ret->fallbacks = atomic_load_explicit(&w->st.fallbacks, memory_order_relaxed);
	ret->syncs_stream = atomic_load_explicit(&w->st.syncs[SYNC_STREAM], memory_order_relaxed);
	ret->syncs_cache = atomic_load_explicit(&w->st.syncs[SYNC_CACHE], memory_order_relaxed);
	ret->syncs_consistent =
	    atomic_load_explicit(&w->st.syncs[SYNC_CONSISTENT], memory_order_relaxed);
}

#define F(...) NDC_METRIC_FIELD(struct ndc_k8s_watch_stats, __VA_ARGS__)

/* Issue 25: how each kind's whole state came, what the API server paid for it. */
static const char sync_help[] =
    "Whole states of a kind received: streamed over the watch, listed from the watch cache, or "
    "a consistent paginated list.";

static const struct ndc_metric_field watch_fields[] = {
    F(relists_410, "k8s_relists_total", "counter", "Relists after 410 Gone.", NULL),
    F(reconnects, "k8s_reconnects_total", "counter", "Watch reconnects.", NULL),
    F(auth_failures, "k8s_auth_failures_total", "counter", "401 answers from the API server.",
      NULL),
    F(syncs_stream, "k8s_syncs_total", "counter", sync_help, "how=\"stream\""),
    F(syncs_cache, "k8s_syncs_total", "counter", sync_help, "how=\"cache\""),
    F(syncs_consistent, "k8s_syncs_total", "counter", sync_help, "how=\"consistent\""),
    F(fallbacks, "k8s_sync_fallbacks_total", "counter",
      "A cheaper way to get the state refused by the API server, or a relist at our "
      "resourceVersion it no longer knew.",
      NULL),
};

void ndc_k8s_watch_metrics(void *watch, struct ndc_metrics_buf *b)
{
	struct ndc_k8s_watch_stats st;

	ndc_k8s_watch_stats(watch, &st);
	NDC_METRIC_TABLE(b, watch_fields, &st, NULL);
}
