/* SPDX-License-Identifier: MIT */
/*
 * Multicluster records (records.multicluster_zones): the cases of CoreDNS's kubernetes plugin
 * test TestMultiClusterServeDNS (plugin/kubernetes/handler_test.go: commonDnsTestCases and
 * multiclusterDnsTestCases, run with `multicluster cluster.local`) on the same cluster, written
 * out as Kubernetes objects: its Services, Endpoints, ServiceImports and multicluster endpoints
 * (svcIndex, epsIndex, svcImportIndex, mcEpsIndex) become Services, EndpointSlices,
 * ServiceImports and EndpointSlices labelled multicluster.kubernetes.io/service-name and
 * source-cluster cluster1; its exposed namespace (k.Namespaces) is records.namespaces.
 *
 * Each case gives the RCODE, the answer and the authority section as CoreDNS's test expects
 * them, and the additional section where it gives one (Extra). Compared as sets of RRs, as
 * CoreDNS's test.SortAndCheck does; the SOA's serial is left out (CoreDNS's is a timestamp).
 * Two deliberate differences, both as ndcache's cluster zone has them already: the dns-version
 * TXT carries the records TTL (CoreDNS 28800), and SRV targets' addresses come in additional.
 *
 * The same table runs a second time with the multicluster zone clusterset.local beside the
 * cluster domain (the usual set-up, `kubernetes cluster.local clusterset.local { multicluster
 * clusterset.local }`), where the cluster domain keeps answering from Services.
 */
#include "dec.h"

#include <stdlib.h>

#include "objects/objects.h"

#define SOA_TAIL " 7200 1800 86400 5"

/* Objects: name, then the fields each kind needs, in a List. */
#define META(kind, api, name, ns)                                                                \
	"{\"apiVersion\":\"" api "\",\"kind\":\"" kind "\",\"metadata\":{\"name\":\"" name "\"," \
	"\"namespace\":\"" ns "\""
#define SVC(name, ns, spec) META("Service", "v1", name, ns) "},\"spec\":" spec "}"
#define IMPORT(name, ns, spec) \
	META("ServiceImport", "multicluster.x-k8s.io/v1alpha1", name, ns) "},\"spec\":" spec "}"
#define HTTP "\"ports\":[{\"name\":\"http\",\"protocol\":\"TCP\",\"port\":80}]"
/* An EndpointSlice: labels, address type, endpoints, ports. */
#define SLICE(name, ns, labels, at, eps, ports)                \
	META("EndpointSlice", "discovery.k8s.io/v1", name, ns) \
	",\"labels\":{" labels "}},"                           \
	"\"addressType\":\"" at "\","                          \
	"\"endpoints\":[" eps "],"                             \
	"\"ports\":[" ports "]}"
#define LOCAL(svc) "\"kubernetes.io/service-name\":\"" svc "\""
#define MC(svc)                                                    \
	"\"multicluster.kubernetes.io/service-name\":\"" svc "\"," \
	"\"multicluster.kubernetes.io/source-cluster\":\"cluster1\""
#define EP(ip) "{\"addresses\":[\"" ip "\"]}"
#define EPH(ip, host) "{\"addresses\":[\"" ip "\"],\"hostname\":\"" host "\"}"
#define PORT(n, proto, p) "{\"name\":\"" n "\",\"protocol\":\"" proto "\",\"port\":" #p "}"

