/* SPDX-License-Identifier: MIT */
/*
 * The record model, first stage: the object store becomes pending RRs grouped by owner name in
 * a scratch arena (struct ndc_rec_bld), following the Kubernetes DNS specification (schema
 * 1.1.0) and CoreDNS kubernetes-plugin behaviour where the spec is silent. Names that cannot be
 * put in a query are skipped and counted, never fatal. records_render.c renders the result.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "internal.h"

/* SOA timers as CoreDNS writes them; the minimum is the record TTL (RFC 2308 4 negative TTL). */
#define SOA_REFRESH 7200
#define SOA_RETRY 1800
#define SOA_EXPIRE 86400
#define DNS_SCHEMA_VERSION "1.1.0"
#define ARENA_CHUNK (1u << 20)

/* ---------------------------------------------------------------------------------------------
 * Build scratch: arena, pending RRs by owner.
 */
struct ndc_rec_chunk {
	struct ndc_rec_chunk *next;
	size_t used;
	size_t cap;
	max_align_t data[];
};

static void *arena_alloc(struct ndc_rec_bld *b, size_t n)
{
	struct ndc_rec_chunk *c = b->chunks;

	n = (n + 7) & ~(size_t)7;
	if (!c || c->cap - c->used < n) {
		size_t cap = n > ARENA_CHUNK ? n : ARENA_CHUNK;

		c = malloc(sizeof(*c) + cap);
		if (!c) {
			b->err = -ENOMEM;
			return NULL;
		}
		c->used = 0;
		c->cap = cap;
		c->next = b->chunks;
		b->chunks = c;
		b->arena_bytes += sizeof(*c) + cap;
	}
	void *p = (uint8_t *)c->data + c->used;
	c->used += n;
	return p;
}

static struct ndc_rec_node **tslot(struct ndc_rec_node **tab, size_t cap, const uint8_t *n,
				   size_t len, uint32_t h)
{
	for (size_t i = h & (cap - 1);; i = (i + 1) & (cap - 1)) {
		struct ndc_rec_node *t = tab[i];

		if (!t || (t->hash == h && t->nlen == len && !memcmp(t->name, n, len)))
			return &tab[i];
	}
}

static int tgrow(struct ndc_rec_bld *b)
{
	size_t cap = b->tcap ? b->tcap * 2 : 1024;
	struct ndc_rec_node **tab = calloc(cap, sizeof(*tab));

	if (!tab)
		return -ENOMEM;
	for (size_t i = 0; i < b->tcap; i++) {
		struct ndc_rec_node *t = b->tab[i];

		if (t)
			*tslot(tab, cap, t->name, t->nlen, t->hash) = t;
	}
	free(b->tab);
	b->tab = tab;
	b->tcap = cap;
	return 0;
}

struct ndc_rec_node *ndc_rec_find(const struct ndc_rec_bld *b, const uint8_t *n, size_t len)
{
	return *tslot(b->tab, b->tcap, n, len, ndc_rec_name_hash(n, len));
}

static struct ndc_rec_node *tinsert(struct ndc_rec_bld *b, const uint8_t *n, size_t len,
				    bool *created)
{
	uint32_t h = ndc_rec_name_hash(n, len);
	struct ndc_rec_node **s;

	*created = false;
	if (b->err)
		return NULL;
	if ((b->tcount + 1) * 2 > b->tcap) {
		b->err = tgrow(b);
		if (b->err)
			return NULL;
	}
	s = tslot(b->tab, b->tcap, n, len, h);
	if (*s)
		return *s;
	struct ndc_rec_node *t = arena_alloc(b, sizeof(*t) + len);
	if (!t)
		return NULL;
	t->head = t->tail = NULL;
	t->parent = NULL;
	t->off = 0;
	t->unindexed = false;
	t->hash = h;
	t->nlen = (uint8_t)len;
	memcpy(t->name, n, len);
	*s = t;
	b->tcount++;
	*created = true;
	return t;
}

static const uint8_t in_addr_arpa[] = "\7in-addr\4arpa";

/*
 * Names under the zone bring their empty non-terminals with them, up to the apex. IPv4 reverse
 * names bring theirs up to in-addr.arpa: they are never answered (only PTR is, out of the zone)
 * but let each PTR node store one label. IPv6 nibble names would need more nodes than they save.
 */
