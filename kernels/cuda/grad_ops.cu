// Training kernels: the element-wise gradients (one grid-stride kernel, the op a runtime
// argument as in elementwise.cu), Dropout with dropout_rng.h's counter-based mask (each
// thread hashes its own index: the same bits as the CPU kernel), DropoutGrad,
// InPlaceAccumulatorV2 (the overwrite flag read on the device), OneHot, ScatterND and
// GatherGrad. 16-bit data is computed in fp32 and rounded to nearest even on store; where
// nvcc would contract a product and a sum into an FMA that the CPU rounds twice, the
// __f*_rn intrinsics keep both roundings.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "ops/dropout_rng.h"
#include "kernels/cuda/device.cuh"
#include "kernels/cuda/grad_ops.h"
#include "kernels/cuda/maxpool_elem.h"
#include "ops/scalar_math.h"

// AmpDType numbers (ir/ir.h).
enum { DT_FLOAT = 1, DT_INT32 = 6, DT_INT64 = 7, DT_BOOL = 9, DT_FLOAT16 = 10, DT_DOUBLE = 11, DT_BFLOAT16 = 16 };

static const unsigned BLOCK = 256;

static unsigned grid_for(uint64_t items) {
    return amp_cuda_grid_for(items, BLOCK);
}

static int launched() {
    return (int)cudaGetLastError();
}

// ---- typed access: float storage types as fp32 -------------------------------------------

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ float from_f<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// One element of a small device input (ratio, flags) of any float type, as double.
__device__ __forceinline__ double load_scalar(const void *p, int dtype) {
    switch (dtype) {
    case DT_FLOAT: return *(const float *)p;
    case DT_FLOAT16: return __half2float(*(const __half *)p);
    case DT_BFLOAT16: return __bfloat162float(*(const __nv_bfloat16 *)p);
    case DT_DOUBLE: return *(const double *)p;
    case DT_INT32: return *(const int32_t *)p;
    case DT_INT64: return (double)*(const int64_t *)p;
    default: return *(const uint8_t *)p; // bool
    }
}

// Runs the statement with T the float storage type named by dtype; an error for another.
#define FLOAT_DISPATCH(dtype, ...)                                   \
    switch (dtype) {                                                 \
    case DT_FLOAT: { typedef float T; __VA_ARGS__; } break;          \
    case DT_FLOAT16: { typedef __half T; __VA_ARGS__; } break;       \
    case DT_BFLOAT16: { typedef __nv_bfloat16 T; __VA_ARGS__; } break; \
    default: return (int)cudaErrorInvalidValue;                      \
    }

// ---- the two-operand gradients (ops/scalar_math.h's math, the CPU kernels' own) -----------

__device__ __forceinline__ float grad_f(int op, int mode, float a, float b) {
    switch (op) {
    case AMP_CUDA_GR_RELU: return amp_relu_grad_f(a, b);
    case AMP_CUDA_GR_SIGMOID: return amp_sigmoid_grad_f(a, b);
    case AMP_CUDA_GR_TANH: return amp_tanh_grad_f(a, b);
    case AMP_CUDA_GR_GELU: return __fmul_rn(a, amp_gelu_grad_f(b, mode));
    default: return amp_gelu_f(__fadd_rn(a, b), mode); // BIAS_GELU
    }
}

// Operand offsets at output index i, decomposed from the innermost axis.
__device__ __forceinline__ void offsets2(const AmpCudaGradShape &s, uint64_t i, int64_t *o0, int64_t *o1) {
    int64_t a = 0, b = 0;
    for (int d = s.rank - 1; d >= 0; d--) {
        uint64_t c = i % (uint64_t)s.dims[d];
        i /= (uint64_t)s.dims[d];
        a += (int64_t)c * s.stride[0][d];
        b += (int64_t)c * s.stride[1][d];
    }
    *o0 = a, *o1 = b;
}

template <typename T>
__global__ void grad_binary_kernel(int op, int mode, T *__restrict__ out, const T *__restrict__ a,
                                   const T *__restrict__ b, AmpCudaGradShape sh, bool flat, uint64_t n) {
    GRID_STRIDE_U64(i, n) {
        int64_t ia = (int64_t)i, ib = (int64_t)i;
        if (!flat) offsets2(sh, i, &ia, &ib);
        out[i] = from_f<T>(grad_f(op, mode, to_f(a[ia]), to_f(b[ib])));
    }
}

