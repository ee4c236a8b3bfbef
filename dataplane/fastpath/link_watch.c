// SPDX-License-Identifier: MIT
/*
 * The attach manager: an rtnetlink link watch (RTMGRP_LINK, RTMGRP_TC) on a thread of its own,
 * plus a RTM_GETLINK dump at start and after a multicast overrun. Every link whose name matches a
 * pattern gets the tc filter (clsact ingress, handle NDC_FP_TC_HANDLE) or the XDP program, plus
 * the fail-open programs when given (egress: a tcx link pinned in the pin directory where the
 * kernel has tcx, else a clsact filter: link_tcx.c; in XDP mode a clsact ingress filter too).
 * The kernel drops them with the link, so RTM_DELLINK only forgets it (and the tcx link's pin). The
 * watch runs in the network namespace of the thread that started it.
 *
 * Order: a clsact filter that returns a verdict (TC_ACT_OK, SHOT, REDIRECT) ends the hook, so
 * whatever sits at a greater priority never sees the packet. With tc_order after (the default)
 * our filters go behind every other filter on their hook: NDC_FP_TC_PRIO when all are before it,
 * else one past the greatest; a filter someone adds at or after ours later (a CNI setting up a
 * pod after we saw its veth) moves us behind it again (RTM_NEWTFILTER). With tc_order first they
 * stay at NDC_FP_TC_PRIO. Others' programs we run in front of are logged and counted: in XDP mode
 * every tc program on ingress (XDP runs before tc), in tc mode the filters after ours.
 *
 * Attaching replaces: a filter at our handle and priority, or our XDP program, is swapped in one
 * netlink request, so at no instant is nothing attached (an upgrade's successor takes over this
 * way). Our handle with a program named ndc_* is ours, an earlier agent's included: where it is
 * behind the others it is replaced in place; where not, ours goes in behind them first and the
 * old one is removed after. Detaching removes only what is still ours: a successor's program is
 * left alone.
 */
#include <errno.h>
#include <fnmatch.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/pkt_cls.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <net/if.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <ndc/log.h>

#include "internal.h"

#define NL_BUF 32768
#define NL_RCVBUF (1 << 20) /* a node creating hundreds of pods at once must not overrun it */
#define NDC_TC_PREF_MAX 0xffff
#define SCAN_MAX 64  /* others' filters on one hook we keep the priorities of */
#define SCAN_OWN 8   /* our filters on one hook (ours and earlier agents') */
#define MOVES_MAX 64 /* moves behind a later filter, per link: two "after" programs stop */
/* tcx (Linux 6.6) attach types; libbpf 1.1's and Linux 6.1's headers predate them */
#define NDC_BPF_TCX_INGRESS 46

enum link_state { LINK_ATTACHED = 0, LINK_FAILED };

struct link {
	int ifindex;
	char name[IF_NAMESIZE];
	enum link_state state;
	bool own_hook;	 /* tc: we created the clsact qdisc */
	bool tc_failed;	 /* XDP mode: the fail-open tc filters did not go in */
	bool egress_tcx; /* fail-open's egress program is in a tcx link (egress_link), not clsact */
	int egress_link; /* that link's descriptor (its pin holds it too) */
	uint32_t xdp_flags; /* XDP: the mode it went in with */
	uint32_t prio[2];   /* our filters' priority: [0] ingress, [1] egress; 0: none */
	uint32_t foreign;   /* others' programs we run in front of here (in the gauge) */
	uint32_t moves;	    /* times moved behind a filter added after ours */
};

/* The filters on one clsact hook (chain 0), from a RTM_GETTFILTER dump. */
struct tc_scan {
	uint32_t own[SCAN_OWN]; /* priorities of our filters */
	size_t n_own;
	uint32_t prio[SCAN_MAX]; /* priorities of others' filters (the first SCAN_MAX) */
	size_t n_prio;
	uint32_t n_foreign; /* all of others' filters */
	uint32_t max_prio;  /* the greatest of theirs; 0: none */
};

struct ndc_link_watch {
	enum ndc_fp_attach mode;
	enum ndc_fp_tc_order order;
	uint64_t *foreign; /* the caller's gauge, or NULL */
	int prog_fd;
	int egress_fd;	   /* tc egress, or -1 */
	int ingress_fd;	   /* XDP mode: tc ingress beside XDP, or -1 */
	char *pin_dir;	   /* where our tcx links are pinned; NULL: no tcx */
	bool ids_readable; /* BPF_PROG_GET_FD_BY_ID works (CAP_SYS_ADMIN): link_tcx.c */
	uint32_t prog_id, egress_id, ingress_id; /* to recognise our filters when detaching */
	size_t n_patterns;
	char **patterns;
	int nl_fd;  /* multicast RTMGRP_LINK, RTMGRP_TC (others' filters come and go) */
	int evt_fd; /* eventfd: stop */
	pthread_t thread;
	bool thread_started;
	size_t n_links;
	size_t cap_links;
	struct link *links;
	uint8_t buf[NL_BUF];
	uint8_t scan_buf[NL_BUF]; /* filter dumps, made while buf's messages are handled */
};

