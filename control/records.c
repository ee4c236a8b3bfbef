/* SPDX-License-Identifier: MIT */
/*
 * The record model. Build runs in two stages: the objects become pending RRs grouped by owner
 * name in a scratch arena (struct bld), then every RRset is rendered once with the answer
 * builder into one contiguous blob, indexed by an open-addressing table of 32-bit offsets.
 * Lookup reads only the blob and the index: no allocation, no locks, no logging.
 *
 * Blob layout, 4-byte aligned throughout: struct rnode, its name, then ntypes answers (struct
 * ndc_answer and its data; the pad byte holds the type). Empty non-terminals are nodes with no
 * answers. A node whose parent name is a node too stores only its first label and the parent's
 * offset (most names share long suffixes: <svc>.<ns>.svc.<zone>). Offset 0 of the blob is never
 * a node, so a zero slot or parent means none.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <ndc/log.h>

#include "records.h"

/* SOA timers as CoreDNS writes them; the minimum is the record TTL (RFC 2308 4 negative TTL). */
#define SOA_REFRESH 7200
#define SOA_RETRY 1800
#define SOA_EXPIRE 86400
#define SRV_WEIGHT 100
#define DNS_SCHEMA_VERSION "1.1.0"
#define OPT_RR_LEN 11 /* room left for the OPT RR the reply writer appends */
#define ARENA_CHUNK (1u << 20)
#define MAX_TYPES 8 /* distinct types one owner can hold: SOA NS A AAAA SRV PTR TXT CNAME */

#define ALIGN4(x) (((x) + 3) & ~(size_t)3)

struct rnode {
	uint32_t hash;	 /* of the whole name */
	uint32_t parent; /* node of the name without its first label, or 0: name[] is whole */
	uint8_t nlen;	 /* whole name */
	uint8_t llen;	 /* bytes in name[] */
	uint8_t ntypes;
	uint8_t pad;
	uint8_t name[];
};

#define NEG_PTRS_MAX 3 /* SOA owner, MNAME and RNAME each end in one pointer at most */

struct ndc_records {
	uint8_t *blob;
	size_t blob_len;
	size_t blob_cap;
	uint32_t *slots;
	uint32_t mask;
	size_t n_rrsets;
	size_t n_names;
	enum ndc_pods_mode pods;
	uint32_t ttl;
	uint32_t neg_ttl;
	size_t zlen;
	size_t podzlen;
	size_t soa_len;
	uint8_t zone[NDC_NAME_MAX];
	uint8_t podz[NDC_NAME_MAX]; /* pod.<zone> */
	uint8_t soa[2 * NDC_NAME_MAX + 20];
	/*
	 * The NXDOMAIN answer for the apex as question. Every pointer in it points into the zone,
	 * which ends any question under the zone, so for a question nlen long each one moves by
	 * nlen - zlen: the negative answer is a copy and up to three additions.
	 */
	uint16_t neg_ptrs[NEG_PTRS_MAX];
	int n_neg_ptrs;
	union {
		struct ndc_answer a;
		uint8_t b[sizeof(struct ndc_answer) + NDC_NAME_MAX + 10 + 2 * NDC_NAME_MAX + 20];
	} neg;
};

/* ---------------------------------------------------------------------------------------------
 * Build scratch: arena, pending RRs by owner.
 */
struct chunk {
	struct chunk *next;
	size_t used;
	size_t cap;
	max_align_t data[];
};

struct trr {
	struct trr *next;
	uint16_t type;
	uint16_t rdlen;
	bool split_weight; /* SRV: weight is 100 / (records in the answer), set at render */
	uint8_t rdata[];
};

struct tnode {
	struct trr *head;
	struct trr *tail;
	uint32_t off; /* in the blob, once rendered */
	uint32_t hash;
	uint8_t nlen;
	uint8_t name[];
};

struct bld {
	const struct ndc_records_opts *opts;
	struct chunk *chunks;
	size_t arena_bytes;
	struct tnode **tab;
	size_t tcap;
	size_t tcount;
	struct trr **vec; /* one RRset being rendered */
	size_t vcap;
	int err; /* sticky: first failure, later adds do nothing */
	size_t skipped;
	char first_skip[160];
	size_t zlen, svczlen, podzlen;
	uint8_t zone[NDC_NAME_MAX];
	uint8_t svcz[NDC_NAME_MAX];
	uint8_t podz[NDC_NAME_MAX];
};

static uint32_t name_hash(const uint8_t *n, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */

	for (size_t i = 0; i < len; i++) {
		h ^= n[i];
		h *= 0x100000001b3ULL;
	}
	return (uint32_t)(h ^ (h >> 32));
}

