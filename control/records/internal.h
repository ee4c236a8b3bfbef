/* SPDX-License-Identifier: MIT */
/*
 * Private to libndc_records: the layouts its files share. record_build.c (record_build_mc.c for
 * the multicluster zones) turns the object store into pending RRs grouped by owner name (struct
 * ndc_rec_bld); records_render.c renders each pending RRset once into the immutable table (the
 * blob, its index of offsets and the reverse index); records_lookup.c answers queries from that
 * table and walks it for the fast-path publisher; records_patch.c makes incremental versions of it,
 * an overlay of whole nodes over the base that records_overlay.c holds and searches;
 * records_alias.c reads and splices CNAME answers for the lookups. Nothing here is reachable from
 * outside the library.
 */
#ifndef NDC_RECORDS_INTERNAL_H
#define NDC_RECORDS_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <ndc/dns_wire.h>

#include <sys/socket.h>

#include "objects/objects.h"
#include "records/records.h"

/* Distinct types one owner can hold: SOA NS A AAAA SRV PTR TXT CNAME. */
#define NDC_REC_MAX_TYPES 8
/* SRV weight of a service's own records; headless endpoints share it at render time. */
#define NDC_REC_SRV_WEIGHT 100
/* SOA RDATA: MNAME, RNAME, then SERIAL REFRESH RETRY EXPIRE MINIMUM (RFC 1035 3.3.13). */
#define NDC_REC_SOA_MAX (2 * NDC_NAME_MAX + 20)

struct ndc_rec_chunk;

/*
 * How an SRV record's weight is set at render: as added (a service's own, NDC_REC_SRV_WEIGHT);
 * 100 / (records in the answer) (headless endpoints); or, in multicluster zones, as CoreDNS
 * weighs them: 100 / (records added at the owner, duplicates included: one per address and port,
 * so a dual-stack ClusterSetIP's SRV weighs 50 and two addresses of one hostname count twice).
 */
enum { NDC_REC_W_FIXED = 0, NDC_REC_W_SPLIT, NDC_REC_W_RAW };

/* One pending RR. */
struct ndc_rec_rr {
	struct ndc_rec_rr *next;
	uint16_t type;
	uint16_t rdlen;
	uint8_t weight; /* SRV: NDC_REC_W_* */
	uint8_t rdata[];
};

/* One owner name and its pending RRs, in the order they were added. */
struct ndc_rec_node {
	struct ndc_rec_rr *head;
	struct ndc_rec_rr *tail;
	struct ndc_rec_node *parent; /* the name without its first label, when that is a node */
	uint32_t off;		     /* in the blob, once rendered */
	uint32_t hash;
	uint8_t nlen;
	bool unindexed; /* not a node of the table: in the reverse index, or never answered */
	uint8_t name[];
};

/*
 * A PTR record of a full build kept out of the name table: the reverse index takes it (see
 * struct ndc_rec_rev4). A reverse name as a pending node was about 150 bytes of scratch (node,
 * name, slot, RR and the target's name as its RDATA): 55 MB of a 100,000-Service build's peak.
 */
struct ndc_rec_ptr {
	struct ndc_rec_node *tgt; /* the target, or the node after its dashed-address label */
	struct ndc_ip ip;
	bool dashed;
};

/* A multicluster zone of a build: its apex and svc.<zone>, lowercase wire names. */
struct ndc_rec_bzone {
	size_t zlen, svczlen;
	uint8_t zone[NDC_NAME_MAX];
	uint8_t svcz[NDC_NAME_MAX];
};

/*
 * Build scratch: an arena (freed whole by ndc_rec_bld_free) and an open-addressing table of owner
 * names, tab[tcap] with tcount used. The error is sticky: the first failure is kept in err and
 * later additions do nothing, so the caller checks once after adding everything.
 */
