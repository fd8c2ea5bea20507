/* Gradient rules of the matrix products and the elementwise arithmetic. x, y: the inputs;
 * out: the node's output; g: its gradient. Inputs that were broadcast get their gradient
 * summed back to their shape (amp_grad_unbroadcast). */
#include <math.h>

#include "grad_impl.h"

#define PI 3.14159265358979323846
#define SQRT1_2 0.70710678118654752440

#define B(c) ((c)->b)
#define IN(c, i) ((c)->n->inputs[i])
#define OUT(c) ((c)->n->outputs[0])
#define G(c) ((c)->gy[0])

/* ---- matrix products -------------------------------------------------------------------- */

/* Y = A @ B (numpy semantics): dA = g @ B^T, dB = A^T @ g, summed over broadcast batch
 * axes. A 1-D operand is made a matrix first (A: [1, K]; B: [K, 1]) and g with it. */
void amp_grad_matmul(AmpGradCtx *c) {
    AmpValue *a = IN(c, 0), *bm = IN(c, 1), *g = G(c);
    int ra = amp_grad_rank(c, a), rb = amp_grad_rank(c, bm);
    if (ra < 0 || rb < 0) return;
    AmpBuilder *b = B(c);
    if (ra == 1) {
        static const int64_t front[1] = {0}, before_last[1] = {-2};
        a = amp_build_axes_op(b, "Unsqueeze", "matmul_a2", a, front, 1);
        g = amp_build_axes_op(b, "Unsqueeze", "matmul_g2", g, before_last, 1);
    }
    if (rb == 1) {
        static const int64_t last[1] = {-1};
        bm = amp_build_axes_op(b, "Unsqueeze", "matmul_b2", bm, last, 1);
        g = amp_build_axes_op(b, "Unsqueeze", "matmul_g2", g, last, 1);
    }
    if (amp_grad_wants(c, 0)) {
        AmpValue *d = amp_build2(b, "MatMul", "matmul_da", g, amp_grad_swap_last(c, bm));
        d = amp_grad_unbroadcast(c, d, a);
        c->gx[0] = ra == 1 ? amp_grad_reshape_like(c, d, IN(c, 0)) : d;
    }
    if (amp_grad_wants(c, 1)) {
        AmpValue *d = amp_build2(b, "MatMul", "matmul_db", amp_grad_swap_last(c, a), g);
        d = amp_grad_unbroadcast(c, d, bm);
        c->gx[1] = rb == 1 ? amp_grad_reshape_like(c, d, IN(c, 1)) : d;
    }
}

/* A Gemm(x, y) with alpha and the transpose flags given (no C). */
static AmpValue *gemm(AmpGradCtx *c, AmpValue *x, AmpValue *y, int64_t ta, int64_t tb, float alpha) {
    AmpValue *in[2] = {x, y};
    AmpNode *n = amp_build_start(B(c), "Gemm", "gemm", in, 2, 1);
    if (ta) amp_build_attr_int(B(c), n, "transA", 1);
    if (tb) amp_build_attr_int(B(c), n, "transB", 1);
    if (alpha != 1.0f) amp_build_attr_float(B(c), n, "alpha", alpha);
    return amp_build_end(B(c), n);
}

/* Y = alpha * A' @ B' + beta * C, A' = transA ? A^T : A, B' likewise.
 * dA' = alpha g B'^T, so dA = transA ? alpha B' g^T : alpha g B'^T;
 * dB' = alpha A'^T g, so dB = transB ? alpha g^T A' : alpha A'^T g; dC = beta g summed
 * back to C's shape. Each is one Gemm with the flags chosen. */
void amp_grad_gemm(AmpGradCtx *c) {
    AmpNode *n = c->n;
    AmpValue *a = IN(c, 0), *bm = IN(c, 1), *g = G(c);
    int64_t ta = amp_node_attr_int(n, "transA", 0) != 0, tb = amp_node_attr_int(n, "transB", 0) != 0;
    float alpha = amp_node_attr_float(n, "alpha", 1.0f), beta = amp_node_attr_float(n, "beta", 1.0f);
    if (amp_grad_wants(c, 0)) c->gx[0] = ta ? gemm(c, bm, g, tb, 1, alpha) : gemm(c, g, bm, 0, !tb, alpha);
    if (amp_grad_wants(c, 1)) c->gx[1] = tb ? gemm(c, g, a, 1, ta, alpha) : gemm(c, a, g, !ta, 0, alpha);
    if (amp_grad_wants(c, 2)) {
        AmpValue *gc = beta == 1.0f ? g : amp_build2(B(c), "Mul", "gemm_dc", g, amp_grad_scalar_like(c, g, beta));
        c->gx[2] = amp_grad_unbroadcast(c, gc, IN(c, 2));
    }
}

