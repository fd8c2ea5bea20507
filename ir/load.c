/* ONNX -> IR. protobuf-c parses the file; this file copies what the IR models into the
 * model's arena, validates every length, dim and offset on the way, and packs whatever
 * it does not model (unknown fields included) into `rest` blobs for the saver. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "extdata.h"
#include "ir.h"
#include "onnx.pb-c.h"
#include "proto.h"

/* The newest ai.onnx opset whose operator semantics ampc knows. */
#define AMP_MAX_ONNX_OPSET 23
/* Subgraph nesting deeper than this is treated as hostile. */
#define AMP_MAX_GRAPH_DEPTH 64
/* A tensor with more elements than this is rejected before any size arithmetic. */
#define AMP_MAX_NELEM (UINT64_C(1) << 60)
/* protobuf-c unpacks recursively without a depth limit; nesting deeper than this is
 * rejected by a pre-scan before it gets the chance to overflow the stack. */
#define AMP_MAX_PROTO_DEPTH 256
/* raw_data at least this big is taken over from protobuf-c rather than copied. */
#define AMP_STEAL_BYTES 4096

typedef struct LoadCtx {
    AmpModel *m;
    AmpStatus *st;
    int depth;
} LoadCtx;

static AmpArena *arena(LoadCtx *c) {
    return &c->m->arena;
}

static AmpCode oom(LoadCtx *c) {
    return amp_fail(c->st, AMP_ERR_INTERNAL, "out of memory");
}

/* Packs a message (usually a shallow copy with the modelled fields cleared) into the
 * arena. Empty when nothing is left, which is the common case. */
AmpBytes amp_proto_pack_rest(AmpArena *a, const ProtobufCMessage *msg) {
    AmpBytes b = {NULL, 0};
    size_t n = protobuf_c_message_get_packed_size(msg);
    if (n == 0) return b;
    uint8_t *buf = amp_arena_alloc(a, n);
    if (!buf) return b;
    protobuf_c_message_pack(msg, buf);
    b.data = buf;
    b.len = n;
    return b;
}

static char *sdup(LoadCtx *c, const char *s) {
    return amp_arena_strdup(arena(c), s);
}

/* ---- types ----------------------------------------------------------------------- */

AmpCode amp_proto_parse_type(AmpArena *a, const Onnx__TypeProto *tp, AmpType *out) {
    memset(out, 0, sizeof *out);
    out->rank = -1;
    if (!tp) return AMP_OK;
    if (tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type) {
        out->kind = tp->value_case == ONNX__TYPE_PROTO__VALUE__NOT_SET ? AMP_TYPE_NONE : AMP_TYPE_OTHER;
        return AMP_OK;
    }
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    out->kind = AMP_TYPE_TENSOR;
    out->dtype = tt->has_elem_type ? tt->elem_type : AMP_DT_UNDEFINED;
    if (!tt->shape) return AMP_OK;
    if (tt->shape->n_dim > INT32_MAX) return AMP_ERR_INPUT;
    out->rank = (int)tt->shape->n_dim;
    if (!out->rank) return AMP_OK;
    out->dims = amp_arena_calloc(a, tt->shape->n_dim, sizeof *out->dims);
    if (!out->dims) return AMP_ERR_INTERNAL;
    for (size_t i = 0; i < tt->shape->n_dim; i++) {
        const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
        out->dims[i].value = -1;
        if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
            out->dims[i].value = d->dim_value < 0 ? -1 : d->dim_value;
        else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM)
            out->dims[i].param = amp_arena_strdup(a, d->dim_param);
    }
    return AMP_OK;
}

static AmpType copy_type(AmpArena *a, const AmpType *t) {
    AmpType c = *t;
    if (t->rank > 0) {
        c.dims = amp_arena_memdup(a, t->dims, (size_t)t->rank * sizeof *t->dims);
        if (!c.dims) c.rank = -1;
    }
    return c;
}

/* ---- tensors --------------------------------------------------------------------- */

/* Strict decimal parse of an external_data offset/length. */
static bool parse_i64(const char *s, int64_t *out) {
    if (!s || !*s) return false;
    int64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return false;
        if (v > (INT64_MAX - (*s - '0')) / 10) return false;
        v = v * 10 + (*s - '0');
    }
    *out = v;
    return true;
}

