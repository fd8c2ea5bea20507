/* The gradient pass (issue 35): ONNX's Gradient op (ai.onnx.preview.training, version 1)
 * has no kernel; each one becomes backward nodes made by `ampc grad`'s rules
 * (amp_grad_backward_wrt, grad.c), so that a model written in ONNX's training layout (the
 * loss, Gradient and an optimizer in training_info's algorithm) converts, trains and is
 * loss-scaled like any other. The first pass of the default pipeline; the runtime runs it
 * too when it opens a model that has Gradient nodes (runtime/session.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/grad_parts.h"
#include "passes/pass.h"
#include "passes/training.h"

bool amp_is_gradient_node(const AmpNode *n) {
    return n && n->op_type && strcmp(n->op_type, "Gradient") == 0 && n->domain &&
           strcmp(n->domain, AMP_TRAINING_DOMAIN) == 0;
}

static AmpCode find_gradient(AmpGraph *g, void *ctx, AmpStatus *st) {
    (void)st;
    for (AmpNode *n = g->first; n; n = n->next)
        if (amp_is_gradient_node(n)) {
            *(const AmpNode **)ctx = n;
            return AMP_ERR_INTERNAL; /* stops the walk: found */
        }
    return AMP_OK;
}

bool amp_model_has_gradient(AmpModel *m) {
    const AmpNode *n = NULL;
    AmpStatus ignored = {0};
    amp_model_walk(m, find_gradient, &n, &ignored);
    return n != NULL;
}

/* Where a graph sits, for messages: "the main graph", "training_info[i].algorithm". */
static void where(const AmpModel *m, const AmpGraph *g, char *buf, size_t len) {
    snprintf(buf, len, "a subgraph");
    if (g == m->graph) snprintf(buf, len, "the main graph");
    for (size_t i = 0; i < m->n_training; i++) {
        if (m->training[i].algorithm == g) snprintf(buf, len, "training_info[%zu].algorithm", i);
        if (m->training[i].initialization == g) snprintf(buf, len, "training_info[%zu].initialization", i);
    }
}

static const char *nname(const AmpNode *n) { return n->name ? n->name : ""; }

/* Attribute `name` of n as strings (STRINGS, or a STRING when one): at most max into
 * out, each a NUL-terminated copy in the model's arena; -1 when absent, -2 when of
 * another type or out of memory. */
static long strings_attr(AmpModel *m, const AmpNode *n, const char *name, const char **out, size_t max) {
    const AmpAttr *a = amp_node_attr(n, name);
    if (!a) return -1;
    const AmpBytes *s = a->type == AMP_ATTR_STRINGS ? a->strings : a->type == AMP_ATTR_STRING ? &a->s : NULL;
    size_t k = a->type == AMP_ATTR_STRINGS ? a->n_strings : 1;
    if (!s && a->type != AMP_ATTR_STRINGS) return -2;
    if (k > max) return -2;
    for (size_t i = 0; i < k; i++) {
        char *c = amp_arena_alloc(&m->arena, s[i].len + 1);
        if (!c) return -2;
        if (s[i].len) memcpy(c, s[i].data, s[i].len);
        c[s[i].len] = '\0';
        out[i] = c;
    }
    return (long)k;
}

static bool is_float(const AmpValue *v) {
    return v && v->type.kind == AMP_TYPE_TENSOR && amp_dtype_is_float(v->type.dtype);
}

/* Whether y (through producers in graphs gs[0..ng)) is computed from an output of n. */
static bool reads_outputs_of(AmpGraph *const *gs, size_t ng, const AmpNode *n, AmpValue *y) {
    for (size_t k = 0; k < ng; k++)
        for (AmpNode *x = gs[k]->first; x; x = x->next) x->mark = 0;
    size_t cap = 64, top = 0;
    AmpNode **stack = malloc(cap * sizeof *stack);
    bool found = false;
    if (!stack) return false;
    if (y->producer) stack[top++] = y->producer;
    while (top && !found) {
        AmpNode *x = stack[--top];
        if (x == n) {
            found = true;
            break;
        }
        if (x->mark) continue;
        x->mark = 1;
        for (int i = 0; i < x->n_inputs; i++) {
            AmpNode *p = x->inputs[i] ? x->inputs[i]->producer : NULL;
            if (!p || p->mark) continue;
            if (top == cap) {
                AmpNode **s = realloc(stack, 2 * cap * sizeof *s);
                if (!s) break;
                stack = s, cap *= 2;
            }
            stack[top++] = p;
        }
    }
    free(stack);
    return found;
}

#define MAX_SYMBOLS 4096

/* Expands Gradient node n of graph g: the forward is the main graph, then g when g is a
 * training algorithm. */
