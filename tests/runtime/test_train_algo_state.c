/* Optimizer state kept in the training algorithm's own initializers, as ONNX's
 * TrainingInfoProto allows ("update_binding" keys name initializers of the main graph or
 * of the algorithm): models/mlp_train with its four momentum buffers and its step count
 * moved from the main graph into the algorithm graph verifies, trains to the same losses
 * and state, bit for bit, as the original (the algorithm reads each step's current value,
 * not its initializer), checkpoints and resumes bit-exactly, survives save/load and the
 * default AMP pipeline, and is gated by loss scaling (a step with an inf gradient leaves
 * it as it was). An initialization_binding may reset such state (the spec's use case). */
#include <criterion/criterion.h>
#include <math.h>

#include "tests/ir/irtest_util.h"
#include "passes/passes.h"
#include "tests/runtime/rt_util.h"

#define MLP_TRAIN AMPC_TEST_DIR "/../models/mlp_train/model.onnx"
enum { BATCH = 8, N_IN = 16, N_CLASS = 4, N_STEPS = 5 };

static const char *const MOVED[] = {"W1_momentum", "b1_momentum", "W2_momentum", "b2_momentum", "step"};
enum { N_MOVED = sizeof MOVED / sizeof *MOVED };

static AmpModel *load_mlp(void) {
    AmpModel *m = NULL;
    AmpStatus st = {0};
    cr_assert_eq(amp_model_load_file(MLP_TRAIN, NULL, &m, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(m->n_training, 1);
    return m;
}

/* Main-graph initializer `name` becomes an initializer of the algorithm graph: same
 * tensor, same name; the algorithm's nodes read the new value (the main graph never read
 * it). The main graph's value is left without a definition or a use, so a save drops it. */
static void move_to_algorithm(AmpModel *m, const char *name) {
    AmpGraph *g = m->graph, *a = m->training[0].algorithm;
    AmpValue *mv = amp_graph_lookup(g, name);
    cr_assert(mv && mv->graph == g && mv->initializer, "'%s' is no main-graph initializer", name);
    AmpTensor *t = mv->initializer;
    size_t k = 0;
    for (size_t i = 0; i < g->n_initializers; i++)
        if (g->initializers[i] != t) g->initializers[k++] = g->initializers[i];
    cr_assert_eq(k + 1, g->n_initializers);
    g->n_initializers = k;
    mv->initializer = NULL;
    mv->flags &= ~(unsigned)AMP_VALUE_INITIALIZER;
    AmpValue *av = amp_graph_value(a, name);
    cr_assert(av && av != mv);
    av->type = mv->type;
    cr_assert_eq(amp_graph_add_initializer(a, av, t), AMP_OK);
    while (mv->n_uses) {
        AmpNode *n = mv->uses[0].node;
        cr_assert_eq(n->graph, a, "the main graph reads '%s'", name);
        cr_assert_eq(amp_node_set_input(n, mv->uses[0].slot, av), AMP_OK);
    }
}

/* Serialises m (freeing it) and loads the bytes back: a model as a file would give it. */
static AmpModel *round_trip(AmpModel *m) {
    uint8_t *bytes = NULL;
    size_t len = 0;
    AmpStatus st = {0};
    cr_assert_eq(amp_model_save_bytes(m, &bytes, &len, &st), AMP_OK, "%s", st.msg);
    amp_model_free(m);
    AmpModel *back = NULL;
    cr_assert_eq(amp_model_load_bytes(bytes, len, NULL, NULL, &back, &st), AMP_OK, "%s", st.msg);
    free(bytes);
    return back;
}

/* mlp_train with the momentum buffers and the step count in the algorithm graph. */
static AmpModel *algo_state_mlp(void) {
    AmpModel *m = load_mlp();
    for (int i = 0; i < N_MOVED; i++) move_to_algorithm(m, MOVED[i]);
    return round_trip(m);
}

static void verify_ok(AmpModel *m) {
    AmpStatus st = {0};
    cr_assert_eq(amp_verify_model(m, &st), AMP_OK, "%s", st.msg);
}

static void verify_fails(AmpModel *m, const char *needle) {
    AmpStatus st = {0};
    cr_assert_eq(amp_verify_model(m, &st), AMP_ERR_INPUT, "the verifier took it");
    cr_assert_not_null(strstr(st.msg, needle), "message '%s' lacks '%s'", st.msg, needle);
}

/* ---- stepping ---------------------------------------------------------------------------- */

typedef struct Batch {
    float x[BATCH * N_IN];
    int64_t labels[BATCH];
} Batch;

static void batch_fill(Batch *b, int seed) {
    for (int i = 0; i < BATCH * N_IN; i++) b->x[i] = (float)((i * 7 + seed * 13) % 23 - 11) / 8.0f;
    for (int i = 0; i < BATCH; i++) b->labels[i] = (i + seed) % N_CLASS;
}

/* One training step on batch `seed`; returns the loss (and amp_found_inf when asked). */
static float step_on(AmpSession *s, const Batch *b, bool *found_inf) {
    const int64_t dx[2] = {BATCH, N_IN}, dl[1] = {BATCH};
    AmpTensorView in[2] = {rt_view("x", AMP_DT_FLOAT, (void *)b->x, 2, dx),
                           rt_view("labels", AMP_DT_INT64, (void *)b->labels, 1, dl)};
    const char *names[2] = {"loss", "amp_found_inf"};
    AmpTensorView out[2];
    AmpStatus st = {0};
    size_t n_out = found_inf ? 2 : 1;
    cr_assert_eq(amp_session_train_step(s, in, 2, names, n_out, out, &st), AMP_OK, "%s", st.msg);
    float loss = *(const float *)out[0].data;
    if (found_inf) *found_inf = *(const uint8_t *)out[1].data != 0;
    for (size_t k = 0; k < n_out; k++) amp_tensor_view_free(&out[k]);
    return loss;
}

static float step_n(AmpSession *s, int seed) {
    Batch b;
    batch_fill(&b, seed);
    return step_on(s, &b, NULL);
}

/* Every state entry, copied: name and bytes. */
typedef struct Snap {
    size_t n;
    char *name[32];
    void *data[32];
    size_t bytes[32];
} Snap;

static Snap snap(AmpSession *s) {
    Snap z;
    memset(&z, 0, sizeof z);
    z.n = amp_session_state_count(s);
    cr_assert_leq(z.n, 32);
    for (size_t i = 0; i < z.n; i++) {
        AmpTensorView v;
        cr_assert(amp_session_state_at(s, i, &v));
        z.name[i] = strdup(v.name);
        z.bytes[i] = amp_tensor_view_bytes(&v);
        z.data[i] = malloc(z.bytes[i] + 1);
        memcpy(z.data[i], v.data, z.bytes[i]);
    }
    return z;
}

static void snap_free(Snap *z) {
    for (size_t i = 0; i < z->n; i++) free(z->name[i]), free(z->data[i]);
    z->n = 0;
}

static const void *snap_get(const Snap *z, const char *name, size_t *bytes) {
    for (size_t i = 0; i < z->n; i++)
        if (strcmp(z->name[i], name) == 0) {
            if (bytes) *bytes = z->bytes[i];
            return z->data[i];
        }
    cr_assert_fail("no state '%s'", name);
    return NULL;
}

/* The same names, the same bytes (whatever the order of the entries). */
static void snap_equal(const Snap *a, const Snap *b, const char *what) {
    cr_assert_eq(a->n, b->n, "%s: %zu vs %zu state entries", what, a->n, b->n);
    for (size_t i = 0; i < a->n; i++) {
        size_t bytes = 0;
        const void *d = snap_get(b, a->name[i], &bytes);
        cr_assert_eq(bytes, a->bytes[i], "%s: '%s' sizes differ", what, a->name[i]);
        cr_assert_eq(memcmp(d, a->data[i], bytes), 0, "%s: '%s' differs", what, a->name[i]);
    }
}

static int64_t step_count(AmpSession *s) {
    AmpTensorView v;
    cr_assert(rt_state_find(s, "step", &v));
    return *(const int64_t *)v.data;
}

static AmpSession *open_model(AmpModel *m) {
    AmpSession *s = NULL;
    AmpStatus st = {0};
    cr_assert_eq(rt_open(m, NULL, &s, &st), AMP_OK, "%s", st.msg);
    return s;
}

/* ---- the model --------------------------------------------------------------------------- */

Test(algo_state, the_variant_verifies_and_round_trips) {
    AmpModel *m = algo_state_mlp();
    verify_ok(m);
    AmpTrainingInfo *ti = &m->training[0];
    for (int i = 0; i < N_MOVED; i++) {
        cr_assert_null(amp_graph_lookup(m->graph, MOVED[i]), "'%s' is still in the main graph", MOVED[i]);
        AmpValue *v = amp_training_key(m, ti, MOVED[i]);
        cr_assert(v && v->graph == ti->algorithm && v->initializer, "'%s' is no algorithm initializer", MOVED[i]);
    }
    /* Weights stay main-graph keys. */
    AmpValue *w1 = amp_training_key(m, ti, "W1");
    cr_assert(w1 && w1->graph == m->graph);
    amp_model_free(m);
}

Test(algo_state, trains_exactly_as_main_graph_state) {
    AmpSession *a = open_model(load_mlp()), *b = open_model(algo_state_mlp());
    cr_assert_eq(amp_session_state_count(b), 9, "4 weights, 4 buffers, the step count");
    for (int k = 0; k < N_STEPS; k++) {
        float la = step_n(a, k), lb = step_n(b, k);
        cr_assert_eq(memcmp(&la, &lb, sizeof la), 0, "step %d: loss %a (main-graph state) vs %a", k + 1, la, lb);
    }
    /* The algorithm read each step's current value: the count went 0, 1, 2, ... */
    cr_assert_eq(step_count(b), N_STEPS);
    Snap sa = snap(a), sb = snap(b);
    snap_equal(&sa, &sb, "after the steps");
    const float *v = snap_get(&sb, "W1_momentum", NULL);
    bool moved = false;
    for (int i = 0; i < N_IN * 32 && !moved; i++) moved = v[i] != 0;
    cr_assert(moved, "the momentum buffer stayed zero");
    snap_free(&sa), snap_free(&sb);

    /* state_set reaches the algorithm's state: the next step counts from there. */
    int64_t ten = 10;
    AmpTensorView t = rt_view("step", AMP_DT_INT64, &ten, 0, NULL);
    AmpStatus st = {0};
    cr_assert_eq(amp_session_state_set(b, &t, &st), AMP_OK, "%s", st.msg);
    step_n(b, 0);
    cr_assert_eq(step_count(b), 11);
    amp_session_close(a);
    amp_session_close(b);
}

Test(algo_state, checkpoint_resumes_bit_exactly) {
    AmpSession *s = open_model(algo_state_mlp());
    char *dir = tu_mkdtemp();
    char *path = tu_path(dir, "ck.onnx");
    AmpStatus st = {0};
    step_n(s, 0);
    step_n(s, 1);
    Snap saved = snap(s);
    cr_assert_eq(amp_session_state_save(s, path, &st), AMP_OK, "%s", st.msg);
    float later[3];
    for (int k = 0; k < 3; k++) later[k] = step_n(s, 2 + k);
    Snap after = snap(s);

    /* Spoil the algorithm's state, then load: it comes back bit for bit. */
    float junk[4] = {NAN, 1e30f, -0.0f, 7};
    const int64_t d4[1] = {4};
    AmpTensorView jv = rt_view("b2_momentum", AMP_DT_FLOAT, junk, 1, d4);
    int64_t big = 1000;
    AmpTensorView js = rt_view("step", AMP_DT_INT64, &big, 0, NULL);
    cr_assert_eq(amp_session_state_set(s, &jv, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(amp_session_state_set(s, &js, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(amp_session_state_load(s, path, &st), AMP_OK, "%s", st.msg);
    Snap back = snap(s);
    snap_equal(&saved, &back, "after the load");
    for (int k = 0; k < 3; k++) {
        float l = step_n(s, 2 + k);
        cr_assert_eq(memcmp(&l, &later[k], sizeof l), 0, "step %d after the load: %a vs %a", k + 3, l, later[k]);
    }
    Snap again = snap(s);
    snap_equal(&after, &again, "the resumed run");

    /* The checkpoint holds the algorithm's state under its names, like the weights; the
     * original model (that state in the main graph) takes it too: the names are the same. */
    AmpModel *ck = NULL;
    cr_assert_eq(amp_model_load_file(path, NULL, &ck, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(ck->graph->n_initializers, 9);
    cr_assert_not_null(amp_graph_lookup(ck->graph, "step"));
    cr_assert_not_null(amp_graph_lookup(ck->graph, "W1_momentum"));
    amp_model_free(ck);
    AmpSession *orig = open_model(load_mlp());
    cr_assert_eq(amp_session_state_load(orig, path, &st), AMP_OK, "%s", st.msg);
    float l = step_n(orig, 2);
    cr_assert_eq(memcmp(&l, &later[0], sizeof l), 0, "the main-graph-state model resumes alike");
    amp_session_close(orig);

    snap_free(&saved), snap_free(&after), snap_free(&back), snap_free(&again);
    amp_session_close(s);
    tu_rmtree(dir);
    free(path);
    free(dir);
}

/* ---- passes ------------------------------------------------------------------------------ */

/* The default pipeline (amp, loss_scale, cast_cleanup) keeps the algorithm's initializers
 * as they were: there, float32 / int64, the same bytes, still bound; and gates their
 * updates on amp_found_inf, reading the algorithm's own initializer as the old value. */
static AmpModel *converted(AmpModel *m) {
    AmpStatus st = {0};
    AmpPipelineOptions o = {.verify_each = true};
    cr_assert_eq(amp_run_pipeline(m, NULL, &o, &st), AMP_OK, "%s", st.msg);
    return m;
}

Test(algo_state, passes_keep_and_gate_it) {
    AmpModel *plain = algo_state_mlp();
    AmpModel *m = converted(algo_state_mlp());
    m = round_trip(m);
    verify_ok(m);
    AmpTrainingInfo *ti = &m->training[0];
    AmpGraph *a = ti->algorithm;
    for (int i = 0; i < N_MOVED; i++) {
        AmpValue *v = amp_training_key(m, ti, MOVED[i]), *p = amp_training_key(plain, &plain->training[0], MOVED[i]);
        cr_assert(v && v->graph == a && v->initializer, "'%s' left the algorithm", MOVED[i]);
        cr_assert_eq(v->initializer->dtype, p->initializer->dtype, "'%s' retyped", MOVED[i]);
        cr_assert_eq(v->initializer->nelem, p->initializer->nelem);
        const char *bound = NULL;
        for (size_t k = 0; k < ti->n_update_bindings; k++)
            if (strcmp(ti->update_bindings[k].key, MOVED[i]) == 0) bound = ti->update_bindings[k].value;
        cr_assert_not_null(bound, "'%s' is no longer bound", MOVED[i]);
        AmpValue *out = amp_graph_lookup(a, bound);
        cr_assert(out && out->producer && out->producer->op == AMP_OP_Where, "'%s' <- '%s' is not gated", MOVED[i],
                  bound);
        cr_assert_eq(out->producer->inputs[1], v, "the gate of '%s' keeps the algorithm's initializer", MOVED[i]);
    }
    amp_model_free(plain);
    amp_model_free(m);
}

Test(algo_state, an_inf_gradient_leaves_the_algorithm_state_alone) {
    AmpSession *s = open_model(converted(algo_state_mlp()));
    AmpSession *ref = open_model(converted(load_mlp()));
    bool found = true;
    Batch b;
    for (int k = 0; k < 3; k++) {
        batch_fill(&b, k);
        float l = step_on(s, &b, &found), lr = step_on(ref, &b, NULL);
        cr_assert_not(found, "step %d: a clean batch found inf", k + 1);
        cr_assert_eq(memcmp(&l, &lr, sizeof l), 0, "converted, step %d: %a vs %a (main-graph state)", k + 1, l, lr);
    }
    cr_assert_eq(step_count(s), 3);
    Snap before = snap(s);
    batch_fill(&b, 3);
    b.x[5] = INFINITY;
    step_on(s, &b, &found);
    cr_assert(found, "an inf input made no inf gradient");
    Snap after = snap(s);
    for (int i = 0; i < N_MOVED; i++) {
        size_t n0 = 0, n1 = 0;
        const void *x0 = snap_get(&before, MOVED[i], &n0), *x1 = snap_get(&after, MOVED[i], &n1);
        cr_assert(n0 == n1 && memcmp(x0, x1, n0) == 0, "'%s' changed in a skipped step", MOVED[i]);
    }
    const float *s0 = snap_get(&before, "amp_loss_scale", NULL), *s1 = snap_get(&after, "amp_loss_scale", NULL);
    cr_assert_eq(*s1, *s0 / 2, "the scale backs off");
    cr_assert_eq(step_count(s), 3, "the skipped step is not counted");
    snap_free(&before), snap_free(&after);
    amp_session_close(s);
    amp_session_close(ref);
}

/* ---- initialization, errors ------------------------------------------------------------- */

/* ONNX: "This graph can also set the initializers in algorithm in the same
 * TrainingInfoProto; a use case is resetting the number of training iteration to zero." */
Test(algo_state, an_initialization_binding_sets_the_algorithm_state) {
    AmpModel *m = algo_state_mlp();
    AmpGraph *init = amp_graph_new(m, m->graph);
    init->name = "init";
    m->training[0].initialization = init;
    const int64_t start = 40;
    rt_init(init, "step_start", AMP_DT_INT64, 0, NULL, &start);
    rt_node(init, "", "Identity", "step_start", "step_init");
    rt_output(init, "step_init", AMP_DT_INT64, "");
    rt_bindings(m, true, "step=step_init");
    verify_ok(m);
    AmpSession *s = open_model(m);
    cr_assert_eq(step_count(s), 40);
    step_n(s, 0);
    cr_assert_eq(step_count(s), 41);
    amp_session_close(s);
}

Test(algo_state, a_key_in_neither_graph_is_refused) {
    AmpModel *m = algo_state_mlp();
    m->training[0].update_bindings[8].key = "stepp";
    verify_fails(m, "'stepp' is not an initializer of the main graph, nor of training_info[0].algorithm");
    /* The session (which verifies as it opens) says the same. */
    AmpSession *s = NULL;
    AmpStatus st = {0};
    cr_assert_eq(rt_open(m, NULL, &s, &st), AMP_ERR_INPUT);
    cr_assert_null(s);
    cr_assert_not_null(
        strstr(st.msg, "'stepp' is not an initializer of the main graph, nor of training_info[0].algorithm"), "%s",
        st.msg);
}

/* The combined graph would define the name twice, and the key would not say which. */
Test(algo_state, an_algorithm_initializer_named_like_a_main_one_is_refused) {
    AmpModel *m = algo_state_mlp();
    const int64_t d4[1] = {4};
    const float z[4] = {0};
    rt_init(m->training[0].algorithm, "b2", AMP_DT_FLOAT, 1, d4, z);
    verify_fails(m, "training_info[0].algorithm: initializer 'b2' has the name of an initializer of the main graph");
    amp_model_free(m);
}

/* The checks of a main-graph key hold for an algorithm one: an update of another dtype
 * fails the step, naming it, and the step changes no state. */
Test(algo_state, an_update_of_another_dtype_is_an_error) {
    AmpModel *m = algo_state_mlp();
    AmpGraph *a = m->training[0].algorithm;
    amp_node_add_attr(rt_node(a, "", "Cast", "step_new", "step_i32"), "to", AMP_ATTR_INT)->i = AMP_DT_INT32;
    rt_output(a, "step_i32", AMP_DT_UNDEFINED, NULL); /* declared int32, the verifier refuses it (test_train.c) */
    m->training[0].update_bindings[8].value = "step_i32";
    AmpSession *s = open_model(m);
    Snap before = snap(s);
    Batch b;
    batch_fill(&b, 0);
    const int64_t dx[2] = {BATCH, N_IN}, dl[1] = {BATCH};
    AmpTensorView in[2] = {rt_view("x", AMP_DT_FLOAT, b.x, 2, dx), rt_view("labels", AMP_DT_INT64, b.labels, 1, dl)};
    const char *names[1] = {"loss"};
    AmpTensorView out[1];
    AmpStatus st = {0};
    cr_assert_eq(amp_session_train_step(s, in, 2, names, 1, out, &st), AMP_ERR_INPUT);
    cr_assert_not_null(strstr(st.msg, "'step' <- 'step_i32'"), "%s", st.msg);
    cr_assert_not_null(strstr(st.msg, "int32"), "%s", st.msg);
    Snap after = snap(s);
    snap_equal(&before, &after, "after a failed step");
    snap_free(&before), snap_free(&after);
    amp_session_close(s);
}
