// SPDX-License-Identifier: MIT
/*
 * What the API server sends, read as it arrives: the watch stream (one JSON event per line, split
 * across chunks at any byte), list pages split into their items by a small scanner, Status bodies
 * for the log, and the replays that run the same parsers over a buffer for the tests and the fuzz
 * targets. Kept apart from the requests (k8s_transfer.c) and the list/watch protocol
 * (k8s_client.c), which reach it only through internal.h: these are the parsers of
 * untrusted input, and here they can be read, fuzzed and changed on their own.
 */
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <json-c/json.h>

#include <ndc/log.h>

#include "internal.h"

/*
 * The kinds: where each is listed and watched, and the kind and apiVersion its objects carry
 * (list items come without them: set_kind adds them). The parsers below are the lowest layer
 * that needs the table; the requests and the protocol above read it from here.
 */
const struct kind_info ndc_k8s_kind_info[NDC_K8S_KINDS] = {
    [NDC_K8S_NAMESPACES] = {"/api/v1/namespaces", "Namespace", "v1", "namespaces"},
    [NDC_K8S_SERVICES] = {"/api/v1/services", "Service", "v1", "services"},
    [NDC_K8S_ENDPOINTSLICES] = {"/apis/discovery.k8s.io/v1/endpointslices", "EndpointSlice",
				"discovery.k8s.io/v1", "endpointslices"},
    [NDC_K8S_PODS] = {"/api/v1/pods", "Pod", "v1", "pods"},
    [NDC_K8S_SERVICEIMPORTS] = {"/apis/multicluster.x-k8s.io/v1alpha1/serviceimports",
				"ServiceImport", "multicluster.x-k8s.io/v1alpha1",
				"serviceimports"},
    /* Written out whole: tests/deploy/check_manifests.py reads this table for the RBAC. */
    [NDC_K8S_CONFIGMAPS] = {"/api/v1/namespaces/kube-system/configmaps", "ConfigMap", "v1",
			    "configmaps", "fieldSelector=metadata.name%3Dkube-dns", false},
    /* Cluster-wide in RBAC terms: a ClusterRole cannot limit list/watch to a field selector. */
    [NDC_K8S_NODE_PODS] = {"/api/v1/pods", "Pod", "v1", "pods", "fieldSelector=spec.nodeName%3D",
			   true},
};

int ndc_k8s_buf_add(struct buf *b, const char *data, size_t len)
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

void ndc_k8s_set_rv(struct worker *t, json_object *obj)
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
const char *ndc_k8s_status_message(struct worker *t)
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

void ndc_k8s_sync_done(struct worker *t, enum sync_how how)
{
	struct ndc_k8s_watch *w = t->w;
	static const char *const hows[] = {"streamed", "listed from the watch cache",
					   "listed (consistent)"};

	if (!t->list_begun && w->ops.list_begin)
		w->ops.list_begin(w->arg, t->kind);
	t->list_begun = true;
	t->rv_unavailable = false;
	/* Counted first, so the stats agree with what list_end tells the consumer. */
	ndc_k8s_count(&w->st.syncs[how]);
	ndc_k8s_count(&w->st.lists);
	if (w->ops.list_end)
		w->ops.list_end(w->arg, t->kind);
	ndc_info("k8s %s: %s %zu objects at resourceVersion %s", t->ki->name, hows[how],
		 t->list_items, t->rv);
	/*
	 * The items' JSON trees were freed between the objects kept from them, in this thread's
	 * malloc arena, where glibc only returns the top of the heap by itself. Syncs are rare and
	 * this takes milliseconds.
	 */
	malloc_trim(0);
}

/* ---- watch ------------------------------------------------------------------------------------
 */

/*
 * The bookmark that ends a streamed initial state carries the annotation
 * k8s.io/initial-events-end: "true" (KEP-3157); any other bookmark in that phase is a server
 * that ignored sendInitialEvents and sent a plain watch.
 */
