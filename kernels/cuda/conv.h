/* The convolution family on CUDA: Conv, MaxPool and AveragePool through cuDNN (conv.c). */
#ifndef AMP_CUDA_CONV_H
#define AMP_CUDA_CONV_H

#include "kernels/cuda/cuda_impl.h"

AmpCode amp_cuda_conv(AmpKernelCtx *k);
AmpCode amp_cuda_maxpool(AmpKernelCtx *k);
AmpCode amp_cuda_averagepool(AmpKernelCtx *k);
bool amp_cuda_supports_conv(const AmpNode *n, int64_t opset, const int *in_dtypes);
bool amp_cuda_supports_pool(const AmpNode *n, int64_t opset, const int *in_dtypes);

#endif
