/* The fuse_norm pass (after opset_upgrade, before amp): LayerNorm and GELU that an
 * exporter wrote out as their formula (PyTorch before opsets 17 and 20) are found
 * (amp_fuse_match) and, where the model's opset has the op, replaced by one
 * LayerNormalization (17) or Gelu (20) node. Below those opsets the groups stay, and the
 * amp pass colours each one as the op it implements (amp_color.c). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "passes/fuse_impl.h"
#include "passes/pass.h"

/* ---- matching ------------------------------------------------------------------- */

/* The tensor a constant value holds: an initializer, or a Constant node's `value`, also
 * through Identity nodes (PyTorch's exports share equal weights so). */
static const AmpTensor *tensor_of(const AmpValue *v) {
    for (int hops = 0; v && v->producer && v->producer->op == AMP_OP_Identity && hops < 8; hops++)
        v = v->producer->n_inputs == 1 ? v->producer->inputs[0] : NULL;
    if (v && v->initializer && !v->producer) return v->initializer;
    if (v && v->producer && v->producer->op == AMP_OP_Constant) {
        const AmpAttr *a = amp_node_attr(v->producer, "value");
        return a ? a->t : NULL;
    }
    return NULL;
}

/* The one element of a float32 or int64 constant, as a double. */
static bool scalar_of(const AmpModel *m, const AmpValue *v, double *out) {
    if (v && v->producer && v->producer->op == AMP_OP_Constant) {
        const AmpAttr *a = amp_node_attr(v->producer, "value_float");
        if (a) return *out = a->f, true;
    }
    const AmpTensor *t = tensor_of(v);
    if (!t || t->nelem != 1 || (t->dtype != AMP_DT_FLOAT && t->dtype != AMP_DT_INT64)) return false;
    AmpBytes b;
    AmpStatus st;
    amp_status_clear(&st);
    if (amp_tensor_bytes((AmpModel *)m, (AmpTensor *)t, &b, &st)) return false;
    if (t->dtype == AMP_DT_FLOAT && b.len == 4) {
        float f;
        memcpy(&f, b.data, 4);
        return *out = f, true;
    }
    if (t->dtype == AMP_DT_INT64 && b.len == 8) {
        int64_t i;
        memcpy(&i, b.data, 8);
        return *out = (double)i, true;
    }
    return false;
}

static bool is_const(const AmpModel *m, const AmpValue *v, double want) {
    double d;
    return scalar_of(m, v, &d) && fabs(d - want) <= 1e-4 * fabs(want);
}

/* The one reader of v, if it is an `op` node of v's graph and v is no graph output. */
static AmpNode *sole(const AmpValue *v, AmpOpId op) {
    if (!v || v->n_uses != 1 || (v->flags & AMP_VALUE_OUTPUT)) return NULL;
    AmpNode *n = v->uses[0].node;
    return n->op == op && n->graph == v->graph ? n : NULL;
}

/* The other input of a two-input node reading v; NULL when v is not an input. */
static AmpValue *other(const AmpNode *n, const AmpValue *v) {
    if (!n || n->n_inputs != 2) return NULL;
    return n->inputs[0] == v ? n->inputs[1] : n->inputs[1] == v ? n->inputs[0] : NULL;
}

static bool add(AmpFuseGroup *g, AmpNode *n) {
    if (!n || g->n == AMP_FUSE_MAX || n->n_outputs != 1 || !n->outputs[0]) return false;
    g->nodes[g->n++] = n;
    return true;
}

static int64_t last_dim(const AmpValue *x) {
    const AmpType *t = &x->type;
    return t->kind == AMP_TYPE_TENSOR && t->rank > 0 ? t->dims[t->rank - 1].value : -1;
}

/* A ReduceMean of x over its last axis only, keeping dims (axes -1 or rank-1, as the
 * attribute before opset 18 or the input from 18). */
static bool mean_last_axis(const AmpModel *m, const AmpNode *rm, const AmpValue *x) {
    if (!rm || amp_node_attr_int(rm, "keepdims", 1) != 1) return false;
    const AmpAttr *a = amp_node_attr(rm, "axes");
    double axis;
    if (a && rm->n_inputs < 2) {
        if (a->type != AMP_ATTR_INTS || a->n_ints != 1) return false;
        axis = (double)a->ints[0];
    } else if (!a && rm->n_inputs == 2) {
        if (!scalar_of(m, rm->inputs[1], &axis)) return false;
    } else {
        return false; /* no axes: every axis */
    }
    int rank = x->type.kind == AMP_TYPE_TENSOR ? x->type.rank : -1;
    return axis == -1 || (rank > 0 && axis == rank - 1);
}

