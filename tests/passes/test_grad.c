/* `ampc grad`'s autodiff (passes/grad*.c): for every gradient rule, a small model whose
 * parameters feed that op on shapes that broadcast, made into a training graph with the
 * gradients as outputs; the gradients the CPU executor computes from the built backward
 * must match central finite differences of the forward loss (float32: step 1e-2, so the
 * tolerance is loose). Each case prints the largest error it saw. */
#include "tests/passes/grad_check.h"

/* ---- matrix products ------------------------------------------------------------------ */

Test(grad, matmul_batched_broadcast) {
    AmpModel *m = model();
    P(m->graph, "A", -1, 1, 2, 3, 4);
    P(m->graph, "B", -1, 1, 4, 2);
    op(m, "MatMul", "A,B", "y");
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, "MatMul [2,3,4]x[4,2]");
}

Test(grad, matmul_vector) {
    AmpModel *m = model();
    P(m->graph, "a", -1, 1, 4);
    P(m->graph, "B", -1, 1, 2, 4, 3);
    op(m, "MatMul", "a,B", "y");
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, "MatMul [4]x[2,4,3]");
}

Test(grad, gemm_transposed_alpha_beta_bias) {
    AmpModel *m = model();
    P(m->graph, "A", -1, 1, 4, 3);
    P(m->graph, "B", -1, 1, 5, 4);
    P(m->graph, "C", -1, 1, 5);
    AmpNode *n = op(m, "Gemm", "A,B,C", "y");
    attr_i(n, "transA", 1);
    attr_i(n, "transB", 1);
    attr_f(n, "alpha", 0.7f);
    attr_f(n, "beta", 1.3f);
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, "Gemm transA transB C[5]");
}

Test(grad, gemm_plain) {
    AmpModel *m = model();
    P(m->graph, "A", -1, 1, 3, 4);
    P(m->graph, "B", -1, 1, 4, 2);
    P(m->graph, "C", -1, 1, 3, 1);
    op(m, "Gemm", "A,B,C", "y");
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, "Gemm C[3,1]");
}

/* ---- elementwise ------------------------------------------------------------------------- */

static void binary(const char *type, float lo, float hi, const char *what) {
    AmpModel *m = model();
    P(m->graph, "x", -1, 1, 2, 3, 4);
    P(m->graph, "w", lo, hi, 3, 1);
    op(m, type, "x,w", "y");
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, what);
}

Test(grad, add) { binary("Add", -1, 1, "Add [2,3,4]+[3,1]"); }
Test(grad, sub) { binary("Sub", -1, 1, "Sub [2,3,4]-[3,1]"); }
Test(grad, mul) { binary("Mul", -1, 1, "Mul [2,3,4]*[3,1]"); }
Test(grad, div) { binary("Div", 0.5f, 2, "Div [2,3,4]/[3,1]"); }

Test(grad, sub_both_broadcast) {
    AmpModel *m = model();
    P(m->graph, "x", -1, 1, 3, 1);
    P(m->graph, "w", -1, 1, 2, 1, 4);
    op(m, "Sub", "w,x", "y");
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, "Sub [2,1,4]-[3,1]");
}

Test(grad, pow_trainable_exponent) {
    AmpModel *m = model();
    P(m->graph, "x", 0.5f, 2, 3, 4);
    P(m->graph, "e", 0.5f, 2.5f, 4);
    op(m, "Pow", "x,e", "y");
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, "Pow [3,4]^[4]");
}

Test(grad, pow_constant_exponent) {
    AmpModel *m = model();
    P(m->graph, "x", -1, 1, 3, 4);
    rt_scalar_f(m->graph, "two", 2.0f); /* rank 0: a constant, not a parameter */
    op(m, "Pow", "x,two", "y");
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, "Pow [3,4]^2");
}

static void unary(const char *type, float lo, float hi) {
    AmpModel *m = model();
    P(m->graph, "x", lo, hi, 3, 4);
    op(m, type, "x", "y");
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, type);
}