static bool name_matches(const struct ndc_link_watch *lw, const char *name)
{
	for (size_t i = 0; i < lw->n_patterns; i++)
		if (fnmatch(lw->patterns[i], name, 0) == 0)
			return true;
	return false;
}

static struct link *find_link(struct ndc_link_watch *lw, int ifindex)
{
	for (size_t i = 0; i < lw->n_links; i++)
		if (lw->links[i].ifindex == ifindex)
			return &lw->links[i];
	return NULL;
}

static struct link *add_link(struct ndc_link_watch *lw, int ifindex, const char *name)
{
	if (lw->n_links == lw->cap_links) {
		size_t cap = lw->cap_links ? 2 * lw->cap_links : 16;
		struct link *l = realloc(lw->links, cap * sizeof(*l));

		if (!l)
			return NULL;
		lw->links = l;
		lw->cap_links = cap;
	}
	struct link *l = &lw->links[lw->n_links++];
	memset(l, 0, sizeof(*l));
	l->ifindex = ifindex;
	snprintf(l->name, sizeof(l->name), "%s", name);
	return l;
}

static void set_foreign(struct ndc_link_watch *lw, struct link *l, uint32_t n)
{
	if (lw->foreign && n != l->foreign)
		__atomic_add_fetch(lw->foreign, (uint64_t)n - (uint64_t)l->foreign,
				   __ATOMIC_RELAXED);
	l->foreign = n;
}

static int tcx_link_close(struct ndc_link_watch *lw, struct link *l, bool unpin);

static void forget_link(struct ndc_link_watch *lw, struct link *l)
{
	tcx_link_close(lw, l, false);
	set_foreign(lw, l, 0);
	*l = lw->links[--lw->n_links];
}

static enum bpf_tc_attach_point hook_of(int dir)
{
	return dir ? BPF_TC_EGRESS : BPF_TC_INGRESS;
}

/* One RTM_NEWTFILTER of a dump into s. */
static void scan_filter(struct tc_scan *s, const struct nlmsghdr *nh)
{
	const struct tcmsg *t = NLMSG_DATA(nh);
	int alen = (int)nh->nlmsg_len - (int)NLMSG_LENGTH(sizeof(*t));
	uint32_t prio = TC_H_MAJ(t->tcm_info) >> 16, chain = 0;
	char kind[16] = "", name[64] = "";

	/* handle 0: the classifier's own line, one per priority; its filters follow */
	if (alen < 0 || nh->nlmsg_type != RTM_NEWTFILTER || t->tcm_handle == 0)
		return;
	for (const struct rtattr *rta =
		 (const void *)((const uint8_t *)t + NLMSG_ALIGN(sizeof(*t)));
	     RTA_OK(rta, alen); rta = RTA_NEXT(rta, alen)) {
		size_t n = RTA_PAYLOAD(rta);

		if (rta->rta_type == TCA_KIND) {
			n = n < sizeof(kind) ? n : sizeof(kind) - 1;
			memcpy(kind, RTA_DATA(rta), n);
			kind[n] = '\0';
		} else if (rta->rta_type == TCA_CHAIN && n >= sizeof(chain)) {
			memcpy(&chain, RTA_DATA(rta), sizeof(chain));
		} else if (rta->rta_type == TCA_OPTIONS) {
			int olen = (int)n;

			for (const struct rtattr *o = RTA_DATA(rta); RTA_OK(o, olen);
			     o = RTA_NEXT(o, olen)) {
				size_t m = RTA_PAYLOAD(o);

				if (o->rta_type != TCA_BPF_NAME)
					continue;
				m = m < sizeof(name) ? m : sizeof(name) - 1;
				memcpy(name, RTA_DATA(o), m);
				name[m] = '\0';
			}
		}
	}
	/* another chain runs only where a filter of chain 0 sends it: that one counts */
	if (chain != 0)
		return;
	if (t->tcm_handle == NDC_FP_TC_HANDLE && strcmp(kind, "bpf") == 0 &&
	    strncmp(name, "ndc_", 4) == 0) {
		if (s->n_own < SCAN_OWN)
			s->own[s->n_own++] = prio;
		return;
	}
	if (s->n_prio < SCAN_MAX)
		s->prio[s->n_prio++] = prio;
	s->n_foreign++;
	if (prio > s->max_prio)
		s->max_prio = prio;
}

