/* CPU kernels: unary math (Sqrt, Exp, Log, Neg, Abs, Reciprocal, Sign, Ceil, Floor,
 * Round, Erf, the trigonometric and hyperbolic functions and their inverses) and Clip. Float storage types compute in fp32, double in double; Neg, Abs,
 * Sign and Clip also take the integer types. */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "kernels/cpu/elementwise_impl.h"
#include "ops/scalar_math.h"
#include "ops/vmath.h"

AMP_EW_DEF_MAP(map_sqrt, sqrtf(x), sqrt(x))
AMP_EW_DEF_MAP(map_exp, expf(x), exp(x))
AMP_EW_DEF_MAP(map_log, logf(x), log(x))
AMP_EW_DEF_MAP(map_neg, -x, -x)
AMP_EW_DEF_MAP(map_abs, fabsf(x), fabs(x))
AMP_EW_DEF_MAP(map_reciprocal, 1.0f / x, 1.0 / x)
AMP_EW_DEF_MAP(map_sign, amp_sign_f(x), amp_sign_d(x)) /* ops/scalar_math.h */
AMP_EW_DEF_MAP(map_ceil, ceilf(x), ceil(x))
AMP_EW_DEF_MAP(map_floor, floorf(x), floor(x))
/* ONNX Round: halves to even, which is the default rounding mode */
AMP_EW_DEF_MAP(map_round, nearbyintf(x), nearbyint(x))
AMP_EW_DEF_MAP(map_erf, amp_vmath_erf1(x), erf(x))
AMP_EW_DEF_MAP(map_sin, sinf(x), sin(x))
AMP_EW_DEF_MAP(map_cos, cosf(x), cos(x))
AMP_EW_DEF_MAP(map_tan, tanf(x), tan(x))
AMP_EW_DEF_MAP(map_asin, asinf(x), asin(x))
AMP_EW_DEF_MAP(map_acos, acosf(x), acos(x))
AMP_EW_DEF_MAP(map_atan, atanf(x), atan(x))
AMP_EW_DEF_MAP(map_sinh, sinhf(x), sinh(x))
AMP_EW_DEF_MAP(map_cosh, coshf(x), cosh(x))
AMP_EW_DEF_MAP(map_asinh, asinhf(x), asinh(x))
AMP_EW_DEF_MAP(map_acosh, acoshf(x), acosh(x))
AMP_EW_DEF_MAP(map_atanh, atanhf(x), atanh(x))

/* ---- integer Neg, Abs, Sign ----------------------------------------------------------- */

typedef enum IntUnary { INT_NEG, INT_ABS, INT_SIGN } IntUnary;

/* Values of signed types in int64 (negation wraps through uint64, so -INT_MIN stays
 * INT_MIN after the store truncates), unsigned types as non-negative (u for uint64). */
static int64_t int_unary_op(IntUnary op, bool u, int64_t x) {
    uint64_t neg = 0 - (uint64_t)x;
    switch (op) {
    case INT_NEG: return (int64_t)neg;
    case INT_ABS: return !u && x < 0 ? (int64_t)neg : x;
    case INT_SIGN: return u ? x != 0 : (x > 0) - (x < 0);
    }
    return x;
}

static AmpCode int_or_float(AmpKernelCtx *k, IntUnary op, AmpEwMapF f, AmpEwMapD d) {
    AmpCode rc = amp_ew_need(k, 1);
    if (rc) return rc;
    const AmpBuf *x = k->in[0];
    if (!amp_ew_is_int(x->dtype)) return amp_ew_unary_float(k, f, d, NULL);
    if (op == INT_NEG && amp_ew_is_unsigned(x->dtype)) return amp_kernel_bad_dtype(k, x->dtype);
    AmpBuf *out;
    if ((rc = amp_ew_out(k, x->dtype, x->rank, x->dims, &out)) || !out) return rc;
    bool u = x->dtype == AMP_DT_UINT64;
    for (uint64_t i = 0; i < x->nelem; i++) amp_buf_set_i64(out, i, int_unary_op(op, u, amp_buf_get_i64(x, i)));
    return AMP_OK;
}

