/* CUDA training ops: com.microsoft's element-wise gradients (ReluGrad, SigmoidGrad,
 * TanhGrad, GeluGrad, BiasGelu, BiasGeluGrad_dX, DropoutGrad), Dropout with the
 * counter-based mask of ops/dropout_rng.h, InPlaceAccumulatorV2 (grad_ops.c), and the
 * index-driven ones: OneHot, ScatterND (reduction none / add), GatherGrad (grad_ops_index.c),
 * and MaxPool's Indices output (grad_ops_pool.c), which `ampc grad`'s MaxPool backward reads.
 * The CPU kernels (kernels/cpu/activation.c, dropout.c, optim.c, tensor.c, gather.c) are
 * the reference: their prepares parse the attributes, the same formulas run in fp32 for
 * the float storage types and round once on store. */
#ifndef AMP_CUDA_GRAD_OPS_H
#define AMP_CUDA_GRAD_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- launchers (grad_ops.cu) ---------------------------------------------------------------
 * Data pointers are device pointers, stream a cudaStream_t, dtypes AmpDType numbers
 * (float32 1, float16 10, bfloat16 16, bool 9, int32 6, int64 7, double 11); each returns
 * 0 or the launch's cudaError_t, and launches nothing for n = 0. */

#define AMP_CUDA_GRAD_RANK 8 /* = AMP_MAX_RANK (checked in grad_ops.c) */

/* The output index space of a two-operand op and each operand's element strides over it
 * (0 on broadcast axes). */
typedef struct AmpCudaGradShape {
    int rank;
    int64_t dims[AMP_CUDA_GRAD_RANK];
    int64_t stride[2][AMP_CUDA_GRAD_RANK];
} AmpCudaGradShape;

/* The two-operand element-wise gradients, out = f(a, b):
 * RELU dY where X > 0; SIGMOID dY Y (1 - Y); TANH dY (1 - Y^2); GELU dY Gelu'(X);
 * BIAS_GELU Gelu(A + B). gelu_mode: 0 exact (erf), 1 tanh. */
enum { AMP_CUDA_GR_RELU, AMP_CUDA_GR_SIGMOID, AMP_CUDA_GR_TANH, AMP_CUDA_GR_GELU, AMP_CUDA_GR_BIAS_GELU };

/* out (n elements, a's dtype: float32/float16/bfloat16) = f(a, b) with b of a's dtype;
 * sh NULL when both operands have the output's shape. */
int amp_cuda_grad_binary(int op, int gelu_mode, int dtype, void *out, const void *a, const void *b,
                         const AmpCudaGradShape *sh, uint64_t n, void *stream);

/* BiasGeluGrad_dX: dx = dy * Gelu'(x + b[i % h]) (exact Gelu), all of dtype. */
int amp_cuda_bias_gelu_grad(int dtype, void *dx, const void *dy, const void *x, const void *b, uint64_t n,
                            uint64_t h, void *stream);

/* Where Dropout's ratio and training mode come from: ratio_dev (one element of
 * ratio_dtype: a float type or double) or, when NULL, ratio; mode_dev (one bool) or, when
 * NULL, false; training_step ORs in the executor's training step. */
typedef struct AmpCudaDropout {
    double ratio;
    const void *ratio_dev;
    int ratio_dtype;
    const uint8_t *mode_dev;
    int training_step;
    uint64_t key;       /* the call's key (dropout_rng.h) */
    int mask_dtype;     /* bool, or x's dtype (before opset 10) */
} AmpCudaDropout;

/* Dropout: training = (training_step || *mode_dev) && ratio != 0; then element i is kept
 * when amp_dropout_keep(key, i, threshold(ratio)): y = x * (float)(1 / (1 - ratio)) or 0,
 * mask 1 or 0; else y = x and mask 1. A ratio outside [0, 1) while training (which the
 * CPU reports) gives NaN in y and a mask of 0. y or mask may be NULL. */
int amp_cuda_dropout(int dtype, void *y, void *mask, const void *x, uint64_t n, const AmpCudaDropout *p,
                     void *stream);

/* DropoutGrad: training = mode_dev ? *mode_dev : true; ratio ratio_dev or 0.5;
 * dx = mask ? dy * (1 / (1 - ratio)) (in double, rounded through float) : 0, or dy when
 * not training; NaN for a ratio outside [0, 1) while training. */
