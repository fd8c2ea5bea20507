// Normalisation kernels: Softmax/LogSoftmax and the row normalisations (Layer, Instance,
// Group), a row per warp (rows up to 1024 elements) or per block, lanes striding the row
// (coalesced) and shuffle trees for the max and sums; a thread per row for a middle axis
// or short rows. The hot path (rows a multiple of 16 bytes, aligned, up to 16384
// elements) loads each row once in 16-byte vectors kept in registers; the general kernels
// read the row again on each pass (from L1/L2). Statistics in float32, two-pass variance
// as kernels/cpu/norm.c. BatchNormalization: inference is elementwise, training a block
// per channel (batch statistics, then y).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "kernels/cuda/device.cuh"
#include "kernels/cuda/norm.h"

enum { DT_FLOAT = 1, DT_FLOAT16 = 10, DT_BFLOAT16 = 16 }; // AmpDType numbers

// The row max skips NaN (the CPU's `if (a > m) m = a`); fmaxf does the same.
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, o));
    return v;
}

// v reduced over the row's group (a warp, or the block through sh[32]); every thread of
// the group gets the same value. Block form: called by every thread of the block.
template <bool WARP, bool MAX>
__device__ __forceinline__ float group_red(float v, float *sh) {
    v = MAX ? warp_max(v) : warp_sum(v);
    if (WARP) return v;
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    __syncthreads(); // the previous call's reads of sh are done
    if (lane == 0) sh[w] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : (MAX ? -INFINITY : 0.0f);
    return MAX ? warp_max(v) : warp_sum(v);
}

// The row loop's bounds for a row per warp (WARP) or per block.
#define ROW_LOOP(row, rows)                                                                                    \
    int tid = WARP ? threadIdx.x & 31 : threadIdx.x, nth = WARP ? 32 : blockDim.x;                         \
    int64_t row0 = WARP ? blockIdx.x * (int64_t)(blockDim.x >> 5) + (threadIdx.x >> 5) : (int64_t)blockIdx.x; \
    int64_t rstep = WARP ? (int64_t)gridDim.x * (blockDim.x >> 5) : (int64_t)gridDim.x;                     \
    for (int64_t row = row0; row < (rows); row += rstep)

// ---- Softmax / LogSoftmax -------------------------------------------------------------------

// (rows, d), along d: max, sum of exp(x - max), then the outputs.
template <typename T, bool WARP>
__global__ void softmax_row_kernel(const T *__restrict__ x, T *__restrict__ y, int64_t rows, int64_t d, bool log_out) {
    __shared__ float sh[32];
    ROW_LOOP(row, rows) {
        const T *xr = x + row * d;
        T *yr = y + row * d;
        float m = -INFINITY;
        for (int64_t j = tid; j < d; j += nth) m = fmaxf(m, ld(xr, j));
        m = group_red<WARP, true>(m, sh);
        float s = 0.0f;
        for (int64_t j = tid; j < d; j += nth) s += expf(ld(xr, j) - m);
        s = group_red<WARP, false>(s, sh);
        float ls = logf(s);
        for (int64_t j = tid; j < d; j += nth) {
            float z = ld(xr, j) - m;
            st(yr, j, log_out ? z - ls : expf(z) / s);
        }
    }
}

// (outer, d, inner) along d: a thread per (o, i).
template <typename T>
__global__ void softmax_strided_kernel(const T *__restrict__ x, T *__restrict__ y, int64_t n, int64_t d, int64_t inner,
                                       bool log_out) {
    GRID_STRIDE(t, n) {
        int64_t base = (t / inner) * d * inner + t % inner;
        const T *xb = x + base;
        T *yb = y + base;
        float m = -INFINITY, s = 0.0f;
        for (int64_t j = 0; j < d; j++) m = fmaxf(m, ld(xb, j * inner));
        for (int64_t j = 0; j < d; j++) s += expf(ld(xb, j * inner) - m);
        float ls = logf(s);
        for (int64_t j = 0; j < d; j++) {
            float z = ld(xb, j * inner) - m;
            st(yb, j * inner, log_out ? z - ls : expf(z) / s);
        }
    }
}

