// SPDX-License-Identifier: MIT
/*
 * The metrics/health HTTP server on 127.0.0.1 and ::1 only: a raw socket client (to send exactly
 * the bytes under test, garbage included) and libcurl (an independent HTTP client that must accept
 * our framing). Proxies are disabled for libcurl so no request leaves loopback.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "http/http.h"

#define RESP_MAX (64 << 10)

struct mstate {
	atomic_uint calls;
	atomic_bool fail;
};

static struct mstate mstate;
static struct ndc_http *srv;
static uint16_t port;

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Two names interleaved on purpose: the output must group them. */
static void metrics_cb(void *arg, struct ndc_metrics_buf *b)
{
	struct mstate *m = arg;
	unsigned n = atomic_fetch_add(&m->calls, 1) + 1;

	ndc_metric_u64(b, "ndc_queries_total", "counter", "Queries answered.", "path=\"kernel\"",
		       10);
	ndc_metric(b, "ndc_synced", "gauge", "1 once the store has synced.", NULL, 1);
	ndc_metric_u64(b, "ndc_queries_total", "counter", "Queries answered.", "path=\"socket\"",
		       20);
	ndc_metric_u64(b, "ndc_scrapes_total", "counter", "Scrapes.", NULL, n);
	if (atomic_load(&m->fail))
		ndc_metric(b, "bad name", "gauge", "x", NULL, 0);
}

static void expected_metrics(char *out, size_t cap, unsigned n)
{
	snprintf(out, cap,
		 "# HELP ndc_queries_total Queries answered.\n"
		 "# TYPE ndc_queries_total counter\n"
		 "ndc_queries_total{path=\"kernel\"} 10\n"
		 "ndc_queries_total{path=\"socket\"} 20\n"
		 "# HELP ndc_synced 1 once the store has synced.\n"
		 "# TYPE ndc_synced gauge\n"
		 "ndc_synced 1\n"
		 "# HELP ndc_scrapes_total Scrapes.\n"
		 "# TYPE ndc_scrapes_total counter\n"
		 "ndc_scrapes_total %u\n",
		 n);
}

/* ---- raw client ---- */

struct resp {
	char *raw;
	size_t len;
	int err;    /* 0, or the errno of the failed connect/send/recv */
	int status; /* 0: no parseable response */
	const char *body;
	size_t body_len;
};

