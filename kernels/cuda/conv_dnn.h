/* What conv.c (Conv, pools), conv_transpose.c (ConvTranspose) and conv_grad.c (ConvGrad)
 * share on CUDA (conv_dnn.c): their input checks, a plan's cuDNN descriptors made by the
 * same calls in the same order, its algorithm picked by one rule, and the plan cache's
 * get-or-make. */
#ifndef AMP_CUDA_CONV_DNN_H
#define AMP_CUDA_CONV_DNN_H

#include <cudnn.h>
#include <stdbool.h>
#include <stddef.h>

#include "kernels/cuda/cuda_impl.h"
#include "ops/conv_geom.h"

#define AMP_CUDA_DNN_MAXD 5 /* tensors of rank 4 or 5: 1-D and 2-D windows as 2-D, 3-D as 3-D */

/* The descriptors of a convolution plan (any NULL where the plan has none): X, Y and B
 * tensors, W's filter, the convolution. */
typedef struct AmpCudaDnnDescs {
    cudnnTensorDescriptor_t xd, yd, bd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
} AmpCudaDnnDescs;
/* Destroys those of d that were made, in that order. */
void amp_cuda_dnn_descs_free(AmpCudaDnnDescs *d);

/* cuDNN's data type of a float dtype: half, bfloat16, else float. */
cudnnDataType_t amp_cuda_dnn_type(int dtype);
/* Creates *d as a fully packed (row-major) tensor of rank dims. */
cudnnStatus_t amp_cuda_dnn_packed(cudnnTensorDescriptor_t *d, cudnnDataType_t t, int rank, const int *dims);
/* Creates *wd as an NCHW filter of rank dims. */
cudnnStatus_t amp_cuda_dnn_filter(cudnnFilterDescriptor_t *wd, cudnnDataType_t t, int rank, const int *dims);
/* Creates *cd: a cross-correlation over nsp spatial axes (pads, strides, dilations), fp32
 * compute, in `group` groups, with FMA math where strict (float32 without TF32), else
 * tensor-op math (the algorithm's own math type is set once it is picked). */
cudnnStatus_t amp_cuda_dnn_conv(cudnnConvolutionDescriptor_t *cd, int nsp, const int *pad, const int *stride,
                                const int *dil, int group, bool strict);
/* CUDNN_STATUS_BAD_PARAM unless the forward convolution cd of in (filter wd) gives the
 * dims `want` (rank of them): the shape cuDNN computes must be the one the executor placed. */
cudnnStatus_t amp_cuda_dnn_check_out(cudnnConvolutionDescriptor_t cd, cudnnTensorDescriptor_t in,
                                     cudnnFilterDescriptor_t wd, int rank, const int *want);

/* The first of n algorithm results (perf: cudnnConvolution*AlgoPerf_t) that succeeded, fits
 * the workspace and, for strict float32, uses no tensor cores; pick -1 when none. */
#define AMP_CUDA_DNN_PICK(perf, n, strict, ws_bytes, pick)                                                       \
    do {                                                                                                         \
        pick = -1;                                                                                               \
        for (int i_ = 0; i_ < (n) && pick < 0; i_++) {                                                           \
            bool tc_ = perf[i_].mathType == CUDNN_TENSOR_OP_MATH ||                                              \
                       perf[i_].mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;                               \
            if (perf[i_].status == CUDNN_STATUS_SUCCESS && perf[i_].memory <= (ws_bytes) && !((strict) && tc_)) \
                pick = i_;                                                                                       \
        }                                                                                                        \
    } while (0)

/* Backward data's algorithm for dx = conv^T(w, dy) on descriptor cd: every algorithm timed
 * once on the buffers (fastest first), the heuristic's order when that fails; the pick
 * (AMP_CUDA_DNN_PICK) in *algo and *ws, its math type set on cd. ConvTranspose's forward
 * and ConvGrad's dX. */
cudnnStatus_t amp_cuda_dnn_bwd_data_algo(AmpCudaCtx *c, bool strict, cudnnFilterDescriptor_t wd, const void *w,
                                         cudnnTensorDescriptor_t dyd, const void *dy, cudnnConvolutionDescriptor_t cd,
                                         cudnnTensorDescriptor_t dxd, void *dx, cudnnConvolutionBwdDataAlgo_t *algo,
                                         size_t *ws);

/* Conv's or ConvTranspose's geometry (amp_conv_node_geom: *wg, made into own where the
 * executor did not) and inputs X, W and B (NULL where absent), of one float dtype cuDNN
 * takes. */
AmpCode amp_cuda_conv_inputs(AmpKernelCtx *k, AmpWindowGeom *own, const AmpWindowGeom **wg, const AmpBuf **x,
                             const AmpBuf **w, const AmpBuf **b);

/* Makes the plan of key (io: the buffers to time algorithms on), into *out. */
typedef AmpCode (*AmpCudaDnnMakeFn)(AmpKernelCtx *k, const void *key, void *const *io, void **out);
/* The plan cached under (family, key bytes), else made by make() and cached (free_plan
 * frees it with the session, or at once when caching runs out of memory). */
AmpCode amp_cuda_dnn_plan(AmpKernelCtx *k, int family, const void *key, size_t key_len, AmpCudaDnnMakeFn make,
                          void (*free_plan)(void *), void *const *io, void **plan);

/* A plan key's window from geometry g (cuDNN's limits checked by the caller): *rank, and
 * per spatial axis the pad (one per axis: cuDNN pads both ends alike), stride and
 * dilation; a 1-D window as 2-D, its second axis of width 1. */
void amp_cuda_dnn_window(const AmpConvGeom *g, int *rank, int *pad, int *stride, int *dil);
/* b's dims as a plan key's, rank of them (1 past b's own rank). */
void amp_cuda_dnn_dims(const AmpBuf *b, int rank, int *dims);

#endif
