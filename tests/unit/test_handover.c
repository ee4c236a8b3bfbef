// SPDX-License-Identifier: MIT
/*
 * The handover protocol's messages (handover.h): what each side writes on the wire, and what
 * each refuses. A real running agent's side (ndc_handover_serve) is met by a raw successor, and
 * a real successor (ndc_handover_join, ndc_handover_takeover) by a scripted predecessor, both on
 * abstract unix sockets named after this process, so that runs side by side do not meet.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "handover.h"

#define WAIT_MS 2000 /* every wait of this test: a reply that does not come fails it */
/* A good start, then more than the successor reads in one message (64 bytes). */
#define LONG_FDS "FDS 1 0                                                                        ."

static void name_of(const char *what, char *out, size_t cap)
{
	snprintf(out, cap, "ndcache-test/%d/%s", (int)getpid(), what);
}

static socklen_t addr_of(const char *name, struct sockaddr_un *sa)
{
	size_t n = strlen(name);

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	memcpy(sa->sun_path + 1, name, n); /* abstract: a NUL first */
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

/* One SEQPACKET message with up to 64 descriptors; 0 or -errno. */
static int send_raw(int fd, const void *msg, size_t len, const int *fds, size_t nfds)
{
	char ctl[CMSG_SPACE(sizeof(int) * 64)] = {0};
	struct iovec iov = {.iov_base = (void *)msg, .iov_len = len};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};

	assert_true(nfds <= 64);
	if (nfds) {
		struct cmsghdr *c;

		m.msg_control = ctl;
		m.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	return sendmsg(fd, &m, MSG_NOSIGNAL) < 0 ? -errno : 0;
}

/*
 * One message into buf (NUL-terminated) and its descriptors; the length, 0 at EOF, or -ETIMEDOUT
 * when nothing came within WAIT_MS.
 */
static ssize_t recv_raw(int fd, char *buf, size_t cap, int *fds, size_t *ret_nfds)
{
	char ctl[CMSG_SPACE(sizeof(int) * 64)];
	struct iovec iov = {.iov_base = buf, .iov_len = cap - 1};
	struct msghdr m = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
	struct pollfd p = {.fd = fd, .events = POLLIN};
	ssize_t n;

	*ret_nfds = 0;
	if (poll(&p, 1, WAIT_MS) != 1)
		return -ETIMEDOUT;
	n = recvmsg(fd, &m, MSG_CMSG_CLOEXEC);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);

		assert_true(c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS);
		memcpy(fds + *ret_nfds, CMSG_DATA(c), k * sizeof(int));
		*ret_nfds += k;
	}
	return n;
}

/* Whether a and b are one open file (a pipe's end handed over is the same pipe). */
static bool same_pipe(int write_end, int got)
{
	char c = 0;

	return write(write_end, "x", 1) == 1 && read(got, &c, 1) == 1 && c == 'x';
}

/* ---- the running agent's side, met by a raw successor ----------------------------------- */

struct agent {
	char name[64];
	size_t n;	      /* descriptors handed over */
	int rd[160], wr[160]; /* the pipes they are the read ends of */
	atomic_int taken, given_back;
	struct ndc_handover *h;
};

static size_t agent_fds(void *arg, int *out, size_t cap)
{
	struct agent *a = arg;

	assert_true(a->n <= cap);
	memcpy(out, a->rd, a->n * sizeof(int));
	return a->n;
}

static void agent_taken(void *arg, bool taken)
{
	struct agent *a = arg;

	atomic_fetch_add(taken ? &a->taken : &a->given_back, 1);
}

