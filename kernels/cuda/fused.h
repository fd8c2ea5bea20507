/* CUDA launchers of the executor's fused nodes (kernels/cpu/fused.c is the reference):
 * a fused elementwise program over one shape, and the multi-tensor unscale and check of
 * the loss-scaling pass. Device pointers; `stream` a cudaStream_t; each returns 0 or the
 * cudaError_t of its launch. */
#ifndef AMP_CUDA_FUSED_H
#define AMP_CUDA_FUSED_H

#include <stddef.h>
#include <stdint.h>

#include "ir/fused_prog.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One program's launch over `tensors` sets: passed by value (under the 4 KiB of kernel
 * parameters). Set t reads in[t * n_in + i] and writes out[t * n_out + o], over nelem[t]
 * elements starting at element start[t] of the launch. */
enum { AMP_CUDA_FUSED_PTRS = 64 };
typedef struct AmpCudaFusedArgs {
    int n_in, n_instr, n_out, tensors;
    uint8_t in_dtype[AMP_FUSED_MAX_IN];
    uint8_t cls[AMP_FUSED_MAX_REG];     /* each register's class (fused_eval.h) */
    uint8_t out_reg[AMP_FUSED_MAX_OUT], out_dtype[AMP_FUSED_MAX_OUT];
    uint8_t code[AMP_FUSED_MAX_INSTR][5]; /* op, dtype, a, b, c */
    uint64_t in_n[AMP_CUDA_FUSED_PTRS]; /* each input's elements: element e reads e % in_n */
    const void *in[AMP_CUDA_FUSED_PTRS];
    void *out[AMP_CUDA_FUSED_PTRS]; /* NULL: not wanted */
    uint64_t start[AMP_CUDA_FUSED_PTRS], nelem[AMP_CUDA_FUSED_PTRS];
    uint64_t total;
} AmpCudaFusedArgs;

int amp_cuda_fused_elementwise_launch(const AmpCudaFusedArgs *a, void *stream);

/* Gradients of one UnscaleCheck node (at most AMP_CUDA_UC_MAX). */
enum { AMP_CUDA_UC_MAX = 62 };
typedef struct AmpCudaUnscaleArgs {
    int n;
    const void *x[AMP_CUDA_UC_MAX]; /* float32, float16 or bfloat16 (x_dtype) */
    float *g[AMP_CUDA_UC_MAX];      /* g = float(x) * *inv */
    uint64_t nelem[AMP_CUDA_UC_MAX];
    uint8_t x_dtype[AMP_CUDA_UC_MAX];
    const float *inv;      /* one float32 on the device */
    const uint8_t *before; /* one bool, or NULL */
    uint8_t *found;        /* one bool: *before, or 1 where some g is not finite */
} AmpCudaUnscaleArgs;

int amp_cuda_unscale_check_launch(const AmpCudaUnscaleArgs *a, void *stream);

#ifndef __CUDACC__
#include "kernels/cuda/cuda_impl.h"
/* The node kernels (fused.c) and their supports predicate. */
AmpCode amp_cuda_fused_elementwise(AmpKernelCtx *k);
AmpCode amp_cuda_unscale_check(AmpKernelCtx *k);
bool amp_cuda_supports_fused(const AmpNode *n, int64_t opset, const int *in_dtypes);
#endif

#ifdef __cplusplus
}
#endif

#endif
