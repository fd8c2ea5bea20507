/* The host-side logic of the CUDA attention kernel (kernels/cuda/attention.c), on the
 * CPU (no GPU needed): which nodes the supports predicate takes (the rest fall back to
 * the CPU), that the table entry parses attributes with the CPU's prepare, the scratch
 * plan's layout and size, and the softmax's launch geometry. The numerics against the
 * CPU kernel are tests/cuda/test_cuda_ops.c's attention table (needs a GPU). */
#include <criterion/criterion.h>
#include <string.h>

#include "kernels/cuda/attention.h"
#include "tests/runtime/rt_util.h"

/* ---- the supports predicate -------------------------------------------------------- */

/* An Attention node with n_in inputs (absent where dts[i] is 0) and n_out outputs. */
static AmpNode *att_node(AmpModel *m, int n_in, int n_out) {
    static const char *ins[8] = {"", "q", "q,k", "q,k,v", "q,k,v,m", "q,k,v,m,pk", "q,k,v,m,pk,pv", "q,k,v,m,pk,pv,np"};
    static const char *outs[5] = {"", "y", "y,pk_o", "y,pk_o,pv_o", "y,pk_o,pv_o,qk"};
    return rt_node(m->graph, "", "Attention", ins[n_in], outs[n_out]);
}

static bool supports(int n_in, const int *dts, int n_out, const char *attr, int64_t v) {
    AmpModel *m = rt_model(23);
    AmpNode *n = att_node(m, n_in, n_out);
    for (int i = 0; i < n_in; i++)
        if (!dts[i]) n->inputs[i] = NULL; /* absent */
    if (attr) {
        AmpAttr *a = amp_node_add_attr(n, attr, AMP_ATTR_INT);
        cr_assert_not_null(a);
        a->i = v;
    }
    int in_dtypes[8] = {0};
    memcpy(in_dtypes, dts, (size_t)n_in * sizeof *dts);
    bool r = amp_cuda_supports_attention(n, 23, in_dtypes);
    amp_model_free(m);
    return r;
}

enum { F = AMP_DT_FLOAT, H = AMP_DT_FLOAT16, BF = AMP_DT_BFLOAT16, B8 = AMP_DT_BOOL, I64 = AMP_DT_INT64 };

Test(cuda_attention, supports_float_types_alike) {
    const int f[3] = {F, F, F}, h[3] = {H, H, H}, b[3] = {BF, BF, BF}, mixed[3] = {H, H, F}, d[3] = {11, 11, 11};
    cr_assert(supports(3, f, 1, NULL, 0));
    cr_assert(supports(3, h, 1, NULL, 0));
    cr_assert(supports(3, b, 1, NULL, 0));
    cr_assert_not(supports(3, mixed, 1, NULL, 0), "V of another type than Q: the CPU's");
    cr_assert_not(supports(3, d, 1, NULL, 0), "float64: the CPU's");
}

Test(cuda_attention, supports_masks_bool_or_of_q_type) {
    const int mb[4] = {H, H, H, B8}, mh[4] = {H, H, H, H}, mf[4] = {H, H, H, F}, mi[4] = {F, F, F, I64};
    cr_assert(supports(4, mb, 1, NULL, 0));
    cr_assert(supports(4, mh, 1, NULL, 0));
    cr_assert_not(supports(4, mf, 1, NULL, 0), "a float32 mask on float16 data");
    cr_assert_not(supports(4, mi, 1, NULL, 0), "an integer mask");
}

Test(cuda_attention, supports_past_and_present) {
    const int p[6] = {BF, BF, BF, 0, BF, BF}, pm[6] = {BF, BF, BF, 0, BF, F};
    cr_assert(supports(6, p, 3, NULL, 0));
    cr_assert_not(supports(6, pm, 3, NULL, 0), "past_value of another type");
}

