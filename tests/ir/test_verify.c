/* The verifier (ir/verify.c): a valid model passes, and each check has a failing case
 * whose message names what is wrong. Also the text printer (ir/print.c), whose output is
 * compared exactly. Graphs are built with the builder API. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/ir/graph_build_util.h"
#include "ir/ir.h"

/* ---- building graphs tersely ----------------------------------------------------- */

static void set_type(AmpModel *m, AmpValue *v, int dtype, int rank, const int64_t *dims) {
    v->type.kind = AMP_TYPE_TENSOR;
    v->type.dtype = dtype;
    v->type.rank = rank;
    v->type.dims = rank > 0 ? amp_arena_calloc(&m->arena, (size_t)rank, sizeof(AmpDim)) : NULL;
    for (int i = 0; i < rank; i++) v->type.dims[i].value = dims[i];
}

static AmpValue *input(AmpModel *m, AmpGraph *g, const char *name) {
    AmpValue *v = amp_graph_value(g, name);
    static const int64_t d[] = {2};
    set_type(m, v, AMP_DT_FLOAT, 1, d);
    cr_assert(amp_graph_add_input(g, v));
    return v;
}

static AmpValue *init_f32(AmpModel *m, AmpGraph *g, const char *name, float x0, float x1) {
    AmpTensor *t = amp_arena_alloc(&m->arena, sizeof *t);
    t->dtype = AMP_DT_FLOAT;
    t->has = AMP_TENSOR_HAS_DTYPE;
    t->ndims = 1;
    t->dims = amp_arena_calloc(&m->arena, 1, sizeof *t->dims);
    t->dims[0] = 2;
    t->nelem = 2;
    t->float_data = amp_arena_calloc(&m->arena, 2, sizeof(float));
    t->float_data[0] = x0;
    t->float_data[1] = x1;
    t->n_float = 2;
    AmpValue *v = amp_graph_value(g, name);
    cr_assert_eq(amp_graph_add_initializer(g, v, t), AMP_OK);
    return v;
}

static void output(AmpGraph *g, const char *name) {
    cr_assert(amp_graph_add_output(g, val(g, name)));
}

/* A subgraph for attribute `attr` of n (If branches, Loop bodies). */
static AmpGraph *subgraph(AmpNode *n, const char *attr, const char *name) {
    AmpModel *m = n->graph->model;
    AmpGraph *sg = amp_graph_new(m, n->graph);
    cr_assert(sg);
    sg->owner = n;
    sg->name = name;
    AmpAttr *a = amp_node_add_attr(n, attr, AMP_ATTR_GRAPH);
    a->g = sg;
    return sg;
}

static AmpAttr *attr_f(AmpNode *n, const char *name, float f) {
    AmpAttr *a = amp_node_add_attr(n, name, AMP_ATTR_FLOAT);
    a->f = f;
    return a;
}

static AmpAttr *attr_i(AmpNode *n, const char *name, int64_t i) {
    AmpAttr *a = amp_node_add_attr(n, name, AMP_ATTR_INT);
    a->i = i;
    return a;
}

/* x (input), w (initializer) -> Gemm -> Relu -> z (output). */
static AmpModel *valid_model(void) {
    AmpModel *m = amp_model_new();
    cr_assert(m);
    AmpGraph *g = m->graph;
    input(m, g, "x");
    init_f32(m, g, "w", 1, 2);
    AmpNode *gemm = node(g, "Gemm", "gemm0", "x,w", "y");
    attr_f(gemm, "alpha", 1.0f);
    attr_i(gemm, "transB", 1);
    node(g, "Relu", "relu0", "y", "z");
    output(g, "z");
    return m;
}

static AmpStatus st;

static void expect_fail(AmpModel *m, AmpCode code, const char *needle) {
    amp_status_clear(&st);
    AmpCode rc = amp_verify_model(m, &st);
    cr_assert_eq(rc, code, "expected %s, got %s: %s", amp_code_name(code), amp_code_name(rc),
                 st.msg);
    cr_assert(strstr(st.msg, needle), "message '%s' lacks '%s'", st.msg, needle);
    amp_model_free(m);
}

static void expect_ok(AmpModel *m) {
    amp_status_clear(&st);
    AmpCode rc = amp_verify_model(m, &st);
    cr_assert_eq(rc, AMP_OK, "verifier: %s", st.msg);
    amp_model_free(m);
}

/* ---- valid graphs ------------------------------------------------------------------ */

Test(verify, valid_graph_passes) {
    expect_ok(valid_model());
}

Test(verify, empty_model_passes) {
    expect_ok(amp_model_new());
}