static int client_connect(int family, uint16_t p)
{
	struct sockaddr_storage ss = {0};
	struct timeval tv = {.tv_sec = 20}; /* generous: CI shares two CPUs with other work */
	socklen_t sl;
	int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (family == AF_INET6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;

		a->sin6_family = AF_INET6;
		a->sin6_port = htons(p);
		a->sin6_addr = in6addr_loopback;
		sl = sizeof(*a);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;

		a->sin_family = AF_INET;
		a->sin_port = htons(p);
		a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		sl = sizeof(*a);
	}
	if (connect(fd, (struct sockaddr *)&ss, sl) < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	return fd;
}

static int send_all(int fd, const char *s, size_t n)
{
	while (n) {
		ssize_t r = send(fd, s, n, MSG_NOSIGNAL);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		s += r;
		n -= (size_t)r;
	}
	return 0;
}

static void resp_parse(struct resp *r)
{
	const char *end;

	r->raw[r->len] = '\0';
	if (r->len < 13 || memcmp(r->raw, "HTTP/1.1 ", 9) != 0)
		return;
	end = strstr(r->raw, "\r\n\r\n");
	if (!end)
		return;
	r->status = atoi(r->raw + 9);
	r->body = end + 4;
	r->body_len = r->len - (size_t)(r->body - r->raw);
}

/* Reads until EOF (the server closes after every response). */
static void read_resp(int fd, struct resp *r)
{
	r->raw = malloc(RESP_MAX + 1);
	r->len = 0;
	while (r->raw && r->len < RESP_MAX) {
		ssize_t n = recv(fd, r->raw + r->len, RESP_MAX - r->len, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			r->err = errno;
		if (n <= 0)
			break;
		r->len += (size_t)n;
	}
	if (r->raw)
		resp_parse(r);
}

static void request_on(int family, uint16_t p, const char *req, size_t len, struct resp *r)
{
	int fd = client_connect(family, p);

	memset(r, 0, sizeof(*r));
	if (fd < 0) {
		r->err = -fd;
		return;
	}
	r->err = -send_all(fd, req, len);
	read_resp(fd, r);
	close(fd);
}

static void request(const char *req, struct resp *r)
{
	request_on(AF_INET, port, req, strlen(req), r);
}

static void resp_free(struct resp *r)
{
	free(r->raw);
	r->raw = NULL;
}

/* The value of header name (first occurrence), or "" */
static const char *header(const struct resp *r, const char *name, char *out, size_t cap)
{
	const char *p = strstr(r->raw, "\r\n"), *end = r->body ? r->body - 2 : r->raw + r->len;
	size_t nl = strlen(name);

	out[0] = '\0';
	while (p && p < end) {
		const char *line = p + 2, *eol = strstr(line, "\r\n");

		if (!eol)
			break;
		if (strncasecmp(line, name, nl) == 0 && line[nl] == ':') {
			const char *v = line + nl + 1;
			size_t n;

			while (*v == ' ')
				v++;
			n = (size_t)(eol - v) < cap - 1 ? (size_t)(eol - v) : cap - 1;
			memcpy(out, v, n);
			out[n] = '\0';
			return out;
		}
		p = eol;
	}
	return out;
}

/* Status, body, Content-Length and the fixed headers of one full response. */
static void assert_response(const struct resp *r, int status, const char *ctype, const char *body)
{
	char v[128], want[32];

	assert_non_null(r->raw);
	assert_int_equal(r->status, status);
	assert_non_null(r->body);
	assert_string_equal(header(r, "Connection", v, sizeof(v)), "close");
	assert_string_equal(header(r, "Content-Type", v, sizeof(v)), ctype);
	snprintf(want, sizeof(want), "%zu", r->body_len);
	assert_string_equal(header(r, "Content-Length", v, sizeof(v)), want);
	/* IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT" */
	header(r, "Date", v, sizeof(v));
	assert_int_equal(strlen(v), 29);
	assert_memory_equal(v + 25, " GMT", 4);
	if (body) {
		assert_int_equal(r->body_len, strlen(body));
		assert_memory_equal(r->body, body, r->body_len);
	}
}

static void get_expect(const char *path, int status, const char *body)
{
	char req[256];
	struct resp r;

	snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: t\r\n\r\n",
		 path);
	request(req, &r);
	assert_int_equal(r.err, 0);
	assert_response(&r, status, "text/plain; charset=utf-8", body);
	resp_free(&r);
}

/* ---- fixture ---- */

static int group_setup(void **state)
{
	(void)state;
	if (ndc_http_start("127.0.0.1:0", metrics_cb, &mstate, &srv) < 0)
		return -1;
	port = ndc_http_port(srv);
	return port ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	ndc_http_stop(srv);
	return 0;
}

/* ---- tests ---- */

static void test_health(void **state)
{
	struct resp r;

	(void)state;
	assert_int_not_equal(port, 0);
	request("GET /health HTTP/1.1\r\nHost: x\r\n\r\n", &r);
	assert_int_equal(r.err, 0);
	assert_memory_equal(r.raw, "HTTP/1.1 200 OK\r\n", 17);
	assert_response(&r, 200, "text/plain; charset=utf-8", "ok\n");
	resp_free(&r);
}

static void test_ready(void **state)
{
	(void)state;
	get_expect("/ready", 503, "not ready\n");
	ndc_http_set_ready(srv, true);
	get_expect("/ready", 200, "ready\n");
	get_expect("/health", 200, "ok\n");
	ndc_http_set_ready(srv, false);
	get_expect("/ready", 503, "not ready\n");
}

static void test_metrics_http(void **state)
{
	char want[1024];
	struct resp r;

	(void)state;
	for (int i = 0; i < 2; i++) {
		request("GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: text/plain\r\n\r\n", &r);
		assert_int_equal(r.err, 0);
		expected_metrics(want, sizeof(want), atomic_load(&mstate.calls));
		assert_response(&r, 200, "text/plain; version=0.0.4; charset=utf-8", want);
		resp_free(&r);
	}

	/* HEAD: the same headers, Content-Length of the body that GET would send, no body. */
	request("HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n", &r);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.body_len, 0);
	expected_metrics(want, sizeof(want), atomic_load(&mstate.calls));
	{
		char v[32], len[32];

		snprintf(len, sizeof(len), "%zu", strlen(want));
		assert_string_equal(header(&r, "Content-Length", v, sizeof(v)), len);
	}
	resp_free(&r);

	/* A callback that breaks the format gets 500, not a half-valid page. */
	atomic_store(&mstate.fail, true);
	get_expect("/metrics", 500, "internal server error\n");
	atomic_store(&mstate.fail, false);
}

/* ---- sections of /metrics (ndc_http_add_metrics) and tables of fields ---- */

struct two {
	uint64_t x, y;
};

static const struct ndc_metric_field two_fields[] = {
    {"ndc_b_total", "counter", "B.", NULL, NDC_METRIC_OFF(struct two, x)},
    {"ndc_c", "gauge", "C.", "k=\"fixed\"", NDC_METRIC_OFF(struct two, y)},
};

