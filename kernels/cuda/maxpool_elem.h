/* One MaxPool-with-Indices output element, for grad_ops.cu's kernel and for the host test
 * that runs the same arithmetic against the CPU kernel (tests/cuda/test_cuda_grad_host.c):
 * kernels/cpu/pool.c's pool_planes for one output, its window clipped to the input and
 * walked in row-major order, the first maximum winning and a NaN winning and sticking. */
#ifndef AMP_CUDA_MAXPOOL_ELEM_H
#define AMP_CUDA_MAXPOOL_ELEM_H

#include <math.h>

#include "kernels/cuda/grad_ops.h"

#ifdef __CUDACC__
#define AMP_MP_FN __device__ __forceinline__ /* the element reads go through device conversions */
#else
#define AMP_MP_FN static inline
#endif

/* The kernel offsets [lo, hi) whose input position start + j * dil lies in [0, limit). */
AMP_MP_FN void amp_mp_window(int64_t start, int64_t dil, int64_t kern, int64_t limit, int64_t *lo, int64_t *hi) {
    *lo = start >= 0 ? 0 : (-start + dil - 1) / dil;
    *hi = start >= limit ? 0 : (limit - 1 - start) / dil + 1;
    if (*hi > kern) *hi = kern;
    if (*hi < *lo) *hi = *lo;
}

/* Defines NAME(p, i, x, &best): output i (plane-major over planes x out...) of p over x
 * (elements of T, read as float by TO_F); returns the flat input index of the maximum
 * (plane * in-size + the row-major offset, or the column-major one when p->col_major),
 * -1 for a window wholly in the padding (best then -inf). */
#define AMP_CUDA_MAXPOOL_ELEM(NAME, T, TO_F)                                                                   \
    AMP_MP_FN int64_t NAME(const AmpCudaPoolIdx *p, uint64_t i, const T *x, float *best_out) {                  \
        uint64_t O = 1, NI = 1;                                                                                 \
        for (int d = 0; d < p->nsp; d++) O *= (uint64_t)p->out[d], NI *= (uint64_t)p->in[d];                    \
        uint64_t plane = i / O, q = i % O, count = 1;                                                           \
        int64_t start[AMP_CUDA_POOL_SPATIAL], lo[AMP_CUDA_POOL_SPATIAL], hi[AMP_CUDA_POOL_SPATIAL];             \
        int64_t j[AMP_CUDA_POOL_SPATIAL];                                                                       \
        for (int d = p->nsp - 1; d >= 0; d--) { /* the output position, row-major */                           \
            int64_t o = (int64_t)(q % (uint64_t)p->out[d]);                                                     \
            q /= (uint64_t)p->out[d];                                                                           \
            start[d] = o * p->stride[d] - p->pad0[d];                                                           \
            amp_mp_window(start[d], p->dil[d], p->kern[d], p->in[d], &lo[d], &hi[d]);                           \
            count *= (uint64_t)(hi[d] - lo[d]);                                                                 \
            j[d] = lo[d];                                                                                       \
        }                                                                                                       \
        const T *xp = x + plane * NI;                                                                           \
        float best = -INFINITY;                                                                                 \
        int64_t arg = -1;                                                                                       \
        for (uint64_t c = 0; c < count; c++) {                                                                  \
            int64_t off = 0, coff = 0, cs = 1;                                                                  \
            for (int d = 0; d < p->nsp; d++) {                                                                  \
                int64_t ip = start[d] + j[d] * p->dil[d];                                                       \
                off = off * p->in[d] + ip;                                                                      \
                coff += ip * cs;                                                                                \
                cs *= p->in[d];                                                                                 \
            }                                                                                                   \
            float v = TO_F(xp[off]);                                                                            \
            if (arg < 0 || v > best || (isnan(v) && !isnan(best))) {                                            \
                best = v;                                                                                       \
                arg = p->col_major ? coff : off;                                                                \
            }                                                                                                   \
            for (int d = p->nsp - 1; d >= 0; d--) { /* the next offset, the last axis fastest */               \
                if (++j[d] < hi[d]) break;                                                                      \
                j[d] = lo[d];                                                                                   \
            }                                                                                                   \
        }                                                                                                       \
        *best_out = best;                                                                                       \
        return arg < 0 ? -1 : (int64_t)(plane * NI) + arg;                                                      \
    }

#endif
