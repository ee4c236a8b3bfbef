// SPDX-License-Identifier: MIT
/*
 * Upgrades (handover.h): joining a running agent at start (its sockets become ours), attaching
 * the fast path once we can serve everything it did, telling it so; serving the next agent, and
 * leaving it the fast path at our shutdown.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ndc/log.h>

#include "handover.h"
#include "http/http.h"
#include "internal.h"
#include "query/query.h"
#include "socket/socket.h"

/*
 * Under attach_lock: the server reads its sockets from now on (held until now in an upgrade), and
 * the loop check goes out (one that comes back can be seen only by a server that reads).
 */
static void read_sockets(struct agent *ag, const char *why)
{
	int err;

	if (!ag->srv || ag->up.reading)
		return;
	err = ndc_socket_read_start(ag->srv);
	if (err < 0) {
		ndc_err("handover: cannot read the sockets %s: %s", why, strerror(-err));
		return;
	}
	ag->up.reading = true;
	if (ag->up.pred)
		ndc_info("handover: reading the sockets %s", why);
	ndc_forwarder_loop_check(ag->query.fwd);
}

/* On the watch's thread: the predecessor stopped without our takeover, or died. */
static void pred_gone(void *arg)
{
	struct agent *ag = arg;

	pthread_mutex_lock(&ag->up.attach_lock);
	ag->up.pred_gone = true;
	if (!ag->up.taken_over)
		read_sockets(ag, "now: the running agent went away before our takeover");
	pthread_mutex_unlock(&ag->up.attach_lock);
}

/*
 * A successor that read the shared sockets before its takeover would own every query it read:
 * killed then (a failed start, an OOM kill), it would take the forwarded ones with it, though the
 * predecessor serves on. Held, it reads nothing until it serves all the predecessor did.
 */
void ndc_agent_hold_start(struct agent *ag)
{
	if (ag->up.pred) {
		int err = ndc_handover_peer_watch(ag->up.pred, pred_gone, ag);

		if (err == 0) {
			ndc_info(
			    "handover: the running agent reads the sockets until our takeover");
			return;
		}
		ndc_warn("handover: cannot watch the running agent (%s)", strerror(-err));
	}
	pthread_mutex_lock(&ag->up.attach_lock);
	read_sockets(ag, "now: whether the running agent goes cannot be seen");
	pthread_mutex_unlock(&ag->up.attach_lock);
}

void ndc_agent_hold_stop(struct agent *ag)
{
	ndc_handover_peer_unwatch(ag->up.pred);
}

/*
 * Attaches the fast path once the table is filled (synced) and the server runs, so that what it
 * replaces (an earlier agent's program, still answering from its own table) is never replaced by
 * less; then reads the sockets and tells the predecessor, which leaves the fast path to us from
 * then on.
 */
void ndc_agent_maybe_attach(struct agent *ag)
{
	int err;

	pthread_mutex_lock(&ag->up.attach_lock);
	if (!ag->up.serving || !atomic_load(&ag->table.synced) || ag->up.attached)
		goto out;
	err = ndc_agent_dataplane_attach(ag);
	if (err < 0)
		ndc_warn("fast path: cannot attach (%s); answering from sockets only",
			 strerror(-err));
	ag->up.attached = true;
	/* Before the TAKEOVER: from its OK the predecessor may stop reading at any moment. */
	read_sockets(ag, "from our takeover");
	if (ag->up.pred && !ag->up.taken_over && ag->up.pred_gone) {
		ndc_info(
		    "handover: the running agent went away before our takeover; serving alone");
		ag->up.taken_over = true;
	} else if (ag->up.pred && !ag->up.taken_over) {
		err = ndc_handover_takeover(ag->up.pred, 2000);
		if (err < 0)
			ndc_warn("handover: the previous agent did not confirm the takeover: %s",
				 strerror(-err));
		else
			ndc_info("handover: took over from the previous agent");
		ag->up.taken_over = true;
	}
	/*
	 * Ready only now: in an upgrade, a rollout that sees us ready deletes the predecessor,
	 * which must have left the fast path to us by then (or be gone already).
	 */
	if (ag->http) /* NULL: stopped, shutting down */
		ndc_http_set_ready(ag->http, true);
out:
	pthread_mutex_unlock(&ag->up.attach_lock);
}

/* On the handover thread. Under attach_lock: the shutdown closes what these are the copies of. */
static size_t handover_fds(void *arg, int *out, size_t cap)
{
	struct agent *ag = arg;
	size_t n = 0;

	pthread_mutex_lock(&ag->up.attach_lock);
	if (!ag->up.closing) {
		n = ag->srv ? ndc_socket_fds(ag->srv, out, cap) : 0;
		if (ag->http && n < cap)
			out[n++] = ndc_http_fd(ag->http);
	}
	pthread_mutex_unlock(&ag->up.attach_lock);
	return n;
}

