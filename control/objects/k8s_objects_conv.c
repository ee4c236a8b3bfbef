// SPDX-License-Identifier: MIT
/*
 * The reading half of k8s_objects.c: JSON field access with type checks and error messages that
 * name the object and the field, and the conversion of each kind (Service, EndpointSlice, Pod)
 * into the structs of objects/objects.h as separate allocations, easy to unwind on a bad field.
 * Kept apart from the packing and placing in k8s_objects.c, which reads JSON only through the
 * functions here, so that each file holds one concern and stays well under a thousand lines.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <json-c/json.h>

#include <ndc/ip.h>

#include "internal.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static void vreport(const struct conv *c, const char *fmt, va_list ap)
{
	char what[512];
	int n;

	if (!c->err || !c->errlen)
		return;
	if (c->kind && c->ns && c->name)
		snprintf(what, sizeof(what), "%s %s/%s", c->kind, c->ns, c->name);
	else if (c->kind && c->name)
		snprintf(what, sizeof(what), "%s %s", c->kind, c->name);
	else
		snprintf(what, sizeof(what), "%s", c->kind ? c->kind : "");

	if (c->where && what[0])
		n = snprintf(c->err, c->errlen, "%s (%s): ", c->where, what);
	else if (c->where || what[0])
		n = snprintf(c->err, c->errlen, "%s: ", c->where ? c->where : what);
	else
		n = 0;
	if (n >= 0 && (size_t)n < c->errlen)
		vsnprintf(c->err + n, c->errlen - n, fmt, ap);
}

static int __attribute__((format(printf, 2, 3))) fail(const struct conv *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreport(c, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

int ndc_k8s_conv_oom(const struct conv *c)
{
	fail(c, "out of memory");
	return -ENOMEM;
}

static const char *type_name(json_type t)
{
	switch (t) {
	case json_type_null:
		return "null";
	case json_type_boolean:
		return "boolean";
	case json_type_double:
		return "number";
	case json_type_int:
		return "integer";
	case json_type_object:
		return "object";
	case json_type_array:
		return "array";
	case json_type_string:
		return "string";
	}
	return "?";
}

/* json-c represents a JSON null as a NULL member: absent and null read the same here. */
static json_object *member(json_object *obj, const char *key)
{
	json_object *v = NULL;

	if (!obj || !json_object_is_type(obj, json_type_object))
		return NULL;
	json_object_object_get_ex(obj, key, &v);
	return v;
}

/* The member pfx+key of parent if it has type want; absent or null is an error only if required. */
static int get(const struct conv *c, json_object *parent, const char *pfx, const char *key,
	       json_type want, bool required, json_object **ret)
{
	json_object *v = member(parent, key);

	*ret = NULL;
	if (!v)
		return required ? fail(c, "%s%s: missing", pfx, key) : 0;
	if (!json_object_is_type(v, want))
		return fail(c, "%s%s: expected %s, got %s", pfx, key, type_name(want),
			    type_name(json_object_get_type(v)));
	*ret = v;
	return 0;
}

/* A string without NUL bytes, or NULL for "" (an error if required). */
static int check_str(const struct conv *c, json_object *v, const char *pfx, const char *key,
		     bool required, const char **ret)
{
	const char *s = json_object_get_string(v);

	*ret = NULL;
	if (strlen(s) != (size_t)json_object_get_string_len(v))
		return fail(c, "%s%s: contains a NUL byte", pfx, key);
	if (!*s)
		return required ? fail(c, "%s%s: empty", pfx, key) : 0;
	*ret = s;
	return 0;
}

static int get_str(const struct conv *c, json_object *parent, const char *pfx, const char *key,
		   bool required, const char **ret)
{
	json_object *v;
	int r;

	*ret = NULL;
	r = get(c, parent, pfx, key, json_type_string, required, &v);
	if (r < 0 || !v)
		return r;
	return check_str(c, v, pfx, key, required, ret);
}

/*
 * The string member pfx+key as an index into names[n]: absent or "" gives dflt, or an error when
 * dflt is negative (the member is required); any other word "expected A, B or C".
 */
