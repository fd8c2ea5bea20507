/* The CUDA backend against the CPU reference, op by op: each row of the tables below is
 * one op with its dtypes, input shapes and attributes; every (dtype, shapes) pair becomes
 * a one-node model that a CPU session and a CUDA session (no fallback: the node runs on
 * the GPU or the open fails) both run on the same deterministic random inputs, and the
 * outputs are compared: exactly for integers, bools and exact float ops (data movement,
 * Max, Floor, ...), else within a per-dtype tolerance. A case whose node the CUDA backend
 * refuses (AMP_ERR_UNSUPPORTED: at open, no kernel for it or its dtype; or when it runs, a
 * geometry the library cannot do, which a session with the fallback gives to the CPU) is
 * counted as "not on the GPU" and printed, never failed; a mismatch or any other error
 * fails.
 * Each test prints one line per op: "op: N cases, M on GPU, K match", and after it which
 * dtype bindings were refused.
 *
 * Skips without a GPU. AMPC_TEST_CUDA_OPS_BACKEND=sim runs the same cases against the
 * device simulator instead (no GPU needed: it proves the cases are valid models the CPU
 * runs, and the harness sound); AMPC_TEST_CUDA_OPS_ONLY=Op,Op limits the ops;
 * AMPC_TEST_CUDA_OPS_VERBOSE=1 prints every case.
 *
 * The tables' little language:
 *   dtypes  "FLT" (f32 f16 bf16), "INT" (i32 i64), "ALL" (FLT INT bool) or single names
 *           (f32 f16 bf16 f64 i8 u8 i32 i64 bool), space-separated, each binding T;
 *           "A>B" binds T to each of A and U to each of B (Cast).
 *   inputs  alternatives separated by '|', each a space-separated input list:
 *           T[3,1,5]  a graph input ([] rank 0), random data; a suffix picks the values:
 *                     + positive, ~ away from 0, # small integers, p near 1, s small
 *                     ([-0.5, 0.5)), @N indices in [-N, N); with no suffix the row's
 *                     .gen (one char per input)
 *           i64{1,-1} a 1-D initializer; T(2.5) a rank-0 initializer; - absent.
 *   attrs   "axis=1 perm=[1,0] alpha=0.5 mode=reflect to=U value=T(2.5)": ints, floats
 *           (with a '.' or an exponent), lists, strings, a dtype (T, U), a 1-element
 *           tensor. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/convert.h"
#include "ir/half.h"
#include "tests/runtime/rt_util.h"

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

/* ---- tolerances ------------------------------------------------------------------ */

/* elementwise: |got - ref| <= rtol |ref| + atol; accumulating: <= acc * max |ref| + atol.
 * 16-bit: about one unit in the last place of the output (fp16 2^-10, bf16 2^-7). */
static const struct {
    int dt;
    double rtol, atol, acc;
} tolerances[] = {
    {AMP_DT_FLOAT, 1e-5, 1e-6, 1e-3},
    {AMP_DT_FLOAT16, 1e-3, 1e-5, 2e-3},
    {AMP_DT_BFLOAT16, 8e-3, 1e-5, 1e-2},
    {AMP_DT_DOUBLE, 1e-12, 1e-12, 1e-9},
};

/* ---- dtypes and values ----------------------------------------------------------- */

static const struct {
    const char *name;
    int dt;
} dtypes[] = {{"f32", AMP_DT_FLOAT}, {"f16", AMP_DT_FLOAT16}, {"bf16", AMP_DT_BFLOAT16}, {"f64", AMP_DT_DOUBLE},
              {"i8", AMP_DT_INT8},   {"u8", AMP_DT_UINT8},    {"i32", AMP_DT_INT32},      {"i64", AMP_DT_INT64},
              {"bool", AMP_DT_BOOL}};
static const struct {
    const char *name, *members;
} groups[] = {{"FLT", "f32 f16 bf16"}, {"INT", "i32 i64"}, {"ALL", "f32 f16 bf16 i32 i64 bool"}};

