/* The builder API: values and their name maps, nodes and their use lists, insertion,
 * deletion and use replacement, and walks over a model's graphs. */
#include "ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "extdata.h"

/* ---- name map: open addressing, FNV-1a, grows at 1/2 load ------------------------
 * Each slot keeps the name's hash, so a probe past another name costs no visit to that
 * value and its string (big graphs: millions of names, each visit a cache miss). */

typedef struct NameSlot {
    AmpValue *v;
    uint64_t h;
} NameSlot;

struct AmpNameMap {
    NameSlot *slots;
    size_t cap, n;
};

static uint64_t hash_name(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h ^ (h >> 32); /* FNV's low bits alone mix poorly; the table uses them */
}

static AmpValue *map_get(const AmpNameMap *mp, const char *name) {
    if (!mp || !mp->cap) return NULL;
    uint64_t h = hash_name(name);
    for (size_t i = h & (mp->cap - 1); mp->slots[i].v; i = (i + 1) & (mp->cap - 1))
        if (mp->slots[i].h == h && strcmp(mp->slots[i].v->name, name) == 0) return mp->slots[i].v;
    return NULL;
}

static bool map_put(AmpArena *a, AmpNameMap *mp, AmpValue *v) {
    if ((mp->n + 1) * 2 > mp->cap) {
        size_t cap = mp->cap ? mp->cap * 2 : 64;
        NameSlot *slots = amp_arena_calloc(a, cap, sizeof *slots);
        if (!slots) return false;
        for (size_t j = 0; j < mp->cap; j++) {
            NameSlot w = mp->slots[j];
            if (!w.v) continue;
            size_t i = w.h & (cap - 1);
            while (slots[i].v) i = (i + 1) & (cap - 1);
            slots[i] = w;
        }
        mp->slots = slots;
        mp->cap = cap;
    }
    uint64_t h = hash_name(v->name);
    size_t i = h & (mp->cap - 1);
    while (mp->slots[i].v) i = (i + 1) & (mp->cap - 1);
    mp->slots[i] = (NameSlot){v, h};
    mp->n++;
    return true;
}

/* ---- model and graph ------------------------------------------------------------- */

AmpModel *amp_model_new(void) {
    AmpModel *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    amp_arena_init(&m->arena);
    m->graph = amp_graph_new(m, NULL);
    if (!m->graph) {
        amp_model_free(m);
        return NULL;
    }
    return m;
}

void amp_model_free(AmpModel *m) {
    if (!m) return;
    amp_extdata_unmap_all(m);
    for (size_t i = 0; i < m->n_owned; i++) free(m->owned[i]);
    free(m->owned);
    amp_arena_free(&m->arena);
    free(m);
}

bool amp_model_own(AmpModel *m, void *p) {
    if (m->n_owned == m->cap_owned) {
        size_t cap = m->cap_owned ? m->cap_owned * 2 : 16;
        void **o = realloc(m->owned, cap * sizeof *o);
        if (!o) return false;
        m->owned = o;
        m->cap_owned = cap;
    }
    m->owned[m->n_owned++] = p;
    return true;
}

AmpGraph *amp_graph_new(AmpModel *m, AmpGraph *parent) {
    AmpGraph *g = amp_arena_alloc(&m->arena, sizeof *g);
    if (!g) return NULL;
    g->model = m;
    g->parent = parent;
    g->names = amp_arena_alloc(&m->arena, sizeof *g->names);
    return g->names ? g : NULL;
}

AmpValue *amp_graph_lookup(const AmpGraph *g, const char *name) {
    for (; g; g = g->parent) {
        AmpValue *v = map_get(g->names, name);
        if (v) return v;
    }
    return NULL;
}

AmpValue *amp_graph_value(AmpGraph *g, const char *name) {
    AmpValue *v = map_get(g->names, name);
    if (v) return v;
    AmpArena *a = &g->model->arena;
    v = amp_arena_alloc(a, sizeof *v);
    if (!v) return NULL;
    v->name = amp_arena_strdup(a, name);
    v->graph = g;
    v->type.rank = -1;
    if (!v->name || !map_put(a, g->names, v)) return NULL;
    if (g->n_values == g->cap_values) {
        size_t cap = g->cap_values ? g->cap_values * 2 : 16;
        AmpValue **vals = amp_arena_grow(a, g->values, g->n_values, cap, sizeof *vals);
        if (!vals) return NULL;
        g->values = vals;
        g->cap_values = cap;
    }
    v->id = (uint32_t)g->n_values;
    g->values[g->n_values++] = v;
    return v;
}