static int get_choice(const struct conv *c, json_object *parent, const char *pfx, const char *key,
		      const char *const *names, size_t n, int dflt, int *ret)
{
	char list[128] = "";
	const char *v;
	size_t len = 0;
	int r;

	*ret = dflt;
	r = get_str(c, parent, pfx, key, dflt < 0, &v);
	if (r < 0 || !v)
		return r;
	for (size_t i = 0; i < n; i++) {
		if (!strcmp(v, names[i])) {
			*ret = (int)i;
			return 0;
		}
	}
	for (size_t i = 0; i < n && len < sizeof(list); i++) {
		const char *sep = i + 1 < n ? ", " : " or ";

		len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s", i ? sep : "",
					names[i]);
	}
	return fail(c, "%s%s: expected %s", pfx, key, list);
}

/* An array element that must have type want; the path is pfx[i]. */
static int elem(const struct conv *c, json_object *arr, size_t i, const char *pfx, json_type want,
		json_object **ret)
{
	json_object *v = json_object_array_get_idx(arr, i);

	*ret = NULL;
	if (!json_object_is_type(v, want))
		return fail(c, "%s[%zu]: expected %s, got %s", pfx, i, type_name(want),
			    type_name(json_object_get_type(v)));
	*ret = v;
	return 0;
}

/* metadata.name as far as it is usable, only to name the object in messages. */
static const char *peek_meta(json_object *obj, const char *key)
{
	json_object *v = member(member(obj, "metadata"), key);
	const char *s;

	if (!json_object_is_type(v, json_type_string))
		return NULL;
	s = json_object_get_string(v);
	return *s && strlen(s) == (size_t)json_object_get_string_len(v) ? s : NULL;
}

int ndc_k8s_conv_get_meta(struct conv *c, json_object *obj, bool namespaced, const char **ret_ns,
			  const char **ret_name)
{
	json_object *md;
	int r;

	c->name = peek_meta(obj, "name");
	c->ns = namespaced ? peek_meta(obj, "namespace") : NULL;
	r = get(c, obj, "", "metadata", json_type_object, true, &md);
	if (r < 0)
		return r;
	r = get_str(c, md, "metadata.", "name", true, ret_name);
	if (r < 0 || !namespaced)
		return r;
	return get_str(c, md, "metadata.", "namespace", true, ret_ns);
}

int ndc_k8s_conv_dup_str(const struct conv *c, const char *s, char **ret)
{
	*ret = NULL;
	if (!s)
		return 0;
	*ret = strdup(s);
	return *ret ? 0 : ndc_k8s_conv_oom(c);
}

void ndc_k8s_conv_free_ports(struct ndc_k8s_port *p, uint32_t n)
{
	for (size_t i = 0; i < n; i++)
		free(p[i].name);
	free(p);
}

/*
 * A ServicePort or EndpointPort. An EndpointSlice port without a number means "all ports" and
 * has no DNS meaning: *skip is set then (port_optional only).
 */
static int parse_port(const struct conv *c, json_object *p, const char *pfx, bool port_optional,
		      struct ndc_k8s_port *ret, bool *skip)
{
	static const char *const protos[] = {"TCP", "UDP", "SCTP"};
	static const uint8_t proto_nums[] = {IPPROTO_TCP, IPPROTO_UDP, IPPROTO_SCTP};
	json_object *num = member(p, "port");
	const char *name;
	int64_t v;
	int r, t;

	*skip = false;
	if (!num && port_optional) {
		*skip = true;
		return 0;
	}
	v = json_object_is_type(num, json_type_int) ? json_object_get_int64(num) : 0;
	if (v < 1 || v > 65535)
		return fail(c, "%sport: expected integer 1..65535", pfx);

	r = get_choice(c, p, pfx, "protocol", protos, N_OF(protos), 0, &t);
	if (r < 0)
		return r;
	ret->proto = proto_nums[t];
	ret->port = (uint16_t)v;

	r = get_str(c, p, pfx, "name", false, &name);
	if (r < 0)
		return r;
	return ndc_k8s_conv_dup_str(c, name, &ret->name);
}

