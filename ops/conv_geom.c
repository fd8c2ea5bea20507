/* The window geometry of the conv family (Conv, ConvTranspose, MaxPool, AveragePool and
 * com.microsoft ConvGrad), below every backend: the attributes parsed once at prepare
 * (amp_conv_prepare, amp_conv_grad_prepare), and from them and the input shapes the
 * strides, dilations, pads (auto_pad included) and output sizes every backend's kernel
 * computes with (ops/conv_geom.h). The CPU kernels (kernels/cpu/conv.c, pool.c,
 * ms_train.c) and the CUDA kernels (kernels/cuda/conv.c, conv_transpose.c, conv_grad.c,
 * grad_ops_pool.c) read the same AmpConvGeom. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "ops/conv_geom.h"
#include "ops/kernel_out.h"

/* Attribute values are capped at INT32_MAX so that window arithmetic cannot overflow. */
AmpCode amp_conv_ints(AmpKernelCtx *k, const char *name, int n, int64_t dflt, int64_t min, int64_t *out) {
    const AmpAttr *a = amp_node_attr(k->node, name);
    if (!a || (a->type == AMP_ATTR_INTS && a->n_ints == 0)) {
        for (int i = 0; i < n; i++) out[i] = dflt;
        return AMP_OK;
    }
    if (a->type != AMP_ATTR_INTS || a->n_ints != (size_t)n)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "attribute %s must hold %d integers", name, n);
    for (int i = 0; i < n; i++) {
        if (a->ints[i] < min || a->ints[i] > INT32_MAX)
            return amp_kernel_fail(k, AMP_ERR_INPUT, "attribute %s has an invalid value %lld", name,
                                 (long long)a->ints[i]);
        out[i] = a->ints[i];
    }
    return AMP_OK;
}

typedef enum AutoPad { PAD_NOTSET, PAD_VALID, PAD_SAME_UPPER, PAD_SAME_LOWER } AutoPad;

/* auto_pad's value; false when it names none. */
static bool auto_pad_of(const char *s, AutoPad *out) {
    if (!*s || !strcmp(s, "NOTSET")) *out = PAD_NOTSET;
    else if (!strcmp(s, "VALID")) *out = PAD_VALID;
    else if (!strcmp(s, "SAME_UPPER")) *out = PAD_SAME_UPPER;
    else if (!strcmp(s, "SAME_LOWER")) *out = PAD_SAME_LOWER;
    else return false;
    return true;
}

static AmpCode auto_pad(AmpKernelCtx *k, AutoPad *out) {
    const char *s = amp_node_attr_string(k->node, "auto_pad", "NOTSET");
    if (!auto_pad_of(s, out)) return amp_kernel_fail(k, AMP_ERR_INPUT, "unknown auto_pad '%s'", s);
    return AMP_OK;
}

/* ---- attributes, parsed once at prepare --------------------------------------------- */

/* An INTS attribute as given (AmpConvInts), each value in [min, INT32_MAX]. */
static AmpCode ints_attr(const AmpNode *n, const char *name, int64_t min, AmpConvInts *out, AmpStatus *st) {
    const AmpAttr *a = amp_node_attr(n, name);
    memset(out, 0, sizeof *out);
    if (!a || (a->type == AMP_ATTR_INTS && a->n_ints == 0)) return AMP_OK;
    if (a->type != AMP_ATTR_INTS) {
        out->n = -1;
        return AMP_OK;
    }
    for (size_t i = 0; i < a->n_ints; i++)
        if (a->ints[i] < min || a->ints[i] > INT32_MAX)
            return amp_node_fail(n, st, AMP_ERR_INPUT, "attribute %s has an invalid value %lld", name, (long long)a->ints[i]);
    out->n = a->n_ints > INT32_MAX ? INT32_MAX : (int)a->n_ints;
    for (size_t i = 0; i < a->n_ints && i < 2 * AMP_MAX_SPATIAL; i++) out->v[i] = a->ints[i];
    return AMP_OK;
}

