/* IR -> ONNX. Encodes the protobuf wire format straight from the model into one buffer
 * (no message tree in between), as protobuf-c would: fields by number, repeated ones in
 * the form the schema declares, unknown ones last, with each message's `rest` blob merged
 * back in place. Big tensor data is not copied: it is written out from where it lies.
 * save_file.c writes the buffer to disk. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx.pb-c.h"
#include "ir/save_impl.h"

/* ---- the buffer ------------------------------------------------------------------ */

bool amp_wbuf_grow(AmpWBuf *b, size_t n) {
    if (b->failed) return false;
    size_t need, total;
    if (!amp_add_size(b->len, n, &need) || !amp_add_size(need, b->gap_bytes, &total) ||
        (b->max && total > b->max)) {
        b->failed = b->over = true;
        return false;
    }
    if (b->reserve && !b->data && b->max) {
        /* One mapping of the most the buffer may ever hold: it never moves or copies. */
        if ((b->data = amp_big_zalloc(b->max))) {
            b->mapped = b->cap = b->max;
            return true;
        }
    }
    size_t cap = b->cap ? b->cap : b->first_cap ? b->first_cap : (size_t)1 << 16;
    while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    if (b->populate) {
        /* Address space for twice what is asked, pages mapped as the buffer reaches them,
         * each step in one call: growing within the mapping copies nothing. */
        if (cap > b->mapped) {
            size_t span = cap <= SIZE_MAX / 2 ? cap * 2 : cap;
            uint8_t *d = amp_big_zalloc(span);
            if (!d) {
                b->failed = true;
                return false;
            }
            if (b->len) memcpy(d, b->data, b->len);
            if (b->mapped) amp_big_free(b->data, b->mapped);
            b->data = d;
            b->mapped = span;
        }
        amp_populate(b->data + b->len, cap - b->len);
        b->cap = cap;
        return true;
    }
    uint8_t *d = realloc(b->data, cap);
    if (!d) {
        b->failed = true;
        return false;
    }
    b->data = d;
    b->cap = cap;
    return true;
}

static void gap(AmpWBuf *b, const void *d, size_t len, const AmpTensor *narrow) {
    if (b->failed || !len) return;
    size_t total;
    if (!amp_add_size(b->len, b->gap_bytes, &total) || !amp_add_size(total, len, &total) ||
        (b->max && total > b->max)) {
        b->failed = b->over = true;
        return;
    }
    if (b->n_gaps == b->cap_gaps) {
        size_t cap = b->cap_gaps ? b->cap_gaps * 2 : 64;
        AmpWGap *g = realloc(b->gaps, cap * sizeof *g);
        if (!g) {
            b->failed = true;
            return;
        }
        b->gaps = g;
        b->cap_gaps = cap;
    }
    b->gaps[b->n_gaps++] = (AmpWGap){b->len, d, len, narrow};
    b->gap_bytes += len;
}

void amp_wbuf_gap(AmpWBuf *b, const void *d, size_t len) {
    gap(b, d, len, NULL);
}

void amp_wbuf_gap_narrow(AmpWBuf *b, const AmpTensor *t) {
    gap(b, NULL, t->raw.len, t);
}

bool amp_wbuf_put_narrow(AmpWBuf *b, const AmpTensor *t, bool (*put)(void *ctx, const void *d, size_t len),
                         void *ctx) {
    if (!b->chunk && !(b->chunk = malloc(AMP_WBUF_CHUNK * sizeof *b->chunk))) return false;
    size_t n = t->raw.len / 2;
    for (size_t at = 0; at < n; at += AMP_WBUF_CHUNK) {
        size_t k = n - at < AMP_WBUF_CHUNK ? n - at : AMP_WBUF_CHUNK;
        amp_tensor_narrow(t, at, k, b->chunk);
        if (!put(ctx, b->chunk, k * sizeof *b->chunk)) return false;
    }
    return true;
}

