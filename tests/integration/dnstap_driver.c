// SPDX-License-Identifier: MIT
/*
 * The test driver of tests/integration/test_dnstap_writer.sh: the dnstap writer (control/dnstap)
 * logging known events, its counters on stdout (a line per phase, which the script waits for).
 *
 *   dnstap_driver SOCK pairs N EXTRA   wait for the reader, log N CLIENT_QUERY/CLIENT_RESPONSE
 *                                      pairs (q<i>.dnstap.test., types and rcodes below), close
 *   dnstap_driver SOCK noreader N      no reader: N logs, each must drop; prints ns per call
 *   dnstap_driver SOCK reconnect N EXTRA
 *                                      pairs a<i>, then logs while the script takes the reader
 *                                      away (dropped), then pairs b<i> to the reader that comes
 *                                      back
 * Exit 0 when the counters are what the mode expects, 1 otherwise (with the reason).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "dnstap/dnstap.h"

static const uint16_t qtypes[] = {1, 28, 16, 15}; /* A AAAA TXT MX */
static const uint8_t rcodes[] = {0, 3, 2};	  /* NOERROR NXDOMAIN SERVFAIL */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A query (or its response: QR, RA, rcode, no answers) for <label>.dnstap.test. */
static size_t message(uint8_t *m, const char *label, uint16_t id, uint16_t qtype, int rcode)
{
	size_t n = 12, l = strlen(label);

	memset(m, 0, 12);
	m[0] = (uint8_t)(id >> 8);
	m[1] = (uint8_t)id;
	m[2] = 0x01; /* RD */
	if (rcode >= 0) {
		m[2] |= 0x80;
		m[3] = 0x80 | (uint8_t)rcode;
	}
	m[5] = 1;
	m[n++] = (uint8_t)l;
	memcpy(m + n, label, l);
	n += l;
	memcpy(m + n, "\6dnstap\4test", 12);
	n += 12;
	m[n++] = 0;
	m[n++] = (uint8_t)(qtype >> 8);
	m[n++] = (uint8_t)qtype;
	m[n++] = 0;
	m[n++] = 1;
	return n;
}

/* time spent inside ndc_dnstap_log, over how many calls (the pairs mode prints it) */
static uint64_t log_ns, log_calls;

static int timed_log(struct ndc_dnstap *d, const struct ndc_dnstap_event *ev)
{
	uint64_t t0 = now_ns();
	int err = ndc_dnstap_log(d, ev);

	log_ns += now_ns() - t0;
	log_calls++;
	return err;
}

static int log_pair(struct ndc_dnstap *d, const char *prefix, unsigned i, const char *extra)
{
	struct in_addr client, node;
	uint8_t q[300], r[300];
	char label[32];
	struct ndc_dnstap_event ev = {
	    .family = AF_INET,
	    .protocol = IPPROTO_UDP,
	    .query_addr = &client,
	    .response_addr = &node,
	    .query_port = (uint16_t)(20000 + i),
	    .response_port = 53,
	    .extra = extra,
	    .extra_len = extra ? strlen(extra) : 0,
	};
	uint16_t qtype = qtypes[i % 4];
	int e1, e2;

	inet_pton(AF_INET, "169.254.100.2", &client);
	inet_pton(AF_INET, "169.254.20.10", &node);
	snprintf(label, sizeof(label), "%s%u", prefix, i);
	clock_gettime(CLOCK_REALTIME, &ev.query_time);
	ev.type = NDC_DNSTAP_CLIENT_QUERY;
	ev.wire = q;
	ev.wire_len = message(q, label, (uint16_t)i, qtype, -1);
	e1 = timed_log(d, &ev);
	clock_gettime(CLOCK_REALTIME, &ev.response_time);
	ev.type = NDC_DNSTAP_CLIENT_RESPONSE;
	ev.wire = r;
	ev.wire_len = message(r, label, (uint16_t)i, qtype, rcodes[i % 3]);
	e2 = timed_log(d, &ev);
	return e1 ? e1 : e2;
}

/* Polls the writer's state (connected or not) at most secs. */
static int wait_state(struct ndc_dnstap *d, bool connected, int secs, const char *what)
{
	struct ndc_dnstap_stats st;
	uint64_t end = now_ns() + (uint64_t)secs * 1000000000ull;

	do {
		ndc_dnstap_stats(d, &st);
		if (st.connected == connected)
			return 0;
		usleep(2000);
	} while (now_ns() < end);
	fprintf(stderr, "dnstap_driver: %s within %d s: no\n", what, secs);
	return -1;
}

/* Polls until the writer has sent count frames to the socket, at most secs. */
static int wait_written(struct ndc_dnstap *d, uint64_t count, int secs)
{
	struct ndc_dnstap_stats st;
	uint64_t end = now_ns() + (uint64_t)secs * 1000000000ull;

	do {
		ndc_dnstap_stats(d, &st);
		if (st.written >= count)
			return 0;
		usleep(2000);
	} while (now_ns() < end);
	fprintf(stderr, "dnstap_driver: %llu frames written within %d s: only %llu\n",
		(unsigned long long)count, secs, (unsigned long long)st.written);
	return -1;
}

