/* Update bindings computed straight into the state they replace (amp_exec_write_into):
 * the values a step leaves are those of the copy semantics, whether the algorithm may
 * write in place (W' = W - G, nothing after reads W) or must not (a later node reads the
 * old W; the producer is no elementwise op; one value bound to two keys), over several
 * steps and after state_set moves the state to a buffer of its own. */
#include <criterion/criterion.h>
#include <math.h>

#include "tests/runtime/rt_util.h"

enum { N = 37 }; /* not a multiple of any vector width */

static float w0[N], g0[N];

static void init(void) {
    for (int i = 0; i < N; i++) w0[i] = (float)i * 0.25f - 3.0f, g0[i] = 0.5f + (float)(i % 5);
}

TestSuite(update_in_place, .init = init);

/* A main graph y = W * X (X a scalar input), and an algorithm graph of `kind`:
 * 0: W' = W - G                                  (in place is safe)
 * 1: W' = W - G, then V' = W * 2 (reads the old W after the update: must not)
 * 2: W' = W - G bound to both W and U            (one value, two keys)
 * 3: W' = Neg(Neg(W) + G)                        (the producer does not read W) */
static AmpModel *model(int kind) {
    AmpModel *m = rt_model(17);
    AmpGraph *g = m->graph;
    int64_t d[1] = {N};
    rt_input(g, "X", AMP_DT_FLOAT, "");
    rt_init(g, "W", AMP_DT_FLOAT, 1, d, w0);
    rt_init(g, "V", AMP_DT_FLOAT, 1, d, w0);
    rt_init(g, "U", AMP_DT_FLOAT, 1, d, w0);
    rt_init(g, "G", AMP_DT_FLOAT, 1, d, g0);
    rt_node(g, "", "Mul", "W,X", "Y");
    rt_output(g, "Y", AMP_DT_FLOAT, "37");
    AmpGraph *a = rt_training(m);
    if (kind == 3) {
        rt_node(a, "", "Neg", "W", "nW");
        rt_node(a, "", "Add", "nW,G", "t");
        rt_node(a, "", "Neg", "t", "W_new");
    } else {
        rt_node(a, "", "Sub", "W,G", "W_new");
    }
    rt_output(a, "W_new", AMP_DT_FLOAT, "37");
    if (kind == 1) {
        rt_init(a, "two", AMP_DT_FLOAT, 0, NULL, &(float){2.0f});
        rt_node(a, "", "Mul", "W,two", "V_new");
        rt_output(a, "V_new", AMP_DT_FLOAT, "37");
    }
    rt_bindings(m, false, kind == 1 ? "W=W_new,V=V_new" : kind == 2 ? "W=W_new,U=W_new" : "W=W_new");
    return m;
}

static void state(AmpSession *s, const char *name, float *out) {
    AmpTensorView t;
    cr_assert(rt_state_find(s, name, &t), "no state '%s'", name);
    memcpy(out, t.data, sizeof(float) * N);
}

static void step(AmpSession *s) {
    float x = 1.0f;
    AmpTensorView in = rt_view("X", AMP_DT_FLOAT, &x, 0, NULL);
    AmpStatus st = {0};
    size_t n = amp_session_output_count(s, AMP_MODE_TRAIN);
    AmpTensorView out[4] = {0};
    cr_assert(n <= 4);
    cr_assert_eq(amp_session_train_step(s, &in, 1, NULL, n, out, &st), AMP_OK, "%s", st.msg);
    for (size_t k = 0; k < n; k++) amp_tensor_view_free(&out[k]);
}

Test(update_in_place, every_form_leaves_the_copy_semantics_values) {
    for (int kind = 0; kind < 4; kind++) {
        AmpSession *s = NULL;
        AmpStatus st = {0};
        cr_assert_eq(rt_open(model(kind), NULL, &s, &st), AMP_OK, "%s", st.msg);
        float w[N], v[N], u[N], want_w[N];
        memcpy(want_w, w0, sizeof want_w);
        for (int k = 0; k < 3; k++) {
            float before[N];
            memcpy(before, want_w, sizeof before);
            step(s);
            for (int i = 0; i < N; i++) want_w[i] = kind == 3 ? -(-before[i] + g0[i]) : before[i] - g0[i];
            state(s, "W", w);
            for (int i = 0; i < N; i++) cr_assert_eq(w[i], want_w[i], "kind %d step %d W[%d]", kind, k, i);
            if (kind == 1) { /* V' = 2 * the W before this step's update */
                state(s, "V", v);
                for (int i = 0; i < N; i++) cr_assert_eq(v[i], 2.0f * before[i], "kind 1 step %d V[%d]", k, i);
            }
            if (kind == 2) {
                state(s, "U", u);
                for (int i = 0; i < N; i++) cr_assert_eq(u[i], want_w[i], "kind 2 step %d U[%d]", k, i);
            }
        }
        /* the state moved to a buffer of its own: the next steps follow it */
        int64_t d[1] = {N};
        AmpTensorView t = rt_view("W", AMP_DT_FLOAT, w0, 1, d);
        cr_assert_eq(amp_session_state_set(s, &t, &st), AMP_OK, "%s", st.msg);
        step(s);
        state(s, "W", w);
        for (int i = 0; i < N; i++) {
            float want = kind == 3 ? -(-w0[i] + g0[i]) : w0[i] - g0[i];
            cr_assert_eq(w[i], want, "kind %d after state_set W[%d]", kind, i);
        }
        amp_session_close(s);
    }
}
