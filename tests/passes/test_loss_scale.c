/* The loss-scaling pass (passes/loss_scale.c): what it inserts in a training graph, how
 * the runtime then steps it (an overflow leaves every weight and optimizer state
 * bit-identical and backs the scale off; the scale grows after the growth interval), a
 * property test of the scale update against a direct C implementation of GradScaler's
 * rule over 10,000 random found_inf sequences, static scaling, the defaults per
 * precision, idempotence, gating of an optimizer's outputs in the main graph, and the
 * errors for training graphs that do not fit the contract. */
#include <math.h>

#include "tests/passes/amp_test_util.h"
#include "ir/precision.h"

static AmpStatus st;

/* ---- a tiny training graph ----------------------------------------------------------------
 * x[2] (input), W[2] (parameter), V[2] (optimizer state), lr, seed loss_grad = 1:
 *   p = x * W;  loss = ReduceSum(p)                       (forward, loss)
 *   W_grad = x * loss_grad                                (backward: d loss / d W)
 * algorithm: V_new = V + W_grad;  W_new = W - lr * V_new  (SGD with a momentum-like
 * buffer); update W <- W_new, V <- V_new.
 * A non-finite x makes W_grad non-finite: that is how the tests draw found_inf. */
static AmpModel *tiny(bool algorithm, bool seed_is_input) {
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "2");
    static const int64_t d2[1] = {2};
    const float w[2] = {0.5f, -0.25f}, v[2] = {0, 0};
    rt_init(g, "W", AMP_DT_FLOAT, 1, d2, w);
    if (seed_is_input)
        rt_input(g, "loss_grad", AMP_DT_FLOAT, "");
    else
        rt_scalar_f(g, "loss_grad", 1.0f);
    nd(g, "Mul", "fwd/mul", "x,W", "p");
    AmpNode *r = nd(g, "ReduceSum", "loss/sum", "p", "loss");
    attr_i(r, "keepdims", 0);
    nd(g, "Mul", "bwd/mul", "x,loss_grad", "W_grad");
    rt_output(g, "loss", AMP_DT_FLOAT, "");
    if (!algorithm) {
        rt_output(g, "W_grad", AMP_DT_FLOAT, "2");
        return m;
    }
    rt_init(g, "V", AMP_DT_FLOAT, 1, d2, v);
    rt_scalar_f(g, "lr", 0.125f);
    AmpGraph *a = rt_training(m);
    nd(a, "Add", "opt/v", "V,W_grad", "V_new");
    nd(a, "Mul", "opt/step", "lr,V_new", "W_step");
    nd(a, "Sub", "opt/w", "W,W_step", "W_new");
    rt_output(a, "V_new", AMP_DT_FLOAT, "2");
    rt_output(a, "W_new", AMP_DT_FLOAT, "2");
    rt_bindings(m, false, "W=W_new,V=V_new");
    return m;
}

static AmpCode scale_it(AmpModel *m, const AmpPassOptions *po) {
    amp_status_clear(&st);
    AmpPipelineOptions o = {.verify_each = true, .pass = po};
    return amp_run_pipeline(m, "infer,loss_scale,infer", &o, &st);
}

static void scaled(AmpModel *m, const AmpPassOptions *po) {
    cr_assert_eq(scale_it(m, po), AMP_OK, "%s", st.msg);
}

static const AmpTensor *init_of(const AmpModel *m, const char *name) {
    AmpValue *v = val_of(m->graph, name);
    cr_assert_not_null(v->initializer, "'%s' has no initial value", name);
    return v->initializer;
}

static bool is_input(const AmpGraph *g, const char *name) {
    for (size_t i = 0; i < g->inputs.n; i++)
        if (strcmp(g->inputs.items[i].value->name, name) == 0) return true;
    return false;
}

static bool is_output(const AmpGraph *g, const char *name) {
    for (size_t i = 0; i < g->outputs.n; i++)
        if (strcmp(g->outputs.items[i].value->name, name) == 0) return true;
    return false;
}

static const char *bound_to(const AmpModel *m, const char *key) {
    const char *v = NULL;
    for (size_t i = 0; i < m->n_training; i++)
        for (size_t k = 0; k < m->training[i].n_update_bindings; k++)
            if (strcmp(m->training[i].update_bindings[k].key, key) == 0) v = m->training[i].update_bindings[k].value;
    return v;
}

Test(loss_scale, inserts_the_state_the_check_and_the_bindings) {
    AmpModel *m = tiny(true, false);
    size_t before = m->graph->n_nodes;
    scaled(m, NULL);
    AmpGraph *g = m->graph;
    /* State: graph inputs with initial values (2^16, 0), bound by update_binding. */
    const AmpTensor *s = init_of(m, "amp_loss_scale"), *t = init_of(m, "amp_growth_tracker");
    cr_assert_eq(s->dtype, AMP_DT_FLOAT);
    cr_assert_eq(s->ndims, 0);
    float s0;
    memcpy(&s0, s->raw.data, 4);
    cr_assert_eq(s0, 65536.0f);
    cr_assert_eq(t->dtype, AMP_DT_INT64);
    int64_t t0;
    memcpy(&t0, t->raw.data, 8);
    cr_assert_eq(t0, 0);
    cr_assert(is_input(g, "amp_loss_scale") && is_input(g, "amp_growth_tracker"));
    cr_assert_not_null(bound_to(m, "amp_loss_scale"));
    cr_assert_not_null(bound_to(m, "amp_growth_tracker"));
    /* Outputs: amp_found_inf (bool) and the new scale, for callers with their own optimizer. */
    cr_assert(is_output(g, "amp_found_inf") && is_output(g, "amp_loss_scale_new"));
    cr_assert_eq(dtype(val_of(g, "amp_found_inf")), AMP_DT_BOOL);
    /* The gradient keeps its name, made by the unscale Mul in float32. */
    AmpValue *gw = val_of(g, "W_grad");
    cr_assert_eq(gw->producer->op, AMP_OP_Mul);
    cr_assert_str_eq(gw->producer->name, "amp_loss_scale/unscale/W_grad");
    cr_assert_eq(dtype(gw), AMP_DT_FLOAT);
    /* The seed's reader reads seed x scale. */
    AmpNode *bwd = node_of(m, "bwd/mul");
    cr_assert_str_neq(bwd->inputs[1]->name, "loss_grad");
    cr_assert_str_eq(bwd->inputs[1]->producer->name, "amp_loss_scale/seed");
    /* Both updates gated; everything new is in the group, in standard ONNX ops. */
    AmpValue *wn = val_of(m->training[0].algorithm, "W_new");
    cr_assert_eq(wn->producer->op, AMP_OP_Where);
    cr_assert_eq(val_of(m->training[0].algorithm, "V_new")->producer->op, AMP_OP_Where);
    size_t added = 0;
    for (AmpNode *n = g->first; n; n = n->next) {
        if (amp_node_group(n) < 0) continue;
        added++;
        cr_assert_str_eq(n->domain, "", "%s", n->name);
        cr_assert_neq(n->op, AMP_OP_UNKNOWN, "%s", n->name);
    }
    cr_assert_eq(before + added, g->n_nodes, "every node the pass added is named amp_loss_scale/...");
    amp_model_free(m);
}

