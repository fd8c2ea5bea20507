/* Unit tests of the attention kernel family (kernels/cpu/attention.c, ms_attention.c,
 * ms_train.c) against naive double-precision references written here: ai.onnx Attention
 * over random shapes (GQA, causal, KV cache, bool/float masks of every rank, short masks,
 * softcap, qk_matmul_output modes, nonpad_kv_seqlen), 3-D = 4-D layouts, 16-bit storage,
 * fully masked rows; com.microsoft Attention/MultiHeadAttention masks; ConvGrad against
 * direct loops; FusedGemm activations and single rounding; and the error paths. */
#include "tests/kernels/gemm_test_util.h"

TestSuite(attention, .init = setup, .fini = teardown);

/* ---- ai.onnx Attention ------------------------------------------------------------ */

typedef struct ACase {
    int64_t B, Hq, Hkv, S, L, P, D, Dv;
    bool causal;
    float scale; /* 0: the default 1/sqrt(D) */
    float softcap;
    int mrank; /* 0: no mask */
    int64_t mdims[4];
    bool mbool;
    const int64_t *nonpad; /* (B) or NULL */
    int mode;              /* qk_matmul_output_mode */
} ACase;

/* The additive bias of key j for query i of (b, h); mask holds the mask's values (bool
 * as 0/1). */
static double ref_bias(const ACase *c, const float *mask, int64_t b, int64_t h, int64_t i, int64_t j) {
    int64_t T = c->P + c->L;
    double v = 0.0;
    if (c->mrank) {
        int64_t Tm = c->mdims[c->mrank - 1];
        if (j >= Tm) {
            v = -INFINITY;
        } else {
            int64_t idx[4] = {b, h, i, j}, off = 0;
            for (int d = 0; d < c->mrank; d++) {
                int64_t md = c->mdims[d], at = idx[4 - c->mrank + d];
                off = off * md + (md == 1 ? 0 : at);
            }
            float m = mask[off];
            v = c->mbool ? (m != 0.0f ? 0.0 : -INFINITY) : m;
        }
    }
    int64_t np = c->nonpad ? c->nonpad[b] : T, offset = c->nonpad ? np - c->S : c->P;
    if (c->causal && j > i + offset) v += -INFINITY;
    if (j >= np) v += -INFINITY;
    return v;
}

/* y (B, Hq, S, Dv) and qk (B, Hq, S, T) from q (B, Hq, S, D), k (B, Hkv, T, D) and v
 * (B, Hkv, T, Dv) (the caches already in front). */
static void ref_attention(const ACase *c, const float *q, const float *k, const float *v, const float *mask, double *y,
                          double *qk) {
    int64_t T = c->P + c->L, rep = c->Hq / c->Hkv;
    double scale = c->scale ? c->scale : 1.0 / sqrt((double)c->D);
    double *s = malloc((size_t)T * sizeof *s), *bias = malloc((size_t)T * sizeof *bias);
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t h = 0; h < c->Hq; h++)
            for (int64_t i = 0; i < c->S; i++) {
                const float *qr = q + ((b * c->Hq + h) * c->S + i) * c->D;
                double *qkr = qk + ((b * c->Hq + h) * c->S + i) * T, m = -INFINITY, sum = 0;
                bool masked = T > 0;
                for (int64_t j = 0; j < T; j++) {
                    const float *kr = k + ((b * c->Hkv + h / rep) * T + j) * c->D;
                    double a = 0;
                    for (int64_t d = 0; d < c->D; d++) a += (double)qr[d] * kr[d];
                    s[j] = a * scale;
                    if (c->mode == 0) qkr[j] = s[j];
                    if (c->softcap > 0) s[j] = c->softcap * tanh(s[j] / c->softcap);
                    if (c->mode == 1) qkr[j] = s[j];
                    bias[j] = ref_bias(c, mask, b, h, i, j);
                    masked = masked && bias[j] == -INFINITY;
                    s[j] += bias[j];
                    if (c->mode == 2) qkr[j] = s[j];
                    if (s[j] > m) m = s[j];
                }
                for (int64_t j = 0; j < T; j++) sum += (s[j] = masked || m == -INFINITY ? 0.0 : exp(s[j] - m));
                for (int64_t j = 0; j < T; j++) {
                    if (sum > 0) s[j] /= sum;
                    if (c->mode == 3) qkr[j] = s[j];
                }
                for (int64_t e = 0; e < c->Dv; e++) {
                    double a = 0;
                    for (int64_t j = 0; j < T; j++) a += s[j] * v[((b * c->Hkv + h / rep) * T + j) * c->Dv + e];
                    y[((b * c->Hq + h) * c->S + i) * c->Dv + e] = a;
                }
            }
    free(s), free(bias);
}

/* dst (B, H, P + L, Dh) = past (B, H, P, Dh) ++ x (B, H, L, Dh) along the sequence. */
static float *cat_seq(const float *past, const float *x, int64_t B, int64_t H, int64_t P, int64_t L, int64_t Dh) {
    float *d = malloc((size_t)(B * H * (P + L) * Dh + 1) * sizeof *d);
    for (int64_t bh = 0; bh < B * H; bh++) {
        memcpy(d + bh * (P + L) * Dh, past + bh * P * Dh, (size_t)(P * Dh) * sizeof *d);
        memcpy(d + (bh * (P + L) + P) * Dh, x + bh * L * Dh, (size_t)(L * Dh) * sizeof *d);
    }
    return d;
}

static AmpNode *attention_node(const ACase *c) {
    AmpNode *n = mknode("", "Attention");
    attr_int(n, "is_causal", c->causal);
    if (c->scale) attr_float(n, "scale", c->scale);
    if (c->softcap) attr_float(n, "softcap", c->softcap);
    attr_int(n, "qk_matmul_output_mode", c->mode);
    return n;
}

