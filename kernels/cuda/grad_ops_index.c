/* CUDA node-level kernels of the training family, index-driven part (launchers in
 * grad_ops.cu): OneHot (the backward of `ampc grad`'s SoftmaxCrossEntropyLoss), ScatterND
 * (reduction none and add: the backward of its Gather) and com.microsoft GatherGrad.
 * Shapes are checked as the CPU kernels (kernels/cpu/tensor.c, gather.c) check them;
 * index values live on the device, where an index outside its axis is skipped (the CPU
 * reports it: no error is possible there without a sync), and OneHot's depth is the placed
 * output's (the executor sized it from the depth input). */
#include <string.h>

#include "kernels/cuda/grad_ops.h"
#include "ops/sh_common.h"

static void *stream_of(AmpKernelCtx *k) {
    return amp_cuda_ctx(k)->stream;
}

static bool is_f32_family(int dt) {
    return dt == AMP_DT_FLOAT || dt == AMP_DT_FLOAT16 || dt == AMP_DT_BFLOAT16;
}

static bool is_index(int dt) {
    return dt == AMP_DT_INT32 || dt == AMP_DT_INT64;
}

/* Element sizes the copying kernels move whole: 1, 2, 4 or 8 bytes. */
static size_t copy_size(int dt) {
    size_t bits = amp_dtype_bits(dt);
    return bits == 8 || bits == 16 || bits == 32 || bits == 64 ? bits / 8 : 0;
}

static const AmpBuf *in_at(AmpKernelCtx *k, int i) {
    return i < k->n_in ? k->in[i] : NULL;
}

/* ---- OneHot ------------------------------------------------------------------------------ */

AmpCode amp_cuda_one_hot_node(AmpKernelCtx *k) {
    const AmpBuf *idx = in_at(k, 0), *db = in_at(k, 1), *vb = in_at(k, 2);
    if (!idx || !db || !vb) return amp_kernel_fail(k, AMP_ERR_INPUT, "indices, depth and values are required");
    if (!is_index(idx->dtype)) return amp_kernel_bad_dtype(k, idx->dtype);
    if (db->nelem != 1) return amp_kernel_fail(k, AMP_ERR_INPUT, "depth must hold one element");
    if (vb->nelem != 2) return amp_kernel_fail(k, AMP_ERR_INPUT, "values must hold two elements (off, on)");
    size_t es = copy_size(vb->dtype);
    if (!es) return amp_kernel_bad_dtype(k, vb->dtype);
    /* y: indices.shape with depth inserted at axis; depth as the executor placed it */
    int64_t depth = -1;
    int axis;
    AmpBuf *y;
    AmpCode rc = amp_one_hot_out(k, idx, vb->dtype, &depth, &axis, &y);
    if (rc || !y || !y->nelem) return rc;
    uint64_t inner = amp_shape_nelem(idx->rank - axis, idx->dims + axis), outer = amp_shape_nelem(axis, idx->dims);
    return amp_cuda_check(k, amp_cuda_one_hot(y->data, es, vb->data, idx->data, idx->dtype == AMP_DT_INT64, outer,
                                              depth, inner, stream_of(k)),
                          "OneHot");
}

/* ---- ScatterND ----------------------------------------------------------------------------- */

/* The tuples' geometry after the shape checks (amp_scatter_nd_check): updates (indices[:q-1], data[m:]). */
static AmpCode scatter_geometry(AmpKernelCtx *k, const AmpBuf *x, const AmpBuf *idx, const AmpBuf *u,
                                AmpCudaScatter *s) {
    int r = x->rank, q = idx->rank;
    int64_t m;
    AmpCode rc = amp_scatter_nd_check(k, x, idx, u, &m);
    if (rc) return rc;
    memset(s, 0, sizeof *s);
    s->m = (int)m;
    memcpy(s->dims, x->dims, (size_t)m * sizeof x->dims[0]);
    s->tuples = amp_shape_nelem(q - 1, idx->dims);
    s->slice = amp_shape_nelem(r - (int)m, x->dims + m);
    return AMP_OK;
}

