/* The elementwise CPU kernels on what the conformance data covers thinly: 16-bit
 * storage (fp32 compute, one rounding on store), broadcasting edge cases against a
 * naive reference, integer arithmetic, numerically hard inputs, Dropout's random
 * streams, and the error paths (bad shapes or attributes -> INPUT, dtypes -> UNSUPPORTED). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/half.h"
#include "ir/ir.h"
#include "tests/kernels/kernel_test_util.h"
#include "kernels/cpu/kernels.h"

/* ---- harness: one node, called through the registry with a test allocator ---------- */

#define MAX_OUT 4

typedef struct Harness {
    AmpModel *m;
    AmpNode *node;
    AmpBuf out[MAX_OUT];
    AmpStatus st;
    int64_t opset;
    bool training;
    uint64_t rng;
} Harness;

static AmpBuf *harness_alloc(void *ctx, int index, int dtype, int rank, const int64_t *dims, AmpStatus *st) {
    Harness *h = ctx;
    return kt_alloc_slot(h->out, MAX_OUT, index, dtype, rank, dims);
}

static Harness *harness(const char *domain, const char *op, int64_t opset) {
    Harness *h = calloc(1, sizeof *h);
    h->m = amp_model_new();
    h->node = amp_node_new(h->m->graph, domain, op, "n0", 0, 0);
    h->opset = opset;
    h->rng = 12345;
    return h;
}

static void harness_free(Harness *h) {
    for (int i = 0; i < MAX_OUT; i++) free(h->out[i].data);
    amp_model_free(h->m);
    free(h);
}

static AmpCode run(Harness *h, int n_in, const AmpBuf *const *in, int n_out) {
    return kt_call(h->node, h->opset, n_in, in, n_out, harness_alloc, h, &h->rng, h->training, &h->st);
}

/* Runs the node on two inputs, one output. */
static AmpCode run2(Harness *h, const AmpBuf *a, const AmpBuf *b) {
    const AmpBuf *in[2] = {a, b};
    return run(h, 2, in, 1);
}

/* ---- 16-bit storage ------------------------------------------------------------------ */

Test(elementwise, f16_add_rounds_once_to_nearest_even) {
    Harness *h = harness("", "Add", 14);
    int64_t d[1] = {3};
    /* 1 + 2^-11 is the midpoint of 1 and 1 + 2^-10: ties to even gives 1; a little more
     * rounds up; 2048 + 1 (spacing 2) ties to 2048. */
    uint16_t a[3] = {amp_f32_to_f16(1.0f), amp_f32_to_f16(1.0f), amp_f32_to_f16(2048.0f)};
    uint16_t b[3] = {amp_f32_to_f16(0x1p-11f), amp_f32_to_f16(0x1p-11f + 0x1p-14f), amp_f32_to_f16(1.0f)};
    AmpBuf A = mkbuf(AMP_DT_FLOAT16, 1, d, a), B = mkbuf(AMP_DT_FLOAT16, 1, d, b);
    cr_assert_eq(run2(h, &A, &B), AMP_OK, "%s", h->st.msg);
    const uint16_t *o = h->out[0].data;
    cr_assert_eq(h->out[0].dtype, AMP_DT_FLOAT16);
    cr_assert_eq(o[0], 0x3c00);
    cr_assert_eq(o[1], 0x3c01);
    cr_assert_eq(amp_f16_to_f32(o[2]), 2048.0f);
    harness_free(h);
}

