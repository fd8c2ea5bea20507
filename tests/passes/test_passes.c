/* The pass manager (passes/passes.c) and dead code elimination (passes/dce.c): pipeline
 * parsing and its usage errors, --dump-after, the verifier between passes catching a
 * deliberately broken pass, and what dce removes and keeps. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "passes/passes.h"

/* ---- building graphs tersely ----------------------------------------------------- */

static AmpValue *val(AmpGraph *g, const char *name) {
    AmpValue *v = amp_graph_lookup(g, name);
    return v ? v : amp_graph_value(g, name);
}

/* outs = op(ins), one input and one output name at most ("" for none), appended to g. */
static AmpNode *add_node(AmpGraph *g, const char *domain, const char *op, const char *name,
                         const char *in0, const char *in1, const char *out) {
    int ni = in1 ? 2 : (in0 ? 1 : 0);
    AmpNode *n = amp_node_new(g, domain, op, name, ni, out ? 1 : 0);
    cr_assert(n);
    if (in0) amp_node_set_input(n, 0, val(g, in0));
    if (in1) amp_node_set_input(n, 1, val(g, in1));
    if (out) amp_node_set_output(n, 0, amp_graph_value(g, out));
    amp_node_append(g, n);
    return n;
}

static AmpNode *unary(AmpGraph *g, const char *op, const char *name, const char *in,
                      const char *out) {
    return add_node(g, "", op, name, in, NULL, out);
}

static void set_f32(AmpModel *m, AmpValue *v, int64_t d0) {
    v->type.kind = AMP_TYPE_TENSOR;
    v->type.dtype = AMP_DT_FLOAT;
    v->type.rank = 1;
    v->type.dims = amp_arena_calloc(&m->arena, 1, sizeof(AmpDim));
    v->type.dims[0].value = d0;
}

static AmpGraph *subgraph(AmpNode *n, const char *attr, const char *name) {
    AmpGraph *sg = amp_graph_new(n->graph->model, n->graph);
    cr_assert(sg);
    sg->owner = n;
    sg->name = name;
    amp_node_add_attr(n, attr, AMP_ATTR_GRAPH)->g = sg;
    return sg;
}

/* x -> r1 = Relu -> y (output); x -> d1 -> d2 (dead chain). */
static AmpModel *model_with_dead_chain(void) {
    AmpModel *m = amp_model_new();
    cr_assert(m);
    AmpGraph *g = m->graph;
    AmpValue *x = amp_graph_value(g, "x");
    set_f32(m, x, 2);
    amp_graph_add_input(g, x);
    unary(g, "Relu", "d1", "x", "a");
    unary(g, "Relu", "r1", "x", "y");
    unary(g, "Neg", "d2", "a", "b");
    set_f32(m, val(g, "y"), 2);
    amp_graph_add_output(g, val(g, "y"));
    return m;
}

static bool has_node(const AmpGraph *g, const char *name) {
    for (const AmpNode *n = g->first; n; n = n->next)
        if (n->name && strcmp(n->name, name) == 0) return true;
    return false;
}

static AmpStatus st;

static void run_ok(AmpModel *m, const char *list) {
    amp_status_clear(&st);
    AmpPipelineOptions o = {.verify_each = true};
    cr_assert_eq(amp_run_pipeline(m, list, &o, &st), AMP_OK, "%s: %s", list, st.msg);
}

/* ---- the registry and pipeline parsing ------------------------------------------- */

Test(pipeline, registry_lists_every_pass) {
    cr_assert_geq(amp_pass_count(), 2);
    for (size_t i = 0; i < amp_pass_count(); i++) {
        const AmpPass *p = amp_pass_at(i);
        cr_assert(p && p->name && p->help && p->run);
        cr_assert_eq(amp_pass_find(p->name), p);
    }
    cr_assert_null(amp_pass_at(amp_pass_count()));
    cr_assert_null(amp_pass_find("nope"));
    cr_assert(amp_pass_find("dce"));
    cr_assert(amp_pass_find("infer"));
}

Test(pipeline, none_runs_nothing) {
    AmpModel *m = model_with_dead_chain();
    run_ok(m, "none");
    cr_assert_eq(m->graph->n_nodes, 3);
    run_ok(m, " none ");
    cr_assert_eq(m->graph->n_nodes, 3);
    amp_model_free(m);
}

