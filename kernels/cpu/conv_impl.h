/* Internals shared by the conv family's files (conv.c, pool.c): the window geometry
 * (strides, dilations, pads, auto_pad, output sizes), and the error helper. */
#ifndef AMP_CPU_CONV_IMPL_H
#define AMP_CPU_CONV_IMPL_H

#include "kernels/cpu/dnnl.h"
#include "kernels/cpu/kernels.h"

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

/* com.microsoft ConvGrad's attributes (amp_cpu_ms_conv_grad_prepare, ms_train.c): the
 * group, checked positive; the window attributes are read against X's rank when the kernel
 * runs (amp_conv_ints, amp_conv_geom). The CUDA kernel reads the same struct. */
typedef struct AmpConvGradAttrs {
    int64_t group;
} AmpConvGradAttrs;

/* ConvGrad's checks of (dY, X, W) for the CPU and CUDA kernels (ms_train.c): one dtype, at
 * most 3 outputs, one rank >= 3, the group, kernel_shape against W (kern: W's spatial
 * dims), dY shaped as the forward convolution's output (*g its geometry). */
AmpCode amp_conv_grad_check(AmpKernelCtx *k, const AmpBuf *dy, const AmpBuf *x, const AmpBuf *w, int64_t *kern,
                            AmpConvGeom *g);

/* The prepare function of Conv, ConvTranspose, MaxPool and AveragePool: the attributes
 * each reads, into an AmpConvAttrs. */
AmpCode amp_cpu_conv_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);

/* k->attrs, or NULL with AMP_ERR_INTERNAL in k->st when the node was not prepared. */
const AmpConvAttrs *amp_conv_prepared(AmpKernelCtx *k);
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
/* ConvTranspose's geometry (conv.c): g->in are X's spatial dims, g->out Y's, pad0/pad1
 * the pads at each end (negative where output_shape asks for more than the natural
 * size), as the ONNX spec and onnxruntime compute them; the CUDA kernel reuses it. */
AmpCode amp_convtranspose_geom(AmpKernelCtx *k, const AmpConvAttrs *a, const AmpBuf *x, const int64_t *kern,
                               AmpConvGeom *g);

/* Reads the node's INTS attribute of exactly n entries into out, or fills out with dflt
 * when absent; AMP_ERR_INPUT when it has another length or a value under `min`. With
 * amp_conv_geom, for a kernel that reads its attributes from the node when it runs
 * (ConvGrad); Conv, ConvTranspose and the pools parse theirs at prepare (below). */
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

/* oneDNN's description of a convolution of dtype dt (kind AMP_DNNL_CONV_FWD,
 * AMP_DNNL_DECONV_FWD for ConvTranspose, or a backward) from its geometry g: for Conv and
 * its backward X (n, ic, g->in...) -> Y (n, oc, g->out...); for ConvTranspose X (n, ic,
 * g->in...) -> Y (n, oc, g->out...) as amp_convtranspose_geom made g. False where oneDNN
 * does not take it (a type other than float32 and bfloat16, over 3 spatial dims, an empty
 * tensor): the im2col path does it. */
bool amp_conv_dnnl_desc(int kind, int dt, int64_t n, int64_t ic, int64_t oc, int64_t group, const AmpConvGeom *g,
                        bool bias, AmpDnnlConv *p);

#endif