/* How many entries of which typed field hold `nelem` elements of dtype. */
static size_t typed_count(const AmpTensor *t, uint64_t nelem, uint64_t *expect) {
    switch (t->dtype) {
    case AMP_DT_FLOAT: *expect = nelem; return t->n_float;
    case AMP_DT_COMPLEX64: *expect = 2 * nelem; return t->n_float;
    case AMP_DT_DOUBLE: *expect = nelem; return t->n_double;
    case AMP_DT_COMPLEX128: *expect = 2 * nelem; return t->n_double;
    case AMP_DT_INT64: *expect = nelem; return t->n_int64;
    case AMP_DT_UINT32:
    case AMP_DT_UINT64: *expect = nelem; return t->n_uint64;
    case AMP_DT_STRING: *expect = nelem; return t->n_string;
    case AMP_DT_UINT4:
    case AMP_DT_INT4:
    case AMP_DT_FLOAT4E2M1: *expect = (nelem + 1) / 2; return t->n_int32;
    default: *expect = nelem; return t->n_int32;
    }
}

static AmpCode load_tensor(LoadCtx *c, Onnx__TensorProto *tp, const char *where, AmpTensor **out) {
    AmpArena *a = arena(c);
    AmpTensor *t = amp_arena_alloc(a, sizeof *t);
    if (!t) return oom(c);
    const char *tname = tp->name ? tp->name : "";
    t->name = sdup(c, tp->name);
    t->doc_string = sdup(c, tp->doc_string);
    t->dtype = tp->has_data_type ? tp->data_type : AMP_DT_UNDEFINED;
    if (tp->has_data_type) t->has |= AMP_TENSOR_HAS_DTYPE;
    if (t->dtype < 0 || t->dtype >= AMP_DT__COUNT)
        return amp_fail(c->st, AMP_ERR_UNSUPPORTED, "%s: tensor '%s' has unknown data type %d", where,
                        tname, t->dtype);

    t->ndims = tp->n_dims;
    uint64_t nelem = 1;
    if (t->ndims) {
        t->dims = amp_arena_memdup(a, tp->dims, t->ndims * sizeof *t->dims);
        if (!t->dims) return oom(c);
    }
    for (size_t i = 0; i < t->ndims; i++) {
        if (tp->dims[i] < 0)
            return amp_fail(c->st, AMP_ERR_INPUT, "%s: tensor '%s' has negative dim %lld at axis %zu",
                            where, tname, (long long)tp->dims[i], i);
        uint64_t d = (uint64_t)tp->dims[i];
        if (d && nelem > AMP_MAX_NELEM / d)
            return amp_fail(c->st, AMP_ERR_INPUT,
                            "%s: tensor '%s' has dims whose product overflows (axis %zu)", where, tname, i);
        nelem *= d;
    }
    t->nelem = nelem;

    /* Typed fields: copied into the arena so the model owns them. */
#define COPY_FIELD(dst, n_dst, src, n_src)                                              \
    do {                                                                                \
        t->n_dst = tp->n_src;                                                           \
        if (tp->n_src) {                                                                \
            t->dst = amp_arena_memdup(a, tp->src, tp->n_src * sizeof *tp->src);         \
            if (!t->dst) return oom(c);                                                 \
        }                                                                               \
    } while (0)
    COPY_FIELD(float_data, n_float, float_data, n_float_data);
    COPY_FIELD(int32_data, n_int32, int32_data, n_int32_data);
    COPY_FIELD(int64_data, n_int64, int64_data, n_int64_data);
    COPY_FIELD(double_data, n_double, double_data, n_double_data);
    COPY_FIELD(uint64_data, n_uint64, uint64_data, n_uint64_data);
#undef COPY_FIELD
    if (tp->n_string_data) {
        t->n_string = tp->n_string_data;
        t->string_data = amp_arena_calloc(a, tp->n_string_data, sizeof *t->string_data);
        if (!t->string_data) return oom(c);
        for (size_t i = 0; i < tp->n_string_data; i++) {
            t->string_data[i].len = tp->string_data[i].len;
            t->string_data[i].data = amp_arena_memdup(a, tp->string_data[i].data, tp->string_data[i].len);
            if (tp->string_data[i].len && !t->string_data[i].data) return oom(c);
        }
    }
    if (tp->has_raw_data) {
        t->has |= AMP_TENSOR_HAS_RAW;
        t->raw.len = tp->raw_data.len;
        if (tp->raw_data.len >= AMP_STEAL_BYTES) {
            /* Big weights: take protobuf-c's buffer instead of copying it. */
            if (!amp_model_own(c->m, tp->raw_data.data)) return oom(c);
            t->raw.data = tp->raw_data.data;
            tp->raw_data.data = NULL;
        } else {
            t->raw.data = amp_arena_memdup(a, tp->raw_data.data, tp->raw_data.len);
            if (tp->raw_data.len && !t->raw.data) return oom(c);
        }
    }
    if (tp->has_data_location) {
        t->has |= AMP_TENSOR_HAS_LOCATION;
        t->data_location = tp->data_location;
    }
    if (tp->n_external_data) {
        t->n_external = tp->n_external_data;
        t->external = amp_arena_calloc(a, tp->n_external_data, sizeof *t->external);
        if (!t->external) return oom(c);
        for (size_t i = 0; i < tp->n_external_data; i++) {
            t->external[i].key = sdup(c, tp->external_data[i]->key);
            t->external[i].value = sdup(c, tp->external_data[i]->value);
        }
    }
    Onnx__TensorProto rest = *tp;
    rest.n_dims = 0, rest.has_data_type = 0, rest.n_float_data = 0, rest.n_int32_data = 0;
    rest.n_string_data = 0, rest.n_int64_data = 0, rest.name = NULL, rest.doc_string = NULL;
    rest.has_raw_data = 0, rest.n_external_data = 0, rest.has_data_location = 0;
    rest.n_double_data = 0, rest.n_uint64_data = 0;
    t->rest = amp_proto_pack_rest(a, &rest.base);

    /* Where is the data, and is there exactly as much as the dims say? */
    size_t need = 0;
    bool sized = amp_tensor_expected_bytes(t->dtype, nelem, &need);
    int forms = (t->has & AMP_TENSOR_HAS_RAW ? 1 : 0) + (t->n_float || t->n_int32 || t->n_int64 ||
                                                         t->n_double || t->n_uint64 || t->n_string);
    if (t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        const char *loc = NULL, *off = NULL, *len = NULL;
        for (size_t i = 0; i < t->n_external; i++) {
            const char *k = t->external[i].key ? t->external[i].key : "";
            if (strcmp(k, "location") == 0) loc = t->external[i].value;
            else if (strcmp(k, "offset") == 0) off = t->external[i].value;
            else if (strcmp(k, "length") == 0) len = t->external[i].value;
        }
        int64_t offset = 0, length = -1;
        if (!loc)
            return amp_fail(c->st, AMP_ERR_INPUT, "%s: tensor '%s' is external but has no location", where, tname);
        if ((off && !parse_i64(off, &offset)) || (len && !parse_i64(len, &length)))
            return amp_fail(c->st, AMP_ERR_INPUT, "%s: tensor '%s' has a malformed external offset/length",
                            where, tname);
        if (forms)
            return amp_fail(c->st, AMP_ERR_INPUT, "%s: tensor '%s' is external but also holds data inline",
                            where, tname);
        if (!sized)
            return amp_fail(c->st, AMP_ERR_UNSUPPORTED, "%s: tensor '%s': external %s data is not supported",
                            where, tname, amp_dtype_name(t->dtype));
        if (length < 0) length = (int64_t)need;
        if ((uint64_t)length != need)
            return amp_fail(c->st, AMP_ERR_INPUT,
                            "%s: tensor '%s' needs %zu bytes for its dims but external length is %lld",
                            where, tname, need, (long long)length);
        AmpCode rc = amp_extdata_map(c->m, loc, offset, length, &t->raw, c->st);
        if (rc) {
            amp_status_prefix(c->st, "%s: tensor '%s': ", where, tname);
            return rc;
        }
        t->is_external = true;
        *out = t;
        return AMP_OK;
    }
    if (forms > 1)
        return amp_fail(c->st, AMP_ERR_INPUT, "%s: tensor '%s' holds data in more than one field", where, tname);
    if (t->has & AMP_TENSOR_HAS_RAW) {
        if (!sized)
            return amp_fail(c->st, AMP_ERR_INPUT, "%s: tensor '%s': %s data cannot be raw_data", where, tname,
                            amp_dtype_name(t->dtype));
        if (t->raw.len != need)
            return amp_fail(c->st, AMP_ERR_INPUT,
                            "%s: tensor '%s' has %zu bytes of raw_data but its dims need %zu", where, tname,
                            t->raw.len, need);
    } else if (forms) {
        uint64_t expect;
        size_t have = typed_count(t, nelem, &expect);
        if (have != expect)
            return amp_fail(c->st, AMP_ERR_INPUT,
                            "%s: tensor '%s' (%s) has %zu data entries in the wrong field or count; "
                            "its dims need %llu",
                            where, tname, amp_dtype_name(t->dtype), have, (unsigned long long)expect);
    } else if (nelem > 0 && t->dtype != AMP_DT_UNDEFINED) {
        return amp_fail(c->st, AMP_ERR_INPUT, "%s: tensor '%s' has dims with %llu elements but no data",
                        where, tname, (unsigned long long)nelem);
    }
    *out = t;
    return AMP_OK;
}

