/* Reverse-mode autodiff (issues 23 and 35): from a value y back to the values it is
 * differentiated with respect to, one rule per op (grad_rules*.c), over the nodes of one
 * or more graphs run one after the other (ONNX's training step: the main graph, then a
 * training algorithm whose nodes read main-graph values by name). Only values on a path
 * from such a value to y ("active") get a gradient; a value read by several nodes gets
 * the Sum of their contributions. Node and helper value names start with "grad/"; the
 * gradient of x is named "<x>_grad" and the seed "<y>_grad" (a Constant 1 for a loss of
 * one element), as docs/design.md's training-graph contract says. `ampc grad` differentiates its
 * loss over the main graph with respect to every trainable initializer
 * (amp_grad_backward); the gradient pass expands ONNX's Gradient op with it
 * (amp_grad_backward_wrt, passes/gradient.c). */
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "passes/grad_impl.h"
#include "passes/grad_parts.h"

#define PREFIX "grad/"

typedef struct Contribs {
    AmpValue **v;
    size_t n, cap;
} Contribs;

typedef struct Ad {
    AmpModel *m;
    AmpBuilder b;                  /* builds into gs[ng - 1] */
    AmpGraph *gs[AMP_GRAD_MAX_GRAPHS]; /* the forward's graphs, outer first */
    size_t ng;
    size_t base[AMP_GRAD_MAX_GRAPHS]; /* index of graph k's value 0 in the arrays below */
    size_t nv[AMP_GRAD_MAX_GRAPHS];   /* values of graph k before the backward */
    size_t n_values;  /* all of them: the arrays below cover them */
    AmpNode **nodes;  /* the forward's nodes, graph by graph, each in its order */
    size_t n_nodes;
    uint8_t *fwd;     /* by index: depends on a value differentiated w.r.t. through differentiable slots */
    uint8_t *bwd;     /* by index: y depends on it */
    Contribs *contrib; /* by index: gradient contributions */
    const char *hint;  /* after the message naming an op without a rule */
} Ad;

static bool is_float_tensor(const AmpValue *v) {
    return v && v->type.kind == AMP_TYPE_TENSOR &&
           (v->type.dtype == AMP_DT_FLOAT || v->type.dtype == AMP_DT_DOUBLE || v->type.dtype == AMP_DT_FLOAT16 ||
            v->type.dtype == AMP_DT_BFLOAT16);
}

/* v's index in the arrays, or -1 when it is not a value of the forward's graphs (a value
 * of another graph, or one the backward made). */
static long slot_of(const Ad *a, const AmpValue *v) {
    if (!v) return -1;
    for (size_t k = 0; k < a->ng; k++)
        if (v->graph == a->gs[k]) return v->id < a->nv[k] ? (long)(a->base[k] + v->id) : -1;
    return -1;
}

static bool active(const Ad *a, const AmpValue *v) {
    long i = slot_of(a, v);
    return i >= 0 && a->fwd[i] && a->bwd[i] && is_float_tensor(v);
}

/* Whether an initializer is a parameter: a float tensor of rank >= 1 that no --freeze glob
 * matches. Rank-0 ones are constants an exporter folded (eps, 1/sqrt(d), 0.5 of GELU). */
static bool trainable(const AmpValue *v, const AmpGradOptions *o, size_t *frozen) {
    if (!(v->flags & AMP_VALUE_INITIALIZER) || !is_float_tensor(v) || v->type.rank < 1) return false;
    for (size_t i = 0; i < o->n_freeze; i++)
        if (fnmatch(o->freeze[i], v->name, 0) == 0) {
            (*frozen)++;
            return false;
        }
    return true;
}

/* The forward over graphs gs[0..ng) (outer first; each graph's parent is one of those
 * before it, or a graph of none), without node `skip`; the backward goes into the last
 * graph, before node `at` (NULL: appended). */
