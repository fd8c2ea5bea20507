/* The loader's readers of single fields on the wire, for every message it decodes: its two
 * errors, strings, a singular message given more than once, a message's name, string
 * pairs. They call nothing else of the loader. */
#include <string.h>

#include "ir/load_impl.h"

AmpCode amp_load_oom(LoadCtx *c) {
    return amp_fail(c->st, AMP_ERR_INTERNAL, "out of memory");
}

AmpCode amp_load_malformed(LoadCtx *c) {
    if (c->tensor_file)
        return amp_fail(c->st, AMP_ERR_INPUT, "not an ONNX TensorProto: the protobuf encoding is malformed");
    return amp_fail(c->st, AMP_ERR_INPUT,
                    "not an ONNX model: the protobuf encoding is malformed or truncated (%zu bytes)", c->total);
}

const char *amp_load_str(LoadCtx *c, const AmpWireField *f) {
    return amp_arena_strndup(c->arena, (const char *)f->data, amp_wire_strlen(f));
}

/* ---- several records of one field -------------------------------------------------- */

AmpCode amp_load_merged(LoadCtx *c, const uint8_t *from, const uint8_t *end, uint32_t num,
                        size_t count, const uint8_t **data, size_t *len) {
    AmpWireField f;
    size_t total = 0;
    const uint8_t *p = from;
    while (amp_wire_next(&p, end, &f) > 0)
        if (f.num == num) {
            if (count == 1) {
                *data = f.data;
                *len = f.len;
                return AMP_OK;
            }
            total += f.len;
        }
    uint8_t *buf = amp_arena_alloc_raw(c->arena, total);
    if (!buf) return amp_load_oom(c);
    size_t k = 0;
    for (p = from; amp_wire_next(&p, end, &f) > 0;)
        if (f.num == num) {
            if (f.len) memcpy(buf + k, f.data, f.len);
            k += f.len;
        }
    *data = buf;
    *len = total;
    return AMP_OK;
}

bool amp_load_name(const uint8_t *p, size_t len, uint32_t num, const char **name, size_t *n) {
    const uint8_t *end = p + len;
    AmpWireField f;
    bool found = false;
    while (amp_wire_next(&p, end, &f) > 0)
        if (f.num == num && f.wt == AMP_WT_LEN) {
            *name = (const char *)f.data;
            *n = amp_wire_strlen(&f);
            found = true;
        }
    return found;
}

/* ---- string pairs ------------------------------------------------------------------- */

AmpCode amp_load_two_strs(LoadCtx *c, const AmpWireField *mf, uint32_t na, const char **a, uint32_t nb,
                          const char **b) {
    const uint8_t *p = mf->data, *end = mf->data + mf->len;
    AmpWireField f;
    int r;
    while ((r = amp_wire_next(&p, end, &f)) > 0) {
        if (f.num != na && f.num != nb) continue;
        if (f.wt != AMP_WT_LEN) return amp_load_malformed(c);
        const char *s = amp_load_str(c, &f);
        if (!s) return amp_load_oom(c);
        *(f.num == na ? a : b) = s;
    }
    return r < 0 ? amp_load_malformed(c) : AMP_OK;
}

/* A StringStringEntryProto (key 1, value 2; anything else is dropped, as before). */
AmpCode amp_load_pair(LoadCtx *c, const AmpWireField *ef, AmpStrPair *out) {
    return amp_load_two_strs(c, ef, 1, &out->key, 2, &out->value);
}

AmpCode amp_load_pairs(LoadCtx *c, const uint8_t *msg, const uint8_t *end, uint32_t num, size_t n,
                       AmpStrPair **out) {
    if (!n) return AMP_OK;
    AmpStrPair *pairs = amp_arena_calloc(c->arena, n, sizeof *pairs);
    if (!pairs) return amp_load_oom(c);
    *out = pairs;
    AmpWireField f;
    size_t k = 0;
    while (k < n && amp_wire_next(&msg, end, &f) > 0) {
        if (f.num != num) continue;
        AmpCode rc = amp_load_pair(c, &f, &pairs[k++]);
        if (rc) return rc;
    }
    return AMP_OK;
}
