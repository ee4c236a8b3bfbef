/* SPDX-License-Identifier: MIT */
/*
 * Handing a running agent's serving state to its successor, so that an upgrade (a DaemonSet
 * rolling with maxSurge: 1, or a second ndcache started by hand with the same config) loses no
 * query. The two agents meet at an abstract unix socket (per network namespace, so two pods with
 * hostNetwork on one node meet; no file, no volume):
 *
 *   successor                                 running agent
 *   join: connect, HELLO          ------->
 *                                 <-------    FDS: its DNS sockets (UDP, TCP listeners) and its
 *                                             HTTP listener, by SCM_RIGHTS
 *   holds the same sockets unread (nothing is ever closed with packets queued in it; a query it
 *   read would die with it), fills its own BPF table, attaches its programs in place of the old
 *   ones (one replace per link), reads the sockets
 *   takeover: TAKEOVER            ------->    stops attaching to new links; on SIGTERM it
 *                                 <-------    OK  detaches nothing, unpins nothing, stops reading,
 *                                             answers what it has in flight, exits
 *
 * A successor that dies after TAKEOVER (its connection closes) gives the state back: the running
 * agent is told (ops.taken(false)) and attaches its programs again. A successor that fails before
 * TAKEOVER never touched the running agent's programs, maps, pins or sockets: it only held copies
 * of the socket descriptors, which closing does not affect. A running agent that stops before
 * the TAKEOVER (or dies) closes the connection first: the successor watching it
 * (ndc_handover_peer_watch) reads the sockets from then on.
 *
 * Who may speak: the name is abstract, so any process in the network namespace can connect to it
 * (with hostNetwork, every such pod on the node), and a HELLO is answered with the DNS sockets.
 * Both sides check the other's credentials (SO_PEERCRED, taken by the kernel at connect and at
 * listen, not said by the peer): only a process of this agent's effective uid is served, and a
 * successor joins only a listener of its own uid. A peer that does not say HELLO within
 * hello_timeout_ms is dropped, so idle connections cannot hold the peer slots. When the agent
 * runs as root, so may its peer: the check keeps out every process that runs as another user
 * (an unprivileged hostNetwork pod), not another root process of the node, which could replace
 * the agent's BPF programs anyway.
 */
#ifndef NDC_HANDOVER_H
#define NDC_HANDOVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NDC_HANDOVER_MAX_FDS 1024

struct ndc_handover;	  /* the running agent's listener */
struct ndc_handover_peer; /* the successor's connection to its predecessor */

/* The abstract socket name for an agent listening on addr (text) and port: fills out. */
void ndc_handover_name(const char *addr, unsigned port, char *out, size_t cap);

/*
 * The successor's side: connects to the agent at name. 0 with *ret and the received descriptors
 * (caller owns them, and frees *ret_fds) when one answered within timeout_ms; -ENOENT when none
 * runs (nobody listens at name); -EPERM when what listens there runs as another uid (logged,
 * nothing is said to it); other -errno on a protocol failure (then no descriptor is kept).
 */
int ndc_handover_join(const char *name, int timeout_ms, struct ndc_handover_peer **ret,
		      int **ret_fds, size_t *ret_n);

/* Tells the predecessor that we serve and our programs are attached; waits for its OK. */
int ndc_handover_takeover(struct ndc_handover_peer *p, int timeout_ms);

/*
 * Calls gone(arg) once, on a thread of its own, when the predecessor's end of the connection
 * closes: it stopped without our takeover, or died (or, after a takeover, exited: the caller
 * knows which), or when it can no longer watch (a poll error, logged). One watch per peer at a
 * time. 0 or -errno.
 */
int ndc_handover_peer_watch(struct ndc_handover_peer *p, void (*gone)(void *arg), void *arg);

/*
 * Stops the watch and waits for its thread: gone is not called after this returns (nor while
 * this waits for a gone in progress, so call it holding nothing gone takes). NULL, or a peer
 * not watched, is fine.
 */
void ndc_handover_peer_unwatch(struct ndc_handover_peer *p);

/* Closes the connection (after takeover: the predecessor exits when told to), unwatched first.
 * NULL is fine. */
void ndc_handover_peer_free(struct ndc_handover_peer *p);

struct ndc_handover_ops {
	/* the descriptors to hand over: up to cap into out, returns how many */
	size_t (*fds)(void *arg, int *out, size_t cap);
	/* a successor took over (true), or the one that had died (false) */
	void (*taken)(void *arg, bool taken);
	void *arg;
	/* a peer that has not said HELLO this long after connecting is dropped; 0: 3000 */
	int hello_timeout_ms;
};

/* Why a peer was refused (ndcache_handover_peers_refused_total's reason label). */
enum ndc_handover_refusal {
	NDC_HANDOVER_REFUSED_UID,      /* another uid than ours (SO_PEERCRED) */
	NDC_HANDOVER_REFUSED_TIMEOUT,  /* said nothing within hello_timeout_ms */
	NDC_HANDOVER_REFUSED_FULL,     /* every peer slot held */
	NDC_HANDOVER_REFUSED_PROTOCOL, /* a message that is not the protocol's */
	NDC_HANDOVER_REFUSED_MAX,
};

struct ndc_handover_stats {
	uint64_t refused[NDC_HANDOVER_REFUSED_MAX];
};

/* "uid", "timeout", "full", "protocol". */
const char *ndc_handover_refusal_name(enum ndc_handover_refusal r);

/*
 * The running agent's side: listens at name on a thread of its own, retrying every 200 ms while
 * the name is still held (by the predecessor this agent is replacing). 0 or -errno.
 */
int ndc_handover_serve(const char *name, const struct ndc_handover_ops *ops,
		       struct ndc_handover **ret);

/* True while a successor that took over is connected. */
bool ndc_handover_taken(struct ndc_handover *h);

/*
 * True while a successor that said HELLO (it holds copies of our sockets) is connected, whether
 * or not it took over. Any thread.
 */
bool ndc_handover_joined(struct ndc_handover *h);

/* The counts so far; all 0 for NULL. Any thread. */
void ndc_handover_stats(struct ndc_handover *h, struct ndc_handover_stats *ret);

/*
 * Stops the thread and closes the listener and every connection: a successor that joined but
 * has not taken over sees its predecessor go (ndc_handover_peer_watch) and reads the sockets
 * from then on, so close before the sockets stop being read. h stays valid for the queries
 * above (taken and joined keep their last values); idempotent. NULL is fine.
 */
void ndc_handover_close(struct ndc_handover *h);

/* ndc_handover_close, then frees h. NULL is fine. */
void ndc_handover_stop(struct ndc_handover *h);

#endif
