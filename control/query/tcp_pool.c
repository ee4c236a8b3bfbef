// SPDX-License-Identifier: MIT
/*
 * Pooled TCP to the upstreams (RFC 7766): each upstream keeps up to NDC_FWD_TCP_CONNS
 * connections; a query goes on the one with the fewest outstanding, pipelined behind the others
 * (6.2.1.1), and a new connection is opened only when every open one carries
 * NDC_FWD_TCP_PIPELINE queries already. Answers come in any order and are matched by ID, each
 * ID unique on its connection; a message with no outstanding ID (the answer of a query that
 * timed out) is dropped.
 *
 * A connection that dies (refused, EOF, reset, a read or write error) gives its outstanding
 * queries another connection, once each (RFC 7766 6.2.1: a server may close at any time); a
 * query whose second connection dies too fails its attempt. Two connections in a row that died
 * before any answer put the pool in backoff (100 ms doubling to 5 s, over at the next answer):
 * no new connection is opened meanwhile and attempts fail at once with the last error, so a
 * server that refuses or resets every connection is not asked for one per query. Idle connections
 * close after tcp_idle_ms, under the 10 s CoreDNS and unbound wait before closing theirs.
 *
 * A connection can also die quietly: the server behind a ClusterIP is gone but conntrack still
 * sends the flow to it, or the peer stops reading. Such a connection stays open and takes
 * queries, so two bounds: a connection that was sent a query and has received nothing since
 * for the forwarder's timeout_ms is stalled, closed as a dead one (its queries go to another
 * connection within their own deadlines, counted in tcp_stalled); and the bytes queued on a
 * connection, ours and the kernel's unsent or unacknowledged ones, stay under
 * NDC_FWD_TCP_QUEUE_MAX (the kernel's send buffer alone grows to megabytes): a query that
 * finds every connection full fails its attempt at once (-ENOBUFS, counted in tcp_queue_full,
 * not the upstream's fault), so it goes to the next upstream instead of into memory.
 *
 * Everything here runs on the forwarder thread. A connection closed while an event batch is
 * being handled may still have an event later in that batch: it is only unlinked then (fd -1)
 * and freed by the next sweep, after the batch. An attempt's outcome goes back to the request's
 * flow through f->ops.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <unistd.h>

#include <ndc/log.h>

#include "internal.h"

struct fwd_conn {
	enum fwd_io io; /* FWD_IO_CONN */
	struct fwd_conn *next;
	struct upstream *u;
	int fd;
	bool connected;
	bool answered; /* something came back on it: the pool's backoff is over */
	bool want_out; /* EPOLLOUT armed */
	uint32_t nout; /* outstanding queries */
	struct request *by_id[NDC_FWD_CONN_BUCKETS];
	uint64_t idle_since;
	uint64_t quiet_since; /* a query was queued and nothing came back since; 0: none */
	uint8_t *wbuf;	      /* framed queries not yet written */
	size_t wlen, woff, wcap;
	size_t kqueued; /* in the kernel's send queue, unsent or unacknowledged, when last asked */
	uint8_t *rbuf;	/* 2 + NDC_MSG_MAX: what came in, up to one whole message */
	size_t rlen;
};

#define BUCKET(id) ((id) % NDC_FWD_CONN_BUCKETS)

static void conn_link(struct fwd_conn *c, struct request *r)
{
	struct request **b = &c->by_id[BUCKET(r->id)];

	r->conn = c;
	r->cnext = *b;
	*b = r;
	c->nout++;
}

static struct request *conn_find(struct fwd_conn *c, uint16_t id)
{
	struct request *r = c->by_id[BUCKET(id)];

	while (r && r->id != id)
		r = r->cnext;
	return r;
}

void ndc_fwd_tcp_detach(struct request *r)
{
	struct fwd_conn *c = r->conn;
	struct request **pp;

	if (!c)
		return;
	for (pp = &c->by_id[BUCKET(r->id)]; *pp && *pp != r; pp = &(*pp)->cnext)
		;
	if (*pp)
		*pp = r->cnext;
	r->conn = NULL;
	r->cnext = NULL;
	if (--c->nout == 0)
		c->idle_since = ndc_now_ms();
}

