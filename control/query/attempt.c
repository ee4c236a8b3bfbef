// SPDX-License-Identifier: MIT
/*
 * What every attempt of a forwarder request shares, whatever carries it (transport.c over UDP,
 * tcp_pool.c over TCP): its ID and 0x20 case, its place in the thread's timer list, the check
 * that a message answers its question, and the upstream's address length. The bottom of the
 * forwarder's modules: it calls none of them.
 */
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/random.h>

#include "internal.h"

void ndc_fwd_timer_unlink(struct request *r)
{
	if (!r->tnext)
		return;
	r->tprev->tnext = r->tnext;
	r->tnext->tprev = r->tprev;
	r->tprev = r->tnext = NULL;
}

/* Sorted by deadline: appended, unless a shorter timeout_ms came with a reconfiguration. */
void ndc_fwd_timer_append(struct ndc_forwarder *f, struct request *r)
{
	struct request *at = f->timers.tprev;

	r->deadline = ndc_now_ms() + f->timeout_ms;
	while (at != &f->timers && at->deadline > r->deadline)
		at = at->tprev;
	r->tprev = at;
	r->tnext = at->tnext;
	at->tnext->tprev = r;
	at->tnext = r;
}

static int random_bytes(void *p, size_t n)
{
	ssize_t got = getrandom(p, n, 0);

	if (got < 0)
		return -errno;
	return (size_t)got == n ? 0 : -EIO;
}

/* New ID, and (while caps) new random case for the letters of the name: draft-vixie-dnsext-dns0x20.
 */
int ndc_fwd_attempt_prepare(struct request *r)
{
	uint8_t rnd[2 + 32];
	size_t i = 0;
	int err;

	err = random_bytes(rnd, sizeof(rnd));
	if (err)
		return err;
	r->id = ndc_get16(rnd);
	memcpy(r->qname, r->lname, r->nlen);
	if (!r->caps)
		return 0;
	while (i < r->nlen && r->qname[i]) {
		size_t llen = r->qname[i++];

		for (size_t j = 0; j < llen && i < r->nlen; j++, i++) {
			uint8_t c = r->qname[i];

			if (c >= 'a' && c <= 'z' && (((rnd[2 + (i / 8) % 32] >> (i % 8)) & 1)))
				r->qname[i] = (uint8_t)(c - 'a' + 'A');
		}
	}
	return 0;
}

socklen_t ndc_fwd_addr_len(const struct sockaddr_storage *ss)
{
	return ss->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

enum fwd_qmatch ndc_fwd_question_match(const struct request *r, const uint8_t *msg, size_t len)
{
	const uint8_t *q = msg + NDC_DNS_HDR_LEN;
	uint8_t lower[NDC_NAME_MAX];

	if (len < NDC_DNS_HDR_LEN + (size_t)r->nlen + 4 || !(ndc_get16(msg + 2) & NDC_F_QR) ||
	    ndc_get16(msg + 4) != 1)
		return Q_NO;
	if (ndc_get16(q + r->nlen) != r->qtype || ndc_get16(q + r->nlen + 2) != r->qclass)
		return Q_NO;
	ndc_name_lower(lower, q, r->nlen);
	if (memcmp(lower, r->lname, r->nlen))
		return Q_NO;
	return memcmp(q, r->qname, r->nlen) ? Q_CASE : Q_YES;
}