static void section_start(void *arg, struct ndc_metrics_buf *b)
{
	(void)arg;
	ndc_metric_u64(b, "ndc_a", "gauge", "A.", NULL, 1);
}

static void section_one(void *arg, struct ndc_metrics_buf *b)
{
	ndc_metric_fields(b, two_fields, 2, arg, "src=\"one\"");
}

/* A name an earlier section wrote: its samples join that family. */
static void section_two(void *arg, struct ndc_metrics_buf *b)
{
	(void)arg;
	ndc_metric_u64(b, "ndc_a", "gauge", "A.", "s=\"two\"", 2);
}

static void test_metrics_sections(void **state)
{
	static const char req[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
	static const char want[] =
	    "# HELP ndc_a A.\n# TYPE ndc_a gauge\nndc_a 1\nndc_a{s=\"two\"} 2\n"
	    "# HELP ndc_b_total B.\n# TYPE ndc_b_total counter\n"
	    "ndc_b_total{src=\"one\"} 5\n"
	    "# HELP ndc_c C.\n# TYPE ndc_c gauge\nndc_c{k=\"fixed\"} 6\n";
	struct two st = {.x = 5, .y = 6};
	const struct ndc_metrics_source one = {"one", section_one, &st};
	const struct ndc_metrics_source two = {"two", section_two, NULL};
	struct ndc_http *h;
	struct resp r;

	(void)state;
	assert_int_equal(ndc_http_start("127.0.0.1:0", section_start, NULL, &h), 0);
	assert_int_equal(ndc_http_add_metrics(h, &one), 0);
	assert_int_equal(ndc_http_add_metrics(h, &two), 0);
	request_on(AF_INET, ndc_http_port(h), req, strlen(req), &r);
	assert_int_equal(r.err, 0);
	assert_response(&r, 200, "text/plain; version=0.0.4; charset=utf-8", want);
	resp_free(&r);
	for (int i = 2; i < NDC_HTTP_SOURCES_MAX; i++)
		assert_int_equal(ndc_http_add_metrics(h, &two), 0);
	assert_int_equal(ndc_http_add_metrics(h, &two), -ENOSPC);
	ndc_http_stop(h);
}

static void test_not_found(void **state)
{
	(void)state;
	get_expect("/", 404, "not found\n");
	get_expect("/nope", 404, "not found\n");
	get_expect("/metricsx", 404, "not found\n");
	get_expect("/health/", 404, "not found\n");
	get_expect("/HEALTH", 404, "not found\n");
	get_expect("*", 404, "not found\n");
	/* The query is ignored; absolute-form targets (RFC 9112 §3.2.2) name the same paths. */
	get_expect("/health?verbose=1", 200, "ok\n");
	get_expect("http://127.0.0.1:9254/health", 200, "ok\n");
	get_expect("http://127.0.0.1:9254", 404, "not found\n");
}

/* Pages added with ndc_http_add_page (the agent's /debug/top): exact paths, a failing page 500. */
static int page_ok(void *arg, char **ret_body, size_t *ret_len)
{
	*ret_body = strdup(arg);
	*ret_len = strlen(arg);
	return *ret_body ? 0 : -ENOMEM;
}

static int page_fail(void *arg, char **ret_body, size_t *ret_len)
{
	(void)arg;
	(void)ret_body;
	(void)ret_len;
	return -EIO;
}

static void test_pages(void **state)
{
	struct resp r;

	(void)state;
	assert_int_equal(
	    ndc_http_add_page(srv, "/debug/top", "application/json", page_ok, "{\"clients\":[]}\n"),
	    0);
	assert_int_equal(ndc_http_add_page(srv, "/debug/top", "application/json", page_ok, ""),
			 -EEXIST);
	assert_int_equal(ndc_http_add_page(srv, "/debug/fail", "text/plain", page_fail, NULL), 0);
	request("GET /debug/top HTTP/1.1\r\nHost: x\r\n\r\n", &r);
	assert_response(&r, 200, "application/json", "{\"clients\":[]}\n");
	resp_free(&r);
	request("HEAD /debug/top?x=1 HTTP/1.1\r\nHost: x\r\n\r\n", &r);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.body_len, 0);
	resp_free(&r);
	get_expect("/debug/fail", 500, "internal server error\n");
	get_expect("/debug/topx", 404, "not found\n");
	get_expect("/debug", 404, "not found\n");
}

