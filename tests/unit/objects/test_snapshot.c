// SPDX-License-Identifier: MIT
/* Object store conversion and snapshot parsing: the sample cluster, each field rule, each error. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <json-c/json.h>

#include "objects/objects.h"

/*
 * deploy/examples/ relative to this file. Meson passes __FILE__ relative to the build directory
 * (the parent of tests/, where this binary lives), or absolute; the current directory is the last
 * resort. So the test finds the files whatever directory it runs from.
 */
static char *example_path(const char *name)
{
	char exe[PATH_MAX], src[PATH_MAX], build[PATH_MAX + 1], *path;
	const char *bases[2], *srcdir;
	size_t n_bases = 0;
	ssize_t n;

	snprintf(src, sizeof(src), "%s", __FILE__);
	srcdir = dirname(src);
	if (srcdir[0] != '/') {
		n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		if (n > 0) {
			exe[n] = '\0';
			snprintf(build, sizeof(build), "%s/", dirname(dirname(exe)));
			bases[n_bases++] = build;
		}
	}
	bases[n_bases++] = "";
	for (size_t i = 0; i < n_bases; i++) {
		if (asprintf(&path, "%s%s/../../../deploy/examples/%s", bases[i], srcdir, name) < 0)
			return NULL;
		if (access(path, R_OK) == 0)
			return path;
		free(path);
	}
	return NULL;
}

static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	assert_true(n > 0);
	rewind(f);
	buf = malloc((size_t)n);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static void load_example(const char *name, struct ndc_k8s_objects *o)
{
	char err[512] = "", *path = example_path(name);

	if (!path)
		fail_msg("deploy/examples/%s not found from %s", name, __FILE__);
	if (ndc_snapshot_load(path, o, err, sizeof(err)) != 0)
		fail_msg("%s: %s", path, err);
	free(path);
}

static void parse_ok(const char *text, struct ndc_k8s_objects *o)
{
	char err[512] = "";

	if (ndc_snapshot_parse(text, strlen(text), o, err, sizeof(err)) != 0)
		fail_msg("unexpected error: %s\ninput:\n%s", err, text);
}

/* Parses text expecting failure with a message containing want; checks o was left empty. */
static void parse_err(const char *text, const char *want)
{
	struct ndc_k8s_objects o;
	char err[512] = "";
	int r;

	r = ndc_snapshot_parse(text, strlen(text), &o, err, sizeof(err));
	if (r != -EINVAL || !strstr(err, want))
		fail_msg("got %d \"%s\", wanted -EINVAL with \"%s\"\ninput:\n%s", r, err, want,
			 text);
	assert_int_equal(o.n_namespaces + o.n_services + o.n_slices + o.n_pods, 0);
	assert_null(o.services);
	assert_null(o.slices);
	assert_null(o.pods);
	assert_null(o.namespaces);
}

static void assert_ip(const struct ndc_ip *ip, const char *text)
{
	uint8_t want[16] = {0};
	int family = strchr(text, ':') ? AF_INET6 : AF_INET;

	assert_int_equal(inet_pton(family, text, want), 1);
	assert_int_equal(ip->family, family);
	assert_memory_equal(ip->addr, want, family == AF_INET ? 4 : 16);
}

static void assert_port(const struct ndc_k8s_port *p, const char *name, uint16_t port, int proto)
{
	if (name)
		assert_string_equal(p->name, name);
	else
		assert_null(p->name);
	assert_int_equal(p->port, port);
	assert_int_equal(p->proto, proto);
}

static const struct ndc_k8s_service *service(const struct ndc_k8s_objects *o, const char *ns,
					     const char *name)
{
	for (size_t i = 0; i < o->n_services; i++)
		if (!strcmp(o->services[i].ns, ns) && !strcmp(o->services[i].name, name))
			return &o->services[i];
	fail_msg("no service %s/%s", ns, name);
	return NULL;
}

/* The n-th slice (0-based) of service ns/svc, in file order. */
static const struct ndc_k8s_slice *slice_of(const struct ndc_k8s_objects *o, const char *ns,
					    const char *svc, int n)
{
	for (size_t i = 0; i < o->n_slices; i++)
		if (o->slices[i].service && !strcmp(o->slices[i].ns, ns) &&
		    !strcmp(o->slices[i].service, svc) && n-- == 0)
			return &o->slices[i];
	fail_msg("no slice for %s/%s", ns, svc);
	return NULL;
}

static const struct ndc_k8s_pod *pod(const struct ndc_k8s_objects *o, const char *ns,
				     const char *name)
{
	for (size_t i = 0; i < o->n_pods; i++)
		if (!strcmp(o->pods[i].ns, ns) && !strcmp(o->pods[i].name, name))
			return &o->pods[i];
	fail_msg("no pod %s/%s", ns, name);
	return NULL;
}

static void assert_str_or_null(const char *a, const char *b)
{
	if (!a || !b)
		assert_ptr_equal(a, b);
	else
		assert_string_equal(a, b);
}

static void assert_ports_equal(const struct ndc_k8s_port *a, size_t na,
			       const struct ndc_k8s_port *b, size_t nb)
{
	assert_int_equal(na, nb);
	for (size_t i = 0; i < na; i++) {
		assert_str_or_null(a[i].name, b[i].name);
		assert_int_equal(a[i].port, b[i].port);
		assert_int_equal(a[i].proto, b[i].proto);
	}
}

static void assert_objects_equal(const struct ndc_k8s_objects *a, const struct ndc_k8s_objects *b)
{
	assert_int_equal(a->n_namespaces, b->n_namespaces);
	for (size_t i = 0; i < a->n_namespaces; i++)
		assert_string_equal(a->namespaces[i], b->namespaces[i]);

	assert_int_equal(a->n_services, b->n_services);
	for (size_t i = 0; i < a->n_services; i++) {
		const struct ndc_k8s_service *x = &a->services[i], *y = &b->services[i];

		assert_string_equal(x->ns, y->ns);
		assert_string_equal(x->name, y->name);
		assert_int_equal(x->type, y->type);
		assert_int_equal(x->headless, y->headless);
		assert_int_equal(x->publish_not_ready, y->publish_not_ready);
		assert_str_or_null(x->external_name, y->external_name);
		assert_int_equal(x->n_ips, y->n_ips);
		assert_memory_equal(x->ips, y->ips, x->n_ips * sizeof(x->ips[0]));
		assert_ports_equal(x->ports, x->n_ports, y->ports, y->n_ports);
	}

	assert_int_equal(a->n_slices, b->n_slices);
	for (size_t i = 0; i < a->n_slices; i++) {
		const struct ndc_k8s_slice *x = &a->slices[i], *y = &b->slices[i];

		assert_string_equal(x->ns, y->ns);
		assert_string_equal(x->name, y->name);
		assert_str_or_null(x->service, y->service);
		assert_int_equal(x->family, y->family);
		assert_ports_equal(x->ports, x->n_ports, y->ports, y->n_ports);
		assert_int_equal(x->n_endpoints, y->n_endpoints);
		for (size_t j = 0; j < x->n_endpoints; j++) {
			const struct ndc_k8s_endpoint *e = &x->endpoints[j], *f = &y->endpoints[j];

			assert_int_equal(e->n_addrs, f->n_addrs);
			assert_memory_equal(e->addrs, f->addrs, e->n_addrs * sizeof(e->addrs[0]));
			assert_str_or_null(e->hostname, f->hostname);
			assert_str_or_null(e->pod_name, f->pod_name);
			assert_int_equal(e->ready, f->ready);
		}
	}

	assert_int_equal(a->n_pods, b->n_pods);
	for (size_t i = 0; i < a->n_pods; i++) {
		assert_string_equal(a->pods[i].ns, b->pods[i].ns);
		assert_string_equal(a->pods[i].name, b->pods[i].name);
		assert_int_equal(a->pods[i].n_ips, b->pods[i].n_ips);
		assert_memory_equal(a->pods[i].ips, b->pods[i].ips,
				    a->pods[i].n_ips * sizeof(a->pods[i].ips[0]));
	}
}

