// SPDX-License-Identifier: MIT
/*
 * The object store's incremental tables against full builds. Random clusters drawn from small
 * pools of names and addresses (so PTR names, pod names and namespaces are shared between
 * objects, which is where an incremental update can go wrong) are fed through the watch
 * callbacks as lists and events; after every burst the table the store handed over must equal,
 * RRset for RRset and byte for byte, a full build of the same objects.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "store/store.h"
#include "store/internal.h"

#define NS_POOL 4
#define SVC_POOL 10
#define SLICE_POOL 14
#define POD_POOL 10
#define IMPORT_POOL 6 /* ServiceImports i<k> (s<k>'s name too, now and then) */
#define SLOTS (NS_POOL + SVC_POOL + SLICE_POOL + POD_POOL + IMPORT_POOL)

static uint64_t rng_state;

static uint32_t rnd(uint32_t n)
{
	rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
	return (uint32_t)(rng_state >> 33) % n;
}

/* The model: the JSON of each object slot, NULL when absent. */
struct model {
	char *obj[SLOTS];
};

static enum ndc_k8s_kind slot_kind(int i)
{
	if (i < NS_POOL)
		return NDC_K8S_NAMESPACES;
	if (i < NS_POOL + SVC_POOL)
		return NDC_K8S_SERVICES;
	if (i < NS_POOL + SVC_POOL + SLICE_POOL)
		return NDC_K8S_ENDPOINTSLICES;
	if (i < NS_POOL + SVC_POOL + SLICE_POOL + POD_POOL)
		return NDC_K8S_PODS;
	return NDC_K8S_SERVICEIMPORTS;
}

/* The name of ServiceImport k: an import of its own, or the same name as a Service. */
static void import_name(char *buf, size_t len, int k)
{
	snprintf(buf, len, k % 2 ? "s%d" : "i%d", k);
}

/* Namespaced objects keep their namespace for life: the slot decides it. */
static int slot_ns(int i)
{
	return (i * 7 + 3) % NS_POOL;
}

static void ip4(char *buf, size_t len, const char *prefix, uint32_t n)
{
	snprintf(buf, len, "%s%u", prefix, n);
}

/*
 * A target inside the zone for an ExternalName (into buf): the pools' services (in the
 * namespace each lives in, mostly), their endpoint names and SRV names, namespaces, pod names,
 * the apex's names and names that do not exist, so chains, loops and every kind of end occur.
 */
static const char *alias_target(char *buf, size_t len)
{
	unsigned s = rnd(SVC_POOL),
		 ns = rnd(4) ? (unsigned)slot_ns(NS_POOL + (int)s) : rnd(NS_POOL);

	switch (rnd(9)) {
	case 0:
		snprintf(buf, len, "h%u.s%u.ns%u.svc.cluster.local", rnd(3), s, ns);
		break;
	case 1:
		snprintf(buf, len, "_http._tcp.s%u.ns%u.svc.cluster.local", s, ns);
		break;
	case 2:
		snprintf(buf, len, "ns%u.svc.cluster.local", ns);
		break;
	case 3:
		snprintf(buf, len, "10-244-0-%u.ns%u.pod.cluster.local", 1 + rnd(8), ns);
		break;
	case 4:
		snprintf(buf, len, "%s", rnd(2) ? "cluster.local" : "dns-version.cluster.local");
		break;
	case 5:
		snprintf(buf, len, "nosuch.ns%u.svc.cluster.local", ns);
		break;
	default:
		snprintf(buf, len, "s%u.ns%u.svc.cluster.local", s, ns);
		break;
	}
	return buf;
}