static void test_methods(void **state)
{
	static const char *const reqs[] = {
	    "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\na=b",
	    "PUT /health HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
	    "DELETE /ready HTTP/1.1\r\nHost: x\r\n\r\n",
	    "get /health HTTP/1.1\r\nHost: x\r\n\r\n", /* methods are case-sensitive */
	    "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n",
	};
	struct resp r;
	char v[64];

	(void)state;
	for (size_t i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++) {
		request(reqs[i], &r);
		assert_int_equal(r.err, 0);
		assert_response(&r, 405, "text/plain; charset=utf-8", "method not allowed\n");
		assert_string_equal(header(&r, "Allow", v, sizeof(v)), "GET, HEAD");
		resp_free(&r);
	}

	request("HEAD /health HTTP/1.1\r\nHost: x\r\n\r\n", &r);
	assert_int_equal(r.status, 200);
	assert_string_equal(header(&r, "Content-Length", v, sizeof(v)), "3");
	assert_int_equal(r.body_len, 0);
	resp_free(&r);
	request("HEAD /nope HTTP/1.1\r\nHost: x\r\n\r\n", &r);
	assert_int_equal(r.status, 404);
	assert_string_equal(header(&r, "Content-Length", v, sizeof(v)), "10");
	assert_int_equal(r.body_len, 0);
	resp_free(&r);
}

static void test_oversized(void **state)
{
	static const char pre[] = "GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ";
	static char req[(1 << 20) + 64];
	const size_t big = 1 << 20, n = sizeof(pre) - 1;
	struct resp r;

	(void)state;
	memcpy(req, pre, n);
	/* Just over the limit, sent at once: 431. */
	memset(req + n, 'a', NDC_HTTP_HEADER_MAX);
	strcpy(req + n + NDC_HTTP_HEADER_MAX, "\r\n\r\n");
	request(req, &r);
	assert_response(&r, 431, "text/plain; charset=utf-8", "request header fields too large\n");
	resp_free(&r);

	/* A megabyte of headers: 431, or the connection closed on us; never an answer to it. */
	memset(req + n, 'a', big - n);
	strcpy(req + big, "\r\n\r\n");
	request(req, &r);
	assert_true(r.status == 431 || r.status == 0);
	resp_free(&r);

	/* Exactly at the limit is still a request. */
	memset(req + n, 'a', NDC_HTTP_HEADER_MAX - n - 4);
	strcpy(req + NDC_HTTP_HEADER_MAX - 4, "\r\n\r\n");
	assert_int_equal(strlen(req), NDC_HTTP_HEADER_MAX);
	request(req, &r);
	assert_response(&r, 200, "text/plain; charset=utf-8", "ok\n");
	resp_free(&r);
	get_expect("/health", 200, "ok\n");
}

static void test_garbage(void **state)
{
	static const struct {
		const char *req;
		size_t len; /* 0: strlen */
		int status;
	} cases[] = {
	    {"\0\1\2garbage\r\n\r\n", 14, 400},
	    {"garbage\r\n\r\n", 0, 400},
	    {"GET\r\n\r\n", 0, 400},
	    {"GET /health\r\n\r\n", 0, 400},
	    {"GET /health HTTP/1.1\r\n\r\n", 0, 400}, /* no Host (RFC 9112 §3.2) */
	    {"GET /health HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n", 0, 400},
	    {"GET  /health HTTP/1.1\r\nHost: a\r\n\r\n", 0, 400},
	    {"GET /health  HTTP/1.1\r\nHost: a\r\n\r\n", 0, 400},
	    {"GET /health HTTP/1.1 \r\nHost: a\r\n\r\n", 0, 400},
	    {"GET /health HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n", 0, 400},
	    {"GET /health HTTP/1.1\r\nHost : a\r\n\r\n", 0, 400},
	    {"GET /health HTTP/1.1\r\nHost: a\r\nNoColon\r\n\r\n", 0, 400},
	    {"GET /health HTTP/1.1\r\nHost: a\rb\r\n\r\n", 0, 400},
	    {"GET /health HTTP/1.1\r\nHost: a\x7f\r\n\r\n", 0, 400},
	    {"GET /he\xc3\xa4lth HTTP/1.1\r\nHost: a\r\n\r\n", 0, 400},
	    {"GET /health HTTP/1.x\r\nHost: a\r\n\r\n", 0, 400},
	    {"GET /health HTTPS/1.1\r\nHost: a\r\n\r\n", 0, 400},
	    {"GET /health HTTP/2.0\r\nHost: a\r\n\r\n", 0, 505},
	    {"GET /health HTTP/0.9\r\nHost: a\r\n\r\n", 0, 505},
	    /* What RFC 9112 §2.2 lets a server accept: bare LF, CRLFs before the request line,
	     * and HTTP/1.0 without Host. obs-text is fine in field values. */
	    {"GET /health HTTP/1.0\n\n", 0, 200},
	    {"\r\n\r\nGET /health HTTP/1.0\r\n\r\n", 0, 200},
	    {"GET /health HTTP/1.1\nHost: a\r\nX: \xff\t v\n\r\n", 0, 200},
	};
	char rnd[2048];
	struct resp r;
	unsigned seed = 12345;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t len = cases[i].len ? cases[i].len : strlen(cases[i].req);

		request_on(AF_INET, port, cases[i].req, len, &r);
		if (r.status != cases[i].status)
			print_error("case %zu: status %d\n", i, r.status);
		assert_int_equal(r.status, cases[i].status);
		resp_free(&r);
	}

	/* Random bytes (no CR or LF) then the end of a header section. */
	for (int k = 0; k < 20; k++) {
		for (size_t i = 0; i < sizeof(rnd) - 4; i++) {
			seed = seed * 1103515245 + 12345;
			rnd[i] = (char)(seed >> 16);
			if (rnd[i] == '\r' || rnd[i] == '\n')
				rnd[i] = 'x';
		}
		memcpy(rnd + sizeof(rnd) - 4, "\r\n\r\n", 4);
		request_on(AF_INET, port, rnd, sizeof(rnd), &r);
		assert_int_equal(r.status, 400);
		resp_free(&r);
	}
	get_expect("/health", 200, "ok\n");
}

