/* CUDA optimizers: ai.onnx.preview.training Adam, Momentum and Adagrad as multi-tensor
 * kernels (optim.cu: the kernel and its launcher; optim.c: the node-level kernels and the
 * launch plan). One launch updates every tensor of a node, or a few launches when the
 * node has more tensors than one launch's table holds: the table (pointers, sizes, dtypes)
 * is passed by value, within the 4 KiB kernel-parameter limit. Blocks stride over the
 * launch's (tensor, chunk) pairs; each chunk is AMP_CUDA_OPT_CHUNK elements of one
 * tensor. The arithmetic is the CPU kernels' (ops/optim_math.h, in double, state
 * stored in its tensor's own type); R, T and the fused update gate are read on the device. */
#ifndef AMP_CUDA_OPTIM_H
#define AMP_CUDA_OPTIM_H

#include <stdint.h>

#include "ops/optim_math.h"

#ifdef __cplusplus
extern "C" {
#endif

#define AMP_CUDA_OPT_MAX_TENSORS 48 /* tensors per launch (the table below fits 4 KiB) */
#define AMP_CUDA_OPT_CHUNK 8192     /* elements of one tensor a block updates at a time */
#define AMP_CUDA_OPT_PARAM_LIMIT 4096 /* bytes of kernel parameters every CUDA device takes */

/* The inputs per tensor (X, G, state 1, state 2) and the outputs (X_new, state 1, state
 * 2); Momentum and Adagrad have one state. Output j replaces input j == 0 ? 0 : j + 1. */
enum { AMP_CUDA_OPT_IN = 4, AMP_CUDA_OPT_OUT = 3 };

/* What every launch of a node shares: its attributes, where R (a float scalar of r_dtype),
 * T (an int32 or int64 scalar) and the gate (one bool, or NULL) lie on the device. */
typedef struct AmpCudaOptNode {
    AmpOptAttrs a;
    const void *r, *t;
    const uint8_t *gate;
    int32_t r_dtype, t_dtype;
    int32_t n_state; /* 1 or 2 */
} AmpCudaOptNode;

/* One tensor of the node, as the plan takes it: device pointers (out[j] NULL: output not
 * listed), each input's AmpDType (an output has its source's) and the element count. */
typedef struct AmpCudaOptTensor {
    const void *in[AMP_CUDA_OPT_IN];
    void *out[AMP_CUDA_OPT_OUT];
    int32_t dt[AMP_CUDA_OPT_IN];
    int64_t nelem;
} AmpCudaOptTensor;

/* One launch's table: n tensors; tensor i holds the launch's chunks [chunk_end[i - 1],
 * chunk_end[i]) (chunk_end[-1] = 0), chunks = chunk_end[n - 1]. all_f32: every input of
 * every tensor is float32 (the kernel's fast path). */
typedef struct AmpCudaOptTable {
    int32_t n, all_f32;
    int64_t chunks;
    int64_t chunk_end[AMP_CUDA_OPT_MAX_TENSORS];
    int64_t nelem[AMP_CUDA_OPT_MAX_TENSORS];
    const void *in[AMP_CUDA_OPT_IN][AMP_CUDA_OPT_MAX_TENSORS];
    void *out[AMP_CUDA_OPT_OUT][AMP_CUDA_OPT_MAX_TENSORS];
    uint8_t dt[AMP_CUDA_OPT_IN][AMP_CUDA_OPT_MAX_TENSORS];
} AmpCudaOptTable;

/* The launch plan (optim.c, host only): fills t with the tensors of ts[*next..n) that go
 * in one launch (at most AMP_CUDA_OPT_MAX_TENSORS, in order, tensors without elements
 * left out), advances *next past them, and returns t->n; 0 when none is left. */
int amp_cuda_opt_plan(const AmpCudaOptTensor *ts, int n, int *next, AmpCudaOptTable *t);

/* Updates every tensor of one table on the stream (optim.cu). Returns the cudaError_t of
 * the launch (0: fine). */
int amp_cuda_opt_launch(const AmpCudaOptNode *node, const AmpCudaOptTable *t, void *stream);

#ifdef __cplusplus
}
#endif

/* The table's tensor that holds launch chunk c (0 <= c < t->chunks): a binary search over
 * chunk_end, for the kernel and the host tests. */
#ifdef __CUDACC__
__host__ __device__ __forceinline__
#else
static inline
#endif
int amp_cuda_opt_find(const AmpCudaOptTable *t, int64_t c) {
    int lo = 0, hi = t->n - 1;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (c < t->chunk_end[mid]) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

#ifndef __cplusplus
#include "kernels/cuda/cuda_impl.h"

bool amp_cuda_supports_optimizer(const AmpNode *n, int64_t opset, const int *in_dtypes);
AmpCode amp_cuda_adam(AmpKernelCtx *k);
AmpCode amp_cuda_momentum(AmpKernelCtx *k);
AmpCode amp_cuda_adagrad(AmpKernelCtx *k);
#endif

#endif
