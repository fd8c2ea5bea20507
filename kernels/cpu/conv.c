/* CPU kernels: Conv (im2col + one cblas_sgemm per image and group) and ConvTranspose
 * (cblas_sgemm + col2im), N-D with groups, strides, dilations, pads and auto_pad; also
 * the window geometry pool.c shares. 16-bit tensors compute in fp32; no double. */
#include "kernels/cpu/blas.h"
#include "kernels/cpu/dnnl.h"
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/conv_impl.h"
#include "ops/scalar_math.h" /* amp_relu_f: the Relu of ConvEpilogue's fallback */
#include "ops/geom.h"


/* Product of dims already known to fit (checked by the caller with amp_conv_size). */
static int64_t prod(int n, const int64_t *d) {
    int64_t p = 1;
    for (int i = 0; i < n; i++) p *= d[i];
    return p;
}

/* ---- oneDNN ------------------------------------------------------------------------- */

bool amp_conv_dnnl_desc(int kind, int dt, int64_t n, int64_t ic, int64_t oc, int64_t group, const AmpConvGeom *g,
                        bool bias, AmpDnnlConv *p) {
    if ((dt != AMP_DT_FLOAT && dt != AMP_DT_BFLOAT16) || g->nsp < 1 || g->nsp > AMP_DNNL_MAX_SPATIAL || n < 1 ||
        ic < 1 || oc < 1 || group < 1)
        return false;
    memset(p, 0, sizeof *p);
    p->kind = kind, p->dt = p->dt_out = dt, p->nsp = g->nsp;
    p->n = n, p->ic = ic, p->oc = oc, p->group = group, p->bias = bias;
    /* Where oneDNN loses (measured one thread, docs/speed.md): a window larger than the
     * positions it visits (the weight gradient `ampc grad` writes as a Conv of the
     * batch-transposed input: ic = batch, a kernel the size of the activation) runs many
     * times slower than im2col there. The choice depends on the geometry alone, never on
     * whether the weights are a constant of the session: a model's weights and the same
     * weights from a checkpoint give the same bits. (At few positions, where a per-call
     * weight reorder made oneDNN no faster than im2col, it is no slower either.) A
     * ConvTranspose stays on oneDNN up to an 8x8 window wherever it is: `ampc grad`'s data
     * gradients of the small last stages of a CNN (3x3 over 2x2 positions) would widen
     * their bf16 weights to float32 and pack them again for sgemm on the im2col path. */
    int64_t K = 1, pos = 1;
    for (int i = 0; i < g->nsp; i++) K *= g->kern[i], pos *= kind == AMP_DNNL_DECONV_FWD ? g->in[i] : g->out[i];
    if ((kind == AMP_DNNL_CONV_FWD || (kind == AMP_DNNL_DECONV_FWD && K > 64)) && K > pos) return false;
    /* The same weight gradients where the window is small: ic = a training batch under 4
     * over many "images" (channels): 10-50x slower on oneDNN than im2col. */
    if (kind == AMP_DNNL_CONV_FWD && group == 1 && ic < 4 && n >= 16) return false;
    for (int i = 0; i < g->nsp; i++) {
        if (g->in[i] < 1 || g->out[i] < 1) return false;
        p->in[i] = g->in[i], p->kern[i] = g->kern[i], p->out[i] = g->out[i];
        p->stride[i] = g->stride[i], p->dil[i] = g->dil[i], p->pad0[i] = g->pad0[i], p->pad1[i] = g->pad1[i];
        if (kind == AMP_DNNL_DECONV_FWD) /* the end pad without output_padding, as oneDNN counts it */
            p->pad1[i] = (g->in[i] - 1) * g->stride[i] + (g->kern[i] - 1) * g->dil[i] + 1 - g->out[i] - g->pad0[i];
    }
    return true;
}

/* ---- Conv ------------------------------------------------------------------------ */

bool amp_conv_dnnl_wgrad_pads(AmpDnnlConv *p) {
    for (int i = 0; i < p->nsp; i++) {
        p->pad1[i] = (p->out[i] - 1) * p->stride[i] + (p->kern[i] - 1) * p->dil[i] + 1 - p->in[i] - p->pad0[i];
        int64_t extent = (p->kern[i] - 1) * p->dil[i] + 1;
        if (p->dil[i] != 1 || p->pad1[i] < 0 || p->pad0[i] >= extent || p->pad1[i] >= extent) return false;
    }
    return true;
}

