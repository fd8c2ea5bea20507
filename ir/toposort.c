/* Topological order of a graph's nodes: a linear check, and a stable sort (Kahn's
 * algorithm keeping the existing order wherever dependencies allow) when the check
 * fails. A node depends on the producers of its inputs and of the outer-scope values
 * its subgraphs read. */
#include <stdbool.h>
#include <stdlib.h>

#include "ir/ir.h"

/* Is `n` the node that should come before `user` because user (or a subgraph under it)
 * reads a value n produces? Collected by the callback for each such producer. */
typedef void (*DepFn)(AmpNode *producer, void *ctx);

static void outer_deps(const AmpGraph *sub, const AmpGraph *g, DepFn fn, void *ctx) {
    for (AmpNode *n = sub->first; n; n = n->next) {
        for (int i = 0; i < n->n_inputs; i++) {
            AmpValue *v = n->inputs[i];
            if (v && v->graph == g && v->producer) fn(v->producer, ctx);
        }
        for (size_t k = 0; k < n->n_attrs; k++) {
            if (n->attrs[k].g) outer_deps(n->attrs[k].g, g, fn, ctx);
            for (size_t j = 0; j < n->attrs[k].n_graphs; j++) outer_deps(n->attrs[k].graphs[j], g, fn, ctx);
        }
    }
}

static void node_deps(AmpNode *n, DepFn fn, void *ctx) {
    for (int i = 0; i < n->n_inputs; i++) {
        AmpValue *v = n->inputs[i];
        if (v && v->graph == n->graph && v->producer) fn(v->producer, ctx);
    }
    for (size_t k = 0; k < n->n_attrs; k++) {
        if (n->attrs[k].g) outer_deps(n->attrs[k].g, n->graph, fn, ctx);
        for (size_t j = 0; j < n->attrs[k].n_graphs; j++) outer_deps(n->attrs[k].graphs[j], n->graph, fn, ctx);
    }
}

typedef struct OrderCheck {
    int pos;
    bool ok;
} OrderCheck;

static void check_dep(AmpNode *p, void *ctx) {
    OrderCheck *oc = ctx;
    if (p->mark >= oc->pos) oc->ok = false;
}

typedef struct SortCtx {
    AmpNode **nodes;
    int *indeg;
    int **succ;
    int *n_succ, *cap_succ;
    int cur;
    bool oom;
} SortCtx;

static void count_dep(AmpNode *p, void *ctx) {
    SortCtx *s = ctx;
    int from = p->mark;
    if (s->n_succ[from] == s->cap_succ[from]) {
        int cap = s->cap_succ[from] ? s->cap_succ[from] * 2 : 4;
        int *ns = realloc(s->succ[from], (size_t)cap * sizeof *ns);
        if (!ns) {
            s->oom = true;
            return;
        }
        s->succ[from] = ns;
        s->cap_succ[from] = cap;
    }
    s->succ[from][s->n_succ[from]++] = s->cur;
    s->indeg[s->cur]++;
}

/* Min-heap of node positions: Kahn's algorithm that keeps the file's order wherever
 * the dependencies allow it. */
static void heap_push(int *h, int *n, int v) {
    int i = (*n)++;
    while (i && h[(i - 1) / 2] > v) h[i] = h[(i - 1) / 2], i = (i - 1) / 2;
    h[i] = v;
}

static int heap_pop(int *h, int *n) {
    int top = h[0], v = h[--*n], i = 0;
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        int mv = v;
        if (l < *n && h[l] < mv) m = l, mv = h[l];
        if (r < *n && h[r] < mv) m = r;
        if (m == i) break;
        h[i] = h[m];
        i = m;
    }
    if (*n) h[i] = v;
    return top;
}

AmpCode amp_graph_toposort(AmpGraph *g, AmpStatus *st) {
    int pos = 0;
    for (AmpNode *n = g->first; n; n = n->next) n->mark = pos++;
    bool sorted = true;
    for (AmpNode *n = g->first; n && sorted; n = n->next) {
        OrderCheck oc = {n->mark, true};
        node_deps(n, check_dep, &oc);
        sorted = oc.ok;
    }
    if (sorted) return AMP_OK;

    int N = pos;
    SortCtx s = {0};
    s.nodes = calloc((size_t)N, sizeof *s.nodes);
    s.indeg = calloc((size_t)N, sizeof *s.indeg);
    s.succ = calloc((size_t)N, sizeof *s.succ);
    s.n_succ = calloc((size_t)N, sizeof *s.n_succ);
    s.cap_succ = calloc((size_t)N, sizeof *s.cap_succ);
    int *heap = calloc((size_t)N, sizeof *heap);
    AmpCode rc = AMP_OK;
    if (!s.nodes || !s.indeg || !s.succ || !s.n_succ || !s.cap_succ || !heap) {
        rc = amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
        goto done;
    }
    for (AmpNode *n = g->first; n; n = n->next) s.nodes[n->mark] = n;
    for (int i = 0; i < N; i++) {
        s.cur = i;
        node_deps(s.nodes[i], count_dep, &s);
    }
    if (s.oom) {
        rc = amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
        goto done;
    }
    int hn = 0, done_n = 0;
    for (int i = 0; i < N; i++)
        if (!s.indeg[i]) heap_push(heap, &hn, i);
    g->first = g->last = NULL;
    g->n_nodes = 0;
    while (hn) {
        int i = heap_pop(heap, &hn);
        amp_node_append(g, s.nodes[i]);
        done_n++;
        for (int k = 0; k < s.n_succ[i]; k++)
            if (--s.indeg[s.succ[i][k]] == 0) heap_push(heap, &hn, s.succ[i][k]);
    }
    if (done_n != N) {
        AmpNode *bad = NULL;
        for (int i = 0; i < N && !bad; i++)
            if (s.indeg[i]) bad = s.nodes[i];
        rc = amp_fail(st, AMP_ERR_INPUT, "the graph has a cycle through node '%s' (%s)",
                      bad->name ? bad->name : "", bad->op_type ? bad->op_type : "");
        /* Keep every node reachable so the model can still be freed and printed. */
        for (int i = 0; i < N; i++)
            if (s.indeg[i]) amp_node_append(g, s.nodes[i]);
    }
done:
    for (int i = 0; s.succ && i < N; i++) free(s.succ[i]);
    free(s.nodes), free(s.indeg), free(s.succ), free(s.n_succ), free(s.cap_succ), free(heap);
    return rc;
}

