/* SPDX-License-Identifier: MIT */
/*
 * Pod identity (issue 37 item 1): which pod of this node owns a source address. The agent
 * watches the Pods bound to its node (NDC_K8S_NODE_PODS, fieldSelector=spec.nodeName=<node>)
 * into a struct ndc_pods; query threads ask it "addr -> namespace/name" without locks.
 *
 * Writer side: the watch's callbacks (ndc_pods_watch_ops, one thread) or the calls below, from
 * any thread (a mutex orders them). Every change publishes a new immutable table of addresses
 * sorted for binary search, swapped in by pointer under RCU (control/rcu.h): a node runs at most
 * a few hundred pods, so rebuilding it whole per event costs microseconds and keeps the readers'
 * side a plain array.
 *
 * What an address maps to: a pod's status.podIPs (falling back to status.podIP), at most two
 * (one per family, as the API validates). hostNetwork pods share the node's addresses: those
 * are reported as the node (NDC_POD_NODE, the node's name), never as one of the pods that
 * happen to run there; so are every pod's status.hostIPs (hostIP), the node's own addresses,
 * which the node's processes (kubelet, its resolver) send from. Pods that ended (phase Succeeded or
 * Failed) have released their addresses to the next pod and map nothing. When two pods claim one
 * address (an IP reused while the old pod is still terminating), the one not being deleted wins,
 * then the one changed last.
 *
 * Everything a pod's JSON says is untrusted: names are checked against the API's own rules
 * (DNS labels and subdomains, so they are safe to print on a terminal and in JSON unescaped), a
 * malformed pod is rejected with a reason and forgets what an earlier version of it mapped,
 * and the number of pods kept is bounded (NDC_PODS_MAX).
 */
#ifndef NDC_PODS_H
#define NDC_PODS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ndc/ip.h>

#include "k8s/k8s.h"

struct json_object;

#define NDC_POD_NS_MAX 63    /* a namespace is a DNS label */
#define NDC_POD_NAME_MAX 253 /* pod and node names are DNS subdomains */
#define NDC_POD_MAX_IPS 2    /* status.podIPs: one per family */
/* kubelet's maxPods is 110 by default and rarely above 500; a server sending more is broken. */
#define NDC_PODS_MAX 4096

/* One Pod as pod identity reads it (ndc_pod_convert). */
struct ndc_pod_info {
	char ns[NDC_POD_NS_MAX + 1];
	char name[NDC_POD_NAME_MAX + 1];
	char node[NDC_POD_NAME_MAX + 1]; /* spec.nodeName; "" when not scheduled */
	bool host_network;		 /* spec.hostNetwork */
	bool ended;			 /* status.phase Succeeded or Failed */
	bool deleting;			 /* metadata.deletionTimestamp set */
	uint8_t n_ips;
	uint8_t n_host_ips;
	struct ndc_ip ips[NDC_POD_MAX_IPS];	 /* status.podIPs, else status.podIP */
	struct ndc_ip host_ips[NDC_POD_MAX_IPS]; /* status.hostIPs, else hostIP: the node's */
};

/*
 * A Pod object (as the API server sends it) to *ret (zeroed first). 0, or -EINVAL with a
 * one-line reason in err naming the field: not an object, metadata.namespace or metadata.name
 * missing or not a valid name, a field of the wrong type, an address that does not parse, more
 * than NDC_POD_MAX_IPS addresses. Absent optional fields (spec, status, podIPs, phase) are fine:
 * a pending pod has no address yet. After -EINVAL, ns and name hold the pod's names if they
 * were valid ("" otherwise) and everything else is zero.
 */
int ndc_pod_convert(struct json_object *obj, struct ndc_pod_info *ret, char *err, size_t errlen);

/*
 * Whether s is a valid node name (a DNS-1123 subdomain: lowercase letters, digits, '-' and '.',
 * 1..253 bytes, alphanumeric at both ends): 0, or -EINVAL with the reason in err. For the
 * wiring's check of env NODE_NAME before it starts anything.
 */
int ndc_pods_node_name_check(const char *s, char *err, size_t errlen);

enum ndc_pod_owner {
	NDC_POD_UNKNOWN = 0, /* no pod of this node has the address */
	NDC_POD_POD,	     /* a pod: ns and name */
	NDC_POD_NODE,	     /* the node's own address (hostNetwork pods): ns "", name the node */
};

struct ndc_pod_ident {
	enum ndc_pod_owner owner;
	char ns[NDC_POD_NS_MAX + 1];
	char name[NDC_POD_NAME_MAX + 1];
};

struct ndc_pods;

/* An empty map for the pods of node (ndc_pods_node_name_check). 0, -EINVAL or -ENOMEM. */
int ndc_pods_new(const char *node, struct ndc_pods **ret);

/* Frees the map; no reader may use it any more. NULL is fine. */
void ndc_pods_free(struct ndc_pods *p);

/*
 * Who owns addr: 0 and *ret filled, or -ENOENT (*ret zeroed, owner NDC_POD_UNKNOWN). An IPv4
 * address given as IPv4-mapped IPv6 (::ffff:a.b.c.d, a dual-stack socket's view) is looked up
 * as IPv4. Any thread, lock-free and allocation-free: a binary search in an RCU section, which
 * nests inside a section the caller already holds (the query path's record lookup).
 */
int ndc_pods_lookup(struct ndc_pods *p, const struct ndc_ip *addr, struct ndc_pod_ident *ret);

/*
 * Writer side (what the watch callbacks do, public for the tests and a snapshot source). put:
 * adds or replaces the pod ns/name; a pod of another node removes it instead (it left the
 * selector). del: removes ns/name (-ENOENT when absent). 0, -ENOSPC past NDC_PODS_MAX (counted,
 * the map unchanged), -ENOMEM. Each publishes a new table before it returns.
 */
int ndc_pods_put(struct ndc_pods *p, const struct ndc_pod_info *pod);
int ndc_pods_del(struct ndc_pods *p, const char *ns, const char *name);

/*
 * The watch's consumer, arg a struct ndc_pods *: a (re)list builds the new set aside and swaps
 * it in at list_end (addresses seen in both stay mapped throughout); ADDED and MODIFIED put,
 * DELETED deletes. Objects of other kinds are ignored; a Pod that ndc_pod_convert rejects is
 * counted, logged, and deleted by its namespace/name when those are readable (a stale mapping
 * would name the wrong pod).
 */
extern const struct ndc_k8s_watch_ops ndc_pods_watch_ops;

/*
 * Starts a watch of NDC_K8S_NODE_PODS for p's node over conn (ndc_k8s_watch_start with p as the
 * consumer; zero opts fields take the client's defaults). Stop it with ndc_k8s_watch_stop
 * before ndc_pods_free.
 */
int ndc_pods_watch_start(struct ndc_pods *p, const struct ndc_k8s_conn *conn,
			 const struct ndc_k8s_watch_opts *opts, struct ndc_k8s_watch **ret);

/*
 * pods: kept now (hostNetwork ones included); addrs: addresses in the published table; node_addrs:
 * those reported as the node; synced: a complete list has arrived; tables: tables published;
 * rejected: Pod objects ndc_pod_convert refused; full: pods refused past NDC_PODS_MAX;
 * conflicts: addresses claimed by more than one pod in the last table.
 */
struct ndc_pods_stats {
	uint64_t pods, addrs, node_addrs, tables, rejected, full, conflicts;
	bool synced;
};
void ndc_pods_stats(struct ndc_pods *p, struct ndc_pods_stats *ret);

#endif
