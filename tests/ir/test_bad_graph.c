/* Broken model content in files that parse (bad dims, raw_data and typed data counts,
 * unknown dtypes, cycles, duplicate producers, undefined names, wrong attribute types,
 * new or missing opsets, no graph) gives a clear one-line input error that names what is
 * wrong, at load or from the verifier; never a crash. Whole-file damage and the CLI are
 * in test_bad_input.c. */
#include <criterion/criterion.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/ir/bad_input_util.h"
#include "ir/ir.h"
#include "tests/ir/irtest_util.h"

/* ---- tensors: dims and data --------------------------------------------------------- */

/* Like model_with_initializer (bad_input_util.h), with the tensor as a Constant node's
 * `value`. */
static void model_with_constant(PbBuf *out, PbBuf *tensor) {
    PbBuf g = {0}, attrs = {0};
    onnx_attr_tensor(&attrs, "value", tensor);
    const char *o[1] = {"T"}, *in[1] = {"T"}, *o2[1] = {"Y"};
    onnx_node(&g, "Constant", "const", 0, NULL, 1, o, &attrs);
    onnx_node(&g, "Relu", "relu", 1, in, 1, o2, NULL);
    pb_str(&g, G_NAME, "g");
    onnx_vi(&g, G_OUTPUT, "Y", 1, -1, NULL);
    onnx_model(out, &g, 13);
}

/* Same, with the initializer inside an If's then_branch. */
static void model_with_sub_initializer(PbBuf *out, PbBuf *tensor) {
    PbBuf g = {0}, then_g = {0}, else_g = {0}, attrs = {0};
    const char *ti[1] = {"T"}, *to[1] = {"A"}, *ei[1] = {"C"}, *eo[1] = {"B"};
    onnx_node(&then_g, "Relu", "relu_t", 1, ti, 1, to, NULL);
    pb_msg(&then_g, G_INIT, tensor);
    onnx_vi(&then_g, G_OUTPUT, "A", 1, -1, NULL);
    onnx_node(&else_g, "Identity", "id_e", 1, ei, 1, eo, NULL);
    onnx_vi(&else_g, G_OUTPUT, "B", 1, -1, NULL);
    onnx_attr_graph(&attrs, "then_branch", &then_g);
    onnx_attr_graph(&attrs, "else_branch", &else_g);
    const char *in[1] = {"C"}, *o[1] = {"Y"};
    onnx_node(&g, "If", "if", 1, in, 1, o, &attrs);
    pb_str(&g, G_NAME, "g");
    onnx_vi(&g, G_INPUT, "C", 9, 0, NULL);
    onnx_vi(&g, G_OUTPUT, "Y", 1, -1, NULL);
    onnx_model(out, &g, 13);
}

typedef void (*TensorPlacer)(PbBuf *out, PbBuf *tensor);
static const TensorPlacer placers[3] = {model_with_initializer, model_with_constant,
                                        model_with_sub_initializer};
static const char *const placer_names[3] = {"initializer", "Constant value", "subgraph initializer"};


static void expect_tensor_rejected(int ndims, const int64_t *dims, long raw_len, const char *what,
                                   const char *needle) {
    for (int p = 0; p < 3; p++) {
        PbBuf t = {0}, m = {0};
        float_tensor(&t, ndims, dims, raw_len);
        placers[p](&m, &t);
        char label[200];
        snprintf(label, sizeof label, "%s (%s)", what, placer_names[p]);
        EXPECT_REJECTED(&m, label, needle);
        pb_free(&m);
    }
}

Test(bad_graph, tensor_placements_are_valid_when_sound) {
    /* The three wrappers themselves load when the tensor is fine. */
    const int64_t dims[2] = {2, 3};
    for (int p = 0; p < 3; p++) {
        PbBuf t = {0}, m = {0};
        float_tensor(&t, 2, dims, 24);
        placers[p](&m, &t);
        AmpStatus st = {0};
        cr_assert_eq(try_load(m.data, m.len, NULL, &st), AMP_OK, "%s: %s", placer_names[p], st.msg);
        pb_free(&m);
    }
}

