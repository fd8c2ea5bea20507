/* CPU kernels: comparisons (Equal, Less, Greater, LessOrEqual, GreaterOrEqual) with a
 * bool output, bool logic (Not, And, Or), Where (any fixed-size dtype, three-way
 * broadcast) and the float tests IsInf / IsNaN. Comparisons read 16-bit floats exactly. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/elementwise_impl.h"

typedef enum CmpOp { CMP_EQ, CMP_LT, CMP_GT, CMP_LE, CMP_GE } CmpOp;

static inline bool cmp_f(CmpOp op, double x, double y) {
    switch (op) {
    case CMP_EQ: return x == y;
    case CMP_LT: return x < y;
    case CMP_GT: return x > y;
    case CMP_LE: return x <= y;
    case CMP_GE: return x >= y;
    }
    return false;
}

static inline bool cmp_i(CmpOp op, bool u, int64_t x, int64_t y) {
    if (u) {
        uint64_t ux = (uint64_t)x, uy = (uint64_t)y;
        return op == CMP_EQ ? ux == uy : op == CMP_LT ? ux < uy : op == CMP_GT ? ux > uy : op == CMP_LE ? ux <= uy : ux >= uy;
    }
    return op == CMP_EQ ? x == y : op == CMP_LT ? x < y : op == CMP_GT ? x > y : op == CMP_LE ? x <= y : x >= y;
}

/* One row of a float32 comparison, o[i] = x[i * sx] op y[i * sy] (sx, sy 0 or 1), with
 * the op and the steps chosen outside the loops, so that they are vector code: the
 * general loop (a switch and multiplied steps an element) made a ReLU gradient's Greater
 * 1 ns an element. The comparisons of float32 are those of cmp_f's doubles. */
#define CMP_ROWS(OPER)                                                                     \
    do {                                                                                   \
        if (sx && sy)                                                                      \
            for (int64_t i = 0; i < n; i++) o[i] = x[i] OPER y[i];                         \
        else if (sx)                                                                       \
            for (int64_t i = 0; i < n; i++) o[i] = x[i] OPER y[0];                         \
        else if (sy)                                                                       \
            for (int64_t i = 0; i < n; i++) o[i] = x[0] OPER y[i];                         \
        else                                                                               \
            for (int64_t i = 0; i < n; i++) o[i] = x[0] OPER y[0];                         \
    } while (0)

static void cmp_row_f32(CmpOp op, uint8_t *o, const float *x, int sx, const float *y, int sy, int64_t n) {
    switch (op) {
    case CMP_EQ: CMP_ROWS(==); break;
    case CMP_LT: CMP_ROWS(<); break;
    case CMP_GT: CMP_ROWS(>); break;
    case CMP_LE: CMP_ROWS(<=); break;
    case CMP_GE: CMP_ROWS(>=); break;
    }
}

/* Shape, output (bool unless out_dtype says) and plan for two broadcast inputs; *out
 * NULL (and no plan) when the node does not list the output. */
static AmpCode setup2(AmpKernelCtx *k, const AmpBuf *a, const AmpBuf *b, int out_dtype, AmpBuf **out, AmpEwPlan *p) {
    const AmpBuf *ins[2] = {a, b};
    int rank;
    int64_t dims[AMP_MAX_RANK];
    AmpCode rc = amp_ew_bcast_shape(k, 2, ins, &rank, dims);
    if (rc || (rc = amp_ew_out(k, out_dtype, rank, dims, out)) || !*out) return rc;
    amp_ew_plan(p, rank, dims, 2, ins);
    return AMP_OK;
}

