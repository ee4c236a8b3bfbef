/* SPDX-License-Identifier: MIT */
/*
 * The fast path from user space: loads the BPF object (libbpf skeleton), pins its maps under
 * NDC_FP_PIN_DIR, writes the config, attaches the tc (clsact ingress) or XDP program to every
 * link whose name matches one of the patterns, as links appear (rtnetlink watch), and detaches on
 * close. The publisher keeps the answer table equal to what the socket path would answer, one key
 * at a time, writing it through a shared mapping (no syscall per entry); the calls that write it
 * may come from any thread. Without BPF support in the build every call returns -EOPNOTSUPP
 * (fastpath_stub.c), so callers never need #ifdef.
 */
#ifndef NDC_FASTPATH_H
#define NDC_FASTPATH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <ndc/abi.h>
#include <ndc/answer_table.h>
#include <ndc/dns_wire.h>
#include <ndc/entry.h> /* the key and entry encoding (dataplane/base/) */
#include <ndc/ip.h>

struct ndc_fp; /* not "ndc_fastpath": that is the libbpf skeleton's struct name */

/*
 * The tc filter's identity on a clsact hook (`tc filter show dev X ingress` shows it as
 * "pref 7 ... handle 0x6e6463"): re-attaching replaces our filter and never another one. The
 * handle and a program name beginning "ndc_" make a filter ours (an earlier agent's too); its
 * priority is NDC_FP_TC_PRIO unless another's filter is at or after it (NDC_FP_TC_AFTER).
 */
#define NDC_FP_TC_HANDLE 0x6e6463 /* "ndc" */
#define NDC_FP_TC_PRIO 7

enum ndc_fp_attach { NDC_FP_ATTACH_TC = 0, NDC_FP_ATTACH_XDP, NDC_FP_ATTACH_NONE };

/*
 * Where our tc filters go on a hook that has others' filters (a CNI's policy): AFTER, at a
 * priority greater than all of theirs (and again behind one added later), so that what they drop
 * or redirect never reaches us; FIRST, at NDC_FP_TC_PRIO whatever runs after (the old way: the
 * kernel answers before their policy sees the query). Programs attached with tcx (Linux 6.6)
 * run before every clsact filter either way.
 */
enum ndc_fp_tc_order { NDC_FP_TC_AFTER = 0, NDC_FP_TC_FIRST };

struct ndc_fastpath_opts {
	enum ndc_fp_attach attach; /* NONE: load and publish only (tests, BPF_PROG_TEST_RUN) */
	size_t n_patterns;	   /* fnmatch(3) patterns of interface names */
	char *const *patterns;
	size_t n_addrs; /* node-local addresses the fast path answers for */
	const struct ndc_ip *addrs;
	uint16_t port;	     /* host order; 0: 53 */
	const uint8_t *zone; /* lowercase wire cluster domain: NXDOMAIN synthesis below it */
	size_t zone_len;
	const uint8_t *pass; /* lowercase wire suffix never synthesised (pod.<zone>), or NULL */
	size_t pass_len;
	uint32_t max_entries; /* answer table size; 0: 65536 */
	bool redirect_peer;   /* tc replies with bpf_redirect_peer */
	enum ndc_fp_tc_order tc_order;
	const char *pin_dir; /* NULL: NDC_FP_PIN_DIR; must be on bpffs */
	/* fail open (abi.h NDC_FP_C_FAILOPEN) to the first upstream of each family */
	bool failopen;
	size_t n_upstreams;
	const struct sockaddr_storage *upstreams;
	/*
	 * Load and fill only: no pins, nothing attached until ndc_fastpath_attach. An agent fills
	 * the table first, so that what it attaches never answers from less than the program it
	 * replaces.
	 */
	bool defer_attach;
	/*
	 * What the kernel shows of its queries (issue 37; ndc_fastpath_set_observe changes both
	 * while it runs): clients, count them per source address (log.clients); kernel_sample, the
	 * share of its answers copied out for ndc_fastpath_samples_poll, 0 to 1
	 * (log.dnstap.kernel_sample; 0: none).
	 */
	bool clients;
	double kernel_sample;
	/* Tests only: the bytes of another build of the BPF object (same programs, maps and
	 * globals, e.g. one with a planted bug) instead of the one built in; NULL for that. */
	const struct iovec *object;
};

