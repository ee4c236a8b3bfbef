// SPDX-License-Identifier: MIT
/*
 * Snapshot files: a Kubernetes List (or one object) in JSON or YAML, as kubectl writes them. YAML
 * is turned into the same json-c tree JSON gives, so one converter (k8s_objects.c) serves both,
 * and later the list/watch client too.
 *
 * A List is converted item by item as it is parsed (JSON: a scanner finds each item and json-c
 * parses it alone; YAML: each item's tree is converted and freed as its mapping closes), so the
 * json-c tree of the whole file never exists: at 100,000 Services it was about 1.8 GB, and the
 * freed tree left most of it resident. Anything a List written by kubectl does not look like
 * (the kind after the items is not a List, an item that does not convert, a syntax error) is
 * parsed again whole, the simple way, which gives the exact error or the single-object meaning.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>
#include <yaml.h>

#include <ndc/log.h>

#include "objects/objects.h"

/*
 * An API object sits 6 levels below a List at most (items[].spec.ports[].x); the bound keeps
 * json-c's recursive free and our YAML stack small whatever the input.
 */
#define NDC_SNAPSHOT_MAX_DEPTH 64
/* json_tokener_parse_ex and json_object_new_string_len take int lengths. */
#define NDC_SNAPSHOT_MAX_SIZE ((size_t)INT_MAX)

static size_t line_of(const char *buf, size_t off)
{
	size_t line = 1;

	for (size_t i = 0; i < off; i++)
		line += buf[i] == '\n';
	return line;
}

static int parse_json(const char *buf, size_t len, size_t start, json_object **ret, char *err,
		      size_t errlen)
{
	enum json_tokener_error jerr;
	struct json_tokener *tok;
	json_object *root;
	size_t end;
	int r = 0;

	*ret = NULL;
	tok = json_tokener_new_ex(NDC_SNAPSHOT_MAX_DEPTH);
	if (!tok) {
		ndc_errf(-EINVAL, err, errlen, "out of memory");
		return -ENOMEM;
	}
	/* kubectl writes strict JSON; anything json-c would only accept leniently is a bad file. */
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
	root = json_tokener_parse_ex(tok, buf + start, (int)(len - start));
	jerr = json_tokener_get_error(tok);
	end = start + json_tokener_get_parse_end(tok);
	if (jerr == json_tokener_continue) {
		r = ndc_errf(-EINVAL, err, errlen,
			     "JSON: unexpected end of input at byte %zu (line %zu)", len,
			     line_of(buf, len));
	} else if (jerr != json_tokener_success) {
		r = ndc_errf(-EINVAL, err, errlen, "JSON: %s at byte %zu (line %zu)",
			     json_tokener_error_desc(jerr), end, line_of(buf, end));
	} else {
		while (end < len && strchr(" \t\r\n", buf[end]) && buf[end])
			end++;
		if (end < len)
			r = ndc_errf(-EINVAL, err, errlen,
				     "JSON: trailing data at byte %zu (line %zu)", end,
				     line_of(buf, end));
	}
	json_tokener_free(tok);
	if (r < 0) {
		json_object_put(root);
		return r;
	}
	*ret = root;
	return 0;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && !strcmp(s + n - m, suffix);
}

/* Whether root is {"kind": "...List", "items": items, ...}. */
static bool is_list_of(json_object *root, json_object *items)
{
	json_object *kind, *v;

	return json_object_is_type(root, json_type_object) &&
	       json_object_object_get_ex(root, "kind", &kind) &&
	       json_object_is_type(kind, json_type_string) &&
	       ends_with(json_object_get_string(kind), "List") &&
	       json_object_object_get_ex(root, "items", &v) && v == items;
}

/* Whether buf[..end) ends with `{"items":` or `,"items":` (whitespace allowed between). */
static bool before_is_items_key(const char *buf, size_t start, size_t end)
{
	static const char key[] = "\"items\"";
	size_t n = end, k = sizeof(key) - 1;

	while (n > start && strchr(" \t\r\n", buf[n - 1]))
		n--;
	if (n == start || buf[--n] != ':')
		return false;
	while (n > start && strchr(" \t\r\n", buf[n - 1]))
		n--;
	if (n - start < k || memcmp(buf + n - k, key, k))
		return false;
	n -= k;
	while (n > start && strchr(" \t\r\n", buf[n - 1]))
		n--;
	return n > start && (buf[n - 1] == '{' || buf[n - 1] == ',');
}

