/* SPDX-License-Identifier: MIT */
/*
 * Between fastpath.c (loader, pins, publisher), link_watch.c (attach manager), table.c (the
 * answer table's writer), table_walk.c (its walk and readers) and slot.c (an entry's layout). Not
 * for other modules: they use fastpath.h.
 */
#ifndef NDC_FASTPATH_INTERNAL_H
#define NDC_FASTPATH_INTERNAL_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fastpath/fastpath.h"

struct ndc_link_watch;

struct ndc_link_watch_opts {
	enum ndc_fp_attach mode; /* TC or XDP */
	int prog_fd;		 /* the program of that mode; owned by the caller */
	int egress_fd;		 /* tc egress (fail-open replies); 0 or -1: none */
	int ingress_fd;		 /* XDP mode: tc ingress beside XDP (fail-open); 0 or -1: none */
	size_t n_patterns;
	char *const *patterns; /* copied */
	enum ndc_fp_tc_order tc_order;
	/* where fail-open's egress tcx links are pinned (the fast path's pin directory); NULL: none
	 */
	const char *pin_dir;
	/*
	 * The gauge ndc_fastpath_foreign_programs reads (atomically): others' programs the watch's
	 * links run us in front of, kept up to date as links and filters come and go; the caller's.
	 */
	uint64_t *foreign;
};

/*
 * Attaches to every matching link present now (before returning), then starts a thread that
 * attaches to links as they appear. Returns 0 or a negative errno (socket, thread, memory); a
 * link that refuses the program is logged and skipped, not an error.
 */
int ndc_link_watch_start(const struct ndc_link_watch_opts *opts, struct ndc_link_watch **ret);

/*
 * Stops the thread; with detach, removes from every link still present what is still ours (a
 * successor's programs stay); frees. NULL is fine.
 */
void ndc_link_watch_stop(struct ndc_link_watch *lw, bool detach);

/*
 * Fail-open's egress program in a tcx link pinned in pin_dir (link_tcx.c). place: ours on
 * ifindex's egress, swapped into the pinned link of an earlier agent or in a new one, its
 * descriptor in *ret_link; 0 or a negative errno (-EINVAL: a kernel without tcx). close: our
 * descriptor, and with unpin the pin (the attachment) if the link still holds prog_id (-EEXIST:
 * a successor's). unpin: the pin of an interface that is gone. sweep: every pin whose interface
 * is gone. ids_readable: whether program ids can be read (CAP_SYS_ADMIN), for the clean-up of
 * programs attached without a link.
 */
int ndc_tcx_egress_place(const char *pin_dir, int ifindex, int prog_fd, uint32_t prog_id,
			 bool ids_readable, int *ret_link);
int ndc_tcx_egress_close(const char *pin_dir, int ifindex, int link_fd, uint32_t prog_id,
			 bool unpin);
void ndc_tcx_egress_unpin(const char *pin_dir, int ifindex);
void ndc_tcx_egress_sweep(const char *pin_dir);
bool ndc_tcx_ids_readable(uint32_t id);

/* The two kinds of chunk of the answer table (abi.h, "The answer table"). */
enum ndc_fp_chunk_kind { NDC_FP_CHUNK_SLOTS, NDC_FP_CHUNK_BIG };

/*
 * Where the table's chunks come from: the loader's BPF maps, or plain memory in unit tests.
 * add: a new zeroed chunk of kind for outer index idx, mapped at *ret (ndc_fp_chunk_bytes long);
 * 0 or a negative errno. It is visible to readers after the next commit, which puts every chunk
 * added since in its place at once (the kernel waits for an RCU grace period after each update of
 * an array of maps: one per commit, not one per chunk). drop: the chunk at idx goes (no reader
 * reaches it any more; its outer entry may be cleared later, or overwritten by a commit).
 * set_geom: the readers' config geom, one atomic store. wait_readers: returns once no reader can
 * still be using what it found through the geom before. changed (may be NULL): after every write
 * that can change what a reader finds (a slot, a template, the geom), once it is complete: the
 * kernel's config gen, which tells its per-CPU memo of answers whether they still hold (abi.h).
 */
