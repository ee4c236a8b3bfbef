// SPDX-License-Identifier: MIT
/*
 * The socket server over loopback only (127.0.0.0/8 and ::1). The handler is an echo: the reply is
 * the query with its first byte flipped; a first byte of 'D' means NDC_DROP and 'P' NDC_PENDING
 * (the test thread completes it later, from outside the worker).
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <ndc/ip.h>

#include "socket/socket.h"

#define MAX_HELD 16

struct held {
	struct ndc_pending *p;
	uint8_t msg[64];
	size_t len;
	bool tcp;
};

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct held held[MAX_HELD];
	size_t n_held;
} hctx = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {{0}}, 0};

static enum ndc_verdict handler(void *ctx, struct ndc_socket_req *req, const uint8_t *msg,
				size_t len, uint8_t *out, size_t cap, size_t *ret_len)
{
	(void)ctx;
	if (len && msg[0] == 'D')
		return NDC_DROP;
	if (len && msg[0] == 'P') {
		struct held *h;

		pthread_mutex_lock(&hctx.mu);
		if (hctx.n_held == MAX_HELD || len > sizeof(h->msg)) {
			pthread_mutex_unlock(&hctx.mu);
			return NDC_DROP;
		}
		h = &hctx.held[hctx.n_held];
		h->p = ndc_socket_detain(req);
		if (!h->p) {
			pthread_mutex_unlock(&hctx.mu);
			return NDC_DROP;
		}
		memcpy(h->msg, msg, len);
		h->len = len;
		h->tcp = ndc_socket_req_is_tcp(req);
		hctx.n_held++;
		pthread_cond_broadcast(&hctx.cv);
		pthread_mutex_unlock(&hctx.mu);
		return NDC_PENDING;
	}
	if (len > cap)
		return NDC_DROP;
	memcpy(out, msg, len);
	if (len)
		out[0] ^= 0xff;
	*ret_len = len;
	return NDC_SEND;
}

/* Waits until n queries are held; returns how many are. */
static size_t wait_held(size_t n)
{
	struct timespec ts;
	size_t got;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 3;
	pthread_mutex_lock(&hctx.mu);
	while (hctx.n_held < n) {
		if (pthread_cond_timedwait(&hctx.cv, &hctx.mu, &ts) == ETIMEDOUT)
			break;
	}
	got = hctx.n_held;
	pthread_mutex_unlock(&hctx.mu);
	return got;
}

/* Answers held query i the way the echo would (len 0: drop it). */
static void complete_held(size_t i, bool drop)
{
	struct held h;

	pthread_mutex_lock(&hctx.mu);
	assert_true(i < hctx.n_held);
	h = hctx.held[i];
	hctx.held[i].p = NULL;
	pthread_mutex_unlock(&hctx.mu);
	assert_non_null(h.p);
	h.msg[0] ^= 0xff;
	ndc_socket_complete(h.p, h.msg, drop ? 0 : h.len);
}

/* Every test completes what it detains. */
static void expect_all_completed(void)
{
	pthread_mutex_lock(&hctx.mu);
	for (size_t i = 0; i < hctx.n_held; i++)
		assert_null(hctx.held[i].p);
	pthread_mutex_unlock(&hctx.mu);
}

static int reset_held(void **state)
{
	(void)state;
	pthread_mutex_lock(&hctx.mu);
	hctx.n_held = 0;
	pthread_mutex_unlock(&hctx.mu);
	return 0;
}

/* ---- helpers ---- */

static struct ndc_ip ip_of(const char *s)
{
	struct ndc_ip ip = {0};

	if (inet_pton(AF_INET, s, ip.addr) == 1) {
		ip.family = AF_INET;
	} else {
		assert_int_equal(inet_pton(AF_INET6, s, ip.addr), 1);
		ip.family = AF_INET6;
	}
	return ip;
}

static socklen_t sockaddr_of(const char *s, uint16_t port, struct sockaddr_storage *ss)
{
	struct ndc_ip ip = ip_of(s);

	memset(ss, 0, sizeof(*ss));
	if (ip.family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;

		sin->sin_family = AF_INET;
		sin->sin_port = htons(port);
		memcpy(&sin->sin_addr, ip.addr, 4);
		return sizeof(*sin);
	}
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

	sin6->sin6_family = AF_INET6;
	sin6->sin6_port = htons(port);
	memcpy(&sin6->sin6_addr, ip.addr, 16);
	return sizeof(*sin6);
}

