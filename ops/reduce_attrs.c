/* The reductions' attributes, axes and checks, every backend's (ops/reduce_attrs.h). */
#include <string.h>

#include "ops/kernel_out.h"
#include "ops/reduce_attrs.h"

/* Whether an update_binding of m's training graphs names initializer `name`. */
static bool rebound(const AmpModel *m, const char *name) {
    for (size_t i = 0; m && i < m->n_training; i++)
        for (size_t j = 0; j < m->training[i].n_update_bindings; j++)
            if (m->training[i].update_bindings[j].key && strcmp(m->training[i].update_bindings[j].key, name) == 0)
                return true;
    return false;
}

int amp_reduce_fixed_axes(const AmpNode *n, int64_t *axes, int max) {
    const AmpValue *v = n->n_inputs > 1 ? n->inputs[1] : NULL;
    if (!v) return -1;
    const AmpTensor *t = NULL;
    if (v->producer && v->producer->op == AMP_OP_Constant) {
        const AmpAttr *a = amp_node_attr(v->producer, "value");
        const AmpAttr *ints = amp_node_attr(v->producer, "value_ints");
        if (!a && ints && ints->type == AMP_ATTR_INTS && ints->n_ints <= (size_t)max) {
            for (size_t i = 0; i < ints->n_ints; i++) axes[i] = ints->ints[i];
            return (int)ints->n_ints;
        }
        t = a && a->type == AMP_ATTR_TENSOR ? a->t : NULL;
    } else if (v->initializer && !(v->flags & AMP_VALUE_INPUT) && !rebound(v->graph->model, v->name)) {
        t = v->initializer;
    }
    if (!t || t->ndims > 1 || t->nelem > (uint64_t)max || t->is_external) return -1;
    int c = (int)t->nelem;
    if (t->dtype == AMP_DT_INT64 && t->n_int64 == t->nelem) {
        for (int i = 0; i < c; i++) axes[i] = t->int64_data[i];
    } else if (t->dtype == AMP_DT_INT32 && t->n_int32 == t->nelem) {
        for (int i = 0; i < c; i++) axes[i] = t->int32_data[i];
    } else if ((t->dtype == AMP_DT_INT64 || t->dtype == AMP_DT_INT32) && t->raw.data &&
               t->raw.len == t->nelem * (t->dtype == AMP_DT_INT64 ? 8u : 4u)) {
        for (int i = 0; i < c; i++) { /* ONNX's raw layout: little-endian */
            const uint8_t *b = t->raw.data + (size_t)i * (t->dtype == AMP_DT_INT64 ? 8 : 4);
            uint64_t u = 0;
            for (int k = t->dtype == AMP_DT_INT64 ? 7 : 3; k >= 0; k--) u = u << 8 | b[k];
            axes[i] = t->dtype == AMP_DT_INT64 ? (int64_t)u : (int64_t)(int32_t)(uint32_t)u;
        }
    } else {
        return -1;
    }
    return c;
}

AmpCode amp_reduce_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    AmpReduceAttrs a = {.keep = amp_node_attr_int(n, "keepdims", 1) != 0,
                        .noop = amp_node_attr_int(n, "noop_with_empty_axes", 0) != 0};
    int64_t since = n->op == AMP_OP_ReduceSum ? 13 : 18;
    const AmpAttr *ax = opset < since ? amp_node_attr(n, "axes") : NULL;
    /* As the shape function reads it (amp_inf_from_input): an axes input at an opset
     * before `since` is not the node's, and the output was sized without it. */
    a.from_input = opset <= 0 || opset >= since;
    if (ax && ax->type == AMP_ATTR_INTS && ax->n_ints) {
        a.n_axes = ax->n_ints;
        for (size_t i = 0; i < ax->n_ints && i < AMP_MAX_RANK; i++) a.axes[i] = ax->ints[i];
    } else if (a.from_input) {
        int c = amp_reduce_fixed_axes(n, a.axes, AMP_MAX_RANK);
        a.fixed = c >= 0;
        a.n_axes = c > 0 ? (size_t)c : 0;
    }
    return amp_prep_out(&a, sizeof a, attrs, st);
}

AmpCode amp_reduce_axes_input(AmpKernelCtx *k, const AmpReduceAttrs *a, int rank, const AmpBuf **ax) {
    *ax = a->from_input && k->n_in > 1 ? k->in[1] : NULL;
    const AmpBuf *b = *ax;
    if (!b) return AMP_OK;
    if (!amp_dtype_is_int(b->dtype))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "axes must be an integer tensor, not %s", amp_dtype_name(b->dtype));
    if (b->rank > 1) return amp_kernel_fail(k, AMP_ERR_INPUT, "axes must be 1-D, has rank %d", b->rank);
    if (b->nelem > (uint64_t)rank)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "%llu axes for an input of rank %d", (unsigned long long)b->nelem, rank);
    return AMP_OK;
}

AmpCode amp_reduce_mask(AmpKernelCtx *k, const AmpReduceAttrs *a, int rank, const int64_t *in_axes, size_t n,
                        bool *mask) {
    const int64_t *axes = in_axes;
    if (!in_axes) { /* the attribute's */
        if (a->n_axes > (size_t)rank)
            return amp_kernel_fail(k, AMP_ERR_INPUT, "%zu axes for an input of rank %d", a->n_axes, rank);
        axes = a->axes;
        n = a->n_axes;
    }
    if (n == 0) {
        for (int d = 0; d < rank; d++) mask[d] = !a->noop;
        return AMP_OK;
    }
    for (int d = 0; d < rank; d++) mask[d] = false;
    for (size_t i = 0; i < n; i++) {
        int d;
        if (!amp_norm_axis(axes[i], rank, &d))
            return amp_kernel_fail(k, AMP_ERR_INPUT, "axis %lld is out of range for rank %d", (long long)axes[i], rank);
        if (mask[d]) return amp_kernel_fail(k, AMP_ERR_INPUT, "axis %lld is listed twice", (long long)axes[i]);
        mask[d] = true;
    }
    return AMP_OK;
}

