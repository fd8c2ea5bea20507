/* Tests of `ampc run` and `ampc bench` as a user meets them: usage errors, inputs from
 * .pb folders or seeded random, printed outputs and --outputs files against the
 * conformance data, loss models and training_info models stepping, checkpoints, and the
 * timing and memory report. The built binary (AMPC_BIN) is run with posix_spawn (see
 * cli_test_util.h). Models come from Debian's libonnx-testdata or are built here. */
#include <criterion/criterion.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/runtime/rt_util.h"
#include "backend/backend.h"
#include "tests/tools/cli_test_util.h"
#include "ir/ir.h"

TestSuite(cli_run, .init = make_tmpdir, .fini = remove_tmpdir, .timeout = 120);

/* ---- helpers ---------------------------------------------------------------------- */

/* The first printed values of output 'name' ("output 'sum' float[3,4,5]: v0 v1 ..."). */
static int parse_values(const char *out, const char *name, double *v, int max) {
    char head[128];
    snprintf(head, sizeof head, "output '%s' ", name);
    const char *p = strstr(out, head);
    cr_assert_not_null(p, "no line for output %s in:\n%s", name, out);
    p = strchr(p, ':');
    cr_assert_not_null(p);
    p++;
    int n = 0;
    while (n < max) {
        char *end;
        double x = strtod(p, &end);
        if (end == p) break;
        v[n++] = x;
        p = end;
    }
    return n;
}

/* A TensorProto file parsed with the IR's loader; the tensor lives in *m. */
static AmpTensor *load_tensor_file(const char *path, AmpModel **m, AmpBytes *raw) {
    size_t len = 0;
    char *bytes = read_all(path, &len);
    cr_assert_not_null(bytes, "cannot read %s", path);
    *m = amp_model_new();
    AmpTensor *t = NULL;
    AmpStatus st = {AMP_OK, ""};
    cr_assert_eq(amp_tensor_load_bytes(*m, bytes, len, &t, &st), AMP_OK, "%s: %s", path, st.msg);
    cr_assert_eq(amp_tensor_bytes(*m, t, raw, &st), AMP_OK, "%s: %s", path, st.msg);
    free(bytes);
    return t;
}

/* A model with a loss and no training_info (backward would be in the main graph):
 * scores = MatMul(X, W) with X float[N,4], labels int64[N] that must lie in [0, 3),
 * loss = SoftmaxCrossEntropyLoss(scores, labels). */
static void write_training_model(const char *path) {
    AmpModel *m = amp_model_new();
    m->has = AMP_MODEL_HAS_IR_VERSION;
    m->ir_version = 8;
    m->opsets = amp_arena_calloc(&m->arena, 1, sizeof *m->opsets);
    m->opsets[0] = (AmpOpset){"", 17, true};
    m->n_opsets = 1;
    AmpGraph *g = m->graph;
    g->name = "train";
    AmpArena *ar = &m->arena;
    AmpValue *x = amp_graph_value(g, "X"), *lab = amp_graph_value(g, "labels");
    AmpDim *xd = amp_arena_calloc(ar, 2, sizeof *xd), *ld = amp_arena_calloc(ar, 1, sizeof *ld);
    xd[0] = (AmpDim){-1, "N"}, xd[1] = (AmpDim){4, NULL}, ld[0] = (AmpDim){-1, "N"};
    x->type = (AmpType){AMP_TYPE_TENSOR, AMP_DT_FLOAT, 2, xd};
    lab->type = (AmpType){AMP_TYPE_TENSOR, AMP_DT_INT64, 1, ld};
    amp_graph_add_input(g, x);
    amp_graph_add_input(g, lab);
    static const float w[12] = {0.1f, -0.2f, 0.3f, 0.0f, 0.2f, -0.1f, -0.3f, 0.1f, 0.05f, 0.2f, 0.1f, -0.2f};
    static const int64_t wdims[2] = {4, 3};
    AmpTensor *t = amp_arena_calloc(ar, 1, sizeof *t);
    *t = (AmpTensor){.dtype = AMP_DT_FLOAT, .has = AMP_TENSOR_HAS_DTYPE | AMP_TENSOR_HAS_RAW, .ndims = 2,
                     .dims = amp_arena_memdup(ar, wdims, sizeof wdims), .nelem = 12,
                     .raw = {amp_arena_memdup(ar, w, sizeof w), sizeof w}};
    AmpValue *wv = amp_graph_value(g, "W");
    amp_graph_add_initializer(g, wv, t);
    AmpNode *mm = amp_node_new(g, "", "MatMul", "mm", 2, 1);
    amp_node_set_input(mm, 0, x);
    amp_node_set_input(mm, 1, wv);
    amp_node_set_output(mm, 0, amp_graph_value(g, "scores"));
    amp_node_append(g, mm);
    AmpNode *sce = amp_node_new(g, "", "SoftmaxCrossEntropyLoss", "sce", 2, 1);
    amp_node_set_input(sce, 0, amp_graph_value(g, "scores"));
    amp_node_set_input(sce, 1, lab);
    amp_node_set_output(sce, 0, amp_graph_value(g, "loss"));
    amp_node_append(g, sce);
    amp_graph_add_output(g, amp_graph_value(g, "loss"));
    AmpStatus st = {AMP_OK, ""};
    cr_assert_eq(amp_model_save_file(m, path, NULL, &st), AMP_OK, "%s", st.msg);
    amp_model_free(m);
}

