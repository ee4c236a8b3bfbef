// SPDX-License-Identifier: MIT
/*
 * Snapshot parser (JSON and YAML) on arbitrary bytes. Beyond memory errors, aborts when a parsed
 * store breaks a promise of objects/objects.h the record builder relies on, or when a failure
 * leaves anything behind or no reason.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "objects/objects.h"

#define CHECK(cond)              \
	do {                     \
		if (!(cond))     \
			abort(); \
	} while (0)

static void check_name(const char *s)
{
	CHECK(s && *s);
}

static void check_opt_name(const char *s)
{
	CHECK(!s || *s);
}

static void check_ip(const struct ndc_ip *ip)
{
	CHECK(ip->family == AF_INET || ip->family == AF_INET6);
}

static void check_ports(const struct ndc_k8s_port *p, size_t n)
{
	CHECK(!n || p);
	for (size_t i = 0; i < n; i++) {
		check_opt_name(p[i].name);
		CHECK(p[i].port >= 1);
		CHECK(p[i].proto == IPPROTO_TCP || p[i].proto == IPPROTO_UDP ||
		      p[i].proto == IPPROTO_SCTP);
	}
}

static void check_service(const struct ndc_k8s_service *s)
{
	check_name(s->ns);
	check_name(s->name);
	CHECK(s->type <= NDC_SVC_EXTERNAL_NAME);
	CHECK((s->type == NDC_SVC_EXTERNAL_NAME) == (s->external_name != NULL));
	check_opt_name(s->external_name);
	CHECK(s->n_ips <= NDC_K8S_MAX_CLUSTER_IPS);
	CHECK(!s->headless || !s->n_ips);
	for (size_t i = 0; i < s->n_ips; i++)
		check_ip(&s->ips[i]);
	check_ports(s->ports, s->n_ports);
}

static void check_slice(const struct ndc_k8s_slice *s)
{
	check_name(s->ns);
	check_name(s->name);
	check_opt_name(s->service);
	check_opt_name(s->mc_service);
	check_opt_name(s->cluster);
	CHECK(s->family == 0 || s->family == AF_INET || s->family == AF_INET6);
	check_ports(s->ports, s->n_ports);
	CHECK(!s->n_endpoints || s->endpoints);
	for (size_t i = 0; i < s->n_endpoints; i++) {
		const struct ndc_k8s_endpoint *e = &s->endpoints[i];

		CHECK(!e->n_addrs || e->addrs);
		CHECK(s->family || !e->n_addrs);
		for (size_t j = 0; j < e->n_addrs; j++)
			CHECK(e->addrs[j].family == s->family);
		check_opt_name(e->hostname);
		check_opt_name(e->pod_name);
	}
}

static void check_objects(const struct ndc_k8s_objects *o)
{
	CHECK(o->n_namespaces <= o->cap_namespaces && o->n_services <= o->cap_services &&
	      o->n_slices <= o->cap_slices && o->n_pods <= o->cap_pods &&
	      o->n_imports <= o->cap_imports);
	for (size_t i = 0; i < o->n_imports; i++) {
		/* ServiceImports: Services of type ClusterIP, never ExternalName */
		check_service(&o->imports[i]);
		CHECK(o->imports[i].type == NDC_SVC_CLUSTER_IP);
	}
	for (size_t i = 0; i < o->n_namespaces; i++)
		check_name(o->namespaces[i]);
	for (size_t i = 0; i < o->n_services; i++)
		check_service(&o->services[i]);
	for (size_t i = 0; i < o->n_slices; i++)
		check_slice(&o->slices[i]);
	for (size_t i = 0; i < o->n_pods; i++) {
		check_name(o->pods[i].ns);
		check_name(o->pods[i].name);
		CHECK(o->pods[i].n_ips <= 2);
		for (size_t j = 0; j < o->pods[i].n_ips; j++)
			check_ip(&o->pods[i].ips[j]);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct ndc_k8s_objects empty;
	struct ndc_k8s_objects o;
	char err[256];
	int r;

	memset(err, 0xff, sizeof(err));
	r = ndc_snapshot_parse((const char *)data, size, &o, err, sizeof(err));
	if (r == 0) {
		check_objects(&o);
	} else {
		CHECK(r == -EINVAL || r == -ENOMEM);
		CHECK(!memcmp(&o, &empty, sizeof(o)));
		CHECK(err[0] && (unsigned char)err[0] != 0xff && memchr(err, '\0', sizeof(err)));
	}
	ndc_k8s_objects_free(&o);
	return 0;
}
