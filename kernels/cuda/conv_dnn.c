/* cuDNN helpers of the convolution family on CUDA (kernels/cuda/conv_dnn.h). */
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/conv_dnn.h"
#include "ops/geom.h"
#include "kernels/cuda/cuda_libs.h" /* last: cuBLASLt and cuDNN through dlopen */

AmpCode amp_cuda_conv_inputs(AmpKernelCtx *k, AmpWindowGeom *own, const AmpWindowGeom **wg, const AmpBuf **x,
                             const AmpBuf **w, const AmpBuf **b) {
    AmpCode rc = amp_kernel_geom(k, own, (const void **)wg);
    if (rc) return rc;
    *x = k->in[0], *w = k->in[1], *b = k->n_in > 2 ? k->in[2] : NULL;
    int dt = (*x)->dtype;
    if ((*w)->dtype != dt || (*b && (*b)->dtype != dt) || !amp_cuda_is_float(dt)) return amp_kernel_bad_dtype(k, dt);
    return AMP_OK;
}

void amp_cuda_dnn_descs_free(AmpCudaDnnDescs *d) {
    if (d->xd) cudnnDestroyTensorDescriptor(d->xd);
    if (d->yd) cudnnDestroyTensorDescriptor(d->yd);
    if (d->bd) cudnnDestroyTensorDescriptor(d->bd);
    if (d->wd) cudnnDestroyFilterDescriptor(d->wd);
    if (d->cd) cudnnDestroyConvolutionDescriptor(d->cd);
}

cudnnDataType_t amp_cuda_dnn_type(int dtype) {
    return dtype == AMP_DT_FLOAT16 ? CUDNN_DATA_HALF : dtype == AMP_DT_BFLOAT16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
}

cudnnStatus_t amp_cuda_dnn_packed(cudnnTensorDescriptor_t *d, cudnnDataType_t t, int rank, const int *dims) {
    int strides[AMP_CUDA_DNN_MAXD];
    strides[rank - 1] = 1;
    for (int i = rank - 2; i >= 0; i--) strides[i] = strides[i + 1] * dims[i + 1];
    cudnnStatus_t s = cudnnCreateTensorDescriptor(d);
    return s ? s : cudnnSetTensorNdDescriptor(*d, t, rank, dims, strides);
}

cudnnStatus_t amp_cuda_dnn_filter(cudnnFilterDescriptor_t *wd, cudnnDataType_t t, int rank, const int *dims) {
    cudnnStatus_t s = cudnnCreateFilterDescriptor(wd);
    return s ? s : cudnnSetFilterNdDescriptor(*wd, t, CUDNN_TENSOR_NCHW, rank, dims);
}

cudnnStatus_t amp_cuda_dnn_conv(cudnnConvolutionDescriptor_t *cd, int nsp, const int *pad, const int *stride,
                                const int *dil, int group, bool strict) {
    cudnnStatus_t s = cudnnCreateConvolutionDescriptor(cd);
    if (!s) s = cudnnSetConvolutionNdDescriptor(*cd, nsp, pad, stride, dil, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT);
    if (!s) s = cudnnSetConvolutionGroupCount(*cd, group);
    if (!s) s = cudnnSetConvolutionMathType(*cd, strict ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH);
    return s;
}

cudnnStatus_t amp_cuda_dnn_check_out(cudnnConvolutionDescriptor_t cd, cudnnTensorDescriptor_t in,
                                     cudnnFilterDescriptor_t wd, int rank, const int *want) {
    int dims[AMP_CUDA_DNN_MAXD];
    cudnnStatus_t s = cudnnGetConvolutionNdForwardOutputDim(cd, in, wd, rank, dims);
    if (!s && memcmp(dims, want, (size_t)rank * sizeof *dims)) s = CUDNN_STATUS_BAD_PARAM;
    return s;
}

cudnnStatus_t amp_cuda_dnn_bwd_data_algo(AmpCudaCtx *c, bool strict, cudnnFilterDescriptor_t wd, const void *w,
                                         cudnnTensorDescriptor_t dyd, const void *dy, cudnnConvolutionDescriptor_t cd,
                                         cudnnTensorDescriptor_t dxd, void *dx, cudnnConvolutionBwdDataAlgo_t *algo,
                                         size_t *ws) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    int n = 0, pick;
    cudnnStatus_t s = cudnnFindConvolutionBackwardDataAlgorithmEx(c->dnn, wd, w, dyd, dy, cd, dxd, dx,
                                                                  CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, perf,
                                                                  c->workspace, c->workspace_bytes);
    if (s)
        s = cudnnGetConvolutionBackwardDataAlgorithm_v7(c->dnn, wd, dyd, cd, dxd, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                                                        &n, perf);
    if (s) return s;
    AMP_CUDA_DNN_PICK(perf, n, strict, c->workspace_bytes, pick);
    if (pick < 0) return CUDNN_STATUS_NOT_SUPPORTED;
    *algo = perf[pick].algo;
    *ws = perf[pick].memory;
    return cudnnSetConvolutionMathType(cd, perf[pick].mathType);
}

AmpCode amp_cuda_dnn_plan(AmpKernelCtx *k, int family, const void *key, size_t key_len, AmpCudaDnnMakeFn make,
                          void (*free_plan)(void *), void *const *io, void **plan) {
    AmpCudaCtx *c = amp_cuda_ctx(k);
    if ((*plan = amp_cuda_cache_get(c, family, key, key_len))) return AMP_OK;
    AmpCode rc = make(k, key, io, plan);
    if (rc) return rc;
    if (!amp_cuda_cache_put(c, family, key, key_len, *plan, free_plan)) {
        free_plan(*plan);
        return amp_fail(k->st, AMP_ERR_INTERNAL, "out of memory");
    }
    return AMP_OK;
}

void amp_cuda_dnn_window(const AmpConvGeom *g, int *rank, int *pad, int *stride, int *dil) {
    int nsp = g->nsp, extra = nsp == 1;
    *rank = nsp + 2 + extra;
    for (int i = 0; i < nsp; i++) {
        pad[i] = (int)g->pad0[i];
        stride[i] = (int)g->stride[i];
        dil[i] = (int)g->dil[i];
    }
    if (extra) pad[1] = 0, stride[1] = 1, dil[1] = 1;
}

void amp_cuda_dnn_dims(const AmpBuf *b, int rank, int *dims) {
    for (int i = 0; i < rank; i++) dims[i] = i < b->rank ? (int)b->dims[i] : 1;
}