static void test_early_disconnect(void **state)
{
	static const char full[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
	struct linger lin = {.l_onoff = 1, .l_linger = 0};

	(void)state;
	for (int i = 0; i < 20; i++) {
		int a = client_connect(AF_INET, port);
		int b = client_connect(AF_INET, port);
		int c = client_connect(AF_INET, port);
		int d = client_connect(AF_INET, port);

		assert_true(a >= 0 && b >= 0 && c >= 0 && d >= 0);
		close(a); /* nothing sent */
		assert_int_equal(send_all(b, "GET /hea", 8), 0);
		close(b);
		/* Whole request, gone before the answer: the server's write must not SIGPIPE. */
		assert_int_equal(send_all(c, full, strlen(full)), 0);
		close(c);
		/* Same with an RST. */
		assert_int_equal(send_all(d, full, strlen(full)), 0);
		setsockopt(d, SOL_SOCKET, SO_LINGER, &lin, sizeof(lin));
		close(d);
	}
	get_expect("/health", 200, "ok\n");
}

/* Half-closes the write side after the request: the answer must still come. */
static void test_half_close(void **state)
{
	static const char req[] = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
	struct resp r = {0};
	int fd = client_connect(AF_INET, port);

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(send_all(fd, req, strlen(req)), 0);
	shutdown(fd, SHUT_WR);
	read_resp(fd, &r);
	close(fd);
	assert_response(&r, 200, "text/plain; charset=utf-8", "ok\n");
	resp_free(&r);
}

static size_t curl_sink(char *p, size_t size, size_t n, void *arg)
{
	struct resp *r = arg;
	size_t len = size * n;

	if (r->len + len > RESP_MAX)
		return 0;
	memcpy(r->raw + r->len, p, len);
	r->len += len;
	return len;
}

static void test_sequential(void **state)
{
	char want[1024], url[64];
	CURL *curl = curl_easy_init();
	struct resp r;

	(void)state;
	for (int i = 0; i < 300; i++)
		get_expect(i % 2 ? "/health" : "/ready", i % 2 ? 200 : 503,
			   i % 2 ? "ok\n" : "not ready\n");

	/* An independent client must parse our framing. */
	assert_non_null(curl);
	r.raw = malloc(RESP_MAX + 1);
	assert_non_null(r.raw);
	for (int i = 0; i < 50; i++) {
		long code = 0;
		char *ctype = NULL;

		snprintf(url, sizeof(url), "http://127.0.0.1:%u/%s", port,
			 i % 2 ? "metrics" : "health");
		r.len = 0;
		curl_easy_reset(curl);
		curl_easy_setopt(curl, CURLOPT_URL, url);
		curl_easy_setopt(curl, CURLOPT_PROXY, "");
		curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");
		curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(curl, CURLOPT_TIMEOUT, 10L);
		curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, curl_sink);
		curl_easy_setopt(curl, CURLOPT_WRITEDATA, &r);
		assert_int_equal(curl_easy_perform(curl), CURLE_OK);
		curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
		curl_easy_getinfo(curl, CURLINFO_CONTENT_TYPE, &ctype);
		assert_int_equal(code, 200);
		r.raw[r.len] = '\0';
		if (i % 2) {
			assert_string_equal(ctype, "text/plain; version=0.0.4; charset=utf-8");
			expected_metrics(want, sizeof(want), atomic_load(&mstate.calls));
			assert_string_equal(r.raw, want);
		} else {
			assert_string_equal(r.raw, "ok\n");
		}
	}
	free(r.raw);
	curl_easy_cleanup(curl);
}

