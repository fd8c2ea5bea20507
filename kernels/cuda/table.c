/* The CUDA backend's kernels, one entry per op id (designated initializers), grouped by
 * family as kernels/cpu/table.c is: an op with no entry runs on the CPU fallback. */
#include "cuda_impl.h"
#include "conv.h"
#include "gemm.h"
#include "movement.h"
#include "norm.h"
#include "reduce.h"

bool amp_cuda_is_float(int dtype) {
    return dtype == AMP_DT_FLOAT || dtype == AMP_DT_FLOAT16 || dtype == AMP_DT_BFLOAT16;
}

bool amp_cuda_supports_float(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    (void)opset;
    int dt = AMP_DT_UNDEFINED;
    for (int i = 0; i < n->n_inputs; i++) {
        if (!n->inputs[i]) continue;
        if (!amp_cuda_is_float(in_dtypes[i]) || (dt && in_dtypes[i] != dt)) return false;
        dt = in_dtypes[i];
    }
    return dt != AMP_DT_UNDEFINED;
}

const AmpCudaOp amp_cuda_ops[AMP_OP__COUNT] = {
    /* conv.c: cuDNN */
    [AMP_OP_Conv] = {amp_cuda_conv, amp_cpu_conv_prepare, amp_cuda_supports_conv},
    [AMP_OP_MaxPool] = {amp_cuda_maxpool, amp_cpu_conv_prepare, amp_cuda_supports_pool},
    [AMP_OP_AveragePool] = {amp_cuda_averagepool, amp_cpu_conv_prepare, amp_cuda_supports_pool},
    /* movement.c, movement_make.c: data movement */
    [AMP_OP_Identity] = {amp_cuda_identity, NULL, amp_cuda_supports_move},
    [AMP_OP_Reshape] = {amp_cuda_identity, NULL, amp_cuda_supports_move},
    [AMP_OP_Flatten] = {amp_cuda_identity, NULL, amp_cuda_supports_move},
    [AMP_OP_Squeeze] = {amp_cuda_identity, NULL, amp_cuda_supports_move},
    [AMP_OP_Unsqueeze] = {amp_cuda_identity, NULL, amp_cuda_supports_move},
    [AMP_OP_Transpose] = {amp_cuda_transpose, amp_cuda_mv_transpose_prepare, amp_cuda_supports_move},
    [AMP_OP_Concat] = {amp_cuda_concat, amp_cuda_mv_concat_prepare, amp_cuda_supports_concat},
    [AMP_OP_Split] = {amp_cuda_split, amp_cuda_mv_split_prepare, amp_cuda_supports_split},
    [AMP_OP_Slice] = {amp_cuda_slice, amp_cuda_mv_slice_prepare, amp_cuda_supports_slice},
    [AMP_OP_Expand] = {amp_cuda_expand, NULL, amp_cuda_supports_move},
    [AMP_OP_Tile] = {amp_cuda_tile, NULL, amp_cuda_supports_move},
    [AMP_OP_Pad] = {amp_cuda_pad, amp_cuda_mv_pad_prepare, amp_cuda_supports_pad},
    [AMP_OP_Gather] = {amp_cuda_gather, amp_cuda_mv_gather_prepare, amp_cuda_supports_gather},
    [AMP_OP_GatherElements] = {amp_cuda_gather_elements, amp_cuda_mv_gather_prepare, amp_cuda_supports_gather},
    [AMP_OP_Shape] = {amp_cuda_shape, amp_cuda_mv_shape_prepare, amp_cuda_supports_shape},
    [AMP_OP_Size] = {amp_cuda_size, NULL, amp_cuda_supports_shape},
    [AMP_OP_Constant] = {amp_cuda_constant, amp_cuda_mv_constant_prepare, amp_cuda_supports_constant},
    [AMP_OP_ConstantOfShape] = {amp_cuda_constant_of_shape, amp_cuda_mv_fill_prepare,
                                amp_cuda_supports_constant_of_shape},
    [AMP_OP_Range] = {amp_cuda_range, NULL, amp_cuda_supports_range},
    /* norm.c: softmax and normalizations */
    [AMP_OP_Softmax] = {amp_cuda_softmax, amp_cuda_softmax_prepare, amp_cuda_supports_float},
    [AMP_OP_LogSoftmax] = {amp_cuda_log_softmax, amp_cuda_softmax_prepare, amp_cuda_supports_float},
    [AMP_OP_LayerNormalization] = {amp_cuda_layernorm, amp_cuda_norm_prepare, amp_cuda_supports_layernorm},
    [AMP_OP_BatchNormalization] = {amp_cuda_batchnorm, amp_cuda_norm_prepare, amp_cuda_supports_batchnorm},
    [AMP_OP_InstanceNormalization] = {amp_cuda_instancenorm, amp_cuda_norm_prepare, amp_cuda_supports_float},
    [AMP_OP_GroupNormalization] = {amp_cuda_groupnorm, amp_cuda_norm_prepare, amp_cuda_supports_float},
    /* reduce.c: reductions */
    [AMP_OP_ReduceSum] = {amp_cuda_reduce_sum, amp_cuda_reduce_prepare, amp_cuda_supports_reduce},
    [AMP_OP_ReduceMean] = {amp_cuda_reduce_mean, amp_cuda_reduce_prepare, amp_cuda_supports_reduce},
    [AMP_OP_ReduceMax] = {amp_cuda_reduce_max, amp_cuda_reduce_prepare, amp_cuda_supports_reduce},
    [AMP_OP_ReduceMin] = {amp_cuda_reduce_min, amp_cuda_reduce_prepare, amp_cuda_supports_reduce},
    [AMP_OP_ReduceProd] = {amp_cuda_reduce_prod, amp_cuda_reduce_prepare, amp_cuda_supports_reduce},
    [AMP_OP_ReduceSumSquare] = {amp_cuda_reduce_sumsq, amp_cuda_reduce_prepare, amp_cuda_supports_reduce},
    [AMP_OP_ReduceL1] = {amp_cuda_reduce_l1, amp_cuda_reduce_prepare, amp_cuda_supports_reduce},
    [AMP_OP_ReduceL2] = {amp_cuda_reduce_l2, amp_cuda_reduce_prepare, amp_cuda_supports_reduce},
    [AMP_OP_ReduceLogSum] = {amp_cuda_reduce_logsum, amp_cuda_reduce_prepare, amp_cuda_supports_reduce},
    [AMP_OP_ReduceLogSumExp] = {amp_cuda_reduce_logsumexp, amp_cuda_reduce_prepare, amp_cuda_supports_reduce},
    [AMP_OP_ArgMax] = {amp_cuda_argmax, amp_cuda_arg_prepare, amp_cuda_supports_arg},
    [AMP_OP_ArgMin] = {amp_cuda_argmin, amp_cuda_arg_prepare, amp_cuda_supports_arg},
    [AMP_OP_GlobalAveragePool] = {amp_cuda_global_averagepool, NULL, amp_cuda_supports_float},
    [AMP_OP_GlobalMaxPool] = {amp_cuda_global_maxpool, NULL, amp_cuda_supports_float},
    /* gemm.c: cuBLASLt */
    [AMP_OP_MatMul] = {amp_cuda_matmul, NULL, amp_cuda_supports_matmul},
    [AMP_OP_Gemm] = {amp_cuda_gemm, amp_cpu_gemm_prepare, amp_cuda_supports_matmul},
    [AMP_OP_Ms_FusedMatMul] = {amp_cuda_fused_matmul, amp_cpu_fused_matmul_prepare, amp_cuda_supports_fused_matmul},
};
