// SPDX-License-Identifier: MIT
/*
 * The fast path's loader and attach manager against the real kernel, in a network namespace of
 * the test's own (unshare at start: the host's links are never touched, and every veth dies with
 * the process). Root only: exits 77 (skip) otherwise.
 *   - load without attaching: pins, config, publish/unpublish/NX/synced/counters through the
 *     pinned maps, a full table, a key held by another name (hash collision: never overwritten
 *     nor removed), a restart after a crash (stale pins), -EPERM unprivileged;
 *   - tc: matching links present at open and created later get the filter, others do not; a
 *     link deleted and re-created with the same ifindex is attached again; a rename away from the
 *     patterns detaches; someone else's filter and clsact survive close; close removes ours;
 *   - XDP: attach and detach; a link that already runs someone else's program keeps it.
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <linux/if_link.h>
#include <linux/magic.h>
#include <net/if.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <ndc/abi.h>
#include <ndc/dns_wire.h>
#include <ndc/log.h>

#include "fastpath/fastpath.h"
#include "fastpath/fastpath_test.h"
#include "objects/objects.h"

#define A_CAP 1024

static char pin_dir[64];

struct answer_buf {
	union {
		struct ndc_answer a;
		uint8_t mem[sizeof(struct ndc_answer) + A_CAP];
	};
};

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
	char cmd[512];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	strncat(cmd, " >/dev/null 2>&1", sizeof(cmd) - strlen(cmd) - 1);
	st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};

	nanosleep(&ts, NULL);
}

static void add_veth(const char *name, const char *peer, int index)
{
	if (index)
		assert_int_equal(
		    sh("ip link add name %s index %d type veth peer name %s", name, index, peer),
		    0);
	else
		assert_int_equal(sh("ip link add name %s type veth peer name %s", name, peer), 0);
}

static uint32_t prog_id(int fd)
{
	struct bpf_prog_info info = {0};
	uint32_t len = sizeof(info);

	assert_int_equal(bpf_obj_get_info_by_fd(fd, &info, &len), 0);
	return info.id;
}

/* The program id of the tc filter at (handle, prio) on ingress of ifname, 0 if none. */
static uint32_t tc_id(const char *ifname, uint32_t handle, uint32_t prio)
{
	DECLARE_LIBBPF_OPTS(bpf_tc_hook, hook, .attach_point = BPF_TC_INGRESS);
	DECLARE_LIBBPF_OPTS(bpf_tc_opts, opts, .handle = handle, .priority = prio);

	hook.ifindex = (int)if_nametoindex(ifname);
	assert_int_not_equal(hook.ifindex, 0);
	if (bpf_tc_query(&hook, &opts) < 0)
		return 0;
	return opts.prog_id;
}

static uint32_t our_tc_id(const char *ifname)
{
	return tc_id(ifname, NDC_FP_TC_HANDLE, NDC_FP_TC_PRIO);
}

static bool has_clsact(const char *ifname)
{
	return sh("tc qdisc show dev %s | grep -q clsact", ifname) == 0;
}

static uint32_t xdp_id(const char *ifname, uint8_t *ret_mode)
{
	DECLARE_LIBBPF_OPTS(bpf_xdp_query_opts, q);
	int ifindex = (int)if_nametoindex(ifname);

	assert_int_not_equal(ifindex, 0);
	assert_int_equal(bpf_xdp_query(ifindex, 0, &q), 0);
	if (ret_mode)
		*ret_mode = q.attach_mode;
	return q.prog_id;
}

/* "Someone else's" program: return 0 (TC_ACT_OK) or 2 (XDP_PASS). */
static int load_trivial(enum bpf_prog_type type)
{
	const struct bpf_insn insns[] = {
	    {.code = BPF_ALU64 | BPF_MOV | BPF_K,
	     .dst_reg = BPF_REG_0,
	     .imm = type == BPF_PROG_TYPE_XDP ? 2 : 0},
	    {.code = BPF_JMP | BPF_EXIT},
	};
	int fd = bpf_prog_load(type, "other", "GPL", insns, 2, NULL);

	assert_true(fd >= 0);
	return fd;
}

static bool pin_exists(const char *map)
{
	char path[128];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", pin_dir, map);
	return stat(path, &st) == 0;
}

static int pinned_fd(const char *map)
{
	char path[128];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", pin_dir, map);
	fd = bpf_obj_get(path);
	assert_true(fd >= 0);
	return fd;
}

static void assert_no_pins(void)
{
	struct stat st;

	assert_false(pin_exists("ndc_answers"));
	assert_false(pin_exists("ndc_big"));
	assert_false(pin_exists("ndc_nx"));
	assert_false(pin_exists("ndc_config"));
	assert_false(pin_exists("ndc_counters"));
	assert_int_equal(stat(pin_dir, &st), -1);
}

