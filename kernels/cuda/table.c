/* The CUDA backend's kernels, one entry per op id (designated initializers), grouped by
 * family as kernels/cpu/table.c is: an op with no entry runs on the CPU fallback. */
#include "kernels/cuda/cuda_impl.h"
#include "kernels/cuda/allreduce.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/conv.h"
#include "kernels/cuda/conv_grad.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/fused.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/grad_ops.h"
#include "kernels/cuda/loss.h"
#include "kernels/cuda/movement.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/norm_grad.h"
#include "kernels/cuda/optim.h"
#include "kernels/cuda/reduce.h"
#include "kernels/cuda/resize.h"
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
#include "ops/resize_geom.h"  /* amp_sh_resize_prepare */
#include "ops/sh_common.h"    /* Transpose, Concat, Split, Gather, ScatterND, OneHot, Shape, Constant prepares */
#include "ops/slice.h"        /* amp_slice_prepare */

const AmpCudaOp amp_cuda_ops[AMP_OP__COUNT] = {
    /* allreduce.c: data parallel's gradient all-reduce over NCCL */
    [AMP_OP_Ampc_AllReduceMean] = {amp_cuda_allreduce_mean, NULL, amp_cuda_supports_allreduce},
    /* conv.c, conv_transpose.c: cuDNN */
    [AMP_OP_Conv] = {amp_cuda_conv, amp_conv_prepare, amp_cuda_supports_conv},
    [AMP_OP_ConvTranspose] = {amp_cuda_conv_transpose, amp_conv_prepare, amp_cuda_supports_conv},
    [AMP_OP_MaxPool] = {amp_cuda_maxpool, amp_conv_prepare, amp_cuda_supports_pool},
    [AMP_OP_AveragePool] = {amp_cuda_averagepool, amp_conv_prepare, amp_cuda_supports_pool},
    /* elementwise.c: arithmetic, comparisons, activations, Where, Cast */
    [AMP_OP_Add] = {amp_cuda_add, amp_ew_prepare_legacy_bcast, amp_cuda_supports_arith},
    [AMP_OP_Sub] = {amp_cuda_sub, amp_ew_prepare_legacy_bcast, amp_cuda_supports_arith},
    [AMP_OP_Mul] = {amp_cuda_mul, amp_ew_prepare_legacy_bcast, amp_cuda_supports_arith},
    [AMP_OP_Div] = {amp_cuda_div, amp_ew_prepare_legacy_bcast, amp_cuda_supports_float2},
    [AMP_OP_Pow] = {amp_cuda_pow, amp_ew_prepare_legacy_bcast, amp_cuda_supports_float2},
    [AMP_OP_PRelu] = {amp_cuda_prelu, NULL, amp_cuda_supports_float2},
    [AMP_OP_Sum] = {amp_cuda_sum, NULL, amp_cuda_supports_sum},
    [AMP_OP_Mean] = {amp_cuda_mean, NULL, amp_cuda_supports_sum},
    [AMP_OP_Max] = {amp_cuda_max, NULL, amp_cuda_supports_maxmin},
    [AMP_OP_Min] = {amp_cuda_min, NULL, amp_cuda_supports_maxmin},
    [AMP_OP_Equal] = {amp_cuda_equal, amp_ew_prepare_legacy_bcast, amp_cuda_supports_compare},
    [AMP_OP_Less] = {amp_cuda_less, amp_ew_prepare_legacy_bcast, amp_cuda_supports_compare},
    [AMP_OP_Greater] = {amp_cuda_greater, amp_ew_prepare_legacy_bcast, amp_cuda_supports_compare},
    [AMP_OP_LessOrEqual] = {amp_cuda_less_equal, amp_ew_prepare_legacy_bcast, amp_cuda_supports_compare},
    [AMP_OP_GreaterOrEqual] = {amp_cuda_greater_equal, amp_ew_prepare_legacy_bcast, amp_cuda_supports_compare},
    [AMP_OP_And] = {amp_cuda_and, amp_ew_prepare_legacy_bcast, amp_cuda_supports_bool},
    [AMP_OP_Or] = {amp_cuda_or, amp_ew_prepare_legacy_bcast, amp_cuda_supports_bool},
    [AMP_OP_Not] = {amp_cuda_not, NULL, amp_cuda_supports_bool},
    /* the lines of ops/unary.def that CUDA runs: one kernel over the list */
#define AMP_CUDA_UNARY_SUPPORTS_F amp_cuda_supports_float
#define AMP_CUDA_UNARY_SUPPORTS_FI amp_cuda_supports_float_or_int
#define AMP_UNARY(Id, FEXPR, DEXPR, PREPARE, TYPES, LUT, CUDA, FUSE)                                                   \
    AMP_UNARY_CUDA_##CUDA([AMP_OP_##Id] = {amp_cuda_unary, PREPARE, AMP_CUDA_UNARY_SUPPORTS_##TYPES},)
#include "ops/unary.def"
#undef AMP_UNARY
    [AMP_OP_IsNaN] = {amp_cuda_isnan, NULL, amp_cuda_supports_float},
    [AMP_OP_IsInf] = {amp_cuda_isinf, amp_ew_prepare_isinf, amp_cuda_supports_float},
    [AMP_OP_Clip] = {amp_cuda_clip, amp_ew_prepare_clip, amp_cuda_supports_clip},
    [AMP_OP_Where] = {amp_cuda_where, NULL, amp_cuda_supports_where},
    [AMP_OP_Cast] = {amp_cuda_cast, amp_cast_prepare, amp_cuda_supports_cast},
    [AMP_OP_CastLike] = {amp_cuda_cast_like, NULL, amp_cuda_supports_cast_like},
    /* movement.c, movement_make.c: data movement */
    [AMP_OP_Identity] = {amp_cuda_identity, NULL, amp_cuda_supports_move},
    [AMP_OP_Reshape] = {amp_cuda_identity, NULL, amp_cuda_supports_move},
    [AMP_OP_Flatten] = {amp_cuda_identity, NULL, amp_cuda_supports_move},
    [AMP_OP_Squeeze] = {amp_cuda_identity, NULL, amp_cuda_supports_move},
    [AMP_OP_Unsqueeze] = {amp_cuda_identity, NULL, amp_cuda_supports_move},
    [AMP_OP_Transpose] = {amp_cuda_transpose, amp_transpose_prepare, amp_cuda_supports_move},
    [AMP_OP_Concat] = {amp_cuda_concat, amp_concat_prepare, amp_cuda_supports_concat},
    [AMP_OP_Split] = {amp_cuda_split, amp_split_prepare, amp_cuda_supports_split},
    [AMP_OP_Slice] = {amp_cuda_slice, amp_slice_prepare, amp_cuda_supports_slice},
    [AMP_OP_Expand] = {amp_cuda_expand, NULL, amp_cuda_supports_move},
    [AMP_OP_Tile] = {amp_cuda_tile, NULL, amp_cuda_supports_move},
    [AMP_OP_Pad] = {amp_cuda_pad, amp_pad_prepare, amp_cuda_supports_pad},
    [AMP_OP_Gather] = {amp_cuda_gather, amp_sh_gather_prepare, amp_cuda_supports_gather},
    [AMP_OP_GatherElements] = {amp_cuda_gather_elements, amp_sh_gather_prepare, amp_cuda_supports_gather},
    [AMP_OP_Shape] = {amp_cuda_shape, amp_shape_prepare, amp_cuda_supports_shape},
    [AMP_OP_Size] = {amp_cuda_size, NULL, amp_cuda_supports_shape},
    [AMP_OP_Constant] = {amp_cuda_constant, amp_constant_prepare, amp_cuda_supports_constant},
    [AMP_OP_ConstantOfShape] = {amp_cuda_constant_of_shape, amp_constant_of_shape_prepare,
                                amp_cuda_supports_constant_of_shape},
    [AMP_OP_Range] = {amp_cuda_range, NULL, amp_cuda_supports_range},
    /* resize.c: Resize with the geometry and tables both backends share (ops/resize_geom.h) */
    [AMP_OP_Resize] = {amp_cuda_resize, amp_sh_resize_prepare, amp_cuda_supports_resize},
    /* norm.c: softmax and normalizations */
    [AMP_OP_Softmax] = {amp_cuda_softmax, amp_softmax_prepare, amp_cuda_supports_float},
    [AMP_OP_LogSoftmax] = {amp_cuda_log_softmax, amp_softmax_prepare, amp_cuda_supports_float},
    [AMP_OP_LayerNormalization] = {amp_cuda_layernorm, amp_norm_prepare, amp_cuda_supports_layernorm},
    [AMP_OP_BatchNormalization] = {amp_cuda_batchnorm, amp_norm_prepare, amp_cuda_supports_batchnorm},
    [AMP_OP_InstanceNormalization] = {amp_cuda_instancenorm, amp_norm_prepare, amp_cuda_supports_float},
    [AMP_OP_GroupNormalization] = {amp_cuda_groupnorm, amp_norm_prepare, amp_cuda_supports_float},
    /* reduce.c: reductions */
    [AMP_OP_ReduceSum] = {amp_cuda_reduce_sum, amp_reduce_prepare, amp_cuda_supports_reduce},
    [AMP_OP_ReduceMean] = {amp_cuda_reduce_mean, amp_reduce_prepare, amp_cuda_supports_reduce},
    [AMP_OP_ReduceMax] = {amp_cuda_reduce_max, amp_reduce_prepare, amp_cuda_supports_reduce},
    [AMP_OP_ReduceMin] = {amp_cuda_reduce_min, amp_reduce_prepare, amp_cuda_supports_reduce},
    [AMP_OP_ReduceProd] = {amp_cuda_reduce_prod, amp_reduce_prepare, amp_cuda_supports_reduce},
    [AMP_OP_ReduceSumSquare] = {amp_cuda_reduce_sumsq, amp_reduce_prepare, amp_cuda_supports_reduce},
    [AMP_OP_ReduceL1] = {amp_cuda_reduce_l1, amp_reduce_prepare, amp_cuda_supports_reduce},
    [AMP_OP_ReduceL2] = {amp_cuda_reduce_l2, amp_reduce_prepare, amp_cuda_supports_reduce},
    [AMP_OP_ReduceLogSum] = {amp_cuda_reduce_logsum, amp_reduce_prepare, amp_cuda_supports_reduce},
    [AMP_OP_ReduceLogSumExp] = {amp_cuda_reduce_logsumexp, amp_reduce_prepare, amp_cuda_supports_reduce},
    [AMP_OP_ArgMax] = {amp_cuda_argmax, amp_arg_prepare, amp_cuda_supports_arg},
    [AMP_OP_ArgMin] = {amp_cuda_argmin, amp_arg_prepare, amp_cuda_supports_arg},
    [AMP_OP_GlobalAveragePool] = {amp_cuda_global_averagepool, NULL, amp_cuda_supports_float},
    [AMP_OP_GlobalMaxPool] = {amp_cuda_global_maxpool, NULL, amp_cuda_supports_float},
    /* gemm.c: cuBLASLt */
    [AMP_OP_MatMul] = {amp_cuda_matmul, NULL, amp_cuda_supports_matmul},
    [AMP_OP_Gemm] = {amp_cuda_gemm, amp_gemm_prepare, amp_cuda_supports_matmul},
    [AMP_OP_Ms_FusedMatMul] = {amp_cuda_fused_matmul, amp_fused_matmul_prepare, amp_cuda_supports_fused_matmul},
    /* attention.c, ms_attention.c: cuBLASLt products, an own softmax */
    [AMP_OP_Attention] = {amp_cuda_attention, amp_onnx_attention_prepare, amp_cuda_supports_attention},
    [AMP_OP_Ms_Attention] = {amp_cuda_ms_attention, amp_ms_attention_prepare, amp_cuda_supports_ms_attention},
    [AMP_OP_Ms_MultiHeadAttention] = {amp_cuda_ms_mha, amp_ms_attention_prepare, amp_cuda_supports_ms_mha},
    /* loss.c, norm_grad.c, conv_grad.c: losses and the backward ops of training graphs */
    [AMP_OP_SoftmaxCrossEntropyLoss] = {amp_cuda_sce_loss, amp_loss_prepare, amp_cuda_supports_loss},
    [AMP_OP_NegativeLogLikelihoodLoss] = {amp_cuda_nll_loss, amp_loss_prepare, amp_cuda_supports_loss},
    [AMP_OP_Ms_SoftmaxCrossEntropyLossGrad] = {amp_cuda_ms_sce_loss_grad, amp_loss_prepare,
                                               amp_cuda_supports_loss_grad},
    [AMP_OP_Ms_SoftmaxGrad_13] = {amp_cuda_ms_softmax_grad, amp_softmax_prepare, amp_cuda_supports_float},
    [AMP_OP_Ms_LayerNormalizationGrad] = {amp_cuda_ms_layernorm_grad, amp_norm_prepare,
                                          amp_cuda_supports_layernorm_grad},
    [AMP_OP_Ms_ConvGrad] = {amp_cuda_ms_conv_grad, amp_conv_grad_prepare, amp_cuda_supports_conv_grad},
    /* fused.c: the executor's fused nodes (runtime/fuse.c) */
    [AMP_OP_Ampc_FusedElementwise] = {amp_cuda_fused_elementwise, amp_fused_prepare, amp_cuda_supports_fused},
    [AMP_OP_Ampc_UnscaleCheck] = {amp_cuda_unscale_check, NULL, amp_cuda_supports_fused},
    /* optim.c: the optimizers, multi-tensor kernels honouring the fused update gate */
    [AMP_OP_Adam] = {amp_cuda_adam, amp_optimizer_prepare, amp_cuda_supports_optimizer},
    [AMP_OP_Momentum] = {amp_cuda_momentum, amp_optimizer_prepare, amp_cuda_supports_optimizer},
    [AMP_OP_Adagrad] = {amp_cuda_adagrad, amp_optimizer_prepare, amp_cuda_supports_optimizer},
    /* grad_ops.c, grad_ops_index.c: training ops (element-wise gradients, Dropout's counter-based
     * mask, the accumulator, OneHot, ScatterND, GatherGrad) */
    [AMP_OP_Ms_ReluGrad] = {amp_cuda_relu_grad, NULL, amp_cuda_supports_float},
    [AMP_OP_Ms_SigmoidGrad] = {amp_cuda_sigmoid_grad, NULL, amp_cuda_supports_float},
    [AMP_OP_Ms_TanhGrad] = {amp_cuda_tanh_grad, NULL, amp_cuda_supports_float},
    [AMP_OP_Ms_GeluGrad] = {amp_cuda_gelu_grad, amp_ew_prepare_gelu, amp_cuda_supports_float},
    [AMP_OP_Ms_BiasGelu] = {amp_cuda_bias_gelu, amp_ew_prepare_gelu, amp_cuda_supports_float},
    [AMP_OP_Ms_BiasGeluGrad_dX] = {amp_cuda_bias_gelu_grad_dx, NULL, amp_cuda_supports_float},
    [AMP_OP_Ms_DropoutGrad] = {amp_cuda_dropout_grad_node, NULL, amp_cuda_supports_dropout_grad},
    [AMP_OP_Dropout] = {amp_cuda_dropout_node, amp_ew_prepare_dropout, amp_cuda_supports_dropout},
    [AMP_OP_Ms_InPlaceAccumulatorV2] = {amp_cuda_accumulator, NULL, amp_cuda_supports_accumulator},
    [AMP_OP_OneHot] = {amp_cuda_one_hot_node, amp_one_hot_prepare, amp_cuda_supports_one_hot},
    [AMP_OP_ScatterND] = {amp_cuda_scatter_nd_node, amp_sh_scatter_nd_prepare, amp_cuda_supports_scatter_nd},
    [AMP_OP_Ms_GatherGrad] = {amp_cuda_gather_grad_node, amp_sh_gather_prepare, amp_cuda_supports_gather_grad},
};
