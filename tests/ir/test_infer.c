/* Type and shape inference (ir/infer*.c): shapes of the common ops with their opset
 * differences, constants read from initializers and shape arithmetic, reductions,
 * normalisations and optimizers. Merging with declared types and If/Loop/Scan bodies are
 * test_infer_ctrl.c. */
#include "tests/ir/infer_test_util.h"

/* ---- elementwise ------------------------------------------------------------------ */

Test(infer, elementwise_broadcast_and_symbols) {
    AmpModel *m = model(17);
    AmpGraph *g = m->graph;
    input(g, "A", AMP_DT_FLOAT, "N,3,1");
    input(g, "B", AMP_DT_FLOAT, "4");
    input(g, "C", AMP_DT_FLOAT, "N,3,4");
    input(g, "D", AMP_DT_FLOAT, NULL);
    node(g, "Add", "add", "A,B", "ab");
    node(g, "Mul", "mul", "ab,C", "abc");
    node(g, "Relu", "relu", "abc", "r");
    node(g, "Less", "less", "r,B", "lt");
    node(g, "Not", "not", "lt", "nlt");
    node(g, "Sub", "sub", "A,D", "ad");
    node(g, "Sum", "sum", "A,B,C", "s3");
    infer_ok(m);
    EXPECT_TYPE(g, "ab", "float[N,3,4]");
    EXPECT_TYPE(g, "abc", "float[N,3,4]");
    EXPECT_TYPE(g, "r", "float[N,3,4]");
    EXPECT_TYPE(g, "lt", "bool[N,3,4]");
    EXPECT_TYPE(g, "nlt", "bool[N,3,4]");
    EXPECT_TYPE(g, "ad", "float[*]");
    EXPECT_TYPE(g, "s3", "float[N,3,4]");
    amp_model_free(m);
}

Test(infer, broadcast_mismatch_is_an_error) {
    AmpModel *m = model(17);
    AmpGraph *g = m->graph;
    input(g, "A", AMP_DT_FLOAT, "2,3");
    input(g, "B", AMP_DT_FLOAT, "4");
    node(g, "Add", "bad_add", "A,B", "y");
    const char *msg = infer_err(m);
    cr_expect(strstr(msg, "bad_add") && strstr(msg, "Add"), "%s", msg);
    amp_model_free(m);
}

/* Einsum: letters, the ellipsis, the implicit output; and (found by fuzz_convert) a term
 * with two ellipses, or an output with a lone '.', is a bad equation: the second ellipsis
 * read dims past the input's rank. */
static AmpModel *einsum(const char *eq, const char *dims0, const char *dims1) {
    AmpModel *m = model(12);
    AmpGraph *g = m->graph;
    input(g, "x", AMP_DT_FLOAT, dims0);
    if (dims1) input(g, "w", AMP_DT_FLOAT, dims1);
    attr_str(node(g, "Einsum", "es", dims1 ? "x,w" : "x", "y"), "equation", eq);
    return m;
}

Test(infer, einsum_shapes_and_bad_equations) {
    static const struct {
        const char *eq, *d0, *d1, *want;
    } ok[] = {
        {"bij,bjk->bik", "2,3,4", "2,4,5", "float[2,3,5]"},
        {"...ii->...i", "3,5,5", NULL, "float[3,5]"},
        {"ij,jk", "3,4", "4,5", "float[3,5]"},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        AmpModel *m = einsum(ok[i].eq, ok[i].d0, ok[i].d1);
        infer_ok(m);
        EXPECT_TYPE(m->graph, "y", ok[i].want);
        amp_model_free(m);
    }
    static const char *const bad[] = {"...ii...", "...ii &>...$", "ij->i.", "ij->i.."};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        AmpModel *m = einsum(bad[i], "3,5,5", NULL);
        const char *msg = infer_err(m);
        cr_expect(strstr(msg, "bad equation"), "'%s': %s", bad[i], msg);
        amp_model_free(m);
    }
}

