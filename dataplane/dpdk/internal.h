/* SPDX-License-Identifier: MIT */
/*
 * Between the DPDK backend's files; the rest of the program uses dpdk.h. Calls run one way:
 * dpdk.c (public API) -> port.c (EAL, ports, taps, pool), worker.c (lcores) -> answer.c (a frame
 * answered in place by the BPF program's own answer core, bpf/ndc_answer.h) -> table.c (the answer
 * table). answer.c and table.c include no DPDK header in their interface, so the answer can be
 * tested on a plain buffer (tests/bpf/fuzz_diff.c runs it beside the kernel program).
 */
#ifndef NDC_DPDK_INTERNAL_H
#define NDC_DPDK_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ndc/abi.h>
#include <ndc/dns_wire.h>

struct rte_mbuf;
struct rte_rcu_qsbr;

/* ---------------------------------------------------------------------------------------------
 * The answer table (table.c): an rte_hash of struct ndc_fp_key -> struct ndc_fp_value, created
 * with RTE_HASH_EXTRA_FLAGS_RW_CONCURRENCY_LF, so lookups take no lock and never wait for a
 * writer. Values are never changed in place: a publish swaps in a new value and the old one (and
 * a deleted key's value, through the hash's own RCU defer queue) is freed only once every reader
 * lcore has reported a quiescent state (rte_rcu_qsbr) after the swap. The hash itself follows the
 * table's content: it starts small and is replaced whole by a bigger or smaller one (filled
 * beside it, switched to atomically, freed after the same grace period) as keys come and go.
 */
struct ndc_dpdk_table;

struct ndc_dpdk_table_opts {
	uint32_t max_entries;		    /* the cap (dataplane.table_size); 0: 65536 */
	uint32_t max_readers;		    /* QSBR thread ids 0 .. max_readers - 1; at least 1 */
	const struct ndc_fp_config *config; /* addresses, port, zone, pass; flags but SYNCED */
};

/* 0, -EINVAL, -ENOMEM, or -rte_errno (the EAL must be initialised). */
int ndc_dpdk_table_new(const struct ndc_dpdk_table_opts *o, struct ndc_dpdk_table **ret);
/* Readers must have stopped. NULL is fine. */
void ndc_dpdk_table_free(struct ndc_dpdk_table *t);
/* Readers register with it (rte_rcu_qsbr_thread_register, online, quiescent, offline). */
struct rte_rcu_qsbr *ndc_dpdk_table_qsbr(struct ndc_dpdk_table *t);

/*
 * The table's size, as the kernel's reports it (fastpath.h, ndc_fastpath_table_stats): keys in
 * it, keys it may hold (the cap), keys its hash is made for now, bytes it takes now (the hash's
 * EAL memory as measured when it was made, and the values), bytes its keys need (a key and a
 * value each), and how often it was rebuilt to grow or shrink. Any thread.
 */
struct ndc_dpdk_table_stats {
	uint64_t keys, max_keys, slots, bytes, needed, rebuilds;
};
void ndc_dpdk_table_stats(struct ndc_dpdk_table *t, struct ndc_dpdk_table_stats *ret);

/* Writers (any thread; serialised inside): the semantics of fastpath.h's calls of those names. */
int ndc_dpdk_table_publish(struct ndc_dpdk_table *t, const uint8_t *lname, size_t nlen,
			   uint16_t qtype, const struct ndc_answer *a, uint32_t ttl_s);
int ndc_dpdk_table_publish_pass(struct ndc_dpdk_table *t, const uint8_t *lname, size_t nlen);
int ndc_dpdk_table_unpublish(struct ndc_dpdk_table *t, const uint8_t *lname, size_t nlen,
			     uint16_t qtype);
int ndc_dpdk_table_unpublish_expired(struct ndc_dpdk_table *t, const struct ndc_fp_key *k);
int ndc_dpdk_table_set_nx(struct ndc_dpdk_table *t, const struct ndc_answer *nx);
int ndc_dpdk_table_set_synced(struct ndc_dpdk_table *t, bool synced);

/*
 * Readers: what they return stays valid until the calling lcore's next quiescent report.
 * lookup: the entry at k, or NULL. nx: the NXDOMAIN template, or NULL before one is published.
 */
const struct ndc_fp_value *ndc_dpdk_table_lookup(const struct ndc_dpdk_table *t,
						 const struct ndc_fp_key *k);
const struct ndc_fp_value *ndc_dpdk_table_nx(const struct ndc_dpdk_table *t);
/* The config; its flags word changes (SYNCED) and is read with ndc_dpdk_table_flags. */
const struct ndc_fp_config *ndc_dpdk_table_config(const struct ndc_dpdk_table *t);
uint32_t ndc_dpdk_table_flags(const struct ndc_dpdk_table *t);

