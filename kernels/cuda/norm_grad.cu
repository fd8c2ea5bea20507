// Backward kernels of the normalisations. SoftmaxGrad_13: a row per warp (rows up to 1024)
// or per block, or a thread per (outer, inner) pair for a middle axis. LayerNormalizationGrad
// in three launches: a row per warp / block (the statistics, the row sums of g and g * xh,
// dx), then the column sums of dy * xh and dy over fixed row ranges (a thread per column:
// coalesced), then the ranges added in order per column. Sums in float32; no atomics.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "kernels/cuda/device.cuh"
#include "kernels/cuda/norm_grad.h"

enum { DT_FLOAT = 1, DT_FLOAT16 = 10, DT_BFLOAT16 = 16 }; // AmpDType numbers

// v summed over the row's group (a warp, or the block through sh[32]); every thread of the
// group gets it. Block form: called by every thread of the block.
template <bool WARP>
__device__ __forceinline__ float group_sum(float v, float *sh) {
    v = warp_sum(v);
    if (WARP) return v;
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    return warp_sum(lane < nw ? sh[lane] : 0.0f);
}

#define ROW_LOOP(row, rows)                                                                                    \
    int tid = WARP ? threadIdx.x & 31 : threadIdx.x, nth = WARP ? 32 : blockDim.x;                         \
    int64_t row0 = WARP ? blockIdx.x * (int64_t)(blockDim.x >> 5) + (threadIdx.x >> 5) : (int64_t)blockIdx.x; \
    int64_t rstep = WARP ? (int64_t)gridDim.x * (blockDim.x >> 5) : (int64_t)gridDim.x;                     \
    for (int64_t row = row0; row < (rows); row += rstep)

static unsigned blocks_for(int64_t items, unsigned per_block) {
    int64_t g = (items + per_block - 1) / per_block;
    const int64_t cap = 65535 * 4;
    return (unsigned)(g < 1 ? 1 : g > cap ? cap : g);
}

// ---- SoftmaxGrad_13 ----------------------------------------------------------------------------

template <typename T, bool WARP>
__global__ void softmax_grad_row_kernel(const T *__restrict__ dy, const T *__restrict__ y, T *__restrict__ dx,
                                        int64_t rows, int64_t d) {
    __shared__ float sh[32];
    ROW_LOOP(row, rows) {
        int64_t b = row * d;
        float s = 0.0f;
        for (int64_t j = tid; j < d; j += nth) s += ld(dy, b + j) * ld(y, b + j);
        s = group_sum<WARP>(s, sh);
        for (int64_t j = tid; j < d; j += nth) st(dx, b + j, ld(y, b + j) * (ld(dy, b + j) - s));
    }
}

template <typename T>
__global__ void softmax_grad_strided_kernel(const T *__restrict__ dy, const T *__restrict__ y, T *__restrict__ dx,
                                            int64_t n, int64_t d, int64_t inner) {
    GRID_STRIDE(t, n) {
        int64_t b = (t / inner) * d * inner + t % inner;
        float s = 0.0f;
        for (int64_t j = 0; j < d; j++) s += ld(dy, b + j * inner) * ld(y, b + j * inner);
        for (int64_t j = 0; j < d; j++) {
            int64_t at = b + j * inner;
            st(dx, at, ld(y, at) * (ld(dy, at) - s));
        }
    }
}

template <typename T>
static void softmax_grad_typed(const void *dyv, const void *yv, void *dxv, int64_t outer, int64_t d, int64_t inner,
                               cudaStream_t s) {
    const T *dy = (const T *)dyv, *y = (const T *)yv;
    T *dx = (T *)dxv;
    if (inner == 1 && d > 1024)
        softmax_grad_row_kernel<T, false><<<blocks_for(outer, 1), 512, 0, s>>>(dy, y, dx, outer, d);
    else if (inner == 1 && d > 16)
        softmax_grad_row_kernel<T, true><<<blocks_for(outer, 8), 256, 0, s>>>(dy, y, dx, outer, d);
    else
        softmax_grad_strided_kernel<T><<<blocks_for(outer * inner, 256), 256, 0, s>>>(dy, y, dx, outer * inner, d,
                                                                                      inner);
}

extern "C" int amp_cuda_softmax_grad_launch(int dtype, const void *dy, const void *y, void *dx, int64_t outer,
                                            int64_t d, int64_t inner, void *stream) {
    if (outer <= 0 || d <= 0 || inner <= 0) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    switch (dtype) {
    case DT_FLOAT: softmax_grad_typed<float>(dy, y, dx, outer, d, inner, s); break;
    case DT_FLOAT16: softmax_grad_typed<__half>(dy, y, dx, outer, d, inner, s); break;
    case DT_BFLOAT16: softmax_grad_typed<__nv_bfloat16>(dy, y, dx, outer, d, inner, s); break;
    default: return (int)cudaErrorInvalidValue;
    }
    return (int)cudaGetLastError();
}

// ---- LayerNormalizationGrad ------------------------------------------------------------------

// A statistic of the row: float32 storage, or T's.
template <typename T>
__device__ __forceinline__ float ld_stat(const void *p, bool f32, int64_t i) {
    return f32 ? ((const float *)p)[i] : ld((const T *)p, i);
}

