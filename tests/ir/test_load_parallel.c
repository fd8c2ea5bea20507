/* The main graph's nodes loaded by several threads (ir/load_par.c) make the model one
 * thread makes: every conformance model and every model of models/ saves byte for byte
 * alike; damaged copies fail with the same message; and built graphs that take each path
 * of the parallel load (nodes out of order, tensor and graph attributes, unknown fields,
 * an error in a prepared node, an error late in the graph) agree too. The serial load
 * is the reference: test_roundtrip.c and test_bad_*.c hold it to the file. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "tests/ir/irtest_util.h"

static const AmpLoadOptions SERIAL = {.threads = 1};
/* Every graph in parallel, in chunks of one node and up (ir/load_par.c sizes them from
 * the node count and the threads). */
static const AmpLoadOptions PARALLEL = {.threads = 4, .parallel_min_nodes = 1};

typedef struct Outcome {
    AmpCode rc;
    char msg[sizeof(((AmpStatus *)0)->msg)];
    uint8_t *bytes; /* the model saved, when it loaded */
    size_t len;
} Outcome;

static void load(const void *buf, size_t len, const char *dir, const AmpLoadOptions *o, Outcome *out) {
    AmpStatus st = {0};
    AmpModel *m = NULL;
    memset(out, 0, sizeof *out);
    out->rc = amp_model_load_bytes(buf, len, dir, o, &m, &st);
    snprintf(out->msg, sizeof out->msg, "%s", st.msg);
    if (out->rc == AMP_OK) {
        AmpStatus sst = {0};
        AmpCode rc = amp_model_save_bytes(m, &out->bytes, &out->len, &sst);
        if (rc != AMP_OK) cr_assert_fail("a loaded model does not save: %s", sst.msg);
        amp_model_free(m);
    }
}

/* The serial and the parallel load of buf agree; returns the serial load's code. */
static AmpCode expect_same(const void *buf, size_t len, const char *dir, const char *what) {
    Outcome a, b;
    load(buf, len, dir, &SERIAL, &a);
    load(buf, len, dir, &PARALLEL, &b);
    if (a.rc != b.rc || strcmp(a.msg, b.msg) != 0)
        cr_assert_fail("%s: one thread: %d \"%s\"; four: %d \"%s\"", what, a.rc, a.msg, b.rc, b.msg);
    if (a.rc == AMP_OK && (a.len != b.len || memcmp(a.bytes, b.bytes, a.len) != 0))
        cr_assert_fail("%s: saved %zu bytes after one thread's load, %zu (different) after four", what, a.len,
                       b.len);
    free(a.bytes);
    free(b.bytes);
    return a.rc;
}

static void expect_same_file(const char *path) {
    size_t len = 0;
    uint8_t *buf = tu_read(path, &len);
    cr_assert_not_null(buf, "%s: cannot read", path);
    char *dir = strdup(path);
    *strrchr(dir, '/') = '\0';
    expect_same(buf, len, dir, path);
    free(dir);
    free(buf);
}