struct ndc_rec_bld {
	const struct ndc_records_opts *opts;
	struct ndc_rec_chunk *chunks;
	size_t arena_bytes;
	struct ndc_rec_node **tab;
	size_t tcap;
	size_t tcount;
	struct ndc_rec_rr **vec; /* one RRset being rendered */
	size_t vcap;
	size_t vraw;		  /* its records as added, duplicates included (NDC_REC_W_RAW) */
	struct ndc_rec_rr **xvec; /* the addresses of one of its targets */
	size_t xcap;
	int err;
	size_t skipped; /* objects whose names are not valid DNS names */
	char first_skip[160];
	/*
	 * compact_ptrs (full builds, not render_all): PTR records whose target is a node, or the
	 * address's dashed label before one, go to ptrs instead of reverse-name nodes;
	 * ndc_rec_ptrs_resolve sorts them and sends back to nodes the names that need one.
	 */
	bool compact_ptrs;
	struct ndc_rec_ptr *ptrs;
	size_t n_ptrs, cap_ptrs;
	size_t ptr_nodes; /* reverse names made nodes while compact_ptrs was on */
	size_t zlen, svczlen, podzlen;
	uint8_t zone[NDC_NAME_MAX]; /* lowercase wire names */
	uint8_t svcz[NDC_NAME_MAX]; /* svc.<zone> */
	uint8_t podz[NDC_NAME_MAX]; /* pod.<zone> */
	/*
	 * records.multicluster_zones (MCS, KEP-1645) other than the cluster domain, whose names
	 * come from ServiceImports (record_build_mc.c); mc_cluster: the cluster domain is one of
	 * them too, and answers from ServiceImports instead of Services (PTR records stay), as
	 * CoreDNS's `multicluster` option makes it.
	 */
	bool mc_cluster;
	size_t n_mcz;
	struct ndc_rec_bzone mcz[NDC_RECORDS_MAX_MC_ZONES];
};

/*
 * Length of the zone of the build that holds name n (the longest, as zones may nest), 0 for a
 * name outside every zone (a reverse name).
 */
static inline size_t ndc_rec_bld_zone(const struct ndc_rec_bld *b, const uint8_t *n, size_t len)
{
	size_t best = ndc_name_in_zone(n, len, b->zone, b->zlen) ? b->zlen : 0;

	for (size_t i = 0; i < b->n_mcz; i++)
		if (b->mcz[i].zlen > best &&
		    ndc_name_in_zone(n, len, b->mcz[i].zone, b->mcz[i].zlen))
			best = b->mcz[i].zlen;
	return best;
}

/* FNV-1a folded to 32 bits; build and lookup must hash names alike. Inline: it is per query. */
static inline uint32_t ndc_rec_name_hash(const uint8_t *n, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < len; i++) {
		h ^= n[i];
		h *= 0x100000001b3ULL;
	}
	return (uint32_t)(h ^ (h >> 32));
}

/*
 * Zeroes b and sets it up for opts. -EINVAL for a zone that is not a valid name, or -ENOMEM; on
 * failure b holds nothing to free.
 */
int ndc_rec_bld_init(struct ndc_rec_bld *b, const struct ndc_records_opts *opts);

/* Frees the scratch; b may be partly initialised. */
void ndc_rec_bld_free(struct ndc_rec_bld *b);

/*
 * The apex of zone (the cluster domain, or a multicluster zone of b): SOA, NS, the NS target's
 * addresses, the dns-version TXT and the svc/pod non-terminals. The SOA RDATA is also written to
 * soa (NDC_REC_SOA_MAX bytes) for the negative answers. Failure is left in b->err.
 */
void ndc_rec_add_apex(struct ndc_rec_bld *b, const uint8_t *zone, size_t zlen, uint8_t *soa,
		      size_t *ret_soa_len);

/*
 * Namespaces, services with their EndpointSlices, and pods (when verified) of o. Returns 0 or
 * -ENOMEM for its own temporary index; failures while adding are left in b->err.
 */
int ndc_rec_add_objects(struct ndc_rec_bld *b, const struct ndc_k8s_objects *o);

/*
 * Sorts b->ptrs by address and then target name, dropping duplicates, so that each address's
 * records are its PTR set in answer order; a set too big for the index, or whose reverse name is
 * also a node, goes to that node (add_rr) instead. Before rendering; -ENOMEM, or b->err.
 */
