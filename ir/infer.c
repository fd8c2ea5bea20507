/* Type and shape inference: the driver (graphs in node order, subgraphs as their
 * owners are met, training graphs after the main one), the rule that merges what
 * inference finds with what the model declares, and helpers shared by infer_*.c. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ir/infer_impl.h"

/* Deeper nesting of If/Loop/Scan bodies is refused rather than risking the stack. */
#define MAX_GRAPH_DEPTH 64

/* ---- messages ----------------------------------------------------------------------- */

AmpCode amp_inf_fail(const AmpNode *n, AmpStatus *st, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!n) return amp_fail(st, AMP_ERR_INPUT, "%s", msg);
    return amp_fail(st, AMP_ERR_INPUT, "node '%s' (%s): %s", n->name ? n->name : "",
                    n->op_type ? n->op_type : "", msg);
}

/* ---- merging ------------------------------------------------------------------------
 * A value's type before inference is what the model declares (graph input/output,
 * value_info, or an earlier inference run). Inference never overrides a declared
 * dtype: a disagreement is an error. It fills what is missing: the whole type, the
 * rank, unknown dims, and dims known only by name when it computes a number. Where
 * declared and inferred dims are both numbers and differ, the declaration is kept
 * (stale value_info is common in exported models; the verifier judges). */

static AmpDim *dims_copy(AmpModel *m, const AmpDim *src, int rank) {
    if (rank <= 0) return NULL;
    AmpDim *d = amp_arena_calloc(&m->arena, (size_t)rank, sizeof *d);
    if (d && src) amp_copy(d, src, (size_t)rank * sizeof *d);
    return d;
}

static bool dim_better(AmpDim have, AmpDim got) {
    if (have.value >= 0) return false;
    return got.value >= 0 || (!have.param && got.param);
}

AmpCode amp_inf_merge(const AmpNode *n, AmpValue *v, const AmpType *t, const char *what,
                      AmpStatus *st) {
    AmpModel *m = v->graph->model;
    AmpType *cur = &v->type;
    if (t->kind == AMP_TYPE_NONE || cur->kind == AMP_TYPE_OTHER) return AMP_OK;
    if (t->kind == AMP_TYPE_OTHER) {
        if (cur->kind == AMP_TYPE_NONE) {
            cur->kind = AMP_TYPE_OTHER;
            cur->rank = -1;
        }
        return AMP_OK;
    }
    if (t->dtype == AMP_DT_UNDEFINED && t->rank < 0) return AMP_OK;
    if (cur->kind == AMP_TYPE_NONE) {
        AmpDim *d = dims_copy(m, t->dims, t->rank);
        if (t->rank > 0 && !d) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
        cur->kind = AMP_TYPE_TENSOR;
        cur->dtype = t->dtype;
        cur->rank = t->rank;
        cur->dims = d;
        return AMP_OK;
    }
    if (cur->dtype != AMP_DT_UNDEFINED && t->dtype != AMP_DT_UNDEFINED && cur->dtype != t->dtype)
        return amp_inf_fail(n, st, "%s '%s' is declared %s but computes %s", what, v->name,
                            amp_dtype_name(cur->dtype), amp_dtype_name(t->dtype));
    if (cur->dtype == AMP_DT_UNDEFINED) cur->dtype = t->dtype;
    if (t->rank < 0) return AMP_OK;
    if (cur->rank < 0) {
        AmpDim *d = dims_copy(m, t->dims, t->rank);
        if (t->rank > 0 && !d) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
        cur->rank = t->rank;
        cur->dims = d;
        return AMP_OK;
    }
    if (cur->rank != t->rank) return AMP_OK; /* declaration kept, see above */
    int i = 0;
    while (i < t->rank && !dim_better(cur->dims[i], t->dims[i])) i++;
    if (i == t->rank) return AMP_OK;
    /* Never edit the declared dims in place: they may be shared with the loaded
     * AmpValueInfo the saver compares against. */
    AmpDim *d = dims_copy(m, cur->dims, cur->rank);
    if (!d) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    for (; i < t->rank; i++)
        if (dim_better(d[i], t->dims[i])) d[i] = t->dims[i];
    cur->dims = d;
    return AMP_OK;
}

