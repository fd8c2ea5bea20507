/* Values beyond the 16-bit range stay float32 (docs/design.md, "The colouring lists and the
 * rules beside them", rule 8; docs/conversion.md). A float32 constant with a finite element
 * the target type cannot hold (it would round to infinity: |x| >= 65520 for float16, past
 * 0x1.FEp127 for bfloat16), and every value computed from one by an op that carries its
 * magnitude (Mul, Add, Where, Expand, Cast, the data-movement ops, ...), make each node
 * that reads them as float data deny, above the lists, with the constant named for
 * --explain.
 *
 * The case that made this rule: Hugging Face's exports build the additive attention mask
 * as (1 - mask) * finfo(float32).min. Painted 16-bit, that constant becomes -inf; a row
 * whose positions are all masked then gets -inf everywhere, and Softmax NaN. PyTorch's
 * autocast computes that Add in float32 (its inputs widen), which this rule reproduces.
 *
 * Constants are Constant and ConstantOfShape nodes and initializers; an initializer is
 * scanned once, when a node first reads it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/amp_impl.h"
#include "ir/half.h"

/* What a value is known to be: not yet looked at, within range, or beyond it. */
typedef struct Entry {
    const AmpValue *v;
    const char *origin; /* NULL: within range; else the detail naming the constant */
    bool scanned;       /* an initializer read: `most` is its largest magnitude */
    uint32_t most;      /* as float32 bits (amp_f32_bytes_max) */
} Entry;

/* An open-addressing map from values to what they are (few entries are beyond range, but
 * every initializer read is remembered, so that it is scanned once; the weights rule
 * reads their largest magnitudes after, AmpRun.scanned). */
typedef struct AmpRangeMap {
    Entry *e;
    size_t cap, n;
} Map;

static size_t hash(const AmpValue *v) {
    uint64_t x = (uint64_t)(uintptr_t)v;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    return (size_t)(x ^ (x >> 33));
}

static Entry *find(const Map *m, const AmpValue *v) {
    if (!m->cap) return NULL;
    for (size_t i = hash(v) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (m->e[i].v == v) return &m->e[i];
        if (!m->e[i].v) return NULL;
    }
}

static bool put(Map *m, const AmpValue *v, const char *origin, const uint32_t *most) {
    if (2 * (m->n + 1) > m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 64;
        Entry *e = calloc(cap, sizeof *e);
        if (!e) return false;
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->e[i].v) continue;
            size_t j = hash(m->e[i].v) & (cap - 1);
            while (e[j].v) j = (j + 1) & (cap - 1);
            e[j] = m->e[i];
        }
        free(m->e);
        m->e = e, m->cap = cap;
    }
    size_t i = hash(v) & (m->cap - 1);
    while (m->e[i].v && m->e[i].v != v) i = (i + 1) & (m->cap - 1);
    if (!m->e[i].v) m->n++;
    m->e[i] = (Entry){v, origin, most != NULL, most ? *most : 0};
    return true;
}

/* Ops whose output carries the magnitude of a float input: arithmetic that keeps it, and
 * every op that moves or selects data. */
static bool carries(AmpOpId op) {
    switch (op) {
    case AMP_OP_Mul:
    case AMP_OP_Add:
    case AMP_OP_Sub:
    case AMP_OP_Div:
    case AMP_OP_Neg:
    case AMP_OP_Abs:
    case AMP_OP_Sum:
    case AMP_OP_Mean:
    case AMP_OP_Max:
    case AMP_OP_Min:
    case AMP_OP_Where:
    case AMP_OP_Expand:
    case AMP_OP_Cast:
    case AMP_OP_CastLike:
    case AMP_OP_Identity:
    case AMP_OP_Reshape:
    case AMP_OP_Squeeze:
    case AMP_OP_Unsqueeze:
    case AMP_OP_Flatten:
    case AMP_OP_Transpose:
    case AMP_OP_Concat:
    case AMP_OP_Split:
    case AMP_OP_Slice:
    case AMP_OP_Gather:
    case AMP_OP_GatherElements:
    case AMP_OP_GatherND:
    case AMP_OP_Tile:
    case AMP_OP_Pad:
    case AMP_OP_ReduceMax:
    case AMP_OP_ReduceMin:
    case AMP_OP_ReduceSum:
    case AMP_OP_ReduceMean: return true;
    default: return false;
    }
}

