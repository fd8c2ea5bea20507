/* CUDA data movement (the CPU's shape.c, slice.c, gather.c and tensor.c): Identity,
 * Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Concat, Split, Slice, Expand, Tile, Pad,
 * Gather, GatherElements, Shape, Size, Constant, ConstantOfShape, Range. These ops move
 * elements by their byte size (1, 2, 4 or 8), so one kernel serves every dtype of a size.
 * movement.cu holds the kernels and launchers; movement.c the copies (Identity ..
 * Pad), movement_make.c the index lookups and the ops that make tensors. */
#ifndef AMP_CUDA_MOVEMENT_H
#define AMP_CUDA_MOVEMENT_H

#include <stddef.h>
#include <stdint.h>

/* ---- launchers (movement.cu) --------------------------------------------------------- */

#ifdef __cplusplus
extern "C" {
#endif

/* A strided view may have twice the executor's rank (Tile views (repeat, dim) pairs). */
#define AMP_CUDA_VIEW_RANK 16

/* An index space (dims) walked in row-major order, and per index the element strides of
 * the source and of the destination (any sign; 0 repeats an element). */
typedef struct AmpCudaView {
    int rank;
    int64_t dims[AMP_CUDA_VIEW_RANK];
    int64_t src[AMP_CUDA_VIEW_RANK];
    int64_t dst[AMP_CUDA_VIEW_RANK];
} AmpCudaView;

/* dst[dst_off + sum c*v.dst] = src[src_off + sum c*v.src] for every index c of the view;
 * es: element bytes (1, 2, 4 or 8). Merges axes and widens elements where it can; a
 * contiguous view is one cudaMemcpyAsync. */
int amp_cuda_strided_copy(void *dst, int64_t dst_off, const void *src, int64_t src_off, size_t es,
                          const AmpCudaView *v, void *stream);

/* Gather: y (outer, nidx, inner) = x (outer, dim, inner) at indices idx[nidx] (int32 when
 * idx64 is 0, else int64); negative indices count from the end, indices outside are
 * clamped into [0, dim) (the CPU reports them: no error is possible here without a sync).
 * dim > 0. */
int amp_cuda_gather_rows(void *y, const void *x, const void *idx, int idx64, size_t es, int64_t outer, int64_t nidx,
                    int64_t inner, int64_t dim, void *stream);

/* GatherElements: y (idx's dims, rank entries) at c = x[c with c[axis] = idx[c]] for x of
 * element strides xs; indices wrap and clamp as Gather's. */
typedef struct AmpCudaGatherElements {
    int rank, axis;
    int64_t dims[8];  /* the indices' (and y's) */
    int64_t xs[8];    /* x's element strides */
    int64_t dim;      /* x's axis size, > 0 */
} AmpCudaGatherElements;
int amp_cuda_gather_elems(void *y, const void *x, const void *idx, int idx64, size_t es,
                             const AmpCudaGatherElements *g, void *stream);

/* Pad: y (odims) from x (xdims) with `before` elements added at the start of each axis
 * (negative: cropped). mode: 0 constant, 1 reflect, 2 edge, 3 wrap (the CPU's). The
 * constant is *cval (a device scalar of x's dtype) when cval is not NULL, else the first
 * es bytes of cbits. */
typedef struct AmpCudaPad {
    int rank, mode;
    int64_t odims[8], xdims[8], before[8];
} AmpCudaPad;
int amp_cuda_pad_copy(void *y, const void *x, size_t es, const AmpCudaPad *p, const void *cval, uint64_t cbits,
                 void *stream);

/* y[0..n) = the value whose es bytes are the low bytes of bits (little-endian). */
int amp_cuda_fill(void *y, size_t es, uint64_t bits, uint64_t n, void *stream);

/* Up to AMP_CUDA_SMALL_BYTES host bytes written to the device by value in a kernel's
 * arguments (Shape, Size, small Constants): no host buffer must outlive the launch. */
#define AMP_CUDA_SMALL_BYTES 1024
typedef struct AmpCudaSmall {
    uint32_t len;
    unsigned char b[AMP_CUDA_SMALL_BYTES];
} AmpCudaSmall;
int amp_cuda_put_small(void *y, const AmpCudaSmall *s, void *stream);

/* Range: y[i] = start + i * delta for i < n, start and delta device scalars of dtype
 * (float, double, float16, bfloat16 computed in double as the CPU; int32, int64 wrap). */
int amp_cuda_range_fill(void *y, int dtype, const void *start, const void *delta, uint64_t n, void *stream);

/* cudaMemcpyAsync of `bytes` host bytes (memory that outlives the run) to the device. */
int amp_cuda_upload(void *dst, const void *src, size_t bytes, void *stream);

#ifdef __cplusplus
}
#endif