/* ---- graphs ---------------------------------------------------------------------- */

static AmpCode load_graph(LoadCtx *c, Onnx__GraphProto *gp, AmpGraph *parent, AmpNode *owner,
                          const char *where, AmpGraph **out);

static AmpCode load_attr(LoadCtx *c, Onnx__AttributeProto *ap, AmpNode *n, AmpAttr *at) {
    AmpArena *a = arena(c);
    char where[256];
    snprintf(where, sizeof where, "node '%s' (%s) attribute '%s'", n->name ? n->name : "", n->op_type,
             ap->name ? ap->name : "");
    at->name = sdup(c, ap->name);
    at->ref_attr_name = sdup(c, ap->ref_attr_name);
    at->doc_string = sdup(c, ap->doc_string);
    if (ap->has_type) at->has |= AMP_ATTR_HAS_TYPE, at->type = ap->type;
    if (ap->has_f) at->has |= AMP_ATTR_HAS_F, at->f = ap->f;
    if (ap->has_i) at->has |= AMP_ATTR_HAS_I, at->i = ap->i;
    if (ap->has_s) {
        at->has |= AMP_ATTR_HAS_S;
        /* One extra NUL so string attributes read as C strings. */
        uint8_t *s = amp_arena_alloc(a, ap->s.len + 1);
        if (!s) return oom(c);
        if (ap->s.len) memcpy(s, ap->s.data, ap->s.len);
        at->s.data = s;
        at->s.len = ap->s.len;
    }
    AmpCode rc;
    if (ap->t && (rc = load_tensor(c, ap->t, where, &at->t))) return rc;
    if (ap->g && (rc = load_graph(c, ap->g, n->graph, n, where, &at->g))) return rc;
    at->n_floats = ap->n_floats;
    at->n_ints = ap->n_ints;
    if (ap->n_floats && !(at->floats = amp_arena_memdup(a, ap->floats, ap->n_floats * sizeof(float))))
        return oom(c);
    if (ap->n_ints && !(at->ints = amp_arena_memdup(a, ap->ints, ap->n_ints * sizeof(int64_t))))
        return oom(c);
    if (ap->n_strings) {
        at->n_strings = ap->n_strings;
        if (!(at->strings = amp_arena_calloc(a, ap->n_strings, sizeof *at->strings))) return oom(c);
        for (size_t i = 0; i < ap->n_strings; i++) {
            uint8_t *s = amp_arena_alloc(a, ap->strings[i].len + 1);
            if (!s) return oom(c);
            if (ap->strings[i].len) memcpy(s, ap->strings[i].data, ap->strings[i].len);
            at->strings[i].data = s;
            at->strings[i].len = ap->strings[i].len;
        }
    }
    if (ap->n_tensors) {
        at->n_tensors = ap->n_tensors;
        if (!(at->tensors = amp_arena_calloc(a, ap->n_tensors, sizeof *at->tensors))) return oom(c);
        for (size_t i = 0; i < ap->n_tensors; i++)
            if ((rc = load_tensor(c, ap->tensors[i], where, &at->tensors[i]))) return rc;
    }
    if (ap->n_graphs) {
        at->n_graphs = ap->n_graphs;
        if (!(at->graphs = amp_arena_calloc(a, ap->n_graphs, sizeof *at->graphs))) return oom(c);
        for (size_t i = 0; i < ap->n_graphs; i++)
            if ((rc = load_graph(c, ap->graphs[i], n->graph, n, where, &at->graphs[i]))) return rc;
    }
    Onnx__AttributeProto rest = *ap;
    rest.name = NULL, rest.ref_attr_name = NULL, rest.doc_string = NULL, rest.has_type = 0;
    rest.has_f = 0, rest.has_i = 0, rest.has_s = 0, rest.t = NULL, rest.g = NULL;
    rest.n_floats = 0, rest.n_ints = 0, rest.n_strings = 0, rest.n_tensors = 0, rest.n_graphs = 0;
    at->rest = amp_proto_pack_rest(a, &rest.base);
    return AMP_OK;
}

