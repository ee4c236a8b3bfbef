// SPDX-License-Identifier: MIT
/*
 * The attach manager: an rtnetlink link watch (RTMGRP_LINK) on a thread of its own, plus a
 * RTM_GETLINK dump at start and after a multicast overrun. Every link whose name matches a
 * pattern gets the tc filter (clsact ingress, NDC_FP_TC_HANDLE/NDC_FP_TC_PRIO) or the XDP
 * program, plus the fail-open filters when given (tc egress; in XDP mode tc ingress too). The
 * kernel drops them with the link, so RTM_DELLINK only forgets it. The watch runs in the network
 * namespace of the thread that started it.
 *
 * Attaching replaces: a filter at our handle and priority, or our XDP program, is swapped in one
 * netlink request, so at no instant is nothing attached (an upgrade's successor takes over this
 * way). Detaching removes only what is still ours: a successor's program is left alone.
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
#include <linux/rtnetlink.h>
#include <net/if.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <ndc/log.h>

#include "internal.h"

#define NL_BUF 32768
#define NL_RCVBUF (1 << 20) /* a node creating hundreds of pods at once must not overrun it */

enum link_state { LINK_ATTACHED = 0, LINK_FAILED };

struct link {
	int ifindex;
	char name[IF_NAMESIZE];
	enum link_state state;
	bool own_hook;	    /* tc: we created the clsact qdisc */
	bool tc_failed;	    /* XDP mode: the fail-open tc filters did not go in */
	uint32_t xdp_flags; /* XDP: the mode it went in with */
};

struct ndc_link_watch {
	enum ndc_fp_attach mode;
	int prog_fd;
	int egress_fd;				 /* tc egress, or -1 */
	int ingress_fd;				 /* XDP mode: tc ingress beside XDP, or -1 */
	uint32_t prog_id, egress_id, ingress_id; /* to recognise our filters when detaching */
	size_t n_patterns;
	char **patterns;
	int nl_fd;  /* multicast RTMGRP_LINK */
	int evt_fd; /* eventfd: stop */
	pthread_t thread;
	bool thread_started;
	size_t n_links;
	size_t cap_links;
	struct link *links;
	uint8_t buf[NL_BUF];
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

static void forget_link(struct ndc_link_watch *lw, struct link *l)
{
	*l = lw->links[--lw->n_links];
}

static int tc_attach_one(struct link *l, enum bpf_tc_attach_point where, int fd)
{
	DECLARE_LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = l->ifindex, .attach_point = where);
	DECLARE_LIBBPF_OPTS(bpf_tc_opts, opts, .handle = NDC_FP_TC_HANDLE,
			    .priority = NDC_FP_TC_PRIO, .prog_fd = fd, .flags = BPF_TC_F_REPLACE);

	return bpf_tc_attach(&hook, &opts);
}

/* Removes our filter at where if the program in it is still prog_id. */
static int tc_detach_one(struct link *l, enum bpf_tc_attach_point where, uint32_t prog_id)
{
	DECLARE_LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = l->ifindex, .attach_point = where);
	DECLARE_LIBBPF_OPTS(bpf_tc_opts, opts, .handle = NDC_FP_TC_HANDLE,
			    .priority = NDC_FP_TC_PRIO);
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

static int attach_tc(struct ndc_link_watch *lw, struct link *l)
{
	DECLARE_LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = l->ifindex,
			    .attach_point = BPF_TC_INGRESS);
	int r;

	r = bpf_tc_hook_create(&hook);
	if (r < 0 && r != -EEXIST)
		return r;
	l->own_hook = r == 0;
	if (lw->mode == NDC_FP_ATTACH_TC)
		r = tc_attach_one(l, BPF_TC_INGRESS, lw->prog_fd);
	else
		r = lw->ingress_fd >= 0 ? tc_attach_one(l, BPF_TC_INGRESS, lw->ingress_fd) : 0;
	if (r == 0 && lw->egress_fd >= 0)
		r = tc_attach_one(l, BPF_TC_EGRESS, lw->egress_fd);
	if (r < 0 && l->own_hook) {
		hook.attach_point = BPF_TC_INGRESS | BPF_TC_EGRESS;
		bpf_tc_hook_destroy(&hook);
		l->own_hook = false;
	}
	return r;
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
		r = tc_detach_one(l, BPF_TC_INGRESS, lw->prog_id);
	else if (lw->ingress_fd >= 0)
		r = tc_detach_one(l, BPF_TC_INGRESS, lw->ingress_id);
	if (lw->egress_fd >= 0)
		e = tc_detach_one(l, BPF_TC_EGRESS, lw->egress_id);
	if (r == 0 && e == 0 && l->own_hook) {
		DECLARE_LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = l->ifindex,
				    .attach_point = BPF_TC_INGRESS | BPF_TC_EGRESS);

		/* Both directions: that deletes the clsact qdisc we created. */
		r = bpf_tc_hook_destroy(&hook);
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
		ndc_info("fast path: attached tc ingress%s to %s (ifindex %d)",
			 lw->egress_fd >= 0 ? " and egress" : "", name, ifindex);
	else
		ndc_info("fast path: attached XDP (%s mode) to %s (ifindex %d)",
			 l->xdp_flags == XDP_FLAGS_DRV_MODE ? "native" : "generic", name, ifindex);
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
	forget_link(lw, l);
}

/* One RTM_NEWLINK/RTM_DELLINK message. */
static void on_message(struct ndc_link_watch *lw, const struct nlmsghdr *nh)
{
	const struct ifinfomsg *ifi = NLMSG_DATA(nh);
	int alen = (int)nh->nlmsg_len - (int)NLMSG_LENGTH(sizeof(*ifi));
	char name[IF_NAMESIZE] = "";

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
	lw->prog_fd = opts->prog_fd;
	lw->egress_fd = opts->egress_fd > 0 ? opts->egress_fd : -1;
	lw->ingress_fd = opts->ingress_fd > 0 ? opts->ingress_fd : -1;
	lw->prog_id = prog_id(lw->prog_fd);
	lw->egress_id = prog_id(lw->egress_fd);
	lw->ingress_id = prog_id(lw->ingress_fd);
	lw->nl_fd = -1;
	lw->evt_fd = -1;
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
	lw->nl_fd = nl_socket(RTMGRP_LINK);
	if (lw->nl_fd < 0) {
		r = lw->nl_fd;
		goto fail;
	}
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
	for (size_t i = 0; detach && i < lw->n_links; i++)
		detach_link(lw, &lw->links[i]);
	if (lw->nl_fd >= 0)
		close(lw->nl_fd);
	if (lw->evt_fd >= 0)
		close(lw->evt_fd);
	for (size_t i = 0; i < lw->n_patterns; i++)
		free(lw->patterns[i]);
	free(lw->patterns);
	free(lw->links);
	free(lw);
}
