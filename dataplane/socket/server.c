// SPDX-License-Identifier: MIT
/*
 * Socket server. Threading model: each worker thread owns an epoll instance, one UDP socket and
 * one TCP listener per listen address (all SO_REUSEPORT, so the kernel spreads datagrams and
 * connections by flow hash), its TCP connections and a completion queue fed by other threads.
 * Nothing on the query path is shared between workers except the relaxed stats counters, which
 * are per worker too. This file has setup and teardown, the public API, the worker loop and the
 * UDP path; server_tcp.c has everything TCP. Detained queries reach back to their worker through
 * a small refcounted hub (server_hub.c), not through the server itself.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <ndc/ip.h>
#include <ndc/log.h>

#include "socket/socket.h"
#include "internal.h"

#define NDC_TCP_IDLE_DEFAULT_MS 10000 /* RFC 7766 6.2.3: "on the order of seconds" */
#define NDC_TCP_MAX_CONNS_DEFAULT 1024
#define NDC_UDP_SOCKBUF (4 << 20)
#define NDC_UDP_BATCHES 8 /* recvmmsg rounds per wakeup while batches come back full */
#define NDC_EVENTS 64
#define NDC_BIND_TRIES 8 /* fresh ephemeral ports to try when TCP cannot take UDP's port */
#define NDC_MAX_WORKERS 1024

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Returns true when the server is stopping. */
static bool event_ready(struct worker *w, uint64_t now)
{
	uint64_t v;

	if (read(w->ev.fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		return false;
	if (__atomic_load_n(&w->srv->stopping, __ATOMIC_ACQUIRE))
		return true;
	ndc_srv_tcp_deliver(w, now);
	return false;
}

/* ---- UDP ---- */

static void udp_ready(struct worker *w, struct sock *sk)
{
	struct ndc_socket *s = w->srv;

	for (int round = 0; round < NDC_UDP_BATCHES; round++) {
		unsigned n_tx = 0, n_drop = 0, n_pending = 0, sent = 0;
		int n;

		for (int i = 0; i < NDC_SOCKET_BATCH; i++)
			w->rx[i].msg_hdr.msg_namelen = sizeof(w->peer[i]);
		n = recvmmsg(sk->fd, w->rx, NDC_SOCKET_BATCH, MSG_DONTWAIT, NULL);
		if (n <= 0)
			return;
		for (int i = 0; i < n; i++) {
			struct msghdr *h = &w->rx[i].msg_hdr;
			struct ndc_socket_req req = {
			    .w = w, .fd = sk->fd, .peer_len = h->msg_namelen, .peer = &w->peer[i]};
			size_t out_len = 0;
			enum ndc_verdict v;

			if (h->msg_flags & MSG_TRUNC) {
				n_drop++;
				continue;
			}
			v = s->handler(s->ctx, &req, w->rx_buf[i], w->rx[i].msg_len, w->tx_buf[i],
				       NDC_UDP_SLOT, &out_len);
			if (v == NDC_PENDING) {
				n_pending++;
				continue;
			}
			if (v != NDC_SEND || !out_len || out_len > NDC_UDP_SLOT) {
				n_drop++;
				continue;
			}
			w->tx_iov[n_tx].iov_base = w->tx_buf[i];
			w->tx_iov[n_tx].iov_len = out_len;
			w->tx[n_tx].msg_hdr.msg_name = &w->peer[i];
			w->tx[n_tx].msg_hdr.msg_namelen = h->msg_namelen;
			n_tx++;
		}
		/* sendmmsg stops at the first failing message (say, a client port of 0): skip it.
		 */
		while (sent < n_tx) {
			int r = sendmmsg(sk->fd, w->tx + sent, n_tx - sent, MSG_DONTWAIT);

			if (r <= 0) {
				if (r < 0 && errno == EINTR)
					continue;
				n_drop++;
				sent++;
				continue;
			}
			stat_add(&w->st, replies, (unsigned)r);
			sent += (unsigned)r;
		}
		stat_add(&w->st, udp_queries, (unsigned)n);
		if (n_drop)
			stat_add(&w->st, drops, n_drop);
		if (n_pending)
			stat_add(&w->st, pending, n_pending);
		if (n < NDC_SOCKET_BATCH)
			return;
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct epoll_event evs[NDC_EVENTS];
	int timeout = -1;
	bool stop = false;

	while (!stop) {
		int n = epoll_wait(w->epfd, evs, NDC_EVENTS, timeout);
		uint64_t now = now_ms();

		for (int i = 0; i < n; i++) {
			struct sock *sk = evs[i].data.ptr;

			switch (sk->kind) {
			case SK_EVENT:
				stop |= event_ready(w, now);
				break;
			case SK_UDP:
				udp_ready(w, sk);
				break;
			case SK_LISTEN:
				ndc_srv_tcp_accept(w, sk, now);
				break;
			case SK_CONN:
				ndc_srv_tcp_event(w, sk, evs[i].events, now);
				break;
			}
		}
		timeout = ndc_srv_tcp_sweep(w, now);
		ndc_srv_tcp_reap(w);
	}
	return NULL;
}

/* ---- setup ---- */

static socklen_t make_sockaddr(const struct ndc_ip *ip, uint16_t port, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (ip->family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;

		sin->sin_family = AF_INET;
		sin->sin_port = htons(port);
		memcpy(&sin->sin_addr, ip->addr, 4);
		return sizeof(*sin);
	}
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

	sin6->sin6_family = AF_INET6;
	sin6->sin6_port = htons(port);
	memcpy(&sin6->sin6_addr, ip->addr, 16);
	return sizeof(*sin6);
}

/* Best effort: FORCE passes net.core.rmem_max/wmem_max with CAP_NET_ADMIN. */
static void grow_buffers(int fd)
{
	int size = NDC_UDP_SOCKBUF;

	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof(size)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
}

/* Returns the fd or -errno, with *ret_step naming the call that failed. */
static int open_socket(const struct ndc_ip *ip, uint16_t port, int type, const char **ret_step)
{
	static const int one = 1;
	struct sockaddr_storage ss;
	socklen_t len = make_sockaddr(ip, port, &ss);
	int fd, err;

	*ret_step = "socket";
	fd = socket(ip->family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	*ret_step = "setsockopt";
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0)
		goto fail;
	/* Without V6ONLY a v6 socket on :: would also take v4; keep each family to its socket. */
	if (ip->family == AF_INET6 &&
	    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) < 0)
		goto fail;
	/* TCP keeps kernel autotuning (a fixed SO_RCVBUF turns it off); UDP gets room for bursts.
	 */
	if (type == SOCK_DGRAM)
		grow_buffers(fd);
	else if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)
		goto fail;
	*ret_step = "bind";
	if (bind(fd, (struct sockaddr *)&ss, len) < 0)
		goto fail;
	*ret_step = "listen";
	if (type == SOCK_STREAM && listen(fd, SOMAXCONN) < 0)
		goto fail;
	return fd;

fail:
	err = -errno;
	close(fd);
	return err;
}

static int bound_port(int fd, uint16_t *ret_port)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		return -errno;
	if (ss.ss_family == AF_INET)
		*ret_port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	else
		*ret_port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return 0;
}

