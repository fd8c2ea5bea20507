/* Type inference for elementwise ops (unary, broadcasting, comparisons, Where,
 * Dropout) and for the ops that make values from attributes or shapes (Cast,
 * Constant, ConstantOfShape, Shape, Size, Range, OneHot, NonZero). */
#include <math.h>
#include <string.h>

#include "ir/range.h"
#include "ir/infer_impl.h"

/* Output 0 is exactly input 0's type (unary math, activations, Identity, Clip,
 * CumSum, normalisations, ScatterND, the *Grad ops of com.microsoft). Sequences and
 * other non-tensor types pass through too (Identity of a sequence). */
AmpCode amp_infer_same(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    if (!amp_inf_has_input(n, 0)) return AMP_OK;
    return amp_inf_set_type(c, 0, amp_inf_type(c, 0));
}

/* The broadcast of every input's shape; false when some input's shape is unknown. */
static AmpCode broadcast_all(AmpInferCtx *c, int first, int count, AmpInfShape *s) {
    const AmpNode *n = c->n;
    s->rank = -1;
    bool started = false;
    for (int i = first; i < first + count && i < n->n_inputs; i++) {
        AmpInfShape b;
        if (!amp_inf_shape(c, i, &b)) {
            s->rank = -1;
            return AMP_OK;
        }
        if (!started) {
            amp_inf_copy(s, &b);
            started = true;
            continue;
        }
        AmpCode rc = amp_inf_broadcast_into(n, s, &b, c->st);
        if (rc) return rc;
    }
    return AMP_OK;
}

/* The output shape of a two-input op before opset 7: B broadcasts to A only where the node
 * says broadcast=1 (and with `axis`, B's dims line up from that axis of A, which numpy's
 * rule would refuse), else the two shapes are equal; either way the result has A's shape.
 * *s is A's shape (rank -1 when unknown). Answers false for other opsets and arities. */
static bool legacy_broadcast(AmpInferCtx *c, AmpInfShape *s) {
    if (c->opset <= 0 || c->opset >= 7 || c->n->n_inputs != 2) return false;
    amp_inf_shape(c, 0, s);
    return true;
}

/* Add, Sub, Mul, Div, Pow, Sum, Mean, Max, Min: numpy broadcast, input 0's dtype
 * (Pow's exponent may have another type; the result has the base's). */
AmpCode amp_infer_broadcast(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    AmpInfShape s;
    AmpCode rc = legacy_broadcast(c, &s) ? AMP_OK : broadcast_all(c, 0, n->n_inputs, &s);
    if (rc) return rc;
    int dt = amp_inf_dtype(c, 0);
    for (int i = 1; dt == AMP_DT_UNDEFINED && i < n->n_inputs && n->op != AMP_OP_Pow; i++)
        dt = amp_inf_dtype(c, i);
    return amp_inf_set(c, 0, dt, &s);
}

/* Comparisons and And/Or: bool, broadcast shape. */
AmpCode amp_infer_compare(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    AmpInfShape s;
    AmpCode rc = legacy_broadcast(c, &s) ? AMP_OK : broadcast_all(c, 0, n->n_inputs, &s);
    if (rc) return rc;
    return amp_inf_set(c, 0, AMP_DT_BOOL, &s);
}

/* Not, IsInf, IsNaN: bool of input 0's shape. */
AmpCode amp_infer_bool_same(AmpInferCtx *c) {
    AmpInfShape s;
    amp_inf_shape(c, 0, &s);
    return amp_inf_set(c, 0, AMP_DT_BOOL, &s);
}

AmpCode amp_infer_where(AmpInferCtx *c) {
    AmpInfShape s;
    AmpCode rc = broadcast_all(c, 0, 3, &s);
    if (rc) return rc;
    int dt = amp_inf_dtype(c, 1);
    if (dt == AMP_DT_UNDEFINED) dt = amp_inf_dtype(c, 2);
    return amp_inf_set(c, 0, dt, &s);
}

/* Output 0 like the data; the optional mask (output 1) is bool of the same shape.
 * (Before opset 12 the ratio was an attribute; the shapes are the same.) */
AmpCode amp_infer_dropout(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    int64_t opset = c->opset;
    AmpCode rc = amp_infer_same(c);
    if (rc || n->n_outputs < 2) return rc;
    AmpInfShape s;
    amp_inf_shape(c, 0, &s);
    /* Dropout-1..9 have an output mask of the data's type (T in the schemas of opsets 1,
     * 6 and 7); bool since opset 10. */
    int dt = (opset > 0 && opset < 10) ? amp_inf_dtype(c, 0) : AMP_DT_BOOL;
    return amp_inf_set(c, 1, dt, &s);
}

