/* The attributes of the reductions below every backend (ops/reduce_attrs.c): the Reduce*
 * ops' keepdims, noop_with_empty_axes and axes (attribute, or the input of the later
 * opsets, read at prepare where the model fixes it), their checks and reduced-axes mask,
 * and ArgMax / ArgMin's. The CPU kernels (kernels/cpu/reduce.c) and the CUDA ones
 * (kernels/cuda/reduce.c) take these prepare functions and read a node alike. */
#ifndef AMP_OPS_REDUCE_ATTRS_H
#define AMP_OPS_REDUCE_ATTRS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"
#include "ir/kernel.h"
#include "ir/tensor.h"

/* Reduce* (amp_reduce_prepare). axes: the attribute form (before ReduceSum-13 and the
 * others' opset 18), as written, or with `fixed` the axes input's values as the model fixes
 * them; n_axes counts them all, only the first AMP_MAX_RANK are kept (more than the rank
 * is an error once the rank is known). */
typedef struct AmpReduceAttrs {
    bool keep, noop;
    bool from_input; /* the opset takes axes as input 1 (an unknown opset: where given) */
    bool fixed;      /* axes[0..n_axes) are input 1's values, read at prepare (amp_reduce_fixed_axes):
                        a backend whose input lives elsewhere (CUDA) need not read it back */
    size_t n_axes;
    int64_t axes[AMP_MAX_RANK];
} AmpReduceAttrs;
AmpCode amp_reduce_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);

/* The elements of n's axes input (input 1) when the model fixes them: a Constant node's
 * `value` (or `value_ints`), or an initializer that is no graph input (no feed replaces it)
 * and no training update rebinds; int32 / int64, at most 1-D, at most max elements. The
 * count, or -1 when only the run knows them. */
int amp_reduce_fixed_axes(const AmpNode *n, int64_t *axes, int max);

/* The axes input the kernel reads (NULL: none, or an opset that takes no axes input),
 * checked: an integer tensor, at most 1-D, of at most rank values. */
AmpCode amp_reduce_axes_input(AmpKernelCtx *k, const AmpReduceAttrs *a, int rank, const AmpBuf **ax);
/* mask[d] for d < rank: whether axis d is reduced, from the n values of the axes input
 * (in_axes; NULL where there is none: the attribute's axes). No axes reduce everything,
 * or nothing with noop_with_empty_axes (then each output is its one element, transformed:
 * ReduceSumSquare squares, and so on). AMP_ERR_INPUT for an axis out of range or listed
 * twice, or more attribute axes than the rank. */
AmpCode amp_reduce_mask(AmpKernelCtx *k, const AmpReduceAttrs *a, int rank, const int64_t *in_axes, size_t n,
                        bool *mask);

/* Reduce*'s geometry (ops/geom.h): per axis of X whether it is reduced, Y's element
 * strides per axis of X (0 along reduced axes: the output element each input element adds
 * into), and how many elements each output reduces. */
typedef struct AmpReduceGeom {
    bool mask[AMP_MAX_RANK];
    int64_t ostr[AMP_MAX_RANK];
    uint64_t n_red;
} AmpReduceGeom;
/* The geometry from the reduced axes: the axes input's n values (in_axes), or the
 * attribute's where in_axes is NULL (amp_reduce_mask); checks the output placed. */
AmpCode amp_reduce_geom_axes(AmpKernelCtx *k, const int64_t *in_axes, size_t n, AmpReduceGeom *g);
/* Reduce*'s AmpKernelGeomFn: made from the attribute, or from the axes input where the
 * model fixes it (or it is empty); *made false where only the run knows its values. */
AmpCode amp_reduce_geom(AmpKernelCtx *k, void *geom, bool *made);

/* ArgMax / ArgMin (amp_arg_prepare); axis as written (normalised against the input's rank). */
typedef struct AmpArgAttrs {
    int64_t axis;
    bool keep, last;
} AmpArgAttrs;
AmpCode amp_arg_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
/* Their geometry: the axis normalised, and X as (outer, d, inner) rows along it; Y's
 * element (o, i) is at o * inner + i. */
typedef struct AmpArgGeom {
    int axis;
    uint64_t outer, d, inner;
} AmpArgGeom;
/* ArgMax / ArgMin's AmpKernelGeomFn: AMP_ERR_INPUT for an axis out of range or empty. */
AmpCode amp_arg_geom(AmpKernelCtx *k, void *geom, bool *made);

/* CumSum's geometry: x and the axis input present, the axis one integer (a 0-D or
 * 1-element tensor; AMP_ERR_INPUT if not), y, where listed, of x's dtype and shape. n: x's
 * elements. The axis is a value, read per run. Its AmpKernelGeomFn. */
typedef struct AmpCumSumGeom {
    uint64_t n;
} AmpCumSumGeom;
AmpCode amp_cumsum_geom(AmpKernelCtx *k, void *geom, bool *made);

/* TopK's outputs for K, a value of the run (input 1 since opset 10) that the kernel has
 * checked against x's axis `axis`: *vals (x's dtype) and *idxs (int64), each x's shape with
 * K along the axis, or NULL where the node does not list it; placed by the executor and
 * checked here, the one place their shape is computed. */
AmpCode amp_topk_out(AmpKernelCtx *k, const AmpBuf *x, int axis, int64_t K, AmpBuf **vals, AmpBuf **idxs);

#endif