Test(verify, if_body_may_use_outer_values) {
    AmpModel *m = valid_model();
    AmpGraph *g = m->graph;
    set_type(m, input(m, g, "c"), AMP_DT_BOOL, 0, NULL);
    AmpNode *n = node(g, "If", "if0", "c", "r");
    AmpGraph *then = subgraph(n, "then_branch", "then");
    node(then, "Relu", "t0", "y", "ty"); /* y comes from the main graph, before the If */
    output(then, "ty");
    AmpGraph *els = subgraph(n, "else_branch", "else");
    output(els, "x"); /* an outer value returned as it is */
    output(g, "r");
    expect_ok(m);
}

/* If, Loop and Scan as onnx.checker has them (issue "Hostile inputs, round 2", point 4):
 * the executor reads If's condition and Loop's M and cond as one element of their type. */
static AmpModel *if_model(int cond_dtype, int cond_rank, const int64_t *cond_dims, bool with_else, int else_outputs) {
    AmpModel *m = valid_model();
    AmpGraph *g = m->graph;
    set_type(m, input(m, g, "c"), cond_dtype, cond_rank, cond_dims);
    AmpNode *n = node(g, "If", "if0", "c", "r");
    AmpGraph *then = subgraph(n, "then_branch", "then");
    output(then, "x");
    if (with_else) {
        AmpGraph *els = subgraph(n, "else_branch", "else");
        for (int i = 0; i < else_outputs; i++) output(els, "x");
    }
    output(g, "r");
    return m;
}

Test(verify, if_condition_and_branches) {
    static const int64_t one[1] = {1}, two[1] = {2};
    expect_ok(if_model(AMP_DT_BOOL, 0, NULL, true, 1));
    expect_ok(if_model(AMP_DT_BOOL, 1, one, true, 1)); /* [1]: one element too */
    expect_fail(if_model(AMP_DT_FLOAT, 0, NULL, true, 1), AMP_ERR_INPUT, "the condition 'c' is float; If takes bool");
    expect_fail(if_model(AMP_DT_BOOL, 1, two, true, 1), AMP_ERR_INPUT, "holds 2 elements; If takes one");
    expect_fail(if_model(AMP_DT_BOOL, 0, NULL, false, 0), AMP_ERR_INPUT, "needs both then_branch and else_branch");
    expect_fail(if_model(AMP_DT_BOOL, 0, NULL, true, 2), AMP_ERR_INPUT, "branches give 1 and 2 outputs");
}

static AmpModel *loop_model(int m_dtype, int m_rank, const int64_t *m_dims, bool body) {
    AmpModel *m = valid_model();
    AmpGraph *g = m->graph;
    set_type(m, input(m, g, "M"), m_dtype, m_rank, m_dims);
    AmpNode *n = node(g, "Loop", "loop0", "M,,x", "r");
    if (body) {
        AmpGraph *b = subgraph(n, "body", "body");
        AmpValue *i = amp_graph_value(b, "i"), *cin = amp_graph_value(b, "cin"), *acc = amp_graph_value(b, "acc");
        set_type(m, i, AMP_DT_INT64, 0, NULL);
        set_type(m, cin, AMP_DT_BOOL, 0, NULL);
        cr_assert(amp_graph_add_input(b, i) && amp_graph_add_input(b, cin) && amp_graph_add_input(b, acc));
        output(b, "cin");
        output(b, "acc");
    }
    output(g, "r");
    return m;
}

Test(verify, loop_trip_count_and_body) {
    static const int64_t two[1] = {2};
    expect_ok(loop_model(AMP_DT_INT64, 0, NULL, true));
    expect_fail(loop_model(AMP_DT_FLOAT, 0, NULL, true), AMP_ERR_INPUT, "the trip count M 'M' is float; Loop takes int64");
    expect_fail(loop_model(AMP_DT_INT64, 1, two, true), AMP_ERR_INPUT, "holds 2 elements; Loop takes one");
    expect_fail(loop_model(AMP_DT_INT64, 0, NULL, false), AMP_ERR_INPUT, "Loop has no body");
}

Test(verify, unknown_ops_take_any_arity) {
    AmpModel *m = valid_model();
    node(m->graph, "NoSuchOp", "u0", "x,x,x,x,x", "u1,u2,u3");
    node_d(m->graph, "com.example", "Custom", "c1", "u1", ""); /* no outputs */
    cr_assert(amp_model_import_opset(m, "", 17) && amp_model_import_opset(m, "com.example", 1));
    expect_ok(m);
}

Test(verify, optional_inputs_may_be_left_out) {
    AmpModel *m = valid_model();
    node(m->graph, "Gemm", "gemm1", "x,w,", "g1"); /* C left out */
    expect_ok(m);
}