static AmpBuf mask_buf(const ACase *c) {
    AmpBuf m = fbuf(c->mrank, c->mdims);
    if (c->mbool) {
        float *f = m.data;
        uint8_t *u = malloc(m.nelem + 1);
        for (uint64_t i = 0; i < m.nelem; i++) f[i] = (float)(u[i] = frand() > -0.4f);
        m.dtype = AMP_DT_BOOL;
        m.data = u;
        free(f);
    }
    return m;
}

static void check_attention_case(const ACase *c, int trial) {
    int64_t T = c->P + c->L;
    AmpBuf q = fbuf(4, I64(c->B, c->Hq, c->S, c->D)), k = fbuf(4, I64(c->B, c->Hkv, c->L, c->D));
    AmpBuf v = fbuf(4, I64(c->B, c->Hkv, c->L, c->Dv));
    AmpBuf pk = fbuf(4, I64(c->B, c->Hkv, c->P, c->D)), pv = fbuf(4, I64(c->B, c->Hkv, c->P, c->Dv));
    AmpBuf m = {0}, np = {0};
    float *mvals = NULL;
    if (c->mrank) {
        m = mask_buf(c);
        mvals = malloc((m.nelem + 1) * sizeof *mvals);
        for (uint64_t i = 0; i < m.nelem; i++) mvals[i] = c->mbool ? ((uint8_t *)m.data)[i] : ((float *)m.data)[i];
    }
    if (c->nonpad)
        np = (AmpBuf){
            .dtype = AMP_DT_INT64, .rank = 1, .dims = {c->B}, .nelem = (uint64_t)c->B, .data = (void *)c->nonpad};
    AmpNode *n = attention_node(c);
    const AmpBuf *in[7] = {
        &q, &k, &v, c->mrank ? &m : NULL, c->P ? &pk : NULL, c->P ? &pv : NULL, c->nonpad ? &np : NULL};
    Outs o;
    AmpStatus st;
    cr_assert_eq(kt_run(n, c->nonpad ? 24 : 23, 7, in, 4, &o, &st), AMP_OK, "trial %d: %s", trial, st.msg);
    expect_shape(&o.b[0], 4, I64(c->B, c->Hq, c->S, c->Dv));
    expect_shape(&o.b[1], 4, I64(c->B, c->Hkv, T, c->D));
    expect_shape(&o.b[3], 4, I64(c->B, c->Hq, c->S, T));
    float *kf = cat_seq(pk.data, k.data, c->B, c->Hkv, c->P, c->L, c->D);
    float *vf = cat_seq(pv.data, v.data, c->B, c->Hkv, c->P, c->L, c->Dv);
    double *y = malloc((o.b[0].nelem + 1) * sizeof *y), *qk = malloc((o.b[3].nelem + 1) * sizeof *qk);
    ref_attention(c, q.data, kf, vf, mvals, y, qk);
    expect_close(o.b[0].data, y, o.b[0].nelem, 2e-5);
    cr_assert_eq(memcmp(o.b[1].data, kf, o.b[1].nelem * sizeof(float)), 0, "trial %d: present_key", trial);
    cr_assert_eq(memcmp(o.b[2].data, vf, o.b[2].nelem * sizeof(float)), 0, "trial %d: present_value", trial);
    const float *got = o.b[3].data;
    for (uint64_t i = 0; i < o.b[3].nelem; i++)
        cr_assert(got[i] == qk[i] || fabs(got[i] - qk[i]) <= 2e-5 * (1 + fabs(qk[i])),
                  "trial %d (mode %d): qk[%llu] is %g, expected %g", trial, c->mode, (unsigned long long)i, got[i],
                  qk[i]);
    free(y), free(qk), free(kf), free(vf), free(mvals);
    outs_free(&o);
    free(q.data), free(k.data), free(v.data), free(pk.data), free(pv.data), free(m.data);
}

Test(attention, onnx_attention_matches_reference) {
    for (int t = 0; t < 200; t++) {
        ACase c;
        memset(&c, 0, sizeof c);
        c.B = irand(1, 2), c.Hkv = irand(1, 2), c.Hq = c.Hkv * irand(1, 3);
        c.S = irand(1, 5), c.L = irand(1, 6), c.P = t % 3 == 0 ? irand(1, 3) : 0;
        c.D = irand(1, 6), c.Dv = irand(1, 5);
        c.causal = t % 2 == 1;
        c.scale = t % 5 == 0 ? 0.7f : 0.0f;
        c.softcap = t % 7 == 0 ? 2.5f : 0.0f;
        c.mode = t % 4;
        int64_t full[4] = {c.B, c.Hq, c.S, c.P + c.L};
        if (t % 3 != 2) {
            c.mrank = (int)irand(1, 4);
            c.mbool = t % 2 == 0;
            for (int d = 0; d < c.mrank; d++) c.mdims[d] = frand() > 0.0f ? full[4 - c.mrank + d] : 1;
            c.mdims[c.mrank - 1] = t % 5 == 1 ? irand(1, full[3]) : full[3]; /* sometimes short */
        }
        check_attention_case(&c, t);
    }
}

/* opset 24's nonpad_kv_seqlen: the per-batch causal frontier and padding mask; a
 * batch with no valid key gives zero rows. */
Test(attention, onnx_attention_nonpad_kv_seqlen) {
    int64_t nonpad[3] = {4, 0, 6};
    for (int causal = 0; causal < 2; causal++) {
        ACase c = {
            .B = 3, .Hq = 4, .Hkv = 2, .S = 2, .L = 6, .D = 3, .Dv = 4, .causal = causal, .nonpad = nonpad, .mode = 3};
        check_attention_case(&c, causal);
    }
}