static struct ndc_socket *start(const char *const *addrs, size_t n, unsigned workers,
				uint32_t idle_ms, uint32_t max_conns)
{
	struct ndc_ip ips[4];
	struct ndc_socket_opts o = {
	    .n_addrs = n,
	    .addrs = ips,
	    .workers = workers,
	    .tcp_idle_ms = idle_ms,
	    .tcp_max_conns = max_conns,
	};
	struct ndc_socket *s = NULL;

	assert_true(n <= 4);
	for (size_t i = 0; i < n; i++)
		ips[i] = ip_of(addrs[i]);
	assert_int_equal(ndc_socket_start(&o, handler, NULL, &s), 0);
	assert_non_null(s);
	assert_int_not_equal(ndc_socket_port(s), 0);
	return s;
}

static void set_timeout(int fd, int ms)
{
	struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};

	assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
}

static int udp_client(int family)
{
	int fd = socket(family, SOCK_DGRAM, 0);

	assert_true(fd >= 0);
	set_timeout(fd, 2000);
	return fd;
}

static void udp_send(int fd, const char *addr, uint16_t port, const void *msg, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sockaddr_of(addr, port, &ss);

	assert_int_equal(sendto(fd, msg, len, 0, (struct sockaddr *)&ss, sl), (ssize_t)len);
}

static int tcp_client(const char *addr, uint16_t port)
{
	static const int one = 1;
	struct sockaddr_storage ss;
	socklen_t sl = sockaddr_of(addr, port, &ss);
	int fd = socket(ss.ss_family, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&ss, sl), 0);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	set_timeout(fd, 2000);
	return fd;
}

static void send_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t r = send(fd, p, len, MSG_NOSIGNAL);

		assert_true(r > 0);
		p += r;
		len -= (size_t)r;
	}
}

/* Returns len, 0 on EOF, -1 on timeout or error. */
static ssize_t recv_exact(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;
	size_t got = 0;

	while (got < len) {
		ssize_t r = recv(fd, p + got, len - got, 0);

		if (r == 0)
			return 0;
		if (r < 0)
			return -1;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

static size_t frame(uint8_t *buf, const uint8_t *msg, size_t len)
{
	buf[0] = (uint8_t)(len >> 8);
	buf[1] = (uint8_t)len;
	memcpy(buf + 2, msg, len);
	return len + 2;
}

/* Reads one framed reply and checks it is the echo of msg. */
static void expect_reply(int fd, const uint8_t *msg, size_t len)
{
	uint8_t hdr[2], body[512];
	size_t n;

	assert_int_equal(recv_exact(fd, hdr, 2), 2);
	n = (size_t)hdr[0] << 8 | hdr[1];
	assert_int_equal(n, len);
	assert_true(n <= sizeof(body));
	assert_int_equal(recv_exact(fd, body, n), (ssize_t)n);
	assert_int_equal(body[0], msg[0] ^ 0xff);
	assert_memory_equal(body + 1, msg + 1, len - 1);
}

static void tcp_query(int fd, const char *text)
{
	uint8_t buf[256];

	send_all(fd, buf, frame(buf, (const uint8_t *)text, strlen(text)));
	expect_reply(fd, (const uint8_t *)text, strlen(text));
}

/* True when the server closed fd (EOF or reset) within the socket's receive timeout. */
static bool closed_by_peer(int fd)
{
	uint8_t b;
	ssize_t r = recv(fd, &b, 1, 0);

	return r == 0 || (r < 0 && errno == ECONNRESET);
}

/* Nothing arrives within ms. */
static void expect_silence(int fd, int ms)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};

	assert_int_equal(poll(&pfd, 1, ms), 0);
}