/* ---------------------------------------------------------------------------------------------
 * The answer (answer.c).
 */
/* Not a UDP datagram to a node-local address and port: the kernel's, not counted as passed. */
#define NDC_DP_NOT_OURS NDC_FP_COUNTER_MAX

/*
 * Answers the Ethernet frame at data (len bytes; room bytes writable from data) in place, with
 * the kernel's answer core (bpf/ndc_answer.h, the lookup order of include/ndc/abi.h). Returns what
 * to count: NDC_FP_HIT, NDC_FP_NODATA or NDC_FP_NXDOMAIN when the reply has been written over the
 * query (its length in *ret_len: the frame is trimmed to the reply's datagram); a pass reason
 * (NDC_FP_PASS_*) or NDC_DP_NOT_OURS with the frame untouched. now_ns: CLOCK_MONOTONIC, the
 * clock of the values' insert_ns and expire_ns.
 */
int ndc_dpdk_answer(const struct ndc_dpdk_table *t, uint8_t *data, uint32_t len, uint32_t room,
		    uint64_t now_ns, uint32_t *ret_len);

static inline bool ndc_dpdk_answered(int verdict)
{
	return verdict == NDC_FP_HIT || verdict == NDC_FP_NODATA || verdict == NDC_FP_NXDOMAIN;
}

/* ---------------------------------------------------------------------------------------------
 * Lcores (worker.c). A unit is one RX queue of a data port with its exception path: replies go
 * out of the same queue, the rest to the same queue of the port's tap, and what the kernel sends
 * on that tap queue goes out of the port's queue. Each TX queue is used by one lcore only.
 */
struct ndc_dpdk_counters {
	uint64_t fp[NDC_FP_COUNTER_MAX]; /* answers and passes, as the fast path counts them */
	uint64_t rx;			 /* frames received on the port */
	uint64_t tx;			 /* frames sent on the port: replies and the kernel's */
	uint64_t to_kernel;		 /* frames sent to the tap */
	uint64_t from_kernel;		 /* frames received from the tap */
	uint64_t dropped_tx;		 /* replies and kernel frames the port did not take */
	uint64_t dropped_kernel;	 /* frames the tap did not take */
} __attribute__((aligned(64)));

struct ndc_dpdk_unit {
	uint16_t port;
	uint16_t tap;
	uint16_t queue;
	unsigned int lcore;
	struct ndc_dpdk_counters c; /* written by that lcore only */
};

struct ndc_dpdk_worker {
	unsigned int lcore;
	unsigned int qsbr_id; /* the lcore's thread id in the table's QSBR */
	uint16_t burst;
	uint32_t poll_sleep_us;
	const struct ndc_dpdk_table *table;
	struct rte_rcu_qsbr *qsbr;
	const volatile bool *stop;
	size_t n_units;
	struct ndc_dpdk_unit **units;
};

/* The lcore's loop, for rte_eal_remote_launch: polls until *w->stop. Returns 0. */
int ndc_dpdk_worker_main(void *w);

/*
 * One received frame through ndc_dpdk_answer: on an answer the mbuf's lengths are the reply's.
 * Frames in more than one segment are the kernel's (NDC_DP_NOT_OURS).
 */
int ndc_dpdk_answer_mbuf(const struct ndc_dpdk_table *t, struct rte_mbuf *m, uint64_t now_ns);

/* A relaxed read of a counter an lcore writes, for metrics. */
static inline uint64_t ndc_dpdk_read(const uint64_t *c)
{
	return __atomic_load_n(c, __ATOMIC_RELAXED);
}

/* ---------------------------------------------------------------------------------------------
 * EAL, ports, taps, pool (port.c).
 */
struct rte_mempool;

/*
 * rte_eal_init with argv[0] "ndcache", args, and the defaults dpdk.h lists for what args leaves
 * out; lcores: CPUs for worker lcores (n 0: the last CPU the caller may run on). The caller's CPU
 * affinity is restored afterwards. 0 or -errno (logged).
 */
int ndc_dpdk_eal_init(size_t n_args, char *const *args, size_t n_lcores, const uint16_t *lcores);

/* Configures queues RX/TX queue pairs of port on pool, promiscuous, started. 0 or -errno. */
int ndc_dpdk_port_setup(uint16_t port, uint16_t queues, struct rte_mempool *pool);

/*
 * Creates the net_tap named ifname for port's exception path, with port's MAC address (the kernel
 * answers ARP and ND with the address the peers already know), set up like a port. 0 or -errno.
 */
int ndc_dpdk_tap_create(uint16_t port, const char *ifname, uint16_t queues,
			struct rte_mempool *pool, uint16_t *ret_tap);

/* Stops and closes port (a tap's kernel interface goes with it). */
void ndc_dpdk_port_close(uint16_t port);

#endif