static void close_sockets(struct ndc_socket *s)
{
	for (unsigned i = 0; i < s->n_workers; i++) {
		struct worker *w = s->workers[i];

		for (size_t a = 0; a < s->n_addrs; a++) {
			if (w->udp[a].fd >= 0)
				close(w->udp[a].fd);
			if (w->lis[a].fd >= 0)
				close(w->lis[a].fd);
			w->udp[a].fd = w->lis[a].fd = -1;
		}
	}
}

/* Whether fd is a socket of type bound to ip:port. */
static bool sock_is(int fd, const struct ndc_ip *ip, uint16_t port, int type)
{
	struct sockaddr_storage ss, want;
	socklen_t len = sizeof(ss), wl = make_sockaddr(ip, port, &want);
	int t = 0;
	socklen_t tl = sizeof(t);

	if (fd < 0 || getsockopt(fd, SOL_SOCKET, SO_TYPE, &t, &tl) < 0 || t != type ||
	    getsockname(fd, (struct sockaddr *)&ss, &len) < 0 || len != wl)
		return false;
	if (ip->family == AF_INET) {
		const struct sockaddr_in *a = (const void *)&ss, *b = (const void *)&want;

		return a->sin_family == AF_INET && a->sin_port == b->sin_port &&
		       a->sin_addr.s_addr == b->sin_addr.s_addr;
	}
	const struct sockaddr_in6 *a = (const void *)&ss, *b = (const void *)&want;

	return a->sin6_family == AF_INET6 && a->sin6_port == b->sin6_port &&
	       memcmp(&a->sin6_addr, &b->sin6_addr, 16) == 0;
}