// ---- row normalisation: Layer / Instance / Group ---------------------------------------

// The offset of (row, col)'s parameter: rp is the row's part, computed once per row.
__device__ __forceinline__ int64_t row_part(const AmpCudaNormParam &p, int64_t row) {
    return p.mode == AMP_CUDA_NP_ROW ? row % p.n_s : p.mode == AMP_CUDA_NP_GROUP ? (row % p.groups) * p.cpg : 0;
}

__device__ __forceinline__ void param_at(const AmpCudaNormParam &p, int64_t rp, int64_t row, int64_t col, int64_t cols,
                                         int64_t *so, int64_t *bo) {
    switch (p.mode) {
    case AMP_CUDA_NP_COL:
        *so = col < p.n_s ? col : col % p.n_s;
        *bo = col < p.n_b ? col : col % p.n_b;
        break;
    case AMP_CUDA_NP_ROW: *so = *bo = rp; break;
    case AMP_CUDA_NP_GROUP: *so = *bo = rp + col / p.s; break;
    default: {
        int64_t e = row * cols + col, s = 0, b = 0;
        for (int d = p.rank - 1; d >= 0; d--) {
            int64_t i = e % p.dims[d];
            e /= p.dims[d];
            s += i * p.sstr[d], b += i * p.bstr[d];
        }
        *so = s, *bo = b;
    }
    }
}

template <typename T, bool WARP>
__global__ void rownorm_kernel(const T *__restrict__ x, const T *__restrict__ sc, const T *__restrict__ bi,
                               T *__restrict__ y, float *__restrict__ mean, float *__restrict__ inv, int64_t rows,
                               int64_t cols, AmpCudaNormParam p, float eps) {
    __shared__ float sh[32];
    ROW_LOOP(row, rows) {
        const T *xr = x + row * cols;
        float s = 0.0f;
        for (int64_t j = tid; j < cols; j += nth) s += ld(xr, j);
        float m = group_red<WARP, false>(s, sh) / (float)cols; // NaN for an empty row, as the CPU
        float q = 0.0f;
        for (int64_t j = tid; j < cols; j += nth) {
            float dv = ld(xr, j) - m;
            q += dv * dv;
        }
        float is = 1.0f / sqrtf(group_red<WARP, false>(q, sh) / (float)cols + eps);
        if (tid == 0) {
            if (mean) mean[row] = m;
            if (inv) inv[row] = is;
        }
        if (!y) continue;
        int64_t rp = row_part(p, row);
        for (int64_t j = tid; j < cols; j += nth) {
            int64_t so, bo;
            param_at(p, rp, row, j, cols, &so, &bo);
            float z = (ld(xr, j) - m) * is * ld(sc, so);
            if (bi) z += ld(bi, bo);
            st(y, row * cols + j, z);
        }
    }
}

// ---- BatchNormalization (inference) ----------------------------------------------------------

// y = x * a + b with a = scale / sqrt(var + eps), b = bias - mean * a per channel (the CPU's
// order); x is (n, c, s).
template <typename T>
__global__ void batchnorm_kernel(const T *__restrict__ x, const T *__restrict__ sc, const T *__restrict__ bi,
                                 const T *__restrict__ mu, const T *__restrict__ var, T *__restrict__ y, int64_t total,
                                 int64_t c, int64_t s, float eps) {
    GRID_STRIDE(i, total) {
        int64_t ch = (i / s) % c;
        float a = ld(sc, ch) / sqrtf(ld(var, ch) + eps), b = ld(bi, ch) - ld(mu, ch) * a;
        st(y, i, ld(x, i) * a + b);
    }
}

// ---- BatchNormalization (training) -------------------------------------------------------

// Element e of channel ch's n * s elements (batch e / s, position e % s): one division.
__device__ __forceinline__ int64_t bn_at(int64_t e, int64_t s, int64_t c, int64_t ch) {
    int64_t q = e / s;
    return (q * c + ch) * s + (e - q * s);
}

