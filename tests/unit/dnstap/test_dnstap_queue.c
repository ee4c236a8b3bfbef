// SPDX-License-Identifier: MIT
/*
 * The dnstap queue and writer: the ring keeps records intact across wraps; a full queue and an
 * absent reader drop and count and never block; a reader that does the Frame Streams handshake
 * and reads gets every frame queued, one that stops reading costs the callers nothing; the
 * sampler keeps its rate.
 */
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "dnstap.pb-c.h"
#include "dnstap/internal.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct ndc_dnstap_event event(uint8_t *wire, size_t len, uint32_t seq)
{
	struct ndc_dnstap_event ev = {
	    .type = NDC_DNSTAP_CLIENT_QUERY,
	    .family = AF_INET,
	    .protocol = IPPROTO_UDP,
	    .wire = wire,
	    .wire_len = len,
	    .query_port = (uint16_t)seq,
	    .extra = "ns/pod",
	    .extra_len = 6,
	};

	for (size_t i = 0; i < len; i++)
		wire[i] = (uint8_t)(seq + i);
	memcpy(wire, &seq, len < 4 ? len : 4);
	return ev;
}

static void check_event(const struct dnstap_rec *rec, uint32_t seq, size_t len)
{
	struct ndc_dnstap_event ev;
	const uint8_t *w;
	uint32_t got;

	assert_non_null(rec);
	ndc_dnstap_rec_event(rec, &ev);
	assert_int_equal(ev.wire_len, len);
	w = ev.wire;
	memcpy(&got, w, 4);
	assert_int_equal(got, seq);
	for (size_t i = 4; i < len; i++)
		assert_int_equal(w[i], (uint8_t)(seq + i));
	assert_int_equal(ev.extra_len, 6);
	assert_memory_equal(ev.extra, "ns/pod", 6);
	assert_int_equal(ev.query_port, (uint16_t)seq);
}

/* Fill to -ENOBUFS, read back, release, over many wraps with sizes that do not divide the ring. */
static void test_ring_wraps(void **state)
{
	static uint8_t wire[2000];
	struct dnstap_ring r;
	uint32_t pushed = 0, read = 0;
	uint64_t off = 0, head;
	struct ndc_dnstap_event ev;

	(void)state;
	assert_int_equal(ndc_dnstap_ring_init(&r, NDC_DNSTAP_QUEUE_MIN - 8), -EINVAL);
	assert_int_equal(ndc_dnstap_ring_init(&r, NDC_DNSTAP_QUEUE_MIN), 0);
	for (int round = 0; round < 50; round++) {
		int full = 0;

		for (;;) {
			size_t len = 13 + (pushed * 7919u) % (sizeof(wire) - 13);

			ev = event(wire, len, pushed);
			if (ndc_dnstap_ring_push(&r, &ev) == -ENOBUFS) {
				full = 1;
				break;
			}
			pushed++;
		}
		assert_true(full);
		/* read half, release, so the next round's pushes wrap around the end */
		head = ndc_dnstap_ring_wait(&r, 0);
		for (int i = 0; read < pushed && (round % 2 || i < 40); i++, read++) {
			size_t len = 13 + (read * 7919u) % (sizeof(wire) - 13);
			check_event(ndc_dnstap_ring_next(&r, &off, head), read, len);
		}
		ndc_dnstap_ring_release(&r, off);
	}
	assert_true(pushed > 3000); /* many wraps of a 128 KiB ring */
	ndc_dnstap_ring_free(&r);
}

