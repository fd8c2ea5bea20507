/* Unit tests of the reduce, norm and train kernel families (reduce.c, softmax.c, loss.c,
 * norm.c, optim.c) for what the ONNX conformance data covers thinly: 16-bit storage,
 * large values, edge shapes, error codes, and multi-step optimizers and losses checked
 * against direct computations written here. Kernels are called through amp_cpu_kernel. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/half.h"
#include "tests/kernels/kernel_test_util.h"
#include "kernels/cpu/kernels.h"

/* ---- harness --------------------------------------------------------------------- */

typedef struct Node {
    AmpModel *m;
    AmpNode *n;
} Node;

/* A node of `op` in a fresh model, outputs y0..y{n_out-1}. */
static Node mk(const char *domain, const char *op, int n_in, int n_out) {
    Node t;
    t.m = amp_model_new();
    cr_assert(t.m);
    t.n = amp_node_new(t.m->graph, domain, op, "t", n_in, n_out);
    cr_assert(t.n);
    for (int i = 0; i < n_out; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "y%d", i);
        amp_node_set_output(t.n, i, amp_graph_value(t.m->graph, nm));
    }
    return t;
}

static AmpCode run(Node *t, int64_t opset, const AmpBuf **in, int n_in, Outs *o, bool training, AmpStatus *st) {
    uint64_t rng = 1;
    return kt_call(t->n, opset, n_in, in, t->n->n_outputs, test_alloc, o, &rng, training, st);
}

static void near(double got, double want, double tol, const char *what, uint64_t i) {
    cr_expect(fabs(got - want) <= tol * (1.0 + fabs(want)), "%s[%llu]: got %.9g, want %.9g", what,
              (unsigned long long)i, got, want);
}

/* ---- Softmax --------------------------------------------------------------------- */

Test(reduce, softmax_large_values_do_not_overflow) {
    float x[4] = {1000.f, 1001.f, 1002.f, -1000.f};
    int64_t d[1] = {4};
    AmpBuf bx = mkbuf(AMP_DT_FLOAT, 1, d, x);
    const AmpBuf *in[1] = {&bx};
    AmpStatus st;
    Outs o = {0};
    double e[4], s = 0;
    for (int i = 0; i < 4; i++) s += e[i] = exp((double)x[i] - 1002.0);
    Node t = mk("", "Softmax", 1, 1);
    cr_assert_eq(run(&t, 13, in, 1, &o, false, &st), AMP_OK, "%s", st.msg);
    for (int i = 0; i < 4; i++) {
        cr_expect(isfinite(getf(&o.b[0], i)));
        near(getf(&o.b[0], i), e[i] / s, 1e-6, "softmax", i);
    }
    amp_model_free(t.m);
    Node l = mk("", "LogSoftmax", 1, 1);
    cr_assert_eq(run(&l, 13, in, 1, &o, false, &st), AMP_OK, "%s", st.msg);
    for (int i = 0; i < 4; i++) near(getf(&o.b[0], i), (double)x[i] - 1002.0 - log(s), 1e-6, "logsoftmax", i);
    amp_model_free(l.m);
    outs_free(&o);
}

/* 16-bit storage: computed in (at least) fp32 and rounded once, so the result is the
 * exact rounding of the fp32 result. */