Test(elementwise, bf16_add_and_sigmoid) {
    Harness *h = harness("", "Add", 14);
    int64_t d[1] = {2};
    /* bfloat16 spacing at 256 is 2: 257 ties to 256, 259 ties to 260 */
    uint16_t a[2] = {amp_f32_to_bf16(256.0f), amp_f32_to_bf16(256.0f)};
    uint16_t b[2] = {amp_f32_to_bf16(1.0f), amp_f32_to_bf16(3.0f)};
    AmpBuf A = mkbuf(AMP_DT_BFLOAT16, 1, d, a), B = mkbuf(AMP_DT_BFLOAT16, 1, d, b);
    cr_assert_eq(run2(h, &A, &B), AMP_OK, "%s", h->st.msg);
    const uint16_t *o = h->out[0].data;
    cr_assert_eq(amp_bf16_to_f32(o[0]), 256.0f);
    cr_assert_eq(amp_bf16_to_f32(o[1]), 260.0f);
    harness_free(h);

    h = harness("", "Sigmoid", 13);
    uint16_t x[2] = {amp_f32_to_bf16(0.0f), amp_f32_to_bf16(2.0f)};
    AmpBuf X = mkbuf(AMP_DT_BFLOAT16, 1, d, x);
    const AmpBuf *in[1] = {&X};
    cr_assert_eq(run(h, 1, in, 1), AMP_OK, "%s", h->st.msg);
    o = h->out[0].data;
    cr_assert_eq(o[0], amp_f32_to_bf16(0.5f));
    cr_assert_eq(o[1], amp_f32_to_bf16(1.0f / (1.0f + expf(-2.0f))));
    harness_free(h);
}

Test(elementwise, f16_mean_accumulates_in_fp32) {
    /* In fp16, 2048 + 1 + 1 stays 2048 (ties to even twice); in fp32 it is 2050, and
     * 2050 / 3 = 683.33 rounds to 683.5 in fp16. */
    Harness *h = harness("", "Mean", 13);
    int64_t d[1] = {1};
    uint16_t a = amp_f32_to_f16(2048.0f), b = amp_f32_to_f16(1.0f), c = amp_f32_to_f16(1.0f);
    AmpBuf A = mkbuf(AMP_DT_FLOAT16, 1, d, &a), B = mkbuf(AMP_DT_FLOAT16, 1, d, &b), C = mkbuf(AMP_DT_FLOAT16, 1, d, &c);
    const AmpBuf *in[3] = {&A, &B, &C};
    cr_assert_eq(run(h, 3, in, 1), AMP_OK, "%s", h->st.msg);
    cr_assert_eq(amp_f16_to_f32(((uint16_t *)h->out[0].data)[0]), 683.5f);
    harness_free(h);
}

/* ---- broadcasting -------------------------------------------------------------------- */

/* Element of a (dims da, rank ra) read at output index idx (rank r). */
static float bread(const float *a, int ra, const int64_t *da, int r, const int64_t *dout, uint64_t flat) {
    int64_t idx[AMP_MAX_RANK];
    for (int i = r - 1; i >= 0; i--) {
        idx[i] = (int64_t)(flat % (uint64_t)dout[i]);
        flat /= (uint64_t)dout[i];
    }
    int64_t off = 0;
    for (int i = 0; i < ra; i++) {
        int64_t j = idx[i + r - ra];
        off = off * da[i] + (da[i] == 1 ? 0 : j);
    }
    return a[off];
}

static void check_sub_bcast(int ra, const int64_t *da, int rb, const int64_t *db, int r, const int64_t *dout) {
    uint64_t na = amp_shape_nelem(ra, da), nb = amp_shape_nelem(rb, db), no = amp_shape_nelem(r, dout);
    float *a = malloc((na + 1) * sizeof *a), *b = malloc((nb + 1) * sizeof *b);
    for (uint64_t i = 0; i < na; i++) a[i] = (float)i * 1.5f;
    for (uint64_t i = 0; i < nb; i++) b[i] = (float)i * 0.25f + 100.0f;
    Harness *h = harness("", "Sub", 14);
    AmpBuf A = mkbuf(AMP_DT_FLOAT, ra, da, a), B = mkbuf(AMP_DT_FLOAT, rb, db, b);
    cr_assert_eq(run2(h, &A, &B), AMP_OK, "%s", h->st.msg);
    cr_assert_eq(h->out[0].rank, r);
    for (int i = 0; i < r; i++) cr_assert_eq(h->out[0].dims[i], dout[i]);
    const float *o = h->out[0].data;
    for (uint64_t i = 0; i < no; i++) {
        float want = bread(a, ra, da, r, dout, i) - bread(b, rb, db, r, dout, i);
        cr_assert_eq(o[i], want, "element %llu: %g, expected %g", (unsigned long long)i, o[i], want);
    }
    free(a), free(b);
    harness_free(h);
}