/* An input or output every opset of the op requires may not be left out (""), as
 * onnx.checker says; Loop's M and cond may. */
Test(verify, required_inputs_and_outputs_may_not_be_left_out) {
    AmpModel *m = valid_model();
    node(m->graph, "Gemm", "gemm_no_b", "x,,w", "g1");
    expect_fail(m, AMP_ERR_INPUT, "node 'gemm_no_b' (Gemm): input 1 is left out (\"\"), but Gemm requires it");
    m = valid_model();
    node(m->graph, "Add", "add_no_b", "x,", "a1");
    expect_fail(m, AMP_ERR_INPUT, "node 'add_no_b' (Add): input 1 is left out");
    m = valid_model();
    node(m->graph, "Dropout", "drop_no_y", "x", ",mask");
    expect_fail(m, AMP_ERR_INPUT, "output 0 is left out (\"\"), but Dropout requires it");
}

/* ---- one producer per name ------------------------------------------------------- */

Test(verify, two_producers) {
    AmpModel *m = valid_model();
    node(m->graph, "Relu", "again", "x", "y");
    expect_fail(m, AMP_ERR_INPUT, "also produced by node 'again'");
}

Test(verify, output_named_like_graph_input) {
    AmpModel *m = valid_model();
    node(m->graph, "Relu", "clobber", "z", "x");
    expect_fail(m, AMP_ERR_INPUT, "node 'clobber' (Relu): output 0 'x' has the name of a graph input");
}

Test(verify, output_named_like_initializer) {
    AmpModel *m = valid_model();
    node(m->graph, "Relu", "clobber", "z", "w");
    expect_fail(m, AMP_ERR_INPUT, "output 0 'w' has the name of an initializer");
}

Test(verify, subgraph_output_redefines_outer_name) {
    AmpModel *m = valid_model();
    input(m, m->graph, "c");
    AmpNode *n = node(m->graph, "If", "if0", "c", "r");
    AmpGraph *then = subgraph(n, "then_branch", "then");
    /* A node output in the body named like the main graph's y. */
    AmpNode *b = amp_node_new(then, "", "Relu", "shadow", 1, 1);
    amp_node_set_input(b, 0, val(then, "x"));
    amp_node_set_output(b, 0, amp_graph_value(then, "y"));
    amp_node_append(then, b);
    output(then, "y");
    AmpGraph *els = subgraph(n, "else_branch", "else");
    output(els, "x");
    expect_fail(m, AMP_ERR_INPUT, "graph 'then': node 'shadow' (Relu): output 0 'y' redefines");
}

/* ---- definitions and order ------------------------------------------------------- */

Test(verify, undefined_input_flagged_by_loader) {
    AmpModel *m = valid_model();
    AmpValue *ghost = amp_graph_value(m->graph, "ghost");
    ghost->flags |= AMP_VALUE_UNDEFINED;
    node(m->graph, "Add", "add_3", "z,ghost", "s");
    expect_fail(m, AMP_ERR_INPUT, "graph 'main': node 'add_3' (Add): input 1 'ghost' is undefined");
}

Test(verify, undefined_input_built_by_a_pass) {
    AmpModel *m = valid_model();
    node(m->graph, "Add", "add_3", "z,nowhere", "s");
    expect_fail(m, AMP_ERR_INPUT, "input 1 'nowhere' is undefined");
}

Test(verify, out_of_order_node) {
    AmpModel *m = valid_model();
    AmpGraph *g = m->graph;
    AmpNode *late = node(g, "Relu", "late", "x", "q");
    AmpNode *early = amp_node_new(g, "", "Add", "add_3", 2, 1);
    amp_node_set_input(early, 0, val(g, "x"));
    amp_node_set_input(early, 1, val(g, "q"));
    amp_node_set_output(early, 0, amp_graph_value(g, "s"));
    amp_node_insert_before(g->first, early);
    (void)late;
    expect_fail(m, AMP_ERR_INPUT,
                "graph 'main': node 'add_3' (Add): input 1 'q' is used before it is defined: its "
                "producer node 'late' (Relu) comes later");
}

Test(verify, cycle) {
    AmpModel *m = valid_model();
    AmpGraph *g = m->graph;
    node(g, "Add", "a", "x,b_out", "a_out");
    node(g, "Relu", "b", "a_out", "b_out");
    expect_fail(m, AMP_ERR_INPUT, "cycle");
}

Test(verify, self_loop) {
    AmpModel *m = valid_model();
    node(m->graph, "Add", "self", "x,me", "me");
    expect_fail(m, AMP_ERR_INPUT, "node 'self' (Add): input 1 'me' is used before it is defined");
}

