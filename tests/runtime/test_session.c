/* Sessions for inference: conformance models give their expected outputs through the
 * public API; inputs are checked (missing, unknown, wrong dtype or shape: AMP_ERR_USAGE
 * naming the input) as are output names; defaults can be overridden for one run; the arena
 * follows changing shapes; backends, stats and failures at open. */
#include <criterion/criterion.h>
#include <malloc.h>
#include <math.h>

#include "backend/backend.h"
#include "runtime/observe.h"
#include "tests/runtime/rt_util.h"

static void *read_bytes(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *b = malloc(n > 0 ? (size_t)n : 1);
    cr_assert_not_null(b);
    if (n > 0 && fread(b, 1, (size_t)n, f) != (size_t)n) n = 0;
    fclose(f);
    *len = (size_t)n;
    return b;
}

/* A tensor file as a view whose bytes live in `scratch`. */
static AmpTensorView load_pb(AmpModel *scratch, const char *path) {
    size_t len;
    void *b = read_bytes(path, &len);
    cr_assert_not_null(b, "cannot read %s", path);
    AmpTensor *t;
    AmpStatus st = {0};
    cr_assert_eq(amp_tensor_load_bytes(scratch, b, len, &t, &st), AMP_OK, "%s", st.msg);
    free(b);
    AmpBytes raw;
    cr_assert_eq(amp_tensor_bytes(scratch, t, &raw, &st), AMP_OK);
    AmpTensorView v = {.name = t->name, .dtype = t->dtype, .rank = (int)t->ndims, .data = (void *)raw.data};
    for (size_t i = 0; i < t->ndims; i++) v.dims[i] = t->dims[i];
    return v;
}

/* Runs a conformance folder's test_data_set_0 through the session API. */
static void check_conformance(const char *folder, size_t n_inputs) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s/model.onnx", AMPC_TESTDATA, folder);
    AmpSession *s = NULL;
    AmpStatus st = {0};
    cr_assert_eq(amp_session_open(path, NULL, &s, &st), AMP_OK, "%s", st.msg);
    AmpModel *scratch = amp_model_new();
    AmpTensorView in[4];
    for (size_t i = 0; i < n_inputs; i++) {
        snprintf(path, sizeof path, "%s/%s/test_data_set_0/input_%zu.pb", AMPC_TESTDATA, folder, i);
        in[i] = load_pb(scratch, path);
        AmpIoInfo info;
        cr_assert(amp_session_input_info(s, AMP_MODE_RUN, i, &info));
        in[i].name = info.name;
    }
    size_t n_out = amp_session_output_count(s, AMP_MODE_RUN);
    cr_assert_eq(n_out, 1);
    AmpTensorView out[1];
    cr_assert_eq(amp_session_run(s, in, n_inputs, NULL, 1, out, &st), AMP_OK, "%s", st.msg);
    snprintf(path, sizeof path, "%s/%s/test_data_set_0/output_0.pb", AMPC_TESTDATA, folder);
    AmpTensorView want = load_pb(scratch, path);
    cr_assert_eq(out[0].dtype, want.dtype);
    cr_assert_eq(out[0].rank, want.rank);
    size_t bytes = amp_tensor_view_bytes(&want);
    cr_assert_eq(amp_tensor_view_bytes(&out[0]), bytes);
    const float *g = out[0].data, *w = want.data;
    for (size_t i = 0; i < bytes / 4; i++) cr_assert_float_eq(g[i], w[i], 1e-6, "%s element %zu", folder, i);
    amp_tensor_view_free(&out[0]);
    amp_model_free(scratch);
    amp_session_close(s);
}

/* What `auto` opens here: CUDA where this build has it and a device is usable. */
static const char *auto_backend(void) {
    return amp_backend_usable(AMP_BACKEND_CUDA) ? "cuda" : "cpu";
}

Test(session, conformance_add) {
    check_conformance("node/test_add", 2);
}

Test(session, conformance_sign_model) {
    check_conformance("simple/test_sign_model", 1);
}

/* Y = Add(X, B), Z = Relu(Y); X float[2,3]; B float[3] an initializer that is also an input. */
static AmpModel *add_relu(const char *xdims) {
    AmpModel *m = rt_model(17);
    AmpGraph *g = m->graph;
    const int64_t bd[1] = {3};
    const float b[3] = {1, -2, 3};
    rt_input(g, "X", AMP_DT_FLOAT, xdims);
    rt_init(g, "B", AMP_DT_FLOAT, 1, bd, b);
    amp_graph_add_input(g, rt_val(g, "B"));
    rt_node(g, "", "Add", "X,B", "Y");
    rt_node(g, "", "Relu", "Y", "Z");
    rt_output(g, "Y", AMP_DT_FLOAT, NULL);
    rt_output(g, "Z", AMP_DT_FLOAT, NULL);
    return m;
}

