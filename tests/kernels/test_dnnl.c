/* oneDNN under the CPU's matrix products (kernels/cpu/dnnl.c) against naive loops in
 * double: float32 and bfloat16 inputs, float32 and bfloat16 outputs, every transpose,
 * broadcast batch dims, odd sizes (1, 7, 33), alpha, a bias row and accumulation into the
 * output (Gemm's beta * C); then MatMul and Gemm kernels in bfloat16, which take that
 * path. A bfloat16 output is the float32 sum rounded once, to nearest even: within half
 * a bfloat16 ulp of the exact value, plus float32's reassociation. Skipped where the
 * build or the machine has no oneDNN. */
#include "kernels/cpu/dnnl.h"
#include "tests/kernels/gemm_test_util.h"

TestSuite(dnnl, .init = setup, .fini = teardown);

static void need_dnnl(void) {
    if (!amp_dnnl_enabled()) cr_skip_test("built without oneDNN, or libdnnl cannot be opened (AMP_DNNL=0?)");
}

/* n random values of dtype (float32 or bfloat16) in data, and as float32 in f. */
static void rand_vals(int dtype, uint64_t n, void **data, float **f) {
    *f = malloc((n ? n : 1) * sizeof **f);
    for (uint64_t i = 0; i < n; i++) (*f)[i] = frand();
    if (dtype == AMP_DT_FLOAT) {
        *data = malloc((n ? n : 1) * sizeof(float));
        memcpy(*data, *f, n * sizeof(float));
        return;
    }
    uint16_t *h = malloc((n ? n : 1) * 2);
    amp_f32_to_bf16_n(h, *f, n);
    amp_bf16_to_f32_n(*f, h, n);
    *data = h;
}

static int64_t prod(int nb, const int64_t *d) {
    int64_t p = 1;
    for (int i = 0; i < nb; i++) p *= d[i];
    return p;
}

/* p against the exact sum of its products; dst0 is the output's float32 values before
 * the call (accumulate), bias the bias row (or NULL). */
static void check(const AmpDnnlMatmul *p, const float *A, const float *B, const float *bias, const float *dst0,
                  const void *got) {
    int64_t ob[AMP_DNNL_MAX_BATCH];
    for (int i = 0; i < p->nb; i++) ob[i] = p->batch_a[i] > p->batch_b[i] ? p->batch_a[i] : p->batch_b[i];
    int64_t nbatch = prod(p->nb, ob), M = p->m, N = p->n, K = p->k;
    for (int64_t bi = 0; bi < nbatch; bi++) {
        /* A's and B's matrix index for output matrix bi */
        int64_t ia = 0, ib = 0, rest = bi;
        int64_t idx[AMP_DNNL_MAX_BATCH];
        for (int d = p->nb - 1; d >= 0; d--) idx[d] = rest % ob[d], rest /= ob[d];
        for (int d = 0; d < p->nb; d++) {
            ia = ia * p->batch_a[d] + (p->batch_a[d] == 1 ? 0 : idx[d]);
            ib = ib * p->batch_b[d] + (p->batch_b[d] == 1 ? 0 : idx[d]);
        }
        const float *a = A + ia * M * K, *b = B + ib * K * N;
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double s = 0, mag = 0;
                for (int64_t q = 0; q < K; q++) {
                    double x = p->ta ? a[q * M + i] : a[i * K + q], y = p->tb ? b[j * K + q] : b[q * N + j];
                    s += x * y;
                    mag += fabs(x * y);
                }
                s *= p->alpha;
                if (bias) s += bias[j];
                uint64_t o = (uint64_t)((bi * M + i) * N + j);
                if (p->accumulate) s += dst0[o];
                double g = p->dt_dst == AMP_DT_FLOAT ? ((const float *)got)[o]
                                                      : amp_bf16_to_f32(((const uint16_t *)got)[o]);
                double tol = 1e-5 * (1.0 + mag + fabs(s));
                if (p->dt_dst == AMP_DT_BFLOAT16) tol += ldexp(fabs(s), -8);
                cr_assert(fabs(g - s) <= tol,
                          "%s->%s %lldx%lldx%lld ta %d tb %d alpha %g: [%lld] is %.7g, expected %.7g",
                          amp_dtype_name(p->dt_ab), amp_dtype_name(p->dt_dst), (long long)M, (long long)N,
                          (long long)K, p->ta, p->tb, p->alpha, (long long)o, g, s);
            }
    }
}

