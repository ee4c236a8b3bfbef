/* SPDX-License-Identifier: MIT */
/* Record model: a small cluster built in C, every answer decoded from wire form and compared. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "records/records.h"

#define ZONE "cluster.local"

#include "dec.h"

/* Positive answer with exactly n answer RRs. */
static void expect_answer(const struct ndc_records *r, const char *name, uint16_t type, int n,
			  struct dec *d)
{
	assert_int_equal(q(r, name, type, d), 0);
	if (d->an != n || d->rcode != NDC_RCODE_NOERROR) {
		dump(d);
		fail_msg("%s type %u: %d answers rcode %u, want %d", name, type, d->an, d->rcode,
			 n);
	}
	assert_int_equal(d->aa, 1);
}

static void expect_negative(const struct ndc_records *r, const char *name, uint16_t type,
			    uint8_t rcode, uint32_t ttl)
{
	struct dec d;
	char soa[200];

	assert_int_equal(q(r, name, type, &d), 0);
	if (d.rcode != rcode || d.an != 0 || d.ns != 1 || d.ar != 0) {
		dump(&d);
		fail_msg("%s type %u: rcode %u an %d ns %d, want rcode %u and the SOA", name, type,
			 d.rcode, d.an, d.ns, rcode);
	}
	assert_int_equal(d.aa, 1);
	assert_int_equal(d.type[0], NDC_T_SOA);
	snprintf(soa, sizeof(soa), "ns " ZONE ". %u SOA ns.dns." ZONE ". hostmaster." ZONE ". ",
		 ttl);
	assert_true(!strncmp(d.line[0], soa, strlen(soa)));
	assert_int_equal(d.min_ttl, ttl);
}

#define NXDOMAIN(r, n, t) expect_negative(r, n, t, NDC_RCODE_NXDOMAIN, 5)
#define NODATA(r, n, t) expect_negative(r, n, t, NDC_RCODE_NOERROR, 5)

static void expect_enoent(const struct ndc_records *r, const char *name, uint16_t type)
{
	struct dec d;

	assert_int_equal(q(r, name, type, &d), -ENOENT);
}

/* ---------------------------------------------------------------------------------------------
 * The cluster.
 */
static struct ndc_ip ip(const char *s)
{
	struct ndc_ip r;

	memset(&r, 0, sizeof(r));
	if (inet_pton(AF_INET, s, r.addr) == 1) {
		r.family = AF_INET;
	} else {
		assert_int_equal(inet_pton(AF_INET6, s, r.addr), 1);
		r.family = AF_INET6;
	}
	return r;
}

static struct ndc_ip pool[256];
static size_t npool;

static struct ndc_ip *addrs1(const char *s)
{
	assert_true(npool < sizeof(pool) / sizeof(pool[0]));
	pool[npool] = ip(s);
	return &pool[npool++];
}

static char *nss[] = {"default", "kube-system", "empty-ns", "other"};
static struct ndc_k8s_port web_ports[] = {
    {"http", 80, IPPROTO_TCP}, {NULL, 8080, IPPROTO_TCP}, {"dns", 53, IPPROTO_UDP}};
static struct ndc_k8s_port https_port[] = {{"https", 443, IPPROTO_TCP}};
static struct ndc_k8s_port mysql_port[] = {{"mysql", 3306, IPPROTO_TCP}};
static struct ndc_k8s_endpoint db4_eps[3], db6_eps[1], pnr_eps[2], web_eps[2], fqdn_eps[1];
static struct ndc_k8s_slice slices[5];
static struct ndc_k8s_service svcs[11];
static struct ndc_k8s_pod pods[2];
static struct ndc_k8s_objects objs;

static struct ndc_k8s_endpoint ep(const char *addr, const char *host, const char *pod, bool ready)
{
	struct ndc_k8s_endpoint e = {.n_addrs = 1, .addrs = addrs1(addr), .ready = ready};

	e.hostname = (char *)host;
	e.pod_name = (char *)pod;
	return e;
}

static struct ndc_k8s_service svc(const char *ns, const char *name, const char *ip1,
				  const char *ip2)
{
	struct ndc_k8s_service s = {.ns = (char *)ns, .name = (char *)name};

	if (ip1)
		s.ips[s.n_ips++] = ip(ip1);
	if (ip2)
		s.ips[s.n_ips++] = ip(ip2);
	s.headless = !ip1;
	return s;
}

static struct ndc_k8s_slice slice(const char *svc_name, int family, struct ndc_k8s_endpoint *eps,
				  size_t n, struct ndc_k8s_port *ports, size_t np)
{
	struct ndc_k8s_slice s = {.ns = "default", .name = (char *)svc_name, .family = family};

	s.service = (char *)svc_name;
	s.endpoints = eps;
	s.n_endpoints = n;
	s.ports = ports;
	s.n_ports = np;
	return s;
}

static void cluster_init(void)
{
	if (objs.n_services)
		return;
	db4_eps[0] = ep("10.244.1.5", NULL, "db-0", true);
	db4_eps[1] = ep("10.244.1.6", "primary", "db-1", true);
	db4_eps[2] = ep("10.244.1.7", NULL, "db-2", false);
	db6_eps[0] = ep("fd00:10:244::5", NULL, "db-0", true);
	pnr_eps[0] = ep("10.244.2.1", NULL, NULL, false);
	pnr_eps[1] = ep("10.244.2.2", NULL, NULL, true);
	web_eps[0] = ep("10.244.3.1", NULL, "web-abc", true);
	web_eps[1] = ep("10.244.3.2", NULL, "web-def", false);
	fqdn_eps[0] = ep("10.244.3.3", NULL, NULL, true);

	slices[0] = slice("db", AF_INET, db4_eps, 3, mysql_port, 1);
	slices[1] = slice("db", AF_INET6, db6_eps, 1, mysql_port, 1);
	slices[2] = slice("pnr", AF_INET, pnr_eps, 2, NULL, 0);
	slices[3] = slice("web", AF_INET, web_eps, 2, web_ports, 3);
	slices[4] = slice("web", 0, fqdn_eps, 1, NULL, 0); /* FQDN slice: ignored */

	svcs[0] = svc("default", "web", "10.96.0.20", NULL);
	svcs[0].ports = web_ports;
	svcs[0].n_ports = 3;
	svcs[1] = svc("default", "dual", "10.96.0.30", "fd00:96::30");
	svcs[1].ports = https_port;
	svcs[1].n_ports = 1;
	svcs[2] = svc("default", "db", NULL, NULL);
	svcs[3] = svc("default", "pnr", NULL, NULL);
	svcs[3].publish_not_ready = true;
	svcs[4] = svc("default", "ext", NULL, NULL);
	svcs[4].headless = false;
	svcs[4].type = NDC_SVC_EXTERNAL_NAME;
	svcs[4].external_name = "Example.COM";
	svcs[5] = svc("default", "empty-hl", NULL, NULL);
	svcs[6] = svc("default", "empty-cip", "10.96.0.40", NULL);
	svcs[7] = svc("other", "svc1", "10.96.0.50", NULL);
	svcs[8] = svc("default", "Bad_Name", "10.96.0.60", NULL);
	svcs[9] = svc("kube-system", "kube-dns", "10.96.0.10", NULL);
	svcs[10] = svc("default", "lb", "10.96.0.70", NULL);
	svcs[10].type = NDC_SVC_LOAD_BALANCER;

	pods[0] = (struct ndc_k8s_pod){.ns = "default", .name = "pod-a", .n_ips = 2};
	pods[0].ips[0] = ip("10.244.1.5");
	pods[0].ips[1] = ip("fd00:10:244::5");
	pods[1] = (struct ndc_k8s_pod){.ns = "other", .name = "pod-b", .n_ips = 1};
	pods[1].ips[0] = ip("10.244.9.9");

	objs.namespaces = nss;
	objs.n_namespaces = 4;
	objs.services = svcs;
	objs.n_services = 11;
	objs.slices = slices;
	objs.n_slices = 5;
	objs.pods = pods;
	objs.n_pods = 2;
}

static struct ndc_ip ns_addrs[2];

static void opts_init(struct ndc_records_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->zone = ZONE;
	o->ttl = 5;
	ns_addrs[0] = ip("169.254.20.10");
	ns_addrs[1] = ip("fd00::53");
	o->n_ns_addrs = 2;
	o->ns_addrs = ns_addrs;
}

static struct ndc_records *build(const struct ndc_records_opts *o)
{
	struct ndc_records *r = NULL;

	cluster_init();
	assert_int_equal(ndc_records_build(&objs, o, &r), 0);
	assert_non_null(r);
	return r;
}

static struct ndc_records *build_default(void)
{
	struct ndc_records_opts o;

	opts_init(&o);
	return build(&o);
}

/* ---------------------------------------------------------------------------------------------
 * Tests.
 */
static void test_cluster_ip(void **state)
{
	struct ndc_records *r = build_default();
	struct dec d;

	(void)state;
	expect_answer(r, "web.default.svc." ZONE, NDC_T_A, 1, &d);
	assert_has(&d, "an web.default.svc.cluster.local. 5 A 10.96.0.20");
	assert_int_equal(d.min_ttl, 5);
	expect_answer(r, "WEB.Default.svc." ZONE ".", NDC_T_A, 1, &d); /* keys are lowercased */
	expect_answer(r, "kube-dns.kube-system.svc." ZONE, NDC_T_A, 1, &d);
	assert_has(&d, "an kube-dns.kube-system.svc.cluster.local. 5 A 10.96.0.10");
	expect_answer(r, "lb.default.svc." ZONE, NDC_T_A, 1, &d);
	NODATA(r, "web.default.svc." ZONE, NDC_T_AAAA);
	NODATA(r, "web.default.svc." ZONE, NDC_T_TXT);
	/* RFC 8482: ANY gets a subset, here the first RRset */
	expect_answer(r, "web.default.svc." ZONE, NDC_T_ANY, 1, &d);
	assert_int_equal(d.type[0], NDC_T_A);
	assert_true(ndc_records_count(r) > 20);
	ndc_records_free(r);
}

