/* The window geometry of the conv family (ops/conv_geom.c), below every backend: Conv,
 * ConvTranspose, MaxPool and AveragePool parse their attributes once at prepare
 * (amp_conv_prepare: AmpConvAttrs), com.microsoft ConvGrad its group
 * (amp_conv_grad_prepare); amp_conv_geom_attrs / amp_convtranspose_geom (through the
 * geometry functions amp_conv_node_geom and amp_pool_geom, once per input shapes) and
 * amp_conv_grad_check (per run) turn them and the input shapes into an AmpConvGeom
 * (strides, dilations, pads with auto_pad applied, output sizes), checked, that
 * the CPU kernels (kernels/cpu/conv.c, pool.c, ms_train.c) and the CUDA kernels
 * (kernels/cuda/conv.c, conv_transpose.c, conv_grad.c, grad_ops_pool.c) compute with alike.
 * Errors are the kernel's (amp_kernel_fail: "node 'NAME' (Op): ..."). */
#ifndef AMP_OPS_CONV_GEOM_H
#define AMP_OPS_CONV_GEOM_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/ir.h"
#include "ir/kernel.h"
#include "ir/tensor.h"

#define AMP_MAX_SPATIAL (AMP_MAX_RANK - 2)

/* A window (kernel or pooling window) sliding over the spatial dims of X (N, C, D1..Dn):
 * output position o reads input positions o*stride - pad0 + j*dil, j in [0, kern). */
typedef struct AmpConvGeom {
    int nsp; /* spatial dims n */
    int64_t in[AMP_MAX_SPATIAL], kern[AMP_MAX_SPATIAL], stride[AMP_MAX_SPATIAL], dil[AMP_MAX_SPATIAL];
    int64_t pad0[AMP_MAX_SPATIAL], pad1[AMP_MAX_SPATIAL]; /* pads at the start and end */
    int64_t out[AMP_MAX_SPATIAL];
} AmpConvGeom;

/* ---- attributes, parsed once at prepare (Conv, ConvTranspose, MaxPool, AveragePool) */

/* An INTS attribute whose length must match the input's rank, checked when the kernel
 * runs: n entries (0: absent or empty, the default applies; -1: not a list of integers),
 * the first 2 * AMP_MAX_SPATIAL kept (a longer list fits no rank). Prepare checked every
 * value against the attribute's minimum and INT32_MAX, so window arithmetic cannot
 * overflow. */
typedef struct AmpConvInts {
    int n;
    int64_t v[2 * AMP_MAX_SPATIAL];
} AmpConvInts;

typedef struct AmpConvAttrs {
    int auto_pad; /* 0 NOTSET, 1 VALID, 2 SAME_UPPER, 3 SAME_LOWER */
    int64_t group;
    AmpConvInts kernel_shape, strides, dilations, pads;
    AmpConvInts output_padding; /* ConvTranspose */
    /* ConvTranspose's output_shape as given (n 0 when absent; spatial sizes, or a whole
     * (N, C, ...) shape: which, the rank tells); its values are checked in the kernel. */
    AmpConvInts output_shape;
    bool ceil_mode, count_include_pad, col_major; /* pools; col_major: storage_order 1 */
} AmpConvAttrs;

/* The prepare function (AmpKernelPrepareFn) of Conv, ConvTranspose, MaxPool and
 * AveragePool on every backend: the attributes each reads, into an AmpConvAttrs. */
AmpCode amp_conv_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);

/* amp_conv_geom from parsed attributes (a->ceil_mode rounds output sizes up). */
AmpCode amp_conv_geom_attrs(AmpKernelCtx *k, const AmpConvAttrs *a, const AmpBuf *x, const int64_t *kern,
                            AmpConvGeom *g);
/* An attribute's n entries into out, or dflt for each where it was absent; AMP_ERR_INPUT
 * when it has another length. */
AmpCode amp_conv_ints_of(AmpKernelCtx *k, const AmpConvInts *a, const char *name, int n, int64_t dflt,
                         int64_t *out);

/* The kernel's spatial sizes: W's dims from axis 2, which kernel_shape (when given) must
 * match. */
AmpCode amp_conv_kernel_from_w(AmpKernelCtx *k, const AmpConvAttrs *a, const AmpBuf *w, int nsp, int64_t *kern);
/* ConvTranspose's geometry: g->in are X's spatial dims, g->out Y's, pad0/pad1 the pads at
 * each end (negative where output_shape asks for more than the natural size), as the ONNX
 * spec and onnxruntime compute them. */
