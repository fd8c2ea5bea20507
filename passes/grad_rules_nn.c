/* Gradient rules of the normalisations and the losses: Softmax, LogSoftmax,
 * LayerNormalization, BatchNormalization, SoftmaxCrossEntropyLoss. */
#include <string.h>

#include "passes/grad_impl.h"

#define B(c) ((c)->b)
#define IN(c, i) ((c)->n->inputs[i])
#define OUT(c) ((c)->n->outputs[0])
#define G(c) ((c)->gy[0])

/* Only output 0 may carry a gradient (Mean, InvStdDev, log_prob have no rule yet). */
static bool only_first_output(AmpGradCtx *c) {
    for (int k = 1; k < c->n->n_outputs; k++)
        if (c->gy[k]) {
            amp_grad_unsupported(c, "the loss depends on an output other than the first, which has no rule yet");
            return false;
        }
    return true;
}

/* The axis attribute, normalised (opset 13 on: default -1). */
static int64_t axis_of(AmpGradCtx *c, int rank, int64_t dflt) {
    int64_t a = amp_node_attr_int(c->n, "axis", dflt);
    return a < 0 ? a + rank : a;
}

/* out = softmax(x): dx = out * (g - sum(g * out, axis)). */
void amp_grad_softmax(AmpGradCtx *c) {
    AmpBuilder *b = B(c);
    int r = amp_grad_rank(c, OUT(c));
    if (r < 0) return;
    int64_t axis = axis_of(c, r, -1);
    AmpValue *s = amp_build_reduce(b, "ReduceSum", "softmax_s", amp_build2(b, "Mul", "softmax_gy", G(c), OUT(c)), &axis, 1, 1);
    c->gx[0] = amp_build2(b, "Mul", "softmax_d", OUT(c), amp_build2(b, "Sub", "softmax_gs", G(c), s));
}

/* out = log_softmax(x): dx = g - exp(out) * sum(g, axis). */
void amp_grad_log_softmax(AmpGradCtx *c) {
    AmpBuilder *b = B(c);
    int r = amp_grad_rank(c, OUT(c));
    if (r < 0) return;
    int64_t axis = axis_of(c, r, -1);
    AmpValue *s = amp_build_reduce(b, "ReduceSum", "logsoftmax_s", G(c), &axis, 1, 1);
    AmpValue *p = amp_build1(b, "Exp", "logsoftmax_p", OUT(c));
    c->gx[0] = amp_build2(b, "Sub", "logsoftmax_d", G(c), amp_build2(b, "Mul", "logsoftmax_ps", p, s));
}

/* y = xhat * scale + bias over the axes from `axis` on, xhat = (x - mean) * rstd. The
 * statistics are computed again (the forward's optional outputs may be absent):
 * dxhat = g * scale; dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat));
 * dscale = sum of g * xhat over the leading axes; dbias = sum of g there. */
