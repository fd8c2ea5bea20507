/* CPU kernels: binary arithmetic (Add, Sub, Mul, Div, Pow, Mod) and the variadic ops (Sum,
 * Mean, Max, Min) with numpy broadcasting. Float
 * storage types compute in fp32 (double in double); integer + - * wrap like C unsigned. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/elementwise_impl.h"

typedef enum ArithOp { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_POW, OP_MAX, OP_MIN } ArithOp;

/* NaN-propagating max / min, as numpy's maximum / minimum (fmaxf would drop the NaN). */
#define NAN_MAX(x, y) ((x) != (x) || (x) > (y) ? (x) : (y))
#define NAN_MIN(x, y) ((x) != (x) || (x) < (y) ? (x) : (y))

AMP_EW_DEF_ROW2(row_add, x + y, x + y)
AMP_EW_DEF_ROW2(row_sub, x - y, x - y)
AMP_EW_DEF_ROW2(row_mul, x * y, x * y)
AMP_EW_DEF_ROW2(row_div, x / y, x / y)
AMP_EW_DEF_ROW2(row_pow, powf(x, y), pow(x, y))
AMP_EW_DEF_ROW2(row_max, NAN_MAX(x, y), NAN_MAX(x, y))
AMP_EW_DEF_ROW2(row_min, NAN_MIN(x, y), NAN_MIN(x, y))

static const struct {
    AmpEwRowF f;
    AmpEwRowD d;
} ROWS[] = {
    [OP_ADD] = {row_add_f, row_add_d}, [OP_SUB] = {row_sub_f, row_sub_d}, [OP_MUL] = {row_mul_f, row_mul_d},
    [OP_DIV] = {row_div_f, row_div_d}, [OP_POW] = {row_pow_f, row_pow_d}, [OP_MAX] = {row_max_f, row_max_d},
    [OP_MIN] = {row_min_f, row_min_d},
};

/* The AVX-512 16-bit rows of the same ops (kernels/cpu/simd.h). */
static const AmpSimdOp SIMD[] = {[OP_ADD] = AMP_SIMD_ADD, [OP_SUB] = AMP_SIMD_SUB, [OP_MUL] = AMP_SIMD_MUL,
                                 [OP_DIV] = AMP_SIMD_DIV, [OP_POW] = AMP_SIMD_NONE, [OP_MAX] = AMP_SIMD_NONE,
                                 [OP_MIN] = AMP_SIMD_NONE};

/* ---- integers ---------------------------------------------------------------------- */

static uint64_t upow(uint64_t b, uint64_t e) {
    uint64_t r = 1;
    for (; e; e >>= 1, b *= b)
        if (e & 1) r *= b;
    return r;
}

/* x op y in an integer dtype's arithmetic: signed types in int64, uint64 (u) unsigned.
 * + - * and powers wrap (computed in uint64, which C defines); the store truncates to
 * the dtype, so narrower types wrap too. Div truncates toward zero, like C and ONNX
 * Runtime. False for a division by zero (or 0 to a negative power). */
static bool int_op(ArithOp op, bool u, int64_t x, int64_t y, int64_t *r) {
    uint64_t ux = (uint64_t)x, uy = (uint64_t)y;
    switch (op) {
    case OP_ADD: *r = (int64_t)(ux + uy); return true;
    case OP_SUB: *r = (int64_t)(ux - uy); return true;
    case OP_MUL: *r = (int64_t)(ux * uy); return true;
    case OP_DIV:
        if (y == 0) return false;
        if (u) *r = (int64_t)(ux / uy);
        else if (y == -1) *r = (int64_t)(0 - ux); /* INT64_MIN / -1 wraps instead of trapping */
        else *r = x / y;
        return true;
    case OP_POW:
        if (u || y >= 0) {
            *r = (int64_t)upow(ux, uy);
            return true;
        }
        if (x == 0) return false;
        *r = x == 1 ? 1 : x == -1 ? ((uy & 1) ? -1 : 1) : 0; /* 1 / x^|y|, truncated */
        return true;
    case OP_MAX: *r = (u ? ux > uy : x > y) ? x : y; return true;
    case OP_MIN: *r = (u ? ux < uy : x < y) ? x : y; return true;
    }
    return false;
}

/* Typed rows for the common int32 / int64 + - * max min (wrapping through the unsigned
 * type of the same width); false for the ops and dtypes left to the generic loop. */
