/* The builder API's edge cases: an edit that runs out of memory (an arena limit makes it)
 * fails with AMP_ERR_INTERNAL and leaves the graph as it was; amp_graph_unique_name and
 * amp_graph_new_value give names that no value of the model has, in any graph. And the
 * graph builder of ir/builder.h: names under its prefix, types inferred as it builds, the
 * first error kept, Reduce* and Unsqueeze in the form of the model's opset; nodes into given
 * values, placed after a node, and state scalars (passes/loss_scale.c). */
#include <criterion/criterion.h>

#include <string.h>

#include "ir/builder.h"
#include "ir/ir.h"

/* A model with graph inputs x and y (float [2]) and one Relu per name in `outs`, each
 * reading x. */
static AmpModel *model_with(const char *const *outs, size_t n) {
    AmpModel *m = amp_model_new();
    cr_assert_not_null(m);
    m->opsets = amp_arena_calloc(&m->arena, 1, sizeof *m->opsets);
    m->opsets[0] = (AmpOpset){"", 17, true};
    m->n_opsets = 1;
    m->has = AMP_MODEL_HAS_IR_VERSION;
    m->ir_version = 8;
    AmpGraph *g = m->graph;
    static const char *const ins[] = {"x", "y"};
    for (int i = 0; i < 2; i++) {
        AmpValue *v = amp_graph_value(g, ins[i]);
        cr_assert_not_null(v);
        v->type.kind = AMP_TYPE_TENSOR;
        v->type.dtype = AMP_DT_FLOAT;
        cr_assert_not_null(amp_graph_add_input(g, v));
    }
    for (size_t i = 0; i < n; i++) {
        AmpNode *r = amp_node_new(g, "", "Relu", outs[i], 1, 1);
        cr_assert_not_null(r);
        cr_assert_eq(amp_node_set_input(r, 0, amp_graph_lookup(g, "x")), AMP_OK);
        amp_node_set_output(r, 0, amp_graph_value(g, outs[i]));
        amp_node_append(g, r);
        cr_assert_not_null(amp_graph_add_output(g, r->outputs[0]));
    }
    return m;
}

static void expect_valid(AmpModel *m) {
    AmpStatus st = {AMP_OK, ""};
    cr_assert_eq(amp_verify_model(m, &st), AMP_OK, "%s", st.msg);
}

/* No more arena memory from here on. */
static void exhaust(AmpModel *m) {
    m->arena.limit = m->arena.used_bytes ? m->arena.used_bytes : 1;
}

Test(builder, set_input_out_of_memory_changes_nothing) {
    static const char *const outs[] = {"r"};
    AmpModel *m = model_with(outs, 1);
    AmpGraph *g = m->graph;
    AmpNode *n = g->first;
    AmpValue *x = amp_graph_lookup(g, "x"), *y = amp_graph_lookup(g, "y");
    cr_assert_eq(y->n_uses, 0);
    exhaust(m);
    /* y has no room for a use: the edit fails, x keeps its reader. */
    cr_assert_eq(amp_node_set_input(n, 0, y), AMP_ERR_INTERNAL);
    cr_assert_eq(n->inputs[0], x);
    cr_assert_eq(x->n_uses, 1);
    cr_assert_eq(x->uses[0].node, n);
    cr_assert_eq(y->n_uses, 0);
    expect_valid(m);
    /* Clearing an input needs no memory. */
    cr_assert_eq(amp_node_set_input(n, 0, NULL), AMP_OK);
    cr_assert_eq(x->n_uses, 0);
    cr_assert_eq(amp_node_set_input(n, 0, x), AMP_OK, "x's use list has room for its old use");
    /* With memory again, the edit goes through. */
    m->arena.limit = 0;
    cr_assert_eq(amp_node_set_input(n, 0, y), AMP_OK);
    cr_assert_eq(n->inputs[0], y);
    cr_assert_eq(x->n_uses, 0);
    cr_assert_eq(y->n_uses, 1);
    expect_valid(m);
    amp_model_free(m);
}

