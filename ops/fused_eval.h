/* The interpreter of the executor's fused elementwise programs (runtime/fuse.c makes them,
 * ai.ampc FusedElementwise runs them): a straight list of elementwise instructions over
 * registers, evaluated per element. Shared by the CPU reference (kernels/cpu/fused.c) and
 * the CUDA kernel (kernels/cuda/fused.cu), so that both apply the same rules: a float instruction
 * computes in float32 and rounds its result to its own dtype (float16 / bfloat16, round to
 * nearest even), exactly as the unfused CPU kernels store and reload each value; integer
 * + - * wrap as the CPU kernels do. Plain C, no libc beyond math.h: AMP_FUSED_FN marks the
 * functions host and device under nvcc. */
#ifndef AMP_OPS_FUSED_EVAL_H
#define AMP_OPS_FUSED_EVAL_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "ir/fused_prog.h"
#include "ir/ops.h" /* AmpOpId: AMP_FOP_UNARY's operand b */
#include "ops/scalar_math.h"

#ifdef __CUDACC__
#define AMP_FUSED_FN static __host__ __device__ inline
#else
#define AMP_FUSED_FN static inline
#endif

/* The value classes a register holds: float32/float16/bfloat16 as a float (already
 * rounded to its dtype), int32/int64 as an int64 (int32 wrapped to 32 bits), bool as 0/1. */
typedef enum AmpFusedClass { AMP_FCLASS_F = 1, AMP_FCLASS_I = 2, AMP_FCLASS_B = 3 } AmpFusedClass;

typedef union AmpFusedReg {
    float f;
    int64_t i;
} AmpFusedReg;

/* The includer defines AMP_FUSED_ROUND_F16(x) and AMP_FUSED_ROUND_BF16(x): float32 ->
 * 16 bits (round to nearest even) -> float32, with ir/half.h on the host and CUDA's
 * __float2half_rn / __float2bfloat16_rn on the device. */
#if !defined(AMP_FUSED_ROUND_F16) || !defined(AMP_FUSED_ROUND_BF16)
#error "define AMP_FUSED_ROUND_F16 and AMP_FUSED_ROUND_BF16 before including fused_eval.h"
#endif

/* AmpDType numbers (ir/ir.h) the programs take; repeated here so the device code needs no
 * ir header (static_assert in ops/fused_check.c keeps them in step). */
enum { AMP_FDT_FLOAT = 1, AMP_FDT_INT32 = 6, AMP_FDT_INT64 = 7, AMP_FDT_BOOL = 9, AMP_FDT_FLOAT16 = 10,
       AMP_FDT_BFLOAT16 = 16 };

AMP_FUSED_FN int amp_fused_class(int dtype) {
    switch (dtype) {
    case AMP_FDT_FLOAT: case AMP_FDT_FLOAT16: case AMP_FDT_BFLOAT16: return AMP_FCLASS_F;
    case AMP_FDT_INT32: case AMP_FDT_INT64: return AMP_FCLASS_I;
    case AMP_FDT_BOOL: return AMP_FCLASS_B;
    default: return 0;
    }
}

/* A float result stored as dtype and read back. */
AMP_FUSED_FN float amp_fused_round(float x, int dtype) {
    return dtype == AMP_FDT_FLOAT16 ? AMP_FUSED_ROUND_F16(x) : dtype == AMP_FDT_BFLOAT16 ? AMP_FUSED_ROUND_BF16(x) : x;
}

/* An integer result stored as dtype and read back (int32 wraps). */
AMP_FUSED_FN int64_t amp_fused_wrap(uint64_t x, int dtype) {
    return dtype == AMP_FDT_INT32 ? (int64_t)(int32_t)(uint32_t)x : (int64_t)x;
}

/* AMP_FOP_UNARY: float unary op `op` (an AmpOpId) on x, the FEXPR of its line in
 * ops/unary.def, for the lines whose FUSE column is 1 (no attributes: p is never read). */
AMP_FUSED_FN float amp_fused_unary(int op, float x) {
    switch (op) {
#define AMP_UNARY(Id, FEXPR, DEXPR, PREPARE, TYPES, LUT, CUDA, FUSE)                                                   \
    AMP_UNARY_FUSE_##FUSE(case AMP_OP_##Id: return FEXPR;)
#include "ops/unary.def"
#undef AMP_UNARY
    default: return x; /* not reached: ops/fused_check.c admits only those lines */
    }
}

