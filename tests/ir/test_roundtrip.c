/* Lossless load -> save: every model.onnx of AMPC_TESTDATA, and a hand-built model using every
 * part of ModelProto (training_info, functions, unknown fields at every level), comes back
 * equal field by field (compared through protobuf-c descriptors); the saver is deterministic. */
#include <criterion/criterion.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "tests/ir/irtest_util.h"
#include "onnx.pb-c.h"

/* ---- field-by-field equality of two protobuf-c messages ----------------------------- */

typedef struct Path {
    char buf[1024];
    size_t len;
} Path;

/* Appends ".name" (or "name" at the root), and "[idx]" when idx >= 0. */
static size_t path_push(Path *p, const char *name, long idx) {
    size_t old = p->len;
    int n;
    if (idx >= 0)
        n = snprintf(p->buf + p->len, sizeof p->buf - p->len, "%s%s[%ld]", p->len ? "." : "", name, idx);
    else
        n = snprintf(p->buf + p->len, sizeof p->buf - p->len, "%s%s", p->len ? "." : "", name);
    if (n > 0) p->len = p->len + (size_t)n < sizeof p->buf ? p->len + (size_t)n : sizeof p->buf - 1;
    return old;
}
static void path_pop(Path *p, size_t old) {
    p->len = old;
    p->buf[old] = 0;
}

static size_t elem_size(ProtobufCType t) {
    switch (t) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_FLOAT:
    case PROTOBUF_C_TYPE_ENUM: return 4;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE: return 8;
    case PROTOBUF_C_TYPE_BOOL: return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_STRING: return sizeof(char *);
    case PROTOBUF_C_TYPE_BYTES: return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_MESSAGE: return sizeof(ProtobufCMessage *);
    }
    return 0;
}

static bool msg_equal(const ProtobufCMessage *a, const ProtobufCMessage *b, Path *p, char *why,
                      size_t why_cap);

/* Compares one value of field fd at pa / pb (pointers to the stored value). */
static bool value_equal(const ProtobufCFieldDescriptor *fd, const void *pa, const void *pb,
                        Path *p, char *why, size_t cap) {
    switch (fd->type) {
    case PROTOBUF_C_TYPE_STRING: {
        const char *sa = *(char *const *)pa, *sb = *(char *const *)pb;
        if (!sa) sa = "";
        if (!sb) sb = "";
        if (strcmp(sa, sb) == 0) return true;
        snprintf(why, cap, "%s: \"%.80s\" vs \"%.80s\"", p->buf, sa, sb);
        return false;
    }
    case PROTOBUF_C_TYPE_BYTES: {
        const ProtobufCBinaryData *ba = pa, *bb = pb;
        if (ba->len == bb->len && (ba->len == 0 || memcmp(ba->data, bb->data, ba->len) == 0))
            return true;
        size_t k = 0;
        while (k < ba->len && k < bb->len && ba->data[k] == bb->data[k]) k++;
        snprintf(why, cap, "%s: bytes differ (len %zu vs %zu, first difference at %zu)", p->buf,
                 ba->len, bb->len, k);
        return false;
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessage *ma = *(ProtobufCMessage *const *)pa;
        const ProtobufCMessage *mb = *(ProtobufCMessage *const *)pb;
        if (!ma || !mb) {
            if (ma == mb) return true;
            snprintf(why, cap, "%s: present in only one", p->buf);
            return false;
        }
        return msg_equal(ma, mb, p, why, cap);
    }
    case PROTOBUF_C_TYPE_BOOL:
        if ((*(const protobuf_c_boolean *)pa != 0) == (*(const protobuf_c_boolean *)pb != 0))
            return true;
        snprintf(why, cap, "%s: bool differs", p->buf);
        return false;
    default: {
        size_t n = elem_size(fd->type);
        if (memcmp(pa, pb, n) == 0) return true; /* floats compared bit for bit */
        long long va = 0, vb = 0;
        if (n == 8) {
            memcpy(&va, pa, 8);
            memcpy(&vb, pb, 8);
        } else {
            int32_t a32, b32;
            memcpy(&a32, pa, 4);
            memcpy(&b32, pb, 4);
            va = a32;
            vb = b32;
        }
        snprintf(why, cap, "%s: %lld vs %lld (raw bits)", p->buf, va, vb);
        return false;
    }
    }
}

