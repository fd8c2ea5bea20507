/* Hostile shapes for the CPU kernels (issue 26, points 6 and 7): a tensor with no
 * element but a huge other dimension ([2^40, 0], [0, 2^40]) costs O(1), never a loop
 * over its 2^40 empty rows (each test has a 2-second timeout, so a hang fails it); Trilu
 * with k at INT64_MAX / INT64_MIN; Concat and Pad whose output dims overflow int64.
 * (Point 9, ConvTranspose's output_shape, is in test_conv.c.) An empty tensor's data is
 * a pointer to nothing readable (`nothing`: a kernel that loops reads no element of it)
 * or NULL, as a zero-byte value may have. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/kernels/kernel_test_util.h"
#include "kernels/cpu/kernels.h"

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

TestSuite(hostile, .init = setup, .fini = teardown, .timeout = 2);

#define BIG (INT64_C(1) << 40)

static const double nothing[1];

static AmpNode *mknode(const char *op) {
    AmpNode *n = amp_node_new(model->graph, "", op, "n", 5, 8);
    cr_assert_not_null(n);
    cr_assert_neq(n->op, AMP_OP_UNKNOWN, "%s is not in the op table", op);
    return n;
}

static AmpCode run_op(AmpNode *n, int64_t opset, int n_in, const AmpBuf *const *in, int n_out) {
    outs_free(&outs);
    AmpCode rc = kt_run(n, opset, n_in, in, n_out, &outs, &st);
    if (rc) cr_assert_eq(st.code, rc, "status code differs from the returned code");
    return rc;
}

/* Calls the node's kernel alone, without the shape function (which checks the same dims
 * first) and with no output placed: the kernel's own checks must fail first. */
static AmpCode kernel_only(AmpNode *n, int64_t opset, int n_in, const AmpBuf *const *in) {
    const AmpNode *c = kt_call_node(n, n_in, in, 1);
    void *attrs = NULL;
    amp_status_clear(&st);
    AmpKernelPrepareFn prep = amp_cpu_kernel_prepare(c->op);
    cr_assert_eq(prep ? prep(c, opset, &attrs, &st) : AMP_OK, AMP_OK, "%s", st.msg);
    AmpBuf out[1];
    memset(out, 0, sizeof out);
    AmpKernelCtx k = {.node = c, .opset = opset, .n_in = n_in, .in = in, .n_out = 1, .out = out, .attrs = attrs,
                      .alloc = test_alloc, .alloc_ctx = &outs, .st = &st};
    AmpCode rc = amp_cpu_kernel(c->op)(&k);
    free(attrs);
    return rc;
}

/* Runs the node's shape function (ir/shape.h) alone on the inputs' shapes. */
static AmpCode shape_only(AmpNode *n, int64_t opset, int n_in, const AmpBuf *const *in) {
    const AmpNode *c = kt_call_node(n, n_in, in, 1);
    KtEnv env = {c, n_in, in};
    AmpShapeEnv se = {.shape_of = kt_env_shape, .ints_of = kt_env_ints, .doubles_of = kt_env_doubles, .user = &env};
    AmpBuf shapes[KT_MAX_OUT];
    bool known[KT_MAX_OUT];
    amp_status_clear(&st);
    return amp_shape_node(c, opset, &se, shapes, known, &st);
}

/* Runs op on the inputs and expects success with output 0 of shape (rank, dims). */
static void expect_empty_ok(AmpNode *n, int64_t opset, int n_in, const AmpBuf *const *in, int n_out, int rank,
                            const int64_t *dims) {
    AmpCode rc = run_op(n, opset, n_in, in, n_out);
    cr_assert_eq(rc, AMP_OK, "%s: %s", n->op_type, st.msg);
    expect_shape(&outs.b[0], rank, dims);
    cr_assert_eq(outs.b[0].nelem, 0);
}

/* ---- point 6: zero elements, a huge other dim ------------------------------------ */