/* One item, buf[..len): parsed alone and converted into o. -EAGAIN: not a plain good item. */
static int stream_json_item(struct json_tokener *tok, const char *buf, size_t len, size_t idx,
			    struct ndc_k8s_objects *o)
{
	char where[32], err[8];
	json_object *it;
	int r = -EAGAIN;

	json_tokener_reset(tok);
	it = json_tokener_parse_ex(tok, buf, (int)len);
	if (json_tokener_get_error(tok) == json_tokener_success &&
	    json_tokener_get_parse_end(tok) == len) {
		snprintf(where, sizeof(where), "items[%zu]", idx);
		r = ndc_k8s_object_add_at(o, it, where, err, sizeof(err));
		if (r == -EINVAL)
			r = -EAGAIN; /* the whole parse gives the message */
	}
	json_object_put(it);
	return r;
}

int ndc_snapshot_stream_json(const char *buf, size_t len, struct ndc_k8s_objects *o)
{
	enum { OUT, ITEMS, ITEM, AFTER } state = OUT;
	size_t start = 0, depth = 0, n_items = 0, lb = 0, rb = 0, item = 0, skel_len;
	bool in_str = false, esc = false, comma = false;
	struct json_tokener *tok;
	json_object *root = NULL, *items;
	char *skel = NULL;
	int r = 0;

	memset(o, 0, sizeof(*o));
	if (len >= 3 && !memcmp(buf, "\xef\xbb\xbf", 3))
		start = 3;
	while (start < len && strchr(" \t\r\n", buf[start]) && buf[start])
		start++;
	if (start == len || buf[start] != '{' || len > NDC_SNAPSHOT_MAX_SIZE)
		return -EAGAIN;
	/* Items are parsed two levels below the List: the whole file's depth bound holds. */
	tok = json_tokener_new_ex(NDC_SNAPSHOT_MAX_DEPTH - 2);
	if (!tok)
		return -ENOMEM;
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
	for (size_t i = start; i < len && !r; i++) {
		char c = buf[i];

		if (in_str) {
			if (esc)
				esc = false;
			else if (c == '\\')
				esc = true;
			else if (c == '"')
				in_str = false;
			continue;
		}
		if (state == ITEMS) {
			if (c == '{' && (!n_items || comma)) {
				state = ITEM;
				item = i;
				comma = false;
				depth++;
			} else if (c == ',' && n_items && !comma) {
				comma = true;
			} else if (c == ']' && !comma) {
				state = AFTER;
				rb = i;
				depth--;
			} else if (!strchr(" \t\r\n", c)) {
				r = -EAGAIN;
			}
			continue;
		}
		switch (c) {
		case '"':
			in_str = true;
			break;
		case '{':
		case '[':
			depth++;
			if (c == '[' && depth == 2 && state != ITEM &&
			    before_is_items_key(buf, start, i)) {
				if (state == AFTER) {
					r = -EAGAIN; /* a second "items": the last one counts */
					break;
				}
				state = ITEMS;
				lb = i;
			}
			break;
		case '}':
		case ']':
			if (!depth) {
				r = -EAGAIN;
				break;
			}
			depth--;
			if (state == ITEM && depth == 2) {
				r = stream_json_item(tok, buf + item, i + 1 - item, n_items, o);
				n_items++;
				state = ITEMS;
			}
			break;
		}
	}
	json_tokener_free(tok);
	if (!r && state != AFTER)
		r = -EAGAIN; /* no items array, or the input ended inside it */
	if (!r) {
		/* The List without its items, `{..."items":[]...}`, checked as the whole file was.
		 */
		skel_len = lb + 1 - start + len - rb;
		skel = malloc(skel_len);
		if (!skel)
			r = -ENOMEM;
	}
	if (!r) {
		memcpy(skel, buf + start, lb + 1 - start);
		memcpy(skel + (lb + 1 - start), buf + rb, len - rb);
		r = parse_json(skel, skel_len, 0, &root, NULL, 0);
		free(skel);
		if (r == -EINVAL || (!r && (!json_object_object_get_ex(root, "items", &items) ||
					    !is_list_of(root, items) ||
					    !json_object_is_type(items, json_type_array) ||
					    json_object_array_length(items))))
			r = -EAGAIN;
		json_object_put(root);
	}
	if (r < 0)
		ndc_k8s_objects_free(o);
	return r;
}