/* On the handover thread: a successor took over (its programs replace ours), or died. */
static void handover_taken(void *arg, bool taken)
{
	struct agent *ag = arg;

	pthread_mutex_lock(&ag->up.attach_lock);
	if (taken) {
		ndc_agent_dataplane_quiesce(ag);
	} else if (ndc_agent_dataplane_attach(ag) == 0) {
		ndc_info("fast path: attached again");
	}
	pthread_mutex_unlock(&ag->up.attach_lock);
}

static void handover_name(const struct ndc_config *cfg, char *out, size_t cap)
{
	char a[INET6_ADDRSTRLEN] = "none";

	if (cfg->n_listen)
		inet_ntop(cfg->listen[0].family, cfg->listen[0].addr, a, sizeof(a));
	ndc_handover_name(a, cfg->port, out, cap);
}

void ndc_agent_join(const struct ndc_config *cfg, struct ndc_agent_join *ret)
{
	char name[128];
	int err;

	memset(ret, 0, sizeof(*ret));
	handover_name(cfg, name, sizeof(name));
	err = ndc_handover_join(name, 2000, &ret->pred, &ret->fds, &ret->n_fds);
	if (err == -ENOENT)
		return;
	if (err < 0) {
		ndc_warn("handover: an agent runs at %s but the handover failed (%s); binding "
			 "anew",
			 name, strerror(-err));
	} else if (!ret->n_fds) {
		/* It is closing them (stopping with no successor): nothing to take over from. */
		ndc_warn("handover: the agent at %s is stopping (it handed over no sockets); "
			 "binding anew",
			 name);
		ndc_agent_join_release(ret);
	} else {
		ndc_info("handover: joined the running agent: %zu sockets handed over", ret->n_fds);
	}
}

void ndc_agent_join_release(struct ndc_agent_join *j)
{
	for (size_t i = 0; i < j->n_fds; i++)
		close(j->fds[i]);
	free(j->fds);
	ndc_handover_peer_free(j->pred);
	memset(j, 0, sizeof(*j));
}

void ndc_agent_handover_serve(struct agent *ag)
{
	const struct ndc_handover_ops ops = {
	    .fds = handover_fds, .taken = handover_taken, .arg = ag};
	char name[128];

	handover_name(ag->cfg, name, sizeof(name));
	if (ndc_handover_serve(name, &ops, &ag->up.ho) < 0)
		ndc_warn("handover: cannot listen at %s: upgrades of this agent will rebind", name);
}

static const char *const wait_outcomes[NDC_UPGRADE_WAIT_MAX] = {
    [NDC_UPGRADE_WAIT_TAKEOVER] = "takeover",
    [NDC_UPGRADE_WAIT_GONE] = "successor_gone",
    [NDC_UPGRADE_WAIT_TIMEOUT] = "timeout",
    [NDC_UPGRADE_WAIT_NONE] = "no_successor",
};

static uint64_t ms_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)((t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000);
}

/*
 * SIGTERM came with no successor joined. A successor may be starting at this very moment (a pod
 * deleted by hand, whose replacement the DaemonSet starts at once; a rollout that stops the old
 * pod as the new one starts): it joins within milliseconds of its start (ndc_agent_join comes
 * before anything slow), so everything keeps running upgrade.join_wait_ms for it to join. A
 * plain stop takes that much longer; a second SIGTERM or SIGINT ends the wait at once.
 */
bool ndc_agent_upgrade_join_wait(struct agent *ag, const sigset_t *signals)
{
	uint64_t limit = ag->cfg->upgrade.join_wait_ms, ms;
	const struct timespec tick = {.tv_nsec = 10 * 1000000};
	struct timespec t0;
	bool joined = false;

	/* no listener: nobody can join */
	if (!ag->up.ho || !limit)
		return false;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	atomic_store(&ag->up.waiting, true);
	for (;;) {
		int sig;

		if (ndc_handover_joined(ag->up.ho) || ndc_handover_taken(ag->up.ho)) {
			joined = true;
			break;
		}
		if (ms_since(&t0) >= limit)
			break;
		sig = sigtimedwait(signals, NULL, &tick);
		if (sig == SIGTERM || sig == SIGINT) {
			ndc_warn("handover: %s again: not waiting for a successor to join",
				 strsignal(sig));
			break;
		}
	}
	ms = ms_since(&t0);
	atomic_store(&ag->up.waiting, false);
	if (joined) {
		ndc_info("handover: a successor joined %lu ms after the signal", (unsigned long)ms);
		return true;
	}
	atomic_fetch_add(&ag->up.waits[NDC_UPGRADE_WAIT_NONE], 1);
	ndc_info("handover: no successor joined within %lu ms (upgrade.join_wait_ms %u); "
		 "stopping",
		 (unsigned long)ms, ag->cfg->upgrade.join_wait_ms);
	return false;
}

