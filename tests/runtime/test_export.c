/* amp_session_export (ampc.h): after training steps, the session's model written as its
 * inference model, with the session's current weights: the forward only (the loss, the
 * training_info, the labels input and the optimizer's step counter gone), its output equal
 * bit for bit to the training session's own inference run; --precision's conversion; the
 * refusals (no inference output left, a bad precision). */
#include <criterion/criterion.h>
#include <math.h>
#include <unistd.h>

#include "passes/passes.h"
#include "tests/ir/irtest_util.h"
#include "tests/runtime/rt_util.h"

/* Main: Y = X W (X [2,3], W [3,2]) and, with `loss`, loss = mean((Y - T)^2); the
 * algorithm: W_new = W - 0.1 X^T (Y - T), step_new = step + 1 (step: a main-graph
 * initializer, optimizer state). keep_y: Y is a main-graph output. */
static AmpModel *model(bool keep_y) {
    AmpModel *m = rt_model(17);
    AmpGraph *g = m->graph;
    const int64_t d32[2] = {3, 2};
    const float w[6] = {0.5f, -0.5f, 1.0f, 0.25f, -1.0f, 0.75f};
    const int64_t step0 = 0, one = 1;
    rt_input(g, "X", AMP_DT_FLOAT, "2,3");
    rt_input(g, "T", AMP_DT_FLOAT, "2,2");
    rt_init(g, "W", AMP_DT_FLOAT, 2, d32, w);
    rt_init(g, "step", AMP_DT_INT64, 0, NULL, &step0);
    rt_node(g, "", "MatMul", "X,W", "Y");
    rt_node(g, "", "Sub", "Y,T", "D");
    rt_node(g, "", "Mul", "D,D", "DD");
    amp_node_add_attr(rt_node(g, "", "ReduceMean", "DD", "loss"), "keepdims", AMP_ATTR_INT)->i = 0;
    if (keep_y) rt_output(g, "Y", AMP_DT_FLOAT, "2,2");
    rt_output(g, "loss", AMP_DT_FLOAT, "");

    AmpGraph *a = rt_training(m);
    rt_scalar_f(a, "lr", 0.1f);
    rt_init(a, "one", AMP_DT_INT64, 0, NULL, &one);
    rt_node(a, "", "Transpose", "X", "XT");
    rt_node(a, "", "MatMul", "XT,D", "G");
    rt_node(a, "", "Mul", "G,lr", "S");
    rt_node(a, "", "Sub", "W,S", "W_new");
    rt_node(a, "", "Add", "step,one", "step_new");
    rt_output(a, "W_new", AMP_DT_FLOAT, "3,2");
    rt_output(a, "step_new", AMP_DT_INT64, "");
    rt_bindings(m, false, "W=W_new,step=step_new");
    return m;
}

static float X[6] = {1, 2, 3, -1, 0.5f, 2}, T[4] = {1, 0, 0, 1};

static AmpSession *trained(bool keep_y, int steps) {
    AmpSession *s = NULL;
    AmpStatus st = {0};
    cr_assert_eq(rt_open(model(keep_y), NULL, &s, &st), AMP_OK, "%s", st.msg);
    const int64_t d23[2] = {2, 3}, d22[2] = {2, 2};
    AmpTensorView in[2] = {rt_view("X", AMP_DT_FLOAT, X, 2, d23), rt_view("T", AMP_DT_FLOAT, T, 2, d22)};
    const char *names[1] = {"loss"};
    for (int k = 0; k < steps; k++) {
        AmpTensorView out[1];
        cr_assert_eq(amp_session_train_step(s, in, 2, names, 1, out, &st), AMP_OK, "%s", st.msg);
        amp_tensor_view_free(&out[0]);
    }
    return s;
}

