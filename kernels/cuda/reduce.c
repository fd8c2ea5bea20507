/* CUDA node-level kernels: the Reduce* ops, ArgMax/ArgMin, GlobalAveragePool and
 * GlobalMaxPool, for float32, float16 and bfloat16 data (integer data runs on the CPU
 * fallback). Attributes, axes, checks and empty reductions as kernels/cpu/reduce.c and
 * pool.c; the reduced axes are coalesced into the (outer, r, inner) layout reduce.cu's
 * fast kernels take, or described in full for its general one. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/reduce.h"

_Static_assert(AMP_CUDA_RED_MAX_RANK == AMP_MAX_RANK, "reduce.h's rank bound is AMP_MAX_RANK");

static const void *attrs_of(AmpKernelCtx *k) {
    if (!k->attrs) amp_kernel_fail(k, AMP_ERR_INTERNAL, "the node's attributes were not prepared");
    return k->attrs;
}

static AmpCode prep_out(const void *p, size_t size, void **attrs, AmpStatus *st) {
    void *q = malloc(size);
    if (!q) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    memcpy(q, p, size);
    *attrs = q;
    return AMP_OK;
}

/* ---- Reduce* ----------------------------------------------------------------------- */

/* As the CPU's: axes from the attribute (before ReduceSum-13 and the others' opset 18),
 * as written; n_axes counts them all, the first AMP_MAX_RANK are kept. */
typedef struct RedAttrs {
    bool keep, noop;
    bool fixed; /* the axes input's values, read at prepare, are axes[0..n_axes) */
    size_t n_axes;
    int64_t axes[AMP_MAX_RANK];
} RedAttrs;

/* Whether an update_binding of m's training graphs names initializer `name`. */
static bool rebound(const AmpModel *m, const char *name) {
    for (size_t i = 0; m && i < m->n_training; i++)
        for (size_t j = 0; j < m->training[i].n_update_bindings; j++)
            if (m->training[i].update_bindings[j].key && strcmp(m->training[i].update_bindings[j].key, name) == 0)
                return true;
    return false;
}

int amp_cuda_reduce_fixed_axes(const AmpNode *n, int64_t *axes, int max) {
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

AmpCode amp_cuda_reduce_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    RedAttrs a = {.keep = amp_node_attr_int(n, "keepdims", 1) != 0,
                  .noop = amp_node_attr_int(n, "noop_with_empty_axes", 0) != 0};
    int64_t since = n->op == AMP_OP_ReduceSum ? 13 : 18;
    const AmpAttr *ax = opset < since ? amp_node_attr(n, "axes") : NULL;
    if (ax && ax->type == AMP_ATTR_INTS && ax->n_ints) {
        a.n_axes = ax->n_ints;
        for (size_t i = 0; i < ax->n_ints && i < AMP_MAX_RANK; i++) a.axes[i] = ax->ints[i];
    } else if (opset >= since) {
        int c = amp_cuda_reduce_fixed_axes(n, a.axes, AMP_MAX_RANK);
        a.fixed = c >= 0;
        a.n_axes = c > 0 ? (size_t)c : 0;
    }
    return prep_out(&a, sizeof a, attrs, st);
}

/* Float data; the axes input, where listed, int32 or int64 (what amp_cuda_read_ints
 * reads). */
bool amp_cuda_supports_reduce(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    (void)opset;
    if (n->n_inputs < 1 || !n->inputs[0] || !amp_cuda_is_float(in_dtypes[0])) return false;
    if (n->n_inputs > 1 && n->inputs[1] && in_dtypes[1] != AMP_DT_INT32 && in_dtypes[1] != AMP_DT_INT64) return false;
    return true;
}

/* The reduced axes (the CPU's reduce_mask): the axes input where listed (read at prepare
 * where the model fixes it, else read to the host here), else the attribute; none reduce
 * everything, or nothing with noop_with_empty_axes. */
