/* The attention family's attributes and shape checks, every backend's (ops/attn_geom.h). */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/attn_geom.h"
#include "ops/kernel_out.h"

bool amp_attn_size(int n, const int64_t *d, int64_t *out) {
    uint64_t p = 1;
    for (int i = 0; i < n; i++) {
        if (d[i] < 0 || (d[i] && p > (UINT64_C(1) << 40) / (uint64_t)d[i])) return false;
        p *= (uint64_t)d[i];
    }
    *out = (int64_t)p;
    return true;
}

/* ---- ai.onnx Attention ------------------------------------------------------------ */

AmpCode amp_onnx_attention_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
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

/* Q, K, V and the past's shapes checked against each other and the attributes: s gets
 * the sizes. */
static AmpCode onnx_shape(AmpKernelCtx *k, const OnnxAttnAttrs *a, const AmpBuf *q, const AmpBuf *kk, const AmpBuf *v,
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

/* attn_mask against (B, Hq, S, T): *Tm and ms as AmpOnnxAttnGeom has them. */
static AmpCode onnx_mask_layout(AmpKernelCtx *k, const AmpBuf *m, const AttnShape *s, int64_t *Tm, int64_t ms[4]) {
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

AmpCode amp_onnx_attention_geom(AmpKernelCtx *k, void *geom, bool *made) {
    (void)made;
    AmpOnnxAttnGeom *g = geom;
    AttnShape *s = &g->s;
    const AmpBuf *in[6] = {NULL};
    for (int i = 0; i < 6 && i < k->n_in; i++) in[i] = k->in[i];
    const AmpBuf *q = in[0], *v = in[2], *mask = in[3];
    if (!q || !in[1] || !v) return amp_kernel_fail(k, AMP_ERR_INPUT, "needs inputs Q, K and V");
    AmpCode rc = onnx_shape(k, k->attrs, q, in[1], v, in[4], in[5], s);
    if (rc) return rc;
    g->Tm = 0;
    memset(g->ms, 0, sizeof g->ms);
    if (mask && (rc = onnx_mask_layout(k, mask, s, &g->Tm, g->ms))) return rc;
    int64_t ydims[4] = {s->B, s->S, s->Hq * s->Dv, 0};
    if (!s->is3d) ydims[0] = s->B, ydims[1] = s->Hq, ydims[2] = s->S, ydims[3] = s->Dv;
    const int64_t pkd[4] = {s->B, s->Hkv, s->T, s->D}, pvd[4] = {s->B, s->Hkv, s->T, s->Dv},
                  qkd[4] = {s->B, s->Hq, s->S, s->T};
    if (k->n_out > 4) return amp_kernel_fail(k, AMP_ERR_INPUT, "has %d outputs; at most 4", k->n_out);
    for (int i = 0; !rc && i < 4; i++) {
        const int64_t *dims = i == 0 ? ydims : i == 1 ? pkd : i == 2 ? pvd : qkd;
        int rank = i == 0 && s->is3d ? 3 : 4, dt = i == 2 ? v->dtype : q->dtype;
        rc = amp_geom_check(k, i, dt, rank, dims);
    }
    return rc;
}

/* ---- com.microsoft Attention / MultiHeadAttention: onnxruntime's mask and bias -------- */

/* Classifies the mask (int32 in the schema; any integer type is read) for B, S, T.
 * MultiHeadAttention does not take the (2B) form (onnxruntime rejects it). */
AmpCode amp_attn_ort_mask_kind(AmpKernelCtx *k, const AmpBuf *m, int64_t B, int64_t S, int64_t T, bool allow_2b,
                               OrtBias *o) {
    o->kind = MASK_NONE;
    if (!m) return AMP_OK;
    if (!amp_dtype_is_int(m->dtype) && m->dtype != AMP_DT_BOOL)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "the mask must be int32 (got %s)", amp_dtype_name(m->dtype));
    o->mask = m;
    if (m->rank == 1 && m->dims[0] == B) o->kind = MASK_END;
    else if (m->rank == 1 && allow_2b && m->dims[0] == 2 * B) o->kind = MASK_END_START;
    else if (m->rank == 1 && m->dims[0] == 3 * B + 2)
        return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "the (3 * batch + 2) mask form is not implemented on the CPU");
    else if (m->rank == 2 && m->dims[0] == B && m->dims[1] == T) o->kind = MASK_RAW2;
    else if (m->rank == 3 && m->dims[0] == B && m->dims[1] == S && m->dims[2] == T) o->kind = MASK_RAW3;
    else if (m->rank == 4)
        return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "a 4-D attention mask is not implemented on the CPU");
    else
        return amp_kernel_fail(k, AMP_ERR_INPUT,
                             "the mask (rank %d) must be (%lld)%s, (%lld, %lld) or (%lld, %lld, %lld)", m->rank,
                             (long long)B, allow_2b ? ", (2 * batch)" : "", (long long)B, (long long)T, (long long)B,
                             (long long)S, (long long)T);
    return AMP_OK;
}