/* hello_ms: the agent's hello_timeout_ms (0: its default). */
static void agent_start_hello(struct agent *a, const char *what, size_t n, int hello_ms)
{
	struct ndc_handover_ops ops = {
	    .fds = agent_fds, .taken = agent_taken, .arg = a, .hello_timeout_ms = hello_ms};

	memset(a, 0, sizeof(*a));
	name_of(what, a->name, sizeof(a->name));
	a->n = n;
	for (size_t i = 0; i < n; i++) {
		int p[2];

		assert_int_equal(pipe2(p, O_CLOEXEC), 0);
		a->rd[i] = p[0];
		a->wr[i] = p[1];
	}
	assert_int_equal(ndc_handover_serve(a->name, &ops, &a->h), 0);
}

static void agent_start(struct agent *a, const char *what, size_t n)
{
	agent_start_hello(a, what, n, 0);
}

static void agent_stop(struct agent *a)
{
	ndc_handover_stop(a->h);
	for (size_t i = 0; i < a->n; i++) {
		close(a->rd[i]);
		close(a->wr[i]);
	}
}

/* A raw successor's connection; the agent's listener may still be starting: retried. */
static int raw_connect(const char *name)
{
	struct sockaddr_un sa;
	socklen_t sl = addr_of(name, &sa);

	for (int i = 0; i < WAIT_MS / 10; i++) {
		int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

		assert_true(fd >= 0);
		if (connect(fd, (struct sockaddr *)&sa, sl) == 0)
			return fd;
		close(fd);
		usleep(10000);
	}
	fail_msg("nobody listens at %s", name);
	return -1;
}

static void wait_count(atomic_int *v, int want)
{
	for (int i = 0; i < WAIT_MS / 10 && atomic_load(v) != want; i++)
		usleep(10000);
	assert_int_equal(atomic_load(v), want);
}

/* A raw successor says HELLO 1: its connection, the first answer in buf and its descriptors. */
static int hello(const struct agent *a, char *buf, size_t cap, int *fds, size_t *ret_n)
{
	int fd = raw_connect(a->name);

	assert_int_equal(send_raw(fd, "HELLO 1", 7, NULL, 0), 0);
	assert_true(recv_raw(fd, buf, cap, fds, ret_n) > 0);
	return fd;
}

/* HELLO 1 is answered "FDS <total> <more>" with the descriptors; TAKEOVER with OK. */
static void test_serve_messages(void **state)
{
	struct agent a;
	char buf[128];
	int fds[64], fd;
	size_t got;

	(void)state;
	agent_start(&a, "serve", 2);
	fd = hello(&a, buf, sizeof(buf), fds, &got);
	assert_string_equal(buf, "FDS 2 0");
	assert_int_equal(got, 2);
	assert_true(same_pipe(a.wr[0], fds[0]));
	assert_true(same_pipe(a.wr[1], fds[1]));
	close(fds[0]);
	close(fds[1]);
	assert_false(ndc_handover_taken(a.h));

	assert_int_equal(send_raw(fd, "TAKEOVER", 8, NULL, 0), 0);
	assert_int_equal(recv_raw(fd, buf, sizeof(buf), fds, &got), 2);
	assert_string_equal(buf, "OK");
	assert_int_equal(got, 0);
	assert_true(ndc_handover_taken(a.h));
	assert_int_equal(atomic_load(&a.taken), 1);

	/* The successor that took over goes away: the agent is told, and serves again. */
	close(fd);
	wait_count(&a.given_back, 1);
	assert_false(ndc_handover_taken(a.h));
	agent_stop(&a);
}

/*
 * An agent with n descriptors answers HELLO 1 with the messages in want (each with want_n of
 * them, each the agent's own pipe, in order).
 */
static void expect_fds(const char *what, size_t n, const char *const *want, const size_t *want_n,
		       size_t msgs)
{
	struct agent a;
	char buf[128];
	int fds[64], fd;
	size_t got, total = 0;

	agent_start(&a, what, n);
	fd = hello(&a, buf, sizeof(buf), fds, &got);
	for (size_t i = 0; i < msgs; i++) {
		if (i)
			assert_true(recv_raw(fd, buf, sizeof(buf), fds, &got) > 0);
		assert_string_equal(buf, want[i]);
		assert_int_equal(got, want_n[i]);
		for (size_t k = 0; k < got; k++) {
			assert_true(same_pipe(a.wr[total + k], fds[k]));
			close(fds[k]);
		}
		total += got;
	}
	assert_int_equal(total, n);
	close(fd);
	agent_stop(&a);
}