static AmpCode reduce_mask(AmpKernelCtx *k, const RedAttrs *attr, int rank, bool *mask) {
    int64_t axes[AMP_MAX_RANK];
    size_t n = 0;
    const AmpBuf *ax = k->n_in > 1 ? k->in[1] : NULL;
    if (ax) {
        if (ax->dtype != AMP_DT_INT32 && ax->dtype != AMP_DT_INT64) return amp_kernel_bad_dtype(k, ax->dtype);
        if (ax->rank > 1) return amp_kernel_fail(k, AMP_ERR_INPUT, "axes must be 1-D, has rank %d", ax->rank);
        if (ax->nelem > (uint64_t)rank)
            return amp_kernel_fail(k, AMP_ERR_INPUT, "%llu axes for an input of rank %d",
                                    (unsigned long long)ax->nelem, rank);
        if (attr->fixed) { /* read at prepare: no wait on the stream */
            for (size_t i = 0; i < attr->n_axes; i++) axes[n++] = attr->axes[i];
        } else if (ax->nelem) {
            int got = amp_cuda_read_ints(k, 1, axes, AMP_MAX_RANK);
            if (got < 0) return k->st->code;
            n = (size_t)got;
        }
    } else if (attr->n_axes) {
        if (attr->n_axes > (size_t)rank)
            return amp_kernel_fail(k, AMP_ERR_INPUT, "%zu axes for an input of rank %d", attr->n_axes, rank);
        for (size_t i = 0; i < attr->n_axes; i++) axes[n++] = attr->axes[i];
    }
    if (n == 0) {
        for (int d = 0; d < rank; d++) mask[d] = !attr->noop;
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

/* The launch shape of reducing x (no dim 0) over mask: dims of 1 dropped and neighbours
 * of one kind merged; kept-reduced-kept or fewer groups with one reduced group fit the
 * (outer, r, inner) form, anything else takes the general form. */
static void reduce_shape(const AmpBuf *x, const bool *mask, AmpCudaRedShape *s) {
    int64_t size[AMP_MAX_RANK];
    bool red[AMP_MAX_RANK];
    int ng = 0;
    for (int d = 0; d < x->rank; d++) {
        if (x->dims[d] == 1) continue;
        if (ng && red[ng - 1] == mask[d]) size[ng - 1] *= x->dims[d];
        else size[ng] = x->dims[d], red[ng++] = mask[d];
    }
    memset(s, 0, sizeof *s);
    s->outer = s->r = s->inner = 1;
    s->count = 1;
    s->n_out = 1;
    int n_red_groups = 0, first_red = -1;
    for (int g = 0; g < ng; g++) {
        if (red[g]) {
            n_red_groups++;
            if (first_red < 0) first_red = g;
            s->count *= size[g];
        } else {
            s->n_out *= size[g];
        }
    }
    if (n_red_groups == 0) { /* each output is its one element, transformed */
        s->outer = s->n_out;
        return;
    }
    if (n_red_groups == 1 && first_red <= 1 && ng - first_red <= 2) {
        s->outer = first_red == 1 ? size[0] : 1;
        s->r = size[first_red];
        s->inner = first_red + 1 < ng ? size[first_red + 1] : 1;
        return;
    }
    s->general = 1;
    int64_t stride = 1;
    int64_t gstr[AMP_MAX_RANK];
    for (int g = ng - 1; g >= 0; g--) gstr[g] = stride, stride *= size[g];
    for (int g = 0; g < ng; g++) {
        if (red[g]) s->red_dims[s->n_red] = size[g], s->red_str[s->n_red++] = gstr[g];
        else s->keep_dims[s->n_keep] = size[g], s->keep_str[s->n_keep++] = gstr[g];
    }
}

static AmpCode reduce_run(AmpKernelCtx *k, int kind) {
    const RedAttrs *attr = attrs_of(k);
    if (!attr) return k->st->code;
    const AmpBuf *x = k->n_in > 0 ? k->in[0] : NULL;
    if (!x) return amp_kernel_fail(k, AMP_ERR_INPUT, "the data input is missing");
    if (!amp_cuda_is_float(x->dtype)) return amp_kernel_bad_dtype(k, x->dtype);
    bool mask[AMP_MAX_RANK];
    AmpCode rc = reduce_mask(k, attr, x->rank, mask);
    if (rc) return rc;
    int ro = 0;
    int64_t od[AMP_MAX_RANK];
    uint64_t n_red = 1;
    for (int d = 0; d < x->rank; d++) {
        if (!mask[d]) od[ro++] = x->dims[d];
        else if (attr->keep) od[ro++] = 1;
        if (mask[d]) n_red *= (uint64_t)x->dims[d];
    }
    AmpBuf *y;
    if ((rc = amp_kernel_outputs(k, 1, &y)) || !y) return rc;
    if ((rc = amp_kernel_check_out(k, y, x->dtype, ro, od))) return rc;
    if (!y->nelem) return AMP_OK;
    AmpCudaRedShape s;
    if (!n_red) { /* an empty set per output: the identities, finished */
        memset(&s, 0, sizeof s);
        s.outer = s.n_out = (int64_t)y->nelem;
        s.inner = 1;
    } else {
        reduce_shape(x, mask, &s);
    }
    int err = amp_cuda_reduce_launch(kind, x->dtype, x->data, y->data, &s, amp_cuda_ctx(k)->stream);
    return amp_cuda_check(k, err, "reduce kernel");
}

AmpCode amp_cuda_reduce_sum(AmpKernelCtx *k) { return reduce_run(k, AMP_CUDA_RED_SUM); }
AmpCode amp_cuda_reduce_mean(AmpKernelCtx *k) { return reduce_run(k, AMP_CUDA_RED_MEAN); }
AmpCode amp_cuda_reduce_max(AmpKernelCtx *k) { return reduce_run(k, AMP_CUDA_RED_MAX); }
AmpCode amp_cuda_reduce_min(AmpKernelCtx *k) { return reduce_run(k, AMP_CUDA_RED_MIN); }
AmpCode amp_cuda_reduce_prod(AmpKernelCtx *k) { return reduce_run(k, AMP_CUDA_RED_PROD); }
AmpCode amp_cuda_reduce_sumsq(AmpKernelCtx *k) { return reduce_run(k, AMP_CUDA_RED_SUMSQ); }
AmpCode amp_cuda_reduce_l1(AmpKernelCtx *k) { return reduce_run(k, AMP_CUDA_RED_L1); }
AmpCode amp_cuda_reduce_l2(AmpKernelCtx *k) { return reduce_run(k, AMP_CUDA_RED_L2); }
AmpCode amp_cuda_reduce_logsum(AmpKernelCtx *k) { return reduce_run(k, AMP_CUDA_RED_LOGSUM); }
AmpCode amp_cuda_reduce_logsumexp(AmpKernelCtx *k) { return reduce_run(k, AMP_CUDA_RED_LOGSUMEXP); }

/* ---- ArgMax / ArgMin -------------------------------------------------------------- */

typedef struct ArgAttrs {
    int64_t axis;
    bool keep, last;
} ArgAttrs;

AmpCode amp_cuda_arg_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    (void)opset;
    ArgAttrs a = {.axis = amp_node_attr_int(n, "axis", 0),
                  .keep = amp_node_attr_int(n, "keepdims", 1) != 0,
                  .last = amp_node_attr_int(n, "select_last_index", 0) != 0};
    return prep_out(&a, sizeof a, attrs, st);
}

bool amp_cuda_supports_arg(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    (void)opset;
    return n->n_inputs >= 1 && n->inputs[0] && amp_cuda_is_float(in_dtypes[0]);
}

static AmpCode arg_run(AmpKernelCtx *k, bool is_max) {
    const ArgAttrs *attr = attrs_of(k);
    if (!attr) return k->st->code;
    const AmpBuf *x = k->n_in > 0 ? k->in[0] : NULL;
    if (!x) return amp_kernel_fail(k, AMP_ERR_INPUT, "the data input is missing");
    if (!amp_cuda_is_float(x->dtype)) return amp_kernel_bad_dtype(k, x->dtype);
    int axis;
    if (!amp_norm_axis(attr->axis, x->rank, &axis))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "axis %lld is out of range for rank %d", (long long)attr->axis,
                                x->rank);
    if (x->dims[axis] == 0) return amp_kernel_fail(k, AMP_ERR_INPUT, "axis %d is empty: no element to pick", axis);
    int ro = 0;
    int64_t od[AMP_MAX_RANK];
    for (int d = 0; d < x->rank; d++) {
        if (d != axis) od[ro++] = x->dims[d];
        else if (attr->keep) od[ro++] = 1;
    }
    AmpBuf *y;
    AmpCode rc;
    if ((rc = amp_kernel_outputs(k, 1, &y)) || !y) return rc;
    if ((rc = amp_kernel_check_out(k, y, AMP_DT_INT64, ro, od))) return rc; /* written at o * inner + i */
    if (!y->nelem) return AMP_OK;
    int64_t outer = (int64_t)amp_shape_nelem(axis, x->dims), d = x->dims[axis];
    int64_t inner = (int64_t)amp_shape_nelem(x->rank - axis - 1, x->dims + axis + 1);
    int err = amp_cuda_argreduce_launch(is_max, attr->last, x->dtype, x->data, y->data, outer, d, inner,
                                        amp_cuda_ctx(k)->stream);
    return amp_cuda_check(k, err, "arg-reduce kernel");
}

