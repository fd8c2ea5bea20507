/* The attention family below every backend (ops/attn_geom.c): the attributes of ai.onnx
 * Attention and of com.microsoft Attention / MultiHeadAttention parsed at prepare, and the
 * shapes, mask layouts and placed outputs checked when a kernel runs, so that the CPU
 * kernels (kernels/cpu/attention.c, ms_attention.c) and the CUDA ones
 * (kernels/cuda/attention.c, ms_attention.c) take and refuse the same nodes. */
#ifndef AMP_OPS_ATTN_GEOM_H
#define AMP_OPS_ATTN_GEOM_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/ir.h"
#include "ir/kernel.h"
#include "ir/tensor.h"

/* *out = the product of n sizes; false when one is negative or the product is over
 * 2^40 elements (hostile shapes). */
bool amp_attn_size(int n, const int64_t *d, int64_t *out);

/* ---- ai.onnx Attention ---------------------------------------------------------- */

/* ai.onnx Attention's attributes, parsed at prepare. */
typedef struct OnnxAttnAttrs {
    int64_t q_heads, kv_heads; /* q_num_heads, kv_num_heads: read for 3-D inputs only */
    int qk_mode;               /* qk_matmul_output_mode, 0..3 */
    bool causal;               /* is_causal */
    bool has_scale;            /* scale given (a float); else 1 / sqrt(head size) */
    float scale, softcap;
} OnnxAttnAttrs;
/* Its prepare function (AmpKernelPrepareFn) on every backend. */
AmpCode amp_onnx_attention_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);

typedef struct AttnShape {
    bool is3d;
    int64_t B, Hq, Hkv, S, L, P, T, D, Dv;
} AttnShape;

/* ai.onnx Attention's geometry (ops/geom.h): Q, K, V and the past's sizes (T = P + L
 * keys), checked against each other and the attributes; attn_mask's layout where given:
 * its last dim Tm at most T (a shorter one is padded with -inf), ms its element strides
 * over (B, Hq, S, Tm), 0 along broadcast dims (right-aligned over the first three); the
 * outputs checked against the shapes the kernels write (Y, present_key, present_value,
 * qk_matmul_output; the presents double as the K/V arrays the core reads). Its
 * AmpKernelGeomFn: AMP_ERR_INPUT for Q, K or V missing, shapes that disagree, a mask
 * that does not broadcast or more than 4 outputs; AMP_ERR_UNSUPPORTED for sizes over the
 * kernels' bounds. */
typedef struct AmpOnnxAttnGeom {
    AttnShape s;
    int64_t Tm, ms[4];
} AmpOnnxAttnGeom;
AmpCode amp_onnx_attention_geom(AmpKernelCtx *k, void *geom, bool *made);


/* ---- com.microsoft Attention / MultiHeadAttention ----------------------------- */

typedef enum MaskKind {
    MASK_NONE,
    MASK_END,       /* (B): valid key count; keys at or after it are masked (right padding) */
    MASK_END_START, /* (2B): end positions, then start positions (left and right padding) */
    MASK_RAW2,      /* (B, T): 1 attend, 0 masked */
    MASK_RAW3       /* (B, S, T) */
} MaskKind;

typedef struct OrtBias {
    MaskKind kind;
    const AmpBuf *mask; /* integer mask, read with amp_buf_get_i64 */
    float filter;       /* mask_filter_value */
    bool causal;
    int64_t past;    /* key j is causal-masked for query i when j > i + past */
    const float *ab; /* attention_bias (B or 1, N or 1, S, T), or NULL */
    int64_t ab_sb, ab_sh;
    int64_t B, S, T;
} OrtBias;

/* com.microsoft Attention's and MultiHeadAttention's attributes. */
typedef struct OrtAttnAttrs {
    int64_t num_heads; /* >= 1 */
    bool causal;       /* unidirectional */
    float filter;      /* mask_filter_value */
    float scale;       /* 0: 1 / sqrt(head size) */
    bool has_qkv;      /* Attention: qkv_hidden_sizes given (3 entries); else thirds */
    int64_t qkv[3];
} OrtAttnAttrs;
/* Their prepare function (AmpKernelPrepareFn) on every backend. */
AmpCode amp_ms_attention_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);

/* Attention's sizes: input (B, S, Din), weights (Din, Dq + Dk + Dv), N heads of H (Q, K)
 * and Hv (V), a past of P steps. */
typedef struct MsAttnDims {
    int64_t N, B, S, Din, Dsum, Dq, Dk, Dv, H, Hv, P;
} MsAttnDims;

/* MultiHeadAttention's sizes: query (B, S, D), N heads of H; key and value of L steps,
 * (B, L, D) and (B, L, Dv) or per head (kv4: (B, N, L, H) and (B, N, L, Hv)); a past of P. */
typedef struct MhaDims {
    int64_t N, B, S, D, H, L, Dv, Hv, P;
    bool kv4;
} MhaDims;

/* The bias state before the mask is read: sizes, causality, filter value. */
OrtBias amp_attn_ort_bias_init(const OrtAttnAttrs *a, int64_t B, int64_t S, int64_t T, int64_t P);
/* 1 / sqrt(head) unless the scale attribute is given. */
float amp_attn_ms_scale(const OrtAttnAttrs *a, int64_t head);
/* Classifies the mask for B, S, T into o->kind, o->mask (MultiHeadAttention: no (2B)). */
AmpCode amp_attn_ort_mask_kind(AmpKernelCtx *k, const AmpBuf *m, int64_t B, int64_t S, int64_t T, bool allow_2b,
                               OrtBias *o);
/* attention_bias (B or 1, N or 1, S, T) of type dt: its strides into o. */
AmpCode amp_attn_ort_bias_layout(AmpKernelCtx *k, const AmpBuf *ab, int dt, int64_t B, int64_t N, int64_t S, int64_t T,
                                 OrtBias *o);
/* com.microsoft Attention's geometry (ops/geom.h), a MsAttnDims: its inputs checked for
 * both backends (input and weights given, weights/bias/past of the input's float type, no
 * past_sequence_length, at most 2 outputs), its sizes (amp_attn_ms_dims), and the
 * outputs: Y (B, S, Dv), present (2, B, N, T, H) where listed, which needs H == Hv (it
 * holds K then V in (B, N, T, H) halves). Its AmpKernelGeomFn: AMP_ERR_INPUT /
 * AMP_ERR_UNSUPPORTED where one of those does not hold. */
AmpCode amp_ms_attention_geom(AmpKernelCtx *k, void *geom, bool *made);
/* Attention's and MultiHeadAttention's sizes, checked as the CPU kernels check them. */
AmpCode amp_attn_ms_dims(AmpKernelCtx *k, const OrtAttnAttrs *a, const AmpBuf *x, const AmpBuf *w, const AmpBuf *bias,
                         const AmpBuf *past, MsAttnDims *d);
AmpCode amp_attn_mha_dims(AmpKernelCtx *k, const OrtAttnAttrs *a, const AmpBuf *q, const AmpBuf *kk, const AmpBuf *v,
                          const AmpBuf *bias, const AmpBuf *pk, const AmpBuf *pv, MhaDims *d);
/* MultiHeadAttention's outputs as placed, checked: output, present key/value, qk. */
AmpCode amp_attn_mha_outputs(AmpKernelCtx *k, const MhaDims *d, int64_t T, int dt, AmpBuf **out);

#endif