/*
 * More descriptors than one message carries: chunks of 64, "more" 1 until the last; nothing to
 * hand over is still an answer.
 */
static void test_serve_chunks(void **state)
{
	static const char *const many[] = {"FDS 150 1", "FDS 150 1", "FDS 150 0"};
	static const size_t many_n[] = {64, 64, 22};
	static const char *const none[] = {"FDS 0 0"};
	static const size_t none_n[] = {0};

	(void)state;
	expect_fds("chunks", 150, many, many_n, 3);
	expect_fds("none", 0, none, none_n, 1);
}

/* Any other message (another version, a truncated one, noise) closes the connection. */
static void test_serve_refuses(void **state)
{
	static const char *const bad[] = {"HELLO 2", "HELLO",	"HELLO 1 ", "TAKE",
					  "OK",	     "FDS 1 0", "hello 1"};
	struct agent a;
	char buf[128];
	int fds[64];
	size_t got;

	(void)state;
	agent_start(&a, "refuses", 1);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int fd = raw_connect(a.name);

		assert_int_equal(send_raw(fd, bad[i], strlen(bad[i]), NULL, 0), 0);
		if (recv_raw(fd, buf, sizeof(buf), fds, &got) != 0)
			fail_msg("'%s' was answered '%s'", bad[i], buf);
		close(fd);
	}
	/* A message longer than the agent reads is refused, not read in part. */
	{
		char big[200];
		int fd = raw_connect(a.name);

		memset(big, 'A', sizeof(big));
		memcpy(big, "HELLO 1", 7);
		assert_int_equal(send_raw(fd, big, sizeof(big), NULL, 0), 0);
		assert_int_equal(recv_raw(fd, buf, sizeof(buf), fds, &got), 0);
		close(fd);
	}
	assert_int_equal(atomic_load(&a.taken), 0);
	assert_false(ndc_handover_taken(a.h));
	/* And it still serves a successor that speaks the protocol. */
	{
		int fd = hello(&a, buf, sizeof(buf), fds, &got);

		assert_string_equal(buf, "FDS 1 0");
		assert_int_equal(got, 1);
		close(fds[0]);
		close(fd);
	}
	agent_stop(&a);
}

/* How many peers the agent refused for why, once it is want (polled). */
static void wait_refused(const struct agent *a, enum ndc_handover_refusal why, uint64_t want)
{
	struct ndc_handover_stats st;

	for (int i = 0; i < WAIT_MS / 10; i++) {
		ndc_handover_stats(a->h, &st);
		if (st.refused[why] == want)
			return;
		usleep(10000);
	}
	fail_msg("refused for %s: %lu, not %lu", ndc_handover_refusal_name(why),
		 (unsigned long)st.refused[why], (unsigned long)want);
}

#define NOBODY 65534

/*
 * Runs fn(arg) in a child as uid NOBODY; its exit status (0: what fn expected happened). Needs
 * root (only root changes uid); otherwise the test is skipped.
 */
static int as_nobody(int (*fn)(void *), void *arg)
{
	pid_t pid;
	int st;

	if (geteuid() != 0) {
		skip();
		return -1;
	}
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* the child: no cmocka here, only an exit status */
		if (setresgid(NOBODY, NOBODY, NOBODY) < 0 || setresuid(NOBODY, NOBODY, NOBODY) < 0)
			_exit(90);
		_exit(fn(arg));
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st);
}