static void softmax_like(const char *op) {
    AmpBuf x = mkbuf(AMP_DT_FLOAT, 2, I64(BIG, 0), nothing);
    expect_empty_ok(mknode(op), 13, 1, (const AmpBuf *[]){&x}, 1, 2, I64(BIG, 0));
    /* along axis 0 of [0, 2^40]: one outer row, 2^40 inner columns of length 0 */
    AmpBuf x2 = mkbuf(AMP_DT_FLOAT, 2, I64(0, BIG), NULL);
    AmpNode *n = mknode(op);
    attr_int(n, "axis", 0);
    expect_empty_ok(n, 13, 1, (const AmpBuf *[]){&x2}, 1, 2, I64(0, BIG));
    /* the opset < 13 2-D coercion */
    expect_empty_ok(mknode(op), 11, 1, (const AmpBuf *[]){&x}, 1, 2, I64(BIG, 0));
}

Test(hostile, softmax_empty_huge) {
    softmax_like("Softmax");
}

Test(hostile, log_softmax_empty_huge) {
    softmax_like("LogSoftmax");
}

Test(hostile, lp_normalization_empty_huge) {
    AmpBuf x = mkbuf(AMP_DT_FLOAT, 2, I64(BIG, 0), nothing);
    expect_empty_ok(mknode("LpNormalization"), 1, 1, (const AmpBuf *[]){&x}, 1, 2, I64(BIG, 0));
    AmpBuf x2 = mkbuf(AMP_DT_FLOAT, 2, I64(0, BIG), NULL);
    AmpNode *n = mknode("LpNormalization");
    attr_int(n, "axis", 0);
    expect_empty_ok(n, 1, 1, (const AmpBuf *[]){&x2}, 1, 2, I64(0, BIG));
}

Test(hostile, layer_normalization_empty_huge) {
    AmpBuf x = mkbuf(AMP_DT_FLOAT, 2, I64(BIG, 0), nothing);
    AmpBuf sc = mkbuf(AMP_DT_FLOAT, 1, I64(0), nothing);
    expect_empty_ok(mknode("LayerNormalization"), 17, 3, (const AmpBuf *[]){&x, &sc, &sc}, 1, 2, I64(BIG, 0));
}

Test(hostile, group_and_instance_normalization_empty_huge) {
    static const float one[2] = {1, 1}, zero[2] = {0, 0};
    AmpBuf x = mkbuf(AMP_DT_FLOAT, 3, I64(BIG, 2, 0), nothing);
    AmpBuf sc = mkbuf(AMP_DT_FLOAT, 1, I64(2), one), b = mkbuf(AMP_DT_FLOAT, 1, I64(2), zero);
    AmpNode *n = mknode("GroupNormalization");
    attr_int(n, "num_groups", 2);
    expect_empty_ok(n, 21, 3, (const AmpBuf *[]){&x, &sc, &b}, 1, 3, I64(BIG, 2, 0));
    expect_empty_ok(mknode("InstanceNormalization"), 6, 3, (const AmpBuf *[]){&x, &sc, &b}, 1, 3, I64(BIG, 2, 0));
}

Test(hostile, topk_empty_huge) {
    static const int64_t k0[1] = {0};
    AmpBuf x = mkbuf(AMP_DT_FLOAT, 2, I64(BIG, 0), nothing);
    AmpBuf kb = mkbuf(AMP_DT_INT64, 1, I64(1), k0);
    expect_empty_ok(mknode("TopK"), 11, 2, (const AmpBuf *[]){&x, &kb}, 2, 2, I64(BIG, 0));
    expect_shape(&outs.b[1], 2, I64(BIG, 0));
}

Test(hostile, concat_empty_huge) {
    AmpBuf x = mkbuf(AMP_DT_FLOAT, 2, I64(BIG, 0), nothing);
    AmpNode *n = mknode("Concat");
    attr_int(n, "axis", 1);
    expect_empty_ok(n, 13, 3, (const AmpBuf *[]){&x, &x, &x}, 1, 2, I64(BIG, 0));
}

Test(hostile, cumsum_empty_huge) {
    static const int64_t ax1[1] = {1}, ax0[1] = {0};
    AmpBuf x = mkbuf(AMP_DT_FLOAT, 2, I64(BIG, 0), nothing);
    AmpBuf a = mkbuf(AMP_DT_INT64, 0, NULL, ax1);
    expect_empty_ok(mknode("CumSum"), 14, 2, (const AmpBuf *[]){&x, &a}, 1, 2, I64(BIG, 0));
    AmpBuf xi = mkbuf(AMP_DT_INT32, 2, I64(0, BIG), NULL);
    AmpBuf a0 = mkbuf(AMP_DT_INT64, 0, NULL, ax0);
    expect_empty_ok(mknode("CumSum"), 14, 2, (const AmpBuf *[]){&xi, &a0}, 1, 2, I64(0, BIG));
}