static const uint8_t zone[] = "\7cluster\5local";
static const uint8_t pass[] = "\3pod\7cluster\5local";

static void base_opts(struct ndc_fastpath_opts *o, enum ndc_fp_attach attach, const char **pats,
		      size_t n_pats)
{
	static struct ndc_ip addrs[3];

	memset(addrs, 0, sizeof(addrs));
	addrs[0].family = AF_INET;
	inet_pton(AF_INET, "169.254.20.10", addrs[0].addr);
	addrs[1].family = AF_INET6;
	inet_pton(AF_INET6, "fd00::a", addrs[1].addr);
	addrs[2].family = AF_INET;
	inet_pton(AF_INET, "169.254.20.11", addrs[2].addr);
	memset(o, 0, sizeof(*o));
	o->attach = attach;
	o->patterns = (char *const *)pats;
	o->n_patterns = n_pats;
	o->addrs = addrs;
	o->n_addrs = 3;
	o->zone = zone;
	o->zone_len = sizeof(zone);
	o->pass = pass;
	o->pass_len = sizeof(pass);
	o->pin_dir = pin_dir;
}

static size_t wire(const char *text, uint8_t *out)
{
	size_t len;

	assert_int_equal(ndc_name_from_text(text, out, NDC_NAME_MAX, &len), 0);
	return len;
}

static void build_a(struct answer_buf *ab, const uint8_t *q, size_t qlen, uint32_t ttl)
{
	static const uint8_t ip[4] = {10, 96, 0, 1};
	struct ndc_ab b;

	ndc_ab_init(&b, &ab->a, A_CAP, q, qlen);
	ndc_ab_rr(&b, NDC_SEC_ANSWER, q, qlen, NDC_T_A, NDC_C_IN, ttl, ip, 4);
	assert_int_equal(ndc_ab_finish(&b, NDC_RCODE_NOERROR, true), 0);
}

/* ---------------------------------------------------------------------------------------------
 * Load only.
 */

static void test_config(void **state)
{
	struct ndc_fastpath_opts o;
	struct ndc_fp_config c;
	struct ndc_fp *fp;
	uint32_t k = 0;
	int fd;

	(void)state;
	base_opts(&o, NDC_FP_ATTACH_NONE, NULL, 0);
	o.redirect_peer = true;
	assert_int_equal(ndc_fastpath_open(&o, &fp), 0);
	assert_true(pin_exists("ndc_answers") && pin_exists("ndc_big") && pin_exists("ndc_nx") &&
		    pin_exists("ndc_config") && pin_exists("ndc_counters"));
	assert_true(ndc_fastpath_prog_fd(fp, NDC_FP_ATTACH_TC) >= 0);
	assert_true(ndc_fastpath_prog_fd(fp, NDC_FP_ATTACH_XDP) >= 0);
	assert_int_equal(ndc_fastpath_prog_fd(fp, NDC_FP_ATTACH_NONE), -EINVAL);

	fd = pinned_fd("ndc_config");
	assert_int_equal(bpf_map_lookup_elem(fd, &k, &c), 0);
	assert_int_equal(c.abi_version, NDC_ABI_VERSION);
	assert_int_equal(c.flags, NDC_FP_C_REDIRECT_PEER);
	assert_int_equal(c.n_addr4, 2);
	assert_int_equal(c.n_addr6, 1);
	assert_int_equal(c.addr4[0], htonl(0xa9fe140a));
	assert_int_equal(c.addr4[1], htonl(0xa9fe140b));
	assert_int_equal(c.addr6[0][0], 0xfd);
	assert_int_equal(c.addr6[0][15], 0x0a);
	assert_int_equal(c.port, htons(53));
	assert_int_equal(c.zone_len, sizeof(zone));
	assert_memory_equal(c.zone, zone, sizeof(zone));
	assert_int_equal(c.pass_len, sizeof(pass));
	assert_memory_equal(c.pass, pass, sizeof(pass));

	assert_int_equal(ndc_fastpath_set_synced(fp, true), 0);
	assert_int_equal(bpf_map_lookup_elem(fd, &k, &c), 0);
	assert_int_equal(c.flags, NDC_FP_C_REDIRECT_PEER | NDC_FP_C_SYNCED);
	assert_int_equal(c.n_addr4, 2);
	assert_int_equal(ndc_fastpath_set_synced(fp, false), 0);
	assert_int_equal(bpf_map_lookup_elem(fd, &k, &c), 0);
	assert_int_equal(c.flags, NDC_FP_C_REDIRECT_PEER);
	close(fd);

	ndc_fastpath_close(fp);
	assert_no_pins();
}

