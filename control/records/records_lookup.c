/* SPDX-License-Identifier: MIT */
/*
 * The record model, third stage: answering from the table records.c built (and the overlays of
 * records_patch.c), and walking it for the fast-path publisher. Separate from building because
 * the two share only the layout (internal.h): this side runs per query, reads, and never
 * allocates, locks or logs. Answers kept lazy at build time (reverse names, SRV sets) are made
 * here, byte for byte as rendering them at build time would have, and so are the answers of
 * aliases followed inside the zone, from whatever version of their targets the table holds.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "internal.h"

/* ---------------------------------------------------------------------------------------------
 * Negative answers: the table's template moved to each question.
 */
/*
 * NXDOMAIN or NODATA for a name under zone z: the SOA gives the negative TTL (RFC 2308 3).
 */
static int negative(const struct ndc_rec_zone *z, size_t nlen, uint8_t rcode,
		    struct ndc_answer *out, size_t cap)
{
	uint16_t delta = (uint16_t)(nlen - z->zlen);

	if (z->neg.a.len > cap)
		return -ENOSPC;
	memcpy(out, &z->neg.a, ndc_answer_size(&z->neg.a));
	out->qname_len = (uint8_t)nlen;
	out->rcode = rcode;
	for (int i = 0; i < z->n_neg_ptrs; i++) {
		uint8_t *p = out->data + z->neg_ptrs[i];

		ndc_put16(p, (uint16_t)(ndc_get16(p) + delta));
	}
	return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Lookup.
 */
static bool node_is(const struct ndc_records *r, const struct ndc_rec_node_r *nd, const uint8_t *n,
		    size_t len)
{
	for (;;) {
		if (nd->nlen != len || memcmp(nd->name, n, nd->llen))
			return false;
		if (!nd->parent)
			return true;
		n += nd->llen;
		len -= nd->llen;
		nd = (const struct ndc_rec_node_r *)(r->blob + nd->parent);
	}
}

const struct ndc_rec_node_r *ndc_rec_base_find(const struct ndc_records *r, const uint8_t *n,
					       size_t len, uint32_t h)
{
	for (uint32_t i = h & r->mask;; i = (i + 1) & r->mask) {
		uint32_t off = r->slots[i];
		const struct ndc_rec_node_r *nd = (const struct ndc_rec_node_r *)(r->blob + off);

		if (!off)
			return NULL;
		if (nd->hash == h && node_is(r, nd, n, len))
			return nd;
	}
}

/* The node named n in this version: the overlay's if it has one, else the base's. */
/*
 * As find, and *ret_ovl tells whether the overlay had the name (a NULL node then is a deletion,
 * which hides the base's reverse index too).
 */
static const struct ndc_rec_node_r *find_ex(const struct ndc_records *r, const uint8_t *n,
					    size_t len, bool *ret_ovl)
{
	uint32_t h = ndc_rec_name_hash(n, len);
	const struct ndc_rec_node_r *nd;

	*ret_ovl = r->ovl && !ndc_rec_ovl_find(r->ovl, n, len, h, &nd);
	return *ret_ovl ? nd : ndc_rec_base_find(r, n, len, h);
}

static const struct ndc_rec_node_r *find(const struct ndc_records *r, const uint8_t *n, size_t len)
{
	bool ovl;

	return find_ex(r, n, len, &ovl);
}

/* A reverse name's entries in the base's reverse index: n of them from first. */
struct rev_hit {
	struct ndc_ip ip;
	size_t first, n;
};

static bool rev_find(const struct ndc_records *r, const uint8_t *name, size_t nlen,
		     struct rev_hit *h)
{
	size_t lo = 0, hi;