/* Y (C, M, P...) = Conv(X (C, N, H...), W (M, N, Q...)) with a window Q larger than the
 * positions P it visits: the weight gradient of a convolution of stride s = this one's
 * dilation and dilation d = this one's stride, as `ampc grad` writes it (X the forward
 * input with batch and channels swapped, W the output gradient likewise, Y the weight
 * gradient likewise). oneDNN's backward-weights primitive computes exactly that, reading
 * the swapped layouts as they are; false where it does not take it. (On the CPU backend
 * the plan fuses this pattern with its Transposes into ConvGrad, which reads the plain
 * layouts: runtime/fuse_wgrad.c; this path serves the rest, --no-fuse included.) */
static bool conv_as_weight_grad(const AmpBuf *x, const AmpBuf *w, AmpBuf *y, const AmpConvGeom *g) {
    AmpDnnlConv p;
    memset(&p, 0, sizeof p);
    if (g->nsp > AMP_DNNL_MAX_SPATIAL) return false;
    p.kind = AMP_DNNL_CONV_BWD_WEIGHTS, p.dt = x->dtype, p.dt_out = y->dtype, p.nsp = g->nsp, p.swapped = true;
    p.n = x->dims[1], p.ic = x->dims[0], p.oc = w->dims[0], p.group = 1;
    for (int i = 0; i < g->nsp; i++) {
        p.in[i] = g->in[i], p.kern[i] = g->out[i], p.out[i] = g->kern[i];
        p.stride[i] = g->dil[i], p.dil[i] = g->stride[i], p.pad0[i] = g->pad0[i];
    }
    return amp_conv_dnnl_wgrad_pads(&p) &&
           amp_dnnl_conv(&p, &(AmpDnnlConvIO){.src = x->data, .diff_dst = w->data, .diff_wei = y->data});
}

/* col (cg * K, O) from x (cg, in...): row (c, j) holds, for every output position o,
 * x[c, o * stride - pad0 + j * dil], or 0 where that falls in the padding. The last
 * spatial axis is the inner loop; the others are walked by an odometer. */
void amp_conv_im2col(const float *x, int64_t cg, const AmpConvGeom *g, float *col) {
    int n = g->nsp;
    int64_t K = prod(n, g->kern), O = prod(n, g->out), NI = prod(n, g->in);
    int64_t ol = g->out[n - 1], il = g->in[n - 1];
    if (!O) return;
    int64_t outer = O / ol;
    int64_t j[AMP_MAX_SPATIAL] = {0};
    for (int64_t kk = 0; kk < cg * K; kk++) {
        const float *xc = x + (kk / K) * NI;
        float *row = col + kk * O;
        int64_t o[AMP_MAX_SPATIAL] = {0};
        for (int64_t q = 0; q < outer; q++) {
            bool ok = true;
            int64_t off = 0;
            for (int d = 0; d < n - 1; d++) {
                int64_t ip = o[d] * g->stride[d] - g->pad0[d] + j[d] * g->dil[d];
                ok = ok && ip >= 0 && ip < g->in[d];
                off = off * g->in[d] + ip;
            }
            float *r = row + q * ol;
            if (!ok) {
                memset(r, 0, (size_t)ol * sizeof *r);
            } else {
                const float *xr = xc + off * il;
                int64_t s = g->stride[n - 1], start = j[n - 1] * g->dil[n - 1] - g->pad0[n - 1];
                for (int64_t p = 0; p < ol; p++) {
                    int64_t ip = p * s + start;
                    r[p] = ip >= 0 && ip < il ? xr[ip] : 0.0f;
                }
            }
            for (int d = n - 2; d >= 0; d--) {
                if (++o[d] < g->out[d]) break;
                o[d] = 0;
            }
        }
        for (int d = n - 1; d >= 0; d--) {
            if (++j[d] < g->kern[d]) break;
            j[d] = 0;
        }
    }
}

