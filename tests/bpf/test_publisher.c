// SPDX-License-Identifier: MIT
/*
 * The fast-path publisher against the real kernel map (loaded, never attached), read back through
 * the pins. Root only: exits 77 (skip) otherwise.
 *   - record table: every answer ndc_records_foreach yields is in the map, byte for byte, nothing
 *     else is; the NXDOMAIN template; synced;
 *   - an answer over NDC_FP_DATA_MAX: its entry absent, the name's other types passed to user
 *     space by the pass marker, still synced;
 *   - a key held by another name (a forced hash collision): left alone; the pass marker when it
 *     is an exact type's, not synced when it is the other-type entry's;
 *   - a table too small: synced exactly when every name of the zone is covered (all its entries,
 *     or the pass marker), at a size that fits exactly and one less;
 *   - the cache hook: puts with their expiry and TTL offsets, class CH ignored, an eviction
 *     unpublished, an answer replaced by a too big one unpublished, the sweep deleting an
 *     expired entry, and one published again with a longer TTL only once that has expired;
 *   - bounded expiry tracking: a flood of distinct names through a small cache leaves as many
 *     filings as the cache has entries, and none once they have expired and been swept;
 *   - free and close: the table outlives the publisher, close leaves no pin.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include <ndc/abi.h>
#include <ndc/dns_wire.h>
#include <ndc/log.h>

#include "fastpath/fastpath.h"
#include "fastpath/fastpath_test.h"
#include "objects/objects.h"
#include "publisher.h"
#include "query/query.h"
#include "records/records.h"

#define BPF_FS_MAGIC_NR 0xcafe4a11
#define CLASS_CH 3 /* RFC 1035 3.2.4 */
#define ZONE "cluster.local"
#define ZONE_WIRE \
	"\x07"    \
	"cluster" \
	"\x05"    \
	"local"
#define BIG_NAME "big.gen.svc." ZONE
#define NS 1000000000ull

static const char *const pin_names[] = {"ndc_answers", "ndc_big", "ndc_nx", "ndc_config",
					"ndc_counters"};
static char pin_dir[64];

struct answer_buf {
	union {
		struct ndc_answer a;
		uint8_t mem[sizeof(struct ndc_answer) + NDC_ANSWER_DATA_MAX];
	};
};

struct fixture {
	struct ndc_k8s_objects objs;
	struct ndc_records *rec;
	struct ndc_fp *fp;
	struct ndc_publisher *pub;
	struct ndc_cache *cache;
	int answers_fd, big_fd, nx_fd, config_fd;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NS + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};

	nanosleep(&ts, NULL);
}