/* The filters on clsact hook dir of ifindex (none without a clsact qdisc). */
static int tc_scan(struct ndc_link_watch *lw, int ifindex, int dir, struct tc_scan *s)
{
	struct {
		struct nlmsghdr nh;
		struct tcmsg t;
	} req = {
	    .nh = {.nlmsg_len = NLMSG_LENGTH(sizeof(struct tcmsg)),
		   .nlmsg_type = RTM_GETTFILTER,
		   .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP,
		   .nlmsg_seq = 1},
	    .t = {.tcm_family = AF_UNSPEC,
		  .tcm_ifindex = ifindex,
		  .tcm_parent = TC_H_MAKE(TC_H_CLSACT, dir ? TC_H_MIN_EGRESS : TC_H_MIN_INGRESS)},
	};
	struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
	int fd, r = 0;

	memset(s, 0, sizeof(*s));
	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0)
		return -errno;
	if (sendto(fd, &req, req.nh.nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0) {
		r = -errno;
		goto out;
	}
	for (bool done = false; !done;) {
		ssize_t n = recv(fd, lw->scan_buf, sizeof(lw->scan_buf), 0);
		int len = (int)n;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			r = n < 0 ? -errno : -EPIPE;
			break;
		}
		for (const struct nlmsghdr *nh = (const void *)lw->scan_buf; NLMSG_OK(nh, len);
		     nh = NLMSG_NEXT(nh, len)) {
			if (nh->nlmsg_type == NLMSG_DONE) {
				done = true;
				break;
			}
			if (nh->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e = NLMSG_DATA(nh);

				r = nh->nlmsg_len < NLMSG_LENGTH(sizeof(*e)) ? -EBADMSG : e->error;
				/* no clsact qdisc: no filters */
				if (r == -EINVAL || r == -ENOENT)
					r = 0;
				done = true;
				break;
			}
			scan_filter(s, nh);
		}
	}
out:
	close(fd);
	return r;
}

/* Others' filters in s at or after prio: we run in front of them. */
static uint32_t behind(const struct tc_scan *s, uint32_t prio)
{
	uint32_t n = 0;

	for (size_t i = 0; i < s->n_prio; i++)
		n += s->prio[i] >= prio;
	/* more than we kept: all of them, when the greatest is behind us */
	if (s->n_foreign > s->n_prio && s->max_prio >= prio)
		n += s->n_foreign - (uint32_t)s->n_prio;
	return n;
}

/* Programs attached with tcx (Linux 6.6) to ingress: 0 where the kernel has none. */
static uint32_t tcx_count(int ifindex)
{
	uint32_t cnt = 0;

	if (bpf_prog_query(ifindex, (enum bpf_attach_type)NDC_BPF_TCX_INGRESS, 0, NULL, NULL,
			   &cnt) < 0)
		return 0;
	return cnt;
}

static int tc_attach_at(struct link *l, int dir, int fd, uint32_t prio)
{
	DECLARE_LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = l->ifindex, .attach_point = hook_of(dir));
	DECLARE_LIBBPF_OPTS(bpf_tc_opts, opts, .handle = NDC_FP_TC_HANDLE, .priority = prio,
			    .prog_fd = fd, .flags = BPF_TC_F_REPLACE);

	return bpf_tc_attach(&hook, &opts);
}

/* The program in our filter at prio on hook dir, 0 if none. */
static uint32_t tc_prog_at(struct link *l, int dir, uint32_t prio)
{
	DECLARE_LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = l->ifindex, .attach_point = hook_of(dir));
	DECLARE_LIBBPF_OPTS(bpf_tc_opts, opts, .handle = NDC_FP_TC_HANDLE, .priority = prio);

	return bpf_tc_query(&hook, &opts) < 0 ? 0 : opts.prog_id;
}

static int tc_remove_at(struct link *l, int dir, uint32_t prio)
{
	DECLARE_LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = l->ifindex, .attach_point = hook_of(dir));
	DECLARE_LIBBPF_OPTS(bpf_tc_opts, opts, .handle = NDC_FP_TC_HANDLE, .priority = prio);

	return bpf_tc_detach(&hook, &opts);
}

/*
 * Our filter on hook dir of l, where tc_order puts it (the file's comment): replaces ours at that
 * priority, then removes ours (an earlier agent's) at any other. -EBUSY when others' filters
 * leave no priority after theirs.
 */