static struct ndc_rec_node *tnode_get(struct ndc_rec_bld *b, const uint8_t *n, size_t len)
{
	bool created;
	struct ndc_rec_node *t = tinsert(b, n, len, &created);
	size_t stop = ndc_rec_bld_zone(b, n, len);

	if (!created)
		return t;
	if (!stop) {
		stop = sizeof(in_addr_arpa);
		if (!ndc_name_in_zone(n, len, in_addr_arpa, stop))
			return t;
	}
	for (struct ndc_rec_node *child = t; child && len > stop && created;) {
		len -= n[0] + 1u;
		n += n[0] + 1u;
		child = child->parent = tinsert(b, n, len, &created);
	}
	return t;
}

struct ndc_rec_node *ndc_rec_node_get(struct ndc_rec_bld *b, const uint8_t *n, size_t len)
{
	return tnode_get(b, n, len);
}

void ndc_rec_add_rr(struct ndc_rec_bld *b, const uint8_t *owner, size_t olen, uint16_t type,
		    const void *rdata, size_t rdlen, uint8_t weight)
{
	struct ndc_rec_node *t = tnode_get(b, owner, olen);
	struct ndc_rec_rr *rr;

	if (!t)
		return;
	rr = arena_alloc(b, sizeof(*rr) + rdlen);
	if (!rr)
		return;
	rr->next = NULL;
	rr->type = type;
	rr->rdlen = (uint16_t)rdlen;
	rr->weight = weight;
	memcpy(rr->rdata, rdata, rdlen);
	if (t->tail)
		t->tail->next = rr;
	else
		t->head = rr;
	t->tail = rr;
}

/*
 * A PTR record at ip's reverse name for target tgt: compact (struct ndc_rec_ptr) when the target
 * is a node or the address's dashed label (dash, or NULL to make it) before one, else a record
 * of the reverse-name node.
 */
static void add_ptr(struct ndc_rec_bld *b, const struct ndc_ip *ip, const uint8_t *tgt, size_t tl,
		    const char *dash)
{
	uint8_t rev[NDC_NAME_MAX];

	if (b->compact_ptrs && !b->err) {
		struct ndc_rec_node *t = ndc_rec_find(b, tgt, tl);
		char buf[INET6_ADDRSTRLEN];
		bool dashed = false;

		if (!t) {
			size_t dl;

			if (!dash) {
				ndc_rec_dashed(ip, buf, sizeof(buf));
				dash = buf;
			}
			dl = strlen(dash);
			if (tgt[0] == dl && 1 + dl < tl && !memcmp(tgt + 1, dash, dl)) {
				t = ndc_rec_find(b, tgt + 1 + dl, tl - 1 - dl);
				dashed = true;
			}
		}
		if (t) {
			if (b->n_ptrs == b->cap_ptrs) {
				size_t cap = b->cap_ptrs ? 2 * b->cap_ptrs : 1024;
				struct ndc_rec_ptr *p = reallocarray(b->ptrs, cap, sizeof(*p));

				if (!p) {
					b->err = -ENOMEM;
					return;
				}
				b->ptrs = p;
				b->cap_ptrs = cap;
			}
			b->ptrs[b->n_ptrs++] =
			    (struct ndc_rec_ptr){.tgt = t, .ip = *ip, .dashed = dashed};
			return;
		}
		b->ptr_nodes++;
	}
	ndc_rec_add_rr(b, rev, ndc_records_reverse_name(ip, rev), NDC_T_PTR, tgt, tl,
		       NDC_REC_W_FIXED);
}

static void skip(struct ndc_rec_bld *b, const char *what, const char *ns, const char *name)
{
	if (!b->skipped++)
		snprintf(b->first_skip, sizeof(b->first_skip), "%s %s/%s", what, ns ? ns : "",
			 name ? name : "");
}

/* ---------------------------------------------------------------------------------------------
 * Names.
 */

/* Kubernetes names are RFC 1123 labels; anything else cannot be put in a query. */
static bool label_ok(const char *s, size_t len)
{
	if (!s || !len || len > NDC_LABEL_MAX)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-'))
			return false;
	}
	return true;
}