static const char *dt_short(int dt) {
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (dtypes[i].dt == dt) return dtypes[i].name;
    return amp_dtype_name(dt);
}

/* A dtype name of len chars; T and U are the case's bindings. */
static int dt_parse(const char *s, size_t len, int T, int U) {
    if (len == 1 && *s == 'T') return T;
    if (len == 1 && *s == 'U') return U;
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (strlen(dtypes[i].name) == len && !strncmp(s, dtypes[i].name, len)) return dtypes[i].dt;
    cr_assert_fail("unknown dtype '%.*s'", (int)len, s);
    return 0;
}

/* The dtypes a name or group stands for; returns the count. */
static int dt_list(const char *s, size_t len, int *out) {
    for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++) {
        if (strlen(groups[g].name) != len || strncmp(s, groups[g].name, len)) continue;
        int n = 0;
        for (const char *p = groups[g].members; *p; p += strspn(p, " ")) {
            size_t l = strcspn(p, " ");
            out[n++] = dt_parse(p, l, 0, 0);
            p += l;
        }
        return n;
    }
    out[0] = dt_parse(s, len, 0, 0);
    return 1;
}

static bool dt_is_float(int dt) {
    return dt == AMP_DT_FLOAT || dt == AMP_DT_FLOAT16 || dt == AMP_DT_BFLOAT16 || dt == AMP_DT_DOUBLE;
}

static void put(int dt, void *p, uint64_t i, double v) {
    switch (dt) {
    case AMP_DT_FLOAT: ((float *)p)[i] = (float)v; break;
    case AMP_DT_DOUBLE: ((double *)p)[i] = v; break;
    case AMP_DT_FLOAT16: ((uint16_t *)p)[i] = amp_f32_to_f16((float)v); break;
    case AMP_DT_BFLOAT16: ((uint16_t *)p)[i] = amp_f32_to_bf16((float)v); break;
    case AMP_DT_INT8: ((int8_t *)p)[i] = (int8_t)v; break;
    case AMP_DT_UINT8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case AMP_DT_INT32: ((int32_t *)p)[i] = (int32_t)v; break;
    case AMP_DT_INT64: ((int64_t *)p)[i] = (int64_t)v; break;
    case AMP_DT_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    default: cr_assert_fail("no values for %s", amp_dtype_name(dt));
    }
}

static double get(int dt, const void *p, uint64_t i) {
    switch (dt) {
    case AMP_DT_FLOAT: return ((const float *)p)[i];
    case AMP_DT_DOUBLE: return ((const double *)p)[i];
    case AMP_DT_FLOAT16: return amp_f16_to_f32(((const uint16_t *)p)[i]);
    case AMP_DT_BFLOAT16: return amp_bf16_to_f32(((const uint16_t *)p)[i]);
    case AMP_DT_INT8: return ((const int8_t *)p)[i];
    case AMP_DT_UINT8: case AMP_DT_BOOL: return ((const uint8_t *)p)[i];
    case AMP_DT_INT32: return ((const int32_t *)p)[i];
    case AMP_DT_INT64: return (double)((const int64_t *)p)[i];
    default: return NAN;
    }
}

/* xorshift64*: the same inputs every run, on every machine. */
static uint64_t rng;

static double urand(void) {
    rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
    return (double)((rng * 0x2545f4914f6cdd1dull) >> 11) * 0x1p-53;
}

/* One random value for a generator (see the header); ill-conditioned regions avoided. */
static double gen_value(int dt, char gen, int64_t bound) {
    bool fl = dt_is_float(dt);
    double u = urand();
    if (dt == AMP_DT_BOOL) return u < 0.5;
    switch (gen) {
    case '+': return fl ? 0.1 + 2.9 * u : 1 + floor(20 * u);
    case '~': return (urand() < 0.5 ? -1 : 1) * (fl ? 0.5 + 2.5 * u : 1 + floor(20 * u));
    case '#': return floor(9 * u) - 4;
    case 'p': return fl ? 0.5 + u : 1 + floor(2 * u);
    case 's': return fl ? u - 0.5 : floor(9 * u) - 4;
    case '@': return floor(2 * (double)bound * u) - (double)bound;
    default: return fl ? 6 * u - 3 : floor(41 * u) - 20;
    }
}

