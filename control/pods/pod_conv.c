// SPDX-License-Identifier: MIT
/*
 * A Pod's JSON to what pod identity keeps (pods.h). The input is whatever the API server (or
 * something in its place) sends: every field is type-checked, names are held to the API's own
 * validation so that `ndcache top` and /debug/top can print them without escaping, and a
 * rejection names the field.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include <ndc/log.h>

#include "pods.h"

static bool alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* RFC 1123 label as Kubernetes validates it: [a-z0-9]([-a-z0-9]*[a-z0-9])?, 1..63. */
static bool dns_label(const char *s, size_t len)
{
	if (!len || len > 63 || !alnum(s[0]) || !alnum(s[len - 1]))
		return false;
	for (size_t i = 1; i + 1 < len; i++)
		if (!alnum(s[i]) && s[i] != '-')
			return false;
	return true;
}

/* A DNS-1123 subdomain: labels joined by '.', 1..253 bytes. */
static bool dns_subdomain(const char *s, size_t len)
{
	size_t start = 0;

	if (!len || len > NDC_POD_NAME_MAX)
		return false;
	for (size_t i = 0; i <= len; i++) {
		if (i < len && s[i] != '.')
			continue;
		if (!dns_label(s + start, i - start))
			return false;
		start = i + 1;
	}
	return true;
}

int ndc_pods_node_name_check(const char *s, char *err, size_t errlen)
{
	if (!s || !s[0])
		return ndc_errf(-EINVAL, err, errlen,
				"node name is empty (env NODE_NAME from spec.nodeName)");
	if (!dns_subdomain(s, strlen(s)))
		return ndc_errf(
		    -EINVAL, err, errlen,
		    "node name \"%.64s\" is not a DNS-1123 subdomain (lowercase letters, "
		    "digits, '-' and '.', at most 253 bytes)",
		    s);
	return 0;
}

/* obj's member key of type t; absent or null: *ret NULL (an error when required). */
static int member(json_object *obj, const char *path, const char *key, json_type t, bool required,
		  json_object **ret, char *err, size_t errlen)
{
	static const char *const tn[] = {
	    [json_type_null] = "null",	      [json_type_boolean] = "a boolean",
	    [json_type_double] = "a number",  [json_type_int] = "an integer",
	    [json_type_object] = "an object", [json_type_array] = "an array",
	    [json_type_string] = "a string",
	};
	json_object *v = NULL;

	*ret = NULL;
	if (obj && (!json_object_object_get_ex(obj, key, &v) || !v))
		v = NULL;
	if (!v) {
		if (required)
			return ndc_errf(-EINVAL, err, errlen, "%s%s: missing", path, key);
		return 0;
	}
	if (!json_object_is_type(v, t))
		return ndc_errf(-EINVAL, err, errlen, "%s%s: expected %s", path, key, tn[t]);
	*ret = v;
	return 0;
}

/* A string member that must be a name (label: a DNS label, else a subdomain), copied to buf. */
static int name_member(json_object *obj, const char *path, const char *key, bool label,
		       bool required, char *buf, size_t buflen, char *err, size_t errlen)
{
	json_object *v;
	const char *s;
	size_t len;
	int r;

	r = member(obj, path, key, json_type_string, required, &v, err, errlen);
	if (r < 0 || !v)
		return r;
	s = json_object_get_string(v);
	len = (size_t)json_object_get_string_len(v);
	/* The length check also refuses an embedded NUL (strlen would stop short of len). */
	if (len >= buflen || strlen(s) != len ||
	    !(label ? dns_label(s, len) : dns_subdomain(s, len)))
		return ndc_errf(-EINVAL, err, errlen, "%s%s: \"%.64s\" is not a valid %s", path,
				key, s, label ? "DNS label" : "DNS subdomain");
	memcpy(buf, s, len + 1);
	return 0;
}

/* One address into ips/n (at most NDC_POD_MAX_IPS, a repeat ignored); "" is none yet. */
static int add_ip(struct ndc_ip *ips, uint8_t *n, json_object *v, const char *what, char *err,
		  size_t errlen)
{
	const char *s = json_object_get_string(v);

	if (!s[0]) /* a pending pod says "" */
		return 0;
	if (*n == NDC_POD_MAX_IPS)
		return ndc_errf(-EINVAL, err, errlen, "%s: more than %d addresses", what,
				NDC_POD_MAX_IPS);
	if (strlen(s) != (size_t)json_object_get_string_len(v) || ndc_ip_parse(s, 0, &ips[*n]) < 0)
		return ndc_errf(-EINVAL, err, errlen, "%s: invalid IP address \"%.64s\"", what, s);
	for (int i = 0; i < *n; i++)
		if (!memcmp(&ips[i], &ips[*n], sizeof(ips[i])))
			return 0;
	(*n)++;
	return 0;
}

