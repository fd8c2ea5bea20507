/* Reading a run node by node (runtime/observe.h) and the calibration file (passes/calib.h):
 * the session's hook sees every node of the main graph once per run, in order, with its
 * inputs and outputs readable (as float32, from float16 too); a hook's error stops the
 * run with its message, and a hook removed is not called; a node runs alone on the CPU
 * on host buffers; the statistics file reads back what was written, and a bad line is
 * named with its file and number. Runs on the simulator too (values copied out through
 * the backend). */
#include <math.h>
#include <unistd.h>

#include "passes/calib.h"
#include "ir/half.h"
#include "runtime/observe.h"
#include "tests/runtime/rt_util.h"

static AmpStatus st;

typedef struct Seen {
    char names[8][32];
    float first[8]; /* element 0 of output 0 */
    float in0[8];   /* element 0 of input 0 */
    int n;
    int fail_at; /* -1: never */
} Seen;

static AmpCode hook(void *ctx, AmpExec *e, const AmpNode *n, AmpStatus *s) {
    Seen *x = ctx;
    if (x->n == x->fail_at) return amp_fail(s, AMP_ERR_UNSUPPORTED, "stopped at '%s'", n->name);
    AmpBuf b;
    cr_assert_eq(amp_exec_value_f32(e, n->outputs[0], &b, s), AMP_OK, "%s", s->msg);
    cr_assert_eq(b.dtype, AMP_DT_FLOAT);
    x->first[x->n] = ((float *)b.data)[0];
    amp_buf_free(&b);
    cr_assert_eq(amp_exec_value_f32(e, n->inputs[0], &b, s), AMP_OK, "%s", s->msg);
    x->in0[x->n] = ((float *)b.data)[0];
    amp_buf_free(&b);
    snprintf(x->names[x->n++], 32, "%s", n->name);
    return AMP_OK;
}

/* y = Cast(Cast(x, fp16) * 2, fp32) + 1: three nodes, one of them 16-bit. */
static AmpSession *open_chain(void) {
    AmpModel *m = rt_model(17);
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "2");
    uint16_t two = amp_f32_to_f16(2.0f);
    rt_init(g, "two", AMP_DT_FLOAT16, 0, NULL, &two);
    rt_scalar_f(g, "one", 1.0f);
    AmpNode *c = rt_node(g, "", "Cast", "x", "h");
    AmpAttr *a = amp_node_add_attr(c, "to", AMP_ATTR_INT);
    a->i = AMP_DT_FLOAT16;
    rt_node(g, "", "Mul", "h,two", "h2");
    c = rt_node(g, "", "Cast", "h2", "f");
    a = amp_node_add_attr(c, "to", AMP_ATTR_INT);
    a->i = AMP_DT_FLOAT;
    rt_node(g, "", "Add", "f,one", "y");
    rt_output(g, "y", AMP_DT_FLOAT, "2");
    AmpSession *s = NULL;
    /* A hook sees the plan's nodes: without no_fuse the simulator would run the chain as
     * one fused node (runtime/fuse.c). */
    AmpSessionOptions o = {.no_fuse = true};
    cr_assert_eq(rt_open(m, &o, &s, &st), AMP_OK, "%s", st.msg);
    return s;
}

static void run_once(AmpSession *s, AmpCode want) {
    float x[2] = {1.5f, -3.0f};
    int64_t d[1] = {2};
    AmpTensorView in = rt_view("x", AMP_DT_FLOAT, x, 1, d), out = {0};
    st = (AmpStatus){0};
    AmpCode rc = amp_session_run(s, &in, 1, NULL, 1, &out, &st);
    cr_assert_eq(rc, want, "%s", st.msg);
    if (!rc) cr_assert_float_eq(((float *)out.data)[0], 4.0f, 1e-6);
    amp_tensor_view_free(&out);
}

Test(observe, hook_sees_every_node_in_order) {
    AmpSession *s = open_chain();
    Seen seen = {.fail_at = -1};
    amp_session_set_hook(s, hook, &seen);
    run_once(s, AMP_OK);
    cr_assert_eq(seen.n, 4);
    const float out0[4] = {1.5f, 3.0f, 3.0f, 4.0f}, in0[4] = {1.5f, 1.5f, 3.0f, 3.0f};
    for (int i = 0; i < 4; i++) {
        cr_assert_float_eq(seen.first[i], out0[i], 1e-6, "node %d: %g", i, seen.first[i]);
        cr_assert_float_eq(seen.in0[i], in0[i], 1e-6, "node %d input: %g", i, seen.in0[i]);
    }
    const char *ops[4] = {"Cast", "Mul", "Cast", "Add"};
    for (int i = 0; i < 4; i++) cr_assert(strncmp(seen.names[i], ops[i], strlen(ops[i])) == 0, "%s", seen.names[i]);
    run_once(s, AMP_OK); /* once per run */
    cr_assert_eq(seen.n, 8);
    amp_session_set_hook(s, NULL, NULL);
    run_once(s, AMP_OK);
    cr_assert_eq(seen.n, 8);
    amp_session_close(s);
}

