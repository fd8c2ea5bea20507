/* The cases of test_cuda_ops.c, one table per test (the little language is described at
 * the top of test_cuda_ops.c). Included once, by that file. */
#ifndef AMP_TEST_CUDA_OPS_CASES_H
#define AMP_TEST_CUDA_OPS_CASES_H

/* ---- the cases ------------------------------------------------------------------- */

typedef struct Case {
    const char *op, *dts, *ins, *attrs;
    char tol;        /* float outputs: 'X' exactly, 'E' elementwise tolerance, 'A' accumulating
                        (GEMM, conv, reductions: relative to the largest |ref|); integer and
                        bool outputs always compare exactly */
    const char *gen; /* default value generator per input (see above); NULL: uniform [-3, 3] */
    int opset;       /* 0: 18 */
    int nout;        /* 0: 1 */
} Case;

/* Shapes: rank 0, empty, one element, odd, odd 2-D, an empty middle axis, ~1M odd. */
#define UN "T[] | T[0] | T[1] | T[7] | T[33,65] | T[2,0,3] | T[1025,1023]"
/* Two inputs broadcasting on every axis, both ways, up to rank 6. */
#define BIN                                                                                          \
    "T[] T[] | T[0] T[0] | T[7] T[7] | T[] T[33,65] | T[33,65] T[] | T[3,1,5] T[1,4,1] | "          \
    "T[4,1] T[3,1,5] | T[1,1,1] T[2,3,4] | T[2,0,3] T[1,3] | T[2,1,3,1,2,1] T[1,2,1,3,1,2] | "      \
    "T[1025,1023] T[1023] | T[1,1023] T[1025,1]"
/* Variadic ops: one and three inputs. */
#define VAR "T[7] | T[3,1,5] T[1,4,1] T[5] | T[] T[2,3] T[2,1] | T[0,3] T[1,3] T[1]"
/* Variadic ops over more inputs than one launch takes (AMP_CUDA_EW_MAX_VAR, 8). */
#define VAR_MANY                                                                                      \
    "T[] T[] T[] T[] T[] T[] T[] T[] T[] T[] T[] | "                                                  \
    "T[33,65] T[65] T[33,1] T[] T[33,65] T[1,65] T[33,65] T[33,65] T[65] T[33,65] T[] T[33,1] "       \
    "T[33,65] T[33,65] T[33,65] T[33,65] | "                                                          \
    "T[1025,1023] T[1025,1023] T[1025,1023] T[1025,1023] T[1025,1023] T[1025,1023] T[1025,1023] "     \
    "T[1025,1023] T[1025,1023]"
/* Reductions (opset 18: axes is an input); the full 1M reduction on positive data, so
 * that no cancellation makes the tolerance, relative to the result, meaningless (not for
 * the fp16 ReduceSum: it would overflow). */
#define RED_BASE                                                                                     \
    "T[33,65] | T[33,65] i64{1} | T[33,65] i64{0} | T[2,3,4] i64{0,2} | T[2,3,4] i64{-1} | T[7] | " \
    "T[] | T[2,1,5] i64{1} | T[0,3] i64{1} | T[129,127]+ | T[1025,1023] i64{1} | T[1025,1023] i64{0}"
#define RED RED_BASE " | T[1025,1023]+"
#define RED_SMALL "T[33,65] i64{1} | T[2,3,4] i64{0,2} | T[7] | T[] | T[0,3] i64{1}"
#define POOL "T[1,3,9,9] | T[2,4,33,17] | T[8,64,64,64]"

static const Case elementwise[] = {
    {"Add", "FLT INT", BIN, .tol = 'E'},
    {"Sub", "FLT INT", BIN, .tol = 'E'},
    {"Mul", "FLT INT", BIN, .tol = 'E'},
    {"Div", "FLT INT", BIN, .tol = 'E', .gen = " ~"},
    {"Pow", "FLT", BIN, .tol = 'E', .gen = "+"},
    {"Max", "FLT INT", BIN " | " VAR, .tol = 'X'},
    {"Min", "FLT INT", BIN " | " VAR, .tol = 'X'},
    {"Sum", "FLT", BIN " | " VAR, .tol = 'E'},
    {"Mean", "FLT", BIN " | " VAR, .tol = 'E'},
    {"Equal", "ALL", BIN, .tol = 'X', .gen = "##"},
    {"Less", "FLT INT", BIN, .tol = 'X', .gen = "##"},
    {"Greater", "FLT INT", BIN, .tol = 'X', .gen = "##"},
    {"And", "bool", BIN, .tol = 'X'},
    {"Or", "bool", BIN, .tol = 'X'},
    {"Not", "bool", UN, .tol = 'X'},
    {"Sqrt", "FLT", UN, .tol = 'E', .gen = "+"},
    {"Exp", "FLT", UN, .tol = 'E'},
    {"Log", "FLT", UN, .tol = 'E', .gen = "+"},
    {"Neg", "FLT INT", UN, .tol = 'X'},
    {"Abs", "FLT INT", UN, .tol = 'X'},
    {"Reciprocal", "FLT", UN, .tol = 'E', .gen = "~"},
    {"Sign", "FLT INT", UN " | T[9]#", .tol = 'X'},
    {"Ceil", "FLT", UN, .tol = 'X'},
    {"Floor", "FLT", UN, .tol = 'X'},
    {"Round", "FLT", UN " | T[33]#", .tol = 'X'},
    {"Erf", "FLT", UN, .tol = 'E'},
    {"Sin", "FLT", UN, .tol = 'E'},
    {"Cos", "FLT", UN, .tol = 'E'},
    {"Tanh", "FLT", UN, .tol = 'E'},
    {"Sigmoid", "FLT", UN, .tol = 'E'},
    {"Relu", "FLT INT", UN, .tol = 'X'},
    {"LeakyRelu", "FLT", UN, "alpha=0.1", .tol = 'E'},
    {"Elu", "FLT", UN, "alpha=0.7", .tol = 'E'},
    {"Gelu", "FLT", UN, .tol = 'E', .opset = 20},
    {"Gelu", "FLT", UN, "approximate=tanh", .tol = 'E', .opset = 20},
    {"Softplus", "FLT", UN, .tol = 'E'},
    {"HardSigmoid", "FLT", UN, "alpha=0.3 beta=0.4", .tol = 'E'},
    {"HardSwish", "FLT", UN, .tol = 'E'},
    {"PRelu", "FLT", "T[2,3,4,5] T[3,1,1] | T[2,3,4,5] T[5] | T[7] T[1] | T[33,65] T[65] | T[0,3] T[3] | "
                         "T[] T[] | T[1025,1023] T[1023]", .tol = 'E'},
    {"Clip", "FLT INT", "T[33,65] T(-1) T(1.5) | T[7] - T(0.5) | T[7] T(-0.5) | T[] T(0) T(1) | T[0] T(0) T(1) | "
                        "T[7] | T[1025,1023] T(-2) T(2)", .tol = 'X'},
    {"Clip", "FLT", "T[33,65]", "min=-1.0 max=1.5", .tol = 'X', .opset = 6},
    {"Where", "ALL", "bool[3,1,5] T[1,4,1] T[5] | bool[] T[7] T[7] | bool[7] T[] T[] | bool[0] T[0] T[1] | "
                     "bool[33,65] T[33,65] T[33,1] | bool[1025,1023] T[1025,1023] T[]", .tol = 'X'},
    {"Expand", "ALL", "T[3,1] i64{2,3,4} | T[1] i64{7} | T[] i64{2,3} | T[3,1,5] i64{3,4,5} | T[1,4] i64{0,4} | "
                      "T[2,3] i64{1} | T[1023] i64{1025,1}", .tol = 'X'},
    {"Cast", "ALL>ALL", "T[] | T[0] | T[7] | T[33,65] | T[1025,1023]", "to=U", .tol = 'X'},
    {"Cast", "FLT>FLT", "T[33,65]#", "to=U", .tol = 'X'},
    /* ---- s17-cov: variadic ops past one launch's 8 inputs (the loss-scaling check's Sum over
     * every gradient's check), chained launches through the fp32 (integers: the output's)
     * accumulator; 11 scalars as that Sum has, 16 broadcasting, 9 of ~1M (8 + 1) */
    {"Sum", "FLT", VAR_MANY, .tol = 'E'},
    {"Mean", "FLT", VAR_MANY, .tol = 'E'},
    {"Max", "FLT INT", VAR_MANY, .tol = 'X'},
    {"Min", "FLT INT", VAR_MANY, .tol = 'X'},
};

