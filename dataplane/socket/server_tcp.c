// SPDX-License-Identifier: MIT
/*
 * The TCP half of the socket server (RFC 7766): accepting, the per-worker connection table,
 * length-prefixed framing of pipelined queries, idle timeout and the max-conns policy, buffering
 * of replies the client is slow to read, and delivery of detained answers to their connection.
 * All of it runs on the worker that owns the connection, except ndc_srv_tcp_complete.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <ndc/log.h>

#include "internal.h"

/* A TCP query longer than this closes the connection: no real query comes near it. */
#define NDC_TCP_QUERY_MAX 4096
/* Room for one whole maximal query plus the start of the next one after compaction. */
#define NDC_TCP_RBUF (2 * (2 + NDC_TCP_QUERY_MAX))
/* Unsent reply bytes above which a connection's pipelined queries wait (client not reading). */
#define NDC_TCP_WBUF_HIGH (64 * 1024)
/* Outstanding detained replies keep a connection past its idle timeout by at most this much. */
#define NDC_TCP_PENDING_GRACE_MS 30000
#define NDC_ACCEPT_BATCH 16
/* Out of file descriptors with no idle connection to close: listeners rest this long (ms). */
#define NDC_ACCEPT_BACKOFF_MS 100
#define NDC_ACCEPT_WARN_MS 10000

struct conn {
	struct sock s;
	struct conn *prev, *next; /* activity order, oldest first; next also links the dead list */
	uint64_t last_active;	  /* ms: accept, complete query, reply bytes written */
	uint32_t slot;
	uint32_t n_pending; /* detained queries not yet completed */
	uint32_t events;    /* what is registered with epoll */
	bool closed;
	bool eof;    /* client half-closed: finish what is owed, then close */
	bool paused; /* too many reply bytes unsent: leave queries in rbuf */
	size_t rlen;
	uint8_t *wbuf;
	size_t woff, wlen, wcap;
	uint8_t rbuf[NDC_TCP_RBUF];
};

/* Epoll events carry a struct sock pointer; for SK_CONN it is the conn itself. */
_Static_assert(offsetof(struct conn, s) == 0, "struct sock must start struct conn");

/* ---- connections ---- */

/* A completion names its connection by slot and generation, never by pointer: the conn may be
 * freed and its memory reused before the answer comes back. */
struct slot {
	struct conn *c;
	uint64_t gen;
};

static size_t unsent(const struct conn *c)
{
	return c->wlen - c->woff;
}

static void lru_unlink(struct worker *w, struct conn *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		w->oldest = c->next;
	if (c->next)
		c->next->prev = c->prev;
	else
		w->newest = c->prev;
	c->prev = c->next = NULL;
}

static void lru_append(struct worker *w, struct conn *c)
{
	c->prev = w->newest;
	c->next = NULL;
	if (w->newest)
		w->newest->next = c;
	else
		w->oldest = c;
	w->newest = c;
}

static void touch(struct worker *w, struct conn *c, uint64_t now)
{
	c->last_active = now;
	if (w->newest != c) {
		lru_unlink(w, c);
		lru_append(w, c);
	}
}

/* The memory stays until ndc_srv_tcp_reap(): later events of the same epoll batch may still point
 * at it. */
static void conn_close(struct worker *w, struct conn *c)
{
	if (c->closed)
		return;
	c->closed = true;
	close(c->s.fd);
	w->slots[c->slot].c = NULL;
	w->free_slots[w->n_free++] = c->slot;
	lru_unlink(w, c);
	w->n_conns--;
	c->next = w->dead;
	w->dead = c;
}

void ndc_srv_tcp_reap(struct worker *w)
{
	while (w->dead) {
		struct conn *c = w->dead;

		w->dead = c->next;
		free(c->wbuf);
		free(c);
	}
}

static void conn_update(struct worker *w, struct conn *c)
{
	uint32_t want = (c->paused || c->eof ? 0 : EPOLLIN) | (unsent(c) ? EPOLLOUT : 0);
	struct epoll_event ev = {.events = want, .data.ptr = c};

	if (want == c->events)
		return;
	if (epoll_ctl(w->epfd, EPOLL_CTL_MOD, c->s.fd, &ev) < 0) {
		conn_close(w, c);
		return;
	}
	c->events = want;
}

/* A half-closed connection goes once every answer it is owed has been written. */
static void conn_check_done(struct worker *w, struct conn *c)
{
	if (!c->closed && c->eof && !c->n_pending && !unsent(c))
		conn_close(w, c);
}

