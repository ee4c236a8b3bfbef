// SPDX-License-Identifier: MIT
/*
 * The latency prober of tests/bench/latency_bench.sh: one DNS query in flight at a time, paced,
 * so that what it measures is the server's answer time and not its own queueing (dnsperf's -v
 * latencies at 40k QPS were its own queue on the CPU it shares with the in-kernel path: DESIGN,
 * "Facts measured"). The send time is taken just before send(2); the receive time is the
 * kernel's (SO_TIMESTAMPNS: when the reply entered the stack of the prober's netns), so neither
 * the prober's wake-up nor its copy of the reply counts. Pin it to a CPU of its own (-c).
 *
 * Usage: bench_prober -s ADDR -f QUERIES [-p PORT] [-B PORT] [-r QPS] [-d SECONDS]
 *                     [-t TIMEOUT_MS] [-c CPU] [-P PRIO] [-e] [-w FILE]
 *   -s ADDR      server, IPv4 or IPv6
 *   -f QUERIES   "name [type]" lines (dnsperf's format; type A when absent), asked in order, cycled
 *   -p PORT      server port (53)
 *   -B PORT      local port to send from (0: any). kxdpgun's XDP program on the same interface
 *                takes replies to its own port range: send from below it
 *   -r QPS       pace: a query every 1/QPS s, or as soon as the previous one ended (2000)
 *   -d SECONDS   how long to send (10)
 *   -t MS        a query unanswered after MS is lost (250)
 *   -c CPU       pin to this CPU
 *   -P PRIO      SCHED_FIFO at this priority (sends on time on a busy CPU; it sleeps in between)
 *   -e           echo mode: the reply is the query itself (the reflector); only ID and bytes
 *   -w FILE      every query's latency in ns, one per line in send order, "lost" for a lost one
 * Output: one JSON object on stdout: sent, answered, lost, wrong (an answer that is not a
 * NOERROR reply with an answer to the question asked), late (replies after their query's
 * timeout), no_ts (replies without a kernel timestamp: their receive time taken after recvmsg),
 * p50_ns, p99_ns, p999_ns, max_ns (nearest rank over every sent query, a lost one ranked last:
 * null when the rank falls on one), duration_s. Exit 0, 1 on errors, 2 on bad usage.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#define MSG_MAX 1500
#define NAME_MAX_WIRE 255
#define LOST UINT64_MAX

struct query {
	uint8_t wire[NAME_MAX_WIRE + 4]; /* name, QTYPE, QCLASS */
	uint16_t len;
};

struct opts {
	const char *server;
	const char *queries;
	const char *samples;
	uint16_t port;
	uint16_t bind_port;
	double qps;
	double duration;
	int timeout_ms;
	int cpu;
	int prio;
	bool echo;
};

static int usage(void)
{
	fprintf(stderr, "usage: bench_prober -s ADDR -f QUERIES [-p PORT] [-B PORT] [-r QPS] "
			"[-d SECONDS] [-t TIMEOUT_MS] [-c CPU] [-P PRIO] [-e] [-w FILE]\n");
	return 2;
}

static uint64_t ts_ns(const struct timespec *ts)
{
	return (uint64_t)ts->tv_sec * 1000000000ull + (uint64_t)ts->tv_nsec;
}

static uint64_t now_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return ts_ns(&ts);
}

static int type_code(const char *t)
{
	static const struct {
		const char *name;
		int code;
	} types[] = {{"A", 1},	 {"NS", 2},   {"CNAME", 5}, {"SOA", 6},	 {"PTR", 12},
		     {"MX", 15}, {"TXT", 16}, {"AAAA", 28}, {"SRV", 33}, {"ANY", 255}};

	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (!strcasecmp(t, types[i].name))
			return types[i].code;
	return -1;
}

