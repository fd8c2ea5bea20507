/* com.microsoft Attention (the fused QKV projection, then attention) and
 * MultiHeadAttention on CUDA, with onnxruntime's CPU semantics as kernels/cpu/
 * ms_attention.c has them: its attribute parsing (amp_ms_attention_prepare), shape
 * checks and mask classification are reused. The projection is one cuBLASLt product
 * with the bias in its epilogue; Q, K, V go to the heads layout (K and V after the past:
 * the present output, or scratch), MultiHeadAttention's biases are added there; the
 * scores, softmax and P V are attention.c's core with onnxruntime's bias (mask_index /
 * key_padding_mask adding mask_filter_value, -FLT_MAX past the causal frontier,
 * attention_bias). Masks of int32, int64 or bool. Refused (the CPU runs them): rotary
 * and shared past/present buffers (as on the CPU), packed QKV / KV, qk output. */
#include <cuda_runtime.h>
#include <string.h>

#include "kernels/cuda/attention.h"
#include "ops/geom.h"
#include "kernels/cuda/gemm.h"

/* attention.cu reads the mask kind by these numbers (its MK_ constants). */
_Static_assert(MASK_NONE == 0 && MASK_END == 1 && MASK_END_START == 2 && MASK_RAW2 == 3 && MASK_RAW3 == 4,
               "attention.cu's mask kinds");

static size_t dt_size(int dt) {
    return dt == AMP_DT_FLOAT ? 4 : 2;
}

static bool mask_dtype_ok(int dt) {
    return dt == AMP_DT_INT32 || dt == AMP_DT_INT64 || dt == AMP_DT_BOOL;
}

/* onnxruntime's bias for the softmax, from the CPU's classification. */
static AmpCudaAttnSoftmax ort_softmax(const OrtAttnAttrs *a, const OrtBias *ob, const AmpBuf *ab, int64_t P) {
    return (AmpCudaAttnSoftmax){.ort = 1, .ort_kind = (int)ob->kind, .filter = a->filter, .causal = a->causal,
                                .offset = P, .mask = ob->mask ? ob->mask->data : NULL,
                                .mask_dtype = ob->mask ? ob->mask->dtype : 0, .ab = ab ? ab->data : NULL,
                                .ab_sb = ob->ab_sb, .ab_sh = ob->ab_sh};
}

/* The mask's classification (the CPU's), attention_bias' layout, the type CUDA reads. */
static AmpCode ort_mask(AmpKernelCtx *k, const AmpBuf *mask, const AmpBuf *ab, int dt, int64_t N, bool allow_2b,
                        OrtBias *ob) {
    AmpCode rc = amp_attn_ort_mask_kind(k, mask, ob->B, ob->S, ob->T, allow_2b, ob);
    if (!rc) rc = amp_attn_ort_bias_layout(k, ab, dt, ob->B, N, ob->S, ob->T, ob);
    if (!rc && mask && !mask_dtype_ok(mask->dtype))
        return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "a mask of type %s is not implemented on CUDA",
                               amp_dtype_name(mask->dtype));
    return rc;
}

/* The plan of s in the scratch, or the failure naming the bytes it needs. */
static AmpCode plan(AmpKernelCtx *k, const AttnShape *s, size_t esz, AmpCudaAttnNeeds w, char **ws,
                    AmpCudaAttnPlan *p) {
    size_t avail;
    *ws = amp_cuda_attn_scratch(k, &avail);
    int64_t n;
    const int64_t sz[4] = {s->B, s->Hq, s->S, s->T > s->D ? s->T : s->D};
    if (!amp_attn_size(4, sz, &n) || !amp_cuda_attn_plan(s, esz, w, avail, p))
        return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "attention needs %zu bytes of scratch; the workspace has %zu",
                               p->bytes, avail);
    return AMP_OK;
}

static AmpCode heads(AmpKernelCtx *k, size_t esz, void *dst, const void *past, int64_t P, const void *src,
                     const AttnShape *s, int64_t L, int64_t Dh, int64_t row, int64_t off, const char *what) {
    return amp_cuda_check(k, amp_cuda_attn_heads_launch(esz, dst, past, P, src, s->B, s->Hq, L, Dh, row, off,
                                                        amp_cuda_ctx(k)->stream),
                          what);
}

