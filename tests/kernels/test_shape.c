/* Unit tests of the data-movement and tensor kernel families (kernels/cpu/shape.c,
 * slice.c, gather.c, resize.c, tensor.c) for what the conformance data covers thinly:
 * Cast rounding (ties to even, overflow to inf, no double rounding from double),
 * Reshape's 0 / -1 / allowzero rules, Slice with negative and extreme steps, index
 * checks, hostile shapes (errors, never crashes or giant allocations), dtype coverage. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/half.h"
#include "tests/kernels/kernel_test_util.h"
#include "kernels/cpu/kernels.h"

/* ---- harness: one node, its outputs in `outs` (kernel_test_util.h) ------------------- */

static AmpModel *model;
static Outs outs;
static AmpStatus st;

static void setup(void) {
    model = amp_model_new();
    cr_assert_not_null(model);
    memset(&outs, 0, sizeof outs);
}

static void teardown(void) {
    outs_free(&outs);
    amp_model_free(model);
}

TestSuite(shape, .init = setup, .fini = teardown);

static AmpNode *mknode(const char *op) {
    AmpNode *n = amp_node_new(model->graph, "", op, "n", 5, 8);
    cr_assert_not_null(n);
    cr_assert_neq(n->op, AMP_OP_UNKNOWN, "%s is not in the op table", op);
    return n;
}

/* Runs the node's kernel on inputs (NULL-terminated not needed: n_in given). */
static AmpCode run_op(AmpNode *n, int64_t opset, int n_in, const AmpBuf *const *in, int n_out) {
    outs_free(&outs);
    AmpCode rc = kt_run(n, opset, n_in, in, n_out, &outs, &st);
    if (rc) cr_assert_eq(st.code, rc, "status code differs from the returned code");
    return rc;
}

#define F32(...) ((const float[]){__VA_ARGS__})

static void expect_i64(const AmpBuf *b, int n, const int64_t *want) {
    cr_assert_eq(b->dtype, AMP_DT_INT64);
    cr_assert_eq(b->nelem, (uint64_t)n);
    for (int i = 0; i < n; i++)
        cr_assert_eq(((int64_t *)b->data)[i], want[i], "element %d is %lld, expected %lld", i,
                     (long long)((int64_t *)b->data)[i], (long long)want[i]);
}

static void expect_f32(const AmpBuf *b, int n, const float *want) {
    cr_assert_eq(b->dtype, AMP_DT_FLOAT);
    cr_assert_eq(b->nelem, (uint64_t)n);
    for (int i = 0; i < n; i++)
        cr_assert(fabsf(((float *)b->data)[i] - want[i]) <= 1e-6f * (1 + fabsf(want[i])),
                  "element %d is %g, expected %g", i, ((float *)b->data)[i], want[i]);
}

/* ---- Cast ------------------------------------------------------------------------------ */

static AmpNode *cast_node(int to) {
    AmpNode *n = mknode("Cast");
    attr_int(n, "to", to);
    return n;
}

Test(shape, cast_float_to_float16_ties_to_even_and_overflow) {
    /* 1 + 2^-11 is halfway between 1 and the next half 1 + 2^-10: even is 1.0;
     * 1 + 3 * 2^-11 is halfway between mantissas 1 and 2: even is 2. 65520 is halfway
     * between 65504 (max) and 65536: it rounds to even, i.e. overflows to inf. */
    float x[] = {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 65504.0f, 65519.0f, 65520.0f, 1e6f, -1e6f,
                 0x1p-25f,        0x1p-24f * 1.5f,     -0.0f};
    uint16_t want[] = {0x3C00, 0x3C02, 0x7BFF, 0x7BFF, 0x7C00, 0x7C00, 0xFC00, 0x0000, 0x0002, 0x8000};
    AmpBuf b = mkbuf(AMP_DT_FLOAT, 1, I64(10), x);
    const AmpBuf *in[] = {&b};
    cr_assert_eq(run_op(cast_node(AMP_DT_FLOAT16), 13, 1, in, 1), AMP_OK, "%s", st.msg);
    cr_assert_eq(outs.b[0].dtype, AMP_DT_FLOAT16);
    for (int i = 0; i < 10; i++)
        cr_assert_eq(((uint16_t *)outs.b[0].data)[i], want[i], "element %d: 0x%04x, expected 0x%04x", i,
                     ((uint16_t *)outs.b[0].data)[i], want[i]);
}