/* gamma or beta: a float32 constant, or graph input (onnxruntime-training's models take
 * their weights so), of one dimension, the normalised axis's length. */
static bool is_param(const AmpValue *v, const AmpValue *x) {
    const AmpTensor *t = tensor_of(v);
    int64_t c = last_dim(x);
    if (t) return t->dtype == AMP_DT_FLOAT && t->ndims == 1 && (c < 0 || t->dims[0] == c);
    return v && !v->producer && (v->flags & AMP_VALUE_INPUT) && v->type.kind == AMP_TYPE_TENSOR &&
           v->type.dtype == AMP_DT_FLOAT && v->type.rank == 1 && (c < 0 || v->type.dims[0].value == c);
}

/* ReduceMean(x) -> Sub(x, mean) -> Pow(d, 2) | Mul(d, d) -> ReduceMean -> Add(eps) -> Sqrt
 * -> Div(d, s) | Mul(d, Reciprocal(s)) [-> Mul(gamma)] [-> Add(beta)]. */
static bool match_ln(const AmpModel *m, AmpNode *rm1, AmpFuseGroup *g) {
    AmpValue *x = rm1->n_inputs >= 1 ? rm1->inputs[0] : NULL;
    if (!x || !mean_last_axis(m, rm1, x) || !add(g, rm1)) return false;
    AmpNode *sub = sole(rm1->outputs[0], AMP_OP_Sub);
    if (!sub || sub->n_inputs != 2 || sub->inputs[0] != x || sub->inputs[1] != rm1->outputs[0] || !add(g, sub))
        return false;
    AmpValue *d = sub->outputs[0];
    if (d->flags & AMP_VALUE_OUTPUT) return false;
    AmpNode *sq = NULL, *dv = NULL;
    for (size_t u = 0; u < d->n_uses; u++) {
        AmpNode *c = d->uses[u].node;
        if (c->graph != sub->graph) return false;
        bool square = (c->op == AMP_OP_Pow && d->uses[u].slot == 0 && c->n_inputs == 2 &&
                       is_const(m, c->inputs[1], 2)) ||
                      (c->op == AMP_OP_Mul && c->n_inputs == 2 && c->inputs[0] == d && c->inputs[1] == d);
        bool divide = (c->op == AMP_OP_Div && d->uses[u].slot == 0) || c->op == AMP_OP_Mul;
        if (square && (!sq || sq == c)) sq = c;
        else if (!square && divide && (!dv || dv == c)) dv = c;
        else return false; /* a third reader of the centred value */
    }
    if (!sq || !dv || !add(g, sq)) return false;
    AmpNode *rm2 = sole(sq->outputs[0], AMP_OP_ReduceMean);
    if (!rm2 || !mean_last_axis(m, rm2, x) || !add(g, rm2)) return false;
    AmpNode *ae = sole(rm2->outputs[0], AMP_OP_Add);
    if (!ae || !scalar_of(m, other(ae, rm2->outputs[0]), &g->eps) || g->eps < 0 || !add(g, ae)) return false;
    AmpNode *rt = sole(ae->outputs[0], AMP_OP_Sqrt);
    if (!rt || !add(g, rt)) return false;
    AmpValue *s = rt->outputs[0];
    if (dv->op == AMP_OP_Div) {
        if (dv->n_inputs != 2 || dv->inputs[1] != s || sole(s, AMP_OP_Div) != dv) return false;
    } else {
        AmpNode *rc = sole(s, AMP_OP_Reciprocal);
        if (!rc || other(dv, d) != rc->outputs[0] || sole(rc->outputs[0], AMP_OP_Mul) != dv || !add(g, rc))
            return false;
    }
    if (!add(g, dv)) return false;
    g->n_stats = g->n;
    AmpValue *y = dv->outputs[0];
    AmpNode *mg = sole(y, AMP_OP_Mul);
    if (mg && is_param(other(mg, y), x) && add(g, mg)) {
        g->scale = other(mg, y);
        y = mg->outputs[0];
    }
    AmpNode *ab = sole(y, AMP_OP_Add);
    if (ab && is_param(other(ab, y), x) && add(g, ab)) g->bias = other(ab, y);
    g->x = x;
    return true;
}