/* The ports array under parent (pfx "spec." or ""), without the ports skipped by parse_port. */
static int parse_ports(const struct conv *c, json_object *parent, const char *pfx,
		       bool port_optional, struct ndc_k8s_port **ret_ports, uint32_t *ret_n)
{
	struct ndc_k8s_port *ports;
	char path[16], ppfx[64];
	json_object *arr, *p;
	uint32_t k = 0;
	size_t n;
	bool skip;
	int r;

	*ret_ports = NULL;
	*ret_n = 0;
	r = get(c, parent, pfx, "ports", json_type_array, false, &arr);
	if (r < 0 || !arr || !(n = json_object_array_length(arr)))
		return r;
	ports = calloc(n, sizeof(*ports));
	if (!ports)
		return ndc_k8s_conv_oom(c);
	snprintf(path, sizeof(path), "%sports", pfx);
	for (size_t i = 0; i < n; i++) {
		r = elem(c, arr, i, path, json_type_object, &p);
		if (r < 0)
			goto fail;
		snprintf(ppfx, sizeof(ppfx), "%s[%zu].", path, i);
		r = parse_port(c, p, ppfx, port_optional, &ports[k], &skip);
		if (r < 0) {
			free(ports[k].name);
			goto fail;
		}
		if (!skip)
			k++;
	}
	*ret_ports = ports;
	*ret_n = k;
	return 0;
fail:
	ndc_k8s_conv_free_ports(ports, k);
	return r;
}

/* The object's kind (naming it in c for messages), NONE for kinds DNS does not read. */
int ndc_k8s_conv_type(struct conv *c, json_object *obj, enum ndc_k8s_obj_type *ret)
{
	static const char *const names[] = {
	    [NDC_K8S_OBJ_NAMESPACE] = "Namespace",     [NDC_K8S_OBJ_SERVICE] = "Service",
	    [NDC_K8S_OBJ_SLICE] = "EndpointSlice",     [NDC_K8S_OBJ_POD] = "Pod",
	    [NDC_K8S_OBJ_SVCIMPORT] = "ServiceImport",
	};
	const char *kind;
	int r;

	*ret = NDC_K8S_OBJ_NONE;
	if (!json_object_is_type(obj, json_type_object))
		return fail(c, "expected object, got %s", type_name(json_object_get_type(obj)));
	r = get_str(c, obj, "", "kind", true, &kind);
	if (r < 0)
		return r;
	for (int t = NDC_K8S_OBJ_NAMESPACE; t <= NDC_K8S_OBJ_SVCIMPORT; t++) {
		if (!strcmp(kind, names[t])) {
			c->kind = names[t];
			*ret = (enum ndc_k8s_obj_type)t;
			break;
		}
	}
	return 0;
}

static int add_cluster_ip(const struct conv *c, struct ndc_k8s_service *s, const char *ip,
			  const char *path)
{
	if (s->n_ips == NDC_K8S_MAX_CLUSTER_IPS)
		return fail(c, "%s: more than %d addresses", path, NDC_K8S_MAX_CLUSTER_IPS);
	if (ndc_ip_parse(ip, 0, &s->ips[s->n_ips]) < 0)
		return fail(c, "%s: invalid IP address \"%.64s\"", path, ip);
	s->n_ips++;
	return 0;
}

/*
 * How a Service and a ServiceImport begin: metadata (namespace and name, both required), spec (an
 * object or absent) and spec.type, one of types[n] (the first when absent), as its index.
 */
static int conv_svc_head(struct conv *c, json_object *obj, const char *const *types, size_t n,
			 const char **ret_ns, const char **ret_name, json_object **ret_spec,
			 int *ret_type)
{
	int r;

	r = ndc_k8s_conv_get_meta(c, obj, true, ret_ns, ret_name);
	if (r < 0)
		return r;
	r = get(c, obj, "", "spec", json_type_object, false, ret_spec);
	if (r < 0)
		return r;
	return get_choice(c, *ret_spec, "spec.", "type", types, n, 0, ret_type);
}

/*
 * The address list spec.<key> into s->ips: a Service's clusterIPs, where "None" makes it headless
 * (none_headless), or a ServiceImport's ips, where "None" is no address like any other word.
 */