static int count_dir(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

static uint64_t ms_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Counters are bumped after the send; poll until the expected value shows up. */
static struct ndc_socket_stats stats_when(struct ndc_socket *s, uint64_t replies)
{
	struct ndc_socket_stats st;

	for (int i = 0; i < 200; i++) {
		ndc_socket_stats(s, &st);
		if (st.replies >= replies)
			break;
		usleep(5000);
	}
	return st;
}

static const char *const v4[] = {"127.0.0.1"};
static const char *const v6[] = {"::1"};

/* ---- tests ---- */

#define UDP_SOCKS 8
#define UDP_PER_SOCK 64
#define UDP_WINDOW 16

static void test_udp_many(void **state)
{
	(void)state;
	struct ndc_socket *s = start(v4, 1, 2, 0, 0);
	uint16_t port = ndc_socket_port(s);
	bool seen[UDP_SOCKS][UDP_PER_SOCK] = {{false}};
	int fds[UDP_SOCKS];
	struct ndc_socket_stats st;

	/* Several source ports so that SO_REUSEPORT spreads the flows over both workers. */
	for (int k = 0; k < UDP_SOCKS; k++)
		fds[k] = udp_client(AF_INET);
	for (int base = 0; base < UDP_PER_SOCK; base += UDP_WINDOW) {
		for (int k = 0; k < UDP_SOCKS; k++) {
			for (int i = base; i < base + UDP_WINDOW; i++) {
				uint8_t q[20] = {'E', (uint8_t)k, (uint8_t)i};

				memset(q + 3, 0x5a, sizeof(q) - 3);
				udp_send(fds[k], "127.0.0.1", port, q, sizeof(q));
			}
		}
		for (int k = 0; k < UDP_SOCKS; k++) {
			for (int i = 0; i < UDP_WINDOW; i++) {
				uint8_t r[64];
				ssize_t n = recv(fds[k], r, sizeof(r), 0);

				assert_int_equal(n, 20);
				assert_int_equal(r[0], 'E' ^ 0xff);
				assert_int_equal(r[1], k);
				assert_true(r[2] >= base && r[2] < base + UDP_WINDOW);
				assert_false(seen[k][r[2]]);
				seen[k][r[2]] = true;
				assert_int_equal(r[19], 0x5a);
			}
		}
	}
	for (int k = 0; k < UDP_SOCKS; k++) {
		for (int i = 0; i < UDP_PER_SOCK; i++)
			assert_true(seen[k][i]);
		close(fds[k]);
	}
	st = stats_when(s, UDP_SOCKS * UDP_PER_SOCK);
	assert_int_equal(st.udp_queries, UDP_SOCKS * UDP_PER_SOCK);
	assert_int_equal(st.replies, UDP_SOCKS * UDP_PER_SOCK);
	assert_int_equal(st.drops, 0);
	assert_int_equal(st.tcp_queries, 0);
	ndc_socket_stop(s);
}

static void test_udp_drop(void **state)
{
	(void)state;
	struct ndc_socket *s = start(v4, 1, 2, 0, 0);
	uint16_t port = ndc_socket_port(s);
	int fd = udp_client(AF_INET);
	static uint8_t big[5000];
	uint8_t r[64];
	struct ndc_socket_stats st;

	udp_send(fd, "127.0.0.1", port, "Dropme", 6);
	/* Longer than the 4096-byte slot: truncated on receive, so dropped unseen. */
	big[0] = 'E';
	udp_send(fd, "127.0.0.1", port, big, sizeof(big));
	expect_silence(fd, 300);
	/* The same socket still gets answers: the silence was the verdict. */
	udp_send(fd, "127.0.0.1", port, "Echo", 4);
	assert_int_equal(recv(fd, r, sizeof(r), 0), 4);
	assert_memory_equal(r + 1, "cho", 3);
	st = stats_when(s, 1);
	assert_int_equal(st.udp_queries, 3);
	assert_int_equal(st.replies, 1);
	assert_int_equal(st.drops, 2);
	close(fd);
	ndc_socket_stop(s);
}

static void test_tcp_single(void **state)
{
	(void)state;
	struct ndc_socket *s = start(v4, 1, 2, 0, 0);
	int fd = tcp_client("127.0.0.1", ndc_socket_port(s));
	struct ndc_socket_stats st;

	tcp_query(fd, "Ehello, tcp");
	close(fd);
	st = stats_when(s, 1);
	assert_int_equal(st.tcp_queries, 1);
	assert_int_equal(st.tcp_conns, 1);
	assert_int_equal(st.replies, 1);
	ndc_socket_stop(s);
}

#define PIPELINED 100

static void test_tcp_pipelined(void **state)
{
	(void)state;
	struct ndc_socket *s = start(v4, 1, 2, 0, 0);
	int fd = tcp_client("127.0.0.1", ndc_socket_port(s));
	static uint8_t buf[PIPELINED * 80];
	uint8_t q[PIPELINED][64];
	size_t len[PIPELINED], off = 0;

	for (int i = 0; i < PIPELINED; i++) {
		len[i] = 10 + (size_t)(i % 50);
		memset(q[i], i, len[i]);
		q[i][0] = 'E';
		off += frame(buf + off, q[i], len[i]);
	}
	send_all(fd, buf, off);
	/* All answered synchronously, so in order; the framing must line up for every one. */
	for (int i = 0; i < PIPELINED; i++)
		expect_reply(fd, q[i], len[i]);
	expect_silence(fd, 50);
	close(fd);
	ndc_socket_stop(s);
}

static void test_tcp_split(void **state)
{
	(void)state;
	struct ndc_socket *s = start(v4, 1, 2, 0, 0);
	int fd = tcp_client("127.0.0.1", ndc_socket_port(s));
	uint8_t buf[64];
	size_t n = frame(buf, (const uint8_t *)"Efirst", 6);

	n += frame(buf + n, (const uint8_t *)"Esecond!", 8);
	for (size_t i = 0; i < n; i++) {
		send_all(fd, buf + i, 1);
		usleep(2000);
	}
	expect_reply(fd, (const uint8_t *)"Efirst", 6);
	expect_reply(fd, (const uint8_t *)"Esecond!", 8);
	close(fd);
	ndc_socket_stop(s);
}

#define BIG_QUERIES 2000
#define BIG_LEN 4000

struct writer {
	int fd;
	uint8_t *buf;
	size_t len;
};

static void *writer_thread(void *arg)
{
	struct writer *wr = arg;
	const uint8_t *p = wr->buf;
	size_t len = wr->len;

	while (len) {
		ssize_t r = send(wr->fd, p, len, MSG_NOSIGNAL);

		if (r <= 0)
			break;
		p += r;
		len -= (size_t)r;
	}
	wr->len = len;
	return NULL;
}

/* A client that does not read: the server stops taking queries until it can write again. */
static void test_tcp_backpressure(void **state)
{
	(void)state;
	struct ndc_socket *s = start(v4, 1, 2, 0, 0);
	int fd = tcp_client("127.0.0.1", ndc_socket_port(s));
	struct writer wr = {.fd = fd, .len = BIG_QUERIES * (2 + BIG_LEN)};
	static uint8_t body[BIG_LEN];
	struct ndc_socket_stats st;
	pthread_t t;

	wr.buf = malloc(wr.len);
	assert_non_null(wr.buf);
	for (int i = 0; i < BIG_QUERIES; i++) {
		uint8_t *q = wr.buf + (size_t)i * (2 + BIG_LEN);

		q[0] = BIG_LEN >> 8;
		q[1] = BIG_LEN & 0xff;
		memset(q + 2, i, BIG_LEN);
		q[2] = 'E';
	}
	assert_int_equal(pthread_create(&t, NULL, writer_thread, &wr), 0);
	usleep(300 * 1000);
	/* 8 MB of answers do not fit the socket buffers (net.ipv4.tcp_wmem tops out at 4 MiB by
	 * default): the server must have paused reading this connection. */
	ndc_socket_stats(s, &st);
	assert_true(st.tcp_queries < BIG_QUERIES);
	for (int i = 0; i < BIG_QUERIES; i++) {
		uint8_t hdr[2];

		assert_int_equal(recv_exact(fd, hdr, 2), 2);
		assert_int_equal((size_t)hdr[0] << 8 | hdr[1], BIG_LEN);
		assert_int_equal(recv_exact(fd, body, BIG_LEN), BIG_LEN);
		assert_int_equal(body[0], 'E' ^ 0xff);
		assert_int_equal(body[1], (uint8_t)i);
		assert_int_equal(body[BIG_LEN - 1], (uint8_t)i);
	}
	pthread_join(t, NULL);
	assert_int_equal(wr.len, 0);
	free(wr.buf);
	close(fd);
	ndc_socket_stop(s);
}

static void test_tcp_idle_timeout(void **state)
{
	(void)state;
	struct ndc_socket *s = start(v4, 1, 2, 200, 0);
	uint16_t port = ndc_socket_port(s);
	int a = tcp_client("127.0.0.1", port);
	int b = tcp_client("127.0.0.1", port);
	uint64_t t0, dt;

	tcp_query(a, "Ekeep");
	/* A dribble of bytes without a whole query does not count as activity. */
	send_all(b, "\x00", 1);
	t0 = ms_now();
	assert_true(closed_by_peer(a));
	dt = ms_now() - t0;
	assert_true(dt >= 120 && dt < 1500);
	assert_true(closed_by_peer(b));
	dt = ms_now() - t0;
	assert_true(dt < 1500);
	close(a);
	close(b);
	ndc_socket_stop(s);
}

static void test_tcp_max_conns(void **state)
{
	(void)state;
	/* One worker: max_conns is per worker and the kernel picks the worker per connection. */
	struct ndc_socket *s = start(v4, 1, 1, 0, 2);
	uint16_t port = ndc_socket_port(s);
	int a = tcp_client("127.0.0.1", port);
	int b, c, d;
	struct ndc_socket_stats st;

	tcp_query(a, "Ea");
	b = tcp_client("127.0.0.1", port);
	tcp_query(b, "Eb");
	c = tcp_client("127.0.0.1", port);
	tcp_query(c, "Ec");
	/* a was the least recently active: it made room for c. */
	assert_true(closed_by_peer(a));
	tcp_query(b, "Eb2");
	tcp_query(c, "Ec2");

	/* Both remaining connections owe a detained reply: a newcomer is refused. */
	uint8_t buf[16];

	send_all(b, buf, frame(buf, (const uint8_t *)"Pb", 2));
	send_all(c, buf, frame(buf, (const uint8_t *)"Pc", 2));
	assert_int_equal(wait_held(2), 2);
	d = tcp_client("127.0.0.1", port);
	assert_true(closed_by_peer(d));
	complete_held(0, false);
	complete_held(1, false);
	/* held[0] is whichever query the worker saw first. */
	for (int i = 0; i < 2; i++) {
		int fd = hctx.held[i].msg[1] == 'b' ? b : c;

		expect_reply(fd, hctx.held[i].msg, 2);
	}
	st = stats_when(s, 7);
	assert_int_equal(st.tcp_conns, 3); /* the refused one never became a connection */
	assert_int_equal(st.pending, 2);
	assert_int_equal(st.replies, 7);
	close(a);
	close(b);
	close(c);
	close(d);
	expect_all_completed();
	ndc_socket_stop(s);
}

static double cpu_seconds(void)
{
	struct rusage ru;

	assert_int_equal(getrusage(RUSAGE_SELF, &ru), 0);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static struct rlimit saved_nofile;
static bool nofile_lowered;

/* A soft limit that leaves no file descriptor free: the lowest free one (undone by teardown). */
static void no_free_fd(void)
{
	struct rlimit rl;
	int lowest = dup(0);

	assert_true(lowest >= 0);
	close(lowest);
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &saved_nofile), 0);
	rl = saved_nofile;
	rl.rlim_cur = (rlim_t)lowest;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
	nofile_lowered = true;
}

