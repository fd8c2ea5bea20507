/* Internals shared by the CPU attention family's files (attention.c, ms_attention.c,
 * ms_train.c): the fp32 scaled-dot-product core every attention kernel runs, the head
 * layout helpers and the error helper. What the CUDA kernels share is ops/attn_geom.h. */
#ifndef AMP_CPU_ATTENTION_IMPL_H
#define AMP_CPU_ATTENTION_IMPL_H

#include "kernels/cpu/kernels.h"
#include "ops/attn_geom.h" /* the attributes, shapes and checks every backend shares */

/* Fills bias (S, T), row i for query position i, for batch b and query head h: an
 * additive bias on the scaled scores; -INFINITY excludes a key. */
typedef void (*AmpAttnBiasFn)(const void *ctx, int64_t b, int64_t h, float *bias);

/* One attention problem, all in fp32 with heads laid out (batch, head, seq, size):
 *   P = softmax(softcap(scale * Q K^T) + bias),  Y = P V
 * Query head h reads key/value head h / (Hq / Hkv) (grouped-query attention). */
typedef struct AmpAttnCore {
    int64_t B, Hq, Hkv, S, T, D, Dv; /* S query positions, T keys; D and Dv head sizes */
    float scale;
    float softcap;      /* > 0: scores = softcap * tanh(scores / softcap), before the bias */
    const float *q;     // (B, Hq, S, D)
    const float *k;     // (B, Hkv, T, D)
    const float *v;     // (B, Hkv, T, Dv)
    AmpAttnBiasFn bias; /* NULL: no bias */
    const void *bias_ctx;
    /* A row whose bias is -inf for every key gets zero probabilities (ai.onnx
     * Attention's rule) rather than a softmax of -inf scores. */
    bool zero_masked_rows;
    float *y;    // (B, Hq, S, Dv)
    float *qk;   // (B, Hq, S, T), or NULL
    int qk_mode; /* what qk holds: 0 scale * Q K^T, 1 after softcap, 2 after bias, 3 P */
} AmpAttnCore;

/* Runs c: two cblas_sgemm per (batch, head), the softmax in between with the row max
 * subtracted and the sum kept in double. false when out of memory. The caller has
 * checked that S, T, D and Dv fit in an int. */
bool amp_attn_run(const AmpAttnCore *c);

/* dst (B, H, S, D) from the columns [off, off + H * D) of src (B, S, row): the
 * (B, S, H * D) -> (B, H, S, D) split of a 3-D projection into heads. */
void amp_attn_split_heads(float *dst, const float *src, int64_t B, int64_t S, int64_t H, int64_t D, int64_t row,
                          int64_t off);
/* dst (B, H, P + L, Dh): per head, the P cached rows of past (B, H, P, Dh) (NULL when
 * P = 0), then L new rows from src: columns [off, off + H * Dh) of (B, L, row) when row
 * > 0, else src is already (B, H, L, Dh). The key/value cache concatenation. */
void amp_attn_cat_heads(float *dst, const float *past, int64_t P, const float *src, int64_t B, int64_t H, int64_t L,
                        int64_t Dh, int64_t row, int64_t off);
/* dst (B, S, H * D) from src (B, H, S, D): the heads merged back. */
void amp_attn_merge_heads(float *dst, const float *src, int64_t B, int64_t H, int64_t S, int64_t D);

/* amp_fail with "node 'NAME' (OP): " in front of the message. */
AmpCode amp_attn_oom(AmpKernelCtx *k);

#endif
