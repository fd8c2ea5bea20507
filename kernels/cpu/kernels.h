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

#include "ir/ir.h"
#include "ir/kernel.h" /* AmpKernelCtx, AmpKernelFn */
#include "ir/tensor.h" /* AmpBuf and its shape helpers */
#include "ops/kernel_out.h" /* amp_kernel_outputs, amp_kernel_check_out, amp_kernel_bad_dtype */

/* The CPU kernel of an op and the function that parses its attributes once, at prepare
 * (table.c, by op id): run NULL where the CPU has no kernel, prepare NULL where the
 * kernel reads no attributes. */
typedef struct AmpCpuOp {
    AmpKernelFn run;
    AmpKernelPrepareFn prepare;
} AmpCpuOp;
extern const AmpCpuOp amp_cpu_ops[AMP_OP__COUNT];

/* The kernel for an op, or NULL when the CPU backend has none (the executor's error
 * then names the op). Chosen once per node when the session is prepared. */
AmpKernelFn amp_cpu_kernel(AmpOpId op);
/* Its prepare function, or NULL where the kernel reads its attributes itself. */
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

/* Stores v as element i of an integer buffer (wrapping, as C's conversions do) or a bool
 * one (v != 0); other types are left alone. */
void amp_buf_set_i64(AmpBuf *b, uint64_t i, int64_t v);

/* ---- every kernel of table.c, by the file that defines it ------------------------ */
typedef AmpCode AmpCpuKernel(AmpKernelCtx *k);                                             /* AmpKernelFn */
typedef AmpCode AmpCpuPrepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st); /* AmpKernelPrepareFn */

/* gemm.c */
AmpCpuKernel amp_cpu_matmul, amp_cpu_gemm, amp_cpu_fused_matmul; /* prepares: ops/gemm_attrs.h */
/* conv.c */
AmpCpuKernel amp_cpu_conv, amp_cpu_conv_transpose; /* prepare: amp_conv_prepare (ops/conv_geom.h) */
/* sub_scaled.c */
AmpCpuKernel amp_cpu_sub_scaled;
/* einsum.c */
AmpCpuKernel amp_cpu_einsum;
AmpCpuPrepare amp_cpu_einsum_prepare;
/* attention.c */
AmpCpuKernel amp_cpu_onnx_attention; /* prepare: amp_onnx_attention_prepare (ops/attn_geom.h) */
/* rnn.c */
AmpCpuKernel amp_cpu_lstm, amp_cpu_gru, amp_cpu_rnn;
AmpCpuPrepare amp_cpu_rnn_prepare;
/* ms_train.c */
AmpCpuKernel amp_cpu_ms_fused_gemm, amp_cpu_ms_conv_grad, amp_cpu_ms_adamw;
AmpCpuPrepare amp_cpu_ms_fused_gemm_prepare; /* ConvGrad: amp_conv_grad_prepare (ops/conv_geom.h) */
/* ms_attention.c */
AmpCpuKernel amp_cpu_ms_attention, amp_cpu_ms_mha; /* prepare: amp_ms_attention_prepare (ops/attn_geom.h) */
/* elementwise.c */
AmpCpuKernel amp_ew_add, amp_ew_sub, amp_ew_mul, amp_ew_div, amp_ew_sum, amp_ew_mean, amp_ew_max, amp_ew_min,
             amp_ew_pow, amp_ew_mod;
AmpCpuPrepare amp_ew_prepare_mod;
/* prepare of the binary ops before opset 7: amp_ew_prepare_legacy_bcast (ops/ew_common.h) */
/* unary.c: every op of ops/unary.def (prepares: its PREPARE column, ops/ew_common.h), and
 * Clip (prepare: amp_ew_prepare_clip) */
AmpCpuKernel amp_ew_unary, amp_ew_clip;
/* activation.c */
AmpCpuKernel amp_ew_prelu, amp_ew_sigmoid_grad, amp_ew_tanh_grad, amp_ew_gelu_grad, amp_ms_bias_gelu_grad,
             amp_ew_bias_gelu, amp_ew_relu_grad; /* prepare: amp_ew_prepare_gelu (ops/ew_common.h) */