static void test_bad_opts(void **state)
{
	struct ndc_fastpath_opts o;
	struct ndc_ip many[NDC_FP_MAX_ADDRS + 1];
	struct ndc_fp *fp = (void *)1;

	(void)state;
	memset(many, 0, sizeof(many));
	for (int i = 0; i <= NDC_FP_MAX_ADDRS; i++)
		many[i].family = AF_INET;
	base_opts(&o, NDC_FP_ATTACH_NONE, NULL, 0);
	o.addrs = many;
	o.n_addrs = NDC_FP_MAX_ADDRS + 1;
	assert_int_equal(ndc_fastpath_open(&o, &fp), -E2BIG);
	assert_null(fp);
	base_opts(&o, NDC_FP_ATTACH_NONE, NULL, 0);
	o.zone_len = NDC_FP_NAME_MAX + 1;
	assert_int_equal(ndc_fastpath_open(&o, &fp), -ENAMETOOLONG);
	base_opts(&o, NDC_FP_ATTACH_NONE, NULL, 0);
	o.pin_dir = "/tmp/ndcache-test-not-bpffs";
	assert_int_equal(ndc_fastpath_open(&o, &fp), -EINVAL);
	rmdir("/tmp/ndcache-test-not-bpffs");
	assert_no_pins();
}

