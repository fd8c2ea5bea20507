/* The loader's one way into protobuf-c. protobuf-c unpacks nested messages recursively,
 * with no limit, so a hostile file could nest them deep enough to overflow the C stack.
 * The loader itself recurses only through subgraphs (AMP_MAX_GRAPH_DEPTH); what it hands
 * to protobuf-c (unmodelled fields, FunctionProtos, TypeProtos other than tensors) is
 * first walked here, iteratively bounded, and refused when nested too deep. Models that
 * use only what the IR models never come here. */
#include <stdlib.h>

#include "ir/load_impl.h"

/* Messages nested deeper than this inside what protobuf-c unpacks are refused. */
#define AMP_MAX_PROTO_DEPTH 256

/* Which fields of a message type are messages, and of which type: field numbers below 64
 * (every ONNX field) in a table filled as they are first met, others asked of protobuf-c.
 * A few types per model; kept for the whole load. */
struct AmpNestDesc {
    const ProtobufCMessageDescriptor *desc;
    uint64_t known;                            /* bit k: sub[k] has been looked up */
    const ProtobufCMessageDescriptor *sub[64]; /* NULL: not a message field */
};

/* desc's entry in c->nest, as an index (the table may move as it grows, also while a
 * caller further up the recursion holds an entry); SIZE_MAX when out of memory. */
static size_t nest_desc(LoadCtx *c, const ProtobufCMessageDescriptor *desc) {
    for (size_t i = 0; i < c->n_nest; i++)
        if (c->nest[i].desc == desc) return i;
    if (c->n_nest == c->cap_nest) {
        size_t cap = c->cap_nest ? c->cap_nest * 2 : 16;
        AmpNestDesc *k = realloc(c->nest, cap * sizeof *k);
        if (!k) return SIZE_MAX;
        c->nest = k;
        c->cap_nest = cap;
    }
    AmpNestDesc *d = &c->nest[c->n_nest];
    d->desc = desc;
    d->known = 0;
    return c->n_nest++;
}

/* The message type of field `num` of `desc` messages, or NULL when it is not a message. */
static const ProtobufCMessageDescriptor *field_msg(const ProtobufCMessageDescriptor *desc, uint32_t num) {
    const ProtobufCFieldDescriptor *fd = protobuf_c_message_descriptor_get_field(desc, num);
    return fd && fd->type == PROTOBUF_C_TYPE_MESSAGE ? fd->descriptor : NULL;
}

/* field_msg for d's messages, remembered for field numbers below 64. */
static const ProtobufCMessageDescriptor *nest_sub(AmpNestDesc *d, uint32_t num) {
    if (num >= 64) return field_msg(d->desc, num);
    if (!(d->known >> num & 1)) {
        d->sub[num] = field_msg(d->desc, num);
        d->known |= (uint64_t)1 << num;
    }
    return d->sub[num];
}

/* Walks the encoding of a `desc` message, descending into its message fields; fails on
 * nesting deeper than AMP_MAX_PROTO_DEPTH or on framing that runs past the end. The
 * recursion is bounded by that depth, so this cannot overflow the stack itself. */
static AmpCode walk(LoadCtx *c, const ProtobufCMessageDescriptor *desc, const uint8_t *p, const uint8_t *end,
                    int depth) {
    if (depth > AMP_MAX_PROTO_DEPTH)
        return amp_fail(c->st, AMP_ERR_INPUT, "not a usable ONNX model: messages nested deeper than %d",
                        AMP_MAX_PROTO_DEPTH);
    size_t nd = nest_desc(c, desc);
    if (nd == SIZE_MAX) return amp_load_oom(c);
    AmpWireField f;
    int r;
    while ((r = amp_wire_next(&p, end, &f)) > 0) {
        if (f.wt != AMP_WT_LEN) continue;
        const ProtobufCMessageDescriptor *sub = nest_sub(&c->nest[nd], f.num);
        AmpCode rc = sub ? walk(c, sub, f.data, f.data + f.len, depth + 1) : AMP_OK;
        if (rc) return rc;
    }
    return r < 0 ? amp_load_malformed(c) : AMP_OK;
}

AmpCode amp_load_unpack(LoadCtx *c, const ProtobufCMessageDescriptor *desc, const uint8_t *p, size_t len,
                        ProtobufCMessage **out) {
    *out = NULL;
    AmpCode rc = walk(c, desc, p, p + len, 0);
    if (rc) return rc;
    if (!(*out = protobuf_c_message_unpack(desc, NULL, len, p))) return amp_load_malformed(c);
    return AMP_OK;
}

void amp_load_nest_free(LoadCtx *c) {
    free(c->nest);
    c->nest = NULL;
    c->n_nest = c->cap_nest = 0;
}