void amp_msg_end_long(AmpWBuf *b, size_t start) {
    size_t n = b->len - start, first = b->n_gaps;
    while (first > 0 && b->gaps[first - 1].at >= start) n += b->gaps[--first].len;
    size_t k = amp_varint_size(n);
    if (k > 1) {
        if (!amp_wbuf_room(b, k - 1)) return;
        memmove(b->data + start + k - 1, b->data + start, b->len - start);
        for (size_t i = first; i < b->n_gaps; i++) b->gaps[i].at += k - 1;
        b->len += k - 1;
    }
    uint8_t *p = b->data + start - 1;
    while (n >= 0x80) {
        *p++ = (uint8_t)(n | 0x80);
        n >>= 7;
    }
    *p = (uint8_t)n;
}

void amp_wbuf_free(AmpWBuf *b) {
    if (b->mapped) amp_big_free(b->data, b->mapped);
    else free(b->data);
    free(b->gaps);
    free(b->chunk);
    memset(b, 0, sizeof *b);
}

/* ---- rest blobs ---------------------------------------------------------------------
 * A rest blob is protobuf-c's packing of a message's unmodelled fields: the known ones
 * in field order, then the unknown ones. Known ones go back between the modelled fields
 * by number (UPTO before each modelled field), unknown ones at the end (rest_tail). */

typedef struct Rest {
    const uint8_t *p, *end;
    const ProtobufCMessageDescriptor *desc;
} Rest;

static Rest rest_of(AmpBytes r, const ProtobufCMessageDescriptor *desc) {
    Rest x = {NULL, NULL, desc};
    if (r.len) x.p = r.data, x.end = r.data + r.len;
    return x;
}

static void rest_upto(SaveCtx *c, Rest *r, uint32_t num) {
    AmpWireField f;
    const uint8_t *q = r->p;
    while (q < r->end && amp_wire_next(&q, r->end, &f) > 0) {
        if (f.num >= num || !protobuf_c_message_descriptor_get_field(r->desc, f.num)) return;
        amp_put_raw(&c->b, f.start, (size_t)(f.end - f.start));
        r->p = q;
    }
}

static void rest_tail(SaveCtx *c, Rest *r) {
    if (r->p < r->end) amp_put_raw(&c->b, r->p, (size_t)(r->end - r->p));
    r->p = r->end;
}

#define UPTO(r, num)                                 \
    do {                                             \
        if ((r).p < (r).end) rest_upto(c, &(r), num); \
    } while (0)

/* ---- repeated scalars ------------------------------------------------------------ */

/* Varints from n 64-bit values (or 32-bit ones, sign-extended, when `i32`), packed in
 * one record or one record each. */
static void put_varints(SaveCtx *c, uint32_t num, bool packed, const void *arr, size_t n, bool i32) {
    if (!n) return;
    const int32_t *a32 = arr;
    const uint64_t *a64 = arr;
#define ELEM(i) (i32 ? (uint64_t)(int64_t)a32[i] : a64[i])
    if (!packed) {
        for (size_t i = 0; i < n; i++) amp_put_varint(&c->b, num, ELEM(i));
        return;
    }
    size_t total = 0;
    for (size_t i = 0; i < n; i++) total += amp_varint_size(ELEM(i));
    if (!amp_wbuf_room(&c->b, 20 + total)) return;
    amp_wbuf_varint_(&c->b, (uint64_t)num << 3 | AMP_WT_LEN);
    amp_wbuf_varint_(&c->b, total);
    for (size_t i = 0; i < n; i++) amp_wbuf_varint_(&c->b, ELEM(i));
#undef ELEM
}

/* Fixed-width elements of w bytes (4: float, 8: double). */
static void put_fixed(SaveCtx *c, uint32_t num, bool packed, const void *arr, size_t n, size_t w) {
    if (!n) return;
    const uint8_t *a = arr;
    if (packed) {
        amp_put_bytes(&c->b, num, a, n * w);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (!amp_wbuf_room(&c->b, 15)) return;
        amp_wbuf_varint_(&c->b, (uint64_t)num << 3 | (w == 4 ? AMP_WT_I32 : AMP_WT_I64));
        amp_wbuf_bytes_(&c->b, a + i * w, w);
    }
}

static void put_pairs(SaveCtx *c, uint32_t num, const AmpStrPair *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        size_t at = amp_msg_begin(&c->b, num);
        amp_put_str(&c->b, 1, p[i].key);
        amp_put_str(&c->b, 2, p[i].value);
        amp_msg_end(&c->b, at);
    }
}

