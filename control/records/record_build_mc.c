/* SPDX-License-Identifier: MIT */
/*
 * Multicluster records: the names of the Multi-Cluster Services API (KEP-1645) in each zone of
 * records.multicluster_zones, from ServiceImports and the EndpointSlices labelled for them
 * (multicluster.kubernetes.io/service-name, .../source-cluster), as the MCS DNS specification
 * gives them and CoreDNS's kubernetes plugin answers them with its `multicluster` option:
 *
 *   <svc>.<ns>.svc.<zone>                 A/AAAA: a ClusterSetIP import's spec.ips; a headless
 *                                         import's ready endpoint addresses, every cluster's
 *   <host>.<clusterid>.<svc>.<ns>.svc.<zone>   A/AAAA of a headless import's endpoint
 *   _<port>._<proto>.<svc>.<ns>.svc.<zone>     SRV per named port (and, at <svc>, every port)
 *
 * A ClusterSetIP import without ports makes no name (CoreDNS: no record at all, NXDOMAIN); a
 * headless import without ready endpoints neither. SRV weights are CoreDNS's: 100 divided by
 * the records the query matched, duplicates included (NDC_REC_W_RAW). Endpoint names exist for
 * headless imports only (the MCS DNS specification; the cluster zone does the same for
 * Services). No PTR records: CoreDNS's reverse zones read Services and their endpoints only.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* The ports of the slices and import records take: SRV owners and the addresses' names. */
struct mc_unit {
	const struct ndc_k8s_service *imp;
	const uint8_t *svn; /* <svc>.<ns>.svc.<zone> */
	size_t svl;
};

static bool slice_of(const struct ndc_k8s_slice *sl, const struct ndc_k8s_service *imp)
{
	return sl->mc_service && sl->ns && sl->family && !strcmp(sl->mc_service, imp->name) &&
	       !strcmp(sl->ns, imp->ns);
}

/* Ready endpoints of the import's slices: ignore_empty_service counts them (CoreDNS). */
static size_t count_ready(const struct ndc_k8s_objects *o, const size_t *idx, size_t n,
			  const struct ndc_k8s_service *imp)
{
	size_t c = 0;

	for (size_t i = 0; i < n; i++) {
		const struct ndc_k8s_slice *sl = &o->slices[idx[i]];

		for (size_t e = 0; slice_of(sl, imp) && e < sl->n_endpoints; e++)
			if (sl->endpoints[e].ready)
				c += sl->endpoints[e].n_addrs;
	}
	return c;
}

/* One ready endpoint of a headless import, from the cluster its slice names. */
static void add_endpoint(struct ndc_rec_bld *b, const struct mc_unit *u,
			 const struct ndc_k8s_slice *sl, const struct ndc_k8s_endpoint *ep)
{
	const char *host = ndc_rec_ep_host(b, sl->ns, ep);
	uint8_t cn[NDC_NAME_MAX], hn[NDC_NAME_MAX];
	size_t cl, hl;

	if (ep->hostname && !host)
		return; /* a hostname that is no label: skipped */
	if (!sl->cluster || ndc_rec_join(cn, &cl, sl->cluster, u->svn, u->svl)) {
		ndc_rec_skip(b, "EndpointSlice source-cluster", sl->ns, sl->name);
		return;
	}
	for (size_t i = 0; i < ep->n_addrs; i++) {
		const struct ndc_ip *ip = &ep->addrs[i];
		char dash[INET6_ADDRSTRLEN];

		if (ndc_rec_ep_name(b, sl->ns, host, ip, cn, cl, dash, hn, &hl) < 0)
			continue;
		ndc_rec_add_rr(b, u->svn, u->svl, ndc_rec_addr_type(ip), ip->addr,
			       ndc_rec_addr_len(ip), NDC_REC_W_FIXED);
		ndc_rec_add_rr(b, hn, hl, ndc_rec_addr_type(ip), ip->addr, ndc_rec_addr_len(ip),
			       NDC_REC_W_FIXED);
		for (size_t p = 0; p < sl->n_ports; p++)
			ndc_rec_add_srv(b, u->svn, u->svl, &sl->ports[p], hn, hl, NDC_REC_W_RAW);
	}
}