static int restore_nofile(void **state)
{
	(void)state;
	if (nofile_lowered && setrlimit(RLIMIT_NOFILE, &saved_nofile) < 0)
		return -1;
	nofile_lowered = false;
	return 0;
}

static void connect_to(int fd, uint16_t port)
{
	struct sockaddr_storage ss;
	socklen_t sl = sockaddr_of("127.0.0.1", port, &ss);

	assert_int_equal(connect(fd, (struct sockaddr *)&ss, sl), 0);
	set_timeout(fd, 2000);
}

/*
 * Out of file descriptors: accept4 fails with EMFILE while the connection waits in the
 * backlog, so the listener stays readable. With an idle connection, that one is closed to make
 * room; with none (each owes a reply), the worker stops watching the listener for a while
 * instead of spinning on it, and accepts again once descriptors are free.
 */
static void test_tcp_out_of_fds(void **state)
{
	(void)state;
	struct ndc_socket *s = start(v4, 1, 1, 0, 0);
	uint16_t port = ndc_socket_port(s);
	int idle = tcp_client("127.0.0.1", port);
	int held = tcp_client("127.0.0.1", port);
	int b = socket(AF_INET, SOCK_STREAM, 0), c = socket(AF_INET, SOCK_STREAM, 0);
	uint8_t buf[16];
	double cpu0, cpu1;

	assert_true(b >= 0 && c >= 0);
	tcp_query(idle, "Eidle");
	send_all(held, buf, frame(buf, (const uint8_t *)"Pheld", 5));
	assert_int_equal(wait_held(1), 1);

	/* The idle connection makes room for b. */
	no_free_fd();
	connect_to(b, port);
	assert_true(closed_by_peer(idle));
	tcp_query(b, "Eb");

	/* b now idle too: it makes room for c; then none is idle (c owes a reply). */
	connect_to(c, port);
	assert_true(closed_by_peer(b));
	send_all(c, buf, frame(buf, (const uint8_t *)"Pc", 2));
	assert_int_equal(wait_held(2), 2);

	/* Nothing to close: a newcomer waits in the backlog and the worker must not spin. */
	close(idle);
	close(b);
	b = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(b >= 0);
	/* close(idle) and close(b) freed two descriptors and socket() took one: take the other. */
	idle = dup(0);
	assert_true(idle >= 0);
	connect_to(b, port);
	cpu0 = cpu_seconds();
	usleep(500 * 1000);
	cpu1 = cpu_seconds();
	assert_true(cpu1 - cpu0 < 0.2);
	assert_int_equal(restore_nofile(NULL), 0);
	/* Within the pause (100 ms) the listener is watched again and b is accepted. */
	tcp_query(b, "Eb2");
	complete_held(0, false);
	complete_held(1, false);
	for (int i = 0; i < 2; i++) {
		int fd = hctx.held[i].msg[1] == 'h' ? held : c;

		expect_reply(fd, hctx.held[i].msg, hctx.held[i].msg[1] == 'h' ? 5 : 2);
	}
	close(idle);
	close(held);
	close(b);
	close(c);
	expect_all_completed();
	ndc_socket_stop(s);
}