/* ---- one input ------------------------------------------------------------------- */

typedef struct In {
    int kind; /* 0 absent, 1 graph input, 2 initializer */
    int dt, rank;
    int64_t dims[AMP_TENSOR_MAX_RANK];
    uint64_t n;
    void *data;
} In;

/* Parses one input token and fills its data; gen is the row's default generator. */
static void parse_in(const char *tok, int T, int U, char gen, In *in) {
    memset(in, 0, sizeof *in);
    if (!strcmp(tok, "-")) return;
    size_t nl = strcspn(tok, "[{(");
    cr_assert(tok[nl], "input '%s': no shape or value", tok);
    in->dt = dt_parse(tok, nl, T, U);
    const char *p = tok + nl + 1;
    char close = tok[nl] == '[' ? ']' : tok[nl] == '{' ? '}' : ')';
    const char *end = strchr(p, close);
    cr_assert_not_null(end, "input '%s': unclosed", tok);
    /* the numbers between the brackets */
    char *vals[1024];
    int nv = 0;
    char body[16384];
    snprintf(body, sizeof body, "%.*s", (int)(end - p), p);
    for (char *s = body, *save = NULL, *t; (t = strtok_r(s, ",", &save)); s = NULL) {
        cr_assert_lt(nv, 1024);
        vals[nv++] = t;
    }
    if (tok[nl] == '[') {
        in->kind = 1;
        in->rank = nv;
        for (int i = 0; i < nv; i++) in->dims[i] = atoll(vals[i]);
    } else {
        in->kind = 2;
        in->rank = tok[nl] == '{';
        in->dims[0] = nv;
        cr_assert(tok[nl] == '{' || nv == 1, "input '%s': a scalar takes one value", tok);
    }
    in->n = 1;
    for (int i = 0; i < in->rank; i++) in->n *= (uint64_t)in->dims[i];
    size_t bytes = 0;
    cr_assert(amp_tensor_expected_bytes(in->dt, in->n, &bytes));
    in->data = calloc(1, bytes ? bytes : 1);
    if (in->kind == 2) {
        for (int i = 0; i < nv; i++) {
            char *e;
            long long iv = strtoll(vals[i], &e, 10);
            if (*e || dt_is_float(in->dt)) put(in->dt, in->data, (uint64_t)i, strtod(vals[i], NULL));
            else if (in->dt == AMP_DT_INT64) ((int64_t *)in->data)[i] = iv; /* exact, up to INT64_MAX */
            else put(in->dt, in->data, (uint64_t)i, (double)iv);
        }
        return;
    }
    const char *suffix = end + 1;
    char g = *suffix ? *suffix : gen;
    int64_t bound = g == '@' ? atoll(suffix + 1) : 0;
    for (uint64_t i = 0; i < in->n; i++) put(in->dt, in->data, i, gen_value(in->dt, g, bound));
}

/* ---- the model ------------------------------------------------------------------- */

