/* Training through the session: training_info algorithms read the main graph's values and
 * their update bindings keep weights (and an int64 step counter) resident between steps;
 * the backward-in-the-main-graph form returns gradients for the caller to apply;
 * initialization graphs run once at open; the Momentum optimizer op; checkpoints round-trip
 * bit-exactly and replay the same steps; bad bindings and bad state are errors. */
#include <criterion/criterion.h>
#include <math.h>
#include <unistd.h>

#include "tests/ir/irtest_util.h"
#include "tests/runtime/rt_util.h"


/* Main: loss = mean((X*W - T)^2); the algorithm: W_new = W - lr * (2/3) * D * X with
 * D = X*W - T read from the main graph, and step_new = step + 1. */
static AmpModel *sgd_model(void) {
    AmpModel *m = rt_model(17);
    AmpGraph *g = m->graph;
    const int64_t d3[1] = {3};
    const float w[3] = {0.5f, -0.5f, 1.0f};
    const int64_t step0 = 0, one = 1;
    rt_input(g, "X", AMP_DT_FLOAT, "3");
    rt_input(g, "T", AMP_DT_FLOAT, "3");
    rt_init(g, "W", AMP_DT_FLOAT, 1, d3, w);
    rt_init(g, "step", AMP_DT_INT64, 0, NULL, &step0);
    rt_node(g, "", "Mul", "X,W", "P");
    rt_node(g, "", "Sub", "P,T", "D");
    rt_node(g, "", "Mul", "D,D", "DD");
    amp_node_add_attr(rt_node(g, "", "ReduceMean", "DD", "loss"), "keepdims", AMP_ATTR_INT)->i = 0;
    rt_output(g, "loss", AMP_DT_FLOAT, "");

    AmpGraph *a = rt_training(m);
    rt_input(a, "lr", AMP_DT_FLOAT, "");
    rt_scalar_f(a, "c", 2.0f / 3.0f);
    rt_init(a, "one", AMP_DT_INT64, 0, NULL, &one);
    rt_node(a, "", "Mul", "D,X", "G0");
    rt_node(a, "", "Mul", "G0,c", "G");
    rt_node(a, "", "Mul", "G,lr", "S");
    rt_node(a, "", "Sub", "W,S", "W_new");
    rt_node(a, "", "Add", "step,one", "step_new");
    rt_output(a, "W_new", AMP_DT_FLOAT, "3");
    rt_output(a, "step_new", AMP_DT_INT64, "");
    rt_bindings(m, false, "W=W_new,step=step_new");
    return m;
}

static float X[3] = {1, 2, 3}, T[3] = {1, 1, 1}, LR = 0.1f;

static void step_inputs(AmpTensorView in[3]) {
    const int64_t d3[1] = {3};
    in[0] = rt_view("X", AMP_DT_FLOAT, X, 1, d3);
    in[1] = rt_view("T", AMP_DT_FLOAT, T, 1, d3);
    in[2] = rt_view("lr", AMP_DT_FLOAT, &LR, 0, NULL);
}

static AmpSession *open_sgd(void) {
    AmpSession *s = NULL;
    AmpStatus st = {0};
    cr_assert_eq(rt_open(sgd_model(), NULL, &s, &st), AMP_OK, "%s", st.msg);
    return s;
}