static AmpCode expand(AmpModel *m, AmpGraph *g, AmpNode *n, size_t *made, AmpStatus *st) {
    const char **xs = NULL, **zs = NULL;
    AmpValue **xv = NULL, **into = NULL;
    AmpCode rc = AMP_OK;
    char name[1200];
    if (!(xs = calloc(MAX_SYMBOLS, sizeof *xs)) || !(zs = calloc(MAX_SYMBOLS, sizeof *zs)) ||
        !(xv = calloc(MAX_SYMBOLS, sizeof *xv)) || !(into = calloc(MAX_SYMBOLS, sizeof *into))) {
        rc = amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
        goto done;
    }
    long nx = strings_attr(m, n, "xs", xs, MAX_SYMBOLS), nz = strings_attr(m, n, "zs", zs, MAX_SYMBOLS);
    const char *yname = NULL;
    long ny = strings_attr(m, n, "y", &yname, 1);
    if (nz == -1) nz = 0;
    if (nx < 1 || nz < 0 || ny != 1) {
        rc = amp_fail(st, AMP_ERR_INPUT, "%s", nx < 1 ? "attribute 'xs' (the names of the values to differentiate "
                      "with respect to) is missing or not a list of names" : nz < 0 ? "attribute 'zs' is not a list of "
                      "names" : "attribute 'y' (the name of the value to differentiate) is missing or not a string");
        goto done;
    }
    if (n->n_inputs != nx + nz || n->n_outputs != nx) {
        rc = amp_fail(st, AMP_ERR_INPUT, "it has %d inputs and %d outputs, where %ld xs and %ld zs take %ld inputs and "
                      "%ld outputs", n->n_inputs, n->n_outputs, nx, nz, nx + nz, nx);
        goto done;
    }
    AmpValue *y = amp_graph_lookup(g, yname);
    if (!y) {
        rc = amp_fail(st, AMP_ERR_INPUT, "y names '%s', which no graph it can read defines", yname);
        goto done;
    }
    if (!is_float(y)) {
        rc = amp_fail(st, AMP_ERR_INPUT, "y '%s' is not a float tensor (of a type known here)", yname);
        goto done;
    }
    /* Each input must be the very value its symbol names: an input that is another value
     * would stand in for it, and the forward would have to be computed again with it. */
    for (long i = 0; i < nx + nz; i++) {
        const char *sym = i < nx ? xs[i] : zs[i - nx];
        AmpValue *v = amp_graph_lookup(g, sym), *in = n->inputs[i];
        if (!v) {
            rc = amp_fail(st, AMP_ERR_INPUT, "%s[%ld] names '%s', which no graph it can read defines", i < nx ? "xs" : "zs",
                          i < nx ? i : i - nx, sym);
            goto done;
        }
        if (in != v) {
            rc = amp_fail(st, AMP_ERR_UNSUPPORTED, "input %ld is '%s', not the value '%s' that %s[%ld] names: the forward "
                          "would have to be computed again with '%s' in place of '%s', which ampc does not do (feed "
                          "the value '%s' itself)", i, in ? in->name : "", sym, i < nx ? "xs" : "zs", i < nx ? i : i - nx,
                          in ? in->name : "", sym, sym);
            goto done;
        }
        if (i >= nx) continue;
        if (!is_float(v)) {
            rc = amp_fail(st, AMP_ERR_INPUT, "xs[%ld] '%s' is not a float tensor", i, sym);
            goto done;
        }
        for (long k = 0; k < i; k++)
            if (xv[k] == v) {
                rc = amp_fail(st, AMP_ERR_INPUT, "xs names '%s' twice", sym);
                goto done;
            }
        xv[i] = v;
    }
    /* The contract's names: "<x>_grad" (loss scaling unscales each parameter's gradient by
     * that name) and the seed "<y>_grad" (which it multiplies by the scale). */
    snprintf(name, sizeof name, "%s_grad", yname);
    const char *free_name = amp_graph_unique_name(g, name);
    if (!free_name) {
        rc = amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
        goto done;
    }
    if (strcmp(free_name, name) != 0) {
        rc = amp_fail(st, AMP_ERR_INPUT, "the seed of y's backward must be named '%s' (the training contract: loss "
                      "scaling finds it by that name), but the model has a value '%s' already", name, name);
        goto done;
    }
    for (long i = 0; i < nx; i++) {
        AmpValue *o = n->outputs[i];
        snprintf(name, sizeof name, "%s_grad", xs[i]);
        const char *u = amp_graph_unique_name(g, name);
        if (!u) {
            rc = amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
            goto done;
        }
        if ((!o || strcmp(o->name, name) != 0) && strcmp(u, name) != 0) {
            rc = amp_fail(st, AMP_ERR_INPUT, "the gradient of '%s' (its output %ld, '%s') must also be named '%s' (the "
                          "training contract: loss scaling finds each parameter's gradient by that name), but the "
                          "model has another value named '%s'", xs[i], i, o ? o->name : "", name, name);
            goto done;
        }
        into[i] = o;
    }
    AmpGraph *gs[2] = {m->graph, g};
    size_t ng = g == m->graph ? 1 : 2;
    if (reads_outputs_of(gs, ng, n, y)) {
        rc = amp_fail(st, AMP_ERR_INPUT, "y '%s' is computed from the node's own outputs", yname);
        goto done;
    }
    AmpNode *at = n->next;
    amp_node_delete(n);
    char hint[600];
    snprintf(hint, sizeof hint, "lies on a path from an x to y '%s' and has no gradient rule yet", yname);
    AmpGradWrt w = {.graphs = gs, .n_graphs = ng, .at = at, .y = y, .xs = xv, .into = into, .n_xs = (size_t)nx,
                    .hint = hint};
    size_t k = 0;
    rc = amp_grad_backward_wrt(m, &w, &k, st);
    *made += k;
    if (!rc) rc = amp_graph_toposort(g, st);
done:
    free(xs), free(zs), free(xv), free(into);
    return rc;
}

