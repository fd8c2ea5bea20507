/* The "dce" pass: removes nodes none of whose outputs is used (by any node, including
 * subgraph nodes reading outer-scope values), is a graph output, or is bound by training
 * info. A worklist over use counts reaches the fixed point in one sweep. Initializers are
 * kept (they may be bound or fed by the caller); only nodes go. */
#include <stdlib.h>
#include <string.h>

#include "passes.h"

/* AmpNode.mark while the pass runs: one of these, or a positive count of graph-output
 * entries naming one of the node's outputs. Graph outputs are counted from the output
 * lists rather than AMP_VALUE_OUTPUT, since a subgraph may return an outer value as it is
 * (the flag then says nothing about which graph returns it); a subgraph's entries are
 * released when its owner dies. */
enum { LIVE = 0, PINNED = -1, QUEUED = -2, DELETED = -3 };

typedef struct Dce {
    AmpNode **items; /* the worklist: nodes found dead, not yet deleted */
    size_t n, cap;
    bool oom;
} Dce;

static bool is_default_domain(const char *d) {
    return !d || !*d || strcmp(d, "ai.onnx") == 0;
}

/* An op ampc does not know from a custom domain may have effects we cannot see. */
static bool keeps_itself(const AmpNode *n) {
    return n->op == AMP_OP_UNKNOWN && !is_default_domain(n->domain);
}

static bool is_dead(const AmpNode *n) {
    if (n->mark != LIVE) return false;
    for (int i = 0; i < n->n_outputs; i++) {
        const AmpValue *v = n->outputs[i];
        if (v && v->n_uses) return false;
    }
    return true;
}

static void push(Dce *d, AmpNode *n) {
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 256;
        AmpNode **items = realloc(d->items, cap * sizeof *items);
        if (!items) {
            d->oom = true;
            return;
        }
        d->items = items;
        d->cap = cap;
    }
    n->mark = QUEUED;
    d->items[d->n++] = n;
}

static void release(Dce *d, AmpNode *p) {
    if (p && p->mark > 0 && --p->mark == LIVE && is_dead(p)) push(d, p);
}

/* Deletes n and everything in its subgraphs, queueing producers whose last use went. */
static void kill(Dce *d, AmpNode *n) {
    for (size_t i = 0; i < n->n_attrs; i++) {
        AmpAttr *a = &n->attrs[i];
        size_t ng = a->g ? 1 : 0;
        if (a->type == AMP_ATTR_GRAPHS) ng = a->n_graphs;
        for (size_t k = 0; k < ng; k++) {
            AmpGraph *sg = a->type == AMP_ATTR_GRAPHS ? a->graphs[k] : a->g;
            if (!sg) continue;
            for (AmpNode *s = sg->first, *next; s; s = next) {
                next = s->next;
                kill(d, s);
            }
            for (size_t o = 0; o < sg->outputs.n; o++) {
                AmpValue *v = sg->outputs.items[o].value;
                if (v) release(d, v->producer);
            }
        }
    }
    for (int i = 0; i < n->n_inputs; i++) {
        AmpValue *v = n->inputs[i];
        if (!v) continue;
        amp_node_set_input(n, i, NULL);
        if (v->producer && is_dead(v->producer)) push(d, v->producer);
    }
    amp_node_delete(n);
    n->mark = DELETED;
}

static AmpCode reset_marks(AmpGraph *g, void *ctx, AmpStatus *st) {
    (void)ctx;
    (void)st;
    for (AmpNode *n = g->first; n; n = n->next) n->mark = LIVE;
    return AMP_OK;
}

/* A node that must stay pins its enclosing owners too: a subgraph cannot outlive them. */
static void pin(AmpNode *n) {
    while (n && n->mark != PINNED) {
        n->mark = PINNED;
        n = n->graph ? n->graph->owner : NULL;
    }
}

/* The roots of g: nodes that keep themselves, and producers of g's outputs. */
static AmpCode find_roots(AmpGraph *g, void *ctx, AmpStatus *st) {
    (void)ctx;
    (void)st;
    for (AmpNode *n = g->first; n; n = n->next)
        if (keeps_itself(n)) pin(n);
    for (size_t i = 0; i < g->outputs.n; i++) {
        AmpValue *v = g->outputs.items[i].value;
        if (v && v->producer && v->producer->mark >= LIVE) v->producer->mark++;
    }
    return AMP_OK;
}

static void pin_name(AmpGraph *g, const char *name) {
    AmpValue *v = g && name ? amp_graph_lookup(g, name) : NULL;
    if (v && v->producer) pin(v->producer);
}

static AmpCode find_dead(AmpGraph *g, void *ctx, AmpStatus *st) {
    (void)st;
    Dce *d = ctx;
    for (AmpNode *n = g->first; n; n = n->next)
        if (is_dead(n)) push(d, n);
    return AMP_OK;
}

AmpCode amp_pass_dce(AmpModel *m, const AmpPassOptions *opt, AmpStatus *st) {
    (void)opt;
    Dce d = {0};
    amp_model_walk(m, reset_marks, NULL, st);
    amp_model_walk(m, find_roots, NULL, st);
    for (size_t i = 0; i < m->n_training; i++) {
        const AmpTrainingInfo *ti = &m->training[i];
        for (size_t k = 0; k < ti->n_update_bindings; k++) {
            pin_name(m->graph, ti->update_bindings[k].key);
            pin_name(ti->algorithm, ti->update_bindings[k].value);
        }
        for (size_t k = 0; k < ti->n_init_bindings; k++) {
            pin_name(m->graph, ti->init_bindings[k].key);
            pin_name(ti->initialization, ti->init_bindings[k].value);
        }
    }
    amp_model_walk(m, find_dead, &d, st);
    while (d.n && !d.oom) {
        AmpNode *n = d.items[--d.n];
        if (n->mark == QUEUED) kill(&d, n);
    }
    free(d.items);
    if (d.oom) return amp_fail(st, AMP_ERR_INTERNAL, "dce: out of memory");
    return AMP_OK;
}