Test(shape, cast_double_to_16_bit_rounds_once) {
    /* 1 + 2^-11 + 2^-40 is just above the halfway point: float16 must round up to
     * 1 + 2^-10. Rounding to float first would land exactly on the halfway point and
     * then round to even (1.0): the double-rounding error the cast must avoid. */
    double x[] = {1.0 + 0x1p-11 + 0x1p-40, 1.0 + 0x1p-11, 1.0 + 0x1p-8 + 0x1p-40, 1e300, NAN};
    AmpBuf b = mkbuf(AMP_DT_DOUBLE, 1, I64(5), x);
    const AmpBuf *in[] = {&b};
    cr_assert_eq(run_op(cast_node(AMP_DT_FLOAT16), 13, 1, in, 1), AMP_OK, "%s", st.msg);
    const uint16_t *h = outs.b[0].data;
    cr_assert_eq(h[0], 0x3C01);
    cr_assert_eq(h[1], 0x3C00);
    cr_assert_eq(h[3], 0x7C00);
    cr_assert((h[4] & 0x7C00) == 0x7C00 && (h[4] & 0x3FF), "NaN stays NaN");
    cr_assert_eq(run_op(cast_node(AMP_DT_BFLOAT16), 13, 1, in, 1), AMP_OK, "%s", st.msg);
    h = outs.b[0].data;
    cr_assert_eq(h[1], 0x3F80); /* 1 + 2^-11 is below bfloat16's halfway point */
    cr_assert_eq(h[2], 0x3F81); /* 1 + 2^-8 + tiny: above the halfway point, rounds up */
}

Test(shape, cast_float_to_bfloat16_ties_to_even) {
    float x[] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 3.0e38f, -2.5f};
    uint16_t want[] = {0x3F80, 0x3F82, 0x7F62, 0xC020};
    AmpBuf b = mkbuf(AMP_DT_FLOAT, 1, I64(4), x);
    const AmpBuf *in[] = {&b};
    cr_assert_eq(run_op(cast_node(AMP_DT_BFLOAT16), 13, 1, in, 1), AMP_OK, "%s", st.msg);
    for (int i = 0; i < 4; i++) cr_assert_eq(((uint16_t *)outs.b[0].data)[i], want[i], "element %d", i);
}

Test(shape, cast_float_to_int_truncates_and_to_bool) {
    float x[] = {-1.7f, 2.9f, NAN, -0.0f, 0.5f, 0x1p33f};
    AmpBuf b = mkbuf(AMP_DT_FLOAT, 1, I64(6), x);
    const AmpBuf *in[] = {&b};
    cr_assert_eq(run_op(cast_node(AMP_DT_INT64), 13, 1, in, 1), AMP_OK, "%s", st.msg);
    expect_i64(&outs.b[0], 6, I64(-1, 2, 0, 0, 0, INT64_C(8589934592)));
    cr_assert_eq(run_op(cast_node(AMP_DT_BOOL), 13, 1, in, 1), AMP_OK, "%s", st.msg);
    const uint8_t wantb[] = {1, 1, 1, 0, 1, 1};
    for (int i = 0; i < 6; i++) cr_assert_eq(((uint8_t *)outs.b[0].data)[i], wantb[i], "bool element %d", i);
    /* int64 -> float16: 70000 overflows to inf; int -> uint8 wraps like numpy. */
    int64_t iv[] = {70000, -3, 300};
    AmpBuf bi = mkbuf(AMP_DT_INT64, 1, I64(3), iv);
    const AmpBuf *in2[] = {&bi};
    cr_assert_eq(run_op(cast_node(AMP_DT_FLOAT16), 13, 1, in2, 1), AMP_OK, "%s", st.msg);
    cr_assert_eq(((uint16_t *)outs.b[0].data)[0], 0x7C00);
    cr_assert_eq(((uint16_t *)outs.b[0].data)[1], 0xC200);
    cr_assert_eq(run_op(cast_node(AMP_DT_UINT8), 13, 1, in2, 1), AMP_OK, "%s", st.msg);
    cr_assert_eq(((uint8_t *)outs.b[0].data)[1], 253);
    cr_assert_eq(((uint8_t *)outs.b[0].data)[2], 44);
}

Test(shape, cast_unsupported_types) {
    float x[] = {1};
    AmpBuf b = mkbuf(AMP_DT_FLOAT, 1, I64(1), x);
    const AmpBuf *in[] = {&b};
    cr_assert_eq(run_op(cast_node(AMP_DT_STRING), 13, 1, in, 1), AMP_ERR_UNSUPPORTED);
    cr_assert_eq(run_op(cast_node(AMP_DT_FLOAT8E4M3FN), 19, 1, in, 1), AMP_ERR_UNSUPPORTED);
    cr_assert_eq(run_op(cast_node(99), 13, 1, in, 1), AMP_ERR_INPUT);
}

/* ---- Reshape ---------------------------------------------------------------------------- */

static AmpCode reshape(const AmpBuf *x, int n, const int64_t *shape, bool allowzero) {
    AmpNode *nd = mknode("Reshape");
    if (allowzero) attr_int(nd, "allowzero", 1);
    AmpBuf s = mkbuf(AMP_DT_INT64, 1, &(int64_t){n}, shape);
    const AmpBuf *in[] = {x, &s};
    return run_op(nd, 14, 2, in, 1);
}