/* ---- tensors --------------------------------------------------------------------- */

enum { T_DIMS = 1, T_DTYPE = 2, T_FLOAT = 4, T_INT32 = 5, T_STRING = 6, T_INT64 = 7, T_NAME = 8,
       T_RAW = 9, T_DOUBLE = 10, T_UINT64 = 11, T_DOC = 12, T_EXTERNAL = 13, T_LOCATION = 14 };

static bool put_file(void *f, const void *d, size_t len) {
    return fwrite(d, 1, len, f) == len;
}

/* Appends t's bytes to the external data file at a 64-byte aligned offset; the tensor's
 * external_data entries say where. */
static bool write_external(SaveCtx *c, AmpTensor *t, char *off, char *len) {
    static const uint8_t zeros[64];
    AmpBytes bytes = {NULL, t->raw.len};
    if (!t->narrow_from && amp_tensor_bytes(c->m, t, &bytes, c->st)) return false;
    size_t pad = (size_t)((64 - c->data_off % 64) % 64);
    if (pad && fwrite(zeros, 1, pad, c->data_file) != pad) return false;
    c->data_off += pad;
    if (t->narrow_from ? !amp_wbuf_put_narrow(&c->b, t, put_file, c->data_file)
                       : bytes.len && fwrite(bytes.data, 1, bytes.len, c->data_file) != bytes.len)
        return false;
    snprintf(off, 24, "%llu", (unsigned long long)c->data_off);
    snprintf(len, 24, "%llu", (unsigned long long)bytes.len);
    c->data_off += bytes.len;
    return true;
}

/* A deferred 16-bit weight's bytes as field num: a gap, made when the buffer is written
 * (the pass defers only big ones; a small one is made here). */
static void put_narrow(SaveCtx *c, uint32_t num, const AmpTensor *t) {
    size_t len = t->raw.len;
    if (len >= AMP_WBUF_GAP_MIN) {
        if (!amp_wbuf_room(&c->b, 20)) return;
        amp_wbuf_varint_(&c->b, (uint64_t)num << 3 | AMP_WT_LEN);
        amp_wbuf_varint_(&c->b, len);
        amp_wbuf_gap_narrow(&c->b, t);
        return;
    }
    uint16_t d[AMP_WBUF_GAP_MIN / 2];
    amp_tensor_narrow(t, 0, len / 2, d);
    amp_put_bytes(&c->b, num, d, len);
}

