/* Reverse-mode autodiff over the main graph (issue 23): from a scalar loss back to the
 * trainable parameters, one rule per op (grad_rules*.c). Only values on a path from a
 * parameter to the loss ("active") get a gradient; a value read by several nodes gets the
 * Sum of their contributions. Node and helper value names start with "grad/"; each
 * parameter's gradient is named "<param>_grad" and the seed "<loss>_grad" (a Constant 1),
 * as DESIGN.md's training contract says. */
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "passes/grad_impl.h"
#include "passes/grad_train.h"

#define PREFIX "grad/"

typedef struct Contribs {
    AmpValue **v;
    size_t n, cap;
} Contribs;

typedef struct Ad {
    AmpModel *m;
    AmpGraph *g;
    AmpBuilder b;
    size_t n_values;  /* values of g before the backward: the arrays below cover them */
    uint8_t *fwd;     /* by value id: depends on a parameter through differentiable slots */
    uint8_t *bwd;     /* by value id: the loss depends on it */
    Contribs *contrib; /* by value id: gradient contributions */
} Ad;

static bool is_float_tensor(const AmpValue *v) {
    return v && v->type.kind == AMP_TYPE_TENSOR &&
           (v->type.dtype == AMP_DT_FLOAT || v->type.dtype == AMP_DT_DOUBLE || v->type.dtype == AMP_DT_FLOAT16 ||
            v->type.dtype == AMP_DT_BFLOAT16);
}

static bool active(const Ad *a, const AmpValue *v) {
    return v && v->graph == a->g && v->id < a->n_values && a->fwd[v->id] && a->bwd[v->id] && is_float_tensor(v);
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

/* Marks what depends on a parameter (forward) and what the loss depends on (backward). */
static void mark(Ad *a, AmpValue *loss, const AmpGradOptions *o, AmpGradSummary *sum) {
    for (size_t i = 0; i < a->n_values; i++)
        a->fwd[i] = trainable(a->g->values[i], o, &sum->n_frozen);
    for (AmpNode *n = a->g->first; n; n = n->next) {
        const AmpGradRule *r = amp_grad_rule(n->op);
        bool dep = false;
        for (int i = 0; i < n->n_inputs && !dep; i++) {
            AmpValue *v = n->inputs[i];
            /* Without a rule every float input counts, so that the op is found below. */
            dep = v && v->graph == a->g && v->id < a->n_values && a->fwd[v->id] &&
                  (!r->fn || (i < 32 && ((r->slots >> i) & 1u)));
        }
        for (int k = 0; dep && k < n->n_outputs; k++)
            if (n->outputs[k]) a->fwd[n->outputs[k]->id] = 1;
    }
    a->bwd[loss->id] = 1;
    for (AmpNode *n = a->g->last; n; n = n->prev) {
        bool need = false;
        for (int k = 0; k < n->n_outputs && !need; k++) need = n->outputs[k] && a->bwd[n->outputs[k]->id];
        for (int i = 0; need && i < n->n_inputs; i++)
            if (n->inputs[i] && n->inputs[i]->graph == a->g && n->inputs[i]->id < a->n_values)
                a->bwd[n->inputs[i]->id] = 1;
    }
}

static AmpCode add_contrib(Ad *a, AmpValue *v, AmpValue *g, AmpStatus *st) {
    Contribs *c = &a->contrib[v->id];
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
 * given (then an Identity for a single contribution), NULL when it has none. */
static AmpValue *total(Ad *a, AmpValue *v, const char *name) {
    Contribs *c = &a->contrib[v->id];
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
    if (c->n == 1 && !name) return c->v[0];
    const char *op = c->n == 1 ? "Identity" : "Sum";
    AmpNode *n = name ? amp_build_start_named(&a->b, op, name, c->v, (int)c->n, 1)
                      : amp_build_start(&a->b, op, v->name, c->v, (int)c->n, 1);
    return amp_build_end(&a->b, n);
}

/* The error for an op without a rule on a parameter-to-loss path. */
static AmpCode check_rules(Ad *a, AmpStatus *st) {
    for (AmpNode *n = a->g->first; n; n = n->next) {
        if (amp_grad_has_rule(n->op)) continue;
        bool in = false, out = false;
        for (int i = 0; i < n->n_inputs && !in; i++) in = active(a, n->inputs[i]);
        for (int k = 0; k < n->n_outputs && !out; k++) out = active(a, n->outputs[k]);
        if (in && out)
            return amp_fail(st, AMP_ERR_UNSUPPORTED,
                            "grad: %s%s%s node '%s' lies on a path from a parameter to the loss and has no gradient "
                            "rule yet (freeze the parameters before it with --freeze GLOB)",
                            n->domain && *n->domain ? n->domain : "", n->domain && *n->domain ? "." : "", n->op_type,
                            n->name ? n->name : "");
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
        gy[k] = total(a, n->outputs[k], NULL);
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

AmpCode amp_grad_backward(AmpModel *m, AmpValue *loss, const AmpGradOptions *o, AmpGradSummary *sum,
                          AmpGradParam **params, size_t *n_params, AmpStatus *st) {
    *params = NULL;
    *n_params = 0;
    Ad a = {.m = m, .g = m->graph, .n_values = m->graph->n_values};
    amp_builder_init(&a.b, a.g, PREFIX);
    a.fwd = calloc(a.n_values + 1, 1);
    a.bwd = calloc(a.n_values + 1, 1);
    a.contrib = calloc(a.n_values + 1, sizeof *a.contrib);
    AmpGradParam *ps = calloc(a.n_values + 1, sizeof *ps);
    AmpCode rc = AMP_OK;
    if (!a.fwd || !a.bwd || !a.contrib || !ps) {
        rc = amp_fail(st, AMP_ERR_INTERNAL, "grad: out of memory");
        goto done;
    }
    mark(&a, loss, o, sum);
    if ((rc = check_rules(&a, st))) goto done;
    AmpNode *last = a.g->last; /* the backward's nodes go after it: not walked */
    char name[1024];
    snprintf(name, sizeof name, "%s_grad", loss->name);
    AmpValue *seed = amp_build_scalar_named(&a.b, name, loss->type.dtype, 1.0);
    if (loss->type.rank > 0) /* a loss of one element, [1] or [1, 1]: the seed shaped like it */
        seed = amp_grad_reshape_like(&(AmpGradCtx){.b = &a.b}, seed, loss);
    if ((rc = amp_builder_status(&a.b, st))) goto done;
    if ((rc = add_contrib(&a, loss, seed, st))) goto done;
    for (AmpNode *n = last; n && !rc; n = n->prev) rc = step(&a, n, st);
    if (rc) goto done;
    for (size_t i = 0; i < a.n_values; i++) {
        AmpValue *p = a.g->values[i];
        if (!trainable(p, o, &(size_t){0})) continue;
        if (!a.contrib[i].n) {
            sum->n_unused++;
            continue;
        }
        snprintf(name, sizeof name, "%s_grad", p->name);
        AmpValue *gp = total(&a, p, name);
        if ((rc = amp_builder_status(&a.b, st))) goto done;
        ps[(*n_params)++] = (AmpGradParam){p, gp};
    }
    sum->n_nodes += a.b.n_nodes;
done:
    for (size_t i = 0; a.contrib && i < a.n_values; i++) free(a.contrib[i].v);
    free(a.fwd), free(a.bwd), free(a.contrib);
    if (rc) {
        free(ps);
        *n_params = 0;
    } else {
        *params = ps;
    }
    return rc;
}
