/* The op table (ir/ops.def, ir/ops.c): every row is found again by lookup, classes and
 * float-input masks match the lists below (docs/design.md, "The colouring lists and the
 * rules beside them"), attribute types and opsets are described. docs/ops.md is checked
 * by the test ops_md_current (tools/gen_ops_md.c). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

static AmpOpId op(const char *domain, const char *name) {
    AmpOpId id = amp_op_lookup(domain, name);
    cr_assert_neq(id, AMP_OP_UNKNOWN, "%s %s is not in the op table", domain, name);
    return id;
}

Test(ops, every_row_round_trips) {
    for (int id = 1; id < AMP_OP__COUNT; id++) {
        const AmpOpInfo *in = amp_op_info((AmpOpId)id);
        cr_assert(in->name && in->name[0], "row %d has no name", id);
        cr_assert_eq(amp_op_lookup(in->domain, in->name), (AmpOpId)id, "%s", in->name);
        if (!in->domain[0]) {
            cr_assert_eq(amp_op_lookup(NULL, in->name), (AmpOpId)id, "%s", in->name);
            cr_assert_eq(amp_op_lookup("ai.onnx", in->name), (AmpOpId)id, "%s", in->name);
        }
        /* (domain, name) pairs are unique */
        for (int j = 1; j < id; j++) {
            const AmpOpInfo *o = amp_op_info((AmpOpId)j);
            cr_assert(strcmp(o->name, in->name) || strcmp(o->domain, in->domain),
                      "%s/%s twice", in->domain, in->name);
        }
    }
}

Test(ops, unknown_ops) {
    cr_assert_eq(amp_op_lookup("", "NoSuchOp"), AMP_OP_UNKNOWN);
    cr_assert_eq(amp_op_lookup("", "matmul"), AMP_OP_UNKNOWN); /* names are case-sensitive */
    cr_assert_eq(amp_op_lookup("com.microsoft", "MatMul"), AMP_OP_UNKNOWN);
    cr_assert_eq(amp_op_lookup("", "FusedMatMul"), AMP_OP_UNKNOWN);
    cr_assert_eq(amp_op_lookup("ai.onnx.ml", "LinearRegressor"), AMP_OP_UNKNOWN);
    cr_assert_eq(amp_op_lookup("", ""), AMP_OP_UNKNOWN);
    cr_assert_eq(amp_op_lookup("", NULL), AMP_OP_UNKNOWN);
    const AmpOpInfo *u = amp_op_info(AMP_OP_UNKNOWN);
    cr_assert_eq(u->fp16_class, AMP_CLASS_NEVER);
    cr_assert_eq(u->float_inputs, AMP_SLOTS_NONE);
    cr_assert_null(u->infer);
    cr_assert_eq(amp_op_info((AmpOpId)AMP_OP__COUNT), u);
}

Test(ops, domains_and_ids) {
    cr_assert_eq(op("com.microsoft", "Attention"), AMP_OP_Ms_Attention);
    cr_assert_eq(op("", "Attention"), AMP_OP_Attention);
    cr_assert_eq(op("ai.onnx.preview.training", "Adam"), AMP_OP_Adam);
    cr_assert_eq(amp_op_lookup("", "Adam"), AMP_OP_UNKNOWN);
    cr_assert_eq(op("com.microsoft", "SoftmaxGrad_13"), AMP_OP_Ms_SoftmaxGrad_13);
}

/* The default fp16 lists, written out op by op, so that a change to ir/ops.def's classes
 * is a change here too, with its reason ("ms:" = com.microsoft, "tr:" =
 * ai.onnx.preview.training; docs/design.md, "The colouring lists"). */
static const char *const ALLOW[] = {"MatMul", "Gemm", "Conv", "ConvTranspose", "Einsum", "Attention",
    "LSTM", "GRU", "RNN", "ms:FusedMatMul", "ms:FusedGemm", "ms:Attention", "ms:MultiHeadAttention",
    "ms:ConvGrad"};