/* A lock held (as by a preempted holder): the push gives up at once, nothing written. */
static void test_ring_busy(void **state)
{
	static uint8_t wire[100];
	struct dnstap_ring r;
	struct ndc_dnstap_event ev = event(wire, sizeof(wire), 7);
	uint64_t t0, t;

	(void)state;
	assert_int_equal(ndc_dnstap_ring_init(&r, NDC_DNSTAP_QUEUE_MIN), 0);
	pthread_mutex_lock(&r.lock);
	t0 = now_ns();
	assert_int_equal(ndc_dnstap_ring_push(&r, &ev), -EBUSY);
	t = now_ns() - t0;
	pthread_mutex_unlock(&r.lock);
	assert_true(t < 10000000);
	assert_int_equal(r.head, 0);
	assert_int_equal(ndc_dnstap_ring_push(&r, &ev), 0);
	printf("# push against a held lock: -EBUSY after %.1f us\n", t / 1000.0);
	ndc_dnstap_ring_free(&r);
}

/* Frame Streams control frames (the protocol's numbers), for the fake readers below. */
#define FS_ACCEPT 1
#define FS_START 2
#define FS_STOP 3
#define FS_READY 4
#define FS_FINISH 5
#define FS_CONTENT_TYPE 1
#define CT "protobuf:dnstap.Dnstap"

static int read_all(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;
	ssize_t n;

	while (len) {
		n = read(fd, p, len);
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static uint32_t be32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return ntohl(v);
}

/* Reads one frame: returns its control type (0 for a data frame), the payload in buf. */
static int read_frame(int fd, uint8_t *buf, size_t cap, uint32_t *ret_len)
{
	uint8_t h[4];
	uint32_t len;
	int control = 0;

	if (read_all(fd, h, 4))
		return -1;
	len = be32(h);
	if (len == 0) {
		control = 1;
		if (read_all(fd, h, 4))
			return -1;
		len = be32(h);
	}
	if (len > cap || read_all(fd, buf, len))
		return -1;
	*ret_len = len;
	return control ? (int)be32(buf) : 0;
}

static void write_control(int fd, uint32_t type, bool with_ct)
{
	uint8_t f[64];
	uint32_t v, n = 0, clen = 4 + (with_ct ? 8 + (uint32_t)strlen(CT) : 0);

#define PUT(x) (v = htonl(x), memcpy(f + n, &v, 4), n += 4)
	PUT(0);
	PUT(clen);
	PUT(type);
	if (with_ct) {
		PUT(FS_CONTENT_TYPE);
		PUT((uint32_t)strlen(CT));
		memcpy(f + n, CT, strlen(CT));
		n += (uint32_t)strlen(CT);
	}
#undef PUT
	assert_int_equal(write(fd, f, n), (ssize_t)n);
}

struct reader {
	char path[108];
	int lfd;
	bool stall; /* handshake, then read nothing */
	bool mute;  /* accept, then answer nothing (no ACCEPT) */
	pthread_t thread;
	int cfd;
	uint32_t frames; /* data frames that decoded as Dnstap with the extra field */
	bool stopped;	 /* STOP seen, FINISH sent */
};

static void *reader_main(void *arg)
{
	struct reader *rd = arg;
	static uint8_t buf[NDC_DNSTAP_FRAME_MAX];
	uint32_t len;
	int t;

	rd->cfd = accept(rd->lfd, NULL, NULL);
	if (rd->cfd < 0 || rd->mute)
		return NULL;
	if (read_frame(rd->cfd, buf, sizeof(buf), &len) != FS_READY)
		return NULL;
	write_control(rd->cfd, FS_ACCEPT, true);
	if (read_frame(rd->cfd, buf, sizeof(buf), &len) != FS_START)
		return NULL;
	if (rd->stall)
		return NULL;
	while ((t = read_frame(rd->cfd, buf, sizeof(buf), &len)) == 0) {
		Dnstap__Dnstap *dt = dnstap__dnstap__unpack(NULL, len, buf);

		if (dt && dt->has_extra && dt->extra.len == 6)
			rd->frames++;
		if (dt)
			dnstap__dnstap__free_unpacked(dt, NULL);
	}
	if (t == FS_STOP) {
		write_control(rd->cfd, FS_FINISH, false);
		rd->stopped = true;
	}
	return NULL;
}

static void reader_start(struct reader *rd, bool stall, bool mute)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};

	memset(rd, 0, sizeof(*rd));
	snprintf(rd->path, sizeof(rd->path), "/tmp/ndc-dnstap-test.%d.sock", (int)getpid());
	unlink(rd->path);
	memcpy(sa.sun_path, rd->path, strlen(rd->path) + 1);
	rd->stall = stall;
	rd->mute = mute;
	rd->cfd = -1;
	rd->lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_true(rd->lfd >= 0);
	assert_int_equal(bind(rd->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(rd->lfd, 4), 0);
	assert_int_equal(pthread_create(&rd->thread, NULL, reader_main, rd), 0);
}

