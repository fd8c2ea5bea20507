/* The main graph's nodes prepared by helper threads while the loading thread binds them
 * in file order (load.c, for graphs of many nodes, from three threads up).
 *
 * Most of a node's load does not depend on any other node: sweeping its NodeProto,
 * making its arrays and strings, interning its op type, its attributes and rest, hashing
 * its names (amp_load_node_prepare). Only binding names to values is in file order
 * (amp_load_node_bind). Helpers, each with a LoadCtx and an arena of its own, take the
 * nodes from the front a few at a time; the loading thread binds node after node as they
 * are ready. When the node it needs is still a helper's, it takes a few nodes further on
 * and prepares them meanwhile, as a helper would; when it is nobody's, it loads it whole
 * (amp_load_node_pass1). So no thread idles while nodes are left, and the loading thread
 * waits only at the very end, for the few nodes a helper still holds. The helpers'
 * arenas join the model's at the end.
 *
 * A node a helper does not prepare (a malformed one, one with a tensor or graph
 * attribute) is loaded whole by amp_load_node_pass1 in its turn, so every error is met,
 * and worded, as a serial load meets it; and the model is the same, byte for byte once
 * saved, whatever the number of threads. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ir/load_impl.h"
#include "ir/names.h"

/* Nodes a helper takes at once: few, as the loading thread may wait for all of them. */
enum { PAR_TAKE = 16 };

/* What became of a node (AmpLoadPar.state). */
enum { NODE_PENDING = 0, NODE_PREPARED = 1, NODE_LEFT = 2 };

/* The input and output fields of the nodes a helper prepared: blocks that never move
 * (the loading thread reads them while the helper goes on), freed with the AmpLoadPar. */
typedef struct FieldBlock {
    struct FieldBlock *next;
    size_t used, cap;
    AmpNodeField f[];
} FieldBlock;

/* A thread that prepares nodes: a helper, or the loading thread between binds. */
typedef struct ParHelper {
    struct AmpLoadPar *par;
    pthread_t thread;
    LoadCtx *ctx; /* a helper's own (`own`: scratch, op interning, arena), or the loader's */
    LoadCtx own;
    AmpArena arena;
    AmpStatus unread; /* errors it meets are met again by amp_load_node_pass1 */
    AmpFieldVec scratch;
    FieldBlock *blocks;
} ParHelper;

struct AmpLoadPar {
    LoadCtx *c;
    AmpGraph *g;
    AmpNode *nodes;
    const Span *spans;
    size_t n;
    atomic_size_t next;          /* the first node nobody has taken */
    atomic_bool stop;
    _Atomic unsigned char *state; /* malloc'd, per node: NODE_* */
    const AmpNodeField **fields; /* malloc'd, per prepared node: its fields ... */
    size_t *n_fields;            /* ... and how many */
    bool prefetch;               /* big graphs: name map slots fetched ahead */
    ParHelper *helpers;
    int n_helpers;
    ParHelper self; /* the loading thread's part */
};

/* Room for n fields that stay where they are; NULL when out of memory. */
static AmpNodeField *fields_keep(ParHelper *h, const AmpNodeField *f, size_t n) {
    FieldBlock *b = h->blocks;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 4096 ? n : 4096;
        if (!(b = malloc(sizeof *b + cap * sizeof b->f[0]))) return NULL;
        b->next = h->blocks;
        b->used = 0;
        b->cap = cap;
        h->blocks = b;
    }
    AmpNodeField *out = b->f + b->used;
    if (n) memcpy(out, f, n * sizeof *f);
    b->used += n;
    return out;
}

static void prepare(ParHelper *h, size_t i) {
    AmpLoadPar *p = h->par;
    LoadCtx *w = h->ctx;
    AmpStatus *st = w->st;
    w->st = &h->unread;
    unsigned char state = NODE_LEFT;
    h->scratch.n = 0;
    if (amp_load_node_prepare(w, p->g, &p->nodes[i], p->spans[i], &h->scratch)) {
        const AmpNodeField *kept = fields_keep(h, h->scratch.v, h->scratch.n);
        if (kept) {
            p->fields[i] = kept;
            p->n_fields[i] = h->scratch.n;
            state = NODE_PREPARED;
        }
    }
    w->st = st;
    atomic_store_explicit(&p->state[i], state, memory_order_release);
}

/* Takes the next PAR_TAKE nodes nobody has and prepares them; false when none is left. */
static bool prepare_some(ParHelper *h) {
    AmpLoadPar *p = h->par;
    size_t from = atomic_fetch_add(&p->next, PAR_TAKE);
    if (from >= p->n) return false;
    size_t to = from + PAR_TAKE < p->n ? from + PAR_TAKE : p->n;
    for (size_t i = from; i < to; i++) prepare(h, i);
    return true;
}

