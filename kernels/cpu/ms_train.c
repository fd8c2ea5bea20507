/* CPU kernels: com.microsoft FusedGemm (Gemm, then an activation applied in fp32 before
 * the one rounding to 16 bits), ConvGrad (Conv's data, weight and bias gradients via
 * the conv family's im2col/col2im and cblas_sgemm) and AdamWOptimizer (unsupported:
 * its schema takes tensor sequences, which the executor does not represent). */
#include "kernels/cpu/blas.h"
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/attention_impl.h"
#include "kernels/cpu/conv_impl.h"
#include "kernels/cpu/gemm_impl.h"
#include "ir/half.h"
#include "ops/scalar_math.h"
#include "ir/front.h"

/* ---- FusedGemm -------------------------------------------------------------------- */

typedef enum ActKind {
    ACT_RELU,
    ACT_TANH,
    ACT_SIGMOID,
    ACT_LEAKY_RELU,
    ACT_HARD_SIGMOID,
    ACT_ELU,
    ACT_SELU,
    ACT_CELU,
    ACT_SOFTPLUS,
    ACT_SOFTSIGN,
    ACT_THRESHOLDED_RELU,
    ACT_SCALED_TANH,
    ACT_PARAMETRIC_SOFTPLUS
} ActKind;

/* The activation and its parameters (activation_alpha/beta/gamma), with the ONNX
 * op's defaults where the attribute is absent (onnxruntime requires them). */
typedef struct Act {
    ActKind kind;
    double alpha, beta, gamma;
} Act;

/* FusedGemm's attributes: Gemm's own (transA, transB, alpha, beta) and the activation. */
typedef struct FusedGemmAttrs {
    AmpGemmAttrs gemm; /* first: Gemm's geometry function reads these as an AmpGemmAttrs */
    Act act;
} FusedGemmAttrs;

static const struct {
    const char *name;
    ActKind kind;
    double alpha, beta, gamma;
} ACTS[] = {
    {"Relu", ACT_RELU, 0, 0, 0},
    {"Tanh", ACT_TANH, 0, 0, 0},
    {"Sigmoid", ACT_SIGMOID, 0, 0, 0},
    {"LeakyRelu", ACT_LEAKY_RELU, 0.01, 0, 0},
    {"HardSigmoid", ACT_HARD_SIGMOID, 0.2, 0.5, 0},
    {"Elu", ACT_ELU, 1.0, 0, 0},
    {"Selu", ACT_SELU, 1.67326319217681884765625, 0, 1.05070102214813232421875},
    {"Celu", ACT_CELU, 1.0, 0, 0},
    {"Softplus", ACT_SOFTPLUS, 0, 0, 0},
    {"Softsign", ACT_SOFTSIGN, 0, 0, 0},
    {"ThresholdedRelu", ACT_THRESHOLDED_RELU, 1.0, 0, 0},
    {"ScaledTanh", ACT_SCALED_TANH, 1.0, 1.0, 0},
    {"ParametricSoftplus", ACT_PARAMETRIC_SOFTPLUS, 1.0, 1.0, 0},
};

/* FusedGemm's prepare: Gemm's attributes as Gemm reads them (FusedGemm is Gemm as of
 * opset 13: C optional, unidirectional broadcast), then the activation and its
 * parameters. */
AmpCode amp_cpu_ms_fused_gemm_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    (void)opset;
    const char *name = amp_node_attr_string(n, "activation", "");
    for (size_t i = 0; i < sizeof ACTS / sizeof *ACTS; i++)
        if (strcmp(name, ACTS[i].name) == 0) {
            Act a = {.kind = ACTS[i].kind};
            a.alpha = amp_node_attr_float(n, "activation_alpha", (float)ACTS[i].alpha);
            a.beta = amp_node_attr_float(n, "activation_beta", (float)ACTS[i].beta);
            a.gamma = amp_node_attr_float(n, "activation_gamma", (float)ACTS[i].gamma);
            /* Selu's constants lose digits as float attributes; keep them exact. */
            if (a.kind == ACT_SELU && !amp_node_attr(n, "activation_alpha")) a.alpha = ACTS[i].alpha;
            if (a.kind == ACT_SELU && !amp_node_attr(n, "activation_gamma")) a.gamma = ACTS[i].gamma;
            if (a.kind == ACT_CELU && a.alpha == 0.0)
                return amp_node_fail(n, st, AMP_ERR_INPUT, "Celu's activation_alpha must be nonzero");
            FusedGemmAttrs *p = malloc(sizeof *p);
            if (!p) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
            p->gemm = amp_gemm_attrs(n);
            p->act = a;
            *attrs = p;
            return AMP_OK;
        }
    return amp_node_fail(n, st, AMP_ERR_UNSUPPORTED, "activation '%.60s' is not one the CPU kernel implements", name);
}

