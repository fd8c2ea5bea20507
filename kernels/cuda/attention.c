/* ai.onnx Attention (opset 23) on CUDA: MHA, GQA and MQA, 3-D or 4-D inputs, causal,
 * bool or additive attn_mask broadcasting, softcap, scale, past/present KV. The attributes
 * (amp_onnx_attention_prepare) and the geometry (amp_onnx_attention_geom: sizes, mask
 * layout, outputs) are the CPU kernel's too (ops/attn_geom.h). Per node:
 *   1. Q (3-D), K and V (3-D, or with a past, or when present_* is wanted) into the heads
 *      layout: scratch, or the present outputs (the cache concatenation);
 *   2. scores (float32) = scale * Q K^T, one cuBLASLt strided batch over (batch, kv
 *      head), the rep = Hq / Hkv query heads of a kv head as rep * S rows;
 *   3. the softmax kernel: softcap, mask, causal frontier, softmax into P (the input's
 *      type; float32: in place);
 *   4. Y = P V, batched the same way; merged back to (B, S, Hq * Dv) for 3-D inputs.
 * Scratch is the session's workspace past the part cuBLASLt keeps (AMP_CUDA_ATTN_GEMM_WS);
 * nothing is allocated. qk_matmul_output and nonpad_kv_seqlen are the CPU's (refused by
 * the supports predicate). */
#include <cuda_runtime.h>
#include <math.h>
#include <string.h>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/gemm.h"
#include "ops/geom.h"

static size_t dt_size(int dt) {
    return dt == AMP_DT_FLOAT ? 4 : 2;
}

/* ---- the scratch plan --------------------------------------------------------------- */

static void take(size_t *at, size_t *off, size_t bytes) {
    *at = *off;
    *off += (bytes + 255) / 256 * 256;
}

AmpCudaAttnNeeds amp_cuda_attn_onnx_needs(const AttnShape *s, bool present_k, bool present_v, bool y_wanted) {
    bool kv_direct = !s->is3d && s->P == 0;
    return (AmpCudaAttnNeeds){.q = s->is3d, .k = !present_k && !kv_direct, .v = !present_v && !kv_direct,
                              .y = s->is3d || !y_wanted};
}

bool amp_cuda_attn_plan(const AttnShape *s, size_t esz, AmpCudaAttnNeeds w, size_t avail, AmpCudaAttnPlan *p) {
    size_t off = 0, none = AMP_CUDA_ATTN_NO_SCRATCH;
    uint64_t nq = (uint64_t)(s->B * s->Hq * s->S), nkv = (uint64_t)(s->B * s->Hkv * s->T);
    uint64_t nsc = nq * (uint64_t)s->T;
    *p = (AmpCudaAttnPlan){none, none, none, none, none, none, none, 0};
    if (w.qkv) take(&p->qkv, &off, w.qkv * esz);
    if (w.q) take(&p->q, &off, nq * (uint64_t)s->D * esz);
    if (w.k) take(&p->k, &off, nkv * (uint64_t)s->D * esz);
    if (w.v) take(&p->v, &off, nkv * (uint64_t)s->Dv * esz);
    if (w.y) take(&p->y, &off, nq * (uint64_t)s->Dv * esz);
    take(&p->scores, &off, nsc * 4);
    p->p = p->scores;
    if (esz != 4) take(&p->p, &off, nsc * esz);
    p->bytes = off;
    return off <= avail;
}

char *amp_cuda_attn_scratch(AmpKernelCtx *k, size_t *avail) {
    AmpCudaCtx *c = amp_cuda_ctx(k);
    *avail = c->workspace_bytes > AMP_CUDA_ATTN_GEMM_WS ? c->workspace_bytes - AMP_CUDA_ATTN_GEMM_WS : 0;
    return (char *)c->workspace + AMP_CUDA_ATTN_GEMM_WS;
}

/* ---- the supports predicate ------------------------------------------------------------- */

/* Q, K, V (and the past) of one float type; attn_mask bool or of Q's type; no
 * nonpad_kv_seqlen, no qk_matmul_output, no sliding window (the CPU refuses it too). */
bool amp_cuda_supports_attention(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    (void)opset;
    if (n->n_inputs < 3 || !n->inputs[0] || !n->inputs[1] || !n->inputs[2]) return false;
    int dt = in_dtypes[0];
    if (!amp_cuda_is_float(dt) || in_dtypes[1] != dt || in_dtypes[2] != dt) return false;
    if (n->n_inputs > 3 && n->inputs[3] && in_dtypes[3] != AMP_DT_BOOL && in_dtypes[3] != dt) return false;
    for (int i = 4; i < 6 && i < n->n_inputs; i++)
        if (n->inputs[i] && in_dtypes[i] != dt) return false;
    if (n->n_inputs > 6 && n->inputs[6]) return false;
    if (n->n_outputs > 3 && n->outputs[3]) return false;
    return amp_node_attr_int(n, "left_window_size", -1) < 0 && amp_node_attr_int(n, "right_window_size", -1) < 0;
}