Test(elementwise, broadcast_shapes) {
    int64_t a1[3] = {2, 1, 3}, b1[2] = {4, 1}, o1[3] = {2, 4, 3};
    check_sub_bcast(3, a1, 2, b1, 3, o1);
    check_sub_bcast(2, b1, 3, a1, 3, o1); /* the other way round */
    int64_t a2[4] = {2, 3, 4, 5}, b2[3] = {3, 1, 5}, o2[4] = {2, 3, 4, 5};
    check_sub_bcast(4, a2, 3, b2, 4, o2);
    int64_t a3[1] = {5}, o3[1] = {5};
    check_sub_bcast(0, NULL, 1, a3, 1, o3); /* scalar - vector */
    check_sub_bcast(0, NULL, 0, NULL, 0, NULL);
    int64_t a4[2] = {1, 1}, b4[3] = {1, 1, 1}, o4[3] = {1, 1, 1};
    check_sub_bcast(2, a4, 3, b4, 3, o4);
    int64_t a5[3] = {1, 4, 1}, b5[3] = {3, 1, 6}, o5[3] = {3, 4, 6};
    check_sub_bcast(3, a5, 3, b5, 3, o5);
}

Test(elementwise, broadcast_empty_and_mismatch) {
    Harness *h = harness("", "Mul", 14);
    int64_t da[2] = {0, 3}, db[1] = {3};
    float b[3] = {1, 2, 3};
    AmpBuf A = mkbuf(AMP_DT_FLOAT, 2, da, NULL), B = mkbuf(AMP_DT_FLOAT, 1, db, b);
    cr_assert_eq(run2(h, &A, &B), AMP_OK, "%s", h->st.msg);
    cr_assert_eq(h->out[0].nelem, 0);
    cr_assert_eq(h->out[0].dims[0], 0);
    cr_assert_eq(h->out[0].dims[1], 3);
    int64_t dc[1] = {4};
    float c[4] = {0};
    AmpBuf C = mkbuf(AMP_DT_FLOAT, 1, dc, c);
    cr_assert_eq(run2(h, &B, &C), AMP_ERR_INPUT);
    cr_assert(strstr(h->st.msg, "n0") && strstr(h->st.msg, "Mul"), "message names node and op: %s", h->st.msg);
    harness_free(h);
}

Test(elementwise, where_three_way_int64) {
    Harness *h = harness("", "Where", 16);
    int64_t dc[2] = {2, 1}, dx[1] = {3}, dy[2] = {1, 1};
    uint8_t cond[2] = {1, 0};
    int64_t x[3] = {10, 20, 30}, y[1] = {-1};
    AmpBuf C = mkbuf(AMP_DT_BOOL, 2, dc, cond), X = mkbuf(AMP_DT_INT64, 1, dx, x), Y = mkbuf(AMP_DT_INT64, 2, dy, y);
    const AmpBuf *in[3] = {&C, &X, &Y};
    cr_assert_eq(run(h, 3, in, 1), AMP_OK, "%s", h->st.msg);
    const int64_t *o = h->out[0].data;
    int64_t want[6] = {10, 20, 30, -1, -1, -1};
    cr_assert_eq(h->out[0].nelem, 6);
    for (int i = 0; i < 6; i++) cr_assert_eq(o[i], want[i]);
    AmpBuf Cbad = mkbuf(AMP_DT_INT64, 1, dx, x);
    in[0] = &Cbad;
    cr_assert_eq(run(h, 3, in, 1), AMP_ERR_INPUT);
    harness_free(h);
}

Test(elementwise, legacy_broadcast_axis) {
    /* opset 6 Add with broadcast=1, axis=1: B (3) lines up with A's axis 1 of (2, 3, 4) */
    Harness *h = harness("", "Add", 6);
    attr_int(h->node, "broadcast", 1);
    attr_int(h->node, "axis", 1);
    int64_t da[3] = {2, 3, 4}, db[1] = {3};
    float a[24] = {0}, b[3] = {1, 2, 3};
    AmpBuf A = mkbuf(AMP_DT_FLOAT, 3, da, a), B = mkbuf(AMP_DT_FLOAT, 1, db, b);
    cr_assert_eq(run2(h, &A, &B), AMP_OK, "%s", h->st.msg);
    const float *o = h->out[0].data;
    for (int i = 0; i < 24; i++) cr_assert_eq(o[i], b[(i / 4) % 3]);
    harness_free(h);
}

