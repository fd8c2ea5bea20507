/* CUDA elementwise family: binary arithmetic, the variadic ops, comparisons and bool
 * logic, unary math and activations, Clip, PRelu, Where, Expand, Cast. The CPU kernels
 * (kernels/cpu/elementwise.c, unary.c, activation.c, logic.c, tensor.c's cast engine) are
 * the reference: the same formulas in fp32 for the float storage types, rounded to
 * nearest even on store. */
#ifndef AMP_CUDA_ELEMENTWISE_H
#define AMP_CUDA_ELEMENTWISE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ops/scalar_math.h" /* AmpEwParams */

/* ---- launchers (elementwise.cu) ------------------------------------------------------ */

#ifdef __cplusplus
extern "C" {
#endif

/* cuda_impl.h's AmpCudaBcast (nvcc cannot compile cuda_impl.h, so the .cu mirrors its
 * layout; elementwise.c checks the two agree). Output index space and per-operand strides. */
struct AmpCudaBcast;

/* The variadic ops' shape: up to AMP_CUDA_EW_MAX_VAR inputs per launch, strides over the
 * output. More inputs run as several launches, chunk after chunk, through an accumulator
 * laid out as the output (floats: fp32, so a 16-bit Sum still rounds once, as the CPU's
 * fp32 view does; integers: the output's own type). */
#define AMP_CUDA_EW_MAX_VAR 8
#define AMP_CUDA_EW_RANK 8 /* = AMP_MAX_RANK (checked in elementwise.c) */
typedef struct AmpCudaEwMulti {
    int n_in;
    int rank;
    int64_t dims[AMP_CUDA_EW_RANK];
    int64_t stride[AMP_CUDA_EW_MAX_VAR][AMP_CUDA_EW_RANK];
    const void *in[AMP_CUDA_EW_MAX_VAR];
    const void *acc_in; /* NULL: start from in[0]; else the earlier chunks' accumulator */
    void *acc_out;      /* NULL: write out (Mean divides); else the accumulator, not divided */
    int n_total;        /* every chunk's inputs: Mean's divisor */
} AmpCudaEwMulti;

/* Unary parameters: the activations' attributes (ew, as their prepares parsed them) and
 * Clip's bounds, which are device pointers to one element of x's dtype (NULL: lo_f / hi_f,
 * or the integer type's limits). */
typedef struct AmpCudaEwParams {
    AmpEwParams ew;
    float lo_f, hi_f; /* Clip's float bounds when lo / hi are NULL */
    const void *lo, *hi;
} AmpCudaEwParams;

enum {
    AMP_CUDA_BIN_ADD, AMP_CUDA_BIN_SUB, AMP_CUDA_BIN_MUL, AMP_CUDA_BIN_DIV, AMP_CUDA_BIN_POW,
    AMP_CUDA_BIN_MAX, AMP_CUDA_BIN_MIN, AMP_CUDA_BIN_PRELU
};
enum { AMP_CUDA_CMP_EQ, AMP_CUDA_CMP_LT, AMP_CUDA_CMP_GT, AMP_CUDA_CMP_LE, AMP_CUDA_CMP_GE, AMP_CUDA_CMP_AND, AMP_CUDA_CMP_OR };
/* The unary launcher's ops: AMP_CUDA_UN_<Id> for each line of ops/unary.def, and Clip. */
enum {
#define AMP_UNARY(Id, FEXPR, DEXPR, PREPARE, TYPES, LUT, CUDA, FUSE) AMP_CUDA_UN_##Id,
#include "ops/unary.def"
#undef AMP_UNARY
    AMP_CUDA_UN_CLIP
};
enum { AMP_CUDA_TEST_ISNAN, AMP_CUDA_TEST_ISINF, AMP_CUDA_TEST_NOT };

/* All data pointers are device pointers, stream a cudaStream_t; n output elements (0:
 * nothing launched); bc NULL when every operand has the output's shape (flat walk).
 * dtypes are AmpDType numbers. Each returns 0 or the launch's cudaError_t. */

/* out = a op b. dtype float32/float16/bfloat16 (every op), int32/int64 (ADD SUB MUL DIV
 * MAX MIN; DIV truncates toward zero, x / 0 gives 0). */
int amp_cuda_ew_binary(int op, int dtype, void *out, const void *a, const void *b, const struct AmpCudaBcast *bc,
                       uint64_t n, void *stream);
/* bool out = a op b. dtype float family, int32, int64, bool (AND / OR: bool only). */
int amp_cuda_ew_compare(int op, int dtype, uint8_t *out, const void *a, const void *b, const struct AmpCudaBcast *bc,
                        uint64_t n, void *stream);
/* out = f(x) over n elements. Float family: every op; int32 / int64: the integer forms
 * (ops/unary.def's TYPES FI: Neg Abs Sign Relu) and CLIP. */
int amp_cuda_ew_unary(int op, int dtype, void *out, const void *x, uint64_t n, const AmpCudaEwParams *p,
                      void *stream);
/* bool out = test(x): ISNAN / ISINF (float family, p->mode directions), NOT (bool). */
int amp_cuda_ew_test(int op, int dtype, uint8_t *out, const void *x, uint64_t n, int mode, void *stream);
/* out = in[0] op in[1] op ... (op ADD, MAX or MIN; mean divides the sum by n_total),
 * floats accumulated in fp32 and rounded once; int32 / int64 MAX and MIN. One chunk of at
 * most AMP_CUDA_EW_MAX_VAR inputs (m->acc_in / acc_out chain the chunks). */
int amp_cuda_ew_variadic(int op, int dtype, bool mean, void *out, const AmpCudaEwMulti *m, uint64_t n, void *stream);
/* The device scratch a variadic op of n_in inputs of dtype over nelem outputs needs for its
 * accumulator: 0 within one chunk, and for float32 and integers (their output is the
 * accumulator); nelem fp32 for 16-bit floats over more than one chunk. */
size_t amp_cuda_ew_variadic_scratch(int dtype, int n_in, uint64_t nelem);
/* out = cond ? x : y, elements of esize bytes (1, 2, 4, 8); operands 0, 1, 2 of bc. */
int amp_cuda_ew_where(int esize, void *out, const uint8_t *cond, const void *x, const void *y,
                      const struct AmpCudaBcast *bc, uint64_t n, void *stream);
/* out = x broadcast (operand 0 of bc), elements of esize bytes. */
/* out (dtype to) = x (dtype from) converted as kernels/cpu/tensor.c's cast engine does;
 * both among float, float16, bfloat16, double, int8..int64, uint8..uint64, bool. */
int amp_cuda_ew_cast(int from, int to, void *out, const void *x, uint64_t n, void *stream);

#ifdef __cplusplus
}
#endif