Test(bad_graph, dims_product_overflows_int64) {
    const int64_t d1[2] = {INT64_C(1) << 40, INT64_C(1) << 40};
    expect_tensor_rejected(2, d1, 4, "dims 2^40 x 2^40", "T");
    const int64_t d2[2] = {INT64_MAX, 2};
    expect_tensor_rejected(2, d2, 4, "dims INT64_MAX x 2", "T");
    const int64_t d3[3] = {3037000500, 3037000500, 1}; /* just over sqrt(2^63) */
    expect_tensor_rejected(3, d3, 4, "dims 3037000500^2", "T");
}

Test(bad_graph, dims_product_overflows_size_in_bytes) {
    /* Fits int64 as an element count, not as a byte count. */
    const int64_t d1[1] = {INT64_C(1) << 62};
    expect_tensor_rejected(1, d1, 4, "dims 2^62 floats", "T");
    const int64_t d2[2] = {INT64_C(1) << 31, INT64_C(1) << 31};
    expect_tensor_rejected(2, d2, 16, "dims 2^31 x 2^31 floats", "T");
}

Test(bad_graph, zero_dim_with_huge_dims_does_not_crash) {
    const int64_t dims[3] = {0, INT64_MAX, INT64_MAX};
    PbBuf t = {0}, m = {0};
    float_tensor(&t, 3, dims, 0);
    model_with_initializer(&m, &t);
    AmpStatus st = {0};
    AmpCode rc = try_load(m.data, m.len, NULL, &st);
    cr_assert(rc == AMP_OK || rc == AMP_ERR_INPUT, "%s: %s", amp_code_name(rc), st.msg);
    pb_free(&m);
}

Test(bad_graph, negative_dims) {
    const int64_t d1[2] = {-1, 3};
    expect_tensor_rejected(2, d1, 12, "dims -1 x 3", "T");
    /* Two negatives multiply to the right element count: still wrong. */
    const int64_t d2[2] = {-2, -3};
    expect_tensor_rejected(2, d2, 24, "dims -2 x -3", "T");
    const int64_t d3[1] = {INT64_MIN};
    expect_tensor_rejected(1, d3, 4, "dims INT64_MIN", "T");
}

Test(bad_graph, raw_data_shorter_than_dims_need) {
    const int64_t dims[2] = {4, 3};
    expect_tensor_rejected(2, dims, 44, "raw_data 44 of 48 bytes", "T");
    expect_tensor_rejected(2, dims, 0, "raw_data 0 of 48 bytes", "T");
    expect_tensor_rejected(2, dims, -1, "no data for 12 elements", "T");
}

Test(bad_graph, typed_data_count_wrong) {
    const int64_t dims[1] = {4};
    /* 3 float_data entries for 4 elements */
    {
        PbBuf t = {0}, packed = {0}, m = {0};
        onnx_tensor_head(&t, "T", 1, 1, dims);
        float v[3] = {1, 2, 3};
        pb_raw(&packed, v, sizeof v);
        pb_msg(&t, T_FLOAT, &packed);
        model_with_initializer(&m, &t);
        EXPECT_REJECTED(&m, "3 float_data for 4 elements", "T");
        pb_free(&m);
    }
    /* an INT64 tensor whose data sits in float_data */
    {
        PbBuf t = {0}, packed = {0}, m = {0};
        onnx_tensor_head(&t, "T", 7, 1, dims);
        float v[4] = {1, 2, 3, 4};
        pb_raw(&packed, v, sizeof v);
        pb_msg(&t, T_FLOAT, &packed);
        model_with_initializer(&m, &t);
        EXPECT_REJECTED(&m, "int64 tensor with float_data", "T");
        pb_free(&m);
    }
    /* a float tensor with its 4 floats, and int32_data beside them */
    {
        PbBuf t = {0}, packed = {0}, m = {0};
        onnx_tensor_head(&t, "T", 1, 1, dims);
        float v[4] = {1, 2, 3, 4};
        pb_raw(&packed, v, sizeof v);
        pb_msg(&t, T_FLOAT, &packed);
        pb_int(&t, T_INT32, 7);
        model_with_initializer(&m, &t);
        EXPECT_REJECTED(&m, "float tensor with int32_data beside its float_data", "wrong field");
        pb_free(&m);
    }
    /* found by fuzz_convert: a float tensor of no element with int32_data loaded, and once
     * the amp pass stored it in 16 bits, the output held raw_data and int32_data and did not
     * load again */
    {
        PbBuf t = {0}, m = {0};
        const int64_t none[2] = {4, 0};
        onnx_tensor_head(&t, "T", 1, 2, none);
        pb_int(&t, T_INT32, 10);
        pb_int(&t, T_INT32, 8);
        model_with_initializer(&m, &t);
        EXPECT_REJECTED(&m, "empty float tensor with int32_data", "wrong field");
        pb_free(&m);
    }
    /* a string tensor with too few strings */
    {
        PbBuf t = {0}, m = {0};
        onnx_tensor_head(&t, "T", 8, 1, dims);
        pb_str(&t, T_STRING, "only one");
        model_with_initializer(&m, &t);
        EXPECT_REJECTED(&m, "1 string for 4 elements", "T");
        pb_free(&m);
    }
    /* raw_data and float_data both present */
    {
        PbBuf t = {0}, packed = {0}, m = {0};
        onnx_tensor_head(&t, "T", 1, 1, dims);
        float v[4] = {1, 2, 3, 4};
        pb_raw(&packed, v, sizeof v);
        pb_msg(&t, T_FLOAT, &packed);
        pb_bytes(&t, T_RAW, v, sizeof v);
        model_with_initializer(&m, &t);
        EXPECT_REJECTED(&m, "raw_data and float_data both", "T");
        pb_free(&m);
    }
}