/* One instruction on one element. r holds the registers; the operands' classes were
 * checked at prepare (a float op reads floats, a comparison two of one class ...). */
AMP_FUSED_FN AmpFusedReg amp_fused_step(const AmpFusedInstr *in, const AmpFusedReg *r, const uint8_t *cls) {
    AmpFusedReg o;
    o.i = 0;
    const AmpFusedReg x = r[in->a], y = r[in->b];
    int dt = in->dtype;
    bool fl = cls[in->a] == AMP_FCLASS_F; /* the operands' class, for ops of either */
    switch (in->op) {
    case AMP_FOP_ADD: if (fl) o.f = x.f + y.f; else o.i = amp_fused_wrap((uint64_t)x.i + (uint64_t)y.i, dt); break;
    case AMP_FOP_SUB: if (fl) o.f = x.f - y.f; else o.i = amp_fused_wrap((uint64_t)x.i - (uint64_t)y.i, dt); break;
    case AMP_FOP_MUL: if (fl) o.f = x.f * y.f; else o.i = amp_fused_wrap((uint64_t)x.i * (uint64_t)y.i, dt); break;
    case AMP_FOP_DIV: o.f = x.f / y.f; break;
    case AMP_FOP_POW: o.f = powf(x.f, y.f); break;
    /* NaN-propagating, as numpy's maximum / minimum (the CPU kernels) */
    case AMP_FOP_MAX:
        if (fl) o.f = (x.f != x.f || x.f > y.f) ? x.f : y.f;
        else o.i = x.i > y.i ? x.i : y.i;
        break;
    case AMP_FOP_MIN:
        if (fl) o.f = (x.f != x.f || x.f < y.f) ? x.f : y.f;
        else o.i = x.i < y.i ? x.i : y.i;
        break;
    case AMP_FOP_NEG: if (fl) o.f = -x.f; else o.i = amp_fused_wrap(0u - (uint64_t)x.i, dt); break;
    case AMP_FOP_ABS: if (fl) o.f = fabsf(x.f); else o.i = amp_fused_wrap(x.i < 0 ? 0u - (uint64_t)x.i : (uint64_t)x.i, dt); break;
    case AMP_FOP_UNARY: o.f = amp_fused_unary(in->b, x.f); break;
    case AMP_FOP_RELU: if (fl) o.f = amp_relu_f(x.f); else o.i = x.i < 0 ? 0 : x.i; break;
    case AMP_FOP_EQ: o.i = fl ? x.f == y.f : x.i == y.i; break;
    case AMP_FOP_LT: o.i = fl ? x.f < y.f : x.i < y.i; break;
    case AMP_FOP_GT: o.i = fl ? x.f > y.f : x.i > y.i; break;
    case AMP_FOP_LE: o.i = fl ? x.f <= y.f : x.i <= y.i; break;
    case AMP_FOP_GE: o.i = fl ? x.f >= y.f : x.i >= y.i; break;
    case AMP_FOP_NOT: o.i = !x.i; break;
    case AMP_FOP_AND: o.i = x.i && y.i; break;
    case AMP_FOP_OR: o.i = x.i || y.i; break;
    case AMP_FOP_XOR: o.i = !x.i != !y.i; break;
    case AMP_FOP_WHERE: o = x.i ? y : r[in->c]; break;
    case AMP_FOP_CAST: /* float -> float, bool -> float, bool -> int (prepare checks) */
        if (amp_fused_class(dt) == AMP_FCLASS_F) o.f = fl ? x.f : (float)x.i;
        else o.i = x.i;
        break;
    case AMP_FOP_ISNAN: o.i = x.f != x.f; break;
    case AMP_FOP_ISINF: o.i = x.f == INFINITY || x.f == -INFINITY; break;
    case AMP_FOP_IDENT: o = x; break;
    default: break;
    }
    if (amp_fused_class(dt) == AMP_FCLASS_F) o.f = amp_fused_round(o.f, dt);
    return o;
}

#endif
