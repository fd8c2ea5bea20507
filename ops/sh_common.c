/* The data-movement family's helpers and attributes, every backend's (ops/sh_common.h). */
#include <string.h>

#include "ops/kernel_out.h"
#include "ops/sh_common.h"

/* ---- element sizes, placed outputs, integer inputs, strides --------------------------- */

size_t amp_sh_esize(AmpKernelCtx *k, int dtype) {
    size_t bits = amp_dtype_bits(dtype);
    if (bits == 0 || bits % 8 != 0) {
        amp_kernel_bad_dtype(k, dtype);
        return 0;
    }
    return bits / 8;
}

AmpCode amp_sh_out(AmpKernelCtx *k, int dtype, int rank, const int64_t *dims, AmpBuf **y) {
    AmpCode rc = amp_kernel_outputs(k, 1, y);
    if (rc || !*y) return rc;
    if ((rc = amp_kernel_check_out(k, *y, dtype, rank, dims))) *y = NULL;
    return rc;
}

AmpCode amp_sh_out_count(AmpKernelCtx *k, int dtype, uint64_t nelem, AmpBuf **y) {
    AmpCode rc = amp_kernel_outputs(k, 1, y);
    if (rc || !*y) return rc;
    if ((*y)->dtype == dtype && (*y)->nelem == nelem) return AMP_OK;
    char got[160];
    amp_buf_describe(*y, got, sizeof got);
    *y = NULL;
    return amp_kernel_fail(k, AMP_ERR_INTERNAL, "the output placed is %s, the kernel expects %llu elements of %s", got,
                       (unsigned long long)nelem, amp_dtype_name(dtype));
}

AmpCode amp_sh_ints(AmpKernelCtx *k, const AmpBuf *b, const char *what, int64_t *out, size_t max, size_t *n) {
    switch (b->dtype) {
    case AMP_DT_INT64:
    case AMP_DT_INT32:
    case AMP_DT_INT16:
    case AMP_DT_INT8:
    case AMP_DT_UINT64:
    case AMP_DT_UINT32:
    case AMP_DT_UINT16:
    case AMP_DT_UINT8: break;
    default:
        return amp_kernel_fail(k, AMP_ERR_INPUT, "%s must be an integer tensor, not %s", what, amp_dtype_name(b->dtype));
    }
    if (b->rank > 1) return amp_kernel_fail(k, AMP_ERR_INPUT, "%s must be 1-D (it has rank %d)", what, b->rank);
    if (b->nelem > max) return amp_kernel_fail(k, AMP_ERR_INPUT, "%s has %llu values, at most %zu allowed", what,
                                           (unsigned long long)b->nelem, max);
    for (uint64_t i = 0; i < b->nelem; i++) out[i] = amp_buf_get_i64(b, i);
    *n = (size_t)b->nelem;
    return AMP_OK;
}

void amp_sh_strides(int rank, const int64_t *dims, int64_t *strides) {
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        strides[i] = s;
        s *= dims[i];
    }
}

/* ---- attributes, parsed once at prepare ---------------------------------------------- */

AmpCode amp_transpose_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    (void)opset;
    TransposeAttrs t = {0};
    const AmpAttr *a = amp_node_attr(n, "perm");
    if (a && a->n_ints) {
        t.n = a->n_ints; /* over AMP_MAX_RANK: fits no input, the kernel says so */
        bool seen[AMP_MAX_RANK] = {false};
        for (size_t i = 0; i < t.n && t.n <= AMP_MAX_RANK; i++) {
            int64_t p = a->ints[i];
            if (p < 0 || p >= (int64_t)t.n || seen[p]) return amp_node_fail(n, st, AMP_ERR_INPUT, "perm is not a permutation");
            seen[p] = true;
            t.perm[i] = p;
        }
    }
    return amp_prep_out(&t, sizeof t, attrs, st);
}

AmpCode amp_concat_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    const AmpAttr *aa = amp_node_attr(n, "axis");
    if (!aa && opset >= 4) return amp_node_fail(n, st, AMP_ERR_INPUT, "no axis attribute");
    AxisAttrs a = {aa ? aa->i : 1}; /* Concat-1: axis 1 by default */
    return amp_prep_out(&a, sizeof a, attrs, st);
}

AmpCode amp_sh_gather_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    (void)opset;
    AxisAttrs a = {amp_node_attr_int(n, "axis", 0)};
    return amp_prep_out(&a, sizeof a, attrs, st);
}

AmpCode amp_sh_scatter_nd_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    (void)opset;
    const char *rs = amp_node_attr_string(n, "reduction", "none");
    ScatterAttrs a;
    if (strcmp(rs, "none") == 0) a.op = AMP_SCATTER_NONE;
    else if (strcmp(rs, "add") == 0) a.op = AMP_SCATTER_ADD;
    else if (strcmp(rs, "mul") == 0) a.op = AMP_SCATTER_MUL;
    else if (strcmp(rs, "max") == 0) a.op = AMP_SCATTER_MAX;
    else if (strcmp(rs, "min") == 0) a.op = AMP_SCATTER_MIN;
    else return amp_node_fail(n, st, AMP_ERR_INPUT, "unknown reduction '%s'", rs);
    return amp_prep_out(&a, sizeof a, attrs, st);
}

AmpCode amp_gather_grad_check(AmpKernelCtx *k, const AmpBuf *idx, const AmpBuf *dy, const AmpBuf *dx, int *axis) {
    int64_t a = ((const AxisAttrs *)k->attrs)->axis;
    if (!amp_norm_axis(a, dx->rank, axis))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "axis %lld is out of range for rank %d", (long long)a, dx->rank);
    /* dY is Gather's output: (dX[:axis], indices, dX[axis+1:]) */
    int64_t dims[AMP_MAX_RANK];
    int r = 0;
    for (int d = 0; d < *axis; d++) dims[r++] = dx->dims[d];
    if (r + idx->rank + dx->rank - *axis - 1 > AMP_MAX_RANK)
        return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "dY's rank is over %d", AMP_MAX_RANK);
    for (int d = 0; d < idx->rank; d++) dims[r++] = idx->dims[d];
    for (int d = *axis + 1; d < dx->rank; d++) dims[r++] = dx->dims[d];
    if (dy->dtype != dx->dtype || dy->rank != r || (r && memcmp(dy->dims, dims, (size_t)r * sizeof *dims)))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "dY does not have the shape Gather gives for this shape and indices");
    return AMP_OK;
}

AmpCode amp_one_hot_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    (void)opset;
    OneHotAttrs a = {amp_node_attr_int(n, "axis", -1)};
    return amp_prep_out(&a, sizeof a, attrs, st);
}