/* What deploy/examples/README.md promises about the sample. */
static void check_sample(const struct ndc_k8s_objects *o)
{
	const struct ndc_k8s_service *s;
	const struct ndc_k8s_slice *sl;
	const struct ndc_k8s_pod *p;

	assert_int_equal(o->n_namespaces, 5);
	assert_string_equal(o->namespaces[0], "default");
	assert_string_equal(o->namespaces[4], "monitoring");
	assert_int_equal(o->n_services, 13);
	assert_int_equal(o->n_slices, 12);
	assert_int_equal(o->n_pods, 14);

	s = service(o, "default", "kubernetes");
	assert_int_equal(s->type, NDC_SVC_CLUSTER_IP);
	assert_int_equal(s->n_ips, 1);
	assert_ip(&s->ips[0], "10.96.0.1");
	assert_int_equal(s->n_ports, 1);
	assert_port(&s->ports[0], "https", 443, IPPROTO_TCP);

	s = service(o, "kube-system", "kube-dns");
	assert_ip(&s->ips[0], "10.96.0.10");
	assert_int_equal(s->n_ports, 3);
	assert_port(&s->ports[0], "dns", 53, IPPROTO_UDP);
	assert_port(&s->ports[1], "dns-tcp", 53, IPPROTO_TCP);
	assert_port(&s->ports[2], "metrics", 9153, IPPROTO_TCP);
	sl = slice_of(o, "kube-system", "kube-dns", 0);
	assert_int_equal(sl->n_endpoints, 2);
	assert_ip(&sl->endpoints[1].addrs[0], "10.244.2.2");
	assert_string_equal(sl->endpoints[1].pod_name, "coredns-5d78c9869d-t7r2m");

	s = service(o, "shop", "frontend");
	assert_false(s->headless);
	assert_int_equal(s->n_ips, 2);
	assert_ip(&s->ips[0], "10.96.12.34");
	assert_ip(&s->ips[1], "fd00:10:96::1234");
	assert_port(&s->ports[0], "http", 80, IPPROTO_TCP);
	sl = slice_of(o, "shop", "frontend", 0);
	assert_int_equal(sl->family, AF_INET);
	assert_ip(&sl->endpoints[0].addrs[0], "10.244.1.10");
	assert_port(&sl->ports[0], "http", 8080, IPPROTO_TCP);
	sl = slice_of(o, "shop", "frontend", 1);
	assert_int_equal(sl->family, AF_INET6);
	assert_int_equal(sl->n_endpoints, 2);
	assert_ip(&sl->endpoints[1].addrs[0], "fd00:10:244::2:11");
	p = pod(o, "shop", "frontend-6b8f7c9d4-2xk8p");
	assert_int_equal(p->n_ips, 2);
	assert_ip(&p->ips[0], "10.244.1.10");
	assert_ip(&p->ips[1], "fd00:10:244::1:10");

	s = service(o, "shop", "cart");
	assert_int_equal(s->n_ports, 2);
	assert_port(&s->ports[0], "grpc", 50051, IPPROTO_TCP);
	assert_port(&s->ports[1], "metrics", 9090, IPPROTO_TCP);

	s = service(o, "shop", "checkout");
	assert_int_equal(s->n_ports, 1);
	assert_port(&s->ports[0], NULL, 8080, IPPROTO_TCP);
	sl = slice_of(o, "shop", "checkout", 0);
	assert_port(&sl->ports[0], NULL, 8080, IPPROTO_TCP); /* "name": "" */

	s = service(o, "shop", "payments");
	assert_int_equal(s->type, NDC_SVC_EXTERNAL_NAME);
	assert_string_equal(s->external_name, "payments.example.com");
	assert_int_equal(s->n_ips, 0);
	assert_false(s->headless);

	/* An ExternalName into the zone: followed there (issue 14). */
	s = service(o, "shop", "storefront");
	assert_int_equal(s->type, NDC_SVC_EXTERNAL_NAME);
	assert_string_equal(s->external_name, "frontend.shop.svc.cluster.local");
	assert_int_equal(s->n_ports, 0);

	s = service(o, "data", "postgres");
	assert_true(s->headless);
	assert_int_equal(s->n_ips, 0);
	assert_false(s->publish_not_ready);
	assert_port(&s->ports[0], "pg", 5432, IPPROTO_TCP);
	sl = slice_of(o, "data", "postgres", 0);
	assert_int_equal(sl->n_endpoints, 3);
	for (int i = 0; i < 3; i++) {
		char name[16];

		snprintf(name, sizeof(name), "postgres-%d", i);
		assert_string_equal(sl->endpoints[i].hostname, name);
		assert_string_equal(sl->endpoints[i].pod_name, name);
		assert_int_equal(sl->endpoints[i].n_addrs, 1);
		assert_int_equal(sl->endpoints[i].ready, i < 2);
	}
	assert_ip(&sl->endpoints[2].addrs[0], "10.244.3.42");

	/* A second service with postgres-0's address: its reverse name has a PTR for each. */
	s = service(o, "data", "postgres-rw");
	assert_false(s->headless);
	assert_ip(&s->ips[0], "10.96.30.5");
	sl = slice_of(o, "data", "postgres-rw", 0);
	assert_int_equal(sl->n_endpoints, 1);
	assert_ip(&sl->endpoints[0].addrs[0], "10.244.1.40");
	assert_null(sl->endpoints[0].hostname);
	assert_string_equal(sl->endpoints[0].pod_name, "postgres-0");

	s = service(o, "data", "kafka");
	assert_true(s->headless);
	assert_true(s->publish_not_ready);
	assert_port(&s->ports[0], "broker", 9092, IPPROTO_TCP);
	sl = slice_of(o, "data", "kafka", 0);
	assert_int_equal(sl->n_endpoints, 2);
	assert_true(sl->endpoints[0].ready);
	assert_false(sl->endpoints[1].ready);
	assert_string_equal(sl->endpoints[1].hostname, "kafka-1");

	s = service(o, "data", "cache");
	assert_true(s->headless);
	sl = slice_of(o, "data", "cache", 0);
	assert_int_equal(sl->n_endpoints, 2);
	assert_null(sl->endpoints[0].hostname);
	assert_string_equal(sl->endpoints[0].pod_name, "cache-7f9c8d6b5-x2k9p");
	assert_ip(&sl->endpoints[0].addrs[0], "10.244.1.60");

	s = service(o, "monitoring", "prometheus");
	assert_ip(&s->ips[0], "10.96.40.10");
	sl = slice_of(o, "monitoring", "prometheus", 0);
	assert_int_equal(sl->n_endpoints, 0); /* "endpoints": null */
	assert_int_equal(sl->n_ports, 0);     /* "ports": null */

	s = service(o, "monitoring", "grafana");
	assert_int_equal(s->type, NDC_SVC_NODE_PORT);
	assert_ip(&s->ips[0], "10.96.40.20");

	/* The API server's own slice: no targetRef. */
	sl = slice_of(o, "default", "kubernetes", 0);
	assert_null(sl->endpoints[0].pod_name);
	assert_port(&sl->ports[0], "https", 6443, IPPROTO_TCP);
}

static void test_sample_json(void **state)
{
	struct ndc_k8s_objects o;

	(void)state;
	load_example("sample-cluster.json", &o);
	check_sample(&o);
	ndc_k8s_objects_free(&o);
	assert_null(o.services);
	assert_int_equal(o.n_services, 0);
	ndc_k8s_objects_free(&o); /* freeing twice is harmless: free zeroes */
}

