// SPDX-License-Identifier: MIT
/*
 * The dataplane the agent runs besides the socket server: the BPF fast path (tc or XDP), the
 * DPDK dataplane, or none (socket mode), driven through one set of operations chosen once at
 * start (struct ndc_agent_dataplane_ops), each opened with the publisher that fills its table
 * and closed after a last count; and their /metrics section, the socket server's included (the
 * dataplane sits below the control plane and does not write /metrics itself).
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
 * Its table filled from the cache (and the records) from here on, before the forwarder's first
 * answer.
 */
static int publish(struct agent *ag, const struct ndc_answer_table_ops *table, void *h)
{
	int err = ndc_publisher_new(table, h, &ag->dp.pub);

	if (!err)
		ndc_cache_set_hook(ag->query.cache, ndc_publisher_cache_hook, ag->dp.pub);
	return err;
}

/*
 * Loads the fast path, not attached (ndc_agent_dataplane_attach attaches it once the table is
 * filled). Failing here is not fatal: the socket path answers everything the kernel would have
 * (fail open), so it is logged once and the agent runs without (*ret NULL).
 */
static int fastpath_open(struct agent *ag, void **ret)
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
	    /* who asks what (issue 37): the kernel's per-client counts and its sampled answers */
	    .clients = cfg->log.clients,
	    .kernel_sample = cfg->log.dnstap.socket ? cfg->log.dnstap.kernel_sample : 0,
	};
	struct ndc_fp *fp = NULL;
	int err;

	err = zone_and_pass(cfg, zone, &fo.zone_len, pass, &fo.pass_len);
	if (err)
		goto fail;
	fo.zone = zone;
	fo.pass = fo.pass_len ? pass : NULL;
	err = ndc_fastpath_open(&fo, &fp);
	if (err)
		goto fail;
	err = publish(ag, &ndc_fastpath_answer_table, fp);
	if (err)
		goto fail;
	ndc_info("fast path: %s loaded; attached to links matching dataplane.interfaces once "
		 "the table is filled",
		 fo.attach == NDC_FP_ATTACH_XDP ? "xdp" : "tc");
	*ret = fp;
	return 0;
fail:
	ndc_publisher_free(ag->dp.pub);
	ndc_fastpath_close(fp);
	ag->dp.pub = NULL;
	ndc_warn("fast path unavailable (%s); answering from sockets only",
		 err == -EOPNOTSUPP ? "this build has no BPF support" : strerror(-err));
	return 0;
}

static int fastpath_attach(void *h)
{
	return ndc_fastpath_attach(h);
}

static int fastpath_counters(void *h, uint64_t *c)
{
	return ndc_fastpath_counters(h, c);
}

static int fastpath_clients(void *h, int (*cb)(const struct ndc_fp_client *c, void *arg), void *arg)
{
	return ndc_fastpath_clients(h, cb, arg);
}

static int fastpath_samples_poll(void *h, int timeout_ms,
				 void (*cb)(const struct ndc_fp_sample *s, void *arg), void *arg)
{
	return ndc_fastpath_samples_poll(h, timeout_ms, cb, arg);
}

static void fastpath_log_counters(const uint64_t *c)
{
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
}

static void fastpath_metrics(void *h, struct ndc_metrics_buf *b);

/* A successor took over: its programs replace ours, which stop answering. */
static void fastpath_quiesce(void *h)
{
	ndc_fastpath_quiet(h);
}

/* Only what is still ours: a successor's programs and pins stay. */
static void fastpath_close(void *h, bool handed_over)
{
	if (handed_over)
		ndc_fastpath_hand_off(h);
	else
		ndc_fastpath_close(h);
}

/* ---------------------------------------------------------------------------------------------
 * The DPDK dataplane (mode dpdk): chosen explicitly, so failing to start it is fatal.
 */
static int dpdk_open(struct agent *ag, void **ret)
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
	struct ndc_dpdk *dp = NULL;
	int err;

	err = zone_and_pass(cfg, zone, &o.zone_len, pass, &o.pass_len);
	if (err)
		return err;
	o.zone = zone;
	o.pass = o.pass_len ? pass : NULL;
	err = ndc_dpdk_open(&o, &dp);
	if (err == -EOPNOTSUPP)
		ndc_err("dataplane.mode dpdk: this build has no DPDK support (build with meson "
			"-Ddpdk=enabled, libdpdk-dev installed)");
	else if (err)
		ndc_err("dataplane.mode dpdk: cannot start: %s", strerror(-err));
	/* What opened is the agent's from here on, closed by the step's undo if the rest fails. */
	*ret = dp;
	if (!err)
		err = publish(ag, &ndc_dpdk_answer_table, dp);
	if (err)
		return err;
	err = ndc_dpdk_start(dp);
	if (err)
		ndc_err("dataplane.mode dpdk: cannot launch the lcores: %s", strerror(-err));
	return err;
}

