// SPDX-License-Identifier: MIT
/*
 * The EAL and the ports: rte_eal_init with the agent's defaults, data ports and the net_tap
 * ports of the exception path set up the same way.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_dev.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mempool.h>

#include <ndc/log.h>

#include "internal.h"

#define NB_DESC 1024
#define MAX_ARGS 256

/* Whether args has option opt ("--opt", "--opt=x"; for a short "-o", also "-ox"). */
static bool has_opt(size_t n, char *const *args, const char *opt)
{
	size_t len = strlen(opt);

	for (size_t i = 0; i < n; i++) {
		if (strncmp(args[i], opt, len))
			continue;
		if (args[i][len] == '\0' || args[i][len] == '=' || (opt[1] != '-'))
			return true;
	}
	return false;
}

/* "(0,1,...)": the CPUs in set, for --lcores; the last one in *ret_last. */
static int cpu_list(const cpu_set_t *set, char *out, size_t cap, unsigned int *ret_last)
{
	size_t n = 0;
	int w;

	out[n++] = '(';
	for (unsigned int c = 0; c < CPU_SETSIZE; c++) {
		if (!CPU_ISSET(c, set))
			continue;
		w = snprintf(out + n, cap - n, "%s%u", n > 1 ? "," : "", c);
		if (w < 0 || (size_t)w >= cap - n)
			return -ENOSPC;
		n += (size_t)w;
		*ret_last = c;
	}
	if (n == 1 || n + 2 > cap)
		return -EINVAL;
	out[n++] = ')';
	out[n] = '\0';
	return 0;
}

int ndc_dpdk_eal_init(size_t n_args, char *const *args, size_t n_lcores, const uint16_t *lcores)
{
	char *argv[MAX_ARGS + 8], lc[4096], prefix[64], cpus[2048];
	unsigned int last = 0;
	cpu_set_t saved;
	size_t argc = 0, n;
	int r;

	if (n_args > MAX_ARGS)
		return -E2BIG;
	r = pthread_getaffinity_np(pthread_self(), sizeof(saved), &saved);
	if (r)
		return -r;
	argv[argc++] = (char *)"ndcache";
	for (size_t i = 0; i < n_args; i++)
		argv[argc++] = args[i];
	if (!has_opt(n_args, args, "-l") && !has_opt(n_args, args, "-c") &&
	    !has_opt(n_args, args, "--lcores")) {
		/*
		 * The main lcore is the calling thread: bound to every CPU it may use, so that the
		 * threads the agent starts afterwards (which inherit it) are not pinned to one.
		 */
		r = cpu_list(&saved, cpus, sizeof(cpus), &last);
		if (r < 0)
			return r;
		n = (size_t)snprintf(lc, sizeof(lc), "--lcores=0@%s", cpus);
		for (size_t i = 0; i < (n_lcores ? n_lcores : 1) && n < sizeof(lc); i++)
			n += (size_t)snprintf(lc + n, sizeof(lc) - n, ",%zu@%u", i + 1,
					      n_lcores ? lcores[i] : last);
		if (n >= sizeof(lc))
			return -E2BIG;
		argv[argc++] = lc;
	} else if (n_lcores) {
		ndc_err(
		    "dpdk: give the polling CPUs either in dataplane.dpdk.lcores or in eal_args "
		    "(-l, -c, --lcores), not both");
		return -EINVAL;
	}
	if (!has_opt(n_args, args, "--file-prefix")) {
		snprintf(prefix, sizeof(prefix), "--file-prefix=ndcache-%d", (int)getpid());
		argv[argc++] = prefix;
	}
	/*
	 * Nothing left on disk, a crash included: --in-memory unlinks hugepage files as soon as
	 * they are mapped. It does not go with --no-huge (legacy memory), where --no-shconf keeps
	 * the runtime directory free of the shared config.
	 */
	if (!has_opt(n_args, args, "--in-memory") && !has_opt(n_args, args, "--no-shconf") &&
	    !has_opt(n_args, args, "--legacy-mem"))
		argv[argc++] =
		    (char *)(has_opt(n_args, args, "--no-huge") ? "--no-shconf" : "--in-memory");
	/* /metrics has the counters; no socket in the runtime directory. */
	if (!has_opt(n_args, args, "--telemetry") && !has_opt(n_args, args, "--no-telemetry"))
		argv[argc++] = (char *)"--no-telemetry";
	argv[argc] = NULL;

	r = rte_eal_init((int)argc, argv);
	if (r < 0) {
		r = rte_errno ? -rte_errno : -EINVAL;
		ndc_err("dpdk: rte_eal_init failed (%s); check dataplane.dpdk.eal_args",
			rte_strerror(-r));
		return r;
	}
	pthread_setaffinity_np(pthread_self(), sizeof(saved), &saved);
	return 0;
}

