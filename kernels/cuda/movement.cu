// Data-movement kernels: every op of the family is a strided copy (Transpose, Concat,
// Split, Slice, Expand, Tile), an index lookup (Gather, GatherElements), Pad, a fill, a few
// bytes passed by value (Shape, Size, small Constants), or Range. Elements move as
// unsigned integers of their byte size, so one instantiation serves every dtype of a
// size; contiguous runs are widened up to 16 bytes where sizes and alignment allow.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cuda/movement.h"

#define GRID_STRIDE(I, i, n) \
    for (I i = (I)(blockIdx.x * (size_t)blockDim.x + threadIdx.x); i < (n); i += (I)gridDim.x * blockDim.x)

static const unsigned BLOCK = 256;

// Blocks for `items` (at least 1), capped at 65535 * 4: larger arrays loop in each thread.
static unsigned grid_for(uint64_t items) {
    uint64_t g = (items + BLOCK - 1) / BLOCK;
    const uint64_t cap = 65535ull * 4;
    return (unsigned)(g ? (g < cap ? g : cap) : 1);
}

// Element types by byte size (16: uint4, only for widened contiguous runs).
template <int ES> struct Elem;
template <> struct Elem<1> { typedef uint8_t T; };
template <> struct Elem<2> { typedef uint16_t T; };
template <> struct Elem<4> { typedef uint32_t T; };
template <> struct Elem<8> { typedef unsigned long long T; };
template <> struct Elem<16> { typedef uint4 T; };

// ---- strided copy --------------------------------------------------------------------

// I: the index type of the decomposition (uint32_t when every index fits: 64-bit
// division is many instructions on the GPU). Offsets are int64.
template <typename T, typename I>
__global__ void strided_copy_kernel(T *__restrict__ dst, const T *__restrict__ src, AmpCudaView v, I n) {
    GRID_STRIDE(I, i, n) {
        I rem = i;
        int64_t so = 0, dof = 0;
        for (int d = v.rank - 1; d > 0; d--) {
            I dim = (I)v.dims[d];
            I c = rem % dim;
            rem /= dim;
            so += (int64_t)c * v.src[d];
            dof += (int64_t)c * v.dst[d];
        }
        so += (int64_t)rem * v.src[0];
        dof += (int64_t)rem * v.dst[0];
        dst[dof] = src[so];
    }
}

// Drops axes of size 1 and merges neighbours that are one run in both source and
// destination; *n gets the element count (0: nothing to copy).
static void coalesce(AmpCudaView *v, uint64_t *n) {
    AmpCudaView o;
    o.rank = 0;
    *n = 1;
    for (int d = 0; d < v->rank; d++) {
        if (v->dims[d] == 0) {
            *n = 0;
            return;
        }
        *n *= (uint64_t)v->dims[d];
    }
    // From the innermost axis out; o is built innermost-first, then reversed.
    for (int d = v->rank - 1; d >= 0; d--) {
        if (v->dims[d] == 1) continue;
        int j = o.rank - 1;
        if (j >= 0 && v->src[d] == o.src[j] * o.dims[j] && v->dst[d] == o.dst[j] * o.dims[j]) {
            o.dims[j] *= v->dims[d];
            continue;
        }
        o.dims[o.rank] = v->dims[d], o.src[o.rank] = v->src[d], o.dst[o.rank] = v->dst[d];
        o.rank++;
    }
    v->rank = o.rank;
    for (int d = 0; d < o.rank; d++) {
        v->dims[d] = o.dims[o.rank - 1 - d];
        v->src[d] = o.src[o.rank - 1 - d];
        v->dst[d] = o.dst[o.rank - 1 - d];
    }
}

template <typename T>
static void launch_copy(void *dst, const void *src, const AmpCudaView &v, uint64_t n, cudaStream_t s) {
    if (n < (1ull << 31))
        strided_copy_kernel<T, uint32_t><<<grid_for(n), BLOCK, 0, s>>>((T *)dst, (const T *)src, v, (uint32_t)n);
    else
        strided_copy_kernel<T, uint64_t><<<grid_for(n), BLOCK, 0, s>>>((T *)dst, (const T *)src, v, (uint64_t)n);
}

