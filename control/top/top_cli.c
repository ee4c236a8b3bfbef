// SPDX-License-Identifier: MIT
/*
 * `ndcache top`: the running agent's /debug/top as a view that refreshes like top(1) (clients by
 * queries a second, their NXDOMAIN and upstream shares, limited counts; the most asked names,
 * overall and per client), or once (--once), or as JSON (--json) for scripts. It reads the
 * agent's metrics address (http.listen of --config, or --addr; 127.0.0.1:9254 by default) over
 * plain HTTP: no name lookup (a DNS cache's tool must work when DNS does not).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "config/config.h"
#include "top/cli.h"

#define FETCH_MAX (16u << 20) /* a /debug/top of 512 clients is about 1 MB */
#define FETCH_TIMEOUT_MS 5000
#define NDC_TOP_VIEW_NAME 1024 /* a name as the agent writes it (top.h's NDC_TOP_NAME_TEXT) */

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int parse_addr(const char *s, struct sockaddr_storage *ss, socklen_t *len)
{
	char host[INET6_ADDRSTRLEN + 2];
	const char *colon = strrchr(s, ':');
	struct sockaddr_in *s4 = (void *)ss;
	struct sockaddr_in6 *s6 = (void *)ss;
	char *end;
	long port;
	size_t hl;

	if (!colon)
		return -EINVAL;
	port = strtol(colon + 1, &end, 10);
	if (*end || port < 1 || port > 65535)
		return -EINVAL;
	hl = (size_t)(colon - s);
	if (hl >= 2 && s[0] == '[' && s[hl - 1] == ']') {
		s++;
		hl -= 2;
	}
	if (!hl || hl >= sizeof(host))
		return -EINVAL;
	memcpy(host, s, hl);
	host[hl] = '\0';
	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, host, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)port);
		*len = sizeof(*s4);
		return 0;
	}
	if (inet_pton(AF_INET6, host, &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)port);
		*len = sizeof(*s6);
		return 0;
	}
	return -EINVAL;
}

/* Waits for fd to be ready for events: 0, -ETIMEDOUT. */
static int wait_fd(int fd, short events)
{
	struct pollfd p = {.fd = fd, .events = events};
	int n = poll(&p, 1, FETCH_TIMEOUT_MS);

	return n > 0 ? 0 : n == 0 ? -ETIMEDOUT : -errno;
}

