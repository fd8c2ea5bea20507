/* The CUDA backend's kernels, one entry per op id (designated initializers), grouped by
 * family as kernels/cpu/table.c is: an op with no entry runs on the CPU fallback. */
#include "cuda_impl.h"
#include "conv.h"
#include "gemm.h"

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
    /* gemm.c: cuBLASLt */
    [AMP_OP_MatMul] = {amp_cuda_matmul, NULL, amp_cuda_supports_matmul},
    [AMP_OP_Gemm] = {amp_cuda_gemm, amp_cpu_gemm_prepare, amp_cuda_supports_matmul},
    [AMP_OP_Ms_FusedMatMul] = {amp_cuda_fused_matmul, amp_cpu_fused_matmul_prepare, amp_cuda_supports_fused_matmul},
};
