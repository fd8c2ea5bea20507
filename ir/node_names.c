/* Node names unique within each graph (ONNX requires it; onnxruntime refuses a file with two
 * nodes of one name): after a pipeline, a node it made whose name another node of its graph
 * has already is renamed <name>_1, <name>_2, ... (the first one that no node of the graph
 * has). Passes name the nodes they make after what they replace (a fused GELU after the
 * first node of its formula, a Cast after its value), so two such names can meet. The
 * model's own nodes keep their names, repeated or not: --keep-fp32 globs and --explain
 * name them, and converting again must mean the same (ampc verify warns of repeats). Every pipeline runs
 * this over every node, so the common case (no name repeats) is one pass over the graph's
 * names into a table sized for them; the names of the whole graph are gathered only once a
 * repeat is found. */
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "ir/names.h"

/* Open addressing over 8-byte slots (a graph of a million nodes makes a table of 16 MiB,
 * read once per name): a 32-bit tag of the name's hash and the name's index + 1 in
 * `names`; the name itself is compared only when the tags agree. */
typedef struct NameSlot {
    uint32_t tag, idx;
} NameSlot;

typedef struct NameSet {
    NameSlot *slot;
    const char **names;
    size_t cap, n, cap_names; /* cap a power of two, above n * 3 / 2 */
} NameSet;

static bool set_init(NameSet *s, size_t n) {
    size_t cap = 64;
    while (cap < n + n / 2 + 2) cap *= 2;
    memset(s, 0, sizeof *s);
    s->slot = calloc(cap, sizeof *s->slot);
    s->names = malloc((n + 1) * sizeof *s->names);
    s->cap = cap;
    s->cap_names = n + 1;
    return s->slot && s->names;
}

static void set_free(NameSet *s) {
    free(s->slot);
    free(s->names);
}

/* Whether the set has the name; else, with `add`, adds it (set_grow made room). */
static bool set_find(NameSet *s, const char *name, size_t len, uint64_t h, bool add) {
    uint32_t tag = (uint32_t)(h >> 32);
    size_t i = h & (s->cap - 1);
    for (; s->slot[i].idx; i = (i + 1) & (s->cap - 1)) {
        const char *x = s->names[s->slot[i].idx - 1];
        if (s->slot[i].tag == tag && strncmp(x, name, len) == 0 && x[len] == '\0') return true;
    }
    if (add) {
        s->names[s->n++] = name;
        s->slot[i] = (NameSlot){tag, (uint32_t)s->n};
    }
    return false;
}

static bool set_grow(NameSet *s) {
    if (s->n + 1 < s->cap_names && 2 * (s->n + 1) + (s->n + 1) <= 2 * s->cap) return true;
    NameSet t;
    if (!set_init(&t, 2 * s->n + 2)) {
        set_free(&t);
        return false;
    }
    for (size_t i = 0; i < s->n; i++) {
        size_t l = strlen(s->names[i]);
        set_find(&t, s->names[i], l, amp_name_hash(s->names[i], l), true);
    }
    set_free(s);
    *s = t;
    return true;
}

typedef struct Renamer {
    bool fix;                  /* rename (else only find the first repeat) */
    uint32_t first_new;        /* fix: nodes of this id and later are the pipeline's */
    size_t renamed;
    const AmpGraph *dup_graph; /* !fix: the first repeat found */
    const char *dup_name;
} Renamer;

/* n's new name: <name>_k for the first k that no name in `all` is; added to `all`. */
static const char *fresh_name(AmpGraph *g, NameSet *all, const AmpNode *n, size_t len) {
    char *name = amp_arena_alloc(&g->model->arena, len + 24);
    if (!name || !set_grow(all)) return NULL;
    for (unsigned long k = 1;; k++) {
        size_t w = (size_t)snprintf(name, len + 24, "%s_%lu", n->name, k);
        if (!set_find(all, name, w, amp_name_hash(name, w), true)) return name;
    }
}