/* A bool mask row of all false gives a zero output row, not NaN (the spec's errata). */
Test(attention, onnx_attention_fully_masked_row_is_zero) {
    ACase c = {.B = 1, .Hq = 1, .Hkv = 1, .S = 3, .L = 4, .D = 2, .Dv = 3, .mrank = 2, .mdims = {3, 4}, .mbool = true};
    AmpBuf q = fbuf(4, I64(1, 1, 3, 2)), k = fbuf(4, I64(1, 1, 4, 2)), v = fbuf(4, I64(1, 1, 4, 3));
    uint8_t mk[12] = {1, 0, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1};
    AmpBuf m = {.dtype = AMP_DT_BOOL, .rank = 2, .dims = {3, 4}, .nelem = 12, .data = mk};
    const AmpBuf *in[4] = {&q, &k, &v, &m};
    Outs o;
    AmpStatus st;
    cr_assert_eq(kt_run(attention_node(&c), 23, 4, in, 1, &o, &st), AMP_OK, "%s", st.msg);
    const float *y = o.b[0].data;
    for (int e = 0; e < 3; e++) {
        cr_expect_eq(y[3 + e], 0.0f, "row 1 (fully masked) is not zero");
        cr_expect(y[e] != 0.0f && !isnan(y[e]));
    }
    outs_free(&o);
    free(q.data), free(k.data), free(v.data);
}

/* 3-D inputs (B, S, H * D) give the 4-D result, transposed back. */
Test(attention, onnx_attention_3d_equals_4d) {
    int64_t B = 2, Hq = 4, Hkv = 2, S = 3, L = 5, D = 3, Dv = 2;
    AmpBuf q4 = fbuf(4, I64(B, Hq, S, D)), k4 = fbuf(4, I64(B, Hkv, L, D)), v4 = fbuf(4, I64(B, Hkv, L, Dv));
    AmpBuf q3 = fbuf(3, I64(B, S, Hq * D)), k3 = fbuf(3, I64(B, L, Hkv * D)), v3 = fbuf(3, I64(B, L, Hkv * Dv));
    const AmpBuf *src[3] = {&q4, &k4, &v4};
    AmpBuf *dst[3] = {&q3, &k3, &v3};
    for (int t = 0; t < 3; t++) { /* (B, H, S, D) -> (B, S, H * D) */
        int64_t H = src[t]->dims[1], Sq = src[t]->dims[2], Dh = src[t]->dims[3];
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t s = 0; s < Sq; s++)
                    for (int64_t d = 0; d < Dh; d++)
                        ((float *)dst[t]->data)[(b * Sq + s) * H * Dh + h * Dh + d] =
                            ((float *)src[t]->data)[((b * H + h) * Sq + s) * Dh + d];
    }
    AmpNode *n4 = mknode("", "Attention"), *n3 = mknode("", "Attention");
    attr_int(n4, "is_causal", 1), attr_int(n3, "is_causal", 1);
    attr_int(n3, "q_num_heads", Hq), attr_int(n3, "kv_num_heads", Hkv);
    const AmpBuf *in4[3] = {&q4, &k4, &v4}, *in3[3] = {&q3, &k3, &v3};
    Outs o4, o3;
    AmpStatus st;
    cr_assert_eq(kt_run(n4, 23, 3, in4, 3, &o4, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(kt_run(n3, 23, 3, in3, 3, &o3, &st), AMP_OK, "%s", st.msg);
    expect_shape(&o3.b[0], 3, I64(B, S, Hq * Dv));
    const float *y4 = o4.b[0].data, *y3 = o3.b[0].data;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t s = 0; s < S; s++)
                for (int64_t d = 0; d < Dv; d++)
                    cr_assert_eq(y3[(b * S + s) * Hq * Dv + h * Dv + d], y4[((b * Hq + h) * S + s) * Dv + d]);
    for (int i = 1; i < 3; i++) cr_assert_eq(memcmp(o3.b[i].data, o4.b[i].data, o4.b[i].nelem * 4), 0);
    outs_free(&o4), outs_free(&o3);
    for (int t = 0; t < 3; t++) free(src[t]->data), free(dst[t]->data);
}

/* 16-bit storage: the fp32 computation on the rounded inputs, rounded once. */
Test(attention, onnx_attention_16bit_storage) {
    int dts[2] = {AMP_DT_FLOAT16, AMP_DT_BFLOAT16};
    for (int t = 0; t < 2; t++) {
        AmpBuf q = fbuf(4, I64(2, 4, 3, 5)), k = fbuf(4, I64(2, 2, 4, 5)), v = fbuf(4, I64(2, 2, 4, 3));
        AmpBuf m = fbuf(2, I64(3, 4));
        AmpBuf qh = to16(&q, dts[t]), kh = to16(&k, dts[t]), vh = to16(&v, dts[t]), mh = to16(&m, dts[t]);
        AmpBuf qr = from16(&qh), kr = from16(&kh), vr = from16(&vh), mr = from16(&mh);
        AmpNode *n = mknode("", "Attention");
        attr_int(n, "is_causal", 1);
        attr_float(n, "softcap", 3.0f);
        const AmpBuf *in16[4] = {&qh, &kh, &vh, &mh}, *in32[4] = {&qr, &kr, &vr, &mr};
        Outs o16, o32;
        AmpStatus st;
        cr_assert_eq(kt_run(n, 23, 4, in16, 4, &o16, &st), AMP_OK, "%s", st.msg);
        cr_assert_eq(kt_run(n, 23, 4, in32, 4, &o32, &st), AMP_OK, "%s", st.msg);
        for (int i = 0; i < 4; i++) {
            cr_assert_eq(o16.b[i].dtype, dts[t]);
            AmpBuf want = to16(&o32.b[i], dts[t]);
            cr_assert_eq(memcmp(o16.b[i].data, want.data, want.nelem * 2), 0, "output %d", i);
            free(want.data);
        }
        outs_free(&o16), outs_free(&o32);
        AmpBuf *all[12] = {&q, &k, &v, &m, &qh, &kh, &vh, &mh, &qr, &kr, &vr, &mr};
        for (int i = 0; i < 12; i++) free(all[i]->data);
    }
}