/* Pow(x, 2) | Mul(x, x) -> ReduceMean -> Add(eps) -> Sqrt -> Div(x, s) | Mul(x, Reciprocal(s))
 * | Mul(x, Div(1, s)) [-> Mul(gamma)]: RMSNorm as T5's and LLaMA's exports write it (the
 * no-op Casts of `x.to(float32)` around it are not the group's: the fuse_norm pass drops
 * them first). */
static bool match_rms(const AmpModel *m, AmpNode *sq, AmpFuseGroup *g) {
    AmpValue *x = sq->n_inputs == 2 ? sq->inputs[0] : NULL;
    bool square = x && ((sq->op == AMP_OP_Pow && is_const(m, sq->inputs[1], 2)) ||
                        (sq->op == AMP_OP_Mul && sq->inputs[1] == x));
    if (!square || !add(g, sq)) return false;
    AmpNode *rm = sole(sq->outputs[0], AMP_OP_ReduceMean);
    if (!rm || !mean_last_axis(m, rm, x) || !add(g, rm)) return false;
    AmpNode *ae = sole(rm->outputs[0], AMP_OP_Add);
    if (!ae || !scalar_of(m, other(ae, rm->outputs[0]), &g->eps) || g->eps < 0 || !add(g, ae)) return false;
    AmpNode *rt = sole(ae->outputs[0], AMP_OP_Sqrt);
    if (!rt || !add(g, rt)) return false;
    AmpValue *s = rt->outputs[0];
    AmpNode *dv = sole(s, AMP_OP_Div), *nm = NULL;
    if (dv && dv->n_inputs == 2 && dv->inputs[0] == x && dv->inputs[1] == s) {
        nm = dv; /* x / s */
    } else {
        AmpNode *inv = dv && dv->n_inputs == 2 && dv->inputs[1] == s && is_const(m, dv->inputs[0], 1) ? dv
                       : sole(s, AMP_OP_Reciprocal);
        AmpNode *mul = inv ? sole(inv->outputs[0], AMP_OP_Mul) : NULL;
        if (!mul || other(mul, inv->outputs[0]) != x || !add(g, inv)) return false;
        nm = mul; /* x * (1 / s) */
    }
    if (!add(g, nm)) return false;
    /* x's readers: the square and the normalisation (and anything outside the group). */
    g->n_stats = g->n;
    AmpValue *y = nm->outputs[0];
    AmpNode *mg = sole(y, AMP_OP_Mul);
    if (mg && is_param(other(mg, y), x) && add(g, mg)) g->scale = other(mg, y);
    g->x = x;
    return true;
}

/* ... A = Add(t, 1) -> x * A * 0.5, as (x * A) * 0.5, x * (A * 0.5) or (x * 0.5) * A. */
static bool gelu_tail(const AmpModel *m, AmpFuseGroup *g, AmpNode *t, AmpValue *x) {
    AmpNode *a1 = sole(t->outputs[0], AMP_OP_Add);
    if (!a1 || !is_const(m, other(a1, t->outputs[0]), 1) || !add(g, a1)) return false;
    AmpValue *a = a1->outputs[0];
    AmpNode *m1 = sole(a, AMP_OP_Mul), *m2;
    AmpValue *o = other(m1, a);
    if (!o) return false;
    if (o == x || is_const(m, o, 0.5)) {
        m2 = m1 ? sole(m1->outputs[0], AMP_OP_Mul) : NULL;
        AmpValue *o2 = other(m2, m1->outputs[0]);
        bool ok = o == x ? is_const(m, o2, 0.5) : o2 == x;
        return ok && add(g, m1) && add(g, m2);
    }
    AmpNode *hx = o->producer; /* x * 0.5 */
    return hx && hx->op == AMP_OP_Mul && sole(o, AMP_OP_Mul) == m1 && is_const(m, other(hx, x), 0.5) &&
           add(g, hx) && add(g, m1);
}