static void test_tcp_bad_length(void **state)
{
	(void)state;
	struct ndc_socket *s = start(v4, 1, 2, 0, 0);
	uint16_t port = ndc_socket_port(s);
	static const uint8_t bad[][4] = {{0, 0, 'E', 'x'}, {0xff, 0xff, 'E', 'x'}, {0x10, 0x01}};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int fd = tcp_client("127.0.0.1", port);

		tcp_query(fd, "Efine");
		send_all(fd, bad[i], sizeof(bad[i]));
		assert_true(closed_by_peer(fd));
		close(fd);
	}
	ndc_socket_stop(s);
}

static void test_pending_udp(void **state)
{
	(void)state;
	struct ndc_socket *s = start(v4, 1, 2, 0, 0);
	int fd = udp_client(AF_INET);
	struct sockaddr_in from;
	socklen_t fl = sizeof(from);
	uint8_t r[64];
	struct ndc_socket_stats st;

	udp_send(fd, "127.0.0.1", ndc_socket_port(s), "Plater", 6);
	assert_int_equal(wait_held(1), 1);
	assert_false(hctx.held[0].tcp);
	expect_silence(fd, 50);
	complete_held(0, false);
	assert_int_equal(recvfrom(fd, r, sizeof(r), 0, (struct sockaddr *)&from, &fl), 6);
	assert_int_equal(r[0], 'P' ^ 0xff);
	assert_memory_equal(r + 1, "later", 5);
	assert_int_equal(ntohs(from.sin_port), ndc_socket_port(s));
	assert_int_equal(ntohl(from.sin_addr.s_addr), INADDR_LOOPBACK);

	/* An empty completion sends nothing. */
	udp_send(fd, "127.0.0.1", ndc_socket_port(s), "Pnever", 6);
	assert_int_equal(wait_held(2), 2);
	complete_held(1, true);
	expect_silence(fd, 200);
	st = stats_when(s, 1);
	assert_int_equal(st.pending, 2);
	assert_int_equal(st.replies, 1);
	assert_int_equal(st.drops, 1);
	close(fd);
	expect_all_completed();
	ndc_socket_stop(s);
}

