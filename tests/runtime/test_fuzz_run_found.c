/* What fuzz_run (tests/fuzz/fuzz_run.c) found: a node whose shape function and CPU kernel
 * read different versions of the op, so that the kernel met an output the plan had not
 * sized, or sized otherwise (AMP_ERR_INTERNAL). The reproducers are in
 * tests/fuzz/corpus/found_*.onnx; these are the same models, built here. */
#include <criterion/criterion.h>
#include <string.h>

#include "rt_util.h"

static AmpSession *open_model(AmpModel *m) {
    AmpSession *s = NULL;
    AmpStatus st = {0};
    AmpSessionOptions o = {.ignore_env = true};
    cr_assert_eq(rt_open(m, &o, &s, &st), AMP_OK, "open: %s", st.msg);
    return s;
}

/* Unsqueeze-13 takes axes as an input; an axes attribute and no input: refused at open
 * with a clean error naming the node, not an output the kernel finds unplaced. */
Test(fuzz_run_found, unsqueeze13_without_an_axes_input_is_bad_input) {
    AmpModel *m = rt_model(15);
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "3,4,5");
    AmpNode *n = rt_node(g, "", "Unsqueeze", "x", "y");
    n->name = "unsq";
    AmpAttr *a = amp_node_add_attr(n, "axes", AMP_ATTR_INTS);
    a->ints = amp_arena_calloc(&m->arena, 1, sizeof *a->ints);
    a->ints[0] = 3;
    a->n_ints = 1;
    rt_output(g, "y", AMP_DT_FLOAT, NULL);
    AmpSession *s = NULL;
    AmpStatus st = {0};
    AmpSessionOptions o = {.ignore_env = true};
    AmpCode rc = rt_open(m, &o, &s, &st);
    cr_assert_eq(rc, AMP_ERR_INPUT, "%s: %s", amp_code_name(rc), st.msg);
    cr_assert_not_null(strstr(st.msg, "node 'unsq' (Unsqueeze): no axes input"), "%s", st.msg);
    cr_assert_null(s);
}

/* ReduceSum-1 (opset 9) has no axes input: one given is not read (the shape function
 * does not read it either), so no axes attribute reduces everything. */
Test(fuzz_run_found, reducesum9_ignores_an_axes_input) {
    AmpModel *m = rt_model(9);
    AmpGraph *g = m->graph;
    rt_input(g, "data", AMP_DT_FLOAT, "3,2,2");
    rt_input(g, "axes", AMP_DT_INT64, "1");
    AmpNode *n = rt_node(g, "", "ReduceSum", "data,axes", "y");
    amp_node_add_attr(n, "keepdims", AMP_ATTR_INT)->i = 0;
    rt_output(g, "y", AMP_DT_FLOAT, NULL);
    AmpSession *s = open_model(m);
    float x[12];
    for (int i = 0; i < 12; i++) x[i] = (float)(i + 1);
    int64_t axes[1] = {0};
    const int64_t xd[3] = {3, 2, 2}, ad[1] = {1};
    AmpTensorView in[2] = {rt_view("data", AMP_DT_FLOAT, x, 3, xd), rt_view("axes", AMP_DT_INT64, axes, 1, ad)};
    for (int k = 0; k < 2; k++) {
        AmpStatus st = {0};
        AmpTensorView out;
        cr_assert_eq(amp_session_run(s, in, 2, NULL, 1, &out, &st), AMP_OK, "%s", st.msg);
        cr_assert_eq(out.rank, 0);
        cr_assert_eq(((float *)out.data)[0], 78.0f);
        amp_tensor_view_free(&out);
    }
    amp_session_close(s);
}
