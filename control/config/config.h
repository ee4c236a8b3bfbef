/* SPDX-License-Identifier: MIT */
/*
 * Agent configuration: YAML per the DESIGN contract, parsed with libyaml. Unknown keys are
 * errors; a bad value names the key path and line. deploy/examples/ndcache.yaml is the reference
 * for every key, its default and its accepted values.
 */
#ifndef NDC_CONFIG_H
#define NDC_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <ndc/ip.h>

#include "records/records.h"

#define NDC_CFG_MAX_ADDRS 8
#define NDC_CFG_MAX_STUBS 64	   /* stub_domains zones */
#define NDC_CFG_SAMPLE_ONE 1000000 /* log.sample 1.0, in millionths */
/* records.multicluster_zones: as many as the record model takes */
#define NDC_CFG_MAX_MC_ZONES NDC_RECORDS_MAX_MC_ZONES
/*
 * forward.per_client defaults: misses (never-seen names) a second per source address. Far above
 * what one pod asks (cluster names and cached answers are not counted), and such that no one
 * client fills forward.max_pending (10000) alone even when the upstream times out every query:
 * burst + qps x timeout_ms = 3000 queries held at most.
 */
#define NDC_CFG_PER_CLIENT_QPS 1000
#define NDC_CFG_PER_CLIENT_BURST 2000

enum ndc_source_kind { NDC_SOURCE_EMBEDDED = 0, NDC_SOURCE_SNAPSHOT, NDC_SOURCE_KUBERNETES };
enum ndc_dp_mode { NDC_DP_TC = 0, NDC_DP_XDP, NDC_DP_SOCKET, NDC_DP_DPDK };
/* dataplane.tc_order: behind others' filters on a hook (the default), or in front (the old way) */
enum ndc_tc_order { NDC_TC_ORDER_AFTER = 0, NDC_TC_ORDER_FIRST };

/* A zone whose names are forwarded to servers of its own (kube-dns stubDomains). */
struct ndc_stub_domain {
	char *zone; /* lowercase, no trailing dot, not the root */
	size_t n_servers;
	struct sockaddr_storage servers[NDC_CFG_MAX_ADDRS]; /* as upstream: port 53 by default */
	unsigned int line; /* where the config file gave it (0: elsewhere), for errors */
};