Test(observe, hook_error_stops_the_run) {
    AmpSession *s = open_chain();
    Seen seen = {.fail_at = 2};
    amp_session_set_hook(s, hook, &seen);
    run_once(s, AMP_ERR_UNSUPPORTED);
    cr_assert(strstr(st.msg, "stopped at 'Cast") != NULL, "%s", st.msg);
    cr_assert_eq(seen.n, 2);
    seen.fail_at = -1;
    seen.n = 0;
    run_once(s, AMP_OK); /* the session stays usable */
    cr_assert_eq(seen.n, 4);
    amp_session_close(s);
}

Test(observe, node_alone) {
    AmpModel *m = rt_model(17);
    AmpGraph *g = m->graph;
    rt_input(g, "a", AMP_DT_FLOAT16, "3");
    rt_input(g, "b", AMP_DT_FLOAT16, "3");
    AmpNode *n = rt_node(g, "", "Sub", "a,b", "d");
    uint16_t a[3], b[3], d[3] = {0};
    const float av[3] = {1000.0f, 2.0f, -1.0f}, bv[3] = {999.5f, 0.5f, 1.0f};
    for (int i = 0; i < 3; i++) a[i] = amp_f32_to_f16(av[i]), b[i] = amp_f32_to_f16(bv[i]);
    AmpBuf ia = {.dtype = AMP_DT_FLOAT16, .rank = 1, .dims = {3}, .nelem = 3, .data = a};
    AmpBuf ib = ia, out = ia;
    ib.data = b;
    out.data = d;
    const AmpBuf *in[2] = {&ia, &ib};
    cr_assert_eq(amp_run_node_alone(m, n, in, &out, &st), AMP_OK, "%s", st.msg);
    const float want[3] = {0.5f, 1.5f, -2.0f};
    for (int i = 0; i < 3; i++) cr_assert_float_eq(amp_f16_to_f32(d[i]), want[i], 1e-6);
    amp_model_free(m);
}

static char *tmp_path(const char *text) {
    static char path[64];
    snprintf(path, sizeof path, "/tmp/ampc_calib_XXXXXX");
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    cr_assert(f);
    char *buf = calloc(1, 1 << 16);
    *len = fread(buf, 1, (1 << 16) - 1, f);
    fclose(f);
    return buf;
}

/* s written to a file and read back; the file's text in *text unless text is NULL. */
static AmpCalibStats *round_trip(const AmpCalibStats *s, char **text) {
    char *path = tmp_path("");
    FILE *f = fopen(path, "w");
    cr_assert(amp_calib_write(s, f));
    fclose(f);
    AmpCalibStats *back = NULL;
    cr_assert_eq(amp_calib_read(path, &back, &st), AMP_OK, "%s", st.msg);
    size_t len;
    if (text) *text = read_all(path, &len);
    unlink(path);
    return back;
}

Test(calib, file_round_trip) {
    AmpCalibValue v[2] = {{.name = "x with space", .max_abs = 8.1e4, .sub_share = 0.25, .count = 10},
                          {.name = "W_grad", .max_abs = 1e-9, .sub_share = 1, .zero_share = 1, .nonfinite = 2,
                           .count = 8, .grad = true}};
    AmpCalibReduce r = {.node = "mm", .length = 768};
    AmpCalibStats s = {.runs = 3, .loss_scale = 65536, .v = v, .n_v = 2, .r = &r, .n_r = 1};
    AmpCalibStats *back = round_trip(&s, NULL);
    cr_assert_eq(back->runs, 3);
    cr_assert_float_eq(back->loss_scale, 65536, 0);
    const AmpCalibValue *x = amp_calib_find(back, "x with space"), *g = amp_calib_find(back, "W_grad");
    cr_assert(x && g && !amp_calib_find(back, "x"));
    cr_assert(!x->grad && g->grad);
    cr_assert_float_eq(x->max_abs, 8.1e4, 1e-3);
    cr_assert_float_eq(x->sub_share, 0.25, 1e-9);
    cr_assert_eq(g->nonfinite, 2);
    cr_assert_eq(g->count, 8);
    cr_assert_eq(back->n_r, 1);
    cr_assert_str_eq(back->r[0].node, "mm");
    cr_assert_eq(back->r[0].length, 768);
    amp_calib_free(back);
}