/* ---- the graph-mode context ------------------------------------------------------------ */

static const AmpType *graph_type_of(AmpInferCtx *c, const AmpValue *v) {
    (void)c;
    return &v->type;
}

static AmpCode graph_set_out(AmpInferCtx *c, int slot, const AmpType *t) {
    return amp_inf_merge(c->n, c->n->outputs[slot], t, "output", c->st);
}

void amp_inf_ctx_graph(AmpInferCtx *c, const AmpNode *n, int64_t opset, AmpStatus *st) {
    memset(c, 0, sizeof *c);
    c->n = n;
    c->opset = opset;
    c->st = st;
    c->type_of = graph_type_of;
    c->set_out = graph_set_out;
    c->graph_mode = true;
}

AmpCode amp_inf_set_type(AmpInferCtx *c, int slot, const AmpType *t) {
    const AmpNode *n = c->n;
    if (slot < 0 || slot >= n->n_outputs || !n->outputs[slot] || !t) return AMP_OK;
    return c->set_out(c, slot, t);
}

AmpCode amp_inf_set(AmpInferCtx *c, int slot, int dtype, const AmpInfShape *s) {
    AmpType t = {AMP_TYPE_TENSOR, dtype, -1, NULL};
    if (s && s->rank >= 0 && s->rank <= AMP_INF_MAX_RANK) {
        t.rank = s->rank;
        t.dims = (AmpDim *)s->d;
    }
    return amp_inf_set_type(c, slot, &t);
}

/* ---- inputs ---------------------------------------------------------------------------- */

bool amp_inf_has_input(const AmpNode *n, int i) {
    return i >= 0 && i < n->n_inputs && n->inputs[i];
}

const AmpType *amp_inf_vtype(AmpInferCtx *c, const AmpValue *v) {
    return v ? c->type_of(c, v) : NULL;
}

const AmpType *amp_inf_vtensor(AmpInferCtx *c, const AmpValue *v) {
    const AmpType *t = amp_inf_vtype(c, v);
    if (!t || t->kind != AMP_TYPE_TENSOR) return NULL;
    if (t->dtype == AMP_DT_UNDEFINED && t->rank < 0) return NULL;
    return t;
}

const AmpType *amp_inf_type(AmpInferCtx *c, int i) {
    return amp_inf_has_input(c->n, i) ? amp_inf_vtype(c, c->n->inputs[i]) : NULL;
}

const AmpType *amp_inf_in(AmpInferCtx *c, int i) {
    return amp_inf_has_input(c->n, i) ? amp_inf_vtensor(c, c->n->inputs[i]) : NULL;
}

int amp_inf_dtype(AmpInferCtx *c, int i) {
    const AmpType *t = amp_inf_in(c, i);
    return t ? t->dtype : AMP_DT_UNDEFINED;
}

bool amp_inf_shape(AmpInferCtx *c, int i, AmpInfShape *s) {
    const AmpType *t = amp_inf_in(c, i);
    s->rank = -1;
    if (!t || t->rank < 0 || t->rank > AMP_INF_MAX_RANK) return false;
    s->rank = t->rank;
    for (int k = 0; k < t->rank; k++) s->d[k] = t->dims[k];
    return true;
}

/* ---- dims ------------------------------------------------------------------------------ */

AmpDim amp_dim_mul(AmpDim a, AmpDim b) {
    if (a.value == 0 || b.value == 0) return amp_dim_of(0);
    if (a.value == 1) return b;
    if (b.value == 1) return a;
    if (a.value < 0 || b.value < 0 || a.value > INT64_MAX / b.value) return amp_dim_unknown();
    return amp_dim_of(a.value * b.value);
}

AmpDim amp_dim_add(AmpDim a, AmpDim b) {
    if (a.value < 0 || b.value < 0 || a.value > INT64_MAX - b.value) return amp_dim_unknown();
    return amp_dim_of(a.value + b.value);
}