Test(hostile, gather_empty_huge) {
    static const int64_t i0[1] = {0};
    AmpBuf x = mkbuf(AMP_DT_FLOAT, 3, I64(BIG, 2, 0), nothing);
    AmpBuf idx = mkbuf(AMP_DT_INT64, 1, I64(1), i0);
    AmpNode *n = mknode("Gather");
    attr_int(n, "axis", 1);
    expect_empty_ok(n, 13, 2, (const AmpBuf *[]){&x, &idx}, 1, 3, I64(BIG, 1, 0));
    /* the indices are still checked: 2 is outside an axis of 2 */
    static const int64_t i2[1] = {2};
    AmpBuf bad = mkbuf(AMP_DT_INT64, 1, I64(1), i2);
    AmpNode *n2 = mknode("Gather");
    attr_int(n2, "axis", 1);
    cr_assert_eq(run_op(n2, 13, 2, (const AmpBuf *[]){&x, &bad}, 1), AMP_ERR_INPUT);
}

Test(hostile, batch_normalization_empty_huge) {
    static const float one[2] = {1, 1};
    AmpBuf s = mkbuf(AMP_DT_FLOAT, 1, I64(2), one);
    AmpBuf x0 = mkbuf(AMP_DT_FLOAT, 3, I64(BIG, 2, 0), nothing);
    expect_empty_ok(mknode("BatchNormalization"), 15, 5, (const AmpBuf *[]){&x0, &s, &s, &s, &s}, 1, 3,
                    I64(BIG, 2, 0));
    /* data NULL: an empty X needs none (its float view opened, not converted) */
    AmpBuf x = mkbuf(AMP_DT_FLOAT, 3, I64(BIG, 2, 0), NULL);
    expect_empty_ok(mknode("BatchNormalization"), 15, 5, (const AmpBuf *[]){&x, &s, &s, &s, &s}, 1, 3,
                    I64(BIG, 2, 0));
    AmpBuf xh = mkbuf(AMP_DT_FLOAT16, 3, I64(BIG, 2, 0), NULL);
    expect_empty_ok(mknode("LpNormalization"), 1, 1, (const AmpBuf *[]){&xh}, 1, 3, I64(BIG, 2, 0));
}

Test(hostile, gather_nd_empty_huge) {
    /* 2^40 batches of no index tuple */
    AmpBuf x = mkbuf(AMP_DT_FLOAT, 3, I64(BIG, 2, 0), nothing);
    AmpBuf idx = mkbuf(AMP_DT_INT64, 3, I64(BIG, 0, 1), nothing);
    AmpNode *n = mknode("GatherND");
    attr_int(n, "batch_dims", 1);
    expect_empty_ok(n, 13, 2, (const AmpBuf *[]){&x, &idx}, 1, 3, I64(BIG, 0, 0));
}

/* ---- point 7: Trilu's k at the int64 limits, Concat and Pad dims past int64 -------- */

/* Trilu of a 2x3 matrix 1..6 with k = kv: past either corner every row keeps or drops
 * all (i + k must not overflow into the other side). */
static void trilu_expect(bool upper, int64_t kv, bool all_kept) {
    static const float x6[6] = {1, 2, 3, 4, 5, 6};
    const int64_t kd[1] = {kv};
    AmpBuf x = mkbuf(AMP_DT_FLOAT, 2, I64(2, 3), x6), kb = mkbuf(AMP_DT_INT64, 0, NULL, kd);
    AmpNode *n = mknode("Trilu");
    attr_int(n, "upper", upper);
    cr_assert_eq(run_op(n, 14, 2, (const AmpBuf *[]){&x, &kb}, 1), AMP_OK, "%s", st.msg);
    for (int i = 0; i < 6; i++)
        cr_assert_eq(((float *)outs.b[0].data)[i], all_kept ? x6[i] : 0.0f, "upper %d, k %lld: element %d is %g",
                     upper, (long long)kv, i, ((float *)outs.b[0].data)[i]);
}