	if ((!r->n_rev4 && !r->n_rev6) || !ndc_rec_rev_parse(name, nlen, &h->ip))
		return false;
	if (h->ip.family == AF_INET) {
		const uint8_t *a = h->ip.addr;
		uint32_t ip =
		    (uint32_t)a[0] << 24 | (uint32_t)a[1] << 16 | (uint32_t)a[2] << 8 | a[3];

		for (hi = r->n_rev4; lo < hi;) {
			size_t mid = lo + (hi - lo) / 2;

			*(r->rev4[mid].ip < ip ? &lo : &hi) = mid + (r->rev4[mid].ip < ip);
		}
		for (hi = lo; hi < r->n_rev4 && r->rev4[hi].ip == ip; hi++)
			;
	} else {
		for (hi = r->n_rev6; lo < hi;) {
			size_t mid = lo + (hi - lo) / 2;
			bool below = memcmp(r->rev6[mid].ip, h->ip.addr, 16) < 0;

			*(below ? &lo : &hi) = mid + below;
		}
		for (hi = lo; hi < r->n_rev6 && !memcmp(r->rev6[hi].ip, h->ip.addr, 16); hi++)
			;
	}
	h->first = lo;
	h->n = hi - lo;
	return h->n > 0;
}

/* The whole name of nd into out (NDC_NAME_MAX bytes); returns its length. */
static size_t node_name(const struct ndc_records *r, const struct ndc_rec_node_r *nd, uint8_t *out)
{
	size_t len = nd->nlen, pos = 0;

	for (;;) {
		memcpy(out + pos, nd->name, nd->llen);
		pos += nd->llen;
		if (!nd->parent)
			return len;
		nd = (const struct ndc_rec_node_r *)(r->blob + nd->parent);
	}
}

/* Target i of h into out (NDC_NAME_MAX bytes, a label more); its length. */
static size_t rev_target(const struct ndc_records *r, const struct rev_hit *h, size_t i,
			 uint8_t *out)
{
	uint32_t t =
	    h->ip.family == AF_INET ? r->rev4[h->first + i].tgt : r->rev6[h->first + i].tgt;
	size_t tl = 0;

	if (t & NDC_REC_REV_DASHED) {
		char dash[INET6_ADDRSTRLEN];

		ndc_rec_dashed(&h->ip, dash, sizeof(dash));
		tl = strlen(dash);
		out[0] = (uint8_t)tl;
		memcpy(out + 1, dash, tl++);
	}
	return tl + node_name(r, (const struct ndc_rec_node_r *)(r->blob + (t & ~3u)), out + tl);
}

/* The answer for type at nd; with type 0 the first one the name has. */
static const struct ndc_answer *node_answer(const struct ndc_rec_node_r *nd, uint16_t type)
{
	const uint8_t *e = (const uint8_t *)nd + NDC_REC_ALIGN4(sizeof(*nd) + nd->llen);

	for (int i = 0; i < nd->ntypes; i++) {
		const struct ndc_answer *a = (const struct ndc_answer *)e;

		if (!type || a->pad == type)
			return a;
		e += NDC_REC_ALIGN4(ndc_answer_size(a));
	}
	return NULL;
}

typedef int (*lazy_fn)(void *arg, const uint8_t *target, size_t tlen);

static int lazy_targets(const struct ndc_records *r, const struct ndc_rec_node_r *nd, lazy_fn fn,
			void *arg)
{
	const uint8_t *p = (const uint8_t *)nd + NDC_REC_ALIGN4(sizeof(*nd) + nd->llen);
	uint16_t n = ndc_get16(p);

	p += 2;
	for (uint16_t i = 0; i < n; i++) {
		uint8_t tgt[NDC_NAME_MAX + NDC_LABEL_MAX + 1];
		uint32_t off;
		size_t tl = 0;
		int err;

		memcpy(&off, p, 4);
		if (p[4]) {
			tgt[0] = p[4];
			memcpy(tgt + 1, p + 5, p[4]);
			tl = 1u + p[4];
		}
		tl += node_name(r, (const struct ndc_rec_node_r *)(r->blob + off), tgt + tl);
		p += 5 + p[4];
		err = fn(arg, tgt, tl);
		if (err)
			return err;
	}
	return 0;
}

struct lazy_ab {
	struct ndc_ab ab;
	const uint8_t *name;
	size_t nlen;
	uint32_t ttl;
};

static int lazy_rr(void *arg, const uint8_t *target, size_t tlen)
{
	struct lazy_ab *l = arg;

	ndc_ab_rr(&l->ab, NDC_SEC_ANSWER, l->name, l->nlen, NDC_T_PTR, NDC_C_IN, l->ttl, target,
		  tlen);
	return 0;
}

/*
 * A PTR set made at lookup: a lazy node's (nd), or the reverse index's (h, nd NULL). Both are
 * rendered and walked alike.
 */
struct ptr_src {
	const struct ndc_rec_node_r *nd;
	struct rev_hit h;
};

static int ptr_targets(const struct ndc_records *r, const struct ptr_src *s, lazy_fn fn, void *arg)
{
	uint8_t tgt[NDC_NAME_MAX + NDC_LABEL_MAX + 1];
	int err = 0;

	if (s->nd)
		return lazy_targets(r, s->nd, fn, arg);
	for (size_t i = 0; i < s->h.n && !err; i++)
		err = fn(arg, tgt, rev_target(r, &s->h, i, tgt));
	return err;
}

/* The PTR answer of s at name, as rendering it at build time would have made it. */
static int ptr_render(const struct ndc_records *r, const struct ptr_src *s, const uint8_t *name,
		      size_t nlen, struct ndc_answer *out, size_t cap)
{
	struct lazy_ab l = {.name = name, .nlen = nlen, .ttl = r->ttl};

	ndc_ab_init(&l.ab, out, cap, name, nlen);
	ptr_targets(r, s, lazy_rr, &l);
	return ndc_ab_finish(&l.ab, NDC_RCODE_NOERROR, true);
}

/* What ndc_records_foreach yields for s, named name. */
static int ptr_emit(const struct ndc_records *r, const struct ptr_src *s, const uint8_t *name,
		    size_t nlen, ndc_records_fn fn, void *arg)
{
	union {
		struct ndc_answer a;
		uint8_t b[sizeof(struct ndc_answer) + NDC_REC_LAZY_MAX];
	} ptr;
	int err = ptr_render(r, s, name, nlen, &ptr.a, NDC_REC_LAZY_MAX);

	ptr.a.pad = (uint8_t)NDC_T_PTR;
	return err ? err : fn(arg, name, nlen, NDC_T_PTR, &ptr.a);
}

unsigned ndc_rec_base_rrsets(const struct ndc_records *r, const uint8_t *n, size_t len, uint32_t h)
{
	const struct ndc_rec_node_r *nd = ndc_rec_base_find(r, n, len, h);
	struct rev_hit hit;

	return nd ? ndc_rec_node_rrsets(nd) : rev_find(r, n, len, &hit) ? 1u : 0u;
}

int ndc_rec_rev_answer(const struct ndc_records *r, const uint8_t *n, size_t len,
		       struct ndc_answer *out, size_t cap)
{
	struct ptr_src s = {0};
	int err;

