// SPDX-License-Identifier: MIT
/*
 * The differential fuzzer's cases: queries built around the names of the table (and of the
 * cache), mutated at every layer a parser reads: the name (0x20 case, labels added and removed,
 * a character changed, too long), the type and class, the header flags and counts, EDNS (sizes,
 * version, DO, options well-formed or not), the message's length (cut, trailing bytes, random
 * bits flipped, random bytes); and the frame (IPv4 or IPv6, an 802.1Q tag, Ethernet padding, IP
 * options, fragments, another address or port, UDP lengths that disagree).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ndc/abi.h>

#include "fuzz_diff.h"

const uint8_t fz_node4[16] = {169, 254, 20, 10};
const uint8_t fz_node6[16] = {0xfe, 0x80, [14] = 0x20, [15] = 0x10};
static const uint8_t client4[16] = {169, 254, 1, 2};
static const uint8_t client6[16] = {0xfe, 0x80, [15] = 0x02};
static const uint8_t other4[16] = {169, 254, 20, 11};
static const uint8_t other6[16] = {0xfe, 0x80, [14] = 0x20, [15] = 0x11};
static const uint8_t client_mac[6] = {0x02, 0, 0, 0, 0, 0x02};
static const uint8_t node_mac[6] = {0x02, 0, 0, 0, 0, 0x01};

#define DNS_MAX 1400 /* a query's room in the frame (NDC_PKT_MAX) */