/* As another uid: connect, say HELLO; 0 when nothing came back but the connection's end. */
static int hello_from_nobody(void *arg)
{
	const struct agent *a = arg;
	struct sockaddr_un sa;
	socklen_t sl = addr_of(a->name, &sa);
	char buf[64], ctl[CMSG_SPACE(sizeof(int) * 64)];
	struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf) - 1};
	struct msghdr m = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
	struct pollfd p;
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	ssize_t n;

	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sl) < 0)
		return 91;
	/* the agent may have closed already: a failed send is no answer either */
	(void)send(fd, "HELLO 1", 7, MSG_NOSIGNAL);
	p = (struct pollfd){.fd = fd, .events = POLLIN};
	if (poll(&p, 1, WAIT_MS) != 1)
		return 92; /* held open: not refused */
	n = recvmsg(fd, &m, 0);
	/*
	 * A close with our HELLO unread reads as ECONNRESET: refused too. Only a successful read
	 * says anything of control data (msg_controllen is left as given when recvmsg fails).
	 */
	if (n < 0)
		return errno == ECONNRESET ? 0 : 94;
	if (n > 0 || CMSG_FIRSTHDR(&m))
		return 93; /* answered (FDS ...): the sockets went to another uid */
	return 0;
}

/* A peer of another uid is closed at once, unanswered, and counted; the agent serves on. */
static void test_serve_other_uid(void **state)
{
	struct agent a;
	char buf[128];
	int fds[64], fd, st;
	size_t got;

	(void)state;
	if (geteuid() != 0)
		skip();
	agent_start(&a, "uid", 5);
	fd = raw_connect(a.name); /* the listener is up before the child connects */
	close(fd);
	st = as_nobody(hello_from_nobody, &a);
	if (st)
		fail_msg("a peer of uid %d was served (child status %d)", NOBODY, st);
	wait_refused(&a, NDC_HANDOVER_REFUSED_UID, 1);
	assert_int_equal(atomic_load(&a.taken), 0);
	fd = hello(&a, buf, sizeof(buf), fds, &got);
	assert_string_equal(buf, "FDS 5 0");
	assert_int_equal(got, 5);
	for (size_t i = 0; i < got; i++)
		close(fds[i]);
	close(fd);
	agent_stop(&a);
}

/*
 * Peers that connect and say nothing hold every slot only until the hello timeout: then they are
 * dropped and counted, and a successor joins; one that said HELLO is kept past it.
 */
static void test_serve_idle(void **state)
{
	enum { HELLO_TIMEOUT_MS = 200, IDLE = 4 };
	struct agent a;
	char buf[128];
	int fds[64], idle[IDLE], fd;
	size_t got;

	(void)state;
	agent_start_hello(&a, "idle", 1, HELLO_TIMEOUT_MS);
	for (int i = 0; i < IDLE; i++)
		idle[i] = raw_connect(a.name);
	/* every slot held: one more is refused as such */
	fd = raw_connect(a.name);
	assert_int_equal(recv_raw(fd, buf, sizeof(buf), fds, &got), 0);
	close(fd);
	wait_refused(&a, NDC_HANDOVER_REFUSED_FULL, 1);
	for (int i = 0; i < IDLE; i++) {
		ssize_t r = recv_raw(idle[i], buf, sizeof(buf), fds, &got);

		if (r != 0)
			fail_msg("idle peer %d was not dropped (%zd)", i, r);
		close(idle[i]);
	}
	wait_refused(&a, NDC_HANDOVER_REFUSED_TIMEOUT, IDLE);
	fd = hello(&a, buf, sizeof(buf), fds, &got);
	assert_string_equal(buf, "FDS 1 0");
	assert_int_equal(got, 1);
	close(fds[0]);
	/* a successor that said HELLO may take long to be ready: not dropped at the timeout */
	usleep(3 * HELLO_TIMEOUT_MS * 1000);
	assert_int_equal(send_raw(fd, "TAKEOVER", 8, NULL, 0), 0);
	assert_int_equal(recv_raw(fd, buf, sizeof(buf), fds, &got), 2);
	assert_string_equal(buf, "OK");
	assert_true(ndc_handover_taken(a.h));
	wait_refused(&a, NDC_HANDOVER_REFUSED_TIMEOUT, IDLE);
	close(fd);
	wait_count(&a.given_back, 1);
	agent_stop(&a);
}