#define INT_ROWS(T, U)                                                                         \
    switch (op) {                                                                              \
    case OP_ADD: AMP_EW_ROW2(T, (T)((U)x + (U)y)); return true;                                \
    case OP_SUB: AMP_EW_ROW2(T, (T)((U)x - (U)y)); return true;                                \
    case OP_MUL: AMP_EW_ROW2(T, (T)((U)x * (U)y)); return true;                                \
    case OP_MAX: AMP_EW_ROW2(T, x > y ? x : y); return true;                                   \
    case OP_MIN: AMP_EW_ROW2(T, x < y ? x : y); return true;                                   \
    default: return false;                                                                     \
    }
static bool row_i64(ArithOp op, int64_t *o, const int64_t *a, int sa, const int64_t *b, int sb, int64_t n) {
    INT_ROWS(int64_t, uint64_t)
}
static bool row_i32(ArithOp op, int32_t *o, const int32_t *a, int sa, const int32_t *b, int sb, int64_t n) {
    INT_ROWS(int32_t, uint32_t)
}

/* out = a op b over the plan (input 0 = a, input 1 = b), all integer dtypes. */
static AmpCode int_binary(AmpKernelCtx *k, ArithOp op, const AmpBuf *a, const AmpBuf *b, AmpBuf *out,
                          const AmpEwPlan *p) {
    bool u = out->dtype == AMP_DT_UINT64;
    AmpEwCursor c;
    if (a->dtype == b->dtype && (a->dtype == AMP_DT_INT64 || a->dtype == AMP_DT_INT32) && op != OP_DIV &&
        op != OP_POW) {
        bool i64 = a->dtype == AMP_DT_INT64;
        for (amp_ew_start(p, &c); c.out < p->nelem; amp_ew_next(p, &c)) {
            if (i64)
                row_i64(op, (int64_t *)out->data + c.out, (const int64_t *)a->data + c.in[0], p->step[0],
                        (const int64_t *)b->data + c.in[1], p->step[1], p->n);
            else
                row_i32(op, (int32_t *)out->data + c.out, (const int32_t *)a->data + c.in[0], p->step[0],
                        (const int32_t *)b->data + c.in[1], p->step[1], p->n);
        }
        return AMP_OK;
    }
    for (amp_ew_start(p, &c); c.out < p->nelem; amp_ew_next(p, &c))
        for (int64_t i = 0; i < p->n; i++) {
            int64_t r;
            if (!int_op(op, u, amp_buf_get_i64(a, (uint64_t)(c.in[0] + i * p->step[0])),
                        amp_buf_get_i64(b, (uint64_t)(c.in[1] + i * p->step[1])), &r))
                return amp_kernel_fail(k, AMP_ERR_INPUT, "integer division by zero");
            amp_buf_set_i64(out, c.out + (uint64_t)i, r);
        }
    return AMP_OK;
}

/* Output 0 of a broadcasting binary op in a's dtype, placed and checked, and the loop plan
 * over it: *out NULL (with AMP_OK) when the node does not list the output. */
static AmpCode binary_out(AmpKernelCtx *k, const AmpBuf *a, const AmpBuf *b, AmpBuf **out, AmpEwPlan *p) {
    const AmpBuf *ins[2] = {a, b};
    int rank;
    int64_t dims[AMP_MAX_RANK];
    AmpCode rc = amp_ew_bcast_shape(k, 2, ins, &rank, dims);
    if (rc || (rc = amp_ew_out(k, a->dtype, rank, dims, out)) || !*out) return rc;
    amp_ew_plan(p, rank, dims, 2, ins);
    return AMP_OK;
}

/* Pow whose exponent type differs from the base type (opset 12+: float base with an
 * integer exponent, integer base with a float exponent, ...). The output has the base
 * type; integer ** integer is exact, anything else goes through double. */
static AmpCode pow_mixed(AmpKernelCtx *k, const AmpBuf *a, const AmpBuf *b) {
    if (!amp_ew_is_float(a->dtype) && !amp_ew_is_int(a->dtype)) return amp_kernel_bad_dtype(k, a->dtype);
    if (!amp_ew_is_float(b->dtype) && !amp_ew_is_int(b->dtype)) return amp_kernel_bad_dtype(k, b->dtype);
    AmpBuf *out;
    AmpEwPlan p;
    AmpCode rc = binary_out(k, a, b, &out, &p);
    if (rc || !out) return rc;
    if (amp_ew_is_int(a->dtype) && amp_ew_is_int(b->dtype)) return int_binary(k, OP_POW, a, b, out, &p);
    AmpEwCursor c;
    for (amp_ew_start(&p, &c); c.out < p.nelem; amp_ew_next(&p, &c))
        for (int64_t i = 0; i < p.n; i++) {
            double x = amp_ew_get_f64(a, (uint64_t)(c.in[0] + i * p.step[0]));
            double y = amp_ew_get_f64(b, (uint64_t)(c.in[1] + i * p.step[1]));
            amp_ew_set_f64(out, c.out + (uint64_t)i, pow(x, y));
        }
    return AMP_OK;
}

