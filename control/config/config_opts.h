/* SPDX-License-Identifier: MIT */
/*
 * Each subsystem's options made from a config (config_opts.c), in one place: the agent at start,
 * main for a snapshot's records, the reload for what it applies again. A library of its own
 * (ndc_config_opts), above the subsystems whose options it fills, while the config (config.h,
 * ndc_config) sits below them: it fills structs and calls nothing.
 */
#ifndef NDC_CONFIG_OPTS_H
#define NDC_CONFIG_OPTS_H

#include "config/config.h"

struct ndc_cache_opts;
struct ndc_forwarder_opts;
struct ndc_prefetch_opts;
struct ndc_ratelimit_opts;
struct ndc_records_opts;

/*
 * Pointers into cfg. ndc_records_opts_from_config fills every option the config gives (zone,
 * records.*, the listen addresses as the name server's); ndc_records_opts_apply only the records.*
 * keys, what a reload of them changes, keeping the rest of opts.
 */
void ndc_records_opts_from_config(struct ndc_records_opts *opts, const struct ndc_config *cfg);
void ndc_records_opts_apply(struct ndc_records_opts *opts, const struct ndc_config *cfg);
void ndc_cache_opts_from_config(struct ndc_cache_opts *opts, const struct ndc_config *cfg);
/* The default route and its settings; stub domains are the reload's (reload_routes.c). */
void ndc_forwarder_opts_from_config(struct ndc_forwarder_opts *opts, const struct ndc_config *cfg);
void ndc_prefetch_opts_from_config(struct ndc_prefetch_opts *opts, const struct ndc_config *cfg);
void ndc_ratelimit_opts_from_config(struct ndc_ratelimit_opts *opts, const struct ndc_config *cfg);

#endif
