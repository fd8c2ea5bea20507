/* The builder API: values and their name maps, nodes and their use lists, insertion,
 * deletion and use replacement, and walks over a model's graphs. */
#include "ir/ir.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/extdata.h"
#include "ir/kernel.h"
#include "ir/names.h"

/* ---- name maps: open addressing, grows at 3/4 load ---------------------------------
 * Each slot keeps the name's hash, so a probe past another name costs no visit to that
 * value and its string (big graphs: millions of names, each visit a cache miss). The
 * slots are malloc'd so a grown table's old slots are given back, not left in the arena;
 * the maps are listed in the model and freed with it. A graph's map holds the values of
 * its scope; the model-wide set (AmpModel.all_names) holds one value per name used. */

typedef struct NameSlot {
    AmpValue *v;
    uint64_t h;
} NameSlot;

struct AmpNameMap {
    NameSlot *slots; /* cap entries, cap a power of two (0: none yet) */
    size_t cap, n;
    size_t room;      /* entries it takes before passing 3/4 load */
    AmpGraph *g;      /* the graph whose scope it is; NULL for the model-wide set */
    AmpNameMap *next; /* AmpModel.maps */
};

static AmpValue *map_get(const AmpNameMap *mp, const char *name, size_t len, uint64_t h) {
    if (!mp || !mp->cap) return NULL;
    size_t mask = mp->cap - 1;
    for (size_t i = h & mask; mp->slots[i].v; i = (i + 1) & mask)
        if (mp->slots[i].h == h && amp_value_named(mp->slots[i].v, name, len)) return mp->slots[i].v;
    return NULL;
}

/* Room for `more` entries without passing 3/4 load. */
static bool map_grow(AmpNameMap *mp, size_t more) {
    size_t need;
    if (!amp_add_size(mp->n, more, &need) || !amp_mul_size(need, 4, &need)) return false;
    need = need / 3 + 1;
    if (need <= mp->cap) return true;
    size_t cap = mp->cap ? mp->cap : 64;
    while (cap < need) {
        if (cap > SIZE_MAX / 2 / sizeof(NameSlot)) return false;
        cap *= 2;
    }
    NameSlot *slots = amp_table_zalloc(cap * sizeof *slots);
    if (!slots) return false;
    for (size_t j = 0; j < mp->cap; j++) {
        NameSlot w = mp->slots[j];
        if (!w.v) continue;
        size_t i = w.h & (cap - 1);
        while (slots[i].v) i = (i + 1) & (cap - 1);
        slots[i] = w;
    }
    amp_big_free(mp->slots, mp->cap * sizeof *mp->slots);
    mp->slots = slots;
    mp->cap = cap;
    mp->room = cap / 4 * 3 - 1 - mp->n; /* the most entries x with x * 4 / 3 + 1 <= cap */
    return true;
}

static inline bool map_reserve(AmpNameMap *mp, size_t more) {
    return more <= mp->room || map_grow(mp, more);
}

/* Inserts v (not present) into a map with room for it (map_reserve). */
static void map_put(AmpNameMap *mp, AmpValue *v, uint64_t h) {
    size_t i = h & (mp->cap - 1);
    while (mp->slots[i].v) i = (i + 1) & (mp->cap - 1);
    mp->slots[i] = (NameSlot){v, h};
    mp->n++;
    mp->room--;
}

static AmpNameMap *map_new(AmpModel *m, AmpGraph *g) {
    AmpNameMap *mp = amp_arena_alloc(&m->arena, sizeof *mp);
    if (!mp) return NULL;
    mp->g = g;
    mp->next = m->maps;
    m->maps = mp;
    return mp;
}