/* Div(x, sqrt 2) | Mul(x, 1 / sqrt 2) -> Erf -> tail. */
static bool match_gelu_erf(const AmpModel *m, AmpNode *e, AmpFuseGroup *g) {
    AmpValue *in = e->n_inputs == 1 ? e->inputs[0] : NULL;
    AmpNode *dv = in ? in->producer : NULL;
    if (!dv || sole(in, AMP_OP_Erf) != e || dv->n_inputs != 2) return false;
    AmpValue *x = NULL;
    if (dv->op == AMP_OP_Div && is_const(m, dv->inputs[1], 1.4142135623730951)) x = dv->inputs[0];
    else if (dv->op == AMP_OP_Mul && is_const(m, dv->inputs[1], 0.7071067811865476)) x = dv->inputs[0];
    else if (dv->op == AMP_OP_Mul && is_const(m, dv->inputs[0], 0.7071067811865476)) x = dv->inputs[1];
    if (!x || !add(g, dv) || !add(g, e) || !gelu_tail(m, g, e, x)) return false;
    g->x = x;
    return true;
}

/* The cube of x: Pow(x, 3), or Mul(Mul(x, x), x) in either order; NULL if v is not one. */
static AmpValue *cube_of(const AmpModel *m, AmpValue *v, AmpFuseGroup *g) {
    AmpNode *p = v ? v->producer : NULL;
    if (!p || p->n_inputs != 2) return NULL;
    if (p->op == AMP_OP_Pow) return is_const(m, p->inputs[1], 3) && add(g, p) ? p->inputs[0] : NULL;
    if (p->op != AMP_OP_Mul) return NULL;
    for (int i = 0; i < 2; i++) {
        AmpNode *sq = p->inputs[i] ? p->inputs[i]->producer : NULL;
        AmpValue *x = p->inputs[1 - i];
        if (sq && sq->op == AMP_OP_Mul && sq->n_inputs == 2 && sq->inputs[0] == x && sq->inputs[1] == x &&
            sole(sq->outputs[0], AMP_OP_Mul) == p)
            return add(g, sq) && add(g, p) ? x : NULL;
    }
    return NULL;
}

/* Mul(Add(x, Mul(cube, 0.044715)), sqrt(2 / pi)) -> Tanh -> tail. */
static bool match_gelu_tanh(const AmpModel *m, AmpNode *t, AmpFuseGroup *g) {
    AmpValue *in = t->n_inputs == 1 ? t->inputs[0] : NULL;
    AmpNode *mk = in ? in->producer : NULL;
    if (!mk || mk->op != AMP_OP_Mul || sole(in, AMP_OP_Tanh) != t || mk->n_inputs != 2) return false;
    const double k_pi = 0.7978845608028654; /* sqrt(2 / pi) */
    int k = is_const(m, mk->inputs[1], k_pi) ? 0 : is_const(m, mk->inputs[0], k_pi) ? 1 : -1;
    AmpValue *inner = k < 0 ? NULL : mk->inputs[k];
    AmpNode *ad = inner ? inner->producer : NULL;
    if (!ad || ad->op != AMP_OP_Add || ad->n_inputs != 2 || sole(inner, AMP_OP_Mul) != mk) return false;
    for (int i = 0; i < 2; i++) {
        AmpValue *c3 = ad->inputs[i], *x = ad->inputs[1 - i];
        AmpNode *mc = c3 ? c3->producer : NULL;
        if (!mc || mc->op != AMP_OP_Mul || sole(c3, AMP_OP_Add) != ad) continue;
        AmpValue *cube = NULL;
        if (is_const(m, mc->inputs[1], 0.044715)) cube = mc->inputs[0];
        else if (is_const(m, mc->inputs[0], 0.044715)) cube = mc->inputs[1];
        if (!cube || sole(cube, AMP_OP_Mul) != mc || cube_of(m, cube, g) != x) {
            g->n = 0;
            continue;
        }
        if (!add(g, mc) || !add(g, ad) || !add(g, mk) || !add(g, t) || !gelu_tail(m, g, t, x)) return false;
        g->x = x;
        return true;
    }
    return false;
}

bool amp_fuse_match(const AmpModel *m, AmpNode *root, AmpFuseGroup *g) {
    memset(g, 0, sizeof *g);
    bool ok = false;
    switch (root->op) {
    case AMP_OP_ReduceMean: ok = match_ln(m, root, g), g->kind = AMP_FUSE_LAYERNORM; break;
    case AMP_OP_Erf: ok = match_gelu_erf(m, root, g), g->kind = AMP_FUSE_GELU_ERF; break;
    case AMP_OP_Tanh: ok = match_gelu_tanh(m, root, g), g->kind = AMP_FUSE_GELU_TANH; break;
    case AMP_OP_Pow:
    case AMP_OP_Mul: ok = match_rms(m, root, g), g->kind = AMP_FUSE_RMSNORM; break;
    default: break;
    }
    for (int k = 0; ok && k < g->n; k++) ok = g->nodes[k]->graph == root->graph;
    if (!ok || !g->x) {
        memset(g, 0, sizeof *g);
        return false;
    }
    g->out = g->nodes[g->n - 1]->outputs[0];
    return true;
}