static void reader_stop(struct reader *rd)
{
	pthread_join(rd->thread, NULL);
	if (rd->cfd >= 0)
		close(rd->cfd);
	close(rd->lfd);
	unlink(rd->path);
}

/* Polls until the writer says it is connected (at most 5 s). */
static void wait_connected(struct ndc_dnstap *d)
{
	struct ndc_dnstap_stats st;
	uint64_t end = now_ns() + 5000000000ull;

	do {
		ndc_dnstap_stats(d, &st);
		if (st.connected)
			return;
		usleep(1000);
	} while (now_ns() < end);
	fail_msg("the writer did not connect to the test's reader within 5 s");
}

/* No reader: every log returns -ENOTCONN at once and is counted. */
static void test_no_reader(void **state)
{
	struct ndc_dnstap_opts o = {.socket_path = "/tmp/ndc-dnstap-test-none.sock"};
	struct ndc_dnstap *d = NULL;
	struct ndc_dnstap_stats st;
	uint8_t wire[100];
	struct ndc_dnstap_event ev = event(wire, sizeof(wire), 1);
	uint64_t t0, worst = 0, t;

	(void)state;
	unlink(o.socket_path);
	assert_int_equal(ndc_dnstap_open(&o, &d), 0);
	for (int i = 0; i < 100000; i++) {
		t0 = now_ns();
		assert_int_equal(ndc_dnstap_log(d, &ev), -ENOTCONN);
		t = now_ns() - t0;
		worst = t > worst ? t : worst;
	}
	for (uint64_t end = now_ns() + 5000000000ull; now_ns() < end; usleep(1000)) {
		ndc_dnstap_stats(d, &st);
		if (st.last_error)
			break;
	}
	assert_int_equal(st.last_error, ENOENT); /* no socket at the path */
	/* the caller's check before it builds an event: dropped and counted the same way */
	for (int i = 0; i < 100; i++)
		assert_true(ndc_dnstap_drop_unread(d));
	ndc_dnstap_stats(d, &st);
	assert_int_equal(st.dropped_no_reader, 100100);
	assert_int_equal(st.dropped, 100100);
	assert_int_equal(st.written, 0);
	assert_false(st.connected);
	/* a scheduler hiccup can stretch one call, never to a blocking wait's length */
	assert_true(worst < 50000000);
	ndc_dnstap_close(d);
	assert_int_equal(ndc_dnstap_log(NULL, &ev), -EINVAL);
	assert_false(ndc_dnstap_drop_unread(NULL));
	ndc_dnstap_stats(NULL, &st);
	assert_int_equal(st.dropped, 0);
}

struct producer {
	struct ndc_dnstap *d;
	uint32_t first;
	uint32_t queued;
	uint64_t ns; /* in the calls that queued */
};

static void *producer_main(void *arg)
{
	struct producer *p = arg;
	uint8_t wire[300];
	struct ndc_dnstap_event ev;
	uint64_t t0, t;
	int err;

	for (uint32_t i = p->first; i < p->first + 20000; i++) {
		ev = event(wire, 12 + i % 280, i);
		t0 = now_ns();
		err = ndc_dnstap_log(p->d, &ev);
		t = now_ns() - t0;
		if (err == 0) {
			p->queued++;
			p->ns += t;
		} else if (err != -ENOBUFS && err != -EBUSY) {
			fprintf(stderr, "log: %d\n", err);
		}
		if (i % 64 == 0)
			usleep(50); /* a paced caller, not a flood: most must be queued */
	}
	return NULL;
}

