// SPDX-License-Identifier: MIT
/*
 * The forwarder's upstream side against scripted fake upstreams on 127.0.0.1: pooled TCP
 * (pipelining, answers out of order matched by ID, a dead connection's queries sent again once,
 * backoff, idle close), forward.protocol prefer_udp, forward.policy, and loop detection. Each fake
 * answers "n<i>.example.test" with 192.0.<i / 256>.<i % 256> (data only, never an address we send
 * to), so every callback can check it got its own name's answer. No packet leaves loopback.
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

enum tmode {
	T_ANSWER,      /* every query answered in order */
	T_REVERSE,     /* the queries of each read answered last first */
	T_CLOSE_FIRST, /* the first connection closed after its first read, unanswered */
	T_CLOSE_ALL,   /* every connection closed after its first read, unanswered */
	T_BOGUS_ID,    /* an answer with an ID never sent comes before each right one */
	T_DELAY,       /* the first read waits delay_ms before its answers */
	T_LOOP,	       /* UDP: a check's name goes back to loop_fwd (a loop), answered REFUSED;
			* other names SERVFAIL, as a looping upstream's answers end */
	T_FORMERR_ONE, /* "n7..." gets a FORMERR with no question (UDP and TCP); others answers */
};

#define BAD_NAME 7 /* T_FORMERR_ONE's name */

/* The forwarder a T_LOOP fake sends checks back to, as its listener would. */
static struct ndc_forwarder *loop_fwd;

#define FAKE_CONNS 16

struct tconn {
	int fd;
	size_t len;
	uint8_t buf[2 + 65535];
};

struct tfake {
	int udp, tcp;
	uint16_t port;
	enum tmode mode;
	bool udp_silent;
	int delay_ms;
	pthread_t thread;
	int stop;
	pthread_mutex_t lock;
	int accepted, peer_closed, udp_queries, tcp_queries, max_batch;
	int frozen_below; /* connections accepted before this many read and never answer */
	bool noread;	  /* connections are never read (set before the first is accepted) */
	int rcvbuf;	  /* SO_RCVBUF of the listener (0: the default) */
	struct tconn conns[FAKE_CONNS];
};

/* The i of "n<i>.example.test" (wire), or -1. */
static int name_index(const uint8_t *lname)
{
	int i = 0;

	if (lname[0] < 2 || (lname[1] != 'n' && lname[1] != 'N'))
		return -1;
	for (int k = 2; k <= lname[0]; k++)
		i = i * 10 + (lname[k] - '0');
	return i;
}

static void index_ip(int i, uint8_t ip[4])
{
	ip[0] = 192;
	ip[1] = 0;
	ip[2] = (uint8_t)(i >> 8);
	ip[3] = (uint8_t)i;
}

/* The reply to q (one A record), written at out (TCP: framed). */
static size_t reply(const struct ndc_query *q, uint8_t *out, size_t cap, bool tcp, bool formerr)
{
	struct {
		struct ndc_answer a;
		uint8_t data[512];
	} ans;
	struct ndc_ab b;
	uint8_t ip[4];
	size_t len;

	if (formerr) {
		/* A server that could not read the query: its ID, FORMERR, no sections at all. */
		memset(out, 0, cap);
		ndc_put16(out + (tcp ? 2 : 0), q->id);
		ndc_put16(out + (tcp ? 4 : 2), NDC_F_QR | NDC_RCODE_FORMERR);
		if (!tcp)
			return NDC_DNS_HDR_LEN;
		ndc_put16(out, NDC_DNS_HDR_LEN);
		return NDC_DNS_HDR_LEN + 2;
	}
	index_ip(name_index(q->lname), ip);
	ndc_ab_init(&b, &ans.a, sizeof(ans.data), q->lname, q->qname_len);
	ndc_ab_rr(&b, NDC_SEC_ANSWER, q->lname, q->qname_len, NDC_T_A, NDC_C_IN, 300, ip, 4);
	assert_int_equal(ndc_ab_finish(&b, 0, false), 0);
	assert_int_equal(
	    ndc_dns_write_reply(q, &ans.a, 0, 0, 4096, out + (tcp ? 2 : 0), cap - 2, &len), 0);
	if (!tcp)
		return len;
	out[0] = (uint8_t)(len >> 8);
	out[1] = (uint8_t)len;
	return len + 2;
}

static bool bad_name(struct tfake *fk, const struct ndc_query *q)
{
	return __atomic_load_n(&fk->mode, __ATOMIC_ACQUIRE) == T_FORMERR_ONE &&
	       name_index(q->lname) == BAD_NAME;
}

