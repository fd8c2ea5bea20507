/* What fuzz_run (tests/fuzz/fuzz_run.c) found: a node whose shape function and CPU kernel
 * read different versions of the op, so that the kernel met an output the plan had not
 * sized, or sized otherwise (AMP_ERR_INTERNAL). The reproducers are in
 * tests/fuzz/corpus/found_*.onnx; these are the same models, built here. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "tests/runtime/rt_util.h"

/* Unsqueeze-13 takes axes as an input; an axes attribute and no input: refused at open
 * with a clean error naming the node, not an output the kernel finds unplaced (now by the
 * verifier, which knows Unsqueeze-13 has no such attribute). */
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
    cr_assert_not_null(strstr(st.msg, "node 'unsq' (Unsqueeze): Unsqueeze-15 has no attribute 'axes'"), "%s", st.msg);
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

/* Runs session s on inputs in: the run's code, with st's message. */
static AmpCode run(AmpSession *s, int n_in, const AmpTensorView *in, AmpTensorView *out, AmpStatus *st) {
    *out = (AmpTensorView){0};
    return amp_session_run(s, in, (size_t)n_in, NULL, 1, out, st);
}

static AmpSession *open_ok(AmpModel *m) {
    AmpSession *s = NULL;
    AmpStatus st = {0};
    AmpSessionOptions o = {.ignore_env = true};
    AmpCode rc = rt_open(m, &o, &s, &st);
    cr_assert_eq(rc, AMP_OK, "open: %s: %s", amp_code_name(rc), st.msg);
    return s;
}

/* Add-6 with broadcast=1 broadcasts B one way onto A: the result has A's shape, which is
 * what the plan sizes. A's last dim symbolic, 1 at run, against B's 3: the kernel had
 * broadcast both ways (an output of another shape than the placed one, an internal
 * error); it is the input's error now, naming both dims. */
