/* The AMP options of `ampc MODEL -o OUT` (tools/cli_amp.c): --precision, --level, the list
 * edits, --keep-fp32, the loss scaling and calibration options, parsed by the library's
 * option table (passes/options.c, which AMP_AUTO and the C API share; the CLI reads the
 * conversion's variables, AMP_PRECISION ... AMP_DENYLIST_REMOVE, there too, as AMP_AUTO
 * sessions do), and --explain, the CLI's own. */
#ifndef AMPC_TOOLS_CLI_AMP_H
#define AMPC_TOOLS_CLI_AMP_H

#include <stdbool.h>
#include <stddef.h>

#include "ir/ir.h"
#include "passes/options.h"
#include "passes/passes.h"

typedef struct AmpcAmp {
    AmpOptions o;           /* as the library's option table reads them (o.po: the passes') */
    const char **explain;   /* malloc'd: each --explain NODE, in the order given */
    size_t n_explain;
    char summary[1024];     /* the amp and loss_scale passes' summaries, for the "wrote"
                               message */
    bool quiet;             /* -q: weight reports are not printed */
} AmpcAmp;

/* Handles the option called `name` (its long name) with argument `arg`. Returns -1 when
 * it is not an AMP option, else 0 or the exit code of a usage error (already printed). */
int ampc_amp_option(AmpcAmp *x, const char *name, const char *arg);
/* After all options: reads the conversion's variables (those of AMP_DOOR_CONVERT; a flag
 * given wins over its variable, list edits add up), decides auto, checks that no op is in
 * two lists, points po at the edits and globs. 0 or an exit code (message printed). */
int ampc_amp_finish(AmpcAmp *x);
/* With --explain NODE (each one given): 0 when m has a node of each name (in any graph),
 * else 2 with a message naming the first missing NODE and `path`; also 2 when `pipeline`
 * does not run the amp pass. */
int ampc_amp_check_explain(const AmpcAmp *x, AmpModel *m, const char *path, const char *pipeline);
void ampc_amp_free(AmpcAmp *x);
/* The variables every command reads (those of AMP_DOOR_COMMAND: AMP_THREADS, which sets
 * the thread knob), by the table: 0, or the exit code of a usage error (printed). */
int ampc_command_env(void);

#endif
