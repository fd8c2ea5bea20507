/* CUDA normalisations: Softmax and LogSoftmax, LayerNormalization, BatchNormalization
 * (inference and training), InstanceNormalization and GroupNormalization (norm.cu: kernels
 * and launchers; norm.c: the node-level kernels). Float32, float16 and bfloat16 data;
 * statistics, sums and the arithmetic in float32, rounded once on store. */
#ifndef AMP_CUDA_NORM_H
#define AMP_CUDA_NORM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Softmax (log_out 0) or LogSoftmax (1) of x's (outer, d, inner) layout along d:
 * element (o, j, i) at (o * d + j) * inner + i. y is typed as x (dtype: AmpDType). */
int amp_cuda_softmax_launch(int dtype, int log_out, const void *x, void *y, int64_t outer, int64_t d, int64_t inner,
                            void *stream);

/* Where a row normalisation reads element (row, col)'s scale and bias. */
enum {
    AMP_CUDA_NP_COL,    /* scale[col % n_s], bias[col % n_b] (LayerNormalization, the usual case) */
    AMP_CUDA_NP_ROW,    /* both [row % n_s] (InstanceNormalization: per channel) */
    AMP_CUDA_NP_GROUP,  /* both [(row % groups) * cpg + col / s] (GroupNormalization per channel) */
    AMP_CUDA_NP_GENERAL /* both at X's index (row * cols + col over dims) times sstr / bstr */
};

#define AMP_CUDA_NORM_MAX_RANK 8 /* AMP_MAX_RANK (norm.c checks) */

typedef struct AmpCudaNormParam {
    int mode;
    int64_t n_s, n_b;          /* COL, ROW (>= 1) */
    int64_t groups, cpg, s;    /* GROUP */
    int rank;                  /* GENERAL: X's dims and the parameters' strides in them */
    int64_t dims[AMP_CUDA_NORM_MAX_RANK], sstr[AMP_CUDA_NORM_MAX_RANK], bstr[AMP_CUDA_NORM_MAX_RANK];
} AmpCudaNormParam;

/* Per row of x (rows, cols): mean and inv = 1 / sqrt(var + eps) (population variance,
 * two passes), y = (x - mean) * inv * scale + bias. bias, y, mean and inv (float32, one
 * per row) may each be NULL. x, scale, bias and y have type dtype. */
int amp_cuda_rownorm_launch(int dtype, const void *x, const void *scale, const void *bias, void *y, float *mean,
                            float *inv, int64_t rows, int64_t cols, const AmpCudaNormParam *p, float eps,
                            void *stream);

/* Inference BatchNormalization of x (n, c, s): y = (x - mean[c]) * scale[c] /
 * sqrt(var[c] + eps) + bias[c], all of type dtype. */
int amp_cuda_batchnorm_launch(int dtype, const void *x, const void *scale, const void *bias, const void *mean,
                              const void *var, void *y, int64_t n, int64_t c, int64_t s, float eps, void *stream);

/* Training BatchNormalization of x (n, c, s), a block per channel: the batch mean and
 * population variance in float32 (two passes), y = (x - mean) * scale / sqrt(var + eps) +
 * bias where y is not NULL, and stats[0..3] (each NULL or c elements of dtype): running
 * mean = mean_in * momentum + mean * (1 - momentum), running var likewise, the batch mean
 * and the batch var. An empty channel's statistics are NaN (0 / 0), as on the CPU. */
int amp_cuda_batchnorm_train_launch(int dtype, const void *x, const void *scale, const void *bias,
                                    const void *mean_in, const void *var_in, void *y, void *const *stats, int64_t n,
                                    int64_t c, int64_t s, float eps, float momentum, void *stream);

#ifdef __cplusplus
}

#else
#include "kernels/cuda/cuda_impl.h"
#include "ops/norm_attrs.h" /* AmpSoftmaxAttrs, AmpNormAttrs: every backend's parsed attributes */

bool amp_cuda_supports_layernorm(const AmpNode *n, int64_t opset, const int *in_dtypes);
bool amp_cuda_supports_batchnorm(const AmpNode *n, int64_t opset, const int *in_dtypes);

AmpCode amp_cuda_softmax(AmpKernelCtx *k);
AmpCode amp_cuda_log_softmax(AmpKernelCtx *k);
AmpCode amp_cuda_layernorm(AmpKernelCtx *k);
AmpCode amp_cuda_batchnorm(AmpKernelCtx *k);
AmpCode amp_cuda_instancenorm(AmpKernelCtx *k);
AmpCode amp_cuda_groupnorm(AmpKernelCtx *k);
#endif

#endif
