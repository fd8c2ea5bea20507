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
    int axis;
    int64_t a = ((const AxisAttrs *)k->attrs)->axis;
    if (!amp_norm_axis(a, x->rank, &axis))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "axis %lld is out of range for rank %d", (long long)a, x->rank);
    int rank = x->rank - 1 + idx->rank;
    if (rank > AMP_MAX_RANK) return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "output rank %d is over %d", rank, AMP_MAX_RANK);
    int64_t dims[AMP_MAX_RANK];
    int r = 0;
    for (int d = 0; d < axis; d++) dims[r++] = x->dims[d];
    for (int d = 0; d < idx->rank; d++) dims[r++] = idx->dims[d];
    for (int d = axis + 1; d < x->rank; d++) dims[r++] = x->dims[d];
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
    int64_t a = ((const AxisAttrs *)k->attrs)->axis;
    if (!amp_norm_axis(a, r, &axis))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "axis %lld is out of range for rank %d", (long long)a, r);
    if (idx->rank != r) return amp_kernel_fail(k, AMP_ERR_INPUT, "indices have rank %d, data %d", idx->rank, r);
    for (int d = 0; d < r; d++)
        if (d != axis && idx->dims[d] > x->dims[d])
            return amp_kernel_fail(k, AMP_ERR_INPUT, "indices dimension %d (%lld) exceeds the data's (%lld)", d,
                               (long long)idx->dims[d], (long long)x->dims[d]);
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

/* Shape's start and end (opset 15), raw: clamped against the rank in the kernel. */
typedef struct ShapeAttrs {
    int64_t start, end;
    bool has_end;
} ShapeAttrs;

AmpCode amp_cuda_mv_shape_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    (void)opset;
    const AmpAttr *e = amp_node_attr(n, "end");
    ShapeAttrs a = {amp_node_attr_int(n, "start", 0), amp_node_attr_int(n, "end", 0), e && e->type == AMP_ATTR_INT};
    return amp_prep_out(&a, sizeof a, attrs, st);
}

AmpCode amp_cuda_shape(AmpKernelCtx *k) {
    const ShapeAttrs *a = k->attrs;
    const AmpBuf *x = k->n_in > 0 ? k->in[0] : NULL;
    if (!x) return amp_kernel_fail(k, AMP_ERR_INPUT, "input 0 (data) is missing");
    int64_t r = x->rank;
    int64_t start = a->start, end = a->has_end ? a->end : r;
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = start < 0 ? 0 : start > r ? r : start;
    end = end < 0 ? 0 : end > r ? r : end;
    int64_t n = end > start ? end - start : 0;
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

static const char *const const_names[] = {"value",      "value_float", "value_floats",  "value_int",
                                          "value_ints", "value_string", "value_strings", "sparse_value"};

/* Constant: which value attribute it has (an index of const_names), that attribute, and
 * for 'value' its element bytes in the model's memory (alive as long as the model). */
typedef struct ConstantAttrs {
    int which;
    const AmpAttr *a;
    AmpBytes bytes;
} ConstantAttrs;

/* The element bytes of node n's tensor attribute t, at least as many as its shape needs. */
static AmpCode tensor_attr_bytes(const AmpNode *n, AmpTensor *t, AmpBytes *out, AmpStatus *st) {
    if (!amp_cuda_mv_movable(t->dtype))
        return amp_node_fail(n, st, AMP_ERR_UNSUPPORTED, "the CUDA kernel does not take %s", amp_dtype_name(t->dtype));
    AmpModel *m = n->graph ? n->graph->model : NULL;
    if (!m)
        return amp_node_fail(n, st, AMP_ERR_INTERNAL, "node has no model");
    AmpCode rc = amp_tensor_bytes(m, t, out, st);
    if (rc) return rc;
    size_t need;
    if (!amp_tensor_expected_bytes(t->dtype, t->nelem, &need) || out->len < need || (need && !out->data))
        return amp_node_fail(n, st, AMP_ERR_INPUT, "tensor attribute holds %zu bytes, fewer than its shape needs", out->len);
    return AMP_OK;
}

AmpCode amp_cuda_mv_constant_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    (void)opset;
    ConstantAttrs c = {.which = -1};
    int count = 0;
    for (int i = 0; i < 8; i++) {
        const AmpAttr *t = amp_node_attr(n, const_names[i]);
        if (t) c.a = t, c.which = i, count++;
    }
    if (count != 1) return amp_node_fail(n, st, AMP_ERR_INPUT, "exactly one value attribute is required (%d given)", count);
    if (c.which == 0 && c.a->t) {
        AmpCode rc = tensor_attr_bytes(n, c.a->t, &c.bytes, st);
        if (rc) return rc;
    }
    return amp_prep_out(&c, sizeof c, attrs, st);
}

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
    const ConstantAttrs *c = k->attrs;
    const AmpAttr *a = c->a;
    int64_t n1[1] = {0};
    AmpBuf *y;
    AmpCode rc;
    switch (c->which) {
    case 0: {
        const AmpTensor *t = a->t;
        if (!t) return amp_kernel_fail(k, AMP_ERR_INPUT, "'value' holds no tensor");
        if (t->ndims > AMP_MAX_RANK)
            return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "constant of rank %zu is over %d", t->ndims, AMP_MAX_RANK);
        int64_t dims[AMP_MAX_RANK];
        bool neg = false;
        for (size_t i = 0; i < t->ndims; i++) dims[i] = t->dims[i], neg |= dims[i] < 0;
        if (neg || amp_shape_nelem((int)t->ndims, dims) != t->nelem)
            return amp_kernel_fail(k, AMP_ERR_INPUT, "tensor dims and element count differ");
        if ((rc = amp_sh_out(k, t->dtype, (int)t->ndims, dims, &y)) || !y) return rc;
        return put_bytes(k, y->data, c->bytes.data, amp_buf_bytes(y));
    }
    case 1:
        if ((rc = amp_sh_out(k, AMP_DT_FLOAT, 0, n1, &y)) || !y) return rc;
        return put_bytes(k, y->data, &a->f, sizeof(float));
    case 2:
        n1[0] = (int64_t)a->n_floats;
        if ((rc = amp_sh_out(k, AMP_DT_FLOAT, 1, n1, &y)) || !y) return rc;
        return put_bytes(k, y->data, a->floats, a->n_floats * sizeof(float));
    case 3:
        if ((rc = amp_sh_out(k, AMP_DT_INT64, 0, n1, &y)) || !y) return rc;
        return put_bytes(k, y->data, &a->i, sizeof(int64_t));
    case 4:
        n1[0] = (int64_t)a->n_ints;
        if ((rc = amp_sh_out(k, AMP_DT_INT64, 1, n1, &y)) || !y) return rc;
        return put_bytes(k, y->data, a->ints, a->n_ints * sizeof(int64_t));
    default: return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "'%s' constants are not supported", const_names[c->which]);
    }
}

