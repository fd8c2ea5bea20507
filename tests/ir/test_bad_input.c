/* Hostile and broken files (empty, random bytes, truncations, flipped bytes, wrong file
 * types, subgraphs nested deeply) give a clear error, never a crash or hang; the CLI prints
 * one line, exits 1, writes nothing and leaves its input alone. What a well-formed file may
 * still get wrong (dims, data, cycles, names, attributes, opsets) is in test_bad_graph.c. */
#include <criterion/criterion.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tests/ir/bad_input_util.h"
#include "ir/ir.h"
#include "tests/ir/irtest_util.h"

/* ---- helpers ----------------------------------------------------------------------- */

/* Byte offsets where a top-level field of a well-formed message starts or ends: a prefix
 * cut there is itself a well-formed (if incomplete) message. */
static bool top_level_boundaries(const PbBuf *b, bool *at) {
    size_t pos = 0;
    at[0] = true;
    while (pos < b->len) {
        uint64_t key = 0;
        int shift = 0;
        while (pos < b->len && shift < 64) {
            uint8_t c = b->data[pos++];
            key |= (uint64_t)(c & 0x7f) << shift;
            shift += 7;
            if (!(c & 0x80)) break;
        }
        switch (key & 7) {
        case PB_VARINT:
            while (pos < b->len && (b->data[pos] & 0x80)) pos++;
            pos++;
            break;
        case PB_I64: pos += 8; break;
        case PB_I32: pos += 4; break;
        case PB_LEN: {
            uint64_t n = 0;
            shift = 0;
            while (pos < b->len && shift < 64) {
                uint8_t c = b->data[pos++];
                n |= (uint64_t)(c & 0x7f) << shift;
                shift += 7;
                if (!(c & 0x80)) break;
            }
            pos += n;
            break;
        }
        default: return false;
        }
        if (pos > b->len) return false;
        at[pos] = true;
    }
    return true;
}

static void read_testdata(const char *rel, PbBuf *out) {
    char *path = tu_path(AMPC_TESTDATA, rel);
    size_t len = 0;
    uint8_t *d = tu_read(path, &len);
    cr_assert_not_null(d, "cannot read %s (libonnx-testdata installed?)", path);
    free(path);
    out->data = d;
    out->len = out->cap = len;
}

/* Every prefix of the model: an error unless cut at a top-level field boundary. */
static void all_truncations(const PbBuf *model, const char *name) {
    bool *boundary = calloc(model->len + 1, 1);
    cr_assert_not_null(boundary);
    cr_assert(top_level_boundaries(model, boundary), "test bug: %s is not well-formed", name);
    size_t ok_at_boundary = 0;
    for (size_t cut = 0; cut < model->len; cut++) {
        AmpStatus st = {0};
        AmpCode rc = try_load(model->data, cut, NULL, &st);
        if (boundary[cut]) {
            if (rc == AMP_OK) ok_at_boundary++;
            else
                CHECK(rc == AMP_ERR_INPUT || rc == AMP_ERR_UNSUPPORTED,
                      "%s cut at %zu (field boundary): %s: %s", name, cut, amp_code_name(rc), st.msg);
            continue;
        }
        CHECK(rc == AMP_ERR_INPUT, "%s truncated to %zu of %zu bytes: got %s (%s)", name, cut,
              model->len, amp_code_name(rc), st.msg);
    }
    cr_log_info("%s: %zu prefixes, %zu at field boundaries loaded", name, model->len, ok_at_boundary);
    free(boundary);
}

/* ---- empty, random, truncated, flipped --------------------------------------------- */

Test(bad_input, empty_bytes) {
    AmpStatus st = {0};
    cr_assert_eq(try_load("", 0, NULL, &st), AMP_ERR_INPUT);
    cr_assert(tu_contains(st.msg, "empty"), "%s", st.msg);
}