static void test_publish(void **state)
{
	uint8_t q[NDC_NAME_MAX], z[NDC_NAME_MAX], rd[2 * NDC_NAME_MAX + 20];
	size_t qlen = wire("web.prod.svc.cluster.local", q), zlen = wire("cluster.local", z);
	struct ndc_fastpath_opts o;
	struct answer_buf ab;
	struct ndc_fp_key key;
	struct ndc_fp_value v;
	struct ndc_fp *fp;
	struct ndc_ab b;
	int afd, bfd, cfd, nfd;

	(void)state;
	base_opts(&o, NDC_FP_ATTACH_NONE, NULL, 0);
	assert_int_equal(ndc_fastpath_open(&o, &fp), 0);
	afd = pinned_fd("ndc_answers");
	bfd = pinned_fd("ndc_big");
	cfd = pinned_fd("ndc_config");
	nfd = pinned_fd("ndc_nx");

	build_a(&ab, q, qlen, 30);
	assert_int_equal(ndc_fastpath_publish(fp, q, qlen, NDC_T_A, &ab.a, 30), 0);
	assert_int_equal(ndc_fastpath_key(q, qlen, NDC_T_A, &key), 0);
	assert_int_equal(ndc_fastpath_lookup(afd, bfd, nfd, cfd, &key, &v), 0);
	assert_int_equal(v.ancount, 1);
	assert_int_equal(v.flags, NDC_FP_V_AA);
	assert_int_equal(v.n_ttl, 1);
	assert_int_equal(v.expire_ns - v.insert_ns, 30000000000ull);
	assert_memory_equal(v.data, ab.a.data, ab.a.len);
	/* the same clock as bpf_ktime_get_ns: CLOCK_MONOTONIC, so close to now */
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	assert_true(v.insert_ns <= now && now - v.insert_ns < 5000000000ull);

	/* other type: its own key */
	assert_int_equal(ndc_fastpath_key(q, qlen, NDC_T_AAAA, &key), 0);
	assert_int_equal(ndc_fastpath_lookup(afd, bfd, nfd, cfd, &key, &v), -ENOENT);

	assert_int_equal(ndc_fastpath_unpublish(fp, q, qlen, NDC_T_A), 0);
	assert_int_equal(ndc_fastpath_key(q, qlen, NDC_T_A, &key), 0);
	assert_int_equal(ndc_fastpath_lookup(afd, bfd, nfd, cfd, &key, &v), -ENOENT);
	assert_int_equal(ndc_fastpath_unpublish(fp, q, qlen, NDC_T_A), -ENOENT);

	/* expiry sweep: not yet expired, never expires, expired, gone */
	assert_int_equal(ndc_fastpath_publish(fp, q, qlen, NDC_T_A, &ab.a, 30), 0);
	assert_int_equal(ndc_fastpath_key(q, qlen, NDC_T_A, &key), 0);
	assert_int_equal(ndc_fastpath_unpublish_expired(fp, &key), -EAGAIN);
	assert_int_equal(ndc_fastpath_publish(fp, q, qlen, NDC_T_A, &ab.a, 0), 0);
	assert_int_equal(ndc_fastpath_unpublish_expired(fp, &key), -EAGAIN);
	assert_int_equal(ndc_fastpath_lookup(afd, bfd, nfd, cfd, &key, &v), 0);
	v.expire_ns = 1; /* long past */
	assert_int_equal(ndc_fastpath_put(fp, &key, &v), 0);
	assert_int_equal(ndc_fastpath_unpublish_expired(fp, &key), 0);
	assert_int_equal(ndc_fastpath_lookup(afd, bfd, nfd, cfd, &key, &v), -ENOENT);
	assert_int_equal(ndc_fastpath_unpublish_expired(fp, &key), -ENOENT);

	/* pass marker: the any-other-type entry, no data */
	assert_int_equal(ndc_fastpath_publish_pass(fp, q, qlen), 0);
	assert_int_equal(ndc_fastpath_key(q, qlen, NDC_FP_QTYPE_OTHER, &key), 0);
	assert_int_equal(ndc_fastpath_lookup(afd, bfd, nfd, cfd, &key, &v), 0);
	assert_int_equal(v.flags, NDC_FP_V_PASS);
	assert_int_equal(v.len, 0);
	assert_int_equal(v.ancount + v.nscount + v.arcount, 0);
	assert_int_equal(ndc_fastpath_unpublish(fp, q, qlen, NDC_FP_QTYPE_OTHER), 0);

	/* the compression pointers would be wrong for another question length */
	assert_int_equal(ndc_fastpath_publish(fp, z, zlen, NDC_T_A, &ab.a, 0), -EINVAL);
	uint8_t longname[NDC_FP_NAME_MAX + 1];
	memset(longname, 1, sizeof(longname));
	assert_int_equal(ndc_fastpath_publish(fp, longname, sizeof(longname), NDC_T_A, &ab.a, 0),
			 -ENAMETOOLONG);

	/* NX: an SOA without a single compression pointer (any pointer depends on the qname) */
	memcpy(rd, z, zlen);
	memcpy(rd + zlen, z, zlen);
	memset(rd + 2 * zlen, 0, 20);
	struct ndc_wbuf w;
	memset(&ab.a, 0, sizeof(ab.a));
	ndc_wbuf_init(&w, ab.a.data, A_CAP);
	ndc_wbuf_bytes(&w, z, zlen);
	ndc_wbuf_u16(&w, NDC_T_SOA);
	ndc_wbuf_u16(&w, NDC_C_IN);
	ndc_wbuf_u32(&w, 5);
	ndc_wbuf_u16(&w, (uint16_t)(2 * zlen + 20));
	ndc_wbuf_bytes(&w, rd, 2 * zlen + 20);
	assert_int_equal(w.err, 0);
	ab.a.len = (uint16_t)w.len;
	ab.a.nscount = 1;
	ab.a.rcode = NDC_RCODE_NXDOMAIN;
	ab.a.aa = 1;
	assert_int_equal(ndc_fastpath_set_nx(fp, &ab.a), 0);
	assert_int_equal(ndc_fastpath_nx_read(nfd, &v), 0);
	assert_int_equal(v.rcode, NDC_RCODE_NXDOMAIN);
	assert_int_equal(v.nscount, 1);
	assert_int_equal(v.len, ab.a.len);
	assert_int_equal(v.expire_ns, 0);
	/* as the builder makes it: owner and rname compressed: refused */
	ndc_ab_init(&b, &ab.a, A_CAP, q, qlen);
	ndc_ab_rr(&b, NDC_SEC_AUTHORITY, z, zlen, NDC_T_SOA, NDC_C_IN, 5, rd, 2 * zlen + 20);
	assert_int_equal(ndc_ab_finish(&b, NDC_RCODE_NXDOMAIN, true), 0);
	assert_int_equal(ndc_fastpath_set_nx(fp, &ab.a), -EINVAL);

	close(afd);
	close(bfd);
	close(cfd);
	close(nfd);
	ndc_fastpath_close(fp);
	assert_no_pins();
}

static void test_table_full(void **state)
{
	struct ndc_fastpath_opts o;
	struct answer_buf ab;
	uint8_t q[NDC_NAME_MAX];
	struct ndc_fp *fp;
	char text[32];
	int r = 0, i;

	(void)state;
	base_opts(&o, NDC_FP_ATTACH_NONE, NULL, 0);
	o.max_entries = 8;
	assert_int_equal(ndc_fastpath_open(&o, &fp), 0);
	for (i = 0; i < 64 && r == 0; i++) {
		snprintf(text, sizeof(text), "n%d.example", i);
		size_t qlen = wire(text, q);
		build_a(&ab, q, qlen, 0);
		r = ndc_fastpath_publish(fp, q, qlen, NDC_T_A, &ab.a, 0);
	}
	assert_int_equal(r, -ENOSPC);
	assert_int_equal(i, 9);
	assert_int_equal(ndc_fastpath_publish_pass(fp, q, 1), -ENOSPC);
	ndc_fastpath_close(fp);
}

/*
 * A key held by another name (a hash collision, forced by writing the map directly): publishing,
 * marking and removing this name all leave that entry alone, and only an expired one is swept.
 */