/* ---- integers ------------------------------------------------------------------------ */

Test(elementwise, int_div_truncates_and_rejects_zero) {
    Harness *h = harness("", "Div", 14);
    int64_t d[1] = {4};
    int32_t a[4] = {-7, 7, INT32_MIN, 9}, b[4] = {2, -2, -1, 3};
    AmpBuf A = mkbuf(AMP_DT_INT32, 1, d, a), B = mkbuf(AMP_DT_INT32, 1, d, b);
    cr_assert_eq(run2(h, &A, &B), AMP_OK, "%s", h->st.msg);
    const int32_t *o = h->out[0].data;
    cr_assert_eq(o[0], -3);
    cr_assert_eq(o[1], -3);
    cr_assert_eq(o[2], INT32_MIN, "wraps");
    cr_assert_eq(o[3], 3);
    b[1] = 0;
    cr_assert_eq(run2(h, &A, &B), AMP_ERR_INPUT);
    harness_free(h);
}

/* Mod: the divisor's sign by default (Python's %), the dividend's with fmod = 1 (C's
 * fmod), INT64_MIN mod -1 is 0, a zero divisor an input error; floats only with fmod. */
Test(elementwise, mod_signs_fmod_and_zero) {
    Harness *h = harness("", "Mod", 13);
    int64_t d[1] = {5};
    int64_t a[5] = {-7, 7, -7, INT64_MIN, 6}, b[5] = {3, -3, -3, -1, 3};
    AmpBuf A = mkbuf(AMP_DT_INT64, 1, d, a), B = mkbuf(AMP_DT_INT64, 1, d, b);
    cr_assert_eq(run2(h, &A, &B), AMP_OK, "%s", h->st.msg);
    const int64_t want[5] = {2, -2, -1, 0, 0}, want_fmod[5] = {-1, 1, -1, 0, 0};
    for (int i = 0; i < 5; i++) cr_assert_eq(((int64_t *)h->out[0].data)[i], want[i], "%d", i);
    b[4] = 0;
    cr_assert_eq(run2(h, &A, &B), AMP_ERR_INPUT);
    b[4] = 3;
    float x[2] = {-7.5f, 7.5f}, y[2] = {2, -2};
    int64_t d2[1] = {2};
    AmpBuf X = mkbuf(AMP_DT_FLOAT, 1, d2, x), Y = mkbuf(AMP_DT_FLOAT, 1, d2, y);
    cr_assert_eq(run2(h, &X, &Y), AMP_ERR_INPUT, "floats without fmod = 1");
    harness_free(h);

    h = harness("", "Mod", 13);
    amp_node_add_attr(h->node, "fmod", AMP_ATTR_INT)->i = 1;
    cr_assert_eq(run2(h, &A, &B), AMP_OK, "%s", h->st.msg);
    for (int i = 0; i < 5; i++) cr_assert_eq(((int64_t *)h->out[0].data)[i], want_fmod[i], "%d", i);
    cr_assert_eq(run2(h, &X, &Y), AMP_OK, "%s", h->st.msg);
    cr_assert_float_eq(((float *)h->out[0].data)[0], -1.5f, 0);
    cr_assert_float_eq(((float *)h->out[0].data)[1], 1.5f, 0);
    harness_free(h);
}

Test(elementwise, int64_wraps_and_uint64_compares_unsigned) {
    Harness *h = harness("", "Add", 14);
    int64_t d[1] = {1};
    int64_t a = INT64_MAX, b = 1;
    AmpBuf A = mkbuf(AMP_DT_INT64, 1, d, &a), B = mkbuf(AMP_DT_INT64, 1, d, &b);
    cr_assert_eq(run2(h, &A, &B), AMP_OK, "%s", h->st.msg);
    cr_assert_eq(((int64_t *)h->out[0].data)[0], INT64_MIN);
    harness_free(h);

    h = harness("", "Less", 13);
    uint64_t x[2] = {1, (UINT64_C(1) << 63) + 1}, y[2] = {(UINT64_C(1) << 63) + 1, 1};
    int64_t d2[1] = {2};
    AmpBuf X = mkbuf(AMP_DT_UINT64, 1, d2, x), Y = mkbuf(AMP_DT_UINT64, 1, d2, y);
    cr_assert_eq(run2(h, &X, &Y), AMP_OK, "%s", h->st.msg);
    const uint8_t *o = h->out[0].data;
    cr_assert_eq(h->out[0].dtype, AMP_DT_BOOL);
    cr_assert_eq(o[0], 1);
    cr_assert_eq(o[1], 0);
    harness_free(h);
}

