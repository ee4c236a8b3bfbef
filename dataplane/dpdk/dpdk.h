/* SPDX-License-Identifier: MIT */
/*
 * The DPDK dataplane (dataplane.mode: dpdk): poll-mode ports that DNS arrives on, answered in the
 * mbuf from a lock-free rte_hash that holds exactly what the BPF fast path's table holds (the
 * include/ndc/abi.h key and value, published by the same publisher), parsed with the BPF
 * program's own header-only helpers (bpf/ndc_parse.h, ndc_dns.h, ndc_csum.h, ndc_swap.h), so
 * both fast paths answer the same questions with the same bytes and pass the rest for the same
 * reasons. Everything not answered goes to the kernel through a net_tap port per data port, and
 * what the kernel sends there goes out of that data port: ARP, ND, TCP, misses (answered by the
 * socket path) and anything else.
 *
 * Threads: ndc_dpdk_open runs rte_eal_init on the calling thread (it becomes the main lcore, its
 * CPU affinity is left as it was) and the EAL's threads inherit that thread's signal mask, so a
 * caller that blocks SIGTERM and SIGINT first keeps receiving them with sigwait. Polling runs on
 * the EAL's worker lcores only. net_tap learns that the kernel wrote to a tap through SIGIO (its
 * handler only bumps a counter the RX poll reads): SIGIO must stay unblocked in some thread, and
 * the process's blocking calls see EINTR when it lands on their thread. Without DPDK in the build
 * every call returns -EOPNOTSUPP (dpdk_stub.c), so callers need no #ifdef.
 */
#ifndef NDC_DPDK_H
#define NDC_DPDK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ndc/abi.h>
#include <ndc/answer_table.h>
#include <ndc/dns_wire.h>

struct ndc_ip;
struct ndc_dpdk;

#define NDC_DPDK_BURST_MAX 512
#define NDC_DPDK_QUEUES_MAX 16
#define NDC_DPDK_TAP_PREFIX_MAX 12 /* the tap's name is the prefix and the port's index */

struct ndc_dpdk_opts {
	size_t n_eal_args; /* passed to rte_eal_init after argv[0] */
	char *const *eal_args;
	/*
	 * Added unless eal_args says otherwise: --lcores (the main lcore on every CPU the caller
	 * may run on, a worker lcore pinned to each CPU in lcores, or to the last such CPU),
	 * --file-prefix=ndcache-<pid>, --no-shconf with --no-huge else --in-memory (no file left
	 * behind, a crash included), --no-telemetry.
	 */
	size_t n_lcores; /* CPUs to poll on, one worker lcore each; 0: one */
	const uint16_t *lcores;
	size_t n_ports; /* port ids to poll; 0: every port the EAL probed */
	const uint16_t *ports;
	uint16_t queues;	    /* RX/TX queue pairs per port; 0: 1 */
	uint16_t burst;		    /* packets per rx/tx burst; 0: 32 */
	uint32_t poll_sleep_us;	    /* after many empty polls sleep this long; 0: busy-poll */
	const char *tap_prefix;	    /* exception-path tap names: <prefix><index>; NULL: "ndc-tap" */
	uint32_t max_entries;	    /* answer table cap: it follows its entries; 0: 65536 */
	size_t n_addrs;		    /* node-local addresses answered for */
	const struct ndc_ip *addrs; /* at most NDC_FP_MAX_ADDRS per family */
	uint16_t port;		    /* DNS port, host order; 0: 53 */
	const uint8_t *zone;	    /* lowercase wire cluster domain: NXDOMAIN synthesis below it */
	size_t zone_len;
	const uint8_t *pass; /* lowercase wire suffix never synthesised (pod.<zone>), or NULL */
	size_t pass_len;
};

/*
 * Initialises the EAL, sets up every port with a tap for the exception path, the mbuf pool and
 * the answer table; nothing is polled until ndc_dpdk_start. Returns 0; -EOPNOTSUPP without DPDK
 * in the build; -EINVAL for bad options (logged: what and why); -ENODEV when the EAL found no
 * port (or a configured port does not exist); -errno from the EAL and ethdev (logged). The EAL
 * cannot be initialised twice in a process: after a failure here, or after ndc_dpdk_close, this
 * fails with -EALREADY.
 */
int ndc_dpdk_open(const struct ndc_dpdk_opts *opts, struct ndc_dpdk **ret);

/* Launches the polling lcores. 0, or -errno. */
int ndc_dpdk_start(struct ndc_dpdk *dp);

/*
 * Stops the lcores, stops and closes every port (taps included: their kernel interfaces go),
 * frees the table and the pool, and cleans up the EAL (hugepage memory released, the runtime
 * directory removed). NULL is fine.
 */
void ndc_dpdk_close(struct ndc_dpdk *dp);

/*
 * The answer table behind the answer-table interface (<ndc/answer_table.h>), with the struct
 * ndc_dpdk as its table, for the publisher. It counts no hits (hits is NULL). Every operation is
 * NULL in a build without DPDK, where ndc_dpdk_open fails first.
 */
extern const struct ndc_answer_table_ops ndc_dpdk_answer_table;

/* Sums the per-lcore counters, indexed like the fast path's (enum ndc_fp_counter). */
int ndc_dpdk_counters(struct ndc_dpdk *dp, uint64_t ret[NDC_FP_COUNTER_MAX]);

/*
 * Writes every ndcache_dpdk_* series through fn (Prometheus: name, type, help, labels without
 * braces or NULL, value): per port, queue and lcore the packets received, sent, answered by kind,
 * passed to the kernel by reason, sent to and received from the kernel, dropped; per port the
 * device's own counters (mbuf exhaustion included); the pool's free mbufs; the answer table's
 * size (ndcache_dpdk_table_entries, _capacity, _slots, _bytes, _needed_bytes, _rebuilds_total).
 */
typedef void (*ndc_dpdk_metric_fn)(void *arg, const char *name, const char *type, const char *help,
				   const char *labels, uint64_t value);
void ndc_dpdk_metrics(struct ndc_dpdk *dp, ndc_dpdk_metric_fn fn, void *arg);

#endif
