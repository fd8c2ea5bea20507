/* Internals shared by the conv family's files (conv.c, pool.c): the window geometry
 * (strides, dilations, pads, auto_pad, output sizes), the error helper, and the pooling
 * kernels registered in conv.c's table. */
#ifndef AMP_CPU_CONV_IMPL_H
#define AMP_CPU_CONV_IMPL_H

#include "kernels.h"

#define AMP_MAX_SPATIAL (AMP_MAX_RANK - 2)

/* A window (kernel or pooling window) sliding over the spatial dims of X (N, C, D1..Dn):
 * output position o reads input positions o*stride - pad0 + j*dil, j in [0, kern). */
typedef struct AmpConvGeom {
    int nsp; /* spatial dims n */
    int64_t in[AMP_MAX_SPATIAL], kern[AMP_MAX_SPATIAL], stride[AMP_MAX_SPATIAL], dil[AMP_MAX_SPATIAL];
    int64_t pad0[AMP_MAX_SPATIAL], pad1[AMP_MAX_SPATIAL]; /* pads at the start and end */
    int64_t out[AMP_MAX_SPATIAL];
} AmpConvGeom;

/* amp_fail with "node 'NAME' (OP): " in front of the message. */
AmpCode amp_conv_fail(AmpKernelCtx *k, AmpCode code, const char *fmt, ...) AMP_PRINTF(3, 4);

/* Reads an INTS attribute of exactly n entries into out, or fills out with dflt when
 * absent; AMP_ERR_INPUT when it has another length or a value under `min`. */
AmpCode amp_conv_ints(AmpKernelCtx *k, const char *name, int n, int64_t dflt, int64_t min, int64_t *out);

/* Fills g for a window of kern (nsp entries) over x's spatial dims from the node's
 * strides, dilations, pads and auto_pad; ceil_mode rounds output sizes up (pooling). */
AmpCode amp_conv_geom(AmpKernelCtx *k, const AmpBuf *x, const int64_t *kern, bool ceil_mode, AmpConvGeom *g);

/* *out = the product of n dims; false when it is over 2^62 (hostile shapes). */
bool amp_conv_size(int n, const int64_t *d, int64_t *out);

/* The column matrix of a convolution (conv.c; also ConvGrad in ms_train.c):
 * col (cg * K, O) from x (cg, in...), row (c, j) holding x[c, o * stride - pad0 + j * dil]
 * for every output position o (0 in the padding); g->in are x's spatial dims, g->out
 * the output's. */
void amp_conv_im2col(const float *x, int64_t cg, const AmpConvGeom *g, float *col);
/* The adjoint scatter: y (mg, out...) += col (mg * K, NI), entry (m, j) of input
 * position i landing on output position i * stride - pad0 + j * dil inside y; here
 * g->in are the source positions' dims and g->out y's (ConvTranspose; Conv's data
 * gradient with in/out swapped). */
void amp_conv_col2im(const float *col, int64_t mg, const AmpConvGeom *g, float *y);

/* pool.c */
AmpCode amp_cpu_maxpool(AmpKernelCtx *k);
AmpCode amp_cpu_averagepool(AmpKernelCtx *k);
AmpCode amp_cpu_global_averagepool(AmpKernelCtx *k);
AmpCode amp_cpu_global_maxpool(AmpKernelCtx *k);

#endif
