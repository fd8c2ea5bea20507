/* Type inference for control flow: If, Loop and Scan. Each infers its bodies first
 * (typing the body inputs from the node where the model left them untyped), then
 * types the node's outputs from the body outputs. */
#include <string.h>

#include "ir/infer_impl.h"

static AmpGraph *graph_attr(const AmpNode *n, const char *name) {
    const AmpAttr *a = amp_node_attr(n, name);
    return a && a->type == AMP_ATTR_GRAPH ? a->g : NULL;
}

static const AmpType *body_output(const AmpGraph *g, size_t i) {
    if (!g || i >= g->outputs.n || !g->outputs.items[i].value) return NULL;
    return &g->outputs.items[i].value->type;
}

/* The type that fits both a and b: the shared dtype, and per dim what both agree on
 * (If branches, and Loop state before and after an iteration). */
static AmpCode type_union(const AmpNode *n, const AmpType *a, const AmpType *b, int out_slot,
                          AmpInfShape *s, int *dtype, AmpStatus *st) {
    s->rank = -1;
    *dtype = AMP_DT_UNDEFINED;
    bool ta = a && a->kind == AMP_TYPE_TENSOR, tb = b && b->kind == AMP_TYPE_TENSOR;
    if (!ta || !tb) {
        const AmpType *one = ta ? a : tb ? b : NULL;
        if (one) *dtype = one->dtype; /* shape: unknown, the other side may differ */
        return AMP_OK;
    }
    if (a->dtype && b->dtype && a->dtype != b->dtype)
        return amp_inf_fail(n, st, "output %d is %s on one path and %s on the other", out_slot,
                            amp_dtype_name(a->dtype), amp_dtype_name(b->dtype));
    *dtype = a->dtype ? a->dtype : b->dtype;
    if (a->rank < 0 || a->rank != b->rank || a->rank > AMP_INF_MAX_RANK) return AMP_OK;
    s->rank = a->rank;
    for (int i = 0; i < a->rank; i++) {
        AmpDim x = a->dims[i], y = b->dims[i];
        bool same = (x.value >= 0 && x.value == y.value) ||
                    (x.value < 0 && y.value < 0 && x.param && y.param && strcmp(x.param, y.param) == 0);
        s->d[i] = same ? x : amp_dim_unknown();
    }
    return AMP_OK;
}

static AmpCode set_from_union(AmpInferCtx *c, int slot, const AmpType *a, const AmpType *b) {
    AmpInfShape s;
    int dt;
    AmpCode rc = type_union(c->n, a, b, slot, &s, &dt, c->st);
    return rc ? rc : amp_inf_set(c, slot, dt, &s);
}

AmpCode amp_infer_if(AmpInferCtx *c) {
    if (!c->graph_mode) return AMP_OK; /* bodies are typed in graph mode only */
    const AmpNode *n = c->n;
    AmpStatus *st = c->st;
    AmpGraph *then_g = graph_attr(n, "then_branch"), *else_g = graph_attr(n, "else_branch");
    AmpCode rc;
    if (then_g && (rc = amp_infer_graph(then_g, st))) return rc;
    if (else_g && (rc = amp_infer_graph(else_g, st))) return rc;
    for (int i = 0; i < n->n_outputs; i++) {
        const AmpType *a = body_output(then_g, (size_t)i), *b = body_output(else_g, (size_t)i);
        if (a && a->kind == AMP_TYPE_OTHER && (!b || b->kind != AMP_TYPE_TENSOR))
            rc = amp_inf_set_type(c, i, a); /* sequences and optionals pass as they are */
        else
            rc = set_from_union(c, i, a, b);
        if (rc) return rc;
    }
    return AMP_OK;
}

/* Types body input i from the node where the model gave none (or gave less). */
static AmpCode type_body_input(const AmpNode *n, AmpGraph *body, size_t i, int dtype, const AmpInfShape *s,
                               AmpStatus *st) {
    if (i >= body->inputs.n || !body->inputs.items[i].value) return AMP_OK;
    AmpType t = {AMP_TYPE_TENSOR, dtype, -1, NULL};
    if (s && s->rank >= 0) {
        t.rank = s->rank;
        t.dims = (AmpDim *)s->d;
    }
    return amp_inf_merge(n, body->inputs.items[i].value, &t, "body input", st);
}

/* Loop inputs (M, cond, v_initial...); body (iter_num, cond, v...) ->
 * (cond, v..., scan_out...); outputs (v_final..., scan_outputs...), each scan output
 * stacking the per-iteration values along a new leading dim of unknown length. */
