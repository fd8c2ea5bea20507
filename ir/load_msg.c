/* The loader's messages below a graph: TensorProto (every length and dim checked, data
 * copied into the arena), AttributeProto, and the `rest` blobs that keep every field the
 * IR does not model for the saver; ValueInfoProto and its TypeProto are load_type.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/extdata.h"
#include "ir/load_impl.h"

/* A tensor with more elements than this is rejected before any size arithmetic. */
#define AMP_MAX_NELEM (UINT64_C(1) << 60)

#define BIT(n) (1u << (n))

/* ---- rest blobs ------------------------------------------------------------------ */

static bool scratch_room(LoadCtx *c, size_t need) {
    if (need <= c->scratch_cap) return true;
    size_t cap = c->scratch_cap ? c->scratch_cap : 4096;
    while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    uint8_t *s = realloc(c->scratch, cap);
    if (!s) return false;
    c->scratch = s;
    c->scratch_cap = cap;
    return true;
}

AmpCode amp_load_rest(LoadCtx *c, const ProtobufCMessageDescriptor *desc, const uint8_t *p,
                      const uint8_t *end, uint32_t modelled, AmpBytes *out) {
    out->data = NULL;
    out->len = 0;
    size_t n = 0;
    AmpWireField f;
    int r;
    while ((r = amp_wire_next(&p, end, &f)) > 0) {
        if (f.num < 32 && (modelled & BIT(f.num))) continue;
        size_t len = (size_t)(f.end - f.start);
        if (!scratch_room(c, n + len)) return amp_load_oom(c);
        memcpy(c->scratch + n, f.start, len);
        n += len;
    }
    if (r < 0) return amp_load_malformed(c);
    if (!n) return AMP_OK;
    /* protobuf-c checks what these fields hold and packs them canonically. */
    ProtobufCMessage *msg;
    AmpCode rc = amp_load_unpack(c, desc, c->scratch, n, &msg);
    if (rc) return rc;
    size_t size = protobuf_c_message_get_packed_size(msg);
    uint8_t *buf = size ? amp_arena_alloc_raw(c->arena, size) : NULL;
    if (size && buf) {
        protobuf_c_message_pack(msg, buf);
        out->data = buf;
        out->len = size;
    }
    protobuf_c_message_free_unpacked(msg, NULL);
    return size && !buf ? amp_load_oom(c) : AMP_OK;
}

/* ---- repeated scalars: unpacked (one record each) or packed (one payload) ---------- */

/* How many elements record f of a repeated scalar field holds: 1 when unpacked (wire
 * type `wt`), else the count in its packed payload. false when malformed. */
static bool count_elems(const AmpWireField *f, unsigned wt, size_t *n) {
    if (f->wt == wt) {
        *n = 1;
        return true;
    }
    if (f->wt != AMP_WT_LEN) return false;
    if (wt == AMP_WT_I32 || wt == AMP_WT_I64) {
        size_t w = wt == AMP_WT_I32 ? 4 : 8;
        *n = f->len / w;
        return f->len % w == 0;
    }
    size_t k = 0;
    const uint8_t *p = f->data, *end = f->data + f->len;
    uint64_t v;
    while (p < end) {
        if (!amp_wire_varint(&p, end, &v)) return false;
        k++;
    }
    *n = k;
    return true;
}

/* Appends the elements of record f (checked by count_elems) to dst at *k: varints as
 * 64-bit values, or fixed-width ones of `w` bytes. */
static void take_varints(const AmpWireField *f, uint64_t *dst, size_t *k) {
    if (f->wt == AMP_WT_VARINT) {
        dst[(*k)++] = f->v;
        return;
    }
    const uint8_t *p = f->data, *end = f->data + f->len;
    while (p < end && amp_wire_varint(&p, end, &dst[*k])) ++*k;
}