static double act_apply(const Act *a, double x) {
    switch (a->kind) {
    case ACT_RELU: return x > 0 ? x : 0.0;
    case ACT_TANH: return tanh(x);
    case ACT_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case ACT_LEAKY_RELU: return x >= 0 ? x : a->alpha * x;
    case ACT_HARD_SIGMOID: return fmax(0.0, fmin(1.0, a->alpha * x + a->beta));
    case ACT_ELU: return x >= 0 ? x : a->alpha * expm1(x);
    case ACT_SELU: return a->gamma * (x > 0 ? x : a->alpha * expm1(x));
    case ACT_CELU: return fmax(0.0, x) + fmin(0.0, a->alpha * expm1(x / a->alpha));
    case ACT_SOFTPLUS: return amp_softplus_d(x);
    case ACT_SOFTSIGN: return x / (1.0 + fabs(x));
    case ACT_THRESHOLDED_RELU: return x > a->alpha ? x : 0.0;
    case ACT_SCALED_TANH: return a->alpha * tanh(a->beta * x);
    case ACT_PARAMETRIC_SOFTPLUS: return a->alpha * amp_softplus_d(a->beta * x);
    }
    return x;
}

/* Y (M, N) = activation(alpha * op(A) @ op(B) + beta * C). Gemm writes a float32
 * stand-in for a 16-bit output, so that the activation sees the unrounded product and
 * the result is rounded once. */
AmpCode amp_cpu_ms_fused_gemm(AmpKernelCtx *k) {
    const FusedGemmAttrs *fa = k->attrs;
    if (!fa) return amp_kernel_fail(k, AMP_ERR_INTERNAL, "attributes were not prepared");
    const Act *a = &fa->act;
    AmpGemmGeom own;
    const AmpGemmGeom *g; /* amp_gemm_geom (ops/gemm_attrs.h): Gemm's, from fa->gemm */
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&g);
    if (rc) return rc;
    const AmpBuf *A = k->in[0];
    if (!amp_is_f32_family(A->dtype) && A->dtype != AMP_DT_DOUBLE) return amp_kernel_bad_dtype(k, A->dtype);
    AmpBuf *real;
    if ((rc = amp_kernel_outputs(k, 1, &real)) || !real) return rc;
    AmpBuf out = *real; /* or its float32 stand-in */
    bool half = real->dtype == AMP_DT_FLOAT16 || real->dtype == AMP_DT_BFLOAT16;
    if (half) {
        out.dtype = AMP_DT_FLOAT;
        if (!(out.data = malloc((real->nelem ? real->nelem : 1) * sizeof(float)))) return amp_attn_oom(k);
    }
    if ((rc = amp_gemm_into(k, &fa->gemm, g, &out))) {
        if (half) free(out.data);
        return rc;
    }
    AmpBuf *y = &out;
    if (y->dtype == AMP_DT_DOUBLE) {
        double *p = y->data;
        for (uint64_t i = 0; i < y->nelem; i++) p[i] = act_apply(a, p[i]);
    } else {
        float *p = y->data;
        for (uint64_t i = 0; i < y->nelem; i++) p[i] = (float)act_apply(a, p[i]);
    }
    if (half) {
        if (real->dtype == AMP_DT_FLOAT16) amp_f32_to_f16_n(real->data, out.data, out.nelem);
        else amp_f32_to_bf16_n(real->data, out.data, out.nelem);
        free(out.data);
    }
    return AMP_OK;
}

/* ---- ConvGrad --------------------------------------------------------------------- */

