/* The gradient pass (passes/gradient.c): ONNX's Gradient op expanded into backward nodes
 * by `ampc grad`'s rules. Small models in ONNX's training layout (the forward in the main
 * graph, the loss and Gradient in training_info's algorithm, xs main-graph initializers)
 * and in the main graph alone: the expansion's gradients, as a session computes them,
 * against central finite differences of y; the names the training contract asks for
 * ("<x>_grad", the seed "<y>_grad"); zeros for an x y does not depend on; and what is
 * refused: an op without a rule on the path, an input that is not its symbol's value, a
 * "<x>_grad" name taken by another value. */
#include "passes/passes.h"
#include "tests/passes/grad_check.h"

/* d y / d each of params[0..np) (state entries of the session) from the expanded model's
 * outputs gnames[], against central differences of the output y (the sum of its
 * elements when it has several); feeds in[0..n_in). The model is consumed. */
static void fd_check(AmpModel *m, const AmpTensorView *in, size_t n_in, const char *y, const char *const *params,
                     const char *const *gnames, size_t np, const char *what) {
    AmpStatus st = {0};
    AmpSession *s = NULL;
    cr_assert_eq(rt_open(m, NULL, &s, &st), AMP_OK, "%s: %s", what, st.msg);
    enum { MAXP = 8 };
    cr_assert(np <= MAXP);
    const char *names[MAXP + 1];
    for (size_t p = 0; p < np; p++) names[p] = gnames[p];
    names[np] = y;
    AmpTensorView out[MAXP + 1];
    cr_assert_eq(amp_session_train_step(s, in, n_in, names, np + 1, out, &st), AMP_OK, "%s: %s", what, st.msg);
    double worst = 0;
    for (size_t p = 0; p < np; p++) {
        AmpTensorView w;
        cr_assert(rt_state_find(s, params[p], &w), "%s: no state '%s'", what, params[p]);
        size_t n = 1;
        for (int i = 0; i < w.rank; i++) n *= (size_t)w.dims[i];
        cr_assert_eq(out[p].rank, w.rank, "%s: the gradient of %s has rank %d", what, params[p], out[p].rank);
        for (int i = 0; i < w.rank; i++) cr_assert_eq(out[p].dims[i], w.dims[i]);
        AmpTensorView cur = w;
        float *vals = malloc(n * sizeof *vals);
        memcpy(vals, w.data, n * sizeof *vals);
        cur.data = vals;
        const float *an = out[p].data;
        for (size_t j = 0; j < n; j++) {
            double l[2];
            for (int k = 0; k < 2; k++) {
                float keep = vals[j];
                vals[j] = keep + (k ? -EPS : EPS);
                cr_assert_eq(amp_session_state_set(s, &cur, &st), AMP_OK, "%s", st.msg);
                AmpTensorView lo;
                cr_assert_eq(amp_session_train_step(s, in, n_in, &y, 1, &lo, &st), AMP_OK, "%s", st.msg);
                size_t ne = 1;
                for (int i = 0; i < lo.rank; i++) ne *= (size_t)lo.dims[i];
                l[k] = 0;
                for (size_t e = 0; e < ne; e++) l[k] += ((const float *)lo.data)[e];
                amp_tensor_view_free(&lo);
                vals[j] = keep;
            }
            double num = (l[0] - l[1]) / (2.0 * EPS), err = fabs(num - an[j]);
            cr_assert(err <= ATOL + RTOL * fabs(num), "%s: d %s / d %s[%zu]: expansion %g, finite differences %g", what,
                      y, params[p], j, an[j], num);
            if (err > worst) worst = err;
        }
        cr_assert_eq(amp_session_state_set(s, &cur, &st), AMP_OK, "%s", st.msg);
        free(vals);
    }
    for (size_t p = 0; p <= np; p++) amp_tensor_view_free(&out[p]);
    amp_session_close(s);
    printf("gradient %-40s max |expansion - finite differences| = %.2e\n", what, worst);
}

static void attr_strings(AmpModel *m, AmpNode *n, const char *name, const char *const *v, size_t count) {
    AmpAttr *a = amp_node_add_attr(n, name, AMP_ATTR_STRINGS);
    a->strings = amp_arena_calloc(&m->arena, count ? count : 1, sizeof *a->strings);
    for (size_t i = 0; i < count; i++)
        a->strings[i] = (AmpBytes){(const uint8_t *)amp_arena_strdup(&m->arena, v[i]), strlen(v[i])};
    a->n_strings = count;
}

