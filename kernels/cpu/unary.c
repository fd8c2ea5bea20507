/* CPU kernels: the float unary ops of ops/unary.def (math, activations), one generic
 * kernel over the list, and Clip. Float storage types compute in fp32, double in double;
 * the ops of integer form (Neg, Abs, Sign, Relu) and Clip also take the integer types. */
#include <math.h>
#include <stdlib.h>

#include "kernels/cpu/elementwise_impl.h"
#include "ops/scalar_math.h"
#include "ops/vmath.h"

/* map_<Id>_f / map_<Id>_d (AmpEwMapF / AmpEwMapD) of every line of the list. */
#define AMP_UNARY(Id, FEXPR, DEXPR, PREPARE, TYPES, LUT, CUDA, FUSE) AMP_EW_DEF_MAP(map_##Id, FEXPR, DEXPR)
#include "ops/unary.def"
#undef AMP_UNARY

/* The list by op id: its maps, whether it reads attributes, whether 16-bit inputs take
 * the lookup table, whether integers take the integer form. */
typedef struct UnaryOp {
    AmpEwMapF f;
    AmpEwMapD d;
    AmpKernelPrepareFn prepare;
    bool lut, ints;
} UnaryOp;

static const UnaryOp unary_ops[AMP_OP__COUNT] = {
#define AMP_UNARY(Id, FEXPR, DEXPR, PREPARE, TYPES, LUT, CUDA, FUSE)                                                   \
    [AMP_OP_##Id] = {map_##Id##_f, map_##Id##_d, PREPARE, LUT, AMP_UNARY_INT_##TYPES},
#include "ops/unary.def"
#undef AMP_UNARY
};

/* ---- integer forms (TYPES FI) ---------------------------------------------------------- */

/* Values of signed types in int64 (negation wraps through uint64, so -INT_MIN stays
 * INT_MIN after the store truncates), unsigned types as non-negative (u for uint64). */
static int64_t int_unary_op(AmpOpId op, bool u, int64_t x) {
    uint64_t neg = 0 - (uint64_t)x;
    switch (op) {
    case AMP_OP_Neg: return (int64_t)neg;
    case AMP_OP_Abs: return !u && x < 0 ? (int64_t)neg : x;
    case AMP_OP_Sign: return u ? x != 0 : (x > 0) - (x < 0);
    case AMP_OP_Relu: return !u && x < 0 ? 0 : x; /* opset 14; unsigned values are their own Relu */
    default: return x;
    }
}

static AmpCode int_unary(AmpKernelCtx *k, AmpOpId op, const AmpBuf *x) {
    if (op != AMP_OP_Neg && op != AMP_OP_Abs && op != AMP_OP_Sign && op != AMP_OP_Relu)
        return amp_kernel_fail(k, AMP_ERR_INTERNAL, "ops/unary.def lists an integer form the CPU kernel lacks");
    if (op == AMP_OP_Neg && amp_ew_is_unsigned(x->dtype)) return amp_kernel_bad_dtype(k, x->dtype);
    AmpBuf *out;
    AmpCode rc = amp_ew_out(k, x->dtype, x->rank, x->dims, &out);
    if (rc || !out) return rc;
    bool u = x->dtype == AMP_DT_UINT64;
    for (uint64_t i = 0; i < x->nelem; i++) amp_buf_set_i64(out, i, int_unary_op(op, u, amp_buf_get_i64(x, i)));
    return AMP_OK;
}

/* ---- the kernel of every op of the list ------------------------------------------------- */

/* Output 0 = the op's map of input 0: float32 Erf by libmvec's vector erff where there is
 * one (within 4 ulp, vmath.h: 30 times the scalar erff's speed; BERT's GELU runs one per
 * hidden activation, the same erf as the map's); integers by the integer form; the rest
 * through the map (the table for LUT ops' 16-bit inputs). */
AmpCode amp_ew_unary(AmpKernelCtx *k) {
    AmpOpId op = k->node->op;
    const UnaryOp *u = (unsigned)op < AMP_OP__COUNT ? &unary_ops[op] : NULL;
    if (!u || !u->f) return amp_kernel_fail(k, AMP_ERR_INTERNAL, "the op is not in ops/unary.def");
    AmpCode rc = amp_ew_need(k, 1);
    if (rc) return rc;
    const AmpBuf *x = k->in[0];
    if (u->ints && amp_ew_is_int(x->dtype)) return int_unary(k, op, x);
    if (op == AMP_OP_Erf && x->dtype == AMP_DT_FLOAT && x->nelem) {
        AmpBuf *out;
        if ((rc = amp_ew_out(k, x->dtype, x->rank, x->dims, &out)) || !out) return rc;
        if (!amp_vmath_erf_f32(out->data, x->data, x->nelem)) u->f(out->data, x->data, x->nelem, NULL);
        return AMP_OK;
    }
    const AmpEwParams *p = u->prepare ? k->attrs : NULL;
    return u->lut ? amp_ew_unary_float_lut(k, u->f, u->d, p) : amp_ew_unary_float(k, u->f, u->d, p);
}

/* ---- Clip ------------------------------------------------------------------------------ */

/* y = min(max(x, lo), hi): lo > hi gives hi everywhere (the spec's rule), NaN stays NaN. */
static void map_clip_f(float *y, const float *xs, uint64_t n, const AmpEwParams *p) {
    const float lo = p->alpha, hi = p->beta;
    for (uint64_t i = 0; i < n; i++) {
        float v = xs[i] < lo ? lo : xs[i];
        y[i] = v > hi ? hi : v;
    }
}

AmpCode amp_ew_clip(AmpKernelCtx *k) {
    AmpCode rc = amp_ew_need(k, 1);
    if (rc) return rc;
    const AmpClipAttrs *a = k->attrs; /* amp_ew_prepare_clip (ops/ew_common.h) */
    const AmpBuf *x = k->in[0], *bmin = NULL, *bmax = NULL;
    if (!amp_ew_is_float(x->dtype) && !amp_ew_is_int(x->dtype)) return amp_kernel_bad_dtype(k, x->dtype);
    if (k->opset >= 11 && ((rc = amp_ew_clip_bound(k, 1, x, &bmin)) || (rc = amp_ew_clip_bound(k, 2, x, &bmax))))
        return rc;

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
