/* External tensor data: ALWAYS/AUTO/NEVER saves, loads that map the data file (not copy it),
 * saving over a still-mapped model, files as onnx.external_data_helper writes them, and every
 * hostile location/offset/length (outside the folder, symlinks, past the end, FIFOs). */
#include <criterion/criterion.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ir/ir.h"
#include "tests/ir/irtest_util.h"

enum { BIG_N = 4096 }; /* floats in W: 16 KiB, above the default 1024-byte threshold */

static float w_value(size_t i) {
    return (float)i * 0.5f - 7.0f;
}

static AmpTensor *new_float_tensor(AmpModel *m, size_t n, float (*fill)(size_t)) {
    AmpTensor *t = amp_arena_calloc(&m->arena, 1, sizeof *t);
    cr_assert_not_null(t);
    t->dtype = AMP_DT_FLOAT;
    t->has = AMP_TENSOR_HAS_DTYPE | AMP_TENSOR_HAS_RAW;
    t->ndims = 1;
    t->dims = amp_arena_calloc(&m->arena, 1, sizeof *t->dims);
    t->dims[0] = (int64_t)n;
    t->nelem = n;
    float *d = amp_arena_calloc(&m->arena, n, sizeof *d);
    for (size_t i = 0; i < n; i++) d[i] = fill(i);
    t->raw.data = (const uint8_t *)d;
    t->raw.len = n * sizeof *d;
    return t;
}

static float s_value(size_t i) {
    (void)i;
    return 3.0f;
}

static void set_vec_type(AmpModel *m, AmpValue *v, int64_t n) {
    AmpDim *d = amp_arena_calloc(&m->arena, 1, sizeof *d);
    d->value = n;
    v->type = (AmpType){AMP_TYPE_TENSOR, AMP_DT_FLOAT, 1, d};
}

/* Z = (X + W) * S with W a 16 KiB initializer and S a 4-byte one. */
static AmpModel *build_model(void) {
    AmpModel *m = amp_model_new();
    cr_assert_not_null(m);
    m->has |= AMP_MODEL_HAS_IR_VERSION;
    m->ir_version = 8;
    m->producer_name = "ampc-tests";
    m->opsets = amp_arena_calloc(&m->arena, 1, sizeof *m->opsets);
    m->opsets[0] = (AmpOpset){.domain = "", .version = 13, .has_version = true};
    m->n_opsets = 1;
    AmpGraph *g = m->graph;
    g->name = "ext";
    AmpValue *x = amp_graph_value(g, "X"), *w = amp_graph_value(g, "W"), *s = amp_graph_value(g, "S");
    AmpValue *y = amp_graph_value(g, "Y"), *z = amp_graph_value(g, "Z");
    set_vec_type(m, x, BIG_N);
    set_vec_type(m, w, BIG_N);
    set_vec_type(m, y, BIG_N);
    set_vec_type(m, z, BIG_N);
    AmpDim *sd = amp_arena_calloc(&m->arena, 1, sizeof *sd);
    sd->value = 1;
    s->type = (AmpType){AMP_TYPE_TENSOR, AMP_DT_FLOAT, 1, sd};
    amp_graph_add_input(g, x);
    cr_assert_eq(amp_graph_add_initializer(g, w, new_float_tensor(m, BIG_N, w_value)), AMP_OK);
    cr_assert_eq(amp_graph_add_initializer(g, s, new_float_tensor(m, 1, s_value)), AMP_OK);
    AmpNode *add = amp_node_new(g, "", "Add", "add", 2, 1);
    amp_node_set_input(add, 0, x);
    amp_node_set_input(add, 1, w);
    amp_node_set_output(add, 0, y);
    amp_node_append(g, add);
    AmpNode *mul = amp_node_new(g, "", "Mul", "mul", 2, 1);
    amp_node_set_input(mul, 0, y);
    amp_node_set_input(mul, 1, s);
    amp_node_set_output(mul, 0, z);
    amp_node_append(g, mul);
    amp_graph_add_output(g, z);
    return m;
}

static AmpModel *load_ok(const char *path) {
    AmpStatus st = {0};
    AmpModel *m = NULL;
    AmpCode rc = amp_model_load_file(path, NULL, &m, &st);
    cr_assert_eq(rc, AMP_OK, "loading %s: %s", path, st.msg);
    return m;
}

static AmpTensor *initializer(AmpModel *m, const char *name) {
    AmpValue *v = amp_graph_lookup(m->graph, name);
    cr_assert(v && v->initializer, "no initializer %s", name);
    return v->initializer;
}

