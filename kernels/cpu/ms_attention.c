/* CPU kernels: com.microsoft Attention (fused QKV projection, then attention) and
 * MultiHeadAttention (separate Q, K, V), with onnxruntime's CPU semantics: mask_index /
 * key_padding_mask 0 entries add mask_filter_value (-10000 by default, not -inf, so a
 * fully masked row is a plain softmax), causal positions get -FLT_MAX. */
#include "kernels/cpu/blas.h"
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/attention_impl.h"
#include "ops/geom.h"

/* ---- onnxruntime's mask and bias --------------------------------------------------- */

static int64_t clamp(int64_t v, int64_t lo, int64_t hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

/* The mask onnxruntime's CPU attention builds (PrepareMask), plus attention_bias. The
 * causal rule is j <= i + past for every row (onnxruntime leaves the last query row
 * unmasked, which only differs when T != past + S, i.e. causal cross-attention). */
static void ort_bias(const void *ctx, int64_t b, int64_t h, float *bias) {
    const OrtBias *o = ctx;
    int64_t end = o->T, start = 0;
    if (o->kind == MASK_END || o->kind == MASK_END_START) end = clamp(amp_buf_get_i64(o->mask, (uint64_t)b), 0, o->T);
    if (o->kind == MASK_END_START) start = clamp(amp_buf_get_i64(o->mask, (uint64_t)(o->B + b)), 0, o->T);
    for (int64_t i = 0; i < o->S; i++) {
        float *r = bias + i * o->T;
        const float *ab = o->ab ? o->ab + b * o->ab_sb + h * o->ab_sh + i * o->T : NULL;
        for (int64_t j = 0; j < o->T; j++) {
            float v = 0.0f;
            if (o->kind == MASK_RAW2) v = amp_buf_get_i64(o->mask, (uint64_t)(b * o->T + j)) > 0 ? 0.0f : o->filter;
            else if (o->kind == MASK_RAW3)
                v = amp_buf_get_i64(o->mask, (uint64_t)((b * o->S + i) * o->T + j)) > 0 ? 0.0f : o->filter;
            else if (j >= end || j < start) v = o->filter;
            if (o->causal && j > i + o->past) v = -FLT_MAX;
            r[j] = ab ? v + ab[j] : v;
        }
    }
}

/* x (B, H, T, Dh) += bias (H * Dh) on rows [from, T) of every head. */
static void add_head_bias(float *x, const float *bias, int64_t B, int64_t H, int64_t T, int64_t from, int64_t Dh) {
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t t = from; t < T; t++) {
                float *r = x + ((b * H + h) * T + t) * Dh;
                for (int64_t d = 0; d < Dh; d++) r[d] += bias[h * Dh + d];
            }
}

/* ---- com.microsoft Attention ------------------------------------------------------ */