static const Case movement[] = {
    {"Identity", "ALL", UN, .tol = 'X'},
    {"Reshape", "ALL", "T[2,3,4] i64{4,6} | T[2,3,4] i64{-1} | T[2,3,4] i64{0,-1} | T[2,3,4] i64{2,0,2,2} | "
                       "T[] i64{1,1} | T[7] i64{7,1} | T[0,3] i64{0,1,3} | T[1025,1023] i64{1023,-1}", .tol = 'X'},
    {"Reshape", "FLT", "T[0,3] i64{3,0}", "allowzero=1", .tol = 'X'},
    {"Flatten", "ALL", "T[2,3,4] | T[0,3]", "axis=1", .tol = 'X'},
    {"Flatten", "FLT", "T[2,3,4]", "axis=0", .tol = 'X'},
    {"Flatten", "FLT", "T[2,3,4]", "axis=3", .tol = 'X'},
    {"Flatten", "FLT", "T[2,3,4]", "axis=-1", .tol = 'X'},
    {"Squeeze", "ALL", "T[1,3,1,5] | T[1,3,1,5] i64{0} | T[1,3,1,5] i64{-2} | T[1] | T[1,0,1] i64{0,2}", .tol = 'X'},
    {"Squeeze", "FLT", "T[1,3,1,5]", "axes=[0]", .tol = 'X', .opset = 11},
    {"Unsqueeze", "ALL", "T[3,5] i64{0} | T[3,5] i64{0,3} | T[3,5] i64{-1} | T[] i64{0} | T[0] i64{1}", .tol = 'X'},
    {"Unsqueeze", "FLT", "T[3,5]", "axes=[0,3]", .tol = 'X', .opset = 11},
    {"Transpose", "ALL", "T[33,65] | T[2,3,4] | T[0,3] | T[1025,1023]", .tol = 'X'},
    {"Transpose", "ALL", "T[2,3,4] | T[33,17,65] | T[2,0,3]", "perm=[1,2,0]", .tol = 'X'},
    {"Transpose", "FLT", "T[2,3,4,5] | T[3,7,5,9] | T[1,1,7,1]", "perm=[0,2,3,1]", .tol = 'X'},
    {"Transpose", "FLT", "T[2,3,4,5,6,7]", "perm=[5,3,1,0,2,4]", .tol = 'X'},
    {"Concat", "ALL", "T[2,3] T[4,3] | T[2,3] T[0,3] T[1,3] | T[7] | T[1025,1023] T[1,1023]", "axis=0", .tol = 'X'},
    {"Concat", "ALL", "T[2,3,4] T[2,5,4] T[2,1,4] | T[2,0,4] T[2,2,4]", "axis=1", .tol = 'X'},
    {"Concat", "FLT", "T[3,1] T[3,4] | T[33,65] T[33,7]", "axis=-1", .tol = 'X'},
    {"Split", "ALL", "T[6,4] i64{2,4} | T[7,3] i64{0,7} | T[7,3] i64{3,4}", "axis=0", .tol = 'X', .nout = 2},
    {"Split", "ALL", "T[2,9] | T[4,7]", "axis=1 num_outputs=3", .tol = 'X', .nout = 3},
    {"Split", "FLT", "T[1025,1023] i64{1,511,511}", "axis=-1", .tol = 'X', .nout = 3},
    {"Split", "FLT", "T[6,4]", "axis=0 split=[2,4]", .tol = 'X', .opset = 11, .nout = 2},
    {"Split", "FLT", "T[6,4]", "axis=1", .tol = 'X', .opset = 13, .nout = 2},
    {"Slice", "ALL", "T[10] i64{2} i64{7} | T[10] i64{-3} i64{9223372036854775807} | "
                     "T[10] i64{8} i64{1} i64{0} i64{-2} | T[10] i64{-1} i64{-11} i64{0} i64{-1} | "
                     "T[5,7] i64{1,2} i64{4,6} i64{0,1} i64{2,3} | T[5,7] i64{3} i64{3} i64{1} | "
                     "T[2,3,4] i64{0,1} i64{-1,100} i64{2,1} | T[5,0] i64{0} i64{2} i64{0} | "
                     "T[10] i32{1} i32{8} | T[1025,1023] i64{1,3} i64{-1,-3} i64{0,1} i64{2,3}", .tol = 'X'},
    {"Gather", "ALL", "T[5,4] i64[3]@5 | T[5,4] i64[]@5 | T[5,4] i64[2,3]@5 | T[7] i64[0]@7 | T[5,4] i32[3]@5 | "
                      "T[1025,1023] i64[513]@1025", "axis=0", .tol = 'X'},
    {"Gather", "ALL", "T[3,5,4] i64[2,2]@5 | T[3,0,4] i64[0]@1", "axis=1", .tol = 'X'},
    {"Gather", "FLT", "T[3,5,4] i64[6]@4", "axis=-1", .tol = 'X'},
    {"GatherElements", "ALL", "T[3,4] i64[2,4]@3 | T[7] i64[7]@7 | T[33,65] i64[33,65]@33", "axis=0", .tol = 'X'},
    {"GatherElements", "FLT", "T[3,4] i64[3,2]@4 | T[2,3,4] i64[2,3,9]@4 | T[3,4] i32[3,4]@4", "axis=-1", .tol = 'X'},
    {"Pad", "ALL", "T[3,4] i64{1,2,0,1} | T[3,4] i64{0,0,0,0} | T[3,4] i64{1,1,1,1} T(2.5) | T[7] i64{3,0} | "
                   "T[2,3,4] i64{1,1} - i64{1} | T[2,3,4] i64{-1,0,0,2,1,0} | T[0,3] i64{1,0,1,0} | "
                   "T[1025,1023] i64{1,1,1,1}", "mode=constant", .tol = 'X'},
    {"Pad", "FLT INT", "T[3,4] i64{2,1,2,3} | T[2,3,4] i64{0,1,1,0,1,2}", "mode=reflect", .tol = 'X'},
    {"Pad", "FLT INT", "T[3,4] i64{2,1,2,3} | T[2,3,4] i64{0,1,1,0,1,2}", "mode=edge", .tol = 'X'},
    {"Pad", "FLT", "T[3,4] i64{2,1,2,3} | T[2,3,4] i64{0,1,1,0,1,2}", "mode=wrap", .tol = 'X', .opset = 19},
    {"Pad", "FLT", "T[3,4] i64{1,2,0,1} T(2.5)", "mode=constant", .tol = 'X', .opset = 11},
    {"Pad", "FLT", "T[3,4]", "mode=constant pads=[1,2,0,1] value=2.5", .tol = 'X', .opset = 2},
    {"Tile", "ALL", "T[2,3] i64{2,3} | T[7] i64{1} | T[2,3] i64{1,0} | T[3,1,5] i64{2,4,1} | T[1,1023] i64{1025,1}",
     .tol = 'X'},
    {"Shape", "ALL", "T[2,3,4] | T[] | T[0,5]", .tol = 'X'},
    {"Shape", "f32", "T[2,3,4,5]", "start=1 end=-1", .tol = 'X'},
    {"Shape", "f32", "T[2,3,4]", "start=-2", .tol = 'X'},
    {"Size", "ALL", "T[2,3,4] | T[] | T[0,5]", .tol = 'X'},
    {"ConstantOfShape", "ALL", "i64{2,3} | i64{} | i64{0,4} | i64{1025,1023}", "value=T(2.5)", .tol = 'X'},
    {"ConstantOfShape", "f32", "i64{3,5}", .tol = 'X'},
    {"Range", "f32 i32 i64", "T(1) T(20) T(3) | T(10) T(-3) T(-2) | T(0) T(0) T(1) | T(-5) T(1000000) T(7)", .tol = 'E'},
    {"Range", "f32", "T(0) T(10) T(0.25) | T(-1) T(1000) T(0.37)", .tol = 'E'},
};

