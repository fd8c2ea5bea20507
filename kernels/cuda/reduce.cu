// Reduction kernels: Reduce* (runtime kind, float32 accumulation), ArgMax/ArgMin; the
// launchers pick the kernel from the layout:
// - inner == 1 (the reduced axes are the last ones): a row per warp (r <= 1024) or per
//   block, lanes striding the row (coalesced), then a shuffle tree;
// - inner > 1 (a middle block of axes), or short rows: a thread per output, looping
//   over the reduced axis (neighbouring threads read neighbouring elements);
// - any other set of axes: a thread per output walking the reduced index space.
// NaN propagates through max and min as in numpy (kernels/cpu/reduce.c).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "kernels/cuda/device.cuh"
#include "kernels/cuda/reduce.h"

enum { DT_FLOAT = 1, DT_FLOAT16 = 10, DT_BFLOAT16 = 16 }; // AmpDType numbers

// ---- the reduction algebra ------------------------------------------------------------
// An element is transformed (red_pre), combined into an accumulator (red_comb: also how
// two partial accumulators combine), and the result finished (red_fin). LogSumExp takes
// two passes: the max (combined as MAX), then the sum of exp(a - max) (as SUM).

__device__ __forceinline__ float red_init(int ck) {
    return ck == AMP_CUDA_RED_PROD ? 1.0f : ck == AMP_CUDA_RED_MAX ? -INFINITY : ck == AMP_CUDA_RED_MIN ? INFINITY : 0.0f;
}

__device__ __forceinline__ float red_comb(int ck, float s, float a) {
    switch (ck) {
    case AMP_CUDA_RED_PROD: return s * a;
    case AMP_CUDA_RED_MAX: return isnan(s) || !(isnan(a) || a > s) ? s : a;
    case AMP_CUDA_RED_MIN: return isnan(s) || !(isnan(a) || a < s) ? s : a;
    default: return s + a;
    }
}

// The element as the main pass combines it (mx: LogSumExp's max of the output).
__device__ __forceinline__ float red_pre(int kind, float a, float mx) {
    switch (kind) {
    case AMP_CUDA_RED_SUMSQ:
    case AMP_CUDA_RED_L2: return a * a;
    case AMP_CUDA_RED_L1: return fabsf(a);
    case AMP_CUDA_RED_LOGSUMEXP: return isinf(mx) ? 0.0f : expf(a - mx);
    default: return a;
    }
}

__device__ __forceinline__ float red_fin(int kind, float s, int64_t count, float mx) {
    switch (kind) {
    case AMP_CUDA_RED_MEAN: return s / (float)count; // NaN for an empty set
    case AMP_CUDA_RED_L2: return sqrtf(s);
    case AMP_CUDA_RED_LOGSUM: return logf(s);
    case AMP_CUDA_RED_LOGSUMEXP: return isinf(mx) || isnan(mx) ? mx : mx + logf(s);
    default: return s;
    }
}

// How the main pass combines: LogSumExp's is a sum.
__device__ __forceinline__ int main_comb(int kind) { return kind == AMP_CUDA_RED_LOGSUMEXP ? AMP_CUDA_RED_SUM : kind; }

__device__ __forceinline__ float warp_comb(int ck, float v) {
    for (int o = 16; o > 0; o >>= 1) v = red_comb(ck, v, __shfl_xor_sync(FULL_MASK, v, o));
    return v;
}

// Combines v over the row's group (a warp, or the whole block through sh[32]); every
// thread of the group gets the same result. Block form: called by all threads.
template <bool WARP>
__device__ __forceinline__ float group_comb(int ck, float v, float *sh) {
    v = warp_comb(ck, v);
    if (WARP) return v;
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    __syncthreads(); // the previous call's reads of sh are done
    if (lane == 0) sh[w] = v;
    __syncthreads();
    return warp_comb(ck, lane < nw ? sh[lane] : red_init(ck));
}

// ---- Reduce* kernels --------------------------------------------------------------------

// (rows, r) -> (rows): a row per warp (WARP) or per block.
template <typename T, bool WARP>
__global__ void red_row_kernel(int kind, const T *__restrict__ x, T *__restrict__ y, int64_t rows, int64_t r,
                               int64_t count) {
    __shared__ float sh[32];
    int tid = WARP ? threadIdx.x & 31 : threadIdx.x, nth = WARP ? 32 : blockDim.x;
    int64_t row0 = WARP ? blockIdx.x * (int64_t)(blockDim.x >> 5) + (threadIdx.x >> 5) : blockIdx.x;
    int64_t step = WARP ? (int64_t)gridDim.x * (blockDim.x >> 5) : gridDim.x;
    int ck = main_comb(kind);
    for (int64_t row = row0; row < rows; row += step) {
        const T *xr = x + row * r;
        float mx = 0.0f;
        if (kind == AMP_CUDA_RED_LOGSUMEXP) {
            float m = -INFINITY;
            for (int64_t j = tid; j < r; j += nth) m = red_comb(AMP_CUDA_RED_MAX, m, ld(xr, j));
            mx = group_comb<WARP>(AMP_CUDA_RED_MAX, m, sh);
        }
        float s = red_init(ck);
        for (int64_t j = tid; j < r; j += nth) s = red_comb(ck, s, red_pre(kind, ld(xr, j), mx));
        s = group_comb<WARP>(ck, s, sh);
        if (tid == 0) st(y, row, red_fin(kind, s, count, mx));
    }
}

