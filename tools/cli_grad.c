/* `ampc grad` (cli_grad.h): the inference model in, the training model out (runtime/grad_api.c
 * does the work, as for the C API); options from the grad table, passes/grad_options.c, by
 * their flags' names (tools/cli_options.h). */
#include "tools/cli_grad.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli_options.h"
#include "ir/ir.h"
#include "runtime/grad_api.h"
#include "tools/run.h"
#include "tools/cli_say.h"
#include "tools/cli_usage.h"

int ampc_parse_grad_value(int val, const char *arg, GradArgs *g) {
    if (val == OPT_OUTPUT) return g->out = arg, AMP_OK;
    if (val == OPT_QUIET) return g->quiet = true, AMP_OK;
    const OptRow *r = ampc_row_by_val(val);
    const AmpGradFlag *d = r ? amp_grad_flag_find(r->name) : NULL;
    if (!d) return ampc_usage_error("grad: internal: unhandled option %d", val);
    char label[64];
    snprintf(label, sizeof label, "--%s", r->name);
    AmpStatus st = {AMP_OK, ""};
    /* "--lr 'x': expected ...", as every command taking the flag says it (option parity). */
    return amp_grad_arg_set(&g->args, d, label, arg, &st) ? ampc_usage_error("%s", st.msg) : AMP_OK;
}

int ampc_cmd_grad(GradArgs *g) {
    if (!g->out) return ampc_usage_error("grad: missing -o TRAIN (where the training model goes)");
    if (!*g->out) return ampc_usage_error("grad: -o: TRAIN is an empty path");
    AmpStatus st = {AMP_OK, ""};
    if (amp_grad_args_check(&g->args, &st)) return ampc_usage_error("grad: %s", st.msg);
    char line[1024];
    AmpCode rc = amp_grad_run(g->model, NULL, 0, NULL, &g->args, g->out, NULL, NULL, line, sizeof line, &st);
    amp_grad_args_free(&g->args);
    if (rc) {
        ampc_say("%s: %s", amp_model_path_shown(g->model), st.msg);
        return rc;
    }
    if (!g->quiet) printf("grad: %s -> %s\n", line, amp_output_shown(g->out));
    return AMP_OK;
}