void amp_save_tensor(SaveCtx *c, AmpTensor *t, bool counted) {
    Rest r = rest_of(t->rest, &onnx__tensor_proto__descriptor);
    size_t canon = 0;
    bool sized = amp_tensor_expected_bytes(t->dtype, t->nelem, &canon);
    if (counted && sized) {
        /* AUTO: one file while the tensors fit under protobuf's limit. */
        c->tensor_bytes += canon;
        if (c->auto_external && c->tensor_bytes > c->auto_limit) c->restart = c->b.failed = true;
    }
    put_varints(c, T_DIMS, c->packed_dims, t->dims, t->ndims, false);
    UPTO(r, T_DTYPE);
    if (t->has & AMP_TENSOR_HAS_DTYPE) amp_put_int32(&c->b, T_DTYPE, t->dtype);
    bool movable = t->dtype != AMP_DT_STRING && sized;
    if (c->data_file && movable && canon >= c->external_min && canon > 0) {
        char off[24], len[24];
        if (!write_external(c, t, off, len)) {
            c->failed = true;
            return;
        }
        UPTO(r, T_NAME);
        amp_put_str(&c->b, T_NAME, t->name);
        UPTO(r, T_DOC);
        amp_put_str(&c->b, T_DOC, t->doc_string);
        UPTO(r, T_EXTERNAL);
        const AmpStrPair ext[3] = {{"location", c->data_name}, {"offset", off}, {"length", len}};
        put_pairs(c, T_EXTERNAL, ext, 3);
        UPTO(r, T_LOCATION);
        amp_put_int32(&c->b, T_LOCATION, ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL);
    } else if (t->is_external) {
        /* External on load, inline now. */
        UPTO(r, T_NAME);
        amp_put_str(&c->b, T_NAME, t->name);
        UPTO(r, T_RAW);
        amp_put_bytes(&c->b, T_RAW, t->raw.data, t->raw.len);
        UPTO(r, T_DOC);
        amp_put_str(&c->b, T_DOC, t->doc_string);
    } else {
        UPTO(r, T_FLOAT);
        put_fixed(c, T_FLOAT, c->packed_float, t->float_data, t->n_float, 4);
        UPTO(r, T_INT32);
        put_varints(c, T_INT32, c->packed_int32, t->int32_data, t->n_int32, true);
        UPTO(r, T_STRING);
        for (size_t i = 0; i < t->n_string; i++)
            amp_put_bytes(&c->b, T_STRING, t->string_data[i].data, t->string_data[i].len);
        UPTO(r, T_INT64);
        put_varints(c, T_INT64, c->packed_int64, t->int64_data, t->n_int64, false);
        UPTO(r, T_NAME);
        amp_put_str(&c->b, T_NAME, t->name);
        UPTO(r, T_RAW);
        if (t->narrow_from) put_narrow(c, T_RAW, t);
        else if (t->has & AMP_TENSOR_HAS_RAW) amp_put_bytes(&c->b, T_RAW, t->raw.data, t->raw.len);
        UPTO(r, T_DOUBLE);
        put_fixed(c, T_DOUBLE, c->packed_double, t->double_data, t->n_double, 8);
        UPTO(r, T_UINT64);
        put_varints(c, T_UINT64, c->packed_uint64, t->uint64_data, t->n_uint64, false);
        UPTO(r, T_DOC);
        amp_put_str(&c->b, T_DOC, t->doc_string);
        UPTO(r, T_EXTERNAL);
        put_pairs(c, T_EXTERNAL, t->external, t->n_external);
        UPTO(r, T_LOCATION);
        if (t->has & AMP_TENSOR_HAS_LOCATION) amp_put_int32(&c->b, T_LOCATION, t->data_location);
    }
    rest_upto(c, &r, UINT32_MAX);
    rest_tail(c, &r);
}

static void put_tensor(SaveCtx *c, uint32_t num, AmpTensor *t, bool counted) {
    size_t at = amp_msg_begin(&c->b, num);
    amp_save_tensor(c, t, counted);
    amp_msg_end(&c->b, at);
}

/* ---- value infos ----------------------------------------------------------------- */

/* The type records (field 2) of a loaded ValueInfoProto, written back as they were. */
static void put_old_types(SaveCtx *c, AmpBytes orig) {
    AmpWireField f;
    for (const uint8_t *p = orig.data; orig.len && amp_wire_next(&p, orig.data + orig.len, &f) > 0;)
        if (f.num == 2) amp_put_raw(&c->b, f.start, (size_t)(f.end - f.start));
}

/* A TypeProto for t: tensor_type with elem_type and shape, and the denotation of the
 * type it replaces (the type records of `orig`). Types kept opaque are written back as
 * they were. */
static void put_type(SaveCtx *c, const AmpType *t, AmpBytes orig) {
    if (t->kind == AMP_TYPE_NONE) return;
    if (t->kind == AMP_TYPE_OTHER) {
        put_old_types(c, orig);
        return;
    }
    size_t at = amp_msg_begin(&c->b, 2);
    size_t tt = amp_msg_begin(&c->b, 1);
    if (t->dtype != AMP_DT_UNDEFINED) amp_put_int32(&c->b, 1, t->dtype);
    if (t->rank >= 0) {
        size_t sh = amp_msg_begin(&c->b, 2);
        for (int i = 0; i < t->rank; i++) {
            size_t d = amp_msg_begin(&c->b, 1);
            if (t->dims[i].value >= 0) amp_put_varint(&c->b, 1, (uint64_t)t->dims[i].value);
            else amp_put_str(&c->b, 2, t->dims[i].param);
            amp_msg_end(&c->b, d);
        }
        amp_msg_end(&c->b, sh);
    }
    amp_msg_end(&c->b, tt);
    /* The old type's last denotation (its field 6), read as protobuf-c reads a string. */
    AmpWireField f, g, den = {0};
    bool has_den = false;
    for (const uint8_t *p = orig.data; orig.len && amp_wire_next(&p, orig.data + orig.len, &f) > 0;) {
        if (f.num != 2 || f.wt != AMP_WT_LEN) continue;
        for (const uint8_t *q = f.data; amp_wire_next(&q, f.data + f.len, &g) > 0;)
            if (g.num == 6 && g.wt == AMP_WT_LEN) den = g, has_den = true;
    }
    if (has_den) amp_put_bytes(&c->b, 6, den.data, amp_wire_strlen(&den));
    amp_msg_end(&c->b, at);
}

