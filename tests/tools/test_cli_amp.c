/* The AMP options of `ampc MODEL -o OUT` (tools/cli_amp.c): the default pipeline converts
 * (a MatMul becomes fp16, the summary is part of the one "wrote" line), --precision,
 * --level, --allow/--infer/--clear/--deny and the AMP_*LIST_* variables (an op in two
 * lists is a usage error naming it), --keep-fp32, --no-keep-io-types, --loss, --loss-scale,
 * --explain (an unknown node is exit 2), and weights out of fp16's range reported. */
#include "tests/runtime/rt_util.h"
#include "tests/tools/cli_test_util.h"
#include "ir/ir.h"

TestSuite(cli_amp, .init = make_tmpdir, .fini = remove_tmpdir, .timeout = 120);

#define MATMUL_MODEL AMPC_TESTDATA "/node/test_matmul_2d/model.onnx"
#define CNN_MODEL AMPC_TEST_DIR "/../models/cnn_infer/model.onnx"
#define GRADS_MODEL AMPC_TEST_DIR "/../models/mlp_grads/model.onnx"

static AmpModel *load(const char *path) {
    AmpModel *m = NULL;
    AmpStatus st = {AMP_OK, ""};
    cr_assert_eq(amp_model_load_file(path, NULL, &m, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(amp_infer_model(m, &st), AMP_OK, "%s", st.msg); /* types of the values between nodes */
    return m;
}

static const AmpNode *op_node(const AmpModel *m, const char *op) {
    for (const AmpNode *n = m->graph->first; n; n = n->next)
        if (strcmp(n->op_type, op) == 0) return n;
    cr_assert_fail("no %s node", op);
    return NULL;
}

static int in0(const AmpModel *m, const char *op) {
    return op_node(m, op)->inputs[0]->type.dtype;
}

static void expect_usage(Run *r, const char *needle) {
    cr_assert_eq(r->code, 2, "exit %d: %s", r->code, r->err);
    assert_one_error_line(r);
    cr_assert_not_null(strstr(r->err, needle), "'%s' not in: %s", needle, r->err);
}

Test(cli_amp, default_pipeline_converts_and_says_so_in_one_line) {
    char out[600];
    tmp_path(out, sizeof out, "mm.onnx");
    Run r = run_ampc(MATMUL_MODEL, "-o", out, NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    cr_assert_eq(count_lines(r.err), 1, "%s", r.err);
    cr_assert_not_null(strstr(r.err, "passes: gradient,infer,opset_upgrade,fuse_norm,amp,loss_scale,cast_cleanup; "
                                     "amp: float16: 1 of 1 float nodes in 16 bits"),
                       "%s", r.err);
    AmpModel *m = load(out);
    cr_assert_eq(in0(m, "MatMul"), AMP_DT_FLOAT16);
    cr_assert_eq(m->graph->inputs.items[0].value->type.dtype, AMP_DT_FLOAT, "graph inputs keep their types");
    amp_model_free(m);
    run_free(&r);
}

static AmpCode add_nodes(AmpGraph *g, void *ctx, AmpStatus *st) {
    (void)st;
    *(size_t *)ctx += g->n_nodes;
    return AMP_OK;
}

/* The nodes of every graph of the model at path (subgraphs and training graphs too). */
static size_t all_nodes(const char *path) {
    AmpModel *m = load(path);
    size_t n = 0;
    amp_model_walk(m, add_nodes, &n, NULL);
    amp_model_free(m);
    return n;
}

/* The "wrote" line's node counts (the verifier's, or a walk's with --no-verify) take in the
 * bodies of control-flow nodes: test_loop11 has a Loop whose body holds most nodes. */
Test(cli_amp, the_wrote_line_counts_the_nodes_of_every_graph) {
    const char *in = AMPC_TESTDATA "/node/test_loop11/model.onnx";
    char out[600], want[800];
    tmp_path(out, sizeof out, "loop.onnx");
    size_t before = all_nodes(in);
    cr_assert_gt(before, 3, "the body's nodes are in the count");
    const char *verify[] = {NULL, "--no-verify"}; /* verified (the default), or not */
    for (int k = 0; k < 2; k++) {
        Run r = run_ampc(in, "-o", out, verify[k], NULL);
        cr_assert_eq(r.code, 0, "%s", r.err);
        snprintf(want, sizeof want, "wrote %s: %zu nodes (%zu before), ", out, all_nodes(out), before);
        cr_assert_not_null(strstr(r.err, want), "%s: '%s' not in: %s", k ? "--no-verify" : "verified", want, r.err);
        run_free(&r);
    }
}

Test(cli_amp, precision_bf16) {
    char out[600];
    tmp_path(out, sizeof out, "mm.onnx");
    Run r = run_ampc(MATMUL_MODEL, "-o", out, "--precision", "bf16", "-q", NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    cr_assert_str_empty(r.err);
    AmpModel *m = load(out);
    cr_assert_eq(in0(m, "MatMul"), AMP_DT_BFLOAT16);
    amp_model_free(m);
    run_free(&r);
    Run s = run_ampc(MATMUL_MODEL, "-o", out, "--precision", "fp8", NULL);
    expect_usage(&s, "--precision 'fp8'");
    run_free(&s);
}

/* The Casts of m's main graph to dtype dt. */
static int casts_to(const AmpModel *m, int dt) {
    int n = 0;
    for (const AmpNode *x = m->graph->first; x; x = x->next)
        n += strcmp(x->op_type, "Cast") == 0 && amp_node_attr_int(x, "to", 0) == dt;
    return n;
}

/* `ampc MODEL -o OUT` reads the conversion's variables as AMP_AUTO sessions do (it wrote
 * float16 under AMP_PRECISION=bf16 before, exit 0): a flag wins over its variable, and a
 * refused value is a usage error naming the variable. */
Test(cli_amp, conversion_variables_apply_and_flags_win) {
    char out[600];
    tmp_path(out, sizeof out, "cnn.onnx");
    setenv("AMP_PRECISION", "bf16", 1);
    Run r = run_ampc(CNN_MODEL, "-o", out, "-q", NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    AmpModel *m = load(out);
    cr_assert_eq(in0(m, "Gemm"), AMP_DT_BFLOAT16);
    cr_assert_gt(casts_to(m, AMP_DT_BFLOAT16), 0);
    cr_assert_eq(casts_to(m, AMP_DT_FLOAT16), 0);
    amp_model_free(m);
    run_free(&r);

    Run f = run_ampc(CNN_MODEL, "-o", out, "-q", "--precision", "fp16", NULL);
    cr_assert_eq(f.code, 0, "%s", f.err);
    m = load(out);
    cr_assert_eq(in0(m, "Gemm"), AMP_DT_FLOAT16, "--precision wins over AMP_PRECISION");
    cr_assert_eq(casts_to(m, AMP_DT_BFLOAT16), 0);
    amp_model_free(m);
    run_free(&f);

    setenv("AMP_PRECISION", "fp8", 1);
    Run b = run_ampc(CNN_MODEL, "-o", out, NULL);
    expect_usage(&b, "AMP_PRECISION='fp8': expected");
    run_free(&b);
    unsetenv("AMP_PRECISION");

    /* the other conversion variables: refused by the conversion as by sessions (a file
     * that is not there is bad input, as --calibration's) */
    static const char *const bad[][2] = {{"AMP_LOSS_SCALE", "foo"}, {"AMP_OPSET_UPGRADE", "99"},
                                         {"AMP_CALIBRATION", "/nonexistent/ampc.stats"},
                                         {"AMP_CALIB_MAX_ACTIVATION", "-1"}, {"AMP_CALIB_MIN_ACTIVATION", "x"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        setenv(bad[i][0], bad[i][1], 1);
        Run e = run_ampc(CNN_MODEL, "-o", out, NULL);
        cr_assert_eq(e.code, strcmp(bad[i][0], "AMP_CALIBRATION") ? 2 : 1, "%s: exit %d: %s", bad[i][0], e.code, e.err);
        assert_one_error_line(&e);
        cr_assert_not_null(strstr(e.err, bad[i][0]), "%s", e.err);
        run_free(&e);
        unsetenv(bad[i][0]);
    }
    setenv("AMP_OPSET_UPGRADE", "never", 1); /* applied: bf16 Conv needs opset 22, never keeps 17 */
    Run o = run_ampc(CNN_MODEL, "-o", out, "-q", "--precision", "bf16", NULL);
    cr_assert_eq(o.code, 0, "%s", o.err);
    m = load(out);
    cr_assert_eq(in0(m, "Conv"), AMP_DT_FLOAT, "no opset upgrade: Conv stays float32");
    amp_model_free(m);
    run_free(&o);
    unsetenv("AMP_OPSET_UPGRADE");
}

Test(cli_amp, levels) {
    char out[600];
    tmp_path(out, sizeof out, "cnn.onnx");
    Run r = run_ampc(CNN_MODEL, "-o", out, "--level", "tensor-cores-only", "-q", NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    AmpModel *m = load(out);
    cr_assert_eq(in0(m, "Conv"), AMP_DT_FLOAT16);
    cr_assert_eq(in0(m, "Relu"), AMP_DT_FLOAT, "clear ops are in no list at this level");
    amp_model_free(m);
    run_free(&r);
    Run s = run_ampc(CNN_MODEL, "-o", out, "--level", "fast", NULL);
    expect_usage(&s, "--level 'fast'");
    run_free(&s);
}

Test(cli_amp, list_edits_from_flags_and_environment) {
    char out[600];
    tmp_path(out, sizeof out, "cnn.onnx");
    Run r = run_ampc(CNN_MODEL, "-o", out, "--deny", "Conv", "-q", NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    AmpModel *m = load(out);
    cr_assert_eq(in0(m, "Conv"), AMP_DT_FLOAT);
    cr_assert_eq(in0(m, "Gemm"), AMP_DT_FLOAT16);
    amp_model_free(m);
    run_free(&r);

    Run u = run_ampc(CNN_MODEL, "-o", out, "--allow", "Conv,NoSuchOp", NULL);
    expect_usage(&u, "'NoSuchOp'");
    run_free(&u);

    setenv("AMP_DENYLIST_ADD", "Gemm", 1);
    Run e = run_ampc(CNN_MODEL, "-o", out, "-q", NULL);
    cr_assert_eq(e.code, 0, "%s", e.err);
    m = load(out);
    cr_assert_eq(in0(m, "Gemm"), AMP_DT_FLOAT, "AMP_DENYLIST_ADD is read by the CLI too");
    amp_model_free(m);
    run_free(&e);

    Run c = run_ampc(CNN_MODEL, "-o", out, "--allow", "Gemm", NULL);
    expect_usage(&c, "'Gemm'");
    cr_assert_not_null(strstr(c.err, "two lists"), "%s", c.err);
    run_free(&c);
    unsetenv("AMP_DENYLIST_ADD");
}

Test(cli_amp, keep_fp32_and_io_types) {
    char out[600];
    tmp_path(out, sizeof out, "cnn.onnx");
    Run r = run_ampc(CNN_MODEL, "-o", out, "--keep-fp32", "fc/*", "--keep-fp32", "conv2*", "-q", NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    AmpModel *m = load(out);
    cr_assert_eq(in0(m, "Gemm"), AMP_DT_FLOAT);
    cr_assert_eq(in0(m, "Conv"), AMP_DT_FLOAT16, "conv1 is not matched");
    amp_model_free(m);
    run_free(&r);

    Run n = run_ampc(CNN_MODEL, "-o", out, "--no-keep-io-types", "-q", NULL);
    cr_assert_eq(n.code, 0, "%s", n.err);
    m = load(out);
    cr_assert_eq(m->graph->inputs.items[0].value->type.dtype, AMP_DT_FLOAT16);
    cr_assert_eq(m->graph->outputs.items[0].value->type.dtype, AMP_DT_FLOAT16);
    amp_model_free(m);
    run_free(&n);

    Run k = run_ampc(CNN_MODEL, "-o", out, "--no-keep-io-types", "--keep-io-types", "-q", NULL);
    cr_assert_eq(k.code, 0, "%s", k.err);
    m = load(out);
    cr_assert_eq(m->graph->inputs.items[0].value->type.dtype, AMP_DT_FLOAT, "the last one given wins");
    amp_model_free(m);
    run_free(&k);
}

static bool has_output(const AmpModel *m, const char *name) {
    for (size_t i = 0; i < m->graph->outputs.n; i++)
        if (strcmp(m->graph->outputs.items[i].value->name, name) == 0) return true;
    return false;
}

Test(cli_amp, loss_and_loss_scale) {
    char out[600];
    tmp_path(out, sizeof out, "grads.onnx");
    Run r = run_ampc(GRADS_MODEL, "-o", out, "--loss", "loss", "--loss-scale", "none", NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    cr_assert_not_null(strstr(r.err, "training graph, loss 'loss'"), "%s", r.err);
    cr_assert_null(strstr(r.err, "loss_scale:"), "%s", r.err);
    AmpModel *m = load(out);
    cr_assert_not(has_output(m, "amp_found_inf"), "--loss-scale none: no loss scaling");
    amp_model_free(m);
    run_free(&r);
    /* The default: dynamic, summarised in the one "wrote" line. */
    Run d = run_ampc(GRADS_MODEL, "-o", out, NULL);
    cr_assert_eq(d.code, 0, "%s", d.err);
    cr_assert_eq(count_lines(d.err), 1, "%s", d.err);
    cr_assert_not_null(strstr(d.err, "; loss_scale: dynamic scale 65536, loss 'loss', 4 gradients unscaled"), "%s",
                       d.err);
    m = load(out);
    cr_assert(has_output(m, "amp_found_inf") && has_output(m, "amp_loss_scale_new"));
    amp_model_free(m);
    run_free(&d);
    /* Static: the check, no update. */
    Run s = run_ampc(GRADS_MODEL, "-o", out, "--loss-scale", "1024", "-q", NULL);
    cr_assert_eq(s.code, 0, "%s", s.err);
    m = load(out);
    cr_assert(has_output(m, "amp_found_inf"));
    cr_assert_not(has_output(m, "amp_loss_scale_new"));
    amp_model_free(m);
    run_free(&s);
    /* The dynamic settings are checked, and refused where scaling is not dynamic. */
    static const char *const bad[][4] = {
        {"--growth-interval", "0", NULL, NULL},
        {"--growth-factor", "1", NULL, NULL},
        {"--backoff-factor", "1.5", NULL, NULL},
        {"--loss-scale-init", "1e39", NULL, NULL},
        {"--loss-scale", "1024", "--growth-interval", "10"},
        {"--precision", "bf16", "--loss-scale-init", "8"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        Run u = bad[i][2] ? run_ampc(GRADS_MODEL, "-o", out, bad[i][0], bad[i][1], bad[i][2], bad[i][3], NULL)
                          : run_ampc(GRADS_MODEL, "-o", out, bad[i][0], bad[i][1], NULL);
        expect_usage(&u, bad[i][2] ? "dynamic loss scaling" : bad[i][0]);
        run_free(&u);
    }
    Run g = run_ampc(GRADS_MODEL, "-o", out, "--growth-interval", "7", "--loss-scale-init", "256", "--growth-factor",
                     "4", "--backoff-factor", "0.25", NULL);
    cr_assert_eq(g.code, 0, "%s", g.err);
    cr_assert_not_null(strstr(g.err, "dynamic scale 256"), "%s", g.err);
    run_free(&g);
    /* --loss-scale-state inputs: the state as plain inputs the caller feeds (no initializer,
     * no training_info of the pass's own); a bad value is a usage error. */
    Run si = run_ampc(GRADS_MODEL, "-o", out, "--loss-scale-state", "inputs", NULL);
    cr_assert_eq(si.code, 0, "%s", si.err);
    m = load(out);
    AmpValue *sv = amp_graph_lookup(m->graph, "amp_loss_scale");
    cr_assert(sv && (sv->flags & AMP_VALUE_INPUT) && !sv->initializer, "amp_loss_scale: a plain input");
    cr_assert(has_output(m, "amp_loss_scale_new"));
    cr_assert_eq(m->n_training, 0);
    amp_model_free(m);
    run_free(&si);
    Run sb = run_ampc(GRADS_MODEL, "-o", out, "--loss-scale-state", "outputs", NULL);
    expect_usage(&sb, "--loss-scale-state");
    run_free(&sb);
    /* --report shows the inserted nodes as one group. */
    Run rep = run_ampc(GRADS_MODEL, "-o", out, "--report", "-q", NULL);
    cr_assert_eq(rep.code, 0, "%s", rep.err);
    cr_assert_not_null(strstr(rep.out, "loss scaling: 35 nodes, one group"), "%s", rep.out);
    run_free(&rep);
    /* ... and --dump-dot as one cluster. */
    char dot[600];
    tmp_path(dot, sizeof dot, "grads.dot");
    Run dd = run_ampc(GRADS_MODEL, "-o", out, "--dump-dot", dot, "-q", NULL);
    cr_assert_eq(dd.code, 0, "%s", dd.err);
    size_t len;
    char *text = read_all(dot, &len);
    cr_assert_not_null(strstr(text, "label=\"loss scaling\""), "no loss-scaling cluster");
    free(text);
    run_free(&dd);
    Run b = run_ampc(GRADS_MODEL, "-o", out, "--loss-scale", "-3", NULL);
    expect_usage(&b, "--loss-scale '-3'");
    run_free(&b);
    Run l = run_ampc(GRADS_MODEL, "-o", out, "--loss", "nope", NULL);
    cr_assert_eq(l.code, 2, "%s", l.err);
    cr_assert_not_null(strstr(l.err, "'nope'"), "%s", l.err);
    run_free(&l);
}

Test(cli_amp, explain_prints_the_chain_and_checks_the_name) {
    Run r = run_ampc(GRADS_MODEL, "--explain", "relu1/Relu", NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    cr_assert_not_null(strstr(r.out, "node 'relu1/Relu' (Relu) in graph 'main': float16"), "%s", r.out);
    cr_assert_not_null(strstr(r.out, "because of"), "%s", r.out);
    run_free(&r);
    Run u = run_ampc(GRADS_MODEL, "--explain", "no/such/node", NULL);
    expect_usage(&u, "'no/such/node'");
    run_free(&u);
    Run p = run_ampc(GRADS_MODEL, "--explain", "relu1/Relu", "--passes", "infer", NULL);
    expect_usage(&p, "amp pass");
    run_free(&p);
}

/* --explain is repeatable: every node named is explained, in the order given (the last one
 * alone was, before); one unknown name among known ones is still a usage error. */
Test(cli_amp, explain_is_repeatable) {
    Run r = run_ampc(GRADS_MODEL, "--explain", "relu1/Relu", "--explain", "fc2/MatMul", NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    const char *a = strstr(r.out, "node 'relu1/Relu' (Relu) in graph 'main': float16");
    const char *b = strstr(r.out, "node 'fc2/MatMul' (MatMul) in graph 'main': float16");
    cr_assert(a && b && a < b, "%s", r.out);
    run_free(&r);
    Run u = run_ampc(GRADS_MODEL, "--explain", "relu1/Relu", "--explain", "no/such/node", NULL);
    expect_usage(&u, "'no/such/node'");
    cr_assert_eq(u.out[0], '\0', "%s", u.out);
    run_free(&u);
}

Test(cli_amp, weights_out_of_range_are_reported) {
    /* A MatMul whose weight holds 1e5: converted, the weight kept in fp32, one line. */
    char in[600], out[600];
    tmp_path(in, sizeof in, "big.onnx");
    tmp_path(out, sizeof out, "big_amp.onnx");
    AmpModel *m = amp_model_new();
    m->has = AMP_MODEL_HAS_IR_VERSION;
    m->ir_version = 8;
    m->opsets = amp_arena_calloc(&m->arena, 1, sizeof *m->opsets);
    m->opsets[0] = (AmpOpset){"", 17, true};
    m->n_opsets = 1;
    AmpGraph *g = m->graph;
    g->name = "g";
    AmpValue *x = amp_graph_value(g, "x");
    AmpDim *xd = amp_arena_calloc(&m->arena, 2, sizeof *xd);
    xd[0].value = 2;
    xd[1].value = 2;
    x->type = (AmpType){AMP_TYPE_TENSOR, AMP_DT_FLOAT, 2, xd};
    amp_graph_add_input(g, x);
    AmpTensor *t = amp_arena_calloc(&m->arena, 1, sizeof *t);
    static int64_t wd[2] = {2, 2};
    static const float w[4] = {1e5f, 1, 2, 3};
    t->dtype = AMP_DT_FLOAT;
    t->has = AMP_TENSOR_HAS_DTYPE | AMP_TENSOR_HAS_RAW;
    t->ndims = 2;
    t->dims = wd;
    t->nelem = 4;
    t->raw = (AmpBytes){(const uint8_t *)w, sizeof w};
    AmpValue *wv = amp_graph_value(g, "W");
    amp_graph_add_initializer(g, wv, t);
    AmpNode *n = amp_node_new(g, "", "MatMul", "mm", 2, 1);
    amp_node_set_input(n, 0, x);
    amp_node_set_input(n, 1, wv);
    amp_node_set_output(n, 0, amp_graph_value(g, "y"));
    amp_node_append(g, n);
    amp_graph_add_output(g, amp_graph_value(g, "y"));
    AmpStatus st = {AMP_OK, ""};
    cr_assert_eq(amp_model_save_file(m, in, NULL, &st), AMP_OK, "%s", st.msg);
    amp_model_free(m);

    Run r = run_ampc(in, "-o", out, NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    cr_assert_eq(count_lines(r.err), 1, "%s", r.err);
    cr_assert_not_null(strstr(r.err, "1 node kept in float32 for values beyond float16's range (from "
                                     "initializer 'W' (100000))"), "%s", r.err);
    run_free(&r);
    Run q = run_ampc(in, "-o", out, "-q", NULL);
    cr_assert_str_empty(q.err);
    run_free(&q);
}

/* From 10,000 nodes the output is verified on a second thread while it is saved (and
 * renamed into place only once verified); with --report the verification runs first, as
 * for small models. Both give the same file. */
static void write_chain(const char *path, int blocks) {
    AmpModel *m = rt_model(17);
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "2,2");
    static const int64_t wd[2] = {2, 2};
    static const float w[4] = {0.5f, -1, 2, 0.25f};
    rt_init(g, "W", AMP_DT_FLOAT, 2, wd, w);
    char prev[32] = "x", ins[48], mid[32], out[32];
    for (int i = 0; i < blocks; i++) {
        snprintf(ins, sizeof ins, "%s,W", prev);
        snprintf(mid, sizeof mid, "h%d", i);
        snprintf(out, sizeof out, "r%d", i);
        rt_node(g, "", "MatMul", ins, mid);
        rt_node(g, "", "Relu", mid, out);
        snprintf(prev, sizeof prev, "%s", out);
    }
    rt_output(g, prev, AMP_DT_FLOAT, "2,2");
    AmpStatus st = {AMP_OK, ""};
    cr_assert_eq(amp_model_save_file(m, path, NULL, &st), AMP_OK, "%s", st.msg);
    amp_model_free(m);
}

Test(cli_amp, big_models_are_verified_beside_the_save) {
    char in[600], out[600], out2[600];
    tmp_path(in, sizeof in, "chain.onnx");
    tmp_path(out, sizeof out, "chain_amp.onnx");
    tmp_path(out2, sizeof out2, "chain_amp2.onnx");
    write_chain(in, 6000);
    setenv("AMP_THREADS", "2", 1); /* a second thread allowed, whatever the machine's CPUs */
    Run r = run_ampc(in, "-o", out, "--time", NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    cr_assert_not_null(strstr(r.err, "ampc: time: verify output (beside save) "), "%s", r.err);
    cr_assert_not_null(strstr(r.err, ": 12002 nodes (12000 before), "), "the verification beside counted: %s", r.err);
    run_free(&r);
    Run q = run_ampc(in, "-o", out2, "-q", "--time", "--report", NULL);
    cr_assert_eq(q.code, 0, "%s", q.err);
    cr_assert_null(strstr(q.err, "beside save"), "%s", q.err);
    cr_assert_not_null(strstr(q.err, "ampc: time: verify output "), "%s", q.err);
    run_free(&q);
    /* One thread allowed: verified on the main thread, the same output. (This test runs
     * in a process of its own.) */
    char out3[600];
    tmp_path(out3, sizeof out3, "chain_amp3.onnx");
    setenv("AMP_THREADS", "1", 1);
    Run t = run_ampc(in, "-o", out3, "--time", NULL);
    cr_assert_eq(t.code, 0, "%s", t.err);
    cr_assert_null(strstr(t.err, "beside save"), "AMP_THREADS=1 started a thread: %s", t.err);
    cr_assert_not_null(strstr(t.err, "ampc: time: verify output "), "%s", t.err);
    cr_assert_not_null(strstr(t.err, ": 12002 nodes (12000 before), "), "%s", t.err);
    run_free(&t);
    size_t n1 = 0, n2 = 0, n3 = 0;
    char *a = read_all(out, &n1), *b = read_all(out2, &n2), *c = read_all(out3, &n3);
    cr_assert(a && b && n1 == n2 && memcmp(a, b, n1) == 0, "the two outputs differ");
    cr_assert(c && n1 == n3 && memcmp(a, c, n1) == 0, "the output with AMP_THREADS=1 differs");
    free(a);
    free(b);
    free(c);
    AmpModel *m = load(out);
    cr_assert_eq(m->graph->n_nodes, 12002, "every MatMul and Relu in fp16, one Cast at each end");
    cr_assert_eq(in0(m, "MatMul"), AMP_DT_FLOAT16);
    amp_model_free(m);
}