Test(verify, graph_output_undefined) {
    AmpModel *m = valid_model();
    output(m->graph, "missing");
    expect_fail(m, AMP_ERR_INPUT, "graph 'main': graph output 'missing' is undefined");
}

Test(verify, undefined_name_in_if_body) {
    AmpModel *m = valid_model();
    input(m, m->graph, "c");
    AmpNode *n = node(m->graph, "If", "if0", "c", "r");
    AmpGraph *then = subgraph(n, "then_branch", "then");
    node(then, "Relu", "t0", "nope", "ty");
    output(then, "ty");
    AmpGraph *els = subgraph(n, "else_branch", "else");
    output(els, "x");
    expect_fail(m, AMP_ERR_INPUT, "graph 'then': node 't0' (Relu): input 0 'nope' is undefined");
}

Test(verify, if_body_uses_outer_value_defined_after_the_if) {
    AmpModel *m = valid_model();
    AmpGraph *g = m->graph;
    input(m, g, "c");
    AmpNode *n = node(g, "If", "if0", "c", "r");
    node(g, "Relu", "after", "x", "later"); /* defined after the If */
    AmpGraph *then = subgraph(n, "then_branch", "then");
    node(then, "Relu", "t0", "later", "ty");
    output(then, "ty");
    AmpGraph *els = subgraph(n, "else_branch", "else");
    output(els, "x");
    expect_fail(m, AMP_ERR_INPUT, "input 0 'later' of an enclosing graph is used before it is defined");
}

Test(verify, unnamed_subgraph_is_labelled_by_its_owner) {
    AmpModel *m = valid_model();
    input(m, m->graph, "c");
    AmpNode *n = node(m->graph, "If", "if0", "c", "r");
    AmpGraph *then = subgraph(n, "then_branch", NULL);
    node(then, "Relu", "t0", "nope", "ty");
    output(then, "ty");
    expect_fail(m, AMP_ERR_INPUT, "graph 'if0.then_branch'");
}

/* ---- arity and attributes -------------------------------------------------------- */

Test(verify, wrong_arity_for_known_op) {
    AmpModel *m = valid_model();
    node(m->graph, "Relu", "r2", "x,z", "q");
    expect_fail(m, AMP_ERR_INPUT, "node 'r2' (Relu): has 2 inputs, Relu takes exactly 1");
}

Test(verify, too_many_outputs_for_known_op) {
    AmpModel *m = valid_model();
    node(m->graph, "Relu", "r2", "x", "q1,q2");
    expect_fail(m, AMP_ERR_INPUT, "has 2 outputs, Relu gives exactly 1");
}

Test(verify, gemm_alpha_as_int) {
    AmpModel *m = valid_model();
    AmpNode *n = node(m->graph, "Gemm", "g2", "x,w", "q");
    attr_i(n, "alpha", 1);
    expect_fail(m, AMP_ERR_INPUT, "node 'g2' (Gemm): attribute 'alpha' has type INT, but Gemm expects FLOAT");
}

Test(verify, duplicate_attribute) {
    AmpModel *m = valid_model();
    AmpNode *n = node(m->graph, "Gemm", "g2", "x,w", "q");
    attr_f(n, "alpha", 1);
    attr_f(n, "beta", 1);
    attr_f(n, "alpha", 2);
    expect_fail(m, AMP_ERR_INPUT, "duplicate attribute 'alpha'");
}

Test(verify, duplicate_attribute_among_many) {
    AmpModel *m = valid_model();
    AmpNode *n = node_d(m->graph, "com.example", "Wide", "w0", "x", "q");
    cr_assert(amp_model_import_opset(m, "", 17) && amp_model_import_opset(m, "com.example", 1));
    char name[16];
    for (int i = 0; i < 40; i++) {
        snprintf(name, sizeof name, "a%d", i);
        attr_i(n, name, i);
    }
    attr_i(n, "a17", 0);
    expect_fail(m, AMP_ERR_INPUT, "duplicate attribute 'a17'");
}

Test(verify, attribute_type_out_of_range) {
    AmpModel *m = valid_model();
    AmpNode *n = node_d(m->graph, "com.example", "Odd", "o0", "x", "q");
    cr_assert(amp_model_import_opset(m, "", 17) && amp_model_import_opset(m, "com.example", 1));
    amp_node_add_attr(n, "weird", 42);
    expect_fail(m, AMP_ERR_INPUT, "attribute 'weird' has invalid type 42");
}