/* Safe to call any time: with the fast path closed properly there is nothing left to remove. */
static void remove_pins(void)
{
	char path[128];

	if (!pin_dir[0])
		return;
	for (size_t i = 0; i < sizeof(pin_names) / sizeof(pin_names[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", pin_dir, pin_names[i]);
		unlink(path);
	}
	rmdir(pin_dir);
}

static bool pin_exists(const char *name)
{
	char path[128];
	struct stat st;

	if (!name)
		return stat(pin_dir, &st) == 0;
	snprintf(path, sizeof(path), "%s/%s", pin_dir, name);
	return stat(path, &st) == 0;
}

static int pinned_fd(const char *name)
{
	char path[128];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", pin_dir, name);
	fd = bpf_obj_get(path);
	assert_true(fd >= 0);
	return fd;
}

static size_t wire(const char *text, uint8_t out[NDC_NAME_MAX])
{
	size_t len;

	assert_int_equal(ndc_name_from_text(text, out, NDC_NAME_MAX, &len), 0);
	return len;
}

/* ---------------------------------------------------------------------------------------------
 * Fixture: objects, records, the fast path (not attached) and a publisher over it.
 */

static void fp_open(struct fixture *f, uint32_t max_entries)
{
	struct ndc_fastpath_opts o = {
	    .attach = NDC_FP_ATTACH_NONE,
	    .zone = (const uint8_t *)ZONE_WIRE,
	    .zone_len = sizeof(ZONE_WIRE), /* with the root label's zero */
	    .max_entries = max_entries,
	    .pin_dir = pin_dir,
	};

	assert_int_equal(ndc_fastpath_open(&o, &f->fp), 0);
	assert_int_equal(ndc_publisher_new(&ndc_fastpath_answer_table, f->fp, &f->pub), 0);
	f->answers_fd = pinned_fd("ndc_answers");
	f->big_fd = pinned_fd("ndc_big");
	f->nx_fd = pinned_fd("ndc_nx");
	f->config_fd = pinned_fd("ndc_config");
}

static void fp_close(struct fixture *f)
{
	ndc_publisher_free(f->pub);
	f->pub = NULL;
	ndc_fastpath_close(f->fp);
	f->fp = NULL;
	if (f->answers_fd >= 0)
		close(f->answers_fd);
	if (f->big_fd >= 0)
		close(f->big_fd);
	if (f->nx_fd >= 0)
		close(f->nx_fd);
	if (f->config_fd >= 0)
		close(f->config_fd);
	f->answers_fd = f->big_fd = f->nx_fd = f->config_fd = -1;
}

static void records_build(struct fixture *f, const char *json, size_t len)
{
	struct ndc_records_opts o = {.zone = ZONE, .ttl = 5};
	char err[256] = "";
	int r;

	r = ndc_snapshot_parse(json, len, &f->objs, err, sizeof(err));
	if (r)
		fail_msg("snapshot: %s", err);
	assert_int_equal(ndc_records_build(&f->objs, &o, &f->rec), 0);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	f->answers_fd = f->big_fd = f->nx_fd = f->config_fd = -1;
	*state = f;
	return 0;
}

/* Runs after a failed test too (cmocka): nothing of it survives into the next one. */
static int teardown(void **state)
{
	struct fixture *f = *state;

	fp_close(f);
	ndc_cache_free(f->cache);
	ndc_records_free(f->rec);
	ndc_k8s_objects_free(&f->objs);
	free(f);
	remove_pins();
	return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Reading the table.
 */

static size_t map_count(int fd)
{
	size_t n;

	assert_int_equal(ndc_fastpath_count(fd, &n), 0);
	return n;
}

/* The table through its pins' fds, as another process would read it. */
static int lookup(int fd, int big_fd, int nx_fd, int config_fd, const uint8_t *lname, size_t nlen,
		  uint16_t qtype, struct ndc_fp_value *v)
{
	struct ndc_fp_key k;

	assert_int_equal(ndc_fastpath_key(lname, nlen, qtype, &k), 0);
	return ndc_fastpath_lookup(fd, big_fd, nx_fd, config_fd, &k, v);
}

static int lookup_text(int fd, int big_fd, int nx_fd, int config_fd, const char *name,
		       uint16_t qtype, struct ndc_fp_value *v)
{
	uint8_t lname[NDC_NAME_MAX];
	size_t nlen = wire(name, lname);

	return lookup(fd, big_fd, nx_fd, config_fd, lname, nlen, qtype, v);
}

static bool synced(struct fixture *f)
{
	struct ndc_fp_config c;
	uint32_t key = 0;

	assert_int_equal(bpf_map_lookup_elem(f->config_fd, &key, &c), 0);
	assert_int_equal(c.abi_version, NDC_ABI_VERSION);
	assert_int_equal(c.zone_len, sizeof(ZONE_WIRE));
	assert_memory_equal(c.zone, ZONE_WIRE, sizeof(ZONE_WIRE));
	return c.flags & NDC_FP_C_SYNCED;
}

/* A cluster record's value, as the fast path reads it: exactly what the answer says. */
static bool value_equal(const struct ndc_fp_value *got, const struct ndc_fp_value *want)
{
	return got->len == want->len && got->ancount == want->ancount &&
	       got->nscount == want->nscount && got->arcount == want->arcount &&
	       got->rcode == want->rcode && got->flags == want->flags && got->expire_ns == 0 &&
	       got->n_ttl == 0 && memcmp(got->data, want->data, want->len) == 0;
}

/*
 * The table against the record table, independent of the order foreach yields in. A name of the
 * zone is covered when the kernel never answers it wrongly: every answer present, or its
 * (name, 0) entry the pass marker. Names over NDC_FP_NAME_MAX are never looked up in the kernel.
 */
struct check {
	int fd, big_fd, nx_fd, config_fd;
	size_t yields;	  /* answers foreach gave, ANY's apart */
	size_t any;	  /* ANY answers foreach gave: the publisher leaves them to user space */
	size_t present;	  /* ... found in the table */
	size_t mismatch;  /* ... found with other bytes */
	size_t absent;	  /* of a type other than 0, not in the table */
	size_t too_big;	  /* ... because the answer is over NDC_FP_DATA_MAX */
	size_t passes;	  /* (name, 0) entries that are the pass marker */
	size_t uncovered; /* names of the zone the kernel would answer wrongly once synced */
	size_t n_missing, cap_missing;
	struct name {
		uint8_t n[NDC_NAME_MAX];
		size_t len;
		bool has_other; /* (name, 0) is an answer, not the pass marker */
	} * missing;		/* names with an absent answer */
	size_t n_other, cap_other;
	struct name *other; /* names whose (name, 0) entry holds an answer */
};

static void name_add(struct name **v, size_t *n, size_t *cap, const uint8_t *lname, size_t nlen)
{
	if (*n == *cap) {
		*cap = *cap ? *cap * 2 : 64;
		*v = realloc(*v, *cap * sizeof(**v));
		assert_non_null(*v);
	}
	memcpy((*v)[*n].n, lname, nlen);
	(*v)[*n].len = nlen;
	(*n)++;
}

static bool name_in(const struct name *v, size_t n, const uint8_t *lname, size_t nlen)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].len == nlen && !memcmp(v[i].n, lname, nlen))
			return true;
	return false;
}