/* GET /debug/top: its body (malloc'ed) in *ret. 0, -errno, -EPROTO (not a 200), logged. */
static int fetch(const char *addr, char **ret, char *err, size_t errlen)
{
	static const char req[] = "GET /debug/top HTTP/1.1\r\nHost: ndcache\r\n"
				  "Connection: close\r\n\r\n";
	struct sockaddr_storage ss;
	socklen_t sl;
	char *buf = NULL, *body;
	size_t len = 0, cap = 0;
	int fd, r = parse_addr(addr, &ss, &sl);

	if (r < 0) {
		snprintf(err, errlen, "%s: not a numeric address:port", addr);
		return r;
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&ss, sl) < 0 ||
	    send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL) < 0) {
		r = -errno;
		snprintf(err, errlen, "%s: %s", addr, strerror(errno));
		goto out;
	}
	for (;;) {
		ssize_t n;

		if (len + 4096 + 1 > cap) {
			char *nb;

			cap = cap ? cap * 2 : 65536;
			nb = cap <= FETCH_MAX ? realloc(buf, cap) : NULL;
			if (!nb) {
				r = -E2BIG;
				snprintf(err, errlen, "%s: answer too large", addr);
				goto out;
			}
			buf = nb;
		}
		r = wait_fd(fd, POLLIN);
		if (r < 0) {
			snprintf(err, errlen, "%s: %s", addr, strerror(-r));
			goto out;
		}
		n = recv(fd, buf + len, cap - len - 1, 0);
		if (n < 0) {
			r = -errno;
			snprintf(err, errlen, "%s: %s", addr, strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	body = strstr(buf, "\r\n\r\n");
	if (strncmp(buf, "HTTP/1.1 200", 12) || !body) {
		char *eol = strchr(buf, '\r');

		if (eol)
			*eol = '\0';
		snprintf(err, errlen, "%s/debug/top: %s", addr, len ? buf : "no answer");
		r = -EPROTO;
		goto out;
	}
	body += 4;
	memmove(buf, body, len - (size_t)(body - buf) + 1);
	*ret = buf;
	buf = NULL;
	r = 0;
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	return r;
}

static uint64_t get_u64(struct json_object *o, const char *k)
{
	struct json_object *v;

	return json_object_object_get_ex(o, k, &v) ? json_object_get_uint64(v) : 0;
}

static const char *get_str(struct json_object *o, const char *k)
{
	struct json_object *v;

	return json_object_object_get_ex(o, k, &v) ? json_object_get_string(v) : "";
}

static struct json_object *get_arr(struct json_object *o, const char *k)
{
	struct json_object *v;

	return json_object_object_get_ex(o, k, &v) && json_object_is_type(v, json_type_array)
		   ? v
		   : NULL;
}

/*
 * What the agent sent, made safe for a terminal: the agent escapes names and validates pod names,
 * but the view prints nothing that could be a control sequence, whoever answered on the port.
 */
static const char *term_safe(const char *in, char *out, size_t cap)
{
	size_t i = 0;

	for (; in && in[i] && i + 1 < cap; i++)
		out[i] = (unsigned char)in[i] < 0x20 || (unsigned char)in[i] >= 0x7f ? '?' : in[i];
	out[i] = '\0';
	return out;
}

/* Who a client is, as the view shows it. */
static void who(struct json_object *cl, char *out, size_t cap)
{
	const char *owner = get_str(cl, "owner");

	if (!strcmp(owner, "pod"))
		snprintf(out, cap, "%s/%s", get_str(cl, "namespace"), get_str(cl, "pod"));
	else if (!strcmp(owner, "node"))
		snprintf(out, cap, "node/%s", get_str(cl, "node"));
	else
		snprintf(out, cap, "%s", get_str(cl, "addr"));
}

/* The same client's queries in prev (0: not there). */
static uint64_t prev_queries(struct json_object *prev, const char *addr)
{
	struct json_object *a = prev ? get_arr(prev, "clients") : NULL;
	size_t n = a ? json_object_array_length(a) : 0;

	for (size_t i = 0; i < n; i++) {
		struct json_object *cl = json_object_array_get_idx(a, i);

		if (!strcmp(get_str(cl, "addr"), addr))
			return get_u64(cl, "queries");
	}
	return 0;
}

static void show(struct json_object *cur, struct json_object *prev, unsigned rows, FILE *f)
{
	struct json_object *clients = get_arr(cur, "clients"), *names = get_arr(cur, "names");
	double secs =
	    prev ? (double)(get_u64(cur, "time_ms") - get_u64(prev, "time_ms")) / 1000.0 : 0.0;
	size_t n = clients ? json_object_array_length(clients) : 0;
	const char *node = get_str(cur, "node");
	json_bool en = 1;
	struct json_object *v;

	if (json_object_object_get_ex(cur, "clients_enabled", &v))
		en = json_object_get_boolean(v);
	fprintf(f, "ndcache top - node %s%s%s\n", *node ? node : "(no NODE_NAME: addresses)",
		en ? "" : " - per-client counts are off (log.clients: false)",
		secs > 0 ? "" : " - totals (rates from the next refresh)");
	fprintf(f, "%10s %10s %6s %6s %8s  %-44s %s\n", secs > 0 ? "QPS" : "-", "QUERIES", "NXDOM%",
		"UPST%", "LIMITED", "CLIENT", "TOP NAME");
	for (size_t i = 0; i < n && i < rows; i++) {
		struct json_object *cl = json_object_array_get_idx(clients, i);
		struct json_object *cn = get_arr(cl, "names");
		uint64_t q = get_u64(cl, "queries");
		char raw[320], name[320], top[NDC_TOP_VIEW_NAME], qps[32] = "-";

		who(cl, raw, sizeof(raw));
		term_safe(raw, name, sizeof(name));
		if (secs > 0) {
			uint64_t before = prev_queries(prev, get_str(cl, "addr"));

			snprintf(qps, sizeof(qps), "%.1f",
				 (double)(q >= before ? q - before : q) / secs);
		}
		fprintf(
		    f, "%10s %10llu %6.1f %6.1f %8llu  %-44s %s\n", qps, (unsigned long long)q,
		    100.0 * json_object_get_double(json_object_object_get(cl, "nxdomain_share")),
		    100.0 * json_object_get_double(json_object_object_get(cl, "upstream_share")),
		    (unsigned long long)get_u64(cl, "limited"), name,
		    term_safe(cn && json_object_array_length(cn)
				  ? get_str(json_object_array_get_idx(cn, 0), "name")
				  : "",
			      top, sizeof(top)));
	}
	fprintf(f, "\nMost asked names (socket path%s):\n",
		get_u64(cur, "names_total") ? "" : ", none yet");
	for (size_t i = 0; names && i < json_object_array_length(names) && i < rows; i++) {
		struct json_object *nm = json_object_array_get_idx(names, i);
		char top[NDC_TOP_VIEW_NAME];

		fprintf(f, "%10llu  %s\n", (unsigned long long)get_u64(nm, "count"),
			term_safe(get_str(nm, "name"), top, sizeof(top)));
	}
}

static void usage(FILE *f)
{
	fprintf(f, "Usage: ndcache top [--addr ADDR:PORT | --config FILE] [--once] [--json]\n"
		   "                  [--interval SECONDS] [--rows N]\n"
		   "\n"
		   "Which clients (pods, by namespace/name) send the most queries, their NXDOMAIN\n"
		   "and upstream shares, and the most asked names, from the agent's /debug/top.\n"
		   "--once prints one view (two reads --interval apart, for the rates) and exits;\n"
		   "--json prints /debug/top as it is (with --once: one read).\n");
}

int ndc_top_cli(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"addr", required_argument, NULL, 'a'},	{"config", required_argument, NULL, 'c'},
	    {"once", no_argument, NULL, 'o'},		{"json", no_argument, NULL, 'j'},
	    {"interval", required_argument, NULL, 'i'}, {"rows", required_argument, NULL, 'n'},
	    {"help", no_argument, NULL, 'h'},		{0},
	};
	const char *addr = NULL, *config = NULL;
	struct json_object *prev = NULL;
	bool once = false, json = false;
	double interval = 1.0;
	unsigned rows = 20;
	char *addr_copy = NULL;
	char err[512];
	int c, ret = 0;

	optind = 1;
	while ((c = getopt_long(argc, argv, "a:c:ojn:i:h", longopts, NULL)) != -1) {
		char *end;

		switch (c) {
		case 'a':
			addr = optarg;
			break;
		case 'c':
			config = optarg;
			break;
		case 'o':
			once = true;
			break;
		case 'j':
			json = true;
			break;
		case 'i':
			interval = strtod(optarg, &end);
			if (*end || !(interval >= 0.1 && interval <= 3600)) {
				fprintf(stderr, "ndcache top: --interval: 0.1 to 3600 seconds\n");
				return 2;
			}
			break;
		case 'n':
			rows = (unsigned)strtoul(optarg, &end, 10);
			if (*end || !rows || rows > 10000) {
				fprintf(stderr, "ndcache top: --rows: 1 to 10000\n");
				return 2;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "ndcache top: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (!addr && config) {
		struct ndc_config cfg;

		ndc_config_defaults(&cfg);
		if (ndc_config_load(config, &cfg, err, sizeof(err)) < 0) {
			fprintf(stderr, "ndcache top: %s\n", err);
			ndc_config_free(&cfg);
			return 1;
		}
		addr_copy = strdup(cfg.http.listen);
		ndc_config_free(&cfg);
		addr = addr_copy;
	}
	if (!addr)
		addr = "127.0.0.1:9254";
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	for (unsigned round = 0; !stop; round++) {
		struct json_object *cur;
		char *body = NULL;

		ret = fetch(addr, &body, err, sizeof(err));
		if (ret < 0) {
			fprintf(stderr, "ndcache top: %s\n", err);
			break;
		}
		if (json) {
			fputs(body, stdout);
			fflush(stdout);
			free(body);
			if (once)
				break;
		} else {
			cur = json_tokener_parse(body);
			free(body);
			if (!cur || !json_object_is_type(cur, json_type_object)) {
				fprintf(stderr,
					"ndcache top: %s/debug/top: not the JSON expected\n", addr);
				json_object_put(cur);
				ret = -EPROTO;
				break;
			}
			if (!once || round > 0) {
				if (!once)
					fputs("\033[H\033[2J", stdout);
				show(cur, prev, rows, stdout);
				fflush(stdout);
			}
			json_object_put(prev);
			prev = cur;
			if (once && round > 0)
				break;
		}
		struct timespec ts = {.tv_sec = (time_t)interval,
				      .tv_nsec =
					  (long)((interval - (double)(time_t)interval) * 1e9)};
		while (!stop && nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
	}
	json_object_put(prev);
	free(addr_copy);
	return ret < 0 ? 1 : 0;
}