/* ---- binary arithmetic ------------------------------------------------------------------ */

void amp_grad_add(AmpGradCtx *c) {
    for (int i = 0; i < 2; i++)
        if (amp_grad_wants(c, i)) c->gx[i] = amp_grad_unbroadcast(c, G(c), IN(c, i));
}

void amp_grad_sub(AmpGradCtx *c) {
    if (amp_grad_wants(c, 0)) c->gx[0] = amp_grad_unbroadcast(c, G(c), IN(c, 0));
    if (amp_grad_wants(c, 1)) c->gx[1] = amp_grad_unbroadcast(c, amp_build1(B(c), "Neg", "sub_dy", G(c)), IN(c, 1));
}

void amp_grad_mul(AmpGradCtx *c) {
    for (int i = 0; i < 2; i++)
        if (amp_grad_wants(c, i))
            c->gx[i] = amp_grad_unbroadcast(c, amp_build2(B(c), "Mul", "mul_d", G(c), IN(c, 1 - i)), IN(c, i));
}

/* out = x / y: dx = g / y, dy = -g * out / y. */
void amp_grad_div(AmpGradCtx *c) {
    AmpBuilder *b = B(c);
    if (amp_grad_wants(c, 0)) c->gx[0] = amp_grad_unbroadcast(c, amp_build2(b, "Div", "div_dx", G(c), IN(c, 1)), IN(c, 0));
    if (amp_grad_wants(c, 1)) {
        AmpValue *q = amp_build2(b, "Div", "div_q", OUT(c), IN(c, 1));
        AmpValue *d = amp_build1(b, "Neg", "div_dy", amp_build2(b, "Mul", "div_gq", G(c), q));
        c->gx[1] = amp_grad_unbroadcast(c, d, IN(c, 1));
    }
}

/* out = x ^ y: dx = g * y * x^(y-1), dy = g * out * log(x) (only asked for when the
 * exponent is trainable; the usual x^2 has a constant exponent). */
void amp_grad_pow(AmpGradCtx *c) {
    AmpBuilder *b = B(c);
    AmpValue *x = IN(c, 0), *y = IN(c, 1);
    if (amp_grad_wants(c, 0)) {
        AmpValue *ym1 = amp_build2(b, "Sub", "pow_ym1", y, amp_grad_scalar_like(c, y, 1.0));
        AmpValue *d = amp_build2(b, "Mul", "pow_dx", G(c), amp_build2(b, "Mul", "pow_yx", y, amp_build2(b, "Pow", "pow_x", x, ym1)));
        c->gx[0] = amp_grad_unbroadcast(c, d, x);
    }
    if (amp_grad_wants(c, 1)) {
        AmpValue *d = amp_build2(b, "Mul", "pow_dy", G(c), amp_build2(b, "Mul", "pow_ol", OUT(c), amp_build1(b, "Log", "pow_log", x)));
        c->gx[1] = amp_grad_unbroadcast(c, d, y);
    }
}

/* ---- unary ------------------------------------------------------------------------------- */

void amp_grad_neg(AmpGradCtx *c) { c->gx[0] = amp_build1(B(c), "Neg", "neg_d", G(c)); }

/* g where x > 0, else 0. */
void amp_grad_relu(AmpGradCtx *c) {
    AmpBuilder *b = B(c);
    AmpValue *zero = amp_grad_scalar_like(c, IN(c, 0), 0.0);
    AmpValue *in[3] = {amp_build2(b, "Greater", "relu_pos", IN(c, 0), zero), G(c), zero};
    c->gx[0] = amp_build_end(b, amp_build_start(b, "Where", "relu_d", in, 3, 1));
}