static void publish_open(struct upstream *u)
{
	__atomic_store_n(&u->tcp_open, u->pool.n, __ATOMIC_RELAXED);
}

static int arm(struct ndc_forwarder *f, struct fwd_conn *c, bool out)
{
	struct epoll_event ev = {.events = EPOLLIN | (out ? EPOLLOUT : 0), .data.ptr = c};

	if (c->want_out == out)
		return 0;
	if (epoll_ctl(f->epfd, EPOLL_CTL_MOD, c->fd, &ev) < 0)
		return -errno;
	c->want_out = out;
	return 0;
}

/* Unlinks c from its pool and closes it; the requests still on it are handed back in *ret. */
static void conn_close(struct ndc_forwarder *f, struct fwd_conn *c, struct request **ret)
{
	struct fwd_pool *p = &c->u->pool;
	struct request *list = NULL;
	struct fwd_conn **pp;

	for (pp = &p->conns; *pp && *pp != c; pp = &(*pp)->next)
		;
	if (*pp) {
		*pp = c->next;
		p->n--;
		publish_open(c->u);
	}
	for (size_t b = 0; b < NDC_FWD_CONN_BUCKETS; b++) {
		while (c->by_id[b]) {
			struct request *r = c->by_id[b];

			c->by_id[b] = r->cnext;
			r->conn = NULL;
			r->cnext = list;
			list = r;
		}
	}
	c->nout = 0;
	if (c->fd >= 0)
		close(c->fd); /* also leaves the epoll set */
	c->fd = -1;
	c->u = NULL;
	c->next = f->closed;
	f->closed = c;
	if (ret)
		*ret = list;
}

static uint32_t backoff_next(uint32_t ms)
{
	if (!ms)
		return NDC_FWD_TCP_BACKOFF_MIN_MS;
	return ms * 2 < NDC_FWD_TCP_BACKOFF_MAX_MS ? ms * 2 : NDC_FWD_TCP_BACKOFF_MAX_MS;
}

/* A connection of p died before any answer (or could not be opened). */
static void pool_failed(struct upstream *u, int err)
{
	struct fwd_pool *p = &u->pool;

	p->last_err = err;
	if (++p->fails < 2)
		return;
	p->backoff_ms = backoff_next(p->backoff_ms);
	p->retry_ms = ndc_now_ms() + p->backoff_ms;
	ndc_debug("forwarder: upstream %s: TCP connections fail (%s); none opened for %u ms",
		  u->name, strerror(-err), p->backoff_ms);
}

static int conn_open(struct ndc_forwarder *f, struct upstream *u, struct fwd_conn **ret)
{
	struct fwd_conn *c = calloc(1, sizeof(*c));
	struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT};
	int err;

	if (!c)
		return -ENOMEM;
	c->io = FWD_IO_CONN;
	c->u = u;
	c->want_out = true;
	c->rbuf = malloc(2 + NDC_MSG_MAX);
	c->fd = socket(u->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (!c->rbuf || c->fd < 0) {
		err = c->rbuf ? -errno : -ENOMEM;
		goto fail;
	}
	ev.data.ptr = c;
	UP_INC(u, tcp_conns);
	if (connect(c->fd, (const struct sockaddr *)&u->addr, ndc_fwd_addr_len(&u->addr)) < 0 &&
	    errno != EINPROGRESS) {
		err = -errno;
		pool_failed(u, err);
		goto fail;
	}
	if (epoll_ctl(f->epfd, EPOLL_CTL_ADD, c->fd, &ev) < 0) {
		err = -errno;
		goto fail;
	}
	c->idle_since = ndc_now_ms();
	c->next = u->pool.conns;
	u->pool.conns = c;
	u->pool.n++;
	publish_open(u);
	if (!f->next_sweep)
		f->next_sweep = c->idle_since + (f->tcp_idle_ms < 1000 ? f->tcp_idle_ms : 1000);
	*ret = c;
	return 0;
fail:
	if (c->fd >= 0)
		close(c->fd);
	free(c->rbuf);
	free(c);
	return err;
}

/* Asks the kernel how much of what c wrote it still holds (SIOCOUTQ). */
static void conn_kqueued(struct fwd_conn *c)
{
	int n = 0;

	if (c->connected && ioctl(c->fd, SIOCOUTQ, &n) == 0 && n >= 0)
		c->kqueued = (size_t)n;
}

