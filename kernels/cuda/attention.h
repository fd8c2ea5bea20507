/* The attention family on CUDA: ai.onnx Attention (attention.c: the node-level kernel,
 * its supports predicate, the scratch plan and the shared core), com.microsoft Attention
 * and MultiHeadAttention (ms_attention.c), and attention.cu: the softmax and the head
 * layout kernels. Q K^T and P V are cuBLASLt's strided-batched products (gemm.c's
 * amp_cuda_mm), a batch entry per (batch, kv head) with the query heads that share it
 * stacked as rows (grouped-query attention without copying K or V). */
#ifndef AMP_CUDA_ATTENTION_H
#define AMP_CUDA_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The softmax pass over the float32 scores (rows, T), row r for batch r / (Hq * S),
 * query head r / S % Hq, query position r % S: softcap, then the additive bias, then
 * softmax in float32 into P (p_dtype, row stride ldp). A row with no finite maximum, or
 * (zero_masked_rows, has_bias) every key at -inf, becomes zeros, as
 * kernels/cpu/attention.c does. The bias:
 *   ai.onnx (ort 0): the mask read at the row's broadcast position (bool: false -> -inf;
 *     floats: added), -inf past its last dim Tm; -inf past the causal frontier
 *     j > i + offset;
 *   com.microsoft (ort 1, the CPU's ort_bias): mask_index of kind ort_kind (MaskKind:
 *     end / end+start positions per batch, (B, T) or (B, S, T) 0/1 entries; int32, int64
 *     or bool) adds filter where masked; the causal frontier sets -FLT_MAX; then
 *     attention_bias (p_dtype, (B or 1, Hq or 1, S, T) by ab_sb, ab_sh) is added. */
typedef struct AmpCudaAttnSoftmax {
    int64_t rows, Hq, S, T;
    float softcap;           /* > 0: scores = softcap * tanh(scores / softcap) */
    int causal, has_bias, zero_masked_rows;
    int64_t offset;
    const void *mask;        /* NULL, bool (0: -inf) or float32/16/bf16 additive values */
    int mask_dtype;          /* AmpDType */
    int64_t Tm, ms[4];       /* the mask's last dim and element strides over (B, Hq, S, Tm) */
    int p_dtype;             /* float32 (P may then be the scores themselves), float16, bfloat16 */
    int64_t ldp;
    int ort, ort_kind;       /* com.microsoft's bias, its MaskKind */
    float filter;            /* mask_filter_value */
    int64_t B;               /* the batch: where the start positions begin */
    const void *ab;          /* attention_bias, or NULL */
    int64_t ab_sb, ab_sh;
} AmpCudaAttnSoftmax;

int amp_cuda_attn_softmax_launch(float *scores, void *p, const AmpCudaAttnSoftmax *a, void *stream);

/* dst (B, H, P + L, Dh) of esz-byte elements: per head the P rows of past (B, H, P, Dh),
 * then L rows from src: columns [off + h * Dh, +Dh) of (B, L, row) when row > 0, else
 * src is (B, H, L, Dh) (the CPU's amp_attn_cat_heads; P = 0: amp_attn_split_heads). */
int amp_cuda_attn_heads_launch(size_t esz, void *dst, const void *past, int64_t P, const void *src, int64_t B,
                               int64_t H, int64_t L, int64_t Dh, int64_t row, int64_t off, void *stream);
/* x (B, H, T, Dh) += bias (H * Dh) on rows [from, T) of every head (com.microsoft's
 * projection biases); dtype: float32, float16 or bfloat16. */
int amp_cuda_attn_head_bias_launch(int dtype, void *x, const void *bias, int64_t B, int64_t H, int64_t T, int64_t from,
                                   int64_t Dh, void *stream);
/* dst (B, S, H * D) from src (B, H, S, D): the heads merged back. */
int amp_cuda_attn_merge_launch(size_t esz, void *dst, const void *src, int64_t B, int64_t H, int64_t S, int64_t D,
                               void *stream);

/* The softmax's launch geometry: a block per row (grid-stride beyond the grid), its
 * threads the row's length rounded up to a warp, at most 256. */
