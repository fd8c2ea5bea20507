/* CUDA losses: SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss and com.microsoft
 * SoftmaxCrossEntropyLossGrad (loss.cu: kernels and launchers; loss.c: the node-level
 * kernels and the launch plan). Scores (N, C, d1..dk) of float32, float16 or bfloat16,
 * labels (N, d1..dk) int32 or int64; the arithmetic in float32, the reductions over the
 * samples in double, in a fixed order (per-block partial sums, then one block): the same
 * bits on every run. */
#ifndef AMP_CUDA_LOSS_H
#define AMP_CUDA_LOSS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* How the per-sample kernel maps samples to threads. */
enum {
    AMP_CUDA_LOSS_WARP,   /* a warp per sample (d1..dk empty, C <= 1024): the classes contiguous */
    AMP_CUDA_LOSS_BLOCK,  /* a block per sample (d1..dk empty, C > 1024: vocabularies) */
    AMP_CUDA_LOSS_THREAD  /* a thread per sample (d1..dk given: neighbours are neighbouring d) */
};

#define AMP_CUDA_LOSS_MAX_BLOCKS 1024 /* grid cap: the partial sums' count */

/* A loss launch: the sizes, the attributes, and the grid (amp_cuda_loss_plan). */
typedef struct AmpCudaLoss {
    int64_t n, c, dk;  /* samples are n * dk, each of c classes at stride dk */
    int red;           /* AMP_LOSS_NONE / SUM / MEAN (ops/norm_attrs.h) */
    int has_ii;
    int64_t ii;        /* ignore_index */
    int mode;          /* AMP_CUDA_LOSS_* */
    unsigned blocks, threads;
} AmpCudaLoss;

/* Per sample s = (n, d) with label l (ignored: loss 0, weight 0; outside [0, c): NaN, where
 * the CPU reports an error): logp = x - max - log(sum exp(x - max)) with softmax, else x;
 * loss_s = -w[l] * logp[l]. log_prob (NULL, or x's shape) gets logp; loss gets loss_s per
 * sample (red NONE) or the scalar sum / sum over the weights of the samples not ignored
 * (SUM / MEAN). partials: workspace of 2 * p->blocks doubles (SUM / MEAN). w may be NULL;
 * x, w, loss and log_prob have type dtype, labels label_dtype. */
int amp_cuda_loss_launch(int dtype, int label_dtype, int softmax, const void *x, const void *labels, const void *w,
                         void *loss, void *log_prob, double *partials, const AmpCudaLoss *p, void *stream);

/* SoftmaxCrossEntropyLossGrad: dx = g * (exp(log_prob) - onehot(l)) (+ bias) with
 * g = dy[s] (red NONE) or dy[0], times w[l], divided for MEAN by the weight sum (computed
 * first into partials[0..2 * blocks) and the double at partials[2 * blocks]); 0 (+ bias)
 * for an ignored sample, NaN for a label outside [0, c). */
int amp_cuda_loss_grad_launch(int dtype, int label_dtype, const void *dy, const void *log_prob, const void *labels,
                              const void *w, const void *bias, void *dx, double *partials, const AmpCudaLoss *p,
                              void *stream);

#ifdef __cplusplus
}

#else
#include "kernels/cuda/cuda_impl.h"

/* The grid of p's sizes (n, c, dk): its mode, blocks and threads; a function of the sizes
 * alone, so a loss sums in the same order on every run. */
void amp_cuda_loss_plan(AmpCudaLoss *p);
/* Workspace bytes a launch of plan p needs (partials, and the weight sum). */
size_t amp_cuda_loss_workspace(const AmpCudaLoss *p);

/* Scores and labels of one float / integer type (weights, dY, bias of the scores' type). */
bool amp_cuda_supports_loss(const AmpNode *n, int64_t opset, const int *in_dtypes);
bool amp_cuda_supports_loss_grad(const AmpNode *n, int64_t opset, const int *in_dtypes);

AmpCode amp_cuda_sce_loss(AmpKernelCtx *k);
AmpCode amp_cuda_nll_loss(AmpKernelCtx *k);
AmpCode amp_cuda_ms_sce_loss_grad(AmpKernelCtx *k);
#endif

#endif