Test(bad_input, empty_file_names_the_file) {
    char *dir = tu_mkdtemp();
    char *path = tu_path(dir, "empty.onnx");
    cr_assert(tu_write(path, "", 0));
    AmpStatus st = {0};
    AmpModel *m = NULL;
    cr_assert_eq(amp_model_load_file(path, NULL, &m, &st), AMP_ERR_INPUT);
    cr_assert_null(m);
    cr_assert(tu_contains(st.msg, "empty.onnx"), "no file name in: %s", st.msg);
    cr_assert(tu_contains(st.msg, "empty"), "does not say it is empty: %s", st.msg);
    tu_rmtree(dir);
    free(dir);
    free(path);
}

Test(bad_input, random_bytes) {
    tu_watchdog(60);
    static const size_t sizes[] = {1, 2, 3, 7, 16, 64, 100, 1000, 4096, 65536};
    size_t accepted = 0, total = 0;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            uint64_t s = seed * 0x9E3779B97F4A7C15ull;
            uint8_t *buf = malloc(sizes[k]);
            for (size_t i = 0; i < sizes[k]; i++) buf[i] = (uint8_t)rng_next(&s);
            AmpStatus st = {0};
            AmpCode rc = try_load(buf, sizes[k], NULL, &st);
            total++;
            if (rc == AMP_OK) accepted++;
            else
                CHECK(rc == AMP_ERR_INPUT || rc == AMP_ERR_UNSUPPORTED,
                          "random bytes (seed %llu, %zu bytes): %s: %s", (unsigned long long)seed,
                          sizes[k], amp_code_name(rc), st.msg);
            free(buf);
        }
    }
    /* Random bytes are (almost) never a model with a graph. */
    cr_assert_eq(accepted, 0, "%zu of %zu random buffers loaded as models", accepted, total);
}

/* Random bytes behind a valid ModelProto prefix (so protobuf-c gets past the first tag). */
Test(bad_input, random_bytes_after_model_prefix) {
    tu_watchdog(60);
    PbBuf model = {0};
    onnx_small_model(&model);
    for (uint64_t seed = 1; seed <= 200; seed++) {
        uint64_t s = seed;
        PbBuf b = {0};
        size_t keep = (size_t)(rng_next(&s) % model.len);
        pb_raw(&b, model.data, keep);
        size_t extra = 1 + (size_t)(rng_next(&s) % 64);
        for (size_t i = 0; i < extra; i++) {
            uint8_t c = (uint8_t)rng_next(&s);
            pb_raw(&b, &c, 1);
        }
        AmpStatus st = {0};
        AmpCode rc = try_load(b.data, b.len, NULL, &st);
        CHECK(rc == AMP_OK || rc == AMP_ERR_INPUT || rc == AMP_ERR_UNSUPPORTED,
                  "seed %llu: %s: %s", (unsigned long long)seed, amp_code_name(rc), st.msg);
        pb_free(&b);
    }
    pb_free(&model);
}

Test(bad_input, small_model_is_valid) {
    PbBuf model = {0};
    onnx_small_model(&model);
    AmpStatus st = {0};
    AmpModel *m = NULL;
    cr_assert_eq(amp_model_load_bytes(model.data, model.len, NULL, NULL, &m, &st), AMP_OK, "%s",
                 st.msg);
    cr_assert_eq(m->graph->n_nodes, 2);
    cr_assert_eq(m->graph->n_initializers, 2);
    amp_model_free(m);
    pb_free(&model);
}

Test(bad_input, every_truncation_of_small_model) {
    tu_watchdog(60);
    PbBuf model = {0};
    onnx_small_model(&model);
    all_truncations(&model, "small model");
    pb_free(&model);
}

Test(bad_input, every_truncation_of_testdata_models) {
    tu_watchdog(120);
    static const char *const models[] = {"node/test_if/model.onnx", "node/test_loop11/model.onnx",
                                         "node/test_scan_sum/model.onnx",
                                         "node/test_gemm_default_scalar_bias/model.onnx",
                                         "pytorch-operator/test_operator_conv/model.onnx"};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        PbBuf b = {0};
        read_testdata(models[i], &b);
        all_truncations(&b, models[i]);
        pb_free(&b);
    }
}