bool amp_cuda_supports_constant(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    (void)opset, (void)in_dtypes;
    int count = 0, which = -1;
    for (int i = 0; i < 8; i++)
        if (amp_node_attr(n, const_names[i])) which = i, count++;
    if (count != 1 || which > 4) return false;
    if (which == 0) {
        const AmpAttr *a = amp_node_attr(n, "value");
        return a->t && amp_cuda_mv_movable(a->t->dtype);
    }
    return true;
}

/* ConstantOfShape: the fill value's dtype and bytes (float 0 by default). */
typedef struct FillAttrs {
    int dtype;
    uint64_t bits; /* the value's bytes, little-endian */
} FillAttrs;

AmpCode amp_cuda_mv_fill_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    (void)opset;
    FillAttrs f = {.dtype = AMP_DT_FLOAT};
    const AmpAttr *a = amp_node_attr(n, "value");
    if (a && a->t) {
        AmpBytes bytes;
        AmpCode rc = tensor_attr_bytes(n, a->t, &bytes, st);
        if (rc) return rc;
        if (a->t->nelem != 1) return amp_node_fail(n, st, AMP_ERR_INPUT, "'value' must hold one element");
        f.dtype = a->t->dtype;
        memcpy(&f.bits, bytes.data, amp_dtype_bits(f.dtype) / 8);
    }
    return amp_prep_out(&f, sizeof f, attrs, st);
}

/* The output's shape is the shape input's values, which the shape function read: the
 * kernel fills what was placed. */
AmpCode amp_cuda_constant_of_shape(AmpKernelCtx *k) {
    const FillAttrs *f = k->attrs;
    size_t es = amp_cuda_mv_esize(k, f->dtype);
    if (!es) return k->st->code;
    AmpBuf *y;
    AmpCode rc = amp_kernel_outputs(k, 1, &y);
    if (rc || !y) return rc;
    if ((rc = amp_kernel_check_out(k, y, f->dtype, y->rank, y->dims))) return rc;
    return amp_cuda_check(k, amp_cuda_fill(y->data, es, f->bits, y->nelem, stream_of(k)), "ConstantOfShape");
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
    AmpCode rc = amp_kernel_outputs(k, 1, &y);
    if (rc || !y) return rc;
    if (y->rank != 1 || (rc = amp_kernel_check_out(k, y, dt, 1, y->dims)))
        return rc ? rc : amp_kernel_fail(k, AMP_ERR_INTERNAL, "the placed output has rank %d, not 1", y->rank);
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
