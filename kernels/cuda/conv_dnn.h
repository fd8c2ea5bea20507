/* cuDNN helpers that conv.c (Conv, pools) and conv_transpose.c (ConvTranspose) share. */
#ifndef AMP_CUDA_CONV_DNN_H
#define AMP_CUDA_CONV_DNN_H

#include <cudnn.h>

/* cuDNN's data type of a float dtype: half, bfloat16, else float. */
cudnnDataType_t amp_cuda_dnn_type(int dtype);
/* Creates *d as a fully packed (row-major) tensor of rank dims. */
cudnnStatus_t amp_cuda_dnn_packed(cudnnTensorDescriptor_t *d, cudnnDataType_t t, int rank, const int *dims);

#endif
