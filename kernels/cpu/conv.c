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

/* Y (N, M, out...) = W (M, C/group, kern...) (*) X (N, C, in...) + B (M). */
AmpCode amp_cpu_conv(AmpKernelCtx *k) {
    const AmpBuf *x = k->n_in > 0 ? k->in[0] : NULL, *w = k->n_in > 1 ? k->in[1] : NULL;
    const AmpBuf *b = k->n_in > 2 ? k->in[2] : NULL;
    if (!x || !w) return amp_kernel_fail(k, AMP_ERR_INPUT, "needs inputs X and W");
    int dt = x->dtype;
    if (w->dtype != dt || (b && b->dtype != dt)) return amp_kernel_fail(k, AMP_ERR_INPUT, "inputs have different types");
    if (!amp_is_f32_family(dt)) return amp_kernel_bad_dtype(k, dt);
    if (x->rank < 3 || w->rank != x->rank)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "X (rank %d) and W (rank %d) must have the same rank >= 3", x->rank,
                             w->rank);
    const AmpConvAttrs *at = amp_conv_prepared(k);
    if (!at) return k->st->code;
    int nsp = x->rank - 2;
    int64_t group = at->group;
    int64_t N = x->dims[0], C = x->dims[1], M = w->dims[0];
    if (group < 1 || group > (C > 0 ? C : 1) || C % group || M % group || w->dims[1] != C / group)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "group %lld does not fit X's %lld channels and W (%lld, %lld, ...)",
                             (long long)group, (long long)C, (long long)M, (long long)w->dims[1]);
    if (b && (b->rank != 1 || b->dims[0] != M))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "B must be 1-D with %lld entries", (long long)M);
    int64_t kern[AMP_MAX_SPATIAL];
    AmpConvGeom g;
    AmpCode rc = amp_conv_kernel_from_w(k, at, w, nsp, kern);
    if (rc || (rc = amp_conv_geom_attrs(k, at, x, kern, &g))) return rc;
    int64_t ydims[AMP_MAX_RANK] = {N, M};
    for (int i = 0; i < nsp; i++) ydims[i + 2] = g.out[i];
    AmpBuf *y;
    if ((rc = amp_kernel_outputs(k, 1, &y)) || !y || (rc = amp_kernel_check_out(k, y, dt, nsp + 2, ydims))) return rc;
    if (!y->nelem) return AMP_OK;
    int64_t Cg = C / group, Mg = M / group, K, O, NI;
    if (!amp_conv_size(nsp, kern, &K) || !amp_conv_size(nsp, g.out, &O) || !amp_conv_size(nsp, g.in, &NI) ||
        K > INT_MAX || Cg > INT_MAX || Mg > INT_MAX || O > INT_MAX || Cg * K > INT_MAX ||
        (uint64_t)(Cg * K) * (uint64_t)O > (UINT64_C(1) << 58))
        return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "convolution too large for the CPU kernel");
    int64_t rows = Cg * K; /* the GEMM's inner dimension */
    AmpDnnlConv dp;
    if (group == 1 && !b && K > O && conv_as_weight_grad(x, w, y, &g)) return AMP_OK; /* (no bias there) */
    AmpKernelPack *wpack = k->const_in & 2 ? k->pack : NULL;
    if (amp_conv_dnnl_desc(AMP_DNNL_CONV_FWD, dt, N, C, M, group, &g, b != NULL, &dp) &&
        amp_dnnl_conv(&dp, &(AmpDnnlConvIO){.src = x->data, .wei = w->data, .bias = b ? b->data : NULL, .dst = y->data,
                                            .wei_pack = wpack}))
        return AMP_OK;

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
    return AMP_OK;
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
    const AmpBuf *x = k->n_in > 0 ? k->in[0] : NULL, *w = k->n_in > 1 ? k->in[1] : NULL;
    const AmpBuf *b = k->n_in > 2 ? k->in[2] : NULL;
    if (!x || !w) return amp_kernel_fail(k, AMP_ERR_INPUT, "needs inputs X and W");
    int dt = x->dtype;
    if (w->dtype != dt || (b && b->dtype != dt)) return amp_kernel_fail(k, AMP_ERR_INPUT, "inputs have different types");
    if (!amp_is_f32_family(dt)) return amp_kernel_bad_dtype(k, dt);
    if (x->rank < 3 || w->rank != x->rank)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "X (rank %d) and W (rank %d) must have the same rank >= 3", x->rank,
                             w->rank);
    const AmpConvAttrs *at = amp_conv_prepared(k);
    if (!at) return k->st->code;
    int nsp = x->rank - 2;
    int64_t group = at->group;
    int64_t N = x->dims[0], C = x->dims[1], Mg = w->dims[1];
    if (group < 1 || group > (C > 0 ? C : 1) || C % group || w->dims[0] != C || Mg > INT32_MAX)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "group %lld does not fit X's %lld channels and W (%lld, %lld, ...)",
                             (long long)group, (long long)C, (long long)w->dims[0], (long long)Mg);
    int64_t M = Mg * group, Cg = C / group;
    if (b && (b->rank != 1 || b->dims[0] != M))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "B must be 1-D with %lld entries", (long long)M);
    int64_t kern[AMP_MAX_SPATIAL];
    AmpConvGeom g;
    AmpCode rc = amp_conv_kernel_from_w(k, at, w, nsp, kern);
    if (rc || (rc = amp_convtranspose_geom(k, at, x, kern, &g))) return rc;
    int64_t ydims[AMP_MAX_RANK] = {N, M};
    for (int i = 0; i < nsp; i++) ydims[i + 2] = g.out[i];
    AmpBuf *y;
    if ((rc = amp_kernel_outputs(k, 1, &y)) || !y || (rc = amp_kernel_check_out(k, y, dt, nsp + 2, ydims))) return rc;
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