/* softmax.c */
AmpCpuKernel amp_cpu_softmax, amp_cpu_ms_softmax_grad, amp_cpu_hardmax, amp_cpu_log_softmax;
/* prepare: amp_softmax_prepare (ops/norm_attrs.h) */
/* pool.c */
AmpCpuKernel amp_cpu_averagepool, amp_cpu_global_averagepool, amp_cpu_maxpool, amp_cpu_global_maxpool;
/* dropout.c */
AmpCpuKernel amp_ew_dropout, amp_ms_dropout_grad; /* prepare: amp_ew_prepare_dropout (ops/dropout_rng.h) */
/* logic.c */
AmpCpuKernel amp_ew_where, amp_ew_equal, amp_ew_less, amp_ew_greater, amp_ew_less_equal, amp_ew_greater_equal,
             amp_ew_isinf, amp_ew_isnan, amp_ew_not, amp_ew_and, amp_ew_or;
/* IsInf's prepare: amp_ew_prepare_isinf (ops/ew_common.h) */
/* shape.c */
AmpCpuKernel amp_cpu_reshape, amp_cpu_transpose, amp_cpu_flatten, amp_cpu_squeeze, amp_cpu_unsqueeze,
             amp_ms_concat_training, amp_cpu_concat, amp_cpu_split, amp_cpu_trilu, amp_cpu_expand,
             amp_cpu_tile, amp_cpu_identity, amp_cpu_depth_to_space, amp_cpu_space_to_depth;
AmpCpuPrepare amp_cpu_reshape_prepare, amp_cpu_unsqueeze_prepare, amp_cpu_trilu_prepare,
              amp_cpu_depth_space_prepare; /* Transpose, Concat, Split: ops/sh_common.h */
/* slice.c */
AmpCpuKernel amp_sh_slice, amp_sh_pad;
/* prepares: amp_slice_prepare (ops/slice.h), amp_pad_prepare (ops/pad.h) */
/* gather.c */
AmpCpuKernel amp_sh_gather, amp_sh_gather_elements, amp_sh_gather_nd, amp_sh_scatter_nd, amp_ms_gather_grad;
AmpCpuPrepare amp_sh_gather_nd_prepare; /* Gather, ScatterND: ops/sh_common.h */
/* resize.c */
AmpCpuKernel amp_sh_resize; /* prepare: amp_sh_resize_prepare (ops/resize_geom.h) */
/* reduce.c */
AmpCpuKernel amp_cpu_reduce_max, amp_cpu_reduce_min, amp_cpu_argmax, amp_cpu_argmin, amp_cpu_topk,
             amp_cpu_reduce_sum, amp_cpu_reduce_mean, amp_cpu_reduce_prod, amp_cpu_reduce_sumsq,
             amp_cpu_reduce_l1, amp_cpu_reduce_l2, amp_cpu_reduce_logsum, amp_cpu_reduce_logsumexp,
             amp_cpu_cumsum;
AmpCpuPrepare amp_cpu_topk_prepare, amp_cpu_cumsum_prepare; /* Reduce*, Arg*: ops/reduce_attrs.h */
/* loss.c */
AmpCpuKernel amp_cpu_sce_loss, amp_cpu_nll_loss, amp_cpu_ms_sce_loss_grad; /* prepare: ops/norm_attrs.h */
/* norm.c */
AmpCpuKernel amp_cpu_layernorm, amp_cpu_batchnorm, amp_cpu_instancenorm, amp_cpu_groupnorm, amp_cpu_lpnorm,
             amp_cpu_lrn, amp_cpu_ms_layernorm_grad; /* prepare: amp_norm_prepare (ops/norm_attrs.h) */
/* optim.c */
AmpCpuKernel amp_cpu_adam, amp_cpu_momentum, amp_cpu_adagrad, amp_cpu_ms_accumulator; /* prepare: ops/optim_math.h */
/* tensor.c */
AmpCpuKernel amp_cpu_shape, amp_cpu_size, amp_cpu_cast, amp_cpu_cast_like, amp_cpu_constant,
             amp_cpu_constant_of_shape, amp_cpu_range, amp_cpu_one_hot, amp_cpu_non_zero;
/* Cast: amp_cast_prepare (ops/cast_engine.h); Shape, Constant, ConstantOfShape, OneHot: ops/sh_common.h */
/* fused.c */
AmpCpuKernel amp_cpu_fused_elementwise, amp_cpu_unscale_check; /* prepare: amp_fused_prepare (ops/fused_check.h) */
/* comm.c */
AmpCpuKernel amp_cpu_allreduce_mean;

#endif
