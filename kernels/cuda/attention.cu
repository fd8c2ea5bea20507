// The attention family's own kernels: the softmax between the two cuBLASLt products (a
// block per row of scores, float32 throughout, P rounded once on store) and the copies
// between the (B, seq, H * size) and (B, H, seq, size) layouts, with the KV cache's
// concatenation. The products are gemm.c's.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <float.h>
#include <math.h>
#include <stdint.h>

#include "kernels/cuda/device.cuh"
#include "kernels/cuda/attention.h"

// AmpDType numbers
enum { DT_FLOAT = 1, DT_UINT8 = 2, DT_INT32 = 6, DT_INT64 = 7, DT_BOOL = 9, DT_FLOAT16 = 10, DT_BFLOAT16 = 16 };
// com.microsoft's mask kinds (ops/attn_geom.h's MaskKind)
enum { MK_NONE, MK_END, MK_END_START, MK_RAW2, MK_RAW3 };

// ai.onnx's mask as an additive value: bool false excludes the key; floats add themselves.
__device__ __forceinline__ float mask_val(const uint8_t *p, int64_t i) { return p[i] ? 0.0f : -INFINITY; }
__device__ __forceinline__ float mask_val(const float *p, int64_t i) { return p[i]; }
__device__ __forceinline__ float mask_val(const __half *p, int64_t i) { return __half2float(p[i]); }
__device__ __forceinline__ float mask_val(const __nv_bfloat16 *p, int64_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ float mask_val(const int32_t *p, int64_t i) { return (float)p[i]; }
__device__ __forceinline__ float mask_val(const int64_t *p, int64_t i) { return (float)p[i]; }
// com.microsoft's mask entries as integers (positions, or > 0: attend)
template <typename TM> __device__ __forceinline__ int64_t mask_int(const TM *p, int64_t i) { return (int64_t)p[i]; }
template <> __device__ __forceinline__ int64_t mask_int(const __half *p, int64_t i) {
    return (int64_t)__half2float(p[i]);
}
template <> __device__ __forceinline__ int64_t mask_int(const __nv_bfloat16 *p, int64_t i) {
    return (int64_t)__bfloat162float(p[i]);
}

// v reduced over the block (max or sum); every thread gets the result. The leading sync
// lets the previous call's readers of sh finish.
template <bool MAX> __device__ __forceinline__ float block_red(float v, float *sh) {
    for (int o = 16; o > 0; o >>= 1) {
        float w = __shfl_xor_sync(FULL_MASK, v, o);
        v = MAX ? fmaxf(v, w) : v + w;
    }
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    __syncthreads();
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : (MAX ? -INFINITY : 0.0f);
    for (int o = 16; o > 0; o >>= 1) {
        float w = __shfl_xor_sync(FULL_MASK, v, o);
        v = MAX ? fmaxf(v, w) : v + w;
    }
    return v;
}

static __device__ __forceinline__ int64_t clamp64(int64_t v, int64_t lo, int64_t hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

// com.microsoft's bias of key j for row (b, h, i): the mask's filter value, -FLT_MAX
// past the causal frontier, then attention_bias (the CPU's ort_bias).
template <typename TP, typename TM>
__device__ __forceinline__ float ort_bias(const AmpCudaAttnSoftmax &a, const TM *mask, int64_t b, int64_t h,
                                          int64_t i, int64_t j, int64_t start, int64_t end) {
    float v = 0.0f;
    if (a.ort_kind == MK_RAW2) v = mask_int(mask, b * a.T + j) > 0 ? 0.0f : a.filter;
    else if (a.ort_kind == MK_RAW3) v = mask_int(mask, (b * a.S + i) * a.T + j) > 0 ? 0.0f : a.filter;
    else if (j >= end || j < start) v = a.filter;
    if (a.causal && j > i + a.offset) v = -FLT_MAX;
    if (a.ab) v += ld((const TP *)a.ab, b * a.ab_sb + h * a.ab_sh + i * a.T + j);
    return v;
}

// One row per block: the biased scores are written back into x (each thread rereads
// only its own entries), then the max, the sum of exp and P. P may alias x (float32):
// entry j is written by the thread that read it.
template <typename TP, typename TM>
__global__ void attn_softmax(float *__restrict__ sc, TP *p, AmpCudaAttnSoftmax a, const TM *__restrict__ mask) {
    __shared__ float sh[32];
    for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
        int64_t i = r % a.S, bh = r / a.S, h = bh % a.Hq, b = bh / a.Hq;
        float *x = sc + r * a.T;
        const TM *mr = mask && !a.ort ? mask + b * a.ms[0] + h * a.ms[1] + i * a.ms[2] : nullptr;
        int64_t end = a.T, start = 0;
        if (a.ort && (a.ort_kind == MK_END || a.ort_kind == MK_END_START)) end = clamp64(mask_int(mask, b), 0, a.T);
        if (a.ort && a.ort_kind == MK_END_START) start = clamp64(mask_int(mask, a.B + b), 0, a.T);
        bool all_masked = true;
        float m = -INFINITY;
        for (int64_t j = threadIdx.x; j < a.T; j += blockDim.x) {
            float v = x[j], bias = 0.0f;
            if (a.softcap > 0.0f) v = a.softcap * tanhf(v / a.softcap);
            if (a.ort) bias = ort_bias<TP, TM>(a, mask, b, h, i, j, start, end);
            if (mr) bias = j < a.Tm ? mask_val(mr, j * a.ms[3]) : -INFINITY;
            if (!a.ort && a.causal && j > i + a.offset) bias += -INFINITY;
            all_masked = all_masked && bias == -INFINITY;
            v += bias;
            x[j] = v;
            m = fmaxf(m, v);
        }
        m = block_red<true>(m, sh);
        bool zero = (a.has_bias && a.zero_masked_rows && !__syncthreads_or(!all_masked)) || m == -INFINITY;
        float s = 0.0f;
        if (!zero)
            for (int64_t j = threadIdx.x; j < a.T; j += blockDim.x) s += expf(x[j] - m);
        s = block_red<false>(s, sh);
        float inv = zero ? 0.0f : 1.0f / s;
        TP *pr = p + r * a.ldp;
        for (int64_t j = threadIdx.x; j < a.T; j += blockDim.x) st(pr, j, zero ? 0.0f : expf(x[j] - m) * inv);
    }
}

template <typename TP, typename TM>
static int softmax_as(float *sc, void *p, const AmpCudaAttnSoftmax *a, cudaStream_t s) {
    attn_softmax<TP, TM><<<amp_cuda_attn_softmax_blocks(a->rows), amp_cuda_attn_softmax_threads(a->T), 0, s>>>(
        sc, (TP *)p, *a, (const TM *)a->mask);
    return (int)cudaGetLastError();
}

template <typename TP> static int softmax_p(float *sc, void *p, const AmpCudaAttnSoftmax *a, cudaStream_t s) {
    switch (a->mask ? a->mask_dtype : DT_FLOAT) {
    case DT_BOOL:
    case DT_UINT8: return softmax_as<TP, uint8_t>(sc, p, a, s);
    case DT_FLOAT: return softmax_as<TP, float>(sc, p, a, s);
    case DT_FLOAT16: return softmax_as<TP, __half>(sc, p, a, s);
    case DT_BFLOAT16: return softmax_as<TP, __nv_bfloat16>(sc, p, a, s);
    case DT_INT32: return softmax_as<TP, int32_t>(sc, p, a, s);
    case DT_INT64: return softmax_as<TP, int64_t>(sc, p, a, s);
    default: return (int)cudaErrorInvalidValue;
    }
}

extern "C" int amp_cuda_attn_softmax_launch(float *scores, void *p, const AmpCudaAttnSoftmax *a, void *stream) {
    if (a->rows <= 0 || a->T <= 0) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    switch (a->p_dtype) {
    case DT_FLOAT: return softmax_p<float>(scores, p, a, s);
    case DT_FLOAT16: return softmax_p<__half>(scores, p, a, s);
    case DT_BFLOAT16: return softmax_p<__nv_bfloat16>(scores, p, a, s);
    default: return (int)cudaErrorInvalidValue;
    }
}

// ---- layouts ---------------------------------------------------------------------------

// Elements copied as raw E (2- or 4-byte words): no conversion.
template <typename E>
__global__ void heads_kernel(E *__restrict__ dst, const E *__restrict__ past, int64_t P, const E *__restrict__ src,
                             int64_t B, int64_t H, int64_t L, int64_t Dh, int64_t row, int64_t off) {
    int64_t Tt = P + L, total = B * H * Tt * Dh;
    GRID_STRIDE(idx, total) {
        int64_t d = idx % Dh, t = idx / Dh % Tt, bh = idx / (Dh * Tt), h = bh % H, b = bh / H;
        if (t < P) dst[idx] = past[(bh * P + t) * Dh + d];
        else if (row) dst[idx] = src[(b * L + t - P) * row + off + h * Dh + d];
        else dst[idx] = src[(bh * L + t - P) * Dh + d];
    }
}

template <typename T>
__global__ void head_bias_kernel(T *__restrict__ x, const T *__restrict__ bias, int64_t B, int64_t H, int64_t T_,
                                 int64_t from, int64_t Dh) {
    int64_t rows = T_ - from;
    GRID_STRIDE(idx, B * H * rows * Dh) {
        int64_t d = idx % Dh, t = from + idx / Dh % rows, bh = idx / (Dh * rows), h = bh % H;
        int64_t at = (bh * T_ + t) * Dh + d;
        st(x, at, ld(x, at) + ld(bias, h * Dh + d));
    }
}

template <typename E>
__global__ void merge_kernel(E *__restrict__ dst, const E *__restrict__ src, int64_t B, int64_t H, int64_t S,
                             int64_t D) {
    GRID_STRIDE(idx, B * S * H * D) {
        int64_t d = idx % D, h = idx / D % H, s = idx / (D * H) % S, b = idx / (D * H * S);
        dst[idx] = src[((b * H + h) * S + s) * D + d];
    }
}

static unsigned grid_for(int64_t total) {
    int64_t blocks = (total + 255) / 256;
    return (unsigned)(blocks < 65535 * 8 ? blocks : 65535 * 8);
}

extern "C" int amp_cuda_attn_heads_launch(size_t esz, void *dst, const void *past, int64_t P, const void *src,
                                          int64_t B, int64_t H, int64_t L, int64_t Dh, int64_t row, int64_t off,
                                          void *stream) {
    int64_t total = B * H * (P + L) * Dh;
    if (total <= 0) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    if (esz == 4)
        heads_kernel<uint32_t><<<grid_for(total), 256, 0, s>>>((uint32_t *)dst, (const uint32_t *)past, P,
                                                               (const uint32_t *)src, B, H, L, Dh, row, off);
    else if (esz == 2)
        heads_kernel<uint16_t><<<grid_for(total), 256, 0, s>>>((uint16_t *)dst, (const uint16_t *)past, P,
                                                               (const uint16_t *)src, B, H, L, Dh, row, off);
    else return (int)cudaErrorInvalidValue;
    return (int)cudaGetLastError();
}

extern "C" int amp_cuda_attn_head_bias_launch(int dtype, void *x, const void *bias, int64_t B, int64_t H, int64_t T,
                                              int64_t from, int64_t Dh, void *stream) {
    int64_t total = B * H * (T - from) * Dh;
    if (total <= 0) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    unsigned g = grid_for(total);
    switch (dtype) {
    case DT_FLOAT:
        head_bias_kernel<float><<<g, 256, 0, s>>>((float *)x, (const float *)bias, B, H, T, from, Dh);
        break;
    case DT_FLOAT16:
        head_bias_kernel<__half><<<g, 256, 0, s>>>((__half *)x, (const __half *)bias, B, H, T, from, Dh);
        break;
    case DT_BFLOAT16:
        head_bias_kernel<__nv_bfloat16><<<g, 256, 0, s>>>((__nv_bfloat16 *)x, (const __nv_bfloat16 *)bias, B, H, T,
                                                          from, Dh);
        break;
    default: return (int)cudaErrorInvalidValue;
    }
    return (int)cudaGetLastError();
}

extern "C" int amp_cuda_attn_merge_launch(size_t esz, void *dst, const void *src, int64_t B, int64_t H, int64_t S,
                                          int64_t D, void *stream) {
    int64_t total = B * H * S * D;
    if (total <= 0) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    if (esz == 4)
        merge_kernel<uint32_t><<<grid_for(total), 256, 0, s>>>((uint32_t *)dst, (const uint32_t *)src, B, H, S, D);
    else if (esz == 2)
        merge_kernel<uint16_t><<<grid_for(total), 256, 0, s>>>((uint16_t *)dst, (const uint16_t *)src, B, H, S, D);
    else return (int)cudaErrorInvalidValue;
    return (int)cudaGetLastError();
}