Test(infer, where_broadcasts_data_inputs) {
    AmpModel *m = model(17);
    AmpGraph *g = m->graph;
    input(g, "c", AMP_DT_BOOL, "2,1");
    input(g, "x", AMP_DT_FLOAT16, "1,3");
    input(g, "y", AMP_DT_FLOAT16, "");
    node(g, "Where", "where", "c,x,y", "w");
    infer_ok(m);
    EXPECT_TYPE(g, "w", "float16[2,3]");
    amp_model_free(m);
}

Test(infer, cast_shape_size) {
    AmpModel *m = model(17);
    AmpGraph *g = m->graph;
    input(g, "X", AMP_DT_FLOAT, "B,3,5");
    attr_int(node(g, "Cast", "cast", "X", "h"), "to", AMP_DT_FLOAT16);
    node(g, "Shape", "shape", "X", "s");
    attr_int(node(g, "Shape", "shape_tail", "X", "s2"), "start", 1);
    node(g, "Size", "size", "X", "n");
    node(g, "Dropout", "drop", "h", "d,mask");
    infer_ok(m);
    EXPECT_TYPE(g, "h", "float16[B,3,5]");
    EXPECT_TYPE(g, "s", "int64[3]");
    EXPECT_TYPE(g, "s2", "int64[2]");
    EXPECT_TYPE(g, "n", "int64[]");
    EXPECT_TYPE(g, "d", "float16[B,3,5]");
    EXPECT_TYPE(g, "mask", "bool[B,3,5]");
    amp_model_free(m);
}

Test(infer, constants) {
    AmpModel *m = model(17);
    AmpGraph *g = m->graph;
    AmpNode *c = node(g, "Constant", "c0", "", "k");
    AmpAttr *a = amp_node_add_attr(c, "value_ints", AMP_ATTR_INTS);
    static int64_t three[3] = {1, 2, 3};
    a->ints = three;
    a->n_ints = 3;
    amp_node_add_attr(node(g, "Constant", "c1", "", "f"), "value_float", AMP_ATTR_FLOAT)->f = 2.0f;
    node(g, "ConstantOfShape", "cos", "k", "z");
    init_i64(g, "start", -1, I64(2));
    init_i64(g, "limit", -1, I64(11));
    init_i64(g, "delta", -1, I64(3));
    node(g, "Range", "range", "start,limit,delta", "r");
    infer_ok(m);
    EXPECT_TYPE(g, "k", "int64[3]");
    EXPECT_TYPE(g, "f", "float[]");
    EXPECT_TYPE(g, "z", "float[1,2,3]");
    EXPECT_TYPE(g, "r", "int64[3]"); /* 2, 5, 8 */
    EXPECT_TYPE(g, "start", "int64[]");
    amp_model_free(m);
}

/* Range counts exactly in integers (ir/range.h, shared with the kernel): near INT64_MAX the
 * count in double was 0 where the kernel makes 2 elements; a negative delta counts down. */
Test(infer, range_counts_exactly_at_the_int64_limits) {
    AmpModel *m = model(17);
    AmpGraph *g = m->graph;
    init_i64(g, "s", -1, I64(INT64_MAX - 2));
    init_i64(g, "l", -1, I64(INT64_MAX));
    init_i64(g, "d", -1, I64(1));
    init_i64(g, "s2", -1, I64(INT64_MAX));
    init_i64(g, "l2", -1, I64(INT64_MIN));
    init_i64(g, "d2", -1, I64(INT64_MIN));
    init_i64(g, "e", -1, I64(5));
    node(g, "Range", "near_max", "s,l,d", "r");
    node(g, "Range", "down", "s2,l2,d2", "r2"); /* INT64_MAX, -1: two steps of INT64_MIN */
    node(g, "Range", "empty", "l,s,d", "r3");
    node(g, "Range", "backwards_empty", "e,l,d2", "r4");
    infer_ok(m);
    EXPECT_TYPE(g, "r", "int64[2]");
    EXPECT_TYPE(g, "r2", "int64[2]");
    EXPECT_TYPE(g, "r3", "int64[0]");
    EXPECT_TYPE(g, "r4", "int64[0]");
    amp_model_free(m);
}

/* ---- matrix products and convolutions --------------------------------------------- */