/* ---- ampc bench ------------------------------------------------------------------- */

Test(cli_run, bench_prints_times_and_memory) {
    const char *dir = AMPC_TESTDATA "/node/test_add/test_data_set_0";
    Run r = run_ampc("bench", ADD_MODEL, "--inputs", dir, "--iters", "5", "--warmup", "1", NULL);
    cr_assert_eq(r.code, 0, "stderr: %s", r.err);
    cr_assert_str_empty(r.err);
    cr_assert_not_null(strstr(r.out, "5 inference runs timed after 1 warm-up"), "%s", r.out);
    double med, lo, hi;
    const char *t = strstr(r.out, "time per run: median ");
    cr_assert_not_null(t, "%s", r.out);
    cr_assert_eq(sscanf(t, "time per run: median %lf ms, min %lf ms, max %lf ms", &med, &lo, &hi), 3, "%s", r.out);
    cr_assert(lo >= 0 && lo <= med && med <= hi, "min %g, median %g, max %g", lo, med, hi);
    cr_assert_not_null(strstr(r.out, "peak memory "), "%s", r.out);
    /* Every intermediate of the Add model is sized before the run: nothing read back. */
    size_t sized = 0, all = 0, syncs = 9;
    const char *p = strstr(r.out, "plan: ");
    cr_assert_not_null(p, "%s", r.out);
    cr_assert_eq(sscanf(p, "plan: %zu of %zu intermediates sized before the run, %zu values read back", &sized, &all,
                        &syncs),
                 3, "%s", r.out);
    cr_assert_eq(sized, all, "%s", r.out);
    cr_assert_eq(syncs, 0, "%s", r.out);
    cr_assert_not_null(strstr(r.out, "intermediates "), "%s", r.out);
    cr_assert_not_null(strstr(r.out, "+ state "), "%s", r.out);
    cr_assert_null(strstr(r.out, "output '"), "bench prints no outputs: %s", r.out);
    run_free(&r);

    /* Defaults (random inputs), and training steps. */
    Run d = run_ampc("bench", ADD_MODEL, NULL);
    cr_assert_eq(d.code, 0, "%s", d.err);
    cr_assert_not_null(strstr(d.out, "20 inference runs timed after 3 warm-up"), "%s", d.out);
    run_free(&d);
    char path[600];
    tmp_path(path, sizeof path, "train.onnx");
    write_training_model(path);
    Run tr = run_ampc("bench", path, "--train", "--iters", "2", "--dim", "N=8", NULL);
    cr_assert_eq(tr.code, 0, "%s", tr.err);
    cr_assert_not_null(strstr(tr.out, "2 training steps timed"), "%s", tr.out);
    cr_assert_not_null(strstr(tr.out, "time per step: median "), "%s", tr.out);
    run_free(&tr);
}