/*
 * Whether c can queue one more query under NDC_FWD_TCP_QUEUE_MAX, counting what the kernel
 * holds too (its send buffer grows to megabytes on its own): asked again only when the last
 * answer says full, so a healthy connection costs no system call per query.
 */
static bool conn_room(struct fwd_conn *c)
{
	size_t need = c->wlen - c->woff + 2 + NDC_FWD_QUERY_MAX;

	if (need + c->kqueued <= NDC_FWD_TCP_QUEUE_MAX)
		return true;
	conn_kqueued(c);
	return need + c->kqueued <= NDC_FWD_TCP_QUEUE_MAX;
}

/*
 * The connection for one more query: the least loaded with room, or a new one. -ENOBUFS: every
 * connection is full and no other may be opened.
 */
static int conn_pick(struct ndc_forwarder *f, struct upstream *u, struct fwd_conn **ret)
{
	struct fwd_pool *p = &u->pool;
	struct fwd_conn *best = NULL;
	int err;

	for (struct fwd_conn *c = p->conns; c; c = c->next)
		if (conn_room(c) && (!best || c->nout < best->nout))
			best = c;
	if (best && (best->nout < NDC_FWD_TCP_PIPELINE || p->n >= NDC_FWD_TCP_CONNS)) {
		*ret = best;
		return 0;
	}
	if (p->n >= NDC_FWD_TCP_CONNS) {
		err = -ENOBUFS;
		goto full;
	}
	if (p->backoff_ms && ndc_now_ms() < p->retry_ms) {
		if (best) {
			*ret = best;
			return 0;
		}
		if (p->n) {
			err = -ENOBUFS;
			goto full;
		}
		return p->last_err ? p->last_err : -ECONNREFUSED;
	}
	err = conn_open(f, u, ret);
	if (err && best) {
		*ret = best;
		return 0;
	}
	if (err)
		ndc_debug("forwarder: upstream %s: TCP: %s", u->name, strerror(-err));
	return err;
full:
	UP_INC(u, tcp_queue_full);
	ndc_debug("forwarder: upstream %s: TCP: %zu bytes queued on each connection already",
		  u->name, (size_t)NDC_FWD_TCP_QUEUE_MAX);
	return err;
}

/* The sweep runs at due at the latest. */
static void sweep_by(struct ndc_forwarder *f, uint64_t due)
{
	if (!f->next_sweep || due < f->next_sweep)
		f->next_sweep = due;
}

/* Appends r's framed query to c and writes what c can take now. */
static int conn_queue(struct ndc_forwarder *f, struct fwd_conn *c, struct request *r)
{
	size_t qlen;
	int err;

	/* IDs are unique per connection: draw again on a clash. */
	while (conn_find(c, r->id)) {
		uint16_t id;

		if (getrandom(&id, sizeof(id), 0) != sizeof(id))
			return -EIO;
		r->id = id;
	}
	if (c->wcap - c->wlen < 2 + NDC_FWD_QUERY_MAX) {
		size_t cap = c->wcap ? c->wcap * 2 : 4096;
		uint8_t *nb;

		if (c->woff) {
			memmove(c->wbuf, c->wbuf + c->woff, c->wlen - c->woff);
			c->wlen -= c->woff;
			c->woff = 0;
		}
		if (c->wcap - c->wlen < 2 + NDC_FWD_QUERY_MAX) {
			nb = realloc(c->wbuf, cap);
			if (!nb)
				return -ENOMEM;
			c->wbuf = nb;
			c->wcap = cap;
		}
	}
	err = ndc_dns_write_query(r->id, r->qname, r->nlen, r->qtype, r->qclass, NDC_EDNS_UDP_MAX,
				  c->wbuf + c->wlen + 2, NDC_FWD_QUERY_MAX, &qlen);
	if (err)
		return err;
	ndc_put16(c->wbuf + c->wlen, (uint16_t)qlen); /* RFC 1035 4.2.2 framing */
	if (f->tap)
		f->tap(f->tap_arg, false, true, &up_of(r, r->up)->addr, c->wbuf + c->wlen + 2,
		       qlen);
	c->wlen += qlen + 2;
	conn_link(c, r);
	if (!c->quiet_since) {
		c->quiet_since = ndc_now_ms();
		sweep_by(f, c->quiet_since + f->timeout_ms);
	}
	/* Written from its own event: an error here must not close c under its caller. */
	return c->connected ? arm(f, c, true) : 0;
}

