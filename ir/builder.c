/* The graph builder (builder.h): nodes made, named, placed and typed one call at a time,
 * the first error kept. */
#include "ir/builder.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ir/half.h"

void amp_builder_init(AmpBuilder *b, AmpGraph *g, const char *prefix) {
    *b = (AmpBuilder){.g = g, .prefix = prefix ? prefix : ""};
    b->opset = amp_model_opset(g->model, "");
}

AmpCode amp_builder_fail(AmpBuilder *b, AmpCode code, const char *fmt, ...) {
    if (b->st.code) return b->st.code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->st.msg, sizeof b->st.msg, fmt, ap);
    va_end(ap);
    b->st.code = code;
    return code;
}

AmpCode amp_builder_status(const AmpBuilder *b, AmpStatus *st) {
    if (b->st.code && st && !st->code) *st = b->st;
    return b->st.code;
}

static void *oom(AmpBuilder *b) {
    amp_builder_fail(b, AMP_ERR_INTERNAL, "out of memory building node %zu under '%s'", b->n_nodes, b->prefix);
    return NULL;
}

/* prefix + what, in the arena; NULL when out of memory, or when what is NULL (a name the
 * caller could not make), which every caller reports as out of memory. */
static const char *prefixed(AmpBuilder *b, const char *what) {
    if (!what) return NULL;
    size_t np = strlen(b->prefix), nw = strlen(what);
    char *s = amp_arena_alloc(&b->g->model->arena, np + nw + 1);
    if (!s) return NULL;
    memcpy(s, b->prefix, np);
    memcpy(s + np, what, nw + 1);
    return s;
}

/* Places n (made by this builder) where b puts new nodes. */
static void place(AmpBuilder *b, AmpNode *n) {
    if (b->before)
        amp_node_insert_before(b->before, n);
    else
        amp_node_append(b->g, n);
    n->origin = (uint8_t)b->origin;
    b->n_nodes++;
}

/* A node writing out0 (then n_out - 1 fresh values), named `name` (NULL: out0's name). */
static AmpNode *start_at(AmpBuilder *b, const char *op, const char *name, AmpValue *out0, AmpValue *const *in,
                         int n_in, int n_out) {
    AmpGraph *g = b->g;
    AmpNode *n = out0 ? amp_node_new(g, "", op, name ? name : out0->name, n_in, n_out) : NULL;
    if (!n) return oom(b);
    for (int i = 0; i < n_in; i++)
        if (in[i] && amp_node_set_input(n, i, in[i])) return oom(b);
    amp_node_set_output(n, 0, out0);
    for (int k = 1; k < n_out; k++) {
        AmpValue *v = amp_graph_new_value(g, out0->name);
        if (!v) return oom(b);
        amp_node_set_output(n, k, v);
    }
    place(b, n);
    return n;
}

static AmpNode *start(AmpBuilder *b, const char *op, const char *exact, const char *what, AmpValue *const *in,
                      int n_in, int n_out) {
    if (!amp_builder_ok(b)) return NULL;
    AmpGraph *g = b->g;
    AmpValue *out0;
    if (exact) {
        bool taken = amp_graph_lookup(g, exact) != NULL;
        const char *unique = taken ? NULL : amp_graph_unique_name(g, exact);
        if (!taken && !unique) return oom(b);
        if (taken || strcmp(unique, exact) != 0) {
            amp_builder_fail(b, AMP_ERR_INPUT, "cannot name a new value '%s': the model uses that name already", exact);
            return NULL;
        }
        out0 = amp_graph_value(g, exact);
    } else {
        const char *base = prefixed(b, what);
        out0 = base ? amp_graph_new_value(g, base) : NULL;
    }
    return start_at(b, op, NULL, out0, in, n_in, n_out);
}

AmpNode *amp_build_start(AmpBuilder *b, const char *op, const char *what, AmpValue *const *in, int n_in,
                         int n_out) {
    return start(b, op, NULL, what, in, n_in, n_out);
}

AmpNode *amp_build_start_named(AmpBuilder *b, const char *op, const char *name, AmpValue *const *in, int n_in,
                               int n_out) {
    return start(b, op, name, NULL, in, n_in, n_out);
}

AmpNode *amp_build_start_to(AmpBuilder *b, const char *op, const char *what, AmpValue *const *in, int n_in,
                            AmpValue *out) {
    if (!amp_builder_ok(b)) return NULL;
    const char *name = prefixed(b, what);
    return name ? start_at(b, op, name, out, in, n_in, 1) : oom(b);
}