/* Runs p on random inputs (and a random bias and starting output where asked). */
static void one(AmpDnnlMatmul p) {
    int64_t ob[AMP_DNNL_MAX_BATCH];
    for (int i = 0; i < p.nb; i++) ob[i] = p.batch_a[i] > p.batch_b[i] ? p.batch_a[i] : p.batch_b[i];
    uint64_t na = (uint64_t)(prod(p.nb, p.batch_a) * p.m * p.k), nbb = (uint64_t)(prod(p.nb, p.batch_b) * p.k * p.n);
    uint64_t nd = (uint64_t)(prod(p.nb, ob) * p.m * p.n);
    void *a, *b, *bias = NULL;
    float *fa, *fb, *fbias = NULL;
    rand_vals(p.dt_ab, na, &a, &fa);
    rand_vals(p.dt_ab, nbb, &b, &fb);
    if (p.bias) rand_vals(p.dt_ab, (uint64_t)p.n, &bias, &fbias);
    size_t esz = p.dt_dst == AMP_DT_FLOAT ? 4 : 2;
    void *dst = malloc(nd * esz);
    float *dst0 = malloc(nd * sizeof *dst0);
    for (uint64_t i = 0; i < nd; i++) dst0[i] = p.accumulate ? frand() : 0.0f;
    if (p.accumulate) memcpy(dst, dst0, nd * sizeof *dst0); /* accumulation is into float32 */
    else memset(dst, 0x7f, nd * esz); /* garbage: the product must overwrite it */
    cr_assert(amp_dnnl_matmul(&p, a, b, bias, dst), "oneDNN refused %s->%s %lldx%lldx%lld ta %d tb %d nb %d",
              amp_dtype_name(p.dt_ab), amp_dtype_name(p.dt_dst), (long long)p.m, (long long)p.n, (long long)p.k,
              p.ta, p.tb, p.nb);
    check(&p, fa, fb, fbias, dst0, dst);
    free(a), free(b), free(bias), free(fa), free(fb), free(fbias), free(dst), free(dst0);
}

static const int DTS[3][2] = {{AMP_DT_FLOAT, AMP_DT_FLOAT},
                              {AMP_DT_BFLOAT16, AMP_DT_FLOAT},
                              {AMP_DT_BFLOAT16, AMP_DT_BFLOAT16}};
static const int64_t SIZES[] = {1, 7, 33};

Test(dnnl, sizes_transposes_types) {
    need_dnnl();
    for (int t = 0; t < 3; t++)
        for (int im = 0; im < 3; im++)
            for (int in = 0; in < 3; in++)
                for (int ik = 0; ik < 3; ik++)
                    for (int tr = 0; tr < 4; tr++)
                        one((AmpDnnlMatmul){.dt_ab = DTS[t][0], .dt_dst = DTS[t][1], .m = SIZES[im], .n = SIZES[in],
                                            .k = SIZES[ik], .ta = tr & 1, .tb = tr >> 1, .alpha = 1.0f});
}

Test(dnnl, alpha_bias_accumulate) {
    need_dnnl();
    for (int t = 0; t < 3; t++)
        for (int tr = 0; tr < 4; tr++) {
            AmpDnnlMatmul p = {.dt_ab = DTS[t][0], .dt_dst = DTS[t][1], .m = 33, .n = 7, .k = 33, .ta = tr & 1,
                               .tb = tr >> 1, .alpha = 0.5f};
            one(p);
            p.alpha = 1.0f, p.bias = true;
            one(p);
            if (p.dt_dst == AMP_DT_FLOAT) { /* Gemm's beta * C: into a float32 output */
                p.bias = false, p.accumulate = true, p.alpha = -2.0f;
                one(p);
            }
        }
}

Test(dnnl, batch_broadcast) {
    need_dnnl();
    for (int t = 0; t < 3; t++)
        for (int tr = 0; tr < 4; tr++) {
            AmpDnnlMatmul p = {.dt_ab = DTS[t][0], .dt_dst = DTS[t][1], .nb = 2, .batch_a = {3, 1}, .batch_b = {1, 4},
                               .m = 7, .n = 33, .k = 7, .ta = tr & 1, .tb = tr >> 1, .alpha = 1.0f};
            one(p);
            p.batch_a[1] = 4, p.batch_b[0] = 3, p.m = 1, p.k = 33, p.alpha = 0.25f; /* no broadcast */
            one(p);
            p.nb = 3, p.batch_a[2] = 1, p.batch_b[2] = 2;
            one(p);
        }
}

/* ---- the kernels: MatMul and Gemm in bfloat16 go through oneDNN ------------------ */
/* (sizes over amp_dnnl_wins's threshold, so that they do) */

/* y (bfloat16) against the float32 product of the bfloat16 inputs, rounded once. */
static void expect_bf16(const AmpBuf *y, const double *want, uint64_t n, double mag) {
    cr_assert_eq(y->dtype, AMP_DT_BFLOAT16);
    for (uint64_t i = 0; i < n; i++) {
        double g = amp_bf16_to_f32(((const uint16_t *)y->data)[i]);
        cr_assert(fabs(g - want[i]) <= ldexp(fabs(want[i]), -8) + 1e-5 * (1 + mag), "[%llu] is %.7g, expected %.7g",
                  (unsigned long long)i, g, want[i]);
    }
}