static bool msg_equal(const ProtobufCMessage *a, const ProtobufCMessage *b, Path *p, char *why,
                      size_t cap) {
    const ProtobufCMessageDescriptor *d = a->descriptor;
    if (d != b->descriptor) {
        snprintf(why, cap, "%s: different message types", p->buf);
        return false;
    }
    const uint8_t *ba = (const uint8_t *)a, *bb = (const uint8_t *)b;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *fd = &d->fields[i];
        const void *qa = ba + fd->quantifier_offset, *qb = bb + fd->quantifier_offset;
        const void *pa = ba + fd->offset, *pb = bb + fd->offset;
        if (fd->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t na = *(const size_t *)qa, nb = *(const size_t *)qb;
            if (na != nb) {
                snprintf(why, cap, "%s%s%s: %zu vs %zu entries", p->buf, p->len ? "." : "", fd->name,
                         na, nb);
                return false;
            }
            const uint8_t *arr_a = *(uint8_t *const *)pa, *arr_b = *(uint8_t *const *)pb;
            size_t es = elem_size(fd->type);
            for (size_t k = 0; k < na; k++) {
                size_t old = path_push(p, fd->name, (long)k);
                bool ok = value_equal(fd, arr_a + k * es, arr_b + k * es, p, why, cap);
                path_pop(p, old);
                if (!ok) return false;
            }
            continue;
        }
        bool has_a = true, has_b = true;
        if (fd->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            has_a = *(const uint32_t *)qa == fd->id;
            has_b = *(const uint32_t *)qb == fd->id;
        } else if (fd->label == PROTOBUF_C_LABEL_OPTIONAL) {
            if (fd->type == PROTOBUF_C_TYPE_MESSAGE || fd->type == PROTOBUF_C_TYPE_STRING) {
                has_a = *(void *const *)pa != NULL;
                has_b = *(void *const *)pb != NULL;
            } else {
                has_a = *(const protobuf_c_boolean *)qa != 0;
                has_b = *(const protobuf_c_boolean *)qb != 0;
            }
        }
        if (has_a != has_b) {
            snprintf(why, cap, "%s%s%s: present in %s only", p->buf, p->len ? "." : "", fd->name,
                     has_a ? "the original" : "the saved model");
            return false;
        }
        if (!has_a) continue;
        size_t old = path_push(p, fd->name, -1);
        bool ok = value_equal(fd, pa, pb, p, why, cap);
        path_pop(p, old);
        if (!ok) return false;
    }
    if (a->n_unknown_fields != b->n_unknown_fields) {
        snprintf(why, cap, "%s: %u vs %u unknown fields", p->len ? p->buf : "(model)",
                 a->n_unknown_fields, b->n_unknown_fields);
        return false;
    }
    for (unsigned k = 0; k < a->n_unknown_fields; k++) {
        const ProtobufCMessageUnknownField *ua = &a->unknown_fields[k], *ub = &b->unknown_fields[k];
        if (ua->tag != ub->tag || ua->wire_type != ub->wire_type || ua->len != ub->len ||
            (ua->len && memcmp(ua->data, ub->data, ua->len) != 0)) {
            snprintf(why, cap, "%s: unknown field #%u (tag %u vs %u) differs",
                     p->len ? p->buf : "(model)", k, ua->tag, ub->tag);
            return false;
        }
    }
    return true;
}

/* Compares two serialised models field by field; on a difference fills `why`. */
static bool models_equal(const uint8_t *a, size_t la, const uint8_t *b, size_t lb, char *why,
                         size_t cap) {
    Onnx__ModelProto *ma = onnx__model_proto__unpack(NULL, la, a);
    Onnx__ModelProto *mb = onnx__model_proto__unpack(NULL, lb, b);
    bool ok;
    if (!ma || !mb) {
        snprintf(why, cap, "protobuf-c cannot parse the %s", !ma ? "original" : "saved bytes");
        ok = false;
    } else {
        Path p = {{0}, 0};
        ok = msg_equal(&ma->base, &mb->base, &p, why, cap);
    }
    if (ma) onnx__model_proto__free_unpacked(ma, NULL);
    if (mb) onnx__model_proto__free_unpacked(mb, NULL);
    return ok;
}

/* ---- one model through load -> save -> load -> save --------------------------------- */

typedef struct Failures {
    char *text;
    size_t len, cap;
    size_t count;
} Failures;

static void fail_add(Failures *f, const char *fmt, ...) AMP_PRINTF(2, 3);
static void fail_add(Failures *f, const char *fmt, ...) {
    char line[1600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "roundtrip: %s\n", line);
    f->count++;
    if (f->count > 40) return; /* the message lists the first 40; stderr has them all */
    size_t n = strlen(line);
    if (f->len + n + 3 > f->cap) {
        f->cap = (f->len + n + 3) * 2;
        f->text = realloc(f->text, f->cap);
        cr_assert_not_null(f->text);
    }
    memcpy(f->text + f->len, "\n  ", 3);
    memcpy(f->text + f->len + 3, line, n + 1);
    f->len += n + 3;
}