/*
 * A reader that reads, two callers at once: every event queued arrives as a Dnstap frame with
 * its extra; close ends the stream with STOP and waits for FINISH.
 */
static void test_reader_gets_all(void **state)
{
	struct reader rd;
	struct ndc_dnstap_opts o = {.identity = "node-a"};
	struct ndc_dnstap *d = NULL;
	struct ndc_dnstap_stats st;
	struct producer p[2] = {{.first = 0}, {.first = 1000000}};
	pthread_t t[2];
	uint32_t queued;

	(void)state;
	reader_start(&rd, false, false);
	o.socket_path = rd.path;
	assert_int_equal(ndc_dnstap_open(&o, &d), 0);
	wait_connected(d);
	assert_false(ndc_dnstap_drop_unread(d)); /* a reader: the caller builds its event */
	for (int i = 0; i < 2; i++) {
		p[i].d = d;
		assert_int_equal(pthread_create(&t[i], NULL, producer_main, &p[i]), 0);
	}
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	queued = p[0].queued + p[1].queued;
	ndc_dnstap_stats(d, &st);
	assert_int_equal(st.dropped_invalid, 0);
	assert_int_equal(st.dropped_no_reader, 0);
	assert_int_equal(queued + st.dropped_full + st.dropped_busy, 40000);
	ndc_dnstap_close(d); /* writes what is queued, then STOP, waits for FINISH */
	reader_stop(&rd);
	assert_true(rd.stopped);
	assert_int_equal(rd.frames, queued);
	/* the test's reader (a read per header, an unpack per frame) may lag on a busy machine */
	assert_true(queued > 1000);
	printf("# reader reading, 2 callers: %u of 40000 queued and written (%llu queue full, %llu "
	       "busy), %.0f ns per queued log call (12-291 byte messages)\n",
	       queued, (unsigned long long)st.dropped_full, (unsigned long long)st.dropped_busy,
	       (double)(p[0].ns + p[1].ns) / queued);
}

/* A reader that stops reading: the queue fills, logs drop and count, no call blocks. */
static void test_stalled_reader(void **state)
{
	struct reader rd;
	struct ndc_dnstap_opts o = {.queue_bytes = NDC_DNSTAP_QUEUE_MIN, .io_timeout_ms = 3000};
	struct ndc_dnstap *d = NULL;
	struct ndc_dnstap_stats st;
	static uint8_t wire[1200];
	struct ndc_dnstap_event ev;
	uint64_t t0, t, worst = 0;
	uint32_t ok = 0, full = 0, n = 20000;
	int err;

	(void)state;
	reader_start(&rd, true, false);
	o.socket_path = rd.path;
	assert_int_equal(ndc_dnstap_open(&o, &d), 0);
	wait_connected(d);
	/* 24 MB against a 128 KiB queue and the socket's buffers: most must drop */
	for (uint32_t i = 0; i < n; i++) {
		ev = event(wire, sizeof(wire), i);
		t0 = now_ns();
		err = ndc_dnstap_log(d, &ev);
		t = now_ns() - t0;
		worst = t > worst ? t : worst;
		if (err == 0)
			ok++;
		else if (err == -ENOBUFS)
			full++;
		else
			assert_int_equal(err, -ENOTCONN);
	}
	ndc_dnstap_stats(d, &st);
	assert_true(full > n / 2);
	assert_int_equal(st.dropped_full, full);
	assert_int_equal(st.dropped_invalid, 0);
	assert_true(worst < 50000000); /* the writer sits in a 3 s write; the callers never wait */
	t0 = now_ns();
	ndc_dnstap_close(d); /* the stalled write gives up after io_timeout_ms, then STOP does */
	t = now_ns() - t0;
	reader_stop(&rd);
	assert_true(t < 3 * 3000000000ull);
	printf("# stalled reader: %u queued, %u dropped (queue full), worst log call %.1f us, "
	       "close %.2f s (io_timeout 3 s)\n",
	       ok, full, worst / 1000.0, t / 1e9);
}