AmpCode amp_arg_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    (void)opset;
    AmpArgAttrs a = {.axis = amp_node_attr_int(n, "axis", 0),
                     .keep = amp_node_attr_int(n, "keepdims", 1) != 0,
                     .last = amp_node_attr_int(n, "select_last_index", 0) != 0};
    return amp_prep_out(&a, sizeof a, attrs, st);
}

/* X, the data input every reduction reads, or AMP_ERR_INPUT. */
static AmpCode data_in(AmpKernelCtx *k, const AmpBuf **x) {
    *x = k->n_in > 0 ? k->in[0] : NULL;
    return *x ? AMP_OK : amp_kernel_fail(k, AMP_ERR_INPUT, "the data input is missing");
}

AmpCode amp_reduce_geom_axes(AmpKernelCtx *k, const int64_t *in_axes, size_t n, AmpReduceGeom *g) {
    const AmpReduceAttrs *a = k->attrs;
    const AmpBuf *x;
    AmpCode rc = data_in(k, &x);
    if (!rc) rc = amp_reduce_mask(k, a, x->rank, in_axes, n, g->mask);
    if (rc) return rc;
    int ro = 0;
    int64_t od[AMP_MAX_RANK], s = 1;
    g->n_red = 1;
    for (int d = 0; d < x->rank; d++) {
        if (!g->mask[d]) od[ro++] = x->dims[d];
        else if (a->keep) od[ro++] = 1;
        if (g->mask[d]) g->n_red *= (uint64_t)x->dims[d];
    }
    for (int d = x->rank - 1; d >= 0; d--) {
        g->ostr[d] = g->mask[d] ? 0 : s;
        if (!g->mask[d]) s *= x->dims[d];
    }
    return amp_geom_check(k, 0, x->dtype, ro, od); /* ostr and n_red index Y */
}

AmpCode amp_reduce_geom(AmpKernelCtx *k, void *geom, bool *made) {
    const AmpReduceAttrs *a = k->attrs;
    const AmpBuf *x, *ax;
    AmpCode rc = data_in(k, &x);
    if (!rc) rc = amp_reduce_axes_input(k, a, x->rank, &ax);
    if (rc) return rc;
    if (!ax) return amp_reduce_geom_axes(k, NULL, 0, geom);
    if (a->fixed || !ax->nelem) return amp_reduce_geom_axes(k, a->axes, ax->nelem ? a->n_axes : 0, geom);
    *made = false; /* the axes are a value of the run */
    return AMP_OK;
}

AmpCode amp_arg_geom(AmpKernelCtx *k, void *geom, bool *made) {
    (void)made;
    const AmpArgAttrs *a = k->attrs;
    AmpArgGeom *g = geom;
    const AmpBuf *x;
    AmpCode rc = data_in(k, &x);
    if (rc) return rc;
    if (!amp_norm_axis(a->axis, x->rank, &g->axis))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "axis %lld is out of range for rank %d", (long long)a->axis, x->rank);
    if (x->dims[g->axis] == 0)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "axis %d is empty: no element to pick", g->axis);
    int ro = 0;
    int64_t od[AMP_MAX_RANK];
    for (int d = 0; d < x->rank; d++) {
        if (d != g->axis) od[ro++] = x->dims[d];
        else if (a->keep) od[ro++] = 1;
    }
    g->outer = amp_shape_nelem(g->axis, x->dims);
    g->d = (uint64_t)x->dims[g->axis];
    g->inner = amp_shape_nelem(x->rank - g->axis - 1, x->dims + g->axis + 1);
    return amp_geom_check(k, 0, AMP_DT_INT64, ro, od); /* written at o * inner + i */
}

AmpCode amp_cumsum_geom(AmpKernelCtx *k, void *geom, bool *made) {
    (void)made;
    AmpCumSumGeom *g = geom;
    const AmpBuf *x = k->n_in > 0 ? k->in[0] : NULL, *ax = k->n_in > 1 ? k->in[1] : NULL;
    if (!x || !ax) return amp_kernel_fail(k, AMP_ERR_INPUT, "CumSum takes x and axis");
    if (!amp_dtype_is_int(ax->dtype) || ax->nelem != 1 || ax->rank > 1)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "axis must be one integer (a 0-D or 1-element tensor)");
    g->n = x->nelem;
    return amp_geom_check(k, 0, x->dtype, x->rank, x->dims);
}

AmpCode amp_topk_out(AmpKernelCtx *k, const AmpBuf *x, int axis, int64_t K, AmpBuf **vals, AmpBuf **idxs) {
    int64_t od[AMP_MAX_RANK];
    memcpy(od, x->dims, sizeof od);
    od[axis] = K;
    AmpBuf *outs[2];
    AmpCode rc = amp_kernel_outputs(k, 2, outs);
    *vals = *idxs = NULL;
    if (rc) return rc;
    if ((outs[0] && (rc = amp_kernel_check_out(k, outs[0], x->dtype, x->rank, od))) ||
        (outs[1] && (rc = amp_kernel_check_out(k, outs[1], AMP_DT_INT64, x->rank, od))))
        return rc;
    *vals = outs[0], *idxs = outs[1];
    return AMP_OK;
}