static const char cluster[] =
    "{\"kind\":\"List\",\"items\":["
    "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"testns\"}},"
    "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"kube-system\"}},"
    "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"unexposedns\"}},"
    /* svcIndex */
    SVC("kubedns", "kube-system",
	"{\"clusterIP\":\"10.0.0.10\",\"ports\":[{\"name\":\"dns\",\"protocol\":\"UDP\","
	"\"port\":53}]}") "," SVC("svc1", "testns",
				  "{\"clusterIP\":\"10.0.0.1\"," HTTP
				  "}") "," SVC("svcempty", "testns",
					       "{\"clusterIP\":\"10.0.0.1\"," HTTP
					       "}") "," SVC("svc6", "testns",
							    "{\"clusterIP\":\"1234:abcd::1\"," HTTP
							    "}") "," SVC("hdls1", "testns",
									 "{\"clusterIP\":\"None\"}") "," SVC("external",
													     "testns",
													     "{\"type\":\"ExternalName\",\"externalName\":\"ext.interwebs.test\"," HTTP
													     "}") "," SVC("external-to-service",
															  "testns",
															  "{\"type\":\"ExternalName\",\"externalName\":\"svc1.testns.svc.cluster.local.\"," HTTP
															  "}") "," SVC("hdlsprtls",
																       "testns",
																       "{\"clusterIP\":\"None\"}") "," SVC("svc1",
																					   "unexposedns",
																					   "{\"clusterIP\":\"10.0.0.2\"," HTTP
																					   "}") "," SVC("svc-dual-stack",
																							"testns",
																							"{\"clusterIP\":\"10.0.0.3\",\"clusterIPs\":[\"10.0.0.3\",\"10::3\"]," HTTP
																							"}") ","
    /* epsIndex */
    SLICE("kubedns", "kube-system", LOCAL("kubedns"), "IPv4", EP("172.0.0.100"), PORT("dns", "UDP", 53)) "," SLICE(
	"svc1-slice1", "testns", LOCAL("svc1"), "IPv4", EPH("172.0.0.1", "ep1a"),
	PORT("http", "TCP",
	     80)) "," SLICE("svcempty-slice1", "testns", LOCAL("svcempty"), "IPv4", "",
			    PORT("http", "TCP",
				 80)) "," SLICE("hdls1-slice1", "testns", LOCAL("hdls1"), "IPv4",
						EP("172.0.0.2") "," EP("172.0.0.3") "," EPH(
						    "172.0.0.4",
						    "dup-name") "," EPH("172.0.0.5",
									"dup-name"),
						PORT("http", "TCP",
						     80)) "," SLICE("hdls1-slice2", "testns",
								    LOCAL("hdls1"), "IPv6",
								    EP("5678:abcd::1") "," EP(
									"5678:abcd::2"),
								    PORT("http", "TCP",
									 80)) "," SLICE("hdlsprtls-"
											"slice1",
											"testns",
											LOCAL(
											    "hdlspr"
											    "tls"),
											"IPv4",
											EP("172.0."
											   "0.20"),
											"") ","
    /* svcImportIndex */
    IMPORT(
	"kubedns", "kube-system",
	"{\"type\":\"ClusterSetIP\",\"ips\":[\"10.0.0.10\"],\"ports\":[{\"name\":\"dns\","
	"\"protocol\":\"UDP\",\"port\":53}]}") "," IMPORT("svc1", "testns",
							  "{\"type\":\"ClusterSetIP\",\"ips\":["
							  "\"10.0.0.1\"]," HTTP
							  "}") "," IMPORT("svcempty", "testns", "{\"type\":\"ClusterSetIP\",\"ips\":[\"10.0.0.1\"]," HTTP "}") "," IMPORT("svc6",
																					  "testns", "{\"type\":\"ClusterSetIP\",\"ips\":[\"1234:abcd::1\"]," HTTP "}") "," IMPORT("hdls1", "testns", "{\"type\":\"Headless\",\"ips\":[]}") "," IMPORT("hdlsprtls", "testns", "{\"type\":\"Headless\"}") "," IMPORT("svc1",
																																																   "unexposedns", "{\"type\":\"ClusterSetIP\",\"ips\":[\"10.0.0.2\"]," HTTP "}") "," IMPORT("svc-dual-stack",
																																																											    "testns",
																																																											    "{\"type\":\"ClusterSetIP\",\"ips\":[\"10.0.0.3\",\"10::3\"]," HTTP
																																																											    "}") ","
    /* mcEpsIndex: the same endpoints, from cluster1 */
    SLICE("kubedns-mc", "kube-system", MC("kubedns"), "IPv4", EP("172.0.0.100"), PORT("dns", "UDP", 53)) "," SLICE(
	"svc1-mc", "testns",
	MC("svc1"), "IPv4",
	EPH("172.0.0.1", "ep1a"),
	PORT(
	    "http", "TCP",
	    80)) "," SLICE("svcempty-mc", "testns", MC("svcempty"), "IPv4", "",
			   PORT(
			       "http",
			       "TCP",
			       80)) "," SLICE("hdls1-mc", "testns", MC("hdls1"), "IPv4",
					      EP("172.0.0.2") "," EP("172.0.0.3") "," EPH(
						  "172.0.0.4", "dup-name") "," EPH("172.0.0.5",
										   "dup-name"),
					      PORT(
						  "http",
						  "TCP",
						  80)) "," SLICE("hdls1-mc6", "testns", MC("hdls1"),
								 "IPv6",
								 EP("5678:abcd::1") "," EP(
								     "5678:abcd::2"),
								 PORT(
								     "http",
								     "TCP",
								     80)) "," SLICE("hdlsprtls-mc",
										    "testns",
										    MC("hdlsprtls"),
										    "IPv4",
										    EP("172.0.0."
										       "20"),
										    "") "]}";