static AmpSession *open_add_relu(const char *xdims) {
    AmpSession *s = NULL;
    AmpStatus st = {0};
    cr_assert_eq(rt_open(add_relu(xdims), NULL, &s, &st), AMP_OK, "%s", st.msg);
    return s;
}

Test(session, run_outputs_by_name) {
    AmpSession *s = open_add_relu("2,3");
    float x[6] = {0, 1, 2, 3, 4, 5};
    const int64_t xd[2] = {2, 3};
    AmpTensorView in = rt_view("X", AMP_DT_FLOAT, x, 2, xd);
    AmpStatus st = {0};
    AmpTensorView out[2];
    cr_assert_eq(amp_session_output_count(s, AMP_MODE_RUN), 2);
    cr_assert_eq(amp_session_run(s, &in, 1, NULL, 2, out, &st), AMP_OK, "%s", st.msg);
    cr_assert_str_eq(out[0].name, "Y");
    cr_assert_str_eq(out[1].name, "Z");
    const float want_y[6] = {1, -1, 5, 4, 2, 8};
    for (int i = 0; i < 6; i++) {
        cr_assert_float_eq(((float *)out[0].data)[i], want_y[i], 0);
        cr_assert_float_eq(((float *)out[1].data)[i], fmaxf(want_y[i], 0), 0);
    }
    amp_tensor_view_free(&out[0]);
    amp_tensor_view_free(&out[1]);

    /* A subset, in the caller's order. */
    const char *names[2] = {"Z", "Y"};
    cr_assert_eq(amp_session_run(s, &in, 1, names, 2, out, &st), AMP_OK, "%s", st.msg);
    cr_assert_str_eq(out[0].name, "Z");
    cr_assert_float_eq(((float *)out[0].data)[1], 0, 0);
    cr_assert_float_eq(((float *)out[1].data)[1], -1, 0);
    cr_assert_eq(out[1].rank, 2);
    cr_assert_eq(out[1].dims[1], 3);
    amp_tensor_view_free(&out[0]);
    amp_tensor_view_free(&out[1]);
    amp_session_close(s);
}

static void expect_usage(AmpSession *s, const AmpTensorView *in, size_t n, const char *const *names, size_t n_out,
                         const char *needle) {
    AmpTensorView out[4];
    memset(out, 0xab, sizeof out);
    AmpStatus st = {0};
    cr_assert_eq(amp_session_run(s, in, n, names, n_out, out, &st), AMP_ERR_USAGE, "expected a usage error naming %s",
                 needle);
    cr_assert_not_null(strstr(st.msg, needle), "the message should name %s: %s", needle, st.msg);
    for (size_t i = 0; i < n_out; i++) cr_assert_null(out[i].data, "output %zu left allocated", i);
}

Test(session, bad_inputs_and_outputs_are_usage_errors) {
    AmpSession *s = open_add_relu("2,3");
    float x[6] = {0};
    int64_t xi[6] = {0};
    const int64_t xd[2] = {2, 3}, bad_d[2] = {3, 2}, d1[1] = {6};
    AmpTensorView ok = rt_view("X", AMP_DT_FLOAT, x, 2, xd);
    AmpTensorView wrong_dtype = rt_view("X", AMP_DT_INT64, xi, 2, xd);
    AmpTensorView wrong_shape = rt_view("X", AMP_DT_FLOAT, x, 2, bad_d);
    AmpTensorView wrong_rank = rt_view("X", AMP_DT_FLOAT, x, 1, d1);
    AmpTensorView unknown = rt_view("Q", AMP_DT_FLOAT, x, 2, xd);
    AmpTensorView twice[2] = {ok, ok};
    expect_usage(s, NULL, 0, NULL, 2, "'X'");
    expect_usage(s, &wrong_dtype, 1, NULL, 2, "'X'");
    expect_usage(s, &wrong_dtype, 1, NULL, 2, "int64");
    expect_usage(s, &wrong_shape, 1, NULL, 2, "'X'");
    expect_usage(s, &wrong_shape, 1, NULL, 2, "float[2,3]");
    expect_usage(s, &wrong_rank, 1, NULL, 2, "'X'");
    expect_usage(s, &unknown, 1, NULL, 2, "'Q'");
    expect_usage(s, twice, 2, NULL, 2, "twice");
    const char *bad_name[1] = {"nope"};
    expect_usage(s, &ok, 1, bad_name, 1, "'nope'");
    expect_usage(s, &ok, 1, NULL, 1, "room"); /* all outputs need room for two */
    /* The session still works after each failure. */
    AmpTensorView out[2];
    AmpStatus st = {0};
    cr_assert_eq(amp_session_run(s, &ok, 1, NULL, 2, out, &st), AMP_OK, "%s", st.msg);
    amp_tensor_view_free(&out[0]);
    amp_tensor_view_free(&out[1]);
    amp_session_close(s);
}

