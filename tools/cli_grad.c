/* `ampc grad` (cli_grad.h): the inference model in, the training model out (passes/grad.h does the
 * work); options from the one table, cli_options.h. */
#include "tools/cli_grad.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli_options.h"
#include "ir/ir.h"
#include "tools/run.h"
#include "tools/cli_say.h"
#include "tools/cli_values.h"

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
    case OPT_CLASS_AXIS:
        if (strcmp(arg, "1") == 0) g->opt.class_axis = 1;
        else if (strcmp(arg, "-1") == 0) g->opt.class_axis = -1;
        else return ampc_usage_error("grad: --class-axis '%s': expected 1 or -1", arg);
        return AMP_OK;
    case OPT_OPTIMIZER:
        if (strcmp(arg, "sgd") == 0)
            g->opt.optimizer = AMP_GRAD_OPT_SGD;
        else if (strcmp(arg, "momentum") == 0)
            g->opt.optimizer = AMP_GRAD_OPT_MOMENTUM;
        else if (strcmp(arg, "adam") == 0)
            g->opt.optimizer = AMP_GRAD_OPT_ADAM;
        else
            return ampc_usage_error("grad: --optimizer '%s': expected sgd, momentum or adam", arg);
        return AMP_OK;
    /* The numbers: their rows of tools/cli_values.c, as every command taking them checks them. */
    case OPT_LR: return ampc_flag_real(val, arg, &g->opt.lr);
    case OPT_MOMENTUM: return ampc_flag_real(val, arg, &g->opt.momentum);
    case OPT_BETA1: return ampc_flag_real(val, arg, &g->opt.beta1);
    case OPT_BETA2: return ampc_flag_real(val, arg, &g->opt.beta2);
    case OPT_EPS: return ampc_flag_real(val, arg, &g->opt.eps);
    case OPT_WEIGHT_DECAY: return ampc_flag_real(val, arg, &g->opt.weight_decay);
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
    const AmpGradOptions *o = &g->opt;
    if (o->momentum > 0 && o->optimizer != AMP_GRAD_OPT_MOMENTUM)
        return ampc_usage_error("grad: --momentum is for --optimizer momentum");
    if ((o->beta1 > 0 || o->beta2 > 0 || o->eps > 0) && o->optimizer != AMP_GRAD_OPT_ADAM)
        return ampc_usage_error("grad: --beta1, --beta2 and --eps are for --optimizer adam");
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
        static const char *const opt_names[] = {"SGD", "momentum", "Adam"};
        printf("grad: loss '%s', %zu parameters with gradients and %s%s updates", sum.loss, sum.n_params,
               opt_names[o->optimizer < 3 ? o->optimizer : 0], o->weight_decay > 0 ? " (weight decay)" : "");
        if (sum.n_state) printf(", %zu optimizer state tensors", sum.n_state);
        if (sum.n_frozen) printf(", %zu frozen", sum.n_frozen);
        if (sum.n_unused) printf(", %zu the loss does not depend on (not bound)", sum.n_unused);
        if (sum.n_running) printf(", %zu running statistics bound (--train-mode)", sum.n_running);
        if (sum.opset_to != sum.opset_from) printf(", ai.onnx opset %lld -> %lld", (long long)sum.opset_from,
                                                   (long long)sum.opset_to);
        printf("; %zu nodes added -> %s\n", sum.n_nodes, amp_output_shown(g->out));
    }
    amp_model_free(m);
    return AMP_OK;
}