int ndc_rec_ptrs_resolve(struct ndc_rec_bld *b);

/* Entries in b->ptrs for the PTR set starting at i (after ndc_rec_ptrs_resolve). */
size_t ndc_rec_ptrs_group(const struct ndc_rec_bld *b, size_t i);

/* <ns>.pod.<zone> alone, as pods in a namespace make it (pod records on, namespace served). */
void ndc_rec_add_pod_namespace(struct ndc_rec_bld *b, const char *ns);

/*
 * Multicluster records (record_build_mc.c): ServiceImports and the EndpointSlices labelled for
 * them, in every multicluster zone of b. After ndc_rec_add_objects; failures as it.
 */
int ndc_rec_add_imports(struct ndc_rec_bld *b, const struct ndc_k8s_objects *o);

/* Builder steps shared with record_build_mc.c (record_build.c); failures are left in b->err. */
void ndc_rec_add_rr(struct ndc_rec_bld *b, const uint8_t *owner, size_t olen, uint16_t type,
		    const void *rdata, size_t rdlen, uint8_t weight);
struct ndc_rec_node *ndc_rec_node_get(struct ndc_rec_bld *b, const uint8_t *n, size_t len);
/* out = label . base, lowercase. -EINVAL for a label that is not RFC 1123 or a name too long. */
int ndc_rec_join(uint8_t *out, size_t *ret_len, const char *label, const uint8_t *base,
		 size_t blen);
/*
 * A namespace's names in every zone, as a Namespace or a Service in it makes them (and so does a
 * ServiceImport). -EINVAL: ns is not a label.
 */
int ndc_rec_add_namespace(struct ndc_rec_bld *b, const char *ns);
/* Counts an object whose names are not valid DNS names (the first one is logged). */
void ndc_rec_skip(struct ndc_rec_bld *b, const char *what, const char *ns, const char *name);
bool ndc_rec_ns_allowed(const struct ndc_records_opts *opts, const char *ns);
/*
 * The SRV records of port p with target tgt: at _<port>._<proto>.<svc> when the port is named,
 * and at <svc> itself (CoreDNS), weighed as weight says (NDC_REC_W_*).
 */
void ndc_rec_add_srv(struct ndc_rec_bld *b, const uint8_t *svn, size_t svl,
		     const struct ndc_k8s_port *p, const uint8_t *target, size_t tlen,
		     uint8_t weight);
/* The label an endpoint is named by: hostname, else (endpoint_pod_names) pod name, else NULL. */
const char *ndc_rec_ep_host(struct ndc_rec_bld *b, const char *ns,
			    const struct ndc_k8s_endpoint *ep);
/*
 * The name of an endpoint's address ip under base (a service's name, or its cluster's): host.base,
 * or, when host is NULL, the address's dashed label (written to dash, INET6_ADDRSTRLEN bytes)
 * before base. -EAFNOSUPPORT: ip is no address; -EINVAL: no valid name (counted by ndc_rec_skip).
 */
int ndc_rec_ep_name(struct ndc_rec_bld *b, const char *ns, const char *host,
		    const struct ndc_ip *ip, const uint8_t *base, size_t blen, char *dash,
		    uint8_t *ret_name, size_t *ret_len);

static inline uint16_t ndc_rec_addr_type(const struct ndc_ip *ip)
{
	return ip->family == AF_INET6 ? NDC_T_AAAA : NDC_T_A;
}

static inline size_t ndc_rec_addr_len(const struct ndc_ip *ip)
{
	return ip->family == AF_INET6 ? 16 : 4;
}

static inline bool ndc_rec_ip_ok(const struct ndc_ip *ip)
{
	return ip->family == AF_INET || ip->family == AF_INET6;
}

/* The pending node named n (lowercase wire name), or NULL. */
struct ndc_rec_node *ndc_rec_find(const struct ndc_rec_bld *b, const uint8_t *n, size_t len);

/* ---------------------------------------------------------------------------------------------
 * The rendered table (records.c) and its incremental versions (records_patch.c).
 */
#define NDC_REC_ALIGN4(x) (((x) + 3) & ~(size_t)3)

