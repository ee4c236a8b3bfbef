// SPDX-License-Identifier: MIT
/*
 * The forwarder's route table: which upstreams a name goes to. Stub domains (kube-dns's
 * stubDomains, NodeLocal DNSCache's per-zone forward blocks) are zones with upstreams of their
 * own; the longest zone a name is in wins, as in CoreDNS, where the most specific server block
 * takes the query. Built once per configuration, then only read.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static bool same_addr(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	const struct sockaddr_in *a4 = (const void *)a, *b4 = (const void *)b;
	const struct sockaddr_in6 *a6 = (const void *)a, *b6 = (const void *)b;

	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET)
		return a4->sin_port == b4->sin_port && a4->sin_addr.s_addr == b4->sin_addr.s_addr;
	return a6->sin6_port == b6->sin6_port &&
	       !memcmp(&a6->sin6_addr, &b6->sin6_addr, sizeof(a6->sin6_addr));
}

/* Index of ss among t's servers, added when new; -E2BIG past NDC_FWD_MAX_SERVERS. */
static int server_index(struct ndc_routes *t, const struct sockaddr_storage *ss)
{
	size_t i;

	if (ss->ss_family != AF_INET && ss->ss_family != AF_INET6)
		return -EINVAL;
	for (i = 0; i < t->n_servers; i++)
		if (same_addr(&t->servers[i], ss))
			return (int)i;
	if (t->n_servers == NDC_FWD_MAX_SERVERS)
		return -E2BIG;
	t->servers[t->n_servers] = *ss;
	return (int)t->n_servers++;
}

static int route_fill(struct ndc_routes *t, struct ndc_route *rt, size_t n,
		      const struct sockaddr_storage *ups)
{
	if (n > NDC_FWD_MAX_UPSTREAMS)
		return -E2BIG;
	if (n && !ups)
		return -EINVAL;
	rt->n_up = (uint8_t)n;
	for (size_t i = 0; i < n; i++) {
		int k = server_index(t, &ups[i]);

		if (k < 0)
			return k;
		rt->srv[i] = (uint8_t)k;
	}
	return 0;
}

/* Longest zone first: the first match is the longest (a name is in at most one zone per
 * length). The default route, the root, has the shortest zone of all and ends the list. */
static int by_length_desc(const void *a, const void *b)
{
	const struct ndc_route *x = a, *y = b;

	return (int)y->zlen - (int)x->zlen;
}

int ndc_routes_new(const struct ndc_forwarder_opts *opts, struct ndc_routes **ret)
{
	struct ndc_routes *t;
	size_t n = opts->n_routes;
	int err = -EINVAL;

	*ret = NULL;
	if (n > NDC_FWD_MAX_ROUTES)
		return -E2BIG;
	if (n && !opts->routes)
		return -EINVAL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->routes = calloc(n + 1, sizeof(*t->routes));
	if (!t->routes) {
		free(t);
		return -ENOMEM;
	}
	atomic_init(&t->refs, 1);
	/* The default route's servers first: they lead the stats as they did before routes. */
	t->n_routes = n + 1;
	err = route_fill(t, &t->routes[n], opts->n_upstreams, opts->upstreams);
	t->routes[n].zlen = 1; /* the root: zone[0] is 0 */
	for (size_t i = 0; i < n && !err; i++) {
		const struct ndc_forwarder_route *o = &opts->routes[i];
		struct ndc_route *rt = &t->routes[i];
		size_t zlen;

		if (!o->zone || !o->n_upstreams ||
		    ndc_name_from_text(o->zone, rt->zone, sizeof(rt->zone), &zlen) < 0 ||
		    zlen < 2) {
			err = -EINVAL;
			break;
		}
		ndc_name_lower(rt->zone, rt->zone, zlen);
		rt->zlen = (uint8_t)zlen;
		for (size_t j = 0; j < i; j++)
			if (t->routes[j].zlen == zlen && !memcmp(t->routes[j].zone, rt->zone, zlen))
				err = -EINVAL;
		if (!err)
			err = route_fill(t, rt, o->n_upstreams, o->upstreams);
	}
	if (err) {
		ndc_routes_unref(t);
		return err;
	}
	qsort(t->routes, n, sizeof(*t->routes), by_length_desc);
	*ret = t;
	return 0;
}

struct ndc_routes *ndc_routes_ref(struct ndc_routes *t)
{
	if (t)
		atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
	return t;
}

void ndc_routes_unref(struct ndc_routes *t)
{
	if (!t || atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) != 1)
		return;
	free(t->routes);
	free(t);
}

const struct ndc_route *ndc_routes_match(const struct ndc_routes *t, const uint8_t *lname,
					 size_t nlen)
{
	size_t last = t->n_routes - 1;

	for (size_t i = 0; i < last; i++) {
		const struct ndc_route *rt = &t->routes[i];

		if (rt->zlen <= nlen && ndc_name_in_zone(lname, nlen, rt->zone, rt->zlen))
			return rt;
	}
	return &t->routes[last];
}

bool ndc_routes_same(const struct ndc_routes *a, const struct ndc_route *ra,
		     const struct ndc_routes *b, const struct ndc_route *rb)
{
	if (ra->n_up != rb->n_up)
		return false;
	for (size_t i = 0; i < ra->n_up; i++)
		if (!same_addr(&a->servers[ra->srv[i]], &b->servers[rb->srv[i]]))
			return false;
	return true;
}

void ndc_routes_addr_name(const struct sockaddr_storage *ss, char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN] = "?";

	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)ss;

		inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof(ip));
		snprintf(buf, len, "[%s]:%u", ip, ntohs(s6->sin6_port));
	} else {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)ss;

		inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof(ip));
		snprintf(buf, len, "%s:%u", ip, ntohs(s4->sin_port));
	}
}