	if (!rev_find(r, n, len, &s.h))
		return -ENOENT;
	err = ptr_render(r, &s, n, len, out, cap);
	out->pad = (uint8_t)NDC_T_PTR; /* as a node's answer holds it */
	return err;
}

int ndc_rec_rev_targets(const struct ndc_records *r, const uint8_t *n, size_t len,
			int (*fn)(void *arg, const uint8_t *target, size_t tlen), void *arg)
{
	struct ptr_src s = {0};

	return rev_find(r, n, len, &s.h) ? ptr_targets(r, &s, fn, arg) : 0;
}

static bool node_lazy(const struct ndc_rec_node_r *nd)
{
	return nd->pad & NDC_REC_LAZY_PTR;
}

/* A lazy SRV target (see NDC_REC_LAZY_RCODE) seen from owner name into tgt; its length, or 0. */
static size_t lazy_srv_target(const uint8_t *e, const uint8_t *name, size_t nlen, uint8_t *tgt)
{
	size_t o = 0, tl = 0;

	for (unsigned k = 0; k < e[6]; k++) {
		if (o >= nlen || !name[o])
			return 0;
		o += 1u + name[o];
	}
	if (o >= nlen || (e[7] ? 1u + e[7] : 0u) + nlen - o > NDC_NAME_MAX)
		return 0;
	if (e[7]) {
		tgt[0] = e[7];
		memcpy(tgt + 1, e + 8, e[7]);
		tl = 1u + e[7];
	}
	memcpy(tgt + tl, name + o, nlen - o);
	return tl + nlen - o;
}

/* The RRs of a (an A or AAAA answer, its owner the question) into the additional section. */
static void lazy_srv_addrs(struct ndc_ab *ab, const struct ndc_answer *a, const uint8_t *tn,
			   size_t tl, uint32_t ttl)
{
	const uint8_t *d = a ? a->data : NULL;
	size_t pos = 0;

	for (uint16_t i = 0; a && i < a->ancount; i++) {
		while (pos < a->len && d[pos] && (d[pos] & 0xc0) != 0xc0)
			pos += 1u + d[pos];
		pos += pos < a->len && d[pos] ? 2 : 1; /* a pointer, or the root label */
		if (pos + 10 > a->len)
			return;
		uint16_t rdlen = ndc_get16(d + pos + 8);

		if (pos + 10 + rdlen > a->len)
			return;
		ndc_ab_rr(ab, NDC_SEC_ADDITIONAL, tn, tl, ndc_get16(d + pos), NDC_C_IN, ttl,
			  d + pos + 10, rdlen);
		pos += 10u + rdlen;
	}
}

/*
 * The answer of lazy SRV entry a at owner name, as render_set made it at build time: the SRV
 * records, then each target's addresses once, A before AAAA. The addresses come from the
 * targets' nodes in this version: a change to them is a change to the SRV owner's names too.
 */
static int lazy_srv_render(const struct ndc_records *r, const struct ndc_answer *a,
			   const uint8_t *name, size_t nlen, struct ndc_answer *out, size_t cap)
{
	uint8_t rd[6 + NDC_NAME_MAX], tn[NDC_NAME_MAX], pn[NDC_NAME_MAX];
	const uint8_t *e = a->data;
	struct ndc_ab ab;

	ndc_ab_init(&ab, out, cap, name, nlen);
	for (uint16_t i = 0; i < a->ancount; i++, e += 8 + e[7]) {
		size_t tl = lazy_srv_target(e, name, nlen, rd + 6);

		if (!tl)
			return -EINVAL;
		memcpy(rd, e, 6);
		ndc_ab_rr(&ab, NDC_SEC_ANSWER, name, nlen, NDC_T_SRV, NDC_C_IN, r->ttl, rd, 6 + tl);
	}
	e = a->data;
	for (uint16_t i = 0; i < a->ancount; i++, e += 8 + e[7]) {
		size_t tl = lazy_srv_target(e, name, nlen, tn);
		const uint8_t *f = a->data;
		bool seen = false;

		for (uint16_t k = 0; k < i && !seen; k++, f += 8 + f[7]) {
			size_t pl = lazy_srv_target(f, name, nlen, pn);

			seen = pl == tl && !memcmp(pn, tn, tl);
		}
		const struct ndc_rec_node_r *tt = seen ? NULL : find(r, tn, tl);

		if (!tt || node_lazy(tt))
			continue;
		lazy_srv_addrs(&ab, node_answer(tt, NDC_T_A), tn, tl, r->ttl);
		lazy_srv_addrs(&ab, node_answer(tt, NDC_T_AAAA), tn, tl, r->ttl);
	}
	return ndc_ab_finish(&ab, NDC_RCODE_NOERROR, true);
}

static bool answer_lazy(const struct ndc_answer *a)
{
	return a->rcode == NDC_REC_LAZY_RCODE;
}

/* Answer a of the node named name into out, made now when it is lazy. */
static int copy_answer(const struct ndc_records *r, const struct ndc_answer *a, const uint8_t *name,
		       size_t nlen, struct ndc_answer *out, size_t cap)
{
	if (answer_lazy(a))
		return lazy_srv_render(r, a, name, nlen, out, cap);
	if (a->len > cap)
		return -ENOSPC;
	memcpy(out, a, ndc_answer_size(a));
	out->pad = 0;
	return 0;
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
		return negative(&r->cz, nlen, NDC_RCODE_NOERROR, out, cap);

	struct ndc_ab ab;
	ndc_ab_init(&ab, out, cap, lname, nlen);
	ndc_ab_rr(&ab, NDC_SEC_ANSWER, lname, nlen, type, NDC_C_IN, r->ttl, addr, v4 ? 4 : 16);
	return ndc_ab_finish(&ab, NDC_RCODE_NOERROR, true);
}

/* ---------------------------------------------------------------------------------------------
 * Aliases followed inside the zone: an ExternalName service whose target is a name of the zone.
 */
/* CNAME records one answer holds at most; CoreDNS's kubernetes plugin stops at 8 too. */
#define CHASE_MAX 8

/* Room for any answer a chain can end at other than the table's own: see end_answer. */
union end_buf {
	struct ndc_answer a;
	uint8_t b[sizeof(struct ndc_answer) + NDC_REC_LAZY_MAX];
};

/*
 * An alias followed (RFC 1034 3.6.2, 4.3.2 step 3a): names[i] CNAME names[i + 1] for i < n. It
 * stops where names[n] leaves the zone, comes back to a name already in the chain, or would be
 * alias number CHASE_MAX + 1: the answer is then the aliases alone. Else ends is set and the
 * answer goes on with what names[n] itself answers: its node end, or with none (end NULL) a pod
 * name made at lookup (pods: insecure) or NXDOMAIN.
 */
struct chain {
	uint8_t names[CHASE_MAX + 1][NDC_NAME_MAX];
	uint8_t lens[CHASE_MAX + 1];
	int n;
	bool ends;
	const struct ndc_rec_node_r *end;
};

/*
 * Follows the alias of the name lname (its CNAME answer a) into c. False when there is nothing
 * to follow: the target is outside the zone (the answer is the CNAME alone, as for any name).
 */
static bool chase(const struct ndc_records *r, const uint8_t *lname, size_t nlen,
		  const struct ndc_answer *a, struct chain *c)
{
	memcpy(c->names[0], lname, nlen);
	c->lens[0] = (uint8_t)nlen;
	c->n = 0;
	c->ends = false;
	c->end = NULL;
	for (;;) {
		uint8_t *t = c->names[c->n + 1];
		const struct ndc_rec_node_r *nd;
		size_t tl;

		if (ndc_rec_cname_target(a, c->names[c->n], c->lens[c->n], t, &tl))
			return c->n > 0; /* never for answers the table made */
		c->lens[++c->n] = (uint8_t)tl;
		/* Only the cluster domain: ServiceImports are never aliases' targets' makers. */
		if (!ndc_name_in_zone(t, tl, r->cz.zone, r->cz.zlen))
			return c->n > 1;
		for (int i = 0; i < c->n; i++)
			if (c->lens[i] == tl && !memcmp(c->names[i], t, tl))
				return true; /* a loop: the aliases up to it */
		nd = find(r, t, tl);
		a = nd && !node_lazy(nd) ? node_answer(nd, NDC_T_CNAME) : NULL;
		if (!a) {
			c->ends = true;
			c->end = nd;
			return true;
		}
		if (c->n == CHASE_MAX)
			return true;
	}
}

/*
 * What the chain's last name answers for qtype (0: a type it does not have), as a question for
 * that name would get it: *ret points into the table, or at s for an answer made now.
 */
static int end_answer(const struct ndc_records *r, const struct chain *c, uint16_t qtype,
		      union end_buf *s, const struct ndc_answer **ret)
{
	const uint8_t *n = c->names[c->n];
	size_t l = c->lens[c->n], cap = sizeof(*s) - sizeof(s->a);
	const struct ndc_answer *a;

