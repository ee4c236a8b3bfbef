// SPDX-License-Identifier: MIT
/* The dnstap queue: a byte ring of variable records, many producers, one consumer. */
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "internal.h"

#define ALIGN8(x) (((x) + 7) & ~(size_t)7)
#define RING_SPINS 256 /* tries of the lock before a push gives up: 5 to 20 us of pause */

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ volatile("yield");
#endif
}

int ndc_dnstap_ring_init(struct dnstap_ring *r, size_t cap)
{
	pthread_condattr_t ca;
	int err;

	memset(r, 0, sizeof(*r));
	if (cap < NDC_DNSTAP_QUEUE_MIN || cap > (1ull << 31))
		return -EINVAL;
	r->cap = cap & ~(size_t)7;
	r->buf = malloc(r->cap);
	if (!r->buf)
		return -ENOMEM;
	/* the consumer's timed waits must not jump with the wall clock */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	err = pthread_cond_init(&r->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (err) {
		free(r->buf);
		r->buf = NULL;
		return -err;
	}
	pthread_mutex_init(&r->lock, NULL);
	return 0;
}

void ndc_dnstap_ring_free(struct dnstap_ring *r)
{
	if (!r->buf)
		return;
	pthread_cond_destroy(&r->cond);
	pthread_mutex_destroy(&r->lock);
	free(r->buf);
	r->buf = NULL;
}

int ndc_dnstap_event_check(const struct ndc_dnstap_event *ev)
{
	if (ev->type < NDC_DNSTAP_CLIENT_QUERY || ev->type > NDC_DNSTAP_FORWARDER_RESPONSE)
		return -EINVAL;
	if (ev->family != AF_INET && ev->family != AF_INET6)
		return -EINVAL;
	if (ev->protocol != IPPROTO_UDP && ev->protocol != IPPROTO_TCP)
		return -EINVAL;
	if (!ev->wire || ev->wire_len == 0 || ev->wire_len > 65535)
		return -EINVAL;
	if (ev->extra_len && !ev->extra)
		return -EINVAL;
	if (ev->extra_len > NDC_DNSTAP_EXTRA_MAX)
		return -EMSGSIZE;
	if (ev->query_time.tv_nsec < 0 || ev->query_time.tv_nsec >= 1000000000 ||
	    ev->response_time.tv_nsec < 0 || ev->response_time.tv_nsec >= 1000000000)
		return -EINVAL;
	return 0;
}

/* Fills the record at rec (room checked by the caller). */
static void rec_fill(struct dnstap_rec *rec, uint32_t len, const struct ndc_dnstap_event *ev)
{
	size_t alen = ev->family == AF_INET6 ? 16 : 4;
	uint8_t *p = (uint8_t *)(rec + 1);

	memset(rec, 0, sizeof(*rec));
	rec->len = len;
	rec->type = (uint8_t)ev->type;
	rec->family = ev->family == AF_INET6 ? 6 : 4;
	rec->protocol = (uint8_t)ev->protocol;
	if (ev->query_addr) {
		rec->flags |= REC_QADDR;
		memcpy(rec->qaddr, ev->query_addr, alen);
	}
	if (ev->response_addr) {
		rec->flags |= REC_RADDR;
		memcpy(rec->raddr, ev->response_addr, alen);
	}
	rec->qport = ev->query_port;
	rec->rport = ev->response_port;
	rec->qsec = ev->query_time.tv_sec;
	rec->qnsec = (uint32_t)ev->query_time.tv_nsec;
	rec->rsec = ev->response_time.tv_sec;
	rec->rnsec = (uint32_t)ev->response_time.tv_nsec;
	rec->wire_len = (uint32_t)ev->wire_len;
	rec->extra_len = (uint16_t)ev->extra_len;
	memcpy(p, ev->wire, ev->wire_len);
	if (ev->extra_len)
		memcpy(p + ev->wire_len, ev->extra, ev->extra_len);
}

int ndc_dnstap_ring_push(struct dnstap_ring *r, const struct ndc_dnstap_event *ev)
{
	size_t need, pos, pad = 0;
	bool wake;
	int err;

	err = ndc_dnstap_event_check(ev);
	if (err)
		return err;
	need = ALIGN8(sizeof(struct dnstap_rec) + ev->wire_len + ev->extra_len);
	/*
	 * Held for one memcpy by whoever has it; but a holder the scheduler preempts would hold it
	 * for a time slice, and a caller answering DNS must not wait that: spin a few microseconds,
	 * then give the event up.
	 */
	for (int i = 0; pthread_mutex_trylock(&r->lock); i++) {
		if (i == RING_SPINS)
			return -EBUSY;
		cpu_relax();
	}
	pos = r->head % r->cap;
	if (r->cap - pos < need)
		pad = r->cap - pos; /* a multiple of 8, so at least the padding's len field fits */
	if (r->head - r->tail + pad + need > r->cap) {
		pthread_mutex_unlock(&r->lock);
		return -ENOBUFS;
	}
	if (pad) {
		struct dnstap_rec *p = (struct dnstap_rec *)(r->buf + pos);

		p->len = (uint32_t)pad;
		/* type sits in the header's first 8 bytes, which pad (>= 8) always covers */
		p->type = 0;
		pos = 0;
	}
	rec_fill((struct dnstap_rec *)(r->buf + pos), (uint32_t)need, ev);
	r->head += pad + need;
	/*
	 * The consumer sleeps its flush interval and then takes all there is; a wake per push would
	 * be a futex syscall per DNS message. Only the push that fills the ring past a quarter
	 * wakes it early, so that a burst does not overflow the ring in the meantime.
	 */
	wake = r->waiting && r->head - r->tail >= r->cap / 4;
	if (wake) {
		r->waiting = false;
		r->woken = true;
	}
	pthread_mutex_unlock(&r->lock);
	if (wake)
		pthread_cond_signal(&r->cond);
	return 0;
}

uint64_t ndc_dnstap_ring_wait(struct dnstap_ring *r, unsigned timeout_ms)
{
	struct timespec until;
	uint64_t head;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += timeout_ms / 1000;
	until.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&r->lock);
	r->waiting = !r->kicked;
	r->woken = false;
	while (r->waiting && !r->woken && !r->kicked)
		if (pthread_cond_timedwait(&r->cond, &r->lock, &until) == ETIMEDOUT)
			break;
	r->waiting = false;
	r->kicked = false;
	head = r->head;
	pthread_mutex_unlock(&r->lock);
	return head;
}

