// SPDX-License-Identifier: MIT
/*
 * The kernel answer table's layout of one entry (include/ndc/abi.h, "The answer table"): a
 * struct ndc_fp_value in a slot's bytes and back, a big answer's records, and the NODATA
 * authority that NODATA entries point at instead of carrying it. Pure functions of their
 * arguments; the writer and the walk that use them are table.c and table_walk.c.
 */
#include <errno.h>
#include <string.h>

#include <ndc/dns_wire.h>

#include "internal.h"

static size_t round8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

/* ---------------------------------------------------------------------------------------------
 * Layout: a struct ndc_fp_value in a slot's bytes, and back.
 */

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/*
 * The longest suffix of x that name (a wire name of len bytes) ends in at a label's start: its
 * index + 1 (NDC_FP_V_SFX's value), the bytes before it in *ret_plen; 0 and len when none.
 */
uint32_t ndc_fp_sfx_pick(const struct ndc_fp_sfx *x, const uint8_t *name, uint32_t len,
			 uint32_t *ret_plen)
{
	uint32_t best = 0, blen = 0;

	for (uint32_t i = 0; x && i < NDC_FP_SFX_MAX; i++) {
		uint32_t sl = x->len[i], p = 0;

		if (!sl || sl > len || sl <= blen || memcmp(name + len - sl, x->name[i], sl))
			continue;
		while (p < len - sl)
			p += 1 + (uint32_t)name[p];
		if (p == len - sl) {
			best = i + 1;
			blen = sl;
		}
	}
	*ret_plen = len - blen;
	return best;
}

/*
 * Where the parts of v go in a slot's bytes, its name's first plen bytes kept (ndc_fp_sfx_pick),
 * and whether they fit. Only a value that the bytes give back exactly goes there (what the
 * publisher writes always does: zero where unused).
 */
bool ndc_fp_slot_fits(const struct ndc_fp_value *v, uint32_t plen, size_t *ret_data,
		      size_t *ret_ttl)
{
	size_t data = round8(plen), end, ttl = data + round8(v->len);

	if (v->name_len > NDC_FP_NAME_MAX || v->len > NDC_FP_DATA_MAX || v->n_ttl > NDC_FP_TTL_MAX)
		return false;
	/* the TTL offsets to a whole word: the kernel reads them four at a time */
	end = v->expire_ns ? ttl + 16 + round8(2 * (size_t)v->n_ttl) : data + v->len;
	if (end > NDC_FP_SLOT_BYTES || v->ancount > UINT8_MAX || v->nscount > UINT8_MAX ||
	    v->arcount > UINT8_MAX || v->pad2 ||
	    (v->flags & (NDC_FP_V_EXPIRES | NDC_FP_V_BIG | NDC_FP_V_RARE)))
		return false;
	if (!v->expire_ns && (v->insert_ns || v->n_ttl))
		return false;
	if (!all_zero(v->name + v->name_len, NDC_FP_NAME_MAX - v->name_len) ||
	    !all_zero(v->data + v->len, NDC_FP_DATA_MAX - v->len) ||
	    !all_zero((const uint8_t *)(v->ttl_off + v->n_ttl),
		      sizeof(v->ttl_off) - 2 * (size_t)v->n_ttl))
		return false;
	*ret_data = data;
	*ret_ttl = ttl;
	return true;
}

/*
 * The zone's NODATA authority from the NXDOMAIN template nx (its one SOA RR written out whole):
 * the same RR compressed as the socket path writes it after a question ending in the zone, owner
 * and the SOA's names that end in the zone pointing at it; the pointers' offsets in ttl_off (n_ttl
 * of them, zero until filled in for a question), the zone in name (abi.h, NDC_FP_V_SOA). 0, or
 * -EINVAL when nx is not one whole SOA RR.
 */
