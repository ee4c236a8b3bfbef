// SPDX-License-Identifier: MIT
/* Checks across keys, once every key is read: each names the key and line at fault. */
#include "internal.h"

#include <string.h>

/* Whether name is zone or under it (both lowercase, no trailing dot). */
static bool in_zone(const char *name, const char *zone)
{
	size_t n = strlen(name), z = strlen(zone);

	return n >= z && !strcmp(name + n - z, zone) && (n == z || name[n - z - 1] == '.');
}

/*
 * Checks across keys, once all are read: a stub domain inside the cluster domain would never be
 * asked (ndcache answers the zone itself) and NodeLocal DNSCache refuses it too.
 */
static int check_stubs(struct ctx *c, const struct ndc_config *cfg)
{
	for (size_t i = 0; i < cfg->n_stub_domains; i++) {
		const struct ndc_stub_domain *sd = &cfg->stub_domains[i];
		char q[QUOTE_BUF];
		size_t mark;
		int r;

		if (!in_zone(sd->zone, cfg->cluster_domain))
			continue;
		mark = ndc_config_path_push(c, "stub_domains.%s",
					    ndc_config_sanitize(q, sd->zone, strlen(sd->zone)));
		r = ndc_config_fail(c, sd->line,
				    "inside cluster_domain %s, which ndcache answers itself",
				    cfg->cluster_domain);
		ndc_config_path_pop(c, mark);
		return r;
	}
	return 0;
}

/*
 * records.multicluster_zones against the other keys. A zone strictly inside the cluster domain
 * would have its missing names answered NXDOMAIN with the cluster domain's SOA by the kernel,
 * which synthesises negative answers for the whole cluster domain; the cluster domain itself, or
 * any zone outside it, is fine. A stub domain at or inside a zone ndcache answers is never asked.
 */
static int check_mc_zones(struct ctx *c, const struct ndc_config *cfg)
{
	const unsigned int line = cfg->records.multicluster_zones_line;
	int r = 0;

	for (size_t i = 0; i < cfg->records.n_multicluster_zones && r == 0; i++) {
		const char *z = cfg->records.multicluster_zones[i];
		size_t mark = ndc_config_path_push(c, "records.multicluster_zones[%zu]", i);

		if (strcmp(z, cfg->cluster_domain) && in_zone(z, cfg->cluster_domain))
			r = ndc_config_fail(
			    c, line,
			    "%s is inside cluster_domain %s: use the cluster domain itself or "
			    "a zone outside it",
			    z, cfg->cluster_domain);
		for (size_t k = 0; k < cfg->n_stub_domains && r == 0; k++)
			if (in_zone(cfg->stub_domains[k].zone, z))
				r = ndc_config_fail(
				    c, cfg->stub_domains[k].line,
				    "stub domain %s is inside multicluster zone %s, which "
				    "ndcache answers itself",
				    cfg->stub_domains[k].zone, z);
		ndc_config_path_pop(c, mark);
	}
	return r;
}

int ndc_config_validate(struct ctx *c, const struct ndc_config *cfg)
{
	int r = check_stubs(c, cfg);

	return r < 0 ? r : check_mc_zones(c, cfg);
}