AmpCode amp_cuda_argmax(AmpKernelCtx *k) { return arg_run(k, true); }
AmpCode amp_cuda_argmin(AmpKernelCtx *k) { return arg_run(k, false); }

/* ---- GlobalAveragePool / GlobalMaxPool ------------------------------------------------ */

/* One value per (n, c) plane of X (N, C, ...): its mean (NaN for an empty plane) or max
 * (-inf for an empty plane; NaN propagates), as kernels/cpu/pool.c. */
static AmpCode global_pool(AmpKernelCtx *k, int kind) {
    const AmpBuf *x = k->n_in > 0 ? k->in[0] : NULL;
    if (!x) return amp_kernel_fail(k, AMP_ERR_INPUT, "needs input X");
    if (!amp_cuda_is_float(x->dtype)) return amp_kernel_bad_dtype(k, x->dtype);
    if (x->rank < 2) return amp_kernel_fail(k, AMP_ERR_INPUT, "X must be (N, C, ...) (got rank %d)", x->rank);
    int64_t ydims[AMP_MAX_RANK];
    for (int i = 0; i < x->rank; i++) ydims[i] = i < 2 ? x->dims[i] : 1;
    AmpBuf *y;
    AmpCode rc;
    if ((rc = amp_kernel_outputs(k, 1, &y)) || !y || (rc = amp_kernel_check_out(k, y, x->dtype, x->rank, ydims)))
        return rc;
    if (!y->nelem) return AMP_OK;
    AmpCudaRedShape s;
    memset(&s, 0, sizeof s);
    s.outer = s.n_out = (int64_t)y->nelem;
    s.r = s.count = (int64_t)amp_shape_nelem(x->rank - 2, x->dims + 2);
    s.inner = 1;
    int err = amp_cuda_reduce_launch(kind, x->dtype, x->data, y->data, &s, amp_cuda_ctx(k)->stream);
    return amp_cuda_check(k, err, "global pool kernel");
}

AmpCode amp_cuda_global_averagepool(AmpKernelCtx *k) { return global_pool(k, AMP_CUDA_RED_MEAN); }
AmpCode amp_cuda_global_maxpool(AmpKernelCtx *k) { return global_pool(k, AMP_CUDA_RED_MAX); }
