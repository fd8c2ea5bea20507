/* The conversion report (tools/report.c) on graphs built here, its numbers worked out by
 * hand: float nodes and casts counted from the dtypes, FLOPs of MatMul/Gemm/Conv/
 * ConvTranspose with static shapes and their 16-bit share, the table, groups. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/runtime/rt_util.h"
#include "ir/ir.h"
#include "tools/report.h"

static char *report_text(const AmpModel *m, AmpReport *r) {
    AmpStatus st = {AMP_OK, ""};
    cr_assert_eq(amp_report_model(m, r, &st), AMP_OK, "%s", st.msg);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_not_null(f);
    amp_report_print(f, r);
    cr_assert_eq(fclose(f), 0);
    return buf;
}

static void typed(AmpModel *m, const char *name, int dt, const char *dims) {
    rt_type(m, rt_val(m->graph, name), dt, dims);
}

static const AmpOpCount *row(const AmpReport *r, const char *op) {
    for (size_t i = 0; i < r->n_ops; i++)
        if (strcmp(r->ops[i].op_type, op) == 0) return &r->ops[i];
    cr_assert_fail("no row for %s", op);
    return NULL;
}

/* Types only: the report reads dtypes and shapes, not whether the graph would run. */
Test(report, fp16_graph_counts_by_hand) {
    AmpModel *m = rt_model(17);
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "8,16");
    AmpNode *c = rt_node(g, "", "Cast", "x", "xh");
    amp_node_add_attr(c, "to", AMP_ATTR_INT)->i = AMP_DT_FLOAT16;
    typed(m, "xh", AMP_DT_FLOAT16, "8,16");
    typed(m, "w1", AMP_DT_FLOAT16, "16,32");
    rt_node(g, "", "MatMul", "xh,w1", "h"); /* fp16: 2·8·32·16 = 8192 */
    typed(m, "h", AMP_DT_FLOAT16, "8,32");
    rt_node(g, "", "Relu", "h", "r"); /* fp16 */
    typed(m, "r", AMP_DT_FLOAT16, "8,32");
    typed(m, "a", AMP_DT_FLOAT16, "16,8");
    typed(m, "b", AMP_DT_FLOAT16, "16,4");
    AmpNode *gemm = rt_node(g, "", "Gemm", "a,b", "gy"); /* fp16, A transposed: 2·8·4·16 = 1024 */
    amp_node_add_attr(gemm, "transA", AMP_ATTR_INT)->i = 1;
    typed(m, "gy", AMP_DT_FLOAT16, "8,4");
    typed(m, "cx", AMP_DT_FLOAT16, "1,2,5,5");
    typed(m, "cw", AMP_DT_FLOAT16, "3,2,3,3");
    rt_node(g, "", "Conv", "cx,cw", "cy"); /* fp16: 2·(1·3·3·3)·(2·3·3) = 972 */
    typed(m, "cy", AMP_DT_FLOAT16, "1,3,3,3");
    typed(m, "ux", AMP_DT_FLOAT16, "1,2,?,?");
    rt_node(g, "", "Conv", "ux,cw", "uy"); /* fp16, shapes not static: skipped */
    typed(m, "uy", AMP_DT_FLOAT16, "1,3,?,?");
    AmpNode *back = rt_node(g, "", "Cast", "r", "rf");
    amp_node_add_attr(back, "to", AMP_ATTR_INT)->i = AMP_DT_FLOAT;
    typed(m, "rf", AMP_DT_FLOAT, "8,32");
    typed(m, "w2", AMP_DT_FLOAT, "32,4");
    rt_node(g, "", "MatMul", "rf,w2", "y"); /* fp32: 2·8·4·32 = 2048 */
    typed(m, "y", AMP_DT_FLOAT, "8,4");
    rt_node(g, "", "Softmax", "y", "p"); /* fp32 */
    typed(m, "p", AMP_DT_FLOAT, "8,4");
    typed(m, "tx", AMP_DT_FLOAT, "1,2,3,3");
    typed(m, "tw", AMP_DT_FLOAT, "2,3,2,2");
    rt_node(g, "", "ConvTranspose", "tx,tw", "ty"); /* fp32: 2·(1·2·3·3)·(3·2·2) = 432 */
    typed(m, "ty", AMP_DT_FLOAT, "1,3,4,4");
    rt_node(g, "", "Shape", "p", "s"); /* no float data */
    typed(m, "s", AMP_DT_INT64, "2");
    AmpNode *ic = rt_node(g, "", "Cast", "s", "sf"); /* int64 -> fp32: not an AMP cast */
    amp_node_add_attr(ic, "to", AMP_ATTR_INT)->i = AMP_DT_FLOAT;
    typed(m, "sf", AMP_DT_FLOAT, "2");
    AmpNode *ls = rt_node(g, "", "Mul", "p,p", "scaled"); /* loss scaling: its own group */
    ls->name = "amp_loss_scale/mul";
    ls->origin = AMP_ORIGIN_LOSS_SCALE;
    typed(m, "scaled", AMP_DT_FLOAT, "8,4");

    AmpReport r;
    char *text = report_text(m, &r);
    const double f16 = 2.0 * 8 * 32 * 16 + 2.0 * 8 * 4 * 16 + 2.0 * 27 * 18;
    const double f32 = 2.0 * 8 * 4 * 32 + 2.0 * 18 * 12;
    cr_assert_eq(f16, 10188);
    cr_assert_eq(f32, 2480);
    char want[256];
    snprintf(want, sizeof want, "converted 5 of 8 float nodes using 2 casts\n");
    cr_assert(strncmp(text, want, strlen(want)) == 0, "first line:\n%s", text);
    cr_assert_eq(r.converted, 5);
    cr_assert_eq(r.float_nodes, 8);
    cr_assert_eq(r.casts, 2);
    cr_assert_eq(r.other_casts, 1);
    cr_assert_eq(r.cast_dirs[AMP_CAST_32_TO_16], 1);
    cr_assert_eq(r.cast_dirs[AMP_CAST_16_TO_32], 1);
    cr_assert_eq(r.flop_nodes, 5);
    cr_assert_eq(r.flop_skipped, 1);
    cr_assert_eq(r.flops16, f16);
    cr_assert_eq(r.flops, f16 + f32);
    cr_assert_eq(r.group_nodes[0], 1);
    cr_assert_eq(r.nodes, 13);
    cr_assert_eq(r.graphs, 1);
    snprintf(want, sizeof want,
             "16-bit share of MatMul/Gemm/Conv/ConvTranspose FLOPs: %.1f%% (10188 of 12668 FLOPs in 5 "
             "nodes; 1 node skipped: shapes not static)\n",
             100.0 * f16 / (f16 + f32));
    cr_assert_not_null(strstr(text, "80.4%"), "%s", text);
    cr_assert_not_null(strstr(text, want), "want %s in:\n%s", want, text);
    cr_assert_not_null(strstr(text, "casts: fp32\xE2\x86\x92" "fp16 1, fp16\xE2\x86\x92" "fp32 1; other casts 1\n"),
                       "%s", text);
    cr_assert_not_null(strstr(text, "loss scaling: 1 node, one group (not counted above)\n"),
                       "%s", text);
    cr_assert_not_null(strstr(text, "13 nodes in 1 graph\n"), "%s", text);
    /* The table: Conv and MatMul first (2 nodes each, then by name), no Cast rows. */
    cr_assert_not_null(strstr(text, "op type          nodes   16-bit     fp32     none\n"
                                    "Conv                 2        2        0        0\n"
                                    "MatMul               2        1        1        0\n"),
                       "%s", text);
    cr_assert_null(strstr(text, "note:"), "every value is typed:\n%s", text);
    const AmpOpCount *sh = row(&r, "Shape");
    cr_assert(sh->nodes == 1 && sh->none == 1 && sh->n16 == 0 && sh->n32 == 0);
    for (size_t i = 0; i < r.n_ops; i++) cr_assert_str_neq(r.ops[i].op_type, "Cast");
    free(text);
    amp_report_free(&r);
    amp_model_free(m);
}