Test(bad_graph, unknown_dtype_does_not_crash) {
    const int64_t dims[1] = {4};
    static const int dtypes[] = {-1, 24, 99, 1000000, INT32_MAX};
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++) {
        PbBuf t = {0}, m = {0};
        onnx_tensor_head(&t, "T", dtypes[i], 1, dims);
        pb_bytes(&t, T_RAW, "0123456789abcdef", 16);
        model_with_initializer(&m, &t);
        AmpStatus st = {0};
        AmpCode rc = try_load(m.data, m.len, NULL, &st);
        cr_assert(rc != AMP_ERR_INTERNAL, "dtype %d: %s", dtypes[i], st.msg);
        pb_free(&m);
    }
}

/* ---- graph structure ---------------------------------------------------------------- */

Test(bad_graph, cycle_of_two_nodes) {
    PbBuf g = {0}, m = {0};
    const char *a_in[1] = {"cyc_b"}, *a_out[1] = {"cyc_a"}, *b_in[1] = {"cyc_a"}, *b_out[1] = {"cyc_b"};
    onnx_node(&g, "Relu", "node_a", 1, a_in, 1, a_out, NULL);
    onnx_node(&g, "Relu", "node_b", 1, b_in, 1, b_out, NULL);
    onnx_vi(&g, G_OUTPUT, "cyc_b", 1, -1, NULL);
    onnx_model(&m, &g, 13);
    EXPECT_REJECTED(&m, "cycle node_a <-> node_b", "node_a", "node_b", "cyc_a", "cyc_b");
    pb_free(&m);
}

Test(bad_graph, node_reads_its_own_output) {
    PbBuf g = {0}, m = {0};
    const char *io[1] = {"self_loop"};
    onnx_node(&g, "Relu", "selfish", 1, io, 1, io, NULL);
    onnx_vi(&g, G_OUTPUT, "self_loop", 1, -1, NULL);
    onnx_model(&m, &g, 13);
    EXPECT_REJECTED(&m, "self loop", "selfish", "self_loop");
    pb_free(&m);
}

Test(bad_graph, cycle_through_subgraph) {
    /* node_b's then_branch reads cyc_a, which node_a computes from node_b's output. */
    PbBuf g = {0}, m = {0}, then_g = {0}, else_g = {0}, attrs = {0};
    const char *ti[1] = {"cyc_a"}, *to[1] = {"t_out"}, *eo[1] = {"e_out"};
    onnx_node(&then_g, "Identity", "t", 1, ti, 1, to, NULL);
    onnx_vi(&then_g, G_OUTPUT, "t_out", 1, -1, NULL);
    onnx_node(&else_g, "Identity", "e", 1, ti, 1, eo, NULL);
    onnx_vi(&else_g, G_OUTPUT, "e_out", 1, -1, NULL);
    onnx_attr_graph(&attrs, "then_branch", &then_g);
    onnx_attr_graph(&attrs, "else_branch", &else_g);
    const char *b_in[1] = {"C"}, *b_out[1] = {"cyc_b"}, *a_in[1] = {"cyc_b"}, *a_out[1] = {"cyc_a"};
    onnx_node(&g, "If", "node_b", 1, b_in, 1, b_out, &attrs);
    onnx_node(&g, "Relu", "node_a", 1, a_in, 1, a_out, NULL);
    onnx_vi(&g, G_INPUT, "C", 9, 0, NULL);
    onnx_vi(&g, G_OUTPUT, "cyc_a", 1, -1, NULL);
    onnx_model(&m, &g, 13);
    EXPECT_REJECTED(&m, "cycle through a subgraph", "node_a", "node_b", "cyc_a", "cyc_b");
    pb_free(&m);
}

