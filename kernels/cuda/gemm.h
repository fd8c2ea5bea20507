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

AmpCode amp_cuda_matmul(AmpKernelCtx *k);
AmpCode amp_cuda_gemm(AmpKernelCtx *k);
AmpCode amp_cuda_fused_matmul(AmpKernelCtx *k);
bool amp_cuda_supports_matmul(const AmpNode *n, int64_t opset, const int *in_dtypes);
bool amp_cuda_supports_fused_matmul(const AmpNode *n, int64_t opset, const int *in_dtypes);
#endif

#endif
