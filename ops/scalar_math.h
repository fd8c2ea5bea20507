/* The scalar math of the elementwise functions, each defined once: the unary ops' lines
 * of ops/unary.def (from which each backend makes its unary kernel), the other CPU
 * kernels (kernels/cpu/activation.c, rnn.c, ms_train.c), the fused programs' interpreter
 * (ops/fused_eval.h, run by the CPU and the CUDA kernel) and the CUDA kernels
 * (kernels/cuda/elementwise.cu, grad_ops.cu) all call these. Each formula is the CPU
 * reference's, operation for operation (order, float or double, libm calls), so the CPU's
 * results are what they were before the math moved here; a function's float form computes
 * in float (the 16-bit storage types are computed in float32), its double form in double.
 *
 * Plain C11 and math.h (on the host also ops/vmath.h's erf), so that nvcc compiles the
 * same text for the device: AMP_HD marks the float forms __host__ __device__ there. nvcc
 * contracts a product and a sum into one fused multiply-add (one rounding) unless told
 * otherwise, the C compilers here never do (ISO C mode); AMP_ADD_RN / AMP_SUB_RN keep each
 * such sum rounded once, as on the CPU, where a product is one of its operands. The
 * device's expf, tanhf, erff ... may differ from glibc's in the last place: only the
 * arithmetic around them is the same. The double forms are host code (no kernel computes
 * in double on the device). */
#ifndef AMP_OPS_SCALAR_MATH_H
#define AMP_OPS_SCALAR_MATH_H

#include <math.h>

#ifdef __CUDACC__
#define AMP_HD __host__ __device__
#else
#define AMP_HD
#include "ops/vmath.h" /* amp_vmath_erf1: the host's erf */
#endif

#ifdef __CUDA_ARCH__
#define AMP_ADD_RN(a, b) __fadd_rn((a), (b))
#define AMP_SUB_RN(a, b) __fsub_rn((a), (b))
#else
#define AMP_ADD_RN(a, b) ((a) + (b))
#define AMP_SUB_RN(a, b) ((a) - (b))
#endif

#define AMP_INV_SQRT2 0.70710678118654752440      /* 1 / sqrt(2) */
#define AMP_SQRT_2_OVER_PI 0.79788456080286535588 /* sqrt(2 / pi) */
#define AMP_INV_SQRT_2PI 0.39894228040143267794   /* 1 / sqrt(2 pi) */
#define AMP_GELU_C 0.044715                       /* the cubic term of Gelu's tanh form */

/* Gelu's approximate attribute: "none" (erf) or "tanh" (AmpEwParams.mode). */
enum { AMP_GELU_EXACT = 0, AMP_GELU_TANH = 1 };

/* The attributes of the elementwise functions, as their prepare functions parse them
 * (ops/ew_common.h): alpha, beta, gamma as the ONNX attributes name them (Shrink: lambd,
 * bias), mode Gelu's approximation or IsInf's directions. Here, beside the math, because
 * the unary ops' expressions (ops/unary.def) read them on the host and the device alike. */
typedef struct AmpEwParams {
    float alpha, beta, gamma;
    int mode;
} AmpEwParams;

/* ---- functions whose host and device forms differ in name only ------------------------ */

/* erf: the device's erff; on the host the CPU's one erf (ops/vmath.h: libmvec's vector erff
 * where present, else erff), which the CPU's Erf kernel, its 16-bit tables and the fused
 * programs' interpreter all compute, so that a fused chain gives the bits of the nodes it
 * replaces. ONNX Round: halves to even, the default rounding mode (rintf on the device,
 * where no floating-point flags are raised anyway). */
#ifdef __CUDACC__
static inline AMP_HD float amp_erf_f(float x) {
    return erff(x);
}
static inline AMP_HD float amp_round_f(float x) {
    return rintf(x);
}
#else
static inline float amp_erf_f(float x) {
    return amp_vmath_erf1(x);
}
static inline float amp_round_f(float x) {
    return nearbyintf(x);
}
#endif
static inline double amp_round_d(double x) {
    return nearbyint(x);
}

/* ---- clamps, signs, rectifiers ------------------------------------------------------ */

