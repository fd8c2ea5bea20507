/* ir/ort_checkpoint.c: onnxruntime-training checkpoints as onnxruntime wrote them
 * (models/ort_mlp: fresh from the artifact generator, and after one AdamW step with the
 * optimizer's state), checked against the values onnxruntime's own reader gives; and
 * damaged files (every truncation, many single-byte corruptions) fail with a message,
 * never a crash or an out-of-bounds read (run under ASan by scripts/test.sh). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "ir/ort_checkpoint.h"

#define MLP AMPC_TEST_DIR "/../models/ort_mlp/"

static AmpStatus st;

static float f32_at(const AmpTensor *t, size_t i) {
    float v;
    memcpy(&v, t->raw.data + 4 * i, 4);
    return v;
}

static double sum(const AmpTensor *t) {
    double s = 0;
    for (uint64_t i = 0; i < t->nelem; i++) s += f32_at(t, i);
    return s;
}

/* name, dims, the first two values and the sum, as onnxruntime's load_checkpoint reads them */
typedef struct Want {
    const char *name;
    int ndims;
    int64_t d0, d1;
    float first[2];
    double sum;
} Want;

static void check(const AmpOrtCheckpoint *ck, const Want *w) {
    const AmpOrtParam *p = amp_ort_checkpoint_find(ck, w->name);
    cr_assert_not_null(p, "parameter %s", w->name);
    const AmpTensor *t = p->value;
    cr_assert(p->requires_grad);
    cr_assert_eq(t->dtype, AMP_DT_FLOAT);
    cr_assert_eq((int)t->ndims, w->ndims, "%s rank", w->name);
    cr_assert_eq(t->dims[0], w->d0);
    if (w->ndims == 2) cr_assert_eq(t->dims[1], w->d1);
    cr_assert_eq(f32_at(t, 0), w->first[0], "%s[0]", w->name);
    cr_assert_eq(f32_at(t, 1), w->first[1], "%s[1]", w->name);
    cr_assert_float_eq(sum(t), w->sum, 1e-5, "%s sum %g", w->name, sum(t));
}