static void test_publish_collision(void **state)
{
	uint8_t q[NDC_NAME_MAX], other[NDC_NAME_MAX];
	size_t qlen = wire("web.prod.svc.cluster.local", q);
	size_t olen = wire("api.prod.svc.cluster.local", other);
	struct ndc_fastpath_opts o;
	struct answer_buf ab;
	struct ndc_fp_key key, okey;
	struct ndc_fp_value v, planted;
	struct ndc_fp *fp;
	int afd, bfd, cfd;

	(void)state;
	base_opts(&o, NDC_FP_ATTACH_NONE, NULL, 0);
	assert_int_equal(ndc_fastpath_open(&o, &fp), 0);
	afd = pinned_fd("ndc_answers");
	bfd = pinned_fd("ndc_big");
	cfd = pinned_fd("ndc_config");
	build_a(&ab, q, qlen, 30);

	/* the publisher writes the name into the value */
	assert_int_equal(ndc_fastpath_publish(fp, q, qlen, NDC_T_A, &ab.a, 0), 0);
	assert_int_equal(ndc_fastpath_key(q, qlen, NDC_T_A, &key), 0);
	assert_int_equal(ndc_fastpath_lookup(afd, bfd, -1, cfd, &key, &v), 0);
	assert_int_equal(v.name_len, qlen);
	assert_memory_equal(v.name, q, qlen);
	for (size_t i = qlen; i < NDC_FP_NAME_MAX; i++)
		assert_int_equal(v.name[i], 0);
	/* its own entry: replaced */
	assert_int_equal(ndc_fastpath_publish(fp, q, qlen, NDC_T_A, &ab.a, 30), 0);
	assert_int_equal(ndc_fastpath_lookup(afd, bfd, -1, cfd, &key, &v), 0);
	assert_int_equal(v.n_ttl, 1);

	/* another name at the A key and at the other-type key */
	assert_int_equal(olen, qlen);
	planted = v;
	planted.expire_ns = 0;
	planted.n_ttl = 0;
	memset(planted.ttl_off, 0, sizeof(planted.ttl_off)); /* zero past n_ttl, as published */
	memset(planted.name, 0, sizeof(planted.name));
	memcpy(planted.name, other, olen);
	assert_int_equal(ndc_fastpath_put(fp, &key, &planted), 0);
	assert_int_equal(ndc_fastpath_key(q, qlen, NDC_FP_QTYPE_OTHER, &okey), 0);
	assert_int_equal(ndc_fastpath_put(fp, &okey, &planted), 0);

	assert_int_equal(ndc_fastpath_publish(fp, q, qlen, NDC_T_A, &ab.a, 0), -ENOSPC);
	assert_int_equal(ndc_fastpath_publish(fp, q, qlen, NDC_FP_QTYPE_OTHER, &ab.a, 0), -ENOSPC);
	assert_int_equal(ndc_fastpath_publish_pass(fp, q, qlen), -ENOSPC);
	assert_int_equal(ndc_fastpath_unpublish(fp, q, qlen, NDC_T_A), -ENOENT);
	assert_int_equal(ndc_fastpath_unpublish(fp, q, qlen, NDC_FP_QTYPE_OTHER), -ENOENT);
	assert_int_equal(ndc_fastpath_unpublish_expired(fp, &key), -EAGAIN);
	assert_int_equal(ndc_fastpath_lookup(afd, bfd, -1, cfd, &key, &v), 0);
	assert_memory_equal(&v, &planted, sizeof(v));
	assert_int_equal(ndc_fastpath_lookup(afd, bfd, -1, cfd, &okey, &v), 0);
	assert_memory_equal(&v, &planted, sizeof(v));

	/* the same name at another length is another name too */
	planted.name_len = (uint8_t)(qlen - 1);
	memcpy(planted.name, q, qlen - 1);
	planted.name[qlen - 1] = 0;
	assert_int_equal(ndc_fastpath_put(fp, &key, &planted), 0);
	assert_int_equal(ndc_fastpath_publish(fp, q, qlen, NDC_T_A, &ab.a, 0), -ENOSPC);
	assert_int_equal(ndc_fastpath_unpublish(fp, q, qlen, NDC_T_A), -ENOENT);

	/* expired, it goes whoever's it is; then the key is free for this name */
	planted.expire_ns = 1;
	assert_int_equal(ndc_fastpath_put(fp, &key, &planted), 0);
	assert_int_equal(ndc_fastpath_unpublish_expired(fp, &key), 0);
	assert_int_equal(ndc_fastpath_publish(fp, q, qlen, NDC_T_A, &ab.a, 0), 0);
	assert_int_equal(ndc_fastpath_lookup(afd, bfd, -1, cfd, &key, &v), 0);
	assert_memory_equal(v.name, q, qlen);
	assert_int_equal(ndc_fastpath_unpublish(fp, q, qlen, NDC_T_A), 0);

	close(afd);
	close(bfd);
	close(cfd);
	ndc_fastpath_close(fp);
	assert_no_pins();
}