static char *gen(int i)
{
	char buf[4096], ip[64], eps[2048] = "", ports[256];
	int ns = slot_ns(i);

	switch (slot_kind(i)) {
	case NDC_K8S_NAMESPACES:
		snprintf(buf, sizeof(buf),
			 "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":"
			 "\"ns%d\"}}",
			 i);
		break;
	case NDC_K8S_SERVICES: {
		int k = i - NS_POOL, type = (int)rnd(7);

		snprintf(ports, sizeof(ports),
			 "[{\"name\":\"%s\",\"port\":%u,\"protocol\":\"%s\"}]",
			 rnd(3) ? "http" : "", 80 + rnd(3), rnd(4) ? "TCP" : "UDP");
		ip4(ip, sizeof(ip), "10.96.0.", 1 + rnd(6)); /* shared on purpose: PTR sets */
		if (type >= 5)
			snprintf(
			    buf, sizeof(buf),
			    "{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":"
			    "\"s%d\",\"namespace\":\"ns%d\"},\"spec\":{\"type\":\"ExternalName\","
			    "\"externalName\":\"%s\"}}",
			    k, ns, type == 5 ? "ext.example.org" : alias_target(ip, sizeof(ip)));
		else
			snprintf(
			    buf, sizeof(buf),
			    "{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":"
			    "\"s%d\",\"namespace\":\"ns%d\"},\"spec\":{\"type\":\"ClusterIP\","
			    "\"clusterIP\":\"%s\",\"ports\":%s%s}}",
			    k, ns, type >= 3 ? "None" : ip, ports,
			    rnd(4) ? "" : ",\"publishNotReadyAddresses\":true");
		break;
	}
	case NDC_K8S_ENDPOINTSLICES: {
		int k = i - NS_POOL - SVC_POOL, n = (int)rnd(4);
		bool v6 = !rnd(5);
		char label[320] = "";

		for (int e = 0; e < n; e++) {
			char one[256], host[64] = "";

			if (v6)
				snprintf(ip, sizeof(ip), "fd00::%u", 1 + rnd(5));
			else
				ip4(ip, sizeof(ip), "10.244.0.", 1 + rnd(8));
			if (!rnd(3))
				snprintf(host, sizeof(host), "\"hostname\":\"h%u\",", rnd(3));
			snprintf(one, sizeof(one),
				 "%s{%s\"addresses\":[\"%s\"],\"conditions\":{\"ready\":%s}}",
				 e ? "," : "", host, ip, rnd(4) ? "true" : "false");
			strncat(eps, one, sizeof(eps) - strlen(eps) - 1);
		}
		/*
		 * Slices move between services now and then: both must be patched. Some are
		 * multicluster slices of an import, from one of two clusters (or, rarely, with no
		 * cluster), and a few are labelled for a Service and an import at once.
		 */
		int lab = (int)rnd(12);
		char imp[32];

		import_name(imp, sizeof(imp), (int)((unsigned)k + rnd(2)) % IMPORT_POOL);
		if (lab >= 8)
			snprintf(label, sizeof(label),
				 ",\"labels\":{\"multicluster.kubernetes.io/service-name\":\"%s\""
				 "%s%s%s}",
				 imp,
				 lab == 11 ? ""
					   : ",\"multicluster.kubernetes.io/source-cluster\":"
					     "\"c",
				 lab == 11 ? "" : (lab == 8 ? "2" : "1"), lab == 11 ? "" : "\"");
		else if (lab >= 1)
			snprintf(label, sizeof(label),
				 ",\"labels\":{\"kubernetes.io/service-name\":\"s%u\"%s%s%s}",
				 (unsigned)((k + rnd(3)) % SVC_POOL),
				 lab == 1 ? ",\"multicluster.kubernetes.io/service-name\":\"" : "",
				 lab == 1 ? imp : "",
				 lab == 1
				     ? "\",\"multicluster.kubernetes.io/source-cluster\":\"c1\""
				     : "");
		snprintf(buf, sizeof(buf),
			 "{\"apiVersion\":\"discovery.k8s.io/v1\",\"kind\":\"EndpointSlice\","
			 "\"metadata\":{\"name\":\"e%d\",\"namespace\":\"ns%d\"%s},\"addressType\":"
			 "\"%s\",\"endpoints\":[%s],\"ports\":[{\"name\":\"http\",\"port\":8080,"
			 "\"protocol\":\"TCP\"}]}",
			 k, ns, label, v6 ? "IPv6" : "IPv4", eps);
		break;
	}
	case NDC_K8S_SERVICEIMPORTS: {
		int k = i - NS_POOL - SVC_POOL - SLICE_POOL - POD_POOL, type = (int)rnd(4);
		char name[32];

		import_name(name, sizeof(name), k);
		snprintf(ports, sizeof(ports),
			 "[{\"name\":\"%s\",\"port\":%u,\"protocol\":\"TCP\"}%s]",
			 rnd(3) ? "http" : "", 80 + rnd(3),
			 rnd(3) ? "" : ",{\"name\":\"dns\",\"port\":53,\"protocol\":\"UDP\"}");
		ip4(ip, sizeof(ip), "10.42.0.", 1 + rnd(6));
		snprintf(buf, sizeof(buf),
			 "{\"apiVersion\":\"multicluster.x-k8s.io/v1alpha1\",\"kind\":"
			 "\"ServiceImport\",\"metadata\":{\"name\":\"%s\",\"namespace\":"
			 "\"ns%d\"},\"spec\":{\"type\":\"%s\",\"ips\":[%s%s%s%s],\"ports\":%s}}",
			 name, ns, type == 3 ? "Headless" : "ClusterSetIP", type == 3 ? "" : "\"",
			 type == 3 ? "" : ip, type == 3 ? "" : "\"",
			 type == 2 ? ",\"fd42::1\"" : "", rnd(6) ? ports : "[]");
		break;
	}
	default: {
		int k = i - NS_POOL - SVC_POOL - SLICE_POOL;

		ip4(ip, sizeof(ip), "10.244.0.", 1 + rnd(8)); /* hostNetwork-like sharing */
		snprintf(buf, sizeof(buf),
			 "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p%d\","
			 "\"namespace\":\"ns%d\"},\"status\":{%s}}",
			 k, ns, rnd(5) ? "\"podIP\":\"10.244.0.0\"" : "");
		if (strstr(buf, "10.244.0.0")) {
			char *p = strstr(buf, "10.244.0.0");
			char tail[256];

			snprintf(tail, sizeof(tail), "%s", p + strlen("10.244.0.0"));
			snprintf(p, sizeof(buf) - (size_t)(p - buf), "%s%s", ip, tail);
		}
		break;
	}
	}
	return strdup(buf);
}

static void deliver(struct ndc_k8s_store *s, enum ndc_k8s_kind kind, enum ndc_k8s_event ev,
		    const char *json)
{
	struct json_object *o = json_tokener_parse(json);

	assert_non_null(o);
	ndc_k8s_store_ops.event(s, kind, ev, o);
	json_object_put(o);
}

/* ---------------------------------------------------------------------------------------------
 * Comparing tables.
 */
struct dump {
	char **v;
	size_t n, cap;
};