/* A name is taken if any graph of the model could see it: check this scope, the
 * enclosing ones, and (cheaply, by a model-wide counter suffix) nested ones. */
const char *amp_graph_unique_name(AmpGraph *g, const char *base) {
    AmpArena *a = &g->model->arena;
    if (!amp_graph_lookup(g, base)) return amp_arena_strdup(a, base);
    size_t len = strlen(base) + 24;
    char *buf = amp_arena_alloc(a, len);
    if (!buf) return NULL;
    for (unsigned long k = 1;; k++) {
        snprintf(buf, len, "%s_%lu", base, k);
        if (!amp_graph_lookup(g, buf)) return buf;
    }
}

AmpValue *amp_graph_new_value(AmpGraph *g, const char *base) {
    const char *name = amp_graph_unique_name(g, base);
    return name ? amp_graph_value(g, name) : NULL;
}

static AmpValueInfo *vi_push(AmpModel *m, AmpValueInfoList *l, AmpValue *v) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        AmpValueInfo *items = amp_arena_grow(&m->arena, l->items, l->n, cap, sizeof *items);
        if (!items) return NULL;
        l->items = items;
        l->cap = cap;
    }
    AmpValueInfo *e = &l->items[l->n++];
    memset(e, 0, sizeof *e);
    e->value = v;
    e->loaded.rank = -1;
    return e;
}

AmpValueInfo *amp_graph_add_input(AmpGraph *g, AmpValue *v) {
    v->flags |= AMP_VALUE_INPUT;
    return vi_push(g->model, &g->inputs, v);
}

AmpValueInfo *amp_graph_add_output(AmpGraph *g, AmpValue *v) {
    v->flags |= AMP_VALUE_OUTPUT;
    return vi_push(g->model, &g->outputs, v);
}

AmpValueInfo *amp_graph_add_value_info(AmpGraph *g, AmpValue *v) {
    return vi_push(g->model, &g->value_info, v);
}

AmpCode amp_graph_add_initializer(AmpGraph *g, AmpValue *v, AmpTensor *t) {
    AmpArena *a = &g->model->arena;
    if (g->n_initializers == g->cap_initializers) {
        size_t cap = g->cap_initializers ? g->cap_initializers * 2 : 16;
        AmpTensor **ts = amp_arena_grow(a, g->initializers, g->n_initializers, cap, sizeof *ts);
        if (!ts) return AMP_ERR_INTERNAL;
        g->initializers = ts;
        g->cap_initializers = cap;
    }
    g->initializers[g->n_initializers++] = t;
    t->name = v->name;
    v->initializer = t;
    v->flags |= AMP_VALUE_INITIALIZER;
    return AMP_OK;
}

/* ---- nodes ----------------------------------------------------------------------- */

AmpNode *amp_node_new(AmpGraph *g, const char *domain, const char *op_type, const char *name,
                      int n_inputs, int n_outputs) {
    AmpModel *m = g->model;
    AmpArena *a = &m->arena;
    AmpNode *n = amp_arena_alloc(a, sizeof *n);
    if (!n) return NULL;
    n->graph = g;
    n->domain = amp_arena_strdup(a, domain);
    n->op_type = amp_arena_strdup(a, op_type);
    n->name = amp_arena_strdup(a, name);
    n->n_inputs = n_inputs;
    n->n_outputs = n_outputs;
    n->inputs = n_inputs ? amp_arena_calloc(a, (size_t)n_inputs, sizeof *n->inputs) : NULL;
    n->outputs = n_outputs ? amp_arena_calloc(a, (size_t)n_outputs, sizeof *n->outputs) : NULL;
    if ((n_inputs && !n->inputs) || (n_outputs && !n->outputs)) return NULL;
    n->id = m->next_node_id++;
    n->op = amp_op_lookup(n->domain, n->op_type ? n->op_type : "");
    return n;
}