Test(bad_graph, nodes_out_of_order_are_not_a_crash) {
    /* Acyclic but listed consumer first: ONNX requires topological order; the loader may
     * sort or refuse, but must not crash, and a sorted result must verify. */
    PbBuf g = {0}, m = {0};
    const char *c_in[1] = {"t1"}, *c_out[1] = {"t2"}, *d_in[1] = {"X"}, *d_out[1] = {"t1"};
    onnx_node(&g, "Relu", "consumer", 1, c_in, 1, c_out, NULL);
    onnx_node(&g, "Relu", "producer", 1, d_in, 1, d_out, NULL);
    onnx_vi(&g, G_INPUT, "X", 1, -1, NULL);
    onnx_vi(&g, G_OUTPUT, "t2", 1, -1, NULL);
    onnx_model(&m, &g, 13);
    AmpStatus st = {0};
    AmpCode rc = try_load(m.data, m.len, NULL, &st);
    cr_assert(rc == AMP_OK || rc == AMP_ERR_INPUT, "%s: %s", amp_code_name(rc), st.msg);
    pb_free(&m);
}

Test(bad_graph, two_producers_of_one_name) {
    PbBuf g = {0}, m = {0};
    const char *in[1] = {"X"}, *out[1] = {"dup_y"};
    onnx_node(&g, "Relu", "first", 1, in, 1, out, NULL);
    onnx_node(&g, "Neg", "second", 1, in, 1, out, NULL);
    onnx_vi(&g, G_INPUT, "X", 1, -1, NULL);
    onnx_vi(&g, G_OUTPUT, "dup_y", 1, -1, NULL);
    onnx_model(&m, &g, 13);
    EXPECT_REJECTED(&m, "two nodes output dup_y", "dup_y");
    pb_free(&m);
}

Test(bad_graph, node_output_shadows_initializer_or_input) {
    {
        PbBuf g = {0}, m = {0}, t = {0};
        const int64_t d[1] = {1};
        onnx_tensor_head(&t, "dup_w", 1, 1, d);
        pb_bytes(&t, T_RAW, "\0\0\0\0", 4);
        const char *in[1] = {"X"}, *out[1] = {"dup_w"};
        onnx_node(&g, "Relu", "r", 1, in, 1, out, NULL);
        pb_msg(&g, G_INIT, &t);
        onnx_vi(&g, G_INPUT, "X", 1, -1, NULL);
        onnx_vi(&g, G_OUTPUT, "dup_w", 1, -1, NULL);
        onnx_model(&m, &g, 13);
        EXPECT_REJECTED(&m, "node output named like an initializer", "dup_w");
        pb_free(&m);
    }
    {
        PbBuf g = {0}, m = {0};
        const char *in[1] = {"dup_x"}, *out[1] = {"dup_x"};
        onnx_node(&g, "Relu", "r", 1, in, 1, out, NULL);
        onnx_vi(&g, G_INPUT, "dup_x", 1, -1, NULL);
        onnx_vi(&g, G_OUTPUT, "dup_x", 1, -1, NULL);
        onnx_model(&m, &g, 13);
        EXPECT_REJECTED(&m, "node output named like a graph input", "dup_x");
        pb_free(&m);
    }
    {
        PbBuf g = {0}, m = {0};
        const int64_t d[1] = {1};
        PbBuf t1 = {0}, t2 = {0};
        onnx_tensor_head(&t1, "dup_i", 1, 1, d);
        pb_bytes(&t1, T_RAW, "\0\0\0\0", 4);
        onnx_tensor_head(&t2, "dup_i", 1, 1, d);
        pb_bytes(&t2, T_RAW, "\0\0\0\0", 4);
        const char *in[1] = {"dup_i"}, *out[1] = {"Y"};
        onnx_node(&g, "Relu", "r", 1, in, 1, out, NULL);
        pb_msg(&g, G_INIT, &t1);
        pb_msg(&g, G_INIT, &t2);
        onnx_vi(&g, G_OUTPUT, "Y", 1, -1, NULL);
        onnx_model(&m, &g, 13);
        EXPECT_REJECTED(&m, "two initializers of one name", "dup_i");
        pb_free(&m);
    }
}