/* ai.ampc ConvEpilogue's epilogue where oneDNN did not apply it as post-ops: y += z,
 * then max(y, 0) where relu, in float32, y rounded once into its type (as the unfused
 * Add and Relu round it: a 16-bit Relu is exact). */
static AmpCode conv_epilogue_pass(AmpKernelCtx *k, AmpBuf *y, const AmpBuf *z, bool relu) {
    if (!z && !relu) return AMP_OK;
    float *tz = NULL, *ty = NULL;
    const float *Z = z ? amp_buf_f32_in(z, &tz) : NULL;
    float *Y = (float *)amp_buf_f32_in(y, &ty); /* y's own floats, or a copy committed below */
    if (!Y || (z && !Z)) {
        free(tz), free(ty);
        return amp_kernel_fail(k, AMP_ERR_INTERNAL, "out of memory");
    }
    for (size_t i = 0; Z && i < y->nelem; i++) Y[i] += Z[i];
    for (size_t i = 0; relu && i < y->nelem; i++) Y[i] = amp_relu_f(Y[i]);
    if (ty) amp_buf_f32_commit(y, ty);
    free(tz);
    return AMP_OK;
}

/* b's bytes between ONNX's (N, C, S...) and channels-last (N, S..., C) layouts, into `to`
 * (another buffer). */
static void act_transpose(const AmpBuf *b, const void *from, void *to, bool to_nhwc) {
    if (!b->nelem) return;
    int64_t N = b->dims[0], C = b->dims[1], S = (int64_t)b->nelem / (N * C);
    size_t esz = amp_buf_bytes(b) / b->nelem;
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t p = 0; p < S; p++) {
                int64_t onnx = (n * C + c) * S + p, last = (n * S + p) * C + c;
                memcpy((char *)to + (size_t)(to_nhwc ? last : onnx) * esz,
                       (const char *)from + (size_t)(to_nhwc ? onnx : last) * esz, esz);
            }
}

static AmpCode conv_fwd(AmpKernelCtx *k, bool xl, bool yl, bool zl);

/* A convolution with X (xl), Y (yl) or the summand Z (zl) channels-last that oneDNN did not
 * take: computed on copies of X and Z in ONNX's layout, Y transposed after. */
static AmpCode conv_onnx_layout(AmpKernelCtx *k, bool xl, bool yl, bool zl) {
    AmpBuf xp = *k->in[0], zp, *y = &k->out[0];
    const AmpBuf *in[4];
    if (k->n_in > 4) return amp_kernel_fail(k, AMP_ERR_INPUT, "at most 4 inputs");
    zl = zl && k->n_in > 3 && k->in[3];
    size_t bytes = amp_buf_bytes(&xp) > amp_buf_bytes(y) ? amp_buf_bytes(&xp) : amp_buf_bytes(y);
    void *tmp = malloc(bytes ? bytes : 1), *ztmp = zl ? malloc(amp_buf_bytes(y) ? amp_buf_bytes(y) : 1) : NULL;
    if (!tmp || (zl && !ztmp)) {
        free(tmp), free(ztmp);
        return amp_kernel_fail(k, AMP_ERR_INTERNAL, "out of memory");
    }
    if (xl) act_transpose(&xp, k->in[0]->data, tmp, false), xp.data = tmp;
    memcpy(in, k->in, (size_t)k->n_in * sizeof *in);
    in[0] = &xp;
    if (zl) zp = *k->in[3], act_transpose(&zp, k->in[3]->data, ztmp, false), zp.data = ztmp, in[3] = &zp;
    AmpKernelCtx plain = *k;
    plain.in = in;
    AmpCode rc = conv_fwd(&plain, false, false, false);
    if (!rc && yl) {
        memcpy(tmp, y->data, amp_buf_bytes(y)); /* (X's copy is read no more) */
        act_transpose(y, tmp, y->data, true);
    }
    free(tmp), free(ztmp);
    return rc;
}

/* Conv's or ConvTranspose's geometry (amp_conv_node_geom, ops/conv_geom.h: *wg, made into
 * own where the executor did not) and inputs X, W and B (NULL where absent), of one
 * float32-family dtype. */
