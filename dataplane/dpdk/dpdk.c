// SPDX-License-Identifier: MIT
/*
 * The DPDK backend's public side: opening (EAL, pool, ports and their taps, table, lcores' work),
 * the table's publishing calls, counters and metrics, and a clean close.
 */
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <ndc/entry.h>
#include <ndc/log.h>

#include "dpdk/dpdk.h"
#include "internal.h"

#define DEFAULT_BURST 32
#define DEFAULT_TAP_PREFIX "ndc-tap"
#define POOL_CACHE 256
#define POOL_MIN 8191 /* 2^n - 1: the ring under the pool holds n exactly */
#define MBUFS_PER_UNIT (4 * 1024 + 2 * NDC_DPDK_BURST_MAX) /* port and tap RX, TX rings */

struct ndc_dpdk {
	struct rte_mempool *pool;
	struct ndc_dpdk_table *table;
	size_t n_units;
	struct ndc_dpdk_unit *units;
	size_t n_workers;
	struct ndc_dpdk_worker *workers;
	uint16_t *ports;
	size_t n_ports;
	uint16_t *taps; /* taps[i]: the exception path of ports[i] */
	size_t n_taps;
	bool launched;
	volatile bool stop;
	char runtime_dir[PATH_MAX];
};

static bool eal_done; /* rte_eal_init runs once per process, successful or not */

/* The ports to poll: the configured ones (which must exist), else every probed one. */
static int pick_ports(struct ndc_dpdk *dp, const struct ndc_dpdk_opts *o)
{
	uint16_t p;

	dp->ports = calloc(RTE_MAX_ETHPORTS, sizeof(*dp->ports));
	if (!dp->ports)
		return -ENOMEM;
	if (o->n_ports) {
		for (size_t i = 0; i < o->n_ports; i++) {
			if (!rte_eth_dev_is_valid_port(o->ports[i])) {
				ndc_err(
				    "dpdk: dataplane.dpdk.ports: no port %u (the EAL probed %u)",
				    o->ports[i], rte_eth_dev_count_avail());
				return -ENODEV;
			}
			dp->ports[dp->n_ports++] = o->ports[i];
		}
		return 0;
	}
	RTE_ETH_FOREACH_DEV(p)
	dp->ports[dp->n_ports++] = p;
	if (!dp->n_ports) {
		ndc_err("dpdk: the EAL found no port: give one in dataplane.dpdk.eal_args (a PCI "
			"device bound to vfio-pci, or --vdev=net_af_xdp0,iface=..., net_af_packet, "
			"net_memif)");
		return -ENODEV;
	}
	return 0;
}

/* Units (port, queue) round-robin over the worker lcores. */
static int plan(struct ndc_dpdk *dp, uint16_t queues, uint16_t burst, uint32_t sleep_us)
{
	unsigned int lcore;
	size_t i = 0;

	dp->n_workers = rte_lcore_count() - 1;
	if (!dp->n_workers) {
		ndc_err("dpdk: no worker lcore to poll on (the EAL has only the main lcore)");
		return -EINVAL;
	}
	dp->n_units = dp->n_ports * queues;
	dp->units = calloc(dp->n_units, sizeof(*dp->units));
	dp->workers = calloc(dp->n_workers, sizeof(*dp->workers));
	if (!dp->units || !dp->workers)
		return -ENOMEM;
	RTE_LCORE_FOREACH_WORKER(lcore)
	{
		struct ndc_dpdk_worker *w = &dp->workers[i];

		w->lcore = lcore;
		w->qsbr_id = (unsigned int)i++;
		w->burst = burst;
		w->poll_sleep_us = sleep_us;
		w->stop = &dp->stop;
		w->units = calloc(dp->n_units, sizeof(*w->units));
		if (!w->units)
			return -ENOMEM;
	}
	for (size_t u = 0; u < dp->n_units; u++) {
		struct ndc_dpdk_worker *w = &dp->workers[u % dp->n_workers];

		dp->units[u].port = dp->ports[u / queues];
		dp->units[u].tap = dp->taps[u / queues];
		dp->units[u].queue = (uint16_t)(u % queues);
		dp->units[u].lcore = w->lcore;
		w->units[w->n_units++] = &dp->units[u];
	}
	return 0;
}