static int tc_place(struct ndc_link_watch *lw, struct link *l, int dir, int fd)
{
	struct tc_scan s;
	uint32_t prio = 0;
	int r;

	r = tc_scan(lw, l->ifindex, dir, &s);
	if (r < 0)
		return r;
	if (lw->order == NDC_FP_TC_FIRST) {
		prio = NDC_FP_TC_PRIO;
	} else {
		for (size_t i = 0; i < s.n_own; i++)
			if (s.own[i] > s.max_prio && (!prio || s.own[i] == l->prio[dir]))
				prio = s.own[i];
		if (!prio)
			prio = s.max_prio < NDC_FP_TC_PRIO ? NDC_FP_TC_PRIO : s.max_prio + 1;
		if (prio > NDC_TC_PREF_MAX) {
			ndc_warn("fast path: a filter on %s %s is at the last priority (%u): ours "
				 "cannot go behind it (dataplane.tc_order: after)",
				 l->name, dir ? "egress" : "ingress", s.max_prio);
			return -EBUSY;
		}
	}
	r = tc_attach_at(l, dir, fd, prio);
	if (r < 0)
		return r;
	/* ours at other priorities (an earlier agent's, or ours before a move): in front */
	for (size_t i = 0; i < s.n_own; i++)
		if (s.own[i] != prio && tc_remove_at(l, dir, s.own[i]) == 0)
			ndc_info("fast path: %s %s: our filter moved from pref %u to pref %u",
				 l->name, dir ? "egress" : "ingress", s.own[i], prio);
	l->prio[dir] = prio;
	return 0;
}

/* Removes our filter on hook dir if the program in it is still prog_id. */
static int tc_detach_one(struct link *l, int dir, uint32_t prog_id)
{
	DECLARE_LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = l->ifindex, .attach_point = hook_of(dir));
	DECLARE_LIBBPF_OPTS(bpf_tc_opts, opts, .handle = NDC_FP_TC_HANDLE,
			    .priority = l->prio[dir] ? l->prio[dir] : NDC_FP_TC_PRIO);
	int r;

	r = bpf_tc_query(&hook, &opts);
	if (r < 0)
		return r;
	if (opts.prog_id != prog_id)
		return -EEXIST; /* replaced by someone else (a successor): theirs now */
	opts.prog_id = 0;
	opts.prog_fd = 0;
	opts.flags = 0;
	return bpf_tc_detach(&hook, &opts);
}

/* Our tcx link on l (link_tcx.c): with unpin, the attachment too if it still holds ours. */
static int tcx_link_close(struct ndc_link_watch *lw, struct link *l, bool unpin)
{
	int r;

	if (!l->egress_tcx)
		return 0;
	r = ndc_tcx_egress_close(lw->pin_dir, l->ifindex, l->egress_link, lw->egress_id, unpin);
	l->egress_tcx = false;
	return r;
}

/*
 * Fail-open's egress program in a tcx link (link_tcx.c), then an older agent's clsact egress
 * filter removed: ours runs first now, so it would find nothing to do.
 */
static int tcx_link_egress(struct ndc_link_watch *lw, struct link *l)
{
	struct tc_scan s;
	int r;

	r = ndc_tcx_egress_place(lw->pin_dir, l->ifindex, lw->egress_fd, lw->egress_id,
				 lw->ids_readable, &l->egress_link);
	if (r < 0)
		return r;
	l->egress_tcx = true;
	if (tc_scan(lw, l->ifindex, 1, &s) == 0)
		for (size_t i = 0; i < s.n_own; i++)
			if (tc_remove_at(l, 1, s.own[i]) == 0)
				ndc_info("fast path: %s egress: an earlier agent's clsact filter "
					 "(pref %u) removed, ours is a tcx link",
					 l->name, s.own[i]);
	return 0;
}

/*
 * Fail-open's egress program: a tcx link where the kernel has tcx, else (-EINVAL: no tcx; or any
 * refusal but a link gone) a clsact filter.
 */
static int place_egress(struct ndc_link_watch *lw, struct link *l)
{
	int r = lw->pin_dir ? tcx_link_egress(lw, l) : -EINVAL;

	if (r < 0 && r != -ENODEV) {
		if (r != -EINVAL)
			ndc_info("fast path: %s egress: no tcx link (%s), a clsact filter instead",
				 l->name, strerror(-r));
		r = tc_place(lw, l, 1, lw->egress_fd);
	}
	return r;
}

static int attach_tc(struct ndc_link_watch *lw, struct link *l)
{
	DECLARE_LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = l->ifindex,
			    .attach_point = BPF_TC_INGRESS);
	int r;

	r = bpf_tc_hook_create(&hook);
	if (r < 0 && r != -EEXIST)
		return r;
	l->own_hook = r == 0;
	r = 0;
	if (lw->mode == NDC_FP_ATTACH_TC)
		r = tc_place(lw, l, 0, lw->prog_fd);
	else if (lw->ingress_fd >= 0)
		r = tc_place(lw, l, 0, lw->ingress_fd);
	if (r == 0 && lw->egress_fd >= 0)
		r = place_egress(lw, l);
	if (r < 0 && l->own_hook) {
		hook.attach_point = BPF_TC_INGRESS | BPF_TC_EGRESS;
		bpf_tc_hook_destroy(&hook);
		l->own_hook = false;
	}
	return r;
}

/*
 * Looks at the others' programs on l's ingress: counts and logs those we run in front of, and in
 * tc mode with tc_order after moves ours behind a filter added at or after it since (not when
 * our filter there holds another program now: a successor's, which places itself).
 */