/*
 * SIGTERM came while a successor holds our sockets but has not taken over (it is still filling
 * its table): leaving now would leave the node with no fast path and nobody reading the sockets
 * until it is ready. So everything keeps running (workers, fast path, /metrics) until it takes
 * over, goes away, or upgrade.wait_s passes. A second SIGTERM or SIGINT ends the wait.
 */
bool ndc_agent_upgrade_wait(struct agent *ag, const sigset_t *signals)
{
	uint64_t limit = (uint64_t)ag->cfg->upgrade.wait_s * 1000, ms = 0;
	const struct timespec tick = {.tv_nsec = 20 * 1000000};
	enum ndc_upgrade_wait outcome;
	struct timespec t0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	ndc_info("handover: a successor has joined but not taken over; serving on until it does, "
		 "at most upgrade.wait_s %u s",
		 ag->cfg->upgrade.wait_s);
	atomic_store(&ag->up.waiting, true);
	for (;;) {
		int sig;

		if (ndc_handover_taken(ag->up.ho)) {
			outcome = NDC_UPGRADE_WAIT_TAKEOVER;
			break;
		}
		if (!ndc_handover_joined(ag->up.ho)) {
			outcome = NDC_UPGRADE_WAIT_GONE;
			break;
		}
		ms = ms_since(&t0);
		if (ms >= limit) {
			outcome = NDC_UPGRADE_WAIT_TIMEOUT;
			break;
		}
		sig = sigtimedwait(signals, NULL, &tick);
		if (sig == SIGTERM || sig == SIGINT) {
			ndc_warn("handover: %s again: not waiting for the successor any more",
				 strsignal(sig));
			outcome = NDC_UPGRADE_WAIT_TIMEOUT;
			break;
		}
	}
	ms = ms_since(&t0);
	atomic_fetch_add(&ag->up.waits[outcome], 1);
	atomic_store(&ag->up.waiting, false);
	if (outcome == NDC_UPGRADE_WAIT_TAKEOVER)
		ndc_info("handover: the successor took over after %lu ms; leaving it the fast path",
			 (unsigned long)ms);
	else if (outcome == NDC_UPGRADE_WAIT_GONE)
		ndc_warn("handover: the successor went away before taking over (after %lu ms); "
			 "stopping as with no successor",
			 (unsigned long)ms);
	else
		ndc_warn(
		    "handover: the successor did not take over within %lu ms; stopping as with "
		    "no successor",
		    (unsigned long)ms);
	return outcome == NDC_UPGRADE_WAIT_TAKEOVER;
}

void ndc_agent_upgrade_metrics(struct agent *ag, struct ndc_metrics_buf *b)
{
	uint64_t n[NDC_UPGRADE_WAIT_MAX];

	for (int i = 0; i < NDC_UPGRADE_WAIT_MAX; i++)
		n[i] = atomic_load(&ag->up.waits[i]);
	ndc_metric_u64_each(
	    b, "ndcache_upgrade_sigterm_waits_total", "counter",
	    "SIGTERMs that came before a successor took over, by how the wait ended: "
	    "it took over, it went away, upgrade.wait_s passed, or none joined "
	    "within upgrade.join_wait_ms.",
	    "outcome", wait_outcomes, n, NDC_UPGRADE_WAIT_MAX);
	ndc_metric_u64(b, "ndcache_upgrade_sigterm_waiting", "gauge",
		       "1 while this agent, told to stop, serves on for a successor to join or to "
		       "take over.",
		       NULL, atomic_load(&ag->up.waiting));
}

/*
 * A successor took over: stop reading (what is queued stays in the sockets it shares), answer
 * what is in flight upstream, leave the fast path and its pins to it.
 */
void ndc_agent_hand_over(struct agent *ag)
{
	/* a query detained upstream is answered within the timeout of every upstream in turn */
	uint64_t wait_ms = (uint64_t)ag->cfg->forward.timeout_ms * (ag->cfg->n_upstream + 1) + 500;
	struct timespec t0, t;
	size_t left;

	ndc_info("handover: a successor serves; stopping without detaching");
	ndc_socket_quiesce(ag->srv);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while ((left = ndc_socket_outstanding(ag->srv)) > 0) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((uint64_t)((t.tv_sec - t0.tv_sec) * 1000 +
			       (t.tv_nsec - t0.tv_nsec) / 1000000) >= wait_ms) {
			ndc_warn("handover: %zu queries still upstream after %lu ms", left,
				 (unsigned long)wait_ms);
			break;
		}
		nanosleep(&(struct timespec){.tv_nsec = 10 * 1000000}, NULL);
	}
}