Test(ort_checkpoint, reads_the_parameters_onnxruntime_wrote) {
    AmpModel *m = amp_model_new();
    AmpOrtCheckpoint ck;
    cr_assert_eq(amp_ort_checkpoint_read(m, MLP "checkpoint", &ck, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(ck.n_params, 4);
    cr_assert(!ck.has_optimizer, "a fresh checkpoint has no optimizer state");
    static const Want w[] = {
        {"0.bias", 1, 32, 0, {-0.06936365365982056f, -0.09319892525672913f}, -0.9135745763778687},
        {"0.weight", 2, 32, 16, {-0.0018717050552368164f, 0.13411089777946472f}, -0.7296457290649414},
        {"2.bias", 1, 4, 0, {-0.031050194054841995f, 0.05729067325592041f}, 0.23132695257663727},
        {"2.weight", 2, 4, 32, {0.024286551401019096f, 0.14535608887672424f}, 0.12699687480926514},
    };
    for (size_t i = 0; i < 4; i++) check(&ck, &w[i]);
    for (size_t i = 0; i < 4; i++) cr_assert_null(ck.params[i].moment[0]);
    amp_model_free(m);
}

Test(ort_checkpoint, reads_the_optimizer_state) {
    AmpModel *m = amp_model_new();
    AmpOrtCheckpoint ck;
    cr_assert_eq(amp_ort_checkpoint_read(m, MLP "checkpoint_step1", &ck, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(ck.n_params, 4);
    cr_assert(ck.has_optimizer);
    cr_assert_eq(ck.step, 1, "one step taken");
    static const Want w = {"2.weight", 2, 4, 32, {0.014325033873319626f, 0.13536885380744934f}, 0.04563170671463013};
    check(&ck, &w);
    for (size_t i = 0; i < 4; i++) {
        const AmpOrtParam *p = &ck.params[i];
        for (int k = 0; k < 2; k++) {
            cr_assert_not_null(p->moment[k], "%s momentum%d", p->value->name, k);
            cr_assert_eq(p->moment[k]->nelem, p->value->nelem);
        }
        /* After one step from zero: m = (1 - 0.9) g and v = (1 - 0.999) g² */
        for (uint64_t e = 0; e < p->value->nelem; e++) {
            float m1 = f32_at(p->moment[0], e), m2 = f32_at(p->moment[1], e);
            double g = m1 / 0.1;
            cr_assert(m2 >= 0 && fabs(m2 - 0.001 * g * g) <= 1e-4 * fabs(m2) + 1e-12, "%s[%zu]: m %g v %g",
                      p->value->name, (size_t)e, m1, m2);
        }
    }
    amp_model_free(m);
}

static uint8_t *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s", path);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(*len);
    cr_assert_eq(fread(b, 1, *len, f), *len);
    fclose(f);
    return b;
}

/* Each prefix is parsed from its own malloc'd copy, so ASan sees a read past its end. */
Test(ort_checkpoint, every_truncation_fails_cleanly) {
    size_t len;
    uint8_t *full = slurp(MLP "checkpoint_step1", &len);
    for (size_t n = 0; n < len; n += (n < 256 ? 1 : 7)) {
        uint8_t *b = malloc(n ? n : 1);
        memcpy(b, full, n);
        AmpModel *m = amp_model_new();
        AmpOrtCheckpoint ck;
        AmpStatus s = {0};
        AmpCode rc = amp_ort_checkpoint_parse(m, b, n, &ck, &s);
        cr_assert_neq(rc, AMP_OK, "a checkpoint cut at %zu of %zu bytes was accepted", n, len);
        cr_assert(s.msg[0], "no message at %zu", n);
        amp_model_free(m);
        free(b);
    }
    free(full);
}

Test(ort_checkpoint, corrupted_bytes_never_crash) {
    size_t len;
    uint8_t *full = slurp(MLP "checkpoint_step1", &len);
    uint8_t *b = malloc(len);
    uint32_t x = 12345;
    size_t refused = 0;
    for (int k = 0; k < 3000; k++) {
        memcpy(b, full, len);
        /* Corrupt one byte among the first 512 (offsets, vtables, names) or anywhere. */
        x = x * 1103515245u + 12345u;
        size_t at = (x >> 8) % (k % 2 ? len : 512);
        b[at] ^= (uint8_t)(1u << (x % 8));
        AmpModel *m = amp_model_new();
        AmpOrtCheckpoint ck;
        AmpStatus s = {0};
        if (amp_ort_checkpoint_parse(m, b, len, &ck, &s) != AMP_OK) {
            cr_assert(s.msg[0]);
            refused++;
        } else
            for (size_t i = 0; i < ck.n_params; i++) cr_assert_not_null(ck.params[i].value->name);
        amp_model_free(m);
    }
    cr_assert_gt(refused, 100, "corruptions of offsets are noticed (%zu refused)", refused);
    free(b);
    free(full);
}

Test(ort_checkpoint, other_files_are_refused_by_name) {
    AmpModel *m = amp_model_new();
    AmpOrtCheckpoint ck;
    cr_assert_eq(amp_ort_checkpoint_read(m, MLP "training_model.onnx", &ck, &st), AMP_ERR_INPUT);
    cr_assert(strstr(st.msg, "training_model.onnx") && strstr(st.msg, "not an onnxruntime-training checkpoint"), "%s",
              st.msg);
    amp_status_clear(&st);
    cr_assert_eq(amp_ort_checkpoint_read(m, MLP "no_such_file", &ck, &st), AMP_ERR_INTERNAL);
    cr_assert(strstr(st.msg, "no_such_file"), "%s", st.msg);
    amp_model_free(m);
}
