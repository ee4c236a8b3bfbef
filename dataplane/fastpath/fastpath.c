// SPDX-License-Identifier: MIT
/*
 * The fast path's loader, pins, config and publisher. The attach manager is link_watch.c, the
 * answer table's layout and writer table.c.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/statfs.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <linux/membarrier.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <ndc/ip.h>
#include <ndc/log.h>

#include "fastpath/fastpath.h"
#include "fastpath/fastpath_test.h"
#include "internal.h"
#include "ndc_fastpath.skel.h"

#define DEFAULT_MAX_ENTRIES 65536
#define NMAPS 6			   /* maps_of */
#define BPF_FS_MAGIC_NR 0xcafe4a11 /* linux/magic.h BPF_FS_MAGIC */

/* Capability numbers (linux/capability.h), read from /proc/self/status CapEff. */
#define CAP_NET_ADMIN_NR 12
#define CAP_SYS_ADMIN_NR 21
#define CAP_BPF_NR 39

/* ---------------------------------------------------------------------------------------------
 * Loader.
 */

/* The skeleton over another build's bytes (opts->object): ndc_fastpath__open with its data. */
static struct ndc_fastpath *open_object(const struct iovec *obj)
{
	struct ndc_fastpath *skel = calloc(1, sizeof(*skel));
	int err = skel ? ndc_fastpath__create_skeleton(skel) : -ENOMEM;

	if (!err) {
		skel->skeleton->data = obj->iov_base;
		skel->skeleton->data_sz = obj->iov_len;
		err = bpf_object__open_skeleton(skel->skeleton, NULL);
	}
	if (err) {
		ndc_fastpath__destroy(skel);
		errno = -err;
		return NULL;
	}
	return skel;
}

/* Effective capabilities of this process, from /proc/self/status (no libcap dependency). */
static uint64_t effective_caps(void)
{
	char line[256];
	unsigned long long caps = 0;
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &caps) == 1)
			break;
	fclose(f);
	return caps;
}

static bool have_privileges(void)
{
	uint64_t caps = effective_caps();

	return (caps & (1ull << CAP_NET_ADMIN_NR)) &&
	       (caps & ((1ull << CAP_BPF_NR) | (1ull << CAP_SYS_ADMIN_NR)));
}

/* mkdir -p; *ret_made says whether the last component was created by us. */
static int mkdir_p(const char *path, bool *ret_made)
{
	char tmp[PATH_MAX];
	size_t n = strlen(path);

	*ret_made = false;
	if (n == 0 || n >= sizeof(tmp))
		return -EINVAL;
	memcpy(tmp, path, n + 1);
	while (n > 1 && tmp[n - 1] == '/')
		tmp[--n] = '\0';
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, 0700) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(tmp, 0700) == 0) {
		*ret_made = true;
		return 0;
	}
	return errno == EEXIST ? 0 : -errno;
}

/*
 * The maps kept per CPU by index (bpf/ndc_fastpath.bpf.c, ndc_scratch; abi.h, ndc_clients): one
 * value, or NDC_FP_CLIENTS_MAX slots, for each possible CPU.
 */
static int size_per_cpu(struct ndc_fastpath *skel)
{
	int ncpu = libbpf_num_possible_cpus(), r;

	if (ncpu <= 0)
		return ncpu < 0 ? ncpu : -EINVAL;
	if ((unsigned int)ncpu > UINT32_MAX / NDC_FP_CLIENTS_MAX)
		return -E2BIG;
	r = bpf_map__set_max_entries(skel->maps.ndc_scratch, (uint32_t)ncpu);
	if (r == 0)
		r = bpf_map__set_max_entries(skel->maps.ndc_clients,
					     (uint32_t)ncpu * NDC_FP_CLIENTS_MAX);
	return r;
}

static struct bpf_map *const *maps_of(struct ndc_fastpath *skel, struct bpf_map *out[NMAPS])
{
	out[0] = skel->maps.ndc_answers;
	out[1] = skel->maps.ndc_big;
	out[2] = skel->maps.ndc_nx;
	out[3] = skel->maps.ndc_config;
	out[4] = skel->maps.ndc_counters;
	out[5] = skel->maps.ndc_flows;
	return out;
}