Test(verify, attribute_payload_missing) {
    AmpModel *m = valid_model();
    input(m, m->graph, "c");
    AmpNode *n = node(m->graph, "If", "if0", "c", "r");
    amp_node_add_attr(n, "then_branch", AMP_ATTR_GRAPH); /* no graph attached */
    expect_fail(m, AMP_ERR_INPUT, "attribute 'then_branch' has type GRAPH but no GRAPH value");
}

Test(verify, attribute_with_two_payloads) {
    AmpModel *m = valid_model();
    AmpNode *n = node(m->graph, "Gemm", "g2", "x,w", "q");
    AmpAttr *a = attr_f(n, "alpha", 1);
    a->has |= AMP_ATTR_HAS_I;
    expect_fail(m, AMP_ERR_INPUT, "attribute 'alpha' has type FLOAT but also a 'i' value");
}

/* ---- dtypes ---------------------------------------------------------------------- */

Test(verify, cast_to_valid_type_passes) {
    AmpModel *m = valid_model();
    AmpNode *n = node(m->graph, "Cast", "c0", "z", "h");
    attr_i(n, "to", AMP_DT_FLOAT16);
    set_type(m, val(m->graph, "h"), AMP_DT_FLOAT16, -1, NULL);
    AmpNode *old = node(m->graph, "Cast", "c1", "z", "h1"); /* Cast-1 spelling */
    AmpAttr *a = amp_node_add_attr(old, "to", AMP_ATTR_STRING);
    a->s.data = (const uint8_t *)"FLOAT16";
    a->s.len = 7;
    expect_ok(m);
}

Test(verify, cast_to_invalid_type) {
    AmpModel *m = valid_model();
    AmpNode *n = node(m->graph, "Cast", "c0", "z", "h");
    attr_i(n, "to", 99);
    expect_fail(m, AMP_ERR_INPUT, "node 'c0' (Cast): Cast 'to' = 99 is not a valid data type");
}

/* The verifier's code and message for m, which stays alive. */
static AmpCode verify_keep(AmpModel *m) {
    amp_status_clear(&st);
    return amp_verify_model(m, &st);
}

Test(verify, op_id_must_match_op_type) {
    /* op_type edited without amp_graph_bind_ops: the verifier says so, and binding mends it. */
    AmpModel *m = valid_model();
    AmpNode *n = node(m->graph, "Relu", "r0", "z", "h");
    n->op_type = "Neg";
    cr_assert_eq(verify_keep(m), AMP_ERR_INTERNAL, "%s", st.msg);
    cr_assert(strstr(st.msg, "amp_graph_bind_ops was not called"), "%s", st.msg);
    amp_graph_bind_ops(m->graph);
    cr_assert_eq(verify_keep(m), AMP_OK, "%s", st.msg);
    /* An op the table knows, bound as unknown. */
    n->op = AMP_OP_UNKNOWN;
    cr_assert_eq(verify_keep(m), AMP_ERR_INTERNAL, "%s", st.msg);
    cr_assert(strstr(st.msg, "its op id (unknown) does not match its op_type"), "%s", st.msg);
    /* A Cast edited in is checked as a Cast once bound. */
    n->op_type = "Cast";
    amp_graph_bind_ops(m->graph);
    expect_fail(m, AMP_ERR_INPUT, "Cast has no 'to' attribute");
}

Test(verify, cast_without_to) {
    AmpModel *m = valid_model();
    node(m->graph, "Cast", "c0", "z", "h");
    expect_fail(m, AMP_ERR_INPUT, "Cast has no 'to' attribute");
}

Test(verify, cast_output_declared_other_type) {
    AmpModel *m = valid_model();
    AmpNode *n = node(m->graph, "Cast", "c0", "z", "h");
    attr_i(n, "to", AMP_DT_FLOAT16);
    set_type(m, val(m->graph, "h"), AMP_DT_INT64, -1, NULL);
    expect_fail(m, AMP_ERR_INPUT, "output 0 'h' is declared int64 but Cast converts to float16");
}

Test(verify, initializer_dtype_mismatch) {
    AmpModel *m = valid_model();
    set_type(m, val(m->graph, "w"), AMP_DT_FLOAT16, -1, NULL);
    expect_fail(m, AMP_ERR_INPUT, "initializer 'w' holds float data but the value is declared float16");
}

Test(verify, integer_add_is_fine) {
    AmpModel *m = valid_model();
    AmpValue *i = amp_graph_value(m->graph, "i");
    set_type(m, i, AMP_DT_INT64, 0, NULL);
    amp_graph_add_input(m->graph, i);
    node(m->graph, "Add", "iadd", "i,i", "j");
    node(m->graph, "MatMul", "imm", "i,i", "k");
    expect_ok(m);
}