/* An inherited socket for ip:port of type, taken out of the pool; -1 if none. */
static int take_inherited(struct ndc_socket *s, const struct ndc_ip *ip, uint16_t port, int type)
{
	for (size_t i = 0; port && i < s->n_inherit; i++) {
		int fd = s->inherit[i];

		if (sock_is(fd, ip, port, type)) {
			s->inherit[i] = -1;
			return fd;
		}
	}
	return -1;
}

static size_t count_inherited(const struct ndc_socket *s, const struct ndc_ip *ip, uint16_t port,
			      int type)
{
	size_t n = 0;

	for (size_t i = 0; port && i < s->n_inherit; i++)
		n += sock_is(s->inherit[i], ip, port, type);
	return n;
}

static int open_or_inherit(struct ndc_socket *s, const struct ndc_ip *ip, uint16_t port, int type,
			   const char **ret_step)
{
	int fd = take_inherited(s, ip, port, type);

	if (fd >= 0) {
		s->n_inherited++;
		return fd;
	}
	return open_socket(ip, port, type, ret_step);
}

/*
 * Every worker binds its own sockets on the same port. With port 0 the first UDP bind picks it;
 * when TCP (or another address) cannot have that port, everything starts over on a new one.
 */
static int bind_all(struct ndc_socket *s, uint16_t want)
{
	char addr[INET6_ADDRSTRLEN] = "?";
	const struct ndc_ip *ip = NULL;
	const char *step = NULL;
	int type = SOCK_DGRAM;
	uint16_t port = want;
	int fd, err = 0;

	for (int attempt = 0; attempt < NDC_BIND_TRIES; attempt++) {
		port = want;
		for (unsigned i = 0; i < s->n_workers; i++) {
			struct worker *w = s->workers[i];

			for (size_t a = 0; a < s->n_addrs; a++) {
				ip = &s->addrs[a];
				type = SOCK_DGRAM;
				fd = open_or_inherit(s, ip, port, type, &step);
				if (fd < 0)
					goto next;
				w->udp[a].fd = fd;
				step = "getsockname";
				if (!port && (fd = bound_port(fd, &port)) < 0)
					goto next;
				type = SOCK_STREAM;
				fd = open_or_inherit(s, ip, port, type, &step);
				if (fd < 0)
					goto next;
				w->lis[a].fd = fd;
			}
		}
		s->port = port;
		return 0;
	next:
		err = fd;
		close_sockets(s);
		if (err != -EADDRINUSE || want)
			break;
	}
	inet_ntop(ip->family, ip->addr, addr, sizeof(addr));
	ndc_err("server: %s %s port %u (%s): %s", step, addr, port,
		type == SOCK_DGRAM ? "udp" : "tcp", strerror(-err));
	return err;
}

static void worker_free(struct worker *w, size_t n_addrs)
{
	if (!w)
		return;
	ndc_srv_tcp_fini(w);
	for (size_t a = 0; w->udp && a < n_addrs; a++) {
		if (w->udp[a].fd >= 0)
			close(w->udp[a].fd);
		if (w->lis[a].fd >= 0)
			close(w->lis[a].fd);
	}
	if (w->ev.fd >= 0)
		close(w->ev.fd);
	if (w->epfd >= 0)
		close(w->epfd);
	free(w->udp);
	free(w->lis);
	free(w);
}

