/* The softmax, normalisation and loss families' attributes, every backend's
 * (ops/norm_attrs.h). */
#include <string.h>

#include "ir/kernel.h" /* amp_node_fail */
#include "ops/kernel_out.h"
#include "ops/norm_attrs.h"

/* Softmax, LogSoftmax, Hardmax and com.microsoft SoftmaxGrad_13 (whose opset is its
 * domain's). */
AmpCode amp_softmax_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    AmpSoftmaxAttrs a = {.per_axis = n->op == AMP_OP_Ms_SoftmaxGrad_13 || opset >= 13};
    a.axis = amp_node_attr_int(n, "axis", a.per_axis ? -1 : 1);
    return amp_prep_out(&a, sizeof a, attrs, st);
}

AmpCode amp_softmax_layout(AmpKernelCtx *k, const AmpSoftmaxAttrs *attr, const AmpBuf *x, uint64_t *outer,
                           uint64_t *d, uint64_t *inner) {
    int64_t a = attr->axis;
    int axis;
    if (attr->per_axis) {
        if (!amp_norm_axis(a, x->rank, &axis))
            return amp_kernel_fail(k, AMP_ERR_INPUT, "axis %lld is out of range for rank %d", (long long)a, x->rank);
        *outer = amp_shape_nelem(axis, x->dims);
        *d = (uint64_t)x->dims[axis];
        *inner = amp_shape_nelem(x->rank - axis - 1, x->dims + axis + 1);
        return AMP_OK;
    }
    if (a == x->rank) axis = x->rank;
    else if (!amp_norm_axis(a, x->rank, &axis))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "axis %lld is out of range for rank %d", (long long)a, x->rank);
    *outer = amp_shape_nelem(axis, x->dims);
    *d = amp_shape_nelem(x->rank - axis, x->dims + axis);
    *inner = 1;
    return AMP_OK;
}

AmpCode amp_softmax_geom(AmpKernelCtx *k, void *geom, bool *made) {
    (void)made;
    AmpSoftmaxGeom *g = geom;
    const AmpBuf *x = k->n_in > 0 ? k->in[0] : NULL, *y = x; /* the rows: X, or SoftmaxGrad_13's Y */
    if (k->node->op == AMP_OP_Ms_SoftmaxGrad_13) {
        y = k->n_in > 1 ? k->in[1] : NULL;
        if (!x || !y) return amp_kernel_fail(k, AMP_ERR_INPUT, "SoftmaxGrad_13 takes dY and Y");
        bool same = x->rank == y->rank;
        for (int i = 0; same && i < x->rank; i++) same = x->dims[i] == y->dims[i];
        if (!same) return amp_kernel_fail(k, AMP_ERR_INPUT, "dY and Y must have the same shape");
    } else if (!x) {
        return amp_kernel_fail(k, AMP_ERR_INPUT, "the input is missing");
    }
    AmpCode rc = amp_softmax_layout(k, k->attrs, y, &g->outer, &g->d, &g->inner);
    return rc ? rc : amp_geom_check(k, 0, x->dtype, x->rank, x->dims);
}

AmpCode amp_layernorm_geom(AmpKernelCtx *k, void *geom, bool *made) {
    (void)made;
    AmpLayerNormGeom *g = geom;
    const AmpNormAttrs *na = k->attrs;
    const AmpBuf *x = k->n_in > 0 ? k->in[0] : NULL, *sc = k->n_in > 1 ? k->in[1] : NULL;
    if (!x || !sc) return amp_kernel_fail(k, AMP_ERR_INPUT, "X and Scale are required");
    if (!amp_norm_axis(na->axis, x->rank, &g->axis))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "axis %lld is out of range for rank %d", (long long)na->axis, x->rank);
    g->rows = amp_shape_nelem(g->axis, x->dims);
    g->cols = amp_shape_nelem(x->rank - g->axis, x->dims + g->axis);
    int64_t sd[AMP_MAX_RANK];
    for (int d = 0; d < x->rank; d++) sd[d] = d < g->axis ? x->dims[d] : 1;
    AmpCode rc = amp_geom_check(k, 0, x->dtype, x->rank, x->dims);
    for (int i = 1; !rc && i < 3; i++) rc = amp_geom_check(k, i, AMP_DT_FLOAT, x->rank, sd);
    return rc;
}

