// SPDX-License-Identifier: MIT
/*
 * /metrics, /health, /ready over HTTP/1.1 (RFC 9110, RFC 9112), one request per connection.
 *
 * Choices the header leaves open:
 * - The thread owns the listening socket, every connection and the metrics rendering; the only
 *   state shared with other threads is the ready flag (atomic) and the stop eventfd.
 * - Connections live in a fixed array of NDC_HTTP_CONN_MAX slots. When all are taken the listening
 *   socket is left out of the poll set, so new clients wait in the kernel backlog rather than
 *   being reset. A slot is held at most NDC_HTTP_TIMEOUT_MS to receive the request, as long again
 *   to send the response and NDC_HTTP_LINGER_MS after it: a slowloris client delays others by at
 *   most those deadlines, it cannot hold a slot forever. Deadlines run from the start of each
 *   phase, not from the last byte, for the same reason.
 * - After the response the write side is shut down and what the client still sends is read and
 *   dropped until it closes (or the linger deadline): closing a socket with unread input sends an
 *   RST, which can destroy the response in flight (RFC 9112 §9.6).
 * - Parsing is strict where leniency could be abused and lenient where RFC 9112 allows it: a bare
 *   LF ends a line (§2.2), CRLFs before the request line are skipped (§2.2), a bare CR, obs-fold
 *   (§5.2), a malformed field line, or a missing or repeated Host in HTTP/1.1 (§3.2) is a 400.
 *   The request target is only matched against the three paths; any other form is a 404.
 * - No logging per request: garbage from the network must not fill the log. A failing metrics
 *   callback (a bug, e.g. an invalid metric name) is logged each time /metrics answers 500.
 *
 * The metrics text itself (ndc_metric*, the families and their checks, ndc_metrics_render)
 * is built in http_metrics.c: it never touches a socket and tests call it without a server.
 */
#include <errno.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <ndc/log.h>

#include "http/http.h"
#include "internal.h"

#define NDC_HTTP_LINGER_MS 1000
#define NDC_HTTP_BACKLOG 128
/* Pause before accepting again after EMFILE and friends: the listener stays readable, so
 * retrying at once would spin. */
#define NDC_HTTP_ACCEPT_PAUSE_MS 100
/* Reads per wakeup of one connection, so a client that floods the linger phase cannot starve
 * the others. */
#define NDC_HTTP_READS_PER_WAKE 8

/* ---- server ---- */

enum conn_state { CONN_FREE = 0, CONN_READ, CONN_WRITE, CONN_LINGER };

struct conn {
	int fd;
	enum conn_state state;
	uint64_t deadline_ms;
	size_t len;   /* request bytes in buf */
	size_t start; /* first byte after the CRLFs that may precede the request line */
	char *body;   /* response body; heap if body_owned, else a literal */
	bool body_owned;
	size_t body_len;
	size_t hdr_len;
	size_t out_len; /* hdr_len, plus body_len unless HEAD */
	size_t sent;
	char hdr[320];
	char buf[NDC_HTTP_HEADER_MAX];
};

