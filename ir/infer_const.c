/* Reading the small int64 tensors that shapes depend on (Reshape targets, axes, pads,
 * Slice bounds): from initializers and Constant nodes, and through the cheap shape
 * arithmetic exporters emit (Shape -> Gather -> Unsqueeze -> Concat -> Reshape). */
#include <math.h>
#include <string.h>

#include "ir/infer_impl.h"

/* Each top-level read follows at most this many producers, so inference stays linear
 * in the graph whatever the shape arithmetic looks like. */
#define EVAL_BUDGET 64

AmpTensor *amp_inf_constant_tensor(const AmpNode *c) {
    const AmpAttr *a = amp_node_attr(c, "value");
    return a && a->type == AMP_ATTR_TENSOR ? a->t : NULL;
}

/* An initializer that is also a graph input is only a default: it can be fed, so its
 * contents say nothing about the shapes. */
static AmpTensor *const_tensor_of(const AmpValue *v) {
    if (v->initializer) return (v->flags & AMP_VALUE_INPUT) ? NULL : v->initializer;
    if (v->producer && v->producer->op == AMP_OP_Constant) return amp_inf_constant_tensor(v->producer);
    return NULL;
}

static int64_t read_le(const uint8_t *p, size_t w) {
    uint64_t u = 0;
    for (size_t b = 0; b < w; b++) u |= (uint64_t)p[b] << (8 * b);
    if (w == 4) return (int64_t)(int32_t)(uint32_t)u;
    return (int64_t)u;
}

/* The element bytes of a small int64, int32, float or double tensor (w bytes each) in
 * place, as amp_tensor_bytes gives them but without its copy of typed fields into the
 * model's arena: concrete mode (shape.c) may run on every step, from several threads,
 * and must leave the model as it is. Hosts are little-endian (ir/dtype.c). */
static bool elem_bytes(const AmpTensor *t, size_t w, AmpBytes *b) {
    if ((t->has & AMP_TENSOR_HAS_RAW) || t->is_external) {
        *b = t->raw;
    } else if (t->dtype == AMP_DT_INT64 && t->n_int64 >= t->nelem) {
        *b = (AmpBytes){(const uint8_t *)t->int64_data, t->n_int64 * sizeof *t->int64_data};
    } else if (t->dtype == AMP_DT_INT32 && t->n_int32 >= t->nelem) {
        *b = (AmpBytes){(const uint8_t *)t->int32_data, t->n_int32 * sizeof *t->int32_data};
    } else if (t->dtype == AMP_DT_FLOAT && t->n_float >= t->nelem) {
        *b = (AmpBytes){(const uint8_t *)t->float_data, t->n_float * sizeof *t->float_data};
    } else if (t->dtype == AMP_DT_DOUBLE && t->n_double >= t->nelem) {
        *b = (AmpBytes){(const uint8_t *)t->double_data, t->n_double * sizeof *t->double_data};
    } else {
        return false;
    }
    return (!t->nelem || b->data) && b->len >= t->nelem * w;
}

static int tensor_ints(const AmpTensor *t, AmpInfVal *out, int max) {
    size_t w = t->dtype == AMP_DT_INT64 ? 8 : t->dtype == AMP_DT_INT32 ? 4 : 0;
    if (!w || t->ndims > 1 || t->nelem > (uint64_t)max) return -1;
    AmpBytes b;
    if (!elem_bytes(t, w, &b)) return -1;
    for (uint64_t i = 0; i < t->nelem; i++)
        out[i] = (AmpInfVal){true, read_le(b.data + i * w, w), NULL};
    return (int)t->nelem;
}

static int vdtype(AmpInferCtx *c, const AmpValue *v) {
    const AmpType *t = amp_inf_vtensor(c, v);
    return t ? t->dtype : AMP_DT_UNDEFINED;
}

static int eval(AmpInferCtx *c, const AmpValue *v, AmpInfVal *out, int max, int *budget);

static int eval_known(AmpInferCtx *c, const AmpValue *v, int64_t *out, int max, int *budget) {
    AmpInfVal tmp[AMP_INF_MAX_RANK];
    if (max > AMP_INF_MAX_RANK) max = AMP_INF_MAX_RANK;
    int k = eval(c, v, tmp, max, budget);
    for (int i = 0; i < k; i++) {
        if (!tmp[i].known) return -1;
        out[i] = tmp[i].v;
    }
    return k;
}

