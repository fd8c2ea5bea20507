/* The ai.onnx.preview.training optimizers' attributes (ops/optim_math.c parses them) and
 * per-element arithmetic below every backend, shared by the CPU kernels
 * (kernels/cpu/optim.c) and the CUDA ones (kernels/cuda/optim.c, .cu), so that both
 * backends compute each update with the same operations in the same order, in double:
 * under nvcc every product and sum is an explicitly rounded intrinsic (no fused
 * multiply-add the CPU would round twice; the host build is ISO C, where GCC does not
 * contract either), and the bias correction's powers are the same sequence of products
 * (amp_opt_powi) rather than each side's pow(). Division and square root are IEEE on
 * both. */
#ifndef AMP_OPS_OPTIM_MATH_H
#define AMP_OPS_OPTIM_MATH_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __CUDACC__
#define AMP_OPT_FN __host__ __device__ __forceinline__
#else
#define AMP_OPT_FN static inline
#endif

#ifdef __CUDA_ARCH__
#define AMP_OPT_MUL(a, b) __dmul_rn((a), (b))
#define AMP_OPT_ADD(a, b) __dadd_rn((a), (b))
#define AMP_OPT_SUB(a, b) __dsub_rn((a), (b))
#else
#define AMP_OPT_MUL(a, b) ((a) * (b))
#define AMP_OPT_ADD(a, b) ((a) + (b))
#define AMP_OPT_SUB(a, b) ((a) - (b))
#endif

typedef enum AmpOptKind { AMP_OPT_ADAM, AMP_OPT_MOMENTUM, AMP_OPT_ADAGRAD } AmpOptKind;

/* One optimizer node's attributes, parsed once at prepare (amp_optimizer_prepare);
 * double, as the spec's arithmetic. */
typedef struct AmpOptAttrs {
    int32_t kind;  /* AmpOptKind */
    int32_t nesterov; /* Momentum: mode "nesterov" */
    double alpha, beta, eps, norm, norm_post, decay;
} AmpOptAttrs;

#ifndef __CUDACC__
#include "ir/ir.h"
/* Adam's, Momentum's and Adagrad's prepare function (AmpKernelPrepareFn) on every
 * backend: an AmpOptAttrs. */
AmpCode amp_optimizer_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);

#include "ir/kernel.h" /* AmpKernelCtx */
#include "ir/tensor.h" /* AmpBuf */
/* Adam's, Momentum's and Adagrad's geometry (ops/geom.h): the layout (R, T, then groups
 * groups of N inputs: X, G, the states; at most groups - 1 groups of N outputs: X_new, the
 * new states); each tensor's X, G and state present and of X's shape, each of its outputs
 * (X_new, the new states) where placed of its input's dtype and shape. R, T and the gate
 * are values, read per run. Its AmpKernelGeomFn: AMP_ERR_INPUT where one of those does
 * not hold. */
typedef struct AmpOptGeom {
    int groups, N;
} AmpOptGeom;
AmpCode amp_optimizer_geom(AmpKernelCtx *k, void *geom, bool *made);
/* Tensor i's inputs in[groups] and outputs out[groups - 1] (NULL where the node does not
 * list one) in such a node, of outs, the outputs as the executor placed them. */
void amp_opt_tensor_io(const AmpKernelCtx *k, int groups, int N, AmpBuf *const *outs, int i, const AmpBuf **in,
                       AmpBuf **out);
/* InPlaceAccumulatorV2's outputs as placed and checked, every backend's: *flag bool [1],
 * *out of buf's dtype and shape (each NULL where the node does not list it). */
AmpCode amp_accumulator_outs(AmpKernelCtx *k, const AmpBuf *buf, AmpBuf **flag, AmpBuf **out);
#endif

/* What one step's update reads besides the tensors: the learning rate r, the rate the
 * update applies (Adam: bias-corrected; Adagrad: decayed; Momentum: r) and Momentum's
 * gradient coefficient (1 on the first step, T = 0). */
typedef struct AmpOptStep {
    double r, ra, beta_adj;
} AmpOptStep;

/* base^t for t >= 1 by repeated squaring, every product rounded: the same bits on both
 * backends. */
AMP_OPT_FN double amp_opt_powi(double base, int64_t t) {
    double acc = 1.0;
    while (t > 0) {
        if (t & 1) acc = AMP_OPT_MUL(acc, base);
        base = AMP_OPT_MUL(base, base);
        t >>= 1;
    }
    return acc;
}

AMP_OPT_FN AmpOptStep amp_opt_step(const AmpOptAttrs *a, double r, int64_t t) {
    AmpOptStep s = {r, r, t > 0 ? a->beta : 1.0};
    if (a->kind == AMP_OPT_ADAM && t > 0)
        s.ra = AMP_OPT_MUL(r, sqrt(AMP_OPT_SUB(1.0, amp_opt_powi(a->beta, t)))) /
               AMP_OPT_SUB(1.0, amp_opt_powi(a->alpha, t));
    if (a->kind == AMP_OPT_ADAGRAD) s.ra = r / AMP_OPT_ADD(1.0, AMP_OPT_MUL((double)t, a->decay));
    return s;
}

/* One element: x, its gradient and state s1 (Momentum V, Adagrad H, Adam V) and s2 (Adam
 * H) -> the new x, s1 and s2 (ONNX's pseudo code). */
AMP_OPT_FN void amp_opt_update(const AmpOptAttrs *a, const AmpOptStep *st, double x, double grad, double s1, double s2,
                               double *xn, double *n1, double *n2) {
    double g = AMP_OPT_ADD(AMP_OPT_MUL(a->norm, x), grad);
    *n2 = 0.0;
    if (a->kind == AMP_OPT_ADAM) {
        *n1 = AMP_OPT_ADD(AMP_OPT_MUL(a->alpha, s1), AMP_OPT_MUL(AMP_OPT_SUB(1.0, a->alpha), g));
        *n2 = AMP_OPT_ADD(AMP_OPT_MUL(a->beta, s2), AMP_OPT_MUL(AMP_OPT_MUL(AMP_OPT_SUB(1.0, a->beta), g), g));
        double q = *n1 / AMP_OPT_ADD(sqrt(*n2), a->eps);
        *xn = AMP_OPT_MUL(AMP_OPT_SUB(1.0, a->norm_post), AMP_OPT_SUB(x, AMP_OPT_MUL(st->ra, q)));
    } else if (a->kind == AMP_OPT_MOMENTUM) {
        *n1 = AMP_OPT_ADD(AMP_OPT_MUL(a->alpha, s1), AMP_OPT_MUL(st->beta_adj, g));
        *xn = a->nesterov ? AMP_OPT_SUB(x, AMP_OPT_MUL(st->r, AMP_OPT_ADD(g, AMP_OPT_MUL(a->alpha, *n1))))
                          : AMP_OPT_SUB(x, AMP_OPT_MUL(st->r, *n1));
    } else {
        *n1 = AMP_OPT_ADD(s1, AMP_OPT_MUL(g, g));
        *xn = AMP_OPT_SUB(x, AMP_OPT_MUL(st->ra, g) / AMP_OPT_ADD(sqrt(*n1), a->eps));
    }
}

#endif