static int pin_path(const struct ndc_fp *fp, const struct bpf_map *m, char *out, size_t cap)
{
	int n = snprintf(out, cap, "%s/%s", fp->pin_dir, bpf_map__name(m));

	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

/* The id of the map pinned at path, 0 if none. */
static uint32_t pinned_id(const char *path)
{
	struct bpf_map_info info = {0};
	uint32_t len = sizeof(info);
	int fd = bpf_obj_get(path);

	if (fd < 0)
		return 0;
	if (bpf_obj_get_info_by_fd(fd, &info, &len) < 0)
		info.id = 0;
	close(fd);
	return info.id;
}

/*
 * Removes the pins that still name our maps. A successor that pinned its own in their place, or
 * a second agent that failed to start, keeps its hands off the other's.
 */
static void unpin_ours(struct ndc_fp *fp)
{
	struct bpf_map *maps[NMAPS];
	char path[PATH_MAX];

	maps_of(fp->skel, maps);
	for (int i = 0; i < NMAPS; i++) {
		struct bpf_map_info info = {0};
		uint32_t len = sizeof(info);

		if (pin_path(fp, maps[i], path, sizeof(path)) < 0 ||
		    bpf_obj_get_info_by_fd(bpf_map__fd(maps[i]), &info, &len) < 0 ||
		    pinned_id(path) != info.id)
			continue;
		if (unlink(path) < 0 && errno != ENOENT)
			ndc_warn("fast path: cannot remove pin %s: %s", path, strerror(errno));
	}
}

static void unpin_all(struct ndc_fp *fp)
{
	struct bpf_map *maps[NMAPS];
	char path[PATH_MAX];

	maps_of(fp->skel, maps);
	for (int i = 0; i < NMAPS; i++)
		if (pin_path(fp, maps[i], path, sizeof(path)) == 0 && unlink(path) < 0 &&
		    errno != ENOENT)
			ndc_warn("fast path: cannot remove pin %s: %s", path, strerror(errno));
}

static int pin_all(struct ndc_fp *fp)
{
	struct bpf_map *maps[NMAPS];
	char path[PATH_MAX];
	int r;

	maps_of(fp->skel, maps);
	/*
	 * A previous run's (or the predecessor's) pins give way to ours: the pins are for
	 * inspection; the programs attached hold the maps they use.
	 */
	unpin_all(fp);
	for (int i = 0; i < NMAPS; i++) {
		r = pin_path(fp, maps[i], path, sizeof(path));
		if (r == 0)
			r = bpf_map__pin(maps[i], path);
		if (r < 0) {
			ndc_err("fast path: cannot pin %s: %s", path, strerror(-r));
			unpin_all(fp);
			return r;
		}
	}
	fp->pinned = true;
	return 0;
}

/* Mounts bpffs at dir unless it already is; failures show up in check_bpffs later. */
static void mount_bpffs(const char *dir)
{
	struct statfs st;

	if (statfs(dir, &st) == 0 && (uint32_t)st.f_type == BPF_FS_MAGIC_NR)
		return;
	if (mount("bpf", dir, "bpf", 0, "mode=0700") < 0)
		ndc_warn("fast path: %s is not bpffs and mounting it failed: %s", dir,
			 strerror(errno));
	else
		ndc_info("fast path: mounted bpffs at %s", dir);
}

/* dir is /sys/fs/bpf or a path below it. */
static bool under_sys_fs_bpf(const char *dir)
{
	static const char root[] = "/sys/fs/bpf";

	return strncmp(dir, root, sizeof(root) - 1) == 0 &&
	       (dir[sizeof(root) - 1] == '\0' || dir[sizeof(root) - 1] == '/');
}

static int check_bpffs(const char *dir)
{
	struct statfs st;

	if (statfs(dir, &st) < 0)
		return -errno;
	if ((uint32_t)st.f_type != BPF_FS_MAGIC_NR) {
		ndc_err("fast path: %s is not on bpffs (mount -t bpf bpf /sys/fs/bpf)", dir);
		return -EINVAL;
	}
	return 0;
}

/*
 * The fail-open flows of the program we will replace (an earlier agent's, pinned in pin_dir): our
 * egress program must still recognise the replies to queries the kernel sent upstream while no
 * agent ran, or they would reach the pod with the upstream's address as their source. Taken only
 * when the pinned map is of the same layout; else we start with an empty one.
 */
static void adopt_flows(struct ndc_fp *fp)
{
	struct bpf_map *m = fp->skel->maps.ndc_flows;
	struct bpf_map_info info = {0};
	uint32_t len = sizeof(info);
	char path[PATH_MAX];
	int fd;

	if (pin_path(fp, m, path, sizeof(path)) < 0)
		return;
	fd = bpf_obj_get(path);
	if (fd < 0)
		return;
	if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0 && info.type == bpf_map__type(m) &&
	    info.key_size == bpf_map__key_size(m) && info.value_size == bpf_map__value_size(m) &&
	    info.max_entries == bpf_map__max_entries(m) && bpf_map__reuse_fd(m, fd) == 0)
		ndc_info("fast path: adopted the fail-open flows of the previous agent");
	close(fd); /* reuse_fd took its own copy */
}