int ndc_dpdk_open(const struct ndc_dpdk_opts *o, struct ndc_dpdk **ret)
{
	uint16_t queues = o->queues ? o->queues : 1, burst = o->burst ? o->burst : DEFAULT_BURST;
	const char *prefix = o->tap_prefix ? o->tap_prefix : DEFAULT_TAP_PREFIX;
	/* The config the BPF table gets from the same options, by the same code. */
	const struct ndc_fp_config_opts co = {
	    .n_addrs = o->n_addrs,
	    .addrs = o->addrs,
	    .port = o->port,
	    .zone = o->zone,
	    .zone_len = o->zone_len,
	    .pass = o->pass,
	    .pass_len = o->pass_len,
	};
	struct ndc_fp_config cfg;
	struct ndc_dpdk *dp;
	unsigned int n_mbufs;
	int r;

	if (burst > NDC_DPDK_BURST_MAX || queues > NDC_DPDK_QUEUES_MAX ||
	    strlen(prefix) > NDC_DPDK_TAP_PREFIX_MAX)
		return -EINVAL;
	r = ndc_fastpath_config(&co, &cfg);
	if (r < 0)
		return r;
	if (eal_done)
		return -EALREADY;
	eal_done = true;
	dp = calloc(1, sizeof(*dp));
	if (!dp)
		return -ENOMEM;
	r = ndc_dpdk_eal_init(o->n_eal_args, o->eal_args, o->n_lcores, o->lcores);
	if (r < 0) {
		free(dp);
		return r;
	}
	snprintf(dp->runtime_dir, sizeof(dp->runtime_dir), "%s", rte_eal_get_runtime_dir());
	r = pick_ports(dp, o);
	if (r < 0)
		goto fail;
	dp->taps = calloc(dp->n_ports, sizeof(*dp->taps));
	if (!dp->taps) {
		r = -ENOMEM;
		goto fail;
	}
	/*
	 * Every descriptor of every queue of the ports and their taps may hold an mbuf, and each
	 * lcore's pool cache some more; at least POOL_MIN.
	 */
	n_mbufs =
	    (unsigned int)(dp->n_ports * queues * MBUFS_PER_UNIT + rte_lcore_count() * POOL_CACHE);
	if (n_mbufs < POOL_MIN)
		n_mbufs = POOL_MIN;
	dp->pool = rte_pktmbuf_pool_create("ndc_mbufs", n_mbufs, POOL_CACHE, 0,
					   RTE_MBUF_DEFAULT_BUF_SIZE, (int)rte_socket_id());
	if (!dp->pool) {
		r = -rte_errno;
		ndc_err("dpdk: pool of %u mbufs: %s (more EAL memory: -m or hugepages)", n_mbufs,
			rte_strerror(rte_errno));
		goto fail;
	}
	for (size_t i = 0; i < dp->n_ports; i++) {
		char ifname[64]; /* at most 12 + 3 used: an interface name */

		r = ndc_dpdk_port_setup(dp->ports[i], queues, dp->pool);
		if (r < 0)
			goto fail;
		snprintf(ifname, sizeof(ifname), "%s%zu", prefix, i);
		r = ndc_dpdk_tap_create(dp->ports[i], ifname, queues, dp->pool, &dp->taps[i]);
		if (r < 0)
			goto fail;
		dp->n_taps++;
	}
	r = plan(dp, queues, burst, o->poll_sleep_us);
	if (r < 0)
		goto fail;
	struct ndc_dpdk_table_opts to = {
	    .max_entries = o->max_entries,
	    .max_readers = (uint32_t)dp->n_workers,
	    .config = &cfg,
	};
	r = ndc_dpdk_table_new(&to, &dp->table);
	if (r < 0)
		goto fail;
	for (size_t i = 0; i < dp->n_workers; i++) {
		dp->workers[i].table = dp->table;
		dp->workers[i].qsbr = ndc_dpdk_table_qsbr(dp->table);
	}
	for (size_t i = 0; i < dp->n_ports; i++) {
		char name[RTE_ETH_NAME_MAX_LEN];

		rte_eth_dev_get_name_by_port(dp->ports[i], name);
		ndc_info("dpdk: port %u (%s): %u queue%s; exception path: tap %s%zu", dp->ports[i],
			 name, queues, queues > 1 ? "s" : "", prefix, i);
	}
	*ret = dp;
	return 0;
fail:
	ndc_dpdk_close(dp);
	return r;
}

int ndc_dpdk_start(struct ndc_dpdk *dp)
{
	for (size_t i = 0; i < dp->n_workers; i++) {
		int r = rte_eal_remote_launch(ndc_dpdk_worker_main, &dp->workers[i],
					      dp->workers[i].lcore);

		if (r < 0) {
			ndc_err("dpdk: cannot launch lcore %u: %s", dp->workers[i].lcore,
				rte_strerror(-r));
			return r;
		}
		dp->launched = true;
	}
	ndc_info("dpdk: polling %zu queue%s on %zu lcore%s", dp->n_units,
		 dp->n_units > 1 ? "s" : "", dp->n_workers, dp->n_workers > 1 ? "s" : "");
	return 0;
}