// (outer, r, inner) -> (outer, inner): a thread per output.
template <typename T>
__global__ void red_strided_kernel(int kind, const T *__restrict__ x, T *__restrict__ y, int64_t n_out, int64_t r,
                                   int64_t inner, int64_t count) {
    int ck = main_comb(kind);
    GRID_STRIDE(t, n_out) {
        const T *xb = x + (t / inner) * r * inner + t % inner;
        float mx = 0.0f;
        if (kind == AMP_CUDA_RED_LOGSUMEXP) {
            mx = -INFINITY;
            for (int64_t j = 0; j < r; j++) mx = red_comb(AMP_CUDA_RED_MAX, mx, ld(xb, j * inner));
        }
        float s = red_init(ck);
        for (int64_t j = 0; j < r; j++) s = red_comb(ck, s, red_pre(kind, ld(xb, j * inner), mx));
        st(y, t, red_fin(kind, s, count, mx));
    }
}

// Any set of axes: a thread per output, an odometer over the reduced dims.
template <typename T>
__global__ void red_general_kernel(int kind, const T *__restrict__ x, T *__restrict__ y, AmpCudaRedShape s) {
    int ck = main_comb(kind);
    GRID_STRIDE(t, s.n_out) {
        int64_t base = 0, rem = t;
        for (int d = s.n_keep - 1; d >= 0; d--) {
            base += rem % s.keep_dims[d] * s.keep_str[d];
            rem /= s.keep_dims[d];
        }
        float mx = 0.0f, acc = red_init(ck);
        for (int pass = kind == AMP_CUDA_RED_LOGSUMEXP ? 0 : 1; pass < 2; pass++) {
            int64_t idx[AMP_CUDA_RED_MAX_RANK] = {0}, off = base;
            float a = pass ? red_init(ck) : -INFINITY;
            for (int64_t j = 0; j < s.count; j++) {
                float v = ld(x, off);
                a = pass ? red_comb(ck, a, red_pre(kind, v, mx)) : red_comb(AMP_CUDA_RED_MAX, a, v);
                for (int d = s.n_red - 1; d >= 0; d--) { // next reduced index
                    off += s.red_str[d];
                    if (++idx[d] < s.red_dims[d]) break;
                    off -= s.red_str[d] * s.red_dims[d];
                    idx[d] = 0;
                }
            }
            if (pass) acc = a;
            else mx = a;
        }
        st(y, t, red_fin(kind, acc, s.count, mx));
    }
}

// ---- ArgMax / ArgMin ----------------------------------------------------------------------

// Whether candidate (a, ia) beats (b, ib); index -1 is "none yet". NaN beats numbers; among
// NaNs and among equal values the lower index wins, the higher with `last` (the order the
// CPU's sequential scan gives, so any split of the row agrees with it).
__device__ __forceinline__ bool arg_better(float a, int64_t ia, float b, int64_t ib, bool is_max, bool last) {
    if (ia < 0) return false;
    if (ib < 0) return true;
    bool na = isnan(a), nb = isnan(b);
    if (na || nb) return na && nb ? (last ? ia > ib : ia < ib) : na;
    if (a != b) return is_max ? a > b : a < b;
    return last ? ia > ib : ia < ib;
}

// (outer, d, inner) -> (outer, inner): a thread per output.
template <typename T>
__global__ void arg_strided_kernel(bool is_max, bool last, const T *__restrict__ x, int64_t *__restrict__ y,
                                   int64_t n_out, int64_t d, int64_t inner) {
    GRID_STRIDE(t, n_out) {
        const T *xb = x + (t / inner) * d * inner + t % inner;
        float best = 0.0f;
        int64_t bi = -1;
        for (int64_t j = 0; j < d; j++) {
            float a = ld(xb, j * inner);
            if (arg_better(a, j, best, bi, is_max, last)) best = a, bi = j;
        }
        y[t] = bi;
    }
}