/*
 * Blob layout, 4-byte aligned throughout: struct rnode, its name, then ntypes answers (struct
 * ndc_answer and its data; the pad byte holds the type). Empty non-terminals are nodes with no
 * answers. A node whose parent name is a node too stores only its first label and the parent's
 * offset. Overlay nodes (struct ndc_rec_oent) always hold their whole name.
 */
struct ndc_rec_node_r {
	uint32_t hash;	 /* of the whole name */
	uint32_t parent; /* node of the name without its first label, or 0: name[] is whole */
	uint8_t nlen;	 /* whole name */
	uint8_t llen;	 /* bytes in name[] */
	uint8_t ntypes;
	uint8_t pad;
	uint8_t name[];
};

#define NDC_REC_NEG_PTRS_MAX 3 /* SOA owner, MNAME and RNAME each end in one pointer at most */

/*
 * The reverse index: a reverse name is 30 to 70 bytes of node and index slot for what is mostly
 * a pointer to a service or endpoint name, and a cluster has one per address. So the PTR set of
 * a canonical reverse name (as ndc_records_reverse_name writes it) whose targets are all nodes,
 * or an endpoint's dashed address label before one, is kept as one entry per target: the address
 * and the target node's offset (NDC_REC_REV_DASHED set: the label comes first). Sorted by address
 * (IPv4 in host order, IPv6 as bytes), one name's targets together in answer order; found by
 * binary search, its answer made at lookup. Other reverse names stay nodes (lazy or rendered).
 */
#define NDC_REC_REV_DASHED 1u /* node offsets are 4-aligned: bit 0 is free */
/* PTR targets of one reverse name in the index, at most: its answer fits NDC_REC_LAZY_MAX. */
#define NDC_REC_REV_MAX_TARGETS (NDC_REC_LAZY_MAX / (12 + NDC_NAME_MAX))

struct ndc_rec_rev4 {
	uint32_t ip;
	uint32_t tgt;
};

struct ndc_rec_rev6 {
	uint8_t ip[16];
	uint32_t tgt;
};

/* A zone of the table: its apex, SOA and negative answer. */
struct ndc_rec_zone {
	size_t zlen;
	size_t soa_len;
	uint8_t zone[NDC_NAME_MAX];
	uint8_t soa[NDC_REC_SOA_MAX];
	/*
	 * The NXDOMAIN answer for the apex as question. Every pointer in it points into the zone,
	 * which ends any question under the zone, so for a question nlen long each one moves by
	 * nlen - zlen: the negative answer is a copy and up to three additions.
	 */
	uint16_t neg_ptrs[NDC_REC_NEG_PTRS_MAX];
	int n_neg_ptrs;
	union {
		struct ndc_answer a;
		uint8_t b[sizeof(struct ndc_answer) + NDC_NAME_MAX + 10 + 2 * NDC_NAME_MAX + 20];
	} neg;
};

struct ndc_records {
	uint8_t *blob;
	size_t blob_len;
	size_t blob_cap;
	uint32_t *slots;
	uint32_t mask;
	size_t n_rrsets;
	size_t n_names;
	struct ndc_rec_rev4 *rev4; /* the reverse index (owned like blob) */
	size_t n_rev4;
	struct ndc_rec_rev6 *rev6;
	size_t n_rev6;
	enum ndc_pods_mode pods;
	uint32_t ttl;
	uint32_t neg_ttl;
	size_t podzlen;
	uint8_t podz[NDC_NAME_MAX]; /* pod.<zone> */
	struct ndc_rec_zone cz;	    /* the cluster domain */
	/* Multicluster zones other than the cluster domain (owned by the base, shared). */
	struct ndc_rec_zone *mcz;
	size_t n_mcz;
	/*
	 * Versions. A built table owns blob and slots (owner NULL) and counts in refs itself plus
	 * every version derived from it; a derived version (records_patch.c) shares them and adds
	 * an overlay of whole nodes that hide the base's nodes of the same name. Versions are freed
	 * on the writer's thread after an RCU grace period, so refs need no more than atomics.
	 */
	struct ndc_records *owner;
	_Atomic uint32_t refs;
	struct ndc_rec_ovl *ovl; /* NULL: none */
	uint64_t seq;		 /* the store's change counter this table reflects */
};

