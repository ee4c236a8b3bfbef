/* SPDX-License-Identifier: MIT */
/*
 * Private to the socket server, shared by its two halves: server.c (setup and teardown, the
 * public API, the worker loop, UDP) and server_tcp.c (TCP connections: accept, the connection
 * table, framing, idle and max-conns policy, write buffering, delivery of detained TCP answers),
 * and by the hub below both (server_hub.c). Nothing outside this folder includes it.
 *
 * Threading: a worker's fields are touched only by its own thread, except the completion queue
 * (qlock) and the relaxed stats counters.
 */
#ifndef NDC_SOCKET_INTERNAL_H
#define NDC_SOCKET_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "socket/socket.h"

/*
 * Per-datagram buffer, query and reply alike. Replies over UDP are bounded by the client's EDNS
 * size (1232 by DNS Flag Day 2020, at most 4096 in practice) or 512 without EDNS, so the handler
 * gets cap 4096; longer queries (MSG_TRUNC) are dropped: a DNS query is one question plus OPT.
 */
#define NDC_UDP_SLOT 4096
#define NDC_TCP_MSG_MAX 65535 /* RFC 1035 4.2.2: the length prefix is 16 bits */

enum sock_kind { SK_EVENT, SK_UDP, SK_LISTEN, SK_CONN };

/* What an epoll event points at; first member of a TCP connection. */
struct sock {
	int kind;
	int fd;
};

struct stats {
	uint64_t udp_queries, tcp_queries, tcp_conns, replies, drops, pending;
};

#define stat_add(st, field, n) __atomic_fetch_add(&(st)->field, (n), __ATOMIC_RELAXED)

struct conn; /* server_tcp.c */
struct slot; /* server_tcp.c */
struct hub;  /* server_hub.c */

struct worker {
	struct ndc_socket *srv;
	unsigned id;
	bool started;
	pthread_t thread;
	int epfd;
	struct sock ev; /* eventfd: stop and completions */
	struct sock *udp, *lis;

	/* TCP, owned by server_tcp.c (with tcp_out below): the connection table, activity
	 * order, closed-but-unfreed connections, detained answers handed over by other threads. */
	struct slot *slots;
	uint32_t *free_slots;
	uint32_t n_free, n_conns;
	struct conn *oldest, *newest, *dead;
	uint64_t accept_resume; /* out of fds: listeners unwatched until then (ms), else 0 */
	uint64_t accept_warned; /* when that was last logged (ms) */
	pthread_mutex_t qlock;
	struct ndc_pending *qhead, *qtail;

	struct stats st;

	struct mmsghdr rx[NDC_SOCKET_BATCH], tx[NDC_SOCKET_BATCH];
	struct iovec rx_iov[NDC_SOCKET_BATCH], tx_iov[NDC_SOCKET_BATCH];
	struct sockaddr_storage peer[NDC_SOCKET_BATCH];
	uint8_t rx_buf[NDC_SOCKET_BATCH][NDC_UDP_SLOT];
	uint8_t tx_buf[NDC_SOCKET_BATCH][NDC_UDP_SLOT];
	uint8_t tcp_out[2 + NDC_TCP_MSG_MAX];
};

struct ndc_socket {
	ndc_socket_handler handler;
	void *ctx;
	struct hub *hub;
	struct ndc_ip *addrs;
	size_t n_addrs;
	uint16_t port;
	unsigned n_workers;
	uint32_t idle_ms, max_conns;
	bool stopping;
	bool reading; /* every worker watches its sockets (ndc_socket_read_start) */
	int *inherit; /* handed-over sockets not yet used (-1: taken) */
	size_t n_inherit, n_inherited;
	struct worker **workers;
	struct stats st; /* UDP completions, sent from the completing thread */
};

struct ndc_socket_req {
	struct worker *w;
	struct conn *c; /* NULL for UDP */
	int fd;
	socklen_t peer_len;
	const struct sockaddr_storage *peer;
};

struct ndc_pending {
	struct ndc_pending *next;
	struct hub *hub;
	bool tcp;
	/* UDP: answered straight from the completing thread on the worker's socket */
	int fd;
	socklen_t peer_len;
	struct sockaddr_storage peer;
	/* TCP: handed to the worker */
	unsigned worker;
	uint32_t slot;
	uint64_t gen;
	size_t len;
	uint8_t frame[]; /* length prefix and message */
};

/*
 * server_hub.c. new makes s->hub with the server's reference (-ENOMEM); ref and unref count
 * detained queries (the last unref frees it); kill marks it dead, after which enter returns NULL.
 * enter takes the read lock (a completion in flight) and returns the server, or NULL once the
 * server is stopping; leave must follow every enter.
 */
int ndc_srv_hub_new(struct ndc_socket *s);
void ndc_srv_hub_ref(struct hub *h);
void ndc_srv_hub_unref(struct hub *h);
void ndc_srv_hub_kill(struct hub *h);
struct ndc_socket *ndc_srv_hub_enter(struct hub *h);
void ndc_srv_hub_leave(struct hub *h);
/* Detained queries not yet completed (the references beyond the server's own). */
size_t ndc_srv_hub_outstanding(struct hub *h);
/* Frees p and drops its reference on the hub. */
void ndc_srv_pending_free(struct ndc_pending *p);

/*
 * server_tcp.c. Everything but ndc_srv_tcp_complete runs on the worker's own thread. init sets
 * up the connection table and the completion queue (-ENOMEM); fini must follow every init, even
 * a failed one, and closes what is left: connections, queued completions.
 */
int ndc_srv_tcp_init(struct worker *w);
void ndc_srv_tcp_fini(struct worker *w);
void ndc_srv_tcp_accept(struct worker *w, struct sock *lis, uint64_t now);
void ndc_srv_tcp_event(struct worker *w, struct sock *sk, uint32_t events, uint64_t now);
/* Closes idle connections; returns the epoll timeout (ms, -1: none) until the next one is due. */
int ndc_srv_tcp_sweep(struct worker *w, uint64_t now);
/* Frees connections closed during this epoll batch, once no event can point at them. */
void ndc_srv_tcp_reap(struct worker *w);
/* Sends the answers other threads queued for this worker's connections. */
void ndc_srv_tcp_deliver(struct worker *w, uint64_t now);
/* Fills in p's TCP fields for req, whose connection now waits for one more answer. */
void ndc_srv_tcp_detain(struct ndc_socket_req *req, struct ndc_pending *p);
/* Any thread, under the hub's read lock: frames msg and queues p (taking it) to its worker. */
void ndc_srv_tcp_complete(struct ndc_socket *s, struct ndc_pending *p, const uint8_t *msg,
			  size_t len);

#endif
