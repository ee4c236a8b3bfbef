// SPDX-License-Identifier: MIT
/*
 * Who asks what (issue 37): the agent's steps "pods" (pod identity: the watch of this node's
 * pods) and "dnstap" (the writer), the resolver's observer and the forwarder's tap that feed the
 * per-client table (control/top) and dnstap, /debug/top, and their /metrics section.
 *
 * What a client is called, everywhere (/debug/top, dnstap's extra): "namespace/name" for a pod
 * of this node, "node/<node name>" for the node's own addresses (hostNetwork pods, kubelet), ""
 * when the address is no pod of this node (or the agent has no identity: no NODE_NAME, or a
 * snapshot source).
 *
 * The kernel's side (the dataplane's clients and samples_poll ops, tc and xdp) comes in at two
 * places: kernel_clients() (the per-client counts, merged in at each snapshot) and step "kernel
 * samples"' thread, which hands each sampled kernel answer to ndc_agent_kernel_sample().
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include <ndc/dns_wire.h>
#include <ndc/log.h>

#include "dnstap/dnstap.h"
#include "fastpath/fastpath.h"
#include "http/http.h"
#include "internal.h"
#include "pods/pods.h"
#include "query/query.h"
#include "top/top.h"

/* ---------------------------------------------------------------------------------------------
 * Step "pods".
 */
int ndc_agent_pods_start(struct agent *ag)
{
	const char *node = getenv("NODE_NAME");
	struct ndc_k8s_watch_opts wo = {
	    .kinds = 1u << NDC_K8S_NODE_PODS,
	    .page_size = 500,
	    .timeout_s = 300,
	    .backoff_min_ms = 250,
	    .backoff_max_ms = 30000,
	};
	char err[160];
	int ret;

	if (!ag->conn) {
		ndc_info("pods: not a Kubernetes source: clients are shown by address");
		return 0;
	}
	if (!node || !*node) {
		ndc_info(
		    "pods: env NODE_NAME not set (the DaemonSet passes spec.nodeName): clients "
		    "are shown by address");
		return 0;
	}
	/* Identity is an aid: a bad NODE_NAME or a watch that cannot start never stops the DNS. */
	if (ndc_pods_node_name_check(node, err, sizeof(err)) < 0) {
		ndc_err("pods: env NODE_NAME: %s; clients are shown by address", err);
		return 0;
	}
	snprintf(ag->obs.node, sizeof(ag->obs.node), "%s", node);
	ret = ndc_pods_new(node, &ag->obs.pods);
	if (ret == 0) {
		wo.node_name = node;
		ret = ndc_pods_watch_start(ag->obs.pods, ag->conn, &wo, &ag->obs.pods_watch);
	}
	if (ret < 0) {
		ndc_err("pods: watch of node %s's pods: %s; clients are shown by address", node,
			strerror(-ret));
		ndc_pods_free(ag->obs.pods);
		ag->obs.pods = NULL;
		ag->obs.node[0] = '\0';
	}
	return 0;
}

void ndc_agent_pods_stop(struct agent *ag)
{
	ndc_k8s_watch_stop(ag->obs.pods_watch);
	ag->obs.pods_watch = NULL;
}

void ndc_agent_pods_free(struct agent *ag)
{
	ndc_pods_free(ag->obs.pods);
	ag->obs.pods = NULL;
}

/* ---------------------------------------------------------------------------------------------
 * Step "dnstap" (log.dnstap) and the per-client table (log.clients).
 */