Test(elementwise, int_pow_and_max) {
    Harness *h = harness("", "Pow", 15);
    int64_t d[1] = {4};
    int64_t a[4] = {3, 2, -1, 7}, b[4] = {4, -1, -3, 0};
    AmpBuf A = mkbuf(AMP_DT_INT64, 1, d, a), B = mkbuf(AMP_DT_INT64, 1, d, b);
    cr_assert_eq(run2(h, &A, &B), AMP_OK, "%s", h->st.msg);
    const int64_t *o = h->out[0].data;
    cr_assert_eq(o[0], 81);
    cr_assert_eq(o[1], 0);
    cr_assert_eq(o[2], -1);
    cr_assert_eq(o[3], 1);
    harness_free(h);

    h = harness("", "Max", 13);
    int8_t x[3] = {-5, 3, 0}, y[1] = {1};
    int64_t dx[1] = {3}, dy[1] = {1};
    AmpBuf X = mkbuf(AMP_DT_INT8, 1, dx, x), Y = mkbuf(AMP_DT_INT8, 1, dy, y);
    cr_assert_eq(run2(h, &X, &Y), AMP_OK, "%s", h->st.msg);
    const int8_t *m = h->out[0].data;
    cr_assert_eq(m[0], 1);
    cr_assert_eq(m[1], 3);
    cr_assert_eq(m[2], 1);
    harness_free(h);
}

/* ---- numerics ------------------------------------------------------------------------ */

Test(elementwise, activations_stay_finite_for_large_inputs) {
    const char *ops[] = {"Sigmoid", "Softplus", "Tanh", "Elu", "Selu", "Softsign", "Gelu"};
    int64_t d[1] = {4};
    float x[4] = {-1000.0f, -80.0f, 80.0f, 1000.0f};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        Harness *h = harness("", ops[i], 20);
        AmpBuf X = mkbuf(AMP_DT_FLOAT, 1, d, x);
        const AmpBuf *in[1] = {&X};
        cr_assert_eq(run(h, 1, in, 1), AMP_OK, "%s", h->st.msg);
        const float *o = h->out[0].data;
        for (int j = 0; j < 4; j++) cr_assert(isfinite(o[j]), "%s(%g) = %g", ops[i], x[j], o[j]);
        harness_free(h);
    }
    Harness *h = harness("", "Softplus", 1);
    AmpBuf X = mkbuf(AMP_DT_FLOAT, 1, d, x);
    const AmpBuf *in[1] = {&X};
    cr_assert_eq(run(h, 1, in, 1), AMP_OK);
    cr_assert_eq(((float *)h->out[0].data)[3], 1000.0f);
    cr_assert_eq(((float *)h->out[0].data)[0], 0.0f);
    harness_free(h);
}

Test(elementwise, gelu_modes_and_bad_attribute) {
    int64_t d[1] = {3};
    float x[3] = {-1.0f, 0.5f, 2.0f};
    AmpBuf X = mkbuf(AMP_DT_FLOAT, 1, d, x);
    const AmpBuf *in[1] = {&X};
    Harness *h = harness("", "Gelu", 20);
    cr_assert_eq(run(h, 1, in, 1), AMP_OK, "%s", h->st.msg);
    for (int i = 0; i < 3; i++) {
        double want = 0.5 * x[i] * (1 + erf(x[i] / sqrt(2.0)));
        cr_assert(fabs(((float *)h->out[0].data)[i] - want) < 1e-6, "gelu(%g)", x[i]);
    }
    harness_free(h);
    h = harness("", "Gelu", 20);
    attr_str(h->node, "approximate", "tanh");
    cr_assert_eq(run(h, 1, in, 1), AMP_OK, "%s", h->st.msg);
    for (int i = 0; i < 3; i++) {
        double want = 0.5 * x[i] * (1 + tanh(sqrt(2 / 3.14159265358979323846) * (x[i] + 0.044715 * pow(x[i], 3))));
        cr_assert(fabs(((float *)h->out[0].data)[i] - want) < 1e-6, "gelu tanh(%g)", x[i]);
    }
    harness_free(h);
    h = harness("", "Gelu", 20);
    attr_str(h->node, "approximate", "fast");
    cr_assert_eq(run(h, 1, in, 1), AMP_ERR_INPUT);
    harness_free(h);
}

