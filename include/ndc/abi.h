/* SPDX-License-Identifier: MIT */
/*
 * The one contract between the BPF fast path (bpf/) and user space (dataplane/fastpath/fastpath.c).
 * Included by both: fixed-width kernel types only, network order marked __be, explicit padding,
 * sizes pinned with _Static_assert. Any change to a struct here bumps NDC_ABI_VERSION; the loader
 * refuses pinned maps of another version.
 *
 * How a query is answered in the kernel (UDP to port 53 of a node-local address, QDCOUNT 1,
 * no EDNS options, DO clear, not a fragment):
 *   1. key = (hash of the lowercase qname, qtype, name length); found, its stored name equal to
 *      the qname, and not expired: that answer.
 *   2. else key = (same hash, NDC_FP_QTYPE_OTHER, length): the answer for any other type at an
 *      existing name (NODATA with SOA, or the CNAME of an ExternalName service); ANY goes to
 *      step 4 (the publisher leaves the cluster's ANY answers to user space).
 *   3. else, when the config says the store is synced and the name is under the zone but not
 *      under the pass-through suffix (pod.<zone> when pods are computed at lookup): NXDOMAIN with
 *      the SOA template of map ndc_nx.
 *   4. else pass to the stack (user space answers), counting why.
 * An entry found in 1 or 2 whose stored name is not the qname (a hash collision) passes the
 * query to user space, counted as NDC_FP_PASS_MISS, without going on to the next step; so does
 * an entry being rewritten while it is read (NDC_FP_PASS_BUSY).
 * Everything after the question comes from the answer's data; the question is echoed as received.
 *
 * struct ndc_fp_key and struct ndc_fp_value are the logical entry: what is published (and what
 * the DPDK backend stores). The kernel's maps hold them in the layout of struct ndc_fp_slot and
 * the records of ndc_big (struct ndc_fp_ext) below (the answer table).
 */
#ifndef NDC_ABI_H
#define NDC_ABI_H

#include <linux/types.h>

#define NDC_ABI_VERSION 13

#define NDC_FP_NAME_MAX 128 /* longer wire names go to user space */
#define NDC_FP_DATA_MAX 512 /* bigger answers go to user space */
#define NDC_FP_TTL_MAX 16   /* RRs whose TTL the fast path counts down */
#define NDC_FP_MAX_ADDRS 4  /* node-local addresses per family */

/*
 * The tc programs' verdict for a packet they leave alone: TC_ACT_UNSPEC (TCX_NEXT), so that a
 * filter behind ours on the same hook (a CNI's policy, attached after us) still runs; with none,
 * the packet goes on to the stack as with TC_ACT_OK.
 */
#define NDC_TC_PASS (-1)

/* qtype of the "any other type at this existing name" entry (type 0 is reserved, RFC 6895). */
#define NDC_FP_QTYPE_OTHER 0

/*
 * Question hygiene, the one rule both paths apply before any lookup (docs/ANSWERS.md): what a
 * question of type qtype is owed when it is not a question for data.
 *   - 0: answered (a data type, or ANY, which the answer tables handle on their own terms).
 *   - NDC_QTYPE_FORMERR: type 0 (reserved, RFC 6895 3.1), OPT (a pseudo-RR of the additional
 *     section, RFC 6891 6.1.1), and the meta range 128-254 but zone transfers: TKEY and TSIG
 *     belong to transactions, MAILA/MAILB (RFC 1035 3.2.3) are obsolete, the rest unassigned.
 *     FORMERR as unbound answers them.
 *   - NDC_QTYPE_REFUSED: AXFR and IXFR (zone transfers are not a cache's business, RFC 5936 4.2).
 * None of these is ever forwarded, cached or published. Type 0 is also NDC_FP_QTYPE_OTHER's key:
 * because no question of type 0 reaches a lookup in either path, no question type can read the
 * "any other type" entry as an exact one, and no upstream answer can be filed under it.
 */
#define NDC_QTYPE_FORMERR 1 /* the RCODE */
#define NDC_QTYPE_REFUSED 5
static inline __attribute__((always_inline)) __u32 ndc_qtype_verdict(__u32 qtype)
{
	if (qtype == 251 || qtype == 252) /* IXFR, AXFR */
		return NDC_QTYPE_REFUSED;
	if (qtype == 0 || qtype == 41 || (qtype >= 128 && qtype <= 254))
		return NDC_QTYPE_FORMERR;
	return 0;
}

/* Map names, also the file names under the pin directory. */
#define NDC_FP_PIN_DIR "/sys/fs/bpf/ndcache"
#define NDC_FP_MAP_ANSWERS ndc_answers /* the slots of the answer table */
#define NDC_FP_MAP_BIG ndc_big	       /* answers too big for their slot */
#define NDC_FP_MAP_NX ndc_nx
#define NDC_FP_MAP_CONFIG ndc_config
#define NDC_FP_MAP_COUNTERS ndc_counters
#define NDC_FP_MAP_FLOWS ndc_flows
#define NDC_FP_MAP_CLIENTS ndc_clients
#define NDC_FP_MAP_SAMPLES ndc_samples

