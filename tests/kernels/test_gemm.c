/* Unit tests of the gemm kernel family (kernels/cpu/gemm.c, einsum.c) against naive loops
 * written here: 16-bit storage rounding, numpy broadcasting of batch dims and 1-D
 * promotion, Gemm transposes and C broadcasting, Einsum's GEMM lowering against its
 * general loop, and the error paths. Conv and pooling are in test_conv.c. */
#include "tests/kernels/gemm_test_util.h"

/* ---- MatMul ---------------------------------------------------------------------- */

TestSuite(gemm, .init = setup, .fini = teardown);

/* Naive batched matmul of a (..., m, k) by b (..., k, n) with 4-D broadcast batch dims. */
static void ref_matmul(const AmpBuf *a, const AmpBuf *b, const int64_t *ob, int64_t m, int64_t kk, int64_t n,
                       double *y) {
    const float *A = a->data, *B = b->data;
    int64_t ab[2] = {a->dims[0], a->dims[1]}, bb[2] = {b->dims[0], b->dims[1]};
    for (int64_t i0 = 0; i0 < ob[0]; i0++)
        for (int64_t i1 = 0; i1 < ob[1]; i1++) {
            int64_t ia = (ab[0] == 1 ? 0 : i0) * ab[1] + (ab[1] == 1 ? 0 : i1);
            int64_t ib = (bb[0] == 1 ? 0 : i0) * bb[1] + (bb[1] == 1 ? 0 : i1);
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < n; j++) {
                    double s = 0;
                    for (int64_t p = 0; p < kk; p++) s += (double)A[(ia * m + i) * kk + p] * B[(ib * kk + p) * n + j];
                    *y++ = s;
                }
        }
}

Test(gemm, matmul_broadcasts_batch_dims) {
    AmpBuf a = fbuf(4, I64(3, 1, 2, 5)), b = fbuf(4, I64(1, 4, 5, 3));
    AmpNode *n = mknode("", "MatMul");
    Outs o;
    AmpStatus st;
    const AmpBuf *in[] = {&a, &b};
    cr_assert_eq(run(n, 2, in, 1, &o, &st), AMP_OK, "%s", st.msg);
    expect_shape(&o.b[0], 4, I64(3, 4, 2, 3));
    double want[3 * 4 * 2 * 3];
    ref_matmul(&a, &b, I64(3, 4), 2, 5, 3, want);
    expect_close(o.b[0].data, want, 72, 1e-5);
    outs_free(&o);
    free(a.data), free(b.data);
}