static int buffer_append(struct conn *c, const uint8_t *data, size_t len)
{
	if (c->woff && c->woff == c->wlen)
		c->woff = c->wlen = 0;
	if (c->wlen + len > c->wcap) {
		size_t cap = c->wcap ? c->wcap : 4096;
		uint8_t *b;

		if (c->woff) {
			memmove(c->wbuf, c->wbuf + c->woff, unsent(c));
			c->wlen -= c->woff;
			c->woff = 0;
		}
		while (cap < c->wlen + len)
			cap *= 2;
		if (cap != c->wcap) {
			b = realloc(c->wbuf, cap);
			if (!b)
				return -ENOMEM;
			c->wbuf = b;
			c->wcap = cap;
		}
	}
	memcpy(c->wbuf + c->wlen, data, len);
	c->wlen += len;
	return 0;
}

/* Writes a framed message, buffering what the socket does not take. Closes c on failure. */
static void conn_send(struct worker *w, struct conn *c, const uint8_t *frame, size_t len,
		      uint64_t now)
{
	if (!unsent(c)) {
		ssize_t r = send(c->s.fd, frame, len, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (r < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
				goto fail;
			r = 0;
		}
		if (r > 0)
			touch(w, c, now);
		frame += r;
		len -= (size_t)r;
		if (!len)
			return;
	}
	if (buffer_append(c, frame, len) < 0)
		goto fail;
	conn_update(w, c);
	return;

fail:
	stat_add(&w->st, drops, 1);
	conn_close(w, c);
}

static void tcp_query(struct worker *w, struct conn *c, const uint8_t *msg, size_t len,
		      uint64_t now)
{
	struct ndc_socket *s = w->srv;
	struct ndc_socket_req req = {.w = w, .c = c, .fd = c->s.fd};
	size_t out_len = 0;

	stat_add(&w->st, tcp_queries, 1);
	touch(w, c, now);
	switch (s->handler(s->ctx, &req, msg, len, w->tcp_out + 2, NDC_TCP_MSG_MAX, &out_len)) {
	case NDC_SEND:
		if (!out_len || out_len > NDC_TCP_MSG_MAX)
			break;
		w->tcp_out[0] = (uint8_t)(out_len >> 8);
		w->tcp_out[1] = (uint8_t)out_len;
		stat_add(&w->st, replies, 1);
		conn_send(w, c, w->tcp_out, out_len + 2, now);
		return;
	case NDC_PENDING:
		stat_add(&w->st, pending, 1);
		return;
	case NDC_DROP:
		break;
	}
	stat_add(&w->st, drops, 1);
}

/*
 * RFC 7766 6.2.1.1: pipelined queries are handled in arrival order; the answers to synchronous
 * ones go out at once, detained ones whenever they complete (6.2.1.2 allows that order).
 */
static void conn_process(struct worker *w, struct conn *c, uint64_t now)
{
	size_t off = 0;

	while (!c->closed && !c->paused && c->rlen - off >= 2) {
		size_t n = (size_t)c->rbuf[off] << 8 | c->rbuf[off + 1];

		/* Length 0 or beyond any query: not a DNS client, or out of sync. */
		if (!n || n > NDC_TCP_QUERY_MAX) {
			conn_close(w, c);
			return;
		}
		if (c->rlen - off < 2 + n)
			break;
		tcp_query(w, c, c->rbuf + off + 2, n, now);
		off += 2 + n;
		if (unsent(c) > NDC_TCP_WBUF_HIGH)
			c->paused = true;
	}
	if (c->closed)
		return;
	if (off) {
		memmove(c->rbuf, c->rbuf + off, c->rlen - off);
		c->rlen -= off;
	}
	conn_update(w, c);
	conn_check_done(w, c);
}

static void conn_flush(struct worker *w, struct conn *c, uint64_t now)
{
	ssize_t r = send(c->s.fd, c->wbuf + c->woff, unsent(c), MSG_DONTWAIT | MSG_NOSIGNAL);

	if (r < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
			return;
		conn_close(w, c);
		return;
	}
	if (r > 0)
		touch(w, c, now);
	c->woff += (size_t)r;
	if (c->woff == c->wlen)
		c->woff = c->wlen = 0;
	if (c->paused && unsent(c) <= NDC_TCP_WBUF_HIGH) {
		c->paused = false;
		conn_process(w, c, now);
		return;
	}
	conn_update(w, c);
	conn_check_done(w, c);
}

static void conn_read(struct worker *w, struct conn *c, uint64_t now)
{
	ssize_t r = recv(c->s.fd, c->rbuf + c->rlen, sizeof(c->rbuf) - c->rlen, MSG_DONTWAIT);

	if (r < 0) {
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			conn_close(w, c);
		return;
	}
	if (r == 0)
		c->eof = true;
	c->rlen += (size_t)r;
	conn_process(w, c, now);
}

void ndc_srv_tcp_event(struct worker *w, struct sock *sk, uint32_t events, uint64_t now)
{
	struct conn *c = (struct conn *)sk;

	if (c->closed)
		return;
	/* HUP: both directions are gone (RST, or shut down both ways): nothing can be delivered. */
	if (events & (EPOLLERR | EPOLLHUP)) {
		conn_close(w, c);
		return;
	}
	if (events & EPOLLOUT)
		conn_flush(w, c, now);
	if (!c->closed && (events & EPOLLIN) && !c->paused && !c->eof)
		conn_read(w, c, now);
}

/*
 * When full, the least recently active connection without detained replies makes room; when
 * every connection waits for one, the newcomer is refused.
 */
static bool evict_one(struct worker *w)
{
	for (struct conn *c = w->oldest; c; c = c->next) {
		if (!c->n_pending) {
			conn_close(w, c);
			return true;
		}
	}
	return false;
}

/* Listeners watched (EPOLLIN) or not (0). */
static void watch_listeners(struct worker *w, uint32_t events)
{
	for (size_t a = 0; a < w->srv->n_addrs; a++) {
		struct epoll_event ev = {.events = events, .data.ptr = &w->lis[a]};

		if (w->lis[a].fd >= 0)
			epoll_ctl(w->epfd, EPOLL_CTL_MOD, w->lis[a].fd, &ev);
	}
}

/*
 * accept4 found no file descriptor (or memory). It says so before it looks at the backlog, so
 * first: does a connection wait at all? If one does, the listener stays readable and without a
 * pause the worker would spin on it: close the least recently active idle connection and try
 * again, or else stop watching the listeners for NDC_ACCEPT_BACKOFF_MS (ndc_srv_tcp_sweep
 * watches them again). UDP is not affected.
 */
static bool accept_starved(struct worker *w, struct sock *lis, int err, uint64_t now)
{
	struct pollfd p = {.fd = lis->fd, .events = POLLIN};

	if (poll(&p, 1, 0) != 1 || !(p.revents & POLLIN))
		return false;
	if (evict_one(w))
		return true;
	if (!w->accept_resume)
		watch_listeners(w, 0);
	w->accept_resume = now + NDC_ACCEPT_BACKOFF_MS;
	if (!w->accept_warned || now - w->accept_warned >= NDC_ACCEPT_WARN_MS) {
		w->accept_warned = now;
		ndc_warn("server: worker %u cannot accept TCP connections: %s (every connection "
			 "owes a reply); pausing %d ms. Raise the open files limit (ulimit -n).",
			 w->id, strerror(err), NDC_ACCEPT_BACKOFF_MS);
	}
	return false;
}

void ndc_srv_tcp_accept(struct worker *w, struct sock *lis, uint64_t now)
{
	static const int one = 1;

	for (int i = 0; i < NDC_ACCEPT_BATCH; i++) {
		int fd = accept4(lis->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct epoll_event ev = {.events = EPOLLIN};
		struct conn *c;
		uint32_t slot;

		if (fd < 0) {
			if (errno == ECONNABORTED || errno == EINTR)
				continue;
			if ((errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			     errno == ENOMEM) &&
			    accept_starved(w, lis, errno, now))
				continue;
			return;
		}
		if (w->n_conns >= w->srv->max_conns && !evict_one(w))
			goto refuse;
		c = malloc(sizeof(*c));
		if (!c)
			goto refuse;
		memset(c, 0, offsetof(struct conn, rbuf));
		c->s.kind = SK_CONN;
		c->s.fd = fd;
		c->events = EPOLLIN;
		/* Replies are written whole; Nagle would hold a pipelined second one for an ACK. */
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		ev.data.ptr = c;
		if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
			free(c);
			goto refuse;
		}
		slot = w->free_slots[--w->n_free];
		c->slot = slot;
		w->slots[slot].c = c;
		w->slots[slot].gen++;
		c->last_active = now;
		lru_append(w, c);
		w->n_conns++;
		stat_add(&w->st, tcp_conns, 1);
		continue;
	refuse:
		close(fd);
	}
}

int ndc_srv_tcp_sweep(struct worker *w, uint64_t now)
{
	uint64_t next = UINT64_MAX;
	struct conn *c, *nx;

	if (w->accept_resume) {
		if (now >= w->accept_resume) {
			w->accept_resume = 0;
			watch_listeners(w, EPOLLIN);
		} else {
			next = w->accept_resume;
		}
	}

	for (c = w->oldest; c; c = nx) {
		uint64_t due = c->last_active + w->srv->idle_ms;

		nx = c->next;
		if (now < due) {
			if (due < next)
				next = due;
			break;
		}
		if (c->n_pending && now < due + NDC_TCP_PENDING_GRACE_MS) {
			if (due + NDC_TCP_PENDING_GRACE_MS < next)
				next = due + NDC_TCP_PENDING_GRACE_MS;
			continue;
		}
		conn_close(w, c);
	}
	if (next == UINT64_MAX)
		return -1;
	return next - now > INT32_MAX ? INT32_MAX : (int)(next - now);
}

/* ---- detained answers ---- */

static void tcp_completion(struct worker *w, struct ndc_pending *p, uint64_t now)
{
	struct slot *sl = &w->slots[p->slot];
	struct conn *c = sl->c;

	if (!c || sl->gen != p->gen) {
		/* The connection closed (and its slot may serve another one by now). */
		stat_add(&w->st, drops, 1);
		return;
	}
	c->n_pending--;
	if (p->len) {
		stat_add(&w->st, replies, 1);
		conn_send(w, c, p->frame, p->len, now);
	} else {
		stat_add(&w->st, drops, 1);
	}
	conn_check_done(w, c);
}

void ndc_srv_tcp_deliver(struct worker *w, uint64_t now)
{
	struct ndc_pending *p, *next;

	pthread_mutex_lock(&w->qlock);
	p = w->qhead;
	w->qhead = w->qtail = NULL;
	pthread_mutex_unlock(&w->qlock);
	for (; p; p = next) {
		next = p->next;
		tcp_completion(w, p, now);
		ndc_srv_pending_free(p);
	}
}

void ndc_srv_tcp_detain(struct ndc_socket_req *req, struct ndc_pending *p)
{
	struct worker *w = req->w;

	p->worker = w->id;
	p->slot = req->c->slot;
	p->gen = w->slots[p->slot].gen;
	req->c->n_pending++;
}

static void push_completion(struct worker *w, struct ndc_pending *p)
{
	static const uint64_t one = 1;
	bool was_empty;

	pthread_mutex_lock(&w->qlock);
	was_empty = !w->qhead;
	if (w->qtail)
		w->qtail->next = p;
	else
		w->qhead = p;
	w->qtail = p;
	pthread_mutex_unlock(&w->qlock);
	/* A non-empty queue has a wakeup outstanding already. */
	if (was_empty && write(w->ev.fd, &one, sizeof(one)) < 0)
		ndc_warn("server: waking worker %u: %s", w->id, strerror(errno));
}

void ndc_srv_tcp_complete(struct ndc_socket *s, struct ndc_pending *p, const uint8_t *msg,
			  size_t len)
{
	/* Even an empty completion goes to the worker: the connection stops waiting for it. */
	if (len && len <= NDC_TCP_MSG_MAX) {
		struct ndc_pending *q = realloc(p, sizeof(*p) + 2 + len);

		if (q) {
			p = q;
			p->frame[0] = (uint8_t)(len >> 8);
			p->frame[1] = (uint8_t)len;
			memcpy(p->frame + 2, msg, len);
			p->len = 2 + len;
		}
	}
	push_completion(s->workers[p->worker], p);
}

/* ---- setup and teardown ---- */

int ndc_srv_tcp_init(struct worker *w)
{
	uint32_t max_conns = w->srv->max_conns;

	pthread_mutex_init(&w->qlock, NULL);
	w->slots = calloc(max_conns, sizeof(*w->slots));
	w->free_slots = calloc(max_conns, sizeof(*w->free_slots));
	if (!w->slots || !w->free_slots)
		return -ENOMEM;
	/* Lowest slots first: a reused slot is the common case the generation check is for. */
	for (uint32_t i = 0; i < max_conns; i++)
		w->free_slots[i] = max_conns - 1 - i;
	w->n_free = max_conns;
	return 0;
}

void ndc_srv_tcp_fini(struct worker *w)
{
	struct ndc_pending *p, *next;

	while (w->oldest)
		conn_close(w, w->oldest);
	ndc_srv_tcp_reap(w);
	for (p = w->qhead; p; p = next) {
		next = p->next;
		ndc_srv_pending_free(p);
	}
	w->qhead = w->qtail = NULL;
	pthread_mutex_destroy(&w->qlock);
	free(w->slots);
	free(w->free_slots);
	w->slots = NULL;
	w->free_slots = NULL;
}
