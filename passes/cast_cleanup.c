/* The "cast_cleanup" pass: removes Casts to the type their input already has, Cast round
 * trips that lose nothing (x, float16 -> float32 -> float16, is x again: the readers read
 * x) and duplicate Casts (one input, one
 * target type, one graph: the first one serves all), then the Casts those edits left
 * unused. A lossy trip (float32 -> float16 -> float32 rounds) is never removed, and a Cast
 * whose output is a graph output keeps it (the name is the interface). Linear: one sweep
 * and one hash map per graph, bulk use moves. */
#include <stdlib.h>
#include <string.h>

#include "passes/pass.h"
#include "passes/uses.h"

static bool is_cast(const AmpNode *n) {
    return n->op == AMP_OP_Cast && n->n_inputs == 1 && n->n_outputs == 1 && n->inputs[0] && n->outputs[0];
}

/* Cast's target dtype from `to` (an int, or Cast-1's type name); -1 when unreadable. */
static int cast_to(const AmpNode *n) {
    const AmpAttr *a = amp_node_attr(n, "to");
    if (!a) return -1;
    if (a->type == AMP_ATTR_INT) return a->i > 0 && a->i < AMP_DT__COUNT ? (int)a->i : -1;
    if (a->type != AMP_ATTR_STRING || !a->s.data) return -1;
    char name[32];
    size_t len = a->s.len < sizeof name - 1 ? a->s.len : sizeof name - 1;
    for (size_t i = 0; i < len; i++) {
        char ch = (char)a->s.data[i];
        name[i] = ch >= 'A' && ch <= 'Z' ? (char)(ch - 'A' + 'a') : ch;
    }
    name[len] = '\0';
    return amp_dtype_from_name(name);
}

static int dtype_of(const AmpValue *v) {
    return v->type.kind == AMP_TYPE_TENSOR ? v->type.dtype : AMP_DT_UNDEFINED;
}

/* Every value of type `from` is exactly representable in `to`. */
static bool exact(int from, int to) {
    if (from == AMP_DT_FLOAT16 || from == AMP_DT_BFLOAT16) return to == AMP_DT_FLOAT || to == AMP_DT_DOUBLE;
    return from == AMP_DT_FLOAT && to == AMP_DT_DOUBLE;
}

/* ---- (input value, target) -> first Cast: open addressing ----------------------------- */

typedef struct Slot {
    const AmpValue *in;
    int to;
    AmpNode *cast;
} Slot;

/* The first Cast of each of the graph's own values, by value id (to one type: a Cast
 * of the same value to another type goes to the map). */
typedef struct First {
    AmpNode *cast;
    int to;
} First;

typedef struct Cleanup {
    Slot *slots; /* cleared for each graph */
    size_t cap, n;
    const AmpGraph *g; /* the graph being cleaned */
    First *first;      /* n_first entries: g's values when its cleaning began */
    size_t n_first;
    AmpNode **dead;
    size_t n_dead, cap_dead;
    bool oom;
} Cleanup;

static size_t hash(const AmpValue *v, int to) {
    uint64_t h = ((uint64_t)(uintptr_t)v ^ (uint64_t)to * 0x9E3779B97F4A7C15ull) * 0xBF58476D1CE4E5B9ull;
    return (size_t)(h ^ (h >> 31));
}

static void put(Slot *slots, size_t cap, Slot s) {
    size_t i = hash(s.in, s.to) & (cap - 1);
    while (slots[i].in) i = (i + 1) & (cap - 1);
    slots[i] = s;
}

/* The first Cast of (in, to) seen, or NULL after recording n as the first. */
static AmpNode *first_cast(Cleanup *c, AmpNode *n, int to) {
    const AmpValue *in = n->inputs[0];
    if (in->graph == c->g && in->id < c->n_first) {
        First *f = &c->first[in->id];
        if (!f->cast) {
            *f = (First){n, to};
            return NULL;
        }
        if (f->to == to) return f->cast;
    }
    if (c->cap) {
        for (size_t i = hash(in, to) & (c->cap - 1); c->slots[i].in; i = (i + 1) & (c->cap - 1))
            if (c->slots[i].in == in && c->slots[i].to == to) return c->slots[i].cast;
    }
    if ((c->n + 1) * 2 > c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 64;
        Slot *slots = calloc(cap, sizeof *slots);
        if (!slots) {
            c->oom = true;
            return NULL;
        }
        for (size_t j = 0; j < c->cap; j++)
            if (c->slots[j].in) put(slots, cap, c->slots[j]);
        free(c->slots);
        c->slots = slots;
        c->cap = cap;
    }
    put(c->slots, c->cap, (Slot){in, to, n});
    c->n++;
    return NULL;
}

static void kill(Cleanup *c, AmpNode *n) {
    if (c->n_dead == c->cap_dead) {
        size_t cap = c->cap_dead ? c->cap_dead * 2 : 64;
        AmpNode **d = realloc(c->dead, cap * sizeof *d);
        if (!d) {
            c->oom = true;
            return;
        }
        c->dead = d;
        c->cap_dead = cap;
    }
    c->dead[c->n_dead++] = n;
}

