/* Shared pieces of the CPU elementwise kernel family (elementwise.c, unary.c,
 * activation.c, logic.c, dropout.c): the broadcast plan that walks up to three inputs
 * against one output shape row by row and typed element access (the kernels are declared
 * in kernels.h, with every family's). What the CUDA kernels share is ops/ew_common.h. */
#ifndef AMP_CPU_ELEMENTWISE_IMPL_H
#define AMP_CPU_ELEMENTWISE_IMPL_H

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/simd.h"
#include "ops/ew_common.h" /* the checks, broadcast shapes and attributes every backend shares */

#define AMP_EW_MAX_IN 3

/* A broadcast walk over an output shape: its axes merged as every backend merges them
 * (amp_ew_merge_axes, ops/ew_common.h), so same-shape inputs become one row and
 * [3,4,5] + [5] becomes 12 rows of 5. The innermost axis is the row; an input's step
 * along it is 0 or 1. */
typedef struct AmpEwPlan {
    int rank; /* >= 1 after merging (a scalar output is one row of 1) */
    int64_t dims[AMP_MAX_RANK];
    int n_in;
    int64_t strides[AMP_EW_MAX_IN][AMP_MAX_RANK]; /* element strides, 0 on broadcast axes */
    uint64_t nelem;                               /* output elements */
    uint64_t rows;                                /* nelem / dims[rank - 1] (0 when empty) */
    int64_t n;                                    /* row length */
    int step[AMP_EW_MAX_IN];                      /* 0 or 1: input j along the row */
} AmpEwPlan;

/* Where the current row starts: output offset and input offsets, in elements. */
typedef struct AmpEwCursor {
    int64_t idx[AMP_MAX_RANK];
    uint64_t out;
    int64_t in[AMP_EW_MAX_IN];
} AmpEwCursor;

/* Row functions for two float inputs: o[i] = f(a[i * sa], b[i * sb]) for i < n, with
 * sa, sb in {0, 1}. o may alias a (sa == 1). */
typedef void (*AmpEwRowF)(float *o, const float *a, int sa, const float *b, int sb, int64_t n, const AmpEwParams *p);
typedef void (*AmpEwRowD)(double *o, const double *a, int sa, const double *b, int sb, int64_t n,
                          const AmpEwParams *p);
/* One-input maps: y[i] = f(x[i]). */
typedef void (*AmpEwMapF)(float *y, const float *x, uint64_t n, const AmpEwParams *p);
typedef void (*AmpEwMapD)(double *y, const double *x, uint64_t n, const AmpEwParams *p);

/* Expands to the four stride cases of a two-input row so each loop is a plain one; it
 * expects o, a, sa, b, sb and n in scope (as in AmpEwRowF), and EXPR reads x (from a)
 * and y (from b), both of type T. */
#define AMP_EW_ROW2(T, EXPR)                                                                   \
    do {                                                                                       \
        if (sa && sb) {                                                                        \
            for (int64_t i_ = 0; i_ < n; i_++) {                                               \
                const T x = a[i_], y = b[i_];                                                  \
                o[i_] = (EXPR);                                                                \
            }                                                                                  \
        } else if (sa) {                                                                       \
            const T y = b[0];                                                                  \
            for (int64_t i_ = 0; i_ < n; i_++) {                                               \
                const T x = a[i_];                                                             \
                o[i_] = (EXPR);                                                                \
            }                                                                                  \
        } else if (sb) {                                                                       \
            const T x = a[0];                                                                  \
            for (int64_t i_ = 0; i_ < n; i_++) {                                               \
                const T y = b[i_];                                                             \
                o[i_] = (EXPR);                                                                \
            }                                                                                  \
        } else {                                                                               \
            const T x = a[0], y = b[0];                                                        \
            const T v_ = (EXPR);                                                               \
            for (int64_t i_ = 0; i_ < n; i_++) o[i_] = v_;                                     \
        }                                                                                      \
    } while (0)