Test(elementwise, gradients_match_finite_differences) {
    /* GeluGrad(dY, X) against a central difference of Gelu; SigmoidGrad / TanhGrad as
     * their formulas in Y. */
    int64_t d[1] = {5};
    float x[5] = {-3.0f, -0.7f, 0.0f, 0.4f, 2.5f}, dy[5] = {1, 1, 1, 1, 1};
    AmpBuf DY = mkbuf(AMP_DT_FLOAT, 1, d, dy), X = mkbuf(AMP_DT_FLOAT, 1, d, x);
    Harness *h = harness("com.microsoft", "GeluGrad", 1);
    cr_assert_eq(run2(h, &DY, &X), AMP_OK, "%s", h->st.msg);
    for (int i = 0; i < 5; i++) {
        double e = 1e-4, xp = x[i] + e, xm = x[i] - e;
        double fd = (0.5 * xp * (1 + erf(xp / sqrt(2.0))) - 0.5 * xm * (1 + erf(xm / sqrt(2.0)))) / (2 * e);
        cr_assert(fabs(((float *)h->out[0].data)[i] - fd) < 1e-4, "gelu'(%g)", x[i]);
    }
    harness_free(h);
    h = harness("com.microsoft", "TanhGrad", 1);
    cr_assert_eq(run2(h, &DY, &X), AMP_OK, "%s", h->st.msg);
    for (int i = 0; i < 5; i++) cr_assert_float_eq(((float *)h->out[0].data)[i], 1 - x[i] * x[i], 1e-6);
    harness_free(h);
    h = harness("com.microsoft", "ReluGrad", 1);
    cr_assert_eq(run2(h, &DY, &X), AMP_OK, "%s", h->st.msg);
    for (int i = 0; i < 5; i++) cr_assert_eq(((float *)h->out[0].data)[i], x[i] > 0 ? 1.0f : 0.0f);
    harness_free(h);
}

Test(elementwise, clip_bounds) {
    int64_t d[1] = {4}, d0[1] = {1}, d2[1] = {2};
    uint16_t x[4] = {amp_f32_to_f16(-3), amp_f32_to_f16(0.5f), amp_f32_to_f16(9), amp_f32_to_f16(NAN)};
    uint16_t lo = amp_f32_to_f16(2), hi = amp_f32_to_f16(1), two[2] = {0, 0};
    AmpBuf X = mkbuf(AMP_DT_FLOAT16, 1, d, x), L = mkbuf(AMP_DT_FLOAT16, 0, d0, &lo), H = mkbuf(AMP_DT_FLOAT16, 0, d0, &hi);
    /* min > max: every value becomes max; NaN stays NaN */
    Harness *h = harness("", "Clip", 13);
    const AmpBuf *in[3] = {&X, &L, &H};
    cr_assert_eq(run(h, 3, in, 1), AMP_OK, "%s", h->st.msg);
    const uint16_t *o = h->out[0].data;
    for (int i = 0; i < 3; i++) cr_assert_eq(amp_f16_to_f32(o[i]), 1.0f);
    cr_assert(isnan(amp_f16_to_f32(o[3])));
    /* min only (max left out) */
    in[2] = NULL;
    cr_assert_eq(run(h, 3, in, 1), AMP_OK, "%s", h->st.msg);
    o = h->out[0].data;
    cr_assert_eq(amp_f16_to_f32(o[0]), 2.0f);
    cr_assert_eq(amp_f16_to_f32(o[2]), 9.0f);
    /* a bound of two elements, or of another type */
    AmpBuf Two = mkbuf(AMP_DT_FLOAT16, 1, d2, two);
    in[1] = &Two;
    cr_assert_eq(run(h, 2, in, 1), AMP_ERR_INPUT);
    float lo32 = 0;
    AmpBuf L32 = mkbuf(AMP_DT_FLOAT, 0, d0, &lo32);
    in[1] = &L32;
    cr_assert_eq(run(h, 2, in, 1), AMP_ERR_INPUT);
    harness_free(h);
    /* opset 6: attributes */
    h = harness("", "Clip", 6);
    attr_float(h->node, "min", -1.0f);
    attr_float(h->node, "max", 1.0f);
    cr_assert_eq(run(h, 1, in, 1), AMP_OK, "%s", h->st.msg);
    o = h->out[0].data;
    cr_assert_eq(amp_f16_to_f32(o[0]), -1.0f);
    cr_assert_eq(amp_f16_to_f32(o[1]), 0.5f);
    cr_assert_eq(amp_f16_to_f32(o[2]), 1.0f);
    harness_free(h);
}