#define AMP_CUDA_ATTN_MAX_THREADS 256
#define AMP_CUDA_ATTN_MAX_BLOCKS (1 << 20)
static inline int amp_cuda_attn_softmax_threads(int64_t T) {
    int64_t t = (T + 31) / 32 * 32;
    return t < 32 ? 32 : t > AMP_CUDA_ATTN_MAX_THREADS ? AMP_CUDA_ATTN_MAX_THREADS : (int)t;
}
static inline unsigned amp_cuda_attn_softmax_blocks(int64_t rows) {
    return rows < 1 ? 0u : rows > AMP_CUDA_ATTN_MAX_BLOCKS ? (unsigned)AMP_CUDA_ATTN_MAX_BLOCKS : (unsigned)rows;
}

#ifdef __cplusplus
}

#else
#include "kernels/cuda/cuda_impl.h"
#include "ops/attn_geom.h" /* AttnShape, OnnxAttnAttrs, OrtBias: the parsing and checks every backend shares */

/* The part of the session's workspace cuBLASLt keeps for the two products; the
 * attention's scratch is the rest. */
#define AMP_CUDA_ATTN_GEMM_WS ((size_t)8 << 20)

/* Where the attention's scratch lies, in bytes from the scratch's start (each 256-byte
 * aligned); NO_SCRATCH where the kernel reads or writes an input or output in place. */
#define AMP_CUDA_ATTN_NO_SCRATCH SIZE_MAX
typedef struct AmpCudaAttnPlan {
    size_t qkv;        /* com.microsoft Attention's projection (B * S, Dq + Dk + Dv) */
    size_t q, k, v, y; /* Q, K, V, Y in heads layout (B, H, seq, size), of the input's type */
    size_t scores;     /* (B, Hq, S, T) float32 */
    size_t p;          /* P (B, Hq, S, T) of a 16-bit input; float32: the scores in place */
    size_t bytes;      /* the total */
} AmpCudaAttnPlan;

/* Which of Q, K, V, Y (heads layout) take scratch, and the projection's elements (0:
 * none). */
typedef struct AmpCudaAttnNeeds {
    bool q, k, v, y;
    uint64_t qkv;
} AmpCudaAttnNeeds;

/* ai.onnx Attention's needs: Q for 3-D inputs; K (V) unless present_key (present_value)
 * is wanted or the 4-D input is read in place (no past); Y for 3-D or when not wanted. */
AmpCudaAttnNeeds amp_cuda_attn_onnx_needs(const AttnShape *s, bool present_k, bool present_v, bool y_wanted);

/* Lays out the scratch of shape s (com.microsoft: Hq = Hkv = num_heads) with elements
 * of esz bytes, then the float32 scores and, for 16-bit elements, P; false when it is
 * over avail bytes (the kernel then fails: too large for the workspace). */
bool amp_cuda_attn_plan(const AttnShape *s, size_t esz, AmpCudaAttnNeeds w, size_t avail, AmpCudaAttnPlan *p);

/* Scores, softmax and P V on heads-layout qh, kh, vh into yh (attention.c's core, for
 * both families): sm holds the bias (its sizes and P's fields are filled here). */
AmpCode amp_cuda_attn_core(AmpKernelCtx *k, const AttnShape *s, int dtype, float scale, AmpCudaAttnSoftmax sm,
                           const void *qh, const void *kh, const void *vh, void *yh, char *scratch,
                           const AmpCudaAttnPlan *p);
/* The workspace past the part the products keep, and its size. */
char *amp_cuda_attn_scratch(AmpKernelCtx *k, size_t *avail);

AmpCode amp_cuda_attention(AmpKernelCtx *k);
bool amp_cuda_supports_attention(const AmpNode *n, int64_t opset, const int *in_dtypes);
/* ms_attention.c */
AmpCode amp_cuda_ms_attention(AmpKernelCtx *k);
AmpCode amp_cuda_ms_mha(AmpKernelCtx *k);
bool amp_cuda_supports_ms_attention(const AmpNode *n, int64_t opset, const int *in_dtypes);
bool amp_cuda_supports_ms_mha(const AmpNode *n, int64_t opset, const int *in_dtypes);
#endif

#endif