/* One case: a question, the RCODE, and the RRs of each section ("an ...", "ns ...", "ar ..."). */
struct mc_case {
	const char *qname; /* "%Z" stands for the multicluster zone */
	uint16_t qtype;
	uint8_t rcode;
	const char *rrs[12];
};

#define NOERR NDC_RCODE_NOERROR
#define NXDOM NDC_RCODE_NXDOMAIN
/* The SOA in authority of a negative answer, without its serial (see neg_ok). */
#define NEG "ns %Z. 5 SOA ns.dns.%Z. hostmaster.%Z."

static const struct mc_case cases[] = {
    /* commonDnsTestCases */
    {"svc1.testns.svc.%Z", NDC_T_A, NOERR, {"an svc1.testns.svc.%Z. 5 A 10.0.0.1"}},
    {"svcempty.testns.svc.%Z", NDC_T_A, NOERR, {"an svcempty.testns.svc.%Z. 5 A 10.0.0.1"}},
    {"svc1.testns.svc.%Z",
     NDC_T_SRV,
     NOERR,
     {"an svc1.testns.svc.%Z. 5 SRV 0 100 80 svc1.testns.svc.%Z.",
      "ar svc1.testns.svc.%Z. 5 A 10.0.0.1"}},
    {"svcempty.testns.svc.%Z",
     NDC_T_SRV,
     NOERR,
     {"an svcempty.testns.svc.%Z. 5 SRV 0 100 80 svcempty.testns.svc.%Z.",
      "ar svcempty.testns.svc.%Z. 5 A 10.0.0.1"}},
    {"svc6.testns.svc.%Z",
     NDC_T_SRV,
     NOERR,
     {"an svc6.testns.svc.%Z. 5 SRV 0 100 80 svc6.testns.svc.%Z.",
      "ar svc6.testns.svc.%Z. 5 AAAA 1234:abcd::1"}},
    {"_http._tcp.svc1.testns.svc.%Z",
     NDC_T_SRV,
     NOERR,
     {"an _http._tcp.svc1.testns.svc.%Z. 5 SRV 0 100 80 svc1.testns.svc.%Z.",
      "ar svc1.testns.svc.%Z. 5 A 10.0.0.1"}},
    {"_http._tcp.svcempty.testns.svc.%Z",
     NDC_T_SRV,
     NOERR,
     {"an _http._tcp.svcempty.testns.svc.%Z. 5 SRV 0 100 80 svcempty.testns.svc.%Z.",
      "ar svcempty.testns.svc.%Z. 5 A 10.0.0.1"}},
    {"hdls1.testns.svc.%Z",
     NDC_T_A,
     NOERR,
     {"an hdls1.testns.svc.%Z. 5 A 172.0.0.2", "an hdls1.testns.svc.%Z. 5 A 172.0.0.3",
      "an hdls1.testns.svc.%Z. 5 A 172.0.0.4", "an hdls1.testns.svc.%Z. 5 A 172.0.0.5"}},
    {"hdlsprtls.testns.svc.%Z", NDC_T_A, NOERR, {"an hdlsprtls.testns.svc.%Z. 5 A 172.0.0.20"}},
    {"svc1.testns.svc.%Z", NDC_T_AAAA, NOERR, {NEG}},
    {"svc0.testns.svc.%Z", NDC_T_AAAA, NXDOM, {NEG}},
    {"svc0.testns.svc.%Z", NDC_T_A, NXDOM, {NEG}},
    {"svc0.svc-nons.svc.%Z", NDC_T_A, NXDOM, {NEG}},
    {"dns-version.%Z", NDC_T_TXT, NOERR, {"an dns-version.%Z. 5 TXT \"1.1.0\""}},
    {"svc1.testns.svc.%Z", NDC_T_TXT, NOERR, {NEG}},
    {"svc0.svc-nons.svc.%Z", NDC_T_TXT, NXDOM, {NEG}},
    {"bogusendpoint.hdls1.testns.svc.%Z", NDC_T_A, NXDOM, {NEG}},
    {"bogusendpoint.svc0.testns.svc.%Z", NDC_T_A, NXDOM, {NEG}},
    {"svc6.testns.svc.%Z", NDC_T_AAAA, NOERR, {"an svc6.testns.svc.%Z. 5 AAAA 1234:abcd::1"}},
    {"_http._tcp.svc6.testns.svc.%Z",
     NDC_T_SRV,
     NOERR,
     {"an _http._tcp.svc6.testns.svc.%Z. 5 SRV 0 100 80 svc6.testns.svc.%Z.",
      "ar svc6.testns.svc.%Z. 5 AAAA 1234:abcd::1"}},
    {"hdls1.testns.svc.%Z",
     NDC_T_AAAA,
     NOERR,
     {"an hdls1.testns.svc.%Z. 5 AAAA 5678:abcd::1",
      "an hdls1.testns.svc.%Z. 5 AAAA 5678:abcd::2"}},
    {"svc.%Z", NDC_T_A, NOERR, {NEG}},
    {"pod.%Z", NDC_T_A, NOERR, {NEG}},
    {"testns.svc.%Z", NDC_T_A, NOERR, {NEG}},
    {"svc.%Z", NDC_T_NS, NOERR, {NEG}},
    {"testns.svc.%Z", NDC_T_NS, NOERR, {NEG}},
    {"foo.%Z", NDC_T_NS, NXDOM, {NEG}},
    {"foo.svc.%Z", NDC_T_NS, NXDOM, {NEG}},
    {"svc-dual-stack.testns.svc.%Z",
     NDC_T_A,
     NOERR,
     {"an svc-dual-stack.testns.svc.%Z. 5 A 10.0.0.3"}},
    {"svc-dual-stack.testns.svc.%Z",
     NDC_T_AAAA,
     NOERR,
     {"an svc-dual-stack.testns.svc.%Z. 5 AAAA 10::3"}},
    {"svc-dual-stack.testns.svc.%Z",
     NDC_T_SRV,
     NOERR,
     {"an svc-dual-stack.testns.svc.%Z. 5 SRV 0 50 80 svc-dual-stack.testns.svc.%Z.",
      "ar svc-dual-stack.testns.svc.%Z. 5 A 10.0.0.3",
      "ar svc-dual-stack.testns.svc.%Z. 5 AAAA 10::3"}},
    {"svc1.testns.svc.%Z", NDC_T_SOA, NOERR, {NEG}},
    {"endpoint.external.testns.svc.%Z", NDC_T_CNAME, NXDOM, {NEG}},
    {"subdomain.subdomain.external.testns.svc.%Z", NDC_T_CNAME, NXDOM, {NEG}},
    /* multiclusterDnsTestCases */
    {"_http._tcp.hdls1.testns.svc.%Z",
     NDC_T_SRV,
     NOERR,
     {"an _http._tcp.hdls1.testns.svc.%Z. 5 SRV 0 16 80 172-0-0-2.cluster1.hdls1.testns.svc.%Z.",
      "an _http._tcp.hdls1.testns.svc.%Z. 5 SRV 0 16 80 172-0-0-3.cluster1.hdls1.testns.svc.%Z.",
      "an _http._tcp.hdls1.testns.svc.%Z. 5 SRV 0 16 80 "
      "5678-abcd--1.cluster1.hdls1.testns.svc.%Z.",
      "an _http._tcp.hdls1.testns.svc.%Z. 5 SRV 0 16 80 "
      "5678-abcd--2.cluster1.hdls1.testns.svc.%Z.",
      "an _http._tcp.hdls1.testns.svc.%Z. 5 SRV 0 16 80 dup-name.cluster1.hdls1.testns.svc.%Z.",
      "ar 172-0-0-2.cluster1.hdls1.testns.svc.%Z. 5 A 172.0.0.2",
      "ar 172-0-0-3.cluster1.hdls1.testns.svc.%Z. 5 A 172.0.0.3",
      "ar 5678-abcd--1.cluster1.hdls1.testns.svc.%Z. 5 AAAA 5678:abcd::1",
      "ar 5678-abcd--2.cluster1.hdls1.testns.svc.%Z. 5 AAAA 5678:abcd::2",
      "ar dup-name.cluster1.hdls1.testns.svc.%Z. 5 A 172.0.0.4",
      "ar dup-name.cluster1.hdls1.testns.svc.%Z. 5 A 172.0.0.5"}},
    {"hdls1.testns.svc.%Z",
     NDC_T_A,
     NOERR,
     {"an hdls1.testns.svc.%Z. 5 A 172.0.0.2", "an hdls1.testns.svc.%Z. 5 A 172.0.0.3",
      "an hdls1.testns.svc.%Z. 5 A 172.0.0.4", "an hdls1.testns.svc.%Z. 5 A 172.0.0.5"}},
    {"5678-abcd--2.cluster1.hdls1.testns.svc.%Z",
     NDC_T_AAAA,
     NOERR,
     {"an 5678-abcd--2.cluster1.hdls1.testns.svc.%Z. 5 AAAA 5678:abcd::2"}},
    {"5678-abcd--1.cluster1.hdls1.testns.svc.%Z",
     NDC_T_AAAA,
     NOERR,
     {"an 5678-abcd--1.cluster1.hdls1.testns.svc.%Z. 5 AAAA 5678:abcd::1"}},
    {"172-0-0-20.cluster1.hdlsprtls.testns.svc.%Z",
     NDC_T_A,
     NOERR,
     {"an 172-0-0-20.cluster1.hdlsprtls.testns.svc.%Z. 5 A 172.0.0.20"}},
    {"5678-abcd--1.hdls1.testns.svc.%Z", NDC_T_AAAA, NXDOM, {NEG}},
    {"172-0-0-2.cluster1.hdls1.testns.svc.%Z",
     NDC_T_A,
     NOERR,
     {"an 172-0-0-2.cluster1.hdls1.testns.svc.%Z. 5 A 172.0.0.2"}},
    {"172-0-0-3.cluster1.hdls1.testns.svc.%Z",
     NDC_T_A,
     NOERR,
     {"an 172-0-0-3.cluster1.hdls1.testns.svc.%Z. 5 A 172.0.0.3"}},
    {"dup-name.cluster1.hdls1.testns.svc.%Z",
     NDC_T_A,
     NOERR,
     {"an dup-name.cluster1.hdls1.testns.svc.%Z. 5 A 172.0.0.4",
      "an dup-name.cluster1.hdls1.testns.svc.%Z. 5 A 172.0.0.5"}},
};