static bool initial_events_end(json_object *obj)
{
	json_object *md, *ann, *v;

	return json_object_object_get_ex(obj, "metadata", &md) &&
	       json_object_object_get_ex(md, "annotations", &ann) &&
	       json_object_object_get_ex(ann, "k8s.io/initial-events-end", &v) &&
	       json_object_is_type(v, json_type_string) &&
	       !strcmp(json_object_get_string(v), "true");
}

/*
 * An object of a streamed initial state: a list item. Its resourceVersion is its own last
 * change, not the state's: the rv comes from the end bookmark.
 */
static void initial_item(struct worker *t, enum ndc_k8s_event e, json_object *obj)
{
	const struct ndc_k8s_watch_ops *ops = &t->w->ops;

	if (e == NDC_K8S_DELETED) {
		/*
		 * The state is sent as ADDED events: a deletion there is a server that does not
		 * stream it as KEP-3157 says. Retrying the stream would only find that out again
		 * (at a plain bookmark, if ever): a list at once.
		 */
		t->abort = ABORT_NOSTREAM_DELETED;
		return;
	}
	if (!t->list_begun && ops->list_begin)
		ops->list_begin(t->w->arg, t->kind);
	t->list_begun = true;
	set_kind(t, obj);
	if (ops->list_item)
		ops->list_item(t->w->arg, t->kind, obj);
	t->list_items++;
}

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
		ndc_k8s_count(&w->st.bookmarks);
		if (t->initial && !initial_events_end(obj)) {
			t->abort = ABORT_NOSTREAM;
			return;
		}
		ndc_k8s_set_rv(t, obj);
		if (t->initial) {
			t->initial = false;
			t->initial_done = true;
			ndc_k8s_sync_done(t, SYNC_STREAM);
		}
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
	if (t->initial) {
		initial_item(t, e, obj);
		return;
	}
	set_kind(t, obj);
	ndc_k8s_set_rv(t, obj);
	ndc_k8s_count(&w->st.events);
	if (w->ops.event)
		w->ops.event(w->arg, t->kind, e, obj);
}

/* Watch events arrive one JSON object per line, split across chunks at any byte. */
size_t ndc_k8s_feed_stream(struct worker *t, const char *data, size_t len)
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

size_t ndc_k8s_list_feed(struct worker *t, const char *data, size_t len)
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
				r = ndc_k8s_buf_add(&t->body, data + start, i - start);
				start = i;
				if (!r && at_items_key(&t->body)) {
					/* Copied now: nothing more is until the array's end. */
					r = ndc_k8s_buf_add(&t->body, "[", 1);
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
				r = ndc_k8s_buf_add(&t->item, data + start, i + 1 - start);
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
			r = ndc_k8s_buf_add(&t->body, data + start, len - start);
		else if (t->ls.state == LS_ITEM)
			r = ndc_k8s_buf_add(&t->item, data + start, len - start);
	}
	if (r && !t->abort)
		t->abort = ABORT_TOO_BIG;
	return t->abort ? CURL_WRITEFUNC_ERROR : len;
}

/*
 * The items went to list_item as they arrived; the skeleton is what is left of the page: it must
 * be a complete object with an empty "items" array and metadata. NULL if not.
 */
json_object *ndc_k8s_page_skeleton(struct worker *t, json_object **ret_md)
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

/* ---- replays: the parsers without a connection ------------------------------------------ */

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
	t->ki = &ndc_k8s_kind_info[kind];
	t->asking = SYNC_HOWS;
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

		if (ndc_k8s_feed_stream(t, data + off, n) != n) {
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

		if (ndc_k8s_list_feed(t, data + off, n) != n)
			r = t->abort == ABORT_TOO_BIG ? -E2BIG : -EBADMSG;
	}
	if (!r) {
		root = ndc_k8s_page_skeleton(t, &md);
		if (root) {
			ndc_k8s_set_rv(t, root);
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
