// SPDX-License-Identifier: MIT
/*
 * The map of this node's pods (pods.h): the writer keeps the pods as a plain array and rebuilds
 * an immutable address table at each change; readers binary-search the published table inside
 * an RCU section. The node has tens of pods, so the rebuild is a few microseconds and the
 * readers never take a lock.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <json-c/json.h>

#include <ndc/log.h>

#include "pods.h"
#include "rcu.h"

struct slot {
	struct ndc_pod_info pod;
	uint64_t seq; /* when it last changed: the later of two claims to an address wins */
};

struct set {
	struct slot *s;
	size_t n, cap;
};

struct entry {
	struct ndc_ip addr;
	uint8_t owner; /* enum ndc_pod_owner */
	uint16_t pod;  /* index into the table's names (NDC_POD_POD) */
};
_Static_assert(NDC_PODS_MAX <= UINT16_MAX, "entry.pod indexes the pods");

struct pod_name {
	char ns[NDC_POD_NS_MAX + 1];
	char name[NDC_POD_NAME_MAX + 1];
};

/* What readers see: never changed once published. */
struct table {
	size_t n;
	struct entry *e; /* sorted by addr (memcmp order), one per address */
	struct pod_name *names;
};

struct ndc_pods {
	char node[NDC_POD_NAME_MAX + 1];
	_Atomic(struct table *) cur;

	pthread_mutex_t lock; /* the writer side below */
	struct set pods;
	struct set pending; /* a relist being received */
	bool listing;
	uint64_t seq;
	struct ndc_pods_stats st;
};

/* ---- the published table ------------------------------------------------------------------ */

struct cand {
	struct ndc_ip addr;
	uint8_t owner;
	bool deleting;
	uint64_t seq;
	uint16_t pod;
};

/* By address, then the claim that wins first: a pod over the node, not deleting, changed last. */
static int cand_cmp(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;
	int c = memcmp(&x->addr, &y->addr, sizeof(x->addr));

	if (c)
		return c;
	if (x->owner != y->owner)
		return x->owner == NDC_POD_POD ? -1 : 1;
	if (x->deleting != y->deleting)
		return x->deleting ? 1 : -1;
	return x->seq > y->seq ? -1 : x->seq < y->seq;
}

/* A new table from p->pods, swapped in; the old one freed once no reader can hold it. */
static int publish(struct ndc_pods *p)
{
	size_t n = 0, ne = 0, conflicts = 0, node_addrs = 0;
	struct cand *c = NULL;
	struct table *t, *old;

	c = calloc(p->pods.n * NDC_POD_MAX_IPS * 2 + 1, sizeof(*c));
	t = calloc(1, sizeof(*t));
	if (!c || !t)
		goto oom;
	for (size_t i = 0; i < p->pods.n; i++) {
		const struct slot *s = &p->pods.s[i];

		/* The node's addresses, whatever the pod's state. */
		for (int k = 0; k < s->pod.n_host_ips; k++)
			c[n++] = (struct cand){.addr = s->pod.host_ips[k],
					       .owner = NDC_POD_NODE,
					       .seq = s->seq,
					       .pod = (uint16_t)i};
		if (s->pod.ended)
			continue;
		for (int k = 0; k < s->pod.n_ips; k++)
			c[n++] = (struct cand){
			    .addr = s->pod.ips[k],
			    .owner = s->pod.host_network ? NDC_POD_NODE : NDC_POD_POD,
			    .deleting = s->pod.deleting,
			    .seq = s->seq,
			    .pod = (uint16_t)i,
			};
	}
	qsort(c, n, sizeof(*c), cand_cmp);
	t->e = calloc(n + 1, sizeof(*t->e));
	t->names = calloc(p->pods.n + 1, sizeof(*t->names));
	if (!t->e || !t->names)
		goto oom;
	for (size_t i = 0; i < n; i++) {
		if (ne && !memcmp(&t->e[ne - 1].addr, &c[i].addr, sizeof(c[i].addr))) {
			/* hostNetwork pods all share the node's addresses: that is no conflict. */
			if (c[i].owner == NDC_POD_POD)
				conflicts++;
			continue;
		}
		t->e[ne++] =
		    (struct entry){.addr = c[i].addr, .owner = c[i].owner, .pod = c[i].pod};
		node_addrs += c[i].owner == NDC_POD_NODE;
	}
	t->n = ne;
	for (size_t i = 0; i < p->pods.n; i++) {
		memcpy(t->names[i].ns, p->pods.s[i].pod.ns, sizeof(t->names[i].ns));
		memcpy(t->names[i].name, p->pods.s[i].pod.name, sizeof(t->names[i].name));
	}
	free(c);

	old = atomic_exchange_explicit(&p->cur, t, memory_order_acq_rel);
	if (old) {
		ndc_rcu_synchronize();
		free(old->e);
		free(old->names);
		free(old);
	}
	p->st.pods = p->pods.n;
	p->st.addrs = ne;
	p->st.node_addrs = node_addrs;
	p->st.conflicts = conflicts;
	p->st.tables++;
	return 0;
oom:
	free(c);
	if (t) {
		free(t->e);
		free(t->names);
	}
	free(t);
	return -ENOMEM;
}