static const char *const INFER[] = {"Add", "Sub", "Mul", "Div", "Sum", "Mean", "Sqrt", "Sigmoid",
    "Tanh", "Erf", "Gelu", "Softmax", "Elu", "Selu", "LeakyRelu", "PRelu", "HardSigmoid",
    "HardSwish", "Softsign", "AveragePool", "GlobalAveragePool", "Dropout", "Clip", "Where",
    "ms:SigmoidGrad", "ms:TanhGrad", "ms:GeluGrad", "ms:BiasGelu", "ms:SoftmaxGrad_13",
    /* smooth and bounded, or log-like, or no larger than the input */
    "Atan", "Asinh", "Celu", "Shrink",
    /* Dropout's backward, as Dropout */
    "ms:DropoutGrad", "ms:BiasGeluGrad_dX"};
static const char *const CLEAR[] = {"Relu", "MaxPool", "GlobalMaxPool", "Reshape", "Transpose",
    "Flatten", "Squeeze", "Unsqueeze", "Concat", "Split", "Slice", "Gather", "GatherElements",
    "GatherND", "ScatterND", "Expand", "Tile", "Pad", "Identity", "Max", "Min", "Abs", "Neg",
    "Sign", "Ceil", "Floor", "Round", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual",
    "IsInf", "IsNaN", "DepthToSpace", "SpaceToDepth", "Resize", "ReduceMax", "ReduceMin",
    "ArgMax", "ArgMin", "TopK", "ms:ReluGrad",
    /* Concat that also gives the lengths */
    "ms:ConcatTraining",
    /* no arithmetic (Trilu makes causal masks; ThresholdedRelu is a Relu with a threshold) */
    "Trilu", "ThresholdedRelu",
    /* as ArgMax, it only compares, and its 0/1 output is exact */
    "Hardmax"};
static const char *const DENY[] = {"Exp", "Log", "Pow", "Reciprocal", "Softplus", "LogSoftmax",
    "ReduceSum", "ReduceMean", "ReduceProd", "ReduceSumSquare", "ReduceL1", "ReduceL2",
    "ReduceLogSum", "ReduceLogSumExp", "CumSum", "SoftmaxCrossEntropyLoss",
    "NegativeLogLikelihoodLoss", "BatchNormalization", "LayerNormalization",
    "InstanceNormalization", "GroupNormalization", "LpNormalization", "tr:Adam", "tr:Momentum",
    "tr:Adagrad", "ms:SoftmaxCrossEntropyLossGrad", "ms:LayerNormalizationGrad",
    "ms:InPlaceAccumulatorV2", "ms:AdamWOptimizer", "ms:SGDOptimizerV2",
    /* Gather's backward scatter-adds rows */
    "ms:GatherGrad",
    /* (their reasons are in docs/ops.md) LRN (AlexNet, ZFNet, Inception v1), denied for LpNormalization's reason, a sum of
     * squares; the trigonometric functions (Sin and Cos make rotary embeddings), whose
     * argument keeps too few bits in 16, and those that are steep or grow like exp. */
    "LRN", "Sin", "Cos", "Tan", "Asin", "Acos", "Atanh", "Acosh", "Sinh", "Cosh",
    /* Mod (PyTorch exports compute index arithmetic with it): a remainder of rounded
     * inputs can be off by a whole divisor */
    "Mod"};
/* never: the design names no ops, only kinds (shape, integer, bool ops, control flow) */
static const char *const NEVER[] = {"Shape", "Cast", "Constant", "ConstantOfShape", "Range",
    "OneHot", "Not", "And", "Or", "If", "Loop", "Scan", "Size", "NonZero", "CastLike",
    /* the executor's fused nodes (runtime/fuse.c): never in a model the passes see */
    "ampc:FusedElementwise", "ampc:UnscaleCheck", "ampc:ConvEpilogue",
    "ampc:SubScaled", "ampc:AllReduceMean"};