static void take_fixed(const AmpWireField *f, uint8_t *dst, size_t w, size_t *k) {
    if (f->wt != AMP_WT_LEN) {
        memcpy(dst + *k * w, &f->v, w); /* little-endian host: the low bytes */
        ++*k;
        return;
    }
    if (f->len) memcpy(dst + *k * w, f->data, f->len);
    *k += f->len / w;
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

enum { T_DIMS = 1, T_DTYPE = 2, T_FLOAT = 4, T_INT32 = 5, T_STRING = 6, T_INT64 = 7, T_NAME = 8,
       T_RAW = 9, T_DOUBLE = 10, T_UINT64 = 11, T_DOC = 12, T_EXTERNAL = 13, T_LOCATION = 14 };
#define TENSOR_MODELLED                                                                                 \
    (BIT(T_DIMS) | BIT(T_DTYPE) | BIT(T_FLOAT) | BIT(T_INT32) | BIT(T_STRING) | BIT(T_INT64) |          \
     BIT(T_NAME) | BIT(T_RAW) | BIT(T_DOUBLE) | BIT(T_UINT64) | BIT(T_DOC) | BIT(T_EXTERNAL) |          \
     BIT(T_LOCATION))

/* The fields of a TensorProto: counts of the repeated ones, and the rest as read. */
static AmpCode tensor_fields(LoadCtx *c, AmpTensor *t, const uint8_t *p, const uint8_t *end, bool *rest) {
    AmpWireField f;
    int r;
    size_t k;
    while ((r = amp_wire_next(&p, end, &f)) > 0) {
        bool ok = true;
        switch (f.num) {
        case T_DIMS: ok = count_elems(&f, AMP_WT_VARINT, &k), t->ndims += k; break;
        case T_FLOAT: ok = count_elems(&f, AMP_WT_I32, &k), t->n_float += k; break;
        case T_INT32: ok = count_elems(&f, AMP_WT_VARINT, &k), t->n_int32 += k; break;
        case T_INT64: ok = count_elems(&f, AMP_WT_VARINT, &k), t->n_int64 += k; break;
        case T_DOUBLE: ok = count_elems(&f, AMP_WT_I64, &k), t->n_double += k; break;
        case T_UINT64: ok = count_elems(&f, AMP_WT_VARINT, &k), t->n_uint64 += k; break;
        case T_STRING: ok = f.wt == AMP_WT_LEN, t->n_string++; break;
        case T_EXTERNAL: ok = f.wt == AMP_WT_LEN, t->n_external++; break;
        case T_DTYPE:
            ok = f.wt == AMP_WT_VARINT;
            t->dtype = (int32_t)(uint32_t)f.v;
            t->has |= AMP_TENSOR_HAS_DTYPE;
            break;
        case T_LOCATION:
            ok = f.wt == AMP_WT_VARINT;
            t->data_location = (int32_t)(uint32_t)f.v;
            t->has |= AMP_TENSOR_HAS_LOCATION;
            break;
        case T_NAME:
        case T_DOC:
            if ((ok = f.wt == AMP_WT_LEN)) {
                const char *s = amp_load_str(c, &f);
                if (!s) return amp_load_oom(c);
                if (f.num == T_NAME) t->name = s;
                else t->doc_string = s;
            }
            break;
        case T_RAW:
            if ((ok = f.wt == AMP_WT_LEN)) {
                t->has |= AMP_TENSOR_HAS_RAW;
                t->raw.data = f.data; /* copied once the last one is known */
                t->raw.len = f.len;
            }
            break;
        default: *rest = true;
        }
        if (!ok) return amp_load_malformed(c);
    }
    return r < 0 ? amp_load_malformed(c) : AMP_OK;
}

/* Second sweep: the repeated fields' elements, in file order. */
static AmpCode tensor_arrays(LoadCtx *c, AmpTensor *t, const uint8_t *p, const uint8_t *end) {
    AmpArena *a = c->arena;
    size_t nd = t->ndims, ni32 = t->n_int32, nu64 = t->n_uint64, ns = t->n_string, ne = t->n_external;
    /* Varint fields are read as 64-bit values first; int32_data is narrowed after. */
    uint64_t *dims = nd ? amp_arena_alloc_raw(a, nd * sizeof *dims) : NULL;
    uint64_t *i32 = ni32 ? malloc(ni32 * sizeof *i32) : NULL;
    t->int64_data = t->n_int64 ? amp_arena_alloc_raw(a, t->n_int64 * sizeof *t->int64_data) : NULL;
    t->uint64_data = nu64 ? amp_arena_alloc_raw(a, nu64 * sizeof *t->uint64_data) : NULL;
    t->float_data = t->n_float ? amp_arena_alloc_raw(a, t->n_float * sizeof *t->float_data) : NULL;
    t->double_data = t->n_double ? amp_arena_alloc_raw(a, t->n_double * sizeof *t->double_data) : NULL;
    t->string_data = ns ? amp_arena_calloc(a, ns, sizeof *t->string_data) : NULL;
    t->external = ne ? amp_arena_calloc(a, ne, sizeof *t->external) : NULL;
    t->int32_data = ni32 ? amp_arena_alloc_raw(a, ni32 * sizeof *t->int32_data) : NULL;
    if ((nd && !dims) || (ni32 && (!i32 || !t->int32_data)) || (t->n_int64 && !t->int64_data) ||
        (nu64 && !t->uint64_data) || (t->n_float && !t->float_data) || (t->n_double && !t->double_data) ||
        (ns && !t->string_data) || (ne && !t->external)) {
        free(i32);
        return amp_load_oom(c);
    }
    size_t kd = 0, k32 = 0, k64 = 0, ku = 0, kf = 0, kdb = 0, ks = 0, ke = 0;
    AmpWireField f;
    AmpCode rc = AMP_OK;
    while (!rc && amp_wire_next(&p, end, &f) > 0) {
        switch (f.num) {
        case T_DIMS: take_varints(&f, dims, &kd); break;
        case T_INT32: take_varints(&f, i32, &k32); break;
        case T_INT64: take_varints(&f, (uint64_t *)t->int64_data, &k64); break;
        case T_UINT64: take_varints(&f, t->uint64_data, &ku); break;
        case T_FLOAT: take_fixed(&f, (uint8_t *)t->float_data, 4, &kf); break;
        case T_DOUBLE: take_fixed(&f, (uint8_t *)t->double_data, 8, &kdb); break;
        case T_STRING:
            t->string_data[ks].len = f.len;
            if (!(t->string_data[ks++].data = amp_arena_memdup(a, f.data, f.len))) rc = amp_load_oom(c);
            break;
        case T_EXTERNAL: rc = amp_load_pair(c, &f, &t->external[ke++]); break;
        default: break;
        }
    }
    for (size_t i = 0; i < ni32; i++) t->int32_data[i] = (int32_t)(uint32_t)i32[i];
    free(i32);
    t->dims = (int64_t *)dims;
    return rc;
}

AmpCode amp_load_tensor(LoadCtx *c, const uint8_t *p, size_t len, const char *where, AmpTensor **out) {
    AmpArena *a = c->arena;
    const uint8_t *end = p + len;
    AmpTensor *t = amp_arena_alloc(a, sizeof *t);
    if (!t) return amp_load_oom(c);
    bool rest = false;
    AmpCode rc = tensor_fields(c, t, p, end, &rest);
    if (rc) return rc;
    const char *tname = t->name ? t->name : "";
    if (t->dtype < 0 || t->dtype >= AMP_DT__COUNT)
        return amp_fail(c->st, AMP_ERR_UNSUPPORTED, "%s: tensor '%s' has unknown data type %d", where,
                        tname, t->dtype);
    if ((rc = tensor_arrays(c, t, p, end))) return rc;
    uint64_t nelem = 1;
    for (size_t i = 0; i < t->ndims; i++) {
        if (t->dims[i] < 0)
            return amp_fail(c->st, AMP_ERR_INPUT, "%s: tensor '%s' has negative dim %lld at axis %zu",
                            where, tname, (long long)t->dims[i], i);
        uint64_t d = (uint64_t)t->dims[i];
        if (d && nelem > AMP_MAX_NELEM / d)
            return amp_fail(c->st, AMP_ERR_INPUT,
                            "%s: tensor '%s' has dims whose product overflows (axis %zu)", where, tname, i);
        nelem *= d;
    }
    t->nelem = nelem;
    if ((t->has & AMP_TENSOR_HAS_RAW) && !c->borrow_raw) {
        /* The last raw_data is the one protobuf keeps. */
        if (!(t->raw.data = amp_arena_memdup(a, t->raw.data, t->raw.len))) return amp_load_oom(c);
    }
    if (rest && (rc = amp_load_rest(c, &onnx__tensor_proto__descriptor, p, end, TENSOR_MODELLED, &t->rest)))
        return rc;

    /* Where is the data, and is there exactly as much as the dims say? */
    size_t need = 0;
    bool sized = amp_tensor_expected_bytes(t->dtype, nelem, &need);
    int forms = (t->has & AMP_TENSOR_HAS_RAW ? 1 : 0) + (t->n_float || t->n_int32 || t->n_int64 ||
                                                         t->n_double || t->n_uint64 || t->n_string);
    if (t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        const char *loc = NULL, *off = NULL, *lens = NULL;
        for (size_t i = 0; i < t->n_external; i++) {
            const char *k = t->external[i].key ? t->external[i].key : "";
            if (strcmp(k, "location") == 0) loc = t->external[i].value;
            else if (strcmp(k, "offset") == 0) off = t->external[i].value;
            else if (strcmp(k, "length") == 0) lens = t->external[i].value;
        }
        int64_t offset = 0, length = -1;
        if (!loc)
            return amp_fail(c->st, AMP_ERR_INPUT, "%s: tensor '%s' is external but has no location", where, tname);
        if ((off && !parse_i64(off, &offset)) || (lens && !parse_i64(lens, &length)))
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
        rc = amp_extdata_map(c->m, loc, offset, length, &t->raw, c->st);
        if (rc) {
            amp_status_prefix(c->st, "%s: tensor '%s': ", where, tname);
            return rc;
        }
        /* Kernels read a tensor as an array of its elements: data at an offset that is no
         * multiple of the element's size (a writer that packs tensors without padding)
         * is copied to the arena's aligned memory once, never read in place. */
        size_t align = amp_dtype_bits(t->dtype) / 8;
        if (align > 8) align = 8; /* complex128: its doubles */
        if (t->raw.len && align > 1 && (uintptr_t)t->raw.data % align &&
            !(t->raw.data = amp_arena_memdup(a, t->raw.data, t->raw.len)))
            return amp_load_oom(c);
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
        /* Every entry in the one field of the dtype: an entry in another field is not the
         * tensor's data (even when the dims hold no element), and would be saved beside it. */
        uint64_t expect;
        size_t have = typed_count(t, nelem, &expect);
        size_t all = t->n_float + t->n_int32 + t->n_int64 + t->n_double + t->n_uint64 + t->n_string;
        if (have != expect || all != have)
            return amp_fail(c->st, AMP_ERR_INPUT,
                            "%s: tensor '%s' (%s) has %zu data entries in the wrong field or count; "
                            "its dims need %llu",
                            where, tname, amp_dtype_name(t->dtype), all, (unsigned long long)expect);
    } else if (nelem > 0 && t->dtype != AMP_DT_UNDEFINED) {
        return amp_fail(c->st, AMP_ERR_INPUT, "%s: tensor '%s' has dims with %llu elements but no data",
                        where, tname, (unsigned long long)nelem);
    }
    *out = t;
    return AMP_OK;
}

AmpCode amp_load_sparse_dense(LoadCtx *c, const uint8_t *p, size_t len, const char *where, AmpTensor **out) {
    AmpSparse s;
    AmpTensor *vals = NULL, *idx = NULL;
    AmpCode rc = amp_load_sparse_fields(c, p, len, where, &s);
    if (!rc) rc = amp_load_tensor(c, s.values, s.values_len, where, &vals);
    if (!rc && s.n_indices) rc = amp_load_tensor(c, s.indices, s.indices_len, where, &idx);
    return rc ? rc : amp_load_sparse_make(c, &s, vals, idx, where, out);
}

/* ---- attributes ------------------------------------------------------------------ */

enum { A_NAME = 1, A_F = 2, A_I = 3, A_S = 4, A_T = 5, A_G = 6, A_FLOATS = 7, A_INTS = 8, A_STRINGS = 9,
       A_TENSORS = 10, A_GRAPHS = 11, A_DOC = 13, A_TYPE = 20, A_REF = 21, A_SPARSE = 22, A_SPARSES = 23 };
#define ATTR_MODELLED                                                                                   \
    (BIT(A_NAME) | BIT(A_F) | BIT(A_I) | BIT(A_S) | BIT(A_T) | BIT(A_G) | BIT(A_FLOATS) | BIT(A_INTS) |  \
     BIT(A_STRINGS) | BIT(A_TENSORS) | BIT(A_GRAPHS) | BIT(A_DOC) | BIT(A_TYPE) | BIT(A_REF))

/* Bytes with one extra NUL, so string attributes read as C strings. */
static AmpCode attr_bytes(LoadCtx *c, const AmpWireField *f, AmpBytes *out) {
    uint8_t *s = amp_arena_alloc_raw(c->arena, f->len + 1);
    if (!s) return amp_load_oom(c);
    if (f->len) memcpy(s, f->data, f->len);
    s[f->len] = 0;
    out->data = s;
    out->len = f->len;
    return AMP_OK;
}

/* First sweep: the singular fields, and how many of each repeated one. */
static AmpCode attr_fields(LoadCtx *c, AmpAttr *at, const uint8_t *p, const uint8_t *end, size_t *n_t,
                           size_t *n_g, bool *rest) {
    AmpWireField f;
    int r;
    size_t k;
    while ((r = amp_wire_next(&p, end, &f)) > 0) {
        bool ok = true;
        AmpCode rc = AMP_OK;
        switch (f.num) {
        case A_NAME:
        case A_DOC:
        case A_REF:
            if ((ok = f.wt == AMP_WT_LEN)) {
                const char *s = amp_load_str(c, &f);
                if (!s) return amp_load_oom(c);
                if (f.num == A_NAME) at->name = s;
                else if (f.num == A_DOC) at->doc_string = s;
                else at->ref_attr_name = s;
            }
            break;
        case A_F:
            if ((ok = f.wt == AMP_WT_I32)) {
                uint32_t w = (uint32_t)f.v;
                memcpy(&at->f, &w, 4);
                at->has |= AMP_ATTR_HAS_F;
            }
            break;
        case A_I:
            if ((ok = f.wt == AMP_WT_VARINT)) at->i = (int64_t)f.v, at->has |= AMP_ATTR_HAS_I;
            break;
        case A_TYPE:
            if ((ok = f.wt == AMP_WT_VARINT)) at->type = (int32_t)(uint32_t)f.v, at->has |= AMP_ATTR_HAS_TYPE;
            break;
        case A_S:
            if ((ok = f.wt == AMP_WT_LEN)) rc = attr_bytes(c, &f, &at->s), at->has |= AMP_ATTR_HAS_S;
            break;
        case A_T: ok = f.wt == AMP_WT_LEN, ++*n_t; break;
        case A_G: ok = f.wt == AMP_WT_LEN, ++*n_g; break;
        case A_FLOATS: ok = count_elems(&f, AMP_WT_I32, &k), at->n_floats += k; break;
        case A_INTS: ok = count_elems(&f, AMP_WT_VARINT, &k), at->n_ints += k; break;
        case A_STRINGS: ok = f.wt == AMP_WT_LEN, at->n_strings++; break;
        case A_TENSORS: ok = f.wt == AMP_WT_LEN, at->n_tensors++; break;
        case A_GRAPHS: ok = f.wt == AMP_WT_LEN, at->n_graphs++; break;
        default: *rest = true;
        }
        if (rc) return rc;
        if (!ok) return amp_load_malformed(c);
    }
    return r < 0 ? amp_load_malformed(c) : AMP_OK;
}

/* The unmodelled fields of attribute [p, end) into its rest, where sparse tensors wait: a
 * Constant's sparse_value (opset 11 on) is made dense, the attribute becoming the `value`
 * it means; any other sparse tensor stays packed, if none of its data is external
 * (load_sparse.c says why). */
static AmpCode sparse_attr(LoadCtx *c, const uint8_t *p, const uint8_t *end, AmpNode *n, AmpAttr *at,
                           const char *where) {
    size_t n_sp = 0;
    uint32_t modelled = ATTR_MODELLED;
    bool constant = n->op == AMP_OP_Constant && at->name && strcmp(at->name, "sparse_value") == 0 &&
                    at->type == AMP_ATTR_SPARSE_TENSOR && amp_model_opset(c->m, n->domain) >= 11;
    AmpWireField f;
    AmpCode rc = AMP_OK;
    for (const uint8_t *q = p; !rc && amp_wire_next(&q, end, &f) > 0;) {
        if (f.num == A_SPARSE) n_sp++;
        if (((f.num == A_SPARSE && !constant) || f.num == A_SPARSES) && f.wt == AMP_WT_LEN)
            rc = amp_load_sparse_check(c, f.data, f.len, where);
    }
    const uint8_t *data;
    size_t dlen;
    if (!rc && n_sp && constant) {
        if ((rc = amp_load_merged(c, p, end, A_SPARSE, n_sp, &data, &dlen)) ||
            (rc = amp_load_sparse_dense(c, data, dlen, where, &at->t)))
            return rc;
        at->name = "value";
        at->type = AMP_ATTR_TENSOR;
        modelled |= BIT(A_SPARSE);
    }
    return rc ? rc : amp_load_rest(c, &onnx__attribute_proto__descriptor, p, end, modelled, &at->rest);
}

AmpCode amp_load_attr(LoadCtx *c, const uint8_t *p, size_t len, AmpNode *n, AmpAttr *at) {
    AmpArena *a = c->arena;
    const uint8_t *end = p + len;
    size_t n_t = 0, n_g = 0;
    bool rest = false;
    AmpCode rc = attr_fields(c, at, p, end, &n_t, &n_g, &rest);
    if (rc) return rc;
    /* Messages name the node and the attribute; only attributes holding tensors or
     * graphs can need them. */
    char where[256];
    where[0] = '\0';
    if (n_t || n_g || at->n_tensors || at->n_graphs || rest)
        snprintf(where, sizeof where, "node '%s' (%s) attribute '%s'", n->name ? n->name : "",
                 n->op_type, at->name ? at->name : "");
    const uint8_t *data;
    size_t dlen;
    if (n_t && ((rc = amp_load_merged(c, p, end, A_T, n_t, &data, &dlen)) ||
                (rc = amp_load_tensor(c, data, dlen, where, &at->t))))
        return rc;
    if (n_g && ((rc = amp_load_merged(c, p, end, A_G, n_g, &data, &dlen)) ||
                (rc = c->load_graph(c, data, dlen, n->graph, n, where, &at->g))))
        return rc;
    if ((at->n_floats && !(at->floats = amp_arena_alloc_raw(a, at->n_floats * sizeof *at->floats))) ||
        (at->n_ints && !(at->ints = amp_arena_alloc_raw(a, at->n_ints * sizeof *at->ints))) ||
        (at->n_strings && !(at->strings = amp_arena_calloc(a, at->n_strings, sizeof *at->strings))) ||
        (at->n_tensors && !(at->tensors = amp_arena_calloc(a, at->n_tensors, sizeof *at->tensors))) ||
        (at->n_graphs && !(at->graphs = amp_arena_calloc(a, at->n_graphs, sizeof *at->graphs))))
        return amp_load_oom(c);
    size_t kf = 0, ki = 0, ks = 0, kt = 0, kg = 0;
    AmpWireField f;
    const uint8_t *q = p;
    /* Repeated numbers and strings, in file order (most attributes have none). */
    while ((at->n_floats || at->n_ints || at->n_strings) && !rc && amp_wire_next(&q, end, &f) > 0) {
        switch (f.num) {
        case A_FLOATS: take_fixed(&f, (uint8_t *)at->floats, 4, &kf); break;
        case A_INTS: take_varints(&f, (uint64_t *)at->ints, &ki); break;
        case A_STRINGS: rc = attr_bytes(c, &f, &at->strings[ks++]); break;
        default: break;
        }
    }
    /* Tensors, then graphs, each in file order (as values are created while loading). */
    for (q = p; !rc && kt < at->n_tensors && amp_wire_next(&q, end, &f) > 0;)
        if (f.num == A_TENSORS) rc = amp_load_tensor(c, f.data, f.len, where, &at->tensors[kt++]);
    for (q = p; !rc && kg < at->n_graphs && amp_wire_next(&q, end, &f) > 0;)
        if (f.num == A_GRAPHS) rc = c->load_graph(c, f.data, f.len, n->graph, n, where, &at->graphs[kg++]);
    if (!rc && rest) rc = sparse_attr(c, p, end, n, at, where);
    return rc;
}