/* Returns true when the model round-trips; records the failure otherwise. When
 * `identical` is given, sets it to whether the first save equals the file's bytes. */
static bool roundtrip_one(const char *path, const uint8_t *orig, size_t orig_len, const char *dir,
                          const char *tmpdir, Failures *f, bool *identical) {
    AmpStatus st = {0};
    AmpLoadOptions lo = {0};
    AmpModel *m = NULL, *m2 = NULL;
    uint8_t *b1 = NULL, *b2 = NULL, *bf = NULL;
    size_t l1 = 0, l2 = 0, lf = 0;
    char why[1200];
    bool ok = false;

    AmpCode rc = amp_model_load_file(path, &lo, &m, &st);
    if (rc != AMP_OK) {
        fail_add(f, "%s: load failed (%s): %s", path, amp_code_name(rc), st.msg);
        goto out;
    }
    rc = amp_model_save_bytes(m, &b1, &l1, &st);
    if (rc != AMP_OK) {
        fail_add(f, "%s: save failed (%s): %s", path, amp_code_name(rc), st.msg);
        goto out;
    }
    if (identical) *identical = l1 == orig_len && memcmp(b1, orig, l1) == 0;
    if (!models_equal(orig, orig_len, b1, l1, why, sizeof why)) {
        fail_add(f, "%s: saved model differs from the original: %s", path, why);
        goto out;
    }
    rc = amp_model_load_bytes(b1, l1, dir, &lo, &m2, &st);
    if (rc != AMP_OK) {
        fail_add(f, "%s: reloading the saved bytes failed (%s): %s", path, amp_code_name(rc), st.msg);
        goto out;
    }
    rc = amp_model_save_bytes(m2, &b2, &l2, &st);
    if (rc != AMP_OK) {
        fail_add(f, "%s: second save failed (%s): %s", path, amp_code_name(rc), st.msg);
        goto out;
    }
    if (l1 != l2 || memcmp(b1, b2, l1) != 0) {
        size_t k = 0;
        while (k < l1 && k < l2 && b1[k] == b2[k]) k++;
        fail_add(f, "%s: save(load(save(load(x)))) != save(load(x)) (%zu vs %zu bytes, first difference at byte %zu)",
                 path, l1, l2, k);
        goto out;
    }
    if (tmpdir) { /* the file path gives the same bytes as save_bytes for small models */
        char *out_path = tu_path(tmpdir, "rt.onnx");
        AmpSaveOptions so = {.external = AMP_SAVE_EXTERNAL_AUTO, .external_min_bytes = 1024};
        rc = amp_model_save_file(m, out_path, &so, &st);
        if (rc == AMP_OK) bf = tu_read(out_path, &lf);
        unlink(out_path);
        free(out_path);
        if (rc != AMP_OK) {
            fail_add(f, "%s: save_file failed (%s): %s", path, amp_code_name(rc), st.msg);
            goto out;
        }
        if (!bf || lf != l1 || memcmp(bf, b1, l1) != 0) {
            fail_add(f, "%s: amp_model_save_file wrote %zu bytes that differ from amp_model_save_bytes (%zu)",
                     path, lf, l1);
            goto out;
        }
        if (tu_count_entries(tmpdir) != 0) {
            fail_add(f, "%s: amp_model_save_file left extra files behind in %s", path, tmpdir);
            goto out;
        }
    }
    ok = true;
out:
    free(b1);
    free(b2);
    free(bf);
    amp_model_free(m);
    amp_model_free(m2);
    return ok;
}

/* ---- the corpus ---------------------------------------------------------------------- */

Test(roundtrip, every_testdata_model) {
    tu_watchdog(900);
    size_t n = 0;
    char **paths = tu_list_testdata_models(AMPC_TESTDATA, &n);
    cr_assert_geq(n, 1000, "only %zu model.onnx files under %s: is libonnx-testdata installed?", n,
                  AMPC_TESTDATA);
    char *tmpdir = tu_mkdtemp();
    cr_assert_not_null(tmpdir);
    Failures f = {0};
    size_t passed = 0, identical = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len = 0;
        uint8_t *orig = tu_read(paths[i], &len);
        if (!orig) {
            fail_add(&f, "%s: cannot read", paths[i]);
            free(paths[i]);
            continue;
        }
        char *dir = strdup(paths[i]);
        *strrchr(dir, '/') = 0;
        bool same = false;
        if (roundtrip_one(paths[i], orig, len, dir, tmpdir, &f, &same)) passed++;
        if (same) identical++;
        free(dir);
        free(orig);
        free(paths[i]);
    }
    free(paths);
    tu_rmtree(tmpdir);
    free(tmpdir);
    fprintf(stderr, "roundtrip: %zu of %zu testdata models round-trip (%zu saved byte-identical to the file)\n",
            passed, n, identical);
    cr_log_info("roundtrip: %zu of %zu testdata models round-trip (%zu byte-identical)", passed, n,
                identical);
    if (f.count)
        cr_assert_fail("%zu of %zu models fail to round-trip:%s%s", f.count, n, f.text,
                f.count > 40 ? "\n  ... (full list on stderr)" : "");
    free(f.text);
}

