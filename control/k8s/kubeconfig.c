// SPDX-License-Identifier: MIT
/*
 * Connection settings for the API server: a kubeconfig file (the subset client-go's clientcmd
 * reads for a token or client-certificate user) or the in-cluster service account. The YAML is
 * loaded with libyaml's document API and turned into a json-c tree, so the lookups below are
 * plain map/array walks.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <json-c/json.h>
#include <yaml.h>

#include <ndc/log.h>

#include "k8s/k8s.h"

/* A kubeconfig is 5 levels deep; the bounds only keep hostile input (alias bombs) cheap. */
#define NDC_KUBECONFIG_MAX_DEPTH 32
#define NDC_KUBECONFIG_MAX_NODES 100000

/* A projected service-account token is ~1 KB; anything this size is not a token. */
#define NDC_K8S_MAX_TOKEN ((size_t)64 << 10)

#define NDC_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

/* Every scalar stays a string (YAML 1.1 typing is done by the reader that needs a bool). */
static json_object *yaml_to_json(yaml_document_t *doc, yaml_node_t *n, int depth, size_t *budget)
{
	json_object *o = NULL;

	if (!n || depth > NDC_KUBECONFIG_MAX_DEPTH || *budget == 0)
		return NULL;
	(*budget)--;
	switch (n->type) {
	case YAML_SCALAR_NODE:
		return json_object_new_string_len((const char *)n->data.scalar.value,
						  (int)n->data.scalar.length);
	case YAML_SEQUENCE_NODE:
		o = json_object_new_array();
		if (!o)
			return NULL;
		for (yaml_node_item_t *i = n->data.sequence.items.start;
		     i < n->data.sequence.items.top; i++) {
			json_object *v =
			    yaml_to_json(doc, yaml_document_get_node(doc, *i), depth + 1, budget);
			if (!v || json_object_array_add(o, v)) {
				json_object_put(v);
				goto fail;
			}
		}
		return o;
	case YAML_MAPPING_NODE:
		o = json_object_new_object();
		if (!o)
			return NULL;
		for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
		     p < n->data.mapping.pairs.top; p++) {
			yaml_node_t *k = yaml_document_get_node(doc, p->key);
			json_object *v;

			if (!k || k->type != YAML_SCALAR_NODE)
				goto fail;
			v = yaml_to_json(doc, yaml_document_get_node(doc, p->value), depth + 1,
					 budget);
			if (!v ||
			    json_object_object_add(o, (const char *)k->data.scalar.value, v)) {
				json_object_put(v);
				goto fail;
			}
		}
		return o;
	default:
		return NULL;
	}
fail:
	json_object_put(o);
	return NULL;
}

static int load_yaml(const char *path, json_object **ret, char *err, size_t errlen)
{
	yaml_parser_t parser;
	yaml_document_t doc;
	size_t budget = NDC_KUBECONFIG_MAX_NODES;
	yaml_node_t *root;
	FILE *f;
	int r = 0;

	*ret = NULL;
	f = fopen(path, "re");
	if (!f)
		return ndc_errf(-errno, err, errlen, "kubeconfig %s: %s", path, strerror(errno));
	if (!yaml_parser_initialize(&parser)) {
		fclose(f);
		return ndc_errf(-ENOMEM, err, errlen, "kubeconfig %s: out of memory", path);
	}
	yaml_parser_set_input_file(&parser, f);
	if (!yaml_parser_load(&parser, &doc)) {
		r = ndc_errf(-EINVAL, err, errlen, "kubeconfig %s: YAML error at line %zu: %s",
			     path, parser.problem_mark.line + 1,
			     parser.problem ? parser.problem : "unknown");
		goto out_parser;
	}
	root = yaml_document_get_root_node(&doc);
	if (!root || root->type != YAML_MAPPING_NODE) {
		r = ndc_errf(-EINVAL, err, errlen, "kubeconfig %s: not a YAML mapping", path);
		goto out_doc;
	}
	*ret = yaml_to_json(&doc, root, 0, &budget);
	if (!*ret)
		r = ndc_errf(
		    -EINVAL, err, errlen,
		    "kubeconfig %s: unsupported YAML (non-scalar key, too deep or too large)",
		    path);
out_doc:
	yaml_document_delete(&doc);
out_parser:
	yaml_parser_delete(&parser);
	fclose(f);
	return r;
}

/* A missing key, a YAML null ("~", "null", empty) and "" all mean "not set". */
static const char *get_str(json_object *o, const char *key)
{
	json_object *v;
	const char *s;

	if (!o || !json_object_object_get_ex(o, key, &v) ||
	    !json_object_is_type(v, json_type_string))
		return NULL;
	s = json_object_get_string(v);
	if (!*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") ||
	    !strcmp(s, "NULL"))
		return NULL;
	return s;
}

