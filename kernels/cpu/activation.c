/* CPU kernels: PRelu and the com.microsoft training ops built on the activations
 * (SigmoidGrad, TanhGrad, GeluGrad, ReluGrad, BiasGelu, BiasGeluGrad_dX); the one-input
 * activations (Relu, Sigmoid, Gelu ...) are lines of ops/unary.def, run by unary.c's
 * generic kernel. fp32 compute for the float storage types, double for double; written to
 * not overflow for large |x|. The math is ops/scalar_math.h's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/elementwise_impl.h"
#include "ops/geom.h"
#include "ops/scalar_math.h"

/* ---- PRelu -------------------------------------------------------------------------- */

AMP_EW_DEF_ROW2(row_prelu, x < 0 ? x * y : x, x < 0 ? x * y : x)

/* The slope as it broadcasts to X (amp_ew_prelu_slope, ops/ew_common.h: before opset 7 a
 * per-channel slope lines up with axis 1); the output has X's shape. */
AmpCode amp_ew_prelu(AmpKernelCtx *k) {
    AmpCode rc = amp_ew_need(k, 2);
    if (rc) return rc;
    const AmpBuf *x = k->in[0];
    AmpBuf slope;
    if ((rc = amp_ew_prelu_slope(k, x, &slope))) return rc;
    return amp_ew_binary_float(k, x, &slope, row_prelu_f, row_prelu_d, NULL);
}

/* ---- com.microsoft gradients: (dY, Y or X) -> dX ------------------------------------- */

AMP_EW_DEF_ROW2(row_sigmoid_grad, amp_sigmoid_grad_f(x, y), amp_sigmoid_grad_d(x, y))
AMP_EW_DEF_ROW2(row_tanh_grad, amp_tanh_grad_f(x, y), amp_tanh_grad_d(x, y))
AMP_EW_DEF_ROW2(row_relu_grad, amp_relu_grad_f(x, y), amp_relu_grad_d(x, y))
AMP_EW_DEF_ROW2(row_gelu_grad, x * amp_gelu_grad_f(y, p->mode), x * amp_gelu_grad_d(y, p->mode))
AMP_EW_DEF_ROW2(row_bias_gelu, amp_gelu_f(x + y, p->mode), amp_gelu_d(x + y, p->mode))

/* Inputs 0 and 1 through a row, output of input 0's type and the broadcast shape. */
static AmpCode binary(AmpKernelCtx *k, AmpEwRowF f, AmpEwRowD d, const AmpEwParams *p) {
    AmpCode rc = amp_ew_need(k, 2);
    return rc ? rc : amp_ew_binary_float(k, k->in[0], k->in[1], f, d, p);
}

/* SigmoidGrad(dY, Y) = dY * Y * (1 - Y) */
AmpCode amp_ew_sigmoid_grad(AmpKernelCtx *k) {
    return binary(k, row_sigmoid_grad_f, row_sigmoid_grad_d, NULL);
}

/* TanhGrad(dY, Y) = dY * (1 - Y^2) */
AmpCode amp_ew_tanh_grad(AmpKernelCtx *k) {
    return binary(k, row_tanh_grad_f, row_tanh_grad_d, NULL);
}

/* ReluGrad(dY, X) = dY where X > 0, else 0 */
AmpCode amp_ew_relu_grad(AmpKernelCtx *k) {
    return binary(k, row_relu_grad_f, row_relu_grad_d, NULL);
}

/* GeluGrad(dY, X) = dY * Gelu'(X) */
AmpCode amp_ew_gelu_grad(AmpKernelCtx *k) {
    return binary(k, row_gelu_grad_f, row_gelu_grad_d, k->attrs);
}

/* com.microsoft BiasGeluGrad_dX (dY, X, B) = dY * Gelu'(X + B) (the exact form), B a
 * 1-D bias over X's last axis, dY of X's type and shape; in fp32 (fp64 for double). */
AmpCode amp_ms_bias_gelu_grad(AmpKernelCtx *k) {
    AmpBiasGeluGradGeom own;
    const AmpBiasGeluGradGeom *gm; /* amp_bias_gelu_grad_geom (ops/ew_common.h): the inputs' shapes, dX checked */
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&gm);
    if (rc) return rc;
    const AmpBuf *dy = k->in[0], *x = k->in[1], *b = k->in[2];
    if (!amp_ew_is_float(x->dtype)) return amp_kernel_bad_dtype(k, x->dtype);
    AmpBuf *dx;
    if ((rc = amp_kernel_outputs(k, 1, &dx)) || !dx || !gm->n) return rc;
    uint64_t h = gm->h;
    if (x->dtype == AMP_DT_DOUBLE) {
        const double *g = dy->data, *xv = x->data, *bv = b->data;
        double *o = dx->data;
        for (uint64_t i = 0; i < gm->n; i++) o[i] = g[i] * amp_gelu_grad_d(xv[i] + bv[i % h], AMP_GELU_EXACT);
        return AMP_OK;
    }
    float *t[4] = {NULL};
    const float *g = amp_buf_f32_in(dy, &t[0]), *xv = amp_buf_f32_in(x, &t[1]), *bv = amp_buf_f32_in(b, &t[2]);
    float *o = amp_buf_f32_out(dx, &t[3]);
    if (!g || !xv || !bv || !o) {
        free(t[0]), free(t[1]), free(t[2]), free(t[3]);
        return amp_kernel_fail(k, AMP_ERR_INTERNAL, "out of memory");
    }
    for (uint64_t i = 0; i < gm->n; i++) o[i] = g[i] * amp_gelu_grad_f(xv[i] + bv[i % h], AMP_GELU_EXACT);
    amp_buf_f32_commit(dx, t[3]);
    free(t[0]), free(t[1]), free(t[2]);
    return AMP_OK;
}

/* BiasGelu(A, B) = Gelu(A + B), B a bias over the last axis (any broadcast works) */
AmpCode amp_ew_bias_gelu(AmpKernelCtx *k) {
    return binary(k, row_bias_gelu_f, row_bias_gelu_d, k->attrs);
}