/* ---- stepping it in the runtime ------------------------------------------------------------ */

typedef struct Stepper {
    AmpSession *s;
    float x[2];
} Stepper;

static void open_tiny(Stepper *k, const AmpPassOptions *po) {
    AmpModel *m = tiny(true, false);
    scaled(m, po);
    cr_assert_eq(rt_open(m, NULL, &k->s, &st), AMP_OK, "%s", st.msg);
}

/* One training step with x = (a, b); returns amp_found_inf. */
static bool step(Stepper *k, float a, float b) {
    k->x[0] = a, k->x[1] = b;
    static const int64_t d2[1] = {2};
    AmpTensorView in = rt_view("x", AMP_DT_FLOAT, k->x, 1, d2);
    const char *names[1] = {"amp_found_inf"};
    AmpTensorView out[1];
    cr_assert_eq(amp_session_train_step(k->s, &in, 1, names, 1, out, &st), AMP_OK, "%s", st.msg);
    bool found = *(const uint8_t *)out[0].data != 0;
    amp_tensor_view_free(&out[0]);
    return found;
}

static void state_bytes(Stepper *k, const char *name, void *dst, size_t n) {
    AmpTensorView v;
    cr_assert(rt_state_find(k->s, name, &v), "no state '%s'", name);
    memcpy(dst, v.data, n);
}

static float scale_of(Stepper *k) {
    float s;
    state_bytes(k, "amp_loss_scale", &s, sizeof s);
    return s;
}

static int64_t tracker_of(Stepper *k) {
    int64_t t;
    state_bytes(k, "amp_growth_tracker", &t, sizeof t);
    return t;
}

Test(loss_scale, an_overflow_step_changes_no_weight_and_halves_the_scale) {
    Stepper k;
    open_tiny(&k, NULL);
    cr_assert_not(step(&k, 0.5f, 1.0f));
    cr_assert_eq(tracker_of(&k), 1);
    float w[2], v[2], w2[2], v2[2];
    state_bytes(&k, "W", w, sizeof w);
    state_bytes(&k, "V", v, sizeof v);
    /* The clean step's update used the unscaled gradient: V = x, W = W0 - lr * x. */
    cr_assert_eq(v[0], 0.5f);
    cr_assert_eq(v[1], 1.0f);
    cr_assert_eq(w[0], 0.5f - 0.125f * 0.5f);
    cr_assert(step(&k, INFINITY, 1.0f));
    state_bytes(&k, "W", w2, sizeof w2);
    state_bytes(&k, "V", v2, sizeof v2);
    cr_assert_eq(memcmp(w, w2, sizeof w), 0, "weights bit-identical after an overflow");
    cr_assert_eq(memcmp(v, v2, sizeof v), 0, "optimizer state bit-identical after an overflow");
    cr_assert_eq(scale_of(&k), 32768.0f);
    cr_assert_eq(tracker_of(&k), 0);
    cr_assert(step(&k, NAN, 1.0f), "NaN counts too");
    cr_assert_eq(scale_of(&k), 16384.0f);
    amp_session_close(k.s);
}

Test(loss_scale, the_scale_grows_after_the_growth_interval) {
    AmpPassOptions po = {.growth_interval = 3, .loss_scale = 8.0};
    Stepper k;
    open_tiny(&k, &po);
    cr_assert_eq(scale_of(&k), 8.0f);
    for (int i = 1; i <= 2; i++) {
        cr_assert_not(step(&k, 0.5f, 1.0f));
        cr_assert_eq(scale_of(&k), 8.0f);
        cr_assert_eq(tracker_of(&k), i);
    }
    cr_assert_not(step(&k, 0.5f, 1.0f));
    cr_assert_eq(scale_of(&k), 16.0f, "doubled after 3 clean steps");
    cr_assert_eq(tracker_of(&k), 0);
    amp_session_close(k.s);
}

/* torch.amp.GradScaler's update (torch._amp_update_scale_), in float32 as the graph
 * computes it. */
static void gradscaler_update(float *scale, int64_t *tracker, bool found, float growth, float backoff,
                              int64_t interval) {
    if (found) {
        *scale = *scale * backoff;
        *tracker = 0;
        return;
    }
    int64_t t = *tracker + 1;
    if (t == interval) {
        float grown = *scale * growth;
        if (isfinite(grown)) *scale = grown;
        *tracker = 0;
    } else
        *tracker = t;
}

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static uint32_t rnd(void) { /* xorshift64*: deterministic across runs */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 0x2545F4914F6CDD1Dull) >> 32);
}

