/* `ampc grad`'s frame around the autodiff: the opset it needs, the loss appended to the
 * inference graph (cross-entropy, mse, or an output that is already one), then the
 * optimizer (grad_optim.c). */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/builder.h"
#include "passes/grad_parts.h"
#include "passes/pass.h"
#include "passes/training.h"

/* ScatterND's reduction (the embedding gradient) is opset 16: an older model is raised
 * to it by the opset_upgrade pass (which adapts the ops that changed on the way). */
#define GRAD_MIN_OPSET 16

static AmpCode raise_opset(AmpModel *m, AmpGradSummary *sum, AmpStatus *st) {
    sum->opset_from = sum->opset_to = amp_model_opset(m, "");
    if (sum->opset_from >= GRAD_MIN_OPSET) return AMP_OK;
    if (sum->opset_from == 0)
        return amp_fail(st, AMP_ERR_INPUT, "grad: the model imports no ai.onnx opset");
    AmpPassOptions po = {.opset_upgrade_to = GRAD_MIN_OPSET};
    AmpCode rc = amp_pass_opset_upgrade(m, &po, st);
    if (rc) return rc;
    sum->opset_to = amp_model_opset(m, "");
    if (sum->opset_to < GRAD_MIN_OPSET)
        return amp_fail(st, AMP_ERR_UNSUPPORTED, "grad: the model's ai.onnx opset %lld could not be raised to %d "
                        "(ScatterND's reduction, for embedding gradients)", (long long)sum->opset_from, GRAD_MIN_OPSET);
    return AMP_OK;
}

/* The output the loss reads: --output's, else the first float output. */
static AmpCode loss_input(AmpGraph *g, const AmpGradOptions *o, AmpValue **out, AmpStatus *st) {
    for (size_t i = 0; i < g->outputs.n; i++) {
        AmpValue *v = g->outputs.items[i].value;
        if (o->output ? strcmp(v->name, o->output) == 0 : amp_dtype_is_float(v->type.dtype)) {
            *out = v;
            if (v->type.kind != AMP_TYPE_TENSOR || !amp_dtype_is_float(v->type.dtype) || v->type.rank < 1)
                return amp_fail(st, AMP_ERR_INPUT, "grad: output '%s' is not a float tensor of known rank", v->name);
            return AMP_OK;
        }
    }
    if (o->output) return amp_fail(st, AMP_ERR_USAGE, "grad: the model has no output '%s'", o->output);
    return amp_fail(st, AMP_ERR_INPUT, "grad: the model has no float output to compute a loss from");
}

/* The graph input `name` of dtype, shaped like `like` but without its axis `drop` (-1:
 * none), made unless there; one there of another dtype is an error. */
static AmpCode data_input(AmpModel *m, const char *name, int dtype, const AmpValue *like, int drop, AmpValue **out,
                          AmpStatus *st) {
    AmpGraph *g = m->graph;
    AmpValue *v = amp_graph_lookup(g, name);
    if (v && !(v->flags & AMP_VALUE_INPUT))
        return amp_fail(st, AMP_ERR_INPUT, "grad: '%s' names a value that is not a graph input", name);
    if (v) {
        *out = v;
        if (v->type.kind != AMP_TYPE_TENSOR || v->type.dtype != dtype)
            return amp_fail(st, AMP_ERR_INPUT, "grad: input '%s' should be %s", name, amp_dtype_name(dtype));
        return AMP_OK;
    }
    v = amp_graph_value(g, name);
    if (!v || !amp_graph_add_input(g, v)) return amp_fail(st, AMP_ERR_INTERNAL, "grad: out of memory");
    v->type = like->type;
    v->type.dtype = dtype;
    if (drop >= 0) {
        AmpDim *d = amp_arena_calloc(&m->arena, (size_t)like->type.rank + 1, sizeof *d);
        if (!d) return amp_fail(st, AMP_ERR_INTERNAL, "grad: out of memory");
        int r = 0;
        for (int i = 0; i < like->type.rank; i++)
            if (i != drop) d[r++] = like->type.dims[i];
        v->type.rank = r;
        v->type.dims = d;
    }
    *out = v;
    return AMP_OK;
}

/* SoftmaxCrossEntropyLoss (mean) of logits y against labels t, named `name`: y's classes
 * on axis 1 as the op takes them, or on the last axis of a rank >= 3 y ([B, T, V], a
 * language model's logits), which is read as [B*T, V] against [B*T] labels, as
 * torch.nn.functional.cross_entropy(y.view(-1, V), t.view(-1)) does. */
static AmpNode *cross_entropy(AmpBuilder *b, const char *name, AmpValue *y, AmpValue *t, int axis) {
    int r = y->type.rank;
    AmpValue *in[2] = {y, t};
    if (axis != 1) {
        int64_t v = y->type.dims[r - 1].value;
        if (v <= 0) {
            amp_builder_fail(b, AMP_ERR_UNSUPPORTED, "grad: cross-entropy over the last axis of '%s' needs its size "
                             "(the number of classes) to be static", y->name);
            return NULL;
        }
        const int64_t to_rows[2] = {-1, v}, to_one[1] = {-1};
        in[0] = amp_build2(b, "Reshape", "rows", y, amp_build_ints(b, "rows_shape", to_rows, 2));
        in[1] = amp_build2(b, "Reshape", "row_labels", t, amp_build_ints(b, "labels_shape", to_one, 1));
    }
    AmpNode *n = amp_build_start_named(b, "SoftmaxCrossEntropyLoss", name, in, 2, 1);
    amp_build_attr_string(b, n, "reduction", "mean");
    return n;
}

