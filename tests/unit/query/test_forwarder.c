// SPDX-License-Identifier: MIT
/*
 * Forwarder against a scripted fake upstream on 127.0.0.1 (UDP and TCP on the same ephemeral
 * port), with replies built by the wire helpers. No packet leaves loopback.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "query/query.h"

enum fake_mode {
	M_ANSWER,     /* one A record, TTL 300 */
	M_NX_SOA,     /* NXDOMAIN, SOA TTL soa_ttl, MINIMUM soa_min */
	M_NODATA_SOA, /* NOERROR, no answer, same SOA */
	M_NX_NOSOA,   /* NXDOMAIN, empty authority */
	M_WRONG_ID,   /* a reply with another ID (and address), then the right one */
	M_OTHER_Q,    /* a reply for another name with our ID, then the right one */
	M_LOWERCASE,  /* echoes the question lowercased: 0x20 not preserved */
	M_TC,	      /* UDP: truncated; TCP: BIG_COUNT A records */
	M_SILENT,     /* never answers */
	M_SERVFAIL,
	M_DELAY, /* answers after delay_ms */
};

#define BIG_COUNT 40

static const uint8_t IP_GOOD[4] = {192, 0, 2, 1}; /* data only: never an address we send to */
static const uint8_t IP_SPOOF[4] = {192, 0, 2, 66};

struct fake {
	int udp, tcp;
	uint16_t port;
	enum fake_mode mode;
	uint32_t soa_ttl, soa_min;
	int delay_ms;
	pthread_t thread;
	int stop;
	/* Written by the fake thread, read by the test after a callback: atomics. */
	int udp_queries, tcp_queries;
	int bad_queries; /* no EDNS 1232, no RD, or not parseable */
	uint8_t last_qname[NDC_NAME_MAX];
	size_t last_qlen;
	pthread_mutex_t lock;
};

static size_t build_answer(const struct ndc_query *q, enum fake_mode mode, const uint8_t *ip,
			   struct ndc_answer *a, size_t cap, uint32_t soa_ttl, uint32_t soa_min)
{
	static const uint8_t zone[] = "\4test";
	struct ndc_ab b;
	uint8_t soa[64];
	size_t sl = 0;

	ndc_ab_init(&b, a, cap, q->lname, q->qname_len);
	memcpy(soa + sl, "\2ns\4test", 9);
	sl += 9;
	memcpy(soa + sl, "\5admin\4test", 12);
	sl += 12;
	ndc_put32(soa + sl, 2024010101);
	ndc_put32(soa + sl + 4, 3600);
	ndc_put32(soa + sl + 8, 600);
	ndc_put32(soa + sl + 12, 86400);
	ndc_put32(soa + sl + 16, soa_min);
	sl += 20;
	switch (mode) {
	case M_NX_SOA:
	case M_NODATA_SOA:
		ndc_ab_rr(&b, NDC_SEC_AUTHORITY, zone, sizeof(zone), NDC_T_SOA, NDC_C_IN, soa_ttl,
			  soa, sl);
		assert_int_equal(ndc_ab_finish(&b, mode == M_NX_SOA ? NDC_RCODE_NXDOMAIN : 0, true),
				 0);
		break;
	case M_NX_NOSOA:
		assert_int_equal(ndc_ab_finish(&b, NDC_RCODE_NXDOMAIN, false), 0);
		break;
	case M_SERVFAIL:
		assert_int_equal(ndc_ab_finish(&b, NDC_RCODE_SERVFAIL, false), 0);
		break;
	case M_TC:
		for (int i = 0; i < BIG_COUNT; i++) {
			uint8_t rd[4] = {192, 0, 2, (uint8_t)i};

			ndc_ab_rr(&b, NDC_SEC_ANSWER, q->lname, q->qname_len, NDC_T_A, NDC_C_IN,
				  300, rd, 4);
		}
		assert_int_equal(ndc_ab_finish(&b, 0, false), 0);
		break;
	default:
		ndc_ab_rr(&b, NDC_SEC_ANSWER, q->lname, q->qname_len, NDC_T_A, NDC_C_IN, 300, ip,
			  4);
		assert_int_equal(ndc_ab_finish(&b, 0, false), 0);
		break;
	}
	return ndc_answer_size(a);
}

static void fake_reply(struct fake *fk, const struct ndc_query *q, enum fake_mode mode,
		       const uint8_t *ip, size_t limit, const struct sockaddr_in *to, int tcp_fd)
{
	struct {
		struct ndc_answer a;
		uint8_t data[2048];
	} ans;
	uint8_t out[2 + 4096];
	size_t len;

	build_answer(q, mode, ip, &ans.a, sizeof(ans.data), fk->soa_ttl, fk->soa_min);
	assert_int_equal(
	    ndc_dns_write_reply(q, &ans.a, 0, 0, limit, out + 2, sizeof(out) - 2, &len), 0);
	if (tcp_fd >= 0) {
		ndc_put16(out, (uint16_t)len);
		assert_int_equal(write(tcp_fd, out, len + 2), (ssize_t)(len + 2));
	} else {
		sendto(fk->udp, out + 2, len, 0, (const struct sockaddr *)to, sizeof(*to));
	}
}

static void note_query(struct fake *fk, const struct ndc_query *q, bool tcp)
{
	pthread_mutex_lock(&fk->lock);
	if (tcp)
		fk->tcp_queries++;
	else
		fk->udp_queries++;
	if (!q->has_edns || q->udp_size != NDC_EDNS_UDP_MAX || !(q->flags & NDC_F_RD))
		fk->bad_queries++;
	memcpy(fk->last_qname, q->qname, q->qname_len);
	fk->last_qlen = q->qname_len;
	pthread_mutex_unlock(&fk->lock);
}

static void fake_udp(struct fake *fk)
{
	uint8_t pkt[4096];
	struct sockaddr_in from;
	socklen_t fl = sizeof(from);
	struct ndc_query q, other;
	ssize_t n = recvfrom(fk->udp, pkt, sizeof(pkt), 0, (struct sockaddr *)&from, &fl);

	if (n < 0)
		return;
	if (ndc_dns_parse_query(pkt, (size_t)n, &q)) {
		pthread_mutex_lock(&fk->lock);
		fk->bad_queries++;
		pthread_mutex_unlock(&fk->lock);
		return;
	}
	note_query(fk, &q, false);
	/* A test may switch a running fake's mode (a dead upstream coming back). */
	switch (__atomic_load_n(&fk->mode, __ATOMIC_ACQUIRE)) {
	case M_SILENT:
		return;
	case M_WRONG_ID:
		q.id ^= 0x5a5a;
		fake_reply(fk, &q, M_ANSWER, IP_SPOOF, 4096, &from, -1);
		q.id ^= 0x5a5a;
		fake_reply(fk, &q, M_ANSWER, IP_GOOD, 4096, &from, -1);
		return;
	case M_OTHER_Q: {
		size_t l;

		other = q;
		assert_int_equal(ndc_name_from_text("other.test", other.qname, NDC_NAME_MAX, &l),
				 0);
		memcpy(other.lname, other.qname, l);
		other.qname_len = (uint8_t)l;
		fake_reply(fk, &other, M_ANSWER, IP_SPOOF, 4096, &from, -1);
		/* Same name, other type: also not our question. */
		other = q;
		other.qtype = NDC_T_AAAA;
		fake_reply(fk, &other, M_ANSWER, IP_SPOOF, 4096, &from, -1);
		fake_reply(fk, &q, M_ANSWER, IP_GOOD, 4096, &from, -1);
		return;
	}
	case M_LOWERCASE:
		memcpy(q.qname, q.lname, q.qname_len);
		fake_reply(fk, &q, M_ANSWER, IP_GOOD, 4096, &from, -1);
		return;
	case M_TC:
		fake_reply(fk, &q, M_TC, IP_GOOD, 200, &from, -1);
		return;
	case M_DELAY: {
		struct timespec ts = {.tv_nsec = (long)fk->delay_ms * 1000000};

		nanosleep(&ts, NULL);
		fake_reply(fk, &q, M_ANSWER, IP_GOOD, 4096, &from, -1);
		return;
	}
	default:
		fake_reply(fk, &q, __atomic_load_n(&fk->mode, __ATOMIC_ACQUIRE), IP_GOOD, 4096,
			   &from, -1);
		return;
	}
}