// A block per channel ch (grid-stride over channels): its n * s elements lie in n runs of
// s at (i * c + ch) * s. Mean, then the population variance around it (two passes, the
// CPU's order), then y; thread 0 stores the statistics. Deterministic: fixed block size,
// fixed per-thread order, a fixed reduction tree.
template <typename T>
__global__ void batchnorm_train_kernel(const T *__restrict__ x, const T *__restrict__ sc, const T *__restrict__ bi,
                                       const T *__restrict__ mu_in, const T *__restrict__ var_in, T *__restrict__ y,
                                       T *rmean, T *rvar, T *smean, T *svar, int64_t n, int64_t c, int64_t s,
                                       float eps, float mom) {
    __shared__ float sh[32];
    int64_t cnt = n * s;
    for (int64_t ch = blockIdx.x; ch < c; ch += gridDim.x) {
        float a = 0.0f;
        for (int64_t e = threadIdx.x; e < cnt; e += blockDim.x) a += ld(x, bn_at(e, s, c, ch));
        float m = group_red<false, false>(a, sh) / (float)cnt; // NaN for an empty channel
        float q = 0.0f;
        for (int64_t e = threadIdx.x; e < cnt; e += blockDim.x) {
            float d = ld(x, bn_at(e, s, c, ch)) - m;
            q += d * d;
        }
        float v = group_red<false, false>(q, sh) / (float)cnt;
        if (threadIdx.x == 0) {
            if (rmean) st(rmean, ch, ld(mu_in, ch) * mom + m * (1.0f - mom));
            if (rvar) st(rvar, ch, ld(var_in, ch) * mom + v * (1.0f - mom));
            if (smean) st(smean, ch, m);
            if (svar) st(svar, ch, v);
        }
        if (!y) continue;
        float ga = ld(sc, ch) / sqrtf(v + eps), gb = ld(bi, ch) - m * ga;
        for (int64_t e = threadIdx.x; e < cnt; e += blockDim.x) {
            int64_t at = bn_at(e, s, c, ch);
            st(y, at, ld(x, at) * ga + gb);
        }
    }
}

// ---- the hot path: rows cached in registers, 16-byte loads ---------------------------------
// When a row's length is a multiple of V = 16 / sizeof(T) and the pointers are 16-byte
// aligned, each thread loads its share of the row once, as up to NV vectors of V elements
// (NV * V = 32 floats), and every pass reads the registers. The pair intrinsics round as
// the scalar ones (convert.cu), so both paths store the same bits.

__device__ __forceinline__ void ldv(const float *p, float *o) {
    float4 a = *(const float4 *)p;
    o[0] = a.x, o[1] = a.y, o[2] = a.z, o[3] = a.w;
}
__device__ __forceinline__ void ldv(const __half *p, float *o) {
    uint4 u = *(const uint4 *)p;
    __half2 h[4];
    memcpy(h, &u, sizeof u);
    for (int i = 0; i < 4; i++) {
        float2 f = __half22float2(h[i]);
        o[2 * i] = f.x, o[2 * i + 1] = f.y;
    }
}
__device__ __forceinline__ void ldv(const __nv_bfloat16 *p, float *o) {
    uint4 u = *(const uint4 *)p;
    __nv_bfloat162 h[4];
    memcpy(h, &u, sizeof u);
    for (int i = 0; i < 4; i++) {
        float2 f = __bfloat1622float2(h[i]);
        o[2 * i] = f.x, o[2 * i + 1] = f.y;
    }
}
__device__ __forceinline__ void stv(float *p, const float *v) { *(float4 *)p = make_float4(v[0], v[1], v[2], v[3]); }
__device__ __forceinline__ void stv(__half *p, const float *v) {
    __half2 h[4];
    for (int i = 0; i < 4; i++) h[i] = __floats2half2_rn(v[2 * i], v[2 * i + 1]);
    uint4 u;
    memcpy(&u, h, sizeof u);
    *(uint4 *)p = u;
}
__device__ __forceinline__ void stv(__nv_bfloat16 *p, const float *v) {
    __nv_bfloat162 h[4];
    for (int i = 0; i < 4; i++) h[i] = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
    uint4 u;
    memcpy(&u, h, sizeof u);
    *(uint4 *)p = u;
}