AmpCode amp_conv_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    (void)opset;
    AmpConvAttrs *a = calloc(1, sizeof *a);
    if (!a) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    bool pool = n->op == AMP_OP_MaxPool || n->op == AMP_OP_AveragePool;
    const char *ap = amp_node_attr_string(n, "auto_pad", "NOTSET");
    AutoPad pad = PAD_NOTSET;
    AmpCode rc = AMP_OK;
    if (!auto_pad_of(ap, &pad))
        rc = amp_node_fail(n, st, AMP_ERR_INPUT, "unknown auto_pad '%s'",
                      ap);
    a->auto_pad = (int)pad;
    a->group = amp_node_attr_int(n, "group", 1);
    if (!rc) rc = ints_attr(n, "kernel_shape", 1, &a->kernel_shape, st);
    if (!rc) rc = ints_attr(n, "strides", 1, &a->strides, st);
    if (!rc) rc = ints_attr(n, "dilations", 1, &a->dilations, st);
    if (!rc) rc = ints_attr(n, "pads", 0, &a->pads, st);
    if (!rc && n->op == AMP_OP_ConvTranspose) {
        rc = ints_attr(n, "output_padding", 0, &a->output_padding, st);
        const AmpAttr *os = amp_node_attr(n, "output_shape");
        if (os && os->type == AMP_ATTR_INTS && os->n_ints > 0) { /* otherwise as if absent */
            a->output_shape.n = os->n_ints > INT32_MAX ? INT32_MAX : (int)os->n_ints;
            for (size_t i = 0; i < os->n_ints && i < AMP_MAX_RANK; i++) a->output_shape.v[i] = os->ints[i];
        }
    }
    if (!rc && pool) {
        if (!a->kernel_shape.n)
            rc = amp_node_fail(n, st, AMP_ERR_INPUT, "attribute kernel_shape is required");
        int64_t storage = amp_node_attr_int(n, "storage_order", 0);
        if (!rc && storage != 0 && storage != 1)
            rc = amp_node_fail(n, st, AMP_ERR_INPUT, "storage_order must be 0 or 1 (got %lld)", (long long)storage);
        a->col_major = storage == 1;
        a->count_include_pad = amp_node_attr_int(n, "count_include_pad", 0) != 0;
        a->ceil_mode = amp_node_attr_int(n, "ceil_mode", 0) != 0;
    }
    if (rc) {
        free(a);
        return rc;
    }
    *attrs = a;
    return AMP_OK;
}

AmpCode amp_conv_ints_of(AmpKernelCtx *k, const AmpConvInts *a, const char *name, int n, int64_t dflt,
                         int64_t *out) {
    if (!a->n) {
        for (int i = 0; i < n; i++) out[i] = dflt;
        return AMP_OK;
    }
    if (a->n != n) return amp_kernel_fail(k, AMP_ERR_INPUT, "attribute %s must hold %d integers", name, n);
    for (int i = 0; i < n; i++) out[i] = a->v[i];
    return AMP_OK;
}

/* ---- window geometry -------------------------------------------------------------- */

/* The output sizes and pads of g, whose nsp, stride and dil are set, for a window of
 * kern over x's spatial dims. */
static AmpCode geom_fill(AmpKernelCtx *k, const AmpBuf *x, const int64_t *kern, bool ceil_mode, AutoPad ap,
                         const int64_t *pads, AmpConvGeom *g) {
    int n = g->nsp;
    for (int i = 0; i < n; i++) {
        g->in[i] = x->dims[i + 2];
        g->kern[i] = kern[i];
        if (kern[i] < 1 || kern[i] > INT32_MAX)
            return amp_kernel_fail(k, AMP_ERR_INPUT, "kernel size %lld is invalid", (long long)kern[i]);
        int64_t eff = (g->kern[i] - 1) * g->dil[i] + 1, s = g->stride[i];
        if (ap == PAD_SAME_UPPER || ap == PAD_SAME_LOWER) {
            /* Output ceil(in / stride); the extra pad goes at the end for SAME_UPPER. */
            g->out[i] = (g->in[i] + s - 1) / s;
            int64_t total = (g->out[i] - 1) * s + eff - g->in[i];
            if (total < 0) total = 0;
            g->pad0[i] = ap == PAD_SAME_UPPER ? total / 2 : total - total / 2;
            g->pad1[i] = total - g->pad0[i];
            continue;
        }
        g->pad0[i] = ap == PAD_VALID ? 0 : pads[i];
        g->pad1[i] = ap == PAD_VALID ? 0 : pads[n + i];
        int64_t span = g->in[i] + g->pad0[i] + g->pad1[i] - eff;
        if (span < 0)
            return amp_kernel_fail(k, AMP_ERR_INPUT, "window of %lld is larger than the padded input (%lld) on axis %d",
                                 (long long)eff, (long long)(g->in[i] + g->pad0[i] + g->pad1[i]), i + 2);
        g->out[i] = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
        /* A ceil-mode window must start inside the input or the start padding. */
        if (ceil_mode && (g->out[i] - 1) * s >= g->in[i] + g->pad0[i]) g->out[i]--;
    }
    return AMP_OK;
}

