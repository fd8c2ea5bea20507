/* CPU kernels: index-driven data movement: Gather, GatherElements, GatherND and
 * ScatterND (reduction none/add/mul/max/min), and com.microsoft GatherGrad (Gather's
 * backward). Indices may be negative (counted from
 * the end); an index outside the axis is AMP_ERR_INPUT, never an out-of-bounds read. */
#include <stdlib.h>
#include <string.h>

#include "ir/half.h"
#include "kernels/cpu/shape_impl.h"

static bool is_index_type(int dt) {
    return dt == AMP_DT_INT64 || dt == AMP_DT_INT32 || dt == AMP_DT_INT16 || dt == AMP_DT_INT8 ||
           dt == AMP_DT_UINT64 || dt == AMP_DT_UINT32 || dt == AMP_DT_UINT16 || dt == AMP_DT_UINT8;
}

/* Fetches the data and indices inputs and checks their types; es gets the element size. */
static AmpCode data_and_indices(AmpKernelCtx *k, const AmpBuf **x, const AmpBuf **idx, size_t *es) {
    *x = k->n_in > 0 ? k->in[0] : NULL;
    *idx = k->n_in > 1 ? k->in[1] : NULL;
    if (!*x || !*idx) return amp_kernel_fail(k, AMP_ERR_INPUT, "data and indices inputs are required");
    if (!is_index_type((*idx)->dtype))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "indices must be integers, not %s", amp_dtype_name((*idx)->dtype));
    *es = amp_sh_esize(k, (*x)->dtype);
    return *es ? AMP_OK : k->st->code;
}

/* Index i of idx, made non-negative against an axis of size dim; false when outside. */
static bool index_at(const AmpBuf *idx, uint64_t i, int64_t dim, int64_t *out) {
    int64_t v = amp_buf_get_i64(idx, i);
    if (idx->dtype == AMP_DT_UINT64 && v < 0) return false; /* huge unsigned value */
    if (v < 0) v += dim;
    if (v < 0 || v >= dim) return false;
    *out = v;
    return true;
}

static AmpCode bad_index(AmpKernelCtx *k, const AmpBuf *idx, uint64_t i, int64_t dim) {
    return amp_kernel_fail(k, AMP_ERR_INPUT, "index %lld (at %llu) is out of range for an axis of size %lld",
                       (long long)amp_buf_get_i64(idx, i), (unsigned long long)i, (long long)dim);
}

AmpCode amp_sh_gather(AmpKernelCtx *k) {
    const AmpBuf *x, *idx;
    size_t es;
    AmpCode rc = data_and_indices(k, &x, &idx, &es);
    if (rc) return rc;
    int axis, rank;
    int64_t dims[AMP_MAX_RANK]; /* y: (x[:axis], indices, x[axis+1:]) */
    if ((rc = amp_gather_shape(k, x, idx, &axis, &rank, dims))) return rc;
    int64_t dim = x->dims[axis], v = 0;
    for (uint64_t j = 0; j < idx->nelem; j++)
        if (!index_at(idx, j, dim, &v)) return bad_index(k, idx, j, dim);
    AmpBuf *y;
    if ((rc = amp_sh_out(k, x->dtype, rank, dims, &y)) || !y) return rc;
    if (!y->nelem) return AMP_OK; /* no element, however many empty rows (after the index checks) */
    uint64_t outer = amp_shape_nelem(axis, x->dims);
    size_t row = (size_t)amp_shape_nelem(x->rank - axis - 1, x->dims + axis + 1) * es;
    const char *src = x->data;
    char *dst = y->data;
    for (uint64_t o = 0; o < outer; o++)
        for (uint64_t j = 0; j < idx->nelem; j++, dst += row) {
            index_at(idx, j, dim, &v);
            if (row) memcpy(dst, src + ((size_t)o * (size_t)dim + (size_t)v) * row, row);
        }
    return AMP_OK;
}

/* com.microsoft GatherGrad (shape, indices, dY) -> dX: zeros of `shape` (Gather's data),
 * into which each row of dY is added at its index along `axis`, in fp32 (fp64 for double)
 * and rounded once: rows that repeat an index (a token seen twice) sum. */