#define VEC_OF(T) ((int)(16 / sizeof(T)))
#define NV_OF(T) (32 / VEC_OF(T))

// Softmax over rows of d elements (d % V == 0, d / V <= NV * group size).
template <typename T, bool WARP>
__global__ void softmax_vec_kernel(const T *__restrict__ x, T *__restrict__ y, int64_t rows, int64_t d, bool log_out) {
    constexpr int V = VEC_OF(T), NV = NV_OF(T);
    __shared__ float sh[32];
    ROW_LOOP(row, rows) {
        const T *xr = x + row * d;
        T *yr = y + row * d;
        int nvec = (int)(d / V);
        float v[NV][V];
        float m = -INFINITY;
#pragma unroll
        for (int k = 0; k < NV; k++) {
            int vi = tid + k * nth;
            if (vi < nvec) {
                ldv(xr + (int64_t)vi * V, v[k]);
#pragma unroll
                for (int e = 0; e < V; e++) m = fmaxf(m, v[k][e]);
            }
        }
        m = group_red<WARP, true>(m, sh);
        float s = 0.0f;
#pragma unroll
        for (int k = 0; k < NV; k++)
            if (tid + k * nth < nvec) {
#pragma unroll
                for (int e = 0; e < V; e++) {
                    float z = v[k][e] - m, ez = expf(z);
                    s += ez;
                    v[k][e] = log_out ? z : ez;
                }
            }
        s = group_red<WARP, false>(s, sh);
        float ls = logf(s);
#pragma unroll
        for (int k = 0; k < NV; k++) {
            int vi = tid + k * nth;
            if (vi < nvec) {
#pragma unroll
                for (int e = 0; e < V; e++) v[k][e] = log_out ? v[k][e] - ls : v[k][e] / s;
                stv(yr + (int64_t)vi * V, v[k]);
            }
        }
    }
}

// Row normalisation with the parameters by column (mode COL, n_s == n_b == cols: loaded as
// vectors too) or by row (mode ROW).
template <typename T, bool WARP>
__global__ void rownorm_vec_kernel(const T *__restrict__ x, const T *__restrict__ sc, const T *__restrict__ bi,
                                   T *__restrict__ y, float *__restrict__ mean, float *__restrict__ inv, int64_t rows,
                                   int64_t cols, AmpCudaNormParam p, float eps) {
    constexpr int V = VEC_OF(T), NV = NV_OF(T);
    __shared__ float sh[32];
    bool by_row = p.mode == AMP_CUDA_NP_ROW;
    ROW_LOOP(row, rows) {
        const T *xr = x + row * cols;
        int nvec = (int)(cols / V);
        float v[NV][V];
        float s = 0.0f;
#pragma unroll
        for (int k = 0; k < NV; k++) {
            int vi = tid + k * nth;
            if (vi < nvec) {
                ldv(xr + (int64_t)vi * V, v[k]);
#pragma unroll
                for (int e = 0; e < V; e++) s += v[k][e];
            }
        }
        float m = group_red<WARP, false>(s, sh) / (float)cols;
        float q = 0.0f;
#pragma unroll
        for (int k = 0; k < NV; k++)
            if (tid + k * nth < nvec) {
#pragma unroll
                for (int e = 0; e < V; e++) {
                    float dv = v[k][e] - m;
                    q += dv * dv;
                }
            }
        float is = 1.0f / sqrtf(group_red<WARP, false>(q, sh) / (float)cols + eps);
        if (tid == 0) {
            if (mean) mean[row] = m;
            if (inv) inv[row] = is;
        }
        if (!y) continue;
        int64_t rp = by_row ? row % p.n_s : 0;
        float rs = by_row ? ld(sc, rp) : 0.0f, rb = by_row && bi ? ld(bi, rp) : 0.0f;
#pragma unroll
        for (int k = 0; k < NV; k++) {
            int vi = tid + k * nth;
            if (vi < nvec) {
                float a[V], b[V];
                if (by_row) {
#pragma unroll
                    for (int e = 0; e < V; e++) a[e] = rs, b[e] = rb;
                } else {
                    ldv(sc + (int64_t)vi * V, a);
                    if (bi) ldv(bi + (int64_t)vi * V, b);
                    else
#pragma unroll
                        for (int e = 0; e < V; e++) b[e] = 0.0f;
                }
#pragma unroll
                for (int e = 0; e < V; e++) v[k][e] = (v[k][e] - m) * is * a[e] + b[e];
                stv(y + row * cols + (int64_t)vi * V, v[k]);
            }
        }
    }
}