Test(grad, neg) { unary("Neg", -1, 1); }
Test(grad, relu) { unary("Relu", -1, 1); }
Test(grad, sigmoid) { unary("Sigmoid", -2, 2); }
Test(grad, tanh) { unary("Tanh", -2, 2); }
Test(grad, exp) { unary("Exp", -1, 1); }
Test(grad, log) { unary("Log", 0.5f, 2); }
Test(grad, sqrt) { unary("Sqrt", 0.5f, 2); }
Test(grad, erf) { unary("Erf", -1.5f, 1.5f); }
Test(grad, identity) { unary("Identity", -1, 1); }

Test(grad, gelu) {
    AmpModel *m = rt_model(20);
    P(m->graph, "x", -2, 2, 3, 4);
    op(m, "Gelu", "x", "y");
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, "Gelu");
}

/* A value read by three nodes (two of them the same Mul): its gradient is their sum. */
Test(grad, several_readers_summed) {
    AmpModel *m = model();
    P(m->graph, "x", -1, 1, 3, 4);
    op(m, "Mul", "x,x", "sq");
    op(m, "Tanh", "x", "t");
    op(m, "Add", "sq,t", "y");
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, "x*x + tanh(x)");
}

/* ---- data movement ------------------------------------------------------------------------ */

Test(grad, cast) {
    AmpModel *m = model();
    P(m->graph, "x", -1, 1, 3, 4);
    AmpNode *n = op(m, "Cast", "x", "xd");
    attr_i(n, "to", AMP_DT_DOUBLE);
    n = op(m, "Cast", "xd", "y");
    attr_i(n, "to", AMP_DT_FLOAT);
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, "Cast float->double->float");
}

Test(grad, reshape_flatten_squeeze_unsqueeze) {
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    P(g, "x", -1, 1, 2, 1, 3, 2);
    ints_init(g, "shape", 1, (int64_t[]){2}, (int64_t[]){3, 4});
    ints_init(g, "ax1", 1, (int64_t[]){1}, (int64_t[]){1});
    op(m, "Squeeze", "x,ax1", "s");        /* [2,3,2] */
    op(m, "Reshape", "s,shape", "r");      /* [3,4] */
    op(m, "Unsqueeze", "r,ax1", "u");      /* [3,1,4] */
    AmpNode *f = op(m, "Flatten", "u", "y"); /* [3,4] */
    attr_i(f, "axis", 1);
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, "Squeeze Reshape Unsqueeze Flatten");
}

Test(grad, transpose) {
    AmpModel *m = model();
    P(m->graph, "x", -1, 1, 2, 3, 4);
    AmpNode *n = op(m, "Transpose", "x", "y");
    attr_ints(m->graph, n, "perm", 3, (int64_t[]){2, 0, 1});
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, "Transpose perm [2,0,1]");
}

Test(grad, concat) {
    AmpModel *m = model();
    P(m->graph, "a", -1, 1, 2, 1, 4);
    P(m->graph, "b", -1, 1, 2, 3, 4);
    AmpNode *n = op(m, "Concat", "a,b,a", "y");
    attr_i(n, "axis", -2);
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, "Concat axis -2");
}

/* An embedding lookup with a repeated index: its rows' gradients add up. */
Test(grad, gather_embedding_duplicates) {
    AmpModel *m = model();
    P(m->graph, "E", -1, 1, 5, 3);
    ints_init(m->graph, "ids", 2, (int64_t[]){2, 3}, (int64_t[]){1, 4, 1, 0, 1, 3});
    op(m, "Gather", "E,ids", "y");
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, "Gather [5,3] by [2,3] ids");
}

Test(grad, reduce_sum_keepdims0) {
    AmpModel *m = model();
    P(m->graph, "x", -1, 1, 2, 3, 4);
    ints_init(m->graph, "axes", 1, (int64_t[]){1}, (int64_t[]){1});
    AmpNode *n = op(m, "ReduceSum", "x,axes", "y");
    attr_i(n, "keepdims", 0);
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, "ReduceSum axes [1] keepdims 0");
}

Test(grad, reduce_mean_axes_attr) {
    AmpModel *m = model();
    P(m->graph, "x", -1, 1, 2, 3, 4);
    AmpNode *n = op(m, "ReduceMean", "x", "y");
    attr_ints(m->graph, n, "axes", 2, (int64_t[]){0, -1});
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, "ReduceMean axes [0,-1]");
}

/* ---- normalisations and losses ------------------------------------------------------------ */