AmpDim amp_dim_merge(AmpDim a, AmpDim b) {
    return dim_better(a, b) ? b : a;
}

void amp_shape_unknown_dims(AmpInfShape *s, int rank) {
    if (rank < 0 || rank > AMP_INF_MAX_RANK) {
        s->rank = -1;
        return;
    }
    s->rank = rank;
    for (int i = 0; i < rank; i++) s->d[i] = amp_dim_unknown();
}

static bool same_param(AmpDim a, AmpDim b) {
    return a.param && b.param && strcmp(a.param, b.param) == 0;
}

AmpCode amp_inf_broadcast_into(const AmpNode *n, AmpInfShape *acc, const AmpInfShape *b,
                               AmpStatus *st) {
    if (acc->rank < 0) return AMP_OK;
    if (b->rank < 0) {
        acc->rank = -1;
        return AMP_OK;
    }
    int r = acc->rank > b->rank ? acc->rank : b->rank;
    AmpInfShape out;
    out.rank = r;
    for (int i = 0; i < r; i++) {
        int ia = acc->rank - r + i, ib = b->rank - r + i;
        AmpDim x = ia >= 0 ? acc->d[ia] : amp_dim_of(1);
        AmpDim y = ib >= 0 ? b->d[ib] : amp_dim_of(1);
        AmpDim z;
        if (x.value >= 0 && y.value >= 0) {
            if (x.value != y.value && x.value != 1 && y.value != 1)
                return amp_inf_fail(n, st, "inputs do not broadcast: dim %lld against %lld",
                                    (long long)x.value, (long long)y.value);
            z = x.value == 1 ? y : x;
        } else if (x.value == 1) {
            z = y;
        } else if (y.value == 1) {
            z = x;
        } else if (x.value > 1) {
            z = x; /* the unknown side must be 1 or equal */
        } else if (y.value > 1) {
            z = y;
        } else if (same_param(x, y)) {
            z = x;
        } else {
            z = amp_dim_unknown();
        }
        out.d[i] = z;
    }
    amp_inf_copy(acc, &out);
    return AMP_OK;
}

/* ---- attributes ------------------------------------------------------------------------ */

int amp_inf_attr_ints(const AmpNode *n, const char *name, int64_t *out, int max) {
    const AmpAttr *a = amp_node_attr(n, name);
    if (!a || a->type != AMP_ATTR_INTS || a->n_ints > (size_t)max) return -1;
    for (size_t i = 0; i < a->n_ints; i++) out[i] = a->ints[i];
    return (int)a->n_ints;
}

int amp_inf_axis(int64_t axis, int rank) {
    if (axis < -(int64_t)rank || axis >= rank) return -1;
    return (int)(axis < 0 ? axis + rank : axis);
}

bool amp_inf_from_input(const AmpNode *n, int64_t opset, int64_t since, int slot) {
    if (opset > 0) return opset >= since;
    return amp_inf_has_input(n, slot);
}

/* ---- the driver ------------------------------------------------------------------------ */

/* Initializers without a declared type take the tensor's; declared ones get their
 * unknown dims filled from it. */
static AmpCode seed_initializers(AmpGraph *g, AmpStatus *st) {
    AmpModel *m = g->model;
    /* Initializers are set only through amp_graph_add_initializer, which lists them. */
    for (size_t i = 0; i < g->n_initializers; i++) {
        AmpTensor *t = g->initializers[i];
        AmpValue *v = t && t->name ? amp_graph_lookup(g, t->name) : NULL;
        if (!v || v->graph != g || v->initializer != t || v->type.kind == AMP_TYPE_OTHER) continue;
        if (t->ndims > AMP_INF_MAX_RANK) continue;
        AmpInfShape s;
        s.rank = (int)t->ndims;
        for (size_t k = 0; k < t->ndims; k++) s.d[k] = amp_dim_of(t->dims[k]);
        AmpType ty = {AMP_TYPE_TENSOR, t->dtype, s.rank, s.d};
        if (v->type.kind == AMP_TYPE_NONE) {
            AmpDim *d = dims_copy(m, s.d, s.rank);
            if (s.rank > 0 && !d) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
            ty.dims = d;
            v->type = ty;
        } else if (v->type.kind == AMP_TYPE_TENSOR && (v->type.rank == s.rank || v->type.rank < 0)) {
            /* Only fill what is missing; a dtype clash is the verifier's to report. */
            if (v->type.dtype != AMP_DT_UNDEFINED) ty.dtype = v->type.dtype;
            AmpCode rc = amp_inf_merge(NULL, v, &ty, "initializer", st);
            if (rc) return rc;
        }
    }
    return AMP_OK;
}

