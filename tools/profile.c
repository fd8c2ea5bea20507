/* `ampc bench --profile` (profile.h). */
#include "tools/profile.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/observe.h"

typedef struct NodeTime {
    const AmpNode *node; /* NULL: an empty slot */
    double ms;           /* summed over the timed runs */
    long calls;
} NodeTime;

struct AmpcProfile {
    AmpSession *s;
    NodeTime *slot; /* open addressing by node pointer */
    size_t cap, used;
    double last, outside, total;
    long runs;
    bool full; /* a node found no slot (never with cap at twice the nodes seen) */
};

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static NodeTime *find(AmpcProfile *p, const AmpNode *n) {
    size_t h = (size_t)(((uintptr_t)n >> 4) * 0x9e3779b97f4a7c15ull) & (p->cap - 1);
    for (size_t i = 0; i < p->cap; i++, h = (h + 1) & (p->cap - 1))
        if (p->slot[h].node == n || !p->slot[h].node) return &p->slot[h];
    return NULL;
}

static bool grow(AmpcProfile *p) {
    size_t cap = p->cap ? p->cap * 2 : 1024;
    NodeTime *old = p->slot, *fresh = calloc(cap, sizeof *fresh);
    if (!fresh) return false;
    size_t old_cap = p->cap;
    p->slot = fresh, p->cap = cap;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].node) *find(p, old[i].node) = old[i];
    free(old);
    return true;
}

/* The hook: the time since the last mark is this node's. */
static AmpCode on_node(void *ctx, AmpExec *e, const AmpNode *n, AmpStatus *st) {
    (void)e, (void)st;
    AmpcProfile *p = ctx;
    double t = now_ms();
    if (p->used * 2 >= p->cap && !grow(p)) p->full = true;
    NodeTime *nt = p->full ? NULL : find(p, n);
    if (nt) {
        if (!nt->node) nt->node = n, p->used++;
        nt->ms += t - p->last;
        nt->calls++;
    }
    p->last = now_ms(); /* the hook's own time is no node's */
    return AMP_OK;
}

AmpcProfile *ampc_profile_new(AmpSession *s) {
    AmpcProfile *p = calloc(1, sizeof *p);
    if (!p || !grow(p)) {
        free(p);
        return NULL;
    }
    p->s = s;
    amp_session_set_hook(s, on_node, p);
    return p;
}

void ampc_profile_begin_run(AmpcProfile *p) {
    p->last = now_ms();
}

void ampc_profile_end_run(AmpcProfile *p, double run_ms) {
    p->total += run_ms;
    p->runs++;
}

typedef struct OpTime {
    const char *op;
    double ms;
    long nodes;
} OpTime;

static int by_ms_desc(double a, double b) {
    return a < b ? 1 : a > b ? -1 : 0;
}
static int cmp_op(const void *a, const void *b) {
    return by_ms_desc(((const OpTime *)a)->ms, ((const OpTime *)b)->ms);
}
static int cmp_node(const void *a, const void *b) {
    return by_ms_desc(((const NodeTime *)a)->ms, ((const NodeTime *)b)->ms);
}

void ampc_profile_print(FILE *f, const AmpcProfile *p, const char *backend, int top) {
    if (!p->runs) return;
    NodeTime *nodes = malloc((p->used ? p->used : 1) * sizeof *nodes);
    OpTime *ops = calloc(p->used ? p->used : 1, sizeof *ops);
    if (!nodes || !ops) {
        free(nodes), free(ops);
        fprintf(f, "profile: out of memory\n");
        return;
    }
    size_t nn = 0, no = 0;
    double in_nodes = 0;
    for (size_t i = 0; i < p->cap; i++) {
        if (!p->slot[i].node) continue;
        const NodeTime *t = &p->slot[i];
        nodes[nn++] = *t;
        in_nodes += t->ms;
        size_t k = 0;
        while (k < no && strcmp(ops[k].op, t->node->op_type) != 0) k++;
        if (k == no) ops[no++].op = t->node->op_type;
        ops[k].ms += t->ms;
        ops[k].nodes++;
    }
    qsort(ops, no, sizeof *ops, cmp_op);
    qsort(nodes, nn, sizeof *nodes, cmp_node);
    double per = 1.0 / (double)p->runs, total = p->total * per;
    fprintf(f, "profile: %ld timed run%s, %.3f ms each on average, backend %s%s\n", p->runs, p->runs == 1 ? "" : "s",
            total, backend,
            strcmp(backend, "cpu") == 0 ? "" : " (a device that queues kernels: these are launch times)");
    fprintf(f, "  %-28s %10s %7s %6s\n", "op type", "ms/run", "share", "nodes");
    for (size_t k = 0; k < no; k++)
        fprintf(f, "  %-28s %10.3f %6.1f%% %6ld\n", ops[k].op, ops[k].ms * per,
                total > 0 ? 100 * ops[k].ms * per / total : 0.0, ops[k].nodes);
    double outside = total - in_nodes * per;
    fprintf(f, "  %-28s %10.3f %6.1f%%\n", "(outside the main graph's nodes)", outside > 0 ? outside : 0.0,
            total > 0 && outside > 0 ? 100 * outside / total : 0.0);
    fprintf(f, "  (outside: inputs in, outputs out, and for a training step the algorithm graph and the update "
               "bindings)\n");
    if (p->full) fprintf(f, "  (some nodes were left out: out of memory)\n");
    for (size_t i = 0; i < nn && (int)i < top; i++) {
        const AmpNode *n = nodes[i].node;
        fprintf(f, "%s  %10.3f ms/run  %s '%s'\n", i ? "" : "slowest nodes:\n", nodes[i].ms * per, n->op_type,
                n->name && n->name[0] ? n->name : "(unnamed)");
    }
    free(nodes), free(ops);
}

void ampc_profile_free(AmpcProfile *p) {
    if (!p) return;
    amp_session_set_hook(p->s, NULL, NULL);
    free(p->slot);
    free(p);
}