Test(fuzz_run_found, add6_broadcast_onto_a_symbolic_dim_is_bad_input) {
    AmpModel *m = rt_model(6);
    AmpGraph *g = m->graph;
    rt_input(g, "a", AMP_DT_DOUBLE, "2,N");
    rt_input(g, "b", AMP_DT_DOUBLE, "3");
    AmpNode *n = rt_node(g, "", "Add", "a,b", "y");
    n->name = "add";
    amp_node_add_attr(n, "broadcast", AMP_ATTR_INT)->i = 1;
    rt_output(g, "y", AMP_DT_DOUBLE, NULL);
    AmpSession *s = open_ok(m);
    double a[2] = {1, 2}, b[3] = {10, 20, 30}, a6[6] = {1, 2, 3, 4, 5, 6};
    const int64_t ad[2] = {2, 1}, bd[1] = {3}, a6d[2] = {2, 3};
    AmpTensorView in[2] = {rt_view("a", AMP_DT_DOUBLE, a, 2, ad), rt_view("b", AMP_DT_DOUBLE, b, 1, bd)};
    AmpTensorView out;
    AmpStatus st = {0};
    AmpCode rc = run(s, 2, in, &out, &st);
    cr_assert_eq(rc, AMP_ERR_INPUT, "%s: %s", amp_code_name(rc), st.msg);
    cr_assert_not_null(strstr(st.msg, "node 'add' (Add): B's dim 0 is 3 where A's is 1"), "%s", st.msg);

    /* Where A's dim is 3 the same session adds B to each row. */
    in[0] = rt_view("a", AMP_DT_DOUBLE, a6, 2, a6d);
    st = (AmpStatus){0};
    cr_assert_eq(run(s, 2, in, &out, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(out.rank, 2);
    cr_assert_eq(out.dims[1], 3);
    cr_assert_float_eq(((double *)out.data)[5], 36, 0);
    amp_tensor_view_free(&out);
    amp_session_close(s);
}

/* Squeeze-13 given 74 axes (all 0) for a rank-4 input: more than the shape function
 * evaluates, so the plan could not size the output and the kernel found it unplaced (an
 * internal error); now a clean "cannot size" naming the node. */
Test(fuzz_run_found, squeeze13_with_more_axes_than_dims_is_a_clean_error) {
    AmpModel *m = rt_model(13);
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "1,3,1,5");
    rt_input(g, "axes", AMP_DT_INT64, "74");
    AmpNode *n = rt_node(g, "", "Squeeze", "x,axes", "y");
    n->name = "sq";
    rt_output(g, "y", AMP_DT_FLOAT, NULL);
    float *x = calloc(15, sizeof *x);
    int64_t *axes = calloc(74, sizeof *axes);
    const int64_t xd[4] = {1, 3, 1, 5}, ad[1] = {74};
    AmpTensorView in[2] = {rt_view("x", AMP_DT_FLOAT, x, 4, xd), rt_view("axes", AMP_DT_INT64, axes, 1, ad)};
    AmpSession *s = open_ok(m);
    AmpTensorView out;
    AmpStatus st = {0};
    AmpCode rc = run(s, 2, in, &out, &st);
    amp_session_close(s);
    cr_assert_eq(rc, AMP_ERR_UNSUPPORTED, "%s: %s", amp_code_name(rc), st.msg);
    cr_assert_not_null(strstr(st.msg, "node 'sq' (Squeeze): ampc cannot size output 0"), "%s", st.msg);
    free(x);
    free(axes);
}

/* BatchNormalization-15 takes mean and var of one type (T2): mean float32 and var float64
 * had the running outputs typed by mean and computed by the kernel in var's type (an
 * output of another type than the placed one, an internal error). The shape function
 * refuses it now: the session opens (type inference is advisory there) and the run is
 * an input error naming both inputs. */
Test(fuzz_run_found, batchnorm_mean_and_var_of_two_types_is_bad_input) {
    AmpModel *m = rt_model(15);
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "2,3");
    rt_input(g, "s", AMP_DT_FLOAT, "3");
    rt_input(g, "bias", AMP_DT_FLOAT, "3");
    rt_input(g, "mean", AMP_DT_FLOAT, "3");
    rt_input(g, "var", AMP_DT_DOUBLE, "3");
    AmpNode *n = rt_node(g, "", "BatchNormalization", "x,s,bias,mean,var", "y,rm,rv");
    n->name = "bn";
    amp_node_add_attr(n, "training_mode", AMP_ATTR_INT)->i = 1;
    rt_output(g, "y", AMP_DT_FLOAT, NULL);
    rt_output(g, "rm", AMP_DT_FLOAT, NULL);
    rt_output(g, "rv", AMP_DT_FLOAT, NULL);
    AmpSession *s = open_ok(m);
    float x[6] = {1, 2, 3, 4, 5, 6}, one[3] = {1, 1, 1}, zero[3] = {0};
    double var[3] = {1, 1, 1};
    const int64_t xd[2] = {2, 3}, cd[1] = {3};
    AmpTensorView in[5] = {rt_view("x", AMP_DT_FLOAT, x, 2, xd), rt_view("s", AMP_DT_FLOAT, one, 1, cd),
                           rt_view("bias", AMP_DT_FLOAT, zero, 1, cd), rt_view("mean", AMP_DT_FLOAT, zero, 1, cd),
                           rt_view("var", AMP_DT_DOUBLE, var, 1, cd)};
    const char *names[1] = {"y"};
    AmpTensorView out[1] = {{0}};
    AmpStatus st = {0};
    AmpCode rc = amp_session_run(s, in, 5, names, 1, out, &st);
    amp_session_close(s);
    cr_assert_eq(rc, AMP_ERR_INPUT, "%s: %s", amp_code_name(rc), st.msg);
    cr_assert_not_null(strstr(st.msg, "input 4 'var' is double but input 3 'mean' is float"), "%s", st.msg);
}
