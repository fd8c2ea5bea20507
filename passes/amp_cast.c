/* Rewriting a painted model: nodes painted allow read their float32 data through one
 * Cast per (graph, value, target type), shared by every 16-bit reader and placed right
 * after the producer (or at the top of the graph for inputs, initializers and values of
 * enclosing graphs); their float32 outputs take the 16-bit type. A value that something
 * still reads in float32 (an fp32 node, a graph output, another graph) keeps its name and
 * its float32 type: the node writes `<name>_fp16` and a Cast gives back `<name>`. Graphs
 * are rewritten outer first, nodes in order, so every value's final form is known before
 * its readers are met. */
#include <stdlib.h>
#include <string.h>

#include "passes/amp_impl.h"

/* ---- (graph, value) -> 16-bit copy: open addressing on the pointer pair ---------------- */

typedef struct CastSlot {
    const AmpGraph *g;
    const AmpValue *v;
    AmpValue *copy;
} CastSlot;

struct AmpCastMap {
    CastSlot *slots;
    size_t cap, n;
};

static size_t hash_pair(const void *a, const void *b) {
    uint64_t h = (uint64_t)(uintptr_t)a * 0x9E3779B97F4A7C15ull;
    h ^= (uint64_t)(uintptr_t)b + 0x632BE59BD9B4E019ull + (h << 6) + (h >> 2);
    h ^= h >> 29;
    return (size_t)(h * 0xBF58476D1CE4E5B9ull);
}

static AmpValue *map_get(const AmpCastMap *mp, const AmpGraph *g, const AmpValue *v) {
    if (!mp->cap) return NULL;
    for (size_t i = hash_pair(g, v) & (mp->cap - 1);; i = (i + 1) & (mp->cap - 1)) {
        const CastSlot *s = &mp->slots[i];
        if (!s->v) return NULL;
        if (s->g == g && s->v == v) return s->copy;
    }
}

static bool map_put(AmpCastMap *mp, const AmpGraph *g, const AmpValue *v, AmpValue *copy) {
    if ((mp->n + 1) * 2 > mp->cap) {
        size_t cap = mp->cap ? mp->cap * 2 : 256;
        CastSlot *slots = calloc(cap, sizeof *slots);
        if (!slots) return false;
        for (size_t j = 0; j < mp->cap; j++) {
            CastSlot s = mp->slots[j];
            if (!s.v) continue;
            size_t i = hash_pair(s.g, s.v) & (cap - 1);
            while (slots[i].v) i = (i + 1) & (cap - 1);
            slots[i] = s;
        }
        free(mp->slots);
        mp->slots = slots;
        mp->cap = cap;
    }
    size_t i = hash_pair(g, v) & (mp->cap - 1);
    while (mp->slots[i].v) i = (i + 1) & (mp->cap - 1);
    mp->slots[i] = (CastSlot){g, v, copy};
    mp->n++;
    return true;
}

/* ---- the rewriter ---------------------------------------------------------------------- */

typedef struct Rewrite {
    AmpRun *r;
    AmpCastMap map; /* copies of values of enclosing graphs (and of values made meanwhile) */
    AmpValue **own; /* copies of g's own values, by id: n_own entries, g's values before */
    size_t n_own;
    AmpGraph *g;  /* the graph being rewritten */
    AmpNode *top; /* the last Cast put at the top of g, NULL before the first */
} Rewrite;

/* The 16-bit copy of u made for the readers in w->g, or NULL. */
static AmpValue *copy_of(const Rewrite *w, const AmpValue *u) {
    if (u->graph == w->g && u->id < w->n_own) return w->own[u->id];
    return map_get(&w->map, w->g, u);
}

static bool set_copy(Rewrite *w, const AmpValue *u, AmpValue *copy) {
    if (u->graph == w->g && u->id < w->n_own) {
        w->own[u->id] = copy;
        return true;
    }
    return map_put(&w->map, w->g, u, copy);
}

static const char *short_name(int dt) {
    return dt == AMP_DT_FLOAT16 ? "fp16" : dt == AMP_DT_BFLOAT16 ? "bf16" : "fp32";
}

static AmpCode oom(Rewrite *w) {
    return amp_fail(w->r->st, AMP_ERR_INTERNAL, "amp: out of memory");
}

/* A detached Cast node named `name` (in -> out, converting to `to`), counted. */
static AmpNode *new_cast(Rewrite *w, const char *name, AmpValue *in, AmpValue *out, int to) {
    AmpNode *c = amp_node_new_cast(w->g, name, in, out, to);
    if (!c) return NULL;
    c->mark = 0;
    w->r->n_casts++;
    return c;
}

static void copy_type(AmpValue *dst, const AmpValue *src, int dtype) {
    dst->type = src->type;
    dst->type.dtype = dtype;
}

typedef struct MoveCtx {
    const AmpRun *r;
    const AmpGraph *g;
    bool want16; /* move the 16-bit readers (true) or the others (false) */
} MoveCtx;

