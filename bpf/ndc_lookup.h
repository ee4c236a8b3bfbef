/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * What a read of the answer table finds: the word between the answer core (ndc_answer.h), which
 * decides what to send, and each backend's table (the kernel's ndc_table.h, DPDK's
 * dataplane/dpdk/table.c), which knows only where entries are. Apart, because the kernel's table
 * is compiled on its own too (tests/unit/fastpath/test_walk_race.c), without the core.
 */
#ifndef NDC_LOOKUP_H
#define NDC_LOOKUP_H

enum ndc_table_res {
	NDC_TABLE_EXACT,     /* (name, qtype) */
	NDC_TABLE_OTHER,     /* (name, NDC_FP_QTYPE_OTHER) */
	NDC_TABLE_ABSENT,    /* neither: the name has no entry */
	NDC_TABLE_COLLISION, /* the entry found is another name's (abi.h: hash collisions) */
	NDC_TABLE_BUSY,	     /* the entry changed while it was read */
};

#endif