extern "C" int amp_cuda_strided_copy(void *dst, int64_t dst_off, const void *src, int64_t src_off, size_t es,
                                     const AmpCudaView *view, void *stream) {
    cudaStream_t s = (cudaStream_t)stream;
    AmpCudaView v = *view;
    uint64_t n;
    coalesce(&v, &n);
    if (!n) return 0;
    char *d = (char *)dst + dst_off * (int64_t)es;
    const char *sp = (const char *)src + src_off * (int64_t)es;
    if (v.rank == 0 || (v.rank == 1 && v.src[0] == 1 && v.dst[0] == 1))
        return (int)cudaMemcpyAsync(d, sp, (size_t)n * es, cudaMemcpyDeviceToDevice, s);
    // Widen: a run contiguous in both (inner strides 1) of an even length, with every other
    // stride even and both pointers aligned to twice the size, moves as elements of twice
    // the size.
    int r = v.rank;
    while (es < 16 && v.src[r - 1] == 1 && v.dst[r - 1] == 1 && v.dims[r - 1] % 2 == 0 &&
           (((uintptr_t)d | (uintptr_t)sp) & (2 * es - 1)) == 0) {
        bool even = true;
        for (int i = 0; i < r - 1; i++) even = even && v.src[i] % 2 == 0 && v.dst[i] % 2 == 0;
        if (!even) break;
        for (int i = 0; i < r - 1; i++) v.src[i] /= 2, v.dst[i] /= 2;
        v.dims[r - 1] /= 2;
        n /= 2;
        es *= 2;
    }
    switch (es) {
    case 1: launch_copy<Elem<1>::T>(d, sp, v, n, s); break;
    case 2: launch_copy<Elem<2>::T>(d, sp, v, n, s); break;
    case 4: launch_copy<Elem<4>::T>(d, sp, v, n, s); break;
    case 8: launch_copy<Elem<8>::T>(d, sp, v, n, s); break;
    case 16: launch_copy<Elem<16>::T>(d, sp, v, n, s); break;
    default: return (int)cudaErrorInvalidValue;
    }
    return (int)cudaGetLastError();
}

// ---- Gather, GatherElements ------------------------------------------------------------

// Index j of idx, wrapped (negative: from the end) and clamped into [0, dim).
template <typename IX>
__device__ __forceinline__ int64_t index_at(const IX *idx, uint64_t j, int64_t dim) {
    int64_t v = (int64_t)idx[j];
    if (v < 0) v += dim;
    return v < 0 ? 0 : v >= dim ? dim - 1 : v;
}

// y (outer, nidx, inner) from x (outer, dim, inner).
template <typename T, typename IX>
__global__ void gather_kernel(T *__restrict__ y, const T *__restrict__ x, const IX *__restrict__ idx, uint64_t n,
                              uint64_t nidx, uint64_t inner, int64_t dim) {
    GRID_STRIDE(uint64_t, i, n) {
        uint64_t in = i % inner, t = i / inner;
        uint64_t j = t % nidx, o = t / nidx;
        int64_t v = index_at(idx, j, dim);
        y[i] = x[(o * (uint64_t)dim + (uint64_t)v) * inner + in];
    }
}

template <typename T>
static void launch_gather(void *y, const void *x, const void *idx, int idx64, uint64_t n, uint64_t nidx,
                          uint64_t inner, int64_t dim, cudaStream_t s) {
    if (idx64)
        gather_kernel<T, int64_t><<<grid_for(n), BLOCK, 0, s>>>((T *)y, (const T *)x, (const int64_t *)idx, n, nidx,
                                                                inner, dim);
    else
        gather_kernel<T, int32_t><<<grid_for(n), BLOCK, 0, s>>>((T *)y, (const T *)x, (const int32_t *)idx, n, nidx,
                                                                inner, dim);
}