static int worker_new(struct ndc_socket *s, unsigned id, struct worker **ret)
{
	struct epoll_event ev = {.events = EPOLLIN};
	struct worker *w;
	int err;

	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->srv = s;
	w->id = id;
	w->epfd = w->ev.fd = -1;
	w->ev.kind = SK_EVENT;
	err = ndc_srv_tcp_init(w);
	if (err < 0)
		goto fail;
	err = -ENOMEM;
	w->udp = malloc(s->n_addrs * sizeof(*w->udp));
	w->lis = malloc(s->n_addrs * sizeof(*w->lis));
	if (!w->udp || !w->lis) {
		free(w->udp);
		free(w->lis);
		w->udp = w->lis = NULL;
		goto fail;
	}
	for (size_t a = 0; a < s->n_addrs; a++) {
		w->udp[a] = (struct sock){.kind = SK_UDP, .fd = -1};
		w->lis[a] = (struct sock){.kind = SK_LISTEN, .fd = -1};
	}
	for (int i = 0; i < NDC_SOCKET_BATCH; i++) {
		w->rx_iov[i] = (struct iovec){.iov_base = w->rx_buf[i], .iov_len = NDC_UDP_SLOT};
		w->rx[i].msg_hdr.msg_name = &w->peer[i];
		w->rx[i].msg_hdr.msg_iov = &w->rx_iov[i];
		w->rx[i].msg_hdr.msg_iovlen = 1;
		w->tx[i].msg_hdr.msg_iov = &w->tx_iov[i];
		w->tx[i].msg_hdr.msg_iovlen = 1;
	}
	w->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (w->epfd < 0)
		goto fail_errno;
	w->ev.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (w->ev.fd < 0)
		goto fail_errno;
	ev.data.ptr = &w->ev;
	if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->ev.fd, &ev) < 0)
		goto fail_errno;
	*ret = w;
	return 0;

fail_errno:
	err = -errno;
fail:
	worker_free(w, s->n_addrs);
	return err;
}

/* EEXIST is a socket watched by an earlier call that failed part of the way. */
static int watch(struct worker *w, struct sock *sk)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = sk};

	if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, sk->fd, &ev) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* Any thread: epoll_ctl on a worker's instance while it waits in it is safe. */
static int watch_sockets(struct ndc_socket *s)
{
	int err = 0;

	for (unsigned i = 0; i < s->n_workers && !err; i++)
		for (size_t a = 0; a < s->n_addrs && !err; a++) {
			err = watch(s->workers[i], &s->workers[i]->udp[a]);
			if (!err)
				err = watch(s->workers[i], &s->workers[i]->lis[a]);
		}
	return err;
}

static void server_free(struct ndc_socket *s)
{
	/* From here on completions drop their answer instead of touching workers or sockets. */
	if (s->hub)
		ndc_srv_hub_kill(s->hub);
	__atomic_store_n(&s->stopping, true, __ATOMIC_RELEASE);
	for (unsigned i = 0; s->workers && i < s->n_workers; i++) {
		struct worker *w = s->workers[i];
		uint64_t one = 1;

		if (w && w->started && write(w->ev.fd, &one, sizeof(one)) < 0)
			ndc_err("server: waking worker %u: %s", i, strerror(errno));
	}
	for (unsigned i = 0; s->workers && i < s->n_workers; i++) {
		if (s->workers[i] && s->workers[i]->started)
			pthread_join(s->workers[i]->thread, NULL);
		worker_free(s->workers[i], s->n_addrs);
	}
	free(s->workers);
	free(s->addrs);
	for (size_t i = 0; i < s->n_inherit; i++)
		if (s->inherit[i] >= 0)
			close(s->inherit[i]);
	free(s->inherit);
	if (s->hub)
		ndc_srv_hub_unref(s->hub);
	free(s);
}