AmpCode amp_infer_loop(AmpInferCtx *c) {
    if (!c->graph_mode) return AMP_OK; /* bodies are typed in graph mode only */
    const AmpNode *n = c->n;
    AmpStatus *st = c->st;
    AmpGraph *body = graph_attr(n, "body");
    if (!body) return AMP_OK;
    AmpCode rc;
    int ncarried = n->n_inputs - 2;
    if (ncarried < 0) ncarried = 0;
    if ((rc = type_body_input(n, body, 0, AMP_DT_INT64, NULL, st)) ||
        (rc = type_body_input(n, body, 1, AMP_DT_BOOL, NULL, st)))
        return rc;
    for (int i = 0; i < ncarried; i++) {
        const AmpType *t = amp_inf_in(c, 2 + i);
        /* dtype only: a loop-carried value may change shape between iterations */
        if (t && (rc = type_body_input(n, body, 2 + (size_t)i, t->dtype, NULL, st))) return rc;
    }
    if ((rc = amp_infer_graph(body, st))) return rc;
    for (int i = 0; i < n->n_outputs; i++) {
        const AmpType *b = body_output(body, 1 + (size_t)i);
        if (i < ncarried) {
            const AmpType *init = amp_inf_in(c, 2 + i);
            if (b && b->kind == AMP_TYPE_TENSOR && init) rc = set_from_union(c, i, b, init);
            else if (b) rc = amp_inf_set_type(c, i, b);
            else rc = set_from_union(c, i, init, NULL);
        } else if (b && b->kind == AMP_TYPE_TENSOR) {
            AmpInfShape s;
            s.rank = -1;
            if (b->rank >= 0 && b->rank < AMP_INF_MAX_RANK) {
                s.rank = b->rank + 1;
                s.d[0] = amp_dim_unknown();
                for (int k = 0; k < b->rank; k++) s.d[k + 1] = b->dims[k];
            }
            rc = amp_inf_set(c, i, b->dtype, &s);
        }
        if (rc) return rc;
    }
    return AMP_OK;
}

/* Scan (opset 9+): inputs (state..., scan_in...); body (state..., slice...) ->
 * (state..., slice_out...); outputs (state_final..., scan_out...). A slice drops the
 * scan axis of its input; a scan output inserts the sequence length at its axis.
 * Scan-8 (batched, with sequence_lens) gets dtypes only. */
AmpCode amp_infer_scan(AmpInferCtx *c) {
    if (!c->graph_mode) return AMP_OK; /* bodies are typed in graph mode only */
    const AmpNode *n = c->n;
    int64_t opset = c->opset;
    AmpStatus *st = c->st;
    AmpGraph *body = graph_attr(n, "body");
    if (!body) return AMP_OK;
    AmpCode rc;
    bool v8 = opset > 0 && opset < 9;
    int first = v8 ? 1 : 0; /* Scan-8's sequence_lens */
    int64_t m = amp_node_attr_int(n, "num_scan_inputs", 0);
    int nstate = n->n_inputs - first - (int)m;
    if (m <= 0 || nstate < 0)
        return amp_inf_fail(n, st, "num_scan_inputs %lld does not fit %d inputs", (long long)m, n->n_inputs);
    int64_t in_axes[AMP_INF_MAX_RANK], out_axes[AMP_INF_MAX_RANK];
    int kin = amp_inf_attr_ints(n, "scan_input_axes", in_axes, AMP_INF_MAX_RANK);
    int kout = amp_inf_attr_ints(n, "scan_output_axes", out_axes, AMP_INF_MAX_RANK);
    AmpDim seq = amp_dim_unknown();
    for (int i = 0; i < nstate + (int)m; i++) {
        AmpInfShape s;
        int slot = first + i;
        const AmpType *t = amp_inf_in(c, slot);
        if (!t) continue;
        amp_inf_shape(c, slot, &s);
        if (v8) {
            s.rank = -1;
        } else if (i >= nstate && s.rank >= 1) {
            int j = i - nstate;
            int ax = amp_inf_axis(j < kin ? in_axes[j] : 0, s.rank);
            if (ax < 0) return amp_inf_fail(n, st, "scan input axis out of range");
            if (j == 0) seq = s.d[ax];
            for (int k = ax; k + 1 < s.rank; k++) s.d[k] = s.d[k + 1];
            s.rank--;
        }
        if ((rc = type_body_input(n, body, (size_t)i, t->dtype, &s, st))) return rc;
    }
    if ((rc = amp_infer_graph(body, st))) return rc;
    for (int i = 0; i < n->n_outputs; i++) {
        const AmpType *b = body_output(body, (size_t)i);
        if (!b || b->kind != AMP_TYPE_TENSOR) continue;
        AmpInfShape s;
        s.rank = -1;
        if (!v8 && b->rank >= 0 && b->rank < AMP_INF_MAX_RANK) {
            if (i < nstate) {
                s.rank = b->rank;
                for (int k = 0; k < b->rank; k++) s.d[k] = b->dims[k];
            } else {
                int j = i - nstate;
                int ax = amp_inf_axis(j < kout ? out_axes[j] : 0, b->rank + 1);
                if (ax < 0) return amp_inf_fail(n, st, "scan output axis out of range");
                s.rank = b->rank + 1;
                for (int k = 0, src = 0; k < s.rank; k++) s.d[k] = k == ax ? seq : b->dims[src++];
            }
        }
        if ((rc = amp_inf_set(c, i, b->dtype, &s))) return rc;
    }
    return AMP_OK;
}
