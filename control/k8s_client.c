// SPDX-License-Identifier: MIT
/*
 * List/watch of the kinds DNS needs, one thread per kind, the way client-go's reflector does it:
 * a paginated list gives the state and a resourceVersion, a watch from there gives the changes
 * (bookmarks move the resourceVersion forward while nothing changes), 410 Gone means the
 * server's history no longer reaches back that far and only a new list can resync.
 *
 * Each thread owns one curl easy handle inside its own multi handle: the multi keeps the TLS
 * connection alive between requests, and curl_multi_wakeup() lets ndc_k8s_watch_stop() interrupt
 * a transfer at once instead of waiting for the next progress callback.
 */
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <json-c/json.h>

#include <ndc/log.h>

#include "k8s_client.h"

#ifndef NDC_VERSION
#define NDC_VERSION "dev"
#endif

/* API objects nest ~10 levels; managedFields on Pods go deeper than json-c's default of 32. */
#define NDC_K8S_JSON_DEPTH 64
/* One list page (page_size objects) or one watch event: beyond this the server is broken. */
#define NDC_K8S_MAX_BODY ((size_t)256 << 20)
/* An error response body is only read for its Status message. */
#define NDC_K8S_MAX_ERROR_BODY ((size_t)64 << 10)
#define NDC_K8S_CONNECT_TIMEOUT_MS 10000L
/* A list stalled this long is dead; a watch may be silent for its whole timeoutSeconds. */
#define NDC_K8S_LIST_STALL_S 60L
#define NDC_K8S_WATCH_GRACE_S 30L
#define NDC_K8S_POLL_MS 1000

struct kind_info {
	const char *path, *kind, *api_version, *name;
};

static const struct kind_info kinds[NDC_K8S_KINDS] = {
    [NDC_K8S_NAMESPACES] = {"/api/v1/namespaces", "Namespace", "v1", "namespaces"},
    [NDC_K8S_SERVICES] = {"/api/v1/services", "Service", "v1", "services"},
    [NDC_K8S_ENDPOINTSLICES] = {"/apis/discovery.k8s.io/v1/endpointslices", "EndpointSlice",
				"discovery.k8s.io/v1", "endpointslices"},
    [NDC_K8S_PODS] = {"/api/v1/pods", "Pod", "v1", "pods"},
};

struct buf {
	char *p;
	size_t len, cap, max;
};

/* Why a transfer ended early (set by the write callback, which then aborts it). */
enum abort_reason { ABORT_NONE = 0, ABORT_STOP, ABORT_RELIST, ABORT_BAD, ABORT_TOO_BIG };

struct worker {
	struct ndc_k8s_watch *w;
	enum ndc_k8s_kind kind;
	const struct kind_info *ki;
	pthread_t tid;
	bool started;
	CURL *easy;
	CURLM *multi;
	struct json_tokener *tok;
	char errbuf[CURL_ERROR_SIZE];
	uint64_t rand;
	unsigned failures;
	char rv[128];

	/* One transfer. */
	bool watching;
	long status;
	struct buf body; /* error bodies; for a list page its skeleton (all but the items) */
	enum abort_reason abort;
	unsigned received; /* watch events and bookmarks */

	/* A list page, split into items as it arrives (see list_feed). */
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
	pthread_mutex_t lock; /* backoff sleeps */
	pthread_cond_t cond;

	pthread_mutex_t token_lock;
	char *token; /* current bearer token: token_file's content, else conn.token */
	struct stat token_st;
	bool token_st_valid;

	struct {
		atomic_uint_fast64_t lists, events, bookmarks, relists_410, reconnects,
		    auth_failures, errors;
	} st;
	struct worker workers[NDC_K8S_KINDS];
};

static void count(atomic_uint_fast64_t *c)
{
	atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

static bool stopping(struct ndc_k8s_watch *w)
{
	return atomic_load_explicit(&w->stop, memory_order_acquire);
}

static int buf_add(struct buf *b, const char *data, size_t len)
{
	if (len > b->max - b->len)
		return -E2BIG;
	if (b->len + len + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 16384;
		char *p;

		while (cap < b->len + len + 1)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p)
			return -ENOMEM;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, data, len);
	b->len += len;
	b->p[b->len] = '\0';
	return 0;
}

/* ---- bearer token ---------------------------------------------------------------------------- */