static bool move_pred(void *ctx, const AmpUse *u) {
    const MoveCtx *c = ctx;
    return amp_reads_16(c->r, c->g, u->node, u->slot) == c->want16;
}

static AmpCode move_readers(Rewrite *w, AmpValue *from, AmpValue *to, bool want16) {
    MoveCtx c = {w->r, w->g, want16};
    return amp_uses_move(from, to, move_pred, &c);
}

/* Puts c at the top of w->g, after the Casts put there before. */
static void insert_top(Rewrite *w, AmpNode *c) {
    if (w->top)
        amp_node_insert_after(w->top, c);
    else
        amp_node_insert_after(NULL, c);
    w->top = c;
}

/* Names the pass makes: `name` followed by suffixes, in a buffer of the caller's when it
 * fits, else malloc'd (join_free gives it back). */
typedef struct Joined {
    char small[256];
    char *s;
} Joined;

static char *join(Joined *j, const char *name, const char *a, const char *b, const char *c) {
    const char *part[4] = {name, a, b, c};
    size_t len[4], total = 1;
    for (int i = 0; i < 4; i++) total += len[i] = part[i] ? strlen(part[i]) : 0;
    j->s = total <= sizeof j->small ? j->small : malloc(total);
    if (!j->s) return NULL;
    char *p = j->s;
    for (int i = 0; i < 4; i++) memcpy(p, part[i] ? part[i] : "", len[i]), p += len[i];
    *p = '\0';
    return j->s;
}

static void join_free(Joined *j) {
    if (j->s != j->small) free(j->s);
    j->s = NULL;
}

/* The 16-bit copy of float32 value u for the readers in w->g: made on first need, and
 * then every 16-bit reader of u in w->g reads it. */
static AmpCode want_16(Rewrite *w, AmpValue *u) {
    if (copy_of(w, u)) return AMP_OK; /* readers moved already */
    Joined j;
    const char *base = join(&j, u->name, "_to_", short_name(w->r->dt), NULL);
    AmpValue *copy = base ? amp_graph_new_value(w->g, base) : NULL;
    join_free(&j);
    if (!copy) return oom(w);
    copy_type(copy, u, w->r->dt);
    AmpNode *c = new_cast(w, copy->name, u, copy, w->r->dt);
    if (!c || !set_copy(w, u, copy)) return oom(w);
    if (u->producer && u->producer->graph == w->g)
        amp_node_insert_after(u->producer, c);
    else
        insert_top(w, c);
    return move_readers(w, u, copy, true) ? oom(w) : AMP_OK;
}

/* After n's outputs have their new types: a 16-bit output that something reads in
 * float32 keeps its name in float32 behind a Cast (`after` is the last node placed after
 * n, updated). With --no-keep-io-types a main-graph output keeps its name in 16 bits and
 * its float32 readers read `<name>_to_fp32`. */
static AmpCode settle_output(Rewrite *w, AmpNode *n, int o, const AmpType *old, AmpNode **after) {
    AmpRun *r = w->r;
    AmpValue *v = n->outputs[o];
    bool fp32_reader = false;
    for (size_t u = 0; u < v->n_uses && !fp32_reader; u++)
        fp32_reader = !amp_reads_16(r, w->g, v->uses[u].node, v->uses[u].slot) &&
                      !amp_reads_shape_only(v->uses[u].node, v->uses[u].slot);
    bool io_16 = r->opt->no_keep_io_types && w->g == r->m->graph;
    bool boundary = (v->flags & AMP_VALUE_OUTPUT) && !io_16;
    if (!fp32_reader && !boundary) return AMP_OK; /* 16 bits in place */
    Joined j;
    AmpNode *c;
    if (io_16 && (v->flags & AMP_VALUE_OUTPUT)) {
        const char *base = join(&j, v->name, "_to_fp32", NULL, NULL);
        AmpValue *f = base ? amp_graph_new_value(w->g, base) : NULL;
        join_free(&j);
        if (!f) return oom(w);
        copy_type(f, v, AMP_DT_FLOAT);
        if (move_readers(w, v, f, false) || !(c = new_cast(w, f->name, v, f, AMP_DT_FLOAT)))
            return oom(w);
    } else {
        const char *base = join(&j, v->name, "_", short_name(r->dt), NULL);
        AmpValue *h = base ? amp_graph_new_value(w->g, base) : NULL;
        join_free(&j);
        if (!h) return oom(w);
        h->type = v->type; /* the 16-bit type the node computes */
        v->type = *old;    /* the name keeps its float32 type */
        amp_node_set_output(n, o, h);
        /* The Cast is named after its input, as want_16's are after their output: a node
         * name, unique as h's is, that no value needs to be checked against. */
        base = join(&j, h->name, "_to_fp32", NULL, NULL);
        c = base ? new_cast(w, base, h, v, AMP_DT_FLOAT) : NULL;
        join_free(&j);
        if (!c || move_readers(w, v, h, true)) return oom(w);
    }
    amp_node_insert_after(*after, c);
    *after = c;
    return AMP_OK;
}