struct ndc_fp_table_ops {
	int (*add)(void *ctx, enum ndc_fp_chunk_kind kind, uint32_t idx, void **ret);
	int (*commit)(void *ctx);
	void (*drop)(void *ctx, enum ndc_fp_chunk_kind kind, uint32_t idx, void *p);
	void (*set_geom)(void *ctx, uint64_t geom);
	void (*wait_readers)(void *ctx);
	void (*changed)(void *ctx);
};

/* One half of the outer maps: a whole table, live or being built. */
struct ndc_fp_half {
	void **chunks; /* [half_chunks]: the first n_chunks mapped */
	uint32_t n_chunks, n_buckets;
	/*
	 * Regions (abi.h): with rare_base, the common one is [0, rare_base) and the rare one
	 * [rare_base, n_buckets); 0: one region (ndc_fp_half_common).
	 */
	uint32_t rare_base;
	void **bigs; /* [half_bigs]: the first n_big_chunks mapped */
	uint32_t n_big_chunks;
	/*
	 * Big answers' records (abi.h): runs freed, a stack per length (1 to NDC_FP_EXT_MAX); none
	 * used at or past bump yet. big_used: records in use.
	 */
	uint32_t *big_free[NDC_FP_EXT_MAX];
	uint32_t n_big_free[NDC_FP_EXT_MAX], cap_big_free[NDC_FP_EXT_MAX];
	uint32_t bump, big_used;
	uint32_t live, overflows; /* keys, and buckets flagged NDC_FP_BUCKET_OVERFLOW */
	uint32_t live_rare;	  /* keys of the rare region */
};

/*
 * The answer table of a loaded program, written through its chunks' mappings. Every call takes
 * the lock: one writer at a time, as the sequence counters require.
 */
struct ndc_fp_table {
	const struct ndc_fp_table_ops *ops;
	void *ctx;
	uint64_t home_key;
	uint32_t max_entries;		 /* keys at most: dataplane.table_size */
	uint32_t half_chunks, half_bigs; /* outer entries per half */
	struct ndc_fp_half h[2];
	int cur; /* the live half */
	uint64_t rebuilds;
	/* the zone's NODATA authority (abi.h, NDC_FP_V_SOA) from the NXDOMAIN template; len 0: none
	 */
	struct ndc_fp_value soa;
	struct ndc_fp_sfx sfx; /* the suffixes slots leave out (config sfx); none until set */
	pthread_mutex_t lock;
	bool inited;
};

/* The common region's buckets of n with the rare one from rare_base: all n while it is 0. */
static inline uint32_t ndc_fp_common_of(uint32_t n_buckets, uint32_t rare_base)
{
	return rare_base ? rare_base : n_buckets;
}

/* The common region's buckets of half h. */
static inline uint32_t ndc_fp_half_common(const struct ndc_fp_half *h)
{
	return ndc_fp_common_of(h->n_buckets, h->rare_base);
}

/* The region of the entry in slot s (abi.h: NDC_FP_V_RARE). */
static inline uint8_t ndc_fp_slot_region(const struct ndc_fp_slot *s)
{
	return s->flags & NDC_FP_V_RARE ? NDC_FP_REGION_RARE : NDC_FP_REGION_COMMON;
}

/* The zone's NODATA authority, or NULL before the NXDOMAIN template gave one. */
static inline const struct ndc_fp_value *ndc_fp_table_soa(const struct ndc_fp_table *t)
{
	return t->soa.len ? &t->soa : NULL;
}

/* A half's tag word of bucket b, slot j of bucket b, big record i (abi.h: a chunk's layout). */
static inline uint64_t *ndc_fp_tag_word(const struct ndc_fp_half *h, uint32_t b)
{
	return (uint64_t *)h->chunks[b / NDC_FP_CHUNK_BUCKETS] + b % NDC_FP_CHUNK_BUCKETS;
}

static inline struct ndc_fp_slot *ndc_fp_slot_of(const struct ndc_fp_half *h, uint32_t b,
						 uint32_t j)
{
	struct ndc_fp_slot *c = h->chunks[b / NDC_FP_CHUNK_BUCKETS];

	return c + NDC_FP_CHUNK_TAG_SLOTS + (b % NDC_FP_CHUNK_BUCKETS) * NDC_FP_BUCKET + j;
}

