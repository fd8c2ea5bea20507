/* Gradient rules of the matrix products and the elementwise arithmetic. x, y: the inputs;
 * out: the node's output; g: its gradient. Inputs that were broadcast get their gradient
 * summed back to their shape (amp_grad_unbroadcast). */
#include <math.h>
#include <string.h>

#include "passes/grad_impl.h"

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
    if (ra == 1 && rb == 1) { /* a dot product: g is a scalar */
        if (amp_grad_wants(c, 0)) c->gx[0] = amp_build2(b, "Mul", "dot_da", g, bm);
        if (amp_grad_wants(c, 1)) c->gx[1] = amp_build2(b, "Mul", "dot_db", g, a);
        return;
    }
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

/* Gelu, approximate "tanh": 0.5 x (1 + t), t = tanh(u), u = sqrt(2/pi) (x + 0.044715 x^3);
 * d = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2). */
static AmpValue *gelu_tanh_slope(AmpGradCtx *c, AmpValue *x) {
    AmpBuilder *b = B(c);
    const double k = sqrt(2.0 / PI), a = 0.044715;
    AmpValue *x2 = amp_build2(b, "Mul", "gelut_x2", x, x);
    AmpValue *poly = amp_build2(b, "Add", "gelut_p", amp_build2(b, "Mul", "gelut_ax2", x2, amp_grad_scalar_like(c, x, a)),
                                amp_grad_scalar_like(c, x, 1.0));
    AmpValue *u = amp_build2(b, "Mul", "gelut_u", amp_build2(b, "Mul", "gelut_xp", x, poly), amp_grad_scalar_like(c, x, k));
    AmpValue *t = amp_build1(b, "Tanh", "gelut_t", u);
    AmpValue *half1t = amp_build2(b, "Mul", "gelut_h", amp_build2(b, "Add", "gelut_1t", t, amp_grad_scalar_like(c, x, 1.0)),
                                  amp_grad_scalar_like(c, x, 0.5));
    AmpValue *sech2 = amp_build2(b, "Sub", "gelut_s2", amp_grad_scalar_like(c, x, 1.0), amp_build2(b, "Mul", "gelut_t2", t, t));
    AmpValue *du = amp_build2(b, "Add", "gelut_du", amp_build2(b, "Mul", "gelut_3ax2", x2, amp_grad_scalar_like(c, x, 3 * a)),
                              amp_grad_scalar_like(c, x, 1.0));
    AmpValue *r = amp_build2(b, "Mul", "gelut_r", amp_build2(b, "Mul", "gelut_xs", x, sech2),
                             amp_build2(b, "Mul", "gelut_dus", du, amp_grad_scalar_like(c, x, 0.5 * k)));
    return amp_build2(b, "Add", "gelut_dy", half1t, r);
}

/* Gelu (approximate "none"): x * Phi(x); d = Phi(x) + x * phi(x),
 * Phi = 0.5 (1 + erf(x / sqrt 2)), phi = exp(-x^2 / 2) / sqrt(2 pi). */
void amp_grad_gelu(AmpGradCtx *c) {
    const char *approx = amp_node_attr_string(c->n, "approximate", "none");
    AmpBuilder *b = B(c);
    if (approx && strcmp(approx, "tanh") == 0) {
        c->gx[0] = amp_build2(b, "Mul", "gelu_d", G(c), gelu_tanh_slope(c, IN(c, 0)));
        return;
    }
    AmpValue *x = IN(c, 0);
    AmpValue *xs = amp_build2(b, "Mul", "gelu_xs", x, amp_grad_scalar_like(c, x, SQRT1_2));
    AmpValue *cdf = amp_build2(b, "Add", "gelu_1erf", amp_build1(b, "Erf", "gelu_erf", xs), amp_grad_scalar_like(c, x, 1.0));
    cdf = amp_build2(b, "Mul", "gelu_cdf", cdf, amp_grad_scalar_like(c, x, 0.5));
    AmpValue *nx2 = amp_build2(b, "Mul", "gelu_nx2", amp_build2(b, "Mul", "gelu_x2", x, x), amp_grad_scalar_like(c, x, -0.5));
    AmpValue *pdf = amp_build2(b, "Mul", "gelu_pdf", amp_build1(b, "Exp", "gelu_e", nx2), amp_grad_scalar_like(c, x, 1.0 / sqrt(2.0 * PI)));
    AmpValue *d = amp_build2(b, "Add", "gelu_dy", cdf, amp_build2(b, "Mul", "gelu_xpdf", x, pdf));
    c->gx[0] = amp_build2(b, "Mul", "gelu_d", G(c), d);
}

/* ---- piecewise ------------------------------------------------------------------------------ */

/* Where(cond, a, b) in one call. */
static AmpValue *where(AmpGradCtx *c, const char *what, AmpValue *cond, AmpValue *a, AmpValue *bv) {
    AmpValue *in[3] = {cond, a, bv};
    return amp_build_end(B(c), amp_build_start(B(c), "Where", what, in, 3, 1));
}

/* g * sign(x) (0 at 0, as PyTorch). */
void amp_grad_abs(AmpGradCtx *c) { c->gx[0] = amp_build2(B(c), "Mul", "abs_d", G(c), amp_build1(B(c), "Sign", "abs_s", IN(c, 0))); }

/* -g * out^2 */
void amp_grad_reciprocal(AmpGradCtx *c) {
    AmpBuilder *b = B(c);
    AmpValue *y2 = amp_build2(b, "Mul", "recip_y2", OUT(c), OUT(c));
    c->gx[0] = amp_build1(b, "Neg", "recip_d", amp_build2(b, "Mul", "recip_gy2", G(c), y2));
}

