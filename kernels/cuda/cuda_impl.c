/* The helpers every node-level CUDA kernel shares (cuda_impl.h): errors as AmpStatus
 * naming the node, the one counted read-back of small integer inputs, and the device copy.
 * A leaf: it calls nothing of the kernels or the backend instance (backend_cuda.c), so
 * that the kernels and the instance do not depend on each other through it. */
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_impl.h"
#include "kernels/cuda/cuda_libs.h" /* last: cuBLASLt and cuDNN through dlopen */

AmpCode amp_cuda_check(AmpKernelCtx *k, int err, const char *what) {
    if (!err) return AMP_OK;
    (void)cudaGetLastError(); /* clear a sticky launch error so the next node reports its own */
    return amp_kernel_fail(k, AMP_ERR_INTERNAL, "%s: CUDA error %d: %s", what, err, cudaGetErrorString((cudaError_t)err));
}

AmpCode amp_cuda_check_blas(AmpKernelCtx *k, int status, const char *what) {
    if (status == CUBLAS_STATUS_SUCCESS) return AMP_OK;
    return amp_kernel_fail(k, AMP_ERR_INTERNAL, "%s: cuBLAS error %d: %s", what, status,
                           cublasLtGetStatusString((cublasStatus_t)status));
}

AmpCode amp_cuda_check_dnn(AmpKernelCtx *k, int status, const char *what) {
    if (status == CUDNN_STATUS_SUCCESS) return AMP_OK;
    char detail[256] = "";
    cudnnGetLastErrorString(detail, sizeof detail);
    return amp_kernel_fail(k, AMP_ERR_INTERNAL, "%s: cuDNN error %d: %s%s%s", what, status,
                           cudnnGetErrorString((cudnnStatus_t)status), *detail ? ": " : "", detail);
}

AmpCode amp_cuda_check_dnn_geometry(AmpKernelCtx *k, int status, const char *what) {
    if (status == CUDNN_STATUS_BAD_PARAM || status == CUDNN_STATUS_NOT_SUPPORTED)
        return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "cuDNN cannot run this geometry (%s: %s)", what,
                               cudnnGetErrorString((cudnnStatus_t)status));
    return amp_cuda_check_dnn(k, status, what);
}

int amp_cuda_read_ints(AmpKernelCtx *k, int index, int64_t *out, int max) {
    AmpCudaCtx *c = amp_cuda_ctx(k);
    const AmpBuf *b = index < k->n_in ? k->in[index] : NULL;
    if (!b) {
        amp_kernel_fail(k, AMP_ERR_INPUT, "input %d is absent", index);
        return -1;
    }
    if ((b->dtype != AMP_DT_INT64 && b->dtype != AMP_DT_INT32) || b->nelem > (uint64_t)max) {
        amp_kernel_fail(k, AMP_ERR_INPUT, "input %d must be int32 or int64 with at most %d elements", index, max);
        return -1;
    }
    if (!b->nelem) return 0;
    size_t esz = b->dtype == AMP_DT_INT64 ? 8 : 4;
    int64_t tmp[AMP_MAX_RANK * 8];
    void *host = b->nelem * esz <= sizeof tmp ? (void *)tmp : malloc(b->nelem * esz);
    if (!host) {
        amp_fail(k->st, AMP_ERR_INTERNAL, "out of memory");
        return -1;
    }
    cudaStream_t s = c->stream;
    int err = cudaMemcpyAsync(host, b->data, b->nelem * esz, cudaMemcpyDeviceToHost, s);
    if (!err) err = cudaStreamSynchronize(s);
    c->syncs++;
    if (!err) {
        for (uint64_t i = 0; i < b->nelem; i++) {
            if (esz == 8) memcpy(&out[i], (char *)host + 8 * i, 8);
            else {
                int32_t v;
                memcpy(&v, (char *)host + 4 * i, 4);
                out[i] = v;
            }
        }
    }
    if (host != (void *)tmp) free(host);
    if (amp_cuda_check(k, err, "reading a small input back")) return -1;
    return (int)b->nelem;
}

AmpCode amp_cuda_copy(AmpKernelCtx *k, void *dst, const void *src, size_t bytes) {
    if (!bytes || dst == src) return AMP_OK;
    return amp_cuda_check(k, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, amp_cuda_ctx(k)->stream),
                          "device copy");
}
