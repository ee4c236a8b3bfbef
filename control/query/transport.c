// SPDX-License-Identifier: MIT
/*
 * The forwarder's transport: one attempt of a request on its upstream over UDP (a connected
 * socket of its own, random source port) and what comes back; a truncated answer goes on over
 * pooled TCP (tcp_pool.c). An attempt's outcome goes back to the request's flow through f->ops.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "internal.h"

void ndc_fwd_attempt_end(struct request *r)
{
	if (r->fd >= 0)
		close(r->fd); /* also leaves the epoll set: the fd is never dup'ed */
	r->fd = -1;
	r->st = ATT_NONE;
	ndc_fwd_timer_unlink(r);
	ndc_fwd_tcp_detach(r);
}

int ndc_fwd_udp_start(struct ndc_forwarder *f, struct request *r)
{
	const struct sockaddr_storage *ss = &up_of(r, r->up)->addr;
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = r};
	uint8_t q[NDC_FWD_QUERY_MAX];
	size_t qlen;
	int fd, err;

	err = ndc_fwd_attempt_prepare(r);
	if (err)
		return err;
	err = ndc_dns_write_query(r->id, r->qname, r->nlen, r->qtype, r->qclass, NDC_EDNS_UDP_MAX,
				  q, sizeof(q), &qlen);
	if (err)
		return err;
	fd = socket(ss->ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* Connected: the kernel drops datagrams from any other address and port for us, and
	 * reports ICMP errors as ECONNREFUSED. The ephemeral source port is random (Linux). */
	if (connect(fd, (const struct sockaddr *)ss, ndc_fwd_addr_len(ss)) < 0 ||
	    send(fd, q, qlen, 0) < 0 || epoll_ctl(f->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		err = -errno;
		close(fd);
		return err;
	}
	if (f->tap)
		f->tap(f->tap_arg, false, false, ss, q, qlen);
	r->fd = fd;
	r->st = ATT_UDP;
	ndc_fwd_timer_append(f, r);
	STAT_INC(f, queries);
	UP_INC(up_of(r, r->up), queries);
	return 0;
}

/* A response (QR) with no question section: what a server that could not read a query sends. */
static bool no_question(const uint8_t *msg, size_t len)
{
	return len >= NDC_DNS_HDR_LEN && (ndc_get16(msg + 2) & NDC_F_QR) && !ndc_get16(msg + 4);
}

void ndc_fwd_on_udp(struct ndc_forwarder *f, struct request *r)
{
	for (;;) {
		ssize_t n = recv(r->fd, f->msg, NDC_MSG_MAX, 0);
		enum fwd_qmatch m;
		bool tc = false;
		int err;

		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return;
			f->ops->attempt_fail(f, r, -errno);
			return;
		}
		/*
		 * Anything that is not our answer is ignored: a spoofer must not end the attempt.
		 * The socket is connected, so the kernel has matched the upstream's address and
		 * port already; an answer is ours by its ID and question, or, having no question
		 * (a FORMERR or NOTIMP of a server that could not read the query), by its ID alone:
		 * such an answer fails the attempt at once, as a bad answer, which it would
		 * otherwise do after timeout_ms as a timeout against the upstream.
		 */
		if ((size_t)n < NDC_DNS_HDR_LEN || ndc_get16(f->msg) != r->id)
			continue;
		m = ndc_fwd_question_match(r, f->msg, (size_t)n);
		if (m == Q_NO && !no_question(f->msg, (size_t)n))
			continue;
		ndc_fwd_up_alive(f, r);
		if (m == Q_NO && !(ndc_get16(f->msg + 2) & NDC_F_TC)) {
			ndc_fwd_bad_answer(f, r, -EBADMSG);
			return;
		}
		if (m == Q_CASE && r->caps) {
			ndc_fwd_attempt_end(r);
			r->caps = false;
			err = ndc_fwd_udp_start(f, r);
			if (err)
				f->ops->attempt_fail(f, r, err);
			return;
		}
		if (ndc_get16(f->msg + 2) & NDC_F_TC) {
			ndc_fwd_attempt_end(r);
			STAT_INC(f, tcp_retries);
			err = ndc_fwd_tcp_start(f, r);
			if (err)
				f->ops->attempt_fail(f, r, err);
			return;
		}
		err = ndc_dns_parse_response(f->msg, (size_t)n, r->lname, r->nlen, r->qtype,
					     r->qclass, f->ans, NDC_MSG_MAX, &tc);
		if (err) {
			ndc_fwd_bad_answer(f, r, err); /* our ID and question: no spoofer's */
			return;
		}
		if (f->tap)
			f->tap(f->tap_arg, true, false, &up_of(r, r->up)->addr, f->msg, (size_t)n);
		f->ops->accept_answer(f, r, f->ans);
		return;
	}
}