/*
 * The kubelet rotates projected service-account tokens by replacing the file (a new inode via
 * a symlink swap), so a change in inode, size or mtime means re-read. force: after a 401.
 * Returns true when the token changed.
 */
static bool token_refresh(struct ndc_k8s_watch *w, bool force)
{
	const char *path = w->conn.token_file;
	bool changed = false;
	struct stat st;
	char *tok;
	int r;

	if (!path)
		return false;
	pthread_mutex_lock(&w->token_lock);
	if (stat(path, &st) < 0) {
		if (force)
			ndc_warn("k8s: token file %s: %s", path, strerror(errno));
		goto out;
	}
	if (!force && w->token_st_valid && st.st_ino == w->token_st.st_ino &&
	    st.st_dev == w->token_st.st_dev && st.st_size == w->token_st.st_size &&
	    st.st_mtim.tv_sec == w->token_st.st_mtim.tv_sec &&
	    st.st_mtim.tv_nsec == w->token_st.st_mtim.tv_nsec)
		goto out;
	r = ndc_k8s_token_read(path, &tok);
	if (r < 0) {
		ndc_warn("k8s: token file %s: %s", path,
			 r == -EINVAL ? "empty or too large" : strerror(-r));
		goto out;
	}
	w->token_st = st;
	w->token_st_valid = true;
	if (!w->token || strcmp(w->token, tok)) {
		free(w->token);
		w->token = tok;
		changed = true;
		ndc_info("k8s: read a new token from %s", path);
	} else {
		free(tok);
	}
out:
	pthread_mutex_unlock(&w->token_lock);
	return changed;
}

static struct curl_slist *request_headers(struct ndc_k8s_watch *w)
{
	struct curl_slist *h, *n;
	char *auth = NULL;

	h = curl_slist_append(NULL, "Accept: application/json");
	if (!h)
		return NULL;
	pthread_mutex_lock(&w->token_lock);
	if (w->token && asprintf(&auth, "Authorization: Bearer %s", w->token) < 0)
		auth = NULL;
	pthread_mutex_unlock(&w->token_lock);
	if (!auth)
		return h;
	n = curl_slist_append(h, auth);
	/* The header holds a credential: do not leave copies in freed heap memory. */
	explicit_bzero(auth, strlen(auth));
	free(auth);
	if (!n) {
		curl_slist_free_all(h);
		return NULL;
	}
	return n;
}

/* ---- one HTTP transfer ------------------------------------------------------------------------
 */

static void handle_event(struct worker *t, json_object *ev);
static size_t list_feed(struct worker *t, const char *data, size_t len);

static void set_rv(struct worker *t, json_object *obj)
{
	json_object *md, *rv;

	if (json_object_object_get_ex(obj, "metadata", &md) &&
	    json_object_object_get_ex(md, "resourceVersion", &rv) &&
	    json_object_is_type(rv, json_type_string) &&
	    (size_t)json_object_get_string_len(rv) < sizeof(t->rv))
		memcpy(t->rv, json_object_get_string(rv), json_object_get_string_len(rv) + 1);
}

/* List items and watch objects may lack kind (list items always do on a real server). */
static void set_kind(struct worker *t, json_object *obj)
{
	json_object *v;

	if (!json_object_object_get_ex(obj, "kind", &v) ||
	    !json_object_is_type(v, json_type_string))
		json_object_object_add(obj, "kind", json_object_new_string(t->ki->kind));
	if (!json_object_object_get_ex(obj, "apiVersion", &v))
		json_object_object_add(obj, "apiVersion",
				       json_object_new_string(t->ki->api_version));
}

/* Watch events arrive one JSON object per line, split across chunks at any byte. */
static size_t feed_stream(struct worker *t, const char *data, size_t len)
{
	size_t off = 0;

	while (off < len) {
		enum json_tokener_error jerr;
		size_t n = len - off > INT_MAX ? INT_MAX : len - off;
		json_object *ev;

		ev = json_tokener_parse_ex(t->tok, data + off, (int)n);
		jerr = json_tokener_get_error(t->tok);
		if (jerr == json_tokener_continue) {
			/* Bound one event's size: the tokener would buffer without limit. */
			t->body.len += n;
			if (t->body.len > NDC_K8S_MAX_BODY) {
				t->abort = ABORT_TOO_BIG;
				return CURL_WRITEFUNC_ERROR;
			}
			break;
		}
		if (jerr != json_tokener_success) {
			ndc_warn("k8s %s: watch stream: bad JSON: %s", t->ki->name,
				 json_tokener_error_desc(jerr));
			t->abort = ABORT_BAD;
			return CURL_WRITEFUNC_ERROR;
		}
		off += json_tokener_get_parse_end(t->tok);
		t->body.len = 0;
		handle_event(t, ev);
		json_object_put(ev);
		if (t->abort)
			return CURL_WRITEFUNC_ERROR;
	}
	return len;
}

