/* SPDX-License-Identifier: MIT */
/*
 * Between fastpath.c (loader, pins, publisher), link_watch.c (attach manager) and table.c (the
 * answer table's layout, writer and readers). Not for other modules: they use fastpath.h.
 */
#ifndef NDC_FASTPATH_INTERNAL_H
#define NDC_FASTPATH_INTERNAL_H

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
 * The answer table of a loaded program, mapped for writing (abi.h, "The answer table"). Every
 * call takes the lock: one writer at a time, as the sequence counters require.
 */
struct ndc_fp_table {
	struct ndc_fp_slot *slots;
	struct ndc_fp_big *bigs;
	struct ndc_fp_big *nx;
	uint32_t n_slots, n_big;
	uint64_t home_key;
	uint32_t max_entries; /* keys at most: the table's size as configured */
	uint32_t live;	      /* keys now */
	uint32_t *big_free;   /* a stack of the free big answers */
	uint32_t n_big_free;
	size_t slots_len, bigs_len, nx_len;
	pthread_mutex_t lock;
	bool mapped;
};

/* The sizes of ndc_answers (slots) and ndc_big for max_entries keys; -EINVAL for 0 or too many. */
int ndc_fp_table_sizes(uint32_t max_entries, uint32_t *ret_slots, uint32_t *ret_big);

/*
 * Maps the three maps (sized by ndc_fp_table_sizes, empty) of a program loaded with home_key;
 * 0 or a negative errno.
 */
int ndc_fp_table_map(struct ndc_fp_table *t, int answers_fd, int big_fd, int nx_fd,
		     uint32_t max_entries, uint64_t home_key);
void ndc_fp_table_unmap(struct ndc_fp_table *t); /* a zeroed or unmapped t is fine */

/*
 * Writes v (its name included) at k, in k's slot when there is one, else in a free one. -ENOSPC:
 * the table holds max_entries keys, none of the slots a walk from k's home reaches is free, no big
 * answer is free for a v too big for a slot, or (unless any_name) k holds another name than v's.
 */
int ndc_fp_table_put(struct ndc_fp_table *t, const struct ndc_fp_key *k,
		     const struct ndc_fp_value *v, bool any_name);

/* The value at k (whichever name it holds): 0 or -ENOENT. */
int ndc_fp_table_get(struct ndc_fp_table *t, const struct ndc_fp_key *k, struct ndc_fp_value *ret);

/*
 * Removes k: only when it holds the name given (else -ENOENT), unless name is NULL; with
 * expired_at (a CLOCK_MONOTONIC time in ns, not 0) only when it has expired by then (else
 * -EAGAIN, also for an entry that never expires). -ENOENT when k is not there.
 */
int ndc_fp_table_del(struct ndc_fp_table *t, const struct ndc_fp_key *k, const uint8_t *name,
		     size_t name_len, uint64_t expired_at);

/* The NXDOMAIN template. */
int ndc_fp_table_set_nx(struct ndc_fp_table *t, const struct ndc_fp_value *v);

/*
 * Through the maps' fds (pinned, or another process's; the config map gives the home key): the
 * value at k (0, -ENOENT, -EINVAL when they are not one table's, -errno); the number of keys.
 */
int ndc_fp_table_read(int answers_fd, int big_fd, int config_fd, const struct ndc_fp_key *k,
		      struct ndc_fp_value *ret);
int ndc_fp_table_count(int answers_fd, size_t *ret);

#endif
