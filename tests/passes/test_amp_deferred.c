/* Weights the amp pass stores in 16 bits without making them (AmpTensor.narrow_from): the
 * saver converts them straight into the output and any other reader gets them made on
 * demand. A model saved with its weights deferred is byte for byte the one saved after
 * they are made, for float16 and bfloat16, inline and with external data; and a load that
 * leaves raw_data in the file's mapping (AmpLoadOptions.borrow_raw, what `ampc` does)
 * converts to the bytes a copying load gives, from inline and from external data. */
#include <math.h>

#include "tests/ir/irtest_util.h"
#include "tests/passes/amp_test_util.h"
#include "ir/half.h"

enum { K = 64 }; /* W is K x K: 8 KiB in 16 bits, deferred; V is K x 2: made at once */

/* Magnitudes from 2^-30 to 2^14, both signs: float16 subnormals, ties and normals. */
static float value(size_t i) {
    uint32_t h = (uint32_t)i * 2654435761u;
    float f = ldexpf((float)(h & 0xffffffu) / 16777216.0f, (int)((h >> 24) % 45) - 30);
    return (h >> 23) & 1 ? -f : f;
}

/* x[1,K] -> MatMul(W[K,K]) -> MatMul(V[K,2]) -> y */
static AmpModel *build(void) {
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "1,64");
    float *w = malloc(K * K * sizeof *w);
    cr_assert_not_null(w);
    for (size_t i = 0; i < K * K; i++) w[i] = value(i);
    static const int64_t dw[2] = {K, K}, dv[2] = {K, 2};
    rt_init(g, "W", AMP_DT_FLOAT, 2, dw, w);
    rt_init(g, "V", AMP_DT_FLOAT, 2, dv, w + 7);
    free(w);
    nd(g, "MatMul", "mm0", "x,W", "h");
    nd(g, "MatMul", "mm1", "h,V", "y");
    rt_output(g, "y", AMP_DT_FLOAT, NULL);
    return m;
}

static AmpTensor *init_of(AmpModel *m, const char *name) {
    AmpValue *v = val_of(m->graph, name);
    cr_assert(v && v->initializer, "no initializer %s", name);
    return v->initializer;
}

static void convert_to(AmpModel *m, int dt) {
    AmpPassOptions po = {.precision = dt};
    convert(m, &po);
}

/* The model saved with external data (every tensor of 1 KiB or more) as DIR/SUB/model.onnx;
 * the model's and the data's bytes, concatenated (malloc'd). */
static uint8_t *saved_external(AmpModel *m, const char *dir, const char *sub, size_t *len) {
    char *d = tu_path(dir, sub);
    cr_assert_eq(mkdir(d, 0700), 0);
    char *path = tu_path(d, "model.onnx"), *data = tu_path(d, "model.onnx.data");
    AmpSaveOptions so = {.external = AMP_SAVE_EXTERNAL_ALWAYS, .external_min_bytes = 1024};
    AmpStatus st;
    amp_status_clear(&st);
    cr_assert_eq(amp_model_save_file(m, path, &so, &st), AMP_OK, "%s", st.msg);
    size_t a = 0, b = 0;
    uint8_t *pa = tu_read(path, &a), *pb = tu_read(data, &b);
    cr_assert(pa && pb, "%s: model or data missing", d);
    uint8_t *out = malloc(a + b);
    memcpy(out, pa, a);
    memcpy(out + a, pb, b);
    *len = a + b;
    free(pa);
    free(pb);
    free(path);
    free(data);
    free(d);
    return out;
}

static void same_bytes(const uint8_t *a, size_t na, const uint8_t *b, size_t nb, const char *what) {
    cr_assert_eq(na, nb, "%s: %zu bytes, then %zu", what, na, nb);
    cr_assert(memcmp(a, b, na) == 0, "%s: the bytes differ", what);
}