static void put_value_infos(SaveCtx *c, uint32_t num, const AmpValueInfoList *l) {
    for (size_t i = 0; i < l->n; i++) {
        const AmpValueInfo *e = &l->items[i];
        size_t at = amp_msg_begin(&c->b, num);
        amp_put_str(&c->b, 1, e->value->name);
        if (!e->orig.len || !amp_type_equal(&e->value->type, &e->loaded)) put_type(c, &e->value->type, e->orig);
        else put_old_types(c, e->orig);
        /* Then the loaded message's last doc_string, and its other fields as they were. */
        const uint8_t *p, *end = e->orig.len ? e->orig.data + e->orig.len : NULL;
        AmpWireField f, doc = {0};
        bool has_doc = false;
        for (p = e->orig.data; e->orig.len && amp_wire_next(&p, end, &f) > 0;)
            if (f.num == 3) doc = f, has_doc = true;
        if (has_doc) amp_put_raw(&c->b, doc.start, (size_t)(doc.end - doc.start));
        for (p = e->orig.data; e->orig.len && amp_wire_next(&p, end, &f) > 0;)
            if (f.num > 3) amp_put_raw(&c->b, f.start, (size_t)(f.end - f.start));
        amp_msg_end(&c->b, at);
    }
}

/* With c->value_info: an entry (name and type) for each value that g's nodes produce
 * whose tensor type is known and that g lists nowhere yet (graph inputs, outputs and
 * initializers carry their own types), in node order after g's own entries. What ONNX
 * tools read the types of intermediates from; ampc itself reads them back at load. */
static void put_new_value_infos(SaveCtx *c, const AmpGraph *g) {
    /* g's own entries, by value id: one bit each (most graphs have none). */
    uint8_t *listed = NULL;
    if (g->value_info.n) {
        if (!(listed = calloc(g->n_values / 8 + 1, 1))) {
            c->b.failed = true;
            return;
        }
        for (size_t i = 0; i < g->value_info.n; i++) {
            const AmpValue *v = g->value_info.items[i].value;
            if (v->graph == g && v->id < g->n_values) listed[v->id / 8] |= (uint8_t)(1u << (v->id % 8));
        }
    }
    const unsigned io = AMP_VALUE_INPUT | AMP_VALUE_OUTPUT | AMP_VALUE_INITIALIZER;
    for (const AmpNode *n = g->first; n && !c->b.failed; n = n->next)
        for (int k = 0; k < n->n_outputs; k++) {
            const AmpValue *v = n->outputs[k];
            if (!v || (v->flags & io) || v->type.kind != AMP_TYPE_TENSOR || v->type.dtype == AMP_DT_UNDEFINED ||
                v->graph != g || v->producer != n || v->id >= g->n_values ||
                (listed && (listed[v->id / 8] >> (v->id % 8) & 1)))
                continue;
            size_t at = amp_msg_begin(&c->b, 13);
            amp_put_bytes(&c->b, 1, v->name, v->name_len);
            put_type(c, &v->type, (AmpBytes){0});
            amp_msg_end(&c->b, at);
        }
    free(listed);
}

/* ---- nodes and graphs ------------------------------------------------------------ */

static void put_graph(SaveCtx *c, uint32_t num, AmpGraph *g);

enum { A_NAME = 1, A_F = 2, A_I = 3, A_S = 4, A_T = 5, A_G = 6, A_FLOATS = 7, A_INTS = 8, A_STRINGS = 9,
       A_TENSORS = 10, A_GRAPHS = 11, A_DOC = 13, A_TYPE = 20, A_REF = 21 };