static int check_one(void *arg, const uint8_t *lname, size_t nlen, uint16_t qtype,
		     const struct ndc_answer *a)
{
	struct check *c = arg;
	struct ndc_fp_value want, got;
	int want_r, r;

	if (qtype == NDC_T_ANY) {
		c->any++;
		if (nlen <= NDC_FP_NAME_MAX && lookup(c->fd, c->big_fd, c->nx_fd, c->config_fd,
						      lname, nlen, qtype, &got) != -ENOENT)
			c->mismatch++;
		return 0;
	}
	c->yields++;
	if (nlen > NDC_FP_NAME_MAX)
		return 0;
	want_r = ndc_fastpath_value(a, 0, 0, &want);
	r = lookup(c->fd, c->big_fd, c->nx_fd, c->config_fd, lname, nlen, qtype, &got);
	if (r == -ENOENT) {
		if (qtype == NDC_FP_QTYPE_OTHER) {
			/* A NXDOMAIN would be synthesised for every other type. */
			c->uncovered++;
			return 0;
		}
		c->absent++;
		if (want_r == -E2BIG)
			c->too_big++;
		if (!name_in(c->missing, c->n_missing, lname, nlen))
			name_add(&c->missing, &c->n_missing, &c->cap_missing, lname, nlen);
		return 0;
	}
	assert_int_equal(r, 0);
	c->present++;
	if (qtype == NDC_FP_QTYPE_OTHER && (got.flags & NDC_FP_V_PASS)) {
		c->passes++;
		if (got.len || got.ancount || got.nscount || got.arcount || got.expire_ns)
			c->mismatch++;
		return 0;
	}
	if (want_r || !value_equal(&got, &want))
		c->mismatch++;
	if (qtype == NDC_FP_QTYPE_OTHER)
		name_add(&c->other, &c->n_other, &c->cap_other, lname, nlen);
	return 0;
}

static void check_table(struct fixture *f, struct check *c)
{
	memset(c, 0, sizeof(*c));
	c->fd = f->answers_fd;
	c->big_fd = f->big_fd;
	c->nx_fd = f->nx_fd;
	c->config_fd = f->config_fd;
	assert_int_equal(ndc_records_foreach(f->rec, check_one, c), 0);
	/* An answer missing while (name, 0) answers NODATA: the kernel would deny a type it has. */
	for (size_t i = 0; i < c->n_missing; i++)
		if (name_in(c->other, c->n_other, c->missing[i].n, c->missing[i].len))
			c->uncovered++;
	free(c->missing);
	free(c->other);
	c->missing = c->other = NULL;
	/* Nothing in the table that the record table does not hold. */
	assert_int_equal(map_count(f->answers_fd), c->present);
}

static void check_nx(struct fixture *f)
{
	struct answer_buf nx;
	struct ndc_fp_value want, got;

	assert_int_equal(ndc_records_nxdomain(f->rec, &nx.a, NDC_ANSWER_DATA_MAX), 0);
	assert_int_equal(ndc_fastpath_value(&nx.a, 0, 0, &want), 0);
	assert_int_equal(ndc_fastpath_nx_read(f->nx_fd, &got), 0);
	assert_int_equal(got.rcode, NDC_RCODE_NXDOMAIN);
	assert_int_equal(got.nscount, 1);
	assert_true(value_equal(&got, &want));
}

/* ---------------------------------------------------------------------------------------------
 * A generated cluster: n ClusterIP services with a named port, and optionally a headless service
 * "big" with that many ready endpoints (its A and SRV answers exceed NDC_FP_DATA_MAX).
 */
struct sbuf {
	char *p;
	size_t len, cap;
};

static void sb_printf(struct sbuf *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(struct sbuf *s, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(s->p + s->len, s->cap - s->len, fmt, ap);
		va_end(ap);
		assert_true(n >= 0);
		if (s->len + (size_t)n < s->cap)
			break;
		s->cap = (s->cap + (size_t)n) * 2;
		s->p = realloc(s->p, s->cap);
		assert_non_null(s->p);
	}
	s->len += (size_t)n;
}

