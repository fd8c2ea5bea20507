/* The CPU kernels: the reference executor's compute, one file per op family. A kernel
 * reads its input buffers and the attributes its prepare function parsed (ctx->attrs),
 * and fills the outputs the executor placed (amp_kernel_outputs) with the shapes the op's
 * shape function gave; it checks what keeps memory safe (input dtypes and index values,
 * and that the placed outputs have the shapes its loops assume) and computes no shapes.
 * Only ops whose output shape is the data's (NonZero) ask ctx->alloc. 16-bit float
 * tensors are stored in 16 bits, computed in fp32 and rounded (to nearest even) on store. */
#ifndef AMP_CPU_KERNELS_H
#define AMP_CPU_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir.h"
#include "kernel.h" /* AmpKernelCtx, AmpKernelFn */
#include "tensor.h" /* AmpBuf and its shape helpers */

/* The CPU kernel of each op (table.c: designated initializers by op id); NULL where the
 * CPU has none. */
extern const AmpKernelFn amp_cpu_kernels[AMP_OP__COUNT];

/* The kernel for an op, or NULL when the CPU backend has none (the executor's error
 * then names the op). Chosen once per node when the session is prepared. */
AmpKernelFn amp_cpu_kernel(AmpOpId op);

/* Kernels that parse their node's attributes once, at prepare (table.c, by op id); NULL
 * where a kernel reads them itself. */
extern const AmpKernelPrepareFn amp_cpu_kernel_prepares[AMP_OP__COUNT];
AmpKernelPrepareFn amp_cpu_kernel_prepare(AmpOpId op);

/* The CPU backend's prepare_node and release_node (backend_cpu.c), shared with the device
 * simulator: the kernel, and its parsed attributes as impl. */
struct AmpBackendKernel;
AmpCode amp_cpu_prepare_node(const AmpNode *n, int64_t opset, struct AmpBackendKernel *out, AmpStatus *st);
void amp_cpu_release_node(struct AmpBackendKernel *k);

/* ---- helpers shared by the families (common.c) ----------------------------------- */

/* A float32 view of a float-family input: the buffer itself when it is float32, else a
 * converted copy in *tmp (free() it; NULL when no copy was made). NULL on OOM. */
const float *amp_buf_f32_in(const AmpBuf *b, float **tmp);
/* A float32 array to compute an output into: the buffer itself when float32, else a
 * scratch array; amp_buf_f32_commit rounds it into the buffer and frees it. */
float *amp_buf_f32_out(AmpBuf *b, float **tmp);
void amp_buf_f32_commit(AmpBuf *b, float *tmp);

/* The first n outputs as the executor placed them (AmpKernelCtx.out), for a kernel that
 * computes no shapes: out[i] NULL where the node does not list output i; a listed output
 * left unplaced is AMP_ERR_UNSUPPORTED naming the node: with every input known, the op's
 * shape function could not size it (inputs it does not take: 74 Squeeze axes on a rank-4
 * tensor, say), and only data-dependent ops may size their outputs themselves. */
AmpCode amp_kernel_outputs(AmpKernelCtx *k, int n, AmpBuf **out);
/* AMP_ERR_INTERNAL naming the node and both shapes unless y, an output the executor
 * placed, has the dtype and dims (rank entries) the kernel's loops are written for: a
 * shape function that disagrees with its kernel must not become an out-of-bounds write. */
AmpCode amp_kernel_check_out(AmpKernelCtx *k, const AmpBuf *y, int dtype, int rank, const int64_t *dims);

/* AMP_ERR_UNSUPPORTED naming the node, op and dtype. */
AmpCode amp_kernel_bad_dtype(AmpKernelCtx *k, int dtype);

/* Integer storage types, int8 to uint64 (labels, axes, masks, integer data). */
static inline bool amp_dtype_is_int(int dt) {
    switch (dt) {
    case AMP_DT_INT8:
    case AMP_DT_INT16:
    case AMP_DT_INT32:
    case AMP_DT_INT64:
    case AMP_DT_UINT8:
    case AMP_DT_UINT16:
    case AMP_DT_UINT32:
    case AMP_DT_UINT64: return true;
    default: return false;
    }
}
/* Stores v as element i of an integer buffer (wrapping, as C's conversions do) or a bool
 * one (v != 0); other types are left alone. */
void amp_buf_set_i64(AmpBuf *b, uint64_t i, int64_t v);