AmpCode amp_ew_sqrt(AmpKernelCtx *k) {
    return amp_ew_unary_float(k, map_sqrt_f, map_sqrt_d, NULL);
}
AmpCode amp_ew_exp(AmpKernelCtx *k) {
    return amp_ew_unary_float_lut(k, map_exp_f, map_exp_d, NULL);
}
AmpCode amp_ew_log(AmpKernelCtx *k) {
    return amp_ew_unary_float_lut(k, map_log_f, map_log_d, NULL);
}
AmpCode amp_ew_neg(AmpKernelCtx *k) {
    return int_or_float(k, INT_NEG, map_neg_f, map_neg_d);
}
AmpCode amp_ew_abs(AmpKernelCtx *k) {
    return int_or_float(k, INT_ABS, map_abs_f, map_abs_d);
}
AmpCode amp_ew_reciprocal(AmpKernelCtx *k) {
    return amp_ew_unary_float(k, map_reciprocal_f, map_reciprocal_d, NULL);
}
AmpCode amp_ew_sign(AmpKernelCtx *k) {
    return int_or_float(k, INT_SIGN, map_sign_f, map_sign_d);
}
AmpCode amp_ew_ceil(AmpKernelCtx *k) {
    return amp_ew_unary_float(k, map_ceil_f, map_ceil_d, NULL);
}
AmpCode amp_ew_floor(AmpKernelCtx *k) {
    return amp_ew_unary_float(k, map_floor_f, map_floor_d, NULL);
}
AmpCode amp_ew_round(AmpKernelCtx *k) {
    return amp_ew_unary_float(k, map_round_f, map_round_d, NULL);
}
/* float32 by libmvec's vector erff where there is one (within 4 ulp, vmath.h: 30 times
 * the scalar erff's speed; BERT's GELU runs one per hidden activation), else erff. */
AmpCode amp_ew_erf(AmpKernelCtx *k) {
    const AmpBuf *x = k->n_in > 0 ? k->in[0] : NULL;
    if (x && x->dtype == AMP_DT_FLOAT && x->nelem) {
        AmpBuf *out;
        AmpCode rc = amp_ew_out(k, x->dtype, x->rank, x->dims, &out);
        if (rc || !out) return rc;
        if (!amp_vmath_erf_f32(out->data, x->data, x->nelem)) map_erf_f(out->data, x->data, x->nelem, NULL);
        return AMP_OK;
    }
    return amp_ew_unary_float_lut(k, map_erf_f, map_erf_d, NULL);
}
AmpCode amp_ew_sin(AmpKernelCtx *k) {
    return amp_ew_unary_float_lut(k, map_sin_f, map_sin_d, NULL);
}
AmpCode amp_ew_cos(AmpKernelCtx *k) {
    return amp_ew_unary_float_lut(k, map_cos_f, map_cos_d, NULL);
}
AmpCode amp_ew_tan(AmpKernelCtx *k) {
    return amp_ew_unary_float_lut(k, map_tan_f, map_tan_d, NULL);
}
AmpCode amp_ew_asin(AmpKernelCtx *k) {
    return amp_ew_unary_float_lut(k, map_asin_f, map_asin_d, NULL);
}
AmpCode amp_ew_acos(AmpKernelCtx *k) {
    return amp_ew_unary_float_lut(k, map_acos_f, map_acos_d, NULL);
}
AmpCode amp_ew_atan(AmpKernelCtx *k) {
    return amp_ew_unary_float_lut(k, map_atan_f, map_atan_d, NULL);
}
AmpCode amp_ew_sinh(AmpKernelCtx *k) {
    return amp_ew_unary_float_lut(k, map_sinh_f, map_sinh_d, NULL);
}
AmpCode amp_ew_cosh(AmpKernelCtx *k) {
    return amp_ew_unary_float_lut(k, map_cosh_f, map_cosh_d, NULL);
}
AmpCode amp_ew_asinh(AmpKernelCtx *k) {
    return amp_ew_unary_float_lut(k, map_asinh_f, map_asinh_d, NULL);
}
AmpCode amp_ew_acosh(AmpKernelCtx *k) {
    return amp_ew_unary_float_lut(k, map_acosh_f, map_acosh_d, NULL);
}
AmpCode amp_ew_atanh(AmpKernelCtx *k) {
    return amp_ew_unary_float_lut(k, map_atanh_f, map_atanh_d, NULL);
}