static const Case reduce_norm[] = {
    {"Softmax", "FLT", "T[7] | T[33,65] | T[1,1025] | T[0,5] | T[2,3,4] | T[1025,1023]", .tol = 'A'},
    {"Softmax", "FLT", "T[2,3,4] | T[33,65,3]", "axis=1", .tol = 'A'},
    {"Softmax", "FLT", "T[33,65]", "axis=0", .tol = 'A'},
    {"Softmax", "FLT", "T[2,3,4] | T[33,65]", "axis=1", .tol = 'A', .opset = 11}, /* coerced to 2-D */
    {"LogSoftmax", "FLT", "T[7] | T[33,65] | T[1,1025] | T[0,5] | T[2,3,4] | T[1025,1023]", .tol = 'A'},
    {"LogSoftmax", "FLT", "T[2,3,4] | T[33,65,3]", "axis=1", .tol = 'A'},
    {"LogSoftmax", "FLT", "T[2,3,4] | T[33,65]", "axis=1", .tol = 'A', .opset = 11},
    {"LayerNormalization", "FLT", "T[2,3,8] T[8] T[8] | T[33,65] T[65] | T[7,1025] T[1025] T[1025] | "
                                  "T[0,4] T[4] T[4] | T[2,1] T[1] T[1]", .tol = 'A'},
    {"LayerNormalization", "FLT", "T[2,3,4] T[3,4] T[3,4]", "axis=1 epsilon=0.001", .tol = 'A'},
    {"BatchNormalization", "FLT", "T[2,3,4,5] T[3] T[3] T[3] T[3]+ | T[4,3] T[3] T[3] T[3] T[3]+ | "
                                  "T[1,16,33] T[16] T[16] T[16] T[16]+ | T[0,3,2] T[3] T[3] T[3] T[3]+",
     "epsilon=0.001", .tol = 'A'},
    {"InstanceNormalization", "FLT", "T[2,3,4,5] T[3] T[3] | T[1,4,1025] T[4] T[4] | T[2,3,7] T[3] T[3]",
     "epsilon=1e-5", .tol = 'A'},
    {"ReduceSum", "FLT INT", RED_BASE, .tol = 'A'},
    {"ReduceSum", "f32 bf16 INT", "T[1025,1023]+", .tol = 'A'},
    {"ReduceSum", "FLT", RED_BASE, "keepdims=0", .tol = 'A'},
    {"ReduceSum", "FLT", "T[3,4]", "noop_with_empty_axes=1", .tol = 'A'},
    {"ReduceSum", "FLT", "T[33,65] i64{1} | T[2,3,4] i64{0,2}", .tol = 'A', .opset = 13},
    {"ReduceSum", "FLT", "T[33,65] | T[2,3,4]", "axes=[1]", .tol = 'A', .opset = 11},
    {"ReduceMean", "FLT", RED, .tol = 'A'},
    {"ReduceMean", "FLT", RED_SMALL, "keepdims=0", .tol = 'A'},
    {"ReduceMean", "FLT", "T[2,3,4]", "axes=[0,2] keepdims=0", .tol = 'A', .opset = 13},
    {"ReduceMax", "FLT INT", RED, .tol = 'X'},
    {"ReduceMax", "FLT", RED_SMALL, "keepdims=0", .tol = 'X'},
    {"ReduceMax", "FLT INT", "T[2,3,4]", "axes=[-1]", .tol = 'X', .opset = 13},
    {"ReduceMin", "FLT INT", RED, .tol = 'X'},
    {"ReduceProd", "FLT", RED_SMALL, .tol = 'A', .gen = "p"},
    {"ReduceL2", "FLT", RED, .tol = 'A'},
    {"ReduceLogSumExp", "FLT", RED, .tol = 'A'},
    {"ArgMax", "FLT INT", "T[7] | T[33,65] | T[2,3,4] | T[1025,1023]", .tol = 'X'},
    {"ArgMax", "FLT INT", "T[33,65] | T[2,3,4] | T[1,1025]", "axis=-1", .tol = 'X'},
    {"ArgMax", "FLT INT", "T[33,65] | T[2,3,4]", "axis=1", .tol = 'X', .gen = "#"},
    {"ArgMax", "FLT INT", "T[33,65] | T[2,3,4]", "axis=1 keepdims=0 select_last_index=1", .tol = 'X', .gen = "#"},
    {"ArgMin", "FLT INT", "T[7] | T[33,65] | T[2,3,4] | T[1025,1023]", .tol = 'X'},
    {"ArgMin", "FLT INT", "T[33,65] | T[2,3,4]", "axis=1", .tol = 'X', .gen = "#"},
    {"ArgMin", "FLT INT", "T[33,65] | T[2,3,4]", "axis=-1 keepdims=0 select_last_index=1", .tol = 'X', .gen = "#"},
    {"GlobalAveragePool", "FLT", "T[2,3,4,5] | T[1,16,33] | T[2,3,2,3,4] | T[1,4,1,1] | T[1,8,1025] | T[4,64,56,56]",
     .tol = 'A'},
    {"GlobalMaxPool", "FLT", "T[2,3,4,5] | T[1,16,33] | T[2,3,2,3,4] | T[1,4,1,1] | T[1,8,1025] | T[4,64,56,56]",
     .tol = 'X'},
};