/*
 * Loads, writes the config (abi_version, addresses, port, zone, pass, fail-open upstreams, flags;
 * not synced), and unless opts->defer_attach does what ndc_fastpath_attach does. Never touches
 * pins or programs of another agent before that. -EOPNOTSUPP without BPF in the build; -EPERM
 * without the privileges (CAP_BPF or CAP_SYS_ADMIN, and CAP_NET_ADMIN); -E2BIG: more than
 * NDC_FP_MAX_ADDRS addresses of one family; -ENAMETOOLONG: zone or pass over NDC_FP_NAME_MAX;
 * -EINVAL: bad options or pin_dir not on bpffs; -errno from libbpf.
 */
int ndc_fastpath_open(const struct ndc_fastpath_opts *opts, struct ndc_fp **ret);

/*
 * The table's config from the fast path's options (what ndc_fastpath_open publishes; the DPDK
 * table's is made by the same ndc_fastpath_config): errors as ndc_fastpath_config's.
 */
int ndc_fastpath_config_of(const struct ndc_fastpath_opts *opts, struct ndc_fp_config *ret);

/*
 * Pins the maps as <pin_dir>/<map name> (for inspection with bpftool; pins of an earlier run or
 * of the predecessor are replaced), and for TC/XDP attaches to the matching links present now
 * before returning, then to new ones as they appear (within ~100 ms). Attaching replaces an
 * earlier program of ours in one step (tc filter replace, XDP replace): a link is never without
 * one. In tc mode the egress filter (fail-open replies) goes in too; in XDP mode, tc ingress and
 * egress filters for fail-open. 0 when already attached.
 */
int ndc_fastpath_attach(struct ndc_fp *fp);

/*
 * Stops attaching to new links, leaving attached what is (a successor has taken over and attaches
 * its own); ndc_fastpath_attach starts again. NULL is fine.
 */
void ndc_fastpath_quiet(struct ndc_fp *fp);

/* Detaches what is still ours from every link, removes the pins still ours, frees. NULL ok. */
void ndc_fastpath_close(struct ndc_fp *fp);

/*
 * For an agent whose successor took over: detaches what is still ours (links the successor did
 * not take, e.g. one running without the fast path), leaves every pin (the successor pinned its
 * maps in their place, and shares our fail-open flows map), frees. NULL is fine.
 */
void ndc_fastpath_hand_off(struct ndc_fp *fp);

/*
 * Frees, leaving programs attached and pins in place: a successor has taken over (its
 * programs replaced ours) or is about to. NULL is fine.
 */
void ndc_fastpath_release(struct ndc_fp *fp);

/*
 * The answer table's calls (<ndc/answer_table.h> says what each does and returns; -EOPNOTSUPP
 * without BPF), and the same as the table of operations the publisher holds, with fp as its table.
 */
int ndc_fastpath_publish(struct ndc_fp *fp, const uint8_t *lname, size_t nlen, uint16_t qtype,
			 const struct ndc_answer *a, uint32_t ttl_s);
/* ndc_fastpath_publish with a NULL answer: the pass marker */
int ndc_fastpath_publish_pass(struct ndc_fp *fp, const uint8_t *lname, size_t nlen);
int ndc_fastpath_unpublish(struct ndc_fp *fp, const uint8_t *lname, size_t nlen, uint16_t qtype);
int ndc_fastpath_unpublish_expired(struct ndc_fp *fp, const struct ndc_fp_key *k);
int ndc_fastpath_set_nx(struct ndc_fp *fp, const struct ndc_answer *nx);
int ndc_fastpath_set_synced(struct ndc_fp *fp, bool synced);
int ndc_fastpath_hits(struct ndc_fp *fp, const uint8_t *lname, size_t nlen, uint16_t qtype,
		      uint32_t *ret_hits);
extern const struct ndc_answer_table_ops ndc_fastpath_answer_table;

/* Sums the per-CPU counters. */
int ndc_fastpath_counters(struct ndc_fp *fp, uint64_t ret[NDC_FP_COUNTER_MAX]);

