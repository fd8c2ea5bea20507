/* The DOT printer (tools/dot.c) and node precisions (ir/precision.c) on graphs built here:
 * colours and cast labels around an fp16 MatMul, hostile names escaped, If bodies and
 * training graphs as clusters, groups, initializers, and --dot-collapse on 1000-node
 * graphs; every picture is also handed to Graphviz's `dot` when it is installed. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/runtime/rt_util.h"
#include "tools/dot.h"
#include "ir/ir.h"
#include "ir/precision.h"

/* ---- helpers ---------------------------------------------------------------------- */

static char *dot_text(const AmpModel *m, const AmpDotOptions *opt) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_not_null(f);
    amp_dot_model(f, m, opt);
    cr_assert_eq(fclose(f), 0);
    return buf;
}

/* Node statements "  n12 [" (nodes and collapsed chains; not value or legend nodes). */
static size_t count_op_boxes(const char *dot) {
    size_t n = 0;
    for (const char *p = dot; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        while (*p == ' ') p++;
        if (*p != 'n') continue;
        const char *q = p + 1;
        while (*q >= '0' && *q <= '9') q++;
        if (q > p + 1 && strncmp(q, " [", 2) == 0) n++;
    }
    return n;
}

/* Every line holds an even number of unescaped quotes: no string runs over a line. */
static void assert_strings_closed(const char *dot) {
    int quotes = 0, line = 1;
    for (const char *p = dot; *p; p++) {
        if (*p == '\\' && p[1]) {
            p++;
            continue;
        }
        if (*p == '"') quotes++;
        if (*p == '\n') {
            cr_assert_eq(quotes % 2, 0, "line %d leaves a string open", line);
            line++;
        }
    }
}

static bool have_dot(void) { return system("command -v dot >/dev/null 2>&1") == 0; }

/* Runs `dot -Tsvg` on the text; its exit status, or -1 when Graphviz is not installed
 * (the check is then skipped: scripts/setup.sh installs graphviz). */
static int run_graphviz(const char *dot) {
    if (!have_dot()) {
        /* not cr_log_warn: a warning makes Criterion 2.4 exit 1 though every test passed */
        fprintf(stderr, "note: graphviz 'dot' is not installed: rendering not checked\n");
        return -1;
    }
    char path[] = "/tmp/ampc_dot_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    size_t len = strlen(dot);
    cr_assert_eq(write(fd, dot, len), (ssize_t)len);
    close(fd);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "dot -Tsvg '%s' -o /dev/null 2>/dev/null", path);
    int rc = system(cmd);
    unlink(path);
    return rc == -1 ? 127 : WEXITSTATUS(rc);
}

Test(dot, the_graphviz_check_catches_broken_text) {
    int rc = run_graphviz("digraph ampc {\n  n1 [label=\"unclosed];\n");
    cr_assert(rc == -1 || rc != 0, "dot accepted a broken file");
}

static void assert_renders(const char *dot) {
    int rc = run_graphviz(dot);
    cr_assert(rc == -1 || rc == 0, "dot -Tsvg failed (%d) on:\n%.4000s", rc, dot);
}

/* The line that defines DOT node `id` ("  id [...];"). */
static char *node_line(const char *dot, const char *id) {
    char head[64];
    snprintf(head, sizeof head, "\n%s [", id);
    for (const char *p = dot; (p = strchr(p, '\n')) != NULL; p++) {
        const char *q = p + 1;
        while (*q == ' ') q++;
        if (strncmp(q, head + 1, strlen(head + 1)) != 0) continue;
        size_t n = strcspn(q, "\n");
        char *s = malloc(n + 1);
        memcpy(s, q, n);
        s[n] = '\0';
        return s;
    }
    cr_assert_fail("no node %s in:\n%.3000s", id, dot);
    return NULL;
}

static AmpNode *cast(AmpGraph *g, const char *name, const char *in, const char *out, int to) {
    AmpNode *n = rt_node(g, "", "Cast", in, out);
    n->name = name;
    amp_node_add_attr(n, "to", AMP_ATTR_INT)->i = to;
    return n;
}