static char *gen_cluster(size_t n_services, size_t big_endpoints, size_t *ret_len)
{
	struct sbuf s = {.p = malloc(4096), .cap = 4096};

	assert_non_null(s.p);
	sb_printf(&s,
		  "{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":["
		  "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"gen\"}}");
	for (size_t i = 0; i < n_services; i++)
		sb_printf(&s,
			  ",{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":"
			  "\"svc-%zu\",\"namespace\":\"gen\"},\"spec\":{\"type\":\"ClusterIP\","
			  "\"clusterIP\":\"10.100.%zu.%zu\",\"ports\":[{\"name\":\"http\","
			  "\"port\":80,\"protocol\":\"TCP\"}]}}",
			  i, i / 250, i % 250 + 1);
	if (big_endpoints) {
		sb_printf(&s, ",{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":"
			      "\"big\",\"namespace\":\"gen\"},\"spec\":{\"type\":\"ClusterIP\","
			      "\"clusterIP\":\"None\",\"ports\":[{\"name\":\"http\",\"port\":80,"
			      "\"protocol\":\"TCP\"}]}}");
		sb_printf(&s, ",{\"apiVersion\":\"discovery.k8s.io/v1\",\"kind\":\"EndpointSlice\","
			      "\"metadata\":{\"name\":\"big-x1\",\"namespace\":\"gen\",\"labels\":"
			      "{\"kubernetes.io/service-name\":\"big\"}},\"addressType\":\"IPv4\","
			      "\"ports\":[{\"name\":\"http\",\"port\":80,\"protocol\":\"TCP\"}],"
			      "\"endpoints\":[");
		for (size_t i = 0; i < big_endpoints; i++)
			sb_printf(&s,
				  "%s{\"addresses\":[\"10.200.%zu.%zu\"],\"conditions\":"
				  "{\"ready\":true}}",
				  i ? "," : "", i / 250, i % 250 + 1);
		sb_printf(&s, "]}");
	}
	sb_printf(&s, "]}");
	*ret_len = s.len;
	return s.p;
}

/* ---------------------------------------------------------------------------------------------
 * 1-3: the record table.
 */

static void test_sample_cluster(void **state)
{
	struct fixture *f = *state;
	struct ndc_publisher_stats st;
	struct check c;

	records_build(f, ndc_sample_cluster, ndc_sample_cluster_len);
	fp_open(f, 0);
	assert_false(synced(f));
	assert_int_equal(ndc_publisher_load_records(f->pub, f->rec), 0);

	assert_true(synced(f));
	check_nx(f);
	check_table(f, &c);
	assert_true(c.yields > ndc_records_count(f->rec)); /* plus (name, 0) */
	assert_true(c.any > 0);				   /* none of them in the table */
	assert_int_equal(c.present, c.yields);
	assert_int_equal(c.mismatch, 0);
	assert_int_equal(c.absent, 0);
	assert_int_equal(c.passes, 0);
	assert_int_equal(c.uncovered, 0);
	ndc_publisher_stats(f->pub, &st);
	assert_int_equal(st.published, c.yields);
	assert_int_equal(st.too_big, 0);
	assert_int_equal(st.table_full, 0);
	assert_int_equal(st.passed, 0);
	assert_int_equal(st.removed, 0);

	/* Spot check one name by hand: the kube-dns service's A record is 10.96.0.10. */
	struct ndc_fp_value v;
	assert_int_equal(lookup_text(f->answers_fd, f->big_fd, f->nx_fd, f->config_fd,
				     "kube-dns.kube-system.svc." ZONE, NDC_T_A, &v),
			 0);
	assert_int_equal(v.ancount, 1);
	assert_int_equal(v.flags, NDC_FP_V_AA);
	assert_true(v.len >= 16);
	assert_memory_equal(v.data + v.len - 4, "\x0a\x60\x00\x0a", 4);
	assert_int_equal(lookup_text(f->answers_fd, f->big_fd, f->nx_fd, f->config_fd,
				     "nosuch.kube-system.svc." ZONE, NDC_T_A, &v),
			 -ENOENT);
}

static void test_oversized_answer(void **state)
{
	struct fixture *f = *state;
	struct ndc_publisher_stats st;
	struct ndc_fp_value v;
	struct answer_buf a;
	uint8_t big[NDC_NAME_MAX];
	size_t blen = wire(BIG_NAME, big), len;
	struct check c;
	char *json = gen_cluster(5, 100, &len);

	records_build(f, json, len);
	free(json);
	/* The premise: the socket path has the answer, and it is over the fast path's limit. */
	assert_int_equal(ndc_records_lookup(f->rec, big, blen, NDC_T_A, &a.a, NDC_ANSWER_DATA_MAX),
			 0);
	assert_int_equal(a.a.ancount, 100);
	assert_true(a.a.len > NDC_FP_DATA_MAX);

	fp_open(f, 0);
	assert_int_equal(ndc_publisher_load_records(f->pub, f->rec), 0);
	assert_true(synced(f));
	check_nx(f);

	assert_int_equal(
	    lookup(f->answers_fd, f->big_fd, f->nx_fd, f->config_fd, big, blen, NDC_T_A, &v),
	    -ENOENT);
	assert_int_equal(
	    lookup(f->answers_fd, f->big_fd, f->nx_fd, f->config_fd, big, blen, NDC_T_ANY, &v),
	    -ENOENT);
	assert_int_equal(lookup(f->answers_fd, f->big_fd, f->nx_fd, f->config_fd, big, blen,
				NDC_FP_QTYPE_OTHER, &v),
			 0);
	assert_int_equal(v.flags, NDC_FP_V_PASS);
	assert_int_equal(v.len, 0);
	assert_int_equal(v.ancount + v.nscount + v.arcount, 0);
	assert_int_equal(v.expire_ns, 0);
	/* A neighbour with small answers is published as usual. */
	assert_int_equal(lookup_text(f->answers_fd, f->big_fd, f->nx_fd, f->config_fd,
				     "svc-3.gen.svc." ZONE, NDC_T_A, &v),
			 0);
	assert_int_equal(v.flags, NDC_FP_V_AA);
	assert_int_equal(v.ancount, 1);
	assert_int_equal(lookup_text(f->answers_fd, f->big_fd, f->nx_fd, f->config_fd,
				     "svc-3.gen.svc." ZONE, NDC_FP_QTYPE_OTHER, &v),
			 0);
	assert_int_equal(v.flags & NDC_FP_V_PASS, 0);
	assert_int_equal(v.nscount, 1); /* NODATA with the SOA */

	check_table(f, &c);
	assert_int_equal(c.mismatch, 0);
	assert_int_equal(c.uncovered, 0);
	assert_true(c.absent >= 1); /* A at least; the SRV name's too */
	assert_int_equal(c.absent, c.too_big);
	assert_true(c.passes >= 1);
	ndc_publisher_stats(f->pub, &st);
	assert_true(st.too_big >= 1);
	assert_int_equal(st.too_big, c.absent);
	assert_int_equal(st.passed, c.passes);
	assert_int_equal(st.table_full, 0);
	assert_int_equal(st.published + st.passed, map_count(f->answers_fd));
}

/* Writes at the key of (name, qtype) an entry holding another name: a forced hash collision. */
static void plant(struct fixture *f, const char *name, uint16_t qtype, struct ndc_fp_value *ret)
{
	uint8_t lname[NDC_NAME_MAX];
	size_t nlen = wire(name, lname);
	struct ndc_fp_key k;

	assert_int_equal(ndc_fastpath_key(lname, nlen, qtype, &k), 0);
	memset(ret, 0, sizeof(*ret));
	ret->flags = NDC_FP_V_AA;
	ret->ancount = 1;
	ret->name_len = (uint8_t)nlen;
	memcpy(ret->name, lname, nlen);
	ret->name[0] ^= 0x01; /* same length, another first label */
	assert_int_equal(ndc_fastpath_put(f->fp, &k, ret), 0);
}

/*
 * A key held by another name is never overwritten: the name stays in user space. At an exact
 * type, the name gets the pass marker and the table stays synced; at the other-type entry not
 * even the marker fits, so the name is uncovered and no NXDOMAIN may be synthesised.
 */
static void test_collision(void **state)
{
	static const char kube_dns[] = "kube-dns.kube-system.svc." ZONE;
	static const char k8s[] = "kubernetes.default.svc." ZONE;
	struct fixture *f = *state;
	struct ndc_fp_value planted, v;

	records_build(f, ndc_sample_cluster, ndc_sample_cluster_len);
	fp_open(f, 0);
	plant(f, kube_dns, NDC_T_A, &planted);
	assert_int_equal(ndc_publisher_load_records(f->pub, f->rec), 0);
	assert_int_equal(
	    lookup_text(f->answers_fd, f->big_fd, f->nx_fd, f->config_fd, kube_dns, NDC_T_A, &v),
	    0);
	assert_memory_equal(&v, &planted, sizeof(v));
	assert_int_equal(lookup_text(f->answers_fd, f->big_fd, f->nx_fd, f->config_fd, kube_dns,
				     NDC_FP_QTYPE_OTHER, &v),
			 0);
	assert_int_equal(v.flags, NDC_FP_V_PASS);
	assert_true(synced(f));
	/* the rest as usual */
	assert_int_equal(
	    lookup_text(f->answers_fd, f->big_fd, f->nx_fd, f->config_fd, k8s, NDC_T_A, &v), 0);
	assert_int_equal(v.flags, NDC_FP_V_AA);

	plant(f, k8s, NDC_FP_QTYPE_OTHER, &planted);
	assert_int_equal(ndc_publisher_load_records(f->pub, f->rec), 0);
	assert_int_equal(lookup_text(f->answers_fd, f->big_fd, f->nx_fd, f->config_fd, k8s,
				     NDC_FP_QTYPE_OTHER, &v),
			 0);
	assert_memory_equal(&v, &planted, sizeof(v));
	assert_false(synced(f));
}

/* The contract: synced exactly when no name of the zone is left uncovered. */
static void check_claim(struct fixture *f, struct check *c)
{
	struct ndc_publisher_stats st;

	check_table(f, c);
	ndc_publisher_stats(f->pub, &st);
	assert_int_equal(c->mismatch, 0);
	assert_int_equal(synced(f), c->uncovered == 0);
	assert_int_equal(st.published + st.passed, c->present);
	check_nx(f);
}

static void test_table_too_small(void **state)
{
	struct fixture *f = *state;
	struct ndc_publisher_stats st;
	struct check c;
	size_t len, need;
	char *json = gen_cluster(300, 100, &len);

	records_build(f, json, len);
	free(json);

	/* Far too small: names are left out, so misses under the zone must not be NXDOMAIN. */
	fp_open(f, 1024);
	assert_int_equal(ndc_publisher_load_records(f->pub, f->rec), 0);
	check_claim(f, &c);
	assert_false(synced(f));
	assert_true(c.uncovered > 0);
	ndc_publisher_stats(f->pub, &st);
	assert_true(st.table_full > 0);
	assert_int_equal(map_count(f->answers_fd), 1024);
	fp_close(f);

	/* Big enough: how many entries the table needs. */
	fp_open(f, 0);
	assert_int_equal(ndc_publisher_load_records(f->pub, f->rec), 0);
	check_claim(f, &c);
	assert_true(synced(f));
	need = map_count(f->answers_fd);
	assert_true(need > 1024);
	fp_close(f);

	/* Exactly that many: everything fits, the pass marker of "big" included. */
	fp_open(f, (uint32_t)need);
	assert_int_equal(ndc_publisher_load_records(f->pub, f->rec), 0);
	check_claim(f, &c);
	assert_true(synced(f));
	assert_true(c.passes >= 1);
	ndc_publisher_stats(f->pub, &st);
	assert_int_equal(st.table_full, 0);
	fp_close(f);

	/* One less: the last entry does not fit; synced only if it was not needed for cover. */
	fp_open(f, (uint32_t)need - 1);
	assert_int_equal(ndc_publisher_load_records(f->pub, f->rec), 0);
	check_claim(f, &c);
	ndc_publisher_stats(f->pub, &st);
	assert_true(st.table_full >= 1);
	assert_int_equal(map_count(f->answers_fd), need - 1);
}

/* ---------------------------------------------------------------------------------------------
 * 4: upstream answers through the cache hook.
 */

static void cache_new(struct fixture *f, uint32_t max_entries)
{
	struct ndc_cache_opts o = {
	    .max_entries = max_entries,
	    .max_bytes = 1u << 24,
	    .max_ttl = 86400,
	    .neg_max_ttl = 3600,
	    .stale_max = 3600, /* the cache itself drops nothing during the test */
	};

	assert_int_equal(ndc_cache_new(&o, &f->cache), 0);
	ndc_cache_set_hook(f->cache, ndc_publisher_cache_hook, f->pub);
}

/* n A records of 192.0.2.x at name, each with ttl. */
static void build_a(struct answer_buf *b, const uint8_t *lname, size_t nlen, int n, uint32_t ttl)
{
	struct ndc_ab ab;

	ndc_ab_init(&ab, &b->a, NDC_ANSWER_DATA_MAX, lname, nlen);
	for (int i = 0; i < n; i++) {
		uint8_t ip[4] = {192, 0, 2, (uint8_t)(i + 1)};

		ndc_ab_rr(&ab, NDC_SEC_ANSWER, lname, nlen, NDC_T_A, NDC_C_IN, ttl, ip, 4);
	}
	assert_int_equal(ndc_ab_finish(&ab, NDC_RCODE_NOERROR, false), 0);
}

static void put(struct fixture *f, const char *name, uint16_t qclass, int n_rr, uint32_t ttl)
{
	uint8_t lname[NDC_NAME_MAX];
	size_t nlen = wire(name, lname);
	struct answer_buf a;

	build_a(&a, lname, nlen, n_rr, ttl);
	assert_int_equal(
	    ndc_cache_put(f->cache, lname, nlen, NDC_T_A, qclass, &a.a, ttl, ndc_now_ms()), 0);
	/* the hook queues; the drain thread writes the table */
	ndc_publisher_flush(f->pub);
}

static void test_hook_publish(void **state)
{
	struct fixture *f = *state;
	struct ndc_publisher_stats st;
	struct ndc_fp_value v;
	struct answer_buf a;
	uint8_t lname[NDC_NAME_MAX];
	size_t nlen = wire("www.example.com", lname);
	uint64_t before, after;

	fp_open(f, 0);
	cache_new(f, 1024);

	before = mono_ns();
	put(f, "www.example.com", NDC_C_IN, 1, 300);
	after = mono_ns();
	assert_int_equal(
	    lookup(f->answers_fd, f->big_fd, f->nx_fd, f->config_fd, lname, nlen, NDC_T_A, &v), 0);
	build_a(&a, lname, nlen, 1, 300);
	assert_int_equal(v.len, a.a.len);
	assert_memory_equal(v.data, a.a.data, a.a.len);
	assert_int_equal(v.ancount, 1);
	assert_int_equal(v.nscount + v.arcount, 0);
	assert_int_equal(v.rcode, 0);
	assert_int_equal(v.flags, 0); /* not authoritative */
	assert_true(v.insert_ns >= before && v.insert_ns <= after);
	assert_true(v.expire_ns >= before + 300 * NS && v.expire_ns <= after + 300 * NS);
	assert_int_equal(v.n_ttl, 1);
	assert_true(v.ttl_off[0] + 4u <= v.len);
	assert_int_equal(ndc_get32(v.data + v.ttl_off[0]), 300);
	/* Only that key: no other type, no pass marker, no NXDOMAIN business outside the zone. */
	assert_int_equal(map_count(f->answers_fd), 1);

	/* Class CH shares no key with IN in the table: never published. */
	put(f, "www.example.org", CLASS_CH, 1, 300);
	put(f, "version.bind", CLASS_CH, 1, 300);
	assert_int_equal(lookup_text(f->answers_fd, f->big_fd, f->nx_fd, f->config_fd,
				     "www.example.org", NDC_T_A, &v),
			 -ENOENT);
	assert_int_equal(lookup_text(f->answers_fd, f->big_fd, f->nx_fd, f->config_fd,
				     "version.bind", NDC_T_A, &v),
			 -ENOENT);
	assert_int_equal(map_count(f->answers_fd), 1);

	ndc_publisher_stats(f->pub, &st);
	assert_int_equal(st.published, 1);
	assert_int_equal(st.removed, 0);
	assert_false(synced(f)); /* upstream answers say nothing about the zone */

	/*
	 * Replaced in the cache by an answer the fast path cannot hold: the old one must not go on
	 * being served in the kernel while user space answers the new one.
	 */
	put(f, "www.example.com", NDC_C_IN, 40, 300);
	assert_int_equal(
	    lookup(f->answers_fd, f->big_fd, f->nx_fd, f->config_fd, lname, nlen, NDC_T_A, &v),
	    -ENOENT);
	ndc_publisher_stats(f->pub, &st);
	assert_int_equal(st.too_big, 1);
	assert_int_equal(st.published, 1);
	assert_int_equal(st.removed, 1);
	assert_int_equal(map_count(f->answers_fd), 0);

	/* And a small answer again is published again. */
	put(f, "www.example.com", NDC_C_IN, 2, 60);
	assert_int_equal(
	    lookup(f->answers_fd, f->big_fd, f->nx_fd, f->config_fd, lname, nlen, NDC_T_A, &v), 0);
	assert_int_equal(v.ancount, 2);
	assert_int_equal(v.n_ttl, 2);
}

static void test_hook_eviction(void **state)
{
	struct fixture *f = *state;
	struct ndc_publisher_stats st;
	struct ndc_cache_stats cs;
	struct ndc_fp_value v;
	char name[64];

	fp_open(f, 0);
	cache_new(f, 64); /* one shard, exact LRU */
	for (int i = 0; i < 64; i++) {
		snprintf(name, sizeof(name), "e%d.example.com", i);
		put(f, name, NDC_C_IN, 1, 300);
	}
	assert_int_equal(map_count(f->answers_fd), 64);
	ndc_publisher_stats(f->pub, &st);
	assert_int_equal(st.removed, 0);

	put(f, "e64.example.com", NDC_C_IN, 1, 300);
	ndc_cache_stats(f->cache, &cs);
	assert_int_equal(cs.evictions, 1);
	assert_int_equal(lookup_text(f->answers_fd, f->big_fd, f->nx_fd, f->config_fd,
				     "e0.example.com", NDC_T_A, &v),
			 -ENOENT);
	for (int i = 1; i <= 64; i++) {
		snprintf(name, sizeof(name), "e%d.example.com", i);
		assert_int_equal(lookup_text(f->answers_fd, f->big_fd, f->nx_fd, f->config_fd, name,
					     NDC_T_A, &v),
				 0);
	}
	assert_int_equal(map_count(f->answers_fd), 64);
	ndc_publisher_stats(f->pub, &st);
	assert_int_equal(st.removed, 1);
	assert_int_equal(st.published, 65);
	assert_int_equal(st.tracked, 64); /* the evicted key's filing went with it */
}

/*
 * A random-subdomain flood: 20,000 distinct names through a 64-entry cache. The expiry filings
 * follow the cache, not the names ever seen; and once every entry has expired and been swept,
 * nothing is left of them.
 */
static void test_hook_flood_bounded(void **state)
{
	struct fixture *f = *state;
	struct ndc_publisher_stats st;
	struct ndc_cache_stats cs;
	char name[64];
	uint64_t t0;

	fp_open(f, 0);
	cache_new(f, 64);
	for (int i = 0; i < 20000; i++) {
		snprintf(name, sizeof(name), "r%d.flood.example.com", i);
		put(f, name, NDC_C_IN, 1, i < 19936 ? 3600 : 1);
	}
	ndc_cache_stats(f->cache, &cs);
	assert_int_equal(cs.entries, 64);
	assert_int_equal(cs.evictions, 20000 - 64);
	ndc_publisher_stats(f->pub, &st);
	assert_int_equal(st.tracked, 64);
	assert_int_equal(map_count(f->answers_fd), 64);

	/* The last 64 had 1 s: swept within a few seconds, filings and entries both. */
	t0 = mono_ns();
	do {
		sleep_ms(100);
		ndc_publisher_stats(f->pub, &st);
	} while (st.tracked && mono_ns() < t0 + 5 * NS);
	assert_int_equal(st.tracked, 0);
	assert_int_equal(map_count(f->answers_fd), 0);
}

static void test_hook_expiry(void **state)
{
	struct fixture *f = *state;
	struct ndc_publisher_stats st;
	struct ndc_fp_value v;
	uint64_t t0;
	int r;

	fp_open(f, 0);
	cache_new(f, 1024);
	/* Each published again before any sweep could see its first expiry. */
	put(f, "short.example.com", NDC_C_IN, 1, 1);
	put(f, "again.example.com", NDC_C_IN, 1, 1);
	put(f, "again.example.com", NDC_C_IN, 1, 300);
	put(f, "later.example.com", NDC_C_IN, 1, 1);
	put(f, "later.example.com", NDC_C_IN, 1, 3);
	t0 = mono_ns();

	/* Not before it expires. */
	sleep_ms(900);
	assert_int_equal(lookup_text(f->answers_fd, f->big_fd, f->nx_fd, f->config_fd,
				     "short.example.com", NDC_T_A, &v),
			 0);

	/* Swept in the second after it expired (+1 s for the sweep's own period). */
	while ((r = lookup_text(f->answers_fd, f->big_fd, f->nx_fd, f->config_fd,
				"short.example.com", NDC_T_A, &v)) == 0 &&
	       mono_ns() < t0 + 4 * NS)
		sleep_ms(50);
	assert_int_equal(r, -ENOENT);
	assert_int_equal(lookup_text(f->answers_fd, f->big_fd, f->nx_fd, f->config_fd,
				     "later.example.com", NDC_T_A, &v),
			 0);

	/* The later expiry of the second put is the one that counts: swept then, not never. */
	while ((r = lookup_text(f->answers_fd, f->big_fd, f->nx_fd, f->config_fd,
				"later.example.com", NDC_T_A, &v)) == 0 &&
	       mono_ns() < t0 + 6 * NS)
		sleep_ms(50);
	assert_int_equal(r, -ENOENT);
	assert_true(mono_ns() >= t0 + 2 * NS);

	/* The sweep has been past its first expiry twice: the key published for 300 s stays. */
	assert_int_equal(lookup_text(f->answers_fd, f->big_fd, f->nx_fd, f->config_fd,
				     "again.example.com", NDC_T_A, &v),
			 0);
	assert_true(v.expire_ns > mono_ns() + 290 * NS);
	assert_int_equal(ndc_get32(v.data + v.ttl_off[0]), 300);
	ndc_publisher_stats(f->pub, &st);
	assert_int_equal(st.removed, 2);
	assert_int_equal(st.published, 5);
	assert_int_equal(st.tracked, 1); /* one filing per key, however often it was published */
	assert_int_equal(map_count(f->answers_fd), 1);
}

/* ---------------------------------------------------------------------------------------------
 * 5: free and close.
 */

static void test_free_close(void **state)
{
	struct fixture *f = *state;
	struct ndc_fp_value v;
	int fd, bfd, cfd;

	ndc_publisher_free(NULL);

	fp_open(f, 0);
	cache_new(f, 1024);
	put(f, "kept.example.com", NDC_C_IN, 1, 300);
	assert_true(pin_exists(NULL));
	for (size_t i = 0; i < sizeof(pin_names) / sizeof(pin_names[0]); i++)
		assert_true(pin_exists(pin_names[i]));

	/* The cache must not call into a freed publisher: it goes first. */
	ndc_cache_free(f->cache);
	f->cache = NULL;
	ndc_publisher_free(f->pub);
	f->pub = NULL;
	assert_int_equal(lookup_text(f->answers_fd, f->big_fd, f->nx_fd, f->config_fd,
				     "kept.example.com", NDC_T_A, &v),
			 0);

	/* Our fd keeps the map alive; the pins and the directory must be gone. */
	fd = dup(f->answers_fd);
	bfd = dup(f->big_fd);
	cfd = dup(f->config_fd);
	assert_true(fd >= 0 && bfd >= 0 && cfd >= 0);
	fp_close(f);
	for (size_t i = 0; i < sizeof(pin_names) / sizeof(pin_names[0]); i++)
		assert_false(pin_exists(pin_names[i]));
	assert_false(pin_exists(NULL));
	assert_int_equal(lookup_text(fd, bfd, -1, cfd, "kept.example.com", NDC_T_A, &v), 0);
	close(fd);
	close(bfd);
	close(cfd);
}

/* ---------------------------------------------------------------------------------------------
 */

static int ensure_bpffs(void)
{
	struct statfs st;

	if (statfs("/sys/fs/bpf", &st) == 0 && (uint32_t)st.f_type == BPF_FS_MAGIC_NR)
		return 0;
	/* As a system would at boot; left mounted, like the daemon's deployment expects. */
	if (mount("bpf", "/sys/fs/bpf", "bpf", 0, NULL) < 0)
		return -errno;
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_sample_cluster, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_oversized_answer, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_collision, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_table_too_small, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hook_publish, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hook_eviction, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hook_expiry, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hook_flood_bounded, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_free_close, setup, teardown),
	};
	int r;

	if (geteuid() != 0) {
		printf("test_publisher: loading BPF needs root; skipped\n");
		return 77;
	}
	r = ensure_bpffs();
	if (r < 0) {
		printf("test_publisher: /sys/fs/bpf is not bpffs and cannot be mounted (%s); "
		       "skipped\n",
		       strerror(-r));
		return 77;
	}
	snprintf(pin_dir, sizeof(pin_dir), "/sys/fs/bpf/ndcache-pubtest-%d", (int)getpid());
	atexit(remove_pins);
	ndc_log_level = NDC_LOG_ERR; /* the too-small table warns by design */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
