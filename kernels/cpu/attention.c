/* CPU kernels: ai.onnx Attention (opset 23/24: MHA, GQA, MQA; causal, bool or additive
 * masks, softcap, KV cache, qk_matmul_output) and the fp32 attention core that the
 * com.microsoft attention kernels (ms_attention.c) share. Q K^T and P V go through
 * cblas_sgemm; 16-bit tensors compute in fp32 and round on store; no double. */
#include "kernels/cpu/blas.h"
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/attention_impl.h"
#include "ops/geom.h"

AmpCode amp_attn_oom(AmpKernelCtx *k) {
    return amp_kernel_fail(k, AMP_ERR_INTERNAL, "out of memory");
}


/* ---- the core ------------------------------------------------------------------- */

/* In-place softmax of one row of n scores; a row with no finite maximum (every key
 * excluded) or flagged `masked` becomes zeros. */
static void softmax_row(float *r, int64_t n, bool masked) {
    float m = -INFINITY;
    for (int64_t j = 0; j < n; j++)
        if (r[j] > m) m = r[j];
    if (masked || m == -INFINITY) {
        memset(r, 0, (size_t)n * sizeof *r);
        return;
    }
    double sum = 0.0;
    for (int64_t j = 0; j < n; j++) {
        r[j] = expf(r[j] - m);
        sum += r[j];
    }
    float inv = (float)(1.0 / sum);
    for (int64_t j = 0; j < n; j++) r[j] *= inv;
}

bool amp_attn_run(const AmpAttnCore *c) {
    int64_t S = c->S, T = c->T, D = c->D, Dv = c->Dv, rep = c->Hq / c->Hkv;
    if (S == 0 || T == 0) { /* no keys: every output row is zero */
        uint64_t ny = (uint64_t)(c->B * c->Hq * S * Dv);
        if (ny) memset(c->y, 0, ny * sizeof *c->y);
        return true;
    }
    float *sc = malloc((size_t)(S * T) * sizeof *sc);                      // (S, T) scores, then P
    float *bias = c->bias ? malloc((size_t)(S * T) * sizeof *bias) : NULL; // (S, T)
    if (!sc || (c->bias && !bias)) {
        free(sc), free(bias);
        return false;
    }
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t h = 0; h < c->Hq; h++) {
            const float *q = c->q + (b * c->Hq + h) * S * D;
            const float *k = c->k + (b * c->Hkv + h / rep) * T * D;
            const float *v = c->v + (b * c->Hkv + h / rep) * T * Dv;
            float *y = c->y + (b * c->Hq + h) * S * Dv;
            float *qk = c->qk ? c->qk + (b * c->Hq + h) * S * T : NULL;
            if (D)
                amp_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)S, (int)T, (int)D, c->scale, q, (int)D, k,
                            (int)D, 0.0f, sc, (int)T);
            else memset(sc, 0, (size_t)(S * T) * sizeof *sc);
            if (qk && c->qk_mode == 0) memcpy(qk, sc, (size_t)(S * T) * sizeof *sc);
            if (c->softcap > 0.0f)
                for (int64_t i = 0; i < S * T; i++) sc[i] = c->softcap * tanhf(sc[i] / c->softcap);
            if (qk && c->qk_mode == 1) memcpy(qk, sc, (size_t)(S * T) * sizeof *sc);
            if (bias) c->bias(c->bias_ctx, b, h, bias);
            for (int64_t i = 0; i < S; i++) {
                float *r = sc + i * T;
                bool masked = false;
                if (bias) {
                    const float *br = bias + i * T;
                    masked = c->zero_masked_rows;
                    for (int64_t j = 0; j < T; j++) {
                        masked = masked && br[j] == -INFINITY;
                        r[j] += br[j];
                    }
                }
                if (qk && c->qk_mode == 2) memcpy(qk + i * T, r, (size_t)T * sizeof *r);
                softmax_row(r, T, masked);
                if (qk && c->qk_mode == 3) memcpy(qk + i * T, r, (size_t)T * sizeof *r);
            }
            if (Dv)
                amp_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)S, (int)Dv, (int)T, 1.0f, sc, (int)T, v,
                            (int)Dv, 0.0f, y, (int)Dv);
        }
    free(sc), free(bias);
    return true;
}

