/* Type inference, continued (test_infer.c has the ops): merging with declared types
 * (conflicts are errors that name node and value; what is declared is filled, not
 * replaced), unknown ops, If/Loop/Scan bodies and training graphs. */
#include "tests/ir/infer_test_util.h"

/* ---- merging with declared types ---------------------------------------------------- */

Test(infer, declared_conflict_names_node_and_value) {
    AmpModel *m = model(17);
    AmpGraph *g = m->graph;
    input(g, "A", AMP_DT_FLOAT, "2");
    input(g, "B", AMP_DT_FLOAT, "2");
    node(g, "Add", "the_add", "A,B", "sum_out");
    AmpValue *y = val(g, "sum_out");
    set_type(g, y, AMP_DT_FLOAT16, "2");
    amp_graph_add_output(g, y);
    const char *msg = infer_err(m);
    cr_expect_str_eq(msg, "node 'the_add' (Add): output 'sum_out' is declared float16 but computes float");
    amp_model_free(m);
}

Test(infer, declared_types_are_filled_not_replaced) {
    AmpModel *m = model(17);
    AmpGraph *g = m->graph;
    input(g, "A", AMP_DT_FLOAT, "2,3");
    node(g, "Relu", "r1", "A", "y1");
    node(g, "Relu", "r2", "A", "y2");
    node(g, "Relu", "r3", "A", "y3");
    set_type(g, val(g, "y1"), AMP_DT_FLOAT, "?,3");
    set_type(g, val(g, "y2"), AMP_DT_FLOAT, NULL);
    set_type(g, val(g, "y3"), AMP_DT_FLOAT, "7,3"); /* stale value_info: kept */
    AmpDim *declared = val(g, "y1")->type.dims;
    infer_ok(m);
    EXPECT_TYPE(g, "y1", "float[2,3]");
    EXPECT_TYPE(g, "y2", "float[2,3]");
    EXPECT_TYPE(g, "y3", "float[7,3]");
    cr_expect_eq(declared[0].value, -1, "declared dims were edited in place");
    /* running again changes nothing */
    infer_ok(m);
    EXPECT_TYPE(g, "y1", "float[2,3]");
    amp_model_free(m);
}

Test(infer, unknown_op_keeps_declared_types) {
    AmpModel *m = model(17);
    AmpGraph *g = m->graph;
    input(g, "A", AMP_DT_FLOAT, "2,3");
    node_d(g, "my.domain", "MyOp", "custom", "A", "c0,c1");
    set_type(g, val(g, "c0"), AMP_DT_FLOAT16, "7");
    node(g, "Relu", "after", "c0", "r");
    node(g, "Relu", "after_untyped", "c1", "r1");
    infer_ok(m);
    cr_expect_eq(amp_op_lookup("my.domain", "MyOp"), AMP_OP_UNKNOWN);
    EXPECT_TYPE(g, "c0", "float16[7]");
    EXPECT_TYPE(g, "c1", "none");
    EXPECT_TYPE(g, "r", "float16[7]");
    EXPECT_TYPE(g, "r1", "none");
    amp_model_free(m);
}

/* ---- control flow ------------------------------------------------------------------- */

/* A branch graph computing `out = op(X)` from the outer X. */
static AmpGraph *branch(AmpModel *m, const char *op, const char *out) {
    AmpGraph *b = amp_graph_new(m, m->graph);
    node(b, op, op, "X", out);
    amp_graph_add_output(b, amp_graph_lookup(b, out));
    return b;
}

Test(infer, if_outputs_from_branches) {
    AmpModel *m = model(17);
    AmpGraph *g = m->graph;
    input(g, "X", AMP_DT_FLOAT, "2,N");
    input(g, "cond", AMP_DT_BOOL, "");
    AmpNode *n = node(g, "If", "if0", "cond", "y");
    attr_graph(n, "then_branch", branch(m, "Relu", "t"));
    attr_graph(n, "else_branch", branch(m, "Neg", "e"));
    node(g, "Abs", "after", "y", "z");
    infer_ok(m);
    AmpGraph *then_g = amp_node_attr(n, "then_branch")->g;
    cr_expect_str_eq(type_str(amp_graph_lookup(then_g, "t")), "float[2,N]");
    EXPECT_TYPE(g, "y", "float[2,N]");
    EXPECT_TYPE(g, "z", "float[2,N]");
    amp_model_free(m);
}