/* x:fp32[2,3] -> Cast -> MatMul(fp16, W:fp16[3,4]) -> Cast -> y:fp32[2,4]. */
static AmpModel *fp16_matmul_model(AmpNode **nodes) {
    AmpModel *m = rt_model(17);
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "2,3");
    static const uint16_t w[12] = {0x3c00};
    static const int64_t wd[2] = {3, 4};
    rt_init(g, "W", AMP_DT_FLOAT16, 2, wd, w);
    nodes[0] = cast(g, "to16", "x", "xh", AMP_DT_FLOAT16);
    rt_type(m, rt_val(g, "xh"), AMP_DT_FLOAT16, "2,3");
    nodes[1] = rt_node(g, "", "MatMul", "xh,W", "yh");
    nodes[1]->name = "mm";
    rt_type(m, rt_val(g, "yh"), AMP_DT_FLOAT16, "2,4");
    nodes[2] = cast(g, "to32", "yh", "y", AMP_DT_FLOAT);
    rt_output(g, "y", AMP_DT_FLOAT, "2,4");
    return m;
}

/* ---- precision -------------------------------------------------------------------- */

Test(precision, from_the_dtypes_of_float_slots_and_outputs) {
    AmpNode *n[3];
    AmpModel *m = fp16_matmul_model(n);
    cr_assert_eq(amp_node_precision(n[0]), AMP_PREC_CAST);
    cr_assert_eq(amp_node_precision(n[1]), AMP_PREC_FP16);
    cr_assert(amp_cast_is_amp(n[0]) && amp_cast_is_amp(n[2]));
    int from, to;
    cr_assert(amp_cast_dtypes(n[2], &from, &to));
    cr_assert(from == AMP_DT_FLOAT16 && to == AMP_DT_FLOAT);
    AmpGraph *g = m->graph;
    /* Reshape's shape input is no float slot; an int64 output is no float data. */
    AmpNode *sh = rt_node(g, "", "Shape", "yh", "s");
    rt_type(m, rt_val(g, "s"), AMP_DT_INT64, "2");
    cr_assert_eq(amp_node_precision(sh), AMP_PREC_NONE);
    AmpNode *r = rt_node(g, "", "Reshape", "y,s", "r");
    cr_assert_eq(amp_node_precision(r), AMP_PREC_FP32);
    /* Unknown ops: every input counts. */
    AmpNode *u = rt_node(g, "my.domain", "Mystery", "s,yh", "");
    cr_assert_eq(amp_node_precision(u), AMP_PREC_FP16);
    AmpNode *b = rt_node(g, "", "Relu", "bx", "by");
    rt_type(m, rt_val(g, "bx"), AMP_DT_BFLOAT16, "1");
    cr_assert_eq(amp_node_precision(b), AMP_PREC_BF16);
    cr_assert(amp_precision_is_16(AMP_PREC_BF16) && !amp_precision_is_16(AMP_PREC_FP32));
    /* A Cast whose output type is unknown still has its target from `to`. */
    AmpNode *c = cast(g, "c", "s", "sf", AMP_DT_FLOAT);
    cr_assert(amp_cast_dtypes(c, &from, &to) && from == AMP_DT_INT64 && to == AMP_DT_FLOAT);
    cr_assert_not(amp_cast_is_amp(c));
    amp_model_free(m);
}

/* A node's group is its origin (the pass that made it), not its name: in memory a name
 * alone groups nothing; in a file the name is the origin, and loading restores it. */
