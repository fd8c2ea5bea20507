/* What a kernel keeps of constant inputs (AmpKernelCtx.const_in / pack: oneDNN's Conv
 * keeps its reordered weights) must never outlive the bytes it was made from: a run after
 * amp_session_state_set of the weights, after loading a checkpoint, and after a training
 * step that writes them sees the new weights, on every backend. Each case compares the
 * session's output with a fresh session opened on a model holding the same weights, to
 * float32 rounding (the two may take different paths: oneDNN where the weights are
 * constant, im2col for this small a convolution where they are not), and checks it is
 * far from the output of the weights before. */
#include <criterion/criterion.h>
#include <math.h>
#include <unistd.h>

#include "tests/runtime/rt_util.h"

enum { C = 16, M = 16, HW = 6 };

static float w0[M * C * 9], w1[M * C * 9], xin[C * HW * HW];

static void fill(float *a, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        a[i] = (float)((seed >> 9) % 2001) / 1000.0f - 1.0f;
    }
}

/* Y = Conv(X, W) (3x3, pad 1) with W an initializer; the n*positions of 1x16x6x6 is over
 * oneDNN's limit for packed weights, so the CPU runs it there where oneDNN is present. */
static AmpModel *conv_model(const float *w) {
    AmpModel *m = rt_model(17);
    AmpGraph *g = m->graph;
    rt_input(g, "X", AMP_DT_FLOAT, "1,16,6,6");
    int64_t wd[4] = {M, C, 3, 3};
    rt_init(g, "W", AMP_DT_FLOAT, 4, wd, w);
    AmpNode *n = rt_node(g, "", "Conv", "X,W", "Y");
    AmpAttr *pads = amp_node_add_attr(n, "pads", AMP_ATTR_INTS);
    cr_assert_not_null(pads);
    pads->ints = amp_arena_calloc(&m->arena, 4, sizeof *pads->ints);
    for (int i = 0; i < 4; i++) pads->ints[i] = 1;
    pads->n_ints = 4;
    rt_output(g, "Y", AMP_DT_FLOAT, "1,16,6,6");
    return m;
}

static void run(AmpSession *s, float *y) {
    int64_t xd[4] = {1, C, HW, HW};
    AmpTensorView x = rt_view("X", AMP_DT_FLOAT, xin, 4, xd), out = {0};
    AmpStatus st = {0};
    cr_assert_eq(amp_session_run(s, &x, 1, NULL, 1, &out, &st), AMP_OK, "%s", st.msg);
    memcpy(y, out.data, sizeof(float) * M * HW * HW);
    amp_tensor_view_free(&out);
}

/* The output of a fresh session over a model whose W is w. */
static void reference(const float *w, float *y) {
    AmpSession *s = NULL;
    AmpStatus st = {0};
    cr_assert_eq(rt_open(conv_model(w), NULL, &s, &st), AMP_OK, "%s", st.msg);
    run(s, y);
    amp_session_close(s);
}

/* got matches want to float32 rounding and is far from other (the other weights'). */
static bool matches(const float *got, const float *want, const float *other) {
    float err = 0, gap = 0;
    for (int i = 0; i < M * HW * HW; i++) {
        err = fmaxf(err, fabsf(got[i] - want[i]));
        gap = fmaxf(gap, fabsf(got[i] - other[i]));
    }
    return err < 1e-4f && gap > 0.1f;
}

static void init(void) {
    fill(w0, sizeof w0 / sizeof *w0, 1);
    fill(w1, sizeof w1 / sizeof *w1, 2);
    fill(xin, sizeof xin / sizeof *xin, 3);
}

TestSuite(const_pack, .init = init);

Test(const_pack, state_set_after_a_run_is_seen) {
    float want0[M * HW * HW], want1[M * HW * HW], got[M * HW * HW];
    reference(w0, want0);
    reference(w1, want1);
    cr_assert(matches(want0, want0, want1), "the two weights must give different outputs");
    AmpSession *s = NULL;
    AmpStatus st = {0};
    cr_assert_eq(rt_open(conv_model(w0), NULL, &s, &st), AMP_OK, "%s", st.msg);
    run(s, got); /* packs w0 */
    cr_assert(matches(got, want0, want1));
    run(s, got); /* from the pack */
    cr_assert(matches(got, want0, want1));
    int64_t wd[4] = {M, C, 3, 3};
    AmpTensorView w = rt_view("W", AMP_DT_FLOAT, w1, 4, wd);
    cr_assert_eq(amp_session_state_set(s, &w, &st), AMP_OK, "%s", st.msg);
    run(s, got);
    cr_assert(matches(got, want1, want0), "a run after state_set computed with the old weights");
    /* set again: the state is the session's own buffer now, written in place */
    w = rt_view("W", AMP_DT_FLOAT, w0, 4, wd);
    cr_assert_eq(amp_session_state_set(s, &w, &st), AMP_OK, "%s", st.msg);
    run(s, got);
    cr_assert(matches(got, want0, want1), "a run after the second state_set computed with old weights");
    amp_session_close(s);
}

Test(const_pack, checkpoint_load_is_seen) {
    float want0[M * HW * HW], want1[M * HW * HW], got[M * HW * HW];
    reference(w0, want0);
    reference(w1, want1);
    char path[] = "/tmp/ampc_const_pack_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    AmpSession *a = NULL, *b = NULL;
    AmpStatus st = {0};
    cr_assert_eq(rt_open(conv_model(w1), NULL, &a, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(amp_session_state_save(a, path, &st), AMP_OK, "%s", st.msg);
    amp_session_close(a);
    cr_assert_eq(rt_open(conv_model(w0), NULL, &b, &st), AMP_OK, "%s", st.msg);
    run(b, got);
    cr_assert(matches(got, want0, want1));
    cr_assert_eq(amp_session_state_load(b, path, &st), AMP_OK, "%s", st.msg);
    run(b, got);
    cr_assert(matches(got, want1, want0), "a run after loading a checkpoint computed with the old weights");
    amp_session_close(b);
    unlink(path);
}
