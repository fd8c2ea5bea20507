/* The CPU backend's kernels, one entry per op id (designated initializers), grouped by the
 * file that defines the kernel: {kernel, prepare}, prepare being the function that parses
 * the node's attributes once, at prepare (AmpKernelPrepareFn; absent where the kernel
 * reads none). kernels.h declares them; the ops/ headers the prepares every backend
 * shares. An op with no entry has no CPU kernel: the executor names it at prepare (If,
 * Loop, Scan: the executor runs their bodies itself).
 * The CPU is the reference: every op in kernels/cuda/table.c has an entry here
 * (tests/kernels/test_op_tables.c). */
#include "kernels/cpu/kernels.h"
#include "ops/attn_geom.h"    /* amp_onnx_attention_prepare, amp_ms_attention_prepare */
#include "ops/cast_engine.h"  /* amp_cast_prepare */
#include "ops/conv_geom.h"    /* amp_conv_prepare, amp_conv_grad_prepare */
#include "ops/dropout_rng.h"  /* amp_ew_prepare_dropout */
#include "ops/ew_common.h"    /* amp_ew_prepare_legacy_bcast, _clip, the activations' prepares */
#include "ops/fused_check.h"  /* amp_fused_prepare */
#include "ops/gemm_attrs.h"   /* amp_gemm_prepare, amp_fused_matmul_prepare */
#include "ops/norm_attrs.h"   /* amp_softmax_prepare, amp_norm_prepare, amp_loss_prepare */
#include "ops/optim_math.h"   /* amp_optimizer_prepare */
#include "ops/pad.h"          /* amp_pad_prepare */
#include "ops/reduce_attrs.h" /* amp_reduce_prepare, amp_arg_prepare */
#include "ops/resize_geom.h"  /* amp_sh_resize_prepare */
#include "ops/sh_common.h"    /* Transpose, Concat, Split, Gather, ScatterND, OneHot, Shape, Constant prepares */
#include "ops/slice.h"        /* amp_slice_prepare */