AmpCode amp_cpu_ms_attention(AmpKernelCtx *k) {
    MsAttnDims own;
    const MsAttnDims *g; /* amp_ms_attention_geom (ops/attn_geom.h): inputs, sizes, outputs */
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&g);
    if (rc) return rc;
    const OrtAttnAttrs *a = k->attrs;
    const MsAttnDims d = *g;
    const AmpBuf *in[7];
    for (int i = 0; i < 7; i++) in[i] = i < k->n_in ? k->in[i] : NULL;
    const AmpBuf *x = in[0], *w = in[1], *bias = in[2], *mask = in[3], *past = in[4], *ab = in[5];
    int dt = x->dtype;
    int64_t N = d.N, B = d.B, S = d.S, Din = d.Din, Dsum = d.Dsum, Dq = d.Dq, Dk = d.Dk, Dv = d.Dv, H = d.H, Hv = d.Hv,
            P = d.P;
    int64_t T = P + S, n;
    OrtBias ob = amp_attn_ort_bias_init(a, B, S, T, P);
    rc = amp_attn_ort_mask_kind(k, mask, B, S, T, true, &ob);
    if (rc || (rc = amp_attn_ort_bias_layout(k, ab, dt, B, N, S, T, &ob))) return rc;
    const int64_t sz1[3] = {B, S, Dsum}, sz2[4] = {B, N, S, T > H ? T : H}, sz3[5] = {2, B, N, T, H > Hv ? H : Hv};
    if (!amp_attn_size(3, sz1, &n) || !amp_attn_size(4, sz2, &n) || !amp_attn_size(5, sz3, &n) || B * S > INT_MAX ||
        Din > INT_MAX || Dsum > INT_MAX || T > INT_MAX)
        return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "attention too large for the CPU kernel");

    AmpBuf *out[2];
    if ((rc = amp_kernel_outputs(k, 2, out))) return rc;
    AmpBuf *y = out[0], *pres = out[1]; /* present holds K then V in (B, N, T, H) halves: H == Hv */
    float *tx, *tw, *tb = NULL, *tp = NULL, *tab = NULL, *ty = NULL, *tpr = NULL, *qkv = NULL, *qh = NULL,
                    *kv = NULL, *yh = NULL;
    const float *X = amp_buf_f32_in(x, &tx), *W = amp_buf_f32_in(w, &tw);
    const float *Bi = bias ? amp_buf_f32_in(bias, &tb) : NULL, *Pa = past ? amp_buf_f32_in(past, &tp) : NULL;
    const float *AB = ab ? amp_buf_f32_in(ab, &tab) : NULL;
    size_t nkv = (size_t)(B * N * T * H), nvv = (size_t)(B * N * T * Hv), nqkv = (size_t)(B * S * Dsum);
    size_t ny = (size_t)(B * S * Dv);
    /* Y not listed (only present wanted): computed into scratch. */
    float *Y = y ? amp_buf_f32_out(y, &ty) : (ty = malloc((ny ? ny : 1) * sizeof *ty));
    float *PR = pres ? amp_buf_f32_out(pres, &tpr) : NULL;
    qkv = malloc((nqkv ? nqkv : 1) * sizeof *qkv);                      // (B * S, Dq + Dk + Dv)
    qh = malloc((size_t)(B * N * S * H + 1) * sizeof *qh);              // (B, N, S, H)
    yh = malloc((size_t)(B * N * S * Hv + 1) * sizeof *yh);             // (B, N, S, Hv)
    float *kvb = PR ? PR : (kv = malloc((nkv + nvv + 1) * sizeof *kv)); // K (B, N, T, H), V (B, N, T, Hv)
    bool ok = X && W && (!bias || Bi) && (!past || Pa) && (!ab || AB) && Y && (!pres || PR) && qkv && qh && yh && kvb;
    if (ok) {
        for (int64_t r = 0; r < B * S; r++)
            for (int64_t c = 0; c < Dsum; c++) qkv[r * Dsum + c] = Bi ? Bi[c] : 0.0f;
        if (B > 0 && S > 0 && Din > 0)
            amp_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)(B * S), (int)Dsum, (int)Din, 1.0f, X, (int)Din,
                        W, (int)Dsum, 1.0f, qkv, (int)Dsum);
        amp_attn_split_heads(qh, qkv, B, S, N, H, Dsum, 0);
        size_t npast = (size_t)(B * N * P * H);
        amp_attn_cat_heads(kvb, Pa, P, qkv, B, N, S, H, Dsum, Dq);
        amp_attn_cat_heads(kvb + nkv, Pa ? Pa + npast : NULL, P, qkv, B, N, S, Hv, Dsum, Dq + Dk);
        ob.ab = AB;
        AmpAttnCore c = {.B = B,
                         .Hq = N,
                         .Hkv = N,
                         .S = S,
                         .T = T,
                         .D = H,
                         .Dv = Hv,
                         .scale = amp_attn_ms_scale(a, H),
                         .q = qh,
                         .k = kvb,
                         .v = kvb + nkv,
                         .bias = mask || ob.causal || ab ? ort_bias : NULL,
                         .bias_ctx = &ob,
                         .y = yh};
        ok = amp_attn_run(&c);
        if (ok) amp_attn_merge_heads(Y, yh, B, N, S, Hv);
    }
    free(tx), free(tw), free(tb), free(tp), free(tab), free(qkv), free(qh), free(kv), free(yh);
    if (!ok) {
        free(ty), free(tpr);
        return amp_attn_oom(k);
    }
    if (y) amp_buf_f32_commit(y, ty);
    else free(ty);
    if (pres) amp_buf_f32_commit(pres, tpr);
    return AMP_OK;
}