/* A per-channel (or per-group) parameter: present, 1-D of len elements. */
static AmpCode param_vec(AmpKernelCtx *k, const AmpBuf *p, uint64_t len, const char *what) {
    if (!p) return amp_kernel_fail(k, AMP_ERR_INPUT, "%s is required", what);
    if (p->rank != 1 || p->nelem != len)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "%s must be 1-D with %llu elements", what, (unsigned long long)len);
    return AMP_OK;
}

AmpCode amp_batchnorm_geom(AmpKernelCtx *k, void *geom, bool *made) {
    (void)made;
    AmpBatchNormGeom *g = geom;
    const AmpBuf *in[5];
    for (int i = 0; i < 5; i++) in[i] = i < k->n_in ? k->in[i] : NULL;
    const AmpBuf *x = in[0];
    if (!x) return amp_kernel_fail(k, AMP_ERR_INPUT, "X is required");
    if (x->rank < 2) return amp_kernel_fail(k, AMP_ERR_INPUT, "X must be (N, C, ...), has rank %d", x->rank);
    g->n = (uint64_t)x->dims[0];
    g->c = (uint64_t)x->dims[1];
    g->s = amp_shape_nelem(x->rank - 2, x->dims + 2);
    static const char *names[5] = {"X", "scale", "B", "input_mean", "input_var"};
    for (int i = 1; i < 5; i++) {
        AmpCode rc = param_vec(k, in[i], g->c, names[i]);
        if (rc) return rc;
    }
    /* Y, then running mean and var, saved mean and var (before opset 14), each typed as
     * input_mean or input_var */
    int64_t cd[1] = {(int64_t)g->c};
    AmpCode rc = amp_geom_check(k, 0, x->dtype, x->rank, x->dims);
    for (int i = 1; !rc && i < 5; i++) rc = amp_geom_check(k, i, in[i % 2 ? 3 : 4]->dtype, 1, cd);
    return rc;
}

AmpCode amp_layernorm_grad_geom(AmpKernelCtx *k, void *geom, bool *made) {
    (void)made;
    AmpLayerNormGeom *g = geom;
    const AmpNormAttrs *na = k->attrs;
    const AmpBuf *in[5];
    for (int i = 0; i < 5; i++) in[i] = i < k->n_in ? k->in[i] : NULL;
    if (!in[0] || !in[1] || !in[2]) return amp_kernel_fail(k, AMP_ERR_INPUT, "Y_grad, X and scale are required");
    const AmpBuf *x = in[1], *sc = in[2];
    if (!amp_norm_axis(na->axis, x->rank, &g->axis))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "axis %lld is out of range for rank %d", (long long)na->axis, x->rank);
    g->rows = amp_shape_nelem(g->axis, x->dims);
    g->cols = amp_shape_nelem(x->rank - g->axis, x->dims + g->axis);
    if (in[0]->nelem != x->nelem) return amp_kernel_fail(k, AMP_ERR_INPUT, "Y_grad must be shaped like X");
    if (sc->nelem != g->cols)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "scale must have one element per normalised column");
    for (int i = 3; i < 5; i++)
        if (in[i] && in[i]->nelem != g->rows)
            return amp_kernel_fail(k, AMP_ERR_INPUT, "mean and inv_std_dev must have one element per row");
    AmpCode rc = amp_geom_check(k, 0, x->dtype, x->rank, x->dims);
    for (int i = 1; !rc && i < 3; i++) rc = amp_geom_check(k, i, sc->dtype, sc->rank, sc->dims);
    return rc;
}