static void test_dual_stack(void **state)
{
	struct ndc_records *r = build_default();
	struct dec d;

	(void)state;
	expect_answer(r, "dual.default.svc." ZONE, NDC_T_A, 1, &d);
	assert_has(&d, "an dual.default.svc.cluster.local. 5 A 10.96.0.30");
	expect_answer(r, "dual.default.svc." ZONE, NDC_T_AAAA, 1, &d);
	assert_has(&d, "an dual.default.svc.cluster.local. 5 AAAA fd00:96::30");
	ndc_records_free(r);
}

static void test_headless(void **state)
{
	struct ndc_records *r = build_default();
	struct dec d;

	(void)state;
	expect_answer(r, "db.default.svc." ZONE, NDC_T_A, 2, &d);
	assert_has(&d, "an db.default.svc.cluster.local. 5 A 10.244.1.5");
	assert_has(&d, "an db.default.svc.cluster.local. 5 A 10.244.1.6");
	assert_false(has(&d, "an db.default.svc.cluster.local. 5 A 10.244.1.7")); /* not ready */
	expect_answer(r, "db.default.svc." ZONE, NDC_T_AAAA, 1, &d);
	assert_has(&d, "an db.default.svc.cluster.local. 5 AAAA fd00:10:244::5");
	/* publishNotReadyAddresses serves the not-ready endpoint too */
	expect_answer(r, "pnr.default.svc." ZONE, NDC_T_A, 2, &d);
	assert_has(&d, "an pnr.default.svc.cluster.local. 5 A 10.244.2.1");
	assert_has(&d, "an pnr.default.svc.cluster.local. 5 A 10.244.2.2");
	/* spec 2.4.1: a headless service with no ready endpoint is NXDOMAIN (CoreDNS too) */
	NXDOMAIN(r, "empty-hl.default.svc." ZONE, NDC_T_A);
	NXDOMAIN(r, "empty-hl.default.svc." ZONE, NDC_T_SRV);
	ndc_records_free(r);
}

static void test_hostnames(void **state)
{
	struct ndc_records *r = build_default();
	struct ndc_records_opts o;
	struct dec d;

	(void)state;
	expect_answer(r, "primary.db.default.svc." ZONE, NDC_T_A, 1, &d);
	assert_has(&d, "an primary.db.default.svc.cluster.local. 5 A 10.244.1.6");
	expect_answer(r, "10-244-1-5.db.default.svc." ZONE, NDC_T_A, 1, &d);
	assert_has(&d, "an 10-244-1-5.db.default.svc.cluster.local. 5 A 10.244.1.5");
	expect_answer(r, "fd00-10-244--5.db.default.svc." ZONE, NDC_T_AAAA, 1, &d);
	assert_has(&d, "an fd00-10-244--5.db.default.svc.cluster.local. 5 AAAA fd00:10:244::5");
	NODATA(r, "fd00-10-244--5.db.default.svc." ZONE, NDC_T_A);
	NXDOMAIN(r, "10-244-1-7.db.default.svc." ZONE, NDC_T_A); /* not ready */
	NXDOMAIN(r, "10-244-1-6.db.default.svc." ZONE, NDC_T_A); /* has a hostname */
	expect_answer(r, "10-244-2-1.pnr.default.svc." ZONE, NDC_T_A, 1, &d);
	/* spec 2.4.1: endpoint names for headless services only (the PTR still names them) */
	NXDOMAIN(r, "10-244-3-1.web.default.svc." ZONE, NDC_T_A);
	ndc_records_free(r);

	opts_init(&o);
	o.endpoint_pod_names = true;
	r = build(&o);
	expect_answer(r, "db-0.db.default.svc." ZONE, NDC_T_A, 1, &d);
	assert_has(&d, "an db-0.db.default.svc.cluster.local. 5 A 10.244.1.5");
	expect_answer(r, "db-0.db.default.svc." ZONE, NDC_T_AAAA, 1, &d);
	assert_has(&d, "an db-0.db.default.svc.cluster.local. 5 AAAA fd00:10:244::5");
	expect_answer(r, "primary.db.default.svc." ZONE, NDC_T_A, 1, &d); /* hostname wins */
	NXDOMAIN(r, "db-1.db.default.svc." ZONE, NDC_T_A);
	NXDOMAIN(r, "10-244-1-5.db.default.svc." ZONE, NDC_T_A);
	expect_answer(r, "10-244-2-2.pnr.default.svc." ZONE, NDC_T_A, 1, &d); /* no pod: dashed */
	ndc_records_free(r);
}

static void test_srv_cluster_ip(void **state)
{
	struct ndc_records *r = build_default();
	struct dec d;

	(void)state;
	expect_answer(r, "_http._tcp.web.default.svc." ZONE, NDC_T_SRV, 1, &d);
	assert_has(&d, "an _http._tcp.web.default.svc.cluster.local. 5 SRV 0 100 80 "
		       "web.default.svc.cluster.local.");
	assert_int_equal(d.ar, 1);
	assert_has(&d, "ar web.default.svc.cluster.local. 5 A 10.96.0.20");
	expect_answer(r, "_dns._udp.web.default.svc." ZONE, NDC_T_SRV, 1, &d);
	assert_has(&d, "an _dns._udp.web.default.svc.cluster.local. 5 SRV 0 100 53 "
		       "web.default.svc.cluster.local.");
	NXDOMAIN(r, "_http._udp.web.default.svc." ZONE, NDC_T_SRV);
	NODATA(r, "_tcp.web.default.svc." ZONE, NDC_T_SRV); /* empty non-terminal */
	NODATA(r, "_http._tcp.web.default.svc." ZONE, NDC_T_A);
	expect_answer(r, "_https._tcp.dual.default.svc." ZONE, NDC_T_SRV, 1, &d);
	assert_int_equal(d.ar, 2);
	assert_has(&d, "ar dual.default.svc.cluster.local. 5 A 10.96.0.30");
	assert_has(&d, "ar dual.default.svc.cluster.local. 5 AAAA fd00:96::30");
	/* SRV at the service name (CoreDNS): every port, the unnamed 8080 too */
	expect_answer(r, "web.default.svc." ZONE, NDC_T_SRV, 3, &d);
	assert_has(&d, "an web.default.svc.cluster.local. 5 SRV 0 100 80 "
		       "web.default.svc.cluster.local.");
	assert_has(&d, "an web.default.svc.cluster.local. 5 SRV 0 100 53 "
		       "web.default.svc.cluster.local.");
	assert_has(&d, "an web.default.svc.cluster.local. 5 SRV 0 100 8080 "
		       "web.default.svc.cluster.local.");
	assert_int_equal(d.ar, 1); /* one target, listed once */
	/* spec 2.3.2: an unnamed port has no _<port>._<proto> name */
	NXDOMAIN(r, "_._tcp.web.default.svc." ZONE, NDC_T_SRV);
	NXDOMAIN(r, "_8080._tcp.web.default.svc." ZONE, NDC_T_SRV);
	ndc_records_free(r);
}

static void test_srv_headless(void **state)
{
	struct ndc_records *r = build_default();
	struct dec d;

	(void)state;
	expect_answer(r, "_mysql._tcp.db.default.svc." ZONE, NDC_T_SRV, 3, &d);
	assert_has(&d, "an _mysql._tcp.db.default.svc.cluster.local. 5 SRV 0 33 3306 "
		       "10-244-1-5.db.default.svc.cluster.local.");
	assert_has(&d, "an _mysql._tcp.db.default.svc.cluster.local. 5 SRV 0 33 3306 "
		       "primary.db.default.svc.cluster.local.");
	assert_has(&d, "an _mysql._tcp.db.default.svc.cluster.local. 5 SRV 0 33 3306 "
		       "fd00-10-244--5.db.default.svc.cluster.local.");
	assert_int_equal(d.ar, 3);
	assert_has(&d, "ar 10-244-1-5.db.default.svc.cluster.local. 5 A 10.244.1.5");
	assert_has(&d, "ar primary.db.default.svc.cluster.local. 5 A 10.244.1.6");
	assert_has(&d, "ar fd00-10-244--5.db.default.svc.cluster.local. 5 AAAA fd00:10:244::5");
	expect_answer(r, "db.default.svc." ZONE, NDC_T_SRV, 3, &d);
	assert_has(&d, "an db.default.svc.cluster.local. 5 SRV 0 33 3306 "
		       "primary.db.default.svc.cluster.local.");
	/* pnr has no named ports: no SRV */
	NODATA(r, "pnr.default.svc." ZONE, NDC_T_SRV);
	ndc_records_free(r);
}

static void test_external_name(void **state)
{
	struct ndc_records *r = build_default();
	static const uint16_t types[] = {NDC_T_A, NDC_T_AAAA, NDC_T_CNAME, NDC_T_SRV, NDC_T_ANY};
	struct dec d;

	(void)state;
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		expect_answer(r, "ext.default.svc." ZONE, types[i], 1, &d);
		assert_has(&d, "an ext.default.svc.cluster.local. 5 CNAME example.com.");
		assert_int_equal(d.ns + d.ar, 0); /* not chased */
	}
	NXDOMAIN(r, "x.ext.default.svc." ZONE, NDC_T_A);
	ndc_records_free(r);
}

/*
 * Issue 14, ExternalName services whose target is a name of the zone: the alias is followed
 * inside the zone as CoreDNS does (glibc does not ask again for a CNAME's target).
 */
static size_t foreach_checked(const struct ndc_records *r);
static void lazy_matches_eager(const struct ndc_k8s_objects *objs, int min_srv, int min_ptr);