Test(report, fp32_model_converts_nothing) {
    AmpModel *m = rt_model(17);
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "2,3");
    typed(m, "w", AMP_DT_FLOAT, "3,4");
    rt_node(g, "", "MatMul", "x,w", "y");
    typed(m, "y", AMP_DT_FLOAT, "2,4");
    rt_node(g, "", "Relu", "y", "z");
    typed(m, "z", AMP_DT_FLOAT, "2,4");
    rt_output(g, "z", AMP_DT_FLOAT, "2,4");
    AmpReport r;
    char *text = report_text(m, &r);
    cr_assert(strncmp(text, "converted 0 of 2 float nodes using 0 casts\n", 43) == 0, "%s", text);
    cr_assert_not_null(strstr(text, "casts: none; other casts 0\n"), "%s", text);
    cr_assert_not_null(strstr(text, "FLOPs: 0.0% (0 of 48 FLOPs in 1 node)\n"), "%s", text);
    free(text);
    amp_report_free(&r);
    amp_model_free(m);
}

Test(report, subgraphs_and_training_graphs_count_too) {
    AmpModel *m = rt_model(17);
    AmpGraph *g = m->graph;
    rt_input(g, "c", AMP_DT_BOOL, "");
    rt_input(g, "x", AMP_DT_FLOAT16, "4");
    AmpNode *ifn = rt_node(g, "", "If", "c", "y");
    AmpGraph *b = amp_graph_new(m, g);
    b->owner = ifn;
    amp_node_add_attr(ifn, "then_branch", AMP_ATTR_GRAPH)->g = b;
    rt_node(b, "", "Relu", "x", "t");
    rt_type(m, rt_val(b, "t"), AMP_DT_FLOAT16, "4");
    rt_output(b, "t", AMP_DT_FLOAT16, "4");
    rt_output(g, "y", AMP_DT_FLOAT16, "4");
    AmpGraph *alg = rt_training(m);
    rt_node(alg, "", "Neg", "y", "n");
    rt_type(m, rt_val(alg, "n"), AMP_DT_FLOAT, "4");
    AmpReport r;
    char *text = report_text(m, &r);
    /* If (fp16 output), Relu in its body (fp16), Neg in the algorithm (fp16 input). */
    cr_assert(strncmp(text, "converted 3 of 3 float nodes using 0 casts\n", 43) == 0, "%s", text);
    cr_assert_not_null(strstr(text, "n/a (no such node with static shapes)\n"), "%s", text);
    cr_assert_not_null(strstr(text, "3 nodes in 3 graphs\n"), "%s", text);
    free(text);
    amp_report_free(&r);
    amp_model_free(m);
}