Test(bad_input, truncated_file_names_the_file) {
    PbBuf model = {0};
    onnx_small_model(&model);
    char *dir = tu_mkdtemp();
    char *path = tu_path(dir, "cut.onnx");
    cr_assert(tu_write(path, model.data, model.len / 2));
    AmpStatus st = {0};
    AmpModel *m = NULL;
    cr_assert_eq(amp_model_load_file(path, NULL, &m, &st), AMP_ERR_INPUT, "%s", st.msg);
    cr_assert(tu_contains(st.msg, "cut.onnx"), "no file name in: %s", st.msg);
    tu_rmtree(dir);
    free(dir);
    free(path);
    pb_free(&model);
}

static void all_flips(const PbBuf *model, const char *name) {
    static const uint8_t masks[] = {0x01, 0x02, 0x10, 0x40, 0x80, 0xff};
    uint8_t *buf = malloc(model->len);
    size_t loaded = 0, n = 0;
    for (size_t i = 0; i < model->len; i++) {
        for (size_t k = 0; k < sizeof masks; k++) {
            memcpy(buf, model->data, model->len);
            buf[i] ^= masks[k];
            AmpStatus st = {0};
            AmpCode rc = try_load(buf, model->len, NULL, &st);
            n++;
            if (rc == AMP_OK) loaded++;
            else
                CHECK(rc == AMP_ERR_INPUT || rc == AMP_ERR_UNSUPPORTED,
                          "%s with byte %zu ^ 0x%02x: %s: %s", name, i, masks[k], amp_code_name(rc), st.msg);
        }
    }
    cr_log_info("%s: %zu of %zu flipped variants still load", name, loaded, n);
    free(buf);
}

Test(bad_input, every_flipped_byte_of_small_model) {
    tu_watchdog(60);
    PbBuf model = {0};
    onnx_small_model(&model);
    all_flips(&model, "small model");
    pb_free(&model);
}

static void flips_of_testdata(const char *rel) {
    PbBuf b = {0};
    read_testdata(rel, &b);
    all_flips(&b, rel);
    pb_free(&b);
}

Test(bad_input, every_flipped_byte_of_test_if) {
    tu_watchdog(60);
    flips_of_testdata("node/test_if/model.onnx");
}

Test(bad_input, every_flipped_byte_of_test_loop11) {
    tu_watchdog(60);
    flips_of_testdata("node/test_loop11/model.onnx");
}

Test(bad_input, every_flipped_byte_of_test_constant) {
    tu_watchdog(60);
    flips_of_testdata("node/test_constant/model.onnx");
}

/* ---- deep nesting ------------------------------------------------------------------ */

/* Prepends a LEN field's header (key of field `num`, then `len`) at buf[*pos]. */
static void prepend_len(uint8_t *buf, size_t *pos, uint32_t num, size_t len) {
    PbBuf h = {0};
    pb_key(&h, num, PB_LEN);
    pb_varint(&h, len);
    cr_assert_geq(*pos, h.len);
    *pos -= h.len;
    memcpy(buf + *pos, h.data, h.len);
    pb_free(&h);
}

static void prepend_raw(uint8_t *buf, size_t *pos, const void *p, size_t n) {
    cr_assert_geq(*pos, n);
    *pos -= n;
    memcpy(buf + *pos, p, n);
}

/* buf[pos, cap) as a PbBuf of its own; frees buf. */
static void take_tail(PbBuf *out, uint8_t *buf, size_t pos, size_t cap) {
    out->len = out->cap = cap - pos;
    out->data = malloc(out->len);
    cr_assert_not_null(out->data);
    memcpy(out->data, buf + pos, out->len);
    free(buf);
}

/* A GraphProto whose one node is an If whose then_branch is such a graph, `depth` deep,
 * written inside out (prepending) so building is linear. */
