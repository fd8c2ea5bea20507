/* onnxruntime-training's checkpoint (ort_checkpoint.h), read with a FlatBuffers walker of
 * our own: every offset, length and size is checked against the buffer before it is used,
 * so a damaged or hostile file is an error, never a read out of bounds.
 *
 * FlatBuffers in brief: the buffer starts with the root table's offset (u32) and a 4-byte
 * file identifier. A table starts with an i32 back to its vtable: u16 vtable length, u16
 * table length, then one u16 per field, its position in the table (0: absent, default).
 * A field holding a table, vector or string holds a u32 forward offset to it; a vector is
 * a u32 count and its elements (a vector of tables: u32 forward offsets); a string is a
 * byte vector. All little-endian.
 *
 * The schema read (onnxruntime's ort_training_checkpoint.fbs and ort.fbs), by field index:
 *   Checkpoint        0 version:int32  1 module_state:ModuleState  2 optimizer_groups:[OptimizerGroup]
 *   ModuleState       0 requires_grad_params:[Tensor]  1 frozen_params:[Tensor]
 *                     2 is_nominal_state:bool  3 has_external_data:bool
 *   OptimizerGroup    0 group_name:string  1 step:int64  2 initial_learning_rate:float
 *                     3 optimizer_states:[ParameterOptimizerState]
 *   ParameterOptimizerState  0 param_name:string  1 momentums:[Tensor]
 *   Tensor            0 name:string  2 dims:[int64]  3 data_type:int32 (ONNX's numbering)
 *                     4 raw_data:[uint8]  6 external_data_offset:int64 (default -1) */
#include "ir/ort_checkpoint.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Fb {
    const uint8_t *b;
    size_t n;
    AmpModel *m;
    AmpStatus *st;
    bool bad;         /* a check failed: st says which */
} Fb;

typedef struct Tbl {
    size_t pos, vt;
    uint16_t vt_len, len;
} Tbl;

/* The first failed check explains; later ones (consequences) keep its message. */
static bool damaged(Fb *f, const char *what) {
    if (!f->bad) amp_fail(f->st, AMP_ERR_INPUT, "damaged checkpoint: %s", what);
    f->bad = true;
    return false;
}

static bool has(const Fb *f, size_t at, size_t bytes) {
    return at <= f->n && f->n - at >= bytes;
}

