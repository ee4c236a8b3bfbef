// SPDX-License-Identifier: MIT
/*
 * What both answer tables write, built one way: the config from the options (the kernel's and
 * the DPDK backend's had drifted apart when each kept its own), and the entry a publish writes.
 * In the base (dataplane/base/), like value.c: the kernel table and the DPDK backend use both.
 */
#include <errno.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>

#include <ndc/entry.h>
#include <ndc/ip.h>
#include <ndc/log.h>

#define DEFAULT_PORT 53

/* The node-local addresses, at most NDC_FP_MAX_ADDRS of each family. */
static int put_addrs(const struct ndc_fp_config_opts *o, struct ndc_fp_config *c)
{
	for (size_t i = 0; i < o->n_addrs; i++) {
		const struct ndc_ip *ip = &o->addrs[i];

		if (ip->family != AF_INET && ip->family != AF_INET6) {
			ndc_err("answer table: address of family %u", ip->family);
			return -EINVAL;
		}
		if ((ip->family == AF_INET ? c->n_addr4 : c->n_addr6) == NDC_FP_MAX_ADDRS) {
			ndc_err("answer table: more than %d node-local addresses of one family",
				NDC_FP_MAX_ADDRS);
			return -E2BIG;
		}
		if (ip->family == AF_INET)
			memcpy(&c->addr4[c->n_addr4++], ip->addr, 4);
		else
			memcpy(c->addr6[c->n_addr6++], ip->addr, 16);
	}
	return 0;
}

/* Fail open to the first upstream of each family. */
static void put_upstreams(const struct ndc_fp_config_opts *o, struct ndc_fp_config *c)
{
	for (size_t i = 0; o->failopen && i < o->n_upstreams; i++) {
		const struct sockaddr_storage *ss = &o->upstreams[i];

		if (ss->ss_family == AF_INET && !c->has_up4) {
			const struct sockaddr_in *s4 = (const void *)ss;

			c->up4 = s4->sin_addr.s_addr;
			c->up4_port = s4->sin_port;
			c->has_up4 = 1;
		} else if (ss->ss_family == AF_INET6 && !c->has_up6) {
			const struct sockaddr_in6 *s6 = (const void *)ss;

			memcpy(c->up6, &s6->sin6_addr, 16);
			c->up6_port = s6->sin6_port;
			c->has_up6 = 1;
		}
	}
	if (c->has_up4 || c->has_up6)
		c->flags |= NDC_FP_C_FAILOPEN;
}

/*
 * The suffixes slots may leave out of a name (abi.h, NDC_FP_V_SFX): services' ("svc." and the
 * zone), the zone's other names, and IPv4 reverse names.
 */
static void put_suffixes(struct ndc_fp_config *c)
{
	static const uint8_t svc[] = "\3svc", rev4[] = "\7in-addr\4arpa";
	struct ndc_fp_sfx *x = &c->sfx;
	int i = 0;

	if (c->zone_len && sizeof(svc) - 1 + c->zone_len <= NDC_FP_NAME_MAX) {
		memcpy(x->name[i], svc, sizeof(svc) - 1);
		memcpy(x->name[i] + sizeof(svc) - 1, c->zone, c->zone_len);
		x->len[i++] = (uint8_t)(sizeof(svc) - 1 + c->zone_len);
	}
	if (c->zone_len) {
		memcpy(x->name[i], c->zone, c->zone_len);
		x->len[i++] = c->zone_len;
	}
	memcpy(x->name[i], rev4, sizeof(rev4)); /* with the root label */
	x->len[i] = sizeof(rev4);
}

int ndc_fastpath_config(const struct ndc_fp_config_opts *o, struct ndc_fp_config *ret)
{
	int r;

	memset(ret, 0, sizeof(*ret));
	ret->abi_version = NDC_ABI_VERSION;
	ret->flags = o->redirect_peer ? NDC_FP_C_REDIRECT_PEER : 0;
	r = put_addrs(o, ret);
	if (r < 0)
		return r;
	ret->port = htons(o->port ? o->port : DEFAULT_PORT);
	put_upstreams(o, ret);
	if (o->zone_len > NDC_FP_NAME_MAX || o->pass_len > NDC_FP_NAME_MAX) {
		ndc_err("answer table: zone or pass-through suffix longer than %d bytes",
			NDC_FP_NAME_MAX);
		return -ENAMETOOLONG;
	}
	if ((o->zone_len && !o->zone) || (o->pass_len && !o->pass)) {
		ndc_err("answer table: a zone or pass-through suffix length without its name");
		return -EINVAL;
	}
	if (o->zone_len)
		memcpy(ret->zone, o->zone, o->zone_len);
	ret->zone_len = (uint8_t)o->zone_len;
	if (o->pass_len)
		memcpy(ret->pass, o->pass, o->pass_len);
	ret->pass_len = (uint8_t)o->pass_len;
	put_suffixes(ret);
	return 0;
}

static uint64_t monotonic_ns(void)
{
	struct timespec ts;

	/* bpf_ktime_get_ns() is CLOCK_MONOTONIC: expiry compares against it in the kernel. */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int ndc_fastpath_entry(const uint8_t *lname, size_t nlen, uint16_t qtype,
		       const struct ndc_answer *a, uint32_t ttl_s, struct ndc_fp_key *ret_key,
		       struct ndc_fp_value *ret_val)
{
	int r;

	r = ndc_fastpath_key(lname, nlen, a ? qtype : NDC_FP_QTYPE_OTHER, ret_key);
	if (r < 0)
		return r;
	if (!a) {
		memset(ret_val, 0, sizeof(*ret_val));
		ret_val->flags = NDC_FP_V_PASS;
	} else if (a->qname_len != nlen) {
		return -EINVAL;
	} else {
		r = ndc_fastpath_value(a, ttl_s, ttl_s ? monotonic_ns() : 0, ret_val);
		if (r < 0)
			return r;
	}
	ret_val->name_len = (uint8_t)nlen;
	memcpy(ret_val->name, lname, nlen);
	return 0;
}