Test(builder, replace_uses_out_of_memory_changes_nothing) {
    static const char *const outs[] = {"a", "b", "c"};
    AmpModel *m = model_with(outs, 3);
    AmpGraph *g = m->graph;
    AmpValue *x = amp_graph_lookup(g, "x"), *y = amp_graph_lookup(g, "y");
    cr_assert_eq(x->n_uses, 3);
    exhaust(m);
    cr_assert_eq(amp_value_replace_uses(x, y, false), AMP_ERR_INTERNAL);
    cr_assert_eq(x->n_uses, 3, "a failed replace moved some uses");
    cr_assert_eq(y->n_uses, 0);
    for (AmpNode *n = g->first; n; n = n->next) cr_assert_eq(n->inputs[0], x);
    expect_valid(m);
    m->arena.limit = 0;
    cr_assert_eq(amp_value_replace_uses(x, y, false), AMP_OK);
    cr_assert_eq(x->n_uses, 0);
    cr_assert_eq(y->n_uses, 3);
    for (AmpNode *n = g->first; n; n = n->next) cr_assert_eq(n->inputs[0], y);
    cr_assert_eq(amp_value_replace_uses(y, y, false), AMP_OK, "replacing a value by itself");
    expect_valid(m);
    amp_model_free(m);
}

Test(builder, new_value_out_of_memory_is_null) {
    static const char *const outs[] = {"r"};
    AmpModel *m = model_with(outs, 1);
    size_t before = m->graph->n_values;
    exhaust(m);
    cr_assert_null(amp_graph_new_value(m->graph, "fresh"));
    cr_assert_null(amp_node_new(m->graph, "", "Relu", "n", 1, 1));
    cr_assert_eq(m->graph->n_values, before);
    cr_assert_null(amp_graph_lookup(m->graph, "fresh"), "a failed new value is half there");
    expect_valid(m);
    amp_model_free(m);
}

Test(builder, unique_name_in_one_graph) {
    static const char *const outs[] = {"r"};
    AmpModel *m = model_with(outs, 1);
    AmpGraph *g = m->graph;
    cr_assert_str_eq(amp_graph_unique_name(g, "free"), "free");
    cr_assert_str_eq(amp_graph_unique_name(g, "x"), "x_1");
    cr_assert_not_null(amp_graph_value(g, "x_1"));
    cr_assert_str_eq(amp_graph_unique_name(g, "x"), "x_2");
    AmpValue *v = amp_graph_new_value(g, "r");
    cr_assert_not_null(v);
    cr_assert_str_eq(v->name, "r_1");
    cr_assert_eq(amp_graph_lookup(g, "r_1"), v);
    amp_model_free(m);
}

/* An If whose branches define values named `then_name` and "e"; the main graph has x, y
 * and the If's output. */
static AmpModel *model_with_if(const char *then_name, AmpGraph **then_out) {
    static const char *const outs[] = {"r"};
    AmpModel *m = model_with(outs, 1);
    AmpGraph *g = m->graph;
    AmpValue *c = amp_graph_value(g, "c");
    c->type.kind = AMP_TYPE_TENSOR;
    c->type.dtype = AMP_DT_BOOL;
    c->type.rank = 0;
    amp_graph_add_input(g, c);
    AmpNode *ifn = amp_node_new(g, "", "If", "if", 1, 1);
    amp_node_set_input(ifn, 0, c);
    amp_node_set_output(ifn, 0, amp_graph_value(g, "z"));
    amp_node_append(g, ifn);
    amp_graph_add_output(g, ifn->outputs[0]);
    const char *attr[2] = {"then_branch", "else_branch"}, *names[2] = {then_name, "e"};
    for (int k = 0; k < 2; k++) {
        AmpGraph *b = amp_graph_new(m, g);
        cr_assert_not_null(b);
        b->owner = ifn;
        amp_node_add_attr(ifn, attr[k], AMP_ATTR_GRAPH)->g = b;
        AmpNode *r = amp_node_new(b, "", "Relu", names[k], 1, 1);
        amp_node_set_input(r, 0, amp_graph_lookup(b, "x"));
        amp_node_set_output(r, 0, amp_graph_value(b, names[k]));
        amp_node_append(b, r);
        amp_graph_add_output(b, r->outputs[0]);
        if (k == 0) *then_out = b;
    }
    return m;
}