/* out = [prefix]label . base, lowercase. -EINVAL for a bad label or a name over 255 bytes. */
static int join(uint8_t *out, size_t *ret_len, char prefix, const char *label, const uint8_t *base,
		size_t blen)
{
	size_t l = label ? strlen(label) : 0, pl = prefix ? 1 : 0;

	if (!label_ok(label, l) || l + pl > NDC_LABEL_MAX || 1 + pl + l + blen > NDC_NAME_MAX)
		return -EINVAL;
	out[0] = (uint8_t)(pl + l);
	if (prefix)
		out[1] = (uint8_t)prefix;
	for (size_t i = 0; i < l; i++) {
		char c = label[i];

		out[1 + pl + i] = (uint8_t)(c >= 'A' && c <= 'Z' ? c + 32 : c);
	}
	memcpy(out + 1 + pl + l, base, blen);
	*ret_len = 1 + pl + l + blen;
	return 0;
}

int ndc_rec_join(uint8_t *out, size_t *ret_len, const char *label, const uint8_t *base, size_t blen)
{
	return join(out, ret_len, 0, label, base, blen);
}

void ndc_rec_skip(struct ndc_rec_bld *b, const char *what, const char *ns, const char *name)
{
	skip(b, what, ns, name);
}

/* inet_ntop with ':' and '.' -> '-' */
void ndc_rec_dashed(const struct ndc_ip *ip, char *out, size_t cap)
{
	inet_ntop(ip->family, ip->addr, out, (socklen_t)cap);
	for (char *p = out; *p; p++)
		if (*p == '.' || *p == ':')
			*p = '-';
}

/* RFC 1035 3.5 (in-addr.arpa) and RFC 3596 2.5 (ip6.arpa, nibbles). */
size_t ndc_records_reverse_name(const struct ndc_ip *ip, uint8_t *out)
{
	static const char hex[] = "0123456789abcdef";
	static const uint8_t v4[] = "\7in-addr\4arpa";
	static const uint8_t v6[] = "\3ip6\4arpa";
	size_t len = 0;

	if (ip->family == AF_INET) {
		for (int i = 3; i >= 0; i--) {
			int n = snprintf((char *)out + len + 1, 4, "%u", ip->addr[i]);

			out[len] = (uint8_t)n;
			len += 1 + (size_t)n;
		}
		memcpy(out + len, v4, sizeof(v4));
		return len + sizeof(v4);
	}
	for (int i = 15; i >= 0; i--) {
		out[len++] = 1;
		out[len++] = (uint8_t)hex[ip->addr[i] & 15];
		out[len++] = 1;
		out[len++] = (uint8_t)hex[ip->addr[i] >> 4];
	}
	memcpy(out + len, v6, sizeof(v6));
	return len + sizeof(v6);
}

static const char *proto_label(uint8_t proto)
{
	switch (proto) {
	case IPPROTO_TCP:
		return "tcp";
	case IPPROTO_UDP:
		return "udp";
	case IPPROTO_SCTP:
		return "sctp";
	}
	return NULL;
}

/* ---------------------------------------------------------------------------------------------
 * Objects to pending RRs.
 */
bool ndc_rec_ns_allowed(const struct ndc_records_opts *opts, const char *ns)
{
	if (!opts->n_namespaces)
		return true;
	for (size_t i = 0; ns && i < opts->n_namespaces; i++)
		if (!strcmp(opts->namespaces[i], ns))
			return true;
	return false;
}

/*
 * <ns>.svc.<zone> (and <ns>.pod.<zone> when pod records are on) exist for a known namespace, and
 * <ns>.svc.<zone> of each multicluster zone (CoreDNS: NODATA for a namespace of the cluster).
 */
static int add_namespace(struct ndc_rec_bld *b, const char *ns, uint8_t *ret_nsn, size_t *ret_nsl)
{
	uint8_t n[NDC_NAME_MAX];
	size_t l;

	if (join(ret_nsn, ret_nsl, 0, ns, b->svcz, b->svczlen))
		return -EINVAL;
	tnode_get(b, ret_nsn, *ret_nsl);
	if (b->opts->pods != NDC_PODS_DISABLED && !join(n, &l, 0, ns, b->podz, b->podzlen))
		tnode_get(b, n, l);
	for (size_t i = 0; i < b->n_mcz; i++)
		if (!join(n, &l, 0, ns, b->mcz[i].svcz, b->mcz[i].svczlen))
			tnode_get(b, n, l);
	return 0;
}

