/* Node names unique within each graph (ONNX requires it; onnxruntime refuses a file with two
 * nodes of one name): after a pipeline, a node whose name an earlier node of its graph has
 * already is renamed <name>_1, <name>_2, ... (the first one that no node of the graph has).
 * Passes name the nodes they make after what they replace (a fused GELU after the first node
 * of its formula, a Cast after its value), so two such names can meet. */
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "ir/names.h"

typedef struct NameSet {
    const char **slot;
    size_t cap, n;
} NameSet;

static bool set_has(const NameSet *s, const char *name, size_t len, uint64_t h) {
    if (!s->cap) return false;
    for (size_t i = h & (s->cap - 1); s->slot[i]; i = (i + 1) & (s->cap - 1))
        if (strlen(s->slot[i]) == len && amp_bytes_eq(s->slot[i], name, len)) return true;
    return false;
}

static bool set_add(NameSet *s, const char *name) {
    if ((s->n + 1) * 2 > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        const char **slot = calloc(cap, sizeof *slot);
        if (!slot) return false;
        for (size_t j = 0; j < s->cap; j++) {
            const char *x = s->slot[j];
            if (!x) continue;
            size_t i = amp_name_hash(x, strlen(x)) & (cap - 1);
            while (slot[i]) i = (i + 1) & (cap - 1);
            slot[i] = x;
        }
        free(s->slot);
        s->slot = slot;
        s->cap = cap;
    }
    size_t len = strlen(name);
    size_t i = amp_name_hash(name, len) & (s->cap - 1);
    while (s->slot[i]) i = (i + 1) & (s->cap - 1);
    s->slot[i] = name;
    s->n++;
    return true;
}

typedef struct Renamer {
    size_t renamed;
} Renamer;

static AmpCode unique_in(AmpGraph *g, void *ctx, AmpStatus *st) {
    Renamer *r = ctx;
    NameSet all = {0}, seen = {0};
    AmpCode rc = AMP_OK;
    /* Every name the graph's nodes have, so that a new name takes none of them. */
    for (AmpNode *n = g->first; n && !rc; n = n->next)
        if (n->name && *n->name && !set_add(&all, n->name)) rc = amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    for (AmpNode *n = g->first; n && !rc; n = n->next) {
        if (!n->name || !*n->name) continue;
        size_t len = strlen(n->name);
        if (!set_has(&seen, n->name, len, amp_name_hash(n->name, len))) {
            if (!set_add(&seen, n->name)) rc = amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
            continue;
        }
        char *name = amp_arena_alloc(&g->model->arena, len + 24);
        if (!name) {
            rc = amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
            break;
        }
        for (unsigned long k = 1;; k++) {
            size_t w = (size_t)snprintf(name, len + 24, "%s_%lu", n->name, k);
            if (!set_has(&all, name, w, amp_name_hash(name, w))) break;
        }
        n->name = name;
        if (!set_add(&all, name) || !set_add(&seen, name)) rc = amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
        r->renamed++;
    }
    free(all.slot);
    free(seen.slot);
    return rc;
}

AmpCode amp_model_unique_node_names(AmpModel *m, size_t *renamed, AmpStatus *st) {
    Renamer r = {0};
    AmpCode rc = amp_model_walk(m, unique_in, &r, st);
    if (renamed) *renamed = r.renamed;
    return rc;
}