/* A reader that accepts and never answers the handshake: not connected, EPROTO, no block. */
static void test_mute_reader(void **state)
{
	struct reader rd;
	struct ndc_dnstap_opts o = {.io_timeout_ms = 200};
	struct ndc_dnstap *d = NULL;
	struct ndc_dnstap_stats st;
	uint8_t wire[100];
	struct ndc_dnstap_event ev = event(wire, sizeof(wire), 1);

	(void)state;
	reader_start(&rd, false, true);
	o.socket_path = rd.path;
	assert_int_equal(ndc_dnstap_open(&o, &d), 0);
	for (uint64_t end = now_ns() + 5000000000ull; now_ns() < end; usleep(1000)) {
		ndc_dnstap_stats(d, &st);
		if (st.last_error)
			break;
	}
	assert_int_equal(st.last_error, EPROTO);
	assert_false(st.connected);
	assert_int_equal(ndc_dnstap_log(d, &ev), -ENOTCONN);
	ndc_dnstap_close(d);
	reader_stop(&rd);
}

static void test_bad_opts(void **state)
{
	struct ndc_dnstap_opts o = {0};
	struct ndc_dnstap *d = NULL;
	char path[200];

	(void)state;
	assert_true(ndc_dnstap_available());
	assert_int_equal(ndc_dnstap_open(&o, &d), -EINVAL);
	memset(path, 'p', sizeof(path) - 1);
	path[sizeof(path) - 1] = 0;
	o.socket_path = path;
	assert_int_equal(ndc_dnstap_open(&o, &d), -EINVAL);
	o.socket_path = "/tmp/x.sock";
	o.queue_bytes = 1000;
	assert_int_equal(ndc_dnstap_open(&o, &d), -EINVAL);
	o.queue_bytes = 0;
	o.reconnect_min_ms = 10;
	o.reconnect_max_ms = 5;
	assert_int_equal(ndc_dnstap_open(&o, &d), -EINVAL);
}

static void test_sampler(void **state)
{
	struct ndc_dnstap_sampler s;
	unsigned kept = 0;

	(void)state;
	assert_int_equal(ndc_dnstap_sampler_init(&s, -0.1, 1), -EINVAL);
	assert_int_equal(ndc_dnstap_sampler_init(&s, 1.5, 1), -EINVAL);
	assert_int_equal(ndc_dnstap_sampler_init(&s, NAN, 1), -EINVAL);
	assert_int_equal(ndc_dnstap_sampler_init(&s, 0, 1), 0);
	for (int i = 0; i < 100000; i++)
		kept += ndc_dnstap_sample(&s);
	assert_int_equal(kept, 0);
	assert_int_equal(ndc_dnstap_sampler_init(&s, 1, 0), 0);
	for (int i = 0; i < 100000; i++)
		kept += ndc_dnstap_sample(&s);
	assert_int_equal(kept, 100000);
	/* 0.01 over a million: 10,000 expected, sd ~ 99; 5 % is five sd */
	kept = 0;
	assert_int_equal(ndc_dnstap_sampler_init(&s, 0.01, 12345), 0);
	for (int i = 0; i < 1000000; i++)
		kept += ndc_dnstap_sample(&s);
	assert_in_range(kept, 9500, 10500);
	kept = 0;
	assert_int_equal(ndc_dnstap_sampler_init(&s, 0.5, 0), 0);
	for (int i = 0; i < 1000000; i++)
		kept += ndc_dnstap_sample(&s);
	assert_in_range(kept, 495000, 505000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_ring_wraps),	   cmocka_unit_test(test_ring_busy),
	    cmocka_unit_test(test_no_reader),	   cmocka_unit_test(test_reader_gets_all),
	    cmocka_unit_test(test_stalled_reader), cmocka_unit_test(test_mute_reader),
	    cmocka_unit_test(test_bad_opts),	   cmocka_unit_test(test_sampler),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