static void use_add(AmpModel *m, AmpValue *v, AmpNode *n, int slot) {
    if (v->n_uses == v->cap_uses) {
        size_t cap = v->cap_uses ? v->cap_uses * 2 : 4;
        AmpUse *u = amp_arena_grow(&m->arena, v->uses, v->n_uses, cap, sizeof *u);
        if (!u) abort(); /* out of memory while editing: no way to keep the graph sound */
        v->uses = u;
        v->cap_uses = cap;
    }
    v->uses[v->n_uses++] = (AmpUse){n, slot};
}

static void use_remove(AmpValue *v, AmpNode *n, int slot) {
    for (size_t i = 0; i < v->n_uses; i++)
        if (v->uses[i].node == n && v->uses[i].slot == slot) {
            memmove(&v->uses[i], &v->uses[i + 1], (v->n_uses - i - 1) * sizeof *v->uses);
            v->n_uses--;
            return;
        }
}

void amp_node_set_input(AmpNode *n, int slot, AmpValue *v) {
    AmpValue *old = n->inputs[slot];
    if (old == v) return;
    if (old) use_remove(old, n, slot);
    n->inputs[slot] = v;
    if (v) use_add(n->graph->model, v, n, slot);
}

void amp_node_set_output(AmpNode *n, int slot, AmpValue *v) {
    AmpValue *old = n->outputs[slot];
    if (old && old->producer == n) old->producer = NULL;
    n->outputs[slot] = v;
    if (v) {
        v->producer = n;
        v->producer_slot = slot;
    }
}

AmpAttr *amp_node_add_attr(AmpNode *n, const char *name, int type) {
    AmpArena *a = &n->graph->model->arena;
    AmpAttr *attrs = amp_arena_grow(a, n->attrs, n->n_attrs, n->n_attrs + 1, sizeof *attrs);
    if (!attrs) return NULL;
    n->attrs = attrs;
    AmpAttr *at = &attrs[n->n_attrs++];
    at->name = amp_arena_strdup(a, name);
    at->type = type;
    at->has = AMP_ATTR_HAS_TYPE;
    if (type == AMP_ATTR_FLOAT) at->has |= AMP_ATTR_HAS_F;
    if (type == AMP_ATTR_INT) at->has |= AMP_ATTR_HAS_I;
    if (type == AMP_ATTR_STRING) at->has |= AMP_ATTR_HAS_S;
    return at;
}

const AmpAttr *amp_node_attr(const AmpNode *n, const char *name) {
    for (size_t i = 0; i < n->n_attrs; i++)
        if (n->attrs[i].name && strcmp(n->attrs[i].name, name) == 0) return &n->attrs[i];
    return NULL;
}

int64_t amp_node_attr_int(const AmpNode *n, const char *name, int64_t dflt) {
    const AmpAttr *a = amp_node_attr(n, name);
    return a && a->type == AMP_ATTR_INT ? a->i : dflt;
}

float amp_node_attr_float(const AmpNode *n, const char *name, float dflt) {
    const AmpAttr *a = amp_node_attr(n, name);
    return a && a->type == AMP_ATTR_FLOAT ? a->f : dflt;
}

const char *amp_node_attr_string(const AmpNode *n, const char *name, const char *dflt) {
    const AmpAttr *a = amp_node_attr(n, name);
    if (!a || a->type != AMP_ATTR_STRING) return dflt;
    /* Attribute strings are stored NUL-terminated by the loader and the builder. */
    return a->s.data ? (const char *)a->s.data : "";
}

void amp_node_insert_before(AmpNode *pos, AmpNode *n) {
    if (!pos) {
        amp_node_append(n->graph, n);
        return;
    }
    AmpGraph *g = pos->graph;
    n->graph = g;
    n->next = pos;
    n->prev = pos->prev;
    if (pos->prev) pos->prev->next = n;
    else g->first = n;
    pos->prev = n;
    g->n_nodes++;
}