/* Y (B, S, Hq * Dv) from the heads-layout yh, when Y is wanted. */
static AmpCode merge(AmpKernelCtx *k, size_t esz, AmpBuf *y, const void *yh, const AttnShape *s) {
    if (!y) return AMP_OK;
    return amp_cuda_check(k, amp_cuda_attn_merge_launch(esz, y->data, yh, s->B, s->Hq, s->S, s->Dv,
                                                        amp_cuda_ctx(k)->stream),
                          "Y's heads");
}

/* ---- com.microsoft Attention ------------------------------------------------------- */

/* qkv (B * S, Dsum) = input (B * S, Din) @ weights + bias. */
static AmpCode project(AmpKernelCtx *k, const MsAttnDims *d, const AmpBuf *x, const AmpBuf *w, const AmpBuf *bias,
                       void *qkv) {
    if (d->B * d->S == 0) return AMP_OK;
    if (d->Din == 0)
        return amp_cuda_check(k, amp_cuda_gemm_fill_c(qkv, bias ? bias->data : NULL, x->dtype, d->B * d->S, d->Dsum,
                                                      0, 1, 1.0f, amp_cuda_ctx(k)->stream),
                              "the projection's bias");
    AmpCudaMm mm = {.dtype = x->dtype, .m = d->B * d->S, .n = d->Dsum, .k = d->Din, .batch = 1, .a = x->data,
                    .b = w->data, .bias = bias ? bias->data : NULL, .y = qkv, .alpha = 1.0f,
                    .ws_bytes = AMP_CUDA_ATTN_GEMM_WS};
    return amp_cuda_mm(k, &mm);
}

AmpCode amp_cuda_ms_attention(AmpKernelCtx *k) {
    const OrtAttnAttrs *a = k->attrs;
    if (!a) return amp_kernel_fail(k, AMP_ERR_INTERNAL, "attributes not prepared");
    MsAttnDims own;
    const MsAttnDims *g; /* amp_ms_attention_geom (ops/attn_geom.h): the CPU kernel's checks, sizes, outputs */
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&g);
    if (rc) return rc;
    const MsAttnDims d = *g;
    const AmpBuf *in[7];
    for (int i = 0; i < 7; i++) in[i] = i < k->n_in ? k->in[i] : NULL;
    const AmpBuf *x = in[0], *w = in[1], *bias = in[2], *mask = in[3], *past = in[4], *ab = in[5];
    int dt = x->dtype;
    int64_t T = d.P + d.S;
    OrtBias ob = amp_attn_ort_bias_init(a, d.B, d.S, T, d.P);
    if ((rc = ort_mask(k, mask, ab, dt, d.N, true, &ob))) return rc;
    AmpBuf *out[2];
    if ((rc = amp_kernel_outputs(k, 2, out))) return rc;
    AttnShape s = {.B = d.B, .Hq = d.N, .Hkv = d.N, .S = d.S, .L = d.S, .P = d.P, .T = T, .D = d.H, .Dv = d.Hv};
    size_t esz = dt_size(dt);
    AmpCudaAttnNeeds need = {.q = true, .k = !out[1], .v = !out[1], .y = true, .qkv = (uint64_t)(d.B * d.S * d.Dsum)};
    AmpCudaAttnPlan p;
    char *ws;
    if ((rc = plan(k, &s, esz, need, &ws, &p)) || (rc = project(k, &d, x, w, bias, ws + p.qkv))) return rc;
    char *kd = out[1] ? out[1]->data : ws + p.k;
    char *vd = out[1] ? (char *)out[1]->data + (size_t)(d.B * d.N * T * d.H) * esz : ws + p.v;
    const char *pk = past ? past->data : NULL;
    const char *pv = past ? pk + (size_t)(d.B * d.N * d.P * d.H) * esz : NULL;
    rc = heads(k, esz, ws + p.q, NULL, 0, ws + p.qkv, &s, d.S, d.H, d.Dsum, 0, "Q's heads");
    if (!rc) rc = heads(k, esz, kd, pk, d.P, ws + p.qkv, &s, d.S, d.H, d.Dsum, d.Dq, "K's heads");
    if (!rc) rc = heads(k, esz, vd, pv, d.P, ws + p.qkv, &s, d.S, d.Hv, d.Dsum, d.Dq + d.Dk, "V's heads");
    if (rc || d.S == 0) return rc; /* no query: Y is empty */
    void *yh = ws + p.y;
    rc = amp_cuda_attn_core(k, &s, dt, amp_attn_ms_scale(a, d.H), ort_softmax(a, &ob, ab, d.P), ws + p.q, kd, vd, yh,
                            ws, &p);
    return rc ? rc : merge(k, esz, out[0], yh, &s);
}