static void check_w(AmpModel *m) {
    AmpStatus st = {0};
    AmpBytes b;
    cr_assert_eq(amp_tensor_bytes(m, initializer(m, "W"), &b, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(b.len, BIG_N * sizeof(float));
    for (size_t i = 0; i < BIG_N; i++) {
        float f;
        memcpy(&f, b.data + 4 * i, 4);
        cr_assert_eq(f, w_value(i), "W[%zu] = %g, want %g", i, (double)f, (double)w_value(i));
    }
    cr_assert_eq(amp_tensor_bytes(m, initializer(m, "S"), &b, &st), AMP_OK, "%s", st.msg);
    float s;
    cr_assert_eq(b.len, 4);
    memcpy(&s, b.data, 4);
    cr_assert_eq(s, 3.0f);
}

/* Is p inside a mapping of a file whose path ends with `suffix` (/proc/self/maps)? */
static bool mapped_from(const void *p, const char *suffix) {
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return false;
    char line[4096];
    bool found = false;
    uintptr_t a = (uintptr_t)p;
    while (!found && fgets(line, sizeof line, f)) {
        uintptr_t lo, hi;
        if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR, &lo, &hi) != 2 || a < lo || a >= hi) continue;
        size_t n = strlen(line);
        while (n && (line[n - 1] == '\n' || line[n - 1] == ' ')) line[--n] = 0;
        size_t sl = strlen(suffix);
        found = n >= sl && strcmp(line + n - sl, suffix) == 0;
    }
    fclose(f);
    return found;
}

static void save_ok(AmpModel *m, const char *path, AmpExternalMode mode, size_t min_bytes) {
    AmpStatus st = {0};
    AmpSaveOptions so = {.external = mode, .external_min_bytes = min_bytes};
    cr_assert_eq(amp_model_save_file(m, path, &so, &st), AMP_OK, "saving %s: %s", path, st.msg);
}

/* ---- good paths ---------------------------------------------------------------------- */

Test(extdata, always_then_load_by_mmap) {
    char *dir = tu_mkdtemp();
    char *path = tu_path(dir, "model.onnx");
    AmpModel *m = build_model();
    save_ok(m, path, AMP_SAVE_EXTERNAL_ALWAYS, 0);
    amp_model_free(m);
    cr_assert_eq(tu_count_entries(dir), 2, "expected the model and one data file");
    char *data = tu_path(dir, "model.onnx.data");
    struct stat sb;
    cr_assert_eq(stat(data, &sb), 0, "no model.onnx.data beside the model");
    cr_assert_geq((size_t)sb.st_size, BIG_N * sizeof(float) + 4);

    m = load_ok(path);
    AmpTensor *w = initializer(m, "W"), *s = initializer(m, "S");
    cr_assert(w->is_external, "W was saved external but is not external after load");
    cr_assert(s->is_external, "min_bytes 0: S should be external too");
    cr_assert_eq(w->data_location, 1);
    cr_assert(mapped_from(w->raw.data, "/model.onnx.data"),
              "W's bytes are not in a mapping of model.onnx.data (copied instead of mmap?)");
    check_w(m);
    amp_model_free(m);
    tu_rmtree(dir);
    free(dir);
    free(path);
    free(data);
}

Test(extdata, min_bytes_keeps_small_tensors_inline) {
    char *dir = tu_mkdtemp();
    char *path = tu_path(dir, "model.onnx");
    AmpModel *m = build_model();
    save_ok(m, path, AMP_SAVE_EXTERNAL_ALWAYS, 1024);
    amp_model_free(m);
    m = load_ok(path);
    cr_assert(initializer(m, "W")->is_external);
    cr_assert(!initializer(m, "S")->is_external, "a 4-byte tensor went external with min 1024");
    check_w(m);
    amp_model_free(m);
    tu_rmtree(dir);
    free(dir);
    free(path);
}

