/* Slice, below every backend (ops/slice.c): Slice-1's attributes parsed at prepare, and the
 * prepared geometry (per axis the first element, count and step, clamped once by
 * amp_slice_range, ir/tensor.h; the strided view of X they make) that the CPU kernel
 * (kernels/cpu/slice.c) and the CUDA kernel (kernels/cuda/movement.c) copy by. Each backend
 * reads the starts / ends / axes / steps inputs from its own memory and hands the values
 * here. */
#ifndef AMP_OPS_SLICE_H
#define AMP_OPS_SLICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"
#include "ir/kernel.h"
#include "ir/tensor.h"

/* An int list attribute as given: its length n, and its first AMP_MAX_RANK values (a
 * longer list fits no input; the kernel says so). */
typedef struct AmpSliceInts {
    size_t n;
    int64_t v[AMP_MAX_RANK];
} AmpSliceInts;

/* Slice-1 (before opset 10): the starts, ends and axes attributes (all n 0 from opset 10,
 * where they are inputs). */
typedef struct AmpSliceAttrs {
    AmpSliceInts starts, ends, axes;
} AmpSliceAttrs;

/* Axis `axis` of a rank-r input listed once more (Slice's and Pad's axes): normalised into
 * *a, marked in seen[]; AMP_ERR_INPUT where it is out of range or already seen. */
AmpCode amp_axis_once(AmpKernelCtx *k, int64_t axis, int r, bool *seen, int *a);

/* Slice's prepare function (AmpKernelPrepareFn) on every backend. */
AmpCode amp_slice_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);

/* The bounds of Slice-1 from the attributes into starts, ends, axes (r values at the most,
 * else AMP_ERR_INPUT), with their counts. */
AmpCode amp_slice_attr_bounds(AmpKernelCtx *k, const AmpSliceAttrs *a, int r, int64_t *starts, size_t *ns,
                              int64_t *ends, size_t *ne, int64_t *axes, size_t *na);

/* What Slice takes from X (rank r): per axis the first element, the count (the output's
 * dims) and the step; and X viewed so: element strides (contiguous strides times the step)
 * and the offset of the first element. */
typedef struct AmpSliceGeom {
    int rank;
    int64_t first[AMP_MAX_RANK], count[AMP_MAX_RANK], step[AMP_MAX_RANK];
    int64_t strides[AMP_MAX_RANK], offset;
} AmpSliceGeom;

/* The geometry of a Slice of X (x_dims, rank r) from its bounds: ns starts, ne ends, na axes
 * (has_axes: an axes input was given, so na must be ns), nst steps (has_steps likewise);
 * na 0: axes 0..ns-1, nst 0: steps 1 (axes and steps are filled in so). AMP_ERR_INPUT where the lengths differ, an axis is out of range
 * or repeated, or a step is 0. */
AmpCode amp_slice_geom(AmpKernelCtx *k, int r, const int64_t *x_dims, const int64_t *starts, size_t ns,
                       const int64_t *ends, size_t ne, int64_t *axes, size_t na, bool has_axes, int64_t *steps,
                       size_t nst, bool has_steps, AmpSliceGeom *g);

#endif