/* ---- com.microsoft MultiHeadAttention ---------------------------------------------- */

/* K or V into the heads layout (the past first) at dst, plus its part of bias. */
static AmpCode mha_kv(AmpKernelCtx *k, const MhaDims *d, const AttnShape *s, void *dst, const AmpBuf *past,
                      const AmpBuf *x, const AmpBuf *bias, int64_t bias_off, int64_t Dh, const char *what) {
    size_t esz = dt_size(x->dtype);
    AmpCode rc = heads(k, esz, dst, past ? past->data : NULL, d->P, x->data, s, d->L, Dh, d->kv4 ? 0 : d->N * Dh, 0,
                       what);
    if (rc || !bias || d->kv4) return rc; /* 4-D (projected) key/value take no bias, as in onnxruntime */
    return amp_cuda_check(k, amp_cuda_attn_head_bias_launch(x->dtype, dst, (const char *)bias->data + bias_off * esz,
                                                            d->B, d->N, s->T, d->P, Dh, amp_cuda_ctx(k)->stream),
                          what);
}

/* The checks of the CPU kernel before the shapes. */
static AmpCode mha_inputs(AmpKernelCtx *k, const AmpBuf *const *in) {
    const AmpBuf *q = in[0], *kk = in[1], *v = in[2];
    if (!q) return amp_kernel_fail(k, AMP_ERR_INPUT, "needs input query");
    int dt = q->dtype;
    if (!amp_cuda_is_float(dt)) return amp_kernel_bad_dtype(k, dt);
    if (in[8] || in[9])
        return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "past_sequence_length and cache_indirection are not implemented");
    if (q->rank == 5 || (kk && kk->rank == 5))
        return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "packed QKV / KV inputs are not implemented");
    if (!kk || !v) return amp_kernel_fail(k, AMP_ERR_INPUT, "needs key and value");
    for (int i = 1; i < 8; i++)
        if (i != 4 && i != 5 && in[i] && in[i]->dtype != dt)
            return amp_kernel_fail(k, AMP_ERR_INPUT, "key, value, bias and past must have query's type");
    if (k->n_out > 4) return amp_kernel_fail(k, AMP_ERR_INPUT, "has %d outputs; at most 4", k->n_out);
    return AMP_OK;
}