void ndc_rec_add_srv(struct ndc_rec_bld *b, const uint8_t *svn, size_t svl,
		     const struct ndc_k8s_port *p, const uint8_t *target, size_t tlen,
		     uint8_t weight)
{
	uint8_t rd[6 + NDC_NAME_MAX], pn[NDC_NAME_MAX], own[NDC_NAME_MAX];
	size_t pl, ol;
	const char *proto = proto_label(p->proto);

	if (!p->port)
		return; /* an EndpointSlice port without a number: nothing to tell */
	ndc_put16(rd, 0);
	ndc_put16(rd + 2, weight == NDC_REC_W_FIXED ? NDC_REC_SRV_WEIGHT : 0);
	ndc_put16(rd + 4, p->port);
	memcpy(rd + 6, target, tlen);
	/* Unnamed ports have no _<port>._<proto> name (spec 2.3.2, 2.4.2). */
	if (p->name && proto) {
		if (!join(pn, &pl, '_', proto, svn, svl) && !join(own, &ol, '_', p->name, pn, pl))
			ndc_rec_add_rr(b, own, ol, NDC_T_SRV, rd, 6 + tlen, weight);
		else
			skip(b, "port", "", p->name);
	}
	/* CoreDNS answers SRV at the service name itself with every port, named or not. */
	ndc_rec_add_rr(b, svn, svl, NDC_T_SRV, rd, 6 + tlen, weight);
}

static bool ep_served(const struct ndc_k8s_service *s, const struct ndc_k8s_endpoint *ep)
{
	return ep->ready || s->publish_not_ready;
}

const char *ndc_rec_ep_host(struct ndc_rec_bld *b, const char *ns,
			    const struct ndc_k8s_endpoint *ep)
{
	if (ep->hostname) {
		if (!label_ok(ep->hostname, strlen(ep->hostname))) {
			skip(b, "endpoint hostname", ns, ep->hostname);
			return NULL;
		}
		return ep->hostname;
	}
	if (b->opts->endpoint_pod_names && ep->pod_name &&
	    label_ok(ep->pod_name, strlen(ep->pod_name)))
		return ep->pod_name; /* CoreDNS falls back to the dashed IP for other pod names */
	return NULL;
}

int ndc_rec_ep_name(struct ndc_rec_bld *b, const char *ns, const char *host,
		    const struct ndc_ip *ip, const uint8_t *base, size_t blen, char *dash,
		    uint8_t *ret_name, size_t *ret_len)
{
	if (!ndc_rec_ip_ok(ip))
		return -EAFNOSUPPORT;
	ndc_rec_dashed(ip, dash, INET6_ADDRSTRLEN);
	if (join(ret_name, ret_len, 0, host ? host : dash, base, blen)) {
		skip(b, "endpoint", ns, host ? host : dash);
		return -EINVAL;
	}
	return 0;
}

static void add_endpoint(struct ndc_rec_bld *b, const struct ndc_k8s_service *s,
			 const struct ndc_k8s_slice *sl, const struct ndc_k8s_endpoint *ep,
			 const uint8_t *svn, size_t svl)
{
	const char *host = ndc_rec_ep_host(b, s->ns, ep);
	uint8_t hn[NDC_NAME_MAX];
	size_t hl;

	if (ep->hostname && !host)
		return; /* a hostname that is no label: skipped */
	for (size_t i = 0; i < ep->n_addrs; i++) {
		const struct ndc_ip *ip = &ep->addrs[i];
		char dash[INET6_ADDRSTRLEN];

		if (ndc_rec_ep_name(b, s->ns, host, ip, svn, svl, dash, hn, &hl) < 0)
			continue;
		if (s->headless && !b->mc_cluster) {
			/* Spec 2.4.1: <hostname>.<svc> and per-endpoint SRV exist for headless. */
			ndc_rec_add_rr(b, svn, svl, ndc_rec_addr_type(ip), ip->addr,
				       ndc_rec_addr_len(ip), NDC_REC_W_FIXED);
			ndc_rec_add_rr(b, hn, hl, ndc_rec_addr_type(ip), ip->addr,
				       ndc_rec_addr_len(ip), NDC_REC_W_FIXED);
			for (size_t p = 0; p < sl->n_ports; p++)
				ndc_rec_add_srv(b, svn, svl, &sl->ports[p], hn, hl,
						NDC_REC_W_SPLIT);
		}
		/* Spec 2.4.1: the PTR names the endpoint whichever kind its service is (after its
		 * A record: a compact PTR needs its target's node). */
		add_ptr(b, ip, hn, hl, host ? NULL : dash);
	}
}

