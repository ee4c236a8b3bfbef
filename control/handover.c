// SPDX-License-Identifier: MIT
/* The handover protocol between an agent and its successor: see handover.h. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <ndc/log.h>

#include "handover.h"

#define MSG_HELLO "HELLO 1"
#define MSG_TAKEOVER "TAKEOVER"
#define MSG_OK "OK"
#define MSG_FDS "FDS"
#define FDS_PER_MSG 64 /* well under SCM_MAX_FD (253) */
#define PEERS_MAX 4
#define RETRY_MS 200
#define HELLO_MS 3000	 /* default hello_timeout_ms: a successor says HELLO right at connect */
#define REFUSED_LOG_S 10 /* at most one line per this many seconds about refused peers */

struct peer {
	int fd;
	bool took;
	bool said;	  /* HELLO received: no deadline any more */
	int64_t deadline; /* ms, CLOCK_MONOTONIC: dropped if it has not said HELLO by then */
	pid_t pid;	  /* SO_PEERCRED, for the logs */
	uid_t uid;
};

struct ndc_handover {
	char name[108];
	struct ndc_handover_ops ops;
	int lfd;
	int evfd;
	pthread_t thread;
	struct peer peers[PEERS_MAX];
	atomic_bool taken;
	atomic_int joined; /* peers connected that said HELLO */
	bool closed;	   /* ndc_handover_close: the thread joined, every descriptor closed */
	_Atomic uint64_t refused[NDC_HANDOVER_REFUSED_MAX];
	/* the refusals' log, on the thread only */
	int64_t refused_logged; /* ms of the last line */
	unsigned refused_quiet; /* refused since then without a line */
};

struct ndc_handover_peer {
	int fd;
	/* the watch (ndc_handover_peer_watch): its thread, woken by evfd to stop */
	bool watched;
	int evfd;
	pthread_t thread;
	void (*gone)(void *arg);
	void *arg;
};

void ndc_handover_name(const char *addr, unsigned port, char *out, size_t cap)
{
	snprintf(out, cap, "ndcache/%s/%u", addr, port);
}

static const char *const refusal_names[NDC_HANDOVER_REFUSED_MAX] = {
    [NDC_HANDOVER_REFUSED_UID] = "uid",
    [NDC_HANDOVER_REFUSED_TIMEOUT] = "timeout",
    [NDC_HANDOVER_REFUSED_FULL] = "full",
    [NDC_HANDOVER_REFUSED_PROTOCOL] = "protocol",
};

const char *ndc_handover_refusal_name(enum ndc_handover_refusal r)
{
	return (unsigned)r < NDC_HANDOVER_REFUSED_MAX ? refusal_names[r] : "unknown";
}

static int64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* The credentials the kernel recorded for the other end (at its connect or listen). */
static int peer_cred(int fd, struct ucred *ret)
{
	socklen_t len = sizeof(*ret);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, ret, &len) < 0)
		return -errno;
	return len == sizeof(*ret) ? 0 : -EPROTO;
}