Test(precision, groups_by_origin) {
    AmpModel *m = rt_model(17);
    rt_input(m->graph, "a", AMP_DT_FLOAT, "");
    rt_input(m->graph, "b", AMP_DT_FLOAT, "");
    AmpNode *a = rt_node(m->graph, "", "Mul", "a,b", "c");
    a->name = "amp_loss_scale/mul";
    a->origin = AMP_ORIGIN_LOSS_SCALE;
    AmpNode *o = rt_node(m->graph, "", "Mul", "a,b", "d");
    o->name = "amp_cast_0";
    AmpNode *named = rt_node(m->graph, "", "Mul", "a,b", "e");
    named->name = "amp_loss_scale_lookalike"; /* the user's own node, whatever its name */
    rt_output(m->graph, "c", AMP_DT_FLOAT, "");
    rt_output(m->graph, "d", AMP_DT_FLOAT, "");
    rt_output(m->graph, "e", AMP_DT_FLOAT, "");
    cr_assert_geq(amp_node_group_count(), 1);
    int k = amp_node_group(a);
    cr_assert_geq(k, 0);
    cr_assert_str_eq(amp_node_group_at((size_t)k)->label, "loss scaling");
    cr_assert_eq(amp_node_group(o), -1);
    cr_assert_eq(amp_node_group(named), -1);
    cr_assert_null(amp_node_group_at(amp_node_group_count()));
    cr_assert_eq(amp_origin_of_name("amp_loss_scale/mul"), AMP_ORIGIN_LOSS_SCALE);
    cr_assert_eq(amp_origin_of_name("amp_cast_0"), AMP_ORIGIN_MODEL);
    cr_assert_eq(amp_origin_of_name(NULL), AMP_ORIGIN_MODEL);

    /* Saved and loaded: the names are as they were, and the origin comes back from them. */
    AmpStatus st = {0};
    uint8_t *bytes = NULL;
    size_t len = 0;
    cr_assert_eq(amp_model_save_bytes(m, &bytes, &len, &st), AMP_OK, "%s", st.msg);
    AmpModel *back = NULL;
    cr_assert_eq(amp_model_load_bytes(bytes, len, NULL, NULL, &back, &st), AMP_OK, "%s", st.msg);
    AmpNode *n = back->graph->first;
    cr_assert(n && n->next && n->next->next);
    cr_assert_str_eq(n->name, "amp_loss_scale/mul");
    cr_assert_eq(n->origin, AMP_ORIGIN_LOSS_SCALE);
    cr_assert_eq(amp_node_group(n), k);
    cr_assert_eq(n->next->origin, AMP_ORIGIN_MODEL);
    /* A file cannot tell this one from the pass's: the name is all it keeps. */
    cr_assert_eq(n->next->next->origin, AMP_ORIGIN_LOSS_SCALE);
    free(bytes);
    amp_model_free(back);
    amp_model_free(m);
}

/* ---- the picture ------------------------------------------------------------------ */

Test(dot, fp16_matmul_between_casts) {
    AmpNode *n[3];
    AmpModel *m = fp16_matmul_model(n);
    char *d = dot_text(m, NULL);
    cr_assert(strncmp(d, "digraph ampc {", 14) == 0, "%s", d);
    char id[32];
    snprintf(id, sizeof id, "n%u", n[1]->id);
    char *mm = node_line(d, id);
    cr_assert_not_null(strstr(mm, "fillcolor=\"#a6d96a\""), "MatMul not fp16-green: %s", mm);
    cr_assert_not_null(strstr(mm, "label=\"MatMul\\nmm\""), "%s", mm);
    snprintf(id, sizeof id, "n%u", n[0]->id);
    char *c0 = node_line(d, id);
    cr_assert_not_null(strstr(c0, "shape=cds"), "%s", c0);
    cr_assert_not_null(strstr(c0, "Cast fp32\xE2\x86\x92" "fp16\\nto16"), "%s", c0);
    snprintf(id, sizeof id, "n%u", n[2]->id);
    char *c2 = node_line(d, id);
    cr_assert_not_null(strstr(c2, "Cast fp16\xE2\x86\x92" "fp32"), "%s", c2);
    /* Edges carry the dtype and the static shape; 16-bit ones are green. */
    char edge[96];
    snprintf(edge, sizeof edge, "n%u -> n%u [color=\"#1a9850\", penwidth=1.6, label=\"fp16[2,3]\"]",
             n[0]->id, n[1]->id);
    cr_assert_not_null(strstr(d, edge), "no %s in:\n%s", edge, d);
    snprintf(edge, sizeof edge, "n%u -> om_0 [color=\"#b35806\", label=\"fp32[2,4]\"]", n[2]->id);
    cr_assert_not_null(strstr(d, edge), "no %s in:\n%s", edge, d);
    /* The graph input and output as small nodes; the legend; W hidden by default. */
    cr_assert_not_null(strstr(d, "shape=invhouse, style=filled, fillcolor=white, fontsize=9, label=\"x\\nfp32[2,3]\""),
                       "%s", d);
    cr_assert_not_null(strstr(d, "subgraph cluster_legend"), "%s", d);
    cr_assert_not_null(strstr(d, "legend_fp16 [fillcolor=\"#a6d96a\""), "%s", d);
    cr_assert_null(strstr(d, "label=\"W"), "initializers are hidden by default:\n%s", d);
    assert_strings_closed(d);
    assert_renders(d);
    free(mm), free(c0), free(c2), free(d);

    AmpDotOptions o = {.initializers = true, .no_legend = true};
    d = dot_text(m, &o);
    cr_assert_null(strstr(d, "cluster_legend"), "%s", d);
    cr_assert_not_null(strstr(d, "shape=note, style=filled, fillcolor=white, fontsize=9, label=\"W\\nfp16[3,4]\""),
                       "%s", d);
    cr_assert_eq(count_op_boxes(d), 3);
    assert_renders(d);
    free(d);
    amp_model_free(m);
}

