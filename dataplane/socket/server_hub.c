// SPDX-License-Identifier: MIT
/*
 * The hub: how a detained query reaches back to its worker. Not through the server itself:
 * ndc_socket_complete may run after ndc_socket_stop (a caller bug, but one that must not turn
 * into a use-after-free), and then finds the hub marked dead and drops the answer. The server
 * holds one reference and each detained query one; the last one frees the hub.
 *
 * Below both halves of the server: server.c makes, kills and enters the hub, server_tcp.c frees
 * the detained queries it delivers or drops, and neither has to call the other for that.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "internal.h"

struct hub {
	pthread_rwlock_t lock; /* read: a completion in flight; write: stop marking dead */
	unsigned long refs;    /* the server's plus one per detained query */
	bool dead;
	struct ndc_socket *srv;
};

int ndc_srv_hub_new(struct ndc_socket *s)
{
	pthread_rwlockattr_t attr;
	struct hub *h = calloc(1, sizeof(*h));

	if (!h)
		return -ENOMEM;
	/* Completions keep coming under load; stop must not starve behind them. */
	pthread_rwlockattr_init(&attr);
	pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&h->lock, &attr);
	pthread_rwlockattr_destroy(&attr);
	h->refs = 1;
	h->srv = s;
	s->hub = h;
	return 0;
}

void ndc_srv_hub_ref(struct hub *h)
{
	__atomic_add_fetch(&h->refs, 1, __ATOMIC_RELAXED);
}

void ndc_srv_hub_unref(struct hub *h)
{
	if (__atomic_sub_fetch(&h->refs, 1, __ATOMIC_ACQ_REL) == 0) {
		pthread_rwlock_destroy(&h->lock);
		free(h);
	}
}

void ndc_srv_hub_kill(struct hub *h)
{
	pthread_rwlock_wrlock(&h->lock);
	h->dead = true;
	pthread_rwlock_unlock(&h->lock);
}

struct ndc_socket *ndc_srv_hub_enter(struct hub *h)
{
	pthread_rwlock_rdlock(&h->lock);
	return h->dead ? NULL : h->srv;
}

void ndc_srv_hub_leave(struct hub *h)
{
	pthread_rwlock_unlock(&h->lock);
}

void ndc_srv_pending_free(struct ndc_pending *p)
{
	struct hub *h = p->hub;

	free(p);
	ndc_srv_hub_unref(h);
}

size_t ndc_srv_hub_outstanding(struct hub *h)
{
	unsigned long refs = __atomic_load_n(&h->refs, __ATOMIC_ACQUIRE);

	return refs > 0 ? (size_t)refs - 1 : 0;
}