static size_t count_served(const struct ndc_k8s_objects *o, const struct ndc_k8s_service *s,
			   size_t head, const size_t *next)
{
	size_t n = 0;

	for (size_t i = head; i != SIZE_MAX; i = next[i]) {
		const struct ndc_k8s_slice *sl = &o->slices[i];

		for (size_t e = 0; e < sl->n_endpoints; e++)
			if (ep_served(s, &sl->endpoints[e]))
				n += sl->endpoints[e].n_addrs;
	}
	return n;
}

static void add_service(struct ndc_rec_bld *b, const struct ndc_k8s_objects *o, size_t si,
			size_t head, const size_t *next)
{
	const struct ndc_k8s_service *s = &o->services[si];
	uint8_t nsn[NDC_NAME_MAX], svn[NDC_NAME_MAX], tgt[NDC_NAME_MAX];
	size_t nsl, svl, tl;

	if (!ndc_rec_ns_allowed(b->opts, s->ns))
		return;
	if (add_namespace(b, s->ns, nsn, &nsl) || join(svn, &svl, 0, s->name, nsn, nsl)) {
		skip(b, "service", s->ns, s->name);
		return;
	}
	if (s->type == NDC_SVC_EXTERNAL_NAME && b->mc_cluster)
		return; /* the zone answers from ServiceImports: an alias has no name */
	if (s->type == NDC_SVC_EXTERNAL_NAME) {
		if (!s->external_name ||
		    ndc_name_from_text(s->external_name, tgt, sizeof(tgt), &tl) || tl < 2) {
			skip(b, "externalName of service", s->ns, s->name);
			return;
		}
		ndc_name_lower(tgt, tgt, tl);
		ndc_rec_add_rr(b, svn, svl, NDC_T_CNAME, tgt, tl, NDC_REC_W_FIXED);
		return;
	}
	if (b->opts->ignore_empty_service && !count_served(o, s, head, next))
		return;
	/*
	 * A headless service is its endpoints: with none ready it is NXDOMAIN (spec 2.4.1, as
	 * CoreDNS answers), its name made by the first endpoint's records.
	 */
	/*
	 * A multicluster cluster domain answers from ServiceImports; its Services keep only their
	 * PTR records (CoreDNS's reverse zones read Services whatever the forward zone does).
	 */
	if (!s->headless) {
		if (!b->mc_cluster)
			tnode_get(b, svn, svl);
		for (size_t i = 0; i < s->n_ips && i < NDC_K8S_MAX_CLUSTER_IPS; i++) {
			const struct ndc_ip *ip = &s->ips[i];

			if (!ndc_rec_ip_ok(ip))
				continue;
			if (!b->mc_cluster)
				ndc_rec_add_rr(b, svn, svl, ndc_rec_addr_type(ip), ip->addr,
					       ndc_rec_addr_len(ip), NDC_REC_W_FIXED);
			add_ptr(b, ip, svn, svl, NULL);
		}
		for (size_t p = 0; p < s->n_ports && !b->mc_cluster; p++)
			ndc_rec_add_srv(b, svn, svl, &s->ports[p], svn, svl, NDC_REC_W_FIXED);
	}
	for (size_t i = head; i != SIZE_MAX; i = next[i]) {
		const struct ndc_k8s_slice *sl = &o->slices[i];

		for (size_t e = 0; e < sl->n_endpoints; e++)
			if (ep_served(s, &sl->endpoints[e]))
				add_endpoint(b, s, sl, &sl->endpoints[e], svn, svl);
	}
}

static bool same_str(const char *a, const char *b)
{
	return a && b && !strcmp(a, b);
}

static uint32_t svc_hash(const char *ns, const char *name)
{
	uint32_t h1 = ndc_rec_name_hash((const uint8_t *)ns, strlen(ns));

	return h1 * 31 + ndc_rec_name_hash((const uint8_t *)name, strlen(name));
}

