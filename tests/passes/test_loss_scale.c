/* The loss-scaling pass (passes/loss_scale.c): what it inserts in a training graph, how
 * the runtime then steps it (an overflow leaves every weight and optimizer state
 * bit-identical and backs the scale off; the scale grows after the growth interval), a
 * property test of the scale update against a direct C implementation of GradScaler's
 * rule over 10,000 random found_inf sequences, static scaling, the defaults per
 * precision, idempotence, gating of an optimizer's outputs in the main graph and 16-bit
 * gradients. The layouts and shapes of training graphs the pass takes or refuses are
 * test_loss_scale_contract.c's. */
#include <math.h>

#include "ir/precision.h"

#include "tests/passes/loss_scale_test_util.h"

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

/* m, converted already by `pipeline`, saved, loaded and converted again: the same bytes
 * (the pass is idempotent, as fuzz_convert checks). Frees m. */
static void converts_to_itself(AmpModel *m, const char *pipeline, const AmpPipelineOptions *o) {
    size_t a_len, b_len;
    uint8_t *x = saved(m, &a_len);
    amp_model_free(m);
    cr_assert_eq(amp_model_load_bytes(x, a_len, NULL, NULL, &m, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(amp_run_pipeline(m, pipeline, o, &st), AMP_OK, "%s", st.msg);
    uint8_t *y = saved(m, &b_len);
    cr_assert(a_len == b_len && memcmp(x, y, a_len) == 0, "a second conversion changed the model");
    free(x), free(y);
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
    cr_assert(amp_model_import_opset(m, "com.example", 1));
    cr_assert_not_null(amp_graph_add_output(a, rt_val(a, "W_new")));
    rt_bindings(m, false, "W=W_new");
    /* As ampc runs it: no inference after the loss scaling. */
    AmpPipelineOptions o = {.verify_each = true};
    const char *pipeline = "infer,amp,loss_scale,cast_cleanup";
    cr_assert_eq(amp_run_pipeline(m, pipeline, &o, &st), AMP_OK, "%s", st.msg);
    const AmpValue *w_new = val_of(m->training[0].algorithm, "W_new");
    cr_assert_eq(w_new->type.kind, AMP_TYPE_TENSOR);
    cr_assert_eq(w_new->type.dtype, AMP_DT_FLOAT, "Where's data type: W's");
    converts_to_itself(m, pipeline, &o);
}

/* Found by fuzz_convert (tests/fuzz/corpus/found_unscaled_gradient_read_in_16_bits.onnx):
 * a Gradient node's gradient made in float16 (every node 16-bit) and read by a 16-bit
 * Identity. Unscaled, the gradient is float32: the Identity read it so and its float16
 * output computed float, and converting the output failed ("declared float16 but computes
 * float"). Its readers now read it cast back to float16, and a second conversion changes
 * nothing. */
Test(loss_scale, a_16_bit_reader_of_an_unscaled_gradient_reads_it_in_16_bits) {
    AmpModel *m = NULL;
    const char *path = AMPC_TEST_DIR "/fuzz/corpus/found_unscaled_gradient_read_in_16_bits.onnx";
    cr_assert_eq(amp_model_load_file(path, NULL, &m, &st), AMP_OK, "%s", st.msg);
    AmpPassOptions po = {.precision = AMP_DT_FLOAT16, .level = AMP_LEVEL_UNSAFE_FORCE_ALL};
    AmpPipelineOptions o = {.verify_each = true, .pass = &po};
    cr_assert_eq(amp_run_pipeline(m, NULL, &o, &st), AMP_OK, "%s", st.msg);
    const AmpValue *g16 = val_of(m->graph, "b_grad_to_16");
    cr_assert(g16 && g16->producer && g16->producer->op == AMP_OP_Cast && g16->type.dtype == AMP_DT_FLOAT16,
              "no float16 cast of the unscaled b_grad");
    converts_to_itself(m, NULL, &o);
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