/* ---------------------------------------------------------------------------------------------
 * The answer table's chunks: inner maps of ndc_answers and ndc_big (abi.h, "The answer table").
 */

static size_t page_round(size_t n)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	return (n + page - 1) / page * page;
}

static int ref_push(struct chunk_ref **v, size_t *n, size_t *cap, struct chunk_ref r)
{
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 64;
		struct chunk_ref *nv = realloc(*v, c * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		*v = nv;
		*cap = c;
	}
	(*v)[(*n)++] = r;
	return 0;
}

static int chunk_add(void *ctx, enum ndc_fp_chunk_kind kind, uint32_t idx, void **ret)
{
	struct ndc_fp *fp = ctx;
	bool slots = kind == NDC_FP_CHUNK_SLOTS;
	LIBBPF_OPTS(bpf_map_create_opts, o, .map_flags = BPF_F_MMAPABLE);
	size_t len = page_round(ndc_fp_chunk_bytes(kind));
	int fd, r;
	void *p;

	fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, slots ? "ndc_chunk" : "ndc_bigchunk",
			    sizeof(uint32_t),
			    slots ? sizeof(struct ndc_fp_slot) : sizeof(struct ndc_fp_ext),
			    slots ? NDC_FP_CHUNK_ENTRIES : NDC_FP_BIG_CHUNK, &o);
	if (fd < 0) {
		r = -errno;
		goto fail;
	}
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		r = -errno;
		close(fd);
		goto fail;
	}
	r = ref_push(&fp->pend, &fp->n_pend, &fp->cap_pend,
		     (struct chunk_ref){.kind = kind, .idx = idx, .fd = fd});
	if (r) {
		munmap(p, len);
		close(fd);
		goto fail;
	}
	*ret = p;
	return 0;
fail:
	ndc_err("fast path: cannot add a chunk to the answer table: %s", strerror(-r));
	return r;
}

/*
 * Puts every chunk added since the last commit in its outer map: one batch per outer map, so one
 * RCU grace period each (an entry the reaper was to clear is overwritten instead). The mapping and
 * the outer map hold each chunk from then on.
 */
static int chunk_commit(void *ctx)
{
	struct ndc_fp *fp = ctx;
	int r = 0;

	pthread_mutex_lock(&fp->reap_lock);
	/* the reaper clears one entry at a time outside the lock: not one of ours, then */
	for (size_t i = 0; i < fp->n_pend && fp->reaping.fd == 0;) {
		if (fp->pend[i].kind == fp->reaping.kind && fp->pend[i].idx == fp->reaping.idx) {
			pthread_cond_wait(&fp->reap_cond, &fp->reap_lock);
			i = 0;
			continue;
		}
		i++;
	}
	for (int kind = 0; kind < 2; kind++) {
		int outer = kind == NDC_FP_CHUNK_SLOTS ? fp->answers_fd : fp->big_fd;
		uint32_t keys[256], n = 0, count;
		int vals[256];

		for (size_t i = 0; i <= fp->n_pend; i++) {
			if (i < fp->n_pend && (int)fp->pend[i].kind == kind) {
				const struct chunk_ref *c = &fp->pend[i];

				/* an entry still to clear: the update releases its old chunk */
				for (size_t j = 0; j < fp->n_reap; j++)
					if (fp->reap[j].kind == c->kind &&
					    fp->reap[j].idx == c->idx) {
						fp->reap[j] = fp->reap[--fp->n_reap];
						break;
					}
				keys[n] = c->idx;
				vals[n++] = c->fd;
			}
			if (n && (n == 256 || i == fp->n_pend)) {
				count = n;
				if (bpf_map_update_batch(outer, keys, vals, &count, NULL) < 0) {
					/* no batch for this map type here: one by one */
					for (uint32_t k = 0; !r && k < n; k++)
						if (bpf_map_update_elem(outer, &keys[k], &vals[k],
									0))
							r = -errno;
				}
				n = 0;
			}
		}
	}
	pthread_mutex_unlock(&fp->reap_lock);
	for (size_t i = 0; i < fp->n_pend; i++)
		close(fp->pend[i].fd);
	fp->n_pend = 0;
	if (r)
		ndc_err("fast path: cannot put chunks in the answer table: %s", strerror(-r));
	return r;
}

static void chunk_drop(void *ctx, enum ndc_fp_chunk_kind kind, uint32_t idx, void *p)
{
	struct ndc_fp *fp = ctx;

	munmap(p, page_round(ndc_fp_chunk_bytes(kind)));
	pthread_mutex_lock(&fp->reap_lock);
	/* no memory for the list: the entry stays until a commit overwrites it */
	if (ref_push(&fp->reap, &fp->n_reap, &fp->cap_reap,
		     (struct chunk_ref){.kind = kind, .idx = idx, .fd = -1}) == 0)
		pthread_cond_signal(&fp->reap_cond);
	pthread_mutex_unlock(&fp->reap_lock);
}

