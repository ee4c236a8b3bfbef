// SPDX-License-Identifier: MIT
/*
 * libyaml's event stream folded into a small node tree, because the document API resolves aliases
 * silently and drops anchors, tags and quoting style, all of which we want to see; and the error
 * context every check reports through, so that each error names the key path and the 1-based line
 * of the offending node.
 */
#include "internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

/* The schema is three levels deep; anything much deeper is a mistake or an attack. */
#define MAX_DEPTH 32

/* ---- node tree ---------------------------------------------------------------------------- */

void ndc_config_tree_free(struct node *n)
{
	if (!n)
		return;
	for (size_t i = 0; i < n->n; i++)
		ndc_config_tree_free(n->kids[i]);
	free(n->kids);
	free(n->text);
	free(n);
}

int ndc_config_oom(struct ctx *c)
{
	if (c->err && c->errlen)
		snprintf(c->err, c->errlen, "out of memory");
	return -ENOMEM;
}

/* Reports "line N: key.path: message" (no path outside any key). Returns -EINVAL. */
int ndc_config_fail(struct ctx *c, unsigned int line, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (c->err && c->errlen)
		snprintf(c->err, c->errlen, "line %u: %s%s%s", line, c->path, c->plen ? ": " : "",
			 msg);
	return -EINVAL;
}

/* Error messages are one line: echo at most QUOTE_MAX bytes, printable ASCII only. */
char *ndc_config_sanitize(char dst[QUOTE_BUF], const char *s, size_t len)
{
	size_t i;

	for (i = 0; i < len && i < QUOTE_MAX; i++)
		dst[i] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
	strcpy(dst + i, i < len ? "..." : "");
	return dst;
}

/* "'value'", "an empty value", "a list" or "a mapping": what the user wrote, for "got ...". */
const char *ndc_config_describe(const struct node *n, char buf[QUOTE_BUF + 2])
{
	if (n->kind != NODE_SCALAR)
		return n->kind == NODE_SEQ ? "a list"
					   : "a mapping"; /* aliases are refused earlier */
	if (!n->len)
		return "an empty value";
	buf[0] = '\'';
	ndc_config_sanitize(buf + 1, n->text, n->len);
	strcat(buf, "'");
	return buf;
}

static int syntax_error(struct ctx *c, const yaml_parser_t *p, const char *text, size_t len)
{
	const char *problem = p->problem ? p->problem : "syntax error";
	unsigned int line = (unsigned int)p->problem_mark.line + 1;
	char where[128] = "";

	if (p->error == YAML_MEMORY_ERROR)
		return ndc_config_oom(c);
	if (p->error == YAML_READER_ERROR) {
		/* Reader errors (bad encoding) carry a byte offset, not a mark. */
		line = 1;
		for (size_t i = 0; i < p->problem_offset && i < len; i++)
			line += text[i] == '\n';
		if (p->problem_value != -1)
			snprintf(where, sizeof(where), " (byte 0x%02X)",
				 (unsigned)p->problem_value);
	} else if (p->context) {
		snprintf(where, sizeof(where), " (%s at line %zu)", p->context,
			 (size_t)p->context_mark.line + 1);
	}
	return ndc_config_fail(c, (unsigned int)line, "%s%s", problem, where);
}

/* Makes the node for one event and links it under parent (*ret NULL: the event makes none). */
static int event_node(struct ctx *c, const yaml_event_t *ev, struct node *parent, struct node **ret)
{
	struct node *n;

	*ret = NULL;
	if (ev->type != YAML_ALIAS_EVENT && ev->type != YAML_SCALAR_EVENT &&
	    ev->type != YAML_SEQUENCE_START_EVENT && ev->type != YAML_MAPPING_START_EVENT)
		return 0;
	if (parent && parent->n == parent->cap) {
		size_t cap = parent->cap ? parent->cap * 2 : 8;
		struct node **k = realloc(parent->kids, cap * sizeof(*k));
		if (!k)
			return ndc_config_oom(c);
		parent->kids = k;
		parent->cap = cap;
	}
	n = calloc(1, sizeof(*n));
	if (!n)
		return ndc_config_oom(c);
	n->line = (unsigned int)ev->start_mark.line + 1;
	if (ev->type == YAML_ALIAS_EVENT) {
		n->kind = NODE_ALIAS;
	} else if (ev->type == YAML_SCALAR_EVENT) {
		n->kind = NODE_SCALAR;
		n->anchored = ev->data.scalar.anchor != NULL;
		n->tagged = ev->data.scalar.tag != NULL;
		n->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
		n->len = ev->data.scalar.length;
		n->text = malloc(n->len + 1);
		if (!n->text) {
			free(n);
			return ndc_config_oom(c);
		}
		memcpy(n->text, ev->data.scalar.value, n->len);
		n->text[n->len] = '\0';
	} else if (ev->type == YAML_SEQUENCE_START_EVENT) {
		n->kind = NODE_SEQ;
		n->anchored = ev->data.sequence_start.anchor != NULL;
		n->tagged = ev->data.sequence_start.tag != NULL;
	} else {
		n->kind = NODE_MAP;
		n->anchored = ev->data.mapping_start.anchor != NULL;
		n->tagged = ev->data.mapping_start.tag != NULL;
	}
	if (parent)
		parent->kids[parent->n++] = n;
	*ret = n;
	return 0;
}

