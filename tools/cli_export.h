/* `ampc export TRAIN -o INFER` (tools/cli_export.c): the inference model of a training
 * model, with the weights of a checkpoint (amp_session_export, ampc.h). */
#ifndef AMPC_TOOLS_CLI_EXPORT_H
#define AMPC_TOOLS_CLI_EXPORT_H

#include <stdbool.h>

typedef struct ExportArgs {
    const char *model, *out;
    const char *load_state;   /* --load-state CKPT, or NULL */
    const char *precision;    /* --precision as given, or NULL (fp32) */
    const char *loss;         /* --loss NAME, or NULL */
    bool quiet;
} ExportArgs;

struct RunArgs;
/* Checks and stores the value `arg` of option `val` (an OPT_ of cli_options.h) for
 * `ampc export`: AMP_OK, or the exit code of a usage error (said). --optimizer,
 * --checkpoint and --lr go to ra, as `ampc run` takes them. */
int ampc_parse_export_value(int val, const char *arg, ExportArgs *e, struct RunArgs *ra);
/* Opens TRAIN in a session (ra: the onnxruntime-training artifacts), loads the
 * checkpoint, exports; returns the exit code. */
int ampc_cmd_export(const ExportArgs *e, const struct RunArgs *ra);

#endif
