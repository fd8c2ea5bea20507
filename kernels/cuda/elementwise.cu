// Elementwise kernels: one grid-stride kernel per shape of work (binary, compare, unary,
// test, variadic, where, cast), templated over the storage type only; the op is
// a runtime argument (the same for every thread, so the switch costs a branch, not a
// divergence), which keeps the number of instantiations, and nvcc's time, small.
// 16-bit floats are computed in fp32 and rounded to nearest even on store, as the CPU
// reference does. Formulas mirror kernels/cpu; where nvcc would fuse a product and a sum
// into one FMA that the CPU rounds twice, __fmul_rn / __fadd_rn keep the two roundings.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "kernels/cuda/device.cuh"
#include "kernels/cuda/convert.h"
#include "kernels/cuda/elementwise.h"
#include "ops/scalar_math.h"

// The layout of cuda_impl.h's AmpCudaBcast (elementwise.c static-asserts its size).
struct AmpCudaBcast {
    int rank;
    int64_t dims[AMP_CUDA_EW_RANK];
    int64_t stride[3][AMP_CUDA_EW_RANK];
};

// AmpDType numbers (ir/ir.h), for the launchers' dtype arguments.
enum {
    DT_FLOAT = 1, DT_UINT8 = 2, DT_INT8 = 3, DT_UINT16 = 4, DT_INT16 = 5, DT_INT32 = 6, DT_INT64 = 7,
    DT_BOOL = 9, DT_FLOAT16 = 10, DT_DOUBLE = 11, DT_UINT32 = 12, DT_UINT64 = 13, DT_BFLOAT16 = 16
};

static const unsigned BLOCK = 256;

static unsigned grid_for(uint64_t items) {
    return amp_cuda_grid_for(items, BLOCK);
}

// ---- typed access: float storage types as fp32 -------------------------------------------

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ float from_f<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// ---- broadcast offsets -------------------------------------------------------------------

// Offsets (in elements) of operands 0..NOP-1 at output index i: i decomposed over dims
// from the innermost axis, in U arithmetic (32-bit when the output has < 2^32 elements:
// 64-bit division is several times slower).
template <typename U, int NOP>
__device__ __forceinline__ void offsets_u(const AmpCudaBcast &b, U i, int64_t *off) {
#pragma unroll
    for (int j = 0; j < NOP; j++) off[j] = 0;
#pragma unroll
    for (int d = AMP_CUDA_EW_RANK - 1; d >= 0; d--) {
        if (d < b.rank) {
            U c = i;
            if (d > 0) { // axis 0's index is what is left
                U q = i / (U)b.dims[d];
                c = i - q * (U)b.dims[d];
                i = q;
            }
#pragma unroll
            for (int j = 0; j < NOP; j++) off[j] += (int64_t)c * b.stride[j][d];
        }
    }
}

template <int NOP>
__device__ __forceinline__ void offsets(const AmpCudaBcast &b, bool flat, uint64_t n, uint64_t i, int64_t *off) {
    if (flat) {
#pragma unroll
        for (int j = 0; j < NOP; j++) off[j] = (int64_t)i;
    } else if (n <= 0xffffffffull) {
        offsets_u<uint32_t, NOP>(b, (uint32_t)i, off);
    } else {
        offsets_u<uint64_t, NOP>(b, i, off);
    }
}

// ---- binary arithmetic -------------------------------------------------------------------

// NaN-propagating max / min, as the CPU's NAN_MAX / NAN_MIN (numpy's maximum / minimum).
__device__ __forceinline__ float nan_max(float x, float y) { return x != x || x > y ? x : y; }
__device__ __forceinline__ float nan_min(float x, float y) { return x != x || x < y ? x : y; }

__device__ __forceinline__ float bin_f(int op, float x, float y) {
    switch (op) {
    case AMP_CUDA_BIN_ADD: return x + y;
    case AMP_CUDA_BIN_SUB: return x - y;
    case AMP_CUDA_BIN_MUL: return x * y;
    case AMP_CUDA_BIN_DIV: return x / y;
    case AMP_CUDA_BIN_POW: return powf(x, y);
    case AMP_CUDA_BIN_MAX: return nan_max(x, y);
    case AMP_CUDA_BIN_MIN: return nan_min(x, y);
    default: return x < 0 ? x * y : x; // PRelu: y the slope
    }
}

