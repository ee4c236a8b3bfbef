/* SPDX-License-Identifier: MIT */
/* `ndcache top` (top_cli.c): argv from "top" on; returns the exit status (0, 1 error, 2 usage). */
#ifndef NDC_TOP_CLI_H
#define NDC_TOP_CLI_H

int ndc_top_cli(int argc, char **argv);

#endif