static int dump_one(void *arg, const uint8_t *lname, size_t nlen, uint16_t qtype,
		    const struct ndc_answer *a)
{
	struct dump *d = arg;
	size_t len = 2 * (nlen + ndc_answer_size(a)) + 16;
	char *s = malloc(len), *p = s;
	struct ndc_answer copy;

	assert_non_null(s);
	memcpy(&copy, a, sizeof(copy));
	copy.pad = 0;
	for (size_t i = 0; i < nlen; i++)
		p += sprintf(p, "%02x", lname[i]);
	p += sprintf(p, "/%04x/", qtype);
	for (size_t i = 0; i < sizeof(copy); i++)
		p += sprintf(p, "%02x", ((const uint8_t *)&copy)[i]);
	for (size_t i = 0; i < a->len; i++)
		p += sprintf(p, "%02x", a->data[i]);
	if (d->n == d->cap) {
		d->cap = d->cap ? d->cap * 2 : 256;
		d->v = realloc(d->v, d->cap * sizeof(*d->v));
		assert_non_null(d->v);
	}
	d->v[d->n++] = s;
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void dump_free(struct dump *d)
{
	for (size_t i = 0; i < d->n; i++)
		free(d->v[i]);
	free(d->v);
}

static struct ndc_records_opts opts;
static const struct ndc_ip ns_addr = {.family = 2, .addr = {169, 254, 20, 10}};
/*
 * Multicluster zones the runs build (records.multicluster_zones): a zone of its own, and (odd
 * seeds) the cluster domain too, which then answers from ServiceImports instead of Services.
 */
static char *mc_zones[] = {"clusterset.local", "cluster.local"};

static void setup_opts(uint64_t seed)
{
	opts = (struct ndc_records_opts){
	    .zone = "cluster.local",
	    .ttl = 5,
	    .pods = NDC_PODS_VERIFIED,
	    .n_ns_addrs = 1,
	    .ns_addrs = &ns_addr,
	    .serial = 4242,
	    .n_mc_zones = 1 + seed % 2,
	    .mc_zones = mc_zones,
	};
}

/* A full build of the model's objects. */
static struct ndc_records *full_build(const struct model *m)
{
	size_t cap = 1 << 16, len = 0;
	char *list = malloc(cap), err[256];
	struct ndc_k8s_objects o;
	struct ndc_records *r;

	assert_non_null(list);
	len += (size_t)snprintf(list + len, cap - len, "{\"kind\":\"List\",\"items\":[");
	bool first = true;
	for (int i = 0; i < SLOTS; i++) {
		if (!m->obj[i])
			continue;
		len += (size_t)snprintf(list + len, cap - len, "%s%s", first ? "" : ",", m->obj[i]);
		first = false;
	}
	len += (size_t)snprintf(list + len, cap - len, "]}");
	assert_true(len < cap);
	assert_int_equal(ndc_snapshot_parse(list, len, &o, err, sizeof(err)), 0);
	assert_int_equal(ndc_records_build(&o, &opts, &r), 0);
	ndc_k8s_objects_free(&o);
	free(list);
	return r;
}

/* Both dumps sorted, then equal; what is in one only is printed as the `what` table's. */
static void assert_dumps_same(struct dump *a, struct dump *b, const char *what, const char *when)
{
	int bad = 0;

	qsort(a->v, a->n, sizeof(*a->v), cmp_str);
	qsort(b->v, b->n, sizeof(*b->v), cmp_str);
	for (size_t i = 0, k = 0; (i < a->n || k < b->n) && bad < 6;) {
		int c = i == a->n ? 1 : k == b->n ? -1 : strcmp(a->v[i], b->v[k]);

		if (c) {
			print_error("%s: %s only in the %s table\n", when,
				    c < 0 ? a->v[i] : b->v[k], c < 0 ? what : "full");
			bad++;
		}
		i += c <= 0;
		k += c >= 0;
	}
	if (bad)
		fail_msg("%s: the %s table and the full build differ", when, what);
}

static void assert_same(const struct ndc_records *got, const struct ndc_records *want,
			const char *when)
{
	struct dump a = {0}, b = {0};

	assert_int_equal(ndc_records_foreach(got, dump_one, &a), 0);
	assert_int_equal(ndc_records_foreach(want, dump_one, &b), 0);
	assert_dumps_same(&a, &b, "incremental", when);
	assert_int_equal(ndc_records_count(got), ndc_records_count(want));
	dump_free(&a);
	dump_free(&b);
}

/* ---------------------------------------------------------------------------------------------
 * The store's consumer.
 */
/*
 * The consumer, and beside the table a model of the fast path's copy: the publisher republishes
 * only the names each patch lists, so an answer that changes without its name in the patch (an
 * alias whose target changed) stays stale there. It must equal a full build too.
 */
struct consumer {
	struct ndc_records *cur;
	unsigned full, patched;
	struct dump pub;
};

struct republish {
	struct consumer *c;
	const struct ndc_records *rec;
};

static int republish_name(void *arg, const uint8_t *lname, size_t nlen)
{
	struct republish *u = arg;
	struct dump *d = &u->c->pub;
	char prefix[2 * NDC_NAME_MAX + 2], *p = prefix;
	size_t keep = 0;

	for (size_t i = 0; i < nlen; i++)
		p += sprintf(p, "%02x", lname[i]);
	strcpy(p, "/");
	for (size_t i = 0; i < d->n; i++) {
		if (strncmp(d->v[i], prefix, strlen(prefix)))
			d->v[keep++] = d->v[i];
		else
			free(d->v[i]);
	}
	d->n = keep;
	return ndc_records_foreach_name(u->rec, lname, nlen, dump_one, d);
}

static void on_table(void *arg, struct ndc_records *rec, const struct ndc_records_patch *changed)
{
	struct consumer *c = arg;
	struct republish u = {.c = c, .rec = rec};

	if (changed) {
		assert_int_equal(ndc_records_patch_foreach(changed, republish_name, &u), 0);
	} else {
		dump_free(&c->pub);
		memset(&c->pub, 0, sizeof(c->pub));
		assert_int_equal(ndc_records_foreach(rec, dump_one, &c->pub), 0);
	}
	/* No reader holds the old table here: the test reads only after a flush. */
	ndc_records_free(c->cur);
	c->cur = rec;
	if (changed)
		c->patched++;
	else
		c->full++;
}

static void assert_published(struct consumer *c, const struct ndc_records *want, const char *when)
{
	struct dump b = {0};

	assert_int_equal(ndc_records_foreach(want, dump_one, &b), 0);
	assert_dumps_same(&c->pub, &b, "published", when);
	dump_free(&b);
}

/* Counts the answers below svc.clusterset.local: the runs must make multicluster names. */
static int count_mc(void *arg, const uint8_t *lname, size_t nlen, uint16_t qtype,
		    const struct ndc_answer *a)
{
	static const uint8_t z[] = "\3svc\12clusterset\5local";

	(void)qtype;
	(void)a;
	*(size_t *)arg += nlen > sizeof(z) && !memcmp(lname + nlen - sizeof(z), z, sizeof(z));
	return 0;
}

static void list_all(struct ndc_k8s_store *s, const struct model *m)
{
	for (int k = 0; k < NDC_K8S_KINDS; k++) {
		ndc_k8s_store_ops.list_begin(s, (enum ndc_k8s_kind)k);
		for (int i = 0; i < SLOTS; i++) {
			struct json_object *o;

			if (!m->obj[i] || slot_kind(i) != (enum ndc_k8s_kind)k)
				continue;
			o = json_tokener_parse(m->obj[i]);
			ndc_k8s_store_ops.list_item(s, (enum ndc_k8s_kind)k, o);
			json_object_put(o);
		}
		ndc_k8s_store_ops.list_end(s, (enum ndc_k8s_kind)k);
	}
}

static void run(uint64_t seed, int rounds, int per_round, size_t compact_min, bool relist_midway)
{
	struct consumer c = {0};
	struct ndc_k8s_store *s;
	struct model m = {0};
	size_t mc_answers = 0;
	char when[96];

	rng_state = seed;
	setup_opts(seed);
	for (int i = 0; i < SLOTS; i++)
		if (rnd(3))
			m.obj[i] = gen(i);
	assert_int_equal(ndc_k8s_store_new(&opts, 0x1f, on_table, &c, &s), 0);
	ndc_k8s_store_set_compact(s, compact_min);
	list_all(s, &m);
	assert_int_equal(ndc_k8s_store_flush(s, 10000), 0);
	assert_non_null(c.cur);
	struct ndc_records *want = full_build(&m);
	assert_same(c.cur, want, "first sync");
	assert_published(&c, want, "first sync");
	ndc_records_free(want);

	for (int r = 0; r < rounds; r++) {
		for (int e = 0; e < per_round; e++) {
			int i = (int)rnd(SLOTS);

			if (m.obj[i] && !rnd(3)) {
				deliver(s, slot_kind(i), NDC_K8S_DELETED, m.obj[i]);
				free(m.obj[i]);
				m.obj[i] = NULL;
			} else {
				char *j = gen(i);

				deliver(s, slot_kind(i),
					m.obj[i] ? NDC_K8S_MODIFIED : NDC_K8S_ADDED, j);
				free(m.obj[i]);
				m.obj[i] = j;
			}
		}
		if (relist_midway && r == rounds / 2)
			list_all(s, &m);
		assert_int_equal(ndc_k8s_store_flush(s, 10000), 0);
		want = full_build(&m);
		assert_int_equal(ndc_records_foreach(want, count_mc, &mc_answers), 0);
		snprintf(when, sizeof(when), "seed %llu round %d", (unsigned long long)seed, r);
		assert_same(c.cur, want, when);
		assert_published(&c, want, when);
		ndc_records_free(want);
	}
	assert_true(c.patched > 0);
	assert_true(mc_answers > 0);
	struct ndc_k8s_store_stats st;

	ndc_k8s_store_stats(s, &st);
	if (compact_min < 100) /* the overlay was folded into new bases along the way */
		assert_true(st.rebuilds >= 3);
	ndc_k8s_store_free(s);
	ndc_records_free(c.cur);
	dump_free(&c.pub);
	for (int i = 0; i < SLOTS; i++)
		free(m.obj[i]);
}

/* One event at a time: every single patch is checked. */
static void test_single_events(void **state)
{
	(void)state;
	for (uint64_t seed = 1; seed <= 30; seed++)
		run(seed, 150, 1, 1u << 20, false);
}

/* Bursts: several changes, often to the same names, in one patch. */
static void test_bursts(void **state)
{
	(void)state;
	for (uint64_t seed = 100; seed <= 120; seed++)
		run(seed, 15, 12, 1u << 20, false);
}

/* Folding the overlay into a new base while changes keep coming. */
static void test_compaction(void **state)
{
	(void)state;
	for (uint64_t seed = 200; seed <= 215; seed++)
		run(seed, 60, 3, 4, false);
}

/* A relist in the middle replaces state wholesale and rebuilds. */
static void test_relist(void **state)
{
	(void)state;
	for (uint64_t seed = 300; seed <= 310; seed++)
		run(seed, 10, 6, 1u << 20, true);
}

/*
 * ExternalNames into the zone, step by step: each change to what an alias leads to (directly,
 * through other aliases, to an endpoint name, a namespace, a pod name) must reach the alias's
 * answers in the table and in the fast path's copy, which takes only the names each patch lists.
 */
#define SVC_JSON(name, spec)                                                         \
	"{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":\"" name \
	"\",\"namespace\":\"ns0\"},\"spec\":" spec "}"
#define ALIAS(name, target) \
	SVC_JSON(name, "{\"type\":\"ExternalName\",\"externalName\":\"" target "\"}")
#define SLICE_JSON(name, svc, ep)                                                              \
	"{\"apiVersion\":\"discovery.k8s.io/"                                                  \
	"v1\",\"kind\":\"EndpointSlice\",\"metadata\":{\"name\":"                              \
	"\"" name "\",\"namespace\":\"ns0\",\"labels\":{\"kubernetes.io/service-name\":\"" svc \
	"\"}},\"addressType\":\"IPv4\",\"endpoints\":[" ep "],\"ports\":[{\"name\":\"http\","  \
	"\"port\":8080,\"protocol\":\"TCP\"}]}"

static void test_alias_dependencies(void **state)
{
	static const struct {
		int slot; /* in the model; deleted when json is NULL */
		enum ndc_k8s_kind kind;
		const char *json;
	} steps[] = {
	    {0, NDC_K8S_NAMESPACES, "{\"kind\":\"Namespace\",\"metadata\":{\"name\":\"ns0\"}}"},
	    {4, NDC_K8S_SERVICES,
	     SVC_JSON("s1", "{\"clusterIP\":\"10.96.0.1\",\"ports\":[{\"name\":"
			    "\"http\",\"port\":80}]}")},
	    {5, NDC_K8S_SERVICES, ALIAS("s2", "s1.ns0.svc.cluster.local")},
	    {6, NDC_K8S_SERVICES, ALIAS("s3", "S2.ns0.svc.cluster.local.")},
	    {7, NDC_K8S_SERVICES, ALIAS("s4", "h0.s5.ns0.svc.cluster.local")},
	    {8, NDC_K8S_SERVICES, SVC_JSON("s5", "{\"clusterIP\":\"None\"}")},
	    {14, NDC_K8S_ENDPOINTSLICES,
	     SLICE_JSON("e5", "s5", "{\"hostname\":\"h0\",\"addresses\":[\"10.244.0.1\"]}")},
	    {4, NDC_K8S_SERVICES,
	     SVC_JSON("s1", "{\"clusterIP\":\"10.96.0.2\",\"ports\":[{\"name\":"
			    "\"http\",\"port\":81}]}")},
	    {14, NDC_K8S_ENDPOINTSLICES,
	     SLICE_JSON("e5", "s5", "{\"hostname\":\"h0\",\"addresses\":[\"10.244.0.2\"]}")},
	    {4, NDC_K8S_SERVICES, NULL},
	    {4, NDC_K8S_SERVICES, SVC_JSON("s1", "{\"clusterIP\":\"None\"}")},
	    {15, NDC_K8S_ENDPOINTSLICES,
	     SLICE_JSON("e1", "s1",
			"{\"addresses\":[\"10.244.0.3\"]},{\"addresses\":[\"10.244.0.4\"]}")},
	    {9, NDC_K8S_SERVICES, ALIAS("s6", "ns1.svc.cluster.local")},
	    {1, NDC_K8S_NAMESPACES, "{\"kind\":\"Namespace\",\"metadata\":{\"name\":\"ns1\"}}"},
	    {1, NDC_K8S_NAMESPACES, NULL},
	    {10, NDC_K8S_SERVICES, ALIAS("s7", "10-244-0-9.ns0.pod.cluster.local")},
	    {28, NDC_K8S_PODS,
	     "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"p0\",\"namespace\":"
	     "\"ns0\"},\"status\":{\"podIP\":\"10.244.0.9\"}}"},
	    {28, NDC_K8S_PODS, NULL},
	    {11, NDC_K8S_SERVICES, ALIAS("s8", "s9.ns0.svc.cluster.local")},
	    {12, NDC_K8S_SERVICES, ALIAS("s9", "s3.ns0.svc.cluster.local")},
	    {15, NDC_K8S_ENDPOINTSLICES,
	     SLICE_JSON("e1", "s1", "{\"addresses\":[\"10.244.0.5\"]}")},
	    {5, NDC_K8S_SERVICES, ALIAS("s2", "s9.ns0.svc.cluster.local")}, /* a loop */
	    {5, NDC_K8S_SERVICES, ALIAS("s2", "s1.ns0.svc.cluster.local")},
	    {15, NDC_K8S_ENDPOINTSLICES, NULL},
	};
	struct consumer c = {0};
	struct ndc_k8s_store *s;
	struct model m = {0};
	char when[64];

	(void)state;
	setup_opts(0);
	assert_int_equal(ndc_k8s_store_new(&opts, 0x1f, on_table, &c, &s), 0);
	list_all(s, &m);
	assert_int_equal(ndc_k8s_store_flush(s, 10000), 0);
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		int k = steps[i].slot;

		if (steps[i].json)
			deliver(s, steps[i].kind, m.obj[k] ? NDC_K8S_MODIFIED : NDC_K8S_ADDED,
				steps[i].json);
		else
			deliver(s, steps[i].kind, NDC_K8S_DELETED, m.obj[k]);
		free(m.obj[k]);
		m.obj[k] = steps[i].json ? strdup(steps[i].json) : NULL;
		assert_int_equal(ndc_k8s_store_flush(s, 10000), 0);
		struct ndc_records *want = full_build(&m);

		snprintf(when, sizeof(when), "step %zu", i);
		assert_same(c.cur, want, when);
		assert_published(&c, want, when);
		ndc_records_free(want);
	}
	ndc_k8s_store_free(s);
	ndc_records_free(c.cur);
	dump_free(&c.pub);
	for (int i = 0; i < SLOTS; i++)
		free(m.obj[i]);
}