static size_t on_data(char *data, size_t size, size_t nmemb, void *arg)
{
	struct worker *t = arg;
	size_t len = size * nmemb;

	if (stopping(t->w)) {
		t->abort = ABORT_STOP;
		return CURL_WRITEFUNC_ERROR;
	}
	if (!t->status) {
		curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &t->status);
		if (t->status != 200)
			t->body.max = NDC_K8S_MAX_ERROR_BODY;
	}
	if (t->status == 200)
		return t->watching ? feed_stream(t, data, len) : list_feed(t, data, len);
	if (buf_add(&t->body, data, len) < 0) {
		/* An oversized error body still tells us the status; ignore the rest. */
		if (t->status != 200)
			return len;
		t->abort = ABORT_TOO_BIG;
		return CURL_WRITEFUNC_ERROR;
	}
	return len;
}

/*
 * Runs one request to completion or until stop. Returns 0 with t->status set (t->abort says if
 * the write callback cut it short), -ECANCELED on stop, -EIO on a transport error (logged).
 */
static int run_transfer(struct worker *t, const char *url, struct curl_slist *hdrs)
{
	struct ndc_k8s_watch *w = t->w;
	CURLcode cc = CURLE_OK;
	CURLMcode mc;
	CURLMsg *msg;
	int running = 1, left;

	t->status = 0;
	t->abort = ABORT_NONE;
	t->body.len = 0;
	t->body.max = NDC_K8S_MAX_BODY;
	t->received = 0;
	memset(&t->ls, 0, sizeof(t->ls));
	t->item.len = 0;
	t->item.max = NDC_K8S_MAX_BODY;
	t->errbuf[0] = '\0';
	json_tokener_reset(t->tok);
	curl_easy_setopt(t->easy, CURLOPT_URL, url);
	curl_easy_setopt(t->easy, CURLOPT_HTTPHEADER, hdrs);
	if (t->watching) {
		curl_easy_setopt(t->easy, CURLOPT_LOW_SPEED_LIMIT, 0L);
		curl_easy_setopt(t->easy, CURLOPT_LOW_SPEED_TIME, 0L);
		/* The server ends the stream after timeoutSeconds; past that it is a dead peer. */
		curl_easy_setopt(t->easy, CURLOPT_TIMEOUT_MS,
				 ((long)w->opts.timeout_s + NDC_K8S_WATCH_GRACE_S) * 1000L);
	} else {
		curl_easy_setopt(t->easy, CURLOPT_TIMEOUT_MS, 0L);
		curl_easy_setopt(t->easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(t->easy, CURLOPT_LOW_SPEED_TIME, NDC_K8S_LIST_STALL_S);
	}
	mc = curl_multi_add_handle(t->multi, t->easy);
	if (mc != CURLM_OK) {
		ndc_warn("k8s %s: %s", t->ki->name, curl_multi_strerror(mc));
		return -EIO;
	}
	while (running) {
		mc = curl_multi_perform(t->multi, &running);
		if (mc != CURLM_OK || !running)
			break;
		if (stopping(w))
			break;
		mc = curl_multi_poll(t->multi, NULL, 0, NDC_K8S_POLL_MS, NULL);
		if (mc != CURLM_OK)
			break;
	}
	while ((msg = curl_multi_info_read(t->multi, &left)))
		if (msg->msg == CURLMSG_DONE && msg->easy_handle == t->easy)
			cc = msg->data.result;
	curl_multi_remove_handle(t->multi, t->easy);
	if (stopping(w))
		return -ECANCELED;
	if (mc != CURLM_OK) {
		ndc_warn("k8s %s: %s", t->ki->name, curl_multi_strerror(mc));
		return -EIO;
	}
	if (running) /* cannot happen: the loop only ends early on stop or error */
		return -EIO;
	if (cc == CURLE_WRITE_ERROR && t->abort != ABORT_NONE)
		return 0;
	if (cc != CURLE_OK) {
		ndc_warn("k8s %s: %s: %s", t->ki->name, t->watching ? "watch" : "list",
			 t->errbuf[0] ? t->errbuf : curl_easy_strerror(cc));
		return -EIO;
	}
	if (!t->status)
		curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &t->status);
	if (ndc_log_level >= NDC_LOG_DEBUG) {
		long conns = 0;

		curl_easy_getinfo(t->easy, CURLINFO_NUM_CONNECTS, &conns);
		ndc_debug("k8s %s: %s: HTTP %ld, %ld new connection(s)", t->ki->name,
			  t->watching ? "watch" : "list", t->status, conns);
	}
	return 0;
}