static AmpCode arith(AmpKernelCtx *k, ArithOp op) {
    AmpCode rc = amp_ew_need(k, 2);
    if (rc) return rc;
    const AmpBuf *a = k->in[0];
    AmpBuf bv; /* B, with pre-opset-7 axis alignment applied */
    if ((rc = amp_ew_legacy_bcast(k, a, k->in[1], &bv))) return rc;
    const AmpBuf *b = &bv;
    if (op == OP_POW && a->dtype != b->dtype) return pow_mixed(k, a, b);
    if (amp_ew_is_float(a->dtype)) return amp_ew_binary_float_op(k, a, b, ROWS[op].f, ROWS[op].d, NULL, SIMD[op]);
    if ((rc = amp_ew_same_dtype(k, a, b))) return rc;
    if (!amp_ew_is_int(a->dtype)) return amp_kernel_bad_dtype(k, a->dtype);
    AmpBuf *out;
    AmpEwPlan p;
    if ((rc = binary_out(k, a, b, &out, &p)) || !out) return rc;
    return int_binary(k, op, a, b, out, &p);
}

AmpCode amp_ew_add(AmpKernelCtx *k) {
    return arith(k, OP_ADD);
}
AmpCode amp_ew_sub(AmpKernelCtx *k) {
    return arith(k, OP_SUB);
}
AmpCode amp_ew_mul(AmpKernelCtx *k) {
    return arith(k, OP_MUL);
}
AmpCode amp_ew_div(AmpKernelCtx *k) {
    return arith(k, OP_DIV);
}
AmpCode amp_ew_pow(AmpKernelCtx *k) {
    return arith(k, OP_POW);
}

/* ---- Mod -------------------------------------------------------------------------- */

AMP_EW_DEF_ROW2(row_fmod, fmodf(x, y), fmod(x, y))

/* x mod y for integers: fmod's sign is the dividend's (C's %), else the divisor's
 * (Python's %); false for y == 0. INT64_MIN % -1 is 0 (C would trap). */
static bool int_mod(bool fmod_sign, bool u, int64_t x, int64_t y, int64_t *r) {
    if (y == 0) return false;
    if (u) {
        *r = (int64_t)((uint64_t)x % (uint64_t)y);
        return true;
    }
    int64_t m = y == -1 ? 0 : x % y;
    if (!fmod_sign && m != 0 && (m < 0) != (y < 0)) m += y;
    *r = m;
    return true;
}

AmpCode amp_ew_prepare_mod(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    (void)opset;
    int64_t f = amp_node_attr_int(n, "fmod", 0);
    if (f != 0 && f != 1)
        return amp_fail(st, AMP_ERR_INPUT, "node '%s' (Mod): fmod is %lld; it is 0 or 1", n->name ? n->name : "",
                        (long long)f);
    int *a = malloc(sizeof *a);
    if (!a) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    *a = (int)f;
    *attrs = a;
    return AMP_OK;
}

/* Mod (opset 10+): floats need fmod = 1 (C's fmod); integers take either sign rule. */
AmpCode amp_ew_mod(AmpKernelCtx *k) {
    AmpCode rc = amp_ew_need(k, 2);
    if (rc) return rc;
    const AmpBuf *a = k->in[0], *b = k->in[1];
    bool fmod_sign = k->attrs && *(const int *)k->attrs;
    if ((rc = amp_ew_same_dtype(k, a, b))) return rc;
    if (amp_ew_is_float(a->dtype)) {
        if (!fmod_sign) return amp_kernel_fail(k, AMP_ERR_INPUT, "Mod of floats takes fmod = 1 (C's fmod)");
        return amp_ew_binary_float(k, a, b, row_fmod_f, row_fmod_d, NULL);
    }
    if (!amp_ew_is_int(a->dtype)) return amp_kernel_bad_dtype(k, a->dtype);
    AmpBuf *out;
    AmpEwPlan p;
    if ((rc = binary_out(k, a, b, &out, &p)) || !out) return rc;
    bool u = a->dtype == AMP_DT_UINT64;
    AmpEwCursor c;
    for (amp_ew_start(&p, &c); c.out < p.nelem; amp_ew_next(&p, &c))
        for (int64_t i = 0; i < p.n; i++) {
            int64_t r;
            if (!int_mod(fmod_sign, u, amp_buf_get_i64(a, (uint64_t)(c.in[0] + i * p.step[0])),
                         amp_buf_get_i64(b, (uint64_t)(c.in[1] + i * p.step[1])), &r))
                return amp_kernel_fail(k, AMP_ERR_INPUT, "integer modulo by zero");
            amp_buf_set_i64(out, c.out + (uint64_t)i, r);
        }
    return AMP_OK;
}