static void add_import(struct ndc_rec_bld *b, const struct ndc_k8s_objects *o, const size_t *idx,
		       size_t n, const struct mc_unit *u)
{
	const struct ndc_k8s_service *imp = u->imp;

	if (!imp->headless) {
		if (b->opts->ignore_empty_service && !count_ready(o, idx, n, imp))
			return;
		if (!imp->n_ports)
			return; /* CoreDNS finds no record of a ClusterSetIP without ports */
		ndc_rec_node_get(b, u->svn, u->svl);
		for (size_t i = 0; i < imp->n_ips && i < NDC_K8S_MAX_CLUSTER_IPS; i++) {
			const struct ndc_ip *ip = &imp->ips[i];

			if (!ndc_rec_ip_ok(ip))
				continue;
			ndc_rec_add_rr(b, u->svn, u->svl, ndc_rec_addr_type(ip), ip->addr,
				       ndc_rec_addr_len(ip), NDC_REC_W_FIXED);
			/* one SRV per address and port: they weigh 100 / (addresses * ports) */
			for (size_t p = 0; p < imp->n_ports; p++)
				ndc_rec_add_srv(b, u->svn, u->svl, &imp->ports[p], u->svn, u->svl,
						NDC_REC_W_RAW);
		}
		return;
	}
	for (size_t i = 0; i < n; i++) {
		const struct ndc_k8s_slice *sl = &o->slices[idx[i]];

		/* MCS endpoints carry no publishNotReadyAddresses: ready ones only (CoreDNS). */
		for (size_t e = 0; slice_of(sl, imp) && e < sl->n_endpoints; e++)
			if (sl->endpoints[e].ready)
				add_endpoint(b, u, sl, &sl->endpoints[e]);
	}
}

/* The multicluster zones of b, the cluster domain first when it is one. */
static size_t mc_zones(const struct ndc_rec_bld *b, const uint8_t **zones, size_t *lens)
{
	size_t n = 0;

	if (b->mc_cluster) {
		zones[n] = b->svcz;
		lens[n++] = b->svczlen;
	}
	for (size_t i = 0; i < b->n_mcz; i++) {
		zones[n] = b->mcz[i].svcz;
		lens[n++] = b->mcz[i].svczlen;
	}
	return n;
}

static int cmp_slice(const void *x, const void *y, void *arg)
{
	const struct ndc_k8s_objects *o = arg;
	const struct ndc_k8s_slice *a = &o->slices[*(const size_t *)x];
	const struct ndc_k8s_slice *c = &o->slices[*(const size_t *)y];
	int r = strcmp(a->ns, c->ns);

	return r ? r : strcmp(a->mc_service, c->mc_service);
}

/* First of the sorted slices idx[0..n) labelled ns/name (n when none). */
static size_t first_slice(const struct ndc_k8s_objects *o, const size_t *idx, size_t n,
			  const char *ns, const char *name)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct ndc_k8s_slice *sl = &o->slices[idx[mid]];
		int r = strcmp(sl->ns, ns);

		r = r ? r : strcmp(sl->mc_service, name);
		*(r < 0 ? &lo : &hi) = mid + (r < 0);
	}
	return lo;
}

int ndc_rec_add_imports(struct ndc_rec_bld *b, const struct ndc_k8s_objects *o)
{
	const uint8_t *zones[1 + NDC_RECORDS_MAX_MC_ZONES];
	size_t lens[1 + NDC_RECORDS_MAX_MC_ZONES], nz = mc_zones(b, zones, lens), n = 0;
	size_t *idx;

	if (!nz || !o->n_imports)
		return 0;
	/* The labelled slices, sorted by (namespace, import): each import's are one run. */
	idx = malloc((o->n_slices + 1) * sizeof(*idx));
	if (!idx)
		return -ENOMEM;
	for (size_t i = 0; i < o->n_slices; i++)
		if (o->slices[i].mc_service && o->slices[i].ns && o->slices[i].family)
			idx[n++] = i;
	qsort_r(idx, n, sizeof(*idx), cmp_slice, (void *)o);
	for (size_t i = 0; i < o->n_imports; i++) {
		const struct ndc_k8s_service *imp = &o->imports[i];
		uint8_t nsn[NDC_NAME_MAX], svn[NDC_NAME_MAX];
		size_t nsl, svl, first, run = 0;

		if (!imp->ns || !imp->name || !ndc_rec_ns_allowed(b->opts, imp->ns))
			continue;
		/* An import makes its namespace exist, as a Service does (the store counts both).
		 */
		if (ndc_rec_add_namespace(b, imp->ns)) {
			ndc_rec_skip(b, "ServiceImport", imp->ns, imp->name);
			continue;
		}
		first = first_slice(o, idx, n, imp->ns, imp->name);
		while (first + run < n && slice_of(&o->slices[idx[first + run]], imp))
			run++;
		for (size_t z = 0; z < nz; z++) {
			struct mc_unit u = {.imp = imp, .svn = svn};

			if (ndc_rec_join(nsn, &nsl, imp->ns, zones[z], lens[z]) ||
			    ndc_rec_join(svn, &svl, imp->name, nsn, nsl)) {
				ndc_rec_skip(b, "ServiceImport", imp->ns, imp->name);
				break;
			}
			u.svl = svl;
			add_import(b, o, idx + first, run, &u);
		}
	}
	free(idx);
	return 0;
}