static AmpOpId op_spec(const char *spec) {
    if (!strncmp(spec, "ms:", 3)) return op("com.microsoft", spec + 3);
    if (!strncmp(spec, "tr:", 3)) return op("ai.onnx.preview.training", spec + 3);
    if (!strncmp(spec, "ampc:", 5)) return op("ai.ampc", spec + 5);
    return op("", spec);
}

static void check_list(const char *const *names, size_t n, AmpOpClass want) {
    for (size_t i = 0; i < n; i++) {
        const AmpOpInfo *in = amp_op_info(op_spec(names[i]));
        cr_expect_eq(in->fp16_class, want, "%s is %s, the list says %s", names[i],
                     amp_op_class_name(in->fp16_class), amp_op_class_name(want));
    }
}

#define CHECK(list, cls) check_list(list, sizeof list / sizeof list[0], cls)

Test(ops, fp16_classes_match_design) {
    CHECK(ALLOW, AMP_CLASS_ALLOW);
    CHECK(INFER, AMP_CLASS_INFER);
    CHECK(CLEAR, AMP_CLASS_CLEAR);
    CHECK(DENY, AMP_CLASS_DENY);
    CHECK(NEVER, AMP_CLASS_NEVER);
    /* every row is in one of the lists above */
    size_t total = sizeof ALLOW / sizeof *ALLOW + sizeof INFER / sizeof *INFER +
                   sizeof CLEAR / sizeof *CLEAR + sizeof DENY / sizeof *DENY +
                   sizeof NEVER / sizeof *NEVER;
    cr_expect_eq(total, (size_t)AMP_OP__COUNT - 1, "ops.def has ops these lists lack");
}

/* bf16 only moves ops from deny to infer, and only the reductions/normalisations
 * documented in ops.def. */
Test(ops, bf16_classes) {
    static const char *const moved[] = {"ReduceMean", "InstanceNormalization", "GroupNormalization"};
    for (int id = 1; id < AMP_OP__COUNT; id++) {
        const AmpOpInfo *in = amp_op_info((AmpOpId)id);
        bool is_moved = false;
        for (size_t k = 0; k < sizeof moved / sizeof *moved; k++)
            if (!in->domain[0] && !strcmp(in->name, moved[k])) is_moved = true;
        if (is_moved) {
            cr_expect_eq(in->fp16_class, AMP_CLASS_DENY, "%s", in->name);
            cr_expect_eq(in->bf16_class, AMP_CLASS_INFER, "%s", in->name);
        } else {
            cr_expect_eq(in->bf16_class, in->fp16_class, "%s differs for bf16", in->name);
        }
    }
    cr_expect_eq(amp_op_info(op("", "Exp"))->bf16_class, AMP_CLASS_DENY);
    cr_expect_eq(amp_op_info(op("", "BatchNormalization"))->bf16_class, AMP_CLASS_DENY);
    cr_expect_eq(amp_op_info(op("", "SoftmaxCrossEntropyLoss"))->bf16_class, AMP_CLASS_DENY);
}

