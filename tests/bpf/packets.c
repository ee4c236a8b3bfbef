// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include <ndc/dns_wire.h>

#include "packets.h"

#define ETH_LEN 14
#define VLAN_LEN 4
#define IP4_LEN 20
#define IP6_LEN 40
#define UDP_LEN 8
#define PROTO_UDP 17

const uint8_t ndc_pkt_node4[16] = {169, 254, 20, 10};
const uint8_t ndc_pkt_client4[16] = {169, 254, 1, 2};
const uint8_t ndc_pkt_other4[16] = {169, 254, 20, 11};
const uint8_t ndc_pkt_node6[16] = {0xfe, 0x80, [14] = 0x20, [15] = 0x10};
const uint8_t ndc_pkt_client6[16] = {0xfe, 0x80, [15] = 0x02};
const uint8_t ndc_pkt_client_mac[6] = {0x02, 0, 0, 0, 0, 0x02};
const uint8_t ndc_pkt_node_mac[6] = {0x02, 0, 0, 0, 0, 0x01};

/* RFC 1071 sum of big-endian 16-bit words; an odd last byte is padded with zero. */
static uint32_t sum16(const uint8_t *p, size_t n, uint32_t sum)
{
	for (size_t i = 0; i + 1 < n; i += 2)
		sum += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (n & 1)
		sum += (uint32_t)p[n - 1] << 8;
	return sum;
}

static uint16_t fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)sum;
}

/* Sum of the pseudo-header (RFC 768 / RFC 8200 8.1) and the UDP datagram as it is. */
static uint32_t udp_sum(bool v6, const uint8_t *saddr, const uint8_t *daddr, const uint8_t *udp,
			size_t ulen)
{
	uint32_t sum = 0;

	sum = sum16(saddr, v6 ? 16 : 4, sum);
	sum = sum16(daddr, v6 ? 16 : 4, sum);
	sum += PROTO_UDP;
	sum += (uint32_t)ulen;
	return sum16(udp, ulen, sum);
}

int ndc_pkt_build(const struct ndc_pkt_addrs *a, const struct ndc_pkt_opts *o,
		  const uint8_t *payload, size_t plen, uint8_t *out, size_t cap, size_t *ret_len)
{
	static const struct ndc_pkt_opts none;
	uint8_t proto, ihl;
	size_t l3, l4, ext = 0, iplen, total;
	uint8_t *ip, *udp;

	if (!o)
		o = &none;
	proto = o->protocol ? o->protocol : PROTO_UDP;
	ihl = o->ihl ? o->ihl : 5;
	l3 = ETH_LEN + (o->vlan ? VLAN_LEN : 0);
	if (a->v6 && o->ip6_nexthdr)
		ext = 8; /* one 8-byte extension header (fragment header layout) */
	l4 = l3 + (a->v6 ? IP6_LEN + ext : (size_t)ihl * 4);
	iplen = l4 - l3 + UDP_LEN + plen;
	total = l3 + iplen + o->l2_pad;
	if (total > cap)
		return -ENOSPC;
	memset(out, 0, total);

	memcpy(out, a->dst_mac, 6);
	memcpy(out + 6, a->src_mac, 6);
	if (o->vlan) {
		ndc_put16(out + 12, 0x8100);
		ndc_put16(out + 14, o->vlan & 0x0fff);
		ndc_put16(out + 16, a->v6 ? 0x86dd : 0x0800);
	} else {
		ndc_put16(out + 12, a->v6 ? 0x86dd : 0x0800);
	}

	ip = out + l3;
	udp = out + l4;
	if (a->v6) {
		ip[0] = 0x60;
		ndc_put16(ip + 4, (uint16_t)(iplen - IP6_LEN));
		ip[6] = o->ip6_nexthdr ? o->ip6_nexthdr : proto;
		ip[7] = 64;
		memcpy(ip + 8, a->saddr, 16);
		memcpy(ip + 24, a->daddr, 16);
		if (ext)
			ip[IP6_LEN] = proto; /* the extension header's next header */
	} else {
		ip[0] = (uint8_t)(0x40 | ihl);
		ndc_put16(ip + 2, (uint16_t)iplen);
		ndc_put16(ip + 4, 0x1234);
		ndc_put16(ip + 6, o->frag_off);
		ip[8] = 64;
		ip[9] = proto;
		memcpy(ip + 12, a->saddr, 4);
		memcpy(ip + 16, a->daddr, 4);
		for (size_t i = IP4_LEN; i < (size_t)ihl * 4; i++)
			ip[i] = 1; /* NOP options */
		ndc_put16(ip + 10, (uint16_t)~fold(sum16(ip, (size_t)ihl * 4, 0)));
	}

	ndc_put16(udp, a->sport);
	ndc_put16(udp + 2, a->dport);
	ndc_put16(udp + 4, (uint16_t)((int)(UDP_LEN + plen) + o->udp_len_delta));
	memcpy(udp + UDP_LEN, payload, plen);
	if (proto == PROTO_UDP) {
		uint16_t c =
		    (uint16_t)~fold(udp_sum(a->v6, a->saddr, a->daddr, udp, UDP_LEN + plen));

		ndc_put16(udp + 6, c ? c : 0xffff);
	}
	*ret_len = total;
	return 0;
}