/* The json-c tree under construction from libyaml's events. */
struct ybuild {
	json_object *root;
	size_t depth;
	json_object *stack[NDC_SNAPSHOT_MAX_DEPTH]; /* open sequences and mappings */
	char *key[NDC_SNAPSHOT_MAX_DEPTH];	    /* a mapping's key awaiting its value */
	char *err;
	size_t errlen;
	/*
	 * Streaming (o non-NULL): each mapping closed directly in the root's "items" sequence is
	 * converted into o and taken out of the tree at once.
	 */
	struct ndc_k8s_objects *o;
	json_object *items; /* the root's "items" sequence, the first one */
	size_t n_items;	    /* converted and taken out */
	bool items_seen;    /* the root had a key "items" */
	bool stream_bad;    /* streaming stopped: the whole file is parsed again */
};

static int nomem(struct ybuild *b)
{
	ndc_errf(-EINVAL, b->err, b->errlen, "out of memory");
	return -ENOMEM;
}

static bool awaiting_key(const struct ybuild *b)
{
	return b->depth && json_object_is_type(b->stack[b->depth - 1], json_type_object) &&
	       !b->key[b->depth - 1];
}

/* Takes v (NULL is a YAML null) into the open container, or makes it the root. */
static int add_value(struct ybuild *b, json_object *v)
{
	json_object *parent;
	char *key;
	int r;

	if (!b->depth) {
		/* One document, one root node: libyaml guarantees it. */
		json_object_put(b->root);
		b->root = v;
		return 0;
	}
	parent = b->stack[b->depth - 1];
	if (json_object_is_type(parent, json_type_array)) {
		r = json_object_array_add(parent, v);
	} else {
		key = b->key[b->depth - 1];
		if (b->o && b->depth == 1 && !strcmp(key, "items")) {
			/* A second "items" replaces the first, freeing what b->items points to. */
			if (b->items_seen)
				b->stream_bad = true;
			else if (json_object_is_type(v, json_type_array))
				b->items = v;
			b->items_seen = true;
		}
		b->key[b->depth - 1] = NULL;
		r = json_object_object_add(parent, key, v);
		free(key);
	}
	if (r < 0) {
		json_object_put(v);
		return nomem(b);
	}
	return 0;
}

static bool is_one_of(const char *v, const char *const *words)
{
	for (; *words; words++)
		if (!strcmp(v, *words))
			return true;
	return false;
}

static bool is_digit(char c, int base)
{
	if (base == 16)
		return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
	return c >= '0' && c < '0' + base;
}

/* YAML 1.2 core schema integers ([-+]?[0-9]+, 0o[0-7]+, 0x[0-9a-fA-F]+) that fit an int64. */
static bool parse_int(const char *v, size_t n, int64_t *ret)
{
	const char *digits = v, *end;
	int base = 10;
	long long x;

	if (n > 2 && v[0] == '0' && (v[1] == 'x' || v[1] == 'o')) {
		base = v[1] == 'x' ? 16 : 8;
		digits = v + 2;
	} else if (*v == '-' || *v == '+') {
		digits = v + 1;
	}
	if (!*digits)
		return false;
	for (const char *p = digits; *p; p++)
		if (!is_digit(*p, base))
			return false;
	errno = 0;
	x = strtoll(base == 10 ? v : digits, (char **)&end, base);
	if (errno || end != v + n)
		return false;
	*ret = x;
	return true;
}

/*
 * Plain scalars resolve as in the YAML 1.2 core schema, except floats (no Kubernetes field DNS
 * reads is one; they stay strings and fail the type check). Quoted scalars and !!str are strings.
 */