static inline struct ndc_fp_ext *ndc_fp_big_of(const struct ndc_fp_half *h, uint32_t i)
{
	return (struct ndc_fp_ext *)h->bigs[i / NDC_FP_BIG_CHUNK] + i % NDC_FP_BIG_CHUNK;
}

/* Slot j's tag in a tag word; whether the word's bucket overflowed. */
static inline uint8_t ndc_fp_tag_at(uint64_t tags, uint32_t j)
{
	return (uint8_t)(tags >> (8 * j));
}

static inline bool ndc_fp_overflowed(uint64_t tags)
{
	return tags >> 56 & NDC_FP_BUCKET_OVERFLOW;
}

/*
 * The walk (table_walk.c), the kernel's over any way of reading a half: its mappings
 * (ndc_fp_reader_mapped, the writer's) or the maps' fds (ndc_fp_table_read).
 */
struct ndc_fp_reader {
	int (*tags)(const struct ndc_fp_reader *r, uint32_t b, uint64_t *ret);
	int (*slot)(const struct ndc_fp_reader *r, uint32_t b, uint32_t j, struct ndc_fp_slot *ret);
	int (*big)(const struct ndc_fp_reader *r, uint32_t i, struct ndc_fp_value *ret);
	uint32_t n_buckets, rare_base; /* rare_base 0: one region */
	uint64_t home_key;
	const struct ndc_fp_value *soa;		   /* for NODATA by reference; NULL: none */
	const struct ndc_fp_sfx *sfx;		   /* the suffixes slots leave out */
	const struct ndc_fp_half *h;		   /* mapped */
	int answers_fd, big_fd, half, half_chunks; /* or through fds */
	int half_bigs;
};

/* Where a walk found k, or where k may go (p: buckets from the home bucket). */
struct ndc_fp_place {
	uint32_t b, j, p;
};

/* A reader of half of t through the writer's mappings (the caller holds t's lock). */
struct ndc_fp_reader ndc_fp_reader_mapped(const struct ndc_fp_table *t, int half);

/*
 * ndc_fp_walk: walks k's buckets as the kernel does: 0 with the slot holding k (its tag, check,
 * qtype and name length: the kernel's match) at *ret_at and in *ret_slot, or -ENOENT, or an error
 * of the reader. ndc_fp_walk_decode: the value in slot s, which a walk found (its big answer read
 * through r). ndc_fp_walk_get: both, the value at k.
 */
int ndc_fp_walk(const struct ndc_fp_reader *r, const struct ndc_fp_key *k,
		struct ndc_fp_place *ret_at, struct ndc_fp_slot *ret_slot);
int ndc_fp_walk_decode(const struct ndc_fp_reader *r, const struct ndc_fp_slot *s,
		       struct ndc_fp_value *ret);
int ndc_fp_walk_get(const struct ndc_fp_reader *r, const struct ndc_fp_key *k,
		    struct ndc_fp_value *ret);

/* What the table holds and takes now (bytes: its chunks; needed: its keys' slots and bigs). */
struct ndc_fp_table_usage {
	uint64_t keys, max_keys, slots, chunks, big_chunks, bigs, bytes, needed, rebuilds;
	uint64_t rare_keys, common_slots;
};

/* The bytes of a chunk of kind (its map's data; the kernel adds a page of its own per map). */
size_t ndc_fp_chunk_bytes(enum ndc_fp_chunk_kind kind);

/*
 * An empty table of one chunk in half 0 (geom set): 0, -EINVAL (a zero size), -ENOMEM, or the
 * ops' error. max_entries caps the keys; half_chunks and half_bigs are the outer maps' entries
 * per half.
 */
int ndc_fp_table_init(struct ndc_fp_table *t, const struct ndc_fp_table_ops *ops, void *ctx,
		      uint32_t max_entries, uint32_t half_chunks, uint32_t half_bigs,
		      uint64_t home_key);
