/* Tests of `ampc MODEL --report` and `ampc MODEL --dump-dot FILE` as a user meets them:
 * the report's first line on fp32 and fp16 models, the DOT file (atomic, renders with
 * Graphviz when installed, collapse on a 1000-node model), and their usage errors. The
 * built binary (AMPC_BIN) is run with posix_spawn (see cli_test_util.h). */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/runtime/rt_util.h"
#include "tests/tools/cli_test_util.h"
#include "ir/ir.h"

TestSuite(cli_inspect, .init = make_tmpdir, .fini = remove_tmpdir, .timeout = 120);

/* ---- helpers ---------------------------------------------------------------------- */

/* x:fp32[2,3] -> Cast -> MatMul(fp16, W:fp16[3,4]) -> Cast -> y:fp32[2,4], saved. */
static void write_fp16_model(const char *path) {
    AmpModel *m = rt_model(17);
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "2,3");
    static const uint16_t w[12] = {0x3c00, 0x4000, 0x3c00};
    static const int64_t wd[2] = {3, 4};
    rt_init(g, "W", AMP_DT_FLOAT16, 2, wd, w);
    AmpNode *c = rt_node(g, "", "Cast", "x", "xh");
    c->name = "to16";
    amp_node_add_attr(c, "to", AMP_ATTR_INT)->i = AMP_DT_FLOAT16;
    rt_type(m, rt_val(g, "xh"), AMP_DT_FLOAT16, "2,3");
    rt_node(g, "", "MatMul", "xh,W", "yh")->name = "mm";
    rt_type(m, rt_val(g, "yh"), AMP_DT_FLOAT16, "2,4");
    c = rt_node(g, "", "Cast", "yh", "y");
    c->name = "to32";
    amp_node_add_attr(c, "to", AMP_ATTR_INT)->i = AMP_DT_FLOAT;
    rt_output(g, "y", AMP_DT_FLOAT, "2,4");
    rt_save(m, path);
}

/* x -> n unary fp32 nodes -> y. */
static void write_chain_model(const char *path, int n) {
    AmpModel *m = rt_model(17);
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "8");
    char in[32] = "x", out[32];
    for (int i = 0; i < n; i++) {
        snprintf(out, sizeof out, "t%d", i);
        rt_node(g, "", i % 2 ? "Neg" : "Relu", in, out);
        rt_type(m, rt_val(g, out), AMP_DT_FLOAT, "8");
        memcpy(in, out, sizeof in);
    }
    rt_output(g, in, AMP_DT_FLOAT, "8");
    rt_save(m, path);
}

/* Lines "  n12 [": node and chain boxes of a DOT file. */
static size_t count_boxes(const char *dot) {
    size_t n = 0;
    for (const char *p = dot; p; p = strchr(p, '\n')) {
        while (*p == '\n' || *p == ' ') p++;
        if (!*p) break;
        const char *q = p + 1;
        while (*q >= '0' && *q <= '9') q++;
        if (*p == 'n' && q > p + 1 && strncmp(q, " [", 2) == 0) n++;
    }
    return n;
}

/* `dot -Tsvg FILE` exits 0; skipped when Graphviz is not installed. */
static void assert_renders(const char *path) {
    if (system("command -v dot >/dev/null 2>&1") != 0) {
        /* not cr_log_warn: a warning makes Criterion 2.4 exit 1 though every test passed */
        fprintf(stderr, "note: graphviz 'dot' is not installed: rendering not checked\n");
        return;
    }
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "dot -Tsvg '%s' -o '%s.svg' 2>/dev/null", path, path);
    int rc = system(cmd);
    cr_assert(rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "dot -Tsvg %s failed", path);
    snprintf(cmd, sizeof cmd, "%s.svg", path);
    size_t len = 0;
    char *svg = read_all(cmd, &len);
    cr_assert(svg && strstr(svg, "<svg"), "no SVG from %s", path);
    free(svg);
    unlink(cmd);
}

/* ---- --report ----------------------------------------------------------------------- */