static const char *const alias_pairs[][2] = {
    {"to-svc", "svc1.ns.svc." ZONE},
    {"to-upper", "SVC1.Ns.svc.Cluster.LOCAL."},
    {"chain2", "to-svc.ns.svc." ZONE},
    {"to-hl", "hl.ns.svc." ZONE},
    {"to-host", "h.hl.ns.svc." ZONE},
    {"to-srv", "_http._tcp.hl.ns.svc." ZONE},
    {"to-nx", "nosuch.ns.svc." ZONE},
    {"to-ns", "ns.svc." ZONE},
    {"to-apex", ZONE},
    {"to-txt", "dns-version." ZONE},
    {"loop-a", "loop-b.ns.svc." ZONE},
    {"loop-b", "loop-a.ns.svc." ZONE},
    {"self", "self.ns.svc." ZONE},
    {"to-ext", "ext.ns.svc." ZONE},
    {"ext", "www.example.com"},
    {"to-pod", "10-244-7-7.ns.pod." ZONE},
    {"to-other", "svc-x.other.svc." ZONE},
    {"c0", "c1.ns.svc." ZONE},
    {"c1", "c2.ns.svc." ZONE},
    {"c2", "c3.ns.svc." ZONE},
    {"c3", "c4.ns.svc." ZONE},
    {"c4", "c5.ns.svc." ZONE},
    {"c5", "c6.ns.svc." ZONE},
    {"c6", "c7.ns.svc." ZONE},
    {"c7", "c8.ns.svc." ZONE},
    {"c8", "c9.ns.svc." ZONE},
    {"c9", "svc1.ns.svc." ZONE},
};
#define N_ALIAS (sizeof(alias_pairs) / sizeof(alias_pairs[0]))

static struct ndc_k8s_service alias_svcs[N_ALIAS + 4];
static struct ndc_k8s_slice alias_slice;
static struct ndc_k8s_endpoint alias_eps[2];
static struct ndc_k8s_port alias_ports[] = {{"http", 80, IPPROTO_TCP}, {NULL, 8080, IPPROTO_TCP}};
static struct ndc_k8s_port alias_ep_port[] = {{"http", 8080, IPPROTO_TCP}};
static char *alias_nss[] = {"ns", "other"};
static struct ndc_k8s_objects alias_objs;

static struct ndc_records *alias_build(struct ndc_records_opts *o)
{
	struct ndc_records *r = NULL;

	if (!alias_objs.n_services) {
		size_t n = 0;

		alias_svcs[n] = svc("ns", "svc1", "10.96.1.1", "fd00:96::1");
		alias_svcs[n].ports = alias_ports;
		alias_svcs[n++].n_ports = 2;
		alias_svcs[n] = svc("ns", "hl", NULL, NULL);
		alias_svcs[n].ports = alias_ep_port;
		alias_svcs[n++].n_ports = 1;
		alias_svcs[n++] = svc("ns", "v4only", "10.96.1.2", NULL);
		alias_svcs[n++] = svc("other", "svc-x", "10.96.1.3", NULL);
		for (size_t i = 0; i < N_ALIAS; i++) {
			alias_svcs[n] = svc("ns", alias_pairs[i][0], NULL, NULL);
			alias_svcs[n].headless = false;
			alias_svcs[n].type = NDC_SVC_EXTERNAL_NAME;
			alias_svcs[n++].external_name = (char *)alias_pairs[i][1];
		}
		alias_eps[0] = ep("10.244.5.1", "h", NULL, true);
		alias_eps[1] = ep("10.244.5.2", NULL, NULL, true);
		alias_slice = slice("hl", AF_INET, alias_eps, 2, alias_ep_port, 1);
		alias_slice.ns = "ns";
		alias_objs.namespaces = alias_nss;
		alias_objs.n_namespaces = 2;
		alias_objs.services = alias_svcs;
		alias_objs.n_services = n;
		alias_objs.slices = &alias_slice;
		alias_objs.n_slices = 1;
	}
	assert_int_equal(ndc_records_build(&alias_objs, o, &r), 0);
	return r;
}

#define SVC1 "svc1.ns.svc.cluster.local."

/* The chain's n aliases and NXDOMAIN for its last name, SOA in authority (RFC 6604 3). */
static void expect_alias_nx(const struct ndc_records *r, const char *name, uint16_t type, int n,
			    struct dec *d)
{
	assert_int_equal(q(r, name, type, d), 0);
	if (d->an != n || d->rcode != NDC_RCODE_NXDOMAIN || d->ns != 1 || d->ar) {
		dump(d);
		fail_msg("%s type %u: %d answers rcode %u, want %d aliases and NXDOMAIN", name,
			 type, d->an, d->rcode, n);
	}
	for (int i = 0; i < n; i++)
		assert_int_equal(d->type[i], NDC_T_CNAME);
	assert_int_equal(d->type[n], NDC_T_SOA);
	assert_int_equal(d->aa, 1);
}

static bool has_q(const struct ndc_records *r, const char *name, uint16_t type)
{
	uint8_t w[NDC_NAME_MAX];
	size_t l = wire(name, w);

	return ndc_records_has(r, w, l, type);
}

static void test_alias_in_zone(void **state)
{
	static const uint16_t types[] = {NDC_T_A, NDC_T_AAAA, NDC_T_SRV, NDC_T_TXT, NDC_T_MX};
	struct ndc_records_opts o;
	struct ndc_records *r;
	struct dec d;

	(void)state;
	opts_init(&o);
	r = alias_build(&o);
	expect_answer(r, "to-svc.ns.svc." ZONE, NDC_T_A, 2, &d);
	assert_string_equal(d.line[0], "an to-svc.ns.svc.cluster.local. 5 CNAME " SVC1);
	assert_string_equal(d.line[1], "an " SVC1 " 5 A 10.96.1.1");
	assert_int_equal(d.ns + d.ar, 0);
	assert_int_equal(d.min_ttl, 5);
	expect_answer(r, "to-svc.ns.svc." ZONE, NDC_T_AAAA, 2, &d);
	assert_string_equal(d.line[1], "an " SVC1 " 5 AAAA fd00:96::1");
	/* SRV at the target, its addresses in additional */
	expect_answer(r, "to-svc.ns.svc." ZONE, NDC_T_SRV, 3, &d);
	assert_has(&d, "an " SVC1 " 5 SRV 0 100 80 " SVC1);
	assert_has(&d, "an " SVC1 " 5 SRV 0 100 8080 " SVC1);
	assert_int_equal(d.ar, 2);
	assert_has(&d, "ar " SVC1 " 5 A 10.96.1.1");
	/* the target lacks the type: the alias and NODATA, SOA in authority (RFC 2308 2.2) */
	expect_answer(r, "to-svc.ns.svc." ZONE, NDC_T_TXT, 1, &d);
	assert_int_equal(d.ns, 1);
	assert_int_equal(d.type[1], NDC_T_SOA);
	/* CNAME and ANY are answered by the alias itself (RFC 1034 4.3.2, RFC 8482) */
	expect_answer(r, "to-svc.ns.svc." ZONE, NDC_T_CNAME, 1, &d);
	assert_int_equal(d.ns + d.ar, 0);
	expect_answer(r, "to-svc.ns.svc." ZONE, NDC_T_ANY, 1, &d);
	assert_int_equal(d.type[0], NDC_T_CNAME);
	expect_answer(r, "to-upper.ns.svc." ZONE, NDC_T_A, 2, &d); /* targets compare lowercase */
	assert_has(&d, "an " SVC1 " 5 A 10.96.1.1");
	/* chains, headless targets, endpoint names, SRV names */
	expect_answer(r, "chain2.ns.svc." ZONE, NDC_T_A, 3, &d);
	assert_string_equal(d.line[0],
			    "an chain2.ns.svc.cluster.local. 5 CNAME to-svc.ns.svc.cluster.local.");
	assert_string_equal(d.line[1], "an to-svc.ns.svc.cluster.local. 5 CNAME " SVC1);
	assert_string_equal(d.line[2], "an " SVC1 " 5 A 10.96.1.1");
	expect_answer(r, "to-hl.ns.svc." ZONE, NDC_T_A, 3, &d);
	assert_has(&d, "an hl.ns.svc.cluster.local. 5 A 10.244.5.1");
	assert_has(&d, "an hl.ns.svc.cluster.local. 5 A 10.244.5.2");
	expect_answer(r, "to-host.ns.svc." ZONE, NDC_T_A, 2, &d);
	assert_has(&d, "an h.hl.ns.svc.cluster.local. 5 A 10.244.5.1");
	expect_answer(r, "to-srv.ns.svc." ZONE, NDC_T_SRV, 3, &d);
	assert_has(&d, "an _http._tcp.hl.ns.svc.cluster.local. 5 SRV 0 50 8080 "
		       "h.hl.ns.svc.cluster.local.");
	assert_has(&d, "ar 10-244-5-2.hl.ns.svc.cluster.local. 5 A 10.244.5.2");
	/* a target that does not exist: the alias, NXDOMAIN (RFC 6604 3), SOA */
	expect_alias_nx(r, "to-nx.ns.svc." ZONE, NDC_T_A, 1, &d);
	expect_answer(r, "to-ns.ns.svc." ZONE, NDC_T_A, 1, &d); /* an empty non-terminal */
	assert_int_equal(d.ns, 1);
	/* the apex's names */
	expect_answer(r, "to-apex.ns.svc." ZONE, NDC_T_SOA, 2, &d);
	assert_int_equal(d.type[1], NDC_T_SOA);
	expect_answer(r, "to-apex.ns.svc." ZONE, NDC_T_NS, 2, &d);
	assert_has(&d, "an cluster.local. 5 NS ns.dns.cluster.local.");
	assert_has(&d, "ar ns.dns.cluster.local. 5 A 169.254.20.10");
	expect_answer(r, "to-txt.ns.svc." ZONE, NDC_T_TXT, 2, &d);
	assert_has(&d, "an dns-version.cluster.local. 5 TXT \"1.1.0\"");
	/* loops stop where they come back, the aliases alone */
	expect_answer(r, "loop-a.ns.svc." ZONE, NDC_T_A, 2, &d);
	assert_int_equal(d.ns + d.ar, 0);
	assert_string_equal(d.line[1], "an loop-b.ns.svc.cluster.local. 5 CNAME "
				       "loop-a.ns.svc.cluster.local.");
	expect_answer(r, "self.ns.svc." ZONE, NDC_T_A, 1, &d);
	/* a chain that leaves the zone ends there; an alias out of the zone is the CNAME alone */
	expect_answer(r, "to-ext.ns.svc." ZONE, NDC_T_A, 2, &d);
	assert_string_equal(d.line[1], "an ext.ns.svc.cluster.local. 5 CNAME www.example.com.");
	expect_answer(r, "ext.ns.svc." ZONE, NDC_T_A, 1, &d);
	/* at most 8 aliases: c2 reaches svc1 in 8, c1 would need 9 */
	expect_answer(r, "c2.ns.svc." ZONE, NDC_T_A, 9, &d);
	assert_string_equal(d.line[8], "an " SVC1 " 5 A 10.96.1.1");
	expect_answer(r, "c1.ns.svc." ZONE, NDC_T_A, 8, &d);
	assert_int_equal(d.type[7], NDC_T_CNAME);
	/* pods disabled: a pod name is NXDOMAIN; a namespace outside the table too */
	expect_alias_nx(r, "to-pod.ns.svc." ZONE, NDC_T_A, 1, &d);
	expect_answer(r, "to-other.ns.svc." ZONE, NDC_T_A, 2, &d);
	/* nothing below an alias */
	NXDOMAIN(r, "x.to-svc.ns.svc." ZONE, NDC_T_A);

	/* What the fast path is given for each type: what the socket path answers. */
	foreach_checked(r);
	assert_true(has_q(r, "to-svc.ns.svc." ZONE, NDC_T_A));
	assert_true(has_q(r, "to-svc.ns.svc." ZONE, NDC_T_AAAA));
	assert_true(has_q(r, "to-svc.ns.svc." ZONE, NDC_T_SRV));
	assert_false(has_q(r, "to-svc.ns.svc." ZONE, NDC_T_TXT)); /* the other-type entry */
	assert_true(has_q(r, "to-svc.ns.svc." ZONE, 0));
	assert_true(has_q(r, "to-apex.ns.svc." ZONE, NDC_T_SOA));
	assert_false(has_q(r, "to-nx.ns.svc." ZONE, NDC_T_A));
	assert_false(has_q(r, "loop-a.ns.svc." ZONE, NDC_T_A));
	assert_false(has_q(r, "ext.ns.svc." ZONE, NDC_T_A));
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		expect_alias_nx(r, "to-nx.ns.svc." ZONE, types[i], 1, &d);
	ndc_records_free(r);

	/* pods: insecure makes the pod name at lookup; the alias is followed there too */
	o.pods = NDC_PODS_INSECURE;
	r = alias_build(&o);
	expect_answer(r, "to-pod.ns.svc." ZONE, NDC_T_A, 2, &d);
	assert_has(&d, "an 10-244-7-7.ns.pod.cluster.local. 5 A 10.244.7.7");
	expect_answer(r, "to-pod.ns.svc." ZONE, NDC_T_AAAA, 1, &d);
	assert_int_equal(d.ns, 1);
	assert_true(has_q(r, "to-pod.ns.svc." ZONE, NDC_T_A));
	assert_false(has_q(r, "to-pod.ns.svc." ZONE, NDC_T_AAAA));
	foreach_checked(r);
	ndc_records_free(r);

	/* records.namespaces: a service outside them does not exist, for an alias neither */
	char *only[] = {"ns"};
	o.pods = NDC_PODS_DISABLED;
	o.n_namespaces = 1;
	o.namespaces = only;
	r = alias_build(&o);
	expect_alias_nx(r, "to-other.ns.svc." ZONE, NDC_T_A, 1, &d);
	NXDOMAIN(r, "svc-x.other.svc." ZONE, NDC_T_A);
	NXDOMAIN(r, "other.svc." ZONE, NDC_T_A);
	expect_enoent(r, "3.1.96.10.in-addr.arpa", NDC_T_PTR);
	ndc_records_free(r);

	/* The eager table and the lazy one agree on chased answers too (SRV made at lookup). */
	lazy_matches_eager(&alias_objs, 2, 4);
}