/* ---- Clip ------------------------------------------------------------------------------ */

/* The float bounds before any bound input is read: the min and max attributes before
 * opset 11 (float's limits when absent), unbounded after (the bounds are inputs then). */
typedef struct ClipAttrs {
    double lo, hi;
} ClipAttrs;

AmpCode amp_ew_prepare_clip(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    ClipAttrs *a = malloc(sizeof *a);
    if (!a) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    a->lo = opset < 11 ? amp_node_attr_float(n, "min", -FLT_MAX) : -INFINITY;
    a->hi = opset < 11 ? amp_node_attr_float(n, "max", FLT_MAX) : INFINITY;
    *attrs = a;
    return AMP_OK;
}

/* y = min(max(x, lo), hi): lo > hi gives hi everywhere (the spec's rule), NaN stays NaN. */
static void map_clip_f(float *y, const float *xs, uint64_t n, const AmpEwParams *p) {
    const float lo = p->alpha, hi = p->beta;
    for (uint64_t i = 0; i < n; i++) {
        float v = xs[i] < lo ? lo : xs[i];
        y[i] = v > hi ? hi : v;
    }
}

/* Bound input i (opset 11+): absent, or a one-element tensor of x's type. */
static AmpCode clip_bound(AmpKernelCtx *k, int i, const AmpBuf *x, const AmpBuf **out) {
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

AmpCode amp_ew_clip(AmpKernelCtx *k) {
    AmpCode rc = amp_ew_need(k, 1);
    if (rc) return rc;
    const ClipAttrs *a = k->attrs;
    const AmpBuf *x = k->in[0], *bmin = NULL, *bmax = NULL;
    if (!amp_ew_is_float(x->dtype) && !amp_ew_is_int(x->dtype)) return amp_kernel_bad_dtype(k, x->dtype);
    if (k->opset >= 11 && ((rc = clip_bound(k, 1, x, &bmin)) || (rc = clip_bound(k, 2, x, &bmax)))) return rc;

    if (amp_ew_is_int(x->dtype)) {
        bool u = x->dtype == AMP_DT_UINT64;
        int64_t lo = u ? 0 : INT64_MIN, hi = u ? -1 /* UINT64_MAX */ : INT64_MAX;
        if (bmin) lo = amp_buf_get_i64(bmin, 0);
        if (bmax) hi = amp_buf_get_i64(bmax, 0);
        AmpBuf *out;
        if ((rc = amp_ew_out(k, x->dtype, x->rank, x->dims, &out)) || !out) return rc;
        for (uint64_t i = 0; i < x->nelem; i++) {
            int64_t v = amp_buf_get_i64(x, i);
            if (u) {
                if ((uint64_t)v < (uint64_t)lo) v = lo;
                if ((uint64_t)v > (uint64_t)hi) v = hi;
            } else {
                if (v < lo) v = lo;
                if (v > hi) v = hi;
            }
            amp_buf_set_i64(out, i, v);
        }
        return AMP_OK;
    }
    double lo = a->lo, hi = a->hi;
    if (bmin) lo = amp_ew_get_f64(bmin, 0);
    if (bmax) hi = amp_ew_get_f64(bmax, 0);
    if (x->dtype == AMP_DT_DOUBLE) {
        AmpBuf *out;
        if ((rc = amp_ew_out(k, x->dtype, x->rank, x->dims, &out)) || !out) return rc;
        const double *xs = x->data;
        double *y = out->data;
        for (uint64_t i = 0; i < x->nelem; i++) {
            double v = xs[i] < lo ? lo : xs[i];
            y[i] = v > hi ? hi : v;
        }
        return AMP_OK;
    }
    AmpEwParams p = {.alpha = (float)lo, .beta = (float)hi};
    return amp_ew_unary_float(k, map_clip_f, NULL, &p);
}