/* ---- node-level kernels, prepares and supports predicates (elementwise.c) ----------- */

#ifndef __cplusplus
#include "kernels/cuda/cuda_impl.h"

AmpCode amp_cuda_add(AmpKernelCtx *k);
AmpCode amp_cuda_sub(AmpKernelCtx *k);
AmpCode amp_cuda_mul(AmpKernelCtx *k);
AmpCode amp_cuda_div(AmpKernelCtx *k);
AmpCode amp_cuda_pow(AmpKernelCtx *k);
AmpCode amp_cuda_sum(AmpKernelCtx *k);
AmpCode amp_cuda_mean(AmpKernelCtx *k);
AmpCode amp_cuda_max(AmpKernelCtx *k);
AmpCode amp_cuda_min(AmpKernelCtx *k);
AmpCode amp_cuda_equal(AmpKernelCtx *k);
AmpCode amp_cuda_less(AmpKernelCtx *k);
AmpCode amp_cuda_greater(AmpKernelCtx *k);
AmpCode amp_cuda_less_equal(AmpKernelCtx *k);
AmpCode amp_cuda_greater_equal(AmpKernelCtx *k);
AmpCode amp_cuda_and(AmpKernelCtx *k);
AmpCode amp_cuda_or(AmpKernelCtx *k);
AmpCode amp_cuda_not(AmpKernelCtx *k);
AmpCode amp_cuda_isnan(AmpKernelCtx *k);
AmpCode amp_cuda_isinf(AmpKernelCtx *k);
AmpCode amp_cuda_prelu(AmpKernelCtx *k);
AmpCode amp_cuda_clip(AmpKernelCtx *k);
AmpCode amp_cuda_where(AmpKernelCtx *k);
AmpCode amp_cuda_cast(AmpKernelCtx *k);
AmpCode amp_cuda_cast_like(AmpKernelCtx *k);

/* Every op of ops/unary.def whose CUDA column is 1: the launcher's AMP_CUDA_UN_<Id>. */
AmpCode amp_cuda_unary(AmpKernelCtx *k);

/* The prepares are every backend's (ops/ew_common.h: amp_ew_prepare_legacy_bcast, _clip,
 * _isinf and those ops/unary.def names; ops/cast_engine.h: amp_cast_prepare). */

bool amp_cuda_supports_arith(const AmpNode *n, int64_t opset, const int *in_dtypes);      /* Add Sub Mul */
bool amp_cuda_supports_float2(const AmpNode *n, int64_t opset, const int *in_dtypes);     /* Div Pow PRelu */
bool amp_cuda_supports_sum(const AmpNode *n, int64_t opset, const int *in_dtypes);        /* Sum Mean */
bool amp_cuda_supports_maxmin(const AmpNode *n, int64_t opset, const int *in_dtypes);     /* Max Min */
bool amp_cuda_supports_compare(const AmpNode *n, int64_t opset, const int *in_dtypes);
bool amp_cuda_supports_bool(const AmpNode *n, int64_t opset, const int *in_dtypes);       /* And Or Not */
bool amp_cuda_supports_float_or_int(const AmpNode *n, int64_t opset, const int *in_dtypes); /* unary.def's FI */
bool amp_cuda_supports_clip(const AmpNode *n, int64_t opset, const int *in_dtypes);
bool amp_cuda_supports_where(const AmpNode *n, int64_t opset, const int *in_dtypes);
bool amp_cuda_supports_cast(const AmpNode *n, int64_t opset, const int *in_dtypes);
bool amp_cuda_supports_cast_like(const AmpNode *n, int64_t opset, const int *in_dtypes);
#endif

#endif
