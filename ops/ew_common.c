/* The elementwise family's checks and attributes, every backend's (ops/ew_common.h). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ew_common.h"
#include "ops/kernel_out.h"
#include "ops/scalar_math.h" /* AMP_GELU_EXACT, AMP_GELU_TANH */

/* ---- inputs, outputs, broadcasting -------------------------------------------------- */

const AmpBuf *amp_ew_in(const AmpKernelCtx *k, int i) {
    return i >= 0 && i < k->n_in ? k->in[i] : NULL;
}

AmpCode amp_ew_need(AmpKernelCtx *k, int n) {
    for (int i = 0; i < n; i++)
        if (!amp_ew_in(k, i)) return amp_kernel_fail(k, AMP_ERR_INPUT, "input %d is missing", i);
    return AMP_OK;
}

AmpCode amp_ew_same_dtype(AmpKernelCtx *k, const AmpBuf *a, const AmpBuf *b) {
    if (a->dtype == b->dtype) return AMP_OK;
    return amp_kernel_fail(k, AMP_ERR_INPUT, "inputs have different types (%s and %s)", amp_dtype_name(a->dtype),
                      amp_dtype_name(b->dtype));
}

/* "[3,4,5]" into buf, for messages. */
static const char *shape_str(const AmpBuf *b, char *buf, size_t n) {
    size_t l = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < b->rank && l < n; i++)
        l += (size_t)snprintf(buf + l, n - l, "%s%lld", i ? "," : "", (long long)b->dims[i]);
    if (l < n) snprintf(buf + l, n - l, "]");
    return buf;
}

AmpCode amp_ew_bcast_shape(AmpKernelCtx *k, int n, const AmpBuf *const *in, int *rank, int64_t *dims) {
    int r = 0;
    int64_t d[AMP_MAX_RANK] = {0};
    for (int i = 0; i < n; i++) {
        if (!amp_broadcast_shape(r, d, in[i]->rank, in[i]->dims, &r, dims)) {
            char s[128];
            return amp_kernel_fail(k, AMP_ERR_INPUT, "input %d of shape %s does not broadcast with the others", i,
                              shape_str(in[i], s, sizeof s));
        }
        memcpy(d, dims, (size_t)r * sizeof *d);
    }
    *rank = r;
    return AMP_OK;
}

int amp_ew_merge_axes(int rank, const int64_t *dims, int n_in, const AmpBuf *const *in, int64_t *merged_dims,
                      int64_t (*strides)[AMP_MAX_RANK]) {
    int64_t full[AMP_EW_MERGE_MAX_IN][AMP_MAX_RANK];
    int r = 0;
    for (int j = 0; j < n_in; j++) amp_broadcast_strides(in[j]->rank, in[j]->dims, rank, dims, full[j]);
    for (int i = 0; i < rank; i++) {
        if (dims[i] == 1) continue; /* no movement along it */
        if (r > 0) {
            /* Merge into the previous axis when, for every input, stepping the outer
             * axis once is the same as stepping the inner one dims[i] times. */
            bool merge = true;
            for (int j = 0; j < n_in; j++)
                if (strides[j][r - 1] != full[j][i] * dims[i]) merge = false;
            if (merge) {
                merged_dims[r - 1] *= dims[i];
                for (int j = 0; j < n_in; j++) strides[j][r - 1] = full[j][i];
                continue;
            }
        }
        merged_dims[r] = dims[i];
        for (int j = 0; j < n_in; j++) strides[j][r] = full[j][i];
        r++;
    }
    if (r == 0) { /* scalar output, or all axes of size 1 */
        merged_dims[0] = 1;
        for (int j = 0; j < n_in; j++) strides[j][0] = 0;
        r = 1;
    }
    return r;
}

AmpCode amp_ew_bcast_out(AmpKernelCtx *k, int n, int dtype, int *rank, int64_t *dims, AmpBuf **out) {
    *out = NULL;
    AmpCode rc = amp_ew_bcast_shape(k, n, k->in, rank, dims);
    return rc ? rc : amp_ew_out(k, dtype, *rank, dims, out);
}

AmpCode amp_ew_variadic_inputs(AmpKernelCtx *k) {
    int n = k->n_in;
    if (n < 1) return amp_kernel_fail(k, AMP_ERR_INPUT, "needs at least one input");
    AmpCode rc = amp_ew_need(k, n);
    for (int j = 1; j < n && !rc; j++) rc = amp_ew_same_dtype(k, k->in[0], k->in[j]);
    return rc;
}