extern "C" int amp_cuda_grad_binary(int op, int gelu_mode, int dtype, void *out, const void *a, const void *b,
                                    const AmpCudaGradShape *sh, uint64_t n, void *stream) {
    if (!n) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    AmpCudaGradShape none = {};
    bool flat = sh == NULL;
    FLOAT_DISPATCH(dtype, (grad_binary_kernel<T><<<grid_for(n), BLOCK, 0, s>>>(
                              op, gelu_mode, (T *)out, (const T *)a, (const T *)b, flat ? none : *sh, flat, n)))
    return launched();
}

template <typename T>
__global__ void bias_gelu_grad_kernel(T *__restrict__ dx, const T *__restrict__ dy, const T *__restrict__ x,
                                      const T *__restrict__ b, uint64_t n, uint64_t h) {
    GRID_STRIDE_U64(i, n) {
        float v = __fadd_rn(to_f(x[i]), to_f(b[i % h]));
        dx[i] = from_f<T>(__fmul_rn(to_f(dy[i]), amp_gelu_grad_erf_f(v)));
    }
}

extern "C" int amp_cuda_bias_gelu_grad(int dtype, void *dx, const void *dy, const void *x, const void *b, uint64_t n,
                                       uint64_t h, void *stream) {
    if (!n || !h) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    FLOAT_DISPATCH(dtype, (bias_gelu_grad_kernel<T><<<grid_for(n), BLOCK, 0, s>>>(
                              (T *)dx, (const T *)dy, (const T *)x, (const T *)b, n, h)))
    return launched();
}

// ---- Dropout, DropoutGrad ------------------------------------------------------------------

template <typename T>
__global__ void dropout_kernel(T *__restrict__ y, void *__restrict__ mask, const T *__restrict__ x, uint64_t n,
                               AmpCudaDropout p) {
    double ratio = p.ratio_dev ? load_scalar(p.ratio_dev, p.ratio_dtype) : p.ratio;
    bool train = (p.training_step || (p.mode_dev && *p.mode_dev)) && ratio != 0;
    bool bad = train && !(ratio > 0 && ratio < 1);
    float scale = (float)(1.0 / (1.0 - ratio));
    uint64_t thr = amp_dropout_threshold(bad ? 0.0 : ratio);
    GRID_STRIDE_U64(i, n) {
        bool keep = !train || (!bad && amp_dropout_keep(p.key, i, thr));
        if (y) {
            float v = to_f(x[i]);
            y[i] = !train ? x[i] : from_f<T>(bad ? __int_as_float(0x7fc00000) : keep ? __fmul_rn(v, scale) : 0.0f);
        }
        if (mask) {
            if (p.mask_dtype == DT_BOOL) ((uint8_t *)mask)[i] = keep;
            else ((T *)mask)[i] = from_f<T>(keep ? 1.0f : 0.0f);
        }
    }
}

extern "C" int amp_cuda_dropout(int dtype, void *y, void *mask, const void *x, uint64_t n, const AmpCudaDropout *p,
                                void *stream) {
    if (!n || (!y && !mask)) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    FLOAT_DISPATCH(dtype, (dropout_kernel<T><<<grid_for(n), BLOCK, 0, s>>>((T *)y, mask, (const T *)x, n, *p)))
    return launched();
}

template <typename T>
__global__ void dropout_grad_kernel(T *__restrict__ dx, const T *__restrict__ dy, const uint8_t *__restrict__ mask,
                                    uint64_t n, const void *ratio_dev, int ratio_dtype, const uint8_t *mode_dev) {
    double ratio = ratio_dev ? load_scalar(ratio_dev, ratio_dtype) : 0.5;
    bool train = !mode_dev || *mode_dev;
    bool bad = train && !(ratio >= 0 && ratio < 1);
    double scale = 1.0 / (1.0 - ratio);
    GRID_STRIDE_U64(i, n) {
        if (!train) dx[i] = dy[i];
        else if (bad) dx[i] = from_f<T>(__int_as_float(0x7fc00000));
        // the CPU's amp_ew_set_f64: the double product rounded to float, then to 16 bits
        else dx[i] = from_f<T>(mask[i] ? __double2float_rn((double)to_f(dy[i]) * scale) : 0.0f);
    }
}