struct ndc_config {
	char *cluster_domain; /* "cluster.local", no trailing dot */
	size_t n_listen;
	struct ndc_ip listen[NDC_CFG_MAX_ADDRS];
	uint16_t port;
	size_t n_upstream;
	struct sockaddr_storage
	    upstream[NDC_CFG_MAX_ADDRS]; /* "ip:port", "[v6]:port", or ip (53) */
	size_t n_stub_domains;		 /* stub_domains: {zone: [addr, ...]}, at most 64 */
	struct ndc_stub_domain *stub_domains;
	struct {
		enum ndc_source_kind kind; /* no source section: the embedded sample cluster */
		char *snapshot;		   /* source.snapshot */
		char *kubeconfig;	   /* source.kubernetes.kubeconfig; NULL: in-cluster */
		/* source.kubernetes.kube_dns_configmap: watch kube-system/kube-dns (true) */
		bool kube_dns_configmap;
	} source;
	struct {
		uint32_t ttl; /* 5 (CoreDNS default); 0..3600 */
		enum ndc_pods_mode pods;
		bool endpoint_pod_names;
		bool ignore_empty_service;
		size_t n_namespaces;
		char **namespaces; /* empty: all */
		/*
		 * records.multicluster_zones: zones answered from MCS ServiceImports (KEP-1645),
		 * lowercase, no trailing dot, distinct; the cluster domain may be one of them (it
		 * is then answered from ServiceImports, as CoreDNS's `multicluster` option does).
		 */
		size_t n_multicluster_zones;
		char **multicluster_zones;
		unsigned int multicluster_zones_line; /* for errors found across keys */
	} records;
	struct {
		enum ndc_dp_mode mode;
		size_t n_interfaces;
		char **interfaces;
		uint32_t table_size; /* fast-path answer table entries, 262144 */
		bool redirect_peer; /* tc replies with bpf_redirect_peer (faster; skips peer XDP) */
		bool failopen;	    /* no agent listening: the kernel forwards to the upstream */
		char *pin_dir;	    /* NULL: NDC_FP_PIN_DIR (bpffs mounted there if needed) */
		/* where our tc filters go among others' on a hook: after them by default */
		enum ndc_tc_order tc_order;
		struct { /* mode dpdk (dataplane/dpdk/dpdk.h) */
			size_t n_eal_args;
			char **eal_args; /* for rte_eal_init */
			size_t n_ports;
			uint16_t *ports; /* empty: every port the EAL probed */
			size_t n_lcores;
			uint16_t *lcores;	/* CPUs to poll on; empty: one */
			uint32_t queues;	/* per port, 1 */
			uint32_t burst;		/* 32 */
			uint32_t poll_sleep_us; /* 0: busy-poll */
			char *tap_prefix;	/* "ndc-tap": exception-path taps ndc-tap0, ... */
		} dpdk;
	} dataplane;
	struct {
		char *listen; /* "127.0.0.1:9254" */
	} http;
	struct {
		uint32_t max_entries; /* 100000 */
		uint64_t max_bytes;   /* 64 MiB */
		uint32_t max_ttl;     /* 86400: longer upstream TTLs are capped */
		uint32_t neg_max_ttl; /* 3600: RFC 2308 5 suggests 1-3 hours at most */
		uint32_t stale_max;   /* 86400: RFC 8767 suggests 1-3 days of serving stale */
		/* cache.prefetch: {min_hits, before_pct}, or false; on, 2 and 10 (CoreDNS's) */
		struct {
			bool on;
			uint32_t min_hits;   /* 1..1000000 */
			uint32_t before_pct; /* 1..99 */
		} prefetch;
	} cache;
	struct {
		uint32_t timeout_ms;  /* per upstream attempt, 1000 */
		uint32_t max_pending; /* queries waiting for an upstream, 10000; more: SERVFAIL */
		/* In the order of query.h's enum ndc_fwd_protocol and ndc_fwd_policy: */
		int protocol; /* udp (default), tcp, prefer_udp */
		int policy;   /* sequential (default), random, round_robin */
		/* forward.per_client: {qps, burst}, or false (qps 0); 1000 and 2000 */
		struct {
			uint32_t qps;	/* misses a second per source address, 0..10000000 */
			uint32_t burst; /* 1..10000000 */
		} per_client;
	} forward;
	struct {
		int level;	     /* enum ndc_log_level (ndc/log.h); info */
		bool queries;	     /* a line per query answered in user space (CoreDNS's log) */
		uint32_t sample_ppm; /* of those, this many per million (log.sample 0.000001..1) */
		/* log.clients: per-client counts and the names sketch (/debug/top); true */
		bool clients;
		/* log.clients_namespaces: per-namespace aggregates in /metrics; false */
		bool clients_namespaces;
		/* log.dnstap: {socket, sample, kernel_sample}; socket NULL: off */
		struct {
			char *socket;	      /* the reader's unix socket, an absolute path */
			double sample;	      /* socket path's queries written, 0..1; 1.0 */
			double kernel_sample; /* kernel answers sampled, 0..1; 0.01 */
		} dnstap;
	} log;
	struct {
		/* at SIGTERM with a successor joined but not taken over: serve on this long at
		 * most, waiting for its takeover; 30 (under the DaemonSet's grace period) */
		uint32_t wait_s;
		/* at SIGTERM with no successor joined: wait this long for one to join (a surge
		 * rollout's successor may start at the same moment); 2000 */
		uint32_t join_wait_ms;
	} upgrade;
	uint32_t workers;	/* 0: one per online CPU */
	uint32_t tcp_idle_ms;	/* 10000 (RFC 7766 6.2.3 suggests seconds) */
	uint32_t tcp_max_conns; /* per worker, 1024 */
};