int amp_cuda_dropout_grad(int dtype, void *dx, const void *dy, const uint8_t *mask, uint64_t n,
                          const void *ratio_dev, int ratio_dtype, const uint8_t *mode_dev, void *stream);

/* InPlaceAccumulatorV2: out (buf_dtype) = flag ? val : buf + val, in fp32, where flag is
 * the one element of flag_dev (bool, int32 or int64; NULL: false) read on the device;
 * *updated = 1 (when not NULL). out may be buf. out NULL: only the flag is written. */
int amp_cuda_accumulate(int buf_dtype, int val_dtype, void *out, const void *buf, const void *val, uint64_t n,
                        const void *flag_dev, int flag_dtype, uint8_t *updated, void *stream);

/* OneHot: y (outer, depth, inner), elements of es bytes (1, 2, 4, 8), = values[1] where
 * the index idx[o * inner + i] (int32 / int64; negative counts from depth's end) equals
 * the depth position, else values[0]; values is a device pair. */
int amp_cuda_one_hot(void *y, size_t es, const void *values, const void *idx, int idx64, uint64_t outer,
                     int64_t depth, uint64_t inner, void *stream);

/* Where ScatterND's index tuples point: m leading axes of the data with dims[], each
 * tuple's element offset counted in slices of `slice` elements. */
typedef struct AmpCudaScatter {
    int m;
    int64_t dims[AMP_CUDA_GRAD_RANK];
    uint64_t tuples, slice;
} AmpCudaScatter;

enum { AMP_CUDA_SCATTER_NONE, AMP_CUDA_SCATTER_ADD };

/* ScatterND into y (already holding the data): per tuple t (idx int32/int64, m entries,
 * negative from the axis' end; a tuple outside the data is skipped) the slice of updates
 * u is written (NONE: any es; duplicates leave one of them) or added (ADD: float32 with
 * fp32 atomics, so duplicates sum in any order; float16 / bfloat16 one thread per slice
 * element walking the tuples in order, rounding after each add as the CPU does). */
int amp_cuda_scatter_nd(int red, int dtype, size_t es, void *y, const void *u, const void *idx, int idx64,
                        const AmpCudaScatter *s, void *stream);

/* GatherGrad: dx (outer, dim, row) zeroed, each row j of dy (outer, nidx, row) added at
 * idx[j] (wrapped; outside the axis: skipped) in fp32. float32: atomics into dx.
 * float16 / bfloat16: through fp32 scratch (the device buffer ws of ws_bytes), in chunks
 * of the dim axis that fit, rounded once; returns -1 (nothing launched) when not even one
 * row per outer index fits. */
int amp_cuda_gather_grad(int dtype, void *dx, const void *dy, const void *idx, int idx64, uint64_t outer,
                         int64_t dim, uint64_t nidx, uint64_t row, void *ws, size_t ws_bytes, void *stream);

/* MaxPool with Indices over planes (N * C) of x (planes, in...) into y (planes, out...)
 * (NULL: not wanted) and idx (int64, y's shape): one thread per output, each the walk of
 * maxpool_elem.h (kernels/cpu/pool.c's: the first maximum wins, a NaN wins and sticks;
 * idx the flat input index, row- or column-major (storage_order 1); -1 and y -inf for a
 * window wholly in the padding). */
#define AMP_CUDA_POOL_SPATIAL 6 /* = AMP_MAX_SPATIAL (checked in grad_ops_pool.c) */
typedef struct AmpCudaPoolIdx {
    int nsp, col_major;
    uint64_t planes;
    int64_t in[AMP_CUDA_POOL_SPATIAL], out[AMP_CUDA_POOL_SPATIAL], kern[AMP_CUDA_POOL_SPATIAL];
    int64_t stride[AMP_CUDA_POOL_SPATIAL], dil[AMP_CUDA_POOL_SPATIAL], pad0[AMP_CUDA_POOL_SPATIAL];
} AmpCudaPoolIdx;
int amp_cuda_maxpool_indices(int dtype, void *y, int64_t *idx, const void *x, const AmpCudaPoolIdx *p,
                             void *stream);