/* The table is unchanged by an event nothing in DNS depends on, and deletes really delete. */
static void test_delete_service(void **state)
{
	struct consumer c = {0};
	struct ndc_k8s_store *s;
	struct model m = {0};
	uint8_t name[] = "\1a\2s1\3ns0\3svc\7cluster\5local";
	union {
		struct ndc_answer a;
		uint8_t b[sizeof(struct ndc_answer) + 512];
	} out;

	(void)state;
	setup_opts(0);
	m.obj[0] = strdup("{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":"
			  "\"ns0\"}}");
	assert_int_equal(ndc_k8s_store_new(&opts, 0x1f, on_table, &c, &s), 0);
	list_all(s, &m);
	assert_int_equal(ndc_k8s_store_flush(s, 10000), 0);
	const char *svc = "{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":"
			  "\"s1\",\"namespace\":\"ns0\"},\"spec\":{\"clusterIP\":\"10.96.0.7\"}}";
	deliver(s, NDC_K8S_SERVICES, NDC_K8S_ADDED, svc);
	assert_int_equal(ndc_k8s_store_flush(s, 10000), 0);
	assert_int_equal(ndc_records_lookup(c.cur, name + 2, sizeof(name) - 2, 1, &out.a, 512), 0);
	assert_int_equal(out.a.rcode, 0);
	assert_int_equal(out.a.ancount, 1);
	deliver(s, NDC_K8S_SERVICES, NDC_K8S_DELETED, svc);
	assert_int_equal(ndc_k8s_store_flush(s, 10000), 0);
	assert_int_equal(ndc_records_lookup(c.cur, name + 2, sizeof(name) - 2, 1, &out.a, 512), 0);
	assert_int_equal(out.a.rcode, 3); /* NXDOMAIN */
	assert_true(c.patched >= 2);
	ndc_k8s_store_free(s);
	ndc_records_free(c.cur);
	dump_free(&c.pub);
	free(m.obj[0]);
}

