// SPDX-License-Identifier: MIT
/*
 * One YAML node into one member of struct ndc_config, a handler per kind of value: integers,
 * sizes, booleans, enums, addresses, names and lists of them. Each checks the whole value before
 * it replaces the member, so a value refused leaves the member as it was.
 */
#include "internal.h"
#include "dnstap/dnstap.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define EAL_ARG_MAX 1024  /* bytes of one dataplane.dpdk.eal_args item */
#define U16_LIST_MAX 1023 /* dataplane.dpdk.ports and lcores items */
#define TAP_PREFIX_MAX 12 /* dataplane.dpdk.tap_prefix: the port's index follows it */

/* Replaces a string member; a static default is dropped rather than freed. */
static int set_str(struct ctx *c, char **slot, const char *dflt, const char *value)
{
	char *s = value ? strdup(value) : NULL;

	if (value && !s)
		return ndc_config_oom(c);
	if (*slot != dflt)
		free(*slot);
	*slot = s;
	return 0;
}

/* Kubernetes namespace names are RFC 1123 labels. */
static bool is_rfc1123_label(const char *s, size_t len)
{
	if (!len || len > DNS_LABEL_MAX || s[0] == '-' || s[len - 1] == '-')
		return false;
	for (size_t i = 0; i < len; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return false;
	return true;
}

/* What the kernel's dev_valid_name() accepts (printable ASCII only), globs included. */
static bool is_ifname_glob(const char *s, size_t len)
{
	if (!len || len > IFNAME_MAX || !strcmp(s, ".") || !strcmp(s, ".."))
		return false;
	for (size_t i = 0; i < len; i++)
		if (s[i] <= ' ' || s[i] >= 0x7f || s[i] == '/' || s[i] == ':')
			return false;
	return true;
}

static void *field_ptr(struct ndc_config *cfg, const struct field *f)
{
	return (char *)cfg + f->off;
}

/* Stores by the width of the member: the integers are uint16_t or uint32_t. */
int ndc_config_set_int(struct ctx *c, const struct field *f, const struct node *n,
		       struct ndc_config *cfg)
{
	char what[64];
	uint64_t v;
	int r;

	snprintf(what, sizeof(what), "an integer %llu..%llu", (unsigned long long)f->min,
		 (unsigned long long)f->max);
	r = ndc_config_expect_scalar(c, n, what);
	if (r < 0)
		return r;
	if (!ndc_config_u64(n->text, n->len, &v) || v < f->min || v > f->max)
		return ndc_config_bad_value(c, n, what);
	if (f->size == sizeof(uint16_t))
		*(uint16_t *)field_ptr(cfg, f) = (uint16_t)v;
	else
		*(uint32_t *)field_ptr(cfg, f) = (uint32_t)v;
	return 0;
}

/* Bytes, or a 1024-based K/M/G suffix (Ki/Mi/Gi as Kubernetes writes them). */
int ndc_config_set_size(struct ctx *c, const struct field *f, const struct node *n,
			struct ndc_config *cfg)
{
	static const char what[] = "a size 64K..16G (bytes, or with a K, M or G suffix)";
	static const char *const suffixes[] = {"", "K", "M", "G", "Ki", "Mi", "Gi"};
	static const unsigned int shifts[] = {0, 10, 20, 30, 10, 20, 30};
	size_t digits = 0, i;
	uint64_t v, mult;
	int r = ndc_config_expect_scalar(c, n, what);

	if (r < 0)
		return r;
	while (digits < n->len && n->text[digits] >= '0' && n->text[digits] <= '9')
		digits++;
	for (i = 0; i < 7 && strcmp(n->text + digits, suffixes[i]); i++)
		;
	mult = i < 7 ? 1ULL << shifts[i] : 0;
	if (!mult || !ndc_config_u64(n->text, digits, &v) || v > UINT64_MAX / mult ||
	    v * mult < f->min || v * mult > f->max)
		return ndc_config_bad_value(c, n, what);
	*(uint64_t *)field_ptr(cfg, f) = v * mult;
	return 0;
}

/* true/false/yes/no in any case; on/off and y/n are not accepted (YAML 1.2 dropped them). */
int ndc_config_bool(struct ctx *c, const struct node *n, const char *what, bool *ret)
{
	int r = ndc_config_expect_scalar(c, n, what);

	if (r < 0)
		return r;
	if (!strcasecmp(n->text, "true") || !strcasecmp(n->text, "yes"))
		*ret = true;
	else if (!strcasecmp(n->text, "false") || !strcasecmp(n->text, "no"))
		*ret = false;
	else
		return ndc_config_bad_value(c, n, what);
	return 0;
}

int ndc_config_set_bool(struct ctx *c, const struct field *f, const struct node *n,
			struct ndc_config *cfg)
{
	return ndc_config_bool(c, n, "true, false, yes or no", field_ptr(cfg, f));
}

int ndc_config_set_enum(struct ctx *c, const struct field *f, const struct node *n,
			struct ndc_config *cfg)
{
	char what[96] = "one of ";
	int r;

	for (int i = 0; f->names[i]; i++) {
		strncat(what, i ? ", " : "", sizeof(what) - strlen(what) - 1);
		strncat(what, f->names[i], sizeof(what) - strlen(what) - 1);
	}
	r = ndc_config_expect_scalar(c, n, what);
	for (int i = 0; r == 0 && f->names[i]; i++) {
		if (!strcmp(n->text, f->names[i])) {
			*(int *)field_ptr(cfg, f) = i; /* the enums are int-sized, in table order */
			return 0;
		}
	}
	return r < 0 ? r : ndc_config_bad_value(c, n, what);
}

int ndc_config_set_domain(struct ctx *c, const struct field *f, const struct node *n,
			  struct ndc_config *cfg)
{
	static const char what[] = "a DNS domain name";
	char buf[DNS_NAME_MAX + 2], q[QUOTE_BUF + 2];
	const char *why = "longer than 253 characters";
	int r = ndc_config_expect_scalar(c, n, what);

	(void)f;
	if (r < 0)
		return r;
	if (n->len < sizeof(buf)) {
		memcpy(buf, n->text, n->len + 1);
		why = ndc_config_check_domain(buf);
	}
	if (why)
		return ndc_config_fail(c, n->line, "expected %s, got %s (%s)", what,
				       ndc_config_describe(n, q), why);
	return set_str(c, &cfg->cluster_domain, ndc_config_default_domain, buf);
}

/*
 * A list of servers (or one) into out: upstream and each stub domain's. *ret_count set only
 * when every item is good.
 */
static int parse_servers(struct ctx *c, const struct node *n, size_t min, size_t max,
			 struct sockaddr_storage out[NDC_CFG_MAX_ADDRS], size_t *ret_count)
{
	static const char what[] = "an address (ip, ip:port or [ipv6]:port) or a list of them";
	static const char item_what[] = "an address (ip, ip:port or [ipv6]:port)";
	const struct node *const *items;
	char q[QUOTE_BUF + 2];
	size_t count;
	int r = ndc_config_list_items(c, n, what, true, &items, &count);

	if (r < 0)
		return r;
	if (count < min || count > max)
		return ndc_config_fail(c, n->line, "expected %zu..%zu addresses, got %zu", min, max,
				       count);
	for (size_t i = 0; i < count; i++) {
		const struct node *it = items ? items[i] : n;
		size_t mark = items ? ndc_config_path_push(c, "[%zu]", i) : c->plen;
		int e = 0;

		r = ndc_config_expect_scalar(c, it, item_what);
		if (r == 0)
			e = ndc_config_parse_server(it->text, &out[i]);
		if (e == -ERANGE)
			r = ndc_config_fail(c, it->line, "expected a port 1..65535 in %s",
					    ndc_config_describe(it, q));
		else if (e < 0)
			r = ndc_config_bad_value(c, it, item_what);
		ndc_config_path_pop(c, mark);
		if (r < 0)
			return r;
	}
	*ret_count = count;
	return 0;
}

/* listen (IPs, 1..8) and upstream (ip[:port], 0..8), committed only when all items are good. */
int ndc_config_set_addrs(struct ctx *c, const struct field *f, const struct node *n,
			 struct ndc_config *cfg)
{
	static const char what[] = "an IP address or a list of them";
	static const char item_what[] = "an IPv4 or IPv6 address";
	struct sockaddr_storage ups[NDC_CFG_MAX_ADDRS];
	struct ndc_ip ips[NDC_CFG_MAX_ADDRS];
	const struct node *const *items;
	size_t count;
	int r;

	if (f->off == CFG_OFF(upstream)) {
		r = parse_servers(c, n, f->min, f->max, ups, &count);
		if (r == 0) {
			memcpy(cfg->upstream, ups, count * sizeof(ups[0]));
			cfg->n_upstream = count;
		}
		return r;
	}
	r = ndc_config_list_items(c, n, what, true, &items, &count);
	if (r < 0)
		return r;
	if (count < f->min || count > f->max)
		return ndc_config_fail(c, n->line, "expected %llu..%llu addresses, got %zu",
				       (unsigned long long)f->min, (unsigned long long)f->max,
				       count);
	for (size_t i = 0; i < count; i++) {
		const struct node *it = items ? items[i] : n;
		size_t mark = items ? ndc_config_path_push(c, "[%zu]", i) : c->plen;

		r = ndc_config_expect_scalar(c, it, item_what);
		if (r == 0 && !ndc_config_ip(it->text, &ips[i]))
			r = ndc_config_bad_value(c, it, item_what);
		ndc_config_path_pop(c, mark);
		if (r < 0)
			return r;
	}
	memcpy(cfg->listen, ips, count * sizeof(ips[0]));
	cfg->n_listen = count;
	return 0;
}

/*
 * stub_domains: {zone: [addr, ...]} (or one addr), replaced as a whole. Zones as cluster_domain
 * takes them, lowercased; the root is not a stub domain (that is upstream), and a zone given
 * twice (in any case, with or without the dot) is an error.
 */
int ndc_config_set_stub_domains(struct ctx *c, const struct field *f, const struct node *n,
				struct ndc_config *cfg)
{
	static const char what[] = "a mapping of zones to server addresses";
	struct ndc_stub_domain *v = NULL;
	size_t count = 0;
	int r = 0;

	(void)f;
	if (ndc_config_is_null(n))
		goto commit;
	if (n->kind != NODE_MAP)
		return ndc_config_bad_value(c, n, what);
	if (n->n / 2 > NDC_CFG_MAX_STUBS)
		return ndc_config_fail(c, n->line, "expected at most %d zones, got %zu",
				       NDC_CFG_MAX_STUBS, n->n / 2);
	if (n->n && !(v = calloc(n->n / 2, sizeof(*v))))
		return ndc_config_oom(c);
	for (size_t i = 0; i + 1 < n->n && r == 0; i += 2, count++) {
		const struct node *key = n->kids[i], *val = n->kids[i + 1];
		struct ndc_stub_domain *sd = &v[count];
		char q[QUOTE_BUF], kq[QUOTE_BUF + 2];
		const char *why = "longer than 253 characters";
		size_t mark;

		r = ndc_config_expect_scalar(c, key, "a zone name");
		if (r < 0)
			break;
		mark = ndc_config_path_push(c, ".%s", ndc_config_sanitize(q, key->text, key->len));
		if (!(sd->zone = strdup(key->text))) {
			r = ndc_config_oom(c);
		} else {
			if (key->len <= DNS_NAME_MAX + 1)
				why = ndc_config_check_domain(sd->zone);
			if (why && !strcmp(why, "empty name"))
				why = "the root is not a stub domain: that is upstream";
			if (why)
				r = ndc_config_fail(c, key->line,
						    "expected a DNS domain name, got %s (%s)",
						    ndc_config_describe(key, kq), why);
		}
		for (size_t j = 0; r == 0 && j < count; j++)
			if (!strcmp(v[j].zone, sd->zone))
				r = ndc_config_fail(
				    c, key->line, "zone given twice (first at line %u)", v[j].line);
		sd->line = key->line;
		if (r == 0)
			r = ndc_config_check_node(c, val);
		if (r == 0)
			r = parse_servers(c, val, 1, NDC_CFG_MAX_ADDRS, sd->servers,
					  &sd->n_servers);
		ndc_config_path_pop(c, mark);
	}
	if (r < 0) {
		ndc_config_stubs_free(v, n->n / 2);
		return r;
	}
commit:
	ndc_config_stubs_free(cfg->stub_domains, cfg->n_stub_domains);
	cfg->stub_domains = v;
	cfg->n_stub_domains = count;
	return 0;
}

/* log.sample: a decimal fraction 0.000001..1 ("1", "0.25", "1e-3" is not taken), in ppm. */
int ndc_config_set_sample(struct ctx *c, const struct field *f, const struct node *n,
			  struct ndc_config *cfg)
{
	static const char what[] = "a fraction 0.000001..1 (e.g. 0.01)";
	const char *dot;
	uint64_t whole = 0, frac = 0;
	size_t wlen, flen = 0;
	int r = ndc_config_expect_scalar(c, n, what);

	(void)f;
	if (r < 0)
		return r;
	dot = strchr(n->text, '.');
	wlen = dot ? (size_t)(dot - n->text) : n->len;
	if (dot) {
		flen = n->len - wlen - 1;
		if (flen > 6 || (flen && !ndc_config_u64_digits(dot + 1, flen, &frac)))
			return ndc_config_bad_value(c, n, what);
		for (size_t i = flen; i < 6; i++)
			frac *= 10;
	}
	if ((!wlen && !flen) || (wlen && !ndc_config_u64(n->text, wlen, &whole)) || whole > 1 ||
	    (whole == 1 && frac) || (!whole && !frac))
		return ndc_config_bad_value(c, n, what);
	cfg->log.sample_ppm = (uint32_t)(whole * NDC_CFG_SAMPLE_ONE + frac);
	return 0;
}

int ndc_config_set_http_listen(struct ctx *c, const struct field *f, const struct node *n,
			       struct ndc_config *cfg)
{
	static const char what[] = "host:port with an IPv4 or [IPv6] host";
	char q[QUOTE_BUF + 2];
	struct ndc_ip ip;
	uint16_t port;
	int r = ndc_config_expect_scalar(c, n, what);

	(void)f;
	if (r < 0)
		return r;
	/* A bare IPv6 literal cannot carry a port ("::1:9254" is an address): brackets needed. */
	if (n->text[0] != '[' && strchr(n->text, ':') != strrchr(n->text, ':'))
		r = -EINVAL;
	else
		r = ndc_config_hostport(n->text, true, &ip, &port);
	if (r == -ERANGE)
		return ndc_config_fail(c, n->line, "expected a port 1..65535 in %s",
				       ndc_config_describe(n, q));
	if (r < 0)
		return ndc_config_bad_value(c, n, what);
	return set_str(c, &cfg->http.listen, ndc_config_default_http, n->text);
}

/* An EAL argument: passed to rte_eal_init as it is, only its length is checked. */
static bool is_eal_arg(const char *s, size_t len)
{
	(void)s;
	return len && len <= EAL_ARG_MAX;
}

/*
 * A list of at most f->max strings, each checked by ok, into a new vector (*ret_v, NULL when
 * empty; *ret_count). Errors name the item.
 */
static int string_list(struct ctx *c, const struct field *f, const struct node *n, const char *what,
		       const char *item_what, bool (*ok)(const char *s, size_t len), char ***ret_v,
		       size_t *ret_count)
{
	const struct node *const *items;
	char **v = NULL;
	size_t count, i;
	int r = ndc_config_list_items(c, n, what, false, &items, &count);

	if (r < 0)
		return r;
	if (count > f->max)
		return ndc_config_fail(c, n->line, "expected at most %llu entries, got %zu",
				       (unsigned long long)f->max, count);
	if (count && !(v = calloc(count, sizeof(*v))))
		return ndc_config_oom(c);
	for (i = 0; i < count; i++) {
		const struct node *it = items[i];
		size_t mark = ndc_config_path_push(c, "[%zu]", i);

		r = ndc_config_expect_scalar(c, it, item_what);
		if (r == 0 && !ok(it->text, it->len))
			r = ndc_config_bad_value(c, it, item_what);
		ndc_config_path_pop(c, mark);
		if (r == 0 && !(v[i] = strdup(it->text)))
			r = ndc_config_oom(c);
		if (r < 0) {
			ndc_config_strv_free(v, i);
			return r;
		}
	}
	*ret_v = v;
	*ret_count = count;
	return 0;
}

/* records.namespaces and dataplane.interfaces: lists of names, replaced as a whole. */
int ndc_config_set_names(struct ctx *c, const struct field *f, const struct node *n,
			 struct ndc_config *cfg)
{
	bool ifaces = f->off == CFG_OFF(dataplane.interfaces);
	char ***slot = ifaces ? &cfg->dataplane.interfaces : &cfg->records.namespaces;
	size_t *n_slot = ifaces ? &cfg->dataplane.n_interfaces : &cfg->records.n_namespaces;
	char **v;
	size_t count;
	int r =
	    ifaces ? string_list(c, f, n, "a list of interface names or globs",
				 "an interface name or glob (1..15 characters, no '/', ':' or "
				 "spaces)",
				 is_ifname_glob, &v, &count)
		   : string_list(c, f, n, "a list of namespaces",
				 "a namespace name (RFC 1123 label)", is_rfc1123_label, &v, &count);

	if (r < 0)
		return r;
	if (*slot != ndc_config_default_ifaces)
		ndc_config_strv_free(*slot, *n_slot);
	*slot = v;
	*n_slot = count;
	return 0;
}

/* A zone name as cluster_domain takes it (the root is not one); only checks, on a copy. */
static bool is_zone_name(const char *s, size_t len)
{
	char buf[DNS_NAME_MAX + 2];

	if (len >= sizeof(buf))
		return false;
	memcpy(buf, s, len);
	buf[len] = '\0';
	return !ndc_config_check_domain(buf);
}

/*
 * records.multicluster_zones: a list of zones, each as cluster_domain takes it (lowercased, the
 * trailing dot dropped), replaced as a whole; a zone given twice is an error.
 */
int ndc_config_set_mc_zones(struct ctx *c, const struct field *f, const struct node *n,
			    struct ndc_config *cfg)
{
	char **v;
	size_t count;
	int r =
	    string_list(c, f, n, "a list of zones", "a DNS domain name", is_zone_name, &v, &count);

	if (r < 0)
		return r;
	for (size_t i = 0; i < count; i++) {
		ndc_config_check_domain(v[i]); /* checked above: only normalises */
		for (size_t j = 0; j < i && r == 0; j++)
			if (!strcmp(v[i], v[j]))
				r = ndc_config_fail(c, n->line, "zone %s given twice", v[i]);
	}
	if (r < 0) {
		ndc_config_strv_free(v, count);
		return r;
	}
	ndc_config_strv_free(cfg->records.multicluster_zones, cfg->records.n_multicluster_zones);
	cfg->records.multicluster_zones = v;
	cfg->records.n_multicluster_zones = count;
	cfg->records.multicluster_zones_line = n->line;
	return 0;
}

/*
 * source.snapshot, source.kubernetes.kubeconfig and dataplane.pin_dir; a null kubeconfig means
 * in-cluster, a null pin_dir the default.
 */
int ndc_config_set_path(struct ctx *c, const struct field *f, const struct node *n,
			struct ndc_config *cfg)
{
	static const char what[] = "a file path";
	bool snapshot = f->off == CFG_OFF(source.snapshot);
	int r;

	if (!snapshot && ndc_config_is_null(n))
		return set_str(c, field_ptr(cfg, f), NULL, NULL);
	r = ndc_config_expect_scalar(c, n, what);
	if (r == 0 && !n->len)
		r = ndc_config_bad_value(c, n, what);
	return r < 0 ? r : set_str(c, field_ptr(cfg, f), NULL, n->text);
}

/* dataplane.dpdk.eal_args: a list of strings, each passed to rte_eal_init as it is. */
int ndc_config_set_strings(struct ctx *c, const struct field *f, const struct node *n,
			   struct ndc_config *cfg)
{
	char **v, ***slot = field_ptr(cfg, f);
	size_t count, *n_slot = (size_t *)((char *)cfg + f->aux);
	int r = string_list(c, f, n, "a list of strings", "a string of 1..1024 bytes", is_eal_arg,
			    &v, &count);

	if (r < 0)
		return r;
	ndc_config_strv_free(*slot, *n_slot);
	*slot = v;
	*n_slot = count;
	return 0;
}

/*
 * dataplane.dpdk.ports and lcores: lists of distinct integers 0..1023 (port ids, CPU numbers;
 * whether they exist is for the EAL to say), replaced as a whole.
 */
int ndc_config_set_u16s(struct ctx *c, const struct field *f, const struct node *n,
			struct ndc_config *cfg)
{
	const struct node *const *items;
	uint16_t *v = NULL, **slot = field_ptr(cfg, f);
	size_t count, *n_slot = (size_t *)((char *)cfg + f->aux);
	char what[64];
	int r = ndc_config_list_items(c, n, "a list of integers", false, &items, &count);

	if (r < 0)
		return r;
	if (count > f->max)
		return ndc_config_fail(c, n->line, "expected at most %llu entries, got %zu",
				       (unsigned long long)f->max, count);
	snprintf(what, sizeof(what), "an integer 0..%u", U16_LIST_MAX);
	if (count && !(v = calloc(count, sizeof(*v))))
		return ndc_config_oom(c);
	for (size_t i = 0; i < count; i++) {
		const struct node *it = items[i];
		size_t mark = ndc_config_path_push(c, "[%zu]", i);
		uint64_t x = 0;

		r = ndc_config_expect_scalar(c, it, what);
		if (r == 0 && (!ndc_config_u64(it->text, it->len, &x) || x > U16_LIST_MAX))
			r = ndc_config_bad_value(c, it, what);
		for (size_t j = 0; r == 0 && j < i; j++)
			if (v[j] == x)
				r = ndc_config_fail(c, it->line, "%llu is listed twice",
						    (unsigned long long)x);
		ndc_config_path_pop(c, mark);
		if (r < 0) {
			free(v);
			return r;
		}
		v[i] = (uint16_t)x;
	}
	free(*slot);
	*slot = v;
	*n_slot = count;
	return 0;
}

/* dataplane.dpdk.tap_prefix: the start of an interface name, the port's index follows it. */
int ndc_config_set_tap_prefix(struct ctx *c, const struct field *f, const struct node *n,
			      struct ndc_config *cfg)
{
	static const char what[] = "1..12 characters of an interface name (no '/', ':', spaces "
				   "or globs)";
	int r = ndc_config_expect_scalar(c, n, what);

	(void)f;
	if (r < 0)
		return r;
	if (n->len > TAP_PREFIX_MAX || !is_ifname_glob(n->text, n->len) || strpbrk(n->text, "*?[]"))
		return ndc_config_bad_value(c, n, what);
	return set_str(c, &cfg->dataplane.dpdk.tap_prefix, ndc_config_default_tap_prefix, n->text);
}

/* log.dnstap.sample and kernel_sample: a number in [0, 1] ("0", "0.01", "1e-3", "1.0"). */
int ndc_config_set_rate(struct ctx *c, const struct field *f, const struct node *n,
			struct ndc_config *cfg)
{
	static const char what[] = "a rate from 0 to 1 (e.g. 0.01)";
	char *end = NULL;
	double v;
	int r = ndc_config_expect_scalar(c, n, what);

	if (r < 0)
		return r;
	errno = 0;
	v = strtod(n->text, &end);
	if (!n->len || end != n->text + n->len || errno || !(v >= 0.0 && v <= 1.0))
		return ndc_config_bad_value(c, n, what);
	*(double *)field_ptr(cfg, f) = v;
	return 0;
}

/*
 * log.dnstap.socket: a unix socket's absolute path (sun_path holds 107 bytes); null turns dnstap
 * off. A build without the dnstap writer refuses it here, at load and at --check-config.
 */
int ndc_config_set_socket_path(struct ctx *c, const struct field *f, const struct node *n,
			       struct ndc_config *cfg)
{
	static const char what[] = "an absolute path of a unix socket (at most 107 bytes)";
	int r;

	if (ndc_config_is_null(n))
		return set_str(c, field_ptr(cfg, f), NULL, NULL);
	r = ndc_config_expect_scalar(c, n, what);
	if (r < 0)
		return r;
	if (!n->len || n->text[0] != '/' || n->len > 107 || memchr(n->text, '\0', n->len))
		return ndc_config_bad_value(c, n, what);
	if (!ndc_dnstap_available())
		return ndc_config_fail(c, n->line,
				       "this build has no dnstap (libfstrm, libprotobuf-c and "
				       "protoc-c were not found when it was built)");
	return set_str(c, field_ptr(cfg, f), NULL, n->text);
}
