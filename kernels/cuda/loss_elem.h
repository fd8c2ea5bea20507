/* The per-sample and per-element arithmetic of the loss kernels, for loss.cu and for the
 * host test that runs it against the CPU kernels (tests/cuda/test_cuda_loss_elem.c). */
#ifndef AMP_CUDA_LOSS_ELEM_H
#define AMP_CUDA_LOSS_ELEM_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __CUDACC__
#define AMP_LOSS_FN __host__ __device__ __forceinline__
#else
#define AMP_LOSS_FN static inline
#endif

enum { AMP_CUDA_LOSS_IGNORED = -1, AMP_CUDA_LOSS_BAD = -2 };

/* A sample's label: its class, IGNORED (ignore_index) or BAD (outside [0, c)). */
AMP_LOSS_FN int64_t amp_cuda_loss_label(int64_t raw, int64_t c, bool has_ii, int64_t ii) {
    if (has_ii && raw == ii) return AMP_CUDA_LOSS_IGNORED;
    return raw >= 0 && raw < c ? raw : AMP_CUDA_LOSS_BAD;
}

/* Sample loss li = -w_l * logp_l and its weight wl (what a mean divides by): 0 and 0 when
 * ignored, NaN for a bad label. w_l: the label's weight (1 without weights), logp_l its
 * log-probability, both read by the caller only for a class. */
AMP_LOSS_FN void amp_cuda_loss_sample(int64_t l, float logp_l, float w_l, float *li, float *wl) {
    if (l == AMP_CUDA_LOSS_IGNORED) *li = 0.0f, *wl = 0.0f;
    else if (l == AMP_CUDA_LOSS_BAD) *li = *wl = NAN;
    else *wl = w_l, *li = -w_l * logp_l;
}

/* SoftmaxCrossEntropyLossGrad's element of class j of a sample with label l (before the
 * bias): (dy * w_l [/ *wsum for mean]) * (exp(lp) - [j == l]); 0 ignored, NaN bad. */
AMP_LOSS_FN float amp_cuda_loss_grad_elem(int64_t l, int64_t j, float dy, float w_l, const double *wsum, float lp) {
    if (l == AMP_CUDA_LOSS_IGNORED) return 0.0f;
    if (l == AMP_CUDA_LOSS_BAD) return NAN;
    float g = dy * w_l;
    if (wsum) g = (float)((double)g / *wsum);
    return g * (expf(lp) - (j == l ? 1.0f : 0.0f));
}

#endif