/* ttl 0 (CoreDNS allows it: nothing is cached): every TTL is 0, the SOA minimum too. */
static void test_ttl_zero(void **state)
{
	struct ndc_records_opts o;
	struct ndc_records *r;
	unsigned minimum;
	struct dec d;

	(void)state;
	opts_init(&o);
	o.ttl = 0;
	r = alias_build(&o);
	expect_answer(r, "to-svc.ns.svc." ZONE, NDC_T_SRV, 3, &d);
	for (int i = 0; i < d.n; i++)
		assert_int_equal(d.ttl[i], 0);
	assert_int_equal(d.min_ttl, 0);
	expect_negative(r, "nosuch.ns.svc." ZONE, NDC_T_A, NDC_RCODE_NXDOMAIN, 0);
	expect_negative(r, "v4only.ns.svc." ZONE, NDC_T_AAAA, NDC_RCODE_NOERROR, 0);
	expect_answer(r, ZONE, NDC_T_SOA, 1, &d);
	assert_int_equal(sscanf(d.line[0],
				"an cluster.local. 0 SOA ns.dns.cluster.local. "
				"hostmaster.cluster.local. %*u %*u %*u %*u %u",
				&minimum),
			 1);
	assert_int_equal(minimum, 0);
	foreach_checked(r);
	ndc_records_free(r);
}

/* RFC 8020: a name with names below it is NOERROR with no records, never NXDOMAIN. */
struct ent_walk {
	const struct ndc_records *r;
	size_t zlen, checked;
};

static int ent_fn(void *arg, const uint8_t *lname, size_t nlen, uint16_t qtype,
		  const struct ndc_answer *a)
{
	static union {
		struct ndc_answer a;
		uint8_t b[sizeof(struct ndc_answer) + NDC_MSG_MAX];
	} got;
	struct ent_walk *w = arg;

	(void)qtype, (void)a;
	if (!ndc_records_is_local(w->r, lname, nlen))
		return 0;
	/* every ancestor up to the apex: NOERROR for any type, and in the fast path's table */
	while (nlen > w->zlen) {
		nlen -= lname[0] + 1u;
		lname += lname[0] + 1u;
		assert_int_equal(
		    ndc_records_lookup(w->r, lname, nlen, NDC_T_A, &got.a, NDC_MSG_MAX), 0);
		assert_int_equal(got.a.rcode, NDC_RCODE_NOERROR);
		assert_true(ndc_records_has(w->r, lname, nlen, 0));
		w->checked++;
	}
	return 0;
}

static void ents_hold(const struct ndc_records *r)
{
	struct ent_walk w = {.r = r, .zlen = strlen(ZONE) + 2};

	assert_int_equal(ndc_records_foreach(r, ent_fn, &w), 0);
	assert_true(w.checked > 20);
}

static void test_empty_non_terminals(void **state)
{
	static const enum ndc_pods_mode modes[] = {NDC_PODS_DISABLED, NDC_PODS_INSECURE,
						   NDC_PODS_VERIFIED};
	static const uint16_t types[] = {NDC_T_A,  NDC_T_AAAA,	NDC_T_SRV, NDC_T_TXT,
					 NDC_T_MX, NDC_T_CNAME, NDC_T_ANY};
	static const char *const ents[] = {
	    "svc." ZONE,
	    "pod." ZONE,
	    "dns." ZONE,
	    "default.svc." ZONE,
	    "empty-ns.svc." ZONE, /* a Namespace alone */
	    "other.svc." ZONE,	  /* services alone */
	    "_tcp.web.default.svc." ZONE,
	    "_udp.web.default.svc." ZONE,
	    "_tcp.db.default.svc." ZONE,
	};
	struct ndc_records_opts o;
	struct ndc_records *r;
	uint8_t w[NDC_NAME_MAX];

	(void)state;
	for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
		opts_init(&o);
		o.pods = modes[m];
		r = build(&o);
		for (size_t i = 0; i < sizeof(ents) / sizeof(ents[0]); i++) {
			for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++)
				NODATA(r, ents[i], types[t]);
			assert_true(ndc_records_has(r, w, wire(ents[i], w), 0));
		}
		if (modes[m] != NDC_PODS_DISABLED) {
			NODATA(r, "default.pod." ZONE, NDC_T_A);
			NODATA(r, "other.pod." ZONE, NDC_T_A);
		} else {
			NXDOMAIN(r, "default.pod." ZONE, NDC_T_A);
		}
		ents_hold(r);
		ndc_records_free(r);
		o.pods = modes[m];
		r = alias_build(&o);
		ents_hold(r);
		ndc_records_free(r);
	}
}