Test(infer, matmul_broadcasting) {
    AmpModel *m = model(17);
    AmpGraph *g = m->graph;
    input(g, "A", AMP_DT_FLOAT, "2,1,3,4");
    input(g, "B", AMP_DT_FLOAT, "5,4,6");
    input(g, "v", AMP_DT_FLOAT, "4");
    input(g, "M", AMP_DT_FLOAT, "4,6");
    input(g, "S", AMP_DT_FLOAT, "N,T,4");
    node(g, "MatMul", "mm", "A,B", "y");
    node(g, "MatMul", "vm", "v,M", "vy");
    node(g, "MatMul", "mv", "S,v", "sv");
    node(g, "MatMul", "sm", "S,M", "sy");
    infer_ok(m);
    EXPECT_TYPE(g, "y", "float[2,5,3,6]");
    EXPECT_TYPE(g, "vy", "float[6]");
    EXPECT_TYPE(g, "sv", "float[N,T]");
    EXPECT_TYPE(g, "sy", "float[N,T,6]");
    amp_model_free(m);
}

Test(infer, matmul_inner_mismatch) {
    AmpModel *m = model(17);
    AmpGraph *g = m->graph;
    input(g, "A", AMP_DT_FLOAT, "3,4");
    input(g, "B", AMP_DT_FLOAT, "5,6");
    node(g, "MatMul", "mm_bad", "A,B", "y");
    const char *msg = infer_err(m);
    cr_expect(strstr(msg, "mm_bad") != NULL, "%s", msg);
    amp_model_free(m);
}

Test(infer, gemm_transposes) {
    AmpModel *m = model(13);
    AmpGraph *g = m->graph;
    input(g, "A", AMP_DT_FLOAT, "4,3");
    input(g, "B", AMP_DT_FLOAT, "5,4");
    input(g, "C", AMP_DT_FLOAT, "5");
    AmpNode *n = node(g, "Gemm", "gemm", "A,B,C", "y");
    attr_int(n, "transA", 1);
    attr_int(n, "transB", 1);
    input(g, "P", AMP_DT_FLOAT, "B,4");
    input(g, "Q", AMP_DT_FLOAT, "4,7");
    node(g, "Gemm", "gemm2", "P,Q", "z");
    infer_ok(m);
    EXPECT_TYPE(g, "y", "float[3,5]");
    EXPECT_TYPE(g, "z", "float[B,7]");
    amp_model_free(m);
}

Test(infer, conv_pads_strides_dilations_groups) {
    AmpModel *m = model(17);
    AmpGraph *g = m->graph;
    input(g, "X", AMP_DT_FLOAT, "1,4,32,32");
    input(g, "W", AMP_DT_FLOAT, "8,2,3,3");
    AmpNode *n = node(g, "Conv", "conv", "X,W", "y");
    attr_ints(n, "pads", NI64(1, 1, 1, 1));
    attr_ints(n, "strides", NI64(2, 2));
    attr_ints(n, "dilations", NI64(2, 2));
    attr_int(n, "group", 2);
    /* (32 + 2 - ((3 - 1) * 2 + 1)) / 2 + 1 = 15 */
    AmpNode *same = node(g, "Conv", "conv_same", "X,W", "ys");
    attr_str(same, "auto_pad", "SAME_UPPER");
    attr_ints(same, "strides", NI64(2, 2));
    attr_int(same, "group", 2);
    input(g, "Z", AMP_DT_FLOAT, "N,4,H,9");
    node(g, "Conv", "conv_sym", "Z,W", "yz");
    AmpNode *p = node(g, "MaxPool", "pool", "X", "pooled,idx");
    attr_ints(p, "kernel_shape", NI64(3, 3));
    attr_ints(p, "strides", NI64(2, 2));
    attr_int(p, "ceil_mode", 1);
    node(g, "GlobalAveragePool", "gap", "X", "gap");
    infer_ok(m);
    EXPECT_TYPE(g, "y", "float[1,8,15,15]");
    EXPECT_TYPE(g, "ys", "float[1,8,16,16]");
    EXPECT_TYPE(g, "yz", "float[N,8,?,7]");
    EXPECT_TYPE(g, "pooled", "float[1,4,16,16]"); /* ceil((32 - 3) / 2) + 1 */
    EXPECT_TYPE(g, "idx", "int64[1,4,16,16]");
    EXPECT_TYPE(g, "gap", "float[1,4,1,1]");
    amp_model_free(m);
}