Test(builder, unique_name_avoids_values_of_nested_subgraphs) {
    AmpGraph *then_g = NULL;
    AmpModel *m = model_with_if("t", &then_g);
    AmpGraph *g = m->graph;
    /* "t" is a value of the If's then branch only: the main graph does not see it, but a
     * new main-graph value of that name would collide with it (ONNX forbids that). */
    cr_assert_null(amp_graph_lookup(g, "t"));
    cr_assert_str_eq(amp_graph_unique_name(g, "t"), "t_1");
    AmpValue *v = amp_graph_new_value(g, "t");
    cr_assert_not_null(v);
    cr_assert_str_eq(v->name, "t_1");
    /* Values made after the model-wide names were gathered count too, in any graph. */
    cr_assert_not_null(amp_graph_value(then_g, "later"));
    cr_assert_str_eq(amp_graph_unique_name(g, "later"), "later_1");
    cr_assert_not_null(amp_graph_value(g, "both"));
    cr_assert_str_eq(amp_graph_unique_name(then_g, "both"), "both_1");
    /* A branch asking for a name of the other branch, or of the main graph. */
    cr_assert_str_eq(amp_graph_unique_name(then_g, "e"), "e_1");
    cr_assert_str_eq(amp_graph_unique_name(then_g, "x"), "x_1");
    cr_assert_str_eq(amp_graph_unique_name(then_g, "t"), "t_2");
    expect_valid(m);
    amp_model_free(m);
}

Test(builder, unique_name_of_a_loaded_model_with_subgraphs) {
    AmpGraph *then_g = NULL;
    AmpModel *m = model_with_if("t", &then_g);
    uint8_t *bytes = NULL;
    size_t len = 0;
    AmpStatus st = {AMP_OK, ""};
    cr_assert_eq(amp_model_save_bytes(m, &bytes, &len, &st), AMP_OK, "%s", st.msg);
    amp_model_free(m);
    AmpModel *l = NULL;
    cr_assert_eq(amp_model_load_bytes(bytes, len, NULL, NULL, &l, &st), AMP_OK, "%s", st.msg);
    free(bytes);
    cr_assert_str_eq(amp_graph_unique_name(l->graph, "t"), "t_1");
    cr_assert_str_eq(amp_graph_unique_name(l->graph, "e"), "e_1");
    cr_assert_str_eq(amp_graph_unique_name(l->graph, "fresh"), "fresh");
    amp_model_free(l);
}

/* ---- the graph builder (ir/builder.h) --------------------------------------------------- */

/* model_with's model, its opset set to `opset`, x typed float [2, 3]. */
static AmpModel *typed_model(int64_t opset) {
    static const char *const outs[] = {"r"};
    AmpModel *m = model_with(outs, 1);
    m->opsets[0].version = opset;
    AmpValue *x = amp_graph_lookup(m->graph, "x");
    x->type.rank = 2;
    x->type.dims = amp_arena_calloc(&m->arena, 2, sizeof *x->type.dims);
    x->type.dims[0].value = 2;
    x->type.dims[1].value = 3;
    return m;
}

Test(graph_builder, names_under_the_prefix_and_infers_types) {
    AmpModel *m = typed_model(17);
    AmpBuilder b;
    amp_builder_init(&b, m->graph, "grad/");
    AmpValue *x = amp_graph_lookup(m->graph, "x");
    AmpValue *t = amp_build1(&b, "Tanh", "t", x);
    AmpValue *t2 = amp_build1(&b, "Tanh", "t", t);
    static const int64_t perm[2] = {1, 0};
    AmpValue *tr = amp_build_transpose(&b, "T", t2, perm, 2);
    AmpValue *two = amp_build_scalar(&b, "two", AMP_DT_FLOAT, 2.0);
    AmpValue *y = amp_build2(&b, "Mul", "y", tr, two);
    cr_assert(amp_builder_ok(&b));
    cr_assert_str_eq(t->name, "grad/t");
    cr_assert_str_eq(t2->name, "grad/t_1", "a second 't' gets a fresh, deterministic name");
    cr_assert_str_eq(t2->producer->name, "grad/t_1", "the node takes its output's name");
    cr_assert_eq(b.n_nodes, 5);
    cr_assert_eq(tr->type.dtype, AMP_DT_FLOAT);
    cr_assert_eq(tr->type.rank, 2);
    cr_assert_eq(tr->type.dims[0].value, 3, "Transpose's output typed as it was built");
    cr_assert_eq(y->type.rank, 2);
    cr_assert_eq(y->type.dims[1].value, 2);
    cr_assert_eq(m->graph->last, y->producer, "appended in order");
    expect_valid(m);
    amp_model_free(m);
}

