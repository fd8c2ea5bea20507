/* com.microsoft ConvGrad on CUDA (conv_grad.c: cuDNN's backward data and backward filter
 * convolutions; conv_grad.cu: the bias gradient, a reduction). */
#ifndef AMP_CUDA_CONV_GRAD_H
#define AMP_CUDA_CONV_GRAD_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* db[c] = sum of dy (n, m, o) over n and o, for c in [0, m); dtype float32/float16/bfloat16. */
int amp_cuda_conv_bias_grad_launch(int dtype, const void *dy, void *db, int64_t n, int64_t m, int64_t o, void *stream);

#ifdef __cplusplus
}

#else
#include "kernels/cuda/cuda_impl.h"
#include "ops/conv_geom.h"

/* Why cuDNN cannot run the gradients of convolution geometry g (ops/conv_geom.h: amp_conv_geom),
 * or NULL when it can: the kernel's AMP_ERR_UNSUPPORTED message (the node then runs on the
 * CPU). cuDNN pads both ends of an axis alike. */
const char *amp_cuda_conv_grad_refusal(const AmpConvGeom *g);

/* dY, X and W of one float type, at most three outputs. */
bool amp_cuda_supports_conv_grad(const AmpNode *n, int64_t opset, const int *in_dtypes);
AmpCode amp_cuda_ms_conv_grad(AmpKernelCtx *k);
#endif

#endif