static int dpdk_counters(void *h, uint64_t *c)
{
	ndc_dpdk_counters(h, c);
	return 0;
}

static void dpdk_log_counters(const uint64_t *c)
{
	ndc_info("dpdk: %lu answered, %lu NODATA, %lu NXDOMAIN; passed: %lu miss, %lu expired, "
		 "%lu EDNS, %lu size, %lu format, %lu fragment",
		 (unsigned long)c[NDC_FP_HIT], (unsigned long)c[NDC_FP_NODATA],
		 (unsigned long)c[NDC_FP_NXDOMAIN], (unsigned long)c[NDC_FP_PASS_MISS],
		 (unsigned long)c[NDC_FP_PASS_EXPIRED], (unsigned long)c[NDC_FP_PASS_EDNS],
		 (unsigned long)c[NDC_FP_PASS_SIZE], (unsigned long)c[NDC_FP_PASS_FORMAT],
		 (unsigned long)c[NDC_FP_PASS_FRAG]);
}

static void dpdk_metric(void *arg, const char *name, const char *type, const char *help,
			const char *labels, uint64_t v)
{
	ndc_metric_u64(arg, name, type, help, labels, v);
}

static void dpdk_metrics(void *h, struct ndc_metrics_buf *b)
{
	ndc_dpdk_metrics(h, dpdk_metric, b);
}

static void dpdk_close(void *h, bool handed_over)
{
	(void)handed_over; /* nothing of it outlives the process */
	ndc_dpdk_close(h);
}

/* ---------------------------------------------------------------------------------------------
 * One set of operations per dataplane, chosen once at start; an operation a mode does not have
 * is NULL.
 */
struct ndc_agent_dataplane_ops {
	bool fastpath; /* the BPF fast path (tc, xdp): ndcache_fastpath_loaded, fail-open */
	/*
	 * Loads it (*ret: its handle, NULL: none) with its table's publisher hooked into the
	 * cache. 0, or -errno: the agent does not start. Logged.
	 */
	int (*open)(struct agent *ag, void **ret);
	/* Starts answering (the fast path: once the table is filled). 0 or -errno. */
	int (*attach)(void *h);
	/* Its counters (enum ndc_fp_counter), and the line that logs them at exit. */
	int (*counters)(void *h, uint64_t *c);
	void (*log_counters)(const uint64_t *c);
	/* Its own samples in /metrics. */
	void (*metrics)(void *h, struct ndc_metrics_buf *b);
	/* What it saw of its clients (log.clients) and its sampled answers (log.dnstap). */
	int (*clients)(void *h, int (*cb)(const struct ndc_fp_client *c, void *arg), void *arg);
	int (*samples_poll)(void *h, int timeout_ms,
			    void (*cb)(const struct ndc_fp_sample *s, void *arg), void *arg);
	/* A successor's dataplane answers in its place: stop answering. */
	void (*quiesce)(void *h);
	void (*close)(void *h, bool handed_over);
};

static const struct ndc_agent_dataplane_ops socket_ops = {0};

static const struct ndc_agent_dataplane_ops fastpath_ops = {
    .fastpath = true,
    .open = fastpath_open,
    .attach = fastpath_attach,
    .counters = fastpath_counters,
    .log_counters = fastpath_log_counters,
    .metrics = fastpath_metrics,
    .clients = fastpath_clients,
    .samples_poll = fastpath_samples_poll,
    .quiesce = fastpath_quiesce,
    .close = fastpath_close,
};

static const struct ndc_agent_dataplane_ops dpdk_ops = {
    .open = dpdk_open,
    .counters = dpdk_counters,
    .log_counters = dpdk_log_counters,
    .metrics = dpdk_metrics,
    .close = dpdk_close,
};

int ndc_agent_dataplane_open(struct agent *ag)
{
	enum ndc_dp_mode m = ag->cfg->dataplane.mode;
	int err;

	ag->dp.ops = m == NDC_DP_TC || m == NDC_DP_XDP ? &fastpath_ops
		     : m == NDC_DP_DPDK		       ? &dpdk_ops
						       : &socket_ops;
	if (!ag->dp.ops->open)
		return 0;
	err = ag->dp.ops->open(ag, &ag->dp.h);
	if (err)
		return err;
	/*
	 * A successor that would serve with less than it replaces (no capabilities, no BPF in its
	 * build) does not start: the running agent keeps everything.
	 */
	if (ag->up.pred && ag->dp.ops->fastpath && !ag->dp.h) {
		ndc_err("handover: not taking over from the running agent without the fast "
			"path; it keeps serving");
		return -EPERM;
	}
	return 0;
}

bool ndc_agent_fastpath_loaded(const struct agent *ag)
{
	return ag->dp.h && ag->dp.ops->fastpath;
}