static void print_stats(struct ndc_dnstap *d, const char *phase)
{
	struct ndc_dnstap_stats st;

	ndc_dnstap_stats(d, &st);
	printf("%s written=%llu dropped=%llu dropped_full=%llu dropped_busy=%llu "
	       "dropped_no_reader=%llu reconnects=%llu connected=%d\n",
	       phase, (unsigned long long)st.written, (unsigned long long)st.dropped,
	       (unsigned long long)st.dropped_full, (unsigned long long)st.dropped_busy,
	       (unsigned long long)st.dropped_no_reader, (unsigned long long)st.reconnects,
	       st.connected);
	fflush(stdout);
}

/* Logs n pairs; a pair refused is retried (queue full) for 5 s, so that every pair arrives. */
static int log_pairs(struct ndc_dnstap *d, const char *prefix, unsigned n, const char *extra)
{
	for (unsigned i = 0; i < n; i++) {
		uint64_t end = now_ns() + 5000000000ull;
		int err;

		while ((err = log_pair(d, prefix, i, extra)) == -ENOBUFS && now_ns() < end)
			usleep(1000);
		if (err) {
			fprintf(stderr, "dnstap_driver: pair %s%u: %s\n", prefix, i,
				strerror(-err));
			return -1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct ndc_dnstap_opts o = {
	    .identity = "dnstap-test-node", .reconnect_min_ms = 20, .reconnect_max_ms = 200};
	struct ndc_dnstap *d = NULL;
	struct ndc_dnstap_stats st;
	unsigned n;
	const char *mode, *extra;
	int err, rc = 1;

	if (argc < 4) {
		fprintf(stderr, "usage: dnstap_driver SOCK pairs|noreader|reconnect N [EXTRA]\n");
		return 2;
	}
	o.socket_path = argv[1];
	mode = argv[2];
	n = (unsigned)strtoul(argv[3], NULL, 10);
	extra = argc > 4 ? argv[4] : NULL;
	err = ndc_dnstap_open(&o, &d);
	if (err) {
		fprintf(stderr, "dnstap_driver: open: %s\n", strerror(-err));
		return 1;
	}
	if (!strcmp(mode, "pairs")) {
		if (wait_state(d, true, 10, "connected to the reader") ||
		    log_pairs(d, "q", n, extra))
			goto out;
		print_stats(d, "pairs");
		ndc_dnstap_close(d); /* flushes, STOP/FINISH; the counters are read before */
		d = NULL;
		printf("pairs done ns_per_log=%.1f\n",
		       log_calls ? (double)log_ns / log_calls : 0.0);
		rc = 0;
	} else if (!strcmp(mode, "noreader")) {
		/* the log calls alone: one prepared query, as a caller with its packet in hand */
		uint8_t q[300];
		struct in_addr client;
		struct ndc_dnstap_event ev = {.type = NDC_DNSTAP_CLIENT_QUERY,
					      .family = AF_INET,
					      .protocol = IPPROTO_UDP,
					      .query_addr = &client,
					      .wire = q,
					      .extra = extra,
					      .extra_len = extra ? strlen(extra) : 0};
		uint64_t t0, ns;

		inet_pton(AF_INET, "169.254.100.2", &client);
		ev.wire_len = message(q, "x", 1, 1, -1);
		t0 = now_ns();
		for (unsigned i = 0; i < n; i++)
			ndc_dnstap_log(d, &ev);
		ns = now_ns() - t0;
		ndc_dnstap_stats(d, &st);
		print_stats(d, "noreader");
		printf("noreader ns_per_log=%.1f\n", n ? (double)ns / n : 0.0);
		rc = st.dropped_no_reader == n && st.written == 0 ? 0 : 1;
	} else if (!strcmp(mode, "reconnect")) {
		if (wait_state(d, true, 10, "connected to the first reader") ||
		    log_pairs(d, "a", n, extra) || wait_written(d, 2 * (uint64_t)n, 10))
			goto out;
		print_stats(d, "phase1");
		/* the script stops the reader now; the writer notices its end closed */
		if (wait_state(d, false, 20, "saw the first reader go"))
			goto out;
		print_stats(d, "disconnected");
		/* logs meanwhile: each dropped (no reader), until the second reader is there */
		for (uint64_t end = now_ns() + 20000000000ull; now_ns() < end;) {
			ndc_dnstap_stats(d, &st);
			if (st.connected)
				break;
			log_pair(d, "lost", 0, extra);
			usleep(1000);
		}
		if (wait_state(d, true, 1, "connected to the second reader") ||
		    log_pairs(d, "b", n, extra))
			goto out;
		ndc_dnstap_stats(d, &st);
		print_stats(d, "phase2");
		rc = st.reconnects >= 1 && st.dropped_no_reader > 0 ? 0 : 1;
	} else {
		fprintf(stderr, "dnstap_driver: unknown mode %s\n", mode);
	}
out:
	if (d) {
		ndc_dnstap_close(d);
	}
	return rc;
}
