/* The data-movement family below every backend (ops/sh_common.c): element sizes, the
 * checks of the placed output, small integer inputs, row-major strides, and the attributes
 * of Transpose, Concat, Gather, GatherElements, GatherGrad, OneHot and ScatterND parsed
 * at prepare. The CPU kernels (kernels/cpu/shape.c, gather.c, resize.c, tensor.c) and
 * the CUDA ones (kernels/cuda/movement*.c, grad_ops_index.c, resize.c) check and read a
 * node alike through these. */
#ifndef AMP_OPS_SH_COMMON_H
#define AMP_OPS_SH_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"
#include "ir/kernel.h"
#include "ir/tensor.h"

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

/* Row-major element strides of a shape. */
void amp_sh_strides(int rank, const int64_t *dims, int64_t *strides);

/* ---- attributes parsed at prepare ------------------------------------------------- */

/* Transpose: perm as given (n entries, a permutation of 0..n-1), or none (n 0): reversed. */
typedef struct TransposeAttrs {
    size_t n;
    int64_t perm[AMP_MAX_RANK];
} TransposeAttrs;
AmpCode amp_transpose_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);

/* An axis, raw (normalised against the input's rank in the kernel): Concat's (also
 * ConcatTraining's), Gather's and GatherElements' (also GatherGrad's). */
typedef struct AxisAttrs {
    int64_t axis;
} AxisAttrs;
AmpCode amp_concat_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_sh_gather_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);

/* GatherGrad's checks (both backends' kernels): *axis normalised for dX's rank, dY of dX's
 * dtype and of the shape Gather gives for dX and the indices. */
AmpCode amp_gather_grad_check(AmpKernelCtx *k, const AmpBuf *idx, const AmpBuf *dy, const AmpBuf *dx, int *axis);

/* OneHot's axis, raw (normalised against the output's rank). */
typedef struct OneHotAttrs {
    int64_t axis;
} OneHotAttrs;
AmpCode amp_one_hot_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);

/* ScatterND's reduction. */
enum { AMP_SCATTER_NONE, AMP_SCATTER_ADD, AMP_SCATTER_MUL, AMP_SCATTER_MAX, AMP_SCATTER_MIN };
typedef struct ScatterAttrs {
    int op; /* AMP_SCATTER_* */
} ScatterAttrs;
AmpCode amp_sh_scatter_nd_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);

#endif