static void deep_if_graph(PbBuf *out, size_t depth) {
    size_t cap = depth * 48 + 256, pos = cap;
    uint8_t *buf = malloc(cap);
    cr_assert_not_null(buf);
    for (size_t k = 0; k < depth; k++) {
        /* AttributeProto: name "then_branch", type GRAPH, g = <the graph so far> */
        prepend_len(buf, &pos, A_G, cap - pos);
        PbBuf fields = {0};
        pb_str(&fields, A_NAME, "then_branch");
        pb_int(&fields, A_TYPE, 5);
        prepend_raw(buf, &pos, fields.data, fields.len);
        pb_free(&fields);
        /* NodeProto: op_type "If", attribute = <attr> */
        prepend_len(buf, &pos, N_ATTR, cap - pos);
        PbBuf op = {0};
        pb_str(&op, N_OP, "If");
        prepend_raw(buf, &pos, op.data, op.len);
        pb_free(&op);
        /* GraphProto: node = <node> */
        prepend_len(buf, &pos, G_NODE, cap - pos);
    }
    take_tail(out, buf, pos, cap);
}

/* A model around graph body g (freed): ir_version 8, opset 16, then `extra` (freed). */
static void wrap_model(PbBuf *out, PbBuf *g, PbBuf *extra) {
    *out = (PbBuf){0};
    pb_int(out, M_IR_VERSION, 8);
    onnx_opset(out, "", 16);
    pb_msg(out, M_GRAPH, g);
    if (extra) {
        pb_raw(out, extra->data, extra->len);
        pb_free(extra);
    }
}

/* If nodes nested `depth` deep. */
static void deep_model(PbBuf *out, size_t depth) {
    PbBuf g;
    deep_if_graph(&g, depth);
    wrap_model(out, &g, NULL);
}

/* A TypeProto: a sequence of a sequence ... of float tensors, `depth` sequences deep (two
 * messages a level). The loader hands such types to protobuf-c. */
static void deep_seq_type(PbBuf *out, size_t depth) {
    size_t cap = depth * 24 + 64, pos = cap;
    uint8_t *buf = malloc(cap);
    cr_assert_not_null(buf);
    static const uint8_t tensor_float[] = {0x0a, 0x02, 0x08, 0x01}; /* {tensor_type {elem_type: 1}} */
    prepend_raw(buf, &pos, tensor_float, sizeof tensor_float);
    for (size_t k = 0; k < depth; k++) {
        prepend_len(buf, &pos, 1, cap - pos); /* TypeProto.Sequence.elem_type */
        prepend_len(buf, &pos, 4, cap - pos); /* TypeProto.sequence_type */
    }
    take_tail(out, buf, pos, cap);
}

/* Identity(x) -> y, x a sequence `depth` deep. */
static void deep_input_type_model(PbBuf *out, size_t depth) {
    PbBuf type, vi = {0}, vo = {0}, g = {0};
    deep_seq_type(&type, depth);
    const char *in[1] = {"x"}, *o[1] = {"y"};
    onnx_node(&g, "Identity", "id", 1, in, 1, o, NULL);
    pb_str(&vi, 1, "x");
    pb_msg(&vi, 2, &type);
    pb_msg(&g, G_INPUT, &vi);
    pb_str(&vo, 1, "y");
    pb_msg(&g, G_OUTPUT, &vo);
    wrap_model(out, &g, NULL);
}

/* A custom-domain node with a TYPE_PROTO attribute (a field the IR keeps as protobuf-c
 * packs it) that deep. */
static void deep_attr_type_model(PbBuf *out, size_t depth) {
    PbBuf type, at = {0}, attrs = {0}, g = {0}, extra = {0}, o = {0};
    deep_seq_type(&type, depth);
    pb_str(&at, A_NAME, "t");
    pb_int(&at, A_TYPE, 13);
    pb_msg(&at, 14, &type);
    pb_msg(&attrs, N_ATTR, &at);
    const char *in[1] = {"x"}, *outs[1] = {"y"};
    PbBuf n = {0};
    pb_str(&n, N_INPUT, in[0]);
    pb_str(&n, N_OUTPUT, outs[0]);
    pb_str(&n, N_OP, "Foo");
    pb_str(&n, N_DOMAIN, "test.domain");
    pb_raw(&n, attrs.data, attrs.len);
    pb_free(&attrs);
    pb_msg(&g, G_NODE, &n);
    onnx_vi(&g, G_INPUT, "x", 1, 1, (const int64_t[]){2});
    onnx_vi(&g, G_OUTPUT, "y", 1, 1, (const int64_t[]){2});
    pb_str(&o, 1, "test.domain");
    pb_int(&o, 2, 1);
    pb_msg(&extra, M_OPSET, &o);
    wrap_model(out, &g, &extra);
}