int ndc_pkt_dns_query(const struct ndc_pkt_query *q, uint8_t *out, size_t cap, size_t *ret_len)
{
	uint8_t name[NDC_NAME_MAX];
	struct ndc_wbuf w;
	size_t nlen;
	int err;

	err = ndc_name_from_text(q->name, name, sizeof(name), &nlen);
	if (err)
		return err;
	ndc_wbuf_init(&w, out, cap);
	ndc_wbuf_u16(&w, q->id);
	ndc_wbuf_u16(&w, q->flags);
	ndc_wbuf_u16(&w, 1);
	ndc_wbuf_u16(&w, 0);
	ndc_wbuf_u16(&w, 0);
	ndc_wbuf_u16(&w, q->edns_size ? 1 : 0);
	ndc_wbuf_bytes(&w, name, nlen);
	ndc_wbuf_u16(&w, q->qtype);
	ndc_wbuf_u16(&w, q->qclass ? q->qclass : NDC_C_IN);
	if (q->edns_size) {
		ndc_wbuf_u8(&w, 0);
		ndc_wbuf_u16(&w, NDC_T_OPT);
		ndc_wbuf_u16(&w, q->edns_size);
		ndc_wbuf_u32(&w, (uint32_t)q->edns_version << 16 | q->edns_flags);
		ndc_wbuf_u16(&w, (uint16_t)q->opt_len);
		ndc_wbuf_bytes(&w, q->opts, q->opt_len);
	}
	if (w.err)
		return w.err;
	*ret_len = w.len;
	return 0;
}

void ndc_pkt_mut_set_qr(uint8_t *d, size_t *l)
{
	(void)l;
	d[2] |= 0x80;
}

void ndc_pkt_mut_set_opcode(uint8_t *d, size_t *l)
{
	(void)l;
	d[2] |= 0x10; /* STATUS */
}

void ndc_pkt_mut_qd2(uint8_t *d, size_t *l)
{
	(void)l;
	d[5] = 2;
}

void ndc_pkt_mut_qd0(uint8_t *d, size_t *l)
{
	(void)l;
	d[5] = 0;
}

void ndc_pkt_mut_an1(uint8_t *d, size_t *l)
{
	(void)l;
	d[7] = 1;
}

void ndc_pkt_mut_ns1(uint8_t *d, size_t *l)
{
	(void)l;
	d[9] = 1;
}

void ndc_pkt_mut_ar2(uint8_t *d, size_t *l)
{
	(void)l;
	d[11] = 2;
}

void ndc_pkt_mut_trailing(uint8_t *d, size_t *l)
{
	d[(*l)++] = 0;
}

void ndc_pkt_mut_header_only(uint8_t *d, size_t *l)
{
	(void)d;
	*l = 12;
}

void ndc_pkt_mut_short_header(uint8_t *d, size_t *l)
{
	(void)d;
	*l = 11;
}

void ndc_pkt_mut_cut_name(uint8_t *d, size_t *l)
{
	(void)d;
	*l = 12 + 5;
}

void ndc_pkt_mut_cut_qclass(uint8_t *d, size_t *l)
{
	(void)d;
	*l -= 2;
}

void ndc_pkt_mut_label64(uint8_t *d, size_t *l)
{
	(void)l;
	d[12] = 64;
}

/* Nothing valid to point at: the header is no name. */
void ndc_pkt_mut_pointer_name(uint8_t *d, size_t *l)
{
	d[12] = 0xc0;
	d[13] = 0x0c;
	memmove(d + 14, d + *l - 4, 4);
	*l = 18;
}

void ndc_pkt_mut_pointer_tail(uint8_t *d, size_t *l)
{
	uint8_t tail[4];

	memcpy(tail, d + *l - 4, 4);
	d[12] = 1;
	d[13] = 'a';
	d[14] = 0xc0;
	d[15] = 0x0c;
	memcpy(d + 16, tail, 4);
	*l = 20;
}

