/* The table of geometry functions by op id, and the kernels' way to their geometry
 * (ops/geom.h). */
#include <string.h>

#include "ops/attn_geom.h"
#include "ops/conv_geom.h"
#include "ops/dropout_rng.h"
#include "ops/einsum_geom.h"
#include "ops/ew_common.h"
#include "ops/gemm_attrs.h"
#include "ops/geom.h"
#include "ops/kernel_out.h"
#include "ops/norm_attrs.h"
#include "ops/optim_math.h"
#include "ops/reduce_attrs.h"
#include "ops/rnn_geom.h"
#include "ops/sh_common.h"

typedef struct GeomRow {
    AmpKernelGeomFn fn;
    size_t size;
    bool bare; /* the op has no prepare function: its geometry reads no attributes */
} GeomRow;

#define REDUCE {.fn = amp_reduce_geom, .size = sizeof(AmpReduceGeom)}
#define ARG {.fn = amp_arg_geom, .size = sizeof(AmpArgGeom)}
#define SOFTMAX {.fn = amp_softmax_geom, .size = sizeof(AmpSoftmaxGeom)}

static const GeomRow GEOM[AMP_OP__COUNT] = {
    [AMP_OP_ReduceSum] = REDUCE,
    [AMP_OP_ReduceMean] = REDUCE,
    [AMP_OP_ReduceMax] = REDUCE,
    [AMP_OP_ReduceMin] = REDUCE,
    [AMP_OP_ReduceProd] = REDUCE,
    [AMP_OP_ReduceSumSquare] = REDUCE,
    [AMP_OP_ReduceL1] = REDUCE,
    [AMP_OP_ReduceL2] = REDUCE,
    [AMP_OP_ReduceLogSum] = REDUCE,
    [AMP_OP_ReduceLogSumExp] = REDUCE,
    [AMP_OP_ArgMax] = ARG,
    [AMP_OP_ArgMin] = ARG,
    [AMP_OP_CumSum] = {.fn = amp_cumsum_geom, .size = sizeof(AmpCumSumGeom)},
    [AMP_OP_Softmax] = SOFTMAX,
    [AMP_OP_LogSoftmax] = SOFTMAX,
    [AMP_OP_Hardmax] = SOFTMAX,
    [AMP_OP_Ms_SoftmaxGrad_13] = SOFTMAX,
    [AMP_OP_LayerNormalization] = {.fn = amp_layernorm_geom, .size = sizeof(AmpLayerNormGeom)},
    [AMP_OP_BatchNormalization] = {.fn = amp_batchnorm_geom, .size = sizeof(AmpBatchNormGeom)},
    [AMP_OP_Ms_LayerNormalizationGrad] = {.fn = amp_layernorm_grad_geom, .size = sizeof(AmpLayerNormGeom)},
    [AMP_OP_InstanceNormalization] = {.fn = amp_groupnorm_geom, .size = sizeof(AmpGroupNormGeom)},
    [AMP_OP_GroupNormalization] = {.fn = amp_groupnorm_geom, .size = sizeof(AmpGroupNormGeom)},
    [AMP_OP_LpNormalization] = {.fn = amp_axis_norm_geom, .size = sizeof(AmpAxisGeom)},
    [AMP_OP_LRN] = {.fn = amp_axis_norm_geom, .size = sizeof(AmpAxisGeom)},
    [AMP_OP_SoftmaxCrossEntropyLoss] = {.fn = amp_loss_geom, .size = sizeof(AmpLossGeom)},
    [AMP_OP_NegativeLogLikelihoodLoss] = {.fn = amp_loss_geom, .size = sizeof(AmpLossGeom)},
    [AMP_OP_Ms_SoftmaxCrossEntropyLossGrad] = {.fn = amp_loss_geom, .size = sizeof(AmpLossGeom)},
    [AMP_OP_Dropout] = {.fn = amp_dropout_geom, .size = sizeof(AmpDropoutGeom)},
    [AMP_OP_Ms_DropoutGrad] = {.fn = amp_dropout_grad_geom, .size = sizeof(AmpDropoutGradGeom), .bare = true},
    [AMP_OP_Conv] = {.fn = amp_conv_node_geom, .size = sizeof(AmpWindowGeom)},
    [AMP_OP_ConvTranspose] = {.fn = amp_conv_node_geom, .size = sizeof(AmpWindowGeom)},
    [AMP_OP_Ampc_ConvEpilogue] = {.fn = amp_conv_node_geom, .size = sizeof(AmpWindowGeom)}, /* Conv's, Z checked by its kernel */
    [AMP_OP_MaxPool] = {.fn = amp_pool_geom, .size = sizeof(AmpWindowGeom)},
    [AMP_OP_AveragePool] = {.fn = amp_pool_geom, .size = sizeof(AmpWindowGeom)},
    [AMP_OP_Adam] = {.fn = amp_optimizer_geom, .size = sizeof(AmpOptGeom)},
    [AMP_OP_Momentum] = {.fn = amp_optimizer_geom, .size = sizeof(AmpOptGeom)},
    [AMP_OP_Adagrad] = {.fn = amp_optimizer_geom, .size = sizeof(AmpOptGeom)},
    [AMP_OP_Transpose] = {.fn = amp_transpose_geom, .size = sizeof(AmpTransposeGeom)},
    [AMP_OP_Concat] = {.fn = amp_concat_geom, .size = sizeof(AmpConcatGeom)},
    [AMP_OP_Ms_ConcatTraining] = {.fn = amp_concat_geom, .size = sizeof(AmpConcatGeom)},
    [AMP_OP_Split] = {.fn = amp_split_geom, .size = sizeof(AmpSplitGeom)},
    [AMP_OP_Attention] = {.fn = amp_onnx_attention_geom, .size = sizeof(AmpOnnxAttnGeom)},
    [AMP_OP_Ms_Attention] = {.fn = amp_ms_attention_geom, .size = sizeof(MsAttnDims)},
    [AMP_OP_MatMul] = {.fn = amp_matmul_geom, .size = sizeof(AmpMatmulGeom), .bare = true},
    [AMP_OP_Ms_FusedMatMul] = {.fn = amp_matmul_geom, .size = sizeof(AmpMatmulGeom)},
    [AMP_OP_Gemm] = {.fn = amp_gemm_geom, .size = sizeof(AmpGemmGeom)},
    [AMP_OP_Ms_FusedGemm] = {.fn = amp_gemm_geom, .size = sizeof(AmpGemmGeom)}, /* its attributes begin with Gemm's */
    [AMP_OP_Einsum] = {.fn = amp_einsum_geom, .size = sizeof(AmpEinsumGeom)},
    [AMP_OP_RNN] = {.fn = amp_rnn_geom, .size = sizeof(AmpRnnGeom)},
    [AMP_OP_GRU] = {.fn = amp_rnn_geom, .size = sizeof(AmpRnnGeom)},
    [AMP_OP_LSTM] = {.fn = amp_rnn_geom, .size = sizeof(AmpRnnGeom)},
    [AMP_OP_Ms_BiasGeluGrad_dX] = {.fn = amp_bias_gelu_grad_geom, .size = sizeof(AmpBiasGeluGradGeom), .bare = true},
    [AMP_OP_Ampc_SubScaled] = {.fn = amp_sub_scaled_geom, .size = sizeof(AmpSubScaledGeom), .bare = true},
    [AMP_OP_Ampc_AllReduceMean] = {.fn = amp_allreduce_geom, .size = sizeof(AmpAllReduceGeom), .bare = true},
};

void amp_op_geom(AmpOpId op, AmpKernelGeomFn *fn, size_t *size) {
    const GeomRow *r = op > 0 && op < AMP_OP__COUNT ? &GEOM[op] : NULL;
    *fn = r ? r->fn : NULL;
    *size = r ? r->size : 0;
}

AmpCode amp_kernel_geom(AmpKernelCtx *k, void *own, const void **g) {
    *g = k->geom;
    if (*g) return AMP_OK;
    AmpKernelGeomFn fn;
    size_t size;
    amp_op_geom(k->node->op, &fn, &size);
    if (!fn) return amp_kernel_fail(k, AMP_ERR_INTERNAL, "the op has no geometry function");
    if (!k->attrs && !GEOM[k->node->op].bare)
        return amp_kernel_fail(k, AMP_ERR_INTERNAL, "the node's attributes were not prepared");
    bool made = true;
    AmpCode rc = fn(k, own, &made);
    if (!rc && made) *g = own;
    return rc;
}