void ndc_dpdk_close(struct ndc_dpdk *dp)
{
	if (!dp)
		return;
	if (dp->launched) {
		__atomic_store_n(&dp->stop, true, __ATOMIC_RELAXED);
		rte_eal_mp_wait_lcore();
	}
	for (size_t i = 0; i < dp->n_ports; i++)
		ndc_dpdk_port_close(dp->ports[i]);
	for (size_t i = 0; i < dp->n_taps; i++)
		ndc_dpdk_port_close(dp->taps[i]);
	ndc_dpdk_table_free(dp->table);
	rte_mempool_free(dp->pool);
	for (size_t i = 0; dp->workers && i < dp->n_workers; i++)
		free(dp->workers[i].units);
	free(dp->workers);
	free(dp->units);
	free(dp->taps);
	free(dp->ports);
	/* Releases the EAL's memory (hugepages) and removes what it made on the file system. */
	rte_eal_cleanup();
	if (dp->runtime_dir[0] && rmdir(dp->runtime_dir) < 0 && errno != ENOENT)
		ndc_warn("dpdk: cannot remove %s: %s", dp->runtime_dir, strerror(errno));
	free(dp);
}

/* ---------------------------------------------------------------------------------------------
 * The table.
 */

static int publish(void *dp, const uint8_t *lname, size_t nlen, uint16_t qtype,
		   const struct ndc_answer *a, uint32_t ttl_s)
{
	return ndc_dpdk_table_publish(((struct ndc_dpdk *)dp)->table, lname, nlen, qtype, a, ttl_s);
}

static int unpublish(void *dp, const uint8_t *lname, size_t nlen, uint16_t qtype)
{
	return ndc_dpdk_table_unpublish(((struct ndc_dpdk *)dp)->table, lname, nlen, qtype);
}

static int unpublish_expired(void *dp, const struct ndc_fp_key *k)
{
	return ndc_dpdk_table_unpublish_expired(((struct ndc_dpdk *)dp)->table, k);
}

static int set_nx(void *dp, const struct ndc_answer *nx)
{
	return ndc_dpdk_table_set_nx(((struct ndc_dpdk *)dp)->table, nx);
}

static int set_synced(void *dp, bool synced)
{
	return ndc_dpdk_table_set_synced(((struct ndc_dpdk *)dp)->table, synced);
}

const struct ndc_answer_table_ops ndc_dpdk_answer_table = {
    .publish = publish,
    .unpublish = unpublish,
    .unpublish_expired = unpublish_expired,
    .set_nx = set_nx,
    .set_synced = set_synced,
};

/* ---------------------------------------------------------------------------------------------
 * Counters.
 */

int ndc_dpdk_counters(struct ndc_dpdk *dp, uint64_t ret[NDC_FP_COUNTER_MAX])
{
	memset(ret, 0, NDC_FP_COUNTER_MAX * sizeof(ret[0]));
	for (size_t u = 0; u < dp->n_units; u++)
		for (int i = 0; i < NDC_FP_COUNTER_MAX; i++)
			ret[i] += ndc_dpdk_read(&dp->units[u].c.fp[i]);
	return 0;
}

#define M_PREFIX "ndcache_dpdk_"

/* The answer table's size: the kernel table's ndcache_fastpath_table_* series, for this one. */
static void table_metrics(struct ndc_dpdk *dp, ndc_dpdk_metric_fn fn, void *arg)
{
	struct ndc_dpdk_table_stats ts;

	ndc_dpdk_table_stats(dp->table, &ts);
	const struct {
		const char *name, *type, *help;
		uint64_t value;
	} series[] = {
	    {M_PREFIX "table_entries", "gauge", "Entries in the DPDK answer table.", ts.keys},
	    {M_PREFIX "table_capacity", "gauge",
	     "Entries the DPDK answer table may hold (dataplane.table_size, a cap).", ts.max_keys},
	    {M_PREFIX "table_slots", "gauge",
	     "Entries the DPDK answer table's hash is made for now: it grows and shrinks with its "
	     "entries.",
	     ts.slots},
	    {M_PREFIX "table_bytes", "gauge",
	     "Memory of the DPDK answer table now: its hash (EAL memory) and its values.",
	     ts.bytes},
	    {M_PREFIX "table_needed_bytes", "gauge",
	     "What the DPDK answer table's entries need: a key and a value each.", ts.needed},
	    {M_PREFIX "table_rebuilds_total", "counter",
	     "Times the DPDK answer table was rebuilt to grow or shrink.", ts.rebuilds},
	};

	for (size_t i = 0; i < sizeof(series) / sizeof(series[0]); i++)
		fn(arg, series[i].name, series[i].type, series[i].help, NULL, series[i].value);
}

