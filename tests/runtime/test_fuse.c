/* The executor's plan-level fusion (runtime/fuse.c) on small graphs: what fuses, what a
 * value read in the middle of a chain keeps apart, one launch for the same program over
 * two parameters, and the fused program's checks at prepare. Every run on the simulator
 * (which fuses) is compared byte for byte with the CPU's (opened with no_fuse).
 * tests/runtime/test_fuse.py does the same over the bundled training models. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "tests/runtime/rt_util.h"

static AmpStatus st;

typedef struct Got {
    float y[2][4];
    size_t fused, absorbed;
} Got;

/* Opens m's bytes on `be`, runs it on x (4 floats), keeps its (up to two) [4] outputs. */
static Got run_on(const uint8_t *bytes, size_t len, AmpBackendKind be) {
    /* the CPU, the reference, unfused (it fuses float32 arithmetic chains of its own) */
    AmpSessionOptions o = {.backend = be, .ignore_env = true, .no_fuse = be == AMP_BACKEND_CPU};
    AmpSession *s = NULL;
    cr_assert_eq(amp_session_open_bytes(bytes, len, NULL, &o, &s, &st), AMP_OK, "%s", st.msg);
    float x[4] = {1.5f, -2.0f, 0.25f, 9.0f};
    AmpTensorView in = {.name = "x", .dtype = AMP_DT_FLOAT, .rank = 1, .dims = {4}, .data = x};
    size_t n_out = amp_session_output_count(s, AMP_MODE_RUN);
    AmpTensorView out[2];
    memset(out, 0, sizeof out);
    cr_assert_eq(amp_session_run(s, &in, 1, NULL, n_out, out, &st), AMP_OK, "%s", st.msg);
    Got g;
    memset(&g, 0, sizeof g);
    for (size_t k = 0; k < n_out && k < 2; k++) {
        size_t bytes = amp_tensor_view_bytes(&out[k]);
        memcpy(g.y[k], out[k].data, bytes < sizeof g.y[k] ? bytes : sizeof g.y[k]);
        amp_tensor_view_free(&out[k]);
    }
    AmpSessionStats stats;
    amp_session_stats(s, &stats);
    g.fused = stats.fused_nodes;
    g.absorbed = stats.absorbed_nodes;
    amp_session_close(s);
    return g;
}

/* The fusing backend these tests run: CUDA where the *_cuda variant asks for it
 * (AMP_BACKEND=cuda, on a GPU), else the simulator. */
static AmpBackendKind device(void) {
    const char *b = getenv("AMP_BACKEND");
    return b && strcmp(b, "cuda") == 0 ? AMP_BACKEND_CUDA : AMP_BACKEND_SIM;
}

/* Runs m on the CPU and on the device: the same bytes on the simulator (its fused kernels
 * are the CPU reference), within a few float32 ulps on CUDA (its libm rounds otherwise);
 * returns the device's. */
static Got both(AmpModel *m) {
    uint8_t *bytes = NULL;
    size_t len = 0;
    cr_assert_eq(amp_model_save_bytes(m, &bytes, &len, &st), AMP_OK, "%s", st.msg);
    amp_model_free(m);
    Got cpu = run_on(bytes, len, AMP_BACKEND_CPU), dev = run_on(bytes, len, device());
    free(bytes);
    cr_assert_eq(cpu.fused, 0, "the CPU backend fuses nothing under no_fuse");
    if (device() == AMP_BACKEND_SIM)
        cr_assert_eq(memcmp(cpu.y, dev.y, sizeof cpu.y), 0, "the fused run differs from the CPU's");
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 4; i++)
            cr_assert_float_eq(dev.y[k][i], cpu.y[k][i], 1e-5f * (1.0f + fabsf(cpu.y[k][i])), "output %d [%d]", k, i);
    return dev;
}