/* The rows of the dim axis one fp32 scratch pass of GatherGrad covers (0: none fit). */
static inline int64_t amp_cuda_gather_grad_chunk(uint64_t outer, int64_t dim, uint64_t row, size_t ws_bytes) {
    uint64_t per_row = outer * row * 4u;
    if (!per_row) return dim;
    uint64_t rows = (uint64_t)ws_bytes / per_row;
    return rows >= (uint64_t)dim ? dim : (int64_t)rows;
}

#ifdef __cplusplus
}
#endif

/* ---- node-level kernels and supports predicates (grad_ops.c, grad_ops_index.c) ---------------- */

#ifndef __cplusplus
#include "kernels/cuda/cuda_impl.h"

AmpCode amp_cuda_relu_grad(AmpKernelCtx *k);
AmpCode amp_cuda_sigmoid_grad(AmpKernelCtx *k);
AmpCode amp_cuda_tanh_grad(AmpKernelCtx *k);
AmpCode amp_cuda_gelu_grad(AmpKernelCtx *k);
AmpCode amp_cuda_bias_gelu(AmpKernelCtx *k);
AmpCode amp_cuda_bias_gelu_grad_dx(AmpKernelCtx *k);
AmpCode amp_cuda_dropout_grad_node(AmpKernelCtx *k);
AmpCode amp_cuda_dropout_node(AmpKernelCtx *k);
AmpCode amp_cuda_accumulator(AmpKernelCtx *k);
AmpCode amp_cuda_one_hot_node(AmpKernelCtx *k);
AmpCode amp_cuda_scatter_nd_node(AmpKernelCtx *k);
AmpCode amp_cuda_gather_grad_node(AmpKernelCtx *k);

/* (The element-wise gradients and BiasGelu* take supports.c's amp_cuda_supports_float.) */
/* Dropout: float data; ratio a float type or double; training_mode bool. */
bool amp_cuda_supports_dropout(const AmpNode *n, int64_t opset, const int *in_dtypes);
/* DropoutGrad: float dY, bool mask, ratio a float type or double, training_mode bool. */
bool amp_cuda_supports_dropout_grad(const AmpNode *n, int64_t opset, const int *in_dtypes);
/* InPlaceAccumulatorV2: float buffer and value; the flag bool, int32 or int64. */
bool amp_cuda_supports_accumulator(const AmpNode *n, int64_t opset, const int *in_dtypes);
/* OneHot: int32/int64 indices, values of 1, 2, 4 or 8 bytes. */
bool amp_cuda_supports_one_hot(const AmpNode *n, int64_t opset, const int *in_dtypes);
/* ScatterND: reduction none (elements of 1, 2, 4, 8 bytes) or add (float32, float16,
 * bfloat16); int32/int64 indices. */
bool amp_cuda_supports_scatter_nd(const AmpNode *n, int64_t opset, const int *in_dtypes);
/* GatherGrad: float dY, int32/int64 indices. */
bool amp_cuda_supports_gather_grad(const AmpNode *n, int64_t opset, const int *in_dtypes);

/* MaxPool with its Indices output wanted (grad_ops_pool.c; conv.c's MaxPool hands such a
 * node here): float data, any dilations and storage_order. */
AmpCode amp_cuda_maxpool_with_indices(AmpKernelCtx *k);
/* Its launch parameters and Y's dims from the node's geometry (amp_pool_geom, ops/conv_geom.h;
 * also for the host test). */
AmpCode amp_cuda_maxpool_plan(AmpKernelCtx *k, const AmpBuf *x, AmpCudaPoolIdx *p, int64_t *ydims);
bool amp_cuda_supports_maxpool_indices(const AmpNode *n, int64_t opset, const int *in_dtypes);
/* Whether MaxPool node n lists its Indices output. */
bool amp_cuda_pool_wants_indices(const AmpNode *n);

/* Whether Dropout's CUDA kernel takes a call, from what the host knows: not the seeded
 * MT19937 path (a training_mode input outside a training step with a seed attribute),
 * which only the CPU implements (the kernel then answers AMP_ERR_UNSUPPORTED). */
bool amp_cuda_dropout_on_device(bool training_step, bool has_mode_input, bool has_seed);
#endif

#endif