static void put_attr(SaveCtx *c, const AmpAttr *at) {
    size_t m = amp_msg_begin(&c->b, 5);
    Rest r = rest_of(at->rest, &onnx__attribute_proto__descriptor);
    amp_put_str(&c->b, A_NAME, at->name);
    UPTO(r, A_F);
    if (at->has & AMP_ATTR_HAS_F) amp_put_fixed32(&c->b, A_F, &at->f);
    UPTO(r, A_I);
    if (at->has & AMP_ATTR_HAS_I) amp_put_varint(&c->b, A_I, (uint64_t)at->i);
    UPTO(r, A_S);
    if (at->has & AMP_ATTR_HAS_S) amp_put_bytes(&c->b, A_S, at->s.data, at->s.len);
    UPTO(r, A_T);
    if (at->t) put_tensor(c, A_T, at->t, true);
    UPTO(r, A_G);
    if (at->g) put_graph(c, A_G, at->g);
    UPTO(r, A_FLOATS);
    put_fixed(c, A_FLOATS, c->packed_floats, at->floats, at->n_floats, 4);
    UPTO(r, A_INTS);
    put_varints(c, A_INTS, c->packed_ints, at->ints, at->n_ints, false);
    UPTO(r, A_STRINGS);
    for (size_t i = 0; i < at->n_strings; i++) amp_put_bytes(&c->b, A_STRINGS, at->strings[i].data, at->strings[i].len);
    UPTO(r, A_TENSORS);
    for (size_t i = 0; i < at->n_tensors; i++) put_tensor(c, A_TENSORS, at->tensors[i], false);
    UPTO(r, A_GRAPHS);
    for (size_t i = 0; i < at->n_graphs; i++) put_graph(c, A_GRAPHS, at->graphs[i]);
    UPTO(r, A_DOC);
    amp_put_str(&c->b, A_DOC, at->doc_string);
    UPTO(r, A_TYPE);
    if (at->has & AMP_ATTR_HAS_TYPE) amp_put_int32(&c->b, A_TYPE, at->type);
    UPTO(r, A_REF);
    amp_put_str(&c->b, A_REF, at->ref_attr_name);
    rest_upto(c, &r, UINT32_MAX);
    rest_tail(c, &r);
    amp_msg_end(&c->b, m);
}

static void put_names(SaveCtx *c, uint32_t num, AmpValue **vals, int n) {
    for (int i = 0; i < n; i++) {
        if (vals[i]) amp_put_bytes(&c->b, num, vals[i]->name, vals[i]->name_len);
        else amp_put_bytes(&c->b, num, "", 0);
    }
}

static void put_node(SaveCtx *c, const AmpNode *n) {
    size_t m = amp_msg_begin(&c->b, 1);
    Rest r = rest_of(n->rest, &onnx__node_proto__descriptor);
    put_names(c, 1, n->inputs, n->n_inputs);
    UPTO(r, 2);
    put_names(c, 2, n->outputs, n->n_outputs);
    UPTO(r, 3);
    amp_put_str(&c->b, 3, n->name);
    UPTO(r, 4);
    amp_put_str(&c->b, 4, n->op_type);
    UPTO(r, 5);
    for (size_t i = 0; i < n->n_attrs; i++) put_attr(c, &n->attrs[i]);
    UPTO(r, 6);
    amp_put_str(&c->b, 6, n->doc_string);
    UPTO(r, 7);
    amp_put_str(&c->b, 7, n->domain);
    rest_upto(c, &r, UINT32_MAX);
    rest_tail(c, &r);
    amp_msg_end(&c->b, m);
}

static void put_graph(SaveCtx *c, uint32_t num, AmpGraph *g) {
    size_t m = amp_msg_begin(&c->b, num);
    Rest r = rest_of(g->rest, &onnx__graph_proto__descriptor);
    for (AmpNode *n = g->first; n && !c->b.failed; n = n->next) put_node(c, n);
    UPTO(r, 2);
    amp_put_str(&c->b, 2, g->name);
    UPTO(r, 5);
    for (size_t i = 0; i < g->n_initializers; i++) put_tensor(c, 5, g->initializers[i], true);
    UPTO(r, 10);
    amp_put_str(&c->b, 10, g->doc_string);
    UPTO(r, 11);
    put_value_infos(c, 11, &g->inputs);
    UPTO(r, 12);
    put_value_infos(c, 12, &g->outputs);
    UPTO(r, 13);
    put_value_infos(c, 13, &g->value_info);
    if (c->value_info) put_new_value_infos(c, g);
    rest_upto(c, &r, UINT32_MAX);
    rest_tail(c, &r);
    amp_msg_end(&c->b, m);
}