/*
 * The name hash: a 64-bit multiply-xorshift over the lowercase wire name read as little-endian
 * 8-byte words, the last one zero past the name's end. Defined here once: the BPF program computes
 * it word by word while it copies and lowercases the name (ndc_fp_hash_step), user space over the
 * whole name (ndc_fp_name_hash); both must give the same value.
 *
 * Why: a 16-byte key instead of the 132 bytes of the name is compared in every slot a walk
 * passes. Why this function: a step is four instructions (xor, multiply, shift, xor) with no
 * table, cheap in BPF for up to the 16 words of a NDC_FP_NAME_MAX name. Each step is a bijection
 * of h for a given word ((h ^ w) times an odd constant, then an invertible xorshift), so two names
 * of the same length that differ in only one word never collide; other pairs collide with a
 * chance of about 2^-64. Slot spread is not its job: ndc_fp_home() mixes it again with a random
 * key.
 *
 * Collisions: the hash is not keyed, so names that collide can be built on purpose. That costs
 * speed, never a wrong answer: the entry stores its name (struct ndc_fp_value name_len, name),
 * the program compares it with the query's after every lookup and passes the query to user space
 * on a mismatch (counted as NDC_FP_PASS_MISS, and not followed by the other-type entry or NXDOMAIN
 * synthesis), and user space refuses to overwrite or delete an entry that holds another name
 * (dataplane/fastpath/table.c), which then stays with the name published first; the other one is
 * answered by user space.
 */
#define NDC_FP_HASH_INIT 0x6e6463616368652dULL /* "ndcache-": any non-zero start */
#define NDC_FP_HASH_MUL 0x9e3779b97f4a7c15ULL  /* 2^64 / golden ratio: odd, bits spread */

static inline __attribute__((always_inline)) __u64 ndc_fp_hash_step(__u64 h, __u64 w)
{
	h = (h ^ w) * NDC_FP_HASH_MUL;
	return h ^ (h >> 32);
}

/* The hash of a lowercase wire name of len bytes (1..NDC_FP_NAME_MAX), the same on any host. */
static inline __u64 ndc_fp_name_hash(const __u8 *name, __u32 len)
{
	__u64 h = NDC_FP_HASH_INIT;

	for (__u32 i = 0; i < len; i += 8) {
		__u64 w = 0;

		for (__u32 j = 0; j < 8 && i + j < len; j++)
			w |= (__u64)name[i + j] << (8 * j);
		h = ndc_fp_hash_step(h, w);
	}
	return h;
}

struct ndc_fp_key {
	__u64 hash;    /* ndc_fp_name_hash of the lowercase wire name */
	__u16 qtype;   /* host order */
	__u8 name_len; /* wire length of the name, 1..NDC_FP_NAME_MAX */
	__u8 region;   /* ndc_fp_key_region of the name and qtype */
	__u8 pad[4];   /* zero */
};

/*
 * The table's two regions (abi.h, "The answer table"): a key is NDC_FP_REGION_COMMON when its name
 * begins with a letter (or is the root) and its type is one pods ask, A or AAAA, or the entry of
 * any other type (NDC_FP_QTYPE_OTHER: NODATA, which answers AAAA in a single-stack cluster, or an
 * ExternalName's CNAME); any other key is NDC_FP_REGION_RARE. Service and namespace names are
 * DNS-1035 labels and begin with a letter: a service's A, AAAA and any-other-type entries are
 * common (ABI 8). SRV names (_port._proto, RFC 2782), reverse names (in-addr.arpa) and the
 * address-named records of endpoints and pods begin with '_' or a digit, and pods seldom ask them;
 * nor do they ask the SRV records at a service's own name (ABI 9: a third of the common entries
 * were those, which spread the names pods ask over half as many pages again).
 */
#define NDC_FP_REGION_COMMON 0
#define NDC_FP_REGION_RARE 1

/* 1 when a == b, else 0, for values below 2^31. verifier: no branch. */
static inline __attribute__((always_inline)) __u32 ndc_fp_eq(__u32 a, __u32 b)
{
	return ((a ^ b) - 1) >> 31;
}

/*
 * The region of a key whose name's first character is c (0 for the root) and whose type is
 * qtype. verifier: no branch, so that the program's walk is one path whatever the region.
 */
static inline __attribute__((always_inline)) __u32 ndc_fp_region(__u32 c, __u32 qtype)
{
	__u32 digit = ((__u32)(__u8)(c - '0') - 10) >> 31, under = ndc_fp_eq(c, '_');
	__u32 asked = ndc_fp_eq(qtype, 1) | ndc_fp_eq(qtype, 28) |
		      ndc_fp_eq(qtype, NDC_FP_QTYPE_OTHER); /* A, AAAA, any other */

	return digit | under | (asked ^ 1); /* 1: NDC_FP_REGION_RARE */
}

/* The region of the key of a lowercase wire name of len bytes and type qtype. */
static inline __u8 ndc_fp_key_region(const __u8 *name, __u32 len, __u32 qtype)
{
	return (__u8)ndc_fp_region(len > 1 ? name[1] : 0, qtype);
}

/* value flags */
#define NDC_FP_V_AA 0x01 /* set AA in the reply */
/*
 * Pass the query to user space. Published as the NDC_FP_QTYPE_OTHER entry of a name one of whose
 * answers could not be published (too big, table full): without it the kernel would answer
 * NODATA for a type the name has. Never a wrong answer.
 */
#define NDC_FP_V_PASS 0x02

/*
 * An answer, the logical entry: what is published for a key (the kernel's table lays it out as
 * struct ndc_fp_slot or in ndc_fp_ext records, below), and what the program copies out of the table
 * before it builds a reply.
 */
