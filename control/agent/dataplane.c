// SPDX-License-Identifier: MIT
/*
 * The dataplane the agent runs besides the socket server: the BPF fast path (tc or XDP) and the
 * DPDK dataplane, each started with the publisher that fills its table and stopped with a last
 * count; and their /metrics section, the socket server's included (the dataplane sits below the
 * control plane and does not write /metrics itself).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <ndc/log.h>

#include "dpdk/dpdk.h"
#include "fastpath/fastpath.h"
#include "metrics/metrics.h"
#include "internal.h"
#include "publisher.h"
#include "query/query.h"
#include "socket/socket.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* ---------------------------------------------------------------------------------------------
 * The fast path.
 */
/*
 * The zone below which the fast paths answer NXDOMAIN, and the suffix they never do: insecure pod
 * names are computed per query in user space. Lowercase wire names; *ret_plen 0 for no suffix.
 */
static int zone_and_pass(const struct ndc_config *cfg, uint8_t zone[NDC_NAME_MAX], size_t *ret_zlen,
			 uint8_t pass[NDC_NAME_MAX], size_t *ret_plen)
{
	int err = ndc_name_from_text(cfg->cluster_domain, zone, NDC_NAME_MAX, ret_zlen);

	if (err)
		return err;
	ndc_name_lower(zone, zone, *ret_zlen);
	*ret_plen = 0;
	if (cfg->records.pods == NDC_PODS_INSECURE && *ret_zlen + 4 <= NDC_NAME_MAX) {
		memcpy(pass, "\3pod", 4);
		memcpy(pass + 4, zone, *ret_zlen);
		*ret_plen = *ret_zlen + 4;
	}
	return 0;
}

/*
 * Loads and attaches the fast path. Failing here is not fatal: the socket path answers everything
 * the kernel would have (fail open), so it is logged once.
 */
void ndc_agent_fastpath_start(struct agent *ag)
{
	const struct ndc_config *cfg = ag->cfg;
	uint8_t zone[NDC_NAME_MAX], pass[NDC_NAME_MAX];
	struct ndc_fastpath_opts fo = {
	    .attach = cfg->dataplane.mode == NDC_DP_XDP ? NDC_FP_ATTACH_XDP : NDC_FP_ATTACH_TC,
	    .n_patterns = cfg->dataplane.n_interfaces,
	    .patterns = cfg->dataplane.interfaces,
	    .n_addrs = cfg->n_listen,
	    .addrs = cfg->listen,
	    .port = cfg->port,
	    .max_entries = cfg->dataplane.table_size,
	    .redirect_peer = cfg->dataplane.redirect_peer,
	    .tc_order =
		cfg->dataplane.tc_order == NDC_TC_ORDER_FIRST ? NDC_FP_TC_FIRST : NDC_FP_TC_AFTER,
	    .failopen = cfg->dataplane.failopen,
	    .pin_dir = cfg->dataplane.pin_dir,
	    .n_upstreams = cfg->n_upstream,
	    .upstreams = cfg->upstream,
	    /* attached once the table is full and the sockets are read: ndc_agent_maybe_attach */
	    .defer_attach = true,
	};
	int err;

	err = zone_and_pass(cfg, zone, &fo.zone_len, pass, &fo.pass_len);
	if (err)
		goto fail;
	fo.zone = zone;
	fo.pass = fo.pass_len ? pass : NULL;
	err = ndc_fastpath_open(&fo, &ag->fp);
	if (err)
		goto fail;
	err = ndc_publisher_new(&ndc_fastpath_answer_table, ag->fp, &ag->pub);
	if (err)
		goto fail;
	ndc_cache_set_hook(ag->cache, ndc_publisher_cache_hook, ag->pub);
	ndc_info("fast path: %s loaded; attached to links matching dataplane.interfaces once "
		 "the table is filled",
		 fo.attach == NDC_FP_ATTACH_XDP ? "xdp" : "tc");
	return;
fail:
	ndc_publisher_free(ag->pub);
	ndc_fastpath_close(ag->fp);
	ag->pub = NULL;
	ag->fp = NULL;
	ndc_warn("fast path unavailable (%s); answering from sockets only",
		 err == -EOPNOTSUPP ? "this build has no BPF support" : strerror(-err));
}