void amp_node_insert_after(AmpNode *pos, AmpNode *n) {
    if (!pos) {
        AmpGraph *g = n->graph;
        if (g->first) amp_node_insert_before(g->first, n);
        else amp_node_append(g, n);
        return;
    }
    if (pos->next) amp_node_insert_before(pos->next, n);
    else amp_node_append(pos->graph, n);
}

void amp_node_append(AmpGraph *g, AmpNode *n) {
    n->graph = g;
    n->next = NULL;
    n->prev = g->last;
    if (g->last) g->last->next = n;
    else g->first = n;
    g->last = n;
    g->n_nodes++;
}

void amp_node_delete(AmpNode *n) {
    AmpGraph *g = n->graph;
    for (int i = 0; i < n->n_inputs; i++) amp_node_set_input(n, i, NULL);
    for (int i = 0; i < n->n_outputs; i++)
        if (n->outputs[i] && n->outputs[i]->producer == n) n->outputs[i]->producer = NULL;
    if (n->prev) n->prev->next = n->next;
    else g->first = n->next;
    if (n->next) n->next->prev = n->prev;
    else g->last = n->prev;
    n->prev = n->next = NULL;
    g->n_nodes--;
}

void amp_value_replace_uses(AmpValue *from, AmpValue *to, bool outputs_too) {
    /* set_input edits from->uses, so take the uses off the end one at a time. */
    while (from->n_uses) {
        AmpUse u = from->uses[from->n_uses - 1];
        amp_node_set_input(u.node, u.slot, to);
    }
    if (!outputs_too || !(from->flags & AMP_VALUE_OUTPUT)) return;
    AmpValueInfoList *outs = &from->graph->outputs;
    for (size_t i = 0; i < outs->n; i++)
        if (outs->items[i].value == from) outs->items[i].value = to;
    from->flags &= ~(unsigned)AMP_VALUE_OUTPUT;
    to->flags |= AMP_VALUE_OUTPUT;
}

int64_t amp_model_opset(const AmpModel *m, const char *domain) {
    if (!domain || strcmp(domain, "ai.onnx") == 0) domain = "";
    for (size_t i = 0; i < m->n_opsets; i++) {
        const char *d = m->opsets[i].domain ? m->opsets[i].domain : "";
        if (strcmp(d, "ai.onnx") == 0) d = "";
        if (strcmp(d, domain) == 0) return m->opsets[i].version;
    }
    return 0;
}

/* ---- walks ----------------------------------------------------------------------- */

AmpCode amp_graph_walk(AmpGraph *g, AmpGraphFn fn, void *ctx, AmpStatus *st) {
    AmpCode rc = fn(g, ctx, st);
    if (rc) return rc;
    for (AmpNode *n = g->first; n; n = n->next)
        for (size_t i = 0; i < n->n_attrs; i++) {
            AmpAttr *at = &n->attrs[i];
            if (at->g && (rc = amp_graph_walk(at->g, fn, ctx, st))) return rc;
            for (size_t k = 0; k < at->n_graphs; k++)
                if ((rc = amp_graph_walk(at->graphs[k], fn, ctx, st))) return rc;
        }
    return AMP_OK;
}

AmpCode amp_model_walk(AmpModel *m, AmpGraphFn fn, void *ctx, AmpStatus *st) {
    AmpCode rc = amp_graph_walk(m->graph, fn, ctx, st);
    for (size_t i = 0; !rc && i < m->n_training; i++) {
        AmpTrainingInfo *ti = &m->training[i];
        if (ti->initialization) rc = amp_graph_walk(ti->initialization, fn, ctx, st);
        if (!rc && ti->algorithm) rc = amp_graph_walk(ti->algorithm, fn, ctx, st);
    }
    return rc;
}

static AmpCode bind_ops(AmpGraph *g, void *ctx, AmpStatus *st) {
    (void)ctx;
    (void)st;
    for (AmpNode *n = g->first; n; n = n->next)
        n->op = amp_op_lookup(n->domain, n->op_type ? n->op_type : "");
    return AMP_OK;
}

void amp_graph_bind_ops(AmpGraph *g) {
    amp_graph_walk(g, bind_ops, NULL, NULL);
}