/* ---- the kernel ------------------------------------------------------------------------- */

/* The node's checked inputs and outputs. */
typedef struct AttnIo {
    const AmpBuf *q, *k, *v, *mask, *pk, *pv;
    AmpBuf *out[4];
    AttnShape s;
    int64_t Tm, ms[4];
} AttnIo;

static AmpCode attn_io(AmpKernelCtx *k, AttnIo *io) {
    memset(io, 0, sizeof *io);
    AmpOnnxAttnGeom own;
    const AmpOnnxAttnGeom *g; /* amp_onnx_attention_geom (ops/attn_geom.h): sizes, mask layout, outputs */
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&g);
    if (rc) return rc;
    const AmpBuf *in[7] = {NULL};
    for (int i = 0; i < 7 && i < k->n_in; i++) in[i] = k->in[i];
    io->q = in[0], io->k = in[1], io->v = in[2], io->mask = in[3], io->pk = in[4], io->pv = in[5];
    int dt = io->q->dtype;
    if (!amp_cuda_is_float(dt)) return amp_kernel_bad_dtype(k, dt);
    if (io->k->dtype != dt || io->v->dtype != dt || (io->pk && io->pk->dtype != dt) || (io->pv && io->pv->dtype != dt))
        return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "K, V and the past must have Q's type on CUDA");
    if (in[6]) return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "nonpad_kv_seqlen is not implemented on CUDA");
    if (io->mask && io->mask->dtype != AMP_DT_BOOL && io->mask->dtype != dt)
        return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "attn_mask of type %s is not implemented on CUDA",
                               amp_dtype_name(io->mask->dtype));
    io->s = g->s;
    io->Tm = g->Tm;
    memcpy(io->ms, g->ms, sizeof io->ms);
    rc = amp_kernel_outputs(k, 4, io->out);
    if (!rc && io->out[3])
        return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "qk_matmul_output is not implemented on CUDA");
    return rc;
}

/* K or V into the heads layout at dst: the past, then the new rows. */
static AmpCode to_heads(AmpKernelCtx *k, const AttnIo *io, void *dst, const AmpBuf *past, const AmpBuf *x, int64_t H,
                        int64_t Dh, const char *what) {
    const AttnShape *s = &io->s;
    int err = amp_cuda_attn_heads_launch(dt_size(x->dtype), dst, past ? past->data : NULL, s->P, x->data, s->B, H,
                                         s->L, Dh, s->is3d ? H * Dh : 0, 0, amp_cuda_ctx(k)->stream);
    return amp_cuda_check(k, err, what);
}

AmpCode amp_cuda_attn_core(AmpKernelCtx *k, const AttnShape *s, int dt, float scale, AmpCudaAttnSoftmax sm,
                           const void *qh, const void *kh, const void *vh, void *yh, char *scratch,
                           const AmpCudaAttnPlan *p) {
    AmpCudaCtx *c = amp_cuda_ctx(k);
    int64_t rep = s->Hq / s->Hkv, G = s->B * s->Hkv;
    float *scores = (float *)(scratch + p->scores);
    void *pm = scratch + p->p;
    AmpCode rc;
    if (s->D == 0) {
        rc = amp_cuda_check(k, cudaMemsetAsync(scores, 0, (size_t)(s->B * s->Hq * s->S * s->T) * 4, c->stream),
                            "zeroing the scores");
    } else {
        AmpCudaMm qk = {.dtype = dt, .ydtype = AMP_DT_FLOAT, .tb = true, .m = rep * s->S, .n = s->T, .k = s->D,
                        .batch = G, .lda = s->D, .ldb = s->D, .ldy = s->T, .sa = rep * s->S * s->D,
                        .sb = s->T * s->D, .sy = rep * s->S * s->T, .a = qh, .b = kh, .y = scores, .alpha = scale,
                        .ws_bytes = AMP_CUDA_ATTN_GEMM_WS};
        rc = amp_cuda_mm(k, &qk);
    }
    if (rc) return rc;
    sm.rows = s->B * s->Hq * s->S, sm.Hq = s->Hq, sm.S = s->S, sm.T = s->T, sm.B = s->B;
    sm.p_dtype = dt, sm.ldp = s->T;
    if ((rc = amp_cuda_check(k, amp_cuda_attn_softmax_launch(scores, pm, &sm, c->stream), "attention softmax")))
        return rc;
    AmpCudaMm pv = {.dtype = dt, .ydtype = dt, .m = rep * s->S, .n = s->Dv, .k = s->T, .batch = G, .lda = s->T,
                    .ldb = s->Dv, .ldy = s->Dv, .sa = rep * s->S * s->T, .sb = s->T * s->Dv,
                    .sy = rep * s->S * s->Dv, .a = pm, .b = vh, .y = yh, .alpha = 1.0f,
                    .ws_bytes = AMP_CUDA_ATTN_GEMM_WS};
    return amp_cuda_mm(k, &pv);
}