void amp_grad_layer_norm(AmpGradCtx *c) {
    if (!only_first_output(c)) return;
    AmpBuilder *b = B(c);
    AmpValue *x = IN(c, 0), *g = G(c);
    int r = amp_grad_rank(c, x);
    if (r < 0 || r > 64) return;
    int64_t axis = axis_of(c, r, -1), axes[64];
    size_t n = 0;
    for (int64_t a = axis; a < r; a++) axes[n++] = a;
    double eps = amp_node_attr_float(c->n, "epsilon", 1e-5f);
    AmpValue *mean = amp_build_reduce(b, "ReduceMean", "ln_mean", x, axes, n, 1);
    AmpValue *xc = amp_build2(b, "Sub", "ln_xc", x, mean);
    AmpValue *var = amp_build_reduce(b, "ReduceMean", "ln_var", amp_build2(b, "Mul", "ln_xc2", xc, xc), axes, n, 1);
    AmpValue *std = amp_build1(b, "Sqrt", "ln_std", amp_build2(b, "Add", "ln_vareps", var, amp_grad_scalar_like(c, x, eps)));
    AmpValue *rstd = amp_build2(b, "Div", "ln_rstd", amp_grad_scalar_like(c, x, 1.0), std);
    AmpValue *xhat = amp_build2(b, "Mul", "ln_xhat", xc, rstd);
    if (amp_grad_wants(c, 0)) {
        AmpValue *dxhat = amp_build2(b, "Mul", "ln_dxhat", g, IN(c, 1));
        AmpValue *m1 = amp_build_reduce(b, "ReduceMean", "ln_m1", dxhat, axes, n, 1);
        AmpValue *m2 = amp_build_reduce(b, "ReduceMean", "ln_m2", amp_build2(b, "Mul", "ln_dxx", dxhat, xhat), axes, n, 1);
        AmpValue *t = amp_build2(b, "Sub", "ln_t", amp_build2(b, "Sub", "ln_t1", dxhat, m1), amp_build2(b, "Mul", "ln_t2", xhat, m2));
        c->gx[0] = amp_build2(b, "Mul", "ln_dx", t, rstd);
    }
    if (amp_grad_wants(c, 1)) c->gx[1] = amp_grad_unbroadcast(c, amp_build2(b, "Mul", "ln_dscale", g, xhat), IN(c, 1));
    if (amp_grad_wants(c, 2)) c->gx[2] = amp_grad_unbroadcast(c, g, IN(c, 2));
}

/* loss = SoftmaxCrossEntropyLoss(scores [N, C, d...], labels [N, d...]):
 * dscores = (softmax(scores, 1) - onehot(labels, C, axis 1)) * g, g divided by the
 * label count for reduction "mean" and broadcast over C for "none". */
void amp_grad_softmax_ce(AmpGradCtx *c) {
    if (!only_first_output(c)) return;
    AmpNode *n = c->n;
    if (n->n_inputs >= 3 && n->inputs[2]) {
        amp_grad_unsupported(c, "class weights have no gradient rule yet");
        return;
    }
    if (amp_node_attr(n, "ignore_index")) {
        amp_grad_unsupported(c, "ignore_index has no gradient rule yet");
        return;
    }
    AmpBuilder *b = B(c);
    AmpValue *x = IN(c, 0), *labels = IN(c, 1), *g = G(c);
    int dt = x->type.dtype;
    AmpValue *sin[1] = {x};
    AmpNode *sm = amp_build_start(b, "Softmax", "sce_p", sin, 1, 1);
    amp_build_attr_int(b, sm, "axis", 1);
    AmpValue *p = amp_build_end(b, sm);
    static const int64_t one[1] = {1}, off_on[2] = {0, 1};
    AmpValue *depth = amp_build2(b, "Gather", "sce_depth", amp_build1(b, "Shape", "sce_shape", x),
                                 amp_build_scalar(b, "sce_axis", AMP_DT_INT64, 1));
    /* OneHot takes its output type from the values: float ones make the [N, C, d...]
     * one-hot float at once (an int64 one and its cast would take three times the bytes,
     * the largest tensors of a language model's step: C is the vocabulary). */
    AmpValue *values = amp_build_cast(b, "sce_values", amp_build_ints(b, "sce_values_i", off_on, 2), dt);
    AmpValue *oin[3] = {labels, depth, values};
    AmpNode *oh = amp_build_start(b, "OneHot", "sce_onehot", oin, 3, 1);
    amp_build_attr_int(b, oh, "axis", 1);
    AmpValue *onehot = amp_build_end(b, oh);
    AmpValue *diff = amp_build2(b, "Sub", "sce_diff", p, onehot);
    const char *red = amp_node_attr_string(n, "reduction", "mean");
    if (red && strcmp(red, "none") == 0) {
        g = amp_build_axes_op(b, "Unsqueeze", "sce_g", g, one, 1);
    } else if (!red || strcmp(red, "mean") == 0) {
        AmpValue *count = amp_build_cast(b, "sce_count", amp_build1(b, "Size", "sce_size", labels), dt);
        g = amp_build2(b, "Div", "sce_g", g, count);
    }
    c->gx[0] = amp_build2(b, "Mul", "sce_d", diff, g);
}

