/* CUDA reductions: the Reduce* ops, ArgMax/ArgMin, GlobalAveragePool and GlobalMaxPool
 * (reduce.cu: kernels and launchers; reduce.c: the node-level kernels). Float32, float16
 * and bfloat16 data, accumulated in float32 and rounded once on store. */
#ifndef AMP_CUDA_REDUCE_H
#define AMP_CUDA_REDUCE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The reduction a launcher computes (as kernels/cpu/reduce.c's RedKind). */
enum {
    AMP_CUDA_RED_SUM,
    AMP_CUDA_RED_MEAN,
    AMP_CUDA_RED_MAX,
    AMP_CUDA_RED_MIN,
    AMP_CUDA_RED_PROD,
    AMP_CUDA_RED_SUMSQ,
    AMP_CUDA_RED_L1,
    AMP_CUDA_RED_L2,
    AMP_CUDA_RED_LOGSUM,
    AMP_CUDA_RED_LOGSUMEXP
};

/* AMP_MAX_RANK, which the .cu files cannot include (reduce.c checks they agree). */
#define AMP_CUDA_RED_MAX_RANK 8

/* Which input elements each output reduces, passed by value. Contiguous form (general
 * 0): input element (o, j, i) lies at (o * r + j) * inner + i and reduces into output
 * o * inner + i. General form: output t's index over keep_dims (row-major, the output's
 * own order) and the reduced index over red_dims (count of them) address the input
 * through keep_str and red_str. */
typedef struct AmpCudaRedShape {
    int general;
    int64_t outer, r, inner;
    int n_keep, n_red;
    int64_t keep_dims[AMP_CUDA_RED_MAX_RANK], keep_str[AMP_CUDA_RED_MAX_RANK];
    int64_t red_dims[AMP_CUDA_RED_MAX_RANK], red_str[AMP_CUDA_RED_MAX_RANK];
    int64_t n_out; /* outputs */
    int64_t count; /* input elements per output (ReduceMean's divisor; 0 gives identities) */
} AmpCudaRedShape;

/* y[n_out] = the `kind` reduction of x; dtype (AmpDType: float, float16, bfloat16) is
 * both x's and y's. Device pointers; returns 0 or the launch's cudaError_t. */
int amp_cuda_reduce_launch(int kind, int dtype, const void *x, void *y, const AmpCudaRedShape *s, void *stream);

/* y[o * inner + i] (int64) = the index along the middle axis (d > 0 elements) of x's
 * (outer, d, inner) layout of the largest (is_max) or smallest element; NaN wins, the
 * first one (or the last with `last`), as are ties. */
int amp_cuda_argreduce_launch(int is_max, int last, int dtype, const void *x, int64_t *y, int64_t outer, int64_t d,
                              int64_t inner, void *stream);

#ifdef __cplusplus
}

#else
#include "kernels/cuda/cuda_impl.h"
#include "ops/reduce_attrs.h" /* amp_reduce_prepare, amp_arg_prepare: every backend's */

bool amp_cuda_supports_reduce(const AmpNode *n, int64_t opset, const int *in_dtypes);
bool amp_cuda_supports_arg(const AmpNode *n, int64_t opset, const int *in_dtypes);

AmpCode amp_cuda_reduce_sum(AmpKernelCtx *k);
AmpCode amp_cuda_reduce_mean(AmpKernelCtx *k);
AmpCode amp_cuda_reduce_max(AmpKernelCtx *k);
AmpCode amp_cuda_reduce_min(AmpKernelCtx *k);
AmpCode amp_cuda_reduce_prod(AmpKernelCtx *k);
AmpCode amp_cuda_reduce_sumsq(AmpKernelCtx *k);
AmpCode amp_cuda_reduce_l1(AmpKernelCtx *k);
AmpCode amp_cuda_reduce_l2(AmpKernelCtx *k);
AmpCode amp_cuda_reduce_logsum(AmpKernelCtx *k);
AmpCode amp_cuda_reduce_logsumexp(AmpKernelCtx *k);
AmpCode amp_cuda_argmax(AmpKernelCtx *k);
AmpCode amp_cuda_argmin(AmpKernelCtx *k);
AmpCode amp_cuda_global_averagepool(AmpKernelCtx *k);
AmpCode amp_cuda_global_maxpool(AmpKernelCtx *k);
#endif

#endif