void amp_attn_split_heads(float *dst, const float *src, int64_t B, int64_t S, int64_t H, int64_t D, int64_t row,
                          int64_t off) {
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t s = 0; s < S; s++)
                memcpy(dst + ((b * H + h) * S + s) * D, src + (b * S + s) * row + off + h * D, (size_t)D * sizeof *dst);
}

void amp_attn_cat_heads(float *dst, const float *past, int64_t P, const float *src, int64_t B, int64_t H, int64_t L,
                        int64_t Dh, int64_t row, int64_t off) {
    size_t bytes = (size_t)Dh * sizeof *dst;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            float *d = dst + (b * H + h) * (P + L) * Dh;
            if (P) memcpy(d, past + (b * H + h) * P * Dh, (size_t)P * bytes);
            for (int64_t l = 0; l < L; l++)
                memcpy(d + (P + l) * Dh,
                       row ? src + (b * L + l) * row + off + h * Dh : src + ((b * H + h) * L + l) * Dh, bytes);
        }
}

void amp_attn_merge_heads(float *dst, const float *src, int64_t B, int64_t H, int64_t S, int64_t D) {
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t s = 0; s < S; s++)
                memcpy(dst + (b * S + s) * H * D + h * D, src + ((b * H + h) * S + s) * D, (size_t)D * sizeof *dst);
}

/* ---- ai.onnx Attention ------------------------------------------------------------ */

/* The additive bias of ai.onnx Attention: the mask (bool: false -> -inf; otherwise its
 * value) read at the broadcast position, -inf past its last dim Tm (the spec pads a
 * short mask), plus -inf outside the causal frontier j <= i + offset and at padded keys
 * j >= nonpad[b]. */
typedef struct OnnxBias {
    const float *mask; /* the mask as additive values, or NULL */
    int64_t ms[4];     /* its element strides over (B, Hq, S, Tm); 0 along broadcast dims */
    int64_t Tm, S, T;
    bool causal;
    int64_t offset;       /* causal frontier offset (the past length) without nonpad */
    const AmpBuf *nonpad; /* (B) int64 valid key counts (opset 24), or NULL */
} OnnxBias;

static void onnx_bias(const void *ctx, int64_t b, int64_t h, float *bias) {
    const OnnxBias *o = ctx;
    /* Clamped so that i + off cannot overflow; beyond +-2^40 nothing changes. */
    int64_t np = o->nonpad ? amp_buf_get_i64(o->nonpad, (uint64_t)b) : o->T, lim = INT64_C(1) << 40;
    np = np < -lim ? -lim : np > lim ? lim : np;
    int64_t off = o->nonpad ? np - o->S : o->offset;
    for (int64_t i = 0; i < o->S; i++) {
        float *r = bias + i * o->T;
        const float *mr = o->mask ? o->mask + b * o->ms[0] + h * o->ms[1] + i * o->ms[2] : NULL;
        for (int64_t j = 0; j < o->T; j++) {
            float v = 0.0f;
            if (mr) v = j < o->Tm ? mr[j * o->ms[3]] : -INFINITY;
            if (o->causal && j > i + off) v += -INFINITY;
            if (j >= np) v += -INFINITY;
            r[j] = v;
        }
    }
}

/* The mask as a float array of additive values; NULL with *rc set on error. */
static float *mask_values(AmpKernelCtx *k, const AmpBuf *m, AmpCode *rc) {
    *rc = AMP_OK;
    float *f = malloc((m->nelem ? m->nelem : 1) * sizeof *f);
    if (!f) {
        *rc = amp_attn_oom(k);
        return NULL;
    }
    if (m->dtype == AMP_DT_BOOL) {
        const uint8_t *p = m->data;
        for (uint64_t i = 0; i < m->nelem; i++) f[i] = p[i] ? 0.0f : -INFINITY;
    } else if (amp_is_f32_family(m->dtype)) {
        float *tmp;
        const float *p = amp_buf_f32_in(m, &tmp);
        if (!p) {
            free(f);
            *rc = amp_attn_oom(k);
            return NULL;
        }
        if (m->nelem) memcpy(f, p, m->nelem * sizeof *f);
        free(tmp);
    } else if (m->dtype == AMP_DT_DOUBLE) {
        const double *p = m->data;
        for (uint64_t i = 0; i < m->nelem; i++) f[i] = (float)p[i];
    } else if (m->dtype == AMP_DT_INT8 || m->dtype == AMP_DT_INT16 || m->dtype == AMP_DT_INT32 ||
               m->dtype == AMP_DT_INT64 || m->dtype == AMP_DT_UINT8 || m->dtype == AMP_DT_UINT16 ||
               m->dtype == AMP_DT_UINT32 || m->dtype == AMP_DT_UINT64) {
        for (uint64_t i = 0; i < m->nelem; i++) f[i] = (float)amp_buf_get_i64(m, i);
    } else {
        free(f);
        *rc = amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "attn_mask of type %s is not supported", amp_dtype_name(m->dtype));
        return NULL;
    }
    return f;
}