int ndc_agent_dnstap_start(struct agent *ag)
{
	const struct ndc_config *cfg = ag->cfg;
	char host[256] = "";
	int ret;

	if (cfg->log.clients) {
		ret = ndc_top_new(&ag->obs.top);
		if (ret < 0) {
			ndc_err("log.clients: %s", strerror(-ret));
			return ret;
		}
	}
	if (!cfg->log.dnstap.socket)
		return 0;
	if (ag->obs.node[0])
		snprintf(host, sizeof(host), "%s", ag->obs.node);
	else if (gethostname(host, sizeof(host) - 1) < 0)
		host[0] = '\0';
	struct ndc_dnstap_opts o = {
	    .socket_path = cfg->log.dnstap.socket,
	    .identity = host[0] ? host : NULL,
	};
	ret = ndc_dnstap_open(&o, &ag->obs.tap);
	if (ret < 0) {
		ndc_err("log.dnstap: %s: %s", cfg->log.dnstap.socket, strerror(-ret));
		return ret;
	}
	ndc_info("log.dnstap: writing to %s (sample %g, kernel_sample %g, identity %s)",
		 cfg->log.dnstap.socket, cfg->log.dnstap.sample, cfg->log.dnstap.kernel_sample,
		 host[0] ? host : "none");
	return 0;
}

/* After every stop: no worker, forwarder or watch calls the observer any more. */
void ndc_agent_dnstap_free(struct agent *ag)
{
	ndc_dnstap_close(ag->obs.tap);
	ag->obs.tap = NULL;
	ndc_top_free(ag->obs.top);
	ag->obs.top = NULL;
}

/* ---------------------------------------------------------------------------------------------
 * The observer: on the query path (workers, the forwarder thread), never blocking.
 */
/* A socket address as an ndc_ip, IPv4-mapped IPv6 as IPv4 (one client, one row). */
static bool peer_ip(const struct sockaddr_storage *ss, struct ndc_ip *ip, uint16_t *port)
{
	memset(ip, 0, sizeof(*ip));
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *s4 = (const void *)ss;

		ip->family = AF_INET;
		memcpy(ip->addr, &s4->sin_addr, 4);
		*port = ntohs(s4->sin_port);
		return true;
	}
	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const void *)ss;

		*port = ntohs(s6->sin6_port);
		if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
			ip->family = AF_INET;
			memcpy(ip->addr, s6->sin6_addr.s6_addr + 12, 4);
		} else {
			ip->family = AF_INET6;
			memcpy(ip->addr, &s6->sin6_addr, 16);
		}
		return true;
	}
	return false;
}

