/* The convolution family on CUDA through cuDNN: Conv, MaxPool and AveragePool (conv.c),
 * ConvTranspose (conv_transpose.c). */
#ifndef AMP_CUDA_CONV_H
#define AMP_CUDA_CONV_H

#include "kernels/cuda/cuda_impl.h"
#include "ops/conv_geom.h"

AmpCode amp_cuda_conv(AmpKernelCtx *k);
AmpCode amp_cuda_maxpool(AmpKernelCtx *k);
AmpCode amp_cuda_averagepool(AmpKernelCtx *k);
AmpCode amp_cuda_conv_transpose(AmpKernelCtx *k);
/* Why cuDNN cannot run ConvTranspose geometry g (ops/conv_geom.h: amp_convtranspose_geom), or
 * NULL when it can: the kernel's AMP_ERR_UNSUPPORTED message (the node then runs on the
 * CPU). */
const char *amp_cuda_convtranspose_refusal(const AmpConvGeom *g);
bool amp_cuda_supports_conv(const AmpNode *n, int64_t opset, const int *in_dtypes);
bool amp_cuda_supports_pool(const AmpNode *n, int64_t opset, const int *in_dtypes);

#endif
