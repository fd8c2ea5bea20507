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

AmpCode amp_attn_oom(AmpKernelCtx *k) {
    return amp_kernel_fail(k, AMP_ERR_INTERNAL, "out of memory");
}


bool amp_attn_size(int n, const int64_t *d, int64_t *out) {
    uint64_t p = 1;
    for (int i = 0; i < n; i++) {
        if (d[i] < 0 || (d[i] && p > (UINT64_C(1) << 40) / (uint64_t)d[i])) return false;
        p *= (uint64_t)d[i];
    }
    *out = (int64_t)p;
    return true;
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

AmpCode amp_cpu_onnx_attention_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    (void)opset;
    if (amp_node_attr_int(n, "left_window_size", -1) >= 0 || amp_node_attr_int(n, "right_window_size", -1) >= 0)
        return amp_node_fail(n, st, AMP_ERR_UNSUPPORTED, "sliding-window attention (opset 25) is not implemented");
    int64_t mode = amp_node_attr_int(n, "qk_matmul_output_mode", 0);
    if (mode < 0 || mode > 3)
        return amp_node_fail(n, st, AMP_ERR_INPUT, "qk_matmul_output_mode %lld is not 0..3", (long long)mode);
    OnnxAttnAttrs *a = malloc(sizeof *a);
    if (!a) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    const AmpAttr *sa = amp_node_attr(n, "scale");
    *a = (OnnxAttnAttrs){.q_heads = amp_node_attr_int(n, "q_num_heads", 0),
                         .kv_heads = amp_node_attr_int(n, "kv_num_heads", 0),
                         .qk_mode = (int)mode,
                         .causal = amp_node_attr_int(n, "is_causal", 0) != 0,
                         .has_scale = sa && sa->type == AMP_ATTR_FLOAT,
                         .scale = sa && sa->type == AMP_ATTR_FLOAT ? sa->f : 0.0f,
                         .softcap = amp_node_attr_float(n, "softcap", 0.0f)};
    *attrs = a;
    return AMP_OK;
}