/* ---- the successor's side, met by a scripted predecessor -------------------------------- */

struct reply {
	const char *text; /* NULL: close without a word; "": say nothing (a timeout) */
	size_t len;	  /* 0: strlen(text) */
	size_t nfds;	  /* descriptors (ends of one pipe) sent with it */
};

struct predecessor {
	char name[64];
	int lfd, pipe[2];
	struct reply replies[4]; /* to HELLO 1, one after the other */
	struct reply to_takeover;
	char hello[64], takeover[64]; /* what the successor said */
	pthread_t thread;
};

static void reply_send(struct predecessor *p, int fd, const struct reply *r)
{
	int fds[64];

	for (size_t i = 0; i < r->nfds; i++)
		fds[i] = p->pipe[0];
	assert_int_equal(send_raw(fd, r->text, r->len ? r->len : strlen(r->text), fds, r->nfds), 0);
}

static void *predecessor_main(void *arg)
{
	struct predecessor *p = arg;
	struct pollfd pl = {.fd = p->lfd, .events = POLLIN};
	char scratch[64];
	int fds[64], fd;
	size_t got;

	if (poll(&pl, 1, WAIT_MS) != 1)
		return NULL;
	fd = accept4(p->lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return NULL;
	if (recv_raw(fd, p->hello, sizeof(p->hello), fds, &got) <= 0)
		goto out;
	for (size_t i = 0; i < 4 && p->replies[i].text; i++) {
		if (!p->replies[i].text[0] && !p->replies[i].len) {
			/* Silence: hold the connection until the successor gives up. */
			recv_raw(fd, scratch, sizeof(scratch), fds, &got);
			goto out;
		}
		reply_send(p, fd, &p->replies[i]);
	}
	if (!p->to_takeover.text)
		goto out;
	if (recv_raw(fd, p->takeover, sizeof(p->takeover), fds, &got) > 0)
		reply_send(p, fd, &p->to_takeover);
	/* Until the successor closes: it reads the reply first. */
	recv_raw(fd, scratch, sizeof(scratch), fds, &got);
out:
	close(fd);
	return NULL;
}

static void predecessor_start(struct predecessor *p, const char *what)
{
	struct sockaddr_un sa;
	socklen_t sl;

	name_of(what, p->name, sizeof(p->name));
	sl = addr_of(p->name, &sa);
	assert_int_equal(pipe2(p->pipe, O_CLOEXEC), 0);
	p->lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	assert_true(p->lfd >= 0);
	assert_int_equal(bind(p->lfd, (struct sockaddr *)&sa, sl), 0);
	assert_int_equal(listen(p->lfd, 1), 0);
	assert_int_equal(pthread_create(&p->thread, NULL, predecessor_main, p), 0);
}

static void predecessor_stop(struct predecessor *p)
{
	pthread_join(p->thread, NULL);
	close(p->lfd);
	close(p->pipe[0]);
	close(p->pipe[1]);
}

/*
 * join against a predecessor that answers HELLO with replies: join's result, and (on success)
 * the descriptors' count in *ret_n, each checked to be the predecessor's pipe and closed.
 */
static int join_against(const char *what, const struct reply *replies, size_t n_replies,
			int timeout_ms, size_t *ret_n)
{
	struct predecessor p = {0};
	struct ndc_handover_peer *peer = NULL;
	int *fds = NULL, r;

	memcpy(p.replies, replies, n_replies * sizeof(*replies));
	predecessor_start(&p, what);
	*ret_n = 0;
	r = ndc_handover_join(p.name, timeout_ms, &peer, &fds, ret_n);
	if (r == 0) {
		for (size_t i = 0; i < *ret_n; i++) {
			assert_true(same_pipe(p.pipe[1], fds[i]));
			close(fds[i]);
		}
	} else {
		assert_null(peer);
		assert_null(fds);
		assert_int_equal(*ret_n, 0);
	}
	free(fds);
	ndc_handover_peer_free(peer);
	predecessor_stop(&p);
	assert_string_equal(p.hello, "HELLO 1");
	return r;
}

static void test_join_accepts(void **state)
{
	size_t n;

	(void)state;
	{
		const struct reply r[] = {{.text = "FDS 1 0", .nfds = 1}};

		assert_int_equal(join_against("one", r, 1, WAIT_MS, &n), 0);
		assert_int_equal(n, 1);
	}
	{
		const struct reply r[] = {{.text = "FDS 3 1", .nfds = 2},
					  {.text = "FDS 3 0", .nfds = 1}};

		assert_int_equal(join_against("two", r, 2, WAIT_MS, &n), 0);
		assert_int_equal(n, 3);
	}
	{
		const struct reply r[] = {{.text = "FDS 0 0"}};

		assert_int_equal(join_against("zero", r, 1, WAIT_MS, &n), 0);
		assert_int_equal(n, 0);
	}
}

/* A bad or truncated answer fails the join and keeps no descriptor. */
static void test_join_refuses(void **state)
{
	static const struct {
		const char *what;
		struct reply r[2];
		int want;
	} cases[] = {
	    {"count", {{.text = "FDS 2 0", .nfds = 1}}, -EPROTO}, /* fewer than said */
	    {"extra", {{.text = "FDS 1 0", .nfds = 2}}, -EPROTO}, /* more than said */
	    {"bare", {{.text = "FDS", .nfds = 1}}, -EPROTO},	  /* truncated */
	    {"half", {{.text = "FDS 1", .nfds = 1}}, -EPROTO},	  /* truncated */
	    {"word", {{.text = "NOPE 1 0", .nfds = 1}}, -EPROTO}, /* another message */
	    {"huge", {{.text = "FDS 5000 0"}}, -EPROTO},	  /* over the maximum */
	    {"long", {{.text = LONG_FDS, .nfds = 1}}, -EMSGSIZE}, /* over the buffer */
	    {"closed", {{.text = NULL}}, -EPROTO},		  /* no answer, EOF */
	    {"cut", {{.text = "FDS 2 1", .nfds = 1}}, -EPROTO},	  /* EOF mid-way */
	};
	size_t n;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t k = cases[i].r[0].text ? 1 : 0;
		int r = join_against(cases[i].what, cases[i].r, k, WAIT_MS, &n);

		if (r != cases[i].want)
			fail_msg("%s: %d, not %d", cases[i].what, r, cases[i].want);
	}
}