static void attr_string(AmpModel *m, AmpNode *n, const char *name, const char *v) {
    AmpAttr *a = amp_node_add_attr(n, name, AMP_ATTR_STRING);
    a->s = (AmpBytes){(const uint8_t *)amp_arena_strdup(&m->arena, v), strlen(v)};
    a->has |= AMP_ATTR_HAS_S;
}

/* A Gradient node of g: inputs `ins`, outputs `outs` (rt_node's lists), attributes xs and y. */
static AmpNode *gradient(AmpModel *m, AmpGraph *g, const char *ins, const char *outs, const char *const *xs, size_t nx,
                         const char *y) {
    AmpNode *n = rt_node(g, "ai.onnx.preview.training", "Gradient", ins, outs);
    attr_strings(m, n, "xs", xs, nx);
    attr_string(m, n, "y", y);
    return n;
}

static bool has_op(const AmpGraph *g, const char *op) {
    for (const AmpNode *n = g->first; n; n = n->next)
        if (strcmp(n->op_type, op) == 0) return true;
    return false;
}

/* ONNX's layout: main graph x [2,4] -> MatMul W [4,3] -> Add b [3] -> Tanh -> out (an
 * output); the algorithm: input t [2,3], loss = mean((out * s - t)^2) with s [3] an
 * initializer of the algorithm itself, then Gradient over xs (here: W, b, s and an unused
 * main initializer u [5]) with y = loss. */
static AmpModel *spec_model(const char *const *xs, size_t nx, const char *ins, const char *outs) {
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "2,4");
    P(g, "W", -1, 1, 4, 3);
    P(g, "b", -1, 1, 3);
    P(g, "u", -1, 1, 5);
    op(m, "MatMul", "x,W", "h");
    op(m, "Add", "h,b", "z");
    op(m, "Tanh", "z", "out");
    rt_output(g, "out", AMP_DT_FLOAT, "2,3");
    AmpGraph *a = rt_training(m);
    rt_input(a, "t", AMP_DT_FLOAT, "2,3");
    P(a, "s", 0.5f, 1.5f, 3);
    rt_node(a, "", "Mul", "out,s", "os");
    rt_node(a, "", "Sub", "os,t", "d");
    rt_node(a, "", "Mul", "d,d", "sq");
    attr_i(rt_node(a, "", "ReduceMean", "sq", "loss"), "keepdims", 0);
    gradient(m, a, ins, outs, xs, nx, "loss");
    rt_output(a, "loss", AMP_DT_FLOAT, "");
    /* Bound to themselves, so that they are the session's state (finite differences set
     * them) and a step leaves them as they are. */
    static const char *const keep[] = {"W", "b", "u", "s"};
    for (int i = 0; i < 4; i++) {
        char in[8], out[16];
        snprintf(in, sizeof in, "%s", keep[i]);
        snprintf(out, sizeof out, "%s_keep", keep[i]);
        rt_node(a, "", "Identity", in, out);
        rt_output(a, out, AMP_DT_FLOAT, NULL);
    }
    rt_bindings(m, false, "W=W_keep,b=b_keep,u=u_keep,s=s_keep");
    for (const char *p = outs; *p;) {
        size_t n = strcspn(p, ",");
        char nm[64];
        snprintf(nm, sizeof nm, "%.*s", (int)n, p);
        rt_output(a, nm, AMP_DT_FLOAT, NULL);
        p += n;
        if (*p == ',') p++;
    }
    return m;
}

static float XS[8], TS[6];

static void feeds(AmpTensorView *in) {
    for (int i = 0; i < 8; i++) XS[i] = uni(-1, 1);
    for (int i = 0; i < 6; i++) TS[i] = uni(-1, 1);
    in[0] = rt_view("x", AMP_DT_FLOAT, XS, 2, (int64_t[]){2, 4});
    in[1] = rt_view("t", AMP_DT_FLOAT, TS, 2, (int64_t[]){2, 3});
}

