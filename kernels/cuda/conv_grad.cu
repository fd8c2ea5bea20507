// ConvGrad's bias gradient: dB[m] = the sum of dY (n, m, o) over n and o, a block per
// channel, float32 sums in a fixed order (no atomics).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "kernels/cuda/device.cuh"
#include "kernels/cuda/conv_grad.h"

enum { DT_FLOAT = 1, DT_FLOAT16 = 10, DT_BFLOAT16 = 16 }; // AmpDType numbers

template <typename T>
__global__ void bias_grad_kernel(const T *__restrict__ dy, T *__restrict__ db, int64_t n, int64_t m, int64_t o) {
    __shared__ float sh[32];
    int64_t cnt = n * o;
    for (int64_t ch = blockIdx.x; ch < m; ch += gridDim.x) {
        float a = 0.0f;
        for (int64_t e = threadIdx.x; e < cnt; e += blockDim.x) {
            int64_t q = e / o; // batch q, position e - q * o
            a += ld(dy, (q * m + ch) * o + (e - q * o));
        }
        a = warp_sum(a);
        int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
        __syncthreads(); // the previous channel's reads of sh are done
        if (lane == 0) sh[w] = a;
        __syncthreads();
        if (w == 0) {
            a = warp_sum(lane < nw ? sh[lane] : 0.0f);
            if (lane == 0) st(db, ch, a);
        }
    }
}

extern "C" int amp_cuda_conv_bias_grad_launch(int dtype, const void *dy, void *db, int64_t n, int64_t m, int64_t o,
                                              void *stream) {
    if (m <= 0) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    unsigned g = (unsigned)(m < 65535 * 4 ? m : 65535 * 4);
    switch (dtype) {
    case DT_FLOAT: bias_grad_kernel<float><<<g, 256, 0, s>>>((const float *)dy, (float *)db, n, m, o); break;
    case DT_FLOAT16: bias_grad_kernel<__half><<<g, 256, 0, s>>>((const __half *)dy, (__half *)db, n, m, o); break;
    case DT_BFLOAT16:
        bias_grad_kernel<__nv_bfloat16><<<g, 256, 0, s>>>((const __nv_bfloat16 *)dy, (__nv_bfloat16 *)db, n, m, o);
        break;
    default: return (int)cudaErrorInvalidValue;
    }
    return (int)cudaGetLastError();
}