typedef struct Rng {
    AmpRun *r;
    Map map;
    uint32_t limit; /* float32 magnitudes (bits, sign cleared) from this one up round to inf */
    size_t n_forced;
    const char *first; /* the first constant found beyond range, for the summary */
} Rng;

/* Whether float32 bits u (any sign) are finite and from `limit` up: one unsigned compare. */
static inline bool past(uint32_t u, uint32_t limit) {
    return (u & 0x7fffffffu) - limit < 0x7f800000u - limit;
}

/* The first element of the float32 bytes b beyond range, or -1. Every weight a model
 * reads goes through here once, so blocks are tested without a branch per element (the
 * loop vectorises), and only a block that has one is searched. */
static long long beyond(const Rng *g, AmpBytes b) {
    enum { BLOCK = 1024 };
    size_t n = b.len / 4;
    const uint32_t limit = g->limit;
    for (size_t at = 0; at < n; at += BLOCK) {
        size_t end = n - at < BLOCK ? n : at + BLOCK;
        uint32_t any = 0;
        for (size_t i = at; i < end; i++) {
            uint32_t u;
            memcpy(&u, b.data + 4 * i, 4);
            any |= past(u, limit);
        }
        if (!any) continue;
        for (size_t i = at; i < end; i++) {
            uint32_t u;
            memcpy(&u, b.data + 4 * i, 4);
            if (past(u, limit)) return (long long)i;
        }
    }
    return -1;
}

/* "constant 'mask_min' (-3.40282e+38)": the detail --explain prints. */
static const char *origin_of(Rng *g, const char *what, const char *name, AmpBytes b, long long at) {
    float x;
    memcpy(&x, b.data + 4 * at, 4);
    char buf[512];
    snprintf(buf, sizeof buf, "%s '%s' (%g)", what, name ? name : "", (double)x);
    const char *s = amp_arena_strdup(&g->r->m->arena, buf);
    if (s && !g->first) g->first = s;
    return s;
}

/* Whether float32 tensor t (named `name`, a `what`) has an element beyond range: the
 * detail, or NULL; *most its largest magnitude. *err on failure. Its elements are
 * searched only when the largest magnitude (a vectorized scan) is not below the limit
 * (an inf or NaN alone is not beyond). */
static const char *tensor_beyond(Rng *g, AmpTensor *t, const char *what, const char *name, uint32_t *most,
                                 AmpCode *err) {
    *most = 0;
    if (!t || t->dtype != AMP_DT_FLOAT) return NULL;
    AmpBytes b;
    if ((*err = amp_tensor_bytes(g->r->m, t, &b, g->r->st))) return NULL;
    if ((*most = amp_f32_bytes_max(b.data, b.len / 4)) < g->limit) return NULL;
    long long at = beyond(g, b);
    return at < 0 ? NULL : origin_of(g, what, name, b, at);
}

/* What v is: beyond range (the detail) or not (NULL). Initializers are scanned on first
 * sight; a value made by a node was settled when that node was visited. */
static const char *value_beyond(Rng *g, const AmpValue *v, AmpCode *err) {
    if (!amp_is_f32(v)) return NULL;
    Entry *e = find(&g->map, v);
    if (e) return e->origin;
    if (!v->initializer || v->producer) return NULL;
    uint32_t most;
    const char *o = tensor_beyond(g, v->initializer, "initializer", v->name, &most, err);
    bool f32 = v->initializer->dtype == AMP_DT_FLOAT;
    if (!*err && !put(&g->map, v, o, f32 ? &most : NULL))
        *err = amp_fail(g->r->st, AMP_ERR_INTERNAL, "amp: out of memory");
    return o;
}

static void force(Rng *g, uint32_t i, const char *detail) {
    AmpNodeInfo *x = &g->r->ni[i];
    if (x->flags & AMP_NF_FORCED) return;
    x->flags |= AMP_NF_FORCED;
    x->why = AMP_WHY_RANGE;
    x->detail = detail;
    g->n_forced++;
}