static void eval_link(struct ndc_link_watch *lw, struct link *l, bool fresh)
{
	struct tc_scan s;
	uint32_t n, tcx;

	if (l->state != LINK_ATTACHED || tc_scan(lw, l->ifindex, 0, &s) < 0)
		return;
	tcx = tcx_count(l->ifindex);
	if (lw->mode == NDC_FP_ATTACH_TC && lw->order == NDC_FP_TC_AFTER && l->prio[0] &&
	    s.max_prio >= l->prio[0] && tc_prog_at(l, 0, l->prio[0]) == lw->prog_id) {
		if (l->moves >= MOVES_MAX) {
			if (l->moves++ == MOVES_MAX)
				ndc_warn("fast path: %s: moved behind later filters %u times; "
					 "staying at pref %u",
					 l->name, MOVES_MAX, l->prio[0]);
		} else if (tc_place(lw, l, 0, lw->prog_fd) == 0) {
			l->moves++;
			s.max_prio = 0; /* ours is behind them now */
		}
	}
	if (lw->mode == NDC_FP_ATTACH_XDP)
		n = s.n_foreign + tcx;
	else
		n = l->prio[0] ? behind(&s, l->prio[0]) : 0;
	if (n && (fresh || n > l->foreign)) {
		if (lw->mode == NDC_FP_ATTACH_XDP)
			ndc_warn(
			    "fast path: %s has %u tc filter(s) and %u tcx program(s) on ingress "
			    "(a CNI's policy?): XDP runs before them, so they never see the "
			    "queries the kernel answers (use dataplane.mode tc)",
			    l->name, s.n_foreign, tcx);
		else
			ndc_warn(
			    "fast path: %s: our tc filter (pref %u) runs in front of %u other "
			    "filter(s) (a CNI's policy?): they never see the queries the kernel "
			    "answers%s",
			    l->name, l->prio[0], n,
			    lw->order == NDC_FP_TC_FIRST ? " (dataplane.tc_order: first)" : "");
	}
	if (fresh && tcx && lw->mode == NDC_FP_ATTACH_TC)
		ndc_info("fast path: %s has %u tcx program(s) on ingress: they run before our tc "
			 "filter, which sees only what they pass on",
			 l->name, tcx);
	set_foreign(lw, l, n);
}

/* A filter added or removed on a link we are attached to (not ours): look again. */
static void on_filter(struct ndc_link_watch *lw, const struct nlmsghdr *nh)
{
	const struct tcmsg *t = NLMSG_DATA(nh);
	struct link *l;

	if (nh->nlmsg_len < NLMSG_LENGTH(sizeof(*t)) || t->tcm_handle == NDC_FP_TC_HANDLE ||
	    t->tcm_parent != TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_INGRESS))
		return;
	l = find_link(lw, t->tcm_ifindex);
	if (l)
		eval_link(lw, l, false);
}

/* Only our program: replace an earlier run's, never someone else's. */
static uint32_t xdp_replace_flag(struct ndc_link_watch *lw, int ifindex)
{
	struct bpf_prog_info ours = {0}, cur = {0};
	uint32_t len = sizeof(ours), id = 0;
	int fd;

	if (bpf_xdp_query_id(ifindex, 0, &id) < 0 || id == 0)
		return XDP_FLAGS_UPDATE_IF_NOEXIST;
	if (bpf_obj_get_info_by_fd(lw->prog_fd, &ours, &len) < 0)
		return XDP_FLAGS_UPDATE_IF_NOEXIST;
	fd = bpf_prog_get_fd_by_id(id);
	if (fd < 0)
		return XDP_FLAGS_UPDATE_IF_NOEXIST;
	len = sizeof(cur);
	if (bpf_obj_get_info_by_fd(fd, &cur, &len) < 0 ||
	    strncmp(cur.name, ours.name, sizeof(cur.name)) != 0) {
		close(fd);
		return XDP_FLAGS_UPDATE_IF_NOEXIST;
	}
	close(fd);
	return 0;
}

static int attach_xdp_prog(struct ndc_link_watch *lw, struct link *l)
{
	uint32_t flags = xdp_replace_flag(lw, l->ifindex);
	int r;

	/* Native first; drivers without XDP support (or with it off) take the generic hook. */
	r = bpf_xdp_attach(l->ifindex, lw->prog_fd, flags | XDP_FLAGS_DRV_MODE, NULL);
	if (r == 0) {
		l->xdp_flags = XDP_FLAGS_DRV_MODE;
		return 0;
	}
	if (r == -EBUSY || r == -EEXIST)
		return r; /* another program is there */
	r = bpf_xdp_attach(l->ifindex, lw->prog_fd, flags | XDP_FLAGS_SKB_MODE, NULL);
	if (r == 0)
		l->xdp_flags = XDP_FLAGS_SKB_MODE;
	return r;
}