/* Issue 14: an address several services' endpoints share has one PTR per (service, endpoint). */
static void test_ptr_shared(void **state)
{
	static struct ndc_k8s_endpoint e_a[1], e_b[2], e_c[1], e_d[1];
	static struct ndc_k8s_slice sl[5];
	static char *nsl[] = {"ns", "other"};
	struct ndc_k8s_service sv[4] = {svc("ns", "a", NULL, NULL),
					svc("ns", "b", "10.96.2.1", NULL),
					svc("ns", "c", NULL, NULL), svc("other", "d", NULL, NULL)};
	struct ndc_k8s_objects oo = {.namespaces = nsl,
				     .n_namespaces = 2,
				     .services = sv,
				     .n_services = 4,
				     .slices = sl,
				     .n_slices = 5};
	const char *rev = "5.0.244.10.in-addr.arpa";
	struct ndc_records_opts o;
	struct ndc_records *r;
	struct dec d;

	(void)state;
	e_a[0] = ep("10.244.0.5", "h", "pod-5", true);
	e_b[0] = ep("10.244.0.5", NULL, "pod-5", true);
	e_b[1] = ep("10.244.0.6", NULL, "pod-6", true);
	e_c[0] = ep("10.244.0.5", NULL, "pod-5", true);
	e_d[0] = ep("10.244.0.5", NULL, "pod-5", true);
	sl[0] = slice("a", AF_INET, e_a, 1, NULL, 0);
	sl[1] = slice("b", AF_INET, e_b, 2, NULL, 0);
	sl[2] = slice("b", AF_INET, e_b, 1, NULL, 0); /* the same endpoint in a second slice */
	sl[3] = slice("c", AF_INET, e_c, 1, NULL, 0);
	sl[4] = slice("d", AF_INET, e_d, 1, NULL, 0);
	for (int i = 0; i < 4; i++)
		sl[i].ns = "ns";
	sl[4].ns = "other";
	for (int all = 0; all < 2; all++) {
		opts_init(&o);
		o.render_all = all;
		assert_int_equal(ndc_records_build(&oo, &o, &r), 0);
		expect_answer(r, rev, NDC_T_PTR, 4, &d);
		assert_has(&d, "an 5.0.244.10.in-addr.arpa. 5 PTR h.a.ns.svc.cluster.local.");
		assert_has(&d,
			   "an 5.0.244.10.in-addr.arpa. 5 PTR 10-244-0-5.b.ns.svc.cluster.local.");
		assert_has(&d,
			   "an 5.0.244.10.in-addr.arpa. 5 PTR 10-244-0-5.c.ns.svc.cluster.local.");
		assert_has(&d, "an 5.0.244.10.in-addr.arpa. 5 PTR "
			       "10-244-0-5.d.other.svc.cluster.local.");
		expect_answer(r, "6.0.244.10.in-addr.arpa", NDC_T_PTR, 1, &d);
		expect_answer(r, "1.2.96.10.in-addr.arpa", NDC_T_PTR, 1, &d);
		foreach_checked(r);
		ndc_records_free(r);
	}
	/* endpoint_pod_names: the pod names, still one per service */
	opts_init(&o);
	o.endpoint_pod_names = true;
	assert_int_equal(ndc_records_build(&oo, &o, &r), 0);
	expect_answer(r, rev, NDC_T_PTR, 4, &d);
	assert_has(&d, "an 5.0.244.10.in-addr.arpa. 5 PTR pod-5.b.ns.svc.cluster.local.");
	assert_has(&d, "an 5.0.244.10.in-addr.arpa. 5 PTR h.a.ns.svc.cluster.local.");
	ndc_records_free(r);
}

static void test_ptr(void **state)
{
	struct ndc_records *r = build_default();
	struct dec d;

	(void)state;
	expect_answer(r, "20.0.96.10.in-addr.arpa", NDC_T_PTR, 1, &d);
	assert_has(&d, "an 20.0.96.10.in-addr.arpa. 5 PTR web.default.svc.cluster.local.");
	expect_answer(r, "0.3.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.0.d.f.ip6.arpa",
		      NDC_T_PTR, 1, &d);
	assert_has(&d, "an 0.3.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.0.d.f.ip6."
		       "arpa. 5 PTR dual.default.svc.cluster.local.");
	expect_answer(r, "6.1.244.10.in-addr.arpa", NDC_T_PTR, 1, &d);
	assert_has(&d, "an 6.1.244.10.in-addr.arpa. 5 PTR primary.db.default.svc.cluster.local.");
	ndc_records_free(r);
}

static void test_ptr_details(void **state)
{
	struct ndc_records_opts o;
	struct ndc_records *r;
	struct dec d;

	(void)state;
	opts_init(&o);
	r = build(&o);
	expect_answer(r, "1.3.244.10.in-addr.arpa", NDC_T_PTR, 1, &d);
	assert_has(&d,
		   "an 1.3.244.10.in-addr.arpa. 5 PTR 10-244-3-1.web.default.svc.cluster.local.");
	expect_answer(r, "5.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.4.4.2.0.0.1.0.0.0.0.d.f.ip6.arpa",
		      NDC_T_PTR, 1, &d);
	assert_has(&d, "an 5.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.4.4.2.0.0.1.0.0.0.0.d.f.ip6."
		       "arpa. 5 PTR fd00-10-244--5.db.default.svc.cluster.local.");
	expect_enoent(r, "7.1.244.10.in-addr.arpa", NDC_T_PTR); /* not ready: no PTR */
	expect_enoent(r, "20.0.96.10.in-addr.arpa", NDC_T_A);	/* known, other type */
	expect_enoent(r, "99.0.96.10.in-addr.arpa", NDC_T_PTR); /* unknown: forwarded */
	expect_enoent(r, "0.96.10.in-addr.arpa", NDC_T_PTR);
	ndc_records_free(r);

	/* Several names for one IP: all PTRs returned. */
	struct ndc_k8s_service two[2] = {svc("default", "a", "10.96.1.1", NULL),
					 svc("default", "b", "10.96.1.1", NULL)};
	struct ndc_k8s_objects oo = {.services = two, .n_services = 2};
	assert_int_equal(ndc_records_build(&oo, &o, &r), 0);
	expect_answer(r, "1.1.96.10.in-addr.arpa", NDC_T_PTR, 2, &d);
	assert_has(&d, "an 1.1.96.10.in-addr.arpa. 5 PTR a.default.svc.cluster.local.");
	assert_has(&d, "an 1.1.96.10.in-addr.arpa. 5 PTR b.default.svc.cluster.local.");
	ndc_records_free(r);
}

static void test_apex(void **state)
{
	struct ndc_records *r = build_default();
	struct dec d;
	unsigned serial, refresh, retry, expire, minimum;
	time_t now = time(NULL);

	(void)state;
	expect_answer(r, ZONE, NDC_T_SOA, 1, &d);
	assert_int_equal(sscanf(d.line[0],
				"an cluster.local. 5 SOA ns.dns.cluster.local. "
				"hostmaster.cluster.local. %u %u %u %u %u",
				&serial, &refresh, &retry, &expire, &minimum),
			 5);
	assert_true(serial + 60 >= (unsigned)now && serial <= (unsigned)now);
	assert_int_equal(refresh, 7200);
	assert_int_equal(retry, 1800);
	assert_int_equal(expire, 86400);
	assert_int_equal(minimum, 5);
	expect_answer(r, ZONE, NDC_T_NS, 1, &d);
	assert_has(&d, "an cluster.local. 5 NS ns.dns.cluster.local.");
	assert_int_equal(d.ar, 2);
	assert_has(&d, "ar ns.dns.cluster.local. 5 A 169.254.20.10");
	assert_has(&d, "ar ns.dns.cluster.local. 5 AAAA fd00::53");
	expect_answer(r, "ns.dns." ZONE, NDC_T_A, 1, &d);
	assert_has(&d, "an ns.dns.cluster.local. 5 A 169.254.20.10");
	expect_answer(r, "ns.dns." ZONE, NDC_T_AAAA, 1, &d);
	NODATA(r, "dns." ZONE, NDC_T_A);
	expect_answer(r, "dns-version." ZONE, NDC_T_TXT, 1, &d);
	assert_has(&d, "an dns-version.cluster.local. 5 TXT \"1.1.0\"");
	NODATA(r, "dns-version." ZONE, NDC_T_A);
	ndc_records_free(r);
}

static void test_negative(void **state)
{
	struct ndc_records *r = build_default();

	(void)state;
	NODATA(r, ZONE, NDC_T_A);
	NODATA(r, ZONE, NDC_T_AAAA);
	NODATA(r, "svc." ZONE, NDC_T_A);
	NODATA(r, "svc." ZONE, NDC_T_SOA);
	NODATA(r, "default.svc." ZONE, NDC_T_A);
	NODATA(r, "empty-ns.svc." ZONE, NDC_T_A); /* a Namespace with no services */
	NXDOMAIN(r, "nosuch.svc." ZONE, NDC_T_A);
	NXDOMAIN(r, "nosuch.default.svc." ZONE, NDC_T_A);
	NXDOMAIN(r, "nosuch.default.svc." ZONE, NDC_T_AAAA);
	NXDOMAIN(r, "api.example.com.default.svc." ZONE, NDC_T_A);
	NXDOMAIN(r, "x.default.svc." ZONE ".svc." ZONE, NDC_T_A);
	NXDOMAIN(r, "web.default.svc." ZONE ".default.svc." ZONE, NDC_T_AAAA);
	NXDOMAIN(r, "web.default." ZONE, NDC_T_A);
	NODATA(r, "pod." ZONE, NDC_T_A); /* RFC 8020: pods disabled, the label still exists */
	NODATA(r, "pod." ZONE, NDC_T_ANY);
	NXDOMAIN(r, "default.pod." ZONE, NDC_T_A); /* nothing below it with pods disabled */
	NXDOMAIN(r, "bad_name.default.svc." ZONE, NDC_T_A); /* skipped at build */
	NXDOMAIN(r, "www." ZONE, NDC_T_A);
	ndc_records_free(r);
}

static void test_outside_zone(void **state)
{
	struct ndc_records *r = build_default();
	uint8_t w[NDC_NAME_MAX];

	(void)state;
	expect_enoent(r, "example.com", NDC_T_A);
	expect_enoent(r, "local", NDC_T_A);
	expect_enoent(r, "xcluster.local", NDC_T_A);
	expect_enoent(r, ".", NDC_T_NS);
	assert_true(ndc_records_is_local(r, w, wire("a.b.cluster.local", w)));
	assert_true(ndc_records_is_local(r, w, wire(ZONE, w)));
	assert_false(ndc_records_is_local(r, w, wire("xcluster.local", w)));
	assert_false(ndc_records_is_local(r, w, wire("1.0.96.10.in-addr.arpa", w)));
	ndc_records_free(r);
}

