/* SPDX-License-Identifier: MIT */
/*
 * The record model, second stage. record_build.c turns the objects into pending RRs grouped by
 * owner name; here every RRset is rendered once with the answer builder into one contiguous blob,
 * indexed by an open-addressing table of 32-bit offsets, with the reverse index beside it.
 * Lookup and iteration (records_lookup.c) read only those: no allocation, no locks, no logging.
 *
 * Blob layout, 4-byte aligned throughout: struct ndc_rec_node_r, its name, then ntypes answers
 * (struct ndc_answer and its data; the pad byte holds the type). Empty non-terminals are nodes with
 * no answers. A node whose parent name is a node too stores only its first label and the parent's
 * offset (most names share long suffixes: <svc>.<ns>.svc.<zone>). Offset 0 of the blob is never
 * a node, so a zero slot or parent means none.
 */
#include <arpa/inet.h> /* INET6_ADDRSTRLEN */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <ndc/log.h>

#include "internal.h"

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
	const struct ndc_rec_rr *x = *(const struct ndc_rec_rr *const *)a,
				*y = *(const struct ndc_rec_rr *const *)b;

	if (x->rdlen != y->rdlen)
		return x->rdlen < y->rdlen ? -1 : 1;
	return memcmp(x->rdata, y->rdata, x->rdlen);
}

/*
 * Collects the type RRs of t into *vec (capacity *cap), sorted and without duplicates (RFC 2181
 * 5): the same objects give the same bytes whatever order they were added in. type 0: A and
 * AAAA.
 */
static int collect_into(struct ndc_rec_rr ***vec, size_t *vcap, const struct ndc_rec_node *t,
			uint16_t type, size_t *ret_n)
{
	size_t n = 0;

	for (const struct ndc_rec_rr *rr = t->head; rr; rr = rr->next) {
		if (type ? rr->type != type : rr->type != NDC_T_A && rr->type != NDC_T_AAAA)
			continue;
		if (n == *vcap) {
			size_t cap = *vcap ? *vcap * 2 : 64;
			struct ndc_rec_rr **v = realloc(*vec, cap * sizeof(*v));

			if (!v)
				return -ENOMEM;
			*vec = v;
			*vcap = cap;
		}
		(*vec)[n++] = (struct ndc_rec_rr *)rr;
	}
	if (n > 1) /* *vec is still NULL when nothing matched */
		qsort(*vec, n, sizeof(**vec), rr_cmp);
	size_t u = 0;
	for (size_t i = 0; i < n; i++)
		if (!u || rr_cmp(&(*vec)[u - 1], &(*vec)[i]))
			(*vec)[u++] = (*vec)[i];
	*ret_n = u;
	return 0;
}

static int collect(struct ndc_rec_bld *b, const struct ndc_rec_node *t, uint16_t type,
		   size_t *ret_n)
{
	b->vraw = 0;
	for (const struct ndc_rec_rr *rr = t->head; rr; rr = rr->next)
		b->vraw += rr->type == type;
	return collect_into(&b->vec, &b->vcap, t, type, ret_n);
}

/* The weight an SRV record of a set of n (b->vraw as added) gets at render. */
static uint16_t srv_weight(const struct ndc_rec_bld *b, const struct ndc_rec_rr *rr, size_t n)
{
	size_t d = rr->weight == NDC_REC_W_RAW ? b->vraw : n;
	uint16_t w = (uint16_t)(NDC_REC_SRV_WEIGHT / (d ? d : 1));

	return w ? w : 1;
}

static const uint8_t *rr_target(const struct ndc_rec_rr *rr, size_t *ret_len)
{
	size_t off = rr->type == NDC_T_SRV ? 6 : 0;

	*ret_len = rr->rdlen - off;
	return rr->rdata + off;
}