/* The bias callback's state: the causal offset, the mask's layout (the geometry's; its
 * values are read later), and nonpad_kv_seqlen. */
static AmpCode attn_bias(AmpKernelCtx *k, const OnnxAttnAttrs *a, const AmpOnnxAttnGeom *g, const AmpBuf *pk,
                         const AmpBuf *nonpad, OnnxBias *ob) {
    const AttnShape *s = &g->s;
    memset(ob, 0, sizeof *ob);
    ob->S = s->S, ob->T = s->T, ob->offset = s->P;
    ob->causal = a->causal;
    ob->Tm = g->Tm;
    memcpy(ob->ms, g->ms, sizeof ob->ms);
    if (nonpad) {
        if (pk) return amp_kernel_fail(k, AMP_ERR_INPUT, "nonpad_kv_seqlen cannot be used with past_key/past_value");
        if (nonpad->dtype != AMP_DT_INT64 || nonpad->rank != 1 || nonpad->dims[0] != s->B)
            return amp_kernel_fail(k, AMP_ERR_INPUT, "nonpad_kv_seqlen must be int64 of shape (%lld)", (long long)s->B);
        ob->nonpad = nonpad;
    }
    return AMP_OK;
}

/* Q, K, V [, attn_mask, past_key, past_value, nonpad_kv_seqlen] ->
 * Y [, present_key, present_value, qk_matmul_output]. */