/* attention_bias (B or 1, N or 1, S, T) of the input's type. */
AmpCode amp_attn_ort_bias_layout(AmpKernelCtx *k, const AmpBuf *ab, int dt, int64_t B, int64_t N, int64_t S, int64_t T,
                                 OrtBias *o) {
    if (!ab) return AMP_OK;
    if (ab->dtype != dt) return amp_kernel_fail(k, AMP_ERR_INPUT, "attention_bias must have the input's type");
    if (ab->rank != 4 || (ab->dims[0] != B && ab->dims[0] != 1) || (ab->dims[1] != N && ab->dims[1] != 1) ||
        ab->dims[2] != S || ab->dims[3] != T)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "attention_bias must be (%lld or 1, %lld or 1, %lld, %lld)",
                             (long long)B, (long long)N, (long long)S, (long long)T);
    o->ab_sh = ab->dims[1] == 1 ? 0 : S * T;
    o->ab_sb = ab->dims[0] == 1 ? 0 : ab->dims[1] * S * T;
    return AMP_OK;
}

AmpCode amp_ms_attention_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    (void)opset;
    OrtAttnAttrs a = {.num_heads = amp_node_attr_int(n, "num_heads", 0),
                      .causal = amp_node_attr_int(n, "unidirectional", 0) != 0,
                      .filter = amp_node_attr_float(n, "mask_filter_value", -10000.0f),
                      .scale = amp_node_attr_float(n, "scale", 0.0f)};
    if (n->op == AMP_OP_Ms_Attention) {
        if (amp_node_attr_int(n, "do_rotary", 0) || amp_node_attr_int(n, "past_present_share_buffer", 0))
            return amp_node_fail(n, st, AMP_ERR_UNSUPPORTED,
                                 "rotary embeddings and shared past/present buffers are not implemented");
        const AmpAttr *qs = amp_node_attr(n, "qkv_hidden_sizes");
        if (qs && qs->type == AMP_ATTR_INTS && qs->n_ints) {
            if (qs->n_ints != 3)
                return amp_node_fail(n, st, AMP_ERR_INPUT, "qkv_hidden_sizes must hold 3 integers");
            a.has_qkv = true;
            for (int i = 0; i < 3; i++) a.qkv[i] = qs->ints[i];
        }
    }
    if (a.num_heads < 1) return amp_node_fail(n, st, AMP_ERR_INPUT, "num_heads must be positive");
    OrtAttnAttrs *p = malloc(sizeof *p);
    if (!p) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    *p = a;
    *attrs = p;
    return AMP_OK;
}

float amp_attn_ms_scale(const OrtAttnAttrs *a, int64_t head) {
    return a->scale != 0.0f ? a->scale : (float)(1.0 / sqrt((double)(head ? head : 1)));
}

/* The bias callback's state before the mask is read: sizes, causality, filter value. */
OrtBias amp_attn_ort_bias_init(const OrtAttnAttrs *a, int64_t B, int64_t S, int64_t T, int64_t P) {
    OrtBias ob;
    memset(&ob, 0, sizeof ob);
    ob.B = B, ob.S = S, ob.T = T, ob.past = P;
    ob.causal = a->causal;
    ob.filter = a->filter;
    return ob;
}

