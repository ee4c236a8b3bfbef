// SPDX-License-Identifier: MIT
/*
 * The two keys of the kube-dns ConfigMap (kube-system/kube-dns) that NodeLocal DNSCache turns
 * into its Corefile, each a JSON text inside the ConfigMap's data:
 *   stubDomains:         {"acme.local": ["1.2.3.4", "1.2.3.5:5353"]}
 *   upstreamNameservers: ["8.8.8.8", "8.8.4.4"]
 * Checked as the config file's stub_domains and upstream are, with the same helpers, so a value
 * means the same thing in either place. Untrusted input (anyone who may edit the ConfigMap):
 * json-c with a depth limit, sizes bounded, every error one line naming the key and the item.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include <ndc/log.h>

#include "config/config.h"

/* The values are a map of lists of strings: three levels; anything deeper is not ours. */
#define KUBE_DNS_JSON_DEPTH 8
#define KUBE_DNS_MAX_LEN (64 << 10)
#define ECHO_MAX 40

/* At most ECHO_MAX bytes of s, printable ASCII only, for a one-line error. */
static const char *echo(char buf[ECHO_MAX + 4], const char *s)
{
	size_t i;

	for (i = 0; s[i] && i < ECHO_MAX; i++)
		buf[i] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
	strcpy(buf + i, s[i] ? "..." : "");
	return buf;
}

static bool blank(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (!strchr(" \t\r\n", s[i]))
			return false;
	return true;
}

/* The whole text as one JSON value of the given type; NULL with err set. */
static json_object *parse(const char *key, const char *json, size_t len, json_type want, char *err,
			  size_t errlen)
{
	struct json_tokener *tok;
	enum json_tokener_error jerr;
	json_object *o;
	size_t end;

	if (len > KUBE_DNS_MAX_LEN) {
		ndc_errf(-EINVAL, err, errlen, "%s: longer than %d bytes", key, KUBE_DNS_MAX_LEN);
		return NULL;
	}
	tok = json_tokener_new_ex(KUBE_DNS_JSON_DEPTH);
	if (!tok) {
		ndc_errf(-EINVAL, err, errlen, "%s: out of memory", key);
		return NULL;
	}
	o = json_tokener_parse_ex(tok, json, (int)len);
	jerr = json_tokener_get_error(tok);
	end = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);
	if (jerr != json_tokener_success || !o) {
		json_object_put(o);
		ndc_errf(-EINVAL, err, errlen, "%s: not JSON: %s", key,
			 jerr == json_tokener_continue ? "unexpected end of text"
						       : json_tokener_error_desc(jerr));
		return NULL;
	}
	if (!blank(json + end, len - end)) {
		json_object_put(o);
		ndc_errf(-EINVAL, err, errlen, "%s: not JSON: text after the value", key);
		return NULL;
	}
	if (!json_object_is_type(o, want)) {
		json_object_put(o);
		ndc_errf(-EINVAL, err, errlen, "%s: expected a JSON %s", key,
			 want == json_type_object ? "object of zones to lists of addresses"
						  : "list of addresses");
		return NULL;
	}
	return o;
}