#define NTHREADS 100

struct worker {
	pthread_t t;
	pthread_barrier_t *barrier;
	int idx;
	int ok; /* requests with the right status and body */
};

#define PER_THREAD 5

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	pthread_barrier_wait(w->barrier);
	for (int i = 0; i < PER_THREAD; i++) {
		bool metrics = (w->idx + i) % 2;
		struct resp r;

		request(metrics ? "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
				: "GET /health HTTP/1.0\r\n\r\n",
			&r);
		if (r.status == 200 && r.body &&
		    (metrics ? strstr(r.body, "# TYPE ndc_scrapes_total counter\n") != NULL
			     : (r.body_len == 3 && memcmp(r.body, "ok\n", 3) == 0)))
			w->ok++;
		resp_free(&r);
	}
	return NULL;
}

static void test_concurrent(void **state)
{
	struct worker w[NTHREADS];
	pthread_barrier_t barrier;
	unsigned before = atomic_load(&mstate.calls);
	int ok = 0;

	(void)state;
	pthread_barrier_init(&barrier, NULL, NTHREADS);
	for (int i = 0; i < NTHREADS; i++) {
		w[i] = (struct worker){.barrier = &barrier, .idx = i};
		assert_int_equal(pthread_create(&w[i].t, NULL, worker_main, &w[i]), 0);
	}
	for (int i = 0; i < NTHREADS; i++) {
		pthread_join(w[i].t, NULL);
		ok += w[i].ok;
	}
	pthread_barrier_destroy(&barrier);
	assert_int_equal(ok, NTHREADS * PER_THREAD);
	assert_int_equal(atomic_load(&mstate.calls) - before, NTHREADS * PER_THREAD / 2);
}

struct late_get {
	pthread_t t;
	uint16_t port; /* 0: the group's server */
	struct resp r;
	uint64_t done_ms;
};

static void *late_get_main(void *arg)
{
	static const char req[] = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
	struct late_get *g = arg;

	request_on(AF_INET, g->port ? g->port : port, req, strlen(req), &g->r);
	g->done_ms = now_ms();
	return NULL;
}

/*
 * Slow clients: ten trickle header bytes forever, the rest of the slots sit idle. Others are
 * served while slots are free; with all NDC_HTTP_CONN_MAX taken a new client waits in the backlog
 * until the deadlines free them; every slow one is closed after NDC_HTTP_TIMEOUT_MS, trickling or
 * not.
 */
static void test_slowloris(void **state)
{
	int fds[NDC_HTTP_CONN_MAX];
	uint64_t closed_ms[NDC_HTTP_CONN_MAX] = {0};
	uint64_t t0 = now_ms();
	struct late_get g = {0};
	int open = NDC_HTTP_CONN_MAX;

	(void)state;
	for (int i = 0; i < 10; i++) {
		fds[i] = client_connect(AF_INET, port);
		assert_true(fds[i] >= 0);
		assert_int_equal(send_all(fds[i], "GET /health HTTP/1.1\r\nHo", 24), 0);
	}
	get_expect("/health", 200, "ok\n");
	assert_true(now_ms() - t0 < 2000);

	for (int i = 10; i < NDC_HTTP_CONN_MAX; i++) {
		fds[i] = client_connect(AF_INET, port);
		assert_true(fds[i] >= 0);
	}
	/* Let the server accept them all before the late client queues up behind them. */
	usleep(200 * 1000);
	assert_int_equal(pthread_create(&g.t, NULL, late_get_main, &g), 0);

	while (open && now_ms() - t0 < 20000) {
		struct pollfd pfd[NDC_HTTP_CONN_MAX];

		for (int i = 0; i < NDC_HTTP_CONN_MAX; i++) {
			pfd[i] =
			    (struct pollfd){.fd = closed_ms[i] ? -1 : fds[i], .events = POLLIN};
			if (i < 10 && !closed_ms[i])
				send(fds[i], "X-Slow: 1\r\n", 11, MSG_NOSIGNAL);
		}
		poll(pfd, NDC_HTTP_CONN_MAX, 250);
		for (int i = 0; i < NDC_HTTP_CONN_MAX; i++) {
			char c;

			if (closed_ms[i] || !pfd[i].revents)
				continue;
			/* No answer for an unfinished request: EOF (or RST) only. */
			assert_true(recv(fds[i], &c, 1, MSG_DONTWAIT) <= 0);
			closed_ms[i] = now_ms();
			open--;
		}
	}
	pthread_join(g.t, NULL);
	for (int i = 0; i < NDC_HTTP_CONN_MAX; i++) {
		close(fds[i]);
		assert_true(closed_ms[i] != 0);
		assert_true(closed_ms[i] - t0 >= NDC_HTTP_TIMEOUT_MS - 100);
		/* late but closed: a loaded machine delays the server's deadline sweep */
		assert_true(closed_ms[i] - t0 < NDC_HTTP_TIMEOUT_MS + 10000);
	}
	assert_response(&g.r, 200, "text/plain; charset=utf-8", "ok\n");
	assert_true(g.done_ms - t0 >= NDC_HTTP_TIMEOUT_MS - 100);
	resp_free(&g.r);
	get_expect("/health", 200, "ok\n");
}

