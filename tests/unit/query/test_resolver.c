// SPDX-License-Identifier: MIT
/*
 * The socket path end to end on 127.0.0.1: server, resolver, cache and forwarder as the agent
 * wires them (no record table: every name is forwarded), asked over UDP, with an upstream that
 * never answers (a bound socket nobody reads). What a client sees when the upstream is in
 * trouble:
 *   - an expired answer is served stale with TTL 30 on every record (RFC 8767 4), records
 *     whose own TTL was below 30 included;
 *   - a never-seen name gets SERVFAIL after the forward timeout, never silence;
 *   - beyond max_pending waiting queries, SERVFAIL at once.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <ndc/dns_wire.h>

#include "objects/objects.h"
#include "query/query.h"
#include "socket/socket.h"

/* The resolver answers the socket server's queries, as in the agent. */
static const struct ndc_query_io socket_io = {
    .is_tcp = ndc_socket_req_is_tcp,
    .peer = ndc_socket_req_peer,
    .detain = ndc_socket_detain,
    .complete = ndc_socket_complete,
};

struct env {
	int upstream; /* bound, never read: a frozen upstream */
	struct ndc_cache *cache;
	struct ndc_forwarder *fwd;
	struct ndc_resolver *res;
	struct ndc_socket *srv;
	int client;
};