Test(cli_inspect, report_on_an_fp32_model) {
    Run r = run_ampc(ADD_MODEL, "--passes", "infer", "--report", NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    cr_assert_str_empty(r.err);
    cr_assert(strncmp(r.out, "converted 0 of 1 float nodes using 0 casts\n", 43) == 0, "%s", r.out);
    cr_assert_not_null(strstr(r.out, "\nAdd "), "no table row for Add:\n%s", r.out);
    run_free(&r);
}

Test(cli_inspect, report_on_an_fp16_model) {
    char model[600];
    tmp_path(model, sizeof model, "fp16.onnx");
    write_fp16_model(model);
    Run r = run_ampc(model, "--passes", "infer", "--report", NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    cr_assert(strncmp(r.out, "converted 1 of 1 float nodes using 2 casts\n", 43) == 0, "%s", r.out);
    /* MatMul [2,3]·[3,4]: 2·2·4·3 = 48 FLOPs, all of them in fp16. */
    cr_assert_not_null(strstr(r.out, "FLOPs: 100.0% (48 of 48 FLOPs in 1 node)\n"), "%s", r.out);
    cr_assert_not_null(strstr(r.out, "casts: fp32\xE2\x86\x92" "fp16 1, fp16\xE2\x86\x92" "fp32 1;"),
                       "%s", r.out);
    run_free(&r);
}

Test(cli_inspect, report_with_output_writes_both) {
    char model[600], out[600];
    tmp_path(model, sizeof model, "fp16.onnx");
    tmp_path(out, sizeof out, "out.onnx");
    write_fp16_model(model);
    Run r = run_ampc(model, "--passes", "infer", "--report", "-o", out, "-q", NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    cr_assert(strncmp(r.out, "converted 1 of 1 float nodes using 2 casts\n", 43) == 0, "%s", r.out);
    cr_assert(exists(out));
    run_free(&r);
}

/* ---- --dump-dot --------------------------------------------------------------------- */

Test(cli_inspect, dump_dot_writes_a_picture) {
    char model[600], dot[600];
    tmp_path(model, sizeof model, "fp16.onnx");
    tmp_path(dot, sizeof dot, "g.dot");
    write_fp16_model(model);
    size_t before = count_files();
    Run r = run_ampc(model, "--passes", "infer", "--dump-dot", dot, NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    cr_assert_str_empty(r.out);
    run_free(&r);
    cr_assert_eq(count_files(), before + 1, "a temporary file was left behind");
    char *text = read_all(dot, NULL);
    cr_assert_not_null(text);
    cr_assert(strncmp(text, "digraph ampc {\n", 15) == 0, "%s", text);
    cr_assert_not_null(strstr(text, "label=\"Cast fp32\xE2\x86\x92" "fp16\\nto16\""), "%s", text);
    cr_assert_not_null(strstr(text, "fillcolor=\"#a6d96a\", tooltip=\"fp16\", label=\"MatMul\\nmm\""),
                       "%s", text);
    cr_assert_null(strstr(text, "shape=note"), "initializers are hidden by default");
    free(text);
    assert_renders(dot);

    Run s = run_ampc(model, "--passes", "infer", "--dump-dot", dot, "--dot-initializers", NULL);
    cr_assert_eq(s.code, 0, "%s", s.err);
    run_free(&s);
    text = read_all(dot, NULL);
    cr_assert_not_null(strstr(text, "shape=note, style=filled, fillcolor=white, fontsize=9, label=\"W\\nfp16[3,4]\""),
                       "%s", text);
    free(text);
    assert_renders(dot);
}

Test(cli_inspect, dot_collapse_on_a_1000_node_model, .timeout = 300) {
    char model[600], full[600], small[600];
    tmp_path(model, sizeof model, "chain.onnx");
    tmp_path(full, sizeof full, "full.dot");
    tmp_path(small, sizeof small, "small.dot");
    write_chain_model(model, 1000);
    Run r = run_ampc(model, "--passes", "infer", "--dump-dot", full, "--report", NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    cr_assert(strncmp(r.out, "converted 0 of 1000 float nodes using 0 casts\n", 46) == 0, "%s", r.out);
    run_free(&r);
    Run s = run_ampc(model, "--dump-dot", small, "--dot-collapse", NULL);
    cr_assert_eq(s.code, 0, "%s", s.err);
    run_free(&s);
    char *a = read_all(full, NULL), *b = read_all(small, NULL);
    cr_assert_eq(count_boxes(a), 1000);
    cr_assert_eq(count_boxes(b), 1);
    cr_assert_not_null(strstr(b, "label=\"1000 nodes: Relu \xE2\x86\x92 Neg"), "%s", b);
    free(a), free(b);
    assert_renders(small);
}

Test(cli_inspect, dump_dot_usage_errors) {
    Run r = run_ampc(ADD_MODEL, "--report", "--dot-collapse", NULL);
    cr_assert_eq(r.code, 2);
    assert_one_error_line(&r);
    cr_assert_not_null(strstr(r.err, "--dump-dot"), "%s", r.err);
    run_free(&r);

    Run s = run_ampc(ADD_MODEL, "--dump-dot", "", NULL);
    cr_assert_eq(s.code, 2);
    assert_one_error_line(&s);
    run_free(&s);

    Run t = run_ampc("run", ADD_MODEL, "--report", NULL);
    cr_assert_eq(t.code, 2);
    assert_one_error_line(&t);
    run_free(&t);

    Run u = run_ampc(ADD_MODEL, "--dump-dot", NULL);
    cr_assert_eq(u.code, 2);
    assert_one_error_line(&u);
    run_free(&u);
}

Test(cli_inspect, unwritable_dot_file_writes_nothing) {
    char dot[600], out[600];
    tmp_path(dot, sizeof dot, "no/such/folder/g.dot");
    tmp_path(out, sizeof out, "out.onnx");
    Run r = run_ampc(ADD_MODEL, "--dump-dot", dot, "-o", out, NULL);
    cr_assert_eq(r.code, 1, "%s", r.err);
    assert_one_error_line(&r);
    cr_assert_not_null(strstr(r.err, "g.dot"), "%s", r.err);
    cr_assert_not(exists(out), "the model was written although the picture failed");
    run_free(&r);
}

Test(cli_inspect, help_mentions_the_options) {
    Run r = run_ampc("--help", NULL);
    cr_assert_eq(r.code, 0);
    const char *want[] = {"--report", "--dump-dot FILE", "--dot-collapse", "--dot-initializers",
                          "ampc MODEL --report | --dump-dot FILE"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_expect_not_null(strstr(r.out, want[i]), "--help does not mention %s", want[i]);
    run_free(&r);
}