static void test_pods_insecure(void **state)
{
	struct ndc_records_opts o;
	struct ndc_records *r;
	struct dec d;

	(void)state;
	opts_init(&o);
	o.pods = NDC_PODS_INSECURE;
	r = build(&o);
	expect_answer(r, "1-2-3-4.default.pod." ZONE, NDC_T_A, 1, &d);
	assert_has(&d, "an 1-2-3-4.default.pod.cluster.local. 5 A 1.2.3.4");
	expect_answer(r, "1-2-3-4.empty-ns.pod." ZONE, NDC_T_A, 1, &d);
	NODATA(r, "1-2-3-4.default.pod." ZONE, NDC_T_AAAA);
	expect_answer(r, "fd00--1.default.pod." ZONE, NDC_T_AAAA, 1, &d);
	assert_has(&d, "an fd00--1.default.pod.cluster.local. 5 AAAA fd00::1");
	expect_answer(r, "fd00-0-0-0-0-0-0-2.default.pod." ZONE, NDC_T_AAAA, 1, &d);
	assert_has(&d, "an fd00-0-0-0-0-0-0-2.default.pod.cluster.local. 5 AAAA fd00::2");
	NODATA(r, "fd00--1.default.pod." ZONE, NDC_T_A);
	NXDOMAIN(r, "1-2-3.default.pod." ZONE, NDC_T_A);
	NXDOMAIN(r, "1-2-3-400.default.pod." ZONE, NDC_T_A);
	NXDOMAIN(r, "pod-a.default.pod." ZONE, NDC_T_A);
	NXDOMAIN(r, "1-2-3-4.nosuch.pod." ZONE, NDC_T_A);
	NXDOMAIN(r, "x.1-2-3-4.default.pod." ZONE, NDC_T_A);
	NODATA(r, "default.pod." ZONE, NDC_T_A);
	NODATA(r, "pod." ZONE, NDC_T_A);
	ndc_records_free(r);
}

static void test_pods_verified(void **state)
{
	struct ndc_records_opts o;
	struct ndc_records *r;
	struct dec d;

	(void)state;
	opts_init(&o);
	o.pods = NDC_PODS_VERIFIED;
	r = build(&o);
	expect_answer(r, "10-244-1-5.default.pod." ZONE, NDC_T_A, 1, &d);
	assert_has(&d, "an 10-244-1-5.default.pod.cluster.local. 5 A 10.244.1.5");
	expect_answer(r, "fd00-10-244--5.default.pod." ZONE, NDC_T_AAAA, 1, &d);
	assert_has(&d, "an fd00-10-244--5.default.pod.cluster.local. 5 AAAA fd00:10:244::5");
	NXDOMAIN(r, "10-244-1-6.default.pod." ZONE, NDC_T_A); /* no such pod */
	NXDOMAIN(r, "10-244-1-5.other.pod." ZONE, NDC_T_A);   /* pod is in default */
	expect_answer(r, "10-244-9-9.other.pod." ZONE, NDC_T_A, 1, &d);
	NODATA(r, "default.pod." ZONE, NDC_T_A);
	NODATA(r, "empty-ns.pod." ZONE, NDC_T_A);
	ndc_records_free(r);

	opts_init(&o);
	o.pods = NDC_PODS_DISABLED;
	r = build(&o);
	NXDOMAIN(r, "10-244-1-5.default.pod." ZONE, NDC_T_A);
	NXDOMAIN(r, "fd00-10-244--5.default.pod." ZONE, NDC_T_AAAA);
	NXDOMAIN(r, "1-2-3-4.default.pod." ZONE, NDC_T_A);
	NXDOMAIN(r, "default.pod." ZONE, NDC_T_A);
	ndc_records_free(r);
}

static void test_namespaces_filter(void **state)
{
	char *only[] = {"default", "empty-ns"};
	struct ndc_records_opts o;
	struct ndc_records *r;
	struct dec d;

	(void)state;
	opts_init(&o);
	o.n_namespaces = 2;
	o.namespaces = only;
	o.pods = NDC_PODS_INSECURE;
	r = build(&o);
	expect_answer(r, "web.default.svc." ZONE, NDC_T_A, 1, &d);
	NODATA(r, "empty-ns.svc." ZONE, NDC_T_A);
	NXDOMAIN(r, "svc1.other.svc." ZONE, NDC_T_A);
	NXDOMAIN(r, "other.svc." ZONE, NDC_T_A);
	NXDOMAIN(r, "kube-dns.kube-system.svc." ZONE, NDC_T_A);
	NXDOMAIN(r, "1-2-3-4.other.pod." ZONE, NDC_T_A);
	expect_answer(r, "1-2-3-4.default.pod." ZONE, NDC_T_A, 1, &d);
	expect_enoent(r, "50.0.96.10.in-addr.arpa", NDC_T_PTR);
	expect_answer(r, "20.0.96.10.in-addr.arpa", NDC_T_PTR, 1, &d);
	ndc_records_free(r);
}

static void test_ignore_empty_service(void **state)
{
	struct ndc_records_opts o;
	struct ndc_records *r;
	struct dec d;

	(void)state;
	opts_init(&o);
	r = build(&o);
	expect_answer(r, "empty-cip.default.svc." ZONE, NDC_T_A, 1, &d);
	expect_answer(r, "40.0.96.10.in-addr.arpa", NDC_T_PTR, 1, &d);
	ndc_records_free(r);

	o.ignore_empty_service = true;
	r = build(&o);
	NXDOMAIN(r, "empty-cip.default.svc." ZONE, NDC_T_A);
	NXDOMAIN(r, "empty-hl.default.svc." ZONE, NDC_T_A);
	NXDOMAIN(r, "dual.default.svc." ZONE, NDC_T_A); /* no slices at all */
	expect_enoent(r, "40.0.96.10.in-addr.arpa", NDC_T_PTR);
	expect_answer(r, "web.default.svc." ZONE, NDC_T_A, 1, &d);
	expect_answer(r, "db.default.svc." ZONE, NDC_T_A, 2, &d);
	expect_answer(r, "ext.default.svc." ZONE, NDC_T_A, 1, &d); /* ExternalName unaffected */
	NODATA(r, "default.svc." ZONE, NDC_T_A);
	ndc_records_free(r);
}

static void test_ttl_and_enospc(void **state)
{
	struct ndc_records_opts o;
	struct ndc_records *r;
	uint8_t w[NDC_NAME_MAX];
	size_t l;
	struct dec d;

	(void)state;
	opts_init(&o);
	o.ttl = 30;
	r = build(&o);
	expect_answer(r, "_mysql._tcp.db.default.svc." ZONE, NDC_T_SRV, 3, &d);
	for (int i = 0; i < d.n; i++)
		assert_int_equal(d.ttl[i], 30);
	assert_int_equal(d.min_ttl, 30);
	expect_negative(r, "nosuch.default.svc." ZONE, NDC_T_A, NDC_RCODE_NXDOMAIN, 30);
	expect_negative(r, "web.default.svc." ZONE, NDC_T_AAAA, NDC_RCODE_NOERROR, 30);

	l = wire("db.default.svc." ZONE, w);
	assert_int_equal(ndc_records_lookup(r, w, l, NDC_T_A, &abuf.a, 10), -ENOSPC);
	assert_int_equal(ndc_records_lookup(r, w, l, NDC_T_A, &abuf.a, 2 * 16), 0);
	assert_int_equal(abuf.a.len, 2 * 16); /* owner compressed to the question */
	assert_int_equal(ndc_records_lookup(r, w, l, NDC_T_TXT, &abuf.a, 10), -ENOSPC);
	l = wire("nosuch." ZONE, w);
	assert_int_equal(ndc_records_lookup(r, w, l, NDC_T_A, &abuf.a, 10), -ENOSPC);
	ndc_records_free(r);

	opts_init(&o);
	o.zone = "Cluster.LOCAL."; /* the zone is matched in lowercase wire form */
	r = build(&o);
	expect_answer(r, "web.default.svc." ZONE, NDC_T_A, 1, &d);
	NODATA(r, "default.svc." ZONE, NDC_T_A);
	expect_answer(r, ZONE, NDC_T_SOA, 1, &d);
	ndc_records_free(r);

	o.zone = "bad..zone";
	assert_int_equal(ndc_records_build(&objs, &o, &r), -EINVAL);
	assert_null(r);
}