/* XDP answers; what it passes reaches tc ingress, where fail-open looks at it. */
static int attach_xdp(struct ndc_link_watch *lw, struct link *l)
{
	int r = attach_xdp_prog(lw, l);

	if (r < 0 || (lw->ingress_fd < 0 && lw->egress_fd < 0))
		return r;
	r = attach_tc(lw, l);
	if (r < 0) {
		ndc_warn("fast path: fail-open filters on %s: %s; without an agent its queries "
			 "meet a closed port",
			 l->name, strerror(-r));
		l->tc_failed = true;
	}
	return 0;
}

static int detach_tc(struct ndc_link_watch *lw, struct link *l)
{
	int r = 0, e = 0;

	if (lw->mode == NDC_FP_ATTACH_TC)
		r = tc_detach_one(l, 0, lw->prog_id);
	else if (lw->ingress_fd >= 0)
		r = tc_detach_one(l, 0, lw->ingress_id);
	if (lw->egress_fd >= 0 && l->egress_tcx)
		e = tcx_link_close(lw, l, true);
	else if (lw->egress_fd >= 0)
		e = tc_detach_one(l, 1, lw->egress_id);
	if (r == 0 && e == 0 && l->own_hook) {
		DECLARE_LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = l->ifindex,
				    .attach_point = BPF_TC_INGRESS | BPF_TC_EGRESS);

		/*
		 * Both directions: that deletes the clsact qdisc we created. The kernel refuses
		 * (-EBUSY, "ongoing filter requests") while the filter just deleted still holds
		 * the qdisc, which it lets go a moment after its reply: up to 50 ms more.
		 */
		for (int i = 0; i < 50; i++) {
			r = bpf_tc_hook_destroy(&hook);
			if (r != -EBUSY)
				break;
			usleep(1000);
		}
	}
	return r ? r : e;
}

static void detach_link(struct ndc_link_watch *lw, struct link *l)
{
	int r;

	if (l->state != LINK_ATTACHED)
		return;
	if (lw->mode == NDC_FP_ATTACH_TC) {
		r = detach_tc(lw, l);
	} else {
		/* With REPLACE and our fd: if someone replaced our program, theirs stays. */
		DECLARE_LIBBPF_OPTS(bpf_xdp_attach_opts, opts, .old_prog_fd = lw->prog_fd);

		r = bpf_xdp_detach(l->ifindex, l->xdp_flags | XDP_FLAGS_REPLACE, &opts);
		if (!l->tc_failed && (lw->ingress_fd >= 0 || lw->egress_fd >= 0)) {
			int t = detach_tc(lw, l);

			if (r == 0)
				r = t;
		}
	}
	if (r == 0)
		ndc_info("fast path: detached from %s (ifindex %d)", l->name, l->ifindex);
	else if (r == -ENODEV || r == -ENOENT || r == -EEXIST)
		/* the link went away meanwhile, or someone removed or replaced our program */
		ndc_info("fast path: %s (ifindex %d) no longer has our program", l->name,
			 l->ifindex);
	else
		ndc_warn("fast path: cannot detach from %s (ifindex %d): %s", l->name, l->ifindex,
			 strerror(-r));
	l->state = LINK_FAILED;
}

static void attach_link(struct ndc_link_watch *lw, int ifindex, const char *name)
{
	struct link *l = add_link(lw, ifindex, name);
	int r;

	if (!l) {
		ndc_err("fast path: out of memory tracking %s", name);
		return;
	}
	r = lw->mode == NDC_FP_ATTACH_TC ? attach_tc(lw, l) : attach_xdp(lw, l);
	if (r < 0) {
		/* Logged once: the link stays marked as refused until it goes away. */
		l->state = LINK_FAILED;
		ndc_warn("fast path: cannot attach to %s (ifindex %d): %s; its queries take the "
			 "socket path",
			 name, ifindex, strerror(-r));
		return;
	}
	l->state = LINK_ATTACHED;
	if (lw->mode == NDC_FP_ATTACH_TC)
		ndc_info("fast path: attached tc ingress%s to %s (ifindex %d, pref %u)%s",
			 lw->egress_fd >= 0 ? " and egress" : "", name, ifindex, l->prio[0],
			 l->egress_tcx ? " (egress with tcx)" : "");
	else
		ndc_info("fast path: attached XDP (%s mode) to %s (ifindex %d)",
			 l->xdp_flags == XDP_FLAGS_DRV_MODE ? "native" : "generic", name, ifindex);
	eval_link(lw, l, true);
}

static void on_newlink(struct ndc_link_watch *lw, int ifindex, const char *name)
{
	struct link *l = find_link(lw, ifindex);

	if (!l) {
		if (name_matches(lw, name))
			attach_link(lw, ifindex, name);
		return;
	}
	if (strcmp(l->name, name) == 0)
		return; /* up/down and other changes: still attached (or still refused) */
	/* Renamed: follow the patterns under the new name. */
	if (name_matches(lw, name)) {
		snprintf(l->name, sizeof(l->name), "%s", name);
		return;
	}
	if (l->state == LINK_ATTACHED)
		ndc_info("fast path: %s renamed to %s, which no pattern matches", l->name, name);
	detach_link(lw, l);
	forget_link(lw, l);
}