Test(ops, float_input_masks) {
    struct {
        const char *op;
        uint32_t mask;
    } cases[] = {
        {"Reshape", AMP_SLOT(0)},
        {"Resize", AMP_SLOT(0)},
        {"Where", AMP_SLOT(1) | AMP_SLOT(2)},
        {"Range", AMP_SLOTS_NONE},
        {"Cast", AMP_SLOTS_NONE},
        {"Shape", AMP_SLOTS_NONE},
        {"ConstantOfShape", AMP_SLOTS_NONE},
        {"Clip", AMP_SLOT(0) | AMP_SLOT(1) | AMP_SLOT(2)},
        {"Gather", AMP_SLOT(0)},
        {"Pad", AMP_SLOT(0) | AMP_SLOT(2)},
        {"Dropout", AMP_SLOT(0)},
        {"BatchNormalization", AMP_SLOT(0)},
        {"LayerNormalization", AMP_SLOT(0) | AMP_SLOT(1) | AMP_SLOT(2)},
        {"Squeeze", AMP_SLOT(0)},
        {"Unsqueeze", AMP_SLOT(0)},
        {"Slice", AMP_SLOT(0)},
        {"Split", AMP_SLOT(0)},
        {"Expand", AMP_SLOT(0)},
        {"TopK", AMP_SLOT(0)},
        {"Concat", AMP_SLOTS_ALL},
        {"MatMul", AMP_SLOT(0) | AMP_SLOT(1)},
        {"tr:Adam", AMP_SLOTS_ALL & ~AMP_SLOT(1)},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        cr_expect_eq(amp_op_info(op_spec(cases[i].op))->float_inputs, cases[i].mask, "%s",
                     cases[i].op);
    for (int id = 1; id < AMP_OP__COUNT; id++) {
        const AmpOpInfo *in = amp_op_info((AmpOpId)id);
        if (in->fp16_class == AMP_CLASS_NEVER)
            cr_expect_eq(in->float_inputs, AMP_SLOTS_NONE, "%s is never but has float slots", in->name);
        else
            cr_expect_neq(in->float_inputs, AMP_SLOTS_NONE, "%s has no float slot", in->name);
    }
}

Test(ops, rows_are_sane) {
    for (int id = 1; id < AMP_OP__COUNT; id++) {
        const AmpOpInfo *in = amp_op_info((AmpOpId)id);
        cr_expect(in->min_inputs >= 0 && (in->max_inputs < 0 || in->max_inputs >= in->min_inputs),
                  "%s inputs", in->name);
        cr_expect(in->min_outputs >= 0 && (in->max_outputs < 0 || in->max_outputs >= in->min_outputs),
                  "%s outputs", in->name);
        cr_expect(in->infer != NULL, "%s has no inference", in->name);
        cr_expect(in->doc && strlen(in->doc) > 5 && !strchr(in->doc, '|') && !strchr(in->doc, '\n'),
                  "%s doc", in->name);
    }
}

Test(ops, class_names) {
    cr_expect_str_eq(amp_op_class_name(AMP_CLASS_ALLOW), "allow");
    cr_expect_str_eq(amp_op_class_name(AMP_CLASS_INFER), "infer");
    cr_expect_str_eq(amp_op_class_name(AMP_CLASS_CLEAR), "clear");
    cr_expect_str_eq(amp_op_class_name(AMP_CLASS_DENY), "deny");
    cr_expect_str_eq(amp_op_class_name(AMP_CLASS_NEVER), "never");
}

Test(ops, attribute_types) {
    cr_expect_eq(amp_op_attr_type(AMP_OP_Gemm, "alpha", 13, NULL, NULL), AMP_ATTR_FLOAT);
    cr_expect_eq(amp_op_attr_type(AMP_OP_Gemm, "transA", 0, NULL, NULL), AMP_ATTR_INT);
    cr_expect_eq(amp_op_attr_type(AMP_OP_Conv, "pads", 11, NULL, NULL), AMP_ATTR_INTS);
    cr_expect_eq(amp_op_attr_type(AMP_OP_Conv, "auto_pad", 11, NULL, NULL), AMP_ATTR_STRING);
    cr_expect_eq(amp_op_attr_type(AMP_OP_If, "then_branch", 13, NULL, NULL), AMP_ATTR_GRAPH);
    cr_expect_eq(amp_op_attr_type(AMP_OP_Constant, "value", 13, NULL, NULL), AMP_ATTR_TENSOR);
    cr_expect_eq(amp_op_attr_type(AMP_OP_LSTM, "activations", 14, NULL, NULL), AMP_ATTR_STRINGS);
    cr_expect_eq(amp_op_attr_type(AMP_OP_Clip, "min", 6, NULL, NULL), AMP_ATTR_FLOAT);
    cr_expect_eq(amp_op_attr_type(AMP_OP_Ms_FusedMatMul, "alpha", 1, NULL, NULL), AMP_ATTR_FLOAT);
    cr_expect_eq(amp_op_attr_type(AMP_OP_Adam, "norm_coefficient", 1, NULL, NULL), AMP_ATTR_FLOAT);
    /* Cast's `to` changed type: each version its own, no version both (any type). */
    cr_expect_eq(amp_op_attr_type(AMP_OP_Cast, "to", 1, NULL, NULL), AMP_ATTR_STRING);
    cr_expect_eq(amp_op_attr_type(AMP_OP_Cast, "to", 13, NULL, NULL), AMP_ATTR_INT);
    cr_expect_eq(amp_op_attr_type(AMP_OP_Cast, "to", 0, NULL, NULL), AMP_OP_ATTR_ANY);
    /* In other versions only, with the range that has it. */
    int since = -1, until = -1;
    cr_expect_eq(amp_op_attr_type(AMP_OP_ReduceSum, "axes", 13, &since, &until), AMP_OP_ATTR_OTHER);
    cr_expect(since == 1 && until == 13, "ReduceSum axes: [%d, %d)", since, until);
    cr_expect_eq(amp_op_attr_type(AMP_OP_ReduceSum, "axes", 11, NULL, NULL), AMP_ATTR_INTS);
    cr_expect_eq(amp_op_attr_type(AMP_OP_ReduceMean, "noop_with_empty_axes", 13, &since, &until), AMP_OP_ATTR_OTHER);
    cr_expect(since == 18 && until == 0, "ReduceMean noop_with_empty_axes: [%d, %d)", since, until);
    cr_expect_eq(amp_op_attr_type(AMP_OP_Cast, "to", 24, NULL, NULL), AMP_ATTR_INT);
    /* ai.onnx lists are complete: an unlisted name is no attribute of the op; other
     * domains' unlisted names take any type. */
    cr_expect_eq(amp_op_attr_type(AMP_OP_Gemm, "no_such_attr", 13, NULL, NULL), AMP_OP_ATTR_UNKNOWN);
    cr_expect_eq(amp_op_attr_type(AMP_OP_Relu, "alpha", 14, NULL, NULL), AMP_OP_ATTR_UNKNOWN);
    cr_expect_eq(amp_op_attr_type(AMP_OP_Ms_FusedMatMul, "no_such_attr", 1, NULL, NULL), AMP_OP_ATTR_ANY);
    cr_expect_eq(amp_op_attr_type(AMP_OP_UNKNOWN, "alpha", 13, NULL, NULL), AMP_OP_ATTR_ANY);
    cr_expect_eq(amp_op_attr_type(AMP_OP_Gemm, NULL, 13, NULL, NULL), AMP_OP_ATTR_ANY);
}

/* ---- OPSETS column (passes/amp_opsets.c reads it) ----------------------------------- */

Test(ops, opsets_column) {
    const AmpOpInfo *conv = amp_op_info(AMP_OP_Conv);
    cr_expect_eq(conv->opset_fp16, 1);
    cr_expect_eq(conv->opset_bf16, 22); /* Conv takes bfloat16 from opset 22 */
    cr_expect_eq(amp_op_info(AMP_OP_Gelu)->opset_fp16, 20);
    cr_expect_eq(amp_op_info(AMP_OP_Shrink)->opset_bf16, AMP_OPSET_NONE);
    cr_expect_eq(amp_op_info(AMP_OP_Adam)->opset_fp16, AMP_OPSET_NONE); /* float and double only */
    cr_expect_eq(amp_op_info(AMP_OP_Ms_FusedGemm)->opset_bf16, AMP_OPSET_ANY);
    cr_expect_eq(amp_op_info(AMP_OP_UNKNOWN)->opset_fp16, AMP_OPSET_ANY);
    /* every ai.onnx op the pass may make 16-bit names its opsets */
    for (int id = 1; id < AMP_OP__COUNT; id++) {
        const AmpOpInfo *in = amp_op_info((AmpOpId)id);
        if (in->domain[0] || in->fp16_class == AMP_CLASS_NEVER || in->fp16_class == AMP_CLASS_DENY) continue;
        cr_expect_neq(in->opset_fp16, AMP_OPSET_ANY, "%s: OPSETS(ANY, ...)", in->name);
    }
}
