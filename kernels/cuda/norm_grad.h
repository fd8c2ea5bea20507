/* CUDA backward ops of the normalisations: com.microsoft SoftmaxGrad_13 and
 * LayerNormalizationGrad (norm_grad.cu: kernels and launchers; norm_grad.c: the node-level
 * kernels, the softmax layout and attributes being the CPU's). Float32, float16 and
 * bfloat16; sums in float32, in a fixed order (no atomics). */
#ifndef AMP_CUDA_NORM_GRAD_H
#define AMP_CUDA_NORM_GRAD_H

#include <stdint.h>

#ifdef __CUDACC__
#define AMP_NG_FN __host__ __device__ __forceinline__
#else
#define AMP_NG_FN static inline
#endif

/* Row range [*r0, *r1) of chunk ch of `chunks` over rows (LayerNormalizationGrad's column
 * sums): ceil(rows / chunks) rows each, the last ones short or empty. */
AMP_NG_FN void amp_cuda_lngrad_range(int64_t ch, int64_t chunks, int64_t rows, int64_t *r0, int64_t *r1) {
    int64_t per = (rows + chunks - 1) / chunks;
    *r0 = ch * per < rows ? ch * per : rows;
    *r1 = *r0 + per < rows ? *r0 + per : rows;
}

#ifdef __cplusplus
extern "C" {
#endif

/* dx = y * (dy - sum_j(dy * y)) along d of the (outer, d, inner) layout; all of dtype. */
int amp_cuda_softmax_grad_launch(int dtype, const void *dy, const void *y, void *dx, int64_t outer, int64_t d,
                                 int64_t inner, void *stream);

/* LayerNormalizationGrad over x (rows, cols), scale (cols):
 *   per row, mean m and inv_std is from mean / inv (one per row, float32 when stats_f32,
 *   else of dtype) when both are given, else from x (population variance, eps);
 *   xh = (x - m) * is, g = dy * scale: dx = is * (g - mean(g) - xh * mean(g * xh));
 *   dscale = sum over rows of dy * xh, dbias = sum of dy (column sums over `chunks` row
 *   ranges, then the chunks in order).
 * dx, dscale, dbias may each be NULL. ws: float workspace of
 * amp_cuda_lngrad_ws_floats(rows, cols, chunks) elements. */
int amp_cuda_lngrad_launch(int dtype, const void *dy, const void *x, const void *scale, const void *mean,
                           const void *inv, int stats_f32, void *dx, void *dscale, void *dbias, int64_t rows,
                           int64_t cols, float eps, int64_t chunks, float *ws, void *stream);

#ifdef __cplusplus
}

#else
#include "kernels/cuda/cuda_impl.h"

/* The float workspace of a LayerNormalizationGrad launch: the rows' statistics (2 rows)
 * and the column partial sums (2 chunks * cols). */
size_t amp_cuda_lngrad_ws_floats(int64_t rows, int64_t cols, int64_t chunks);
/* How many row ranges the column sums split rows into: about one per 32 rows, at most
 * 512, fewer where the workspace (ws_bytes) would not hold them; 0 when even one does not
 * fit. A function of the sizes alone, so the sums add in one order on every run. */
int64_t amp_cuda_lngrad_chunks(int64_t rows, int64_t cols, size_t ws_bytes);

/* dY, X and scale of one float type; mean and inv_std_dev float32 or of that type. */
bool amp_cuda_supports_layernorm_grad(const AmpNode *n, int64_t opset, const int *in_dtypes);

AmpCode amp_cuda_ms_softmax_grad(AmpKernelCtx *k);
AmpCode amp_cuda_ms_layernorm_grad(AmpKernelCtx *k);
#endif

#endif
