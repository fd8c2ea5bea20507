/* cuBLASLt and cuDNN, opened with dlopen the first time a CUDA backend opens
 * (cuda_libs.c): linking them would make every ampc command load ~600 MiB of libraries
 * at start (130 ms and 210 MB of memory for `ampc --version`), though converting never
 * multiplies a matrix. Files that call them include this header after the libraries'
 * own: each function name then stands for its pointer in amp_cuda_libs. */
#ifndef AMP_CUDA_LIBS_H
#define AMP_CUDA_LIBS_H

#include <cublasLt.h>
#include <cudnn.h>

#include "ir/ir.h"

#define AMP_CUBLASLT_FUNCS(X) \
    X(cublasLtCreate) \
    X(cublasLtDestroy) \
    X(cublasLtGetStatusString) \
    X(cublasLtMatmul) \
    X(cublasLtMatmulAlgoGetHeuristic) \
    X(cublasLtMatmulDescCreate) \
    X(cublasLtMatmulDescDestroy) \
    X(cublasLtMatmulDescSetAttribute) \
    X(cublasLtMatmulPreferenceCreate) \
    X(cublasLtMatmulPreferenceDestroy) \
    X(cublasLtMatmulPreferenceSetAttribute) \
    X(cublasLtMatrixLayoutCreate) \
    X(cublasLtMatrixLayoutDestroy) \
    X(cublasLtMatrixLayoutSetAttribute)

#define AMP_CUDNN_FUNCS(X) \
    X(cudnnAddTensor) \
    X(cudnnConvolutionBackwardData) \
    X(cudnnConvolutionBackwardFilter) \
    X(cudnnConvolutionForward) \
    X(cudnnCreate) \
    X(cudnnCreateConvolutionDescriptor) \
    X(cudnnCreateFilterDescriptor) \
    X(cudnnCreatePoolingDescriptor) \
    X(cudnnCreateTensorDescriptor) \
    X(cudnnDestroy) \
    X(cudnnDestroyConvolutionDescriptor) \
    X(cudnnDestroyFilterDescriptor) \
    X(cudnnDestroyPoolingDescriptor) \
    X(cudnnDestroyTensorDescriptor) \
    X(cudnnFindConvolutionBackwardDataAlgorithmEx) \
    X(cudnnFindConvolutionBackwardFilterAlgorithmEx) \
    X(cudnnFindConvolutionForwardAlgorithmEx) \
    X(cudnnGetConvolutionBackwardDataAlgorithm_v7) \
    X(cudnnGetConvolutionBackwardFilterAlgorithm_v7) \
    X(cudnnGetConvolutionForwardAlgorithm_v7) \
    X(cudnnGetConvolutionNdForwardOutputDim) \
    X(cudnnGetErrorString) \
    X(cudnnGetLastErrorString) \
    X(cudnnGetPoolingNdForwardOutputDim) \
    X(cudnnPoolingForward) \
    X(cudnnSetConvolutionGroupCount) \
    X(cudnnSetConvolutionMathType) \
    X(cudnnSetConvolutionNdDescriptor) \
    X(cudnnSetFilterNdDescriptor) \
    X(cudnnSetPoolingNdDescriptor) \
    X(cudnnSetStream) \
    X(cudnnSetTensorNdDescriptor)

typedef struct AmpCudaLibs {
#define AMP_CUDA_FN_PTR(f) __typeof__(f) *f;
    AMP_CUBLASLT_FUNCS(AMP_CUDA_FN_PTR)
    AMP_CUDNN_FUNCS(AMP_CUDA_FN_PTR)
#undef AMP_CUDA_FN_PTR
} AmpCudaLibs;

/* Filled by amp_cuda_libs_load; every pointer set once it succeeds. */
extern AmpCudaLibs amp_cuda_libs;

/* Opens both libraries and finds every function, once per process (thread-safe); later
 * calls answer as the first did. AMP_ERR_UNSUPPORTED naming the library and dlerror's
 * reason when one is missing. */
AmpCode amp_cuda_libs_load(AmpStatus *st);

/* dlopen (RTLD_NOW | RTLD_LOCAL) of `soname`, else of it in each folder the build found the
 * CUDA libraries in (AMPC_CUDA_LIBDIRS); NULL with dlerror's reason for the soname in why. */
void *amp_cuda_dlopen(const char *soname, char *why, size_t len);