void amp_builder_place_after(AmpBuilder *b, AmpNode *n) {
    b->before = n ? n->next : b->g->first;
}

AmpValue *amp_build_value(AmpBuilder *b, const char *base) {
    if (!amp_builder_ok(b)) return NULL;
    AmpValue *v = base ? amp_graph_new_value(b->g, base) : NULL;
    return v ? v : oom(b);
}

AmpValue *amp_build_end(AmpBuilder *b, AmpNode *n) {
    if (!n || !amp_builder_ok(b)) return NULL;
    AmpStatus st = {AMP_OK, ""};
    if (amp_infer_node(n, &st)) {
        amp_builder_fail(b, st.code, "%s", st.msg);
        return NULL;
    }
    return n->outputs[0];
}

static AmpAttr *attr(AmpBuilder *b, AmpNode *n, const char *name, int type) {
    if (!n || !amp_builder_ok(b)) return NULL;
    AmpAttr *a = amp_node_add_attr(n, name, type);
    if (!a) return oom(b);
    return a;
}

void amp_build_attr_int(AmpBuilder *b, AmpNode *n, const char *name, int64_t v) {
    AmpAttr *a = attr(b, n, name, AMP_ATTR_INT);
    if (a) a->i = v, a->has |= AMP_ATTR_HAS_I;
}

void amp_build_attr_float(AmpBuilder *b, AmpNode *n, const char *name, float v) {
    AmpAttr *a = attr(b, n, name, AMP_ATTR_FLOAT);
    if (a) a->f = v, a->has |= AMP_ATTR_HAS_F;
}

void amp_build_attr_ints(AmpBuilder *b, AmpNode *n, const char *name, const int64_t *v, size_t count) {
    AmpAttr *a = attr(b, n, name, AMP_ATTR_INTS);
    if (!a) return;
    a->ints = amp_arena_memdup(&b->g->model->arena, v, (count ? count : 1) * sizeof *v);
    if (!a->ints) {
        oom(b);
        return;
    }
    a->n_ints = count;
}

void amp_build_attr_string(AmpBuilder *b, AmpNode *n, const char *name, const char *v) {
    AmpAttr *a = attr(b, n, name, AMP_ATTR_STRING);
    if (!a) return;
    const char *s = amp_arena_strdup(&b->g->model->arena, v);
    if (!s) {
        oom(b);
        return;
    }
    a->s = (AmpBytes){(const uint8_t *)s, strlen(s)};
    a->has |= AMP_ATTR_HAS_S;
}

AmpValue *amp_build1(AmpBuilder *b, const char *op, const char *what, AmpValue *x) {
    AmpValue *in[1] = {x};
    return amp_build_end(b, amp_build_start(b, op, what, in, 1, 1));
}

AmpValue *amp_build2(AmpBuilder *b, const char *op, const char *what, AmpValue *x, AmpValue *y) {
    AmpValue *in[2] = {x, y};
    return amp_build_end(b, amp_build_start(b, op, what, in, 2, 1));
}

/* A tensor of dtype, dims[0..rank), from `bytes` (copied), in the model's arena. */
static AmpTensor *tensor(AmpBuilder *b, int dtype, int rank, const int64_t *dims, const void *bytes, size_t len,
                         uint64_t nelem) {
    AmpArena *ar = &b->g->model->arena;
    AmpTensor *t = amp_arena_calloc(ar, 1, sizeof *t);
    int64_t *d = amp_arena_calloc(ar, rank ? (size_t)rank : 1, sizeof *d);
    void *raw = amp_arena_memdup(ar, bytes, len ? len : 1);
    if (!t || !d || !raw) return oom(b);
    if (rank) memcpy(d, dims, (size_t)rank * sizeof *d);
    t->dtype = dtype;
    t->has = AMP_TENSOR_HAS_DTYPE | AMP_TENSOR_HAS_RAW;
    t->ndims = (size_t)rank;
    t->dims = d;
    t->nelem = nelem;
    t->raw = (AmpBytes){raw, len};
    return t;
}