/* g where x > 0, else alpha * g. */
void amp_grad_leaky_relu(AmpGradCtx *c) {
    AmpBuilder *b = B(c);
    AmpValue *x = IN(c, 0), *g = G(c);
    double alpha = amp_node_attr_float(c->n, "alpha", 0.01f);
    AmpValue *pos = amp_build2(b, "Greater", "lrelu_pos", x, amp_grad_scalar_like(c, x, 0.0));
    c->gx[0] = where(c, "lrelu_d", pos, g, amp_build2(b, "Mul", "lrelu_ag", g, amp_grad_scalar_like(c, g, alpha)));
}

/* g where min <= x <= max (bounds included, as PyTorch's clamp), else 0; the bounds are
 * inputs 1 and 2 from opset 11, attributes before. */
void amp_grad_clip(AmpGradCtx *c) {
    AmpBuilder *b = B(c);
    AmpNode *n = c->n;
    AmpValue *x = IN(c, 0), *d = G(c), *zero = amp_grad_scalar_like(c, x, 0.0), *lo = NULL, *hi = NULL;
    if (b->opset >= 11) {
        lo = n->n_inputs > 1 ? n->inputs[1] : NULL;
        hi = n->n_inputs > 2 ? n->inputs[2] : NULL;
    } else {
        if (amp_node_attr(n, "min")) lo = amp_grad_scalar_like(c, x, amp_node_attr_float(n, "min", 0));
        if (amp_node_attr(n, "max")) hi = amp_grad_scalar_like(c, x, amp_node_attr_float(n, "max", 0));
    }
    if (lo) d = where(c, "clip_lo", amp_build2(b, "Less", "clip_below", x, lo), zero, d);
    if (hi) d = where(c, "clip_hi", amp_build2(b, "Greater", "clip_above", x, hi), zero, d);
    c->gx[0] = d;
}

/* y = max(0, min(1, alpha x + beta)): alpha g where 0 < alpha x + beta < 1, else 0. */
void amp_grad_hard_sigmoid(AmpGradCtx *c) {
    AmpBuilder *b = B(c);
    AmpValue *x = IN(c, 0);
    double alpha = amp_node_attr_float(c->n, "alpha", 0.2f), beta = amp_node_attr_float(c->n, "beta", 0.5f);
    AmpValue *v = amp_build2(b, "Add", "hsig_v", amp_build2(b, "Mul", "hsig_ax", x, amp_grad_scalar_like(c, x, alpha)),
                             amp_grad_scalar_like(c, x, beta));
    AmpValue *in = amp_build2(b, "And", "hsig_in", amp_build2(b, "Greater", "hsig_gt0", v, amp_grad_scalar_like(c, x, 0.0)),
                              amp_build2(b, "Less", "hsig_lt1", v, amp_grad_scalar_like(c, x, 1.0)));
    AmpValue *ag = amp_build2(b, "Mul", "hsig_ag", G(c), amp_grad_scalar_like(c, x, alpha));
    c->gx[0] = where(c, "hsig_d", in, ag, amp_grad_scalar_like(c, x, 0.0));
}

/* y = x * hardsigmoid(x; 1/6, 1/2): slope 0 below -3, 1 above 3, x/3 + 1/2 between (the
 * ends as PyTorch takes them). */
void amp_grad_hard_swish(AmpGradCtx *c) {
    AmpBuilder *b = B(c);
    AmpValue *x = IN(c, 0);
    AmpValue *mid = amp_build2(b, "Add", "hswish_mid", amp_build2(b, "Mul", "hswish_x3", x, amp_grad_scalar_like(c, x, 1.0 / 3)),
                               amp_grad_scalar_like(c, x, 0.5));
    AmpValue *up = where(c, "hswish_up", amp_build2(b, "Greater", "hswish_gt3", x, amp_grad_scalar_like(c, x, 3.0)),
                         amp_grad_scalar_like(c, x, 1.0), mid);
    AmpValue *s = where(c, "hswish_s", amp_build2(b, "Less", "hswish_ltm3", x, amp_grad_scalar_like(c, x, -3.0)),
                        amp_grad_scalar_like(c, x, 0.0), up);
    c->gx[0] = amp_build2(b, "Mul", "hswish_d", G(c), s);
}

/* Elementwise Max / Min over any number of inputs: g goes to the first input equal to the
 * output (a tie routes it there only, so nothing is counted twice), summed back where that
 * input was broadcast. */
void amp_grad_max_min(AmpGradCtx *c) {
    AmpBuilder *b = B(c);
    AmpNode *n = c->n;
    AmpValue *zero = amp_grad_scalar_like(c, G(c), 0.0), *taken = NULL;
    for (int i = 0; i < n->n_inputs; i++) {
        AmpValue *hit = amp_build2(b, "Equal", "maxmin_eq", IN(c, i), OUT(c));
        AmpValue *mine = taken ? amp_build2(b, "And", "maxmin_mine", hit, amp_build1(b, "Not", "maxmin_free", taken)) : hit;
        if (amp_grad_wants(c, i))
            c->gx[i] = amp_grad_unbroadcast(c, where(c, "maxmin_d", mine, G(c), zero), IN(c, i));
        if (i + 1 < n->n_inputs) taken = taken ? amp_build2(b, "Or", "maxmin_taken", taken, hit) : hit;
    }
}