AmpCode amp_attn_onnx_shape(AmpKernelCtx *k, const OnnxAttnAttrs *a, const AmpBuf *q, const AmpBuf *kk, const AmpBuf *v,
                            const AmpBuf *pk, const AmpBuf *pv, AttnShape *s) {
    memset(s, 0, sizeof *s);
    if (q->rank != kk->rank || q->rank != v->rank || (q->rank != 3 && q->rank != 4))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "Q, K and V must all be 3-D or all 4-D (got ranks %d, %d, %d)", q->rank,
                             kk->rank, v->rank);
    s->is3d = q->rank == 3;
    s->B = q->dims[0];
    if (kk->dims[0] != s->B || v->dims[0] != s->B)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "Q, K and V have different batch sizes");
    if (s->is3d) {
        s->Hq = a->q_heads;
        s->Hkv = a->kv_heads;
        if (s->Hq < 1 || s->Hkv < 1)
            return amp_kernel_fail(k, AMP_ERR_INPUT, "3-D inputs need positive q_num_heads and kv_num_heads");
        if (q->dims[2] % s->Hq || kk->dims[2] % s->Hkv || v->dims[2] % s->Hkv)
            return amp_kernel_fail(k, AMP_ERR_INPUT,
                                 "hidden sizes (Q %lld, K %lld, V %lld) are not multiples of the head counts",
                                 (long long)q->dims[2], (long long)kk->dims[2], (long long)v->dims[2]);
        s->S = q->dims[1], s->L = kk->dims[1];
        s->D = q->dims[2] / s->Hq, s->Dv = v->dims[2] / s->Hkv;
        if (kk->dims[2] / s->Hkv != s->D)
            return amp_kernel_fail(k, AMP_ERR_INPUT, "Q and K head sizes differ (%lld and %lld)", (long long)s->D,
                                 (long long)(kk->dims[2] / s->Hkv));
        if (v->dims[1] != s->L) return amp_kernel_fail(k, AMP_ERR_INPUT, "K and V have different sequence lengths");
    } else {
        s->Hq = q->dims[1], s->S = q->dims[2], s->D = q->dims[3];
        s->Hkv = kk->dims[1], s->L = kk->dims[2], s->Dv = v->dims[3];
        if (kk->dims[3] != s->D)
            return amp_kernel_fail(k, AMP_ERR_INPUT, "Q and K head sizes differ (%lld and %lld)", (long long)s->D,
                                 (long long)kk->dims[3]);
        if (v->dims[1] != s->Hkv || v->dims[2] != s->L)
            return amp_kernel_fail(k, AMP_ERR_INPUT, "V (B, %lld, %lld, Dv) does not match K's heads and length",
                                 (long long)v->dims[1], (long long)v->dims[2]);
        if (s->Hkv < 1) return amp_kernel_fail(k, AMP_ERR_INPUT, "K has no heads");
    }
    if (s->Hq % s->Hkv)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "q_num_heads %lld is not a multiple of kv_num_heads %lld",
                             (long long)s->Hq, (long long)s->Hkv);
    if (!pk != !pv) return amp_kernel_fail(k, AMP_ERR_INPUT, "past_key and past_value must be given together");
    if (pk) {
        if (pk->rank != 4 || pv->rank != 4 || pk->dims[0] != s->B || pk->dims[1] != s->Hkv || pk->dims[3] != s->D ||
            pv->dims[0] != s->B || pv->dims[1] != s->Hkv || pv->dims[2] != pk->dims[2] || pv->dims[3] != s->Dv)
            return amp_kernel_fail(k, AMP_ERR_INPUT,
                                 "past_key must be (%lld, %lld, P, %lld) and past_value (%lld, %lld, P, %lld)",
                                 (long long)s->B, (long long)s->Hkv, (long long)s->D, (long long)s->B,
                                 (long long)s->Hkv, (long long)s->Dv);
        s->P = pk->dims[2];
    }
    s->T = s->P + s->L;
    int64_t n;
    int64_t widest = s->T > s->D ? s->T : s->D;
    const int64_t qd[4] = {s->B, s->Hq, s->S, widest > s->Dv ? widest : s->Dv};
    const int64_t kd[4] = {s->B, s->Hkv, s->T, s->D > s->Dv ? s->D : s->Dv};
    if (!amp_attn_size(4, qd, &n) || !amp_attn_size(4, kd, &n) || s->S > INT_MAX || s->T > INT_MAX || s->D > INT_MAX ||
        s->Dv > INT_MAX)
        return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "attention too large for the CPU kernel");
    return AMP_OK;
}

AmpCode amp_attn_onnx_mask_layout(AmpKernelCtx *k, const AmpBuf *m, const AttnShape *s, int64_t *Tm, int64_t ms[4]) {
    if (m->rank < 1 || m->rank > 4)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "attn_mask must have rank 1 to 4 (got %d)", m->rank);
    *Tm = m->dims[m->rank - 1];
    if (*Tm > s->T)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "attn_mask's last dim %lld is over the total sequence length %lld",
                             (long long)*Tm, (long long)s->T);
    int64_t full[4] = {s->B, s->Hq, s->S, *Tm};
    for (int i = 0; i < m->rank - 1; i++) {
        int64_t d = m->dims[i], want = full[4 - m->rank + i];
        if (d != 1 && d != want)
            return amp_kernel_fail(k, AMP_ERR_INPUT, "attn_mask dim %d (%lld) does not broadcast to %lld", i,
                                 (long long)d, (long long)want);
    }
    amp_broadcast_strides(m->rank, m->dims, 4, full, ms);
    return AMP_OK;
}

/* The bias callback's state: the causal offset, the mask's layout (its values are read
 * later), and nonpad_kv_seqlen. */