#ifndef AMP_CUDA_LIBS_IMPL
#define cublasLtCreate amp_cuda_libs.cublasLtCreate
#define cublasLtDestroy amp_cuda_libs.cublasLtDestroy
#define cublasLtGetStatusString amp_cuda_libs.cublasLtGetStatusString
#define cublasLtMatmul amp_cuda_libs.cublasLtMatmul
#define cublasLtMatmulAlgoGetHeuristic amp_cuda_libs.cublasLtMatmulAlgoGetHeuristic
#define cublasLtMatmulDescCreate amp_cuda_libs.cublasLtMatmulDescCreate
#define cublasLtMatmulDescDestroy amp_cuda_libs.cublasLtMatmulDescDestroy
#define cublasLtMatmulDescSetAttribute amp_cuda_libs.cublasLtMatmulDescSetAttribute
#define cublasLtMatmulPreferenceCreate amp_cuda_libs.cublasLtMatmulPreferenceCreate
#define cublasLtMatmulPreferenceDestroy amp_cuda_libs.cublasLtMatmulPreferenceDestroy
#define cublasLtMatmulPreferenceSetAttribute amp_cuda_libs.cublasLtMatmulPreferenceSetAttribute
#define cublasLtMatrixLayoutCreate amp_cuda_libs.cublasLtMatrixLayoutCreate
#define cublasLtMatrixLayoutDestroy amp_cuda_libs.cublasLtMatrixLayoutDestroy
#define cublasLtMatrixLayoutSetAttribute amp_cuda_libs.cublasLtMatrixLayoutSetAttribute
#define cudnnAddTensor amp_cuda_libs.cudnnAddTensor
#define cudnnConvolutionBackwardData amp_cuda_libs.cudnnConvolutionBackwardData
#define cudnnConvolutionBackwardFilter amp_cuda_libs.cudnnConvolutionBackwardFilter
#define cudnnConvolutionForward amp_cuda_libs.cudnnConvolutionForward
#define cudnnCreate amp_cuda_libs.cudnnCreate
#define cudnnCreateConvolutionDescriptor amp_cuda_libs.cudnnCreateConvolutionDescriptor
#define cudnnCreateFilterDescriptor amp_cuda_libs.cudnnCreateFilterDescriptor
#define cudnnCreatePoolingDescriptor amp_cuda_libs.cudnnCreatePoolingDescriptor
#define cudnnCreateTensorDescriptor amp_cuda_libs.cudnnCreateTensorDescriptor
#define cudnnDestroy amp_cuda_libs.cudnnDestroy
#define cudnnDestroyConvolutionDescriptor amp_cuda_libs.cudnnDestroyConvolutionDescriptor
#define cudnnDestroyFilterDescriptor amp_cuda_libs.cudnnDestroyFilterDescriptor
#define cudnnDestroyPoolingDescriptor amp_cuda_libs.cudnnDestroyPoolingDescriptor
#define cudnnDestroyTensorDescriptor amp_cuda_libs.cudnnDestroyTensorDescriptor
#define cudnnFindConvolutionBackwardDataAlgorithmEx amp_cuda_libs.cudnnFindConvolutionBackwardDataAlgorithmEx
#define cudnnFindConvolutionBackwardFilterAlgorithmEx amp_cuda_libs.cudnnFindConvolutionBackwardFilterAlgorithmEx
#define cudnnFindConvolutionForwardAlgorithmEx amp_cuda_libs.cudnnFindConvolutionForwardAlgorithmEx
#define cudnnGetConvolutionBackwardDataAlgorithm_v7 amp_cuda_libs.cudnnGetConvolutionBackwardDataAlgorithm_v7
#define cudnnGetConvolutionBackwardFilterAlgorithm_v7 amp_cuda_libs.cudnnGetConvolutionBackwardFilterAlgorithm_v7
#define cudnnGetConvolutionForwardAlgorithm_v7 amp_cuda_libs.cudnnGetConvolutionForwardAlgorithm_v7
#define cudnnGetConvolutionNdForwardOutputDim amp_cuda_libs.cudnnGetConvolutionNdForwardOutputDim
#define cudnnGetErrorString amp_cuda_libs.cudnnGetErrorString
#define cudnnGetLastErrorString amp_cuda_libs.cudnnGetLastErrorString
#define cudnnGetPoolingNdForwardOutputDim amp_cuda_libs.cudnnGetPoolingNdForwardOutputDim
#define cudnnPoolingForward amp_cuda_libs.cudnnPoolingForward
#define cudnnSetConvolutionGroupCount amp_cuda_libs.cudnnSetConvolutionGroupCount
#define cudnnSetConvolutionMathType amp_cuda_libs.cudnnSetConvolutionMathType
#define cudnnSetConvolutionNdDescriptor amp_cuda_libs.cudnnSetConvolutionNdDescriptor
#define cudnnSetFilterNdDescriptor amp_cuda_libs.cudnnSetFilterNdDescriptor
#define cudnnSetPoolingNdDescriptor amp_cuda_libs.cudnnSetPoolingNdDescriptor
#define cudnnSetStream amp_cuda_libs.cudnnSetStream
#define cudnnSetTensorNdDescriptor amp_cuda_libs.cudnnSetTensorNdDescriptor
#endif

#endif