int ndc_agent_dataplane_attach(struct agent *ag)
{
	return ag->dp.h && ag->dp.ops->attach ? ag->dp.ops->attach(ag->dp.h) : 1;
}

int ndc_agent_dataplane_clients(struct agent *ag,
				int (*cb)(const struct ndc_fp_client *c, void *arg), void *arg)
{
	return ag->dp.h && ag->dp.ops->clients ? ag->dp.ops->clients(ag->dp.h, cb, arg)
					       : -EOPNOTSUPP;
}

int ndc_agent_dataplane_samples_poll(struct agent *ag, int timeout_ms,
				     void (*cb)(const struct ndc_fp_sample *s, void *arg),
				     void *arg)
{
	return ag->dp.h && ag->dp.ops->samples_poll
		   ? ag->dp.ops->samples_poll(ag->dp.h, timeout_ms, cb, arg)
		   : -EOPNOTSUPP;
}

void ndc_agent_dataplane_quiesce(struct agent *ag)
{
	if (ag->dp.h && ag->dp.ops->quiesce)
		ag->dp.ops->quiesce(ag->dp.h);
}

void ndc_agent_dataplane_close(struct agent *ag)
{
	uint64_t c[NDC_FP_COUNTER_MAX];

	if (!ag->dp.h)
		return;
	/* nothing inserts into the cache any more (shutdown order); and nothing would reach it */
	ndc_cache_set_hook(ag->query.cache, NULL, NULL);
	ndc_publisher_free(ag->dp.pub);
	ag->dp.pub = NULL;
	if (ag->dp.ops->counters && !ag->dp.ops->counters(ag->dp.h, c))
		ag->dp.ops->log_counters(c);
	ag->dp.ops->close(ag->dp.h, ag->up.handed_over);
	ag->dp.h = NULL;
}

/* ---------------------------------------------------------------------------------------------
 * /metrics.
 */
#define SS(...) NDC_METRIC_FIELD(struct ndc_socket_stats, __VA_ARGS__, NULL)

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

/* The fast path's own samples: others' programs in front, its table, its counters. */
static void fastpath_metrics(void *h, struct ndc_metrics_buf *b)
{
	struct ndc_fastpath_table_stats ts;
	struct fp_counters fc;
	uint64_t n;

	ndc_metric_u64(b, "ndcache_fastpath_foreign_programs", "gauge",
		       "Others' programs on the interfaces the fast path is attached to that "
		       "it runs in front of, so that they never see the queries the kernel "
		       "answers: every tc program in XDP mode, the tc filters after ours in "
		       "tc mode (dataplane.tc_order).",
		       NULL, ndc_fastpath_foreign_programs(h));
	if (!ndc_fastpath_table_stats(h, &ts))
		NDC_METRIC_TABLE(b, table_fields, &ts, NULL);
	if (!ndc_fastpath_counters(h, fc.c))
		NDC_METRIC_TABLE(b, counter_fields, &fc, NULL);
	if (!ndc_fastpath_clients_taken(h, &n))
		ndc_metric_u64(b, "ndcache_kernel_clients_taken_total", "counter",
			       "Times a new client address took the kernel's per-client slot of "
			       "another (its counts on that CPU lost).",
			       NULL, n);
	if (!ndc_fastpath_samples_lost(h, &n))
		ndc_metric_u64(b, "ndcache_kernel_samples_lost_total", "counter",
			       "Sampled kernel answers dropped because the ring buffer was full.",
			       NULL, n);
}

/*
 * The dataplane's figures: the socket server's, whether the fast path runs (always present, so
 * that an alert can tell "not loaded" from "not scraped"), then the dataplane's own. The
 * dataplane cannot write /metrics itself (it sits below the control plane), so the agent, which
 * runs it, does.
 */
void ndc_agent_dataplane_metrics(void *arg, struct ndc_metrics_buf *b)
{
	static const char *const modes[] = {"tc", "xdp", "socket", "dpdk"};
	struct agent *ag = arg;
	unsigned m = ag->cfg->dataplane.mode;
	struct ndc_socket_stats ss;
	char l[32];

	if (ag->srv) {
		ndc_socket_stats(ag->srv, &ss);
		NDC_METRIC_TABLE(b, server_fields, &ss, NULL);
	}
	snprintf(l, sizeof(l), "mode=\"%s\"", m < N(modes) ? modes[m] : "unknown");
	ndc_metric_u64(b, "ndcache_fastpath_loaded", "gauge",
		       "1 while the BPF fast path is loaded (it attaches to matching links as they "
		       "appear); 0 when dataplane.mode is tc or xdp and it could not be loaded, or "
		       "for the other modes.",
		       l, ndc_agent_fastpath_loaded(ag));
	if (ag->dp.h && ag->dp.ops->metrics)
		ag->dp.ops->metrics(ag->dp.h, b);
}