static const Case gemm_conv[] = {
    {"MatMul", "FLT", "T[33,65] T[65,17] | T[1,7] T[7,1] | T[7] T[7] | T[7] T[7,3] | T[5,7] T[7] | "
                      "T[2,3,5,7] T[7,4] | T[1,5,7] T[4,7,3] | T[4,1,5,7] T[3,7,2] | T[3,0] T[0,4] | "
                      "T[0,3] T[3,4] | T[1,1,64] T[1,64,1025] | T[256,1024] T[1024,256]", .tol = 'A'},
    {"MatMul", "INT", "T[33,65] T[65,17] | T[2,3,5,7] T[7,4]", .tol = 'X', .gen = "##"},
    {"Gemm", "FLT", "T[33,65] T[65,17] | T[33,65] T[65,17] T[17] | T[33,65] T[65,17] T[33,1] | "
                    "T[33,65] T[65,17] T[] | T[33,65] T[65,17] T[33,17] | T[1,1] T[1,1] T[1] | T[0,5] T[5,3] T[3] | "
                    "T[4,0] T[0,3] T[4,3] | T[512,768] T[768,384] T[384]", .tol = 'A'},
    {"Gemm", "FLT", "T[65,33] T[65,17] T[17]", "transA=1", .tol = 'A'},
    {"Gemm", "FLT", "T[33,65] T[17,65] T[1,17]", "transB=1 alpha=0.5 beta=2.0", .tol = 'A'},
    {"Gemm", "FLT", "T[65,33] T[17,65] T[33,17]", "transA=1 transB=1 alpha=-1.5 beta=0.0", .tol = 'A'},
    {"Conv", "FLT", "T[1,3,9,9] T[4,3,3,3] | T[2,3,9,9] T[4,3,3,3] T[4] | T[1,1,1,1] T[1,1,1,1] | "
                    "T[1,8,33,17] T[16,8,1,1] T[16] | T[0,3,8,8] T[4,3,3,3]", .tol = 'A'},
    {"Conv", "FLT", "T[2,4,11,13] T[6,4,3,5] T[6]", "pads=[1,2,1,2] strides=[2,1]", .tol = 'A'},
    {"Conv", "FLT", "T[1,3,8,8] T[4,3,3,3]", "pads=[0,1,2,0]", .tol = 'A'},
    {"Conv", "FLT", "T[1,4,15,15] T[4,2,3,3] T[4]", "group=2 dilations=[2,2] pads=[2,2,2,2]", .tol = 'A'},
    {"Conv", "FLT", "T[2,8,17,17] T[8,1,3,3] T[8]", "group=8 pads=[1,1,1,1]", .tol = 'A'},
    {"Conv", "FLT", "T[1,3,10,10] T[4,3,3,3]", "auto_pad=SAME_UPPER strides=[2,2]", .tol = 'A'},
    {"Conv", "FLT", "T[2,3,33] T[5,3,3] T[5] | T[1,4,1025] T[4,4,7]", "pads=[3,3]", .tol = 'A'},
    {"Conv", "FLT", "T[1,2,7,9,8] T[4,2,3,3,3] T[4]", "pads=[1,1,1,1,1,1] strides=[2,2,2]", .tol = 'A'},
    {"Conv", "FLT", "T[8,64,32,32] T[64,64,3,3] T[64]", "pads=[1,1,1,1]", .tol = 'A'},
    {"ConvTranspose", "FLT", "T[1,3,5,5] T[3,4,3,3] | T[2,3,5,5] T[3,4,3,3] T[4]", .tol = 'A'},
    {"ConvTranspose", "FLT", "T[1,4,7,7] T[4,2,3,3] T[2]", "strides=[2,2] pads=[1,1,1,1] output_padding=[1,1]",
     .tol = 'A'},
    {"ConvTranspose", "FLT", "T[1,4,6,6] T[4,3,3,3] T[6]", "group=2 strides=[2,2] dilations=[2,1]", .tol = 'A'},
    {"ConvTranspose", "FLT", "T[2,3,33] T[3,5,4] T[5]", "strides=[3]", .tol = 'A'},
    {"ConvTranspose", "FLT", "T[1,2,3,4,5] T[2,3,2,2,2] T[3]", "strides=[2,2,2]", .tol = 'A'},
    /* geometries cuDNN takes and ones it refuses (asymmetric or negative pads, output_padding
     * at or above the stride): the latter count as "not on the GPU" */
    {"ConvTranspose", "FLT", "T[1,1,1,1] T[1,1,1,1] | T[3,2,1,1] T[2,5,1,1] T[5] | T[1,8,9,7] T[8,16,1,1]", .tol = 'A'},
    {"ConvTranspose", "FLT", "T[2,6,5,7] T[6,2,3,3] T[6]", "group=3 strides=[2,3] pads=[1,0,1,0]", .tol = 'A'},
    {"ConvTranspose", "FLT", "T[1,3,5,5] T[3,4,3,3]", "strides=[2,2] output_shape=[11,11]", .tol = 'A'},
    {"ConvTranspose", "FLT", "T[1,3,5,5] T[3,4,3,3]", "strides=[2,2] output_shape=[10,10]", .tol = 'A'},
    {"ConvTranspose", "FLT", "T[1,3,5,5] T[3,4,4,4]", "strides=[2,2] auto_pad=SAME_UPPER", .tol = 'A'},
    {"ConvTranspose", "FLT", "T[1,3,5,5] T[3,4,3,3]", "strides=[2,2] auto_pad=SAME_LOWER", .tol = 'A'},
    {"ConvTranspose", "FLT", "T[1,3,5,6] T[3,4,3,3]", "pads=[0,1,1,0]", .tol = 'A'},
    {"ConvTranspose", "FLT", "T[1,2,5,5] T[2,2,3,3]", "strides=[1,1] dilations=[3,3] output_padding=[2,2]", .tol = 'A'},
    {"ConvTranspose", "FLT", "T[4,32,16,16] T[32,16,4,4] T[16]", "strides=[2,2] pads=[1,1,1,1]", .tol = 'A'},
    {"MaxPool", "FLT", POOL, "kernel_shape=[3,3]", .tol = 'X'},
    {"MaxPool", "FLT", "T[1,3,10,11]", "kernel_shape=[3,3] strides=[2,2] pads=[1,1,1,1]", .tol = 'X'},
    {"MaxPool", "FLT", "T[1,3,10,11]", "kernel_shape=[3,2] strides=[2,2] ceil_mode=1", .tol = 'X'},
    {"MaxPool", "FLT", "T[1,2,11,11]", "kernel_shape=[2,2] dilations=[2,2]", .tol = 'X'},
    {"MaxPool", "FLT", "T[2,3,33]", "kernel_shape=[4] strides=[3] pads=[1,2]", .tol = 'X'},
    {"MaxPool", "FLT", "T[1,2,7,8,9]", "kernel_shape=[2,2,2] strides=[2,2,2]", .tol = 'X'},
    {"AveragePool", "FLT", POOL, "kernel_shape=[3,3]", .tol = 'A'},
    {"AveragePool", "FLT", "T[1,3,10,11]", "kernel_shape=[3,3] strides=[2,2] pads=[1,1,1,1]", .tol = 'A'},
    {"AveragePool", "FLT", "T[1,3,10,11]", "kernel_shape=[3,3] strides=[2,2] pads=[1,1,1,1] count_include_pad=1",
     .tol = 'A'},
    {"AveragePool", "FLT", "T[1,3,10,11]", "kernel_shape=[3,2] strides=[2,2] pads=[0,1,0,1] ceil_mode=1",
     .tol = 'A'},
    {"AveragePool", "FLT", "T[2,3,33]", "kernel_shape=[4] strides=[3] pads=[1,2]", .tol = 'A'},
    {"AveragePool", "FLT", "T[1,2,7,8,9]", "kernel_shape=[2,2,2] strides=[2,2,2]", .tol = 'A'},
};

/* Resize: scales (roi absent) or sizes; size 1, odd, up and down, rank 1 to 4. */
#define RS                                                                                         \
    "T[1,1,1,1] - f32{1,1,3,3} | T[2,3,5,7] - f32{1,1,2,3} | T[2,3,9,11] - f32{1,1,0.5,0.4} | "   \
    "T[1,2,7,5] - - i64{1,2,3,11} | T[17] - f32{1.7} | T[3,1,5] - - i64{3,4,1} | "                \
    "T[1,2,64,48] - f32{1,1,2.5,0.75}"
