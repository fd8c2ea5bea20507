/* The GEMM family on CUDA: MatMul, Gemm and com.microsoft FusedMatMul through cuBLASLt
 * (gemm.c), and the kernel that broadcasts Gemm's C (gemm.cu). */
#ifndef AMP_CUDA_GEMM_H
#define AMP_CUDA_GEMM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* y (m x n, row-major) = beta * c broadcast with element strides c_rs, c_cs (0 along a
 * broadcast axis); c NULL: zeros. dtype: AMP_DT_FLOAT, FLOAT16 or BFLOAT16. */
int amp_cuda_gemm_fill_c(void *y, const void *c, int dtype, int64_t m, int64_t n, int64_t c_rs, int64_t c_cs,
                         float beta, void *stream);

#ifdef __cplusplus
}

#else
#include "kernels/cuda/cuda_impl.h"

/* One strided-batched product for other families' kernels (attention): Y[b] (m x n) =
 * alpha op(A[b]) op(B[b]) + beta Y[b], row-major with leading dims lda, ldb, ldy (0:
 * dense) and batch strides sa, sb, sy in elements; A and B of dtype, Y of ydtype (0 or
 * dtype: the same; float32 for 16-bit inputs), fp32 accumulation; bias (n entries of
 * Y's type, beta 0) added by cuBLASLt's epilogue, or NULL; cuBLASLt uses the first
 * ws_bytes of the session's workspace (0: all of it). Plans cached per shape. */
typedef struct AmpCudaMm {
    int dtype, ydtype;
    bool ta, tb;
    int64_t m, n, k, batch, lda, ldb, ldy, sa, sb, sy;
    const void *a, *b, *bias;
    void *y;
    float alpha, beta;
    size_t ws_bytes;
} AmpCudaMm;
AmpCode amp_cuda_mm(AmpKernelCtx *k, const AmpCudaMm *mm);

AmpCode amp_cuda_matmul(AmpKernelCtx *k);
AmpCode amp_cuda_gemm(AmpKernelCtx *k);
AmpCode amp_cuda_fused_matmul(AmpKernelCtx *k);
bool amp_cuda_supports_matmul(const AmpNode *n, int64_t opset, const int *in_dtypes);
bool amp_cuda_supports_fused_matmul(const AmpNode *n, int64_t opset, const int *in_dtypes);
#endif

#endif