int ndc_fp_soa_template(const struct ndc_fp_value *nx, struct ndc_fp_value *ret)
{
	const uint8_t *d = nx->data;
	size_t zlen, pos, n = 0, l, rd;
	uint8_t *o = ret->data;

	memset(ret, 0, sizeof(*ret));
	if (nx->ancount || nx->nscount != 1 || nx->arcount || ndc_name_check(d, nx->len, &zlen) ||
	    zlen > NDC_FP_NAME_MAX || zlen + 10 > nx->len || ndc_get16(d + zlen) != NDC_T_SOA ||
	    zlen + 10 + ndc_get16(d + zlen + 8) != nx->len)
		return -EINVAL;
	memcpy(ret->name, d, zlen);
	ret->name_len = (uint8_t)zlen;
	ret->ttl_off[ret->n_ttl++] = 0; /* the owner: the zone itself */
	n = 2;
	memcpy(o + n, d + zlen, 10);
	n += 10;
	rd = n;
	pos = zlen + 10;
	for (int i = 0; i < 2; i++) { /* MNAME, RNAME */
		size_t cut, p = 0;

		if (ndc_name_check(d + pos, nx->len - pos, &l))
			return -EINVAL;
		/* the labels before the zone, when the name ends in it at a label's start */
		cut = l >= zlen && memcmp(d + pos + l - zlen, d, zlen) == 0 ? l - zlen : l;
		while (p < cut)
			p += 1 + (size_t)d[pos + p];
		if (p != cut)
			cut = l;
		memcpy(o + n, d + pos, cut);
		n += cut;
		if (cut != l) {
			ret->ttl_off[ret->n_ttl++] = (uint16_t)n;
			n += 2;
		}
		pos += l;
	}
	if (pos + 20 != nx->len)
		return -EINVAL;
	memcpy(o + n, d + pos, 20);
	n += 20;
	ndc_put16(o + rd - 2, (uint16_t)(n - rd));
	ret->len = (uint16_t)n;
	ret->nscount = 1;
	return 0;
}

/* The data of template tpl for a question (a name) of qlen bytes: its zone pointers set. */
void ndc_fp_soa_fill(const struct ndc_fp_value *tpl, size_t qlen, uint8_t *out)
{
	uint16_t ptr = (uint16_t)(0xc000 | (12 + qlen - tpl->name_len));

	memcpy(out, tpl->data, tpl->len);
	for (unsigned int i = 0; i < tpl->n_ttl; i++)
		ndc_put16(out + tpl->ttl_off[i], ptr);
}

/*
 * Whether v is a NODATA whose authority is the zone's SOA as the template gives it for v's name,
 * byte for byte: then its slot holds the name only (abi.h, NDC_FP_V_SOA). Only answers that never
 * expire: the template's TTL does not count down.
 */
bool ndc_fp_soa_matches(const struct ndc_fp_value *tpl, const struct ndc_fp_value *v)
{
	uint8_t want[NDC_FP_DATA_MAX];

	if (!tpl || v->expire_ns || v->rcode || v->ancount || v->nscount != 1 || v->arcount ||
	    v->n_ttl || v->flags & NDC_FP_V_PASS || v->len != tpl->len ||
	    v->name_len < tpl->name_len ||
	    memcmp(v->name + v->name_len - tpl->name_len, tpl->name, tpl->name_len))
		return false;
	ndc_fp_soa_fill(tpl, v->name_len, want);
	return memcmp(want, v->data, v->len) == 0;
}

/*
 * The answer part of slot image s for v: in its bytes when it fits (by reference with soa: the
 * name alone), else pointing at big b.
 */
void ndc_fp_slot_encode(const struct ndc_fp_value *v, bool in_slot, bool soa, uint32_t b,
			uint32_t sfx, uint32_t plen, struct ndc_fp_slot *s)
{
	size_t data, ttl;

	s->len = 0;
	s->ancount = s->nscount = s->arcount = s->rcode = s->n_ttl = 0;
	memset(s->bytes, 0, sizeof(s->bytes));
	if (soa) {
		s->rcode = v->rcode;
		s->flags = v->flags | NDC_FP_V_SOA | (uint8_t)(sfx << NDC_FP_V_SFX_SHIFT);
		memcpy(s->bytes, v->name, plen);
		return;
	}
	if (!in_slot || !ndc_fp_slot_fits(v, plen, &data, &ttl)) {
		s->flags = v->flags | NDC_FP_V_BIG;
		s->big = b;
		return;
	}
	s->len = v->len;
	s->ancount = (uint8_t)v->ancount;
	s->nscount = (uint8_t)v->nscount;
	s->arcount = (uint8_t)v->arcount;
	s->rcode = v->rcode;
	s->flags = v->flags | (uint8_t)(sfx << NDC_FP_V_SFX_SHIFT);
	memcpy(s->bytes, v->name, plen);
	memcpy(s->bytes + data, v->data, v->len);
	if (v->expire_ns) {
		s->flags |= NDC_FP_V_EXPIRES;
		s->n_ttl = v->n_ttl;
		memcpy(s->bytes + ttl, &v->insert_ns, 8);
		memcpy(s->bytes + ttl + 8, &v->expire_ns, 8);
		memcpy(s->bytes + ttl + 16, v->ttl_off, 2 * (size_t)v->n_ttl);
	}
}