/* Clears the outer entries of dropped chunks; the kernel frees a chunk with its last entry. */
static void *reaper_main(void *arg)
{
	struct ndc_fp *fp = arg;

	pthread_mutex_lock(&fp->reap_lock);
	while (!fp->reap_stop) {
		struct chunk_ref c;

		if (!fp->n_reap) {
			pthread_cond_wait(&fp->reap_cond, &fp->reap_lock);
			continue;
		}
		c = fp->reap[--fp->n_reap];
		/* outside the lock (a grace period long): a commit to this entry waits for it */
		c.fd = 0;
		fp->reaping = c;
		pthread_mutex_unlock(&fp->reap_lock);
		/* an entry already cleared (none there) is fine */
		bpf_map_delete_elem(c.kind == NDC_FP_CHUNK_SLOTS ? fp->answers_fd : fp->big_fd,
				    &c.idx);
		pthread_mutex_lock(&fp->reap_lock);
		fp->reaping.fd = -1;
		pthread_cond_broadcast(&fp->reap_cond);
	}
	pthread_mutex_unlock(&fp->reap_lock);
	return NULL;
}

static void reaper_stop(struct ndc_fp *fp)
{
	if (fp->reaper_started) {
		pthread_mutex_lock(&fp->reap_lock);
		fp->reap_stop = true;
		pthread_cond_signal(&fp->reap_cond);
		pthread_mutex_unlock(&fp->reap_lock);
		pthread_join(fp->reaper, NULL);
		fp->reaper_started = false;
	}
	for (size_t i = 0; i < fp->n_pend; i++)
		close(fp->pend[i].fd);
	free(fp->pend);
	free(fp->reap);
	fp->pend = fp->reap = NULL;
	fp->n_pend = fp->n_reap = 0;
}

static void set_geom(void *ctx, uint64_t geom)
{
	struct ndc_fp *fp = ctx;

	__atomic_store_n(&fp->cfg->geom, geom, __ATOMIC_RELEASE);
}

/* The table changed (abi.h, config gen): one writer, under the table's lock; release after it. */
static void table_changed(void *ctx)
{
	struct ndc_fp *fp = ctx;

	__atomic_store_n(&fp->cfg->gen, fp->cfg->gen + 1, __ATOMIC_RELEASE);
}

/*
 * tc and XDP programs run inside RCU read-side sections, so one grace period after the geom
 * changed none can still be in the old half. MEMBARRIER_CMD_GLOBAL waits for one
 * (synchronize_rcu); where it is refused (nohz_full), a wait far longer than a program runs.
 */
static void wait_readers(void *ctx)
{
	static bool warned;

	(void)ctx;
	if (syscall(__NR_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) == 0)
		return;
	if (!warned) {
		warned = true;
		ndc_warn("fast path: membarrier(MEMBARRIER_CMD_GLOBAL) failed (%s): waiting 100 ms "
			 "instead when the answer table is resized",
			 strerror(errno));
	}
	usleep(100000);
}

static const struct ndc_fp_table_ops table_ops = {.add = chunk_add,
						  .commit = chunk_commit,
						  .drop = chunk_drop,
						  .set_geom = set_geom,
						  .wait_readers = wait_readers,
						  .changed = table_changed};

/*
 * The scratch, read-only: the answer core's counts are in it (ndc_fastpath_counters). An
 * mmapable array's values are page-aligned as a whole and value_size apart (a multiple of 64).
 */
static int map_scratch(struct ndc_fp *fp)
{
	const struct bpf_map *m = fp->skel->maps.ndc_scratch;
	uint32_t at = fp->skel->rodata->ndc_scratch_counts_at;
	void *p;

	fp->scratch_cpus = bpf_map__max_entries(m);
	fp->scratch_stride = bpf_map__value_size(m);
	/* the sum on the left: a difference would wrap for a value under the counters' size */
	if (fp->scratch_stride % 8 || at % 8 ||
	    (size_t)at + NDC_FP_COUNTER_MAX * sizeof(uint64_t) > fp->scratch_stride)
		return -EINVAL; /* never: the object and this loader are built together */
	fp->counts_at = at;
	fp->scratch_len = page_round((size_t)fp->scratch_cpus * fp->scratch_stride);
	p = mmap(NULL, fp->scratch_len, PROT_READ, MAP_SHARED, bpf_map__fd(m), 0);
	if (p == MAP_FAILED)
		return -errno;
	fp->scratch = p;
	return 0;
}