#define RS_CROP "T[1,2,9,11] f32{0,0,0.2,0.1,1,1,0.9,0.8} f32{1,1,0.8,1.3} | " \
                "T[1,1,5,5] f32{0,0,-0.2,0.3,1,1,1.4,1.2} - i64{1,1,7,6}"

static const Case resize[] = {
    {"Resize", "ALL i8 u8", RS, "mode=nearest", .tol = 'X'},
    {"Resize", "FLT i32", RS, "mode=nearest nearest_mode=round_prefer_ceil coordinate_transformation_mode=asymmetric",
     .tol = 'X'},
    {"Resize", "FLT", RS, "mode=nearest nearest_mode=floor coordinate_transformation_mode=align_corners", .tol = 'X'},
    {"Resize", "FLT", RS, "mode=nearest nearest_mode=ceil coordinate_transformation_mode=pytorch_half_pixel",
     .tol = 'X'},
    {"Resize", "FLT", RS, "mode=nearest coordinate_transformation_mode=tf_half_pixel_for_nn", .tol = 'X'},
    {"Resize", "FLT", RS, "mode=linear", .tol = 'A'},
    {"Resize", "FLT", RS, "mode=linear coordinate_transformation_mode=align_corners", .tol = 'A'},
    {"Resize", "FLT", RS, "mode=linear coordinate_transformation_mode=pytorch_half_pixel", .tol = 'A'},
    {"Resize", "FLT", RS, "mode=linear coordinate_transformation_mode=asymmetric", .tol = 'A'},
    {"Resize", "FLT", RS, "mode=linear coordinate_transformation_mode=half_pixel_symmetric", .tol = 'A', .opset = 19},
    {"Resize", "FLT", RS, "mode=cubic", .tol = 'A'},
    {"Resize", "FLT", RS, "mode=cubic cubic_coeff_a=-0.5 exclude_outside=1", .tol = 'A'},
    {"Resize", "FLT", RS_CROP, "mode=linear coordinate_transformation_mode=tf_crop_and_resize extrapolation_value=2.5",
     .tol = 'A'},
    {"Resize", "ALL", RS_CROP, "mode=nearest coordinate_transformation_mode=tf_crop_and_resize extrapolation_value=2.5",
     .tol = 'X'},
    {"Resize", "FLT", RS_CROP, "mode=cubic coordinate_transformation_mode=tf_crop_and_resize", .tol = 'A'},
    {"Resize", "FLT", "T[2,3,5,7] - f32{2,0.6} | T[2,3,5,7] - - i64{9,4}", "mode=linear axes=[2,3]", .tol = 'A'},
    {"Resize", "FLT", "T[2,3,5,7] - f32{1.5}", "mode=nearest axes=[-1]", .tol = 'X'},
    /* keep_aspect_ratio_policy other than stretch: the shape function (ir/infer_shape.c)
     * does not size it, so no session runs it, on the CPU either */
    {"Resize", "FLT", "T[1,2,4,5] - f32{1,1,2,2}", "mode=linear antialias=1", .tol = 'A'},
    {"Resize", "FLT", "T[1,2,3,5] f32{1,1,2,2.5}", "mode=nearest", .tol = 'X', .opset = 10},
    {"Resize", "FLT", "T[1,2,3,5] f32{1,1,2,2.5}", "mode=linear", .tol = 'A', .opset = 10},
    {"Resize", "FLT", "T[1,2,3,5] f32{} f32{1,1,2,1.5}", "mode=linear", .tol = 'A', .opset = 11},
    {"Resize", "FLT", "T[1,2,3,5] f32{} f32{} i64{1,2,4,4}", "mode=cubic", .tol = 'A', .opset = 13},
    {"Resize", "FLT", "T[2,16,128,96] - f32{1,1,2,2}", "mode=linear", .tol = 'A'},
};

/* ai.onnx Attention (opset 23): batch, head and sequence sizes 1 and odd; MHA, GQA
 * (Hq = 2 Hkv) and MQA; 4-D and 3-D inputs; causal and not (S below, at and over T);
 * bool masks (some rows fully masked: a last dim of 2 pads the rest with -inf) and
 * additive ones, broadcast from every rank; past/present KV; softcap and scale; rows of
 * more than 256 keys (several per thread). */
#define ATT4 "T[1,1,1,8] T[1,1,1,8] T[1,1,1,8] | T[2,3,5,8] T[2,3,7,8] T[2,3,7,4] | " \
             "T[3,4,7,16] T[3,2,9,16] T[3,2,9,5] | T[2,4,5,8] T[2,1,5,8] T[2,1,5,8] | " \
             "T[1,2,9,16] T[1,2,4,16] T[1,2,4,16] | T[2,8,65,64] T[2,4,300,64] T[2,4,300,64]"
#define ATT_MASK "T[2,3,5,8] T[2,3,7,8] T[2,3,7,6] bool[5,7] | T[2,3,5,8] T[2,3,7,8] T[2,3,7,6] bool[2,1,5,2] | " \
                 "T[2,3,5,8] T[2,3,7,8] T[2,3,7,6] T[2,1,5,7] | T[2,3,5,8] T[2,3,7,8] T[2,3,7,6] T[7] | " \
                 "T[2,4,5,8] T[2,2,7,8] T[2,2,7,6] bool[2,4,5,7] | T[1,2,3,8] T[1,1,3,8] T[1,1,3,8] T[1,1,3,3]"
#define ATT_PAST "T[2,3,5,8] T[2,3,4,8] T[2,3,4,6] - T[2,3,6,8] T[2,3,6,6] | " \
                 "T[1,4,1,16] T[1,2,1,16] T[1,2,1,16] - T[1,2,9,16] T[1,2,9,16] | " \
                 "T[2,4,3,8] T[2,2,3,8] T[2,2,3,8] bool[2,1,3,10] T[2,2,7,8] T[2,2,7,8] | " \
                 "T[2,3,5,8] T[2,3,7,8] T[2,3,7,6]"

/* com.microsoft MultiHeadAttention: 3-D and 4-D (projected) key/value, the bias, every
 * key_padding_mask form (end positions, (B, T), (B, S, T); int32), attention_bias
 * broadcast, past/present, unidirectional, mask_filter_value. The GPU rounds Q, K, V to
 * the input's type after the bias (and com.microsoft Attention after the projection), as
 * onnxruntime's CUDA kernels do, where the CPU keeps them in fp32: small inputs (gen 's')
 * keep the scores' error from that rounding within the tolerance. */
#define MS_GEN "ssssssss"
#define MHA "T[2,5,32] T[2,7,32] T[2,7,24] | T[1,1,8] T[1,1,8] T[1,1,8] | T[2,5,32] T[2,7,32] T[2,7,24] T[88] | " \
            "T[2,5,32] T[2,4,7,8] T[2,4,7,6] T[88] | T[2,5,32] T[2,7,32] T[2,7,24] - i32[2]@8 | " \
            "T[2,5,32] T[2,7,32] T[2,7,24] T[88] i32[2,7]# T[1,4,5,7] | " \
            "T[3,5,32] T[3,7,32] T[3,7,32] - i32[3,5,7]# T[3,1,5,7] | T[2,65,64] T[2,300,64] T[2,300,64]"