/* The whole body as one JSON value (a list page or a Status), with our depth limit. */
static json_object *parse_body(struct worker *t)
{
	json_object *o;

	if (!t->body.len || t->body.len > INT_MAX)
		return NULL;
	json_tokener_reset(t->tok);
	o = json_tokener_parse_ex(t->tok, t->body.p, (int)t->body.len);
	if (json_tokener_get_error(t->tok) != json_tokener_success) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

/* The Status object's message, for the log. */
static const char *status_message(struct worker *t)
{
	static const char none[] = "(no Status message)";
	static _Thread_local char msg[256];
	json_object *o, *m;

	o = parse_body(t);
	if (!o)
		return none;
	if (json_object_object_get_ex(o, "message", &m) && json_object_is_type(m, json_type_string))
		snprintf(msg, sizeof(msg), "%s", json_object_get_string(m));
	else
		snprintf(msg, sizeof(msg), "%s", none);
	json_object_put(o);
	return msg;
}

/*
 * One request, with one immediate retry when a 401 made us re-read a token file that had
 * changed. Returns 0 with t->status set, -EACCES after a 401, or run_transfer's error.
 */
static int request(struct worker *t, const char *url)
{
	struct ndc_k8s_watch *w = t->w;

	for (int attempt = 0;; attempt++) {
		struct curl_slist *hdrs;
		int r;

		token_refresh(w, false);
		hdrs = request_headers(w);
		if (!hdrs)
			return -ENOMEM;
		r = run_transfer(t, url, hdrs);
		curl_slist_free_all(hdrs);
		if (r < 0)
			return r;
		if (t->status != 401)
			return 0;
		count(&w->st.auth_failures);
		if (attempt == 0 && token_refresh(w, true))
			continue;
		ndc_warn("k8s %s: 401 Unauthorized: %s", t->ki->name, status_message(t));
		return -EACCES;
	}
}

/* ---- list -------------------------------------------------------------------------------------
 */

/*
 * A list page is split into its items as it arrives, and each item is parsed and handed on
 * alone: the JSON tree of one item is freed before the next is parsed, so its memory is reused
 * at once. Parsing whole pages (500 objects, about 5 MB of json-c tree) and freeing them spent
 * more time in malloc than in parsing at 100,000 Services. A small scanner tracks strings and
 * nesting; everything but the items (kind, metadata with continue and resourceVersion) is kept
 * as the page's skeleton, `{...,"items":[]}`, and parsed at the end. json-c checks each item
 * and the skeleton, so the scanner only has to find where items begin and end: the top-level
 * "items" array may hold objects separated by single commas, nothing else.
 */
static void deliver_item(struct worker *t)
{
	const struct ndc_k8s_watch_ops *ops = &t->w->ops;
	json_object *it;

	json_tokener_reset(t->tok);
	it = json_tokener_parse_ex(t->tok, t->item.p, (int)t->item.len);
	t->item.len = 0;
	if (json_tokener_get_error(t->tok) != json_tokener_success ||
	    !json_object_is_type(it, json_type_object)) {
		json_object_put(it);
		t->abort = ABORT_BAD;
		return;
	}
	if (!t->list_begun && ops->list_begin)
		ops->list_begin(t->w->arg, t->kind);
	t->list_begun = true;
	set_kind(t, it);
	if (ops->list_item)
		ops->list_item(t->w->arg, t->kind, it);
	t->list_items++;
	json_object_put(it);
}

/* Whether the skeleton so far ends with the key "items" and its colon. */
static bool at_items_key(const struct buf *b)
{
	static const char key[] = "\"items\"";
	size_t n = b->len;

	while (n && strchr(" \t\r\n", b->p[n - 1]))
		n--;
	if (!n || b->p[--n] != ':')
		return false;
	while (n && strchr(" \t\r\n", b->p[n - 1]))
		n--;
	if (n < sizeof(key) - 1 || memcmp(b->p + n - (sizeof(key) - 1), key, sizeof(key) - 1))
		return false;
	n -= sizeof(key) - 1;
	while (n && strchr(" \t\r\n", b->p[n - 1]))
		n--;
	return n && (b->p[n - 1] == '{' || b->p[n - 1] == ',');
}

static size_t list_feed(struct worker *t, const char *data, size_t len)
{
	size_t start = 0; /* of the bytes not yet copied to the skeleton or the item */
	int r = 0;

	for (size_t i = 0; i < len && !r && !t->abort; i++) {
		char c = data[i];

		if (t->ls.in_str) {
			if (t->ls.esc)
				t->ls.esc = false;
			else if (c == '\\')
				t->ls.esc = true;
			else if (c == '"')
				t->ls.in_str = false;
			continue;
		}
		if (t->ls.state == LS_ITEMS) {
			/* Between items: nothing is copied. */
			if (c == '{' && (t->ls.n_page == 0 || t->ls.comma)) {
				t->ls.state = LS_ITEM;
				t->ls.comma = false;
				t->ls.depth++;
				start = i;
			} else if (c == ',' && t->ls.n_page > 0 && !t->ls.comma) {
				t->ls.comma = true;
			} else if (c == ']' && !t->ls.comma) {
				t->ls.state = LS_OUT;
				t->ls.depth--;
				start = i;
			} else if (!strchr(" \t\r\n", c)) {
				t->abort = ABORT_BAD;
			}
			continue;
		}
		switch (c) {
		case '"':
			t->ls.in_str = true;
			break;
		case '{':
		case '[':
			if (++t->ls.depth > NDC_K8S_JSON_DEPTH) {
				t->abort = ABORT_BAD;
				break;
			}
			if (c == '[' && t->ls.state == LS_OUT && t->ls.depth == 2) {
				r = buf_add(&t->body, data + start, i - start);
				start = i;
				if (!r && at_items_key(&t->body)) {
					/* Copied now: nothing more is until the array's end. */
					r = buf_add(&t->body, "[", 1);
					start = i + 1;
					t->ls.state = LS_ITEMS;
					t->ls.n_page = 0;
					t->ls.comma = false;
				}
			}
			break;
		case '}':
		case ']':
			if (!t->ls.depth) {
				t->abort = ABORT_BAD;
				break;
			}
			t->ls.depth--;
			if (t->ls.state == LS_ITEM && t->ls.depth == 2) {
				r = buf_add(&t->item, data + start, i + 1 - start);
				if (r)
					break;
				t->ls.state = LS_ITEMS;
				t->ls.n_page++;
				deliver_item(t);
			}
			break;
		}
	}
	if (!r && !t->abort && start < len) {
		if (t->ls.state == LS_OUT)
			r = buf_add(&t->body, data + start, len - start);
		else if (t->ls.state == LS_ITEM)
			r = buf_add(&t->item, data + start, len - start);
	}
	if (r && !t->abort)
		t->abort = ABORT_TOO_BIG;
	return t->abort ? CURL_WRITEFUNC_ERROR : len;
}

/*
 * The items went to list_item as they arrived; the skeleton is what is left of the page: it must
 * be a complete object with an empty "items" array and metadata. NULL if not.
 */
static json_object *page_skeleton(struct worker *t, json_object **ret_md)
{
	json_object *root, *items;

	root = t->ls.state == LS_OUT && !t->ls.depth && !t->ls.in_str ? parse_body(t) : NULL;
	if (!root || !json_object_object_get_ex(root, "items", &items) ||
	    !json_object_is_type(items, json_type_array) || json_object_array_length(items) ||
	    !json_object_object_get_ex(root, "metadata", ret_md)) {
		json_object_put(root);
		return NULL;
	}
	return root;
}

/*
 * One complete paginated list: list_begin, list_item for every object, list_end. Returns 0 (rv
 * set), -ESTALE when a continue token expired (410: start over), or another negative errno.
 */
static int do_list(struct worker *t)
{
	struct ndc_k8s_watch *w = t->w;
	const struct ndc_k8s_watch_ops *ops = &w->ops;
	char *cont = NULL, *url = NULL;
	int r;

	t->watching = false;
	t->rv[0] = '\0';
	t->list_begun = false;
	t->list_items = 0;
	for (;;) {
		json_object *root = NULL, *md, *v;
		char *esc = NULL;

		if (cont) {
			esc = curl_easy_escape(t->easy, cont, 0);
			if (!esc) {
				r = -ENOMEM;
				goto out;
			}
		}
		free(url);
		if (asprintf(&url, "%s%s?limit=%u%s%s", w->conn.server, t->ki->path,
			     w->opts.page_size, esc ? "&continue=" : "", esc ? esc : "") < 0)
			url = NULL;
		curl_free(esc);
		if (!url) {
			r = -ENOMEM;
			goto out;
		}
		r = request(t, url);
		if (r < 0)
			goto out;
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
				 status_message(t));
			r = -ESTALE;
			goto out;
		}
		if (t->status != 200) {
			ndc_warn("k8s %s: list: HTTP %ld: %s", t->ki->name, t->status,
				 status_message(t));
			r = -EIO;
			goto out;
		}
		root = page_skeleton(t, &md);
		if (!root) {
			ndc_warn("k8s %s: list: response is not a List", t->ki->name);
			r = -EBADMSG;
			goto out;
		}
		if (!t->list_begun && ops->list_begin)
			ops->list_begin(w->arg, t->kind);
		t->list_begun = true;
		/* Every page carries the list's resourceVersion (the first page's snapshot). */
		set_rv(t, root);
		free(cont);
		cont = NULL;
		if (json_object_object_get_ex(md, "continue", &v) &&
		    json_object_is_type(v, json_type_string) && json_object_get_string_len(v) > 0)
			cont = strdup(json_object_get_string(v));
		json_object_put(root);
		if (!cont)
			break;
		if (stopping(w)) {
			r = -ECANCELED;
			goto out;
		}
	}
	if (!t->rv[0]) {
		ndc_warn("k8s %s: list without a resourceVersion", t->ki->name);
		r = -EBADMSG;
		goto out;
	}
	/* Counted first, so the stats agree with what list_end tells the consumer. */
	count(&w->st.lists);
	if (ops->list_end)
		ops->list_end(w->arg, t->kind);
	ndc_info("k8s %s: listed %zu objects at resourceVersion %s", t->ki->name, t->list_items,
		 t->rv);
	/*
	 * The pages' JSON trees were freed between the objects kept from them, in this thread's
	 * malloc arena, where glibc only returns the top of the heap by itself. Lists are rare and
	 * this takes milliseconds.
	 */
	malloc_trim(0);
	r = 0;