Test(session, a_default_can_be_overridden_for_one_run) {
    AmpSession *s = open_add_relu("2,3");
    float x[6] = {0}, b[3] = {10, 20, 30};
    const int64_t xd[2] = {2, 3}, bd[1] = {3};
    AmpTensorView in[2] = {rt_view("X", AMP_DT_FLOAT, x, 2, xd), rt_view("B", AMP_DT_FLOAT, b, 1, bd)};
    AmpIoInfo info;
    cr_assert(amp_session_input_info(s, AMP_MODE_RUN, 1, &info));
    cr_assert_str_eq(info.name, "B");
    cr_assert(info.optional);
    const char *y[1] = {"Y"};
    AmpTensorView out;
    AmpStatus st = {0};
    cr_assert_eq(amp_session_run(s, in, 2, y, 1, &out, &st), AMP_OK, "%s", st.msg);
    cr_assert_float_eq(((float *)out.data)[2], 30, 0);
    amp_tensor_view_free(&out);
    cr_assert_eq(amp_session_run(s, in, 1, y, 1, &out, &st), AMP_OK, "%s", st.msg);
    cr_assert_float_eq(((float *)out.data)[2], 3, 0, "the initializer is back once B is not given");
    amp_tensor_view_free(&out);
    amp_session_close(s);
}

/* Symbolic batch: the arena is planned, outgrown, planned again; results stay right. */
Test(session, arena_follows_changing_shapes) {
    AmpSession *s = open_add_relu("N,3");
    AmpIoInfo info;
    cr_assert(amp_session_input_info(s, AMP_MODE_RUN, 0, &info));
    cr_assert_eq(info.dims[0], -1);
    cr_assert_str_eq(info.dim_params[0], "N");
    const int batches[] = {2, 2, 2, 5, 5, 1, 5};
    float x[15];
    for (int i = 0; i < 15; i++) x[i] = (float)i - 4;
    AmpSessionStats stats;
    for (size_t r = 0; r < sizeof batches / sizeof *batches; r++) {
        const int64_t xd[2] = {batches[r], 3};
        AmpTensorView in = rt_view("X", AMP_DT_FLOAT, x, 2, xd);
        AmpTensorView out[2];
        AmpStatus st = {0};
        cr_assert_eq(amp_session_run(s, &in, 1, NULL, 2, out, &st), AMP_OK, "%s", st.msg);
        cr_assert_eq(out[1].dims[0], batches[r]);
        const float b[3] = {1, -2, 3};
        for (int i = 0; i < batches[r] * 3; i++)
            cr_assert_float_eq(((float *)out[1].data)[i], fmaxf(x[i] + b[i % 3], 0), 0, "run %zu element %d", r, i);
        amp_tensor_view_free(&out[0]);
        amp_tensor_view_free(&out[1]);
        amp_session_stats(s, &stats);
        if (r == 2) cr_assert(stats.planned, "the third run with the same shapes uses the arena");
    }
    cr_assert_gt(stats.intermediate_bytes, 0);
    cr_assert_eq(stats.state_bytes, 12, "B is the state of a model without bindings");
    cr_assert_eq(amp_session_state_count(s), 1);
    /* auto is CUDA where a device is usable, else the CPU, or what AMP_BACKEND names
     * (ctest runs this file again with sim and cuda). */
    const char *env = getenv("AMP_BACKEND");
    cr_assert_str_eq(stats.backend, env && *env && strcmp(env, "auto") != 0 ? env : auto_backend());
    amp_session_close(s);
}