/* Defines NAME_f / NAME_d row functions (AmpEwRowF / AmpEwRowD) from one expression in
 * x, y and p, once for float and once for double (FEXPR, DEXPR). */
#define AMP_EW_DEF_ROW2(NAME, FEXPR, DEXPR)                                                         \
    static void NAME##_f(float *o, const float *a, int sa, const float *b, int sb, int64_t n,       \
                         const AmpEwParams *p) {                                                    \
        (void)p;                                                                                    \
        AMP_EW_ROW2(float, FEXPR);                                                                  \
    }                                                                                               \
    static void NAME##_d(double *o, const double *a, int sa, const double *b, int sb, int64_t n,    \
                         const AmpEwParams *p) {                                                    \
        (void)p;                                                                                    \
        AMP_EW_ROW2(double, DEXPR);                                                                 \
    }

/* Defines NAME_f / NAME_d maps (AmpEwMapF / AmpEwMapD) from expressions in x and p. */
#define AMP_EW_DEF_MAP(NAME, FEXPR, DEXPR)                                                          \
    static void NAME##_f(float *y, const float *xs, uint64_t n, const AmpEwParams *p) {            \
        (void)p;                                                                                    \
        for (uint64_t i_ = 0; i_ < n; i_++) {                                                       \
            const float x = xs[i_];                                                                 \
            y[i_] = (FEXPR);                                                                        \
        }                                                                                           \
    }                                                                                               \
    static void NAME##_d(double *y, const double *xs, uint64_t n, const AmpEwParams *p) {          \
        (void)p;                                                                                    \
        for (uint64_t i_ = 0; i_ < n; i_++) {                                                       \
            const double x = xs[i_];                                                                \
            y[i_] = (DEXPR);                                                                        \
        }                                                                                           \
    }

/* ---- helpers (elementwise_common.c) ------------------------------------------------ */

/* Plans the walk of n_in inputs (each broadcastable to the output shape) over it. */
void amp_ew_plan(AmpEwPlan *p, int rank, const int64_t *dims, int n_in, const AmpBuf *const *in);
void amp_ew_start(const AmpEwPlan *p, AmpEwCursor *c);
void amp_ew_next(const AmpEwPlan *p, AmpEwCursor *c);

/* Any numeric element (float family, double, integers, bool) as double. */
double amp_ew_get_f64(const AmpBuf *b, uint64_t i);
/* Stores v into element i: floats rounded to the storage type, integers truncated
 * toward zero and saturated to the type's range (NaN stores 0). */
void amp_ew_set_f64(AmpBuf *b, uint64_t i, double v);

/* Output 0 = f(a, b) for float inputs of one dtype (float family computed in fp32, or
 * double), broadcast with numpy rules; output dtype = a's. rd NULL: double unsupported. */
AmpCode amp_ew_binary_float(AmpKernelCtx *k, const AmpBuf *a, const AmpBuf *b, AmpEwRowF rf, AmpEwRowD rd,
                            const AmpEwParams *p);
/* The same, where rf is one of the ops simd.h has (op): 16-bit rows then take its
 * AVX-512 row when this CPU runs it. */
AmpCode amp_ew_binary_float_op(AmpKernelCtx *k, const AmpBuf *a, const AmpBuf *b, AmpEwRowF rf, AmpEwRowD rd,
                               const AmpEwParams *p, AmpSimdOp op);
/* Output 0 = f(x) for x = input 0 (float family in fp32, or double). */
AmpCode amp_ew_unary_float(AmpKernelCtx *k, AmpEwMapF f, AmpEwMapD d, const AmpEwParams *p);
/* The same, for maps that cost more than a table look-up (erf, exp, tanh...): float16 and
 * bfloat16 inputs of many elements read a table of f over all 65536 patterns, made once
 * by the block path's own conversions and f, so the bits are the same. */
AmpCode amp_ew_unary_float_lut(AmpKernelCtx *k, AmpEwMapF f, AmpEwMapD d, const AmpEwParams *p);

#endif