static void on_dellink(struct ndc_link_watch *lw, int ifindex)
{
	struct link *l = find_link(lw, ifindex);

	if (!l)
		return;
	if (l->state == LINK_ATTACHED)
		ndc_info("fast path: %s (ifindex %d) is gone", l->name, ifindex);
	/* the kernel detached the tcx link with the interface; its pin would stay */
	if (l->egress_tcx)
		ndc_tcx_egress_unpin(lw->pin_dir, ifindex);
	forget_link(lw, l);
}

/* One RTM_NEWLINK/RTM_DELLINK message. */
static void on_message(struct ndc_link_watch *lw, const struct nlmsghdr *nh)
{
	const struct ifinfomsg *ifi = NLMSG_DATA(nh);
	int alen = (int)nh->nlmsg_len - (int)NLMSG_LENGTH(sizeof(*ifi));
	char name[IF_NAMESIZE] = "";

	if (nh->nlmsg_type == RTM_NEWTFILTER || nh->nlmsg_type == RTM_DELTFILTER) {
		on_filter(lw, nh);
		return;
	}
	if (alen < 0)
		return;
	if (nh->nlmsg_type == RTM_DELLINK) {
		on_dellink(lw, ifi->ifi_index);
		return;
	}
	if (nh->nlmsg_type != RTM_NEWLINK)
		return;
	for (const struct rtattr *rta = IFLA_RTA(ifi); RTA_OK(rta, alen);
	     rta = RTA_NEXT(rta, alen)) {
		if (rta->rta_type != IFLA_IFNAME)
			continue;
		size_t n = RTA_PAYLOAD(rta);
		if (n >= sizeof(name))
			n = sizeof(name) - 1;
		memcpy(name, RTA_DATA(rta), n);
		name[n] = '\0';
		break;
	}
	if (name[0])
		on_newlink(lw, ifi->ifi_index, name);
}

/*
 * Handles the messages in buf. Returns 1 when the dump is done (NLMSG_DONE), 0 to read on, or a
 * negative errno from an NLMSG_ERROR.
 */
static int on_messages(struct ndc_link_watch *lw, const uint8_t *buf, size_t len)
{
	int n = (int)len;

	for (const struct nlmsghdr *nh = (const void *)buf; NLMSG_OK(nh, n);
	     nh = NLMSG_NEXT(nh, n)) {
		if (nh->nlmsg_type == NLMSG_DONE)
			return 1;
		if (nh->nlmsg_type == NLMSG_ERROR) {
			const struct nlmsgerr *e = NLMSG_DATA(nh);

			if (nh->nlmsg_len < NLMSG_LENGTH(sizeof(*e)))
				return -EBADMSG;
			if (e->error)
				return e->error;
			continue;
		}
		on_message(lw, nh);
	}
	return 0;
}

static int nl_socket(unsigned int groups)
{
	struct sockaddr_nl sa = {.nl_family = AF_NETLINK, .nl_groups = groups};
	int rcvbuf = NL_RCVBUF;
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);

	if (fd < 0)
		return -errno;
	/* best effort: a smaller buffer still works, an overrun makes us dump again */
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

/* Every link now: on a socket of its own, so the dump never mixes with the multicast stream. */
static int dump_links(struct ndc_link_watch *lw)
{
	struct {
		struct nlmsghdr nh;
		struct ifinfomsg ifi;
	} req = {
	    .nh = {.nlmsg_len = NLMSG_LENGTH(sizeof(struct ifinfomsg)),
		   .nlmsg_type = RTM_GETLINK,
		   .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP,
		   .nlmsg_seq = 1},
	    .ifi = {.ifi_family = AF_UNSPEC},
	};
	struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
	int fd, r;

	fd = nl_socket(0);
	if (fd < 0)
		return fd;
	if (sendto(fd, &req, req.nh.nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0) {
		r = -errno;
		goto out;
	}
	for (;;) {
		ssize_t n = recv(fd, lw->buf, sizeof(lw->buf), 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			break;
		}
		if (n == 0) {
			r = -EPIPE;
			break;
		}
		r = on_messages(lw, lw->buf, (size_t)n);
		if (r != 0)
			break;
	}
	if (r == 1)
		r = 0;
out:
	close(fd);
	return r;
}

static void *watch_thread(void *arg)
{
	struct ndc_link_watch *lw = arg;
	struct pollfd pfd[2] = {{.fd = lw->nl_fd, .events = POLLIN},
				{.fd = lw->evt_fd, .events = POLLIN}};
	bool resync = false;

	for (;;) {
		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			ndc_err("fast path: link watch poll: %s", strerror(errno));
			return NULL;
		}
		if (pfd[1].revents)
			return NULL;
		for (;;) {
			ssize_t n = recv(lw->nl_fd, lw->buf, sizeof(lw->buf), MSG_DONTWAIT);

			if (n > 0) {
				on_messages(lw, lw->buf, (size_t)n);
				continue;
			}
			if (n < 0 && errno == EINTR)
				continue;
			/* Overrun: events were lost, the dump tells what is there now. */
			if (n < 0 && errno == ENOBUFS) {
				resync = true;
				continue;
			}
			break;
		}
		if (resync) {
			ndc_warn("fast path: link events lost, rescanning links");
			int r = dump_links(lw);
			if (r < 0)
				ndc_err("fast path: link dump: %s", strerror(-r));
			resync = r < 0; /* retried on the next event */
		}
	}
}