static void test_sample_yaml_matches_json(void **state)
{
	struct ndc_k8s_objects j, y;

	(void)state;
	load_example("sample-cluster.json", &j);
	load_example("sample-cluster.yaml", &y);
	check_sample(&y);
	assert_objects_equal(&j, &y);
	ndc_k8s_objects_free(&j);
	ndc_k8s_objects_free(&y);
}

static void test_sample_embedded(void **state)
{
	struct ndc_k8s_objects e, f;
	char err[256] = "", *path = example_path("sample-cluster.json"), *file;
	size_t len;

	(void)state;
	assert_non_null(path);
	file = read_file(path, &len);
	assert_int_equal(ndc_sample_cluster_len, len);
	assert_memory_equal(ndc_sample_cluster, file, len);
	assert_int_equal(ndc_sample_cluster[len], '\0');
	assert_int_equal(
	    ndc_snapshot_parse(ndc_sample_cluster, ndc_sample_cluster_len, &e, err, sizeof(err)),
	    0);
	assert_int_equal(ndc_snapshot_parse(file, len, &f, err, sizeof(err)), 0);
	check_sample(&e);
	assert_objects_equal(&e, &f);
	ndc_k8s_objects_free(&e);
	ndc_k8s_objects_free(&f);
	free(file);
	free(path);
}

static void test_load_file_errors(void **state)
{
	char path[] = "/tmp/ndc-test-snapshot-XXXXXX", err[512];
	struct ndc_k8s_objects o;
	const char *bad = "kind: List\nitems:\n- kind: Namespace\n  metadata: {name: [x]}\n";
	int fd;

	(void)state;
	assert_int_equal(ndc_snapshot_load("/nonexistent/ndc.json", &o, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "/nonexistent/ndc.json"));
	assert_int_equal(o.n_services, 0);
	assert_int_equal(ndc_snapshot_load("/", &o, err, sizeof(err)), -EISDIR);
	assert_string_equal(err, "/: Is a directory");

	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, bad, strlen(bad)), (ssize_t)strlen(bad));
	close(fd);
	assert_int_equal(ndc_snapshot_load(path, &o, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, path));
	assert_non_null(
	    strstr(err, "items[0] (Namespace): metadata.name: expected string, got array"));
	unlink(path);
	assert_int_equal(o.n_namespaces, 0);
}

static void test_service_fields(void **state)
{
	struct ndc_k8s_objects o;
	const struct ndc_k8s_service *s;

	(void)state;
	/* Single object at top level; clusterIP only; defaults: ClusterIP, TCP. */
	parse_ok("{\"kind\":\"Service\",\"metadata\":{\"namespace\":\"a\",\"name\":\"b\"},"
		 "\"spec\":{\"clusterIP\":\"10.0.0.1\",\"ports\":[{\"port\":53}]}}",
		 &o);
	assert_int_equal(o.n_services, 1);
	s = &o.services[0];
	assert_string_equal(s->ns, "a");
	assert_string_equal(s->name, "b");
	assert_int_equal(s->type, NDC_SVC_CLUSTER_IP);
	assert_false(s->headless);
	assert_int_equal(s->n_ips, 1);
	assert_ip(&s->ips[0], "10.0.0.1");
	assert_port(&s->ports[0], NULL, 53, IPPROTO_TCP);
	assert_null(s->external_name);
	ndc_k8s_objects_free(&o);

	/* clusterIPs preferred; IPv6 first; SCTP; LoadBalancer; externalName kept only for
	 * ExternalName. */
	parse_ok("kind: Service\nmetadata: {namespace: a, name: b}\nspec:\n"
		 "  type: LoadBalancer\n  clusterIP: fd00::1\n  clusterIPs: [fd00::1, 10.0.0.2]\n"
		 "  externalName: ignored.example.com\n"
		 "  ports:\n  - {name: s, port: 0x50, protocol: SCTP}\n"
		 "  - {name: '', port: 81, protocol: UDP}\n",
		 &o);
	s = &o.services[0];
	assert_int_equal(s->type, NDC_SVC_LOAD_BALANCER);
	assert_int_equal(s->n_ips, 2);
	assert_ip(&s->ips[0], "fd00::1");
	assert_ip(&s->ips[1], "10.0.0.2");
	assert_null(s->external_name);
	assert_port(&s->ports[0], "s", 80, IPPROTO_SCTP);
	assert_port(&s->ports[1], NULL, 81, IPPROTO_UDP);
	ndc_k8s_objects_free(&o);

	/* Headless via clusterIPs ["None"]; no spec at all is a ClusterIP service without IPs. */
	parse_ok("{\"kind\":\"ServiceList\",\"items\":["
		 "{\"kind\":\"Service\",\"metadata\":{\"namespace\":\"a\",\"name\":\"h\"},"
		 "\"spec\":{\"clusterIPs\":[\"None\"],\"publishNotReadyAddresses\":true}},"
		 "{\"kind\":\"Service\",\"metadata\":{\"namespace\":\"a\",\"name\":\"n\"}},"
		 "{\"kind\":\"Service\",\"metadata\":{\"namespace\":\"a\",\"name\":\"e\"},"
		 "\"spec\":{\"type\":\"ExternalName\",\"clusterIP\":\"\","
		 "\"externalName\":\"db.example.org\"}}]}",
		 &o);
	assert_int_equal(o.n_services, 3);
	assert_true(o.services[0].headless);
	assert_true(o.services[0].publish_not_ready);
	assert_int_equal(o.services[0].n_ips, 0);
	assert_false(o.services[1].headless);
	assert_int_equal(o.services[1].n_ips, 0);
	assert_int_equal(o.services[1].n_ports, 0);
	assert_int_equal(o.services[2].type, NDC_SVC_EXTERNAL_NAME);
	assert_string_equal(o.services[2].external_name, "db.example.org");
	assert_int_equal(o.services[2].n_ips, 0);
	ndc_k8s_objects_free(&o);
}

/*
 * multicluster.x-k8s.io ServiceImports: converted by the Service's own steps (metadata, spec,
 * addresses, ports), so each step's message names the import's fields.
 */