AmpCode amp_cpu_onnx_attention(AmpKernelCtx *k) {
    AmpOnnxAttnGeom own;
    const AmpOnnxAttnGeom *g; /* amp_onnx_attention_geom (ops/attn_geom.h): sizes, mask layout, outputs */
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&g);
    if (rc) return rc;
    const OnnxAttnAttrs *a = k->attrs;
    const AmpBuf *in[7] = {NULL};
    for (int i = 0; i < 7 && i < k->n_in; i++) in[i] = k->in[i];
    const AmpBuf *q = in[0], *kk = in[1], *v = in[2], *mask = in[3], *pk = in[4], *pv = in[5], *nonpad = in[6];
    const int fl[5] = {q->dtype, kk->dtype, v->dtype, pk ? pk->dtype : q->dtype, pv ? pv->dtype : v->dtype};
    for (int i = 0; i < 5; i++)
        if (!amp_is_f32_family(fl[i])) return amp_kernel_bad_dtype(k, fl[i]);
    if (kk->dtype != q->dtype || (pk && pk->dtype != q->dtype) || (pv && pv->dtype != v->dtype))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "K and past_key must have Q's type, past_value V's");
    AttnShape s = g->s;
    OnnxBias ob;
    if ((rc = attn_bias(k, a, g, pk, nonpad, &ob))) return rc;
    float scale = a->has_scale ? a->scale : (float)(1.0 / sqrt((double)(s.D ? s.D : 1)));
    float softcap = a->softcap;
    int qk_mode = a->qk_mode;

    AmpBuf *out[4];
    if ((rc = amp_kernel_outputs(k, 4, out))) return rc;

    float *tq, *tk, *tv, *tpk = NULL, *tpv = NULL, *tm = NULL, *qs = NULL, *ks = NULL, *vs = NULL, *ys = NULL;
    float *ty = NULL, *tpko = NULL, *tpvo = NULL, *tqk = NULL;
    const float *Q = amp_buf_f32_in(q, &tq), *K = amp_buf_f32_in(kk, &tk), *V = amp_buf_f32_in(v, &tv);
    const float *PK = pk ? amp_buf_f32_in(pk, &tpk) : NULL, *PV = pv ? amp_buf_f32_in(pv, &tpv) : NULL;
    size_t nq = (size_t)(s.B * s.Hq * s.S * s.D), nk = (size_t)(s.B * s.Hkv * s.T * s.D);
    size_t nv = (size_t)(s.B * s.Hkv * s.T * s.Dv), ny = (size_t)(s.B * s.Hq * s.S * s.Dv);
    /* Y not listed (only the cache or the scores wanted): computed into scratch. */
    float *Y = out[0] ? amp_buf_f32_out(out[0], &ty) : (ty = malloc((ny ? ny : 1) * sizeof *ty));
    float *PKo = out[1] ? amp_buf_f32_out(out[1], &tpko) : NULL, *PVo = out[2] ? amp_buf_f32_out(out[2], &tpvo) : NULL;
    float *QK = out[3] ? amp_buf_f32_out(out[3], &tqk) : NULL;
    bool ok = Q && K && V && (!pk || PK) && (!pv || PV) && Y && (!out[1] || PKo) && (!out[2] || PVo) && (!out[3] || QK);
    if (ok && mask) ok = (tm = mask_values(k, mask, &rc)) != NULL;
    /* Q and Y in heads layout: copies for 3-D inputs; K/V: the present outputs when
     * wanted, else copies unless they can be read in place (4-D, no cache). */
    const float *Qh = Q, *Kh = K, *Vh = V;
    float *Yh = Y;
    bool kv_direct = !s.is3d && !pk;
    if (ok && s.is3d) {
        ok = (qs = malloc((nq ? nq : 1) * sizeof *qs)) && (ys = malloc((ny ? ny : 1) * sizeof *ys));
        if (ok) amp_attn_split_heads(qs, Q, s.B, s.S, s.Hq, s.D, s.Hq * s.D, 0), Qh = qs, Yh = ys;
    }
    if (ok && (PKo || !kv_direct)) {
        float *dst = PKo ? PKo : (ks = malloc((nk ? nk : 1) * sizeof *ks));
        if ((ok = dst != NULL))
            amp_attn_cat_heads(dst, PK, s.P, K, s.B, s.Hkv, s.L, s.D, s.is3d ? s.Hkv * s.D : 0, 0), Kh = dst;
    }
    if (ok && (PVo || !kv_direct)) {
        float *dst = PVo ? PVo : (vs = malloc((nv ? nv : 1) * sizeof *vs));
        if ((ok = dst != NULL))
            amp_attn_cat_heads(dst, PV, s.P, V, s.B, s.Hkv, s.L, s.Dv, s.is3d ? s.Hkv * s.Dv : 0, 0), Vh = dst;
    }
    if (ok) {
        ob.mask = tm;
        AmpAttnCore c = {.B = s.B,
                         .Hq = s.Hq,
                         .Hkv = s.Hkv,
                         .S = s.S,
                         .T = s.T,
                         .D = s.D,
                         .Dv = s.Dv,
                         .scale = scale,
                         .softcap = softcap,
                         .q = Qh,
                         .k = Kh,
                         .v = Vh,
                         .bias = mask || ob.causal || nonpad ? onnx_bias : NULL,
                         .bias_ctx = &ob,
                         .zero_masked_rows = true,
                         .y = Yh,
                         .qk = QK,
                         .qk_mode = qk_mode};
        ok = amp_attn_run(&c);
        if (ok && s.is3d) amp_attn_merge_heads(Y, ys, s.B, s.Hq, s.S, s.Dv);
    }
    free(tq), free(tk), free(tv), free(tpk), free(tpv), free(tm), free(qs), free(ks), free(vs), free(ys);
    if (!ok) {
        free(ty), free(tpko), free(tpvo), free(tqk);
        return rc ? rc : amp_attn_oom(k);
    }
    if (out[0]) amp_buf_f32_commit(out[0], ty);
    else free(ty);
    if (out[1]) amp_buf_f32_commit(out[1], tpko);
    if (out[2]) amp_buf_f32_commit(out[2], tpvo);
    if (out[3]) amp_buf_f32_commit(out[3], tqk);
    return AMP_OK;
}