/* s with every "%Z" replaced by zone, into out. */
static const char *subst(const char *s, const char *zone, char *out, size_t cap)
{
	size_t n = 0;

	for (; *s && n + 1 < cap; s++) {
		if (s[0] == '%' && s[1] == 'Z') {
			n += (size_t)snprintf(out + n, cap - n, "%s", zone);
			s++;
		} else {
			out[n++] = *s;
		}
	}
	assert_true(n + 1 < cap);
	out[n] = 0;
	return out;
}

static struct ndc_k8s_objects objs;
static struct ndc_ip ns_addr = {.family = AF_INET, .addr = {169, 254, 20, 10}};
static char *exposed[] = {"testns"};

static struct ndc_records *build(char **zones, size_t n)
{
	struct ndc_records_opts o = {
	    .zone = "cluster.local",
	    .ttl = 5,
	    .n_namespaces = 1,
	    .namespaces = exposed,
	    .n_mc_zones = n,
	    .mc_zones = zones,
	    .n_ns_addrs = 1,
	    .ns_addrs = &ns_addr,
	    .serial = 1499347823,
	};
	struct ndc_records *r = NULL;
	char err[256];

	if (!objs.n_services)
		assert_int_equal(
		    ndc_snapshot_parse(cluster, sizeof(cluster) - 1, &objs, err, sizeof(err)), 0);
	assert_int_equal(objs.n_imports, 8);
	assert_int_equal(ndc_records_build(&objs, &o, &r), 0);
	return r;
}