/* Sets the attributes of a spec on n. */
static void set_attrs(AmpModel *m, AmpNode *n, const char *spec, int T, int U) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", spec ? spec : "");
    for (char *s = buf, *save = NULL, *t; (t = strtok_r(s, " ", &save)); s = NULL) {
        char *v = strchr(t, '=');
        cr_assert_not_null(v, "attribute '%s' has no value", t);
        *v++ = '\0';
        const char *name = amp_arena_strdup(&m->arena, t);
        char *e;
        if (*v == '[') { /* a list: ints, or floats when one is not an int */
            char *items[64];
            int k = 0;
            bool ints = true;
            v[strcspn(v, "]")] = '\0';
            for (char *s2 = v + 1, *sv2 = NULL, *t2; (t2 = strtok_r(s2, ",", &sv2)); s2 = NULL) {
                items[k++] = t2;
                strtoll(t2, &e, 10);
                ints = ints && !*e;
            }
            AmpAttr *a = amp_node_add_attr(n, name, ints ? AMP_ATTR_INTS : AMP_ATTR_FLOATS);
            if (ints) a->ints = amp_arena_calloc(&m->arena, (size_t)k + 1, sizeof *a->ints), a->n_ints = (size_t)k;
            else a->floats = amp_arena_calloc(&m->arena, (size_t)k + 1, sizeof *a->floats), a->n_floats = (size_t)k;
            for (int i = 0; i < k; i++) {
                if (ints) a->ints[i] = strtoll(items[i], NULL, 10);
                else a->floats[i] = strtof(items[i], NULL);
            }
        } else if (strchr(v, '(')) { /* a 1-element tensor: value=T(2.5) */
            In c;
            parse_in(v, T, U, 0, &c);
            AmpTensor *tt = amp_arena_calloc(&m->arena, 1, sizeof *tt);
            size_t bytes = 0;
            amp_tensor_expected_bytes(c.dt, 1, &bytes);
            tt->dtype = c.dt;
            tt->has = AMP_TENSOR_HAS_DTYPE | AMP_TENSOR_HAS_RAW;
            tt->ndims = 1;
            tt->dims = amp_arena_calloc(&m->arena, 1, sizeof *tt->dims);
            tt->dims[0] = 1;
            tt->nelem = 1;
            tt->raw.data = amp_arena_memdup(&m->arena, c.data, bytes);
            tt->raw.len = bytes;
            free(c.data);
            amp_node_add_attr(n, name, AMP_ATTR_TENSOR)->t = tt;
        } else if (!strcmp(v, "T") || !strcmp(v, "U")) {
            amp_node_add_attr(n, name, AMP_ATTR_INT)->i = *v == 'T' ? T : U;
        } else {
            long long iv = strtoll(v, &e, 10);
            if (!*e) {
                amp_node_add_attr(n, name, AMP_ATTR_INT)->i = iv;
                continue;
            }
            float fv = strtof(v, &e);
            if (!*e) {
                amp_node_add_attr(n, name, AMP_ATTR_FLOAT)->f = fv;
                continue;
            }
            AmpAttr *a = amp_node_add_attr(n, name, AMP_ATTR_STRING);
            a->s.data = (const uint8_t *)amp_arena_strdup(&m->arena, v);
            a->s.len = strlen(v);
        }
    }
}

/* The one-node model, serialised: inputs in0.., outputs y0... */
static void build(const Case *c, const In *in, int n_in, int T, int U, uint8_t **bytes, size_t *len) {
    AmpModel *m = rt_model(c->opset ? c->opset : 18);
    AmpGraph *g = m->graph;
    char ins[512] = "", outs[128] = "", name[16], dims[256];
    for (int i = 0; i < n_in; i++) {
        snprintf(name, sizeof name, "in%d", i);
        size_t l = strlen(ins);
        snprintf(ins + l, sizeof ins - l, "%s%s", i ? "," : "", in[i].kind ? name : "");
        if (in[i].kind == 1) {
            dims[0] = '\0';
            for (int d = 0; d < in[i].rank; d++) {
                l = strlen(dims);
                snprintf(dims + l, sizeof dims - l, "%s%lld", d ? "," : "", (long long)in[i].dims[d]);
            }
            rt_input(g, name, in[i].dt, dims);
        } else if (in[i].kind == 2) {
            rt_init(g, name, in[i].dt, in[i].rank, in[i].dims, in[i].data);
        }
    }
    int nout = c->nout ? c->nout : 1;
    for (int i = 0; i < nout; i++) {
        size_t l = strlen(outs);
        snprintf(outs + l, sizeof outs - l, "%sy%d", i ? "," : "", i);
    }
    /* "domain:Op" names an op of another domain (com.microsoft, opset 1) */
    const char *colon = strchr(c->op, ':'), *op = colon ? colon + 1 : c->op;
    char domain[64] = "";
    if (colon) {
        snprintf(domain, sizeof domain, "%.*s", (int)(colon - c->op), c->op);
        m->opsets[m->n_opsets++] = (AmpOpset){amp_arena_strdup(&m->arena, domain), 1, true};
    }
    AmpNode *n = rt_node(g, domain, op, ins, outs);
    set_attrs(m, n, c->attrs, T, U);
    AmpStatus st = {0};
    amp_infer_model(m, &st); /* types the outputs where it can */
    for (int i = 0; i < nout; i++) {
        snprintf(name, sizeof name, "y%d", i);
        rt_output(g, name, AMP_DT_UNDEFINED, NULL);
    }
    amp_status_clear(&st);
    cr_assert_eq(amp_model_save_bytes(m, bytes, len, &st), AMP_OK, "save: %s", st.msg);
    amp_model_free(m);
}