static int add_scalar(struct ybuild *b, const yaml_event_t *ev)
{
	static const char *const nulls[] = {"", "~", "null", "Null", "NULL", NULL};
	static const char *const trues[] = {"true", "True", "TRUE", NULL};
	static const char *const falses[] = {"false", "False", "FALSE", NULL};
	const char *v = (const char *)ev->data.scalar.value;
	const char *tag = (const char *)ev->data.scalar.tag;
	size_t n = ev->data.scalar.length;
	json_object *obj;
	int64_t i;

	if (awaiting_key(b)) {
		if (memchr(v, 0, n))
			return ndc_errf(-EINVAL, b->err, b->errlen,
					"YAML: line %zu: NUL byte in a key",
					ev->start_mark.line + 1);
		b->key[b->depth - 1] = strdup(v);
		return b->key[b->depth - 1] ? 0 : nomem(b);
	}

	if (ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE ||
	    (tag && (!strcmp(tag, "!") || !strcmp(tag, YAML_STR_TAG))))
		obj = json_object_new_string_len(v, (int)n);
	else if (is_one_of(v, nulls))
		return add_value(b, NULL);
	else if (is_one_of(v, trues))
		obj = json_object_new_boolean(1);
	else if (is_one_of(v, falses))
		obj = json_object_new_boolean(0);
	else if (parse_int(v, n, &i))
		obj = json_object_new_int64(i);
	else
		obj = json_object_new_string_len(v, (int)n);
	if (!obj)
		return nomem(b);
	return add_value(b, obj);
}

static int open_container(struct ybuild *b, const yaml_event_t *ev, json_object *obj)
{
	size_t line = ev->start_mark.line + 1;
	int r;

	if (!obj)
		return nomem(b);
	if (awaiting_key(b)) {
		json_object_put(obj);
		return ndc_errf(-EINVAL, b->err, b->errlen,
				"YAML: line %zu: only scalars are supported as mapping keys", line);
	}
	if (b->depth == NDC_SNAPSHOT_MAX_DEPTH) {
		json_object_put(obj);
		return ndc_errf(-EINVAL, b->err, b->errlen,
				"YAML: line %zu: nested deeper than %d levels", line,
				NDC_SNAPSHOT_MAX_DEPTH);
	}
	/* The container stays valid: its parent (or b->root) owns it from here on. */
	r = add_value(b, obj);
	if (r < 0)
		return r;
	b->stack[b->depth] = obj;
	b->key[b->depth] = NULL;
	b->depth++;
	return 0;
}

static void pop_container(struct ybuild *b)
{
	if (!b->depth)
		return;
	b->depth--;
	free(b->key[b->depth]);
	b->key[b->depth] = NULL;
}

/* The item just closed in the root's "items": converted into b->o and dropped from the tree. */
static int stream_item(struct ybuild *b)
{
	size_t idx = json_object_array_length(b->items) - 1;
	json_object *it = json_object_array_get_idx(b->items, idx);
	char where[32], err[8];
	int r;

	if (!json_object_is_type(it, json_type_object)) {
		b->stream_bad = true;
		return 0;
	}
	snprintf(where, sizeof(where), "items[%zu]", idx + b->n_items);
	r = ndc_k8s_object_add_at(b->o, it, where, err, sizeof(err));
	if (r == -ENOMEM)
		return nomem(b);
	if (r < 0) {
		b->stream_bad = true; /* the whole parse gives the message */
		return 0;
	}
	json_object_array_del_idx(b->items, idx, 1);
	b->n_items++;
	return 0;
}

static int close_container(struct ybuild *b)
{
	pop_container(b);
	if (b->o && !b->stream_bad && b->items && b->depth == 2 && b->stack[1] == b->items)
		return stream_item(b);
	return 0;
}