extern "C" int amp_cuda_dropout_grad(int dtype, void *dx, const void *dy, const uint8_t *mask, uint64_t n,
                                     const void *ratio_dev, int ratio_dtype, const uint8_t *mode_dev, void *stream) {
    if (!n) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    FLOAT_DISPATCH(dtype, (dropout_grad_kernel<T><<<grid_for(n), BLOCK, 0, s>>>(
                              (T *)dx, (const T *)dy, mask, n, ratio_dev, ratio_dtype, mode_dev)))
    return launched();
}

// ---- InPlaceAccumulatorV2 ------------------------------------------------------------------

// out = flag ? val : buf + val; the fp32 sum of two values rounded once is what the CPU's
// double sum rounded to float (and then to 16 bits) gives. Thread 0 sets *updated.
template <typename B, typename V>
__global__ void accumulate_kernel(B *out, const B *buf, const V *__restrict__ val, uint64_t n, const void *flag_dev,
                                  int flag_dtype, uint8_t *updated) {
    bool overwrite = flag_dev && load_scalar(flag_dev, flag_dtype) != 0;
    if (updated && blockIdx.x == 0 && threadIdx.x == 0) *updated = 1;
    if (!out) return;
    GRID_STRIDE_U64(i, n) {
        float v = to_f(val[i]);
        out[i] = from_f<B>(overwrite ? v : __fadd_rn(to_f(buf[i]), v));
    }
}

template <typename B>
static int accumulate_val(int val_dtype, void *out, const void *buf, const void *val, uint64_t n,
                          const void *flag_dev, int flag_dtype, uint8_t *updated, cudaStream_t s) {
    unsigned g = grid_for(n);
    FLOAT_DISPATCH(val_dtype, (accumulate_kernel<B, T><<<g, BLOCK, 0, s>>>((B *)out, (const B *)buf, (const T *)val,
                                                                          n, flag_dev, flag_dtype, updated)))
    return launched();
}

extern "C" int amp_cuda_accumulate(int buf_dtype, int val_dtype, void *out, const void *buf, const void *val,
                                   uint64_t n, const void *flag_dev, int flag_dtype, uint8_t *updated,
                                   void *stream) {
    if (!updated && (!out || !n)) return 0;
    if (!n) out = NULL;
    cudaStream_t s = (cudaStream_t)stream;
    switch (buf_dtype) {
    case DT_FLOAT: return accumulate_val<float>(val_dtype, out, buf, val, n, flag_dev, flag_dtype, updated, s);
    case DT_FLOAT16: return accumulate_val<__half>(val_dtype, out, buf, val, n, flag_dev, flag_dtype, updated, s);
    case DT_BFLOAT16:
        return accumulate_val<__nv_bfloat16>(val_dtype, out, buf, val, n, flag_dev, flag_dtype, updated, s);
    default: return (int)cudaErrorInvalidValue;
    }
}

// ---- OneHot --------------------------------------------------------------------------------

template <typename E, typename IX>
__global__ void one_hot_kernel(E *__restrict__ y, const E *__restrict__ values, const IX *__restrict__ idx,
                               uint64_t n, int64_t depth, uint64_t inner) {
    E off = values[0], on = values[1];
    GRID_STRIDE_U64(i, n) {
        uint64_t in = i % inner, t = i / inner;
        uint64_t d = t % (uint64_t)depth, o = t / (uint64_t)depth;
        int64_t v = (int64_t)idx[o * inner + in];
        if (v < 0) v += depth;
        y[i] = v == (int64_t)d ? on : off; // an index outside [0, depth): all "off"
    }
}

template <typename E>
static void launch_one_hot(void *y, const void *values, const void *idx, int idx64, uint64_t n, int64_t depth,
                           uint64_t inner, cudaStream_t s) {
    if (idx64)
        one_hot_kernel<E, int64_t><<<grid_for(n), BLOCK, 0, s>>>((E *)y, (const E *)values, (const int64_t *)idx, n,
                                                                 depth, inner);
    else
        one_hot_kernel<E, int32_t><<<grid_for(n), BLOCK, 0, s>>>((E *)y, (const E *)values, (const int32_t *)idx, n,
                                                                 depth, inner);
}