#define MHA_PAST "T[2,5,32] T[2,7,32] T[2,7,24] T[88] - - T[2,4,3,8] T[2,4,3,6] | " \
                 "T[1,1,16] T[1,1,16] T[1,1,16] - i32[1]@12 - T[1,4,9,4] T[1,4,9,4] | T[2,5,32] T[2,4,7,8] T[2,4,7,6]"
/* com.microsoft Attention: the fused projection with and without bias, the mask forms
 * ((2B) start and end positions too), past/present, qkv_hidden_sizes. */
#define MSA "T[2,5,16] T[16,48] T[48] | T[1,1,8] T[8,24] | T[2,5,16] T[16,48] T[48] i32[4]@8 | " \
            "T[2,5,16] T[16,48] T[48] i32[2,5]# | T[2,5,16] T[16,48] T[48] i32[2,5,5]# - T[2,4,5,5] | " \
            "T[2,129,64] T[64,192] T[192] i32[2]@140"

static const Case attention[] = {
    {"com.microsoft:MultiHeadAttention", "FLT", MHA, "num_heads=4", .tol = 'A', .gen = MS_GEN},
    {"com.microsoft:MultiHeadAttention", "FLT", MHA, "num_heads=4 unidirectional=1 mask_filter_value=-50.0",
     .tol = 'A', .gen = MS_GEN},
    {"com.microsoft:MultiHeadAttention", "FLT", MHA_PAST, "num_heads=4 unidirectional=1 scale=0.4", .tol = 'A',
     .gen = MS_GEN, .nout = 3},
    {"com.microsoft:Attention", "FLT", MSA, "num_heads=4", .tol = 'A', .gen = MS_GEN},
    {"com.microsoft:Attention", "FLT", MSA, "num_heads=4 unidirectional=1", .tol = 'A', .gen = MS_GEN},
    {"com.microsoft:Attention", "FLT", "T[2,5,16] T[16,48] T[48] - T[2,2,4,3,4] | T[1,1,16] T[16,48] - i32[1]@9 "
                                       "T[2,1,4,8,4]", "num_heads=4 unidirectional=1", .tol = 'A', .gen = MS_GEN,
     .nout = 2},
    {"com.microsoft:Attention", "FLT", "T[2,5,16] T[16,40] T[40] | T[2,5,16] T[16,40] T[40] i32[2,5]#",
     "num_heads=4 qkv_hidden_sizes=[16,16,8]", .tol = 'A', .gen = MS_GEN},
    {"Attention", "FLT", ATT4, .tol = 'A', .opset = 23},
    {"Attention", "FLT", ATT4, "is_causal=1", .tol = 'A', .opset = 23},
    {"Attention", "FLT", ATT_MASK, .tol = 'A', .opset = 23},
    {"Attention", "FLT", ATT_MASK, "is_causal=1 softcap=2.5", .tol = 'A', .opset = 23},
    {"Attention", "FLT", ATT_PAST, .tol = 'A', .opset = 23, .nout = 3},
    {"Attention", "FLT", ATT_PAST, "is_causal=1 scale=0.3", .tol = 'A', .opset = 23, .nout = 3},
    {"Attention", "FLT", "T[2,5,32] T[2,7,16] T[2,7,12] | T[1,1,8] T[1,1,4] T[1,1,6] | "
                         "T[3,9,32] T[3,4,16] T[3,4,12] bool[9,4]",
     "q_num_heads=4 kv_num_heads=2", .tol = 'A', .opset = 23},
    {"Attention", "FLT", "T[2,5,32] T[2,7,16] T[2,7,12] T[2,4,5,7] T[2,2,3,8] T[2,2,3,6]",
     "q_num_heads=4 kv_num_heads=2 is_causal=1", .tol = 'A', .opset = 23, .nout = 3},
};

/* ---- losses and the backward ops of training graphs (kernels/cuda/loss.c, norm_grad.c,
 * conv_grad.c, norm.c's training BatchNormalization) ------------------------------------
 * Labels are %C (in [0, C)); ignore_index picks a class that occurs, so some samples are
 * ignored. Many samples (5000) span several blocks of partial sums; C 2000 takes the
 * block-per-sample kernel, d1..dk the thread-per-sample one. */
#define SCE_INS(L)                                                                                           \
    "T[8,5] " L "[8]%5 | T[8,5] " L "[8]%5 T[5]+ | T[2,4,3,5] " L "[2,3,5]%4 | T[2,4,3,5] " L "[2,3,5]%4 T[4]+ | " \
    "T[4,2000] " L "[4]%2000 | T[5000,10] " L "[5000]%10 T[10]+ | T[1,3] " L "[1]%3"
#define SCE_GRAD_INS(L)                                                                                       \
    "T[] T[8,5] " L "[8]%5 | T[] T[8,5] " L "[8]%5 T[5]+ | T[] T[2,4,3,5] " L "[2,3,5]%4 T[4]+ | "            \
    "T[] T[4,2000] " L "[4]%2000 | T[] T[5000,10] " L "[5000]%10 T[10]+ T[5000,10]"
#define SCE_GRAD_NONE_INS(L)                                                                                  \
    "T[8] T[8,5] " L "[8]%5 | T[8] T[8,5] " L "[8]%5 T[5]+ T[8,5] | T[2,3,5] T[2,4,3,5] " L "[2,3,5]%4 T[4]+"