static void test_import_fields(void **state)
{
	const struct ndc_k8s_service *s;
	struct ndc_k8s_objects o;

	(void)state;
	/* ClusterSetIP by default; one address per family; ports as a Service's. */
	parse_ok("kind: ServiceImport\nmetadata: {namespace: a, name: b}\n"
		 "spec:\n  ips: [10.0.0.1, 'fd00::1']\n"
		 "  ports:\n  - {name: dns, port: 53, protocol: UDP}\n  - {port: 80}\n",
		 &o);
	assert_int_equal(o.n_imports, 1);
	assert_int_equal(o.n_services, 0);
	s = &o.imports[0];
	assert_string_equal(s->ns, "a");
	assert_string_equal(s->name, "b");
	assert_int_equal(s->type, NDC_SVC_CLUSTER_IP);
	assert_false(s->headless);
	assert_null(s->external_name);
	assert_int_equal(s->n_ips, 2);
	assert_ip(&s->ips[0], "10.0.0.1");
	assert_ip(&s->ips[1], "fd00::1");
	assert_int_equal(s->n_ports, 2);
	assert_port(&s->ports[0], "dns", 53, IPPROTO_UDP);
	assert_port(&s->ports[1], NULL, 80, IPPROTO_TCP);
	ndc_k8s_objects_free(&o);

	/* Headless: spec.ips is checked but says nothing; no spec at all is a ClusterSetIP. */
	parse_ok("kind: List\nitems:\n"
		 "- {kind: ServiceImport, metadata: {namespace: a, name: h},\n"
		 "   spec: {type: Headless, ips: [10.0.0.9], ports: [{port: 53}]}}\n"
		 "- {kind: ServiceImport, metadata: {namespace: a, name: n}}\n"
		 "- {kind: ServiceImport, metadata: {namespace: a, name: c},\n"
		 "   spec: {type: ClusterSetIP, ips: ['']}}\n",
		 &o);
	assert_int_equal(o.n_imports, 3);
	assert_true(o.imports[0].headless);
	assert_int_equal(o.imports[0].n_ips, 0);
	assert_int_equal(o.imports[0].n_ports, 1);
	assert_false(o.imports[1].headless);
	assert_int_equal(o.imports[1].n_ips, 0);
	assert_int_equal(o.imports[1].n_ports, 0);
	assert_false(o.imports[2].headless);
	assert_int_equal(o.imports[2].n_ips, 0);
	ndc_k8s_objects_free(&o);

	/* Errors: what the Service's steps say, with the import's field names. */
	parse_err("kind: ServiceImport\nmetadata: {name: b}\n",
		  "ServiceImport b: metadata.namespace: missing");
	parse_err("kind: ServiceImport\nmetadata: {namespace: a, name: b}\nspec: []\n",
		  "ServiceImport a/b: spec: expected object, got array");
	parse_err("kind: ServiceImport\nmetadata: {namespace: a, name: b}\nspec: {type: 5}\n",
		  "spec.type: expected string, got integer");
	parse_err(
	    "kind: ServiceImport\nmetadata: {namespace: a, name: b}\nspec: {type: ClusterIP}\n",
	    "spec.type: expected ClusterSetIP or Headless");
	parse_err("kind: ServiceImport\nmetadata: {namespace: a, name: b}\nspec: {ips: 10.0.0.1}\n",
		  "spec.ips: expected array, got string");
	parse_err("kind: ServiceImport\nmetadata: {namespace: a, name: b}\nspec: {ips: [null]}\n",
		  "spec.ips[0]: expected string, got null");
	parse_err("kind: ServiceImport\nmetadata: {namespace: a, name: b}\n"
		  "spec: {ips: [\"10.0.0.1\\0\"]}\n",
		  "spec.ips[0]: contains a NUL byte");
	/* "None" makes a Service headless; an import says Headless in spec.type instead. */
	parse_err("kind: ServiceImport\nmetadata: {namespace: a, name: b}\nspec: {ips: [None]}\n",
		  "ServiceImport a/b: spec.ips[0]: invalid IP address \"None\"");
	parse_err("kind: ServiceImport\nmetadata: {namespace: a, name: b}\n"
		  "spec: {ips: [10.0.0.1, 10.0.0.256]}\n",
		  "spec.ips[1]: invalid IP address \"10.0.0.256\"");
	parse_err("kind: ServiceImport\nmetadata: {namespace: a, name: b}\n"
		  "spec: {ips: [10.0.0.1, 'fd00::1', 10.0.0.2]}\n",
		  "spec.ips[2]: more than 2 addresses");
	parse_err("kind: ServiceImport\nmetadata: {namespace: a, name: b}\n"
		  "spec: {ports: [{port: 70000}]}\n",
		  "spec.ports[0].port: expected integer 1..65535");
}

static void test_slice_fields(void **state)
{
	struct ndc_k8s_objects o;
	const struct ndc_k8s_slice *s;

	(void)state;
	parse_ok("apiVersion: v1\nkind: List\nitems:\n"
		 "- apiVersion: discovery.k8s.io/v1\n  kind: EndpointSlice\n  addressType: IPv6\n"
		 "  metadata:\n    namespace: a\n    name: s-1\n"
		 "    labels: {kubernetes.io/service-name: s}\n"
		 "  ports:\n  - {name: p, port: 5353, protocol: UDP}\n  - {name: all, port: null}\n"
		 "  - {name: none}\n"
		 "  endpoints:\n"
		 "  - addresses: ['fd00::5', 'fd00::6']\n    conditions: {ready: ~}\n"
		 "    hostname: h0\n    targetRef: {kind: Pod, name: p0}\n"
		 "  - addresses: ['fd00::7']\n    targetRef: {kind: Node, name: n1}\n"
		 "  - addresses: ['fd00::8']\n    conditions: {ready: false, serving: true}\n"
		 "  - addresses: ['fd00::9']\n    conditions: {}\n"
		 "- kind: EndpointSlice\n  addressType: FQDN\n"
		 "  metadata: {namespace: a, name: f}\n"
		 "  endpoints:\n  - addresses: [db.example.org]\n",
		 &o);
	assert_int_equal(o.n_slices, 2);
	s = &o.slices[0];
	assert_string_equal(s->ns, "a");
	assert_string_equal(s->name, "s-1");
	assert_string_equal(s->service, "s");
	assert_int_equal(s->family, AF_INET6);
	assert_int_equal(s->n_ports, 1); /* ports without a number are skipped */
	assert_port(&s->ports[0], "p", 5353, IPPROTO_UDP);
	assert_int_equal(s->n_endpoints, 4);
	assert_int_equal(s->endpoints[0].n_addrs, 2);
	assert_ip(&s->endpoints[0].addrs[1], "fd00::6");
	assert_true(s->endpoints[0].ready); /* null */
	assert_string_equal(s->endpoints[0].hostname, "h0");
	assert_string_equal(s->endpoints[0].pod_name, "p0");
	assert_true(s->endpoints[1].ready); /* no conditions */
	assert_null(s->endpoints[1].pod_name);
	assert_null(s->endpoints[1].hostname);
	assert_false(s->endpoints[2].ready);
	assert_true(s->endpoints[3].ready); /* conditions without ready */
	s = &o.slices[1];
	assert_int_equal(s->family, 0);
	assert_null(s->service);
	assert_int_equal(s->n_endpoints, 1);
	assert_int_equal(s->endpoints[0].n_addrs, 0);
	ndc_k8s_objects_free(&o);
}

static void test_pod_and_namespace_fields(void **state)
{
	struct ndc_k8s_objects o;

	(void)state;
	parse_ok("{\"kind\":\"List\",\"items\":["
		 "{\"kind\":\"Namespace\",\"metadata\":{\"name\":\"a\"}},"
		 "{\"kind\":\"Pod\",\"metadata\":{\"namespace\":\"a\",\"name\":\"p1\"},"
		 "\"status\":{\"podIP\":\"10.1.0.1\",\"podIPs\":[{\"ip\":\"10.1.0.2\"},"
		 "{\"ip\":\"fd00::2\"}]}},"
		 "{\"kind\":\"Pod\",\"metadata\":{\"namespace\":\"a\",\"name\":\"p2\"},"
		 "\"status\":{\"podIP\":\"10.1.0.3\"}},"
		 "{\"kind\":\"Pod\",\"metadata\":{\"namespace\":\"a\",\"name\":\"pending\"},"
		 "\"status\":{\"phase\":\"Pending\",\"podIP\":\"\"}},"
		 "{\"kind\":\"Pod\",\"metadata\":{\"namespace\":\"a\",\"name\":\"new\"}}]}",
		 &o);
	assert_int_equal(o.n_namespaces, 1);
	assert_string_equal(o.namespaces[0], "a");
	assert_int_equal(o.n_pods, 4);
	assert_int_equal(o.pods[0].n_ips, 2); /* podIPs preferred over podIP */
	assert_ip(&o.pods[0].ips[0], "10.1.0.2");
	assert_ip(&o.pods[0].ips[1], "fd00::2");
	assert_int_equal(o.pods[1].n_ips, 1);
	assert_ip(&o.pods[1].ips[0], "10.1.0.3");
	assert_int_equal(o.pods[2].n_ips, 0);
	assert_int_equal(o.pods[3].n_ips, 0);
	assert_string_equal(o.pods[3].name, "new");
	ndc_k8s_objects_free(&o);
}