static uint32_t prog_id(int fd)
{
	struct bpf_prog_info info = {0};
	uint32_t len = sizeof(info);

	if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &len) < 0)
		return 0;
	return info.id;
}

int ndc_link_watch_start(const struct ndc_link_watch_opts *opts, struct ndc_link_watch **ret)
{
	struct ndc_link_watch *lw;
	int r;

	*ret = NULL;
	if ((opts->mode != NDC_FP_ATTACH_TC && opts->mode != NDC_FP_ATTACH_XDP) ||
	    opts->prog_fd < 0)
		return -EINVAL;
	lw = calloc(1, sizeof(*lw));
	if (!lw)
		return -ENOMEM;
	lw->mode = opts->mode;
	lw->order = opts->tc_order;
	lw->foreign = opts->foreign;
	lw->prog_fd = opts->prog_fd;
	lw->egress_fd = opts->egress_fd > 0 ? opts->egress_fd : -1;
	lw->ingress_fd = opts->ingress_fd > 0 ? opts->ingress_fd : -1;
	lw->prog_id = prog_id(lw->prog_fd);
	lw->egress_id = prog_id(lw->egress_fd);
	lw->ingress_id = prog_id(lw->ingress_fd);
	lw->ids_readable = ndc_tcx_ids_readable(lw->egress_id);
	lw->nl_fd = -1;
	lw->evt_fd = -1;
	if (opts->pin_dir && lw->egress_fd >= 0) {
		lw->pin_dir = strdup(opts->pin_dir);
		if (!lw->pin_dir) {
			r = -ENOMEM;
			goto fail;
		}
	}
	if (opts->n_patterns) {
		lw->patterns = calloc(opts->n_patterns, sizeof(*lw->patterns));
		if (!lw->patterns) {
			r = -ENOMEM;
			goto fail;
		}
	}
	for (size_t i = 0; i < opts->n_patterns; i++) {
		lw->patterns[i] = strdup(opts->patterns[i]);
		if (!lw->patterns[i]) {
			r = -ENOMEM;
			goto fail;
		}
		lw->n_patterns++;
	}
	lw->evt_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (lw->evt_fd < 0) {
		r = -errno;
		goto fail;
	}
	/* Subscribe before the dump: a link created in between shows up in one or both. */
	lw->nl_fd = nl_socket(RTMGRP_LINK | RTMGRP_TC);
	if (lw->nl_fd < 0) {
		r = lw->nl_fd;
		goto fail;
	}
	if (lw->pin_dir)
		ndc_tcx_egress_sweep(lw->pin_dir);
	r = dump_links(lw);
	if (r < 0)
		goto fail;
	r = -pthread_create(&lw->thread, NULL, watch_thread, lw);
	if (r < 0)
		goto fail;
	lw->thread_started = true;
	*ret = lw;
	return 0;
fail:
	ndc_link_watch_stop(lw, true);
	return r;
}

void ndc_link_watch_stop(struct ndc_link_watch *lw, bool detach)
{
	uint64_t one = 1;

	if (!lw)
		return;
	if (lw->thread_started) {
		if (write(lw->evt_fd, &one, sizeof(one)) < 0)
			ndc_err("fast path: cannot stop the link watch: %s", strerror(errno));
		pthread_join(lw->thread, NULL);
	}
	for (size_t i = 0; i < lw->n_links; i++) {
		if (detach)
			detach_link(lw, &lw->links[i]);
		/* without detach the pins keep our tcx links for a successor */
		tcx_link_close(lw, &lw->links[i], false);
		/* the gauge is what a running watch sees: a later one counts again */
		set_foreign(lw, &lw->links[i], 0);
	}
	if (lw->nl_fd >= 0)
		close(lw->nl_fd);
	if (lw->evt_fd >= 0)
		close(lw->evt_fd);
	for (size_t i = 0; i < lw->n_patterns; i++)
		free(lw->patterns[i]);
	free(lw->patterns);
	free(lw->links);
	free(lw->pin_dir);
	free(lw);
}