void ndc_fp_table_fini(struct ndc_fp_table *t); /* drops every chunk; a zeroed t is fine */
/* The suffixes slots may leave out (config sfx, as the kernel reads it): before any put. */
void ndc_fp_table_set_sfx(struct ndc_fp_table *t, const struct ndc_fp_sfx *x);
/* Frees what user space keeps of the table, its chunks left to whoever holds them (the caller
 * unmaps them first); a zeroed t is fine. */
void ndc_fp_table_forget(struct ndc_fp_table *t);

/*
 * Writes v (its name included) at k, in k's slot when there is one, else in a free one, growing
 * the table when it needs room. -ENOSPC: the table holds max_entries keys, it cannot grow (its
 * outer maps are full, or no memory), or (unless any_name) k holds another name than v's.
 */
int ndc_fp_table_put(struct ndc_fp_table *t, const struct ndc_fp_key *k,
		     const struct ndc_fp_value *v, bool any_name);

/*
 * A rebuild at the present size (for tests: a table that never grew has one region until it is
 * rebuilt): 0, or the error of a rebuild, which leaves the table as it was.
 */
int ndc_fp_table_rebuild(struct ndc_fp_table *t);

/* The value at k (whichever name it holds): 0 or -ENOENT. */
int ndc_fp_table_get(struct ndc_fp_table *t, const struct ndc_fp_key *k, struct ndc_fp_value *ret);

/* The kernel's hit count of the entry at k holding name: 0, -ENOENT. */
int ndc_fp_table_hits(struct ndc_fp_table *t, const struct ndc_fp_key *k, const uint8_t *name,
		      size_t name_len, uint32_t *ret);

/*
 * Removes k: only when it holds the name given (else -ENOENT), unless name is NULL; with
 * expired_at (a CLOCK_MONOTONIC time in ns, not 0) only when it has expired by then (else
 * -EAGAIN, also for an entry that never expires). -ENOENT when k is not there. The table shrinks
 * after it when its loads say so.
 */
int ndc_fp_table_del(struct ndc_fp_table *t, const struct ndc_fp_key *k, const uint8_t *name,
		     size_t name_len, uint64_t expired_at);

/*
 * One entry's layout (slot.c). ndc_fp_sfx_pick: the suffix of x a name's slot leaves out (abi.h,
 * NDC_FP_V_SFX; x NULL: none) and the bytes it keeps. ndc_fp_slot_fits: whether v goes in a slot's
 * bytes, and where its data and TTL offsets start there. ndc_fp_slot_encode: the answer part of
 * slot image s for v (in its bytes when in_slot, by reference to the NODATA authority when soa,
 * else pointing at big record b); ndc_fp_slot_decode: back (b: the big answer, soa: the NODATA
 * authority; -EIO when s is not consistent). ndc_fp_soa_template: the NODATA authority from the
 * NXDOMAIN template (-EINVAL: not one whole SOA RR); ndc_fp_soa_fill: its data for a question of
 * qlen bytes; ndc_fp_soa_matches: whether v is a NODATA with exactly that authority (tpl NULL: no).
 * ndc_fp_ext_count: records a big answer takes; ndc_fp_ext_decode: the big answer from its
 * records (avail of them at most; -EIO when its lengths do not fit).
 */
uint32_t ndc_fp_sfx_pick(const struct ndc_fp_sfx *x, const uint8_t *name, uint32_t len,
			 uint32_t *ret_plen);
bool ndc_fp_slot_fits(const struct ndc_fp_value *v, uint32_t plen, size_t *ret_data,
		      size_t *ret_ttl);
void ndc_fp_slot_encode(const struct ndc_fp_value *v, bool in_slot, bool soa, uint32_t b,
			uint32_t sfx, uint32_t plen, struct ndc_fp_slot *s);
int ndc_fp_slot_decode(const struct ndc_fp_slot *s, const struct ndc_fp_value *b,
		       const struct ndc_fp_value *soa, const struct ndc_fp_sfx *x,
		       struct ndc_fp_value *ret);
int ndc_fp_soa_template(const struct ndc_fp_value *nx, struct ndc_fp_value *ret);
void ndc_fp_soa_fill(const struct ndc_fp_value *tpl, size_t qlen, uint8_t *out);
bool ndc_fp_soa_matches(const struct ndc_fp_value *tpl, const struct ndc_fp_value *v);
uint32_t ndc_fp_ext_count(uint32_t len, uint32_t n_ttl);
int ndc_fp_ext_decode(const struct ndc_fp_ext *p, uint32_t avail, struct ndc_fp_value *ret);