struct ndc_fp_value {
	__u64 insert_ns; /* bpf_ktime_get_ns() (CLOCK_MONOTONIC) at which data's TTLs were exact */
	__u64 expire_ns; /* 0: never expires (cluster records); else pass once now >= expire_ns */
	__u16 len;	 /* bytes used in data */
	__u16 ancount;
	__u16 nscount;
	__u16 arcount;
	__u8 rcode;    /* header RCODE (4 bits) */
	__u8 flags;    /* NDC_FP_V_* */
	__u8 n_ttl;    /* entries used in ttl_off; 0 with expire_ns 0 (TTLs never change) */
	__u8 name_len; /* of name; 0 in ndc_nx's template, which serves every name */
	__u32 pad2;
	/*
	 * The entry's own lowercase wire name, zero after name_len: the key holds only its hash
	 * (collisions: see ndc_fp_hash_step).
	 */
	__u8 name[NDC_FP_NAME_MAX] __attribute__((aligned(8))); /* read as words */
	/*
	 * Answer, authority and additional RRs as they follow the question. Compression pointers
	 * assume the question name at offset 12 (its length is name_len), exactly like struct
	 * ndc_answer in user space.
	 */
	__u8 data[NDC_FP_DATA_MAX] __attribute__((aligned(8)));
	__u16 ttl_off[NDC_FP_TTL_MAX] __attribute__((aligned(8))); /* offsets in data of RR TTL
								      fields to count down */
};

/*
 * The answer table (maps ndc_answers, ndc_big), sized by its content (ABI 5; NODATA by reference
 * since 6).
 *
 * Memory: both maps are BPF_MAP_TYPE_ARRAY_OF_MAPS whose inner maps are chunks, mmapable arrays of
 * one size, created by user space as the table needs them and dropped when it shrinks: nothing is
 * allocated for dataplane.table_size, which only caps the entries. The verifier inlines the
 * lookups of both levels (an array of maps, then an array whose size the inner template fixes),
 * so a lookup costs no helper call and no return.
 *
 * Buckets: the table is n_buckets buckets of NDC_FP_BUCKET slots. An entry (name, qtype) lives
 * from its home bucket, ndc_fp_home() of its hash, type, region and the table's random key, in the
 * first bucket with a free slot and no entry of the same tag, at most NDC_FP_PROBE_BUCKETS - 1
 * buckets on (wrapping). (A name's types sharing one home would be found in one walk, but their
 * groups overflow buckets: measured, runs of 16 full buckets at two thirds load.) Each bucket has a
 * tag word: bytes 0 to NDC_FP_BUCKET - 1 are its slots' tags (NDC_FP_TAG_EMPTY, or the entry's
 * ndc_fp_tag of hash and qtype, never 0), byte 7 its flags: NDC_FP_BUCKET_OVERFLOW once an entry
 * was placed past it. A walk reads the tag word, looks at the one slot with the key's tag (a tag is
 * in a bucket at most once), and goes on to the next bucket only when this one has overflowed; a
 * miss is decided on that one word. Removing a key empties its slot; overflow flags stay until the
 * table is rebuilt. A new key takes its preferred slot of its home bucket (ndc_fp_mix_pref) when
 * that slot is free, else the first free one; the walk reads the preferred slot's first line
 * before the tag word, so that for the keys there (about two in three) the two loads from memory
 * overlap instead of following each other. Where a key is, the tag word alone says.
 *
 * Regions (ABI 8; by type too since ABI 9): the first n_common buckets (config geom) are the homes
 * of the common region's keys, the rest the homes of the rare region's (ndc_fp_key_region;
 * NDC_FP_V_RARE in the slot), split in proportion to their entries when the table is rebuilt (or
 * one region for both while either has no entry). A walk still goes on past its region's end (into
 * the other region, and from the last bucket to the first); its two lookups (the type asked, then
 * NDC_FP_QTYPE_OTHER) each start in their own key's region. Why: pods ask for the A and AAAA of
 * services, whose entries were spread over every page of the table among four times as many
 * others (SRV, reverse and address-named records); the pages a name's visit touches are what the
 * TLB and the caches must keep between visits. At 10,000 services (tests/bench/latency_bench.sh's
 * cluster) 20,113 of 94,116 entries are common (30,116 with ABI 8, whose common region also held
 * the SRV answer at each service's name), in about a quarter of the slots.
 *
 * A chunk holds NDC_FP_CHUNK_BUCKETS buckets: first their tag words (NDC_FP_CHUNK_TAG_SLOTS
 * slot-sized entries of 16 words), then their slots. Bucket b is in chunk b / NDC_FP_CHUNK_BUCKETS.
 *
 * Growth and shrink: user space builds a whole new table in the other half of the outer maps
 * (chunks at NDC_FP_HALF_CHUNKS(config) * half + i), from the live one, then switches config geom
 * (one 8-byte store: half and n_buckets), waits until no program can still read the old half
 * (an RCU grace period: the programs run inside RCU read-side sections), and drops it.
 *
 * A slot holds the answer when it fits: bytes = the name (zero to a multiple of 8; without the
 * longest config suffix it ends in, NDC_FP_V_SFX), the data (zero to a multiple of 8), and with
 * NDC_FP_V_EXPIRES the insert and expiry times (two __u64) and the n_ttl TTL offsets. Why the
 * suffixes: "svc.cluster.local" left out, a service's A answer (header, name, data) is one cache
 * line instead of two, and a named port's SRV answer with its address fits its slot. Else
 * (NDC_FP_V_BIG) big is the index of the first of 1 to 3 consecutive 256-byte records (struct
 * ndc_fp_ext) in one of ndc_big's chunks of the same half, which hold the first ndc_fp_ext_bytes()
 * bytes of the struct ndc_fp_value, its name included: up to the end of the data for an answer that
 * never expires (a headless service's SRV set of three targets and their addresses: two records),
 * whole (the TTL offsets at its end) for one that does. Why records and not one size: until ABI 6
 * every big answer took 768 bytes.
 *
 * NODATA by reference (NDC_FP_V_SOA): a NODATA answer whose one authority RR is the zone's SOA,
 * byte for byte as ndc_nx[NDC_FP_NX_NODATA] gives it for the entry's name, is published as its
 * name alone (len 0, NSCOUNT 0): the reader copies that template's data and NSCOUNT 1 into its copy
 * of the answer, under the template's sequence counter. The template is the SOA RR compressed
 * against a question that ends in the zone (its name and name_len): n_ttl compression pointers, at
 * the offsets ttl_off gives, point at the zone, and the reader sets each to 0xc000 | (12 +
 * question length - zone length). So the reply is the same bytes the socket path sends. Why: at
 * 10,000 services a third of the entries were NODATA, and with names over about 48 bytes each took
 * a 768-byte big record for the 54 bytes of SOA that all of them repeat.
 *
 * Torn reads: each slot has a sequence counter that the single writer (the publisher, under a
 * lock) makes odd before it changes the slot or what it points to and even again after, with
 * release ordering. A reader copies what it needs between two reads of it (acquire ordering,
 * and a read barrier before the second) and uses the copy only when both are the same even
 * value; else the query goes to user space (NDC_FP_PASS_BUSY), never to NXDOMAIN. An update of a
 * present key is made in its slot (a new big answer first, then the slot pointed at it), so it
 * never looks absent; a big answer is reused only after its slot no longer points at it, which a
 * reader still reading it sees as a changed sequence counter. ndc_nx holds NDC_FP_NX_ENTRIES
 * struct ndc_fp_big, each with its own counter that protects it the same way.
 *
 * Hash collisions: the walk matches tag, qtype, name length and 32 more bits of the hash (check);
 * the name itself is compared under the sequence counter. A different name there (names built
 * to collide) passes the query to user space, never a wrong answer.
 *
 * Moves: an insert that moves entries on (Robin Hood placement) copies each to its new place and
 * flags the buckets on its way overflowed before it overwrites the old slot. A walk that finds
 * the key's tag on a slot holding another key reads the tag word again: changed, the key may
 * have been moved on since the first read (whose word may lack the overflow flag that leads
 * there), and the query goes to user space (NDC_FP_PASS_BUSY); unchanged, it was another key's
 * tag and the walk goes on as the word says.
 */