static int eval_shape(AmpInferCtx *c, const AmpNode *p, AmpInfVal *out, int max) {
    const AmpType *t = amp_inf_vtensor(c, p->n_inputs ? p->inputs[0] : NULL);
    if (!t || t->rank < 0) return -1;
    int64_t r = t->rank, start = amp_node_attr_int(p, "start", 0), end = amp_node_attr_int(p, "end", r);
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = start < 0 ? 0 : start > r ? r : start;
    end = end < 0 ? 0 : end > r ? r : end;
    if (end - start > max) return -1;
    int k = 0;
    for (int64_t i = start; i < end; i++, k++) {
        AmpDim d = t->dims[i];
        out[k] = d.value >= 0 ? (AmpInfVal){true, d.value, NULL} : (AmpInfVal){false, 0, d.param};
    }
    return k;
}

static int eval_gather(AmpInferCtx *c, const AmpNode *p, AmpInfVal *out, int max, int *budget) {
    AmpInfVal data[AMP_INF_MAX_RANK];
    int64_t idx[AMP_INF_MAX_RANK];
    int64_t axis = amp_node_attr_int(p, "axis", 0);
    if ((axis != 0 && axis != -1) || !amp_inf_has_input(p, 1)) return -1;
    int nd = eval(c, p->inputs[0], data, AMP_INF_MAX_RANK, budget);
    int ni = eval_known(c, p->inputs[1], idx, max, budget);
    if (nd < 0 || ni < 0) return -1;
    for (int i = 0; i < ni; i++) {
        int64_t j = idx[i] < 0 ? idx[i] + nd : idx[i];
        if (j < 0 || j >= nd) return -1;
        out[i] = data[j];
    }
    return ni;
}

/* 1-D Slice; bounds from inputs (opset 10+) or attributes (older). */
static int eval_slice(AmpInferCtx *c, const AmpNode *p, AmpInfVal *out, int max, int *budget) {
    AmpInfVal data[AMP_INF_MAX_RANK];
    int64_t starts[1], ends[1], steps[1] = {1}, axes[1] = {0};
    int nd = eval(c, p->inputs[0], data, AMP_INF_MAX_RANK, budget);
    if (nd < 0) return -1;
    if (p->n_inputs >= 3) {
        if (!amp_inf_has_input(p, 1) || !amp_inf_has_input(p, 2) ||
            eval_known(c, p->inputs[1], starts, 1, budget) != 1 ||
            eval_known(c, p->inputs[2], ends, 1, budget) != 1)
            return -1;
        if (amp_inf_has_input(p, 3) && eval_known(c, p->inputs[3], axes, 1, budget) != 1) return -1;
        if (amp_inf_has_input(p, 4) && eval_known(c, p->inputs[4], steps, 1, budget) != 1) return -1;
    } else if (amp_inf_attr_ints(p, "starts", starts, 1) != 1 ||
               amp_inf_attr_ints(p, "ends", ends, 1) != 1) {
        return -1;
    } else if (amp_node_attr(p, "axes") && amp_inf_attr_ints(p, "axes", axes, 1) != 1) {
        return -1;
    }
    if ((axes[0] != 0 && axes[0] != -1) || steps[0] == 0) return -1;
    int64_t first, count;
    amp_slice_range(nd, starts[0], ends[0], steps[0], &first, &count);
    if (count > max) return -1;
    /* count elements lie inside [0, nd), so first + k * step stays in range */
    for (int64_t k = 0; k < count; k++) out[k] = data[first + k * steps[0]];
    return (int)count;
}

/* Add/Sub/Mul/Div of int vectors of equal length (or one of length 1). */
static int eval_arith(AmpInferCtx *c, const AmpNode *p, AmpInfVal *out, int max, int *budget) {
    AmpInfVal a[AMP_INF_MAX_RANK], b[AMP_INF_MAX_RANK];
    if (!amp_dtype_is_int(vdtype(c, p->inputs[0])) || !amp_inf_has_input(p, 1)) return -1;
    int na = eval(c, p->inputs[0], a, AMP_INF_MAX_RANK, budget);
    int nb = eval(c, p->inputs[1], b, AMP_INF_MAX_RANK, budget);
    if (na < 0 || nb < 0 || (na != nb && na != 1 && nb != 1)) return -1;
    if (na == 0 || nb == 0) return 0; /* broadcasting an empty vector gives an empty one */
    int n = na > nb ? na : nb;
    if (n > max) return -1;
    for (int i = 0; i < n; i++) {
        AmpInfVal x = a[na == 1 ? 0 : i], y = b[nb == 1 ? 0 : i];
        out[i] = (AmpInfVal){false, 0, NULL};
        if (!x.known || !y.known) continue;
        /* Shape arithmetic stays far inside +-2^31; anything larger is left unknown
         * rather than risking signed overflow. */
        const int64_t lim = (int64_t)1 << 31;
        if (x.v > lim || x.v < -lim || y.v > lim || y.v < -lim) continue;
        int64_t r;
        switch (p->op) {
        case AMP_OP_Add: r = x.v + y.v; break;
        case AMP_OP_Sub: r = x.v - y.v; break;
        case AMP_OP_Mul: r = x.v * y.v; break;
        default: /* Div: C truncation, as ONNX integer Div */
            if (y.v == 0) continue;
            r = x.v / y.v;
            break;
        }
        out[i] = (AmpInfVal){true, r, NULL};
    }
    return n;
}