static int start_workers(struct ndc_socket *s)
{
	sigset_t all, old;
	int err = 0;

	/* Signals belong to the thread that waits for them (main's sigwait), never to a worker. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (unsigned i = 0; i < s->n_workers; i++) {
		struct worker *w = s->workers[i];
		char name[16];

		err = -pthread_create(&w->thread, NULL, worker_main, w);
		if (err) {
			ndc_err("server: starting worker %u: %s", i, strerror(-err));
			break;
		}
		w->started = true;
		snprintf(name, sizeof(name), "ndc-srv-%u", i & 0xffff);
		pthread_setname_np(w->thread, name);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return err;
}

int ndc_socket_start(const struct ndc_socket_opts *opts, ndc_socket_handler handler, void *ctx,
		     struct ndc_socket **ret)
{
	struct ndc_socket *s;
	long cpus;
	int err;

	if (!opts || !handler || !ret || !opts->n_addrs || !opts->addrs)
		return -EINVAL;
	for (size_t a = 0; a < opts->n_addrs; a++) {
		if (opts->addrs[a].family != AF_INET && opts->addrs[a].family != AF_INET6) {
			ndc_err("server: listen address %zu: unknown family %u", a,
				opts->addrs[a].family);
			return -EAFNOSUPPORT;
		}
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->handler = handler;
	s->ctx = ctx;
	s->n_addrs = opts->n_addrs;
	s->idle_ms = opts->tcp_idle_ms ? opts->tcp_idle_ms : NDC_TCP_IDLE_DEFAULT_MS;
	s->max_conns = opts->tcp_max_conns ? opts->tcp_max_conns : NDC_TCP_MAX_CONNS_DEFAULT;
	cpus = sysconf(_SC_NPROCESSORS_ONLN);
	s->n_workers = opts->workers ? opts->workers : cpus > 0 ? (unsigned)cpus : 1;
	if (opts->n_inherit) {
		s->inherit = malloc(opts->n_inherit * sizeof(*s->inherit));
		if (!s->inherit) {
			for (size_t i = 0; i < opts->n_inherit; i++)
				close(opts->inherit[i]);
			free(s);
			return -ENOMEM;
		}
		memcpy(s->inherit, opts->inherit, opts->n_inherit * sizeof(*s->inherit));
		s->n_inherit = opts->n_inherit;
		s->addrs = (struct ndc_ip *)opts->addrs; /* for counting only; copied below */
		/* A worker per inherited socket at least: every one of them must be read. */
		for (size_t a = 0; a < opts->n_addrs; a++)
			for (int t = 0; t < 2; t++) {
				size_t k = count_inherited(s, &opts->addrs[a], opts->port,
							   t ? SOCK_STREAM : SOCK_DGRAM);

				if (k > s->n_workers)
					s->n_workers = (unsigned)k;
			}
		s->addrs = NULL;
	}
	if (s->n_workers > NDC_MAX_WORKERS)
		s->n_workers = NDC_MAX_WORKERS;

	err = -ENOMEM;
	s->addrs = malloc(opts->n_addrs * sizeof(*s->addrs));
	s->workers = calloc(s->n_workers, sizeof(*s->workers));
	if (!s->addrs || !s->workers || ndc_srv_hub_new(s) < 0)
		goto fail;
	memcpy(s->addrs, opts->addrs, opts->n_addrs * sizeof(*s->addrs));
	for (unsigned i = 0; i < s->n_workers; i++) {
		err = worker_new(s, i, &s->workers[i]);
		if (err < 0) {
			ndc_err("server: worker %u: %s", i, strerror(-err));
			goto fail;
		}
	}
	err = bind_all(s, opts->port);
	if (err < 0)
		goto fail;
	if (s->n_inherit) {
		size_t unused = 0;

		for (size_t i = 0; i < s->n_inherit; i++)
			if (s->inherit[i] >= 0) {
				close(s->inherit[i]);
				s->inherit[i] = -1;
				unused++;
			}
		ndc_info("server: serving from %zu sockets handed over by the previous agent%s",
			 s->n_inherited,
			 unused ? " (some of its addresses are no longer configured)" : "");
	}
	if (!opts->hold) {
		err = watch_sockets(s);
		if (err < 0) {
			ndc_err("server: epoll: %s", strerror(-err));
			goto fail;
		}
		s->reading = true;
	}
	err = start_workers(s);
	if (err < 0)
		goto fail;
	*ret = s;
	return 0;

fail:
	server_free(s);
	return err;
}

int ndc_socket_read_start(struct ndc_socket *s)
{
	int err;

	if (__atomic_exchange_n(&s->reading, true, __ATOMIC_ACQ_REL))
		return 0;
	err = watch_sockets(s);
	if (err < 0)
		__atomic_store_n(&s->reading, false, __ATOMIC_RELEASE);
	return err;
}

size_t ndc_socket_fds(const struct ndc_socket *s, int *out, size_t cap)
{
	size_t n = 0;

	for (unsigned i = 0; i < s->n_workers; i++)
		for (size_t a = 0; a < s->n_addrs; a++) {
			if (n < cap && s->workers[i]->udp[a].fd >= 0)
				out[n++] = s->workers[i]->udp[a].fd;
			if (n < cap && s->workers[i]->lis[a].fd >= 0)
				out[n++] = s->workers[i]->lis[a].fd;
		}
	return n;
}