void ndc_dpdk_metrics(struct ndc_dpdk *dp, ndc_dpdk_metric_fn fn, void *arg)
{
	static const char *const kinds[] = {"answer", "nodata", "nxdomain"};
	static const char *const why[] = {"miss",   "expired",	"edns",	 "size",
					  "format", "fragment", "config"};
	/* Series of a unit split by one label: where its frames went, or were dropped. */
	static const struct {
		const char *name, *help, *label;
		size_t off;
	} split[] = {
	    {M_PREFIX "exception_packets_total", "Frames through the exception path (net_tap).",
	     ",direction=\"to_kernel\"", offsetof(struct ndc_dpdk_counters, to_kernel)},
	    {M_PREFIX "exception_packets_total", "Frames through the exception path (net_tap).",
	     ",direction=\"from_kernel\"", offsetof(struct ndc_dpdk_counters, from_kernel)},
	    {M_PREFIX "dropped_total", "Frames freed because a TX queue was full.",
	     ",where=\"port\"", offsetof(struct ndc_dpdk_counters, dropped_tx)},
	    {M_PREFIX "dropped_total", "Frames freed because a TX queue was full.",
	     ",where=\"tap\"", offsetof(struct ndc_dpdk_counters, dropped_kernel)},
	};
	char l[160];

	for (size_t u = 0; u < dp->n_units; u++) {
		const struct ndc_dpdk_unit *un = &dp->units[u];
		const struct ndc_dpdk_counters *c = &un->c;
		int n = snprintf(l, sizeof(l), "port=\"%u\",queue=\"%u\",lcore=\"%u\"", un->port,
				 un->queue, un->lcore);
		char *k = l + n;
		size_t room = sizeof(l) - (size_t)n;

		fn(arg, M_PREFIX "rx_packets_total", "counter",
		   "Frames received on a port queue by its lcore.", l, ndc_dpdk_read(&c->rx));
		fn(arg, M_PREFIX "tx_packets_total", "counter",
		   "Frames sent on a port queue: answers and what the kernel sent.", l,
		   ndc_dpdk_read(&c->tx));
		for (int i = 0; i < 3; i++) {
			snprintf(k, room, ",kind=\"%s\"", kinds[i]);
			fn(arg, M_PREFIX "answers_total", "counter",
			   "Queries answered by the DPDK lcores.", l,
			   ndc_dpdk_read(&c->fp[NDC_FP_HIT + i]));
		}
		for (int i = NDC_FP_PASS_MISS; i <= NDC_FP_PASS_CONFIG; i++) {
			snprintf(k, room, ",reason=\"%s\"", why[i - NDC_FP_PASS_MISS]);
			fn(arg, M_PREFIX "passed_total", "counter",
			   "Queries passed to the kernel (the socket path answers).", l,
			   ndc_dpdk_read(&c->fp[i]));
		}
		for (size_t i = 0; i < sizeof(split) / sizeof(split[0]); i++) {
			snprintf(k, room, "%s", split[i].label);
			fn(arg, split[i].name, "counter", split[i].help, l,
			   ndc_dpdk_read((const uint64_t *)((const char *)c + split[i].off)));
		}
	}
	for (size_t i = 0; i < dp->n_ports + dp->n_taps; i++) {
		uint16_t p = i < dp->n_ports ? dp->ports[i] : dp->taps[i - dp->n_ports];
		char name[RTE_ETH_NAME_MAX_LEN];
		struct rte_eth_stats st;

		if (rte_eth_stats_get(p, &st) < 0 || rte_eth_dev_get_name_by_port(p, name) < 0)
			continue;
		snprintf(l, sizeof(l), "port=\"%u\",device=\"%s\"", p, name);
		fn(arg, M_PREFIX "port_rx_missed_total", "counter",
		   "Frames the device dropped for want of an RX descriptor.", l, st.imissed);
		fn(arg, M_PREFIX "port_rx_errors_total", "counter", "Erroneous frames received.", l,
		   st.ierrors);
		fn(arg, M_PREFIX "port_tx_errors_total", "counter",
		   "Frames the device failed to send.", l, st.oerrors);
		fn(arg, M_PREFIX "mbuf_alloc_failed_total", "counter",
		   "RX mbuf allocation failures (pool exhausted).", l, st.rx_nombuf);
	}
	table_metrics(dp, fn, arg);
	fn(arg, M_PREFIX "mbufs_free", "gauge", "Free mbufs in the pool.", NULL,
	   rte_mempool_avail_count(dp->pool));
	fn(arg, M_PREFIX "mbufs", "gauge", "Mbufs in the pool.", NULL, dp->pool->size);
}