uint64_t fz_rand(struct fz_rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

int fz_names_add(struct fz_names *ns, const uint8_t *lname, size_t len, uint16_t qtype)
{
	if (len == 0 || len > NDC_NAME_MAX)
		return -EINVAL;
	if (ns->n == ns->cap) {
		size_t cap = ns->cap ? ns->cap * 2 : 256;
		struct fz_name *v = realloc(ns->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		ns->v = v;
		ns->cap = cap;
	}
	memcpy(ns->v[ns->n].name, lname, len);
	ns->v[ns->n].len = (uint8_t)len;
	ns->v[ns->n].qtype = qtype;
	ns->n++;
	return 0;
}

void fz_names_free(struct fz_names *ns)
{
	free(ns->v);
	memset(ns, 0, sizeof(*ns));
}

/* ---------------------------------------------------------------------------------------------
 * Names.
 */
struct name {
	uint8_t b[NDC_NAME_MAX];
	size_t len;
};

static void note(struct fz_case *c, const char *s)
{
	size_t n = strlen(c->what);

	snprintf(c->what + n, sizeof(c->what) - n, "%s%s", n ? ", " : "", s);
}

/* A label: mostly what names hold, now and then any byte at all, or the longest allowed. */
static size_t random_label(struct fz_rng *r, uint8_t *out)
{
	static const char alnum[] = "abcdefghijklmnopqrstuvwxyz0123456789-_";
	size_t n = fz_chance(r, 3) ? NDC_LABEL_MAX : 1 + fz_below(r, 12);
	bool any = fz_chance(r, 5);

	for (size_t i = 0; i < n; i++)
		out[i] = any ? (uint8_t)fz_rand(r) : (uint8_t)alnum[fz_below(r, sizeof(alnum) - 1)];
	return n;
}

static void prepend_label(struct name *n, const uint8_t *label, size_t llen)
{
	if (n->len + llen + 1 > NDC_NAME_MAX)
		return;
	memmove(n->b + llen + 1, n->b, n->len);
	n->b[0] = (uint8_t)llen;
	memcpy(n->b + 1, label, llen);
	n->len += llen + 1;
}

static void prepend_random(struct fz_rng *r, struct name *n)
{
	uint8_t l[NDC_LABEL_MAX];

	prepend_label(n, l, random_label(r, l));
}

static void drop_label(struct name *n)
{
	size_t k = (size_t)n->b[0] + 1;

	if (n->len <= 1 || k >= n->len)
		return;
	memmove(n->b, n->b + k, n->len - k);
	n->len -= k;
}

static void from_text(struct name *n, const char *text)
{
	if (ndc_name_from_text(text, n->b, sizeof(n->b), &n->len))
		n->len = 0;
}

static const struct fz_name *pick(struct fz_rng *r, const struct fz_names *ns)
{
	return ns->n ? &ns->v[fz_below(r, (uint32_t)ns->n)] : NULL;
}

static uint16_t random_qtype(struct fz_rng *r)
{
	/* From 128 on: meta and reserved (abi.h ndc_qtype_verdict), never the name's NODATA. */
	static const uint16_t types[] = {
	    NDC_T_A,	NDC_T_AAAA, NDC_T_SRV, NDC_T_PTR, NDC_T_TXT,  NDC_T_ANY,   NDC_T_CNAME,
	    NDC_T_SOA,	NDC_T_NS,   NDC_T_MX,  NDC_T_A,	  NDC_T_AAAA, NDC_T_DNAME, NDC_T_OPT,
	    NDC_T_AXFR, NDC_T_IXFR, 0,	       65535,	  99,	      64,	   65,
	    128,	200,	    249,       250,	  253,	      254,	   NDC_T_OPT,
	};
	uint32_t i = fz_below(r, sizeof(types) / sizeof(types[0]) + 2);

	return i < sizeof(types) / sizeof(types[0]) ? types[i] : (uint16_t)fz_rand(r);
}

/* The question's name and type. */
static void pick_question(struct fz_rng *r, const struct fz_corpus *c, struct name *n,
			  uint16_t *qtype, struct fz_case *fc)
{
	const struct fz_name *e = pick(r, &c->table);
	uint32_t p = fz_below(r, 100);
	char text[128];

	n->len = 0;
	*qtype = random_qtype(r);
	if (p < 55 && e) {
		memcpy(n->b, e->name, e->len);
		n->len = e->len;
		if (fz_chance(r, 60))
			*qtype = e->qtype;
		note(fc, "table name");
	} else if (p < 65 && c->cached.n) {
		e = pick(r, &c->cached);
		memcpy(n->b, e->name, e->len);
		n->len = e->len;
		if (fz_chance(r, 70))
			*qtype = e->qtype;
		note(fc, "cached name");
	} else if (p < 78 && e) {
		/* not there, under the zone: a label in front of a name that is, or a search path
		 */
		memcpy(n->b, e->name, e->len);
		n->len = e->len;
		for (uint32_t k = fz_below(r, 3); k > 0; k--)
			drop_label(n);
		prepend_random(r, n);
		if (fz_chance(r, 30))
			prepend_random(r, n);
		note(fc, "new name near a table name");
	} else if (p < 82) {
		snprintf(text, sizeof(text), "%u-%u-%u-%u.%s.pod.cluster.local", fz_below(r, 256),
			 fz_below(r, 256), fz_below(r, 256), fz_below(r, 256),
			 fz_chance(r, 50) ? "default" : "shop");
		from_text(n, text);
		note(fc, "pod name");
	} else if (p < 87) {
		snprintf(text, sizeof(text), "%u.%u.%u.10.in-addr.arpa", fz_below(r, 24),
			 fz_chance(r, 80) ? 0 : fz_below(r, 256), 96 + fz_below(r, 2));
		from_text(n, text);
		note(fc, "reverse name");
	} else if (p < 91) {
		static const char *const outside[] = {"www.example.com", "example.com", "com",
						      "api.github.com", "example.org"};
		from_text(n, outside[fz_below(r, 5)]);
		note(fc, "name outside the zone");
	} else if (p < 96) {
		memcpy(n->b, c->zone, c->zone_len);
		n->len = c->zone_len;
		if (fz_chance(r, 50))
			prepend_label(n, (const uint8_t *)"svc", 3);
		note(fc, "the zone or just under it");
	} else {
		n->b[0] = 0;
		n->len = 1;
		for (uint32_t k = fz_below(r, 5); k > 0; k--)
			prepend_random(r, n);
		note(fc, "random labels");
	}
	if (n->len == 0) {
		n->b[0] = 0;
		n->len = 1;
	}
	if (fz_chance(r, 10)) {
		drop_label(n);
		note(fc, "label removed");
	}
	if (fz_chance(r, 10)) {
		prepend_random(r, n);
		note(fc, "label added");
	}
	if (fz_chance(r, 5) && n->len > 2) {
		size_t i = 1 + fz_below(r, (uint32_t)n->len - 2);

		if (n->b[i] >= 'a' && n->b[i] <= 'z')
			n->b[i] = (uint8_t)('a' + (n->b[i] - 'a' + 1) % 26);
		note(fc, "a letter changed");
	}
	if (fz_chance(r, 4)) {
		while (n->len < 120 + fz_below(r, 130) && n->len + 11 <= NDC_NAME_MAX)
			prepend_label(n, (const uint8_t *)"padpadpadp", 10);
		note(fc, "long name");
	}
	if (fz_chance(r, 50)) {
		/* 0x20: letters only (a length byte is at most 63, never a letter) */
		for (size_t i = 0; i < n->len; i++)
			if (((n->b[i] | 0x20) >= 'a' && (n->b[i] | 0x20) <= 'z') &&
			    fz_chance(r, 50))
				n->b[i] ^= 0x20;
		note(fc, "0x20 case");
	}
}

/* ---------------------------------------------------------------------------------------------
 * The DNS message.
 */
static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/* An OPT RR at d (room for it checked by the caller: at most 11 + 64 bytes). */
static size_t opt_rr(struct fz_rng *r, uint8_t *d, struct fz_case *fc)
{
	static const uint16_t sizes[] = {0, 1, 100, 511, 512, 513, 1232, 1233, 1400, 4096, 65535};
	uint32_t p = fz_below(r, 100);
	uint16_t size = fz_chance(r, 90) ? sizes[fz_below(r, 11)] : (uint16_t)fz_rand(r);
	uint8_t ext = fz_chance(r, 95) ? 0 : (uint8_t)fz_rand(r);
	uint8_t ver = fz_chance(r, 90) ? 0 : (fz_chance(r, 50) ? 1 : (uint8_t)fz_rand(r));
	uint16_t flags = fz_chance(r, 15) ? 0x8000 : 0;
	size_t o = 11, rd;

	if (fz_chance(r, 5))
		flags |= (uint16_t)(fz_rand(r) & 0x7fff);
	d[0] = 0;
	put16(d + 1, NDC_T_OPT);
	put16(d + 3, size);
	d[5] = ext;
	d[6] = ver;
	put16(d + 7, flags);
	if (p < 50) {
		note(fc, "EDNS");
	} else if (p < 65) { /* a client cookie, RFC 7873 */
		put16(d + o, 10);
		put16(d + o + 2, 8);
		for (int i = 0; i < 8; i++)
			d[o + 4 + i] = (uint8_t)fz_rand(r);
		o += 12;
		note(fc, "EDNS cookie");
	} else if (p < 75) { /* padding, RFC 7830 */
		uint16_t n = (uint16_t)fz_below(r, 33);

		put16(d + o, 12);
		put16(d + o + 2, n);
		memset(d + o + 4, 0, n);
		o += 4 + n;
		note(fc, "EDNS padding");
	} else if (p < 83) { /* client subnet, RFC 7871 */
		static const uint8_t ecs[] = {0, 8, 0, 7, 0, 1, 24, 0, 192, 0, 2};

		memcpy(d + o, ecs, sizeof(ecs));
		o += sizeof(ecs);
		note(fc, "EDNS client subnet");
	} else if (p < 90) {
		uint16_t n = (uint16_t)fz_below(r, 9);

		put16(d + o, (uint16_t)fz_rand(r));
		put16(d + o + 2, n);
		for (uint16_t i = 0; i < n; i++)
			d[o + 4 + i] = (uint8_t)fz_rand(r);
		o += 4 + n;
		note(fc, "EDNS unknown option");
	} else {
		/* an option whose length runs past the RDATA */
		put16(d + o, 10);
		put16(d + o + 2, (uint16_t)(9 + fz_below(r, 100)));
		memset(d + o + 4, 0xab, 8);
		o += 12;
		note(fc, "EDNS option overruns");
	}
	rd = o - 11;
	put16(d + 9, (uint16_t)rd);
	if (ver || ext || (flags & 0x7fff))
		note(fc, "EDNS version/flags");
	if (flags & 0x8000)
		note(fc, "DO");
	return o;
}

/* The whole message into d (DNS_MAX bytes); returns its length. */
static size_t build_query(struct fz_rng *r, const struct fz_corpus *c, uint8_t *d,
			  struct fz_case *fc)
{
	static const uint16_t odd_bits[] = {0x8000, 0x0800, 0x2800, 0x0400, 0x0200,
					    0x0080, 0x0040, 0x0020, 0x0010, 0x0001};
	static const uint16_t classes[] = {3, 4, 254, 255, 0};
	uint16_t flags = 0x0100, qtype, qclass = NDC_C_IN, ar = 0;
	uint32_t p = fz_below(r, 100);
	struct name n;
	size_t len;

	if (fz_chance(r, 4)) { /* bytes, nothing else */
		len = fz_below(r, 400);
		for (size_t i = 0; i < len; i++)
			d[i] = (uint8_t)fz_rand(r);
		note(fc, "random bytes");
		return len;
	}
	pick_question(r, c, &n, &qtype, fc);
	if (p < 15) {
		flags = 0;
	} else if (p < 25) {
		flags |= odd_bits[fz_below(r, sizeof(odd_bits) / sizeof(odd_bits[0]))];
		note(fc, "header flags");
	} else if (p < 28) {
		flags = (uint16_t)fz_rand(r);
		note(fc, "random header flags");
	}
	if (fz_chance(r, 6)) {
		qclass = fz_chance(r, 80) ? classes[fz_below(r, 5)] : (uint16_t)fz_rand(r);
		note(fc, "class not IN");
	}
	put16(d, (uint16_t)fz_rand(r));
	put16(d + 2, flags);
	put16(d + 4, 1);
	put16(d + 6, 0);
	put16(d + 8, 0);
	memcpy(d + 12, n.b, n.len);
	len = 12 + n.len;
	put16(d + len, qtype);
	put16(d + len + 2, qclass);
	len += 4;
	if (fz_chance(r, 40)) {
		len += opt_rr(r, d + len, fc);
		ar = 1;
	}
	put16(d + 10, ar);

	/* the message's structure */
	if (fz_chance(r, 12)) {
		switch (fz_below(r, 9)) {
		case 0:
			put16(d + 4, fz_chance(r, 50) ? 0 : (fz_chance(r, 50) ? 2 : 65535));
			note(fc, "QDCOUNT != 1");
			break;
		case 1:
			put16(d + 6 + 2 * fz_below(r, 2), 1);
			note(fc, "AN or NS count without RRs");
			break;
		case 2:
			if (ar) { /* a second OPT (FORMERR, RFC 6891 6.1.1) */
				memcpy(d + len, d + len - (len - 16 - n.len), len - 16 - n.len);
				len += len - 16 - n.len;
				put16(d + 10, 2);
				note(fc, "two OPTs");
			} else {
				put16(d + 10, 1);
				note(fc, "ARCOUNT without RR");
			}
			break;
		case 3:
			len = fz_below(r, (uint32_t)len);
			note(fc, "cut short");
			break;
		case 4:
			for (uint32_t k = 1 + fz_below(r, 16); k > 0 && len < DNS_MAX; k--)
				d[len++] = (uint8_t)fz_rand(r);
			note(fc, "trailing bytes");
			break;
		case 5:
		case 6:
			for (uint32_t k = 1 + fz_below(r, 3); k > 0 && len; k--)
				d[fz_below(r, (uint32_t)len)] ^= (uint8_t)(1u << fz_below(r, 8));
			note(fc, "bits flipped");
			break;
		case 7: /* a compression pointer as the question's name */
			d[12] = 0xc0;
			d[13] = fz_chance(r, 50) ? 12 : (uint8_t)fz_below(r, 12);
			memmove(d + 14, d + 12 + n.len, len - 12 - n.len);
			len -= n.len - 2;
			note(fc, "pointer in the question");
			break;
		default:
			if (ar) {
				put16(d + 10, 0);
				note(fc, "OPT not counted");
			}
			break;
		}
	}
	return len;
}

/* ---------------------------------------------------------------------------------------------
 * The frame.
 */
int fz_gen_case(uint64_t seed, uint64_t index, const struct fz_corpus *c, struct fz_case *ret)
{
	struct fz_rng r = {.s = seed};
	struct ndc_pkt_addrs a = {.sport = 0};
	struct ndc_pkt_opts o = {.protocol = 0};
	uint8_t dns[DNS_MAX + 128];
	size_t dlen;

	/* each case from (seed, index) alone: any one can be made again */
	r.s = fz_rand(&r) ^ (index * 0xd1342543de82ef95ull);
	ret->what[0] = 0;
	dlen = build_query(&r, c, dns, ret);
	a.v6 = fz_chance(&r, 30);
	a.sport = (uint16_t)(1024 + fz_below(&r, 64000));
	a.dport = FZ_PORT;
	memcpy(a.src_mac, client_mac, 6);
	memcpy(a.dst_mac, node_mac, 6);
	memcpy(a.saddr, a.v6 ? client6 : client4, 16);
	memcpy(a.daddr, a.v6 ? fz_node6 : fz_node4, 16);
	if (fz_chance(&r, 5)) {
		o.vlan = (uint16_t)(1 + fz_below(&r, 4094));
		note(ret, "802.1Q");
	}
	if (fz_chance(&r, 5)) {
		o.l2_pad = 1 + fz_below(&r, 40);
		note(ret, "Ethernet padding");
	}
	if (fz_chance(&r, 10)) {
		switch (fz_below(&r, 6)) {
		case 0:
			memcpy(a.daddr, a.v6 ? other6 : other4, 16);
			note(ret, "another address");
			break;
		case 1:
			a.dport = fz_chance(&r, 50) ? 5353 : (uint16_t)fz_rand(&r);
			note(ret, "another port");
			break;
		case 2:
			if (a.v6)
				o.ip6_nexthdr = 44;
			else
				o.frag_off =
				    fz_chance(&r, 50) ? 0x2000 : (uint16_t)(1 + fz_below(&r, 100));
			note(ret, "fragment");
			break;
		case 3:
			o.protocol = 6;
			note(ret, "TCP protocol number");
			break;
		case 4:
			o.udp_len_delta = fz_chance(&r, 50) ? -(int)fz_below(&r, 8) - 1
							    : (int)fz_below(&r, 8) + 1;
			note(ret, "UDP length off");
			break;
		default:
			if (!a.v6) {
				o.ihl = 6;
				note(ret, "IPv4 options");
			}
			break;
		}
	}
	if (a.v6)
		note(ret, "IPv6");
	return ndc_pkt_build(&a, &o, dns, dlen, ret->frame, sizeof(ret->frame), &ret->flen);
}

/*
 * The vector set: every name of the table and the cache asked plainly, for its own type and each
 * of these, over IPv4 and IPv6, without and with EDNS. Case index of it, in that order.
 */
static const uint16_t vector_types[] = {NDC_T_A,  NDC_T_AAAA, NDC_T_CNAME, NDC_T_TXT,
					NDC_T_MX, NDC_T_SRV,  NDC_T_PTR,   NDC_T_ANY};
#define VECTOR_TYPES (sizeof(vector_types) / sizeof(vector_types[0]) + 1)

int fz_vector_case(uint64_t index, const struct fz_corpus *c, struct fz_case *ret)
{
	uint64_t per_name = VECTOR_TYPES * 4, k = index / per_name, v = index % per_name;
	struct ndc_pkt_addrs a = {.sport = 40000, .dport = FZ_PORT};
	struct ndc_pkt_opts o = {.protocol = 0};
	struct ndc_pkt_query q = {.id = (uint16_t)index, .flags = 0x0100};
	const struct fz_name *n;
	uint8_t dns[DNS_MAX];
	char text[4 * NDC_NAME_MAX + 1]; /* \DDD escapes: four bytes each */
	size_t dlen;
	int r;

	if (k >= c->table.n + c->cached.n)
		return -ENOENT;
	n = k < c->table.n ? &c->table.v[k] : &c->cached.v[k - c->table.n];
	r = ndc_name_to_text(n->name, n->len, text, sizeof(text));
	if (r < 0)
		return r;
	q.name = text;
	q.qtype = v % VECTOR_TYPES ? vector_types[v % VECTOR_TYPES - 1] : n->qtype;
	if (q.qtype == NDC_FP_QTYPE_OTHER)
		q.qtype = NDC_T_A; /* the other-type entry: a type it answers */
	q.edns_size = v / VECTOR_TYPES % 2 ? 1232 : 0;
	a.v6 = v / VECTOR_TYPES / 2;
	memcpy(a.src_mac, client_mac, 6);
	memcpy(a.dst_mac, node_mac, 6);
	memcpy(a.saddr, a.v6 ? client6 : client4, 16);
	memcpy(a.daddr, a.v6 ? fz_node6 : fz_node4, 16);
	snprintf(ret->what, sizeof(ret->what), "vector: %.100s type %u%s%s", text, q.qtype,
		 q.edns_size ? ", EDNS" : "", a.v6 ? ", IPv6" : "");
	r = ndc_pkt_dns_query(&q, dns, sizeof(dns), &dlen);
	if (r)
		return r;
	return ndc_pkt_build(&a, &o, dns, dlen, ret->frame, sizeof(ret->frame), &ret->flen);
}

/* ---------------------------------------------------------------------------------------------
 * What the kernel would give the socket.
 */
static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

bool fz_frame_payload(const uint8_t *f, size_t len, const uint8_t **ret, size_t *ret_len)
{
	size_t l3 = 14, l4, iplen;
	uint16_t type;
	uint8_t proto;

	if (len < l3)
		return false;
	type = get16(f + 12);
	if (type == 0x8100) {
		if (len < 18)
			return false;
		type = get16(f + 16);
		l3 = 18;
	}
	if (type == 0x0800) {
		if (len < l3 + 20 || f[l3] >> 4 != 4 || (f[l3] & 15) < 5)
			return false;
		iplen = get16(f + l3 + 2);
		l4 = l3 + (size_t)(f[l3] & 15) * 4;
		proto = f[l3 + 9];
		/* a fragment reaches no socket before reassembly */
		if ((get16(f + l3 + 6) & 0x3fff) || memcmp(f + l3 + 16, fz_node4, 4) ||
		    iplen < l4 - l3 || l3 + iplen > len)
			return false;
		iplen -= l4 - l3;
	} else if (type == 0x86dd) {
		if (len < l3 + 40 || f[l3] >> 4 != 6)
			return false;
		iplen = get16(f + l3 + 4);
		l4 = l3 + 40;
		proto = f[l3 + 6]; /* an extension header first: not a plain datagram here */
		if (memcmp(f + l3 + 24, fz_node6, 16) || l4 + iplen > len)
			return false;
	} else {
		return false;
	}
	/* the fast path and the stack both take only a UDP length equal to the IP payload's */
	if (proto != 17 || iplen < 8 || get16(f + l4 + 4) != iplen || get16(f + l4 + 2) != FZ_PORT)
		return false;
	*ret = f + l4 + 8;
	*ret_len = iplen - 8;
	return true;
}