/* ---- variadic: Sum, Mean, Max, Min ------------------------------------------------ */

/* out = in[0] op in[1] op ... with every input broadcast to the common shape. Floats
 * accumulate in an fp32 (or double) output view, rounded to 16 bits once at the end. */
static AmpCode variadic(AmpKernelCtx *k, ArithOp op, bool mean) {
    int n = k->n_in;
    AmpCode rc = amp_ew_variadic_inputs(k);
    if (rc) return rc;
    const AmpBuf *const *ins = k->in;
    int dt = ins[0]->dtype;
    if (!amp_ew_is_float(dt) && !(op != OP_ADD && amp_ew_is_int(dt))) return amp_kernel_bad_dtype(k, dt);
    int rank;
    int64_t dims[AMP_MAX_RANK];
    AmpBuf *out;
    if ((rc = amp_ew_bcast_out(k, n, dt, &rank, dims, &out)) || !out) return rc;
    if (!out->nelem) return AMP_OK; /* (empty inputs may have no data pointer) */

    AmpEwPlan p;
    AmpEwCursor c;
    if (amp_ew_is_int(dt)) {
        bool u = dt == AMP_DT_UINT64;
        for (int j = 0; j < n; j++) {
            amp_ew_plan(&p, rank, dims, 1, &ins[j]);
            for (amp_ew_start(&p, &c); c.out < p.nelem; amp_ew_next(&p, &c))
                for (int64_t i = 0; i < p.n; i++) {
                    int64_t x = amp_buf_get_i64(ins[j], (uint64_t)(c.in[0] + i * p.step[0])), r = x;
                    if (j) int_op(op, u, amp_buf_get_i64(out, c.out + (uint64_t)i), x, &r); /* max/min only */
                    amp_buf_set_i64(out, c.out + (uint64_t)i, r);
                }
        }
        return AMP_OK;
    }
    if (dt == AMP_DT_DOUBLE) {
        double *o = out->data;
        for (int j = 0; j < n; j++) {
            const double *x = ins[j]->data;
            amp_ew_plan(&p, rank, dims, 1, &ins[j]);
            for (amp_ew_start(&p, &c); c.out < p.nelem; amp_ew_next(&p, &c)) {
                if (j) ROWS[op].d(o + c.out, o + c.out, 1, x + c.in[0], p.step[0], p.n, NULL);
                else
                    for (int64_t i = 0; i < p.n; i++) o[c.out + (uint64_t)i] = x[c.in[0] + i * p.step[0]];
            }
        }
        if (mean)
            for (uint64_t i = 0; i < out->nelem; i++) o[i] /= n;
        return AMP_OK;
    }
    float *to;
    float *o = amp_buf_f32_out(out, &to);
    if (!o) return amp_kernel_fail(k, AMP_ERR_INTERNAL, "out of memory");
    for (int j = 0; j < n; j++) {
        float *tx;
        const float *x = amp_buf_f32_in(ins[j], &tx);
        if (!x) {
            free(to);
            return amp_kernel_fail(k, AMP_ERR_INTERNAL, "out of memory");
        }
        amp_ew_plan(&p, rank, dims, 1, &ins[j]);
        for (amp_ew_start(&p, &c); c.out < p.nelem; amp_ew_next(&p, &c)) {
            if (j) ROWS[op].f(o + c.out, o + c.out, 1, x + c.in[0], p.step[0], p.n, NULL);
            else
                for (int64_t i = 0; i < p.n; i++) o[c.out + (uint64_t)i] = x[c.in[0] + i * p.step[0]];
        }
        free(tx);
    }
    if (mean)
        for (uint64_t i = 0; i < out->nelem; i++) o[i] /= (float)n;
    amp_buf_f32_commit(out, to);
    return AMP_OK;
}

AmpCode amp_ew_sum(AmpKernelCtx *k) {
    return variadic(k, OP_ADD, false);
}
AmpCode amp_ew_mean(AmpKernelCtx *k) {
    return variadic(k, OP_ADD, true);
}
AmpCode amp_ew_max(AmpKernelCtx *k) {
    return variadic(k, OP_MAX, false);
}
AmpCode amp_ew_min(AmpKernelCtx *k) {
    return variadic(k, OP_MIN, false);
}