/*
 * An object as the store makes it (ndc_k8s_object_convert behind the header): a Pod "ns/name",
 * or a Namespace whose name is the whole key, which the table must take for the same key.
 */
static struct ndc_k8s_obj *make_obj(const char *key, bool as_pod)
{
	char json[256], err[256];
	const char *slash = strchr(key, '/');
	enum ndc_k8s_obj_type type;
	struct ndc_k8s_obj *o;
	json_object *obj;
	void *block;

	if (as_pod)
		snprintf(json, sizeof(json),
			 "{\"kind\":\"Pod\",\"metadata\":{\"namespace\":\"%.*s\",\"name\":"
			 "\"%s\"}}",
			 (int)(slash - key), key, slash + 1);
	else
		snprintf(json, sizeof(json),
			 "{\"kind\":\"Namespace\",\"metadata\":{\"name\":\"%s\"}}", key);
	obj = json_tokener_parse(json);
	assert_non_null(obj);
	assert_int_equal(
	    ndc_k8s_object_convert(obj, NDC_K8S_OBJ_HEAD, &type, &block, err, sizeof(err)), 0);
	json_object_put(obj);
	assert_int_equal(type, as_pod ? NDC_K8S_OBJ_POD : NDC_K8S_OBJ_NAMESPACE);
	o = block;
	atomic_init(&o->refs, 1);
	o->kind = as_pod ? NDC_K8S_PODS : NDC_K8S_NAMESPACES;
	return o;
}

