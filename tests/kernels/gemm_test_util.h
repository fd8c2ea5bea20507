/* Helpers for the gemm and conv kernel tests: a model to hang nodes on, attribute
 * setters, a test allocator that runs one kernel directly, and random buffers. Static
 * functions: each test file includes this once. */
#ifndef AMP_GEMM_TEST_UTIL_H
#define AMP_GEMM_TEST_UTIL_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "kernels.h"

/* ---- a node, a test allocator, and a way to run one kernel ----------------------- */

typedef struct Outs {
    AmpBuf b[4];
} Outs;

static inline AmpBuf *test_alloc(void *ctx, int index, int dtype, int rank, const int64_t *dims, AmpStatus *st) {
    Outs *o = ctx;
    AmpBuf *b = &o->b[index];
    memset(b, 0, sizeof *b);
    b->dtype = dtype;
    b->rank = rank;
    for (int i = 0; i < rank; i++) b->dims[i] = dims[i];
    b->nelem = amp_shape_nelem(rank, dims);
    size_t bytes = 0;
    amp_tensor_expected_bytes(dtype, b->nelem, &bytes);
    b->data = malloc(bytes ? bytes : 1);
    return b;
}

static inline void outs_free(Outs *o) {
    for (int i = 0; i < 4; i++) free(o->b[i].data), o->b[i].data = NULL;
}

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

static inline void attr_int(AmpNode *n, const char *name, int64_t v) {
    amp_node_add_attr(n, name, AMP_ATTR_INT)->i = v;
}

static inline void attr_float(AmpNode *n, const char *name, float v) {
    amp_node_add_attr(n, name, AMP_ATTR_FLOAT)->f = v;
}

static inline void attr_ints(AmpNode *n, const char *name, int cnt, const int64_t *v) {
    AmpAttr *a = amp_node_add_attr(n, name, AMP_ATTR_INTS);
    a->ints = amp_arena_calloc(&model->arena, (size_t)(cnt ? cnt : 1), sizeof *a->ints);
    for (int i = 0; i < cnt; i++) a->ints[i] = v[i];
    a->n_ints = (size_t)cnt;
}

static inline void attr_str(AmpNode *n, const char *name, const char *s) {
    AmpAttr *a = amp_node_add_attr(n, name, AMP_ATTR_STRING);
    a->s.data = (const uint8_t *)amp_arena_strdup(&model->arena, s);
    a->s.len = strlen(s);
}

static inline AmpCode run(AmpNode *n, int n_in, const AmpBuf *const *in, int n_out, Outs *o, AmpStatus *st) {
    memset(o, 0, sizeof *o);
    memset(st, 0, sizeof *st);
    AmpKernelFn fn = amp_cpu_kernel(n->op);
    cr_assert_not_null(fn, "no kernel for %s", n->op_type);
    AmpKernelCtx k = {.node = n, .opset = 18, .n_in = n_in, .in = in, .n_out = n_out,
                      .alloc = test_alloc, .alloc_ctx = o, .st = st};
    return fn(&k);
}

/* ---- buffers --------------------------------------------------------------------- */

static uint64_t rng = 0x2545f4914f6cdd1dull;

static inline float frand(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng >> 40) & 0xffff) / 32768.0f - 1.0f;
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

static inline void expect_shape(const AmpBuf *b, int rank, const int64_t *dims) {
    cr_assert_eq(b->rank, rank, "rank %d, expected %d", b->rank, rank);
    for (int i = 0; i < rank; i++) cr_assert_eq(b->dims[i], dims[i], "dim %d is %lld, expected %lld", i,
                                                (long long)b->dims[i], (long long)dims[i]);
}

static inline void expect_close(const float *got, const double *want, uint64_t n, double tol) {
    for (uint64_t i = 0; i < n; i++)
        cr_assert(fabs(got[i] - want[i]) <= tol * (1.0 + fabs(want[i])), "element %llu is %.7g, expected %.7g",
                  (unsigned long long)i, got[i], want[i]);
}

#define I64(...) ((const int64_t[]){__VA_ARGS__})

#endif
