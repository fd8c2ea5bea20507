/* `ampc grad` (cli_grad.h): the inference model in, the training model out (passes/grad.h does the
 * work); options from the one table, cli_options.h. */
#include "cli_grad.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_options.h"
#include "ir.h"
#include "run.h"

int ampc_parse_grad_value(int val, const char *arg, GradArgs *g) {
    switch (val) {
    case OPT_OUTPUT: g->out = arg; return AMP_OK;
    case OPT_QUIET: g->quiet = true; return AMP_OK;
    case OPT_LOSS:
        if (strcmp(arg, "cross-entropy") == 0)
            g->opt.loss = AMP_GRAD_LOSS_CROSS_ENTROPY;
        else if (strcmp(arg, "mse") == 0)
            g->opt.loss = AMP_GRAD_LOSS_MSE;
        else if (!*arg)
            return ampc_usage_error("grad: --loss: expected cross-entropy, mse or an output's name");
        else
            g->opt.loss = AMP_GRAD_LOSS_OUTPUT, g->opt.loss_name = arg;
        return AMP_OK;
    case OPT_LOSS_OUTPUT: g->opt.output = arg; return AMP_OK;
    case OPT_LABELS: g->opt.labels = arg; return AMP_OK;
    case OPT_OPTIMIZER:
        if (strcmp(arg, "sgd") == 0) {
            g->opt.optimizer = AMP_GRAD_OPT_SGD;
            return AMP_OK;
        }
        if (strcmp(arg, "momentum") == 0 || strcmp(arg, "adam") == 0)
            return ampc_usage_error("grad: --optimizer %s: not supported yet (sgd is)", arg);
        return ampc_usage_error("grad: --optimizer '%s': expected sgd", arg);
    case OPT_LR: {
        char *end;
        errno = 0;
        double lr = strtod(arg, &end);
        if (errno || end == arg || *end || !(lr > 0) || lr > 1e30)
            return ampc_usage_error("grad: --lr '%s': expected a number > 0", arg);
        g->opt.lr = lr;
        return AMP_OK;
    }
    case OPT_FREEZE:
        if (g->opt.n_freeze == AMPC_GRAD_MAX_FREEZE)
            return ampc_usage_error("grad: more than %d --freeze globs", AMPC_GRAD_MAX_FREEZE);
        g->freeze[g->opt.n_freeze++] = arg;
        g->opt.freeze = g->freeze;
        return AMP_OK;
    case OPT_TRAIN_MODE:
        g->opt.train_mode = true;
        return AMP_OK;
    default: return ampc_usage_error("grad: internal: unhandled option %d", val);
    }
}

int ampc_cmd_grad(GradArgs *g) {
    if (!g->out) return ampc_usage_error("grad: missing -o TRAIN (where the training model goes)");
    if (!*g->out) return ampc_usage_error("grad: -o: TRAIN is an empty path");
    AmpStatus st = {AMP_OK, ""};
    AmpModel *m = NULL;
    const char *shown = amp_model_path_shown(g->model);
    AmpCode rc = amp_model_load_file(g->model, NULL, &m, &st);
    AmpGradSummary sum = {0};
    if (!rc) rc = amp_grad_model(m, &g->opt, &sum, &st);
    if (!rc) rc = amp_verify_model(m, &st);
    AmpSaveOptions so = {.external = AMP_SAVE_EXTERNAL_AUTO, .value_info = true};
    if (!rc) rc = amp_model_save_file(m, g->out, &so, &st);
    if (rc) {
        ampc_say("%s: %s", shown, st.msg);
        amp_model_free(m);
        return rc;
    }
    if (!g->quiet) {
        printf("grad: loss '%s', %zu parameters with gradients and SGD updates", sum.loss, sum.n_params);
        if (sum.n_frozen) printf(", %zu frozen", sum.n_frozen);
        if (sum.n_unused) printf(", %zu the loss does not depend on (not bound)", sum.n_unused);
        if (sum.n_state) printf(", %zu running statistics bound (--train-mode)", sum.n_state);
        if (sum.opset_to != sum.opset_from) printf(", ai.onnx opset %lld -> %lld", (long long)sum.opset_from,
                                                   (long long)sum.opset_to);
        printf("; %zu nodes added -> %s\n", sum.n_nodes, amp_output_shown(g->out));
    }
    amp_model_free(m);
    return AMP_OK;
}