/* ---- model ----------------------------------------------------------------------- */

static void put_training(SaveCtx *c, const AmpTrainingInfo *ti) {
    size_t m = amp_msg_begin(&c->b, 20);
    Rest r = rest_of(ti->rest, &onnx__training_info_proto__descriptor);
    if (ti->initialization) put_graph(c, 1, ti->initialization);
    UPTO(r, 2);
    if (ti->algorithm) put_graph(c, 2, ti->algorithm);
    UPTO(r, 3);
    put_pairs(c, 3, ti->init_bindings, ti->n_init_bindings);
    UPTO(r, 4);
    put_pairs(c, 4, ti->update_bindings, ti->n_update_bindings);
    rest_upto(c, &r, UINT32_MAX);
    rest_tail(c, &r);
    amp_msg_end(&c->b, m);
}

static bool field_packed(const ProtobufCMessageDescriptor *d, unsigned num) {
    const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(d, num);
    return f && (f->flags & PROTOBUF_C_FIELD_FLAG_PACKED);
}

void amp_save_init(SaveCtx *c, AmpModel *m, AmpStatus *st) {
    memset(c, 0, sizeof *c);
    c->m = m;
    c->st = st;
    /* Which repeated scalars the schema packs (onnx.proto: TensorProto's data fields). */
    const ProtobufCMessageDescriptor *td = &onnx__tensor_proto__descriptor;
    c->packed_dims = field_packed(td, T_DIMS);
    c->packed_float = field_packed(td, T_FLOAT);
    c->packed_int32 = field_packed(td, T_INT32);
    c->packed_int64 = field_packed(td, T_INT64);
    c->packed_double = field_packed(td, T_DOUBLE);
    c->packed_uint64 = field_packed(td, T_UINT64);
    c->packed_floats = field_packed(&onnx__attribute_proto__descriptor, A_FLOATS);
    c->packed_ints = field_packed(&onnx__attribute_proto__descriptor, A_INTS);
}

void amp_save_model(SaveCtx *c) {
    AmpModel *m = c->m;
    Rest r = rest_of(m->rest, &onnx__model_proto__descriptor);
    if (m->has & AMP_MODEL_HAS_IR_VERSION) amp_put_varint(&c->b, 1, (uint64_t)m->ir_version);
    UPTO(r, 2);
    amp_put_str(&c->b, 2, m->producer_name);
    UPTO(r, 3);
    amp_put_str(&c->b, 3, m->producer_version);
    UPTO(r, 4);
    amp_put_str(&c->b, 4, m->domain);
    UPTO(r, 5);
    if (m->has & AMP_MODEL_HAS_MODEL_VERSION) amp_put_varint(&c->b, 5, (uint64_t)m->model_version);
    UPTO(r, 6);
    amp_put_str(&c->b, 6, m->doc_string);
    UPTO(r, 7);
    put_graph(c, 7, m->graph);
    UPTO(r, 8);
    for (size_t i = 0; i < m->n_opsets; i++) {
        size_t at = amp_msg_begin(&c->b, 8);
        amp_put_str(&c->b, 1, m->opsets[i].domain);
        if (m->opsets[i].has_version) amp_put_varint(&c->b, 2, (uint64_t)m->opsets[i].version);
        amp_msg_end(&c->b, at);
    }
    UPTO(r, 14);
    put_pairs(c, 14, m->metadata, m->n_metadata);
    UPTO(r, 20);
    for (size_t i = 0; i < m->n_training; i++) put_training(c, &m->training[i]);
    UPTO(r, 25);
    for (size_t i = 0; i < m->n_functions; i++)
        amp_put_bytes(&c->b, 25, m->functions[i].packed.data, m->functions[i].packed.len);
    rest_upto(c, &r, UINT32_MAX);
    rest_tail(c, &r);
}
