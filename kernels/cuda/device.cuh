// What the CUDA sources share on the device side: the grid-stride loop, float loads and
// stores of the three float storage types (computing in float32, rounding to nearest even
// on store), and warp sums. Included by .cu files only.
#ifndef AMP_CUDA_DEVICE_CUH
#define AMP_CUDA_DEVICE_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#define FULL_MASK 0xffffffffu

// i over [0, n) across the whole grid: int64_t indices, and uint64_t ones.
#define GRID_STRIDE(i, n) \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)
#define GRID_STRIDE_U64(i, n) \
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < (n); i += (uint64_t)gridDim.x * blockDim.x)

__device__ __forceinline__ float ld(const float *p, int64_t i) { return p[i]; }
__device__ __forceinline__ float ld(const __half *p, int64_t i) { return __half2float(p[i]); }
__device__ __forceinline__ float ld(const __nv_bfloat16 *p, int64_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ void st(float *p, int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void st(__half *p, int64_t i, float v) { p[i] = __float2half_rn(v); }
__device__ __forceinline__ void st(__nv_bfloat16 *p, int64_t i, float v) { p[i] = __float2bfloat16_rn(v); }

// A grid-stride grid for `items` in blocks of `block` threads: enough blocks for every item,
// at most 8 waves of the device's SMs (a full SM holds 2048 threads); any count gives the
// same result, it only sizes the grid.
static inline unsigned amp_cuda_grid_for(uint64_t items, unsigned block) {
    static unsigned sms;
    if (!sms) {
        int dev = 0, n = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0)
            n = 132;
        sms = (unsigned)n;
    }
    uint64_t g = (items + block - 1) / block, cap = (uint64_t)sms * 8 * (2048 / block);
    return (unsigned)(g < cap ? (g ? g : 1) : cap);
}

// v summed over the warp; every lane gets the sum (float or double).
template <typename V>
__device__ __forceinline__ V warp_sum(V v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

#endif
