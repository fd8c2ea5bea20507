/* Private to the data-movement kernels (shape.c, slice.c, gather.c, resize.c, tensor.c):
 * the helpers they share. These ops move bytes, so they work on any dtype with a whole
 * number of bytes. */
#ifndef AMP_CPU_SHAPE_IMPL_H
#define AMP_CPU_SHAPE_IMPL_H

#include "kernels/cpu/kernels.h"

/* Strided views in the helpers below may have up to twice the executor's rank (Tile
 * views a rank-r tensor as (repeat, dim) pairs). */
#define AMP_SH_MAX_VIEW (2 * AMP_MAX_RANK)

/* AMP_ERR_* failure whose message names the node and op. */

/* Bytes per element of a dtype these kernels move, or 0 (with st set to
 * AMP_ERR_UNSUPPORTED) for strings, sub-byte and unknown types. */
size_t amp_sh_esize(AmpKernelCtx *k, int dtype);

/* Output 0 as the executor placed it (amp_kernel_outputs), checked to have the dtype and
 * shape the kernel's loops assume: AMP_ERR_INTERNAL naming both where it differs. *y is
 * NULL (and AMP_OK) when the node does not list output 0. */
AmpCode amp_sh_out(AmpKernelCtx *k, int dtype, int rank, const int64_t *dims, AmpBuf **y);
/* Output 0 for a kernel that copies bytes whatever the shape (Identity, Flatten, Squeeze,
 * Unsqueeze): the shape is the shape function's; only dtype and element count must agree. */
AmpCode amp_sh_out_count(AmpKernelCtx *k, int dtype, uint64_t nelem, AmpBuf **y);

/* Reads an integer tensor (scalar or 1-D) of at most `max` elements into out[]. */
AmpCode amp_sh_ints(AmpKernelCtx *k, const AmpBuf *b, const char *what, int64_t *out, size_t max, size_t *n);

/* *out = a * b for non-negative a, b; false when the product passes 2^62. */
static inline bool amp_sh_mul(int64_t a, int64_t b, int64_t *out) {
    if (a < 0 || b < 0 || (b != 0 && a > (INT64_C(1) << 62) / b)) return false;
    *out = a * b;
    return true;
}

/* Row-major element strides of a shape. */
void amp_sh_strides(int rank, const int64_t *dims, int64_t *strides);

/* dst (dense, shape dims) = src viewed at element offset `offset` with element strides
 * `strides` (any sign, 0 for broadcast). rank <= AMP_SH_MAX_VIEW. */
void amp_sh_strided_copy(void *dst, const void *src, size_t es, int rank, const int64_t *dims,
                         const int64_t *strides, int64_t offset);

/* Cast engine (tensor.c): n elements of dtype sdt at src to dtype ddt at dst. Integer
 * targets truncate floats toward zero (NaN -> 0, saturating out of range); 16-bit float
 * targets round to nearest even. AMP_ERR_UNSUPPORTED for types it does not convert. */
AmpCode amp_sh_convert(AmpKernelCtx *k, const void *src, int sdt, void *dst, int ddt, uint64_t n);
/* Whether amp_sh_convert takes the dtype. */
bool amp_sh_convertible(int dtype);

/* ---- attributes parsed at prepare, read by the CPU and CUDA kernels alike ---------- */

/* Transpose: perm as given (n entries, a permutation of 0..n-1), or none (n 0): reversed. */
typedef struct TransposeAttrs {
    size_t n;
    int64_t perm[AMP_MAX_RANK];
} TransposeAttrs;

/* An axis, raw (normalised against the input's rank in the kernel): Concat's (also
 * ConcatTraining's), Gather's and GatherElements' (also GatherGrad's). */
/* GatherGrad's checks (gather.c; the CUDA kernel's too): *axis normalised for dX's rank,
 * dY of dX's dtype and of the shape Gather gives for dX and the indices. */
AmpCode amp_gather_grad_check(AmpKernelCtx *k, const AmpBuf *idx, const AmpBuf *dy, const AmpBuf *dx, int *axis);

typedef struct AxisAttrs {
    int64_t axis;
} AxisAttrs;

/* OneHot's axis, raw (normalised against the output's rank): tensor.c's prepare. */
typedef struct OneHotAttrs {
    int64_t axis;
} OneHotAttrs;

/* ScatterND's reduction (amp_sh_scatter_nd_prepare, gather.c); read by the CUDA kernel. */
enum { AMP_SCATTER_NONE, AMP_SCATTER_ADD, AMP_SCATTER_MUL, AMP_SCATTER_MAX, AMP_SCATTER_MIN };
typedef struct ScatterAttrs {
    int op; /* AMP_SCATTER_* */
} ScatterAttrs;

#endif