/* Chains each service's EndpointSlices (head[svc], next[slice]) through a temporary index. */
static int link_slices(const struct ndc_k8s_objects *o, size_t *head, size_t *next)
{
	size_t cap = 16;

	while (cap < o->n_services * 2)
		cap *= 2;
	size_t *idx = calloc(cap, sizeof(*idx)); /* service index + 1 */
	if (!idx)
		return -ENOMEM;
	for (size_t i = 0; i < o->n_services; i++) {
		const struct ndc_k8s_service *s = &o->services[i];

		head[i] = SIZE_MAX;
		if (!s->ns || !s->name)
			continue;
		size_t j = svc_hash(s->ns, s->name) & (cap - 1);
		while (idx[j])
			j = (j + 1) & (cap - 1);
		idx[j] = i + 1;
	}
	for (size_t k = o->n_slices; k-- > 0;) {
		const struct ndc_k8s_slice *sl = &o->slices[k];

		next[k] = SIZE_MAX;
		if (!sl->service || !sl->ns || !sl->family)
			continue; /* FQDN slices carry no addresses DNS can serve */
		for (size_t j = svc_hash(sl->ns, sl->service) & (cap - 1); idx[j];
		     j = (j + 1) & (cap - 1)) {
			const struct ndc_k8s_service *s = &o->services[idx[j] - 1];

			if (same_str(s->ns, sl->ns) && same_str(s->name, sl->service)) {
				next[k] = head[idx[j] - 1];
				head[idx[j] - 1] = k;
				break;
			}
		}
	}
	free(idx);
	return 0;
}

static void add_pods(struct ndc_rec_bld *b, const struct ndc_k8s_objects *o)
{
	uint8_t nsn[NDC_NAME_MAX], pn[NDC_NAME_MAX];
	size_t nsl, pl;

	for (size_t i = 0; i < o->n_pods; i++) {
		const struct ndc_k8s_pod *p = &o->pods[i];

		if (!ndc_rec_ns_allowed(b->opts, p->ns))
			continue;
		if (join(nsn, &nsl, 0, p->ns, b->podz, b->podzlen)) {
			skip(b, "pod", p->ns, p->name);
			continue;
		}
		for (size_t k = 0; k < p->n_ips && k < 2; k++) {
			char dash[INET6_ADDRSTRLEN];

			if (!ndc_rec_ip_ok(&p->ips[k]))
				continue;
			ndc_rec_dashed(&p->ips[k], dash, sizeof(dash));
			if (!join(pn, &pl, 0, dash, nsn, nsl))
				ndc_rec_add_rr(b, pn, pl, ndc_rec_addr_type(&p->ips[k]),
					       p->ips[k].addr, ndc_rec_addr_len(&p->ips[k]),
					       NDC_REC_W_FIXED);
		}
	}
}

void ndc_rec_add_apex(struct ndc_rec_bld *b, const uint8_t *zone, size_t zlen, uint8_t *soa,
		      size_t *ret_soa_len)
{
	uint8_t dns[NDC_NAME_MAX], nsn[NDC_NAME_MAX], txt[NDC_NAME_MAX], sp[NDC_NAME_MAX];
	size_t dl, nl, tl, ml, rl, svl, pl;

	if (join(dns, &dl, 0, "dns", zone, zlen) || join(nsn, &nl, 0, "ns", dns, dl) ||
	    join(txt, &tl, 0, "dns-version", zone, zlen) ||
	    join(soa + nl, &rl, 0, "hostmaster", zone, zlen) ||
	    join(sp, &svl, 0, "svc", zone, zlen)) {
		b->err = -EINVAL;
		return;
	}
	memcpy(soa, nsn, nl);
	ml = nl + rl;
	/* Serial: fixed by the caller, or build time (RFC 1982 arithmetic either way). */
	ndc_put32(soa + ml, b->opts->serial ? b->opts->serial : (uint32_t)time(NULL));
	ndc_put32(soa + ml + 4, SOA_REFRESH);
	ndc_put32(soa + ml + 8, SOA_RETRY);
	ndc_put32(soa + ml + 12, SOA_EXPIRE);
	ndc_put32(soa + ml + 16, b->opts->ttl);
	*ret_soa_len = ml + 20;
	ndc_rec_add_rr(b, zone, zlen, NDC_T_SOA, soa, ml + 20, NDC_REC_W_FIXED);
	ndc_rec_add_rr(b, zone, zlen, NDC_T_NS, nsn, nl, NDC_REC_W_FIXED);
	tnode_get(b, nsn, nl);
	for (size_t i = 0; i < b->opts->n_ns_addrs; i++) {
		const struct ndc_ip *ip = &b->opts->ns_addrs[i];

		if (ndc_rec_ip_ok(ip))
			ndc_rec_add_rr(b, nsn, nl, ndc_rec_addr_type(ip), ip->addr,
				       ndc_rec_addr_len(ip), NDC_REC_W_FIXED);
	}
	uint8_t ver[1 + sizeof(DNS_SCHEMA_VERSION)] = {sizeof(DNS_SCHEMA_VERSION) - 1};
	memcpy(ver + 1, DNS_SCHEMA_VERSION, sizeof(DNS_SCHEMA_VERSION) - 1);
	ndc_rec_add_rr(b, txt, tl, NDC_T_TXT, ver, sizeof(ver) - 1, NDC_REC_W_FIXED);
	/*
	 * RFC 8020: NXDOMAIN says nothing exists below a name, and a client may cache it so. svc
	 * and pod are the spec's fixed labels: NODATA whatever the cluster holds and the pods mode.
	 */
	tnode_get(b, sp, svl);
	if (!join(sp, &pl, 0, "pod", zone, zlen))
		tnode_get(b, sp, pl);
}