static int conv_svc_ips(const struct conv *c, json_object *spec, const char *key,
			bool none_headless, struct ndc_k8s_service *s)
{
	char arr[24], path[48];
	json_object *ips, *v;
	const char *str;
	int r;

	r = get(c, spec, "spec.", key, json_type_array, false, &ips);
	if (r < 0)
		return r;
	snprintf(arr, sizeof(arr), "spec.%s", key);
	for (size_t i = 0; ips && i < json_object_array_length(ips); i++) {
		snprintf(path, sizeof(path), "%s[%zu]", arr, i);
		r = elem(c, ips, i, arr, json_type_string, &v);
		if (r < 0)
			return r;
		r = check_str(c, v, path, "", false, &str);
		if (r < 0)
			return r;
		if (str && none_headless && !strcmp(str, "None"))
			s->headless = true;
		else if (str && (r = add_cluster_ip(c, s, str, path)) < 0)
			return r;
	}
	return 0;
}

/* How every object ends: heap copies of its namespace (NULL for none) and name. */
static int dup_names(const struct conv *c, const char *ns, const char *name, char **ret_ns,
		     char **ret_name)
{
	int r = ndc_k8s_conv_dup_str(c, ns, ret_ns);

	return r < 0 ? r : ndc_k8s_conv_dup_str(c, name, ret_name);
}

/* How a Service and a ServiceImport end: spec.ports, then the names. */
static int conv_svc_tail(const struct conv *c, json_object *spec, const char *ns, const char *name,
			 struct ndc_k8s_service *s)
{
	int r = parse_ports(c, spec, "spec.", false, &s->ports, &s->n_ports);

	return r < 0 ? r : dup_names(c, ns, name, &s->ns, &s->name);
}

int ndc_k8s_conv_service(struct conv *c, json_object *obj, void *e)
{
	static const char *const types[] = {
	    [NDC_SVC_CLUSTER_IP] = "ClusterIP",
	    [NDC_SVC_NODE_PORT] = "NodePort",
	    [NDC_SVC_LOAD_BALANCER] = "LoadBalancer",
	    [NDC_SVC_EXTERNAL_NAME] = "ExternalName",
	};
	struct ndc_k8s_service *s = e;
	const char *ns, *name, *cip, *ext;
	struct ndc_ip ip = {0};
	json_object *spec, *v;
	int r, type;

	r = conv_svc_head(c, obj, types, N_OF(types), &ns, &name, &spec, &type);
	if (r < 0)
		return r;
	s->type = (enum ndc_svc_type)type;

	/* The API keeps clusterIP == clusterIPs[0]; either saying "None" makes it headless. */
	r = get_str(c, spec, "spec.", "clusterIP", false, &cip);
	if (r < 0)
		return r;
	if (cip && !strcmp(cip, "None"))
		s->headless = true;
	else if (cip && ndc_ip_parse(cip, 0, &ip) < 0)
		return fail(c, "spec.clusterIP: invalid IP address \"%.64s\"", cip);

	r = conv_svc_ips(c, spec, "clusterIPs", true, s);
	if (r < 0)
		return r;
	if (s->headless && s->n_ips)
		return fail(c, "spec.clusterIPs: addresses on a headless service (clusterIP None)");
	if (!s->n_ips && !s->headless && cip) {
		s->ips[0] = ip;
		s->n_ips = 1;
	}

	r = get(c, spec, "spec.", "publishNotReadyAddresses", json_type_boolean, false, &v);
	if (r < 0)
		return r;
	s->publish_not_ready = v && json_object_get_boolean(v);

	r = get_str(c, spec, "spec.", "externalName", false, &ext);
	if (r < 0)
		return r;
	if (s->type == NDC_SVC_EXTERNAL_NAME) {
		if (!ext)
			return fail(c, "spec.externalName: missing (type ExternalName)");
		r = ndc_k8s_conv_dup_str(c, ext, &s->external_name);
		if (r < 0)
			return r;
	}
	return conv_svc_tail(c, spec, ns, name, s);
}

static int conv_endpoint(const struct conv *c, json_object *ep, const char *pfx, int family,
			 struct ndc_k8s_endpoint *e)
{
	json_object *addrs, *ref, *cond, *v;
	const char *hostname, *kind, *pod, *str;
	char path[64];
	size_t n;
	int r;