void ndc_agent_fastpath_stop(struct agent *ag)
{
	uint64_t c[NDC_FP_COUNTER_MAX];

	if (!ag->fp)
		return;
	/* nothing inserts into the cache any more (shutdown order); and nothing would reach it */
	ndc_cache_set_hook(ag->cache, NULL, NULL);
	ndc_publisher_free(ag->pub);
	if (!ndc_fastpath_counters(ag->fp, c))
		ndc_info("fast path: %lu answered, %lu NODATA, %lu NXDOMAIN; passed: %lu miss, "
			 "%lu expired, %lu EDNS, %lu size, %lu format, %lu fragment, %lu busy; "
			 "sent on to the "
			 "upstream with no agent listening: %lu udp, %lu tcp segments",
			 (unsigned long)c[NDC_FP_HIT], (unsigned long)c[NDC_FP_NODATA],
			 (unsigned long)c[NDC_FP_NXDOMAIN], (unsigned long)c[NDC_FP_PASS_MISS],
			 (unsigned long)c[NDC_FP_PASS_EXPIRED], (unsigned long)c[NDC_FP_PASS_EDNS],
			 (unsigned long)c[NDC_FP_PASS_SIZE], (unsigned long)c[NDC_FP_PASS_FORMAT],
			 (unsigned long)c[NDC_FP_PASS_FRAG], (unsigned long)c[NDC_FP_PASS_BUSY],
			 (unsigned long)c[NDC_FP_FWD_UDP], (unsigned long)c[NDC_FP_FWD_TCP]);
	/* Only what is still ours: a successor's programs and pins stay. */
	if (ag->handed_over)
		ndc_fastpath_hand_off(ag->fp);
	else
		ndc_fastpath_close(ag->fp);
}

/* ---------------------------------------------------------------------------------------------
 * The DPDK dataplane (mode dpdk): chosen explicitly, so failing to start it is fatal.
 */
int ndc_agent_dpdk_start(struct agent *ag)
{
	const struct ndc_config *cfg = ag->cfg;
	uint8_t zone[NDC_NAME_MAX], pass[NDC_NAME_MAX];
	struct ndc_dpdk_opts o = {
	    .n_eal_args = cfg->dataplane.dpdk.n_eal_args,
	    .eal_args = cfg->dataplane.dpdk.eal_args,
	    .n_lcores = cfg->dataplane.dpdk.n_lcores,
	    .lcores = cfg->dataplane.dpdk.lcores,
	    .n_ports = cfg->dataplane.dpdk.n_ports,
	    .ports = cfg->dataplane.dpdk.ports,
	    .queues = (uint16_t)cfg->dataplane.dpdk.queues,
	    .burst = (uint16_t)cfg->dataplane.dpdk.burst,
	    .poll_sleep_us = cfg->dataplane.dpdk.poll_sleep_us,
	    .tap_prefix = cfg->dataplane.dpdk.tap_prefix,
	    .max_entries = cfg->dataplane.table_size,
	    .n_addrs = cfg->n_listen,
	    .addrs = cfg->listen,
	    .port = cfg->port,
	};
	int err;

	err = zone_and_pass(cfg, zone, &o.zone_len, pass, &o.pass_len);
	if (err)
		return err;
	o.zone = zone;
	o.pass = o.pass_len ? pass : NULL;
	err = ndc_dpdk_open(&o, &ag->dp);
	if (err == -EOPNOTSUPP)
		ndc_err("dataplane.mode dpdk: this build has no DPDK support (build with meson "
			"-Ddpdk=enabled, libdpdk-dev installed)");
	else if (err)
		ndc_err("dataplane.mode dpdk: cannot start: %s", strerror(-err));
	if (!err)
		err = ndc_publisher_new(&ndc_dpdk_answer_table, ag->dp, &ag->pub);
	if (err)
		return err;
	/* Before the forwarder starts, as for the fast path: its first answer is published. */
	ndc_cache_set_hook(ag->cache, ndc_publisher_cache_hook, ag->pub);
	err = ndc_dpdk_start(ag->dp);
	if (err)
		ndc_err("dataplane.mode dpdk: cannot launch the lcores: %s", strerror(-err));
	return err;
}

