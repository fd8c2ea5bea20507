/* The GEMM family's own kernel: Gemm's C, broadcast into the output (Y = beta * C) before
 * cuBLASLt adds alpha * A @ B to it (gemm.c). The products themselves are cuBLASLt's. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "kernels/cuda/gemm.h"

template <typename T> __device__ inline float load_f(const T *p, int64_t i);
template <> __device__ inline float load_f<float>(const float *p, int64_t i) { return p[i]; }
template <> __device__ inline float load_f<__half>(const __half *p, int64_t i) { return __half2float(p[i]); }
template <> __device__ inline float load_f<__nv_bfloat16>(const __nv_bfloat16 *p, int64_t i) {
    return __bfloat162float(p[i]);
}
template <typename T> __device__ inline T store_f(float v);
template <> __device__ inline float store_f<float>(float v) { return v; }
template <> __device__ inline __half store_f<__half>(float v) { return __float2half_rn(v); }
template <> __device__ inline __nv_bfloat16 store_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

/* y[i, j] = beta * c[i * c_rs + j * c_cs] over an m x n row-major y (c_rs, c_cs: 0 on
 * the axes C broadcasts along). */
template <typename T>
__global__ void fill_c(T *__restrict__ y, const T *__restrict__ c, int64_t m, int64_t n, int64_t c_rs, int64_t c_cs,
                       float beta) {
    int64_t total = m * n;
    for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < total;
         idx += (int64_t)gridDim.x * blockDim.x) {
        int64_t i = idx / n, j = idx - i * n;
        y[idx] = store_f<T>(c ? beta * load_f<T>(c, i * c_rs + j * c_cs) : 0.0f);
    }
}

extern "C" int amp_cuda_gemm_fill_c(void *y, const void *c, int dtype, int64_t m, int64_t n, int64_t c_rs,
                                    int64_t c_cs, float beta, void *stream) {
    int64_t total = m * n;
    if (total <= 0) return 0;
    int64_t blocks = (total + 255) / 256;
    unsigned grid = (unsigned)(blocks < 65535 * 8 ? blocks : 65535 * 8);
    cudaStream_t s = (cudaStream_t)stream;
    switch (dtype) {
    case 1: fill_c<float><<<grid, 256, 0, s>>>((float *)y, (const float *)c, m, n, c_rs, c_cs, beta); break;
    case 10: fill_c<__half><<<grid, 256, 0, s>>>((__half *)y, (const __half *)c, m, n, c_rs, c_cs, beta); break;
    case 16:
        fill_c<__nv_bfloat16><<<grid, 256, 0, s>>>((__nv_bfloat16 *)y, (const __nv_bfloat16 *)c, m, n, c_rs, c_cs,
                                                    beta);
        break;
    default: return (int)cudaErrorInvalidValue;
    }
    return (int)cudaGetLastError();
}