Test(dot, output_is_deterministic) {
    AmpNode *n[3];
    AmpModel *m = fp16_matmul_model(n);
    AmpDotOptions o = {.collapse = true, .initializers = true};
    char *a = dot_text(m, &o), *b = dot_text(m, &o);
    cr_assert_str_eq(a, b);
    free(a), free(b);
    amp_model_free(m);
}

Test(dot, hostile_names_are_escaped) {
    AmpModel *m = rt_model(17);
    AmpGraph *g = m->graph;
    g->name = "g\"}\ndigraph x {";
    rt_input(g, "in\"put\\N", AMP_DT_FLOAT, "2");
    AmpNode *n = rt_node(g, "", "Relu", "in\"put\\N", "o\x01ut\xff\xfe");
    n->name = "a\"b\\c\nd\re\x7f\\G";
    rt_type(m, rt_val(g, "o\x01ut\xff\xfe"), AMP_DT_FLOAT, "2");
    rt_output(g, "o\x01ut\xff\xfe", AMP_DT_FLOAT, "2");
    AmpNode *l = rt_node(g, "x\"y", "Op\"", "o\x01ut\xff\xfe", "");
    char longname[300];
    memset(longname, 'z', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    l->name = longname;
    char *d = dot_text(m, NULL);
    assert_strings_closed(d);
    cr_assert_not_null(strstr(d, "Relu\\na\\\"b\\\\c\\nd\\\\x0De\\\\x7F\\\\G\""), "%s", d);
    cr_assert_not_null(strstr(d, "label=\"in\\\"put\\\\N\\nfp32[2]\""), "%s", d);
    cr_assert_not_null(strstr(d, "label=\"o\\\\x01ut\\\\xFF\\\\xFE\\nfp32[2]\""), "%s", d);
    cr_assert_not_null(strstr(d, "label=\"x\\\"y::Op\\\""), "%s", d);
    cr_assert_not_null(strstr(d, "graph 'g\\\"}\\ndigraph x {'"), "%s", d);
    longname[61] = '\0'; /* names are cut after 60 bytes */
    cr_assert_null(strstr(d, longname), "long name not cut");
    longname[60] = '\0';
    char cut[80];
    snprintf(cut, sizeof cut, "\\n%s\xE2\x80\xA6\"", longname);
    cr_assert_not_null(strstr(d, cut), "%s", d);
    assert_renders(d);
    free(d);
    amp_model_free(m);
}

/* y = If(c) then Relu(x) else Neg(x), x from the outer scope. */
Test(dot, if_bodies_are_clusters) {
    AmpModel *m = rt_model(17);
    AmpGraph *g = m->graph;
    rt_input(g, "c", AMP_DT_BOOL, "");
    rt_input(g, "x", AMP_DT_FLOAT16, "4");
    AmpNode *ifn = rt_node(g, "", "If", "c", "y");
    ifn->name = "if1";
    const char *attr[2] = {"then_branch", "else_branch"}, *op[2] = {"Relu", "Neg"};
    AmpNode *inner[2];
    for (int k = 0; k < 2; k++) {
        AmpGraph *b = amp_graph_new(m, g);
        b->owner = ifn;
        b->name = attr[k];
        amp_node_add_attr(ifn, attr[k], AMP_ATTR_GRAPH)->g = b;
        inner[k] = rt_node(b, "", op[k], "x", k ? "e" : "t");
        rt_output(b, k ? "e" : "t", AMP_DT_FLOAT16, "4");
    }
    rt_output(g, "y", AMP_DT_FLOAT16, "4");
    char *d = dot_text(m, NULL);
    char want[160];
    for (int k = 0; k < 2; k++) {
        snprintf(want, sizeof want, "subgraph cluster_b%u_%d {", ifn->id, k);
        const char *cl = strstr(d, want);
        cr_assert_not_null(cl, "no %s in:\n%s", want, d);
        snprintf(want, sizeof want, "label=\"If 'if1' \xC2\xB7 %s\";", attr[k]);
        cr_assert_not_null(strstr(cl, want), "%s", d);
        /* The body's node and output sit inside its cluster, before it closes. */
        snprintf(want, sizeof want, "n%u [", inner[k]->id);
        const char *in = strstr(cl, want), *close = strstr(cl, "\n  }\n");
        cr_assert(in && close && in < close, "n%u outside its cluster:\n%s", inner[k]->id, d);
        /* The outer x flows in; the body's output flows to the If node. */
        snprintf(want, sizeof want, "vm_1 -> n%u", inner[k]->id);
        cr_assert_not_null(strstr(d, want), "%s", d);
        snprintf(want, sizeof want, "ob%u_%d_0 -> n%u [style=dashed", ifn->id, k, ifn->id);
        cr_assert_not_null(strstr(d, want), "%s", d);
    }
    snprintf(want, sizeof want, "n%u", ifn->id);
    char *line = node_line(d, want);
    cr_assert_not_null(strstr(line, "shape=box3d"), "%s", line);
    free(line);
    assert_strings_closed(d);
    assert_renders(d);
    free(d);
    amp_model_free(m);
}

Test(dot, training_graphs_and_groups_are_clusters) {
    AmpModel *m = rt_model(17);
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "4");
    rt_node(g, "", "Relu", "x", "loss");
    rt_output(g, "loss", AMP_DT_FLOAT, "4");
    AmpGraph *alg = rt_training(m);
    AmpNode *s = rt_node(alg, "", "Mul", "loss,x", "scaled");
    s->name = "amp_loss_scale/seed"; /* as the loss-scaling pass makes them */
    s->origin = AMP_ORIGIN_LOSS_SCALE;
    AmpNode *t = rt_node(alg, "", "Add", "scaled,x", "z");
    t->name = "amp_loss_scale/next";
    t->origin = AMP_ORIGIN_LOSS_SCALE;
    rt_node(alg, "", "Neg", "z", "w");
    rt_output(alg, "w", AMP_DT_FLOAT, "4");
    char *d = dot_text(m, NULL);
    const char *cl = strstr(d, "subgraph cluster_t0a {");
    cr_assert_not_null(cl, "%s", d);
    cr_assert_not_null(strstr(cl, "label=\"training_info[0] algorithm\";"), "%s", d);
    const char *grp = strstr(cl, "subgraph cluster_t0a_group0 {");
    cr_assert_not_null(grp, "%s", d);
    cr_assert_not_null(strstr(grp, "label=\"loss scaling\";"), "%s", d);
    char want[32];
    snprintf(want, sizeof want, "n%u [", s->id);
    cr_assert(strstr(grp, want) && strstr(grp, want) < strstr(grp, "\n    }\n"), "%s", d);
    assert_renders(d);
    free(d);
    amp_model_free(m);
}

