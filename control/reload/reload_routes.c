// SPDX-License-Identifier: MIT
/*
 * What the config file and the kube-dns ConfigMap make for the forwarder, its routes, as
 * NodeLocal DNSCache makes its Corefile from them; and the helpers both sides share.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ndc/log.h>

#include "internal.h"

/* ---- shared ------------------------------------------------------------------------------- */

const struct ndc_config *ndc_reload_current(const struct ndc_reload *rl)
{
	return rl->file ? rl->file : rl->running;
}

void ndc_reload_wake(struct ndc_reload *rl)
{
	uint64_t one = 1;

	if (write(rl->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		ndc_warn("config: reload eventfd: %s", strerror(errno));
}

void ndc_reload_kd_free(struct kube_dns *kd)
{
	ndc_config_stubs_free(kd->stubs, kd->n_stubs);
	memset(kd, 0, sizeof(*kd));
}

int ndc_reload_kd_copy(struct kube_dns *dst, const struct kube_dns *src)
{
	struct kube_dns k = *src;

	k.stubs = NULL;
	if (src->n_stubs && !(k.stubs = calloc(src->n_stubs, sizeof(*k.stubs))))
		return -ENOMEM;
	for (size_t i = 0; i < src->n_stubs; i++) {
		k.stubs[i] = src->stubs[i];
		if (!(k.stubs[i].zone = strdup(src->stubs[i].zone))) {
			ndc_config_stubs_free(k.stubs, i);
			return -ENOMEM;
		}
	}
	ndc_reload_kd_free(dst);
	*dst = k;
	return 0;
}

/* ---- lists of names, for the log ---------------------------------------------------------- */

void ndc_reload_list_add(char *list, const char *name)
{
	size_t n = strlen(list);

	snprintf(list + n, LIST_MAX - n, "%s%s", n ? ", " : "", name);
}

void ndc_reload_addr_text(const struct sockaddr_storage *ss, char *buf, size_t len)
{
	const struct sockaddr_in6 *s6 = (const void *)ss;
	const struct sockaddr_in *s4 = (const void *)ss;
	char ip[INET6_ADDRSTRLEN] = "?";

	if (ss->ss_family == AF_INET6) {
		inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof(ip));
		snprintf(buf, len, "[%s]:%u", ip, ntohs(s6->sin6_port));
	} else {
		inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof(ip));
		snprintf(buf, len, "%s:%u", ip, ntohs(s4->sin_port));
	}
}

bool ndc_reload_same_str(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

/* The one check across the running configuration: stub domains stay out of its zone. */
const char *ndc_reload_stub_in_zone(const struct ndc_stub_domain *v, size_t n, const char *zone)
{
	size_t z = strlen(zone);

	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(v[i].zone);

		if (l >= z && !strcmp(v[i].zone + l - z, zone) &&
		    (l == z || v[i].zone[l - z - 1] == '.'))
			return v[i].zone;
	}
	return NULL;
}

/* ---- fail-open to a loopback upstream ---------------------------------------------------- */

static bool is_loopback(const struct sockaddr_storage *ss)
{
	const struct sockaddr_in6 *s6 = (const void *)ss;
	const struct sockaddr_in *s4 = (const void *)ss;

	if (ss->ss_family == AF_INET)
		return (ntohl(s4->sin_addr.s_addr) >> 24) == 127;
	if (ss->ss_family != AF_INET6)
		return false;
	return IN6_IS_ADDR_LOOPBACK(&s6->sin6_addr) ||
	       (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr) && s6->sin6_addr.s6_addr[12] == 127);
}

bool ndc_reload_failopen_loopback(const struct ndc_config *cfg, char *buf, size_t len)
{
	bool seen4 = false, seen6 = false, any = false;
	size_t off = 0;

	buf[0] = '\0';
	for (size_t i = 0; cfg->dataplane.failopen && i < cfg->n_upstream; i++) {
		const struct sockaddr_storage *ss = &cfg->upstream[i];
		bool *seen = ss->ss_family == AF_INET6 ? &seen6 : &seen4;
		char a[64];

		/* The fast path fails open to the first upstream of each family (fastpath.c). */
		if (*seen)
			continue;
		*seen = true;
		if (!is_loopback(ss) || off >= len)
			continue;
		ndc_reload_addr_text(ss, a, sizeof(a));
		off += (size_t)snprintf(buf + off, len - off, "%s%s", any ? ", " : "", a);
		any = true;
	}
	return any;
}

/* ---- routes: the config's upstream and stub domains, and the kube-dns ConfigMap's
 * ---------- */

static bool has_zone(const struct routes *rt, const char *zone)
{
	for (size_t i = 0; i < rt->o.n_routes; i++)
		if (!strcmp(rt->r[i].zone, zone))
			return true;
	return false;
}