Test(report, big_flop_counts_are_shortened) {
    AmpModel *m = rt_model(17);
    typed(m, "a", AMP_DT_FLOAT16, "1024,4096");
    typed(m, "b", AMP_DT_FLOAT16, "4096,4096");
    rt_node(m->graph, "", "MatMul", "a,b", "y");
    typed(m, "y", AMP_DT_FLOAT16, "1024,4096");
    AmpReport r;
    char *text = report_text(m, &r);
    /* 2·1024·4096·4096 = 34359738368 */
    cr_assert_not_null(strstr(text, "100.0% (34.4G of 34.4G FLOPs in 1 node)"), "%s", text);
    free(text);
    amp_report_free(&r);
    amp_model_free(m);
}

Test(report, values_of_unknown_type_are_noted) {
    AmpModel *m = rt_model(17);
    typed(m, "x", AMP_DT_FLOAT, "4");
    rt_node(m->graph, "", "Relu", "x", "y"); /* y has no type */
    AmpReport r;
    char *text = report_text(m, &r);
    cr_assert(strncmp(text, "converted 0 of 1 float nodes using 0 casts\n", 43) == 0, "%s", text);
    cr_assert_eq(r.untyped_nodes, 1);
    cr_assert_not_null(strstr(text, "note: 1 node has values of unknown type"), "%s", text);
    free(text);
    amp_report_free(&r);
    amp_model_free(m);
}