/* ---- collapse on 1000-node graphs ---------------------------------------------------- */

/* x -> 1000 unary nodes -> y, all fp32 (alternating Relu, Neg, Abs, Sigmoid). */
static AmpModel *chain_model(int n_nodes) {
    AmpModel *m = rt_model(17);
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "8");
    static const char *const ops[] = {"Relu", "Neg", "Abs", "Sigmoid"};
    char in[32] = "x", out[32];
    for (int i = 0; i < n_nodes; i++) {
        snprintf(out, sizeof out, "t%d", i);
        rt_node(g, "", ops[i % 4], in, out);
        rt_type(m, rt_val(g, out), AMP_DT_FLOAT, "8");
        memcpy(in, out, sizeof in);
    }
    rt_output(g, in, AMP_DT_FLOAT, "8");
    return m;
}

Test(dot, collapse_folds_a_1000_node_chain_into_one_box, .timeout = 300) {
    AmpModel *m = chain_model(1000);
    char *full = dot_text(m, NULL);
    cr_assert_eq(count_op_boxes(full), 1000);
    AmpDotOptions o = {.collapse = true};
    char *d = dot_text(m, &o);
    cr_assert_eq(count_op_boxes(d), 1, "%.3000s", d);
    cr_assert_not_null(strstr(d, "peripheries=2"), "%s", d);
    cr_assert_not_null(strstr(d, "label=\"1000 nodes: Relu \xE2\x86\x92 Neg \xE2\x86\x92 Abs \xE2\x86\x92 "
                                 "\xE2\x80\xA6 \xE2\x86\x92 Abs \xE2\x86\x92 Sigmoid\\nRelu_"),
                      "%s", d);
    cr_assert_not_null(strstr(d, "legend_chain"), "%s", d);
    /* Only the edges into and out of the box are left. */
    cr_assert_not_null(strstr(d, "vm_0 -> n"), "%s", d);
    cr_assert_not_null(strstr(d, " -> om_0 [color=\"#b35806\", label=\"fp32[8]\"]"), "%s", d);
    size_t edges = 0;
    for (const char *p = d; (p = strstr(p, " [color=\"")) != NULL; p++) edges++; /* data edges */
    cr_assert_eq(edges, 2, "%s", d);
    assert_renders(d);
    free(full), free(d);
    amp_model_free(m);
}