static AmpCode compare(AmpKernelCtx *k, CmpOp op) {
    AmpCode rc = amp_ew_need(k, 2);
    if (rc) return rc;
    const AmpBuf *a = k->in[0];
    AmpBuf bv; /* B, with pre-opset-7 axis alignment applied */
    if ((rc = amp_ew_legacy_bcast(k, a, k->in[1], &bv)) || (rc = amp_ew_same_dtype(k, a, &bv))) return rc;
    const AmpBuf *b = &bv;
    int dt = a->dtype;
    if (!amp_ew_is_float(dt) && !amp_ew_is_int(dt) && dt != AMP_DT_BOOL) return amp_kernel_bad_dtype(k, dt);
    AmpBuf *out;
    AmpEwPlan p;
    AmpEwCursor c;
    if ((rc = setup2(k, a, b, AMP_DT_BOOL, &out, &p)) || !out) return rc;
    if (!out->nelem) return AMP_OK; /* (empty inputs may have no data pointer) */
    uint8_t *o = out->data; /* (out shape) bool */
    if (amp_is_f32_family(dt)) {
        float *ta, *tb;
        const float *x = amp_buf_f32_in(a, &ta), *y = amp_buf_f32_in(b, &tb);
        if (!x || !y) {
            free(ta), free(tb);
            return amp_kernel_fail(k, AMP_ERR_INTERNAL, "out of memory");
        }
        for (amp_ew_start(&p, &c); c.out < p.nelem; amp_ew_next(&p, &c))
            cmp_row_f32(op, o + c.out, x + c.in[0], p.step[0], y + c.in[1], p.step[1], p.n);
        free(ta), free(tb);
    } else if (dt == AMP_DT_DOUBLE) {
        const double *x = a->data, *y = b->data;
        for (amp_ew_start(&p, &c); c.out < p.nelem; amp_ew_next(&p, &c))
            for (int64_t i = 0; i < p.n; i++)
                o[c.out + (uint64_t)i] = cmp_f(op, x[c.in[0] + i * p.step[0]], y[c.in[1] + i * p.step[1]]);
    } else {
        bool u = dt == AMP_DT_UINT64;
        for (amp_ew_start(&p, &c); c.out < p.nelem; amp_ew_next(&p, &c))
            for (int64_t i = 0; i < p.n; i++)
                o[c.out + (uint64_t)i] = cmp_i(op, u, amp_buf_get_i64(a, (uint64_t)(c.in[0] + i * p.step[0])),
                                               amp_buf_get_i64(b, (uint64_t)(c.in[1] + i * p.step[1])));
    }
    return AMP_OK;
}

AmpCode amp_ew_equal(AmpKernelCtx *k) {
    return compare(k, CMP_EQ);
}
AmpCode amp_ew_less(AmpKernelCtx *k) {
    return compare(k, CMP_LT);
}
AmpCode amp_ew_greater(AmpKernelCtx *k) {
    return compare(k, CMP_GT);
}
AmpCode amp_ew_less_equal(AmpKernelCtx *k) {
    return compare(k, CMP_LE);
}
AmpCode amp_ew_greater_equal(AmpKernelCtx *k) {
    return compare(k, CMP_GE);
}

/* ---- bool logic (any non-zero byte is true) ----------------------------------------- */

static AmpCode logic2(AmpKernelCtx *k, bool is_and) {
    AmpCode rc = amp_ew_need(k, 2);
    if (rc) return rc;
    const AmpBuf *a = k->in[0];
    AmpBuf bv;
    if ((rc = amp_ew_legacy_bcast(k, a, k->in[1], &bv)) || (rc = amp_ew_same_dtype(k, a, &bv))) return rc;
    if (a->dtype != AMP_DT_BOOL) return amp_kernel_bad_dtype(k, a->dtype);
    AmpBuf *out;
    AmpEwPlan p;
    AmpEwCursor c;
    if ((rc = setup2(k, a, &bv, AMP_DT_BOOL, &out, &p)) || !out) return rc;
    const uint8_t *x = a->data, *y = bv.data;
    uint8_t *o = out->data;
    for (amp_ew_start(&p, &c); c.out < p.nelem; amp_ew_next(&p, &c))
        for (int64_t i = 0; i < p.n; i++) {
            bool xv = x[c.in[0] + i * p.step[0]] != 0, yv = y[c.in[1] + i * p.step[1]] != 0;
            o[c.out + (uint64_t)i] = is_and ? xv && yv : xv || yv;
        }
    return AMP_OK;
}

AmpCode amp_ew_and(AmpKernelCtx *k) {
    return logic2(k, true);
}
AmpCode amp_ew_or(AmpKernelCtx *k) {
    return logic2(k, false);
}

AmpCode amp_ew_not(AmpKernelCtx *k) {
    AmpCode rc = amp_ew_need(k, 1);
    if (rc) return rc;
    const AmpBuf *x = k->in[0];
    if (x->dtype != AMP_DT_BOOL) return amp_kernel_bad_dtype(k, x->dtype);
    AmpBuf *out;
    if ((rc = amp_ew_out(k, AMP_DT_BOOL, x->rank, x->dims, &out)) || !out) return rc;
    const uint8_t *xs = x->data;
    uint8_t *o = out->data;
    for (uint64_t i = 0; i < x->nelem; i++) o[i] = xs[i] == 0;
    return AMP_OK;
}

/* ---- Where -------------------------------------------------------------------------- */