Test(graph_builder, keeps_the_first_error) {
    AmpModel *m = typed_model(17);
    AmpBuilder b;
    amp_builder_init(&b, m->graph, "p/");
    AmpValue *x = amp_graph_lookup(m->graph, "x");
    size_t nodes = m->graph->n_nodes;
    /* "x" is taken: an exact name in use is the first error. */
    AmpValue *in[1] = {x};
    cr_assert_null(amp_build_end(&b, amp_build_start_named(&b, "Relu", "x", in, 1, 1)));
    cr_assert(!amp_builder_ok(&b));
    cr_assert(strstr(b.st.msg, "'x'"), "%s", b.st.msg);
    cr_assert_null(amp_build_scalar(&b, "c", AMP_DT_STRING, 0), "later calls do nothing");
    cr_assert_null(amp_build1(&b, "Relu", "r", x));
    cr_assert(strstr(b.st.msg, "'x'"), "the first message stays: %s", b.st.msg);
    cr_assert_eq(m->graph->n_nodes, nodes);
    AmpStatus st = {AMP_OK, ""};
    cr_assert_eq(amp_builder_status(&b, &st), AMP_ERR_INPUT);
    cr_assert_str_eq(st.msg, b.st.msg);
    amp_model_free(m);
}

/* Reduce*'s axes: an input from 13 (ReduceSum) or 18 (others), an attribute before. */
Test(graph_builder, opset_correct_forms) {
    static const int64_t axes[1] = {1};
    const struct {
        int64_t opset;
        const char *op;
        bool input;
    } cases[] = {{12, "ReduceSum", false}, {13, "ReduceSum", true}, {17, "ReduceMean", false},
                 {18, "ReduceMean", true}, {12, "Unsqueeze", false}, {13, "Unsqueeze", true}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        AmpModel *m = typed_model(cases[i].opset);
        AmpBuilder b;
        amp_builder_init(&b, m->graph, "");
        AmpValue *x = amp_graph_lookup(m->graph, "x");
        bool unsq = strcmp(cases[i].op, "Unsqueeze") == 0;
        AmpValue *y = unsq ? amp_build_axes_op(&b, "Unsqueeze", "u", x, axes, 1)
                           : amp_build_reduce(&b, cases[i].op, "r", x, axes, 1, 0);
        cr_assert_not_null(y, "%s: %s", cases[i].op, b.st.msg);
        AmpNode *n = y->producer;
        cr_assert_eq(n->n_inputs == 2, cases[i].input, "%s at opset %lld", cases[i].op, (long long)cases[i].opset);
        cr_assert_eq(amp_node_attr(n, "axes") != NULL, !cases[i].input);
        cr_assert_eq(y->type.rank, unsq ? 3 : 1, "%s typed", cases[i].op);
        amp_model_free(m);
    }
}

/* A node named apart from its output: prefix + what names the node, the output is a value
 * the caller made (no prefix, made unique) or one the model already reads, whose declared
 * type stays and inference refines. */
Test(graph_builder, node_into_a_given_value) {
    AmpModel *m = typed_model(17);
    AmpGraph *g = m->graph;
    AmpBuilder b;
    amp_builder_init(&b, g, "ls/");
    AmpValue *x = amp_graph_lookup(g, "x");
    AmpValue *v = amp_build_value(&b, "x");
    cr_assert_str_eq(v->name, "x_1", "a fresh name, not under the prefix");
    cr_assert_eq(v->type.kind, AMP_TYPE_NONE, "untyped until a node writes it");
    AmpValue *in[1] = {x};
    AmpValue *t = amp_build_end(&b, amp_build_start_to(&b, "Tanh", "tanh/x", in, 1, v));
    cr_assert_eq(t, v);
    cr_assert_str_eq(v->producer->name, "ls/tanh/x");
    cr_assert_eq(v->type.rank, 2, "typed by inference");
    cr_assert_eq(v->type.dims[1].value, 3);
    /* A declared type is kept where inference knows less, refined where it knows more. */
    AmpValue *w = amp_build_value(&b, "w");
    AmpDim *d = amp_arena_calloc(&m->arena, 2, sizeof *d);
    d[0] = (AmpDim){.value = -1, .param = "batch"};
    d[1].value = -1;
    w->type = (AmpType){.kind = AMP_TYPE_TENSOR, .dtype = AMP_DT_FLOAT, .rank = 2, .dims = d};
    amp_build_end(&b, amp_build_start_to(&b, "Relu", "relu", &v, 1, w));
    cr_assert(amp_builder_ok(&b), "%s", b.st.msg);
    cr_assert_eq(w->type.dims[0].value, 2, "a known dim replaces a symbolic one");
    cr_assert_eq(w->type.dims[1].value, 3);
    /* The same name again: node names need not be unique, value names stay so. */
    AmpValue *c = amp_build_cast_to(&b, "relu", w, amp_build_value(&b, "w"), AMP_DT_FLOAT16);
    cr_assert_not_null(c, "%s", b.st.msg);
    cr_assert_str_eq(c->name, "w_1");
    cr_assert_str_eq(c->producer->name, "ls/relu");
    cr_assert_eq(c->producer->op, AMP_OP_Cast);
    cr_assert_eq(c->type.dtype, AMP_DT_FLOAT16);
    cr_assert_eq(c->type.rank, 2);
    cr_assert_eq(b.n_nodes, 3);
    cr_assert_null(amp_build_start_to(&b, "Relu", "r", &x, 1, NULL), "no output value: an error");
    cr_assert(!amp_builder_ok(&b));
    amp_model_free(m);
}