/* A node's name hashed ahead of its turn, its slot prefetched: the probes of a big graph
 * are cache misses, and this way several are in flight at once. */
typedef struct Ahead {
    uint64_t h;
    size_t len; /* 0: no name */
} Ahead;

enum { AHEAD = 16 };

static void look_ahead(const NameSet *s, const AmpNode *n, Ahead *a) {
    a->len = n->name ? strlen(n->name) : 0;
    if (!a->len) return;
    a->h = amp_name_hash(n->name, a->len);
#if defined(__GNUC__)
    __builtin_prefetch(&s->slot[a->h & (s->cap - 1)]);
#endif
}

/* One sweep of g's named nodes into `seen`: with `which` 0 every node, 1 the model's own
 * (id below r->first_new), 2 the pipeline's. A name already seen is, when finding, the
 * answer; when fixing (sweep 2 only), renamed. */
static AmpCode sweep(Renamer *r, AmpGraph *g, NameSet *seen, NameSet *all, int which, AmpStatus *st) {
    Ahead ring[AHEAD];
    AmpNode *next = g->first; /* the node AHEAD places after the current one */
    for (size_t k = 0; next && k < AHEAD; next = next->next, k++) look_ahead(seen, next, &ring[k]);
    size_t at = 0;
    for (AmpNode *n = g->first; n; n = n->next, at = (at + 1) % AHEAD) {
        Ahead cur = ring[at];
        if (next) look_ahead(seen, next, &ring[at]), next = next->next;
        if (!cur.len || (which == 1 && n->id >= r->first_new) || (which == 2 && n->id < r->first_new)) continue;
        if (!set_grow(seen)) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
        if (!set_find(seen, n->name, cur.len, cur.h, true) || which == 1) continue;
        if (!r->fix) {
            r->dup_graph = g, r->dup_name = n->name;
            return AMP_OK;
        }
        if (!all->slot) { /* the first repeat: every name of the graph, which no new name may take */
            bool ok = set_init(all, g->n_nodes);
            for (AmpNode *x = g->first; x && ok; x = x->next)
                if (x->name && *x->name) {
                    size_t l = strlen(x->name);
                    ok = set_grow(all);
                    if (ok) set_find(all, x->name, l, amp_name_hash(x->name, l), true);
                }
            if (!ok) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
        }
        const char *name = fresh_name(g, all, n, cur.len);
        if (!name || !set_grow(seen)) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
        n->name = name;
        set_find(seen, name, strlen(name), amp_name_hash(name, strlen(name)), true);
        r->renamed++;
    }
    return AMP_OK;
}

static AmpCode unique_in(AmpGraph *g, void *ctx, AmpStatus *st) {
    Renamer *r = ctx;
    if (r->dup_name) return AMP_OK;
    NameSet seen = {0}, all = {0};
    AmpCode rc = set_init(&seen, g->n_nodes) ? AMP_OK : amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    if (!rc && !r->fix) rc = sweep(r, g, &seen, &all, 0, st);
    if (!rc && r->fix) rc = sweep(r, g, &seen, &all, 1, st);
    if (!rc && r->fix) rc = sweep(r, g, &seen, &all, 2, st);
    set_free(&all);
    set_free(&seen);
    return rc;
}

AmpCode amp_model_unique_node_names(AmpModel *m, uint32_t first_new, size_t *renamed, AmpStatus *st) {
    Renamer r = {.fix = true, .first_new = first_new};
    AmpCode rc = amp_model_walk(m, unique_in, &r, st);
    if (renamed) *renamed = r.renamed;
    return rc;
}

AmpCode amp_model_duplicate_node_name(AmpModel *m, const AmpGraph **graph, const char **name, AmpStatus *st) {
    Renamer r = {.fix = false};
    AmpCode rc = amp_model_walk(m, unique_in, &r, st);
    *graph = r.dup_graph;
    *name = r.dup_name;
    return rc;
}