Test(loss_scale, property_the_graph_updates_the_scale_as_gradscaler_does, .timeout = 600) {
    enum { SEQUENCES = 10000, MAX_LEN = 12, INTERVAL = 3 };
    AmpPassOptions po = {.growth_interval = INTERVAL};
    Stepper k;
    open_tiny(&k, &po);
    /* Start points include the top of float32, where growth must stop short of inf,
     * and tiny scales. */
    static const float starts[] = {65536.0f, 1.0f, 0x1p-100f, 0x1p126f, 0x1p127f, 3.0e38f, 3.0f};
    size_t steps = 0, grew = 0, capped = 0, backed = 0;
    for (int q = 0; q < SEQUENCES; q++) {
        float scale = starts[rnd() % (sizeof starts / sizeof starts[0])];
        int64_t tracker = (int64_t)(rnd() % INTERVAL);
        static const int64_t none[1] = {0};
        AmpTensorView sv = rt_view("amp_loss_scale", AMP_DT_FLOAT, &scale, 0, none);
        AmpTensorView tv = rt_view("amp_growth_tracker", AMP_DT_INT64, &tracker, 0, none);
        cr_assert_eq(amp_session_state_set(k.s, &sv, &st), AMP_OK, "%s", st.msg);
        cr_assert_eq(amp_session_state_set(k.s, &tv, &st), AMP_OK, "%s", st.msg);
        uint32_t p_inf = rnd() % 4; /* 0..3 in 8: sequences from all clean to often overflowing */
        int len = 1 + (int)(rnd() % MAX_LEN);
        for (int i = 0; i < len; i++) {
            bool want_inf = rnd() % 8 < p_inf;
            float before = scale;
            /* x tiny enough that x * scale stays finite for every scale below FLT_MAX. */
            bool found = step(&k, want_inf ? INFINITY : 0x1p-10f, 0x1p-10f);
            cr_assert_eq(found, want_inf, "sequence %d step %d: found_inf", q, i);
            gradscaler_update(&scale, &tracker, want_inf, 2.0f, 0.5f, INTERVAL);
            float got_s = scale_of(&k);
            int64_t got_t = tracker_of(&k);
            cr_assert_eq(memcmp(&got_s, &scale, sizeof scale), 0, "sequence %d step %d: scale %a, want %a", q, i,
                         (double)got_s, (double)scale);
            cr_assert_eq(got_t, tracker, "sequence %d step %d: tracker %lld, want %lld", q, i, (long long)got_t,
                         (long long)tracker);
            grew += scale > before;
            backed += scale < before;
            capped += !want_inf && tracker == 0 && scale == before;
            steps++;
        }
    }
    cr_assert_gt(grew, 100);
    cr_assert_gt(backed, 100);
    cr_assert_gt(capped, 10, "growth past FLT_MAX was refused at least sometimes");
    cr_log_info("%zu steps: %zu growths, %zu backoffs, %zu growths refused at the top", steps, grew, backed, capped);
    amp_session_close(k.s);
}

/* ---- options ------------------------------------------------------------------------------- */

Test(loss_scale, a_static_scale_keeps_the_check_and_skips_the_update) {
    AmpPassOptions po = {.loss_scale_mode = AMP_LOSS_SCALE_STATIC, .loss_scale = 1024.0};
    Stepper k;
    open_tiny(&k, &po);
    float w[2], w2[2];
    cr_assert_not(step(&k, 0.5f, 1.0f));
    state_bytes(&k, "W", w, sizeof w);
    cr_assert(step(&k, INFINITY, 1.0f));
    state_bytes(&k, "W", w2, sizeof w2);
    cr_assert_eq(memcmp(w, w2, sizeof w), 0);
    /* A static scale is a graph input with a value, not state: nothing updates it. */
    AmpTensorView v;
    cr_assert_not(rt_state_find(k.s, "amp_loss_scale", &v));
    cr_assert_not(rt_state_find(k.s, "amp_growth_tracker", &v), "no tracker");
    amp_session_close(k.s);

    AmpModel *m = tiny(true, false);
    scaled(m, &po);
    cr_assert_null(amp_graph_lookup(m->graph, "amp_loss_scale_new"));
    cr_assert(is_output(m->graph, "amp_found_inf"));
    amp_model_free(m);
}

Test(loss_scale, bf16_defaults_to_none_and_none_changes_nothing) {
    AmpPassOptions cases[] = {
        {.precision = AMP_DT_BFLOAT16},
        {.loss_scale_mode = AMP_LOSS_SCALE_NONE},
    };
    for (size_t i = 0; i < 2; i++) {
        AmpModel *m = tiny(true, false);
        size_t a_len, b_len;
        uint8_t *a = saved(m, &a_len);
        scaled(m, &cases[i]);
        uint8_t *b = saved(m, &b_len);
        cr_assert(a_len == b_len && memcmp(a, b, a_len) == 0, "case %zu changed the model", i);
        free(a), free(b);
        amp_model_free(m);
    }
    AmpPassOptions dyn = {.precision = AMP_DT_BFLOAT16, .loss_scale_mode = AMP_LOSS_SCALE_DYNAMIC};
    AmpModel *m = tiny(true, false);
    scaled(m, &dyn);
    cr_assert_not_null(amp_graph_lookup(m->graph, "amp_found_inf"), "asked for explicitly: scaled");
    amp_model_free(m);
}

Test(loss_scale, inference_graphs_pass_through_unchanged) {
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "4,4");
    w44(g, "W");
    nd(g, "MatMul", "mm", "x,W", "loss_like");
    rt_output(g, "loss_like", AMP_DT_FLOAT, "4,4");
    size_t a_len, b_len;
    uint8_t *a = saved(m, &a_len);
    scaled(m, NULL);
    uint8_t *b = saved(m, &b_len);
    cr_assert(a_len == b_len && memcmp(a, b, a_len) == 0);
    free(a), free(b);
    amp_model_free(m);
}

Test(loss_scale, idempotent) {
    AmpModel *m = tiny(true, false);
    scaled(m, NULL);
    size_t a_len, b_len;
    uint8_t *a = saved(m, &a_len);
    scaled(m, NULL);
    uint8_t *b = saved(m, &b_len);
    cr_assert(a_len == b_len && memcmp(a, b, a_len) == 0, "a second run changed the model");
    free(a), free(b);
    amp_model_free(m);
}

/* Found by fuzz_convert: an update made by an op inference does not know, bound to W and
 * declared without a type. The gate Where(found_inf, W, W_new) gives it a type (W's data
 * type), which the output declares at once (before, only converting the output again
 * found it, and so the second conversion changed the model). */