	r = get(c, ep, pfx, "addresses", json_type_array, true, &addrs);
	if (r < 0)
		return r;
	n = json_object_array_length(addrs);
	/* FQDN slices carry names, not addresses: checked, not kept (DNS ignores them). */
	if (family && n) {
		e->addrs = calloc(n, sizeof(*e->addrs));
		if (!e->addrs)
			return ndc_k8s_conv_oom(c);
	}
	snprintf(path, sizeof(path), "%saddresses", pfx);
	for (size_t i = 0; i < n; i++) {
		r = elem(c, addrs, i, path, json_type_string, &v);
		if (r < 0)
			return r;
		str = json_object_get_string(v);
		if (!family)
			continue;
		if (strlen(str) != (size_t)json_object_get_string_len(v) ||
		    ndc_ip_parse(str, family, &e->addrs[e->n_addrs]) < 0)
			return fail(c, "%s[%zu]: expected an %s address, got \"%.64s\"", path, i,
				    family == AF_INET ? "IPv4" : "IPv6", str);
		e->n_addrs++;
	}

	r = get_str(c, ep, pfx, "hostname", false, &hostname);
	if (r < 0)
		return r;
	r = ndc_k8s_conv_dup_str(c, hostname, &e->hostname);
	if (r < 0)
		return r;

	snprintf(path, sizeof(path), "%stargetRef.", pfx);
	r = get(c, ep, pfx, "targetRef", json_type_object, false, &ref);
	if (r < 0)
		return r;
	r = get_str(c, ref, path, "kind", false, &kind);
	if (r < 0)
		return r;
	r = get_str(c, ref, path, "name", false, &pod);
	if (r < 0)
		return r;
	if (kind && !strcmp(kind, "Pod")) {
		r = ndc_k8s_conv_dup_str(c, pod, &e->pod_name);
		if (r < 0)
			return r;
	}

	/* discovery.k8s.io/v1 EndpointConditions.ready: "nil should be interpreted as ready". */
	snprintf(path, sizeof(path), "%sconditions.", pfx);
	r = get(c, ep, pfx, "conditions", json_type_object, false, &cond);
	if (r < 0)
		return r;
	r = get(c, cond, path, "ready", json_type_boolean, false, &v);
	if (r < 0)
		return r;
	e->ready = !v || json_object_get_boolean(v);
	return 0;
}

int ndc_k8s_conv_slice(struct conv *c, json_object *obj, void *e)
{
	static const char *const types[] = {"IPv4", "IPv6", "FQDN"};
	static const int families[] = {AF_INET, AF_INET6, 0}; /* FQDN: ignored by DNS */
	struct ndc_k8s_slice *s = e;
	const char *ns, *name, *svc, *mc_svc, *cluster;
	json_object *labels, *eps, *ep;
	char pfx[40];
	size_t n;
	int r, t;

	r = ndc_k8s_conv_get_meta(c, obj, true, &ns, &name);
	if (r < 0)
		return r;

	r = get_choice(c, obj, "", "addressType", types, N_OF(types), -1, &t);
	if (r < 0)
		return r;
	s->family = families[t];

	r = get(c, member(obj, "metadata"), "metadata.", "labels", json_type_object, false,
		&labels);
	if (r < 0)
		return r;
	r = get_str(c, labels, "metadata.labels.", "kubernetes.io/service-name", false, &svc);
	if (r < 0)
		return r;
	r = get_str(c, labels, "metadata.labels.", "multicluster.kubernetes.io/service-name", false,
		    &mc_svc);
	if (r < 0)
		return r;
	r = get_str(c, labels, "metadata.labels.", "multicluster.kubernetes.io/source-cluster",
		    false, &cluster);
	if (r < 0)
		return r;

	r = parse_ports(c, obj, "", true, &s->ports, &s->n_ports);
	if (r < 0)
		return r;

	/* A slice of a service without endpoints says "endpoints": null. */
	r = get(c, obj, "", "endpoints", json_type_array, false, &eps);
	if (r < 0)
		return r;
	n = eps ? json_object_array_length(eps) : 0;
	if (n) {
		s->endpoints = calloc(n, sizeof(*s->endpoints));
		if (!s->endpoints)
			return ndc_k8s_conv_oom(c);
	}
	for (size_t i = 0; i < n; i++) {
		r = elem(c, eps, i, "endpoints", json_type_object, &ep);
		if (r < 0)
			return r;
		snprintf(pfx, sizeof(pfx), "endpoints[%zu].", i);
		/* Counted first so that free_slice also frees a half-converted endpoint. */
		s->n_endpoints++;
		r = conv_endpoint(c, ep, pfx, s->family, &s->endpoints[i]);
		if (r < 0)
			return r;
	}

	r = ndc_k8s_conv_dup_str(c, svc, &s->service);
	r = r < 0 ? r : ndc_k8s_conv_dup_str(c, mc_svc, &s->mc_service);
	r = r < 0 ? r : ndc_k8s_conv_dup_str(c, cluster, &s->cluster);
	return r < 0 ? r : dup_names(c, ns, name, &s->ns, &s->name);
}