struct ndc_http {
	int lfd;
	int efd;
	uint16_t port;
	atomic_bool ready;
	_Atomic(ndc_http_unready_fn) unready;
	void *_Atomic unready_arg;
	ndc_metrics_fn fn;
	void *arg;
	pthread_mutex_t src_lock; /* sources added while /metrics renders */
	struct ndc_metrics_source src[NDC_HTTP_SOURCES_MAX];
	size_t n_src;
	struct {
		const char *path, *ctype;
		ndc_http_page_fn fn;
		void *arg;
	} pages[NDC_HTTP_PAGES_MAX]; /* under src_lock */
	size_t n_pages;
	pthread_t thread;
	/* Thread-only from here. */
	uint64_t accept_pause_until;
	bool accept_warned;
	unsigned nconn;
	struct conn conns[NDC_HTTP_CONN_MAX];
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void conn_close(struct ndc_http *h, struct conn *c)
{
	close(c->fd);
	if (c->body_owned)
		free(c->body);
	c->fd = -1;
	c->state = CONN_FREE;
	c->body = NULL;
	c->body_owned = false;
	h->nconn--;
}

struct status_text {
	int status;
	const char *reason;
	const char *body; /* of an error response */
};

static const struct status_text status_texts[] = {
    {200, "OK", ""},
    {400, "Bad Request", "bad request\n"},
    {404, "Not Found", "not found\n"},
    {405, "Method Not Allowed", "method not allowed\n"},
    {431, "Request Header Fields Too Large", "request header fields too large\n"},
    {500, "Internal Server Error", "internal server error\n"},
    {503, "Service Unavailable", "service unavailable\n"},
    {505, "HTTP Version Not Supported", "http version not supported\n"},
};

static const struct status_text *status_text(int status)
{
	for (size_t i = 0; i < sizeof(status_texts) / sizeof(status_texts[0]); i++)
		if (status_texts[i].status == status)
			return &status_texts[i];
	return &status_texts[5]; /* 500 */
}

/* IMF-fixdate (RFC 9110 §5.6.7), written by hand: strftime's names follow the locale. */
static void http_date(char *out, size_t cap)
{
	static const char days[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
	static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
					   "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
	time_t t = time(NULL);
	struct tm tm;

	gmtime_r(&t, &tm);
	snprintf(out, cap, "%s, %02d %s %04d %02d:%02d:%02d GMT", days[tm.tm_wday % 7], tm.tm_mday,
		 months[tm.tm_mon % 12], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

static void conn_write(struct ndc_http *h, struct conn *c);

/* body: a literal, or heap memory the connection takes over (owned). */
static void respond(struct ndc_http *h, struct conn *c, int status, const char *ctype, char *body,
		    size_t body_len, bool owned, bool head)
{
	char date[40];
	int n;

	http_date(date, sizeof(date));
	n = snprintf(c->hdr, sizeof(c->hdr),
		     "HTTP/1.1 %d %s\r\n"
		     "Date: %s\r\n"
		     "Content-Type: %s\r\n"
		     "Content-Length: %zu\r\n"
		     "%s"
		     "Connection: close\r\n"
		     "\r\n",
		     status, status_text(status)->reason, date, ctype, body_len,
		     status == 405 ? "Allow: GET, HEAD\r\n" : "");
	c->hdr_len = n > 0 && (size_t)n < sizeof(c->hdr) ? (size_t)n : 0;
	c->body = body;
	c->body_len = body_len;
	c->body_owned = owned;
	c->out_len = c->hdr_len + (head ? 0 : body_len);
	c->sent = 0;
	c->state = CONN_WRITE;
	c->deadline_ms = now_ms() + NDC_HTTP_TIMEOUT_MS;
	conn_write(h, c);
}

static void respond_text(struct ndc_http *h, struct conn *c, int status, const char *body,
			 bool head)
{
	respond(h, c, status, "text/plain; charset=utf-8", (char *)body, strlen(body), false, head);
}

/* head: the request was a HEAD as far as it could be parsed (no body then, RFC 9110 §9.3.2). */
static void respond_error(struct ndc_http *h, struct conn *c, int status, bool head)
{
	respond_text(h, c, status, status_text(status)->body, head);
}

/* RFC 9110 §5.6.2 tchar. */
static bool is_tchar(unsigned char c)
{
	return ndc_http_is_alpha(c) || ndc_http_is_digit(c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* Field value bytes (RFC 9110 §5.5): VCHAR, obs-text, SP, HTAB. */
static bool is_field_char(unsigned char c)
{
	return c == '\t' || (c >= 0x20 && c != 0x7f);
}

struct request {
	bool head, get;
	const char *target;
	size_t target_len;
};

/* One line: [p, *ret_next) holds it and its LF; returns its length without the CR LF or LF, or
 * -1 for a bare CR inside. */
static long line_len(const char *p, const char *end, const char **ret_next)
{
	const char *nl = memchr(p, '\n', (size_t)(end - p));
	size_t n = (size_t)(nl - p);

	*ret_next = nl + 1;
	if (n && p[n - 1] == '\r')
		n--;
	if (memchr(p, '\r', n))
		return -1;
	return (long)n;
}

/* Parses [p, end), the request line and field lines each ending in LF. Returns 0 or the status
 * to answer with. */
static int parse_request(const char *p, const char *end, struct request *req)
{
	const char *next, *s, *e;
	long n = line_len(p, end, &next);
	unsigned hosts = 0;
	bool http11;

	if (n < 0)
		return 400;
	s = p;
	e = p + n;
	/* request-line = method SP request-target SP HTTP-version (RFC 9112 §3) */
	while (s < e && is_tchar((unsigned char)*s))
		s++;
	if (s == p || s == e || *s != ' ')
		return 400;
	req->get = (size_t)(s - p) == 3 && memcmp(p, "GET", 3) == 0;
	req->head = (size_t)(s - p) == 4 && memcmp(p, "HEAD", 4) == 0;
	req->target = ++s;
	while (s<e && * s> ' ' && *s < 0x7f)
		s++;
	req->target_len = (size_t)(s - req->target);
	if (!req->target_len || s == e || *s++ != ' ')
		return 400;
	if (e - s != 8 || memcmp(s, "HTTP/", 5) != 0 || !ndc_http_is_digit(s[5]) || s[6] != '.' ||
	    !ndc_http_is_digit(s[7]))
		return 400;
	if (s[5] != '1')
		return 505;
	http11 = s[7] != '0';

	for (p = next; p < end; p = next) {
		n = line_len(p, end, &next);
		if (n < 0)
			return 400;
		if (n == 0)
			break; /* the empty line that ends the headers */
		e = p + n;
		/* field-line = field-name ":" OWS field-value OWS; no obs-fold (RFC 9112 §5.2) */
		for (s = p; s < e && is_tchar((unsigned char)*s); s++)
			;
		if (s == p || s == e || *s != ':')
			return 400;
		if (s - p == 4 && strncasecmp(p, "host", 4) == 0)
			hosts++;
		for (s++; s < e; s++)
			if (!is_field_char((unsigned char)*s))
				return 400;
	}
	/* RFC 9112 §3.2: exactly one Host in HTTP/1.1, at most one in 1.0. */
	if (hosts > 1 || (http11 && hosts != 1))
		return 400;
	if (!req->get && !req->head)
		return 405;
	return 0;
}

/* The path of an origin-form or absolute-form target, without the query. */
static void target_path(const char *t, size_t n, const char **ret_path, size_t *ret_len)
{
	const char *end = t + n, *s = memchr(t, ':', n);

	if (n && t[0] != '/' && s && end - s > 3 && memcmp(s, "://", 3) == 0) {
		const char *slash = memchr(s + 3, '/', (size_t)(end - s - 3));

		t = slash ? slash : end;
	}
	for (s = t; s < end && *s != '?' && *s != '#'; s++)
		;
	*ret_path = t;
	*ret_len = (size_t)(s - t);
}

static bool path_is(const char *p, size_t n, const char *want)
{
	return n == strlen(want) && memcmp(p, want, n) == 0;
}

/* The /metrics text: the start's fn, then each section added. */
static void write_metrics(void *arg, struct ndc_metrics_buf *b)
{
	struct ndc_http *h = arg;

	if (h->fn)
		h->fn(h->arg, b);
	pthread_mutex_lock(&h->src_lock);
	for (size_t i = 0; i < h->n_src; i++)
		h->src[i].write(h->src[i].arg, b);
	pthread_mutex_unlock(&h->src_lock);
}

int ndc_http_add_metrics(struct ndc_http *h, const struct ndc_metrics_source *src)
{
	int err = 0;

	pthread_mutex_lock(&h->src_lock);
	if (h->n_src < NDC_HTTP_SOURCES_MAX)
		h->src[h->n_src++] = *src;
	else
		err = -ENOSPC;
	pthread_mutex_unlock(&h->src_lock);
	if (err)
		ndc_err("http: /metrics: no room for the %s section (NDC_HTTP_SOURCES_MAX)",
			src->name);
	return err;
}

int ndc_http_add_page(struct ndc_http *h, const char *path, const char *ctype, ndc_http_page_fn fn,
		      void *arg)
{
	int err = 0;

	pthread_mutex_lock(&h->src_lock);
	for (size_t i = 0; i < h->n_pages && !err; i++)
		if (!strcmp(h->pages[i].path, path))
			err = -EEXIST;
	if (!err && h->n_pages >= NDC_HTTP_PAGES_MAX)
		err = -ENOSPC;
	if (!err) {
		h->pages[h->n_pages].path = path;
		h->pages[h->n_pages].ctype = ctype;
		h->pages[h->n_pages].fn = fn;
		h->pages[h->n_pages].arg = arg;
		h->n_pages++;
	}
	pthread_mutex_unlock(&h->src_lock);
	if (err)
		ndc_err("http: page %s: %s", path, strerror(-err));
	return err;
}

/* A page added with ndc_http_add_page: true when path is one (answered). */
static bool serve_page(struct ndc_http *h, struct conn *c, const char *path, size_t plen, bool head)
{
	ndc_http_page_fn fn = NULL;
	const char *ctype = NULL;
	void *arg = NULL;
	char *body = NULL;
	size_t len = 0;

	pthread_mutex_lock(&h->src_lock);
	for (size_t i = 0; i < h->n_pages && !fn; i++)
		if (path_is(path, plen, h->pages[i].path)) {
			fn = h->pages[i].fn;
			ctype = h->pages[i].ctype;
			arg = h->pages[i].arg;
		}
	pthread_mutex_unlock(&h->src_lock);
	if (!fn)
		return false;
	if (fn(arg, &body, &len) < 0)
		respond_error(h, c, 500, head);
	else
		respond(h, c, 200, ctype, body, len, true, head);
	return true;
}

static void handle_request(struct ndc_http *h, struct conn *c, const char *p, const char *end)
{
	struct request req = {0};
	const char *path;
	size_t plen;
	int status = parse_request(p, end, &req);

	if (status) {
		respond_error(h, c, status, req.head);
		return;
	}
	target_path(req.target, req.target_len, &path, &plen);
	if (path_is(path, plen, "/metrics")) {
		char *text;
		size_t len;
		int r = ndc_metrics_render(write_metrics, h, &text, &len);

		if (r < 0) {
			ndc_warn("http: /metrics: rendering failed: %s", strerror(-r));
			respond_error(h, c, 500, req.head);
			return;
		}
		respond(h, c, 200, "text/plain; version=0.0.4; charset=utf-8", text, len, true,
			req.head);
	} else if (path_is(path, plen, "/health")) {
		respond_text(h, c, 200, "ok\n", req.head);
	} else if (path_is(path, plen, "/ready")) {
		ndc_http_unready_fn fn = atomic_load(&h->unready);
		char why[480];
		char *body;
		int n;

		if (!atomic_load(&h->ready)) {
			respond_text(h, c, 503, "not ready\n", req.head);
		} else if (fn && fn(atomic_load(&h->unready_arg), why, sizeof(why)) &&
			   (n = asprintf(&body, "not ready: %s\n", why)) > 0) {
			respond(h, c, 503, "text/plain; charset=utf-8", body, (size_t)n, true,
				req.head);
		} else {
			respond_text(h, c, 200, "ready\n", req.head);
		}
	} else if (!serve_page(h, c, path, plen, req.head)) {
		respond_error(h, c, 404, req.head);
	}
}

/* Looks for the empty line that ends the header section in the bytes from `from` on. */
static void scan_request(struct ndc_http *h, struct conn *c, size_t from)
{
	if (c->start == from)
		while (c->start < c->len && (c->buf[c->start] == '\r' || c->buf[c->start] == '\n'))
			c->start++;
	/* The LF that opens "\n\n" or "\n\r\n" may sit up to two bytes before the new data. */
	from = from >= 2 ? from - 2 : 0;
	if (from < c->start)
		from = c->start;
	for (size_t i = from; i + 1 < c->len; i++) {
		if (c->buf[i] != '\n')
			continue;
		if (c->buf[i + 1] == '\n' ||
		    (c->buf[i + 1] == '\r' && i + 2 < c->len && c->buf[i + 2] == '\n')) {
			handle_request(h, c, c->buf + c->start, c->buf + i + 1);
			return;
		}
	}
	if (c->len == sizeof(c->buf))
		respond_error(h, c, 431, false);
}

/*
 * One recv into buf: the bytes read, 0 when there is nothing more for now, -1 when the peer is
 * gone or the socket failed, c closed then (before a whole request: nobody to answer).
 */
static ssize_t conn_recv(struct ndc_http *h, struct conn *c, char *buf, size_t len)
{
	ssize_t r;

	do
		r = recv(c->fd, buf, len, 0);
	while (r < 0 && errno == EINTR);
	if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return 0;
	if (r <= 0) {
		conn_close(h, c);
		return -1;
	}
	return r;
}

static void conn_read(struct ndc_http *h, struct conn *c)
{
	for (int i = 0; i < NDC_HTTP_READS_PER_WAKE && c->state == CONN_READ; i++) {
		size_t old = c->len;
		ssize_t r = conn_recv(h, c, c->buf + old, sizeof(c->buf) - old);

		if (r <= 0)
			return;
		c->len += (size_t)r;
		scan_request(h, c, old);
	}
}

static void conn_linger(struct ndc_http *h, struct conn *c)
{
	for (int i = 0; i < NDC_HTTP_READS_PER_WAKE; i++)
		if (conn_recv(h, c, c->buf, sizeof(c->buf)) <= 0)
			return;
}

static void conn_write(struct ndc_http *h, struct conn *c)
{
	while (c->sent < c->out_len) {
		struct iovec iov[2];
		struct msghdr m = {.msg_iov = iov};
		ssize_t r;

		if (c->sent < c->hdr_len) {
			iov[0] = (struct iovec){c->hdr + c->sent, c->hdr_len - c->sent};
			iov[1] = (struct iovec){c->body, c->out_len - c->hdr_len};
			m.msg_iovlen = 2;
		} else {
			iov[0] =
			    (struct iovec){c->body + (c->sent - c->hdr_len), c->out_len - c->sent};
			m.msg_iovlen = 1;
		}
		r = sendmsg(c->fd, &m, MSG_NOSIGNAL);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (r < 0) {
			conn_close(h, c);
			return;
		}
		c->sent += (size_t)r;
	}
	if (c->body_owned)
		free(c->body);
	c->body = NULL;
	c->body_owned = false;
	shutdown(c->fd, SHUT_WR);
	c->state = CONN_LINGER;
	c->deadline_ms = now_ms() + NDC_HTTP_LINGER_MS;
}

static void accept_conns(struct ndc_http *h)
{
	while (h->nconn < NDC_HTTP_CONN_MAX) {
		int fd = accept4(h->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct conn *c = h->conns;

		if (fd < 0) {
			switch (errno) {
			case EAGAIN:
#if EWOULDBLOCK != EAGAIN
			case EWOULDBLOCK:
#endif
				return;
			case EINTR:
			case ECONNABORTED:
			case EPROTO:
			case EPERM: /* firewall rules (accept(2)) */
			/* Errors of the aborted connection, reported by accept (accept(2), Linux).
			 */
			case ENETDOWN:
			case ENOPROTOOPT:
			case EHOSTDOWN:
			case ENONET:
			case EHOSTUNREACH:
			case EOPNOTSUPP:
			case ENETUNREACH:
				continue;
			default:
				if (!h->accept_warned)
					ndc_warn("http: accept: %s; pausing", strerror(errno));
				h->accept_warned = true;
				h->accept_pause_until = now_ms() + NDC_HTTP_ACCEPT_PAUSE_MS;
				return;
			}
		}
		h->accept_warned = false;
		while (c->state != CONN_FREE)
			c++;
		c->fd = fd;
		c->state = CONN_READ;
		c->deadline_ms = now_ms() + NDC_HTTP_TIMEOUT_MS;
		c->len = 0;
		c->start = 0;
		h->nconn++;
	}
}

static void *http_thread(void *arg)
{
	struct ndc_http *h = arg;
	struct pollfd pfd[2 + NDC_HTTP_CONN_MAX];
	struct conn *pconn[2 + NDC_HTTP_CONN_MAX];

	for (;;) {
		uint64_t now = now_ms();
		int n = 0, timeout = -1, first_conn, r;
		bool listening = false;

		/* Expired connections first: closing them may free the slots that decide whether
		 * the listener is watched. (Deciding before this sweep left a server whose every
		 * slot expired at once polling only its stop fd, forever.) */
		for (struct conn *c = h->conns; c < h->conns + NDC_HTTP_CONN_MAX; c++)
			if (c->state != CONN_FREE && c->deadline_ms <= now)
				conn_close(h, c);
		pfd[n++] = (struct pollfd){.fd = h->efd, .events = POLLIN};
		if (h->nconn < NDC_HTTP_CONN_MAX) {
			if (now >= h->accept_pause_until) {
				pfd[n++] = (struct pollfd){.fd = h->lfd, .events = POLLIN};
				listening = true;
			} else {
				timeout = (int)(h->accept_pause_until - now);
			}
		}
		first_conn = n;
		for (struct conn *c = h->conns; c < h->conns + NDC_HTTP_CONN_MAX; c++) {
			if (c->state == CONN_FREE)
				continue;
			if (timeout < 0 || c->deadline_ms - now < (uint64_t)timeout)
				timeout = (int)(c->deadline_ms - now);
			pconn[n] = c;
			pfd[n++] = (struct pollfd){
			    .fd = c->fd, .events = c->state == CONN_WRITE ? POLLOUT : POLLIN};
		}
		r = poll(pfd, (nfds_t)n, timeout);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			ndc_err("http: poll: %s; server stopped", strerror(errno));
			return NULL;
		}
		if (pfd[0].revents)
			return NULL;
		for (int i = first_conn; i < n; i++) {
			struct conn *c = pconn[i];

			if (!pfd[i].revents)
				continue;
			/* POLLERR/POLLHUP: the recv or send below sees the error or EOF. */
			if (c->state == CONN_READ)
				conn_read(h, c);
			else if (c->state == CONN_WRITE)
				conn_write(h, c);
			else if (c->state == CONN_LINGER)
				conn_linger(h, c);
		}
		if (listening && pfd[1].revents)
			accept_conns(h);
	}
}

/* "a.b.c.d:port" or "[v6]:port", numeric only; the port is 0..65535 in plain decimal. */
static int parse_listen(const char *s, struct sockaddr_storage *ss, socklen_t *ret_len)
{
	char host[INET6_ADDRSTRLEN];
	const char *colon, *hs, *he;
	unsigned long port = 0;

	if (!s)
		return -EINVAL;
	if (s[0] == '[') {
		hs = s + 1;
		he = strchr(hs, ']');
		if (!he || he[1] != ':')
			return -EINVAL;
		colon = he + 1;
	} else {
		hs = s;
		colon = strrchr(s, ':');
		if (!colon)
			return -EINVAL;
		he = colon;
	}
	if (he == hs || (size_t)(he - hs) >= sizeof(host) || !colon[1] || strlen(colon + 1) > 5)
		return -EINVAL;
	for (const char *p = colon + 1; *p; p++) {
		if (!ndc_http_is_digit(*p))
			return -EINVAL;
		port = port * 10 + (unsigned long)(*p - '0');
	}
	if (port > 65535)
		return -EINVAL;
	memcpy(host, hs, (size_t)(he - hs));
	host[he - hs] = '\0';

	memset(ss, 0, sizeof(*ss));
	if (s[0] == '[') {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;

		a->sin6_family = AF_INET6;
		a->sin6_port = htons((uint16_t)port);
		if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1)
			return -EINVAL;
		*ret_len = sizeof(*a);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)ss;

		a->sin_family = AF_INET;
		a->sin_port = htons((uint16_t)port);
		if (inet_pton(AF_INET, host, &a->sin_addr) != 1)
			return -EINVAL;
		*ret_len = sizeof(*a);
	}
	return 0;
}

/* The descriptor in fds (taken out: -1 left) of a TCP socket bound to ss, or -1. */
static int take_listener(int *fds, size_t n, const struct sockaddr_storage *ss, socklen_t sl)
{
	for (size_t i = 0; i < n; i++) {
		struct sockaddr_storage b;
		socklen_t bl = sizeof(b);
		int t = 0, fd = fds[i];
		socklen_t tl = sizeof(t);

		if (fd < 0 || getsockopt(fd, SOL_SOCKET, SO_TYPE, &t, &tl) < 0 ||
		    t != SOCK_STREAM || getsockname(fd, (struct sockaddr *)&b, &bl) < 0 ||
		    bl != sl || memcmp(&b, ss, sl) != 0)
			continue;
		fds[i] = -1;
		return fd;
	}
	return -1;
}

int ndc_http_start(const char *listen_addr, ndc_metrics_fn fn, void *arg, struct ndc_http **ret)
{
	return ndc_http_start_inherit(listen_addr, NULL, 0, fn, arg, ret);
}

int ndc_http_start_inherit(const char *listen_addr, int *inherit, size_t n_inherit,
			   ndc_metrics_fn fn, void *arg, struct ndc_http **ret)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	struct ndc_http *h;
	sigset_t all, old;
	const char *what;
	int one = 1, r;

	r = parse_listen(listen_addr, &ss, &sl);
	if (r < 0) {
		ndc_err("http: listen address \"%s\": expected a.b.c.d:port or [v6]:port",
			listen_addr ? listen_addr : "(null)");
		return r;
	}
	h = calloc(1, sizeof(*h));
	if (!h) {
		ndc_err("http: %s: out of memory", listen_addr);
		return -ENOMEM;
	}
	h->fn = fn;
	h->arg = arg;
	pthread_mutex_init(&h->src_lock, NULL);
	h->efd = -1;
	atomic_init(&h->ready, false);
	for (int i = 0; i < NDC_HTTP_CONN_MAX; i++)
		h->conns[i].fd = -1;

	h->lfd = take_listener(inherit, n_inherit, &ss, sl);
	if (h->lfd >= 0) {
		ndc_info("http: %s handed over by the previous agent", listen_addr);
		goto listening;
	}
	what = "socket";
	h->lfd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (h->lfd < 0)
		goto fail_errno;
	/* A restarted daemon must not fail on the old one's TIME_WAIT connections. */
	what = "setsockopt";
	if (setsockopt(h->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)
		goto fail_errno;
	what = "bind";
	if (bind(h->lfd, (struct sockaddr *)&ss, sl) < 0)
		goto fail_errno;
	what = "listen";
	if (listen(h->lfd, NDC_HTTP_BACKLOG) < 0)
		goto fail_errno;
listening:
	what = "getsockname";
	if (getsockname(h->lfd, (struct sockaddr *)&ss, &sl) < 0)
		goto fail_errno;
	h->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
						 : ((struct sockaddr_in *)&ss)->sin_port);
	what = "eventfd";
	h->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (h->efd < 0)
		goto fail_errno;

	/* Signals belong to the threads that wait for them, never to this one. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	r = -pthread_create(&h->thread, NULL, http_thread, h);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r < 0) {
		ndc_err("http: %s: thread: %s", listen_addr, strerror(-r));
		goto fail;
	}
	pthread_setname_np(h->thread, "ndc-http");
	ndc_info("http: listening on %s (port %u)", listen_addr, h->port);
	*ret = h;
	return 0;

fail_errno:
	r = -errno;
	ndc_err("http: %s %s: %s", what, listen_addr, strerror(errno));
fail:
	if (h->efd >= 0)
		close(h->efd);
	if (h->lfd >= 0)
		close(h->lfd);
	pthread_mutex_destroy(&h->src_lock);
	free(h);
	return r;
}

int ndc_http_fd(const struct ndc_http *h)
{
	return h->lfd;
}

uint16_t ndc_http_port(const struct ndc_http *h)
{
	return h->port;
}

void ndc_http_set_ready(struct ndc_http *h, bool ready)
{
	atomic_store(&h->ready, ready);
}

void ndc_http_set_unready_check(struct ndc_http *h, ndc_http_unready_fn fn, void *arg)
{
	atomic_store(&h->unready_arg, arg);
	atomic_store(&h->unready, fn);
}

void ndc_http_stop(struct ndc_http *h)
{
	uint64_t one = 1;

	if (!h)
		return;
	/* The eventfd counter cannot overflow from one write; only EINTR could fail it. */
	while (write(h->efd, &one, sizeof(one)) < 0 && errno == EINTR)
		;
	pthread_join(h->thread, NULL);
	for (int i = 0; i < NDC_HTTP_CONN_MAX; i++)
		if (h->conns[i].state != CONN_FREE)
			conn_close(h, &h->conns[i]);
	close(h->efd);
	close(h->lfd);
	pthread_mutex_destroy(&h->src_lock);
	free(h);
}