static AmpCode visit(Rng *g, uint32_t i) {
    AmpNode *n = g->r->ni[i].node;
    AmpCode err = AMP_OK;
    const char *made = NULL; /* what the node's float outputs carry */
    if (n->op == AMP_OP_Constant || n->op == AMP_OP_ConstantOfShape) {
        const AmpAttr *a = amp_node_attr(n, "value");
        uint32_t most;
        if (a && a->t)
            made = tensor_beyond(g, a->t, "constant", n->outputs[0] ? n->outputs[0]->name : n->name, &most, &err);
        if (!made && n->op == AMP_OP_Constant && (a = amp_node_attr(n, "value_float")) != NULL) {
            float f = a->f;
            AmpBytes b = {(const uint8_t *)&f, 4};
            long long at = beyond(g, b);
            if (at >= 0) made = origin_of(g, "constant", n->outputs[0] ? n->outputs[0]->name : n->name, b, at);
        }
        if (!made && n->op == AMP_OP_Constant && (a = amp_node_attr(n, "value_floats")) != NULL && a->n_floats) {
            AmpBytes b = {(const uint8_t *)a->floats, a->n_floats * 4};
            long long at = beyond(g, b);
            if (at >= 0) made = origin_of(g, "constant", n->outputs[0] ? n->outputs[0]->name : n->name, b, at);
        }
    } else {
        for (int k = 0; k < n->n_inputs && !err; k++) {
            const AmpValue *v = n->inputs[k];
            if (!v || !amp_float_slot(n, k)) continue;
            const char *o = value_beyond(g, v, &err);
            if (!o) continue;
            force(g, i, o);
            if (carries(n->op) && !made) made = o;
        }
    }
    if (err) return err;
    for (int o = 0; made && o < n->n_outputs; o++)
        if (amp_is_f32(n->outputs[o]) && !put(&g->map, n->outputs[o], made, NULL))
            return amp_fail(g->r->st, AMP_ERR_INTERNAL, "amp: out of memory");
    return AMP_OK;
}

AmpCode amp_range_rule(AmpRun *r, size_t *n_forced, const char **first) {
    /* float16: 65520 = 0x477FF000 rounds to inf (65504 is the largest); bfloat16: from
     * 0x7F7F8000 up (0x7F7F0000 the largest). */
    Rng g = {.r = r, .limit = r->dt == AMP_DT_FLOAT16 ? 0x477FF000u : 0x7F7F8000u};
    AmpCode rc = AMP_OK;
    /* r->ni is in amp_model_walk's order: a graph's nodes (in topological order) before
     * those of its subgraphs, which may read its values. */
    for (size_t i = 0; i < r->n && !rc; i++) rc = visit(&g, (uint32_t)i);
    *n_forced = g.n_forced;
    *first = g.first;
    r->scanned = malloc(sizeof *r->scanned);
    if (r->scanned) *r->scanned = g.map;
    else free(g.map.e); /* the weights rule scans again */
    return rc;
}

bool amp_range_most(const AmpRun *r, const AmpValue *v, uint32_t *most) {
    const Entry *e = r->scanned ? find(r->scanned, v) : NULL;
    if (!e || !e->scanned) return false;
    *most = e->most;
    return true;
}

void amp_range_free(AmpRun *r) {
    if (r->scanned) free(r->scanned->e);
    free(r->scanned);
    r->scanned = NULL;
}

/* ---- positions cast to float -------------------------------------------------------------
 * Rotary embeddings compute their angles as inv_freq x positions, the positions an int64
 * Range cast to float (LLaMA's, Mistral's, Qwen's exports: a MatMul), or a float32 arange
 * the exporter folded into a constant. An angle's error is its rounding, relative to the
 * angle: float16 keeps 11 bits, so at position 1000 an angle is off by about half a radian and
 * at 4096 by whole radians (bfloat16: 8 bits, worse), whatever the integers' exactness;
 * PyTorch's models compute them in float32 on purpose. So a product (an allow-list node)
 * reading positions stays float32: a Range's integers through data movement and a Cast to
 * float, or a constant arange (consecutive integers along one axis, at least AMP_ARANGE_MIN).
 * It costs nothing: the product is tiny, and the angles go on to Cos and Sin, which are
 * deny already (so keeping it float32 saves the two Casts around it). Other integers cast
 * to float (token ids as features, counts) are left to the lists. */
