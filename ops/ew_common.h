/* The elementwise family below every backend (ops/ew_common.c): the input, output and
 * broadcast-shape checks (numpy's rule, and the one-way broadcast before opset 7) and the
 * attributes of the activations, IsInf and the pre-opset-7 binary ops, parsed at prepare.
 * The CPU kernels (kernels/cpu/elementwise.c, unary.c, activation.c, logic.c) and the CUDA
 * ones (kernels/cuda/elementwise.c, grad_ops.c) check and read a node alike through these. */
#ifndef AMP_OPS_EW_COMMON_H
#define AMP_OPS_EW_COMMON_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/ir.h"
#include "ir/kernel.h"
#include "ir/tensor.h"
#include "ops/scalar_math.h" /* AmpEwParams */

/* The k->in[i] if it is there, else NULL (also for i past the node's inputs). */
const AmpBuf *amp_ew_in(const AmpKernelCtx *k, int i);
/* Fails with AMP_ERR_INPUT unless inputs 0..n-1 are all present. */
AmpCode amp_ew_need(AmpKernelCtx *k, int n);
/* Fails with AMP_ERR_INPUT unless a and b have the same dtype. */
AmpCode amp_ew_same_dtype(AmpKernelCtx *k, const AmpBuf *a, const AmpBuf *b);

/* Broadcast shape of n inputs (numpy rules); AMP_ERR_INPUT naming the shapes if not. */
AmpCode amp_ew_bcast_shape(AmpKernelCtx *k, int n, const AmpBuf *const *in, int *rank, int64_t *dims);

/* Output 0 as the executor placed it, checked to be what the kernel computes (dtype,
 * rank, dims; AMP_ERR_INTERNAL naming both if not, since the loops are bounded by the
 * inputs' shapes): *out NULL when the node does not list it (nothing to compute). */
AmpCode amp_ew_out(AmpKernelCtx *k, int dtype, int rank, const int64_t *dims, AmpBuf **out);
/* amp_ew_bcast_shape of inputs 0..n-1, then amp_ew_out of that shape in dtype. */
AmpCode amp_ew_bcast_out(AmpKernelCtx *k, int n, int dtype, int *rank, int64_t *dims, AmpBuf **out);

/* Sum, Mean, Max and Min's inputs, every backend's checks: at least one, every one present,
 * all of input 0's dtype (which dtypes a backend computes, it checks after). */
AmpCode amp_ew_variadic_inputs(AmpKernelCtx *k);
/* Where(condition, X, Y)'s checks and output, every backend's: condition bool, X and Y of
 * one dtype of *bits 8, 16, 32 or 64 (the data are only moved), the output of that dtype
 * and the broadcast shape (rank, dims); *out NULL where the node does not list it. */
AmpCode amp_ew_where_out(AmpKernelCtx *k, size_t *bits, int *rank, int64_t *dims, AmpBuf **out);

/* The broadcast walk every backend plans: n_in inputs (at most AMP_EW_MERGE_MAX_IN, each
 * broadcastable to the output shape rank/dims) over the output with its axes of size 1
 * dropped and neighbouring axes merged wherever every input stays contiguous (or stays
 * broadcast) across them, so same-shape inputs become one axis and [3,4,5] + [5] becomes
 * [12, 5]. Writes the merged dims and each input's element strides along them (0 on
 * broadcast axes); returns the merged rank, at least 1 (a scalar output: one axis of 1). */
#define AMP_EW_MERGE_MAX_IN 8
int amp_ew_merge_axes(int rank, const int64_t *dims, int n_in, const AmpBuf *const *in, int64_t *merged_dims,
                      int64_t (*strides)[AMP_MAX_RANK]);

/* Before opset 7, binary ops broadcast B onto A (one way: the result has A's shape) only
 * with broadcast=1, at `axis` when given, else at A's last dims; without it the inputs
 * have one shape. amp_ew_prepare_legacy_bcast keeps that in this struct for
 * nodes of those opsets and leaves attrs NULL from opset 7 (numpy's rule). The axis is
 * normalised against A's rank when the kernel runs. */
typedef struct AmpEwLegacyBcast {
    int64_t axis;
    bool has_axis, broadcast;
} AmpEwLegacyBcast;
/* Returns in *view the B to use with numpy rules (b itself, or b's data with its dims
 * padded by trailing 1s so they line up at the axis); before opset 7, B that does not
 * fit A by the legacy rule is an input error (the shape function gives A's shape). */
AmpCode amp_ew_legacy_bcast(AmpKernelCtx *k, const AmpBuf *a, const AmpBuf *b, AmpBuf *view);

/* Its prepare function (AmpKernelPrepareFn) for Add, Sub, Mul, Div, Pow, the comparisons,
 * And and Or on every backend. */
AmpCode amp_ew_prepare_legacy_bcast(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);

/* PRelu's slope as it broadcasts to X (never the other way: the output has X's shape):
 * *slope is input 1, before opset 7 a slope of one value per channel ([C] with C = X's
 * axis 1, PyTorch's PReLU exports) lined up with axis 1 as (C, 1, ..., 1). AMP_ERR_INPUT
 * where it does not broadcast to X's shape. */
AmpCode amp_ew_prelu_slope(AmpKernelCtx *k, const AmpBuf *x, AmpBuf *slope);

