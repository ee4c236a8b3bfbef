// SPDX-License-Identifier: MIT
/*
 * YAML configuration. libyaml's event stream is first folded into a small node tree, because the
 * document API resolves aliases silently and drops anchors, tags and quoting style, all of which
 * we want to see. The tree is then checked against a table of known keys, so an unknown or
 * repeated key, a value of the wrong kind and a value out of range are each reported with the key
 * path and the 1-based line of the offending node.
 *
 * Default strings and arrays are static (ndc_config_defaults cannot fail); everything parsed is
 * heap, and ndc_config_free tells them apart by address.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

/* The schema is three levels deep; anything much deeper is a mistake or an attack. */
#define MAX_DEPTH 32
#define MAX_FILE_SIZE (1 << 20)
#define IFNAME_MAX 15 /* IFNAMSIZ - 1 */
#define DNS_LABEL_MAX 63
#define DNS_NAME_MAX 253
#define QUOTE_MAX 40 /* bytes of a bad value echoed in an error */
#define QUOTE_BUF (QUOTE_MAX + 8)
#define EAL_ARG_MAX 1024  /* bytes of one dataplane.dpdk.eal_args item */
#define U16_LIST_MAX 1023 /* dataplane.dpdk.ports and lcores items */
#define TAP_PREFIX_MAX 12 /* dataplane.dpdk.tap_prefix: the port's index follows it */

static char default_domain[] = "cluster.local";
static char default_http[] = "127.0.0.1:9254";
static char if_veth[] = "veth*", if_cali[] = "cali*", if_lxc[] = "lxc*", if_cni[] = "cni*";
static char *default_ifaces[] = {if_veth, if_cali, if_lxc, if_cni};
static char default_tap_prefix[] = "ndc-tap";

/* ---- node tree ---------------------------------------------------------------------------- */

enum node_kind { NODE_SCALAR, NODE_SEQ, NODE_MAP, NODE_ALIAS };

struct node {
	enum node_kind kind;
	unsigned int line;
	bool anchored, tagged;
	bool plain; /* scalar written without quotes: may be null */
	char *text; /* scalar value, NUL-terminated; len excludes the NUL */
	size_t len;
	size_t n, cap; /* kids: sequence items; mapping key, value, key, value ... */
	struct node **kids;
};

struct ctx {
	char *err;
	size_t errlen;
	char path[256]; /* key path of the value being checked: "records.namespaces[2]" */
	size_t plen;
};

static void node_free(struct node *n)
{
	if (!n)
		return;
	for (size_t i = 0; i < n->n; i++)
		node_free(n->kids[i]);
	free(n->kids);
	free(n->text);
	free(n);
}

static int oom(struct ctx *c)
{
	if (c->err && c->errlen)
		snprintf(c->err, c->errlen, "out of memory");
	return -ENOMEM;
}