AmpCode amp_conv_geom(AmpKernelCtx *k, const AmpBuf *x, const int64_t *kern, bool ceil_mode, AmpConvGeom *g) {
    memset(g, 0, sizeof *g);
    if (x->rank < 3)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "X must be (N, C, D1, ...) with rank >= 3 (got %d)", x->rank);
    int n = g->nsp = x->rank - 2;
    AutoPad ap = PAD_NOTSET;
    int64_t pads[2 * AMP_MAX_SPATIAL];
    AmpCode rc;
    if ((rc = auto_pad(k, &ap)) || (rc = amp_conv_ints(k, "strides", n, 1, 1, g->stride)) ||
        (rc = amp_conv_ints(k, "dilations", n, 1, 1, g->dil)) || (rc = amp_conv_ints(k, "pads", 2 * n, 0, 0, pads)))
        return rc;
    return geom_fill(k, x, kern, ceil_mode, ap, pads, g);
}

AmpCode amp_conv_geom_attrs(AmpKernelCtx *k, const AmpConvAttrs *a, const AmpBuf *x, const int64_t *kern,
                            AmpConvGeom *g) {
    memset(g, 0, sizeof *g);
    if (x->rank < 3)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "X must be (N, C, D1, ...) with rank >= 3 (got %d)", x->rank);
    int n = g->nsp = x->rank - 2;
    int64_t pads[2 * AMP_MAX_SPATIAL];
    AmpCode rc;
    if ((rc = amp_conv_ints_of(k, &a->strides, "strides", n, 1, g->stride)) ||
        (rc = amp_conv_ints_of(k, &a->dilations, "dilations", n, 1, g->dil)) ||
        (rc = amp_conv_ints_of(k, &a->pads, "pads", 2 * n, 0, pads)))
        return rc;
    return geom_fill(k, x, kern, a->ceil_mode, (AutoPad)a->auto_pad, pads, g);
}

/* Kernel size from W's spatial dims; a kernel_shape attribute must agree with them. */
AmpCode amp_conv_kernel_from_w(AmpKernelCtx *k, const AmpConvAttrs *a, const AmpBuf *w, int nsp, int64_t *kern) {
    int64_t attr[AMP_MAX_SPATIAL];
    AmpCode rc = amp_conv_ints_of(k, &a->kernel_shape, "kernel_shape", nsp, -1, attr);
    if (rc) return rc;
    for (int i = 0; i < nsp; i++) {
        kern[i] = w->dims[i + 2];
        if (attr[i] >= 0 && attr[i] != kern[i])
            return amp_kernel_fail(k, AMP_ERR_INPUT, "kernel_shape disagrees with W on axis %d", i + 2);
    }
    return AMP_OK;
}

bool amp_conv_size(int n, const int64_t *d, int64_t *out) {
    uint64_t p = 1;
    for (int i = 0; i < n; i++) {
        if (d[i] < 0 || (d[i] && p > (UINT64_C(1) << 62) / (uint64_t)d[i])) return false;
        p *= (uint64_t)d[i];
    }
    *out = (int64_t)p;
    return true;
}


/* ---- ConvTranspose -------------------------------------------------------------- */

static int64_t floor_div2(int64_t v) {
    return v >= 0 ? v / 2 : -((-v + 1) / 2);
}

/* Output sizes and pads, as the ONNX spec and onnxruntime do it: the output is
 * output_shape where given, else in * stride with auto_pad SAME; then the pads
 * attribute is ignored and the total padding (natural size - output, possibly negative)
 * is split with the larger half at the end for SAME_UPPER, at the start otherwise
 * (SAME_LOWER, NOTSET and VALID alike). With neither, the start pad is pads[i] (0 for
 * VALID) and the size the natural one less both pads. */