/* The zone of the table that holds name n (the longest), or NULL: not ours. */
static inline const struct ndc_rec_zone *ndc_rec_zone_of(const struct ndc_records *r,
							 const uint8_t *n, size_t len)
{
	const struct ndc_rec_zone *z =
	    ndc_name_in_zone(n, len, r->cz.zone, r->cz.zlen) ? &r->cz : NULL;

	for (size_t i = 0; i < r->n_mcz; i++)
		if ((!z || r->mcz[i].zlen > z->zlen) &&
		    ndc_name_in_zone(n, len, r->mcz[i].zone, r->mcz[i].zlen))
			z = &r->mcz[i];
	return z;
}

/*
 * rnode flag (in pad): a reverse name whose PTR answer is made at lookup from its targets' nodes
 * (u16 count, then per target u32 node offset, u8 label length, label bytes: the target is that
 * label, if any, before the node's name). A PTR answer is mostly the target's name spelled out,
 * and the name is already in the blob: this halves the memory of a cluster's reverse names.
 */
#define NDC_REC_LAZY_PTR 0x01
/* Largest lazy PTR answer: bigger sets are rendered when built. */
#define NDC_REC_LAZY_MAX 3072

/*
 * A lazy SRV answer among a node's answers: struct ndc_answer with rcode NDC_REC_LAZY_RCODE (no
 * real RCODE is above 15), ancount targets in answer order, and data of, per target, the 6
 * RDATA bytes before the name (priority, weight, port), u8 labels to drop from the owner name and
 * u8 length + label to put before what is left: the target. Every SRV target the builder makes
 * is the owner, an ancestor of it, or a label before one (<svc>, <host>.<svc> seen from
 * <svc> and _<port>._<proto>.<svc>), so an answer of many names and address records shrinks to a
 * few bytes per target; the answer and its additional section are made at lookup from the name
 * asked and the targets' own A/AAAA answers, byte for byte as rendering at build time made them
 * (records_lazy_srv_render). Only sets whose whole answer fitted in NDC_REC_LAZY_MAX bytes.
 */
#define NDC_REC_LAZY_RCODE 0xff

/* RRsets a node answers (a lazy PTR node holds its one without an answer in the blob). */
static inline unsigned ndc_rec_node_rrsets(const struct ndc_rec_node_r *nd)
{
	return (nd->pad & NDC_REC_LAZY_PTR) ? 1u : nd->ntypes;
}

/* Calls fn with each PTR target of nd, named name (lazy or rendered). */
int ndc_rec_node_ptr_targets(const struct ndc_records *r, const struct ndc_rec_node_r *nd,
			     const uint8_t *name, size_t nlen,
			     int (*fn)(void *arg, const uint8_t *target, size_t tlen), void *arg);

/*
 * The overlay of a derived version: a directory of buckets of whole nodes, consulted before the
 * base. A new version copies the directory and only the buckets its names fall in; entries and
 * buckets are reference counted across versions. Its lifetime and lookups are in
 * records_overlay.c, below everything that reads it; records_patch.c writes it.
 */
struct ndc_rec_oent {
	_Atomic uint32_t refs;
	bool exists; /* false: the name was deleted */
	uint64_t seq;
	_Alignas(8) uint8_t node[]; /* struct ndc_rec_node_r, whole name, then its answers */
};

struct ndc_rec_obkt {
	_Atomic uint32_t refs; /* directories holding it */
	uint32_t n, cap;
	struct ndc_rec_oent *e[];
};

struct ndc_rec_ovl {
	uint32_t bits;
	size_t n;
	struct ndc_rec_obkt *b[];
};

static inline const struct ndc_rec_node_r *ndc_rec_oent_node(const struct ndc_rec_oent *e)
{
	return (const struct ndc_rec_node_r *)e->node;
}