/* Whether line is the SOA of the zone's negative answers (its serial left out). */
static bool neg_ok(const char *line, const char *want)
{
	size_t wl = strlen(want);
	const char *tail = line + wl;

	if (strncmp(line, want, wl) || *tail != ' ')
		return false;
	tail = strchr(tail + 1, ' '); /* past the serial */
	return tail && !strcmp(tail, SOA_TAIL);
}

/* The case's answer, every section compared as a set. */
static void check_case(const struct ndc_records *r, const struct mc_case *c, const char *zone)
{
	char qname[300], want[600];
	int n = 0;
	struct dec d;

	subst(c->qname, zone, qname, sizeof(qname));
	assert_int_equal(q(r, qname, c->qtype, &d), 0);
	if (d.rcode != c->rcode || !d.aa) {
		dump(&d);
		fail_msg("%s type %u: rcode %u aa %u, want rcode %u", qname, c->qtype, d.rcode,
			 d.aa, c->rcode);
	}
	for (; n < 12 && c->rrs[n]; n++) {
		subst(c->rrs[n], zone, want, sizeof(want));
		if (!strcmp(c->rrs[n], NEG)) {
			if (d.ns != 1 || d.an || d.ar || !neg_ok(d.line[0], want)) {
				dump(&d);
				fail_msg("%s type %u: want the negative answer %s", qname, c->qtype,
					 want);
			}
			continue;
		}
		assert_has(&d, want);
	}
	if (d.n != n) {
		dump(&d);
		fail_msg("%s type %u: %d records, want %d", qname, c->qtype, d.n, n);
	}
}