AmpCode amp_cuda_ms_mha(AmpKernelCtx *k) {
    const OrtAttnAttrs *a = k->attrs;
    if (!a) return amp_kernel_fail(k, AMP_ERR_INTERNAL, "attributes not prepared");
    const AmpBuf *in[10] = {NULL};
    for (int i = 0; i < 10 && i < k->n_in; i++) in[i] = k->in[i];
    AmpCode rc = mha_inputs(k, in);
    if (rc) return rc;
    const AmpBuf *q = in[0], *kk = in[1], *v = in[2], *bias = in[3], *mask = in[4], *ab = in[5];
    int dt = q->dtype;
    MhaDims d = {0};
    if ((rc = amp_attn_mha_dims(k, a, q, kk, v, bias, in[6], in[7], &d))) return rc;
    int64_t T = d.P + d.L;
    OrtBias ob = amp_attn_ort_bias_init(a, d.B, d.S, T, d.P);
    if ((rc = ort_mask(k, mask, ab, dt, d.N, false, &ob))) return rc;
    AmpBuf *out[4];
    if ((rc = amp_attn_mha_outputs(k, &d, T, dt, out))) return rc;
    if (out[3]) return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "the qk output is not implemented on CUDA");
    AttnShape s = {.B = d.B, .Hq = d.N, .Hkv = d.N, .S = d.S, .L = d.L, .P = d.P, .T = T, .D = d.H, .Dv = d.Hv};
    size_t esz = dt_size(dt);
    AmpCudaAttnNeeds need = {.q = true, .k = !out[1] && !d.kv4, .v = !out[2] && !d.kv4, .y = true};
    AmpCudaAttnPlan p;
    char *ws;
    if ((rc = plan(k, &s, esz, need, &ws, &p))) return rc;
    /* Q's heads plus its bias; K and V: copied (the cache, a bias) unless 4-D read in place */
    rc = heads(k, esz, ws + p.q, NULL, 0, q->data, &s, d.S, d.H, d.D, 0, "Q's heads");
    if (!rc && bias)
        rc = amp_cuda_check(k, amp_cuda_attn_head_bias_launch(dt, ws + p.q, bias->data, d.B, d.N, d.S, 0, d.H,
                                                              amp_cuda_ctx(k)->stream),
                            "Q's bias");
    const void *kh = kk->data, *vh = v->data;
    void *kd = out[1] ? out[1]->data : !d.kv4 ? ws + p.k : NULL, *vd = out[2] ? out[2]->data : !d.kv4 ? ws + p.v : NULL;
    if (!rc && kd) rc = mha_kv(k, &d, &s, kd, in[6], kk, bias, d.D, d.H, "K's heads"), kh = kd;
    if (!rc && vd) rc = mha_kv(k, &d, &s, vd, in[7], v, bias, 2 * d.D, d.Hv, "V's heads"), vh = vd;
    if (rc || d.S == 0) return rc; /* no query: Y is empty */
    void *yh = ws + p.y;
    if (T == 0) /* no keys: every output row is zero */
        return out[0] && out[0]->nelem
                   ? amp_cuda_check(k, cudaMemsetAsync(out[0]->data, 0, out[0]->nelem * esz, amp_cuda_ctx(k)->stream),
                                    "Y")
                   : AMP_OK;
    rc = amp_cuda_attn_core(k, &s, dt, amp_attn_ms_scale(a, d.H), ort_softmax(a, &ob, ab, d.P), ws + p.q, kh, vh, yh,
                            ws, &p);
    return rc ? rc : merge(k, esz, out[0], yh, &s);
}

/* ---- the supports predicates -------------------------------------------------------- */

/* The inputs in `same` (by index) of the first one's float type where present; the mask
 * at mask_at int32, int64 or bool; nothing at or past `none_from`. */
static bool float_inputs(const AmpNode *n, const int *in_dtypes, const int *same, int n_same, int mask_at,
                         int none_from) {
    if (n->n_inputs < 1 || !n->inputs[0] || !amp_cuda_is_float(in_dtypes[0])) return false;
    for (int i = 0; i < n_same; i++)
        if (same[i] < n->n_inputs && n->inputs[same[i]] && in_dtypes[same[i]] != in_dtypes[0]) return false;
    if (mask_at < n->n_inputs && n->inputs[mask_at] && !mask_dtype_ok(in_dtypes[mask_at])) return false;
    for (int i = none_from; i < n->n_inputs; i++)
        if (n->inputs[i]) return false;
    return true;
}

/* input, weights, bias, past, attention_bias of one float type; mask_index int32, int64
 * or bool; no past_sequence_length, rotary or shared buffer. */
bool amp_cuda_supports_ms_attention(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    (void)opset;
    static const int same[4] = {1, 2, 4, 5};
    return n->n_inputs >= 2 && n->inputs[1] && float_inputs(n, in_dtypes, same, 4, 3, 6) &&
           !amp_node_attr_int(n, "do_rotary", 0) && !amp_node_attr_int(n, "past_present_share_buffer", 0);
}

/* query, key, value (not packed: key present and not 5-D), bias, attention_bias and the
 * past of one float type; key_padding_mask int32, int64 or bool; no
 * past_sequence_length or cache_indirection; no qk output. */
bool amp_cuda_supports_ms_mha(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    (void)opset;
    static const int same[6] = {1, 2, 3, 5, 6, 7};
    if (n->n_inputs < 3 || !n->inputs[1] || !n->inputs[2] || !float_inputs(n, in_dtypes, same, 6, 4, 8)) return false;
    if (n->inputs[1]->type.rank == 5 || n->inputs[0]->type.rank == 5) return false;
    return !(n->n_outputs > 3 && n->outputs[3]);
}