/* A metrics callback that holds the server thread until released (at most 10 s). */
struct gate {
	atomic_bool entered;
	atomic_bool release;
};

static void gate_cb(void *arg, struct ndc_metrics_buf *b)
{
	struct gate *g = arg;
	uint64_t t = now_ms();

	(void)b;
	atomic_store(&g->entered, true);
	while (!atomic_load(&g->release) && now_ms() - t < 10000)
		usleep(1000);
}

/*
 * Every slot's deadline expires in the same sweep: the server must watch its listener again at
 * once. It used to decide whether to listen before closing the expired connections, so with all
 * NDC_HTTP_CONN_MAX gone at once it polled only its stop fd, forever. To expire them together
 * they are accepted in one burst: the server thread is held in a metrics callback while they
 * queue in the backlog (the held request's client resets, so its slot is gone on release).
 */
static void test_all_expire_at_once(void **state)
{
	static const char req[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
	struct linger lin = {.l_onoff = 1, .l_linger = 0};
	struct gate gate = {0};
	struct late_get g = {0};
	int fds[NDC_HTTP_CONN_MAX], a;
	struct ndc_http *h;
	uint64_t t, released;

	(void)state;
	assert_int_equal(ndc_http_start("127.0.0.1:0", gate_cb, &gate, &h), 0);
	g.port = ndc_http_port(h);
	a = client_connect(AF_INET, g.port);
	assert_true(a >= 0);
	assert_int_equal(send_all(a, req, strlen(req)), 0);
	t = now_ms();
	while (!atomic_load(&gate.entered)) {
		if (now_ms() - t > 5000)
			fail_msg("the metrics callback was not called within 5 s");
		usleep(1000);
	}
	setsockopt(a, SOL_SOCKET, SO_LINGER, &lin, sizeof(lin));
	close(a); /* RST: the server's send fails and frees the slot */
	for (int i = 0; i < NDC_HTTP_CONN_MAX; i++) {
		fds[i] = client_connect(AF_INET, g.port);
		assert_true(fds[i] >= 0);
	}
	assert_int_equal(pthread_create(&g.t, NULL, late_get_main, &g), 0);
	usleep(100 * 1000); /* the late client queues behind the others */
	released = now_ms();
	atomic_store(&gate.release, true);
	pthread_join(g.t, NULL);
	assert_int_equal(g.r.err, 0);
	assert_response(&g.r, 200, "text/plain; charset=utf-8", "ok\n");
	/* served once the burst expired, not after the client's own 20 s receive timeout */
	assert_true(g.done_ms - released >= NDC_HTTP_TIMEOUT_MS - 100);
	assert_true(g.done_ms - released < NDC_HTTP_TIMEOUT_MS + 5000);
	resp_free(&g.r);
	for (int i = 0; i < NDC_HTTP_CONN_MAX; i++) {
		char c;

		assert_true(recv(fds[i], &c, 1, 0) <= 0);
		close(fds[i]);
	}
	ndc_http_stop(h);
}

/* Stop with connections idle, half-sent and answered-but-open: prompt, and they all see EOF. */
static void test_stop_idle(void **state)
{
	static const char req[] = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
	struct ndc_http *h;
	int fds[7];
	uint16_t p;
	uint64_t t;
	char buf[512];

	(void)state;
	assert_int_equal(ndc_http_start("127.0.0.1:0", NULL, NULL, &h), 0);
	p = ndc_http_port(h);
	for (int i = 0; i < 7; i++) {
		fds[i] = client_connect(AF_INET, p);
		assert_true(fds[i] >= 0);
	}
	assert_int_equal(send_all(fds[5], "GET /he", 7), 0);
	assert_int_equal(send_all(fds[6], req, strlen(req)), 0);
	/* The answered one: read the response, keep the socket open (the server lingers). */
	{
		ssize_t n = recv(fds[6], buf, sizeof(buf), 0);

		assert_true(n > 0);
		assert_memory_equal(buf, "HTTP/1.1 200 OK\r\n", 17);
	}
	t = now_ms();
	ndc_http_stop(h);
	assert_true(now_ms() - t < 1000);
	for (int i = 0; i < 7; i++) {
		ssize_t n;

		do
			n = recv(fds[i], buf, sizeof(buf), 0);
		while (n > 0 && i == 6);
		assert_true(n == 0 || (n < 0 && errno == ECONNRESET));
		close(fds[i]);
	}
	assert_int_equal(client_connect(AF_INET, p), -ECONNREFUSED);
}

static void test_start_errors(void **state)
{
	static const char *const bad[] = {
	    "",
	    "127.0.0.1",
	    "127.0.0.1:",
	    ":9254",
	    "127.0.0.1:65536",
	    "127.0.0.1:123456",
	    "127.0.0.1:-1",
	    "127.0.0.1:+80",
	    "127.0.0.1:80x",
	    "127.0.0.1: 80",
	    " 127.0.0.1:80",
	    "127.0.0.1 :80",
	    "1.2.3:80",
	    "256.0.0.1:80",
	    "localhost:9254",
	    "::1:9254",
	    "[::1]9254",
	    "[::1]",
	    "[::1:9254",
	    "[]:9254",
	    "[127.0.0.1]:9254",
	    "[::1]:",
	    "[::1]:99999",
	    "[fe80::1%lo]:0",
	};
	struct ndc_http *h = NULL;
	char addr[64];

	(void)state;
	assert_int_equal(ndc_http_start(NULL, NULL, NULL, &h), -EINVAL);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int r = ndc_http_start(bad[i], NULL, NULL, &h);

		if (r != -EINVAL)
			print_error("\"%s\": %d\n", bad[i], r);
		assert_int_equal(r, -EINVAL);
		assert_null(h);
	}
	/* Bind only: no packet is sent to an address that is not on this host. */
	assert_int_equal(ndc_http_start("169.254.99.99:0", NULL, NULL, &h), -EADDRNOTAVAIL);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
	assert_int_equal(ndc_http_start(addr, NULL, NULL, &h), -EADDRINUSE);
	assert_null(h);
	ndc_http_stop(NULL);
}