/* TestMultiClusterServeDNS as CoreDNS runs it: `multicluster cluster.local`. */
static void test_coredns_cluster_domain(void **state)
{
	char *zones[] = {"cluster.local"};
	struct ndc_records *r = build(zones, 1);

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_case(r, &cases[i], "cluster.local");
	ndc_records_free(r);
}

/* The same cases in clusterset.local beside the cluster domain. */
static void test_coredns_clusterset(void **state)
{
	char *zones[] = {"clusterset.local"};
	struct ndc_records *r = build(zones, 1);
	struct dec d;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_case(r, &cases[i], "clusterset.local");
	/* The cluster domain still answers from Services: their endpoint names, the alias. */
	assert_int_equal(q(r, "5678-abcd--1.hdls1.testns.svc.cluster.local", NDC_T_AAAA, &d), 0);
	assert_int_equal(d.an, 1);
	assert_int_equal(q(r, "external.testns.svc.cluster.local", NDC_T_CNAME, &d), 0);
	assert_has(&d, "an external.testns.svc.cluster.local. 5 CNAME ext.interwebs.test.");
	assert_int_equal(q(r, "172-0-0-2.cluster1.hdls1.testns.svc.cluster.local", NDC_T_A, &d), 0);
	assert_int_equal(d.rcode, NDC_RCODE_NXDOMAIN);
	assert_true(ndc_records_is_local(r, (const uint8_t *)"\3foo\12clusterset\5local", 22));
	ndc_records_free(r);
}

/* In a multicluster cluster domain, Services make no names (CoreDNS) but keep their PTRs. */
static void test_cluster_domain_services(void **state)
{
	char *zones[] = {"cluster.local"};
	struct ndc_records *r = build(zones, 1);
	struct dec d;

	(void)state;
	assert_int_equal(q(r, "external.testns.svc.cluster.local", NDC_T_CNAME, &d), 0);
	assert_int_equal(d.rcode, NDC_RCODE_NXDOMAIN);
	assert_int_equal(q(r, "1.0.0.10.in-addr.arpa", NDC_T_PTR, &d), 0);
	assert_has(&d, "an 1.0.0.10.in-addr.arpa. 5 PTR svc1.testns.svc.cluster.local.");
	/* one PTR, the Service's: ServiceImports make none (CoreDNS's reverse zones read Services)
	 */
	assert_int_equal(q(r, "3.0.0.10.in-addr.arpa", NDC_T_PTR, &d), 0);
	assert_int_equal(d.an, 1);
	assert_has(&d, "an 3.0.0.10.in-addr.arpa. 5 PTR svc-dual-stack.testns.svc.cluster.local.");
	ndc_records_free(r);
}