static AmpCode ad_open(Ad *a, AmpModel *m, AmpGraph *const *gs, size_t ng, const AmpNode *skip, AmpNode *at,
                       AmpStatus *st) {
    *a = (Ad){.m = m, .ng = ng};
    if (ng == 0 || ng > AMP_GRAD_MAX_GRAPHS)
        return amp_fail(st, AMP_ERR_INTERNAL, "grad: %zu graphs to differentiate over", ng);
    size_t nn = 0;
    for (size_t k = 0; k < ng; k++) {
        a->gs[k] = gs[k];
        a->base[k] = a->n_values;
        a->nv[k] = gs[k]->n_values;
        a->n_values += gs[k]->n_values;
        nn += gs[k]->n_nodes;
    }
    amp_builder_init(&a->b, gs[ng - 1], PREFIX);
    a->b.before = at;
    a->fwd = calloc(a->n_values + 1, 1);
    a->bwd = calloc(a->n_values + 1, 1);
    a->contrib = calloc(a->n_values + 1, sizeof *a->contrib);
    a->nodes = calloc(nn + 1, sizeof *a->nodes);
    if (!a->fwd || !a->bwd || !a->contrib || !a->nodes) return amp_fail(st, AMP_ERR_INTERNAL, "grad: out of memory");
    for (size_t k = 0; k < ng; k++)
        for (AmpNode *n = gs[k]->first; n; n = n->next)
            if (n != skip && a->n_nodes < nn) a->nodes[a->n_nodes++] = n;
    return AMP_OK;
}

static void ad_close(Ad *a) {
    for (size_t i = 0; a->contrib && i < a->n_values; i++) free(a->contrib[i].v);
    free(a->fwd), free(a->bwd), free(a->contrib), free(a->nodes);
}

/* Marks what depends on the values whose fwd is set already (forward) and what y
 * depends on (backward). */
static void mark(Ad *a, AmpValue *y) {
    for (size_t j = 0; j < a->n_nodes; j++) {
        AmpNode *n = a->nodes[j];
        const AmpGradRule *r = amp_grad_rule(n->op);
        bool dep = false;
        for (int i = 0; i < n->n_inputs && !dep; i++) {
            long s = slot_of(a, n->inputs[i]);
            /* Without a rule every float input counts, so that the op is found below. */
            dep = s >= 0 && a->fwd[s] && (!r->fn || (i < 32 && ((r->slots >> i) & 1u)));
        }
        for (int k = 0; dep && k < n->n_outputs; k++) {
            long s = slot_of(a, n->outputs[k]);
            if (s >= 0) a->fwd[s] = 1;
        }
    }
    long ys = slot_of(a, y);
    if (ys >= 0) a->bwd[ys] = 1;
    for (size_t j = a->n_nodes; j-- > 0;) {
        AmpNode *n = a->nodes[j];
        bool need = false;
        for (int k = 0; k < n->n_outputs && !need; k++) {
            long s = slot_of(a, n->outputs[k]);
            need = s >= 0 && a->bwd[s];
        }
        for (int i = 0; need && i < n->n_inputs; i++) {
            long s = slot_of(a, n->inputs[i]);
            if (s >= 0) a->bwd[s] = 1;
        }
    }
}

static AmpCode add_contrib(Ad *a, AmpValue *v, AmpValue *g, AmpStatus *st) {
    Contribs *c = &a->contrib[slot_of(a, v)];
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 2;
        AmpValue **p = realloc(c->v, cap * sizeof *p);
        if (!p) return amp_fail(st, AMP_ERR_INTERNAL, "grad: out of memory");
        c->v = p, c->cap = cap;
    }
    c->v[c->n++] = g;
    return AMP_OK;
}

/* Sum nodes take at most this many inputs: more (an exporter's one shared zero bias read
 * by every layer) are summed in a tree, within the executor's limit on inputs. */
#define SUM_FAN_IN 32

/* v's whole gradient: its one contribution, or their Sum; named exactly `name` when
 * given (then an Identity for a single contribution), or written into the existing value
 * `into` (a value with no producer: the output of a Gradient node taken away); NULL when
 * it has none. */
static AmpValue *total(Ad *a, AmpValue *v, const char *name, AmpValue *into) {
    Contribs *c = &a->contrib[slot_of(a, v)];
    if (!c->n) return NULL;
    while (c->n > SUM_FAN_IN) { /* each group of SUM_FAN_IN becomes one partial sum */
        size_t k = 0;
        for (size_t i = 0; i < c->n; i += SUM_FAN_IN) {
            size_t m = c->n - i < SUM_FAN_IN ? c->n - i : SUM_FAN_IN;
            c->v[k++] = m == 1 ? c->v[i]
                               : amp_build_end(&a->b, amp_build_start(&a->b, "Sum", v->name, c->v + i, (int)m, 1));
        }
        c->n = k;
    }
    if (c->n == 1 && !name && !into) return c->v[0];
    const char *op = c->n == 1 ? "Identity" : "Sum";
    AmpNode *n = into ? amp_build_start_to(&a->b, op, v->name, c->v, (int)c->n, into)
                 : name ? amp_build_start_named(&a->b, op, name, c->v, (int)c->n, 1)
                        : amp_build_start(&a->b, op, v->name, c->v, (int)c->n, 1);
    return amp_build_end(&a->b, n);
}