/*
 * The value of a full slot s (its big answer in b when it has one, the NODATA authority template
 * soa for a NODATA by reference). -EIO: s is not consistent, or refers to a template there is not.
 */
int ndc_fp_slot_decode(const struct ndc_fp_slot *s, const struct ndc_fp_value *b,
		       const struct ndc_fp_value *soa, const struct ndc_fp_sfx *x,
		       struct ndc_fp_value *ret)
{
	uint32_t sfx = (s->flags & NDC_FP_V_SFX) >> NDC_FP_V_SFX_SHIFT, slen = 0;
	size_t data, ttl;

	if (s->flags & NDC_FP_V_BIG) {
		if (!b || sfx)
			return -EIO;
		*ret = *b;
		return 0;
	}
	if (s->name_len > NDC_FP_NAME_MAX)
		return -EIO;
	if (sfx) {
		slen = x ? x->len[sfx - 1] : 0;
		if (!slen || slen > s->name_len)
			return -EIO; /* a suffix there is not */
	}
	data = round8(s->name_len - slen);
	ttl = data + round8(s->len);
	if (s->flags & NDC_FP_V_EXPIRES
		? ttl + 16 + round8(2 * (size_t)s->n_ttl) > NDC_FP_SLOT_BYTES
		: data + s->len > NDC_FP_SLOT_BYTES)
		return -EIO;
	memset(ret, 0, sizeof(*ret));
	ret->len = s->len;
	ret->ancount = s->ancount;
	ret->nscount = s->nscount;
	ret->arcount = s->arcount;
	ret->rcode = s->rcode;
	ret->flags = s->flags & (uint8_t) ~(NDC_FP_V_EXPIRES | NDC_FP_V_BIG | NDC_FP_V_SOA |
					    NDC_FP_V_SFX | NDC_FP_V_RARE);
	ret->name_len = s->name_len;
	memcpy(ret->name, s->bytes, s->name_len - slen);
	if (slen)
		memcpy(ret->name + s->name_len - slen, x->name[sfx - 1], slen);
	if (s->flags & NDC_FP_V_SOA) {
		if (!soa || s->flags & NDC_FP_V_EXPIRES || soa->len > NDC_FP_DATA_MAX ||
		    s->name_len < soa->name_len)
			return -EIO;
		ret->len = soa->len;
		ret->nscount = 1;
		ndc_fp_soa_fill(soa, s->name_len, ret->data);
		return 0;
	}
	memcpy(ret->data, s->bytes + data, s->len);
	if (s->flags & NDC_FP_V_EXPIRES) {
		ret->n_ttl = s->n_ttl;
		memcpy(&ret->insert_ns, s->bytes + ttl, 8);
		memcpy(&ret->expire_ns, s->bytes + ttl + 8, 8);
		memcpy(ret->ttl_off, s->bytes + ttl + 16, 2 * (size_t)s->n_ttl);
	}
	return 0;
}

/* Records a big answer of len bytes of data (n_ttl TTL offsets) takes. */
uint32_t ndc_fp_ext_count(uint32_t len, uint32_t n_ttl)
{
	return (ndc_fp_ext_bytes(len, n_ttl) + NDC_FP_EXT_BYTES - 1) / NDC_FP_EXT_BYTES;
}

/*
 * The big answer held in the records from p (avail of them there at most) into ret, zero past what
 * they hold: 0, or -EIO when its lengths say it is not one.
 */
int ndc_fp_ext_decode(const struct ndc_fp_ext *p, uint32_t avail, struct ndc_fp_value *ret)
{
	const struct ndc_fp_value *head = (const struct ndc_fp_value *)p;

	if (head->len > NDC_FP_DATA_MAX || head->n_ttl > NDC_FP_TTL_MAX ||
	    ndc_fp_ext_count(head->len, head->n_ttl) > avail)
		return -EIO;
	memset(ret, 0, sizeof(*ret));
	memcpy(ret, p, ndc_fp_ext_bytes(head->len, head->n_ttl));
	return 0;
}