AmpCode amp_convtranspose_geom(AmpKernelCtx *k, const AmpConvAttrs *a, const AmpBuf *x, const int64_t *kern,
                               AmpConvGeom *g) {
    memset(g, 0, sizeof *g);
    int n = g->nsp = x->rank - 2;
    AutoPad ap = (AutoPad)a->auto_pad;
    int64_t pads[2 * AMP_MAX_SPATIAL], opad[AMP_MAX_SPATIAL], oshape[AMP_MAX_SPATIAL];
    AmpCode rc;
    if ((rc = amp_conv_ints_of(k, &a->strides, "strides", n, 1, g->stride)) ||
        (rc = amp_conv_ints_of(k, &a->dilations, "dilations", n, 1, g->dil)) ||
        (rc = amp_conv_ints_of(k, &a->pads, "pads", 2 * n, 0, pads)) ||
        (rc = amp_conv_ints_of(k, &a->output_padding, "output_padding", n, 0, opad)))
        return rc;
    const AmpConvInts *os = &a->output_shape;
    bool have_os = os->n > 0;
    if (have_os) {
        /* Spatial sizes; a full (N, C, ...) shape is accepted too. */
        int skip = os->n == n + 2 ? 2 : 0;
        if (os->n != n + skip) return amp_kernel_fail(k, AMP_ERR_INPUT, "output_shape must hold %d integers", n);
        for (int i = 0; i < n; i++) {
            oshape[i] = os->v[skip + i];
            if (oshape[i] < 0 || oshape[i] > INT32_MAX)
                return amp_kernel_fail(k, AMP_ERR_INPUT, "output_shape has an invalid value");
        }
    }
    for (int i = 0; i < n; i++) {
        g->in[i] = x->dims[i + 2];
        g->kern[i] = kern[i];
        if (kern[i] < 1 || kern[i] > INT32_MAX)
            return amp_kernel_fail(k, AMP_ERR_INPUT, "kernel size %lld is invalid", (long long)kern[i]);
        if (g->in[i] > INT32_MAX) /* keeps stride * in within int64 */
            return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "input size %lld is too large", (long long)g->in[i]);
        if (opad[i] >= g->stride[i] && opad[i] >= g->dil[i])
            return amp_kernel_fail(k, AMP_ERR_INPUT, "output_padding %lld must be below the stride or dilation",
                                 (long long)opad[i]);
        int64_t natural = g->stride[i] * (g->in[i] > 0 ? g->in[i] - 1 : 0) + opad[i] + (kern[i] - 1) * g->dil[i] + 1;
        if (have_os || ap == PAD_SAME_UPPER || ap == PAD_SAME_LOWER) {
            g->out[i] = have_os ? oshape[i] : g->in[i] * g->stride[i];
            int64_t total = natural - g->out[i];
            g->pad0[i] = ap == PAD_SAME_UPPER ? floor_div2(total) : total - floor_div2(total);
        } else {
            g->pad0[i] = ap == PAD_VALID ? 0 : pads[i];
            g->pad1[i] = ap == PAD_VALID ? 0 : pads[n + i];
            g->out[i] = natural - g->pad0[i] - g->pad1[i];
            if (g->out[i] < 0) return amp_kernel_fail(k, AMP_ERR_INPUT, "pads exceed the output on axis %d", i + 2);
        }
        g->pad1[i] = natural - g->out[i] - g->pad0[i];
    }
    return AMP_OK;
}


/* ---- ConvGrad (com.microsoft) ---------------------------------------------------- */

AmpCode amp_conv_grad_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    (void)opset;
    int64_t group = amp_node_attr_int(n, "group", 1);
    if (group < 1)
        return amp_node_fail(n, st, AMP_ERR_INPUT, "group %lld must be positive", (long long)group);
    AmpConvGradAttrs *a = malloc(sizeof *a);
    if (!a) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    a->group = group;
    *attrs = a;
    return AMP_OK;
}

