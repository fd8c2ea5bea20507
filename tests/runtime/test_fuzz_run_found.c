/* What fuzz_run (tests/fuzz/fuzz_run.c) found: a node whose shape function and CPU kernel
 * read different versions of the op, so that the kernel met an output the plan had not
 * sized, or sized otherwise (AMP_ERR_INTERNAL). The reproducers are in
 * tests/fuzz/corpus/found_*.onnx; these are the same models, built here. */
#include <criterion/criterion.h>
#include <string.h>

#include "rt_util.h"

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

/* ReduceSum-1 (opset 9) has no axes input: one given is refused at open, as onnx.checker
 * refuses it (the verifier's inputs-by-version check), instead of the kernel and the
 * shape function reading different versions of the op. */
Test(fuzz_run_found, reducesum9_with_an_axes_input_is_bad_input) {
    AmpModel *m = rt_model(9);
    AmpGraph *g = m->graph;
    rt_input(g, "data", AMP_DT_FLOAT, "3,2,2");
    rt_input(g, "axes", AMP_DT_INT64, "1");
    AmpNode *n = rt_node(g, "", "ReduceSum", "data,axes", "y");
    amp_node_add_attr(n, "keepdims", AMP_ATTR_INT)->i = 0;
    rt_output(g, "y", AMP_DT_FLOAT, NULL);
    AmpSession *s = NULL;
    AmpStatus st = {0};
    AmpSessionOptions o = {.ignore_env = true};
    AmpCode rc = rt_open(m, &o, &s, &st);
    cr_assert_eq(rc, AMP_ERR_INPUT, "%s: %s", amp_code_name(rc), st.msg);
    cr_assert_not_null(strstr(st.msg, "ReduceSum-9 takes one input"), "%s", st.msg);
    cr_assert_null(s);
}