// ---- launchers ------------------------------------------------------------------------------

static bool aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

// The block of a vector kernel's row: enough warps for nvec vectors at nv a thread, 128
// to 512 threads (each holds 32 floats in registers: a smaller block keeps more rows in
// flight per SM).
static unsigned vec_block(int64_t nvec, int nv) {
    int64_t t = ((nvec + nv - 1) / nv + 31) / 32 * 32;
    return (unsigned)(t < 128 ? 128 : t > 512 ? 512 : t);
}

static unsigned blocks_for(int64_t items, unsigned per_block) {
    int64_t g = (items + per_block - 1) / per_block;
    const int64_t cap = 65535 * 4;
    return (unsigned)(g < 1 ? 1 : g > cap ? cap : g);
}

template <typename T>
static void softmax_typed(bool log_out, const void *xv, void *yv, int64_t outer, int64_t d, int64_t inner,
                          cudaStream_t s) {
    const T *x = (const T *)xv;
    T *y = (T *)yv;
    constexpr int V = VEC_OF(T);
    bool vec = inner == 1 && d % V == 0 && aligned16(x) && aligned16(y);
    if (vec && d > 16 && d <= 32 * NV_OF(T) * V)
        softmax_vec_kernel<T, true><<<blocks_for(outer, 8), 256, 0, s>>>(x, y, outer, d, log_out);
    else if (vec && d > 16 && d <= 512 * NV_OF(T) * V)
        softmax_vec_kernel<T, false><<<blocks_for(outer, 1), vec_block(d / V, NV_OF(T)), 0, s>>>(x, y, outer, d, log_out);
    else if (inner == 1 && d > 1024)
        softmax_row_kernel<T, false><<<blocks_for(outer, 1), 512, 0, s>>>(x, y, outer, d, log_out);
    else if (inner == 1 && d > 16)
        softmax_row_kernel<T, true><<<blocks_for(outer, 8), 256, 0, s>>>(x, y, outer, d, log_out);
    else
        softmax_strided_kernel<T><<<blocks_for(outer * inner, 256), 256, 0, s>>>(x, y, outer * inner, d, inner, log_out);
}

extern "C" int amp_cuda_softmax_launch(int dtype, int log_out, const void *x, void *y, int64_t outer, int64_t d,
                                       int64_t inner, void *stream) {
    if (outer <= 0 || d <= 0 || inner <= 0) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    switch (dtype) {
    case DT_FLOAT: softmax_typed<float>(log_out != 0, x, y, outer, d, inner, s); break;
    case DT_FLOAT16: softmax_typed<__half>(log_out != 0, x, y, outer, d, inner, s); break;
    case DT_BFLOAT16: softmax_typed<__nv_bfloat16>(log_out != 0, x, y, outer, d, inner, s); break;
    default: return (int)cudaErrorInvalidValue;
    }
    return (int)cudaGetLastError();
}