Test(bad_graph, input_with_initializer_default_is_valid) {
    /* ONNX allows a graph input that also has an initializer (its default value). */
    PbBuf g = {0}, m = {0}, t = {0};
    const int64_t d[1] = {2};
    onnx_tensor_head(&t, "W", 1, 1, d);
    pb_bytes(&t, T_RAW, "\0\0\0\0\0\0\0\0", 8);
    const char *in[1] = {"W"}, *out[1] = {"Y"};
    onnx_node(&g, "Relu", "r", 1, in, 1, out, NULL);
    pb_msg(&g, G_INIT, &t);
    onnx_vi(&g, G_INPUT, "W", 1, 1, d);
    onnx_vi(&g, G_OUTPUT, "Y", 1, 1, d);
    onnx_model(&m, &g, 13);
    AmpStatus st = {0};
    cr_assert_eq(try_load(m.data, m.len, NULL, &st), AMP_OK, "%s", st.msg);
    pb_free(&m);
}

Test(bad_graph, undefined_input) {
    PbBuf g = {0}, m = {0};
    const char *in[1] = {"nowhere_defined"}, *out[1] = {"Y"};
    onnx_node(&g, "Relu", "r", 1, in, 1, out, NULL);
    onnx_vi(&g, G_OUTPUT, "Y", 1, -1, NULL);
    onnx_model(&m, &g, 13);
    EXPECT_REJECTED(&m, "undefined node input", "nowhere_defined");
    pb_free(&m);
}

Test(bad_graph, undefined_input_in_subgraph) {
    PbBuf g = {0}, m = {0}, then_g = {0}, else_g = {0}, attrs = {0};
    const char *ti[1] = {"ghost_value"}, *to[1] = {"t_out"}, *ei[1] = {"C"}, *eo[1] = {"e_out"};
    onnx_node(&then_g, "Identity", "t", 1, ti, 1, to, NULL);
    onnx_vi(&then_g, G_OUTPUT, "t_out", 1, -1, NULL);
    onnx_node(&else_g, "Identity", "e", 1, ei, 1, eo, NULL);
    onnx_vi(&else_g, G_OUTPUT, "e_out", 1, -1, NULL);
    onnx_attr_graph(&attrs, "then_branch", &then_g);
    onnx_attr_graph(&attrs, "else_branch", &else_g);
    const char *in[1] = {"C"}, *out[1] = {"Y"};
    onnx_node(&g, "If", "if", 1, in, 1, out, &attrs);
    onnx_vi(&g, G_INPUT, "C", 9, 0, NULL);
    onnx_vi(&g, G_OUTPUT, "Y", 1, -1, NULL);
    onnx_model(&m, &g, 13);
    EXPECT_REJECTED(&m, "undefined input inside a subgraph", "ghost_value");
    pb_free(&m);
}

Test(bad_graph, graph_output_never_produced) {
    PbBuf g = {0}, m = {0};
    const char *in[1] = {"X"}, *out[1] = {"Y"};
    onnx_node(&g, "Relu", "r", 1, in, 1, out, NULL);
    onnx_vi(&g, G_INPUT, "X", 1, -1, NULL);
    onnx_vi(&g, G_OUTPUT, "never_made", 1, -1, NULL);
    onnx_model(&m, &g, 13);
    EXPECT_REJECTED(&m, "graph output nobody produces", "never_made");
    pb_free(&m);
}

/* ---- attributes, opsets, the model's top level -------------------------------------- */