AmpCode amp_conv_grad_check(AmpKernelCtx *k, const AmpBuf *dy, const AmpBuf *x, const AmpBuf *w, int64_t *kern,
                            AmpConvGeom *g) {
    const AmpConvGradAttrs *a = k->attrs;
    int dt = x->dtype;
    if (dy->dtype != dt || (w && w->dtype != dt))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "inputs have different types");
    if (k->n_out > 3) return amp_kernel_fail(k, AMP_ERR_INPUT, "has %d outputs; at most 3", k->n_out);
    if (x->rank < 3 || (w && w->rank != x->rank) || dy->rank != x->rank)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "dY, X and W must have the same rank >= 3 (got %d, %d, %d)", dy->rank,
                               x->rank, w ? w->rank : x->rank);
    int nsp = x->rank - 2;
    /* Without W (the weight gradient alone, runtime/fuse_wgrad.c) its shape is dY's
     * channels by X's per group, by kernel_shape. */
    int64_t C = x->dims[1], M = w ? w->dims[0] : dy->dims[1], group = a->group;
    if (group > (C > 0 ? C : 1) || C % group || M % group || (w && w->dims[1] != C / group))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "group %lld does not fit X's %lld channels and W (%lld, %lld, ...)",
                               (long long)group, (long long)C, (long long)M, (long long)(w ? w->dims[1] : C / group));
    int64_t kattr[AMP_MAX_SPATIAL];
    AmpCode rc = amp_conv_ints(k, "kernel_shape", nsp, -1, 1, kattr);
    if (rc) return rc;
    for (int i = 0; i < nsp; i++) {
        kern[i] = w ? w->dims[i + 2] : kattr[i];
        if (kern[i] < 0) return amp_kernel_fail(k, AMP_ERR_INPUT, "needs W or kernel_shape");
        if (kattr[i] >= 0 && kattr[i] != kern[i])
            return amp_kernel_fail(k, AMP_ERR_INPUT, "kernel_shape disagrees with W on axis %d", i + 2);
    }
    if ((rc = amp_conv_geom(k, x, kern, false, g))) return rc;
    bool shape_ok = dy->dims[0] == x->dims[0] && dy->dims[1] == M;
    for (int i = 0; i < nsp; i++) shape_ok = shape_ok && dy->dims[i + 2] == g->out[i];
    if (!shape_ok) return amp_kernel_fail(k, AMP_ERR_INPUT, "dY's shape is not the convolution's output shape");
    return AMP_OK;
}

/* ---- the checks every backend's kernel makes -------------------------------------------- */

/* Conv's and ConvTranspose's inputs X, W and B (NULL where the node has none): AMP_ERR_INPUT
 * unless X and W are there. */
static AmpCode conv_inputs(AmpKernelCtx *k, const AmpBuf **x, const AmpBuf **w, const AmpBuf **b) {
    *x = k->n_in > 0 ? k->in[0] : NULL, *w = k->n_in > 1 ? k->in[1] : NULL, *b = k->n_in > 2 ? k->in[2] : NULL;
    return *x && *w ? AMP_OK : amp_kernel_fail(k, AMP_ERR_INPUT, "needs inputs X and W");
}

/* Their shape checks (amp_conv_node_geom's): *at the attributes, *M the output channels. */
static AmpCode conv_check(AmpKernelCtx *k, const AmpBuf *x, const AmpBuf *w, const AmpBuf *b, bool transpose,
                          const AmpConvAttrs **at, int64_t *M) {
    if (x->rank < 3 || w->rank != x->rank)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "X (rank %d) and W (rank %d) must have the same rank >= 3", x->rank,
                               w->rank);
    *at = k->attrs;
    int64_t group = (*at)->group, C = x->dims[1], w0 = w->dims[0], w1 = w->dims[1];
    bool fits = group >= 1 && group <= (C > 0 ? C : 1) && C % group == 0 &&
                (transpose ? w0 == C && w1 <= INT32_MAX        /* W (C, M/group, k...) */
                           : w0 % group == 0 && w1 == C / group); /* W (M, C/group, k...) */
    if (!fits)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "group %lld does not fit X's %lld channels and W (%lld, %lld, ...)",
                               (long long)group, (long long)C, (long long)w0, (long long)w1);
    *M = transpose ? w1 * group : w0;
    if (b && (b->rank != 1 || b->dims[0] != *M))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "B must be 1-D with %lld entries", (long long)*M);
    return AMP_OK;
}