#define NDC_FP_SLOT_BYTES 104	/* name and data of a slot: a named port's SRV answer fits */
#define NDC_FP_BUCKET 7		/* slots per bucket: their tags and a flags byte make a word */
#define NDC_FP_PROBE_BUCKETS 16 /* a walk reads at most this many buckets */
/*
 * Buckets per chunk: 7,168 slots, 904 KiB. Big, because the kernel waits for an RCU grace period
 * (about 16 ms here) after every update of an array of maps: a rebuild adds and drops every chunk.
 */
#define NDC_FP_CHUNK_BUCKETS 1024
#define NDC_FP_CHUNK_TAG_SLOTS 64 /* slot-sized entries of a chunk holding its tag words */
#define NDC_FP_CHUNK_ENTRIES (NDC_FP_CHUNK_TAG_SLOTS + NDC_FP_CHUNK_BUCKETS * NDC_FP_BUCKET)
#define NDC_FP_EXT_BYTES 256  /* a record of a big answer */
#define NDC_FP_EXT_MAX 3      /* records of one big answer at most */
#define NDC_FP_BIG_CHUNK 1536 /* struct ndc_fp_ext per ndc_big chunk: 384 KiB */

#define NDC_FP_TAG_EMPTY 0
#define NDC_FP_BUCKET_OVERFLOW 0x01 /* in byte 7 of the tag word */

/* A keyed multiply-xorshift of the name hash (the table's random key: config home_key). */
static inline __attribute__((always_inline)) __u64 ndc_fp_mix(__u64 hash, __u64 key)
{
	__u64 h = (hash ^ key) * NDC_FP_HASH_MUL;

	h ^= h >> 29;
	h *= NDC_FP_HASH_MUL;
	return h ^ h >> 32;
}

/*
 * The key's mix: the type goes in spread over the whole word, so every bit of the mix depends on
 * it and the types of a name land apart, with unrelated tags.
 */
static inline __attribute__((always_inline)) __u64 ndc_fp_key_mix(__u64 hash, __u64 key,
								  __u16 qtype)
{
	return ndc_fp_mix(hash ^ ((__u64)qtype + 1) * 0xff51afd7ed558ccdULL, key);
}

/* A bucket in [0, n_buckets) from a key's mix. */
static inline __attribute__((always_inline)) __u32 ndc_fp_mix_home(__u64 mix, __u32 n_buckets)
{
	return (__u32)(((mix >> 32) * n_buckets) >> 32);
}