// (rows, d) -> (rows): a row per warp or per block, then a shuffle tree of (value, index).
template <typename T, bool WARP>
__global__ void arg_row_kernel(bool is_max, bool last, const T *__restrict__ x, int64_t *__restrict__ y, int64_t rows,
                               int64_t d) {
    __shared__ float shv[32];
    __shared__ int64_t shi[32];
    int tid = WARP ? threadIdx.x & 31 : threadIdx.x, nth = WARP ? 32 : blockDim.x;
    int64_t row0 = WARP ? blockIdx.x * (int64_t)(blockDim.x >> 5) + (threadIdx.x >> 5) : blockIdx.x;
    int64_t step = WARP ? (int64_t)gridDim.x * (blockDim.x >> 5) : gridDim.x;
    int lane = threadIdx.x & 31;
    for (int64_t row = row0; row < rows; row += step) {
        const T *xr = x + row * d;
        float best = 0.0f;
        int64_t bi = -1;
        for (int64_t j = tid; j < d; j += nth) {
            float a = ld(xr, j);
            if (arg_better(a, j, best, bi, is_max, last)) best = a, bi = j;
        }
        for (int pass = 0; pass < (WARP ? 1 : 2); pass++) {
            if (pass) { // the block: warp winners through shared memory
                __syncthreads();
                if (lane == 0) shv[threadIdx.x >> 5] = best, shi[threadIdx.x >> 5] = bi;
                __syncthreads();
                bool have = lane < (int)(blockDim.x >> 5);
                best = have ? shv[lane] : 0.0f;
                bi = have ? shi[lane] : -1;
            }
            for (int o = 16; o > 0; o >>= 1) {
                float b = __shfl_xor_sync(FULL_MASK, best, o);
                int64_t ib = __shfl_xor_sync(FULL_MASK, bi, o);
                if (arg_better(b, ib, best, bi, is_max, last)) best = b, bi = ib;
            }
        }
        if (tid == 0) y[row] = bi;
    }
}

// ---- launchers ------------------------------------------------------------------------------

static unsigned blocks_for(int64_t items, unsigned per_block) {
    int64_t g = (items + per_block - 1) / per_block;
    const int64_t cap = 65535 * 4;
    return (unsigned)(g < 1 ? 1 : g > cap ? cap : g);
}

template <typename T>
static void reduce_typed(int kind, const void *xv, void *yv, const AmpCudaRedShape *s, cudaStream_t stream) {
    const T *x = (const T *)xv;
    T *y = (T *)yv;
    if (s->general) {
        red_general_kernel<T><<<blocks_for(s->n_out, 256), 256, 0, stream>>>(kind, x, y, *s);
    } else if (s->inner == 1 && s->r > 1024) {
        red_row_kernel<T, false><<<blocks_for(s->outer, 1), 512, 0, stream>>>(kind, x, y, s->outer, s->r, s->count);
    } else if (s->inner == 1 && s->r > 16) {
        red_row_kernel<T, true><<<blocks_for(s->outer, 8), 256, 0, stream>>>(kind, x, y, s->outer, s->r, s->count);
    } else {
        red_strided_kernel<T><<<blocks_for(s->n_out, 256), 256, 0, stream>>>(kind, x, y, s->n_out, s->r, s->inner,
                                                                              s->count);
    }
}

extern "C" int amp_cuda_reduce_launch(int kind, int dtype, const void *x, void *y, const AmpCudaRedShape *s,
                                      void *stream) {
    if (s->n_out <= 0) return 0;
    cudaStream_t cs = (cudaStream_t)stream;
    switch (dtype) {
    case DT_FLOAT: reduce_typed<float>(kind, x, y, s, cs); break;
    case DT_FLOAT16: reduce_typed<__half>(kind, x, y, s, cs); break;
    case DT_BFLOAT16: reduce_typed<__nv_bfloat16>(kind, x, y, s, cs); break;
    default: return (int)cudaErrorInvalidValue;
    }
    return (int)cudaGetLastError();
}

template <typename T>
static void arg_typed(bool is_max, bool last, const void *xv, int64_t *y, int64_t outer, int64_t d, int64_t inner,
                      cudaStream_t stream) {
    const T *x = (const T *)xv;
    if (inner == 1 && d > 1024)
        arg_row_kernel<T, false><<<blocks_for(outer, 1), 512, 0, stream>>>(is_max, last, x, y, outer, d);
    else if (inner == 1 && d > 16)
        arg_row_kernel<T, true><<<blocks_for(outer, 8), 256, 0, stream>>>(is_max, last, x, y, outer, d);
    else
        arg_strided_kernel<T><<<blocks_for(outer * inner, 256), 256, 0, stream>>>(is_max, last, x, y, outer * inner, d,
                                                                                   inner);
}

extern "C" int amp_cuda_argreduce_launch(int is_max, int last, int dtype, const void *x, int64_t *y, int64_t outer,
                                         int64_t d, int64_t inner, void *stream) {
    if (outer <= 0 || inner <= 0 || d <= 0) return 0;
    cudaStream_t cs = (cudaStream_t)stream;
    switch (dtype) {
    case DT_FLOAT: arg_typed<float>(is_max != 0, last != 0, x, y, outer, d, inner, cs); break;
    case DT_FLOAT16: arg_typed<__half>(is_max != 0, last != 0, x, y, outer, d, inner, cs); break;
    case DT_BFLOAT16: arg_typed<__nv_bfloat16>(is_max != 0, last != 0, x, y, outer, d, inner, cs); break;
    default: return (int)cudaErrorInvalidValue;
    }
    return (int)cudaGetLastError();
}