static int add_pod_ip(const struct conv *c, struct ndc_k8s_pod *p, const char *ip, const char *path)
{
	if (p->n_ips == 2)
		return fail(c, "%s: more than 2 addresses", path);
	if (ndc_ip_parse(ip, 0, &p->ips[p->n_ips]) < 0)
		return fail(c, "%s: invalid IP address \"%.64s\"", path, ip);
	p->n_ips++;
	return 0;
}

int ndc_k8s_conv_pod(struct conv *c, json_object *obj, void *e)
{
	struct ndc_k8s_pod *p = e;
	json_object *status, *ips, *v;
	const char *ns, *name, *ip;
	char pfx[40];
	size_t n;
	int r;

	r = ndc_k8s_conv_get_meta(c, obj, true, &ns, &name);
	if (r < 0)
		return r;
	r = get(c, obj, "", "status", json_type_object, false, &status);
	if (r < 0)
		return r;
	r = get(c, status, "status.", "podIPs", json_type_array, false, &ips);
	if (r < 0)
		return r;
	n = ips ? json_object_array_length(ips) : 0;
	for (size_t i = 0; i < n; i++) {
		r = elem(c, ips, i, "status.podIPs", json_type_object, &v);
		if (r < 0)
			return r;
		snprintf(pfx, sizeof(pfx), "status.podIPs[%zu].", i);
		r = get_str(c, v, pfx, "ip", true, &ip);
		if (r < 0)
			return r;
		snprintf(pfx, sizeof(pfx), "status.podIPs[%zu].ip", i);
		r = add_pod_ip(c, p, ip, pfx);
		if (r < 0)
			return r;
	}
	if (!n) {
		/* Pending pods have no address yet: no podIP, or "". */
		r = get_str(c, status, "status.", "podIP", false, &ip);
		if (r < 0)
			return r;
		if (ip && (r = add_pod_ip(c, p, ip, "status.podIP")) < 0)
			return r;
	}
	return dup_names(c, ns, name, &p->ns, &p->name);
}

/*
 * multicluster.x-k8s.io/v1alpha1 ServiceImport: spec.type (ClusterSetIP, the default as CoreDNS
 * reads it, or Headless), spec.ips (the ClusterSetIPs, one per family), spec.ports.
 */
int ndc_k8s_conv_svcimport(struct conv *c, json_object *obj, void *e)
{
	static const char *const types[] = {"ClusterSetIP", "Headless"};
	struct ndc_k8s_service *s = e;
	const char *ns, *name;
	json_object *spec;
	int r, type;

	r = conv_svc_head(c, obj, types, N_OF(types), &ns, &name, &spec, &type);
	if (r < 0)
		return r;
	s->headless = type == 1;
	s->type = NDC_SVC_CLUSTER_IP;

	r = conv_svc_ips(c, spec, "ips", false, s);
	if (r < 0)
		return r;
	/* A headless import's addresses are its endpoints' (MCS DNS spec); ips says nothing. */
	if (s->headless)
		s->n_ips = 0;
	return conv_svc_tail(c, spec, ns, name, s);
}