/* One ValueInfoProto entry: kept packed, its type parsed for the value. */
static AmpCode load_value_info(LoadCtx *c, AmpValueInfo *e, Onnx__ValueInfoProto *vp) {
    AmpArena *a = arena(c);
    e->orig = amp_proto_pack_rest(a, &vp->base);
    if (amp_proto_parse_type(a, vp->type, &e->loaded))
        return amp_fail(c->st, AMP_ERR_INPUT, "value '%s' has a malformed type", vp->name);
    AmpValue *v = e->value;
    if (v->type.kind == AMP_TYPE_NONE) v->type = copy_type(a, &e->loaded);
    return AMP_OK;
}

static AmpCode load_graph(LoadCtx *c, Onnx__GraphProto *gp, AmpGraph *parent, AmpNode *owner,
                          const char *where, AmpGraph **out) {
    if (++c->depth > AMP_MAX_GRAPH_DEPTH)
        return amp_fail(c->st, AMP_ERR_INPUT, "%s: subgraphs nested deeper than %d", where, AMP_MAX_GRAPH_DEPTH);
    AmpArena *a = arena(c);
    AmpGraph *g = amp_graph_new(c->m, parent);
    if (!g) return oom(c);
    *out = g;
    g->owner = owner;
    g->name = sdup(c, gp->name);
    g->doc_string = sdup(c, gp->doc_string);
    /* Messages name the graph, or for an unnamed one where it hangs (an attribute). */
    char gwhere[320];
    if (gp->name && *gp->name) snprintf(gwhere, sizeof gwhere, "graph '%s'", gp->name);
    else snprintf(gwhere, sizeof gwhere, "%s", where);
    AmpCode rc;

    for (size_t i = 0; i < gp->n_input; i++) {
        Onnx__ValueInfoProto *vp = gp->input[i];
        if (!vp->name || !*vp->name)
            return amp_fail(c->st, AMP_ERR_INPUT, "%s: input %zu has no name", gwhere, i);
        AmpValue *v = amp_graph_value(g, vp->name);
        if (!v) return oom(c);
        if (v->flags & AMP_VALUE_INPUT)
            return amp_fail(c->st, AMP_ERR_INPUT, "%s: input '%s' is listed twice", gwhere, vp->name);
        AmpValueInfo *e = amp_graph_add_input(g, v);
        if (!e) return oom(c);
        if ((rc = load_value_info(c, e, vp))) return rc;
    }
    for (size_t i = 0; i < gp->n_initializer; i++) {
        Onnx__TensorProto *tp = gp->initializer[i];
        if (!tp->name || !*tp->name)
            return amp_fail(c->st, AMP_ERR_INPUT, "%s: initializer %zu has no name", gwhere, i);
        AmpValue *v = amp_graph_value(g, tp->name);
        if (!v) return oom(c);
        if (v->flags & AMP_VALUE_INITIALIZER)
            return amp_fail(c->st, AMP_ERR_INPUT, "%s: initializer '%s' is defined twice", gwhere, tp->name);
        AmpTensor *t;
        if ((rc = load_tensor(c, tp, gwhere, &t))) return rc;
        if (amp_graph_add_initializer(g, v, t)) return oom(c);
        if (v->type.kind == AMP_TYPE_NONE) {
            v->type.kind = AMP_TYPE_TENSOR;
            v->type.dtype = t->dtype;
            v->type.rank = (int)t->ndims;
            if (t->ndims) {
                v->type.dims = amp_arena_calloc(a, t->ndims, sizeof *v->type.dims);
                if (!v->type.dims) return oom(c);
                for (size_t k = 0; k < t->ndims; k++) v->type.dims[k].value = t->dims[k];
            }
        }
    }

    /* Pass 1: nodes and their outputs, so inputs can refer to any node's output. */
    for (size_t i = 0; i < gp->n_node; i++) {
        Onnx__NodeProto *np = gp->node[i];
        if (np->n_input > INT32_MAX || np->n_output > INT32_MAX)
            return amp_fail(c->st, AMP_ERR_INPUT, "%s: node %zu has too many inputs or outputs", gwhere, i);
        AmpNode *n = amp_node_new(g, np->domain, np->op_type ? np->op_type : "", np->name, (int)np->n_input,
                                  (int)np->n_output);
        if (!n) return oom(c);
        if (!np->domain) n->domain = NULL;
        if (!np->op_type) n->op_type = NULL;
        n->doc_string = sdup(c, np->doc_string);
        amp_node_append(g, n);
        for (size_t k = 0; k < np->n_output; k++) {
            const char *name = np->output[k];
            if (!*name) continue;
            AmpValue *v = amp_graph_value(g, name);
            if (!v) return oom(c);
            if (v->producer || (v->flags & (AMP_VALUE_INPUT | AMP_VALUE_INITIALIZER)))
                return amp_fail(c->st, AMP_ERR_INPUT,
                                "%s: node '%s' (%s): output '%s' is already defined by %s%s%s", gwhere,
                                np->name ? np->name : "", np->op_type ? np->op_type : "", name,
                                v->producer ? "node '" : "a graph input or initializer",
                                v->producer ? (v->producer->name ? v->producer->name : "") : "",
                                v->producer ? "'" : "");
            amp_node_set_output(n, (int)k, v);
        }
    }
    /* Pass 2: attributes (subgraphs see every value of this scope) and inputs. */
    AmpNode *n = g->first;
    for (size_t i = 0; i < gp->n_node; i++, n = n->next) {
        Onnx__NodeProto *np = gp->node[i];
        if (np->n_attribute) {
            n->attrs = amp_arena_calloc(a, np->n_attribute, sizeof *n->attrs);
            if (!n->attrs) return oom(c);
            n->n_attrs = np->n_attribute;
            for (size_t k = 0; k < np->n_attribute; k++)
                if ((rc = load_attr(c, np->attribute[k], n, &n->attrs[k]))) return rc;
        }
        for (size_t k = 0; k < np->n_input; k++) {
            const char *name = np->input[k];
            if (!*name) continue;
            AmpValue *v = amp_graph_lookup(g, name);
            if (!v) {
                if (!(v = amp_graph_value(g, name))) return oom(c);
                v->flags |= AMP_VALUE_UNDEFINED;
            }
            amp_node_set_input(n, (int)k, v);
        }
        Onnx__NodeProto rest = *np;
        rest.n_input = 0, rest.n_output = 0, rest.name = NULL, rest.op_type = NULL, rest.domain = NULL;
        rest.n_attribute = 0, rest.doc_string = NULL;
        n->rest = amp_proto_pack_rest(a, &rest.base);
    }

    for (size_t i = 0; i < gp->n_output; i++) {
        Onnx__ValueInfoProto *vp = gp->output[i];
        if (!vp->name || !*vp->name)
            return amp_fail(c->st, AMP_ERR_INPUT, "%s: output %zu has no name", gwhere, i);
        AmpValue *v = amp_graph_lookup(g, vp->name);
        if (!v) {
            if (!(v = amp_graph_value(g, vp->name))) return oom(c);
            v->flags |= AMP_VALUE_UNDEFINED;
        }
        unsigned was = v->flags;
        AmpValueInfo *e = amp_graph_add_output(g, v);
        if (!e) return oom(c);
        if (v->graph != g) v->flags = was; /* an outer value returned as is */
        if ((rc = load_value_info(c, e, vp))) return rc;
    }
    for (size_t i = 0; i < gp->n_value_info; i++) {
        Onnx__ValueInfoProto *vp = gp->value_info[i];
        AmpValue *v = vp->name ? amp_graph_lookup(g, vp->name) : NULL;
        if (!v && !(v = amp_graph_value(g, vp->name ? vp->name : ""))) return oom(c);
        AmpValueInfo *e = amp_graph_add_value_info(g, v);
        if (!e) return oom(c);
        if ((rc = load_value_info(c, e, vp))) return rc;
    }
    Onnx__GraphProto rest = *gp;
    rest.n_node = 0, rest.name = NULL, rest.n_initializer = 0, rest.doc_string = NULL;
    rest.n_input = 0, rest.n_output = 0, rest.n_value_info = 0;
    g->rest = amp_proto_pack_rest(a, &rest.base);

    if ((rc = amp_graph_toposort(g, c->st))) {
        amp_status_prefix(c->st, "%s: ", gwhere);
        return rc;
    }
    c->depth--;
    return AMP_OK;
}