static void env_init(struct env *e, uint32_t timeout_ms, uint32_t max_pending)
{
	struct sockaddr_storage up;
	struct sockaddr_in *sin = (struct sockaddr_in *)&up;
	socklen_t sl = sizeof(*sin);
	struct ndc_cache_opts co = {.max_entries = 1000,
				    .max_bytes = 1 << 20,
				    .max_ttl = 86400,
				    .neg_max_ttl = 3600,
				    .stale_max = 86400};
	struct ndc_forwarder_opts fo = {.n_upstreams = 1,
					.upstreams = &up,
					.timeout_ms = timeout_ms,
					.max_pending = max_pending};
	struct ndc_ip lo = {.family = AF_INET, .addr = {127, 0, 0, 1}};
	struct ndc_socket_opts so = {.n_addrs = 1, .addrs = &lo, .workers = 1};
	struct timeval tv = {.tv_sec = 5};

	memset(e, 0, sizeof(*e));
	memset(&up, 0, sizeof(up));
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	e->upstream = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	assert_true(e->upstream >= 0);
	assert_int_equal(bind(e->upstream, (struct sockaddr *)sin, sizeof(*sin)), 0);
	assert_int_equal(getsockname(e->upstream, (struct sockaddr *)sin, &sl), 0);
	assert_int_equal(ndc_cache_new(&co, &e->cache), 0);
	assert_int_equal(ndc_forwarder_new(&fo, e->cache, &e->fwd), 0);
	assert_int_equal(ndc_resolver_new(NULL, e->cache, e->fwd, &socket_io, &e->res), 0);
	assert_int_equal(ndc_socket_start(&so, ndc_resolver_handle, e->res, &e->srv), 0);
	e->client = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	assert_true(e->client >= 0);
	assert_int_equal(setsockopt(e->client, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
}

static void env_free(struct env *e)
{
	/* As the agent: the forwarder answers what it holds before the server goes. */
	ndc_forwarder_free(e->fwd);
	ndc_socket_stop(e->srv);
	ndc_resolver_free(e->res);
	ndc_cache_free(e->cache);
	close(e->client);
	close(e->upstream);
}

static void ask(struct env *e, uint16_t id, const char *name)
{
	struct sockaddr_in to = {.sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				 .sin_port = htons(ndc_socket_port(e->srv))};
	uint8_t wire[NDC_NAME_MAX], q[512];
	size_t nlen, len;

	assert_int_equal(ndc_name_from_text(name, wire, sizeof(wire), &nlen), 0);
	assert_int_equal(
	    ndc_dns_write_query(id, wire, nlen, NDC_T_A, NDC_C_IN, 1232, q, sizeof(q), &len), 0);
	assert_int_equal(sendto(e->client, q, len, 0, (struct sockaddr *)&to, sizeof(to)),
			 (ssize_t)len);
}

/* Waits for the reply to id; returns its length (0 on timeout). */
static size_t reply(struct env *e, uint16_t id, uint8_t *buf, size_t cap)
{
	for (;;) {
		ssize_t n = recv(e->client, buf, cap, 0);

		if (n < 0)
			return 0;
		if (n >= NDC_DNS_HDR_LEN && ndc_get16(buf) == id)
			return (size_t)n;
	}
}

/* Skips a name at *pos (labels, then a pointer or the root). */
static void skip_name(const uint8_t *m, size_t len, size_t *pos)
{
	while (*pos < len) {
		uint8_t c = m[*pos];

		if ((c & 0xc0) == 0xc0) {
			*pos += 2;
			return;
		}
		*pos += 1 + c;
		if (!c)
			return;
	}
	fail_msg("name runs past the message");
}

/* Every TTL in the answer and authority sections; returns how many RRs there were. */
static unsigned all_ttls(const uint8_t *m, size_t len, uint32_t *ttls, unsigned max)
{
	unsigned n = ndc_get16(m + 6) + ndc_get16(m + 8), i;
	size_t pos = NDC_DNS_HDR_LEN;

	assert_int_equal(ndc_get16(m + 4), 1);
	skip_name(m, len, &pos);
	pos += 4;
	for (i = 0; i < n && i < max; i++) {
		skip_name(m, len, &pos);
		assert_true(pos + 10 <= len);
		ttls[i] = ndc_get32(m + pos + 4);
		pos += 10 + ndc_get16(m + pos + 8);
		assert_true(pos <= len);
	}
	return i;
}

/* short.example.test CNAME (TTL 3600) to target.example.test A 192.0.2.7 (TTL 2). */
static void put_expired(struct env *e)
{
	static const uint8_t rd_a[4] = {192, 0, 2, 7};
	struct {
		struct ndc_answer a;
		uint8_t data[512];
	} ans;
	uint8_t name[NDC_NAME_MAX], target[NDC_NAME_MAX];
	size_t nlen, tlen;
	struct ndc_ab b;

	assert_int_equal(ndc_name_from_text("short.example.test", name, sizeof(name), &nlen), 0);
	assert_int_equal(ndc_name_from_text("target.example.test", target, sizeof(target), &tlen),
			 0);
	ndc_ab_init(&b, &ans.a, sizeof(ans.data), name, nlen);
	ndc_ab_rr(&b, NDC_SEC_ANSWER, name, nlen, NDC_T_CNAME, NDC_C_IN, 3600, target, tlen);
	ndc_ab_rr(&b, NDC_SEC_ANSWER, target, tlen, NDC_T_A, NDC_C_IN, 2, rd_a, 4);
	assert_int_equal(ndc_ab_finish(&b, NDC_RCODE_NOERROR, false), 0);
	/* Stored 60 s ago for its 2 s: expired, well within stale_max. */
	assert_int_equal(
	    ndc_cache_put(e->cache, name, nlen, NDC_T_A, NDC_C_IN, &ans.a, 2, ndc_now_ms() - 60000),
	    0);
}

static void test_stale_ttl_30(void **state)
{
	struct env e;
	uint8_t buf[4096];
	uint32_t ttls[8];
	size_t len;

	(void)state;
	env_init(&e, 200, 0);
	put_expired(&e);
	ask(&e, 0x1234, "short.example.test");
	len = reply(&e, 0x1234, buf, sizeof(buf));
	assert_true(len > 0);
	assert_int_equal(ndc_get16(buf + 2) & NDC_F_RCODE_MASK, NDC_RCODE_NOERROR);
	assert_int_equal(all_ttls(buf, len, ttls, 8), 2);
	assert_int_equal(ttls[0], NDC_STALE_TTL); /* the CNAME's 3600 */
	assert_int_equal(ttls[1], NDC_STALE_TTL); /* the A's 2 */
	env_free(&e);
}

static void test_never_silent(void **state)
{
	struct ndc_resolver_stats rs;
	struct env e;
	uint8_t buf[4096];
	uint64_t t0, dt;
	size_t len;

	(void)state;
	env_init(&e, 300, 0);
	for (uint16_t id = 1; id <= 3; id++) {
		char name[64];

		snprintf(name, sizeof(name), "never-seen-%u.example.test", id);
		t0 = ndc_now_ms();
		ask(&e, id, name);
		len = reply(&e, id, buf, sizeof(buf));
		dt = ndc_now_ms() - t0;
		assert_true(len > 0);
		assert_int_equal(ndc_get16(buf + 2) & NDC_F_RCODE_MASK, NDC_RCODE_SERVFAIL);
		/* One timeout, with room for a loaded machine; never the client's own 5 s. */
		assert_true(dt >= 290);
		assert_true(dt < 2000);
	}
	ndc_resolver_stats(e.res, &rs);
	assert_int_equal(rs.servfail, 3);
	env_free(&e);
}

static void test_max_pending(void **state)
{
	struct ndc_forwarder_stats fs;
	struct env e;
	uint8_t buf[4096];
	uint64_t t0;
	size_t len;

	(void)state;
	env_init(&e, 5000, 2);
	ask(&e, 1, "a.example.test");
	ask(&e, 2, "b.example.test");
	/* Both are held by the forwarder before the third arrives. */
	for (int i = 0; i < 200; i++) {
		ndc_forwarder_stats(e.fwd, &fs);
		if (fs.pending == 2)
			break;
		usleep(10000);
	}
	assert_int_equal(fs.pending, 2);
	t0 = ndc_now_ms();
	ask(&e, 3, "c.example.test");
	len = reply(&e, 3, buf, sizeof(buf));
	assert_true(len > 0);
	assert_int_equal(ndc_get16(buf + 2) & NDC_F_RCODE_MASK, NDC_RCODE_SERVFAIL);
	assert_true(ndc_now_ms() - t0 < 1000);
	ndc_forwarder_stats(e.fwd, &fs);
	assert_int_equal(fs.rejected, 1);
	env_free(&e);
}

/*
 * Query log, sampled 1.0: a cache hit and a forwarded query that fails each give one line with
 * the client, the question, the rcode and the source; sampled 0 (off) gives none.
 */
static void test_query_log(void **state)
{
	struct env e;
	uint8_t buf[4096];
	char line[8192], want[64];
	FILE *tmp = tmpfile();
	int saved = dup(STDERR_FILENO);
	struct sockaddr_in me;
	socklen_t sl = sizeof(me);
	ssize_t n;

	(void)state;
	assert_non_null(tmp);
	env_init(&e, 200, 0);
	put_expired(&e);
	assert_int_equal(dup2(fileno(tmp), STDERR_FILENO), STDERR_FILENO);
	ask(&e, 7, "unlogged.example.test");
	assert_true(reply(&e, 7, buf, sizeof(buf)) > 0);
	ndc_resolver_set_query_log(e.res, 1000000);
	ask(&e, 8, "never-seen.example.test");
	assert_true(reply(&e, 8, buf, sizeof(buf)) > 0);
	ndc_resolver_set_query_log(e.res, 0);
	ask(&e, 9, "unlogged.example.test");
	assert_true(reply(&e, 9, buf, sizeof(buf)) > 0);
	assert_int_equal(dup2(saved, STDERR_FILENO), STDERR_FILENO);
	close(saved);
	n = pread(fileno(tmp), line, sizeof(line) - 1, 0);
	assert_true(n > 0);
	line[n] = '\0';
	fclose(tmp);
	assert_int_equal(getsockname(e.client, (struct sockaddr *)&me, &sl), 0);
	snprintf(want, sizeof(want), "client=127.0.0.1:%u id=8 ", ntohs(me.sin_port));
	assert_non_null(strstr(line, "ndcache: info: query "));
	assert_non_null(strstr(line, want));
	assert_non_null(strstr(line, " type=A class=IN name=never-seen.example.test. proto=udp "));
	assert_non_null(strstr(line, " rcode=SERVFAIL "));
	assert_non_null(strstr(line, " source=error duration_us="));
	assert_null(strstr(line, "unlogged"));
	env_free(&e);
}

/* The resolver serves no server it has not been wired to: every call of the io is needed. */
static void test_io_required(void **state)
{
	struct ndc_query_io io = socket_io;
	struct ndc_resolver *res = NULL;

	(void)state;
	assert_int_equal(ndc_resolver_new(NULL, NULL, NULL, NULL, &res), -EINVAL);
	io.detain = NULL;
	assert_int_equal(ndc_resolver_new(NULL, NULL, NULL, &io, &res), -EINVAL);
	assert_null(res);
	assert_int_equal(ndc_resolver_new(NULL, NULL, NULL, &socket_io, &res), 0);
	ndc_resolver_free(res);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_stale_ttl_30), cmocka_unit_test(test_never_silent),
	    cmocka_unit_test(test_max_pending),	 cmocka_unit_test(test_query_log),
	    cmocka_unit_test(test_io_required),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