/* The error tests free what kt_run placed before each refusal: the next kt_run clears o. */
Test(attention, onnx_attention_errors) {
    AmpBuf q = fbuf(4, I64(1, 3, 2, 4)), k = fbuf(4, I64(1, 2, 2, 4)), v = fbuf(4, I64(1, 2, 2, 4));
    AmpBuf k1 = fbuf(4, I64(1, 1, 2, 4)), v1 = fbuf(4, I64(1, 1, 2, 4)), q3 = fbuf(3, I64(1, 2, 12));
    Outs o;
    AmpStatus st;
    const AmpBuf *gqa_bad[3] = {&q, &k, &v};
    cr_expect_eq(kt_run(mknode("", "Attention"), 23, 3, gqa_bad, 1, &o, &st), AMP_ERR_INPUT, "3 heads over 2");
    outs_free(&o);
    cr_expect(strstr(st.msg, "Attention") != NULL, "%s", st.msg);
    const AmpBuf *ok[3] = {&q, &k1, &v1}, *past_only[5] = {&q, &k1, &v1, NULL, &k1};
    cr_expect_eq(kt_run(mknode("", "Attention"), 23, 5, past_only, 1, &o, &st), AMP_ERR_INPUT, "past_key alone");
    outs_free(&o);
    AmpNode *mode = mknode("", "Attention");
    attr_int(mode, "qk_matmul_output_mode", 7);
    cr_expect_eq(kt_run(mode, 23, 3, ok, 1, &o, &st), AMP_ERR_INPUT);
    outs_free(&o);
    AmpNode *win = mknode("", "Attention");
    attr_int(win, "left_window_size", 2);
    cr_expect_eq(kt_run(win, 25, 3, ok, 1, &o, &st), AMP_ERR_UNSUPPORTED);
    outs_free(&o);
    const AmpBuf *mixed[3] = {&q3, &k1, &v1};
    cr_expect_eq(kt_run(mknode("", "Attention"), 23, 3, mixed, 1, &o, &st), AMP_ERR_INPUT, "3-D Q with 4-D K");
    outs_free(&o);
    AmpBuf m5 = fbuf(2, I64(2, 3)); /* last dim 3 > T = 2 */
    const AmpBuf *long_mask[4] = {&q, &k1, &v1, &m5};
    cr_expect_eq(kt_run(mknode("", "Attention"), 23, 4, long_mask, 1, &o, &st), AMP_ERR_INPUT);
    outs_free(&o);
    double dd[8] = {0};
    AmpBuf qd = {.dtype = AMP_DT_DOUBLE, .rank = 4, .dims = {1, 1, 2, 4}, .nelem = 8, .data = dd};
    const AmpBuf *dbl[3] = {&qd, &qd, &qd};
    cr_expect_eq(kt_run(mknode("", "Attention"), 23, 3, dbl, 1, &o, &st), AMP_ERR_UNSUPPORTED);
    outs_free(&o);
    outs_free(&o);
    free(q.data), free(k.data), free(v.data), free(k1.data), free(v1.data), free(q3.data), free(m5.data);
}

/* ---- com.microsoft Attention and MultiHeadAttention ------------------------------- */

/* y (B, S, N * Hv) of one head-split attention with an additive bias (B, S, T) shared by
 * the heads; q (B, S, N * H), k (B, T, N * H), v (B, T, N * Hv). */
static void ref_ms(const float *q, const float *k, const float *v, const double *bias, int64_t B, int64_t S, int64_t T,
                   int64_t N, int64_t H, int64_t Hv, double scale, double *y) {
    double *s = malloc((size_t)T * sizeof *s);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < N; h++)
            for (int64_t i = 0; i < S; i++) {
                double m = -INFINITY, sum = 0;
                for (int64_t j = 0; j < T; j++) {
                    double a = 0;
                    for (int64_t d = 0; d < H; d++)
                        a += (double)q[(b * S + i) * N * H + h * H + d] * k[(b * T + j) * N * H + h * H + d];
                    s[j] = a * scale + bias[(b * S + i) * T + j];
                    if (s[j] > m) m = s[j];
                }
                for (int64_t j = 0; j < T; j++) sum += (s[j] = exp(s[j] - m));
                for (int64_t e = 0; e < Hv; e++) {
                    double a = 0;
                    for (int64_t j = 0; j < T; j++) a += s[j] / sum * v[(b * T + j) * N * Hv + h * Hv + e];
                    y[(b * S + i) * N * Hv + h * Hv + e] = a;
                }
            }
    free(s);
}

/* MultiHeadAttention with a raw (B, T) key padding mask and unidirectional: masked keys
 * add mask_filter_value, causal ones -FLT_MAX; a fully padded batch is a plain softmax
 * (onnxruntime's -10000 is not -inf). */
Test(attention, ms_mha_masks_match_reference) {
    int64_t B = 2, S = 4, N = 2, H = 3, Hv = 2;
    AmpBuf q = fbuf(3, I64(B, S, N * H)), k = fbuf(3, I64(B, S, N * H)), v = fbuf(3, I64(B, S, N * Hv));
    int32_t mk[8] = {1, 1, 0, 1, 0, 0, 0, 0};
    AmpBuf m = {.dtype = AMP_DT_INT32, .rank = 2, .dims = {B, S}, .nelem = 8, .data = mk};
    AmpNode *n = mknode("com.microsoft", "MultiHeadAttention");
    attr_int(n, "num_heads", N);
    attr_int(n, "unidirectional", 1);
    attr_float(n, "mask_filter_value", -50.0f);
    const AmpBuf *in[5] = {&q, &k, &v, NULL, &m};
    Outs o;
    AmpStatus st;
    cr_assert_eq(kt_run(n, 1, 5, in, 1, &o, &st), AMP_OK, "%s", st.msg);
    expect_shape(&o.b[0], 3, I64(B, S, N * Hv));
    double bias[32], y[32]; // (B, S, S), (B, S, N * Hv)
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < S; i++)
            for (int64_t j = 0; j < S; j++)
                bias[(b * S + i) * S + j] = j > i ? -3.4028234663852886e38 : mk[b * S + j] ? 0.0 : -50.0;
    ref_ms(q.data, k.data, v.data, bias, B, S, S, N, H, Hv, 1.0 / sqrt((double)H), y);
    expect_close(o.b[0].data, y, 32, 1e-5);
    outs_free(&o);
    free(q.data), free(k.data), free(v.data);
}