static int read_full(int fd, uint8_t *p, size_t n)
{
	while (n) {
		ssize_t r = read(fd, p, n);

		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

static void fake_tcp(struct fake *fk)
{
	struct timeval tv = {.tv_sec = 2};
	uint8_t pkt[4096];
	struct ndc_query q;
	int c = accept(fk->tcp, NULL, NULL);
	uint16_t len;

	if (c < 0)
		return;
	setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (read_full(c, pkt, 2) == 0) {
		len = ndc_get16(pkt);
		if (read_full(c, pkt, len) == 0 && ndc_dns_parse_query(pkt, len, &q) == 0) {
			note_query(fk, &q, true);
			if (fk->mode != M_SILENT)
				fake_reply(fk, &q, fk->mode, IP_GOOD, NDC_MSG_MAX, NULL, c);
		}
	}
	close(c);
}

static void *fake_thread(void *arg)
{
	struct fake *fk = arg;

	while (!__atomic_load_n(&fk->stop, __ATOMIC_ACQUIRE)) {
		struct pollfd p[2] = {{.fd = fk->udp, .events = POLLIN},
				      {.fd = fk->tcp, .events = POLLIN}};

		if (poll(p, 2, 20) <= 0)
			continue;
		if (p[0].revents & POLLIN)
			fake_udp(fk);
		if (p[1].revents & POLLIN)
			fake_tcp(fk);
	}
	return NULL;
}

/* Sockets only: set soa_ttl etc., then fake_run. */
static struct fake *fake_open(enum fake_mode mode)
{
	struct fake *fk = calloc(1, sizeof(*fk));
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	int one = 1;

	assert_non_null(fk);
	fk->mode = mode;
	fk->soa_ttl = 600;
	fk->soa_min = 60;
	fk->delay_ms = 200;
	pthread_mutex_init(&fk->lock, NULL);
	/* TC retries go to the same address and port over TCP: bind both to one port. */
	for (int tries = 0;; tries++) {
		assert_true(tries < 20);
		fk->tcp = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		assert_true(fk->tcp >= 0);
		setsockopt(fk->tcp, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		sa.sin_port = 0;
		assert_int_equal(bind(fk->tcp, (struct sockaddr *)&sa, sizeof(sa)), 0);
		assert_int_equal(listen(fk->tcp, 16), 0);
		assert_int_equal(getsockname(fk->tcp, (struct sockaddr *)&sa, &sl), 0);
		fk->udp = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		assert_true(fk->udp >= 0);
		if (bind(fk->udp, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			break;
		close(fk->udp);
		close(fk->tcp);
	}
	fk->port = ntohs(sa.sin_port);
	return fk;
}

static struct fake *fake_run(struct fake *fk)
{
	assert_int_equal(pthread_create(&fk->thread, NULL, fake_thread, fk), 0);
	return fk;
}

static struct fake *fake_start(enum fake_mode mode)
{
	return fake_run(fake_open(mode));
}

static void fake_stop(struct fake *fk)
{
	__atomic_store_n(&fk->stop, 1, __ATOMIC_RELEASE);
	pthread_join(fk->thread, NULL);
	close(fk->udp);
	close(fk->tcp);
	pthread_mutex_destroy(&fk->lock);
	free(fk);
}

enum { CNT_UDP, CNT_TCP, CNT_BAD };

static int fake_count(struct fake *fk, int which)
{
	int n;

	pthread_mutex_lock(&fk->lock);
	n = which == CNT_UDP   ? fk->udp_queries
	    : which == CNT_TCP ? fk->tcp_queries
			       : fk->bad_queries;
	pthread_mutex_unlock(&fk->lock);
	return n;
}

/*
 * A silent fake counts a query when its thread reads it, which under load can be after the
 * forwarder has already timed out on it: poll (up to 5 s) until the count reaches want.
 */
static int fake_count_wait(struct fake *fk, int which, int want)
{
	int n = fake_count(fk, which);

	for (int i = 0; i < 500 && n < want; i++) {
		usleep(10000);
		n = fake_count(fk, which);
	}
	return n;
}

/* The last query's name as sent (0x20 case included). */
static size_t fake_last_qname(struct fake *fk, uint8_t *out)
{
	size_t n;

	pthread_mutex_lock(&fk->lock);
	n = fk->last_qlen;
	memcpy(out, fk->last_qname, n);
	pthread_mutex_unlock(&fk->lock);
	return n;
}

static struct sockaddr_storage loopback(uint16_t port)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *sin = (struct sockaddr_in *)&ss;

	memset(&ss, 0, sizeof(ss));
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin->sin_port = htons(port);
	return ss;
}

/* A loopback UDP port nobody listens on: the kernel answers with ICMP port unreachable. */
static uint16_t closed_port(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	assert_true(s >= 0);
	assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(getsockname(s, (struct sockaddr *)&sa, &sl), 0);
	close(s);
	return ntohs(sa.sin_port);
}

/* ------------------------------------------------------------------------------------------- */

#define MAX_RESULTS 64

struct box {
	pthread_mutex_t m;
	pthread_cond_t c;
	int n;
	int status[MAX_RESULTS];
	bool stale[MAX_RESULTS];
	uint32_t age[MAX_RESULTS];
	bool had_answer[MAX_RESULTS];
	struct {
		struct ndc_answer a;
		uint8_t data[4096];
	} first; /* the first callback's answer */
};

static void box_init(struct box *b)
{
	memset(b, 0, sizeof(*b));
	pthread_mutex_init(&b->m, NULL);
	pthread_cond_init(&b->c, NULL);
}

static void on_done(void *arg, const struct ndc_fwd_result *res)
{
	struct box *b = arg;

	pthread_mutex_lock(&b->m);
	if (b->n < MAX_RESULTS) {
		b->status[b->n] = res->status;
		b->stale[b->n] = res->stale;
		b->age[b->n] = res->age;
		b->had_answer[b->n] = res->answer != NULL;
		if (b->n == 0 && res->answer && ndc_answer_size(res->answer) <= sizeof(b->first))
			memcpy(&b->first, res->answer, ndc_answer_size(res->answer));
	}
	b->n++;
	pthread_cond_broadcast(&b->c);
	pthread_mutex_unlock(&b->m);
}

/* Waits until n callbacks arrived (or 5 s); returns how many did. */
static int box_wait(struct box *b, int n)
{
	struct timespec ts;
	int got;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 5;
	pthread_mutex_lock(&b->m);
	while (b->n < n && pthread_cond_timedwait(&b->c, &b->m, &ts) == 0)
		;
	got = b->n;
	pthread_mutex_unlock(&b->m);
	return got;
}

struct env {
	struct ndc_cache *cache;
	struct ndc_forwarder *fwd;
	struct fake *fk[2];
	uint8_t name[NDC_NAME_MAX];
	size_t nlen;
	struct box box;
};

static struct ndc_cache *new_cache(void)
{
	struct ndc_cache_opts o = {.max_entries = 1000,
				   .max_bytes = 1 << 20,
				   .max_ttl = 86400,
				   .neg_max_ttl = 3600,
				   .stale_max = 3600};
	struct ndc_cache *c;

	assert_int_equal(ndc_cache_new(&o, &c), 0);
	return c;
}

/* Forwarder over the given upstream ports (0: a closed port), timeout_ms per attempt. */
static void env_init(struct env *e, const uint16_t *ports, size_t n, uint32_t timeout_ms,
		     uint32_t max_inflight, const char *name)
{
	struct sockaddr_storage ups[4];
	struct ndc_forwarder_opts o = {.n_upstreams = n,
				       .upstreams = ups,
				       .timeout_ms = timeout_ms,
				       .max_inflight = max_inflight};

	for (size_t i = 0; i < n; i++)
		ups[i] = loopback(ports[i]);
	e->cache = new_cache();
	assert_int_equal(ndc_forwarder_new(&o, e->cache, &e->fwd), 0);
	assert_int_equal(ndc_name_from_text(name, e->name, sizeof(e->name), &e->nlen), 0);
	box_init(&e->box);
}

static void env_free(struct env *e)
{
	ndc_forwarder_free(e->fwd);
	ndc_cache_free(e->cache);
	for (int i = 0; i < 2; i++)
		if (e->fk[i])
			fake_stop(e->fk[i]);
	pthread_mutex_destroy(&e->box.m);
	pthread_cond_destroy(&e->box.c);
}

static int resolve(struct env *e, uint16_t qtype)
{
	return ndc_forwarder_resolve(e->fwd, e->name, e->nlen, qtype, NDC_C_IN, on_done, &e->box);
}

/* Resolves "n<i>.example.test" A and waits for its callback: the milliseconds it took. */
static uint64_t resolve_name_wait(struct env *e, int i, int *ret_status)
{
	uint8_t name[NDC_NAME_MAX];
	char text[64];
	size_t nlen;
	uint64_t t0 = ndc_now_ms();
	int n = e->box.n;

	snprintf(text, sizeof(text), "n%d.example.test", i);
	assert_int_equal(ndc_name_from_text(text, name, sizeof(name), &nlen), 0);
	assert_int_equal(
	    ndc_forwarder_resolve(e->fwd, name, nlen, NDC_T_A, NDC_C_IN, on_done, &e->box), 0);
	assert_int_equal(box_wait(&e->box, n + 1), n + 1);
	*ret_status = e->box.status[n < MAX_RESULTS ? n : MAX_RESULTS - 1];
	return ndc_now_ms() - t0;
}

/* Polls the stats (up to 5 s) until cond holds for them; returns whether it did. */
static bool stats_wait(struct env *e, bool (*cond)(const struct ndc_forwarder_stats *))
{
	static struct ndc_forwarder_stats st;

	for (int i = 0; i < 500; i++) {
		ndc_forwarder_stats(e->fwd, &st);
		if (cond(&st))
			return true;
		usleep(10000);
	}
	return false;
}

/* One upstream fk, one resolve of (name, A), its first callback awaited. */
static void env_one(struct env *e, struct fake *fk, const char *name)
{
	e->fk[0] = fk;
	env_init(e, &fk->port, 1, 1000, 0, name);
	assert_int_equal(resolve(e, NDC_T_A), 0);
	assert_int_equal(box_wait(&e->box, 1), 1);
}

/* Looks (name, A) up in the cache at a chosen time: how TTLs were applied shows in when the
 * entry stops being fresh. */
static int cache_get_at(struct env *e, uint64_t now, bool stale)
{
	struct {
		struct ndc_answer a;
		uint8_t data[4096];
	} out;
	uint32_t age;

	return ndc_cache_get(e->cache, e->name, e->nlen, NDC_T_A, NDC_C_IN, now, stale, &out.a,
			     sizeof(out.data), &age);
}

static void assert_ip(const struct ndc_answer *a, const uint8_t *ip)
{
	assert_int_equal(a->rcode, NDC_RCODE_NOERROR);
	assert_int_equal(a->ancount, 1);
	assert_true(a->len >= 4);
	assert_memory_equal(a->data + a->len - 4, ip, 4);
}

static void test_simple_answer(void **state)
{
	struct env e = {0};
	struct ndc_forwarder_stats st;
	uint64_t now;

	(void)state;
	env_one(&e, fake_start(M_ANSWER), "abcdefghijklmnopqrstuvwxyz.example.test");
	assert_int_equal(e.box.status[0], 0);
	assert_false(e.box.stale[0]);
	assert_int_equal(e.box.age[0], 0);
	assert_ip(&e.box.first.a, IP_GOOD);
	assert_int_equal(e.box.first.a.min_ttl, 300);

	/* It is in the cache now, for the answer's TTL. */
	now = ndc_now_ms();
	assert_int_equal(cache_get_at(&e, now, false), 0);
	assert_int_equal(cache_get_at(&e, now + 290000, false), 0);
	assert_int_equal(cache_get_at(&e, now + 301000, false), -ENOENT);

	/* The query: EDNS 1232 with RD, and the name in 0x20 mixed case (26 letters: all lower
	 * by chance is 2^-26). */
	assert_int_equal(fake_count(e.fk[0], CNT_UDP), 1);
	assert_int_equal(fake_count(e.fk[0], CNT_BAD), 0);
	{
		uint8_t sent[NDC_NAME_MAX], lower[NDC_NAME_MAX];

		assert_int_equal(fake_last_qname(e.fk[0], sent), e.nlen);
		assert_memory_not_equal(sent, e.name, e.nlen);
		ndc_name_lower(lower, sent, e.nlen);
		assert_memory_equal(lower, e.name, e.nlen);
	}
	ndc_forwarder_stats(e.fwd, &st);
	assert_int_equal(st.queries, 1);
	assert_int_equal(st.responses, 1);
	assert_int_equal(st.timeouts, 0);
	env_free(&e);
}

static void test_nxdomain_soa_cached(void **state)
{
	struct env e = {0};
	struct fake *fk;
	uint64_t now;

	(void)state;
	fk = fake_open(M_NX_SOA);
	fk->soa_ttl = 600;
	fk->soa_min = 60;
	env_one(&e, fake_run(fk), "nope.test");
	assert_int_equal(e.box.status[0], 0);
	assert_int_equal(e.box.first.a.rcode, NDC_RCODE_NXDOMAIN);
	assert_int_equal(e.box.first.a.nscount, 1);
	/* RFC 2308 5: min(SOA TTL 600, MINIMUM 60) = 60 s. */
	now = ndc_now_ms();
	assert_int_equal(cache_get_at(&e, now + 58000, false), 0);
	assert_int_equal(cache_get_at(&e, now + 61000, false), -ENOENT);
	env_free(&e);

	/* And the other way round: SOA TTL 30 below MINIMUM 900. */
	memset(&e, 0, sizeof(e));
	fk = fake_open(M_NX_SOA);
	fk->soa_ttl = 30;
	fk->soa_min = 900;
	env_one(&e, fake_run(fk), "nope.test");
	now = ndc_now_ms();
	assert_int_equal(cache_get_at(&e, now + 28000, false), 0);
	assert_int_equal(cache_get_at(&e, now + 31000, false), -ENOENT);
	env_free(&e);
}

static void test_nodata_soa_cached(void **state)
{
	struct env e = {0};
	struct fake *fk;
	uint64_t now;

	(void)state;
	fk = fake_open(M_NODATA_SOA);
	fk->soa_ttl = 120;
	fk->soa_min = 300;
	env_one(&e, fake_run(fk), "www.sub.zone.test");
	assert_int_equal(e.box.status[0], 0);
	assert_int_equal(e.box.first.a.rcode, 0);
	assert_int_equal(e.box.first.a.ancount, 0);
	now = ndc_now_ms();
	assert_int_equal(cache_get_at(&e, now + 118000, false), 0);
	assert_int_equal(cache_get_at(&e, now + 121000, false), -ENOENT);
	env_free(&e);
}

static void test_nxdomain_no_soa_not_cached(void **state)
{
	struct env e = {0};
	struct ndc_cache_stats cst;

	(void)state;
	env_one(&e, fake_start(M_NX_NOSOA), "nope.test");
	assert_int_equal(e.box.status[0], 0);
	assert_int_equal(e.box.first.a.rcode, NDC_RCODE_NXDOMAIN);
	assert_int_equal(cache_get_at(&e, ndc_now_ms(), true), -ENOENT);
	ndc_cache_stats(e.cache, &cst);
	assert_int_equal(cst.inserts, 0);
	env_free(&e);
}

static void test_wrong_id_ignored(void **state)
{
	struct env e = {0};

	(void)state;
	env_one(&e, fake_start(M_WRONG_ID), "www.example.test");
	assert_int_equal(e.box.status[0], 0);
	assert_ip(&e.box.first.a, IP_GOOD);
	assert_int_equal(fake_count(e.fk[0], CNT_UDP), 1);
	env_free(&e);
}

static void test_other_question_ignored(void **state)
{
	struct env e = {0};

	(void)state;
	env_one(&e, fake_start(M_OTHER_Q), "www.example.test");
	assert_int_equal(e.box.status[0], 0);
	assert_ip(&e.box.first.a, IP_GOOD);
	assert_int_equal(fake_count(e.fk[0], CNT_UDP), 1);
	env_free(&e);
}

/* An upstream that does not echo 0x20 case is asked once more, without it. */
static void test_case_not_echoed(void **state)
{
	struct env e = {0};

	(void)state;
	env_one(&e, fake_start(M_LOWERCASE), "abcdefghijklmnopqrstuvwxyz.example.test");
	assert_int_equal(e.box.status[0], 0);
	assert_ip(&e.box.first.a, IP_GOOD);
	assert_int_equal(fake_count(e.fk[0], CNT_UDP), 2);
	{
		uint8_t sent[NDC_NAME_MAX];

		assert_int_equal(fake_last_qname(e.fk[0], sent), e.nlen);
		assert_memory_equal(sent, e.name, e.nlen);
	}
	env_free(&e);
}

static void test_tc_tcp_retry(void **state)
{
	struct env e = {0};
	struct ndc_forwarder_stats st;

	(void)state;
	env_one(&e, fake_start(M_TC), "big.example.test");
	assert_int_equal(e.box.status[0], 0);
	assert_int_equal(e.box.first.a.ancount, BIG_COUNT);
	assert_int_equal(fake_count(e.fk[0], CNT_UDP), 1);
	assert_int_equal(fake_count(e.fk[0], CNT_TCP), 1);
	assert_int_equal(fake_count(e.fk[0], CNT_BAD), 0);
	assert_int_equal(cache_get_at(&e, ndc_now_ms(), false), 0);
	ndc_forwarder_stats(e.fwd, &st);
	assert_int_equal(st.tcp_retries, 1);
	assert_int_equal(st.queries, 2);
	env_free(&e);
}

static void test_timeout_then_second(void **state)
{
	struct env e = {0};
	struct ndc_forwarder_stats st;
	uint16_t ports[2];
	uint64_t t0, dt;

	(void)state;
	e.fk[0] = fake_start(M_SILENT);
	e.fk[1] = fake_start(M_ANSWER);
	ports[0] = e.fk[0]->port;
	ports[1] = e.fk[1]->port;
	env_init(&e, ports, 2, 100, 0, "www.example.test");
	t0 = ndc_now_ms();
	assert_int_equal(resolve(&e, NDC_T_A), 0);
	assert_int_equal(box_wait(&e.box, 1), 1);
	dt = ndc_now_ms() - t0;
	assert_int_equal(e.box.status[0], 0);
	assert_ip(&e.box.first.a, IP_GOOD);
	assert_true(dt >= 99);
	assert_true(dt < 2000);
	assert_int_equal(fake_count_wait(e.fk[0], CNT_UDP, 1), 1);
	assert_int_equal(fake_count(e.fk[1], CNT_UDP), 1);
	ndc_forwarder_stats(e.fwd, &st);
	assert_int_equal(st.timeouts, 1);
	assert_int_equal(st.responses, 1);
	env_free(&e);
}

static void test_refused_then_second(void **state)
{
	struct env e = {0};
	struct ndc_forwarder_stats st;
	uint16_t ports[2];
	uint64_t t0;

	(void)state;
	e.fk[1] = fake_start(M_ANSWER);
	ports[0] = closed_port();
	ports[1] = e.fk[1]->port;
	/* A long timeout: the move to the second upstream must come from ECONNREFUSED. */
	env_init(&e, ports, 2, 3000, 0, "www.example.test");
	t0 = ndc_now_ms();
	assert_int_equal(resolve(&e, NDC_T_A), 0);
	assert_int_equal(box_wait(&e.box, 1), 1);
	assert_true(ndc_now_ms() - t0 < 1500);
	assert_int_equal(e.box.status[0], 0);
	assert_ip(&e.box.first.a, IP_GOOD);
	ndc_forwarder_stats(e.fwd, &st);
	assert_int_equal(st.errors, 1);
	assert_int_equal(st.timeouts, 0);
	env_free(&e);
}

static void test_servfail_then_second(void **state)
{
	struct env e = {0};
	uint16_t ports[2];

	(void)state;
	e.fk[0] = fake_start(M_SERVFAIL);
	e.fk[1] = fake_start(M_ANSWER);
	ports[0] = e.fk[0]->port;
	ports[1] = e.fk[1]->port;
	env_init(&e, ports, 2, 3000, 0, "www.example.test");
	assert_int_equal(resolve(&e, NDC_T_A), 0);
	assert_int_equal(box_wait(&e.box, 1), 1);
	assert_int_equal(e.box.status[0], 0);
	assert_ip(&e.box.first.a, IP_GOOD);
	assert_int_equal(fake_count(e.fk[0], CNT_UDP), 1);
	env_free(&e);

	/* SERVFAIL from the only upstream: an error, nothing cached. */
	memset(&e, 0, sizeof(e));
	e.fk[0] = fake_start(M_SERVFAIL);
	ports[0] = e.fk[0]->port;
	env_init(&e, ports, 1, 3000, 0, "www.example.test");
	assert_int_equal(resolve(&e, NDC_T_A), 0);
	assert_int_equal(box_wait(&e.box, 1), 1);
	assert_true(e.box.status[0] < 0);
	assert_false(e.box.had_answer[0]);
	assert_int_equal(cache_get_at(&e, ndc_now_ms(), true), -ENOENT);
	env_free(&e);
}

static void test_all_dead_stale(void **state)
{
	struct env e = {0};
	struct ndc_forwarder_stats st;
	struct {
		struct ndc_answer a;
		uint8_t data[64];
	} old;
	uint16_t ports[2] = {closed_port(), closed_port()};

	(void)state;
	env_init(&e, ports, 2, 100, 0, "www.example.test");
	memset(&old, 0, sizeof(old));
	old.a.ancount = 1;
	old.a.qname_len = (uint8_t)e.nlen;
	old.a.len = 16;
	old.a.min_ttl = 1;
	for (int i = 0; i < 16; i++)
		old.a.data[i] = (uint8_t)(0xa0 + i);
	/* One RR the cache can walk: root owner, TYPE A, CLASS IN, TTL 1, 5 bytes of RDATA. */
	memcpy(old.a.data, "\0\0\1\0\1\0\0\0\1\0\5", 11);
	/* Stored 10 s ago for 1 s: expired, within stale_max. */
	assert_int_equal(ndc_cache_put(e.cache, e.name, e.nlen, NDC_T_A, NDC_C_IN, &old.a, 1,
				       ndc_now_ms() - 10000),
			 0);
	assert_int_equal(resolve(&e, NDC_T_A), 0);
	assert_int_equal(box_wait(&e.box, 1), 1);
	assert_int_equal(e.box.status[0], 0);
	assert_true(e.box.stale[0]);
	assert_true(e.box.age[0] >= 10);
	assert_memory_equal(&e.box.first.a, &old.a, ndc_answer_size(&old.a));
	ndc_forwarder_stats(e.fwd, &st);
	assert_int_equal(st.stale_served, 1);
	assert_int_equal(st.errors, 2);
	env_free(&e);
}

static void test_all_dead_no_stale(void **state)
{
	struct env e = {0};
	struct ndc_forwarder_stats st;
	uint16_t ports[2];

	(void)state;
	e.fk[0] = fake_start(M_SILENT);
	e.fk[1] = fake_start(M_SILENT);
	ports[0] = e.fk[0]->port;
	ports[1] = e.fk[1]->port;
	env_init(&e, ports, 2, 100, 0, "www.example.test");
	assert_int_equal(resolve(&e, NDC_T_A), 0);
	assert_int_equal(box_wait(&e.box, 1), 1);
	assert_int_equal(e.box.status[0], -ETIMEDOUT);
	assert_false(e.box.stale[0]);
	assert_false(e.box.had_answer[0]);
	assert_int_equal(fake_count_wait(e.fk[0], CNT_UDP, 1), 1);
	assert_int_equal(fake_count_wait(e.fk[1], CNT_UDP, 1), 1);
	ndc_forwarder_stats(e.fwd, &st);
	assert_int_equal(st.timeouts, 2);
	assert_int_equal(st.stale_served, 0);
	env_free(&e);

	/* Refused everywhere: the last error. */
	memset(&e, 0, sizeof(e));
	ports[0] = closed_port();
	env_init(&e, ports, 1, 1000, 0, "www.example.test");
	assert_int_equal(resolve(&e, NDC_T_A), 0);
	assert_int_equal(box_wait(&e.box, 1), 1);
	assert_int_equal(e.box.status[0], -ECONNREFUSED);
	env_free(&e);
}

static bool first_backoff_2s(const struct ndc_forwarder_stats *st)
{
	return st->upstream[0].backoff_ms == 2000;
}

/* Back, and the probe's answer counted (under load the two are seen a moment apart). */
static bool first_healthy(const struct ndc_forwarder_stats *st)
{
	return st->upstream[0].healthy && st->upstream[0].responses >= 1;
}

/*
 * A dead primary (never answers) and a good secondary: the first query pays the timeout, the
 * next ones go straight to the secondary; after the backoff a probe (a copy of a query, no client
 * waiting on it) finds it still dead and doubles the backoff; once it answers a probe it is
 * first again.
 */
static void test_dead_upstream_skipped(void **state)
{
	struct env e = {0};
	struct ndc_forwarder_stats st;
	uint16_t ports[2];
	uint64_t dt;
	char want[64];
	int status, n1;

	(void)state;
	e.fk[0] = fake_start(M_SILENT);
	e.fk[1] = fake_start(M_ANSWER);
	ports[0] = e.fk[0]->port;
	ports[1] = e.fk[1]->port;
	env_init(&e, ports, 2, 1000, 0, "www.example.test");

	ndc_forwarder_stats(e.fwd, &st);
	assert_int_equal(st.n_upstreams, 2);
	snprintf(want, sizeof(want), "127.0.0.1:%u", ports[0]);
	assert_string_equal(st.upstream[0].name, want);
	assert_true(st.upstream[0].healthy);
	assert_true(st.upstream[1].healthy);

	dt = resolve_name_wait(&e, 0, &status);
	assert_int_equal(status, 0);
	assert_true(dt >= 990);
	ndc_forwarder_stats(e.fwd, &st);
	assert_false(st.upstream[0].healthy);
	assert_int_equal(st.upstream[0].backoff_ms, 1000);
	assert_int_equal(st.upstream[0].timeouts, 1);
	assert_true(st.upstream[1].healthy);

	/* Within the backoff: answered by the secondary without waiting (a timeout is 1000 ms). */
	for (int i = 1; i <= 10; i++) {
		dt = resolve_name_wait(&e, i, &status);
		assert_int_equal(status, 0);
		assert_true(dt < 500);
	}
	assert_int_equal(fake_count(e.fk[0], CNT_UDP), 1);
	assert_int_equal(fake_count(e.fk[1], CNT_UDP), 11);
	ndc_forwarder_stats(e.fwd, &st);
	assert_int_equal(st.upstream[0].skipped, 10);
	assert_int_equal(st.upstream[0].queries, 1);
	assert_int_equal(st.upstream[1].responses, 11);
	assert_int_equal(st.timeouts, 1);

	/* Backoff over: the next query probes the primary with a copy of itself, and is still
	 * answered by the secondary at once. The probe times out: backoff 2 s. */
	usleep(1100 * 1000);
	dt = resolve_name_wait(&e, 11, &status);
	assert_int_equal(status, 0);
	assert_true(dt < 500);
	assert_true(stats_wait(&e, first_backoff_2s));
	assert_int_equal(fake_count(e.fk[0], CNT_UDP), 2);
	ndc_forwarder_stats(e.fwd, &st);
	assert_int_equal(st.upstream[0].probes, 1);
	assert_false(st.upstream[0].healthy);
	assert_int_equal(e.box.n, 12); /* the probe called no one */

	/* The primary comes back: after the 2 s backoff a probe finds it, then it is first. */
	__atomic_store_n(&e.fk[0]->mode, M_ANSWER, __ATOMIC_RELEASE);
	usleep(2100 * 1000);
	dt = resolve_name_wait(&e, 12, &status);
	assert_int_equal(status, 0);
	assert_true(dt < 500);
	assert_true(stats_wait(&e, first_healthy));
	ndc_forwarder_stats(e.fwd, &st);
	assert_int_equal(st.upstream[0].backoff_ms, 0);
	assert_int_equal(st.upstream[0].responses, 1);
	n1 = fake_count(e.fk[1], CNT_UDP);
	dt = resolve_name_wait(&e, 13, &status);
	assert_int_equal(status, 0);
	assert_int_equal(fake_count(e.fk[0], CNT_UDP), 4);
	assert_int_equal(fake_count(e.fk[1], CNT_UDP), n1);
	env_free(&e);
}

/*
 * Every upstream frozen: never silence. The first query tries each (one timeout each); once both
 * are known down a query makes one attempt (SERVFAIL within one timeout), and one with an
 * answer in the cache, even expired, gets it at once.
 */
static void test_all_dead_fail_fast(void **state)
{
	struct env e = {0};
	struct ndc_forwarder_stats st;
	struct {
		struct ndc_answer a;
		uint8_t data[64];
	} old;
	uint16_t ports[2];
	uint64_t dt, t0;
	int status;

	(void)state;
	e.fk[0] = fake_start(M_SILENT);
	e.fk[1] = fake_start(M_SILENT);
	ports[0] = e.fk[0]->port;
	ports[1] = e.fk[1]->port;
	env_init(&e, ports, 2, 500, 0, "www.example.test");

	dt = resolve_name_wait(&e, 0, &status);
	assert_int_equal(status, -ETIMEDOUT);
	assert_true(dt >= 990);
	assert_true(dt < 3000);

	/* Both down, neither due for 0.5 s: an expired answer in the cache goes out now. */
	memset(&old, 0, sizeof(old));
	old.a.ancount = 1;
	old.a.qname_len = (uint8_t)e.nlen;
	old.a.len = 16;
	old.a.min_ttl = 1;
	assert_int_equal(ndc_cache_put(e.cache, e.name, e.nlen, NDC_T_A, NDC_C_IN, &old.a, 1,
				       ndc_now_ms() - 10000),
			 0);
	t0 = ndc_now_ms();
	assert_int_equal(resolve(&e, NDC_T_A), 0);
	assert_int_equal(box_wait(&e.box, 2), 2);
	assert_true(ndc_now_ms() - t0 < 400);
	assert_int_equal(e.box.status[1], 0);
	assert_true(e.box.stale[1]);
	assert_int_equal(fake_count(e.fk[0], CNT_UDP) + fake_count(e.fk[1], CNT_UDP), 2);

	/* Never-seen names: the error (SERVFAIL) after one timeout, not two, though the backoffs
	 * run out meanwhile (the other upstream then gets a shadow probe, no one waiting on it). */
	for (int i = 1; i <= 4; i++) {
		dt = resolve_name_wait(&e, i, &status);
		assert_int_equal(status, -ETIMEDOUT);
		assert_true(dt >= 490);
		assert_true(dt < 950);
	}
	ndc_forwarder_stats(e.fwd, &st);
	assert_false(st.upstream[0].healthy);
	assert_false(st.upstream[1].healthy);
	assert_true(st.upstream[0].probes + st.upstream[1].probes >= 2);
	assert_int_equal(st.stale_served, 1);
	env_free(&e);
}

/* Queries waiting on the forwarder are bounded: beyond max_pending, -EBUSY at once. */
static void test_max_pending(void **state)
{
	struct env e = {0};
	struct ndc_forwarder_stats st;
	struct ndc_forwarder_opts o = {.n_upstreams = 1, .timeout_ms = 10000, .max_pending = 3};
	struct sockaddr_storage up;

	(void)state;
	e.fk[0] = fake_start(M_SILENT);
	up = loopback(e.fk[0]->port);
	o.upstreams = &up;
	e.cache = new_cache();
	assert_int_equal(ndc_forwarder_new(&o, e.cache, &e.fwd), 0);
	assert_int_equal(ndc_name_from_text("www.example.test", e.name, sizeof(e.name), &e.nlen),
			 0);
	box_init(&e.box);
	assert_int_equal(resolve(&e, NDC_T_A), 0);
	assert_int_equal(resolve(&e, NDC_T_AAAA), 0);
	assert_int_equal(resolve(&e, NDC_T_A), 0); /* joins the first: still a waiter */
	assert_int_equal(resolve(&e, NDC_T_TXT), -EBUSY);
	assert_int_equal(resolve(&e, NDC_T_A), -EBUSY);
	ndc_forwarder_stats(e.fwd, &st);
	assert_int_equal(st.pending, 3);
	assert_int_equal(st.rejected, 2);
	assert_int_equal(st.coalesced, 1);
	ndc_forwarder_free(e.fwd);
	e.fwd = NULL;
	assert_int_equal(e.box.n, 3);
	env_free(&e);
}

static void test_too_many_upstreams(void **state)
{
	struct sockaddr_storage ups[NDC_FWD_MAX_UPSTREAMS + 1];
	struct ndc_forwarder_opts o = {.n_upstreams = NDC_FWD_MAX_UPSTREAMS + 1, .upstreams = ups};
	struct ndc_forwarder *f = NULL;

	(void)state;
	for (size_t i = 0; i <= NDC_FWD_MAX_UPSTREAMS; i++)
		ups[i] = loopback(53);
	assert_int_equal(ndc_forwarder_new(&o, NULL, &f), -E2BIG);
	assert_null(f);
}

#define CONC_THREADS 4
#define CONC_PER_THREAD 5

static void *resolve_thread(void *arg)
{
	struct env *e = arg;

	for (int i = 0; i < CONC_PER_THREAD; i++)
		if (resolve(e, NDC_T_A))
			return (void *)1;
	return NULL;
}

static void test_coalesce(void **state)
{
	struct env e = {0};
	struct ndc_forwarder_stats st;
	pthread_t t[CONC_THREADS];
	uint16_t port;
	int n = CONC_THREADS * CONC_PER_THREAD;

	(void)state;
	e.fk[0] = fake_open(M_DELAY);
	e.fk[0]->delay_ms = 300;
	fake_run(e.fk[0]);
	port = e.fk[0]->port;
	env_init(&e, &port, 1, 2000, 0, "www.example.test");
	for (int i = 0; i < CONC_THREADS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, resolve_thread, &e), 0);
	for (int i = 0; i < CONC_THREADS; i++) {
		void *rv;

		pthread_join(t[i], &rv);
		assert_null(rv);
	}
	assert_int_equal(box_wait(&e.box, n), n);
	for (int i = 0; i < n; i++) {
		assert_int_equal(e.box.status[i], 0);
		assert_true(e.box.had_answer[i]);
	}
	assert_ip(&e.box.first.a, IP_GOOD);
	assert_int_equal(fake_count(e.fk[0], CNT_UDP), 1);
	ndc_forwarder_stats(e.fwd, &st);
	assert_int_equal(st.queries, 1);
	assert_int_equal(st.coalesced, n - 1);
	/* No extra callbacks later. */
	usleep(50000);
	assert_int_equal(e.box.n, n);
	env_free(&e);
}

static void test_no_upstreams(void **state)
{
	struct env e = {0};

	(void)state;
	env_init(&e, NULL, 0, 100, 0, "www.example.test");
	assert_int_equal(resolve(&e, NDC_T_A), -ENOTCONN);
	usleep(20000);
	assert_int_equal(e.box.n, 0);
	env_free(&e);
}

static void test_free_in_flight(void **state)
{
	struct env e = {0};
	uint16_t port;
	uint64_t t0;

	(void)state;
	e.fk[0] = fake_start(M_SILENT);
	port = e.fk[0]->port;
	env_init(&e, &port, 1, 10000, 2, "www.example.test");
	assert_int_equal(resolve(&e, NDC_T_A), 0);
	assert_int_equal(resolve(&e, NDC_T_AAAA), 0);
	/* max_inflight 2: a third distinct request is refused, joining one is not. */
	assert_int_equal(resolve(&e, NDC_T_TXT), -EBUSY);
	assert_int_equal(resolve(&e, NDC_T_A), 0);
	/* Let the thread send them before tearing down. */
	for (int i = 0; i < 100 && fake_count(e.fk[0], CNT_UDP) < 2; i++)
		usleep(10000);
	assert_int_equal(fake_count(e.fk[0], CNT_UDP), 2);
	assert_int_equal(e.box.n, 0);
	t0 = ndc_now_ms();
	ndc_forwarder_free(e.fwd);
	e.fwd = NULL;
	assert_true(ndc_now_ms() - t0 < 1000);
	assert_int_equal(e.box.n, 3);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(e.box.status[i], -ECANCELED);
		assert_false(e.box.had_answer[i]);
	}
	env_free(&e);
}

/* A callback may resolve again from the forwarder thread, even the same key. */
struct chain {
	struct env *e;
	int calls;
	int second_status;
};

static void chain_done(void *arg, const struct ndc_fwd_result *res)
{
	struct chain *c = arg;

	if (c->calls++ == 0) {
		c->second_status = ndc_forwarder_resolve(c->e->fwd, c->e->name, c->e->nlen, NDC_T_A,
							 NDC_C_IN, on_done, &c->e->box);
		return;
	}
	(void)res;
}

static void test_resolve_from_callback(void **state)
{
	struct env e = {0};
	struct chain c = {.e = &e};
	uint16_t port;

	(void)state;
	e.fk[0] = fake_start(M_ANSWER);
	port = e.fk[0]->port;
	env_init(&e, &port, 1, 1000, 0, "www.example.test");
	assert_int_equal(
	    ndc_forwarder_resolve(e.fwd, e.name, e.nlen, NDC_T_A, NDC_C_IN, chain_done, &c), 0);
	assert_int_equal(box_wait(&e.box, 1), 1);
	assert_int_equal(c.calls, 1);
	assert_int_equal(c.second_status, 0);
	assert_int_equal(e.box.status[0], 0);
	assert_int_equal(fake_count(e.fk[0], CNT_UDP), 2);
	env_free(&e);
}

/* ---- routes (stub domains) and reconfiguration ---------------------------------------------- */

/* Resolves text A on f and waits for its callback: the status. */
static int resolve_text(struct ndc_forwarder *f, struct box *b, const char *text)
{
	uint8_t name[NDC_NAME_MAX];
	size_t nlen;
	int n = b->n;

	assert_int_equal(ndc_name_from_text(text, name, sizeof(name), &nlen), 0);
	assert_int_equal(ndc_forwarder_resolve(f, name, nlen, NDC_T_A, NDC_C_IN, on_done, b), 0);
	assert_int_equal(box_wait(b, n + 1), n + 1);
	return b->status[n];
}

/*
 * Three upstreams: the default, one for stub.test and one for deep.stub.test. A name goes to
 * the longest zone it is in, at a label boundary; anything else to the default.
 */
static void test_stub_routes(void **state)
{
	struct fake *fk[3] = {fake_start(M_ANSWER), fake_start(M_ANSWER), fake_start(M_ANSWER)};
	struct sockaddr_storage def = loopback(fk[0]->port), s1 = loopback(fk[1]->port),
				s2 = loopback(fk[2]->port);
	struct ndc_forwarder_route routes[] = {
	    {.zone = "Stub.Test.", .n_upstreams = 1, .upstreams = &s1},
	    {.zone = "deep.stub.test", .n_upstreams = 1, .upstreams = &s2},
	};
	struct ndc_forwarder_opts o = {
	    .n_upstreams = 1, .upstreams = &def, .n_routes = 2, .routes = routes};
	struct ndc_cache *cache = new_cache();
	struct ndc_forwarder_stats st;
	struct ndc_cache_stats cs;
	struct ndc_forwarder *f;
	struct box b;

	(void)state;
	box_init(&b);
	assert_int_equal(ndc_forwarder_new(&o, cache, &f), 0);
	assert_int_equal(resolve_text(f, &b, "a.stub.test"), 0);
	assert_int_equal(resolve_text(f, &b, "stub.test"), 0);
	assert_int_equal(resolve_text(f, &b, "b.deep.stub.test"), 0);
	assert_int_equal(resolve_text(f, &b, "deep.stub.test"), 0);
	assert_int_equal(resolve_text(f, &b, "notstub.test"), 0);
	assert_int_equal(resolve_text(f, &b, "www.example.test"), 0);
	assert_int_equal(fake_count(fk[0], CNT_UDP), 2);
	assert_int_equal(fake_count(fk[1], CNT_UDP), 2);
	assert_int_equal(fake_count(fk[2], CNT_UDP), 2);
	/* Cached like the rest (the resolver asks the cache before the forwarder). */
	ndc_cache_stats(cache, &cs);
	assert_int_equal(cs.entries, 6);
	/* Every upstream in the stats, the default first. */
	ndc_forwarder_stats(f, &st);
	assert_int_equal(st.n_upstreams, 3);
	assert_int_equal(st.upstream[0].responses, 2);
	ndc_forwarder_free(f);
	ndc_cache_free(cache);
	for (int i = 0; i < 3; i++)
		fake_stop(fk[i]);
}

/* Stub domains only: other names get -ENOTCONN from the callback, as SERVFAIL. */
static void test_stub_no_default(void **state)
{
	struct fake *fk = fake_start(M_ANSWER);
	struct sockaddr_storage s1 = loopback(fk->port);
	struct ndc_forwarder_route route = {.zone = "corp", .n_upstreams = 1, .upstreams = &s1};
	struct ndc_forwarder_opts o = {.n_routes = 1, .routes = &route, .timeout_ms = 500};
	struct ndc_forwarder *f;
	struct box b;

	(void)state;
	box_init(&b);
	assert_int_equal(ndc_forwarder_new(&o, NULL, &f), 0);
	assert_int_equal(resolve_text(f, &b, "x.corp"), 0);
	assert_int_equal(resolve_text(f, &b, "www.example.test"), -ENOTCONN);
	assert_int_equal(fake_count(fk, CNT_UDP), 1);
	ndc_forwarder_free(f);
	fake_stop(fk);
}

static void test_routes_invalid(void **state)
{
	struct sockaddr_storage a = loopback(53), many[NDC_FWD_MAX_UPSTREAMS + 1];
	struct ndc_forwarder_route dup[] = {
	    {.zone = "a.test", .n_upstreams = 1, .upstreams = &a},
	    {.zone = "A.TEST.", .n_upstreams = 1, .upstreams = &a},
	};
	struct ndc_forwarder_route root = {.zone = ".", .n_upstreams = 1, .upstreams = &a};
	struct ndc_forwarder_route empty = {.zone = "a.test", .n_upstreams = 0};
	struct ndc_forwarder_route big = {
	    .zone = "a.test", .n_upstreams = NDC_FWD_MAX_UPSTREAMS + 1, .upstreams = many};
	struct ndc_forwarder_route servers[5];
	struct sockaddr_storage distinct[5][NDC_FWD_MAX_UPSTREAMS];
	char zones[5][16];
	struct ndc_forwarder_opts o = {.n_upstreams = 1, .upstreams = &a};
	struct ndc_forwarder *f = NULL;

	(void)state;
	for (size_t i = 0; i <= NDC_FWD_MAX_UPSTREAMS; i++)
		many[i] = loopback((uint16_t)(1000 + i));
	o.n_routes = 2;
	o.routes = dup;
	assert_int_equal(ndc_forwarder_new(&o, NULL, &f), -EINVAL);
	o.n_routes = 1;
	o.routes = &root;
	assert_int_equal(ndc_forwarder_new(&o, NULL, &f), -EINVAL);
	o.routes = &empty;
	assert_int_equal(ndc_forwarder_new(&o, NULL, &f), -EINVAL);
	o.routes = &big;
	assert_int_equal(ndc_forwarder_new(&o, NULL, &f), -E2BIG);
	/* 1 + 5 * 8 distinct addresses: over NDC_FWD_MAX_SERVERS. */
	for (int i = 0; i < 5; i++) {
		snprintf(zones[i], sizeof(zones[i]), "z%d.test", i);
		for (int j = 0; j < NDC_FWD_MAX_UPSTREAMS; j++)
			distinct[i][j] = loopback((uint16_t)(2000 + i * 10 + j));
		servers[i] = (struct ndc_forwarder_route){.zone = zones[i],
							  .n_upstreams = NDC_FWD_MAX_UPSTREAMS,
							  .upstreams = distinct[i]};
	}
	o.n_routes = 5;
	o.routes = servers;
	assert_int_equal(ndc_forwarder_new(&o, NULL, &f), -E2BIG);
	assert_null(f);
}

/*
 * Reconfigured under way: the default moves from A to B. A's cached answer is dropped (the name
 * goes elsewhere now) and the next query asks B; a stub domain whose upstream stayed keeps its
 * cached answer and its upstream's counters.
 */
static void test_reconfigure(void **state)
{
	struct fake *a = fake_start(M_ANSWER), *bk = fake_start(M_ANSWER),
		    *stub = fake_start(M_ANSWER);
	struct sockaddr_storage sa = loopback(a->port), sb = loopback(bk->port),
				ss = loopback(stub->port);
	struct ndc_forwarder_route route = {
	    .zone = "stub.test", .n_upstreams = 1, .upstreams = &ss};
	struct ndc_forwarder_opts o = {
	    .n_upstreams = 1, .upstreams = &sa, .n_routes = 1, .routes = &route};
	struct ndc_cache *cache = new_cache();
	struct ndc_forwarder_stats st;
	struct ndc_cache_stats cs;
	struct ndc_forwarder *f;
	struct box b;
	char want[64];

	(void)state;
	box_init(&b);
	assert_int_equal(ndc_forwarder_new(&o, cache, &f), 0);
	assert_int_equal(resolve_text(f, &b, "www.example.test"), 0);
	assert_int_equal(resolve_text(f, &b, "x.stub.test"), 0);
	assert_int_equal(fake_count(a, CNT_UDP), 1);
	ndc_cache_stats(cache, &cs);
	assert_int_equal(cs.entries, 2);

	o.upstreams = &sb;
	o.timeout_ms = 300;
	assert_int_equal(ndc_forwarder_reconfigure(f, &o), 0);
	ndc_cache_stats(cache, &cs);
	assert_int_equal(cs.entries, 1);
	assert_int_equal(resolve_text(f, &b, "www.example.test"), 0);
	assert_int_equal(resolve_text(f, &b, "x.stub.test"), 0);
	assert_int_equal(fake_count(a, CNT_UDP), 1);
	assert_int_equal(fake_count(bk, CNT_UDP), 1);
	assert_int_equal(fake_count(stub, CNT_UDP), 2);
	ndc_forwarder_stats(f, &st);
	assert_int_equal(st.n_upstreams, 2);
	snprintf(want, sizeof(want), "127.0.0.1:%u", bk->port);
	assert_string_equal(st.upstream[0].name, want);
	assert_int_equal(st.upstream[0].responses, 1);
	assert_int_equal(st.upstream[1].responses, 2); /* the stub's counters go on */

	/* A bad configuration changes nothing. */
	route.zone = "not a..zone";
	assert_int_equal(ndc_forwarder_reconfigure(f, &o), -EINVAL);
	assert_int_equal(resolve_text(f, &b, "y.stub.test"), 0);
	assert_int_equal(fake_count(stub, CNT_UDP), 3);
	ndc_forwarder_free(f);
	ndc_cache_free(cache);
	fake_stop(a);
	fake_stop(bk);
	fake_stop(stub);
}

/*
 * A request in flight when its upstream is replaced: the client still gets its answer, which is
 * not cached (it came from an upstream the name no longer goes to).
 */
static void test_reconfigure_in_flight(void **state)
{
	struct fake *a = fake_open(M_DELAY), *bk = fake_start(M_ANSWER);
	struct sockaddr_storage sa, sb = loopback(bk->port);
	struct ndc_forwarder_opts o = {.n_upstreams = 1, .upstreams = &sa, .timeout_ms = 2000};
	struct ndc_cache *cache = new_cache();
	struct ndc_cache_stats cs;
	struct ndc_forwarder *f;
	uint8_t name[NDC_NAME_MAX];
	size_t nlen;
	struct box b;

	(void)state;
	a->delay_ms = 300;
	fake_run(a);
	sa = loopback(a->port);
	box_init(&b);
	assert_int_equal(ndc_forwarder_new(&o, cache, &f), 0);
	assert_int_equal(ndc_name_from_text("slow.example.test", name, sizeof(name), &nlen), 0);
	assert_int_equal(ndc_forwarder_resolve(f, name, nlen, NDC_T_A, NDC_C_IN, on_done, &b), 0);
	usleep(50000);
	o.upstreams = &sb;
	assert_int_equal(ndc_forwarder_reconfigure(f, &o), 0);
	assert_int_equal(box_wait(&b, 1), 1);
	assert_int_equal(b.status[0], 0);
	assert_ip(&b.first.a, IP_GOOD);
	ndc_cache_stats(cache, &cs);
	assert_int_equal(cs.entries, 0);
	assert_int_equal(resolve_text(f, &b, "slow.example.test"), 0);
	assert_int_equal(fake_count(bk, CNT_UDP), 1);
	ndc_cache_stats(cache, &cs);
	assert_int_equal(cs.entries, 1);
	ndc_forwarder_free(f);
	ndc_cache_free(cache);
	fake_stop(a);
	fake_stop(bk);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_simple_answer),
	    cmocka_unit_test(test_nxdomain_soa_cached),
	    cmocka_unit_test(test_nodata_soa_cached),
	    cmocka_unit_test(test_nxdomain_no_soa_not_cached),
	    cmocka_unit_test(test_wrong_id_ignored),
	    cmocka_unit_test(test_other_question_ignored),
	    cmocka_unit_test(test_case_not_echoed),
	    cmocka_unit_test(test_tc_tcp_retry),
	    cmocka_unit_test(test_timeout_then_second),
	    cmocka_unit_test(test_refused_then_second),
	    cmocka_unit_test(test_servfail_then_second),
	    cmocka_unit_test(test_all_dead_stale),
	    cmocka_unit_test(test_all_dead_no_stale),
	    cmocka_unit_test(test_dead_upstream_skipped),
	    cmocka_unit_test(test_all_dead_fail_fast),
	    cmocka_unit_test(test_max_pending),
	    cmocka_unit_test(test_too_many_upstreams),
	    cmocka_unit_test(test_coalesce),
	    cmocka_unit_test(test_no_upstreams),
	    cmocka_unit_test(test_free_in_flight),
	    cmocka_unit_test(test_resolve_from_callback),
	    cmocka_unit_test(test_stub_routes),
	    cmocka_unit_test(test_stub_no_default),
	    cmocka_unit_test(test_routes_invalid),
	    cmocka_unit_test(test_reconfigure),
	    cmocka_unit_test(test_reconfigure_in_flight),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