Test(loss_scale, a_gated_update_of_unknown_type_takes_the_gates_type) {
    AmpModel *m = tiny(false, false);
    AmpGraph *a = rt_training(m);
    nd_dom(a, "com.example", "Update", "opt/update", "W,W_grad", "W_new");
    cr_assert_not_null(amp_graph_add_output(a, rt_val(a, "W_new")));
    rt_bindings(m, false, "W=W_new");
    /* As ampc runs it: no inference after the loss scaling. */
    AmpPipelineOptions o = {.verify_each = true};
    const char *pipeline = "infer,amp,loss_scale,cast_cleanup";
    cr_assert_eq(amp_run_pipeline(m, pipeline, &o, &st), AMP_OK, "%s", st.msg);
    const AmpValue *w_new = val_of(m->training[0].algorithm, "W_new");
    cr_assert_eq(w_new->type.kind, AMP_TYPE_TENSOR);
    cr_assert_eq(w_new->type.dtype, AMP_DT_FLOAT, "Where's data type: W's");
    size_t a_len, b_len;
    uint8_t *x = saved(m, &a_len);
    amp_model_free(m);
    cr_assert_eq(amp_model_load_bytes(x, a_len, NULL, NULL, &m, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(amp_run_pipeline(m, pipeline, &o, &st), AMP_OK, "%s", st.msg);
    uint8_t *y = saved(m, &b_len);
    cr_assert(a_len == b_len && memcmp(x, y, a_len) == 0, "a second run changed the model");
    free(x), free(y);
    amp_model_free(m);
}

/* ---- other shapes of training graph ------------------------------------------------------- */

Test(loss_scale, gradients_as_outputs_are_unscaled_and_a_seed_input_is_scaled) {
    AmpModel *m = tiny(false, true);
    scaled(m, NULL);
    cr_assert_eq(m->n_training, 1, "a training_info of its own binds the scale");
    AmpSession *s;
    cr_assert_eq(rt_open(m, NULL, &s, &st), AMP_OK, "%s", st.msg);
    float x[2] = {3.0f, -0.75f}, seed = 1.0f;
    static const int64_t d2[1] = {2};
    AmpTensorView in[2] = {rt_view("x", AMP_DT_FLOAT, x, 1, d2), rt_view("loss_grad", AMP_DT_FLOAT, &seed, 0, NULL)};
    const char *names[2] = {"W_grad", "amp_loss_scale_new"};
    AmpTensorView out[2];
    cr_assert_eq(amp_session_train_step(s, in, 2, names, 2, out, &st), AMP_OK, "%s", st.msg);
    const float *gw = out[0].data;
    cr_assert_eq(gw[0], 3.0f, "unscaled: x * seed");
    cr_assert_eq(gw[1], -0.75f);
    cr_assert_eq(*(const float *)out[1].data, 65536.0f);
    amp_tensor_view_free(&out[0]), amp_tensor_view_free(&out[1]);
    amp_session_close(s);
}

/* Momentum in the main graph, its new values returned as outputs: an overflow returns the
 * old weights and state. */
Test(loss_scale, optimizer_outputs_in_the_main_graph_are_gated) {
    AmpModel *m = tiny(false, false);
    AmpGraph *g = m->graph;
    static const int64_t d2[1] = {2};
    const float zero2[2] = {0, 0};
    rt_init(g, "V", AMP_DT_FLOAT, 1, d2, zero2);
    rt_scalar_f(g, "lr", 0.125f);
    const int64_t t0 = 0;
    rt_init(g, "T", AMP_DT_INT64, 0, NULL, &t0);
    AmpNode *mo = nd_dom(g, "ai.onnx.preview.training", "Momentum", "opt/momentum", "lr,T,W,W_grad,V", "W_new,V_new");
    AmpAttr *a = amp_node_add_attr(mo, "alpha", AMP_ATTR_FLOAT);
    a->f = 0.9f;
    a = amp_node_add_attr(mo, "beta", AMP_ATTR_FLOAT);
    a->f = 1.0f;
    a = amp_node_add_attr(mo, "norm_coefficient", AMP_ATTR_FLOAT);
    a->f = 0.0f;
    AmpAttr *mode = amp_node_add_attr(mo, "mode", AMP_ATTR_STRING);
    mode->s = (AmpBytes){(const uint8_t *)"standard", 8};
    rt_output(g, "W_new", AMP_DT_FLOAT, "2");
    rt_output(g, "V_new", AMP_DT_FLOAT, "2");
    scaled(m, NULL);
    cr_assert_eq(val_of(g, "W_new")->producer->op, AMP_OP_Where);
    cr_assert_eq(val_of(g, "V_new")->producer->op, AMP_OP_Where);
    AmpSession *s;
    cr_assert_eq(rt_open(m, NULL, &s, &st), AMP_OK, "%s", st.msg);
    float x[2] = {INFINITY, 1.0f};
    AmpTensorView in = rt_view("x", AMP_DT_FLOAT, x, 1, d2);
    const char *names[3] = {"W_new", "V_new", "amp_found_inf"};
    AmpTensorView out[3];
    cr_assert_eq(amp_session_train_step(s, &in, 1, names, 3, out, &st), AMP_OK, "%s", st.msg);
    const float *wn = out[0].data, *vn = out[1].data;
    cr_assert(*(const uint8_t *)out[2].data);
    cr_assert_eq(wn[0], 0.5f, "the old weight");
    cr_assert_eq(wn[1], -0.25f);
    cr_assert_eq(vn[0], 0.0f, "the old state");
    for (int i = 0; i < 3; i++) amp_tensor_view_free(&out[i]);
    amp_session_close(s);
}

/* After the amp pass, a 16-bit gradient is cast to float32 before it is unscaled. */
Test(loss_scale, sixteen_bit_gradients_are_unscaled_in_fp32) {
    for (int keep_io = 0; keep_io < 2; keep_io++) {
        /* x[4,4] -> MatMul(W) -> h -> loss = ReduceSum(h); W_grad = x^T @ Expand(seed). */
        AmpModel *m = model();
        AmpGraph *g = m->graph;
        rt_input(g, "x", AMP_DT_FLOAT, "4,4");
        w44(g, "W");
        rt_scalar_f(g, "loss_grad", 1.0f);
        static const int64_t d1[1] = {2};
        const int64_t shape[2] = {4, 4};
        rt_init(g, "shape44", AMP_DT_INT64, 1, d1, shape);
        nd(g, "MatMul", "fwd/mm", "x,W", "h");
        AmpNode *r = nd(g, "ReduceSum", "loss/sum", "h", "loss");
        attr_i(r, "keepdims", 0);
        nd(g, "Expand", "bwd/expand", "loss_grad,shape44", "dh");
        nd(g, "Transpose", "bwd/xt", "x", "xt");
        nd(g, "MatMul", "bwd/mm", "xt,dh", "W_grad");
        rt_output(g, "loss", AMP_DT_FLOAT, "");
        rt_output(g, "W_grad", AMP_DT_FLOAT, "4,4");
        AmpPassOptions po = {.no_keep_io_types = !keep_io};
        AmpPipelineOptions o = {.verify_each = true, .pass = &po};
        amp_status_clear(&st);
        cr_assert_eq(amp_run_pipeline(m, NULL, &o, &st), AMP_OK, "%s", st.msg);
        cr_assert(is16(m, "bwd/mm"), "the backward MatMul is 16-bit");
        AmpValue *gw = val_of(g, "W_grad");
        cr_assert_eq(dtype(gw), AMP_DT_FLOAT, "the gradient output is float32 (keep_io %d)", keep_io);
        AmpNode *mul = gw->producer;
        cr_assert_str_eq(mul->name, "amp_loss_scale/unscale/W_grad");
        cr_assert_eq(dtype(mul->inputs[0]), AMP_DT_FLOAT);
        amp_model_free(m);
    }
}

/* ---- ONNX's own layout: the loss and backward in the algorithm ------------------------------
 * tiny()'s step with the main graph as the inference graph (p = x * W, an output) and the
 * loss, the seed, the backward and the update in training_info's algorithm. With
 * `w_grad_in_main`, W_grad is made in the main graph while the algorithm holds another
 * gradient: the two graphs cannot share one check. */
static void assert_fails(AmpModel *m, const AmpPassOptions *po, AmpCode code, const char *needle);

static AmpModel *tiny_spec(bool w_grad_in_main) {
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "2");
    static const int64_t d2[1] = {2};
    const float w[2] = {0.5f, -0.25f}, v[2] = {0, 0};
    rt_init(g, "W", AMP_DT_FLOAT, 1, d2, w);
    rt_init(g, "U", AMP_DT_FLOAT, 1, d2, w);
    nd(g, "Mul", "fwd/mul", "x,W", "p");
    rt_output(g, "p", AMP_DT_FLOAT, "2");
    if (w_grad_in_main) nd(g, "Mul", "bwd/main", "x,x", "W_grad");
    AmpGraph *a = rt_training(m);
    rt_init(a, "V", AMP_DT_FLOAT, 1, d2, v);
    rt_scalar_f(a, "lr", 0.125f);
    rt_scalar_f(a, "loss_grad", 1.0f);
    AmpNode *r = nd(a, "ReduceSum", "loss/sum", "p", "loss");
    attr_i(r, "keepdims", 0);
    nd(a, "Mul", "bwd/mul", "x,loss_grad", w_grad_in_main ? "U_grad" : "W_grad");
    nd(a, "Add", "opt/v", w_grad_in_main ? "V,U_grad" : "V,W_grad", "V_new");
    nd(a, "Mul", "opt/step", "lr,V_new", "W_step");
    nd(a, "Sub", "opt/w", "W,W_step", "W_new");
    rt_output(a, "loss", AMP_DT_FLOAT, "");
    rt_output(a, "V_new", AMP_DT_FLOAT, "2");
    rt_output(a, "W_new", AMP_DT_FLOAT, "2");
    rt_bindings(m, false, "W=W_new,V=V_new");
    return m;
}

Test(loss_scale, onnx_layout_checks_and_updates_in_the_algorithm) {
    AmpModel *m = tiny_spec(false);
    size_t main_nodes = m->graph->n_nodes;
    scaled(m, NULL);
    AmpGraph *g = m->graph, *a = m->training[0].algorithm;
    /* The main graph gains the scale's state only: its nodes stay the inference graph's. */
    cr_assert_eq(g->n_nodes, main_nodes);
    cr_assert(is_input(g, "amp_loss_scale") && is_input(g, "amp_growth_tracker"));
    cr_assert(!is_output(g, "amp_found_inf"));
    /* The check, the unscaling and the scale's update are the algorithm's. */
    cr_assert(is_output(a, "amp_found_inf") && is_output(a, "amp_loss_scale_new"));
    AmpValue *wg = val_of(a, "W_grad");
    cr_assert_eq(wg->producer->op, AMP_OP_Mul);
    cr_assert_str_eq(wg->producer->inputs[0]->name, "W_grad_scaled");
    cr_assert_eq(val_of(a, "W_new")->producer->op, AMP_OP_Where);
    cr_assert_eq(val_of(a, "V_new")->producer->op, AMP_OP_Where);
    AmpValue *seed_reader = val_of(a, "loss_grad_scaled");
    cr_assert_not_null(seed_reader->producer, "the seed is scaled in the algorithm");
    cr_assert_not_null(bound_to(m, "amp_loss_scale"));
    /* Converting again finds the check and changes nothing. */
    size_t n_alg = a->n_nodes;
    scaled(m, NULL);
    cr_assert_eq(a->n_nodes, n_alg);
    amp_model_free(m);
}

Test(loss_scale, onnx_layout_loss_named_in_the_algorithm) {
    AmpModel *m = tiny_spec(false);
    AmpPassOptions po = {.loss = "loss"};
    scaled(m, &po);
    cr_assert(is_output(m->training[0].algorithm, "amp_found_inf"));
    amp_model_free(m);
}

Test(loss_scale, gradients_in_two_graphs_are_refused) {
    assert_fails(tiny_spec(true), NULL, AMP_ERR_UNSUPPORTED, "are made in different graphs");
}

/* ---- training graphs that do not fit ------------------------------------------------------- */

static void assert_fails(AmpModel *m, const AmpPassOptions *po, AmpCode code, const char *needle) {
    AmpCode rc = scale_it(m, po);
    cr_assert_eq(rc, code, "code %d, want %d ('%s'): %s", rc, code, needle, st.msg);
    cr_assert_not_null(strstr(st.msg, needle), "'%s' not in: %s", needle, st.msg);
    amp_model_free(m);
}

/* x, W, seed, loss = ReduceSum(x * W) and a gradient `grad` = x * seed (not "W_grad"
 * unless grad_name says so), with no update path of its own. */
static AmpModel *bare(const char *seed_name, const char *grad_name) {
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "2");
    static const int64_t d2[1] = {2};
    const float w[2] = {1, 2};
    rt_init(g, "W", AMP_DT_FLOAT, 1, d2, w);
    rt_scalar_f(g, seed_name, 1.0f);
    nd(g, "Mul", "fwd", "x,W", "p");
    AmpNode *r = nd(g, "ReduceSum", "loss/sum", "p", "loss");
    attr_i(r, "keepdims", 0);
    char ins[64];
    snprintf(ins, sizeof ins, "x,%s", seed_name);
    nd(g, "Mul", "bwd", ins, grad_name);
    rt_output(g, "loss", AMP_DT_FLOAT, "");
    return m;
}