// Per row: m and is (given, or two passes over x), kept in wm / wi; dx where wanted.
template <typename T, bool WARP>
__global__ void lngrad_row_kernel(const T *__restrict__ dy, const T *__restrict__ x, const T *__restrict__ sc,
                                  const void *mean, const void *inv, bool f32, T *__restrict__ dx,
                                  float *__restrict__ wm, float *__restrict__ wi, int64_t rows, int64_t cols,
                                  float eps) {
    __shared__ float sh[32];
    ROW_LOOP(row, rows) {
        const T *xr = x + row * cols, *dyr = dy + row * cols;
        float m, is;
        if (mean && inv) {
            m = ld_stat<T>(mean, f32, row), is = ld_stat<T>(inv, f32, row);
        } else {
            float s = 0.0f;
            for (int64_t j = tid; j < cols; j += nth) s += ld(xr, j);
            m = group_sum<WARP>(s, sh) / (float)cols;
            float q = 0.0f;
            for (int64_t j = tid; j < cols; j += nth) {
                float d = ld(xr, j) - m;
                q += d * d;
            }
            is = 1.0f / sqrtf(group_sum<WARP>(q, sh) / (float)cols + eps);
        }
        if (tid == 0) wm[row] = m, wi[row] = is;
        if (!dx) continue;
        float sg = 0.0f, sgx = 0.0f;
        for (int64_t j = tid; j < cols; j += nth) {
            float g = ld(dyr, j) * ld(sc, j);
            sg += g, sgx += g * (ld(xr, j) - m) * is;
        }
        sg = group_sum<WARP>(sg, sh) / (float)cols;
        sgx = group_sum<WARP>(sgx, sh) / (float)cols;
        for (int64_t j = tid; j < cols; j += nth) {
            float xh = (ld(xr, j) - m) * is, g = ld(dyr, j) * ld(sc, j);
            st(dx, row * cols + j, is * (g - sg - xh * sgx));
        }
    }
}

// Column sums over row range blockIdx.y of `chunks`: part[ch * cols + c] (dy * xh) and
// part[(chunks + ch) * cols + c] (dy).
template <typename T>
__global__ void lngrad_col_kernel(const T *__restrict__ dy, const T *__restrict__ x, const float *__restrict__ wm,
                                  const float *__restrict__ wi, float *__restrict__ part, int64_t rows, int64_t cols,
                                  int64_t chunks) {
    int64_t ch = blockIdx.y, r0, r1;
    amp_cuda_lngrad_range(ch, chunks, rows, &r0, &r1);
    GRID_STRIDE(c, cols) {
        float a = 0.0f, b = 0.0f;
        for (int64_t r = r0; r < r1; r++) {
            float d = ld(dy, r * cols + c);
            a += d * (ld(x, r * cols + c) - wm[r]) * wi[r];
            b += d;
        }
        part[ch * cols + c] = a, part[(chunks + ch) * cols + c] = b;
    }
}

template <typename T>
__global__ void lngrad_col_finish_kernel(const float *__restrict__ part, T *dscale, T *dbias, int64_t cols,
                                         int64_t chunks) {
    GRID_STRIDE(c, cols) {
        float a = 0.0f, b = 0.0f;
        for (int64_t ch = 0; ch < chunks; ch++) a += part[ch * cols + c], b += part[(chunks + ch) * cols + c];
        if (dscale) st(dscale, c, a);
        if (dbias) st(dbias, c, b);
    }
}

template <typename T>
static void lngrad_typed(const void *dy, const void *x, const void *sc, const void *mean, const void *inv, bool f32,
                         void *dx, void *dscale, void *dbias, int64_t rows, int64_t cols, float eps, int64_t chunks,
                         float *ws, cudaStream_t s) {
    float *wm = ws, *wi = ws + rows, *part = ws + 2 * rows;
    const T *tdy = (const T *)dy, *tx = (const T *)x, *tsc = (const T *)sc;
    if (rows > 0) {
        if (cols > 1024)
            lngrad_row_kernel<T, false><<<blocks_for(rows, 1), 512, 0, s>>>(tdy, tx, tsc, mean, inv, f32, (T *)dx, wm,
                                                                            wi, rows, cols, eps);
        else
            lngrad_row_kernel<T, true><<<blocks_for(rows, 8), 256, 0, s>>>(tdy, tx, tsc, mean, inv, f32, (T *)dx, wm,
                                                                           wi, rows, cols, eps);
    }
    if (!dscale && !dbias) return;
    dim3 grid(blocks_for(cols, 256) < 65535 ? blocks_for(cols, 256) : 65535, (unsigned)chunks);
    lngrad_col_kernel<T><<<grid, 256, 0, s>>>(tdy, tx, wm, wi, part, rows, cols, chunks);
    lngrad_col_finish_kernel<T><<<blocks_for(cols, 256), 256, 0, s>>>(part, (T *)dscale, (T *)dbias, cols, chunks);
}

extern "C" int amp_cuda_lngrad_launch(int dtype, const void *dy, const void *x, const void *scale, const void *mean,
                                      const void *inv, int stats_f32, void *dx, void *dscale, void *dbias,
                                      int64_t rows, int64_t cols, float eps, int64_t chunks, float *ws, void *stream) {
    if (cols <= 0 || rows < 0 || chunks < 1 || chunks > 65535) return cols <= 0 ? 0 : (int)cudaErrorInvalidValue;
    cudaStream_t s = (cudaStream_t)stream;
    bool f32 = stats_f32 != 0;
#define LNG(T) lngrad_typed<T>(dy, x, scale, mean, inv, f32, dx, dscale, dbias, rows, cols, eps, chunks, ws, s)
    switch (dtype) {
    case DT_FLOAT: LNG(float); break;
    case DT_FLOAT16: LNG(__half); break;
    case DT_BFLOAT16: LNG(__nv_bfloat16); break;
    default: return (int)cudaErrorInvalidValue;
    }
#undef LNG
    return (int)cudaGetLastError();
}