Test(gradient, spec_layout_matches_finite_differences) {
    static const char *const xs[] = {"W", "b", "s"};
    AmpModel *m = spec_model(xs, 3, "W,b,s", "W_grad,gb,gs");
    AmpStatus st = {0};
    size_t n = 0, made = 0;
    cr_assert_eq(amp_expand_gradients(m, &n, &made, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(n, 1);
    cr_assert_gt(made, 5);
    cr_assert_eq(amp_verify_model(m, &st), AMP_OK, "%s", st.msg);
    AmpGraph *a = m->training[0].algorithm;
    cr_assert(!has_op(a, "Gradient") && !has_op(m->graph, "Gradient"));
    /* The contract's names: the seed, and each x's gradient, in the algorithm graph; an
     * output named otherwise is an Identity of "<x>_grad". */
    AmpValue *seed = amp_graph_lookup(a, "loss_grad");
    cr_assert(seed && seed->graph == a && seed->producer && strcmp(seed->producer->op_type, "Constant") == 0);
    const char *want[][2] = {{"W_grad", NULL}, {"gb", "b_grad"}, {"gs", "s_grad"}};
    for (int i = 0; i < 3; i++) {
        AmpValue *o = amp_graph_lookup(a, want[i][0]);
        cr_assert(o && o->graph == a && o->producer, "%s", want[i][0]);
        if (!want[i][1]) continue;
        AmpValue *gx = amp_graph_lookup(a, want[i][1]);
        cr_assert(gx && gx->graph == a, "no '%s'", want[i][1]);
        cr_assert_str_eq(o->producer->op_type, "Identity");
        cr_assert_eq(o->producer->inputs[0], gx);
    }
    cr_assert_eq(m->graph->n_nodes, 3, "the main graph is the inference graph still");
    AmpTensorView in[2];
    feeds(in);
    static const char *const gn[] = {"W_grad", "gb", "gs"};
    fd_check(m, in, 2, "loss", xs, gn, 3, "main MatMul/Add/Tanh, algorithm loss");
}

/* The session expands the Gradient at open by itself (ampc run without a pass). */
Test(gradient, session_expands_at_open) {
    static const char *const xs[] = {"W", "b"};
    AmpModel *m = spec_model(xs, 2, "W,b", "dW,db");
    AmpTensorView in[2];
    feeds(in);
    fd_check(m, in, 2, "loss", xs, (const char *const[]){"dW", "db"}, 2, "expanded at session open");
}

/* An x that y does not depend on gets zeros shaped like it. */
Test(gradient, unused_x_gets_zeros) {
    static const char *const xs[] = {"u", "b"};
    AmpModel *m = spec_model(xs, 2, "u,b", "du,db");
    AmpStatus st = {0};
    AmpSession *s = NULL;
    cr_assert_eq(rt_open(m, NULL, &s, &st), AMP_OK, "%s", st.msg);
    AmpTensorView in[2], out[2];
    feeds(in);
    const char *names[] = {"du", "db"};
    cr_assert_eq(amp_session_train_step(s, in, 2, names, 2, out, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(out[1].dims[0], 3);
    amp_tensor_view_free(&out[1]);
    for (int k = 0; k < 1; k++) {
        cr_assert_eq(out[k].rank, 1);
        cr_assert_eq(out[k].dims[0], 5);
        for (int i = 0; i < 5; i++) cr_assert_eq(((const float *)out[k].data)[i], 0.0f);
        amp_tensor_view_free(&out[k]);
    }
    amp_session_close(s);
}

/* Gradient in the main graph, y of several elements: the seed is ones shaped like y (the
 * gradient of the sum of y's elements). */
Test(gradient, main_graph_y_of_several_elements) {
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "2,4");
    P(g, "W", -1, 1, 4, 3);
    P(g, "b", -1, 1, 3);
    op(m, "MatMul", "x,W", "h");
    op(m, "Add", "h,b", "z");
    op(m, "Sigmoid", "z", "y");
    static const char *const xs[] = {"W", "b"};
    gradient(m, g, "W,b", "W_grad,b_grad", xs, 2, "y");
    rt_output(g, "y", AMP_DT_FLOAT, "2,3");
    rt_output(g, "W_grad", AMP_DT_FLOAT, NULL);
    rt_output(g, "b_grad", AMP_DT_FLOAT, NULL);
    AmpTensorView in[1];
    for (int i = 0; i < 8; i++) XS[i] = uni(-1, 1);
    in[0] = rt_view("x", AMP_DT_FLOAT, XS, 2, (int64_t[]){2, 4});
    static const char *const gn[] = {"W_grad", "b_grad"};
    fd_check(m, in, 1, "y", xs, gn, 2, "main graph, y [2,3] (sum)");
}

/* ---- what is refused ------------------------------------------------------------------- */

Test(gradient, op_without_rule_on_the_path_names_it) {
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "2,4");
    P(g, "W", -1, 1, 4, 3);
    op(m, "MatMul", "x,W", "h");
    AmpNode *sin = op(m, "Sin", "h", "out");
    rt_output(g, "out", AMP_DT_FLOAT, "2,3");
    AmpGraph *a = rt_training(m);
    attr_i(rt_node(a, "", "ReduceSum", "out", "loss"), "keepdims", 0);
    static const char *const xs[] = {"W"};
    gradient(m, a, "W", "W_grad", xs, 1, "loss");
    rt_output(a, "loss", AMP_DT_FLOAT, "");
    rt_output(a, "W_grad", AMP_DT_FLOAT, NULL);
    AmpStatus st = {0};
    cr_assert_eq(amp_expand_gradients(m, NULL, NULL, &st), AMP_ERR_UNSUPPORTED);
    char want[96];
    snprintf(want, sizeof want, "Sin node '%s'", sin->name);
    cr_assert(strstr(st.msg, want) && strstr(st.msg, "no gradient rule"), "%s", st.msg);
    amp_model_free(m);
}

/* Input 0 is another value than the xs[0] it stands for: the forward would need computing
 * again with it, which is refused, naming the node. */
Test(gradient, input_not_the_symbols_value_is_refused) {
    static const char *const xs[] = {"W", "b"};
    AmpModel *m = spec_model(xs, 2, "u,b", "dW,db");
    AmpNode *gn = m->training[0].algorithm->first;
    while (gn && strcmp(gn->op_type, "Gradient") != 0) gn = gn->next;
    cr_assert_not_null(gn);
    char name[64];
    snprintf(name, sizeof name, "'%s'", gn->name);
    AmpStatus st = {0};
    cr_assert_eq(amp_expand_gradients(m, NULL, NULL, &st), AMP_ERR_UNSUPPORTED);
    cr_assert(strstr(st.msg, name) && strstr(st.msg, "input 0 is 'u'") && strstr(st.msg, "'W'"), "%s", st.msg);
    amp_model_free(m);
    /* A session refuses it the same way (ampc run: exit 3). */
    m = spec_model(xs, 2, "u,b", "dW,db");
    AmpSession *s = NULL;
    cr_assert_eq(rt_open(m, NULL, &s, &st), AMP_ERR_UNSUPPORTED);
    cr_assert(strstr(st.msg, "input 0 is 'u'"), "%s", st.msg);
}

/* "<x>_grad" is the contract's name for x's gradient: taken by another value, it is an
 * error naming both. */
Test(gradient, taken_grad_name_is_refused) {
    static const char *const xs[] = {"W", "b"};
    AmpModel *m = spec_model(xs, 2, "W,b", "dW,db");
    rt_node(m->training[0].algorithm, "", "Identity", "t", "b_grad");
    AmpStatus st = {0};
    cr_assert_eq(amp_expand_gradients(m, NULL, NULL, &st), AMP_ERR_INPUT);
    cr_assert(strstr(st.msg, "'db'") && strstr(st.msg, "'b_grad'"), "%s", st.msg);
    amp_model_free(m);
}

/* A model without Gradient: the pass changes nothing (the file round-trips as it is). */
Test(gradient, no_gradient_no_change) {
    AmpModel *m = model();
    P(m->graph, "W", -1, 1, 4, 3);
    rt_input(m->graph, "x", AMP_DT_FLOAT, "2,4");
    op(m, "MatMul", "x,W", "y");
    out_y(m);
    AmpStatus st = {0};
    uint8_t *a = NULL, *b = NULL;
    size_t la = 0, lb = 0;
    cr_assert_eq(amp_model_save_bytes(m, &a, &la, &st), AMP_OK);
    cr_assert(!amp_model_has_gradient(m));
    cr_assert_eq(amp_pass_gradient(m, NULL, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(amp_model_save_bytes(m, &b, &lb, &st), AMP_OK);
    cr_assert(la == lb && memcmp(a, b, la) == 0);
    free(a), free(b);
    amp_model_free(m);
}

Test(gradient, is_first_in_the_default_pipeline) {
    cr_assert_not_null(amp_pass_find("gradient"));
    cr_assert_eq(strncmp(amp_default_pipeline(), "gradient,", 9), 0, "%s", amp_default_pipeline());
}