/* Cast-1's `to` was a string such as "FLOAT16"; since Cast-6 it is the enum. */
static int cast_target(const AmpNode *n) {
    const AmpAttr *a = amp_node_attr(n, "to");
    if (!a) return AMP_DT_UNDEFINED;
    if (a->type == AMP_ATTR_INT) {
        return (a->i > 0 && a->i < AMP_DT__COUNT) ? (int)a->i : AMP_DT_UNDEFINED;
    }
    if (a->type == AMP_ATTR_STRING && a->s.data && a->s.len < 32) {
        char low[32];
        size_t i = 0;
        for (; i < a->s.len; i++) {
            char c = (char)a->s.data[i];
            low[i] = (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
        }
        low[i] = '\0';
        int dt = amp_dtype_from_name(low);
        return dt > 0 ? dt : AMP_DT_UNDEFINED;
    }
    return AMP_DT_UNDEFINED;
}

AmpCode amp_infer_cast(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    AmpInfShape s;
    amp_inf_shape(c, 0, &s);
    return amp_inf_set(c, 0, cast_target(n), &s);
}

AmpCode amp_infer_castlike(AmpInferCtx *c) {
    AmpInfShape s;
    amp_inf_shape(c, 0, &s);
    return amp_inf_set(c, 0, amp_inf_dtype(c, 1), &s);
}

static void shape_of_tensor(const AmpTensor *t, AmpInfShape *s) {
    s->rank = -1;
    if (t->ndims > AMP_INF_MAX_RANK) return;
    s->rank = (int)t->ndims;
    for (size_t i = 0; i < t->ndims; i++) s->d[i] = amp_dim_of(t->dims[i]);
}

/* Constant: the type of whichever value attribute it has. */
AmpCode amp_infer_constant(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    AmpInfShape s;
    AmpTensor *t = amp_inf_constant_tensor(n);
    if (t) {
        shape_of_tensor(t, &s);
        return amp_inf_set(c, 0, t->dtype, &s);
    }
    static const struct {
        const char *name;
        int type, dtype;
        bool list;
    } forms[] = {
        {"value_float", AMP_ATTR_FLOAT, AMP_DT_FLOAT, false},
        {"value_floats", AMP_ATTR_FLOATS, AMP_DT_FLOAT, true},
        {"value_int", AMP_ATTR_INT, AMP_DT_INT64, false},
        {"value_ints", AMP_ATTR_INTS, AMP_DT_INT64, true},
        {"value_string", AMP_ATTR_STRING, AMP_DT_STRING, false},
        {"value_strings", AMP_ATTR_STRINGS, AMP_DT_STRING, true},
    };
    for (size_t k = 0; k < sizeof forms / sizeof forms[0]; k++) {
        const AmpAttr *a = amp_node_attr(n, forms[k].name);
        if (!a || a->type != forms[k].type) continue;
        s.rank = forms[k].list ? 1 : 0;
        if (forms[k].list) {
            size_t cnt = a->type == AMP_ATTR_FLOATS ? a->n_floats
                         : a->type == AMP_ATTR_INTS ? a->n_ints
                                                    : a->n_strings;
            s.d[0] = amp_dim_of((int64_t)cnt);
        }
        return amp_inf_set(c, 0, forms[k].dtype, &s);
    }
    return AMP_OK; /* sparse_value or nothing: leave the declared type */
}

/* The shape an int64 shape-tensor input describes: its values where they can be
 * read, else just its length (from its static 1-D shape). */
void amp_inf_shape_from_value(AmpInferCtx *c, int slot, AmpInfShape *s) {
    const AmpNode *n = c->n;
    AmpInfVal vals[AMP_INF_MAX_RANK];
    s->rank = -1;
    if (!amp_inf_has_input(n, slot)) return;
    int k = amp_inf_value_ints(c, n->inputs[slot], vals, AMP_INF_MAX_RANK);
    if (k >= 0) {
        s->rank = k;
        for (int i = 0; i < k; i++) {
            if (vals[i].known && vals[i].v >= 0) s->d[i] = amp_dim_of(vals[i].v);
            else s->d[i] = (AmpDim){-1, vals[i].known ? NULL : vals[i].param};
        }
        return;
    }
    const AmpType *t = amp_inf_in(c, slot);
    if (t && t->rank == 1 && t->dims[0].value >= 0) amp_shape_unknown_dims(s, (int)t->dims[0].value);
}

AmpCode amp_infer_constant_of_shape(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    const AmpAttr *a = amp_node_attr(n, "value");
    int dt = (a && a->type == AMP_ATTR_TENSOR && a->t) ? a->t->dtype : AMP_DT_FLOAT;
    AmpInfShape s;
    amp_inf_shape_from_value(c, 0, &s);
    return amp_inf_set(c, 0, dt, &s);
}

/* Shape: int64 [rank], or [end - start] with the opset-15 start/end attributes. */
AmpCode amp_infer_shape(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    const AmpType *t = amp_inf_in(c, 0);
    AmpInfShape s;
    s.rank = 1;
    s.d[0] = amp_dim_unknown();
    if (t && t->rank >= 0) {
        int64_t r = t->rank, b = amp_node_attr_int(n, "start", 0), e = amp_node_attr_int(n, "end", r);
        if (b < 0) b += r;
        if (e < 0) e += r;
        b = b < 0 ? 0 : b > r ? r : b;
        e = e < 0 ? 0 : e > r ? r : e;
        s.d[0] = amp_dim_of(e > b ? e - b : 0);
    }
    return amp_inf_set(c, 0, AMP_DT_INT64, &s);
}

AmpCode amp_infer_size(AmpInferCtx *c) {
    AmpInfShape s;
    s.rank = 0;
    return amp_inf_set(c, 0, AMP_DT_INT64, &s);
}

/* Range: 1-D of max(ceil((limit - start) / delta), 0) elements, start's dtype. */
AmpCode amp_infer_range(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    AmpInfShape s;
    s.rank = 1;
    s.d[0] = amp_dim_unknown();
    int dt = amp_inf_dtype(c, 0);
    if (dt == AMP_DT_UNDEFINED) dt = amp_inf_dtype(c, 1);
    bool integer = dt == AMP_DT_INT64 || dt == AMP_DT_INT32 || dt == AMP_DT_INT16 || dt == AMP_DT_INT8;
    int64_t ia, ib, id;
    double a, b, delta;
    if (n->n_inputs < 3) {
    } else if (integer) { /* exact: ops/range.h, as the kernels count */
        if (amp_inf_const_ints(c, n->inputs[0], &ia, 1) == 1 && amp_inf_const_ints(c, n->inputs[1], &ib, 1) == 1 &&
            amp_inf_const_ints(c, n->inputs[2], &id, 1) == 1 && id != 0) {
            uint64_t cnt = amp_range_count_signed(ia, ib, id);
            if (cnt <= (UINT64_C(1) << 50)) s.d[0] = amp_dim_of((int64_t)cnt);
        }
    } else if (amp_inf_const_doubles(c, n->inputs[0], &a, 1) == 1 && amp_inf_const_doubles(c, n->inputs[1], &b, 1) == 1 &&
               amp_inf_const_doubles(c, n->inputs[2], &delta, 1) == 1 && delta != 0 && isfinite(a) && isfinite(b) &&
               isfinite(delta)) {
        int64_t cnt = amp_range_count_float(a, b, delta);
        if (cnt >= 0) s.d[0] = amp_dim_of(cnt);
    }
    return amp_inf_set(c, 0, dt, &s);
}

/* OneHot: indices' shape with `depth` inserted at `axis`; the values' dtype. */
AmpCode amp_infer_onehot(AmpInferCtx *c) {
    const AmpNode *n = c->n;
    AmpStatus *st = c->st;
    AmpInfShape in, s;
    s.rank = -1;
    if (amp_inf_shape(c, 0, &in) && in.rank < AMP_INF_MAX_RANK) {
        int ax = amp_inf_axis(amp_node_attr_int(n, "axis", -1), in.rank + 1);
        if (ax < 0) return amp_inf_fail(n, st, "axis out of range for rank %d", in.rank + 1);
        double depth;
        AmpDim dd = amp_dim_unknown();
        if (amp_inf_has_input(n, 1) && amp_inf_const_doubles(c, n->inputs[1], &depth, 1) == 1 &&
            depth >= 0 && depth < 9.0e15)
            dd = amp_dim_of((int64_t)depth);
        s.rank = in.rank + 1;
        for (int i = 0, k = 0; i < s.rank; i++) s.d[i] = i == ax ? dd : in.d[k++];
    }
    return amp_inf_set(c, 0, amp_inf_dtype(c, 2), &s);
}

/* NonZero: int64 [rank, number of non-zeros]. */
AmpCode amp_infer_nonzero(AmpInferCtx *c) {
    const AmpType *t = amp_inf_in(c, 0);
    AmpInfShape s;
    s.rank = 2;
    s.d[0] = t && t->rank >= 0 ? amp_dim_of(t->rank) : amp_dim_unknown();
    s.d[1] = amp_dim_unknown();
    return amp_inf_set(c, 0, AMP_DT_INT64, &s);
}