/*
 * The home bucket of a key of region (0 or 1) in a table of n buckets whose common region is
 * buckets [0, n_common) and rare region [rare_base, n): one region is n_common n and rare_base 0.
 * verifier: no branch.
 */
static inline __attribute__((always_inline)) __u32
ndc_fp_region_home(__u64 mix, __u32 n, __u32 n_common, __u32 rare_base, __u32 region)
{
	__u32 m = 0 - region, size = n_common ^ ((n_common ^ (n - rare_base)) & m);

	return (rare_base & m) + ndc_fp_mix_home(mix, size);
}

/* never NDC_FP_TAG_EMPTY */
static inline __attribute__((always_inline)) __u8 ndc_fp_mix_tag(__u64 mix)
{
	__u8 t = (__u8)(mix >> 8);

	return t ? t : 1;
}

/*
 * The slot of its home bucket a key takes when that slot is free (user space's placement), from
 * bits of the mix that neither the home bucket nor the tag uses. The walk reads that slot's first
 * line before the bucket's tag word, so the two loads from memory overlap for the keys there
 * (about 60% at the table's load); the tag word still decides where a key is.
 */
static inline __attribute__((always_inline)) __u32 ndc_fp_mix_pref(__u64 mix)
{
	return (__u32)((((mix >> 16) & 0xffff) * NDC_FP_BUCKET) >> 16);
}

/* The home bucket of (hash, qtype) of region, in a table as ndc_fp_region_home's. */
static inline __attribute__((always_inline)) __u32 ndc_fp_home(__u64 hash, __u64 key, __u16 qtype,
							       __u32 region, __u32 n_buckets,
							       __u32 n_common, __u32 rare_base)
{
	return ndc_fp_region_home(ndc_fp_key_mix(hash, key, qtype), n_buckets, n_common, rare_base,
				  region);
}

/* The tag of (hash, qtype). */
static inline __attribute__((always_inline)) __u8 ndc_fp_tag(__u64 hash, __u64 key, __u16 qtype)
{
	return ndc_fp_mix_tag(ndc_fp_key_mix(hash, key, qtype));
}

/*
 * config geom: the live half's n_buckets in bits 0 to 31, the half in bit 32, whether it has two
 * regions in bit 33, and its common region's buckets (n_buckets when one) from bit 34.
 */
#define NDC_FP_GEOM(half, n_buckets, n_common, two) \
	((__u64)(n_common) << 34 | (__u64)(two) << 33 | (__u64)(half) << 32 | (n_buckets))
#define NDC_FP_GEOM_HALF(g) ((__u32)((g) >> 32) & 1)
#define NDC_FP_GEOM_BUCKETS(g) ((__u32)(g))
#define NDC_FP_GEOM_COMMON(g) ((__u32)((g) >> 34))
/* the rare region's first bucket: 0 when the table has one region */
#define NDC_FP_GEOM_RARE_BASE(g) (NDC_FP_GEOM_COMMON(g) & (0 - ((__u32)((g) >> 33) & 1)))

/* slot flags, besides NDC_FP_V_AA and NDC_FP_V_PASS */
#define NDC_FP_V_SOA 0x04 /* NODATA whose authority is the zone's SOA: the slot holds no data */

/*
 * A name's suffix by reference (ABI 7): flags bits NDC_FP_V_SFX hold 0, or i + 1 when the slot's
 * bytes hold only the first name_len - config sfx.len[i] bytes of the entry's name (zero after
 * them) and the name ends, at a label's start, in config sfx.name[i]. Only for names in a slot
 * (inline answers and NODATA by reference); a big answer's records hold its whole name.
 */
#define NDC_FP_V_SFX 0x18
#define NDC_FP_V_SFX_SHIFT 3
#define NDC_FP_V_RARE 0x20 /* the key's region is NDC_FP_REGION_RARE (for user space's moves) */
#define NDC_FP_SFX_MAX 3   /* suffixes in config */

/* ndc_nx's entries: the NXDOMAIN answer, and the NODATA authority of NDC_FP_V_SOA entries */
#define NDC_FP_NX_NXDOMAIN 0
#define NDC_FP_NX_NODATA 1
#define NDC_FP_NX_ENTRIES 2
#define NDC_FP_SOA_PTRS 4     /* zone pointers in the NODATA authority at most */
#define NDC_FP_V_EXPIRES 0x40 /* bytes hold the insert and expiry times after the data */
#define NDC_FP_V_BIG 0x80     /* the answer is ndc_big[big] */

/* Kernel answers counted in a cached entry's slot (hits) up to this, for prefetch. */
#define NDC_FP_HITS_MAX 255

struct ndc_fp_slot {
	__u32 seq;     /* odd while the publisher writes the slot or its big answer */
	__u16 qtype;   /* the key, with name_len, check and the name */
	__u8 name_len; /* 0: the slot is free (its tag says which kind) */
	__u8 flags;
	__u32 check; /* the hash's upper half */
	__u16 len;   /* the answer when it is in bytes, as in struct ndc_fp_value */
	__u8 ancount;
	__u8 nscount;
	__u8 arcount;
	__u8 rcode;
	__u8 n_ttl;
	/*
	 * Kernel reads of this entry since it was written (ABI 11: counted as the program reads it,
	 * before it decides to answer; a read of an expired entry counts too), for NDC_FP_V_EXPIRES
	 * entries up to NDC_FP_HITS_MAX (the program writes it; not under seq: a count, not an
	 * answer).
	 */
	__u8 hits;
	__u32 hash_lo; /* the hash's lower half: user space moves entries when the table grows */
	union {
		__u8 bytes[NDC_FP_SLOT_BYTES] __attribute__((aligned(8))); /* read as words */
		__u32 big;						   /* NDC_FP_V_BIG */
	};
};