Test(load_parallel, every_testdata_model_and_models) {
    tu_watchdog(900);
    size_t n = 0;
    char **paths = tu_list_testdata_models(AMPC_TESTDATA, &n);
    cr_assert_geq(n, 1000, "only %zu model.onnx files under %s: is libonnx-testdata installed?", n, AMPC_TESTDATA);
    for (size_t i = 0; i < n; i++) {
        expect_same_file(paths[i]);
        free(paths[i]);
    }
    free(paths);
    static const char *const ours[] = {"cnn_infer", "mlp_grads", "mlp_train"};
    for (size_t i = 0; i < sizeof ours / sizeof ours[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/../models/%s/model.onnx", AMPC_TEST_DIR, ours[i]);
        expect_same_file(path);
    }
}

/* ---- built graphs ------------------------------------------------------------------ */

enum { CHAIN = 3000 };

typedef struct ChainSpec {
    bool reversed;      /* nodes written last first: every input waits for pass 2 */
    int constant_every; /* every k-th node a Constant (a tensor attribute); 0: none */
    int if_every;       /* every k-th node an If whose branches read an outer value */
    int unknown_every;  /* every k-th node carries an unknown field and int attributes */
    int dup_output_at;  /* this node writes an output already written; 0: none */
    int broken_at;      /* this node's name has a bad length (a malformed node); 0: none */
} ChainSpec;

/* A branch of an If: Y = Identity(outer). */
static void branch(PbBuf *g, const char *outer, const char *out) {
    const char *in[1] = {outer}, *o[1] = {out};
    onnx_node(g, "Identity", NULL, 1, in, 1, o, NULL);
    pb_str(g, G_NAME, out);
    const int64_t d[1] = {4};
    onnx_vi(g, G_OUTPUT, out, 1, 1, d);
}

/* x0 (input) -> Relu/Constant+Add/If/... -> x<CHAIN> (output), as the spec says. */
static void chain_model(const ChainSpec *s, PbBuf *model) {
    PbBuf *nodes = calloc(CHAIN, sizeof *nodes), g = {0};
    cr_assert_not_null(nodes);
    for (int i = 0; i < CHAIN; i++) {
        char in[32], out[32], name[32], cst[32];
        snprintf(in, sizeof in, "x%d", i);
        snprintf(out, sizeof out, "x%d", i + 1);
        snprintf(name, sizeof name, "n%d", i);
        if (s->dup_output_at && s->dup_output_at == i) snprintf(out, sizeof out, "x%d", i);
        const char *ins[2] = {in, cst}, *outs[1] = {out};
        PbBuf *nb = &nodes[i];
        if (s->constant_every && i % s->constant_every == 1) {
            /* c_i = Constant(value=[i, i, i, i]); x_{i+1} = Add(x_i, c_i): two nodes. */
            PbBuf attrs = {0}, t = {0};
            const int64_t d[1] = {4};
            float v[4] = {(float)i, (float)i, (float)i, (float)i};
            snprintf(cst, sizeof cst, "c%d", i);
            onnx_tensor_head(&t, NULL, 1, 1, d);
            pb_bytes(&t, T_RAW, v, sizeof v);
            onnx_attr_tensor(&attrs, "value", &t);
            const char *co[1] = {cst};
            char cname[40];
            snprintf(cname, sizeof cname, "%s_const", name);
            onnx_node(nb, "Constant", cname, 0, NULL, 1, co, &attrs);
            onnx_node(nb, "Add", name, 2, ins, 1, outs, NULL);
        } else if (s->if_every && i % s->if_every == 2) {
            /* x_{i+1} = If(cond) then Identity(x_i) else Identity(x_i) */
            PbBuf attrs = {0}, tb = {0}, eb = {0};
            char tname[40], ename[40];
            snprintf(tname, sizeof tname, "%s_then", name);
            snprintf(ename, sizeof ename, "%s_else", name);
            branch(&tb, in, tname);
            branch(&eb, in, ename);
            onnx_attr_graph(&attrs, "then_branch", &tb);
            onnx_attr_graph(&attrs, "else_branch", &eb);
            const char *ci[1] = {"cond"};
            onnx_node(nb, "If", name, 1, ci, 1, outs, &attrs);
        } else if (s->unknown_every && i % s->unknown_every == 3) {
            /* Softmax(axis=-1) with an unknown field: the saver gives it back in place. */
            PbBuf body = {0}, attrs = {0};
            pb_str(&body, N_INPUT, in);
            pb_str(&body, N_OUTPUT, out);
            pb_str(&body, N_NAME, name);
            pb_str(&body, N_OP, "Softmax");
            onnx_attr_int(&attrs, "axis", -1);
            pb_raw(&body, attrs.data, attrs.len);
            pb_free(&attrs);
            pb_int(&body, 1000 + (uint32_t)(i % 7), i);
            pb_msg(nb, G_NODE, &body);
        } else if (s->broken_at && s->broken_at == i) {
            /* A NodeProto whose name claims more bytes than the node holds. */
            PbBuf body = {0};
            pb_str(&body, N_INPUT, in);
            pb_str(&body, N_OUTPUT, out);
            pb_key(&body, N_NAME, 2);
            pb_varint(&body, 200);
            pb_raw(&body, "n", 1);
            pb_msg(nb, G_NODE, &body);
        } else {
            onnx_node(nb, "Relu", name, 1, ins, 1, outs, NULL);
        }
    }
    for (int k = 0; k < CHAIN; k++) {
        int i = s->reversed ? CHAIN - 1 - k : k;
        pb_raw(&g, nodes[i].data, nodes[i].len);
        pb_free(&nodes[i]);
    }
    free(nodes);
    pb_str(&g, G_NAME, "chain");
    const int64_t d[1] = {4};
    onnx_vi(&g, G_INPUT, "x0", 1, 1, d);
    if (s->if_every) onnx_vi(&g, G_INPUT, "cond", 9, 0, NULL);
    char last[32];
    snprintf(last, sizeof last, "x%d", CHAIN);
    onnx_vi(&g, G_OUTPUT, last, 1, 1, d);
    onnx_model(model, &g, 13);
}

static AmpCode chain_same(const ChainSpec *s, const char *what) {
    PbBuf m = {0};
    chain_model(s, &m);
    AmpCode rc = expect_same(m.data, m.len, NULL, what);
    pb_free(&m);
    return rc;
}

#define SPEC(...) (&(ChainSpec){__VA_ARGS__})

Test(load_parallel, built_graphs_load_alike) {
    cr_assert_eq(chain_same(SPEC(.reversed = false), "a chain"), AMP_OK);
    cr_assert_eq(chain_same(SPEC(.reversed = true), "a chain written backwards"), AMP_OK);
    cr_assert_eq(chain_same(SPEC(.constant_every = 10), "Constant nodes"), AMP_OK);
    cr_assert_eq(chain_same(SPEC(.if_every = 25), "If nodes"), AMP_OK);
    cr_assert_eq(chain_same(SPEC(.unknown_every = 9), "unknown fields"), AMP_OK);
    cr_assert_eq(chain_same(SPEC(.reversed = true, .constant_every = 7, .if_every = 11, .unknown_every = 5),
                            "all of it, backwards"),
                 AMP_OK);
}

Test(load_parallel, errors_are_worded_alike) {
    /* The message itself is compared by expect_same; these say which error it is. */
    cr_assert_eq(chain_same(SPEC(.dup_output_at = 2500), "an output defined twice"), AMP_ERR_INPUT);
    cr_assert_eq(chain_same(SPEC(.broken_at = 1700), "a malformed node"), AMP_ERR_INPUT);
    cr_assert_eq(chain_same(SPEC(.broken_at = 2999, .reversed = true), "a malformed node, backwards"),
                 AMP_ERR_INPUT);
    cr_assert_eq(chain_same(SPEC(.broken_at = 10, .dup_output_at = 2000), "two errors"), AMP_ERR_INPUT);
}

/* Damaged copies: bytes flipped at random places in a built graph with every kind of
 * node and in the bundled models. Each copy fails (or loads) alike both ways. */
Test(load_parallel, damaged_copies_fail_alike) {
    tu_watchdog(600);
    PbBuf m = {0};
    chain_model(SPEC(.constant_every = 13, .if_every = 17, .unknown_every = 11), &m);
    uint64_t seed = 0x9E3779B97F4A7C15ull;
    size_t failed = 0, loaded = 0;
    for (int k = 0; k < 300; k++) {
        uint8_t *copy = malloc(m.len);
        cr_assert_not_null(copy);
        memcpy(copy, m.data, m.len);
        for (int f = 0; f < 1 + k % 3; f++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            copy[(seed >> 33) % m.len] ^= (uint8_t)(1u << ((seed >> 20) % 8));
        }
        char what[64];
        snprintf(what, sizeof what, "damaged copy %d", k);
        if (expect_same(copy, m.len, NULL, what) == AMP_OK) loaded++;
        else failed++;
        free(copy);
    }
    pb_free(&m);
    /* Both kinds happen, or the test says little. */
    cr_assert_gt(failed, 0);
    cr_assert_gt(loaded, 0);
}

/* With the default options a graph of AMP_LOAD_PARALLEL_MIN nodes or more is loaded by
 * the thread knob's threads (set here, in this test's own process, as a session or ampc
 * sets it from AMP_THREADS, so that a 2-CPU machine takes the parallel path too): it
 * still equals the one-thread load. */
Test(load_parallel, default_options_on_a_big_graph) {
    amp_threads_set(4);
    cr_assert_eq(amp_threads(), 4);
    PbBuf g = {0}, m = {0};
    const int n = AMP_LOAD_PARALLEL_MIN + 1000;
    for (int i = 0; i < n; i++) {
        char in[32], out[32];
        snprintf(in, sizeof in, "v%d", i);
        snprintf(out, sizeof out, "v%d", i + 1);
        const char *ins[1] = {in}, *outs[1] = {out};
        onnx_node(&g, i % 2 ? "Relu" : "Sigmoid", NULL, 1, ins, 1, outs, NULL);
    }
    const int64_t d[1] = {4};
    onnx_vi(&g, G_INPUT, "v0", 1, 1, d);
    char last[32];
    snprintf(last, sizeof last, "v%d", n);
    onnx_vi(&g, G_OUTPUT, last, 1, 1, d);
    onnx_model(&m, &g, 13);
    Outcome a, b;
    load(m.data, m.len, NULL, &SERIAL, &a);
    load(m.data, m.len, NULL, NULL, &b);
    cr_assert_eq(a.rc, AMP_OK, "%s", a.msg);
    cr_assert_eq(b.rc, AMP_OK, "%s", b.msg);
    cr_assert(a.len == b.len && memcmp(a.bytes, b.bytes, a.len) == 0);
    free(a.bytes);
    free(b.bytes);
    pb_free(&m);
}