Test(pipeline, unknown_pass_is_a_usage_error) {
    AmpModel *m = model_with_dead_chain();
    amp_status_clear(&st);
    cr_assert_eq(amp_run_pipeline(m, "dce,bogus", NULL, &st), AMP_ERR_USAGE);
    cr_assert(strstr(st.msg, "unknown pass 'bogus'"), "%s", st.msg);
    cr_assert(strstr(st.msg, "infer") && strstr(st.msg, "dce"), "known passes: %s", st.msg);
    /* Checked before anything runs: dce did not remove the dead chain. */
    cr_assert_eq(m->graph->n_nodes, 3);
    amp_model_free(m);
}

Test(pipeline, empty_entry_and_none_inside_a_list_are_usage_errors) {
    AmpModel *m = model_with_dead_chain();
    const char *bad[] = {" , ", "dce,,dce", "dce,", "dce,none"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        amp_status_clear(&st);
        cr_assert_eq(amp_run_pipeline(m, bad[i], NULL, &st), AMP_ERR_USAGE, "'%s'", bad[i]);
    }
    /* An empty or blank list runs nothing, as `ampc --passes ''` does. */
    const char *empty[] = {"", "  ", " none "};
    for (size_t i = 0; i < sizeof empty / sizeof empty[0]; i++) {
        cr_assert_eq(amp_run_pipeline(m, empty[i], NULL, &st), AMP_OK, "'%s': %s", empty[i], st.msg);
        cr_assert_eq(m->graph->n_nodes, 3);
    }
    amp_model_free(m);
}

Test(pipeline, dump_after_must_name_a_pass_in_the_list) {
    AmpModel *m = model_with_dead_chain();
    AmpPipelineOptions o = {.dump_after = "infer"};
    amp_status_clear(&st);
    cr_assert_eq(amp_run_pipeline(m, "dce", &o, &st), AMP_ERR_USAGE);
    cr_assert(strstr(st.msg, "pass 'infer' is not in the pipeline 'dce'"), "%s", st.msg);
    cr_assert_eq(m->graph->n_nodes, 3);
    amp_status_clear(&st);
    cr_assert_eq(amp_run_pipeline(m, "none", &o, &st), AMP_ERR_USAGE);
    /* No pass at all is told apart (the CLI's check before loading is this one). */
    o.dump_after = "bogus";
    amp_status_clear(&st);
    cr_assert_eq(amp_run_pipeline(m, "dce", &o, &st), AMP_ERR_USAGE);
    cr_assert(strstr(st.msg, "unknown pass 'bogus' (known passes: infer, dce"), "%s", st.msg);
    amp_model_free(m);
}

Test(pipeline, default_pipeline_parses_and_runs) {
    AmpModel *m = model_with_dead_chain();
    run_ok(m, amp_default_pipeline());
    amp_model_free(m);
    m = model_with_dead_chain();
    amp_status_clear(&st);
    cr_assert_eq(amp_run_pipeline(m, NULL, NULL, &st), AMP_OK, "%s", st.msg);
    amp_model_free(m);
}

Test(pipeline, dump_after_prints_the_ir_after_that_pass) {
    AmpModel *m = model_with_dead_chain();
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert(f);
    AmpPipelineOptions o = {.verify_each = true, .dump_after = "dce", .dump_to = f};
    amp_status_clear(&st);
    cr_assert_eq(amp_run_pipeline(m, "infer, dce", &o, &st), AMP_OK, "%s", st.msg);
    fclose(f);
    cr_assert(strstr(buf, "# after pass 'dce'\n"), "%s", buf);
    cr_assert(strstr(buf, "  input x: float[2]\n"), "%s", buf);
    cr_assert(strstr(buf, "  y:float[2] = Relu(x)  # r1\n"), "%s", buf);
    cr_assert(strstr(buf, "  output y: float[2]\n"), "%s", buf);
    cr_assert_null(strstr(buf, "d1"), "dead nodes are gone after dce: %s", buf);
    free(buf);
    amp_model_free(m);
}

/* ---- the verifier between passes ------------------------------------------------- */

/* A pass with a bug: it adds a node reading a value nothing defines. */
static AmpCode break_graph(AmpModel *m, const AmpPassOptions *opt, AmpStatus *s) {
    (void)opt;
    (void)s;
    unary(m->graph, "Relu", "broken", "nowhere", "q");
    return AMP_OK;
}

static AmpCode fail_quietly(AmpModel *m, const AmpPassOptions *opt, AmpStatus *s) {
    (void)m;
    (void)opt;
    (void)s;
    return AMP_ERR_UNSUPPORTED;
}