/* Y (N, M, out...) of X's dtype, and MaxPool's Indices of its dims, where listed. */
static AmpCode window_outs(AmpKernelCtx *k, const AmpBuf *x, const AmpWindowGeom *wg) {
    int64_t dims[AMP_MAX_RANK] = {x->dims[0], wg->M};
    for (int i = 0; i < wg->g.nsp; i++) dims[i + 2] = wg->g.out[i];
    AmpCode rc = amp_geom_check(k, 0, x->dtype, wg->g.nsp + 2, dims);
    if (!rc && k->node->op == AMP_OP_MaxPool) rc = amp_geom_check(k, 1, AMP_DT_INT64, wg->g.nsp + 2, dims);
    return rc;
}

AmpCode amp_conv_node_geom(AmpKernelCtx *k, void *geom, bool *made) {
    (void)made;
    AmpWindowGeom *wg = geom;
    const AmpBuf *x, *w, *b;
    const AmpConvAttrs *at = k->attrs;
    bool transpose = k->node->op == AMP_OP_ConvTranspose;
    AmpCode rc = conv_inputs(k, &x, &w, &b);
    if (!rc) rc = conv_check(k, x, w, b, transpose, &at, &wg->M);
    if (rc) return rc;
    int64_t kern[AMP_MAX_SPATIAL];
    if ((rc = amp_conv_kernel_from_w(k, at, w, x->rank - 2, kern))) return rc;
    rc = transpose ? amp_convtranspose_geom(k, at, x, kern, &wg->g) : amp_conv_geom_attrs(k, at, x, kern, &wg->g);
    return rc ? rc : window_outs(k, x, wg);
}

AmpCode amp_pool_geom(AmpKernelCtx *k, void *geom, bool *made) {
    (void)made;
    AmpWindowGeom *wg = geom;
    const AmpBuf *x = k->n_in > 0 ? k->in[0] : NULL;
    if (!x) return amp_kernel_fail(k, AMP_ERR_INPUT, "needs input X");
    if (x->rank < 3)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "X must be (N, C, D1, ...) with rank >= 3 (got %d)", x->rank);
    const AmpConvAttrs *a = k->attrs;
    int64_t kern[AMP_MAX_SPATIAL];
    AmpCode rc = amp_conv_ints_of(k, &a->kernel_shape, "kernel_shape", x->rank - 2, 0, kern);
    if (rc || (rc = amp_conv_geom_attrs(k, a, x, kern, &wg->g))) return rc;
    wg->M = x->dims[1];
    return window_outs(k, x, wg);
}

AmpCode amp_global_pool_out(AmpKernelCtx *k, bool (*dtype_ok)(int dtype), const AmpBuf **x, AmpBuf **y) {
    *y = NULL;
    *x = k->n_in > 0 ? k->in[0] : NULL;
    if (!*x) return amp_kernel_fail(k, AMP_ERR_INPUT, "needs input X");
    int dt = (*x)->dtype, r = (*x)->rank;
    if (!dtype_ok(dt)) return amp_kernel_bad_dtype(k, dt);
    if (r < 2) return amp_kernel_fail(k, AMP_ERR_INPUT, "X must be (N, C, ...) (got rank %d)", r);
    int64_t dims[AMP_MAX_RANK];
    for (int i = 0; i < r; i++) dims[i] = i < 2 ? (*x)->dims[i] : 1;
    AmpCode rc = amp_kernel_outputs(k, 1, y);
    return rc || !*y ? rc : amp_kernel_check_out(k, *y, dt, r, dims);
}

AmpCode amp_conv_grad_outs(AmpKernelCtx *k, const AmpBuf *x, const AmpBuf *w, AmpBuf **out) {
    const int64_t bdims[1] = {w->dims[0]};
    AmpCode rc = amp_kernel_outputs(k, 3, out);
    for (int i = 0; i < 3 && !rc; i++) { /* dX like X, dW like W, dB (M) */
        const AmpBuf *like = i == 0 ? x : w;
        if (out[i])
            rc = amp_kernel_check_out(k, out[i], like->dtype, i == 2 ? 1 : like->rank, i == 2 ? bdims : like->dims);
    }
    return rc;
}