AmpCode amp_groupnorm_geom(AmpKernelCtx *k, void *geom, bool *made) {
    (void)made;
    AmpGroupNormGeom *g = geom;
    const AmpBuf *in[3];
    for (int i = 0; i < 3; i++) in[i] = i < k->n_in ? k->in[i] : NULL;
    const AmpBuf *x = in[0], *sc = in[1];
    if (!x || x->rank < 2) return amp_kernel_fail(k, AMP_ERR_INPUT, "X must be (N, C, ...)");
    g->n = (uint64_t)x->dims[0];
    g->c = (uint64_t)x->dims[1];
    g->s = amp_shape_nelem(x->rank - 2, x->dims + 2);
    g->groups = g->c;
    g->per_group = false;
    if (k->node->op == AMP_OP_GroupNormalization) {
        const AmpNormAttrs *na = k->attrs;
        g->groups = (uint64_t)na->groups; /* > 0: prepare checked */
        g->per_group = k->opset < 21;
        if (sc && sc->nelem != (g->per_group ? g->groups : g->c) && sc->nelem == (g->per_group ? g->c : g->groups))
            g->per_group = !g->per_group;
    }
    if (g->groups == 0 || g->c % g->groups)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "%llu channels do not split into %llu groups",
                               (unsigned long long)g->c, (unsigned long long)g->groups);
    uint64_t len = g->per_group ? g->groups : g->c;
    AmpCode rc = param_vec(k, in[1], len, "scale");
    if (!rc) rc = param_vec(k, in[2], len, "bias");
    return rc ? rc : amp_geom_check(k, 0, x->dtype, x->rank, x->dims);
}

AmpCode amp_axis_norm_geom(AmpKernelCtx *k, void *geom, bool *made) {
    (void)made;
    AmpAxisGeom *g = geom;
    const AmpBuf *x = k->n_in > 0 ? k->in[0] : NULL;
    int axis = 1;
    if (k->node->op == AMP_OP_LRN) {
        if (!x || x->rank < 2) return amp_kernel_fail(k, AMP_ERR_INPUT, "X must be (N, C, ...)");
    } else {
        const AmpNormAttrs *na = k->attrs;
        if (!x) return amp_kernel_fail(k, AMP_ERR_INPUT, "the input is missing");
        if (!amp_norm_axis(na->axis, x->rank, &axis))
            return amp_kernel_fail(k, AMP_ERR_INPUT, "axis %lld is out of range for rank %d", (long long)na->axis,
                                   x->rank);
    }
    g->outer = amp_shape_nelem(axis, x->dims);
    g->d = (uint64_t)x->dims[axis];
    g->inner = amp_shape_nelem(x->rank - axis - 1, x->dims + axis + 1);
    return amp_geom_check(k, 0, x->dtype, x->rank, x->dims);
}

AmpCode amp_norm_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    AmpNormAttrs a = {.eps = amp_node_attr_float(n, "epsilon", 1e-5f)};
    switch (n->op) {
    case AMP_OP_LayerNormalization: {
        int64_t stash = amp_node_attr_int(n, "stash_type", AMP_DT_FLOAT);
        if (stash != AMP_DT_FLOAT)
            return amp_node_fail(n, st, AMP_ERR_UNSUPPORTED,
                                     "stash_type %lld: only 1 (float32 statistics) is implemented", (long long)stash);
        a.axis = amp_node_attr_int(n, "axis", -1);
        break;
    }
    case AMP_OP_Ms_LayerNormalizationGrad: a.axis = amp_node_attr_int(n, "axis", -1); break;
    case AMP_OP_BatchNormalization:
        if (opset < 9 && amp_node_attr_int(n, "spatial", 1) == 0)
            return amp_node_fail(n, st, AMP_ERR_UNSUPPORTED,
                                     "spatial = 0 (per-activation statistics) is not implemented");
        a.momentum = amp_node_attr_float(n, "momentum", 0.9f);
        a.mode_given = opset >= 14;
        if (opset >= 14) a.train = amp_node_attr_int(n, "training_mode", 0) != 0;
        for (int i = 1; opset < 14 && i < n->n_outputs; i++) a.train = a.train || n->outputs[i];
        break;
    case AMP_OP_GroupNormalization:
        a.groups = amp_node_attr_int(n, "num_groups", 0);
        if (a.groups <= 0) return amp_node_fail(n, st, AMP_ERR_INPUT, "num_groups must be given and positive");
        break;
    case AMP_OP_LpNormalization:
        a.axis = amp_node_attr_int(n, "axis", -1);
        a.p = amp_node_attr_int(n, "p", 2);
        if (a.p != 1 && a.p != 2)
            return amp_node_fail(n, st, AMP_ERR_INPUT, "p must be 1 or 2, not %lld", (long long)a.p);
        break;
    case AMP_OP_LRN:
        a.size = amp_node_attr_int(n, "size", 0);
        if (a.size <= 0) return amp_node_fail(n, st, AMP_ERR_INPUT, "size must be given and positive");
        a.alpha = amp_node_attr_float(n, "alpha", 1e-4f);
        a.beta = amp_node_attr_float(n, "beta", 0.75f);
        a.bias = amp_node_attr_float(n, "bias", 1.0f);
        break;
    default: break; /* InstanceNormalization: epsilon only */
    }
    return amp_prep_out(&a, sizeof a, attrs, st);
}