/* The key as the table holds it: bytes past an IPv4 address zero, ::ffff:a.b.c.d as IPv4. */
static bool lookup_key(const struct ndc_ip *a, struct ndc_ip *k)
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

	memset(k, 0, sizeof(*k));
	if (a->family == AF_INET) {
		k->family = AF_INET;
		memcpy(k->addr, a->addr, 4);
	} else if (a->family == AF_INET6 && !memcmp(a->addr, mapped, sizeof(mapped))) {
		k->family = AF_INET;
		memcpy(k->addr, a->addr + 12, 4);
	} else if (a->family == AF_INET6) {
		*k = *a;
	} else {
		return false;
	}
	return true;
}

int ndc_pods_lookup(struct ndc_pods *p, const struct ndc_ip *addr, struct ndc_pod_ident *ret)
{
	const struct table *t;
	const struct entry *e = NULL;
	struct ndc_ip key;
	bool nested;
	size_t lo = 0, hi;

	ret->owner = NDC_POD_UNKNOWN;
	ret->ns[0] = ret->name[0] = '\0';
	if (!p || !addr || !lookup_key(addr, &key))
		return -ENOENT;
	/*
	 * ndc_rcu_read_unlock ends the thread's section whatever nested in it: inside the
	 * caller's own section (which protects this table too) take none.
	 */
	nested = ndc_rcu_self > 0 &&
		 atomic_load_explicit(&ndc_rcu_slots[ndc_rcu_self - 1].epoch, memory_order_relaxed);
	if (!nested)
		ndc_rcu_read_lock();
	t = atomic_load_explicit(&p->cur, memory_order_acquire);
	hi = t ? t->n : 0;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = memcmp(&key, &t->e[mid].addr, sizeof(key));

		if (!c) {
			e = &t->e[mid];
			break;
		}
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	if (e) {
		ret->owner = (enum ndc_pod_owner)e->owner;
		if (e->owner == NDC_POD_POD) {
			memcpy(ret->ns, t->names[e->pod].ns, sizeof(ret->ns));
			memcpy(ret->name, t->names[e->pod].name, sizeof(ret->name));
		} else {
			memcpy(ret->name, p->node, sizeof(ret->name));
		}
	}
	if (!nested)
		ndc_rcu_read_unlock();
	return e ? 0 : -ENOENT;
}

/* ---- the writer side ---------------------------------------------------------------------- */

static struct slot *find(struct set *s, const char *ns, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (!strcmp(s->s[i].pod.ns, ns) && !strcmp(s->s[i].pod.name, name))
			return &s->s[i];
	return NULL;
}

static bool remove_from(struct set *s, const char *ns, const char *name)
{
	struct slot *x = find(s, ns, name);

	if (!x)
		return false;
	*x = s->s[--s->n]; /* order does not matter: the table sorts */
	return true;
}

/* Adds or replaces pod in s: 0, -ENOSPC (counted), -ENOMEM. */
static int set_put(struct ndc_pods *p, struct set *s, const struct ndc_pod_info *pod)
{
	struct slot *x = find(s, pod->ns, pod->name);

	if (!x) {
		if (s->n == NDC_PODS_MAX) {
			if (!p->st.full++)
				ndc_warn(
				    "pods: more than %d pods on node %s: the rest are not named",
				    NDC_PODS_MAX, p->node);
			return -ENOSPC;
		}
		if (s->n == s->cap) {
			size_t cap = s->cap ? s->cap * 2 : 64;
			struct slot *ns = realloc(s->s, cap * sizeof(*ns));

			if (!ns)
				return -ENOMEM;
			s->s = ns;
			s->cap = cap;
		}
		x = &s->s[s->n++];
	}
	x->pod = *pod;
	x->seq = ++p->seq;
	return 0;
}

/* A pod bound elsewhere has left our field selector (or was never ours). */
static bool ours(const struct ndc_pods *p, const struct ndc_pod_info *pod)
{
	return !strcmp(pod->node, p->node);
}

int ndc_pods_put(struct ndc_pods *p, const struct ndc_pod_info *pod)
{
	int r;

	pthread_mutex_lock(&p->lock);
	if (!ours(p, pod)) {
		r = remove_from(&p->pods, pod->ns, pod->name) ? publish(p) : 0;
	} else {
		r = set_put(p, &p->pods, pod);
		r = r ?: publish(p);
	}
	pthread_mutex_unlock(&p->lock);
	return r;
}

int ndc_pods_del(struct ndc_pods *p, const char *ns, const char *name)
{
	int r = -ENOENT;

	pthread_mutex_lock(&p->lock);
	if (remove_from(&p->pods, ns, name))
		r = publish(p);
	pthread_mutex_unlock(&p->lock);
	return r;
}