/* com.microsoft Attention = the projection input @ weights + bias, split in thirds,
 * then attention; mask_index (2B) masks keys before start and from end. */
Test(attention, ms_attention_projection_and_end_start_mask) {
    int64_t B = 2, S = 3, Din = 4, N = 2, H = 2, D = N * H;
    AmpBuf x = fbuf(3, I64(B, S, Din)), w = fbuf(2, I64(Din, 3 * D)), bb = fbuf(1, I64(3 * D));
    int32_t mi[4] = {2, 3, 0, 1}; /* batch 0: keys [0, 2); batch 1: keys [1, 3) */
    AmpBuf m = {.dtype = AMP_DT_INT32, .rank = 1, .dims = {2 * B}, .nelem = 4, .data = mi};
    AmpNode *n = mknode("com.microsoft", "Attention");
    attr_int(n, "num_heads", N);
    const AmpBuf *in[4] = {&x, &w, &bb, &m};
    Outs o;
    AmpStatus st;
    cr_assert_eq(kt_run(n, 1, 4, in, 2, &o, &st), AMP_OK, "%s", st.msg);
    expect_shape(&o.b[1], 5, I64(2, B, N, S, H));
    float qkv[3][24]; // Q, K, V: (B * S, D) each
    const float *X = x.data, *W = w.data, *Bb = bb.data;
    for (int64_t r = 0; r < B * S; r++)
        for (int64_t c = 0; c < 3 * D; c++) {
            double a = Bb[c];
            for (int64_t p = 0; p < Din; p++) a += (double)X[r * Din + p] * W[p * 3 * D + c];
            qkv[c / D][r * D + c % D] = (float)a;
        }
    double bias[18], y[24];
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < S; i++)
            for (int64_t j = 0; j < S; j++) bias[(b * S + i) * S + j] = j < mi[B + b] || j >= mi[b] ? -10000.0 : 0.0;
    ref_ms(qkv[0], qkv[1], qkv[2], bias, B, S, S, N, H, H, 1.0 / sqrt((double)H), y);
    expect_close(o.b[0].data, y, (uint64_t)(B * S * D), 1e-4);
    /* present[1] holds V in (B, N, S, H). */
    const float *pv = (const float *)o.b[1].data + B * N * S * H;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < N; h++)
            for (int64_t s = 0; s < S; s++)
                for (int64_t d = 0; d < H; d++)
                    cr_assert(fabsf(pv[((b * N + h) * S + s) * H + d] - qkv[2][(b * S + s) * D + h * H + d]) < 1e-5f);
    outs_free(&o);
    free(x.data), free(w.data), free(bb.data);
}

/* com.microsoft Attention with qkv_hidden_sizes (4, 4, 8): V's heads (4 wide) are wider
 * than Q's and K's (2). The kernel wrote V past the end of its K/V scratch, sized for
 * K's heads (a heap overflow AddressSanitizer names); now the scratch holds both, Y is
 * (B, S, 8) and matches the reference, and `present`, whose halves are K's head size,
 * is refused for such sizes. */
Test(attention, ms_attention_wider_v_heads) {
    int64_t B = 1, S = 3, Din = 4, N = 2, Dq = 4, Dv = 8, H = Dq / N, Hv = Dv / N;
    AmpBuf x = fbuf(3, I64(B, S, Din)), w = fbuf(2, I64(Din, 2 * Dq + Dv)), bb = fbuf(1, I64(2 * Dq + Dv));
    AmpNode *n = mknode("com.microsoft", "Attention");
    attr_int(n, "num_heads", N);
    attr_ints(n, "qkv_hidden_sizes", 3, I64(Dq, Dq, Dv));
    const AmpBuf *in[3] = {&x, &w, &bb};
    Outs o;
    AmpStatus st;
    cr_assert_eq(kt_run(n, 1, 3, in, 1, &o, &st), AMP_OK, "%s", st.msg);
    expect_shape(&o.b[0], 3, I64(B, S, Dv));
    float q[12], k[12], v[24]; /* (B * S, Dq), (B * S, Dq), (B * S, Dv) */
    const float *X = x.data, *W = w.data, *Bb = bb.data;
    int64_t cols = 2 * Dq + Dv;
    for (int64_t r = 0; r < B * S; r++)
        for (int64_t c = 0; c < cols; c++) {
            double acc = Bb[c];
            for (int64_t p = 0; p < Din; p++) acc += (double)X[r * Din + p] * W[p * cols + c];
            if (c < Dq) q[r * Dq + c] = (float)acc;
            else if (c < 2 * Dq) k[r * Dq + c - Dq] = (float)acc;
            else v[r * Dv + c - 2 * Dq] = (float)acc;
        }
    double bias[9] = {0}, y[24];
    ref_ms(q, k, v, bias, B, S, S, N, H, Hv, 1.0 / sqrt((double)H), y);
    expect_close(o.b[0].data, y, (uint64_t)(B * S * Dv), 1e-4);
    outs_free(&o);
    /* Asking for present too: its halves are K's head size, which V's does not fit. */
    cr_assert_eq(kt_run(n, 1, 3, in, 2, &o, &st), AMP_ERR_INPUT);
    outs_free(&o);
    free(x.data), free(w.data), free(bb.data);
}