Test(cuda_attention, refuses_what_it_lacks) {
    const int np[7] = {F, F, F, 0, 0, 0, I64}, f[3] = {F, F, F};
    cr_assert_not(supports(7, np, 1, NULL, 0), "nonpad_kv_seqlen");
    cr_assert_not(supports(3, f, 4, NULL, 0), "qk_matmul_output");
    cr_assert(supports(3, f, 3, "qk_matmul_output_mode", 3), "the mode alone changes nothing");
    cr_assert_not(supports(3, f, 1, "left_window_size", 4), "sliding window");
    cr_assert_not(supports(3, f, 1, "right_window_size", 0), "sliding window");
    cr_assert(supports(3, f, 1, "is_causal", 1));
}

/* The table entry: the CUDA kernel, the CPU's prepare (one parsing for both backends). */
Test(cuda_attention, table_entry_uses_the_cpu_prepare) {
    const AmpCudaOp *op = &amp_cuda_ops[AMP_OP_Attention];
    cr_assert_eq(op->fn, amp_cuda_attention);
    cr_assert_eq(op->prepare, amp_onnx_attention_prepare);
    cr_assert_eq(op->supports, amp_cuda_supports_attention);
    op = &amp_cuda_ops[AMP_OP_Ms_Attention];
    cr_assert_eq(op->fn, amp_cuda_ms_attention);
    cr_assert_eq(op->prepare, amp_ms_attention_prepare);
    cr_assert_eq(op->supports, amp_cuda_supports_ms_attention);
    op = &amp_cuda_ops[AMP_OP_Ms_MultiHeadAttention];
    cr_assert_eq(op->fn, amp_cuda_ms_mha);
    cr_assert_eq(op->prepare, amp_ms_attention_prepare);
    cr_assert_eq(op->supports, amp_cuda_supports_ms_mha);
}

/* ---- com.microsoft Attention and MultiHeadAttention -------------------------------- */

/* A com.microsoft node of op with n_in inputs (absent where dts[i] is 0) and n_out
 * outputs; rank5: the key typed 5-D (packed KV); attr: an int attribute set to 1. */
static bool ms_supports(const char *op, int n_in, const int *dts, int n_out, const char *attr, bool rank5) {
    static const char *ins[11] = {"", "a", "a,b", "a,b,c", "a,b,c,d", "a,b,c,d,e", "a,b,c,d,e,f", "a,b,c,d,e,f,g",
                                  "a,b,c,d,e,f,g,h", "a,b,c,d,e,f,g,h,i", "a,b,c,d,e,f,g,h,i,j"};
    static const char *outs[5] = {"", "y", "y,o1", "y,o1,o2", "y,o1,o2,o3"};
    AmpModel *m = rt_model(23);
    AmpNode *n = rt_node(m->graph, "com.microsoft", op, ins[n_in], outs[n_out]);
    /* absent inputs: dts[i] 0 */
    for (int i = 0; i < n_in; i++)
        if (!dts[i]) n->inputs[i] = NULL;
    if (rank5) n->inputs[1]->type.rank = 5;
    if (attr) amp_node_add_attr(n, attr, AMP_ATTR_INT)->i = 1;
    int in_dtypes[10] = {0};
    memcpy(in_dtypes, dts, (size_t)n_in * sizeof *dts);
    bool r = n->op == AMP_OP_Ms_Attention ? amp_cuda_supports_ms_attention(n, 1, in_dtypes)
                                          : amp_cuda_supports_ms_mha(n, 1, in_dtypes);
    amp_model_free(m);
    return r;
}

enum { I32 = AMP_DT_INT32, I8 = AMP_DT_INT8 };

