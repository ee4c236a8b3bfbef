// SPDX-License-Identifier: MIT
/*
 * The dnstap writer: the callers' side (log, stats) and the writer thread, which connects to the
 * reader through libfstrm's writer (Frame Streams framing and the bidirectional handshake) over
 * a unix socket of our own: libfstrm's unix writer blocks without a bound on a reader that stops
 * reading, ours bounds every write and read by io_timeout_ms and never raises SIGPIPE.
 */
#include <fstrm.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "internal.h"

#define CONTENT_TYPE "protobuf:dnstap.Dnstap"
#define BATCH_FRAMES 64 /* frames per writev: one syscall for a burst */
#define BATCH_BYTES (256u << 10)
/*
 * How often the writer takes what is queued (earlier when a quarter of the queue fills) and
 * looks whether its reader went away: frames reach the reader within this, and callers never
 * pay a wake-up.
 */
#define FLUSH_MS 20

struct ndc_dnstap {
	struct dnstap_ring ring;
	pthread_t thread;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char *identity;
	char *version;
	unsigned reconnect_min_ms;
	unsigned reconnect_max_ms;
	unsigned io_timeout_ms;
	atomic_bool stop;
	atomic_bool connected; /* read by every log call: set after the handshake */
	atomic_uint_fast64_t written;
	atomic_uint_fast64_t dropped_full;
	atomic_uint_fast64_t dropped_busy;
	atomic_uint_fast64_t dropped_no_reader;
	atomic_uint_fast64_t dropped_invalid;
	atomic_uint_fast64_t reconnects;
	atomic_int last_error;
	/* the writer thread's own */
	struct fstrm_writer_options *wopt;
	struct fstrm_writer *w; /* non-NULL while connected */
	int fd;
	int open_errno;	  /* why sock_open failed */
	uint8_t *scratch; /* BATCH_BYTES + NDC_DNSTAP_FRAME_MAX */
};

