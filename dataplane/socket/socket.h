/* SPDX-License-Identifier: MIT */
/*
 * The socket server: UDP and TCP (RFC 7766: length-prefixed, pipelined, idle timeout) on every
 * listen address, v4 and v6, one worker thread per core. Each worker owns, per address, one
 * SO_REUSEPORT UDP socket (read with recvmmsg, answered with sendmmsg) and one SO_REUSEPORT TCP
 * listener, so the kernel spreads datagrams and connections over the workers. Every socket is
 * bound to its specific address, so replies leave from the address the query arrived on with no
 * IP_PKTINFO. Protocol-agnostic: the handler sees whole messages and writes whole replies.
 *
 * Limits: UDP queries over 4096 bytes are dropped and the handler's cap is 4096 (the EDNS limit
 * bounds UDP replies well below that); TCP queries over 4096 bytes or of length 0 close the
 * connection, TCP replies may use the full 65535.
 */
#ifndef NDC_SOCKET_H
#define NDC_SOCKET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ndc/query_handler.h> /* enum ndc_verdict, struct ndc_socket_req, struct ndc_pending */

struct ndc_ip;
struct sockaddr_storage;
struct ndc_socket;

#define NDC_SOCKET_BATCH 32 /* datagrams per recvmmsg/sendmmsg */

struct ndc_socket_opts {
	size_t n_addrs;
	const struct ndc_ip *addrs;
	uint16_t port;	  /* 0: ephemeral (tests; read back with ndc_socket_port) */
	unsigned workers; /* 0: one per online CPU */
	/* 0: 10000. A connection with no complete query and no reply written for this long is
	 * closed; one owing detained replies is kept up to 30 s longer for them. */
	uint32_t tcp_idle_ms;
	/* per worker; 0: 1024. When full, the least recently active connection that owes no
	 * detained reply is closed to make room; if all owe one, the newcomer is refused. */
	uint32_t tcp_max_conns;
	/*
	 * Sockets handed over by a predecessor (control/handover.h): each one whose family,
	 * address, port and type match a listen address is used in place of a new one, and there
	 * are at least as many workers as inherited sockets of one address and type, so none is
	 * left unread. The server owns every descriptor passed here (unmatched ones are closed).
	 */
	const int *inherit;
	size_t n_inherit;
	/*
	 * Read nothing (no datagram, no connection) until ndc_socket_read_start: a successor that
	 * holds its predecessor's sockets while the predecessor still reads them, so that dying
	 * before its takeover it has taken no query with it (control/agent/upgrade.c).
	 */
	bool hold;
};

/*
 * Called on a worker for each query (msg, len). Write the reply into out (cap bytes) and set
 * *ret_len for NDC_SEND; NDC_DROP sends nothing; NDC_PENDING means the handler called
 * ndc_socket_detain(req) and will answer through ndc_socket_complete. The handler must not block.
 */
typedef enum ndc_verdict (*ndc_socket_handler)(void *ctx, struct ndc_socket_req *req,
					       const uint8_t *msg, size_t len, uint8_t *out,
					       size_t cap, size_t *ret_len);

bool ndc_socket_req_is_tcp(const struct ndc_socket_req *req);

/* The client's address, for query logs (TCP: a getpeername(2), so not for every query). 0 or
 * -errno. */
int ndc_socket_req_peer(const struct ndc_socket_req *req, struct sockaddr_storage *ret);

/* Keeps what is needed to answer req later (client address, local address, socket, or the TCP
 * connection). NULL on -ENOMEM. */
struct ndc_pending *ndc_socket_detain(struct ndc_socket_req *req);

/*
 * Sends msg as the answer to p and frees p. Any thread. len 0 drops it. A TCP connection that
 * closed meanwhile silently loses the answer.
 */
void ndc_socket_complete(struct ndc_pending *p, const uint8_t *msg, size_t len);

/* Binds every socket (errors: -errno of the failing bind, with the address logged) and starts
 * the workers. */
int ndc_socket_start(const struct ndc_socket_opts *opts, ndc_socket_handler handler, void *ctx,
		     struct ndc_socket **ret);

/*
 * Starts reading the sockets of a server started with opts.hold; 0 at once when it reads them
 * already. Any thread. 0 or -errno (epoll_ctl: the server then still reads nothing, and a later
 * call tries again).
 */
int ndc_socket_read_start(struct ndc_socket *s);

/* Copies of the listening sockets' descriptors (every worker's UDP and TCP), up to cap, for a
 * successor; returns how many. They stay ours: the caller must not close them. */
size_t ndc_socket_fds(const struct ndc_socket *s, int *out, size_t cap);

/*
 * Stops reading: joins the workers, leaving every socket open and detained queries answerable.
 * What a worker has read it answers first; what is queued stays for whoever else holds the
 * sockets (a successor). ndc_socket_stop must still follow.
 */
void ndc_socket_quiesce(struct ndc_socket *s);

/* Detained queries not yet completed. */
size_t ndc_socket_outstanding(struct ndc_socket *s);

/* The bound port (the ephemeral one when opts.port was 0). */
uint16_t ndc_socket_port(const struct ndc_socket *s);

/* Stops and joins the workers, closes every socket. Detained queries must be completed first
 * or are dropped: completing one after stop is safe and sends nothing (it must still be
 * completed once, to free it). */
void ndc_socket_stop(struct ndc_socket *s);

/* Counters since start (relaxed reads, not a consistent snapshot). tcp_conns: accepted;
 * pending: detained; drops: NDC_DROP, oversized or failed sends, answers for closed
 * connections, empty completions. */
struct ndc_socket_stats {
	uint64_t udp_queries, tcp_queries, tcp_conns, replies, drops, pending;
};
void ndc_socket_stats(struct ndc_socket *s, struct ndc_socket_stats *ret);

#endif
