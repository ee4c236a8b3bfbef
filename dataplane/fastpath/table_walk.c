// SPDX-License-Identifier: MIT
/*
 * The answer table's walk from user space: the kernel's (bpf/ndc_table.h), over any way of reading
 * a half of the table: the writer's mappings of its chunks (table.c finds keys with it), or the
 * maps' fds of a loaded or pinned program (ndc_fp_table_read, for tools and tests).
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "internal.h"

int ndc_fp_walk(const struct ndc_fp_reader *r, const struct ndc_fp_key *k,
		struct ndc_fp_place *ret_at, struct ndc_fp_slot *ret_slot)
{
	uint64_t mix = ndc_fp_key_mix(k->hash, r->home_key, k->qtype);
	uint32_t n = r->n_buckets, b, check = (uint32_t)(k->hash >> 32);
	uint8_t tag = ndc_fp_mix_tag(mix);
	struct ndc_fp_slot s;
	uint64_t tags;
	int err;

	if (n == 0)
		return -ENOENT;
	b = ndc_fp_region_home(mix, n, ndc_fp_common_of(n, r->rare_base), r->rare_base, k->region);
	for (uint32_t p = 0; p < NDC_FP_PROBE_BUCKETS && p < n; p++) {
		err = r->tags(r, b, &tags);
		if (err)
			return err;
		for (uint32_t j = 0; j < NDC_FP_BUCKET; j++) {
			if (ndc_fp_tag_at(tags, j) != tag)
				continue;
			err = r->slot(r, b, j, &s);
			if (err)
				return err;
			if (s.check == check && s.qtype == k->qtype && s.name_len == k->name_len) {
				*ret_at = (struct ndc_fp_place){b, j, p};
				*ret_slot = s;
				return 0;
			}
		}
		if (!ndc_fp_overflowed(tags))
			break;
		b = b + 1 == n ? 0 : b + 1;
	}
	return -ENOENT;
}

int ndc_fp_walk_decode(const struct ndc_fp_reader *r, const struct ndc_fp_slot *s,
		       struct ndc_fp_value *ret)
{
	struct ndc_fp_value b;
	int err;

	if (s->flags & NDC_FP_V_BIG) {
		err = r->big(r, s->big, &b);
		if (err)
			return err;
	}
	return ndc_fp_slot_decode(s, &b, r->soa, r->sfx, ret);
}

int ndc_fp_walk_get(const struct ndc_fp_reader *r, const struct ndc_fp_key *k,
		    struct ndc_fp_value *ret)
{
	struct ndc_fp_slot s;
	struct ndc_fp_place at;
	int err = ndc_fp_walk(r, k, &at, &s);

	return err ? err : ndc_fp_walk_decode(r, &s, ret);
}

/* ---------------------------------------------------------------------------------------------
 * Reading through the writer's mappings.
 */

static int mapped_tags(const struct ndc_fp_reader *r, uint32_t b, uint64_t *ret)
{
	*ret = __atomic_load_n(ndc_fp_tag_word(r->h, b), __ATOMIC_ACQUIRE);
	return 0;
}

static int mapped_slot(const struct ndc_fp_reader *r, uint32_t b, uint32_t j,
		       struct ndc_fp_slot *ret)
{
	*ret = *ndc_fp_slot_of(r->h, b, j);
	return 0;
}

static int mapped_big(const struct ndc_fp_reader *r, uint32_t i, struct ndc_fp_value *ret)
{
	if (i >= r->h->n_big_chunks * NDC_FP_BIG_CHUNK)
		return -EIO;
	return ndc_fp_ext_decode(ndc_fp_big_of(r->h, i), NDC_FP_BIG_CHUNK - i % NDC_FP_BIG_CHUNK,
				 ret);
}

struct ndc_fp_reader ndc_fp_reader_mapped(const struct ndc_fp_table *t, int half)
{
	return (struct ndc_fp_reader){.tags = mapped_tags,
				      .slot = mapped_slot,
				      .big = mapped_big,
				      .n_buckets = t->h[half].n_buckets,
				      .rare_base = t->h[half].rare_base,
				      .home_key = t->home_key,
				      .soa = ndc_fp_table_soa(t),
				      .sfx = &t->sfx,
				      .h = &t->h[half]};
}

/* ---------------------------------------------------------------------------------------------
 * Reading through map fds.
 */

/* The fd of the inner map at idx of an array of maps, or a negative errno (-ENOENT: none). */
static int inner_fd(int outer_fd, uint32_t idx)
{
	uint32_t id;
	int fd;

	if (bpf_map_lookup_elem(outer_fd, &idx, &id))
		return -errno;
	fd = bpf_map_get_fd_by_id(id);
	return fd < 0 ? -errno : fd;
}