/* The error for an op without a rule on a path to y. */
static AmpCode check_rules(Ad *a, AmpStatus *st) {
    for (size_t j = 0; j < a->n_nodes; j++) {
        AmpNode *n = a->nodes[j];
        if (amp_grad_has_rule(n->op)) continue;
        bool in = false, out = false;
        for (int i = 0; i < n->n_inputs && !in; i++) in = active(a, n->inputs[i]);
        for (int k = 0; k < n->n_outputs && !out; k++) out = active(a, n->outputs[k]);
        if (in && out)
            return amp_fail(st, AMP_ERR_UNSUPPORTED, "grad: %s%s%s node '%s' %s", n->domain && *n->domain ? n->domain : "",
                            n->domain && *n->domain ? "." : "", n->op_type, n->name ? n->name : "", a->hint);
    }
    return AMP_OK;
}

/* One node's backward step: its outputs' gradients in, its inputs' contributions out. */
static AmpCode step(Ad *a, AmpNode *n, AmpStatus *st) {
    const AmpGradRule *r = amp_grad_rule(n->op);
    if (!r->fn || n->n_inputs > 32 || n->n_outputs > 16) return AMP_OK;
    uint32_t want = 0;
    for (int i = 0; i < n->n_inputs; i++)
        if (((r->slots >> i) & 1u) && active(a, n->inputs[i])) want |= 1u << i;
    if (!want) return AMP_OK;
    AmpValue *gy[16] = {0}, *gx[32] = {0};
    bool any = false;
    for (int k = 0; k < n->n_outputs; k++) {
        if (!active(a, n->outputs[k])) continue;
        gy[k] = total(a, n->outputs[k], NULL, NULL);
        any |= gy[k] != NULL;
    }
    if (!any) return AMP_OK;
    AmpGradCtx c = {.b = &a->b, .n = n, .gy = gy, .gx = gx, .want = want};
    r->fn(&c);
    if (amp_builder_status(&a->b, st)) return st->code;
    for (int i = 0; i < n->n_inputs; i++) {
        if (!((want >> i) & 1u)) continue;
        if (!gx[i])
            return amp_fail(st, AMP_ERR_INTERNAL, "grad: the %s rule gave no gradient for input %d of node '%s'",
                            n->op_type, i, n->name ? n->name : "");
        AmpCode rc = add_contrib(a, n->inputs[i], gx[i], st);
        if (rc) return rc;
    }
    return AMP_OK;
}

/* Whether v's type says it holds one element (rank 0, or every dim 1). */
static bool one_element(const AmpValue *v) {
    if (v->type.kind != AMP_TYPE_TENSOR || v->type.rank < 0) return false;
    for (int i = 0; i < v->type.rank; i++)
        if (v->type.dims[i].value != 1) return false;
    return true;
}

/* The marks, the seed "<y>_grad" and the backward steps, once the values differentiated
 * with respect to have their fwd mark. */
static AmpCode ad_run(Ad *a, AmpValue *y, AmpStatus *st) {
    mark(a, y);
    AmpCode rc = check_rules(a, st);
    if (rc) return rc;
    char name[1024];
    snprintf(name, sizeof name, "%s_grad", y->name);
    AmpValue *seed;
    if (one_element(y)) { /* a loss: a Constant 1, shaped like it when it is [1] or [1, 1] */
        seed = amp_build_scalar_named(&a->b, name, y->type.dtype, 1.0);
        if (y->type.rank > 0) seed = amp_grad_reshape_like(&(AmpGradCtx){.b = &a->b}, seed, y);
    } else { /* ones shaped like y */
        AmpValue *ones = amp_build_fill(&a->b, "seed_ones", amp_build1(&a->b, "Shape", "seed_shape", y),
                                        y->type.kind == AMP_TYPE_TENSOR ? y->type.dtype : AMP_DT_FLOAT, 1.0);
        AmpValue *in[1] = {ones};
        seed = amp_build_end(&a->b, amp_build_start_named(&a->b, "Identity", name, in, 1, 1));
    }
    if ((rc = amp_builder_status(&a->b, st))) return rc;
    if (slot_of(a, y) < 0) return AMP_OK; /* not computed by the forward: no path */
    if ((rc = add_contrib(a, y, seed, st))) return rc;
    for (size_t j = a->n_nodes; j-- > 0 && !rc;) rc = step(a, a->nodes[j], st);
    return rc;
}

