/* `ampc calibrate MODEL -o STATS` (tools/cli_calib.c: measured value ranges, the file
 * passes/calib.h reads) and `ampc compare FP32 AMP` (tools/cli_compare.c: each 16-bit
 * node's local and inherited error in one pass). */
#ifndef AMPC_TOOLS_CLI_CALIB_H
#define AMPC_TOOLS_CLI_CALIB_H

#include "tools/run.h"

enum { AMPC_CALIB_MAX_DIRS = 64 };

typedef struct CalibArgs {
    RunArgs run;        /* model, steps, seed, --dim, --loss (run_args.c parses them) */
    const char *amp;    /* compare: the converted model */
    const char *dirs[AMPC_CALIB_MAX_DIRS]; /* --inputs DIR, repeatable for calibrate */
    int n_dirs;
    const char *out;    /* calibrate: -o STATS */
    double loss_scale;  /* calibrate, training: the scale gradients are recorded at (0: 65536) */
    long top;           /* compare: nodes listed (default 10) */
} CalibArgs;

/* Stores option `val` (an OPT_ of cli_options.h) for calibrate or compare: 0 or the exit
 * code of a usage error (printed). */
int ampc_parse_calib_value(int val, const char *arg, CalibArgs *c);
int ampc_cmd_calibrate(CalibArgs *c);
int ampc_cmd_compare(CalibArgs *c);

#endif
