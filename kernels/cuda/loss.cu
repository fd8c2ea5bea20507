// Loss kernels: SoftmaxCrossEntropyLoss / NegativeLogLikelihoodLoss per sample (a warp, a
// block or a thread per sample, amp_cuda_loss_plan), each block's sums of the losses and
// weights in double written to its partials, then one block adds the partials in a fixed
// order (no atomics: the same bits every run). SoftmaxCrossEntropyLossGrad is elementwise
// after the weight sum (for reduction mean) is reduced the same way.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "kernels/cuda/device.cuh"
#include "kernels/cuda/loss.h"
#include "kernels/cuda/loss_elem.h"

enum { DT_FLOAT = 1, DT_INT32 = 6, DT_INT64 = 7, DT_FLOAT16 = 10, DT_BFLOAT16 = 16 }; // AmpDType numbers
enum { RED_NONE = 0, RED_SUM = 1, RED_MEAN = 2 };                                  // AmpLossReduction

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, o));
    return v;
}

// v summed (or maxed) over the block through sh[32]; every thread gets the result.
template <typename V, bool MAX>
__device__ __forceinline__ V block_red(V v, V *sh) {
    v = MAX ? (V)warp_max((float)v) : warp_sum(v);
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    __syncthreads(); // the previous call's reads of sh are done
    if (lane == 0) sh[w] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : (MAX ? (V)-INFINITY : (V)0);
    return MAX ? (V)warp_max((float)v) : warp_sum(v);
}

// The label of sample s (amp_cuda_loss_label: a class, IGNORED or BAD).
template <typename L>
__device__ __forceinline__ int64_t label_of(const L *labels, int64_t s, int64_t c, bool has_ii, int64_t ii) {
    return amp_cuda_loss_label((int64_t)labels[s], c, has_ii, ii);
}

// ---- the per-sample kernel ---------------------------------------------------------------

// v reduced over the sample's group: nothing (a thread), a warp or the block.
template <int MODE, bool MAX>
__device__ __forceinline__ float group_red(float v, float *sh) {
    if (MODE == AMP_CUDA_LOSS_THREAD) return v;
    if (MODE == AMP_CUDA_LOSS_WARP) return MAX ? warp_max(v) : warp_sum(v);
    return block_red<float, MAX>(v, sh);
}

// One sample by a group of nth threads (tid in it): max and log-sum-exp over the classes at
// base + j * dk, log_prob written; returns logp of class l (valid l) to every thread.
template <typename T, int MODE>
__device__ __forceinline__ float group_logp(const T *x, T *lp, int64_t base, int64_t c, int64_t dk, int64_t l,
                                            bool softmax, int tid, int nth, float *sh) {
    float m = 0.0f, ls = 0.0f;
    if (softmax) {
        m = -INFINITY;
        for (int64_t j = tid; j < c; j += nth) m = fmaxf(m, ld(x, base + j * dk));
        m = group_red<MODE, true>(m, sh);
        float s = 0.0f;
        for (int64_t j = tid; j < c; j += nth) s += expf(ld(x, base + j * dk) - m);
        ls = logf(group_red<MODE, false>(s, sh));
        if (lp)
            for (int64_t j = tid; j < c; j += nth) st(lp, base + j * dk, ld(x, base + j * dk) - m - ls);
    }
    return l >= 0 ? ld(x, base + l * dk) - m - ls : 0.0f;
}

// MODE: AMP_CUDA_LOSS_WARP / BLOCK / THREAD. Each block ends with its loss and weight sums
// (double) in partials[2 * blockIdx.x ..]; per-sample losses go to out (red NONE).
template <typename T, typename L, int MODE>
__global__ void loss_kernel(const T *__restrict__ x, const L *__restrict__ labels, const T *__restrict__ w,
                            T *__restrict__ out, T *__restrict__ lp, double *__restrict__ partials, AmpCudaLoss p,
                            bool softmax) {
    __shared__ float sh[32];
    __shared__ double shd[32];
    int64_t ns = p.n * p.dk;
    int tid = MODE == AMP_CUDA_LOSS_WARP ? threadIdx.x & 31 : MODE == AMP_CUDA_LOSS_BLOCK ? threadIdx.x : 0;
    int nth = MODE == AMP_CUDA_LOSS_WARP ? 32 : MODE == AMP_CUDA_LOSS_BLOCK ? blockDim.x : 1;
    int64_t s0 = MODE == AMP_CUDA_LOSS_WARP    ? blockIdx.x * (int64_t)(blockDim.x >> 5) + (threadIdx.x >> 5)
                 : MODE == AMP_CUDA_LOSS_BLOCK ? (int64_t)blockIdx.x
                                               : blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    int64_t step = MODE == AMP_CUDA_LOSS_WARP    ? (int64_t)gridDim.x * (blockDim.x >> 5)
                   : MODE == AMP_CUDA_LOSS_BLOCK ? (int64_t)gridDim.x
                                                 : (int64_t)gridDim.x * blockDim.x;
    double acc_l = 0.0, acc_w = 0.0; // the group leader's sums
    for (int64_t s = s0; s < ns; s += step) {
        int64_t n = s / p.dk, d = s % p.dk, base = n * p.c * p.dk + d;
        int64_t l = label_of(labels, s, p.c, p.has_ii != 0, p.ii);
        float logp = group_logp<T, MODE>(x, lp, base, p.c, p.dk, l, softmax, tid, nth, sh);
        if (tid == 0) {
            float li, wl;
            amp_cuda_loss_sample(l, logp, w && l >= 0 ? ld(w, l) : 1.0f, &li, &wl);
            if (out) st(out, s, li);
            acc_l += li, acc_w += wl;
        }
    }
    if (!partials) return;
    acc_l = block_red<double, false>(acc_l, shd);
    acc_w = block_red<double, false>(acc_w, shd);
    if (threadIdx.x == 0) partials[2 * blockIdx.x] = acc_l, partials[2 * blockIdx.x + 1] = acc_w;
}

