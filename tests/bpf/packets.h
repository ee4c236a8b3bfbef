/* SPDX-License-Identifier: MIT */
/*
 * Test packets for BPF_PROG_TEST_RUN: Ethernet + IPv4/IPv6 + UDP frames around a payload (DNS
 * queries built here too), and the reverse: a frame taken apart with its checksums verified
 * independently of the BPF code (RFC 1071 over the bytes, pseudo-header included).
 */
#ifndef NDC_TEST_PACKETS_H
#define NDC_TEST_PACKETS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NDC_PKT_MAX 2048 /* room for any frame the tests build or the fast path returns */

/*
 * The test network of the answer tests (BPF and DPDK): the node-local address the answer table is
 * configured with, a client, another address of the node's subnet; IPv6 link-local. 16 bytes each
 * (IPv4: the first 4), as struct ndc_pkt_addrs takes them.
 */
extern const uint8_t ndc_pkt_node4[16];
extern const uint8_t ndc_pkt_client4[16];
extern const uint8_t ndc_pkt_other4[16];
extern const uint8_t ndc_pkt_node6[16];
extern const uint8_t ndc_pkt_client6[16];
extern const uint8_t ndc_pkt_client_mac[6];
extern const uint8_t ndc_pkt_node_mac[6];

struct ndc_pkt_addrs {
	bool v6;
	uint8_t src_mac[6];
	uint8_t dst_mac[6];
	uint8_t saddr[16]; /* IPv4: first 4 bytes */
	uint8_t daddr[16];
	uint16_t sport; /* host order */
	uint16_t dport;
};

/* Frame options for odd packets: all zero gives a plain query datagram. */
struct ndc_pkt_opts {
	uint8_t protocol;    /* 0: UDP (17); e.g. 6 for a TCP-looking packet */
	uint16_t frag_off;   /* IPv4 flags + fragment offset, host order (0x2000: MF) */
	uint8_t ihl;	     /* 0: 5; 6 adds 4 bytes of IPv4 options (NOPs) */
	uint8_t ip6_nexthdr; /* 0: protocol; else e.g. 44 puts a fragment header first */
	int udp_len_delta;   /* added to the UDP length field */
	size_t l2_pad;	     /* zero bytes after the IP packet (Ethernet padding) */
	uint16_t vlan;	     /* 0: untagged; else an 802.1Q tag with this VID */
};

/*
 * Builds the frame carrying payload. Returns 0 or -ENOSPC. UDP checksums are filled in
 * (IPv4 and IPv6), so a reply that keeps them would be told apart from one that computes them.
 */
int ndc_pkt_build(const struct ndc_pkt_addrs *a, const struct ndc_pkt_opts *o,
		  const uint8_t *payload, size_t plen, uint8_t *out, size_t cap, size_t *ret_len);

/*
 * A DNS query: header (id, flags), one question (text name, written as given: case survives),
 * and when edns_size > 0 an OPT RR with that UDP size, the given TTL flags word (0x8000: DO) and
 * version, and opt_len bytes of RDATA (options).
 */
struct ndc_pkt_query {
	uint16_t id;
	uint16_t flags; /* 0x0100: RD */
	const char *name;
	uint16_t qtype;
	uint16_t qclass; /* 0: IN */
	uint16_t edns_size;
	uint8_t edns_version;
	uint16_t edns_flags;
	const uint8_t *opts;
	size_t opt_len;
};

int ndc_pkt_dns_query(const struct ndc_pkt_query *q, uint8_t *out, size_t cap, size_t *ret_len);

/*
 * Malformed queries: each changes a query of ndc_pkt_dns_query in place (one question; opt_owner
 * needs the OPT RR, ar_not_opt none), *len its length before and after, with room for NDC_PKT_MAX
 * bytes. For the tables of rows of the answer tests (answer_rows.h).
 */
void ndc_pkt_mut_set_qr(uint8_t *d, size_t *len);	/* QR set: a response */
void ndc_pkt_mut_set_opcode(uint8_t *d, size_t *len);	/* opcode STATUS */
void ndc_pkt_mut_qd2(uint8_t *d, size_t *len);		/* QDCOUNT 2 */
void ndc_pkt_mut_qd0(uint8_t *d, size_t *len);		/* QDCOUNT 0 */
void ndc_pkt_mut_an1(uint8_t *d, size_t *len);		/* ANCOUNT 1 */
void ndc_pkt_mut_ns1(uint8_t *d, size_t *len);		/* NSCOUNT 1 */
void ndc_pkt_mut_ar2(uint8_t *d, size_t *len);		/* ARCOUNT 2 */
void ndc_pkt_mut_trailing(uint8_t *d, size_t *len);	/* a zero byte after the message */
void ndc_pkt_mut_header_only(uint8_t *d, size_t *len);	/* the 12-byte header alone */
void ndc_pkt_mut_short_header(uint8_t *d, size_t *len); /* 11 bytes */
void ndc_pkt_mut_cut_name(uint8_t *d, size_t *len);	/* ends 5 bytes into the name */
void ndc_pkt_mut_cut_qclass(uint8_t *d, size_t *len);	/* QCLASS cut off */
void ndc_pkt_mut_label64(uint8_t *d, size_t *len);	/* a first label length of 64 */
void ndc_pkt_mut_pointer_name(uint8_t *d, size_t *len); /* the name a pointer to the header */
void ndc_pkt_mut_pointer_tail(uint8_t *d, size_t *len); /* "a" and then a pointer */
void ndc_pkt_mut_ar_not_opt(uint8_t *d, size_t *len);	/* an A RR as the additional record */
void ndc_pkt_mut_opt_owner(uint8_t *d, size_t *len);	/* the OPT RR (last) owned by "x." */

/* A frame taken apart. */
struct ndc_pkt_parsed {
	bool v6;
	uint8_t src_mac[6];
	uint8_t dst_mac[6];
	uint8_t saddr[16];
	uint8_t daddr[16];
	uint16_t sport;
	uint16_t dport;
	uint8_t ttl;	   /* IPv4 TTL or IPv6 hop limit */
	bool ip_csum_ok;   /* IPv4 header checksum; true for IPv6 */
	uint16_t udp_csum; /* as received */
	bool udp_csum_ok;  /* 0 (IPv4 only) or correct over pseudo-header and datagram */
	const uint8_t *payload;
	size_t plen;
	size_t l2_pad; /* bytes after the IP packet */
};

/*
 * Parses an untagged (or single-802.1Q) Ethernet + IPv4/IPv6 + UDP frame; checks that the IP and
 * UDP lengths agree with each other and fit the frame (what follows is l2_pad). 0 or -EBADMSG.
 */
int ndc_pkt_parse(const uint8_t *frame, size_t len, struct ndc_pkt_parsed *ret);

/*
 * The build of the BPF object named by environment variable var (a build with a planted bug, for
 * ndc_fastpath_opts.object): 0 with its bytes in *ret (malloc'd) or ret->iov_base NULL when var is
 * unset or empty; -errno when the file cannot be read.
 */
struct iovec;
int ndc_pkt_object_from_env(const char *var, struct iovec *ret);

#endif