	*ret = &s->a;
	if (!c->end) {
		if (r->pods == NDC_PODS_INSECURE && l > 1) {
			int err = pod_insecure(r, n, l, qtype, &s->a, cap);

			if (err != -ENOENT)
				return err;
		}
		return negative(&r->cz, l, NDC_RCODE_NXDOMAIN, &s->a, cap);
	}
	a = qtype ? node_answer(c->end, qtype) : NULL;
	if (!a)
		return negative(&r->cz, l, NDC_RCODE_NOERROR, &s->a, cap);
	if (answer_lazy(a))
		return lazy_srv_render(r, a, n, l, &s->a, cap);
	*ret = a;
	return 0;
}

/* The aliases of c, then the first an answer records of e (if any), the rest with all of them. */
static int chase_build(const struct ndc_records *r, const struct chain *c,
		       const struct ndc_answer *e, unsigned an, bool extra, struct ndc_answer *out,
		       size_t cap)
{
	struct ndc_ab ab;
	int err = 0;

	ndc_ab_init(&ab, out, cap, c->names[0], c->lens[0]);
	for (int i = 0; i < c->n; i++)
		ndc_ab_rr(&ab, NDC_SEC_ANSWER, c->names[i], c->lens[i], NDC_T_CNAME, NDC_C_IN,
			  r->ttl, c->names[i + 1], c->lens[i + 1]);
	if (e)
		err = ndc_rec_splice(&ab, c->names[c->n], c->lens[c->n], e, an, extra);
	return err ?: ndc_ab_finish(&ab, e ? e->rcode : NDC_RCODE_NOERROR, true);
}

/*
 * The answer to (names[0], qtype) along c: the aliases, then what the last name answers, its
 * RCODE the answer's (RFC 6604 3). One too big for a message loses that answer's additional
 * section, then as many of its records as it takes (RFC 2181 9), as rendering a set does; the
 * same whatever cap is, or -ENOSPC.
 */
static int chase_answer(const struct ndc_records *r, const struct chain *c, uint16_t qtype,
			struct ndc_answer *out, size_t cap)
{
	size_t limit = NDC_REC_ANSWER_CAP(c->lens[0]);
	const struct ndc_answer *e = NULL;
	unsigned lo = 0, hi;
	union end_buf s;
	int err;