/* ---- a model that uses every part of ModelProto --------------------------------------- */

/* An unknown field of each wire type, numbered high enough that no ONNX version uses it. */
static void add_unknown(PbBuf *msg, uint32_t base) {
    pb_int(msg, base, 123456789);
    pb_str(msg, base + 1, "from a newer ONNX");
    pb_f32(msg, base + 2, 1.5f);
    pb_key(msg, base + 3, PB_I64);
    pb_raw(msg, "\x01\x02\x03\x04\x05\x06\x07\x08", 8);
}

static void build_everything(PbBuf *model) {
    PbBuf g = {0};
    const int64_t wd[2] = {4, 3}, bd[1] = {4}, yd[2] = {-1, 4}, kd[1] = {2};

    /* Gemm with every attribute kind plus an unknown field in one attribute */
    {
        PbBuf attrs = {0}, a = {0};
        onnx_attr_float(&attrs, "alpha", 0.75f);
        onnx_attr_int(&attrs, "transB", 1);
        const char *ins[3] = {"X", "W", "B"}, *outs[1] = {"G"};
        PbBuf n = {0};
        for (int i = 0; i < 3; i++) pb_str(&n, N_INPUT, ins[i]);
        pb_str(&n, N_OUTPUT, outs[0]);
        pb_str(&n, N_NAME, "gemm");
        pb_str(&n, N_OP, "Gemm");
        pb_raw(&n, attrs.data, attrs.len);
        pb_free(&attrs);
        pb_str(&a, A_NAME, "beta");
        pb_f32(&a, A_F, 1.0f);
        pb_int(&a, A_TYPE, 1);
        pb_str(&a, A_DOC, "attribute doc");
        add_unknown(&a, 900);
        pb_msg(&n, N_ATTR, &a);
        pb_str(&n, N_DOC, "node doc");
        add_unknown(&n, 910);
        pb_msg(&g, G_NODE, &n);
    }
    /* If whose branches read G from the outer scope */
    {
        PbBuf then_g = {0}, else_g = {0}, attrs = {0};
        const int64_t od[2] = {-1, 4};
        const char *ti[1] = {"G"}, *to[1] = {"then_out"}, *eo[1] = {"else_out"};
        onnx_node(&then_g, "Identity", "then_id", 1, ti, 1, to, NULL);
        pb_str(&then_g, G_NAME, "then_branch");
        onnx_vi(&then_g, G_OUTPUT, "then_out", 1, 2, od);
        onnx_node(&else_g, "Neg", "else_neg", 1, ti, 1, eo, NULL);
        pb_str(&else_g, G_NAME, "else_branch");
        onnx_vi(&else_g, G_OUTPUT, "else_out", 1, 2, od);
        add_unknown(&else_g, 920);
        onnx_attr_graph(&attrs, "then_branch", &then_g);
        onnx_attr_graph(&attrs, "else_branch", &else_g);
        const char *ins[1] = {"C"}, *outs[1] = {"I"};
        onnx_node(&g, "If", "if0", 1, ins, 1, outs, &attrs);
    }
    /* a call of a model-local function, with list attributes it does not declare */
    {
        PbBuf attrs = {0}, a = {0}, b = {0}, s = {0};
        pb_str(&a, A_NAME, "some_ints");
        pb_int(&a, A_INTS, -1);
        pb_int(&a, A_INTS, 1LL << 40);
        pb_int(&a, A_TYPE, 7);
        pb_msg(&attrs, N_ATTR, &a);
        pb_str(&b, A_NAME, "some_floats");
        pb_f32(&b, A_FLOATS, 0.1f);
        pb_f32(&b, A_FLOATS, -0.0f);
        pb_int(&b, A_TYPE, 6);
        pb_msg(&attrs, N_ATTR, &b);
        pb_str(&s, A_NAME, "some_strings");
        pb_str(&s, A_STRINGS, "a");
        pb_bytes(&s, A_STRINGS, "\0\xff", 2);
        pb_int(&s, A_TYPE, 8);
        pb_msg(&attrs, N_ATTR, &s);
        const char *ins[1] = {"I"}, *outs[1] = {"Y"};
        PbBuf n = {0};
        pb_str(&n, N_INPUT, ins[0]);
        pb_str(&n, N_OUTPUT, outs[0]);
        pb_str(&n, N_NAME, "call");
        pb_str(&n, N_OP, "MyFunc");
        pb_raw(&n, attrs.data, attrs.len);
        pb_free(&attrs);
        pb_str(&n, N_DOMAIN, "custom.domain");
        pb_msg(&g, G_NODE, &n);
    }
    /* Constant with an int64 tensor attribute (int64_data, packed) */
    {
        PbBuf attrs = {0}, t = {0}, packed = {0};
        onnx_tensor_head(&t, NULL, 7, 1, kd);
        pb_varint(&packed, 5);
        pb_varint(&packed, (uint64_t)-7);
        pb_msg(&t, T_INT64, &packed);
        onnx_attr_tensor(&attrs, "value", &t);
        const char *outs[1] = {"K"};
        onnx_node(&g, "Constant", "const0", 0, NULL, 1, outs, &attrs);
    }
    pb_str(&g, G_NAME, "everything");
    /* initializers: raw floats with a NaN payload, float_data, string_data, doc + unknown */
    {
        PbBuf w = {0}, b = {0}, s = {0}, packed = {0};
        uint32_t wbits[12];
        for (int i = 0; i < 12; i++) wbits[i] = 0x3f800000u + (uint32_t)i;
        wbits[5] = 0x7fc00123u; /* a NaN with a payload: must survive bit for bit */
        onnx_tensor_head(&w, "W", 1, 2, wd);
        pb_bytes(&w, T_RAW, wbits, sizeof wbits);
        pb_str(&w, 12, "weight doc");
        add_unknown(&w, 930);
        pb_msg(&g, G_INIT, &w);
        onnx_tensor_head(&b, "B", 1, 1, bd);
        for (int i = 0; i < 4; i++) {
            float v = -0.0f + (float)i;
            pb_raw(&packed, &v, 4);
        }
        pb_msg(&b, T_FLOAT, &packed);
        pb_msg(&g, G_INIT, &b);
        const int64_t sd[1] = {2};
        onnx_tensor_head(&s, "S", 8, 1, sd);
        pb_str(&s, T_STRING, "hello");
        pb_bytes(&s, T_STRING, "", 0);
        pb_msg(&g, G_INIT, &s);
    }
    pb_str(&g, G_DOC, "graph doc");
    {
        /* X with a symbolic dim and a denotation, plus doc_string and unknown fields */
        PbBuf vi = {0}, tp = {0}, tt = {0}, shape = {0}, d0 = {0}, d1 = {0};
        pb_str(&d0, 2, "N");
        pb_str(&d0, 3, "DATA_BATCH");
        pb_msg(&shape, 1, &d0);
        pb_int(&d1, 1, 3);
        pb_msg(&shape, 1, &d1);
        pb_int(&tt, 1, 1);
        pb_msg(&tt, 2, &shape);
        pb_msg(&tp, 1, &tt);
        pb_str(&tp, 6, "TENSOR");
        add_unknown(&tp, 940);
        pb_str(&vi, 1, "X");
        pb_msg(&vi, 2, &tp);
        pb_str(&vi, 3, "input doc");
        add_unknown(&vi, 950);
        pb_msg(&g, G_INPUT, &vi);
    }
    onnx_vi(&g, G_INPUT, "C", 9, 0, NULL);
    onnx_vi(&g, G_OUTPUT, "Y", 1, 2, yd);
    onnx_vi(&g, G_OUTPUT, "K", 7, 1, kd);
    onnx_vi(&g, G_VALUE_INFO, "G", 1, 2, yd);
    {
        /* an unused graph input of a sequence type (opaque to the IR) */
        PbBuf vi = {0}, tp = {0}, seq = {0}, elem = {0}, tt = {0};
        pb_int(&tt, 1, 1);
        pb_msg(&elem, 1, &tt);
        pb_msg(&seq, 1, &elem);
        pb_msg(&tp, 4, &seq);
        pb_str(&vi, 1, "Seq");
        pb_msg(&vi, 2, &tp);
        pb_msg(&g, G_INPUT, &vi);
    }
    {
        /* a quantization annotation (a sparse initializer is made dense: its own test) */
        PbBuf qa = {0};
        pb_str(&qa, 1, "W");
        onnx_str_entry(&qa, 2, "SCALE_TENSOR", "W_scale");
        pb_msg(&g, G_QUANT, &qa);
    }
    add_unknown(&g, 960);

    pb_int(model, M_IR_VERSION, 8);
    pb_str(model, M_PRODUCER_NAME, "ampc-tests");
    pb_str(model, M_PRODUCER_VERSION, "1.0");
    pb_str(model, M_DOMAIN, "org.example");
    pb_int(model, M_MODEL_VERSION, 42);
    pb_str(model, M_DOC, "model doc");
    pb_msg(model, M_GRAPH, &g);
    onnx_opset(model, "", 13);
    onnx_opset(model, "custom.domain", 1);
    onnx_opset(model, "ai.onnx.preview.training", 1);
    onnx_str_entry(model, M_METADATA, "author", "tests");
    onnx_str_entry(model, M_METADATA, "empty", "");
    {
        /* training_info: an initialization graph and an algorithm graph with bindings */
        PbBuf ti = {0}, init = {0}, alg = {0}, attrs = {0}, t = {0};
        float wv[12];
        for (int i = 0; i < 12; i++) wv[i] = 0.5f;
        onnx_tensor_head(&t, NULL, 1, 2, wd);
        pb_bytes(&t, T_RAW, wv, sizeof wv);
        onnx_attr_tensor(&attrs, "value", &t);
        const char *io[1] = {"W_init"};
        onnx_node(&init, "Constant", "init_const", 0, NULL, 1, io, &attrs);
        pb_str(&init, G_NAME, "initialization");
        onnx_vi(&init, G_OUTPUT, "W_init", 1, 2, wd);
        const char *ai[1] = {"W"}, *ao[1] = {"W_new"};
        onnx_node(&alg, "Neg", "alg_neg", 1, ai, 1, ao, NULL);
        pb_str(&alg, G_NAME, "algorithm");
        onnx_vi(&alg, G_OUTPUT, "W_new", 1, 2, wd);
        pb_msg(&ti, 1, &init);
        pb_msg(&ti, 2, &alg);
        onnx_str_entry(&ti, 3, "W", "W_init");
        onnx_str_entry(&ti, 4, "W", "W_new");
        add_unknown(&ti, 970);
        pb_msg(model, M_TRAINING, &ti);
    }
    {
        /* a model-local function */
        PbBuf fn = {0}, op = {0};
        const char *fi[1] = {"a"}, *fo[1] = {"b"};
        pb_str(&fn, 1, "MyFunc");
        pb_str(&fn, 4, "a");
        pb_str(&fn, 5, "b");
        pb_str(&fn, 6, "some_ints");
        pb_str(&fn, 6, "some_floats");
        pb_str(&fn, 6, "some_strings");
        {
            PbBuf n = {0};
            pb_str(&n, N_INPUT, fi[0]);
            pb_str(&n, N_OUTPUT, fo[0]);
            pb_str(&n, N_OP, "Relu");
            pb_msg(&fn, 7, &n);
        }
        pb_str(&fn, 8, "function doc");
        pb_str(&op, 1, "");
        pb_int(&op, 2, 13);
        pb_msg(&fn, 9, &op);
        pb_str(&fn, 10, "custom.domain");
        add_unknown(&fn, 980);
        pb_msg(model, M_FUNCTIONS, &fn);
    }
    add_unknown(model, 990);
}