/* "a.b.c." or "a.b.c" -> wire form; 0 or -1. */
static int name_to_wire(const char *text, struct query *q)
{
	size_t pos = 0, n = strlen(text);

	if (n && text[n - 1] == '.')
		n--;
	for (size_t i = 0; i < n;) {
		size_t j = i;

		while (j < n && text[j] != '.')
			j++;
		if (j == i || j - i > 63 || pos + 1 + (j - i) + 1 > NAME_MAX_WIRE)
			return -1;
		q->wire[pos++] = (uint8_t)(j - i);
		memcpy(q->wire + pos, text + i, j - i);
		pos += j - i;
		i = j + 1;
	}
	q->wire[pos++] = 0;
	q->len = (uint16_t)pos;
	return 0;
}

static int load_queries(const char *path, struct query **ret, size_t *ret_n)
{
	char line[512], name[300], type[16];
	struct query *qs = NULL;
	size_t n = 0, cap = 0;
	FILE *f = fopen(path, "re");

	if (!f) {
		fprintf(stderr, "bench_prober: %s: %s\n", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		int k = sscanf(line, "%299s %15s", name, type), code = 1;

		if (k < 1 || name[0] == '#')
			continue;
		if (k == 2 && (code = type_code(type)) < 0) {
			fprintf(stderr, "bench_prober: unknown type %s\n", type);
			goto fail;
		}
		if (n == cap) {
			struct query *more =
			    realloc(qs, (cap = cap ? 2 * cap : 1024) * sizeof(*qs));

			if (!more)
				goto fail;
			qs = more;
		}
		if (name_to_wire(name, &qs[n])) {
			fprintf(stderr, "bench_prober: bad name %s\n", name);
			goto fail;
		}
		qs[n].wire[qs[n].len++] = (uint8_t)(code >> 8);
		qs[n].wire[qs[n].len++] = (uint8_t)code;
		qs[n].wire[qs[n].len++] = 0;
		qs[n].wire[qs[n].len++] = 1; /* IN */
		n++;
	}
	fclose(f);
	if (!n) {
		fprintf(stderr, "bench_prober: no queries in %s\n", path);
		free(qs);
		return -1;
	}
	*ret = qs;
	*ret_n = n;
	return 0;
fail:
	fclose(f);
	free(qs);
	return -1;
}

static int open_socket(const struct opts *o)
{
	struct sockaddr_storage srv = {0}, loc = {0};
	socklen_t slen;
	int fd, on = 1;

	if (inet_pton(AF_INET, o->server, &((struct sockaddr_in *)&srv)->sin_addr) == 1) {
		struct sockaddr_in *s = (struct sockaddr_in *)&srv, *l = (struct sockaddr_in *)&loc;

		s->sin_family = l->sin_family = AF_INET;
		s->sin_port = htons(o->port);
		l->sin_port = htons(o->bind_port);
		slen = sizeof(*s);
	} else if (inet_pton(AF_INET6, o->server, &((struct sockaddr_in6 *)&srv)->sin6_addr) == 1) {
		struct sockaddr_in6 *s = (struct sockaddr_in6 *)&srv,
				    *l = (struct sockaddr_in6 *)&loc;

		s->sin6_family = l->sin6_family = AF_INET6;
		s->sin6_port = htons(o->port);
		l->sin6_port = htons(o->bind_port);
		slen = sizeof(*s);
	} else {
		fprintf(stderr, "bench_prober: bad address %s\n", o->server);
		return -1;
	}
	fd = socket(srv.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof(on)) < 0 ||
	    bind(fd, (struct sockaddr *)&loc, slen) < 0 ||
	    connect(fd, (struct sockaddr *)&srv, slen) < 0) {
		fprintf(stderr, "bench_prober: socket to %s: %s\n", o->server, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* Whether reply answers msg (a query of qlen bytes): NOERROR, one question equal to it, answers. */
static bool answer_ok(const uint8_t *msg, size_t qlen, const uint8_t *r, size_t rlen, bool echo)
{
	if (echo)
		return rlen == qlen && !memcmp(r, msg, qlen);
	if (rlen < qlen || !(r[2] & 0x80) || (r[2] & 0x78) || (r[3] & 0x0f))
		return false; /* not a response, not QUERY, not NOERROR */
	if (r[4] != 0 || r[5] != 1 || (r[6] == 0 && r[7] == 0))
		return false; /* QDCOUNT 1, ANCOUNT > 0 */
	/* the question as asked (the server echoes it; we ask in lowercase) */
	for (size_t i = 12; i < qlen; i++)
		if (r[i] != msg[i] && !(r[i] >= 'A' && r[i] <= 'Z' && r[i] + 32 == msg[i]))
			return false;
	return true;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Nearest rank over n sorted values, LOST ranked last; printed as null when it falls on one. */
static void print_rank(const char *label, const uint64_t *sorted, size_t n, double pct)
{
	size_t rank = (size_t)(pct / 100.0 * (double)n + 0.999999999);

	if (rank < 1)
		rank = 1;
	if (n == 0 || sorted[rank - 1] == LOST)
		printf(", \"%s\": null", label);
	else
		printf(", \"%s\": %llu", label, (unsigned long long)sorted[rank - 1]);
}

int main(int argc, char **argv)
{
	struct opts o = {.port = 53, .qps = 2000, .duration = 10, .timeout_ms = 250, .cpu = -1};
	uint64_t sent = 0, answered = 0, lost = 0, wrong = 0, late = 0, no_ts = 0;
	uint64_t *lat = NULL, interval, next, start, end;
	struct query *qs = NULL;
	size_t nq = 0, cap;
	uint16_t id;
	int c, fd;

	while ((c = getopt(argc, argv, "s:f:p:B:r:d:t:c:P:ew:")) != -1) {
		switch (c) {
		case 's':
			o.server = optarg;
			break;
		case 'f':
			o.queries = optarg;
			break;
		case 'p':
			o.port = (uint16_t)atoi(optarg);
			break;
		case 'B':
			o.bind_port = (uint16_t)atoi(optarg);
			break;
		case 'r':
			o.qps = atof(optarg);
			break;
		case 'd':
			o.duration = atof(optarg);
			break;
		case 't':
			o.timeout_ms = atoi(optarg);
			break;
		case 'c':
			o.cpu = atoi(optarg);
			break;
		case 'P':
			o.prio = atoi(optarg);
			break;
		case 'e':
			o.echo = true;
			break;
		case 'w':
			o.samples = optarg;
			break;
		default:
			return usage();
		}
	}
	if (!o.server || !o.queries || o.qps <= 0 || o.qps > 1e6 || o.duration <= 0 ||
	    o.duration > 3600 || o.timeout_ms <= 0)
		return usage();
	if (o.cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(o.cpu, &set);
		if (sched_setaffinity(0, sizeof(set), &set) < 0) {
			fprintf(stderr, "bench_prober: CPU %d: %s\n", o.cpu, strerror(errno));
			return 1;
		}
	}
	if (o.prio > 0) {
		struct sched_param sp = {.sched_priority = o.prio};

		if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0) {
			fprintf(stderr, "bench_prober: SCHED_FIFO %d: %s\n", o.prio,
				strerror(errno));
			return 1;
		}
	}
	if (load_queries(o.queries, &qs, &nq))
		return 1;
	fd = open_socket(&o);
	if (fd < 0)
		return 1;
	cap = (size_t)(o.qps * o.duration) + 16;
	lat = malloc(cap * sizeof(*lat));
	if (!lat)
		return 1;
	id = (uint16_t)(now_ns(CLOCK_MONOTONIC) ^ (uint64_t)getpid());

	interval = (uint64_t)(1e9 / o.qps);
	start = now_ns(CLOCK_MONOTONIC);
	end = start + (uint64_t)(o.duration * 1e9);
	for (next = start; sent < cap;) {
		uint8_t msg[12 + sizeof(qs->wire)], reply[MSG_MAX];
		const struct query *q = &qs[sent % nq];
		struct timespec ts_next = {(time_t)(next / 1000000000ull),
					   (long)(next % 1000000000ull)};
		uint64_t t_send, deadline, now;
		size_t qlen = 12 + q->len;
		bool done = false;

		if (next >= end)
			break;
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts_next, NULL);
		id++;
		memset(msg, 0, 12);
		msg[0] = (uint8_t)(id >> 8);
		msg[1] = (uint8_t)id;
		msg[2] = 0x01; /* RD */
		msg[5] = 1;    /* QDCOUNT */
		memcpy(msg + 12, q->wire, q->len);

		t_send = now_ns(CLOCK_REALTIME);
		if (send(fd, msg, qlen, 0) < 0) {
			fprintf(stderr, "bench_prober: send: %s\n", strerror(errno));
			return 1;
		}
		deadline = now_ns(CLOCK_MONOTONIC) + (uint64_t)o.timeout_ms * 1000000ull;
		lat[sent] = LOST;
		while (!done && (now = now_ns(CLOCK_MONOTONIC)) < deadline) {
			struct pollfd pfd = {.fd = fd, .events = POLLIN};
			char cbuf[CMSG_SPACE(sizeof(struct timespec))];
			struct iovec iov = {reply, sizeof(reply)};
			struct msghdr mh = {.msg_iov = &iov,
					    .msg_iovlen = 1,
					    .msg_control = cbuf,
					    .msg_controllen = sizeof(cbuf)};
			uint64_t t_recv = 0;
			ssize_t n;

			if (poll(&pfd, 1, (int)((deadline - now + 999999) / 1000000)) <= 0)
				continue;
			n = recvmsg(fd, &mh, MSG_DONTWAIT);
			if (n < 0)
				continue; /* ICMP unreachable (no server yet), EAGAIN */
			for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
				if (cm->cmsg_level == SOL_SOCKET &&
				    cm->cmsg_type == SCM_TIMESTAMPNS)
					t_recv = ts_ns((const struct timespec *)CMSG_DATA(cm));
			if (!t_recv) {
				t_recv = now_ns(CLOCK_REALTIME);
				no_ts++;
			}
			if (n < 12 || reply[0] != msg[0] || reply[1] != msg[1]) {
				late++; /* an earlier query's, after its timeout */
				continue;
			}
			done = true;
			if (!answer_ok(msg, qlen, reply, (size_t)n, o.echo)) {
				wrong++;
				continue;
			}
			lat[sent] = t_recv > t_send ? t_recv - t_send : 0;
			answered++;
		}
		if (lat[sent] == LOST && !done)
			lost++;
		sent++;
		/* one in flight: the next slot that has not begun, no catching up in a burst */
		next += interval;
		now = now_ns(CLOCK_MONOTONIC);
		if (next < now)
			next += (now - next + interval - 1) / interval * interval;
	}
	close(fd);

	if (o.samples) {
		FILE *f = fopen(o.samples, "we");

		if (!f) {
			fprintf(stderr, "bench_prober: %s: %s\n", o.samples, strerror(errno));
			return 1;
		}
		for (uint64_t i = 0; i < sent; i++) {
			if (lat[i] == LOST)
				fputs("lost\n", f);
			else
				fprintf(f, "%llu\n", (unsigned long long)lat[i]);
		}
		if (fclose(f)) {
			fprintf(stderr, "bench_prober: %s: %s\n", o.samples, strerror(errno));
			return 1;
		}
	}
	qsort(lat, sent, sizeof(*lat), cmp_u64);
	printf(
	    "{\"sent\": %llu, \"answered\": %llu, \"lost\": %llu, \"wrong\": %llu, \"late\": %llu, "
	    "\"no_ts\": %llu",
	    (unsigned long long)sent, (unsigned long long)answered, (unsigned long long)lost,
	    (unsigned long long)wrong, (unsigned long long)late, (unsigned long long)no_ts);
	print_rank("p50_ns", lat, sent, 50);
	print_rank("p99_ns", lat, sent, 99);
	print_rank("p999_ns", lat, sent, 99.9);
	print_rank("max_ns", lat, sent, 100);
	printf(", \"duration_s\": %.3f}\n", (double)(now_ns(CLOCK_MONOTONIC) - start) / 1e9);
	free(lat);
	free(qs);
	return 0;
}
