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

#define REDUCE {amp_reduce_geom, sizeof(AmpReduceGeom)}
#define ARG {amp_arg_geom, sizeof(AmpArgGeom)}
#define SOFTMAX {amp_softmax_geom, sizeof(AmpSoftmaxGeom)}

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
    [AMP_OP_CumSum] = {amp_cumsum_geom, sizeof(AmpCumSumGeom)},
    [AMP_OP_Softmax] = SOFTMAX,
    [AMP_OP_LogSoftmax] = SOFTMAX,
    [AMP_OP_Hardmax] = SOFTMAX,
    [AMP_OP_Ms_SoftmaxGrad_13] = SOFTMAX,
    [AMP_OP_LayerNormalization] = {amp_layernorm_geom, sizeof(AmpLayerNormGeom)},
    [AMP_OP_BatchNormalization] = {amp_batchnorm_geom, sizeof(AmpBatchNormGeom)},
    [AMP_OP_Ms_LayerNormalizationGrad] = {amp_layernorm_grad_geom, sizeof(AmpLayerNormGeom)},
    [AMP_OP_InstanceNormalization] = {amp_groupnorm_geom, sizeof(AmpGroupNormGeom)},
    [AMP_OP_GroupNormalization] = {amp_groupnorm_geom, sizeof(AmpGroupNormGeom)},
    [AMP_OP_LpNormalization] = {amp_axis_norm_geom, sizeof(AmpAxisGeom)},
    [AMP_OP_LRN] = {amp_axis_norm_geom, sizeof(AmpAxisGeom)},
    [AMP_OP_SoftmaxCrossEntropyLoss] = {amp_loss_geom, sizeof(AmpLossGeom)},
    [AMP_OP_NegativeLogLikelihoodLoss] = {amp_loss_geom, sizeof(AmpLossGeom)},
    [AMP_OP_Ms_SoftmaxCrossEntropyLossGrad] = {amp_loss_geom, sizeof(AmpLossGeom)},
    [AMP_OP_Dropout] = {amp_dropout_geom, sizeof(AmpDropoutGeom)},
    [AMP_OP_Ms_DropoutGrad] = {amp_dropout_grad_geom, sizeof(AmpDropoutGradGeom), true},
    [AMP_OP_Conv] = {amp_conv_node_geom, sizeof(AmpWindowGeom)},
    [AMP_OP_ConvTranspose] = {amp_conv_node_geom, sizeof(AmpWindowGeom)},
    [AMP_OP_Ampc_ConvEpilogue] = {amp_conv_node_geom, sizeof(AmpWindowGeom)}, /* Conv's, Z checked by its kernel */
    [AMP_OP_MaxPool] = {amp_pool_geom, sizeof(AmpWindowGeom)},
    [AMP_OP_AveragePool] = {amp_pool_geom, sizeof(AmpWindowGeom)},
    [AMP_OP_Adam] = {amp_optimizer_geom, sizeof(AmpOptGeom)},
    [AMP_OP_Momentum] = {amp_optimizer_geom, sizeof(AmpOptGeom)},
    [AMP_OP_Adagrad] = {amp_optimizer_geom, sizeof(AmpOptGeom)},
    [AMP_OP_Transpose] = {amp_transpose_geom, sizeof(AmpTransposeGeom)},
    [AMP_OP_Concat] = {amp_concat_geom, sizeof(AmpConcatGeom)},
    [AMP_OP_Ms_ConcatTraining] = {amp_concat_geom, sizeof(AmpConcatGeom)},
    [AMP_OP_Split] = {amp_split_geom, sizeof(AmpSplitGeom)},
    [AMP_OP_Attention] = {amp_onnx_attention_geom, sizeof(AmpOnnxAttnGeom)},
    [AMP_OP_Ms_Attention] = {amp_ms_attention_geom, sizeof(MsAttnDims)},
    [AMP_OP_MatMul] = {amp_matmul_geom, sizeof(AmpMatmulGeom), true},
    [AMP_OP_Ms_FusedMatMul] = {amp_matmul_geom, sizeof(AmpMatmulGeom)},
    [AMP_OP_Gemm] = {amp_gemm_geom, sizeof(AmpGemmGeom)},
    [AMP_OP_Ms_FusedGemm] = {amp_gemm_geom, sizeof(AmpGemmGeom)}, /* its attributes begin with Gemm's */
    [AMP_OP_Einsum] = {amp_einsum_geom, sizeof(AmpEinsumGeom)},
    [AMP_OP_RNN] = {amp_rnn_geom, sizeof(AmpRnnGeom)},
    [AMP_OP_GRU] = {amp_rnn_geom, sizeof(AmpRnnGeom)},
    [AMP_OP_LSTM] = {amp_rnn_geom, sizeof(AmpRnnGeom)},
    [AMP_OP_Ms_BiasGeluGrad_dX] = {amp_bias_gelu_grad_geom, sizeof(AmpBiasGeluGradGeom), true},
    [AMP_OP_Ampc_SubScaled] = {amp_sub_scaled_geom, sizeof(AmpSubScaledGeom), true},
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