Test(infer, conv_transpose) {
    AmpModel *m = model(17);
    AmpGraph *g = m->graph;
    input(g, "X", AMP_DT_FLOAT, "1,8,10,10");
    input(g, "W", AMP_DT_FLOAT, "8,3,4,4");
    AmpNode *n = node(g, "ConvTranspose", "deconv", "X,W", "y");
    attr_ints(n, "strides", NI64(2, 2));
    attr_ints(n, "pads", NI64(1, 1, 1, 1));
    attr_int(n, "group", 2);
    infer_ok(m);
    /* 2 * (10 - 1) + 4 - 2 = 20; channels 3 * group */
    EXPECT_TYPE(g, "y", "float[1,6,20,20]");
    amp_model_free(m);
}

/* ---- data movement ------------------------------------------------------------------ */

Test(infer, reshape_from_initializer) {
    AmpModel *m = model(14);
    AmpGraph *g = m->graph;
    input(g, "X", AMP_DT_FLOAT, "2,3,4");
    init_i64(g, "shape", 2, I64(0, -1));
    init_i64(g, "shape3", 3, I64(-1, 2, 2));
    node(g, "Reshape", "rs", "X,shape", "y");
    node(g, "Reshape", "rs3", "X,shape3", "y3");
    input(g, "dyn", AMP_DT_INT64, "3");
    node(g, "Reshape", "rs_dyn", "X,dyn", "yd");
    infer_ok(m);
    EXPECT_TYPE(g, "y", "float[2,12]");
    EXPECT_TYPE(g, "y3", "float[6,2,2]");
    EXPECT_TYPE(g, "yd", "float[?,?,?]"); /* values unknown, length known */
    amp_model_free(m);
}

/* The exporter pattern Shape -> Gather -> Unsqueeze -> Concat -> Reshape keeps a
 * symbolic batch dim. */
Test(infer, reshape_through_shape_arithmetic) {
    AmpModel *m = model(13);
    AmpGraph *g = m->graph;
    input(g, "X", AMP_DT_FLOAT, "N,3,4");
    init_i64(g, "zero", -1, I64(0));
    init_i64(g, "axes0", 1, I64(0));
    init_i64(g, "minus1", 1, I64(-1));
    node(g, "Shape", "sh", "X", "s");
    node(g, "Gather", "ga", "s,zero", "b");
    node(g, "Unsqueeze", "un", "b,axes0", "b1");
    attr_int(node(g, "Concat", "cat", "b1,minus1", "target"), "axis", 0);
    node(g, "Reshape", "rs", "X,target", "y");
    infer_ok(m);
    EXPECT_TYPE(g, "b", "int64[]");
    EXPECT_TYPE(g, "b1", "int64[1]");
    EXPECT_TYPE(g, "target", "int64[2]");
    EXPECT_TYPE(g, "y", "float[N,12]");
    amp_model_free(m);
}

