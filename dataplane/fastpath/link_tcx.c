// SPDX-License-Identifier: MIT
/*
 * Fail-open's egress program in a tcx link (Linux 6.6), for the attach manager (link_watch.c):
 * the hook then runs it without the classifier chain a clsact filter goes through, which every
 * packet to the pod pays for (tests/bench/egress_hook_bench.sh; docs/bench/FASTPATH.md, session
 * 38). The link is pinned (PIN_DIR/tcx_egress_IFINDEX), so that it outlives the agent as a filter
 * does; a successor, or the next agent after a kill, opens the pin and swaps its program in
 * (BPF_LINK_UPDATE: at no instant is none attached, and no program is read by its id, which would
 * take CAP_SYS_ADMIN). It goes last among the tcx programs there and, like every tcx program,
 * before the clsact filters; the program lets every packet go on (TCX_NEXT).
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include <ndc/log.h>

#include "internal.h"

/* tcx (Linux 6.6); libbpf 1.1's and Linux 6.1's headers predate it */
#define NDC_BPF_TCX_EGRESS 47
#define NDC_BPF_LINK_TYPE_TCX 11
#define TCX_MAX 64	      /* programs on one tcx hook we look at */
#define TCX_OWN 8	      /* earlier agents' programs on one hook we detach */
#define TCX_PIN "tcx_egress_" /* + ifindex: the pins of our tcx links, in the pin directory */

static int pin_path(const char *pin_dir, int ifindex, char *out, size_t cap)
{
	int n = snprintf(out, cap, "%s/" TCX_PIN "%d", pin_dir, ifindex);

	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

/*
 * What the tcx link fd is: its program and interface (0: the interface is gone). libbpf 1.1's
 * and Linux 6.1's bpf_link_info have no tcx member: its ifindex and attach type are the union's
 * first two words, where the xdp and netns members have theirs.
 */
static int link_info(int fd, uint32_t *prog, uint32_t *ifindex)
{
	struct bpf_link_info info;
	uint32_t len = sizeof(info);

	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(fd, &info, &len) < 0)
		return -errno;
	if (info.type != NDC_BPF_LINK_TYPE_TCX || info.netns.attach_type != NDC_BPF_TCX_EGRESS)
		return -EINVAL;
	*prog = info.prog_id;
	*ifindex = info.xdp.ifindex;
	return 0;
}

bool ndc_tcx_ids_readable(uint32_t id)
{
	int fd = id ? bpf_prog_get_fd_by_id(id) : -1;

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

/*
 * Programs named ndc_* other than except attached to tcx egress of ifindex without a link (agents
 * of b0d9bba attached with BPF_PROG_ATTACH): detached. Their names are read by id, so only where
 * ids are readable (CAP_SYS_ADMIN); a link's program refuses the detach.
 */
static void detach_unlinked(int ifindex, uint32_t except)
{
	uint32_t ids[TCX_MAX], cnt = TCX_MAX;

	if (bpf_prog_query(ifindex, (enum bpf_attach_type)NDC_BPF_TCX_EGRESS, 0, NULL, ids, &cnt) <
	    0)
		return;
	for (uint32_t i = 0, n = 0; i < cnt && i < TCX_MAX && n < TCX_OWN; i++) {
		struct bpf_prog_info info = {0};
		uint32_t len = sizeof(info);
		int fd = ids[i] == except ? -1 : bpf_prog_get_fd_by_id(ids[i]);

		if (fd < 0)
			continue; /* ours, or detached meanwhile */
		if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0 &&
		    strncmp(info.name, "ndc_", 4) == 0 &&
		    bpf_prog_detach2(fd, ifindex, (enum bpf_attach_type)NDC_BPF_TCX_EGRESS) == 0) {
			ndc_info(
			    "fast path: ifindex %d egress: an earlier agent's tcx program removed",
			    ifindex);
			n++;
		}
		close(fd);
	}
}

int ndc_tcx_egress_place(const char *pin_dir, int ifindex, int prog_fd, uint32_t prog_id,
			 bool ids_readable, int *ret_link)
{
	uint32_t prog, at;
	char path[PATH_MAX];
	int fd, r;

	r = pin_path(pin_dir, ifindex, path, sizeof(path));
	if (r < 0)
		return r;
	fd = bpf_obj_get(path);
	if (fd >= 0) {
		if (link_info(fd, &prog, &at) == 0 && at == (uint32_t)ifindex &&
		    (prog == prog_id || bpf_link_update(fd, prog_fd, NULL) == 0))
			goto placed;
		/* another interface's that had this index, or not a link of ours: a new one */
		close(fd);
		if (unlink(path) < 0 && errno != ENOENT)
			return -errno;
	}
	fd = bpf_link_create(prog_fd, ifindex, (enum bpf_attach_type)NDC_BPF_TCX_EGRESS, NULL);
	if (fd < 0)
		return fd;
	if (bpf_obj_pin(fd, path) < 0) {
		r = -errno; /* unpinned it would go with us: no fail-open after us */
		close(fd);
		return r;
	}
placed:
	if (ids_readable)
		detach_unlinked(ifindex, prog_id);
	*ret_link = fd;
	return 0;
}

int ndc_tcx_egress_close(const char *pin_dir, int ifindex, int link_fd, uint32_t prog_id,
			 bool unpin)
{
	uint32_t prog = 0, at;
	char path[PATH_MAX];
	int r = 0;

	if (unpin) {
		r = pin_path(pin_dir, ifindex, path, sizeof(path));
		if (r == 0 && link_info(link_fd, &prog, &at) == 0 && prog != prog_id)
			r = -EEXIST; /* a successor's program: its link now */
		else if (r == 0 && unlink(path) < 0)
			r = -errno;
	}
	close(link_fd);
	return r;
}

void ndc_tcx_egress_unpin(const char *pin_dir, int ifindex)
{
	char path[PATH_MAX];

	if (pin_path(pin_dir, ifindex, path, sizeof(path)) == 0)
		unlink(path);
}

void ndc_tcx_egress_sweep(const char *pin_dir)
{
	char path[PATH_MAX];
	uint32_t prog, ifindex;
	struct dirent *e;
	DIR *d;
	int fd;

	d = opendir(pin_dir);
	if (!d)
		return;
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, TCX_PIN, strlen(TCX_PIN)) != 0 ||
		    snprintf(path, sizeof(path), "%s/%s", pin_dir, e->d_name) >= (int)sizeof(path))
			continue;
		fd = bpf_obj_get(path);
		if (fd < 0)
			continue;
		if (link_info(fd, &prog, &ifindex) == 0 && ifindex == 0 && unlink(path) == 0)
			ndc_info("fast path: %s: its interface is gone, unpinned", path);
		close(fd);
	}
	closedir(d);
}