/*
 * Unmaps the table (its chunks stay with the programs and pins that hold them: a successor's
 * handover keeps answering from them), the config, ndc_nx and the scratch.
 */
static void maps_unmap(struct ndc_fp *fp)
{
	for (int i = 0; i < 2; i++) {
		struct ndc_fp_half *h = &fp->table.h[i];

		for (uint32_t c = 0; c < h->n_chunks; c++)
			munmap(h->chunks[c], page_round(ndc_fp_chunk_bytes(NDC_FP_CHUNK_SLOTS)));
		for (uint32_t c = 0; c < h->n_big_chunks; c++)
			munmap(h->bigs[c], page_round(ndc_fp_chunk_bytes(NDC_FP_CHUNK_BIG)));
		h->n_chunks = h->n_big_chunks = 0;
	}
	ndc_fp_table_forget(&fp->table);
	if (fp->scratch)
		munmap((void *)fp->scratch, fp->scratch_len);
	fp->scratch = NULL;
	fp->scratch_cpus = 0; /* ndc_fastpath_counters reads no scratch */
	if (fp->nx && fp->nx != MAP_FAILED)
		munmap(fp->nx, page_round(NDC_FP_NX_ENTRIES * sizeof(*fp->nx)));
	if (fp->cfg && fp->cfg != MAP_FAILED)
		munmap(fp->cfg, page_round(sizeof(*fp->cfg)));
	fp->nx = NULL;
	fp->cfg = NULL;
}

/*
 * The outer maps' entries per half for max_entries keys: slot chunks for them at half load (a
 * rebuild after a failed walk may want more than the target load's), big answers of the most
 * records for half of them. Only pointers: chunks come as needed.
 */
static void outer_sizes(uint32_t max_entries, uint32_t *ret_chunks, uint32_t *ret_bigs)
{
	uint64_t slots = (uint64_t)max_entries * 2;

	*ret_chunks = (uint32_t)((slots + NDC_FP_CHUNK_BUCKETS * NDC_FP_BUCKET - 1) /
				 (NDC_FP_CHUNK_BUCKETS * NDC_FP_BUCKET)) +
		      1;
	*ret_bigs = (uint32_t)(((uint64_t)max_entries / 2 * NDC_FP_EXT_MAX + NDC_FP_BIG_CHUNK - 1) /
			       NDC_FP_BIG_CHUNK) +
		    1;
}

int ndc_fastpath_config_of(const struct ndc_fastpath_opts *opts, struct ndc_fp_config *ret)
{
	const struct ndc_fp_config_opts co = {
	    .n_addrs = opts->n_addrs,
	    .addrs = opts->addrs,
	    .port = opts->port,
	    .zone = opts->zone,
	    .zone_len = opts->zone_len,
	    .pass = opts->pass,
	    .pass_len = opts->pass_len,
	    .redirect_peer = opts->redirect_peer,
	    .failopen = opts->failopen,
	    .n_upstreams = opts->n_upstreams,
	    .upstreams = opts->upstreams,
	};

	int r;

	r = ndc_fastpath_config(&co, ret); /* dataplane/base/entry.c: the DPDK table's too */
	if (r < 0)
		return r;
	return ndc_fp_observe_words(opts->clients, opts->kernel_sample, &ret->flags, &ret->sample);
}