AmpCode amp_grad_backward(AmpModel *m, AmpValue *loss, const AmpGradOptions *o, AmpGradSummary *sum,
                          AmpGradParam **params, size_t *n_params, AmpStatus *st) {
    *params = NULL;
    *n_params = 0;
    Ad a;
    AmpGraph *g = m->graph;
    AmpGradParam *ps = NULL;
    AmpCode rc = ad_open(&a, m, &g, 1, NULL, NULL, st);
    if (!rc && !(ps = calloc(a.n_values + 1, sizeof *ps))) rc = amp_fail(st, AMP_ERR_INTERNAL, "grad: out of memory");
    if (rc) goto done;
    a.hint = "lies on a path from a parameter to the loss and has no gradient rule yet (freeze the parameters "
             "before it with --freeze GLOB)";
    for (size_t i = 0; i < a.n_values; i++) a.fwd[i] = trainable(g->values[i], o, &sum->n_frozen);
    if ((rc = ad_run(&a, loss, st))) goto done;
    char name[1024];
    for (size_t i = 0; i < a.n_values; i++) {
        AmpValue *p = g->values[i];
        if (!trainable(p, o, &(size_t){0})) continue;
        if (!a.contrib[i].n) {
            sum->n_unused++;
            continue;
        }
        snprintf(name, sizeof name, "%s_grad", p->name);
        AmpValue *gp = total(&a, p, name, NULL);
        if ((rc = amp_builder_status(&a.b, st))) goto done;
        ps[(*n_params)++] = (AmpGradParam){p, gp};
    }
    sum->n_nodes += a.b.n_nodes;
done:
    ad_close(&a);
    if (rc) {
        free(ps);
        *n_params = 0;
    } else {
        *params = ps;
    }
    return rc;
}

AmpCode amp_grad_backward_wrt(AmpModel *m, const AmpGradWrt *w, size_t *n_nodes, AmpStatus *st) {
    Ad a;
    AmpCode rc = ad_open(&a, m, w->graphs, w->n_graphs, w->skip, w->at, st);
    if (rc) goto done;
    a.hint = w->hint ? w->hint : "lies on a path from an x to y and has no gradient rule yet";
    for (size_t i = 0; i < w->n_xs; i++) {
        long s = slot_of(&a, w->xs[i]);
        if (s < 0) {
            rc = amp_fail(st, AMP_ERR_INPUT, "grad: '%s' is not a value of the graphs differentiated over",
                          w->xs[i]->name);
            goto done;
        }
        a.fwd[s] = 1;
    }
    if ((rc = ad_run(&a, w->y, st))) goto done;
    char name[1024];
    for (size_t i = 0; i < w->n_xs && !rc; i++) {
        AmpValue *x = w->xs[i];
        snprintf(name, sizeof name, "%s_grad", x->name);
        AmpValue *into = w->into && w->into[i] && strcmp(w->into[i]->name, name) == 0 ? w->into[i] : NULL;
        if (!a.contrib[slot_of(&a, x)].n) { /* y does not depend on x: zeros shaped like x */
            AmpValue *z = amp_grad_zeros_like(&(AmpGradCtx){.b = &a.b}, x);
            if ((rc = amp_builder_status(&a.b, st))) goto done;
            if ((rc = add_contrib(&a, x, z, st))) goto done;
        }
        AmpValue *gx = total(&a, x, into ? NULL : name, into);
        if (w->into && w->into[i] && !into) { /* the node's own output reads it */
            AmpValue *in[1] = {gx};
            amp_build_end(&a.b, amp_build_start_to(&a.b, "Identity", w->into[i]->name, in, 1, w->into[i]));
        }
        rc = amp_builder_status(&a.b, st);
    }
    if (n_nodes) *n_nodes = a.b.n_nodes;
done:
    ad_close(&a);
    return rc;
}