out:
	free(cont);
	free(url);
	return r;
}

/* ---- watch ------------------------------------------------------------------------------------
 */

static void handle_event(struct worker *t, json_object *ev)
{
	struct ndc_k8s_watch *w = t->w;
	json_object *type, *obj, *code;
	enum ndc_k8s_event e;
	const char *ty;

	if (!json_object_object_get_ex(ev, "type", &type) ||
	    !json_object_is_type(type, json_type_string) ||
	    !json_object_object_get_ex(ev, "object", &obj) ||
	    !json_object_is_type(obj, json_type_object)) {
		ndc_warn("k8s %s: watch: event without type or object", t->ki->name);
		t->abort = ABORT_BAD;
		return;
	}
	ty = json_object_get_string(type);
	t->received++;
	if (!strcmp(ty, "ADDED")) {
		e = NDC_K8S_ADDED;
	} else if (!strcmp(ty, "MODIFIED")) {
		e = NDC_K8S_MODIFIED;
	} else if (!strcmp(ty, "DELETED")) {
		e = NDC_K8S_DELETED;
	} else if (!strcmp(ty, "BOOKMARK")) {
		set_rv(t, obj);
		count(&w->st.bookmarks);
		return;
	} else if (!strcmp(ty, "ERROR")) {
		/* The object is a Status; 410 Gone: our resourceVersion was compacted away. */
		if (json_object_object_get_ex(obj, "code", &code) &&
		    json_object_get_int(code) == 410) {
			t->abort = ABORT_RELIST;
			return;
		}
		ndc_warn("k8s %s: watch: ERROR event: %s", t->ki->name,
			 json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PLAIN));
		t->abort = ABORT_BAD;
		return;
	} else {
		ndc_debug("k8s %s: watch: ignoring event type %s", t->ki->name, ty);
		return;
	}
	set_kind(t, obj);
	set_rv(t, obj);
	count(&w->st.events);
	if (w->ops.event)
		w->ops.event(w->arg, t->kind, e, obj);
}