int ndc_fastpath_open(const struct ndc_fastpath_opts *opts, struct ndc_fp **ret)
{
	const char *dir = opts->pin_dir ? opts->pin_dir : NDC_FP_PIN_DIR;
	uint32_t key = 0, max_entries, half_chunks, half_bigs;
	struct ndc_fp_config cfg;
	struct ndc_fp *fp;
	int r;

	*ret = NULL;
	if (opts->attach > NDC_FP_ATTACH_NONE || strlen(dir) + 32 > PATH_MAX)
		return -EINVAL;
	if (!have_privileges()) {
		ndc_err(
		    "fast path: loading BPF needs CAP_BPF (or CAP_SYS_ADMIN) and CAP_NET_ADMIN; "
		    "run as root or use the socket dataplane");
		return -EPERM;
	}
	r = ndc_fastpath_config_of(opts, &cfg);
	if (r < 0)
		return r;
	fp = calloc(1, sizeof(*fp));
	if (!fp)
		return -ENOMEM;
	pthread_mutex_init(&fp->reap_lock, NULL);
	pthread_cond_init(&fp->reap_cond, NULL);
	fp->reaping.fd = -1;
	snprintf(fp->pin_dir, sizeof(fp->pin_dir), "%s", dir);

	/*
	 * The default pin directory, and any under /sys/fs/bpf, need bpffs there. A DaemonSet
	 * mounts the host's; where nobody did (a fresh mount namespace, `ip netns exec`) mount one,
	 * as agents do. Elsewhere the directory given is the caller's to mount (check_bpffs says
	 * so).
	 */
	if (!opts->pin_dir || under_sys_fs_bpf(dir))
		mount_bpffs("/sys/fs/bpf");
	r = mkdir_p(fp->pin_dir, &fp->made_dir);
	if (r < 0) {
		ndc_err("fast path: cannot create %s: %s", fp->pin_dir, strerror(-r));
		goto fail;
	}
	r = check_bpffs(fp->pin_dir);
	if (r < 0)
		goto fail_dir;

	fp->skel = opts->object ? open_object(opts->object) : ndc_fastpath__open();
	if (!fp->skel) {
		r = -errno;
		ndc_err("fast path: cannot open the BPF object: %s", strerror(-r));
		goto fail_dir;
	}
	max_entries = opts->max_entries ? opts->max_entries : DEFAULT_MAX_ENTRIES;
	if (max_entries > UINT32_MAX / 4) {
		r = -EINVAL;
		goto fail_skel;
	}
	/* room in the outer maps for the cap; chunks are added as the table needs them */
	outer_sizes(max_entries, &half_chunks, &half_bigs);
	r = bpf_map__set_max_entries(fp->skel->maps.ndc_answers, 2 * half_chunks);
	if (r == 0)
		r = bpf_map__set_max_entries(fp->skel->maps.ndc_big, 2 * half_bigs);
	if (r == 0)
		r = size_per_cpu(fp->skel);
	if (r < 0)
		goto fail_skel;
	cfg.half_chunks = half_chunks;
	cfg.half_bigs = half_bigs;
	/* the home key, a constant to the JIT; the config has it for other readers */
	if (getrandom(&cfg.home_key, sizeof(cfg.home_key), 0) != sizeof(cfg.home_key)) {
		r = -errno;
		goto fail_skel;
	}
	fp->skel->rodata->ndc_home_key = cfg.home_key;
	adopt_flows(fp);
	r = ndc_fastpath__load(fp->skel);
	if (r < 0) {
		ndc_err("fast path: cannot load the BPF programs: %s", strerror(-r));
		goto fail_skel;
	}
	fp->config_fd = bpf_map__fd(fp->skel->maps.ndc_config);
	fp->counters_fd = bpf_map__fd(fp->skel->maps.ndc_counters);
	fp->samples =
	    ring_buffer__new(bpf_map__fd(fp->skel->maps.ndc_samples), ndc_fp_on_sample, fp, NULL);
	if (!fp->samples) {
		r = -errno;
		ndc_err("fast path: cannot map the sampled answers' ring: %s", strerror(-r));
		goto fail_skel;
	}
	fp->answers_fd = bpf_map__fd(fp->skel->maps.ndc_answers);
	fp->big_fd = bpf_map__fd(fp->skel->maps.ndc_big);

	fp->watch_opts.mode = opts->attach;
	fp->watch_opts.n_patterns = opts->n_patterns;
	fp->watch_opts.patterns = opts->patterns;
	fp->watch_opts.tc_order = opts->tc_order;
	fp->watch_opts.foreign = &fp->foreign;
	r = bpf_map_update_elem(fp->config_fd, &key, &cfg, BPF_ANY);
	if (r < 0) {
		ndc_err("fast path: cannot write the config: %s", strerror(-r));
		goto fail_skel;
	}
	fp->cfg = mmap(NULL, page_round(sizeof(*fp->cfg)), PROT_READ | PROT_WRITE, MAP_SHARED,
		       fp->config_fd, 0);
	fp->nx = fp->cfg == MAP_FAILED ? MAP_FAILED
				       : mmap(NULL, page_round(NDC_FP_NX_ENTRIES * sizeof(*fp->nx)),
					      PROT_READ | PROT_WRITE, MAP_SHARED,
					      bpf_map__fd(fp->skel->maps.ndc_nx), 0);
	if (fp->cfg == MAP_FAILED || fp->nx == MAP_FAILED) {
		r = -errno;
		ndc_err("fast path: cannot map the config and NXDOMAIN maps: %s", strerror(-r));
		goto fail_skel;
	}
	r = map_scratch(fp);
	if (r < 0) {
		ndc_err("fast path: cannot map the per-CPU scratch: %s", strerror(-r));
		goto fail_skel;
	}
	r = pthread_create(&fp->reaper, NULL, reaper_main, fp);
	if (r) {
		r = -r;
		ndc_err("fast path: cannot start the table's reaper: %s", strerror(-r));
		goto fail_skel;
	}
	fp->reaper_started = true;
	r = ndc_fp_table_init(&fp->table, &table_ops, fp, max_entries, half_chunks, half_bigs,
			      cfg.home_key);
	if (r < 0) {
		ndc_err("fast path: cannot make the answer table: %s", strerror(-r));
		goto fail_skel;
	}
	ndc_fp_table_set_sfx(&fp->table, &cfg.sfx);
	if (!opts->defer_attach) {
		r = ndc_fastpath_attach(fp);
		if (r < 0)
			goto fail_skel;
	}
	*ret = fp;
	return 0;

fail_skel:
	reaper_stop(fp);
	maps_unmap(fp);
	ring_buffer__free(fp->samples);
	ndc_fastpath__destroy(fp->skel);
fail_dir:
	if (fp->made_dir)
		rmdir(fp->pin_dir);
fail:
	pthread_cond_destroy(&fp->reap_cond);
	pthread_mutex_destroy(&fp->reap_lock);
	free(fp);
	return r;
}

