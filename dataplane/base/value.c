// SPDX-License-Identifier: MIT
/*
 * The table's key and value (include/ndc/abi.h) from an answer: the one conversion every table
 * of that format uses, the BPF fast path's and the DPDK backend's, and the publisher's keys.
 */
#include <errno.h>
#include <string.h>

#include <ndc/entry.h>

int ndc_fastpath_key(const uint8_t *lname, size_t nlen, uint16_t qtype, struct ndc_fp_key *ret)
{
	if (nlen == 0)
		return -EINVAL;
	if (nlen > NDC_FP_NAME_MAX)
		return -ENAMETOOLONG;
	/* The kernel compares whole keys: the padding must be zero. */
	memset(ret, 0, sizeof(*ret));
	ret->hash = ndc_fp_name_hash(lname, (uint32_t)nlen);
	ret->qtype = qtype;
	ret->name_len = (uint8_t)nlen;
	ret->region = ndc_fp_key_region(lname, (uint32_t)nlen, qtype);
	return 0;
}

/*
 * Skips a possibly compressed name at data[*pos]. A pointer ends the name (RFC 1035 4.1.4);
 * label types 01 and 10 (RFC 6891 5) are not valid here. *ret_ptr says whether it had a pointer.
 */
static int skip_name(const uint8_t *data, size_t len, size_t *pos, bool *ret_ptr)
{
	size_t p = *pos, wire = 0;

	*ret_ptr = false;
	for (;;) {
		if (p >= len)
			return -EINVAL;
		uint8_t b = data[p];
		if ((b & 0xc0) == 0xc0) {
			if (p + 2 > len)
				return -EINVAL;
			*pos = p + 2;
			*ret_ptr = true;
			return 0;
		}
		if (b & 0xc0)
			return -EINVAL;
		wire += 1u + b;
		if (wire > NDC_NAME_MAX)
			return -EINVAL;
		if (b == 0) {
			*pos = p + 1;
			return 0;
		}
		p += 1u + b;
	}
}

/* Whether an RR's RDATA holds names that may be compressed (RFC 3597 4), and where. */
static int rdata_has_pointer(const uint8_t *rd, size_t rdlen, uint16_t type, bool *ret_ptr)
{
	size_t pos = 0;
	bool ptr = false;
	int n_names, r;

	switch (type) {
	case NDC_T_NS:
	case NDC_T_CNAME:
	case NDC_T_PTR:
		n_names = 1;
		break;
	case NDC_T_MX:
		pos = 2;
		n_names = 1;
		break;
	case NDC_T_SOA:
		n_names = 2;
		break;
	default:
		*ret_ptr = false;
		return 0;
	}
	*ret_ptr = false;
	for (int i = 0; i < n_names; i++) {
		r = skip_name(rd, rdlen, &pos, &ptr);
		if (r < 0)
			return r;
		*ret_ptr |= ptr;
	}
	return 0;
}

/*
 * Walks the RRs of data: exactly n_rr of them must fill it. Records TTL offsets when ttl_off is
 * not NULL; with no_ptrs, any compression pointer is -EINVAL (an answer that serves any name).
 */
static int walk_rrs(const uint8_t *data, size_t len, unsigned int n_rr, uint16_t *ttl_off,
		    bool no_ptrs)
{
	size_t pos = 0;
	bool ptr;
	int r;

	for (unsigned int i = 0; i < n_rr; i++) {
		r = skip_name(data, len, &pos, &ptr);
		if (r < 0)
			return r;
		if (no_ptrs && ptr)
			return -EINVAL;
		/* type, class, TTL, RDLENGTH (RFC 1035 4.1.3) */
		if (len - pos < 10)
			return -EINVAL;
		uint16_t type = ndc_get16(data + pos);
		size_t rdlen = ndc_get16(data + pos + 8);
		if (ttl_off)
			ttl_off[i] = (uint16_t)(pos + 4);
		pos += 10;
		if (len - pos < rdlen)
			return -EINVAL;
		if (no_ptrs) {
			r = rdata_has_pointer(data + pos, rdlen, type, &ptr);
			if (r < 0)
				return r;
			if (ptr)
				return -EINVAL;
		}
		pos += rdlen;
	}
	return pos == len ? 0 : -EINVAL;
}

int ndc_fastpath_value(const struct ndc_answer *a, uint32_t ttl_s, uint64_t now_ns,
		       struct ndc_fp_value *ret)
{
	unsigned int n_rr = (unsigned int)a->ancount + a->nscount + a->arcount;
	int r;

	if (a->len > NDC_FP_DATA_MAX)
		return -E2BIG;
	memset(ret, 0, sizeof(*ret));
	ret->len = a->len;
	ret->ancount = a->ancount;
	ret->nscount = a->nscount;
	ret->arcount = a->arcount;
	ret->rcode = a->rcode & 0x0f;
	ret->flags = a->aa ? NDC_FP_V_AA : 0;
	memcpy(ret->data, a->data, a->len);
	if (ttl_s == 0)
		return 0; /* cluster record: TTLs never change, nothing to count down */
	if (n_rr > NDC_FP_TTL_MAX)
		return -E2BIG;
	r = walk_rrs(a->data, a->len, n_rr, ret->ttl_off, false);
	if (r < 0)
		return r;
	ret->n_ttl = (uint8_t)n_rr;
	ret->insert_ns = now_ns;
	ret->expire_ns = now_ns + (uint64_t)ttl_s * 1000000000ull;
	return 0;
}

int ndc_fastpath_nx_value(const struct ndc_answer *nx, struct ndc_fp_value *ret)
{
	int r = ndc_fastpath_value(nx, 0, 0, ret);

	if (r < 0)
		return r;
	return walk_rrs(nx->data, nx->len, (unsigned int)nx->ancount + nx->nscount + nx->arcount,
			NULL, true);
}