/*
 * What the forwarder gets, as NodeLocal DNSCache builds its Corefile: stub domains (the
 * config file's win over the ConfigMap's for the same zone); upstreamNameservers, when set,
 * for every other name but the cluster domain and the reverse zones, which stay with
 * upstream (the kube-dns-upstream Service); zone_kept is the running cluster domain (a new
 * one in the file waits for a restart). Points into cfg and kd.
 */
void ndc_reload_routes_make(const struct ndc_config *cfg, const char *zone_kept,
			    const struct kube_dns *kd, bool log_conflicts, struct routes *rt)
{
	static const char *const kept[] = {NULL, "in-addr.arpa", "ip6.arpa"};

	memset(rt, 0, sizeof(*rt));
	ndc_forwarder_opts_from_config(&rt->o, cfg);
	rt->o.routes = rt->r;
	for (size_t i = 0; i < cfg->n_stub_domains; i++)
		rt->r[rt->o.n_routes++] =
		    (struct ndc_forwarder_route){.zone = cfg->stub_domains[i].zone,
						 .n_upstreams = cfg->stub_domains[i].n_servers,
						 .upstreams = cfg->stub_domains[i].servers};
	for (size_t i = 0; i < kd->n_stubs; i++) {
		if (has_zone(rt, kd->stubs[i].zone)) {
			if (log_conflicts)
				ndc_warn("kube-dns ConfigMap: stubDomains: %s is in the config "
					 "file's stub_domains too; the config file's servers "
					 "are "
					 "used",
					 kd->stubs[i].zone);
			continue;
		}
		rt->r[rt->o.n_routes++] =
		    (struct ndc_forwarder_route){.zone = kd->stubs[i].zone,
						 .n_upstreams = kd->stubs[i].n_servers,
						 .upstreams = kd->stubs[i].servers};
	}
	rt->n_zones = rt->o.n_routes;
	if (!kd->n_ups)
		return;
	rt->o.n_upstreams = kd->n_ups;
	rt->o.upstreams = kd->ups;
	for (size_t i = 0; i < 3 && cfg->n_upstream; i++) {
		const char *zone = kept[i] ? kept[i] : zone_kept;

		if (!has_zone(rt, zone))
			rt->r[rt->o.n_routes++] =
			    (struct ndc_forwarder_route){.zone = zone,
							 .n_upstreams = cfg->n_upstream,
							 .upstreams = cfg->upstream};
	}
}

void ndc_reload_servers_text(const struct sockaddr_storage *v, size_t n, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n && off < len; i++) {
		char a[64];

		ndc_reload_addr_text(&v[i], a, sizeof(a));
		off += (size_t)snprintf(buf + off, len - off, "%s%s", i ? "," : "", a);
	}
}

/* The routes as text: equal texts, equal routes. */
static char *routes_text(const struct routes *rt)
{
	size_t cap = 256 + (rt->o.n_routes + 1) * (NDC_CFG_MAX_ADDRS * 56 + 260), off;
	char *s = malloc(cap);

	if (!s)
		return NULL;
	off = (size_t)snprintf(s, cap, "timeout %u pending %u protocol %d policy %d default ",
			       rt->o.timeout_ms, rt->o.max_pending, (int)rt->o.protocol,
			       (int)rt->o.policy);
	ndc_reload_servers_text(rt->o.upstreams, rt->o.n_upstreams, s + off, cap - off);
	for (size_t i = 0; i < rt->o.n_routes; i++) {
		off = strlen(s);
		off += (size_t)snprintf(s + off, cap - off, "; %s ", rt->r[i].zone);
		ndc_reload_servers_text(rt->r[i].upstreams, rt->r[i].n_upstreams, s + off,
					cap - off);
	}
	return s;
}

/*
 * Gives the forwarder routes when they differ from those in effect. 1 when they changed, 0
 * when not, or -errno (nothing changed then).
 */
int ndc_reload_routes_apply(struct ndc_reload *rl, const struct routes *rt)
{
	char *key = routes_text(rt);
	int err;

	if (!key)
		return -ENOMEM;
	if (rl->routes_key && !strcmp(key, rl->routes_key)) {
		free(key);
		return 0;
	}
	err = ndc_forwarder_reconfigure(rl->t.fwd, &rt->o);
	if (err < 0) {
		free(key);
		return err;
	}
	free(rl->routes_key);
	rl->routes_key = key;
	atomic_store(&rl->n_stub_zones, rt->n_zones);
	return 1;
}

const char *ndc_reload_routes_error(int err)
{
	return err == -E2BIG ? "more than the forwarder takes (8 servers per zone, 32 distinct "
			       "servers, 256 zones in all)"
			     : strerror(-err);
}