Test(attention, ms_attention_errors) {
    AmpBuf x = fbuf(3, I64(1, 2, 4)), w = fbuf(2, I64(4, 12)), q5 = fbuf(5, I64(1, 2, 2, 3, 2));
    Outs o;
    AmpStatus st;
    const AmpBuf *in[2] = {&x, &w};
    AmpNode *heads = mknode("com.microsoft", "Attention");
    attr_int(heads, "num_heads", 3); /* 4 columns per third over 3 heads */
    cr_expect_eq(kt_run(heads, 1, 2, in, 1, &o, &st), AMP_ERR_INPUT);
    outs_free(&o);
    AmpNode *rot = mknode("com.microsoft", "Attention");
    attr_int(rot, "num_heads", 2);
    attr_int(rot, "do_rotary", 1);
    cr_expect_eq(kt_run(rot, 1, 2, in, 1, &o, &st), AMP_ERR_UNSUPPORTED);
    outs_free(&o);
    int32_t bad[3] = {1, 1, 1};
    AmpBuf m = {.dtype = AMP_DT_INT32, .rank = 1, .dims = {3}, .nelem = 3, .data = bad};
    AmpNode *mk = mknode("com.microsoft", "Attention");
    attr_int(mk, "num_heads", 2);
    const AmpBuf *in_m[4] = {&x, &w, NULL, &m};
    cr_expect_eq(kt_run(mk, 1, 4, in_m, 1, &o, &st), AMP_ERR_INPUT, "a mask of 3 entries for batch 1");
    outs_free(&o);
    AmpNode *packed = mknode("com.microsoft", "MultiHeadAttention");
    attr_int(packed, "num_heads", 2);
    const AmpBuf *in_p[1] = {&q5};
    cr_expect_eq(kt_run(packed, 1, 1, in_p, 1, &o, &st), AMP_ERR_UNSUPPORTED);
    outs_free(&o);
    AmpNode *nokv = mknode("com.microsoft", "MultiHeadAttention");
    attr_int(nokv, "num_heads", 2);
    const AmpBuf *in_q[1] = {&x};
    cr_expect_eq(kt_run(nokv, 1, 1, in_q, 1, &o, &st), AMP_ERR_INPUT);
    outs_free(&o);
    outs_free(&o);
    free(x.data), free(w.data), free(q5.data);
}

/* ---- ConvGrad ----------------------------------------------------------------------- */

/* A random convolution, padded to 3 spatial dims with leading dims of size 1. */
typedef struct CCase {
    int nsp;
    int64_t N, group, Cg, Mg;
    int64_t in[3], k[3], s[3], d[3], p0[3], p1[3], out[3];
} CCase;

static CCase random_conv(void) {
    CCase c;
    memset(&c, 0, sizeof c);
    c.nsp = (int)irand(1, 3);
    c.N = irand(1, 2), c.group = irand(1, 3), c.Cg = irand(1, 3), c.Mg = irand(1, 3);
    for (int i = 0; i < 3; i++) {
        bool used = i >= 3 - c.nsp;
        c.in[i] = used ? irand(2, c.nsp == 3 ? 5 : 8) : 1;
        c.k[i] = used ? irand(1, 3) : 1;
        c.s[i] = used ? irand(1, 3) : 1;
        c.d[i] = used ? irand(1, 2) : 1;
        c.p0[i] = used ? irand(0, 2) : 0;
        c.p1[i] = used ? irand(0, 2) : 0;
        int64_t eff = (c.k[i] - 1) * c.d[i] + 1;
        while (c.in[i] + c.p0[i] + c.p1[i] < eff) c.in[i]++;
        c.out[i] = (c.in[i] + c.p0[i] + c.p1[i] - eff) / c.s[i] + 1;
    }
    return c;
}

static int cshape(const CCase *c, int64_t a, int64_t b, const int64_t *sp, int64_t *dims) {
    dims[0] = a, dims[1] = b;
    for (int i = 0; i < c->nsp; i++) dims[2 + i] = sp[3 - c->nsp + i];
    return c->nsp + 2;
}

/* Direct loops over every (n, m, o, c', j) term of Conv: y[n,m,o] += x[n,c,i] w[m,c',j]
 * with i = o*s - p0 + j*d, accumulated into dX, dW and dB. */
static void ref_conv_grad(const CCase *c, const float *dy, const float *x, const float *w, double *dx, double *dw,
                          double *db) {
    int64_t C = c->group * c->Cg, M = c->group * c->Mg;
    int64_t NI = c->in[0] * c->in[1] * c->in[2], O = c->out[0] * c->out[1] * c->out[2];
    int64_t K = c->k[0] * c->k[1] * c->k[2];
    memset(dx, 0, (size_t)(c->N * C * NI) * sizeof *dx);
    memset(dw, 0, (size_t)(M * c->Cg * K) * sizeof *dw);
    memset(db, 0, (size_t)M * sizeof *db);
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t m = 0; m < M; m++)
            for (int64_t o = 0; o < O; o++) {
                int64_t oi[3] = {o / (c->out[1] * c->out[2]), o / c->out[2] % c->out[1], o % c->out[2]};
                double g = dy[(n * M + m) * O + o];
                db[m] += g;
                for (int64_t ci = 0; ci < c->Cg; ci++)
                    for (int64_t j = 0; j < K; j++) {
                        int64_t ji[3] = {j / (c->k[1] * c->k[2]), j / c->k[2] % c->k[1], j % c->k[2]}, xi = 0;
                        bool inside = true;
                        for (int a = 0; a < 3; a++) {
                            int64_t p = oi[a] * c->s[a] - c->p0[a] + ji[a] * c->d[a];
                            inside = inside && p >= 0 && p < c->in[a];
                            xi = xi * c->in[a] + p;
                        }
                        if (!inside) continue;
                        int64_t cx = (m / c->Mg) * c->Cg + ci, wi = (m * c->Cg + ci) * K + j;
                        dx[(n * C + cx) * NI + xi] += g * w[wi];
                        dw[wi] += g * x[(n * C + cx) * NI + xi];
                    }
            }
}