void ndc_socket_quiesce(struct ndc_socket *s)
{
	__atomic_store_n(&s->stopping, true, __ATOMIC_RELEASE);
	for (unsigned i = 0; i < s->n_workers; i++) {
		struct worker *w = s->workers[i];
		uint64_t one = 1;

		if (w && w->started && write(w->ev.fd, &one, sizeof(one)) < 0)
			ndc_err("server: waking worker %u: %s", i, strerror(errno));
	}
	for (unsigned i = 0; i < s->n_workers; i++) {
		struct worker *w = s->workers[i];

		if (w && w->started) {
			pthread_join(w->thread, NULL);
			w->started = false;
		}
	}
}

size_t ndc_socket_outstanding(struct ndc_socket *s)
{
	return ndc_srv_hub_outstanding(s->hub);
}

uint16_t ndc_socket_port(const struct ndc_socket *s)
{
	return s->port;
}

void ndc_socket_stop(struct ndc_socket *s)
{
	if (s)
		server_free(s);
}

bool ndc_socket_req_is_tcp(const struct ndc_socket_req *req)
{
	return req->c != NULL;
}

int ndc_socket_req_peer(const struct ndc_socket_req *req, struct sockaddr_storage *ret)
{
	socklen_t len = sizeof(*ret);

	memset(ret, 0, sizeof(*ret));
	if (req->peer) {
		memcpy(ret, req->peer, req->peer_len < len ? req->peer_len : len);
		return 0;
	}
	return getpeername(req->fd, (struct sockaddr *)ret, &len) < 0 ? -errno : 0;
}

struct ndc_pending *ndc_socket_detain(struct ndc_socket_req *req)
{
	struct worker *w = req->w;
	struct ndc_pending *p = malloc(sizeof(*p));

	if (!p)
		return NULL;
	p->next = NULL;
	p->hub = w->srv->hub;
	ndc_srv_hub_ref(p->hub);
	p->len = 0;
	p->tcp = req->c != NULL;
	if (p->tcp) {
		ndc_srv_tcp_detain(req, p);
	} else {
		p->fd = req->fd;
		p->peer_len = req->peer_len;
		memcpy(&p->peer, req->peer, req->peer_len);
	}
	return p;
}

void ndc_socket_complete(struct ndc_pending *p, const uint8_t *msg, size_t len)
{
	struct hub *h;
	struct ndc_socket *s;

	if (!p)
		return;
	h = p->hub;
	s = ndc_srv_hub_enter(h);
	if (!s)
		goto drop;
	if (!p->tcp) {
		/* sendto on one socket from several threads is safe; the worker's socket is bound
		 * to the address the query came to, so the answer leaves from there. */
		if (len && sendto(p->fd, msg, len, MSG_DONTWAIT, (struct sockaddr *)&p->peer,
				  p->peer_len) == (ssize_t)len)
			stat_add(&s->st, replies, 1);
		else
			stat_add(&s->st, drops, 1);
		goto drop;
	}
	ndc_srv_tcp_complete(s, p, msg, len);
	ndc_srv_hub_leave(h);
	return;

drop:
	ndc_srv_hub_leave(h);
	ndc_srv_pending_free(p);
}

void ndc_socket_stats(struct ndc_socket *s, struct ndc_socket_stats *ret)
{
	struct stats sum = {0};

	for (unsigned i = 0; i <= s->n_workers; i++) {
		struct stats *st = i < s->n_workers ? &s->workers[i]->st : &s->st;

		sum.udp_queries += __atomic_load_n(&st->udp_queries, __ATOMIC_RELAXED);
		sum.tcp_queries += __atomic_load_n(&st->tcp_queries, __ATOMIC_RELAXED);
		sum.tcp_conns += __atomic_load_n(&st->tcp_conns, __ATOMIC_RELAXED);
		sum.replies += __atomic_load_n(&st->replies, __ATOMIC_RELAXED);
		sum.drops += __atomic_load_n(&st->drops, __ATOMIC_RELAXED);
		sum.pending += __atomic_load_n(&st->pending, __ATOMIC_RELAXED);
	}
	*ret = (struct ndc_socket_stats){
	    .udp_queries = sum.udp_queries,
	    .tcp_queries = sum.tcp_queries,
	    .tcp_conns = sum.tcp_conns,
	    .replies = sum.replies,
	    .drops = sum.drops,
	    .pending = sum.pending,
	};
}
