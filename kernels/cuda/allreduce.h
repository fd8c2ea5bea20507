/* ai.ampc AllReduceMean on CUDA (allreduce.c: the node-level kernel over NCCL,
 * nccl_comm.h; allreduce.cu: the mean written out). The CPU kernel (kernels/cpu/comm.c) is
 * the reference: float32 sums over the ranks, divided by their number, 16-bit gradients
 * widened to float32 for the sum and written back in their type. */
#ifndef AMP_CUDA_ALLREDUCE_H
#define AMP_CUDA_ALLREDUCE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* y[0..n) <- s[0..n) / ranks, in y's dtype (the AmpDType numbers: float32 1, float16 10,
 * bfloat16 16; rounded to nearest even), on stream (a cudaStream_t); y may be s (float32 in
 * place). 0, or the launch's cudaError_t. */
int amp_cuda_mean_launch(void *y, int dtype, const float *s, size_t n, float ranks, void *stream);

#ifdef __cplusplus
}

#else
#include "kernels/cuda/cuda_impl.h"

/* Float gradients (the instance answers besides whether it has an NCCL communicator:
 * backend_cuda.c, cuda_supports). */
bool amp_cuda_supports_allreduce(const AmpNode *n, int64_t opset, const int *in_dtypes);
AmpCode amp_cuda_allreduce_mean(AmpKernelCtx *k);
#endif

#endif