/* YAML 1.1 booleans, which is what the Go YAML decoder used by kubectl accepts. */
static int get_bool(json_object *o, const char *key, bool *ret)
{
	static const char *const yes[] = {"true", "yes", "on", "y"};
	static const char *const no[] = {"false", "no", "off", "n"};
	const char *s = get_str(o, key);

	*ret = false;
	if (!s)
		return 0;
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (!strcasecmp(s, yes[i])) {
			*ret = true;
			return 0;
		}
		if (!strcasecmp(s, no[i]))
			return 0;
	}
	return -EINVAL;
}

/* clusters/contexts/users are lists of {name: N, <what>: {...}}. */
static json_object *find_named(json_object *root, const char *list, const char *name,
			       const char *what)
{
	json_object *arr, *v;

	if (!json_object_object_get_ex(root, list, &arr) ||
	    !json_object_is_type(arr, json_type_array))
		return NULL;
	for (size_t i = 0; i < json_object_array_length(arr); i++) {
		json_object *e = json_object_array_get_idx(arr, i);
		const char *n = get_str(e, "name");

		if (!n || strcmp(n, name))
			continue;
		/* "user: {}" is a valid user without credentials; a missing body is the same. */
		if (!json_object_object_get_ex(e, what, &v) ||
		    !json_object_is_type(v, json_type_object))
			return e;
		return v;
	}
	return NULL;
}

static int b64_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

/* RFC 4648 section 4 with padding; whitespace (line breaks in block scalars) is skipped. */
static int b64_decode(const char *in, char **ret)
{
	size_t len = strlen(in), n = 0, pad = 0, out = 0;
	uint32_t acc = 0;
	char *p;

	*ret = NULL;
	p = malloc(len / 4 * 3 + 4);
	if (!p)
		return -ENOMEM;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)in[i];
		int v;

		if (c == ' ' || c == '\t' || c == '\r' || c == '\n')
			continue;
		if (c == '=') {
			pad++;
			continue;
		}
		v = b64_value(c);
		if (v < 0 || pad)
			goto bad;
		acc = acc << 6 | (uint32_t)v;
		if (++n % 4 == 0) {
			p[out++] = (char)(acc >> 16);
			p[out++] = (char)(acc >> 8);
			p[out++] = (char)acc;
			acc = 0;
		}
	}
	switch (n % 4) {
	case 0:
		if (pad)
			goto bad;
		break;
	case 2:
		if (pad != 0 && pad != 2)
			goto bad;
		p[out++] = (char)(acc >> 4);
		break;
	case 3:
		if (pad > 1)
			goto bad;
		p[out++] = (char)(acc >> 10);
		p[out++] = (char)(acc >> 2);
		break;
	default:
		goto bad;
	}
	if (out == 0)
		goto bad;
	p[out] = '\0';
	*ret = p;
	return 0;
bad:
	free(p);
	return -EINVAL;
}

static char *__attribute__((format(printf, 1, 2))) xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *p;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&p, fmt, ap);
	va_end(ap);
	/* The pointer is undefined when vasprintf fails. */
	return n < 0 ? NULL : p;
}

struct kcfg {
	const char *path; /* the kubeconfig, for messages */
	char *dir;	  /* its directory, for relative paths */
	char *err;
	size_t errlen;
};

/* client-go resolves relative paths against the kubeconfig's directory, not the cwd. */
static int file_field(struct kcfg *k, json_object *o, const char *key, const char *owner,
		      char **ret)
{
	const char *s = get_str(o, key);
	char *p;

	*ret = NULL;
	if (!s)
		return 0;
	p = s[0] == '/' ? strdup(s) : xasprintf("%s/%s", k->dir, s);
	if (!p)
		return ndc_errf(-ENOMEM, k->err, k->errlen, "out of memory");
	if (access(p, R_OK) < 0) {
		int r = -errno;

		ndc_errf(r, k->err, k->errlen, "kubeconfig %s: %s: %s %s: %s", k->path, owner, key,
			 p, strerror(errno));
		free(p);
		return r;
	}
	*ret = p;
	return 0;
}

static int data_field(struct kcfg *k, json_object *o, const char *key, const char *owner,
		      char **ret)
{
	const char *s = get_str(o, key);
	int r;

	*ret = NULL;
	if (!s)
		return 0;
	r = b64_decode(s, ret);
	if (r == -ENOMEM)
		return ndc_errf(r, k->err, k->errlen, "out of memory");
	if (r < 0)
		return ndc_errf(r, k->err, k->errlen, "kubeconfig %s: %s: %s is not valid base64",
				k->path, owner, key);
	return 0;
}