Test(grad, softmax) {
    AmpModel *m = model();
    P(m->graph, "x", -2, 2, 2, 3, 4);
    AmpNode *n = op(m, "Softmax", "x", "y");
    attr_i(n, "axis", 1);
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, "Softmax axis 1");
}

Test(grad, log_softmax) {
    AmpModel *m = model();
    P(m->graph, "x", -2, 2, 2, 3, 4);
    op(m, "LogSoftmax", "x", "y");
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, "LogSoftmax axis -1");
}

Test(grad, layer_norm) {
    AmpModel *m = model();
    P(m->graph, "x", -2, 2, 2, 3, 4);
    P(m->graph, "scale", 0.5f, 1.5f, 3, 4);
    P(m->graph, "bias", -1, 1, 4);
    AmpNode *n = op(m, "LayerNormalization", "x,scale,bias", "y");
    attr_i(n, "axis", 1);
    out_y(m);
    check(m, AMP_GRAD_LOSS_MSE, "LayerNormalization axis 1");
}

Test(grad, softmax_cross_entropy) {
    AmpModel *m = model();
    P(m->graph, "W", -1, 1, 4, 3);
    P(m->graph, "x", -1, 1, 5, 4);
    op(m, "MatMul", "x,W", "y");
    out_y(m);
    check(m, AMP_GRAD_LOSS_CROSS_ENTROPY, "SoftmaxCrossEntropyLoss");
}

/* ---- what is refused ----------------------------------------------------------------------- */

Test(grad, op_without_rule_on_the_path_names_it) {
    AmpModel *m = model();
    P(m->graph, "x", -1, 1, 3, 4);
    op(m, "Sin", "x", "y");
    out_y(m);
    AmpStatus st = {0};
    AmpGradOptions o = {.loss = AMP_GRAD_LOSS_MSE};
    cr_assert_eq(amp_grad_model(m, &o, NULL, &st), AMP_ERR_UNSUPPORTED);
    cr_assert(strstr(st.msg, "Sin node 'Sin_"), "%s", st.msg);
    amp_model_free(m);
}

/* A frozen parameter, and a branch the loss does not read, get no backward; an op
 * without a rule off the path is no error. */
Test(grad, frozen_and_unused_get_no_backward) {
    AmpModel *m = model();
    P(m->graph, "x", -1, 1, 3, 4);
    P(m->graph, "frozen_w", -1, 1, 4);
    P(m->graph, "other", -1, 1, 3, 4);
    op(m, "Mul", "x,frozen_w", "y");
    op(m, "Sin", "other", "z");
    out_y(m);
    rt_output(m->graph, "z", AMP_DT_FLOAT, NULL);
    AmpStatus st = {0};
    const char *freeze[] = {"frozen_*"};
    AmpGradOptions o = {.loss = AMP_GRAD_LOSS_MSE, .freeze = freeze, .n_freeze = 1};
    AmpGradSummary sum;
    cr_assert_eq(amp_grad_model(m, &o, &sum, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(sum.n_params, 1);
    cr_assert_eq(sum.n_frozen, 1);
    cr_assert_eq(sum.n_unused, 1);
    cr_assert_not_null(amp_graph_lookup(m->graph, "x_grad"));
    cr_assert_null(amp_graph_lookup(m->graph, "frozen_w_grad"));
    cr_assert_null(amp_graph_lookup(m->graph, "other_grad"));
    cr_assert_eq(m->n_training, 1);
    cr_assert_eq(m->training[0].n_update_bindings, 1);
    cr_assert_str_eq(m->training[0].update_bindings[0].key, "x");
    cr_assert_eq(amp_verify_model(m, &st), AMP_OK, "%s", st.msg);
    amp_model_free(m);
}

Test(grad, every_rule_row_names_an_op) {
    cr_assert_geq(amp_grad_rule_count(), 53);
    cr_assert(amp_grad_has_rule(AMP_OP_MatMul));
    cr_assert(amp_grad_has_rule(AMP_OP_LayerNormalization));
    cr_assert(!amp_grad_has_rule(AMP_OP_UNKNOWN));
    cr_assert(amp_grad_has_rule(AMP_OP_Conv));
    cr_assert(!amp_grad_has_rule(AMP_OP_Sin));
}