static AmpModel *base(void) {
    AmpModel *m = rt_model(17);
    rt_input(m->graph, "x", AMP_DT_FLOAT, "4");
    rt_scalar_f(m->graph, "one", 1.0f);
    rt_scalar_f(m->graph, "two", 2.0f);
    return m;
}

Test(fuse, a_chain_runs_as_one_kernel) {
    AmpModel *m = base();
    AmpGraph *g = m->graph;
    rt_node(g, "", "Add", "x,one", "a");
    rt_node(g, "", "Mul", "a,two", "b");
    rt_node(g, "", "Abs", "b", "c");
    rt_node(g, "", "Sqrt", "c", "d");
    rt_node(g, "", "Tanh", "d", "e");
    rt_node(g, "", "Erf", "e", "y");
    rt_output(g, "y", AMP_DT_FLOAT, "4");
    Got got = both(m);
    cr_assert_eq(got.fused, 1);
    cr_assert_eq(got.absorbed, 6);
    cr_assert_float_eq(got.y[0][1], erff(tanhf(1.41421354f)), 1e-6);
}

/* a is read by a ReduceSum between Add and Mul: a fused Add+Mul would run after it. */
Test(fuse, a_value_read_in_the_middle_keeps_the_chain_apart) {
    AmpModel *m = base();
    AmpGraph *g = m->graph;
    rt_node(g, "", "Add", "x,one", "a");
    rt_node(g, "", "ReduceSum", "a", "r");
    rt_node(g, "", "Mul", "a,two", "y");
    rt_node(g, "", "Mul", "y,r", "z");
    rt_output(g, "y", AMP_DT_FLOAT, "4");
    rt_output(g, "z", AMP_DT_FLOAT, "4");
    Got got = both(m);
    /* Add stays alone; the two Muls (r read as one element) fuse after the ReduceSum. */
    cr_assert_eq(got.fused, 1);
    cr_assert_eq(got.absorbed, 2);
}

/* The same, the reader after the chain: the chain fuses and writes a out for it. */
Test(fuse, a_value_read_after_the_chain_is_written_out) {
    AmpModel *m = base();
    AmpGraph *g = m->graph;
    rt_node(g, "", "Add", "x,one", "a");
    rt_node(g, "", "Mul", "a,two", "y");
    rt_node(g, "", "ReduceSum", "a", "r");
    rt_node(g, "", "Identity", "r", "z");
    rt_output(g, "y", AMP_DT_FLOAT, "4");
    rt_output(g, "z", AMP_DT_FLOAT, "");
    Got got = both(m);
    cr_assert_eq(got.fused, 1);
    cr_assert_eq(got.absorbed, 2);
}

/* Two parameters updated by the same arithmetic: one launch over both (tensors 2). */
Test(fuse, one_program_over_two_parameters_is_one_node) {
    AmpModel *m = base();
    AmpGraph *g = m->graph;
    const int64_t d4[1] = {4};
    const float p1[4] = {1, 2, 3, 4}, p2[4] = {-1, 0.5f, 8, 0};
    rt_init(g, "p1", AMP_DT_FLOAT, 1, d4, p1);
    rt_init(g, "p2", AMP_DT_FLOAT, 1, d4, p2);
    rt_node(g, "", "Mul", "x,two", "s1");
    rt_node(g, "", "Sub", "p1,s1", "y1");
    rt_node(g, "", "Mul", "x,one", "s2");
    rt_node(g, "", "Sub", "p2,s2", "y2");
    rt_output(g, "y1", AMP_DT_FLOAT, "4");
    rt_output(g, "y2", AMP_DT_FLOAT, "4");
    Got got = both(m);
    cr_assert_eq(got.fused, 1, "%zu fused nodes", got.fused);
    cr_assert_eq(got.absorbed, 4);
    cr_assert_float_eq(got.y[1][3], -9.0f, 0);
}

/* The loss-scaling pattern: G = X * inv; found = IsNaN(Sum(ReduceSum(G * 0))) and an
 * update gated on it: one UnscaleCheck, the gate fused with its arithmetic; found true
 * when X holds an inf. */