static int setup(uint16_t port, uint16_t queues, struct rte_mempool *pool)
{
	struct rte_eth_conf conf;
	struct rte_eth_dev_info info;
	uint16_t nrx = NB_DESC, ntx = NB_DESC;
	int r;

	memset(&conf, 0, sizeof(conf));
	r = rte_eth_dev_info_get(port, &info);
	if (r < 0)
		return r;
	if (queues > info.max_rx_queues || queues > info.max_tx_queues) {
		ndc_err(
		    "dpdk: port %u (%s) has %u RX and %u TX queues; dataplane.dpdk.queues is %u",
		    port, info.driver_name, info.max_rx_queues, info.max_tx_queues, queues);
		return -EINVAL;
	}
	r = rte_eth_dev_configure(port, queues, queues, &conf);
	if (r == 0)
		r = rte_eth_dev_adjust_nb_rx_tx_desc(port, &nrx, &ntx);
	for (uint16_t q = 0; r == 0 && q < queues; q++) {
		r = rte_eth_rx_queue_setup(port, q, nrx, (unsigned int)rte_eth_dev_socket_id(port),
					   NULL, pool);
		if (r == 0)
			r = rte_eth_tx_queue_setup(port, q, ntx,
						   (unsigned int)rte_eth_dev_socket_id(port), NULL);
	}
	if (r < 0)
		return r;
	/* Replies go to the pods' MACs; frames to other MACs are the kernel's to judge. */
	r = rte_eth_promiscuous_enable(port);
	if (r < 0 && r != -ENOTSUP)
		return r;
	return rte_eth_dev_start(port);
}

int ndc_dpdk_port_setup(uint16_t port, uint16_t queues, struct rte_mempool *pool)
{
	char name[RTE_ETH_NAME_MAX_LEN] = "?";
	int r = setup(port, queues, pool);

	if (r < 0) {
		rte_eth_dev_get_name_by_port(port, name);
		ndc_err("dpdk: port %u (%s): %s", port, name, rte_strerror(-r));
	}
	return r;
}

int ndc_dpdk_tap_create(uint16_t port, const char *ifname, uint16_t queues,
			struct rte_mempool *pool, uint16_t *ret_tap)
{
	char name[RTE_ETH_NAME_MAX_LEN], devargs[RTE_ETH_NAME_MAX_LEN + 128];
	struct rte_ether_addr mac;
	int r;

	r = rte_eth_macaddr_get(port, &mac);
	if (r < 0)
		return r;
	snprintf(name, sizeof(name), "net_tap_ndc%u", port);
	snprintf(devargs, sizeof(devargs), "%s,iface=%s,mac=" RTE_ETHER_ADDR_PRT_FMT, name, ifname,
		 RTE_ETHER_ADDR_BYTES(&mac));
	/* the vdev bus claims it by the driver's name (rte_bus_vdev.h is a driver's header) */
	r = rte_dev_probe(devargs);
	if (r < 0) {
		ndc_err("dpdk: exception-path tap %s for port %u: %s", ifname, port,
			rte_strerror(-r));
		return r;
	}
	r = rte_eth_dev_get_port_by_name(name, ret_tap);
	if (r < 0)
		return r;
	return ndc_dpdk_port_setup(*ret_tap, queues, pool);
}

void ndc_dpdk_port_close(uint16_t port)
{
	rte_eth_dev_stop(port);
	rte_eth_dev_close(port);
}