/* "ns/name" of o, as the table keys it. */
static void obj_key_of(const struct ndc_k8s_obj *o, char *buf, size_t len)
{
	const char *ns, *name;

	ndc_k8s_obj_id(o, &ns, &name);
	if (ns)
		snprintf(buf, len, "%s/%s", ns, name);
	else
		snprintf(buf, len, "%s", name);
}

/*
 * The store's object table: puts replace (also an object whose key splits differently into
 * namespace and name), deletes shift the probe run back (no tombstones), so after any mix every
 * present key is found, every deleted one is not, and iteration sees each present object once.
 * The table hashes and compares the names in the objects, so a key that differs only after the
 * slash, or only in the namespace, must not match. ASan checks the references (each object freed
 * exactly once).
 */
static void test_objtab(void **state)
{
	enum { N = 5000 };
	struct ndc_k8s_objtab *t = ndc_k8s_objtab_new();
	static bool present[N];
	char key[32], got[64];

	(void)state;
	assert_non_null(t);
	rng_state = 7;
	memset(present, 0, sizeof(present));
	for (int round = 0; round < 20 * N; round++) {
		int i = (int)rnd(N);

		snprintf(key, sizeof(key), "ns%d/obj-%d", i % 13, i);
		if (rnd(3)) {
			assert_int_equal(ndc_k8s_objtab_put(t, make_obj(key, rnd(2))), 0);
			present[i] = true;
		} else {
			ndc_k8s_objtab_del(t, key);
			present[i] = false;
		}
	}
	size_t n = 0, pos = 0, seen = 0;
	struct ndc_k8s_obj *o;

	for (int i = 0; i < N; i++) {
		snprintf(key, sizeof(key), "ns%d/obj-%d", i % 13, i);
		o = ndc_k8s_objtab_get(t, key);
		if (o)
			obj_key_of(o, got, sizeof(got));
		assert_true(present[i] ? o && !strcmp(got, key) : !o);
		n += present[i];
		snprintf(key, sizeof(key), "ns%d/obj-%d", i % 13 + 13, i);
		assert_null(ndc_k8s_objtab_get(t, key));
		snprintf(key, sizeof(key), "ns%d/obj-%dx", i % 13, i);
		assert_null(ndc_k8s_objtab_get(t, key));
		snprintf(key, sizeof(key), "ns%d/obj-", i % 13);
		assert_null(ndc_k8s_objtab_get(t, key));
	}
	assert_int_equal(ndc_k8s_objtab_len(t), n);
	while ((o = ndc_k8s_objtab_next(t, &pos)))
		seen++;
	assert_int_equal(seen, n);
	ndc_k8s_objtab_free(t);
}

static struct ndc_k8s_obj *make_slice(int ns, int svc, int i)
{
	char json[512], err[256];
	enum ndc_k8s_obj_type type;
	struct ndc_k8s_obj *o;
	json_object *obj;
	void *block;

	snprintf(json, sizeof(json),
		 "{\"kind\":\"EndpointSlice\",\"metadata\":{\"namespace\":\"ns%d\",\"name\":"
		 "\"s-%d\",\"labels\":{\"kubernetes.io/service-name\":\"svc%d\"}},\"addressType\":"
		 "\"IPv4\",\"endpoints\":[]}",
		 ns, i, svc);
	obj = json_tokener_parse(json);
	assert_non_null(obj);
	assert_int_equal(
	    ndc_k8s_object_convert(obj, NDC_K8S_OBJ_HEAD, &type, &block, err, sizeof(err)), 0);
	json_object_put(obj);
	assert_int_equal(type, NDC_K8S_OBJ_SLICE);
	o = block;
	atomic_init(&o->refs, 1);
	o->kind = NDC_K8S_ENDPOINTSLICES;
	return o;
}

/*
 * The slice index is a multimap in one probe run per Service: after adds and removes in any
 * order (removal shifts entries of other Services' runs too), each Service yields exactly its
 * present slices, each once.
 */