/* Y of session s on X (inputs: X alone, or X and T). */
static void forward(AmpSession *s, bool with_t, float y[4]) {
    const int64_t d23[2] = {2, 3}, d22[2] = {2, 2};
    AmpTensorView in[2] = {rt_view("X", AMP_DT_FLOAT, X, 2, d23), rt_view("T", AMP_DT_FLOAT, T, 2, d22)};
    const char *names[1] = {"Y"};
    AmpTensorView out[1];
    AmpStatus st = {0};
    cr_assert_eq(amp_session_run(s, in, with_t ? 2 : 1, names, 1, out, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(out[0].dtype, AMP_DT_FLOAT);
    memcpy(y, out[0].data, 4 * sizeof *y);
    amp_tensor_view_free(&out[0]);
}

Test(export, forward_with_the_trained_weights) {
    AmpSession *s = trained(true, 3);
    char *dir = tu_mkdtemp();
    char *path = tu_path(dir, "infer.onnx");
    AmpStatus st = {0};
    char line[512];
    AmpExportOptions eo = {.summary = line, .summary_len = sizeof line};
    cr_assert_eq(amp_session_export(s, path, &eo, &st), AMP_OK, "%s", st.msg);
    cr_assert(strstr(line, "1 output (Y)") && strstr(line, "loss loss"), "%s", line);

    AmpModel *m = NULL;
    cr_assert_eq(amp_model_load_file(path, NULL, &m, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(m->n_training, 0);
    cr_assert_eq(m->graph->outputs.n, 1);
    cr_assert_str_eq(m->graph->outputs.items[0].value->name, "Y");
    cr_assert_eq(m->graph->inputs.n, 1, "T, the target, is gone");
    cr_assert_str_eq(m->graph->inputs.items[0].value->name, "X");
    cr_assert_eq(m->graph->n_initializers, 1, "the step counter is gone");
    cr_assert_eq(m->graph->n_nodes, 1);
    /* W is the session's, bit for bit (three steps from the model's). */
    AmpTensorView w;
    cr_assert(rt_state_find(s, "W", &w));
    AmpBytes raw;
    cr_assert_eq(amp_tensor_bytes(m, m->graph->initializers[0], &raw, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(raw.len, 6 * sizeof(float));
    cr_assert_eq(memcmp(raw.data, w.data, raw.len), 0);
    cr_assert_neq(((const float *)raw.data)[0], 0.5f, "trained");
    amp_model_free(m);

    /* Its run is the training session's inference run, bit for bit. */
    float want[4], got[4];
    forward(s, true, want);
    AmpSession *e = NULL;
    cr_assert_eq(amp_session_open(path, NULL, &e, &st), AMP_OK, "%s", st.msg);
    forward(e, false, got);
    cr_assert_eq(memcmp(want, got, sizeof got), 0);
    cr_assert_not(amp_session_has_training_info(e));
    amp_session_close(e);

    amp_session_close(s);
    tu_rmtree(dir);
    free(path);
    free(dir);
}

Test(export, the_scores_when_only_the_loss_is_left_and_refusals) {
    AmpSession *s = trained(false, 1);
    char *dir = tu_mkdtemp();
    char *path = tu_path(dir, "infer.onnx");
    AmpStatus st = {0};
    /* Only the loss is an output, and no loss op reads scores: nothing to infer. */
    cr_assert_eq(amp_session_export(s, path, NULL, &st), AMP_ERR_INPUT);
    cr_assert(strstr(st.msg, "no inference output left"), "%s", st.msg);
    cr_assert_neq(access(path, F_OK), 0, "nothing written");
    AmpExportOptions bad = {.precision = 7};
    st = (AmpStatus){0};
    cr_assert_eq(amp_session_export(s, path, &bad, &st), AMP_ERR_USAGE);
    cr_assert(strstr(st.msg, "precision 7"), "%s", st.msg);
    AmpExportOptions named = {.loss = "nope"};
    st = (AmpStatus){0};
    cr_assert_eq(amp_session_export(s, path, &named, &st), AMP_ERR_USAGE);
    cr_assert(strstr(st.msg, "nope"), "%s", st.msg);
    cr_assert_eq(amp_session_export(NULL, path, NULL, &st), AMP_ERR_USAGE);
    cr_assert_eq(amp_session_export(s, "", NULL, &st), AMP_ERR_USAGE);
    amp_session_close(s);
    tu_rmtree(dir);
    free(path);
    free(dir);
}

Test(export, float16_converts_the_forward) {
    AmpSession *s = trained(true, 2);
    char *dir = tu_mkdtemp();
    char *path = tu_path(dir, "infer16.onnx");
    AmpStatus st = {0};
    AmpExportOptions eo = {.precision = AMP_DT_FLOAT16};
    cr_assert_eq(amp_session_export(s, path, &eo, &st), AMP_OK, "%s", st.msg);
    AmpModel *m = NULL;
    cr_assert_eq(amp_model_load_file(path, NULL, &m, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(m->n_training, 0);
    cr_assert_eq(m->graph->n_initializers, 1);
    cr_assert_eq(m->graph->initializers[0]->dtype, AMP_DT_FLOAT16, "W stored in 16 bits");
    cr_assert_eq(m->graph->outputs.items[0].value->type.dtype, AMP_DT_FLOAT, "float32 at the boundary");
    amp_model_free(m);
    float want[4], got[4];
    forward(s, true, want);
    AmpSession *e = NULL;
    cr_assert_eq(amp_session_open(path, NULL, &e, &st), AMP_OK, "%s", st.msg);
    forward(e, false, got);
    for (int i = 0; i < 4; i++) cr_assert(fabsf(got[i] - want[i]) <= 1e-2f * (1 + fabsf(want[i])), "%d: %g %g", i, got[i], want[i]);
    amp_session_close(e);
    amp_session_close(s);
    tu_rmtree(dir);
    free(path);
    free(dir);
}

/* The pass alone: an inference model passes through as it is. */
Test(export, pass_keeps_an_inference_model) {
    AmpModel *m = rt_model(17);
    AmpGraph *g = m->graph;
    const int64_t d32[2] = {3, 2};
    const float w[6] = {0};
    rt_input(g, "X", AMP_DT_FLOAT, "2,3");
    rt_init(g, "W", AMP_DT_FLOAT, 2, d32, w);
    rt_node(g, "", "MatMul", "X,W", "Y");
    rt_node(g, "", "Relu", "Y", "Z");
    rt_output(g, "Z", AMP_DT_FLOAT, "2,2");
    AmpStatus st = {0};
    AmpExportSummary sum;
    cr_assert_eq(amp_export_model(m, NULL, &sum, &st), AMP_OK, "%s", st.msg);
    cr_assert_not(sum.training);
    cr_assert_eq(sum.nodes_removed + sum.inputs_removed + sum.initializers_removed + sum.outputs_removed, 0);
    cr_assert_eq(m->graph->n_nodes, 2);
    cr_assert_eq(amp_verify_model(m, &st), AMP_OK, "%s", st.msg);
    amp_model_free(m);
}