AmpCode amp_ms_gather_grad(AmpKernelCtx *k) {
    const AmpBuf *shape = k->n_in > 0 ? k->in[0] : NULL, *idx = k->n_in > 1 ? k->in[1] : NULL;
    const AmpBuf *dy = k->n_in > 2 ? k->in[2] : NULL;
    if (!shape || !idx || !dy) return amp_kernel_fail(k, AMP_ERR_INPUT, "shape, indices and dY inputs are required");
    if (!is_index_type(idx->dtype))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "indices must be integers, not %s", amp_dtype_name(idx->dtype));
    if (!amp_is_f32_family(dy->dtype) && dy->dtype != AMP_DT_DOUBLE) return amp_kernel_bad_dtype(k, dy->dtype);
    AmpBuf *dx;
    AmpCode rc = amp_kernel_outputs(k, 1, &dx);
    if (rc || !dx) return rc;
    int axis;
    if ((rc = amp_gather_grad_check(k, idx, dy, dx, &axis))) return rc;
    int64_t dim = dx->dims[axis], v = 0;
    for (uint64_t j = 0; j < idx->nelem; j++)
        if (!index_at(idx, j, dim, &v)) return bad_index(k, idx, j, dim);
    if (!dx->nelem) return AMP_OK;
    uint64_t outer = amp_shape_nelem(axis, dx->dims);
    uint64_t row = amp_shape_nelem(dx->rank - axis - 1, dx->dims + axis + 1);
    if (dx->dtype == AMP_DT_DOUBLE) {
        double *o = dx->data;
        const double *g = dy->data;
        memset(o, 0, (size_t)dx->nelem * sizeof *o);
        for (uint64_t b = 0; b < outer; b++)
            for (uint64_t j = 0; j < idx->nelem; j++, g += row) {
                index_at(idx, j, dim, &v);
                double *t = o + (b * (uint64_t)dim + (uint64_t)v) * row;
                for (uint64_t e = 0; e < row; e++) t[e] += g[e];
            }
        return AMP_OK;
    }
    float *tg = NULL, *to = NULL;
    const float *g = amp_buf_f32_in(dy, &tg);
    float *o = amp_buf_f32_out(dx, &to);
    if (!g || !o) {
        free(tg), free(to);
        return amp_kernel_fail(k, AMP_ERR_INTERNAL, "out of memory");
    }
    memset(o, 0, (size_t)dx->nelem * sizeof *o);
    const float *gp = g;
    for (uint64_t b = 0; b < outer; b++)
        for (uint64_t j = 0; j < idx->nelem; j++, gp += row) {
            index_at(idx, j, dim, &v);
            float *t = o + (b * (uint64_t)dim + (uint64_t)v) * row;
            for (uint64_t e = 0; e < row; e++) t[e] += gp[e];
        }
    amp_buf_f32_commit(dx, to);
    free(tg);
    return AMP_OK;
}

AmpCode amp_sh_gather_elements(AmpKernelCtx *k) {
    const AmpBuf *x, *idx;
    size_t es;
    AmpCode rc = data_and_indices(k, &x, &idx, &es);
    if (rc) return rc;
    int r = x->rank, axis;
    if ((rc = amp_gather_elements_check(k, x, idx, &axis))) return rc;
    int64_t dim = x->dims[axis], v = 0;
    for (uint64_t j = 0; j < idx->nelem; j++)
        if (!index_at(idx, j, dim, &v)) return bad_index(k, idx, j, dim);
    AmpBuf *y;
    if ((rc = amp_sh_out(k, x->dtype, r, idx->dims, &y)) || !y) return rc;
    int64_t strides[AMP_MAX_RANK], c[AMP_MAX_RANK] = {0};
    amp_sh_strides(r, x->dims, strides);
    const char *src = x->data;
    char *dst = y->data;
    int64_t base = 0; /* offset of c with the axis coordinate left out */
    for (uint64_t j = 0; j < idx->nelem; j++, dst += es) {
        index_at(idx, j, dim, &v);
        memcpy(dst, src + (size_t)(base + v * strides[axis]) * es, es);
        for (int d = r - 1; d >= 0; d--) {
            if (d != axis) base += strides[d];
            if (++c[d] < idx->dims[d]) break;
            if (d != axis) base -= strides[d] * c[d];
            c[d] = 0;
        }
    }
    return AMP_OK;
}

/* Offset (in slices of the trailing dims) of the m-tuple at idx[t*m .. t*m+m) within
 * data dims[0..m); false when an index is outside. */
static bool tuple_offset(const AmpBuf *idx, uint64_t t, int64_t m, const int64_t *dims, int64_t *off, uint64_t *bad) {
    int64_t o = 0, v;
    for (int64_t j = 0; j < m; j++) {
        uint64_t at = t * (uint64_t)m + (uint64_t)j;
        if (!index_at(idx, at, dims[j], &v)) {
            *bad = at;
            return false;
        }
        o = o * dims[j] + v;
    }
    *off = o;
    return true;
}