static void test_counters(void **state)
{
	uint64_t sum[NDC_FP_COUNTER_MAX];
	struct ndc_fastpath_opts o;
	struct ndc_fp *fp;
	int ncpu = libbpf_num_possible_cpus(), fd;
	uint64_t *vals;

	(void)state;
	assert_true(ncpu > 0);
	base_opts(&o, NDC_FP_ATTACH_NONE, NULL, 0);
	assert_int_equal(ndc_fastpath_open(&o, &fp), 0);
	assert_int_equal(ndc_fastpath_counters(fp, sum), 0);
	for (int i = 0; i < NDC_FP_COUNTER_MAX; i++)
		assert_int_equal(sum[i], 0);
	/* write per-CPU values as the program would, then read the sums */
	vals = calloc((size_t)ncpu, sizeof(*vals));
	assert_non_null(vals);
	fd = pinned_fd("ndc_counters");
	for (uint32_t k = 0; k < NDC_FP_COUNTER_MAX; k++) {
		for (int c = 0; c < ncpu; c++)
			vals[c] = (uint64_t)(k + 1) * 1000 + (uint64_t)c;
		assert_int_equal(bpf_map_update_elem(fd, &k, vals, BPF_ANY), 0);
	}
	assert_int_equal(ndc_fastpath_counters(fp, sum), 0);
	for (int k = 0; k < NDC_FP_COUNTER_MAX; k++)
		assert_int_equal(sum[k], (uint64_t)(k + 1) * 1000 * (uint64_t)ncpu +
					     (uint64_t)ncpu * (uint64_t)(ncpu - 1) / 2);
	free(vals);
	close(fd);
	ndc_fastpath_close(fp);
}