/* Opens the model on a backend and runs it; *opened says whether the open succeeded. */
static AmpCode run_on(AmpBackendKind be, const uint8_t *bytes, size_t len, const AmpTensorView *iv, size_t niv,
                      AmpTensorView *out, int nout, bool *opened, AmpStatus *st) {
    AmpSessionOptions o = {.backend = be, .ignore_env = true, .no_fallback = be != AMP_BACKEND_CPU};
    AmpSession *s = NULL;
    amp_status_clear(st);
    AmpCode rc = amp_session_open_bytes(bytes, len, NULL, &o, &s, st);
    *opened = rc == AMP_OK;
    if (rc) return rc;
    rc = amp_session_run(s, iv, niv, NULL, (size_t)nout, out, st);
    amp_session_close(s);
    return rc;
}

/* ---- comparing ------------------------------------------------------------------- */

/* Whether got matches ref under the case's tolerance; why says where it does not. */
static bool compare(const AmpTensorView *ref, const AmpTensorView *got, char tol, char *why, size_t wl) {
    if (ref->dtype != got->dtype || ref->rank != got->rank) {
        snprintf(why, wl, "dtype/rank %s/%d, expected %s/%d", dt_short(got->dtype), got->rank, dt_short(ref->dtype),
                 ref->rank);
        return false;
    }
    uint64_t n = 1;
    for (int i = 0; i < ref->rank; i++) {
        if (ref->dims[i] != got->dims[i]) {
            snprintf(why, wl, "dim %d is %lld, expected %lld", i, (long long)got->dims[i], (long long)ref->dims[i]);
            return false;
        }
        n *= (uint64_t)ref->dims[i];
    }
    int dt = ref->dtype;
    double rtol = 0, atol = 0, acc = 0, maxabs = 0;
    bool exact = !dt_is_float(dt) || tol == 'X';
    for (size_t i = 0; i < sizeof tolerances / sizeof tolerances[0]; i++)
        if (tolerances[i].dt == dt) rtol = tolerances[i].rtol, atol = tolerances[i].atol, acc = tolerances[i].acc;
    if (tol == 'A')
        for (uint64_t i = 0; i < n; i++) {
            double r = fabs(get(dt, ref->data, i));
            if (isfinite(r) && r > maxabs) maxabs = r;
        }
    uint64_t bad = 0, first = 0;
    for (uint64_t i = 0; i < n; i++) {
        double r = get(dt, ref->data, i), x = get(dt, got->data, i);
        bool ok;
        if (isnan(r) || isnan(x)) ok = isnan(r) && isnan(x);
        else if (exact || isinf(r)) ok = r == x;
        else ok = fabs(x - r) <= (tol == 'A' ? acc * maxabs : rtol * fabs(r)) + atol;
        if (!ok && !bad++) first = i;
    }
    if (bad)
        snprintf(why, wl, "%llu of %llu elements differ; element %llu: %.9g, expected %.9g", (unsigned long long)bad,
                 (unsigned long long)n, (unsigned long long)first, get(dt, got->data, first),
                 get(dt, ref->data, first));
    return !bad;
}

/* ---- the driver ------------------------------------------------------------------ */

typedef struct Stat {
    const char *op;
    int cases, on_gpu, match, refused;
    char off[512]; /* the dtype bindings of refused cases, " f16 bf16 " */
} Stat;