AmpCode amp_cuda_scatter_nd_node(AmpKernelCtx *k) {
    const AmpBuf *x = in_at(k, 0), *idx = in_at(k, 1), *u = in_at(k, 2);
    if (!x || !idx || !u) return amp_kernel_fail(k, AMP_ERR_INPUT, "data, indices and updates inputs are required");
    if (!is_index(idx->dtype))
        return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "indices of %s", amp_dtype_name(idx->dtype));
    if (u->dtype != x->dtype)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "updates are %s, data %s", amp_dtype_name(u->dtype),
                               amp_dtype_name(x->dtype));
    int op = ((const ScatterAttrs *)k->attrs)->op;
    size_t es = copy_size(x->dtype);
    if (op == AMP_SCATTER_ADD ? !is_f32_family(x->dtype) : op != AMP_SCATTER_NONE || !es)
        return amp_kernel_bad_dtype(k, x->dtype);
    AmpCudaScatter s;
    AmpCode rc = scatter_geometry(k, x, idx, u, &s);
    AmpBuf *y;
    if (rc || (rc = amp_sh_out(k, x->dtype, x->rank, x->dims, &y)) || !y || !y->nelem) return rc;
    if (y->data != x->data && (rc = amp_cuda_copy(k, y->data, x->data, (size_t)y->nelem * es))) return rc;
    return amp_cuda_check(k,
                          amp_cuda_scatter_nd(op == AMP_SCATTER_ADD ? AMP_CUDA_SCATTER_ADD : AMP_CUDA_SCATTER_NONE,
                                              x->dtype, es, y->data, u->data, idx->data,
                                              idx->dtype == AMP_DT_INT64, &s, stream_of(k)),
                          "ScatterND");
}

/* ---- GatherGrad ------------------------------------------------------------------------------ */

/* (shape, indices, dY) -> dX of `shape` (placed), dY Gather's output for it (gather.c). */
AmpCode amp_cuda_gather_grad_node(AmpKernelCtx *k) {
    const AmpBuf *idx = in_at(k, 1), *dy = in_at(k, 2);
    if (!in_at(k, 0) || !idx || !dy)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "shape, indices and dY inputs are required");
    if (!is_index(idx->dtype))
        return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "indices of %s", amp_dtype_name(idx->dtype));
    if (!is_f32_family(dy->dtype)) return amp_kernel_bad_dtype(k, dy->dtype);
    AmpBuf *dx;
    AmpCode rc = amp_kernel_outputs(k, 1, &dx);
    if (rc || !dx) return rc;
    int axis;
    if ((rc = amp_gather_grad_check(k, idx, dy, dx, &axis))) return rc;
    if (!dx->nelem) return AMP_OK;
    uint64_t outer = amp_shape_nelem(axis, dx->dims), row = amp_shape_nelem(dx->rank - axis - 1, dx->dims + axis + 1);
    AmpCudaCtx *c = amp_cuda_ctx(k);
    int err = amp_cuda_gather_grad(dx->dtype, dx->data, dy->data, idx->data, idx->dtype == AMP_DT_INT64, outer,
                                   dx->dims[axis], idx->nelem, row, c->workspace, c->workspace_bytes, c->stream);
    if (err == -1)
        return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "the fp32 sums of one row per outer index exceed the workspace");
    return amp_cuda_check(k, err, "GatherGrad");
}

/* ---- supports predicates ----------------------------------------------------------------------- */

static int dt_at(const AmpNode *n, const int *in_dtypes, int i) {
    return i < n->n_inputs && n->inputs[i] ? in_dtypes[i] : AMP_DT_UNDEFINED;
}

bool amp_cuda_supports_one_hot(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    (void)opset;
    return is_index(dt_at(n, in_dtypes, 0)) && dt_at(n, in_dtypes, 1) != AMP_DT_UNDEFINED &&
           copy_size(dt_at(n, in_dtypes, 2)) != 0;
}

bool amp_cuda_supports_scatter_nd(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    (void)opset;
    int dt = dt_at(n, in_dtypes, 0);
    if (!is_index(dt_at(n, in_dtypes, 1)) || dt_at(n, in_dtypes, 2) != dt) return false;
    const char *red = amp_node_attr_string(n, "reduction", "none");
    if (!strcmp(red, "none")) return copy_size(dt) != 0;
    if (!strcmp(red, "add")) return is_f32_family(dt);
    return false; /* mul, max, min: the CPU's */
}

bool amp_cuda_supports_gather_grad(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    (void)opset;
    return dt_at(n, in_dtypes, 0) != AMP_DT_UNDEFINED && is_index(dt_at(n, in_dtypes, 1)) &&
           is_f32_family(dt_at(n, in_dtypes, 2));
}
