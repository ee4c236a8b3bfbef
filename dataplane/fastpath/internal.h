/* SPDX-License-Identifier: MIT */
/*
 * Between fastpath.c (loader, pins, publisher) and link_watch.c (attach manager). Not for other
 * modules: they use fastpath.h.
 */
#ifndef NDC_FASTPATH_INTERNAL_H
#define NDC_FASTPATH_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "fastpath/fastpath.h"

struct ndc_link_watch;

struct ndc_link_watch_opts {
	enum ndc_fp_attach mode; /* TC or XDP */
	int prog_fd;		 /* the program of that mode; owned by the caller */
	int egress_fd;		 /* tc egress (fail-open replies); 0 or -1: none */
	int ingress_fd;		 /* XDP mode: tc ingress beside XDP (fail-open); 0 or -1: none */
	size_t n_patterns;
	char *const *patterns; /* copied */
};

/*
 * Attaches to every matching link present now (before returning), then starts a thread that
 * attaches to links as they appear. Returns 0 or a negative errno (socket, thread, memory); a
 * link that refuses the program is logged and skipped, not an error.
 */
int ndc_link_watch_start(const struct ndc_link_watch_opts *opts, struct ndc_link_watch **ret);

/*
 * Stops the thread; with detach, removes from every link still present what is still ours (a
 * successor's programs stay); frees. NULL is fine.
 */
void ndc_link_watch_stop(struct ndc_link_watch *lw, bool detach);

#endif
