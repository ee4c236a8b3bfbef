// SPDX-License-Identifier: MIT
/*
 * The kernel's answer table from user space (layout and protocol: include/ndc/abi.h, "The answer
 * table"): the writer, through a shared mapping of our own maps, and a reader through any map fds.
 * One walk serves both and is the same as the kernel's (bpf/ndc_table.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "internal.h"

#define NONE UINT32_MAX
#define SLOTS_MIN 1024
#define BIG_MIN 256

/* The answer part of a slot: everything after the key. */
#define ANSWER_OFF offsetof(struct ndc_fp_slot, len)

static size_t round8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

int ndc_fp_table_sizes(uint32_t max_entries, uint32_t *ret_slots, uint32_t *ret_big)
{
	/*
	 * Twice the entries: linear probing at a load of at most one half keeps walks short (a hit
	 * reads its home slot, rarely the next one). Big answers are the exception (long answers,
	 * NXDOMAIN with SOA in the cache): an eighth of the entries.
	 */
	if (max_entries == 0 || max_entries > UINT32_MAX / 2)
		return -EINVAL;
	*ret_slots = max_entries * 2 < SLOTS_MIN ? SLOTS_MIN : max_entries * 2;
	*ret_big = max_entries / 8 < BIG_MIN ? BIG_MIN : max_entries / 8;
	return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Layout: a struct ndc_fp_value in a slot's bytes, and back.
 */

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/*
 * Where the parts of v go in a slot's bytes, and whether they fit. Only a value that the bytes
 * give back exactly goes there (what the publisher writes always does: zero where unused).
 */
static bool inline_layout(const struct ndc_fp_value *v, size_t *ret_data, size_t *ret_ttl)
{
	size_t data = round8(v->name_len), end, ttl = data + round8(v->len);

	if (v->name_len > NDC_FP_NAME_MAX || v->len > NDC_FP_DATA_MAX || v->n_ttl > NDC_FP_TTL_MAX)
		return false;
	/* the TTL offsets to a whole word: the kernel reads them four at a time */
	end = v->expire_ns ? ttl + 16 + round8(2 * (size_t)v->n_ttl) : data + v->len;
	if (end > NDC_FP_SLOT_BYTES || v->ancount > UINT8_MAX || v->nscount > UINT8_MAX ||
	    v->arcount > UINT8_MAX || v->pad2 || (v->flags & (NDC_FP_V_EXPIRES | NDC_FP_V_BIG)))
		return false;
	if (!v->expire_ns && (v->insert_ns || v->n_ttl))
		return false;
	if (!all_zero(v->name + v->name_len, NDC_FP_NAME_MAX - v->name_len) ||
	    !all_zero(v->data + v->len, NDC_FP_DATA_MAX - v->len) ||
	    !all_zero((const uint8_t *)(v->ttl_off + v->n_ttl),
		      sizeof(v->ttl_off) - 2 * (size_t)v->n_ttl))
		return false;
	*ret_data = data;
	*ret_ttl = ttl;
	return true;
}

/* The answer part of slot image s for v: in its bytes when it fits, else pointing at big b. */
static void slot_encode(const struct ndc_fp_value *v, bool in_slot, uint32_t b,
			struct ndc_fp_slot *s)
{
	size_t data, ttl;

	memset((uint8_t *)s + ANSWER_OFF, 0, sizeof(*s) - ANSWER_OFF);
	if (!in_slot || !inline_layout(v, &data, &ttl)) {
		s->flags = v->flags | NDC_FP_V_BIG;
		s->big = b;
		return;
	}
	s->len = (uint8_t)v->len;
	s->ancount = (uint8_t)v->ancount;
	s->nscount = (uint8_t)v->nscount;
	s->arcount = (uint8_t)v->arcount;
	s->rcode = v->rcode;
	s->flags = v->flags;
	memcpy(s->bytes, v->name, v->name_len);
	memcpy(s->bytes + data, v->data, v->len);
	if (v->expire_ns) {
		s->flags |= NDC_FP_V_EXPIRES;
		s->n_ttl = v->n_ttl;
		memcpy(s->bytes + ttl, &v->insert_ns, 8);
		memcpy(s->bytes + ttl + 8, &v->expire_ns, 8);
		memcpy(s->bytes + ttl + 16, v->ttl_off, 2 * (size_t)v->n_ttl);
	}
}

/* The value of a full slot s (its big answer in b when it has one). -EIO: s is not consistent. */
static int slot_decode(const struct ndc_fp_slot *s, const struct ndc_fp_big *b,
		       struct ndc_fp_value *ret)
{
	size_t data = round8(s->name_len), ttl = data + round8(s->len);

	if (s->flags & NDC_FP_V_BIG) {
		if (!b)
			return -EIO;
		*ret = b->v;
		return 0;
	}
	if (s->flags & NDC_FP_V_EXPIRES
		? ttl + 16 + round8(2 * (size_t)s->n_ttl) > NDC_FP_SLOT_BYTES
		: data + s->len > NDC_FP_SLOT_BYTES)
		return -EIO;
	memset(ret, 0, sizeof(*ret));
	ret->len = s->len;
	ret->ancount = s->ancount;
	ret->nscount = s->nscount;
	ret->arcount = s->arcount;
	ret->rcode = s->rcode;
	ret->flags = s->flags & (uint8_t) ~(NDC_FP_V_EXPIRES | NDC_FP_V_BIG);
	ret->name_len = s->name_len;
	memcpy(ret->name, s->bytes, s->name_len);
	memcpy(ret->data, s->bytes + data, s->len);
	if (s->flags & NDC_FP_V_EXPIRES) {
		ret->n_ttl = s->n_ttl;
		memcpy(&ret->insert_ns, s->bytes + ttl, 8);
		memcpy(&ret->expire_ns, s->bytes + ttl + 8, 8);
		memcpy(ret->ttl_off, s->bytes + ttl + 16, 2 * (size_t)s->n_ttl);
	}
	return 0;
}

/* ---------------------------------------------------------------------------------------------
 * The walk, over any way of reading a slot.
 */

struct reader {
	int (*slot)(const struct reader *r, uint32_t i, struct ndc_fp_slot *ret);
	int (*big)(const struct reader *r, uint32_t b, struct ndc_fp_big *ret);
	uint32_t n_slots;
	uint64_t home_key;
	const struct ndc_fp_table *t; /* mapped */
	int answers_fd, big_fd;	      /* or through fds */
};

/*
 * Walks k's slots as the kernel does: 0 with the slot holding k in *ret_at and *ret_slot, or
 * -ENOENT with the first slot a new key may take in *ret_free (NONE: none within reach).
 */
static int walk(const struct reader *r, const struct ndc_fp_key *k, uint32_t *ret_at,
		struct ndc_fp_slot *ret_slot, uint32_t *ret_free)
{
	uint32_t n = r->n_slots, home = ndc_fp_home(k->hash, k->qtype, r->home_key, n);
	uint32_t free_at = NONE;
	struct ndc_fp_slot s;
	int err;

	for (uint32_t p = 0; p < NDC_FP_PROBE_MAX && p < n; p++) {
		uint32_t i = home + p >= n ? home + p - n : home + p;

		err = r->slot(r, i, &s);
		if (err)
			return err;
		if (s.state != NDC_FP_SLOT_FULL) {
			if (free_at == NONE)
				free_at = i;
			if (s.state == NDC_FP_SLOT_EMPTY)
				break;
			continue;
		}
		if (s.hash == k->hash && s.qtype == k->qtype && s.name_len == k->name_len) {
			*ret_at = i;
			*ret_slot = s;
			return 0;
		}
	}
	*ret_free = free_at;
	return -ENOENT;
}

/* The value at k: 0, -ENOENT, or an error of the reader. */
static int get(const struct reader *r, const struct ndc_fp_key *k, struct ndc_fp_value *ret)
{
	struct ndc_fp_slot s;
	struct ndc_fp_big b;
	uint32_t at, free_at;
	int err = walk(r, k, &at, &s, &free_at);

	if (err)
		return err;
	if (s.flags & NDC_FP_V_BIG) {
		err = r->big(r, s.big, &b);
		if (err)
			return err;
	}
	return slot_decode(&s, &b, ret);
}

static int mapped_slot(const struct reader *r, uint32_t i, struct ndc_fp_slot *ret)
{
	*ret = r->t->slots[i];
	return 0;
}

static int mapped_big(const struct reader *r, uint32_t b, struct ndc_fp_big *ret)
{
	if (b >= r->t->n_big)
		return -EIO;
	*ret = r->t->bigs[b];
	return 0;
}

static int fd_slot(const struct reader *r, uint32_t i, struct ndc_fp_slot *ret)
{
	return bpf_map_lookup_elem(r->answers_fd, &i, ret) ? -errno : 0;
}

static int fd_big(const struct reader *r, uint32_t b, struct ndc_fp_big *ret)
{
	return bpf_map_lookup_elem(r->big_fd, &b, ret) ? -errno : 0;
}

static struct reader mapped(const struct ndc_fp_table *t)
{
	return (struct reader){.slot = mapped_slot,
			       .big = mapped_big,
			       .n_slots = t->n_slots,
			       .home_key = t->home_key,
			       .t = t};
}

/* ---------------------------------------------------------------------------------------------
 * Mapping our own maps.
 */

static size_t map_len(size_t bytes)
{
	long page = sysconf(_SC_PAGESIZE);

	return (bytes + (size_t)page - 1) / (size_t)page * (size_t)page;
}

static void *map_rw(int fd, size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	return p == MAP_FAILED ? NULL : p;
}

int ndc_fp_table_map(struct ndc_fp_table *t, int answers_fd, int big_fd, int nx_fd,
		     uint32_t max_entries, uint64_t home_key)
{
	int err;

	memset(t, 0, sizeof(*t));
	err = ndc_fp_table_sizes(max_entries, &t->n_slots, &t->n_big);
	if (err)
		return err;
	t->max_entries = max_entries;
	t->home_key = home_key;
	t->slots_len = map_len((size_t)t->n_slots * sizeof(*t->slots));
	t->bigs_len = map_len((size_t)t->n_big * sizeof(*t->bigs));
	t->nx_len = map_len(sizeof(*t->nx));
	t->big_free = malloc((size_t)t->n_big * sizeof(*t->big_free));
	t->slots = map_rw(answers_fd, t->slots_len);
	t->bigs = t->slots ? map_rw(big_fd, t->bigs_len) : NULL;
	t->nx = t->bigs ? map_rw(nx_fd, t->nx_len) : NULL;
	if (!t->big_free || !t->nx) {
		err = t->big_free ? -errno : -ENOMEM;
		ndc_fp_table_unmap(t);
		return err;
	}
	/* the first big answers first: fewer pages touched while the table is small */
	for (uint32_t i = 0; i < t->n_big; i++)
		t->big_free[i] = t->n_big - 1 - i;
	t->n_big_free = t->n_big;
	pthread_mutex_init(&t->lock, NULL);
	t->mapped = true;
	return 0;
}

void ndc_fp_table_unmap(struct ndc_fp_table *t)
{
	if (t->slots)
		munmap(t->slots, t->slots_len);
	if (t->bigs)
		munmap(t->bigs, t->bigs_len);
	if (t->nx)
		munmap(t->nx, t->nx_len);
	free(t->big_free);
	if (t->mapped)
		pthread_mutex_destroy(&t->lock);
	memset(t, 0, sizeof(*t));
}

/* ---------------------------------------------------------------------------------------------
 * The writer: one at a time (t->lock), against readers in the kernel that never wait.
 */

/* seqcount write side: odd, then the writes, then even, with release ordering at both ends. */
static void seq_begin(uint32_t *seq)
{
	__atomic_store_n(seq, *seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
}

static void seq_end(uint32_t *seq)
{
	__atomic_store_n(seq, *seq + 1, __ATOMIC_RELEASE);
}

static bool name_is(const struct ndc_fp_value *v, const uint8_t *name, size_t len)
{
	return v->name_len == len && memcmp(v->name, name, len) == 0;
}

/*
 * Writes v at slot i: the key too when insert. A big answer is written to a free big record
 * before the slot points at it, and the one it replaces is freed after.
 */
static int write_at(struct ndc_fp_table *t, uint32_t i, const struct ndc_fp_key *k,
		    const struct ndc_fp_value *v, bool insert)
{
	struct ndc_fp_slot *s = &t->slots[i], img;
	uint32_t b = NONE, old = NONE;
	size_t data, ttl;

	if (!insert && s->flags & NDC_FP_V_BIG)
		old = s->big;
	/* a name of another length than the key's (only ndc_fastpath_put writes one) keeps its own
	 */
	if (v->name_len != k->name_len || !inline_layout(v, &data, &ttl)) {
		if (!t->n_big_free)
			return -ENOSPC;
		b = t->big_free[--t->n_big_free];
		t->bigs[b].v = *v; /* not yet pointed at: nobody reads it */
	}
	slot_encode(v, b == NONE, b, &img);
	seq_begin(&s->seq);
	if (insert) {
		s->hash = k->hash;
		s->qtype = k->qtype;
		s->name_len = k->name_len;
	}
	memcpy((uint8_t *)s + ANSWER_OFF, (const uint8_t *)&img + ANSWER_OFF,
	       sizeof(*s) - ANSWER_OFF);
	s->state = NDC_FP_SLOT_FULL;
	seq_end(&s->seq);
	if (old != NONE && old < t->n_big)
		t->big_free[t->n_big_free++] = old;
	return 0;
}

/*
 * Removes the key at slot i. It becomes EMPTY when the slot after it is (no walk can need it),
 * and so do the DELETED slots right before it; else DELETED, which walks go past.
 */
static void remove_at(struct ndc_fp_table *t, uint32_t i)
{
	struct ndc_fp_slot *s = &t->slots[i];
	uint32_t n = t->n_slots, next = i + 1 == n ? 0 : i + 1, old = NONE;
	bool empty = t->slots[next].state == NDC_FP_SLOT_EMPTY;

	if (s->flags & NDC_FP_V_BIG)
		old = s->big;
	seq_begin(&s->seq);
	s->state = empty ? NDC_FP_SLOT_EMPTY : NDC_FP_SLOT_DELETED;
	s->flags = 0;
	seq_end(&s->seq);
	for (uint32_t j = i == 0 ? n - 1 : i - 1, steps = 0;
	     empty && steps < n && t->slots[j].state == NDC_FP_SLOT_DELETED;
	     j = j == 0 ? n - 1 : j - 1, steps++)
		__atomic_store_n(&t->slots[j].state, NDC_FP_SLOT_EMPTY, __ATOMIC_RELEASE);
	t->live--;
	if (old != NONE && old < t->n_big)
		t->big_free[t->n_big_free++] = old;
}

int ndc_fp_table_put(struct ndc_fp_table *t, const struct ndc_fp_key *k,
		     const struct ndc_fp_value *v, bool any_name)
{
	struct reader r = mapped(t);
	struct ndc_fp_value cur;
	struct ndc_fp_slot s;
	uint32_t at, free_at;
	int err;

	pthread_mutex_lock(&t->lock);
	err = walk(&r, k, &at, &s, &free_at);
	if (err == 0) {
		if (!any_name) {
			err = get(&r, k, &cur);
			if (err == 0 && !name_is(&cur, v->name, v->name_len))
				err = -ENOSPC; /* a collision: the name published first keeps it */
		}
		if (err == 0)
			err = write_at(t, at, k, v, false);
	} else if (err == -ENOENT) {
		err = -ENOSPC; /* full, or nothing free within NDC_FP_PROBE_MAX of the home */
		if (t->live < t->max_entries && free_at != NONE) {
			err = write_at(t, free_at, k, v, true);
			if (err == 0)
				t->live++;
		}
	}
	pthread_mutex_unlock(&t->lock);
	return err;
}

int ndc_fp_table_get(struct ndc_fp_table *t, const struct ndc_fp_key *k, struct ndc_fp_value *ret)
{
	struct reader r = mapped(t);
	int err;

	pthread_mutex_lock(&t->lock);
	err = get(&r, k, ret);
	pthread_mutex_unlock(&t->lock);
	return err;
}

int ndc_fp_table_del(struct ndc_fp_table *t, const struct ndc_fp_key *k, const uint8_t *name,
		     size_t name_len, uint64_t expired_at)
{
	struct reader r = mapped(t);
	struct ndc_fp_value cur;
	struct ndc_fp_slot s;
	uint32_t at, free_at;
	int err;

	pthread_mutex_lock(&t->lock);
	err = walk(&r, k, &at, &s, &free_at);
	if (err == 0 && (name || expired_at))
		err = get(&r, k, &cur);
	if (err == 0 && name && !name_is(&cur, name, name_len))
		err = -ENOENT; /* another name's entry: not ours to remove */
	if (err == 0 && expired_at && (cur.expire_ns == 0 || expired_at < cur.expire_ns))
		err = -EAGAIN;
	if (err == 0)
		remove_at(t, at);
	pthread_mutex_unlock(&t->lock);
	return err;
}

int ndc_fp_table_set_nx(struct ndc_fp_table *t, const struct ndc_fp_value *v)
{
	pthread_mutex_lock(&t->lock);
	seq_begin(&t->nx->seq);
	t->nx->v = *v;
	seq_end(&t->nx->seq);
	pthread_mutex_unlock(&t->lock);
	return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Reading through map fds.
 */

/* The slot count of an answer table's map, and its home key from its config map. */
static int table_of(int answers_fd, int config_fd, uint32_t *ret_n, uint64_t *ret_key)
{
	struct bpf_map_info info = {0};
	uint32_t len = sizeof(info), zero = 0;
	struct ndc_fp_config c;

	if (bpf_obj_get_info_by_fd(answers_fd, &info, &len) < 0)
		return -errno;
	if (info.type != BPF_MAP_TYPE_ARRAY || info.value_size != sizeof(struct ndc_fp_slot))
		return -EINVAL;
	*ret_n = info.max_entries;
	if (config_fd < 0)
		return 0;
	if (bpf_map_lookup_elem(config_fd, &zero, &c))
		return -errno;
	if (c.abi_version != NDC_ABI_VERSION || c.n_slots != info.max_entries)
		return -EINVAL;
	*ret_key = c.home_key;
	return 0;
}

int ndc_fp_table_read(int answers_fd, int big_fd, int config_fd, const struct ndc_fp_key *k,
		      struct ndc_fp_value *ret)
{
	struct reader r = {
	    .slot = fd_slot, .big = fd_big, .answers_fd = answers_fd, .big_fd = big_fd};
	int err = table_of(answers_fd, config_fd, &r.n_slots, &r.home_key);

	return err ? err : get(&r, k, ret);
}

int ndc_fp_table_count(int answers_fd, size_t *ret)
{
	struct ndc_fp_slot s;
	uint32_t n;
	uint64_t key;
	size_t full = 0;
	int err = table_of(answers_fd, -1, &n, &key);

	for (uint32_t i = 0; !err && i < n; i++) {
		if (bpf_map_lookup_elem(answers_fd, &i, &s))
			err = -errno;
		else if (s.state == NDC_FP_SLOT_FULL)
			full++;
	}
	*ret = full;
	return err;
}