void ndc_agent_dpdk_stop(struct agent *ag)
{
	uint64_t c[NDC_FP_COUNTER_MAX];

	if (!ag->dp)
		return;
	ndc_cache_set_hook(ag->cache, NULL, NULL);
	ndc_publisher_free(ag->pub);
	ag->pub = NULL;
	ndc_dpdk_counters(ag->dp, c);
	ndc_info("dpdk: %lu answered, %lu NODATA, %lu NXDOMAIN; passed: %lu miss, %lu expired, "
		 "%lu EDNS, %lu size, %lu format, %lu fragment",
		 (unsigned long)c[NDC_FP_HIT], (unsigned long)c[NDC_FP_NODATA],
		 (unsigned long)c[NDC_FP_NXDOMAIN], (unsigned long)c[NDC_FP_PASS_MISS],
		 (unsigned long)c[NDC_FP_PASS_EXPIRED], (unsigned long)c[NDC_FP_PASS_EDNS],
		 (unsigned long)c[NDC_FP_PASS_SIZE], (unsigned long)c[NDC_FP_PASS_FORMAT],
		 (unsigned long)c[NDC_FP_PASS_FRAG]);
	ndc_dpdk_close(ag->dp);
	ag->dp = NULL;
}

/* ---------------------------------------------------------------------------------------------
 * /metrics.
 */
#define SS(...) NDC_METRIC_FIELD(struct ndc_server_stats, __VA_ARGS__, NULL)

static const struct ndc_metric_field server_fields[] = {
    SS(udp_queries, "udp_queries_total", "counter", "UDP queries received."),
    SS(tcp_queries, "tcp_queries_total", "counter", "TCP queries received."),
    SS(tcp_conns, "tcp_connections_total", "counter", "TCP connections accepted."),
};

#define TS(...) NDC_METRIC_FIELD(struct ndc_fastpath_table_stats, __VA_ARGS__, NULL)

static const struct ndc_metric_field table_fields[] = {
    TS(keys, "fastpath_table_entries", "gauge", "Entries in the kernel's answer table."),
    TS(max_keys, "fastpath_table_capacity", "gauge",
       "Entries the kernel's answer table may hold (dataplane.table_size, a cap)."),
    TS(slots, "fastpath_table_slots", "gauge",
       "Slots of the kernel's answer table now: it grows and shrinks with its entries."),
    TS(bytes, "fastpath_table_bytes", "gauge",
       "Kernel memory of the answer table now, charged to the pod; mapped into the agent, so "
       "part of its resident memory too."),
    TS(needed, "fastpath_table_needed_bytes", "gauge",
       "What the answer table's entries need: a slot each and their big answers."),
    TS(rebuilds, "fastpath_table_rebuilds_total", "counter",
       "Times the answer table was rebuilt to grow or shrink."),
    TS(rare_keys, "fastpath_table_rare_entries", "gauge",
       "Entries of the answer table's rare region: names that begin with '_' or a digit (SRV, "
       "reverse and address-named records), and every type but A, AAAA and any other type's "
       "NODATA or CNAME."),
    TS(common_slots, "fastpath_table_common_slots", "gauge",
       "Slots of the buckets that are home to the common region's entries (all of them while "
       "the table has one region)."),
};

/* The kernel's per-CPU counters (enum ndc_fp_counter), summed. */
struct fp_counters {
	uint64_t c[NDC_FP_COUNTER_MAX];
};

static const char answered_help[] = "Queries answered in the kernel.";
static const char passed_help[] = "Queries the kernel passed to user space.";
static const char failopen_help[] =
    "Packets the kernel sent on to the upstream (or back from it) while no agent listened "
    "(dataplane.failopen).";

