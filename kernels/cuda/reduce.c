/* CUDA node-level kernels: the Reduce* ops, ArgMax/ArgMin, GlobalAveragePool and
 * GlobalMaxPool, for float32, float16 and bfloat16 data (integer data runs on the CPU
 * fallback). Attributes, axes and their checks are every backend's (ops/reduce_attrs.h),
 * empty reductions as kernels/cpu/reduce.c and pool.c; the reduced axes are coalesced
 * into the (outer, r, inner) layout reduce.cu's fast kernels take, or described in full
 * for its general one. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/reduce.h"
#include "ops/conv_geom.h" /* amp_global_pool_out */
#include "ops/geom.h"

_Static_assert(AMP_CUDA_RED_MAX_RANK == AMP_MAX_RANK, "reduce.h's rank bound is AMP_MAX_RANK");

/* ---- Reduce* ----------------------------------------------------------------------- */

/* Float data; the axes input, where listed, int32 or int64 (what amp_cuda_read_ints
 * reads). */
bool amp_cuda_supports_reduce(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    (void)opset;
    if (n->n_inputs < 1 || !n->inputs[0] || !amp_cuda_is_float(in_dtypes[0])) return false;
    if (n->n_inputs > 1 && n->inputs[1] && in_dtypes[1] != AMP_DT_INT32 && in_dtypes[1] != AMP_DT_INT64) return false;
    return true;
}

/* The geometry (ops/reduce_attrs.h): the executor's, or, where the axes input's values
 * decide (axes the model does not fix), made here from them read to the host. */
static AmpCode reduce_geom(AmpKernelCtx *k, AmpReduceGeom *own, const AmpReduceGeom **g) {
    const void *p;
    AmpCode rc = amp_kernel_geom(k, own, &p);
    if (rc || (*g = p)) return rc;
    int64_t axes[AMP_MAX_RANK];
    const AmpBuf *ax;
    if ((rc = amp_reduce_axes_input(k, k->attrs, k->in[0]->rank, &ax))) return rc;
    int got = amp_cuda_read_ints(k, 1, axes, AMP_MAX_RANK); /* ax holds values: the table made none else */
    if (got < 0) return k->st->code;
    *g = own;
    return amp_reduce_geom_axes(k, axes, (size_t)got, own);
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
    AmpReduceGeom own;
    const AmpReduceGeom *g;
    AmpCode rc = reduce_geom(k, &own, &g);
    if (rc) return rc;
    const AmpBuf *x = k->in[0];
    if (!amp_cuda_is_float(x->dtype)) return amp_kernel_bad_dtype(k, x->dtype);
    uint64_t n_red = g->n_red;
    AmpBuf *y;
    if ((rc = amp_kernel_outputs(k, 1, &y)) || !y) return rc;
    if (!y->nelem) return AMP_OK;
    AmpCudaRedShape s;
    if (!n_red) { /* an empty set per output: the identities, finished */
        memset(&s, 0, sizeof s);
        s.outer = s.n_out = (int64_t)y->nelem;
        s.inner = 1;
    } else {
        reduce_shape(x, g->mask, &s);
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

bool amp_cuda_supports_arg(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    (void)opset;
    return n->n_inputs >= 1 && n->inputs[0] && amp_cuda_is_float(in_dtypes[0]);
}

static AmpCode arg_run(AmpKernelCtx *k, bool is_max) {
    AmpArgGeom own;
    const AmpArgGeom *g; /* amp_arg_geom (ops/reduce_attrs.h) */
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&g);
    if (rc) return rc;
    const AmpBuf *x = k->in[0];
    if (!amp_cuda_is_float(x->dtype)) return amp_kernel_bad_dtype(k, x->dtype);
    AmpBuf *y;
    if ((rc = amp_kernel_outputs(k, 1, &y)) || !y) return rc;
    if (!y->nelem) return AMP_OK;
    int64_t outer = (int64_t)g->outer, d = (int64_t)g->d, inner = (int64_t)g->inner;
    bool last = ((const AmpArgAttrs *)k->attrs)->last;
    int err = amp_cuda_argreduce_launch(is_max, last, x->dtype, x->data, y->data, outer, d, inner,
                                        amp_cuda_ctx(k)->stream);
    return amp_cuda_check(k, err, "arg-reduce kernel");
}

AmpCode amp_cuda_argmax(AmpKernelCtx *k) { return arg_run(k, true); }
AmpCode amp_cuda_argmin(AmpKernelCtx *k) { return arg_run(k, false); }

/* ---- GlobalAveragePool / GlobalMaxPool ------------------------------------------------ */

/* One value per (n, c) plane of X (N, C, ...): its mean (NaN for an empty plane) or max
 * (-inf for an empty plane; NaN propagates), as kernels/cpu/pool.c. */
static AmpCode global_pool(AmpKernelCtx *k, int kind) {
    const AmpBuf *x;
    AmpBuf *y;
    AmpCode rc = amp_global_pool_out(k, amp_cuda_is_float, &x, &y); /* the checks: ops/conv_geom.h */
    if (rc || !y || !y->nelem) return rc;
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
