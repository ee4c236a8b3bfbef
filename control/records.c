/* SPDX-License-Identifier: MIT */
/*
 * The record model, second stage and lookup. record_build.c turns the objects into pending RRs
 * grouped by owner name; here every RRset is rendered once with the answer builder into one
 * contiguous blob, indexed by an open-addressing table of 32-bit offsets. Lookup reads only the
 * blob and the index: no allocation, no locks, no logging.
 *
 * Blob layout, 4-byte aligned throughout: struct ndc_rec_node_r, its name, then ntypes answers
 * (struct ndc_answer and its data; the pad byte holds the type). Empty non-terminals are nodes with
 * no answers. A node whose parent name is a node too stores only its first label and the parent's
 * offset (most names share long suffixes: <svc>.<ns>.svc.<zone>). Offset 0 of the blob is never
 * a node, so a zero slot or parent means none.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <ndc/log.h>

#include "records_internal.h"

#define OPT_RR_LEN 11 /* room left for the OPT RR the reply writer appends */
#define MAX_TYPES 8   /* distinct types one owner can hold: SOA NS A AAAA SRV PTR TXT CNAME */

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
	return collect_into(&b->vec, &b->vcap, t, type, ret_n);
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

		if (rr->split_weight) {
			uint16_t w = (uint16_t)(NDC_REC_SRV_WEIGHT / n);

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
		if (rr->split_weight) { /* as render_set weighs them */
			uint16_t w = (uint16_t)(NDC_REC_SRV_WEIGHT / n);

			ndc_put16(p + 2, w ? w : 1);
		}
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
	uint16_t types[MAX_TYPES];
	size_t llen = t->nlen > 1 ? 1u + t->name[0] : t->nlen;
	size_t ntypes = 0, off = r->blob_len, hdr;
	/* Room for the reply header, question and OPT around the data (RFC 1035 4.2.2 limit). */
	size_t cap = NDC_MSG_MAX - NDC_DNS_HDR_LEN - t->nlen - 4 - OPT_RR_LEN;
	int err;

	for (const struct ndc_rec_rr *rr = t->head; rr; rr = rr->next) {
		size_t k = 0;

		while (k < ntypes && types[k] != rr->type)
			k++;
		if (k == ntypes && ntypes < MAX_TYPES)
			types[ntypes++] = rr->type;
	}
	/* In type order, not the order objects came in: ANY answers with the first (RFC 8482). */
	for (size_t i = 1; i < ntypes; i++)
		for (size_t k = i; k > 0 && types[k - 1] > types[k]; k--) {
			uint16_t x = types[k];

			types[k] = types[k - 1];
			types[k - 1] = x;
		}
	if (whole || !t->parent || !ndc_name_in_zone(t->name, t->nlen, b->zone, b->zlen))
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
	if (!t->head || ndc_name_in_zone(t->name, t->nlen, b->zone, b->zlen))
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
 * Writes t as a lazy PTR node (NDC_REC_LAZY_PTR), its targets in the order the rendered answer
 * would list them. -EAGAIN: a target is not a node nor a label before one, or the answer could
 * be big: render it now instead.
 */
static int render_lazy_ptr(struct ndc_rec_bld *b, struct ndc_records *r,
			   const struct ndc_rec_node *t)
{
	enum { MAX_TARGETS = NDC_REC_LAZY_MAX / (12 + NDC_NAME_MAX) };
	const struct ndc_rec_node *tgt[MAX_TARGETS];
	uint8_t lab[MAX_TARGETS];
	size_t n, llen = t->nlen, body = 2, hdr, off;
	int err = collect(b, t, NDC_T_PTR, &n);

	if (err)
		return err;
	if (!n || n > MAX_TARGETS)
		return -EAGAIN;
	for (size_t i = 0; i < n; i++) {
		size_t l;
		const struct ndc_rec_node *c = ptr_target(b, b->vec[i], &l);

		if (!c)
			return -EAGAIN;
		tgt[i] = c;
		lab[i] = (uint8_t)l;
		body += 5 + l;
	}
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
		p[4] = lab[i];
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
/* PTR targets of one reverse name in the index, at most: its answer fits NDC_REC_LAZY_MAX. */
#define REV_MAX_TARGETS (NDC_REC_LAZY_MAX / (12 + NDC_NAME_MAX))

/* The address reverse name n stands for, when written exactly as ndc_records_reverse_name does. */
static bool rev_parse(const uint8_t *n, size_t len, struct ndc_ip *ip)
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
	uint32_t tgt[REV_MAX_TARGETS];
	char dash[INET6_ADDRSTRLEN];
	size_t n, dl = 0;
	struct ndc_ip ip;
	int err;

	if (!rev_parse(t->name, t->nlen, &ip))
		return -EAGAIN;
	err = collect(b, t, NDC_T_PTR, &n);
	if (err)
		return err;
	if (!n || n > REV_MAX_TARGETS)
		return -EAGAIN;
	for (size_t i = 0; i < n; i++) {
		size_t l;
		const struct ndc_rec_node *c = ptr_target(b, b->vec[i], &l);

		if (!c)
			return -EAGAIN;
		if (l && !dl) {
			ndc_rec_dashed(&ip, dash, sizeof(dash));
			dl = strlen(dash);
		}
		/* the one label the index can make again: the address's own */
		if (l && (l != dl || memcmp(b->vec[i]->rdata + 1, dash, dl)))
			return -EAGAIN;
		tgt[i] = c->off | (l ? NDC_REC_REV_DASHED : 0);
	}
	if (ip.family == AF_INET) {
		uint32_t a = (uint32_t)ip.addr[0] << 24 | (uint32_t)ip.addr[1] << 16 |
			     (uint32_t)ip.addr[2] << 8 | ip.addr[3];

		err = grow((void **)&rv->v4, &rv->cap4, rv->n4 + n, sizeof(*rv->v4));
		for (size_t i = 0; !err && i < n; i++)
			rv->v4[rv->n4++] = (struct ndc_rec_rev4){.ip = a, .tgt = tgt[i]};
	} else {
		err = grow((void **)&rv->v6, &rv->cap6, rv->n6 + n, sizeof(*rv->v6));
		for (size_t i = 0; !err && i < n; i++) {
			memcpy(rv->v6[rv->n6].ip, ip.addr, 16);
			rv->v6[rv->n6++].tgt = tgt[i];
		}
	}
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
		if (!t->head && !ndc_name_in_zone(t->name, t->nlen, j->b.zone, j->b.zlen)) {
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
	struct rev_part parts[2];
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
		err = rev_merge(r, parts, njobs);
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
		if (pos + 2 > r->neg.a.len || r->n_neg_ptrs == NDC_REC_NEG_PTRS_MAX)
			return -EINVAL;
		if (d[pos]) /* a pointer, not the root label */
			r->neg_ptrs[r->n_neg_ptrs++] = (uint16_t)pos++;
		pos += name ? 1 : 11; /* the owner is followed by TYPE CLASS TTL RDLENGTH */
	}
	return err;
}

/* ---------------------------------------------------------------------------------------------
 * Public API.
 */
int ndc_records_build(const struct ndc_k8s_objects *o, const struct ndc_records_opts *opts,
		      struct ndc_records **ret)
{
	struct ndc_rec_bld b;
	struct ndc_records *r;
	int err;

	*ret = NULL;
	err = ndc_rec_bld_init(&b, opts);
	if (err)
		return err;
	r = calloc(1, sizeof(*r));
	if (!r) {
		err = -ENOMEM;
		goto fail;
	}
	atomic_init(&r->refs, 1);
	memcpy(r->zone, b.zone, b.zlen);
	r->zlen = b.zlen;
	memcpy(r->podz, b.podz, b.podzlen);
	r->podzlen = b.podzlen;
	r->pods = opts->pods;
	r->ttl = opts->ttl;
	r->neg_ttl = opts->ttl; /* min(TTL, SOA minimum), and the minimum is the TTL */

	struct timespec t0, t1, t2;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	ndc_rec_add_apex(&b, r->soa, &r->soa_len);
	err = ndc_rec_add_objects(&b, o);
	if (err)
		goto fail;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	err = b.err ? b.err : render(&b, r);
	clock_gettime(CLOCK_MONOTONIC, &t2);
	if (!err)
		err = negative_init(r);
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
	return ndc_name_in_zone(lname, nlen, r->zone, r->zlen);
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

	if ((!r->n_rev4 && !r->n_rev6) || !rev_parse(name, nlen, &h->ip))
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
static size_t node_name(const struct ndc_records *r, const struct ndc_rec_node_r *nd, uint8_t *out);

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

/* The PTR answer of h at name, as rendering it at build time would have made it. */
static int rev_render(const struct ndc_records *r, const struct rev_hit *h, const uint8_t *name,
		      size_t nlen, struct ndc_answer *out, size_t cap)
{
	uint8_t tgt[NDC_NAME_MAX + NDC_LABEL_MAX + 1];
	struct ndc_ab ab;

	ndc_ab_init(&ab, out, cap, name, nlen);
	for (size_t i = 0; i < h->n; i++)
		ndc_ab_rr(&ab, NDC_SEC_ANSWER, name, nlen, NDC_T_PTR, NDC_C_IN, r->ttl, tgt,
			  rev_target(r, h, i, tgt));
	return ndc_ab_finish(&ab, NDC_RCODE_NOERROR, true);
}

/* What ndc_records_foreach yields for a reverse name of the index. */
static int rev_emit(const struct ndc_records *r, const struct rev_hit *h, const uint8_t *name,
		    size_t nlen, ndc_records_fn fn, void *arg)
{
	union {
		struct ndc_answer a;
		uint8_t b[sizeof(struct ndc_answer) + NDC_REC_LAZY_MAX];
	} ptr;
	int err = rev_render(r, h, name, nlen, &ptr.a, NDC_REC_LAZY_MAX);

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
	struct rev_hit h;
	int err;

	if (!rev_find(r, n, len, &h))
		return -ENOENT;
	err = rev_render(r, &h, n, len, out, cap);
	out->pad = (uint8_t)NDC_T_PTR; /* as a node's answer holds it */
	return err;
}

int ndc_rec_rev_targets(const struct ndc_records *r, const uint8_t *n, size_t len,
			int (*fn)(void *arg, const uint8_t *target, size_t tlen), void *arg)
{
	uint8_t tgt[NDC_NAME_MAX + NDC_LABEL_MAX + 1];
	struct rev_hit h;
	int err = 0;

	if (!rev_find(r, n, len, &h))
		return 0;
	for (size_t i = 0; i < h.n && !err; i++)
		err = fn(arg, tgt, rev_target(r, &h, i, tgt));
	return err;
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

/* The PTR answer of a lazy node, as rendering it at build time would have made it. */
static int lazy_render(const struct ndc_records *r, const struct ndc_rec_node_r *nd,
		       const uint8_t *name, size_t nlen, struct ndc_answer *out, size_t cap)
{
	struct lazy_ab l = {.name = name, .nlen = nlen, .ttl = r->ttl};

	ndc_ab_init(&l.ab, out, cap, name, nlen);
	lazy_targets(r, nd, lazy_rr, &l);
	return ndc_ab_finish(&l.ab, NDC_RCODE_NOERROR, true);
}

static bool node_lazy(const struct ndc_rec_node_r *nd)
{
	return nd->pad & NDC_REC_LAZY_PTR;
}

static const struct ndc_rec_node_r *find(const struct ndc_records *r, const uint8_t *n, size_t len);

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
	const struct ndc_rec_node_r *nd;
	struct rev_hit h;
	bool ovl;

	if (!nlen || nlen > NDC_NAME_MAX)
		return -ENOENT;
	nd = find_ex(r, lname, nlen, &ovl);
	if (!ndc_name_in_zone(lname, nlen, r->zone, r->zlen)) {
		/* Only reverse names live outside the zone; the rest falls through upstream. */
		if (!nd && !ovl && qtype == NDC_T_PTR && rev_find(r, lname, nlen, &h))
			return rev_render(r, &h, lname, nlen, out, cap);
		if (nd && qtype == NDC_T_PTR && node_lazy(nd))
			return lazy_render(r, nd, lname, nlen, out, cap);
		a = nd && qtype == NDC_T_PTR ? node_answer(nd, NDC_T_PTR) : NULL;
		return a ? copy_answer(r, a, lname, nlen, out, cap) : -ENOENT;
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
	return a ? copy_answer(r, a, lname, nlen, out, cap)
		 : negative(r, nlen, NDC_RCODE_NOERROR, out, cap);
}

/* ---------------------------------------------------------------------------------------------
 * Iteration, for the fast-path publisher.
 */
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

/* What ndc_records_foreach yields for one node, named name. */
static int node_emit(const struct ndc_records *r, const struct ndc_rec_node_r *nd,
		     const uint8_t *name, size_t nlen, ndc_records_fn fn, void *arg)
{
	union {
		struct ndc_answer a;
		uint8_t b[sizeof(r->neg)];
	} neg;
	union {
		struct ndc_answer a;
		uint8_t b[sizeof(struct ndc_answer) + NDC_REC_LAZY_MAX];
	} srv;
	const uint8_t *e = (const uint8_t *)nd + NDC_REC_ALIGN4(sizeof(*nd) + nd->llen);
	const struct ndc_answer *other, *any = NULL;
	int err;

	if (node_lazy(nd)) {
		union {
			struct ndc_answer a;
			uint8_t b[sizeof(struct ndc_answer) + NDC_REC_LAZY_MAX];
		} ptr;

		err = lazy_render(r, nd, name, nlen, &ptr.a, NDC_REC_LAZY_MAX);
		ptr.a.pad = (uint8_t)NDC_T_PTR;
		return err ? err : fn(arg, name, nlen, NDC_T_PTR, &ptr.a);
	}
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
	if (!ndc_name_in_zone(name, nlen, r->zone, r->zlen))
		return 0; /* reverse names: other types are forwarded, not answered */
	/* ANY gets the first RRset (RFC 8482), as ndc_records_lookup answers it. */
	if (nd->ntypes) {
		err = fn(arg, name, nlen, NDC_T_ANY, any);
		if (err)
			return err;
	}
	other = node_answer(nd, NDC_T_CNAME);
	if (!other) {
		err = negative(r, nlen, NDC_RCODE_NOERROR, &neg.a, sizeof(neg) - sizeof(neg.a));
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
		struct rev_hit h = {.first = i < r->n_rev4 ? i : i - r->n_rev4};
		const struct ndc_rec_node_r *shadow;
		size_t nlen;
		int err;

		if (i < r->n_rev4) {
			uint32_t ip = r->rev4[i].ip;

			h.ip.family = AF_INET;
			for (int k = 0; k < 4; k++)
				h.ip.addr[k] = (uint8_t)(ip >> (24 - 8 * k));
			while (h.first + h.n < r->n_rev4 && r->rev4[h.first + h.n].ip == ip)
				h.n++;
		} else {
			h.ip.family = AF_INET6;
			memcpy(h.ip.addr, r->rev6[h.first].ip, 16);
			while (h.first + h.n < r->n_rev6 &&
			       !memcmp(r->rev6[h.first + h.n].ip, h.ip.addr, 16))
				h.n++;
		}
		i += h.n;
		nlen = ndc_records_reverse_name(&h.ip, name);
		if (r->ovl &&
		    !ndc_rec_ovl_find(r->ovl, name, nlen, ndc_rec_name_hash(name, nlen), &shadow))
			continue; /* changed since the base was built: the overlay has it */
		err = rev_emit(r, &h, name, nlen, fn, arg);
		if (err)
			return err;
	}
	return r->ovl ? ndc_rec_ovl_foreach(r->ovl, ovl_emit, &w) : 0;
}

int ndc_records_foreach_name(const struct ndc_records *r, const uint8_t *lname, size_t nlen,
			     ndc_records_fn fn, void *arg)
{
	const struct ndc_rec_node_r *nd;
	struct rev_hit h;
	bool ovl;

	if (!nlen || nlen > NDC_NAME_MAX)
		return 0;
	nd = find_ex(r, lname, nlen, &ovl);
	if (nd)
		return node_emit(r, nd, lname, nlen, fn, arg);
	return !ovl && rev_find(r, lname, nlen, &h) ? rev_emit(r, &h, lname, nlen, fn, arg) : 0;
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
	ndc_wbuf_bytes(&w, r->zone, r->zlen);
	ndc_wbuf_u16(&w, NDC_T_SOA);
	ndc_wbuf_u16(&w, NDC_C_IN);
	ndc_wbuf_u32(&w, r->neg_ttl);
	ndc_wbuf_u16(&w, (uint16_t)r->soa_len);
	ndc_wbuf_bytes(&w, r->soa, r->soa_len);
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
	const struct ndc_rec_node_r *nd;
	struct rev_hit h;
	bool in_zone, ovl;

	if (!nlen || nlen > NDC_NAME_MAX)
		return false;
	nd = find_ex(r, lname, nlen, &ovl);
	in_zone = ndc_name_in_zone(lname, nlen, r->zone, r->zlen);
	if (!nd)
		return !ovl && !in_zone && qtype == NDC_T_PTR && rev_find(r, lname, nlen, &h);
	if (qtype == 0)
		return in_zone;
	if (qtype == NDC_T_ANY && in_zone)
		return nd->ntypes > 0;
	if (node_lazy(nd))
		return qtype == NDC_T_PTR;
	return node_answer(nd, qtype) != NULL;
}