static void test_unknown_kinds_ignored(void **state)
{
	struct ndc_k8s_objects o;

	(void)state;
	parse_ok("kind: List\nitems:\n- kind: ConfigMap\n  metadata: {name: 7}\n  data: {a: b}\n"
		 "- kind: Endpoints\n  subsets: 3\n- kind: ServiceList\n  items: [1, 2]\n"
		 "- kind: Namespace\n  metadata: {name: kept}\n",
		 &o);
	assert_int_equal(o.n_namespaces, 1);
	assert_string_equal(o.namespaces[0], "kept");
	assert_int_equal(o.n_services + o.n_slices + o.n_pods, 0);
	ndc_k8s_objects_free(&o);

	parse_ok("{\"kind\":\"Deployment\",\"spec\":{}}", &o);
	assert_int_equal(o.n_namespaces + o.n_services + o.n_slices + o.n_pods, 0);
	ndc_k8s_objects_free(&o);

	/* An empty List, and a List whose items are null (Go's nil slice). */
	parse_ok("{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[]}", &o);
	assert_int_equal(o.n_services, 0);
	parse_ok("kind: List\nitems: null\n", &o);
	assert_int_equal(o.n_services, 0);
}

static void test_yaml_scalars(void **state)
{
	struct ndc_k8s_objects o;

	(void)state;
	/* Plain booleans and ints resolve; the same text quoted stays a string (and fails). */
	parse_ok("kind: Service\nmetadata: {namespace: a, name: b}\n"
		 "spec: {publishNotReadyAddresses: True, ports: [{port: +53}], clusterIP: ~}\n",
		 &o);
	assert_true(o.services[0].publish_not_ready);
	assert_int_equal(o.services[0].ports[0].port, 53);
	assert_int_equal(o.services[0].n_ips, 0);
	ndc_k8s_objects_free(&o);

	parse_ok("kind: Namespace\nmetadata:\n  name: !!str 123\n", &o);
	assert_string_equal(o.namespaces[0], "123");
	ndc_k8s_objects_free(&o);

	parse_ok("# kubectl -o yaml\n---\nkind: Namespace\nmetadata:\n  name: \"true\"\n...\n", &o);
	assert_string_equal(o.namespaces[0], "true");
	ndc_k8s_objects_free(&o);

	parse_err(
	    "kind: Service\nmetadata: {namespace: a, name: b}\nspec: {ports: [{port: '53'}]}\n",
	    "Service a/b: spec.ports[0].port: expected integer 1..65535");
	parse_err("kind: Service\nmetadata: {namespace: a, name: b}\n"
		  "spec: {publishNotReadyAddresses: \"true\"}\n",
		  "spec.publishNotReadyAddresses: expected boolean, got string");
	parse_err(
	    "kind: Service\nmetadata: {namespace: a, name: b}\nspec: {ports: [{port: 5.3e1}]}\n",
	    "spec.ports[0].port: expected integer 1..65535");
	parse_err("kind: Namespace\nmetadata:\n  name: 123\n",
		  "metadata.name: expected string, got integer");

	/* Too big for int64: not an integer in the core schema's sense, so a string. */
	parse_ok("kind: Namespace\nmetadata:\n  name: 99999999999999999999\n", &o);
	assert_string_equal(o.namespaces[0], "99999999999999999999");
	ndc_k8s_objects_free(&o);
}

static void test_json_errors(void **state)
{
	struct ndc_k8s_objects o;
	char err[256];

	(void)state;
	parse_err("{\"kind\": \"List\", \"items\": [}", "JSON: ");
	parse_err("{\"kind\": \"List\", \"items\": [}", "at byte 27 (line 1)");
	parse_err("{\"kind\": \"List\",\n \"items\": [\n", "JSON: unexpected end of input");
	parse_err("{\"kind\": \"List\", \"items\": []} x", "JSON: unexpected character at byte 30");
	parse_err("  {\"kind\": \"List\", \n\"items\": [], }", "line 2");
	/* A NUL byte after the object is not whitespace. */
	assert_int_equal(
	    ndc_snapshot_parse("{\"kind\":\"List\",\"items\":[]}\0x", 29, &o, err, sizeof(err)),
	    -EINVAL);
	assert_string_equal(err, "JSON: trailing data at byte 26 (line 1)");
	assert_int_equal(
	    ndc_snapshot_parse("{\"kind\":\"List\",\"items\":[]}\n \0", 29, &o, err, sizeof(err)),
	    -EINVAL);
	assert_string_equal(err, "JSON: trailing data at byte 28 (line 2)");
	parse_err("{\"kind\": \"Namespace\", \"metadata\": {\"name\": \"a\\u0000b\"}}",
		  "Namespace: metadata.name: contains a NUL byte");
}

static void test_yaml_errors(void **state)
{
	char deep[1024] = "";

	(void)state;
	parse_err("kind: List\nitems:\n- kind: Service\n  metadata: [a\n  b: c\n", "YAML: line ");
	parse_err("kind: List\nitems:\n  - a: b\n   c: d\n", "line 4");
	parse_err(
	    "kind: Namespace\nmetadata: {name: a}\n---\nkind: Namespace\nmetadata: {name: b}\n",
	    "YAML: line 3: more than one document");
	parse_err("kind: List\nitems:\n- &ns {kind: Namespace, metadata: {name: a}}\n- *ns\n",
		  "YAML: line 4: aliases are not supported");
	parse_err("kind: List\nitems:\n- {? [a, b] : c}\n", "line 3: only scalars");
	parse_err("", "top level: expected an object, got null");
	parse_err("- a\n- b\n", "top level: expected an object, got array");
	parse_err("[{\"kind\": \"List\"}]", "top level: expected an object");
	parse_err("kind: List\nitems: {a: b}\n", "items: expected array, got object");
	parse_err("kind: Namespace\x01\n", "YAML: byte 15: control characters are not allowed");
	parse_err("kind: List\nitems:\n- a: b: c\n",
		  "YAML: line 3 column 7: mapping values are not allowed in this context");
	parse_err("kind: Namespace\nmetadata: {\"na\\0me\": x}\n",
		  "YAML: line 2: NUL byte in a key");
	for (int i = 0; i < 100; i++)
		strcat(deep, "[");
	parse_err(deep, "nested deeper than 64 levels");
	deep[0] = '{';
	strcpy(deep + 1, "\"a\":");
	for (int i = 0; i < 100; i++)
		strcat(deep, "[");
	parse_err(deep, "JSON: nesting too deep");
}