Test(session, backends) {
    AmpSession *s = NULL;
    AmpStatus st = {0};
    AmpSessionStats stats;
    AmpSessionOptions o = {.backend = AMP_BACKEND_CUDA};
    if (amp_backend_usable(AMP_BACKEND_CUDA)) { /* a GPU: the CUDA backend opens */
        cr_assert_eq(rt_open(add_relu("2,3"), &o, &s, &st), AMP_OK, "%s", st.msg);
        amp_session_stats(s, &stats);
        cr_assert_str_eq(stats.backend, "cuda");
        amp_session_close(s);
    } else { /* none, or a build without CUDA: a clear error, no session */
        cr_assert_eq(rt_open(add_relu("2,3"), &o, &s, &st), AMP_ERR_UNSUPPORTED);
        cr_assert_null(s);
        cr_assert_not_null(strstr(st.msg, "CUDA"), "%s", st.msg);
    }
    o.backend = AMP_BACKEND_CPU;
    amp_status_clear(&st);
    cr_assert_eq(rt_open(add_relu("2,3"), &o, &s, &st), AMP_OK, "%s", st.msg);
    amp_session_close(s);
    o.backend = AMP_BACKEND_SIM;
    amp_status_clear(&st);
    cr_assert_eq(rt_open(add_relu("2,3"), &o, &s, &st), AMP_OK, "%s", st.msg);
    amp_session_stats(s, &stats);
    cr_assert_str_eq(stats.backend, "sim");
    amp_session_close(s);
    o.backend = (AmpBackendKind)7;
    amp_status_clear(&st);
    cr_assert_eq(rt_open(add_relu("2,3"), &o, &s, &st), AMP_ERR_USAGE);
}

/* AMP_BACKEND picks the backend of a session whose options say auto; an explicit option
 * wins; a bad value is a usage error naming the variable; ignore_env reads nothing. */
Test(session, amp_backend_variable) {
    AmpSession *s = NULL;
    AmpStatus st = {0};
    AmpSessionStats stats;
    setenv("AMP_BACKEND", "sim", 1);
    cr_assert_eq(rt_open(add_relu("2,3"), NULL, &s, &st), AMP_OK, "%s", st.msg);
    amp_session_stats(s, &stats);
    cr_assert_str_eq(stats.backend, "sim");
    amp_session_close(s);
    AmpSessionOptions o = {.backend = AMP_BACKEND_CPU};
    cr_assert_eq(rt_open(add_relu("2,3"), &o, &s, &st), AMP_OK, "%s", st.msg);
    amp_session_stats(s, &stats);
    cr_assert_str_eq(stats.backend, "cpu");
    amp_session_close(s);
    o = (AmpSessionOptions){.ignore_env = true};
    cr_assert_eq(rt_open(add_relu("2,3"), &o, &s, &st), AMP_OK, "%s", st.msg);
    amp_session_stats(s, &stats);
    cr_assert_str_eq(stats.backend, auto_backend());
    amp_session_close(s);
    setenv("AMP_BACKEND", "tpu", 1);
    cr_assert_eq(rt_open(add_relu("2,3"), NULL, &s, &st), AMP_ERR_USAGE);
    cr_assert_not_null(strstr(st.msg, "AMP_BACKEND='tpu'"), "%s", st.msg);
    unsetenv("AMP_BACKEND");
}

Test(session, open_failures) {
    AmpSession *s = (AmpSession *)1;
    AmpStatus st = {0};
    cr_assert_eq(amp_session_open("/nonexistent/model.onnx", NULL, &s, &st), AMP_ERR_INPUT);
    cr_assert_null(s);
    cr_assert_not_null(strstr(st.msg, "/nonexistent/model.onnx"), "%s", st.msg);
    static const unsigned char garbage[] = {0xff, 0xff, 0xff, 0x0f, 0x12};
    amp_status_clear(&st);
    cr_assert_eq(amp_session_open_bytes(garbage, sizeof garbage, NULL, NULL, &s, &st), AMP_ERR_INPUT);
    /* An op no backend knows is named at open, not halfway through a run. */
    AmpModel *m = rt_model(17);
    rt_input(m->graph, "X", AMP_DT_FLOAT, "2");
    rt_node(m->graph, "", "NoSuchOpAnywhere", "X", "Y");
    rt_output(m->graph, "Y", AMP_DT_FLOAT, NULL);
    amp_status_clear(&st);
    cr_assert_eq(rt_open(m, NULL, &s, &st), AMP_ERR_UNSUPPORTED);
    cr_assert_not_null(strstr(st.msg, "NoSuchOpAnywhere"), "%s", st.msg);
}