template <typename T>
static void rownorm_typed(const void *x, const void *sc, const void *bi, void *y, float *mean, float *inv, int64_t rows,
                          int64_t cols, const AmpCudaNormParam *p, float eps, cudaStream_t s) {
    constexpr int V = VEC_OF(T);
    bool vec = cols % V == 0 && aligned16(x) && aligned16(y) &&
               (p->mode == AMP_CUDA_NP_ROW ||
                (p->mode == AMP_CUDA_NP_COL && p->n_s == cols && aligned16(sc) && (!bi || (p->n_b == cols && aligned16(bi)))));
    const T *tx = (const T *)x, *tsc = (const T *)sc, *tbi = (const T *)bi;
    if (vec && cols <= 32 * NV_OF(T) * V)
        rownorm_vec_kernel<T, true><<<blocks_for(rows, 8), 256, 0, s>>>(tx, tsc, tbi, (T *)y, mean, inv, rows, cols, *p, eps);
    else if (vec && cols <= 512 * NV_OF(T) * V)
        rownorm_vec_kernel<T, false><<<blocks_for(rows, 1), vec_block(cols / V, NV_OF(T)), 0, s>>>(tx, tsc, tbi, (T *)y, mean,
                                                                                                inv, rows, cols, *p, eps);
    else if (cols > 1024)
        rownorm_kernel<T, false><<<blocks_for(rows, 1), 512, 0, s>>>((const T *)x, (const T *)sc, (const T *)bi,
                                                                     (T *)y, mean, inv, rows, cols, *p, eps);
    else
        rownorm_kernel<T, true><<<blocks_for(rows, 8), 256, 0, s>>>((const T *)x, (const T *)sc, (const T *)bi, (T *)y,
                                                                    mean, inv, rows, cols, *p, eps);
}

extern "C" int amp_cuda_rownorm_launch(int dtype, const void *x, const void *scale, const void *bias, void *y,
                                       float *mean, float *inv, int64_t rows, int64_t cols, const AmpCudaNormParam *p,
                                       float eps, void *stream) {
    if (rows <= 0 || (!y && !mean && !inv)) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    switch (dtype) {
    case DT_FLOAT: rownorm_typed<float>(x, scale, bias, y, mean, inv, rows, cols, p, eps, s); break;
    case DT_FLOAT16: rownorm_typed<__half>(x, scale, bias, y, mean, inv, rows, cols, p, eps, s); break;
    case DT_BFLOAT16: rownorm_typed<__nv_bfloat16>(x, scale, bias, y, mean, inv, rows, cols, p, eps, s); break;
    default: return (int)cudaErrorInvalidValue;
    }
    return (int)cudaGetLastError();
}

extern "C" int amp_cuda_batchnorm_launch(int dtype, const void *x, const void *scale, const void *bias,
                                         const void *mean, const void *var, void *y, int64_t n, int64_t c, int64_t s,
                                         float eps, void *stream) {
    int64_t total = n * c * s;
    if (total <= 0) return 0;
    cudaStream_t cs = (cudaStream_t)stream;
    unsigned g = blocks_for(total, 256);
#define BN(T)                                                                                                       \
    batchnorm_kernel<T><<<g, 256, 0, cs>>>((const T *)x, (const T *)scale, (const T *)bias, (const T *)mean, \
                                           (const T *)var, (T *)y, total, c, s, eps)
    switch (dtype) {
    case DT_FLOAT: BN(float); break;
    case DT_FLOAT16: BN(__half); break;
    case DT_BFLOAT16: BN(__nv_bfloat16); break;
    default: return (int)cudaErrorInvalidValue;
    }
#undef BN
    return (int)cudaGetLastError();
}

extern "C" int amp_cuda_batchnorm_train_launch(int dtype, const void *x, const void *scale, const void *bias,
                                               const void *mean_in, const void *var_in, void *y, void *const *stats,
                                               int64_t n, int64_t c, int64_t s, float eps, float momentum,
                                               void *stream) {
    if (c <= 0) return 0;
    cudaStream_t cs = (cudaStream_t)stream;
    unsigned g = blocks_for(c, 1);
#define BNT(T)                                                                                                      \
    batchnorm_train_kernel<T><<<g, 512, 0, cs>>>((const T *)x, (const T *)scale, (const T *)bias,                  \
                                                 (const T *)mean_in, (const T *)var_in, (T *)y, (T *)stats[0],    \
                                                 (T *)stats[1], (T *)stats[2], (T *)stats[3], n, c, s, eps, momentum)
    switch (dtype) {
    case DT_FLOAT: BNT(float); break;
    case DT_FLOAT16: BNT(__half); break;
    case DT_BFLOAT16: BNT(__nv_bfloat16); break;
    default: return (int)cudaErrorInvalidValue;
    }
#undef BNT
    return (int)cudaGetLastError();
}