Test(pipeline, verify_each_names_the_pass_that_broke_the_graph) {
    static const AmpPass breaker = {"breaker", "adds an undefined use", break_graph};
    const AmpPass *list[] = {amp_pass_find("dce"), &breaker, amp_pass_find("dce")};
    AmpModel *m = model_with_dead_chain();
    AmpPipelineOptions o = {.verify_each = true};
    amp_status_clear(&st);
    cr_assert_eq(amp_run_passes(m, list, 3, &o, &st), AMP_ERR_INTERNAL);
    cr_assert(strstr(st.msg, "pass 'breaker' broke the graph: graph 'main': node 'broken' (Relu): "
                             "input 0 'nowhere' is undefined"),
              "%s", st.msg);
    amp_model_free(m);

    /* Without verify_each the pipeline does not notice; the final verify would. */
    m = model_with_dead_chain();
    o.verify_each = false;
    amp_status_clear(&st);
    cr_assert_eq(amp_run_passes(m, list, 2, &o, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(amp_verify_model(m, &st), AMP_ERR_INPUT);
    amp_model_free(m);
}

Test(pipeline, verify_each_rejects_an_invalid_input_model) {
    AmpModel *m = model_with_dead_chain();
    unary(m->graph, "Relu", "bad", "ghost", "q");
    AmpPipelineOptions o = {.verify_each = true};
    amp_status_clear(&st);
    cr_assert_eq(amp_run_pipeline(m, "dce", &o, &st), AMP_ERR_INPUT);
    cr_assert(strstr(st.msg, "input model: graph 'main': node 'bad'"), "%s", st.msg);
    amp_model_free(m);
}

Test(pipeline, a_failing_pass_is_named) {
    static const AmpPass quiet = {"quiet", "fails without a message", fail_quietly};
    const AmpPass *list[] = {&quiet};
    AmpModel *m = model_with_dead_chain();
    amp_status_clear(&st);
    cr_assert_eq(amp_run_passes(m, list, 1, NULL, &st), AMP_ERR_UNSUPPORTED);
    cr_assert(strstr(st.msg, "pass 'quiet': "), "%s", st.msg);
    amp_model_free(m);
}

/* after_pass hears of each pass that succeeded, in order, and of none after a failure. */
static void note_pass(void *ctx, const char *name) {
    char *log = ctx;
    strcat(log, name);
    strcat(log, ";");
}

Test(pipeline, after_pass_is_called_after_each_pass_that_succeeded) {
    char log[256] = "";
    AmpModel *m = model_with_dead_chain();
    AmpPipelineOptions o = {.after_pass = note_pass, .after_pass_ctx = log};
    amp_status_clear(&st);
    cr_assert_eq(amp_run_pipeline(m, "infer,dce,infer", &o, &st), AMP_OK, "%s", st.msg);
    cr_assert_str_eq(log, "infer;dce;infer;");
    amp_model_free(m);

    static const AmpPass quiet = {"quiet", "fails without a message", fail_quietly};
    const AmpPass *list[] = {amp_pass_find("dce"), &quiet, amp_pass_find("infer")};
    log[0] = '\0';
    m = model_with_dead_chain();
    amp_status_clear(&st);
    cr_assert_eq(amp_run_passes(m, list, 3, &o, &st), AMP_ERR_UNSUPPORTED);
    cr_assert_str_eq(log, "dce;");
    amp_model_free(m);
}

/* ---- dce ------------------------------------------------------------------------- */

Test(dce, removes_a_dead_chain_and_keeps_outputs) {
    AmpModel *m = model_with_dead_chain();
    run_ok(m, "dce");
    cr_assert_eq(m->graph->n_nodes, 1);
    cr_assert(has_node(m->graph, "r1"));
    cr_assert_eq(val(m->graph, "x")->n_uses, 1);
    cr_assert_null(val(m->graph, "a")->producer);
    run_ok(m, "dce"); /* a fixed point: nothing more to do */
    cr_assert_eq(m->graph->n_nodes, 1);
    amp_model_free(m);
}

Test(dce, keeps_values_used_only_inside_a_subgraph) {
    AmpModel *m = model_with_dead_chain();
    AmpGraph *g = m->graph;
    AmpValue *c = amp_graph_value(g, "c");
    amp_graph_add_input(g, c);
    unary(g, "Neg", "outer", "x", "t"); /* t is read only by the If's branches */
    unary(g, "Neg", "outer2", "x", "t2"); /* t2 is returned as it is by else */
    AmpNode *n = unary(g, "If", "if0", "c", "r");
    AmpGraph *then = subgraph(n, "then_branch", "then");
    unary(then, "Relu", "inner", "t", "tt");
    unary(then, "Relu", "inner_dead", "t", "unused");
    amp_graph_add_output(then, val(then, "tt"));
    AmpGraph *els = subgraph(n, "else_branch", "else");
    amp_graph_add_output(els, val(g, "t2"));
    val(g, "t2")->flags &= ~(unsigned)AMP_VALUE_OUTPUT; /* as the loader leaves it */
    amp_graph_add_output(g, val(g, "r"));
    run_ok(m, "dce");
    cr_assert(has_node(g, "outer") && has_node(g, "outer2") && has_node(g, "if0"));
    cr_assert(has_node(then, "inner"));
    cr_assert_not(has_node(then, "inner_dead"));
    cr_assert_not(has_node(g, "d1") || has_node(g, "d2"));
    amp_model_free(m);
}

Test(dce, removes_a_dead_if_with_its_body_and_what_only_the_body_read) {
    AmpModel *m = model_with_dead_chain();
    AmpGraph *g = m->graph;
    amp_graph_add_input(g, amp_graph_value(g, "c"));
    unary(g, "Neg", "outer", "x", "t");
    AmpNode *n = unary(g, "If", "if0", "c", "r"); /* r unused */
    AmpGraph *then = subgraph(n, "then_branch", "then");
    unary(then, "Relu", "inner", "t", "tt");
    amp_graph_add_output(then, val(then, "tt"));
    AmpGraph *els = subgraph(n, "else_branch", "else");
    amp_graph_add_output(els, val(g, "t"));
    run_ok(m, "dce");
    cr_assert_eq(g->n_nodes, 1, "left: %zu nodes", g->n_nodes);
    cr_assert(has_node(g, "r1"));
    cr_assert_eq(val(g, "t")->n_uses, 0);
    cr_assert_eq(val(g, "c")->n_uses, 0);
    amp_model_free(m);
}

Test(dce, keeps_custom_domain_ops_and_what_they_read) {
    AmpModel *m = model_with_dead_chain();
    AmpGraph *g = m->graph;
    unary(g, "Neg", "feeds_custom", "x", "f");
    add_node(g, "com.example", "Print", "custom", "f", NULL, "p"); /* output unused */
    cr_assert(amp_model_import_opset(m, "", 17) && amp_model_import_opset(m, "com.example", 1));
    unary(g, "NoSuchOnnxOp", "unknown_default", "x", "u"); /* default domain: may go */
    run_ok(m, "dce");
    cr_assert(has_node(g, "custom") && has_node(g, "feeds_custom"));
    cr_assert_not(has_node(g, "unknown_default"));
    amp_model_free(m);
}

Test(dce, keeps_what_training_info_binds) {
    AmpModel *m = model_with_dead_chain();
    AmpTensor *t = amp_arena_alloc(&m->arena, sizeof *t);
    t->dtype = AMP_DT_FLOAT;
    t->has = AMP_TENSOR_HAS_DTYPE;
    amp_graph_add_initializer(m->graph, amp_graph_value(m->graph, "w"), t);
    m->training = amp_arena_calloc(&m->arena, 1, sizeof *m->training);
    m->n_training = 1;
    AmpTrainingInfo *ti = &m->training[0];
    ti->algorithm = amp_graph_new(m, m->graph);
    AmpGraph *alg = ti->algorithm;
    add_node(alg, "", "Sub", "step", "w", "x", "w_new");
    unary(alg, "Neg", "alg_dead", "w", "nothing");
    amp_graph_add_output(alg, val(alg, "w_new"));
    ti->update_bindings = amp_arena_calloc(&m->arena, 1, sizeof *ti->update_bindings);
    ti->update_bindings[0] = (AmpStrPair){"w", "w_new"};
    ti->n_update_bindings = 1;
    run_ok(m, "dce");
    cr_assert(has_node(alg, "step"));
    cr_assert_not(has_node(alg, "alg_dead"));
    cr_assert_eq(m->graph->n_nodes, 1);
    amp_model_free(m);
}

/* A long dead chain whose every node also reads x: removing x's 300k uses one at a time
 * would be quadratic. */
Test(dce, long_dead_chain_with_wide_fan_out_is_linear, .timeout = 20) {
    AmpModel *m = model_with_dead_chain();
    AmpGraph *g = m->graph;
    AmpValue *x = val(g, "x"), *prev = x;
    char name[32];
    for (int i = 0; i < 300000; i++) {
        snprintf(name, sizeof name, "c%d", i);
        AmpNode *n = amp_node_new(g, "", "Add", "", 2, 1);
        amp_node_set_input(n, 0, prev);
        amp_node_set_input(n, 1, x);
        prev = amp_graph_value(g, name);
        amp_node_set_output(n, 0, prev);
        amp_node_append(g, n);
    }
    run_ok(m, "dce");
    cr_assert_eq(g->n_nodes, 1);
    cr_assert_eq(x->n_uses, 1);
    amp_model_free(m);
}