Test(fuse, the_gradient_check_is_one_node) {
    AmpModel *m = base();
    AmpGraph *g = m->graph;
    rt_scalar_f(g, "inv", 0.5f);
    rt_scalar_f(g, "zero", 0.0f);
    rt_node(g, "", "Mul", "x,inv", "G");
    rt_node(g, "", "Mul", "G,zero", "G0");
    amp_node_add_attr(rt_node(g, "", "ReduceSum", "G0", "C"), "keepdims", AMP_ATTR_INT)->i = 0;
    rt_node(g, "", "Sum", "C", "T");
    rt_node(g, "", "IsNaN", "T", "found");
    rt_node(g, "", "Mul", "G,two", "step");
    rt_node(g, "", "Sub", "x,step", "new");
    rt_node(g, "", "Where", "found,x,new", "y");
    rt_output(g, "y", AMP_DT_FLOAT, "4");
    rt_output(g, "G", AMP_DT_FLOAT, "4");
    Got got = both(m);
    cr_assert_eq(got.fused, 2, "%zu fused nodes", got.fused);
    cr_assert_eq(got.absorbed, 8);
}

/* A FusedElementwise node in a file is run as written, its program checked first. */
Test(fuse, a_bad_program_is_refused_at_open) {
    AmpModel *m = base();
    AmpGraph *g = m->graph;
    AmpNode *n = rt_node(g, "ai.ampc", "FusedElementwise", "x", "y");
    cr_assert(amp_model_import_opset(m, "ai.ampc", 1));
    static const int64_t prog[5] = {1, 1, 0, 1, 0}; /* Add(r0, r1): r1 is this result */
    static const int64_t in_dt[1] = {1}, outs[1] = {1}, out_dt[1] = {1};
    const struct { const char *name; const int64_t *v; size_t n; } ints[4] = {
        {"program", prog, 5}, {"in_dtypes", in_dt, 1}, {"outputs", outs, 1}, {"out_dtypes", out_dt, 1}};
    for (int k = 0; k < 4; k++) {
        AmpAttr *a = amp_node_add_attr(n, ints[k].name, AMP_ATTR_INTS);
        a->ints = amp_arena_alloc(&m->arena, ints[k].n * sizeof *a->ints);
        memcpy(a->ints, ints[k].v, ints[k].n * sizeof *a->ints);
        a->n_ints = ints[k].n;
    }
    amp_node_add_attr(n, "shape_input", AMP_ATTR_INT)->i = 0;
    rt_output(g, "y", AMP_DT_FLOAT, "4");
    uint8_t *bytes = NULL;
    size_t len = 0;
    cr_assert_eq(amp_model_save_bytes(m, &bytes, &len, &st), AMP_OK, "%s", st.msg);
    amp_model_free(m);
    AmpSessionOptions o = {.backend = AMP_BACKEND_CPU, .ignore_env = true};
    AmpSession *s = NULL;
    cr_assert_neq(amp_session_open_bytes(bytes, len, NULL, &o, &s, &st), AMP_OK);
    cr_assert(strstr(st.msg, "an operand that is not an earlier register"), "%s", st.msg);
    free(bytes);
}

/* Issue 20's "no host synchronisation inside a step": a loss-scaled training step (the
 * bundled mlp_train in float16, AMP_AUTO) on the simulator copies nothing out of the
 * device unless asked, then exactly what is asked: the loss, amp_found_inf. */