static int graph_depth(const AmpGraph *g) {
    int d = 0;
    for (; g && d <= MAX_GRAPH_DEPTH; g = g->parent) d++;
    return d;
}

static bool handles_own_bodies(AmpOpId op) {
    return op == AMP_OP_If || op == AMP_OP_Loop || op == AMP_OP_Scan;
}

/* Bodies of ops that do not type them from the node (unknown ops, or graph attributes
 * of known ops): inferred with their inputs as declared. */
static AmpCode infer_attr_graphs(AmpNode *n, AmpStatus *st) {
    for (size_t i = 0; i < n->n_attrs; i++) {
        AmpAttr *a = &n->attrs[i];
        AmpCode rc;
        if (a->g && (rc = amp_infer_graph(a->g, st))) return rc;
        for (size_t k = 0; k < a->n_graphs; k++)
            if (a->graphs[k] && (rc = amp_infer_graph(a->graphs[k], st))) return rc;
    }
    return AMP_OK;
}

AmpCode amp_infer_graph(AmpGraph *g, AmpStatus *st) {
    if (graph_depth(g) > MAX_GRAPH_DEPTH)
        return amp_fail(st, AMP_ERR_UNSUPPORTED, "graph '%s': subgraphs nested deeper than %d",
                        g->name ? g->name : "", MAX_GRAPH_DEPTH);
    AmpModel *m = g->model;
    AmpCode rc = seed_initializers(g, st);
    if (rc) return rc;
    /* The opset of the last domain seen: nodes of one domain come in long runs (and
     * mostly share one copy of its name). */
    const char *last_domain = NULL;
    int64_t last_opset = 0;
    for (AmpNode *n = g->first; n; n = n->next) {
        const char *dom = n->domain ? n->domain : "";
        if (dom != last_domain && (!last_domain || strcmp(dom, last_domain) != 0)) {
            last_domain = dom;
            last_opset = amp_model_opset(m, dom);
        }
        if (!handles_own_bodies(n->op) && n->n_attrs && (rc = infer_attr_graphs(n, st)))
            return rc;
        const AmpOpInfo *info = amp_op_info(n->op);
        if (!info->infer) continue;
        AmpInferCtx c;
        amp_inf_ctx_graph(&c, n, last_opset, st);
        if ((rc = info->infer(&c))) return rc;
    }
    return AMP_OK;
}

AmpCode amp_infer_node(AmpNode *n, AmpStatus *st) {
    const AmpOpInfo *info = amp_op_info(n->op);
    if (!info->infer) return AMP_OK;
    AmpInferCtx c;
    amp_inf_ctx_graph(&c, n, amp_model_opset(n->graph->model, n->domain), st);
    return info->infer(&c);
}

AmpCode amp_infer_model(AmpModel *m, AmpStatus *st) {
    AmpCode rc = m->graph ? amp_infer_graph(m->graph, st) : AMP_OK;
    for (size_t i = 0; !rc && i < m->n_training; i++) {
        AmpTrainingInfo *ti = &m->training[i];
        if (ti->initialization) rc = amp_infer_graph(ti->initialization, st);
        if (!rc && ti->algorithm) rc = amp_infer_graph(ti->algorithm, st);
    }
    return rc;
}