/* g * out * (1 - out) */
void amp_grad_sigmoid(AmpGradCtx *c) {
    AmpBuilder *b = B(c);
    AmpValue *y = OUT(c), *one_m = amp_build2(b, "Sub", "sigmoid_1my", amp_grad_scalar_like(c, y, 1.0), y);
    c->gx[0] = amp_build2(b, "Mul", "sigmoid_d", G(c), amp_build2(b, "Mul", "sigmoid_dy", y, one_m));
}

/* g * (1 - out^2) */
void amp_grad_tanh(AmpGradCtx *c) {
    AmpBuilder *b = B(c);
    AmpValue *y = OUT(c);
    AmpValue *d = amp_build2(b, "Sub", "tanh_dy", amp_grad_scalar_like(c, y, 1.0), amp_build2(b, "Mul", "tanh_y2", y, y));
    c->gx[0] = amp_build2(b, "Mul", "tanh_d", G(c), d);
}

void amp_grad_exp(AmpGradCtx *c) { c->gx[0] = amp_build2(B(c), "Mul", "exp_d", G(c), OUT(c)); }

void amp_grad_log(AmpGradCtx *c) { c->gx[0] = amp_build2(B(c), "Div", "log_d", G(c), IN(c, 0)); }

/* g * 0.5 / out */
void amp_grad_sqrt(AmpGradCtx *c) {
    AmpBuilder *b = B(c);
    AmpValue *half = amp_build2(b, "Mul", "sqrt_hg", G(c), amp_grad_scalar_like(c, G(c), 0.5));
    c->gx[0] = amp_build2(b, "Div", "sqrt_d", half, OUT(c));
}

/* exp(-x^2) * 2/sqrt(pi), the derivative of erf. */
static AmpValue *erf_slope(AmpGradCtx *c, AmpValue *x) {
    AmpBuilder *b = B(c);
    AmpValue *x2 = amp_build2(b, "Mul", "erf_x2", x, x);
    AmpValue *e = amp_build1(b, "Exp", "erf_e", amp_build1(b, "Neg", "erf_nx2", x2));
    return amp_build2(b, "Mul", "erf_slope", e, amp_grad_scalar_like(c, x, 2.0 / sqrt(PI)));
}

void amp_grad_erf(AmpGradCtx *c) { c->gx[0] = amp_build2(B(c), "Mul", "erf_d", G(c), erf_slope(c, IN(c, 0))); }

/* Gelu (approximate "none"): x * Phi(x); d = Phi(x) + x * phi(x),
 * Phi = 0.5 (1 + erf(x / sqrt 2)), phi = exp(-x^2 / 2) / sqrt(2 pi). */
void amp_grad_gelu(AmpGradCtx *c) {
    const char *approx = amp_node_attr_string(c->n, "approximate", "none");
    if (approx && approx[0] && approx[0] != 'n') {
        amp_grad_unsupported(c, "approximate='tanh' has no gradient rule yet");
        return;
    }
    AmpBuilder *b = B(c);
    AmpValue *x = IN(c, 0);
    AmpValue *xs = amp_build2(b, "Mul", "gelu_xs", x, amp_grad_scalar_like(c, x, SQRT1_2));
    AmpValue *cdf = amp_build2(b, "Add", "gelu_1erf", amp_build1(b, "Erf", "gelu_erf", xs), amp_grad_scalar_like(c, x, 1.0));
    cdf = amp_build2(b, "Mul", "gelu_cdf", cdf, amp_grad_scalar_like(c, x, 0.5));
    AmpValue *nx2 = amp_build2(b, "Mul", "gelu_nx2", amp_build2(b, "Mul", "gelu_x2", x, x), amp_grad_scalar_like(c, x, -0.5));
    AmpValue *pdf = amp_build2(b, "Mul", "gelu_pdf", amp_build1(b, "Exp", "gelu_e", nx2), amp_grad_scalar_like(c, x, 1.0 / sqrt(2.0 * PI)));
    AmpValue *d = amp_build2(b, "Add", "gelu_dy", cdf, amp_build2(b, "Mul", "gelu_xpdf", x, pdf));
    c->gx[0] = amp_build2(b, "Mul", "gelu_d", G(c), d);
}
