// Conversion kernels float32 <-> float16 / bfloat16, round-to-nearest-even (the
// hardware's __float2half_rn / __float2bfloat16_rn), grid-stride loops; then small
// launchers that take an explicit stream and check the launch.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "convert.h"

// (n) -> (n)
__global__ void f32_to_f16_kernel(__half *dst, const float *src, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = __float2half_rn(src[i]);
}

__global__ void f16_to_f32_kernel(float *dst, const __half *src, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = __half2float(src[i]);
}

__global__ void f32_to_bf16_kernel(__nv_bfloat16 *dst, const float *src, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = __float2bfloat16_rn(src[i]);
}

__global__ void bf16_to_f32_kernel(float *dst, const __nv_bfloat16 *src, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = __bfloat162float(src[i]);
}

static unsigned grid_for(size_t n, unsigned block) {
    size_t g = (n + block - 1) / block;
    return (unsigned)(g < 65535 * 4 ? (g ? g : 1) : 65535 * 4);
}

#define LAUNCH(kernel, dst_t, src_t)                                                        \
    do {                                                                                    \
        if (!n) return 0;                                                                   \
        const unsigned block = 256;                                                         \
        kernel<<<grid_for(n, block), block, 0, (cudaStream_t)stream>>>((dst_t *)dst,        \
                                                                       (const src_t *)src, n); \
        return (int)cudaGetLastError();                                                     \
    } while (0)

extern "C" int amp_cuda_f32_to_f16(uint16_t *dst, const float *src, size_t n, void *stream) {
    LAUNCH(f32_to_f16_kernel, __half, float);
}

extern "C" int amp_cuda_f16_to_f32(float *dst, const uint16_t *src, size_t n, void *stream) {
    LAUNCH(f16_to_f32_kernel, float, __half);
}

extern "C" int amp_cuda_f32_to_bf16(uint16_t *dst, const float *src, size_t n, void *stream) {
    LAUNCH(f32_to_bf16_kernel, __nv_bfloat16, float);
}

extern "C" int amp_cuda_bf16_to_f32(float *dst, const uint16_t *src, size_t n, void *stream) {
    LAUNCH(bf16_to_f32_kernel, float, __nv_bfloat16);
}

extern "C" int amp_cuda_device_available(void) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) return 0;
    return count > 0;
}