/* com.microsoft BiasGeluGrad_dX's geometry (ops/geom.h): dY, X and B present, dY of X's
 * dtype and shape, B of X's dtype, 1-D over X's last axis (AMP_ERR_INPUT if not); dX, where
 * listed, of X's dtype and shape. n: X's elements, h: B's (the bias repeats every h). Its
 * AmpKernelGeomFn, on every backend; the dtypes each backend takes stay its kernel's check. */
typedef struct AmpBiasGeluGradGeom {
    uint64_t n, h;
} AmpBiasGeluGradGeom;
AmpCode amp_bias_gelu_grad_geom(AmpKernelCtx *k, void *geom, bool *made);

/* ai.ampc SubScaled's geometry (ops/geom.h; Y = A - S * B, runtime/fuse_update.c): A, S and
 * B present, S of one element, B of A's shape (AMP_ERR_INPUT if not); Y, where listed,
 * float32 of A's shape. n: A's elements. Its AmpKernelGeomFn; the kernel checks the dtypes. */
typedef struct AmpSubScaledGeom {
    uint64_t n;
} AmpSubScaledGeom;
AmpCode amp_sub_scaled_geom(AmpKernelCtx *k, void *geom, bool *made);

/* ai.ampc AllReduceMean (kernels/cpu/comm.c): X[N] -> Y[N], each X present and float32,
 * float16 or bfloat16 (an internal error / unsupported if not), each Y, where placed, X's
 * type and shape. total: the inputs' elements. Its AmpKernelGeomFn. */
typedef struct AmpAllReduceGeom {
    uint64_t total;
} AmpAllReduceGeom;
AmpCode amp_allreduce_geom(AmpKernelCtx *k, void *geom, bool *made);

/* How every backend's AllReduceMean splits its gradients (kernels/cpu/comm.c,
 * kernels/cuda/allreduce.c): float32 gradients the arena holds end to end with their means
 * planned over them (runtime/exec_plan.c) are reduced where they lie, one collective per
 * run of at least AMP_ALLREDUCE_RUN_MIN bytes; the rest are packed into one buffer. Below
 * that size a collective's fixed cost (a few microseconds of messages) is not worth paying
 * for a run of its own. */
enum { AMP_ALLREDUCE_RUN_MIN = 64 * 1024 };
/* What every backend's AllReduceMean does after its geometry (amp_allreduce_geom):
 * *out[j] <- output j as placed (each must be wanted), and *packed made for
 * amp_allreduce_runs (both n_in entries, malloc'd or NULL: free them, also on failure). */
AmpCode amp_allreduce_begin(AmpKernelCtx *k, AmpBuf ***out, bool **packed);
/* Walks the gradients so (out[j]: output j as placed): reduce(k, f, n, arg) for each run in
 * place (f: its first gradient's data, n: its elements); packed[j] set for every other
 * gradient, their elements in *total. Stops at reduce's first error and returns it. */
typedef AmpCode (*AmpAllReduceRunFn)(AmpKernelCtx *k, float *f, size_t n, void *arg);
AmpCode amp_allreduce_runs(AmpKernelCtx *k, AmpBuf *const *out, bool *packed, size_t *total, AmpAllReduceRunFn reduce,
                           void *arg);

/* The dtype classes the kernels check their inputs against. */
bool amp_ew_is_int(int dtype);      /* int8..int64, uint8..uint64 */
bool amp_ew_is_float(int dtype);    /* float32, float16, bfloat16, double */
bool amp_ew_is_unsigned(int dtype); /* uint8..uint64 */

/* The activations' parameters are AmpEwParams (ops/scalar_math.h: alpha, beta, gamma as
 * the ONNX attributes; mode: Gelu approximation, IsInf directions). */
/* *attrs = a malloc'd copy of p (the activations' prepare functions). */
AmpCode amp_ew_params_out(AmpEwParams p, void **attrs, AmpStatus *st);
/* The prepare functions (AmpKernelPrepareFn) of the activations, every backend's (named
 * by ops/unary.def): LeakyRelu, Elu, Celu, ThresholdedRelu (alpha), Selu, HardSigmoid,
 * Shrink (lambd, bias as alpha, beta), Gelu and com.microsoft GeluGrad, BiasGelu
 * (approximate). */
AmpCode amp_ew_prepare_alpha(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_ew_prepare_selu(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_ew_prepare_hard_sigmoid(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_ew_prepare_shrink(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_ew_prepare_gelu(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);

/* IsInf's directions, in AmpEwParams.mode, as its prepare function sets them. */
enum { AMP_EW_INF_POS = 1, AMP_EW_INF_NEG = 2 };
AmpCode amp_ew_prepare_isinf(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);

/* Clip's float bounds before any bound input is read: the min and max attributes before
 * opset 11 (float's limits when absent), unbounded after (the bounds are inputs then). */
typedef struct AmpClipAttrs {
    double lo, hi;
} AmpClipAttrs;
AmpCode amp_ew_prepare_clip(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
/* Clip's bound input i (1 min, 2 max; opset 11+) in *out: NULL when absent, else checked
 * to be one element of x's type (its value read where the backend's memory is). */
AmpCode amp_ew_clip_bound(AmpKernelCtx *k, int i, const AmpBuf *x, const AmpBuf **out);

#endif