Test(infer, if_branches_disagree) {
    AmpModel *m = model(17);
    AmpGraph *g = m->graph;
    input(g, "X", AMP_DT_FLOAT, "2");
    input(g, "cond", AMP_DT_BOOL, "");
    AmpNode *n = node(g, "If", "if_bad", "cond", "y");
    attr_graph(n, "then_branch", branch(m, "Relu", "t"));
    AmpGraph *e = amp_graph_new(m, g);
    AmpNode *c = node(e, "Cast", "cast", "X", "ec");
    attr_int(c, "to", AMP_DT_INT32);
    amp_graph_add_output(e, amp_graph_lookup(e, "ec"));
    attr_graph(n, "else_branch", e);
    const char *msg = infer_err(m);
    cr_expect(strstr(msg, "if_bad") != NULL, "%s", msg);
    amp_model_free(m);
}

/* Loop with one carried value (doubled each iteration) and one scan output. */
Test(infer, loop_carried_and_scan_outputs) {
    AmpModel *m = model(17);
    AmpGraph *g = m->graph;
    input(g, "M", AMP_DT_INT64, "");
    input(g, "v0", AMP_DT_FLOAT, "3");
    AmpNode *n = node(g, "Loop", "loop", "M,,v0", "vN,scan");
    AmpGraph *b = amp_graph_new(m, g);
    amp_graph_add_input(b, amp_graph_value(b, "i"));
    amp_graph_add_input(b, amp_graph_value(b, "c_in"));
    amp_graph_add_input(b, amp_graph_value(b, "v"));
    node(b, "Identity", "keep", "c_in", "c_out");
    node(b, "Add", "dbl", "v,v", "v2");
    node(b, "Cast", "toi", "i", "fi");
    attr_int(b->last, "to", AMP_DT_FLOAT);
    amp_graph_add_output(b, amp_graph_lookup(b, "c_out"));
    amp_graph_add_output(b, amp_graph_lookup(b, "v2"));
    amp_graph_add_output(b, amp_graph_lookup(b, "fi"));
    attr_graph(n, "body", b);
    infer_ok(m);
    cr_expect_str_eq(type_str(amp_graph_lookup(b, "i")), "int64[*]");
    cr_expect_str_eq(type_str(amp_graph_lookup(b, "c_out")), "bool[*]");
    cr_expect_str_eq(type_str(amp_graph_lookup(b, "v2")), "float[*]");
    EXPECT_TYPE(g, "vN", "float[*]");
    EXPECT_TYPE(g, "scan", "float[*]");
    amp_model_free(m);
}

/* Scan-11: state (2) plus scan input (5, 2) sliced on axis 0; the body adds the slice
 * to the state and emits it, so the scan output stacks 5 slices of (2). */
Test(infer, scan_states_and_scan_outputs) {
    AmpModel *m = model(11);
    AmpGraph *g = m->graph;
    input(g, "s0", AMP_DT_FLOAT, "2");
    input(g, "xs", AMP_DT_FLOAT, "5,2");
    AmpNode *n = node(g, "Scan", "scan", "s0,xs", "sN,ys");
    attr_int(n, "num_scan_inputs", 1);
    AmpGraph *b = amp_graph_new(m, g);
    amp_graph_add_input(b, amp_graph_value(b, "s"));
    amp_graph_add_input(b, amp_graph_value(b, "x"));
    node(b, "Add", "acc", "s,x", "s2");
    node(b, "Identity", "emit", "x", "y");
    amp_graph_add_output(b, amp_graph_lookup(b, "s2"));
    amp_graph_add_output(b, amp_graph_lookup(b, "y"));
    attr_graph(n, "body", b);
    infer_ok(m);
    cr_expect_str_eq(type_str(amp_graph_lookup(b, "x")), "float[2]");
    cr_expect_str_eq(type_str(amp_graph_lookup(b, "s2")), "float[2]");
    EXPECT_TYPE(g, "sN", "float[2]");
    EXPECT_TYPE(g, "ys", "float[5,2]");
    amp_model_free(m);
}

/* Training graphs (training_info algorithm) are inferred after the main graph and see
 * its values; initializers without a declared type take the tensor's. */
Test(infer, training_graph_and_initializers) {
    AmpModel *m = model(17);
    AmpGraph *g = m->graph;
    input(g, "X", AMP_DT_FLOAT, "4,3");
    init_i64(g, "perm", 2, I64(1, 0));
    node(g, "Relu", "fwd", "X", "h");
    m->training = amp_arena_calloc(&m->arena, 1, sizeof *m->training);
    m->n_training = 1;
    AmpGraph *alg = amp_graph_new(m, g);
    m->training[0].algorithm = alg;
    node(alg, "Transpose", "t", "h", "ht");
    infer_ok(m);
    EXPECT_TYPE(g, "perm", "int64[2]");
    cr_expect_str_eq(type_str(amp_graph_lookup(alg, "ht")), "float[3,4]");
    amp_model_free(m);
}