static void test_pending_tcp(void **state)
{
	(void)state;
	struct ndc_socket *s = start(v4, 1, 2, 0, 0);
	int fd = tcp_client("127.0.0.1", ndc_socket_port(s));
	uint8_t buf[64];
	size_t n = frame(buf, (const uint8_t *)"Pslow", 5);

	/* RFC 7766 6.2.1.2: the quick answer may overtake the detained one. */
	n += frame(buf + n, (const uint8_t *)"Equick", 6);
	send_all(fd, buf, n);
	assert_int_equal(wait_held(1), 1);
	assert_true(hctx.held[0].tcp);
	expect_reply(fd, (const uint8_t *)"Equick", 6);
	complete_held(0, false);
	expect_reply(fd, (const uint8_t *)"Pslow", 5);
	tcp_query(fd, "Eafter");
	close(fd);
	expect_all_completed();
	ndc_socket_stop(s);
}

static void *complete_thread(void *arg)
{
	(void)arg;
	complete_held(0, false);
	return NULL;
}

static void test_pending_tcp_closed(void **state)
{
	(void)state;
	/* One worker and one slot in use at a time: the new connection reuses the old one's slot.
	 */
	struct ndc_socket *s = start(v4, 1, 1, 0, 0);
	uint16_t port = ndc_socket_port(s);
	struct linger lg = {.l_onoff = 1, .l_linger = 0};
	int a = tcp_client("127.0.0.1", port);
	uint8_t buf[64];
	struct ndc_socket_stats st;
	pthread_t t;
	int b;

	send_all(a, buf, frame(buf, (const uint8_t *)"Porphan", 7));
	assert_int_equal(wait_held(1), 1);
	/* Reset, so the server sees the connection die at once rather than waiting for us. */
	assert_int_equal(setsockopt(a, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
	close(a);
	usleep(100 * 1000);
	b = tcp_client("127.0.0.1", port);
	tcp_query(b, "Enew");
	assert_int_equal(pthread_create(&t, NULL, complete_thread, NULL), 0);
	pthread_join(t, NULL);
	/* The orphaned answer must not reach the connection now in its slot. */
	tcp_query(b, "Enew2");
	expect_silence(b, 200);
	st = stats_when(s, 2);
	assert_int_equal(st.replies, 2);
	assert_int_equal(st.drops, 1);
	close(b);
	expect_all_completed();
	ndc_socket_stop(s);
}

static void test_ipv6(void **state)
{
	(void)state;
	struct ndc_socket *s = start(v6, 1, 2, 0, 0);
	uint16_t port = ndc_socket_port(s);
	int u = udp_client(AF_INET6);
	int t = tcp_client("::1", port);
	struct sockaddr_in6 from;
	socklen_t fl = sizeof(from);
	uint8_t r[64];

	udp_send(u, "::1", port, "Esix", 4);
	assert_int_equal(recvfrom(u, r, sizeof(r), 0, (struct sockaddr *)&from, &fl), 4);
	assert_int_equal(from.sin6_family, AF_INET6);
	assert_true(IN6_IS_ADDR_LOOPBACK(&from.sin6_addr));
	assert_int_equal(ntohs(from.sin6_port), port);
	assert_memory_equal(r + 1, "six", 3);
	tcp_query(t, "Esix over tcp");
	close(u);
	close(t);
	ndc_socket_stop(s);
}

static void test_two_addrs(void **state)
{
	(void)state;
	static const char *const addrs[] = {"127.0.0.1", "127.0.0.2", "::1"};
	struct ndc_socket *s = start(addrs, 3, 2, 0, 0);
	uint16_t port = ndc_socket_port(s);
	int u = udp_client(AF_INET);

	for (int k = 0; k < 2; k++) {
		for (int i = 0; i < 8; i++) {
			struct sockaddr_in from;
			socklen_t fl = sizeof(from);
			char want[INET_ADDRSTRLEN], got[INET_ADDRSTRLEN];
			uint8_t r[16];

			udp_send(u, addrs[k], port, "Ewhere", 6);
			assert_int_equal(
			    recvfrom(u, r, sizeof(r), 0, (struct sockaddr *)&from, &fl), 6);
			snprintf(want, sizeof(want), "%s", addrs[k]);
			inet_ntop(AF_INET, &from.sin_addr, got, sizeof(got));
			assert_string_equal(got, want);
			assert_int_equal(ntohs(from.sin_port), port);
		}
	}
	for (int k = 0; k < 3; k++) {
		int t = tcp_client(addrs[k], port);

		tcp_query(t, "Eeach address");
		close(t);
	}
	close(u);
	ndc_socket_stop(s);
}

/*
 * A held server (a successor beside its predecessor) reads nothing: a datagram and a connection's
 * query wait in the sockets, unanswered, and are answered once it starts reading.
 */
static void test_hold(void **state)
{
	(void)state;
	struct ndc_ip ip = ip_of("127.0.0.1");
	struct ndc_socket_opts o = {.n_addrs = 1, .addrs = &ip, .workers = 2, .hold = true};
	struct ndc_socket *s = NULL;
	const char *q = "held query";
	uint8_t buf[256];
	uint16_t port;
	int u, t;

	assert_int_equal(ndc_socket_start(&o, handler, NULL, &s), 0);
	port = ndc_socket_port(s);
	u = udp_client(AF_INET);
	udp_send(u, "127.0.0.1", port, q, strlen(q));
	t = tcp_client("127.0.0.1", port); /* the kernel's backlog completes the handshake */
	send_all(t, buf, frame(buf, (const uint8_t *)q, strlen(q)));
	expect_silence(u, 300);
	expect_silence(t, 50);
	{
		struct ndc_socket_stats st;

		ndc_socket_stats(s, &st);
		assert_int_equal(st.udp_queries + st.tcp_conns, 0);
	}

	assert_int_equal(ndc_socket_read_start(s), 0);
	assert_int_equal(recv(u, buf, sizeof(buf), 0), (ssize_t)strlen(q));
	assert_int_equal(buf[0], (uint8_t)(q[0] ^ 0xff));
	assert_memory_equal(buf + 1, q + 1, strlen(q) - 1);
	expect_reply(t, (const uint8_t *)q, strlen(q));
	assert_int_equal(ndc_socket_read_start(s), 0); /* already reading */
	tcp_query(t, "and on");
	close(u);
	close(t);
	ndc_socket_stop(s);
}

static void test_start_failure(void **state)
{
	(void)state;
	/* 169.254.99.99 is on no interface here: only bound (and refused), never sent to. */
	struct ndc_ip ips[] = {ip_of("127.0.0.1"), ip_of("169.254.99.99")};
	struct ndc_socket_opts o = {.n_addrs = 2, .addrs = ips, .workers = 2};
	struct ndc_socket *s = NULL;
	int fds = count_dir("/proc/self/fd");
	int threads = count_dir("/proc/self/task");

	assert_int_equal(ndc_socket_start(&o, handler, NULL, &s), -EADDRNOTAVAIL);
	assert_null(s);
	assert_int_equal(count_dir("/proc/self/fd"), fds);
	assert_int_equal(count_dir("/proc/self/task"), threads);

	o.n_addrs = 0;
	assert_int_equal(ndc_socket_start(&o, handler, NULL, &s), -EINVAL);
	ips[1].family = 99;
	o.n_addrs = 2;
	assert_int_equal(ndc_socket_start(&o, handler, NULL, &s), -EAFNOSUPPORT);
	assert_null(s);
	assert_int_equal(count_dir("/proc/self/fd"), fds);
}

static void test_stop_with_conns(void **state)
{
	(void)state;
	int fds = count_dir("/proc/self/fd");
	int threads = count_dir("/proc/self/task");
	struct ndc_socket *s = start(v4, 1, 2, 0, 0);
	uint16_t port = ndc_socket_port(s);
	int c[4], u = udp_client(AF_INET);
	uint8_t buf[64];

	assert_int_equal(count_dir("/proc/self/task"), threads + 2);
	for (int i = 0; i < 4; i++)
		c[i] = tcp_client("127.0.0.1", port);
	tcp_query(c[0], "Eidle");
	send_all(c[1], "\x00\x10xx", 4); /* half a query */
	send_all(c[2], buf, frame(buf, (const uint8_t *)"Pheld", 5));
	udp_send(u, "127.0.0.1", port, "Pudp", 4);
	assert_int_equal(wait_held(2), 2);
	usleep(20 * 1000); /* let c[3]'s accept happen too */
	ndc_socket_stop(s);
	for (int i = 0; i < 4; i++) {
		assert_true(closed_by_peer(c[i]));
		close(c[i]);
	}
	/* Completing after stop is a caller bug; it must still free and send nothing. */
	complete_held(0, false);
	complete_held(1, false);
	set_timeout(u, 100);
	assert_int_equal(recv(u, buf, sizeof(buf), 0), -1);
	close(u);
	assert_int_equal(count_dir("/proc/self/fd"), fds);
	assert_int_equal(count_dir("/proc/self/task"), threads);
	expect_all_completed();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_udp_many, reset_held),
	    cmocka_unit_test_setup(test_udp_drop, reset_held),
	    cmocka_unit_test_setup(test_tcp_single, reset_held),
	    cmocka_unit_test_setup(test_tcp_pipelined, reset_held),
	    cmocka_unit_test_setup(test_tcp_split, reset_held),
	    cmocka_unit_test_setup(test_tcp_backpressure, reset_held),
	    cmocka_unit_test_setup(test_tcp_idle_timeout, reset_held),
	    cmocka_unit_test_setup(test_tcp_max_conns, reset_held),
	    cmocka_unit_test_setup_teardown(test_tcp_out_of_fds, reset_held, restore_nofile),
	    cmocka_unit_test_setup(test_tcp_bad_length, reset_held),
	    cmocka_unit_test_setup(test_pending_udp, reset_held),
	    cmocka_unit_test_setup(test_pending_tcp, reset_held),
	    cmocka_unit_test_setup(test_pending_tcp_closed, reset_held),
	    cmocka_unit_test_setup(test_ipv6, reset_held),
	    cmocka_unit_test_setup(test_two_addrs, reset_held),
	    cmocka_unit_test_setup(test_hold, reset_held),
	    cmocka_unit_test_setup(test_start_failure, reset_held),
	    cmocka_unit_test_setup(test_stop_with_conns, reset_held),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