// One block: the partials of nb blocks summed in a fixed order; out = sum (SUM) or
// sum / weights (MEAN) in T, and/or the weight sum to *wsum.
template <typename T>
__global__ void finish_kernel(const double *__restrict__ partials, unsigned nb, int red, T *out, double *wsum) {
    __shared__ double shd[32];
    double a = 0.0, b = 0.0;
    for (unsigned i = threadIdx.x; i < nb; i += blockDim.x) a += partials[2 * i], b += partials[2 * i + 1];
    a = block_red<double, false>(a, shd);
    b = block_red<double, false>(b, shd);
    if (threadIdx.x) return;
    if (out) st(out, 0, (float)(red == RED_MEAN ? a / b : a)); // NaN when every sample is ignored
    if (wsum) *wsum = b;
}

// ---- SoftmaxCrossEntropyLossGrad ---------------------------------------------------------

// The weight sum of the samples not ignored (NaN with a label outside [0, c)), per block.
template <typename T, typename L>
__global__ void weight_sum_kernel(const L *__restrict__ labels, const T *__restrict__ w, double *__restrict__ partials,
                                  AmpCudaLoss p) {
    __shared__ double shd[32];
    double a = 0.0;
    GRID_STRIDE(s, p.n * p.dk) {
        int64_t l = label_of(labels, s, p.c, p.has_ii != 0, p.ii);
        a += l == AMP_CUDA_LOSS_IGNORED ? 0.0 : l == AMP_CUDA_LOSS_BAD ? (double)NAN : w ? (double)ld(w, l) : 1.0;
    }
    a = block_red<double, false>(a, shd);
    if (threadIdx.x == 0) partials[2 * blockIdx.x] = 0.0, partials[2 * blockIdx.x + 1] = a;
}

// dx per element (n, j, d) of the scores' layout; wsum: the weight sum (MEAN) or NULL.
// DK1: no d1..dk (one division per element instead of three).
template <typename T, typename L, bool DK1>
__global__ void loss_grad_kernel(const T *__restrict__ dy, const T *__restrict__ lp, const L *__restrict__ labels,
                                 const T *__restrict__ w, const T *__restrict__ bias, T *__restrict__ dx,
                                 const double *__restrict__ wsum, AmpCudaLoss p) {
    int64_t cdk = p.c * p.dk;
    GRID_STRIDE(i, p.n * cdk) {
        int64_t s, j;
        if (DK1) {
            s = i / p.c, j = i - s * p.c;
        } else {
            int64_t n = i / cdk, r = i - n * cdk;
            j = r / p.dk, s = n * p.dk + (r - j * p.dk);
        }
        int64_t l = label_of(labels, s, p.c, p.has_ii != 0, p.ii);
        float dyv = l >= 0 ? ld(dy, p.red == RED_NONE ? s : 0) : 0.0f, w_l = w && l >= 0 ? ld(w, l) : 1.0f;
        float r = amp_cuda_loss_grad_elem(l, j, dyv, w_l, wsum, ld(lp, i));
        if (bias) r += ld(bias, i);
        st(dx, i, r);
    }
}

// The loss of no sample: 0 (SUM) or NaN (MEAN: 0 / 0), as on the CPU.
template <typename T>
__global__ void empty_kernel(T *out, int red) {
    st(out, 0, red == RED_MEAN ? NAN : 0.0f);
}

template <typename T, typename L>
static void finish_kernel_empty(void *loss, int red, cudaStream_t cs) {
    empty_kernel<T><<<1, 1, 0, cs>>>((T *)loss, red);
}

// ---- launchers ------------------------------------------------------------------------------