/* ---- model ----------------------------------------------------------------------- */

static AmpCode load_pairs(LoadCtx *c, Onnx__StringStringEntryProto **src, size_t n, AmpStrPair **dst) {
    if (!n) return AMP_OK;
    *dst = amp_arena_calloc(arena(c), n, sizeof **dst);
    if (!*dst) return oom(c);
    for (size_t i = 0; i < n; i++) {
        (*dst)[i].key = sdup(c, src[i]->key);
        (*dst)[i].value = sdup(c, src[i]->value);
    }
    return AMP_OK;
}

static AmpCode load_model(LoadCtx *c, Onnx__ModelProto *mp) {
    AmpModel *m = c->m;
    AmpArena *a = arena(c);
    AmpCode rc;
    if (!mp->graph) return amp_fail(c->st, AMP_ERR_INPUT, "not an ONNX model: it has no graph");
    if (mp->has_ir_version) m->has |= AMP_MODEL_HAS_IR_VERSION, m->ir_version = mp->ir_version;
    if (mp->has_model_version) m->has |= AMP_MODEL_HAS_MODEL_VERSION, m->model_version = mp->model_version;
    m->producer_name = sdup(c, mp->producer_name);
    m->producer_version = sdup(c, mp->producer_version);
    m->domain = sdup(c, mp->domain);
    m->doc_string = sdup(c, mp->doc_string);

    if (mp->n_opset_import) {
        m->n_opsets = mp->n_opset_import;
        if (!(m->opsets = amp_arena_calloc(a, m->n_opsets, sizeof *m->opsets))) return oom(c);
        for (size_t i = 0; i < m->n_opsets; i++) {
            Onnx__OperatorSetIdProto *op = mp->opset_import[i];
            m->opsets[i].domain = sdup(c, op->domain);
            m->opsets[i].version = op->version;
            m->opsets[i].has_version = op->has_version;
            const char *d = op->domain ? op->domain : "";
            /* The contract: a newer opset is bad input (exit 1), with a message
             * saying what ampc knows. */
            if ((!*d || strcmp(d, "ai.onnx") == 0) && op->version > AMP_MAX_ONNX_OPSET)
                return amp_fail(c->st, AMP_ERR_INPUT,
                                "the model imports ai.onnx opset %lld; ampc knows opsets up to %d",
                                (long long)op->version, AMP_MAX_ONNX_OPSET);
        }
    }
    /* ONNX requires opset_import from IR version 3 on: without it no op has a meaning. */
    if (!mp->n_opset_import && (!mp->has_ir_version || mp->ir_version >= 3))
        return amp_fail(c->st, AMP_ERR_INPUT, "the model imports no opset (opset_import is empty)");
    if ((rc = load_pairs(c, mp->metadata_props, mp->n_metadata_props, &m->metadata))) return rc;
    m->n_metadata = mp->n_metadata_props;

    if (mp->n_functions) {
        m->n_functions = mp->n_functions;
        if (!(m->functions = amp_arena_calloc(a, m->n_functions, sizeof *m->functions))) return oom(c);
        for (size_t i = 0; i < mp->n_functions; i++) {
            m->functions[i].domain = sdup(c, mp->functions[i]->domain);
            m->functions[i].name = sdup(c, mp->functions[i]->name);
            m->functions[i].packed = amp_proto_pack_rest(a, &mp->functions[i]->base);
        }
    }

    if ((rc = load_graph(c, mp->graph, NULL, NULL, "graph", &m->graph))) return rc;

    if (mp->n_training_info) {
        m->n_training = mp->n_training_info;
        if (!(m->training = amp_arena_calloc(a, m->n_training, sizeof *m->training))) return oom(c);
        for (size_t i = 0; i < mp->n_training_info; i++) {
            Onnx__TrainingInfoProto *tp = mp->training_info[i];
            AmpTrainingInfo *ti = &m->training[i];
            if (tp->initialization &&
                (rc = load_graph(c, tp->initialization, m->graph, NULL, "training_info initialization",
                                 &ti->initialization)))
                return rc;
            if (tp->algorithm &&
                (rc = load_graph(c, tp->algorithm, m->graph, NULL, "training_info algorithm", &ti->algorithm)))
                return rc;
            if ((rc = load_pairs(c, tp->initialization_binding, tp->n_initialization_binding,
                                 &ti->init_bindings)))
                return rc;
            ti->n_init_bindings = tp->n_initialization_binding;
            if ((rc = load_pairs(c, tp->update_binding, tp->n_update_binding, &ti->update_bindings)))
                return rc;
            ti->n_update_bindings = tp->n_update_binding;
            Onnx__TrainingInfoProto rest = *tp;
            rest.initialization = NULL, rest.algorithm = NULL;
            rest.n_initialization_binding = 0, rest.n_update_binding = 0;
            ti->rest = amp_proto_pack_rest(a, &rest.base);
        }
    }

    Onnx__ModelProto rest = *mp;
    rest.has_ir_version = 0, rest.n_opset_import = 0, rest.producer_name = NULL;
    rest.producer_version = NULL, rest.domain = NULL, rest.has_model_version = 0;
    rest.doc_string = NULL, rest.graph = NULL, rest.n_metadata_props = 0;
    rest.n_training_info = 0, rest.n_functions = 0;
    m->rest = amp_proto_pack_rest(a, &rest.base);
    return AMP_OK;
}