/* A model-local FunctionProto whose node nests If graphs that deep. */
static void deep_function_model(PbBuf *out, size_t depth) {
    PbBuf inner, fn = {0}, extra = {0}, g = {0};
    deep_if_graph(&inner, depth);
    PbBuf attrs = {0};
    onnx_attr_graph(&attrs, "then_branch", &inner);
    PbBuf n = {0};
    pb_str(&n, N_OP, "If");
    pb_raw(&n, attrs.data, attrs.len);
    pb_free(&attrs);
    pb_str(&fn, 1, "f");
    pb_msg(&fn, 7, &n);
    pb_str(&fn, 10, "test.functions");
    pb_msg(&extra, M_FUNCTIONS, &fn);
    const char *in[1] = {"x"}, *o[1] = {"y"};
    onnx_node(&g, "Relu", "relu", 1, in, 1, o, NULL);
    onnx_vi(&g, G_INPUT, "x", 1, 1, (const int64_t[]){2});
    onnx_vi(&g, G_OUTPUT, "y", 1, 1, (const int64_t[]){2});
    wrap_model(out, &g, &extra);
}

Test(bad_input, subgraphs_nested_deeply) {
    tu_watchdog(60);
    static const size_t depths[] = {100, 1000, 100000, 1000000};
    for (size_t i = 0; i < sizeof depths / sizeof depths[0]; i++) {
        PbBuf m = {0};
        deep_model(&m, depths[i]);
        AmpStatus st = {0};
        AmpCode rc = try_load(m.data, m.len, NULL, &st);
        cr_assert_eq(rc, AMP_ERR_INPUT, "If nested %zu deep (%zu bytes): %s: %s", depths[i], m.len,
                     amp_code_name(rc), st.msg);
        pb_free(&m);
    }
}

/* What the loader hands to protobuf-c (which unpacks recursively, without a limit) is
 * refused when nested too deep, wherever it sits: a value's type, an attribute the IR
 * keeps packed, a model-local function. Shallow nesting loads. */
Test(bad_input, deep_messages_for_protobuf_c) {
    tu_watchdog(60);
    typedef void (*Build)(PbBuf *, size_t);
    static const struct {
        const char *what;
        Build build;
    } kinds[] = {{"input type", deep_input_type_model},
                 {"TYPE_PROTO attribute", deep_attr_type_model},
                 {"function", deep_function_model}};
    static const size_t deep[] = {200, 1000, 100000, 1000000};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        PbBuf m;
        AmpStatus st = {0};
        kinds[k].build(&m, 10);
        AmpCode rc = try_load(m.data, m.len, NULL, &st);
        cr_assert_eq(rc, AMP_OK, "%s nested 10 deep: %s: %s", kinds[k].what, amp_code_name(rc), st.msg);
        pb_free(&m);
        for (size_t i = 0; i < sizeof deep / sizeof deep[0]; i++) {
            kinds[k].build(&m, deep[i]);
            rc = try_load(m.data, m.len, NULL, &st);
            cr_assert_eq(rc, AMP_ERR_INPUT, "%s nested %zu deep: %s: %s", kinds[k].what, deep[i],
                         amp_code_name(rc), st.msg);
            cr_assert(tu_contains(st.msg, "nested deeper"), "%s nested %zu deep: %s", kinds[k].what, deep[i],
                      st.msg);
            pb_free(&m);
        }
    }
}

/* ---- wrong kinds of file ------------------------------------------------------------- */