/* A predecessor that never answers: the join gives up after its timeout. */
static void test_join_timeout(void **state)
{
	const struct reply r[] = {{.text = ""}};
	struct timespec a, b;
	size_t n;
	long ms;

	(void)state;
	clock_gettime(CLOCK_MONOTONIC, &a);
	assert_int_equal(join_against("silent", r, 1, 100, &n), -ETIMEDOUT);
	clock_gettime(CLOCK_MONOTONIC, &b);
	ms = (b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000;
	assert_true(ms >= 100 && ms < WAIT_MS);
}

/* Nobody at the name: -ENOENT (the successor starts on its own). */
static void test_join_nobody(void **state)
{
	struct ndc_handover_peer *peer = (void *)1;
	int *fds = (void *)1;
	char name[64];
	size_t n = 1;

	(void)state;
	name_of("nobody", name, sizeof(name));
	assert_int_equal(ndc_handover_join(name, WAIT_MS, &peer, &fds, &n), -ENOENT);
	assert_null(peer);
	assert_null(fds);
	assert_int_equal(n, 0);
}

/* TAKEOVER is what the successor says; only OK is an agreement. */
static int takeover_against(const char *what, const char *answer)
{
	struct predecessor p = {0};
	struct ndc_handover_peer *peer;
	int *fds, r;
	size_t n;

	p.replies[0] = (struct reply){.text = "FDS 0 0"};
	p.to_takeover = (struct reply){.text = answer};
	predecessor_start(&p, what);
	assert_int_equal(ndc_handover_join(p.name, WAIT_MS, &peer, &fds, &n), 0);
	r = ndc_handover_takeover(peer, WAIT_MS);
	ndc_handover_peer_free(peer);
	free(fds);
	predecessor_stop(&p);
	assert_string_equal(p.takeover, "TAKEOVER");
	return r;
}

static void test_takeover(void **state)
{
	(void)state;
	assert_int_equal(takeover_against("ok", "OK"), 0);
	assert_int_equal(takeover_against("no", "NO"), -EPROTO);
	assert_int_equal(takeover_against("okk", "OKK"), -EPROTO);
	assert_int_equal(takeover_against("o", "O"), -EPROTO);
}

/*
 * A listener of another uid (a squatter on the name) in a child: it answers HELLO with a
 * descriptor and TAKEOVER with OK, as an agent would. Ready is said on arg's pipe.
 */
struct squatter {
	char name[64];
	int ready[2];
};

static int squat(void *arg)
{
	struct squatter *q = arg;
	struct sockaddr_un sa;
	socklen_t sl = addr_of(q->name, &sa);
	struct pollfd p;
	char buf[64];
	int lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0), fd;
	ssize_t n;

	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sl) < 0 || listen(lfd, 1) < 0)
		return 91;
	if (write(q->ready[1], "r", 1) != 1)
		return 92;
	p = (struct pollfd){.fd = lfd, .events = POLLIN};
	if (poll(&p, 1, WAIT_MS) != 1)
		return 0; /* nobody came: fine too, the join said nothing */
	fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		return 93;
	for (;;) {
		p = (struct pollfd){.fd = fd, .events = POLLIN};
		if (poll(&p, 1, WAIT_MS) != 1)
			return 94;
		n = recv(fd, buf, sizeof(buf) - 1, 0);
		if (n <= 0)
			return 0; /* the successor went away */
		buf[n] = '\0';
		if (strcmp(buf, "HELLO 1") == 0)
			send_raw(fd, "FDS 1 0", 7, &q->ready[1], 1);
		else if (strcmp(buf, "TAKEOVER") == 0)
			send_raw(fd, "OK", 2, NULL, 0);
	}
}