Test(loss_scale, a_training_graph_that_does_not_fit_says_which_part_is_missing) {
    /* The seed of 'loss' is loss_grad: absent. */
    AmpModel *m = bare("seed", "W_grad");
    rt_output(m->graph, "W_grad", AMP_DT_FLOAT, "2");
    assert_fails(m, NULL, AMP_ERR_INPUT, "no float backward seed 'loss_grad'");

    /* --loss naming nothing. */
    AmpPassOptions po = {.loss = "nope"};
    assert_fails(tiny(true, false), &po, AMP_ERR_USAGE, "--loss 'nope'");

    /* No gradient named after a parameter (training_info makes it a training graph). */
    m = bare("loss_grad", "dW");
    AmpGraph *a = rt_training(m);
    nd(a, "Sub", "opt", "W,dW", "W_new");
    rt_output(a, "W_new", AMP_DT_FLOAT, "2");
    rt_bindings(m, false, "W=W_new");
    assert_fails(m, NULL, AMP_ERR_INPUT, "no parameter gradient");

    /* Gradients, but nothing takes them: no binding, no optimizer, not an output. */
    po = (AmpPassOptions){.loss = "loss"};
    assert_fails(bare("loss_grad", "W_grad"), &po, AMP_ERR_INPUT, "no update path");

    /* More than one candidate loss and no --loss. */
    m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "2");
    static const int64_t d2[1] = {2};
    const float w[2] = {1, 2};
    rt_init(g, "W", AMP_DT_FLOAT, 1, d2, w);
    nd(g, "Mul", "fwd", "x,W", "p");
    AmpNode *r = nd(g, "ReduceSum", "sum", "p", "loss_a");
    attr_i(r, "keepdims", 0);
    nd(g, "Identity", "copy", "loss_a", "loss_b");
    nd(g, "Mul", "bwd", "x,x", "W_grad");
    rt_output(g, "loss_a", AMP_DT_FLOAT, "");
    rt_output(g, "loss_b", AMP_DT_FLOAT, "");
    rt_output(g, "W_grad", AMP_DT_FLOAT, "2");
    assert_fails(m, NULL, AMP_ERR_INPUT, "more than one scalar float output of the main graph or of a training algorithm has a name containing \"loss\"");

    /* An update that computes another shape than its weight's, though declared as the
     * weight (found by fuzz_convert: the gate Where(found_inf, W, W_new) was made, and the
     * output could not be converted again). */
    m = tiny(true, false);
    AmpGraph *a2 = m->training[0].algorithm;
    AmpNode *sub = find_node(a2, "opt/w");
    static const int64_t d22[2] = {2, 2};
    const float four[4] = {1, 2, 3, 4};
    static const int64_t d1[1] = {1};
    const int64_t zero = 0;
    rt_init(m->graph, "M", AMP_DT_FLOAT, 2, d22, four);
    rt_init(m->graph, "axes0", AMP_DT_INT64, 1, d1, &zero);
    nd(a2, "MatMul", "opt/wide", "W,M", "W_wide");           /* [2] x [2,2] -> [2], then */
    nd(a2, "Unsqueeze", "opt/col", "W_wide,axes0", "W_col"); /* [1,2] */
    amp_node_set_input(sub, 0, val_of(a2, "W_col")); /* W_new = W_col - W_step: [1,2] */
    amp_graph_toposort(a2, &st);
    assert_fails(m, NULL, AMP_ERR_INPUT, "'W_new' replaces 'W' in a training update, but their types or shapes differ");
}