Test(fuse, a_training_step_reads_back_only_what_is_asked) {
    AmpSessionOptions o = {.backend = AMP_BACKEND_SIM, .ignore_env = true, .amp_auto = "1"};
    AmpSession *s = NULL;
    o.backend = device();
    cr_assert_eq(amp_session_open(AMPC_TEST_DIR "/../models/mlp_train/model.onnx", &o, &s, &st), AMP_OK, "%s", st.msg);
    float x[2 * 16];
    for (int i = 0; i < 2 * 16; i++) x[i] = (float)(i % 7) * 0.25f - 0.5f;
    int64_t y[2] = {1, 2};
    AmpTensorView in[2] = {{.name = "x", .dtype = AMP_DT_FLOAT, .rank = 2, .dims = {2, 16}, .data = x},
                           {.name = "labels", .dtype = AMP_DT_INT64, .rank = 1, .dims = {2}, .data = y}};
    AmpSessionStats stats;
    for (int asked = 0; asked <= 2; asked++) {
        const char *names[2] = {"loss", "amp_found_inf"};
        AmpTensorView out[2];
        memset(out, 0, sizeof out);
        cr_assert_eq(amp_session_train_step(s, in, 2, names, (size_t)asked, out, &st), AMP_OK, "%s", st.msg);
        amp_session_stats(s, &stats);
        cr_assert_eq(stats.host_reads, (size_t)asked, "asked for %d outputs, %zu copies out", asked, stats.host_reads);
        cr_assert_eq(stats.fallback_nodes, 0);
        for (int k = 0; k < asked; k++) amp_tensor_view_free(&out[k]);
    }
    cr_assert_gt(stats.fused_nodes, 0);
    amp_session_close(s);
}

/* y = Relu(x + b) * s, x [N, 3] (N named), b [3]: one kernel, the bias repeated along N;
 * the CPU's bytes for N = 2 and N = 5. */
Test(fuse, a_bias_over_the_last_axis_fuses_for_any_batch) {
    AmpModel *m = rt_model(17);
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "N,3");
    const int64_t d3[1] = {3};
    const float b[3] = {0.5f, -1.0f, 2.0f};
    rt_init(g, "b", AMP_DT_FLOAT, 1, d3, b);
    rt_scalar_f(g, "s", 3.0f);
    rt_node(g, "", "Add", "x,b", "h");
    rt_node(g, "", "Relu", "h", "r");
    rt_node(g, "", "Mul", "r,s", "y");
    rt_output(g, "y", AMP_DT_FLOAT, "N,3");
    uint8_t *bytes = NULL;
    size_t len = 0;
    cr_assert_eq(amp_model_save_bytes(m, &bytes, &len, &st), AMP_OK, "%s", st.msg);
    amp_model_free(m);
    for (int n = 2; n <= 5; n += 3) {
        float x[15], y[2][15];
        for (int i = 0; i < 3 * n; i++) x[i] = (float)(i % 4) - 1.25f;
        size_t fused = 0;
        for (int k = 0; k < 2; k++) {
            AmpSessionOptions o = {.backend = k ? device() : AMP_BACKEND_CPU, .ignore_env = true};
            AmpSession *s = NULL;
            cr_assert_eq(amp_session_open_bytes(bytes, len, NULL, &o, &s, &st), AMP_OK, "%s", st.msg);
            AmpTensorView in = {.name = "x", .dtype = AMP_DT_FLOAT, .rank = 2, .dims = {n, 3}, .data = x};
            AmpTensorView out;
            cr_assert_eq(amp_session_run(s, &in, 1, NULL, 1, &out, &st), AMP_OK, "%s", st.msg);
            memcpy(y[k], out.data, (size_t)(3 * n) * sizeof(float));
            amp_tensor_view_free(&out);
            AmpSessionStats stats;
            amp_session_stats(s, &stats);
            if (k) fused = stats.fused_nodes;
            amp_session_close(s);
        }
        cr_assert_eq(fused, 1, "N = %d: %zu fused nodes", n, fused);
        for (int i = 0; i < 3 * n; i++) cr_assert_float_eq(y[1][i], y[0][i], 1e-6f, "N = %d, [%d]", n, i);
        cr_assert_float_eq(y[0][3 * n - 1], 3.0f * fmaxf((float)((3 * n - 1) % 4) - 1.25f + 2.0f, 0.0f), 1e-6f);
    }
    free(bytes);
}