int ndc_fastpath_attach(struct ndc_fp *fp)
{
	struct ndc_link_watch_opts lo = fp->watch_opts;
	int r;

	if (fp->watch)
		return 0;
	r = pin_all(fp);
	if (r < 0)
		return r;
	if (lo.mode == NDC_FP_ATTACH_NONE)
		return 0;
	lo.prog_fd = ndc_fastpath_prog_fd(fp, lo.mode);
	lo.egress_fd = bpf_program__fd(fp->skel->progs.ndc_tc_egress);
	lo.pin_dir = fp->pin_dir;
	lo.ingress_fd =
	    lo.mode == NDC_FP_ATTACH_XDP ? bpf_program__fd(fp->skel->progs.ndc_tc_failopen) : -1;
	r = ndc_link_watch_start(&lo, &fp->watch);
	if (r < 0) {
		ndc_err("fast path: cannot start the link watch: %s", strerror(-r));
		unpin_ours(fp);
		fp->pinned = false;
	}
	return r;
}

void ndc_fastpath_quiet(struct ndc_fp *fp)
{
	if (!fp)
		return;
	ndc_link_watch_stop(fp->watch, false);
	fp->watch = NULL;
}

static void fp_free(struct ndc_fp *fp, bool detach, bool unpin)
{
	ndc_link_watch_stop(fp->watch, detach);
	if (fp->pinned && unpin)
		unpin_ours(fp);
	reaper_stop(fp);
	maps_unmap(fp);
	ring_buffer__free(fp->samples);
	ndc_fastpath__destroy(fp->skel);
	/* Only when empty: someone may keep their own pins next to ours. */
	if (unpin && rmdir(fp->pin_dir) < 0 && errno != ENOTEMPTY && errno != EEXIST &&
	    errno != ENOENT && errno != EBUSY)
		ndc_warn("fast path: cannot remove %s: %s", fp->pin_dir, strerror(errno));
	pthread_cond_destroy(&fp->reap_cond);
	pthread_mutex_destroy(&fp->reap_lock);
	free(fp);
}

void ndc_fastpath_close(struct ndc_fp *fp)
{
	if (fp)
		fp_free(fp, true, true);
}

void ndc_fastpath_hand_off(struct ndc_fp *fp)
{
	if (fp)
		fp_free(fp, true, false);
}

void ndc_fastpath_release(struct ndc_fp *fp)
{
	if (fp)
		fp_free(fp, false, false);
}

/* ---------------------------------------------------------------------------------------------
 * Publisher.
 */

