/* `ampc grad MODEL -o TRAIN` (tools/cli_grad.c): a training graph from an FP32 inference
 * export (passes/grad.h), written as a standard ONNX model. */
#ifndef AMPC_TOOLS_CLI_GRAD_H
#define AMPC_TOOLS_CLI_GRAD_H

#include <stdbool.h>

#include "passes/grad_options.h"

typedef struct GradArgs {
    const char *model, *out;
    AmpGradArgs args; /* the options of the grad table (passes/grad_options.c) */
    bool quiet;
} GradArgs;

/* Checks and stores the value `arg` of option `val` (an OPT_ of cli_options.h) for
 * `ampc grad`: AMP_OK, or the exit code of a usage error (said). */
int ampc_parse_grad_value(int val, const char *arg, GradArgs *g);
/* Loads, differentiates, verifies and saves (runtime/grad_api.c, as the C API does); returns
 * the exit code. */
int ampc_cmd_grad(GradArgs *g);

#endif