/* Writes a hand-built model to dir/name and asserts it round-trips (with out_dir, the
 * file save too); the path, for the caller to free. */
static char *write_and_roundtrip(const PbBuf *model, const char *dir, const char *name,
                                 const char *out_dir) {
    char *path = tu_path(dir, name);
    cr_assert(tu_write(path, model->data, model->len));
    Failures f = {0};
    bool ok = roundtrip_one(path, model->data, model->len, dir, out_dir, &f, NULL);
    cr_assert(ok, "%s does not round-trip:%s", name, f.text ? f.text : "");
    free(f.text);
    return path;
}

/* A sparse initializer is made dense at load (ONNX's meaning of it, issue 43 item 10):
 * the IR holds it as any initializer, and the saved model has it dense, no sparse one. */
Test(roundtrip, sparse_initializer_saved_dense) {
    PbBuf g = {0}, model = {0}, sp = {0}, vals = {0}, idx = {0}, pv = {0}, pi = {0};
    const int64_t nd[1] = {2}, d4[1] = {4};
    onnx_tensor_head(&vals, "SP", 1, 1, nd);
    float v2[2] = {1.0f, 2.0f};
    pb_raw(&pv, v2, sizeof v2);
    pb_msg(&vals, T_FLOAT, &pv);
    onnx_tensor_head(&idx, NULL, 7, 1, nd);
    pb_varint(&pi, 1);
    pb_varint(&pi, 3);
    pb_msg(&idx, T_INT64, &pi);
    pb_msg(&sp, 1, &vals);
    pb_msg(&sp, 2, &idx);
    pb_int(&sp, 3, 4);
    pb_msg(&g, G_SPARSE_INIT, &sp);
    const char *in[1] = {"SP"}, *out[1] = {"Y"};
    onnx_node(&g, "Relu", "r", 1, in, 1, out, NULL);
    onnx_vi(&g, G_OUTPUT, "Y", 1, 1, d4);
    onnx_model(&model, &g, 13);
    AmpStatus st = {0};
    AmpModel *m = NULL;
    cr_assert_eq(amp_model_load_bytes(model.data, model.len, NULL, NULL, &m, &st), AMP_OK, "%s", st.msg);
    AmpValue *v = amp_graph_lookup(m->graph, "SP");
    cr_assert(v && v->initializer, "SP is no initializer");
    AmpBytes b;
    cr_assert_eq(amp_tensor_bytes(m, v->initializer, &b, &st), AMP_OK, "%s", st.msg);
    const float want[4] = {0, 1, 0, 2};
    cr_assert(b.len == sizeof want && memcmp(b.data, want, sizeof want) == 0, "SP is not [0, 1, 0, 2]");
    uint8_t *saved = NULL;
    size_t len = 0;
    cr_assert_eq(amp_model_save_bytes(m, &saved, &len, &st), AMP_OK, "%s", st.msg);
    Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, len, saved);
    cr_assert_not_null(mp);
    cr_assert_eq(mp->graph->n_sparse_initializer, 0);
    cr_assert_eq(mp->graph->n_initializer, 1);
    cr_assert_str_eq(mp->graph->initializer[0]->name, "SP");
    cr_assert(mp->graph->initializer[0]->has_raw_data &&
              mp->graph->initializer[0]->raw_data.len == sizeof want &&
              memcmp(mp->graph->initializer[0]->raw_data.data, want, sizeof want) == 0);
    onnx__model_proto__free_unpacked(mp, NULL);
    free(saved);
    amp_model_free(m);
    pb_free(&model);
}