/* A record of a big answer: NDC_FP_EXT_BYTES of a struct ndc_fp_value, from its start. */
struct ndc_fp_ext {
	__u64 w[NDC_FP_EXT_BYTES / 8];
};

/* Bytes of a struct ndc_fp_value a big answer's records hold (len, n_ttl: the value's). */
static inline __u32 ndc_fp_ext_bytes(__u32 len, __u32 n_ttl)
{
	return n_ttl ? sizeof(struct ndc_fp_value)
		     : __builtin_offsetof(struct ndc_fp_value, data) + ((len + 7) & ~7U);
}

/* The templates of ndc_nx (NDC_FP_NX_*), each under its own sequence counter. */
struct ndc_fp_big {
	__u32 seq; /* as a slot's */
	__u32 pad;
	struct ndc_fp_value v;
	__u8 pad2[56]; /* to a multiple of 64 bytes */
};

/*
 * The suffixes slots may leave out (config sfx; NDC_FP_V_SFX): lowercase wire names, each within
 * its NDC_FP_NAME_MAX bytes (zero after len), len 0 for none. The agent's: "svc." and the cluster
 * domain, the cluster domain, "in-addr.arpa".
 */
struct ndc_fp_sfx {
	__u8 len[NDC_FP_SFX_MAX];
	__u8 pad[5];
	__u8 name[NDC_FP_SFX_MAX][NDC_FP_NAME_MAX];
};

/* config flags */
#define NDC_FP_C_SYNCED 0x01	    /* the store is complete: synthesise NXDOMAIN */
#define NDC_FP_C_REDIRECT_PEER 0x02 /* tc: reply with bpf_redirect_peer instead of bpf_redirect */
/*
 * Fail open (tc): a query (UDP, or a TCP connection) to a node-local address that the kernel does
 * not answer, and for which no socket listens there (no agent runs: killed, OOM, between an exit
 * and the next start), is sent on to the upstream of its family instead of meeting a closed port:
 * the destination is rewritten to up4/up6 and the flow remembered in ndc_flows; the upstream's
 * replies to that flow get the node-local address back as their source at tc egress. See
 * bpf/ndc_failopen.h.
 */
#define NDC_FP_C_FAILOPEN 0x04
/* Count the queries to us per client address in map ndc_clients (ABI 10; log.clients). */
#define NDC_FP_C_CLIENTS 0x08

struct ndc_fp_config {
	/*
	 * ABI 12: what every packet reads, on the first cache line (so that a packet under traffic,
	 * which finds the config evicted, waits for one line, not four): the version, the flags,
	 * the addresses' counts and port, the sample rate, gen, the IPv4 addresses, the table's
	 * geometry and the IPv4 upstream (which fail-open's egress program compares every reply
	 * with).
	 */
	__u32 abi_version; /* NDC_ABI_VERSION, or the program passes everything */
	__u32 flags;	   /* NDC_FP_C_* */
	__u8 n_addr4;
	__u8 n_addr6;
	__be16 port; /* 53 */
	/*
	 * Sampled answers (ABI 10; log.dnstap.kernel_sample): an answer goes to ring buffer
	 * ndc_samples when bpf_get_prandom_u32() < sample; 0: none. The rate times 2^32.
	 */
	__u32 sample;
	/*
	 * ABI 11: one more after every write readers may see in the table (a slot, a template, the
	 * geom, the suffixes), once it is complete; written through the mapping with release
	 * ordering. The kernel's per-CPU memo of answers (bpf/ndc_fastpath.bpf.c) uses an answer it
	 * holds only while gen is the one read before that answer was read from the table.
	 */
	__u64 gen;
	__be32 addr4[NDC_FP_MAX_ADDRS];
	/* the answer table's (abi.h, "The answer table") */
	__u64 home_key; /* fixed for the program's life */
	__u64 geom;	/* NDC_FP_GEOM: written with one atomic store through the mapping */
	/* fail-open upstreams (NDC_FP_C_FAILOPEN): one per family, has_up* 0 for none */
	__be32 up4;
	__be16 up4_port;
	__u8 has_up4;
	__u8 has_up6;
	/* the rest: read by a table walk (a name outside the memo) or a family's own path */
	__u32 half_chunks; /* outer ndc_answers entries per half (ndc_big: half_bigs) */
	__u32 half_bigs;
	__u8 up6[16];
	__be16 up6_port;
	__u16 pad3;
	__u8 addr6[NDC_FP_MAX_ADDRS][16];
	__u8 zone[NDC_FP_NAME_MAX]; /* lowercase wire form of the cluster domain */
	__u8 zone_len;		    /* 0: no NXDOMAIN synthesis */
	__u8 pass_len;		    /* 0: none */
	__u16 pad;
	__u8 pass[NDC_FP_NAME_MAX]; /* names under this suffix are never synthesised */
	struct ndc_fp_sfx sfx;	    /* last: a suffix is read a word at a time */
};