Test(verify, bool_into_matmul_fails) {
    AmpModel *m = valid_model();
    AmpValue *b = amp_graph_value(m->graph, "b");
    set_type(m, b, AMP_DT_BOOL, 0, NULL);
    amp_graph_add_input(m->graph, b);
    node(m->graph, "Where", "where_ok", "b,b,b", "wb"); /* any type is fine for Where */
    node(m->graph, "MatMul", "mm", "x,b", "k");
    expect_fail(m, AMP_ERR_INPUT, "node 'mm' (MatMul): input 1 'b' is bool, but MatMul takes numbers there");
}

/* ---- training info --------------------------------------------------------------- */

static AmpTrainingInfo *training(AmpModel *m) {
    m->training = amp_arena_calloc(&m->arena, 1, sizeof *m->training);
    m->n_training = 1;
    AmpTrainingInfo *ti = &m->training[0];
    ti->algorithm = amp_graph_new(m, m->graph);
    ti->algorithm->name = "train";
    /* w_new = w - x: reads the main graph's initializer and input. */
    node(ti->algorithm, "Sub", "step", "w,x", "w_new");
    output(ti->algorithm, "w_new");
    ti->update_bindings = amp_arena_calloc(&m->arena, 1, sizeof *ti->update_bindings);
    ti->n_update_bindings = 1;
    ti->update_bindings[0] = (AmpStrPair){"w", "w_new"};
    return ti;
}

Test(verify, training_info_valid) {
    AmpModel *m = valid_model();
    training(m);
    expect_ok(m);
}

Test(verify, update_binding_key_not_an_initializer) {
    AmpModel *m = valid_model();
    training(m)->update_bindings[0].key = "x";
    expect_fail(m, AMP_ERR_INPUT,
                "training_info[0]: update_binding 'x' -> 'w_new': 'x' is not an initializer of "
                "the main graph");
}

Test(verify, update_binding_value_not_an_output) {
    AmpModel *m = valid_model();
    training(m)->update_bindings[0].value = "w";
    expect_fail(m, AMP_ERR_INPUT, "'w' is not an output of the algorithm graph");
}

Test(verify, initialization_binding_without_graph) {
    AmpModel *m = valid_model();
    AmpTrainingInfo *ti = training(m);
    ti->init_bindings = ti->update_bindings;
    ti->n_init_bindings = 1;
    expect_fail(m, AMP_ERR_INPUT, "initialization_binding given but no initialization graph");
}

/* ONNX: update_binding keys name initializers of the main graph or of the algorithm
 * (optimizer state, the iteration count); initialization_binding keys likewise. */
static AmpTrainingInfo *training_with_algorithm_state(AmpModel *m) {
    AmpTrainingInfo *ti = training(m);
    init_f32(m, ti->algorithm, "v", 0, 0);
    node(ti->algorithm, "Add", "acc", "v,x", "v_new");
    output(ti->algorithm, "v_new");
    ti->update_bindings = amp_arena_calloc(&m->arena, 2, sizeof *ti->update_bindings);
    ti->n_update_bindings = 2;
    ti->update_bindings[0] = (AmpStrPair){"w", "w_new"};
    ti->update_bindings[1] = (AmpStrPair){"v", "v_new"};
    return ti;
}

Test(verify, update_binding_key_may_be_an_algorithm_initializer) {
    AmpModel *m = valid_model();
    AmpTrainingInfo *ti = training_with_algorithm_state(m);
    cr_assert_eq(amp_training_key(m, ti, "v")->graph, ti->algorithm);
    cr_assert_eq(amp_training_key(m, ti, "w")->graph, m->graph);
    cr_assert_null(amp_training_key(m, ti, "x"), "an input is no initializer");
    /* ... and so may an initialization_binding key. */
    ti->initialization = amp_graph_new(m, m->graph);
    ti->initialization->name = "init";
    init_f32(m, ti->initialization, "v0", 1, 1);
    node(ti->initialization, "Identity", "copy", "v0", "v_init");
    output(ti->initialization, "v_init");
    ti->init_bindings = amp_arena_calloc(&m->arena, 1, sizeof *ti->init_bindings);
    ti->n_init_bindings = 1;
    ti->init_bindings[0] = (AmpStrPair){"v", "v_init"};
    expect_ok(m);
}

Test(verify, binding_key_in_neither_graph_names_both) {
    AmpModel *m = valid_model();
    training_with_algorithm_state(m)->update_bindings[1].key = "vv";
    expect_fail(m, AMP_ERR_INPUT,
                "training_info[0]: update_binding 'vv' -> 'v_new': 'vv' is not an initializer of the main graph, "
                "nor of training_info[0].algorithm");
}