/* GatherND's batch_dims, raw (checked against the ranks). */
typedef struct GatherNdAttrs {
    int64_t batch_dims;
} GatherNdAttrs;

AmpCode amp_sh_gather_nd_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    (void)opset;
    GatherNdAttrs a = {amp_node_attr_int(n, "batch_dims", 0)};
    return amp_prep_out(&a, sizeof a, attrs, st);
}

AmpCode amp_sh_gather_nd(AmpKernelCtx *k) {
    const AmpBuf *x, *idx;
    size_t es;
    AmpCode rc = data_and_indices(k, &x, &idx, &es);
    if (rc) return rc;
    int r = x->rank, q = idx->rank;
    int64_t b = ((const GatherNdAttrs *)k->attrs)->batch_dims;
    if (q < 1 || r < 1) return amp_kernel_fail(k, AMP_ERR_INPUT, "data and indices must have rank >= 1");
    if (b < 0 || b >= q || b >= r)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "batch_dims %lld is out of range", (long long)b);
    int64_t m = idx->dims[q - 1];
    if (m < 1 || m > r - b)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "index tuples of length %lld do not fit data of rank %d", (long long)m, r);
    for (int d = 0; d < b; d++)
        if (idx->dims[d] != x->dims[d]) return amp_kernel_fail(k, AMP_ERR_INPUT, "batch dimension %d differs", d);
    int rank = q - 1 + r - (int)b - (int)m;
    if (rank > AMP_MAX_RANK)
        return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "output rank %d is over %d", rank, AMP_MAX_RANK);
    /* y: (indices[:q-1], x[b+m:]) */
    int64_t dims[AMP_MAX_RANK];
    int n = 0;
    for (int d = 0; d < q - 1; d++) dims[n++] = idx->dims[d];
    for (int d = (int)(b + m); d < r; d++) dims[n++] = x->dims[d];
    uint64_t batches = amp_shape_nelem((int)b, x->dims);
    uint64_t per = amp_shape_nelem(q - 1 - (int)b, idx->dims + b); /* tuples per batch */
    uint64_t slice = amp_shape_nelem(r - (int)(b + m), x->dims + b + m);
    uint64_t xbatch = amp_shape_nelem(r - (int)b, x->dims + b);
    int64_t off = 0;
    uint64_t bad = 0;
    for (uint64_t t = 0; t < batches * per; t++)
        if (!tuple_offset(idx, t, m, x->dims + b, &off, &bad))
            return bad_index(k, idx, bad, x->dims[b + (int64_t)(bad % (uint64_t)m)]);
    AmpBuf *y;
    if ((rc = amp_sh_out(k, x->dtype, rank, dims, &y)) || !y) return rc;
    if (!y->nelem) return AMP_OK; /* no element, however many empty batches (after the index checks) */
    const char *src = x->data;
    char *dst = y->data;
    size_t row = (size_t)slice * es;
    for (uint64_t bb = 0; bb < batches; bb++)
        for (uint64_t t = 0; t < per; t++, dst += row) {
            tuple_offset(idx, bb * per + t, m, x->dims + b, &off, &bad);
            if (row) memcpy(dst, src + ((size_t)bb * xbatch + (size_t)off * slice) * es, row);
        }
    return AMP_OK;
}

/* ---- ScatterND ------------------------------------------------------------------------ */

enum {
    RED_NONE = AMP_SCATTER_NONE,
    RED_ADD = AMP_SCATTER_ADD,
    RED_MUL = AMP_SCATTER_MUL,
    RED_MAX = AMP_SCATTER_MAX,
    RED_MIN = AMP_SCATTER_MIN
};

static float red_f(int op, float a, float b) {
    switch (op) {
    case RED_ADD: return a + b;
    case RED_MUL: return a * b;
    case RED_MAX: return a > b ? a : b;
    default: return a < b ? a : b;
    }
}

static double red_d(int op, double a, double b) {
    switch (op) {
    case RED_ADD: return a + b;
    case RED_MUL: return a * b;
    case RED_MAX: return a > b ? a : b;
    default: return a < b ? a : b;
    }
}