static AmpCode conv_inputs(AmpKernelCtx *k, AmpWindowGeom *own, const AmpWindowGeom **wg, const AmpBuf **x,
                           const AmpBuf **w, const AmpBuf **b) {
    AmpCode rc = amp_kernel_geom(k, own, (const void **)wg);
    if (rc) return rc;
    *x = k->in[0], *w = k->in[1], *b = k->n_in > 2 ? k->in[2] : NULL;
    int dt = (*x)->dtype;
    if ((*w)->dtype != dt || (*b && (*b)->dtype != dt))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "inputs have different types");
    return amp_is_f32_family(dt) ? AMP_OK : amp_kernel_bad_dtype(k, dt);
}

/* Y (N, M, out...) = W (M, C/group, kern...) (*) X (N, C, in...) + B (M); for ai.ampc
 * ConvEpilogue (runtime/fuse_conv.c), Y + Z (input 3, Y's type and shape) where given, then
 * Relu where its attribute relu is 1: oneDNN's post-ops, else a pass after; X (x_nhwc 1),
 * Y (y_nhwc 1) and Z (z_nhwc 1) channels-last (N, spatial..., C) where the plan passes them
 * so between convolutions. */
AmpCode amp_cpu_conv(AmpKernelCtx *k) {
    bool ep = k->node->op == AMP_OP_Ampc_ConvEpilogue;
    return conv_fwd(k, ep && amp_node_attr_int(k->node, "x_nhwc", 0) == 1,
                    ep && amp_node_attr_int(k->node, "y_nhwc", 0) == 1,
                    ep && amp_node_attr_int(k->node, "z_nhwc", 0) == 1);
}

static AmpCode conv_fwd(AmpKernelCtx *k, bool xl, bool yl, bool zl) {
    const AmpBuf *x, *w, *b;
    AmpWindowGeom own;
    const AmpWindowGeom *wg; /* amp_conv_node_geom: the window, M, Y checked */
    AmpCode rc = conv_inputs(k, &own, &wg, &x, &w, &b);
    if (rc) return rc;
    const AmpBuf *z = k->n_in > 3 ? k->in[3] : NULL;
    bool relu = k->node->op == AMP_OP_Ampc_ConvEpilogue && amp_node_attr_int(k->node, "relu", 0) == 1;
    const AmpConvAttrs *at = k->attrs;
    int dt = x->dtype;
    int nsp = x->rank - 2;
    int64_t group = at->group, N = x->dims[0], C = x->dims[1], M = wg->M;
    const int64_t *kern = wg->g.kern;
    AmpConvGeom g = wg->g;
    AmpBuf *y;
    if ((rc = amp_kernel_outputs(k, 1, &y)) || !y) return rc;
    if (z && (z->dtype != dt || z->rank != y->rank || memcmp(z->dims, y->dims, (size_t)y->rank * sizeof *y->dims)))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "Z must have Y's type and shape");
    if (!y->nelem) return AMP_OK;
    int64_t Cg = C / group, Mg = M / group, K, O, NI;
    if (!amp_conv_size(nsp, kern, &K) || !amp_conv_size(nsp, g.out, &O) || !amp_conv_size(nsp, g.in, &NI) ||
        K > INT_MAX || Cg > INT_MAX || Mg > INT_MAX || O > INT_MAX || Cg * K > INT_MAX ||
        (uint64_t)(Cg * K) * (uint64_t)O > (UINT64_C(1) << 58))
        return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "convolution too large for the CPU kernel");
    int64_t rows = Cg * K; /* the GEMM's inner dimension */
    AmpDnnlConv dp;
    if (!xl && !yl && !zl && group == 1 && !b && K > O && conv_as_weight_grad(x, w, y, &g))
        return conv_epilogue_pass(k, y, z, relu); /* (no bias there) */
    AmpKernelPack *wpack = k->const_in & 2 ? k->pack : NULL;
    bool on_dnnl = amp_conv_dnnl_desc(AMP_DNNL_CONV_FWD, dt, N, C, M, group, &g, b != NULL, &dp);
    dp.sum = z != NULL, dp.relu = relu; /* post-ops: the epilogue's */
    dp.src_nhwc = xl, dp.dst_nhwc = yl, dp.sum_nhwc = zl && z;
    if (on_dnnl &&
        amp_dnnl_conv(&dp, &(AmpDnnlConvIO){.src = x->data, .wei = w->data, .bias = b ? b->data : NULL, .dst = y->data,
                                            .wei_pack = wpack, .sum_src = z ? z->data : NULL}))
        return AMP_OK;
    if (xl || yl || (zl && z)) return conv_onnx_layout(k, xl, yl, zl);

    /* A 1x1 kernel with unit strides and no padding reads X itself as the column matrix. */
    bool direct = true;
    for (int i = 0; i < nsp; i++)
        direct = direct && kern[i] == 1 && g.stride[i] == 1 && g.pad0[i] == 0 && g.pad1[i] == 0;
    float *tx, *tw, *tb = NULL, *ty, *col = NULL;
    const float *X = amp_buf_f32_in(x, &tx), *W = amp_buf_f32_in(w, &tw);
    const float *B = b ? amp_buf_f32_in(b, &tb) : NULL;
    float *Y = amp_buf_f32_out(y, &ty);
    if (!direct && rows) col = malloc((size_t)(rows * O) * sizeof *col); /* (Cg * K, O) */
    if (!X || !W || (b && !B) || !Y || (!direct && rows && !col)) {
        free(tx), free(tw), free(tb), free(ty), free(col);
        return amp_kernel_fail(k, AMP_ERR_INTERNAL, "out of memory");
    }
    for (int64_t n = 0; n < N; n++)
        for (int64_t gi = 0; gi < group; gi++) {
            const float *xg = X + (n * C + gi * Cg) * NI;
            float *yg = Y + (n * M + gi * Mg) * O;
            if (!rows) {
                memset(yg, 0, (size_t)(Mg * O) * sizeof *yg);
                continue;
            }
            if (!direct) amp_conv_im2col(xg, Cg, &g, col);
            amp_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)Mg, (int)O, (int)rows, 1.0f, W + gi * Mg * rows,
                        (int)rows, direct ? xg : col, (int)O, 0.0f, yg, (int)O);
        }
    if (B)
        for (int64_t n = 0; n < N; n++)
            for (int64_t m = 0; m < M; m++) {
                float *yr = Y + (n * M + m) * O;
                for (int64_t p = 0; p < O; p++) yr[p] += B[m];
            }
    amp_buf_f32_commit(y, ty);
    free(tx), free(tw), free(tb), free(col);
    return conv_epilogue_pass(k, y, z, relu);
}