static int fd_tags(const struct ndc_fp_reader *r, uint32_t b, uint64_t *ret)
{
	uint32_t ci = (uint32_t)(r->half * r->half_chunks) + b / NDC_FP_CHUNK_BUCKETS;
	uint32_t bi = b % NDC_FP_CHUNK_BUCKETS, e = bi / 16;
	struct ndc_fp_slot s;
	int fd = inner_fd(r->answers_fd, ci), err = 0;

	if (fd < 0)
		return fd;
	if (bpf_map_lookup_elem(fd, &e, &s))
		err = -errno;
	else
		memcpy(ret, (const uint8_t *)&s + (bi % 16) * 8, 8);
	close(fd);
	return err;
}

static int fd_slot(const struct ndc_fp_reader *r, uint32_t b, uint32_t j, struct ndc_fp_slot *ret)
{
	uint32_t ci = (uint32_t)(r->half * r->half_chunks) + b / NDC_FP_CHUNK_BUCKETS;
	uint32_t e = NDC_FP_CHUNK_TAG_SLOTS + (b % NDC_FP_CHUNK_BUCKETS) * NDC_FP_BUCKET + j;
	int fd = inner_fd(r->answers_fd, ci), err = 0;

	if (fd < 0)
		return fd;
	if (bpf_map_lookup_elem(fd, &e, ret))
		err = -errno;
	close(fd);
	return err;
}

static int fd_big(const struct ndc_fp_reader *r, uint32_t i, struct ndc_fp_value *ret)
{
	uint32_t ci = (uint32_t)(r->half * r->half_bigs) + i / NDC_FP_BIG_CHUNK;
	uint32_t e = i % NDC_FP_BIG_CHUNK, n = 0;
	struct ndc_fp_ext rec[NDC_FP_EXT_MAX];
	int fd = inner_fd(r->big_fd, ci), err = 0;

	if (fd < 0)
		return fd;
	memset(rec, 0, sizeof(rec));
	/* the records of one answer, up to its end or the chunk's (ndc_fp_ext_decode checks its
	 * length) */
	for (; n < NDC_FP_EXT_MAX && e + n < NDC_FP_BIG_CHUNK; n++) {
		uint32_t key = e + n;

		if (bpf_map_lookup_elem(fd, &key, &rec[n])) {
			err = -errno;
			break;
		}
	}
	close(fd);
	return err ? err : ndc_fp_ext_decode(rec, n, ret);
}

int ndc_fp_table_read(int answers_fd, int big_fd, int nx_fd, int config_fd,
		      const struct ndc_fp_key *k, struct ndc_fp_value *ret)
{
	uint32_t soa_key = NDC_FP_NX_NODATA;
	struct ndc_fp_big soa;
	struct ndc_fp_reader r = {.tags = fd_tags,
				  .slot = fd_slot,
				  .big = fd_big,
				  .answers_fd = answers_fd,
				  .big_fd = big_fd};
	struct ndc_fp_config c;
	uint32_t zero = 0;

	if (bpf_map_lookup_elem(config_fd, &zero, &c))
		return -errno;
	if (c.abi_version != NDC_ABI_VERSION)
		return -EINVAL;
	r.n_buckets = NDC_FP_GEOM_BUCKETS(c.geom);
	r.rare_base = NDC_FP_GEOM_RARE_BASE(c.geom);
	r.half = (int)NDC_FP_GEOM_HALF(c.geom);
	r.half_chunks = (int)c.half_chunks;
	r.half_bigs = (int)c.half_bigs;
	r.home_key = c.home_key;
	r.sfx = &c.sfx;
	/* the template, for NODATA by reference (not under its counter: a reader for inspection) */
	if (nx_fd >= 0 && bpf_map_lookup_elem(nx_fd, &soa_key, &soa) == 0 && soa.v.len)
		r.soa = &soa.v;
	return ndc_fp_walk_get(&r, k, ret);
}

int ndc_fp_table_count(int answers_fd, size_t *ret)
{
	struct bpf_map_info info = {0};
	uint32_t len = sizeof(info);
	struct ndc_fp_slot s;
	size_t full = 0;
	int err = 0;

	if (bpf_obj_get_info_by_fd(answers_fd, &info, &len) < 0)
		return -errno;
	if (info.type != BPF_MAP_TYPE_ARRAY_OF_MAPS)
		return -EINVAL;
	for (uint32_t c = 0; !err && c < info.max_entries; c++) {
		int fd = inner_fd(answers_fd, c);

		if (fd == -ENOENT)
			continue;
		if (fd < 0)
			return fd;
		for (uint32_t e = 0; !err && e < NDC_FP_CHUNK_TAG_SLOTS; e++) {
			if (bpf_map_lookup_elem(fd, &e, &s)) {
				err = -errno;
				break;
			}
			for (size_t i = 0; i < sizeof(s); i++)
				full += i % 8 < NDC_FP_BUCKET && ((const uint8_t *)&s)[i];
		}
		close(fd);
	}
	*ret = full;
	return err;
}
