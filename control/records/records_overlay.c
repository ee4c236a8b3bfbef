/* SPDX-License-Identifier: MIT */
/*
 * The overlay of whole nodes a derived version of the record table holds over its base
 * (records_patch.c makes them): references and lookups. Lookups and the table's free read it,
 * and the patch code writes it; they all call down to here, nothing here calls up.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---------------------------------------------------------------------------------------------
 * References (any version's writer or its freeing).
 */
void ndc_rec_oent_put(struct ndc_rec_oent *e)
{
	if (e && atomic_fetch_sub(&e->refs, 1) == 1)
		free(e);
}

void ndc_rec_obkt_put(struct ndc_rec_obkt *b)
{
	if (!b || atomic_fetch_sub(&b->refs, 1) != 1)
		return;
	for (uint32_t i = 0; i < b->n; i++)
		ndc_rec_oent_put(b->e[i]);
	free(b);
}

/* ---------------------------------------------------------------------------------------------
 * Overlay lookups (readers).
 */
int ndc_rec_ovl_find(const struct ndc_rec_ovl *o, const uint8_t *n, size_t len, uint32_t h,
		     const struct ndc_rec_node_r **ret)
{
	const struct ndc_rec_obkt *b = o->b[h & ((1u << o->bits) - 1)];

	for (uint32_t i = 0; b && i < b->n; i++) {
		if (ndc_rec_oent_is(b->e[i], n, len, h)) {
			*ret = b->e[i]->exists ? ndc_rec_oent_node(b->e[i]) : NULL;
			return 0;
		}
	}
	return -ENOENT;
}

int ndc_rec_ovl_foreach(const struct ndc_rec_ovl *o,
			int (*fn)(void *arg, const struct ndc_rec_node_r *nd), void *arg)
{
	for (size_t i = 0; i < (size_t)1 << o->bits; i++) {
		const struct ndc_rec_obkt *b = o->b[i];

		for (uint32_t k = 0; b && k < b->n; k++) {
			int err = b->e[k]->exists ? fn(arg, ndc_rec_oent_node(b->e[k])) : 0;

			if (err)
				return err;
		}
	}
	return 0;
}

size_t ndc_rec_ovl_size(const struct ndc_rec_ovl *o)
{
	return o ? o->n : 0;
}

void ndc_rec_ovl_put(struct ndc_rec_ovl *o)
{
	if (!o)
		return;
	for (size_t i = 0; i < (size_t)1 << o->bits; i++)
		ndc_rec_obkt_put(o->b[i]);
	free(o);
}