bool ndc_dnstap_available(void)
{
	return true;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Waits for events on the socket at most io_timeout_ms: 0, or -1 (timeout, error). */
static int wait_fd(struct ndc_dnstap *d, short events)
{
	struct pollfd p = {.fd = d->fd, .events = events};
	int n;

	do
		n = poll(&p, 1, (int)d->io_timeout_ms);
	while (n < 0 && errno == EINTR);
	return n == 1 && (p.revents & events) ? 0 : -1;
}

static fstrm_res sock_open(void *obj)
{
	struct ndc_dnstap *d = obj;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};

	memcpy(sa.sun_path, d->path, sizeof(sa.sun_path));
	d->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (d->fd < 0) {
		d->open_errno = errno;
		return fstrm_res_failure;
	}
	/* a unix connect completes at once or fails (EAGAIN: the reader's backlog is full) */
	if (connect(d->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		d->open_errno = errno;
		close(d->fd);
		d->fd = -1;
		return fstrm_res_failure;
	}
	return fstrm_res_success;
}

static fstrm_res sock_close(void *obj)
{
	struct ndc_dnstap *d = obj;

	if (d->fd >= 0)
		close(d->fd);
	d->fd = -1;
	return fstrm_res_success;
}

/* The handshake's reads: exactly count bytes, each wait bounded. */
static fstrm_res sock_read(void *obj, void *data, size_t count)
{
	struct ndc_dnstap *d = obj;
	uint8_t *p = data;
	ssize_t n;

	while (count) {
		if (d->fd < 0 || wait_fd(d, POLLIN))
			return fstrm_res_failure;
		n = recv(d->fd, p, count, 0);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			return fstrm_res_failure;
		p += n;
		count -= (size_t)n;
	}
	return fstrm_res_success;
}

static fstrm_res sock_write(void *obj, const struct iovec *iov, int iovcnt)
{
	struct ndc_dnstap *d = obj;
	struct iovec v[2 * BATCH_FRAMES + 8];
	struct msghdr msg = {.msg_iov = v};
	ssize_t n;

	if (d->fd < 0 || iovcnt < 0 || (size_t)iovcnt > sizeof(v) / sizeof(v[0]))
		return fstrm_res_failure;
	memcpy(v, iov, (size_t)iovcnt * sizeof(*iov));
	msg.msg_iovlen = (size_t)iovcnt;
	while (msg.msg_iovlen) {
		n = sendmsg(d->fd, &msg, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			/* a reader slower than us: wait a bounded time, then give up on it */
			if (wait_fd(d, POLLOUT))
				return fstrm_res_failure;
			continue;
		}
		if (n < 0)
			return fstrm_res_failure;
		while (msg.msg_iovlen && (size_t)n >= msg.msg_iov->iov_len) {
			n -= (ssize_t)msg.msg_iov->iov_len;
			msg.msg_iov++;
			msg.msg_iovlen--;
		}
		if (msg.msg_iovlen) {
			msg.msg_iov->iov_base = (uint8_t *)msg.msg_iov->iov_base + n;
			msg.msg_iov->iov_len -= (size_t)n;
		}
	}
	return fstrm_res_success;
}

/* A connection: a fresh fstrm writer over our socket, opened (READY, ACCEPT, START). 0 or -1. */
static int reader_connect(struct ndc_dnstap *d)
{
	struct fstrm_rdwr *rdwr = fstrm_rdwr_init(d);

	if (!rdwr)
		return -1;
	fstrm_rdwr_set_open(rdwr, sock_open);
	fstrm_rdwr_set_close(rdwr, sock_close);
	fstrm_rdwr_set_read(rdwr,
			    sock_read); /* a read method: the handshaked, bidirectional mode */
	fstrm_rdwr_set_write(rdwr, sock_write);
	d->w = fstrm_writer_init(d->wopt, &rdwr);
	if (!d->w) {
		fstrm_rdwr_destroy(&rdwr);
		return -1;
	}
	d->open_errno = 0;
	if (fstrm_writer_open(d->w) != fstrm_res_success) {
		/* sock_open's errno, else the reader's handshake failed or timed out */
		atomic_store(&d->last_error, d->open_errno ? d->open_errno : EPROTO);
		fstrm_writer_destroy(&d->w);
		sock_close(d);
		return -1;
	}
	return 0;
}

/* Ends a connection: STOP and the reader's FINISH when it still listens (bounded), then close. */
static void reader_disconnect(struct ndc_dnstap *d)
{
	atomic_store(&d->connected, false);
	if (d->w)
		fstrm_writer_destroy(&d->w);
	sock_close(d);
}

/* Whether the reader closed its end (it sends nothing else before our STOP). */
static bool reader_gone(struct ndc_dnstap *d)
{
	struct pollfd p = {.fd = d->fd, .events = POLLIN};

	return poll(&p, 1, 0) != 0;
}

/* Writes (or, with no reader, counts as dropped) the records in [*off, head). */
static void drain(struct ndc_dnstap *d, uint64_t *off, uint64_t head)
{
	const struct dnstap_rec *rec;
	struct iovec frames[BATCH_FRAMES];
	size_t used = 0, n = 0, flen;
	struct ndc_dnstap_event ev;

	for (;;) {
		rec = ndc_dnstap_ring_next(&d->ring, off, head);
		if (rec && d->w) {
			ndc_dnstap_rec_event(rec, &ev);
			if (ndc_dnstap_encode(&ev, d->identity, d->version, d->scratch + used,
					      NDC_DNSTAP_FRAME_MAX, &flen) == 0) {
				frames[n].iov_base = d->scratch + used;
				frames[n++].iov_len = flen;
				used += flen;
			} else {
				atomic_fetch_add(&d->dropped_invalid, 1);
			}
		} else if (rec) {
			atomic_fetch_add(&d->dropped_no_reader, 1);
		}
		if (n && (!rec || n == BATCH_FRAMES || used >= BATCH_BYTES)) {
			if (fstrm_writer_writev(d->w, frames, (int)n) == fstrm_res_success) {
				atomic_fetch_add(&d->written, n);
			} else {
				atomic_fetch_add(&d->dropped_no_reader, n);
				reader_disconnect(d);
			}
			n = used = 0;
		}
		if (!rec)
			break;
	}
	/* the space is the producers' again only after the frames left the scratch buffer */
	ndc_dnstap_ring_release(&d->ring, head);
}

static void *writer_main(void *arg)
{
	struct ndc_dnstap *d = arg;
	unsigned backoff = d->reconnect_min_ms, wait;
	uint64_t off = 0, head, next_try = 0, now;
	bool ever = false, stop;

	for (;;) {
		stop = atomic_load(&d->stop);
		wait = stop ? 0 : FLUSH_MS; /* stopping: what is queued now is all there will be */
		if (!d->w && !stop) {
			now = now_ms();
			if (now >= next_try && reader_connect(d) == 0) {
				if (ever)
					atomic_fetch_add(&d->reconnects, 1);
				ever = true;
				backoff = d->reconnect_min_ms;
				atomic_store(&d->last_error, 0);
				atomic_store(&d->connected, true);
			} else if (now >= next_try) {
				next_try = now + backoff;
				backoff = backoff * 2 > d->reconnect_max_ms ? d->reconnect_max_ms
									    : backoff * 2;
			}
			if (!d->w)
				wait = (unsigned)(next_try - now < wait ? next_try - now : wait);
		}
		head = ndc_dnstap_ring_wait(&d->ring, wait);
		if (head == off && d->w && reader_gone(d))
			reader_disconnect(d);
		drain(d, &off, head);
		if (stop)
			break;
	}
	if (d->w)
		reader_disconnect(d);
	return NULL;
}

static int check_opts(const struct ndc_dnstap_opts *o)
{
	if (!o || !o->socket_path || !o->socket_path[0] ||
	    strlen(o->socket_path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return -EINVAL;
	if (o->identity && strlen(o->identity) > NDC_DNSTAP_IDENTITY_MAX)
		return -EINVAL;
	if (o->version && strlen(o->version) > NDC_DNSTAP_IDENTITY_MAX)
		return -EINVAL;
	if (o->queue_bytes && o->queue_bytes < NDC_DNSTAP_QUEUE_MIN)
		return -EINVAL;
	if (o->reconnect_min_ms && o->reconnect_max_ms && o->reconnect_min_ms > o->reconnect_max_ms)
		return -EINVAL;
	return 0;
}

int ndc_dnstap_open(const struct ndc_dnstap_opts *opts, struct ndc_dnstap **ret_d)
{
	struct ndc_dnstap *d;
	int err;

	err = check_opts(opts);
	if (err)
		return err;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->fd = -1;
	snprintf(d->path, sizeof(d->path), "%s", opts->socket_path);
	d->reconnect_min_ms = opts->reconnect_min_ms ? opts->reconnect_min_ms : 100;
	d->reconnect_max_ms = opts->reconnect_max_ms ? opts->reconnect_max_ms : 5000;
	if (d->reconnect_max_ms < d->reconnect_min_ms)
		d->reconnect_max_ms = d->reconnect_min_ms;
	d->io_timeout_ms = opts->io_timeout_ms ? opts->io_timeout_ms : 1000;
	err = ndc_dnstap_ring_init(&d->ring, opts->queue_bytes ? opts->queue_bytes
							       : NDC_DNSTAP_QUEUE_DEFAULT);
	if (err)
		goto err_free;
	err = -ENOMEM;
	if (opts->identity && !(d->identity = strdup(opts->identity)))
		goto err_ring;
	d->version = strdup(opts->version ? opts->version : "ndcache " NDC_VERSION);
	d->scratch = malloc(BATCH_BYTES + NDC_DNSTAP_FRAME_MAX);
	d->wopt = fstrm_writer_options_init();
	if (!d->version || !d->scratch || !d->wopt)
		goto err_ring;
	if (fstrm_writer_options_add_content_type(d->wopt, CONTENT_TYPE, strlen(CONTENT_TYPE)) !=
	    fstrm_res_success)
		goto err_ring;
	err = -pthread_create(&d->thread, NULL, writer_main, d);
	if (err)
		goto err_ring;
	*ret_d = d;
	return 0;

err_ring:
	if (d->wopt)
		fstrm_writer_options_destroy(&d->wopt);
	free(d->scratch);
	free(d->version);
	free(d->identity);
	ndc_dnstap_ring_free(&d->ring);
err_free:
	free(d);
	return err;
}

int ndc_dnstap_log(struct ndc_dnstap *d, const struct ndc_dnstap_event *ev)
{
	int err;

	if (!d || !ev)
		return -EINVAL;
	/* no reader: one load and one counter, the cheapest path an absent reader can cost */
	if (ndc_dnstap_drop_unread(d))
		return -ENOTCONN;
	err = ndc_dnstap_ring_push(&d->ring, ev);
	if (err == -ENOBUFS)
		atomic_fetch_add_explicit(&d->dropped_full, 1, memory_order_relaxed);
	else if (err == -EBUSY)
		atomic_fetch_add_explicit(&d->dropped_busy, 1, memory_order_relaxed);
	else if (err)
		atomic_fetch_add_explicit(&d->dropped_invalid, 1, memory_order_relaxed);
	return err;
}

bool ndc_dnstap_drop_unread(struct ndc_dnstap *d)
{
	if (!d || atomic_load_explicit(&d->connected, memory_order_relaxed))
		return false;
	atomic_fetch_add_explicit(&d->dropped_no_reader, 1, memory_order_relaxed);
	return true;
}

void ndc_dnstap_stats(struct ndc_dnstap *d, struct ndc_dnstap_stats *ret_stats)
{
	memset(ret_stats, 0, sizeof(*ret_stats));
	if (!d)
		return;
	ret_stats->written = atomic_load(&d->written);
	ret_stats->dropped_full = atomic_load(&d->dropped_full);
	ret_stats->dropped_busy = atomic_load(&d->dropped_busy);
	ret_stats->dropped_no_reader = atomic_load(&d->dropped_no_reader);
	ret_stats->dropped_invalid = atomic_load(&d->dropped_invalid);
	ret_stats->dropped = ret_stats->dropped_full + ret_stats->dropped_busy +
			     ret_stats->dropped_no_reader + ret_stats->dropped_invalid;
	ret_stats->reconnects = atomic_load(&d->reconnects);
	ret_stats->connected = atomic_load(&d->connected);
	ret_stats->last_error = atomic_load(&d->last_error);
}

void ndc_dnstap_close(struct ndc_dnstap *d)
{
	if (!d)
		return;
	atomic_store(&d->stop, true);
	ndc_dnstap_ring_kick(&d->ring);
	pthread_join(d->thread, NULL);
	fstrm_writer_options_destroy(&d->wopt);
	free(d->scratch);
	free(d->version);
	free(d->identity);
	ndc_dnstap_ring_free(&d->ring);
	free(d);
}