// Integers: + - * wrap (through the unsigned type), Div truncates toward zero with
// INT_MIN / -1 wrapping; a division by zero, which the CPU refuses, gives 0 rather than
// a trap (the node-level code leaves integer Div to the CPU).
template <typename T, typename U>
__device__ __forceinline__ T bin_i(int op, T x, T y) {
    switch (op) {
    case AMP_CUDA_BIN_ADD: return (T)((U)x + (U)y);
    case AMP_CUDA_BIN_SUB: return (T)((U)x - (U)y);
    case AMP_CUDA_BIN_MUL: return (T)((U)x * (U)y);
    case AMP_CUDA_BIN_DIV: return y == 0 ? (T)0 : y == -1 ? (T)((U)0 - (U)x) : (T)(x / y);
    case AMP_CUDA_BIN_MAX: return x > y ? x : y;
    case AMP_CUDA_BIN_MIN: return x < y ? x : y;
    default: return 0;
    }
}

template <typename T>
__global__ void binary_f_kernel(int op, T *__restrict__ out, const T *__restrict__ a, const T *__restrict__ b,
                                AmpCudaBcast bc, bool flat, uint64_t n) {
    GRID_STRIDE_U64(i, n) {
        int64_t off[2];
        offsets<2>(bc, flat, n, i, off);
        out[i] = from_f<T>(bin_f(op, to_f(a[off[0]]), to_f(b[off[1]])));
    }
}

template <typename T, typename U>
__global__ void binary_i_kernel(int op, T *__restrict__ out, const T *__restrict__ a, const T *__restrict__ b,
                                AmpCudaBcast bc, bool flat, uint64_t n) {
    GRID_STRIDE_U64(i, n) {
        int64_t off[2];
        offsets<2>(bc, flat, n, i, off);
        out[i] = bin_i<T, U>(op, a[off[0]], b[off[1]]);
    }
}

static AmpCudaBcast flat_bc() {
    AmpCudaBcast b;
    memset(&b, 0, sizeof b);
    return b;
}

extern "C" int amp_cuda_ew_binary(int op, int dtype, void *out, const void *a, const void *b,
                                  const AmpCudaBcast *bc, uint64_t n, void *stream) {
    if (!n) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    AmpCudaBcast B = bc ? *bc : flat_bc();
    bool flat = !bc;
    unsigned g = grid_for(n);
    switch (dtype) {
    case DT_FLOAT: binary_f_kernel<float><<<g, BLOCK, 0, s>>>(op, (float *)out, (const float *)a, (const float *)b, B, flat, n); break;
    case DT_FLOAT16: binary_f_kernel<__half><<<g, BLOCK, 0, s>>>(op, (__half *)out, (const __half *)a, (const __half *)b, B, flat, n); break;
    case DT_BFLOAT16:
        binary_f_kernel<__nv_bfloat16><<<g, BLOCK, 0, s>>>(op, (__nv_bfloat16 *)out, (const __nv_bfloat16 *)a,
                                                           (const __nv_bfloat16 *)b, B, flat, n);
        break;
    case DT_INT32:
        binary_i_kernel<int32_t, uint32_t><<<g, BLOCK, 0, s>>>(op, (int32_t *)out, (const int32_t *)a, (const int32_t *)b, B, flat, n);
        break;
    case DT_INT64:
        binary_i_kernel<int64_t, uint64_t><<<g, BLOCK, 0, s>>>(op, (int64_t *)out, (const int64_t *)a, (const int64_t *)b, B, flat, n);
        break;
    default: return (int)cudaErrorInvalidValue;
    }
    return (int)cudaGetLastError();
}

// ---- comparisons and bool logic ----------------------------------------------------------