/* Names hold any character ONNX's strings do (issue 43, item 12): a file with a name the
 * line cannot hold as it is (a newline, a carriage return, a leading blank, a backslash,
 * a control character) is version 2 with those names escaped, and reads back every name
 * as it was; one whose names need nothing stays version 1, byte for byte as before. */
Test(calib, hostile_names_round_trip) {
    static const char *const names[] = {
        "line\nbreak", "cr at end\r", " leading blank", "trailing blank ", "tab\there", "\"quoted\" 'too'",
        "back\\slash \\n", "\xc3\xa9t\xc3\xa9 \xe2\x82\xac", "#not a comment", "\x01ctl\x7f", "\\x41",
    };
    enum { N = sizeof names / sizeof *names };
    AmpCalibValue v[N];
    for (size_t i = 0; i < N; i++) v[i] = (AmpCalibValue){.name = (char *)names[i], .max_abs = (double)i, .count = 1};
    AmpCalibReduce r[2] = {{.node = "mm\nnext", .length = 8}, {.node = " (unnamed MatMul writing h)", .length = 9}};
    AmpCalibStats s = {.runs = 1, .loss_scale = 1, .v = v, .n_v = N, .r = r, .n_r = 2};
    char *text;
    AmpCalibStats *back = round_trip(&s, &text);
    cr_assert_eq(back->n_v, N);
    for (size_t i = 0; i < N; i++) {
        cr_assert_str_eq(back->v[i].name, names[i], "name %zu", i);
        cr_assert(amp_calib_find(back, names[i]) == &back->v[i], "name %zu not found", i);
    }
    cr_assert_eq(back->n_r, 2);
    cr_assert_str_eq(back->r[0].node, "mm\nnext");
    cr_assert_str_eq(back->r[1].node, " (unnamed MatMul writing h)");
    amp_calib_free(back);
    cr_assert(text && strncmp(text, "ampc-calibration 2\n", 19) == 0, "%s", text);
    free(text);
    /* Plain names: version 1, as before. */
    s.n_v = 4;
    v[0].name = "x", v[1].name = "y z", v[2].name = "w\xc3\xa9", v[3].name = "\"q\"";
    r[0].node = "mm", s.n_r = 1;
    amp_calib_free(round_trip(&s, &text));
    cr_assert(text && strncmp(text, "ampc-calibration 1\n", 19) == 0, "%s", text);
    cr_assert(strstr(text, "value 0 0 0 0 1 x\nvalue 1 0 0 0 1 y z\n"), "%s", text);
    free(text);
}

Test(calib, bad_files_are_named) {
    static const struct {
        const char *text, *msg;
    } cases[] = {
        {"", "empty file"},
        {"ampc-calibration 3\n", "not an ampc calibration file"},
        {"ampc-calibration 2\nvalue 1 0 0 0 4 a\\qb\n", ":2: a malformed escape in the name"},
        {"ampc-calibration 2\nreduce 4 mm\\x0\n", ":2: a malformed escape in the node's name"},
        {"ampc-calibration 2\nvalue 1 0 0 0 4 a\\x00b\n", ":2: a malformed escape in the name"},
        {"ampc-calibration 1\n# ok\nvalue 1 0 0 0 4\n", ":3: expected 'value MAX"},
        {"ampc-calibration 1\nvalue 1 1.5 0 0 4 x\n", ":2: expected 'value MAX"},
        {"ampc-calibration 1\ngrad -1 0 0 0 4 x\n", ":2: expected 'grad MAX"},
        {"ampc-calibration 1\nreduce x mm\n", ":2: expected 'reduce LENGTH NODE'"},
        {"ampc-calibration 1\nruns 0\n", ":2: expected a positive number"},
        {"ampc-calibration 1\nmax 3\n", ":2: unknown line"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *path = tmp_path(cases[i].text);
        AmpCalibStats *s = NULL;
        st = (AmpStatus){0};
        cr_assert_eq(amp_calib_read(path, &s, &st), AMP_ERR_INPUT, "case %zu", i);
        cr_assert_null(s);
        cr_assert(strstr(st.msg, cases[i].msg) && strstr(st.msg, path), "case %zu: %s", i, st.msg);
        unlink(path);
    }
    cr_assert_eq(amp_calib_read("/nonexistent/x.stats", &(AmpCalibStats *){NULL}, &st), AMP_ERR_INPUT);
}