/*
 * Fills cfg with the defaults above (listen 169.254.20.10, port 53, upstream none). Cannot fail:
 * the default strings and arrays (cluster_domain, dataplane.interfaces, http.listen) are static,
 * and ndc_config_free leaves them alone. source.snapshot and source.kubeconfig are always NULL or
 * heap, so a caller may free and replace them (--kubeconfig).
 */
void ndc_config_defaults(struct ndc_config *cfg);

/*
 * Sets cfg to the defaults (what it held before is overwritten, not freed), then applies the YAML
 * text. Empty text or an empty document is valid: all defaults. Returns 0, or -EINVAL with a
 * one-line reason naming the key path and line in err ("line 4: records.ttl: expected an integer
 * 0..3600, got 'x'"), or -ENOMEM. err may be NULL. On error cfg holds the defaults plus whatever
 * was parsed; free it with ndc_config_free either way.
 */
int ndc_config_parse(const char *text, size_t len, struct ndc_config *cfg, char *err,
		     size_t errlen);

/*
 * Reads the file (at most 1 MiB, else -EFBIG) and parses it; -errno with "PATH: reason" in err if
 * it cannot be read. Parse errors are prefixed with the path too. cfg is always initialized.
 */
int ndc_config_load(const char *path, struct ndc_config *cfg, char *err, size_t errlen);

/* ndc_config_load, and on success the text parsed (NUL-terminated, *ret_len bytes; free it):
 * what a reload compares the file with. */
int ndc_config_load_text(const char *path, struct ndc_config *cfg, char **ret_text, size_t *ret_len,
			 char *err, size_t errlen);

/*
 * --kubeconfig: the source becomes Kubernetes through the kubeconfig at path, whatever source the
 * file gave. Applied where the file is read, at start and at every reload. 0, or -ENOMEM (cfg
 * unchanged then).
 */
int ndc_config_use_kubeconfig(struct ndc_config *cfg, const char *path);

/* Frees what parsing allocated and zeroes cfg, so freeing twice (or NULL) is harmless. */
void ndc_config_free(struct ndc_config *cfg);

/* ---- helpers the config's other readers share (the kube-dns ConfigMap, reloads) ---- */

/*
 * A server address as upstream takes it: "ip", "ip:port", "[v6]", "[v6]:port" or a bare IPv6
 * literal, port 53 by default. 0, -EINVAL for a bad address, -ERANGE for a bad port.
 */
int ndc_config_parse_server(const char *s, struct sockaddr_storage *ret);

/* NULL when s is a good domain name (lowercased, one trailing dot dropped, in place), else why
 * not ("empty name", "label longer than 63 characters", ...). */
const char *ndc_config_check_domain(char *s);

/* Frees n stub domains and the array. */
void ndc_config_stubs_free(struct ndc_stub_domain *v, size_t n);

/* ---- the kube-dns ConfigMap (config_kube_dns.c) ---- */

/*
 * The data keys of kube-system/kube-dns that NodeLocal DNSCache applies, each a JSON text:
 *   stubDomains:         {"zone": ["ip[:port]", ...], ...}
 *   upstreamNameservers: ["ip[:port]", ...]
 * Each returns 0, or -EINVAL with the reason in err (naming the zone or the item), or -ENOMEM.
 * Zones are checked as stub_domains are (a name, not the root, not twice, at most
 * NDC_CFG_MAX_STUBS, 1..8 servers each); upstreamNameservers holds 1..8 servers.
 */
int ndc_kube_dns_stub_domains(const char *json, size_t len, struct ndc_stub_domain **ret,
			      size_t *ret_n, char *err, size_t errlen);
int ndc_kube_dns_upstreams(const char *json, size_t len,
			   struct sockaddr_storage ret[NDC_CFG_MAX_ADDRS], size_t *ret_n, char *err,
			   size_t errlen);

#endif