const struct dnstap_rec *ndc_dnstap_ring_next(struct dnstap_ring *r, uint64_t *off, uint64_t head)
{
	const struct dnstap_rec *rec;

	while (*off < head) {
		rec = (const struct dnstap_rec *)(r->buf + *off % r->cap);
		*off += rec->len;
		if (rec->type)
			return rec;
	}
	return NULL;
}

void ndc_dnstap_ring_release(struct dnstap_ring *r, uint64_t upto)
{
	pthread_mutex_lock(&r->lock);
	r->tail = upto;
	pthread_mutex_unlock(&r->lock);
}

void ndc_dnstap_ring_kick(struct dnstap_ring *r)
{
	pthread_mutex_lock(&r->lock);
	r->kicked = true;
	pthread_mutex_unlock(&r->lock);
	pthread_cond_signal(&r->cond);
}

void ndc_dnstap_rec_event(const struct dnstap_rec *rec, struct ndc_dnstap_event *ret_ev)
{
	const uint8_t *p = (const uint8_t *)(rec + 1);

	memset(ret_ev, 0, sizeof(*ret_ev));
	ret_ev->type = (enum ndc_dnstap_type)rec->type;
	ret_ev->family = rec->family == 6 ? AF_INET6 : AF_INET;
	ret_ev->protocol = rec->protocol;
	ret_ev->query_addr = rec->flags & REC_QADDR ? rec->qaddr : NULL;
	ret_ev->response_addr = rec->flags & REC_RADDR ? rec->raddr : NULL;
	ret_ev->query_port = rec->qport;
	ret_ev->response_port = rec->rport;
	ret_ev->query_time.tv_sec = (time_t)rec->qsec;
	ret_ev->query_time.tv_nsec = rec->qnsec;
	ret_ev->response_time.tv_sec = (time_t)rec->rsec;
	ret_ev->response_time.tv_nsec = rec->rnsec;
	ret_ev->wire = p;
	ret_ev->wire_len = rec->wire_len;
	ret_ev->extra = rec->extra_len ? p + rec->wire_len : NULL;
	ret_ev->extra_len = rec->extra_len;
}
