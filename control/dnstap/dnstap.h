/* SPDX-License-Identifier: MIT */
/*
 * dnstap writer (issue 37): DNS messages as dnstap protobuf records in Frame Streams over a
 * unix socket (fstrm_capture -t protobuf:dnstap.Dnstap -u PATH, or any dnstap collector).
 *
 * Contract: ndc_dnstap_log() never blocks and never allocates. It copies the event into a
 * bounded queue (a byte ring under a mutex held for one memcpy, tried for a few microseconds at
 * most) and returns; a writer thread encodes and writes. A full queue, a lock held by a
 * preempted thread, or no reader connected drops the event and counts it:
 * the agent's answers never wait for a slow or absent reader. The writer connects with the
 * bidirectional Frame Streams handshake (content type "protobuf:dnstap.Dnstap") and, when the
 * reader goes away, tries again with a backoff from reconnect_min_ms doubling to
 * reconnect_max_ms. Events logged while no reader is connected are dropped (counted), not kept
 * for later: a reader that comes back sees what happens from then on. Frames reach the reader
 * within about 20 ms (the writer flushes on a timer, earlier when a quarter of the queue fills:
 * callers never pay a wake-up syscall).
 *
 * Optional: a build without libfstrm, libprotobuf-c or protoc-c compiles this module out;
 * then ndc_dnstap_available() is false and ndc_dnstap_open() returns -EOPNOTSUPP, and every
 * other function is a no-op, so callers need no #ifdef.
 */
#ifndef NDC_DNSTAP_H
#define NDC_DNSTAP_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* Message types: dnstap.proto's Message.Type numbers (the ones ndcache writes). */
enum ndc_dnstap_type {
	NDC_DNSTAP_CLIENT_QUERY = 5,
	NDC_DNSTAP_CLIENT_RESPONSE = 6,
	NDC_DNSTAP_FORWARDER_QUERY = 7,
	NDC_DNSTAP_FORWARDER_RESPONSE = 8,
};

/* The queue when opts.queue_bytes is 0: about 4,000 typical query/response events. */
#define NDC_DNSTAP_QUEUE_DEFAULT (1u << 20)
/* The smallest queue open accepts (one event of the largest DNS message must fit). */
#define NDC_DNSTAP_QUEUE_MIN (128u << 10)
#define NDC_DNSTAP_EXTRA_MAX 512 /* bytes of extra (namespace/name: 63 + 1 + 253 fit) */
#define NDC_DNSTAP_IDENTITY_MAX 255

struct ndc_dnstap_opts {
	const char *socket_path;   /* the reader's unix socket; required, < 108 bytes */
	const char *identity;	   /* Dnstap.identity (e.g. the node's name); NULL: none */
	const char *version;	   /* Dnstap.version; NULL: "ndcache " NDC_VERSION */
	size_t queue_bytes;	   /* 0: NDC_DNSTAP_QUEUE_DEFAULT; at least NDC_DNSTAP_QUEUE_MIN */
	unsigned reconnect_min_ms; /* 0: 100 */
	unsigned reconnect_max_ms; /* 0: 5000 */
	/* a write or handshake read stuck longer gives the reader up; 0: 1000 */
	unsigned io_timeout_ms;
};

/*
 * One event. Addresses are in network order, 4 bytes for AF_INET and 16 for AF_INET6 (NULL:
 * absent); ports in host order (0: absent); times CLOCK_REALTIME (tv_sec 0: absent). wire is
 * the DNS message: query_message for the *_QUERY types, response_message for *_RESPONSE.
 * extra (at most NDC_DNSTAP_EXTRA_MAX bytes) is copied as is: the caller puts the pod's
 * namespace/name there. Nothing is kept after ndc_dnstap_log() returns.
 */
struct ndc_dnstap_event {
	enum ndc_dnstap_type type;
	int family;		   /* AF_INET or AF_INET6 */
	int protocol;		   /* IPPROTO_UDP or IPPROTO_TCP */
	const void *query_addr;	   /* the client (CLIENT_*), ndcache (FORWARDER_*) */
	const void *response_addr; /* ndcache's address (CLIENT_*), the upstream (FORWARDER_*) */
	uint16_t query_port;
	uint16_t response_port;
	struct timespec query_time;
	struct timespec response_time;
	const void *wire;
	size_t wire_len; /* 1 to 65535 */
	const void *extra;
	size_t extra_len;
};

