/* Concrete mode of type inference (shape.h): runs a node's infer function with a
 * context whose type_of answers from the caller's concrete shapes and whose set_out
 * writes into the caller's array, so that nothing in the model changes. */
#include <stdlib.h>
#include <string.h>

#include "ir/infer_impl.h"
#include "ir/shape.h"

/* Values whose types one node's inference reads besides its inputs: the producers
 * followed by amp_inf_value_ints (each read follows at most 64) for a few inputs. When
 * they run out, further values read as unknown: shapes stay unknown, never wrong. */
#define EXTRA_SLOTS 256

/* The AmpType view of one value's concrete shape; its dims live here. */
typedef struct TypeSlot {
    const AmpValue *v;
    bool known;
    AmpType t;
    AmpDim d[AMP_MAX_RANK];
} TypeSlot;

typedef struct Concrete {
    const AmpShapeEnv *env;
    TypeSlot *slots; /* one per value read, so that a pointer handed out stays valid */
    int n, cap;
    AmpBuf *out;
    bool *known;
} Concrete;

static const AmpType *concrete_type_of(AmpInferCtx *c, const AmpValue *v) {
    Concrete *k = c->user;
    for (int i = 0; i < k->n; i++)
        if (k->slots[i].v == v) return k->slots[i].known ? &k->slots[i].t : NULL;
    if (k->n == k->cap || !k->env->shape_of) return NULL;
    TypeSlot *s = &k->slots[k->n++];
    s->v = v;
    s->known = false;
    AmpBuf b;
    memset(&b, 0, sizeof b);
    if (!k->env->shape_of(k->env->user, v, &b) || b.rank < 0 || b.rank > AMP_MAX_RANK ||
        b.dtype <= AMP_DT_UNDEFINED || b.dtype >= AMP_DT__COUNT)
        return NULL;
    for (int i = 0; i < b.rank; i++) {
        if (b.dims[i] < 0) return NULL;
        s->d[i] = (AmpDim){b.dims[i], NULL};
    }
    s->t = (AmpType){AMP_TYPE_TENSOR, b.dtype, b.rank, s->d};
    s->known = true;
    return &s->t;
}

static AmpCode concrete_set_out(AmpInferCtx *c, int slot, const AmpType *t) {
    Concrete *k = c->user;
    AmpBuf *o = &k->out[slot];
    memset(o, 0, sizeof *o);
    k->known[slot] = false;
    if (t->kind != AMP_TYPE_TENSOR) return AMP_OK;
    o->dtype = t->dtype;
    if (t->dtype == AMP_DT_UNDEFINED || t->rank < 0 || t->rank > AMP_MAX_RANK) return AMP_OK;
    uint64_t nelem = 1;
    for (int i = 0; i < t->rank; i++) {
        int64_t d = t->dims[i].value;
        if (d < 0) return AMP_OK; /* unknown, or only a dim_param */
        if (d && nelem > (uint64_t)INT64_MAX / (uint64_t)d)
            return amp_inf_fail(c->n, c->st, "output %d would have more than 2^63 elements", slot);
        nelem *= (uint64_t)d;
    }
    o->rank = t->rank;
    for (int i = 0; i < t->rank; i++) o->dims[i] = t->dims[i].value;
    o->nelem = nelem;
    k->known[slot] = true;
    return AMP_OK;
}

static int concrete_ints(AmpInferCtx *c, const AmpValue *v, int64_t *out, int max) {
    const AmpShapeEnv *env = ((Concrete *)c->user)->env;
    return env->ints_of(env->user, v, out, max);
}

static int concrete_doubles(AmpInferCtx *c, const AmpValue *v, double *out, int max) {
    const AmpShapeEnv *env = ((Concrete *)c->user)->env;
    if (env->doubles_of) return env->doubles_of(env->user, v, out, max);
    int64_t tmp[64];
    if (!env->ints_of || max <= 0) return -1;
    int k = env->ints_of(env->user, v, tmp, max < 64 ? max : 64);
    for (int i = 0; i < k; i++) out[i] = (double)tmp[i];
    return k;
}

/* If/Loop/Scan infer and type their bodies: graph-mode work that would edit the model. */
static bool has_bodies(const AmpNode *n) {
    for (size_t i = 0; i < n->n_attrs; i++)
        if (n->attrs[i].g || n->attrs[i].n_graphs) return true;
    return false;
}

AmpCode amp_shape_node(const AmpNode *n, int64_t opset, const AmpShapeEnv *env, AmpBuf *out,
                       bool *known, AmpStatus *st) {
    for (int k = 0; k < n->n_outputs; k++) {
        memset(&out[k], 0, sizeof out[k]);
        known[k] = false;
    }
    const AmpOpInfo *info = amp_op_info(n->op);
    if (!info->infer || has_bodies(n)) return AMP_OK;
    Concrete k = {env, NULL, 0, 0, out, known};
    k.cap = n->n_inputs + EXTRA_SLOTS;
    k.slots = calloc((size_t)k.cap, sizeof *k.slots);
    if (!k.slots) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    AmpInferCtx c;
    memset(&c, 0, sizeof c);
    c.n = n;
    c.opset = opset;
    c.st = st;
    c.type_of = concrete_type_of;
    c.set_out = concrete_set_out;
    c.ints_of = env->ints_of ? concrete_ints : NULL;
    c.doubles_of = env->doubles_of || env->ints_of ? concrete_doubles : NULL;
    c.graph_mode = false;
    c.user = &k;
    AmpCode rc = info->infer(&c);
    free(k.slots);
    bool from_data = amp_op_shape_from_data(n->op);
    for (int i = 0; i < n->n_outputs; i++)
        if (rc || from_data) known[i] = false;
    return rc;
}