// A comparable value: fp32 for the float types (exact), the integer itself otherwise.
__device__ __forceinline__ float cmp_val(float v) { return v; }
__device__ __forceinline__ float cmp_val(__half v) { return __half2float(v); }
__device__ __forceinline__ float cmp_val(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ int64_t cmp_val(int32_t v) { return v; }
__device__ __forceinline__ int64_t cmp_val(int64_t v) { return v; }
__device__ __forceinline__ int64_t cmp_val(uint8_t v) { return v; } // bool bytes, compared as stored

template <typename T>
__global__ void compare_kernel(int op, uint8_t *__restrict__ out, const T *__restrict__ a, const T *__restrict__ b,
                               AmpCudaBcast bc, bool flat, uint64_t n) {
    GRID_STRIDE_U64(i, n) {
        int64_t off[2];
        offsets<2>(bc, flat, n, i, off);
        auto x = cmp_val(a[off[0]]), y = cmp_val(b[off[1]]);
        bool r;
        switch (op) {
        case AMP_CUDA_CMP_EQ: r = x == y; break;
        case AMP_CUDA_CMP_LT: r = x < y; break;
        case AMP_CUDA_CMP_GT: r = x > y; break;
        case AMP_CUDA_CMP_LE: r = x <= y; break;
        case AMP_CUDA_CMP_GE: r = x >= y; break;
        case AMP_CUDA_CMP_AND: r = x != 0 && y != 0; break;
        default: r = x != 0 || y != 0; break; // OR
        }
        out[i] = r;
    }
}

extern "C" int amp_cuda_ew_compare(int op, int dtype, uint8_t *out, const void *a, const void *b,
                                   const AmpCudaBcast *bc, uint64_t n, void *stream) {
    if (!n) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    AmpCudaBcast B = bc ? *bc : flat_bc();
    bool flat = !bc;
    unsigned g = grid_for(n);
    switch (dtype) {
    case DT_FLOAT: compare_kernel<float><<<g, BLOCK, 0, s>>>(op, out, (const float *)a, (const float *)b, B, flat, n); break;
    case DT_FLOAT16: compare_kernel<__half><<<g, BLOCK, 0, s>>>(op, out, (const __half *)a, (const __half *)b, B, flat, n); break;
    case DT_BFLOAT16:
        compare_kernel<__nv_bfloat16><<<g, BLOCK, 0, s>>>(op, out, (const __nv_bfloat16 *)a, (const __nv_bfloat16 *)b, B, flat, n);
        break;
    case DT_INT32: compare_kernel<int32_t><<<g, BLOCK, 0, s>>>(op, out, (const int32_t *)a, (const int32_t *)b, B, flat, n); break;
    case DT_INT64: compare_kernel<int64_t><<<g, BLOCK, 0, s>>>(op, out, (const int64_t *)a, (const int64_t *)b, B, flat, n); break;
    case DT_BOOL: compare_kernel<uint8_t><<<g, BLOCK, 0, s>>>(op, out, (const uint8_t *)a, (const uint8_t *)b, B, flat, n); break;
    default: return (int)cudaErrorInvalidValue;
    }
    return (int)cudaGetLastError();
}

// ---- unary math and activations ----------------------------------------------------------

// The float forms of ops/unary.def's lines that CUDA runs (the CPU kernels' expressions:
// ops/scalar_math.h's math, rounded as the CPU rounds, no FMA where a product meets a
// sum), and Clip.
__device__ __forceinline__ float un_f(int op, float x, const AmpEwParams *p, float lo, float hi) {
    switch (op) {
#define AMP_UNARY(Id, FEXPR, DEXPR, PREPARE, TYPES, LUT, CUDA, FUSE) AMP_UNARY_CUDA_##CUDA(case AMP_CUDA_UN_##Id: return FEXPR;)
#include "ops/unary.def"
#undef AMP_UNARY
    default: { // CLIP: lo > hi gives hi, NaN stays NaN
        float v = x < lo ? lo : x;
        return v > hi ? hi : v;
    }
    }
}

template <typename T>
__global__ void unary_f_kernel(int op, T *__restrict__ out, const T *__restrict__ x, uint64_t n, AmpCudaEwParams p) {
    // Clip's bounds: one element each, read on the device (no host sync)
    float lo = p.lo ? to_f(*(const T *)p.lo) : p.lo_f, hi = p.hi ? to_f(*(const T *)p.hi) : p.hi_f;
    const AmpEwParams ew = p.ew;
    GRID_STRIDE_U64(i, n) out[i] = from_f<T>(un_f(op, to_f(x[i]), &ew, lo, hi));
}

// The integer forms of ops/unary.def's FI lines (Neg wraps, Abs wraps at INT_MIN, Sign, Relu)
// and Clip.
template <typename T, typename U>
__global__ void unary_i_kernel(int op, T *__restrict__ out, const T *__restrict__ x, uint64_t n, AmpCudaEwParams p) {
    const T t_min = (T)((U)1 << (sizeof(T) * 8 - 1)), t_max = (T)~t_min; // the type's limits: absent bounds
    T lo = p.lo ? *(const T *)p.lo : t_min, hi = p.hi ? *(const T *)p.hi : t_max;
    GRID_STRIDE_U64(i, n) {
        T v = x[i], r;
        switch (op) {
        case AMP_CUDA_UN_Neg: r = (T)((U)0 - (U)v); break;
        case AMP_CUDA_UN_Abs: r = v < 0 ? (T)((U)0 - (U)v) : v; break;
        case AMP_CUDA_UN_Sign: r = (T)((v > 0) - (v < 0)); break;
        case AMP_CUDA_UN_Relu: r = v < 0 ? (T)0 : v; break;
        default: r = v < lo ? lo : v; r = r > hi ? hi : r; break; // CLIP
        }
        out[i] = r;
    }
}

extern "C" int amp_cuda_ew_unary(int op, int dtype, void *out, const void *x, uint64_t n, const AmpCudaEwParams *p,
                                 void *stream) {
    if (!n) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    AmpCudaEwParams P = *p;
    unsigned g = grid_for(n);
    switch (dtype) {
    case DT_FLOAT: unary_f_kernel<float><<<g, BLOCK, 0, s>>>(op, (float *)out, (const float *)x, n, P); break;
    case DT_FLOAT16: unary_f_kernel<__half><<<g, BLOCK, 0, s>>>(op, (__half *)out, (const __half *)x, n, P); break;
    case DT_BFLOAT16:
        unary_f_kernel<__nv_bfloat16><<<g, BLOCK, 0, s>>>(op, (__nv_bfloat16 *)out, (const __nv_bfloat16 *)x, n, P);
        break;
    case DT_INT32: unary_i_kernel<int32_t, uint32_t><<<g, BLOCK, 0, s>>>(op, (int32_t *)out, (const int32_t *)x, n, P); break;
    case DT_INT64: unary_i_kernel<int64_t, uint64_t><<<g, BLOCK, 0, s>>>(op, (int64_t *)out, (const int64_t *)x, n, P); break;
    default: return (int)cudaErrorInvalidValue;
    }
    return (int)cudaGetLastError();
}

// ---- IsNaN, IsInf, Not ------------------------------------------------------------------

template <typename T>
__global__ void test_kernel(int op, uint8_t *__restrict__ out, const T *__restrict__ x, uint64_t n, int mode) {
    GRID_STRIDE_U64(i, n) {
        float v = to_f(x[i]);
        out[i] = op == AMP_CUDA_TEST_ISNAN ? isnan(v) : isinf(v) && ((v > 0 ? 1 : 2) & mode) != 0;
    }
}

__global__ void not_kernel(uint8_t *__restrict__ out, const uint8_t *__restrict__ x, uint64_t n) {
    GRID_STRIDE_U64(i, n) out[i] = x[i] == 0;
}

extern "C" int amp_cuda_ew_test(int op, int dtype, uint8_t *out, const void *x, uint64_t n, int mode, void *stream) {
    if (!n) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    unsigned g = grid_for(n);
    if (op == AMP_CUDA_TEST_NOT) {
        if (dtype != DT_BOOL) return (int)cudaErrorInvalidValue;
        not_kernel<<<g, BLOCK, 0, s>>>(out, (const uint8_t *)x, n);
        return (int)cudaGetLastError();
    }
    switch (dtype) {
    case DT_FLOAT: test_kernel<float><<<g, BLOCK, 0, s>>>(op, out, (const float *)x, n, mode); break;
    case DT_FLOAT16: test_kernel<__half><<<g, BLOCK, 0, s>>>(op, out, (const __half *)x, n, mode); break;
    case DT_BFLOAT16: test_kernel<__nv_bfloat16><<<g, BLOCK, 0, s>>>(op, out, (const __nv_bfloat16 *)x, n, mode); break;
    default: return (int)cudaErrorInvalidValue;
    }
    return (int)cudaGetLastError();
}

// ---- variadic Sum, Mean, Max, Min -------------------------------------------------------

// Offset of input j at output index i (64-bit decomposition: these ops are rare).
__device__ __forceinline__ int64_t multi_offset(const AmpCudaEwMulti &m, int j, uint64_t i) {
    int64_t off = 0;
    for (int d = m.rank - 1; d >= 0; d--) {
        uint64_t c = i;
        if (d > 0) {
            uint64_t q = i / (uint64_t)m.dims[d];
            c = i - q * (uint64_t)m.dims[d];
            i = q;
        }
        off += (int64_t)c * m.stride[j][d];
    }
    return off;
}

// In input order, as the CPU: acc = in[0]; acc = acc op in[j]; (Mean: acc / n_total). A
// later chunk starts from the fp32 accumulator acc_in; a chunk before the last writes the
// accumulator acc_out (which may be acc_in: each thread reads and writes its own element).
template <typename T>
__global__ void variadic_f_kernel(int op, bool mean, T *out, AmpCudaEwMulti m, uint64_t n) {
    GRID_STRIDE_U64(i, n) {
        int j = m.acc_in ? 0 : 1;
        float acc = m.acc_in ? ((const float *)m.acc_in)[i] : to_f(((const T *)m.in[0])[multi_offset(m, 0, i)]);
        for (; j < m.n_in; j++) acc = bin_f(op, acc, to_f(((const T *)m.in[j])[multi_offset(m, j, i)]));
        if (m.acc_out) {
            ((float *)m.acc_out)[i] = acc;
            continue;
        }
        if (mean) acc /= (float)m.n_total;
        out[i] = from_f<T>(acc);
    }
}

// Max, Min of integers; the accumulator, when there is one, is the output itself.
template <typename T>
__global__ void variadic_i_kernel(int op, T *out, AmpCudaEwMulti m, uint64_t n) {
    GRID_STRIDE_U64(i, n) {
        int j = m.acc_in ? 0 : 1;
        T acc = m.acc_in ? ((const T *)m.acc_in)[i] : ((const T *)m.in[0])[multi_offset(m, 0, i)];
        for (; j < m.n_in; j++) {
            T v = ((const T *)m.in[j])[multi_offset(m, j, i)];
            acc = op == AMP_CUDA_BIN_MAX ? (acc > v ? acc : v) : (acc < v ? acc : v);
        }
        out[i] = acc;
    }
}

extern "C" int amp_cuda_ew_variadic(int op, int dtype, bool mean, void *out, const AmpCudaEwMulti *m, uint64_t n,
                                    void *stream) {
    if (!n) return 0;
    if (m->n_in < 1 || m->n_in > AMP_CUDA_EW_MAX_VAR) return (int)cudaErrorInvalidValue;
    cudaStream_t s = (cudaStream_t)stream;
    unsigned g = grid_for(n);
    switch (dtype) {
    case DT_FLOAT: variadic_f_kernel<float><<<g, BLOCK, 0, s>>>(op, mean, (float *)out, *m, n); break;
    case DT_FLOAT16: variadic_f_kernel<__half><<<g, BLOCK, 0, s>>>(op, mean, (__half *)out, *m, n); break;
    case DT_BFLOAT16: variadic_f_kernel<__nv_bfloat16><<<g, BLOCK, 0, s>>>(op, mean, (__nv_bfloat16 *)out, *m, n); break;
    case DT_INT32:
        if (op == AMP_CUDA_BIN_ADD) return (int)cudaErrorInvalidValue;
        variadic_i_kernel<int32_t><<<g, BLOCK, 0, s>>>(op, (int32_t *)out, *m, n);
        break;
    case DT_INT64:
        if (op == AMP_CUDA_BIN_ADD) return (int)cudaErrorInvalidValue;
        variadic_i_kernel<int64_t><<<g, BLOCK, 0, s>>>(op, (int64_t *)out, *m, n);
        break;
    default: return (int)cudaErrorInvalidValue;
    }
    return (int)cudaGetLastError();
}

// ---- Where, Expand: moves of 1, 2, 4 or 8 byte elements -----------------------------------

template <typename E>
__global__ void where_kernel(E *__restrict__ out, const uint8_t *__restrict__ c, const E *__restrict__ x,
                             const E *__restrict__ y, AmpCudaBcast bc, bool flat, uint64_t n) {
    GRID_STRIDE_U64(i, n) {
        int64_t off[3];
        offsets<3>(bc, flat, n, i, off);
        out[i] = c[off[0]] ? x[off[1]] : y[off[2]];
    }
}

#define BY_SIZE(esize, CALL)                                                   \
    switch (esize) {                                                          \
    case 1: { typedef uint8_t E; CALL; break; }                               \
    case 2: { typedef uint16_t E; CALL; break; }                              \
    case 4: { typedef uint32_t E; CALL; break; }                              \
    case 8: { typedef uint64_t E; CALL; break; }                              \
    default: return (int)cudaErrorInvalidValue;                               \
    }

extern "C" int amp_cuda_ew_where(int esize, void *out, const uint8_t *cond, const void *x, const void *y,
                                 const AmpCudaBcast *bc, uint64_t n, void *stream) {
    if (!n) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    AmpCudaBcast B = bc ? *bc : flat_bc();
    unsigned g = grid_for(n);
    BY_SIZE(esize, (where_kernel<E><<<g, BLOCK, 0, s>>>((E *)out, cond, (const E *)x, (const E *)y, B, !bc, n)))
    return (int)cudaGetLastError();
}

// ---- Cast: tensor.c's cast engine, element by element -------------------------------------

// One element in a form that holds every source value exactly (tensor.c's Val).
struct Val {
    int kind; // 0 float (f), 1 signed (i), 2 unsigned / bool (u)
    double f;
    int64_t i;
    uint64_t u;
};

__device__ __forceinline__ Val load_val(int dt, const void *p, uint64_t i) {
    Val v = {0, 0.0, 0, 0};
    switch (dt) {
    case DT_FLOAT: v.f = ((const float *)p)[i]; break;
    case DT_DOUBLE: v.f = ((const double *)p)[i]; break;
    case DT_FLOAT16: v.f = __half2float(((const __half *)p)[i]); break;
    case DT_BFLOAT16: v.f = __bfloat162float(((const __nv_bfloat16 *)p)[i]); break;
    case DT_INT8: v.kind = 1, v.i = ((const int8_t *)p)[i]; break;
    case DT_INT16: v.kind = 1, v.i = ((const int16_t *)p)[i]; break;
    case DT_INT32: v.kind = 1, v.i = ((const int32_t *)p)[i]; break;
    case DT_INT64: v.kind = 1, v.i = ((const int64_t *)p)[i]; break;
    case DT_UINT8: v.kind = 2, v.u = ((const uint8_t *)p)[i]; break;
    case DT_BOOL: v.kind = 2, v.u = ((const uint8_t *)p)[i] != 0; break;
    case DT_UINT16: v.kind = 2, v.u = ((const uint16_t *)p)[i]; break;
    case DT_UINT32: v.kind = 2, v.u = ((const uint32_t *)p)[i]; break;
    case DT_UINT64: v.kind = 2, v.u = ((const uint64_t *)p)[i]; break;
    default: break;
    }
    return v;
}

__device__ __forceinline__ double as_double(const Val &v) {
    return v.kind == 0 ? v.f : v.kind == 1 ? (double)v.i : (double)v.u;
}

// d rounded to float with round-to-odd, so that rounding the result to float16 or
// bfloat16 equals rounding d directly (tensor.c's to_odd_float).
__device__ __forceinline__ float to_odd_float(double d) {
    float f = (float)d;
    if (isnan(d) || isinf(d) || (double)f == d) return f;
    if (fabs((double)f) > fabs(d)) f = nextafterf(f, 0.0f); // truncate toward zero
    return __uint_as_float(__float_as_uint(f) | 1u);
}

// The integer a value becomes: floats truncate toward zero, NaN -> 0, saturating at the
// 64-bit limits; the store narrows it modulo 2^bits (tensor.c's as_bits64).
__device__ __forceinline__ uint64_t as_bits64(const Val &v) {
    if (v.kind == 1) return (uint64_t)v.i;
    if (v.kind == 2) return v.u;
    double t = trunc(v.f);
    if (isnan(t)) return 0;
    if (t >= 18446744073709551616.0) return ~0ull;
    if (t >= 9223372036854775808.0) return (uint64_t)t;
    if (t < -9223372036854775808.0) return (uint64_t)INT64_MIN;
    return (uint64_t)(int64_t)t;
}

__device__ __forceinline__ void store_val(int dt, void *p, uint64_t i, const Val &v) {
    switch (dt) {
    case DT_FLOAT: ((float *)p)[i] = v.kind == 0 ? (float)v.f : v.kind == 1 ? (float)v.i : (float)v.u; break;
    case DT_DOUBLE: ((double *)p)[i] = as_double(v); break;
    case DT_FLOAT16: ((__half *)p)[i] = __float2half_rn(to_odd_float(as_double(v))); break;
    case DT_BFLOAT16: ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(to_odd_float(as_double(v))); break;
    case DT_BOOL: ((uint8_t *)p)[i] = v.kind == 0 ? v.f != 0 : v.kind == 1 ? v.i != 0 : v.u != 0; break;
    case DT_INT8: ((int8_t *)p)[i] = (int8_t)as_bits64(v); break;
    case DT_INT16: ((int16_t *)p)[i] = (int16_t)as_bits64(v); break;
    case DT_INT32: ((int32_t *)p)[i] = (int32_t)as_bits64(v); break;
    case DT_INT64: ((int64_t *)p)[i] = (int64_t)as_bits64(v); break;
    case DT_UINT8: ((uint8_t *)p)[i] = (uint8_t)as_bits64(v); break;
    case DT_UINT16: ((uint16_t *)p)[i] = (uint16_t)as_bits64(v); break;
    case DT_UINT32: ((uint32_t *)p)[i] = (uint32_t)as_bits64(v); break;
    case DT_UINT64: ((uint64_t *)p)[i] = as_bits64(v); break;
    default: break;
    }
}

__global__ void cast_kernel(int from, int to, void *__restrict__ out, const void *__restrict__ x, uint64_t n) {
    GRID_STRIDE_U64(i, n) store_val(to, out, i, load_val(from, x, i));
}

static bool castable(int dt) {
    switch (dt) {
    case DT_FLOAT: case DT_DOUBLE: case DT_FLOAT16: case DT_BFLOAT16: case DT_BOOL: case DT_INT8: case DT_INT16:
    case DT_INT32: case DT_INT64: case DT_UINT8: case DT_UINT16: case DT_UINT32: case DT_UINT64: return true;
    default: return false;
    }
}

extern "C" int amp_cuda_ew_cast(int from, int to, void *out, const void *x, uint64_t n, void *stream) {
    if (!n) return 0;
    if (!castable(from) || !castable(to)) return (int)cudaErrorInvalidValue;
    // the precision conversions of the AMP casts: convert.cu's vector kernels (same bits)
    if (from == DT_FLOAT && to == DT_FLOAT16) return amp_cuda_f32_to_f16((uint16_t *)out, (const float *)x, n, stream);
    if (from == DT_FLOAT && to == DT_BFLOAT16) return amp_cuda_f32_to_bf16((uint16_t *)out, (const float *)x, n, stream);
    if (from == DT_FLOAT16 && to == DT_FLOAT) return amp_cuda_f16_to_f32((float *)out, (const uint16_t *)x, n, stream);
    if (from == DT_BFLOAT16 && to == DT_FLOAT) return amp_cuda_bf16_to_f32((float *)out, (const uint16_t *)x, n, stream);
    cast_kernel<<<grid_for(n), BLOCK, 0, (cudaStream_t)stream>>>(from, to, out, x, n);
    return (int)cudaGetLastError();
}