static void fake_udp(struct tfake *fk)
{
	uint8_t pkt[4096], out[4096];
	struct sockaddr_in from;
	socklen_t fl = sizeof(from);
	struct ndc_query q;
	ssize_t n = recvfrom(fk->udp, pkt, sizeof(pkt), 0, (struct sockaddr *)&from, &fl);

	if (n < 0 || ndc_dns_parse_query(pkt, (size_t)n, &q))
		return;
	pthread_mutex_lock(&fk->lock);
	fk->udp_queries++;
	pthread_mutex_unlock(&fk->lock);
	if (__atomic_load_n(&fk->udp_silent, __ATOMIC_ACQUIRE))
		return;
	if (__atomic_load_n(&fk->mode, __ATOMIC_ACQUIRE) == T_LOOP) {
		struct ndc_forwarder *lf = __atomic_load_n(&loop_fwd, __ATOMIC_ACQUIRE);
		size_t len = 0;
		bool ours = lf && ndc_forwarder_loop_name(lf, q.lname, q.qname_len);

		if (ndc_dns_write_error(&q, ours ? NDC_RCODE_REFUSED : NDC_RCODE_SERVFAIL, out,
					sizeof(out), &len) == 0)
			sendto(fk->udp, out, len, 0, (struct sockaddr *)&from, fl);
		return;
	}
	n = (ssize_t)reply(&q, out, sizeof(out), false, bad_name(fk, &q));
	sendto(fk->udp, out, (size_t)n, 0, (struct sockaddr *)&from, fl);
}

static void conn_drop(struct tfake *fk, struct tconn *c, bool by_peer)
{
	close(c->fd);
	c->fd = -1;
	c->len = 0;
	if (by_peer) {
		pthread_mutex_lock(&fk->lock);
		fk->peer_closed++;
		pthread_mutex_unlock(&fk->lock);
	}
}

/* Up to 256 whole queries of c's buffer, answered as the mode says: how many (0: none). */
static int fake_batch(struct tfake *fk, struct tconn *c, int index)
{
	struct ndc_query qs[256];
	uint8_t out[2 + 4096];
	size_t off = 0;
	int nq = 0;
	enum tmode mode = __atomic_load_n(&fk->mode, __ATOMIC_ACQUIRE);

	while (c->len - off >= 2 && nq < 256) {
		size_t ml = (size_t)c->buf[off] << 8 | c->buf[off + 1];

		if (c->len - off < 2 + ml)
			break;
		if (ndc_dns_parse_query(c->buf + off + 2, ml, &qs[nq]) == 0)
			nq++;
		off += 2 + ml;
	}
	memmove(c->buf, c->buf + off, c->len - off);
	c->len -= off;
	pthread_mutex_lock(&fk->lock);
	fk->tcp_queries += nq;
	if (nq > fk->max_batch)
		fk->max_batch = nq;
	pthread_mutex_unlock(&fk->lock);
	if (!nq || index < __atomic_load_n(&fk->frozen_below, __ATOMIC_ACQUIRE))
		return nq; /* frozen: read, never answered */
	if (mode == T_CLOSE_ALL || (mode == T_CLOSE_FIRST && index == 0)) {
		conn_drop(fk, c, false);
		return 0;
	}
	if (mode == T_DELAY) {
		struct timespec ts = {.tv_nsec = (long)fk->delay_ms * 1000000};

		__atomic_store_n(&fk->mode, T_ANSWER, __ATOMIC_RELEASE);
		nanosleep(&ts, NULL);
	}
	for (int k = 0; k < nq; k++) {
		struct ndc_query *q = &qs[mode == T_REVERSE ? nq - 1 - k : k];
		size_t len;

		if (mode == T_BOGUS_ID) {
			q->id ^= 0x5555;
			len = reply(q, out, sizeof(out), true, bad_name(fk, q));
			assert_int_equal(write(c->fd, out, len), (ssize_t)len);
			q->id ^= 0x5555;
		}
		len = reply(q, out, sizeof(out), true, bad_name(fk, q));
		if (write(c->fd, out, len) != (ssize_t)len) {
			conn_drop(fk, c, true);
			return 0;
		}
	}
	return nq;
}

/* What came in on c: every whole query, answered as the mode says. */
static void fake_conn(struct tfake *fk, struct tconn *c, int index)
{
	ssize_t n = read(c->fd, c->buf + c->len, sizeof(c->buf) - c->len);

	if (n <= 0) {
		conn_drop(fk, c, true);
		return;
	}
	c->len += (size_t)n;
	while (c->fd >= 0 && fake_batch(fk, c, index) > 0)
		;
}

static void *fake_thread(void *arg)
{
	struct tfake *fk = arg;
	int order[FAKE_CONNS]; /* accept order of each slot */

	while (!__atomic_load_n(&fk->stop, __ATOMIC_ACQUIRE)) {
		struct pollfd p[2 + FAKE_CONNS] = {{.fd = fk->udp, .events = POLLIN},
						   {.fd = fk->tcp, .events = POLLIN}};

		for (int i = 0; i < FAKE_CONNS; i++)
			p[2 + i] = (struct pollfd){.fd = fk->noread ? -1 : fk->conns[i].fd,
						   .events = POLLIN};
		if (poll(p, 2 + FAKE_CONNS, 20) <= 0)
			continue;
		if (p[0].revents & POLLIN)
			fake_udp(fk);
		if (p[1].revents & POLLIN) {
			int c = accept(fk->tcp, NULL, NULL);
			int i = 0;

			while (i < FAKE_CONNS && fk->conns[i].fd >= 0)
				i++;
			if (c >= 0 && i < FAKE_CONNS) {
				fk->conns[i].fd = c;
				pthread_mutex_lock(&fk->lock);
				order[i] = fk->accepted++;
				pthread_mutex_unlock(&fk->lock);
			} else if (c >= 0) {
				close(c);
			}
		}
		for (int i = 0; i < FAKE_CONNS; i++)
			if (fk->conns[i].fd >= 0 &&
			    (p[2 + i].revents & (POLLIN | POLLHUP | POLLERR)))
				fake_conn(fk, &fk->conns[i], order[i]);
	}
	return NULL;
}