Test(infer, transpose_flatten_concat_split) {
    AmpModel *m = model(13);
    AmpGraph *g = m->graph;
    input(g, "X", AMP_DT_FLOAT, "2,3,4");
    input(g, "Y", AMP_DT_FLOAT, "2,5,4");
    input(g, "U", AMP_DT_FLOAT, "2,?,4");
    attr_ints(node(g, "Transpose", "tp", "X", "t"), "perm", NI64(2, 0, 1));
    node(g, "Transpose", "tp_default", "X", "tr");
    attr_int(node(g, "Flatten", "fl", "X", "f"), "axis", 2);
    attr_int(node(g, "Concat", "cat", "X,Y", "c"), "axis", 1);
    attr_int(node(g, "Concat", "cat_neg", "X,Y", "c2"), "axis", -2);
    attr_int(node(g, "Concat", "cat_unknown", "X,U", "cu"), "axis", 1);
    init_i64(g, "parts", 2, I64(3, 5));
    attr_int(node(g, "Split", "sp", "c,parts", "p0,p1"), "axis", 1);
    attr_int(node(g, "Split", "sp_eq", "X", "e0,e1"), "axis", 2);
    infer_ok(m);
    EXPECT_TYPE(g, "t", "float[4,2,3]");
    EXPECT_TYPE(g, "tr", "float[4,3,2]");
    EXPECT_TYPE(g, "f", "float[6,4]");
    EXPECT_TYPE(g, "c", "float[2,8,4]");
    EXPECT_TYPE(g, "c2", "float[2,8,4]");
    EXPECT_TYPE(g, "cu", "float[2,?,4]");
    EXPECT_TYPE(g, "p0", "float[2,3,4]");
    EXPECT_TYPE(g, "p1", "float[2,5,4]");
    EXPECT_TYPE(g, "e0", "float[2,3,2]");
    amp_model_free(m);
}

Test(infer, squeeze_unsqueeze_opset11_attribute) {
    AmpModel *m = model(11);
    AmpGraph *g = m->graph;
    input(g, "X", AMP_DT_FLOAT, "1,3,1,5");
    attr_ints(node(g, "Squeeze", "sq", "X", "s"), "axes", NI64(0, -2));
    node(g, "Squeeze", "sq_all", "X", "s_all");
    attr_ints(node(g, "Unsqueeze", "un", "s", "u"), "axes", NI64(0, 3));
    infer_ok(m);
    EXPECT_TYPE(g, "s", "float[3,5]");
    EXPECT_TYPE(g, "s_all", "float[3,5]");
    EXPECT_TYPE(g, "u", "float[1,3,5,1]");
    amp_model_free(m);
}

Test(infer, squeeze_unsqueeze_opset13_input) {
    AmpModel *m = model(13);
    AmpGraph *g = m->graph;
    input(g, "X", AMP_DT_FLOAT, "1,3,1,5");
    init_i64(g, "ax", 1, I64(2));
    init_i64(g, "ax2", 2, I64(-1, 1));
    node(g, "Squeeze", "sq", "X,ax", "s");
    node(g, "Unsqueeze", "un", "s,ax2", "u");
    input(g, "dyn_axes", AMP_DT_INT64, "1");
    node(g, "Squeeze", "sq_dyn", "X,dyn_axes", "sd");
    /* an opset-11 style attribute is ignored at opset 13 */
    attr_ints(node(g, "Unsqueeze", "un_attr", "X", "ua"), "axes", NI64(0));
    infer_ok(m);
    EXPECT_TYPE(g, "s", "float[1,3,5]");
    EXPECT_TYPE(g, "u", "float[1,1,3,5,1]");
    EXPECT_TYPE(g, "sd", "float[*]");
    EXPECT_TYPE(g, "ua", "float[*]");
    amp_model_free(m);
}

Test(infer, slice_gather_expand_tile_pad) {
    AmpModel *m = model(13);
    AmpGraph *g = m->graph;
    input(g, "X", AMP_DT_FLOAT, "10,20,N");
    init_i64(g, "starts", 2, I64(1, -5));
    init_i64(g, "ends", 2, I64(1000, 20));
    init_i64(g, "axes", 2, I64(0, 1));
    init_i64(g, "steps", 2, I64(3, 1));
    node(g, "Slice", "sl", "X,starts,ends,axes,steps", "s");
    input(g, "idx", AMP_DT_INT64, "4,2");
    attr_int(node(g, "Gather", "ga", "X,idx", "gt"), "axis", 1);
    input(g, "E", AMP_DT_FLOAT, "3,1");
    init_i64(g, "eshape", 3, I64(2, 1, 6));
    node(g, "Expand", "ex", "E,eshape", "e");
    init_i64(g, "reps", 2, I64(2, 3));
    node(g, "Tile", "ti", "E,reps", "t");
    init_i64(g, "pads", 4, I64(1, 0, 2, 1));
    node(g, "Pad", "pad", "E,pads", "p");
    infer_ok(m);
    EXPECT_TYPE(g, "s", "float[3,5,N]"); /* rows 1,4,7; columns 15..19 */
    EXPECT_TYPE(g, "gt", "float[10,4,2,N]");
    EXPECT_TYPE(g, "e", "float[2,3,6]");
    EXPECT_TYPE(g, "t", "float[6,3]");
    EXPECT_TYPE(g, "p", "float[6,2]");
    amp_model_free(m);
}

