/* The gradient rule table: one row per differentiable op, indexed by the op ids of
 * ir/ops.def (a designated initializer names AMP_OP_<Id>, so a row for an op the table
 * lacks does not compile); the helpers the rule families share are grad_helpers.c's. */
#include "passes/grad_impl.h"

#define S(i) AMP_SLOT(i)

static const AmpGradRule rules[AMP_OP__COUNT] = {
    /* matrix products (grad_rules_math.c) */
    [AMP_OP_MatMul] = {amp_grad_matmul, S(0) | S(1)},
    [AMP_OP_Gemm] = {amp_grad_gemm, S(0) | S(1) | S(2)},
    /* elementwise arithmetic, broadcasting summed back (grad_rules_math.c) */
    [AMP_OP_Add] = {amp_grad_add, S(0) | S(1)},
    [AMP_OP_Sub] = {amp_grad_sub, S(0) | S(1)},
    [AMP_OP_Mul] = {amp_grad_mul, S(0) | S(1)},
    [AMP_OP_Div] = {amp_grad_div, S(0) | S(1)},
    [AMP_OP_Neg] = {amp_grad_neg, S(0)},
    [AMP_OP_Pow] = {amp_grad_pow, S(0) | S(1)},
    [AMP_OP_Relu] = {amp_grad_relu, S(0)},
    [AMP_OP_Sigmoid] = {amp_grad_sigmoid, S(0)},
    [AMP_OP_Tanh] = {amp_grad_tanh, S(0)},
    [AMP_OP_Exp] = {amp_grad_exp, S(0)},
    [AMP_OP_Log] = {amp_grad_log, S(0)},
    [AMP_OP_Sqrt] = {amp_grad_sqrt, S(0)},
    [AMP_OP_Erf] = {amp_grad_erf, S(0)},
    [AMP_OP_Gelu] = {amp_grad_gelu, S(0)},
    [AMP_OP_Abs] = {amp_grad_abs, S(0)},
    [AMP_OP_Reciprocal] = {amp_grad_reciprocal, S(0)},
    [AMP_OP_LeakyRelu] = {amp_grad_leaky_relu, S(0)},
    [AMP_OP_Clip] = {amp_grad_clip, S(0)},
    [AMP_OP_HardSigmoid] = {amp_grad_hard_sigmoid, S(0)},
    [AMP_OP_HardSwish] = {amp_grad_hard_swish, S(0)},
    [AMP_OP_Max] = {amp_grad_max_min, AMP_SLOTS_ALL},
    [AMP_OP_Min] = {amp_grad_max_min, AMP_SLOTS_ALL},
    /* data movement (grad_rules_shape.c) */
    [AMP_OP_Identity] = {amp_grad_identity, S(0)},
    [AMP_OP_Cast] = {amp_grad_cast, S(0)},
    [AMP_OP_Reshape] = {amp_grad_reshape, S(0)},
    [AMP_OP_Flatten] = {amp_grad_reshape, S(0)},
    [AMP_OP_Squeeze] = {amp_grad_reshape, S(0)},
    [AMP_OP_Unsqueeze] = {amp_grad_reshape, S(0)},
    [AMP_OP_Transpose] = {amp_grad_transpose, S(0)},
    [AMP_OP_Concat] = {amp_grad_concat, AMP_SLOTS_ALL},
    [AMP_OP_Gather] = {amp_grad_gather, S(0)},
    [AMP_OP_ReduceSum] = {amp_grad_reduce_sum, S(0)},
    [AMP_OP_ReduceMean] = {amp_grad_reduce_mean, S(0)},
    [AMP_OP_ReduceMax] = {amp_grad_reduce_max, S(0)},
    [AMP_OP_ReduceMin] = {amp_grad_reduce_max, S(0)},
    [AMP_OP_Split] = {amp_grad_split, S(0)},
    [AMP_OP_Slice] = {amp_grad_slice, S(0)},
    [AMP_OP_Tile] = {amp_grad_tile, S(0)},
    [AMP_OP_Expand] = {amp_grad_expand, S(0)},
    [AMP_OP_Where] = {amp_grad_where, S(1) | S(2)},
    [AMP_OP_Dropout] = {amp_grad_dropout, S(0)},
    /* convolutions and pooling (grad_rules_conv.c) */
    [AMP_OP_Conv] = {amp_grad_conv, S(0) | S(1) | S(2)},
    [AMP_OP_ConvTranspose] = {amp_grad_conv_transpose, S(0) | S(1) | S(2)},
    [AMP_OP_MaxPool] = {amp_grad_max_pool, S(0)},
    [AMP_OP_AveragePool] = {amp_grad_average_pool, S(0)},
    [AMP_OP_GlobalAveragePool] = {amp_grad_global_average_pool, S(0)},
    /* normalisations and losses (grad_rules_nn.c) */
    [AMP_OP_Softmax] = {amp_grad_softmax, S(0)},
    [AMP_OP_LogSoftmax] = {amp_grad_log_softmax, S(0)},
    [AMP_OP_LayerNormalization] = {amp_grad_layer_norm, S(0) | S(1) | S(2)},
    [AMP_OP_BatchNormalization] = {amp_grad_batch_norm, S(0) | S(1) | S(2)},
    [AMP_OP_SoftmaxCrossEntropyLoss] = {amp_grad_softmax_ce, S(0)},
};

const AmpGradRule *amp_grad_rule(AmpOpId op) {
    return &rules[(unsigned)op < AMP_OP__COUNT ? op : AMP_OP_UNKNOWN];
}

bool amp_grad_has_rule(AmpOpId op) { return amp_grad_rule(op)->fn != NULL; }

size_t amp_grad_rule_count(void) {
    size_t n = 0;
    for (int i = 0; i < AMP_OP__COUNT; i++) n += rules[i].fn != NULL;
    return n;
}