static float train(AmpSession *s) {
    AmpTensorView in[3], out[1];
    step_inputs(in);
    const char *names[1] = {"loss"};
    AmpStatus st = {0};
    cr_assert_eq(amp_session_train_step(s, in, 3, names, 1, out, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(out[0].rank, 0);
    float l = *(float *)out[0].data;
    amp_tensor_view_free(&out[0]);
    return l;
}

static const float *state_f(AmpSession *s, const char *name) {
    AmpTensorView v;
    cr_assert(rt_state_find(s, name, &v), "no state %s", name);
    return v.data;
}

Test(train, update_bindings_keep_weights_resident) {
    AmpSession *s = open_sgd();
    cr_assert(amp_session_has_training_info(s));
    cr_assert_eq(amp_session_state_count(s), 2);
    cr_assert_eq(amp_session_input_count(s, AMP_MODE_RUN), 2, "lr is the algorithm's input only");
    cr_assert_eq(amp_session_input_count(s, AMP_MODE_TRAIN), 3);
    cr_assert_eq(amp_session_output_count(s, AMP_MODE_TRAIN), 3); /* loss, W_new, step_new */

    /* Expected first step, in float like the kernels. */
    float w[3] = {0.5f, -0.5f, 1.0f}, d[3], loss0 = 0;
    for (int i = 0; i < 3; i++) d[i] = X[i] * w[i] - T[i], loss0 += d[i] * d[i];
    loss0 /= 3;
    float l1 = train(s);
    cr_assert_float_eq(l1, loss0, 1e-6);
    const float *W = state_f(s, "W");
    for (int i = 0; i < 3; i++) cr_assert_float_eq(W[i], w[i] - LR * (d[i] * X[i] * (2.0f / 3.0f)), 1e-6, "W[%d]", i);
    float prev = l1;
    for (int k = 0; k < 5; k++) {
        float l = train(s);
        cr_assert_lt(l, prev, "step %d: loss %g did not fall below %g", k + 2, l, prev);
        prev = l;
    }
    AmpTensorView v;
    cr_assert(amp_session_state_at(s, 1, &v));
    cr_assert_str_eq(v.name, "step");
    cr_assert_eq(*(int64_t *)v.data, 6, "the int64 counter is state too");
    AmpSessionStats stats;
    amp_session_stats(s, &stats);
    cr_assert_eq(stats.steps, 6);
    cr_assert_eq(stats.state_bytes, 3 * 4 + 8);

    /* Inference sees the trained weights; the algorithm's input is not an input there. */
    AmpTensorView in[3], out[1];
    step_inputs(in);
    AmpStatus st = {0};
    cr_assert_eq(amp_session_run(s, in, 3, NULL, 1, out, &st), AMP_ERR_USAGE);
    cr_assert_not_null(strstr(st.msg, "'lr'"), "%s", st.msg);
    amp_status_clear(&st);
    cr_assert_eq(amp_session_run(s, in, 2, NULL, 1, out, &st), AMP_OK, "%s", st.msg);
    float lr_run = *(float *)out[0].data;
    amp_tensor_view_free(&out[0]);
    cr_assert_lt(lr_run, prev);
    float next = train(s);
    cr_assert_float_eq(lr_run, next, 0, "run and the next step see the same weights: %a vs %a", lr_run, next);
    amp_session_close(s);
}

Test(train, missing_algorithm_input_is_a_usage_error) {
    AmpSession *s = open_sgd();
    AmpTensorView in[3], out[3];
    step_inputs(in);
    AmpStatus st = {0};
    cr_assert_eq(amp_session_train_step(s, in, 2, NULL, 3, out, &st), AMP_ERR_USAGE);
    cr_assert_not_null(strstr(st.msg, "'lr'"), "%s", st.msg);
    AmpSessionStats stats;
    amp_session_stats(s, &stats);
    cr_assert_eq(stats.steps, 0);
    amp_session_close(s);
}

/* ---- checkpoints ------------------------------------------------------------------------ */

typedef struct Snapshot {
    float w[3];
    int64_t step;
} Snapshot;

static Snapshot snap(AmpSession *s) {
    Snapshot n;
    memset(&n, 0, sizeof n); /* padding too: snapshots are compared with memcmp */
    AmpTensorView v;
    cr_assert(amp_session_state_at(s, 0, &v));
    memcpy(n.w, v.data, sizeof n.w);
    cr_assert(amp_session_state_at(s, 1, &v));
    memcpy(&n.step, v.data, sizeof n.step);
    return n;
}

Test(train, checkpoint_round_trip_is_bit_exact) {
    AmpSession *s = open_sgd();
    char *dir = tu_mkdtemp();
    char *path = tu_path(dir, "ck.onnx");
    AmpStatus st = {0};
    train(s);
    train(s);
    Snapshot saved = snap(s);
    cr_assert_eq(amp_session_state_save(s, path, &st), AMP_OK, "%s", st.msg);
    float later[3];
    for (int k = 0; k < 3; k++) later[k] = train(s);
    Snapshot after = snap(s);

    /* Modify, then load: the saved state comes back bit for bit. */
    float junk[3] = {NAN, 1e30f, -0.0f};
    const int64_t d3[1] = {3};
    AmpTensorView jv = rt_view("W", AMP_DT_FLOAT, junk, 1, d3);
    cr_assert_eq(amp_session_state_set(s, &jv, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(amp_session_state_load(s, path, &st), AMP_OK, "%s", st.msg);
    Snapshot back = snap(s);
    cr_assert_eq(memcmp(&back, &saved, sizeof back), 0, "state differs after load");
    AmpSessionStats stats;
    amp_session_stats(s, &stats);
    cr_assert_eq(stats.steps, 2, "the step counter comes back");
    /* The same steps again, bit for bit. */
    for (int k = 0; k < 3; k++) {
        float l = train(s);
        cr_assert_eq(memcmp(&l, &later[k], sizeof l), 0, "step %d: %a vs %a", k, l, later[k]);
    }
    Snapshot again = snap(s);
    cr_assert_eq(memcmp(&again, &after, sizeof again), 0);

    /* It is an ONNX model whose initializers are the state. */
    AmpModel *ck = NULL;
    cr_assert_eq(amp_model_load_file(path, NULL, &ck, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(ck->graph->n_initializers, 2);
    cr_assert_str_eq(ck->graph->initializers[0]->name, "W");
    cr_assert_eq(ck->graph->initializers[1]->dtype, AMP_DT_INT64);
    amp_model_free(ck);

    /* A fresh session of the same model takes it too. */
    AmpSession *t = open_sgd();
    cr_assert_eq(amp_session_state_load(t, path, &st), AMP_OK, "%s", st.msg);
    Snapshot fresh = snap(t);
    cr_assert_eq(memcmp(&fresh, &saved, sizeof fresh), 0);
    amp_session_close(t);

    amp_session_close(s);
    tu_rmtree(dir);
    free(path);
    free(dir);
}

Test(train, checkpoint_errors_leave_the_state_alone) {
    AmpSession *s = open_sgd();
    char *dir = tu_mkdtemp();
    char *path = tu_path(dir, "other.onnx");
    AmpStatus st = {0};
    train(s);
    Snapshot before = snap(s);
    /* A checkpoint of another model: only W, and with another shape. */
    AmpModel *m = rt_model(17);
    const int64_t d2[1] = {2};
    const float w[2] = {1, 2};
    rt_init(m->graph, "W", AMP_DT_FLOAT, 1, d2, w);
    m->metadata = amp_arena_calloc(&m->arena, 3, sizeof *m->metadata);
    m->metadata[0] = (AmpStrPair){"ampc.checkpoint", "1"};
    m->metadata[1] = (AmpStrPair){"ampc.steps", "4"};
    m->metadata[2] = (AmpStrPair){"ampc.rng", "0123"};
    m->n_metadata = 3;
    rt_save(m, path);
    cr_assert_eq(amp_session_state_load(s, path, &st), AMP_ERR_INPUT);
    cr_assert_not_null(strstr(st.msg, "'W'"), "%s", st.msg);
    Snapshot now = snap(s);
    cr_assert_eq(memcmp(&now, &before, sizeof now), 0);
    /* Not a checkpoint at all. */
    amp_status_clear(&st);
    cr_assert_eq(amp_session_state_load(s, AMPC_TESTDATA "/node/test_add/model.onnx", &st), AMP_ERR_INPUT);
    amp_status_clear(&st);
    cr_assert_eq(amp_session_state_load(s, "/nonexistent.onnx", &st), AMP_ERR_INPUT);
    /* state_set checks names and shapes. */
    float x[2] = {0};
    AmpTensorView bad = rt_view("W", AMP_DT_FLOAT, x, 1, d2), nobody = rt_view("Q", AMP_DT_FLOAT, x, 1, d2);
    amp_status_clear(&st);
    cr_assert_eq(amp_session_state_set(s, &bad, &st), AMP_ERR_USAGE);
    cr_assert_not_null(strstr(st.msg, "'W'"), "%s", st.msg);
    amp_status_clear(&st);
    cr_assert_eq(amp_session_state_set(s, &nobody, &st), AMP_ERR_USAGE);
    cr_assert_not_null(strstr(st.msg, "'Q'"), "%s", st.msg);
    amp_session_close(s);
    tu_rmtree(dir);
    free(path);
    free(dir);
}

/* The checkpoint's numbers are plain digits that fit 64 bits: strtoull took a sign (and
 * negated), leading blanks, and saturated on overflow. */
Test(train, checkpoint_numbers_must_be_plain_and_fit) {
    AmpSession *s = open_sgd();
    char *dir = tu_mkdtemp();
    char *good = tu_path(dir, "good.onnx"), *path = tu_path(dir, "bad.onnx");
    AmpStatus st = {0};
    train(s);
    cr_assert_eq(amp_session_state_save(s, good, &st), AMP_OK, "%s", st.msg);
    train(s);
    Snapshot before = snap(s);
    static const struct {
        const char *key, *value;
    } bad[] = {
        {"ampc.steps", "-1"},       {"ampc.steps", "+4"},
        {"ampc.steps", " 4"},       {"ampc.steps", "18446744073709551616"},
        {"ampc.steps", "99999999999999999999999"}, {"ampc.rng", "-1"},
        {"ampc.rng", "0x12"},       {"ampc.rng", "10000000000000000"},
        {"ampc.rng", " ff"},        {"ampc.steps", ""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        AmpModel *ck = NULL;
        cr_assert_eq(amp_model_load_file(good, NULL, &ck, &st), AMP_OK, "%s", st.msg);
        bool set = false;
        for (size_t k = 0; k < ck->n_metadata; k++)
            if (strcmp(ck->metadata[k].key, bad[i].key) == 0) ck->metadata[k].value = bad[i].value, set = true;
        cr_assert(set);
        rt_save(ck, path); /* frees ck */
        amp_status_clear(&st);
        cr_assert_eq(amp_session_state_load(s, path, &st), AMP_ERR_INPUT, "%s '%s' was taken", bad[i].key,
                     bad[i].value);
        cr_assert_not_null(strstr(st.msg, bad[i].key), "%s", st.msg);
        Snapshot now = snap(s);
        cr_assert_eq(memcmp(&now, &before, sizeof now), 0);
    }
    /* The largest values are fine. */
    AmpModel *ck = NULL;
    cr_assert_eq(amp_model_load_file(good, NULL, &ck, &st), AMP_OK, "%s", st.msg);
    for (size_t k = 0; k < ck->n_metadata; k++) {
        if (strcmp(ck->metadata[k].key, "ampc.steps") == 0) ck->metadata[k].value = "18446744073709551615";
        if (strcmp(ck->metadata[k].key, "ampc.rng") == 0) ck->metadata[k].value = "FFFFffffFFFFffff";
    }
    rt_save(ck, path);
    cr_assert_eq(amp_session_state_load(s, path, &st), AMP_OK, "%s", st.msg);
    AmpSessionStats stats;
    amp_session_stats(s, &stats);
    cr_assert_eq(stats.steps, UINT64_MAX);
    amp_session_close(s);
    tu_rmtree(dir);
    free(good);
    free(path);
    free(dir);
}

/* ---- the other forms ---------------------------------------------------------------------- */

/* Backward inside the main graph: loss and W_grad are outputs; the caller applies them. */
Test(train, backward_in_the_main_graph_returns_gradients) {
    AmpModel *m = rt_model(17);
    AmpGraph *g = m->graph;
    const int64_t d3[1] = {3};
    const float w[3] = {0.5f, -0.5f, 1.0f};
    rt_input(g, "X", AMP_DT_FLOAT, "3");
    rt_input(g, "T", AMP_DT_FLOAT, "3");
    rt_init(g, "W", AMP_DT_FLOAT, 1, d3, w);
    rt_scalar_f(g, "c", 2.0f / 3.0f);
    rt_node(g, "", "Mul", "X,W", "P");
    rt_node(g, "", "Sub", "P,T", "D");
    rt_node(g, "", "Mul", "D,D", "DD");
    amp_node_add_attr(rt_node(g, "", "ReduceMean", "DD", "loss"), "keepdims", AMP_ATTR_INT)->i = 0;
    rt_node(g, "", "Mul", "D,X", "G0");
    rt_node(g, "", "Mul", "G0,c", "W_grad");
    rt_output(g, "loss", AMP_DT_FLOAT, "");
    rt_output(g, "W_grad", AMP_DT_FLOAT, "3");
    AmpSession *s = NULL;
    AmpStatus st = {0};
    cr_assert_eq(rt_open(m, NULL, &s, &st), AMP_OK, "%s", st.msg);
    cr_assert_not(amp_session_has_training_info(s));
    cr_assert_eq(amp_session_state_count(s), 2, "every initializer is state");
    AmpTensorView in[3];
    step_inputs(in);
    float prev = INFINITY;
    for (int k = 0; k < 4; k++) {
        AmpTensorView out[2];
        cr_assert_eq(amp_session_train_step(s, in, 2, NULL, 2, out, &st), AMP_OK, "%s", st.msg);
        float l = *(float *)out[0].data;
        cr_assert_lt(l, prev);
        prev = l;
        const float *grad = out[1].data, *W = state_f(s, "W");
        float nw[3];
        for (int i = 0; i < 3; i++) nw[i] = W[i] - LR * grad[i];
        AmpTensorView upd = rt_view("W", AMP_DT_FLOAT, nw, 1, d3);
        cr_assert_eq(amp_session_state_set(s, &upd, &st), AMP_OK, "%s", st.msg);
        amp_tensor_view_free(&out[0]);
        amp_tensor_view_free(&out[1]);
    }
    amp_session_close(s);
}

Test(train, initialization_graph_runs_once_at_open) {
    AmpModel *m = sgd_model();
    AmpGraph *init = amp_graph_new(m, m->graph);
    init->name = "init";
    m->training[0].initialization = init;
    const int64_t d3[1] = {3};
    const float w0[3] = {4, 5, 6};
    rt_init(init, "W0", AMP_DT_FLOAT, 1, d3, w0);
    rt_node(init, "", "Identity", "W0", "W_init");
    rt_output(init, "W_init", AMP_DT_FLOAT, "3");
    rt_bindings(m, true, "W=W_init");
    AmpSession *s = NULL;
    AmpStatus st = {0};
    cr_assert_eq(rt_open(m, NULL, &s, &st), AMP_OK, "%s", st.msg);
    const float *W = state_f(s, "W");
    for (int i = 0; i < 3; i++) cr_assert_float_eq(W[i], w0[i], 0);
    float d = X[0] * 4 - T[0], d1 = X[1] * 5 - T[1], d2 = X[2] * 6 - T[2];
    cr_assert_float_eq(train(s), (d * d + d1 * d1 + d2 * d2) / 3, 1e-4, "the first step trains from W0");
    amp_session_close(s);
}

Test(train, momentum_optimizer_state_is_bound_too) {
    AmpModel *m = sgd_model();
    AmpGraph *a = m->training[0].algorithm;
    /* Replace the plain update by Momentum(R, T, W, G, V) -> W_new2, V_new. */
    const int64_t d3[1] = {3};
    const float v0[3] = {0, 0, 0};
    rt_init(m->graph, "V", AMP_DT_FLOAT, 1, d3, v0);
    rt_node(a, "ai.onnx.preview.training", "Momentum", "lr,step,W,G,V", "W_mom,V_new");
    AmpNode *n = a->last;
    amp_node_add_attr(n, "alpha", AMP_ATTR_FLOAT)->f = 0.9f;
    amp_node_add_attr(n, "beta", AMP_ATTR_FLOAT)->f = 1.0f;
    amp_node_add_attr(n, "norm_coefficient", AMP_ATTR_FLOAT)->f = 0.0f;
    AmpAttr *mode = amp_node_add_attr(n, "mode", AMP_ATTR_STRING);
    mode->s.data = (const uint8_t *)"standard";
    mode->s.len = 8;
    rt_output(a, "W_mom", AMP_DT_FLOAT, "3");
    rt_output(a, "V_new", AMP_DT_FLOAT, "3");
    rt_bindings(m, false, "W=W_mom,V=V_new,step=step_new");
    AmpSession *s = NULL;
    AmpStatus st = {0};
    cr_assert_eq(rt_open(m, NULL, &s, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(amp_session_state_count(s), 3);
    float l1 = train(s), l2 = train(s), l3 = train(s);
    cr_assert(l2 < l1 && l3 < l2, "losses %g %g %g", l1, l2, l3);
    const float *V = state_f(s, "V");
    cr_assert(V[0] != 0 || V[1] != 0 || V[2] != 0, "the momentum buffer stayed zero");
    amp_session_close(s);
}

/* An update the model declares of another dtype than its variable is refused at open, by
 * the verifier (issue 43, item 8: `ampc verify` passed it, `run` refused it). */
Test(train, update_binding_declared_of_another_dtype_is_refused_at_open) {
    AmpModel *m = sgd_model();
    AmpGraph *a = m->training[0].algorithm;
    amp_node_add_attr(rt_node(a, "", "Cast", "W_new", "W_double"), "to", AMP_ATTR_INT)->i = AMP_DT_DOUBLE;
    rt_output(a, "W_double", AMP_DT_DOUBLE, "3");
    rt_bindings(m, false, "W=W_double,step=step_new");
    AmpSession *s = NULL;
    AmpStatus st = {0};
    cr_assert_eq(rt_open(m, NULL, &s, &st), AMP_ERR_INPUT, "%s", st.msg);
    cr_assert_not_null(strstr(st.msg, "update_binding 'W' -> 'W_double': 'W_double' is double"), "%s", st.msg);
    cr_assert_null(s);
}

/* ... and one it does not declare (its type known only once it runs) at the step, which
 * changes no state. */
Test(train, update_binding_of_another_dtype_is_an_error) {
    AmpModel *m = sgd_model();
    AmpGraph *a = m->training[0].algorithm;
    amp_node_add_attr(rt_node(a, "", "Cast", "W_new", "W_double"), "to", AMP_ATTR_INT)->i = AMP_DT_DOUBLE;
    rt_output(a, "W_double", AMP_DT_UNDEFINED, NULL);
    rt_bindings(m, false, "W=W_double,step=step_new");
    AmpSession *s = NULL;
    AmpStatus st = {0};
    cr_assert_eq(rt_open(m, NULL, &s, &st), AMP_OK, "%s", st.msg);
    AmpTensorView in[3], out[4];
    step_inputs(in);
    cr_assert_eq(amp_session_train_step(s, in, 3, NULL, 4, out, &st), AMP_ERR_INPUT);
    cr_assert_not_null(strstr(st.msg, "W_double"), "%s", st.msg);
    cr_assert_not_null(strstr(st.msg, "double"), "%s", st.msg);
    const float *W = state_f(s, "W");
    cr_assert_float_eq(W[0], 0.5f, 0, "a failed step changes no state");
    AmpTensorView step;
    cr_assert(amp_session_state_at(s, 1, &step));
    cr_assert_eq(*(int64_t *)step.data, 0);
    amp_session_close(s);
}

/* Dropout draws from the session's random state: a checkpoint restores it, so the masks of
 * the steps after a load are the masks of the steps after the save. */
Test(train, checkpoint_restores_the_random_state) {
    AmpModel *m = rt_model(17);
    AmpGraph *g = m->graph;
    const int64_t d[1] = {64};
    float w[64];
    for (int i = 0; i < 64; i++) w[i] = (float)i;
    rt_init(g, "W", AMP_DT_FLOAT, 1, d, w);
    rt_input(g, "X", AMP_DT_FLOAT, "64");
    rt_node(g, "", "Mul", "X,W", "P");
    rt_node(g, "", "Dropout", "P", "PD");
    amp_node_add_attr(rt_node(g, "", "ReduceSum", "PD", "loss"), "keepdims", AMP_ATTR_INT)->i = 0;
    rt_output(g, "loss", AMP_DT_FLOAT, "");
    AmpSession *s = NULL;
    AmpStatus st = {0};
    AmpSessionOptions o = {.seed = 42};
    cr_assert_eq(rt_open(m, &o, &s, &st), AMP_OK, "%s", st.msg);
    float x[64];
    for (int i = 0; i < 64; i++) x[i] = 1;
    AmpTensorView in = rt_view("X", AMP_DT_FLOAT, x, 1, d), out;
    char *dir = tu_mkdtemp();
    char *path = tu_path(dir, "ck.onnx");
    float first[4], again[4];
    cr_assert_eq(amp_session_train_step(s, &in, 1, NULL, 1, &out, &st), AMP_OK, "%s", st.msg);
    amp_tensor_view_free(&out);
    cr_assert_eq(amp_session_state_save(s, path, &st), AMP_OK, "%s", st.msg);
    for (int pass = 0; pass < 2; pass++) {
        float *dst = pass ? again : first;
        for (int k = 0; k < 4; k++) {
            cr_assert_eq(amp_session_train_step(s, &in, 1, NULL, 1, &out, &st), AMP_OK, "%s", st.msg);
            dst[k] = *(float *)out.data;
            amp_tensor_view_free(&out);
        }
        if (!pass) cr_assert_eq(amp_session_state_load(s, path, &st), AMP_OK, "%s", st.msg);
    }
    cr_assert_eq(memcmp(first, again, sizeof first), 0, "other masks after the load");
    cr_assert(first[0] != first[1] || first[1] != first[2], "the masks never changed");
    /* Inference draws nothing: every element counts. */
    cr_assert_eq(amp_session_run(s, &in, 1, NULL, 1, &out, &st), AMP_OK, "%s", st.msg);
    cr_assert_float_eq(*(float *)out.data, 63 * 64 / 2, 0);
    amp_tensor_view_free(&out);
    amp_session_close(s);
    tu_rmtree(dir);
    free(path);
    free(dir);
}