static int str_field(struct kcfg *k, json_object *o, const char *key, char **ret)
{
	const char *s = get_str(o, key);

	*ret = NULL;
	if (!s)
		return 0;
	*ret = strdup(s);
	return *ret ? 0 : ndc_errf(-ENOMEM, k->err, k->errlen, "out of memory");
}

static int load_cluster(struct kcfg *k, json_object *root, const char *name, struct ndc_k8s_conn *c)
{
	char owner[300];
	json_object *cl;
	const char *server;
	size_t len;
	int r;

	snprintf(owner, sizeof(owner), "cluster '%s'", name);
	cl = find_named(root, "clusters", name, "cluster");
	if (!cl)
		return ndc_errf(-EINVAL, k->err, k->errlen, "kubeconfig %s: cluster '%s' not found",
				k->path, name);
	server = get_str(cl, "server");
	if (!server)
		return ndc_errf(-EINVAL, k->err, k->errlen, "kubeconfig %s: %s has no server",
				k->path, owner);
	if (strncmp(server, "https://", 8) && strncmp(server, "http://", 7))
		return ndc_errf(-EINVAL, k->err, k->errlen,
				"kubeconfig %s: %s: server '%s' is not an http(s) URL", k->path,
				owner, server);
	/* Request paths are appended to it ("/api/v1/..."). */
	len = strlen(server);
	while (len > 8 && server[len - 1] == '/')
		len--;
	c->server = strndup(server, len);
	if (!c->server)
		return ndc_errf(-ENOMEM, k->err, k->errlen, "out of memory");
	if (get_bool(cl, "insecure-skip-tls-verify", &c->insecure) < 0)
		return ndc_errf(-EINVAL, k->err, k->errlen,
				"kubeconfig %s: %s: insecure-skip-tls-verify is not a boolean",
				k->path, owner);
	r = data_field(k, cl, "certificate-authority-data", owner, &c->ca_data);
	if (r < 0)
		return r;
	return file_field(k, cl, "certificate-authority", owner, &c->ca_file);
}

static int load_user(struct kcfg *k, json_object *root, const char *name, struct ndc_k8s_conn *c)
{
	char owner[300];
	json_object *u, *v;
	int r;

	snprintf(owner, sizeof(owner), "user '%s'", name);
	u = find_named(root, "users", name, "user");
	if (!u)
		return ndc_errf(-EINVAL, k->err, k->errlen, "kubeconfig %s: user '%s' not found",
				k->path, name);
	/* Silently connecting anonymously instead would only fail later with a vaguer 401. */
	if (json_object_object_get_ex(u, "exec", &v) ||
	    json_object_object_get_ex(u, "auth-provider", &v))
		return ndc_errf(-EOPNOTSUPP, k->err, k->errlen,
				"kubeconfig %s: %s: exec and auth-provider credentials are not "
				"supported (use a token, tokenFile or client certificate)",
				k->path, owner);
	r = str_field(k, u, "token", &c->token);
	if (r == 0)
		r = file_field(k, u, "tokenFile", owner, &c->token_file);
	if (r == 0)
		r = file_field(k, u, "client-certificate", owner, &c->cert_file);
	if (r == 0)
		r = file_field(k, u, "client-key", owner, &c->key_file);
	if (r == 0)
		r = data_field(k, u, "client-certificate-data", owner, &c->cert_data);
	if (r == 0)
		r = data_field(k, u, "client-key-data", owner, &c->key_data);
	if (r < 0)
		return r;
	if (!!(c->cert_file || c->cert_data) != !!(c->key_file || c->key_data))
		return ndc_errf(
		    -EINVAL, k->err, k->errlen,
		    "kubeconfig %s: %s: client certificate and key must be given together", k->path,
		    owner);
	return 0;
}

int ndc_kubeconfig_load(const char *path, struct ndc_k8s_conn *ret, char *err, size_t errlen)
{
	struct kcfg k = {.path = path, .err = err, .errlen = errlen};
	const char *cur, *cluster, *user, *slash;
	json_object *root = NULL, *ctx;
	int r;

	memset(ret, 0, sizeof(*ret));
	if (err && errlen)
		err[0] = '\0';
	r = load_yaml(path, &root, err, errlen);
	if (r < 0)
		return r;
	slash = strrchr(path, '/');
	k.dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
	if (!k.dir) {
		r = ndc_errf(-ENOMEM, err, errlen, "out of memory");
		goto out;
	}
	cur = get_str(root, "current-context");
	if (!cur) {
		r = ndc_errf(-EINVAL, err, errlen, "kubeconfig %s: no current-context", path);
		goto out;
	}
	ctx = find_named(root, "contexts", cur, "context");
	if (!ctx) {
		r = ndc_errf(-EINVAL, err, errlen, "kubeconfig %s: current-context '%s' not found",
			     path, cur);
		goto out;
	}
	cluster = get_str(ctx, "cluster");
	if (!cluster) {
		r = ndc_errf(-EINVAL, err, errlen, "kubeconfig %s: context '%s' has no cluster",
			     path, cur);
		goto out;
	}
	r = load_cluster(&k, root, cluster, ret);
	if (r < 0)
		goto out;
	user = get_str(ctx, "user");
	if (user)
		r = load_user(&k, root, user, ret);
out:
	if (r < 0)
		ndc_k8s_conn_free(ret);
	free(k.dir);
	json_object_put(root);
	return r;
}