/* Reports "line N: key.path: message" (no path outside any key). Returns -EINVAL. */
static int fail(struct ctx *c, unsigned int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(struct ctx *c, unsigned int line, const char *fmt, ...)
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
static char *sanitize(char dst[QUOTE_BUF], const char *s, size_t len)
{
	size_t i;

	for (i = 0; i < len && i < QUOTE_MAX; i++)
		dst[i] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
	strcpy(dst + i, i < len ? "..." : "");
	return dst;
}

/* "'value'", "an empty value", "a list" or "a mapping": what the user wrote, for "got ...". */
static const char *describe(const struct node *n, char buf[QUOTE_BUF + 2])
{
	if (n->kind != NODE_SCALAR)
		return n->kind == NODE_SEQ ? "a list"
					   : "a mapping"; /* aliases are refused earlier */
	if (!n->len)
		return "an empty value";
	buf[0] = '\'';
	sanitize(buf + 1, n->text, n->len);
	strcat(buf, "'");
	return buf;
}

static int syntax_error(struct ctx *c, const yaml_parser_t *p, const char *text, size_t len)
{
	const char *problem = p->problem ? p->problem : "syntax error";
	unsigned int line = (unsigned int)p->problem_mark.line + 1;
	char where[128] = "";

	if (p->error == YAML_MEMORY_ERROR)
		return oom(c);
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
	return fail(c, (unsigned int)line, "%s%s", problem, where);
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
			return oom(c);
		parent->kids = k;
		parent->cap = cap;
	}
	n = calloc(1, sizeof(*n));
	if (!n)
		return oom(c);
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
			return oom(c);
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
static int build_tree(struct ctx *c, const char *text, size_t len, struct node **ret_root)
{
	struct node *stack[MAX_DEPTH], *root = NULL;
	unsigned int docs = 0;
	size_t depth = 0;
	yaml_parser_t p;
	int r = 0;

	if (!yaml_parser_initialize(&p))
		return oom(c);
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
			r = fail(c, (unsigned int)ev.start_mark.line + 1,
				 "only one YAML document is allowed");
		if (r == 0)
			r = event_node(c, &ev, depth ? stack[depth - 1] : NULL, &n);
		if (r == 0 && n && !root)
			root = n;
		if (r == 0 && n && (n->kind == NODE_SEQ || n->kind == NODE_MAP)) {
			if (depth == MAX_DEPTH)
				r = fail(c, n->line, "nested deeper than %d levels", MAX_DEPTH);
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
		node_free(root);
	else
		*ret_root = root;
	return r;
}

/* ---- value helpers ------------------------------------------------------------------------- */

static size_t path_push(struct ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static size_t path_push(struct ctx *c, const char *fmt, ...)
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

static void path_pop(struct ctx *c, size_t old)
{
	c->plen = old;
	c->path[old] = '\0';
}

static int bad_value(struct ctx *c, const struct node *n, const char *what)
{
	char q[QUOTE_BUF + 2];

	return fail(c, n->line, "expected %s, got %s", what, describe(n, q));
}

/* Anchors, aliases and tags have no meaning in this schema; refuse rather than guess. */
static int check_plain_node(struct ctx *c, const struct node *n)
{
	if (n->kind == NODE_ALIAS || n->anchored)
		return fail(c, n->line, "YAML anchors and aliases are not supported");
	if (n->tagged)
		return fail(c, n->line, "YAML tags are not supported");
	return 0;
}

static int expect_scalar(struct ctx *c, const struct node *n, const char *what)
{
	int r = check_plain_node(c, n);

	if (r == 0 && n->kind != NODE_SCALAR)
		r = bad_value(c, n, what);
	if (r == 0 && strlen(n->text) != n->len)
		r = fail(c, n->line, "expected %s, got a value containing a NUL byte", what);
	return r;
}

/* YAML 1.1/1.2 core-schema null: an empty plain scalar, '~' or 'null'. */
static bool is_null(const struct node *n)
{
	if (n->kind != NODE_SCALAR || !n->plain)
		return false;
	return n->len == 0 || !strcmp(n->text, "~") || !strcmp(n->text, "null") ||
	       !strcmp(n->text, "Null") || !strcmp(n->text, "NULL");
}

/* Digits only, leading zeros allowed (a fraction's), no overflow. */
static bool parse_u64_digits(const char *s, size_t len, uint64_t *ret)
{
	uint64_t v = 0;

	for (size_t i = 0; i < len; i++) {
		unsigned int d = (unsigned char)s[i] - '0';
		if (d > 9 || v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*ret = v;
	return len > 0;
}

/* Plain decimal only: no sign, no leading zero (YAML 1.1 reads 010 as octal), no overflow. */
static bool parse_u64(const char *s, size_t len, uint64_t *ret)
{
	uint64_t v = 0;

	if (len == 0 || (s[0] == '0' && len > 1))
		return false;
	for (size_t i = 0; i < len; i++) {
		unsigned int d = (unsigned char)s[i] - '0';
		if (d > 9 || v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*ret = v;
	return true;
}

static bool parse_ip(const char *s, struct ndc_ip *ret)
{
	memset(ret, 0, sizeof(*ret));
	if (inet_pton(AF_INET, s, ret->addr) == 1)
		ret->family = AF_INET;
	else if (inet_pton(AF_INET6, s, ret->addr) == 1)
		ret->family = AF_INET6;
	return ret->family != 0;
}

/*
 * "ip", "ip:port", "[v6]", "[v6]:port" or a bare v6 literal; *ret_port is left alone when no port
 * is given. Returns 0, -EINVAL for a bad address, -ERANGE for a bad or (need_port) missing port.
 */
static int parse_hostport(const char *s, bool need_port, struct ndc_ip *ret_ip, uint16_t *ret_port)
{
	const char *colon = strchr(s, ':'), *host = s, *port = NULL, *end;
	char buf[INET6_ADDRSTRLEN + 1];
	int family = AF_INET;
	size_t hlen;
	uint64_t v;

	if (s[0] == '[') {
		end = strchr(s, ']');
		if (!end || (end[1] && end[1] != ':'))
			return -EINVAL;
		host = s + 1;
		hlen = (size_t)(end - host);
		port = end[1] ? end + 2 : NULL;
		family = AF_INET6;
	} else if (colon && colon != strrchr(s, ':')) {
		/* Two or more colons: a bare IPv6 literal, which cannot carry a port. */
		hlen = strlen(s);
		family = AF_INET6;
	} else {
		hlen = colon ? (size_t)(colon - s) : strlen(s);
		port = colon ? colon + 1 : NULL;
	}
	if (hlen >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, host, hlen);
	buf[hlen] = '\0';
	if (!parse_ip(buf, ret_ip) || ret_ip->family != family)
		return -EINVAL;
	if (!port)
		return need_port ? -ERANGE : 0;
	if (!parse_u64(port, strlen(port), &v) || v < 1 || v > 65535)
		return -ERANGE;
	*ret_port = (uint16_t)v;
	return 0;
}

const char *ndc_config_check_domain(char *s)
{
	size_t len = strlen(s), label = 0;

	if (len && s[len - 1] == '.')
		s[--len] = '\0';
	if (!len)
		return "empty name";
	if (len > DNS_NAME_MAX)
		return "longer than 253 characters";
	for (size_t i = 0; i <= len; i++) {
		char ch = s[i];
		if (ch >= 'A' && ch <= 'Z')
			s[i] = ch = (char)(ch - 'A' + 'a');
		if (ch == '.' || ch == '\0') {
			if (!label)
				return "empty label";
			if (label > DNS_LABEL_MAX)
				return "label longer than 63 characters";
			if (s[i - 1] == '-')
				return "label ends with '-'";
			label = 0;
			continue;
		}
		if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' ||
		      ch == '_'))
			return "only a-z, 0-9, '-' and '_' are allowed in labels";
		if (ch == '-' && !label)
			return "label starts with '-'";
		label++;
	}
	return NULL;
}

/* Kubernetes namespace names are RFC 1123 labels. */
static bool is_rfc1123_label(const char *s, size_t len)
{
	if (!len || len > DNS_LABEL_MAX || s[0] == '-' || s[len - 1] == '-')
		return false;
	for (size_t i = 0; i < len; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return false;
	return true;
}

/* What the kernel's dev_valid_name() accepts (printable ASCII only), globs included. */
static bool is_ifname_glob(const char *s, size_t len)
{
	if (!len || len > IFNAME_MAX || !strcmp(s, ".") || !strcmp(s, ".."))
		return false;
	for (size_t i = 0; i < len; i++)
		if (s[i] <= ' ' || s[i] >= 0x7f || s[i] == '/' || s[i] == ':')
			return false;
	return true;
}

/* Replaces a string member; a static default is dropped rather than freed. */
static int set_str(struct ctx *c, char **slot, const char *dflt, const char *value)
{
	char *s = value ? strdup(value) : NULL;

	if (value && !s)
		return oom(c);
	if (*slot != dflt)
		free(*slot);
	*slot = s;
	return 0;
}

static void free_strv(char **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

/* ---- the schema ---------------------------------------------------------------------------- */

struct field {
	const char *key;
	int (*parse)(struct ctx *c, const struct field *f, const struct node *n,
		     struct ndc_config *cfg);
	size_t off;		  /* of the value in struct ndc_config */
	size_t size;		  /* of that value, for integers */
	uint64_t min, max;	  /* integers, sizes, list lengths */
	const char *const *names; /* enums, NULL-terminated */
	const struct field *sub;  /* sections: ends with a NULL key */
	size_t aux;		  /* lists with a separate count: the count's offset */
};

#define CFG_OFF(member) offsetof(struct ndc_config, member)
#define MAX_FIELDS 16 /* the most keys any mapping has, for duplicate tracking */

static int walk_map(struct ctx *c, const struct node *map, const struct field *fields,
		    struct ndc_config *cfg);

static void *field_ptr(struct ndc_config *cfg, const struct field *f)
{
	return (char *)cfg + f->off;
}

/* Stores by the width of the member: the integers are uint16_t or uint32_t. */
static int do_int(struct ctx *c, const struct field *f, const struct node *n,
		  struct ndc_config *cfg)
{
	char what[64];
	uint64_t v;
	int r;

	snprintf(what, sizeof(what), "an integer %llu..%llu", (unsigned long long)f->min,
		 (unsigned long long)f->max);
	r = expect_scalar(c, n, what);
	if (r < 0)
		return r;
	if (!parse_u64(n->text, n->len, &v) || v < f->min || v > f->max)
		return bad_value(c, n, what);
	if (f->size == sizeof(uint16_t))
		*(uint16_t *)field_ptr(cfg, f) = (uint16_t)v;
	else
		*(uint32_t *)field_ptr(cfg, f) = (uint32_t)v;
	return 0;
}

/* Bytes, or a 1024-based K/M/G suffix (Ki/Mi/Gi as Kubernetes writes them). */
static int do_size(struct ctx *c, const struct field *f, const struct node *n,
		   struct ndc_config *cfg)
{
	static const char what[] = "a size 64K..16G (bytes, or with a K, M or G suffix)";
	static const char *const suffixes[] = {"", "K", "M", "G", "Ki", "Mi", "Gi"};
	static const unsigned int shifts[] = {0, 10, 20, 30, 10, 20, 30};
	size_t digits = 0, i;
	uint64_t v, mult;
	int r = expect_scalar(c, n, what);

	if (r < 0)
		return r;
	while (digits < n->len && n->text[digits] >= '0' && n->text[digits] <= '9')
		digits++;
	for (i = 0; i < 7 && strcmp(n->text + digits, suffixes[i]); i++)
		;
	mult = i < 7 ? 1ULL << shifts[i] : 0;
	if (!mult || !parse_u64(n->text, digits, &v) || v > UINT64_MAX / mult ||
	    v * mult < f->min || v * mult > f->max)
		return bad_value(c, n, what);
	*(uint64_t *)field_ptr(cfg, f) = v * mult;
	return 0;
}

/* true/false/yes/no in any case; on/off and y/n are not accepted (YAML 1.2 dropped them). */
static int do_bool(struct ctx *c, const struct field *f, const struct node *n,
		   struct ndc_config *cfg)
{
	static const char what[] = "true, false, yes or no";
	bool *b = field_ptr(cfg, f);
	int r = expect_scalar(c, n, what);

	if (r < 0)
		return r;
	if (!strcasecmp(n->text, "true") || !strcasecmp(n->text, "yes"))
		*b = true;
	else if (!strcasecmp(n->text, "false") || !strcasecmp(n->text, "no"))
		*b = false;
	else
		return bad_value(c, n, what);
	return 0;
}

static int do_enum(struct ctx *c, const struct field *f, const struct node *n,
		   struct ndc_config *cfg)
{
	char what[96] = "one of ";
	int r;

	for (int i = 0; f->names[i]; i++) {
		strncat(what, i ? ", " : "", sizeof(what) - strlen(what) - 1);
		strncat(what, f->names[i], sizeof(what) - strlen(what) - 1);
	}
	r = expect_scalar(c, n, what);
	for (int i = 0; r == 0 && f->names[i]; i++) {
		if (!strcmp(n->text, f->names[i])) {
			*(int *)field_ptr(cfg, f) = i; /* the enums are int-sized, in table order */
			return 0;
		}
	}
	return r < 0 ? r : bad_value(c, n, what);
}

static int do_domain(struct ctx *c, const struct field *f, const struct node *n,
		     struct ndc_config *cfg)
{
	static const char what[] = "a DNS domain name";
	char buf[DNS_NAME_MAX + 2], q[QUOTE_BUF + 2];
	const char *why = "longer than 253 characters";
	int r = expect_scalar(c, n, what);

	(void)f;
	if (r < 0)
		return r;
	if (n->len < sizeof(buf)) {
		memcpy(buf, n->text, n->len + 1);
		why = ndc_config_check_domain(buf);
	}
	if (why)
		return fail(c, n->line, "expected %s, got %s (%s)", what, describe(n, q), why);
	return set_str(c, &cfg->cluster_domain, default_domain, buf);
}

/* A list, or (scalar_ok) one scalar standing for a list of one; null is the empty list. */
static int list_items(struct ctx *c, const struct node *n, const char *what, bool scalar_ok,
		      const struct node *const **ret_items, size_t *ret_n)
{
	bool one = n->kind == NODE_SCALAR && scalar_ok && !is_null(n);

	*ret_items = n->kind == NODE_SEQ ? (const struct node *const *)n->kids : NULL;
	*ret_n = n->kind == NODE_SEQ ? n->n : one;
	if (n->kind != NODE_SEQ && !one && !is_null(n))
		return bad_value(c, n, what);
	return 0;
}

static void to_sockaddr(const struct ndc_ip *ip, uint16_t port, struct sockaddr_storage *ss)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	ss->ss_family = ip->family;
	_Static_assert(offsetof(struct sockaddr_in, sin_port) ==
			   offsetof(struct sockaddr_in6, sin6_port),
		       "both put the port right after the family");
	sin->sin_port = htons(port);
	if (ip->family == AF_INET)
		memcpy(&sin->sin_addr, ip->addr, 4);
	else
		memcpy(&sin6->sin6_addr, ip->addr, 16);
}

int ndc_config_parse_server(const char *s, struct sockaddr_storage *ret)
{
	uint16_t port = 53; /* RFC 1035 4.2 */
	struct ndc_ip ip;
	int r = parse_hostport(s, false, &ip, &port);

	if (r == 0)
		to_sockaddr(&ip, port, ret);
	return r;
}

/*
 * A list of servers (or one) into out: upstream and each stub domain's. *ret_count set only
 * when every item is good.
 */
static int parse_servers(struct ctx *c, const struct node *n, size_t min, size_t max,
			 struct sockaddr_storage out[NDC_CFG_MAX_ADDRS], size_t *ret_count)
{
	static const char what[] = "an address (ip, ip:port or [ipv6]:port) or a list of them";
	static const char item_what[] = "an address (ip, ip:port or [ipv6]:port)";
	const struct node *const *items;
	char q[QUOTE_BUF + 2];
	size_t count;
	int r = list_items(c, n, what, true, &items, &count);

	if (r < 0)
		return r;
	if (count < min || count > max)
		return fail(c, n->line, "expected %zu..%zu addresses, got %zu", min, max, count);
	for (size_t i = 0; i < count; i++) {
		const struct node *it = items ? items[i] : n;
		size_t mark = items ? path_push(c, "[%zu]", i) : c->plen;
		int e = 0;

		r = expect_scalar(c, it, item_what);
		if (r == 0)
			e = ndc_config_parse_server(it->text, &out[i]);
		if (e == -ERANGE)
			r = fail(c, it->line, "expected a port 1..65535 in %s", describe(it, q));
		else if (e < 0)
			r = bad_value(c, it, item_what);
		path_pop(c, mark);
		if (r < 0)
			return r;
	}
	*ret_count = count;
	return 0;
}

/* listen (IPs, 1..8) and upstream (ip[:port], 0..8), committed only when all items are good. */
static int do_addrs(struct ctx *c, const struct field *f, const struct node *n,
		    struct ndc_config *cfg)
{
	static const char what[] = "an IP address or a list of them";
	static const char item_what[] = "an IPv4 or IPv6 address";
	struct sockaddr_storage ups[NDC_CFG_MAX_ADDRS];
	struct ndc_ip ips[NDC_CFG_MAX_ADDRS];
	const struct node *const *items;
	size_t count;
	int r;

	if (f->off == CFG_OFF(upstream)) {
		r = parse_servers(c, n, f->min, f->max, ups, &count);
		if (r == 0) {
			memcpy(cfg->upstream, ups, count * sizeof(ups[0]));
			cfg->n_upstream = count;
		}
		return r;
	}
	r = list_items(c, n, what, true, &items, &count);
	if (r < 0)
		return r;
	if (count < f->min || count > f->max)
		return fail(c, n->line, "expected %llu..%llu addresses, got %zu",
			    (unsigned long long)f->min, (unsigned long long)f->max, count);
	for (size_t i = 0; i < count; i++) {
		const struct node *it = items ? items[i] : n;
		size_t mark = items ? path_push(c, "[%zu]", i) : c->plen;

		r = expect_scalar(c, it, item_what);
		if (r == 0 && !parse_ip(it->text, &ips[i]))
			r = bad_value(c, it, item_what);
		path_pop(c, mark);
		if (r < 0)
			return r;
	}
	memcpy(cfg->listen, ips, count * sizeof(ips[0]));
	cfg->n_listen = count;
	return 0;
}

void ndc_config_stubs_free(struct ndc_stub_domain *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i].zone);
	free(v);
}

/*
 * stub_domains: {zone: [addr, ...]} (or one addr), replaced as a whole. Zones as cluster_domain
 * takes them, lowercased; the root is not a stub domain (that is upstream), and a zone given
 * twice (in any case, with or without the dot) is an error.
 */
static int do_stub_domains(struct ctx *c, const struct field *f, const struct node *n,
			   struct ndc_config *cfg)
{
	static const char what[] = "a mapping of zones to server addresses";
	struct ndc_stub_domain *v = NULL;
	size_t count = 0;
	int r = 0;

	(void)f;
	if (is_null(n))
		goto commit;
	if (n->kind != NODE_MAP)
		return bad_value(c, n, what);
	if (n->n / 2 > NDC_CFG_MAX_STUBS)
		return fail(c, n->line, "expected at most %d zones, got %zu", NDC_CFG_MAX_STUBS,
			    n->n / 2);
	if (n->n && !(v = calloc(n->n / 2, sizeof(*v))))
		return oom(c);
	for (size_t i = 0; i + 1 < n->n && r == 0; i += 2, count++) {
		const struct node *key = n->kids[i], *val = n->kids[i + 1];
		struct ndc_stub_domain *sd = &v[count];
		char q[QUOTE_BUF], kq[QUOTE_BUF + 2];
		const char *why = "longer than 253 characters";
		size_t mark;

		r = expect_scalar(c, key, "a zone name");
		if (r < 0)
			break;
		mark = path_push(c, ".%s", sanitize(q, key->text, key->len));
		if (!(sd->zone = strdup(key->text))) {
			r = oom(c);
		} else {
			if (key->len <= DNS_NAME_MAX + 1)
				why = ndc_config_check_domain(sd->zone);
			if (why && !strcmp(why, "empty name"))
				why = "the root is not a stub domain: that is upstream";
			if (why)
				r = fail(c, key->line, "expected a DNS domain name, got %s (%s)",
					 describe(key, kq), why);
		}
		for (size_t j = 0; r == 0 && j < count; j++)
			if (!strcmp(v[j].zone, sd->zone))
				r = fail(c, key->line, "zone given twice (first at line %u)",
					 v[j].line);
		sd->line = key->line;
		if (r == 0)
			r = check_plain_node(c, val);
		if (r == 0)
			r = parse_servers(c, val, 1, NDC_CFG_MAX_ADDRS, sd->servers,
					  &sd->n_servers);
		path_pop(c, mark);
	}
	if (r < 0) {
		ndc_config_stubs_free(v, n->n / 2);
		return r;
	}
commit:
	ndc_config_stubs_free(cfg->stub_domains, cfg->n_stub_domains);
	cfg->stub_domains = v;
	cfg->n_stub_domains = count;
	return 0;
}

/* log.sample: a decimal fraction 0.000001..1 ("1", "0.25", "1e-3" is not taken), in ppm. */
static int do_sample(struct ctx *c, const struct field *f, const struct node *n,
		     struct ndc_config *cfg)
{
	static const char what[] = "a fraction 0.000001..1 (e.g. 0.01)";
	const char *dot;
	uint64_t whole = 0, frac = 0;
	size_t wlen, flen = 0;
	int r = expect_scalar(c, n, what);

	(void)f;
	if (r < 0)
		return r;
	dot = strchr(n->text, '.');
	wlen = dot ? (size_t)(dot - n->text) : n->len;
	if (dot) {
		flen = n->len - wlen - 1;
		if (flen > 6 || (flen && !parse_u64_digits(dot + 1, flen, &frac)))
			return bad_value(c, n, what);
		for (size_t i = flen; i < 6; i++)
			frac *= 10;
	}
	if ((!wlen && !flen) || (wlen && !parse_u64(n->text, wlen, &whole)) || whole > 1 ||
	    (whole == 1 && frac) || (!whole && !frac))
		return bad_value(c, n, what);
	cfg->log.sample_ppm = (uint32_t)(whole * NDC_CFG_SAMPLE_ONE + frac);
	return 0;
}

static int do_http_listen(struct ctx *c, const struct field *f, const struct node *n,
			  struct ndc_config *cfg)
{
	static const char what[] = "host:port with an IPv4 or [IPv6] host";
	char q[QUOTE_BUF + 2];
	struct ndc_ip ip;
	uint16_t port;
	int r = expect_scalar(c, n, what);

	(void)f;
	if (r < 0)
		return r;
	/* A bare IPv6 literal cannot carry a port ("::1:9254" is an address): brackets needed. */
	if (n->text[0] != '[' && strchr(n->text, ':') != strrchr(n->text, ':'))
		r = -EINVAL;
	else
		r = parse_hostport(n->text, true, &ip, &port);
	if (r == -ERANGE)
		return fail(c, n->line, "expected a port 1..65535 in %s", describe(n, q));
	if (r < 0)
		return bad_value(c, n, what);
	return set_str(c, &cfg->http.listen, default_http, n->text);
}

/* An EAL argument: passed to rte_eal_init as it is, only its length is checked. */
static bool is_eal_arg(const char *s, size_t len)
{
	(void)s;
	return len && len <= EAL_ARG_MAX;
}

/*
 * A list of at most f->max strings, each checked by ok, into a new vector (*ret_v, NULL when
 * empty; *ret_count). Errors name the item.
 */
static int string_list(struct ctx *c, const struct field *f, const struct node *n, const char *what,
		       const char *item_what, bool (*ok)(const char *s, size_t len), char ***ret_v,
		       size_t *ret_count)
{
	const struct node *const *items;
	char **v = NULL;
	size_t count, i;
	int r = list_items(c, n, what, false, &items, &count);

	if (r < 0)
		return r;
	if (count > f->max)
		return fail(c, n->line, "expected at most %llu entries, got %zu",
			    (unsigned long long)f->max, count);
	if (count && !(v = calloc(count, sizeof(*v))))
		return oom(c);
	for (i = 0; i < count; i++) {
		const struct node *it = items[i];
		size_t mark = path_push(c, "[%zu]", i);

		r = expect_scalar(c, it, item_what);
		if (r == 0 && !ok(it->text, it->len))
			r = bad_value(c, it, item_what);
		path_pop(c, mark);
		if (r == 0 && !(v[i] = strdup(it->text)))
			r = oom(c);
		if (r < 0) {
			free_strv(v, i);
			return r;
		}
	}
	*ret_v = v;
	*ret_count = count;
	return 0;
}

/* records.namespaces and dataplane.interfaces: lists of names, replaced as a whole. */
static int do_names(struct ctx *c, const struct field *f, const struct node *n,
		    struct ndc_config *cfg)
{
	bool ifaces = f->off == CFG_OFF(dataplane.interfaces);
	char ***slot = ifaces ? &cfg->dataplane.interfaces : &cfg->records.namespaces;
	size_t *n_slot = ifaces ? &cfg->dataplane.n_interfaces : &cfg->records.n_namespaces;
	char **v;
	size_t count;
	int r =
	    ifaces ? string_list(c, f, n, "a list of interface names or globs",
				 "an interface name or glob (1..15 characters, no '/', ':' or "
				 "spaces)",
				 is_ifname_glob, &v, &count)
		   : string_list(c, f, n, "a list of namespaces",
				 "a namespace name (RFC 1123 label)", is_rfc1123_label, &v, &count);

	if (r < 0)
		return r;
	if (*slot != default_ifaces)
		free_strv(*slot, *n_slot);
	*slot = v;
	*n_slot = count;
	return 0;
}

/* A zone name as cluster_domain takes it (the root is not one); only checks, on a copy. */
static bool is_zone_name(const char *s, size_t len)
{
	char buf[DNS_NAME_MAX + 2];

	if (len >= sizeof(buf))
		return false;
	memcpy(buf, s, len);
	buf[len] = '\0';
	return !ndc_config_check_domain(buf);
}

/*
 * records.multicluster_zones: a list of zones, each as cluster_domain takes it (lowercased, the
 * trailing dot dropped), replaced as a whole; a zone given twice is an error.
 */
static int do_mc_zones(struct ctx *c, const struct field *f, const struct node *n,
		       struct ndc_config *cfg)
{
	char **v;
	size_t count;
	int r =
	    string_list(c, f, n, "a list of zones", "a DNS domain name", is_zone_name, &v, &count);

	if (r < 0)
		return r;
	for (size_t i = 0; i < count; i++) {
		ndc_config_check_domain(v[i]); /* checked above: only normalises */
		for (size_t j = 0; j < i && r == 0; j++)
			if (!strcmp(v[i], v[j]))
				r = fail(c, n->line, "zone %s given twice", v[i]);
	}
	if (r < 0) {
		free_strv(v, count);
		return r;
	}
	free_strv(cfg->records.multicluster_zones, cfg->records.n_multicluster_zones);
	cfg->records.multicluster_zones = v;
	cfg->records.n_multicluster_zones = count;
	cfg->records.multicluster_zones_line = n->line;
	return 0;
}

/*
 * source.snapshot, source.kubernetes.kubeconfig and dataplane.pin_dir; a null kubeconfig means
 * in-cluster, a null pin_dir the default.
 */
static int do_path(struct ctx *c, const struct field *f, const struct node *n,
		   struct ndc_config *cfg)
{
	static const char what[] = "a file path";
	bool snapshot = f->off == CFG_OFF(source.snapshot);
	int r;

	if (!snapshot && is_null(n))
		return set_str(c, field_ptr(cfg, f), NULL, NULL);
	r = expect_scalar(c, n, what);
	if (r == 0 && !n->len)
		r = bad_value(c, n, what);
	return r < 0 ? r : set_str(c, field_ptr(cfg, f), NULL, n->text);
}

/* dataplane.dpdk.eal_args: a list of strings, each passed to rte_eal_init as it is. */
static int do_strings(struct ctx *c, const struct field *f, const struct node *n,
		      struct ndc_config *cfg)
{
	char **v, ***slot = field_ptr(cfg, f);
	size_t count, *n_slot = (size_t *)((char *)cfg + f->aux);
	int r = string_list(c, f, n, "a list of strings", "a string of 1..1024 bytes", is_eal_arg,
			    &v, &count);

	if (r < 0)
		return r;
	free_strv(*slot, *n_slot);
	*slot = v;
	*n_slot = count;
	return 0;
}

/*
 * dataplane.dpdk.ports and lcores: lists of distinct integers 0..1023 (port ids, CPU numbers;
 * whether they exist is for the EAL to say), replaced as a whole.
 */
static int do_u16s(struct ctx *c, const struct field *f, const struct node *n,
		   struct ndc_config *cfg)
{
	const struct node *const *items;
	uint16_t *v = NULL, **slot = field_ptr(cfg, f);
	size_t count, *n_slot = (size_t *)((char *)cfg + f->aux);
	char what[64];
	int r = list_items(c, n, "a list of integers", false, &items, &count);

	if (r < 0)
		return r;
	if (count > f->max)
		return fail(c, n->line, "expected at most %llu entries, got %zu",
			    (unsigned long long)f->max, count);
	snprintf(what, sizeof(what), "an integer 0..%u", U16_LIST_MAX);
	if (count && !(v = calloc(count, sizeof(*v))))
		return oom(c);
	for (size_t i = 0; i < count; i++) {
		const struct node *it = items[i];
		size_t mark = path_push(c, "[%zu]", i);
		uint64_t x = 0;

		r = expect_scalar(c, it, what);
		if (r == 0 && (!parse_u64(it->text, it->len, &x) || x > U16_LIST_MAX))
			r = bad_value(c, it, what);
		for (size_t j = 0; r == 0 && j < i; j++)
			if (v[j] == x)
				r = fail(c, it->line, "%llu is listed twice",
					 (unsigned long long)x);
		path_pop(c, mark);
		if (r < 0) {
			free(v);
			return r;
		}
		v[i] = (uint16_t)x;
	}
	free(*slot);
	*slot = v;
	*n_slot = count;
	return 0;
}

/* dataplane.dpdk.tap_prefix: the start of an interface name, the port's index follows it. */
static int do_tap_prefix(struct ctx *c, const struct field *f, const struct node *n,
			 struct ndc_config *cfg)
{
	static const char what[] = "1..12 characters of an interface name (no '/', ':', spaces "
				   "or globs)";
	int r = expect_scalar(c, n, what);

	(void)f;
	if (r < 0)
		return r;
	if (n->len > TAP_PREFIX_MAX || !is_ifname_glob(n->text, n->len) || strpbrk(n->text, "*?[]"))
		return bad_value(c, n, what);
	return set_str(c, &cfg->dataplane.dpdk.tap_prefix, default_tap_prefix, n->text);
}

/* Section values: a mapping, or null (everything under it commented out) for the defaults. */
static int do_section(struct ctx *c, const struct field *f, const struct node *n,
		      struct ndc_config *cfg)
{
	if (is_null(n))
		return 0;
	if (n->kind != NODE_MAP)
		return bad_value(c, n, "a mapping");
	return walk_map(c, n, f->sub, cfg);
}

static int do_source(struct ctx *c, const struct field *f, const struct node *n,
		     struct ndc_config *cfg)
{
	int r = do_section(c, f, n, cfg);

	if (r < 0 || is_null(n))
		return r;
	if (!n->n)
		return fail(c, n->line, "expected one of snapshot, kubernetes");
	/* walk_map has rejected unknown and repeated keys: two keys means both were given. */
	if (n->n > 2)
		return fail(c, n->kids[2]->line, "give either snapshot or kubernetes, not both");
	/* kubernetes: {} or null means in-cluster configuration. */
	cfg->source.kind =
	    strcmp(n->kids[0]->text, "snapshot") ? NDC_SOURCE_KUBERNETES : NDC_SOURCE_SNAPSHOT;
	return 0;
}

/* An EAL option that places lcores: dataplane.dpdk.lcores must not be given beside it. */
static bool is_lcore_arg(const char *a)
{
	return !strncmp(a, "-l", 2) || !strncmp(a, "-c", 2) || !strcmp(a, "--lcores") ||
	       !strncmp(a, "--lcores=", 9);
}

static int do_dpdk(struct ctx *c, const struct field *f, const struct node *n,
		   struct ndc_config *cfg)
{
	int r = do_section(c, f, n, cfg);

	if (r < 0 || !cfg->dataplane.dpdk.n_lcores)
		return r;
	for (size_t i = 0; i < cfg->dataplane.dpdk.n_eal_args; i++)
		if (is_lcore_arg(cfg->dataplane.dpdk.eal_args[i]))
			return fail(c, n->line,
				    "lcores and an lcore option in eal_args ('%s'): give the "
				    "polling CPUs in one of them",
				    cfg->dataplane.dpdk.eal_args[i]);
	return 0;
}

/*
 * cache.prefetch and forward.per_client: a mapping of their keys (a key not given keeps its
 * default), true for the defaults, or false to turn the feature off.
 */
static int do_switch_section(struct ctx *c, const struct field *f, const struct node *n,
			     struct ndc_config *cfg, bool *ret_on)
{
	static const char what[] = "a mapping, true or false";
	int r;

	if (n->kind == NODE_SCALAR && !is_null(n)) {
		r = expect_scalar(c, n, what);
		if (r < 0)
			return r;
		if (!strcasecmp(n->text, "true") || !strcasecmp(n->text, "yes"))
			*ret_on = true;
		else if (!strcasecmp(n->text, "false") || !strcasecmp(n->text, "no"))
			*ret_on = false;
		else
			return bad_value(c, n, what);
		return 0;
	}
	if (n->kind != NODE_MAP && !is_null(n))
		return bad_value(c, n, what);
	*ret_on = true;
	return do_section(c, f, n, cfg);
}

static int do_prefetch(struct ctx *c, const struct field *f, const struct node *n,
		       struct ndc_config *cfg)
{
	return do_switch_section(c, f, n, cfg, &cfg->cache.prefetch.on);
}

static int do_per_client(struct ctx *c, const struct field *f, const struct node *n,
			 struct ndc_config *cfg)
{
	bool on = true;
	int r = do_switch_section(c, f, n, cfg, &on);

	if (r == 0 && !on)
		cfg->forward.per_client.qps = 0; /* what the limiter reads as off */
	return r;
}

#define SIZEOF_MEMBER(m) sizeof(((struct ndc_config *)0)->m)

/* One key per line: clang-format would split these designated initializers over many. */
/* clang-format off */
#define F_INT(k, m, lo, hi) \
	{ .key = k, .parse = do_int, .off = CFG_OFF(m), .size = SIZEOF_MEMBER(m), .min = lo, .max = hi }
#define F_SECTION(k, fn, s) { .key = k, .parse = fn, .sub = s }
#define F_FIELD(k, fn, m, ...) { .key = k, .parse = fn, .off = CFG_OFF(m), __VA_ARGS__ }

static const char *const pods_names[] = { "disabled", "insecure", "verified", NULL };
static const char *const mode_names[] = { "tc", "xdp", "socket", "dpdk", NULL };
/* In the order of enum ndc_log_level (ndc/log.h). */
static const char *const level_names[] = { "error", "warning", "info", "debug", NULL };
/* In the order of query.h's enum ndc_fwd_protocol and enum ndc_fwd_policy. */
static const char *const protocol_names[] = { "udp", "tcp", "prefer_udp", NULL };
static const char *const policy_names[] = { "sequential", "random", "round_robin", NULL };

static const struct field kubernetes_fields[] = {
	F_FIELD("kubeconfig", do_path, source.kubeconfig),
	F_FIELD("kube_dns_configmap", do_bool, source.kube_dns_configmap),
	{ 0 },
};

static const struct field source_fields[] = {
	F_FIELD("snapshot", do_path, source.snapshot),
	F_SECTION("kubernetes", do_section, kubernetes_fields),
	{ 0 },
};

static const struct field records_fields[] = {
	F_INT("ttl", records.ttl, 0, 3600),
	F_FIELD("pods", do_enum, records.pods, .names = pods_names),
	F_FIELD("endpoint_pod_names", do_bool, records.endpoint_pod_names),
	F_FIELD("ignore_empty_service", do_bool, records.ignore_empty_service),
	F_FIELD("namespaces", do_names, records.namespaces, .max = 4096),
	F_FIELD("multicluster_zones", do_mc_zones, records.multicluster_zones,
		.max = NDC_CFG_MAX_MC_ZONES),
	{ 0 },
};

static const struct field dpdk_fields[] = {
	F_FIELD("eal_args", do_strings, dataplane.dpdk.eal_args, .max = 128,
		.aux = CFG_OFF(dataplane.dpdk.n_eal_args)),
	F_FIELD("ports", do_u16s, dataplane.dpdk.ports, .max = 64,
		.aux = CFG_OFF(dataplane.dpdk.n_ports)),
	F_INT("queues", dataplane.dpdk.queues, 1, 16),
	F_FIELD("lcores", do_u16s, dataplane.dpdk.lcores, .max = 64,
		.aux = CFG_OFF(dataplane.dpdk.n_lcores)),
	F_INT("burst", dataplane.dpdk.burst, 1, 512),
	F_INT("poll_sleep_us", dataplane.dpdk.poll_sleep_us, 0, 100000),
	F_FIELD("tap_prefix", do_tap_prefix, dataplane.dpdk.tap_prefix),
	{ 0 },
};

static const struct field dataplane_fields[] = {
	F_FIELD("mode", do_enum, dataplane.mode, .names = mode_names),
	F_FIELD("interfaces", do_names, dataplane.interfaces, .max = 64),
	F_INT("table_size", dataplane.table_size, 1024, 16777216),
	F_FIELD("redirect_peer", do_bool, dataplane.redirect_peer),
	F_FIELD("failopen", do_bool, dataplane.failopen),
	F_FIELD("pin_dir", do_path, dataplane.pin_dir),
	F_SECTION("dpdk", do_dpdk, dpdk_fields),
	{ 0 },
};

static const struct field http_fields[] = {
	F_FIELD("listen", do_http_listen, http.listen),
	{ 0 },
};

static const struct field prefetch_fields[] = {
	F_INT("min_hits", cache.prefetch.min_hits, 1, 1000000),
	F_INT("before_pct", cache.prefetch.before_pct, 1, 99),
	{ 0 },
};

static const struct field per_client_fields[] = {
	F_INT("qps", forward.per_client.qps, 1, 10000000),
	F_INT("burst", forward.per_client.burst, 1, 10000000),
	{ 0 },
};

static const struct field cache_fields[] = {
	F_INT("max_entries", cache.max_entries, 1, 10000000),
	F_FIELD("max_bytes", do_size, cache.max_bytes, .min = 64ULL << 10, .max = 16ULL << 30),
	F_INT("max_ttl", cache.max_ttl, 1, 604800),
	F_INT("neg_max_ttl", cache.neg_max_ttl, 0, 86400),
	F_INT("stale_max", cache.stale_max, 0, 604800),
	F_SECTION("prefetch", do_prefetch, prefetch_fields),
	{ 0 },
};

static const struct field forward_fields[] = {
	F_INT("timeout_ms", forward.timeout_ms, 10, 60000),
	F_INT("max_pending", forward.max_pending, 1, 1000000),
	F_FIELD("protocol", do_enum, forward.protocol, .names = protocol_names),
	F_FIELD("policy", do_enum, forward.policy, .names = policy_names),
	F_SECTION("per_client", do_per_client, per_client_fields),
	{ 0 },
};

static const struct field log_fields[] = {
	F_FIELD("level", do_enum, log.level, .names = level_names),
	F_FIELD("queries", do_bool, log.queries),
	F_FIELD("sample", do_sample, log.sample_ppm),
	{ 0 },
};

static const struct field top_fields[] = {
	F_FIELD("cluster_domain", do_domain, cluster_domain),
	F_FIELD("listen", do_addrs, listen, .min = 1, .max = NDC_CFG_MAX_ADDRS),
	F_INT("port", port, 1, 65535),
	F_FIELD("upstream", do_addrs, upstream, .min = 0, .max = NDC_CFG_MAX_ADDRS),
	F_FIELD("stub_domains", do_stub_domains, stub_domains),
	F_SECTION("source", do_source, source_fields),
	F_SECTION("records", do_section, records_fields),
	F_SECTION("dataplane", do_section, dataplane_fields),
	F_SECTION("http", do_section, http_fields),
	F_SECTION("cache", do_section, cache_fields),
	F_SECTION("forward", do_section, forward_fields),
	F_SECTION("log", do_section, log_fields),
	F_INT("workers", workers, 0, 256),
	F_INT("tcp_idle_ms", tcp_idle_ms, 100, 600000),
	F_INT("tcp_max_conns", tcp_max_conns, 1, 65536),
	{ 0 },
};
/* clang-format on */

#define FIELDS_FIT(t) _Static_assert(sizeof(t) / sizeof(t[0]) <= MAX_FIELDS + 1, #t " too long")
FIELDS_FIT(top_fields);
FIELDS_FIT(log_fields);
FIELDS_FIT(records_fields);
FIELDS_FIT(cache_fields);
FIELDS_FIT(dataplane_fields);
FIELDS_FIT(dpdk_fields);

static int walk_map(struct ctx *c, const struct node *map, const struct field *fields,
		    struct ndc_config *cfg)
{
	unsigned int first[MAX_FIELDS] = {0};

	for (size_t i = 0; i + 1 < map->n; i += 2) {
		const struct node *key = map->kids[i], *val = map->kids[i + 1];
		char known[256] = "", q[QUOTE_BUF];
		size_t mark, idx;
		int r = check_plain_node(c, key);

		if (r == 0 && key->kind != NODE_SCALAR)
			r = bad_value(c, key, "a key");
		if (r < 0)
			return r;
		for (idx = 0; fields[idx].key; idx++)
			if (strlen(fields[idx].key) == key->len &&
			    !memcmp(fields[idx].key, key->text, key->len))
				break;
		mark = path_push(c, "%s%s", c->plen ? "." : "", sanitize(q, key->text, key->len));
		if (!fields[idx].key) {
			for (size_t k = 0; fields[k].key; k++) {
				strncat(known, k ? ", " : "", sizeof(known) - strlen(known) - 1);
				strncat(known, fields[k].key, sizeof(known) - strlen(known) - 1);
			}
			r = fail(c, key->line, "unknown key (known keys: %s)", known);
		} else if (first[idx]) {
			r = fail(c, key->line, "duplicate key (first at line %u)", first[idx]);
		}
		if (r == 0) {
			first[idx] = key->line;
			r = check_plain_node(c, val);
		}
		if (r == 0)
			r = fields[idx].parse(c, &fields[idx], val, cfg);
		path_pop(c, mark);
		if (r < 0)
			return r;
	}
	return 0;
}

/* ---- public API ----------------------------------------------------------------------------- */

/* Whether name is zone or under it (both lowercase, no trailing dot). */
static bool in_zone(const char *name, const char *zone)
{
	size_t n = strlen(name), z = strlen(zone);

	return n >= z && !strcmp(name + n - z, zone) && (n == z || name[n - z - 1] == '.');
}

/*
 * Checks across keys, once all are read: a stub domain inside the cluster domain would never be
 * asked (ndcache answers the zone itself) and NodeLocal DNSCache refuses it too.
 */
static int check_stubs(struct ctx *c, const struct ndc_config *cfg)
{
	for (size_t i = 0; i < cfg->n_stub_domains; i++) {
		const struct ndc_stub_domain *sd = &cfg->stub_domains[i];
		char q[QUOTE_BUF];
		size_t mark;
		int r;

		if (!in_zone(sd->zone, cfg->cluster_domain))
			continue;
		mark = path_push(c, "stub_domains.%s", sanitize(q, sd->zone, strlen(sd->zone)));
		r = fail(c, sd->line, "inside cluster_domain %s, which ndcache answers itself",
			 cfg->cluster_domain);
		path_pop(c, mark);
		return r;
	}
	return 0;
}

/*
 * records.multicluster_zones against the other keys. A zone strictly inside the cluster domain
 * would have its missing names answered NXDOMAIN with the cluster domain's SOA by the kernel,
 * which synthesises negative answers for the whole cluster domain; the cluster domain itself, or
 * any zone outside it, is fine. A stub domain at or inside a zone ndcache answers is never asked.
 */
static int check_mc_zones(struct ctx *c, const struct ndc_config *cfg)
{
	const unsigned int line = cfg->records.multicluster_zones_line;
	int r = 0;

	for (size_t i = 0; i < cfg->records.n_multicluster_zones && r == 0; i++) {
		const char *z = cfg->records.multicluster_zones[i];
		size_t mark = path_push(c, "records.multicluster_zones[%zu]", i);

		if (strcmp(z, cfg->cluster_domain) && in_zone(z, cfg->cluster_domain))
			r = fail(c, line,
				 "%s is inside cluster_domain %s: use the cluster domain itself or "
				 "a zone outside it",
				 z, cfg->cluster_domain);
		for (size_t k = 0; k < cfg->n_stub_domains && r == 0; k++)
			if (in_zone(cfg->stub_domains[k].zone, z))
				r = fail(c, cfg->stub_domains[k].line,
					 "stub domain %s is inside multicluster zone %s, which "
					 "ndcache answers itself",
					 cfg->stub_domains[k].zone, z);
		path_pop(c, mark);
	}
	return r;
}

void ndc_config_defaults(struct ndc_config *cfg)
{
	static const uint8_t node_local[4] = {169, 254, 20, 10};

	/* Zero: source embedded, no upstream, pods disabled, dataplane tc, one worker per CPU. */
	memset(cfg, 0, sizeof(*cfg));
	cfg->cluster_domain = default_domain;
	cfg->n_listen = 1;
	cfg->listen[0].family = AF_INET;
	memcpy(cfg->listen[0].addr, node_local, sizeof(node_local));
	cfg->port = 53;
	cfg->records.ttl = 5;
	cfg->dataplane.n_interfaces = sizeof(default_ifaces) / sizeof(default_ifaces[0]);
	cfg->dataplane.interfaces = default_ifaces;
	cfg->dataplane.table_size = 262144;
	cfg->dataplane.failopen = true;
	cfg->dataplane.dpdk.queues = 1;
	cfg->dataplane.dpdk.burst = 32;
	cfg->dataplane.dpdk.tap_prefix = default_tap_prefix;
	cfg->http.listen = default_http;
	cfg->cache.max_entries = 100000;
	cfg->cache.max_bytes = 64ULL << 20;
	cfg->cache.max_ttl = 86400;
	cfg->cache.neg_max_ttl = 3600;
	cfg->cache.stale_max = 86400;
	cfg->forward.timeout_ms = 1000;
	cfg->forward.max_pending = 10000;
	cfg->cache.prefetch.on = true;
	cfg->cache.prefetch.min_hits = 2;
	cfg->cache.prefetch.before_pct = 10;
	cfg->forward.per_client.qps = NDC_CFG_PER_CLIENT_QPS;
	cfg->forward.per_client.burst = NDC_CFG_PER_CLIENT_BURST;
	cfg->source.kube_dns_configmap = true;
	cfg->log.level = 2; /* NDC_LOG_INFO: config.h does not need ndc/log.h */
	cfg->log.sample_ppm = NDC_CFG_SAMPLE_ONE;
	cfg->tcp_idle_ms = 10000;
	cfg->tcp_max_conns = 1024;
}

int ndc_config_parse(const char *text, size_t len, struct ndc_config *cfg, char *err, size_t errlen)
{
	struct ctx c = {.err = err, .errlen = errlen};
	struct node *root = NULL;
	int r;

	if (err && errlen)
		err[0] = '\0';
	ndc_config_defaults(cfg);
	r = build_tree(&c, text, len, &root);
	/* An empty file, an empty document or a lone null: all defaults. */
	if (r < 0 || !root || is_null(root))
		goto out;
	r = check_plain_node(&c, root);
	if (r == 0 && root->kind != NODE_MAP)
		r = bad_value(&c, root, "a mapping at the top level");
	if (r == 0)
		r = walk_map(&c, root, top_fields, cfg);
	if (r == 0)
		r = check_stubs(&c, cfg);
	if (r == 0)
		r = check_mc_zones(&c, cfg);
out:
	node_free(root);
	return r;
}

int ndc_config_load(const char *path, struct ndc_config *cfg, char *err, size_t errlen)
{
	return ndc_config_load_text(path, cfg, NULL, NULL, err, errlen);
}

int ndc_config_load_text(const char *path, struct ndc_config *cfg, char **ret_text, size_t *ret_len,
			 char *err, size_t errlen)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL, *msg;
	size_t len = 0;
	int r = f ? 0 : -errno;

	if (ret_text)
		*ret_text = NULL;
	ndc_config_defaults(cfg);
	if (r == 0 && !(buf = malloc(MAX_FILE_SIZE + 1)))
		r = -ENOMEM;
	if (r == 0) {
		len = fread(buf, 1, MAX_FILE_SIZE + 1, f);
		if (ferror(f))
			r = errno ? -errno : -EIO;
		else if (len > MAX_FILE_SIZE)
			r = -EFBIG;
	}
	if (f)
		fclose(f);
	if (r < 0) {
		if (err && errlen)
			snprintf(err, errlen, "%s: %s", path, strerror(-r));
		free(buf);
		return r;
	}
	r = ndc_config_parse(buf, len, cfg, err, errlen);
	if (r == 0 && ret_text) {
		buf[len] = '\0';
		*ret_text = buf;
		*ret_len = len;
		buf = NULL;
	}
	free(buf);
	/* Parse errors name the file too: "path: line N: key: reason". */
	if (r < 0 && err && errlen && (msg = strdup(err))) {
		snprintf(err, errlen, "%s: %s", path, msg);
		free(msg);
	}
	return r;
}

void ndc_config_free(struct ndc_config *cfg)
{
	if (!cfg)
		return;
	if (cfg->cluster_domain != default_domain)
		free(cfg->cluster_domain);
	free(cfg->source.snapshot);
	free(cfg->source.kubeconfig);
	free(cfg->dataplane.pin_dir);
	free_strv(cfg->dataplane.dpdk.eal_args, cfg->dataplane.dpdk.n_eal_args);
	free(cfg->dataplane.dpdk.ports);
	free(cfg->dataplane.dpdk.lcores);
	if (cfg->dataplane.dpdk.tap_prefix != default_tap_prefix)
		free(cfg->dataplane.dpdk.tap_prefix);
	ndc_config_stubs_free(cfg->stub_domains, cfg->n_stub_domains);
	free_strv(cfg->records.namespaces, cfg->records.n_namespaces);
	free_strv(cfg->records.multicluster_zones, cfg->records.n_multicluster_zones);
	if (cfg->dataplane.interfaces != default_ifaces)
		free_strv(cfg->dataplane.interfaces, cfg->dataplane.n_interfaces);
	if (cfg->http.listen != default_http)
		free(cfg->http.listen);
	memset(cfg, 0, sizeof(*cfg));
}
