/* The data-movement family below every backend (ops/sh_common.c): element sizes, the
 * checks of the placed output, small integer inputs, row-major strides, and the attributes
 * of Transpose, Concat, Split, Gather, GatherElements, GatherGrad, OneHot, ScatterND,
 * Shape, Constant and ConstantOfShape parsed at prepare, with Split's sizes, Shape's range
 * and Constant's value. The CPU kernels (kernels/cpu/shape.c, gather.c, resize.c,
 * tensor.c) and the CUDA ones (kernels/cuda/movement*.c, grad_ops_index.c, resize.c) check
 * and read a node alike through these. */
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

/* Output 0 where the executor sized it from input values a backend does not read (they
 * stay on its device: ConstantOfShape's shape, Range's scalars, Expand's and Tile's
 * targets): checked to have `dtype` and, unless rank is -1, rank `rank`; AMP_ERR_INTERNAL
 * naming what was placed where not. *y is NULL (and AMP_OK) when the node does not list it. */
AmpCode amp_sh_out_placed(AmpKernelCtx *k, int dtype, int rank, AmpBuf **y);

/* Expand's output, on every backend: x broadcast to `shape` (its n values, which the
 * backend read; AMP_ERR_INPUT where x does not broadcast to it), or, with shape NULL (the
 * values stay on the device), to the placed output's dims, which x must broadcast to
 * unchanged (AMP_ERR_INTERNAL if not). Gives the output's rank *r and dims, x's element
 * strides over them (0 along broadcast axes), and *y placed and checked (NULL where the
 * node does not list it). */
AmpCode amp_expand_out(AmpKernelCtx *k, const AmpBuf *x, const int64_t *shape, int n, int *r, int64_t *dims,
                       int64_t *strides, AmpBuf **y);

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
/* Transpose's geometry (ops/geom.h): the output's dims (rank: x's) and, per output axis,
 * x's element strides along it; Y of x's dtype and those dims. Its AmpKernelGeomFn:
 * AMP_ERR_INPUT for x missing or a perm of another length than x's rank. */
typedef struct AmpTransposeGeom {
    int rank;
    int64_t dims[AMP_MAX_RANK], strides[AMP_MAX_RANK];
} AmpTransposeGeom;
AmpCode amp_transpose_geom(AmpKernelCtx *k, void *geom, bool *made);

/* An axis, raw (normalised against the input's rank in the kernel): Concat's (also
 * ConcatTraining's), Gather's and GatherElements' (also GatherGrad's). */
typedef struct AxisAttrs {
    int64_t axis;
} AxisAttrs;
AmpCode amp_concat_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
/* Concat's geometry (also ConcatTraining's): the axis (AxisAttrs in k->attrs, normalised
 * against input 0's rank), the output's dims, and y's rows as (outer, dims[axis] * inner);
 * Y of input 0's dtype and rank, ConcatTraining's lengths int64 of one per input. Its
 * AmpKernelGeomFn: AMP_ERR_INPUT for no inputs, one missing, an axis out of range, an input
 * not of input 0's dtype and rank or not alike off the axis, or sizes along it that
 * overflow int64. */
typedef struct AmpConcatGeom {
    int axis;
    int64_t dims[AMP_MAX_RANK];
    int64_t outer, inner;
} AmpConcatGeom;
AmpCode amp_concat_geom(AmpKernelCtx *k, void *geom, bool *made);
AmpCode amp_sh_gather_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);

/* Gather's output shape (both backends' kernels): *axis (AxisAttrs in k->attrs) normalised
 * for x's rank, and y (x[:axis], indices, x[axis+1:]): *rank, dims. AMP_ERR_INPUT for an
 * axis out of range, AMP_ERR_UNSUPPORTED for a rank over AMP_MAX_RANK. */
AmpCode amp_gather_shape(AmpKernelCtx *k, const AmpBuf *x, const AmpBuf *idx, int *axis, int *rank, int64_t *dims);

/* GatherGrad's checks (both backends' kernels): *axis normalised for dX's rank, dY of dX's
 * dtype and of the shape Gather gives for dX and the indices. */
AmpCode amp_gather_grad_check(AmpKernelCtx *k, const AmpBuf *idx, const AmpBuf *dy, const AmpBuf *dx, int *axis);

/* GatherElements' checks (both backends' kernels): *axis (AxisAttrs in k->attrs)
 * normalised for x's rank, the indices of x's rank and no larger than x off the axis. */
AmpCode amp_gather_elements_check(AmpKernelCtx *k, const AmpBuf *x, const AmpBuf *idx, int *axis);

/* ScatterND's shape checks (both backends' kernels): data and indices of rank >= 1, index
 * tuples of length *m (1..rank), updates shaped (indices[:q-1], data[m:]). */
AmpCode amp_scatter_nd_check(AmpKernelCtx *k, const AmpBuf *x, const AmpBuf *idx, const AmpBuf *u, int64_t *m);

/* Split: the axis (raw), and the part sizes of the split attribute (before opset 13) where
 * the node gives them and no split input. */
typedef struct AmpSplitAttrs {
    int64_t axis;
    bool has_split; /* the attribute's sizes are the split */
    size_t n;       /* entries of split[] (the node's outputs) */
    int64_t split[];
} AmpSplitAttrs;
AmpCode amp_split_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
/* The sizes of the no parts an axis of dim splits into: the split input's values where the
 * node has one (given: sizes[0..n) hold them, as the backend read them), else the
 * attribute's, else equal parts (from opset 18 ceil-sized, the last smaller); checked to
 * be no non-negative sizes that sum to dim (AMP_ERR_INPUT). */