/* ---- wire-format pre-scan -------------------------------------------------------- */

static bool read_varint(const uint8_t **p, const uint8_t *end, uint64_t *out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return true;
        }
    }
    return false;
}

/* Walks the encoding of a `desc` message, descending into sub-message fields, and fails
 * on nesting deeper than AMP_MAX_PROTO_DEPTH or on framing that runs past the end.
 * Recursion is bounded by that depth, so this cannot overflow the stack itself. */
static AmpCode check_nesting(const ProtobufCMessageDescriptor *desc, const uint8_t *base, const uint8_t *p,
                             const uint8_t *end, int depth, AmpStatus *st) {
    if (depth > AMP_MAX_PROTO_DEPTH)
        return amp_fail(st, AMP_ERR_INPUT, "not a usable ONNX model: messages nested deeper than %d",
                        AMP_MAX_PROTO_DEPTH);
    const uint8_t *field = p;
    while (p < end) {
        field = p;
        uint64_t key, len;
        if (!read_varint(&p, end, &key)) goto truncated;
        switch (key & 7) {
        case 0:
            if (!read_varint(&p, end, &len)) goto truncated;
            break;
        case 1:
            if (end - p < 8) goto truncated;
            p += 8;
            break;
        case 5:
            if (end - p < 4) goto truncated;
            p += 4;
            break;
        case 2: {
            if (!read_varint(&p, end, &len) || len > (uint64_t)(end - p)) goto truncated;
            const ProtobufCFieldDescriptor *fd =
                desc && key >> 3 <= UINT32_MAX ? protobuf_c_message_descriptor_get_field(desc, (unsigned)(key >> 3)) : NULL;
            if (fd && fd->type == PROTOBUF_C_TYPE_MESSAGE) {
                AmpCode rc = check_nesting(fd->descriptor, base, p, p + len, depth + 1, st);
                if (rc) return rc;
            }
            p += len;
            break;
        }
        default:
            return amp_fail(st, AMP_ERR_INPUT,
                            "not an ONNX model: protobuf wire type %u at byte offset %td is not used by ONNX",
                            (unsigned)(key & 7), field - base);
        }
    }
    return AMP_OK;
truncated:
    return amp_fail(st, AMP_ERR_INPUT,
                    "not an ONNX model: the protobuf encoding is truncated or malformed (field at byte offset %td)",
                    field - base);
}

