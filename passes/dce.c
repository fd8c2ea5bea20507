/* The "dce" pass: removes nodes none of whose outputs is used (by any node, including
 * subgraph nodes reading outer-scope values), is a graph output, or is bound by training
 * info. Initializers are kept (they may be bound or fed by the caller); only nodes go.
 * Linear time: a worklist over per-node live-use counts finds every dead node first, then
 * one sweep rewrites the use lists (removing uses one by one would be quadratic in a
 * value's fan-out). */
#include <stdlib.h>
#include <string.h>

#include "passes/pass.h"

/* AmpNode.mark while the pass runs: >= 0, the number of live reasons to keep the node
 * (uses of its outputs, plus graph-output entries naming them), or one of these.
 * Graph outputs are counted from the output lists rather than AMP_VALUE_OUTPUT: a
 * subgraph may return an outer value as it is, and the flag cannot say which graph
 * returns it; a subgraph's entries are released when its owner dies. */
enum { PINNED = -1, QUEUED = -2, DELETED = -3 };

typedef struct NodeVec {
    AmpNode **items;
    size_t n, cap;
} NodeVec;

typedef struct Dce {
    NodeVec work; /* found dead, not yet processed */
    NodeVec dead; /* every node to delete, subgraph nodes of dead owners included */
    bool oom;
} Dce;

static void vec_push(Dce *d, NodeVec *v, AmpNode *n) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 256;
        AmpNode **items = realloc(v->items, cap * sizeof *items);
        if (!items) {
            d->oom = true;
            return;
        }
        v->items = items;
        v->cap = cap;
    }
    v->items[v->n++] = n;
}

/* An op ampc does not know from a custom domain may have effects we cannot see. */
static bool keeps_itself(const AmpNode *n) {
    return n->op == AMP_OP_UNKNOWN && !amp_domain_is_default(n->domain);
}

static void release(Dce *d, AmpNode *p) {
    if (p && p->mark > 0 && --p->mark == 0) {
        p->mark = QUEUED;
        vec_push(d, &d->work, p);
    }
}

/* Calls fn on every subgraph of n. */
static void for_subgraphs(AmpNode *n, void (*fn)(Dce *, AmpGraph *), Dce *d) {
    for (size_t i = 0; i < n->n_attrs; i++) {
        AmpAttr *a = &n->attrs[i];
        if (a->type == AMP_ATTR_GRAPHS) {
            for (size_t k = 0; k < a->n_graphs; k++)
                if (a->graphs[k]) fn(d, a->graphs[k]);
        } else if (a->g) {
            fn(d, a->g);
        }
    }
}

static void kill(Dce *d, AmpNode *n);

/* A dying owner takes its subgraph along: every node in it, and its output entries. */
static void kill_graph(Dce *d, AmpGraph *g) {
    for (AmpNode *s = g->first; s; s = s->next)
        if (s->mark != DELETED) kill(d, s);
    for (size_t o = 0; o < g->outputs.n; o++)
        if (g->outputs.items[o].value) release(d, g->outputs.items[o].value->producer);
}

/* Marks n dead (the IR is edited later, in one sweep) and releases what it kept alive. */
static void kill(Dce *d, AmpNode *n) {
    n->mark = DELETED;
    vec_push(d, &d->dead, n);
    for_subgraphs(n, kill_graph, d);
    for (int i = 0; i < n->n_inputs; i++)
        if (n->inputs[i]) release(d, n->inputs[i]->producer);
}

/* mark = uses of the node's outputs. */
static AmpCode count_uses(AmpGraph *g, void *ctx, AmpStatus *st) {
    (void)ctx;
    (void)st;
    for (AmpNode *n = g->first; n; n = n->next) {
        size_t uses = 0;
        for (int i = 0; i < n->n_outputs; i++)
            if (n->outputs[i]) uses += n->outputs[i]->n_uses;
        n->mark = uses > (size_t)(1 << 30) ? 1 << 30 : (int)uses; /* never reaching 0 is fine */
    }
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
        if (v && v->producer && v->producer->mark >= 0 && v->producer->mark < (1 << 30))
            v->producer->mark++;
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
        if (n->mark == 0) {
            n->mark = QUEUED;
            vec_push(d, &d->work, n);
        }
    return AMP_OK;
}

/* Drops, in one pass per value, the uses made by dead nodes. */
static AmpCode compact_uses(AmpGraph *g, void *ctx, AmpStatus *st) {
    (void)ctx;
    (void)st;
    for (size_t i = 0; i < g->n_values; i++) {
        AmpValue *v = g->values[i];
        size_t k = 0;
        for (size_t u = 0; u < v->n_uses; u++)
            if (v->uses[u].node->mark != DELETED) v->uses[k++] = v->uses[u];
        v->n_uses = k;
    }
    return AMP_OK;
}

AmpCode amp_pass_dce(AmpModel *m, const AmpPassOptions *opt, AmpStatus *st) {
    (void)opt;
    Dce d = {0};
    AmpCode rc;
    if ((rc = amp_model_walk(m, count_uses, NULL, st)) || (rc = amp_model_walk(m, find_roots, NULL, st))) return rc;
    for (size_t i = 0; i < m->n_training; i++) {
        const AmpTrainingInfo *ti = &m->training[i];
        /* Keys are initializers (of the main graph or of the algorithm: amp_training_key),
         * which DCE never drops; the values' producers are pinned. */
        for (size_t k = 0; k < ti->n_update_bindings; k++) pin_name(ti->algorithm, ti->update_bindings[k].value);
        for (size_t k = 0; k < ti->n_init_bindings; k++) pin_name(ti->initialization, ti->init_bindings[k].value);
    }
    if ((rc = amp_model_walk(m, find_dead, &d, st))) goto done;
    while (d.work.n && !d.oom) {
        AmpNode *n = d.work.items[--d.work.n];
        if (n->mark == QUEUED) kill(&d, n);
    }
    if (d.oom) {
        /* Nothing has been edited yet: the model is as it was. */
        rc = amp_fail(st, AMP_ERR_INTERNAL, "dce: out of memory");
        goto done;
    }
    if (d.dead.n && !(rc = amp_model_walk(m, compact_uses, NULL, st))) {
        for (size_t i = 0; i < d.dead.n; i++) {
            AmpNode *n = d.dead.items[i];
            /* The uses are gone already; clear the slots so delete finds nothing to drop. */
            for (int k = 0; k < n->n_inputs; k++) n->inputs[k] = NULL;
            amp_node_delete(n);
        }
    }
done:
    free(d.work.items);
    free(d.dead.items);
    return rc;
}