/* ---- Dropout ------------------------------------------------------------------------- */

Test(elementwise, dropout_inference_is_identity_with_true_mask) {
    Harness *h = harness("", "Dropout", 13);
    int64_t d[1] = {3};
    float x[3] = {1, 2, 3};
    AmpBuf X = mkbuf(AMP_DT_FLOAT, 1, d, x);
    const AmpBuf *in[1] = {&X};
    cr_assert_eq(run(h, 1, in, 2), AMP_OK, "%s", h->st.msg);
    cr_assert_eq(h->out[1].dtype, AMP_DT_BOOL);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(((float *)h->out[0].data)[i], x[i]);
        cr_assert_eq(((uint8_t *)h->out[1].data)[i], 1);
    }
    harness_free(h);
}

Test(elementwise, dropout_opset7_mask_has_the_data_type) {
    /* Dropout-7..9's mask is T (the data's type), bool only from opset 10 */
    Harness *h = harness("", "Dropout", 7);
    int64_t d[1] = {2};
    uint16_t x[2] = {amp_f32_to_f16(1.5f), amp_f32_to_f16(-2.0f)};
    AmpBuf X = mkbuf(AMP_DT_FLOAT16, 1, d, x);
    const AmpBuf *in[1] = {&X};
    cr_assert_eq(run(h, 1, in, 2), AMP_OK, "%s", h->st.msg);
    cr_assert_eq(h->out[0].dtype, AMP_DT_FLOAT16);
    cr_assert_eq(h->out[1].dtype, AMP_DT_FLOAT16);
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(((uint16_t *)h->out[0].data)[i], x[i]);
        cr_assert_eq(amp_f16_to_f32(((uint16_t *)h->out[1].data)[i]), 1.0f);
    }
    harness_free(h);
}

Test(elementwise, dropout_seeded_matches_numpy) {
    /* numpy: RandomState(0).uniform(0, 1, 5) = .5488 .7152 .6028 .5449 .4237 */
    Harness *h = harness("", "Dropout", 13);
    attr_int(h->node, "seed", 0);
    int64_t d[1] = {5}, d0[1] = {1};
    float x[5] = {1, 2, 3, 4, 5}, r = 0.55f;
    uint8_t t = 1;
    AmpBuf X = mkbuf(AMP_DT_FLOAT, 1, d, x), R = mkbuf(AMP_DT_FLOAT, 0, d0, &r), T = mkbuf(AMP_DT_BOOL, 0, d0, &t);
    const AmpBuf *in[3] = {&X, &R, &T};
    cr_assert_eq(run(h, 3, in, 2), AMP_OK, "%s", h->st.msg);
    uint8_t want[5] = {0, 1, 1, 0, 0};
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(((uint8_t *)h->out[1].data)[i], want[i], "mask %d", i);
        cr_assert_float_eq(((float *)h->out[0].data)[i], want[i] ? x[i] / (1 - r) : 0.0f, 1e-5);
    }
    r = 1.0f;
    cr_assert_eq(run(h, 3, in, 2), AMP_ERR_INPUT, "ratio 1 is rejected");
    harness_free(h);
}