Test(extdata, auto_and_never_write_one_file_when_small) {
    char *dir = tu_mkdtemp(), *dir2 = tu_mkdtemp(), *dir3 = tu_mkdtemp();
    char *path = tu_path(dir, "model.onnx"), *p2 = tu_path(dir2, "auto.onnx"), *p3 = tu_path(dir3, "never.onnx");
    AmpModel *m = build_model();
    save_ok(m, path, AMP_SAVE_EXTERNAL_ALWAYS, 0);
    amp_model_free(m);
    m = load_ok(path); /* external, mapped */
    save_ok(m, p2, AMP_SAVE_EXTERNAL_AUTO, 1024);
    save_ok(m, p3, AMP_SAVE_EXTERNAL_NEVER, 1024);
    amp_model_free(m);
    cr_assert_eq(tu_count_entries(dir2), 1, "AUTO wrote external data for a small model");
    cr_assert_eq(tu_count_entries(dir3), 1, "NEVER wrote external data");
    AmpModel *a = load_ok(p2), *n = load_ok(p3);
    cr_assert(!initializer(a, "W")->is_external);
    cr_assert(!initializer(n, "W")->is_external);
    check_w(a);
    check_w(n);
    /* Both are the same single-file model. */
    AmpStatus st = {0};
    uint8_t *ba, *bn;
    size_t la, ln;
    cr_assert_eq(amp_model_save_bytes(a, &ba, &la, &st), AMP_OK);
    cr_assert_eq(amp_model_save_bytes(n, &bn, &ln, &st), AMP_OK);
    cr_assert(la == ln && memcmp(ba, bn, la) == 0);
    free(ba);
    free(bn);
    amp_model_free(a);
    amp_model_free(n);
    tu_rmtree(dir), tu_rmtree(dir2), tu_rmtree(dir3);
    free(dir), free(dir2), free(dir3), free(path), free(p2), free(p3);
}

Test(extdata, external_to_external_again) {
    char *dir = tu_mkdtemp(), *dir2 = tu_mkdtemp();
    char *path = tu_path(dir, "model.onnx"), *p2 = tu_path(dir2, "again.onnx");
    AmpModel *m = build_model();
    save_ok(m, path, AMP_SAVE_EXTERNAL_ALWAYS, 0);
    amp_model_free(m);
    m = load_ok(path);
    save_ok(m, p2, AMP_SAVE_EXTERNAL_ALWAYS, 1024);
    amp_model_free(m);
    cr_assert_eq(tu_count_entries(dir2), 2);
    m = load_ok(p2);
    cr_assert(initializer(m, "W")->is_external);
    cr_assert(mapped_from(initializer(m, "W")->raw.data, "/again.onnx.data"));
    check_w(m);
    amp_model_free(m);
    tu_rmtree(dir), tu_rmtree(dir2);
    free(dir), free(dir2), free(path), free(p2);
}

Test(extdata, save_over_the_mapped_model) {
    /* `ampc m.onnx -o m.onnx`: the data file being written is the one still mapped. */
    char *dir = tu_mkdtemp();
    char *path = tu_path(dir, "model.onnx");
    AmpModel *m = build_model();
    save_ok(m, path, AMP_SAVE_EXTERNAL_ALWAYS, 0);
    amp_model_free(m);
    m = load_ok(path);
    save_ok(m, path, AMP_SAVE_EXTERNAL_ALWAYS, 1024);
    check_w(m); /* the old mapping still reads the old bytes */
    amp_model_free(m);
    m = load_ok(path);
    check_w(m);
    amp_model_free(m);
    cr_assert_eq(tu_count_entries(dir), 2, "temporaries left behind");
    tu_rmtree(dir);
    free(dir);
    free(path);
}

Test(extdata, relative_model_path) {
    /* A model opened as "model.onnx" from its own folder resolves its data there. */
    char *dir = tu_mkdtemp();
    char *path = tu_path(dir, "model.onnx");
    AmpModel *m = build_model();
    save_ok(m, path, AMP_SAVE_EXTERNAL_ALWAYS, 0);
    amp_model_free(m);
    cr_assert_eq(chdir(dir), 0);
    m = load_ok("model.onnx");
    check_w(m);
    amp_model_free(m);
    cr_assert_eq(chdir("/"), 0);
    tu_rmtree(dir);
    free(dir);
    free(path);
}

/* ---- models written by hand, the way onnx.external_data_helper does ------------------- */

/* Y = Add(A, B): A and B are float (3) initializers whose TensorProto bodies are given. */
static void ext_model(PbBuf *out, PbBuf *ta, PbBuf *tb) {
    PbBuf g = {0};
    const char *in[2] = {"A", "B"}, *o[1] = {"Y"};
    const int64_t d[1] = {3};
    onnx_node(&g, "Add", "add", 2, in, 1, o, NULL);
    pb_str(&g, G_NAME, "g");
    pb_msg(&g, G_INIT, ta);
    pb_msg(&g, G_INIT, tb);
    onnx_vi(&g, G_OUTPUT, "Y", 1, 1, d);
    onnx_model(out, &g, 13);
}