/* The model-wide set, from every graph's values (once; amp_graph_value keeps it). */
static bool build_all_names(AmpModel *m) {
    AmpNameMap *all = map_new(m, NULL);
    if (!all) return false;
    m->maps = all->next; /* listed only once complete, as m->all_names */
    size_t total = 0;
    for (AmpNameMap *mp = m->maps; mp; mp = mp->next)
        if (mp->g) total += mp->g->n_values;
    bool ok = map_reserve(all, total);
    for (AmpNameMap *mp = m->maps; ok && mp; mp = mp->next) {
        const AmpGraph *g = mp->g;
        for (size_t i = 0; g && i < g->n_values; i++) {
            AmpValue *v = g->values[i];
            uint64_t h = amp_name_hash(v->name, v->name_len);
            if (!map_get(all, v->name, v->name_len, h)) map_put(all, v, h);
        }
    }
    if (!ok) {
        amp_big_free(all->slots, all->cap * sizeof *all->slots);
        return false;
    }
    all->next = m->maps;
    m->maps = all;
    m->all_names = all;
    return true;
}

/* Whether any value of the model is named so: while at most one graph holds values,
 * that graph's map answers; otherwise the model-wide set. -1 when out of memory. */
static int name_used(AmpModel *m, const char *name, size_t len, uint64_t h) {
    if (m->n_named_graphs == 0) return 0;
    if (m->n_named_graphs == 1) return map_get(m->named_graph->names, name, len, h) != NULL;
    if (!m->all_names && !build_all_names(m)) return -1;
    return map_get(m->all_names, name, len, h) != NULL;
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
    for (AmpNameMap *mp = m->maps; mp; mp = mp->next) amp_big_free(mp->slots, mp->cap * sizeof *mp->slots);
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
    g->names = map_new(m, g);
    return g->names ? g : NULL;
}

AmpValue *amp_graph_lookup_h(const AmpGraph *g, const char *name, size_t len, uint64_t h) {
    for (; g; g = g->parent) {
        AmpValue *v = map_get(g->names, name, len, h);
        if (v) return v;
    }
    return NULL;
}

void amp_graph_prefetch_hash(const AmpGraph *g, uint64_t h) {
#if defined(__GNUC__)
    const AmpNameMap *mp = g->names;
    if (mp && mp->cap) __builtin_prefetch(&mp->slots[h & (mp->cap - 1)], 1);
#else
    (void)g, (void)h;
#endif
}

AmpValue *amp_graph_lookup(const AmpGraph *g, const char *name) {
    size_t len = strlen(name);
    return amp_graph_lookup_h(g, name, len, amp_name_hash(name, len));
}

bool amp_graph_reserve_values(AmpGraph *g, size_t n) {
    size_t need;
    if (!map_reserve(g->names, n) || !amp_add_size(g->n_values, n, &need)) return false;
    if (need <= g->cap_values) return true;
    AmpValue **vals = amp_arena_grow(&g->model->arena, g->values, g->n_values, need, sizeof *vals);
    if (!vals) return false;
    g->values = vals;
    g->cap_values = need;
    return true;
}

/* A new value of g named so; `fresh`: no value of the model has the name (else only g's
 * scope is known not to). */
static AmpValue *value_make(AmpGraph *g, const char *name, size_t len, uint64_t h, bool fresh) {
    AmpModel *m = g->model;
    AmpNameMap *all = m->all_names;
    /* Room everywhere first, so running out of memory changes nothing. */
    if (!map_reserve(g->names, 1) || (all && !map_reserve(all, 1))) return NULL;
    if (g->n_values == g->cap_values) {
        size_t cap = g->cap_values ? g->cap_values * 2 : 16;
        AmpValue **vals = amp_arena_grow(&m->arena, g->values, g->n_values, cap, sizeof *vals);
        if (!vals) return NULL;
        g->values = vals;
        g->cap_values = cap;
    }
    /* The name right behind the value: one visit to memory reads both. */
    size_t size;
    AmpValue *v;
    if (len > UINT32_MAX || !amp_add_size(sizeof *v, len + 1, &size) || !(v = amp_arena_alloc_raw(&m->arena, size)))
        return NULL;
    char *copy = (char *)(v + 1);
    amp_copy(copy, name, len);
    copy[len] = '\0';
    memset(v, 0, sizeof *v);
    v->name = copy;
    v->name_len = (uint32_t)len;
    v->graph = g;
    v->type.rank = -1;
    map_put(g->names, v, h);
    if (all && (fresh || !map_get(all, name, len, h))) map_put(all, v, h);
    if (!g->n_values && m->n_named_graphs++ == 0) m->named_graph = g;
    v->id = (uint32_t)g->n_values;
    g->values[g->n_values++] = v;
    return v;
}