void ndc_pkt_mut_ar_not_opt(uint8_t *d, size_t *l)
{
	static const uint8_t rr[] = {0, 0, 1, 0, 1, 0, 0, 0, 5, 0, 4, 10, 0, 0, 1};

	d[11] = 1;
	memcpy(d + *l, rr, sizeof(rr));
	*l += sizeof(rr);
}

void ndc_pkt_mut_opt_owner(uint8_t *d, size_t *l)
{
	uint8_t opt[11];

	memcpy(opt, d + *l - 11, 11);
	d[*l - 11] = 1;
	d[*l - 10] = 'x';
	d[*l - 9] = 0;
	memcpy(d + *l - 8, opt + 1, 10);
	*l += 2;
}

int ndc_pkt_parse(const uint8_t *f, size_t len, struct ndc_pkt_parsed *r)
{
	size_t l3 = ETH_LEN, l4, ulen;
	uint16_t type;
	const uint8_t *ip, *udp;

	memset(r, 0, sizeof(*r));
	if (len < ETH_LEN)
		return -EBADMSG;
	memcpy(r->dst_mac, f, 6);
	memcpy(r->src_mac, f + 6, 6);
	type = ndc_get16(f + 12);
	if (type == 0x8100) {
		if (len < ETH_LEN + VLAN_LEN)
			return -EBADMSG;
		type = ndc_get16(f + 16);
		l3 += VLAN_LEN;
	}
	ip = f + l3;
	if (type == 0x0800) {
		if (len - l3 < IP4_LEN || (ip[0] & 0x0f) != 5 || ip[9] != PROTO_UDP ||
		    ndc_get16(ip + 2) > len - l3 || ndc_get16(ip + 2) < IP4_LEN)
			return -EBADMSG;
		r->l2_pad = len - l3 - ndc_get16(ip + 2);
		r->ttl = ip[8];
		memcpy(r->saddr, ip + 12, 4);
		memcpy(r->daddr, ip + 16, 4);
		r->ip_csum_ok = fold(sum16(ip, IP4_LEN, 0)) == 0xffff;
		l4 = l3 + IP4_LEN;
	} else if (type == 0x86dd) {
		if (len - l3 < IP6_LEN || ip[6] != PROTO_UDP ||
		    ndc_get16(ip + 4) > len - l3 - IP6_LEN)
			return -EBADMSG;
		r->l2_pad = len - l3 - IP6_LEN - ndc_get16(ip + 4);
		r->v6 = true;
		r->ttl = ip[7];
		memcpy(r->saddr, ip + 8, 16);
		memcpy(r->daddr, ip + 24, 16);
		r->ip_csum_ok = true;
		l4 = l3 + IP6_LEN;
	} else {
		return -EBADMSG;
	}
	udp = f + l4;
	if (len - l4 < UDP_LEN)
		return -EBADMSG;
	ulen = ndc_get16(udp + 4);
	if (ulen != len - l4 - r->l2_pad)
		return -EBADMSG;
	r->sport = ndc_get16(udp);
	r->dport = ndc_get16(udp + 2);
	r->udp_csum = ndc_get16(udp + 6);
	if (r->udp_csum == 0)
		r->udp_csum_ok = !r->v6; /* RFC 768: none; RFC 8200 8.1: mandatory over IPv6 */
	else
		r->udp_csum_ok = fold(udp_sum(r->v6, r->saddr, r->daddr, udp, ulen)) == 0xffff;
	r->payload = udp + UDP_LEN;
	r->plen = ulen - UDP_LEN;
	return 0;
}

int ndc_pkt_object_from_env(const char *var, struct iovec *ret)
{
	const char *path = getenv(var);
	FILE *f;
	long n;
	int err = 0;

	ret->iov_base = NULL;
	ret->iov_len = 0;
	if (!path || !*path)
		return 0;
	f = fopen(path, "rb");
	if (!f)
		return -errno;
	if (fseek(f, 0, SEEK_END) || (n = ftell(f)) <= 0 || fseek(f, 0, SEEK_SET)) {
		err = -EIO;
		goto out;
	}
	ret->iov_base = malloc((size_t)n);
	if (!ret->iov_base) {
		err = -ENOMEM;
		goto out;
	}
	if (fread(ret->iov_base, 1, (size_t)n, f) != (size_t)n) {
		free(ret->iov_base);
		ret->iov_base = NULL;
		err = -EIO;
		goto out;
	}
	ret->iov_len = (size_t)n;
out:
	fclose(f);
	return err;
}