static uint64_t le(const uint8_t *p, int bytes) {
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static bool u32_at(Fb *f, size_t at, uint32_t *v) {
    if (!has(f, at, 4)) return damaged(f, "an offset past the end");
    *v = (uint32_t)le(f->b + at, 4);
    return true;
}

/* The table whose offset is stored at `at` (a forward u32). */
static bool table_ref(Fb *f, size_t at, Tbl *t) {
    uint32_t off;
    if (!u32_at(f, at, &off)) return false;
    if (off == 0 || (size_t)off > f->n - at) return damaged(f, "a table offset past the end");
    t->pos = at + off;
    if (!has(f, t->pos, 4)) return damaged(f, "a table past the end");
    int32_t back = (int32_t)(uint32_t)le(f->b + t->pos, 4);
    int64_t vt = (int64_t)t->pos - back;
    if (vt < 0 || !has(f, (size_t)vt, 4)) return damaged(f, "a vtable outside the buffer");
    t->vt = (size_t)vt;
    t->vt_len = (uint16_t)le(f->b + t->vt, 2);
    t->len = (uint16_t)le(f->b + t->vt + 2, 2);
    if (t->vt_len < 4 || (t->vt_len & 1) || !has(f, t->vt, t->vt_len) || t->len < 4 || !has(f, t->pos, t->len))
        return damaged(f, "a vtable or table of a wrong size");
    return true;
}

/* Where field k of t lies, with `bytes` of it inside the table; 0 when absent. */
static size_t field(Fb *f, const Tbl *t, int k, size_t bytes) {
    size_t o = 4 + 2 * (size_t)k;
    if (o + 2 > t->vt_len) return 0;
    size_t at = (size_t)le(f->b + t->vt + o, 2);
    if (!at) return 0;
    if (at < 4 || at > t->len || t->len - at < bytes) return damaged(f, "a field outside its table"), 0;
    return t->pos + at;
}

static int64_t field_int(Fb *f, const Tbl *t, int k, int bytes, int64_t dflt) {
    size_t at = field(f, t, k, (size_t)bytes);
    if (!at) return dflt;
    uint64_t v = le(f->b + at, bytes);
    if (bytes == 4) return (int32_t)(uint32_t)v;
    if (bytes == 1) return (int64_t)v;
    return (int64_t)v;
}

/* Field k of t as a vector of `elem`-byte elements: its first element and count
 * (absent: count 0). */
static bool field_vec(Fb *f, const Tbl *t, int k, size_t elem, size_t *first, size_t *count) {
    *first = 0, *count = 0;
    size_t at = field(f, t, k, 4);
    if (!at) return !f->bad;
    uint32_t off, n;
    if (!u32_at(f, at, &off) || off == 0 || (size_t)off > f->n - at) return damaged(f, "a vector offset past the end");
    size_t v = at + off;
    if (!u32_at(f, v, &n)) return false;
    if ((uint64_t)n * elem > f->n - v - 4) return damaged(f, "a vector longer than the file");
    *first = v + 4, *count = n;
    return true;
}

/* Field k of t as a string copied into the arena ("" when absent; NULL on failure). */
static const char *field_str(Fb *f, const Tbl *t, int k) {
    size_t at, n;
    if (!field_vec(f, t, k, 1, &at, &n)) return NULL;
    if (n && memchr(f->b + at, 0, n)) return damaged(f, "a name with a NUL byte inside"), NULL;
    char *s = amp_arena_strndup(&f->m->arena, n ? (const char *)f->b + at : "", n);
    if (!s) amp_fail(f->st, AMP_ERR_INTERNAL, "out of memory reading a checkpoint"), f->bad = true;
    return s;
}

/* One Tensor table as an AmpTensor in the arena. */
static AmpTensor *tensor(Fb *f, const Tbl *t) {
    const char *name = field_str(f, t, 0);
    size_t dims_at, ndims, raw_at, nraw;
    if (!name || !field_vec(f, t, 2, 8, &dims_at, &ndims) || !field_vec(f, t, 4, 1, &raw_at, &nraw)) return NULL;
    int dtype = (int)field_int(f, t, 3, 4, 0);
    int64_t ext = field_int(f, t, 6, 8, -1);
    if (f->bad) return NULL;
    if (ext != -1) {
        amp_fail(f->st, AMP_ERR_UNSUPPORTED, "tensor '%s' keeps its data in an external file, which ampc does not read",
                 name);
        f->bad = true;
        return NULL;
    }
    if (ndims > 64) return damaged(f, "a tensor of more than 64 dimensions"), NULL;
    AmpTensor *x = amp_arena_calloc(&f->m->arena, 1, sizeof *x);
    int64_t *dims = amp_arena_alloc(&f->m->arena, (ndims ? ndims : 1) * sizeof *dims);
    uint8_t *raw = amp_arena_alloc(&f->m->arena, nraw ? nraw : 1);
    if (!x || !dims || !raw) {
        amp_fail(f->st, AMP_ERR_INTERNAL, "out of memory reading a checkpoint");
        f->bad = true;
        return NULL;
    }
    uint64_t nelem = 1;
    for (size_t i = 0; i < ndims; i++) {
        dims[i] = (int64_t)le(f->b + dims_at + 8 * i, 8);
        if (dims[i] < 0 || (dims[i] && nelem > UINT64_MAX / (uint64_t)dims[i]))
            return damaged(f, "a tensor dimension negative or too large"), NULL;
        nelem *= (uint64_t)dims[i];
    }
    size_t want;
    if (!amp_tensor_expected_bytes(dtype, nelem, &want) || want != nraw) {
        amp_fail(f->st, AMP_ERR_INPUT, "damaged checkpoint: tensor '%s' (%s, %" PRIu64 " elements) holds %zu bytes",
                 name, amp_dtype_name(dtype), nelem, nraw);
        f->bad = true;
        return NULL;
    }
    memcpy(raw, f->b + raw_at, nraw);
    *x = (AmpTensor){.name = name, .dtype = dtype, .has = AMP_TENSOR_HAS_DTYPE | AMP_TENSOR_HAS_RAW,
                     .ndims = ndims, .dims = dims, .nelem = nelem, .raw = {raw, nraw}};
    return x;
}

/* The tensors of vector field k of t, appended to out->params. */
static bool params(Fb *f, const Tbl *ms, int k, bool requires_grad, AmpOrtCheckpoint *out, size_t cap) {
    size_t at, n;
    if (!field_vec(f, ms, k, 4, &at, &n)) return false;
    for (size_t i = 0; i < n; i++) {
        Tbl t;
        if (!table_ref(f, at + 4 * i, &t)) return false;
        AmpTensor *x = tensor(f, &t);
        if (!x) return false;
        if (out->n_params >= cap) return damaged(f, "more parameters than counted");
        if (amp_ort_checkpoint_find(out, x->name)) return damaged(f, "a parameter named twice");
        out->params[out->n_params++] = (AmpOrtParam){.value = x, .requires_grad = requires_grad};
    }
    return true;
}

/* optimizer_groups[0] (onnxruntime writes one group, "group0"): step, learning rate, and
 * each parameter's momentum0/momentum1. */
static bool optimizer(Fb *f, const Tbl *root, AmpOrtCheckpoint *out) {
    size_t at, n;
    if (!field_vec(f, root, 2, 4, &at, &n) || !n) return !f->bad;
    if (n > 1) {
        amp_fail(f->st, AMP_ERR_UNSUPPORTED, "the checkpoint has %zu optimizer groups; ampc reads one", n);
        f->bad = true;
        return false;
    }
    Tbl g;
    if (!table_ref(f, at, &g)) return false;
    out->has_optimizer = true;
    out->step = field_int(f, &g, 1, 8, 0);
    uint32_t lr_bits = (uint32_t)field_int(f, &g, 2, 4, 0);
    memcpy(&out->learning_rate, &lr_bits, sizeof lr_bits);
    size_t sat, sn;
    if (f->bad || !field_vec(f, &g, 3, 4, &sat, &sn)) return false;
    for (size_t i = 0; i < sn; i++) {
        Tbl ps;
        if (!table_ref(f, sat + 4 * i, &ps)) return false;
        const char *pname = field_str(f, &ps, 0);
        size_t mat, mn;
        if (!pname || !field_vec(f, &ps, 1, 4, &mat, &mn)) return false;
        AmpOrtParam *p = (AmpOrtParam *)amp_ort_checkpoint_find(out, pname);
        if (!p) return damaged(f, "optimizer state for a parameter the checkpoint does not have");
        for (size_t j = 0; j < mn; j++) {
            Tbl mt;
            if (!table_ref(f, mat + 4 * j, &mt)) return false;
            AmpTensor *x = tensor(f, &mt);
            if (!x) return false;
            int slot = strcmp(x->name, "momentum0") == 0 ? 0 : strcmp(x->name, "momentum1") == 0 ? 1 : -1;
            if (slot < 0) {
                amp_fail(f->st, AMP_ERR_UNSUPPORTED, "optimizer state '%s' of '%s': ampc reads AdamW's momentum0 and "
                         "momentum1 only", x->name, pname);
                f->bad = true;
                return false;
            }
            p->moment[slot] = x;
        }
    }
    return true;
}

AmpCode amp_ort_checkpoint_parse(AmpModel *m, const uint8_t *buf, size_t len, AmpOrtCheckpoint *out, AmpStatus *st) {
    *out = (AmpOrtCheckpoint){0};
    Fb f = {.b = buf, .n = len, .m = m, .st = st};
    if (len < 8 || memcmp(buf + 4, "ODTC", 4) != 0)
        return amp_fail(st, AMP_ERR_INPUT, "not an onnxruntime-training checkpoint (no \"ODTC\" identifier)");
    Tbl root, ms;
    if (!table_ref(&f, 0, &root)) return st->code;
    size_t ms_at = field(&f, &root, 1, 4);
    if (!ms_at) return f.bad ? st->code : amp_fail(st, AMP_ERR_INPUT, "the checkpoint has no module state");
    if (!table_ref(&f, ms_at, &ms)) return st->code;
    if (field_int(&f, &ms, 2, 1, 0))
        return amp_fail(st, AMP_ERR_UNSUPPORTED, "a nominal checkpoint (parameters without values) cannot give weights");
    if (field_int(&f, &ms, 3, 1, 0))
        return amp_fail(st, AMP_ERR_UNSUPPORTED, "the checkpoint keeps its tensors in external data, which ampc does "
                        "not read");
    size_t a0, n0, a1, n1;
    if (!field_vec(&f, &ms, 0, 4, &a0, &n0) || !field_vec(&f, &ms, 1, 4, &a1, &n1)) return st->code;
    size_t cap = n0 + n1;
    out->params = amp_arena_calloc(&m->arena, cap ? cap : 1, sizeof *out->params);
    if (!out->params) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory reading a checkpoint");
    if (!params(&f, &ms, 0, true, out, cap) || !params(&f, &ms, 1, false, out, cap) || !optimizer(&f, &root, out))
        return st->code;
    return AMP_OK;
}

AmpCode amp_ort_checkpoint_read(AmpModel *m, const char *path, AmpOrtCheckpoint *out, AmpStatus *st) {
    *out = (AmpOrtCheckpoint){0};
    FILE *fp = fopen(path, "rb");
    if (!fp) return amp_fail(st, AMP_ERR_INTERNAL, "%s: %s", path, strerror(errno));
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    AmpCode rc = AMP_OK;
    for (;;) {
        if (len == cap) {
            size_t ncap = cap ? cap * 2 : 1 << 16;
            uint8_t *nb = ncap > cap ? realloc(buf, ncap) : NULL;
            if (!nb) {
                rc = amp_fail(st, AMP_ERR_INTERNAL, "%s: out of memory", path);
                break;
            }
            buf = nb, cap = ncap;
        }
        size_t got = fread(buf + len, 1, cap - len, fp);
        len += got;
        if (got == 0) {
            if (ferror(fp)) rc = amp_fail(st, AMP_ERR_INTERNAL, "%s: read error", path);
            break;
        }
    }
    fclose(fp);
    if (!rc) {
        rc = amp_ort_checkpoint_parse(m, buf, len, out, st);
        if (rc) amp_status_prefix(st, "%s: ", path);
    }
    free(buf);
    return rc;
}

const AmpOrtParam *amp_ort_checkpoint_find(const AmpOrtCheckpoint *ck, const char *name) {
    for (size_t i = 0; i < ck->n_params; i++)
        if (strcmp(ck->params[i].value->name, name) == 0) return &ck->params[i];
    return NULL;
}