static int eval(AmpInferCtx *c, const AmpValue *v, AmpInfVal *out, int max, int *budget) {
    if (!v || --*budget < 0) return -1;
    if (c->ints_of) { /* concrete mode: what the caller holds on the host comes first */
        int64_t tmp[AMP_INF_MAX_RANK];
        int k = c->ints_of(c, v, tmp, max < AMP_INF_MAX_RANK ? max : AMP_INF_MAX_RANK);
        if (k >= 0) {
            for (int i = 0; i < k; i++) out[i] = (AmpInfVal){true, tmp[i], NULL};
            return k;
        }
    }
    AmpTensor *t = const_tensor_of(v);
    if (t) return tensor_ints(t, out, max);
    const AmpNode *p = v->producer;
    if (!p || v->initializer || (v->flags & AMP_VALUE_INPUT)) return -1;
    switch (p->op) {
    case AMP_OP_Constant: {
        const AmpAttr *a;
        if ((a = amp_node_attr(p, "value_int")) && a->type == AMP_ATTR_INT && max >= 1) {
            out[0] = (AmpInfVal){true, a->i, NULL};
            return 1;
        }
        if ((a = amp_node_attr(p, "value_ints")) && a->type == AMP_ATTR_INTS &&
            a->n_ints <= (size_t)max) {
            for (size_t i = 0; i < a->n_ints; i++) out[i] = (AmpInfVal){true, a->ints[i], NULL};
            return (int)a->n_ints;
        }
        return -1;
    }
    case AMP_OP_Shape:
        return eval_shape(c, p, out, max);
    case AMP_OP_Cast:
        if (!p->n_inputs || !amp_dtype_is_int(vdtype(c, p->inputs[0]))) return -1;
        {
            int64_t to = amp_node_attr_int(p, "to", 0);
            if (to != AMP_DT_INT64 && to != AMP_DT_INT32) return -1;
        }
        return eval(c, p->inputs[0], out, max, budget);
    case AMP_OP_Identity:
    case AMP_OP_Squeeze:
    case AMP_OP_Unsqueeze:
    case AMP_OP_Reshape:
    case AMP_OP_Flatten: /* row-major order is unchanged */
        return p->n_inputs ? eval(c, p->inputs[0], out, max, budget) : -1;
    case AMP_OP_Concat: {
        int k = 0;
        for (int i = 0; i < p->n_inputs; i++) {
            int got = eval(c, p->inputs[i], out + k, max - k, budget);
            if (got < 0) return -1;
            k += got;
        }
        return k;
    }
    case AMP_OP_Size: {
        const AmpType *t = amp_inf_vtensor(c, p->n_inputs ? p->inputs[0] : NULL);
        int64_t prod = 1;
        if (!t || t->rank < 0 || max < 1) return -1;
        for (int i = 0; i < t->rank; i++) {
            if (t->dims[i].value < 0 || (t->dims[i].value && prod > INT64_MAX / t->dims[i].value)) return -1;
            prod *= t->dims[i].value;
        }
        out[0] = (AmpInfVal){true, prod, NULL};
        return 1;
    }
    case AMP_OP_ConstantOfShape: { /* small filled vectors, e.g. a run of 1s */
        int64_t shape[1];
        AmpInfVal fill = {true, 0, NULL};
        const AmpAttr *a = amp_node_attr(p, "value");
        if (a && a->type == AMP_ATTR_TENSOR && a->t &&
            tensor_ints(a->t, &fill, 1) != 1)
            return -1;
        if (!amp_inf_has_input(p, 0) || eval_known(c, p->inputs[0], shape, 1, budget) != 1 ||
            shape[0] < 0 || shape[0] > max)
            return -1;
        for (int64_t i = 0; i < shape[0]; i++) out[i] = fill;
        return (int)shape[0];
    }
    case AMP_OP_Neg: {
        int k = p->n_inputs ? eval(c, p->inputs[0], out, max, budget) : -1;
        for (int i = 0; i < k; i++)
            if (out[i].known) {
                if (out[i].v == INT64_MIN) return -1;
                out[i].v = -out[i].v;
            } else {
                out[i].param = NULL;
            }
        return k;
    }
    case AMP_OP_Gather:
        return eval_gather(c, p, out, max, budget);
    case AMP_OP_Slice:
        return p->n_inputs ? eval_slice(c, p, out, max, budget) : -1;
    case AMP_OP_Add:
    case AMP_OP_Sub:
    case AMP_OP_Mul:
    case AMP_OP_Div:
        return p->n_inputs ? eval_arith(c, p, out, max, budget) : -1;
    default:
        return -1;
    }
}