Test(roundtrip, every_model_field_and_unknown_fields) {
    PbBuf model = {0};
    build_everything(&model);
    /* Sanity: the hand-written bytes are a ModelProto protobuf-c accepts, with the
     * unknown fields where they were put. */
    Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, model.len, model.data);
    cr_assert_not_null(mp, "test bug: hand-built model does not parse");
    cr_assert_eq(mp->base.n_unknown_fields, 4);
    onnx__model_proto__free_unpacked(mp, NULL);

    char *dir = tu_mkdtemp();
    cr_assert_not_null(dir);
    char *path = write_and_roundtrip(&model, dir, "everything.onnx", NULL);

    /* And the loaded IR holds what the file says. */
    AmpStatus st = {0};
    AmpModel *m = NULL;
    cr_assert_eq(amp_model_load_file(path, NULL, &m, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(m->ir_version, 8);
    cr_assert_eq(m->model_version, 42);
    cr_assert_str_eq(m->producer_name, "ampc-tests");
    cr_assert_eq(m->n_opsets, 3);
    cr_assert_eq(amp_model_opset(m, ""), 13);
    cr_assert_eq(amp_model_opset(m, "custom.domain"), 1);
    cr_assert_eq(m->n_metadata, 2);
    cr_assert_eq(m->n_training, 1);
    cr_assert_not_null(m->training[0].initialization);
    cr_assert_not_null(m->training[0].algorithm);
    cr_assert_eq(m->training[0].n_update_bindings, 1);
    cr_assert_str_eq(m->training[0].update_bindings[0].value, "W_new");
    cr_assert_eq(m->n_functions, 1);
    cr_assert_str_eq(m->functions[0].name, "MyFunc");
    cr_assert_eq(m->graph->n_nodes, 4);
    cr_assert_eq(m->graph->n_initializers, 3);
    AmpValue *w = amp_graph_lookup(m->graph, "W");
    cr_assert(w && w->initializer);
    AmpBytes wb;
    cr_assert_eq(amp_tensor_bytes(m, w->initializer, &wb, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(wb.len, 48);
    uint32_t nan_bits;
    memcpy(&nan_bits, wb.data + 20, 4);
    cr_assert_eq(nan_bits, 0x7fc00123u, "NaN payload lost: %08x", nan_bits);
    AmpValue *g = amp_graph_lookup(m->graph, "G");
    cr_assert(g && g->producer && strcmp(g->producer->op_type, "Gemm") == 0);
    cr_assert_eq(g->n_uses, 2, "G is read by the If (as its outer-scope use)? uses=%zu", g->n_uses);
    cr_assert_eq(amp_verify_model(m, &st), AMP_OK, "%s", st.msg);
    amp_model_free(m);

    tu_rmtree(dir);
    free(dir);
    free(path);
    pb_free(&model);
}

/* A file save's buffer is mapped written-in up front and grows by new mappings: a model
 * whose output is many times the first buffer (300 initializers of 3000 bytes, each small
 * enough to be copied into the buffer) saves to a file the same bytes as into memory. */
Test(roundtrip, file_save_buffer_grows) {
    PbBuf g = {0}, model = {0};
    enum { N = 300, ELEMS = 750 };
    static float vals[ELEMS];
    const int64_t dims[1] = {ELEMS};
    const char *prev = "X";
    static char names[N][2][16];
    for (int k = 0; k < N; k++) {
        snprintf(names[k][0], sizeof names[k][0], "W%d", k);
        snprintf(names[k][1], sizeof names[k][1], "S%d", k);
        for (int i = 0; i < ELEMS; i++) vals[i] = (float)(k * ELEMS + i);
        PbBuf w = {0};
        onnx_tensor_head(&w, names[k][0], 1, 1, dims);
        pb_bytes(&w, T_RAW, vals, sizeof vals);
        pb_msg(&g, G_INIT, &w);
        const char *in[2] = {prev, names[k][0]}, *out[1] = {names[k][1]};
        onnx_node(&g, "Add", NULL, 2, in, 1, out, NULL);
        prev = names[k][1];
    }
    onnx_vi(&g, G_INPUT, "X", 1, 1, dims);
    onnx_vi(&g, G_OUTPUT, prev, 1, 1, dims);
    onnx_model(&model, &g, 13);
    cr_assert_gt(model.len, (size_t)N * sizeof vals);

    char *dir = tu_mkdtemp();
    char *out_dir = tu_mkdtemp();
    cr_assert(dir && out_dir);
    char *path = write_and_roundtrip(&model, dir, "many_weights.onnx", out_dir);
    tu_rmtree(dir);
    tu_rmtree(out_dir);
    free(dir);
    free(out_dir);
    free(path);
    pb_free(&model);
}

/* A model built with the builder API (no protobuf behind it) saves, reloads and saves to
 * the same bytes. */
Test(roundtrip, builder_model) {
    AmpModel *m = amp_model_new();
    cr_assert_not_null(m);
    m->has |= AMP_MODEL_HAS_IR_VERSION;
    m->ir_version = 8;
    m->opsets = amp_arena_calloc(&m->arena, 1, sizeof *m->opsets);
    m->opsets[0] = (AmpOpset){.domain = "", .version = 13, .has_version = true};
    m->n_opsets = 1;
    AmpGraph *g = m->graph;
    g->name = "built";
    AmpValue *x = amp_graph_value(g, "X"), *y = amp_graph_value(g, "Y");
    AmpDim *dx = amp_arena_calloc(&m->arena, 2, sizeof *dx);
    dx[0].value = 2;
    dx[1].value = 3;
    x->type = (AmpType){AMP_TYPE_TENSOR, AMP_DT_FLOAT, 2, dx};
    y->type = x->type;
    amp_graph_add_input(g, x);
    AmpNode *n = amp_node_new(g, "", "Relu", "r", 1, 1);
    amp_node_set_input(n, 0, x);
    amp_node_set_output(n, 0, y);
    amp_node_append(g, n);
    amp_graph_add_output(g, y);

    AmpStatus st = {0};
    uint8_t *b1 = NULL, *b2 = NULL;
    size_t l1 = 0, l2 = 0;
    cr_assert_eq(amp_model_save_bytes(m, &b1, &l1, &st), AMP_OK, "%s", st.msg);
    AmpModel *m2 = NULL;
    cr_assert_eq(amp_model_load_bytes(b1, l1, NULL, NULL, &m2, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(m2->graph->n_nodes, 1);
    cr_assert_str_eq(m2->graph->first->op_type, "Relu");
    cr_assert_eq(m2->graph->inputs.n, 1);
    cr_assert_eq(m2->graph->inputs.items[0].value->type.rank, 2);
    cr_assert_eq(m2->graph->inputs.items[0].value->type.dims[1].value, 3);
    cr_assert_eq(amp_model_save_bytes(m2, &b2, &l2, &st), AMP_OK, "%s", st.msg);
    cr_assert(l1 == l2 && memcmp(b1, b2, l1) == 0, "builder model: second save differs");
    free(b1);
    free(b2);
    amp_model_free(m);
    amp_model_free(m2);
}
