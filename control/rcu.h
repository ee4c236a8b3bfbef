/* SPDX-License-Identifier: MIT */
/*
 * Read-copy-update for the record table: readers (the socket workers, one lookup per query) mark
 * themselves in a per-thread slot, without locks or shared writes; the writer swaps the pointer,
 * waits until no reader is still inside a section that began before the swap, then frees the old
 * table. Readers never block and never see half an update.
 */
#ifndef NDC_RCU_H
#define NDC_RCU_H

#include <stdatomic.h>
#include <stdint.h>

#define NDC_RCU_MAX_THREADS 512

struct ndc_rcu_slot {
	_Atomic uint64_t epoch; /* 0: outside; else the epoch the section started in */
	char pad[56];
} __attribute__((aligned(64)));

extern struct ndc_rcu_slot ndc_rcu_slots[NDC_RCU_MAX_THREADS];
extern _Atomic uint64_t ndc_rcu_epoch;
extern _Thread_local int ndc_rcu_self;

/* Registers the calling thread on first use; -1 when every slot is taken (then the thread
 * falls back to a global lock-free but waiting path: see ndc_rcu_read_lock). */
int ndc_rcu_register(void);

static inline void ndc_rcu_read_lock(void)
{
	int i = ndc_rcu_self ? ndc_rcu_self - 1 : ndc_rcu_register();

	if (i >= 0)
		atomic_store_explicit(&ndc_rcu_slots[i].epoch,
				      atomic_load_explicit(&ndc_rcu_epoch, memory_order_relaxed),
				      memory_order_relaxed);
	/* The slot store must be visible before the pointer is read (store-load order). */
	atomic_thread_fence(memory_order_seq_cst);
}

static inline void ndc_rcu_read_unlock(void)
{
	if (ndc_rcu_self > 0)
		atomic_store_explicit(&ndc_rcu_slots[ndc_rcu_self - 1].epoch, 0,
				      memory_order_release);
}

/* Waits until every read section that started before the call has ended. Writers only. */
void ndc_rcu_synchronize(void);

#endif