typedef struct Run {
    AmpBackendKind be;
    const char *dev; /* "cuda" or "sim" */
    bool verbose;
    int failures;
} Run;

/* The (T, U) bindings of a dtypes spec; returns their count. */
static int bindings(const char *dts, int *ts, int *us) {
    int n = 0;
    for (const char *p = dts; *p; p += strspn(p, " ")) {
        size_t l = strcspn(p, " "), gt = strcspn(p, ">");
        int a[16], b[16] = {0}, na = dt_list(p, gt < l ? gt : l, a), nb = 1;
        if (gt < l) nb = dt_list(p + gt + 1, l - gt - 1, b);
        for (int i = 0; i < na; i++)
            for (int j = 0; j < nb; j++) ts[n] = a[i], us[n++] = b[j];
        p += l;
    }
    return n;
}

/* One case: the inputs alternative `alt` of row c with T and U bound, its random data
 * drawn from `seed`. */
static void run_case(Run *r, Stat *stt, const Case *c, uint64_t seed, const char *alt, int T, int U) {
    rng = seed;
    for (int k = 0; k < 4; k++) urand();
    In in[16];
    int n_in = 0;
    char toks[1024];
    snprintf(toks, sizeof toks, "%s", alt);
    for (char *s = toks, *save = NULL, *t; (t = strtok_r(s, " ", &save)); s = NULL) {
        char g = c->gen && (size_t)n_in < strlen(c->gen) && c->gen[n_in] != ' ' ? c->gen[n_in] : 0;
        cr_assert_lt(n_in, 16);
        parse_in(t, T, U, g, &in[n_in++]);
    }
    char label[1200], bind[32];
    snprintf(bind, sizeof bind, "%s%s%s", dt_short(T), U ? ">" : "", U ? dt_short(U) : "");
    snprintf(label, sizeof label, "%s[%s] %s {%s}", c->op, bind, alt, c->attrs ? c->attrs : "");
    uint8_t *bytes = NULL;
    size_t len = 0;
    build(c, in, n_in, T, U, &bytes, &len);
    static const char *const names[16] = {"in0", "in1", "in2",  "in3",  "in4",  "in5",  "in6",  "in7",
                                          "in8", "in9", "in10", "in11", "in12", "in13", "in14", "in15"};
    AmpTensorView iv[16];
    size_t niv = 0;
    for (int i = 0; i < n_in; i++)
        if (in[i].kind == 1) iv[niv++] = rt_view(names[i], in[i].dt, in[i].data, in[i].rank, in[i].dims);
    int nout = c->nout ? c->nout : 1;
    AmpTensorView ref[8] = {0}, got[8] = {0};
    AmpStatus st = {0};
    bool opened = false;
    stt->cases++;
    AmpCode rc = run_on(AMP_BACKEND_CPU, bytes, len, iv, niv, ref, nout, &opened, &st);
    if (rc) {
        fprintf(stderr, "ERROR %s: the CPU reference fails: %s\n", label, st.msg);
        r->failures++;
    } else if ((rc = run_on(r->be, bytes, len, iv, niv, got, nout, &opened, &st)) == AMP_ERR_UNSUPPORTED) {
        /* no kernel (refused at open), or a kernel that refuses these shapes when it runs
         * (a geometry cuDNN cannot do; with the fallback on, the CPU then runs the node):
         * the first refusal of an op with its reason, then only which dtypes */
        if (!stt->refused++ || r->verbose) fprintf(stderr, "not on %s: %s: %s\n", r->dev, label, st.msg);
        char word[40];
        snprintf(word, sizeof word, " %s ", bind);
        size_t ol = strlen(stt->off), at = ol ? ol - 1 : 0; /* entries share their spaces */
        if (!strstr(stt->off, word) && at + strlen(word) < sizeof stt->off)
            snprintf(stt->off + at, sizeof stt->off - at, "%s", word);
    } else if (rc) {
        fprintf(stderr, "ERROR %s: %s fails: %s\n", label, r->dev, st.msg);
        stt->on_gpu += opened;
        r->failures++;
    } else {
        stt->on_gpu++;
        bool ok = true;
        char why[256];
        for (int o = 0; o < nout && ok; o++) {
            ok = compare(&ref[o], &got[o], c->tol ? c->tol : 'E', why, sizeof why);
            if (!ok) fprintf(stderr, "MISMATCH %s: output %d: %s\n", label, o, why);
        }
        stt->match += ok;
        r->failures += !ok;
        if (ok && r->verbose) fprintf(stderr, "ok %s\n", label);
    }
    for (int o = 0; o < nout; o++) amp_tensor_view_free(&ref[o]), amp_tensor_view_free(&got[o]);
    for (int i = 0; i < n_in; i++) free(in[i].data);
    free(bytes);
}