static struct tfake *fake_start_opts(enum tmode mode, bool noread, int rcvbuf)
{
	struct tfake *fk = calloc(1, sizeof(*fk));
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	int one = 1;

	assert_non_null(fk);
	fk->mode = mode;
	fk->delay_ms = 300;
	fk->noread = noread;
	fk->rcvbuf = rcvbuf;
	pthread_mutex_init(&fk->lock, NULL);
	for (int i = 0; i < FAKE_CONNS; i++)
		fk->conns[i].fd = -1;
	for (int tries = 0;; tries++) {
		assert_true(tries < 20);
		fk->tcp = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		setsockopt(fk->tcp, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (rcvbuf) /* inherited by the accepted connections: a small window */
			setsockopt(fk->tcp, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
		sa.sin_port = 0;
		assert_int_equal(bind(fk->tcp, (struct sockaddr *)&sa, sizeof(sa)), 0);
		assert_int_equal(listen(fk->tcp, 64), 0);
		assert_int_equal(getsockname(fk->tcp, (struct sockaddr *)&sa, &sl), 0);
		fk->udp = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (bind(fk->udp, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			break;
		close(fk->udp);
		close(fk->tcp);
	}
	fk->port = ntohs(sa.sin_port);
	assert_int_equal(pthread_create(&fk->thread, NULL, fake_thread, fk), 0);
	return fk;
}

static struct tfake *fake_start(enum tmode mode)
{
	return fake_start_opts(mode, false, 0);
}

static void fake_stop(struct tfake *fk)
{
	__atomic_store_n(&fk->stop, 1, __ATOMIC_RELEASE);
	pthread_join(fk->thread, NULL);
	for (int i = 0; i < FAKE_CONNS; i++)
		if (fk->conns[i].fd >= 0)
			close(fk->conns[i].fd);
	close(fk->udp);
	close(fk->tcp);
	pthread_mutex_destroy(&fk->lock);
	free(fk);
}

static int fake_get(struct tfake *fk, const int *field)
{
	int v;

	pthread_mutex_lock(&fk->lock);
	v = *field;
	pthread_mutex_unlock(&fk->lock);
	return v;
}

/* ---- the forwarder's side ---------------------------------------------------------------- */

#define MAX_Q 4096

struct slot {
	int index;
	int status; /* 1: no callback yet */
	bool right; /* the answer carried this name's address */
};

static pthread_mutex_t res_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t res_cond = PTHREAD_COND_INITIALIZER;
static int res_count;
static struct slot slots[MAX_Q];

static void on_done(void *arg, const struct ndc_fwd_result *res)
{
	struct slot *s = arg;
	uint8_t ip[4];

	index_ip(s->index, ip);
	pthread_mutex_lock(&res_lock);
	s->status = res->status;
	s->right = res->status == 0 && res->answer->ancount == 1 && res->answer->len >= 4 &&
		   !memcmp(res->answer->data + res->answer->len - 4, ip, 4);
	res_count++;
	pthread_cond_broadcast(&res_cond);
	pthread_mutex_unlock(&res_lock);
}

static void results_reset(void)
{
	pthread_mutex_lock(&res_lock);
	res_count = 0;
	for (int i = 0; i < MAX_Q; i++)
		slots[i] = (struct slot){.index = i, .status = 1};
	pthread_mutex_unlock(&res_lock);
}

/* Waits (5 s at most) until n callbacks came; returns how many did. */
static int results_wait(int n)
{
	struct timespec ts;
	int got;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 5;
	pthread_mutex_lock(&res_lock);
	while (res_count < n && pthread_cond_timedwait(&res_cond, &res_lock, &ts) == 0)
		;
	got = res_count;
	pthread_mutex_unlock(&res_lock);
	return got;
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

/* A loopback port nobody listens on (TCP and UDP): connects are refused. */
static uint16_t closed_port(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(s >= 0);
	assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(getsockname(s, (struct sockaddr *)&sa, &sl), 0);
	close(s);
	return ntohs(sa.sin_port);
}

static struct ndc_forwarder *fwd_new(const uint16_t *ports, size_t n, enum ndc_fwd_protocol proto,
				     enum ndc_fwd_policy policy, uint32_t timeout_ms)
{
	struct sockaddr_storage ups[NDC_FWD_MAX_UPSTREAMS];
	struct ndc_forwarder_opts o = {.n_upstreams = n,
				       .upstreams = ups,
				       .timeout_ms = timeout_ms,
				       .protocol = proto,
				       .policy = policy,
				       .tcp_idle_ms = 300};
	struct ndc_forwarder *f;

	for (size_t i = 0; i < n; i++)
		ups[i] = loopback(ports[i]);
	results_reset();
	assert_int_equal(ndc_forwarder_new(&o, NULL, &f), 0);
	return f;
}

static void ask(struct ndc_forwarder *f, int i)
{
	uint8_t name[NDC_NAME_MAX];
	char text[64];
	size_t nlen;

	snprintf(text, sizeof(text), "n%d.example.test", i);
	assert_int_equal(ndc_name_from_text(text, name, sizeof(name), &nlen), 0);
	assert_int_equal(
	    ndc_forwarder_resolve(f, name, nlen, NDC_T_A, NDC_C_IN, on_done, &slots[i]), 0);
}

static int count_right(int n)
{
	int k = 0;

	pthread_mutex_lock(&res_lock);
	for (int i = 0; i < n; i++)
		k += slots[i].right;
	pthread_mutex_unlock(&res_lock);
	return k;
}

static struct ndc_fwd_upstream_stats up_stats(struct ndc_forwarder *f, size_t i)
{
	struct ndc_forwarder_stats st;

	ndc_forwarder_stats(f, &st);
	assert_true(i < st.n_upstreams);
	return st.upstream[i];
}

/* ---- pooled TCP -------------------------------------------------------------------------- */

/* 400 names at once over TCP: pipelined on at most 2 connections, answered last first, each
 * matched to its own query by ID. */
static void test_tcp_pipelined_out_of_order(void **state)
{
	struct tfake *fk = fake_start(T_REVERSE);
	struct ndc_forwarder *f = fwd_new(&fk->port, 1, NDC_FWD_TCP, NDC_FWD_SEQUENTIAL, 2000);
	struct ndc_fwd_upstream_stats us;

	(void)state;
	for (int i = 0; i < 400; i++)
		ask(f, i);
	assert_int_equal(results_wait(400), 400);
	assert_int_equal(count_right(400), 400);
	assert_true(fake_get(fk, &fk->accepted) <= 2);
	assert_true(fake_get(fk, &fk->max_batch) > 1); /* pipelined: several per read */
	assert_int_equal(fake_get(fk, &fk->udp_queries), 0);
	us = up_stats(f, 0);
	assert_int_equal(us.tcp_queries, 400);
	assert_true(us.tcp_conns <= 2);
	ndc_forwarder_free(f);
	fake_stop(fk);
}

/* The first connection dies with queries on it: they go again, once, on a second one. */
static void test_tcp_dead_conn_resent(void **state)
{
	struct tfake *fk = fake_start(T_CLOSE_FIRST);
	struct ndc_forwarder *f = fwd_new(&fk->port, 1, NDC_FWD_TCP, NDC_FWD_SEQUENTIAL, 2000);

	(void)state;
	for (int i = 0; i < 20; i++)
		ask(f, i);
	assert_int_equal(results_wait(20), 20);
	assert_int_equal(count_right(20), 20);
	assert_int_equal(fake_get(fk, &fk->accepted), 2);
	assert_true(up_stats(f, 0).tcp_resent >= 1);
	ndc_forwarder_free(f);
	fake_stop(fk);
}

/* Every connection to the first upstream dies unanswered: a query is sent there twice (two
 * connections), then goes to the second upstream. */
static void test_tcp_dead_twice_next_upstream(void **state)
{
	struct tfake *bad = fake_start(T_CLOSE_ALL), *good = fake_start(T_ANSWER);
	uint16_t ports[2] = {bad->port, good->port};
	struct ndc_forwarder *f = fwd_new(ports, 2, NDC_FWD_TCP, NDC_FWD_SEQUENTIAL, 2000);

	(void)state;
	ask(f, 7);
	assert_int_equal(results_wait(1), 1);
	assert_true(slots[7].right);
	assert_int_equal(fake_get(bad, &bad->accepted), 2);
	assert_int_equal(fake_get(bad, &bad->tcp_queries), 2);
	assert_int_equal(fake_get(good, &good->tcp_queries), 1);
	ndc_forwarder_free(f);
	fake_stop(bad);
	fake_stop(good);
}

/* Connections refused: the attempt fails at once (not after the timeout), and a burst of
 * queries does not make a connection each: the pool backs off. */
static void test_tcp_refused_backoff(void **state)
{
	uint16_t port = closed_port();
	struct ndc_forwarder *f = fwd_new(&port, 1, NDC_FWD_TCP, NDC_FWD_SEQUENTIAL, 2000);
	uint64_t t0 = ndc_now_ms();

	(void)state;
	ask(f, 1);
	assert_int_equal(results_wait(1), 1);
	assert_true(ndc_now_ms() - t0 < 1000);
	assert_int_equal(slots[1].status, -ECONNREFUSED);
	for (int i = 2; i < 50; i++)
		ask(f, i);
	assert_int_equal(results_wait(49), 49);
	assert_true(ndc_now_ms() - t0 < 1000);
	/* Two for the first query (one resend), then backoff; a third once 100 ms passed. */
	assert_true(up_stats(f, 0).tcp_conns <= 3);
	ndc_forwarder_free(f);
}

/* A connection idle for tcp_idle_ms (300 here) is closed; the next query opens another. */
static void test_tcp_idle_close(void **state)
{
	struct tfake *fk = fake_start(T_ANSWER);
	struct ndc_forwarder *f = fwd_new(&fk->port, 1, NDC_FWD_TCP, NDC_FWD_SEQUENTIAL, 2000);
	int i;

	(void)state;
	ask(f, 1);
	assert_int_equal(results_wait(1), 1);
	assert_int_equal(up_stats(f, 0).tcp_open, 1);
	for (i = 0; i < 300 && fake_get(fk, &fk->peer_closed) < 1; i++)
		usleep(10000);
	assert_int_equal(fake_get(fk, &fk->peer_closed), 1);
	assert_true(i >= 20); /* not before 300 ms less the sweep's granularity */
	assert_int_equal(up_stats(f, 0).tcp_open, 0);
	ask(f, 2);
	assert_int_equal(results_wait(2), 2);
	assert_true(slots[2].right);
	assert_int_equal(fake_get(fk, &fk->accepted), 2);
	ndc_forwarder_free(f);
	fake_stop(fk);
}

/* An answer with an ID nobody waits for is dropped; the connection and the query go on. */
static void test_tcp_unknown_id_ignored(void **state)
{
	struct tfake *fk = fake_start(T_BOGUS_ID);
	struct ndc_forwarder *f = fwd_new(&fk->port, 1, NDC_FWD_TCP, NDC_FWD_SEQUENTIAL, 2000);

	(void)state;
	for (int i = 0; i < 10; i++)
		ask(f, i);
	assert_int_equal(results_wait(10), 10);
	assert_int_equal(count_right(10), 10);
	assert_int_equal(fake_get(fk, &fk->accepted), 1);
	ndc_forwarder_free(f);
	fake_stop(fk);
}

/* An answer after its query timed out is dropped; the connection stays for the next. */
static void test_tcp_late_answer(void **state)
{
	struct tfake *fk = fake_start(T_DELAY);
	struct ndc_forwarder *f = fwd_new(&fk->port, 1, NDC_FWD_TCP, NDC_FWD_SEQUENTIAL, 100);

	(void)state;
	ask(f, 1);
	assert_int_equal(results_wait(1), 1);
	assert_int_equal(slots[1].status, -ETIMEDOUT);
	usleep(400 * 1000); /* the late answer arrives */
	ask(f, 2);
	assert_int_equal(results_wait(2), 2);
	assert_true(slots[2].right);
	ndc_forwarder_free(f);
	fake_stop(fk);
}

/* prefer_udp: a UDP attempt that times out is asked again over TCP of the same upstream. */
static void test_prefer_udp_fallback(void **state)
{
	struct tfake *fk = fake_start(T_ANSWER);
	struct ndc_forwarder *f;
	struct ndc_forwarder_stats st;

	(void)state;
	fk->udp_silent = true;
	f = fwd_new(&fk->port, 1, NDC_FWD_PREFER_UDP, NDC_FWD_SEQUENTIAL, 150);
	ask(f, 3);
	assert_int_equal(results_wait(1), 1);
	assert_true(slots[3].right);
	assert_int_equal(fake_get(fk, &fk->udp_queries), 1);
	assert_int_equal(fake_get(fk, &fk->tcp_queries), 1);
	ndc_forwarder_stats(f, &st);
	assert_int_equal(st.tcp_fallbacks, 1);
	assert_true(st.upstream[0].healthy);
	/* udp answered: no TCP */
	__atomic_store_n(&fk->udp_silent, false, __ATOMIC_RELEASE);
	ask(f, 4);
	assert_int_equal(results_wait(2), 2);
	assert_true(slots[4].right);
	assert_int_equal(fake_get(fk, &fk->tcp_queries), 1);
	ndc_forwarder_free(f);
	fake_stop(fk);
}

/* protocol udp (the default): UDP only; a silent UDP upstream is not asked over TCP. */
static void test_udp_no_fallback(void **state)
{
	struct tfake *fk = fake_start(T_ANSWER);
	struct ndc_forwarder *f;

	(void)state;
	fk->udp_silent = true;
	f = fwd_new(&fk->port, 1, NDC_FWD_UDP, NDC_FWD_SEQUENTIAL, 100);
	ask(f, 3);
	assert_int_equal(results_wait(1), 1);
	assert_int_equal(slots[3].status, -ETIMEDOUT);
	assert_int_equal(fake_get(fk, &fk->tcp_queries), 0);
	ndc_forwarder_free(f);
	fake_stop(fk);
}

/* ---- forward.policy ---------------------------------------------------------------------- */

/* n names one after another (each answered before the next), over three upstreams: how many
 * queries each got. */
static void policy_run(enum ndc_fwd_policy policy, int n, int got[3])
{
	struct tfake *fk[3] = {fake_start(T_ANSWER), fake_start(T_ANSWER), fake_start(T_ANSWER)};
	uint16_t ports[3] = {fk[0]->port, fk[1]->port, fk[2]->port};
	struct ndc_forwarder *f = fwd_new(ports, 3, NDC_FWD_UDP, policy, 2000);

	for (int i = 0; i < n; i++) {
		ask(f, i);
		assert_int_equal(results_wait(i + 1), i + 1);
	}
	assert_int_equal(count_right(n), n);
	for (int k = 0; k < 3; k++) {
		got[k] = fake_get(fk[k], &fk[k]->udp_queries);
		fake_stop(fk[k]);
	}
	ndc_forwarder_free(f);
}

static void test_policy_sequential(void **state)
{
	int got[3];

	(void)state;
	policy_run(NDC_FWD_SEQUENTIAL, 30, got);
	assert_int_equal(got[0], 30);
	assert_int_equal(got[1], 0);
	assert_int_equal(got[2], 0);
}

static void test_policy_round_robin(void **state)
{
	int got[3];

	(void)state;
	policy_run(NDC_FWD_ROUND_ROBIN, 30, got);
	for (int k = 0; k < 3; k++)
		assert_int_equal(got[k], 10);
}

/* Random: every upstream gets some of 90 (each missing all has odds of 3 * (2/3)^90). */
static void test_policy_random(void **state)
{
	int got[3];

	(void)state;
	policy_run(NDC_FWD_RANDOM, 90, got);
	for (int k = 0; k < 3; k++)
		assert_true(got[k] >= 10 && got[k] <= 60);
	assert_int_equal(got[0] + got[1] + got[2], 90);
}

/* Round robin goes past a dead upstream (a closed port: refused) to the next, and health
 * still applies: once down it is skipped, not asked by every third query. */
static void test_policy_round_robin_dead(void **state)
{
	struct tfake *a = fake_start(T_ANSWER), *b = fake_start(T_ANSWER);
	uint16_t ports[3] = {a->port, closed_port(), b->port};
	struct ndc_forwarder *f = fwd_new(ports, 3, NDC_FWD_UDP, NDC_FWD_ROUND_ROBIN, 2000);
	struct ndc_fwd_upstream_stats dead;

	(void)state;
	for (int i = 0; i < 30; i++) {
		ask(f, i);
		assert_int_equal(results_wait(i + 1), i + 1);
	}
	assert_int_equal(count_right(30), 30);
	dead = up_stats(f, 1);
	assert_false(dead.healthy);
	assert_true(dead.queries <= 2); /* the first failure, maybe one probe */
	assert_true(dead.skipped >= 5);
	assert_int_equal(fake_get(a, &a->udp_queries) + fake_get(b, &b->udp_queries), 30);
	assert_true(fake_get(a, &a->udp_queries) >= 10 && fake_get(b, &b->udp_queries) >= 10);
	ndc_forwarder_free(f);
	fake_stop(a);
	fake_stop(b);
}

/* ---- loop detection ---------------------------------------------------------------------- */

static bool looping(struct ndc_forwarder *f, size_t i)
{
	return up_stats(f, i).looping;
}

/* Waits (3 s at most) until upstream i's looping is want. */
static bool looping_wait(struct ndc_forwarder *f, size_t i, bool want)
{
	for (int k = 0; k < 300; k++) {
		if (looping(f, i) == want)
			return true;
		usleep(10000);
	}
	return false;
}

/* The first upstream sends its check back: it is marked and never asked again; the second
 * answers everything. Nothing is checked before the agent arms it. */
static void test_loop_detected(void **state)
{
	struct tfake *lp = fake_start(T_LOOP), *good = fake_start(T_ANSWER);
	uint16_t ports[2] = {lp->port, good->port};
	struct ndc_forwarder *f = fwd_new(ports, 2, NDC_FWD_UDP, NDC_FWD_SEQUENTIAL, 500);
	struct ndc_forwarder_stats st;

	(void)state;
	__atomic_store_n(&loop_fwd, f, __ATOMIC_RELEASE);
	usleep(100 * 1000);
	assert_int_equal(fake_get(lp, &lp->udp_queries), 0);
	ndc_forwarder_loop_check(f);
	assert_true(looping_wait(f, 0, true));
	assert_false(looping(f, 1));
	assert_int_equal(fake_get(lp, &lp->udp_queries), 1);
	for (int i = 0; i < 20; i++)
		ask(f, i);
	assert_int_equal(results_wait(20), 20);
	assert_int_equal(count_right(20), 20);
	assert_int_equal(fake_get(lp, &lp->udp_queries), 1);
	ndc_forwarder_stats(f, &st);
	assert_false(st.all_looping);
	__atomic_store_n(&loop_fwd, NULL, __ATOMIC_RELEASE);
	ndc_forwarder_free(f);
	fake_stop(lp);
	fake_stop(good);
}

/* The only upstream loops: queries fail at once with -ELOOP and it gets none of them; once it
 * stops looping, the check after a reconfiguration puts it back in use. */
static void test_loop_all_then_fixed(void **state)
{
	struct tfake *lp = fake_start(T_LOOP);
	struct ndc_forwarder *f = fwd_new(&lp->port, 1, NDC_FWD_UDP, NDC_FWD_SEQUENTIAL, 500);
	struct sockaddr_storage up = loopback(lp->port);
	struct ndc_forwarder_opts o = {.n_upstreams = 1, .upstreams = &up, .timeout_ms = 400};
	struct ndc_forwarder_stats st;
	uint64_t t0;

	(void)state;
	__atomic_store_n(&loop_fwd, f, __ATOMIC_RELEASE);
	ndc_forwarder_loop_check(f);
	assert_true(looping_wait(f, 0, true));
	ndc_forwarder_stats(f, &st);
	assert_true(st.all_looping);
	t0 = ndc_now_ms();
	for (int i = 0; i < 50; i++)
		ask(f, i);
	assert_int_equal(results_wait(50), 50);
	assert_true(ndc_now_ms() - t0 < 400);
	for (int i = 0; i < 50; i++)
		assert_int_equal(slots[i].status, -ELOOP);
	assert_int_equal(fake_get(lp, &lp->udp_queries), 1);
	/* Fixed: the next check (after a reconfiguration) is answered and does not come back. */
	__atomic_store_n(&lp->mode, T_ANSWER, __ATOMIC_RELEASE);
	assert_int_equal(ndc_forwarder_reconfigure(f, &o), 0);
	assert_true(looping_wait(f, 0, false));
	assert_int_equal(fake_get(lp, &lp->udp_queries), 2);
	results_reset();
	ask(f, 5);
	assert_int_equal(results_wait(1), 1);
	assert_true(slots[5].right);
	__atomic_store_n(&loop_fwd, NULL, __ATOMIC_RELEASE);
	ndc_forwarder_free(f);
	fake_stop(lp);
}

/* Names under the zone are the forwarder's to answer; a token nobody sent marks nothing. */
static void test_loop_names(void **state)
{
	struct tfake *fk = fake_start(T_ANSWER);
	struct ndc_forwarder *f = fwd_new(&fk->port, 1, NDC_FWD_UDP, NDC_FWD_SEQUENTIAL, 500);
	static const char *const ours[] = {"0123456789abcdef.ndcache-loop.invalid",
					   "x.ndcache-loop.invalid", "ndcache-loop.invalid"};
	static const char *const other[] = {"invalid", "ndcache-loop.invalid.example",
					    "www.example.test"};
	uint8_t name[NDC_NAME_MAX];
	size_t nlen;

	(void)state;
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(ndc_name_from_text(ours[i], name, sizeof(name), &nlen), 0);
		assert_true(ndc_forwarder_loop_name(f, name, nlen));
		assert_int_equal(ndc_name_from_text(other[i], name, sizeof(name), &nlen), 0);
		assert_false(ndc_forwarder_loop_name(f, name, nlen));
	}
	usleep(50 * 1000);
	assert_false(looping(f, 0));
	ndc_forwarder_free(f);
	fake_stop(fk);
}

/* ---- upstreams that fail quietly (issue 34) ---------------------------------------------- */

/* Waits (5 s at most) until slot i has its callback; returns the milliseconds it took from t0. */
static uint64_t slot_wait(int i, uint64_t t0)
{
	for (int k = 0; k < 500; k++) {
		int st;

		pthread_mutex_lock(&res_lock);
		st = slots[i].status;
		pthread_mutex_unlock(&res_lock);
		if (st != 1)
			return ndc_now_ms() - t0;
		usleep(10000);
	}
	fail_msg("no callback for n%d within 5 s", i);
	return 0;
}

static int slot_status(int i)
{
	int st;

	pthread_mutex_lock(&res_lock);
	st = slots[i].status;
	pthread_mutex_unlock(&res_lock);
	return st;
}

/*
 * The connection in use stops answering (the server behind a ClusterIP gone) while a new one
 * would work: once it has answered nothing for timeout_ms it is closed, and the queries on it
 * whose deadline has not passed are answered over a new connection.
 */
static void test_tcp_frozen_conn_closed(void **state)
{
	struct tfake *fk = fake_start(T_ANSWER);
	struct ndc_forwarder *f = fwd_new(&fk->port, 1, NDC_FWD_TCP, NDC_FWD_SEQUENTIAL, 400);
	struct ndc_fwd_upstream_stats us;
	uint64_t t0;

	(void)state;
	ask(f, 0);
	assert_int_equal(results_wait(1), 1);
	assert_true(slots[0].right);
	__atomic_store_n(&fk->frozen_below, fake_get(fk, &fk->accepted), __ATOMIC_RELEASE);
	t0 = ndc_now_ms();
	ask(f, 1); /* on the frozen connection: times out with it */
	usleep(150 * 1000);
	for (int i = 2; i < 12; i++)
		ask(f, i); /* on it too, 150 ms later: their deadlines outlive it */
	assert_int_equal(results_wait(12), 12);
	assert_true(ndc_now_ms() - t0 < 1000);
	assert_true(slot_status(1) < 0);
	assert_int_equal(count_right(12), 11);
	us = up_stats(f, 0);
	assert_int_equal(us.tcp_stalled, 1);
	assert_true(us.tcp_resent >= 10);
	assert_int_equal(fake_get(fk, &fk->accepted), 2);
	/* The next names go on the new connection at once. */
	t0 = ndc_now_ms();
	ask(f, 12);
	assert_true(slot_wait(12, t0) < 200);
	assert_true(slots[12].right);
	ndc_forwarder_free(f);
	fake_stop(fk);
}

/* A connection that has queries timed out on it and none outstanding is closed too: sparse
 * traffic does not keep sending each query to a dead connection. */
static void test_tcp_frozen_conn_sparse(void **state)
{
	struct tfake *fk = fake_start(T_ANSWER);
	struct ndc_forwarder *f = fwd_new(&fk->port, 1, NDC_FWD_TCP, NDC_FWD_SEQUENTIAL, 300);
	uint64_t t0;

	(void)state;
	ask(f, 0);
	assert_int_equal(results_wait(1), 1);
	__atomic_store_n(&fk->frozen_below, fake_get(fk, &fk->accepted), __ATOMIC_RELEASE);
	t0 = ndc_now_ms();
	ask(f, 1);
	slot_wait(1, t0);
	assert_true(slot_status(1) < 0);
	t0 = ndc_now_ms();
	ask(f, 2);
	assert_true(slot_wait(2, t0) < 200);
	assert_true(slots[2].right);
	assert_int_equal(up_stats(f, 0).tcp_stalled, 1);
	ndc_forwarder_free(f);
	fake_stop(fk);
}

/*
 * A peer that accepts and never reads, behind a small window: the bytes queued on each
 * connection stop at NDC_FWD_TCP_QUEUE_MAX; the queries beyond go to the next upstream at once.
 */
static void test_tcp_queue_capped(void **state)
{
	struct tfake *fk = fake_start_opts(T_ANSWER, true, 4096);
	struct tfake *fk2 = fake_start(T_ANSWER);
	uint16_t ports[2] = {fk->port, fk2->port};
	struct ndc_forwarder *f = fwd_new(ports, 2, NDC_FWD_TCP, NDC_FWD_SEQUENTIAL, 3000);
	struct ndc_fwd_upstream_stats us;
	uint64_t t0 = ndc_now_ms();
	int n = 4000, right;

	(void)state;
	for (int i = 0; i < n; i++)
		ask(f, i);
	/* Those beyond the cap are answered by the second upstream well before timeout_ms. */
	for (int k = 0; k < 100 && fake_get(fk2, &fk2->tcp_queries) == 0; k++)
		usleep(10000);
	assert_true(fake_get(fk2, &fk2->tcp_queries) > 0);
	assert_true(ndc_now_ms() - t0 < 1500);
	us = up_stats(f, 0);
	print_message("queue full: %llu, to the second upstream after %llu ms\n",
		      (unsigned long long)us.tcp_queue_full,
		      (unsigned long long)(ndc_now_ms() - t0));
	assert_true(us.tcp_queue_full > 0);
	assert_true(us.tcp_conns <= 2);
	assert_true(results_wait(n) == n);
	right = count_right(n);
	print_message("%d of %d answered\n", right, n);
	assert_true((uint64_t)right >= us.tcp_queue_full);
	ndc_forwarder_free(f);
	fake_stop(fk);
	fake_stop(fk2);
}

/*
 * One name gets a FORMERR with no question (UDP, then TCP): that query moves to the next
 * upstream at once, counted as a bad answer; the upstream stays up and answers every other name.
 */
static void formerr_one(enum ndc_fwd_protocol proto)
{
	struct tfake *fk = fake_start(T_FORMERR_ONE);
	struct tfake *fk2 = fake_start(T_ANSWER);
	uint16_t ports[2] = {fk->port, fk2->port};
	struct ndc_forwarder *f = fwd_new(ports, 2, proto, NDC_FWD_SEQUENTIAL, 2000);
	struct ndc_fwd_upstream_stats us;
	uint64_t t0;

	t0 = ndc_now_ms();
	ask(f, BAD_NAME);
	assert_true(slot_wait(BAD_NAME, t0) < 500);
	assert_true(slots[BAD_NAME].right); /* the second upstream's answer */
	for (int i = 0; i < 20; i++) {
		if (i == BAD_NAME)
			continue;
		t0 = ndc_now_ms();
		ask(f, i);
		assert_true(slot_wait(i, t0) < 500);
		assert_true(slots[i].right);
	}
	us = up_stats(f, 0);
	assert_int_equal(us.bad_answers, 1);
	assert_int_equal(us.timeouts, 0);
	assert_true(us.healthy);
	assert_int_equal(us.responses, 19);
	assert_int_equal(up_stats(f, 1).responses, 1);
	ndc_forwarder_free(f);
	fake_stop(fk);
	fake_stop(fk2);

	/* The only upstream: the bad name fails at once, the upstream stays up. */
	fk = fake_start(T_FORMERR_ONE);
	f = fwd_new(&fk->port, 1, proto, NDC_FWD_SEQUENTIAL, 2000);
	t0 = ndc_now_ms();
	ask(f, BAD_NAME);
	assert_true(slot_wait(BAD_NAME, t0) < 500);
	assert_true(slot_status(BAD_NAME) < 0);
	us = up_stats(f, 0);
	assert_true(us.healthy);
	assert_int_equal(us.backoff_ms, 0);
	ndc_forwarder_free(f);
	fake_stop(fk);
}

static void test_formerr_no_question_udp(void **state)
{
	(void)state;
	formerr_one(NDC_FWD_UDP);
}

static void test_formerr_no_question_tcp(void **state)
{
	(void)state;
	formerr_one(NDC_FWD_TCP);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_tcp_pipelined_out_of_order),
	    cmocka_unit_test(test_tcp_dead_conn_resent),
	    cmocka_unit_test(test_tcp_dead_twice_next_upstream),
	    cmocka_unit_test(test_tcp_refused_backoff),
	    cmocka_unit_test(test_tcp_idle_close),
	    cmocka_unit_test(test_tcp_unknown_id_ignored),
	    cmocka_unit_test(test_tcp_late_answer),
	    cmocka_unit_test(test_tcp_frozen_conn_closed),
	    cmocka_unit_test(test_tcp_frozen_conn_sparse),
	    cmocka_unit_test(test_tcp_queue_capped),
	    cmocka_unit_test(test_formerr_no_question_udp),
	    cmocka_unit_test(test_formerr_no_question_tcp),
	    cmocka_unit_test(test_prefer_udp_fallback),
	    cmocka_unit_test(test_udp_no_fallback),
	    cmocka_unit_test(test_policy_sequential),
	    cmocka_unit_test(test_policy_round_robin),
	    cmocka_unit_test(test_policy_random),
	    cmocka_unit_test(test_policy_round_robin_dead),
	    cmocka_unit_test(test_loop_detected),
	    cmocka_unit_test(test_loop_all_then_fixed),
	    cmocka_unit_test(test_loop_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