const AmpCpuOp amp_cpu_ops[AMP_OP__COUNT] = {
    /* gemm.c */
    [AMP_OP_MatMul] = {amp_cpu_matmul, NULL},
    [AMP_OP_Gemm] = {amp_cpu_gemm, amp_gemm_prepare},
    [AMP_OP_Ms_FusedMatMul] = {amp_cpu_fused_matmul, amp_fused_matmul_prepare},
    /* conv.c */
    [AMP_OP_Conv] = {amp_cpu_conv, amp_conv_prepare},
    [AMP_OP_ConvTranspose] = {amp_cpu_conv_transpose, amp_conv_prepare},
    [AMP_OP_Ampc_ConvEpilogue] = {amp_cpu_conv, amp_conv_prepare}, /* its epilogue: conv.c */
    /* sub_scaled.c */
    [AMP_OP_Ampc_SubScaled] = {amp_cpu_sub_scaled, NULL},
    /* einsum.c */
    [AMP_OP_Einsum] = {amp_cpu_einsum, amp_cpu_einsum_prepare},
    /* attention.c */
    [AMP_OP_Attention] = {amp_cpu_onnx_attention, amp_onnx_attention_prepare},
    /* rnn.c */
    [AMP_OP_LSTM] = {amp_cpu_lstm, amp_cpu_rnn_prepare},
    [AMP_OP_GRU] = {amp_cpu_gru, amp_cpu_rnn_prepare},
    [AMP_OP_RNN] = {amp_cpu_rnn, amp_cpu_rnn_prepare},
    /* ms_train.c */
    [AMP_OP_Ms_FusedGemm] = {amp_cpu_ms_fused_gemm, amp_cpu_ms_fused_gemm_prepare},
    [AMP_OP_Ms_ConvGrad] = {amp_cpu_ms_conv_grad, amp_conv_grad_prepare},
    [AMP_OP_Ms_AdamWOptimizer] = {amp_cpu_ms_adamw, NULL},
    [AMP_OP_Ms_SGDOptimizerV2] = {amp_cpu_ms_adamw, NULL},
    /* ms_attention.c */
    [AMP_OP_Ms_Attention] = {amp_cpu_ms_attention, amp_ms_attention_prepare},
    [AMP_OP_Ms_MultiHeadAttention] = {amp_cpu_ms_mha, amp_ms_attention_prepare},
    /* elementwise.c */
    [AMP_OP_Add] = {amp_ew_add, amp_ew_prepare_legacy_bcast},
    [AMP_OP_Sub] = {amp_ew_sub, amp_ew_prepare_legacy_bcast},
    [AMP_OP_Mul] = {amp_ew_mul, amp_ew_prepare_legacy_bcast},
    [AMP_OP_Div] = {amp_ew_div, amp_ew_prepare_legacy_bcast},
    [AMP_OP_Sum] = {amp_ew_sum, NULL},
    [AMP_OP_Mean] = {amp_ew_mean, NULL},
    [AMP_OP_Max] = {amp_ew_max, NULL},
    [AMP_OP_Min] = {amp_ew_min, NULL},
    [AMP_OP_Pow] = {amp_ew_pow, amp_ew_prepare_legacy_bcast},
    [AMP_OP_Mod] = {amp_ew_mod, amp_ew_prepare_mod},
    /* unary.c: the float unary ops of ops/unary.def, one kernel over the list; Clip */
#define AMP_UNARY(Id, FEXPR, DEXPR, PREPARE, TYPES, LUT, CUDA, FUSE) [AMP_OP_##Id] = {amp_ew_unary, PREPARE},
#include "ops/unary.def"
#undef AMP_UNARY
    [AMP_OP_Clip] = {amp_ew_clip, amp_ew_prepare_clip},
    /* activation.c */
    [AMP_OP_PRelu] = {amp_ew_prelu, NULL},
    [AMP_OP_Ms_SigmoidGrad] = {amp_ew_sigmoid_grad, NULL},
    [AMP_OP_Ms_TanhGrad] = {amp_ew_tanh_grad, NULL},
    [AMP_OP_Ms_GeluGrad] = {amp_ew_gelu_grad, amp_ew_prepare_gelu},
    [AMP_OP_Ms_BiasGeluGrad_dX] = {amp_ms_bias_gelu_grad, NULL},
    [AMP_OP_Ms_BiasGelu] = {amp_ew_bias_gelu, amp_ew_prepare_gelu},
    [AMP_OP_Ms_ReluGrad] = {amp_ew_relu_grad, NULL},
    /* softmax.c */
    [AMP_OP_Softmax] = {amp_cpu_softmax, amp_softmax_prepare},
    [AMP_OP_Ms_SoftmaxGrad_13] = {amp_cpu_ms_softmax_grad, amp_softmax_prepare},
    [AMP_OP_Hardmax] = {amp_cpu_hardmax, amp_softmax_prepare},
    [AMP_OP_LogSoftmax] = {amp_cpu_log_softmax, amp_softmax_prepare},
    /* pool.c */
    [AMP_OP_AveragePool] = {amp_cpu_averagepool, amp_conv_prepare},
    [AMP_OP_GlobalAveragePool] = {amp_cpu_global_averagepool, NULL},
    [AMP_OP_MaxPool] = {amp_cpu_maxpool, amp_conv_prepare},
    [AMP_OP_GlobalMaxPool] = {amp_cpu_global_maxpool, NULL},
    /* dropout.c */
    [AMP_OP_Dropout] = {amp_ew_dropout, amp_ew_prepare_dropout},
    [AMP_OP_Ms_DropoutGrad] = {amp_ms_dropout_grad, NULL},
    /* logic.c */
    [AMP_OP_Where] = {amp_ew_where, NULL},
    [AMP_OP_Equal] = {amp_ew_equal, amp_ew_prepare_legacy_bcast},
    [AMP_OP_Less] = {amp_ew_less, amp_ew_prepare_legacy_bcast},
    [AMP_OP_Greater] = {amp_ew_greater, amp_ew_prepare_legacy_bcast},
    [AMP_OP_LessOrEqual] = {amp_ew_less_equal, amp_ew_prepare_legacy_bcast},
    [AMP_OP_GreaterOrEqual] = {amp_ew_greater_equal, amp_ew_prepare_legacy_bcast},
    [AMP_OP_IsInf] = {amp_ew_isinf, amp_ew_prepare_isinf},
    [AMP_OP_IsNaN] = {amp_ew_isnan, NULL},
    [AMP_OP_Not] = {amp_ew_not, NULL},
    [AMP_OP_And] = {amp_ew_and, amp_ew_prepare_legacy_bcast},
    [AMP_OP_Or] = {amp_ew_or, amp_ew_prepare_legacy_bcast},
    /* shape.c */
    [AMP_OP_Reshape] = {amp_cpu_reshape, amp_cpu_reshape_prepare},
    [AMP_OP_Transpose] = {amp_cpu_transpose, amp_transpose_prepare},
    [AMP_OP_Flatten] = {amp_cpu_flatten, NULL},
    [AMP_OP_Squeeze] = {amp_cpu_squeeze, NULL},
    [AMP_OP_Unsqueeze] = {amp_cpu_unsqueeze, amp_cpu_unsqueeze_prepare},
    [AMP_OP_Ms_ConcatTraining] = {amp_ms_concat_training, amp_concat_prepare},
    [AMP_OP_Concat] = {amp_cpu_concat, amp_concat_prepare},
    [AMP_OP_Split] = {amp_cpu_split, amp_split_prepare},
    [AMP_OP_Trilu] = {amp_cpu_trilu, amp_cpu_trilu_prepare},
    [AMP_OP_Expand] = {amp_cpu_expand, NULL},
    [AMP_OP_Tile] = {amp_cpu_tile, NULL},
    [AMP_OP_Identity] = {amp_cpu_identity, NULL},
    [AMP_OP_DepthToSpace] = {amp_cpu_depth_to_space, amp_cpu_depth_space_prepare},
    [AMP_OP_SpaceToDepth] = {amp_cpu_space_to_depth, amp_cpu_depth_space_prepare},
    /* slice.c */
    [AMP_OP_Slice] = {amp_sh_slice, amp_slice_prepare},
    [AMP_OP_Pad] = {amp_sh_pad, amp_pad_prepare},
    /* gather.c */
    [AMP_OP_Gather] = {amp_sh_gather, amp_sh_gather_prepare},
    [AMP_OP_GatherElements] = {amp_sh_gather_elements, amp_sh_gather_prepare},
    [AMP_OP_GatherND] = {amp_sh_gather_nd, amp_sh_gather_nd_prepare},
    [AMP_OP_ScatterND] = {amp_sh_scatter_nd, amp_sh_scatter_nd_prepare},
    [AMP_OP_Ms_GatherGrad] = {amp_ms_gather_grad, amp_sh_gather_prepare},
    /* resize.c */
    [AMP_OP_Resize] = {amp_sh_resize, amp_sh_resize_prepare},
    /* reduce.c */
    [AMP_OP_ReduceMax] = {amp_cpu_reduce_max, amp_reduce_prepare},
    [AMP_OP_ReduceMin] = {amp_cpu_reduce_min, amp_reduce_prepare},
    [AMP_OP_ArgMax] = {amp_cpu_argmax, amp_arg_prepare},
    [AMP_OP_ArgMin] = {amp_cpu_argmin, amp_arg_prepare},
    [AMP_OP_TopK] = {amp_cpu_topk, amp_cpu_topk_prepare},
    [AMP_OP_ReduceSum] = {amp_cpu_reduce_sum, amp_reduce_prepare},
    [AMP_OP_ReduceMean] = {amp_cpu_reduce_mean, amp_reduce_prepare},
    [AMP_OP_ReduceProd] = {amp_cpu_reduce_prod, amp_reduce_prepare},
    [AMP_OP_ReduceSumSquare] = {amp_cpu_reduce_sumsq, amp_reduce_prepare},
    [AMP_OP_ReduceL1] = {amp_cpu_reduce_l1, amp_reduce_prepare},
    [AMP_OP_ReduceL2] = {amp_cpu_reduce_l2, amp_reduce_prepare},
    [AMP_OP_ReduceLogSum] = {amp_cpu_reduce_logsum, amp_reduce_prepare},
    [AMP_OP_ReduceLogSumExp] = {amp_cpu_reduce_logsumexp, amp_reduce_prepare},
    [AMP_OP_CumSum] = {amp_cpu_cumsum, amp_cpu_cumsum_prepare},
    /* loss.c */
    [AMP_OP_SoftmaxCrossEntropyLoss] = {amp_cpu_sce_loss, amp_loss_prepare},
    [AMP_OP_NegativeLogLikelihoodLoss] = {amp_cpu_nll_loss, amp_loss_prepare},
    [AMP_OP_Ms_SoftmaxCrossEntropyLossGrad] = {amp_cpu_ms_sce_loss_grad, amp_loss_prepare},
    /* norm.c */
    [AMP_OP_LayerNormalization] = {amp_cpu_layernorm, amp_norm_prepare},
    [AMP_OP_BatchNormalization] = {amp_cpu_batchnorm, amp_norm_prepare},
    [AMP_OP_InstanceNormalization] = {amp_cpu_instancenorm, amp_norm_prepare},
    [AMP_OP_GroupNormalization] = {amp_cpu_groupnorm, amp_norm_prepare},
    [AMP_OP_LpNormalization] = {amp_cpu_lpnorm, amp_norm_prepare},
    [AMP_OP_LRN] = {amp_cpu_lrn, amp_norm_prepare},
    [AMP_OP_Ms_LayerNormalizationGrad] = {amp_cpu_ms_layernorm_grad, amp_norm_prepare},
    /* optim.c */
    [AMP_OP_Adam] = {amp_cpu_adam, amp_optimizer_prepare},
    [AMP_OP_Momentum] = {amp_cpu_momentum, amp_optimizer_prepare},
    [AMP_OP_Adagrad] = {amp_cpu_adagrad, amp_optimizer_prepare},
    [AMP_OP_Ms_InPlaceAccumulatorV2] = {amp_cpu_ms_accumulator, NULL},
    /* tensor.c */
    [AMP_OP_Shape] = {amp_cpu_shape, amp_shape_prepare},
    [AMP_OP_Size] = {amp_cpu_size, NULL},
    [AMP_OP_Cast] = {amp_cpu_cast, amp_cast_prepare},
    [AMP_OP_CastLike] = {amp_cpu_cast_like, NULL},
    [AMP_OP_Constant] = {amp_cpu_constant, amp_constant_prepare},
    [AMP_OP_ConstantOfShape] = {amp_cpu_constant_of_shape, amp_constant_of_shape_prepare},
    [AMP_OP_Range] = {amp_cpu_range, NULL},
    [AMP_OP_OneHot] = {amp_cpu_one_hot, amp_one_hot_prepare},
    [AMP_OP_NonZero] = {amp_cpu_non_zero, NULL},
    /* fused.c */
    [AMP_OP_Ampc_FusedElementwise] = {amp_cpu_fused_elementwise, amp_fused_prepare},
    [AMP_OP_Ampc_UnscaleCheck] = {amp_cpu_unscale_check, NULL},
    /* comm.c */
    [AMP_OP_Ampc_AllReduceMean] = {amp_cpu_allreduce_mean, NULL},
};

/* The table read by op id (the backends ask through these, so no kernel file reaches the
 * table: it names them, they never name it). */
AmpKernelFn amp_cpu_kernel(AmpOpId op) {
    return (unsigned)op < AMP_OP__COUNT ? amp_cpu_ops[op].run : NULL;
}

AmpKernelPrepareFn amp_cpu_kernel_prepare(AmpOpId op) {
    return (unsigned)op < AMP_OP__COUNT ? amp_cpu_ops[op].prepare : NULL;
}