/* A JSON list of 1..8 address strings into out. what names it in errors ("stubDomains: x"). */
static int servers(const char *what, json_object *list,
		   struct sockaddr_storage out[NDC_CFG_MAX_ADDRS], size_t *ret_n, char *err,
		   size_t errlen)
{
	size_t n;
	char q[ECHO_MAX + 4];

	if (!json_object_is_type(list, json_type_array))
		return ndc_errf(-EINVAL, err, errlen, "%s: expected a list of addresses", what);
	n = json_object_array_length(list);
	if (n < 1 || n > NDC_CFG_MAX_ADDRS)
		return ndc_errf(-EINVAL, err, errlen, "%s: expected 1..%d addresses, got %zu", what,
				NDC_CFG_MAX_ADDRS, n);
	for (size_t i = 0; i < n; i++) {
		json_object *it = json_object_array_get_idx(list, i);
		const char *s;
		int r;

		if (!json_object_is_type(it, json_type_string))
			return ndc_errf(-EINVAL, err, errlen, "%s[%zu]: expected an address string",
					what, i);
		s = json_object_get_string(it);
		if (strlen(s) != (size_t)json_object_get_string_len(it))
			return ndc_errf(-EINVAL, err, errlen,
					"%s[%zu]: expected an address, got a NUL byte", what, i);
		r = ndc_config_parse_server(s, &out[i]);
		if (r == -ERANGE)
			return ndc_errf(-EINVAL, err, errlen,
					"%s[%zu]: expected a port 1..65535 in '%s'", what, i,
					echo(q, s));
		if (r < 0)
			return ndc_errf(
			    -EINVAL, err, errlen,
			    "%s[%zu]: expected an address (ip, ip:port or [ipv6]:port), "
			    "got '%s'",
			    what, i, echo(q, s));
	}
	*ret_n = n;
	return 0;
}

int ndc_kube_dns_stub_domains(const char *json, size_t len, struct ndc_stub_domain **ret,
			      size_t *ret_n, char *err, size_t errlen)
{
	static const char key[] = "stubDomains";
	struct ndc_stub_domain *v = NULL;
	size_t n = 0, count = 0;
	json_object *o;
	int r = 0;

	*ret = NULL;
	*ret_n = 0;
	if (blank(json, len))
		return 0;
	o = parse(key, json, len, json_type_object, err, errlen);
	if (!o)
		return -EINVAL;
	n = (size_t)json_object_object_length(o);
	if (n > NDC_CFG_MAX_STUBS) {
		json_object_put(o);
		return ndc_errf(-EINVAL, err, errlen, "%s: expected at most %d zones, got %zu", key,
				NDC_CFG_MAX_STUBS, n);
	}
	if (n && !(v = calloc(n, sizeof(*v)))) {
		json_object_put(o);
		return -ENOMEM;
	}
	json_object_object_foreach(o, zone, list)
	{
		struct ndc_stub_domain *sd = &v[count];
		char what[64], q[ECHO_MAX + 4];
		const char *why = "longer than 253 characters";

		if (r < 0)
			break;
		snprintf(what, sizeof(what), "%s: %s", key, echo(q, zone));
		sd->zone = strdup(zone);
		if (!sd->zone) {
			r = -ENOMEM;
			break;
		}
		count++;
		if (strlen(zone) <= 254)
			why = ndc_config_check_domain(sd->zone);
		if (why && !strcmp(why, "empty name"))
			why = "the root is not a stub domain: that is upstreamNameservers";
		if (why) {
			r = ndc_errf(-EINVAL, err, errlen, "%s: not a zone name (%s)", what, why);
			break;
		}
		for (size_t j = 0; j + 1 < count; j++)
			if (!strcmp(v[j].zone, sd->zone))
				r = ndc_errf(-EINVAL, err, errlen, "%s: zone given twice", what);
		if (r == 0)
			r = servers(what, list, sd->servers, &sd->n_servers, err, errlen);
	}
	json_object_put(o);
	if (r < 0) {
		ndc_config_stubs_free(v, n);
		return r;
	}
	*ret = v;
	*ret_n = count;
	return 0;
}

int ndc_kube_dns_upstreams(const char *json, size_t len,
			   struct sockaddr_storage ret[NDC_CFG_MAX_ADDRS], size_t *ret_n, char *err,
			   size_t errlen)
{
	static const char key[] = "upstreamNameservers";
	json_object *o;
	int r;

	*ret_n = 0;
	if (blank(json, len))
		return 0;
	o = parse(key, json, len, json_type_array, err, errlen);
	if (!o)
		return -EINVAL;
	/* An empty list is kube-dns's "not set": the default upstream stays. */
	r = json_object_array_length(o) ? servers(key, o, ret, ret_n, err, errlen) : 0;
	json_object_put(o);
	return r;
}