/* ---- node-level kernels and their table entries (movement.c) ---------------------------- */

#ifndef __cplusplus
#include <stdbool.h>

#include "kernels/cuda/cuda_impl.h"

/* Whether a dtype moves as whole elements of 1, 2, 4 or 8 bytes. */
static inline bool amp_cuda_mv_movable(int dtype) {
    size_t b = amp_dtype_bits(dtype);
    return dtype != AMP_DT_UNDEFINED && dtype != AMP_DT_STRING && (b == 8 || b == 16 || b == 32 || b == 64);
}

/* Its bytes per element, or 0 with k->st set (amp_kernel_bad_dtype). */
static inline size_t amp_cuda_mv_esize(AmpKernelCtx *k, int dtype) {
    if (amp_cuda_mv_movable(dtype)) return amp_dtype_bits(dtype) / 8;
    amp_kernel_bad_dtype(k, dtype);
    return 0;
}

/* The index dtypes the kernels read: int32, int64. */
static inline bool amp_cuda_mv_int(int dtype) {
    return dtype == AMP_DT_INT32 || dtype == AMP_DT_INT64;
}

AmpCode amp_cuda_identity(AmpKernelCtx *k); /* Identity, Reshape, Flatten, Squeeze, Unsqueeze */
AmpCode amp_cuda_transpose(AmpKernelCtx *k);
AmpCode amp_cuda_concat(AmpKernelCtx *k);
AmpCode amp_cuda_split(AmpKernelCtx *k);
AmpCode amp_cuda_slice(AmpKernelCtx *k);
AmpCode amp_cuda_expand(AmpKernelCtx *k);
AmpCode amp_cuda_tile(AmpKernelCtx *k);
AmpCode amp_cuda_pad(AmpKernelCtx *k);
AmpCode amp_cuda_gather(AmpKernelCtx *k);
AmpCode amp_cuda_gather_elements(AmpKernelCtx *k);
AmpCode amp_cuda_shape(AmpKernelCtx *k);
AmpCode amp_cuda_size(AmpKernelCtx *k);
AmpCode amp_cuda_constant(AmpKernelCtx *k);
AmpCode amp_cuda_constant_of_shape(AmpKernelCtx *k);
AmpCode amp_cuda_range(AmpKernelCtx *k);

/* The prepares are every backend's (ops/sh_common.h, ops/pad.h, ops/slice.h). */

bool amp_cuda_supports_move(const AmpNode *n, int64_t opset, const int *in_dtypes); /* input 0 moved */
bool amp_cuda_supports_concat(const AmpNode *n, int64_t opset, const int *in_dtypes);
bool amp_cuda_supports_split(const AmpNode *n, int64_t opset, const int *in_dtypes);
bool amp_cuda_supports_slice(const AmpNode *n, int64_t opset, const int *in_dtypes);
bool amp_cuda_supports_pad(const AmpNode *n, int64_t opset, const int *in_dtypes);
bool amp_cuda_supports_gather(const AmpNode *n, int64_t opset, const int *in_dtypes);
bool amp_cuda_supports_shape(const AmpNode *n, int64_t opset, const int *in_dtypes); /* Shape, Size */
bool amp_cuda_supports_constant(const AmpNode *n, int64_t opset, const int *in_dtypes);
bool amp_cuda_supports_constant_of_shape(const AmpNode *n, int64_t opset, const int *in_dtypes);
bool amp_cuda_supports_range(const AmpNode *n, int64_t opset, const int *in_dtypes);
#endif

#endif