/* onnxruntime training's artifacts: parameters are graph inputs, and gradients reach the
 * outputs through an accumulation ("W_grad.accumulation.out"); the loss is named. */
Test(loss_scale, parameters_as_inputs_and_accumulated_gradients) {
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "2");
    rt_input(g, "W", AMP_DT_FLOAT, "2");
    rt_input(g, "W_grad.accumulation.buffer", AMP_DT_FLOAT, "2");
    rt_scalar_f(g, "loss_grad", 1.0f);
    nd(g, "Mul", "fwd", "x,W", "p");
    AmpNode *r = nd(g, "ReduceSum", "loss/sum", "p", "loss");
    attr_i(r, "keepdims", 0);
    nd(g, "Mul", "bwd", "x,loss_grad", "W_grad");
    nd(g, "Add", "accumulate", "W_grad.accumulation.buffer,W_grad", "W_grad.accumulation.out");
    rt_output(g, "loss", AMP_DT_FLOAT, "");
    rt_output(g, "W_grad.accumulation.out", AMP_DT_FLOAT, "2");
    AmpPassOptions po = {.loss = "loss"};
    scaled(m, &po);
    AmpNode *acc = node_of(m, "accumulate");
    cr_assert_str_eq(acc->inputs[1]->name, "W_grad");
    cr_assert_str_eq(acc->inputs[1]->producer->name, "amp_loss_scale/unscale/W_grad", "accumulates unscaled");
    amp_model_free(m);
}