Test(verify, algorithm_initializer_may_not_share_a_main_initializers_name) {
    AmpModel *m = valid_model();
    AmpTrainingInfo *ti = training_with_algorithm_state(m);
    init_f32(m, ti->algorithm, "w", 3, 4); /* unread: still two initializers of one name */
    expect_fail(m, AMP_ERR_INPUT,
                "training_info[0].algorithm: initializer 'w' has the name of an initializer of the main graph");
}

/* An algorithm's own initializer is bound only by its own training_info. */
Test(verify, another_algorithms_initializer_is_no_key) {
    AmpModel *m = valid_model();
    training_with_algorithm_state(m);
    AmpTrainingInfo *ti = amp_arena_grow(&m->arena, m->training, 1, 2, sizeof *ti);
    m->training = ti;
    m->n_training = 2;
    memset(&ti[1], 0, sizeof ti[1]);
    ti[1].algorithm = amp_graph_new(m, m->graph);
    ti[1].algorithm->name = "second";
    node(ti[1].algorithm, "Neg", "neg", "x", "q");
    output(ti[1].algorithm, "q");
    ti[1].update_bindings = amp_arena_calloc(&m->arena, 1, sizeof *ti[1].update_bindings);
    ti[1].n_update_bindings = 1;
    ti[1].update_bindings[0] = (AmpStrPair){"v", "q"};
    expect_fail(m, AMP_ERR_INPUT, "training_info[1]: update_binding 'v' -> 'q': 'v' is not an initializer");
}

/* ONNX: "We have only unique keys in all update_bindings": one variable, one assignment. */
Test(verify, update_binding_key_bound_by_two_training_infos) {
    AmpModel *m = valid_model();
    training(m);
    AmpTrainingInfo *ti = amp_arena_grow(&m->arena, m->training, 1, 2, sizeof *ti);
    m->training = ti;
    m->n_training = 2;
    ti[1] = ti[0];
    ti[1].algorithm = amp_graph_new(m, m->graph);
    ti[1].algorithm->name = "second";
    node(ti[1].algorithm, "Neg", "neg", "w", "w_neg");
    output(ti[1].algorithm, "w_neg");
    ti[1].update_bindings = amp_arena_calloc(&m->arena, 1, sizeof *ti[1].update_bindings);
    ti[1].n_update_bindings = 1;
    ti[1].update_bindings[0] = (AmpStrPair){"w", "w_neg"};
    expect_fail(m, AMP_ERR_INPUT, "update_binding key 'w' is bound by training_info[0] and by training_info[1]");
}

Test(verify, training_graph_node_problem_is_named) {
    AmpModel *m = valid_model();
    AmpTrainingInfo *ti = training(m);
    node(ti->algorithm, "Relu", "bad", "ghost", "q");
    expect_fail(m, AMP_ERR_INPUT, "graph 'train': node 'bad' (Relu): input 0 'ghost' is undefined");
}

/* ---- IR consistency (a pass that edits fields by hand) --------------------------- */

Test(verify, use_list_out_of_step) {
    AmpModel *m = valid_model();
    AmpNode *relu = m->graph->last;
    relu->inputs[0] = val(m->graph, "x"); /* bypasses amp_node_set_input */
    expect_fail(m, AMP_ERR_INTERNAL, "uses recorded");
}

Test(verify, producer_of_unlinked_node) {
    AmpModel *m = valid_model();
    AmpNode *stray = amp_node_new(m->graph, "", "Relu", "stray", 1, 1);
    amp_node_set_output(stray, 0, amp_graph_value(m->graph, "orphan"));
    expect_fail(m, AMP_ERR_INTERNAL, "value 'orphan' names a producer that is not linked");
}

/* ---- linear time ----------------------------------------------------------------- */

Test(verify, long_chain_is_fast, .timeout = 20) {
    AmpModel *m = amp_model_new();
    AmpGraph *g = m->graph;
    AmpValue *prev = input(m, g, "x");
    char name[32];
    for (int i = 0; i < 200000; i++) {
        snprintf(name, sizeof name, "v%d", i);
        AmpNode *n = amp_node_new(g, "", "Relu", "", 1, 1);
        amp_node_set_input(n, 0, prev);
        prev = amp_graph_value(g, name);
        amp_node_set_output(n, 0, prev);
        amp_node_append(g, n);
    }
    amp_graph_add_output(g, prev);
    for (int k = 0; k < 5; k++) {
        amp_status_clear(&st);
        cr_assert_eq(amp_verify_model(m, &st), AMP_OK, "%s", st.msg);
    }
    amp_model_free(m);
}