Test(elementwise, dropout_training_step_uses_executor_rng) {
    Harness *h = harness("", "Dropout", 13);
    h->training = true;
    enum { N = 20000 };
    int64_t d[1] = {N};
    uint16_t *x = malloc(N * sizeof *x);
    for (int i = 0; i < N; i++) x[i] = amp_f32_to_bf16(1.5f);
    AmpBuf X = mkbuf(AMP_DT_BFLOAT16, 1, d, x);
    const AmpBuf *in[1] = {&X};
    uint64_t before = h->rng;
    cr_assert_eq(run(h, 1, in, 1), AMP_OK, "%s", h->st.msg);
    cr_assert_neq(h->rng, before, "the executor's stream advanced");
    int kept = 0;
    for (int i = 0; i < N; i++) {
        float v = amp_bf16_to_f32(((uint16_t *)h->out[0].data)[i]);
        cr_assert(v == 0.0f || v == 3.0f, "kept values scale by 1 / (1 - 0.5): %g", v);
        kept += v != 0;
    }
    cr_assert(kept > N * 0.47 && kept < N * 0.53, "kept %d of %d", kept, N);
    free(x);
    harness_free(h);
}

/* ---- error paths ----------------------------------------------------------------------- */

Test(elementwise, unsupported_dtypes_and_missing_inputs) {
    int64_t d[1] = {2};
    uint8_t bools[2] = {1, 0};
    int32_t ints[2] = {4, 9};
    AmpBuf Bo = mkbuf(AMP_DT_BOOL, 1, d, bools), I = mkbuf(AMP_DT_INT32, 1, d, ints);
    Harness *h = harness("", "Add", 14);
    cr_assert_eq(run2(h, &Bo, &Bo), AMP_ERR_UNSUPPORTED);
    cr_assert_eq(run2(h, &I, &Bo), AMP_ERR_INPUT, "mixed dtypes");
    const AmpBuf *one[1] = {&I};
    cr_assert_eq(run(h, 1, one, 1), AMP_ERR_INPUT, "missing B");
    harness_free(h);
    const char *float_only[] = {"Sqrt", "Exp", "Sigmoid", "Erf", "IsNaN", "Round"};
    for (size_t i = 0; i < sizeof float_only / sizeof *float_only; i++) {
        h = harness("", float_only[i], 13);
        cr_assert_eq(run(h, 1, one, 1), AMP_ERR_UNSUPPORTED, "%s on int32", float_only[i]);
        harness_free(h);
    }
    h = harness("", "Not", 1);
    cr_assert_eq(run(h, 1, one, 1), AMP_ERR_UNSUPPORTED);
    harness_free(h);
    h = harness("", "Abs", 13);
    cr_assert_eq(run(h, 1, one, 1), AMP_OK, "%s", h->st.msg);
    harness_free(h);
}

Test(elementwise, prelu_slope_must_broadcast_to_x) {
    int64_t dx[2] = {2, 3}, ds[2] = {4, 3}, dc[1] = {3};
    float x[6] = {-1, -2, -3, 1, 2, 3}, s[12] = {0}, c[3] = {0.5f, 0.25f, 2};
    AmpBuf X = mkbuf(AMP_DT_FLOAT, 2, dx, x), S = mkbuf(AMP_DT_FLOAT, 2, ds, s), C = mkbuf(AMP_DT_FLOAT, 1, dc, c);
    Harness *h = harness("", "PRelu", 16);
    cr_assert_eq(run2(h, &X, &S), AMP_ERR_INPUT);
    cr_assert_eq(run2(h, &X, &C), AMP_OK, "%s", h->st.msg);
    const float *o = h->out[0].data;
    float want[6] = {-0.5f, -0.5f, -6, 1, 2, 3};
    for (int i = 0; i < 6; i++) cr_assert_eq(o[i], want[i]);
    harness_free(h);
}

Test(elementwise, isinf_directions) {
    int64_t d[1] = {4};
    double x[4] = {INFINITY, -INFINITY, NAN, 1.0};
    AmpBuf X = mkbuf(AMP_DT_DOUBLE, 1, d, x);
    const AmpBuf *in[1] = {&X};
    Harness *h = harness("", "IsInf", 10);
    attr_int(h->node, "detect_negative", 0);
    cr_assert_eq(run(h, 1, in, 1), AMP_OK, "%s", h->st.msg);
    const uint8_t *o = h->out[0].data;
    cr_assert(o[0] == 1 && o[1] == 0 && o[2] == 0 && o[3] == 0);
    harness_free(h);
}
