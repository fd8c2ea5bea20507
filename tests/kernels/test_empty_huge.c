/* Hostile shapes for the CPU kernels (issue 26, points 6, 7 and 9): a tensor with no
 * element but a huge other dimension ([2^40, 0], [0, 2^40]) costs O(1), never a loop
 * over its 2^40 empty rows (each test has a 2-second timeout, so a hang fails it); Trilu
 * with k at INT64_MAX / INT64_MIN; Concat and Pad whose output dims overflow int64; and
 * ConvTranspose with output_shape and auto_pad NOTSET. An empty tensor's data is a
 * pointer to nothing readable (`nothing`: a kernel that loops reads no element of it)
 * or NULL, as a zero-byte value may have. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_test_util.h"
#include "kernels.h"

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