AmpCode amp_model_load_bytes(const void *data, size_t len, const char *dir, const AmpLoadOptions *opt,
                             AmpModel **out, AmpStatus *st) {
    *out = NULL;
    if (len == 0) return amp_fail(st, AMP_ERR_INPUT, "the file is empty");
    const uint8_t *bytes = data;
    AmpCode rc = check_nesting(&onnx__model_proto__descriptor, bytes, bytes, bytes + len, 0, st);
    if (rc) return rc;
    Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, len, data);
    if (!mp)
        return amp_fail(st, AMP_ERR_INPUT,
                        "not an ONNX model: the protobuf encoding is malformed or truncated (%zu bytes)", len);
    AmpModel *m = amp_model_new();
    if (!m) {
        onnx__model_proto__free_unpacked(mp, NULL);
        return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    }
    if (dir) m->dir = amp_arena_strdup(&m->arena, dir);
    LoadCtx c = {m, st, 0};
    rc = load_model(&c, mp);
    onnx__model_proto__free_unpacked(mp, NULL);
    if (!rc && !(opt && opt->skip_verify)) rc = amp_verify_model(m, st);
    if (rc) {
        amp_model_free(m);
        return rc;
    }
    *out = m;
    return AMP_OK;
}

AmpCode amp_model_load_file(const char *path, const AmpLoadOptions *opt, AmpModel **out, AmpStatus *st) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_NONBLOCK); /* a FIFO must not block the open */
    if (fd < 0) return amp_fail(st, AMP_ERR_INPUT, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return amp_fail(st, AMP_ERR_INPUT, "%s: not a regular file", path);
    }
    size_t len = (size_t)sb.st_size;
    void *data = NULL;
    if (len) {
        data = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (data == MAP_FAILED) {
            close(fd);
            return amp_fail(st, AMP_ERR_INTERNAL, "%s: mmap failed: %s", path, strerror(errno));
        }
    }
    close(fd);

    /* The folder external data is resolved against. */
    char *dir = strdup(path);
    if (!dir) {
        if (data) munmap(data, len);
        return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    }
    char *slash = strrchr(dir, '/');
    if (slash == dir) slash[1] = '\0';
    else if (slash) *slash = '\0';
    else strcpy(dir, ".");

    AmpCode rc = amp_model_load_bytes(data, len, dir, opt, out, st);
    if (data) munmap(data, len);
    free(dir);
    if (rc) {
        amp_status_prefix(st, "%s: ", path);
        return rc;
    }
    (*out)->path = amp_arena_strdup(&(*out)->arena, path);
    return AMP_OK;
}

AmpCode amp_tensor_load_bytes(AmpModel *m, const void *data, size_t len, AmpTensor **out, AmpStatus *st) {
    *out = NULL;
    Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, len, data);
    if (!tp) return amp_fail(st, AMP_ERR_INPUT, "not an ONNX TensorProto: the protobuf encoding is malformed");
    LoadCtx c = {m, st, 0};
    AmpCode rc = load_tensor(&c, tp, "tensor file", out);
    onnx__tensor_proto__free_unpacked(tp, NULL);
    return rc;
}
