/* Private to the CPU's data-movement kernels (shape.c, slice.c, gather.c, resize.c,
 * tensor.c): the helpers they share beyond what every backend's share
 * (ops/sh_common.h, ops/cast_engine.h). These ops move bytes, so they work on any dtype
 * with a whole number of bytes. */
#ifndef AMP_CPU_SHAPE_IMPL_H
#define AMP_CPU_SHAPE_IMPL_H

#include "kernels/cpu/kernels.h"
#include "ops/cast_engine.h" /* amp_sh_convert */
#include "ops/sh_common.h"   /* the helpers and attributes every backend shares */

/* Strided views in the helpers below may have up to twice the executor's rank (Tile
 * views a rank-r tensor as (repeat, dim) pairs). */
#define AMP_SH_MAX_VIEW (2 * AMP_MAX_RANK)

/* *out = a * b for non-negative a, b; false when the product passes 2^62. */
static inline bool amp_sh_mul(int64_t a, int64_t b, int64_t *out) {
    if (a < 0 || b < 0 || (b != 0 && a > (INT64_C(1) << 62) / b)) return false;
    *out = a * b;
    return true;
}

/* dst (dense, shape dims) = src viewed at element offset `offset` with element strides
 * `strides` (any sign, 0 for broadcast). rank <= AMP_SH_MAX_VIEW. */
void amp_sh_strided_copy(void *dst, const void *src, size_t es, int rank, const int64_t *dims,
                         const int64_t *strides, int64_t offset);

#endif