static size_t count_scatter(const AmpGraph *g) {
    size_t k = 0;
    for (const AmpNode *n = g->first; n; n = n->next) k += n->op == AMP_OP_ScatterND;
    return k;
}

static size_t count_model_scatter(const AmpModel *m) {
    size_t k = count_scatter(m->graph);
    for (size_t i = 0; i < m->n_training; i++)
        if (m->training[i].algorithm) k += count_scatter(m->training[i].algorithm);
    return k;
}

/* A Gradient inside an If/Loop/Scan body or a training initialization graph: refused. */
static AmpCode check_places(AmpGraph *g, void *ctx, AmpStatus *st) {
    AmpModel *m = ctx;
    bool ok = g == m->graph;
    for (size_t i = 0; i < m->n_training && !ok; i++) ok = m->training[i].algorithm == g;
    for (AmpNode *n = g->first; n && !ok; n = n->next)
        if (amp_is_gradient_node(n)) {
            char w[64];
            where(m, g, w, sizeof w);
            return amp_fail(st, AMP_ERR_UNSUPPORTED, "gradient: Gradient node '%s' in %s: ampc expands Gradient in the "
                            "main graph and in training algorithms only", nname(n), w);
        }
    return AMP_OK;
}

AmpCode amp_expand_gradients(AmpModel *m, size_t *n_expanded, size_t *n_nodes, AmpStatus *st) {
    size_t ne = 0, made = 0;
    if (n_expanded) *n_expanded = 0;
    if (n_nodes) *n_nodes = 0;
    if (!m->graph || !amp_model_has_gradient(m)) return AMP_OK;
    AmpCode rc = amp_model_walk(m, check_places, m, st);
    if (rc) return rc;
    /* The rules read ranks and dims; a model inference cannot type completely may still
     * expand (a rule that needs what is unknown says so). */
    AmpStatus ignored = {0};
    amp_infer_model(m, &ignored);
    size_t scatter = count_model_scatter(m);
    for (size_t k = 0; k <= m->n_training && !rc; k++) {
        AmpGraph *g = k == 0 ? m->graph : m->training[k - 1].algorithm;
        if (!g) continue;
        for (;;) {
            AmpNode *n = g->first;
            while (n && !amp_is_gradient_node(n)) n = n->next;
            if (!n) break;
            char w[64];
            where(m, g, w, sizeof w);
            char node[256];
            snprintf(node, sizeof node, "%s", nname(n));
            if ((rc = expand(m, g, n, &made, st))) {
                amp_status_prefix(st, "gradient: Gradient node '%s' (%s): ", node, w);
                break;
            }
            ne++;
        }
    }
    /* The embedding and pooling gradients' ScatterND adds (reduction "add") from opset 16,
     * as `ampc grad` raises the opset for them. */
    int64_t opset = amp_model_opset(m, "");
    if (!rc && opset && opset < 16 && count_model_scatter(m) > scatter) {
        AmpPassOptions po = {.opset_upgrade_to = 16};
        rc = amp_pass_opset_upgrade(m, &po, st);
        if (!rc && amp_model_opset(m, "") < 16)
            rc = amp_fail(st, AMP_ERR_UNSUPPORTED, "gradient: the backward needs ScatterND's reduction (ai.onnx opset "
                          "16), and the model's opset %lld could not be raised to it", (long long)opset);
    }
    m->types_inferred = false;
    if (n_expanded) *n_expanded = ne;
    if (n_nodes) *n_nodes = made;
    return rc;
}

AmpCode amp_pass_gradient(AmpModel *m, const AmpPassOptions *opt, AmpStatus *st) {
    size_t n = 0, made = 0;
    AmpCode rc = amp_expand_gradients(m, &n, &made, st);
    if (!rc && n && opt && opt->notify) {
        char line[160];
        snprintf(line, sizeof line, "gradient: %zu Gradient node%s expanded into %zu backward nodes", n,
                 n == 1 ? "" : "s", made);
        opt->notify(opt->notify_ctx, line);
    }
    return rc;
}