Test(shape, reshape_zero_and_minus_one) {
    float data[24];
    for (int i = 0; i < 24; i++) data[i] = (float)i;
    AmpBuf x = mkbuf(AMP_DT_FLOAT, 3, I64(2, 3, 4), data);
    cr_assert_eq(reshape(&x, 2, I64(0, -1), false), AMP_OK, "%s", st.msg);
    expect_shape(&outs.b[0], 2, I64(2, 12));
    cr_assert_eq(((float *)outs.b[0].data)[23], 23.0f);
    cr_assert_eq(reshape(&x, 3, I64(-1, 0, 2), false), AMP_OK, "%s", st.msg);
    expect_shape(&outs.b[0], 3, I64(4, 3, 2));
    /* allowzero: 0 is a real zero-sized dimension. */
    AmpBuf e = mkbuf(AMP_DT_FLOAT, 3, I64(0, 3, 4), data);
    cr_assert_eq(reshape(&e, 2, I64(0, 12), true), AMP_OK, "%s", st.msg);
    expect_shape(&outs.b[0], 2, I64(0, 12));
    cr_assert_eq(reshape(&e, 2, I64(12, 0), true), AMP_OK, "%s", st.msg);
    expect_shape(&outs.b[0], 2, I64(12, 0));
    cr_assert_eq(reshape(&e, 2, I64(0, -1), true), AMP_ERR_INPUT, "0 and -1 together with allowzero");
    cr_assert_eq(reshape(&x, 2, I64(0, 12), true), AMP_ERR_INPUT, "allowzero 0 does not copy");
}

Test(shape, reshape_hostile_shapes_are_errors) {
    float data[6] = {0};
    AmpBuf x = mkbuf(AMP_DT_FLOAT, 2, I64(2, 3), data);
    cr_assert_eq(reshape(&x, 1, I64(-5), false), AMP_ERR_INPUT);
    cr_assert_eq(reshape(&x, 2, I64(-1, -1), false), AMP_ERR_INPUT);
    cr_assert_eq(reshape(&x, 2, I64(INT64_MAX, INT64_MAX), false), AMP_ERR_INPUT);
    cr_assert_eq(reshape(&x, 3, I64(INT64_MAX, -1, 2), false), AMP_ERR_INPUT);
    cr_assert_eq(reshape(&x, 2, I64(INT64_MIN, 1), false), AMP_ERR_INPUT);
    cr_assert_eq(reshape(&x, 3, I64(0, 0, 0), false), AMP_ERR_INPUT, "0 copies past the input rank");
    cr_assert_eq(reshape(&x, 2, I64(4, 2), false), AMP_ERR_INPUT, "element count differs");
    cr_assert_eq(reshape(&x, 9, I64(1, 1, 1, 1, 1, 1, 2, 3, 1), false), AMP_ERR_UNSUPPORTED, "rank 9");
    AmpBuf e = mkbuf(AMP_DT_FLOAT, 2, I64(0, 3), data);
    cr_assert_eq(reshape(&e, 2, I64(0, -1), false), AMP_ERR_INPUT, "-1 beside a zero is ambiguous");
    /* A float shape tensor is not a shape. */
    AmpNode *nd = mknode("Reshape");
    AmpBuf s = mkbuf(AMP_DT_FLOAT, 1, I64(1), F32(6));
    const AmpBuf *in[] = {&x, &s};
    cr_assert_eq(run_op(nd, 14, 2, in, 1), AMP_ERR_INPUT);
}

/* ---- Slice ------------------------------------------------------------------------------ */

static AmpCode slice(const AmpBuf *x, int n, const int64_t *starts, const int64_t *ends, const int64_t *axes,
                     const int64_t *steps) {
    AmpNode *nd = mknode("Slice");
    AmpBuf s = mkbuf(AMP_DT_INT64, 1, &(int64_t){n}, starts), e = mkbuf(AMP_DT_INT64, 1, &(int64_t){n}, ends);
    AmpBuf a = mkbuf(AMP_DT_INT64, 1, &(int64_t){n}, axes), p = mkbuf(AMP_DT_INT64, 1, &(int64_t){n}, steps);
    const AmpBuf *in[] = {x, &s, &e, axes ? &a : NULL, steps ? &p : NULL};
    return run_op(nd, 13, 5, in, 1);
}