/* Slice's clamping is the kernels' (amp_slice_range, ir/tensor.h): with a negative step a
 * start before the axis clamps to 0, so x[-100:-200:-1] on 5 elements takes element 0, as
 * the ONNX spec and the kernels say (the shape function used to give 0 elements). */
Test(infer, slice_negative_step_clamps_like_the_kernel) {
    AmpModel *m = model(13);
    AmpGraph *g = m->graph;
    input(g, "X", AMP_DT_FLOAT, "5,6");
    init_i64(g, "starts", 2, I64(-100, 100));
    init_i64(g, "ends", 2, I64(-200, -200));
    init_i64(g, "axes", 2, I64(0, 1));
    init_i64(g, "steps", 2, I64(-1, -2));
    node(g, "Slice", "sl", "X,starts,ends,axes,steps", "s");
    infer_ok(m);
    EXPECT_TYPE(g, "s", "float[1,3]"); /* row 0; columns 5, 3, 1 */
    amp_model_free(m);
}

Test(infer, resize_sizes_and_scales) {
    AmpModel *m = model(13);
    AmpGraph *g = m->graph;
    input(g, "X", AMP_DT_FLOAT, "1,3,10,10");
    init_i64(g, "sizes", 4, I64(1, 3, 25, 30));
    node(g, "Resize", "rz", "X,,,sizes", "y");
    input(g, "scales", AMP_DT_FLOAT, "4");
    node(g, "Resize", "rz_dyn", "X,,scales", "yd");
    infer_ok(m);
    EXPECT_TYPE(g, "y", "float[1,3,25,30]");
    EXPECT_TYPE(g, "yd", "float[?,?,?,?]");
    amp_model_free(m);
}

/* ---- reductions and normalisations -------------------------------------------------- */

Test(infer, reduce_axes_as_input_opset18) {
    AmpModel *m = model(18);
    AmpGraph *g = m->graph;
    input(g, "X", AMP_DT_FLOAT, "2,3,4");
    init_i64(g, "ax", 1, I64(1));
    node(g, "ReduceMean", "keep", "X,ax", "k");
    attr_int(node(g, "ReduceMean", "drop", "X,ax", "d"), "keepdims", 0);
    node(g, "ReduceMax", "all", "X", "a");
    attr_int(node(g, "ReduceSum", "noop", "X", "n"), "noop_with_empty_axes", 1);
    input(g, "dyn", AMP_DT_INT64, "1");
    node(g, "ReduceMin", "dynk", "X,dyn", "dk");
    attr_int(node(g, "ReduceMin", "dynd", "X,dyn", "dd"), "keepdims", 0);
    infer_ok(m);
    EXPECT_TYPE(g, "k", "float[2,1,4]");
    EXPECT_TYPE(g, "d", "float[2,4]");
    EXPECT_TYPE(g, "a", "float[1,1,1]");
    EXPECT_TYPE(g, "n", "float[2,3,4]");
    EXPECT_TYPE(g, "dk", "float[?,?,?]");
    EXPECT_TYPE(g, "dd", "float[*]");
    amp_model_free(m);
}

Test(infer, reduce_axes_as_attribute_opset11) {
    AmpModel *m = model(11);
    AmpGraph *g = m->graph;
    input(g, "X", AMP_DT_FLOAT, "2,3,4");
    AmpNode *n = node(g, "ReduceMean", "rm", "X", "y");
    attr_ints(n, "axes", NI64(0, -1));
    attr_int(n, "keepdims", 0);
    attr_ints(node(g, "ReduceSum", "rs", "X", "z"), "axes", NI64(2));
    AmpNode *am = node(g, "ArgMax", "am", "X", "i");
    attr_int(am, "axis", 1);
    attr_int(am, "keepdims", 0);
    infer_ok(m);
    EXPECT_TYPE(g, "y", "float[3]");
    EXPECT_TYPE(g, "z", "float[2,3,1]");
    EXPECT_TYPE(g, "i", "int64[2,4]");
    amp_model_free(m);
}