extern "C" int amp_cuda_gather_rows(void *y, const void *x, const void *idx, int idx64, size_t es, int64_t outer,
                               int64_t nidx, int64_t inner, int64_t dim, void *stream) {
    cudaStream_t s = (cudaStream_t)stream;
    if (outer <= 0 || nidx <= 0 || inner <= 0) return 0;
    // Rows of inner elements move as the widest unit that divides them and both pointers.
    uint64_t row = (uint64_t)inner * es;
    size_t w = 16;
    while (w > es && (row % w || ((uintptr_t)y | (uintptr_t)x) % w)) w /= 2;
    if (w < es) w = es;
    uint64_t in_w = row / w;
    uint64_t n = (uint64_t)outer * (uint64_t)nidx * in_w;
    switch (w) {
    case 1: launch_gather<Elem<1>::T>(y, x, idx, idx64, n, (uint64_t)nidx, in_w, dim, s); break;
    case 2: launch_gather<Elem<2>::T>(y, x, idx, idx64, n, (uint64_t)nidx, in_w, dim, s); break;
    case 4: launch_gather<Elem<4>::T>(y, x, idx, idx64, n, (uint64_t)nidx, in_w, dim, s); break;
    case 8: launch_gather<Elem<8>::T>(y, x, idx, idx64, n, (uint64_t)nidx, in_w, dim, s); break;
    case 16: launch_gather<Elem<16>::T>(y, x, idx, idx64, n, (uint64_t)nidx, in_w, dim, s); break;
    default: return (int)cudaErrorInvalidValue;
    }
    return (int)cudaGetLastError();
}

// y (g.dims) at c = x at c with c[axis] replaced by idx[c].
template <typename T, typename IX>
__global__ void gather_elements_kernel(T *__restrict__ y, const T *__restrict__ x, const IX *__restrict__ idx,
                                       uint64_t n, AmpCudaGatherElements g) {
    GRID_STRIDE(uint64_t, i, n) {
        uint64_t rem = i;
        int64_t off = 0;
        for (int d = g.rank - 1; d >= 0; d--) {
            uint64_t c = rem % (uint64_t)g.dims[d];
            rem /= (uint64_t)g.dims[d];
            if (d != g.axis) off += (int64_t)c * g.xs[d];
        }
        off += index_at(idx, i, g.dim) * g.xs[g.axis];
        y[i] = x[off];
    }
}

template <typename T>
static void launch_gather_elements(void *y, const void *x, const void *idx, int idx64, uint64_t n,
                                   const AmpCudaGatherElements &g, cudaStream_t s) {
    if (idx64)
        gather_elements_kernel<T, int64_t><<<grid_for(n), BLOCK, 0, s>>>((T *)y, (const T *)x, (const int64_t *)idx,
                                                                         n, g);
    else
        gather_elements_kernel<T, int32_t><<<grid_for(n), BLOCK, 0, s>>>((T *)y, (const T *)x, (const int32_t *)idx,
                                                                         n, g);
}

extern "C" int amp_cuda_gather_elems(void *y, const void *x, const void *idx, int idx64, size_t es,
                                        const AmpCudaGatherElements *g, void *stream) {
    cudaStream_t s = (cudaStream_t)stream;
    uint64_t n = 1;
    for (int d = 0; d < g->rank; d++) n *= (uint64_t)g->dims[d];
    if (!n) return 0;
    switch (es) {
    case 1: launch_gather_elements<Elem<1>::T>(y, x, idx, idx64, n, *g, s); break;
    case 2: launch_gather_elements<Elem<2>::T>(y, x, idx, idx64, n, *g, s); break;
    case 4: launch_gather_elements<Elem<4>::T>(y, x, idx, idx64, n, *g, s); break;
    case 8: launch_gather_elements<Elem<8>::T>(y, x, idx, idx64, n, *g, s); break;
    default: return (int)cudaErrorInvalidValue;
    }
    return (int)cudaGetLastError();
}

// ---- Pad ---------------------------------------------------------------------------------

// Source index along an axis of size dim for padded coordinate c, or -1 for the constant
// (the CPU's pad_src).
__device__ __forceinline__ int64_t pad_src(int mode, int64_t c, int64_t dim) {
    if (c >= 0 && c < dim) return c;
    switch (mode) {
    case 2: return c < 0 ? 0 : dim - 1;             // edge
    case 3: return ((c % dim) + dim) % dim;         // wrap
    case 1: {                                        // reflect: period 2 (dim - 1)
        if (dim == 1) return 0;
        int64_t p = 2 * (dim - 1);
        int64_t m = ((c % p) + p) % p;
        return m < dim ? m : p - m;
    }
    default: return -1;
    }
}