/* ---- com.microsoft MultiHeadAttention ------------------------------------------- */

/* query (B, S, D), key (B, L, D) or (B, N, L, H), value (B, L, Dv) or (B, N, L, Hv),
 * bias (D + D + Dv), key_padding_mask, attention_bias, past_key (B, N, P, H), past_value
 * -> output (B, S, Dv) [, present_key (B, N, T, H), present_value, qk (B, N, S, T)].
 * With 4-D (already projected) key and value only the query part of bias applies, as in
 * onnxruntime. Packed QKV/KV inputs are not implemented (neither are they on
 * onnxruntime's CPU). */
AmpCode amp_cpu_ms_mha(AmpKernelCtx *k) {
    const OrtAttnAttrs *a = k->attrs;
    const AmpBuf *in[10] = {NULL};
    for (int i = 0; i < 10 && i < k->n_in; i++) in[i] = k->in[i];
    const AmpBuf *q = in[0], *kk = in[1], *v = in[2], *bias = in[3], *mask = in[4], *ab = in[5], *pk = in[6],
                 *pv = in[7];
    if (!q) return amp_kernel_fail(k, AMP_ERR_INPUT, "needs input query");
    int dt = q->dtype;
    if (!amp_is_f32_family(dt)) return amp_kernel_bad_dtype(k, dt);
    if (in[8] || in[9])
        return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "past_sequence_length and cache_indirection are not implemented");
    if (q->rank == 5 || (kk && kk->rank == 5))
        return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "packed QKV / KV inputs are not implemented on the CPU");
    if (!kk || !v) return amp_kernel_fail(k, AMP_ERR_INPUT, "needs key and value");
    if (kk->dtype != dt || v->dtype != dt || (bias && bias->dtype != dt) || (pk && pk->dtype != dt) ||
        (pv && pv->dtype != dt))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "key, value, bias and past must have query's type");
    if (k->n_out > 4) return amp_kernel_fail(k, AMP_ERR_INPUT, "has %d outputs; at most 4", k->n_out);
    MhaDims d = {0};
    AmpCode rc = amp_attn_mha_dims(k, a, q, kk, v, bias, pk, pv, &d);
    if (rc) return rc;
    int64_t N = d.N, B = d.B, S = d.S, D = d.D, H = d.H, L = d.L, Dv = d.Dv, Hv = d.Hv, P = d.P;
    bool kv4 = d.kv4;
    int64_t T = P + L, n;
    OrtBias ob = amp_attn_ort_bias_init(a, B, S, T, P);
    rc = amp_attn_ort_mask_kind(k, mask, B, S, T, false, &ob);
    if (rc || (rc = amp_attn_ort_bias_layout(k, ab, dt, B, N, S, T, &ob))) return rc;
    int64_t w1 = T > H ? T : H;
    const int64_t sz1[4] = {B, N, S, w1 > Hv ? w1 : Hv}, sz2[4] = {B, N, T, H > Hv ? H : Hv};
    if (!amp_attn_size(4, sz1, &n) || !amp_attn_size(4, sz2, &n) || S > INT_MAX || T > INT_MAX || H > INT_MAX ||
        Hv > INT_MAX)
        return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "attention too large for the CPU kernel");

    AmpBuf *out[4];
    if ((rc = amp_attn_mha_outputs(k, &d, T, dt, out))) return rc;
    float *tq, *tk, *tv, *tb = NULL, *tab = NULL, *tpk = NULL, *tpv = NULL, *to[4] = {NULL};
    float *qh = NULL, *kh = NULL, *vh = NULL, *yh = NULL;
    const float *Q = amp_buf_f32_in(q, &tq), *K = amp_buf_f32_in(kk, &tk), *V = amp_buf_f32_in(v, &tv);
    const float *Bi = bias ? amp_buf_f32_in(bias, &tb) : NULL, *AB = ab ? amp_buf_f32_in(ab, &tab) : NULL;
    const float *PK = pk ? amp_buf_f32_in(pk, &tpk) : NULL, *PV = pv ? amp_buf_f32_in(pv, &tpv) : NULL;
    float *O[4] = {NULL};
    bool ok = Q && K && V && (!bias || Bi) && (!ab || AB) && (!pk || PK) && (!pv || PV);
    size_t nq = (size_t)(B * N * S * H), nk = (size_t)(B * N * T * H), nv = (size_t)(B * N * T * Hv);
    size_t ny = (size_t)(B * N * S * Hv);
    for (int i = 0; i < 4; i++)
        if (out[i]) ok = (O[i] = amp_buf_f32_out(out[i], &to[i])) != NULL && ok;
    /* Y not listed (only the cache or the scores wanted): computed into scratch. */
    if (!out[0]) ok = (O[0] = to[0] = malloc((ny + 1) * sizeof *to[0])) != NULL && ok;
    if (ok) ok = (qh = malloc((nq + 1) * sizeof *qh)) && (yh = malloc((ny + 1) * sizeof *yh));
    /* K and V heads: the present outputs when wanted, else scratch; 4-D key/value
     * without a cache are read in place. */
    const float *Kh = K, *Vh = V;
    if (ok && (!kv4 || O[1])) {
        float *dst = O[1] ? O[1] : (kh = malloc((nk + 1) * sizeof *kh));
        if ((ok = dst != NULL)) {
            amp_attn_cat_heads(dst, PK, P, K, B, N, L, H, kv4 ? 0 : D, 0);
            if (Bi && !kv4) add_head_bias(dst, Bi + D, B, N, T, P, H);
            Kh = dst;
        }
    }
    if (ok && (!kv4 || O[2])) {
        float *dst = O[2] ? O[2] : (vh = malloc((nv + 1) * sizeof *vh));
        if ((ok = dst != NULL)) {
            amp_attn_cat_heads(dst, PV, P, V, B, N, L, Hv, kv4 ? 0 : Dv, 0);
            if (Bi && !kv4) add_head_bias(dst, Bi + 2 * D, B, N, T, P, Hv);
            Vh = dst;
        }
    }
    if (ok) {
        amp_attn_split_heads(qh, Q, B, S, N, H, D, 0);
        if (Bi) add_head_bias(qh, Bi, B, N, S, 0, H);
        ob.ab = AB;
        AmpAttnCore c = {.B = B,
                         .Hq = N,
                         .Hkv = N,
                         .S = S,
                         .T = T,
                         .D = H,
                         .Dv = Hv,
                         .scale = amp_attn_ms_scale(a, H),
                         .q = qh,
                         .k = Kh,
                         .v = Vh,
                         .bias = mask || ob.causal || ab ? ort_bias : NULL,
                         .bias_ctx = &ob,
                         .y = yh,
                         .qk = O[3],
                         .qk_mode = 0};
        ok = amp_attn_run(&c);
        if (ok) amp_attn_merge_heads(O[0], yh, B, N, S, Hv);
    }
    free(tq), free(tk), free(tv), free(tb), free(tab), free(tpk), free(tpv), free(qh), free(kh), free(vh), free(yh);
    for (int i = 0; i < 4; i++) {
        if (ok && out[i]) amp_buf_f32_commit(out[i], to[i]);
        else free(to[i]);
    }
    return ok ? AMP_OK : amp_attn_oom(k);
}
