/* CPU kernels: activations (Relu, LeakyRelu, Sigmoid, Tanh, Gelu, Elu, Celu, Selu, PRelu,
 * ThresholdedRelu, Shrink, HardSigmoid, HardSwish, Softsign, Softplus) and the com.microsoft training ops built
 * on them (SigmoidGrad, TanhGrad, GeluGrad, ReluGrad, BiasGelu). fp32 compute for the
 * float storage types, double for double; written to not overflow for large |x|. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/elementwise_impl.h"
#include "ops/scalar_math.h"

/* The math of each is ops/scalar_math.h's; the double forms take the float attributes
 * widened. Shrink: alpha is lambd, beta bias. */
AMP_EW_DEF_MAP(map_relu, amp_relu_f(x), amp_relu_d(x))
AMP_EW_DEF_MAP(map_leaky_relu, amp_leaky_relu_f(x, p->alpha), amp_leaky_relu_d(x, p->alpha))
AMP_EW_DEF_MAP(map_sigmoid, amp_sigmoid_f(x), amp_sigmoid_d(x))
AMP_EW_DEF_MAP(map_tanh, tanhf(x), tanh(x))
AMP_EW_DEF_MAP(map_gelu, amp_gelu_f(x, p->mode), amp_gelu_d(x, p->mode))
AMP_EW_DEF_MAP(map_elu, amp_elu_f(x, p->alpha), amp_elu_d(x, p->alpha))
AMP_EW_DEF_MAP(map_celu, amp_celu_f(x, p->alpha), amp_celu_d(x, p->alpha))
AMP_EW_DEF_MAP(map_thresholded_relu, amp_thresholded_relu_f(x, p->alpha), amp_thresholded_relu_d(x, p->alpha))
AMP_EW_DEF_MAP(map_shrink, amp_shrink_f(x, p->alpha, p->beta), amp_shrink_d(x, p->alpha, p->beta))
AMP_EW_DEF_MAP(map_selu, amp_selu_f(x, p->alpha, p->gamma), amp_selu_d(x, p->alpha, p->gamma))
AMP_EW_DEF_MAP(map_hard_sigmoid, amp_hard_sigmoid_f(x, p->alpha, p->beta), amp_hard_sigmoid_d(x, p->alpha, p->beta))
AMP_EW_DEF_MAP(map_hard_swish, amp_hard_swish_f(x), amp_hard_swish_d(x))
AMP_EW_DEF_MAP(map_softsign, amp_softsign_f(x), amp_softsign_d(x))
AMP_EW_DEF_MAP(map_softplus, amp_softplus_f(x), amp_softplus_d(x))

AmpCode amp_ew_relu(AmpKernelCtx *k) {
    AmpCode rc = amp_ew_need(k, 1);
    if (rc) return rc;
    const AmpBuf *x = k->in[0];
    if (!amp_ew_is_int(x->dtype)) return amp_ew_unary_float(k, map_relu_f, map_relu_d, NULL);
    /* Opset 14 integer Relu; unsigned values are their own Relu. */
    AmpBuf *out;
    if ((rc = amp_kernel_outputs(k, 1, &out)) || !out) return rc;
    bool u = amp_ew_is_unsigned(x->dtype);
    for (uint64_t i = 0; i < x->nelem; i++) {
        int64_t v = amp_buf_get_i64(x, i);
        amp_buf_set_i64(out, i, !u && v < 0 ? 0 : v);
    }
    return AMP_OK;
}

/* ---- attributes, parsed once at prepare (AmpKernelPrepareFn) ------------------------
 * Every activation with attributes reads them into one AmpEwParams: alpha, beta, gamma
 * as the op names them (Shrink: lambd, bias), mode for Gelu's approximation. Those the
 * CUDA kernels run too are parsed in ops/ew_common.c. */

AmpCode amp_ew_prepare_shrink(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    (void)opset;
    return amp_ew_params_out((AmpEwParams){.alpha = amp_node_attr_float(n, "lambd", 0.5f),
                                           .beta = amp_node_attr_float(n, "bias", 0.0f)},
                             attrs, st);
}

AmpCode amp_ew_leaky_relu(AmpKernelCtx *k) {
    return amp_ew_unary_float(k, map_leaky_relu_f, map_leaky_relu_d, k->attrs);
}

AmpCode amp_ew_sigmoid(AmpKernelCtx *k) {
    return amp_ew_unary_float_lut(k, map_sigmoid_f, map_sigmoid_d, NULL);
}

AmpCode amp_ew_tanh(AmpKernelCtx *k) {
    return amp_ew_unary_float_lut(k, map_tanh_f, map_tanh_d, NULL);
}

AmpCode amp_ew_gelu(AmpKernelCtx *k) {
    return amp_ew_unary_float_lut(k, map_gelu_f, map_gelu_d, k->attrs);
}

AmpCode amp_ew_elu(AmpKernelCtx *k) {
    return amp_ew_unary_float_lut(k, map_elu_f, map_elu_d, k->attrs);
}

AmpCode amp_ew_celu(AmpKernelCtx *k) {
    return amp_ew_unary_float_lut(k, map_celu_f, map_celu_d, k->attrs);
}