template <typename T>
__global__ void pad_kernel(T *__restrict__ y, const T *__restrict__ x, uint64_t n, AmpCudaPad p, const T *cval,
                           uint64_t cbits) {
    T c;
    if (cval) c = *cval;
    else memcpy(&c, &cbits, sizeof c);
    GRID_STRIDE(uint64_t, i, n) {
        uint64_t rem = i;
        int64_t off = 0, stride = 1;
        bool outside = false;
        for (int d = p.rank - 1; d >= 0; d--) {
            int64_t o = (int64_t)(rem % (uint64_t)p.odims[d]);
            rem /= (uint64_t)p.odims[d];
            int64_t s = pad_src(p.mode, o - p.before[d], p.xdims[d]);
            if (s < 0) outside = true;
            else off += s * stride;
            stride *= p.xdims[d];
        }
        y[i] = outside ? c : x[off];
    }
}

extern "C" int amp_cuda_pad_copy(void *y, const void *x, size_t es, const AmpCudaPad *p, const void *cval, uint64_t cbits,
                            void *stream) {
    cudaStream_t s = (cudaStream_t)stream;
    uint64_t n = 1;
    for (int d = 0; d < p->rank; d++) n *= (uint64_t)p->odims[d];
    if (!n) return 0;
    switch (es) {
#define PAD_CASE(ES)                                                                                        \
    case ES:                                                                                                \
        pad_kernel<Elem<ES>::T><<<grid_for(n), BLOCK, 0, s>>>((Elem<ES>::T *)y, (const Elem<ES>::T *)x, n, *p, \
                                                             (const Elem<ES>::T *)cval, cbits);             \
        break;
        PAD_CASE(1)
        PAD_CASE(2)
        PAD_CASE(4)
        PAD_CASE(8)
#undef PAD_CASE
    default: return (int)cudaErrorInvalidValue;
    }
    return (int)cudaGetLastError();
}

// ---- fill, small bytes, upload --------------------------------------------------------------

template <typename T>
__global__ void fill_kernel(T *__restrict__ y, uint64_t n, uint64_t bits) {
    T v;
    memcpy(&v, &bits, sizeof v);
    GRID_STRIDE(uint64_t, i, n) y[i] = v;
}

extern "C" int amp_cuda_fill(void *y, size_t es, uint64_t bits, uint64_t n, void *stream) {
    cudaStream_t s = (cudaStream_t)stream;
    if (!n) return 0;
    // Fill the pattern repeated to 8 bytes where the count and alignment allow.
    if (es < 8 && ((uintptr_t)y % 8) == 0 && (n * es) % 8 == 0) {
        uint64_t pat = 0;
        for (size_t b = 0; b < 8; b += es) pat |= (bits & (es == 8 ? ~0ull : ((1ull << (8 * es)) - 1))) << (8 * b);
        bits = pat;
        n = n * es / 8;
        es = 8;
    }
    switch (es) {
    case 1: fill_kernel<Elem<1>::T><<<grid_for(n), BLOCK, 0, s>>>((Elem<1>::T *)y, n, bits); break;
    case 2: fill_kernel<Elem<2>::T><<<grid_for(n), BLOCK, 0, s>>>((Elem<2>::T *)y, n, bits); break;
    case 4: fill_kernel<Elem<4>::T><<<grid_for(n), BLOCK, 0, s>>>((Elem<4>::T *)y, n, bits); break;
    case 8: fill_kernel<Elem<8>::T><<<grid_for(n), BLOCK, 0, s>>>((Elem<8>::T *)y, n, bits); break;
    default: return (int)cudaErrorInvalidValue;
    }
    return (int)cudaGetLastError();
}

__global__ void put_small_kernel(unsigned char *__restrict__ y, AmpCudaSmall s) {
    for (uint32_t i = threadIdx.x; i < s.len; i += blockDim.x) y[i] = s.b[i];
}