extern "C" int amp_cuda_one_hot(void *y, size_t es, const void *values, const void *idx, int idx64, uint64_t outer,
                                int64_t depth, uint64_t inner, void *stream) {
    uint64_t n = outer * (uint64_t)depth * inner;
    if (!n || depth <= 0) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    switch (es) {
    case 1: launch_one_hot<uint8_t>(y, values, idx, idx64, n, depth, inner, s); break;
    case 2: launch_one_hot<uint16_t>(y, values, idx, idx64, n, depth, inner, s); break;
    case 4: launch_one_hot<uint32_t>(y, values, idx, idx64, n, depth, inner, s); break;
    case 8: launch_one_hot<uint64_t>(y, values, idx, idx64, n, depth, inner, s); break;
    default: return (int)cudaErrorInvalidValue;
    }
    return launched();
}

// ---- ScatterND -----------------------------------------------------------------------------

// Tuple t's slice offset into the data, or -1 when an index lies outside its axis.
template <typename IX>
__device__ __forceinline__ int64_t tuple_slice(const IX *idx, uint64_t t, const AmpCudaScatter &s) {
    int64_t off = 0;
    for (int d = 0; d < s.m; d++) {
        int64_t v = (int64_t)idx[t * (uint64_t)s.m + d];
        if (v < 0) v += s.dims[d];
        if (v < 0 || v >= s.dims[d]) return -1;
        off = off * s.dims[d] + v;
    }
    return off;
}

// One thread per (tuple, slice element): NONE copies, ADD (float32) adds atomically.
template <typename E, typename IX, bool ADD>
__global__ void scatter_kernel(E *y, const E *__restrict__ u, const IX *__restrict__ idx, AmpCudaScatter s) {
    uint64_t n = s.tuples * s.slice;
    GRID_STRIDE_U64(i, n) {
        uint64_t t = i / s.slice, e = i % s.slice;
        int64_t off = tuple_slice(idx, t, s);
        if (off < 0) continue;
        E *at = y + (uint64_t)off * s.slice + e;
        if constexpr (ADD) atomicAdd((float *)at, *(const float *)(u + i));
        else *at = u[i];
    }
}

// 16-bit ADD: one thread per slice element walks the tuples in order, each add rounded
// to the storage type as the CPU's reduce_into does, so duplicates sum exactly as there.
template <typename T, typename IX>
__global__ void scatter_add_ordered_kernel(T *y, const T *__restrict__ u, const IX *__restrict__ idx,
                                           AmpCudaScatter s) {
    GRID_STRIDE_U64(e, s.slice) {
        for (uint64_t t = 0; t < s.tuples; t++) {
            int64_t off = tuple_slice(idx, t, s);
            if (off < 0) continue;
            T *at = y + (uint64_t)off * s.slice + e;
            *at = from_f<T>(__fadd_rn(to_f(*at), to_f(u[t * s.slice + e])));
        }
    }
}

// NONE: the slices copied as elements of E's size.
template <typename E, typename IX>
static void scatter_copy(void *y, const void *u, const IX *idx, const AmpCudaScatter &s, cudaStream_t st) {
    scatter_kernel<E, IX, false><<<grid_for(s.tuples * s.slice), BLOCK, 0, st>>>((E *)y, (const E *)u, idx, s);
}

template <typename IX>
static int scatter_ix(int red, int dtype, size_t es, void *y, const void *u, const IX *idx, const AmpCudaScatter &s,
                      cudaStream_t st) {
    uint64_t n = s.tuples * s.slice;
    if (red == AMP_CUDA_SCATTER_ADD) {
        if (dtype == DT_FLOAT) {
            scatter_kernel<float, IX, true><<<grid_for(n), BLOCK, 0, st>>>((float *)y, (const float *)u, idx, s);
            return launched();
        }
        if (dtype != DT_FLOAT16 && dtype != DT_BFLOAT16) return (int)cudaErrorInvalidValue;
        FLOAT_DISPATCH(dtype, (scatter_add_ordered_kernel<T, IX><<<grid_for(s.slice), BLOCK, 0, st>>>(
                                  (T *)y, (const T *)u, idx, s)))
        return launched();
    }
    switch (es) {
    case 1: scatter_copy<uint8_t>(y, u, idx, s, st); break;
    case 2: scatter_copy<uint16_t>(y, u, idx, s, st); break;
    case 4: scatter_copy<uint32_t>(y, u, idx, s, st); break;
    case 8: scatter_copy<uint64_t>(y, u, idx, s, st); break;
    default: return (int)cudaErrorInvalidValue;
    }
    return launched();
}