AmpCode amp_ew_thresholded_relu(AmpKernelCtx *k) {
    return amp_ew_unary_float(k, map_thresholded_relu_f, map_thresholded_relu_d, k->attrs);
}

AmpCode amp_ew_shrink(AmpKernelCtx *k) {
    return amp_ew_unary_float(k, map_shrink_f, map_shrink_d, k->attrs);
}

AmpCode amp_ew_selu(AmpKernelCtx *k) {
    return amp_ew_unary_float_lut(k, map_selu_f, map_selu_d, k->attrs);
}

AmpCode amp_ew_hard_sigmoid(AmpKernelCtx *k) {
    return amp_ew_unary_float(k, map_hard_sigmoid_f, map_hard_sigmoid_d, k->attrs);
}

AmpCode amp_ew_hard_swish(AmpKernelCtx *k) {
    return amp_ew_unary_float(k, map_hard_swish_f, map_hard_swish_d, NULL);
}

AmpCode amp_ew_softsign(AmpKernelCtx *k) {
    return amp_ew_unary_float(k, map_softsign_f, map_softsign_d, NULL);
}

AmpCode amp_ew_softplus(AmpKernelCtx *k) {
    return amp_ew_unary_float_lut(k, map_softplus_f, map_softplus_d, NULL);
}

/* ---- PRelu -------------------------------------------------------------------------- */

AMP_EW_DEF_ROW2(row_prelu, x < 0 ? x * y : x, x < 0 ? x * y : x)

/* The slope broadcasts to X (never the other way): the output has X's shape. Before
 * opset 7 the slope was one value per channel (axis 1), shape [C] or [1]; such a slope
 * is lined up with axis 1 here (PyTorch's PReLU exports). */
AmpCode amp_ew_prelu(AmpKernelCtx *k) {
    AmpCode rc = amp_ew_need(k, 2);
    if (rc) return rc;
    const AmpBuf *x = k->in[0];
    AmpBuf slope = *k->in[1];
    if (k->opset < 7 && slope.rank == 1 && x->rank >= 2 && slope.dims[0] == x->dims[1]) {
        slope.rank = x->rank - 1; /* (C, 1, ..., 1) */
        for (int i = 1; i < slope.rank; i++) slope.dims[i] = 1;
    }
    int rank;
    int64_t dims[AMP_MAX_RANK];
    bool same = amp_broadcast_shape(x->rank, x->dims, slope.rank, slope.dims, &rank, dims) && rank == x->rank;
    for (int i = 0; same && i < rank; i++) same = dims[i] == x->dims[i];
    if (!same) return amp_kernel_fail(k, AMP_ERR_INPUT, "the slope of rank %d does not broadcast to X's shape", slope.rank);
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
    AmpCode rc = amp_ew_need(k, 3);
    if (rc) return rc;
    const AmpBuf *dy = k->in[0], *x = k->in[1], *b = k->in[2];
    if (!amp_ew_is_float(x->dtype)) return amp_kernel_bad_dtype(k, x->dtype);
    if (dy->dtype != x->dtype || b->dtype != x->dtype || !amp_buf_same_shape(dy, x) || x->rank < 1 || b->rank != 1 ||
        b->dims[0] != x->dims[x->rank - 1])
        return amp_kernel_fail(k, AMP_ERR_INPUT, "dY must be like X, and B 1-D over X's last axis");
    AmpBuf *dx;
    if ((rc = amp_kernel_outputs(k, 1, &dx)) || !dx || (rc = amp_kernel_check_out(k, dx, x->dtype, x->rank, x->dims)) ||
        !x->nelem)
        return rc;
    uint64_t h = (uint64_t)b->dims[0];
    if (x->dtype == AMP_DT_DOUBLE) {
        const double *g = dy->data, *xv = x->data, *bv = b->data;
        double *o = dx->data;
        for (uint64_t i = 0; i < x->nelem; i++) o[i] = g[i] * amp_gelu_grad_d(xv[i] + bv[i % h], AMP_GELU_EXACT);
        return AMP_OK;
    }
    float *t[4] = {NULL};
    const float *g = amp_buf_f32_in(dy, &t[0]), *xv = amp_buf_f32_in(x, &t[1]), *bv = amp_buf_f32_in(b, &t[2]);
    float *o = amp_buf_f32_out(dx, &t[3]);
    if (!g || !xv || !bv || !o) {
        free(t[0]), free(t[1]), free(t[2]), free(t[3]);
        return amp_kernel_fail(k, AMP_ERR_INTERNAL, "out of memory");
    }
    for (uint64_t i = 0; i < x->nelem; i++) o[i] = g[i] * amp_gelu_grad_f(xv[i] + bv[i % h], AMP_GELU_EXACT);
    amp_buf_f32_commit(dx, t[3]);
    free(t[0]), free(t[1]), free(t[2]);
    return AMP_OK;
}

/* BiasGelu(A, B) = Gelu(A + B), B a bias over the last axis (any broadcast works) */
AmpCode amp_ew_bias_gelu(AmpKernelCtx *k) {
    return binary(k, row_bias_gelu_f, row_bias_gelu_d, k->attrs);
}
