/* Resize on CUDA (resize.c, resize.cu): the output geometry and every axis' source
 * indices and weights are every backend's (ops/resize_geom.h), computed on the host
 * when the node runs and copied into the session's workspace; one kernel then gathers
 * (nearest: element bytes, any dtype) or sums the taps (linear, cubic: fp32 weights and
 * accumulation, 16-bit data converted on load and rounded on store). */
#ifndef AMP_CUDA_RESIZE_H
#define AMP_CUDA_RESIZE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define AMP_CUDA_RESIZE_RANK 8

/* Y (out) from X: axis d's table holds taps[d] entries per output index from entry
 * tab[d] on, a source index (-1: the extrapolation value) and, when interpolating, a
 * weight. */
typedef struct AmpCudaResize {
    int rank, interp; /* interp: 0 nearest (a byte copy), 1 the weighted sum */
    int fkind;        /* interp: 0 float32, 1 float16, 2 bfloat16 */
    int esize;        /* nearest: element bytes, 1, 2, 4 or 8 */
    int64_t out[AMP_CUDA_RESIZE_RANK];
    int64_t stride[AMP_CUDA_RESIZE_RANK]; /* X's element strides */
    int taps[AMP_CUDA_RESIZE_RANK];
    int64_t tab[AMP_CUDA_RESIZE_RANK];
    float extrap;            /* interp: the extrapolation value */
    unsigned long long ev;   /* nearest: the extrapolation value's bytes in X's dtype */
} AmpCudaResize;

/* idx: the tables' int32 source indices; w: their float weights (interp only); n: Y's
 * element count (> 0). */
int amp_cuda_resize_launch(void *y, const void *x, const int32_t *idx, const float *w, const AmpCudaResize *p,
                           uint64_t n, void *stream);

#ifdef __cplusplus
}
#endif

#ifndef __CUDACC__
#include "kernels/cuda/cuda_impl.h"
#include "ops/resize_geom.h"

AmpCode amp_cuda_resize(AmpKernelCtx *k);
bool amp_cuda_supports_resize(const AmpNode *n, int64_t opset, const int *in_dtypes);
/* The tables' device layout for x's rank axes (host side, tested on the CPU): fills p's
 * taps and tab from ax and out, and returns the entry count (0 when an index does not
 * fit int32 or the entries exceed max_entries: the kernel then refuses the node). */
size_t amp_cuda_resize_layout(int rank, const int64_t *xdims, const int64_t *out, const int *taps,
                              size_t max_entries, AmpCudaResize *p);
/* The tables of ax (the CPU's, for X of rank dims and an output of out) as the kernel
 * reads them, in one host buffer of *bytes: int32 indices from 0, then (interp) float
 * weights from *woff (256-byte aligned); p's layout filled. NULL with *bytes 0 when they
 * need over max_entries entries or an index over int32, NULL with *bytes 1 when out of
 * memory. */
char *amp_cuda_resize_pack(int rank, const int64_t *xdims, const int64_t *out, const AmpResizeAxis *ax,
                           bool interp, size_t max_entries, AmpCudaResize *p, size_t *bytes, size_t *woff);
#endif

#endif