int ndc_k8s_incluster(const char *sa_dir, struct ndc_k8s_conn *ret, char *err, size_t errlen)
{
	const char *host = getenv("KUBERNETES_SERVICE_HOST");
	const char *port = getenv("KUBERNETES_SERVICE_PORT");
	bool v6;
	int r;

	memset(ret, 0, sizeof(*ret));
	if (err && errlen)
		err[0] = '\0';
	if (!host || !*host || !port || !*port)
		return ndc_errf(-ENOENT, err, errlen,
				"not running in a cluster: KUBERNETES_SERVICE_HOST and "
				"KUBERNETES_SERVICE_PORT are not set");
	if (!sa_dir)
		sa_dir = NDC_SA_DIR;
	/* An IPv6 service host must be bracketed in the URL authority (RFC 3986 section 3.2.2). */
	v6 = strchr(host, ':') && host[0] != '[';
	ret->server = xasprintf(v6 ? "https://[%s]:%s" : "https://%s:%s", host, port);
	ret->token_file = xasprintf("%s/token", sa_dir);
	ret->ca_file = xasprintf("%s/ca.crt", sa_dir);
	if (!ret->server || !ret->token_file || !ret->ca_file) {
		r = ndc_errf(-ENOMEM, err, errlen, "out of memory");
		goto fail;
	}
	for (const char *f = ret->token_file; f; f = f == ret->token_file ? ret->ca_file : NULL) {
		if (access(f, R_OK) < 0) {
			r = ndc_errf(-errno, err, errlen, "in-cluster config: %s: %s", f,
				     strerror(errno));
			goto fail;
		}
	}
	return 0;
fail:
	ndc_k8s_conn_free(ret);
	return r;
}

int ndc_k8s_token_read(const char *path, char **ret)
{
	char *p = malloc(NDC_K8S_MAX_TOKEN + 1);
	size_t n;
	FILE *f;

	*ret = NULL;
	if (!p)
		return -ENOMEM;
	f = fopen(path, "re");
	if (!f) {
		int r = -errno;

		free(p);
		return r;
	}
	n = fread(p, 1, NDC_K8S_MAX_TOKEN, f);
	fclose(f);
	/* Token files end with a newline when written by hand; the projected token does not. */
	while (n > 0 && strchr(" \t\r\n", p[n - 1]))
		n--;
	if (n == 0 || n == NDC_K8S_MAX_TOKEN) {
		free(p);
		return -EINVAL;
	}
	p[n] = '\0';
	*ret = p;
	return 0;
}

static int dup_str(const char *s, char **ret)
{
	*ret = NULL;
	if (!s)
		return 0;
	*ret = strdup(s);
	return *ret ? 0 : -ENOMEM;
}

int ndc_k8s_conn_copy(const struct ndc_k8s_conn *c, struct ndc_k8s_conn *ret)
{
	int r = 0;

	memset(ret, 0, sizeof(*ret));
	ret->insecure = c->insecure;
	r |= dup_str(c->server, &ret->server);
	r |= dup_str(c->ca_file, &ret->ca_file);
	r |= dup_str(c->ca_data, &ret->ca_data);
	r |= dup_str(c->token, &ret->token);
	r |= dup_str(c->token_file, &ret->token_file);
	r |= dup_str(c->cert_file, &ret->cert_file);
	r |= dup_str(c->key_file, &ret->key_file);
	r |= dup_str(c->cert_data, &ret->cert_data);
	r |= dup_str(c->key_data, &ret->key_data);
	if (r) {
		ndc_k8s_conn_free(ret);
		return -ENOMEM;
	}
	return 0;
}

void ndc_k8s_conn_free(struct ndc_k8s_conn *c)
{
	if (!c)
		return;
	free(c->server);
	free(c->ca_file);
	free(c->ca_data);
	free(c->token);
	free(c->token_file);
	free(c->cert_file);
	free(c->key_file);
	free(c->cert_data);
	free(c->key_data);
	memset(c, 0, sizeof(*c));
}
