// Resize: each output element gathers its sources through per-axis tables the host built
// with the CPU's code (resize.c): nearest copies one element (by byte size, any dtype);
// linear and cubic sum every combination of the axes' taps with fp32 weights, 16-bit data
// converted to fp32 on load and rounded to nearest even on store.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cuda/resize.h"
#include "kernels/cuda/resize_elem.h"

#define GRID_STRIDE(I, i, n) \
    for (I i = (I)(blockIdx.x * (size_t)blockDim.x + threadIdx.x); i < (n); i += (I)gridDim.x * blockDim.x)

static const unsigned BLOCK = 256;

static unsigned grid_for(uint64_t items) {
    uint64_t g = (items + BLOCK - 1) / BLOCK;
    const uint64_t cap = 65535ull * 4;
    return (unsigned)(g ? (g < cap ? g : cap) : 1);
}

template <typename T> __device__ __forceinline__ float load_f(const T *p, int64_t i);
template <> __device__ __forceinline__ float load_f<float>(const float *p, int64_t i) { return p[i]; }
template <> __device__ __forceinline__ float load_f<__half>(const __half *p, int64_t i) { return __half2float(p[i]); }
template <> __device__ __forceinline__ float load_f<__nv_bfloat16>(const __nv_bfloat16 *p, int64_t i) {
    return __bfloat162float(p[i]);
}
template <typename T> __device__ __forceinline__ T store_f(float v);
template <> __device__ __forceinline__ float store_f<float>(float v) { return v; }
template <> __device__ __forceinline__ __half store_f<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 store_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// E: an unsigned integer of the element's byte size.
template <typename E>
__global__ void resize_nearest_kernel(E *__restrict__ y, const E *__restrict__ x, const int32_t *__restrict__ idx,
                                      AmpCudaResize p, uint64_t n) {
    E ev;
    memcpy(&ev, &p.ev, sizeof ev); // the low bytes (little-endian, as the host wrote them)
    GRID_STRIDE(uint64_t, i, n) {
        int64_t c[AMP_CUDA_RESIZE_RANK], off;
        float wt;
        amp_cuda_resize_coords(i, &p, c);
        y[i] = amp_cuda_resize_tap(&p, idx, NULL, c, 0, &off, &wt) ? x[off] : ev;
    }
}

template <typename T>
__global__ void resize_interp_kernel(T *__restrict__ y, const T *__restrict__ x, const int32_t *__restrict__ idx,
                                     const float *__restrict__ w, AmpCudaResize p, uint64_t n) {
    int combos = amp_cuda_resize_combos(&p);
    GRID_STRIDE(uint64_t, i, n) {
        int64_t c[AMP_CUDA_RESIZE_RANK], off;
        amp_cuda_resize_coords(i, &p, c);
        float acc = 0.f, wt;
        bool inside = true;
        for (int t = 0; t < combos && inside; t++) {
            inside = amp_cuda_resize_tap(&p, idx, w, c, t, &off, &wt);
            if (inside && wt != 0.f) acc += wt * load_f(x, off);
        }
        y[i] = store_f<T>(inside ? acc : p.extrap);
    }
}

extern "C" int amp_cuda_resize_launch(void *y, const void *x, const int32_t *idx, const float *w,
                                      const AmpCudaResize *p, uint64_t n, void *stream) {
    cudaStream_t s = (cudaStream_t)stream;
    unsigned g = grid_for(n);
    if (!p->interp) {
        switch (p->esize) {
        case 1: resize_nearest_kernel<<<g, BLOCK, 0, s>>>((uint8_t *)y, (const uint8_t *)x, idx, *p, n); break;
        case 2: resize_nearest_kernel<<<g, BLOCK, 0, s>>>((uint16_t *)y, (const uint16_t *)x, idx, *p, n); break;
        case 4: resize_nearest_kernel<<<g, BLOCK, 0, s>>>((uint32_t *)y, (const uint32_t *)x, idx, *p, n); break;
        case 8:
            resize_nearest_kernel<<<g, BLOCK, 0, s>>>((unsigned long long *)y, (const unsigned long long *)x, idx, *p,
                                                      n);
            break;
        default: return (int)cudaErrorInvalidValue;
        }
    } else {
        switch (p->fkind) {
        case 0: resize_interp_kernel<<<g, BLOCK, 0, s>>>((float *)y, (const float *)x, idx, w, *p, n); break;
        case 1: resize_interp_kernel<<<g, BLOCK, 0, s>>>((__half *)y, (const __half *)x, idx, w, *p, n); break;
        case 2:
            resize_interp_kernel<<<g, BLOCK, 0, s>>>((__nv_bfloat16 *)y, (const __nv_bfloat16 *)x, idx, w, *p, n);
            break;
        default: return (int)cudaErrorInvalidValue;
        }
    }
    return (int)cudaGetLastError();
}