Test(gemm, matmul_one_d_promotion) {
    AmpBuf v = fbuf(1, I64(4)), m3 = fbuf(3, I64(2, 4, 3)), m3b = fbuf(3, I64(2, 3, 4)), w = fbuf(1, I64(4));
    AmpNode *n = mknode("", "MatMul");
    Outs o;
    AmpStatus st;
    const float *V = v.data, *M = m3.data, *Mb = m3b.data, *W = w.data;
    /* (4) @ (2, 4, 3) -> (2, 3) */
    const AmpBuf *in1[] = {&v, &m3};
    cr_assert_eq(run(n, 2, in1, 1, &o, &st), AMP_OK, "%s", st.msg);
    expect_shape(&o.b[0], 2, I64(2, 3));
    double want[6];
    for (int b = 0; b < 2; b++)
        for (int j = 0; j < 3; j++) {
            want[b * 3 + j] = 0;
            for (int p = 0; p < 4; p++) want[b * 3 + j] += (double)V[p] * M[(b * 4 + p) * 3 + j];
        }
    expect_close(o.b[0].data, want, 6, 1e-5);
    outs_free(&o);
    /* (2, 3, 4) @ (4) -> (2, 3) */
    const AmpBuf *in2[] = {&m3b, &w};
    cr_assert_eq(run(n, 2, in2, 1, &o, &st), AMP_OK, "%s", st.msg);
    expect_shape(&o.b[0], 2, I64(2, 3));
    for (int r = 0; r < 6; r++) {
        want[r] = 0;
        for (int p = 0; p < 4; p++) want[r] += (double)Mb[r * 4 + p] * W[p];
    }
    expect_close(o.b[0].data, want, 6, 1e-5);
    outs_free(&o);
    /* (4) @ (4) -> scalar */
    const AmpBuf *in3[] = {&v, &w};
    cr_assert_eq(run(n, 2, in3, 1, &o, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(o.b[0].rank, 0);
    want[0] = 0;
    for (int p = 0; p < 4; p++) want[0] += (double)V[p] * W[p];
    expect_close(o.b[0].data, want, 1, 1e-5);
    outs_free(&o);
    free(v.data), free(m3.data), free(m3b.data), free(w.data);
}

/* A 16-bit MatMul equals the float32 MatMul of the rounded inputs, rounded. */
static void check_16bit_matmul(int dtype) {
    AmpBuf a = fbuf(3, I64(2, 7, 33)), b = fbuf(2, I64(33, 9));
    AmpBuf ah = to16(&a, dtype), bh = to16(&b, dtype);
    AmpBuf ar = from16(&ah), br = from16(&bh);
    AmpNode *n = mknode("", "MatMul");
    Outs o16, o32;
    AmpStatus st;
    const AmpBuf *in16[] = {&ah, &bh}, *in32[] = {&ar, &br};
    cr_assert_eq(run(n, 2, in16, 1, &o16, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(run(n, 2, in32, 1, &o32, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(o16.b[0].dtype, dtype);
    expect_shape(&o16.b[0], 3, I64(2, 7, 9));
    AmpBuf want = to16(&o32.b[0], dtype);
    cr_assert_eq(memcmp(o16.b[0].data, want.data, 2 * 2 * 7 * 9), 0, "16-bit MatMul differs from rounded fp32");
    free(want.data);
    outs_free(&o16), outs_free(&o32);
    free(a.data), free(b.data), free(ah.data), free(bh.data), free(ar.data), free(br.data);
}

Test(gemm, matmul_float16_rounds_fp32_result) {
    check_16bit_matmul(AMP_DT_FLOAT16);
}

Test(gemm, matmul_bfloat16_rounds_fp32_result) {
    check_16bit_matmul(AMP_DT_BFLOAT16);
}

Test(gemm, matmul_int64_and_double) {
    int64_t A[6] = {1, -2, 3, 4, 5, -6}, B[6] = {7, 8, 9, 10, 11, 12};
    AmpBuf a = {.dtype = AMP_DT_INT64, .rank = 2, .dims = {2, 3}, .nelem = 6, .data = A};
    AmpBuf b = {.dtype = AMP_DT_INT64, .rank = 2, .dims = {3, 2}, .nelem = 6, .data = B};
    AmpNode *n = mknode("", "MatMul");
    Outs o;
    AmpStatus st;
    const AmpBuf *in[] = {&a, &b};
    cr_assert_eq(run(n, 2, in, 1, &o, &st), AMP_OK, "%s", st.msg);
    const int64_t *Y = o.b[0].data;
    int64_t want[4] = {1 * 7 - 2 * 9 + 3 * 11, 1 * 8 - 2 * 10 + 3 * 12,  /* row 0 */
                       4 * 7 + 5 * 9 - 6 * 11, 4 * 8 + 5 * 10 - 6 * 12}; /* row 1 */
    for (int i = 0; i < 4; i++) cr_expect_eq(Y[i], want[i]);
    outs_free(&o);
    double Ad[6], Bd[6];
    for (int i = 0; i < 6; i++) Ad[i] = (double)A[i] / 3, Bd[i] = (double)B[i] / 7;
    AmpBuf ad = {.dtype = AMP_DT_DOUBLE, .rank = 2, .dims = {2, 3}, .nelem = 6, .data = Ad};
    AmpBuf bd = {.dtype = AMP_DT_DOUBLE, .rank = 2, .dims = {3, 2}, .nelem = 6, .data = Bd};
    const AmpBuf *ind[] = {&ad, &bd};
    cr_assert_eq(run(n, 2, ind, 1, &o, &st), AMP_OK, "%s", st.msg);
    for (int i = 0; i < 4; i++) cr_expect(fabs(((double *)o.b[0].data)[i] - (double)want[i] / 21) < 1e-12);
    outs_free(&o);
}

Test(gemm, matmul_errors) {
    AmpBuf a = fbuf(2, I64(2, 3)), b = fbuf(2, I64(4, 2)), c = fbuf(3, I64(2, 3, 4)), d = fbuf(3, I64(3, 4, 2));
    AmpNode *n = mknode("", "MatMul");
    Outs o;
    AmpStatus st;
    const AmpBuf *bad_k[] = {&a, &b};
    cr_expect_eq(run(n, 2, bad_k, 1, &o, &st), AMP_ERR_INPUT);
    cr_expect(strstr(st.msg, "MatMul") != NULL, "message names the op: %s", st.msg);
    const AmpBuf *bad_batch[] = {&c, &d};
    cr_expect_eq(run(n, 2, bad_batch, 1, &o, &st), AMP_ERR_INPUT);
    int8_t q[6] = {0};
    AmpBuf i8 = {.dtype = AMP_DT_INT8, .rank = 2, .dims = {2, 3}, .nelem = 6, .data = q};
    AmpBuf i8b = {.dtype = AMP_DT_INT8, .rank = 2, .dims = {3, 2}, .nelem = 6, .data = q};
    const AmpBuf *ints[] = {&i8, &i8b};
    cr_expect_eq(run(n, 2, ints, 1, &o, &st), AMP_ERR_UNSUPPORTED);
    outs_free(&o);
    free(a.data), free(b.data), free(c.data), free(d.data);
}

Test(gemm, fused_matmul_transposes_and_scales) {
    AmpBuf a = fbuf(3, I64(2, 5, 3)), b = fbuf(2, I64(4, 5)); /* op(A) (2, 3, 5), op(B) (5, 4) */
    AmpNode *n = mknode("com.microsoft", "FusedMatMul");
    attr_int(n, "transA", 1), attr_int(n, "transB", 1), attr_float(n, "alpha", 0.5f);
    Outs o;
    AmpStatus st;
    const AmpBuf *in[] = {&a, &b};
    cr_assert_eq(run(n, 2, in, 1, &o, &st), AMP_OK, "%s", st.msg);
    expect_shape(&o.b[0], 3, I64(2, 3, 4));
    const float *A = a.data, *B = b.data;
    double want[24];
    for (int bt = 0; bt < 2; bt++)
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++) {
                double s = 0;
                for (int p = 0; p < 5; p++) s += (double)A[(bt * 5 + p) * 3 + i] * B[j * 5 + p];
                want[(bt * 3 + i) * 4 + j] = 0.5 * s;
            }
    expect_close(o.b[0].data, want, 24, 1e-5);
    outs_free(&o);
    free(a.data), free(b.data);
}

/* ---- Gemm ------------------------------------------------------------------------ */

static void check_gemm(int ta, int tb, float alpha, float beta, int c_rank, const int64_t *c_dims) {
    int64_t M = 5, K = 7, N = 6;
    AmpBuf a = ta ? fbuf(2, I64(K, M)) : fbuf(2, I64(M, K));
    AmpBuf b = tb ? fbuf(2, I64(N, K)) : fbuf(2, I64(K, N));
    AmpBuf c = fbuf(c_rank, c_dims);
    AmpNode *n = mknode("", "Gemm");
    attr_int(n, "transA", ta), attr_int(n, "transB", tb);
    attr_float(n, "alpha", alpha), attr_float(n, "beta", beta);
    Outs o;
    AmpStatus st;
    const AmpBuf *in[] = {&a, &b, &c};
    cr_assert_eq(run(n, 3, in, 1, &o, &st), AMP_OK, "%s", st.msg);
    expect_shape(&o.b[0], 2, I64(M, N));
    const float *A = a.data, *B = b.data, *C = c.data;
    double want[5 * 6];
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0;
            for (int64_t p = 0; p < K; p++)
                s += (double)(ta ? A[p * M + i] : A[i * K + p]) * (tb ? B[j * K + p] : B[p * N + j]);
            int64_t ci = c_rank == 0 ? 0
                         : c_rank == 1 ? (c_dims[0] == 1 ? 0 : j)
                                       : (c_dims[0] == 1 ? 0 : i) * c_dims[1] + (c_dims[1] == 1 ? 0 : j);
            want[i * N + j] = alpha * s + beta * C[ci];
        }
    expect_close(o.b[0].data, want, (uint64_t)(M * N), 1e-5);
    outs_free(&o);
    free(a.data), free(b.data), free(c.data);
}

Test(gemm, gemm_transposes_and_bias_broadcast) {
    check_gemm(0, 0, 1.0f, 1.0f, 2, I64(5, 6));
    check_gemm(1, 0, 0.5f, 2.0f, 1, I64(6));
    check_gemm(0, 1, 2.0f, -1.0f, 2, I64(5, 1));
    check_gemm(1, 1, 0.25f, 0.5f, 0, NULL);
    check_gemm(1, 1, 1.0f, 3.0f, 2, I64(1, 6));
}

Test(gemm, gemm_without_c_and_errors) {
    AmpBuf a = fbuf(2, I64(3, 4)), b = fbuf(2, I64(4, 2)), c = fbuf(2, I64(3, 3));
    AmpNode *n = mknode("", "Gemm");
    Outs o;
    AmpStatus st;
    const AmpBuf *in[] = {&a, &b};
    cr_assert_eq(run(n, 2, in, 1, &o, &st), AMP_OK, "%s", st.msg);
    double want[6];
    const float *A = a.data, *B = b.data;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++) {
            want[i * 2 + j] = 0;
            for (int p = 0; p < 4; p++) want[i * 2 + j] += (double)A[i * 4 + p] * B[p * 2 + j];
        }
    expect_close(o.b[0].data, want, 6, 1e-5);
    outs_free(&o);
    const AmpBuf *bad_c[] = {&a, &b, &c};
    cr_expect_eq(run(n, 3, bad_c, 1, &o, &st), AMP_ERR_INPUT);
    const AmpBuf *bad_k[] = {&a, &a};
    cr_expect_eq(run(n, 2, bad_k, 1, &o, &st), AMP_ERR_INPUT);
    outs_free(&o);
    free(a.data), free(b.data), free(c.data);
}

/* ---- Einsum ---------------------------------------------------------------------- */

/* Runs equation eq over float32 inputs (GEMM lowering where it applies) and over the
 * same values in double (the general loop) and compares both with each other. */
static void check_einsum(const char *eq, int n_in, AmpBuf *f, int out_rank, const int64_t *out_dims) {
    AmpNode *n = mknode("", "Einsum");
    attr_str(n, "equation", eq);
    AmpBuf d[3];
    const AmpBuf *fin[3], *din[3];
    for (int i = 0; i < n_in; i++) {
        d[i] = f[i];
        d[i].dtype = AMP_DT_DOUBLE;
        d[i].data = malloc((f[i].nelem ? f[i].nelem : 1) * sizeof(double));
        for (uint64_t e = 0; e < f[i].nelem; e++) ((double *)d[i].data)[e] = ((float *)f[i].data)[e];
        fin[i] = &f[i], din[i] = &d[i];
    }
    Outs of, od;
    AmpStatus st;
    cr_assert_eq(run(n, n_in, fin, 1, &of, &st), AMP_OK, "%s: %s", eq, st.msg);
    cr_assert_eq(run(n, n_in, din, 1, &od, &st), AMP_OK, "%s: %s", eq, st.msg);
    expect_shape(&of.b[0], out_rank, out_dims);
    expect_shape(&od.b[0], out_rank, out_dims);
    expect_close(of.b[0].data, od.b[0].data, of.b[0].nelem, 1e-5);
    outs_free(&of), outs_free(&od);
    for (int i = 0; i < n_in; i++) free(d[i].data), free(f[i].data);
}

Test(gemm, einsum_gemm_lowering_matches_loop) {
    AmpBuf x[2];
    x[0] = fbuf(3, I64(2, 3, 4)), x[1] = fbuf(3, I64(2, 4, 5));
    check_einsum("bij,bjk->bik", 2, x, 3, I64(2, 3, 5));
    x[0] = fbuf(4, I64(2, 3, 4, 5)), x[1] = fbuf(4, I64(2, 3, 6, 5));
    check_einsum("bhqd,bhkd->bhqk", 2, x, 4, I64(2, 3, 4, 6));
    x[0] = fbuf(2, I64(3, 4)), x[1] = fbuf(2, I64(5, 4));
    check_einsum("ij,kj", 2, x, 2, I64(3, 5));
    x[0] = fbuf(3, I64(2, 3, 4)), x[1] = fbuf(2, I64(4, 5));
    check_einsum("...j,jk->...k", 2, x, 3, I64(2, 3, 5));
    x[0] = fbuf(3, I64(4, 2, 3)), x[1] = fbuf(2, I64(3, 4));
    check_einsum("kbi,ik->bk", 2, x, 2, I64(2, 4));
}

Test(gemm, einsum_loop_forms) {
    AmpBuf x[2];
    x[0] = fbuf(2, I64(3, 3));
    check_einsum("ii->i", 1, x, 1, I64(3));
    x[0] = fbuf(3, I64(2, 3, 4));
    check_einsum("abc->cb", 1, x, 2, I64(4, 3));
    x[0] = fbuf(1, I64(5)), x[1] = fbuf(1, I64(5));
    check_einsum("i,i", 2, x, 0, NULL);
    x[0] = fbuf(2, I64(2, 3)), x[1] = fbuf(2, I64(2, 1));
    check_einsum("ij,ij->ij", 2, x, 2, I64(2, 3));
}

Test(gemm, einsum_errors) {
    AmpBuf a = fbuf(2, I64(2, 3));
    AmpNode *n = mknode("", "Einsum");
    attr_str(n, "equation", "ijk->i");
    Outs o;
    AmpStatus st;
    const AmpBuf *in[] = {&a};
    cr_expect_eq(run(n, 1, in, 1, &o, &st), AMP_ERR_INPUT);
    AmpNode *n2 = mknode("", "Einsum");
    attr_str(n2, "equation", "ij->iz");
    cr_expect_eq(run(n2, 1, in, 1, &o, &st), AMP_ERR_INPUT);
    int32_t q[6] = {0};
    AmpBuf i32 = {.dtype = AMP_DT_INT32, .rank = 2, .dims = {2, 3}, .nelem = 6, .data = q};
    const AmpBuf *ini[] = {&i32};
    AmpNode *n3 = mknode("", "Einsum");
    attr_str(n3, "equation", "ij->ji");
    cr_expect_eq(run(n3, 1, ini, 1, &o, &st), AMP_ERR_UNSUPPORTED);
    outs_free(&o);
    free(a.data);
}

/* Empty tensors: a product over K = 0 is zeros; an empty batch gives an empty output. */
Test(gemm, empty_operands) {
    AmpBuf a = fbuf(2, I64(3, 0)), b = fbuf(2, I64(0, 4)), e = fbuf(3, I64(0, 3, 5)), f = fbuf(2, I64(5, 2));
    AmpNode *mm = mknode("", "MatMul"), *gm = mknode("", "Gemm"), *es = mknode("", "Einsum");
    attr_str(es, "equation", "ij,jk->ik");
    Outs o;
    AmpStatus st;
    const AmpBuf *in[] = {&a, &b};
    AmpNode *nodes[3] = {mm, gm, es};
    for (int t = 0; t < 3; t++) {
        cr_assert_eq(run(nodes[t], 2, in, 1, &o, &st), AMP_OK, "%s", st.msg);
        expect_shape(&o.b[0], 2, I64(3, 4));
        for (int i = 0; i < 12; i++) cr_expect_eq(((float *)o.b[0].data)[i], 0.0f);
        outs_free(&o);
    }
    const AmpBuf *in2[] = {&e, &f};
    cr_assert_eq(run(mm, 2, in2, 1, &o, &st), AMP_OK, "%s", st.msg);
    expect_shape(&o.b[0], 3, I64(0, 3, 2));
    outs_free(&o);
    free(a.data), free(b.data), free(e.data), free(f.data);
}