/* ---------------------------------------------------------------------------------------------
 * Entry points for records_render.c.
 */
int ndc_rec_bld_init(struct ndc_rec_bld *b, const struct ndc_records_opts *opts)
{
	*b = (struct ndc_rec_bld){.opts = opts};
	if (!opts->zone || ndc_name_from_text(opts->zone, b->zone, sizeof(b->zone), &b->zlen))
		return -EINVAL;
	ndc_name_lower(b->zone, b->zone, b->zlen);
	if (join(b->svcz, &b->svczlen, 0, "svc", b->zone, b->zlen) ||
	    join(b->podz, &b->podzlen, 0, "pod", b->zone, b->zlen) ||
	    opts->n_mc_zones > NDC_RECORDS_MAX_MC_ZONES)
		return -EINVAL;
	for (size_t i = 0; i < opts->n_mc_zones; i++) {
		struct ndc_rec_bzone *z = &b->mcz[b->n_mcz];
		bool dup = false;

		if (!opts->mc_zones[i] ||
		    ndc_name_from_text(opts->mc_zones[i], z->zone, sizeof(z->zone), &z->zlen) ||
		    z->zlen < 2 || join(z->svcz, &z->svczlen, 0, "svc", z->zone, z->zlen))
			return -EINVAL;
		ndc_name_lower(z->zone, z->zone, z->zlen);
		ndc_name_lower(z->svcz, z->svcz, z->svczlen);
		if (z->zlen == b->zlen && !memcmp(z->zone, b->zone, b->zlen)) {
			b->mc_cluster = true;
			continue;
		}
		for (size_t k = 0; k < b->n_mcz && !dup; k++)
			dup =
			    b->mcz[k].zlen == z->zlen && !memcmp(b->mcz[k].zone, z->zone, z->zlen);
		b->n_mcz += !dup;
	}
	return tgrow(b);
}

void ndc_rec_bld_free(struct ndc_rec_bld *b)
{
	while (b->chunks) {
		struct ndc_rec_chunk *c = b->chunks;

		b->chunks = c->next;
		free(c);
	}
	free(b->tab);
	free(b->vec);
	free(b->xvec);
	free(b->ptrs);
}

/* ---------------------------------------------------------------------------------------------
 * Compact PTR records (full builds).
 */
static bool same_addr(const struct ndc_rec_ptr *a, const struct ndc_rec_ptr *b)
{
	return a->ip.family == b->ip.family && !memcmp(a->ip.addr, b->ip.addr, 16);
}

static int ptr_addr_cmp(const void *x, const void *y)
{
	const struct ndc_rec_ptr *a = x, *b = y;

	if (a->ip.family != b->ip.family)
		return a->ip.family < b->ip.family ? -1 : 1;
	return memcmp(a->ip.addr, b->ip.addr, 16);
}

/* The target's name (NDC_NAME_MAX bytes, a label more); its length. */
static size_t ptr_name(const struct ndc_rec_ptr *p, uint8_t *out)
{
	size_t l = 0;

	if (p->dashed) {
		char dash[INET6_ADDRSTRLEN];

		ndc_rec_dashed(&p->ip, dash, sizeof(dash));
		l = strlen(dash);
		out[0] = (uint8_t)l;
		memcpy(out + 1, dash, l++);
	}
	memcpy(out + l, p->tgt->name, p->tgt->nlen);
	return l + p->tgt->nlen;
}