/* Appends the loss and returns it (a graph output). */
static AmpCode add_loss(AmpModel *m, const AmpGradOptions *o, AmpValue **loss, AmpStatus *st) {
    AmpGraph *g = m->graph;
    if (o->loss == AMP_GRAD_LOSS_OUTPUT) {
        AmpCode rc = amp_find_loss(m, o->loss_name, loss, st);
        if (rc) return rc;
        AmpValue *l = *loss;
        bool one = l->type.kind == AMP_TYPE_TENSOR && l->type.rank >= 0;
        for (int i = 0; one && i < l->type.rank; i++) one = l->type.dims[i].value == 1;
        if (!one || !amp_dtype_is_float(l->type.dtype) || !(l->flags & AMP_VALUE_OUTPUT))
            return amp_fail(st, AMP_ERR_INPUT, "grad: loss '%s' is not a float output of one element", l->name);
        return AMP_OK;
    }
    AmpValue *y = NULL, *t = NULL;
    AmpCode rc = loss_input(g, o, &y, st);
    if (rc) return rc;
    bool ce = o->loss == AMP_GRAD_LOSS_CROSS_ENTROPY;
    int axis = o->class_axis == 1 ? 1 : y->type.rank - 1;
    if (ce && y->type.rank < 2)
        return amp_fail(st, AMP_ERR_INPUT, "grad: cross-entropy reads logits of rank 2 or more ([N, C]); output '%s' "
                        "has rank %d", y->name, y->type.rank);
    const char *tname = o->labels ? o->labels : ce ? "labels" : "target";
    if ((rc = data_input(m, tname, ce ? AMP_DT_INT64 : y->type.dtype, y, ce ? axis : -1, &t, st))) return rc;
    AmpBuilder b;
    amp_builder_init(&b, g, "loss/");
    const char *name = amp_graph_lookup(g, "loss") ? amp_graph_unique_name(g, "loss") : "loss";
    AmpValue *in[2];
    AmpNode *n;
    if (ce) {
        n = cross_entropy(&b, name, y, t, axis);
    } else {
        AmpValue *d = amp_build2(&b, "Sub", "diff", y, t);
        in[0] = amp_build2(&b, "Mul", "sq", d, d);
        n = amp_build_start_named(&b, "ReduceMean", name, in, 1, 1);
        amp_build_attr_int(&b, n, "keepdims", 0);
    }
    *loss = amp_build_end(&b, n);
    if ((rc = amp_builder_status(&b, st))) return rc;
    if (!amp_graph_add_output(g, *loss)) return amp_fail(st, AMP_ERR_INTERNAL, "grad: out of memory");
    return AMP_OK;
}

AmpCode amp_grad_model(AmpModel *m, const AmpGradOptions *opt, AmpGradSummary *sum, AmpStatus *st) {
    static const AmpGradOptions defaults = {0};
    AmpGradSummary ignore;
    if (!opt) opt = &defaults;
    if (!sum) sum = &ignore;
    *sum = (AmpGradSummary){0};
    if (!m->graph) return amp_fail(st, AMP_ERR_INPUT, "grad: the model has no graph");
    if (m->n_training) return amp_fail(st, AMP_ERR_INPUT, "grad: the model is a training graph already (training_info)");
    AmpCode rc = raise_opset(m, sum, st);
    if (!rc) rc = amp_graph_toposort(m->graph, st);
    if (!rc) rc = amp_infer_model(m, st);
    AmpGradState *state = NULL;
    size_t n_state = 0;
    if (!rc) rc = amp_grad_train_mode(m, opt->train_mode, &state, &n_state, st);
    sum->n_running = n_state;
    AmpValue *loss = NULL;
    if (!rc) rc = add_loss(m, opt, &loss, st);
    if (rc) {
        free(state);
        return rc;
    }
    sum->loss = loss->name;
    AmpGradParam *ps = NULL;
    size_t n = 0;
    if ((rc = amp_grad_backward(m, loss, opt, sum, &ps, &n, st))) {
        free(state);
        return rc;
    }
    sum->n_params = n;
    /* --train-mode's running statistics are float initializers the loss does not
     * differentiate, so the backward counted those not frozen as unused: they are bound. */
    for (size_t i = 0; i < n_state; i++) {
        bool frozen = false;
        for (size_t k = 0; k < opt->n_freeze && !frozen; k++) frozen = fnmatch(opt->freeze[k], state[i].init->name, 0) == 0;
        if (!frozen && sum->n_unused) sum->n_unused--;
    }
    if (!n) {
        free(ps), free(state);
        return amp_fail(st, AMP_ERR_INPUT, "grad: loss '%s' depends on no trainable parameter (float initializers of "
                        "rank >= 1 not frozen)", loss->name);
    }
    if (opt->optimizer != AMP_GRAD_OPT_NONE) {
        rc = amp_grad_add_optimizer(m, opt, ps, n, state, n_state, sum, st);
    } else {
        for (size_t i = 0; i < n && !rc; i++)
            if (!amp_graph_add_output(m->graph, ps[i].grad)) rc = amp_fail(st, AMP_ERR_INTERNAL, "grad: out of memory");
    }
    free(ps), free(state);
    m->types_inferred = false;
    return rc;
}
