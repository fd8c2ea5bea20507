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

// The output coordinates of linear index i, last axis fastest.
__device__ __forceinline__ void coords(uint64_t i, const AmpCudaResize &p, int64_t *c) {
    for (int d = p.rank - 1; d >= 0; d--) {
        uint64_t o = (uint64_t)p.out[d];
        c[d] = (int64_t)(i % o);
        i /= o;
    }
}

// E: an unsigned integer of the element's byte size.
template <typename E>
__global__ void resize_nearest_kernel(E *__restrict__ y, const E *__restrict__ x, const int32_t *__restrict__ idx,
                                      AmpCudaResize p, uint64_t n) {
    E ev;
    memcpy(&ev, &p.ev, sizeof ev); // the low bytes (little-endian, as the host wrote them)
    GRID_STRIDE(uint64_t, i, n) {
        int64_t c[AMP_CUDA_RESIZE_RANK], off = 0;
        coords(i, p, c);
        bool outside = false;
        for (int d = 0; d < p.rank; d++) {
            int32_t s = idx[p.tab[d] + c[d]];
            outside = outside || s < 0;
            off += (int64_t)s * p.stride[d];
        }
        y[i] = outside ? ev : x[off];
    }
}

template <typename T>
__global__ void resize_interp_kernel(T *__restrict__ y, const T *__restrict__ x, const int32_t *__restrict__ idx,
                                     const float *__restrict__ w, AmpCudaResize p, uint64_t n) {
    int combos = 1;
    for (int d = 0; d < p.rank; d++) combos *= p.taps[d];
    GRID_STRIDE(uint64_t, i, n) {
        int64_t c[AMP_CUDA_RESIZE_RANK];
        coords(i, p, c);
        float acc = 0.f;
        bool outside = false;
        for (int t = 0; t < combos && !outside; t++) {
            int rem = t; // tap t: one choice per axis, the last axis varying fastest
            float wt = 1.f;
            int64_t off = 0;
            for (int d = p.rank - 1; d >= 0; d--) {
                int nt = p.taps[d], j = rem % nt;
                rem /= nt;
                int64_t e = p.tab[d] + c[d] * nt + j;
                int32_t s = idx[e];
                outside = outside || s < 0;
                wt *= w[e];
                off += (int64_t)s * p.stride[d];
            }
            if (!outside && wt != 0.f) acc += wt * load_f(x, off);
        }
        y[i] = store_f<T>(outside ? p.extrap : acc);
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