/* An embedding's training graph as onnxruntime-training writes it: the table E's gradient
 * comes out of com.microsoft GatherGrad (shape, indices, dY).
 *   Y = Gather(E, ids); loss = ReduceSum(Y); Y_grad = Expand(loss_grad, [3,2]);
 *   E_grad = GatherGrad([4,2], ids, Y_grad)    (or an op ampc cannot type: `grad_op`)
 *   E_grad_out = Identity(E_grad), an output (the update path; E_grad itself untyped in
 *   the file, as in onnxruntime's graphs, where it flows into an accumulator). */
static AmpModel *embedding(const char *grad_op) {
    AmpModel *m = model();
    m->opsets[m->n_opsets++] = (AmpOpset){"com.microsoft", 1, true};
    AmpGraph *g = m->graph;
    rt_input(g, "ids", AMP_DT_INT64, "3");
    static const int64_t d42[2] = {4, 2}, d1[1] = {2};
    const float e[8] = {0.5f, -1, 2, 0.25f, 1, 1, -3, 0.125f};
    rt_init(g, "E", AMP_DT_FLOAT, 2, d42, e);
    rt_scalar_f(g, "loss_grad", 1.0f);
    const int64_t yshape[2] = {3, 2}, eshape[2] = {4, 2};
    rt_init(g, "y_shape", AMP_DT_INT64, 1, d1, yshape);
    rt_init(g, "e_shape", AMP_DT_INT64, 1, d1, eshape);
    nd(g, "Gather", "fwd/embed", "E,ids", "Y");
    AmpNode *r = nd(g, "ReduceSum", "loss/sum", "Y", "loss");
    attr_i(r, "keepdims", 0);
    nd(g, "Expand", "bwd/expand", "loss_grad,y_shape", "Y_grad");
    nd_dom(g, "com.microsoft", grad_op, "bwd/embed_grad", "e_shape,ids,Y_grad", "E_grad");
    rt_output(g, "loss", AMP_DT_FLOAT, "");
    nd(g, "Identity", "bwd/out", "E_grad", "E_grad_out");
    rt_output(g, "E_grad_out", AMP_DT_FLOAT, NULL);
    return m;
}

/* GatherGrad is typed (dY's dtype, the shape input's values), so E's gradient is found
 * and unscaled: rows of repeated ids sum, exactly, whatever the scale. */
Test(loss_scale, an_embedding_gradient_from_gather_grad_is_unscaled) {
    AmpModel *m = embedding("GatherGrad");
    scaled(m, NULL);
    cr_assert_eq(m->n_training, 1, "found a training graph (by its backward nodes) and scaled it");
    AmpSession *s;
    cr_assert_eq(rt_open(m, NULL, &s, &st), AMP_OK, "%s", st.msg);
    int64_t ids[3] = {1, 3, 1};
    static const int64_t d3[1] = {3};
    AmpTensorView in[1] = {rt_view("ids", AMP_DT_INT64, ids, 1, d3)};
    const char *names[1] = {"E_grad_out"};
    AmpTensorView out[1];
    cr_assert_eq(amp_session_train_step(s, in, 1, names, 1, out, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(out[0].rank, 2);
    cr_assert_eq(out[0].dims[0], 4);
    const float *gE = out[0].data, want[8] = {0, 0, 2, 2, 0, 0, 1, 1};
    for (int i = 0; i < 8; i++) cr_assert_eq(gE[i], want[i], "element %d: %g, want %g (unscaled)", i, gE[i], want[i]);
    amp_tensor_view_free(&out[0]);
    amp_session_close(s);
}

/* A parameter gradient that nothing can type would stay scaled: the conversion refuses,
 * naming the gradient, its producer and the way out, instead of exiting 0 half-done. */
Test(loss_scale, a_gradient_ampc_cannot_type_fails_the_conversion) {
    assert_fails(embedding("MysteryGrad"), NULL, AMP_ERR_UNSUPPORTED, "gradient 'E_grad' of 'E' has no known type");
    assert_fails(embedding("MysteryGrad"), NULL, AMP_ERR_UNSUPPORTED, "com.microsoft.MysteryGrad");
    assert_fails(embedding("MysteryGrad"), NULL, AMP_ERR_UNSUPPORTED, "--loss-scale none");
}

/* onnxruntime-training's shape: the parameter W and its accumulation buffer are graph
 * inputs, the gradient adds into the buffer through com.microsoft InPlaceAccumulatorV2
 * (no training_info, no `*_grad` output: found by its backward nodes). The value added is
 * gated: a finite step accumulates the unscaled gradient, a step with an inf adds nothing
 * (the buffer stays exactly as it was, or zero on a reset step) and says amp_found_inf. */
Test(loss_scale, accumulated_gradients_are_unscaled_and_gated) {
    AmpModel *m = model();
    m->opsets[m->n_opsets++] = (AmpOpset){"com.microsoft", 1, true};
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "2");
    rt_input(g, "W", AMP_DT_FLOAT, "2");
    rt_input(g, "W_grad.accumulation.buffer", AMP_DT_FLOAT, "2");
    rt_input(g, "lazy_reset_grad", AMP_DT_BOOL, "1");
    rt_scalar_f(g, "loss_grad", 1.0f);
    nd(g, "Mul", "fwd", "x,W", "p");
    AmpNode *r = nd(g, "ReduceSum", "loss/sum", "p", "loss");
    attr_i(r, "keepdims", 0);
    nd(g, "Mul", "bwd", "x,loss_grad", "W_grad");
    nd_dom(g, "com.microsoft", "InPlaceAccumulatorV2", "accumulate",
           "W_grad.accumulation.buffer,W_grad,lazy_reset_grad", "W_grad.accumulation.flag,W_grad.accumulation.out");
    rt_output(g, "loss", AMP_DT_FLOAT, "");
    rt_output(g, "W_grad.accumulation.out", AMP_DT_FLOAT, "2");
    scaled(m, NULL);
    AmpSession *s;
    cr_assert_eq(rt_open(m, NULL, &s, &st), AMP_OK, "%s", st.msg);
    static const int64_t d2[1] = {2}, d1[1] = {1};
    float w[2] = {1, 2}, buf[2] = {10, 20};
    uint8_t reset = 0;
    for (int overflow = 0; overflow < 3; overflow++) {
        reset = overflow == 2; /* a step that resets the buffer and overflows */
        float x[2] = {3.0f, overflow ? INFINITY : -0.5f};
        AmpTensorView in[4] = {rt_view("x", AMP_DT_FLOAT, x, 1, d2), rt_view("W", AMP_DT_FLOAT, w, 1, d2),
                               rt_view("W_grad.accumulation.buffer", AMP_DT_FLOAT, buf, 1, d2),
                               rt_view("lazy_reset_grad", AMP_DT_BOOL, &reset, 1, d1)};
        const char *names[2] = {"W_grad.accumulation.out", "amp_found_inf"};
        AmpTensorView out[2];
        cr_assert_eq(amp_session_train_step(s, in, 4, names, 2, out, &st), AMP_OK, "%s", st.msg);
        const float *acc = out[0].data;
        cr_assert_eq(*(const uint8_t *)out[1].data, overflow != 0, "amp_found_inf");
        if (overflow == 2) {
            cr_assert_eq(acc[0], 0.0f, "a reset step that overflows: no good gradient since the reset");
            cr_assert_eq(acc[1], 0.0f);
        } else if (overflow) {
            cr_assert_eq(acc[0], 10.0f, "a skipped step leaves the buffer as it was");
            cr_assert_eq(acc[1], 20.0f);
        } else {
            cr_assert_eq(acc[0], 13.0f, "buffer + the unscaled gradient x * seed");
            cr_assert_eq(acc[1], 19.5f);
        }
        amp_tensor_view_free(&out[0]), amp_tensor_view_free(&out[1]);
    }
    amp_session_close(s);
}

/* onnxruntime-training's graph with a loss not named like one (an onnxblock loss whose
 * output is "output"): found by its seed "output_grad"; and an accumulator that adds a
 * value that is no parameter's gradient fails the conversion (it would stay scaled). */
static AmpModel *ort_shaped(const char *loss, const char *added) {
    AmpModel *m = model();
    m->opsets[m->n_opsets++] = (AmpOpset){"com.microsoft", 1, true};
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "2");
    rt_input(g, "W", AMP_DT_FLOAT, "2");
    rt_input(g, "W_grad.accumulation.buffer", AMP_DT_FLOAT, "2");
    rt_input(g, "lazy_reset_grad", AMP_DT_BOOL, "1");
    char seed[64], inputs[128];
    snprintf(seed, sizeof seed, "%s_grad", loss);
    rt_scalar_f(g, seed, 1.0f);
    nd(g, "Mul", "fwd", "x,W", "p");
    AmpNode *r = nd(g, "ReduceSum", "loss/sum", "p", loss);
    attr_i(r, "keepdims", 0);
    snprintf(inputs, sizeof inputs, "x,%s", seed);
    nd(g, "Mul", "bwd", inputs, "W_grad");
    nd(g, "Mul", "bwd2", "W_grad,x", "other");
    snprintf(inputs, sizeof inputs, "W_grad.accumulation.buffer,%s,lazy_reset_grad", added);
    nd_dom(g, "com.microsoft", "InPlaceAccumulatorV2", "accumulate", inputs, "W_grad.accumulation.out");
    rt_output(g, loss, AMP_DT_FLOAT, "");
    rt_output(g, "W_grad.accumulation.out", AMP_DT_BOOL, "1");
    return m;
}