Test(infer, normalisations_and_losses) {
    AmpModel *m = model(17);
    AmpGraph *g = m->graph;
    input(g, "X", AMP_DT_FLOAT16, "B,T,8");
    input(g, "s", AMP_DT_FLOAT16, "8");
    attr_int(node(g, "LayerNormalization", "ln", "X,s,s", "y,mean,istd"), "axis", -1);
    input(g, "I", AMP_DT_FLOAT, "N,C,5,5");
    input(g, "c", AMP_DT_FLOAT, "C");
    node(g, "BatchNormalization", "bn", "I,c,c,c,c", "bny");
    input(g, "scores", AMP_DT_FLOAT, "N,10");
    input(g, "labels", AMP_DT_INT64, "N");
    node(g, "SoftmaxCrossEntropyLoss", "sce", "scores,labels", "loss,logp");
    attr_str(node(g, "NegativeLogLikelihoodLoss", "nll", "logp,labels", "nl"), "reduction", "none");
    node(g, "Softmax", "sm", "scores", "p");
    init_i64(g, "k", 1, I64(3));
    node(g, "TopK", "topk", "scores,k", "tv,ti");
    infer_ok(m);
    EXPECT_TYPE(g, "y", "float16[B,T,8]");
    EXPECT_TYPE(g, "mean", "float[B,T,1]");
    EXPECT_TYPE(g, "istd", "float[B,T,1]");
    EXPECT_TYPE(g, "bny", "float[N,C,5,5]");
    EXPECT_TYPE(g, "loss", "float[]");
    EXPECT_TYPE(g, "logp", "float[N,10]");
    EXPECT_TYPE(g, "nl", "float[N]");
    EXPECT_TYPE(g, "p", "float[N,10]");
    EXPECT_TYPE(g, "tv", "float[N,3]");
    EXPECT_TYPE(g, "ti", "int64[N,3]");
    amp_model_free(m);
}

Test(infer, training_optimizers_mirror_inputs) {
    AmpModel *m = model(17);
    AmpGraph *g = m->graph;
    input(g, "R", AMP_DT_FLOAT, "");
    input(g, "T", AMP_DT_INT64, "");
    input(g, "W1", AMP_DT_FLOAT, "3,4");
    input(g, "W2", AMP_DT_FLOAT, "5");
    input(g, "G1", AMP_DT_FLOAT, "3,4");
    input(g, "G2", AMP_DT_FLOAT, "5");
    input(g, "V1", AMP_DT_FLOAT, "3,4");
    input(g, "V2", AMP_DT_FLOAT, "5");
    input(g, "H1", AMP_DT_DOUBLE, "3,4");
    input(g, "H2", AMP_DT_DOUBLE, "5");
    node_d(g, "ai.onnx.preview.training", "Adam", "adam", "R,T,W1,W2,G1,G2,V1,V2,H1,H2",
           "W1n,W2n,V1n,V2n,H1n,H2n");
    node_d(g, "ai.onnx.preview.training", "Momentum", "mom", "R,T,W1,G1,V1", "W1m,V1m");
    node_d(g, "com.microsoft", "InPlaceAccumulatorV2", "acc", "G1,G1", "flag,G1acc");
    infer_ok(m);
    EXPECT_TYPE(g, "W1n", "float[3,4]");
    EXPECT_TYPE(g, "W2n", "float[5]");
    EXPECT_TYPE(g, "V2n", "float[5]");
    EXPECT_TYPE(g, "H1n", "double[3,4]");
    EXPECT_TYPE(g, "H2n", "double[5]");
    EXPECT_TYPE(g, "V1m", "float[3,4]");
    EXPECT_TYPE(g, "flag", "bool[1]");
    EXPECT_TYPE(g, "G1acc", "float[3,4]");
    amp_model_free(m);
}