Test(cli_run, bench_usage_errors) {
    const char *bad[][2] = {
        {"--iters", "0"}, {"--iters", "x"}, {"--warmup", "-1"}, {"--steps", "2"}, {"--outputs", "d"},
        {"--save-state", "f"}, {"-o", "x.onnx"}, {"--backend", "tpu"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        Run r = run_ampc("bench", ADD_MODEL, bad[i][0], bad[i][1], NULL);
        cr_expect_eq(r.code, 2, "bench %s %s: exit %d, %s", bad[i][0], bad[i][1], r.code, r.err);
        assert_one_error_line(&r);
        run_free(&r);
    }
    Run m = run_ampc("bench", NULL);
    cr_assert_eq(m.code, 2);
    assert_one_error_line(&m);
    run_free(&m);
    /* Bench-only options are refused elsewhere, naming the command that takes them. */
    Run c = run_ampc("run", ADD_MODEL, "--iters", "2", NULL);
    cr_assert_eq(c.code, 2);
    cr_assert_not_null(strstr(c.err, "ampc bench"), "%s", c.err);
    run_free(&c);
    Run t = run_ampc(ADD_MODEL, "--train", "--print", NULL);
    cr_assert_eq(t.code, 2);
    cr_assert_not_null(strstr(t.err, "ampc bench"), "%s", t.err);
    run_free(&t);
    if (!amp_backend_usable(AMP_BACKEND_CUDA)) { /* no device (or no CUDA build): exit 3, one line */
        Run b = run_ampc("bench", ADD_MODEL, "--backend", "cuda", NULL);
        cr_assert_eq(b.code, 3, "%s", b.err);
        assert_one_error_line(&b);
        run_free(&b);
    }
}

/* ---- ampc run --------------------------------------------------------------------- */

Test(cli_run, run_usage_errors) {
    const char *bad[][4] = {
        {"--steps", "0"}, {"--steps", "x"}, {"--backend", "tpu"}, {"--dim", "N"}, {"--dim", "=3"},
        {"--dim", "N=-1"}, {"--seed", "-1"}, {"-o", "x.onnx"}, {"--passes", "none"},
        {"--outputs", ""}, {"--iters", "3"}, {"--train", NULL}, {"--max-iterations", "0"},
        {"--max-iterations", "-2"}, {"--timeout", "0"}, {"--timeout", "-1"}, {"--timeout", "soon"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        Run r = run_ampc("run", ADD_MODEL, bad[i][0], bad[i][1], NULL);
        cr_expect_eq(r.code, 2, "run %s %s: exit %d, %s", bad[i][0], bad[i][1], r.code, r.err);
        assert_one_error_line(&r);
        run_free(&r);
    }
    Run m = run_ampc("run", NULL);
    cr_assert_eq(m.code, 2);
    assert_one_error_line(&m);
    run_free(&m);
    /* Run-only options are refused (not unknown) outside run. */
    Run c = run_ampc(ADD_MODEL, "--steps", "2", "--print", NULL);
    cr_assert_eq(c.code, 2);
    cr_assert_not_null(strstr(c.err, "ampc run"), "%s", c.err);
    run_free(&c);
    Run l = run_ampc("run", ADD_MODEL, "--loss", "nosuch", NULL);
    cr_assert_eq(l.code, 2, "%s", l.err);
    cr_assert_not_null(strstr(l.err, "nosuch"), "%s", l.err);
    run_free(&l);
}

Test(cli_run, run_bad_model_and_backend) {
    char in[600];
    tmp_path(in, sizeof in, "garbage.onnx");
    write_file(in, garbage, sizeof garbage);
    Run r = run_ampc("run", in, NULL);
    cr_assert_eq(r.code, 1, "%s", r.err);
    assert_one_error_line(&r);
    cr_assert_not_null(strstr(r.err, "garbage.onnx"), "%s", r.err);
    run_free(&r);
    Run c = run_ampc("run", ADD_MODEL, "--backend", "cuda", NULL);
    if (amp_backend_usable(AMP_BACKEND_CUDA)) { /* a GPU: it runs there */
        cr_assert_eq(c.code, 0, "%s", c.err);
        cr_assert_not_null(strstr(c.out, "backend cuda"), "%s", c.out);
    } else {
        cr_assert_eq(c.code, 3, "%s", c.err);
        assert_one_error_line(&c);
    }
    run_free(&c);
    Run d = run_ampc("run", ADD_MODEL, "--inputs", tmpdir, NULL);
    cr_assert_eq(d.code, 2, "an empty folder: %s", d.err);
    cr_assert_not_null(strstr(d.err, "input_0.pb"), "%s", d.err);
    run_free(&d);
}

Test(cli_run, run_with_inputs_gives_the_expected_outputs) {
    const char *dir = AMPC_TESTDATA "/node/test_add/test_data_set_0";
    Run r = run_ampc("run", ADD_MODEL, "--inputs", dir, NULL);
    cr_assert_eq(r.code, 0, "stderr: %s", r.err);
    cr_assert_str_empty(r.err);
    cr_assert_not_null(strstr(r.out, "output 'sum' float[3,4,5]:"), "%s", r.out);
    cr_assert_not_null(strstr(r.out, "step time"), "%s", r.out);
    cr_assert_not_null(strstr(r.out, "peak memory"), "%s", r.out);
    double got[8];
    int n = parse_values(r.out, "sum", got, 8);
    cr_assert_eq(n, 8, "%s", r.out);
    /* The expected values, from output_0.pb. */
    AmpModel *m = amp_model_new();
    size_t len = 0;
    char *bytes = read_all(AMPC_TESTDATA "/node/test_add/test_data_set_0/output_0.pb", &len);
    AmpTensor *t;
    AmpStatus st = {AMP_OK, ""};
    cr_assert_eq(amp_tensor_load_bytes(m, bytes, len, &t, &st), AMP_OK, "%s", st.msg);
    AmpBytes raw;
    cr_assert_eq(amp_tensor_bytes(m, t, &raw, &st), AMP_OK);
    for (int i = 0; i < 8; i++) {
        float want;
        memcpy(&want, raw.data + 4 * i, 4);
        cr_assert_float_eq(got[i], want, 1e-6 + 1e-6 * (want < 0 ? -want : want), "element %d", i);
    }
    free(bytes);
    amp_model_free(m);
    run_free(&r);
}

/* Add is exact in fp32, so the written file is the conformance file, byte for byte. */
Test(cli_run, run_outputs_are_the_conformance_files) {
    const char *dir = AMPC_TESTDATA "/node/test_add/test_data_set_0";
    char out[600], file[700];
    tmp_path(out, sizeof out, "outs/nested");
    Run r = run_ampc("run", ADD_MODEL, "--inputs", dir, "--outputs", out, NULL);
    cr_assert_eq(r.code, 0, "stderr: %s", r.err);
    cr_assert_str_empty(r.err);
    cr_assert_not_null(strstr(r.out, "output 'sum' float[3,4,5]:"), "the outputs are still printed: %s", r.out);
    snprintf(file, sizeof file, "%s/output_0.pb", out);
    size_t n_got = 0, n_want = 0;
    char *got = read_all(file, &n_got), *want = read_all(AMPC_TESTDATA "/node/test_add/test_data_set_0/output_0.pb", &n_want);
    cr_assert_not_null(got, "no %s", file);
    cr_assert_not_null(want);
    cr_assert_eq(n_got, n_want, "%zu bytes, the conformance file has %zu", n_got, n_want);
    cr_assert_eq(memcmp(got, want, n_got), 0, "%s differs from the conformance output_0.pb", file);
    free(got);
    free(want);
    run_free(&r);

    /* Run again into the same folder: the file is replaced, no temporary is left. */
    Run a = run_ampc("run", ADD_MODEL, "--seed", "3", "--outputs", out, NULL);
    cr_assert_eq(a.code, 0, "%s", a.err);
    DIR *d = opendir(out);
    cr_assert_not_null(d);
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') {
            cr_expect_str_eq(e->d_name, "output_0.pb");
            n++;
        }
    closedir(d);
    cr_assert_eq(n, 1);
    double shown[8];
    cr_assert_eq(parse_values(a.out, "sum", shown, 8), 8);
    AmpModel *m;
    AmpBytes raw;
    AmpTensor *t = load_tensor_file(file, &m, &raw);
    cr_assert_str_eq(t->name, "sum");
    cr_assert_eq(t->dtype, AMP_DT_FLOAT);
    cr_assert_eq(t->ndims, 3);
    cr_assert_eq(raw.len, 60 * 4);
    for (int i = 0; i < 8; i++) {
        float f;
        memcpy(&f, raw.data + 4 * i, 4);
        cr_assert_eq((float)shown[i], f, "element %d: printed %.9g, written %.9g", i, shown[i], (double)f);
    }
    amp_model_free(m);
    run_free(&a);
}

Test(cli_run, run_outputs_errors_write_nothing) {
    char file[600], out[600], in[600];
    /* DIR is a file: bad input, one line naming it. */
    tmp_path(file, sizeof file, "a_file");
    write_file(file, "x", 1);
    Run r = run_ampc("run", ADD_MODEL, "--outputs", file, NULL);
    cr_assert_eq(r.code, 1, "%s", r.err);
    assert_one_error_line(&r);
    cr_assert_not_null(strstr(r.err, "a_file"), "%s", r.err);
    run_free(&r);
    /* A run that fails creates no folder. */
    tmp_path(in, sizeof in, "garbage.onnx");
    write_file(in, garbage, sizeof garbage);
    tmp_path(out, sizeof out, "never");
    Run g = run_ampc("run", in, "--outputs", out, NULL);
    cr_assert_eq(g.code, 1, "%s", g.err);
    cr_assert_not(exists(out), "a failed run made %s", out);
    run_free(&g);
    cr_assert_eq(count_files(), 2, "leftover files in %s", tmpdir);
}

/* A loss model: output_0.pb is the last step's loss, the value printed for that step. */
Test(cli_run, run_outputs_of_a_training_step) {
    char path[600], out[600], file[700];
    tmp_path(path, sizeof path, "train.onnx");
    write_training_model(path);
    tmp_path(out, sizeof out, "outs");
    Run r = run_ampc("run", path, "--steps", "2", "--dim", "N=8", "--outputs", out, NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    const char *p = strstr(r.out, "step 2: loss ");
    cr_assert_not_null(p, "%s", r.out);
    float printed = strtof(p + 13, NULL);
    snprintf(file, sizeof file, "%s/output_0.pb", out);
    AmpModel *m;
    AmpBytes raw;
    AmpTensor *t = load_tensor_file(file, &m, &raw);
    cr_assert_str_eq(t->name, "loss");
    cr_assert_eq(t->dtype, AMP_DT_FLOAT);
    cr_assert_eq(t->ndims, 0);
    cr_assert_eq(raw.len, 4);
    float f;
    memcpy(&f, raw.data, 4);
    cr_assert_eq(f, printed, "written %.9g, printed %.9g (%%.9g identifies a float)", (double)f, (double)printed);
    amp_model_free(m);
    snprintf(file, sizeof file, "%s/output_1.pb", out);
    cr_assert_not(exists(file), "the model has one output");
    run_free(&r);
}

Test(cli_run, run_random_inputs_are_deterministic) {
    Run a = run_ampc("run", ADD_MODEL, "--seed", "7", NULL);
    Run b = run_ampc("run", ADD_MODEL, "--seed", "7", "--steps", "3", NULL);
    Run c = run_ampc("run", ADD_MODEL, "--seed", "8", NULL);
    cr_assert_eq(a.code, 0, "%s", a.err);
    cr_assert_eq(b.code, 0, "%s", b.err);
    double va[8], vb[8], vc[8];
    cr_assert_eq(parse_values(a.out, "sum", va, 8), 8);
    cr_assert_eq(parse_values(b.out, "sum", vb, 8), 8);
    cr_assert_eq(parse_values(c.out, "sum", vc, 8), 8);
    cr_assert_eq(memcmp(va, vb, sizeof va), 0, "same seed, other data:\n%s\n%s", a.out, b.out);
    cr_assert_neq(memcmp(va, vc, sizeof va), 0, "another seed, same data");
    cr_assert_not_null(strstr(b.out, "median of 3"), "%s", b.out);
    run_free(&a);
    run_free(&b);
    run_free(&c);
}

Test(cli_run, run_loss_model_prints_a_loss_per_step) {
    char path[600];
    tmp_path(path, sizeof path, "train.onnx");
    write_training_model(path);
    for (int seed = 1; seed <= 5; seed++) {
        char s[16];
        snprintf(s, sizeof s, "%d", seed);
        Run r = run_ampc("run", path, "--steps", "3", "--dim", "N=16", "--seed", s, NULL);
        cr_assert_eq(r.code, 0, "seed %d: %s", seed, r.err); /* labels out of [0, 3) would fail the kernel */
        cr_assert_str_empty(r.err, "with --dim N=16 there is no note: %s", r.err);
        int lines = 0;
        for (const char *p = r.out; (p = strstr(p, ": loss ")); p++) lines++;
        cr_assert_eq(lines, 3, "%s", r.out);
        cr_assert_not_null(strstr(r.out, "step 3: loss "), "%s", r.out);
        cr_assert_not_null(strstr(r.out, "peak memory"), "%s", r.out);
        run_free(&r);
    }
    /* Without --dim the symbolic batch is 1, with a note on stderr. */
    Run n = run_ampc("run", path, NULL);
    cr_assert_eq(n.code, 0, "%s", n.err);
    cr_assert_not_null(strstr(n.err, "--dim N="), "%s", n.err);
    run_free(&n);
}

/* training_info: loss = mean((X*W - T)^2); the algorithm steps W by lr * dloss/dW. */
Test(cli_run, run_training_info_model_learns) {
    AmpModel *m = rt_model(17);
    AmpGraph *g = m->graph;
    const int64_t d3[1] = {3};
    const float w[3] = {0.5f, -0.5f, 1.0f};
    rt_input(g, "X", AMP_DT_FLOAT, "3");
    rt_input(g, "T", AMP_DT_FLOAT, "3");
    rt_init(g, "W", AMP_DT_FLOAT, 1, d3, w);
    rt_node(g, "", "Mul", "X,W", "P");
    rt_node(g, "", "Sub", "P,T", "D");
    rt_node(g, "", "Mul", "D,D", "DD");
    amp_node_add_attr(rt_node(g, "", "ReduceMean", "DD", "loss"), "keepdims", AMP_ATTR_INT)->i = 0;
    rt_output(g, "loss", AMP_DT_FLOAT, "");
    AmpGraph *a = rt_training(m);
    rt_scalar_f(a, "c", 0.2f * 2.0f / 3.0f);
    rt_node(a, "", "Mul", "D,X", "G0");
    rt_node(a, "", "Mul", "G0,c", "S");
    rt_node(a, "", "Sub", "W,S", "W_new");
    rt_output(a, "W_new", AMP_DT_FLOAT, "3");
    rt_bindings(m, false, "W=W_new");
    char path[600];
    tmp_path(path, sizeof path, "sgd.onnx");
    rt_save(m, path);
    Run r = run_ampc("run", path, "--steps", "6", NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    double prev = 1e30;
    int n = 0;
    for (const char *p = r.out; (p = strstr(p, ": loss ")); p++, n++) {
        double l = strtod(p + 7, NULL);
        cr_assert_lt(l, prev, "the loss does not fall:\n%s", r.out);
        prev = l;
    }
    cr_assert_eq(n, 6, "%s", r.out);

    /* Two steps, a checkpoint, two more from it: the same steps 3 and 4, bit for bit. */
    char ck[600];
    tmp_path(ck, sizeof ck, "ck.onnx");
    Run sv = run_ampc("run", path, "--steps", "2", "--save-state", ck, NULL);
    cr_assert_eq(sv.code, 0, "%s", sv.err);
    Run b = run_ampc("run", path, "--steps", "2", "--load-state", ck, NULL);
    cr_assert_eq(b.code, 0, "%s", b.err);
    for (int k = 3; k <= 4; k++) {
        char head[32];
        snprintf(head, sizeof head, "step %d: loss ", k);
        const char *x = strstr(r.out, head), *y = strstr(b.out, head);
        cr_assert(x && y, "no '%s' in\n%s\n%s", head, r.out, b.out);
        cr_assert_eq(strcspn(x, "("), strcspn(y, "("));
        cr_assert_eq(strncmp(x, y, strcspn(x, "(")), 0, "after the load:\n%s\nstraight through:\n%s", b.out, r.out);
    }
    /* --outputs: the main graph's output, then the algorithm's (W after the last step). */
    char outs[600], f0[700], f1[700];
    tmp_path(outs, sizeof outs, "outs");
    Run o = run_ampc("run", path, "--steps", "2", "--outputs", outs, NULL);
    cr_assert_eq(o.code, 0, "%s", o.err);
    snprintf(f0, sizeof f0, "%s/output_0.pb", outs);
    snprintf(f1, sizeof f1, "%s/output_1.pb", outs);
    AmpModel *m0, *m1;
    AmpBytes r0, r1;
    cr_assert_str_eq(load_tensor_file(f0, &m0, &r0)->name, "loss");
    AmpTensor *wt = load_tensor_file(f1, &m1, &r1);
    cr_assert_str_eq(wt->name, "W_new");
    cr_assert_eq(r1.len, 3 * sizeof(float));
    float w2[3];
    memcpy(w2, r1.data, sizeof w2);
    cr_assert(w2[0] != w[0] || w2[1] != w[1] || w2[2] != w[2], "W did not change in two steps");
    amp_model_free(m0);
    amp_model_free(m1);
    run_free(&o);

    Run c = run_ampc("run", path, "--load-state", ADD_MODEL, NULL);
    cr_assert_eq(c.code, 1, "not a checkpoint: %s", c.err);
    assert_one_error_line(&c);
    run_free(&sv);
    run_free(&b);
    run_free(&c);
    run_free(&r);
}
