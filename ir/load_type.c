/* The loader's ValueInfoProto and TypeProto (load_msg.c has the other messages below a
 * graph): tensor types with their shapes; other types kept opaque but checked. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/load_impl.h"

#define BIT(n) (1u << (n))

/* The type parsers read only what the IR models; a field they do not read sets *odd,
 * and the whole TypeProto is then checked against the schema by protobuf-c (as rare as
 * such fields are: sequence and map types, newer fields), so a malformed one is refused
 * even where the IR keeps it opaque. */

/* TensorShapeProto.Dimension: dim_value (1) or dim_param (2), whichever came last. */
static AmpCode load_dim(LoadCtx *c, const AmpWireField *df, AmpDim *d, bool *odd) {
    const uint8_t *p = df->data, *end = df->data + df->len;
    AmpWireField f;
    int r;
    d->value = -1;
    d->param = NULL;
    while ((r = amp_wire_next(&p, end, &f)) > 0) {
        if (f.num == 1) {
            if (f.wt != AMP_WT_VARINT) return amp_load_malformed(c);
            d->value = (int64_t)f.v < 0 ? -1 : (int64_t)f.v;
            d->param = NULL;
        } else if (f.num == 2 || f.num == 3) {
            if (f.wt != AMP_WT_LEN) return amp_load_malformed(c);
            if (f.num == 3) continue; /* denotation: kept in the value info's bytes */
            if (!(d->param = amp_load_str(c, &f))) return amp_load_oom(c);
            d->value = -1;
        } else {
            *odd = true;
        }
    }
    return r < 0 ? amp_load_malformed(c) : AMP_OK;
}

/* TypeProto.Tensor [p, end): elem_type (1) and shape (2: repeated dim, field 1). */
static AmpCode load_tensor_type(LoadCtx *c, const uint8_t *p, const uint8_t *end, AmpType *out,
                                const char *vname, bool *odd) {
    const uint8_t *q = p;
    AmpWireField f;
    int r;
    size_t n_shape = 0, nd = 0;
    while ((r = amp_wire_next(&q, end, &f)) > 0) {
        if (f.num == 1) {
            if (f.wt != AMP_WT_VARINT) return amp_load_malformed(c);
            out->dtype = (int32_t)(uint32_t)f.v;
        } else if (f.num == 2) {
            if (f.wt != AMP_WT_LEN) return amp_load_malformed(c);
            n_shape++;
        } else {
            *odd = true;
        }
    }
    if (r < 0) return amp_load_malformed(c);
    if (!n_shape) return AMP_OK;
    const uint8_t *sp = NULL;
    size_t slen = 0;
    AmpCode rc = amp_load_merged(c, p, end, 2, n_shape, &sp, &slen);
    if (rc) return rc;
    const uint8_t *send = sp + slen;
    for (q = sp; (r = amp_wire_next(&q, send, &f)) > 0;) {
        if (f.num != 1) {
            *odd = true;
            continue;
        }
        if (f.wt != AMP_WT_LEN) return amp_load_malformed(c);
        nd++;
    }
    if (r < 0) return amp_load_malformed(c);
    if (nd > INT32_MAX) return amp_fail(c->st, AMP_ERR_INPUT, "value '%s' has a malformed type", vname);
    out->rank = (int)nd;
    if (!nd) return AMP_OK;
    if (!(out->dims = amp_arena_alloc_raw(c->arena, nd * sizeof *out->dims))) return amp_load_oom(c);
    size_t k = 0;
    for (q = sp; amp_wire_next(&q, send, &f) > 0;)
        if (f.num == 1 && (rc = load_dim(c, &f, &out->dims[k++], odd))) return rc;
    return AMP_OK;
}

/* TypeProto: kind NONE, OTHER (sequence, map, optional, sparse: kept opaque) or TENSOR,
 * whichever member of its oneof came last; repeats of tensor_type since then merge. */
static AmpCode load_type(LoadCtx *c, const uint8_t *p, size_t len, AmpType *out, const char *vname, bool *odd) {
    memset(out, 0, sizeof *out);
    out->rank = -1;
    const uint8_t *end = p + len, *q = p, *from = p;
    AmpWireField f;
    int r;
    size_t n_tt = 0;
    while ((r = amp_wire_next(&q, end, &f)) > 0) {
        switch (f.num) {
        case 1:
        case 4:
        case 5:
        case 8:
        case 9:
            if (f.wt != AMP_WT_LEN) return amp_load_malformed(c);
            if (f.num != 1) {
                out->kind = AMP_TYPE_OTHER;
                *odd = true;
                break;
            }
            if (out->kind != AMP_TYPE_TENSOR) n_tt = 0, from = f.start;
            out->kind = AMP_TYPE_TENSOR;
            n_tt++;
            break;
        case 6:
            if (f.wt != AMP_WT_LEN) return amp_load_malformed(c);
            break;
        default: *odd = true; break;
        }
    }
    if (r < 0) return amp_load_malformed(c);
    if (out->kind != AMP_TYPE_TENSOR) return AMP_OK;
    const uint8_t *tp = NULL;
    size_t tlen = 0;
    AmpCode rc = amp_load_merged(c, from, end, 1, n_tt, &tp, &tlen);
    return rc ? rc : load_tensor_type(c, tp, tp + tlen, out, vname, odd);
}

static AmpType copy_type(AmpArena *a, const AmpType *t) {
    AmpType c = *t;
    if (t->rank > 0) {
        c.dims = amp_arena_memdup(a, t->dims, (size_t)t->rank * sizeof *t->dims);
        if (!c.dims) c.rank = -1;
    }
    return c;
}

AmpCode amp_load_value_info(LoadCtx *c, AmpValueInfo *e, const uint8_t *p, size_t len) {
    AmpArena *a = c->arena;
    const uint8_t *end = p + len, *q = p;
    AmpWireField f;
    int r;
    size_t n_type = 0;
    while ((r = amp_wire_next(&q, end, &f)) > 0) {
        if (f.num > 3) continue;
        if (f.wt != AMP_WT_LEN) return amp_load_malformed(c);
        n_type += f.num == 2;
    }
    if (r < 0) return amp_load_malformed(c);
    /* Kept as it is; the saver writes it back unless the value's type changes. */
    if (!(e->orig.data = amp_arena_memdup(a, p, len))) return amp_load_oom(c);
    e->orig.len = len;
    if (n_type) {
        AmpCode rc;
        const uint8_t *tp = NULL;
        size_t tlen = 0;
        if ((rc = amp_load_merged(c, p, end, 2, n_type, &tp, &tlen))) return rc;
        bool odd = false;
        if ((rc = load_type(c, tp, tlen, &e->loaded, e->value->name, &odd))) return rc;
        if (odd) {
            ProtobufCMessage *msg;
            if ((rc = amp_load_unpack(c, &onnx__type_proto__descriptor, tp, tlen, &msg))) return rc;
            protobuf_c_message_free_unpacked(msg, NULL);
        }
    }
    AmpValue *v = e->value;
    if (v->type.kind == AMP_TYPE_NONE) v->type = copy_type(a, &e->loaded);
    return AMP_OK;
}