/* BatchNormalization: y = xhat * scale + bias per channel (axis 1), xhat = (x - mean) * rstd,
 * rstd = 1 / sqrt(var + eps). In inference form (the running mean and var fixed: an export
 * in eval mode) dx = g * scale * rstd. In training form (training_mode 1, --train-mode)
 * mean and var are the batch's, so as LayerNormalization's over the batch and spatial
 * axes: dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = g * scale.
 * Both: dscale = sum of g * xhat, dbias = sum of g over every axis but the channels. */
void amp_grad_batch_norm(AmpGradCtx *c) {
    if (!only_first_output(c)) return;
    AmpNode *n = c->n;
    bool train = amp_node_attr_int(n, "training_mode", 0) != 0;
    AmpBuilder *b = B(c);
    AmpValue *x = IN(c, 0), *g = G(c);
    int r = amp_grad_rank(c, x);
    if (r < 0) return;
    if (r < 2 || r > 64 || n->n_inputs < 5) {
        amp_grad_unsupported(c, "the input is not [N, C, ...] with its five inputs");
        return;
    }
    int64_t spatial[64], axes[64];
    size_t ns = 0, na = 0;
    for (int i = 0; i < r; i++) {
        if (i >= 2) spatial[ns++] = i - 1; /* a [C] vector made [C, 1, ...] */
        if (i != 1) axes[na++] = i;
    }
#define CH(v, what) (ns ? amp_build_axes_op(b, "Unsqueeze", what, v, spatial, ns) : (v))
    AmpValue *eps = amp_grad_scalar_like(c, x, amp_node_attr_float(n, "epsilon", 1e-5f)), *xc, *rstd;
    if (train) {
        xc = amp_build2(b, "Sub", "bn_xc", x, amp_build_reduce(b, "ReduceMean", "bn_bmean", x, axes, na, 1));
        AmpValue *var = amp_build_reduce(b, "ReduceMean", "bn_bvar", amp_build2(b, "Mul", "bn_xc2", xc, xc), axes, na, 1);
        rstd = amp_build2(b, "Div", "bn_rstd", amp_grad_scalar_like(c, x, 1.0),
                          amp_build1(b, "Sqrt", "bn_std", amp_build2(b, "Add", "bn_vareps", var, eps)));
    } else {
        AmpValue *r1 = amp_build2(b, "Div", "bn_rstd", amp_grad_scalar_like(c, x, 1.0),
                                  amp_build1(b, "Sqrt", "bn_std", amp_build2(b, "Add", "bn_vareps", IN(c, 4), eps)));
        xc = amp_build2(b, "Sub", "bn_xc", x, CH(IN(c, 3), "bn_mean"));
        rstd = CH(r1, "bn_rstdc");
    }
    AmpValue *xhat = amp_grad_wants(c, 1) || train ? amp_build2(b, "Mul", "bn_xhat", xc, rstd) : NULL;
    if (amp_grad_wants(c, 0)) {
        AmpValue *dxhat = amp_build2(b, "Mul", "bn_dxhat", g, CH(IN(c, 1), "bn_scale"));
        if (train) {
            AmpValue *m1 = amp_build_reduce(b, "ReduceMean", "bn_m1", dxhat, axes, na, 1);
            AmpValue *m2 = amp_build_reduce(b, "ReduceMean", "bn_m2", amp_build2(b, "Mul", "bn_dxx", dxhat, xhat), axes, na, 1);
            dxhat = amp_build2(b, "Sub", "bn_t", amp_build2(b, "Sub", "bn_t1", dxhat, m1), amp_build2(b, "Mul", "bn_t2", xhat, m2));
        }
        c->gx[0] = amp_build2(b, "Mul", "bn_dx", dxhat, rstd);
    }
    if (amp_grad_wants(c, 1))
        c->gx[1] = amp_build_reduce(b, "ReduceSum", "bn_dscale", amp_build2(b, "Mul", "bn_gx", g, xhat), axes, na, 0);
    if (amp_grad_wants(c, 2)) c->gx[2] = amp_build_reduce(b, "ReduceSum", "bn_dbias", g, axes, na, 0);
#undef CH
}