static void deferred_saves_as_made(int dt) {
    char *dir = tu_mkdtemp();
    cr_assert_not_null(dir);
    AmpModel *m = build();
    convert_to(m, dt);
    AmpTensor *w = init_of(m, "W"), *v = init_of(m, "V");
    cr_assert_eq(w->dtype, dt);
    cr_assert_eq(v->dtype, dt);
    cr_assert_not_null(w->narrow_from, "W is deferred");
    cr_assert_null(w->raw.data);
    cr_assert_eq(w->raw.len, K * K * 2);
    cr_assert_null(v->narrow_from, "V (256 bytes) is made at once");

    size_t n1, x1;
    uint8_t *b1 = saved(m, &n1), *e1 = saved_external(m, dir, "deferred", &x1);
    cr_assert_not_null(w->narrow_from, "saving does not make W");

    /* Made on demand: the float32 values rounded as the scalar conversions round them. */
    AmpBytes b;
    AmpStatus st;
    amp_status_clear(&st);
    cr_assert_eq(amp_tensor_bytes(m, w, &b, &st), AMP_OK, "%s", st.msg);
    cr_assert_null(w->narrow_from);
    cr_assert(b.data && b.len == K * K * 2 && b.data == w->raw.data);
    for (size_t i = 0; i < K * K; i++) {
        uint16_t h, want = dt == AMP_DT_FLOAT16 ? amp_f32_to_f16(value(i)) : amp_f32_to_bf16(value(i));
        memcpy(&h, b.data + 2 * i, 2);
        cr_assert_eq(h, want, "W[%zu] = %g: %04x, want %04x", i, (double)value(i), h, want);
    }
    size_t n2, x2;
    uint8_t *b2 = saved(m, &n2), *e2 = saved_external(m, dir, "made", &x2);
    same_bytes(b1, n1, b2, n2, "inline");
    same_bytes(e1, x1, e2, x2, "external data");
    free(b1);
    free(b2);
    free(e1);
    free(e2);
    amp_model_free(m);
    tu_rmtree(dir);
    free(dir);
}

Test(amp_deferred, float16_saved_as_made) {
    deferred_saves_as_made(AMP_DT_FLOAT16);
}

Test(amp_deferred, bfloat16_saved_as_made) {
    deferred_saves_as_made(AMP_DT_BFLOAT16);
}

/* `path` loaded (borrowing its raw data or not), converted to dt, saved as bytes. */
static uint8_t *converted(const char *path, bool borrow, int dt, size_t *len) {
    AmpModel *m = NULL;
    AmpStatus st;
    amp_status_clear(&st);
    AmpLoadOptions lo = {.borrow_raw = borrow};
    cr_assert_eq(amp_model_load_file(path, &lo, &m, &st), AMP_OK, "%s", st.msg);
    convert_to(m, dt);
    cr_assert_not_null(init_of(m, "W")->narrow_from);
    uint8_t *b = saved(m, len);
    amp_model_free(m);
    return b;
}

/* The float32 model written inline and with external data, each converted after a load
 * that borrows raw_data and one that copies it: the same bytes. */
static void borrowed_converts_as_copied(int dt) {
    char *dir = tu_mkdtemp();
    cr_assert_not_null(dir);
    AmpModel *m = build();
    char *inl = tu_path(dir, "inline.onnx"), *ext = tu_path(dir, "ext.onnx");
    AmpStatus st;
    amp_status_clear(&st);
    AmpSaveOptions never = {.external = AMP_SAVE_EXTERNAL_NEVER};
    AmpSaveOptions always = {.external = AMP_SAVE_EXTERNAL_ALWAYS, .external_min_bytes = 1024};
    cr_assert_eq(amp_model_save_file(m, inl, &never, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(amp_model_save_file(m, ext, &always, &st), AMP_OK, "%s", st.msg);
    amp_model_free(m);
    const char *paths[2] = {inl, ext};
    for (int k = 0; k < 2; k++) {
        size_t na, nb;
        uint8_t *a = converted(paths[k], true, dt, &na), *b = converted(paths[k], false, dt, &nb);
        same_bytes(a, na, b, nb, paths[k]);
        free(a);
        free(b);
    }
    free(inl);
    free(ext);
    tu_rmtree(dir);
    free(dir);
}

Test(amp_deferred, float16_from_a_borrowing_load) {
    borrowed_converts_as_copied(AMP_DT_FLOAT16);
}

Test(amp_deferred, bfloat16_from_a_borrowing_load) {
    borrowed_converts_as_copied(AMP_DT_BFLOAT16);
}