static int yaml_error(const yaml_parser_t *p, char *err, size_t errlen)
{
	const char *problem = p->problem ? p->problem : "syntax error";

	if (p->error == YAML_MEMORY_ERROR) {
		ndc_errf(-EINVAL, err, errlen, "out of memory");
		return -ENOMEM;
	}
	if (p->error == YAML_READER_ERROR)
		return ndc_errf(-EINVAL, err, errlen, "YAML: byte %zu: %s", p->problem_offset,
				problem);
	if (p->context)
		return ndc_errf(-EINVAL, err, errlen, "YAML: line %zu column %zu: %s %s",
				p->problem_mark.line + 1, p->problem_mark.column + 1, p->context,
				problem);
	return ndc_errf(-EINVAL, err, errlen, "YAML: line %zu column %zu: %s",
			p->problem_mark.line + 1, p->problem_mark.column + 1, problem);
}

/*
 * Builds the tree of a YAML document; with o, streams the items of a List into it (see struct
 * ybuild). *ret_streamed: 1 when o holds the List's items (*ret is the List without them), 0
 * when nothing was streamed (*ret is the whole tree), -EAGAIN when streaming began but the file
 * must be parsed again whole (o is freed then).
 */
static int parse_yaml(const char *buf, size_t len, struct ndc_k8s_objects *o, json_object **ret,
		      int *ret_streamed, char *err, size_t errlen)
{
	struct ybuild b = {.err = err, .errlen = errlen, .o = o};
	yaml_parser_t parser;
	yaml_event_t ev;
	int docs = 0, r = 0;
	bool done = false;

	*ret = NULL;
	if (!yaml_parser_initialize(&parser)) {
		ndc_errf(-EINVAL, err, errlen, "out of memory");
		return -ENOMEM;
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
	while (!done && r == 0) {
		if (!yaml_parser_parse(&parser, &ev)) {
			r = yaml_error(&parser, err, errlen);
			break;
		}
		switch (ev.type) {
		case YAML_DOCUMENT_START_EVENT:
			if (++docs > 1)
				r = ndc_errf(-EINVAL, err, errlen,
					     "YAML: line %zu: more than one document",
					     ev.start_mark.line + 1);
			break;
		case YAML_ALIAS_EVENT:
			/* Aliases would let a small file expand into a huge tree. */
			r = ndc_errf(-EINVAL, err, errlen,
				     "YAML: line %zu: aliases are not supported",
				     ev.start_mark.line + 1);
			break;
		case YAML_SCALAR_EVENT:
			r = add_scalar(&b, &ev);
			break;
		case YAML_SEQUENCE_START_EVENT:
			r = open_container(&b, &ev, json_object_new_array());
			break;
		case YAML_MAPPING_START_EVENT:
			r = open_container(&b, &ev, json_object_new_object());
			break;
		case YAML_SEQUENCE_END_EVENT:
		case YAML_MAPPING_END_EVENT:
			r = close_container(&b);
			break;
		case YAML_STREAM_END_EVENT:
			done = true;
			break;
		default:
			break;
		}
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&parser);
	while (b.depth)
		pop_container(&b);
	*ret_streamed = 0;
	if (!r && b.n_items) {
		*ret_streamed = !b.stream_bad && is_list_of(b.root, b.items) &&
					!json_object_array_length(b.items)
				    ? 1
				    : -EAGAIN;
	}
	if (b.n_items && (r < 0 || *ret_streamed < 0))
		ndc_k8s_objects_free(o);
	if (r < 0) {
		json_object_put(b.root);
		return r;
	}
	*ret = b.root;
	return 0;
}

static int load_tree(json_object *root, struct ndc_k8s_objects *o, char *err, size_t errlen)
{
	json_object *kind, *items;
	char where[32];
	int r;

	if (!json_object_is_type(root, json_type_object))
		return ndc_errf(-EINVAL, err, errlen, "top level: expected an object, got %s",
				root ? json_type_to_name(json_object_get_type(root)) : "null");
	/* kubectl writes "List"; the API server's own lists are ServiceList, PodList and so on. */
	if (!json_object_object_get_ex(root, "kind", &kind) ||
	    !json_object_is_type(kind, json_type_string) ||
	    !ends_with(json_object_get_string(kind), "List") ||
	    !json_object_object_get_ex(root, "items", &items))
		return ndc_k8s_object_add_at(o, root, NULL, err, errlen);

	if (items && !json_object_is_type(items, json_type_array))
		return ndc_errf(-EINVAL, err, errlen, "items: expected array, got %s",
				json_type_to_name(json_object_get_type(items)));
	for (size_t i = 0; items && i < json_object_array_length(items); i++) {
		snprintf(where, sizeof(where), "items[%zu]", i);
		r = ndc_k8s_object_add_at(o, json_object_array_get_idx(items, i), where, err,
					  errlen);
		if (r < 0)
			return r;
	}
	return 0;
}

/* ndc_snapshot_parse without giving memory back. */
static int parse(const char *buf, size_t len, struct ndc_k8s_objects *o, char *err, size_t errlen)
{
	json_object *root;
	int r, streamed;
	size_t i = 0;

	memset(o, 0, sizeof(*o));
	if (err && errlen)
		err[0] = '\0';
	if (!len)
		buf = ""; /* libyaml asserts on a NULL input */
	if (len > NDC_SNAPSHOT_MAX_SIZE)
		return ndc_errf(-EINVAL, err, errlen, "snapshot larger than %zu bytes",
				NDC_SNAPSHOT_MAX_SIZE);

	/* JSON is YAML too, but json-c is faster and reports JSON errors in JSON terms. */
	if (len >= 3 && !memcmp(buf, "\xef\xbb\xbf", 3))
		i = 3;
	while (i < len && strchr(" \t\r\n", buf[i]) && buf[i])
		i++;
	if (i < len && buf[i] == '{') {
		r = ndc_snapshot_stream_json(buf, len, o);
		if (r != -EAGAIN) {
			if (r == -ENOMEM)
				ndc_errf(-EINVAL, err, errlen, "out of memory");
			return r;
		}
		r = parse_json(buf, len, i, &root, err, errlen);
	} else {
		r = parse_yaml(buf, len, o, &root, &streamed, err, errlen);
		if (!r && streamed) {
			json_object_put(root);
			if (streamed > 0)
				return 0;
			r = parse_yaml(buf, len, NULL, &root, &streamed, err, errlen);
		}
	}
	if (r < 0)
		return r;

	r = load_tree(root, o, err, errlen);
	json_object_put(root);
	if (r < 0)
		ndc_k8s_objects_free(o);
	return r;
}

/*
 * The items' trees were freed between the objects kept from them: glibc returns only the top of
 * the heap by itself, and a snapshot is loaded once (or per reload), so give the holes back now.
 */
int ndc_snapshot_parse(const char *buf, size_t len, struct ndc_k8s_objects *o, char *err,
		       size_t errlen)
{
	int r = parse(buf, len, o, err, errlen);

	malloc_trim(0);
	return r;
}

static int read_all(int fd, char **ret_buf, size_t *ret_len)
{
	size_t len = 0, cap = 0;
	char *buf = NULL, *p;
	ssize_t n;

	for (;;) {
		if (len == cap) {
			if (cap >= NDC_SNAPSHOT_MAX_SIZE) {
				free(buf);
				return -EFBIG;
			}
			cap = cap ? 2 * cap : 64 * 1024;
			p = realloc(buf, cap);
			if (!p) {
				free(buf);
				return -ENOMEM;
			}
			buf = p;
		}
		n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			free(buf);
			return -errno;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	*ret_buf = buf;
	*ret_len = len;
	return 0;
}

int ndc_snapshot_load(const char *path, struct ndc_k8s_objects *o, char *err, size_t errlen)
{
	char reason[512] = "";
	char *buf = NULL;
	size_t len = 0;
	int fd, r;

	memset(o, 0, sizeof(*o));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		ndc_errf(-EINVAL, err, errlen, "%s: %s", path, strerror(-r));
		return r;
	}
	r = read_all(fd, &buf, &len);
	close(fd);
	if (r < 0) {
		ndc_errf(-EINVAL, err, errlen, "%s: %s", path, strerror(-r));
		return r;
	}
	r = parse(buf, len, o, reason, sizeof(reason));
	free(buf);
	malloc_trim(0);
	if (r < 0)
		ndc_errf(-EINVAL, err, errlen, "%s: %s", path, reason);
	return r;
}