/*
 * A fail-open flow (map ndc_flows, LRU): the pod's end and the upstream it was sent to, as the
 * upstream's replies carry them (pod = their destination). IPv4 addresses in the first 4 bytes,
 * the rest zero.
 */
struct ndc_fp_flow_key {
	__u8 pod[16];
	__u8 up[16];
	__be16 pod_port;
	__be16 up_port;
	__u8 proto; /* IPPROTO_UDP or IPPROTO_TCP */
	__u8 v6;
	__u8 pad[2];
};

struct ndc_fp_flow {
	__u8 local[16];	   /* the node-local address the pod asked: the replies' source */
	__be16 local_port; /* config port */
	__u16 pad;
	__u32 pad2;
	__u64 last_ns; /* bpf_ktime_get_ns() of the pod's last packet of the flow */
};

/*
 * Per-client counts (map ndc_clients, ABI 10; a 2-way set per CPU since ABI 11; config
 * NDC_FP_C_CLIENTS): every UDP query to a node-local address and port that the program answers or
 * passes to the stack, by its source address. NDC_FP_CLIENTS_MAX slots per CPU (a node has tens of
 * pods), not a hash map: its lookups are inlined, no helper call per query. Since ABI 13 a plain
 * array of NDC_FP_CLIENTS_MAX slots per possible CPU, CPU c's from index c * NDC_FP_CLIENTS_MAX
 * (NDC_FP_CLIENT_INDEX), 64 bytes each, the first page-aligned (BPF_F_MMAPABLE): a slot is one
 * cache line, found without the per-CPU array's pointer load (a second line per query). A client
 * may sit in two slots, NDC_FP_CLIENT_SLOT_A and _B of NDC_FP_CLIENT_HASH of its key, and is
 * counted in the one that holds it. A new client takes an empty slot of the two (queries 0), else
 * the one with fewer queries on this CPU: that slot's previous owner loses its counts on this CPU
 * (the reader sees them drop or the client vanish) and the takeover is counted (global
 * ndc_clients_taken, ndc_fastpath_clients_taken). The query itself is answered or passed as ever.
 * Each CPU has its own slots, so a client can hold different slots on different CPUs; the reader
 * sums a key's slots over CPUs. Passed queries are counted again by user space when it answers
 * them. Fragments, and queries before a config, are counted only in ndc_counters.
 */
#define NDC_FP_CLIENTS_MAX 4096 /* 1 << NDC_FP_CLIENTS_BITS */
#define NDC_FP_CLIENTS_BITS 12

/*
 * The source address: IPv6, or IPv4 mapped (::ffff:a.b.c.d, RFC 4291 2.5.5.2). 8-aligned (ABI 11):
 * the kernel reads and compares it as two 64-bit words, not 16 bytes.
 */
struct ndc_fp_client_key {
	__u8 addr[16] __attribute__((aligned(8)));
};

/* One CPU's counts: queries = answered + passed; nxdomain is part of answered. */
struct ndc_fp_client_counts {
	__u64 queries;
	__u64 answered; /* NDC_FP_HIT, NDC_FP_NODATA, NDC_FP_NXDOMAIN */
	__u64 nxdomain;
	__u64 passed; /* a pass reason: to the stack (and fail-open) */
};

/* A slot of ndc_clients (one CPU's): counts.queries 0 is empty, whatever key says. */
struct ndc_fp_client_slot {
	struct ndc_fp_client_key key;
	struct ndc_fp_client_counts counts;
	__u64 spare[2]; /* 0: a slot is a whole cache line (ABI 13) */
};

/* CPU cpu's slot s of ndc_clients. */
#define NDC_FP_CLIENT_INDEX(cpu, s) ((__u32)(cpu) << NDC_FP_CLIENTS_BITS | (s))

/*
 * A key's slots: w0, w1 its 16 bytes as two 64-bit words in the host's order, XORed and
 * multiplied by an odd constant (2^64 / golden ratio); the top bits of the product depend on
 * every bit of the key, so addresses that differ only in their last byte (pods of one node's
 * range; in the high bits of a little-endian word) spread. The two slots are the product's top
 * two 12-bit fields. Not keyed: anyone who picks source addresses can pick colliding ones, which
 * costs only counts (as a flood of addresses costs an LRU's).
 */
#define NDC_FP_CLIENT_HASH(w0, w1) (((w0) ^ (w1)) * 0x9e3779b97f4a7c15ULL)
#define NDC_FP_CLIENT_SLOTS(h) ((__u32)((h) >> (64 - 2 * NDC_FP_CLIENTS_BITS))) /* both fields */
#define NDC_FP_CLIENT_SLOTS_A(s) ((s) >> NDC_FP_CLIENTS_BITS)
#define NDC_FP_CLIENT_SLOTS_B(s) ((s) & (NDC_FP_CLIENTS_MAX - 1))
#define NDC_FP_CLIENT_SLOT_A(h) NDC_FP_CLIENT_SLOTS_A(NDC_FP_CLIENT_SLOTS(h))
#define NDC_FP_CLIENT_SLOT_B(h) NDC_FP_CLIENT_SLOTS_B(NDC_FP_CLIENT_SLOTS(h))

/*
 * A sampled answer (ring buffer ndc_samples, ABI 10; config sample): the reply's DNS message as
 * sent, its first len bytes (a reply over NDC_FP_SAMPLE_MSG_MAX bytes is cut there), with its
 * client and the time.
 */
