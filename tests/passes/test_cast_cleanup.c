/* The cast_cleanup pass (passes/cast_cleanup.c): Casts to their input's own type go;
 * lossless round trips (fp16 -> fp32 ->
 * fp16, bf16 likewise) are removed and their readers read the original; duplicate Casts
 * (same input, same type, same graph) become one; lossy trips (fp32 -> fp16 -> fp32) and
 * Casts whose output is a graph output stay; users' Casts keep their meaning; subgraphs are
 * cleaned too; a value with a large fan-out is handled in one sweep. */
#include "tests/passes/amp_test_util.h"

static AmpStatus st;

static AmpNode *cast(AmpGraph *g, const char *name, const char *in, const char *out, int to) {
    AmpNode *n = nd(g, "Cast", name, in, out);
    attr_i(n, "to", to);
    return n;
}

static void clean(AmpModel *m) {
    cr_assert_eq(run_list(m, "infer,cast_cleanup,infer", NULL, &st), AMP_OK, "%s", st.msg);
}

Test(cast_cleanup, lossless_round_trip_is_removed) {
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT16, "4");
    cast(g, "up", "x", "x32", AMP_DT_FLOAT);
    cast(g, "down", "x32", "x16", AMP_DT_FLOAT16);
    nd(g, "Relu", "relu", "x16", "y");
    rt_output(g, "y", AMP_DT_FLOAT16, "4");
    clean(m);
    cr_assert_str_eq(node_of(m, "relu")->inputs[0]->name, "x");
    cr_assert_eq(count_op(g, "Cast"), 0, "both casts are gone");
    amp_model_free(m);
}

Test(cast_cleanup, bf16_round_trip_is_removed_mixed_trip_is_not) {
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_BFLOAT16, "4");
    cast(g, "up", "x", "x32", AMP_DT_FLOAT);
    cast(g, "down", "x32", "xb", AMP_DT_BFLOAT16);
    cast(g, "half", "x32", "xh", AMP_DT_FLOAT16);
    nd(g, "Relu", "r1", "xb", "y1");
    nd(g, "Relu", "r2", "xh", "y2");
    rt_output(g, "y1", AMP_DT_BFLOAT16, "4");
    rt_output(g, "y2", AMP_DT_FLOAT16, "4");
    clean(m);
    cr_assert_str_eq(node_of(m, "r1")->inputs[0]->name, "x");
    cr_assert_str_eq(node_of(m, "r2")->inputs[0]->name, "xh", "bf16 -> fp32 -> fp16 is no round trip");
    cr_assert_not_null(find_node(g, "up"), "still read by the fp16 cast");
    amp_model_free(m);
}

Test(cast_cleanup, lossy_round_trip_is_kept) {
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "4");
    cast(g, "down", "x", "x16", AMP_DT_FLOAT16);
    cast(g, "up", "x16", "x32", AMP_DT_FLOAT);
    nd(g, "Relu", "relu", "x32", "y");
    rt_output(g, "y", AMP_DT_FLOAT, "4");
    clean(m);
    cr_assert_str_eq(node_of(m, "relu")->inputs[0]->name, "x32");
    cr_assert_eq(count_op(g, "Cast"), 2);
    amp_model_free(m);
}

Test(cast_cleanup, duplicate_casts_become_one) {
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "4");
    cast(g, "c1", "x", "a", AMP_DT_FLOAT16);
    nd(g, "Relu", "r1", "a", "y1");
    cast(g, "c2", "x", "b", AMP_DT_FLOAT16);
    nd(g, "Relu", "r2", "b", "y2");
    cast(g, "c3", "x", "c", AMP_DT_INT32); /* another type: kept */
    nd(g, "Neg", "r3", "c", "y3");
    rt_output(g, "y1", AMP_DT_FLOAT16, "4");
    rt_output(g, "y2", AMP_DT_FLOAT16, "4");
    rt_output(g, "y3", AMP_DT_INT32, "4");
    clean(m);
    cr_assert_null(find_node(g, "c2"));
    cr_assert_str_eq(node_of(m, "r2")->inputs[0]->name, "a");
    cr_assert_not_null(find_node(g, "c3"));
    amp_model_free(m);
}

Test(cast_cleanup, casts_writing_graph_outputs_are_kept) {
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT16, "4");
    cast(g, "up", "x", "x32", AMP_DT_FLOAT);
    cast(g, "down", "x32", "y", AMP_DT_FLOAT16);
    rt_output(g, "y", AMP_DT_FLOAT16, "4");
    clean(m);
    cr_assert_eq(count_op(g, "Cast"), 2, "the output's name is the interface");
    amp_model_free(m);
}

