/* SPDX-License-Identifier: MIT */
/*
 * The running agent: cache, fast path and publisher, forwarder, resolver, socket server, the
 * metrics/health/ready endpoint and, for a Kubernetes source, the watch and the object store.
 * Started in dependency order, stopped in reverse, on SIGINT or SIGTERM. Configuration changes
 * without a restart: reload.h.
 */
#ifndef NDC_AGENT_H
#define NDC_AGENT_H

#include <stdbool.h>
#include <stddef.h>

#include "config/config.h"
#include "k8s/k8s.h"
#include "records/records.h"

/* How the agent was started, for reloads (reload.h). */
struct ndc_agent_opts {
	const char *config_path; /* --config: watched, and read again on SIGHUP; NULL: none */
	const char *config_text; /* what cfg was parsed from: a reload compares the file with it */
	size_t config_len;
	const char *kubeconfig; /* --kubeconfig: replaces source in every config read */
	bool log_level_fixed;	/* --log-level: the config's log.level is not applied */
	/*
	 * A snapshot (or the embedded) source's table, built with ropts, read from cfg's source:
	 * a records.* reload builds the table again with it. 0 or -errno, logged.
	 */
	int (*load_records)(const struct ndc_config *cfg, const struct ndc_records_opts *ropts,
			    struct ndc_records **ret);
};

struct ndc_handover_peer;

/*
 * An upgrade's first step: the running agent with this config's listen address and port (if
 * any) joined, its sockets ours too from then on. A running agent told to stop waits only
 * upgrade.join_wait_ms for a successor to join, so a successor joins before anything that takes
 * time (a big snapshot, the API server's credentials, the fast path's load).
 */
struct ndc_agent_join {
	struct ndc_handover_peer *pred; /* NULL: nobody runs there (a cold start) */
	int *fds;			/* its sockets, shared with it from here on */
	size_t n_fds;
};

/* Joins the agent running with cfg's address and port, if any (what happened is logged). */
void ndc_agent_join(const struct ndc_config *cfg, struct ndc_agent_join *ret);
/* Closes what a join holds (a start that fails before ndc_agent_run). */
void ndc_agent_join_release(struct ndc_agent_join *j);

/*
 * Runs until SIGINT or SIGTERM; SIGHUP reloads the config file. rec: the record table of a
 * snapshot source (ownership passes), or NULL with conn set: objects come from the API server
 * and until the first full sync every name is forwarded. opts may be NULL (no reloads of a
 * file). join: what ndc_agent_join got (its contents pass to the agent, which empties it;
 * NULL: no predecessor). Returns 0 after a clean stop, 1 when something could not start.
 */
int ndc_agent_run(const struct ndc_config *cfg, struct ndc_records *rec,
		  const struct ndc_k8s_conn *conn, const struct ndc_agent_opts *opts,
		  struct ndc_agent_join *join);

#endif