Test(dnnl, matmul_kernel_bf16_broadcast) {
    need_dnnl();
    enum { M = 33, K = 65, N = 40 };
    cr_assert(amp_dnnl_wins(AMP_DT_BFLOAT16, 6 * M, N, K));
    AmpBuf fa = fbuf(4, I64(3, 1, M, K)), fb = fbuf(3, I64(2, K, N));
    AmpBuf a = to16(&fa, AMP_DT_BFLOAT16), b = to16(&fb, AMP_DT_BFLOAT16);
    AmpBuf ra = from16(&a), rb = from16(&b);
    AmpNode *n = mknode("", "MatMul");
    Outs o;
    AmpStatus st;
    const AmpBuf *in[] = {&a, &b};
    cr_assert_eq(run(n, 2, in, 1, &o, &st), AMP_OK, "%s", st.msg);
    expect_shape(&o.b[0], 4, I64(3, 2, M, N));
    static double want[3 * 2 * M * N];
    const float *A = ra.data, *B = rb.data;
    for (int i0 = 0; i0 < 3; i0++)
        for (int i1 = 0; i1 < 2; i1++)
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                    double s = 0;
                    for (int q = 0; q < K; q++) s += (double)A[(i0 * M + i) * K + q] * B[(i1 * K + q) * N + j];
                    want[((i0 * 2 + i1) * M + i) * N + j] = s;
                }
    expect_bf16(&o.b[0], want, 6 * M * N, K);
    outs_free(&o);
    free(fa.data), free(fb.data), free(a.data), free(b.data), free(ra.data), free(rb.data);
}

/* Gemm(transB) with a bias row (oneDNN's bias), then alpha, beta and a column C (the
 * float32 output set to beta * C, the product accumulated into it, rounded once). */
Test(dnnl, gemm_kernel_bf16) {
    need_dnnl();
    enum { M = 33, K = 65, N = 40 };
    cr_assert(amp_dnnl_wins(AMP_DT_BFLOAT16, M, N, K));
    AmpBuf fa = fbuf(2, I64(M, K)), fb = fbuf(2, I64(N, K)), fc = fbuf(1, I64(N)), fcc = fbuf(2, I64(M, 1));
    AmpBuf a = to16(&fa, AMP_DT_BFLOAT16), b = to16(&fb, AMP_DT_BFLOAT16), c = to16(&fc, AMP_DT_BFLOAT16),
           cc = to16(&fcc, AMP_DT_BFLOAT16);
    AmpBuf ra = from16(&a), rb = from16(&b), rc = from16(&c), rcc = from16(&cc);
    const float *A = ra.data, *B = rb.data, *C = rc.data, *CC = rcc.data;
    for (int v = 0; v < 2; v++) {
        AmpNode *n = mknode("", "Gemm");
        attr_int(n, "transB", 1);
        float alpha = v ? 0.5f : 1.0f, beta = v ? -1.5f : 1.0f;
        if (v) {
            attr_float(n, "alpha", alpha);
            attr_float(n, "beta", beta);
        }
        Outs o;
        AmpStatus st;
        const AmpBuf *in[] = {&a, &b, v ? &cc : &c};
        cr_assert_eq(run(n, 3, in, 1, &o, &st), AMP_OK, "%s", st.msg);
        expect_shape(&o.b[0], 2, I64(M, N));
        static double want[M * N];
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double s = 0;
                for (int q = 0; q < K; q++) s += (double)A[i * K + q] * B[j * K + q];
                /* beta * C is rounded to float32 first, as the kernel does */
                want[i * N + j] = alpha * s + (v ? (double)(beta * CC[i]) : C[j]);
            }
        expect_bf16(&o.b[0], want, M * N, K);
        outs_free(&o);
    }
    free(fa.data), free(fb.data), free(fc.data), free(fcc.data), free(a.data), free(b.data), free(c.data);
    free(cc.data), free(ra.data), free(rb.data), free(rc.data), free(rcc.data);
}

/* libgomp reads its spin count once, when libdnnl brings it in: ampc asks for a short spin
 * (kernels/cpu/dnnl.c, openmp_spin_briefly) unless the user chose a wait policy or a spin
 * count, which are left as they are. Each Criterion test runs in a fresh process, so
 * libdnnl is opened here for the first time. */
Test(dnnl, openmp_spins_briefly_unless_told) {
    unsetenv("OMP_WAIT_POLICY");
    unsetenv("GOMP_SPINCOUNT");
    need_dnnl();
    const char *v = getenv("GOMP_SPINCOUNT");
    cr_assert(v && strcmp(v, "10000") == 0, "GOMP_SPINCOUNT is %s", v ? v : "unset");
}

Test(dnnl, openmp_wait_policy_of_the_user_kept) {
    setenv("OMP_WAIT_POLICY", "active", 1);
    unsetenv("GOMP_SPINCOUNT");
    need_dnnl();
    cr_assert_null(getenv("GOMP_SPINCOUNT"));
    cr_assert_str_eq(getenv("OMP_WAIT_POLICY"), "active");
}

Test(dnnl, openmp_spin_count_of_the_user_kept) {
    unsetenv("OMP_WAIT_POLICY");
    setenv("GOMP_SPINCOUNT", "300000", 1);
    need_dnnl();
    cr_assert_str_eq(getenv("GOMP_SPINCOUNT"), "300000");
}
