// SPDX-License-Identifier: MIT
/*
 * The entry points (config.h): a text or a file into a checked struct ndc_config. The text is
 * folded into a node tree (config_tree.c), walked along the table of keys (config_schema.c) and
 * checked across keys (config_validate.c).
 */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FILE_SIZE (1 << 20)

int ndc_config_parse(const char *text, size_t len, struct ndc_config *cfg, char *err, size_t errlen)
{
	struct ctx c = {.err = err, .errlen = errlen};
	struct node *root = NULL;
	int r;

	if (err && errlen)
		err[0] = '\0';
	ndc_config_defaults(cfg);
	r = ndc_config_tree_build(&c, text, len, &root);
	/* An empty file, an empty document or a lone null: all defaults. */
	if (r < 0 || !root || ndc_config_is_null(root))
		goto out;
	r = ndc_config_check_node(&c, root);
	if (r == 0 && root->kind != NODE_MAP)
		r = ndc_config_bad_value(&c, root, "a mapping at the top level");
	if (r == 0)
		r = ndc_config_walk(&c, root, cfg);
	if (r == 0)
		r = ndc_config_validate(&c, cfg);
out:
	ndc_config_tree_free(root);
	return r;
}

int ndc_config_load(const char *path, struct ndc_config *cfg, char *err, size_t errlen)
{
	return ndc_config_load_text(path, cfg, NULL, NULL, err, errlen);
}

int ndc_config_load_text(const char *path, struct ndc_config *cfg, char **ret_text, size_t *ret_len,
			 char *err, size_t errlen)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL, *msg;
	size_t len = 0;
	int r = f ? 0 : -errno;

	if (ret_text)
		*ret_text = NULL;
	ndc_config_defaults(cfg);
	if (r == 0 && !(buf = malloc(MAX_FILE_SIZE + 1)))
		r = -ENOMEM;
	if (r == 0) {
		len = fread(buf, 1, MAX_FILE_SIZE + 1, f);
		if (ferror(f))
			r = errno ? -errno : -EIO;
		else if (len > MAX_FILE_SIZE)
			r = -EFBIG;
	}
	if (f)
		fclose(f);
	if (r < 0) {
		if (err && errlen)
			snprintf(err, errlen, "%s: %s", path, strerror(-r));
		free(buf);
		return r;
	}
	r = ndc_config_parse(buf, len, cfg, err, errlen);
	if (r == 0 && ret_text) {
		buf[len] = '\0';
		*ret_text = buf;
		*ret_len = len;
		buf = NULL;
	}
	free(buf);
	/* Parse errors name the file too: "path: line N: key: reason". */
	if (r < 0 && err && errlen && (msg = strdup(err))) {
		snprintf(err, errlen, "%s: %s", path, msg);
		free(msg);
	}
	return r;
}

int ndc_config_use_kubeconfig(struct ndc_config *cfg, const char *path)
{
	char *copy = strdup(path);

	if (!copy)
		return -ENOMEM;
	free(cfg->source.snapshot);
	free(cfg->source.kubeconfig);
	cfg->source.snapshot = NULL;
	cfg->source.kubeconfig = copy;
	cfg->source.kind = NDC_SOURCE_KUBERNETES;
	return 0;
}