/* The loss_scale pass's check over 70 gradients (a model with more parameters than the
 * executor's 64 inputs per node on the stack): the CPU runs the 70-input Sum, the device
 * fuses it into two chained UnscaleCheck nodes; the flag and every unscaled gradient
 * agree, with and without an inf among the gradients. */
Test(fuse, the_check_over_seventy_gradients) {
    enum { N = 70 };
    for (int planted = 0; planted < 2; planted++) {
        AmpModel *m = base();
        AmpGraph *g = m->graph;
        rt_scalar_f(g, "inv", 0.25f);
        rt_scalar_f(g, "zero", 0.0f);
        char name[32], ins[64];
        AmpNode *sum = amp_node_new(g, "", "Sum", "check_total", N, 1); /* rt_node takes 16 names */
        for (int j = 0; j < N; j++) {
            snprintf(name, sizeof name, "k%d", j);
            rt_scalar_f(g, name, j == 33 && planted ? INFINITY : (float)j);
            snprintf(ins, sizeof ins, "x,k%d", j);
            snprintf(name, sizeof name, "X%d", j);
            rt_node(g, "", "Mul", ins, name); /* a gradient: x * k_j */
            snprintf(ins, sizeof ins, "X%d,inv", j);
            snprintf(name, sizeof name, "G%d", j);
            rt_node(g, "", "Mul", ins, name);
            rt_output(g, name, AMP_DT_FLOAT, "4");
            snprintf(ins, sizeof ins, "G%d,zero", j);
            snprintf(name, sizeof name, "Z%d", j);
            rt_node(g, "", "Mul", ins, name);
            snprintf(ins, sizeof ins, "Z%d", j);
            snprintf(name, sizeof name, "C%d", j);
            amp_node_add_attr(rt_node(g, "", "ReduceSum", ins, name), "keepdims", AMP_ATTR_INT)->i = 0;
            amp_node_set_input(sum, j, rt_val(g, name));
        }
        amp_node_set_output(sum, 0, amp_graph_value(g, "T"));
        amp_node_append(g, sum);
        rt_node(g, "", "IsNaN", "T", "found");
        rt_output(g, "found", AMP_DT_BOOL, "");
        uint8_t *bytes = NULL;
        size_t len = 0;
        cr_assert_eq(amp_model_save_bytes(m, &bytes, &len, &st), AMP_OK, "%s", st.msg);
        amp_model_free(m);
        float x[4] = {1.5f, -2.0f, 0.25f, 9.0f};
        AmpTensorView in = {.name = "x", .dtype = AMP_DT_FLOAT, .rank = 1, .dims = {4}, .data = x};
        AmpTensorView out[2][N + 1];
        size_t fused = 0;
        for (int k = 0; k < 2; k++) {
            AmpSessionOptions o = {.backend = k ? device() : AMP_BACKEND_CPU, .ignore_env = true};
            AmpSession *s = NULL;
            cr_assert_eq(amp_session_open_bytes(bytes, len, NULL, &o, &s, &st), AMP_OK, "%s", st.msg);
            cr_assert_eq(amp_session_run(s, &in, 1, NULL, N + 1, out[k], &st), AMP_OK, "%s", st.msg);
            AmpSessionStats stats;
            amp_session_stats(s, &stats);
            if (k) fused = stats.fused_nodes;
            amp_session_close(s);
        }
        cr_assert_geq(fused, 2, "%zu fused nodes", fused);
        cr_assert_eq(*(uint8_t *)out[0][N].data, planted, "the CPU's flag");
        cr_assert_eq(*(uint8_t *)out[1][N].data, planted, "the device's flag");
        for (int j = 0; j < N; j++)
            cr_assert_eq(memcmp(out[0][j].data, out[1][j].data, 4 * sizeof(float)), 0, "gradient %d", j);
        for (int k = 0; k < 2; k++)
            for (int j = 0; j <= N; j++) amp_tensor_view_free(&out[k][j]);
        free(bytes);
    }
}