Test(cuda_attention, supports_ms_attention) {
    const int ok[6] = {H, H, H, I32, H, H}, m64[4] = {F, F, F, I64}, mb[4] = {BF, BF, BF, B8};
    const int m8[4] = {F, F, F, I8}, wmix[3] = {H, F, H}, psl[7] = {F, F, F, 0, 0, 0, I32};
    cr_assert(ms_supports("Attention", 6, ok, 2, NULL, false));
    cr_assert(ms_supports("Attention", 4, m64, 1, NULL, false));
    cr_assert(ms_supports("Attention", 4, mb, 1, NULL, false));
    cr_assert_not(ms_supports("Attention", 4, m8, 1, NULL, false), "an int8 mask: the CPU's");
    cr_assert_not(ms_supports("Attention", 3, wmix, 1, NULL, false), "weights of another type");
    cr_assert_not(ms_supports("Attention", 7, psl, 1, NULL, false), "past_sequence_length");
    cr_assert_not(ms_supports("Attention", 3, ok, 1, "do_rotary", false), "rotary");
    cr_assert_not(ms_supports("Attention", 3, ok, 1, "past_present_share_buffer", false), "a shared buffer");
    cr_assert(ms_supports("Attention", 3, ok, 1, "unidirectional", false));
}

Test(cuda_attention, supports_ms_mha) {
    const int ok[8] = {F, F, F, F, I32, F, F, F}, nokey[3] = {F, 0, 0}, vmix[3] = {F, F, H};
    const int ci[10] = {F, F, F, 0, 0, 0, 0, 0, 0, I32};
    cr_assert(ms_supports("MultiHeadAttention", 8, ok, 3, NULL, false));
    cr_assert(ms_supports("MultiHeadAttention", 3, ok, 1, "unidirectional", false));
    cr_assert_not(ms_supports("MultiHeadAttention", 3, nokey, 1, NULL, false), "packed QKV (no key)");
    cr_assert_not(ms_supports("MultiHeadAttention", 3, ok, 1, NULL, true), "packed KV (5-D key)");
    cr_assert_not(ms_supports("MultiHeadAttention", 3, vmix, 1, NULL, false), "value of another type");
    cr_assert_not(ms_supports("MultiHeadAttention", 10, ci, 1, NULL, false), "cache_indirection");
    cr_assert_not(ms_supports("MultiHeadAttention", 3, ok, 4, NULL, false), "the qk output");
}


/* ---- the scratch plan ---------------------------------------------------------------- */

static size_t up(size_t b) {
    return (b + 255) / 256 * 256;
}

Test(cuda_attention, plan_4d_without_cache_reads_in_place) {
    AttnShape s = {.B = 2, .Hq = 8, .Hkv = 4, .S = 65, .L = 300, .T = 300, .D = 64, .Dv = 64};
    AmpCudaAttnPlan p;
    cr_assert(amp_cuda_attn_plan(&s, 4, amp_cuda_attn_onnx_needs(&s, false, false, true), SIZE_MAX, &p));
    cr_assert_eq(p.q, AMP_CUDA_ATTN_NO_SCRATCH);
    cr_assert_eq(p.k, AMP_CUDA_ATTN_NO_SCRATCH);
    cr_assert_eq(p.v, AMP_CUDA_ATTN_NO_SCRATCH);
    cr_assert_eq(p.y, AMP_CUDA_ATTN_NO_SCRATCH, "Y written in place");
    cr_assert_eq(p.scores, 0);
    cr_assert_eq(p.p, p.scores, "float32: P overwrites the scores");
    cr_assert_eq(p.bytes, up(2 * 8 * 65 * 300 * 4));
    /* float16: P is a second buffer of 2-byte entries after the scores */
    cr_assert(amp_cuda_attn_plan(&s, 2, amp_cuda_attn_onnx_needs(&s, false, false, true), SIZE_MAX, &p));
    cr_assert_eq(p.p, up(2 * 8 * 65 * 300 * 4));
    cr_assert_eq(p.bytes, p.p + up(2 * 8 * 65 * 300 * 2));
}