/* ---- ConvTranspose --------------------------------------------------------------- */

/* y (mg, out...) += col (mg * K, NI): entry (m, j), input position i lands on output
 * position i * stride - pad0 + j * dil when that lies inside y. Here g->in are X's
 * spatial dims and g->out Y's; pad0 may be negative (output_shape larger than the
 * natural size). */
void amp_conv_col2im(const float *col, int64_t mg, const AmpConvGeom *g, float *y) {
    int n = g->nsp;
    int64_t K = prod(n, g->kern), O = prod(n, g->out), NI = prod(n, g->in);
    int64_t il = g->in[n - 1], ol = g->out[n - 1];
    if (!NI) return;
    int64_t outer = NI / il;
    int64_t j[AMP_MAX_SPATIAL] = {0};
    for (int64_t kk = 0; kk < mg * K; kk++) {
        float *ym = y + (kk / K) * O;
        const float *row = col + kk * NI;
        int64_t i[AMP_MAX_SPATIAL] = {0};
        for (int64_t q = 0; q < outer; q++) {
            bool ok = true;
            int64_t off = 0;
            for (int d = 0; d < n - 1; d++) {
                int64_t op = i[d] * g->stride[d] - g->pad0[d] + j[d] * g->dil[d];
                ok = ok && op >= 0 && op < g->out[d];
                off = off * g->out[d] + op;
            }
            if (ok) {
                float *yr = ym + off * ol;
                const float *r = row + q * il;
                int64_t s = g->stride[n - 1], start = j[n - 1] * g->dil[n - 1] - g->pad0[n - 1];
                for (int64_t p = 0; p < il; p++) {
                    int64_t op = p * s + start;
                    if (op >= 0 && op < ol) yr[op] += r[p];
                }
            }
            for (int d = n - 2; d >= 0; d--) {
                if (++i[d] < g->in[d]) break;
                i[d] = 0;
            }
        }
        for (int d = n - 1; d >= 0; d--) {
            if (++j[d] < g->kern[d]) break;
            j[d] = 0;
        }
    }
}