static void ext_tensor(PbBuf *t, const char *name, const char *loc, int64_t off, int64_t len) {
    const int64_t d[1] = {3};
    onnx_tensor_head(t, name, 1, 1, d);
    onnx_tensor_external(t, loc, off, len);
}

static void inline_tensor(PbBuf *t, const char *name) {
    const int64_t d[1] = {3};
    const float v[3] = {1, 2, 3};
    onnx_tensor_head(t, name, 1, 1, d);
    pb_bytes(t, T_RAW, v, sizeof v);
}

/* weights.bin: 16 bytes of header junk, A (3 floats), B (3 floats), 8 bytes of tail. */
static char *write_weights(const char *dir, const char *name) {
    uint8_t buf[16 + 24 + 8];
    memset(buf, 0xAB, sizeof buf);
    const float a[3] = {1.5f, -2.0f, 3.25f}, b[3] = {10.0f, 20.0f, 30.0f};
    memcpy(buf + 16, a, 12);
    memcpy(buf + 28, b, 12);
    char *p = tu_path(dir, name);
    cr_assert(tu_write(p, buf, sizeof buf));
    return p;
}

static void check_floats(AmpModel *m, const char *name, float f0, float f1, float f2) {
    AmpStatus st = {0};
    AmpBytes b;
    cr_assert_eq(amp_tensor_bytes(m, initializer(m, name), &b, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(b.len, 12);
    float v[3];
    memcpy(v, b.data, 12);
    cr_assert(v[0] == f0 && v[1] == f1 && v[2] == f2, "%s = %g %g %g", name, (double)v[0],
              (double)v[1], (double)v[2]);
}

Test(extdata, hand_written_offsets_and_lengths) {
    char *dir = tu_mkdtemp();
    free(write_weights(dir, "weights.bin"));
    PbBuf ta = {0}, tb = {0}, model = {0};
    ext_tensor(&ta, "A", "weights.bin", 16, 12);
    ext_tensor(&tb, "B", "weights.bin", 28, 12);
    ext_model(&model, &ta, &tb);
    char *path = tu_path(dir, "model.onnx");
    cr_assert(tu_write(path, model.data, model.len));
    AmpModel *m = load_ok(path);
    check_floats(m, "A", 1.5f, -2.0f, 3.25f);
    check_floats(m, "B", 10.0f, 20.0f, 30.0f);
    cr_assert(initializer(m, "A")->is_external && initializer(m, "B")->is_external);

    /* AUTO: one file; then ALWAYS: external again; values survive both. */
    char *dir2 = tu_mkdtemp();
    char *p2 = tu_path(dir2, "one.onnx"), *p3 = tu_path(dir2, "ext.onnx");
    save_ok(m, p2, AMP_SAVE_EXTERNAL_AUTO, 1024);
    save_ok(m, p3, AMP_SAVE_EXTERNAL_ALWAYS, 0);
    amp_model_free(m);
    cr_assert_eq(tu_count_entries(dir2), 3, "one.onnx, ext.onnx, ext.onnx.data");
    AmpModel *one = load_ok(p2), *ext = load_ok(p3);
    cr_assert(!initializer(one, "A")->is_external);
    cr_assert(initializer(ext, "A")->is_external);
    check_floats(one, "A", 1.5f, -2.0f, 3.25f);
    check_floats(ext, "B", 10.0f, 20.0f, 30.0f);
    amp_model_free(one);
    amp_model_free(ext);

    /* load_bytes resolves against the folder it is given. */
    AmpStatus st = {0};
    AmpModel *mb = NULL;
    cr_assert_eq(amp_model_load_bytes(model.data, model.len, dir, NULL, &mb, &st), AMP_OK, "%s", st.msg);
    check_floats(mb, "B", 10.0f, 20.0f, 30.0f);
    amp_model_free(mb);

    tu_rmtree(dir), tu_rmtree(dir2);
    free(dir), free(dir2), free(path), free(p2), free(p3);
    pb_free(&model);
}

Test(extdata, whole_file_subfolder_and_inner_symlink) {
    char *dir = tu_mkdtemp();
    char *sub = tu_path(dir, "sub");
    cr_assert_eq(mkdir(sub, 0755), 0);
    const float a[3] = {4, 5, 6};
    char *af = tu_path(sub, "a.bin");
    cr_assert(tu_write(af, a, sizeof a));
    free(write_weights(dir, "weights.bin"));
    char *link = tu_path(dir, "link.bin");
    cr_assert_eq(symlink("weights.bin", link), 0);
    PbBuf ta = {0}, tb = {0}, model = {0};
    ext_tensor(&ta, "A", "sub/a.bin", -1, -1); /* no offset/length: the whole file */
    ext_tensor(&tb, "B", "link.bin", 28, 12); /* a symlink that stays inside is fine */
    ext_model(&model, &ta, &tb);
    AmpStatus st = {0};
    AmpModel *m = NULL;
    cr_assert_eq(amp_model_load_bytes(model.data, model.len, dir, NULL, &m, &st), AMP_OK, "%s", st.msg);
    check_floats(m, "A", 4, 5, 6);
    check_floats(m, "B", 10.0f, 20.0f, 30.0f);
    amp_model_free(m);
    tu_rmtree(dir);
    free(dir), free(sub), free(af), free(link);
    pb_free(&model);
}

/* ---- hostile external data ---------------------------------------------------------- */

/* Builds a model whose A is external (loc, off, len) and B inline, loads it against `dir`
 * and expects AMP_ERR_INPUT with a message containing `needle`. */
static void expect_ext_rejected(const char *dir, const char *loc, int64_t off, int64_t len,
                                const char *needle, const char *what) {
    PbBuf ta = {0}, tb = {0}, model = {0};
    ext_tensor(&ta, "A", loc, off, len);
    inline_tensor(&tb, "B");
    ext_model(&model, &ta, &tb);
    AmpStatus st = {0};
    AmpModel *m = NULL;
    AmpCode rc = amp_model_load_bytes(model.data, model.len, dir, NULL, &m, &st);
    if (rc == AMP_OK) amp_model_free(m);
    cr_assert_eq(rc, AMP_ERR_INPUT, "%s: got %s: %s", what, amp_code_name(rc), st.msg);
    cr_assert(tu_contains(st.msg, needle), "%s: message lacks '%s': %s", what, needle, st.msg);
    cr_assert_null(strchr(st.msg, '\n'), "%s: more than one line", what);
    cr_log_info("%s: %s", what, st.msg);
    pb_free(&model);
}

Test(extdata, location_outside_the_folder) {
    char *dir = tu_mkdtemp();
    char *inner = tu_path(dir, "inner");
    cr_assert_eq(mkdir(inner, 0755), 0);
    free(write_weights(dir, "weights.bin")); /* exists, but above `inner` */
    expect_ext_rejected(inner, "../weights.bin", 16, 12, "../weights.bin", "../ to the parent");
    expect_ext_rejected(inner, "../x", 0, 12, "../x", "../x");
    expect_ext_rejected(inner, "/etc/passwd", 0, 12, "/etc/passwd", "absolute path");
    expect_ext_rejected(inner, "a/../../weights.bin", 16, 12, "weights.bin", "../ in the middle");
    expect_ext_rejected(inner, "..", 0, 12, "..", "just ..");
    expect_ext_rejected(inner, "", 0, 12, "location", "empty location");
    expect_ext_rejected(inner, "C:\\weights.bin", 0, 12, "weights.bin", "windows path");
    /* symlinks that leave the folder */
    char *l1 = tu_path(inner, "evil.bin"), *l2 = tu_path(inner, "up.bin"), *l3 = tu_path(inner, "updir");
    cr_assert_eq(symlink("/etc/passwd", l1), 0);
    cr_assert_eq(symlink("../weights.bin", l2), 0);
    cr_assert_eq(symlink("..", l3), 0);
    expect_ext_rejected(inner, "evil.bin", 0, 12, "evil.bin", "symlink to /etc/passwd");
    expect_ext_rejected(inner, "up.bin", 16, 12, "up.bin", "symlink to ../weights.bin");
    expect_ext_rejected(inner, "updir/weights.bin", 16, 12, "weights.bin", "symlinked folder outside");
    tu_rmtree(dir);
    free(dir), free(inner), free(l1), free(l2), free(l3);
}

Test(extdata, offset_and_length_past_the_end) {
    char *dir = tu_mkdtemp();
    free(write_weights(dir, "weights.bin")); /* 48 bytes */
    expect_ext_rejected(dir, "weights.bin", 100, 12, "weights.bin", "offset past the end");
    expect_ext_rejected(dir, "weights.bin", 48, 12, "weights.bin", "offset at the end");
    expect_ext_rejected(dir, "weights.bin", 40, 12, "weights.bin", "offset+length past the end");
    expect_ext_rejected(dir, "weights.bin", INT64_MAX - 4, 12, "weights.bin", "offset near INT64_MAX");
    expect_ext_rejected(dir, "weights.bin", 8, INT64_MAX, "A", "length INT64_MAX");
    expect_ext_rejected(dir, "weights.bin", 16, 8, "A", "length shorter than the dims need");
    expect_ext_rejected(dir, "weights.bin", 16, 16, "A", "length longer than the dims need");
    /* no length, and the rest of the file after offset is too short */
    expect_ext_rejected(dir, "weights.bin", 40, -1, "weights.bin", "no length, short tail");
    tu_rmtree(dir);
    free(dir);
}

/* Writes key/value pairs verbatim (for malformed offsets). */
static void expect_raw_entries_rejected(const char *dir, const char *off, const char *len,
                                        const char *what) {
    const int64_t d[1] = {3};
    PbBuf ta = {0}, tb = {0}, model = {0};
    onnx_tensor_head(&ta, "A", 1, 1, d);
    onnx_str_entry(&ta, T_EXTERNAL, "location", "weights.bin");
    if (off) onnx_str_entry(&ta, T_EXTERNAL, "offset", off);
    if (len) onnx_str_entry(&ta, T_EXTERNAL, "length", len);
    pb_int(&ta, T_LOCATION, 1);
    inline_tensor(&tb, "B");
    ext_model(&model, &ta, &tb);
    AmpStatus st = {0};
    AmpModel *m = NULL;
    AmpCode rc = amp_model_load_bytes(model.data, model.len, dir, NULL, &m, &st);
    if (rc == AMP_OK) amp_model_free(m);
    cr_assert_eq(rc, AMP_ERR_INPUT, "%s: got %s: %s", what, amp_code_name(rc), st.msg);
    cr_assert(tu_contains(st.msg, "A"), "%s: %s", what, st.msg);
    pb_free(&model);
}

Test(extdata, malformed_offsets) {
    char *dir = tu_mkdtemp();
    free(write_weights(dir, "weights.bin"));
    expect_raw_entries_rejected(dir, "-4", "12", "negative offset");
    expect_raw_entries_rejected(dir, "abc", "12", "non-numeric offset");
    expect_raw_entries_rejected(dir, "16", "12abc", "trailing junk in length");
    expect_raw_entries_rejected(dir, "99999999999999999999999", "12", "offset overflowing int64");
    expect_raw_entries_rejected(dir, "16", "-12", "negative length");
    expect_raw_entries_rejected(dir, "", "12", "empty offset");
    expect_raw_entries_rejected(dir, " 16", "12", "offset with a space");
    tu_rmtree(dir);
    free(dir);
}

Test(extdata, missing_file_or_folder) {
    char *dir = tu_mkdtemp();
    expect_ext_rejected(dir, "nothing_here.bin", 0, 12, "nothing_here.bin", "missing file");
    char *sub = tu_path(dir, "a_folder");
    cr_assert_eq(mkdir(sub, 0755), 0);
    expect_ext_rejected(dir, "a_folder", 0, 12, "a_folder", "a folder as data file");
    tu_rmtree(dir);
    free(dir), free(sub);
}

Test(extdata, fifo_as_data_file_is_not_a_hang) {
    tu_watchdog(20);
    char *dir = tu_mkdtemp();
    char *fifo = tu_path(dir, "pipe.bin");
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    expect_ext_rejected(dir, "pipe.bin", 0, 12, "pipe.bin", "a FIFO as data file");
    tu_rmtree(dir);
    free(dir), free(fifo);
}

Test(extdata, no_folder_to_resolve_against) {
    PbBuf ta = {0}, tb = {0}, model = {0};
    ext_tensor(&ta, "A", "weights.bin", 0, 12);
    inline_tensor(&tb, "B");
    ext_model(&model, &ta, &tb);
    AmpStatus st = {0};
    AmpModel *m = NULL;
    cr_assert_eq(amp_model_load_bytes(model.data, model.len, NULL, NULL, &m, &st), AMP_ERR_INPUT, "%s",
                 st.msg);
    cr_assert(tu_contains(st.msg, "weights.bin"), "%s", st.msg);
    pb_free(&model);
}

Test(extdata, external_without_location_or_with_inline_data) {
    char *dir = tu_mkdtemp();
    free(write_weights(dir, "weights.bin"));
    const int64_t d[1] = {3};
    {
        PbBuf ta = {0}, tb = {0}, model = {0};
        onnx_tensor_head(&ta, "A", 1, 1, d);
        onnx_str_entry(&ta, T_EXTERNAL, "offset", "16");
        pb_int(&ta, T_LOCATION, 1);
        inline_tensor(&tb, "B");
        ext_model(&model, &ta, &tb);
        AmpStatus st = {0};
        AmpModel *m = NULL;
        cr_assert_eq(amp_model_load_bytes(model.data, model.len, dir, NULL, &m, &st), AMP_ERR_INPUT,
                     "%s", st.msg);
        cr_assert(tu_contains(st.msg, "location"), "%s", st.msg);
        pb_free(&model);
    }
    {
        PbBuf ta = {0}, tb = {0}, model = {0};
        const float v[3] = {1, 2, 3};
        onnx_tensor_head(&ta, "A", 1, 1, d);
        pb_bytes(&ta, T_RAW, v, sizeof v);
        onnx_tensor_external(&ta, "weights.bin", 16, 12);
        inline_tensor(&tb, "B");
        ext_model(&model, &ta, &tb);
        AmpStatus st = {0};
        AmpModel *m = NULL;
        AmpCode rc = amp_model_load_bytes(model.data, model.len, dir, NULL, &m, &st);
        if (rc == AMP_OK) amp_model_free(m);
        cr_assert_eq(rc, AMP_ERR_INPUT, "external and raw_data both: %s", st.msg);
        pb_free(&model);
    }
    tu_rmtree(dir);
    free(dir);
}

/* ---- over 2 GB (writes ~2.2 GB: with AMPC_BIG_TESTS=1, which scripts/test.sh sets when
 * the temporary folder has 10 GB free) ---------------------------------------------------- */

/* A model of two 1.1 GB tensors in a sparse data file (mapping it costs no memory), written
 * into dir; its path (malloc'd). */
static char *big_model(const char *dir) {
    const int64_t n = (INT64_C(1100) << 20) / 4;
    char *data = tu_path(dir, "big.bin");
    FILE *f = fopen(data, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(ftruncate(fileno(f), (off_t)(2 * n * 4)), 0);
    fclose(f);
    free(data);
    PbBuf ta = {0}, tb = {0}, g = {0}, model = {0};
    onnx_tensor_head(&ta, "A", 1, 1, &n);
    onnx_tensor_external(&ta, "big.bin", 0, n * 4);
    onnx_tensor_head(&tb, "B", 1, 1, &n);
    onnx_tensor_external(&tb, "big.bin", n * 4, n * 4);
    const char *in[2] = {"A", "B"}, *o[1] = {"Y"};
    onnx_node(&g, "Add", "add", 2, in, 1, o, NULL);
    pb_msg(&g, G_INIT, &ta);
    pb_msg(&g, G_INIT, &tb);
    onnx_vi(&g, G_OUTPUT, "Y", 1, 1, &n);
    onnx_model(&model, &g, 13);
    char *path = tu_path(dir, "big.onnx");
    cr_assert(tu_write(path, model.data, model.len));
    pb_free(&model);
    return path;
}

static void skip_unless_big(void) {
    const char *big = getenv("AMPC_BIG_TESTS");
    if (!big || strcmp(big, "1") != 0) cr_skip_test("set AMPC_BIG_TESTS=1 to run (writes ~2.2 GB)");
}

Test(extdata, auto_goes_external_over_2gb) {
    tu_watchdog(600);
    skip_unless_big();
    char *dir = tu_mkdtemp(), *out_dir = tu_mkdtemp();
    char *path = big_model(dir), *out = tu_path(out_dir, "out.onnx");
    AmpModel *m = load_ok(path);
    save_ok(m, out, AMP_SAVE_EXTERNAL_AUTO, 1024);
    amp_model_free(m);
    cr_assert_eq(tu_count_entries(out_dir), 2, "AUTO must write external data over 2 GB");
    m = load_ok(out);
    cr_assert(initializer(m, "A")->is_external && initializer(m, "B")->is_external);
    amp_model_free(m);
    tu_rmtree(dir), tu_rmtree(out_dir);
    free(dir), free(out_dir), free(path), free(out);
}

/* amp_model_save_visit (the data-parallel open check hashes a model through it): the bytes
 * amp_model_save_bytes makes, in pieces; and past 2 GB, where save_bytes refuses. */
typedef struct Gathered {
    uint8_t *d;
    size_t len, pieces;
} Gathered;

static bool gather(void *ctx, const void *d, size_t len) {
    Gathered *g = ctx;
    if (g->d) memcpy(g->d + g->len, d, len);
    g->len += len;
    g->pieces++;
    return true;
}

Test(extdata, visit_hands_on_the_saved_bytes) {
    AmpModel *m = build_model();
    AmpStatus st = {0};
    uint8_t *bytes = NULL;
    size_t len = 0;
    cr_assert_eq(amp_model_save_bytes(m, &bytes, &len, &st), AMP_OK, "%s", st.msg);
    Gathered g = {.d = malloc(len + 1)};
    cr_assert_eq(amp_model_save_visit(m, gather, &g, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(g.len, len);
    cr_assert(memcmp(g.d, bytes, len) == 0, "the visited bytes differ from save_bytes'");
    free(g.d), free(bytes);
    amp_model_free(m);
}

Test(extdata, visit_goes_past_2gb) {
    tu_watchdog(600);
    skip_unless_big();
    char *dir = tu_mkdtemp(), *path = big_model(dir);
    AmpModel *m = load_ok(path);
    AmpStatus st = {0};
    uint8_t *bytes = NULL;
    size_t len = 0;
    cr_assert_eq(amp_model_save_bytes(m, &bytes, &len, &st), AMP_ERR_UNSUPPORTED);
    cr_assert(tu_contains(st.msg, "2 GB"), "%s", st.msg);
    Gathered g = {0};
    cr_assert_eq(amp_model_save_visit(m, gather, &g, &st), AMP_OK, "%s", st.msg);
    cr_assert_gt(g.len, (size_t)2 * ((size_t)1100 << 20), "%zu bytes visited", g.len);
    cr_assert_gt(g.pieces, 2, "the tensors handed on from where they lie, not gathered");
    amp_model_free(m);
    tu_rmtree(dir);
    free(dir), free(path);
}

/* AmpSaveOptions.commit: asked once, after everything is written; a refusal leaves the
 * folder as it was (no model, no data file, no temporaries) with the hook's error, and
 * an existing file at the path untouched. */
static int commit_calls;

static bool refuse(void *ctx, AmpStatus *st) {
    commit_calls++;
    amp_fail(st, AMP_ERR_INTERNAL, "%s", (const char *)ctx);
    return false;
}

static bool accept(void *ctx, AmpStatus *st) {
    (void)ctx, (void)st;
    commit_calls++;
    return true;
}

Test(extdata, commit_hook_refusal_writes_nothing) {
    char *dir = tu_mkdtemp();
    char *path = tu_path(dir, "model.onnx");
    AmpModel *m = build_model();
    AmpStatus st = {0};
    AmpExternalMode modes[] = {AMP_SAVE_EXTERNAL_ALWAYS, AMP_SAVE_EXTERNAL_NEVER};
    for (size_t k = 0; k < 2; k++) {
        commit_calls = 0;
        AmpSaveOptions so = {.external = modes[k], .external_min_bytes = 0, .commit = refuse,
                             .commit_ctx = "verification failed"};
        cr_assert_eq(amp_model_save_file(m, path, &so, &st), AMP_ERR_INTERNAL);
        cr_assert_str_eq(st.msg, "verification failed");
        cr_assert_eq(commit_calls, 1);
        cr_assert_eq(tu_count_entries(dir), 0, "a refused save left files behind");
    }
    /* An existing file is kept as it was. */
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    fputs("old", f);
    fclose(f);
    AmpSaveOptions so = {.external = AMP_SAVE_EXTERNAL_ALWAYS, .commit = refuse, .commit_ctx = "no"};
    cr_assert_eq(amp_model_save_file(m, path, &so, &st), AMP_ERR_INTERNAL);
    cr_assert_eq(tu_count_entries(dir), 1);
    struct stat sb;
    cr_assert_eq(stat(path, &sb), 0);
    cr_assert_eq(sb.st_size, 3, "the old file was replaced");

    /* Accepted: the model and its data file land. */
    commit_calls = 0;
    so = (AmpSaveOptions){.external = AMP_SAVE_EXTERNAL_ALWAYS, .commit = accept};
    cr_assert_eq(amp_model_save_file(m, path, &so, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(commit_calls, 1);
    cr_assert_eq(tu_count_entries(dir), 2);
    amp_model_free(m);
    m = load_ok(path);
    check_w(m);
    amp_model_free(m);
    tu_rmtree(dir);
    free(dir);
    free(path);
}