/* 1000 nodes: 10 runs of 99 nodes, fp32 and fp16 in turn, with a Cast between runs, and
 * one more node reading the middle of the first run (so a chain also ends at fan-out). */
Test(dot, collapse_keeps_precisions_and_casts_apart, .timeout = 300) {
    AmpModel *m = rt_model(17);
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "8");
    char in[32] = "x", out[32];
    int made = 0;
    for (int run = 0; run < 10; run++) {
        int dt = run % 2 ? AMP_DT_FLOAT16 : AMP_DT_FLOAT;
        if (run) {
            snprintf(out, sizeof out, "c%d", run);
            cast(g, "cast", in, out, dt);
            rt_type(m, rt_val(g, out), dt, "8");
            memcpy(in, out, sizeof in);
            made++;
        }
        for (int i = 0; i < 99; i++) {
            snprintf(out, sizeof out, "r%d_%d", run, i);
            rt_node(g, "", i % 2 ? "Neg" : "Relu", in, out);
            rt_type(m, rt_val(g, out), dt, "8");
            memcpy(in, out, sizeof in);
            made++;
        }
    }
    cr_assert_eq(made, 999);
    rt_output(g, in, AMP_DT_FLOAT16, "8");
    rt_node(g, "", "Relu", "r0_50", "side"); /* a second use of r0_50: the chain breaks there */
    rt_type(m, rt_val(g, "side"), AMP_DT_FLOAT, "8");
    rt_output(g, "side", AMP_DT_FLOAT, "8");
    made++;
    cr_assert_eq(g->n_nodes, 1000);
    char *full = dot_text(m, NULL);
    cr_assert_eq(count_op_boxes(full), 1000);
    AmpDotOptions o = {.collapse = true};
    char *d = dot_text(m, &o);
    /* run 0 splits at r0_50 (two boxes), runs 1..9 one box each, 9 casts, the side Relu. */
    cr_assert_eq(count_op_boxes(d), 2 + 9 + 9 + 1, "%.4000s", d);
    cr_assert_not_null(strstr(d, "label=\"51 nodes: "), "%s", d);
    cr_assert_not_null(strstr(d, "label=\"48 nodes: "), "%s", d);
    cr_assert_not_null(strstr(d, "label=\"99 nodes: "), "%s", d);
    cr_log_info("1000-node graph: %zu boxes drawn, %zu with --dot-collapse", count_op_boxes(full),
                count_op_boxes(d));
    assert_strings_closed(d);
    assert_renders(d);
    free(full), free(d);
    amp_model_free(m);
}

Test(dot, writes_files_atomically) {
    AmpNode *n[3];
    AmpModel *m = fp16_matmul_model(n);
    char dir[] = "/tmp/ampc_dotf_XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof path, "%s/g.dot", dir);
    AmpStatus st = {AMP_OK, ""};
    cr_assert_eq(amp_dot_model_file(path, m, NULL, &st), AMP_OK, "%s", st.msg);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    char head[16] = "";
    cr_assert_not_null(fgets(head, sizeof head, f));
    fclose(f);
    cr_assert_str_eq(head, "digraph ampc {\n");
    char bad[160];
    snprintf(bad, sizeof bad, "%s/no/such/dir/g.dot", dir);
    cr_assert_eq(amp_dot_model_file(bad, m, NULL, &st), AMP_ERR_INPUT);
    cr_assert_not_null(strstr(st.msg, bad), "%s", st.msg);
    cr_assert_eq(unlink(path), 0);
    cr_assert_eq(rmdir(dir), 0, "a temporary file was left behind");
    amp_model_free(m);
}
