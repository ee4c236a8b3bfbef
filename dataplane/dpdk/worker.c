// SPDX-License-Identifier: MIT
/*
 * The polling lcores. Each round, for every unit (a port's RX queue): a burst from the port, each
 * frame answered in place or set aside for the kernel, the replies sent back out of the same
 * queue in one burst and the rest to the tap in one burst; then a burst from the tap (what the
 * kernel sends: ARP and ND replies, the socket path's answers, TCP) out of the port. Frames a
 * queue does not take are freed and counted, never retried: DNS clients retry, and a lcore that
 * waits for a full queue stops answering everything else. After the round the lcore reports a
 * quiescent state to the table's RCU: it holds no value pointer from here on.
 */
#include <errno.h>
#include <stdint.h>
#include <time.h>

#include <rte_branch_prediction.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_prefetch.h>
#include <rte_rcu_qsbr.h>

#include "dpdk/dpdk.h"
#include "internal.h"

/* Empty rounds in a row before poll_sleep_us applies: a burst in progress never waits. */
#define IDLE_ROUNDS 64

static inline void bump(uint64_t *c, uint64_t n)
{
	/* one writer (this lcore): a plain add, stored so that readers see whole values */
	__atomic_store_n(c, *c + n, __ATOMIC_RELAXED);
}

static uint64_t monotonic_ns(void)
{
	struct timespec ts;

	/* vDSO, no system call: once per burst. The publisher's expiry uses this clock. */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int ndc_dpdk_answer_mbuf(const struct ndc_dpdk_table *t, struct rte_mbuf *m, uint64_t now_ns)
{
	uint32_t len = 0;
	int verdict;

	if (unlikely(m->nb_segs != 1))
		return NDC_DP_NOT_OURS;
	verdict = ndc_dpdk_answer(t, rte_pktmbuf_mtod(m, uint8_t *), rte_pktmbuf_data_len(m),
				  rte_pktmbuf_data_len(m) + rte_pktmbuf_tailroom(m), now_ns, &len);
	if (ndc_dpdk_answered(verdict)) {
		m->data_len = (uint16_t)len;
		m->pkt_len = len;
	}
	return verdict;
}

/* Sends n frames on (port, queue); what it does not take is freed. Returns how many were not. */
static uint16_t send_all(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n)
{
	uint16_t sent;

	if (!n)
		return 0;
	sent = rte_eth_tx_burst(port, queue, pkts, n);
	if (unlikely(sent < n))
		rte_pktmbuf_free_bulk(pkts + sent, n - sent);
	return n - sent;
}

/* One unit's round; returns the frames it moved. */
static uint16_t poll_unit(const struct ndc_dpdk_worker *w, struct ndc_dpdk_unit *u,
			  struct rte_mbuf **rx, struct rte_mbuf **reply, struct rte_mbuf **kern)
{
	struct ndc_dpdk_counters *c = &u->c;
	uint16_t n, n_reply = 0, n_kern = 0, lost, moved;
	uint64_t now;

	n = rte_eth_rx_burst(u->port, u->queue, rx, w->burst);
	moved = n;
	if (n) {
		now = monotonic_ns();
		for (uint16_t i = 0; i < n; i++) {
			int v;

			if (i + 1 < n)
				rte_prefetch0(rte_pktmbuf_mtod(rx[i + 1], void *));
			v = ndc_dpdk_answer_mbuf(w->table, rx[i], now);
			if (v < NDC_FP_COUNTER_MAX)
				bump(&c->fp[v], 1);
			if (ndc_dpdk_answered(v))
				reply[n_reply++] = rx[i];
			else
				kern[n_kern++] = rx[i];
		}
		bump(&c->rx, n);
		lost = send_all(u->port, u->queue, reply, n_reply);
		bump(&c->tx, n_reply - lost);
		bump(&c->dropped_tx, lost);
		lost = send_all(u->tap, u->queue, kern, n_kern);
		bump(&c->to_kernel, n_kern - lost);
		bump(&c->dropped_kernel, lost);
	}
	n = rte_eth_rx_burst(u->tap, u->queue, rx, w->burst);
	if (n) {
		bump(&c->from_kernel, n);
		lost = send_all(u->port, u->queue, rx, n);
		bump(&c->tx, n - lost);
		bump(&c->dropped_tx, lost);
		moved += n;
	}
	return moved;
}

int ndc_dpdk_worker_main(void *arg)
{
	struct ndc_dpdk_worker *w = arg;
	struct rte_mbuf *rx[NDC_DPDK_BURST_MAX], *reply[NDC_DPDK_BURST_MAX],
	    *kern[NDC_DPDK_BURST_MAX];
	unsigned int idle = 0;

	rte_rcu_qsbr_thread_register(w->qsbr, w->qsbr_id);
	rte_rcu_qsbr_thread_online(w->qsbr, w->qsbr_id);
	while (!__atomic_load_n(w->stop, __ATOMIC_RELAXED)) {
		uint32_t moved = 0;

		for (size_t i = 0; i < w->n_units; i++)
			moved += poll_unit(w, w->units[i], rx, reply, kern);
		rte_rcu_qsbr_quiescent(w->qsbr, w->qsbr_id);
		if (moved) {
			idle = 0;
		} else if (w->poll_sleep_us && ++idle >= IDLE_ROUNDS) {
			/* offline while asleep: writers need not wait for a sleeping lcore */
			rte_rcu_qsbr_thread_offline(w->qsbr, w->qsbr_id);
			rte_delay_us_sleep(w->poll_sleep_us);
			rte_rcu_qsbr_thread_online(w->qsbr, w->qsbr_id);
		} else {
			rte_pause();
		}
	}
	rte_rcu_qsbr_thread_offline(w->qsbr, w->qsbr_id);
	rte_rcu_qsbr_thread_unregister(w->qsbr, w->qsbr_id);
	return 0;
}
