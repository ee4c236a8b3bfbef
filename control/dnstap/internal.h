/* SPDX-License-Identifier: MIT */
/* Private to control/dnstap/ (and its unit tests): the queue and the encoder. */
#ifndef NDC_DNSTAP_INTERNAL_H
#define NDC_DNSTAP_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "dnstap.h"

/*
 * One queued event, followed by wire_len bytes of DNS message and extra_len bytes of extra,
 * the whole padded to 8 bytes. type 0 marks padding up to the ring's end (a record never wraps).
 */
struct dnstap_rec {
	uint32_t len;
	uint8_t type;
	uint8_t family;
	uint8_t protocol;
	uint8_t flags; /* REC_QADDR, REC_RADDR */
	int64_t qsec;
	int64_t rsec;
	uint32_t qnsec;
	uint32_t rnsec;
	uint16_t qport;
	uint16_t rport;
	uint16_t extra_len;
	uint16_t pad;
	uint32_t wire_len;
	uint32_t pad2;
	uint8_t qaddr[16];
	uint8_t raddr[16];
};
_Static_assert(sizeof(struct dnstap_rec) == 80, "dnstap_rec is 8-byte aligned, no holes");
#define REC_QADDR 1
#define REC_RADDR 2

/*
 * A byte ring of variable records: producers (any thread) append under the lock, the one
 * consumer reads [tail, head) without it (producers never write there) and then releases.
 * head and tail count bytes since the start and never wrap (2^64 bytes is centuries).
 */
struct dnstap_ring {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint8_t *buf;
	size_t cap;    /* a multiple of 8 */
	uint64_t head; /* under lock */
	uint64_t tail; /* under lock; only the consumer moves it */
	bool waiting; /* the consumer sleeps on cond until its timeout, a quarter full, or a kick */
	bool woken;   /* a push filled a quarter: drain now */
	bool kicked;  /* wake the consumer now (close) */
};

/* 0, -EINVAL (cap under NDC_DNSTAP_QUEUE_MIN), -ENOMEM. */
int ndc_dnstap_ring_init(struct dnstap_ring *r, size_t cap);
void ndc_dnstap_ring_free(struct dnstap_ring *r);
/* 0, -EINVAL or -EMSGSIZE (a bad event), -ENOBUFS (no room), -EBUSY (lock held too long). */
int ndc_dnstap_ring_push(struct dnstap_ring *r, const struct ndc_dnstap_event *ev);
/* Consumer: sleeps timeout_ms, less when a quarter fills or on a kick; returns the head. */
uint64_t ndc_dnstap_ring_wait(struct dnstap_ring *r, unsigned timeout_ms);
/* Consumer: the next record at *off (< head), padding skipped, *off moved past it; NULL at head */
const struct dnstap_rec *ndc_dnstap_ring_next(struct dnstap_ring *r, uint64_t *off, uint64_t head);
/* Consumer: gives the bytes before upto back to the producers. */
void ndc_dnstap_ring_release(struct dnstap_ring *r, uint64_t upto);
void ndc_dnstap_ring_kick(struct dnstap_ring *r);
/* The event a record holds (its pointers point into the record). */
void ndc_dnstap_rec_event(const struct dnstap_rec *rec, struct ndc_dnstap_event *ret_ev);
/* 0, or -EINVAL / -EMSGSIZE as ndc_dnstap_log() documents. */
int ndc_dnstap_event_check(const struct ndc_dnstap_event *ev);

/* The largest encoding of one event (protobuf overhead over the bytes it carries). */
#define NDC_DNSTAP_FRAME_MAX (65535 + NDC_DNSTAP_EXTRA_MAX + 2 * NDC_DNSTAP_IDENTITY_MAX + 256)

/*
 * Encodes ev as a Dnstap message (type MESSAGE) into buf. identity and version may be NULL.
 * Returns 0 and *ret_len, -ENOBUFS when cap is too small.
 */
int ndc_dnstap_encode(const struct ndc_dnstap_event *ev, const char *identity, const char *version,
		      uint8_t *buf, size_t cap, size_t *ret_len);

#endif /* NDC_DNSTAP_INTERNAL_H */