int ndc_fwd_tcp_start(struct ndc_forwarder *f, struct request *r)
{
	struct upstream *u = up_of(r, r->up);
	struct fwd_conn *c;
	int err;

	err = ndc_fwd_attempt_prepare(r);
	if (!err)
		err = conn_pick(f, u, &c);
	if (!err)
		err = conn_queue(f, c, r);
	if (err) {
		ndc_fwd_tcp_detach(r);
		return err;
	}
	r->st = ATT_TCP;
	ndc_fwd_timer_append(f, r);
	STAT_INC(f, queries);
	UP_INC(u, queries);
	UP_INC(u, tcp_queries);
	return 0;
}

/*
 * c is gone with err: its queries go to another connection once each, else fail their attempt.
 * A connection that never answered makes the pool back off.
 */
static void conn_dead(struct ndc_forwarder *f, struct fwd_conn *c, int err)
{
	struct upstream *u = c->u;
	uint64_t now = ndc_now_ms();
	struct request *list;

	if (!c->answered)
		pool_failed(u, err);
	conn_close(f, c, &list);
	while (list) {
		struct request *r = list;
		struct fwd_conn *nc;

		list = r->cnext;
		r->cnext = NULL;
		/* Past its deadline it times out below as it would have on c. */
		if (!r->resent && r->deadline > now && conn_pick(f, u, &nc) == 0) {
			r->resent = true;
			if (conn_queue(f, nc, r) == 0) {
				UP_INC(u, tcp_resent);
				continue;
			}
			ndc_fwd_tcp_detach(r);
		}
		f->ops->attempt_fail(f, r, err);
	}
}

static int conn_flush(struct ndc_forwarder *f, struct fwd_conn *c)
{
	while (c->woff < c->wlen) {
		ssize_t n = send(c->fd, c->wbuf + c->woff, c->wlen - c->woff, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR) {
				conn_kqueued(c);
				return arm(f, c, true);
			}
			return -errno;
		}
		c->woff += (size_t)n;
	}
	c->woff = c->wlen = 0;
	conn_kqueued(c);
	return arm(f, c, false);
}

/* One whole message on c: the answer of the query with its ID, if one is outstanding. */
static void conn_message(struct ndc_forwarder *f, struct fwd_conn *c, const uint8_t *msg,
			 size_t len)
{
	struct request *r;
	bool tc = false;
	int err;

	c->quiet_since = 0; /* whatever it is, the peer is alive and reading */
	if (len < NDC_DNS_HDR_LEN)
		return;
	r = conn_find(c, ndc_get16(msg));
	if (!r)
		return; /* its query timed out, or was never ours */
	c->answered = true;
	c->u->pool.fails = 0;
	c->u->pool.backoff_ms = 0;
	ndc_fwd_tcp_detach(r);
	ndc_fwd_up_alive(f, r);
	/*
	 * Our own connection and our outstanding ID: a wrong question, none (a FORMERR or NOTIMP
	 * of a server that could not read the query), or a message that does not parse is this
	 * query's answer, and a useless one. It fails this attempt now; the upstream answered.
	 */
	if (ndc_fwd_question_match(r, msg, len) == Q_NO) {
		ndc_fwd_bad_answer(f, r, -EBADMSG);
		return;
	}
	err = ndc_dns_parse_response(msg, len, r->lname, r->nlen, r->qtype, r->qclass, f->ans,
				     NDC_MSG_MAX, &tc);
	if (err) {
		ndc_fwd_bad_answer(f, r, err);
		return;
	}
	if (f->tap)
		f->tap(f->tap_arg, true, true, &up_of(r, r->up)->addr, msg, len);
	f->ops->accept_answer(f, r, f->ans);
}