AmpCode amp_attn_ms_dims(AmpKernelCtx *k, const OrtAttnAttrs *a, const AmpBuf *x, const AmpBuf *w,
                                 const AmpBuf *bias, const AmpBuf *past, MsAttnDims *d) {
    int64_t N = a->num_heads;
    if (x->rank != 3 || w->rank != 2 || w->dims[0] != x->dims[2])
        return amp_kernel_fail(k, AMP_ERR_INPUT, "input must be (B, S, D) and weights (D, 3 * hidden)");
    int64_t B = x->dims[0], S = x->dims[1], Din = x->dims[2], Dsum = w->dims[1], Dq, Dk, Dv;
    if (a->has_qkv) {
        Dq = a->qkv[0], Dk = a->qkv[1], Dv = a->qkv[2];
    } else {
        Dq = Dk = Dv = Dsum / 3;
    }
    if (Dq < 1 || Dk != Dq || Dv < 1 || Dq > INT32_MAX || Dv > INT32_MAX || Dq + Dk + Dv != Dsum || Dq % N || Dv % N)
        return amp_kernel_fail(k, AMP_ERR_INPUT,
                             "hidden sizes Q %lld, K %lld, V %lld must be positive multiples of num_heads %lld, Q and "
                             "K equal, summing to weights' %lld columns",
                             (long long)Dq, (long long)Dk, (long long)Dv, (long long)N, (long long)Dsum);
    int64_t H = Dq / N, Hv = Dv / N, P = 0;
    if (bias && (bias->rank != 1 || bias->dims[0] != Dsum))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "bias must be 1-D with %lld entries", (long long)Dsum);
    if (past) {
        if (past->rank != 5 || past->dims[0] != 2 || past->dims[1] != B || past->dims[2] != N || past->dims[4] != H ||
            H != Hv)
            return amp_kernel_fail(k, AMP_ERR_INPUT,
                                 "past must be (2, %lld, %lld, P, %lld), with equal Q/K/V hidden sizes", (long long)B,
                                 (long long)N, (long long)H);
        P = past->dims[3];
    }
    *d = (MsAttnDims){N, B, S, Din, Dsum, Dq, Dk, Dv, H, Hv, P};
    return AMP_OK;
}

/* input (B, S, Din), weights (Din, Dq + Dk + Dv), bias (Dq + Dk + Dv), mask_index, past
 * (2, B, N, P, H), attention_bias -> output (B, S, Dv) [, present (2, B, N, P + S, H)]. */
AmpCode amp_ms_attention_geom(AmpKernelCtx *k, void *geom, bool *made) {
    (void)made;
    MsAttnDims *d = geom;
    const AmpBuf *in[7];
    for (int i = 0; i < 7; i++) in[i] = i < k->n_in ? k->in[i] : NULL;
    const AmpBuf *x = in[0], *w = in[1], *bias = in[2], *past = in[4];
    if (!x || !w) return amp_kernel_fail(k, AMP_ERR_INPUT, "needs inputs input and weights");
    int dt = x->dtype;
    if (!amp_is_f32_family(dt)) return amp_kernel_bad_dtype(k, dt);
    if (w->dtype != dt || (bias && bias->dtype != dt) || (past && past->dtype != dt))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "weights, bias and past must have the input's type");
    if (in[6]) /* past_sequence_length: with a shared past/present buffer (refused at prepare) */
        return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED,
                               "rotary embeddings and shared past/present buffers are not implemented");
    if (k->n_out > 2) return amp_kernel_fail(k, AMP_ERR_INPUT, "has %d outputs; at most 2", k->n_out);
    *d = (MsAttnDims){0};
    AmpCode rc = amp_attn_ms_dims(k, k->attrs, x, w, bias, past, d);
    if (rc) return rc;
    bool pres = k->n_out > 1 && k->node->n_outputs > 1 && k->node->outputs[1];
    if (pres && d->H != d->Hv)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "present needs equal K and V hidden sizes (got %lld and %lld)",
                               (long long)d->Dk, (long long)d->Dv);
    int64_t T = d->P + d->S;
    const int64_t ydims[3] = {d->B, d->S, d->Dv}, pdims[5] = {2, d->B, d->N, T, d->H};
    if ((rc = amp_geom_check(k, 0, dt, 3, ydims))) return rc;
    return amp_geom_check(k, 1, dt, 5, pdims);
}

