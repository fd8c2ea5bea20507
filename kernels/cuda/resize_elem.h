/* One Resize output element's sources, for resize.cu's kernels and for the host test
 * that runs the same arithmetic on the CPU (tests/cuda/test_cuda_host_geometry.c). */
#ifndef AMP_CUDA_RESIZE_ELEM_H
#define AMP_CUDA_RESIZE_ELEM_H

#include "kernels/cuda/resize.h"

#ifdef __CUDACC__
#define AMP_RS_FN __host__ __device__ __forceinline__
#else
#define AMP_RS_FN static inline
#endif

/* The output coordinates c of linear index i, the last axis fastest. */
AMP_RS_FN void amp_cuda_resize_coords(uint64_t i, const AmpCudaResize *p, int64_t *c) {
    for (int d = p->rank - 1; d >= 0; d--) {
        uint64_t o = (uint64_t)p->out[d];
        c[d] = (int64_t)(i % o);
        i /= o;
    }
}

/* Tap combination t (one tap per axis, the last axis varying fastest) of the element at
 * c: X's element offset in *off and the product of the weights in *wt (w NULL: nearest,
 * weight 1); false when a source lies outside (the extrapolation value). */
AMP_RS_FN bool amp_cuda_resize_tap(const AmpCudaResize *p, const int32_t *idx, const float *w, const int64_t *c,
                                   int t, int64_t *off, float *wt) {
    bool inside = true;
    float f = 1.f;
    int64_t o = 0;
    for (int d = p->rank - 1; d >= 0; d--) {
        int nt = p->taps[d], j = t % nt;
        t /= nt;
        int64_t e = p->tab[d] + c[d] * nt + j;
        int32_t s = idx[e];
        inside = inside && s >= 0;
        if (w) f *= w[e];
        o += (int64_t)s * p->stride[d];
    }
    *off = o;
    *wt = f;
    return inside;
}

/* The tap combinations of every element: the product of the axes' taps. */
AMP_RS_FN int amp_cuda_resize_combos(const AmpCudaResize *p) {
    int n = 1;
    for (int d = 0; d < p->rank; d++) n *= p->taps[d];
    return n;
}

#endif