static AmpCode attn_bias(AmpKernelCtx *k, const OnnxAttnAttrs *a, const AttnShape *s, const AmpBuf *mask,
                         const AmpBuf *pk, const AmpBuf *nonpad, OnnxBias *ob) {
    memset(ob, 0, sizeof *ob);
    ob->S = s->S, ob->T = s->T, ob->offset = s->P;
    ob->causal = a->causal;
    AmpCode rc;
    if (mask && (rc = amp_attn_onnx_mask_layout(k, mask, s, &ob->Tm, ob->ms))) return rc;
    if (nonpad) {
        if (pk) return amp_kernel_fail(k, AMP_ERR_INPUT, "nonpad_kv_seqlen cannot be used with past_key/past_value");
        if (nonpad->dtype != AMP_DT_INT64 || nonpad->rank != 1 || nonpad->dims[0] != s->B)
            return amp_kernel_fail(k, AMP_ERR_INPUT, "nonpad_kv_seqlen must be int64 of shape (%lld)", (long long)s->B);
        ob->nonpad = nonpad;
    }
    return AMP_OK;
}

/* The outputs as placed (out[i] NULL where not wanted), checked against the shapes the
 * kernel writes: present key/value double as the K/V arrays the core reads. */
AmpCode amp_attn_onnx_outputs(AmpKernelCtx *k, const AttnShape *s, const AmpBuf *q, const AmpBuf *v, AmpBuf **out) {
    int64_t ydims[4] = {s->B, s->S, s->Hq * s->Dv, 0};
    if (!s->is3d) ydims[0] = s->B, ydims[1] = s->Hq, ydims[2] = s->S, ydims[3] = s->Dv;
    const int64_t pkd[4] = {s->B, s->Hkv, s->T, s->D}, pvd[4] = {s->B, s->Hkv, s->T, s->Dv},
                  qkd[4] = {s->B, s->Hq, s->S, s->T};
    if (k->n_out > 4) return amp_kernel_fail(k, AMP_ERR_INPUT, "has %d outputs; at most 4", k->n_out);
    AmpCode rc;
    if ((rc = amp_kernel_outputs(k, 4, out))) return rc;
    for (int i = 0; i < 4; i++) {
        const int64_t *dims = i == 0 ? ydims : i == 1 ? pkd : i == 2 ? pvd : qkd;
        int rank = i == 0 && s->is3d ? 3 : 4, dt = i == 2 ? v->dtype : q->dtype;
        if (out[i] && (rc = amp_kernel_check_out(k, out[i], dt, rank, dims))) return rc;
    }
    return AMP_OK;
}

/* Q, K, V [, attn_mask, past_key, past_value, nonpad_kv_seqlen] ->
 * Y [, present_key, present_value, qk_matmul_output]. */
AmpCode amp_cpu_onnx_attention(AmpKernelCtx *k) {
    const OnnxAttnAttrs *a = k->attrs;
    const AmpBuf *in[7] = {NULL};
    for (int i = 0; i < 7 && i < k->n_in; i++) in[i] = k->in[i];
    const AmpBuf *q = in[0], *kk = in[1], *v = in[2], *mask = in[3], *pk = in[4], *pv = in[5], *nonpad = in[6];
    if (!q || !kk || !v) return amp_kernel_fail(k, AMP_ERR_INPUT, "needs inputs Q, K and V");
    const int fl[5] = {q->dtype, kk->dtype, v->dtype, pk ? pk->dtype : q->dtype, pv ? pv->dtype : v->dtype};
    for (int i = 0; i < 5; i++)
        if (!amp_is_f32_family(fl[i])) return amp_kernel_bad_dtype(k, fl[i]);
    if (kk->dtype != q->dtype || (pk && pk->dtype != q->dtype) || (pv && pv->dtype != v->dtype))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "K and past_key must have Q's type, past_value V's");
    AttnShape s;
    AmpCode rc = amp_attn_onnx_shape(k, a, q, kk, v, pk, pv, &s);
    if (rc) return rc;
    OnnxBias ob;
    if ((rc = attn_bias(k, a, &s, mask, pk, nonpad, &ob))) return rc;
    float scale = a->has_scale ? a->scale : (float)(1.0 / sqrt((double)(s.D ? s.D : 1)));
    float softcap = a->softcap;
    int qk_mode = a->qk_mode;

    AmpBuf *out[4];
    if ((rc = amp_attn_onnx_outputs(k, &s, q, v, out))) return rc;

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