/* A successor joins no listener of another uid: no descriptors, nothing to take over. */
static void test_join_other_uid(void **state)
{
	struct ndc_handover_peer *peer = (void *)1;
	struct squatter q;
	int *fds = (void *)1, st;
	struct pollfd p;
	size_t n = 1;
	pid_t pid;
	char c;

	(void)state;
	if (geteuid() != 0)
		skip();
	name_of("squat", q.name, sizeof(q.name));
	assert_int_equal(pipe2(q.ready, O_CLOEXEC), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (setresgid(NOBODY, NOBODY, NOBODY) < 0 || setresuid(NOBODY, NOBODY, NOBODY) < 0)
			_exit(90);
		_exit(squat(&q));
	}
	p = (struct pollfd){.fd = q.ready[0], .events = POLLIN};
	assert_int_equal(poll(&p, 1, WAIT_MS), 1);
	assert_int_equal(read(q.ready[0], &c, 1), 1);
	assert_int_equal(ndc_handover_join(q.name, WAIT_MS, &peer, &fds, &n), -EPERM);
	assert_null(peer);
	assert_null(fds);
	assert_int_equal(n, 0);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	close(q.ready[0]);
	close(q.ready[1]);
}

/* The real two sides together: what an upgrade does. */
static void test_join_agent(void **state)
{
	struct ndc_handover_peer *peer;
	struct agent a;
	int *fds, r = -ENOENT;
	size_t n;

	(void)state;
	agent_start(&a, "both", 70);
	for (int i = 0; i < WAIT_MS / 10 && r == -ENOENT; i++) {
		r = ndc_handover_join(a.name, WAIT_MS, &peer, &fds, &n);
		if (r == -ENOENT)
			usleep(10000); /* the agent's listener starts on its thread */
	}
	assert_int_equal(r, 0);
	assert_int_equal(n, 70);
	for (size_t i = 0; i < n; i++) {
		assert_true(same_pipe(a.wr[i], fds[i]));
		close(fds[i]);
	}
	free(fds);
	assert_int_equal(ndc_handover_takeover(peer, WAIT_MS), 0);
	assert_true(ndc_handover_taken(a.h));
	assert_int_equal(atomic_load(&a.taken), 1);
	ndc_handover_peer_free(peer);
	wait_count(&a.given_back, 1);
	agent_stop(&a);
}