enum { AMP_ARANGE_MIN = 4 };

/* The float32 tensor a constant value holds (an initializer nothing computes, a Constant
 * node's `value`), or NULL. */
static AmpTensor *constant_tensor(const AmpValue *v) {
    if (v->initializer && !v->producer) return v->initializer;
    if (v->producer && v->producer->op == AMP_OP_Constant) {
        const AmpAttr *a = amp_node_attr(v->producer, "value");
        return a ? a->t : NULL;
    }
    return NULL;
}

/* Whether a float32 constant is an arange (x, x + 1, x + 2, ...) of at least AMP_ARANGE_MIN
 * elements along one axis (every other dimension 1): positions torch.arange(seq).float()
 * folded, as [S], [1, S] or [B=1, 1, S]. A weight matrix holding 1, 2, 3, ... is not one.
 * Stops at the first element out of step, so a weight costs a read or two. */
static bool is_arange(AmpRun *r, const AmpValue *v, AmpCode *err) {
    AmpTensor *t = constant_tensor(v);
    if (!t || t->dtype != AMP_DT_FLOAT || t->nelem < AMP_ARANGE_MIN) return false;
    for (size_t d = 0; d < t->ndims; d++)
        if (t->dims[d] != 1 && (uint64_t)t->dims[d] != t->nelem) return false; /* not a vector */
    AmpBytes b;
    if ((*err = amp_tensor_bytes(r->m, t, &b, r->st))) return false;
    float last = 0;
    for (size_t i = 0; i + 4 <= b.len; i += 4) {
        float f;
        memcpy(&f, b.data + i, 4);
        if (!(f - f == 0) || f != floorf(f) || (i && f != last + 1)) return false; /* NaN, inf, a fraction, a gap */
        last = f;
    }
    return true;
}

/* Whether v (a value of a node in r->ni) is marked: positions, as integers or cast. */
static bool marked(const AmpValue *v, const uint8_t *mark) {
    const AmpNode *p = v ? v->producer : NULL;
    uint32_t i = p ? amp_idx(p) : AMP_NO_NODE;
    return i != AMP_NO_NODE && mark[i];
}

AmpCode amp_integers_rule(AmpRun *r, size_t *n_forced, const char **first) {
    *n_forced = 0;
    *first = NULL;
    uint8_t *mark = calloc(r->n ? r->n : 1, 1);
    if (!mark) return amp_fail(r->st, AMP_ERR_INTERNAL, "amp: out of memory");
    AmpCode err = AMP_OK;
    for (size_t i = 0; i < r->n && !err; i++) { /* r->ni: each graph's nodes in topological order */
        AmpNodeInfo *x = &r->ni[i];
        const AmpNode *n = x->node;
        const AmpValue *in0 = n->n_inputs ? n->inputs[0] : NULL;
        if (n->op == AMP_OP_Range || (n->op == AMP_OP_Cast && marked(in0, mark)) ||
            (x->cls == AMP_CLASS_CLEAR && in0 &&
             (marked(in0, mark) || (amp_is_f32(in0) && is_arange(r, in0, &err))))) {
            mark[i] = 1; /* positions: integers, cast, or moved */
            continue;
        }
        if (x->cls != AMP_CLASS_ALLOW || (x->flags & AMP_NF_FORCED)) continue;
        bool reads = false;
        for (int k = 0; k < n->n_inputs && !reads && !err; k++)
            reads = amp_float_slot(n, k) && n->inputs[k] && amp_is_f32(n->inputs[k]) &&
                    (marked(n->inputs[k], mark) || is_arange(r, n->inputs[k], &err));
        if (!reads) continue;
        x->flags |= AMP_NF_FORCED;
        x->why = AMP_WHY_INTEGERS;
        x->detail = n->name ? n->name : n->op_type;
        if (!*first) *first = x->detail;
        (*n_forced)++;
    }
    free(mark);
    return err;
}
