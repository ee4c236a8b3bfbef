/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * The load reflector's choice of a table line (tests/bench/bpf/ndc_reflector.bpf.c,
 * NDC_REFLECT_LOAD): a hash of the question's first NDC_REFLECT_KEY_WORDS words, finished so that
 * every bit of them reaches the low bits the line is taken from.
 *
 * The first version took bits 40 to 54 of a multiply chain with no finish: a multiply moves a
 * difference only towards the high bits, so bytes that differ only high in a word never reached
 * them, and the benchmark's 10,000 names fell on 988 lines of 32,768 (a 62 KB table, cached: its
 * "table load" was a cache hit). tests/unit/fastpath/test_reflect_line.c holds both to the
 * benchmark's names. A header of its own for that test.
 */
#ifndef NDC_REFLECT_LINE_H
#define NDC_REFLECT_LINE_H

#include <linux/types.h>

#define NDC_REFLECT_KEY_WORDS 4 /* the question's first 32 bytes name the line */

/* The hash of a question's first NDC_REFLECT_KEY_WORDS words (read by the caller, in bounds). */
static inline __attribute__((always_inline)) __u64 ndc_reflect_hash(const __u64 *w)
{
	__u64 h = 0x9e3779b97f4a7c15ULL;

	for (int i = 0; i < NDC_REFLECT_KEY_WORDS; i++)
		h = (h ^ w[i]) * 0xff51afd7ed558ccdULL;
	/* the finish: the high bits folded down, mixed once more, folded again */
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 33;
	return h;
}

/* Its line in a table of lines lines (a power of two). */
static inline __attribute__((always_inline)) __u32 ndc_reflect_line(__u64 h, __u32 lines)
{
	return (__u32)h & (lines - 1);
}

#endif
