/* SPDX-License-Identifier: MIT */
/*
 * Private to control/config/: how a YAML text becomes a struct ndc_config. The files run one
 * way, each calling only those below it:
 *   config_load.c      ndc_config_parse, ndc_config_load (text, tree, walk), --kubeconfig
 *   config_schema.c    the table of keys (types, ranges) and the walk of the tree along it
 *   config_parse.c     one node into one member, per kind of value (the table's handlers)
 *   config_validate.c  checks across keys, once every key is read
 *   config_values.c    the text of one value: numbers, addresses, domain names
 *   config_tree.c      libyaml's events folded into a node tree; errors naming key and line
 *   config_default.c   the defaults, and freeing what parsing allocated
 */
#ifndef NDC_CONFIG_PARSE_H
#define NDC_CONFIG_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"

#define IFNAME_MAX 15 /* IFNAMSIZ - 1 */
#define DNS_LABEL_MAX 63
#define DNS_NAME_MAX 253
#define QUOTE_MAX 40 /* bytes of a bad value echoed in an error */
#define QUOTE_BUF (QUOTE_MAX + 8)

/* ---- config_tree.c ---- */

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

void ndc_config_tree_free(struct node *n);
/* Builds the tree of the (single) document; *ret_root stays NULL for an empty stream. */
int ndc_config_tree_build(struct ctx *c, const char *text, size_t len, struct node **ret_root);

/* Reports "out of memory". Returns -ENOMEM. */
int ndc_config_oom(struct ctx *c);
/* Reports "line N: key.path: message" (no path outside any key). Returns -EINVAL. */
int ndc_config_fail(struct ctx *c, unsigned int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Error messages are one line: echo at most QUOTE_MAX bytes, printable ASCII only. */
char *ndc_config_sanitize(char dst[QUOTE_BUF], const char *s, size_t len);
/* "'value'", "an empty value", "a list" or "a mapping": what the user wrote, for "got ...". */
const char *ndc_config_describe(const struct node *n, char buf[QUOTE_BUF + 2]);
/* "expected <what>, got <what n is>". Returns -EINVAL. */
int ndc_config_bad_value(struct ctx *c, const struct node *n, const char *what);
/* Appends to the key path; returns what ndc_config_path_pop restores. */
size_t ndc_config_path_push(struct ctx *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void ndc_config_path_pop(struct ctx *c, size_t old);
/* Anchors, aliases and tags have no meaning in this schema; refuse rather than guess. */
int ndc_config_check_node(struct ctx *c, const struct node *n);
/* A scalar without a NUL byte in it, else an error saying what was expected. */
int ndc_config_expect_scalar(struct ctx *c, const struct node *n, const char *what);
/* YAML 1.1/1.2 core-schema null: an empty plain scalar, '~' or 'null'. */
bool ndc_config_is_null(const struct node *n);
/* A list, or (scalar_ok) one scalar standing for a list of one; null is the empty list. */
int ndc_config_list_items(struct ctx *c, const struct node *n, const char *what, bool scalar_ok,
			  const struct node *const **ret_items, size_t *ret_n);

/* ---- config_values.c ---- */

/* Digits only, leading zeros allowed (a fraction's), no overflow. */
bool ndc_config_u64_digits(const char *s, size_t len, uint64_t *ret);
/* Plain decimal only: no sign, no leading zero (YAML 1.1 reads 010 as octal), no overflow. */
bool ndc_config_u64(const char *s, size_t len, uint64_t *ret);
bool ndc_config_ip(const char *s, struct ndc_ip *ret);
/*
 * "ip", "ip:port", "[v6]", "[v6]:port" or a bare v6 literal; *ret_port is left alone when no port
 * is given. Returns 0, -EINVAL for a bad address, -ERANGE for a bad or (need_port) missing port.
 */
int ndc_config_hostport(const char *s, bool need_port, struct ndc_ip *ret_ip, uint16_t *ret_port);

/* ---- config_default.c ---- */

/* The static defaults: never freed, replaced by heap copies when a file sets them. */
extern char ndc_config_default_domain[];
extern char ndc_config_default_http[];
extern char *ndc_config_default_ifaces[];
extern char ndc_config_default_tap_prefix[];
void ndc_config_strv_free(char **v, size_t n);

/* ---- config_parse.c: the handlers of the schema's keys ---- */

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

/* A boolean as every key takes it (true, false, yes, no; any case); what: for the error. */
int ndc_config_bool(struct ctx *c, const struct node *n, const char *what, bool *ret);

#define NDC_CONFIG_HANDLER(name) \
	int name(struct ctx *c, const struct field *f, const struct node *n, struct ndc_config *cfg)
NDC_CONFIG_HANDLER(ndc_config_set_int);
NDC_CONFIG_HANDLER(ndc_config_set_size);
NDC_CONFIG_HANDLER(ndc_config_set_bool);
NDC_CONFIG_HANDLER(ndc_config_set_enum);
NDC_CONFIG_HANDLER(ndc_config_set_domain);
NDC_CONFIG_HANDLER(ndc_config_set_addrs);
NDC_CONFIG_HANDLER(ndc_config_set_stub_domains);
NDC_CONFIG_HANDLER(ndc_config_set_sample);
NDC_CONFIG_HANDLER(ndc_config_set_http_listen);
NDC_CONFIG_HANDLER(ndc_config_set_names);
NDC_CONFIG_HANDLER(ndc_config_set_mc_zones);
NDC_CONFIG_HANDLER(ndc_config_set_path);
NDC_CONFIG_HANDLER(ndc_config_set_strings);
NDC_CONFIG_HANDLER(ndc_config_set_u16s);
NDC_CONFIG_HANDLER(ndc_config_set_tap_prefix);
NDC_CONFIG_HANDLER(ndc_config_set_rate);
NDC_CONFIG_HANDLER(ndc_config_set_socket_path);

/* ---- config_validate.c ---- */

/* The checks across keys, once all are read: 0 or -EINVAL (reported). */
int ndc_config_validate(struct ctx *c, const struct ndc_config *cfg);

/* ---- config_schema.c ---- */

/* Walks the top-level mapping along the table of keys into cfg: 0, -EINVAL or -ENOMEM. */
int ndc_config_walk(struct ctx *c, const struct node *root, struct ndc_config *cfg);

#endif