static void test_field_errors(void **state)
{
	(void)state;
	parse_err(
	    "{\"kind\":\"List\",\"items\":[{\"kind\":\"Namespace\",\"metadata\":{\"name\":\"x\"}},"
	    "{\"kind\":\"Namespace\",\"metadata\":{}},{},{},"
	    "{\"kind\":\"Service\",\"metadata\":{\"namespace\":\"shop\",\"name\":\"cart\"}}]}",
	    "items[1] (Namespace): metadata.name: missing");
	parse_err(
	    "{\"kind\":\"List\",\"items\":[{\"kind\":\"Namespace\",\"metadata\":{\"name\":\"x\"}},"
	    "{\"kind\":\"Namespace\",\"metadata\":{\"name\":\"y\"}},{\"kind\":\"Pod\"},"
	    "{\"kind\":\"Service\",\"metadata\":{\"namespace\":\"shop\",\"name\":\"cart\"},"
	    "\"spec\":{\"ports\":[{\"name\":\"grpc\",\"port\":50051},"
	    "{\"name\":\"metrics\",\"port\":\"9090\"}]}}]}",
	    "items[2] (Pod): metadata: missing");
	parse_err("kind: List\nitems:\n- kind: Namespace\n  metadata: {name: a}\n- {}\n- {}\n"
		  "- kind: Service\n  metadata: {namespace: shop, name: cart}\n"
		  "  spec:\n    ports:\n    - {name: grpc, port: 50051}\n"
		  "    - {name: metrics, port: \"9090\"}\n",
		  "items[1]: kind: missing");
	parse_err(
	    "kind: List\nitems:\n- kind: Namespace\n  metadata: {name: a}\n- kind: Namespace\n"
	    "  metadata: {name: b}\n- kind: Namespace\n  metadata: {name: c}\n"
	    "- kind: Service\n  metadata: {namespace: shop, name: cart}\n"
	    "  spec:\n    ports:\n    - {name: grpc, port: 50051}\n"
	    "    - {name: metrics, port: \"9090\"}\n",
	    "items[3] (Service shop/cart): spec.ports[1].port: expected integer 1..65535");
	parse_err(
	    "kind: Service\nmetadata: {namespace: a, name: b}\nspec: {ports: [{port: 65536}]}\n",
	    "Service a/b: spec.ports[0].port: expected integer 1..65535");
	parse_err("kind: Service\nmetadata: {namespace: a, name: b}\nspec: {ports: [{name: x}]}\n",
		  "spec.ports[0].port: expected integer 1..65535");
	parse_err("kind: Service\nmetadata: {namespace: a, name: b}\nspec: {ports: [80]}\n",
		  "spec.ports[0]: expected object, got integer");
	parse_err("kind: Service\nmetadata: {namespace: a, name: b}\n"
		  "spec: {ports: [{port: 80, protocol: ICMP}]}\n",
		  "spec.ports[0].protocol: expected TCP, UDP or SCTP");
	parse_err("kind: Service\nmetadata: {namespace: a, name: b}\nspec: {type: Magic}\n",
		  "spec.type: expected ClusterIP, NodePort, LoadBalancer or ExternalName");
	parse_err("kind: Service\nmetadata: {namespace: a, name: b}\nspec: {type: ExternalName}\n",
		  "spec.externalName: missing (type ExternalName)");
	parse_err("kind: Service\nmetadata: {name: b}\n", "Service b: metadata.namespace: missing");
	parse_err("kind: Service\nmetadata: {namespace: a, name: ''}\n", "metadata.name: empty");
	parse_err("kind: Service\nmetadata: {namespace: a, name: b}\nspec: []\n",
		  "Service a/b: spec: expected object, got array");
	parse_err("kind: 5\n", "kind: expected string, got integer");
	parse_err("kind: List\nitems: [3]\n", "items[0]: expected object, got integer");
	parse_err("{\"kind\":\"Namespace\",\"metadata\":{\"name\":1.5}}",
		  "Namespace: metadata.name: expected string, got number");
	parse_err("kind: Service\nmetadata: {namespace: a, name: b}\nspec: {clusterIPs: [null]}\n",
		  "spec.clusterIPs[0]: expected string, got null");
	parse_err("kind: Service\nmetadata: {namespace: a, name: b}\n"
		  "spec: {clusterIPs: [\"10.0.0.1\\0\"]}\n",
		  "spec.clusterIPs[0]: contains a NUL byte");
	parse_err("kind: EndpointSlice\naddressType: IPv4\nmetadata: {namespace: a, name: s}\n"
		  "endpoints: [[]]\n",
		  "endpoints[0]: expected object, got array");
	parse_err("kind: Pod\nmetadata: {namespace: a, name: p}\nstatus: {podIPs: [10.0.0.1]}\n",
		  "status.podIPs[0]: expected object, got string");

	/* Bad addresses. */
	parse_err(
	    "kind: Service\nmetadata: {namespace: a, name: b}\nspec: {clusterIP: 10.0.0.256}\n",
	    "spec.clusterIP: invalid IP address \"10.0.0.256\"");
	parse_err("kind: Service\nmetadata: {namespace: a, name: b}\n"
		  "spec: {clusterIPs: [10.0.0.1, 'fd00::1%eth0']}\n",
		  "spec.clusterIPs[1]: invalid IP address");
	parse_err("kind: Service\nmetadata: {namespace: a, name: b}\n"
		  "spec: {clusterIPs: [10.0.0.1, 'fd00::1', 10.0.0.2]}\n",
		  "spec.clusterIPs[2]: more than 2 addresses");
	parse_err("kind: Service\nmetadata: {namespace: a, name: b}\n"
		  "spec: {clusterIP: None, clusterIPs: [10.0.0.1]}\n",
		  "spec.clusterIPs: addresses on a headless service");
	parse_err("kind: EndpointSlice\naddressType: IPv4\nmetadata: {namespace: a, name: s}\n"
		  "endpoints:\n- addresses: [10.0.0.1]\n- addresses: ['fd00::1']\n",
		  "EndpointSlice a/s: endpoints[1].addresses[0]: expected an IPv4 address, got "
		  "\"fd00::1\"");
	parse_err("kind: EndpointSlice\naddressType: IPv6\nmetadata: {namespace: a, name: s}\n"
		  "endpoints:\n- addresses: [10.0.0.1]\n",
		  "endpoints[0].addresses[0]: expected an IPv6 address");
	parse_err("kind: Pod\nmetadata: {namespace: a, name: p}\nstatus: {podIP: 1.2.3}\n",
		  "Pod a/p: status.podIP: invalid IP address");
	parse_err("kind: Pod\nmetadata: {namespace: a, name: p}\n"
		  "status: {podIPs: [{ip: 10.0.0.1}, {ip: 'fd00::1'}, {ip: 10.0.0.2}]}\n",
		  "status.podIPs[2].ip: more than 2 addresses");
	parse_err("kind: Pod\nmetadata: {namespace: a, name: p}\nstatus: {podIPs: [{}]}\n",
		  "status.podIPs[0].ip: missing");

	/* Slice shapes. */
	parse_err("kind: EndpointSlice\nmetadata: {namespace: a, name: s}\n",
		  "addressType: missing");
	parse_err("kind: EndpointSlice\naddressType: IPv5\nmetadata: {namespace: a, name: s}\n",
		  "addressType: expected IPv4, IPv6 or FQDN");
	parse_err("kind: EndpointSlice\naddressType: IPv4\nmetadata: {namespace: a, name: s}\n"
		  "endpoints:\n- hostname: h\n",
		  "endpoints[0].addresses: missing");
	parse_err("kind: EndpointSlice\naddressType: IPv4\nmetadata: {namespace: a, name: s}\n"
		  "endpoints:\n- addresses: [10.0.0.1]\n  conditions: {ready: 'yes'}\n",
		  "endpoints[0].conditions.ready: expected boolean, got string");
	parse_err("kind: EndpointSlice\naddressType: IPv4\nmetadata: {namespace: a, name: s}\n"
		  "endpoints:\n- addresses: [10.0.0.1]\n  targetRef: {kind: Pod, name: 3}\n",
		  "endpoints[0].targetRef.name: expected string, got integer");
	parse_err("kind: EndpointSlice\naddressType: IPv4\n"
		  "metadata: {namespace: a, name: s, labels: {kubernetes.io/service-name: [x]}}\n",
		  "metadata.labels.kubernetes.io/service-name: expected string, got array");
	parse_err("kind: EndpointSlice\naddressType: FQDN\nmetadata: {namespace: a, name: s}\n"
		  "endpoints:\n- addresses: [{}]\n",
		  "endpoints[0].addresses[0]: expected string, got object");
	parse_err("kind: EndpointSlice\naddressType: IPv4\nmetadata: {namespace: a, name: s}\n"
		  "endpoints: {}\n",
		  "endpoints: expected array, got object");
}