/* Runs every case of a table; prints the per-op summary; fails on a mismatch or error. */
static void run_table(const Case *cases, size_t n_cases) {
    const char *mode = getenv("AMPC_TEST_CUDA_OPS_BACKEND"), *only = getenv("AMPC_TEST_CUDA_OPS_ONLY");
    const char *vb = getenv("AMPC_TEST_CUDA_OPS_VERBOSE");
    bool sim = mode && !strcmp(mode, "sim");
    if (!sim && !amp_cuda_device_available()) cr_skip_test("no CUDA device");
    Run r = {sim ? AMP_BACKEND_SIM : AMP_BACKEND_CUDA, sim ? "sim" : "cuda", vb && *vb && strcmp(vb, "0"), 0};
    Stat stats[64];
    int n_stats = 0;
    for (size_t ci = 0; ci < n_cases; ci++) {
        const Case *c = &cases[ci];
        if (only) { /* AMPC_TEST_CUDA_OPS_ONLY=Op,Op */
            char pat[80], list[512];
            snprintf(pat, sizeof pat, ",%s,", c->op);
            snprintf(list, sizeof list, ",%s,", only);
            if (!strstr(list, pat)) continue;
        }
        Stat *stt = NULL;
        for (int i = 0; i < n_stats && !stt; i++)
            if (!strcmp(stats[i].op, c->op)) stt = &stats[i];
        if (!stt) {
            cr_assert_lt(n_stats, 64);
            stt = &stats[n_stats++];
            *stt = (Stat){.op = c->op};
        }
        int ts[64], us[64], n_tu = bindings(c->dts, ts, us);
        char alts[4096];
        snprintf(alts, sizeof alts, "%s", c->ins);
        uint64_t ai = 0;
        for (char *s = alts, *save = NULL, *a; (a = strtok_r(s, "|", &save)); s = NULL, ai++) {
            a += strspn(a, " ");
            for (size_t l = strlen(a); l && a[l - 1] == ' ';) a[--l] = '\0';
            for (int tu = 0; tu < n_tu; tu++)
                run_case(&r, stt, c, 0x9e3779b97f4a7c15ull ^ (ci << 40) ^ (ai << 20) ^ (uint64_t)tu, a, ts[tu], us[tu]);
        }
    }
    for (int i = 0; i < n_stats; i++) {
        Stat *t = &stats[i];
        fprintf(stderr, "%s: %d cases, %d on %s, %d match", t->op, t->cases, t->on_gpu, sim ? "sim" : "GPU", t->match);
        if (t->refused) fprintf(stderr, " (%d refused, for%.*s)", t->refused, (int)strlen(t->off) - 1, t->off);
        fputc('\n', stderr);
    }
    cr_assert_eq(r.failures, 0, "%d cases mismatch or fail (see above)", r.failures);
}

#define RUN(table) run_table(table, sizeof table / sizeof table[0])

Test(cuda_ops, elementwise, .timeout = 1200) {
    RUN(elementwise);
}

Test(cuda_ops, movement, .timeout = 1200) {
    RUN(movement);
}

Test(cuda_ops, reduce_norm, .timeout = 1200) {
    RUN(reduce_norm);
}

Test(cuda_ops, gemm_conv_pool, .timeout = 1200) {
    RUN(gemm_conv);
}

Test(cuda_ops, attention, .timeout = 1200) {
    RUN(attention);
}