/* ai.onnx's bias for the softmax: mask, causal frontier, softcap. */
static AmpCudaAttnSoftmax onnx_bias(const OnnxAttnAttrs *a, const AttnIo *io) {
    AmpCudaAttnSoftmax sm = {.softcap = a->softcap, .causal = a->causal, .has_bias = io->mask || a->causal,
                             .zero_masked_rows = 1, .offset = io->s.P, .mask = io->mask ? io->mask->data : NULL,
                             .mask_dtype = io->mask ? io->mask->dtype : 0, .Tm = io->Tm};
    memcpy(sm.ms, io->ms, sizeof sm.ms);
    return sm;
}

AmpCode amp_cuda_attention(AmpKernelCtx *k) {
    const OnnxAttnAttrs *a = k->attrs;
    if (!a) return amp_kernel_fail(k, AMP_ERR_INTERNAL, "attributes not prepared");
    AttnIo io;
    AmpCode rc = attn_io(k, &io);
    if (rc) return rc;
    const AttnShape *s = &io.s;
    AmpCudaCtx *c = amp_cuda_ctx(k);
    size_t esz = dt_size(io.q->dtype), avail;
    AmpCudaAttnNeeds w = amp_cuda_attn_onnx_needs(s, io.out[1] != NULL, io.out[2] != NULL, io.out[0] != NULL);
    AmpCudaAttnPlan p;
    char *ws = amp_cuda_attn_scratch(k, &avail);
    if (!amp_cuda_attn_plan(s, esz, w, avail, &p))
        return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "attention needs %zu bytes of scratch; the workspace has %zu",
                               p.bytes, avail);
    const void *qh = io.q->data, *kh = io.k->data, *vh = io.v->data;
    void *yh = p.y != AMP_CUDA_ATTN_NO_SCRATCH ? ws + p.y : io.out[0]->data;
    if (s->is3d) {
        rc = amp_cuda_check(k, amp_cuda_attn_heads_launch(esz, ws + p.q, NULL, 0, io.q->data, s->B, s->Hq, s->S, s->D,
                                                          s->Hq * s->D, 0, c->stream),
                            "Q's heads");
        qh = ws + p.q;
    }
    void *kd = io.out[1] ? io.out[1]->data : p.k != AMP_CUDA_ATTN_NO_SCRATCH ? ws + p.k : NULL;
    void *vd = io.out[2] ? io.out[2]->data : p.v != AMP_CUDA_ATTN_NO_SCRATCH ? ws + p.v : NULL;
    if (!rc && kd) rc = to_heads(k, &io, kd, io.pk, io.k, s->Hkv, s->D, "K's heads"), kh = kd;
    if (!rc && vd) rc = to_heads(k, &io, vd, io.pv, io.v, s->Hkv, s->Dv, "V's heads"), vh = vd;
    if (rc) return rc;
    size_t ybytes = (size_t)(s->B * s->Hq * s->S * s->Dv) * esz;
    if (s->S == 0 || s->T == 0) /* no keys: every output row is zero */
        return io.out[0] && ybytes ? amp_cuda_check(k, cudaMemsetAsync(io.out[0]->data, 0, ybytes, c->stream), "Y")
                                   : AMP_OK;
    float scale = a->has_scale ? a->scale : (float)(1.0 / sqrt((double)(s->D ? s->D : 1)));
    if ((rc = amp_cuda_attn_core(k, s, io.q->dtype, scale, onnx_bias(a, &io), qh, kh, vh, yh, ws, &p))) return rc;
    if (s->is3d && io.out[0])
        rc = amp_cuda_check(k, amp_cuda_attn_merge_launch(esz, io.out[0]->data, yh, s->B, s->Hq, s->S, s->Dv,
                                                          c->stream),
                            "Y's heads");
    return rc;
}