AmpValue *amp_graph_value_h(AmpGraph *g, const char *name, size_t len, uint64_t h) {
    AmpValue *v = map_get(g->names, name, len, h);
    return v ? v : value_make(g, name, len, h, false);
}

AmpValue *amp_graph_value(AmpGraph *g, const char *name) {
    size_t len = strlen(name);
    return amp_graph_value_h(g, name, len, amp_name_hash(name, len));
}

/* The first of base, base_1, base_2, ... that no value of the model is named, written
 * to buf (len + 24 bytes) with its hash; its length, or -1 when out of memory. */
static long unique_into(AmpModel *m, const char *base, size_t len, char *buf, uint64_t *h) {
    memcpy(buf, base, len);
    buf[len] = '\0';
    size_t n = len;
    for (unsigned long k = 1;; k++) {
        *h = amp_name_hash(buf, n);
        int used = name_used(m, buf, n, *h);
        if (used <= 0) return used < 0 ? -1 : (long)n;
        int w = snprintf(buf + len, 24, "_%lu", k);
        if (w < 0) return -1;
        n = len + (size_t)w;
    }
}

const char *amp_graph_unique_name(AmpGraph *g, const char *base) {
    size_t len = strlen(base), cap;
    uint64_t h;
    char *buf = amp_add_size(len, 24, &cap) ? amp_arena_alloc(&g->model->arena, cap) : NULL;
    return buf && unique_into(g->model, base, len, buf, &h) >= 0 ? buf : NULL;
}

AmpValue *amp_graph_new_value(AmpGraph *g, const char *base) {
    size_t len = strlen(base), cap;
    char small[256];
    char *buf = !amp_add_size(len, 24, &cap) ? NULL : cap <= sizeof small ? small : malloc(cap);
    if (!buf) return NULL;
    uint64_t h;
    long n = unique_into(g->model, base, len, buf, &h);
    AmpValue *v = n >= 0 ? value_make(g, buf, (size_t)n, h, true) : NULL;
    if (buf != small) free(buf);
    return v;
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
    size_t n_io = (size_t)(n_inputs > 0 ? n_inputs : 0) + (size_t)(n_outputs > 0 ? n_outputs : 0), size;
    /* The input and output arrays right behind the node. */
    AmpNode *n;
    if (!amp_mul_size(n_io, sizeof(AmpValue *), &size) || !amp_add_size(size, sizeof *n, &size) ||
        !(n = amp_arena_alloc(a, size)))
        return NULL;
    n->graph = g;
    n->op = amp_op_lookup(domain, op_type ? op_type : "");
    const AmpOpInfo *info = n->op != AMP_OP_UNKNOWN ? amp_op_info(n->op) : NULL;
    /* An op of the table, spelt as the table spells it, shares the table's strings. */
    if (info && domain && strcmp(domain, info->domain) == 0) {
        n->domain = info->domain;
        n->op_type = info->name;
    } else {
        n->domain = amp_arena_strdup(a, domain);
        n->op_type = amp_arena_strdup(a, op_type);
        if ((domain && !n->domain) || (op_type && !n->op_type)) return NULL;
    }
    n->name = amp_arena_strdup(a, name);
    if (name && !n->name) return NULL;
    n->n_inputs = n_inputs;
    n->n_outputs = n_outputs;
    n->inputs = n_inputs > 0 ? (AmpValue **)(n + 1) : NULL;
    n->outputs = n_outputs > 0 ? (AmpValue **)(n + 1) + (n_inputs > 0 ? n_inputs : 0) : NULL;
    n->id = m->next_node_id++;
    return n;
}