static void test_object_add_direct(void **state)
{
	struct ndc_k8s_objects o = {0};
	json_object *good, *bad, *list;
	char err[256] = "";

	(void)state;
	good = json_tokener_parse("{\"kind\":\"Service\",\"metadata\":{\"namespace\":\"shop\","
				  "\"name\":\"cart\"},\"spec\":{\"clusterIP\":\"10.0.0.9\","
				  "\"ports\":[{\"name\":\"grpc\",\"port\":50051}]}}");
	bad = json_tokener_parse(
	    "{\"kind\":\"Service\",\"metadata\":{\"namespace\":\"shop\","
	    "\"name\":\"cart\"},\"spec\":{\"ports\":[{\"name\":\"a\",\"port\":1},"
	    "{\"name\":\"metrics\",\"port\":\"9090\"}]}}");
	list = json_tokener_parse("[1]");
	assert_non_null(good);
	assert_non_null(bad);

	/* Many adds: the arrays grow past their first allocation. */
	for (int i = 0; i < 100; i++)
		assert_int_equal(ndc_k8s_object_add(&o, good, err, sizeof(err)), 0);
	assert_int_equal(o.n_services, 100);
	assert_true(o.cap_services >= 100);

	/* A failing add leaves the store as it was, and names the object without a location. */
	assert_int_equal(ndc_k8s_object_add(&o, bad, err, sizeof(err)), -EINVAL);
	assert_string_equal(err,
			    "Service shop/cart: spec.ports[1].port: expected integer 1..65535");
	assert_int_equal(o.n_services, 100);
	assert_string_equal(o.services[99].ports[0].name, "grpc");
	assert_int_equal(ndc_k8s_object_add_at(&o, bad, "event 7", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "event 7 (Service shop/cart): spec.ports[1].port: expected "
				 "integer 1..65535");

	/* Short or absent error buffers are safe. */
	assert_int_equal(ndc_k8s_object_add(&o, bad, NULL, 0), -EINVAL);
	assert_int_equal(ndc_k8s_object_add(&o, bad, err, 8), -EINVAL);
	assert_string_equal(err, "Service");
	assert_int_equal(ndc_k8s_object_add(&o, list, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "expected object, got array");
	assert_int_equal(ndc_k8s_object_add(&o, NULL, err, sizeof(err)), -EINVAL);

	/* Arrays filled by hand (capacity 0) are reallocated, not overrun. */
	ndc_k8s_objects_free(&o);
	o.namespaces = calloc(1, sizeof(char *));
	o.namespaces[0] = strdup("hand");
	o.n_namespaces = 1;
	json_object_put(good);
	good = json_tokener_parse("{\"kind\":\"Namespace\",\"metadata\":{\"name\":\"auto\"}}");
	assert_int_equal(ndc_k8s_object_add(&o, good, err, sizeof(err)), 0);
	assert_int_equal(o.n_namespaces, 2);
	assert_string_equal(o.namespaces[0], "hand");
	assert_string_equal(o.namespaces[1], "auto");

	ndc_k8s_objects_free(&o);
	json_object_put(good);
	json_object_put(bad);
	json_object_put(list);
}

/* One block per converted object; the first one also holds the array (see objects/objects.h). */
static void test_packed_objects(void **state)
{
	static const char *const kinds[] = {
	    "{\"kind\":\"EndpointSlice\",\"metadata\":{\"namespace\":\"ns\",\"name\":\"s-%d\","
	    "\"labels\":{\"kubernetes.io/service-name\":\"svc\"}},\"addressType\":\"IPv4\","
	    "\"ports\":[{\"name\":\"http\",\"port\":8080}],\"endpoints\":[{\"addresses\":"
	    "[\"10.1.0.%d\",\"10.1.1.1\"],\"hostname\":\"h-%d\",\"targetRef\":{\"kind\":\"Pod\","
	    "\"name\":\"p\"}},{\"addresses\":[\"10.2.0.1\"],\"conditions\":{\"ready\":false}}]}",
	    "{\"kind\":\"Pod\",\"metadata\":{\"namespace\":\"ns\",\"name\":\"p-%d\"},"
	    "\"status\":{\"podIP\":\"10.3.0.%d\"},\"x\":%d}",
	};
	char text[1024], name[32], err[256];

	(void)state;
	for (size_t k = 0; k < 2; k++) {
		struct ndc_k8s_objects o = {0};

		for (int i = 0; i < 5; i++) {
			json_object *obj;

			snprintf(text, sizeof(text), kinds[k], i, i + 1, i);
			obj = json_tokener_parse(text);
			assert_non_null(obj);
			assert_int_equal(ndc_k8s_object_add(&o, obj, err, sizeof(err)), 0);
			json_object_put(obj);
			if (i == 0 && k == 0) {
				/* Alone: array, element and everything it points to in one block.
				 */
				assert_ptr_equal(o.slices, o.slices[0].mem);
				assert_int_equal(o.cap_slices, 1);
			}
		}
		/* Grown out of the first block: every element still reads the same. */
		for (int i = 0; i < 5; i++) {
			if (k == 0) {
				const struct ndc_k8s_slice *s = &o.slices[i];

				assert_ptr_not_equal(o.slices, s->mem);
				snprintf(name, sizeof(name), "s-%d", i);
				assert_string_equal(s->name, name);
				assert_string_equal(s->ns, "ns");
				assert_string_equal(s->service, "svc");
				assert_port(&s->ports[0], "http", 8080, IPPROTO_TCP);
				assert_int_equal(s->n_endpoints, 2);
				assert_int_equal(s->endpoints[0].n_addrs, 2);
				snprintf(name, sizeof(name), "10.1.0.%d", i + 1);
				assert_ip(&s->endpoints[0].addrs[0], name);
				assert_ip(&s->endpoints[0].addrs[1], "10.1.1.1");
				snprintf(name, sizeof(name), "h-%d", i);
				assert_string_equal(s->endpoints[0].hostname, name);
				assert_string_equal(s->endpoints[0].pod_name, "p");
				assert_true(s->endpoints[0].ready);
				assert_ip(&s->endpoints[1].addrs[0], "10.2.0.1");
				assert_null(s->endpoints[1].hostname);
				assert_false(s->endpoints[1].ready);
			} else {
				snprintf(name, sizeof(name), "p-%d", i);
				assert_string_equal(o.pods[i].name, name);
				assert_string_equal(o.pods[i].ns, "ns");
				snprintf(name, sizeof(name), "10.3.0.%d", i + 1);
				assert_ip(&o.pods[i].ips[0], name);
			}
		}
		ndc_k8s_objects_free(&o);
	}
}

static void test_all_or_nothing(void **state)
{
	struct ndc_k8s_objects o;
	char err[256];

	(void)state;
	/* Good objects before the bad one are dropped too. */
	parse_err(
	    "kind: List\nitems:\n- kind: Namespace\n  metadata: {name: a}\n"
	    "- kind: Service\n  metadata: {namespace: a, name: s}\n  spec: {clusterIP: 10.0.0.1}\n"
	    "- kind: Pod\n  metadata: {namespace: a, name: p}\n  status: {podIP: bad}\n",
	    "items[2] (Pod a/p): status.podIP: invalid IP address \"bad\"");
	/* A snapshot parsed into a used struct starts from zero (the caller freed it before). */
	memset(&o, 0xa5, sizeof(o));
	assert_int_equal(ndc_snapshot_parse("{}", 2, &o, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "kind: missing");
	assert_int_equal(o.n_services, 0);
	assert_int_equal(ndc_snapshot_parse("{", 1, &o, NULL, 0), -EINVAL);
	assert_int_equal(ndc_snapshot_parse(NULL, 0, &o, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "top level: expected an object, got null");
}

/* Parses text whole expecting success and returns the first Namespace's name (or ""), and n. */
static const char *only_namespace(const char *text, struct ndc_k8s_objects *o)
{
	parse_ok(text, o);
	return o->n_namespaces ? o->namespaces[0] : "";
}

/*
 * A List as kubectl writes it is converted item by item (no tree of the whole file); anything
 * else falls back to the whole parse, which must give what it always gave.
 */
static void test_stream_json(void **state)
{
	struct ndc_k8s_objects s, f;
	char err[256] = "", *path = example_path("sample-cluster.json"), *file, *dup;
	size_t len;

	(void)state;
	assert_non_null(path);
	file = read_file(path, &len);
	assert_int_equal(ndc_snapshot_stream_json(file, len, &s), 0);
	check_sample(&s);
	/* The same List with an empty "items" first: the last "items" counts, parsed whole. */
	assert_int_equal(asprintf(&dup, "{\"items\": [],%.*s", (int)(len - 1), file + 1),
			 (int)(len + 12));
	assert_int_equal(ndc_snapshot_stream_json(dup, len + 12, &f), -EAGAIN);
	assert_null(f.services);
	assert_int_equal(ndc_snapshot_parse(dup, len + 12, &f, err, sizeof(err)), 0);
	assert_objects_equal(&s, &f);
	ndc_k8s_objects_free(&s);
	ndc_k8s_objects_free(&f);
	free(dup);
	free(file);
	free(path);

	/* Streamed: nested "items" keys, brackets and escapes in strings, a *List kind. */
	static const char *const streamed[] = {
	    "{\"kind\":\"List\",\"metadata\":{\"items\":[{\"a\":1}]},\"items\":[{\"kind\":"
	    "\"Namespace\",\"metadata\":{\"name\":\"x\"}}]}",
	    "{\"kind\":\"List\",\"items\":[{\"kind\":\"Namespace\",\"metadata\":{\"name\":\"x\","
	    "\"annotations\":{\"a\":\"}]\\\"{[\\\\\"}}}]}",
	    " \n{ \"items\" :\n [ {\"kind\":\"Namespace\",\"metadata\":{\"name\":\"x\"}} , "
	    "{\"kind\":\"ConfigMap\"} ] ,"
	    "\"kind\":\"NamespaceList\"}\n",
	};
	for (size_t i = 0; i < sizeof(streamed) / sizeof(*streamed); i++) {
		if (ndc_snapshot_stream_json(streamed[i], strlen(streamed[i]), &s) != 0)
			fail_msg("not streamed: %s", streamed[i]);
		assert_int_equal(s.n_namespaces, 1);
		assert_string_equal(s.namespaces[0], "x");
		ndc_k8s_objects_free(&s);
	}

	/* Parsed whole: not a List after all, a second "items", bad items, bad syntax. */
	static const char *const whole[] = {
	    "{\"items\":[{\"kind\":\"Namespace\",\"metadata\":{\"name\":\"a\"}}],"
	    "\"kind\":\"Namespace\",\"metadata\":{\"name\":\"b\"}}",
	    "{\"kind\":\"List\",\"items\":[{\"kind\":\"Namespace\",\"metadata\":{\"name\":\"a\"}}],"
	    "\"items\":[]}",
	    "{\"kind\":\"List\",\"items\":[{\"kind\":\"Namespace\",\"metadata\":{\"name\":\"a\"}}],"
	    "\"items\":5}",
	    "{\"kind\":\"List\",\"items\":[{\"kind\":\"Namespace\",\"metadata\":{}}]}",
	    "{\"kind\":\"List\",\"items\":[1]}",
	    "{\"kind\":\"List\",\"items\":[{},]}",
	    "{\"kind\":\"List\",\"items\":[{\"a\":tru}]}",
	    "{\"kind\":\"List\",\"items\":[]} x",
	    "{\"kind\":\"List\",\"items\":[{}]",
	    "{\"kind\":\"List\",\"items\":[{\"a\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
	    "[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]"
	    "]]]]]]]]}]}",
	};
	for (size_t i = 0; i < sizeof(whole) / sizeof(*whole); i++) {
		if (ndc_snapshot_stream_json(whole[i], strlen(whole[i]), &s) != -EAGAIN)
			fail_msg("streamed: %s", whole[i]);
		assert_null(s.namespaces);
	}
	assert_string_equal(only_namespace(whole[0], &s), "b");
	assert_int_equal(s.n_namespaces, 1);
	ndc_k8s_objects_free(&s);
	assert_string_equal(only_namespace(whole[1], &s), "");
	parse_err(whole[2], "items: expected array, got int");
	parse_err(whole[3], "items[0] (Namespace): metadata.name: missing");
	parse_err(whole[4], "items[0]: ");
	parse_err(whole[5], "JSON: ");
	parse_err(whole[6], "JSON: ");
	parse_err(whole[7], "JSON: unexpected character at byte 27");
	parse_err(whole[8], "JSON: unexpected end of input");
	parse_err(whole[9], "JSON: nesting too deep");
}

/* YAML streams as its items close; the same fallbacks keep the whole parse's meaning. */
static void test_stream_yaml(void **state)
{
	struct ndc_k8s_objects o;

	(void)state;
	assert_string_equal(only_namespace("items:\n- kind: Namespace\n  metadata: {name: a}\n"
					   "- kind: Namespace\n  metadata: {name: c}\n"
					   "kind: List\n",
					   &o),
			    "a");
	assert_int_equal(o.n_namespaces, 2);
	assert_string_equal(o.namespaces[1], "c");
	ndc_k8s_objects_free(&o);
	assert_string_equal(only_namespace("items:\n- kind: Namespace\n  metadata: {name: a}\n"
					   "kind: Namespace\nmetadata: {name: b}\n",
					   &o),
			    "b");
	assert_int_equal(o.n_namespaces, 1);
	ndc_k8s_objects_free(&o);
	assert_string_equal(only_namespace("kind: List\nitems:\n- kind: Namespace\n"
					   "  metadata: {name: a}\nitems: []\n",
					   &o),
			    "");
	assert_int_equal(o.n_namespaces, 0);
	ndc_k8s_objects_free(&o);
	parse_err("kind: List\nitems:\n- kind: Namespace\n  metadata: {name: a}\n- [x]\n",
		  "items[1]: ");
	parse_err("kind: List\nitems:\n- kind: Namespace\n  metadata: {name: a}\n- 7\n",
		  "items[1]: ");
	parse_err("kind: List\nitems:\n- kind: Namespace\n  metadata: {name: a}\n"
		  "- kind: Namespace\n  metadata: {}\n",
		  "items[1] (Namespace): metadata.name: missing");
	parse_err("kind: List\nitems:\n- kind: Namespace\n  metadata: {name: a}\n"
		  "- kind: Namespace\n  metadata: {}\nx: [\n",
		  "YAML: line ");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_sample_json),
	    cmocka_unit_test(test_sample_yaml_matches_json),
	    cmocka_unit_test(test_sample_embedded),
	    cmocka_unit_test(test_load_file_errors),
	    cmocka_unit_test(test_service_fields),
	    cmocka_unit_test(test_import_fields),
	    cmocka_unit_test(test_slice_fields),
	    cmocka_unit_test(test_pod_and_namespace_fields),
	    cmocka_unit_test(test_unknown_kinds_ignored),
	    cmocka_unit_test(test_yaml_scalars),
	    cmocka_unit_test(test_json_errors),
	    cmocka_unit_test(test_yaml_errors),
	    cmocka_unit_test(test_field_errors),
	    cmocka_unit_test(test_object_add_direct),
	    cmocka_unit_test(test_packed_objects),
	    cmocka_unit_test(test_all_or_nothing),
	    cmocka_unit_test(test_stream_json),
	    cmocka_unit_test(test_stream_yaml),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