static void *helper_run(void *arg) {
    ParHelper *h = arg;
    while (!atomic_load_explicit(&h->par->stop, memory_order_relaxed) && prepare_some(h)) {
    }
    return NULL;
}

AmpLoadPar *amp_load_par_start(LoadCtx *c, AmpGraph *g, AmpNode *nodes, const Span *spans, size_t n,
                               int threads, bool prefetch) {
    int n_helpers = threads - 1;
    if (n_helpers < 1 || n < 2) return NULL;
    AmpLoadPar *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->state = calloc(n, sizeof *p->state);
    p->fields = malloc(n * sizeof *p->fields);
    p->n_fields = malloc(n * sizeof *p->n_fields);
    p->helpers = calloc((size_t)n_helpers, sizeof *p->helpers);
    if (!p->state || !p->fields || !p->n_fields || !p->helpers) {
        amp_load_par_end(p);
        return NULL;
    }
    p->c = c;
    p->g = g;
    p->nodes = nodes;
    p->spans = spans;
    p->n = n;
    p->prefetch = prefetch;
    p->self.par = p;
    p->self.ctx = c;
    atomic_init(&p->next, 0);
    atomic_init(&p->stop, false);
    for (size_t i = 0; i < n; i++) atomic_init(&p->state[i], NODE_PENDING);
    for (int i = 0; i < n_helpers; i++) {
        ParHelper *h = &p->helpers[i];
        h->par = p;
        amp_arena_init(&h->arena);
        h->ctx = &h->own;
        h->own.m = c->m;
        h->own.arena = &h->arena;
        h->own.st = &h->unread;
        h->own.total = c->total;
        h->own.depth = c->depth;
        h->own.load_graph = c->load_graph;
        if (pthread_create(&h->thread, NULL, helper_run, h) != 0) break; /* fewer helpers */
        p->n_helpers = i + 1;
    }
    if (!p->n_helpers) {
        amp_load_par_end(p);
        return NULL;
    }
    return p;
}

/* Node i's state once it is settled. Every node before i is, so `next` is i (nobody has
 * node i: this thread takes it, NODE_LEFT) or past it (a helper has it: this thread
 * prepares nodes further on until node i is ready, or waits when none is left). */
static unsigned char settle(AmpLoadPar *p, size_t i) {
    unsigned char s;
    while ((s = atomic_load_explicit(&p->state[i], memory_order_acquire)) == NODE_PENDING) {
        size_t expect = i;
        if (atomic_compare_exchange_strong(&p->next, &expect, i + 1)) return NODE_LEFT;
        if (!prepare_some(&p->self)) break;
    }
    for (unsigned spins = 0; s == NODE_PENDING; s = atomic_load_explicit(&p->state[i], memory_order_acquire))
        if (++spins % 64 == 0) sched_yield();
    return s;
}

AmpCode amp_load_par_node(AmpLoadPar *p, size_t i, const char *gwhere) {
    AmpNode *n = &p->nodes[i];
    if (settle(p, i) == NODE_LEFT) {
        memset(n, 0, sizeof *n);
        return amp_load_node_pass1(p->c, p->g, n, p->spans[i], i, gwhere);
    }
    /* The name map slots of the outputs of a node further on (see AMP_PREFETCH_AHEAD). */
    size_t j = i + AMP_PREFETCH_AHEAD;
    if (p->prefetch && j < p->n && atomic_load_explicit(&p->state[j], memory_order_acquire) == NODE_PREPARED)
        for (size_t k = 0; k < p->n_fields[j]; k++)
            if (p->fields[j][k].num == 2 && p->fields[j][k].h) amp_graph_prefetch_hash(p->g, p->fields[j][k].h);
    return amp_load_node_bind(p->c, p->g, n, p->fields[i], p->n_fields[i], gwhere);
}

void amp_load_par_end(AmpLoadPar *p) {
    if (!p) return;
    atomic_store(&p->stop, true);
    for (int i = 0; i < p->n_helpers; i++) pthread_join(p->helpers[i].thread, NULL);
    for (int i = 0; i <= p->n_helpers; i++) {
        ParHelper *h = i < p->n_helpers ? &p->helpers[i] : &p->self;
        if (h != &p->self) {
            amp_arena_adopt(p->c->arena, &h->arena);
            free(h->own.scratch);
            free(h->own.fields);
            amp_load_nest_free(&h->own);
        }
        free(h->scratch.v);
        for (FieldBlock *b = h->blocks, *next; b; b = next) {
            next = b->next;
            free(b);
        }
    }
    free(p->helpers);
    free(p->state);
    free(p->fields);
    free(p->n_fields);
    free(p);
}