static socklen_t make_addr(const char *name, struct sockaddr_un *sa)
{
	size_t n = strnlen(name, sizeof(sa->sun_path) - 1);

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	/* abstract: sun_path[0] is NUL, the name follows without a terminator */
	memcpy(sa->sun_path + 1, name, n);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

static int wait_fd(int fd, short events, int timeout_ms)
{
	struct pollfd p = {.fd = fd, .events = events};
	int r;

	do
		r = poll(&p, 1, timeout_ms);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	return r == 0 ? -ETIMEDOUT : 0;
}

/* One message of up to cap bytes (NUL-terminated), with any descriptors it carries. */
static ssize_t recv_msg(int fd, char *buf, size_t cap, int *fds, size_t fd_cap, size_t *ret_nfds)
{
	char ctl[CMSG_SPACE(sizeof(int) * FDS_PER_MSG)];
	struct iovec iov = {.iov_base = buf, .iov_len = cap - 1};
	struct msghdr m = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
	struct cmsghdr *c;
	ssize_t n;

	*ret_nfds = 0;
	do
		n = recvmsg(fd, &m, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	for (c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		size_t k;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int d;

			memcpy(&d, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (*ret_nfds < fd_cap)
				fds[(*ret_nfds)++] = d;
			else
				close(d);
		}
	}
	if (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
		for (size_t i = 0; i < *ret_nfds; i++)
			close(fds[i]);
		*ret_nfds = 0;
		return -EMSGSIZE;
	}
	return n;
}

static int send_msg(int fd, const char *text, const int *fds, size_t nfds)
{
	char ctl[CMSG_SPACE(sizeof(int) * FDS_PER_MSG)];
	struct iovec iov = {.iov_base = (void *)text, .iov_len = strlen(text)};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	ssize_t n;

	if (nfds > FDS_PER_MSG)
		return -EINVAL;
	if (nfds) {
		struct cmsghdr *c;

		memset(ctl, 0, sizeof(ctl));
		m.msg_control = ctl;
		m.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	do
		n = sendmsg(fd, &m, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : 0;
}

/* ---------------------------------------------------------------------------------------------
 * The successor.
 */

int ndc_handover_join(const char *name, int timeout_ms, struct ndc_handover_peer **ret,
		      int **ret_fds, size_t *ret_n)
{
	struct sockaddr_un sa;
	socklen_t sl = make_addr(name, &sa);
	size_t n = 0, total = 0;
	int *fds = NULL, fd, r;
	char buf[64];

	*ret = NULL;
	*ret_fds = NULL;
	*ret_n = 0;
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sl) < 0) {
		r = errno == ECONNREFUSED || errno == ENOENT ? -ENOENT : -errno;
		close(fd);
		return r;
	}
	/*
	 * Whoever holds the name is an agent only if it runs as we do: another process must not
	 * hand us sockets to serve from, nor hear that we took over (then it would be the one to
	 * leave the fast path to us while the real agent keeps its own).
	 */
	{
		struct ucred uc;

		r = peer_cred(fd, &uc);
		if (r == 0 && uc.uid != geteuid()) {
			ndc_warn(
			    "handover: %s is held by pid %d of uid %u, not this agent's uid %u; "
			    "not joining it",
			    name, (int)uc.pid, (unsigned)uc.uid, (unsigned)geteuid());
			r = -EPERM;
		}
		if (r < 0) {
			close(fd);
			return r;
		}
	}
	fds = calloc(NDC_HANDOVER_MAX_FDS, sizeof(int));
	if (!fds) {
		r = -ENOMEM;
		goto fail;
	}
	r = send_msg(fd, MSG_HELLO, NULL, 0);
	/* FDS <total> <more>: chunks of descriptors until more is 0 */
	for (bool more = true; r == 0 && more;) {
		unsigned t = 0, m = 0;
		size_t got = 0;
		ssize_t len;

		r = wait_fd(fd, POLLIN, timeout_ms);
		if (r < 0)
			break;
		len = recv_msg(fd, buf, sizeof(buf), fds + n, NDC_HANDOVER_MAX_FDS - n, &got);
		if (len < 0) {
			r = (int)len;
			break;
		}
		n += got;
		if (len == 0 || sscanf(buf, MSG_FDS " %u %u", &t, &m) != 2 ||
		    t > NDC_HANDOVER_MAX_FDS) {
			r = -EPROTO;
			break;
		}
		total = t;
		more = m != 0;
	}
	if (r == 0 && n != total)
		r = -EPROTO;
	if (r < 0)
		goto fail;
	*ret = calloc(1, sizeof(**ret));
	if (!*ret) {
		r = -ENOMEM;
		goto fail;
	}
	(*ret)->fd = fd;
	*ret_fds = fds;
	*ret_n = n;
	return 0;
fail:
	for (size_t i = 0; i < n; i++)
		close(fds[i]);
	free(fds);
	close(fd);
	return r;
}

int ndc_handover_takeover(struct ndc_handover_peer *p, int timeout_ms)
{
	char buf[16];
	size_t got;
	ssize_t n;
	int r;

	r = send_msg(p->fd, MSG_TAKEOVER, NULL, 0);
	if (r == 0)
		r = wait_fd(p->fd, POLLIN, timeout_ms);
	if (r < 0)
		return r;
	n = recv_msg(p->fd, buf, sizeof(buf), NULL, 0, &got);
	if (n < 0)
		return (int)n;
	return strcmp(buf, MSG_OK) == 0 ? 0 : -EPROTO;
}

/* Only the hang-up is asked for: the OK of a takeover in progress is its reader's. */
static void *watch_thread(void *arg)
{
	struct ndc_handover_peer *p = arg;

	for (;;) {
		struct pollfd pfd[2] = {{.fd = p->evfd, .events = POLLIN},
					{.fd = p->fd, .events = POLLRDHUP}};
		int r = poll(pfd, 2, -1);

		if (r < 0 && errno != EINTR) {
			/* Blind from here on: told as gone, the caller reads rather than never. */
			ndc_err("handover: watching the predecessor: poll: %s", strerror(errno));
			p->gone(p->arg);
			return NULL;
		}
		if (r <= 0)
			continue;
		if (pfd[0].revents)
			return NULL;
		if (pfd[1].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) {
			p->gone(p->arg);
			return NULL;
		}
	}
}

int ndc_handover_peer_watch(struct ndc_handover_peer *p, void (*gone)(void *arg), void *arg)
{
	sigset_t all, old;
	int r;

	if (!p || !gone || p->watched)
		return -EINVAL;
	p->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (p->evfd < 0)
		return -errno;
	p->gone = gone;
	p->arg = arg;
	/* Signals belong to the thread that waits for them, never to this one. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	r = -pthread_create(&p->thread, NULL, watch_thread, p);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r < 0) {
		close(p->evfd);
		return r;
	}
	p->watched = true;
	return 0;
}

void ndc_handover_peer_unwatch(struct ndc_handover_peer *p)
{
	uint64_t one = 1;

	if (!p || !p->watched)
		return;
	if (write(p->evfd, &one, sizeof(one)) < 0)
		ndc_err("handover: cannot stop watching the predecessor: %s", strerror(errno));
	pthread_join(p->thread, NULL);
	close(p->evfd);
	p->watched = false;
}

void ndc_handover_peer_free(struct ndc_handover_peer *p)
{
	if (!p)
		return;
	ndc_handover_peer_unwatch(p);
	close(p->fd);
	free(p);
}

/* ---------------------------------------------------------------------------------------------
 * The running agent.
 */

static int try_listen(struct ndc_handover *h)
{
	struct sockaddr_un sa;
	socklen_t sl = make_addr(h->name, &sa);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sl) < 0 || listen(fd, PEERS_MAX) < 0) {
		int r = -errno;

		close(fd);
		return r;
	}
	h->lfd = fd;
	return 0;
}

static void send_fds(struct ndc_handover *h, int fd)
{
	int *fds = calloc(NDC_HANDOVER_MAX_FDS, sizeof(int));
	size_t n = fds ? h->ops.fds(h->ops.arg, fds, NDC_HANDOVER_MAX_FDS) : 0;
	char msg[64];
	int r = 0;

	if (!fds) {
		ndc_err("handover: out of memory");
		return;
	}
	for (size_t off = 0; r == 0 && (off < n || off == 0);) {
		size_t k = n - off < FDS_PER_MSG ? n - off : FDS_PER_MSG;

		snprintf(msg, sizeof(msg), MSG_FDS " %zu %d", n, off + k < n);
		r = send_msg(fd, msg, fds + off, k);
		off += k;
		if (n == 0)
			break;
	}
	if (r < 0)
		ndc_warn("handover: sending sockets to a successor: %s", strerror(-r));
	else
		ndc_info("handover: a successor joined; handed it %zu sockets", n);
	free(fds);
}

/*
 * Counts a refused peer and logs it: the first at once, then at most one line every
 * REFUSED_LOG_S (a process that connects in a loop must not fill the log).
 */
static void refuse(struct ndc_handover *h, enum ndc_handover_refusal why, pid_t pid, uid_t uid)
{
	int64_t now = now_ms();

	atomic_fetch_add(&h->refused[why], 1);
	if (h->refused_logged && now - h->refused_logged < REFUSED_LOG_S * 1000) {
		h->refused_quiet++;
		return;
	}
	ndc_warn("handover: refused a peer (pid %d, uid %u; this agent's uid %u): %s (%u more "
		 "refused since the last such line)",
		 (int)pid, (unsigned)uid, (unsigned)geteuid(),
		 why == NDC_HANDOVER_REFUSED_UID       ? "another uid"
		 : why == NDC_HANDOVER_REFUSED_TIMEOUT ? "said nothing in time"
		 : why == NDC_HANDOVER_REFUSED_FULL    ? "every peer slot is held"
						       : "not the handover protocol",
		 h->refused_quiet);
	h->refused_logged = now;
	h->refused_quiet = 0;
}

static void peer_close(struct ndc_handover *h, struct peer *p)
{
	close(p->fd);
	p->fd = -1;
	if (p->said)
		atomic_fetch_sub(&h->joined, 1);
	p->said = false;
	if (p->took) {
		p->took = false;
		atomic_store(&h->taken, false);
		ndc_warn(
		    "handover: the successor that took over is gone; serving on our own again");
		h->ops.taken(h->ops.arg, false);
	}
}

static void peer_message(struct ndc_handover *h, struct peer *p)
{
	char buf[64];
	size_t got;
	ssize_t n = recv_msg(p->fd, buf, sizeof(buf), NULL, 0, &got);

	if (n <= 0) {
		peer_close(h, p);
		return;
	}
	if (strcmp(buf, MSG_HELLO) == 0) {
		if (!p->said)
			atomic_fetch_add(&h->joined, 1);
		p->said = true;
		send_fds(h, p->fd);
	} else if (strcmp(buf, MSG_TAKEOVER) == 0) {
		p->took = true;
		atomic_store(&h->taken, true);
		h->ops.taken(h->ops.arg, true);
		if (send_msg(p->fd, MSG_OK, NULL, 0) == 0)
			ndc_info("handover: a successor took over; this agent exits on SIGTERM "
				 "leaving the fast path to it");
	} else {
		refuse(h, NDC_HANDOVER_REFUSED_PROTOCOL, p->pid, p->uid);
		peer_close(h, p);
	}
}

/* A new connection: kept only from our own uid, and while a slot is free. */
static void peer_accept(struct ndc_handover *h)
{
	int c = accept4(h->lfd, NULL, NULL, SOCK_CLOEXEC);
	struct ucred uc = {.pid = 0, .uid = (uid_t)-1};
	int slot = -1;

	if (c < 0)
		return;
	if (peer_cred(c, &uc) < 0 || uc.uid != geteuid()) {
		refuse(h, NDC_HANDOVER_REFUSED_UID, uc.pid, uc.uid);
		close(c);
		return;
	}
	for (int i = 0; i < PEERS_MAX; i++)
		if (h->peers[i].fd < 0)
			slot = i;
	if (slot < 0) {
		refuse(h, NDC_HANDOVER_REFUSED_FULL, uc.pid, uc.uid);
		close(c);
		return;
	}
	h->peers[slot] = (struct peer){
	    .fd = c,
	    .deadline = now_ms() + h->ops.hello_timeout_ms,
	    .pid = uc.pid,
	    .uid = uc.uid,
	};
}

/* Drops the peers whose time to say HELLO is over; the ms until the next deadline, or -1. */
static int peer_deadlines(struct ndc_handover *h)
{
	int64_t now = now_ms(), next = -1;

	for (int i = 0; i < PEERS_MAX; i++) {
		struct peer *p = &h->peers[i];

		if (p->fd < 0 || p->said)
			continue;
		if (p->deadline <= now) {
			refuse(h, NDC_HANDOVER_REFUSED_TIMEOUT, p->pid, p->uid);
			peer_close(h, p);
		} else if (next < 0 || p->deadline - now < next) {
			next = p->deadline - now;
		}
	}
	return (int)next;
}

static void *serve_thread(void *arg)
{
	struct ndc_handover *h = arg;
	bool said = false;

	for (;;) {
		struct pollfd pfd[2 + PEERS_MAX];
		nfds_t n = 0;
		int r, wait = peer_deadlines(h);

		if (h->lfd < 0 && try_listen(h) < 0 && !said) {
			ndc_info("handover: %s is held (an earlier agent still runs); retrying",
				 h->name);
			said = true;
		}
		pfd[n++] = (struct pollfd){.fd = h->evfd, .events = POLLIN};
		pfd[n++] = (struct pollfd){.fd = h->lfd, .events = POLLIN};
		for (int i = 0; i < PEERS_MAX; i++)
			pfd[n++] = (struct pollfd){.fd = h->peers[i].fd, .events = POLLIN};
		if (h->lfd < 0 && (wait < 0 || wait > RETRY_MS))
			wait = RETRY_MS;
		r = poll(pfd, n, wait);
		if (r < 0 && errno != EINTR) {
			ndc_err("handover: poll: %s", strerror(errno));
			return NULL;
		}
		if (r <= 0)
			continue;
		if (pfd[0].revents)
			return NULL;
		/* the peers first: a slot freed now is free for the connection below */
		for (int i = 0; i < PEERS_MAX; i++)
			if (h->peers[i].fd >= 0 && pfd[2 + i].revents)
				peer_message(h, &h->peers[i]);
		if (pfd[1].revents & POLLIN)
			peer_accept(h);
	}
}

int ndc_handover_serve(const char *name, const struct ndc_handover_ops *ops,
		       struct ndc_handover **ret)
{
	struct ndc_handover *h = calloc(1, sizeof(*h));
	int r;

	*ret = NULL;
	if (!h)
		return -ENOMEM;
	snprintf(h->name, sizeof(h->name), "%s", name);
	h->ops = *ops;
	if (h->ops.hello_timeout_ms <= 0)
		h->ops.hello_timeout_ms = HELLO_MS;
	h->lfd = -1;
	for (int i = 0; i < PEERS_MAX; i++)
		h->peers[i].fd = -1;
	h->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (h->evfd < 0) {
		r = -errno;
		free(h);
		return r;
	}
	try_listen(h); /* now if we can; else the thread retries */
	r = -pthread_create(&h->thread, NULL, serve_thread, h);
	if (r < 0) {
		if (h->lfd >= 0)
			close(h->lfd);
		close(h->evfd);
		free(h);
		return r;
	}
	*ret = h;
	return 0;
}

bool ndc_handover_taken(struct ndc_handover *h)
{
	return h && atomic_load(&h->taken);
}

bool ndc_handover_joined(struct ndc_handover *h)
{
	return h && atomic_load(&h->joined) > 0;
}

void ndc_handover_stats(struct ndc_handover *h, struct ndc_handover_stats *ret)
{
	memset(ret, 0, sizeof(*ret));
	for (int i = 0; h && i < NDC_HANDOVER_REFUSED_MAX; i++)
		ret->refused[i] = atomic_load(&h->refused[i]);
}

void ndc_handover_close(struct ndc_handover *h)
{
	uint64_t one = 1;

	if (!h || h->closed)
		return;
	if (write(h->evfd, &one, sizeof(one)) < 0)
		ndc_err("handover: cannot stop: %s", strerror(errno));
	pthread_join(h->thread, NULL);
	for (int i = 0; i < PEERS_MAX; i++)
		if (h->peers[i].fd >= 0) {
			close(h->peers[i].fd);
			h->peers[i].fd = -1;
		}
	if (h->lfd >= 0)
		close(h->lfd);
	h->lfd = -1;
	close(h->evfd);
	h->closed = true;
}

void ndc_handover_stop(struct ndc_handover *h)
{
	ndc_handover_close(h);
	free(h);
}
