/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * One table line per query (NDC_REFLECT_LOAD): the load reflector's (ndc_reflector.bpf.c) and
 * the answer reflector's (ndc_answer_reflector.bpf.c) table load. Before a query is answered, one
 * line of a 2 MiB table (an mmapable array, vmalloc'd in 4 KiB pages as the fast path's chunks
 * are) chosen by a hash of the question's first 32 bytes (ndc_reflect_line.h: the benchmark's
 * 10,000 names fall on about 8,600 of its 32,768 lines) is read and branched on, as a table lookup
 * does. Over many names that line comes from memory: the floor of what a name costs the fast path.
 * Experiment switches: NDC_REFLECT_LINES, NDC_REFLECT_TAGS, NDC_REFLECT_WRITE, NDC_REFLECT_DEP,
 * NDC_REFLECT_TWO (docs/bench/FASTPATH.md).
 */
#ifndef NDC_REFLECT_LOAD_H
#define NDC_REFLECT_LOAD_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "ndc_reflect_line.h"

#ifndef NDC_REFLECT_LINES
#define NDC_REFLECT_LINES 32768 /* of 64 bytes: 2 MiB */
#endif

struct ndc_reflect_line {
	__u64 w[8];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct ndc_reflect_line);
	__uint(max_entries, NDC_REFLECT_LINES);
} ndc_reflect_lines SEC(".maps");

#ifdef NDC_REFLECT_TAGS
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct ndc_reflect_line);
	__uint(max_entries, NDC_REFLECT_TAGS);
} ndc_reflect_tags SEC(".maps");
#endif

#ifdef NDC_REFLECT_DEP
static __u64 reflect_dep; /* experiment: the word read, folded into the reply's addresses */
#endif

/*
 * One line of the table for the question at off: 0 to go on, -1 to pass the packet (never, the
 * table is zero: a branch on the loaded word, as a lookup compares its key). A question shorter
 * than the key reads nothing.
 */
static __always_inline int reflect_load(void *data, void *data_end, __u32 off)
{
	const __u64 *p = data + off;
	struct ndc_reflect_line *l;
	__u64 h;
	__u32 i;

	if ((void *)(p + NDC_REFLECT_KEY_WORDS) > data_end)
		return 0;
	h = ndc_reflect_hash(p);
	i = ndc_reflect_line(h, NDC_REFLECT_LINES);
#ifdef NDC_REFLECT_TAGS
	{
		/* experiment: a tag word first, as the fast path's walk reads one per bucket */
		__u32 t = ndc_reflect_line(h >> 32, NDC_REFLECT_TAGS);
		struct ndc_reflect_line *tl = bpf_map_lookup_elem(&ndc_reflect_tags, &t);

		if (!tl)
			return 0;
		i ^= (__u32) * (volatile const __u64 *)&tl->w[h & 7]; /* zero: the same line */
		i &= NDC_REFLECT_LINES - 1;
	}
#endif
	l = bpf_map_lookup_elem(&ndc_reflect_lines, &i);
	if (l && *(volatile const __u64 *)&l->w[0] == 0x5a5a5a5a5a5a5a5aULL)
		return -1;
#ifdef NDC_REFLECT_WRITE
	/* experiment: the line written once, on its first read: a page of data, not of zeros */
	if (l && !*(volatile const __u64 *)&l->w[2])
		*(volatile __u64 *)&l->w[2] = h | 1;
#endif
#ifdef NDC_REFLECT_DEP
	reflect_dep = l ? *(volatile const __u64 *)&l->w[1] : 0;
#endif
#ifdef NDC_REFLECT_TWO
	/* experiment: the other half of a 128-byte slot too */
	i ^= 1;
	l = bpf_map_lookup_elem(&ndc_reflect_lines, &i);
	if (l && *(volatile const __u64 *)&l->w[0] == 0x5a5a5a5a5a5a5a5aULL)
		return -1;
#endif
	return 0;
}

#endif