Test(attention, conv_grad_matches_direct_loops) {
    for (int t = 0; t < 60; t++) {
        CCase c = random_conv();
        if (t % 10 == 0) /* the 1x1, stride 1, unpadded path */
            for (int i = 0; i < 3; i++) c.k[i] = c.s[i] = 1, c.p0[i] = c.p1[i] = 0, c.out[i] = c.in[i];
        int64_t C = c.group * c.Cg, M = c.group * c.Mg, xd[5], wd[5], yd[5];
        int r = cshape(&c, c.N, C, c.in, xd);
        cshape(&c, M, c.Cg, c.k, wd);
        cshape(&c, c.N, M, c.out, yd);
        AmpBuf x = fbuf(r, xd), w = fbuf(r, wd), dy = fbuf(r, yd);
        AmpNode *n = mknode("com.microsoft", "ConvGrad");
        int64_t s[3], d[3], p[6];
        for (int i = 0; i < c.nsp; i++) {
            int a = 3 - c.nsp + i;
            s[i] = c.s[a], d[i] = c.d[a], p[i] = c.p0[a], p[c.nsp + i] = c.p1[a];
        }
        attr_ints(n, "strides", c.nsp, s);
        attr_ints(n, "dilations", c.nsp, d);
        attr_ints(n, "pads", 2 * c.nsp, p);
        attr_int(n, "group", c.group);
        const AmpBuf *in[3] = {&dy, &x, &w};
        Outs o;
        AmpStatus st;
        cr_assert_eq(kt_run(n, 1, 3, in, 3, &o, &st), AMP_OK, "trial %d: %s", t, st.msg);
        expect_shape(&o.b[0], r, xd);
        expect_shape(&o.b[1], r, wd);
        expect_shape(&o.b[2], 1, I64(M));
        double *dx = malloc(x.nelem * sizeof *dx), *dw = malloc(w.nelem * sizeof *dw), *db = malloc(M * sizeof *db);
        ref_conv_grad(&c, dy.data, x.data, w.data, dx, dw, db);
        expect_close(o.b[0].data, dx, x.nelem, 1e-5);
        expect_close(o.b[1].data, dw, w.nelem, 1e-5);
        expect_close(o.b[2].data, db, (uint64_t)M, 1e-5);
        free(dx), free(dw), free(db);
        outs_free(&o);
        free(x.data), free(w.data), free(dy.data);
    }
}

/* dX and dW are the adjoints of Conv: <Conv(X, W), dY> changes by <dX, eX> when X
 * moves by eX, and likewise for W (checked with the conv family's own Conv). */