static void test_slicetab(void **state)
{
	enum { N = 3000, NSVC = 40 };
	struct ndc_k8s_slicetab *t = ndc_k8s_slicetab_new(false);
	static struct ndc_k8s_obj *obj[N];
	static bool present[N];
	size_t n = 0;

	(void)state;
	assert_non_null(t);
	rng_state = 11;
	for (int i = 0; i < N; i++)
		obj[i] = make_slice(i % 3, (int)rnd(NSVC), i);
	memset(present, 0, sizeof(present));
	for (int round = 0; round < 10 * N; round++) {
		int i = (int)rnd(N);

		if (rnd(3) && !present[i]) {
			assert_int_equal(ndc_k8s_slicetab_add(t, obj[i]), 0);
			present[i] = true;
		} else if (present[i]) {
			ndc_k8s_slicetab_del(t, obj[i]);
			present[i] = false;
		}
	}
	for (int i = 0; i < N; i++)
		n += present[i];
	assert_int_equal(ndc_k8s_slicetab_len(t), n);
	for (int ns = 0; ns < 3; ns++) {
		for (int svc = 0; svc < NSVC; svc++) {
			static bool seen[N];
			char nsn[16], svcn[16];
			struct ndc_k8s_obj *o;
			size_t pos = 0, want = 0, got = 0;

			snprintf(nsn, sizeof(nsn), "ns%d", ns);
			snprintf(svcn, sizeof(svcn), "svc%d", svc);
			memset(seen, 0, sizeof(seen));
			while ((o = ndc_k8s_slicetab_next(t, nsn, svcn, &pos))) {
				int i = atoi(ndc_k8s_obj_slice(o)->name + 2);

				assert_ptr_equal(o, obj[i]);
				assert_true(present[i]);
				assert_false(seen[i]);
				assert_string_equal(ndc_k8s_obj_slice(o)->ns, nsn);
				assert_string_equal(ndc_k8s_obj_slice(o)->service, svcn);
				seen[i] = true;
				got++;
			}
			for (int i = 0; i < N; i++)
				want += present[i] && i % 3 == ns &&
					!strcmp(ndc_k8s_obj_slice(obj[i])->service, svcn);
			assert_int_equal(got, want);
		}
	}
	ndc_k8s_slicetab_free(t);
	for (int i = 0; i < N; i++)
		ndc_k8s_obj_put(obj[i]);
}

static void assert_ports_same(const struct ndc_k8s_port *a, const struct ndc_k8s_port *b,
			      uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		assert_int_equal(a[i].port, b[i].port);
		assert_int_equal(a[i].proto, b[i].proto);
		assert_true(a[i].name ? b[i].name && !strcmp(a[i].name, b[i].name) : !b[i].name);
	}
}

static void assert_str_same(const char *a, const char *b)
{
	assert_true(a ? b && !strcmp(a, b) : !b);
}

/* The element ndc_k8s_object_convert made reads as the one ndc_k8s_object_add made. */
static void assert_elem_same(const struct ndc_k8s_objects *o, enum ndc_k8s_obj_type type,
			     const char *elem)
{
	switch (type) {
	case NDC_K8S_OBJ_NAMESPACE:
		assert_int_equal(o->n_namespaces, 1);
		assert_string_equal(*(char *const *)elem, o->namespaces[0]);
		break;
	case NDC_K8S_OBJ_SERVICE:
	case NDC_K8S_OBJ_SVCIMPORT: {
		bool imp = type == NDC_K8S_OBJ_SVCIMPORT;
		const struct ndc_k8s_service *a = imp ? &o->imports[0] : &o->services[0],
					     *b = (const void *)elem;

		assert_int_equal(imp ? o->n_imports : o->n_services, 1);
		assert_str_same(a->ns, b->ns);
		assert_str_same(a->name, b->name);
		assert_str_same(a->external_name, b->external_name);
		assert_int_equal(a->type, b->type);
		assert_int_equal(a->headless, b->headless);
		assert_int_equal(a->publish_not_ready, b->publish_not_ready);
		assert_int_equal(a->n_ips, b->n_ips);
		assert_memory_equal(a->ips, b->ips, a->n_ips * sizeof(a->ips[0]));
		assert_int_equal(a->n_ports, b->n_ports);
		assert_ports_same(a->ports, b->ports, a->n_ports);
		break;
	}
	case NDC_K8S_OBJ_SLICE: {
		const struct ndc_k8s_slice *a = &o->slices[0], *b = (const void *)elem;

		assert_int_equal(o->n_slices, 1);
		assert_str_same(a->ns, b->ns);
		assert_str_same(a->name, b->name);
		assert_str_same(a->service, b->service);
		assert_str_same(a->mc_service, b->mc_service);
		assert_str_same(a->cluster, b->cluster);
		assert_int_equal(a->family, b->family);
		assert_int_equal(a->n_ports, b->n_ports);
		assert_ports_same(a->ports, b->ports, a->n_ports);
		assert_int_equal(a->n_endpoints, b->n_endpoints);
		for (uint32_t i = 0; i < a->n_endpoints; i++) {
			const struct ndc_k8s_endpoint *e = &a->endpoints[i], *f = &b->endpoints[i];

			assert_int_equal(e->n_addrs, f->n_addrs);
			assert_memory_equal(e->addrs, f->addrs, e->n_addrs * sizeof(e->addrs[0]));
			assert_str_same(e->hostname, f->hostname);
			assert_str_same(e->pod_name, f->pod_name);
			assert_int_equal(e->ready, f->ready);
		}
		break;
	}
	case NDC_K8S_OBJ_POD: {
		const struct ndc_k8s_pod *a = &o->pods[0], *b = (const void *)elem;

		assert_int_equal(o->n_pods, 1);
		assert_str_same(a->ns, b->ns);
		assert_str_same(a->name, b->name);
		assert_int_equal(a->n_ips, b->n_ips);
		assert_memory_equal(a->ips, b->ips, a->n_ips * sizeof(a->ips[0]));
		break;
	}
	case NDC_K8S_OBJ_NONE:
		assert_int_equal(
		    o->n_namespaces + o->n_services + o->n_slices + o->n_pods + o->n_imports, 0);
		break;
	}
}