const char *amp_fuse_kind_name(AmpFuseKind k) {
    switch (k) {
    case AMP_FUSE_LAYERNORM: return "LayerNormalization";
    case AMP_FUSE_GELU_ERF: return "Gelu";
    case AMP_FUSE_GELU_TANH: return "Gelu (tanh)";
    case AMP_FUSE_RMSNORM: return "RMSNorm";
    default: return "?";
    }
}

/* ---- fusing ------------------------------------------------------------------------ */

typedef struct Fuse {
    AmpModel *m;
    bool ln, gelu;         /* the opset has the op */
    size_t n_ln, n_gelu;   /* groups fused */
    size_t n_rms, n_casts; /* RMSNorm groups found, no-op Casts around them dropped */
    size_t n_left;         /* groups left decomposed (the opset lacks the op) */
    size_t n_nodes;        /* nodes they replaced */
} Fuse;

/* A new float32 initializer of c ones (LayerNormalization's scale when the export had
 * no gamma). */
static AmpValue *ones(AmpGraph *g, const char *base, int64_t c) {
    AmpArena *a = &g->model->arena;
    AmpValue *v = amp_graph_new_value(g, base);
    AmpTensor *t = amp_arena_calloc(a, 1, sizeof *t);
    float *f = amp_arena_alloc(a, (size_t)c * sizeof *f);
    int64_t *dims = amp_arena_alloc(a, sizeof *dims);
    AmpDim *tdims = amp_arena_calloc(a, 1, sizeof *tdims);
    if (!v || !t || !f || !dims || !tdims) return NULL;
    for (int64_t i = 0; i < c; i++) f[i] = 1.0f;
    t->dtype = AMP_DT_FLOAT;
    t->has = AMP_TENSOR_HAS_DTYPE | AMP_TENSOR_HAS_RAW;
    t->ndims = 1;
    dims[0] = c;
    t->dims = dims;
    t->nelem = (uint64_t)c;
    t->raw = (AmpBytes){(const uint8_t *)f, (size_t)c * sizeof *f};
    tdims->value = c;
    v->type = (AmpType){AMP_TYPE_TENSOR, AMP_DT_FLOAT, 1, tdims};
    return amp_graph_add_initializer(g, v, t) ? NULL : v;
}

/* "/m/bert/embeddings/LayerNorm/LayerNormalization" from the first node's name, as
 * PyTorch names the op it exports at opset 17. */
static const char *fused_name(AmpArena *a, const AmpNode *first, const char *op) {
    char buf[512];
    const char *nm = first->name ? first->name : "";
    const char *slash = strrchr(nm, '/');
    if (slash) snprintf(buf, sizeof buf, "%.*s%s", (int)(slash - nm + 1), nm, op);
    else snprintf(buf, sizeof buf, "%s%s%s", nm, *nm ? "_" : "", op);
    return amp_arena_strdup(a, buf);
}

/* "fused by ampc fuse_norm from 9 nodes: NAME, NAME, ...": --explain finds the node by
 * the names of the nodes it replaced, which are the names the input model has. */
static const char *fused_doc(AmpArena *a, const AmpFuseGroup *grp) {
    size_t len = strlen(AMP_FUSE_DOC) + 32;
    for (int i = 0; i < grp->n; i++) len += strlen(grp->nodes[i]->name ? grp->nodes[i]->name : "") + 2;
    char *d = amp_arena_alloc(a, len);
    if (!d) return NULL;
    size_t at = (size_t)snprintf(d, len, "%s from %d nodes: ", AMP_FUSE_DOC, grp->n);
    for (int i = 0; i < grp->n && at < len; i++)
        at += (size_t)snprintf(d + at, len - at, "%s%s", i ? ", " : "", grp->nodes[i]->name ? grp->nodes[i]->name : "");
    return d;
}