static inline AMP_HD float amp_clamp01_f(float v) {
    return v < 0 ? 0.0f : v > 1 ? 1.0f : v;
}
static inline double amp_clamp01_d(double v) {
    return v < 0 ? 0.0 : v > 1 ? 1.0 : v;
}

/* NaN stays NaN, zeros give 0 */
static inline AMP_HD float amp_sign_f(float x) {
    return x > 0 ? 1.0f : x < 0 ? -1.0f : x == 0 ? 0.0f : x;
}
static inline double amp_sign_d(double x) {
    return x > 0 ? 1.0 : x < 0 ? -1.0 : x == 0 ? 0.0 : x;
}

/* x < 0 (not x <= 0) keeps NaN as NaN and -0 as -0 */
static inline AMP_HD float amp_relu_f(float x) {
    return x < 0 ? 0.0f : x;
}
static inline double amp_relu_d(double x) {
    return x < 0 ? 0.0 : x;
}

static inline AMP_HD float amp_leaky_relu_f(float x, float alpha) {
    return x < 0 ? alpha * x : x;
}
static inline double amp_leaky_relu_d(double x, double alpha) {
    return x < 0 ? alpha * x : x;
}

/* ThresholdedRelu: x where x > alpha, else 0 */
static inline AMP_HD float amp_thresholded_relu_f(float x, float alpha) {
    return x > alpha ? x : 0.0f;
}
static inline double amp_thresholded_relu_d(double x, double alpha) {
    return x > alpha ? x : 0.0;
}

/* Shrink: x - bias above lambd, x + bias below -lambd, else 0 */
static inline AMP_HD float amp_shrink_f(float x, float lambd, float bias) {
    return x > lambd ? x - bias : x < -lambd ? x + bias : 0.0f;
}
static inline double amp_shrink_d(double x, double lambd, double bias) {
    return x > lambd ? x - bias : x < -lambd ? x + bias : 0.0;
}

/* ---- exponential activations ----------------------------------------------------------- */

static inline AMP_HD float amp_elu_f(float x, float alpha) {
    return x < 0 ? alpha * expm1f(x) : x;
}
static inline double amp_elu_d(double x, double alpha) {
    return x < 0 ? alpha * expm1(x) : x;
}

/* Celu: max(0, x) + min(0, alpha * (exp(x / alpha) - 1)) */
static inline AMP_HD float amp_celu_f(float x, float alpha) {
    return x < 0 ? alpha * expm1f(x / alpha) : x;
}
static inline double amp_celu_d(double x, double alpha) {
    return x < 0 ? alpha * expm1(x / alpha) : x;
}

static inline AMP_HD float amp_selu_f(float x, float alpha, float gamma) {
    return x <= 0 ? gamma * alpha * expm1f(x) : gamma * x;
}
static inline double amp_selu_d(double x, double alpha, double gamma) {
    return x <= 0 ? gamma * alpha * expm1(x) : gamma * x;
}

/* exp of -|x| only, so neither branch overflows. */
static inline AMP_HD float amp_sigmoid_f(float x) {
    if (x >= 0) return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}
static inline double amp_sigmoid_d(double x) {
    if (x >= 0) return 1.0 / (1.0 + exp(-x));
    double e = exp(x);
    return e / (1.0 + e);
}

/* log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)), which never overflows. */
static inline AMP_HD float amp_softplus_f(float x) {
    return (x > 0 ? x : 0.0f) + log1pf(expf(-fabsf(x)));
}
static inline double amp_softplus_d(double x) {
    return (x > 0 ? x : 0.0) + log1p(exp(-fabs(x)));
}

static inline AMP_HD float amp_softsign_f(float x) {
    return x / (1.0f + fabsf(x));
}
static inline double amp_softsign_d(double x) {
    return x / (1.0 + fabs(x));
}

/* HardSigmoid: clamp(alpha x + beta, 0, 1) */
static inline AMP_HD float amp_hard_sigmoid_f(float x, float alpha, float beta) {
    return amp_clamp01_f(AMP_ADD_RN(alpha * x, beta));
}
static inline double amp_hard_sigmoid_d(double x, double alpha, double beta) {
    return amp_clamp01_d(alpha * x + beta);
}

