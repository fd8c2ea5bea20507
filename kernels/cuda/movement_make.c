/* CUDA node-level kernels of the data-movement family that index or make tensors
 * (the CPU's gather.c and tensor.c): Gather, GatherElements, Shape, Size, Constant,
 * ConstantOfShape, Range. Shapes and attribute values go to the device by value in the
 * launch; Range's bounds stay on the device. */
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/movement.h"
#include "ops/sh_common.h"

static void *stream_of(AmpKernelCtx *k) {
    return amp_cuda_ctx(k)->stream;
}

static bool present(const AmpNode *n, int i) {
    return i < n->n_inputs && n->inputs[i];
}

/* ---- Gather, GatherElements --------------------------------------------------------------- */

/* The axis (AxisAttrs, ops/sh_common.h) is parsed by amp_sh_gather_prepare. */

/* The data and indices inputs, checked; es the data's element size. */
static AmpCode data_and_indices(AmpKernelCtx *k, const AmpBuf **x, const AmpBuf **idx, size_t *es) {
    *x = k->n_in > 0 ? k->in[0] : NULL;
    *idx = k->n_in > 1 ? k->in[1] : NULL;
    if (!*x || !*idx) return amp_kernel_fail(k, AMP_ERR_INPUT, "data and indices inputs are required");
    if (!amp_cuda_mv_int((*idx)->dtype)) return amp_kernel_bad_dtype(k, (*idx)->dtype);
    *es = amp_cuda_mv_esize(k, (*x)->dtype);
    return *es ? AMP_OK : k->st->code;
}

AmpCode amp_cuda_gather(AmpKernelCtx *k) {
    const AmpBuf *x, *idx;
    size_t es;
    AmpCode rc = data_and_indices(k, &x, &idx, &es);
    if (rc) return rc;
    int axis, rank;
    int64_t dims[AMP_MAX_RANK]; /* y: (x[:axis], indices, x[axis+1:]) */
    if ((rc = amp_gather_shape(k, x, idx, &axis, &rank, dims))) return rc;
    int64_t dim = x->dims[axis];
    if (dim == 0 && idx->nelem) /* every index is outside an empty axis */
        return amp_kernel_fail(k, AMP_ERR_INPUT, "indices into an empty axis %d", axis);
    AmpBuf *y;
    if ((rc = amp_sh_out(k, x->dtype, rank, dims, &y)) || !y || !y->nelem) return rc;
    int64_t outer = (int64_t)amp_shape_nelem(axis, x->dims);
    int64_t inner = (int64_t)amp_shape_nelem(x->rank - axis - 1, x->dims + axis + 1);
    int err = amp_cuda_gather_rows(y->data, x->data, idx->data, idx->dtype == AMP_DT_INT64, es, outer,
                              (int64_t)idx->nelem, inner, dim, stream_of(k));
    return amp_cuda_check(k, err, "Gather");
}

AmpCode amp_cuda_gather_elements(AmpKernelCtx *k) {
    const AmpBuf *x, *idx;
    size_t es;
    AmpCode rc = data_and_indices(k, &x, &idx, &es);
    if (rc) return rc;
    int r = x->rank, axis;
    if ((rc = amp_gather_elements_check(k, x, idx, &axis))) return rc;
    if (x->dims[axis] == 0 && idx->nelem)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "indices into an empty axis %d", axis);
    AmpBuf *y;
    if ((rc = amp_sh_out(k, x->dtype, r, idx->dims, &y)) || !y || !y->nelem) return rc;
    AmpCudaGatherElements g = {.rank = r, .axis = axis, .dim = x->dims[axis]};
    amp_sh_strides(r, x->dims, g.xs);
    memcpy(g.dims, idx->dims, (size_t)r * sizeof g.dims[0]);
    int err = amp_cuda_gather_elems(y->data, x->data, idx->data, idx->dtype == AMP_DT_INT64, es, &g,
                                       stream_of(k));
    return amp_cuda_check(k, err, "GatherElements");
}

/* ---- Shape, Size --------------------------------------------------------------------------- */

/* The attributes and the range are every backend's (amp_shape_prepare, amp_shape_range:
 * ops/sh_common.h). */
AmpCode amp_cuda_shape(AmpKernelCtx *k) {
    const AmpBuf *x = k->n_in > 0 ? k->in[0] : NULL;
    if (!x) return amp_kernel_fail(k, AMP_ERR_INPUT, "input 0 (data) is missing");
    int64_t start, n;
    amp_shape_range(k->attrs, x->rank, &start, &n);
    AmpBuf *y;
    AmpCode rc = amp_sh_out(k, AMP_DT_INT64, 1, &n, &y);
    if (rc || !y || !n) return rc;
    AmpCudaSmall s = {.len = (uint32_t)(n * 8)};
    memcpy(s.b, x->dims + start, (size_t)n * 8);
    return amp_cuda_check(k, amp_cuda_put_small(y->data, &s, stream_of(k)), "Shape");
}

AmpCode amp_cuda_size(AmpKernelCtx *k) {
    const AmpBuf *x = k->n_in > 0 ? k->in[0] : NULL;
    if (!x) return amp_kernel_fail(k, AMP_ERR_INPUT, "input 0 (data) is missing");
    AmpBuf *y;
    AmpCode rc = amp_sh_out(k, AMP_DT_INT64, 0, NULL, &y);
    if (rc || !y) return rc;
    int64_t v = (int64_t)x->nelem;
    AmpCudaSmall s = {.len = 8};
    memcpy(s.b, &v, 8);
    return amp_cuda_check(k, amp_cuda_put_small(y->data, &s, stream_of(k)), "Size");
}

