/* `ampc grad MODEL -o TRAIN` (tools/cli_grad.c): a training graph from an FP32 inference
 * export (passes/grad.h), written as a standard ONNX model. */
#ifndef AMPC_TOOLS_CLI_GRAD_H
#define AMPC_TOOLS_CLI_GRAD_H

#include <stdbool.h>

#include "passes/grad.h"

enum { AMPC_GRAD_MAX_FREEZE = 64 };

typedef struct GradArgs {
    const char *model, *out;
    AmpGradOptions opt;
    const char *freeze[AMPC_GRAD_MAX_FREEZE];
    bool quiet;
} GradArgs;

/* Checks and stores the value `arg` of option `val` (an OPT_ of cli_options.h) for
 * `ampc grad`: AMP_OK, or the exit code of a usage error (said). */
int ampc_parse_grad_value(int val, const char *arg, GradArgs *g);
/* Loads, differentiates, verifies and saves; returns the exit code. */
int ampc_cmd_grad(GradArgs *g);

#endif