/* ---- every kernel, by family (table.c indexes them by op id) -------------------- */

/* attention.c */
AmpCode amp_cpu_onnx_attention_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_cpu_onnx_attention(AmpKernelCtx *k);
/* ms_attention.c */
AmpCode amp_cpu_ms_attention_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st); /* both ops */
AmpCode amp_cpu_ms_attention(AmpKernelCtx *k);
AmpCode amp_cpu_ms_mha(AmpKernelCtx *k);
/* ms_train.c */
AmpCode amp_cpu_ms_fused_gemm_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_cpu_ms_conv_grad_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_cpu_ms_fused_gemm(AmpKernelCtx *k);
AmpCode amp_cpu_ms_conv_grad(AmpKernelCtx *k);
AmpCode amp_cpu_ms_adamw(AmpKernelCtx *k);
/* amp_cpu_conv.c */
AmpCode amp_cpu_conv_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st); /* also pool.c's */
AmpCode amp_cpu_conv(AmpKernelCtx *k);
AmpCode amp_cpu_conv_transpose(AmpKernelCtx *k);
/* pool.c */
AmpCode amp_cpu_maxpool(AmpKernelCtx *k);
AmpCode amp_cpu_averagepool(AmpKernelCtx *k);
AmpCode amp_cpu_global_averagepool(AmpKernelCtx *k);
AmpCode amp_cpu_global_maxpool(AmpKernelCtx *k);
/* elementwise.c (and elementwise_common.c: the binary ops' pre-opset-7 broadcast axis) */
AmpCode amp_ew_prepare_legacy_bcast(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_ew_add(AmpKernelCtx *k);
AmpCode amp_ew_sub(AmpKernelCtx *k);
AmpCode amp_ew_mul(AmpKernelCtx *k);
AmpCode amp_ew_div(AmpKernelCtx *k);
AmpCode amp_ew_pow(AmpKernelCtx *k);
AmpCode amp_ew_mod(AmpKernelCtx *k);
AmpCode amp_ew_prepare_mod(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_ew_sum(AmpKernelCtx *k);
AmpCode amp_ew_mean(AmpKernelCtx *k);
AmpCode amp_ew_max(AmpKernelCtx *k);
AmpCode amp_ew_min(AmpKernelCtx *k);
/* unary.c */
AmpCode amp_ew_prepare_clip(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_ew_sqrt(AmpKernelCtx *k);
AmpCode amp_ew_exp(AmpKernelCtx *k);
AmpCode amp_ew_log(AmpKernelCtx *k);
AmpCode amp_ew_neg(AmpKernelCtx *k);
AmpCode amp_ew_abs(AmpKernelCtx *k);
AmpCode amp_ew_reciprocal(AmpKernelCtx *k);
AmpCode amp_ew_sign(AmpKernelCtx *k);
AmpCode amp_ew_ceil(AmpKernelCtx *k);
AmpCode amp_ew_floor(AmpKernelCtx *k);
AmpCode amp_ew_round(AmpKernelCtx *k);
AmpCode amp_ew_erf(AmpKernelCtx *k);
AmpCode amp_ew_sin(AmpKernelCtx *k);
AmpCode amp_ew_cos(AmpKernelCtx *k);
AmpCode amp_ew_tan(AmpKernelCtx *k);
AmpCode amp_ew_asin(AmpKernelCtx *k);
AmpCode amp_ew_acos(AmpKernelCtx *k);
AmpCode amp_ew_atan(AmpKernelCtx *k);
AmpCode amp_ew_sinh(AmpKernelCtx *k);
AmpCode amp_ew_cosh(AmpKernelCtx *k);
AmpCode amp_ew_asinh(AmpKernelCtx *k);
AmpCode amp_ew_acosh(AmpKernelCtx *k);
AmpCode amp_ew_atanh(AmpKernelCtx *k);
AmpCode amp_ew_clip(AmpKernelCtx *k);
/* activation.c */
AmpCode amp_ew_prepare_alpha(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_ew_prepare_shrink(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_ew_prepare_selu(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_ew_prepare_hard_sigmoid(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_ew_prepare_gelu(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_ew_relu(AmpKernelCtx *k);
AmpCode amp_ew_leaky_relu(AmpKernelCtx *k);
AmpCode amp_ew_sigmoid(AmpKernelCtx *k);
AmpCode amp_ew_tanh(AmpKernelCtx *k);
AmpCode amp_ew_gelu(AmpKernelCtx *k);
AmpCode amp_ew_elu(AmpKernelCtx *k);
AmpCode amp_ew_selu(AmpKernelCtx *k);
AmpCode amp_ew_prelu(AmpKernelCtx *k);
AmpCode amp_ew_hard_sigmoid(AmpKernelCtx *k);
AmpCode amp_ew_hard_swish(AmpKernelCtx *k);
AmpCode amp_ew_softsign(AmpKernelCtx *k);
AmpCode amp_ew_celu(AmpKernelCtx *k);
AmpCode amp_ew_thresholded_relu(AmpKernelCtx *k);
AmpCode amp_ew_shrink(AmpKernelCtx *k);
AmpCode amp_ew_softplus(AmpKernelCtx *k);
AmpCode amp_ew_sigmoid_grad(AmpKernelCtx *k);
AmpCode amp_ew_tanh_grad(AmpKernelCtx *k);
AmpCode amp_ew_gelu_grad(AmpKernelCtx *k);
AmpCode amp_ew_bias_gelu(AmpKernelCtx *k);
AmpCode amp_ew_relu_grad(AmpKernelCtx *k);
/* logic.c */
AmpCode amp_ew_prepare_isinf(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_ew_equal(AmpKernelCtx *k);
AmpCode amp_ew_less(AmpKernelCtx *k);
AmpCode amp_ew_greater(AmpKernelCtx *k);
AmpCode amp_ew_less_equal(AmpKernelCtx *k);
AmpCode amp_ew_greater_equal(AmpKernelCtx *k);
AmpCode amp_ew_not(AmpKernelCtx *k);
AmpCode amp_ew_and(AmpKernelCtx *k);
AmpCode amp_ew_or(AmpKernelCtx *k);
AmpCode amp_ew_where(AmpKernelCtx *k);
AmpCode amp_ew_isinf(AmpKernelCtx *k);
AmpCode amp_ew_isnan(AmpKernelCtx *k);
/* activation.c */
AmpCode amp_ms_bias_gelu_grad(AmpKernelCtx *k);
/* shape.c (its prepare: amp_cpu_concat_prepare) */
AmpCode amp_ms_concat_training(AmpKernelCtx *k);
/* dropout.c */
AmpCode amp_ew_prepare_dropout(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_ew_dropout(AmpKernelCtx *k);
/* gemm.c */
AmpCode amp_cpu_gemm_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_cpu_fused_matmul_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_cpu_matmul(AmpKernelCtx *k);
AmpCode amp_cpu_gemm(AmpKernelCtx *k);
AmpCode amp_cpu_fused_matmul(AmpKernelCtx *k);
/* einsum.c */
AmpCode amp_cpu_einsum_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_cpu_einsum(AmpKernelCtx *k);
/* norm.c */
AmpCode amp_cpu_norm_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_cpu_layernorm(AmpKernelCtx *k);
AmpCode amp_cpu_batchnorm(AmpKernelCtx *k);
AmpCode amp_cpu_instancenorm(AmpKernelCtx *k);
AmpCode amp_cpu_groupnorm(AmpKernelCtx *k);
AmpCode amp_cpu_lpnorm(AmpKernelCtx *k);
AmpCode amp_cpu_lrn(AmpKernelCtx *k);
AmpCode amp_cpu_ms_layernorm_grad(AmpKernelCtx *k);
/* optim.c */
AmpCode amp_cpu_optimizer_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_cpu_adam(AmpKernelCtx *k);
AmpCode amp_cpu_momentum(AmpKernelCtx *k);
AmpCode amp_cpu_adagrad(AmpKernelCtx *k);
AmpCode amp_cpu_ms_accumulator(AmpKernelCtx *k);
/* dropout.c */
AmpCode amp_ms_dropout_grad(AmpKernelCtx *k);
/* gather.c (its prepare: amp_sh_gather_prepare, the axis) */
AmpCode amp_ms_gather_grad(AmpKernelCtx *k);
/* reduce.c */
AmpCode amp_cpu_reduce_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_cpu_arg_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_cpu_cumsum_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_cpu_topk_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_cpu_reduce_sum(AmpKernelCtx *k);
AmpCode amp_cpu_reduce_mean(AmpKernelCtx *k);
AmpCode amp_cpu_reduce_max(AmpKernelCtx *k);
AmpCode amp_cpu_reduce_min(AmpKernelCtx *k);
AmpCode amp_cpu_reduce_prod(AmpKernelCtx *k);
AmpCode amp_cpu_reduce_sumsq(AmpKernelCtx *k);
AmpCode amp_cpu_reduce_l1(AmpKernelCtx *k);
AmpCode amp_cpu_reduce_l2(AmpKernelCtx *k);
AmpCode amp_cpu_reduce_logsum(AmpKernelCtx *k);
AmpCode amp_cpu_reduce_logsumexp(AmpKernelCtx *k);
AmpCode amp_cpu_argmax(AmpKernelCtx *k);
AmpCode amp_cpu_argmin(AmpKernelCtx *k);
AmpCode amp_cpu_cumsum(AmpKernelCtx *k);
AmpCode amp_cpu_topk(AmpKernelCtx *k);
/* softmax.c */
AmpCode amp_cpu_softmax_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_cpu_softmax(AmpKernelCtx *k);
AmpCode amp_cpu_log_softmax(AmpKernelCtx *k);
AmpCode amp_cpu_ms_softmax_grad(AmpKernelCtx *k);
/* loss.c */
AmpCode amp_cpu_loss_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_cpu_sce_loss(AmpKernelCtx *k);
AmpCode amp_cpu_nll_loss(AmpKernelCtx *k);
AmpCode amp_cpu_ms_sce_loss_grad(AmpKernelCtx *k);
/* rnn.c */
AmpCode amp_cpu_rnn_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_cpu_rnn(AmpKernelCtx *k);
AmpCode amp_cpu_gru(AmpKernelCtx *k);
AmpCode amp_cpu_lstm(AmpKernelCtx *k);
/* shape.c */
AmpCode amp_cpu_reshape_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_cpu_transpose_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_cpu_unsqueeze_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_cpu_concat_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_cpu_split_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_cpu_depth_space_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_cpu_trilu_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_cpu_identity(AmpKernelCtx *k);
AmpCode amp_cpu_reshape(AmpKernelCtx *k);
AmpCode amp_cpu_flatten(AmpKernelCtx *k);
AmpCode amp_cpu_squeeze(AmpKernelCtx *k);
AmpCode amp_cpu_unsqueeze(AmpKernelCtx *k);
AmpCode amp_cpu_transpose(AmpKernelCtx *k);
AmpCode amp_cpu_concat(AmpKernelCtx *k);
AmpCode amp_cpu_split(AmpKernelCtx *k);
AmpCode amp_cpu_expand(AmpKernelCtx *k);
AmpCode amp_cpu_tile(AmpKernelCtx *k);
AmpCode amp_cpu_depth_to_space(AmpKernelCtx *k);
AmpCode amp_cpu_space_to_depth(AmpKernelCtx *k);
AmpCode amp_cpu_trilu(AmpKernelCtx *k);
/* slice.c */
AmpCode amp_sh_slice_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_sh_pad_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_sh_slice(AmpKernelCtx *k);
AmpCode amp_sh_pad(AmpKernelCtx *k);
/* gather.c */
AmpCode amp_sh_gather_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_sh_gather_nd_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_sh_scatter_nd_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_sh_gather(AmpKernelCtx *k);
AmpCode amp_sh_gather_elements(AmpKernelCtx *k);
AmpCode amp_sh_gather_nd(AmpKernelCtx *k);
AmpCode amp_sh_scatter_nd(AmpKernelCtx *k);
/* resize.c */
AmpCode amp_sh_resize_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_sh_resize(AmpKernelCtx *k);
/* tensor.c */
AmpCode amp_cpu_cast_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_cpu_constant_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_cpu_constant_of_shape_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_cpu_shape_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_cpu_one_hot_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_cpu_cast(AmpKernelCtx *k);
AmpCode amp_cpu_cast_like(AmpKernelCtx *k);
AmpCode amp_cpu_constant(AmpKernelCtx *k);
AmpCode amp_cpu_constant_of_shape(AmpKernelCtx *k);
AmpCode amp_cpu_shape(AmpKernelCtx *k);
AmpCode amp_cpu_size(AmpKernelCtx *k);
AmpCode amp_cpu_range(AmpKernelCtx *k);
AmpCode amp_cpu_one_hot(AmpKernelCtx *k);
AmpCode amp_cpu_non_zero(AmpKernelCtx *k);

#endif