/* Who has addr: "namespace/name", "node/<name>", or "" (extra, NDC_DNSTAP_EXTRA_MAX bytes). */
static size_t ident_text(struct agent *ag, const struct ndc_ip *ip, char *out, size_t cap)
{
	struct ndc_pod_ident id;
	int n;

	out[0] = '\0';
	if (!ag->obs.pods || ndc_pods_lookup(ag->obs.pods, ip, &id) < 0)
		return 0;
	if (id.owner == NDC_POD_NODE)
		n = snprintf(out, cap, "node/%s", id.name);
	else
		n = snprintf(out, cap, "%s/%s", id.ns, id.name);
	return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

/* One sampler per thread: dnstap's sample, drawn without shared state. */
static _Thread_local struct {
	bool init;
	struct ndc_dnstap_sampler s;
} tl_sampler;

static void tap_client(struct agent *ag, enum ndc_dnstap_type type,
		       const struct sockaddr_storage *peer, bool tcp, const uint8_t *msg,
		       size_t len, const struct timespec *qtime)
{
	char extra[NDC_DNSTAP_EXTRA_MAX];
	struct ndc_dnstap_event ev = {
	    .type = type,
	    .protocol = tcp ? IPPROTO_TCP : IPPROTO_UDP,
	    .query_time = *qtime,
	    .wire = msg,
	    .wire_len = len,
	};
	struct ndc_ip ip;
	uint16_t port = 0;

	/* no address, no event (as before the reader's check); no reader, no pod look-up */
	if (!peer_ip(peer, &ip, &port) || ndc_dnstap_drop_unread(ag->obs.tap))
		return;
	ev.family = ip.family;
	ev.query_addr = ip.addr;
	ev.query_port = port;
	ev.extra = extra;
	ev.extra_len = ident_text(ag, &ip, extra, sizeof(extra));
	if (type == NDC_DNSTAP_CLIENT_RESPONSE)
		clock_gettime(CLOCK_REALTIME, &ev.response_time);
	ndc_dnstap_log(ag->obs.tap, &ev); /* a drop is counted by the writer */
}

static bool obs_query(void *arg, const struct sockaddr_storage *peer, bool tcp, const uint8_t *msg,
		      size_t len, const struct timespec *time)
{
	struct agent *ag = arg;

	if (!ag->obs.tap)
		return false;
	if (!tl_sampler.init) {
		ndc_dnstap_sampler_init(&tl_sampler.s, ag->cfg->log.dnstap.sample, 0);
		tl_sampler.init = true;
	}
	if (!ndc_dnstap_sample(&tl_sampler.s))
		return false;
	tap_client(ag, NDC_DNSTAP_CLIENT_QUERY, peer, tcp, msg, len, time);
	return true;
}

static enum ndc_top_source source_of(const char *source)
{
	if (!strcmp(source, "cluster"))
		return NDC_TOP_LOCAL;
	if (!strcmp(source, "cache"))
		return NDC_TOP_CACHE;
	if (!strcmp(source, "upstream"))
		return NDC_TOP_FORWARDED;
	if (!strcmp(source, "limited"))
		return NDC_TOP_LIMITED;
	return NDC_TOP_OTHER;
}

static void obs_answered(void *arg, const struct sockaddr_storage *peer, bool tcp,
			 const struct ndc_query *q, const char *source, const uint8_t *reply,
			 size_t len, bool sampled, const struct timespec *qtime)
{
	struct agent *ag = arg;
	struct ndc_ip ip;
	uint16_t port;

	if (ag->obs.top && peer_ip(peer, &ip, &port))
		ndc_top_count(ag->obs.top, &ip, q->question_ok ? q->lname : NULL,
			      q->question_ok ? q->qname_len : 0, source_of(source),
			      len >= NDC_DNS_HDR_LEN ? reply[3] & 0xf : -1);
	if (sampled && len)
		tap_client(ag, NDC_DNSTAP_CLIENT_RESPONSE, peer, tcp, reply, len, qtime);
}

static const struct ndc_query_observer observer = {
    .query = obs_query,
    .answered = obs_answered,
};

/* The forwarder's upstream messages: extra stays empty (one upstream query may serve several
 * pods' queries at once, coalesced). */
static void fwd_tap(void *arg, bool response, bool tcp, const struct sockaddr_storage *up,
		    const uint8_t *msg, size_t len)
{
	struct agent *ag = arg;
	struct ndc_dnstap_event ev = {
	    .type = response ? NDC_DNSTAP_FORWARDER_RESPONSE : NDC_DNSTAP_FORWARDER_QUERY,
	    .protocol = tcp ? IPPROTO_TCP : IPPROTO_UDP,
	    .wire = msg,
	    .wire_len = len,
	};
	struct ndc_ip ip;
	uint16_t port = 0;

	if (!peer_ip(up, &ip, &port) || ndc_dnstap_drop_unread(ag->obs.tap))
		return;
	ev.family = ip.family;
	ev.response_addr = ip.addr;
	ev.response_port = port;
	clock_gettime(CLOCK_REALTIME, response ? &ev.response_time : &ev.query_time);
	ndc_dnstap_log(ag->obs.tap, &ev);
}

void ndc_agent_observe_forwarder(struct agent *ag)
{
	if (ag->obs.tap)
		ndc_forwarder_set_tap(ag->query.fwd, fwd_tap, ag);
}

void ndc_agent_observe_resolver(struct agent *ag)
{
	struct ndc_query_observer o = observer;

	o.arg = ag;
	if (!ag->obs.tap)
		o.query = NULL; /* nothing sampled: no clock read per query */
	if (ag->obs.top || ag->obs.tap)
		ndc_resolver_set_observer(ag->query.res, &o);
}

/* ---------------------------------------------------------------------------------------------
 * The kernel's side: its per-client counts and its sampled answers.
 */
struct ext_rows {
	struct ndc_top_ext_row *rows;
	size_t n, max;
};

static int ext_row(const struct ndc_fp_client *c, void *arg)
{
	struct ext_rows *x = arg;

	if (x->n == x->max)
		return 1; /* more clients than a view holds: the rest are not shown */
	x->rows[x->n++] = (struct ndc_top_ext_row){.addr = c->addr,
						   .queries = c->queries,
						   .answered = c->answered,
						   .nxdomain = c->nxdomain,
						   .passed = c->passed};
	return 0;
}

/*
 * The kernel's per-client counts (the dataplane's table, summed over CPUs), merged into every
 * snapshot (/debug/top, `ndcache top`, the per-namespace metrics): how many rows, at most max.
 * None where the dataplane keeps none (sockets only, DPDK, the fast path not loaded).
 */
static size_t kernel_clients(struct agent *ag, struct ndc_top_ext_row *rows, size_t max)
{
	struct ext_rows x = {.rows = rows, .max = max};

	if (!ag->cfg->log.clients || ndc_agent_dataplane_clients(ag, ext_row, &x) < 0)
		return 0;
	return x.n;
}

static void on_sample(const struct ndc_fp_sample *s, void *arg)
{
	ndc_agent_kernel_sample(arg, &s->client, s->client_port, s->msg, s->len);
}

/* The kernel's sampled answers: to the names sketches and dnstap, until step stop. */
static void *samples_main(void *arg)
{
	struct agent *ag = arg;
	int r;

	while (!atomic_load(&ag->obs.samples_stop)) {
		r = ndc_agent_dataplane_samples_poll(ag, 200, on_sample, ag);
		if (r < 0 && r != -EINTR) {
			ndc_warn("log.dnstap: kernel samples: %s; no more are read", strerror(-r));
			break;
		}
	}
	return NULL;
}

/*
 * Step "kernel samples": a thread reading the answers the kernel samples (log.dnstap's
 * kernel_sample, set when the fast path was opened) while a dnstap writer or the names sketches
 * take them. Nothing without a fast path or with a rate of 0.
 */
int ndc_agent_samples_start(struct agent *ag)
{
	const struct ndc_config *cfg = ag->cfg;
	int r;

	if (!ndc_agent_fastpath_loaded(ag) || !cfg->log.dnstap.socket ||
	    cfg->log.dnstap.kernel_sample <= 0 || (!ag->obs.tap && !ag->obs.top))
		return 0;
	atomic_store(&ag->obs.samples_stop, false);
	r = pthread_create(&ag->obs.samples, NULL, samples_main, ag);
	if (r) {
		ndc_err("log.dnstap: kernel samples: %s", strerror(r));
		return -r;
	}
	ag->obs.samples_run = true;
	return 0;
}

void ndc_agent_samples_stop(struct agent *ag)
{
	if (!ag->obs.samples_run)
		return;
	atomic_store(&ag->obs.samples_stop, true);
	pthread_join(ag->obs.samples, NULL); /* its poll returns within 200 ms */
	ag->obs.samples_run = false;
}

void ndc_agent_kernel_sample(struct agent *ag, const struct ndc_ip *client, uint16_t port,
			     const uint8_t *msg, size_t len)
{
	uint8_t lname[NDC_NAME_MAX];
	size_t pos = NDC_DNS_HDR_LEN, nlen = 0;

	if (len < NDC_DNS_HDR_LEN)
		return;
	if (ndc_get16(msg + 4) == 1 && ndc_name_unpack(msg, len, &pos, lname, &nlen) == 0) {
		for (size_t i = 0; i < nlen; i++)
			if (lname[i] >= 'A' && lname[i] <= 'Z')
				lname[i] = (uint8_t)(lname[i] + 32);
		ndc_top_name_seen(ag->obs.top, client, lname, nlen);
	}
	if (ag->obs.tap && !ndc_dnstap_drop_unread(ag->obs.tap)) {
		char extra[NDC_DNSTAP_EXTRA_MAX];
		struct ndc_dnstap_event ev = {
		    .type = NDC_DNSTAP_CLIENT_RESPONSE,
		    .family = client->family,
		    .protocol = IPPROTO_UDP,
		    .query_addr = client->addr,
		    .query_port = port,
		    .wire = msg,
		    .wire_len = len,
		    .extra = extra,
		};

		ev.extra_len = ident_text(ag, client, extra, sizeof(extra));
		clock_gettime(CLOCK_REALTIME, &ev.response_time);
		ndc_dnstap_log(ag->obs.tap, &ev);
	}
}

/* ---------------------------------------------------------------------------------------------
 * /debug/top and the metrics.
 */
static int snapshot(struct agent *ag, struct ndc_top_view **ret)
{
	struct ndc_top_ext_row *rows = calloc(NDC_TOP_CLIENTS, sizeof(*rows));
	size_t n;
	int err;

	if (!rows)
		return -ENOMEM;
	n = kernel_clients(ag, rows, NDC_TOP_CLIENTS);
	err = ndc_top_snapshot(ag->obs.top, rows, n, ret);
	free(rows);
	return err;
}

static void add_u64(struct json_object *o, const char *k, uint64_t v)
{
	json_object_object_add(o, k, json_object_new_uint64(v));
}

static struct json_object *names_json(const struct ndc_top_name *names, size_t n)
{
	struct json_object *a = json_object_new_array();
	char text[NDC_TOP_NAME_TEXT];

	for (size_t i = 0; i < n; i++) {
		struct json_object *o = json_object_new_object();

		ndc_top_name_text(names[i].lname, names[i].nlen, text);
		json_object_object_add(o, "name", json_object_new_string(text));
		add_u64(o, "count", names[i].count);
		add_u64(o, "error", names[i].error);
		json_object_array_add(a, o);
	}
	return a;
}

static double share(uint64_t part, uint64_t whole)
{
	return whole ? (double)part / (double)whole : 0.0;
}

static struct json_object *client_json(struct agent *ag, const struct ndc_top_client *cl)
{
	struct json_object *o = json_object_new_object();
	const struct ndc_top_counts *c = &cl->c;
	struct ndc_pod_ident id = {.owner = NDC_POD_UNKNOWN};
	char addr[INET6_ADDRSTRLEN] = "other";
	const char *owner = "other";
	/* a query the kernel passed is counted again by the socket path */
	uint64_t total = c->queries - (c->kernel_passed <= c->queries ? c->kernel_passed : 0);

	if (cl->addr.family) {
		inet_ntop(cl->addr.family, cl->addr.addr, addr, sizeof(addr));
		if (ag->obs.pods)
			ndc_pods_lookup(ag->obs.pods, &cl->addr, &id);
		owner = id.owner == NDC_POD_POD	   ? "pod"
			: id.owner == NDC_POD_NODE ? "node"
						   : "unknown";
	}
	json_object_object_add(o, "addr", json_object_new_string(addr));
	json_object_object_add(o, "owner", json_object_new_string(owner));
	json_object_object_add(o, "namespace", json_object_new_string(id.ns));
	json_object_object_add(o, "pod",
			       json_object_new_string(id.owner == NDC_POD_POD ? id.name : ""));
	json_object_object_add(o, "node",
			       json_object_new_string(id.owner == NDC_POD_NODE ? id.name : ""));
	add_u64(o, "queries", total);
	add_u64(o, "kernel_answered", c->kernel_answered);
	add_u64(o, "kernel_passed", c->kernel_passed);
	add_u64(o, "local", c->local);
	add_u64(o, "cache", c->cache);
	add_u64(o, "forwarded", c->forwarded);
	add_u64(o, "limited", c->limited);
	add_u64(o, "nxdomain", c->nxdomain);
	add_u64(o, "servfail", c->servfail);
	json_object_object_add(o, "nxdomain_share",
			       json_object_new_double(share(c->nxdomain, total)));
	json_object_object_add(o, "upstream_share",
			       json_object_new_double(share(c->forwarded, total)));
	json_object_object_add(o, "names", names_json(cl->names, cl->n_names));
	return o;
}

/* /debug/top: the snapshot as JSON (docs/OPERATIONS.md has its fields). */
static int top_page(void *arg, char **ret_body, size_t *ret_len)
{
	struct agent *ag = arg;
	struct json_object *root = json_object_new_object(), *clients = json_object_new_array();
	struct ndc_pods_stats ps = {0};
	struct ndc_top_view *v = NULL;
	const char *text;
	size_t len;
	int err = 0;

	if (ag->obs.pods)
		ndc_pods_stats(ag->obs.pods, &ps);
	json_object_object_add(root, "node", json_object_new_string(ag->obs.node));
	json_object_object_add(root, "identity", json_object_new_boolean(ag->obs.pods != NULL));
	json_object_object_add(root, "pods_synced", json_object_new_boolean(ps.synced));
	json_object_object_add(root, "clients_enabled",
			       json_object_new_boolean(ag->obs.top != NULL));
	add_u64(root, "clients_max", NDC_TOP_CLIENTS);
	if (ag->obs.top) {
		err = snapshot(ag, &v);
		if (err < 0)
			goto out;
		add_u64(root, "time_ms", v->mono_ms);
		add_u64(root, "overflow", v->overflow);
		add_u64(root, "names_total", v->names_total);
		add_u64(root, "names_skipped", v->names_skipped);
		for (size_t i = 0; i < v->n_clients; i++)
			json_object_array_add(clients, client_json(ag, &v->clients[i]));
		json_object_object_add(root, "names", names_json(v->names, v->n_names));
	} else {
		json_object_object_add(root, "names", json_object_new_array());
	}
	json_object_object_add(root, "clients", clients);
	clients = NULL;
	text = json_object_to_json_string_length(root, JSON_C_TO_STRING_PLAIN, &len);
	*ret_body = text ? malloc(len + 1) : NULL;
	if (!*ret_body) {
		err = -ENOMEM;
		goto out;
	}
	memcpy(*ret_body, text, len);
	(*ret_body)[len++] = '\n';
	*ret_len = len;
out:
	free(v);
	json_object_put(clients);
	json_object_put(root);
	return err;
}

void ndc_agent_observe_http(struct agent *ag)
{
	ndc_http_add_page(ag->http, "/debug/top", "application/json", top_page, ag);
}

/* The per-namespace aggregates (log.clients_namespaces): bounded by the node's namespaces. */
struct ns_sum {
	char ns[NDC_POD_NS_MAX + 1];
	uint64_t queries, nxdomain, forwarded, limited;
};

static void namespace_metrics(struct agent *ag, const struct ndc_top_view *v,
			      struct ndc_metrics_buf *b)
{
	struct ns_sum *sums = calloc(v->n_clients + 1, sizeof(*sums));
	size_t n = 0;

	for (size_t i = 0; sums && i < v->n_clients; i++) {
		const struct ndc_top_client *cl = &v->clients[i];
		struct ndc_pod_ident id = {.owner = NDC_POD_UNKNOWN};
		const char *ns;
		size_t k;

		if (cl->addr.family && ag->obs.pods)
			ndc_pods_lookup(ag->obs.pods, &cl->addr, &id);
		/* namespaces are DNS labels: "_node" and "_unknown" never collide with one */
		ns = id.owner == NDC_POD_POD	? id.ns
		     : id.owner == NDC_POD_NODE ? "_node"
						: "_unknown";
		for (k = 0; k < n && strcmp(sums[k].ns, ns); k++)
			;
		if (k == n)
			snprintf(sums[n++].ns, sizeof(sums[0].ns), "%s", ns);
		sums[k].queries += cl->c.queries -
				   (cl->c.kernel_passed <= cl->c.queries ? cl->c.kernel_passed : 0);
		sums[k].nxdomain += cl->c.nxdomain;
		sums[k].forwarded += cl->c.forwarded;
		sums[k].limited += cl->c.limited;
	}
	for (size_t k = 0; sums && k < n; k++) {
		char l[NDC_POD_NS_MAX + 16];

		snprintf(l, sizeof(l), "namespace=\"%s\"", sums[k].ns);
		ndc_metric_u64(b, "ndcache_namespace_queries_total", "counter",
			       "Queries from the pods of a namespace on this node (log.clients_"
			       "namespaces; _node: the node's addresses, _unknown: no pod).",
			       l, sums[k].queries);
		ndc_metric_u64(b, "ndcache_namespace_nxdomain_total", "counter",
			       "NXDOMAIN answers to the pods of a namespace on this node.", l,
			       sums[k].nxdomain);
		ndc_metric_u64(b, "ndcache_namespace_forwarded_total", "counter",
			       "Queries of the pods of a namespace on this node sent upstream.", l,
			       sums[k].forwarded);
		ndc_metric_u64(b, "ndcache_namespace_limited_total", "counter",
			       "Queries of the pods of a namespace on this node refused by "
			       "forward.per_client.",
			       l, sums[k].limited);
	}
	free(sums);
}

void ndc_agent_observe_metrics(void *arg, struct ndc_metrics_buf *b)
{
	struct agent *ag = arg;

	if (ag->obs.pods) {
		struct ndc_pods_stats ps;
		struct ndc_k8s_watch_stats ws = {0};

		ndc_pods_stats(ag->obs.pods, &ps);
		if (ag->obs.pods_watch)
			ndc_k8s_watch_stats(ag->obs.pods_watch, &ws);
		ndc_metric_u64(
		    b, "ndcache_pods_known", "gauge",
		    "Pods of this node known to pod identity (hostNetwork ones included).", NULL,
		    ps.pods);
		ndc_metric_u64(b, "ndcache_pods_addresses", "gauge",
			       "Addresses pod identity maps to a pod or to the node.", NULL,
			       ps.addrs);
		ndc_metric_u64(b, "ndcache_pods_synced", "gauge",
			       "1 once the watch of this node's pods has had a complete list.",
			       NULL, ps.synced);
		ndc_metric_u64(b, "ndcache_pods_rejected_total", "counter",
			       "Pod objects pod identity refused (malformed), or past its bound.",
			       NULL, ps.rejected + ps.full);
		ndc_metric_u64(b, "ndcache_pods_watch_events_total", "counter",
			       "Watch events of this node's pods.", NULL, ws.events);
		ndc_metric_u64(b, "ndcache_pods_watch_reconnects_total", "counter",
			       "Reconnects of the watch of this node's pods.", NULL, ws.reconnects);
	}
	if (ag->obs.top) {
		struct ndc_top_view *v = NULL;

		if (snapshot(ag, &v) == 0) {
			size_t tracked = v->n_clients;

			if (tracked && !v->clients[tracked - 1].addr.family)
				tracked--;
			ndc_metric_u64(b, "ndcache_clients_tracked", "gauge",
				       "Source addresses in the per-client table (log.clients; "
				       "bound 512).",
				       NULL, tracked);
			ndc_metric_u64(
			    b, "ndcache_clients_overflow_total", "counter",
			    "Queries counted in the table's \"other\" row: their address "
			    "found no room.",
			    NULL, v->overflow);
			if (ag->cfg->log.clients_namespaces)
				namespace_metrics(ag, v, b);
			free(v);
		}
	}
	if (ag->obs.tap) {
		static const char *const reasons[] = {"full", "busy", "no_reader", "invalid"};
		struct ndc_dnstap_stats ds;
		uint64_t dropped[4];

		ndc_dnstap_stats(ag->obs.tap, &ds);
		dropped[0] = ds.dropped_full;
		dropped[1] = ds.dropped_busy;
		dropped[2] = ds.dropped_no_reader;
		dropped[3] = ds.dropped_invalid;
		ndc_metric_u64(b, "ndcache_dnstap_frames_total", "counter",
			       "dnstap frames written to the reader (log.dnstap).", NULL,
			       ds.written);
		ndc_metric_u64_each(
		    b, "ndcache_dnstap_dropped_total", "counter",
		    "dnstap events dropped: queue full (a slow reader), its lock busy, "
		    "no reader connected, an event refused.",
		    "reason", reasons, dropped, 4);
		ndc_metric_u64(b, "ndcache_dnstap_reconnects_total", "counter",
			       "Connections to the dnstap reader after the first.", NULL,
			       ds.reconnects);
		ndc_metric_u64(b, "ndcache_dnstap_connected", "gauge",
			       "1 while a dnstap reader is connected.", NULL, ds.connected);
	}
}