Test(cuda_attention, plan_3d_with_past_copies_everything) {
    AttnShape s = {.is3d = true, .B = 3, .Hq = 4, .Hkv = 2, .S = 9, .L = 4, .P = 3, .T = 7, .D = 8, .Dv = 6};
    AmpCudaAttnPlan p;
    cr_assert(amp_cuda_attn_plan(&s, 2, amp_cuda_attn_onnx_needs(&s, false, false, true), SIZE_MAX, &p));
    size_t q = up(3 * 4 * 9 * 8 * 2), k = up(3 * 2 * 7 * 8 * 2), v = up(3 * 2 * 7 * 6 * 2), y = up(3 * 4 * 9 * 6 * 2);
    cr_assert_eq(p.q, 0);
    cr_assert_eq(p.k, q);
    cr_assert_eq(p.v, q + k);
    cr_assert_eq(p.y, q + k + v, "3-D: Y in heads layout, merged after");
    cr_assert_eq(p.scores, q + k + v + y);
    cr_assert_eq(p.bytes, p.scores + up(3 * 4 * 9 * 7 * 4) + up(3 * 4 * 9 * 7 * 2));
    cr_assert_eq(p.qkv, AMP_CUDA_ATTN_NO_SCRATCH);
    for (size_t *o = &p.q; o <= &p.p; o++) cr_assert_eq(*o % 256, 0, "every region 256-byte aligned");
    /* present_key / present_value wanted: the cache is built there, not in scratch */
    cr_assert(amp_cuda_attn_plan(&s, 2, amp_cuda_attn_onnx_needs(&s, true, true, true),
                                 SIZE_MAX, &p));
    cr_assert_eq(p.k, AMP_CUDA_ATTN_NO_SCRATCH);
    cr_assert_eq(p.v, AMP_CUDA_ATTN_NO_SCRATCH);
    cr_assert_eq(p.y, q);
}

Test(cuda_attention, plan_refuses_what_the_workspace_cannot_hold) {
    AttnShape s = {.B = 1, .Hq = 1, .Hkv = 1, .S = 4, .L = 64, .T = 64, .D = 8, .Dv = 8};
    AmpCudaAttnPlan p;
    cr_assert(amp_cuda_attn_plan(&s, 4, amp_cuda_attn_onnx_needs(&s, false, false, true), 1024, &p), "4 x 64 float32 scores");
    cr_assert_not(amp_cuda_attn_plan(&s, 4, amp_cuda_attn_onnx_needs(&s, false, false, true), 1023, &p));
    cr_assert_eq(p.bytes, 1024, "the size needed, for the message");
    cr_assert_not(amp_cuda_attn_plan(&s, 4, amp_cuda_attn_onnx_needs(&s, false, false, false), 1024, &p), "Y not wanted: scratch for it");
}

Test(cuda_attention, plan_ms_attention_projection_first) {
    AttnShape s = {.B = 2, .Hq = 4, .Hkv = 4, .S = 5, .L = 5, .T = 5, .D = 4, .Dv = 4};
    AmpCudaAttnPlan p;
    AmpCudaAttnNeeds w = {.q = true, .k = true, .v = true, .y = true, .qkv = 2 * 5 * 48};
    cr_assert(amp_cuda_attn_plan(&s, 4, w, SIZE_MAX, &p));
    cr_assert_eq(p.qkv, 0);
    cr_assert_eq(p.q, up(2 * 5 * 48 * 4));
    cr_assert_eq(p.bytes, p.scores + up(2 * 4 * 5 * 5 * 4));
}

/* ---- launch geometry ------------------------------------------------------------------- */

Test(cuda_attention, softmax_geometry) {
    cr_assert_eq(amp_cuda_attn_softmax_threads(1), 32);
    cr_assert_eq(amp_cuda_attn_softmax_threads(32), 32);
    cr_assert_eq(amp_cuda_attn_softmax_threads(33), 64);
    cr_assert_eq(amp_cuda_attn_softmax_threads(256), 256);
    cr_assert_eq(amp_cuda_attn_softmax_threads(100000), AMP_CUDA_ATTN_MAX_THREADS);
    cr_assert_eq(amp_cuda_attn_softmax_blocks(0), 0);
    cr_assert_eq(amp_cuda_attn_softmax_blocks(7), 7);
    cr_assert_eq(amp_cuda_attn_softmax_blocks(INT64_C(1) << 40), AMP_CUDA_ATTN_MAX_BLOCKS, "grid-stride beyond");
}