/* The answer for one RRset: n records, plus the targets' addresses in additional for SRV/NS. */
static int render_set(struct ndc_rec_bld *b, const struct ndc_rec_node *t, uint16_t type, size_t n,
		      bool extra, struct ndc_answer *a, size_t cap)
{
	uint32_t ttl = b->opts->ttl;
	struct ndc_ab ab;
	uint8_t rd[6 + NDC_NAME_MAX];

	ndc_ab_init(&ab, a, cap, t->name, t->nlen);
	for (size_t i = 0; i < n; i++) {
		const struct ndc_rec_rr *rr = b->vec[i];
		const uint8_t *p = rr->rdata;

		if (rr->weight != NDC_REC_W_FIXED) {
			memcpy(rd, rr->rdata, rr->rdlen);
			ndc_put16(rd + 2, srv_weight(b, rr, n));
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
		const struct ndc_rec_node *tt = seen ? NULL : ndc_rec_find(b, tn, tl);
		size_t nx = 0;

		if (tt && collect_into(&b->xvec, &b->xcap, tt, 0, &nx))
			return -ENOMEM;
		for (size_t k = 0; k < nx; k++) {
			const struct ndc_rec_rr *rr = b->xvec[k];

			ndc_ab_rr(&ab, NDC_SEC_ADDITIONAL, tn, tl, rr->type, NDC_C_IN, ttl,
				  rr->rdata, rr->rdlen);
		}
	}
	return ndc_ab_finish(&ab, NDC_RCODE_NOERROR, true);
}

/*
 * Renders one RRset into scratch. One too big even for TCP loses its additional section, then
 * as many records as it takes (RFC 2181 9: a truncated set is still a valid answer). *ret_n is
 * the number of records when the whole set fitted with its additional section, else 0.
 */
static int render_type(struct ndc_rec_bld *b, const struct ndc_rec_node *t, uint16_t type,
		       struct ndc_answer *scratch, size_t cap, size_t *ret_n)
{
	bool extra = type == NDC_T_SRV || type == NDC_T_NS;
	size_t n, lo = 0, hi;
	int err = collect(b, t, type, &n);

	*ret_n = 0;
	if (err)
		return err;
	err = render_set(b, t, type, n, extra, scratch, cap);
	if (!err)
		*ret_n = n;
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

/*
 * The lazy form (NDC_REC_LAZY_RCODE) of t's SRV set of n records, sorted in b->vec as
 * render_type left it, into out (cap bytes of data). -EAGAIN: a target is not the owner, one of
 * its ancestors or a label before one; render the set instead.
 */
static int lazy_srv_encode(const struct ndc_rec_bld *b, const struct ndc_rec_node *t, size_t n,
			   struct ndc_answer *out, size_t cap)
{
	size_t pos = 0;

	for (size_t i = 0; i < n; i++) {
		const struct ndc_rec_rr *rr = b->vec[i];
		size_t tl, up = 0, o = 0, lab = SIZE_MAX;
		const uint8_t *tn = rr_target(rr, &tl);

		for (;;) { /* t->name + o: the owner with up labels dropped */
			size_t sl = t->nlen - o;

			if (tl == sl && !memcmp(tn, t->name + o, sl)) {
				lab = 0;
				break;
			}
			if (tl > sl && tn[0] + 1u + sl == tl &&
			    !memcmp(tn + 1 + tn[0], t->name + o, sl)) {
				lab = tn[0];
				break;
			}
			if (!t->name[o] || up == UINT8_MAX)
				break;
			o += 1u + t->name[o];
			up++;
		}
		if (lab == SIZE_MAX || pos + 8 + lab > cap)
			return -EAGAIN;
		uint8_t *p = out->data + pos;

		memcpy(p, rr->rdata, 6);
		if (rr->weight != NDC_REC_W_FIXED) /* as render_set weighs them */
			ndc_put16(p + 2, srv_weight(b, rr, n));
		p[6] = (uint8_t)up;
		p[7] = (uint8_t)lab;
		memcpy(p + 8, tn + 1, lab);
		pos += 8 + lab;
	}
	memset(out, 0, sizeof(*out));
	out->rcode = NDC_REC_LAZY_RCODE;
	out->ancount = (uint16_t)n;
	out->len = (uint16_t)pos;
	return 0;
}

int ndc_rec_render_node(struct ndc_rec_bld *b, struct ndc_records *r, const struct ndc_rec_node *t,
			struct ndc_answer *scratch, bool whole)
{
	union {
		struct ndc_answer a;
		uint8_t b[sizeof(struct ndc_answer) + NDC_REC_LAZY_MAX];
	} lazy;
	uint16_t types[NDC_REC_MAX_TYPES];
	size_t llen = t->nlen > 1 ? 1u + t->name[0] : t->nlen;
	size_t ntypes = 0, off = r->blob_len, hdr;
	size_t cap = NDC_REC_ANSWER_CAP(t->nlen);
	int err;

	for (const struct ndc_rec_rr *rr = t->head; rr; rr = rr->next) {
		size_t k = 0;

		while (k < ntypes && types[k] != rr->type)
			k++;
		if (k == ntypes && ntypes < NDC_REC_MAX_TYPES)
			types[ntypes++] = rr->type;
	}
	/* In type order, not the order objects came in: ANY answers with the first (RFC 8482). */
	for (size_t i = 1; i < ntypes; i++)
		for (size_t k = i; k > 0 && types[k - 1] > types[k]; k--) {
			uint16_t x = types[k];

			types[k] = types[k - 1];
			types[k - 1] = x;
		}
	if (whole || !t->parent || !ndc_rec_bld_zone(b, t->name, t->nlen))
		llen =
		    t->nlen; /* no parent node: the apex; reverse names (their parents are not) */
	hdr = NDC_REC_ALIGN4(sizeof(struct ndc_rec_node_r) + llen);
	err = blob_reserve(r, hdr);
	if (err)
		return err;
	struct ndc_rec_node_r *nd = (struct ndc_rec_node_r *)(r->blob + off);
	memset(nd, 0, hdr);
	nd->hash = t->hash;
	nd->nlen = t->nlen;
	nd->llen = (uint8_t)llen;
	memcpy(nd->name, t->name, llen);
	r->blob_len += hdr;

	for (size_t k = 0; k < ntypes; k++) {
		struct ndc_answer *a = scratch;
		size_t n;

		err = render_type(b, t, types[k], scratch, cap, &n);
		if (err)
			return err;
		/* SRV sets are a third of a cluster's table rendered, a few bytes each lazy. */
		if (types[k] == NDC_T_SRV && n && !b->opts->render_all &&
		    ndc_answer_size(scratch) <= NDC_REC_LAZY_MAX &&
		    !lazy_srv_encode(b, t, n, &lazy.a, NDC_REC_LAZY_MAX) &&
		    ndc_answer_size(&lazy.a) < ndc_answer_size(scratch))
			a = &lazy.a;
		size_t sz = NDC_REC_ALIGN4(ndc_answer_size(a));
		err = blob_reserve(r, sz);
		if (err)
			return err;
		/* Every type we hold is below 256: the answer's pad byte names it in the blob. */
		a->pad = (uint8_t)types[k];
		memset(r->blob + r->blob_len, 0, sz);
		memcpy(r->blob + r->blob_len, a, ndc_answer_size(a));
		r->blob_len += sz;
		((struct ndc_rec_node_r *)(r->blob + off))->ntypes++;
		r->n_rrsets++;
	}
	return 0;
}

/* A name outside the zone with PTR records only: a reverse name. */
static bool lazy_candidate(const struct ndc_rec_bld *b, const struct ndc_rec_node *t)
{
	if (!t->head || ndc_rec_bld_zone(b, t->name, t->nlen))
		return false;
	for (const struct ndc_rec_rr *rr = t->head; rr; rr = rr->next)
		if (rr->type != NDC_T_PTR)
			return false;
	return true;
}

/*
 * The rendered node PTR record rr points at, or the one after the target's first label (*ret_lab:
 * that label's length, else 0); NULL when neither is a node of the table.
 */
static const struct ndc_rec_node *ptr_target(const struct ndc_rec_bld *b,
					     const struct ndc_rec_rr *rr, size_t *ret_lab)
{
	const struct ndc_rec_node *c = ndc_rec_find(b, rr->rdata, rr->rdlen);
	size_t l = rr->rdata[0];

	*ret_lab = 0;
	if (c && c->off && !c->unindexed)
		return c;
	c = l && l + 1u < rr->rdlen ? ndc_rec_find(b, rr->rdata + 1 + l, rr->rdlen - 1 - l) : NULL;
	*ret_lab = l;
	return c && c->off && !c->unindexed ? c : NULL;
}

/*
 * t's PTR set, in the order rendering lists it (b->vec), as rendered nodes: each record's target
 * (lab[i] 0) or the node after the target's first label (lab[i] its length). -EAGAIN: no records,
 * more than NDC_REC_REV_MAX_TARGETS, or a target that is neither.
 */
static int ptr_set(struct ndc_rec_bld *b, const struct ndc_rec_node *t,
		   const struct ndc_rec_node **tgt, size_t *lab, size_t *ret_n)
{
	int err = collect(b, t, NDC_T_PTR, ret_n);

	if (err)
		return err;
	if (!*ret_n || *ret_n > NDC_REC_REV_MAX_TARGETS)
		return -EAGAIN;
	for (size_t i = 0; i < *ret_n; i++) {
		tgt[i] = ptr_target(b, b->vec[i], &lab[i]);
		if (!tgt[i])
			return -EAGAIN;
	}
	return 0;
}

/*
 * Writes t as a lazy PTR node (NDC_REC_LAZY_PTR), its targets in the order the rendered answer
 * would list them. -EAGAIN: a target is not a node nor a label before one, or the answer could
 * be big: render it now instead.
 */
static int render_lazy_ptr(struct ndc_rec_bld *b, struct ndc_records *r,
			   const struct ndc_rec_node *t)
{
	const struct ndc_rec_node *tgt[NDC_REC_REV_MAX_TARGETS];
	size_t lab[NDC_REC_REV_MAX_TARGETS];
	size_t n, llen = t->nlen, body = 2, hdr, off;
	int err = ptr_set(b, t, tgt, lab, &n);

	if (err)
		return err;
	for (size_t i = 0; i < n; i++)
		body += 5 + lab[i];
	hdr = NDC_REC_ALIGN4(sizeof(struct ndc_rec_node_r) + llen);
	err = blob_reserve(r, hdr + NDC_REC_ALIGN4(body));
	if (err)
		return err;
	off = r->blob_len;
	memset(r->blob + off, 0, hdr + NDC_REC_ALIGN4(body));
	struct ndc_rec_node_r *nd = (struct ndc_rec_node_r *)(r->blob + off);
	uint8_t *p = r->blob + off + hdr;

	nd->hash = t->hash;
	nd->nlen = t->nlen;
	nd->llen = (uint8_t)llen;
	nd->pad = NDC_REC_LAZY_PTR;
	memcpy(nd->name, t->name, llen);
	ndc_put16(p, (uint16_t)n);
	p += 2;
	for (size_t i = 0; i < n; i++) {
		memcpy(p, &tgt[i]->off, 4);
		p[4] = (uint8_t)lab[i];
		memcpy(p + 5, b->vec[i]->rdata + 1, lab[i]);
		p += 5 + lab[i];
	}
	r->blob_len += hdr + NDC_REC_ALIGN4(body);
	r->n_rrsets++;
	return 0;
}

/* ---------------------------------------------------------------------------------------------
 * The reverse index (see struct ndc_rec_rev4).
 */

/* The address reverse name n stands for, when written exactly as ndc_records_reverse_name does. */
bool ndc_rec_rev_parse(const uint8_t *n, size_t len, struct ndc_ip *ip)
{
	static const uint8_t v4[] = "\7in-addr\4arpa", v6[] = "\3ip6\4arpa";
	size_t pos = 0, end;

	memset(ip, 0, sizeof(*ip));
	if (len > sizeof(v4) && !memcmp(n + len - sizeof(v4), v4, sizeof(v4))) {
		end = len - sizeof(v4);
		ip->family = AF_INET;
		for (int i = 3; i >= 0; i--) {
			unsigned v = 0, l = pos < end ? n[pos] : 0;

			/* no leading zeros: the index must not answer a name the table lacks */
			if (l < 1 || l > 3 || pos + 1 + l > end || (l > 1 && n[pos + 1] == '0'))
				return false;
			for (unsigned k = 1; k <= l; k++) {
				if (n[pos + k] < '0' || n[pos + k] > '9')
					return false;
				v = v * 10 + (unsigned)(n[pos + k] - '0');
			}
			if (v > 255)
				return false;
			ip->addr[i] = (uint8_t)v;
			pos += 1 + l;
		}
	} else if (len > sizeof(v6) && !memcmp(n + len - sizeof(v6), v6, sizeof(v6))) {
		end = len - sizeof(v6);
		ip->family = AF_INET6;
		for (int i = 31; i >= 0; i--, pos += 2) {
			uint8_t c = pos + 2 <= end && n[pos] == 1 ? n[pos + 1] : 0;
			unsigned v = c >= '0' && c <= '9'   ? c - '0'
				     : c >= 'a' && c <= 'f' ? c - 'a' + 10
							    : 16;

			if (v > 15)
				return false;
			ip->addr[i / 2] |= (uint8_t)(i % 2 ? v : v << 4); /* low nibble first */
		}
	} else {
		return false;
	}
	return pos == end;
}

/* One rendering share's part of the reverse index, in the order its names came. */
struct rev_part {
	struct ndc_rec_rev4 *v4;
	size_t n4, cap4;
	struct ndc_rec_rev6 *v6;
	size_t n6, cap6;
	size_t names, rrsets;
};

static int grow(void **v, size_t *cap, size_t need, size_t sz);

/* One index entry: address ip, target word tgt (node offset, NDC_REC_REV_DASHED). */
static int rev_append(struct rev_part *rv, const struct ndc_ip *ip, uint32_t tgt)
{
	int err;

	if (ip->family == AF_INET) {
		const uint8_t *a = ip->addr;

		err = grow((void **)&rv->v4, &rv->cap4, rv->n4 + 1, sizeof(*rv->v4));
		if (!err)
			rv->v4[rv->n4++] = (struct ndc_rec_rev4){.ip = (uint32_t)a[0] << 24 |
								       (uint32_t)a[1] << 16 |
								       (uint32_t)a[2] << 8 | a[3],
								 .tgt = tgt};
		return err;
	}
	err = grow((void **)&rv->v6, &rv->cap6, rv->n6 + 1, sizeof(*rv->v6));
	if (!err) {
		memcpy(rv->v6[rv->n6].ip, ip->addr, 16);
		rv->v6[rv->n6++].tgt = tgt;
	}
	return err;
}

static int grow(void **v, size_t *cap, size_t need, size_t sz)
{
	if (need <= *cap)
		return 0;
	size_t c = *cap ? *cap : 1024;
	while (c < need)
		c *= 2;
	void *p = realloc(*v, c * sz);
	if (!p)
		return -ENOMEM;
	*v = p;
	*cap = c;
	return 0;
}

/*
 * Puts reverse name t in the index part rv. -EAGAIN: it does not fit the index (not canonical,
 * too many targets, a target that is not a node or the address's label before one).
 */
static int rev_add(struct ndc_rec_bld *b, struct rev_part *rv, const struct ndc_rec_node *t)
{
	const struct ndc_rec_node *tgt[NDC_REC_REV_MAX_TARGETS];
	size_t lab[NDC_REC_REV_MAX_TARGETS], n, dl = 0;
	char dash[INET6_ADDRSTRLEN];
	struct ndc_ip ip;
	int err;

	if (!ndc_rec_rev_parse(t->name, t->nlen, &ip))
		return -EAGAIN;
	err = ptr_set(b, t, tgt, lab, &n);
	if (err)
		return err;
	for (size_t i = 0; i < n; i++) {
		if (lab[i] && !dl) {
			ndc_rec_dashed(&ip, dash, sizeof(dash));
			dl = strlen(dash);
		}
		/* the one label the index can make again: the address's own */
		if (lab[i] && (lab[i] != dl || memcmp(b->vec[i]->rdata + 1, dash, dl)))
			return -EAGAIN;
	}
	for (size_t i = 0; i < n && !err; i++)
		err = rev_append(rv, &ip, tgt[i]->off | (lab[i] ? NDC_REC_REV_DASHED : 0));
	rv->names += !err;
	rv->rrsets += !err;
	return err;
}

/*
 * Stable LSD radix sorts by address: a name's targets stay in answer order. tmp holds n
 * entries.
 */
static void rev4_sort(struct ndc_rec_rev4 *v, struct ndc_rec_rev4 *tmp, size_t n)
{
	for (int shift = 0; shift < 32 && n; shift += 8) {
		size_t cnt[257] = {0};

		for (size_t i = 0; i < n; i++)
			cnt[((v[i].ip >> shift) & 0xff) + 1]++;
		for (int k = 0; k < 256; k++)
			cnt[k + 1] += cnt[k];
		for (size_t i = 0; i < n; i++)
			tmp[cnt[(v[i].ip >> shift) & 0xff]++] = v[i];
		memcpy(v, tmp, n * sizeof(*v));
	}
}

static void rev6_sort(struct ndc_rec_rev6 *v, struct ndc_rec_rev6 *tmp, size_t n)
{
	for (int byte = 15; byte >= 0 && n; byte--) {
		size_t cnt[257] = {0};

		for (size_t i = 0; i < n; i++)
			cnt[v[i].ip[byte] + 1]++;
		for (int k = 0; k < 256; k++)
			cnt[k + 1] += cnt[k];
		for (size_t i = 0; i < n; i++)
			tmp[cnt[v[i].ip[byte]]++] = v[i];
		memcpy(v, tmp, n * sizeof(*v));
	}
}

/*
 * The compact PTR records (ndc_rec_ptrs_resolve left them sorted, one address's set together in
 * answer order) as a part of the index, now that their targets' offsets are final.
 */
static int rev_compact(const struct ndc_rec_bld *b, struct rev_part *rv)
{
	int err = 0;

	for (size_t i = 0; i < b->n_ptrs && !err; i++) {
		const struct ndc_rec_ptr *p = &b->ptrs[i];

		if (!i || p->ip.family != p[-1].ip.family ||
		    memcmp(p->ip.addr, p[-1].ip.addr, 16)) {
			rv->names++;
			rv->rrsets++;
		}
		err = rev_append(rv, &p->ip, p->tgt->off | (p->dashed ? NDC_REC_REV_DASHED : 0));
	}
	return err;
}

/* The shares' parts into r's index, sorted. */
static int rev_merge(struct ndc_records *r, struct rev_part *parts, int nparts)
{
	size_t n4 = 0, n6 = 0;
	void *tmp;

	for (int k = 0; k < nparts; k++) {
		n4 += parts[k].n4;
		n6 += parts[k].n6;
		r->n_names += parts[k].names;
		r->n_rrsets += parts[k].rrsets;
	}
	r->rev4 = n4 ? malloc(n4 * sizeof(*r->rev4)) : NULL;
	r->rev6 = n6 ? malloc(n6 * sizeof(*r->rev6)) : NULL;
	size_t tmp4 = n4 * sizeof(*r->rev4), tmp6 = n6 * sizeof(*r->rev6);

	tmp = malloc((tmp4 > tmp6 ? tmp4 : tmp6) + 1);
	if ((n4 && !r->rev4) || (n6 && !r->rev6) || !tmp) {
		free(tmp);
		return -ENOMEM;
	}
	for (int k = 0; k < nparts; k++) {
		if (parts[k].n4)
			memcpy(r->rev4 + r->n_rev4, parts[k].v4, parts[k].n4 * sizeof(*r->rev4));
		if (parts[k].n6)
			memcpy(r->rev6 + r->n_rev6, parts[k].v6, parts[k].n6 * sizeof(*r->rev6));
		r->n_rev4 += parts[k].n4;
		r->n_rev6 += parts[k].n6;
	}
	rev4_sort(r->rev4, tmp, r->n_rev4);
	rev6_sort(r->rev6, tmp, r->n_rev6);
	free(tmp);
	return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Rendering the whole table.
 */
/* One share of a rendering pass: its own scratch, the builder read-only. */
struct render_job {
	struct ndc_rec_bld b;	 /* a shallow copy with its own vec and xvec */
	struct ndc_records *out; /* the table itself for the first share, else own */
	struct ndc_records own;	 /* only its blob and counters */
	struct rev_part rev;	 /* reverse names that went to the index */
	size_t from, to;
	int pass; /* 0: every node but reverse names; 1: reverse names, lazy where they can be */
	int err;
};

static void *render_range(void *arg)
{
	struct render_job *j = arg;
	struct ndc_answer *scratch = malloc(sizeof(*scratch) + NDC_MSG_MAX);

	j->err = scratch ? 0 : -ENOMEM;
	for (size_t i = j->from; i < j->to && !j->err; i++) {
		struct ndc_rec_node *t = j->b.tab[i];

		if (!t || lazy_candidate(&j->b, t) != j->pass)
			continue;
		if (!t->head && !ndc_rec_bld_zone(&j->b, t->name, t->nlen)) {
			t->unindexed = true; /* a reverse non-terminal: never answered */
			continue;
		}
		t->off = (uint32_t)j->out->blob_len;
		j->err = -EAGAIN;
		if (j->pass && !j->b.opts->render_all) {
			j->err = rev_add(&j->b, &j->rev, t);
			t->unindexed = !j->err;
			if (j->err == -EAGAIN)
				j->err = render_lazy_ptr(&j->b, j->out, t);
		}
		if (j->err == -EAGAIN) /* a big set, or targets that are not nodes */
			j->err = ndc_rec_render_node(&j->b, j->out, t, scratch, false);
	}
	free(scratch);
	return NULL;
}

/*
 * One pass over the nodes: the first share renders into r, the second (large tables) on another
 * thread into its own blob, appended afterwards with its offsets moved up by where it landed.
 */
static int render_pass(struct ndc_rec_bld *b, struct ndc_records *r, struct render_job *job,
		       int njobs, int pass)
{
	pthread_t th;
	bool started = false;
	int err;

	for (int k = 0; k < njobs; k++) {
		job[k].pass = pass;
		job[k].out = k ? &job[k].own : r;
		job[k].own.blob_len = 0;
		job[k].own.n_rrsets = 0;
		job[k].from = b->tcap * (size_t)k / (size_t)njobs;
		job[k].to = b->tcap * (size_t)(k + 1) / (size_t)njobs;
	}
	if (njobs == 2)
		started = !pthread_create(&th, NULL, render_range, &job[1]);
	render_range(&job[0]);
	if (started)
		pthread_join(th, NULL);
	else if (njobs == 2)
		render_range(&job[1]);
	err = job[0].err;
	if (njobs == 2 && !err) {
		size_t base = r->blob_len;

		err = job[1].err ?: blob_reserve(r, job[1].own.blob_len);
		if (err)
			return err;
		memcpy(r->blob + base, job[1].own.blob, job[1].own.blob_len);
		r->blob_len += job[1].own.blob_len;
		r->n_rrsets += job[1].own.n_rrsets;
		/* a quarter of the table: not kept beside the index and the rest of the build */
		free(job[1].own.blob);
		job[1].own.blob = NULL;
		job[1].own.blob_cap = 0;
		for (size_t i = job[1].from; i < job[1].to; i++)
			if (b->tab[i] && lazy_candidate(b, b->tab[i]) == pass)
				b->tab[i]->off += (uint32_t)base;
	}
	return err;
}

/*
 * Renders every node into r: two passes (reverse names last: lazy ones point at their targets'
 * final offsets), each split between two threads for large tables, since rendering is most of a
 * build; then the index and the parent links.
 */
static int render(struct ndc_rec_bld *b, struct ndc_records *r)
{
	struct render_job job[2] = {0};
	struct rev_part parts[3] = {0};
	int njobs = b->tcount > 50000 ? 2 : 1, err = 0;
	size_t cap = 16, nodes = 0;

	err = blob_reserve(r, b->arena_bytes / 2 + 4);
	if (err)
		return err;
	memset(r->blob, 0, 4);
	r->blob_len = 4; /* offset 0 marks an empty slot */
	for (int k = 0; k < njobs; k++) {
		job[k].b = *b;
		job[k].b.vec = NULL;
		job[k].b.vcap = 0;
		job[k].b.xvec = NULL;
		job[k].b.xcap = 0;
	}
	if (njobs == 2)
		err = blob_reserve(&job[1].own, b->arena_bytes / 4 + 4);
	for (int pass = 0; pass < 2 && !err; pass++)
		err = render_pass(b, r, job, njobs, pass);
	for (int k = 0; k < njobs; k++)
		parts[k] = job[k].rev;
	if (!err)
		err = rev_compact(b, &parts[njobs]);
	free(b->ptrs); /* in the index part now; 12 MB at 100,000 Services */
	b->ptrs = NULL;
	b->n_ptrs = b->cap_ptrs = 0;
	if (!err)
		err = rev_merge(r, parts, njobs + 1);
	for (int k = 0; k <= njobs; k++) {
		free(parts[k].v4);
		free(parts[k].v6);
	}
	for (int k = 0; k < njobs; k++)
		job[k].rev = (struct rev_part){0};
	for (size_t i = 0; i < b->tcap; i++)
		nodes += b->tab[i] && !b->tab[i]->unindexed;
	while (cap < nodes + nodes / 2)
		cap *= 2; /* load <= 2/3: a miss probes about five slots with linear probing */
	r->slots = err ? NULL : calloc(cap, sizeof(*r->slots));
	r->mask = (uint32_t)(cap - 1);
	if (!err && !r->slots)
		err = -ENOMEM;
	for (size_t i = 0; i < b->tcap && !err; i++) {
		const struct ndc_rec_node *t = b->tab[i];

		if (!t || t->unindexed)
			continue;
		uint32_t s = t->hash & r->mask;
		while (r->slots[s])
			s = (s + 1) & r->mask;
		r->slots[s] = t->off;
		r->n_names++;

		struct ndc_rec_node_r *nd = (struct ndc_rec_node_r *)(r->blob + t->off);
		if (nd->llen < nd->nlen)
			nd->parent = t->parent->off;
	}
	if (!err) {
		uint8_t *p = realloc(r->blob, r->blob_len); /* give back the doubling slack */

		if (p) {
			r->blob = p;
			r->blob_cap = r->blob_len;
		}
	}
	for (int k = 0; k < njobs; k++) {
		free(job[k].own.blob);
		free(job[k].b.vec);
		free(job[k].b.xvec);
		free(job[k].rev.v4);
		free(job[k].rev.v6);
	}
	return err;
}

/* ---------------------------------------------------------------------------------------------
 * Negative answers: one template per table, moved to each question.
 */
/* Records where the pointers sit in zone z's negative template (see struct ndc_rec_zone). */
static int negative_init(struct ndc_rec_zone *z, uint32_t neg_ttl)
{
	struct ndc_ab ab;
	const uint8_t *d = z->neg.a.data;
	size_t pos = 0;
	int err;

	ndc_ab_init(&ab, &z->neg.a, sizeof(z->neg.b) - sizeof(z->neg.a), z->zone, z->zlen);
	ndc_ab_rr(&ab, NDC_SEC_AUTHORITY, z->zone, z->zlen, NDC_T_SOA, NDC_C_IN, neg_ttl, z->soa,
		  z->soa_len);
	err = ndc_ab_finish(&ab, NDC_RCODE_NXDOMAIN, true);
	for (int name = 0; !err && name < 3; name++) {
		while (pos < z->neg.a.len && d[pos] && (d[pos] & 0xc0) != 0xc0)
			pos += 1u + d[pos];
		if (pos + 2 > z->neg.a.len || z->n_neg_ptrs == NDC_REC_NEG_PTRS_MAX)
			return -EINVAL;
		if (d[pos]) /* a pointer, not the root label */
			z->neg_ptrs[z->n_neg_ptrs++] = (uint16_t)pos++;
		pos += name ? 1 : 11; /* the owner is followed by TYPE CLASS TTL RDLENGTH */
	}
	return err;
}

/* The apex of every zone: the cluster domain's, then each multicluster zone's (own SOA). */
static int add_zones(struct ndc_rec_bld *b, struct ndc_records *r)
{
	memcpy(r->cz.zone, b->zone, b->zlen);
	r->cz.zlen = b->zlen;
	ndc_rec_add_apex(b, b->zone, b->zlen, r->cz.soa, &r->cz.soa_len);
	if (!b->n_mcz)
		return 0;
	r->mcz = calloc(b->n_mcz, sizeof(*r->mcz));
	if (!r->mcz)
		return -ENOMEM;
	r->n_mcz = b->n_mcz;
	for (size_t i = 0; i < b->n_mcz; i++) {
		struct ndc_rec_zone *z = &r->mcz[i];

		memcpy(z->zone, b->mcz[i].zone, b->mcz[i].zlen);
		z->zlen = b->mcz[i].zlen;
		ndc_rec_add_apex(b, z->zone, z->zlen, z->soa, &z->soa_len);
	}
	return 0;
}

static int negatives_init(struct ndc_records *r)
{
	int err = negative_init(&r->cz, r->neg_ttl);

	for (size_t i = 0; i < r->n_mcz && !err; i++)
		err = negative_init(&r->mcz[i], r->neg_ttl);
	return err;
}

/* ---------------------------------------------------------------------------------------------
 * Public API.
 */
int ndc_records_build(const struct ndc_k8s_objects *o, const struct ndc_records_opts *opts,
		      struct ndc_records **ret)
{
	return ndc_records_build_from(o, opts, NULL, NULL, ret);
}

int ndc_records_build_from(const struct ndc_k8s_objects *o, const struct ndc_records_opts *opts,
			   void (*done)(void *arg), void *arg, struct ndc_records **ret)
{
	struct ndc_rec_bld b;
	struct ndc_records *r;
	int err;

	*ret = NULL;
	err = ndc_rec_bld_init(&b, opts);
	if (err) {
		if (done)
			done(arg);
		return err;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		err = -ENOMEM;
		goto fail;
	}
	atomic_init(&r->refs, 1);
	memcpy(r->podz, b.podz, b.podzlen);
	r->podzlen = b.podzlen;
	r->pods = opts->pods;
	r->ttl = opts->ttl;
	r->neg_ttl = opts->ttl; /* min(TTL, SOA minimum), and the minimum is the TTL */

	struct timespec t0, t1, t2;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	b.compact_ptrs = !opts->render_all;
	err = add_zones(&b, r);
	err = err ?: ndc_rec_add_objects(&b, o);
	err = err ?: ndc_rec_add_imports(&b, o);
	if (done) /* the builder holds copies of everything it read */
		done(arg);
	done = NULL;
	if (!err)
		err = ndc_rec_ptrs_resolve(&b);
	if (err)
		goto fail;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	err = b.err ? b.err : render(&b, r);
	clock_gettime(CLOCK_MONOTONIC, &t2);
	if (!err)
		err = negatives_init(r);
	if (err)
		goto fail;
	ndc_debug("records: %zu names, %zu RRsets in %zu bytes (build scratch %zu bytes); "
		  "objects %ld ms, render %ld ms",
		  r->n_names, r->n_rrsets, ndc_records_bytes(r), b.arena_bytes,
		  (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000,
		  (t2.tv_sec - t1.tv_sec) * 1000 + (t2.tv_nsec - t1.tv_nsec) / 1000000);
	if (b.skipped)
		ndc_warn("records: skipped %zu objects whose names are not valid DNS names "
			 "(first: %s)",
			 b.skipped, b.first_skip);
	ndc_rec_bld_free(&b);
	*ret = r;
	return 0;
fail:
	if (done)
		done(arg);
	ndc_rec_bld_free(&b);
	ndc_records_free(r);
	return err == -E2BIG ? -ENOMEM : err;
}

static void owner_put(struct ndc_records *o)
{
	if (atomic_fetch_sub(&o->refs, 1) != 1)
		return;
	free(o->rev4);
	free(o->rev6);
	free(o->mcz);
	free(o->slots);
	free(o->blob);
	free(o);
}

void ndc_records_free(struct ndc_records *r)
{
	if (!r)
		return;
	ndc_rec_ovl_put(r->ovl);
	if (r->owner) {
		owner_put(r->owner);
		free(r);
	} else {
		owner_put(r);
	}
}

size_t ndc_records_count(const struct ndc_records *r)
{
	return r->n_rrsets;
}

size_t ndc_records_bytes(const struct ndc_records *r)
{
	if (r->owner)
		r = r->owner; /* a version: the base it shares */
	return sizeof(*r) + r->blob_cap + ((size_t)r->mask + 1) * sizeof(*r->slots) +
	       r->n_rev4 * sizeof(*r->rev4) + r->n_rev6 * sizeof(*r->rev6);
}

bool ndc_records_is_local(const struct ndc_records *r, const uint8_t *lname, size_t nlen)
{
	return ndc_rec_zone_of(r, lname, nlen) != NULL;
}