Test(shape, slice_negative_steps_and_clamping) {
    int64_t v[10];
    for (int i = 0; i < 10; i++) v[i] = i;
    AmpBuf x = mkbuf(AMP_DT_INT64, 1, I64(10), v);
    cr_assert_eq(slice(&x, 1, I64(-1), I64(INT64_MIN), NULL, I64(-3)), AMP_OK, "%s", st.msg);
    expect_i64(&outs.b[0], 4, I64(9, 6, 3, 0));
    cr_assert_eq(slice(&x, 1, I64(100), I64(-100), I64(0), I64(-1)), AMP_OK, "%s", st.msg);
    expect_i64(&outs.b[0], 10, I64(9, 8, 7, 6, 5, 4, 3, 2, 1, 0));
    cr_assert_eq(slice(&x, 1, I64(7), I64(2), NULL, I64(-2)), AMP_OK, "%s", st.msg);
    expect_i64(&outs.b[0], 3, I64(7, 5, 3));
    cr_assert_eq(slice(&x, 1, I64(5), I64(INT64_MIN), NULL, I64(INT64_MIN)), AMP_OK, "%s", st.msg);
    expect_i64(&outs.b[0], 1, I64(5));
    cr_assert_eq(slice(&x, 1, I64(2), I64(INT64_MAX), NULL, I64(INT64_MAX)), AMP_OK, "%s", st.msg);
    expect_i64(&outs.b[0], 1, I64(2));
    cr_assert_eq(slice(&x, 1, I64(3), I64(3), NULL, NULL), AMP_OK, "%s", st.msg);
    expect_shape(&outs.b[0], 1, I64(0));
    cr_assert_eq(slice(&x, 1, I64(0), I64(5), NULL, I64(0)), AMP_ERR_INPUT, "step 0");
    cr_assert_eq(slice(&x, 1, I64(0), I64(5), I64(1), NULL), AMP_ERR_INPUT, "axis out of range");
    /* 2-D: reverse the last axis (negative axis), every other row. */
    float m[12];
    for (int i = 0; i < 12; i++) m[i] = (float)i;
    AmpBuf y = mkbuf(AMP_DT_FLOAT, 2, I64(4, 3), m);
    cr_assert_eq(slice(&y, 2, I64(-1, 0), I64(INT64_MIN, 4), I64(-1, 0), I64(-1, 2)), AMP_OK, "%s", st.msg);
    expect_shape(&outs.b[0], 2, I64(2, 3));
    expect_f32(&outs.b[0], 6, F32(2, 1, 0, 8, 7, 6));
}

/* ---- Gather and friends ------------------------------------------------------------------ */

Test(shape, gather_checks_indices) {
    float d[6] = {0, 1, 2, 3, 4, 5};
    AmpBuf x = mkbuf(AMP_DT_FLOAT, 2, I64(3, 2), d);
    AmpNode *n = mknode("Gather");
    int32_t good[] = {-1, 0};
    AmpBuf gi = mkbuf(AMP_DT_INT32, 1, I64(2), good);
    const AmpBuf *in[] = {&x, &gi};
    cr_assert_eq(run_op(n, 13, 2, in, 1), AMP_OK, "%s", st.msg);
    expect_shape(&outs.b[0], 2, I64(2, 2));
    expect_f32(&outs.b[0], 4, F32(4, 5, 0, 1));
    int64_t bad[] = {0, 3};
    AmpBuf bi = mkbuf(AMP_DT_INT64, 1, I64(2), bad);
    const AmpBuf *in2[] = {&x, &bi};
    cr_assert_eq(run_op(n, 13, 2, in2, 1), AMP_ERR_INPUT);
    int64_t neg[] = {-4};
    AmpBuf ni = mkbuf(AMP_DT_INT64, 1, I64(1), neg);
    const AmpBuf *in3[] = {&x, &ni};
    cr_assert_eq(run_op(n, 13, 2, in3, 1), AMP_ERR_INPUT);
    AmpBuf fi = mkbuf(AMP_DT_FLOAT, 1, I64(1), F32(0));
    const AmpBuf *in4[] = {&x, &fi};
    cr_assert_eq(run_op(n, 13, 2, in4, 1), AMP_ERR_INPUT, "float indices");
    AmpNode *n2 = mknode("Gather");
    attr_int(n2, "axis", 2);
    cr_assert_eq(run_op(n2, 13, 2, in, 1), AMP_ERR_INPUT, "axis out of range");
}