enum watch_end {
	WATCH_TIMEOUT, /* the server ended the stream (timeoutSeconds): rewatch */
	WATCH_RELIST,  /* 410 Gone */
	WATCH_ERROR,   /* back off, then rewatch */
	WATCH_STOP,
};

static enum watch_end do_watch(struct worker *t)
{
	struct ndc_k8s_watch *w = t->w;
	char *url = NULL, *esc;
	int r;

	t->watching = true;
	esc = curl_easy_escape(t->easy, t->rv, 0);
	if (!esc || asprintf(&url,
			     "%s%s?watch=true&resourceVersion=%s&allowWatchBookmarks=true"
			     "&timeoutSeconds=%u",
			     w->conn.server, t->ki->path, esc, w->opts.timeout_s) < 0)
		url = NULL;
	curl_free(esc);
	if (!url)
		return WATCH_ERROR;
	r = request(t, url);
	free(url);
	if (r == -ECANCELED)
		return WATCH_STOP;
	if (r < 0)
		return WATCH_ERROR;
	if (t->status == 410 || t->abort == ABORT_RELIST)
		return WATCH_RELIST;
	if (t->status != 200) {
		ndc_warn("k8s %s: watch: HTTP %ld: %s", t->ki->name, t->status, status_message(t));
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

/* Full jitter over the upper half, so many agents restarting together spread out. */
static void backoff(struct worker *t)
{
	struct ndc_k8s_watch *w = t->w;
	unsigned shift = t->failures < 16 ? t->failures : 16;
	uint64_t ms = (uint64_t)w->opts.backoff_min_ms << shift;
	struct timespec until;

	if (ms > w->opts.backoff_max_ms)
		ms = w->opts.backoff_max_ms;
	ms = ms / 2 + next_rand(t) % (ms / 2 + 1);
	t->failures++;
	ndc_info("k8s %s: retrying in %llu ms", t->ki->name, (unsigned long long)ms);
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += (time_t)(ms / 1000);
	until.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&w->lock);
	while (!stopping(w) && pthread_cond_timedwait(&w->cond, &w->lock, &until) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&w->lock);
}

static void *worker_main(void *arg)
{
	struct worker *t = arg;
	struct ndc_k8s_watch *w = t->w;
	bool need_list = true, after_list = false;

	while (!stopping(w)) {
		struct timespec t0, t1;
		enum watch_end end;

		if (need_list) {
			int r = do_list(t);

			if (r == -ECANCELED)
				break;
			if (r == 0) {
				need_list = false;
				after_list = true;
				t->failures = 0;
				continue;
			}
			if (r == -ESTALE) {
				count(&w->st.relists_410);
				/* Straight away the first time: the next list starts a new
				 * snapshot. */
				if (t->failures++ == 0)
					continue;
			} else {
				count(&w->st.errors);
			}
			backoff(t);
			continue;
		}
		if (!after_list)
			count(&w->st.reconnects);
		after_list = false;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		end = do_watch(t);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		switch (end) {
		case WATCH_STOP:
			break;
		case WATCH_RELIST:
			count(&w->st.relists_410);
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
			count(&w->st.errors);
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

static int set_blob(CURL *e, CURLoption opt, const char *pem)
{
	struct curl_blob b = {.data = (void *)pem, .len = strlen(pem), .flags = CURL_BLOB_COPY};

	return curl_easy_setopt(e, opt, &b) == CURLE_OK ? 0 : -EINVAL;
}

/* Options that stay the same for every request of the handle (so its connection is reused). */
static int setup_easy(struct worker *t)
{
	const struct ndc_k8s_conn *c = &t->w->conn;
	CURL *e = t->easy;
	int r = 0;

	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->errbuf);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, t);
	curl_easy_setopt(e, CURLOPT_USERAGENT, "ndcache/" NDC_VERSION);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "https,http");
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, NDC_K8S_CONNECT_TIMEOUT_MS);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPIDLE, 30L);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPINTVL, 10L);
	curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "");
	curl_easy_setopt(e, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
	if (c->insecure) {
		curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
	} else if (c->ca_data || c->ca_file) {
		/* The cluster CA alone, as kubectl does: not the system store as well. */
		curl_easy_setopt(e, CURLOPT_CAPATH, NULL);
		if (c->ca_data) {
			curl_easy_setopt(e, CURLOPT_CAINFO, NULL);
			r |= set_blob(e, CURLOPT_CAINFO_BLOB, c->ca_data);
		} else {
			r |= curl_easy_setopt(e, CURLOPT_CAINFO, c->ca_file) ? -EINVAL : 0;
		}
	}
	/* client-go prefers the inline data over the file when both are given. */
	if (c->cert_data)
		r |= set_blob(e, CURLOPT_SSLCERT_BLOB, c->cert_data);
	else if (c->cert_file)
		r |= curl_easy_setopt(e, CURLOPT_SSLCERT, c->cert_file) ? -EINVAL : 0;
	if (c->key_data)
		r |= set_blob(e, CURLOPT_SSLKEY_BLOB, c->key_data);
	else if (c->key_file)
		r |= curl_easy_setopt(e, CURLOPT_SSLKEY, c->key_file) ? -EINVAL : 0;
	if (c->cert_data || c->cert_file) {
		curl_easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM");
		curl_easy_setopt(e, CURLOPT_SSLKEYTYPE, "PEM");
	}
	return r ? -EINVAL : 0;
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
	token_refresh(w, true);
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
		t->ki = &kinds[k];
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
		r = setup_easy(t);
		if (r < 0) {
			ndc_err("k8s: libcurl rejected the TLS settings for %s", w->conn.server);
			goto fail;
		}
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
}