Test(cast_cleanup, identity_casts_go_widening_casts_keep_their_meaning) {
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "4");
    cast(g, "same", "x", "a", AMP_DT_FLOAT); /* a model's own .float() on float32 */
    cast(g, "wide", "a", "b", AMP_DT_DOUBLE);
    cast(g, "same_out", "x", "c", AMP_DT_FLOAT); /* writes a graph output: its name stays */
    rt_output(g, "b", AMP_DT_DOUBLE, "4");
    rt_output(g, "c", AMP_DT_FLOAT, "4");
    clean(m);
    cr_assert_null(find_node(g, "same"), "a Cast to the type its input has is an identity");
    cr_assert_str_eq(node_of(m, "wide")->inputs[0]->name, "x");
    cr_assert_eq(amp_node_attr_int(node_of(m, "wide"), "to", 0), AMP_DT_DOUBLE);
    cr_assert_not_null(find_node(g, "same_out"));
    amp_model_free(m);
}

Test(cast_cleanup, cast_1_type_names_are_read) {
    AmpModel *m = rt_model(5);
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT16, "4");
    AmpNode *up = nd(g, "Cast", "up", "x", "x32");
    AmpAttr *a = amp_node_add_attr(up, "to", AMP_ATTR_STRING);
    a->s.data = (const uint8_t *)"FLOAT";
    a->s.len = 5;
    AmpNode *down = nd(g, "Cast", "down", "x32", "x16");
    a = amp_node_add_attr(down, "to", AMP_ATTR_STRING);
    a->s.data = (const uint8_t *)"FLOAT16";
    a->s.len = 7;
    nd(g, "Relu", "relu", "x16", "y");
    rt_output(g, "y", AMP_DT_FLOAT16, "4");
    clean(m);
    cr_assert_str_eq(node_of(m, "relu")->inputs[0]->name, "x");
    amp_model_free(m);
}

Test(cast_cleanup, subgraphs_are_cleaned) {
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT16, "4");
    rt_input(g, "c", AMP_DT_BOOL, "");
    AmpNode *iff = nd(g, "If", "if", "c", "y");
    AmpGraph *branches[2];
    const char *attrs[2] = {"then_branch", "else_branch"};
    for (int i = 0; i < 2; i++) {
        AmpGraph *b = amp_graph_new(m, g);
        b->owner = iff;
        b->name = attrs[i];
        amp_node_add_attr(iff, attrs[i], AMP_ATTR_GRAPH)->g = b;
        char n1[32], n2[32], v1[32], v2[32], o[32];
        snprintf(n1, sizeof n1, "%s/up", attrs[i]);
        snprintf(n2, sizeof n2, "%s/down", attrs[i]);
        snprintf(v1, sizeof v1, "%s_x32", attrs[i]);
        snprintf(v2, sizeof v2, "%s_x16", attrs[i]);
        snprintf(o, sizeof o, "%s_out", attrs[i]);
        cast(b, n1, "x", v1, AMP_DT_FLOAT);
        char ins[64];
        snprintf(ins, sizeof ins, "%s", v1);
        cast(b, n2, ins, v2, AMP_DT_FLOAT16);
        nd(b, "Relu", o, v2, o);
        rt_output(b, o, AMP_DT_FLOAT16, "4");
        branches[i] = b;
    }
    rt_output(g, "y", AMP_DT_FLOAT16, "4");
    clean(m);
    for (int i = 0; i < 2; i++) cr_assert_eq(count_op(branches[i], "Cast"), 0, "%s", attrs[i]);
    amp_model_free(m);
}

Test(cast_cleanup, large_fan_out_is_one_sweep) {
    /* 20000 readers of one round trip: moving them one by one would be quadratic. */
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT16, "4");
    cast(g, "up", "x", "x32", AMP_DT_FLOAT);
    cast(g, "down", "x32", "x16", AMP_DT_FLOAT16);
    enum { N = 20000 };
    for (int i = 0; i < N; i++) {
        char name[32], out[32];
        snprintf(name, sizeof name, "r%d", i);
        snprintf(out, sizeof out, "y%d", i);
        nd(g, "Relu", name, "x16", out);
        if (i % 1000 == 0) rt_output(g, out, AMP_DT_FLOAT16, "4");
    }
    clean(m);
    cr_assert_eq(val_of(g, "x")->n_uses, N);
    cr_assert_eq(count_op(g, "Cast"), 0);
    amp_model_free(m);
}