/* LayerNormalization: axis -1 and the epsilon; Gelu of the tanh form: approximate. */
static bool set_attrs(AmpNode *r, const AmpFuseGroup *grp) {
    AmpAttr *at;
    if (grp->kind == AMP_FUSE_LAYERNORM) {
        if (!(at = amp_node_add_attr(r, "axis", AMP_ATTR_INT))) return false;
        at->i = -1;
        if (!(at = amp_node_add_attr(r, "epsilon", AMP_ATTR_FLOAT))) return false;
        at->f = (float)grp->eps;
    } else if (grp->kind == AMP_FUSE_GELU_TANH) {
        if (!(at = amp_node_add_attr(r, "approximate", AMP_ATTR_STRING))) return false;
        char *s = amp_arena_strdup(&r->graph->model->arena, "tanh");
        if (!s) return false;
        at->s = (AmpBytes){(const uint8_t *)s, 4};
    }
    return true;
}

/* Replaces the group by one node (*made); *made NULL, nothing changed, when it cannot. */
static AmpCode replace(Fuse *f, const AmpFuseGroup *grp, AmpNode **made, AmpStatus *st) {
    AmpGraph *g = grp->nodes[0]->graph;
    AmpArena *a = &f->m->arena;
    bool ln = grp->kind == AMP_FUSE_LAYERNORM;
    const char *op = ln ? "LayerNormalization" : "Gelu";
    AmpValue *scale = grp->scale;
    *made = NULL;
    if (ln && !scale) {
        int64_t c = last_dim(grp->x);
        if (c <= 0) return AMP_OK; /* a scale of ones needs the axis's length */
        if (!(scale = ones(g, "fuse_norm_ones", c))) return amp_fail(st, AMP_ERR_INTERNAL, "fuse_norm: out of memory");
    }
    AmpNode *last = grp->nodes[grp->n - 1];
    int n_in = ln ? (grp->bias ? 3 : 2) : 1;
    AmpNode *r = amp_node_new(g, "", op, fused_name(a, grp->nodes[0], op), n_in, 1);
    if (!r || !(r->doc_string = fused_doc(a, grp)) || amp_node_set_input(r, 0, grp->x) ||
        (ln && amp_node_set_input(r, 1, scale)) || (grp->bias && ln && amp_node_set_input(r, 2, grp->bias)))
        return amp_fail(st, AMP_ERR_INTERNAL, "fuse_norm: out of memory");
    if (!set_attrs(r, grp)) return amp_fail(st, AMP_ERR_INTERNAL, "fuse_norm: out of memory");
    amp_node_insert_before(last, r);
    /* The Constant nodes only the group read go with it. */
    AmpNode *consts[AMP_FUSE_MAX * 2];
    size_t n_consts = 0;
    for (int k = 0; k < grp->n; k++)
        for (int i = 0; i < grp->nodes[k]->n_inputs; i++) {
            AmpValue *v = grp->nodes[k]->inputs[i];
            if (v && v->producer && v->producer->op == AMP_OP_Constant && n_consts < AMP_FUSE_MAX * 2)
                consts[n_consts++] = v->producer;
        }
    for (int k = 0; k < grp->n; k++) amp_node_delete(grp->nodes[k]);
    amp_node_set_output(r, 0, grp->out);
    for (size_t k = 0; k < n_consts; k++) {
        AmpValue *v = consts[k]->outputs[0];
        if (consts[k]->graph && v && v->producer == consts[k] && v->n_uses == 0 && !(v->flags & AMP_VALUE_OUTPUT))
            amp_node_delete(consts[k]);
    }
    *made = r;
    return AMP_OK;
}

bool amp_fuse_noop_cast(const AmpNode *n) {
    const AmpValue *x = n->op == AMP_OP_Cast && n->n_inputs == 1 ? n->inputs[0] : NULL;
    return x && n->n_outputs == 1 && n->outputs[0] && x->type.kind == AMP_TYPE_TENSOR &&
           amp_dtype_is_float(x->type.dtype) && amp_node_attr_int(n, "to", -1) == x->type.dtype;
}

/* Whether v is the output of an RMSNorm group: made by its normalisation or by gamma's Mul
 * after it, so the group's square reads an input of v's producer, or of that node's
 * producers. */