/* A watch with one worker of kind and no connection, for the replays. */
static int replay_worker(enum ndc_k8s_kind kind, size_t chunk, const struct ndc_k8s_watch_ops *ops,
			 void *arg, struct worker **ret)
{
	struct ndc_k8s_watch *w;
	struct worker *t;

	if (kind >= NDC_K8S_KINDS || !chunk)
		return -EINVAL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->ops = *ops;
	w->arg = arg;
	t = &w->workers[kind];
	t->w = w;
	t->kind = kind;
	t->ki = &kinds[kind];
	t->status = 200;
	t->body.max = NDC_K8S_MAX_BODY;
	t->item.max = NDC_K8S_MAX_BODY;
	t->tok = json_tokener_new_ex(NDC_K8S_JSON_DEPTH);
	if (!t->tok) {
		free(w);
		return -ENOMEM;
	}
	*ret = t;
	return 0;
}

static void replay_worker_free(struct worker *t)
{
	json_tokener_free(t->tok);
	free(t->body.p);
	free(t->item.p);
	free(t->w);
}

int ndc_k8s_stream_replay(enum ndc_k8s_kind kind, const char *data, size_t len, size_t chunk,
			  const struct ndc_k8s_watch_ops *ops, void *arg)
{
	struct worker *t;
	int r = replay_worker(kind, chunk, ops, arg, &t);

	if (r)
		return r;
	t->watching = true;
	for (size_t off = 0; off < len; off += chunk) {
		size_t n = len - off < chunk ? len - off : chunk;

		if (feed_stream(t, data + off, n) != n) {
			r = t->abort == ABORT_RELIST ? -ESTALE : -EBADMSG;
			break;
		}
	}
	replay_worker_free(t);
	return r;
}

int ndc_k8s_list_replay(enum ndc_k8s_kind kind, const char *data, size_t len, size_t chunk,
			const struct ndc_k8s_watch_ops *ops, void *arg)
{
	struct worker *t;
	json_object *root, *md;
	int r = replay_worker(kind, chunk, ops, arg, &t);

	if (r)
		return r;
	for (size_t off = 0; off < len && !r; off += chunk) {
		size_t n = len - off < chunk ? len - off : chunk;

		if (list_feed(t, data + off, n) != n)
			r = t->abort == ABORT_TOO_BIG ? -E2BIG : -EBADMSG;
	}
	if (!r) {
		root = page_skeleton(t, &md);
		if (root) {
			set_rv(t, root);
			json_object_put(root);
			if (ops->list_end)
				ops->list_end(arg, kind);
		} else {
			r = -EBADMSG;
		}
	}
	replay_worker_free(t);
	return r;
}