/* Cleans g, then the subgraphs of its nodes (found on the way: one sweep per graph). */
static AmpCode clean_graph(Cleanup *c, AmpGraph *g, AmpStatus *st) {
    /* A fresh map per graph, sized by what the graph holds (subgraphs are often tiny). */
    free(c->slots);
    c->slots = NULL;
    c->cap = c->n = 0;
    c->n_dead = 0;
    amp_big_free(c->first, c->n_first * sizeof *c->first);
    c->g = g;
    c->n_first = g->n_values;
    if (!(c->first = amp_table_zalloc(c->n_first * sizeof *c->first))) {
        c->n_first = 0;
        return amp_fail(st, AMP_ERR_INTERNAL, "cast_cleanup: out of memory");
    }
    AmpNode **own = NULL; /* nodes with subgraphs, cleaned after g */
    size_t n_owners = 0, cap_owners = 0;
    for (AmpNode *n = g->first; n && !c->oom; n = n->next) {
        if (n->n_attrs) {
            for (size_t i = 0; i < n->n_attrs; i++)
                if (n->attrs[i].g || n->attrs[i].n_graphs) {
                    if (n_owners == cap_owners) {
                        cap_owners = cap_owners ? 2 * cap_owners : 16;
                        AmpNode **o = realloc(own, cap_owners * sizeof *o);
                        if (!o) {
                            c->oom = true;
                            break;
                        }
                        own = o;
                    }
                    own[n_owners++] = n;
                    break;
                }
        }
        if (!is_cast(n)) continue;
        AmpValue *x = n->inputs[0], *y = n->outputs[0];
        int to = cast_to(n);
        if (to <= 0 || (y->flags & AMP_VALUE_OUTPUT)) continue;
        /* A Cast to the type x already has (a model's own `.float()` on float32, or one a
         * conversion made a no-op): its readers read x. */
        if (dtype_of(x) == to) {
            if (amp_uses_move(y, x, NULL, NULL)) c->oom = true;
            else kill(c, n);
            continue;
        }
        /* A round trip: y = Cast(Cast(a, B), A) with a of type A and A -> B exact. (The
         * inner Cast cannot have been dropped: dropping moves every reader of its output.) */
        AmpNode *p = x->producer;
        if (p && p->graph == g && is_cast(p)) {
            AmpValue *a = p->inputs[0];
            int mid = cast_to(p);
            if (dtype_of(a) == to && dtype_of(x) == mid && exact(to, mid)) {
                if (amp_uses_move(y, a, NULL, NULL)) c->oom = true;
                else kill(c, n);
                continue;
            }
        }
        /* A duplicate of an earlier Cast of x to the same type. */
        AmpNode *first = first_cast(c, n, to);
        if (first) {
            if (amp_uses_move(y, first->outputs[0], NULL, NULL)) c->oom = true;
            else kill(c, n);
        }
    }
    if (c->oom) {
        free(own);
        return amp_fail(st, AMP_ERR_INTERNAL, "cast_cleanup: out of memory");
    }
    /* Delete the dropped Casts, and the Casts feeding them that nothing reads any more.
     * A dropped Cast is never reached through that chain: its output had no reader left. */
    for (size_t i = 0; i < c->n_dead; i++) {
        AmpNode *n = c->dead[i];
        AmpValue *x = n->inputs[0];
        amp_node_delete(n);
        for (AmpNode *p = x->producer;
             p && p->graph == g && is_cast(p) && x->n_uses == 0 && !(x->flags & AMP_VALUE_OUTPUT);
             p = x->producer) {
            x = p->inputs[0];
            amp_node_delete(p);
        }
    }
    AmpCode rc = AMP_OK;
    for (size_t k = 0; !rc && k < n_owners; k++) {
        AmpNode *n = own[k];
        for (size_t i = 0; !rc && i < n->n_attrs; i++) {
            AmpAttr *a = &n->attrs[i];
            if (a->g) rc = clean_graph(c, a->g, st);
            for (size_t j = 0; !rc && j < a->n_graphs; j++)
                if (a->graphs[j]) rc = clean_graph(c, a->graphs[j], st);
        }
    }
    free(own);
    return rc;
}

AmpCode amp_pass_cast_cleanup(AmpModel *m, const AmpPassOptions *opt, AmpStatus *st) {
    (void)opt;
    Cleanup c = {0};
    AmpCode rc = clean_graph(&c, m->graph, st);
    for (size_t i = 0; !rc && i < m->n_training; i++) {
        if (m->training[i].initialization) rc = clean_graph(&c, m->training[i].initialization, st);
        if (!rc && m->training[i].algorithm) rc = clean_graph(&c, m->training[i].algorithm, st);
    }
    free(c.slots);
    free(c.dead);
    amp_big_free(c.first, c.n_first * sizeof *c.first);
    return rc;
}