#define FC(i, name, help, labels) \
	NDC_METRIC_FIELD(struct fp_counters, c[i], "kernel_" name, "counter", help, labels)

static const struct ndc_metric_field counter_fields[] = {
    FC(NDC_FP_HIT, "answers_total", answered_help, "kind=\"answer\""),
    FC(NDC_FP_NODATA, "answers_total", answered_help, "kind=\"nodata\""),
    FC(NDC_FP_NXDOMAIN, "answers_total", answered_help, "kind=\"nxdomain\""),
    FC(NDC_FP_PASS_MISS, "passed_total", passed_help, "reason=\"miss\""),
    FC(NDC_FP_PASS_EXPIRED, "passed_total", passed_help, "reason=\"expired\""),
    FC(NDC_FP_PASS_EDNS, "passed_total", passed_help, "reason=\"edns\""),
    FC(NDC_FP_PASS_SIZE, "passed_total", passed_help, "reason=\"size\""),
    FC(NDC_FP_PASS_FORMAT, "passed_total", passed_help, "reason=\"format\""),
    FC(NDC_FP_PASS_FRAG, "passed_total", passed_help, "reason=\"fragment\""),
    FC(NDC_FP_PASS_CONFIG, "passed_total", passed_help, "reason=\"config\""),
    FC(NDC_FP_PASS_BUSY, "passed_total", passed_help, "reason=\"busy\""),
    FC(NDC_FP_FWD_UDP, "failopen_total", failopen_help, "kind=\"udp\""),
    FC(NDC_FP_FWD_TCP, "failopen_total", failopen_help, "kind=\"tcp\""),
    FC(NDC_FP_FWD_REPLY, "failopen_total", failopen_help, "kind=\"reply\""),
};

static void dpdk_metric(void *arg, const char *name, const char *type, const char *help,
			const char *labels, uint64_t v)
{
	ndc_metric_u64(arg, name, type, help, labels, v);
}

/*
 * The dataplane's figures: the socket server's, whether the fast path runs (always present, so
 * that an alert can tell "not loaded" from "not scraped"), its table and counters, DPDK's. The
 * dataplane cannot write /metrics itself (it sits below the control plane), so the agent, which
 * runs it, does.
 */
void ndc_agent_dataplane_metrics(void *arg, struct ndc_metrics_buf *b)
{
	static const char *const modes[] = {"tc", "xdp", "socket", "dpdk"};
	struct agent *ag = arg;
	unsigned m = ag->cfg->dataplane.mode;
	struct ndc_fastpath_table_stats ts;
	struct ndc_server_stats ss;
	struct fp_counters fc;
	char l[32];

	if (ag->srv) {
		ndc_server_stats(ag->srv, &ss);
		NDC_METRIC_TABLE(b, server_fields, &ss, NULL);
	}
	snprintf(l, sizeof(l), "mode=\"%s\"", m < N(modes) ? modes[m] : "unknown");
	ndc_metric_u64(b, "ndcache_fastpath_loaded", "gauge",
		       "1 while the BPF fast path is loaded (it attaches to matching links as they "
		       "appear); 0 when dataplane.mode is tc or xdp and it could not be loaded, or "
		       "for the other modes.",
		       l, ag->fp != NULL);
	if (ag->fp)
		ndc_metric_u64(
		    b, "ndcache_fastpath_foreign_programs", "gauge",
		    "Others' programs on the interfaces the fast path is attached to that "
		    "it runs in front of, so that they never see the queries the kernel "
		    "answers: every tc program in XDP mode, the tc filters after ours in "
		    "tc mode (dataplane.tc_order).",
		    NULL, ndc_fastpath_foreign_programs(ag->fp));
	if (ag->fp && !ndc_fastpath_table_stats(ag->fp, &ts))
		NDC_METRIC_TABLE(b, table_fields, &ts, NULL);
	if (ag->fp && !ndc_fastpath_counters(ag->fp, fc.c))
		NDC_METRIC_TABLE(b, counter_fields, &fc, NULL);
	if (ag->dp)
		ndc_dpdk_metrics(ag->dp, dpdk_metric, b);
}
