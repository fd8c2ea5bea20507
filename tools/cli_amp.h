/* The AMP options of `ampc MODEL -o OUT` (tools/cli_amp.c): --precision, --level, the list
 * edits (--allow/--infer/--clear/--deny, plus the AMP_ALLOWLIST_ADD ... variables, parsed by
 * passes/amp_lists.c as AMP_AUTO does), --keep-fp32, --keep-io-types / --no-keep-io-types,
 * --loss, --loss-scale (with --loss-scale-init, --growth-interval, --growth-factor and
 * --backoff-factor), --calibration, --calib-max-activation and --calib-min-activation, and --explain, turned into the passes' AmpPassOptions. */
#ifndef AMPC_TOOLS_CLI_AMP_H
#define AMPC_TOOLS_CLI_AMP_H

#include <stdbool.h>
#include <stddef.h>

#include "ir.h"
#include "passes.h"

typedef struct AmpcAmp {
    AmpPassOptions po;      /* filled as options are read; list_edits/keep_fp32 point below */
    AmpListEdit *edits;     /* malloc'd: command-line edits, then the environment's */
    size_t n_edits;
    const char **keep;      /* malloc'd --keep-fp32 globs */
    size_t n_keep;
    const char **explain;   /* malloc'd: each --explain NODE, in the order given */
    size_t n_explain;
    double loss_scale_init; /* --loss-scale-init (0: not given) */
    char summary[1024];     /* the amp and loss_scale passes' summaries, for the "wrote"
                               message */
    bool quiet;             /* -q: weight reports are not printed */
    struct AmpCalibStats *calib; /* --calibration STATS, read when the option is (po.calib) */
} AmpcAmp;

/* Handles the option called `name` (its long name) with argument `arg`. Returns -1 when
 * it is not an AMP option, else 0 or the exit code of a usage error (already printed). */
int ampc_amp_option(AmpcAmp *x, const char *name, const char *arg);
/* After all options: reads the list-edit variables, checks that no op is in two lists,
 * points po at the edits and globs. 0 or an exit code (message printed). */
int ampc_amp_finish(AmpcAmp *x);
/* With --explain NODE (each one given): 0 when m has a node of each name (in any graph),
 * else 2 with a message naming the first missing NODE and `path`; also 2 when `pipeline`
 * does not run the amp pass. */
int ampc_amp_check_explain(const AmpcAmp *x, AmpModel *m, const char *path, const char *pipeline);
void ampc_amp_free(AmpcAmp *x);

#endif