/*
 * Others' programs the fast path runs in front of now, over the links it is attached to: in XDP
 * mode every tc program (clsact filter or tcx) on their ingress; in tc mode the clsact filters at
 * or after ours (tc_order first, or none free after theirs). 0 while nothing is attached.
 */
uint64_t ndc_fastpath_foreign_programs(struct ndc_fp *fp);

/*
 * The answer table, which follows its content: keys in it now, keys it may hold
 * (dataplane.table_size), its slots now, the bytes of kernel memory its maps take now (mapped
 * into this process too: part of its RSS), the bytes its keys need (a slot each, and their big
 * answers), and how often it was rebuilt to grow or shrink.
 */
struct ndc_fastpath_table_stats {
	uint64_t keys, max_keys, slots, bytes, needed, rebuilds;
	uint64_t rare_keys, common_slots; /* the regions (include/ndc/abi.h) */
};
int ndc_fastpath_table_stats(struct ndc_fp *fp, struct ndc_fastpath_table_stats *ret);

/*
 * Who asks (issue 37). The kernel counts every UDP query to a node-local address that it answers
 * or passes, by source address (include/ndc/abi.h, struct ndc_fp_client_slot): a fixed table of
 * NDC_FP_CLIENTS_MAX slots per CPU, two of which a client may hold; a new client whose two are
 * taken takes the one with fewer queries on that CPU, whose owner's counts there are lost (it
 * vanishes, or shows less, and starts again from 0 if it comes back;
 * ndc_fastpath_clients_taken counts such takeovers). Counts start from 0 with each load of the
 * program (an upgrade's successor loads its own). passed: handed to the stack, where the socket
 * path sees them again; nxdomain is part of answered; queries = answered + passed.
 */
struct ndc_fp_client {
	struct ndc_ip addr; /* IPv4 for IPv4 clients (the kernel's IPv4-mapped key) */
	uint64_t queries, answered, nxdomain, passed;
};

/*
 * Calls cb for every client counted, summed over CPUs, until cb returns non-zero (then that value
 * is returned). 0, -errno, or -EOPNOTSUPP in a build without BPF. Not while the program is not
 * loaded (fp NULL: -EINVAL).
 */
int ndc_fastpath_clients(struct ndc_fp *fp, int (*cb)(const struct ndc_fp_client *c, void *arg),
			 void *arg);

/* Slots a new client took from another since the program was loaded (see above). 0 or -errno. */
int ndc_fastpath_clients_taken(struct ndc_fp *fp, uint64_t *ret);

/* A kernel answer sampled (kernel_sample): the reply as sent, for dnstap CLIENT_RESPONSE. */
struct ndc_fp_sample {
	struct ndc_ip client;
	uint16_t client_port; /* host order */
	uint64_t ktime_ns;    /* CLOCK_MONOTONIC when it was sent */
	uint32_t len;	      /* bytes of msg: the DNS message's first len, len <= 512 */
	uint8_t msg[512];
};

/*
 * Waits up to timeout_ms (0: none, -1: forever) for samples and calls cb for each one waiting;
 * returns how many, or -errno (-EINTR when a signal came), -EOPNOTSUPP without BPF. One thread at
 * a time.
 */
int ndc_fastpath_samples_poll(struct ndc_fp *fp, int timeout_ms,
			      void (*cb)(const struct ndc_fp_sample *s, void *arg), void *arg);

/* An fd that polls readable while samples wait (for an event loop), or -errno. */
int ndc_fastpath_samples_fd(struct ndc_fp *fp);

/* Samples the kernel dropped because the ring was full (the reader was too slow). */
int ndc_fastpath_samples_lost(struct ndc_fp *fp, uint64_t *ret);

/*
 * The config words of what the kernel shows, live (one atomic store each): counting per client on
 * or off, the sample rate (0 to 1; 0: none). -EINVAL for a rate outside [0, 1].
 */
int ndc_fastpath_set_observe(struct ndc_fp *fp, bool clients, double kernel_sample);

/* Entry points only tests and benchmarks call: fastpath/fastpath_test.h. */

#endif