static const Case loss_train[] = {
    {"SoftmaxCrossEntropyLoss", "FLT", SCE_INS("i64"), "reduction=mean", .tol = 'A', .opset = 13, .nout = 2},
    {"SoftmaxCrossEntropyLoss", "FLT", SCE_INS("i32"), "reduction=sum", .tol = 'A', .opset = 13, .nout = 2},
    {"SoftmaxCrossEntropyLoss", "FLT", SCE_INS("i64"), "reduction=none", .tol = 'A', .opset = 13, .nout = 2},
    {"SoftmaxCrossEntropyLoss", "FLT", SCE_INS("i64"), "reduction=mean ignore_index=1", .tol = 'A', .opset = 13},
    {"SoftmaxCrossEntropyLoss", "FLT", SCE_INS("i32"), "reduction=none ignore_index=2", .tol = 'A', .opset = 12,
     .nout = 2},
    {"SoftmaxCrossEntropyLoss", "FLT", "T[4,3] i64{0,0,0,0}", "reduction=mean ignore_index=0", .tol = 'A',
     .opset = 13}, /* every sample ignored: NaN on both */
    {"NegativeLogLikelihoodLoss", "FLT", SCE_INS("i64"), "reduction=mean", .tol = 'A', .opset = 13},
    {"NegativeLogLikelihoodLoss", "FLT", SCE_INS("i32"), "reduction=sum ignore_index=3", .tol = 'A', .opset = 13},
    {"NegativeLogLikelihoodLoss", "FLT", SCE_INS("i64"), "reduction=none", .tol = 'A', .opset = 22},
    {"NegativeLogLikelihoodLoss", "FLT", SCE_INS("i64"), "reduction=mean ignore_index=1", .tol = 'A', .opset = 13},
    {"com.microsoft:SoftmaxCrossEntropyLossGrad", "FLT", SCE_GRAD_INS("i64"), "reduction=mean", .tol = 'A'},
    {"com.microsoft:SoftmaxCrossEntropyLossGrad", "FLT", SCE_GRAD_INS("i32"), "reduction=mean ignore_index=1",
     .tol = 'A'},
    {"com.microsoft:SoftmaxCrossEntropyLossGrad", "FLT", SCE_GRAD_INS("i64"), "reduction=sum ignore_index=2",
     .tol = 'A'},
    {"com.microsoft:SoftmaxCrossEntropyLossGrad", "FLT", SCE_GRAD_NONE_INS("i64"), "reduction=none ignore_index=0",
     .tol = 'A'},
    {"com.microsoft:SoftmaxGrad_13", "FLT",
     "T[7] T[7] | T[33,65] T[33,65] | T[7,1025] T[7,1025] | T[0,5] T[0,5] | T[2,3,4] T[2,3,4] | "
     "T[3,2000] T[3,2000]p",
     .tol = 'A'},
    {"com.microsoft:SoftmaxGrad_13", "FLT", "T[2,3,4] T[2,3,4] | T[33,65,3] T[33,65,3]", "axis=1", .tol = 'A'},
    {"com.microsoft:SoftmaxGrad_13", "FLT", "T[33,65] T[33,65]", "axis=0", .tol = 'A'},
    {"com.microsoft:LayerNormalizationGrad", "FLT",
     "T[4,8] T[4,8] T[8] | T[2,3,8] T[2,3,8] T[8] f32[2,3,1] f32[2,3,1]+ | T[33,65] T[33,65] T[65] T[33,1] T[33,1]+ | "
     "T[1000,64] T[1000,64] T[64] | T[3,2000] T[3,2000] T[2000] f32[3,1] f32[3,1]+ | T[0,8] T[0,8] T[8]",
     .tol = 'A', .nout = 3},
    {"com.microsoft:LayerNormalizationGrad", "FLT", "T[2,3,4] T[2,3,4] T[12]", "axis=1 epsilon=0.001", .tol = 'A',
     .nout = 3},
    {"com.microsoft:LayerNormalizationGrad", "FLT", "T[5,16] T[5,16] T[16]", .tol = 'A'}, /* X_grad alone */
    {"com.microsoft:ConvGrad", "FLT",
     "T[1,4,7,7] T[1,3,9,9] T[4,3,3,3] | T[2,5,33] T[2,3,33] T[5,3,1] | T[8,64,30,30] T[8,64,32,32] T[64,64,3,3] | "
     "T[1,1,1,1] T[1,1,1,1] T[1,1,1,1]",
     .tol = 'A', .nout = 3},
    {"com.microsoft:ConvGrad", "FLT", "T[2,4,5,5] T[2,3,9,9] T[4,3,3,3]", "pads=[1,1,1,1] strides=[2,2]", .tol = 'A',
     .nout = 3},
    {"com.microsoft:ConvGrad", "FLT", "T[1,4,15,15] T[1,4,15,15] T[4,2,3,3]", "group=2 dilations=[2,2] pads=[2,2,2,2]",
     .tol = 'A', .nout = 3},
    {"com.microsoft:ConvGrad", "FLT", "T[2,8,17,17] T[2,8,17,17] T[8,1,3,3]", "group=8 pads=[1,1,1,1]", .tol = 'A',
     .nout = 2},
    {"com.microsoft:ConvGrad", "FLT", "T[2,5,33] T[2,3,33] T[5,3,3]", "pads=[1,1]", .tol = 'A', .nout = 3},
    {"com.microsoft:ConvGrad", "FLT", "T[1,4,4,5,4] T[1,2,7,9,8] T[4,2,3,3,3]", "pads=[1,1,1,1,1,1] strides=[2,2,2]",
     .tol = 'A', .nout = 3},
    {"com.microsoft:ConvGrad", "FLT", "T[1,4,8,7] T[1,3,8,8] T[4,3,3,3]", "pads=[0,1,2,0]", .tol = 'A',
     .nout = 3}, /* asymmetric: refused, runs on the CPU */
    {"com.microsoft:ConvGrad", "FLT", "T[2,4,7,7] T[2,3,9,9] T[4,3,3,3]", .tol = 'A'}, /* dX alone */
    {"BatchNormalization", "FLT", "T[2,3,4,5] T[3] T[3] T[3] T[3]+ | T[4,3] T[3] T[3] T[3] T[3]+ | "
     "T[8,16,32,32] T[16] T[16] T[16] T[16]+ | T[0,3,2] T[3] T[3] T[3] T[3]+",
     "training_mode=1 momentum=0.8", .tol = 'A', .opset = 15, .nout = 3},
    {"BatchNormalization", "FLT", "T[2,3,4,5] T[3] T[3] T[3] T[3]+ | T[5,7,33] T[7] T[7] T[7] T[7]+",
     "epsilon=0.001", .tol = 'A', .opset = 9, .nout = 5}, /* running stats listed: training before opset 14 */
    {"BatchNormalization", "FLT", "T[2,3,4,5] T[3] T[3] T[3] T[3]+", "training_mode=0", .tol = 'A', .opset = 15},
};

/* ---- optimizers (s17-optim) ---------------------------------------------------------- */

/* ai.onnx.preview.training Adam, Momentum and Adagrad (R, T, then X..., G..., state...):
 * odd sizes, scalars, empty tensors, ~1M elements (many chunks of one tensor); T = 0 (no
 * bias correction, Momentum's first step) and later, as int64 and int32; R in float32 or
 * the tensors' type; 16-bit X and G with float32 state; only some outputs listed. Adam's
 * and Adagrad's squared-gradient state is drawn positive. (The fused update gate cannot
 * be given through a model: tests/cuda/test_cuda_optim.c calls the kernels with it, over
 * more tensors than one launch takes.) */
#define OPT_A2 "f32(0.05) i64(3) T[7] T[33,65] T[7] T[33,65] T[7] T[33,65] T[7]+ T[33,65]+ | "             \
               "T(0.01) i64(0) T[] T[0] T[] T[0] T[] T[0] T[]+ T[0]+ | "                                     \
               "f32(0.001) i32(5) T[1025,1023] T[1] T[1025,1023] T[1] f32[1025,1023] f32[1] f32[1025,1023]+ " \
               "f32[1]+"
#define OPT_M4 "f32(0.1) i64(2) T[7] T[] T[33,65] T[0] T[7] T[] T[33,65] T[0] T[7] T[] T[33,65] T[0] | "     \
               "T(0.1) i32(0) T[1] T[5] T[2,3] T[9] T[1] T[5] T[2,3] T[9] f32[1] f32[5] f32[2,3] f32[9]"
#define OPT_G4 "f32(0.1) i64(2) T[7] T[] T[33,65] T[0] T[7] T[] T[33,65] T[0] T[7]+ T[]+ T[33,65]+ T[0]+ | " \
               "T(0.1) i32(0) T[1] T[5] T[2,3] T[9] T[1] T[5] T[2,3] T[9] f32[1]+ f32[5]+ f32[2,3]+ f32[9]+"
#define OPT_1M "f32(0.1) i64(4) T[1025,1023] T[1025,1023] T[1025,1023]+"
#define OPT_ADAM_ATTRS "alpha=0.85 beta=0.995 epsilon=0.001 norm_coefficient=0.01 norm_coefficient_post=0.002"