/*
 * status.<plural> ([{"ip": ...}], one per family) or, when absent or empty, status.<single>:
 * the plural forms are newer (podIPs 1.16, hostIPs 1.28) and their first element is the single
 * one, all an older server sends.
 */
static int conv_ips(json_object *status, const char *plural, const char *single, struct ndc_ip *ips,
		    uint8_t *n, char *err, size_t errlen)
{
	json_object *arr, *v, *ip;
	char what[48];
	size_t len;
	int r;

	r = member(status, "status.", plural, json_type_array, false, &arr, err, errlen);
	if (r < 0)
		return r;
	len = arr ? json_object_array_length(arr) : 0;
	for (size_t i = 0; i < len; i++) {
		v = json_object_array_get_idx(arr, i);
		if (!v || !json_object_is_type(v, json_type_object))
			return ndc_errf(-EINVAL, err, errlen, "status.%s[%zu]: expected an object",
					plural, i);
		snprintf(what, sizeof(what), "status.%s[%zu].", plural, i);
		r = member(v, what, "ip", json_type_string, true, &ip, err, errlen);
		if (r < 0)
			return r;
		snprintf(what, sizeof(what), "status.%s[%zu].ip", plural, i);
		r = add_ip(ips, n, ip, what, err, errlen);
		if (r < 0)
			return r;
	}
	if (len)
		return 0;
	r = member(status, "status.", single, json_type_string, false, &ip, err, errlen);
	if (r < 0 || !ip)
		return r;
	snprintf(what, sizeof(what), "status.%s", single);
	return add_ip(ips, n, ip, what, err, errlen);
}

static int conv_status(json_object *obj, struct ndc_pod_info *p, char *err, size_t errlen)
{
	json_object *status, *phase;
	int r;

	r = member(obj, "", "status", json_type_object, false, &status, err, errlen);
	if (r < 0 || !status)
		return r;
	r = member(status, "status.", "phase", json_type_string, false, &phase, err, errlen);
	if (r < 0)
		return r;
	/* Ended pods' sandboxes are gone and their addresses go to the next pod (the API keeps
	 * podIP on them). */
	p->ended = phase && (!strcmp(json_object_get_string(phase), "Succeeded") ||
			     !strcmp(json_object_get_string(phase), "Failed"));
	r = conv_ips(status, "podIPs", "podIP", p->ips, &p->n_ips, err, errlen);
	return r ?: conv_ips(status, "hostIPs", "hostIP", p->host_ips, &p->n_host_ips, err, errlen);
}

int ndc_pod_convert(json_object *obj, struct ndc_pod_info *ret, char *err, size_t errlen)
{
	json_object *md, *spec, *v;
	int r;

	memset(ret, 0, sizeof(*ret));
	if (err && errlen)
		err[0] = '\0';
	if (!obj || !json_object_is_type(obj, json_type_object))
		return ndc_errf(-EINVAL, err, errlen, "a Pod must be an object");
	r = member(obj, "", "metadata", json_type_object, true, &md, err, errlen);
	r = r
		?: name_member(md, "metadata.", "namespace", true, true, ret->ns, sizeof(ret->ns),
			       err, errlen);
	r = r
		?: name_member(md, "metadata.", "name", false, true, ret->name, sizeof(ret->name),
			       err, errlen);
	if (r < 0)
		goto fail;
	/* Any value but null: the API sets an RFC 3339 time, whose form does not matter here. */
	ret->deleting = json_object_object_get_ex(md, "deletionTimestamp", &v) && v;

	r = member(obj, "", "spec", json_type_object, false, &spec, err, errlen);
	r = r
		?: name_member(spec, "spec.", "nodeName", false, false, ret->node,
			       sizeof(ret->node), err, errlen);
	r = r ?: member(spec, "spec.", "hostNetwork", json_type_boolean, false, &v, err, errlen);
	if (r < 0)
		goto fail;
	ret->host_network = v && json_object_get_boolean(v);

	r = conv_status(obj, ret, err, errlen);
	if (r < 0)
		goto fail;
	return 0;
fail:
	/* Names kept: the caller forgets what an earlier version of this pod mapped. */
	memset(ret->node, 0, sizeof(*ret) - offsetof(struct ndc_pod_info, node));
	return r;
}
