/* Internals of the CPU's conv family (conv.c, ms_train.c): im2col / col2im and the
 * oneDNN description. The window geometry (attributes, strides, dilations, pads,
 * auto_pad, output sizes) is every backend's: ops/conv_geom.h. */
#ifndef AMP_CPU_CONV_IMPL_H
#define AMP_CPU_CONV_IMPL_H

#include "kernels/cpu/dnnl.h"
#include "kernels/cpu/kernels.h"
#include "ops/conv_geom.h"

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
 * tensor), or where it is slower (measured): the im2col path does it. */
bool amp_conv_dnnl_desc(int kind, int dt, int64_t n, int64_t ic, int64_t oc, int64_t group, const AmpConvGeom *g,
                        bool bias, AmpDnnlConv *p);
/* For oneDNN's backward weights (AMP_DNNL_CONV_BWD_WEIGHTS): sets p's end pads to those
 * that make the forward output exactly p->out (ONNX allows larger ones), and answers
 * whether oneDNN 2.6 computes the problem right: undilated, pads as a convolution's (none
 * negative, each under the window's extent). It miscomputes others (found by test_conv's
 * random cases over several seeds); false sends them to im2col. */
bool amp_conv_dnnl_wgrad_pads(AmpDnnlConv *p);

#endif