struct ndc_dnstap_stats {
	uint64_t written;	    /* frames written to a reader */
	uint64_t dropped;	    /* the sum of the four below */
	uint64_t dropped_full;	    /* the queue was full (a slow reader) */
	uint64_t dropped_busy;	    /* the queue's lock stayed held (its holder preempted) */
	uint64_t dropped_no_reader; /* no reader connected, or it went away with events queued */
	uint64_t dropped_invalid;   /* an event log refused (-EINVAL, -EMSGSIZE) */
	uint64_t reconnects;	    /* connections to a reader after the first */
	bool connected;		    /* a reader is connected now */
	/* why the last try to connect failed: an errno (ENOENT: no reader at the path,
	 * ECONNREFUSED: it went away, EACCES; EPROTO: the Frame Streams handshake failed or timed
	 * out), 0 while connected or before the first try */
	int last_error;
};

struct ndc_dnstap;

/* Whether this build has the writer (libfstrm and libprotobuf-c were found). */
bool ndc_dnstap_available(void);

/*
 * Starts the writer thread, which connects to opts->socket_path (and keeps trying: no reader
 * there yet is not an error). Returns 0 and *ret_d, -EINVAL on bad options, -EOPNOTSUPP in a
 * build without dnstap, -ENOMEM, or a thread creation error.
 */
int ndc_dnstap_open(const struct ndc_dnstap_opts *opts, struct ndc_dnstap **ret_d);

/*
 * Queues ev for the reader; safe from any number of threads at once; never blocks. Returns 0
 * when queued; when dropped -ENOTCONN (no reader), -ENOBUFS (queue full) or -EBUSY (the
 * queue's lock held for more than a few microseconds); -EINVAL for a bad event (type, family,
 * protocol, wire_len 0 or over 65535), -EMSGSIZE for extra over NDC_DNSTAP_EXTRA_MAX. Every
 * non-zero return is counted in the stats. d NULL: -EINVAL, not counted (a caller with dnstap
 * off may call it unconditionally).
 */
int ndc_dnstap_log(struct ndc_dnstap *d, const struct ndc_dnstap_event *ev);

/*
 * For a caller about to build an event: with no reader connected, counts the event as dropped
 * (no_reader, as ndc_dnstap_log would) and returns true: the caller builds and logs nothing (no
 * pod look-up, no clock read). False when a reader is connected (log the event), and for d NULL.
 */
bool ndc_dnstap_drop_unread(struct ndc_dnstap *d);

/* The counters, for /metrics; d NULL: all zero. */
void ndc_dnstap_stats(struct ndc_dnstap *d, struct ndc_dnstap_stats *ret_stats);

/*
 * Writes what is queued (each write bounded by io_timeout_ms), ends the stream (STOP, the
 * reader's FINISH), stops the thread and frees d. With a reader that stopped reading this
 * takes at most about 2 * io_timeout_ms (the write that gives up, then STOP); with none, at
 * once. d NULL: nothing.
 */
void ndc_dnstap_close(struct ndc_dnstap *d);

/*
 * A caller-side sampling rate (log.dnstap's sample and kernel_sample): keep one sampler per
 * thread (the state is not shared), ndc_dnstap_sample() costs a xorshift step and a compare.
 * rate 1 keeps everything, 0 nothing; each event is kept independently with probability rate,
 * so a periodic pattern in the traffic does not bias the sample.
 */
struct ndc_dnstap_sampler {
	uint64_t state;
	uint64_t threshold; /* keep when the next 64-bit draw is below it (rate * 2^64) */
	bool all;	    /* rate 1: no draw */
};

/* Returns 0, or -EINVAL for a rate outside [0, 1] (or NaN). seed 0 picks one from the clock. */
int ndc_dnstap_sampler_init(struct ndc_dnstap_sampler *s, double rate, uint64_t seed);

static inline bool ndc_dnstap_sample(struct ndc_dnstap_sampler *s)
{
	uint64_t x = s->state;

	if (s->all)
		return true;
	/* xorshift64* (Vigna): full period over non-zero states, good low and high bits */
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	s->state = x;
	return x * 0x2545F4914F6CDD1DULL < s->threshold;
}

#endif /* NDC_DNSTAP_H */