/* ---- printer --------------------------------------------------------------------- */

Test(print, text_dump_is_stable) {
    AmpModel *m = amp_model_new();
    AmpGraph *g = m->graph;
    g->name = "net";
    m->has = AMP_MODEL_HAS_IR_VERSION;
    m->ir_version = 8;
    m->producer_name = "unit";
    m->opsets = amp_arena_calloc(&m->arena, 1, sizeof *m->opsets);
    m->opsets[0] = (AmpOpset){"", 17, true};
    m->n_opsets = 1;
    AmpValue *x = amp_graph_value(g, "x");
    static const int64_t dx[] = {-1, 3};
    set_type(m, x, AMP_DT_FLOAT, 2, dx);
    x->type.dims[0].param = "N";
    amp_graph_add_input(g, x);
    init_f32(m, g, "w", 0.5f, 0.1f);
    input(m, g, "c");
    AmpNode *gemm = node(g, "Gemm", "gemm0", "x,w,", "y");
    attr_f(gemm, "alpha", 1.0f);
    attr_i(gemm, "transB", 1);
    static const int64_t dy[] = {1, 10};
    set_type(m, val(g, "y"), AMP_DT_FLOAT, 2, dy);
    AmpNode *n = node(g, "If", "if0", "c", "r");
    AmpGraph *then = subgraph(n, "then_branch", "then");
    node(then, "Relu", "", "y", "ty");
    output(then, "ty");
    AmpAttr *s = amp_node_add_attr(node_d(g, "com.example", "Tag", "t", "r", "u"), "label",
                                   AMP_ATTR_STRING);
    s->s.data = (const uint8_t *)"a\"b";
    s->s.len = 3;
    output(g, "y");

    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert(f);
    amp_print_model(f, m);
    fclose(f);
    const char *want = "model ir_version=8 producer=\"unit\"\n"
                       "opset ai.onnx 17\n"
                       "graph 'net' {\n"
                       "  input x: float[N,3]\n"
                       "  input c: float[2]\n"
                       "  init w: float[2]\n"
                       "  y:float[1,10] = Gemm(x, w, \"\") {alpha=1, transB=1}  # gemm0\n"
                       "  r = If(c) {then_branch=graph 'then'}  # if0\n"
                       "    then_branch: graph 'then' {\n"
                       "      ty = Relu(y)\n"
                       "      output ty\n"
                       "    }\n"
                       "  u = com.example::Tag(r) {label=\"a\\\"b\"}  # t\n"
                       "  output y: float[1,10]\n"
                       "}\n";
    cr_assert_str_eq(buf, want);
    free(buf);
    amp_model_free(m);
}

Test(print, training_info_and_external_data) {
    AmpModel *m = valid_model();
    training(m);
    AmpValue *w = val(m->graph, "w");
    w->initializer->is_external = true;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert(f);
    amp_print_model(f, m);
    fclose(f);
    const char *want = "model\n"
                       "graph {\n"
                       "  input x: float[2]\n"
                       "  init w: float[2] external\n"
                       "  y = Gemm(x, w) {alpha=1, transB=1}  # gemm0\n"
                       "  z = Relu(y)  # relu0\n"
                       "  output z\n"
                       "}\n"
                       "training_info[0] {\n"
                       "  algorithm: graph 'train' {\n"
                       "    w_new = Sub(w, x)  # step\n"
                       "    output w_new\n"
                       "  }\n"
                       "  update_binding w <- w_new\n"
                       "}\n";
    cr_assert_str_eq(buf, want);
    free(buf);
    amp_model_free(m);
}

Test(verify, opset_versions_start_at_one) {
    AmpModel *m = valid_model();
    m->opsets = amp_arena_calloc(&m->arena, 1, sizeof *m->opsets);
    m->opsets[0] = (AmpOpset){"", 0, true};
    m->n_opsets = 1;
    expect_fail(m, AMP_ERR_INPUT, "opset_import of domain '' has version 0; versions start at 1");
    m = valid_model(); /* no version at all reads as 0 (onnx.checker: no op registered) */
    m->opsets = amp_arena_calloc(&m->arena, 1, sizeof *m->opsets);
    m->opsets[0] = (AmpOpset){"", 0, false};
    m->n_opsets = 1;
    expect_fail(m, AMP_ERR_INPUT, "opset_import of domain '' has no version; versions start at 1");
    m = valid_model();
    m->opsets = amp_arena_calloc(&m->arena, 1, sizeof *m->opsets);
    m->opsets[0] = (AmpOpset){"", 17, true};
    m->n_opsets = 1;
    expect_ok(m);
}