static void *arena_alloc(struct bld *b, size_t n)
{
	struct chunk *c = b->chunks;

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

static struct tnode **tslot(struct tnode **tab, size_t cap, const uint8_t *n, size_t len,
			    uint32_t h)
{
	for (size_t i = h & (cap - 1);; i = (i + 1) & (cap - 1)) {
		struct tnode *t = tab[i];

		if (!t || (t->hash == h && t->nlen == len && !memcmp(t->name, n, len)))
			return &tab[i];
	}
}

static int tgrow(struct bld *b)
{
	size_t cap = b->tcap ? b->tcap * 2 : 1024;
	struct tnode **tab = calloc(cap, sizeof(*tab));

	if (!tab)
		return -ENOMEM;
	for (size_t i = 0; i < b->tcap; i++) {
		struct tnode *t = b->tab[i];

		if (t)
			*tslot(tab, cap, t->name, t->nlen, t->hash) = t;
	}
	free(b->tab);
	b->tab = tab;
	b->tcap = cap;
	return 0;
}

static struct tnode *tfind(const struct bld *b, const uint8_t *n, size_t len)
{
	return *tslot(b->tab, b->tcap, n, len, name_hash(n, len));
}

static struct tnode *tinsert(struct bld *b, const uint8_t *n, size_t len, bool *created)
{
	uint32_t h = name_hash(n, len);
	struct tnode **s;

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
	struct tnode *t = arena_alloc(b, sizeof(*t) + len);
	if (!t)
		return NULL;
	t->head = t->tail = NULL;
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
static struct tnode *tnode_get(struct bld *b, const uint8_t *n, size_t len)
{
	bool created;
	struct tnode *t = tinsert(b, n, len, &created);
	size_t stop = b->zlen;

	if (!created)
		return t;
	if (!ndc_name_in_zone(n, len, b->zone, b->zlen)) {
		stop = sizeof(in_addr_arpa);
		if (!ndc_name_in_zone(n, len, in_addr_arpa, stop))
			return t;
	}
	while (len > stop && created) {
		len -= n[0] + 1u;
		n += n[0] + 1u;
		tinsert(b, n, len, &created);
	}
	return t;
}

static void add_rr(struct bld *b, const uint8_t *owner, size_t olen, uint16_t type,
		   const void *rdata, size_t rdlen, bool split_weight)
{
	struct tnode *t = tnode_get(b, owner, olen);
	struct trr *rr;

	if (!t)
		return;
	rr = arena_alloc(b, sizeof(*rr) + rdlen);
	if (!rr)
		return;
	rr->next = NULL;
	rr->type = type;
	rr->rdlen = (uint16_t)rdlen;
	rr->split_weight = split_weight;
	memcpy(rr->rdata, rdata, rdlen);
	if (t->tail)
		t->tail->next = rr;
	else
		t->head = rr;
	t->tail = rr;
}

static void skip(struct bld *b, const char *what, const char *ns, const char *name)
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

/* CoreDNS's form of an IP as one label: 10-244-1-5, fd00-10-244--5 (inet_ntop with ':' -> '-'). */
static void dashed(const struct ndc_ip *ip, char *out, size_t cap)
{
	inet_ntop(ip->family, ip->addr, out, (socklen_t)cap);
	for (char *p = out; *p; p++)
		if (*p == '.' || *p == ':')
			*p = '-';
}

/* RFC 1035 3.5 (in-addr.arpa) and RFC 3596 2.5 (ip6.arpa, nibbles). */
static size_t reverse_name(const struct ndc_ip *ip, uint8_t *out)
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

static uint16_t addr_type(const struct ndc_ip *ip)
{
	return ip->family == AF_INET6 ? NDC_T_AAAA : NDC_T_A;
}

static size_t addr_len(const struct ndc_ip *ip)
{
	return ip->family == AF_INET6 ? 16 : 4;
}

static bool ip_ok(const struct ndc_ip *ip)
{
	return ip->family == AF_INET || ip->family == AF_INET6;
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
static bool ns_allowed(const struct ndc_records_opts *opts, const char *ns)
{
	if (!opts->n_namespaces)
		return true;
	for (size_t i = 0; ns && i < opts->n_namespaces; i++)
		if (!strcmp(opts->namespaces[i], ns))
			return true;
	return false;
}

/* <ns>.svc.<zone> (and <ns>.pod.<zone> when pod records are on) exist for a known namespace. */
static int add_namespace(struct bld *b, const char *ns, uint8_t *ret_nsn, size_t *ret_nsl)
{
	uint8_t n[NDC_NAME_MAX];
	size_t l;

	if (join(ret_nsn, ret_nsl, 0, ns, b->svcz, b->svczlen))
		return -EINVAL;
	tnode_get(b, ret_nsn, *ret_nsl);
	if (b->opts->pods != NDC_PODS_DISABLED && !join(n, &l, 0, ns, b->podz, b->podzlen))
		tnode_get(b, n, l);
	return 0;
}

static void add_srv(struct bld *b, const uint8_t *svn, size_t svl, const struct ndc_k8s_port *p,
		    const uint8_t *target, size_t tlen, uint16_t weight, bool split)
{
	uint8_t rd[6 + NDC_NAME_MAX], pn[NDC_NAME_MAX], own[NDC_NAME_MAX];
	size_t pl, ol;
	const char *proto = proto_label(p->proto);

	if (!p->name || !proto)
		return; /* unnamed ports have no SRV name (spec 2.4.1) */
	if (join(pn, &pl, '_', proto, svn, svl) || join(own, &ol, '_', p->name, pn, pl)) {
		skip(b, "port", "", p->name);
		return;
	}
	ndc_put16(rd, 0);
	ndc_put16(rd + 2, weight);
	ndc_put16(rd + 4, p->port);
	memcpy(rd + 6, target, tlen);
	add_rr(b, own, ol, NDC_T_SRV, rd, 6 + tlen, split);
	/* CoreDNS answers SRV at the service name itself with every named port. */
	add_rr(b, svn, svl, NDC_T_SRV, rd, 6 + tlen, split);
}

static bool ep_served(const struct ndc_k8s_service *s, const struct ndc_k8s_endpoint *ep)
{
	return ep->ready || s->publish_not_ready;
}

static void add_endpoint(struct bld *b, const struct ndc_k8s_service *s,
			 const struct ndc_k8s_slice *sl, const struct ndc_k8s_endpoint *ep,
			 const uint8_t *svn, size_t svl)
{
	const char *host = NULL;
	uint8_t hn[NDC_NAME_MAX], rev[NDC_NAME_MAX];
	size_t hl;

	if (ep->hostname) {
		if (!label_ok(ep->hostname, strlen(ep->hostname))) {
			skip(b, "endpoint hostname", s->ns, ep->hostname);
			return;
		}
		host = ep->hostname;
	} else if (b->opts->endpoint_pod_names && ep->pod_name &&
		   label_ok(ep->pod_name, strlen(ep->pod_name))) {
		host = ep->pod_name; /* CoreDNS falls back to the dashed IP for other pod names */
	}
	for (size_t i = 0; i < ep->n_addrs; i++) {
		const struct ndc_ip *ip = &ep->addrs[i];
		char dash[INET6_ADDRSTRLEN];

		if (!ip_ok(ip))
			continue;
		dashed(ip, dash, sizeof(dash));
		if (join(hn, &hl, 0, host ? host : dash, svn, svl)) {
			skip(b, "endpoint", s->ns, host ? host : dash);
			continue;
		}
		/* Spec 2.4.1: the PTR names the endpoint whichever kind its service is. */
		add_rr(b, rev, reverse_name(ip, rev), NDC_T_PTR, hn, hl, false);
		if (!s->headless)
			continue;
		/* Spec 2.4.1: <hostname>.<svc> and per-endpoint SRV exist for headless services. */
		add_rr(b, svn, svl, addr_type(ip), ip->addr, addr_len(ip), false);
		add_rr(b, hn, hl, addr_type(ip), ip->addr, addr_len(ip), false);
		for (size_t p = 0; p < sl->n_ports; p++)
			add_srv(b, svn, svl, &sl->ports[p], hn, hl, 0, true);
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

static void add_service(struct bld *b, const struct ndc_k8s_objects *o, size_t si, size_t head,
			const size_t *next)
{
	const struct ndc_k8s_service *s = &o->services[si];
	uint8_t nsn[NDC_NAME_MAX], svn[NDC_NAME_MAX], rev[NDC_NAME_MAX], tgt[NDC_NAME_MAX];
	size_t nsl, svl, tl;

	if (!ns_allowed(b->opts, s->ns))
		return;
	if (add_namespace(b, s->ns, nsn, &nsl) || join(svn, &svl, 0, s->name, nsn, nsl)) {
		skip(b, "service", s->ns, s->name);
		return;
	}
	if (s->type == NDC_SVC_EXTERNAL_NAME) {
		if (!s->external_name ||
		    ndc_name_from_text(s->external_name, tgt, sizeof(tgt), &tl) || tl < 2) {
			skip(b, "externalName of service", s->ns, s->name);
			return;
		}
		ndc_name_lower(tgt, tgt, tl);
		add_rr(b, svn, svl, NDC_T_CNAME, tgt, tl, false);
		return;
	}
	if (b->opts->ignore_empty_service && !count_served(o, s, head, next))
		return;
	tnode_get(b, svn, svl);
	if (!s->headless) {
		for (size_t i = 0; i < s->n_ips && i < NDC_K8S_MAX_CLUSTER_IPS; i++) {
			const struct ndc_ip *ip = &s->ips[i];

			if (!ip_ok(ip))
				continue;
			add_rr(b, svn, svl, addr_type(ip), ip->addr, addr_len(ip), false);
			add_rr(b, rev, reverse_name(ip, rev), NDC_T_PTR, svn, svl, false);
		}
		for (size_t p = 0; p < s->n_ports; p++)
			add_srv(b, svn, svl, &s->ports[p], svn, svl, SRV_WEIGHT, false);
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
	uint32_t h1 = name_hash((const uint8_t *)ns, strlen(ns));

	return h1 * 31 + name_hash((const uint8_t *)name, strlen(name));
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

static void add_pods(struct bld *b, const struct ndc_k8s_objects *o)
{
	uint8_t nsn[NDC_NAME_MAX], pn[NDC_NAME_MAX];
	size_t nsl, pl;

	for (size_t i = 0; i < o->n_pods; i++) {
		const struct ndc_k8s_pod *p = &o->pods[i];

		if (!ns_allowed(b->opts, p->ns))
			continue;
		if (join(nsn, &nsl, 0, p->ns, b->podz, b->podzlen)) {
			skip(b, "pod", p->ns, p->name);
			continue;
		}
		for (size_t k = 0; k < p->n_ips && k < 2; k++) {
			char dash[INET6_ADDRSTRLEN];

			if (!ip_ok(&p->ips[k]))
				continue;
			dashed(&p->ips[k], dash, sizeof(dash));
			if (!join(pn, &pl, 0, dash, nsn, nsl))
				add_rr(b, pn, pl, addr_type(&p->ips[k]), p->ips[k].addr,
				       addr_len(&p->ips[k]), false);
		}
	}
}

static void add_apex(struct bld *b, struct ndc_records *r, uint32_t ttl)
{
	uint8_t dns[NDC_NAME_MAX], nsn[NDC_NAME_MAX], txt[NDC_NAME_MAX];
	size_t dl, nl, tl, ml, rl;
	uint8_t *soa = r->soa;

	if (join(dns, &dl, 0, "dns", b->zone, b->zlen) || join(nsn, &nl, 0, "ns", dns, dl) ||
	    join(txt, &tl, 0, "dns-version", b->zone, b->zlen) ||
	    join(soa + nl, &rl, 0, "hostmaster", b->zone, b->zlen)) {
		b->err = -EINVAL;
		return;
	}
	memcpy(soa, nsn, nl);
	ml = nl + rl;
	ndc_put32(soa + ml, (uint32_t)time(NULL)); /* serial: build time, RFC 1982 arithmetic */
	ndc_put32(soa + ml + 4, SOA_REFRESH);
	ndc_put32(soa + ml + 8, SOA_RETRY);
	ndc_put32(soa + ml + 12, SOA_EXPIRE);
	ndc_put32(soa + ml + 16, ttl);
	r->soa_len = ml + 20;
	add_rr(b, b->zone, b->zlen, NDC_T_SOA, soa, r->soa_len, false);
	add_rr(b, b->zone, b->zlen, NDC_T_NS, nsn, nl, false);
	tnode_get(b, nsn, nl);
	for (size_t i = 0; i < b->opts->n_ns_addrs; i++) {
		const struct ndc_ip *ip = &b->opts->ns_addrs[i];

		if (ip_ok(ip))
			add_rr(b, nsn, nl, addr_type(ip), ip->addr, addr_len(ip), false);
	}
	uint8_t ver[1 + sizeof(DNS_SCHEMA_VERSION)] = {sizeof(DNS_SCHEMA_VERSION) - 1};
	memcpy(ver + 1, DNS_SCHEMA_VERSION, sizeof(DNS_SCHEMA_VERSION) - 1);
	add_rr(b, txt, tl, NDC_T_TXT, ver, sizeof(ver) - 1, false);
	tnode_get(b, b->svcz, b->svczlen);
	if (b->opts->pods != NDC_PODS_DISABLED)
		tnode_get(b, b->podz, b->podzlen);
}

/* ---------------------------------------------------------------------------------------------
 * Rendering pending RRsets into the blob.
 */
static int blob_reserve(struct ndc_records *r, size_t n)
{
	if (r->blob_cap - r->blob_len >= n)
		return 0;
	size_t cap = r->blob_cap ? r->blob_cap : (1u << 16);
	while (cap - r->blob_len < n)
		cap *= 2;
	if (cap > UINT32_MAX)
		return -E2BIG; /* offsets are 32-bit: far beyond any cluster's record set */
	uint8_t *p = realloc(r->blob, cap);
	if (!p)
		return -ENOMEM;
	r->blob = p;
	r->blob_cap = cap;
	return 0;
}

static int rr_cmp(const void *a, const void *b)
{
	const struct trr *x = *(const struct trr *const *)a, *y = *(const struct trr *const *)b;

	if (x->rdlen != y->rdlen)
		return x->rdlen < y->rdlen ? -1 : 1;
	return memcmp(x->rdata, y->rdata, x->rdlen);
}

/* Collects one RRset into b->vec, sorted and without duplicates (RFC 2181 5). */
static int collect(struct bld *b, const struct tnode *t, uint16_t type, size_t *ret_n)
{
	size_t n = 0;

	for (const struct trr *rr = t->head; rr; rr = rr->next) {
		if (rr->type != type)
			continue;
		if (n == b->vcap) {
			size_t cap = b->vcap ? b->vcap * 2 : 64;
			struct trr **v = realloc(b->vec, cap * sizeof(*v));

			if (!v)
				return -ENOMEM;
			b->vec = v;
			b->vcap = cap;
		}
		b->vec[n++] = (struct trr *)rr;
	}
	qsort(b->vec, n, sizeof(*b->vec), rr_cmp);
	size_t u = 0;
	for (size_t i = 0; i < n; i++)
		if (!u || rr_cmp(&b->vec[u - 1], &b->vec[i]))
			b->vec[u++] = b->vec[i];
	*ret_n = u;
	return 0;
}

static const uint8_t *rr_target(const struct trr *rr, size_t *ret_len)
{
	size_t off = rr->type == NDC_T_SRV ? 6 : 0;

	*ret_len = rr->rdlen - off;
	return rr->rdata + off;
}

/* The answer for one RRset: n records, plus the targets' addresses in additional for SRV/NS. */
static int render_set(struct bld *b, const struct tnode *t, uint16_t type, size_t n, bool extra,
		      struct ndc_answer *a, size_t cap)
{
	uint32_t ttl = b->opts->ttl;
	struct ndc_ab ab;
	uint8_t rd[6 + NDC_NAME_MAX];

	ndc_ab_init(&ab, a, cap, t->name, t->nlen);
	for (size_t i = 0; i < n; i++) {
		const struct trr *rr = b->vec[i];
		const uint8_t *p = rr->rdata;

		if (rr->split_weight) {
			uint16_t w = (uint16_t)(SRV_WEIGHT / n);

			memcpy(rd, rr->rdata, rr->rdlen);
			ndc_put16(rd + 2, w ? w : 1);
			p = rd;
		}
		ndc_ab_rr(&ab, NDC_SEC_ANSWER, t->name, t->nlen, type, NDC_C_IN, ttl, p, rr->rdlen);
	}
	for (size_t i = 0; extra && i < n; i++) {
		size_t tl, pl;
		const uint8_t *tn = rr_target(b->vec[i], &tl);
		bool seen = false;

		for (size_t k = 0; k < i && !seen; k++) {
			const uint8_t *pn = rr_target(b->vec[k], &pl);

			seen = pl == tl && !memcmp(pn, tn, tl);
		}
		const struct tnode *tt = seen ? NULL : tfind(b, tn, tl);
		for (const struct trr *rr = tt ? tt->head : NULL; rr; rr = rr->next)
			if (rr->type == NDC_T_A || rr->type == NDC_T_AAAA)
				ndc_ab_rr(&ab, NDC_SEC_ADDITIONAL, tn, tl, rr->type, NDC_C_IN, ttl,
					  rr->rdata, rr->rdlen);
	}
	return ndc_ab_finish(&ab, NDC_RCODE_NOERROR, true);
}

/*
 * Renders one RRset into scratch. One too big even for TCP loses its additional section, then
 * as many records as it takes (RFC 2181 9: a truncated set is still a valid answer).
 */
static int render_type(struct bld *b, const struct tnode *t, uint16_t type,
		       struct ndc_answer *scratch, size_t cap)
{
	bool extra = type == NDC_T_SRV || type == NDC_T_NS;
	size_t n, lo = 0, hi;
	int err = collect(b, t, type, &n);

	if (err)
		return err;
	err = render_set(b, t, type, n, extra, scratch, cap);
	if (err == -ENOSPC && extra)
		err = render_set(b, t, type, n, false, scratch, cap);
	if (err != -ENOSPC)
		return err;
	for (hi = n; hi - lo > 1;) { /* lo fits (or is 0), hi does not */
		size_t mid = lo + (hi - lo) / 2;

		err = render_set(b, t, type, mid, false, scratch, cap);
		if (err && err != -ENOSPC)
			return err;
		*(err ? &hi : &lo) = mid;
	}
	char txt[4 * NDC_NAME_MAX];
	if (ndc_name_to_text(t->name, t->nlen, txt, sizeof(txt)))
		txt[0] = 0;
	ndc_warn("records: %s: only %zu of %zu type %u records fit in a message", txt, lo, n, type);
	return lo ? render_set(b, t, type, lo, false, scratch, cap) : -ENOSPC;
}

static int render_node(struct bld *b, struct ndc_records *r, const struct tnode *t,
		       struct ndc_answer *scratch)
{
	uint16_t types[MAX_TYPES];
	size_t llen = t->nlen > 1 ? 1u + t->name[0] : t->nlen;
	size_t ntypes = 0, off = r->blob_len, hdr;
	/* Room for the reply header, question and OPT around the data (RFC 1035 4.2.2 limit). */
	size_t cap = NDC_MSG_MAX - NDC_DNS_HDR_LEN - t->nlen - 4 - OPT_RR_LEN;
	int err;

	for (const struct trr *rr = t->head; rr; rr = rr->next) {
		size_t k = 0;

		while (k < ntypes && types[k] != rr->type)
			k++;
		if (k == ntypes && ntypes < MAX_TYPES)
			types[ntypes++] = rr->type;
	}
	if (t->nlen <= 1 || !tfind(b, t->name + llen, t->nlen - llen))
		llen = t->nlen; /* no parent node: the apex and reverse names */
	hdr = ALIGN4(sizeof(struct rnode) + llen);
	err = blob_reserve(r, hdr);
	if (err)
		return err;
	struct rnode *nd = (struct rnode *)(r->blob + off);
	memset(nd, 0, hdr);
	nd->hash = t->hash;
	nd->nlen = t->nlen;
	nd->llen = (uint8_t)llen;
	memcpy(nd->name, t->name, llen);
	r->blob_len += hdr;

	for (size_t k = 0; k < ntypes; k++) {
		err = render_type(b, t, types[k], scratch, cap);
		if (err)
			return err;
		size_t sz = ALIGN4(ndc_answer_size(scratch));
		err = blob_reserve(r, sz);
		if (err)
			return err;
		/* Every type we hold is below 256: the answer's pad byte names it in the blob. */
		scratch->pad = (uint8_t)types[k];
		memset(r->blob + r->blob_len, 0, sz);
		memcpy(r->blob + r->blob_len, scratch, ndc_answer_size(scratch));
		r->blob_len += sz;
		((struct rnode *)(r->blob + off))->ntypes++;
		r->n_rrsets++;
	}
	return 0;
}

static int render(struct bld *b, struct ndc_records *r)
{
	size_t cap = 16;
	struct ndc_answer *scratch = malloc(sizeof(*scratch) + NDC_MSG_MAX);
	int err;

	if (!scratch)
		return -ENOMEM;
	while (cap < b->tcount + b->tcount / 2)
		cap *= 2; /* load <= 2/3: a miss probes about five slots with linear probing */
	r->slots = calloc(cap, sizeof(*r->slots));
	r->mask = (uint32_t)(cap - 1);
	err = r->slots ? blob_reserve(r, b->arena_bytes / 2 + 4) : -ENOMEM;
	if (err)
		goto out;
	memset(r->blob, 0, 4);
	r->blob_len = 4; /* offset 0 marks an empty slot */
	for (size_t i = 0; i < b->tcap; i++) {
		struct tnode *t = b->tab[i];

		if (!t)
			continue;
		t->off = (uint32_t)r->blob_len;
		err = render_node(b, r, t, scratch);
		if (err)
			goto out;
		uint32_t s = t->hash & r->mask;
		while (r->slots[s])
			s = (s + 1) & r->mask;
		r->slots[s] = t->off;
		r->n_names++;
	}
	for (size_t i = 0; i < b->tcap; i++) {
		const struct tnode *t = b->tab[i];
		struct rnode *nd = t ? (struct rnode *)(r->blob + t->off) : NULL;

		if (nd && nd->llen < nd->nlen)
			nd->parent = tfind(b, t->name + nd->llen, t->nlen - nd->llen)->off;
	}
	uint8_t *p = realloc(r->blob, r->blob_len); /* give back the doubling slack */
	if (p) {
		r->blob = p;
		r->blob_cap = r->blob_len;
	}
out:
	free(scratch);
	return err;
}

/* ---------------------------------------------------------------------------------------------
 * Public API.
 */
void ndc_records_opts_from_config(struct ndc_records_opts *opts, const struct ndc_config *cfg)
{
	memset(opts, 0, sizeof(*opts));
	opts->zone = cfg->cluster_domain;
	opts->ttl = cfg->records.ttl;
	opts->pods = cfg->records.pods;
	opts->endpoint_pod_names = cfg->records.endpoint_pod_names;
	opts->ignore_empty_service = cfg->records.ignore_empty_service;
	opts->n_namespaces = cfg->records.n_namespaces;
	opts->namespaces = cfg->records.namespaces;
	opts->n_ns_addrs = cfg->n_listen;
	opts->ns_addrs = cfg->listen;
}

static int negative_init(struct ndc_records *r);

static void bld_free(struct bld *b)
{
	while (b->chunks) {
		struct chunk *c = b->chunks;

		b->chunks = c->next;
		free(c);
	}
	free(b->tab);
	free(b->vec);
}

int ndc_records_build(const struct ndc_k8s_objects *o, const struct ndc_records_opts *opts,
		      struct ndc_records **ret)
{
	struct bld b = {.opts = opts};
	struct ndc_records *r;
	size_t *head = NULL, *next = NULL;
	uint8_t ns[NDC_NAME_MAX];
	size_t nsl;
	int err;

	*ret = NULL;
	if (!opts->zone || ndc_name_from_text(opts->zone, b.zone, sizeof(b.zone), &b.zlen))
		return -EINVAL;
	ndc_name_lower(b.zone, b.zone, b.zlen);
	if (join(b.svcz, &b.svczlen, 0, "svc", b.zone, b.zlen) ||
	    join(b.podz, &b.podzlen, 0, "pod", b.zone, b.zlen))
		return -EINVAL;
	r = calloc(1, sizeof(*r));
	head = malloc((o->n_services + 1) * sizeof(*head));
	next = malloc((o->n_slices + 1) * sizeof(*next));
	err = r && head && next ? tgrow(&b) : -ENOMEM;
	if (err)
		goto fail;
	memcpy(r->zone, b.zone, b.zlen);
	r->zlen = b.zlen;
	memcpy(r->podz, b.podz, b.podzlen);
	r->podzlen = b.podzlen;
	r->pods = opts->pods;
	r->ttl = opts->ttl;
	r->neg_ttl = opts->ttl; /* min(TTL, SOA minimum), and the minimum is the TTL */

	add_apex(&b, r, opts->ttl);
	for (size_t i = 0; i < o->n_namespaces; i++)
		if (ns_allowed(opts, o->namespaces[i]) &&
		    add_namespace(&b, o->namespaces[i], ns, &nsl))
			skip(&b, "namespace", o->namespaces[i], "");
	err = link_slices(o, head, next);
	if (err)
		goto fail;
	for (size_t i = 0; i < o->n_services; i++)
		add_service(&b, o, i, head[i], next);
	if (opts->pods == NDC_PODS_VERIFIED)
		add_pods(&b, o);
	err = b.err ? b.err : render(&b, r);
	if (!err)
		err = negative_init(r);
	if (err)
		goto fail;
	ndc_debug("records: %zu names, %zu RRsets in %zu bytes (build scratch %zu bytes)",
		  r->n_names, r->n_rrsets, ndc_records_bytes(r), b.arena_bytes);
	if (b.skipped)
		ndc_warn("records: skipped %zu objects whose names are not valid DNS names "
			 "(first: %s)",
			 b.skipped, b.first_skip);
	free(next);
	free(head);
	bld_free(&b);
	*ret = r;
	return 0;
fail:
	free(next);
	free(head);
	bld_free(&b);
	ndc_records_free(r);
	return err == -E2BIG ? -ENOMEM : err;
}

void ndc_records_free(struct ndc_records *r)
{
	if (!r)
		return;
	free(r->slots);
	free(r->blob);
	free(r);
}

size_t ndc_records_count(const struct ndc_records *r)
{
	return r->n_rrsets;
}

size_t ndc_records_bytes(const struct ndc_records *r)
{
	return sizeof(*r) + r->blob_cap + ((size_t)r->mask + 1) * sizeof(*r->slots);
}

bool ndc_records_is_local(const struct ndc_records *r, const uint8_t *lname, size_t nlen)
{
	return ndc_name_in_zone(lname, nlen, r->zone, r->zlen);
}

static bool node_is(const struct ndc_records *r, const struct rnode *nd, const uint8_t *n,
		    size_t len)
{
	for (;;) {
		if (nd->nlen != len || memcmp(nd->name, n, nd->llen))
			return false;
		if (!nd->parent)
			return true;
		n += nd->llen;
		len -= nd->llen;
		nd = (const struct rnode *)(r->blob + nd->parent);
	}
}

static const struct rnode *find(const struct ndc_records *r, const uint8_t *n, size_t len)
{
	uint32_t h = name_hash(n, len);

	for (uint32_t i = h & r->mask;; i = (i + 1) & r->mask) {
		uint32_t off = r->slots[i];
		const struct rnode *nd = (const struct rnode *)(r->blob + off);

		if (!off)
			return NULL;
		if (nd->hash == h && node_is(r, nd, n, len))
			return nd;
	}
}

/* The answer for type at nd; with type 0 the first one the name has. */
static const struct ndc_answer *node_answer(const struct rnode *nd, uint16_t type)
{
	const uint8_t *e = (const uint8_t *)nd + ALIGN4(sizeof(*nd) + nd->llen);

	for (int i = 0; i < nd->ntypes; i++) {
		const struct ndc_answer *a = (const struct ndc_answer *)e;

		if (!type || a->pad == type)
			return a;
		e += ALIGN4(ndc_answer_size(a));
	}
	return NULL;
}

static int copy_answer(const struct ndc_answer *a, struct ndc_answer *out, size_t cap)
{
	if (a->len > cap)
		return -ENOSPC;
	memcpy(out, a, ndc_answer_size(a));
	out->pad = 0;
	return 0;
}

/* NXDOMAIN or NODATA for a name under the zone: the SOA gives the negative TTL (RFC 2308 3). */
static int negative(const struct ndc_records *r, size_t nlen, uint8_t rcode, struct ndc_answer *out,
		    size_t cap)
{
	uint16_t delta = (uint16_t)(nlen - r->zlen);

	if (r->neg.a.len > cap)
		return -ENOSPC;
	memcpy(out, &r->neg.a, ndc_answer_size(&r->neg.a));
	out->qname_len = (uint8_t)nlen;
	out->rcode = rcode;
	for (int i = 0; i < r->n_neg_ptrs; i++) {
		uint8_t *p = out->data + r->neg_ptrs[i];

		ndc_put16(p, (uint16_t)(ndc_get16(p) + delta));
	}
	return 0;
}

/* Records where the pointers sit in the negative template (see struct ndc_records). */
static int negative_init(struct ndc_records *r)
{
	struct ndc_ab ab;
	const uint8_t *d = r->neg.a.data;
	size_t pos = 0;
	int err;

	ndc_ab_init(&ab, &r->neg.a, sizeof(r->neg.b) - sizeof(r->neg.a), r->zone, r->zlen);
	ndc_ab_rr(&ab, NDC_SEC_AUTHORITY, r->zone, r->zlen, NDC_T_SOA, NDC_C_IN, r->neg_ttl, r->soa,
		  r->soa_len);
	err = ndc_ab_finish(&ab, NDC_RCODE_NXDOMAIN, true);
	for (int name = 0; !err && name < 3; name++) {
		while (pos < r->neg.a.len && d[pos] && (d[pos] & 0xc0) != 0xc0)
			pos += 1u + d[pos];
		if (pos + 2 > r->neg.a.len || r->n_neg_ptrs == NEG_PTRS_MAX)
			return -EINVAL;
		if (d[pos]) /* a pointer, not the root label */
			r->neg_ptrs[r->n_neg_ptrs++] = (uint16_t)pos++;
		pos += name ? 1 : 11; /* the owner is followed by TYPE CLASS TTL RDLENGTH */
	}
	return err;
}

/*
 * Insecure pod mode (CoreDNS "pods insecure"): <dashed-ip>.<ns>.pod.<zone> answers with the IP
 * written in its first label, for any namespace that exists. -ENOENT: not such a name.
 */
static int pod_insecure(const struct ndc_records *r, const uint8_t *lname, size_t nlen,
			uint16_t qtype, struct ndc_answer *out, size_t cap)
{
	const uint8_t *ns = lname + 1 + lname[0];
	size_t nsl = nlen - 1 - lname[0], dashes = 0;
	char txt[NDC_LABEL_MAX + 1];
	uint8_t addr[16];
	int family;

	if (lname[0] > NDC_LABEL_MAX || nsl <= r->podzlen || ns[0] + 1u + r->podzlen != nsl ||
	    memcmp(ns + 1 + ns[0], r->podz, r->podzlen) || !find(r, ns, nsl))
		return -ENOENT;
	memcpy(txt, lname + 1, lname[0]);
	txt[lname[0]] = 0;
	for (char *p = txt; *p; p++)
		dashes += *p == '-';
	/* CoreDNS: three dashes and no "--" is IPv4, anything else is read as IPv6. */
	bool v4 = dashes == 3 && !strstr(txt, "--");
	for (char *p = txt; *p; p++)
		if (*p == '-')
			*p = v4 ? '.' : ':';
	family = v4 ? AF_INET : AF_INET6;
	if (inet_pton(family, txt, addr) != 1)
		return -ENOENT;
	uint16_t type = v4 ? NDC_T_A : NDC_T_AAAA;
	if (qtype != type && qtype != NDC_T_ANY)
		return negative(r, nlen, NDC_RCODE_NOERROR, out, cap);

	struct ndc_ab ab;
	ndc_ab_init(&ab, out, cap, lname, nlen);
	ndc_ab_rr(&ab, NDC_SEC_ANSWER, lname, nlen, type, NDC_C_IN, r->ttl, addr, v4 ? 4 : 16);
	return ndc_ab_finish(&ab, NDC_RCODE_NOERROR, true);
}

int ndc_records_lookup(const struct ndc_records *r, const uint8_t *lname, size_t nlen,
		       uint16_t qtype, struct ndc_answer *out, size_t cap)
{
	const struct ndc_answer *a;
	const struct rnode *nd;

	if (!nlen || nlen > NDC_NAME_MAX)
		return -ENOENT;
	nd = find(r, lname, nlen);
	if (!ndc_name_in_zone(lname, nlen, r->zone, r->zlen)) {
		/* Only reverse names live outside the zone; the rest falls through upstream. */
		a = nd && qtype == NDC_T_PTR ? node_answer(nd, NDC_T_PTR) : NULL;
		return a ? copy_answer(a, out, cap) : -ENOENT;
	}
	if (!nd) {
		if (r->pods == NDC_PODS_INSECURE && nlen > 1) {
			int err = pod_insecure(r, lname, nlen, qtype, out, cap);

			if (err != -ENOENT)
				return err;
		}
		return negative(r, nlen, NDC_RCODE_NXDOMAIN, out, cap);
	}
	a = node_answer(nd, qtype == NDC_T_ANY ? 0 : qtype);
	if (!a && qtype != NDC_T_CNAME)
		a = node_answer(nd, NDC_T_CNAME); /* RFC 1034 3.6.2: the alias answers any type */
	return a ? copy_answer(a, out, cap) : negative(r, nlen, NDC_RCODE_NOERROR, out, cap);
}