static void count_gone(void *arg)
{
	atomic_fetch_add((atomic_int *)arg, 1);
}

/* Joins a fresh agent named what with 3 descriptors (closed here). */
static struct ndc_handover_peer *join_fresh(struct agent *a, const char *what)
{
	struct ndc_handover_peer *peer = NULL;
	int *fds, r = -ENOENT;
	size_t n = 0;

	agent_start(a, what, 3);
	for (int i = 0; i < WAIT_MS / 10 && r == -ENOENT; i++) {
		r = ndc_handover_join(a->name, WAIT_MS, &peer, &fds, &n);
		if (r == -ENOENT)
			usleep(10000); /* the agent's listener starts on its thread */
	}
	assert_int_equal(r, 0);
	for (size_t i = 0; i < n; i++)
		close(fds[i]);
	free(fds);
	return peer;
}

/*
 * The successor's watch: told once when the running agent closes the connection (it stopped
 * without a takeover), not while it serves nor for a takeover's OK; unwatched, never told.
 */
static void test_watch(void **state)
{
	struct ndc_handover_peer *peer;
	struct agent a;
	atomic_int gone = 0;
	struct pollfd p = {.fd = -1};

	(void)state;
	peer = join_fresh(&a, "watch");
	assert_int_equal(ndc_handover_peer_watch(peer, count_gone, &gone), 0);
	assert_int_equal(ndc_handover_peer_watch(peer, count_gone, &gone), -EINVAL);
	assert_int_equal(ndc_handover_takeover(peer, WAIT_MS), 0);
	poll(&p, 0, 200); /* serving on after the OK: not gone */
	assert_int_equal(atomic_load(&gone), 0);
	ndc_handover_close(a.h);
	ndc_handover_close(a.h);	      /* idempotent */
	assert_true(ndc_handover_taken(a.h)); /* its last value */
	wait_count(&gone, 1);
	ndc_handover_peer_free(peer);
	agent_stop(&a);
	assert_int_equal(atomic_load(&gone), 1);

	peer = join_fresh(&a, "unwatch");
	assert_int_equal(ndc_handover_peer_watch(peer, count_gone, &gone), 0);
	ndc_handover_peer_unwatch(peer);
	ndc_handover_peer_unwatch(peer);
	agent_stop(&a);
	poll(&p, 0, 200);
	assert_int_equal(atomic_load(&gone), 1);
	ndc_handover_peer_free(peer);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_serve_messages),  cmocka_unit_test(test_serve_chunks),
	    cmocka_unit_test(test_serve_refuses),   cmocka_unit_test(test_join_accepts),
	    cmocka_unit_test(test_watch),	    cmocka_unit_test(test_join_refuses),
	    cmocka_unit_test(test_join_timeout),    cmocka_unit_test(test_join_nobody),
	    cmocka_unit_test(test_takeover),	    cmocka_unit_test(test_join_agent),
	    cmocka_unit_test(test_serve_other_uid), cmocka_unit_test(test_serve_idle),
	    cmocka_unit_test(test_join_other_uid),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