static void expect_file_rejected(const char *name, const void *data, size_t len) {
    char *dir = tu_mkdtemp();
    char *path = tu_path(dir, name);
    cr_assert(tu_write(path, data, len));
    AmpStatus st = {0};
    AmpModel *m = NULL;
    AmpCode rc = amp_model_load_file(path, NULL, &m, &st);
    if (rc == AMP_OK) amp_model_free(m);
    cr_assert_eq(rc, AMP_ERR_INPUT, "%s: %s: %s", name, amp_code_name(rc), st.msg);
    cr_assert(tu_contains(st.msg, name), "%s: the message does not name the file: %s", name, st.msg);
    cr_assert_null(strchr(st.msg, '\n'), "%s: more than one line: %s", name, st.msg);
    tu_rmtree(dir);
    free(dir);
    free(path);
}

Test(bad_input, png_file) {
    static const uint8_t png[] = {0x89, 'P',  'N',  'G',  '\r', '\n', 0x1a, '\n', 0,   0,    0,
                                  13,   'I',  'H',  'D',  'R',  0,    0,    0,    1,   0,    0,
                                  0,    1,    8,    6,    0,    0,    0,    0x1f, 0x15, 0xc4, 0x89};
    expect_file_rejected("picture.png", png, sizeof png);
}

Test(bad_input, text_files) {
    const char *txt = "ir_version: 8\ngraph {\n  node { input: \"X\" output: \"Y\" op_type: \"Relu\" }\n}\n";
    expect_file_rejected("model.txt", txt, strlen(txt));
    const char *json = "{\"irVersion\": \"8\", \"graph\": {\"node\": [{\"opType\": \"Relu\"}]}}\n";
    expect_file_rejected("model.json", json, strlen(json));
}

Test(bad_input, tensor_pb_instead_of_model) {
    static const char *const pbs[] = {"node/test_relu/test_data_set_0/input_0.pb",
                                      "node/test_gemm_default_scalar_bias/test_data_set_0/input_0.pb",
                                      "node/test_if/test_data_set_0/input_0.pb"};
    for (size_t i = 0; i < sizeof pbs / sizeof pbs[0]; i++) {
        PbBuf b = {0};
        read_testdata(pbs[i], &b);
        expect_file_rejected("input_0.pb", b.data, b.len);
        pb_free(&b);
    }
}