/* A crash leaves the pins: the next open starts from an empty table and pins afresh. */
static void test_stale_pins(void **state)
{
	uint8_t q[NDC_NAME_MAX];
	size_t qlen = wire("stale.example", q);
	struct ndc_fastpath_opts o;
	struct answer_buf ab;
	struct ndc_fp_key key;
	struct ndc_fp_value v;
	struct ndc_fp *fp;
	int st, fd, bfd, cfd;
	pid_t pid;

	(void)state;
	base_opts(&o, NDC_FP_ATTACH_NONE, NULL, 0);
	build_a(&ab, q, qlen, 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (ndc_fastpath_open(&o, &fp) < 0 ||
		    ndc_fastpath_publish(fp, q, qlen, NDC_T_A, &ab.a, 0) < 0)
			_exit(1);
		_exit(0); /* no close: the pins stay behind */
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_true(pin_exists("ndc_answers") && pin_exists("ndc_big"));
	assert_int_equal(ndc_fastpath_key(q, qlen, NDC_T_A, &key), 0);
	fd = pinned_fd("ndc_answers");
	bfd = pinned_fd("ndc_big");
	cfd = pinned_fd("ndc_config");
	assert_int_equal(ndc_fastpath_lookup(fd, bfd, -1, cfd, &key, &v), 0);
	close(fd);
	close(bfd);
	close(cfd);

	assert_int_equal(ndc_fastpath_open(&o, &fp), 0);
	fd = pinned_fd("ndc_answers");
	bfd = pinned_fd("ndc_big");
	cfd = pinned_fd("ndc_config");
	assert_int_equal(ndc_fastpath_lookup(fd, bfd, -1, cfd, &key, &v), -ENOENT);
	close(fd);
	close(bfd);
	close(cfd);
	ndc_fastpath_close(fp);
	assert_no_pins();
}

static void test_unprivileged(void **state)
{
	struct ndc_fastpath_opts o;
	struct ndc_fp *fp;
	int st;
	pid_t pid;

	(void)state;
	base_opts(&o, NDC_FP_ATTACH_NONE, NULL, 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* leaving uid 0 clears the effective capabilities */
		if (setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0)
			_exit(2);
		_exit(ndc_fastpath_open(&o, &fp) == -EPERM && fp == NULL ? 0 : 1);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	assert_no_pins();
}

/* ---------------------------------------------------------------------------------------------
 * Attach.
 */

static bool wait_tc(const char *ifname, uint32_t id)
{
	for (int i = 0; i < 100; i++) {
		if (our_tc_id(ifname) == id)
			return true;
		sleep_ms(10);
	}
	return false;
}

static void test_tc(void **state)
{
	const char *pats[] = {"ndcx*", "ndctest*"};
	struct ndc_fastpath_opts o;
	struct ndc_fp *fp;
	uint32_t id, other_id;
	int other;

	(void)state;
	add_veth("ndctest0", "ndcpeer0", 0);
	/* ndctest2 already has a clsact with someone else's filter */
	add_veth("ndctest2", "ndcpeer2", 0);
	assert_int_equal(sh("tc qdisc add dev ndctest2 clsact"), 0);
	other = load_trivial(BPF_PROG_TYPE_SCHED_CLS);
	other_id = prog_id(other);
	{
		DECLARE_LIBBPF_OPTS(bpf_tc_hook, hook, .attach_point = BPF_TC_INGRESS);
		DECLARE_LIBBPF_OPTS(bpf_tc_opts, to, .handle = 1, .priority = 1, .prog_fd = other);
		hook.ifindex = (int)if_nametoindex("ndctest2");
		assert_int_equal(bpf_tc_attach(&hook, &to), 0);
	}

	base_opts(&o, NDC_FP_ATTACH_TC, pats, 2);
	assert_int_equal(ndc_fastpath_open(&o, &fp), 0);
	id = prog_id(ndc_fastpath_prog_fd(fp, NDC_FP_ATTACH_TC));
	/* present at open: attached before open returned */
	assert_int_equal(our_tc_id("ndctest0"), id);
	assert_int_equal(our_tc_id("ndctest2"), id);
	assert_int_equal(tc_id("ndctest2", 1, 1), other_id);
	assert_int_equal(our_tc_id("ndcpeer0"), 0);
	assert_false(has_clsact("ndcpeer0"));
	assert_int_equal(our_tc_id("lo"), 0);

	/* created after open, with a fixed ifindex to re-use below */
	add_veth("ndctest1", "ndcpeer1", 4242);
	assert_true(wait_tc("ndctest1", id));
	assert_int_equal(our_tc_id("ndcpeer1"), 0);
	/* gone and back with the same ifindex: attached again, so the watch forgot it */
	assert_int_equal(sh("ip link del ndctest1"), 0);
	add_veth("ndctest1", "ndcpeer1", 4242);
	assert_true(wait_tc("ndctest1", id));
	assert_int_equal(if_nametoindex("ndctest1"), 4242);

	/* renamed away from the patterns: detached */
	assert_int_equal(sh("ip link set ndctest0 name ndcaway0"), 0);
	for (int i = 0; i < 100 && our_tc_id("ndcaway0") != 0; i++)
		sleep_ms(10);
	assert_int_equal(our_tc_id("ndcaway0"), 0);
	assert_false(has_clsact("ndcaway0"));

	ndc_fastpath_close(fp);
	assert_int_equal(our_tc_id("ndctest1"), 0);
	assert_false(has_clsact("ndctest1"));
	/* not ours: the qdisc and the other filter stay */
	assert_int_equal(our_tc_id("ndctest2"), 0);
	assert_true(has_clsact("ndctest2"));
	assert_int_equal(tc_id("ndctest2", 1, 1), other_id);
	assert_no_pins();

	close(other);
	sh("ip link del ndcaway0");
	sh("ip link del ndctest1");
	sh("ip link del ndctest2");
}

static void test_xdp(void **state)
{
	const char *pats[] = {"ndctest*"};
	struct ndc_fastpath_opts o;
	struct ndc_fp *fp;
	uint32_t id, other_id;
	uint8_t mode = 0;
	int other;

	(void)state;
	add_veth("ndctest3", "ndcpeer3", 0);
	/* ndctest4 already runs someone else's XDP program */
	add_veth("ndctest4", "ndcpeer4", 0);
	other = load_trivial(BPF_PROG_TYPE_XDP);
	other_id = prog_id(other);
	assert_int_equal(
	    bpf_xdp_attach((int)if_nametoindex("ndctest4"), other, XDP_FLAGS_SKB_MODE, NULL), 0);

	base_opts(&o, NDC_FP_ATTACH_XDP, pats, 1);
	assert_int_equal(ndc_fastpath_open(&o, &fp), 0);
	id = prog_id(ndc_fastpath_prog_fd(fp, NDC_FP_ATTACH_XDP));
	assert_int_equal(xdp_id("ndctest3", &mode), id);
	/* veth has native XDP */
	assert_int_equal(mode, XDP_ATTACHED_DRV);
	assert_int_equal(xdp_id("ndcpeer3", NULL), 0);
	assert_int_equal(xdp_id("ndctest4", NULL), other_id);

	add_veth("ndctest5", "ndcpeer5", 0);
	bool seen = false;
	for (int i = 0; i < 100 && !seen; i++) {
		seen = xdp_id("ndctest5", NULL) == id;
		if (!seen)
			sleep_ms(10);
	}
	assert_true(seen);

	ndc_fastpath_close(fp);
	assert_int_equal(xdp_id("ndctest3", NULL), 0);
	assert_int_equal(xdp_id("ndctest5", NULL), 0);
	assert_int_equal(xdp_id("ndctest4", NULL), other_id);
	assert_no_pins();

	close(other);
	sh("ip link del ndctest3");
	sh("ip link del ndctest4");
	sh("ip link del ndctest5");
}

/*
 * A pin directory under /sys/fs/bpf where no bpffs is mounted (a fresh mount namespace, as `ip
 * netns exec` makes one): the fast path mounts bpffs there and opens, as it does for its default
 * directory; a directory elsewhere that is not on bpffs is refused, nothing mounted for it. In a
 * child with a mount namespace of its own, so that the host's /sys/fs/bpf is never touched.
 */
static void test_pin_dir_unmounted(void **state)
{
	static const char *const why[] = {
	    [1] = "the fast path did not open under an unmounted /sys/fs/bpf",
	    [2] = "its pin directory is not on bpffs after the open",
	    [3] = "a pin directory elsewhere, not on bpffs, was taken",
	    [4] = "bpffs at /sys/fs/bpf could not be unmounted in the child's namespace",
	    [5] = "mkdtemp failed",
	};
	pid_t pid;
	int st;

	(void)state;
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct ndc_fastpath_opts o;
		char other[] = "/tmp/ndcache-notbpf-XXXXXX";
		struct statfs sf;
		struct ndc_fp *fp;
		int r;

		if (unshare(CLONE_NEWNS) < 0 ||
		    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
			_exit(77);
		/* every bpffs stacked at /sys/fs/bpf, in this namespace only */
		for (int n = 0; n < 16 && statfs("/sys/fs/bpf", &sf) == 0 &&
				(uint32_t)sf.f_type == BPF_FS_MAGIC;
		     n++)
			if (umount2("/sys/fs/bpf", MNT_DETACH) < 0)
				_exit(4);
		if (statfs("/sys/fs/bpf", &sf) < 0 || (uint32_t)sf.f_type == BPF_FS_MAGIC)
			_exit(4);
		base_opts(&o, NDC_FP_ATTACH_NONE, NULL,
			  0); /* pin_dir: /sys/fs/bpf/ndcache-test-PID */
		if (ndc_fastpath_open(&o, &fp) < 0)
			_exit(1);
		r = statfs(pin_dir, &sf) == 0 && (uint32_t)sf.f_type == BPF_FS_MAGIC;
		ndc_fastpath_close(fp);
		if (!r)
			_exit(2);
		if (!mkdtemp(other))
			_exit(5);
		o.pin_dir = other;
		r = ndc_fastpath_open(&o, &fp);
		if (r == 0)
			ndc_fastpath_close(fp);
		rmdir(other);
		_exit(r == -EINVAL ? 0 : 3);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	if (WEXITSTATUS(st) == 77) {
		printf(
		    "pin directory under an unmounted /sys/fs/bpf: skipped (no mount namespace)\n");
		skip();
	}
	if (WEXITSTATUS(st) != 0)
		fail_msg("pin directory under an unmounted /sys/fs/bpf: %s (exit %d)",
			 WEXITSTATUS(st) < 6 && why[WEXITSTATUS(st)] ? why[WEXITSTATUS(st)] : "?",
			 WEXITSTATUS(st));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_config),
	    cmocka_unit_test(test_bad_opts),
	    cmocka_unit_test(test_publish),
	    cmocka_unit_test(test_table_full),
	    cmocka_unit_test(test_publish_collision),
	    cmocka_unit_test(test_counters),
	    cmocka_unit_test(test_stale_pins),
	    cmocka_unit_test(test_pin_dir_unmounted),
	    cmocka_unit_test(test_unprivileged),
	    cmocka_unit_test(test_tc),
	    cmocka_unit_test(test_xdp),
	};
	int r;

	if (geteuid() != 0) {
		fprintf(stderr,
			"test_fastpath_attach: needs root (loads BPF, creates links), skip\n");
		return 77;
	}
	/* Our own network namespace: the veths die with us, the host's links are never touched. */
	if (unshare(CLONE_NEWNET) < 0) {
		fprintf(stderr, "test_fastpath_attach: unshare(CLONE_NEWNET): %s, skip\n",
			strerror(errno));
		return 77;
	}
	snprintf(pin_dir, sizeof(pin_dir), "/sys/fs/bpf/ndcache-test-%d", (int)getpid());
	r = cmocka_run_group_tests(tests, NULL, NULL);
	/* after a failed assertion the pins of that test may remain */
	sh("rm -rf %s", pin_dir);
	return r;
}