/* Integer reductions wrap modulo 2^64 before narrowing (no signed overflow). */
#define RED_INT(T)                                                                                  \
    {                                                                                               \
        T *d = dst;                                                                                 \
        const T *s = src;                                                                           \
        for (uint64_t i = 0; i < n; i++) {                                                          \
            T a = d[i], b = s[i];                                                                   \
            d[i] = op == RED_ADD   ? (T)((uint64_t)a + (uint64_t)b)                                 \
                   : op == RED_MUL ? (T)((uint64_t)a * (uint64_t)b)                                 \
                   : op == RED_MAX ? (a > b ? a : b)                                                \
                                   : (a < b ? a : b);                                               \
        }                                                                                           \
        return true;                                                                                \
    }

/* dst[i] = dst[i] (op) src[i] for n elements of dtype dt; false for a dtype it lacks. */
static bool reduce_into(int dt, int op, void *dst, const void *src, uint64_t n) {
    switch (dt) {
    case AMP_DT_FLOAT: {
        float *d = dst;
        const float *s = src;
        for (uint64_t i = 0; i < n; i++) d[i] = red_f(op, d[i], s[i]);
        return true;
    }
    case AMP_DT_DOUBLE: {
        double *d = dst;
        const double *s = src;
        for (uint64_t i = 0; i < n; i++) d[i] = red_d(op, d[i], s[i]);
        return true;
    }
    case AMP_DT_FLOAT16: {
        uint16_t *d = dst;
        const uint16_t *s = src;
        for (uint64_t i = 0; i < n; i++) d[i] = amp_f32_to_f16(red_f(op, amp_f16_to_f32(d[i]), amp_f16_to_f32(s[i])));
        return true;
    }
    case AMP_DT_BFLOAT16: {
        uint16_t *d = dst;
        const uint16_t *s = src;
        for (uint64_t i = 0; i < n; i++)
            d[i] = amp_f32_to_bf16(red_f(op, amp_bf16_to_f32(d[i]), amp_bf16_to_f32(s[i])));
        return true;
    }
    case AMP_DT_INT64: RED_INT(int64_t)
    case AMP_DT_INT32: RED_INT(int32_t)
    case AMP_DT_INT16: RED_INT(int16_t)
    case AMP_DT_INT8: RED_INT(int8_t)
    case AMP_DT_UINT64: RED_INT(uint64_t)
    case AMP_DT_UINT32: RED_INT(uint32_t)
    case AMP_DT_UINT16: RED_INT(uint16_t)
    case AMP_DT_UINT8: RED_INT(uint8_t)
    default: return false;
    }
}

AmpCode amp_sh_scatter_nd(AmpKernelCtx *k) {
    const AmpBuf *x, *idx;
    size_t es;
    AmpCode rc = data_and_indices(k, &x, &idx, &es);
    if (rc) return rc;
    const AmpBuf *u = k->n_in > 2 ? k->in[2] : NULL;
    if (!u) return amp_kernel_fail(k, AMP_ERR_INPUT, "updates input is required");
    if (u->dtype != x->dtype)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "updates are %s, data %s", amp_dtype_name(u->dtype),
                           amp_dtype_name(x->dtype));
    int op = ((const ScatterAttrs *)k->attrs)->op;
    if (op != RED_NONE && !reduce_into(x->dtype, op, NULL, NULL, 0)) return amp_kernel_bad_dtype(k, x->dtype);
    int r = x->rank, q = idx->rank;
    int64_t m;
    if ((rc = amp_scatter_nd_check(k, x, idx, u, &m))) return rc; /* updates: (indices[:q-1], data[m:]) */
    uint64_t tuples = amp_shape_nelem(q - 1, idx->dims), slice = amp_shape_nelem(r - (int)m, x->dims + m);
    int64_t off = 0;
    uint64_t bad = 0;
    for (uint64_t t = 0; t < tuples; t++)
        if (!tuple_offset(idx, t, m, x->dims, &off, &bad)) return bad_index(k, idx, bad, x->dims[bad % (uint64_t)m]);
    AmpBuf *y;
    if ((rc = amp_sh_out(k, x->dtype, r, x->dims, &y)) || !y) return rc;
    if (y->nelem) memcpy(y->data, x->data, (size_t)y->nelem * es);
    size_t row = (size_t)slice * es;
    char *dst = y->data;
    const char *src = u->data;
    for (uint64_t t = 0; t < tuples && row; t++, src += row) {
        tuple_offset(idx, t, m, x->dims, &off, &bad);
        char *at = dst + (size_t)off * row;
        if (op == RED_NONE) memcpy(at, src, row);
        else reduce_into(x->dtype, op, at, src, slice);
    }
    return AMP_OK;
}