Test(bad_input, gzip_and_zip_files) {
    static const uint8_t gz[] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    expect_file_rejected("model.onnx.gz", gz, sizeof gz);
    static const uint8_t zip[] = {'P', 'K', 5, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    expect_file_rejected("model.zip", zip, sizeof zip);
}

Test(bad_input, missing_file_and_directory) {
    AmpStatus st = {0};
    AmpModel *m = NULL;
    AmpCode rc = amp_model_load_file("/nonexistent/ampc/nothing.onnx", NULL, &m, &st);
    cr_assert_eq(rc, AMP_ERR_INPUT, "%s", st.msg);
    cr_assert(tu_contains(st.msg, "nothing.onnx"), "%s", st.msg);
    char *dir = tu_mkdtemp();
    amp_status_clear(&st);
    rc = amp_model_load_file(dir, NULL, &m, &st);
    cr_assert_eq(rc, AMP_ERR_INPUT, "a folder as the model: %s: %s", amp_code_name(rc), st.msg);
    tu_rmtree(dir);
    free(dir);
}

Test(bad_input, fifo_is_not_a_hang) {
    tu_watchdog(20);
    char *dir = tu_mkdtemp();
    char *path = tu_path(dir, "pipe.onnx");
    cr_assert_eq(mkfifo(path, 0600), 0);
    AmpStatus st = {0};
    AmpModel *m = NULL;
    AmpCode rc = amp_model_load_file(path, NULL, &m, &st);
    cr_assert_eq(rc, AMP_ERR_INPUT, "a FIFO as the model: %s: %s", amp_code_name(rc), st.msg);
    tu_rmtree(dir);
    free(dir);
    free(path);
}

/* ---- the command line ----------------------------------------------------------------- */

typedef struct CliCase {
    char *dir, *in, *out;
} CliCase;

static void cli_setup(CliCase *c, const void *model, size_t len) {
    c->dir = tu_mkdtemp();
    cr_assert_not_null(c->dir);
    c->in = tu_path(c->dir, "in.onnx");
    c->out = tu_path(c->dir, "out.onnx");
    cr_assert(tu_write(c->in, model, len));
}

static void cli_teardown(CliCase *c) {
    tu_rmtree(c->dir);
    free(c->dir);
    free(c->in);
    free(c->out);
}

/* Runs `ampc IN -o OUT --passes none` expecting exit 1, one line on stderr naming IN,
 * and nothing at OUT (nor any temporary left in the folder). */
static void cli_expect_fail(const void *model, size_t len, const char *what) {
    CliCase c;
    cli_setup(&c, model, len);
    char *argv[] = {AMPC_BIN, c.in, "-o", c.out, "--passes", "none", NULL};
    char *out = NULL, *err = NULL;
    int rc = tu_run(argv, &out, &err);
    cr_assert_eq(rc, 1, "%s: exit %d, stderr: %s", what, rc, err ? err : "");
    cr_assert_eq(tu_count_lines(err), 1, "%s: stderr is not one line: [%s]", what, err);
    cr_assert(tu_contains(err, "in.onnx"), "%s: the error does not name the file: %s", what, err);
    cr_assert(!tu_exists(c.out), "%s: %s was written although the conversion failed", what, c.out);
    cr_assert_eq(tu_count_entries(c.dir), 1, "%s: files left behind in %s", what, c.dir);
    free(out);
    free(err);

    char *argv2[] = {AMPC_BIN, "verify", c.in, NULL};
    rc = tu_run(argv2, &out, &err);
    cr_assert_eq(rc, 1, "ampc verify, %s: exit %d, stderr: %s", what, rc, err ? err : "");
    cr_assert_eq(tu_count_lines(err), 1, "ampc verify, %s: stderr is not one line: [%s]", what, err);
    free(out);
    free(err);
    cli_teardown(&c);
}

Test(bad_input, cli_truncated_model) {
    tu_watchdog(60);
    PbBuf model = {0};
    onnx_small_model(&model);
    cli_expect_fail(model.data, model.len / 2, "truncated model");
    cli_expect_fail(model.data, model.len - 1, "model missing its last byte");
    pb_free(&model);
}

Test(bad_input, cli_empty_random_and_hostile) {
    tu_watchdog(60);
    cli_expect_fail("", 0, "empty file");
    uint8_t rnd[512];
    uint64_t s = 42;
    for (size_t i = 0; i < sizeof rnd; i++) rnd[i] = (uint8_t)rng_next(&s);
    cli_expect_fail(rnd, sizeof rnd, "random bytes");
    const int64_t d[2] = {INT64_C(1) << 40, INT64_C(1) << 40};
    PbBuf t = {0}, m = {0};
    float_tensor(&t, 2, d, 4);
    model_with_initializer(&m, &t);
    cli_expect_fail(m.data, m.len, "overflowing dims");
    pb_free(&m);
    PbBuf g = {0}, m2 = {0};
    const char *a_in[1] = {"cyc_b"}, *a_out[1] = {"cyc_a"}, *b_in[1] = {"cyc_a"}, *b_out[1] = {"cyc_b"};
    onnx_node(&g, "Relu", "node_a", 1, a_in, 1, a_out, NULL);
    onnx_node(&g, "Relu", "node_b", 1, b_in, 1, b_out, NULL);
    onnx_vi(&g, G_OUTPUT, "cyc_b", 1, -1, NULL);
    onnx_model(&m2, &g, 13);
    cli_expect_fail(m2.data, m2.len, "cycle");
    pb_free(&m2);
}

Test(bad_input, cli_failure_keeps_an_existing_output) {
    tu_watchdog(60);
    /* Atomic output: a failed run never leaves a half-written file at OUT; an older OUT
     * is either kept as it was or absent, never changed. */
    PbBuf model = {0};
    onnx_small_model(&model);
    CliCase c;
    cli_setup(&c, model.data, model.len / 3);
    cr_assert(tu_write(c.out, "previous", 8));
    char *argv[] = {AMPC_BIN, c.in, "-o", c.out, "--passes", "none", NULL};
    char *err = NULL;
    int rc = tu_run(argv, NULL, &err);
    cr_assert_eq(rc, 1, "exit %d: %s", rc, err);
    if (tu_exists(c.out)) {
        size_t n = 0;
        uint8_t *d = tu_read(c.out, &n);
        cr_assert(n == 8 && memcmp(d, "previous", 8) == 0, "the old output was modified");
        free(d);
    }
    cr_assert_leq(tu_count_entries(c.dir), 2, "temporary files left behind");
    free(err);
    cli_teardown(&c);
    pb_free(&model);
}

Test(bad_input, cli_success_leaves_input_unchanged) {
    tu_watchdog(60);
    PbBuf model = {0};
    onnx_small_model(&model);
    CliCase c;
    cli_setup(&c, model.data, model.len);
    struct stat before, after;
    cr_assert_eq(stat(c.in, &before), 0);
    char *argv[] = {AMPC_BIN, c.in, "-o", c.out, "--passes", "none", NULL};
    char *out = NULL, *err = NULL;
    int rc = tu_run(argv, &out, &err);
    cr_assert_eq(rc, 0, "exit %d: %s", rc, err);
    cr_assert_eq(stat(c.in, &after), 0);
    size_t n = 0;
    uint8_t *d = tu_read(c.in, &n);
    cr_assert(n == model.len && memcmp(d, model.data, n) == 0, "the input file was modified");
    free(d);
    cr_assert(before.st_mtime == after.st_mtime && before.st_ino == after.st_ino,
              "the input file was rewritten");
    cr_assert(tu_exists(c.out), "no output written");
    cr_assert_eq(tu_count_entries(c.dir), 2, "extra files in %s", c.dir);
    /* The output reloads as the same model. */
    AmpStatus st = {0};
    AmpModel *m = NULL;
    cr_assert_eq(amp_model_load_file(c.out, NULL, &m, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(m->graph->n_nodes, 2);
    amp_model_free(m);
    free(out);
    free(err);
    cli_teardown(&c);
    pb_free(&model);
}

Test(bad_input, cli_output_has_normal_permissions) {
    tu_watchdog(60);
    /* The temporary file is renamed into place: it must not keep mkstemp's 0600 mode. */
    PbBuf model = {0};
    onnx_small_model(&model);
    CliCase c;
    cli_setup(&c, model.data, model.len);
    mode_t um = umask(022);
    char *argv[] = {AMPC_BIN, c.in, "-o", c.out, "--passes", "none", NULL};
    int rc = tu_run(argv, NULL, NULL);
    umask(um);
    cr_assert_eq(rc, 0);
    struct stat sb;
    cr_assert_eq(stat(c.out, &sb), 0);
    cr_assert_eq(sb.st_mode & 0777, 0644, "output mode is %03o, expected 0644 under umask 022",
                 (unsigned)(sb.st_mode & 0777));
    cli_teardown(&c);
    pb_free(&model);
}

Test(bad_input, cli_unwritable_output_folder) {
    tu_watchdog(60);
    PbBuf model = {0};
    onnx_small_model(&model);
    CliCase c;
    cli_setup(&c, model.data, model.len);
    char *bad_out = tu_path(c.dir, "no/such/folder/out.onnx");
    char *argv[] = {AMPC_BIN, c.in, "-o", bad_out, "--passes", "none", NULL};
    char *err = NULL;
    int rc = tu_run(argv, NULL, &err);
    cr_assert(rc == 1 || rc == 4, "exit %d: %s", rc, err);
    cr_assert_eq(tu_count_lines(err), 1, "stderr is not one line: [%s]", err);
    cr_assert_eq(tu_count_entries(c.dir), 1, "files left behind");
    free(err);
    free(bad_out);
    cli_teardown(&c);
    pb_free(&model);
}