int amp_inf_value_ints(AmpInferCtx *c, const AmpValue *v, AmpInfVal *out, int max) {
    int budget = EVAL_BUDGET;
    return eval(c, v, out, max, &budget);
}

int amp_inf_const_ints(AmpInferCtx *c, const AmpValue *v, int64_t *out, int max) {
    int budget = EVAL_BUDGET;
    return eval_known(c, v, out, max, &budget);
}

static int tensor_doubles(const AmpTensor *t, double *out, int max) {
    if (t->nelem > (uint64_t)max) return -1;
    size_t w = amp_dtype_bits(t->dtype) / 8;
    if (t->dtype != AMP_DT_FLOAT && t->dtype != AMP_DT_DOUBLE && t->dtype != AMP_DT_INT64 &&
        t->dtype != AMP_DT_INT32)
        return -1;
    AmpBytes b;
    if (!elem_bytes(t, w, &b)) return -1;
    for (uint64_t i = 0; i < t->nelem; i++) {
        const uint8_t *p = b.data + i * w;
        if (t->dtype == AMP_DT_FLOAT) {
            float f;
            uint32_t u = (uint32_t)read_le(p, 4);
            memcpy(&f, &u, 4);
            out[i] = f;
        } else if (t->dtype == AMP_DT_DOUBLE) {
            double d;
            uint64_t u = (uint64_t)read_le(p, 8);
            memcpy(&d, &u, 8);
            out[i] = d;
        } else {
            out[i] = (double)read_le(p, w);
        }
    }
    return (int)t->nelem;
}

/* Casts x to `to` as ONNX Cast does; false for targets it does not follow. */
static bool cast_double(double *x, int64_t to) {
    switch (to) {
    case AMP_DT_DOUBLE: return true;
    case AMP_DT_FLOAT: *x = (float)*x; return true;
    case AMP_DT_INT64:
    case AMP_DT_INT32:
        if (!(fabs(*x) < 9.0e15)) return false; /* NaN, or past exact integers */
        *x = trunc(*x);
        return true;
    default: return false;
    }
}

/* Constants as doubles, then integer shape arithmetic (Range(0, Gather(Shape(x), 1), 1)
 * as exporters write arange(seq_len)), then through Identity and Cast (a window
 * function's Range(0, Cast(size), 1)), a few steps deep. */
static int eval_doubles(AmpInferCtx *c, const AmpValue *v, double *out, int max, int depth) {
    if (!v || depth > 8) return -1;
    if (c->doubles_of) {
        int k = c->doubles_of(c, v, out, max);
        if (k >= 0) return k;
    }
    AmpTensor *t = const_tensor_of(v);
    if (t) return tensor_doubles(t, out, max);
    if (amp_dtype_is_int(vdtype(c, v))) {
        int64_t ints[AMP_INF_MAX_RANK];
        int k = amp_inf_const_ints(c, v, ints, max < AMP_INF_MAX_RANK ? max : AMP_INF_MAX_RANK);
        for (int i = 0; i < k; i++) out[i] = (double)ints[i];
        if (k >= 0) return k;
    }
    const AmpNode *p = v->producer;
    if (!p || v->initializer || (v->flags & AMP_VALUE_INPUT) || !p->n_inputs) return -1;
    if (p->op == AMP_OP_Identity) return eval_doubles(c, p->inputs[0], out, max, depth + 1);
    if (p->op != AMP_OP_Cast) return -1;
    const AmpAttr *to = amp_node_attr(p, "to");
    if (!to || to->type != AMP_ATTR_INT) return -1;
    int k = eval_doubles(c, p->inputs[0], out, max, depth + 1);
    for (int i = 0; i < k; i++)
        if (!cast_double(&out[i], to->i)) return -1;
    return k;
}

int amp_inf_const_doubles(AmpInferCtx *c, const AmpValue *v, double *out, int max) {
    return eval_doubles(c, v, out, max, 0);
}