/* Converts obj both ways: same result, same element, same message. */
static void check_convert(json_object *obj)
{
	enum { HEAD = 16 };
	char err1[256] = "", err2[256] = "";
	struct ndc_k8s_objects o = {0};
	enum ndc_k8s_obj_type type;
	void *block;
	int r1, r2;

	r1 = ndc_k8s_object_add(&o, obj, err1, sizeof(err1));
	r2 = ndc_k8s_object_convert(obj, HEAD, &type, &block, err2, sizeof(err2));
	assert_int_equal(r1, r2);
	if (r1 < 0) {
		assert_string_equal(err1, err2);
		assert_null(block);
		assert_int_equal(type, NDC_K8S_OBJ_NONE);
		return;
	}
	assert_true(type == NDC_K8S_OBJ_NONE ? !block : !!block);
	if (block) {
		static const char zero[HEAD];

		assert_memory_equal(block, zero, HEAD); /* the caller's head room, zeroed */
		if (type != NDC_K8S_OBJ_NAMESPACE) /* mem is the first field after the pointers */
			assert_ptr_equal(
			    type == NDC_K8S_OBJ_SERVICE || type == NDC_K8S_OBJ_SVCIMPORT
				? ((struct ndc_k8s_service *)((char *)block + HEAD))->mem
			    : type == NDC_K8S_OBJ_SLICE
				? ((struct ndc_k8s_slice *)((char *)block + HEAD))->mem
				: ((struct ndc_k8s_pod *)((char *)block + HEAD))->mem,
			    block);
	}
	assert_elem_same(&o, type, (const char *)block + HEAD);
	free(block);
	ndc_k8s_objects_free(&o);
}

/*
 * The store's conversion (one block per object) against the snapshot's (ndc_k8s_object_add):
 * the sample cluster, random objects of the model, and objects each conversion must reject with
 * the same reason.
 */
static void test_convert(void **state)
{
	static const char *const odd[] = {
	    "[]",
	    "{}",
	    "{\"kind\":3}",
	    "{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"x\"}}",
	    "{\"kind\":\"Namespace\"}",
	    "{\"kind\":\"Namespace\",\"metadata\":{\"name\":\"\"}}",
	    "{\"kind\":\"Namespace\",\"metadata\":{\"name\":\"a\\u0000b\"}}",
	    "{\"kind\":\"Service\",\"metadata\":{\"name\":\"s\"}}",
	    "{\"kind\":\"Service\",\"metadata\":{\"namespace\":\"n\",\"name\":\"s\"},"
	    "\"spec\":{\"ports\":[{\"port\":0}]}}",
	    "{\"kind\":\"Service\",\"metadata\":{\"namespace\":\"n\",\"name\":\"s\"},"
	    "\"spec\":{\"clusterIPs\":[\"10.0.0.1\",\"fd00::1\",\"10.0.0.2\"]}}",
	    "{\"kind\":\"Service\",\"metadata\":{\"namespace\":\"n\",\"name\":\"s\"},"
	    "\"spec\":{\"type\":\"ExternalName\",\"externalName\":\"db.example.\","
	    "\"ports\":[{\"name\":\"a\",\"port\":1,\"protocol\":\"UDP\"},{\"port\":2,"
	    "\"protocol\":\"SCTP\"}]}}",
	    "{\"kind\":\"Service\",\"metadata\":{\"namespace\":\"n\",\"name\":\"s\"},"
	    "\"spec\":{\"clusterIP\":\"None\",\"publishNotReadyAddresses\":true}}",
	    "{\"kind\":\"EndpointSlice\",\"metadata\":{\"namespace\":\"n\",\"name\":\"e\"},"
	    "\"addressType\":\"IPv6\",\"endpoints\":[{\"addresses\":[\"10.0.0.1\"]}]}",
	    "{\"kind\":\"EndpointSlice\",\"metadata\":{\"namespace\":\"n\",\"name\":\"e\"},"
	    "\"addressType\":\"FQDN\",\"endpoints\":[{\"addresses\":[\"a.example\"]}]}",
	    "{\"kind\":\"EndpointSlice\",\"metadata\":{\"namespace\":\"n\",\"name\":\"e\"},"
	    "\"addressType\":\"IPv6\",\"ports\":[{\"name\":\"all\"},{\"port\":53}],"
	    "\"endpoints\":[{\"addresses\":[\"fd00::1\",\"fd00::2\"],\"hostname\":\"h\","
	    "\"targetRef\":{\"kind\":\"Pod\",\"name\":\"p\"},\"conditions\":{\"ready\":"
	    "false}},{\"addresses\":[]}]}",
	    "{\"kind\":\"EndpointSlice\",\"metadata\":{\"namespace\":\"n\",\"name\":\"e\"},"
	    "\"addressType\":\"IPv4\",\"endpoints\":[{\"addresses\":[\"10.0.0.1\"],"
	    "\"conditions\":{\"ready\":\"yes\"}}]}",
	    "{\"kind\":\"Pod\",\"metadata\":{\"namespace\":\"n\",\"name\":\"p\"},"
	    "\"status\":{\"podIPs\":[{\"ip\":\"10.0.0.1\"},{\"ip\":\"fd00::1\"}]}}",
	    "{\"kind\":\"Pod\",\"metadata\":{\"namespace\":\"n\",\"name\":\"p\"},"
	    "\"status\":{\"podIP\":\"nope\"}}",
	};
	json_object *root, *items;

	(void)state;
	json_tokener *tok = json_tokener_new();

	assert_non_null(tok);
	root = json_tokener_parse_ex(tok, ndc_sample_cluster, (int)ndc_sample_cluster_len);
	json_tokener_free(tok);
	assert_non_null(root);
	assert_true(json_object_object_get_ex(root, "items", &items));
	for (size_t i = 0; i < json_object_array_length(items); i++)
		check_convert(json_object_array_get_idx(items, (int)i));
	json_object_put(root);
	for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
		json_object *obj = json_tokener_parse(odd[i]);

		assert_non_null(obj);
		check_convert(obj);
		json_object_put(obj);
	}
	rng_state = 3;
	for (int round = 0; round < 50; round++) {
		for (int i = 0; i < SLOTS; i++) {
			char *text = gen(i);
			json_object *obj = json_tokener_parse(text);

			assert_non_null(obj);
			check_convert(obj);
			json_object_put(obj);
			free(text);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_convert),
	    cmocka_unit_test(test_objtab),
	    cmocka_unit_test(test_slicetab),
	    cmocka_unit_test(test_delete_service),
	    cmocka_unit_test(test_alias_dependencies),
	    cmocka_unit_test(test_single_events),
	    cmocka_unit_test(test_bursts),
	    cmocka_unit_test(test_compaction),
	    cmocka_unit_test(test_relist),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
