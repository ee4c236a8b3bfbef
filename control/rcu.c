// SPDX-License-Identifier: MIT
#include <sched.h>
#include <time.h>

#include <ndc/log.h>

#include "rcu.h"

struct ndc_rcu_slot ndc_rcu_slots[NDC_RCU_MAX_THREADS];
_Atomic uint64_t ndc_rcu_epoch = 1;
_Thread_local int ndc_rcu_self; /* slot index + 1; 0: not registered yet */

static _Atomic int next_slot;

int ndc_rcu_register(void)
{
	int i = atomic_fetch_add(&next_slot, 1);

	if (i >= NDC_RCU_MAX_THREADS) {
		/* More readers than slots: this thread reads unprotected, so say it loudly once. */
		ndc_err("rcu: more than %d reader threads", NDC_RCU_MAX_THREADS);
		ndc_rcu_self = -1;
		return -1;
	}
	ndc_rcu_self = i + 1;
	return i;
}

void ndc_rcu_synchronize(void)
{
	/* Sections that start from now on carry the new epoch and can only see the new pointer. */
	uint64_t e = atomic_fetch_add(&ndc_rcu_epoch, 1) + 1;
	int n = atomic_load(&next_slot);

	atomic_thread_fence(memory_order_seq_cst);
	if (n > NDC_RCU_MAX_THREADS)
		n = NDC_RCU_MAX_THREADS;
	for (int i = 0; i < n; i++) {
		for (;;) {
			uint64_t s =
			    atomic_load_explicit(&ndc_rcu_slots[i].epoch, memory_order_acquire);
			if (s == 0 || s >= e)
				break;
			/* A reader is inside an older section: lookups take microseconds. */
			struct timespec ts = {0, 50000};
			nanosleep(&ts, NULL);
		}
	}
}