Test(shape, gather_nd_and_scatter_nd) {
    int64_t d[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    AmpBuf x = mkbuf(AMP_DT_INT64, 3, I64(2, 2, 2), d);
    int64_t ix[] = {1, 0, 0, 1};
    AmpBuf ib = mkbuf(AMP_DT_INT64, 2, I64(2, 2), ix);
    const AmpBuf *in[] = {&x, &ib};
    cr_assert_eq(run_op(mknode("GatherND"), 13, 2, in, 1), AMP_OK, "%s", st.msg);
    expect_shape(&outs.b[0], 2, I64(2, 2));
    expect_i64(&outs.b[0], 4, I64(4, 5, 2, 3));
    int64_t oob[] = {2, 0, 0, 1};
    AmpBuf ob = mkbuf(AMP_DT_INT64, 2, I64(2, 2), oob);
    const AmpBuf *in2[] = {&x, &ob};
    cr_assert_eq(run_op(mknode("GatherND"), 13, 2, in2, 1), AMP_ERR_INPUT);
    /* ScatterND add, int64: duplicates accumulate. */
    int64_t si[] = {1, 1};
    AmpBuf sib = mkbuf(AMP_DT_INT64, 2, I64(2, 1), si);
    AmpNode *s = mknode("ScatterND");
    attr_str(s, "reduction", "add");
    AmpBuf ub2 = mkbuf(AMP_DT_INT64, 3, I64(2, 2, 2), (int64_t[]){1, 1, 1, 1, 2, 2, 2, 2});
    const AmpBuf *in3[] = {&x, &sib, &ub2};
    cr_assert_eq(run_op(s, 16, 3, in3, 1), AMP_OK, "%s", st.msg);
    expect_i64(&outs.b[0], 8, I64(0, 1, 2, 3, 7, 8, 9, 10));
    const AmpBuf *in4[] = {&x, &sib, &sib};
    cr_assert_eq(run_op(s, 16, 3, in4, 1), AMP_ERR_INPUT, "updates of the wrong shape");
}

/* ---- Pad, Expand, Tile, Split, Concat, Transpose ---------------------------------------- */

Test(shape, pad_modes) {
    int64_t v[3] = {1, 2, 3};
    AmpBuf x = mkbuf(AMP_DT_INT64, 1, I64(3), v);
    AmpBuf p = mkbuf(AMP_DT_INT64, 1, I64(2), I64(5, 5));
    const AmpBuf *in[] = {&x, &p};
    AmpNode *n = mknode("Pad");
    attr_str(n, "mode", "reflect");
    cr_assert_eq(run_op(n, 13, 2, in, 1), AMP_OK, "%s", st.msg);
    expect_i64(&outs.b[0], 13, I64(2, 1, 2, 3, 2, 1, 2, 3, 2, 1, 2, 3, 2)); /* numpy's reflect */
    AmpNode *e = mknode("Pad");
    attr_str(e, "mode", "edge");
    AmpBuf pc = mkbuf(AMP_DT_INT64, 1, I64(2), I64(-1, 2));
    const AmpBuf *in2[] = {&x, &pc};
    cr_assert_eq(run_op(e, 13, 2, in2, 1), AMP_OK, "%s", st.msg);
    expect_i64(&outs.b[0], 4, I64(2, 3, 3, 3));
    /* constant on float16 with a constant_value input */
    uint16_t h[2] = {amp_f32_to_f16(1.5f), amp_f32_to_f16(-2.0f)}, cv = amp_f32_to_f16(7.0f);
    AmpBuf hx = mkbuf(AMP_DT_FLOAT16, 1, I64(2), h), hc = mkbuf(AMP_DT_FLOAT16, 0, NULL, &cv);
    AmpBuf p2 = mkbuf(AMP_DT_INT64, 1, I64(2), I64(1, 0));
    const AmpBuf *in3[] = {&hx, &p2, &hc};
    cr_assert_eq(run_op(mknode("Pad"), 13, 3, in3, 1), AMP_OK, "%s", st.msg);
    cr_assert_eq(((uint16_t *)outs.b[0].data)[0], cv);
    cr_assert_eq(((uint16_t *)outs.b[0].data)[2], h[1]);
    AmpBuf pbad = mkbuf(AMP_DT_INT64, 1, I64(2), I64(-2, -2));
    const AmpBuf *in4[] = {&x, &pbad};
    cr_assert_eq(run_op(mknode("Pad"), 13, 2, in4, 1), AMP_ERR_INPUT, "crops more than the axis");
    AmpBuf phuge = mkbuf(AMP_DT_INT64, 1, I64(2), I64(INT64_MAX, 0));
    const AmpBuf *in5[] = {&x, &phuge};
    cr_assert_eq(run_op(mknode("Pad"), 13, 2, in5, 1), AMP_ERR_INPUT);
}

Test(shape, expand_tile_huge_outputs_are_errors) {
    uint8_t b[2] = {1, 0};
    AmpBuf x = mkbuf(AMP_DT_BOOL, 2, I64(2, 1), b);
    AmpBuf s = mkbuf(AMP_DT_INT64, 1, I64(2), I64(2, 3));
    const AmpBuf *in[] = {&x, &s};
    cr_assert_eq(run_op(mknode("Expand"), 13, 2, in, 1), AMP_OK, "%s", st.msg);
    expect_shape(&outs.b[0], 2, I64(2, 3));
    const uint8_t want[] = {1, 1, 1, 0, 0, 0};
    cr_assert_eq(memcmp(outs.b[0].data, want, 6), 0);
    AmpBuf big = mkbuf(AMP_DT_INT64, 1, I64(4), I64(INT64_C(1) << 40, INT64_C(1) << 40, 2, 1));
    const AmpBuf *in2[] = {&x, &big};
    cr_assert_eq(run_op(mknode("Expand"), 13, 2, in2, 1), AMP_ERR_INPUT);
    AmpBuf nb = mkbuf(AMP_DT_INT64, 1, I64(2), I64(3, 1));
    const AmpBuf *in3[] = {&x, &nb};
    cr_assert_eq(run_op(mknode("Expand"), 13, 2, in3, 1), AMP_ERR_INPUT, "2 does not broadcast to 3");
    /* Tile */
    AmpBuf r = mkbuf(AMP_DT_INT64, 1, I64(2), I64(2, 2));
    const AmpBuf *in4[] = {&x, &r};
    cr_assert_eq(run_op(mknode("Tile"), 13, 2, in4, 1), AMP_OK, "%s", st.msg);
    expect_shape(&outs.b[0], 2, I64(4, 2));
    const uint8_t want2[] = {1, 1, 0, 0, 1, 1, 0, 0};
    cr_assert_eq(memcmp(outs.b[0].data, want2, 8), 0);
    AmpBuf rh = mkbuf(AMP_DT_INT64, 1, I64(2), I64(INT64_MAX, 2));
    const AmpBuf *in5[] = {&x, &rh};
    cr_assert_eq(run_op(mknode("Tile"), 13, 2, in5, 1), AMP_ERR_INPUT);
    AmpBuf cs = mkbuf(AMP_DT_INT64, 1, I64(2), I64(INT64_C(1) << 30, INT64_C(1) << 30));
    const AmpBuf *in6[] = {&cs};
    cr_assert_eq(run_op(mknode("ConstantOfShape"), 13, 1, in6, 1), AMP_ERR_UNSUPPORTED, "over the allocator's cap");
}

Test(shape, split_uneven_since_18) {
    int64_t v[7] = {0, 1, 2, 3, 4, 5, 6};
    AmpBuf x = mkbuf(AMP_DT_INT64, 1, I64(7), v);
    const AmpBuf *in[] = {&x};
    AmpNode *n = mknode("Split");
    attr_int(n, "num_outputs", 3);
    cr_assert_eq(run_op(n, 18, 1, in, 3), AMP_OK, "%s", st.msg);
    expect_i64(&outs.b[0], 3, I64(0, 1, 2));
    expect_i64(&outs.b[1], 3, I64(3, 4, 5));
    expect_i64(&outs.b[2], 1, I64(6));
    cr_assert_eq(run_op(mknode("Split"), 13, 1, in, 3), AMP_ERR_INPUT, "7 does not split in 3 before opset 18");
    AmpBuf sp = mkbuf(AMP_DT_INT64, 1, I64(2), I64(INT64_MAX, -INT64_MAX + 7));
    const AmpBuf *in2[] = {&x, &sp};
    cr_assert_eq(run_op(mknode("Split"), 13, 2, in2, 2), AMP_ERR_INPUT);
}

Test(shape, concat_transpose_bad_attributes) {
    float d[6] = {0, 1, 2, 3, 4, 5};
    AmpBuf x = mkbuf(AMP_DT_FLOAT, 2, I64(2, 3), d);
    const AmpBuf *in[] = {&x, &x};
    AmpNode *c = mknode("Concat");
    attr_int(c, "axis", -3);
    cr_assert_eq(run_op(c, 13, 2, in, 1), AMP_ERR_INPUT);
    AmpNode *c2 = mknode("Concat");
    attr_int(c2, "axis", -1);
    cr_assert_eq(run_op(c2, 13, 2, in, 1), AMP_OK, "%s", st.msg);
    expect_shape(&outs.b[0], 2, I64(2, 6));
    expect_f32(&outs.b[0], 12, F32(0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5));
    AmpNode *t = mknode("Transpose");
    attr_ints(t, "perm", 2, I64(0, 0));
    cr_assert_eq(run_op(t, 13, 1, in, 1), AMP_ERR_INPUT);
    AmpNode *t2 = mknode("Transpose");
    cr_assert_eq(run_op(t2, 13, 1, in, 1), AMP_OK, "%s", st.msg);
    expect_f32(&outs.b[0], 6, F32(0, 3, 1, 4, 2, 5));
}

/* ---- Resize ----------------------------------------------------------------------------- */

Test(shape, resize_linear_float16_storage) {
    /* (1, 1, 1, 2) -> (1, 1, 1, 4), align_corners: 0, 1/3, 2/3, 1 of the way. */
    uint16_t h[2] = {amp_f32_to_f16(0.0f), amp_f32_to_f16(1.0f)};
    AmpBuf x = mkbuf(AMP_DT_FLOAT16, 4, I64(1, 1, 1, 2), h);
    AmpBuf sz = mkbuf(AMP_DT_INT64, 1, I64(4), I64(1, 1, 1, 4));
    const AmpBuf *in[] = {&x, NULL, NULL, &sz};
    AmpNode *n = mknode("Resize");
    attr_str(n, "mode", "linear");
    attr_str(n, "coordinate_transformation_mode", "align_corners");
    cr_assert_eq(run_op(n, 13, 4, in, 1), AMP_OK, "%s", st.msg);
    cr_assert_eq(outs.b[0].dtype, AMP_DT_FLOAT16);
    const uint16_t *y = outs.b[0].data;
    cr_assert_eq(y[1], amp_f32_to_f16(1.0f / 3.0f));
    cr_assert_eq(y[2], amp_f32_to_f16(2.0f / 3.0f));
    cr_assert_eq(y[3], h[1]);
    const AmpBuf *in2[] = {&x, NULL, &sz, &sz};
    cr_assert_eq(run_op(n, 13, 4, in2, 1), AMP_ERR_INPUT, "scales and sizes together");
    int64_t iv[2] = {0, 1};
    AmpBuf xi = mkbuf(AMP_DT_INT64, 4, I64(1, 1, 1, 2), iv);
    const AmpBuf *in3[] = {&xi, NULL, NULL, &sz};
    cr_assert_eq(run_op(n, 13, 4, in3, 1), AMP_ERR_UNSUPPORTED, "linear on int64");
}

/* ---- tensor family ---------------------------------------------------------------------- */

Test(shape, range_and_onehot) {
    int64_t s = INT64_MIN + 1, l = INT64_MAX, d = INT64_MAX;
    AmpBuf bs = mkbuf(AMP_DT_INT64, 0, NULL, &s), bl = mkbuf(AMP_DT_INT64, 0, NULL, &l),
           bd = mkbuf(AMP_DT_INT64, 0, NULL, &d);
    const AmpBuf *in[] = {&bs, &bl, &bd};
    cr_assert_eq(run_op(mknode("Range"), 11, 3, in, 1), AMP_OK, "%s", st.msg);
    expect_i64(&outs.b[0], 2, I64(INT64_MIN + 1, 0)); /* MAX itself is the (excluded) limit */
    int64_t z = 0;
    AmpBuf bz = mkbuf(AMP_DT_INT64, 0, NULL, &z);
    const AmpBuf *in2[] = {&bs, &bl, &bz};
    cr_assert_eq(run_op(mknode("Range"), 11, 3, in2, 1), AMP_ERR_INPUT, "delta 0");
    /* OneHot with a negative index and one out of range (all off). */
    float idx[] = {-1, 5, 1.9f};
    float depth = 3, vals[] = {0, 1};
    AmpBuf bi = mkbuf(AMP_DT_FLOAT, 1, I64(3), idx), bde = mkbuf(AMP_DT_FLOAT, 0, NULL, &depth);
    AmpBuf bv = mkbuf(AMP_DT_FLOAT, 1, I64(2), vals);
    const AmpBuf *in4[] = {&bi, &bde, &bv};
    cr_assert_eq(run_op(mknode("OneHot"), 11, 3, in4, 1), AMP_OK, "%s", st.msg);
    expect_shape(&outs.b[0], 2, I64(3, 3));
    expect_f32(&outs.b[0], 9, F32(0, 0, 1, 0, 0, 0, 0, 1, 0));
}

Test(shape, nonzero_ignores_negative_zero) {
    float x[] = {0.0f, -0.0f, 2.0f, NAN};
    AmpBuf b = mkbuf(AMP_DT_FLOAT, 2, I64(2, 2), x);
    const AmpBuf *in[] = {&b};
    cr_assert_eq(run_op(mknode("NonZero"), 13, 1, in, 1), AMP_OK, "%s", st.msg);
    expect_shape(&outs.b[0], 2, I64(2, 2));
    expect_i64(&outs.b[0], 4, I64(1, 1, 0, 1));
}

Test(shape, strings_are_unsupported) {
    AmpBuf s = {.dtype = AMP_DT_STRING, .rank = 1, .dims = {2}, .nelem = 2, .data = NULL};
    const AmpBuf *in[] = {&s};
    cr_assert_eq(run_op(mknode("Identity"), 13, 1, in, 1), AMP_ERR_UNSUPPORTED);
    cr_assert_eq(run_op(mknode("Transpose"), 13, 1, in, 1), AMP_ERR_UNSUPPORTED);
    AmpBuf p = mkbuf(AMP_DT_INT64, 1, I64(2), I64(0, 1));
    const AmpBuf *in2[] = {&s, &p};
    cr_assert_eq(run_op(mknode("Gather"), 13, 2, in2, 1), AMP_ERR_UNSUPPORTED);
}

/* com.microsoft GatherGrad (shape, indices, dY): Gather's backward. Rows of dY add into
 * zeros of `shape` at their indices along axis: a repeated index sums, a negative one
 * counts from the end; a dY of another shape than Gather's output, or an index out of
 * range, is an input error. */
Test(shape, gather_grad_scatter_adds_rows) {
    AmpNode *n = amp_node_new(model->graph, "com.microsoft", "GatherGrad", "gg", 5, 8);
    cr_assert_neq(n->op, AMP_OP_UNKNOWN);
    attr_int(n, "axis", 1);
    const int64_t shape_v[2] = {2, 3}, d1[1] = {2}, di[1] = {3}, dy_d[2] = {2, 3};
    const int64_t idx[3] = {2, -1, 0}; /* -1 is 2: column 2 gets two rows */
    AmpBuf shape = mkbuf(AMP_DT_INT64, 1, d1, shape_v), ind = mkbuf(AMP_DT_INT64, 1, di, idx);
    AmpBuf dy = mkbuf(AMP_DT_FLOAT, 2, dy_d, F32(1, 2, 3, 4, 5, 6));
    const AmpBuf *in[3] = {&shape, &ind, &dy};
    cr_assert_eq(run_op(n, 1, 3, in, 1), AMP_OK, "%s", st.msg);
    cr_assert_eq(outs.b[0].rank, 2);
    expect_f32(&outs.b[0], 6, F32(3, 0, 3, 6, 0, 9));
    const int64_t bad_idx[3] = {2, 3, 0};
    AmpBuf bad = mkbuf(AMP_DT_INT64, 1, di, bad_idx);
    const AmpBuf *in2[3] = {&shape, &bad, &dy};
    cr_assert_eq(run_op(n, 1, 3, in2, 1), AMP_ERR_INPUT);
    cr_assert(strstr(st.msg, "out of range"), "%s", st.msg);
}

/* com.microsoft DropoutGrad (dY, mask, ratio?, training_mode?): in training, dY where the
 * mask kept the element, scaled by 1/(1-ratio); with training_mode false, dY itself. */
Test(shape, dropout_grad_masks_and_rescales) {
    AmpNode *n = amp_node_new(model->graph, "com.microsoft", "DropoutGrad", "dg", 5, 8);
    cr_assert_neq(n->op, AMP_OP_UNKNOWN);
    const int64_t d4[1] = {4};
    const uint8_t keep[4] = {1, 0, 1, 1}, on = 1, off = 0;
    const float ratio_v = 0.75f;
    AmpBuf dy = mkbuf(AMP_DT_FLOAT, 1, d4, F32(1, 2, -3, 0.5f)), mask = mkbuf(AMP_DT_BOOL, 1, d4, keep);
    AmpBuf ratio = mkbuf(AMP_DT_FLOAT, 0, NULL, &ratio_v), tr = mkbuf(AMP_DT_BOOL, 0, NULL, &on);
    AmpBuf no = mkbuf(AMP_DT_BOOL, 0, NULL, &off);
    const AmpBuf *in[4] = {&dy, &mask, &ratio, &tr};
    cr_assert_eq(run_op(n, 1, 4, in, 1), AMP_OK, "%s", st.msg);
    expect_f32(&outs.b[0], 4, F32(4, 0, -12, 2));
    const AmpBuf *in2[2] = {&dy, &mask}; /* ratio 0.5 */
    cr_assert_eq(run_op(n, 1, 2, in2, 1), AMP_OK, "%s", st.msg);
    expect_f32(&outs.b[0], 4, F32(2, 0, -6, 1));
    const AmpBuf *in3[4] = {&dy, &mask, &ratio, &no}; /* not training: dY */
    cr_assert_eq(run_op(n, 1, 4, in3, 1), AMP_OK, "%s", st.msg);
    expect_f32(&outs.b[0], 4, F32(1, 2, -3, 0.5f));
}

/* com.microsoft BiasGeluGrad_dX (dY, X, B) = dY * Gelu'(X + B), Gelu'(z) = Phi(z) + z phi(z):
 * checked against that formula in double, B broadcast over the last axis. */
Test(shape, bias_gelu_grad_is_dy_times_the_derivative) {
    AmpNode *n = amp_node_new(model->graph, "com.microsoft", "BiasGeluGrad_dX", "bg", 5, 8);
    cr_assert_neq(n->op, AMP_OP_UNKNOWN);
    const int64_t d23[2] = {2, 3}, d3[1] = {3};
    const float dyv[6] = {1, -2, 0.5f, 3, 1, -1}, xv[6] = {0, 1, -1, 2.5f, -3, 0.25f}, bv[3] = {0.5f, -0.5f, 0};
    AmpBuf dy = mkbuf(AMP_DT_FLOAT, 2, d23, dyv), x = mkbuf(AMP_DT_FLOAT, 2, d23, xv), b = mkbuf(AMP_DT_FLOAT, 1, d3, bv);
    const AmpBuf *in[3] = {&dy, &x, &b};
    cr_assert_eq(run_op(n, 1, 3, in, 1), AMP_OK, "%s", st.msg);
    const float *got = outs.b[0].data;
    for (int i = 0; i < 6; i++) {
        double z = (double)xv[i] + bv[i % 3];
        double d = 0.5 * (1 + erf(z / sqrt(2.0))) + z * exp(-z * z / 2) / sqrt(2 * 3.14159265358979323846);
        cr_assert_float_eq(got[i], dyv[i] * d, 1e-5, "element %d: %g, want %g", i, got[i], dyv[i] * d);
    }
    const int64_t d2[1] = {2};
    AmpBuf bad = mkbuf(AMP_DT_FLOAT, 1, d2, bv); /* B over the wrong axis */
    const AmpBuf *in2[3] = {&dy, &x, &bad};
    cr_assert_eq(run_op(n, 1, 3, in2, 1), AMP_ERR_INPUT);
}

/* com.microsoft ConcatTraining: Concat, and each input's length along the axis. */
Test(shape, concat_training_gives_the_lengths) {
    AmpNode *n = amp_node_new(model->graph, "com.microsoft", "ConcatTraining", "ct", 5, 8);
    cr_assert_neq(n->op, AMP_OP_UNKNOWN);
    attr_int(n, "axis", -1);
    const int64_t d21[2] = {2, 1}, d22[2] = {2, 2};
    AmpBuf a = mkbuf(AMP_DT_FLOAT, 2, d21, F32(1, 2)), b = mkbuf(AMP_DT_FLOAT, 2, d22, F32(3, 4, 5, 6));
    const AmpBuf *in[2] = {&a, &b};
    cr_assert_eq(run_op(n, 1, 2, in, 2), AMP_OK, "%s", st.msg);
    expect_f32(&outs.b[0], 6, F32(1, 3, 4, 2, 5, 6));
    expect_i64(&outs.b[1], 2, (const int64_t[]){1, 2});
}