/* Types of a 16-bit node's outputs: its op's inference run with the float32 outputs'
 * dtypes cleared, so outputs that follow the data type (Y of MatMul) take the 16-bit type
 * and those that do not (LayerNormalization's Mean, TopK's indices) keep theirs. */
static void retype_outputs(Rewrite *w, AmpNode *n, AmpType *old, bool *cand) {
    for (int o = 0; o < n->n_outputs; o++) {
        AmpValue *v = n->outputs[o];
        cand[o] = amp_is_f32(v);
        if (!cand[o]) continue;
        old[o] = v->type;
        v->type.dtype = AMP_DT_UNDEFINED;
    }
    AmpStatus tmp;
    amp_status_clear(&tmp);
    AmpCode rc = amp_infer_node(n, &tmp);
    for (int o = 0; o < n->n_outputs; o++) {
        if (!cand[o]) continue;
        AmpValue *v = n->outputs[o];
        if (rc || v->type.kind != AMP_TYPE_TENSOR) v->type = old[o], v->type.dtype = AMP_DT_UNDEFINED;
        if (v->type.dtype == AMP_DT_FLOAT)
            cand[o] = false; /* does not follow the data type: stays float32 */
        else
            v->type.dtype = w->r->dt;
    }
}

static AmpCode rewrite_node(Rewrite *w, AmpNode *n) {
    AmpCode rc = AMP_OK;
    for (int k = 0; k < n->n_inputs; k++) {
        AmpValue *u = n->inputs[k];
        if (u && amp_float_slot(n, k) && amp_is_f32(u) && (rc = want_16(w, u))) return rc;
    }
    AmpType small_old[8];
    bool small_cand[8];
    AmpType *old = small_old;
    bool *cand = small_cand;
    if (n->n_outputs > 8) {
        old = malloc((size_t)n->n_outputs * sizeof *old);
        cand = malloc((size_t)n->n_outputs * sizeof *cand);
        if (!old || !cand) {
            free(old == small_old ? NULL : old);
            free(cand == small_cand ? NULL : cand);
            return oom(w);
        }
    }
    retype_outputs(w, n, old, cand);
    AmpNode *after = n;
    for (int o = 0; !rc && o < n->n_outputs; o++)
        if (cand[o]) rc = settle_output(w, n, o, &old[o], &after);
    if (old != small_old) free(old);
    if (cand != small_cand) free(cand);
    return rc;
}

/* --no-keep-io-types: a float32 main-graph input that 16-bit nodes read becomes 16-bit;
 * its other readers read `<name>_to_fp32`. Inputs with a default (initializers) stay. */
static AmpCode retype_inputs(Rewrite *w) {
    AmpRun *r = w->r;
    AmpGraph *g = w->g;
    for (size_t i = 0; i < g->inputs.n; i++) {
        AmpValue *x = g->inputs.items[i].value;
        if (!amp_is_f32(x) || (x->flags & AMP_VALUE_INITIALIZER)) continue;
        bool r16 = false, r32 = false;
        for (size_t u = 0; u < x->n_uses; u++) {
            if (amp_reads_16(r, g, x->uses[u].node, x->uses[u].slot))
                r16 = true;
            else
                r32 = true;
        }
        if (!r16) continue;
        x->type.dtype = r->dt;
        if (!r32) continue;
        Joined j;
        const char *base = join(&j, x->name, "_to_fp32", NULL, NULL);
        AmpValue *f = base ? amp_graph_new_value(g, base) : NULL;
        join_free(&j);
        if (!f) return oom(w);
        copy_type(f, x, AMP_DT_FLOAT);
        AmpNode *c = move_readers(w, x, f, false) ? NULL : new_cast(w, f->name, x, f, AMP_DT_FLOAT);
        if (!c) return oom(w);
        insert_top(w, c);
    }
    return AMP_OK;
}

static AmpCode rewrite_graph(Rewrite *w, const AmpRunGraph *rg) {
    AmpRun *r = w->r;
    AmpGraph *g = rg->g;
    w->g = g;
    free(w->own);
    w->n_own = g->n_values;
    if (!(w->own = calloc(w->n_own ? w->n_own : 1, sizeof *w->own))) return oom(w);
    w->top = NULL;
    AmpCode rc = amp_weights(r, rg);
    if (!rc && g == r->m->graph && r->opt->no_keep_io_types) rc = retype_inputs(w);
    /* The 16-bit nodes, in order (the Casts put in meanwhile are not in r->ni). */
    for (size_t i = rg->first; i < rg->first + rg->n && !rc; i++)
        if (r->ni[i].paint == AMP_PAINT_ALLOW) rc = rewrite_node(w, r->ni[i].node);
    return rc;
}

AmpCode amp_rewrite(AmpRun *r) {
    Rewrite w = {r, {NULL, 0, 0}, NULL, 0, NULL, NULL};
    AmpCode rc = AMP_OK;
    for (size_t i = 0; !rc && i < r->n_graphs; i++) rc = rewrite_graph(&w, &r->graphs[i]);
    free(w.map.slots);
    free(w.own);
    return rc;
}