/* dY (N, M, out...), X (N, C, in...), W (M, C/group, kern...) -> dX (like X), dW (like
 * W), dB (M), for Y = Conv(X, W, B) with the node's strides, dilations, pads, auto_pad
 * and group. Without W (the CPU plan's fused weight gradient, runtime/fuse_wgrad.c), dX
 * cannot be asked for, and dW is (M, C/group, kernel_shape...) of X's type (float32 where
 * the node says AMP_CONV_GRAD_DW_F32). Per image and group, with col = im2col(X_g)
 * (Cg * K, O):
 *   dW_g (Mg, Cg * K) += dY_g (Mg, O) @ col^T,   dX_g = col2im(W_g^T (Cg * K, Mg) @ dY_g). */
/* ConvGrad's group is checked at prepare (amp_conv_grad_prepare, ops/conv_geom.c); the
 * window attributes (kernel_shape, strides, dilations, pads, auto_pad) are read against X's
 * rank there too (amp_conv_grad_check). */
AmpCode amp_cpu_ms_conv_grad(AmpKernelCtx *k) {
    const AmpConvGradAttrs *a = k->attrs;
    const AmpBuf *dy = k->n_in > 0 ? k->in[0] : NULL, *x = k->n_in > 1 ? k->in[1] : NULL;
    const AmpBuf *w = k->n_in > 2 ? k->in[2] : NULL;
    if (!dy || !x) return amp_kernel_fail(k, AMP_ERR_INPUT, "needs inputs dY, X and W");
    int dt = x->dtype;
    if (!amp_is_f32_family(dt)) return amp_kernel_bad_dtype(k, dt);
    int64_t kern[AMP_MAX_SPATIAL];
    AmpConvGeom g;
    AmpCode rc = amp_conv_grad_check(k, dy, x, w, kern, &g);
    if (rc) return rc;
    int nsp = x->rank - 2;
    int64_t group = a->group, N = x->dims[0], C = x->dims[1], M = dy->dims[1];
    int64_t Cg = C / group, Mg = M / group, K, O, NI;
    if (!amp_conv_size(nsp, kern, &K) || !amp_conv_size(nsp, g.out, &O) || !amp_conv_size(nsp, g.in, &NI) ||
        K > INT_MAX || Cg > INT_MAX || Mg > INT_MAX || O > INT_MAX || NI > INT_MAX || Cg * K > INT_MAX ||
        (uint64_t)(Cg * K) * (uint64_t)O > (UINT64_C(1) << 58))
        return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "convolution too large for the CPU kernel");
    int64_t rows = Cg * K;
    AmpBuf *out[3];
    if ((rc = amp_kernel_outputs(k, 3, out))) return rc;
    if (out[0] && !w) return amp_kernel_fail(k, AMP_ERR_INPUT, "dX needs input W");
    /* Without W (a weight gradient alone: runtime/fuse_wgrad.c), dW is shaped by the kernel,
     * and float32 where the fused node took in the Cast after it. */
    AmpBuf wlike = {.dtype = !out[2] && amp_node_attr_int(k->node, AMP_CONV_GRAD_DW_F32, 0) ? AMP_DT_FLOAT : dt,
                    .rank = x->rank, .dims = {M, Cg}};
    for (int i = 0; i < nsp; i++) wlike.dims[2 + i] = kern[i];
    if ((rc = amp_conv_grad_outs(k, x, w ? w : &wlike, out))) return rc;
    int dw_dt = w ? dt : wlike.dtype;
    /* oneDNN's backward data (dX) and backward weights (dW, with dB) primitives where it
     * takes the problem; otherwise im2col for all of them. */
    AmpDnnlConv dp;
    if (amp_conv_dnnl_desc(AMP_DNNL_CONV_BWD_DATA, dt, N, C, M, group, &g, false, &dp) && (out[1] || !out[2])) {
        bool done = !out[0] || amp_dnnl_conv(&dp, &(AmpDnnlConvIO){.diff_dst = dy->data, .wei = w->data,
                                                                   .diff_src = out[0]->data});
        dp.kind = AMP_DNNL_CONV_BWD_WEIGHTS, dp.bias = out[2] != NULL, dp.dt_out = dw_dt;
        done = done && (!out[1] || (amp_conv_dnnl_wgrad_pads(&dp) &&
                                    amp_dnnl_conv(&dp, &(AmpDnnlConvIO){.src = x->data, .diff_dst = dy->data,
                                                                        .diff_wei = out[1]->data,
                                                                        .diff_bias = out[2] ? out[2]->data : NULL})));
        if (done) return AMP_OK;
    }
    /* The 1x1, stride 1, unpadded case reads X itself as the column matrix. */
    bool direct = true;
    for (int i = 0; i < nsp; i++)
        direct = direct && kern[i] == 1 && g.stride[i] == 1 && g.pad0[i] == 0 && g.pad1[i] == 0;
    /* The scatter geometry for dX: sources are the output positions, targets X's. */
    AmpConvGeom gt = g;
    for (int i = 0; i < nsp; i++) gt.in[i] = g.out[i], gt.out[i] = g.in[i];
    float *tdy, *tx, *tw = NULL, *t[3] = {NULL}, *col = NULL;
    const float *DY = amp_buf_f32_in(dy, &tdy), *X = amp_buf_f32_in(x, &tx), *W = w ? amp_buf_f32_in(w, &tw) : NULL;
    float *o[3] = {NULL};
    bool ok = DY && X && (W || !w);
    for (int i = 0; i < 3; i++)
        if (out[i]) ok = (o[i] = amp_buf_f32_out(out[i], &t[i])) != NULL && ok;
    if (ok && !direct && rows && O) ok = (col = malloc((size_t)(rows * O) * sizeof *col)) != NULL; // (Cg * K, O)
    if (!ok) {
        free(tdy), free(tx), free(tw), free(t[0]), free(t[1]), free(t[2]);
        return amp_attn_oom(k);
    }
    float *dX = o[0], *dW = o[1], *dB = o[2];
    if (dX) memset(dX, 0, out[0]->nelem * sizeof *dX);
    if (dW) memset(dW, 0, out[1]->nelem * sizeof *dW);
    if (rows && O && Mg)
        for (int64_t n = 0; n < N; n++)
            for (int64_t gi = 0; gi < group; gi++) {
                const float *xg = X + (n * C + gi * Cg) * NI, *dyg = DY + (n * M + gi * Mg) * O;
                if (dW) {
                    if (!direct) amp_conv_im2col(xg, Cg, &g, col);
                    amp_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)Mg, (int)rows, (int)O, 1.0f, dyg, (int)O,
                                direct ? xg : col, (int)O, 1.0f, dW + gi * Mg * rows, (int)rows);
                }
                if (dX) {
                    float *dxg = dX + (n * C + gi * Cg) * NI;
                    amp_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)rows, (int)O, (int)Mg, 1.0f,
                              W + gi * Mg * rows, (int)rows, dyg, (int)O, 0.0f, direct ? dxg : col, (int)O);
                    if (!direct) amp_conv_col2im(col, Cg, &gt, dxg);
                }
            }
    if (dB)
        for (int64_t m = 0; m < M; m++) {
            double acc = 0.0;
            for (int64_t n = 0; n < N; n++) {
                const float *r = DY + (n * M + m) * O;
                for (int64_t p = 0; p < O; p++) acc += r[p];
            }
            dB[m] = (float)acc;
        }
    for (int i = 0; i < 3; i++)
        if (out[i]) amp_buf_f32_commit(out[i], t[i]);
    free(tdy), free(tx), free(tw), free(col);
    return AMP_OK;
}

/* ---- AdamWOptimizer ------------------------------------------------------------- */

/* onnxruntime's AdamWOptimizer and SGDOptimizerV2 take weights, gradients (and moments)
 * as tensor sequences (seq(tensor)); their schemas have no single-tensor form, and the
 * executor holds tensors only. Registered so that a model reaching them fails with this
 * reason rather than a bare "no kernel": `--optimizer` imports them as standard ops. */
AmpCode amp_cpu_ms_adamw(AmpKernelCtx *k) {
    return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED,
                         "%s takes its weights, gradients and moments as tensor sequences, which the executor does "
                         "not support; give the optimizer model to %s with the training model, which imports it "
                         "as standard ops", k->node && k->node->op_type ? k->node->op_type : "the optimizer",
                         /* the options table's spellings (passes/options.c), which this layer cannot call */
                         amp_front() == AMP_FRONT_CLI ? "--optimizer" : "ort_optimizer");
}