AmpCode amp_loss_geom(AmpKernelCtx *k, void *geom, bool *made) {
    (void)made;
    AmpLossGeom *g = geom;
    const AmpLossAttrs *a = k->attrs;
    const AmpBuf *in[5];
    for (int i = 0; i < 5; i++) in[i] = i < k->n_in ? k->in[i] : NULL;
    int grad = k->node->op == AMP_OP_Ms_SoftmaxCrossEntropyLossGrad; /* its inputs: dY, then the loss's */
    const AmpBuf *x = in[grad], *labels = in[grad + 1], *w = in[grad + 2];
    if (grad && (!in[0] || !x || !labels))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "dY, log_prob and label are required");
    if (!x || !labels) return amp_kernel_fail(k, AMP_ERR_INPUT, "scores and labels are required");
    if (x->rank < 2) return amp_kernel_fail(k, AMP_ERR_INPUT, "scores must be (N, C, ...), has rank %d", x->rank);
    bool ok = labels->rank == x->rank - 1 && labels->dims[0] == x->dims[0];
    for (int i = 2; ok && i < x->rank; i++) ok = labels->dims[i - 1] == x->dims[i];
    if (!ok) return amp_kernel_fail(k, AMP_ERR_INPUT, "labels must have the scores' shape without the class axis");
    g->n = (uint64_t)x->dims[0];
    g->c = (uint64_t)x->dims[1];
    g->dk = amp_shape_nelem(x->rank - 2, x->dims + 2);
    if (w && (w->rank != 1 || (uint64_t)w->dims[0] != g->c))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "weights must be (C) = (%llu)", (unsigned long long)g->c);
    if (grad) {
        const AmpBuf *dy = in[0], *bias = in[4];
        if (dy->nelem != (a->red == AMP_LOSS_NONE ? g->n * g->dk : 1))
            return amp_kernel_fail(k, AMP_ERR_INPUT, "dY has %llu elements; expected %s",
                                   (unsigned long long)dy->nelem,
                                   a->red == AMP_LOSS_NONE ? "one per sample" : "a scalar");
        if (bias && bias->nelem != x->nelem)
            return amp_kernel_fail(k, AMP_ERR_INPUT, "bias must be shaped like log_prob");
        return amp_geom_check(k, 0, x->dtype, x->rank, x->dims);
    }
    AmpCode rc = amp_geom_check(k, 0, x->dtype, a->red == AMP_LOSS_NONE ? labels->rank : 0, labels->dims);
    if (!rc && k->node->op == AMP_OP_SoftmaxCrossEntropyLoss) rc = amp_geom_check(k, 1, x->dtype, x->rank, x->dims);
    return rc;
}

/* SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLossGrad. */
AmpCode amp_loss_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    (void)opset;
    AmpLossAttrs a = {0};
    const char *r = amp_node_attr_string(n, "reduction", "mean");
    if (strcmp(r, "none") == 0) a.red = AMP_LOSS_NONE;
    else if (strcmp(r, "sum") == 0) a.red = AMP_LOSS_SUM;
    else if (strcmp(r, "mean") == 0) a.red = AMP_LOSS_MEAN;
    else return amp_node_fail(n, st, AMP_ERR_INPUT, "reduction '%s' is not none, sum or mean", r);
    const AmpAttr *ia = amp_node_attr(n, "ignore_index");
    a.has_ii = ia && ia->type == AMP_ATTR_INT;
    a.ii = a.has_ii ? ia->i : 0;
    return amp_prep_out(&a, sizeof a, attrs, st);
}