/* amp_builder_place_after: after a node, in the order made; NULL: each at the top. */
Test(graph_builder, places_after_a_node_and_at_the_top) {
    static const char *const outs[] = {"r1", "r2"};
    AmpModel *m = model_with(outs, 2);
    AmpGraph *g = m->graph;
    AmpNode *r1 = g->first, *r2 = r1->next;
    AmpBuilder b;
    amp_builder_init(&b, g, "p/");
    amp_builder_place_after(&b, r1);
    AmpValue *a = amp_build1(&b, "Neg", "a", r1->outputs[0]);
    AmpValue *c = amp_build1(&b, "Neg", "c", a);
    cr_assert_eq(r1->next, a->producer);
    cr_assert_eq(a->producer->next, c->producer, "made after a: placed after a");
    cr_assert_eq(c->producer->next, r2);
    amp_builder_place_after(&b, r2); /* the last node: appended */
    AmpValue *e = amp_build1(&b, "Neg", "e", r2->outputs[0]);
    cr_assert_eq(g->last, e->producer);
    amp_builder_place_after(&b, NULL);
    AmpValue *k1 = amp_build_scalar(&b, "k1", AMP_DT_FLOAT, 1);
    amp_builder_place_after(&b, NULL);
    AmpValue *k2 = amp_build_scalar(&b, "k2", AMP_DT_FLOAT, 2);
    cr_assert_eq(g->first, k2->producer, "each at the top: the later one first");
    cr_assert_eq(k2->producer->next, k1->producer);
    cr_assert_eq(k1->producer->next, r1);
    expect_valid(m);
    amp_model_free(m);
}

/* amp_build_state: a scalar graph input with an initializer, or an input alone. */
Test(graph_builder, state_scalars) {
    AmpModel *m = typed_model(17);
    AmpGraph *g = m->graph;
    AmpBuilder b;
    amp_builder_init(&b, g, "s/");
    size_t inputs = g->inputs.n;
    AmpValue *s = amp_build_state(&b, "scale", AMP_DT_FLOAT, 256.0, true);
    AmpValue *t = amp_build_state(&b, "steps", AMP_DT_INT64, 3, false);
    cr_assert(amp_builder_ok(&b), "%s", b.st.msg);
    cr_assert_str_eq(s->name, "scale", "the name as given");
    cr_assert_eq(g->inputs.n, inputs + 2);
    cr_assert_eq(g->inputs.items[inputs].value, s);
    cr_assert_eq(g->inputs.items[inputs + 1].value, t);
    cr_assert_eq(s->type.kind, AMP_TYPE_TENSOR);
    cr_assert_eq(s->type.dtype, AMP_DT_FLOAT);
    cr_assert_eq(s->type.rank, 0);
    cr_assert(s->flags & AMP_VALUE_INITIALIZER);
    cr_assert_eq(s->initializer->ndims, 0);
    cr_assert_eq(s->initializer->raw.len, sizeof(float));
    float f;
    memcpy(&f, s->initializer->raw.data, sizeof f);
    cr_assert_eq(f, 256.0f);
    cr_assert_eq(t->type.dtype, AMP_DT_INT64);
    cr_assert_eq(t->type.rank, 0);
    cr_assert(!(t->flags & AMP_VALUE_INITIALIZER), "fed by the caller");
    cr_assert_eq(b.n_nodes, 0, "no node");
    expect_valid(m);
    cr_assert_null(amp_build_state(&b, "str", AMP_DT_STRING, 0, true));
    cr_assert(strstr(b.st.msg, "'str'"), "%s", b.st.msg);
    amp_model_free(m);
}