int ndc_pods_new(const char *node, struct ndc_pods **ret)
{
	struct ndc_pods *p;
	int r;

	*ret = NULL;
	r = ndc_pods_node_name_check(node, NULL, 0);
	if (r < 0)
		return r;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	memcpy(p->node, node, strlen(node) + 1);
	pthread_mutex_init(&p->lock, NULL);
	pthread_mutex_lock(&p->lock);
	r = publish(p); /* an empty table: readers always find one */
	pthread_mutex_unlock(&p->lock);
	if (r < 0) {
		ndc_pods_free(p);
		return r;
	}
	*ret = p;
	return 0;
}

void ndc_pods_free(struct ndc_pods *p)
{
	struct table *t;

	if (!p)
		return;
	t = atomic_load_explicit(&p->cur, memory_order_relaxed);
	if (t) {
		free(t->e);
		free(t->names);
		free(t);
	}
	free(p->pods.s);
	free(p->pending.s);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

void ndc_pods_stats(struct ndc_pods *p, struct ndc_pods_stats *ret)
{
	pthread_mutex_lock(&p->lock);
	*ret = p->st;
	pthread_mutex_unlock(&p->lock);
}

/* ---- the watch's consumer ----------------------------------------------------------------- */

static void list_begin(void *arg, enum ndc_k8s_kind kind)
{
	struct ndc_pods *p = arg;

	if (kind != NDC_K8S_NODE_PODS)
		return;
	pthread_mutex_lock(&p->lock);
	p->pending.n = 0;
	p->listing = true;
	pthread_mutex_unlock(&p->lock);
}

/* The pod of obj, or false when rejected (counted and logged; *pod keeps readable names). */
static bool convert(struct ndc_pods *p, json_object *obj, struct ndc_pod_info *pod)
{
	char err[192];

	if (ndc_pod_convert(obj, pod, err, sizeof(err)) == 0)
		return true;
	pthread_mutex_lock(&p->lock);
	p->st.rejected++;
	pthread_mutex_unlock(&p->lock);
	ndc_warn("pods: Pod %s/%s rejected: %s", pod->ns[0] ? pod->ns : "?",
		 pod->name[0] ? pod->name : "?", err);
	return false;
}

static void list_item(void *arg, enum ndc_k8s_kind kind, json_object *obj)
{
	struct ndc_pods *p = arg;
	struct ndc_pod_info pod;

	if (kind != NDC_K8S_NODE_PODS || !convert(p, obj, &pod))
		return;
	pthread_mutex_lock(&p->lock);
	if (p->listing && ours(p, &pod))
		set_put(p, &p->pending, &pod);
	pthread_mutex_unlock(&p->lock);
}

static void list_end(void *arg, enum ndc_k8s_kind kind)
{
	struct ndc_pods *p = arg;
	struct set old;

	if (kind != NDC_K8S_NODE_PODS)
		return;
	pthread_mutex_lock(&p->lock);
	if (p->listing) {
		old = p->pods;
		p->pods = p->pending;
		p->pending = old;
		p->pending.n = 0;
		p->listing = false;
		if (publish(p) < 0) {
			/* The old set is still published: keep it as the writer's view too. */
			old = p->pods;
			p->pods = p->pending;
			p->pending = old;
			ndc_err("pods: out of memory publishing %zu pods", p->pods.n);
		} else {
			p->st.synced = true;
		}
	}
	pthread_mutex_unlock(&p->lock);
}

static void event(void *arg, enum ndc_k8s_kind kind, enum ndc_k8s_event ev, json_object *obj)
{
	struct ndc_pods *p = arg;
	struct ndc_pod_info pod;
	bool ok;

	if (kind != NDC_K8S_NODE_PODS)
		return;
	ok = convert(p, obj, &pod);
	if (ok && ev != NDC_K8S_DELETED) {
		ndc_pods_put(p, &pod);
		return;
	}
	/* Deleted, or rejected: what an earlier version of the pod mapped is no longer true. */
	if (pod.ns[0] && pod.name[0])
		ndc_pods_del(p, pod.ns, pod.name);
}

const struct ndc_k8s_watch_ops ndc_pods_watch_ops = {
    .list_begin = list_begin,
    .list_item = list_item,
    .list_end = list_end,
    .event = event,
};

int ndc_pods_watch_start(struct ndc_pods *p, const struct ndc_k8s_conn *conn,
			 const struct ndc_k8s_watch_opts *opts, struct ndc_k8s_watch **ret)
{
	struct ndc_k8s_watch_opts o = opts ? *opts : (struct ndc_k8s_watch_opts){0};

	o.kinds = 1u << NDC_K8S_NODE_PODS;
	o.node_name = p->node;
	return ndc_k8s_watch_start(conn, &o, &ndc_pods_watch_ops, p, ret);
}