AmpCode amp_value_reserve_uses(AmpValue *v, size_t extra) {
    size_t need;
    if (!amp_add_size(v->n_uses, extra, &need)) return AMP_ERR_INTERNAL;
    if (need <= v->cap_uses) return AMP_OK;
    size_t cap = v->cap_uses ? v->cap_uses : 2;
    while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    AmpUse *u = amp_arena_grow(&v->graph->model->arena, v->uses, v->n_uses, cap, sizeof *u);
    if (!u) return AMP_ERR_INTERNAL;
    v->uses = u;
    v->cap_uses = cap;
    return AMP_OK;
}

static void use_remove(AmpValue *v, AmpNode *n, int slot) {
    for (size_t i = 0; i < v->n_uses; i++)
        if (v->uses[i].node == n && v->uses[i].slot == slot) {
            memmove(&v->uses[i], &v->uses[i + 1], (v->n_uses - i - 1) * sizeof *v->uses);
            v->n_uses--;
            return;
        }
}

AmpCode amp_node_set_input(AmpNode *n, int slot, AmpValue *v) {
    AmpValue *old = n->inputs[slot];
    if (old == v) return AMP_OK;
    /* Room for the new use before anything changes. */
    if (v && amp_value_reserve_uses(v, 1)) return AMP_ERR_INTERNAL;
    if (old) use_remove(old, n, slot);
    n->inputs[slot] = v;
    if (v) v->uses[v->n_uses++] = (AmpUse){n, slot};
    return AMP_OK;
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
    const char *own = amp_arena_strdup(a, name);
    if (!own) return NULL; /* out of memory: no attribute added */
    AmpAttr *at = &attrs[n->n_attrs++];
    *at = (AmpAttr){0};
    at->name = own;
    at->type = type;
    at->has = AMP_ATTR_HAS_TYPE;
    if (type == AMP_ATTR_FLOAT) at->has |= AMP_ATTR_HAS_F;
    if (type == AMP_ATTR_INT) at->has |= AMP_ATTR_HAS_I;
    if (type == AMP_ATTR_STRING) at->has |= AMP_ATTR_HAS_S;
    return at;
}