/* Builds the tree of the (single) document; *ret_root stays NULL for an empty stream. */
int ndc_config_tree_build(struct ctx *c, const char *text, size_t len, struct node **ret_root)
{
	struct node *stack[MAX_DEPTH], *root = NULL;
	unsigned int docs = 0;
	size_t depth = 0;
	yaml_parser_t p;
	int r = 0;

	if (!yaml_parser_initialize(&p))
		return ndc_config_oom(c);
	yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
	for (;;) {
		yaml_event_type_t type;
		yaml_event_t ev;
		struct node *n;

		if (!yaml_parser_parse(&p, &ev)) {
			r = syntax_error(c, &p, text, len);
			break;
		}
		type = ev.type;
		if (type == YAML_DOCUMENT_START_EVENT && ++docs > 1)
			r = ndc_config_fail(c, (unsigned int)ev.start_mark.line + 1,
					    "only one YAML document is allowed");
		if (r == 0)
			r = event_node(c, &ev, depth ? stack[depth - 1] : NULL, &n);
		if (r == 0 && n && !root)
			root = n;
		if (r == 0 && n && (n->kind == NODE_SEQ || n->kind == NODE_MAP)) {
			if (depth == MAX_DEPTH)
				r = ndc_config_fail(c, n->line, "nested deeper than %d levels",
						    MAX_DEPTH);
			else
				stack[depth++] = n;
		}
		if ((type == YAML_SEQUENCE_END_EVENT || type == YAML_MAPPING_END_EVENT) && depth)
			depth--;
		yaml_event_delete(&ev);
		if (r < 0 || type == YAML_STREAM_END_EVENT)
			break;
	}
	yaml_parser_delete(&p);
	if (r < 0)
		ndc_config_tree_free(root);
	else
		*ret_root = root;
	return r;
}

/* ---- value helpers ------------------------------------------------------------------------- */

size_t ndc_config_path_push(struct ctx *c, const char *fmt, ...)
{
	size_t old = c->plen, room = sizeof(c->path) - old;
	va_list ap;
	int w;

	va_start(ap, fmt);
	w = vsnprintf(c->path + old, room, fmt, ap);
	va_end(ap);
	if (w > 0)
		c->plen += (size_t)w < room ? (size_t)w : room - 1;
	return old;
}

void ndc_config_path_pop(struct ctx *c, size_t old)
{
	c->plen = old;
	c->path[old] = '\0';
}

int ndc_config_bad_value(struct ctx *c, const struct node *n, const char *what)
{
	char q[QUOTE_BUF + 2];

	return ndc_config_fail(c, n->line, "expected %s, got %s", what, ndc_config_describe(n, q));
}

/* Anchors, aliases and tags have no meaning in this schema; refuse rather than guess. */
int ndc_config_check_node(struct ctx *c, const struct node *n)
{
	if (n->kind == NODE_ALIAS || n->anchored)
		return ndc_config_fail(c, n->line, "YAML anchors and aliases are not supported");
	if (n->tagged)
		return ndc_config_fail(c, n->line, "YAML tags are not supported");
	return 0;
}

int ndc_config_expect_scalar(struct ctx *c, const struct node *n, const char *what)
{
	int r = ndc_config_check_node(c, n);

	if (r == 0 && n->kind != NODE_SCALAR)
		r = ndc_config_bad_value(c, n, what);
	if (r == 0 && strlen(n->text) != n->len)
		r = ndc_config_fail(c, n->line, "expected %s, got a value containing a NUL byte",
				    what);
	return r;
}

/* YAML 1.1/1.2 core-schema null: an empty plain scalar, '~' or 'null'. */
bool ndc_config_is_null(const struct node *n)
{
	if (n->kind != NODE_SCALAR || !n->plain)
		return false;
	return n->len == 0 || !strcmp(n->text, "~") || !strcmp(n->text, "null") ||
	       !strcmp(n->text, "Null") || !strcmp(n->text, "NULL");
}

/* A list, or (scalar_ok) one scalar standing for a list of one; null is the empty list. */
int ndc_config_list_items(struct ctx *c, const struct node *n, const char *what, bool scalar_ok,
			  const struct node *const **ret_items, size_t *ret_n)
{
	bool one = n->kind == NODE_SCALAR && scalar_ok && !ndc_config_is_null(n);

	*ret_items = n->kind == NODE_SEQ ? (const struct node *const *)n->kids : NULL;
	*ret_n = n->kind == NODE_SEQ ? n->n : one;
	if (n->kind != NODE_SEQ && !one && !ndc_config_is_null(n))
		return ndc_config_bad_value(c, n, what);
	return 0;
}