template <typename T, typename L>
static void loss_typed(bool softmax, const void *x, const void *labels, const void *w, void *loss, void *lp,
                       double *partials, const AmpCudaLoss *p, cudaStream_t cs) {
    bool none = p->red == RED_NONE;
    T *out = none ? (T *)loss : NULL;
    double *part = none ? NULL : partials;
#define LOSS(MODE)                                                                                              \
    loss_kernel<T, L, MODE><<<p->blocks, p->threads, 0, cs>>>((const T *)x, (const L *)labels, (const T *)w, out, \
                                                              (T *)lp, part, *p, softmax)
    switch (p->mode) {
    case AMP_CUDA_LOSS_WARP: LOSS(AMP_CUDA_LOSS_WARP); break;
    case AMP_CUDA_LOSS_BLOCK: LOSS(AMP_CUDA_LOSS_BLOCK); break;
    default: LOSS(AMP_CUDA_LOSS_THREAD); break;
    }
#undef LOSS
    if (!none && loss) finish_kernel<T><<<1, 256, 0, cs>>>(partials, p->blocks, p->red, (T *)loss, NULL);
}

template <typename T, typename L>
static void grad_typed(const void *dy, const void *lp, const void *labels, const void *w, const void *bias, void *dx,
                       double *partials, const AmpCudaLoss *p, cudaStream_t cs) {
    double *wsum = NULL;
    if (p->red == RED_MEAN) {
        wsum = partials + 2 * p->blocks;
        weight_sum_kernel<T, L><<<p->blocks, 256, 0, cs>>>((const L *)labels, (const T *)w, partials, *p);
        finish_kernel<T><<<1, 256, 0, cs>>>(partials, p->blocks, RED_MEAN, NULL, wsum);
    }
    int64_t total = p->n * p->c * p->dk, g = (total + 255) / 256;
    unsigned grid = (unsigned)(g < 1 ? 1 : g > 65535 * 4 ? 65535 * 4 : g);
    if (p->dk == 1)
        loss_grad_kernel<T, L, true><<<grid, 256, 0, cs>>>((const T *)dy, (const T *)lp, (const L *)labels,
                                                           (const T *)w, (const T *)bias, (T *)dx, wsum, *p);
    else
        loss_grad_kernel<T, L, false><<<grid, 256, 0, cs>>>((const T *)dy, (const T *)lp, (const L *)labels,
                                                            (const T *)w, (const T *)bias, (T *)dx, wsum, *p);
}

// Dispatches F<T, L>(args...) on the dtypes; false for a pair it does not take.
#define DISPATCH(F, dtype, ldt, ...)                                                           \
    do {                                                                                       \
        bool l64 = (ldt) == DT_INT64;                                                          \
        if ((ldt) != DT_INT64 && (ldt) != DT_INT32) return (int)cudaErrorInvalidValue;         \
        switch (dtype) {                                                                       \
        case DT_FLOAT: l64 ? F<float, int64_t>(__VA_ARGS__) : F<float, int32_t>(__VA_ARGS__); break; \
        case DT_FLOAT16: l64 ? F<__half, int64_t>(__VA_ARGS__) : F<__half, int32_t>(__VA_ARGS__); break; \
        case DT_BFLOAT16:                                                                      \
            l64 ? F<__nv_bfloat16, int64_t>(__VA_ARGS__) : F<__nv_bfloat16, int32_t>(__VA_ARGS__); \
            break;                                                                             \
        default: return (int)cudaErrorInvalidValue;                                            \
        }                                                                                      \
    } while (0)

extern "C" int amp_cuda_loss_launch(int dtype, int label_dtype, int softmax, const void *x, const void *labels,
                                    const void *w, void *loss, void *log_prob, double *partials, const AmpCudaLoss *p,
                                    void *stream) {
    cudaStream_t cs = (cudaStream_t)stream;
    if (p->n * p->dk <= 0) { // no sample: the sum is 0, the mean 0 / 0
        if (p->red == RED_NONE || !loss) return 0;
        DISPATCH(finish_kernel_empty, dtype, label_dtype, loss, p->red, cs);
        return (int)cudaGetLastError();
    }
    DISPATCH(loss_typed, dtype, label_dtype, softmax != 0, x, labels, w, loss, log_prob, partials, p, cs);
    return (int)cudaGetLastError();
}

extern "C" int amp_cuda_loss_grad_launch(int dtype, int label_dtype, const void *dy, const void *log_prob,
                                         const void *labels, const void *w, const void *bias, void *dx,
                                         double *partials, const AmpCudaLoss *p, void *stream) {
    if (p->n * p->c * p->dk <= 0) return 0;
    DISPATCH(grad_typed, dtype, label_dtype, dy, log_prob, labels, w, bias, dx, partials, p, (cudaStream_t)stream);
    return (int)cudaGetLastError();
}