AmpCode amp_ew_where_out(AmpKernelCtx *k, size_t *bits, int *rank, int64_t *dims, AmpBuf **out) {
    *out = NULL;
    AmpCode rc = amp_ew_need(k, 3);
    if (rc) return rc;
    const AmpBuf *cond = k->in[0], *x = k->in[1], *y = k->in[2];
    if (cond->dtype != AMP_DT_BOOL)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "the condition must be bool, not %s", amp_dtype_name(cond->dtype));
    if ((rc = amp_ew_same_dtype(k, x, y))) return rc;
    *bits = amp_dtype_bits(x->dtype);
    if (*bits != 8 && *bits != 16 && *bits != 32 && *bits != 64) return amp_kernel_bad_dtype(k, x->dtype);
    return amp_ew_bcast_out(k, 3, x->dtype, rank, dims, out);
}

AmpCode amp_ew_out(AmpKernelCtx *k, int dtype, int rank, const int64_t *dims, AmpBuf **out) {
    AmpCode rc = amp_kernel_outputs(k, 1, out);
    if (rc || !*out) return rc;
    return amp_kernel_check_out(k, *out, dtype, rank, dims);
}

AmpCode amp_ew_prepare_legacy_bcast(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    if (opset >= 7) return AMP_OK;
    const AmpAttr *ax = amp_node_attr(n, "axis");
    AmpEwLegacyBcast *a = malloc(sizeof *a);
    if (!a) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    a->has_axis = ax && ax->type == AMP_ATTR_INT;
    a->axis = a->has_axis ? ax->i : 0;
    a->broadcast = amp_node_attr_int(n, "broadcast", 0) != 0;
    *attrs = a;
    return AMP_OK;
}

AmpCode amp_ew_legacy_bcast(AmpKernelCtx *k, const AmpBuf *a, const AmpBuf *b, AmpBuf *view) {
    *view = *b;
    const AmpEwLegacyBcast *lb = k->attrs;
    if (!lb) return AMP_OK; /* opset 7+: numpy's rule */
    int axis = a->rank - b->rank;
    if (lb->broadcast && lb->has_axis && !amp_norm_axis(lb->axis, a->rank, &axis)) axis = -1;
    if (axis < 0 || axis + b->rank > a->rank || (!lb->broadcast && a->rank != b->rank))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "a rank-%d B does not fit a rank-%d A %s", b->rank, a->rank,
                          lb->broadcast ? "at the axis (broadcast=1 before opset 7)"
                                        : "(without broadcast=1 before opset 7 the shapes are equal)");
    for (int i = 0; i < b->rank; i++)
        if (b->dims[i] != a->dims[axis + i] && !(lb->broadcast && b->dims[i] == 1))
            return amp_kernel_fail(k, AMP_ERR_INPUT, "B's dim %d is %lld where A's is %lld (before opset 7 B %s A)", i,
                              (long long)b->dims[i], (long long)a->dims[axis + i],
                              lb->broadcast ? "broadcasts one way onto" : "has the shape of");
    view->rank = a->rank - axis;
    for (int i = b->rank; i < view->rank; i++) view->dims[i] = 1;
    return AMP_OK;
}

/* ---- dtype classes ----------------------------------------------------------------- */

bool amp_ew_is_unsigned(int dt) {
    return dt == AMP_DT_UINT8 || dt == AMP_DT_UINT16 || dt == AMP_DT_UINT32 || dt == AMP_DT_UINT64;
}

bool amp_ew_is_int(int dt) {
    return dt == AMP_DT_INT8 || dt == AMP_DT_INT16 || dt == AMP_DT_INT32 || dt == AMP_DT_INT64 ||
           amp_ew_is_unsigned(dt);
}

bool amp_ew_is_float(int dt) {
    return amp_is_f32_family(dt) || dt == AMP_DT_DOUBLE;
}

/* ---- the activations' and IsInf's attributes, parsed once at prepare ---------------- */

AmpCode amp_ew_params_out(AmpEwParams p, void **attrs, AmpStatus *st) {
    AmpEwParams *q = malloc(sizeof *q);
    if (!q) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    *q = p;
    *attrs = q;
    return AMP_OK;
}

AmpCode amp_ew_prepare_alpha(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    (void)opset;
    float dflt = n->op == AMP_OP_LeakyRelu ? 0.01f : 1.0f; /* Elu, Celu, ThresholdedRelu: 1 */
    return amp_ew_params_out((AmpEwParams){.alpha = amp_node_attr_float(n, "alpha", dflt)}, attrs, st);
}

