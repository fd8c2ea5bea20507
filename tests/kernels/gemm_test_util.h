/* Helpers for the gemm, conv and attention kernel tests, on top of kernel_test_util.h: a
 * model to hang nodes on (the suite's .init and .fini), one kernel run at opset 18, and
 * random buffers. Static functions: each test file includes this once. */
#ifndef AMP_GEMM_TEST_UTIL_H
#define AMP_GEMM_TEST_UTIL_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/half.h"
#include "tests/kernels/kernel_test_util.h"
#include "kernels/cpu/kernels.h"

/* ---- a model to hang nodes on, and a way to run one kernel ---------------------- */

static AmpModel *model;

static inline void setup(void) {
    model = amp_model_new();
    cr_assert_not_null(model);
}

static inline void teardown(void) {
    amp_model_free(model);
}

static inline AmpNode *mknode(const char *domain, const char *op) {
    AmpNode *n = amp_node_new(model->graph, domain, op, "n", 3, 2);
    cr_assert_not_null(n);
    cr_assert_neq(n->op, AMP_OP_UNKNOWN);
    return n;
}

static inline AmpCode run(AmpNode *n, int n_in, const AmpBuf *const *in, int n_out, Outs *o, AmpStatus *st) {
    return kt_run(n, 18, n_in, in, n_out, o, st);
}

/* ---- buffers --------------------------------------------------------------------- */

static uint64_t rng = 0x2545f4914f6cdd1dull;

static inline float frand(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng >> 40) & 0xffff) / 32768.0f - 1.0f;
}

/* A random integer in [lo, hi]. */
static inline int64_t irand(int64_t lo, int64_t hi) {
    return lo + (int64_t)((frand() + 1.0f) * 0.5f * (float)(hi - lo + 1)) % (hi - lo + 1);
}

/* A float32 buffer of random values in [-1, 1) (malloc'd data). */
static inline AmpBuf fbuf(int rank, const int64_t *dims) {
    AmpBuf b = {.dtype = AMP_DT_FLOAT, .rank = rank};
    for (int i = 0; i < rank; i++) b.dims[i] = dims[i];
    b.nelem = amp_shape_nelem(rank, dims);
    float *f = malloc((b.nelem ? b.nelem : 1) * sizeof *f);
    for (uint64_t i = 0; i < b.nelem; i++) f[i] = frand();
    b.data = f;
    return b;
}

/* The same values stored as float16 or bfloat16, and back as (rounded) float32. */
static inline AmpBuf to16(const AmpBuf *f, int dtype) {
    AmpBuf b = *f;
    b.dtype = dtype;
    b.data = malloc((f->nelem ? f->nelem : 1) * 2);
    if (dtype == AMP_DT_FLOAT16) amp_f32_to_f16_n(b.data, f->data, f->nelem);
    else amp_f32_to_bf16_n(b.data, f->data, f->nelem);
    return b;
}

static inline AmpBuf from16(const AmpBuf *h) {
    AmpBuf b = *h;
    b.dtype = AMP_DT_FLOAT;
    b.data = malloc((h->nelem ? h->nelem : 1) * sizeof(float));
    if (h->dtype == AMP_DT_FLOAT16) amp_f16_to_f32_n(b.data, h->data, h->nelem);
    else amp_bf16_to_f32_n(b.data, h->data, h->nelem);
    return b;
}

static inline void expect_close(const float *got, const double *want, uint64_t n, double tol) {
    for (uint64_t i = 0; i < n; i++)
        cr_assert(fabs(got[i] - want[i]) <= tol * (1.0 + fabs(want[i])), "element %llu is %.7g, expected %.7g",
                  (unsigned long long)i, got[i], want[i]);
}

#endif
