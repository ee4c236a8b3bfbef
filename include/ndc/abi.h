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
 *      existing name (NODATA with SOA, or the CNAME of an ExternalName service).
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
 * struct ndc_fp_big below (the answer table).
 */
#ifndef NDC_ABI_H
#define NDC_ABI_H

#include <linux/types.h>

#define NDC_ABI_VERSION 4

#define NDC_FP_NAME_MAX 128 /* longer wire names go to user space */
#define NDC_FP_DATA_MAX 512 /* bigger answers go to user space */
#define NDC_FP_TTL_MAX 16   /* RRs whose TTL the fast path counts down */
#define NDC_FP_MAX_ADDRS 4  /* node-local addresses per family */

/* qtype of the "any other type at this existing name" entry (type 0 is reserved, RFC 6895). */
#define NDC_FP_QTYPE_OTHER 0

/* Map names, also the file names under the pin directory. */
#define NDC_FP_PIN_DIR "/sys/fs/bpf/ndcache"
#define NDC_FP_MAP_ANSWERS ndc_answers /* the slots of the answer table */
#define NDC_FP_MAP_BIG ndc_big	       /* answers too big for their slot */
#define NDC_FP_MAP_NX ndc_nx
#define NDC_FP_MAP_CONFIG ndc_config
#define NDC_FP_MAP_COUNTERS ndc_counters
#define NDC_FP_MAP_FLOWS ndc_flows

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
	__u8 pad[5];   /* zero */
};

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
 * struct ndc_fp_slot or ndc_fp_big, below), and what the program copies out of the table before
 * it builds a reply.
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
 * The answer table (maps ndc_answers and ndc_big), laid out for the 10,000-name case: a hit reads
 * one 192-byte slot (for an A answer its first two cache lines, whose addresses are known at
 * once) instead of a hash bucket, then an element, then the lines of a 704-byte value one after
 * the other (tests/bench/FASTPATH.md: what that cost). Both are BPF_MAP_TYPE_ARRAY with
 * BPF_F_MMAPABLE: the verifier inlines the program's lookups (no helper call, no returns), and user
 * space writes them through a shared mapping, without a syscall per entry.
 *
 * ndc_answers: n_slots slots (twice the table's entries), open addressing with linear probing
 * from the key's home slot, ndc_fp_home(): the name hash, the type and a random key of the
 * table's own (config home_key), so that nobody can pick names that pile up at one place. A key
 * lives at most NDC_FP_PROBE_MAX - 1 slots after its home (wrapping at n_slots); a walk ends at
 * an empty slot or after NDC_FP_PROBE_MAX slots, and either proves the key absent (at a load of
 * one half the longest runs of full slots are about 40 long). Removed keys leave DELETED slots
 * (a walk goes on past them), which become EMPTY again when the slot after them is. Keys never
 * move. (The types of a name sharing one home would find NODATA and NXDOMAIN in one walk, but
 * their groups make runs long enough to leave keys without a slot at half load.)
 *
 * A slot holds the answer itself when it fits (cluster records, a single A or AAAA answer, most
 * NODATA answers): bytes = the name (zero to a multiple of 8), the data (zero to a multiple of
 * 8), and with NDC_FP_V_EXPIRES the insert and expiry times (two __u64) and the n_ttl TTL
 * offsets. Else (NDC_FP_V_BIG) big is the index of a struct ndc_fp_big in ndc_big holding the
 * whole answer, its name included.
 *
 * Torn reads: each slot has a sequence counter that the single writer (the publisher, under a
 * lock) makes odd before it changes the slot or what it points to and even again after, with
 * release ordering. A reader copies what it needs between two reads of it (acquire ordering,
 * and a read barrier before the second) and uses the copy only when both are the same even
 * value; else the query goes to user space (NDC_FP_PASS_BUSY), never to NXDOMAIN. An update of a
 * present key is made in its slot (a new big answer first, then the slot pointed at it), so it
 * never looks absent; a big answer is reused only after its slot no longer points at it, which a
 * reader still reading it sees as a changed sequence counter. ndc_nx holds one struct
 * ndc_fp_big whose own counter protects it the same way.
 */
#define NDC_FP_SLOT_BYTES 168 /* a named port's SRV answer and its name fit */
#define NDC_FP_PROBE_MAX 64

/* The home slot of (hash, qtype): a keyed multiply-xorshift, reduced to [0, n_slots). */
static inline __attribute__((always_inline)) __u32 ndc_fp_home(__u64 hash, __u16 qtype, __u64 key,
							       __u32 n_slots)
{
	__u64 h = (hash ^ key ^ (__u64)qtype << 48) * NDC_FP_HASH_MUL;

	h ^= h >> 29;
	h *= NDC_FP_HASH_MUL;
	return (__u32)(((h >> 32) * n_slots) >> 32);
}

/* struct ndc_fp_slot state */
#define NDC_FP_SLOT_EMPTY 0
#define NDC_FP_SLOT_FULL 1
#define NDC_FP_SLOT_DELETED 2

/* slot flags, besides NDC_FP_V_AA and NDC_FP_V_PASS */
#define NDC_FP_V_EXPIRES 0x40 /* bytes hold the insert and expiry times after the data */
#define NDC_FP_V_BIG 0x80     /* the answer is ndc_big[big] */

struct ndc_fp_slot {
	__u32 seq;     /* odd while the publisher writes the slot or its big answer */
	__u8 state;    /* NDC_FP_SLOT_* */
	__u8 name_len; /* the key: hash, qtype, name_len as in struct ndc_fp_key */
	__u16 qtype;
	__u64 hash;
	/* the answer when it is in bytes, as in struct ndc_fp_value */
	__u8 len;
	__u8 ancount;
	__u8 nscount;
	__u8 arcount;
	__u8 rcode;
	__u8 flags;
	__u8 n_ttl;
	__u8 pad;
	union {
		__u8 bytes[NDC_FP_SLOT_BYTES] __attribute__((aligned(8))); /* read as words */
		__u32 big;						   /* NDC_FP_V_BIG */
	};
};

struct ndc_fp_big {
	__u32 seq; /* ndc_nx's: as a slot's; in ndc_big the slot's counter covers it */
	__u32 pad;
	struct ndc_fp_value v;
	__u8 pad2[56]; /* to a multiple of 64 bytes */
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

struct ndc_fp_config {
	__u32 abi_version; /* NDC_ABI_VERSION, or the program passes everything */
	__u32 flags;	   /* NDC_FP_C_* */
	__be32 addr4[NDC_FP_MAX_ADDRS];
	__u8 addr6[NDC_FP_MAX_ADDRS][16];
	__u8 n_addr4;
	__u8 n_addr6;
	__be16 port;		    /* 53 */
	__u8 zone[NDC_FP_NAME_MAX]; /* lowercase wire form of the cluster domain */
	__u8 zone_len;		    /* 0: no NXDOMAIN synthesis */
	__u8 pass_len;		    /* 0: none */
	__u16 pad;
	__u8 pass[NDC_FP_NAME_MAX]; /* names under this suffix are never synthesised */
	/* fail-open upstreams (NDC_FP_C_FAILOPEN): one per family, has_up* 0 for none */
	__be32 up4;
	__u8 up6[16];
	__be16 up4_port;
	__be16 up6_port;
	__u8 has_up4;
	__u8 has_up6;
	__u8 pad3[6];
	/* the answer table's (abi.h, "The answer table"): fixed for the program's life */
	__u64 home_key;
	__u32 n_slots;
	__u32 pad4;
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

/* Per-CPU counters, indexed by enum ndc_fp_counter. */
enum ndc_fp_counter {
	NDC_FP_HIT = 0,	     /* answered with answer RRs (exact entry, or an ExternalName CNAME) */
	NDC_FP_NODATA,	     /* answered NODATA from a NDC_FP_QTYPE_OTHER entry (ANCOUNT 0) */
	NDC_FP_NXDOMAIN,     /* synthesised NXDOMAIN */
	NDC_FP_PASS_MISS,    /* not in the table */
	NDC_FP_PASS_EXPIRED, /* entry expired: user space refreshes it */
	NDC_FP_PASS_EDNS,    /* EDNS options, DO bit, version > 0 */
	NDC_FP_PASS_SIZE,    /* reply would exceed the client's limit or the buffer */
	NDC_FP_PASS_FORMAT,  /* QDCOUNT != 1, not a plain query, malformed, name too long */
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
_Static_assert(sizeof(struct ndc_fp_config) ==
		   16 + 4 * NDC_FP_MAX_ADDRS + 16 * NDC_FP_MAX_ADDRS + 2 * NDC_FP_NAME_MAX + 48,
	       "ndc_fp_config layout");
_Static_assert(sizeof(struct ndc_fp_flow_key) == 40, "ndc_fp_flow_key layout");
_Static_assert(sizeof(struct ndc_fp_flow) == 32, "ndc_fp_flow layout");
_Static_assert(sizeof(struct ndc_fp_slot) == 192, "ndc_fp_slot layout: whole cache lines");
_Static_assert(sizeof(struct ndc_fp_big) % 64 == 0, "ndc_fp_big layout: whole cache lines");
_Static_assert(NDC_FP_SLOT_BYTES % 8 == 0, "slot bytes are read as words");
#endif

#endif