AmpCode amp_ew_prepare_selu(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    (void)opset;
    return amp_ew_params_out((AmpEwParams){.alpha = amp_node_attr_float(n, "alpha", 1.67326319217681884765625f),
                                           .gamma = amp_node_attr_float(n, "gamma", 1.05070102214813232421875f)},
                             attrs, st);
}

AmpCode amp_ew_prepare_hard_sigmoid(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    (void)opset;
    return amp_ew_params_out((AmpEwParams){.alpha = amp_node_attr_float(n, "alpha", 0.2f),
                                           .beta = amp_node_attr_float(n, "beta", 0.5f)},
                             attrs, st);
}

/* Shrink: alpha is lambd, beta bias. */
AmpCode amp_ew_prepare_shrink(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    (void)opset;
    return amp_ew_params_out((AmpEwParams){.alpha = amp_node_attr_float(n, "lambd", 0.5f),
                                           .beta = amp_node_attr_float(n, "bias", 0.0f)},
                             attrs, st);
}

/* The approximate attribute (opset 20 Gelu; also read on com.microsoft GeluGrad). */
AmpCode amp_ew_prepare_gelu(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    (void)opset;
    const char *s = amp_node_attr_string(n, "approximate", "none");
    AmpEwParams p = {0};
    if (strcmp(s, "none") == 0) p.mode = AMP_GELU_EXACT;
    else if (strcmp(s, "tanh") == 0) p.mode = AMP_GELU_TANH;
    else
        return amp_node_fail(n, st, AMP_ERR_INPUT, "approximate must be \"none\" or \"tanh\", not \"%.40s\"", s);
    return amp_ew_params_out(p, attrs, st);
}

AmpCode amp_ew_prepare_isinf(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    (void)opset;
    AmpEwParams *p = calloc(1, sizeof *p);
    if (!p) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    p->mode = (amp_node_attr_int(n, "detect_positive", 1) != 0 ? AMP_EW_INF_POS : 0) |
              (amp_node_attr_int(n, "detect_negative", 1) != 0 ? AMP_EW_INF_NEG : 0);
    *attrs = p;
    return AMP_OK;
}

AmpCode amp_ew_prepare_clip(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    AmpClipAttrs *a = malloc(sizeof *a);
    if (!a) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    a->lo = opset < 11 ? amp_node_attr_float(n, "min", -FLT_MAX) : -INFINITY;
    a->hi = opset < 11 ? amp_node_attr_float(n, "max", FLT_MAX) : INFINITY;
    *attrs = a;
    return AMP_OK;
}

AmpCode amp_ew_clip_bound(AmpKernelCtx *k, int i, const AmpBuf *x, const AmpBuf **out) {
    *out = amp_ew_in(k, i);
    if (!*out) return AMP_OK;
    if ((*out)->dtype != x->dtype)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "%s has type %s, the input %s", i == 1 ? "min" : "max",
                               amp_dtype_name((*out)->dtype), amp_dtype_name(x->dtype));
    if ((*out)->nelem != 1)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "%s must hold one element, not %llu", i == 1 ? "min" : "max",
                               (unsigned long long)(*out)->nelem);
    return AMP_OK;
}

AmpCode amp_ew_prelu_slope(AmpKernelCtx *k, const AmpBuf *x, AmpBuf *slope) {
    *slope = *k->in[1];
    if (k->opset < 7 && slope->rank == 1 && x->rank >= 2 && slope->dims[0] == x->dims[1]) {
        slope->rank = x->rank - 1; /* (C, 1, ..., 1) */
        for (int i = 1; i < slope->rank; i++) slope->dims[i] = 1;
    }
    int rank;
    int64_t dims[AMP_MAX_RANK];
    bool same = amp_broadcast_shape(x->rank, x->dims, slope->rank, slope->dims, &rank, dims) && rank == x->rank;
    for (int i = 0; same && i < rank; i++) same = dims[i] == x->dims[i];
    if (!same)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "the slope of rank %d does not broadcast to X's shape", slope->rank);
    return AMP_OK;
}

AmpCode amp_bias_gelu_grad_geom(AmpKernelCtx *k, void *geom, bool *made) {
    (void)made;
    AmpBiasGeluGradGeom *g = geom;
    AmpCode rc = amp_ew_need(k, 3);
    if (rc) return rc;
    const AmpBuf *dy = k->in[0], *x = k->in[1], *b = k->in[2];
    if (dy->dtype != x->dtype || b->dtype != x->dtype || !amp_buf_same_shape(dy, x) || x->rank < 1 || b->rank != 1 ||
        b->dims[0] != x->dims[x->rank - 1])
        return amp_kernel_fail(k, AMP_ERR_INPUT, "dY must be like X, and B 1-D over X's last axis");
    g->n = x->nelem;
    g->h = (uint64_t)b->dims[0];
    return amp_geom_check(k, 0, x->dtype, x->rank, x->dims);
}