#define NDC_FP_SAMPLE_MSG_MAX 512
#define NDC_FP_SAMPLES_BYTES (512 * 1024) /* the ring: about 950 samples */

struct ndc_fp_sample_rec {
	__u64 ktime_ns;	 /* bpf_ktime_get_ns() (CLOCK_MONOTONIC) when it was sent */
	__u8 client[16]; /* as struct ndc_fp_client_key */
	__be16 client_port;
	__u16 len; /* bytes of msg */
	__u32 pad;
	__u8 msg[NDC_FP_SAMPLE_MSG_MAX];
};

/* Per-CPU counters, indexed by enum ndc_fp_counter. */
enum ndc_fp_counter {
	NDC_FP_HIT = 0,	     /* answered with answer RRs (exact entry, or an ExternalName CNAME) */
	NDC_FP_NODATA,	     /* answered NODATA from a NDC_FP_QTYPE_OTHER entry (ANCOUNT 0) */
	NDC_FP_NXDOMAIN,     /* synthesised NXDOMAIN */
	NDC_FP_PASS_MISS,    /* not in the table */
	NDC_FP_PASS_EXPIRED, /* entry expired: user space refreshes it */
	NDC_FP_PASS_EDNS,    /* EDNS options, DO bit, version > 0 */
	NDC_FP_PASS_SIZE,    /* reply would exceed the client's limit or the buffer */
	NDC_FP_PASS_FORMAT,  /* QDCOUNT != 1, not a plain query, malformed, name too long, a
			      * class or type user space refuses (ndc_qtype_verdict) */
	NDC_FP_PASS_FRAG,    /* IP fragment or IPv4 options / IPv6 extension headers */
	NDC_FP_PASS_CONFIG,  /* no config or ABI mismatch */
	NDC_FP_FWD_UDP,	     /* fail open: a passed UDP query sent on to the upstream */
	NDC_FP_FWD_TCP,	     /* fail open: a TCP segment sent on to the upstream */
	NDC_FP_FWD_REPLY,    /* fail open: an upstream reply given the node-local source */
	NDC_FP_PASS_BUSY,    /* the entry was being rewritten while it was read */
	NDC_FP_COUNTER_MAX,
};

#ifndef __cplusplus
_Static_assert(sizeof(struct ndc_fp_key) == 16, "ndc_fp_key layout");
_Static_assert(NDC_FP_NAME_MAX <= 255, "ndc_fp_key name_len is a byte");
_Static_assert(sizeof(struct ndc_fp_value) ==
		   32 + 2 * NDC_FP_TTL_MAX + NDC_FP_NAME_MAX + NDC_FP_DATA_MAX,
	       "ndc_fp_value layout");
_Static_assert((NDC_FP_V_SFX >> NDC_FP_V_SFX_SHIFT) == NDC_FP_SFX_MAX,
	       "every value of the flag bits names a suffix of config");
_Static_assert(sizeof(struct ndc_fp_sfx) == 8 + NDC_FP_SFX_MAX * NDC_FP_NAME_MAX,
	       "ndc_fp_sfx layout");
_Static_assert(sizeof(struct ndc_fp_config) == 16 + 4 * NDC_FP_MAX_ADDRS + 16 * NDC_FP_MAX_ADDRS +
						   2 * NDC_FP_NAME_MAX + 64 +
						   sizeof(struct ndc_fp_sfx),
	       "ndc_fp_config layout");
_Static_assert(__builtin_offsetof(struct ndc_fp_config, has_up6) + 1 == 64,
	       "ndc_fp_config: what every packet reads, on its first line");
_Static_assert(sizeof(struct ndc_fp_flow_key) == 40, "ndc_fp_flow_key layout");
_Static_assert(sizeof(struct ndc_fp_flow) == 32, "ndc_fp_flow layout");
_Static_assert(sizeof(struct ndc_fp_client_key) == 16, "ndc_fp_client_key layout");
_Static_assert(sizeof(struct ndc_fp_client_counts) == 32, "ndc_fp_client_counts layout");
_Static_assert(sizeof(struct ndc_fp_client_slot) == 64, "ndc_fp_client_slot layout");
_Static_assert(_Alignof(struct ndc_fp_client_key) == 8, "ndc_fp_client_key: two 64-bit words");
_Static_assert(NDC_FP_CLIENTS_MAX == 1 << NDC_FP_CLIENTS_BITS, "the client slots are 2^bits");
_Static_assert(sizeof(struct ndc_fp_sample_rec) == 32 + NDC_FP_SAMPLE_MSG_MAX,
	       "ndc_fp_sample_rec layout");
_Static_assert(sizeof(struct ndc_fp_slot) == 128, "ndc_fp_slot layout: two cache lines");
_Static_assert(NDC_FP_CHUNK_TAG_SLOTS * sizeof(struct ndc_fp_slot) == NDC_FP_CHUNK_BUCKETS * 8,
	       "a chunk's tag words fill its tag slots");
_Static_assert(sizeof(struct ndc_fp_big) % 64 == 0, "ndc_fp_big layout: whole cache lines");
_Static_assert(sizeof(struct ndc_fp_value) <= NDC_FP_EXT_MAX * NDC_FP_EXT_BYTES,
	       "a big answer fits its records");
_Static_assert(NDC_FP_SLOT_BYTES % 8 == 0, "slot bytes are read as words");
#endif

#endif