/* As rendering orders RRs: RDATA length, then bytes. */
static int ptr_name_cmp(const void *x, const void *y)
{
	uint8_t a[NDC_NAME_MAX + NDC_LABEL_MAX + 1], b[NDC_NAME_MAX + NDC_LABEL_MAX + 1];
	size_t al = ptr_name(x, a), bl = ptr_name(y, b);

	if (al != bl)
		return al < bl ? -1 : 1;
	return memcmp(a, b, al);
}

size_t ndc_rec_ptrs_group(const struct ndc_rec_bld *b, size_t i)
{
	size_t n = 1;

	while (i + n < b->n_ptrs && same_addr(&b->ptrs[i], &b->ptrs[i + n]))
		n++;
	return n;
}

int ndc_rec_ptrs_resolve(struct ndc_rec_bld *b)
{
	size_t w = 0;

	if (b->err || !b->n_ptrs)
		return b->err;
	qsort(b->ptrs, b->n_ptrs, sizeof(*b->ptrs), ptr_addr_cmp);
	for (size_t i = 0, n; i < b->n_ptrs; i += n) {
		struct ndc_rec_ptr *g = &b->ptrs[i];
		uint8_t rev[NDC_NAME_MAX];
		size_t u = 1, rl = 0;

		n = ndc_rec_ptrs_group(b, i);
		if (n > 1) {
			qsort(g, n, sizeof(*g), ptr_name_cmp);
			for (size_t k = 1; k < n; k++) /* RFC 2181 5: a set has no duplicates */
				if (ptr_name_cmp(&g[u - 1], &g[k]))
					g[u++] = g[k];
		}
		if (b->ptr_nodes || u > NDC_REC_REV_MAX_TARGETS)
			rl = ndc_records_reverse_name(&g->ip, rev);
		if (u > NDC_REC_REV_MAX_TARGETS || (b->ptr_nodes && ndc_rec_find(b, rev, rl))) {
			/* too big for the index, or the name has records of the node path too */
			for (size_t k = 0; k < u; k++) {
				uint8_t t[NDC_NAME_MAX + NDC_LABEL_MAX + 1];

				ndc_rec_add_rr(b, rev, rl, NDC_T_PTR, t, ptr_name(&g[k], t),
					       NDC_REC_W_FIXED);
			}
			continue;
		}
		memmove(&b->ptrs[w], g, u * sizeof(*g));
		w += u;
	}
	b->n_ptrs = w;
	return b->err;
}

int ndc_rec_add_namespace(struct ndc_rec_bld *b, const char *ns)
{
	uint8_t n[NDC_NAME_MAX];
	size_t l;

	return add_namespace(b, ns, n, &l);
}

void ndc_rec_add_pod_namespace(struct ndc_rec_bld *b, const char *ns)
{
	uint8_t n[NDC_NAME_MAX];
	size_t l;

	if (b->opts->pods != NDC_PODS_DISABLED && ndc_rec_ns_allowed(b->opts, ns) &&
	    !join(n, &l, 0, ns, b->podz, b->podzlen))
		tnode_get(b, n, l);
}

int ndc_rec_add_objects(struct ndc_rec_bld *b, const struct ndc_k8s_objects *o)
{
	size_t *head = malloc((o->n_services + 1) * sizeof(*head));
	size_t *next = malloc((o->n_slices + 1) * sizeof(*next));
	uint8_t ns[NDC_NAME_MAX];
	size_t nsl;
	int err = head && next ? 0 : -ENOMEM;

	if (err)
		goto out;
	for (size_t i = 0; i < o->n_namespaces; i++)
		if (ndc_rec_ns_allowed(b->opts, o->namespaces[i]) &&
		    add_namespace(b, o->namespaces[i], ns, &nsl))
			skip(b, "namespace", o->namespaces[i], "");
	err = link_slices(o, head, next);
	if (err)
		goto out;
	for (size_t i = 0; i < o->n_services; i++)
		add_service(b, o, i, head[i], next);
	if (b->opts->pods == NDC_PODS_VERIFIED)
		add_pods(b, o);
out:
	free(next);
	free(head);
	return err;
}