Test(attention, conv_grad_is_adjoint_of_conv) {
    AmpBuf x = fbuf(4, I64(2, 4, 6, 5)), w = fbuf(4, I64(6, 2, 3, 2)), dy = fbuf(4, I64(2, 6, 3, 3));
    AmpNode *conv = mknode("", "Conv"), *grad = mknode("com.microsoft", "ConvGrad");
    AmpNode *nodes[2] = {conv, grad};
    for (int i = 0; i < 2; i++) {
        attr_int(nodes[i], "group", 2);
        attr_ints(nodes[i], "strides", 2, I64(2, 2));
        attr_ints(nodes[i], "pads", 4, I64(1, 0, 0, 1));
    }
    const AmpBuf *gin[3] = {&dy, &x, &w}, *cin[2] = {&x, &w};
    Outs g, y;
    AmpStatus st;
    cr_assert_eq(kt_run(grad, 1, 3, gin, 2, &g, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(kt_run(conv, 18, 2, cin, 1, &y, &st), AMP_OK, "%s", st.msg);
    expect_shape(&y.b[0], 4, dy.dims);
    /* Conv is linear in X: <Conv(X, W), dY> = <X, dX>. */
    double lhs = 0, rhs = 0;
    for (uint64_t i = 0; i < dy.nelem; i++) lhs += (double)((float *)y.b[0].data)[i] * ((float *)dy.data)[i];
    for (uint64_t i = 0; i < x.nelem; i++) rhs += (double)((float *)x.data)[i] * ((float *)g.b[0].data)[i];
    cr_expect(fabs(lhs - rhs) < 1e-4 * (1 + fabs(lhs)), "<y, dy> %g, <x, dx> %g", lhs, rhs);
    /* ...and in W: <Conv(X, W), dY> = <W, dW>. */
    rhs = 0;
    for (uint64_t i = 0; i < w.nelem; i++) rhs += (double)((float *)w.data)[i] * ((float *)g.b[1].data)[i];
    cr_expect(fabs(lhs - rhs) < 1e-4 * (1 + fabs(lhs)), "<y, dy> %g, <w, dw> %g", lhs, rhs);
    outs_free(&g), outs_free(&y);
    free(x.data), free(w.data), free(dy.data);
}

Test(attention, conv_grad_errors_and_16bit) {
    AmpBuf x = fbuf(4, I64(1, 2, 5, 5)), w = fbuf(4, I64(3, 2, 3, 3)), dy = fbuf(4, I64(1, 3, 3, 3));
    AmpBuf dy_bad = fbuf(4, I64(1, 3, 4, 3));
    Outs o;
    AmpStatus st;
    const AmpBuf *bad[3] = {&dy_bad, &x, &w};
    cr_expect_eq(kt_run(mknode("com.microsoft", "ConvGrad"), 1, 3, bad, 3, &o, &st), AMP_ERR_INPUT);
    outs_free(&o);
    const AmpBuf *two[2] = {&dy, &x};
    cr_expect_eq(kt_run(mknode("com.microsoft", "ConvGrad"), 1, 2, two, 3, &o, &st), AMP_ERR_INPUT);
    outs_free(&o);
    AmpBuf dyh = to16(&dy, AMP_DT_BFLOAT16), xh = to16(&x, AMP_DT_BFLOAT16), wh = to16(&w, AMP_DT_BFLOAT16);
    AmpBuf dyr = from16(&dyh), xr = from16(&xh), wr = from16(&wh);
    const AmpBuf *in16[3] = {&dyh, &xh, &wh}, *in32[3] = {&dyr, &xr, &wr};
    Outs o16, o32;
    AmpNode *n = mknode("com.microsoft", "ConvGrad");
    cr_assert_eq(kt_run(n, 1, 3, in16, 3, &o16, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(kt_run(n, 1, 3, in32, 3, &o32, &st), AMP_OK, "%s", st.msg);
    for (int i = 0; i < 3; i++) {
        AmpBuf want = to16(&o32.b[i], AMP_DT_BFLOAT16);
        cr_assert_eq(o16.b[i].dtype, AMP_DT_BFLOAT16);
        cr_assert_eq(memcmp(o16.b[i].data, want.data, want.nelem * 2), 0, "output %d", i);
        free(want.data);
    }
    outs_free(&o), outs_free(&o16), outs_free(&o32);
    AmpBuf *all[10] = {&x, &w, &dy, &dy_bad, &dyh, &xh, &wh, &dyr, &xr, &wr};
    for (int i = 0; i < 10; i++) free(all[i]->data);
}

/* ---- FusedGemm and AdamWOptimizer --------------------------------------------------- */

Test(attention, fused_gemm_activations) {
    const char *acts[5] = {"Relu", "LeakyRelu", "Tanh", "Sigmoid", "HardSigmoid"};
    AmpBuf a = fbuf(2, I64(4, 3)), b = fbuf(2, I64(5, 3)), c = fbuf(1, I64(5));
    const AmpBuf *in[3] = {&a, &b, &c};
    for (int t = 0; t < 5; t++) {
        AmpNode *n = mknode("com.microsoft", "FusedGemm");
        attr_str(n, "activation", acts[t]);
        attr_int(n, "transB", 1);
        attr_float(n, "alpha", 2.0f);
        if (t == 1) attr_float(n, "activation_alpha", 0.25f);
        Outs o;
        AmpStatus st;
        cr_assert_eq(kt_run(n, 1, 3, in, 1, &o, &st), AMP_OK, "%s: %s", acts[t], st.msg);
        expect_shape(&o.b[0], 2, I64(4, 5));
        double want[20];
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 5; j++) {
                double z = ((float *)c.data)[j];
                for (int p = 0; p < 3; p++) z += 2.0 * ((float *)a.data)[i * 3 + p] * ((float *)b.data)[j * 3 + p];
                double r[5] = {z > 0 ? z : 0, z >= 0 ? z : 0.25 * z, tanh(z), 1 / (1 + exp(-z)),
                               fmax(0, fmin(1, 0.2 * z + 0.5))};
                want[i * 5 + j] = r[t];
            }
        expect_close(o.b[0].data, want, 20, 1e-5);
        outs_free(&o);
    }
    free(a.data), free(b.data), free(c.data);
}

/* float16: the activation sees the fp32 product, and the result is rounded once. */
Test(attention, fused_gemm_float16_rounds_once) {
    AmpBuf a = fbuf(2, I64(6, 8)), b = fbuf(2, I64(8, 7));
    for (uint64_t i = 0; i < a.nelem; i++) ((float *)a.data)[i] *= 3.0f;
    AmpBuf ah = to16(&a, AMP_DT_FLOAT16), bh = to16(&b, AMP_DT_FLOAT16), ar = from16(&ah), br = from16(&bh);
    AmpNode *n = mknode("com.microsoft", "FusedGemm");
    attr_str(n, "activation", "Tanh");
    const AmpBuf *in16[2] = {&ah, &bh}, *in32[2] = {&ar, &br};
    Outs o16, o32;
    AmpStatus st;
    cr_assert_eq(kt_run(n, 1, 2, in16, 1, &o16, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(kt_run(n, 1, 2, in32, 1, &o32, &st), AMP_OK, "%s", st.msg);
    AmpBuf want = to16(&o32.b[0], AMP_DT_FLOAT16);
    cr_assert_eq(o16.b[0].dtype, AMP_DT_FLOAT16);
    cr_assert_eq(memcmp(o16.b[0].data, want.data, want.nelem * 2), 0);
    free(want.data);
    outs_free(&o16), outs_free(&o32);
    free(a.data), free(b.data), free(ah.data), free(bh.data), free(ar.data), free(br.data);
}

Test(attention, fused_gemm_and_adamw_unsupported) {
    AmpBuf a = fbuf(2, I64(2, 2));
    const AmpBuf *in[2] = {&a, &a};
    Outs o;
    AmpStatus st;
    AmpNode *n = mknode("com.microsoft", "FusedGemm");
    attr_str(n, "activation", "Swish");
    cr_expect_eq(kt_run(n, 1, 2, in, 1, &o, &st), AMP_ERR_UNSUPPORTED);
    outs_free(&o);
    cr_expect(strstr(st.msg, "Swish") != NULL, "%s", st.msg);
    int64_t step = 1;
    AmpBuf lr = fbuf(0, NULL), t = {.dtype = AMP_DT_INT64, .rank = 0, .nelem = 1, .data = &step};
    const AmpBuf *adam[6] = {&lr, &t, &a, &a, &a, &a};
    cr_expect_eq(kt_run(mknode("com.microsoft", "AdamWOptimizer"), 1, 6, adam, 1, &o, &st), AMP_ERR_UNSUPPORTED);
    outs_free(&o);
    cr_expect(strstr(st.msg, "sequence") != NULL, "%s", st.msg);
    outs_free(&o);
    free(a.data), free(lr.data);
}

/* No keys at all (L = 0, no cache): every output row is zero. */
Test(attention, onnx_attention_empty_key_sequence) {
    AmpBuf q = fbuf(4, I64(1, 2, 3, 4)), k = fbuf(4, I64(1, 2, 0, 4)), v = fbuf(4, I64(1, 2, 0, 5));
    const AmpBuf *in[3] = {&q, &k, &v};
    AmpNode *n = mknode("", "Attention");
    attr_int(n, "is_causal", 1);
    Outs o;
    AmpStatus st;
    cr_assert_eq(kt_run(n, 23, 3, in, 4, &o, &st), AMP_OK, "%s", st.msg);
    expect_shape(&o.b[0], 4, I64(1, 2, 3, 5));
    expect_shape(&o.b[3], 4, I64(1, 2, 3, 0));
    for (uint64_t i = 0; i < o.b[0].nelem; i++) cr_assert_eq(((float *)o.b[0].data)[i], 0.0f);
    outs_free(&o);
    free(q.data), free(k.data), free(v.data);
}