static void test_ipv6(void **state)
{
	struct ndc_http *h;
	struct resp r;
	static const char req[] = "GET /ready HTTP/1.1\r\nHost: [::1]\r\n\r\n";
	static const char req2[] = "GET /metrics HTTP/1.1\r\nHost: [::1]\r\n\r\n";
	int ret = ndc_http_start("[::1]:0", NULL, NULL, &h);

	(void)state;
	if (ret == -EADDRNOTAVAIL || ret == -EAFNOSUPPORT)
		skip(); /* no IPv6 loopback here */
	assert_int_equal(ret, 0);
	assert_int_not_equal(ndc_http_port(h), 0);
	ndc_http_set_ready(h, true);
	request_on(AF_INET6, ndc_http_port(h), req, strlen(req), &r);
	assert_int_equal(r.err, 0);
	assert_response(&r, 200, "text/plain; charset=utf-8", "ready\n");
	resp_free(&r);
	/* Empty /metrics without a callback. */
	request_on(AF_INET6, ndc_http_port(h), req2, strlen(req2), &r);
	assert_response(&r, 200, "text/plain; version=0.0.4; charset=utf-8", "");
	resp_free(&r);
	ndc_http_stop(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_health),
	    cmocka_unit_test(test_ready),
	    cmocka_unit_test(test_metrics_http),
	    cmocka_unit_test(test_metrics_sections),
	    cmocka_unit_test(test_not_found),
	    cmocka_unit_test(test_pages),
	    cmocka_unit_test(test_methods),
	    cmocka_unit_test(test_oversized),
	    cmocka_unit_test(test_garbage),
	    cmocka_unit_test(test_early_disconnect),
	    cmocka_unit_test(test_half_close),
	    cmocka_unit_test(test_sequential),
	    cmocka_unit_test(test_concurrent),
	    cmocka_unit_test(test_slowloris),
	    cmocka_unit_test(test_all_expire_at_once),
	    cmocka_unit_test(test_stop_idle),
	    cmocka_unit_test(test_start_errors),
	    cmocka_unit_test(test_ipv6),
	};
	int r;

	curl_global_init(CURL_GLOBAL_DEFAULT);
	r = cmocka_run_group_tests(tests, group_setup, group_teardown);
	curl_global_cleanup();
	return r;
}