bool amp_cuda_supports_shape(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    (void)opset;
    /* Only the dims are read: any tensor but strings (never on the device). */
    return present(n, 0) && in_dtypes[0] != AMP_DT_UNDEFINED && in_dtypes[0] != AMP_DT_STRING;
}

/* ---- Constant, ConstantOfShape -------------------------------------------------------------- */

/* The attributes and the value Constant makes are every backend's (amp_constant_prepare,
 * amp_constant_value, amp_constant_of_shape_prepare: ops/sh_common.h). */

/* y = bytes host bytes: by value in the launch when small, else copied from the model's
 * memory (which outlives the run). */
static AmpCode put_bytes(AmpKernelCtx *k, void *y, const void *bytes, size_t len) {
    if (!len) return AMP_OK;
    if (len <= AMP_CUDA_SMALL_BYTES) {
        AmpCudaSmall s = {.len = (uint32_t)len};
        memcpy(s.b, bytes, len);
        return amp_cuda_check(k, amp_cuda_put_small(y, &s, stream_of(k)), "Constant");
    }
    return amp_cuda_check(k, amp_cuda_upload(y, bytes, len, stream_of(k)), "Constant upload");
}

AmpCode amp_cuda_constant(AmpKernelCtx *k) {
    const void *bytes;
    AmpBuf *y;
    AmpCode rc = amp_constant_out(k, &y, &bytes);
    if (rc || !y) return rc;
    return put_bytes(k, y->data, bytes, amp_buf_bytes(y));
}

bool amp_cuda_supports_constant(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    (void)opset, (void)in_dtypes;
    int count = 0, which = -1;
    for (int i = 0; i < 8; i++)
        if (amp_node_attr(n, amp_constant_names[i])) which = i, count++;
    if (count != 1 || which > 4) return false;
    if (which == 0) {
        const AmpAttr *a = amp_node_attr(n, "value");
        return a->t && amp_cuda_mv_movable(a->t->dtype);
    }
    return true;
}

/* The output's shape is the shape input's values, which the shape function read: the
 * kernel fills what was placed. */
AmpCode amp_cuda_constant_of_shape(AmpKernelCtx *k) {
    const AmpFillAttrs *f = k->attrs;
    size_t es = amp_cuda_mv_esize(k, f->dtype);
    if (!es) return k->st->code;
    uint64_t bits = 0; /* the value's bytes, little-endian (es <= 8) */
    memcpy(&bits, f->value, es);
    AmpBuf *y;
    AmpCode rc = amp_sh_out_placed(k, f->dtype, -1, &y);
    if (rc || !y) return rc;
    return amp_cuda_check(k, amp_cuda_fill(y->data, es, bits, y->nelem, stream_of(k)), "ConstantOfShape");
}

bool amp_cuda_supports_constant_of_shape(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    (void)opset, (void)in_dtypes;
    const AmpAttr *a = amp_node_attr(n, "value");
    return !a || (a->t && a->t->nelem == 1 && amp_cuda_mv_movable(a->t->dtype));
}

/* ---- Range ------------------------------------------------------------------------------------ */

static bool range_dtype(int dt) {
    return dt == AMP_DT_FLOAT || dt == AMP_DT_DOUBLE || dt == AMP_DT_FLOAT16 || dt == AMP_DT_BFLOAT16 ||
           dt == AMP_DT_INT32 || dt == AMP_DT_INT64;
}

/* The length (the CPU's ceil((limit - start) / delta)) was placed by the shape function,
 * which read the three scalars: start and delta stay on the device. */
AmpCode amp_cuda_range(AmpKernelCtx *k) {
    const AmpBuf *b[3];
    static const char *const what[3] = {"start", "limit", "delta"};
    for (int i = 0; i < 3; i++) {
        if (!(b[i] = i < k->n_in ? k->in[i] : NULL)) return amp_kernel_fail(k, AMP_ERR_INPUT, "no %s input", what[i]);
        if (b[i]->nelem != 1) return amp_kernel_fail(k, AMP_ERR_INPUT, "%s must hold one element", what[i]);
        if (b[i]->dtype != b[0]->dtype) return amp_kernel_fail(k, AMP_ERR_INPUT, "start, limit and delta differ in type");
    }
    int dt = b[0]->dtype;
    if (!range_dtype(dt)) return amp_kernel_bad_dtype(k, dt);
    AmpBuf *y;
    AmpCode rc = amp_sh_out_placed(k, dt, 1, &y);
    if (rc || !y) return rc;
    int err = amp_cuda_range_fill(y->data, dt, b[0]->data, b[2]->data, y->nelem, stream_of(k));
    return amp_cuda_check(k, err, "Range");
}

bool amp_cuda_supports_range(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    (void)opset;
    return present(n, 0) && present(n, 1) && present(n, 2) && range_dtype(in_dtypes[0]) &&
           in_dtypes[1] == in_dtypes[0] && in_dtypes[2] == in_dtypes[0];
}

bool amp_cuda_supports_gather(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    (void)opset;
    return present(n, 0) && present(n, 1) && amp_cuda_mv_movable(in_dtypes[0]) && amp_cuda_mv_int(in_dtypes[1]);
}