Test(session, index_inputs_know_their_range) {
    AmpModel *m = rt_model(17);
    AmpGraph *g = m->graph;
    const int64_t td[2] = {5, 2};
    float table[10] = {0};
    rt_init(g, "T", AMP_DT_FLOAT, 2, td, table);
    rt_input(g, "I", AMP_DT_INT64, "4");
    rt_node(g, "", "Gather", "T,I", "Y");
    rt_output(g, "Y", AMP_DT_FLOAT, NULL);
    AmpSession *s = NULL;
    AmpStatus st = {0};
    cr_assert_eq(rt_open(m, NULL, &s, &st), AMP_OK, "%s", st.msg);
    AmpIoInfo info;
    cr_assert(amp_session_input_info(s, AMP_MODE_RUN, 0, &info));
    cr_assert_eq(info.index_bound, 5);
    cr_assert_not(amp_session_input_info(s, AMP_MODE_RUN, 1, &info));
    amp_session_close(s);
}

/* A graph input or output of a rank the runtime's tensors cannot hold (AMP_MAX_RANK) is
 * refused at open, naming it: nothing downstream copies more dims than it has room for
 * (issue "Hostile inputs, round 2", point 1: a rank-64 input overflowed dims[8]). */
Test(session, ranks_over_the_limit_are_refused_at_open) {
    for (int out = 0; out < 2; out++) {
        AmpModel *m = rt_model(17);
        rt_input(m->graph, "X", AMP_DT_FLOAT, out ? "1,1" : "1,1,1,1,1,1,1,1,1");
        rt_node(m->graph, "", "Relu", "X", "Y");
        rt_output(m->graph, "Y", AMP_DT_FLOAT, out ? "1,1,1,1,1,1,1,1,1" : "1,1,1,1,1,1,1,1,1");
        AmpSession *s = NULL;
        AmpStatus st = {0};
        cr_assert_eq(rt_open(m, NULL, &s, &st), AMP_ERR_UNSUPPORTED, "%s", st.msg);
        cr_assert_null(s);
        cr_assert_not_null(strstr(st.msg, out ? "graph output 'Y' has rank 9" : "graph input 'X' has rank 9"), "%s",
                           st.msg);
    }
}

/* A session's memory does not grow with the number of runs (issue "Hostile inputs, round
 * 2", point 5): a Constant whose tensor is held in float_data, not raw_data, used to be
 * laid out in the model's arena on every run (200k runs of 1 KiB: 203 MiB). Now the
 * model's arena and the heap in use stay as they were after the first runs. */
Test(session, memory_stays_flat_over_many_runs) {
    AmpModel *m = rt_model(17);
    AmpGraph *g = m->graph;
    rt_input(g, "X", AMP_DT_FLOAT, "256");
    AmpTensor *t = amp_arena_calloc(&m->arena, 1, sizeof *t);
    t->dtype = AMP_DT_FLOAT;
    t->has = AMP_TENSOR_HAS_DTYPE;
    t->ndims = 1;
    t->dims = amp_arena_calloc(&m->arena, 1, sizeof *t->dims);
    t->dims[0] = 256;
    t->nelem = 256;
    t->n_float = 256;
    t->float_data = amp_arena_calloc(&m->arena, 256, sizeof(float));
    for (int i = 0; i < 256; i++) t->float_data[i] = (float)i;
    AmpNode *c = rt_node(g, "", "Constant", "", "C");
    amp_node_add_attr(c, "value", AMP_ATTR_TENSOR)->t = t;
    rt_node(g, "", "Add", "X,C", "Y");
    rt_output(g, "Y", AMP_DT_FLOAT, "256");
    AmpSession *s = NULL;
    AmpStatus st = {0};
    cr_assert_eq(rt_open(m, NULL, &s, &st), AMP_OK, "%s", st.msg);
    float x[256] = {0};
    int64_t d[1] = {256};
    AmpTensorView in = rt_view("X", AMP_DT_FLOAT, x, 1, d);
    size_t arena_after_warmup = 0;
    struct mallinfo2 heap_warm = {0};
    for (int r = 0; r < 3000; r++) {
        AmpTensorView out;
        cr_assert_eq(amp_session_run(s, &in, 1, NULL, 1, &out, &st), AMP_OK, "%s", st.msg);
        cr_assert_eq(((float *)out.data)[255], 255.0f);
        amp_tensor_view_free(&out);
        if (r == 10) {
            arena_after_warmup = amp_session_model(s)->arena.used_bytes;
            heap_warm = mallinfo2();
        }
    }
    cr_assert_eq(amp_session_model(s)->arena.used_bytes, arena_after_warmup, "the model's arena grew with the runs");
    struct mallinfo2 heap = mallinfo2();
    /* 2989 runs at a KiB each would be 3 MiB; allow the allocator a little slack. */
    cr_assert_lt(heap.uordblks, heap_warm.uordblks + 64 * 1024, "the heap in use grew from %zu to %zu bytes",
                 heap_warm.uordblks, heap.uordblks);
    amp_session_close(s);
}