Test(hostile, trilu_k_at_int64_limits) {
    trilu_expect(true, INT64_MAX, false);
    trilu_expect(true, INT64_MAX - 1, false);
    trilu_expect(true, INT64_MIN, true);
    trilu_expect(true, INT64_MIN + 1, true);
    trilu_expect(false, INT64_MAX, true);
    trilu_expect(false, INT64_MIN, false);
    trilu_expect(false, INT64_MIN + 1, false);
}

Test(hostile, concat_axis_sum_past_int64) {
    /* 4 * 2^62 + 3 wraps to 3 in 64 bits: an output [0, 3] would be a wrong answer */
    AmpBuf big = mkbuf(AMP_DT_FLOAT, 2, I64(0, INT64_C(1) << 62), NULL);
    AmpBuf three = mkbuf(AMP_DT_FLOAT, 2, I64(0, 3), NULL);
    AmpNode *n = mknode("Concat");
    attr_int(n, "axis", 1);
    cr_assert_eq(run_op(n, 13, 5, (const AmpBuf *[]){&big, &big, &big, &big, &three}, 1), AMP_ERR_INPUT);
    cr_assert(strstr(st.msg, "overflow"), "%s", st.msg);
    /* INT64_MAX + 1 */
    AmpBuf max = mkbuf(AMP_DT_FLOAT, 2, I64(0, INT64_MAX), NULL);
    AmpBuf one = mkbuf(AMP_DT_FLOAT, 2, I64(0, 1), NULL);
    AmpNode *n2 = mknode("Concat");
    attr_int(n2, "axis", -1);
    cr_assert_eq(run_op(n2, 13, 2, (const AmpBuf *[]){&max, &one}, 1), AMP_ERR_INPUT);
    cr_assert(strstr(st.msg, "overflow"), "%s", st.msg);
    /* the shape function and the kernel check each */
    cr_assert_eq(shape_only(n, 13, 5, (const AmpBuf *[]){&big, &big, &big, &big, &three}), AMP_ERR_INPUT);
    cr_assert(strstr(st.msg, "overflow"), "%s", st.msg);
    cr_assert_eq(kernel_only(n, 13, 5, (const AmpBuf *[]){&big, &big, &big, &big, &three}), AMP_ERR_INPUT);
    cr_assert(strstr(st.msg, "overflow"), "%s", st.msg);
    cr_assert_eq(kernel_only(n2, 13, 2, (const AmpBuf *[]){&max, &one}), AMP_ERR_INPUT);
    cr_assert(strstr(st.msg, "overflow"), "%s", st.msg);
}

Test(hostile, pad_dims_past_int64) {
    /* INT64_MAX - 1 + 2^61: past int64, an error that says so (not a crop) */
    const int64_t pads[4] = {0, 0, 0, INT64_C(1) << 61};
    AmpBuf x = mkbuf(AMP_DT_FLOAT, 2, I64(0, INT64_MAX - 1), NULL);
    AmpBuf p = mkbuf(AMP_DT_INT64, 1, I64(4), pads);
    cr_assert_eq(run_op(mknode("Pad"), 13, 2, (const AmpBuf *[]){&x, &p}, 1), AMP_ERR_INPUT);
    cr_assert(strstr(st.msg, "overflow"), "%s", st.msg);
    cr_assert_eq(shape_only(mknode("Pad"), 13, 2, (const AmpBuf *[]){&x, &p}), AMP_ERR_INPUT);
    cr_assert(strstr(st.msg, "overflow"), "%s", st.msg);
    cr_assert_eq(kernel_only(mknode("Pad"), 13, 2, (const AmpBuf *[]){&x, &p}), AMP_ERR_INPUT);
    cr_assert(strstr(st.msg, "overflow"), "%s", st.msg);
    /* both sides: 2^62 - 1 + 2^61 + 2^61 = 2^63 - 1 fits exactly */
    const int64_t fit[4] = {0, INT64_C(1) << 61, 0, INT64_C(1) << 61};
    AmpBuf x2 = mkbuf(AMP_DT_FLOAT, 2, I64(0, (INT64_C(1) << 62) - 1), NULL);
    AmpBuf p2 = mkbuf(AMP_DT_INT64, 1, I64(4), fit);
    cr_assert_eq(run_op(mknode("Pad"), 13, 2, (const AmpBuf *[]){&x2, &p2}, 1), AMP_OK, "%s", st.msg);
    expect_shape(&outs.b[0], 2, I64(0, INT64_MAX));
}