extern "C" int amp_cuda_put_small(void *y, const AmpCudaSmall *s, void *stream) {
    if (!s->len) return 0;
    if (s->len > AMP_CUDA_SMALL_BYTES) return (int)cudaErrorInvalidValue;
    put_small_kernel<<<1, BLOCK, 0, (cudaStream_t)stream>>>((unsigned char *)y, *s);
    return (int)cudaGetLastError();
}

extern "C" int amp_cuda_upload(void *dst, const void *src, size_t bytes, void *stream) {
    if (!bytes) return 0;
    return (int)cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, (cudaStream_t)stream);
}

// ---- Range -------------------------------------------------------------------------------

// d rounded to float with round-to-odd, so that a later rounding to 16 bits equals
// rounding d directly (the CPU's to_odd_float).
__device__ __forceinline__ float to_odd_float(double d) {
    float f = __double2float_rz(d);
    if (isnan(d) || (double)f == d) return f;
    return __uint_as_float(__float_as_uint(f) | 1u);
}

__device__ __forceinline__ double load_d(const float *p) { return (double)*p; }
__device__ __forceinline__ double load_d(const double *p) { return *p; }
__device__ __forceinline__ double load_d(const __half *p) { return (double)__half2float(*p); }
__device__ __forceinline__ double load_d(const __nv_bfloat16 *p) { return (double)__bfloat162float(*p); }
__device__ __forceinline__ void store_d(float *p, double v) { *p = __double2float_rn(v); }
__device__ __forceinline__ void store_d(double *p, double v) { *p = v; }
__device__ __forceinline__ void store_d(__half *p, double v) { *p = __float2half_rn(to_odd_float(v)); }
__device__ __forceinline__ void store_d(__nv_bfloat16 *p, double v) { *p = __float2bfloat16_rn(to_odd_float(v)); }

template <typename T>
__global__ void range_float_kernel(T *__restrict__ y, const T *start, const T *delta, uint64_t n) {
    double s = load_d(start), d = load_d(delta);
    // Rounded multiply, then add (no FMA contraction): the CPU's two roundings.
    GRID_STRIDE(uint64_t, i, n) store_d(y + i, __dadd_rn(s, __dmul_rn((double)i, d)));
}

// Integers: unsigned arithmetic, wrapping as the CPU's.
template <typename T, typename U>
__global__ void range_int_kernel(T *__restrict__ y, const T *start, const T *delta, uint64_t n) {
    U s = (U)*start, d = (U)*delta;
    GRID_STRIDE(uint64_t, i, n) y[i] = (T)(s + (U)i * d);
}

extern "C" int amp_cuda_range_fill(void *y, int dtype, const void *start, const void *delta, uint64_t n, void *stream) {
    cudaStream_t s = (cudaStream_t)stream;
    if (!n) return 0;
    unsigned g = grid_for(n);
    switch (dtype) {
    case 1: /* AMP_DT_FLOAT */
        range_float_kernel<float><<<g, BLOCK, 0, s>>>((float *)y, (const float *)start, (const float *)delta, n);
        break;
    case 11: /* AMP_DT_DOUBLE */
        range_float_kernel<double><<<g, BLOCK, 0, s>>>((double *)y, (const double *)start, (const double *)delta, n);
        break;
    case 10: /* AMP_DT_FLOAT16 */
        range_float_kernel<__half><<<g, BLOCK, 0, s>>>((__half *)y, (const __half *)start, (const __half *)delta, n);
        break;
    case 16: /* AMP_DT_BFLOAT16 */
        range_float_kernel<__nv_bfloat16><<<g, BLOCK, 0, s>>>((__nv_bfloat16 *)y, (const __nv_bfloat16 *)start,
                                                               (const __nv_bfloat16 *)delta, n);
        break;
    case 6: /* AMP_DT_INT32 */
        range_int_kernel<int32_t, uint32_t><<<g, BLOCK, 0, s>>>((int32_t *)y, (const int32_t *)start,
                                                                (const int32_t *)delta, n);
        break;
    case 7: /* AMP_DT_INT64 */
        range_int_kernel<int64_t, uint64_t><<<g, BLOCK, 0, s>>>((int64_t *)y, (const int64_t *)start,
                                                                (const int64_t *)delta, n);
        break;
    default: return (int)cudaErrorInvalidValue;
    }
    return (int)cudaGetLastError();
}