extern "C" int amp_cuda_scatter_nd(int red, int dtype, size_t es, void *y, const void *u, const void *idx, int idx64,
                                   const AmpCudaScatter *s, void *stream) {
    if (!s->tuples || !s->slice) return 0;
    cudaStream_t st = (cudaStream_t)stream;
    return idx64 ? scatter_ix(red, dtype, es, y, u, (const int64_t *)idx, *s, st)
                 : scatter_ix(red, dtype, es, y, u, (const int32_t *)idx, *s, st);
}

// ---- GatherGrad ----------------------------------------------------------------------------

// dy (outer, nidx, row) added into acc (outer, rows [r0, r0 + nr) of dim, row) in fp32;
// rows of other chunks and indices outside the axis are skipped.
template <typename T, typename IX>
__global__ void gather_grad_add_kernel(float *acc, const T *__restrict__ dy, const IX *__restrict__ idx,
                                       uint64_t outer, int64_t dim, uint64_t nidx, uint64_t row, int64_t r0,
                                       int64_t nr) {
    uint64_t n = outer * nidx * row;
    GRID_STRIDE_U64(i, n) {
        uint64_t e = i % row, t = i / row;
        uint64_t j = t % nidx, b = t / nidx;
        int64_t v = (int64_t)idx[j];
        if (v < 0) v += dim;
        if (v < r0 || v >= r0 + nr) continue;
        atomicAdd(acc + (b * (uint64_t)nr + (uint64_t)(v - r0)) * row + e, to_f(dy[i]));
    }
}

// The chunk's fp32 sums (outer, nr, row) rounded into dx's rows [r0, r0 + nr).
template <typename T>
__global__ void gather_grad_store_kernel(T *dx, const float *__restrict__ acc, uint64_t outer, int64_t dim,
                                         uint64_t row, int64_t r0, int64_t nr) {
    uint64_t n = outer * (uint64_t)nr * row;
    GRID_STRIDE_U64(i, n) {
        uint64_t e = i % row, t = i / row;
        uint64_t r = t % (uint64_t)nr, b = t / (uint64_t)nr;
        dx[(b * (uint64_t)dim + (uint64_t)r0 + r) * row + e] = from_f<T>(acc[i]);
    }
}

// float32: dx zeroed, then the rows added atomically straight into it.
template <typename IX>
static int gather_grad_f32(float *dx, const float *dy, const IX *idx, uint64_t outer, int64_t dim, uint64_t nidx,
                           uint64_t row, cudaStream_t s) {
    cudaError_t e = cudaMemsetAsync(dx, 0, outer * (uint64_t)dim * row * sizeof(float), s);
    if (e != cudaSuccess) return (int)e;
    uint64_t n_in = outer * nidx * row;
    if (n_in)
        gather_grad_add_kernel<float, IX><<<grid_for(n_in), BLOCK, 0, s>>>(dx, dy, idx, outer, dim, nidx, row, 0, dim);
    return launched();
}

// 16 bits: per chunk of dim's rows that fits the fp32 scratch, zero it, add every row of
// dy that lands in the chunk, round the chunk into dx.
template <typename T, typename IX>
static int gather_grad_16(T *dx, const T *dy, const IX *idx, uint64_t outer, int64_t dim, uint64_t nidx,
                          uint64_t row, void *ws, size_t ws_bytes, cudaStream_t s) {
    int64_t chunk = amp_cuda_gather_grad_chunk(outer, dim, row, ws_bytes);
    if (chunk <= 0) return -1;
    uint64_t n_in = outer * nidx * row;
    for (int64_t r0 = 0; r0 < dim; r0 += chunk) {
        int64_t nr = dim - r0 < chunk ? dim - r0 : chunk;
        uint64_t n_acc = outer * (uint64_t)nr * row;
        cudaError_t e = cudaMemsetAsync(ws, 0, n_acc * sizeof(float), s);
        if (e != cudaSuccess) return (int)e;
        if (n_in)
            gather_grad_add_kernel<T, IX><<<grid_for(n_in), BLOCK, 0, s>>>((float *)ws, dy, idx, outer, dim, nidx,
                                                                           row, r0, nr);
        gather_grad_store_kernel<T><<<grid_for(n_acc), BLOCK, 0, s>>>(dx, (const float *)ws, outer, dim, row, r0, nr);
        int err = launched();
        if (err) return err;
    }
    return 0;
}