AmpCode amp_convtranspose_geom(AmpKernelCtx *k, const AmpConvAttrs *a, const AmpBuf *x, const int64_t *kern,
                               AmpConvGeom *g);


/* The geometry (ops/geom.h) of Conv, ConvTranspose, MaxPool and AveragePool: the window
 * and the output channels M (Conv: W's dim 0; ConvTranspose: W's dim 1 * group; the
 * pools: X's C); Y (N, M, g.out...) of X's dtype checked, and MaxPool's Indices (int64,
 * Y's dims) where listed. */
typedef struct AmpWindowGeom {
    AmpConvGeom g;
    int64_t M;
} AmpWindowGeom;
/* Conv's and ConvTranspose's AmpKernelGeomFn: X and W present, of one rank >= 3, the group
 * fitting X's C channels and W (Conv: W (M, C/group, k...); ConvTranspose: W (C, M/group,
 * k...), M/group at most INT32_MAX), B (where given) 1-D with M entries, the kernel from W
 * (amp_conv_kernel_from_w), then amp_conv_geom_attrs or amp_convtranspose_geom. */
AmpCode amp_conv_node_geom(AmpKernelCtx *k, void *geom, bool *made);
/* MaxPool's and AveragePool's AmpKernelGeomFn: X present, of rank >= 3, kernel_shape of
 * its spatial rank (prepare checked it is given), then amp_conv_geom_attrs. */
AmpCode amp_pool_geom(AmpKernelCtx *k, void *geom, bool *made);
/* GlobalAveragePool's and GlobalMaxPool's checks, every backend's: X (input 0) present,
 * dtype_ok(its dtype) (the backend's dtypes), of rank >= 2; output 0 as placed, checked to be
 * (N, C, 1...) of X's dtype (*y NULL where not listed). */
AmpCode amp_global_pool_out(AmpKernelCtx *k, bool (*dtype_ok)(int dtype), const AmpBuf **x, AmpBuf **y);

/* ---- read when the kernel runs (com.microsoft ConvGrad) ------------------------------- */

/* com.microsoft ConvGrad's attributes (amp_conv_grad_prepare): the group, checked
 * positive; the window attributes are read against X's rank when the kernel runs
 * (amp_conv_grad_check). */
typedef struct AmpConvGradAttrs {
    int64_t group;
} AmpConvGradAttrs;

/* ConvGrad's prepare function (AmpKernelPrepareFn) on every backend. */
AmpCode amp_conv_grad_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);

/* ConvGrad's checks of (dY, X, W): one dtype, at most 3 outputs, one rank >= 3, the group,
 * kernel_shape against W (kern: W's spatial dims), dY shaped as the forward convolution's
 * output (*g its geometry). W may be NULL (the weight gradient alone, as the CPU's plan
 * fuses it: runtime/fuse_wgrad.c): kernel_shape gives the kernel then. */
AmpCode amp_conv_grad_check(AmpKernelCtx *k, const AmpBuf *dy, const AmpBuf *x, const AmpBuf *w, int64_t *kern,
                            AmpConvGeom *g);
/* ConvGrad's outputs as placed (out[3]: dX, dW, dB; NULL where not listed), each checked:
 * dX like X, dW like W, dB (M) of W's dtype. */
AmpCode amp_conv_grad_outs(AmpKernelCtx *k, const AmpBuf *x, const AmpBuf *w, AmpBuf **out);

/* Reads the node's INTS attribute of exactly n entries into out, or fills out with dflt
 * when absent; AMP_ERR_INPUT when it has another length or a value under `min`. With
 * amp_conv_geom, for a kernel that reads its attributes from the node when it runs
 * (ConvGrad); Conv, ConvTranspose and the pools parse theirs at prepare (above). */
AmpCode amp_conv_ints(AmpKernelCtx *k, const char *name, int n, int64_t dflt, int64_t min, int64_t *out);

/* Fills g for a window of kern (nsp entries) over x's spatial dims from the node's
 * strides, dilations, pads and auto_pad; ceil_mode rounds output sizes up (pooling). */
AmpCode amp_conv_geom(AmpKernelCtx *k, const AmpBuf *x, const int64_t *kern, bool ceil_mode, AmpConvGeom *g);

/* *out = the product of n dims; false when it is over 2^62 (hostile shapes). */
bool amp_conv_size(int n, const int64_t *d, int64_t *out);

#endif