/* A Constant whose `value` is that tensor. */
static AmpValue *constant(AmpBuilder *b, const char *exact, const char *what, int dtype, int rank,
                          const int64_t *dims, const void *bytes, size_t len, uint64_t nelem) {
    AmpNode *n = start(b, "Constant", exact, what, NULL, 0, 1);
    AmpAttr *a = attr(b, n, "value", AMP_ATTR_TENSOR);
    if (!a || !(a->t = tensor(b, dtype, rank, dims, bytes, len, nelem))) return NULL;
    return amp_build_end(b, n);
}

/* The bytes of one element of dtype holding v; 0 when dtype has no such form. */
static size_t element(int dtype, double v, uint8_t buf[8]) {
    switch (dtype) {
    case AMP_DT_FLOAT: {
        float f = (float)v;
        memcpy(buf, &f, sizeof f);
        return sizeof f;
    }
    case AMP_DT_DOUBLE: memcpy(buf, &v, sizeof v); return sizeof v;
    case AMP_DT_FLOAT16:
    case AMP_DT_BFLOAT16: {
        uint16_t h = dtype == AMP_DT_FLOAT16 ? amp_f32_to_f16((float)v) : amp_f32_to_bf16((float)v);
        memcpy(buf, &h, sizeof h);
        return sizeof h;
    }
    case AMP_DT_INT64: {
        int64_t i = (int64_t)v;
        memcpy(buf, &i, sizeof i);
        return sizeof i;
    }
    case AMP_DT_INT32: {
        int32_t i = (int32_t)v;
        memcpy(buf, &i, sizeof i);
        return sizeof i;
    }
    case AMP_DT_BOOL: buf[0] = v != 0; return 1;
    default: return 0;
    }
}

/* A scalar constant named exactly `exact`, else prefix+what. */
static AmpValue *scalar(AmpBuilder *b, const char *exact, const char *what, int dtype, double v) {
    uint8_t buf[8];
    size_t len = element(dtype, v, buf);
    if (!len) {
        const char *pre = exact || !b->prefix ? "" : b->prefix, *label = exact ? exact : what ? what : "";
        amp_builder_fail(b, AMP_ERR_UNSUPPORTED, "no scalar constant of type %s (for '%s%s')", amp_dtype_name(dtype),
                         pre, label);
        return NULL;
    }
    return constant(b, exact, what, dtype, 0, NULL, buf, len, 1);
}

AmpValue *amp_build_scalar(AmpBuilder *b, const char *what, int dtype, double v) {
    return scalar(b, NULL, what, dtype, v);
}

AmpValue *amp_build_scalar_named(AmpBuilder *b, const char *name, int dtype, double v) {
    return scalar(b, name, NULL, dtype, v);
}

AmpValue *amp_build_state(AmpBuilder *b, const char *name, int dtype, double v, bool with_init) {
    if (!amp_builder_ok(b)) return NULL;
    uint8_t buf[8];
    size_t len = element(dtype, v, buf);
    if (!len) {
        amp_builder_fail(b, AMP_ERR_UNSUPPORTED, "no scalar state of type %s ('%s')", amp_dtype_name(dtype), name);
        return NULL;
    }
    AmpValue *s = amp_graph_value(b->g, name);
    AmpTensor *t = s && with_init ? tensor(b, dtype, 0, NULL, buf, len, 1) : NULL;
    if (!s || (with_init && !t)) return oom(b);
    s->type = (AmpType){.kind = AMP_TYPE_TENSOR, .dtype = dtype, .rank = 0, .dims = NULL};
    if ((t && amp_graph_add_initializer(b->g, s, t)) || !amp_graph_add_input(b->g, s)) return oom(b);
    return s;
}

AmpValue *amp_build_ints(AmpBuilder *b, const char *what, const int64_t *v, size_t count) {
    int64_t dim = (int64_t)count;
    return constant(b, NULL, what, AMP_DT_INT64, 1, &dim, v, count * sizeof *v, count);
}

AmpValue *amp_build_reduce(AmpBuilder *b, const char *op, const char *what, AmpValue *x, const int64_t *axes,
                           size_t count, int keepdims) {
    bool as_input = b->opset >= (strcmp(op, "ReduceSum") == 0 ? 13 : 18);
    AmpValue *in[2] = {x, NULL};
    if (as_input && count && !(in[1] = amp_build_ints(b, what, axes, count))) return NULL;
    AmpNode *n = amp_build_start(b, op, what, in, in[1] ? 2 : 1, 1);
    if (!as_input && count) amp_build_attr_ints(b, n, "axes", axes, count);
    amp_build_attr_int(b, n, "keepdims", keepdims);
    return amp_build_end(b, n);
}