Test(loss_scale, the_loss_is_found_by_its_seed) {
    AmpModel *m = ort_shaped("output", "W_grad");
    scaled(m, NULL);
    AmpNode *acc = node_of(m, "accumulate");
    cr_assert_str_eq(acc->inputs[1]->producer->op_type, "Where", "the value added is gated");
    cr_assert_str_eq(acc->inputs[1]->producer->inputs[2]->producer->name, "amp_loss_scale/unscale/W_grad");
    cr_assert_str_eq(val_of(m->graph, "output_grad")->uses[0].node->name, "amp_loss_scale/seed", "the seed is scaled");
    amp_model_free(m);
}

Test(loss_scale, an_accumulated_value_that_is_no_gradient_fails) {
    assert_fails(ort_shaped("loss", "other"), NULL, AMP_ERR_INPUT, "accumulator 'accumulate' adds 'other'");
}

/* loss_scale_state_inputs (`--loss-scale-state inputs`): the scale and tracker are plain
 * graph inputs with no initializer and no update_binding, for runtimes that treat
 * initializers as constants; the caller feeds them and reads the new ones back. */
Test(loss_scale, the_state_as_plain_inputs) {
    AmpModel *m = tiny(false, false);
    AmpPassOptions po = {.loss_scale_state_inputs = true};
    scaled(m, &po);
    cr_assert(is_input(m->graph, "amp_loss_scale") && is_input(m->graph, "amp_growth_tracker"));
    cr_assert_null(amp_graph_lookup(m->graph, "amp_loss_scale")->initializer, "no initializer");
    cr_assert_null(amp_graph_lookup(m->graph, "amp_growth_tracker")->initializer);
    cr_assert_eq(m->n_training, 0, "no update_binding");
    cr_assert(is_output(m->graph, "amp_loss_scale_new") && is_output(m->graph, "amp_growth_tracker_new"));
    AmpSession *s;
    cr_assert_eq(rt_open(m, NULL, &s, &st), AMP_OK, "%s", st.msg);
    float x[2] = {3.0f, -0.75f}, scale = 1024.0f;
    int64_t tracker = 0;
    static const int64_t d2[1] = {2};
    AmpTensorView in[3] = {rt_view("x", AMP_DT_FLOAT, x, 1, d2), rt_view("amp_loss_scale", AMP_DT_FLOAT, &scale, 0, NULL),
                           rt_view("amp_growth_tracker", AMP_DT_INT64, &tracker, 0, NULL)};
    const char *names[3] = {"W_grad", "amp_loss_scale_new", "amp_growth_tracker_new"};
    AmpTensorView out[3];
    cr_assert_eq(amp_session_run(s, in, 3, names, 3, out, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(((const float *)out[0].data)[0], 3.0f, "unscaled with the fed scale");
    cr_assert_eq(*(const float *)out[1].data, 1024.0f, "no growth after one clean step");
    cr_assert_eq(*(const int64_t *)out[2].data, 1, "the tracker counts the clean step");
    for (int i = 0; i < 3; i++) amp_tensor_view_free(&out[i]);
    amp_session_close(s);
}