static void test_big_rrset(void **state)
{
	enum { N = 5000 };
	struct ndc_k8s_endpoint *eps = calloc(N, sizeof(*eps));
	struct ndc_ip *ips = calloc(N, sizeof(*ips));
	struct ndc_k8s_service s[2] = {svc("default", "big", NULL, NULL),
				       svc("default", "alias", NULL, NULL)};
	struct ndc_k8s_slice sl = slice("big", AF_INET, eps, N, mysql_port, 1);
	struct ndc_k8s_objects oo = {.services = s, .n_services = 2, .slices = &sl, .n_slices = 1};
	struct ndc_records_opts o;
	struct ndc_records *r;
	struct dec d;

	(void)state;
	assert_non_null(eps);
	assert_non_null(ips);
	s[1].headless = false;
	s[1].type = NDC_SVC_EXTERNAL_NAME;
	s[1].external_name = "_mysql._tcp.big.default.svc." ZONE;
	for (int i = 0; i < N; i++) {
		ips[i].family = AF_INET;
		ips[i].addr[0] = 10;
		ips[i].addr[1] = 1;
		ips[i].addr[2] = (uint8_t)(i >> 8);
		ips[i].addr[3] = (uint8_t)i;
		eps[i] = (struct ndc_k8s_endpoint){.n_addrs = 1, .addrs = &ips[i], .ready = true};
	}
	opts_init(&o);
	assert_int_equal(ndc_records_build(&oo, &o, &r), 0);
	/* 5000 A records do not fit one 64 KiB message: truncated to what does */
	uint8_t w[NDC_NAME_MAX];
	size_t l = wire("big.default.svc." ZONE, w);
	assert_int_equal(ndc_records_lookup(r, w, l, NDC_T_A, &abuf.a, NDC_MSG_MAX), 0);
	assert_true(abuf.a.ancount > 3000 && abuf.a.ancount < N);
	assert_int_equal(abuf.a.arcount, 0);
	/* the SRV set (5000 targets) keeps records, drops the additional section first */
	expect_answer(r, "10-1-0-7.big.default.svc." ZONE, NDC_T_A, 1, &d);
	l = wire("_mysql._tcp.big.default.svc." ZONE, w);
	assert_int_equal(ndc_records_lookup(r, w, l, NDC_T_SRV, &abuf.a, NDC_MSG_MAX), 0);
	assert_true(abuf.a.ancount > 500 && abuf.a.ancount < N);
	assert_int_equal(abuf.a.arcount, 0);
	assert_true(abuf.a.len <= NDC_MSG_MAX - NDC_DNS_HDR_LEN - 4 - 11);
	/* followed through an alias: the CNAME first, then as many of the set as fit */
	l = wire("alias.default.svc." ZONE, w);
	assert_int_equal(ndc_records_lookup(r, w, l, NDC_T_SRV, &abuf.a, NDC_MSG_MAX), 0);
	assert_true(abuf.a.ancount > 500 && abuf.a.ancount < N);
	assert_int_equal(abuf.a.arcount, 0);
	assert_true(abuf.a.len <= NDC_MSG_MAX - NDC_DNS_HDR_LEN - l - 4 - 11);
	assert_int_equal(ndc_get16(abuf.a.data + 2), NDC_T_CNAME);
	assert_int_equal(ndc_records_lookup(r, w, l, NDC_T_SRV, &abuf.a, 1000), -ENOSPC);
	ndc_records_free(r);
	free(ips);
	free(eps);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int env_int(const char *name, int def)
{
	const char *v = getenv(name);

	return v && atoi(v) > 0 ? atoi(v) : def;
}

/*
 * 10,000 services (every third headless), 3 endpoints each, one named port each. For sizing runs
 * NDC_SCALE_SERVICES and NDC_SCALE_HEADLESS_EVERY change the mix.
 */
static size_t foreach_checked(const struct ndc_records *r);

static void test_scale(void **state)
{
	enum { EPS = 3 };
	const int NS = env_int("NDC_SCALE_SERVICES", 10000);
	const int HL = env_int("NDC_SCALE_HEADLESS_EVERY", 3);
	struct ndc_k8s_objects oo = {0};
	struct ndc_records_opts o;
	struct ndc_records *r;
	struct ndc_ip *ips = calloc(NS * EPS, sizeof(*ips));
	struct ndc_k8s_endpoint *eps = calloc(NS * EPS, sizeof(*eps));
	char(*names)[32] = calloc(NS, sizeof(*names));
	char *nsn[] = {"ns0", "ns1", "ns2", "ns3", "ns4", "ns5", "ns6", "ns7", "ns8", "ns9"};
	struct dec d;
	char qn[128];

	(void)state;
	oo.services = calloc(NS, sizeof(*oo.services));
	oo.slices = calloc(NS, sizeof(*oo.slices));
	assert_true(ips && eps && names && oo.services && oo.slices);
	oo.n_services = oo.n_slices = NS;
	oo.namespaces = nsn;
	oo.n_namespaces = 10;
	for (int i = 0; i < NS; i++) {
		struct ndc_k8s_service *s = &oo.services[i];
		struct ndc_k8s_slice *sl = &oo.slices[i];

		snprintf(names[i], sizeof(names[i]), "service-%d", i);
		s->ns = nsn[i % 10];
		s->name = names[i];
		s->headless = i % HL == 0;
		if (!s->headless) {
			s->n_ips = 1;
			s->ips[0].family = AF_INET;
			s->ips[0].addr[0] = 10;
			s->ips[0].addr[1] = 96;
			s->ips[0].addr[2] = (uint8_t)(i >> 8);
			s->ips[0].addr[3] = (uint8_t)i;
		}
		s->ports = web_ports;
		s->n_ports = 1;
		*sl = slice(names[i], AF_INET, &eps[i * EPS], EPS, web_ports, 1);
		sl->ns = s->ns;
		for (int k = 0; k < EPS; k++) {
			struct ndc_ip *a = &ips[i * EPS + k];
			uint32_t v = (uint32_t)(i * EPS + k);

			a->family = AF_INET;
			a->addr[0] = 10;
			a->addr[1] = (uint8_t)(200 + (v >> 16));
			a->addr[2] = (uint8_t)(v >> 8);
			a->addr[3] = (uint8_t)v;
			eps[i * EPS + k] =
			    (struct ndc_k8s_endpoint){.n_addrs = 1, .addrs = a, .ready = true};
		}
	}
	opts_init(&o);
	double t0 = now_s();
	assert_int_equal(ndc_records_build(&oo, &o, &r), 0);
	double t1 = now_s();
	size_t bytes = ndc_records_bytes(r);
	print_message("scale: %d services (1/%d headless), %d endpoints: build %.3f s, %zu "
		      "RRsets, %zu bytes (%zu bytes/service incl. its %d endpoints)\n",
		      NS, HL, NS * EPS, t1 - t0, ndc_records_count(r), bytes, bytes / (size_t)NS,
		      EPS);
	assert_true(t1 - t0 < 10.0);
	assert_true(bytes / (size_t)NS < 1200);

	expect_answer(r, "service-1.ns1.svc." ZONE, NDC_T_A, 1, &d);
	assert_has(&d, "an service-1.ns1.svc.cluster.local. 5 A 10.96.0.1");
	if (HL == 3) {
		expect_answer(r, "service-9999.ns9.svc." ZONE, NDC_T_A, 3, &d); /* headless */
		expect_answer(r, "_http._tcp.service-9999.ns9.svc." ZONE, NDC_T_SRV, 3, &d);
		assert_int_equal(d.ar, 3);
	}
	NXDOMAIN(r, "service-1.ns2.svc." ZONE, NDC_T_A);
	snprintf(qn, sizeof(qn), "%u.%u.%u.10.in-addr.arpa", (29999 & 255), (29999 >> 8) & 255,
		 200 + (29999 >> 16));
	expect_answer(r, qn, NDC_T_PTR, 1, &d);
	assert_has(&d, "an 47.117.200.10.in-addr.arpa. 5 PTR "
		       "10-200-117-47.service-9999.ns9.svc.cluster.local.");

	/* Lookup throughput, hits and misses mixed. */
	uint8_t w[2][NDC_NAME_MAX];
	size_t l0 = wire("service-4242.ns2.svc." ZONE, w[0]);
	size_t l1 = wire("api.github.com.ns2.svc." ZONE, w[1]);
	t0 = now_s();
	for (int i = 0; i < 200000; i++)
		assert_int_equal(
		    ndc_records_lookup(r, w[i & 1], i & 1 ? l1 : l0, NDC_T_A, &abuf.a, NDC_MSG_MAX),
		    0);
	t1 = now_s();
	print_message("scale: %.0f ns per lookup\n", (t1 - t0) / 200000 * 1e9);
	/*
	 * A table this size is rendered by two threads into one blob: every name must still be
	 * found under its whole name and answer as foreach says.
	 */
	assert_true(foreach_checked(r) >= ndc_records_count(r));
	ndc_records_free(r);
	free(oo.slices);
	free(oo.services);
	free(names);
	free(eps);
	free(ips);
}

/*
 * The fast-path publisher serves what ndc_records_foreach yields; the socket path serves
 * ndc_records_lookup. They must agree on every question, byte for byte.
 */
struct walk {
	const struct ndc_records *r;
	size_t n, n_other, n_any;
	bool saw_cname_other, saw_nodata_other, saw_reverse;
};

static int walk_fn(void *arg, const uint8_t *lname, size_t nlen, uint16_t qtype,
		   const struct ndc_answer *a)
{
	static union {
		struct ndc_answer a;
		uint8_t b[sizeof(struct ndc_answer) + 65536];
	} got;
	struct walk *w = arg;
	/* For the "any other type" entry ask a type no name in the table has. */
	uint16_t ask = qtype ? qtype : NDC_T_MX;

	assert_int_equal(ndc_records_lookup(w->r, lname, nlen, ask, &got.a, 65536), 0);
	assert_int_equal(got.a.len, a->len);
	assert_int_equal(got.a.rcode, a->rcode);
	assert_int_equal(got.a.aa, a->aa);
	assert_int_equal(got.a.ancount, a->ancount);
	assert_int_equal(got.a.nscount, a->nscount);
	assert_int_equal(got.a.arcount, a->arcount);
	assert_int_equal(got.a.qname_len, nlen);
	assert_memory_equal(got.a.data, a->data, a->len);
	assert_true(ndc_records_has(w->r, lname, nlen, qtype));
	w->n++;
	w->n_any += qtype == NDC_T_ANY;
	if (!qtype) {
		w->n_other++;
		w->saw_cname_other |= a->ancount == 1 && a->nscount == 0;
		w->saw_nodata_other |= a->ancount == 0 && a->nscount == 1;
	}
	w->saw_reverse |= qtype == NDC_T_PTR;
	return 0;
}

static int stop_fn(void *arg, const uint8_t *lname, size_t nlen, uint16_t qtype,
		   const struct ndc_answer *a)
{
	(void)lname, (void)nlen, (void)qtype, (void)a;
	return ++*(int *)arg == 3 ? -EINTR : 0;
}

static size_t foreach_checked(const struct ndc_records *r)
{
	struct walk w = {.r = r};

	assert_int_equal(ndc_records_foreach(r, walk_fn, &w), 0);
	assert_true(w.saw_reverse);
	return w.n;
}

static void test_foreach_matches_lookup(void **state)
{
	struct ndc_records *r = build_default();
	struct walk w = {.r = r};
	int calls = 0;

	(void)state;
	assert_int_equal(ndc_records_foreach(r, walk_fn, &w), 0);
	/* Every RRset once, plus an ANY and an "other" entry per name in the zone. */
	assert_true(w.n >= ndc_records_count(r) + w.n_other);
	assert_true(w.n_other > 10 && w.n_any > 5);
	assert_true(w.saw_cname_other && w.saw_nodata_other && w.saw_reverse);
	assert_int_equal(ndc_records_foreach(r, stop_fn, &calls), -EINTR);
	/* And nothing else: a type the name lacks, names that do not exist, reverse "other". */
	uint8_t n[NDC_NAME_MAX];
	size_t nl = wire("web.default.svc.cluster.local", n);
	assert_true(ndc_records_has(r, n, nl, NDC_T_A));
	assert_false(ndc_records_has(r, n, nl, NDC_T_MX));
	assert_true(ndc_records_has(r, n, nl, 0));
	nl = wire("nosuch.default.svc.cluster.local", n);
	assert_false(ndc_records_has(r, n, nl, 0));
	assert_false(ndc_records_has(r, n, nl, NDC_T_A));
	nl = wire("20.0.96.10.in-addr.arpa", n);
	assert_true(ndc_records_has(r, n, nl, NDC_T_PTR));
	assert_false(ndc_records_has(r, n, nl, 0));
	assert_int_equal(calls, 3);
	ndc_records_free(r);
}

/* Every answer of the eager table (render_all) must come out of the lazy one byte for byte. */
struct lazy_cmp {
	const struct ndc_records *lazy;
	struct ndc_answer *got;
	int n, n_srv, n_ptr;
};

static int lazy_cmp_fn(void *arg, const uint8_t *lname, size_t nlen, uint16_t qtype,
		       const struct ndc_answer *a)
{
	struct lazy_cmp *c = arg;
	const struct ndc_answer *g = c->got;

	if (!qtype)
		return 0; /* the "other type" entry: a negative answer or a CNAME, never lazy */
	assert_int_equal(ndc_records_lookup(c->lazy, lname, nlen, qtype, c->got, NDC_MSG_MAX), 0);
	assert_int_equal(g->rcode, a->rcode);
	assert_int_equal(g->aa, a->aa);
	assert_int_equal(g->qname_len, a->qname_len);
	assert_int_equal(g->ancount, a->ancount);
	assert_int_equal(g->nscount, a->nscount);
	assert_int_equal(g->arcount, a->arcount);
	assert_int_equal(g->min_ttl, a->min_ttl);
	assert_int_equal(g->len, a->len);
	assert_memory_equal(g->data, a->data, a->len);
	c->n++;
	c->n_srv += qtype == NDC_T_SRV;
	c->n_ptr += qtype == NDC_T_PTR;
	return 0;
}

static void lazy_matches_eager(const struct ndc_k8s_objects *objs, int min_srv, int min_ptr)
{
	struct ndc_records_opts o;
	struct ndc_records *lazy, *eager;
	struct lazy_cmp c = {.got = malloc(sizeof(struct ndc_answer) + NDC_MSG_MAX)};

	opts_init(&o);
	o.serial = 1; /* else the SOA serial is each build's second */
	assert_int_equal(ndc_records_build(objs, &o, &lazy), 0);
	o.render_all = true;
	assert_int_equal(ndc_records_build(objs, &o, &eager), 0);
	assert_non_null(c.got);
	c.lazy = lazy;
	assert_int_equal(ndc_records_foreach(eager, lazy_cmp_fn, &c), 0);
	/* and the other way: the lazy table yields exactly the eager one's names and types */
	struct lazy_cmp back = {.lazy = eager, .got = c.got};
	assert_int_equal(ndc_records_foreach(lazy, lazy_cmp_fn, &back), 0);
	assert_int_equal(back.n, c.n);
	assert_int_equal(back.n_srv, c.n_srv);
	assert_int_equal(back.n_ptr, c.n_ptr);
	fprintf(stderr, "lazy vs eager: %d answers, %d SRV, %d PTR\n", c.n, c.n_srv, c.n_ptr);
	assert_true(c.n_srv >= min_srv && c.n_ptr >= min_ptr);
	assert_int_equal(ndc_records_count(lazy), ndc_records_count(eager));
	assert_true(ndc_records_bytes(lazy) < ndc_records_bytes(eager));
	free(c.got);
	ndc_records_free(lazy);
	ndc_records_free(eager);
}

static void test_lazy_matches_eager(void **state)
{
	enum { BIG = 60 };
	static struct ndc_k8s_endpoint big_eps[BIG], shr_eps[3];
	static struct ndc_k8s_port port = {.name = "p", .port = 7, .proto = IPPROTO_TCP};
	static char hosts[BIG][8], addrs[BIG][16];
	struct ndc_k8s_service svcs2[2];
	struct ndc_k8s_slice slices2[2];
	struct ndc_k8s_objects o = {
	    .services = svcs2, .n_services = 2, .slices = slices2, .n_slices = 2};

	(void)state;
	cluster_init();
	lazy_matches_eager(&objs, 7, 13);
	/*
	 * The corners: a headless set too big for a lazy answer (rendered at build time), and
	 * endpoints that share a hostname (one target, two addresses, listed once).
	 */
	for (int i = 0; i < BIG; i++) {
		snprintf(hosts[i], sizeof(hosts[i]), "h%d", i);
		snprintf(addrs[i], sizeof(addrs[i]), "10.244.8.%d", i + 1);
		big_eps[i] = ep(addrs[i], hosts[i], NULL, true);
	}
	shr_eps[0] = ep("10.244.9.1", "same", NULL, true);
	shr_eps[1] = ep("10.244.9.2", "same", NULL, true);
	shr_eps[2] = ep("10.244.9.3", NULL, NULL, true);
	svcs2[0] = svc("default", "big", NULL, NULL);
	svcs2[1] = svc("default", "shr", NULL, NULL);
	svcs2[0].ports = svcs2[1].ports = &port;
	svcs2[0].n_ports = svcs2[1].n_ports = 1;
	slices2[0] = slice("big", AF_INET, big_eps, BIG, &port, 1);
	slices2[1] = slice("shr", AF_INET, shr_eps, 3, &port, 1);
	lazy_matches_eager(&o, 4, BIG + 3);
}

static void count_done(void *arg)
{
	++*(int *)arg;
}

/* done is called exactly once, built or not, and the table is the one ndc_records_build makes. */
static void test_build_from(void **state)
{
	struct ndc_records_opts o;
	struct ndc_records *r = NULL, *ref = build_default();
	int calls = 0;

	(void)state;
	opts_init(&o);
	assert_int_equal(ndc_records_build_from(&objs, &o, count_done, &calls, &r), 0);
	assert_int_equal(calls, 1);
	assert_int_equal(ndc_records_count(r), ndc_records_count(ref));
	assert_int_equal(ndc_records_bytes(r), ndc_records_bytes(ref));
	ndc_records_free(r);
	o.zone = "bad..zone";
	assert_int_equal(ndc_records_build_from(&objs, &o, count_done, &calls, &r), -EINVAL);
	assert_int_equal(calls, 2);
	assert_null(r);
	ndc_records_free(ref);
}

static void test_nxdomain_template(void **state)
{
	static union {
		struct ndc_answer a;
		uint8_t b[sizeof(struct ndc_answer) + 512];
	} nx, got;
	struct ndc_records *r = build_default();
	uint8_t name[NDC_NAME_MAX];
	size_t nlen = wire("api.example.com.default.svc.cluster.local", name);
	struct dec d1, d2;

	(void)state;
	assert_int_equal(ndc_records_nxdomain(r, &nx.a, 512), 0);
	assert_int_equal(ndc_records_nxdomain(r, &nx.a, 10), -ENOSPC);
	assert_int_equal(ndc_records_nxdomain(r, &nx.a, 512), 0);
	assert_int_equal(nx.a.rcode, NDC_RCODE_NXDOMAIN);
	assert_int_equal(nx.a.nscount, 1);
	assert_int_equal(nx.a.ancount, 0);
	/* Decoded, it says what the socket path's compressed NXDOMAIN says. */
	assert_int_equal(ndc_records_lookup(r, name, nlen, NDC_T_A, &got.a, 512), 0);
	nx.a.qname_len = (uint8_t)nlen;
	decode(&nx.a, name, nlen, &d1);
	decode(&got.a, name, nlen, &d2);
	assert_int_equal(d1.n, d2.n);
	for (int i = 0; i < d1.n; i++)
		assert_string_equal(d1.line[i], d2.line[i]);
	ndc_records_free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cluster_ip),
	    cmocka_unit_test(test_dual_stack),
	    cmocka_unit_test(test_headless),
	    cmocka_unit_test(test_hostnames),
	    cmocka_unit_test(test_srv_cluster_ip),
	    cmocka_unit_test(test_srv_headless),
	    cmocka_unit_test(test_external_name),
	    cmocka_unit_test(test_alias_in_zone),
	    cmocka_unit_test(test_ttl_zero),
	    cmocka_unit_test(test_empty_non_terminals),
	    cmocka_unit_test(test_ptr_shared),
	    cmocka_unit_test(test_ptr),
	    cmocka_unit_test(test_ptr_details),
	    cmocka_unit_test(test_apex),
	    cmocka_unit_test(test_negative),
	    cmocka_unit_test(test_outside_zone),
	    cmocka_unit_test(test_pods_insecure),
	    cmocka_unit_test(test_pods_verified),
	    cmocka_unit_test(test_namespaces_filter),
	    cmocka_unit_test(test_ignore_empty_service),
	    cmocka_unit_test(test_ttl_and_enospc),
	    cmocka_unit_test(test_big_rrset),
	    cmocka_unit_test(test_scale),
	    cmocka_unit_test(test_foreach_matches_lookup),
	    cmocka_unit_test(test_nxdomain_template),
	    cmocka_unit_test(test_lazy_matches_eager),
	    cmocka_unit_test(test_build_from),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