template <typename IX>
static int gather_grad_ix(int dtype, void *dx, const void *dy, const IX *idx, uint64_t outer, int64_t dim,
                          uint64_t nidx, uint64_t row, void *ws, size_t ws_bytes, cudaStream_t s) {
    switch (dtype) {
    case DT_FLOAT: return gather_grad_f32<IX>((float *)dx, (const float *)dy, idx, outer, dim, nidx, row, s);
    case DT_FLOAT16:
        return gather_grad_16<__half, IX>((__half *)dx, (const __half *)dy, idx, outer, dim, nidx, row, ws, ws_bytes,
                                          s);
    case DT_BFLOAT16:
        return gather_grad_16<__nv_bfloat16, IX>((__nv_bfloat16 *)dx, (const __nv_bfloat16 *)dy, idx, outer, dim, nidx,
                                                 row, ws, ws_bytes, s);
    default: return (int)cudaErrorInvalidValue;
    }
}

extern "C" int amp_cuda_gather_grad(int dtype, void *dx, const void *dy, const void *idx, int idx64, uint64_t outer,
                                    int64_t dim, uint64_t nidx, uint64_t row, void *ws, size_t ws_bytes,
                                    void *stream) {
    if (!outer || dim <= 0 || !row) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    return idx64 ? gather_grad_ix(dtype, dx, dy, (const int64_t *)idx, outer, dim, nidx, row, ws, ws_bytes, s)
                 : gather_grad_ix(dtype, dx, dy, (const int32_t *)idx, outer, dim, nidx, row, ws, ws_bytes, s);
}

// ---- MaxPool with Indices ------------------------------------------------------------------

AMP_CUDA_MAXPOOL_ELEM(maxpool_elem_f32, float, to_f)
AMP_CUDA_MAXPOOL_ELEM(maxpool_elem_f16, __half, to_f)
AMP_CUDA_MAXPOOL_ELEM(maxpool_elem_bf16, __nv_bfloat16, to_f)

__device__ __forceinline__ int64_t maxpool_elem(const AmpCudaPoolIdx *p, uint64_t i, const float *x, float *b) {
    return maxpool_elem_f32(p, i, x, b);
}
__device__ __forceinline__ int64_t maxpool_elem(const AmpCudaPoolIdx *p, uint64_t i, const __half *x, float *b) {
    return maxpool_elem_f16(p, i, x, b);
}
__device__ __forceinline__ int64_t maxpool_elem(const AmpCudaPoolIdx *p, uint64_t i, const __nv_bfloat16 *x,
                                                float *b) {
    return maxpool_elem_bf16(p, i, x, b);
}

// One thread per output: maxpool_elem.h's walk, Y (when wanted) and the flat index.
template <typename T>
__global__ void maxpool_indices_kernel(T *__restrict__ y, int64_t *__restrict__ idx, const T *__restrict__ x,
                                       AmpCudaPoolIdx p, uint64_t n_out) {
    GRID_STRIDE_U64(i, n_out) {
        float best;
        int64_t arg = maxpool_elem(&p, i, x, &best);
        if (y) y[i] = from_f<T>(best);
        idx[i] = arg;
    }
}

extern "C" int amp_cuda_maxpool_indices(int dtype, void *y, int64_t *idx, const void *x, const AmpCudaPoolIdx *p,
                                        void *stream) {
    uint64_t n_out = p->planes;
    for (int d = 0; d < p->nsp; d++) n_out *= (uint64_t)p->out[d];
    if (!n_out) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    FLOAT_DISPATCH(dtype, maxpool_indices_kernel<T><<<grid_for(n_out), BLOCK, 0, s>>>((T *)y, idx, (const T *)x, *p,
                                                                                     n_out))
    return launched();
}