/* out = cond ? x : y over the walk; T is an integer type of the element's size. */
/* Row by row; each form of a row (every input along it, or X or Y one value) in a loop
 * of its own, choosing by a bit mask so that GCC makes vector code of it: the general
 * one, with its multiplied steps and a branch the data decides, ran at 4-5 ns an element
 * (a ReLU gradient's Where, 7% of an MLP training step). T is unsigned. */
#define WHERE_PICK(T, c, a, b) ((T)(((a) & (T)-(T)((c) != 0)) | ((b) & (T)~(T)-(T)((c) != 0))))
#define WHERE_LOOP(T)                                                                          \
    do {                                                                                       \
        const uint8_t *cs = cond->data;                                                        \
        const T *xs = x->data, *ys = y->data;                                                  \
        T *os = out->data;                                                                     \
        for (amp_ew_start(&p, &c); c.out < p.nelem; amp_ew_next(&p, &c)) {                     \
            const uint8_t *cr = cs + c.in[0];                                                  \
            const T *xr = xs + c.in[1], *yr = ys + c.in[2];                                    \
            T *o = os + c.out;                                                                 \
            int64_t n = p.n;                                                                   \
            if (p.step[0] && p.step[1] && p.step[2]) {                                         \
                for (int64_t i = 0; i < n; i++) o[i] = WHERE_PICK(T, cr[i], xr[i], yr[i]);      \
            } else if (p.step[0] && p.step[1]) {                                               \
                T yv = yr[0];                                                                  \
                for (int64_t i = 0; i < n; i++) o[i] = WHERE_PICK(T, cr[i], xr[i], yv);         \
            } else if (p.step[0] && p.step[2]) {                                               \
                T xv = xr[0];                                                                  \
                for (int64_t i = 0; i < n; i++) o[i] = WHERE_PICK(T, cr[i], xv, yr[i]);         \
            } else {                                                                           \
                for (int64_t i = 0; i < n; i++)                                                \
                    o[i] = cr[i * p.step[0]] ? xr[i * p.step[1]] : yr[i * p.step[2]];          \
            }                                                                                  \
        }                                                                                      \
    } while (0)

/* Where(condition, X, Y): condition bool; X and Y of one dtype, which the output has.
 * The data are only moved, so any dtype of 1, 2, 4 or 8 bytes works. */
AmpCode amp_ew_where(AmpKernelCtx *k) {
    size_t bits;
    int rank;
    int64_t dims[AMP_MAX_RANK];
    AmpBuf *out;
    AmpCode rc = amp_ew_where_out(k, &bits, &rank, dims, &out); /* the checks: ops/ew_common.h */
    if (rc || !out) return rc;
    const AmpBuf *cond = k->in[0], *x = k->in[1], *y = k->in[2];
    AmpEwPlan p;
    AmpEwCursor c;
    amp_ew_plan(&p, rank, dims, 3, k->in);
    switch (bits) {
    case 8: WHERE_LOOP(uint8_t); break;
    case 16: WHERE_LOOP(uint16_t); break;
    case 32: WHERE_LOOP(uint32_t); break;
    default: WHERE_LOOP(uint64_t); break;
    }
    return AMP_OK;
}

/* ---- IsInf, IsNaN ------------------------------------------------------------------- */

/* Output bool of x's shape: test(x[i]) with x read as double (exact for every float).
 * IsInf reads its directions from k->attrs; IsNaN has none. */
static AmpCode float_test(AmpKernelCtx *k, bool is_nan) {
    AmpCode rc = amp_ew_need(k, 1);
    if (rc) return rc;
    const AmpBuf *x = k->in[0];
    if (!amp_ew_is_float(x->dtype)) return amp_kernel_bad_dtype(k, x->dtype);
    const AmpEwParams *a = k->attrs;
    bool pos = !is_nan && (a->mode & AMP_EW_INF_POS), neg = !is_nan && (a->mode & AMP_EW_INF_NEG);
    AmpBuf *out;
    if ((rc = amp_ew_out(k, AMP_DT_BOOL, x->rank, x->dims, &out)) || !out) return rc;
    uint8_t *o = out->data;
    for (uint64_t i = 0; i < x->nelem; i++) {
        double v = amp_ew_get_f64(x, i);
        o[i] = is_nan ? isnan(v) : isinf(v) && (v > 0 ? pos : neg);
    }
    return AMP_OK;
}

AmpCode amp_ew_isinf(AmpKernelCtx *k) {
    return float_test(k, false);
}
AmpCode amp_ew_isnan(AmpKernelCtx *k) {
    return float_test(k, true);
}