static bool ends_rms(const AmpModel *m, const AmpValue *v) {
    const AmpNode *p = v->producer;
    for (int depth = 0; depth < 2 && p; depth++) {
        const AmpNode *next = NULL;
        for (int i = 0; i < p->n_inputs; i++) {
            const AmpValue *in = p->inputs[i];
            for (size_t u = 0; in && u < in->n_uses; u++) {
                AmpNode *r = in->uses[u].node;
                AmpFuseGroup grp;
                if ((r->op == AMP_OP_Pow || r->op == AMP_OP_Mul) && amp_fuse_match(m, r, &grp) &&
                    grp.kind == AMP_FUSE_RMSNORM && grp.out == v)
                    return true;
            }
            if (in && in->producer && in->producer->op == AMP_OP_Mul) next = in->producer;
        }
        p = next;
    }
    return false;
}

/* The no-op Casts around RMSNorm groups go (their readers read the input): the one before
 * the square and the normalisation (`x.to(float32)`) and the one after it. A Cast whose
 * output is a graph output stays (the name is the interface). */
static AmpCode drop_rms_casts(Fuse *f, AmpGraph *g, AmpStatus *st) {
    for (AmpNode *n = g->first, *next; n; n = next) {
        next = n->next;
        if (!amp_fuse_noop_cast(n) || (n->outputs[0]->flags & AMP_VALUE_OUTPUT)) continue;
        AmpValue *y = n->outputs[0], *x = n->inputs[0];
        bool around = false;
        AmpFuseGroup grp;
        for (size_t u = 0; u < y->n_uses && !around; u++) /* y starts a group */
            around = amp_fuse_match(f->m, y->uses[u].node, &grp) && grp.kind == AMP_FUSE_RMSNORM && grp.x == y;
        if (!around && x->producer) around = ends_rms(f->m, x);
        if (!around) continue;
        if (amp_value_replace_uses(y, x, false))
            return amp_fail(st, AMP_ERR_INTERNAL, "fuse_norm: out of memory");
        amp_node_delete(n);
        f->n_casts++;
    }
    return AMP_OK;
}

static AmpCode fuse_graph(AmpGraph *g, void *ctx, AmpStatus *st) {
    Fuse *f = ctx;
    AmpCode rc = drop_rms_casts(f, g, st);
    if (rc) return rc;
    for (AmpNode *n = g->first, *next; n; n = next) {
        next = n->next;
        if (n->op != AMP_OP_ReduceMean && n->op != AMP_OP_Erf && n->op != AMP_OP_Tanh && n->op != AMP_OP_Pow &&
            n->op != AMP_OP_Mul)
            continue;
        AmpFuseGroup grp;
        if (!amp_fuse_match(f->m, n, &grp)) continue;
        if (grp.kind == AMP_FUSE_RMSNORM) { /* no RMSNormalization op: the amp pass colours it */
            f->n_rms++;
            continue;
        }
        bool ln = grp.kind == AMP_FUSE_LAYERNORM;
        if (!(ln ? f->ln : f->gelu) || !amp_dtype_is_float(grp.x->type.dtype)) {
            f->n_left++;
            continue;
        }
        AmpNode *r;
        AmpCode rc = replace(f, &grp, &r, st);
        if (rc) return rc;
        if (!r) {
            f->n_left++;
            continue;
        }
        *(ln ? &f->n_ln : &f->n_gelu) += 1;
        f->n_nodes += (size_t)grp.n;
        next = r->next;
    }
    return AMP_OK;
}

AmpCode amp_pass_fuse_norm(AmpModel *m, const AmpPassOptions *opt, AmpStatus *st) {
    int64_t opset = amp_model_opset(m, "");
    Fuse f = {.m = m, .ln = opset >= 17, .gelu = opset >= 20};
    AmpCode rc = amp_model_walk(m, fuse_graph, &f, st);
    if (rc) return rc;
    if (opt && opt->notify && f.n_ln + f.n_gelu + f.n_rms) {
        char line[320];
        int k = snprintf(line, sizeof line, "fuse_norm: %zu LayerNormalization and %zu Gelu fused from %zu nodes",
                         f.n_ln, f.n_gelu, f.n_nodes);
        if (f.n_rms && k > 0 && (size_t)k < sizeof line)
            snprintf(line + k, sizeof line - (size_t)k, "; %zu RMSNorm found (coloured as a norm: float32 "
                     "statistics), %zu no-op Casts around them dropped", f.n_rms, f.n_casts);
        opt->notify(opt->notify_ctx, line);
    }
    return AMP_OK;
}