static int conn_read(struct ndc_forwarder *f, struct fwd_conn *c)
{
	for (;;) {
		ssize_t n = recv(c->fd, c->rbuf + c->rlen, 2 + NDC_MSG_MAX - c->rlen, 0);
		size_t off = 0;

		if (n < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -errno;
		if (n == 0)
			return -ECONNRESET;
		c->rlen += (size_t)n;
		while (c->rlen - off >= 2) {
			size_t mlen = ndc_get16(c->rbuf + off);

			if (c->rlen - off < 2 + mlen)
				break;
			conn_message(f, c, c->rbuf + off + 2, mlen);
			off += 2 + mlen;
			if (c->fd < 0)
				return 0;
		}
		memmove(c->rbuf, c->rbuf + off, c->rlen - off);
		c->rlen -= off;
	}
}

void ndc_fwd_tcp_event(struct ndc_forwarder *f, struct fwd_conn *c, uint32_t events)
{
	int err = 0;

	if (c->fd < 0)
		return; /* closed earlier in this batch */
	if (!c->connected && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
		int soerr = 0;
		socklen_t sl = sizeof(soerr);

		if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
			soerr = errno;
		if (soerr) {
			conn_dead(f, c, -soerr);
			return;
		}
		c->connected = true;
	}
	if (events & EPOLLIN)
		err = conn_read(f, c);
	if (!err && c->fd >= 0 && c->connected && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
		err = conn_flush(f, c);
	if (!err && c->fd >= 0 && (events & (EPOLLERR | EPOLLHUP)) && !(events & EPOLLIN))
		err = -ECONNRESET;
	if (err && c->fd >= 0)
		conn_dead(f, c, err);
}

static void conn_free(struct fwd_conn *c)
{
	free(c->wbuf);
	free(c->rbuf);
	free(c);
}

void ndc_fwd_tcp_reap(struct ndc_forwarder *f)
{
	while (f->closed) {
		struct fwd_conn *c = f->closed;

		f->closed = c->next;
		conn_free(c);
	}
}

void ndc_fwd_tcp_close_all(struct upstream *u)
{
	while (u->pool.conns)
		conn_close(u->f, u->pool.conns, NULL);
}

/* c was sent a query timeout_ms ago and nothing came back since: closed as a dead one. */
static void conn_stalled(struct ndc_forwarder *f, struct fwd_conn *c, uint64_t now)
{
	struct upstream *u = c->u;

	UP_INC(u, tcp_stalled);
	ndc_info("forwarder: upstream %s: a TCP connection with %u queries outstanding answered "
		 "nothing for %llu ms (%zu bytes queued); closed, its queries sent again",
		 u->name, c->nout, (unsigned long long)(now - c->quiet_since),
		 c->wlen - c->woff + c->kqueued);
	conn_dead(f, c, -ETIMEDOUT);
}

uint64_t ndc_fwd_tcp_sweep(struct ndc_forwarder *f, uint64_t now)
{
	uint32_t tick = f->tcp_idle_ms < 1000 ? f->tcp_idle_ms : 1000;
	uint64_t next = 0;

	ndc_fwd_tcp_reap(f);
	if (!f->next_sweep || now < f->next_sweep)
		return f->next_sweep;
	f->next_sweep = 0; /* what the loop queues or opens lowers it again */
	for (size_t i = 0; i < f->cur->routes->n_servers; i++) {
		struct upstream *u = f->cur->up[i];
		struct fwd_conn *c = u->pool.conns, *cnext;

		/* A stalled connection's queries may open a new one: at the head, not visited. */
		for (; c; c = cnext) {
			cnext = c->next;
			if (c->quiet_since && now - c->quiet_since >= f->timeout_ms)
				conn_stalled(f, c, now);
			else if (!c->nout && !c->quiet_since &&
				 now - c->idle_since >= f->tcp_idle_ms)
				conn_close(f, c, NULL);
		}
		for (c = u->pool.conns; c; c = c->next)
			if (c->quiet_since && (!next || c->quiet_since + f->timeout_ms < next))
				next = c->quiet_since + f->timeout_ms;
		if (u->pool.n && (!next || now + tick < next))
			next = now + tick;
	}
	ndc_fwd_tcp_reap(f);
	/* Connections of upstreams no longer configured close with their last request. */
	if (next)
		sweep_by(f, next);
	return f->next_sweep;
}