static const Case optim[] = {
    {"ai.onnx.preview.training:Adam", "FLT f64", OPT_A2, OPT_ADAM_ATTRS, .tol = 'E', .nout = 6},
    {"ai.onnx.preview.training:Adam", "FLT", OPT_A2, .tol = 'E', .nout = 2},
    {"ai.onnx.preview.training:Momentum", "FLT f64", OPT_M4, "alpha=0.9 beta=0.5 norm_coefficient=0.01 mode=standard",
     .tol = 'E', .nout = 8},
    {"ai.onnx.preview.training:Momentum", "FLT", OPT_M4, "alpha=0.9 beta=1.0 norm_coefficient=0.0 mode=nesterov",
     .tol = 'E', .nout = 5},
    {"ai.onnx.preview.training:Momentum", "FLT", OPT_1M, "alpha=0.9 beta=0.5 norm_coefficient=0.01 mode=nesterov",
     .tol = 'E', .nout = 2},
    {"ai.onnx.preview.training:Adagrad", "FLT f64", OPT_G4, "decay_factor=0.1 epsilon=0.00001 norm_coefficient=0.003",
     .tol = 'E', .nout = 8},
    {"ai.onnx.preview.training:Adagrad", "FLT", OPT_1M, .tol = 'E', .nout = 2},
};

/* ---- training ops (kernels/cuda/grad_ops.c, grad_ops_index.c) ---------------------------------
 * Same-shape pairs and a bias over the last axis (the com.microsoft gradients' shape
 * functions give input 0's shape, so no case broadcasts input 0). Dropout's mask is the
 * counter-based one (ops/dropout_rng.h): both sessions start from the same seed,
 * so the CUDA mask must equal the CPU's bit for bit; the seeded training_mode row is the
 * MT19937 path, which the CUDA kernel refuses (counted "not on GPU"). ScatterND none uses
 * single tuples (duplicate indices leave either update on a GPU), add random duplicates:
 * exact for 16 bits (ordered), within the accumulating tolerance for float32 (atomics).
 * MaxPool's rows list Indices (cuDNN has no argmax: grad_ops_pool.c's own kernel). */
#define GR2 "T[7] T[7] | T[] T[] | T[0] T[0] | T[33,65] T[33,65] | T[33,65] T[65] | T[1025,1023] T[1025,1023]"
#define GATHER_GRAD                                                                                  \
    "i64{5,4} i64[3]@5 T[3,4] | i64{5,4} i64[2,3]@5 T[2,3,4] | i64{7} i64[20]@7 T[20] | "             \
    "i64{1000,64} i32[512]@1000 T[512,64] | i64{5,4} i64[0]@5 T[0,4]"
#define SCATTER_ADD                                                                                  \
    "T[5,4] i64[3,1]@5 T[3,4] | T[5,4] i64[6,2]@4 T[6] | T[1000,64] i64[512,1]@1000 T[512,64] | "    \
    "T[2,3,4] i32[4,2]@2 T[4,4]"

static const Case grad[] = {
    {"com.microsoft:ReluGrad", "FLT", GR2, .tol = 'X'},
    {"com.microsoft:SigmoidGrad", "FLT", GR2, .tol = 'E'},
    {"com.microsoft:TanhGrad", "FLT", GR2, .tol = 'E'},
    {"com.microsoft:GeluGrad", "FLT", GR2, .tol = 'E'},
    {"com.microsoft:GeluGrad", "FLT", GR2, "approximate=tanh", .tol = 'E'},
    {"com.microsoft:BiasGelu", "FLT", "T[7] T[7] | T[33,65] T[65] | T[2,3,64] T[64] | T[1025,1023] T[1023]", .tol = 'E'},
    {"com.microsoft:BiasGelu", "FLT", "T[33,65] T[65]", "approximate=tanh", .tol = 'E'},
    {"com.microsoft:BiasGeluGrad_dX", "FLT", "T[33,65] T[33,65] T[65] | T[2,3,64] T[2,3,64] T[64] | T[0,5] T[0,5] T[5] | "
                                             "T[1025,1023] T[1025,1023] T[1023]", .tol = 'E'},
    {"com.microsoft:DropoutGrad", "FLT", "T[33,65] bool[33,65] | T[33,65] bool[33,65] T(0.25) | "
                                         "T[33,65] bool[33,65] T(0.25) bool(0) | T[7] bool[7] f32(0.3) bool(1) | "
                                         "T[1025,1023] bool[1025,1023] f64(0.1)", .tol = 'X'},
    {"Dropout", "FLT", "T[33,65] T(0.3) bool(1) | T[1025,1023] - bool(1) | T[7] T(0.5) bool(0) | T[33,65] | "
                       "T[0,5] T(0.3) bool(1) | T[1025,1023] f32(0.9) bool(1)", .tol = 'X', .opset = 13, .nout = 2},
    {"Dropout", "FLT", "T[33,65]", "ratio=0.3", .tol = 'X', .opset = 7, .nout = 2},
    {"Dropout", "f32", "T[33,65] T(0.3) bool(1)", "seed=5", .tol = 'X', .opset = 13, .nout = 2},
    {"com.microsoft:InPlaceAccumulatorV2", "FLT", "T[33,65] T[33,65] | T[33,65] T[33,65] bool(1) | "
                                                  "T[33,65] T[33,65] bool(0) | T[7] T[7] i64(1) | f32[33,65] T[33,65] | "
                                                  "T[1025,1023] T[1025,1023] | T[0,3] T[0,3]", .tol = 'X', .nout = 2},
    {"OneHot", "FLT INT bool", "i64[3,5]@7 i64{7} T{0,1} | i32[4]@5 i64(5) T{3,1} | i64[2,3]@4 f32(4) T{0,1} | "
                               "i64[0,3]@4 i64(4) T{0,1}", .tol = 'X'},
    {"OneHot", "FLT", "i64[3,5]@7 i64(7) T{0,1} | i64[2,3,4]@6 i64(6) T{-1,1}", "axis=0", .tol = 'X'},
    {"OneHot", "FLT", "i64[3,5]@7 i64(7) T{0,1}", "axis=1", .tol = 'X'},
    {"ScatterND", "FLT INT bool", "T[4,3] i64{2} T[3] | T[4,3] i64{-1,2} T[] | T[2,3,4] i64{1} T[3,4] | "
                                  "T[2,3,4] i32{1,-1} T[4]", .tol = 'X'},
    {"ScatterND", "f16 bf16", SCATTER_ADD, "reduction=add", .tol = 'X'},
    {"ScatterND", "f32", SCATTER_ADD, "reduction=add", .tol = 'A'},
    {"ScatterND", "f32", "T[5,4] i64[3,1]@5 T[3,4]", "reduction=mul", .tol = 'E'},
    {"com.microsoft:GatherGrad", "FLT", GATHER_GRAD, "axis=0", .tol = 'A'},
    {"com.microsoft:GatherGrad", "FLT", "i64{3,5,4} i64[6]@5 T[3,6,4] | i64{3,5,4} i64[2,2]@5 T[3,2,2,4]", "axis=1",
     .tol = 'A'},
    /* MaxPool with Indices (grad_ops_pool.c): Y and the argmax exactly as the CPU's */
    {"MaxPool", "FLT", "T[1,3,9,9] | T[2,4,33,17]", "kernel_shape=[3,3] strides=[2,2]", .tol = 'X', .nout = 2},
    {"MaxPool", "FLT", "T[2,3,10,11]", "kernel_shape=[3,2] pads=[1,0,2,1] ceil_mode=1", .tol = 'X', .nout = 2},
    {"MaxPool", "FLT", "T[2,3,10,11]", "kernel_shape=[3,3] dilations=[2,1] storage_order=1", .tol = 'X', .nout = 2},
    {"MaxPool", "FLT", "T[2,3,17] | T[1,1,1]", "kernel_shape=[2] auto_pad=SAME_UPPER", .tol = 'X', .nout = 2},
    {"MaxPool", "FLT", "T[1,2,5,6,7]", "kernel_shape=[2,3,2] strides=[1,2,2]", .tol = 'X', .nout = 2},
};

#endif