static inline bool ndc_rec_oent_is(const struct ndc_rec_oent *e, const uint8_t *n, size_t len,
				   uint32_t h)
{
	const struct ndc_rec_node_r *nd = ndc_rec_oent_node(e);

	return nd->hash == h && nd->nlen == len && !memcmp(nd->name, n, len);
}

/* Drop a reference on an entry, a bucket (and its entries' when it is the last). */
void ndc_rec_oent_put(struct ndc_rec_oent *e);
void ndc_rec_obkt_put(struct ndc_rec_obkt *b);

/* Renders pending node t into r's blob (whole name when whole, or when its parent is not a node).
 */
int ndc_rec_render_node(struct ndc_rec_bld *b, struct ndc_records *r, const struct ndc_rec_node *t,
			struct ndc_answer *scratch, bool whole);

/* The base table's node named n (hash h), or NULL; overlays are not consulted. */
const struct ndc_rec_node_r *ndc_rec_base_find(const struct ndc_records *r, const uint8_t *n,
					       size_t len, uint32_t h);

/* The address reverse name n stands for, when written exactly as ndc_records_reverse_name does. */
bool ndc_rec_rev_parse(const uint8_t *n, size_t len, struct ndc_ip *ip);

/* RRsets the base table answers at n (hash h), its reverse index included. */
unsigned ndc_rec_base_rrsets(const struct ndc_records *r, const uint8_t *n, size_t len, uint32_t h);

/* The PTR answer the base's reverse index holds for n, its pad the type; -ENOENT: none. */
int ndc_rec_rev_answer(const struct ndc_records *r, const uint8_t *n, size_t len,
		       struct ndc_answer *out, size_t cap);

/* Calls fn with each PTR target the base's reverse index holds for n (none: 0, fn not called). */
int ndc_rec_rev_targets(const struct ndc_records *r, const uint8_t *n, size_t len,
			int (*fn)(void *arg, const uint8_t *target, size_t tlen), void *arg);

/* CoreDNS's form of an address as one label: 10-244-1-5, fd00-10-244--5. */
void ndc_rec_dashed(const struct ndc_ip *ip, char *out, size_t cap);

/*
 * Room an answer to a question nlen long may take: a message (RFC 1035 4.2.2) less the header,
 * the question and the OPT RR the reply writer may append.
 */
#define NDC_REC_ANSWER_CAP(nlen) (NDC_MSG_MAX - NDC_DNS_HDR_LEN - (nlen)-4 - 11)

/*
 * Aliases at the wire level (records_alias.c). The target of CNAME answer a (its first record),
 * an answer to qname, into out (NDC_NAME_MAX bytes). -EBADMSG when a holds no CNAME first.
 */
int ndc_rec_cname_target(const struct ndc_answer *a, const uint8_t *qname, size_t qlen,
			 uint8_t *out, size_t *ret_len);

/*
 * Appends the records of a, an answer to qname, to b in their own sections, every name whole
 * again for b to compress against its own question: the first max_an of the answer section, and
 * when that is all of it the authority section and, with additional, the additional one.
 * Failures of b are b's (sticky, seen by ndc_ab_finish); -EBADMSG for data that does not parse.
 */
int ndc_rec_splice(struct ndc_ab *b, const uint8_t *qname, size_t qlen, const struct ndc_answer *a,
		   unsigned max_an, bool additional);

/* The overlay's entry for n: -ENOENT when it has none, else 0 and *ret (NULL: deleted name). */
int ndc_rec_ovl_find(const struct ndc_rec_ovl *o, const uint8_t *n, size_t len, uint32_t h,
		     const struct ndc_rec_node_r **ret);

/* Calls fn for every node of the overlay that exists. */
int ndc_rec_ovl_foreach(const struct ndc_rec_ovl *o,
			int (*fn)(void *arg, const struct ndc_rec_node_r *nd), void *arg);

/* Entries in the overlay (names changed since the base was built, deletions included). */
size_t ndc_rec_ovl_size(const struct ndc_rec_ovl *o);

/* Drops a version's overlay. */
void ndc_rec_ovl_put(struct ndc_rec_ovl *o);

#endif