AmpCode amp_sub_scaled_geom(AmpKernelCtx *k, void *geom, bool *made) {
    (void)made;
    AmpSubScaledGeom *g = geom;
    const AmpBuf *a = amp_ew_in(k, 0), *s = amp_ew_in(k, 1), *b = amp_ew_in(k, 2);
    if (!a || !s || !b) return amp_kernel_fail(k, AMP_ERR_INPUT, "needs inputs A, S and B");
    if (s->nelem != 1 || !amp_buf_same_shape(a, b))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "S must hold one element and B have A's shape");
    g->n = a->nelem;
    return amp_geom_check(k, 0, AMP_DT_FLOAT, a->rank, a->dims);
}

AmpCode amp_allreduce_geom(AmpKernelCtx *k, void *geom, bool *made) {
    (void)made;
    AmpAllReduceGeom *g = geom;
    int n = k->n_in;
    if (n < 1 || k->n_out != n) return amp_kernel_fail(k, AMP_ERR_INPUT, "expects X[N] -> Y[N]");
    g->total = 0;
    for (int j = 0; j < n; j++) {
        const AmpBuf *x = k->in[j];
        if (!x) return amp_kernel_fail(k, AMP_ERR_INTERNAL, "gradient %d is missing", j);
        if (x->dtype != AMP_DT_FLOAT && x->dtype != AMP_DT_FLOAT16 && x->dtype != AMP_DT_BFLOAT16)
            return amp_kernel_bad_dtype(k, x->dtype);
        AmpCode rc = amp_geom_check(k, j, x->dtype, x->rank, x->dims);
        if (rc) return rc;
        g->total += x->nelem;
    }
    return AMP_OK;
}

/* Whether gradient j is float32 and its mean planned over it (the same bytes). */
static bool allreduce_in_place(const AmpKernelCtx *k, AmpBuf *const *out, int j) {
    return k->in[j]->dtype == AMP_DT_FLOAT && out[j]->data == k->in[j]->data;
}

/* The end e of the run in place that starts at gradient j, and its elements in *elems, when
 * e > j and the run takes AMP_ALLREDUCE_RUN_MIN bytes or more; else j (packed). */
static int allreduce_run(const AmpKernelCtx *k, AmpBuf *const *out, int j, size_t *elems) {
    *elems = 0;
    if (!allreduce_in_place(k, out, j)) return j;
    size_t n = k->in[j]->nelem;
    int e = j + 1;
    while (e < k->n_in && allreduce_in_place(k, out, e) &&
           (const char *)k->in[e]->data == (const char *)k->in[e - 1]->data + k->in[e - 1]->nelem * sizeof(float))
        n += k->in[e++]->nelem;
    if (n * sizeof(float) < AMP_ALLREDUCE_RUN_MIN) return j;
    *elems = n;
    return e;
}

AmpCode amp_allreduce_runs(AmpKernelCtx *k, AmpBuf *const *out, bool *packed, size_t *total, AmpAllReduceRunFn reduce,
                           void *arg) {
    AmpCode rc = AMP_OK;
    *total = 0;
    for (int j = 0; j < k->n_in && !rc;) {
        size_t n;
        int e = allreduce_run(k, out, j, &n);
        if (e == j) {
            packed[j] = true, *total += k->in[j]->nelem;
            j++;
            continue;
        }
        rc = reduce(k, k->in[j]->data, n, arg);
        for (; j < e; j++) packed[j] = false;
    }
    return rc;
}

AmpCode amp_allreduce_begin(AmpKernelCtx *k, AmpBuf ***out, bool **packed) {
    int N = k->n_in;
    *out = malloc((size_t)N * sizeof **out);
    *packed = malloc((size_t)N * sizeof **packed);
    if (!*out || !*packed) return amp_kernel_fail(k, AMP_ERR_INTERNAL, "out of memory");
    AmpCode rc = amp_kernel_outputs(k, N, *out);
    for (int j = 0; j < N && !rc; j++)
        if (!(*out)[j]) rc = amp_kernel_fail(k, AMP_ERR_INTERNAL, "gradient %d is not wanted", j);
    return rc;
}