/* Y (N, M, out...) from X (N, C, in...), W (C, M/group, kern...), B (M): each input
 * position scatters W times its value into the output window. */
AmpCode amp_cpu_conv_transpose(AmpKernelCtx *k) {
    const AmpBuf *x, *w, *b;
    AmpWindowGeom own;
    const AmpWindowGeom *wg; /* amp_conv_node_geom: the window, M, Y checked */
    AmpCode rc = conv_inputs(k, &own, &wg, &x, &w, &b);
    if (rc) return rc;
    const AmpConvAttrs *at = k->attrs;
    int dt = x->dtype;
    int nsp = x->rank - 2;
    int64_t group = at->group, N = x->dims[0], C = x->dims[1], Mg = w->dims[1], Cg = C / group, M = wg->M;
    const int64_t *kern = wg->g.kern;
    AmpConvGeom g = wg->g;
    AmpBuf *y;
    if ((rc = amp_kernel_outputs(k, 1, &y)) || !y) return rc;
    if (!y->nelem) return AMP_OK;
    int64_t K, O, NI;
    if (!amp_conv_size(nsp, kern, &K) || !amp_conv_size(nsp, g.out, &O) || !amp_conv_size(nsp, g.in, &NI) ||
        K > INT_MAX || NI > INT_MAX || Cg > INT_MAX || Mg * K > INT_MAX ||
        (uint64_t)(Mg * K) * (uint64_t)NI > (UINT64_C(1) << 58))
        return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "transposed convolution too large for the CPU kernel");
    int64_t rows = Mg * K; /* the column matrix is (Mg * K, NI) */
    AmpDnnlConv dp;
    AmpKernelPack *wpack = k->const_in & 2 ? k->pack : NULL;
    if (amp_conv_dnnl_desc(AMP_DNNL_DECONV_FWD, dt, N, C, M, group, &g, b != NULL, &dp) &&
        amp_dnnl_conv(&dp, &(AmpDnnlConvIO){.src = x->data, .wei = w->data, .bias = b ? b->data : NULL, .dst = y->data,
                                            .wei_pack = wpack}))
        return AMP_OK;
    float *tx, *tw, *tb = NULL, *ty, *col = NULL;
    const float *X = amp_buf_f32_in(x, &tx), *W = amp_buf_f32_in(w, &tw);
    const float *B = b ? amp_buf_f32_in(b, &tb) : NULL;
    float *Y = amp_buf_f32_out(y, &ty);
    if (rows && NI) col = malloc((size_t)(rows * NI) * sizeof *col);
    if (!X || !W || (b && !B) || !Y || (rows && NI && !col)) {
        free(tx), free(tw), free(tb), free(ty), free(col);
        return amp_kernel_fail(k, AMP_ERR_INTERNAL, "out of memory");
    }
    for (int64_t n = 0; n < N; n++)
        for (int64_t m = 0; m < M; m++) {
            float *yr = Y + (n * M + m) * O, v = B ? B[m] : 0.0f;
            for (int64_t p = 0; p < O; p++) yr[p] = v;
        }
    if (col && Cg)
        for (int64_t n = 0; n < N; n++)
            for (int64_t gi = 0; gi < group; gi++) {
                /* col (Mg * K, NI) = W_g^T (Mg * K, Cg) @ X_g (Cg, NI) */
                amp_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)rows, (int)NI, (int)Cg, 1.0f,
                            W + gi * Cg * rows, (int)rows, X + (n * C + gi * Cg) * NI, (int)NI, 0.0f, col, (int)NI);
                amp_conv_col2im(col, Mg, &g, Y + (n * M + gi * Mg) * O);
            }
    amp_buf_f32_commit(y, ty);
    free(tx), free(tw), free(tb), free(col);
    return AMP_OK;
}