Test(bad_graph, attribute_of_wrong_type) {
    /* Gemm alpha must be a FLOAT */
    PbBuf g = {0}, m = {0}, attrs = {0};
    onnx_attr_int(&attrs, "alpha", 2);
    const char *in[3] = {"A", "B", "C"}, *out[1] = {"Y"};
    onnx_node(&g, "Gemm", "gemm_bad_alpha", 3, in, 1, out, &attrs);
    const int64_t d[2] = {2, 2};
    onnx_vi(&g, G_INPUT, "A", 1, 2, d);
    onnx_vi(&g, G_INPUT, "B", 1, 2, d);
    onnx_vi(&g, G_INPUT, "C", 1, 2, d);
    onnx_vi(&g, G_OUTPUT, "Y", 1, 2, d);
    onnx_model(&m, &g, 13);
    EXPECT_REJECTED(&m, "Gemm alpha as INT", "alpha");
    pb_free(&m);
}

Test(bad_graph, attribute_type_disagrees_with_its_field) {
    /* type says INTS, but only `f` is set: must not be read as a list */
    PbBuf g = {0}, m = {0}, attrs = {0}, a = {0};
    pb_str(&a, A_NAME, "perm");
    pb_f32(&a, A_F, 1.0f);
    pb_int(&a, A_TYPE, 7);
    pb_msg(&attrs, N_ATTR, &a);
    const char *in[1] = {"X"}, *out[1] = {"Y"};
    onnx_node(&g, "Transpose", "tr", 1, in, 1, out, &attrs);
    onnx_vi(&g, G_INPUT, "X", 1, -1, NULL);
    onnx_vi(&g, G_OUTPUT, "Y", 1, -1, NULL);
    onnx_model(&m, &g, 13);
    AmpStatus st = {0};
    AmpCode rc = try_load(m.data, m.len, NULL, &st);
    cr_assert(rc == AMP_OK || rc == AMP_ERR_INPUT, "%s: %s", amp_code_name(rc), st.msg);
    pb_free(&m);
}

Test(bad_graph, opset_newer_than_known) {
    PbBuf g = {0}, m = {0};
    const char *in[1] = {"X"}, *out[1] = {"Y"};
    onnx_node(&g, "Relu", "r", 1, in, 1, out, NULL);
    onnx_vi(&g, G_INPUT, "X", 1, -1, NULL);
    onnx_vi(&g, G_OUTPUT, "Y", 1, -1, NULL);
    onnx_model(&m, &g, 9999);
    const char *const needles[] = {"9999", NULL};
    /* Bad input (exit 1), as the issue lists it; the message says what ampc knows. */
    expect_rejected_alt(&m, NULL, AMP_OK, "ai.onnx opset 9999", needles);
    pb_free(&m);
}

Test(bad_graph, opset_negative_or_missing) {
    PbBuf g = {0}, m = {0};
    const char *in[1] = {"X"}, *out[1] = {"Y"};
    onnx_node(&g, "Relu", "r", 1, in, 1, out, NULL);
    onnx_vi(&g, G_INPUT, "X", 1, -1, NULL);
    onnx_vi(&g, G_OUTPUT, "Y", 1, -1, NULL);
    onnx_model(&m, &g, -5);
    AmpStatus st = {0};
    AmpCode rc = try_load(m.data, m.len, NULL, &st);
    cr_assert(rc == AMP_OK || rc == AMP_ERR_INPUT || rc == AMP_ERR_UNSUPPORTED, "%s: %s",
              amp_code_name(rc), st.msg);
    pb_free(&m);
}

Test(bad_graph, no_opset_import) {
    /* ONNX: a model with ir_version >= 3 must import the ai.onnx opset (onnx.checker
     * refuses it otherwise), so ampc must not accept it and write an invalid model. */
    PbBuf g = {0}, m = {0};
    const char *in[1] = {"X"}, *out[1] = {"Y"};
    onnx_node(&g, "Relu", "r", 1, in, 1, out, NULL);
    onnx_vi(&g, G_INPUT, "X", 1, -1, NULL);
    onnx_vi(&g, G_OUTPUT, "Y", 1, -1, NULL);
    pb_int(&m, M_IR_VERSION, 8);
    pb_msg(&m, M_GRAPH, &g);
    EXPECT_REJECTED(&m, "model without opset_import", "opset");
    pb_free(&m);
}

Test(bad_graph, no_graph) {
    PbBuf m = {0};
    pb_int(&m, M_IR_VERSION, 8);
    onnx_opset(&m, "", 13);
    EXPECT_REJECTED(&m, "model without a graph", "graph");
    pb_free(&m);
}