/*
 * The NXDOMAIN template, written into nx (ndc_nx's mapping: NDC_FP_NX_ENTRIES of them) under the
 * table's lock, with the NODATA authority made from it.
 */
void ndc_fp_table_set_nx(struct ndc_fp_table *t, struct ndc_fp_big *nx,
			 const struct ndc_fp_value *v);

void ndc_fp_table_stats(struct ndc_fp_table *t, struct ndc_fp_table_usage *ret);

/*
 * Through the maps' fds (pinned, or another process's; the config map gives the geometry; nx_fd
 * ndc_nx's, for NODATA by reference: -1 makes those -EIO): the value at k (0,
 * -ENOENT, -EINVAL for another ABI, -errno); the keys in every chunk present.
 */
int ndc_fp_table_read(int answers_fd, int big_fd, int nx_fd, int config_fd,
		      const struct ndc_fp_key *k, struct ndc_fp_value *ret);
int ndc_fp_table_count(int answers_fd, size_t *ret);

/* ---- fastpath.c's state (observe.c reads the maps through it) ---- */

struct ndc_fastpath; /* the libbpf skeleton (ndc_fastpath.skel.h) */
struct ring_buffer;

/* A chunk's place: outer map (its kind) and index; the map's fd while it waits for a commit. */
struct chunk_ref {
	enum ndc_fp_chunk_kind kind;
	uint32_t idx;
	int fd;
};

struct ndc_fp {
	struct ndc_fastpath *skel;
	struct ndc_fp_config *cfg; /* ndc_config, mapped: geom and flags are written through it */
	struct ndc_fp_big *nx;	   /* ndc_nx, mapped */
	int answers_fd, big_fd;	   /* the outer maps the table's chunks go in */
	/* chunks added since the last commit: not yet in their outer map */
	struct chunk_ref *pend;
	size_t n_pend, cap_pend;
	/*
	 * Outer entries of dropped chunks, cleared one by one by the reaper thread: each delete
	 * from an array of maps waits for an RCU grace period, which the table's writer should not.
	 */
	struct chunk_ref *reap;
	size_t n_reap, cap_reap;
	pthread_mutex_t reap_lock; /* the reap list and reaping */
	pthread_cond_t reap_cond;
	struct chunk_ref reaping; /* being cleared now, outside the lock (fd 0); else fd -1 */
	pthread_t reaper;
	bool reaper_started, reap_stop;
	struct ndc_link_watch *watch;
	struct ndc_link_watch_opts watch_opts; /* mode and patterns, for ndc_fastpath_attach */
	uint64_t foreign;		       /* the link watch's gauge (watch_opts.foreign) */
	char pin_dir[PATH_MAX];
	bool made_dir; /* we created pin_dir: remove it on close if empty */
	bool pinned;
	struct ndc_fp_table table;
	int config_fd;
	int counters_fd;
	/*
	 * The scratch's read-only mapping (ndc_scratch: a value per possible CPU, stride bytes
	 * apart), for the answer core's counts at counts_at of each (bpf/ndc_fastpath.bpf.c).
	 */
	const uint8_t *scratch;
	size_t scratch_len, scratch_stride;
	uint32_t scratch_cpus, counts_at;
	/* sampled answers: the ring's reader, and the poll's callback while it runs */
	struct ring_buffer *samples;
	void (*sample_cb)(const struct ndc_fp_sample *s, void *arg);
	void *sample_arg;
};

/* ---- observe.c ---- */

/*
 * The config words of what the kernel shows: NDC_FP_C_CLIENTS set in or cleared from *flags, the
 * sample rate as a threshold against a random 32-bit number. -EINVAL (logged) for a rate outside
 * [0, 1].
 */
int ndc_fp_observe_words(bool clients, double rate, uint32_t *flags, uint32_t *ret_sample);
/* The ring's callback (ctx: the struct ndc_fp): a record of ndc_samples to the poll's caller. */
int ndc_fp_on_sample(void *ctx, void *data, size_t size);

#endif
