// SPDX-License-Identifier: MIT
/*
 * The dnstap module in a build without libfstrm, libprotobuf-c or protoc-c: open says so, the
 * rest does nothing, and callers need no #ifdef (the config refuses log.dnstap with a clear
 * error from ndc_dnstap_available()).
 */
#include "dnstap.h"

bool ndc_dnstap_available(void)
{
	return false;
}

int ndc_dnstap_open(const struct ndc_dnstap_opts *opts, struct ndc_dnstap **ret_d)
{
	(void)opts;
	*ret_d = NULL;
	return -EOPNOTSUPP;
}

int ndc_dnstap_log(struct ndc_dnstap *d, const struct ndc_dnstap_event *ev)
{
	(void)d;
	(void)ev;
	return -EOPNOTSUPP;
}

bool ndc_dnstap_drop_unread(struct ndc_dnstap *d)
{
	(void)d;
	return false;
}

void ndc_dnstap_stats(struct ndc_dnstap *d, struct ndc_dnstap_stats *ret_stats)
{
	(void)d;
	*ret_stats = (struct ndc_dnstap_stats){0};
}

void ndc_dnstap_close(struct ndc_dnstap *d)
{
	(void)d;
}