AmpValue *amp_build_axes_op(AmpBuilder *b, const char *op, const char *what, AmpValue *x, const int64_t *axes,
                            size_t count) {
    if (b->opset >= 13) return amp_build2(b, op, what, x, amp_build_ints(b, what, axes, count));
    AmpValue *in[1] = {x};
    AmpNode *n = amp_build_start(b, op, what, in, 1, 1);
    amp_build_attr_ints(b, n, "axes", axes, count);
    return amp_build_end(b, n);
}

/* Cast x to dtype into out, the node named `name`. */
static AmpValue *cast(AmpBuilder *b, const char *name, AmpValue *x, AmpValue *out, int dtype) {
    AmpNode *n = name && out ? amp_node_new_cast(b->g, name, x, out, dtype) : NULL;
    if (!n) return oom(b);
    place(b, n);
    return amp_build_end(b, n);
}

AmpValue *amp_build_cast(AmpBuilder *b, const char *what, AmpValue *x, int dtype) {
    if (!amp_builder_ok(b)) return NULL;
    const char *base = prefixed(b, what);
    AmpValue *out = base ? amp_graph_new_value(b->g, base) : NULL;
    return cast(b, out ? out->name : NULL, x, out, dtype);
}

AmpValue *amp_build_cast_to(AmpBuilder *b, const char *what, AmpValue *x, AmpValue *out, int dtype) {
    if (!amp_builder_ok(b)) return NULL;
    return cast(b, prefixed(b, what), x, out, dtype);
}

AmpValue *amp_build_transpose(AmpBuilder *b, const char *what, AmpValue *x, const int64_t *perm, size_t count) {
    AmpValue *in[1] = {x};
    AmpNode *n = amp_build_start(b, "Transpose", what, in, 1, 1);
    amp_build_attr_ints(b, n, "perm", perm, count);
    return amp_build_end(b, n);
}

bool amp_value_const_ints(AmpValue *v, int64_t *out, size_t max, size_t *count) {
    AmpTensor *t = NULL;
    if (!v) return false;
    if (v->flags & AMP_VALUE_INITIALIZER)
        t = v->initializer;
    else if (v->producer && v->producer->op == AMP_OP_Constant) {
        const AmpAttr *a = amp_node_attr(v->producer, "value");
        t = a ? a->t : NULL;
    }
    if (!t || (t->dtype != AMP_DT_INT64 && t->dtype != AMP_DT_INT32)) return false;
    AmpBytes bytes;
    AmpStatus st = {AMP_OK, ""};
    if (amp_tensor_bytes(v->graph->model, t, &bytes, &st)) return false;
    size_t size = t->dtype == AMP_DT_INT64 ? 8 : 4;
    if (bytes.len != t->nelem * size) return false;
    *count = (size_t)t->nelem;
    for (size_t i = 0; i < *count && i < max; i++) {
        if (size == 8) {
            memcpy(&out[i], bytes.data + 8 * i, 8);
        } else {
            int32_t w;
            memcpy(&w, bytes.data + 4 * i, 4);
            out[i] = w;
        }
    }
    return true;
}

AmpValue *amp_build_fill(AmpBuilder *b, const char *what, AmpValue *shape, int dtype, double v) {
    uint8_t buf[8];
    size_t len = element(dtype, v, buf);
    AmpValue *in[1] = {shape};
    AmpNode *n = len ? amp_build_start(b, "ConstantOfShape", what, in, 1, 1) : NULL;
    AmpAttr *a = attr(b, n, "value", AMP_ATTR_TENSOR);
    if (!len) amp_builder_fail(b, AMP_ERR_UNSUPPORTED, "no fill of type %s", amp_dtype_name(dtype));
    if (!a) return NULL;
    AmpArena *ar = &b->g->model->arena;
    AmpTensor *t = amp_arena_calloc(ar, 1, sizeof *t);
    int64_t *d = amp_arena_calloc(ar, 1, sizeof *d);
    void *raw = amp_arena_memdup(ar, buf, len);
    if (!t || !d || !raw) return oom(b);
    d[0] = 1;
    *t = (AmpTensor){.dtype = dtype, .has = AMP_TENSOR_HAS_DTYPE | AMP_TENSOR_HAS_RAW, .ndims = 1, .dims = d,
                     .nelem = 1, .raw = {raw, len}};
    a->t = t;
    return amp_build_end(b, n);
}