/* The apex of a multicluster zone: its own SOA and NS, the NS target's address. */
static void test_apex(void **state)
{
	char *zones[] = {"clusterset.local"};
	struct ndc_records *r = build(zones, 1);
	struct dec d;

	(void)state;
	assert_int_equal(q(r, "clusterset.local", NDC_T_SOA, &d), 0);
	assert_int_equal(d.an, 1);
	assert_true(!strncmp(d.line[0],
			     "an clusterset.local. 5 SOA ns.dns.clusterset.local. "
			     "hostmaster.clusterset.local. 1499347823 7200",
			     70));
	assert_int_equal(q(r, "clusterset.local", NDC_T_NS, &d), 0);
	assert_has(&d, "an clusterset.local. 5 NS ns.dns.clusterset.local.");
	assert_has(&d, "ar ns.dns.clusterset.local. 5 A 169.254.20.10");
	assert_int_equal(q(r, "ns.dns.clusterset.local", NDC_T_A, &d), 0);
	assert_int_equal(d.an, 1);
	/* the namespace filter (records.namespaces) holds in every zone */
	assert_int_equal(q(r, "svc1.unexposedns.svc.clusterset.local", NDC_T_A, &d), 0);
	assert_int_equal(d.rcode, NDC_RCODE_NXDOMAIN);
	assert_int_equal(q(r, "kube-system.svc.clusterset.local", NDC_T_A, &d), 0);
	assert_int_equal(d.rcode, NDC_RCODE_NXDOMAIN);
	/* an endpoint name is two labels below the import: the cluster's is NODATA (RFC 8020) */
	assert_int_equal(q(r, "cluster1.hdls1.testns.svc.clusterset.local", NDC_T_A, &d), 0);
	assert_int_equal(d.rcode, NDC_RCODE_NOERROR);
	assert_int_equal(d.an, 0);
	ndc_records_free(r);
}

static int count_answers(void *arg, const uint8_t *lname, size_t nlen, uint16_t qtype,
			 const struct ndc_answer *a)
{
	union {
		struct ndc_answer a;
		uint8_t b[sizeof(struct ndc_answer) + NDC_MSG_MAX];
	} got;
	const struct ndc_records *r = ((void **)arg)[0];
	uint16_t t = qtype ? qtype : NDC_T_MX; /* a type no name has */

	assert_int_equal(ndc_records_lookup(r, lname, nlen, t, &got.a, NDC_MSG_MAX), 0);
	got.a.pad = a->pad;
	assert_int_equal(ndc_answer_size(&got.a), ndc_answer_size(a));
	assert_memory_equal(&got.a, a, ndc_answer_size(a));
	(*(size_t *)((void **)arg)[1])++;
	return 0;
}

/*
 * What the publisher copies into the kernel's table (ndc_records_foreach) is what the socket
 * path answers, multicluster names included: the two paths answer alike.
 */
static void test_foreach_matches_lookup(void **state)
{
	char *zones[][2] = {{"clusterset.local", NULL}, {"cluster.local", "clusterset.local"}};

	(void)state;
	for (int k = 0; k < 2; k++) {
		struct ndc_records *r = build(zones[k], k + 1);
		size_t n = 0;
		void *arg[2] = {r, &n};

		assert_int_equal(ndc_records_foreach(r, count_answers, arg), 0);
		assert_true(n > 100);
		ndc_records_free(r);
	}
}

static void test_bad_zones(void **state)
{
	char *bad[] = {"clusterset..local"};
	struct ndc_records_opts o = {.zone = "cluster.local", .n_mc_zones = 1, .mc_zones = bad};
	struct ndc_records *r = NULL;

	(void)state;
	assert_int_equal(ndc_records_build(&objs, &o, &r), -EINVAL);
	assert_null(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_coredns_cluster_domain),
	    cmocka_unit_test(test_coredns_clusterset),
	    cmocka_unit_test(test_cluster_domain_services),
	    cmocka_unit_test(test_apex),
	    cmocka_unit_test(test_foreach_matches_lookup),
	    cmocka_unit_test(test_bad_zones),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);

	ndc_k8s_objects_free(&objs);
	return rc;
}