AmpNode *amp_node_new_cast(AmpGraph *g, const char *name, AmpValue *in, AmpValue *out, int to) {
    AmpModel *m = g->model;
    /* Passes make casts by the thousand: the node, its input and output slots, its one
     * attribute and its name are one allocation, and the strings are the op table's. */
    typedef struct CastNode {
        AmpNode n;
        AmpValue *io[2];
        AmpAttr to;
    } CastNode;
    size_t len = name ? strlen(name) : 0, size;
    CastNode *c;
    if (!amp_add_size(sizeof *c, len + 1, &size) || !(c = amp_arena_alloc(&m->arena, size))) return NULL;
    const AmpOpInfo *info = amp_op_info(AMP_OP_Cast);
    AmpNode *n = &c->n;
    n->graph = g;
    n->op = AMP_OP_Cast;
    n->domain = info->domain;
    n->op_type = info->name;
    if (name) {
        char *copy = (char *)(c + 1);
        memcpy(copy, name, len + 1);
        n->name = copy;
    }
    n->n_inputs = n->n_outputs = 1;
    n->inputs = &c->io[0];
    n->outputs = &c->io[1];
    n->id = m->next_node_id++;
    AmpAttr *a = &c->to;
    n->attrs = a;
    n->n_attrs = 1;
    a->name = "to";
    a->has = AMP_ATTR_HAS_TYPE;
    /* Cast-1 names the type with a string; Cast-6 and later take the enum. */
    if (amp_model_opset(m, "") < 6) {
        const char *s = to == AMP_DT_FLOAT16 ? "FLOAT16" : to == AMP_DT_BFLOAT16 ? "BFLOAT16" : "FLOAT";
        a->type = AMP_ATTR_STRING;
        a->has |= AMP_ATTR_HAS_S;
        a->s = (AmpBytes){(const uint8_t *)s, strlen(s)};
    } else {
        a->type = AMP_ATTR_INT;
        a->has |= AMP_ATTR_HAS_I;
        a->i = to;
    }
    if (amp_node_set_input(n, 0, in)) return NULL;
    amp_node_set_output(n, 0, out);
    return n;
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

AmpCode amp_value_replace_uses(AmpValue *from, AmpValue *to, bool outputs_too) {
    if (from == to) return AMP_OK;
    /* With room for every use reserved, no set_input below can fail half way. */
    if (to && amp_value_reserve_uses(to, from->n_uses)) return AMP_ERR_INTERNAL;
    /* set_input edits from->uses, so take the uses off the end one at a time. */
    while (from->n_uses) {
        AmpUse u = from->uses[from->n_uses - 1];
        amp_node_set_input(u.node, u.slot, to);
    }
    if (!outputs_too || !(from->flags & AMP_VALUE_OUTPUT)) return AMP_OK;
    AmpValueInfoList *outs = &from->graph->outputs;
    for (size_t i = 0; i < outs->n; i++)
        if (outs->items[i].value == from) outs->items[i].value = to;
    from->flags &= ~(unsigned)AMP_VALUE_OUTPUT;
    to->flags |= AMP_VALUE_OUTPUT;
    return AMP_OK;
}

int64_t amp_model_opset(const AmpModel *m, const char *domain) {
    bool dflt = amp_domain_is_default(domain);
    for (size_t i = 0; i < m->n_opsets; i++) {
        const char *d = m->opsets[i].domain;
        if (amp_domain_is_default(d) ? dflt : !dflt && strcmp(d, domain) == 0) return m->opsets[i].version;
    }
    return 0;
}

bool amp_model_import_opset(AmpModel *m, const char *domain, int64_t version) {
    if (amp_model_opset(m, domain) > 0) return true;
    AmpOpset *o = amp_arena_grow(&m->arena, m->opsets, m->n_opsets, m->n_opsets + 1, sizeof *o);
    const char *d = amp_arena_strdup(&m->arena, domain ? domain : "");
    if (!o || !d) return false;
    o[m->n_opsets++] = (AmpOpset){d, version, true};
    m->opsets = o;
    return true;
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

AmpValue *amp_training_key(const AmpModel *m, const AmpTrainingInfo *ti, const char *key) {
    if (!key) return NULL;
    /* The algorithm's own scope first: amp_graph_lookup would also see the main graph. */
    AmpValue *v = ti && ti->algorithm ? amp_graph_lookup(ti->algorithm, key) : NULL;
    if (v && v->graph == ti->algorithm && v->initializer) return v;
    v = amp_graph_lookup(m->graph, key);
    return v && v->graph == m->graph && v->initializer ? v : NULL;
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

/* ---- kernels' errors (kernel.h) ------------------------------------------------------ */

static AmpCode node_vfail(const AmpNode *n, AmpStatus *st, AmpCode code, const char *fmt, va_list ap) {
    char msg[sizeof st->msg];
    vsnprintf(msg, sizeof msg, fmt, ap);
    return amp_fail(st, code, "node '%s' (%s): %s", n->name ? n->name : "", n->op_type ? n->op_type : "", msg);
}

AmpCode amp_node_fail(const AmpNode *n, AmpStatus *st, AmpCode code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    AmpCode rc = node_vfail(n, st, code, fmt, ap);
    va_end(ap);
    return rc;
}

AmpCode amp_kernel_fail(AmpKernelCtx *k, AmpCode code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    AmpCode rc = node_vfail(k->node, k->st, code, fmt, ap);
    va_end(ap);
    return rc;
}

void amp_kernel_pack_clear(AmpKernelPack *pack) {
    if (pack->data && pack->free_fn) pack->free_fn(pack->data);
    pack->data = NULL, pack->free_fn = NULL;
}