/* HardSwish: x * HardSigmoid(x) with alpha 1/6, beta 1/2 */
static inline AMP_HD float amp_hard_swish_f(float x) {
    return x * amp_clamp01_f(AMP_ADD_RN(x * (1.0f / 6.0f), 0.5f));
}
static inline double amp_hard_swish_d(double x) {
    return x * amp_clamp01_d(x / 6.0 + 0.5);
}

/* ---- Gelu: x * Phi(x) exactly (erf), or the tanh approximation ------------------------- */

static inline AMP_HD float amp_gelu_erf_f(float x) {
    return 0.5f * x * (1.0f + erff(x * (float)AMP_INV_SQRT2));
}
static inline AMP_HD float amp_gelu_tanh_f(float x) {
    return 0.5f * x * (1.0f + tanhf((float)AMP_SQRT_2_OVER_PI * AMP_ADD_RN(x, (float)AMP_GELU_C * x * x * x)));
}
static inline AMP_HD float amp_gelu_f(float x, int mode) {
    return mode == AMP_GELU_TANH ? amp_gelu_tanh_f(x) : amp_gelu_erf_f(x);
}
static inline double amp_gelu_d(double x, int mode) {
    if (mode == AMP_GELU_TANH) return 0.5 * x * (1.0 + tanh(AMP_SQRT_2_OVER_PI * (x + AMP_GELU_C * x * x * x)));
    return 0.5 * x * (1.0 + erf(x * AMP_INV_SQRT2));
}

/* d Gelu / dx: Phi(x) + x phi(x), or the derivative of the tanh form. */
static inline AMP_HD float amp_gelu_grad_erf_f(float x) {
    return AMP_ADD_RN(0.5f * (1.0f + erff(x * (float)AMP_INV_SQRT2)),
                      x * (float)AMP_INV_SQRT_2PI * expf(-0.5f * x * x));
}
static inline AMP_HD float amp_gelu_grad_tanh_f(float x) {
    float t = tanhf((float)AMP_SQRT_2_OVER_PI * AMP_ADD_RN(x, (float)AMP_GELU_C * x * x * x));
    float du = (float)AMP_SQRT_2_OVER_PI * AMP_ADD_RN(1.0f, 3.0f * (float)AMP_GELU_C * x * x);
    return AMP_ADD_RN(0.5f * (1.0f + t), 0.5f * x * AMP_SUB_RN(1.0f, t * t) * du);
}
static inline AMP_HD float amp_gelu_grad_f(float x, int mode) {
    return mode == AMP_GELU_TANH ? amp_gelu_grad_tanh_f(x) : amp_gelu_grad_erf_f(x);
}
static inline double amp_gelu_grad_d(double x, int mode) {
    if (mode == AMP_GELU_TANH) {
        double t = tanh(AMP_SQRT_2_OVER_PI * (x + AMP_GELU_C * x * x * x));
        double du = AMP_SQRT_2_OVER_PI * (1.0 + 3.0 * AMP_GELU_C * x * x);
        return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du;
    }
    return 0.5 * (1.0 + erf(x * AMP_INV_SQRT2)) + x * AMP_INV_SQRT_2PI * exp(-0.5 * x * x);
}

/* ---- com.microsoft gradients: dY and the forward's Y (or X) -> dX ---------------------- */

/* SigmoidGrad(dY, Y) = dY * Y * (1 - Y) */
static inline AMP_HD float amp_sigmoid_grad_f(float dy, float y) {
    return dy * y * (1.0f - y);
}
static inline double amp_sigmoid_grad_d(double dy, double y) {
    return dy * y * (1.0 - y);
}

/* TanhGrad(dY, Y) = dY * (1 - Y^2) */
static inline AMP_HD float amp_tanh_grad_f(float dy, float y) {
    return dy * AMP_SUB_RN(1.0f, y * y);
}
static inline double amp_tanh_grad_d(double dy, double y) {
    return dy * (1.0 - y * y);
}

/* ReluGrad(dY, X) = dY where X > 0, else 0 */
static inline AMP_HD float amp_relu_grad_f(float dy, float x) {
    return x > 0 ? dy : 0.0f;
}
static inline double amp_relu_grad_d(double dy, double x) {
    return x > 0 ? dy : 0.0;
}

#endif