AmpCode amp_attn_mha_dims(AmpKernelCtx *k, const OrtAttnAttrs *a, const AmpBuf *q, const AmpBuf *kk, const AmpBuf *v,
                        const AmpBuf *bias, const AmpBuf *pk, const AmpBuf *pv, MhaDims *d) {
    int64_t N = a->num_heads;
    if (q->rank != 3 || q->dims[2] % N)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "query must be (B, S, D) with D a multiple of num_heads");
    int64_t B = q->dims[0], S = q->dims[1], D = q->dims[2], H = D / N, L, Dv, Hv, P = 0;
    bool kv4 = kk->rank == 4;
    if (kk->rank == 3 && v->rank == 3 && kk->dims[0] == B && kk->dims[2] == D && v->dims[0] == B &&
        v->dims[1] == kk->dims[1] && v->dims[2] % N == 0) {
        L = kk->dims[1], Dv = v->dims[2], Hv = Dv / N;
    } else if (kv4 && v->rank == 4 && kk->dims[0] == B && kk->dims[1] == N && kk->dims[3] == H && v->dims[0] == B &&
               v->dims[1] == N && v->dims[2] == kk->dims[2]) {
        L = kk->dims[2], Hv = v->dims[3], Dv = N * Hv;
    } else {
        return amp_kernel_fail(k, AMP_ERR_INPUT,
                             "key and value must be (B, L, %lld) and (B, L, Dv), or (B, %lld, L, %lld) "
                             "and (B, %lld, L, Hv)",
                             (long long)D, (long long)N, (long long)H, (long long)N);
    }
    if (bias && (bias->rank != 1 || bias->dims[0] != 2 * D + Dv))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "bias must be 1-D with %lld entries", (long long)(2 * D + Dv));
    if (!pk != !pv) return amp_kernel_fail(k, AMP_ERR_INPUT, "past_key and past_value must be given together");
    if (pk) {
        if (kv4) return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "past_key with 4-D key is not implemented");
        if (pk->rank != 4 || pv->rank != 4 || pk->dims[0] != B || pk->dims[1] != N || pk->dims[3] != H ||
            pv->dims[0] != B || pv->dims[1] != N || pv->dims[2] != pk->dims[2] || pv->dims[3] != Hv)
            return amp_kernel_fail(k, AMP_ERR_INPUT,
                                 "past_key must be (%lld, %lld, P, %lld), past_value (%lld, %lld, P, %lld)",
                                 (long long)B, (long long)N, (long long)H, (long long)B, (long long)N, (long long)Hv);
        P = pk->dims[2];
    }
    *d = (MhaDims){N, B, S, D, H, L, Dv, Hv, P, kv4};
    return AMP_OK;
}

/* The outputs as placed (NULL where not wanted): output (B, S, Dv), present key and value
 * (B, N, T, H) and (B, N, T, Hv), qk (B, N, S, T). */
AmpCode amp_attn_mha_outputs(AmpKernelCtx *k, const MhaDims *d, int64_t T, int dt, AmpBuf **out) {
    const int64_t ydims[3] = {d->B, d->S, d->Dv}, kd[4] = {d->B, d->N, T, d->H}, vd[4] = {d->B, d->N, T, d->Hv},
                  qkd[4] = {d->B, d->N, d->S, T};
    AmpCode rc;
    if ((rc = amp_kernel_outputs(k, 4, out))) return rc;
    for (int i = 0; i < 4; i++) {
        const int64_t *dims = i == 0 ? ydims : i == 1 ? kd : i == 2 ? vd : qkd;
        if (out[i] && (rc = amp_kernel_check_out(k, out[i], dt, i ? 4 : 3, dims))) return rc;
    }
    return AMP_OK;
}