Test(reduce, softmax_16bit_storage_rounds_once) {
    enum { N = 16 };
    uint16_t h[N], b[N];
    double xf[N], xb[N], sf = 0, sb = 0, mf = -INFINITY, mb = -INFINITY;
    for (int i = 0; i < N; i++) {
        h[i] = amp_f32_to_f16(0.37f * (float)i - 3.f);
        b[i] = amp_f32_to_bf16(0.37f * (float)i - 3.f);
        xf[i] = amp_f16_to_f32(h[i]), xb[i] = amp_bf16_to_f32(b[i]);
        mf = fmax(mf, xf[i]), mb = fmax(mb, xb[i]);
    }
    for (int i = 0; i < N; i++) sf += exp(xf[i] - mf), sb += exp(xb[i] - mb);
    int64_t d[1] = {N};
    AmpBuf bh = mkbuf(AMP_DT_FLOAT16, 1, d, h), bb = mkbuf(AMP_DT_BFLOAT16, 1, d, b);
    const AmpBuf *in1[1] = {&bh}, *in2[1] = {&bb};
    AmpStatus st;
    Outs o = {0};
    Node t = mk("", "Softmax", 1, 1);
    cr_assert_eq(run(&t, 13, in1, 1, &o, false, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(o.b[0].dtype, AMP_DT_FLOAT16);
    for (int i = 0; i < N; i++)
        cr_expect_eq(((uint16_t *)o.b[0].data)[i], amp_f32_to_f16((float)(exp(xf[i] - mf) / sf)), "f16 element %d", i);
    cr_assert_eq(run(&t, 13, in2, 1, &o, false, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(o.b[0].dtype, AMP_DT_BFLOAT16);
    for (int i = 0; i < N; i++)
        cr_expect_eq(((uint16_t *)o.b[0].data)[i], amp_f32_to_bf16((float)(exp(xb[i] - mb) / sb)), "bf16 element %d", i);
    amp_model_free(t.m);
    outs_free(&o);
}

/* Opset < 13 flattens to 2-D at axis; opset 13 normalises along the axis alone. */
Test(reduce, softmax_axis_semantics_by_opset) {
    float x[6] = {1, 2, 3, 4, 5, 6};
    int64_t d[2] = {2, 3};
    AmpBuf bx = mkbuf(AMP_DT_FLOAT, 2, d, x);
    const AmpBuf *in[1] = {&bx};
    AmpStatus st;
    Outs o = {0};
    Node t = mk("", "Softmax", 1, 1);
    attr_int(t.n, "axis", 0);
    cr_assert_eq(run(&t, 11, in, 1, &o, false, &st), AMP_OK, "%s", st.msg);
    double s = 0;
    for (int i = 0; i < 6; i++) s += getf(&o.b[0], i);
    near(s, 1.0, 1e-6, "opset 11 total", 0);
    cr_assert_eq(run(&t, 13, in, 1, &o, false, &st), AMP_OK, "%s", st.msg);
    for (int c = 0; c < 3; c++) near(getf(&o.b[0], c) + getf(&o.b[0], 3 + c), 1.0, 1e-6, "opset 13 column", c);
    amp_model_free(t.m);
    outs_free(&o);
}

Test(reduce, softmax_errors) {
    int32_t xi[2] = {1, 2};
    int64_t d[1] = {2};
    AmpBuf bx = mkbuf(AMP_DT_INT32, 1, d, xi);
    const AmpBuf *in[1] = {&bx};
    AmpStatus st;
    Outs o = {0};
    Node t = mk("", "Softmax", 1, 1);
    cr_expect_eq(run(&t, 13, in, 1, &o, false, &st), AMP_ERR_UNSUPPORTED);
    float xf[2] = {1, 2};
    AmpBuf bf = mkbuf(AMP_DT_FLOAT, 1, d, xf);
    in[0] = &bf;
    attr_int(t.n, "axis", 1);
    cr_expect_eq(run(&t, 13, in, 1, &o, false, &st), AMP_ERR_INPUT);
    cr_expect(strstr(st.msg, "Softmax"), "message names the op: %s", st.msg);
    amp_model_free(t.m);
    outs_free(&o);
}

/* Hardmax: 1 at the first max of each row, rows as Softmax takes them (opset < 13: the
 * 2-D coercion at axis, default 1; 13+: the one axis, default -1). */
static void hardmax_expect(int64_t opset, int64_t axis, const float *x, int dtype, const float *want) {
    int64_t d[2] = {2, 3};
    uint16_t h[6];
    for (int i = 0; i < 6; i++) h[i] = amp_f32_to_f16(x[i]);
    AmpBuf bx = mkbuf(dtype, 2, d, dtype == AMP_DT_FLOAT16 ? (const void *)h : (const void *)x);
    const AmpBuf *in[1] = {&bx};
    AmpStatus st;
    Outs o = {0};
    Node t = mk("", "Hardmax", 1, 1);
    if (axis != INT64_MIN) attr_int(t.n, "axis", axis);
    cr_assert_eq(run(&t, opset, in, 1, &o, false, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(o.b[0].dtype, dtype);
    for (int i = 0; i < 6; i++)
        cr_expect_eq(getf(&o.b[0], (uint64_t)i), want[i], "opset %lld axis %lld element %d: %g", (long long)opset,
                     (long long)axis, i, getf(&o.b[0], (uint64_t)i));
    amp_model_free(t.m);
    outs_free(&o);
}

Test(reduce, hardmax_rows_by_opset_ties_and_nan) {
    const float x[6] = {1, 5, 3, 4, 2, 6};
    /* default axis: 1 (the rows of the 2-D coercion), -1 (the rows): the same here */
    hardmax_expect(11, INT64_MIN, x, AMP_DT_FLOAT, (const float[]){0, 1, 0, 0, 0, 1});
    hardmax_expect(13, INT64_MIN, x, AMP_DT_FLOAT, (const float[]){0, 1, 0, 0, 0, 1});
    /* axis 0: one row of all 6 before opset 13, each column from 13 */
    hardmax_expect(11, 0, x, AMP_DT_FLOAT, (const float[]){0, 0, 0, 0, 0, 1});
    hardmax_expect(13, 0, x, AMP_DT_FLOAT, (const float[]){0, 1, 0, 1, 0, 1});
    hardmax_expect(13, 0, x, AMP_DT_FLOAT16, (const float[]){0, 1, 0, 1, 0, 1});
    /* ties: the first max; a NaN: the first NaN (numpy's argmax, ONNX's reference) */
    const float tie[6] = {3, 1, 3, 2, NAN, NAN};
    hardmax_expect(13, -1, tie, AMP_DT_FLOAT, (const float[]){1, 0, 0, 0, 1, 0});
    hardmax_expect(13, -1, tie, AMP_DT_FLOAT16, (const float[]){1, 0, 0, 0, 1, 0});
}

/* ---- Reduce* ---------------------------------------------------------------------- */

/* A bf16 running sum stalls at 256 (256 + 1 rounds back to 256); the kernel's doesn't. */
Test(reduce, reduce_sum_bf16_accumulates_wide) {
    enum { N = 4096 };
    uint16_t *x = malloc(N * sizeof *x);
    for (int i = 0; i < N; i++) x[i] = amp_f32_to_bf16(1.0f);
    int64_t d[1] = {N};
    AmpBuf bx = mkbuf(AMP_DT_BFLOAT16, 1, d, x);
    const AmpBuf *in[1] = {&bx};
    AmpStatus st;
    Outs o = {0};
    Node t = mk("", "ReduceSum", 1, 1);
    attr_int(t.n, "keepdims", 0);
    cr_assert_eq(run(&t, 13, in, 1, &o, false, &st), AMP_OK, "%s", st.msg);
    cr_expect_eq(o.b[0].rank, 0);
    cr_expect_eq(getf(&o.b[0], 0), (double)N);
    amp_model_free(t.m);
    Node mean = mk("", "ReduceMean", 1, 1);
    cr_assert_eq(run(&mean, 13, in, 1, &o, false, &st), AMP_OK, "%s", st.msg);
    cr_expect_eq(o.b[0].rank, 1);
    cr_expect_eq(getf(&o.b[0], 0), 1.0);
    amp_model_free(mean.m);
    outs_free(&o);
    free(x);
}

Test(reduce, reduce_errors) {
    float x[6] = {0};
    int64_t d[2] = {2, 3};
    AmpBuf bx = mkbuf(AMP_DT_FLOAT, 2, d, x);
    const AmpBuf *in[2] = {&bx, NULL};
    AmpStatus st;
    Outs o = {0};
    static int64_t bad[1] = {2}, dup[2] = {0, -2};
    Node t = mk("", "ReduceMean", 1, 1);
    attr_ints(t.n, "axes", 1, bad);
    cr_expect_eq(run(&t, 13, in, 1, &o, false, &st), AMP_ERR_INPUT);
    amp_model_free(t.m);
    t = mk("", "ReduceMean", 1, 1);
    attr_ints(t.n, "axes", 2, dup);
    cr_expect_eq(run(&t, 13, in, 1, &o, false, &st), AMP_ERR_INPUT);
    amp_model_free(t.m);
    /* an axes input of the wrong type */
    float fa[1] = {0};
    int64_t d1[1] = {1};
    AmpBuf ba = mkbuf(AMP_DT_FLOAT, 1, d1, fa);
    in[1] = &ba;
    t = mk("", "ReduceSum", 2, 1);
    cr_expect_eq(run(&t, 13, in, 2, &o, false, &st), AMP_ERR_INPUT);
    amp_model_free(t.m);
    /* integer data: fine for ReduceSum, unsupported for ReduceL2 / ReduceLogSumExp */
    int64_t xi[6] = {1, 2, 3, 4, 5, 6};
    AmpBuf bi = mkbuf(AMP_DT_INT64, 2, d, xi);
    in[0] = &bi;
    t = mk("", "ReduceL2", 1, 1);
    cr_expect_eq(run(&t, 13, in, 1, &o, false, &st), AMP_ERR_UNSUPPORTED);
    amp_model_free(t.m);
    t = mk("", "ReduceSum", 1, 1);
    cr_expect_eq(run(&t, 13, in, 1, &o, false, &st), AMP_OK, "%s", st.msg);
    cr_expect_eq(o.b[0].dtype, AMP_DT_INT64);
    cr_expect_eq(((int64_t *)o.b[0].data)[0], 21);
    amp_model_free(t.m);
    outs_free(&o);
}

Test(reduce, reduce_empty_sets_and_noop) {
    float x[6] = {1, -2, 3, -4, 5, -6};
    int64_t d0[2] = {2, 0}, d[2] = {2, 3}, dz[1] = {0};
    AmpBuf be = mkbuf(AMP_DT_FLOAT, 2, d0, x), bx = mkbuf(AMP_DT_FLOAT, 2, d, x);
    int64_t none[1];
    AmpBuf bz = mkbuf(AMP_DT_INT64, 1, dz, none);
    AmpStatus st;
    Outs o = {0};
    static int64_t ax1[1] = {1};
    /* max over an empty axis: -inf; sum: 0; mean: NaN */
    const AmpBuf *in[2] = {&be, NULL};
    Node t = mk("", "ReduceMax", 1, 1);
    attr_ints(t.n, "axes", 1, ax1);
    attr_int(t.n, "keepdims", 0);
    cr_assert_eq(run(&t, 13, in, 1, &o, false, &st), AMP_OK, "%s", st.msg);
    cr_expect_eq(o.b[0].rank, 1);
    cr_expect_eq(o.b[0].dims[0], 2);
    cr_expect(isinf(getf(&o.b[0], 0)) && getf(&o.b[0], 0) < 0);
    amp_model_free(t.m);
    t = mk("", "ReduceMean", 1, 1);
    attr_ints(t.n, "axes", 1, ax1);
    cr_assert_eq(run(&t, 13, in, 1, &o, false, &st), AMP_OK, "%s", st.msg);
    cr_expect(isnan(getf(&o.b[0], 1)));
    amp_model_free(t.m);
    /* empty axes input + noop_with_empty_axes: ReduceSumSquare squares each element */
    in[0] = &bx, in[1] = &bz;
    t = mk("", "ReduceSumSquare", 2, 1);
    attr_int(t.n, "noop_with_empty_axes", 1);
    cr_assert_eq(run(&t, 18, in, 2, &o, false, &st), AMP_OK, "%s", st.msg);
    cr_expect_eq(o.b[0].nelem, 6);
    for (int i = 0; i < 6; i++) near(getf(&o.b[0], i), (double)x[i] * x[i], 0, "noop square", i);
    amp_model_free(t.m);
    /* empty axes input without noop: everything reduced */
    t = mk("", "ReduceSum", 2, 1);
    cr_assert_eq(run(&t, 13, in, 2, &o, false, &st), AMP_OK, "%s", st.msg);
    cr_expect_eq(o.b[0].nelem, 1);
    cr_expect_eq(o.b[0].rank, 2);
    near(getf(&o.b[0], 0), -3.0, 0, "sum all", 0);
    amp_model_free(t.m);
    outs_free(&o);
}

Test(reduce, reduce_log_sum_exp_large_values) {
    double x[3] = {1000.0, 1000.0, -INFINITY};
    int64_t d[1] = {3};
    AmpBuf bx = mkbuf(AMP_DT_DOUBLE, 1, d, x);
    const AmpBuf *in[1] = {&bx};
    AmpStatus st;
    Outs o = {0};
    Node t = mk("", "ReduceLogSumExp", 1, 1);
    cr_assert_eq(run(&t, 13, in, 1, &o, false, &st), AMP_OK, "%s", st.msg);
    near(getf(&o.b[0], 0), 1000.0 + log(2.0), 1e-12, "lse", 0);
    amp_model_free(t.m);
    outs_free(&o);
}

/* ---- ArgMax, TopK, CumSum ---------------------------------------------------------- */

Test(reduce, argmax_ties_and_nan) {
    float x[6] = {3, 1, 3, 2, NAN, 2};
    int64_t d[2] = {2, 3};
    AmpBuf bx = mkbuf(AMP_DT_FLOAT, 2, d, x);
    const AmpBuf *in[1] = {&bx};
    AmpStatus st;
    Outs o = {0};
    Node t = mk("", "ArgMax", 1, 1);
    attr_int(t.n, "axis", 1);
    cr_assert_eq(run(&t, 13, in, 1, &o, false, &st), AMP_OK, "%s", st.msg);
    int64_t *r = o.b[0].data;
    cr_expect_eq(r[0], 0);
    cr_expect_eq(r[1], 1, "NaN wins");
    amp_model_free(t.m);
    t = mk("", "ArgMax", 1, 1);
    attr_int(t.n, "axis", 1);
    attr_int(t.n, "select_last_index", 1);
    cr_assert_eq(run(&t, 13, in, 1, &o, false, &st), AMP_OK, "%s", st.msg);
    r = o.b[0].data;
    cr_expect_eq(r[0], 2);
    amp_model_free(t.m);
    t = mk("", "ArgMin", 1, 1);
    attr_int(t.n, "axis", 2);
    cr_expect_eq(run(&t, 13, in, 1, &o, false, &st), AMP_ERR_INPUT);
    amp_model_free(t.m);
    outs_free(&o);
}

Test(reduce, topk_ties_keep_lower_index) {
    float x[5] = {1, 3, 3, 0, 3};
    int64_t d[1] = {5}, kd[1] = {1}, kv[1] = {2};
    AmpBuf bx = mkbuf(AMP_DT_FLOAT, 1, d, x), bk = mkbuf(AMP_DT_INT64, 1, kd, kv);
    const AmpBuf *in[2] = {&bx, &bk};
    AmpStatus st;
    Outs o = {0};
    Node t = mk("", "TopK", 2, 2);
    cr_assert_eq(run(&t, 11, in, 2, &o, false, &st), AMP_OK, "%s", st.msg);
    int64_t *ix = o.b[1].data;
    cr_expect_eq(ix[0], 1);
    cr_expect_eq(ix[1], 2);
    kv[0] = 6;
    cr_expect_eq(run(&t, 11, in, 2, &o, false, &st), AMP_ERR_INPUT);
    kv[0] = -1;
    cr_expect_eq(run(&t, 11, in, 2, &o, false, &st), AMP_ERR_INPUT);
    amp_model_free(t.m);
    outs_free(&o);
}

Test(reduce, cumsum_int64_exclusive_reverse) {
    int64_t x[4] = {1, 2, 3, 4}, d[1] = {4}, ax[1] = {0}, want[4] = {9, 7, 4, 0};
    AmpBuf bx = mkbuf(AMP_DT_INT64, 1, d, x), ba = mkbuf(AMP_DT_INT64, 0, NULL, ax);
    const AmpBuf *in[2] = {&bx, &ba};
    AmpStatus st;
    Outs o = {0};
    Node t = mk("", "CumSum", 2, 1);
    attr_int(t.n, "exclusive", 1);
    attr_int(t.n, "reverse", 1);
    cr_assert_eq(run(&t, 14, in, 2, &o, false, &st), AMP_OK, "%s", st.msg);
    for (int i = 0; i < 4; i++) cr_expect_eq(((int64_t *)o.b[0].data)[i], want[i]);
    ax[0] = 1;
    cr_expect_eq(run(&t, 14, in, 2, &o, false, &st), AMP_ERR_INPUT);
    amp_model_free(t.m);
    outs_free(&o);
}

/* ---- losses ------------------------------------------------------------------------ */

enum { SN = 3, SC = 4, SD = 2 };

/* Direct SoftmaxCrossEntropyLoss over (N, C, D) with weights and ignore_index -1. */
static void sce_direct(const float *x, const int64_t *lab, const float *w, double *loss, double *logp, double *sum,
                       double *wsum) {
    *sum = *wsum = 0;
    for (int n = 0; n < SN; n++)
        for (int d = 0; d < SD; d++) {
            double m = -INFINITY, s = 0;
            for (int c = 0; c < SC; c++) m = fmax(m, x[(n * SC + c) * SD + d]);
            for (int c = 0; c < SC; c++) s += exp(x[(n * SC + c) * SD + d] - m);
            for (int c = 0; c < SC; c++) logp[(n * SC + c) * SD + d] = x[(n * SC + c) * SD + d] - m - log(s);
            int64_t l = lab[n * SD + d];
            loss[n * SD + d] = 0;
            if (l == -1) continue;
            loss[n * SD + d] = -w[l] * logp[(n * SC + l) * SD + d];
            *sum += loss[n * SD + d];
            *wsum += w[l];
        }
}

Test(reduce, sce_ignore_index_and_weights) {
    float x[SN * SC * SD], w[SC] = {0.5f, 1.0f, 2.0f, 0.25f};
    for (int i = 0; i < SN * SC * SD; i++) x[i] = (float)(3.0 * sin(1.3 * i));
    int64_t lab[SN * SD] = {0, -1, 3, 2, 1, -1};
    double loss[SN * SD], logp[SN * SC * SD], sum, wsum;
    sce_direct(x, lab, w, loss, logp, &sum, &wsum);
    int64_t dx[3] = {SN, SC, SD}, dl[2] = {SN, SD}, dw[1] = {SC};
    AmpBuf bx = mkbuf(AMP_DT_FLOAT, 3, dx, x), bl = mkbuf(AMP_DT_INT64, 2, dl, lab), bw = mkbuf(AMP_DT_FLOAT, 1, dw, w);
    const AmpBuf *in[3] = {&bx, &bl, &bw};
    AmpStatus st;
    Outs o = {0};
    const char *reds[3] = {"none", "sum", "mean"};
    for (int r = 0; r < 3; r++) {
        Node t = mk("", "SoftmaxCrossEntropyLoss", 3, 2);
        attr_str(t.n, "reduction", reds[r]);
        attr_int(t.n, "ignore_index", -1);
        cr_assert_eq(run(&t, 13, in, 3, &o, false, &st), AMP_OK, "%s", st.msg);
        if (r == 0) {
            cr_expect_eq(o.b[0].rank, 2);
            for (int i = 0; i < SN * SD; i++) near(getf(&o.b[0], i), loss[i], 1e-6, "loss none", i);
        } else {
            cr_expect_eq(o.b[0].rank, 0);
            near(getf(&o.b[0], 0), r == 1 ? sum : sum / wsum, 1e-6, reds[r], 0);
        }
        for (int i = 0; i < SN * SC * SD; i++) near(getf(&o.b[1], i), logp[i], 1e-6, "log_prob", i);
        amp_model_free(t.m);
    }
    /* NegativeLogLikelihoodLoss on the log-probabilities, int32 labels, no weights */
    float lpf[SN * SC * SD];
    int32_t lab32[SN * SD];
    for (int i = 0; i < SN * SC * SD; i++) lpf[i] = (float)logp[i];
    for (int i = 0; i < SN * SD; i++) lab32[i] = (int32_t)lab[i];
    AmpBuf blp = mkbuf(AMP_DT_FLOAT, 3, dx, lpf), bl32 = mkbuf(AMP_DT_INT32, 2, dl, lab32);
    const AmpBuf *in2[2] = {&blp, &bl32};
    Node t = mk("", "NegativeLogLikelihoodLoss", 2, 1);
    attr_int(t.n, "ignore_index", -1);
    cr_assert_eq(run(&t, 13, in2, 2, &o, false, &st), AMP_OK, "%s", st.msg);
    double s = 0;
    int cnt = 0;
    for (int i = 0; i < SN * SD; i++)
        if (lab[i] != -1) s += loss[i] / w[lab[i]], cnt++;
    near(getf(&o.b[0], 0), s / cnt, 1e-6, "nll mean", 0);
    amp_model_free(t.m);
    outs_free(&o);
}

Test(reduce, sce_label_out_of_range_is_input_error) {
    float x[8] = {0};
    int64_t lab[2] = {0, 4}, dx[2] = {2, 4}, dl[1] = {2};
    AmpBuf bx = mkbuf(AMP_DT_FLOAT, 2, dx, x), bl = mkbuf(AMP_DT_INT64, 1, dl, lab);
    const AmpBuf *in[2] = {&bx, &bl};
    AmpStatus st;
    Outs o = {0};
    Node t = mk("", "SoftmaxCrossEntropyLoss", 2, 1);
    cr_expect_eq(run(&t, 13, in, 2, &o, false, &st), AMP_ERR_INPUT);
    lab[1] = -3;
    cr_expect_eq(run(&t, 13, in, 2, &o, false, &st), AMP_ERR_INPUT);
    amp_model_free(t.m);
    /* an ignore_index outside [0, C) is fine */
    t = mk("", "SoftmaxCrossEntropyLoss", 2, 1);
    attr_int(t.n, "ignore_index", -3);
    cr_expect_eq(run(&t, 13, in, 2, &o, false, &st), AMP_OK, "%s", st.msg);
    near(getf(&o.b[0], 0), log(4.0), 1e-6, "uniform loss", 0);
    amp_model_free(t.m);
    /* bad reduction */
    t = mk("", "NegativeLogLikelihoodLoss", 2, 1);
    attr_str(t.n, "reduction", "avg");
    lab[1] = 1;
    cr_expect_eq(run(&t, 13, in, 2, &o, false, &st), AMP_ERR_INPUT);
    amp_model_free(t.m);
    outs_free(&o);
}

/* The gradient op against a central difference of the forward loss (mean, weights). */
Test(reduce, sce_grad_matches_finite_difference) {
    float x[SN * SC * SD], w[SC] = {0.5f, 1.0f, 2.0f, 0.25f};
    for (int i = 0; i < SN * SC * SD; i++) x[i] = (float)(2.0 * cos(0.7 * i));
    int64_t lab[SN * SD] = {1, 2, -1, 0, 3, 3};
    double loss[SN * SD], logp[SN * SC * SD], sum, wsum;
    sce_direct(x, lab, w, loss, logp, &sum, &wsum);
    float lpf[SN * SC * SD], dy[1] = {1.5f};
    for (int i = 0; i < SN * SC * SD; i++) lpf[i] = (float)logp[i];
    int64_t dx[3] = {SN, SC, SD}, dl[2] = {SN, SD}, dw[1] = {SC};
    AmpBuf bdy = mkbuf(AMP_DT_FLOAT, 0, NULL, dy), blp = mkbuf(AMP_DT_FLOAT, 3, dx, lpf);
    AmpBuf bl = mkbuf(AMP_DT_INT64, 2, dl, lab), bw = mkbuf(AMP_DT_FLOAT, 1, dw, w);
    const AmpBuf *in[4] = {&bdy, &blp, &bl, &bw};
    AmpStatus st;
    Outs o = {0};
    Node t = mk("com.microsoft", "SoftmaxCrossEntropyLossGrad", 4, 1);
    attr_int(t.n, "ignore_index", -1);
    cr_assert_eq(run(&t, 1, in, 4, &o, false, &st), AMP_OK, "%s", st.msg);
    for (int i = 0; i < SN * SC * SD; i++) {
        float xp[SN * SC * SD], xm[SN * SC * SD];
        memcpy(xp, x, sizeof x), memcpy(xm, x, sizeof x);
        xp[i] += 1e-2f, xm[i] -= 1e-2f;
        double lp_[SN * SC * SD], l_[SN * SD], sp, wp, sm, wm;
        sce_direct(xp, lab, w, l_, lp_, &sp, &wp);
        sce_direct(xm, lab, w, l_, lp_, &sm, &wm);
        double fd = dy[0] * (sp / wp - sm / wm) / ((double)xp[i] - (double)xm[i]);
        near(getf(&o.b[0], i), fd, 2e-3, "d_logits", i);
    }
    amp_model_free(t.m);
    outs_free(&o);
}

/* ---- optimizers -------------------------------------------------------------------- */

/* Adam over several steps (T = 0, 1, 2, 3: no bias correction at T = 0) for two
 * tensors, each step's outputs fed back, against the spec's pseudo code in double. */
Test(reduce, adam_several_steps_match_direct) {
    enum { N1 = 3, N2 = 2, STEPS = 4 };
    const double alpha = 0.9, beta = 0.999, eps = 1e-3, nc = 0.01, ncp = 0.001, lr = 0.1;
    float x1[N1] = {1.0f, -2.0f, 0.5f}, x2[N2] = {3.0f, -0.25f};
    float v1[N1] = {0}, v2[N2] = {0}, h1[N1] = {0}, h2[N2] = {0};
    double rx[N1 + N2] = {1.0, -2.0, 0.5, 3.0, -0.25}, rv[N1 + N2] = {0}, rh[N1 + N2] = {0};
    Node t = mk("ai.onnx.preview.training", "Adam", 10, 6);
    attr_float(t.n, "alpha", (float)alpha);
    attr_float(t.n, "beta", (float)beta);
    attr_float(t.n, "epsilon", (float)eps);
    attr_float(t.n, "norm_coefficient", (float)nc);
    attr_float(t.n, "norm_coefficient_post", (float)ncp);
    AmpStatus st;
    Outs o = {0};
    for (int step = 0; step < STEPS; step++) {
        float r = (float)lr, g1[N1], g2[N2];
        int64_t T = step;
        for (int i = 0; i < N1; i++) g1[i] = (float)sin(step + i);
        for (int i = 0; i < N2; i++) g2[i] = (float)cos(step * 2 + i);
        int64_t d1[1] = {N1}, d2[1] = {N2};
        AmpBuf bR = mkbuf(AMP_DT_FLOAT, 0, NULL, &r), bT = mkbuf(AMP_DT_INT64, 0, NULL, &T);
        AmpBuf bx1 = mkbuf(AMP_DT_FLOAT, 1, d1, x1), bx2 = mkbuf(AMP_DT_FLOAT, 1, d2, x2);
        AmpBuf bg1 = mkbuf(AMP_DT_FLOAT, 1, d1, g1), bg2 = mkbuf(AMP_DT_FLOAT, 1, d2, g2);
        AmpBuf bv1 = mkbuf(AMP_DT_FLOAT, 1, d1, v1), bv2 = mkbuf(AMP_DT_FLOAT, 1, d2, v2);
        AmpBuf bh1 = mkbuf(AMP_DT_FLOAT, 1, d1, h1), bh2 = mkbuf(AMP_DT_FLOAT, 1, d2, h2);
        const AmpBuf *in[10] = {&bR, &bT, &bx1, &bx2, &bg1, &bg2, &bv1, &bv2, &bh1, &bh2};
        cr_assert_eq(run(&t, 1, in, 10, &o, false, &st), AMP_OK, "%s", st.msg);
        /* direct */
        double ra = step > 0 ? lr * sqrt(1 - pow(beta, step)) / (1 - pow(alpha, step)) : lr;
        for (int i = 0; i < N1 + N2; i++) {
            double g = nc * rx[i] + (i < N1 ? g1[i] : g2[i - N1]);
            rv[i] = alpha * rv[i] + (1 - alpha) * g;
            rh[i] = beta * rh[i] + (1 - beta) * g * g;
            rx[i] = (1 - ncp) * (rx[i] - ra * rv[i] / (sqrt(rh[i]) + eps));
        }
        /* feed back */
        memcpy(x1, o.b[0].data, sizeof x1), memcpy(x2, o.b[1].data, sizeof x2);
        memcpy(v1, o.b[2].data, sizeof v1), memcpy(v2, o.b[3].data, sizeof v2);
        memcpy(h1, o.b[4].data, sizeof h1), memcpy(h2, o.b[5].data, sizeof h2);
        for (int i = 0; i < N1 + N2; i++) {
            near(i < N1 ? x1[i] : x2[i - N1], rx[i], 1e-5, "X", (uint64_t)(step * 10 + i));
            near(i < N1 ? v1[i] : v2[i - N1], rv[i], 1e-5, "V", (uint64_t)(step * 10 + i));
            near(i < N1 ? h1[i] : h2[i - N1], rh[i], 1e-5, "H", (uint64_t)(step * 10 + i));
        }
    }
    amp_model_free(t.m);
    outs_free(&o);
}

Test(reduce, optimizer_errors) {
    float r = 0.1f, x[2] = {1, 2}, g[2] = {1, 1}, v[3] = {0, 0, 0};
    int64_t T = 1, d2[1] = {2}, d3[1] = {3};
    AmpBuf bR = mkbuf(AMP_DT_FLOAT, 0, NULL, &r), bT = mkbuf(AMP_DT_INT64, 0, NULL, &T);
    AmpBuf bx = mkbuf(AMP_DT_FLOAT, 1, d2, x), bg = mkbuf(AMP_DT_FLOAT, 1, d2, g), bv = mkbuf(AMP_DT_FLOAT, 1, d3, v);
    const AmpBuf *in[5] = {&bR, &bT, &bx, &bg, &bv};
    AmpStatus st;
    Outs o = {0};
    /* Momentum's attributes are required */
    Node t = mk("ai.onnx.preview.training", "Momentum", 5, 2);
    attr_float(t.n, "alpha", 0.9f);
    cr_expect_eq(run(&t, 1, in, 5, &o, false, &st), AMP_ERR_INPUT);
    attr_float(t.n, "beta", 1.0f);
    attr_float(t.n, "norm_coefficient", 0.0f);
    attr_str(t.n, "mode", "standard");
    /* state shaped unlike X */
    cr_expect_eq(run(&t, 1, in, 5, &o, false, &st), AMP_ERR_INPUT);
    bv.dims[0] = 2, bv.nelem = 2;
    cr_expect_eq(run(&t, 1, in, 5, &o, false, &st), AMP_OK, "%s", st.msg);
    near(getf(&o.b[0], 1), 2.0 - 0.1 * 1.0, 1e-6, "momentum X", 1);
    amp_model_free(t.m);
    /* Adagrad with a wrong input count */
    t = mk("ai.onnx.preview.training", "Adagrad", 4, 1);
    cr_expect_eq(run(&t, 1, in, 4, &o, false, &st), AMP_ERR_INPUT);
    amp_model_free(t.m);
    outs_free(&o);
}

/* ---- normalisations ---------------------------------------------------------------- */

Test(reduce, layernorm_fp16_storage_with_fp32_stats) {
    enum { R = 2, C = 5 };
    uint16_t x[R * C], s[C], b[C];
    for (int i = 0; i < R * C; i++) x[i] = amp_f32_to_f16((float)(100.0 + 3.0 * sin(i)));
    for (int i = 0; i < C; i++) s[i] = amp_f32_to_f16(1.0f + 0.1f * i), b[i] = amp_f32_to_f16(-0.5f * i);
    int64_t dx[2] = {R, C}, dc[1] = {C};
    AmpBuf bx = mkbuf(AMP_DT_FLOAT16, 2, dx, x), bs = mkbuf(AMP_DT_FLOAT16, 1, dc, s), bb = mkbuf(AMP_DT_FLOAT16, 1, dc, b);
    const AmpBuf *in[3] = {&bx, &bs, &bb};
    AmpStatus st;
    Outs o = {0};
    Node t = mk("", "LayerNormalization", 3, 3);
    cr_assert_eq(run(&t, 17, in, 3, &o, false, &st), AMP_OK, "%s", st.msg);
    cr_expect_eq(o.b[0].dtype, AMP_DT_FLOAT16);
    cr_expect_eq(o.b[1].dtype, AMP_DT_FLOAT);
    cr_expect_eq(o.b[1].rank, 2);
    cr_expect_eq(o.b[1].dims[1], 1);
    for (int r = 0; r < R; r++) {
        double m = 0, v = 0;
        for (int c = 0; c < C; c++) m += amp_f16_to_f32(x[r * C + c]);
        m /= C;
        for (int c = 0; c < C; c++) v += pow(amp_f16_to_f32(x[r * C + c]) - m, 2);
        double is = 1 / sqrt(v / C + 1e-5);
        near(getf(&o.b[1], r), m, 1e-7, "mean", r);
        near(getf(&o.b[2], r), is, 1e-6, "inv_std", r);
        for (int c = 0; c < C; c++) {
            double y = (amp_f16_to_f32(x[r * C + c]) - m) * is * amp_f16_to_f32(s[c]) + amp_f16_to_f32(b[c]);
            cr_expect_eq(((uint16_t *)o.b[0].data)[r * C + c], amp_f32_to_f16((float)y), "y[%d]", r * C + c);
        }
    }
    amp_model_free(t.m);
    outs_free(&o);
}

/* LayerNormalizationGrad against central differences of LayerNormalization (double). */
Test(reduce, layernorm_grad_matches_finite_difference) {
    enum { R = 2, C = 4 };
    double x[R * C], s[C] = {0.5, 1.5, -1.0, 2.0}, b[C] = {0.1, 0.2, 0.3, 0.4}, dy[R * C];
    for (int i = 0; i < R * C; i++) x[i] = sin(1.7 * i), dy[i] = cos(0.9 * i);
    int64_t dx[2] = {R, C}, dc[1] = {C};
    AmpBuf bx = mkbuf(AMP_DT_DOUBLE, 2, dx, x), bs = mkbuf(AMP_DT_DOUBLE, 1, dc, s), bb = mkbuf(AMP_DT_DOUBLE, 1, dc, b);
    AmpBuf bdy = mkbuf(AMP_DT_DOUBLE, 2, dx, dy);
    AmpStatus st;
    Outs o = {0}, f = {0};
    Node fw = mk("", "LayerNormalization", 3, 3);
    const AmpBuf *fin[3] = {&bx, &bs, &bb};
    cr_assert_eq(run(&fw, 17, fin, 3, &f, false, &st), AMP_OK, "%s", st.msg);
    Node t = mk("com.microsoft", "LayerNormalizationGrad", 5, 3);
    const AmpBuf *in[5] = {&bdy, &bx, &bs, &f.b[1], &f.b[2]};
    cr_assert_eq(run(&t, 1, in, 5, &o, false, &st), AMP_OK, "%s", st.msg);
    Outs tmp = {0};
    for (int i = 0; i < R * C; i++) {
        double keep = x[i], lp = 0, lm = 0;
        x[i] = keep + 1e-6;
        cr_assert_eq(run(&fw, 17, fin, 3, &tmp, false, &st), AMP_OK);
        for (int j = 0; j < R * C; j++) lp += dy[j] * getf(&tmp.b[0], j);
        x[i] = keep - 1e-6;
        cr_assert_eq(run(&fw, 17, fin, 3, &tmp, false, &st), AMP_OK);
        for (int j = 0; j < R * C; j++) lm += dy[j] * getf(&tmp.b[0], j);
        x[i] = keep;
        near(getf(&o.b[0], i), (lp - lm) / 2e-6, 1e-5, "X_grad", i);
    }
    for (int c = 0; c < C; c++) {
        double sg = 0, bg = 0;
        for (int r = 0; r < R; r++) {
            double yh = (getf(&f.b[0], r * C + c) - b[c]) / s[c];
            sg += dy[r * C + c] * yh, bg += dy[r * C + c];
        }
        near(getf(&o.b[1], c), sg, 1e-6, "scale_grad", c); /* stats passed as float32 */
        near(getf(&o.b[2], c), bg, 1e-12, "bias_grad", c);
    }
    amp_model_free(fw.m), amp_model_free(t.m);
    outs_free(&o), outs_free(&f), outs_free(&tmp);
}

/* Batch statistics (population variance) and running stats, by the attribute (opset
 * 15) or, before opset 14 (no attribute), because a training step is running. From opset
 * 14 the attribute decides even in a training step: training_mode 0 is the inference
 * form (a graph fine-tuned with frozen statistics: `ampc grad` without --train-mode). */
Test(reduce, batchnorm_training_statistics) {
    enum { N = 2, C = 2, S = 3 };
    float x[N * C * S], sc[C] = {1.0f, 2.0f}, bi[C] = {0.0f, 1.0f}, mean[C] = {0.5f, -0.5f}, var[C] = {1.0f, 4.0f};
    for (int i = 0; i < N * C * S; i++) x[i] = (float)(i % 5) - 1.5f * (float)(i % 3);
    int64_t dx[3] = {N, C, S}, dc[1] = {C};
    AmpBuf bx = mkbuf(AMP_DT_FLOAT, 3, dx, x), bs = mkbuf(AMP_DT_FLOAT, 1, dc, sc), bb = mkbuf(AMP_DT_FLOAT, 1, dc, bi);
    AmpBuf bm = mkbuf(AMP_DT_FLOAT, 1, dc, mean), bv = mkbuf(AMP_DT_FLOAT, 1, dc, var);
    const AmpBuf *in[5] = {&bx, &bs, &bb, &bm, &bv};
    AmpStatus st;
    Outs o = {0};
    for (int mode = 0; mode < 2; mode++) {
        Node t = mk("", "BatchNormalization", 5, 3);
        attr_float(t.n, "momentum", 0.8f);
        if (mode == 0) attr_int(t.n, "training_mode", 1);
        cr_assert_eq(run(&t, mode == 0 ? 15 : 9, in, 5, &o, mode == 1, &st), AMP_OK, "%s", st.msg);
        for (int c = 0; c < C; c++) {
            double m = 0, v = 0;
            for (int n = 0; n < N; n++)
                for (int j = 0; j < S; j++) m += x[(n * C + c) * S + j];
            m /= N * S;
            for (int n = 0; n < N; n++)
                for (int j = 0; j < S; j++) v += pow(x[(n * C + c) * S + j] - m, 2);
            v /= N * S;
            near(getf(&o.b[1], c), 0.8 * mean[c] + 0.2 * m, 1e-6, "running_mean", c);
            near(getf(&o.b[2], c), 0.8 * var[c] + 0.2 * v, 1e-6, "running_var", c);
            for (int n = 0; n < N; n++)
                for (int j = 0; j < S; j++) {
                    int at = (n * C + c) * S + j;
                    near(getf(&o.b[0], at), sc[c] * (x[at] - m) / sqrt(v + 1e-5) + bi[c], 1e-5, "y", at);
                }
        }
        amp_model_free(t.m);
    }
    /* inference: the input statistics, passed through to the extra outputs; in a
     * training step too at opset 15 when training_mode is not 1 */
    Node t = mk("", "BatchNormalization", 5, 3);
    for (int step = 0; step < 2; step++) {
        cr_assert_eq(run(&t, 15, in, 5, &o, step == 1, &st), AMP_OK, "%s", st.msg);
        near(getf(&o.b[0], 0), sc[0] * (x[0] - mean[0]) / sqrt(var[0] + 1e-5) + bi[0], 1e-6, "y inference", step);
    }
    near(getf(&o.b[1], 1), mean[1], 0, "mean passthrough", 1);
    /* channel-count mismatch */
    bm.dims[0] = 1, bm.nelem = 1;
    cr_expect_eq(run(&t, 15, in, 5, &o, false, &st), AMP_ERR_INPUT);
    amp_model_free(t.m);
    outs_free(&o);
}

/* Opset 18 takes scale/bias per group, opset 21 per channel. */
Test(reduce, groupnorm_parameters_by_opset) {
    enum { C = 4, S = 2, G = 2 };
    float x[C * S] = {1, 2, 3, 5, -1, 0, 4, 4};
    float sg[G] = {2.0f, 3.0f}, bg[G] = {0.5f, -0.5f};
    float scn[C] = {2.0f, 2.0f, 3.0f, 3.0f}, bcn[C] = {0.5f, 0.5f, -0.5f, -0.5f};
    int64_t dx[3] = {1, C, S}, dg[1] = {G}, dc[1] = {C};
    AmpBuf bx = mkbuf(AMP_DT_FLOAT, 3, dx, x);
    AmpBuf bsg = mkbuf(AMP_DT_FLOAT, 1, dg, sg), bbg = mkbuf(AMP_DT_FLOAT, 1, dg, bg);
    AmpBuf bsc = mkbuf(AMP_DT_FLOAT, 1, dc, scn), bbc = mkbuf(AMP_DT_FLOAT, 1, dc, bcn);
    const AmpBuf *in18[3] = {&bx, &bsg, &bbg}, *in21[3] = {&bx, &bsc, &bbc};
    AmpStatus st;
    Outs o = {0}, o2 = {0};
    Node t = mk("", "GroupNormalization", 3, 1);
    attr_int(t.n, "num_groups", G);
    cr_assert_eq(run(&t, 18, in18, 3, &o, false, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(run(&t, 21, in21, 3, &o2, false, &st), AMP_OK, "%s", st.msg);
    for (int g = 0; g < G; g++) {
        double m = 0, v = 0;
        for (int j = 0; j < 2 * S; j++) m += x[g * 2 * S + j];
        m /= 2 * S;
        for (int j = 0; j < 2 * S; j++) v += pow(x[g * 2 * S + j] - m, 2);
        v /= 2 * S;
        for (int j = 0; j < 2 * S; j++) {
            int at = g * 2 * S + j;
            double y = (x[at] - m) / sqrt(v + 1e-5) * sg[g] + bg[g];
            near(getf(&o.b[0], at), y, 1e-5, "opset 18", at);
            near(getf(&o2.b[0], at), y, 1e-5, "opset 21", at);
        }
    }
    amp_model_free(t.m);
    /* 4 channels do not split into 3 groups */
    t = mk("", "GroupNormalization", 3, 1);
    attr_int(t.n, "num_groups", 3);
    cr_expect_eq(run(&t, 21, in21, 3, &o, false, &st), AMP_ERR_INPUT);
    amp_model_free(t.m);
    outs_free(&o), outs_free(&o2);
}