AmpCode amp_split_sizes(AmpKernelCtx *k, const AmpSplitAttrs *a, int64_t dim, int no, bool given, size_t n,
                        int64_t *sizes);
/* Split's geometry (ops/geom.h): the axis (a->axis) normalised for x's rank, x as
 * (outer, dim, inner) along it; and where the sizes need no input's values (no split
 * input) and the outputs fit the table (at most AMP_SPLIT_GEOM_MAX: the geometry is of
 * one size per op), sized: the parts' sizes, each listed output checked to have x's dtype
 * and dims with sizes[i] on the axis. Otherwise the kernel reads the split input, sizes
 * the parts and checks the outputs per run (amp_split_parts). Its AmpKernelGeomFn:
 * AMP_ERR_INPUT for x missing, an axis out of range, no outputs or sizes amp_split_sizes
 * refuses. */
#define AMP_SPLIT_GEOM_MAX 64
typedef struct AmpSplitGeom {
    int axis;
    int64_t outer, dim, inner;
    bool sized;
    int64_t sizes[AMP_SPLIT_GEOM_MAX];
} AmpSplitGeom;
AmpCode amp_split_geom(AmpKernelCtx *k, void *geom, bool *made);
/* *sizes and *outs malloc'd with an entry per output, sizes[] the geometry's where it is
 * sized (the caller frees both; NULL, with AMP_ERR_INTERNAL, when out of memory). */
AmpCode amp_split_start(AmpKernelCtx *k, const AmpSplitGeom *g, int64_t **sizes, AmpBuf ***outs);
/* Moves part i of a split into y: the (outer, w) block whose rows start `row` elements
 * apart in x, from element off of x; w is 0 for an empty part. */
typedef AmpCode (*AmpSplitCopyFn)(AmpKernelCtx *k, AmpBuf *y, const AmpBuf *x, size_t es, int64_t outer, int64_t w,
                                  int64_t row, int64_t off);
/* Split's output loop, every backend's: where the geometry is not sized, each listed
 * output i is checked to have x's dtype and dims with sizes[i] on the axis
 * (amp_kernel_check_out); then copy() moves its part (k->n_out parts, in order). */
AmpCode amp_split_parts(AmpKernelCtx *k, const AmpBuf *x, const AmpSplitGeom *g, size_t es, const int64_t *sizes,
                        AmpBuf **outs, AmpSplitCopyFn copy);

/* Shape's start and end (opset 15), raw (amp_shape_prepare); amp_shape_range clamps them
 * against the rank into the first dim and the count of dims Shape gives. */
typedef struct AmpShapeAttrs {
    int64_t start, end;
    bool has_end;
} AmpShapeAttrs;
AmpCode amp_shape_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
void amp_shape_range(const AmpShapeAttrs *a, int rank, int64_t *start, int64_t *count);

/* Constant: which of its value attributes it has (an index of amp_constant_names), that
 * attribute (the node's, alive as long as the model), and for 'value' its element bytes,
 * decoded once at prepare: a tensor held in typed fields (float_data, ...) is laid out in
 * the model's arena then, not on every run. */
extern const char *const amp_constant_names[8];
typedef struct AmpConstantAttrs {
    int which;
    const AmpAttr *a;
    AmpBytes bytes; /* 'value': its elements (the model's memory) */
} AmpConstantAttrs;
AmpCode amp_constant_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
/* What the node's output is: its dtype, rank and dims, and the bytes it holds (host memory
 * that outlives the run; *len of them). AMP_ERR_INPUT / AMP_ERR_UNSUPPORTED for a value
 * the kernels do not make (strings, sparse). */
AmpCode amp_constant_value(AmpKernelCtx *k, const AmpConstantAttrs *c, int *dtype, int *rank, int64_t *dims,
                           const void **bytes);
/* Constant's output (k->attrs: AmpConstantAttrs) as placed and checked (amp_sh_out) with
 * the bytes it gets; *y NULL (AMP_OK) when the node does not list it. */
AmpCode amp_constant_out(AmpKernelCtx *k, AmpBuf **y, const void **bytes);

/* ConstantOfShape: the fill value's dtype and bytes (float 0 by default). */
typedef struct AmpFillAttrs {
    int dtype;
    uint8_t value[16];
} AmpFillAttrs;
AmpCode amp_constant_of_shape_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);

/* OneHot's axis, raw (normalised against the output's rank). */
typedef struct OneHotAttrs {
    int64_t axis;
} OneHotAttrs;
AmpCode amp_one_hot_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
/* OneHot's output, on every backend: indices' shape with *depth inserted at the axis
 * (normalised into *axis; AMP_ERR_INPUT out of range, AMP_ERR_UNSUPPORTED past
 * AMP_MAX_RANK), of `dtype` (the values'); *depth as the backend read it from the depth
 * input, or, where it is -1 (the value stays on the device), the placed output's
 * (AMP_ERR_INPUT under 1). *y placed and checked, NULL where the node does not list it. */
AmpCode amp_one_hot_out(AmpKernelCtx *k, const AmpBuf *idx, int dtype, int64_t *depth, int *axis, AmpBuf **y);

/* ScatterND's reduction. */
enum { AMP_SCATTER_NONE, AMP_SCATTER_ADD, AMP_SCATTER_MUL, AMP_SCATTER_MAX, AMP_SCATTER_MIN };
typedef struct ScatterAttrs {
    int op; /* AMP_SCATTER_* */
} ScatterAttrs;
AmpCode amp_sh_scatter_nd_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);

#endif