	if (c->ends) {
		err = end_answer(r, c, qtype, &s, &e);
		if (err)
			return err;
	}
	hi = e ? e->ancount : 0;
	err = chase_build(r, c, e, hi, true, out, cap < limit ? cap : limit);
	if (err != -ENOSPC || cap < limit)
		return err;
	err = chase_build(r, c, e, hi, false, out, limit);
	while (err == -ENOSPC && hi - lo > 1) { /* lo records fit (or lo is 0), hi do not */
		unsigned mid = lo + (hi - lo) / 2;

		err = chase_build(r, c, e, mid, false, out, limit);
		if (err && err != -ENOSPC)
			return err;
		*(err ? &hi : &lo) = mid;
		err = -ENOSPC;
	}
	return err == -ENOSPC ? chase_build(r, c, e, lo, false, out, limit) : err;
}

/*
 * The types (besides CNAME and ANY, answered with the alias alone) whose answer at the chain's
 * first name differs from the one for any other type: those the last name has. Returns how many.
 */
static int chase_types(const struct ndc_records *r, const struct chain *c, uint16_t *types, int max)
{
	static const uint16_t pod_types[] = {NDC_T_A, NDC_T_AAAA};
	const uint8_t *e;
	int n = 0;

	if (!c->ends)
		return 0;
	if (!c->end) {
		union end_buf s;

		for (int i = 0; i < 2 && r->pods == NDC_PODS_INSECURE; i++)
			if (!pod_insecure(r, c->names[c->n], c->lens[c->n], pod_types[i], &s.a,
					  sizeof(s) - sizeof(s.a)) &&
			    s.a.ancount)
				types[n++] = pod_types[i];
		return n;
	}
	e = (const uint8_t *)c->end + NDC_REC_ALIGN4(sizeof(*c->end) + c->end->llen);
	for (int i = 0; i < c->end->ntypes && n < max; i++) {
		const struct ndc_answer *a = (const struct ndc_answer *)e;

		types[n++] = a->pad;
		e += NDC_REC_ALIGN4(ndc_answer_size(a));
	}
	return n;
}

/* Whether the alias at lname (CNAME answer a) answers qtype with more than the alias. */
static bool chase_has(const struct ndc_records *r, const uint8_t *lname, size_t nlen,
		      const struct ndc_answer *a, uint16_t qtype)
{
	uint16_t types[NDC_REC_MAX_TYPES];
	struct chain c;
	int n;

	if (!chase(r, lname, nlen, a, &c))
		return false;
	n = chase_types(r, &c, types, NDC_REC_MAX_TYPES);
	for (int i = 0; i < n; i++)
		if (types[i] == qtype)
			return true;
	return false;
}

/* A question for an alias inside the zone (qtype not CNAME nor ANY). -ENOENT: not one. */
static __attribute__((noinline)) int alias_lookup(const struct ndc_records *r, const uint8_t *lname,
						  size_t nlen, const struct ndc_answer *a,
						  uint16_t qtype, struct ndc_answer *out,
						  size_t cap)
{
	struct chain c;

	return chase(r, lname, nlen, a, &c) ? chase_answer(r, &c, qtype, out, cap) : -ENOENT;
}

int ndc_records_lookup(const struct ndc_records *r, const uint8_t *lname, size_t nlen,
		       uint16_t qtype, struct ndc_answer *out, size_t cap)
{
	const struct ndc_answer *a;
	const struct ndc_rec_node_r *nd;
	const struct ndc_rec_zone *z;
	struct ptr_src s = {0};
	bool ovl;

	if (!nlen || nlen > NDC_NAME_MAX)
		return -ENOENT;
	nd = find_ex(r, lname, nlen, &ovl);
	z = ndc_rec_zone_of(r, lname, nlen);
	if (!z) {
		/* Only reverse names live outside the zone; the rest falls through upstream. */
		if (!nd && !ovl && qtype == NDC_T_PTR && rev_find(r, lname, nlen, &s.h))
			return ptr_render(r, &s, lname, nlen, out, cap);
		if (nd && qtype == NDC_T_PTR && node_lazy(nd)) {
			s.nd = nd;
			return ptr_render(r, &s, lname, nlen, out, cap);
		}
		a = nd && qtype == NDC_T_PTR ? node_answer(nd, NDC_T_PTR) : NULL;
		return a ? copy_answer(r, a, lname, nlen, out, cap) : -ENOENT;
	}
	if (!nd) {
		if (r->pods == NDC_PODS_INSECURE && nlen > 1) {
			int err = pod_insecure(r, lname, nlen, qtype, out, cap);

			if (err != -ENOENT)
				return err;
		}
		return negative(z, nlen, NDC_RCODE_NXDOMAIN, out, cap);
	}
	a = node_answer(nd, qtype == NDC_T_ANY ? 0 : qtype);
	if (!a && qtype != NDC_T_CNAME) {
		a = node_answer(nd, NDC_T_CNAME); /* RFC 1034 3.6.2: the alias answers any type */
		if (a && qtype != NDC_T_ANY) {
			int err = alias_lookup(r, lname, nlen, a, qtype, out, cap);

			if (err != -ENOENT)
				return err;
		}
	}
	return a ? copy_answer(r, a, lname, nlen, out, cap)
		 : negative(z, nlen, NDC_RCODE_NOERROR, out, cap);
}

/* ---------------------------------------------------------------------------------------------
 * Iteration, for the fast-path publisher.
 */
/*
 * What ndc_records_foreach yields for an alias inside the zone, after its CNAME and ANY: the
 * answer for each type the chain's last name has, then the one for every other type. -ENOENT:
 * the alias points outside the zone (the CNAME answers every type).
 */
static __attribute__((noinline)) int alias_emit(const struct ndc_records *r, const uint8_t *name,
						size_t nlen, const struct ndc_answer *a,
						ndc_records_fn fn, void *arg)
{
	union {
		struct ndc_answer a;
		uint8_t b[sizeof(struct ndc_answer) + NDC_MSG_MAX]; /* as the socket path asks */
	} buf;
	uint16_t types[NDC_REC_MAX_TYPES];
	struct chain c;
	int n, err;

	if (!chase(r, name, nlen, a, &c))
		return -ENOENT;
	n = chase_types(r, &c, types, NDC_REC_MAX_TYPES);
	for (int i = 0; i <= n; i++) {
		uint16_t t = i < n ? types[i] : 0;

		err = chase_answer(r, &c, t, &buf.a, NDC_MSG_MAX);
		if (err)
			return err;
		buf.a.pad = (uint8_t)t;
		err = fn(arg, name, nlen, t, &buf.a);
		if (err)
			return err;
	}
	return 0;
}

/* What ndc_records_foreach yields for one node, named name. */
static int node_emit(const struct ndc_records *r, const struct ndc_rec_node_r *nd,
		     const uint8_t *name, size_t nlen, ndc_records_fn fn, void *arg)
{
	union {
		struct ndc_answer a;
		uint8_t b[sizeof(r->cz.neg)];
	} neg;
	const struct ndc_rec_zone *z;
	union {
		struct ndc_answer a;
		uint8_t b[sizeof(struct ndc_answer) + NDC_REC_LAZY_MAX];
	} srv;
	const uint8_t *e = (const uint8_t *)nd + NDC_REC_ALIGN4(sizeof(*nd) + nd->llen);
	const struct ndc_answer *other, *any = NULL;
	int err;

	if (node_lazy(nd))
		return ptr_emit(r, &(struct ptr_src){.nd = nd}, name, nlen, fn, arg);
	for (int t = 0; t < nd->ntypes; t++) {
		const struct ndc_answer *a = (const struct ndc_answer *)e;

		e += NDC_REC_ALIGN4(ndc_answer_size(a));
		if (answer_lazy(a)) {
			err = lazy_srv_render(r, a, name, nlen, &srv.a, NDC_REC_LAZY_MAX);
			srv.a.pad = a->pad;
			if (err)
				return err;
			a = &srv.a;
		}
		err = fn(arg, name, nlen, a->pad, a);
		if (err)
			return err;
		if (!t)
			any = a; /* still valid: srv is written once, for the node's one SRV set */
	}
	z = ndc_rec_zone_of(r, name, nlen);
	if (!z)
		return 0; /* reverse names: other types are forwarded, not answered */
	/* ANY gets the first RRset (RFC 8482), as ndc_records_lookup answers it. */
	if (nd->ntypes) {
		err = fn(arg, name, nlen, NDC_T_ANY, any);
		if (err)
			return err;
	}
	other = node_answer(nd, NDC_T_CNAME);
	if (other) {
		err = alias_emit(r, name, nlen, other, fn, arg);
		if (err != -ENOENT)
			return err;
	} else {
		err = negative(z, nlen, NDC_RCODE_NOERROR, &neg.a, sizeof(neg) - sizeof(neg.a));
		if (err)
			return err;
		other = &neg.a;
	}
	return fn(arg, name, nlen, 0, other);
}

struct ovl_walk {
	const struct ndc_records *r;
	ndc_records_fn fn;
	void *arg;
};

static int ovl_emit(void *arg, const struct ndc_rec_node_r *nd)
{
	const struct ovl_walk *w = arg;

	return node_emit(w->r, nd, nd->name, nd->nlen, w->fn, w->arg);
}

int ndc_records_foreach(const struct ndc_records *r, ndc_records_fn fn, void *arg)
{
	struct ovl_walk w = {.r = r, .fn = fn, .arg = arg};
	uint8_t name[NDC_NAME_MAX];

	for (uint32_t i = 0; i <= r->mask; i++) {
		const struct ndc_rec_node_r *nd, *shadow;
		size_t nlen;
		int err;

		if (!r->slots[i])
			continue;
		nd = (const struct ndc_rec_node_r *)(r->blob + r->slots[i]);
		nlen = node_name(r, nd, name);
		if (r->ovl && !ndc_rec_ovl_find(r->ovl, name, nlen, nd->hash, &shadow))
			continue; /* changed since the base was built: the overlay has it */
		err = node_emit(r, nd, name, nlen, fn, arg);
		if (err)
			return err;
	}
	for (size_t i = 0, n = r->n_rev4 + r->n_rev6; i < n;) {
		struct ptr_src s = {.h.first = i < r->n_rev4 ? i : i - r->n_rev4};
		struct rev_hit *h = &s.h;
		const struct ndc_rec_node_r *shadow;
		size_t nlen;
		int err;

		if (i < r->n_rev4) {
			uint32_t ip = r->rev4[i].ip;

			h->ip.family = AF_INET;
			for (int k = 0; k < 4; k++)
				h->ip.addr[k] = (uint8_t)(ip >> (24 - 8 * k));
			while (h->first + h->n < r->n_rev4 && r->rev4[h->first + h->n].ip == ip)
				h->n++;
		} else {
			h->ip.family = AF_INET6;
			memcpy(h->ip.addr, r->rev6[h->first].ip, 16);
			while (h->first + h->n < r->n_rev6 &&
			       !memcmp(r->rev6[h->first + h->n].ip, h->ip.addr, 16))
				h->n++;
		}
		i += h->n;
		nlen = ndc_records_reverse_name(&h->ip, name);
		if (r->ovl &&
		    !ndc_rec_ovl_find(r->ovl, name, nlen, ndc_rec_name_hash(name, nlen), &shadow))
			continue; /* changed since the base was built: the overlay has it */
		err = ptr_emit(r, &s, name, nlen, fn, arg);
		if (err)
			return err;
	}
	return r->ovl ? ndc_rec_ovl_foreach(r->ovl, ovl_emit, &w) : 0;
}

int ndc_records_foreach_name(const struct ndc_records *r, const uint8_t *lname, size_t nlen,
			     ndc_records_fn fn, void *arg)
{
	const struct ndc_rec_node_r *nd;
	struct ptr_src s = {0};
	bool ovl;

	if (!nlen || nlen > NDC_NAME_MAX)
		return 0;
	nd = find_ex(r, lname, nlen, &ovl);
	if (nd)
		return node_emit(r, nd, lname, nlen, fn, arg);
	return !ovl && rev_find(r, lname, nlen, &s.h) ? ptr_emit(r, &s, lname, nlen, fn, arg) : 0;
}

int ndc_rec_node_ptr_targets(const struct ndc_records *r, const struct ndc_rec_node_r *nd,
			     const uint8_t *name, size_t nlen,
			     int (*fn)(void *arg, const uint8_t *target, size_t tlen), void *arg)
{
	const struct ndc_answer *a;
	uint8_t msg[NDC_DNS_HDR_LEN + NDC_NAME_MAX + 4 + NDC_MSG_MAX];
	size_t pos, end, qend = NDC_DNS_HDR_LEN + nlen + 4;

	if (node_lazy(nd))
		return lazy_targets(r, nd, fn, arg);
	a = node_answer(nd, NDC_T_PTR);
	if (!a || qend + a->len > sizeof(msg))
		return 0;
	/* The answer's pointers assume the question at offset 12: put one there. */
	memset(msg, 0, NDC_DNS_HDR_LEN);
	memcpy(msg + NDC_DNS_HDR_LEN, name, nlen);
	memset(msg + NDC_DNS_HDR_LEN + nlen, 0, 4);
	memcpy(msg + qend, a->data, a->len);
	end = qend + a->len;
	pos = qend;
	for (uint16_t k = 0; k < a->ancount; k++) {
		uint8_t tgt[NDC_NAME_MAX];
		size_t tl, rdend;
		int err;

		if (ndc_name_unpack(msg, end, &pos, tgt, &tl) || pos + 10 > end)
			return 0;
		rdend = pos + 10 + ndc_get16(msg + pos + 8);
		pos += 10;
		if (rdend > end || ndc_name_unpack(msg, end, &pos, tgt, &tl))
			return 0;
		err = fn(arg, tgt, tl);
		if (err)
			return err;
		pos = rdend;
	}
	return 0;
}

int ndc_records_nxdomain(const struct ndc_records *r, struct ndc_answer *out, size_t cap)
{
	struct ndc_wbuf w;

	/* Nothing compressed: the same bytes must follow any question name. */
	ndc_wbuf_init(&w, out->data, cap);
	ndc_wbuf_bytes(&w, r->cz.zone, r->cz.zlen);
	ndc_wbuf_u16(&w, NDC_T_SOA);
	ndc_wbuf_u16(&w, NDC_C_IN);
	ndc_wbuf_u32(&w, r->neg_ttl);
	ndc_wbuf_u16(&w, (uint16_t)r->cz.soa_len);
	ndc_wbuf_bytes(&w, r->cz.soa, r->cz.soa_len);
	if (w.err)
		return -ENOSPC;
	memset(out, 0, sizeof(*out));
	out->rcode = NDC_RCODE_NXDOMAIN;
	out->aa = 1;
	out->nscount = 1;
	out->len = (uint16_t)w.len;
	out->min_ttl = r->neg_ttl;
	return 0;
}

bool ndc_records_has(const struct ndc_records *r, const uint8_t *lname, size_t nlen, uint16_t qtype)
{
	const struct ndc_answer *a;
	const struct ndc_rec_node_r *nd;
	struct rev_hit h;
	bool in_zone, ovl;

	if (!nlen || nlen > NDC_NAME_MAX)
		return false;
	nd = find_ex(r, lname, nlen, &ovl);
	in_zone = ndc_rec_zone_of(r, lname, nlen) != NULL;
	if (!nd)
		return !ovl && !in_zone && qtype == NDC_T_PTR && rev_find(r, lname, nlen, &h);
	if (qtype == 0)
		return in_zone;
	if (qtype == NDC_T_ANY && in_zone)
		return nd->ntypes > 0;
	if (node_lazy(nd))
		return qtype == NDC_T_PTR;
	if (node_answer(nd, qtype))
		return true;
	/* an alias followed inside the zone: the types its chain ends at */
	a = in_zone ? node_answer(nd, NDC_T_CNAME) : NULL;
	return a && chase_has(r, lname, nlen, a, qtype);
}