static uint64_t monotonic_ns(void)
{
	struct timespec ts;

	/* bpf_ktime_get_ns() is CLOCK_MONOTONIC: expiry compares against it in the kernel. */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int ndc_fastpath_publish(struct ndc_fp *fp, const uint8_t *lname, size_t nlen, uint16_t qtype,
			 const struct ndc_answer *a, uint32_t ttl_s)
{
	struct ndc_fp_key key;
	struct ndc_fp_value val;
	int r = ndc_fastpath_entry(lname, nlen, qtype, a, ttl_s, &key, &val);

	/*
	 * A key held by another name (a hash collision, abi.h) is -ENOSPC, as for a full table, so
	 * that callers keep the name in user space and do not count it as covered. The first name
	 * stays: evicting it would leave it uncovered instead.
	 */
	return r ? r : ndc_fp_table_put(&fp->table, &key, &val, false);
}

int ndc_fastpath_publish_pass(struct ndc_fp *fp, const uint8_t *lname, size_t nlen)
{
	return ndc_fastpath_publish(fp, lname, nlen, NDC_FP_QTYPE_OTHER, NULL, 0);
}

int ndc_fastpath_unpublish_expired(struct ndc_fp *fp, const struct ndc_fp_key *k)
{
	/* Whoever's name the entry holds: an expired entry is only ever passed by the kernel. */
	return ndc_fp_table_del(&fp->table, k, NULL, 0, monotonic_ns());
}

int ndc_fastpath_unpublish(struct ndc_fp *fp, const uint8_t *lname, size_t nlen, uint16_t qtype)
{
	struct ndc_fp_key key;
	int r;

	r = ndc_fastpath_key(lname, nlen, qtype, &key);
	if (r < 0)
		return r;
	/*
	 * Another name's entry at this key (publish refused ours) is not ours to remove: without
	 * it that name would miss, and once synced read as NXDOMAIN.
	 */
	return ndc_fp_table_del(&fp->table, &key, lname, nlen, 0);
}

int ndc_fastpath_set_nx(struct ndc_fp *fp, const struct ndc_answer *nx)
{
	struct ndc_fp_value val;
	int r;

	r = ndc_fastpath_nx_value(nx, &val);
	if (r < 0)
		return r;
	ndc_fp_table_set_nx(&fp->table, fp->nx, &val);
	return 0;
}

int ndc_fastpath_put(struct ndc_fp *fp, const struct ndc_fp_key *k, const struct ndc_fp_value *v)
{
	return ndc_fp_table_put(&fp->table, k, v, true);
}

int ndc_fastpath_lookup(int answers_fd, int big_fd, int nx_fd, int config_fd,
			const struct ndc_fp_key *k, struct ndc_fp_value *ret)
{
	return ndc_fp_table_read(answers_fd, big_fd, nx_fd, config_fd, k, ret);
}

int ndc_fastpath_count(int answers_fd, size_t *ret)
{
	return ndc_fp_table_count(answers_fd, ret);
}

int ndc_fastpath_nx_read(int nx_fd, struct ndc_fp_value *ret)
{
	struct ndc_fp_big b;
	uint32_t key = 0;

	if (bpf_map_lookup_elem(nx_fd, &key, &b))
		return -errno;
	*ret = b.v;
	return 0;
}

int ndc_fastpath_set_synced(struct ndc_fp *fp, bool synced)
{
	/* one atomic store of the flags word, through the mapping the program reads */
	if (synced)
		__atomic_fetch_or(&fp->cfg->flags, NDC_FP_C_SYNCED, __ATOMIC_RELEASE);
	else
		__atomic_fetch_and(&fp->cfg->flags, ~(uint32_t)NDC_FP_C_SYNCED, __ATOMIC_RELEASE);
	return 0;
}

int ndc_fastpath_table_stats(struct ndc_fp *fp, struct ndc_fastpath_table_stats *ret)
{
	struct ndc_fp_table_usage u;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	ndc_fp_table_stats(&fp->table, &u);
	ret->keys = u.keys;
	ret->max_keys = u.max_keys;
	ret->slots = u.slots;
	/* the kernel adds a page to each mmapable array; ndc_nx is one more */
	ret->bytes = u.bytes + page_round(NDC_FP_NX_ENTRIES * sizeof(struct ndc_fp_big)) +
		     (u.chunks + u.big_chunks + 1) * page;
	ret->needed = u.needed;
	ret->rebuilds = u.rebuilds;
	ret->rare_keys = u.rare_keys;
	ret->common_slots = u.common_slots;
	return 0;
}

int ndc_fastpath_table_rebuild(struct ndc_fp *fp)
{
	return ndc_fp_table_rebuild(&fp->table);
}

int ndc_fastpath_hits(struct ndc_fp *fp, const uint8_t *lname, size_t nlen, uint16_t qtype,
		      uint32_t *ret_hits)
{
	struct ndc_fp_key key;
	int r = ndc_fastpath_key(lname, nlen, qtype, &key);

	return r ? r : ndc_fp_table_hits(&fp->table, &key, lname, nlen, ret_hits);
}

uint64_t ndc_fastpath_foreign_programs(struct ndc_fp *fp)
{
	return __atomic_load_n(&fp->foreign, __ATOMIC_RELAXED);
}

int ndc_fastpath_egress_prog_fd(struct ndc_fp *fp)
{
	return bpf_program__fd(fp->skel->progs.ndc_tc_egress);
}

int ndc_fastpath_prog_fd(struct ndc_fp *fp, enum ndc_fp_attach which)
{
	switch (which) {
	case NDC_FP_ATTACH_TC:
		return bpf_program__fd(fp->skel->progs.ndc_tc_ingress);
	case NDC_FP_ATTACH_XDP:
		return bpf_program__fd(fp->skel->progs.ndc_xdp);
	default:
		return -EINVAL;
	}
}
