/* Unit tests of the conv kernel family (kernels/cpu/conv.c, pool.c): Conv and
 * ConvTranspose against naive direct loops written here over random 1-D/2-D/3-D shapes
 * with groups, strides, dilations and asymmetric pads; 16-bit storage rounding; auto_pad;
 * MaxPool indices in both storage orders; AveragePool's count_include_pad; error paths. */
#include "tests/kernels/gemm_test_util.h"

TestSuite(conv, .init = setup, .fini = teardown);

/* Window parameters of a random case, padded to 3 spatial dims (leading dims of size 1
 * with stride 1 and no pads when the case has fewer). */
typedef struct Case {
    int nsp;
    int64_t N, group, Cg, Mg;
    int64_t in[3], k[3], s[3], d[3], p0[3], p1[3], opad[3], out[3];
} Case;

static Case random_case(bool transpose) {
    Case c;
    memset(&c, 0, sizeof c);
    c.nsp = (int)irand(1, 3);
    c.N = irand(1, 2), c.group = irand(1, 3), c.Cg = irand(1, 3), c.Mg = irand(1, 3);
    for (int i = 0; i < 3; i++) {
        bool used = i >= 3 - c.nsp;
        c.in[i] = used ? irand(c.nsp == 3 ? 2 : 3, c.nsp == 3 ? 5 : 8) : 1;
        c.k[i] = used ? irand(1, 3) : 1;
        c.s[i] = used ? irand(1, 3) : 1;
        c.d[i] = used ? irand(1, 2) : 1;
        c.p0[i] = used ? irand(0, 2) : 0;
        c.p1[i] = used ? irand(0, 2) : 0;
        int64_t eff = (c.k[i] - 1) * c.d[i] + 1;
        if (transpose) {
            c.opad[i] = used ? irand(0, c.s[i] - 1) : 0;
            c.out[i] = c.s[i] * (c.in[i] - 1) + c.opad[i] + eff - c.p0[i] - c.p1[i];
            if (c.out[i] < 1) c.p0[i] = c.p1[i] = 0, c.out[i] = c.s[i] * (c.in[i] - 1) + c.opad[i] + eff;
        } else {
            while (c.in[i] + c.p0[i] + c.p1[i] < eff) c.in[i]++;
            c.out[i] = (c.in[i] + c.p0[i] + c.p1[i] - eff) / c.s[i] + 1;
        }
    }
    return c;
}

static void set_window_attrs(AmpNode *n, const Case *c) {
    int64_t s[3], d[3], p[6], op[3] = {0, 0, 0};
    int o = 3 - c->nsp;
    for (int i = 0; i < c->nsp; i++) {
        s[i] = c->s[o + i], d[i] = c->d[o + i], op[i] = c->opad[o + i];
        p[i] = c->p0[o + i], p[c->nsp + i] = c->p1[o + i];
    }
    attr_ints(n, "strides", c->nsp, s);
    attr_ints(n, "dilations", c->nsp, d);
    attr_ints(n, "pads", 2 * c->nsp, p);
    attr_int(n, "group", c->group);
    if (op[0] || (c->nsp > 1 && op[1]) || (c->nsp > 2 && op[2])) attr_ints(n, "output_padding", c->nsp, op);
}

/* Shapes (N, C, spatial...) as the kernel sees them. */
static int shape(const Case *c, int64_t a, int64_t b, const int64_t *sp, int64_t *dims) {
    dims[0] = a, dims[1] = b;
    for (int i = 0; i < c->nsp; i++) dims[2 + i] = sp[3 - c->nsp + i];
    return c->nsp + 2;
}

/* Direct convolution: y[n, m, o] = b[m] + sum x[n, c, o*s - p0 + j*d] w[m, c', j]. */
static void ref_conv(const Case *c, const float *x, const float *w, const float *b, double *y) {
    int64_t C = c->group * c->Cg, M = c->group * c->Mg;
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t m = 0; m < M; m++)
            for (int64_t o0 = 0; o0 < c->out[0]; o0++)
                for (int64_t o1 = 0; o1 < c->out[1]; o1++)
                    for (int64_t o2 = 0; o2 < c->out[2]; o2++) {
                        double acc = b ? b[m] : 0.0;
                        int64_t g = m / c->Mg;
                        for (int64_t ci = 0; ci < c->Cg; ci++)
                            for (int64_t j0 = 0; j0 < c->k[0]; j0++)
                                for (int64_t j1 = 0; j1 < c->k[1]; j1++)
                                    for (int64_t j2 = 0; j2 < c->k[2]; j2++) {
                                        int64_t i0 = o0 * c->s[0] - c->p0[0] + j0 * c->d[0];
                                        int64_t i1 = o1 * c->s[1] - c->p0[1] + j1 * c->d[1];
                                        int64_t i2 = o2 * c->s[2] - c->p0[2] + j2 * c->d[2];
                                        if (i0 < 0 || i0 >= c->in[0] || i1 < 0 || i1 >= c->in[1] || i2 < 0 ||
                                            i2 >= c->in[2])
                                            continue;
                                        int64_t cx = g * c->Cg + ci;
                                        double xv = x[(((n * C + cx) * c->in[0] + i0) * c->in[1] + i1) * c->in[2] + i2];
                                        double wv =
                                            w[(((m * c->Cg + ci) * c->k[0] + j0) * c->k[1] + j1) * c->k[2] + j2];
                                        acc += xv * wv;
                                    }
                        *y++ = acc;
                    }
}

/* Direct transposed convolution: every x[n, c, i] adds x * w[c, m', j] at i*s - p0 + j*d. */
static void ref_conv_transpose(const Case *c, const float *x, const float *w, const float *b, double *y) {
    int64_t C = c->group * c->Cg, M = c->group * c->Mg, O = c->out[0] * c->out[1] * c->out[2];
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t m = 0; m < M; m++)
            for (int64_t q = 0; q < O; q++) y[(n * M + m) * O + q] = b ? b[m] : 0.0;
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t cx = 0; cx < C; cx++)
            for (int64_t i0 = 0; i0 < c->in[0]; i0++)
                for (int64_t i1 = 0; i1 < c->in[1]; i1++)
                    for (int64_t i2 = 0; i2 < c->in[2]; i2++) {
                        double xv = x[(((n * C + cx) * c->in[0] + i0) * c->in[1] + i1) * c->in[2] + i2];
                        int64_t g = cx / c->Cg;
                        for (int64_t mi = 0; mi < c->Mg; mi++)
                            for (int64_t j0 = 0; j0 < c->k[0]; j0++)
                                for (int64_t j1 = 0; j1 < c->k[1]; j1++)
                                    for (int64_t j2 = 0; j2 < c->k[2]; j2++) {
                                        int64_t o0 = i0 * c->s[0] - c->p0[0] + j0 * c->d[0];
                                        int64_t o1 = i1 * c->s[1] - c->p0[1] + j1 * c->d[1];
                                        int64_t o2 = i2 * c->s[2] - c->p0[2] + j2 * c->d[2];
                                        if (o0 < 0 || o0 >= c->out[0] || o1 < 0 || o1 >= c->out[1] || o2 < 0 ||
                                            o2 >= c->out[2])
                                            continue;
                                        double wv =
                                            w[(((cx * c->Mg + mi) * c->k[0] + j0) * c->k[1] + j1) * c->k[2] + j2];
                                        int64_t m = g * c->Mg + mi;
                                        int64_t yo = (((n * M + m) * c->out[0] + o0) * c->out[1] + o1) * c->out[2] + o2;
                                        y[yo] += xv * wv;
                                    }
                    }
}

static void check_random_conv(bool transpose, int trial) {
    Case c = random_case(transpose);
    int64_t C = c.group * c.Cg, M = c.group * c.Mg, xd[5], wd[5], yd[5];
    int xr = shape(&c, c.N, C, c.in, xd);
    int wr = transpose ? shape(&c, C, c.Mg, c.k, wd) : shape(&c, M, c.Cg, c.k, wd);
    int yr = shape(&c, c.N, M, c.out, yd);
    AmpBuf x = fbuf(xr, xd), w = fbuf(wr, wd), b = fbuf(1, I64(M));
    bool bias = trial % 2 == 0;
    AmpNode *n = mknode("", transpose ? "ConvTranspose" : "Conv");
    set_window_attrs(n, &c);
    Outs o;
    AmpStatus st;
    const AmpBuf *in[] = {&x, &w, &b};
    cr_assert_eq(run(n, bias ? 3 : 2, in, 1, &o, &st), AMP_OK, "trial %d: %s", trial, st.msg);
    expect_shape(&o.b[0], yr, yd);
    double *want = malloc(o.b[0].nelem * sizeof *want);
    if (transpose) ref_conv_transpose(&c, x.data, w.data, bias ? b.data : NULL, want);
    else ref_conv(&c, x.data, w.data, bias ? b.data : NULL, want);
    expect_close(o.b[0].data, want, o.b[0].nelem, 1e-5);
    free(want);
    outs_free(&o);
    free(x.data), free(w.data), free(b.data);
}

Test(conv, conv_matches_direct_loops) {
    for (int t = 0; t < 60; t++) check_random_conv(false, t);
}

Test(conv, conv_transpose_matches_direct_loops) {
    for (int t = 0; t < 60; t++) check_random_conv(true, t);
}

/* 16-bit Conv equals the float32 Conv of the rounded inputs, rounded. */
Test(conv, conv_float16_and_bfloat16_round_fp32_result) {
    int dts[2] = {AMP_DT_FLOAT16, AMP_DT_BFLOAT16};
    for (int t = 0; t < 2; t++) {
        AmpBuf x = fbuf(4, I64(2, 4, 6, 5)), w = fbuf(4, I64(6, 2, 3, 3)), b = fbuf(1, I64(6));
        AmpBuf xh = to16(&x, dts[t]), wh = to16(&w, dts[t]), bh = to16(&b, dts[t]);
        AmpBuf xr = from16(&xh), wr = from16(&wh), br = from16(&bh);
        AmpNode *n = mknode("", "Conv");
        attr_int(n, "group", 2);
        attr_ints(n, "pads", 4, I64(1, 0, 1, 2));
        Outs o16, o32;
        AmpStatus st;
        const AmpBuf *in16[] = {&xh, &wh, &bh}, *in32[] = {&xr, &wr, &br};
        cr_assert_eq(run(n, 3, in16, 1, &o16, &st), AMP_OK, "%s", st.msg);
        cr_assert_eq(run(n, 3, in32, 1, &o32, &st), AMP_OK, "%s", st.msg);
        cr_assert_eq(o16.b[0].dtype, dts[t]);
        AmpBuf want = to16(&o32.b[0], dts[t]);
        cr_assert_eq(memcmp(o16.b[0].data, want.data, want.nelem * 2), 0);
        free(want.data);
        outs_free(&o16), outs_free(&o32);
        free(x.data), free(w.data), free(b.data), free(xh.data), free(wh.data), free(bh.data);
        free(xr.data), free(wr.data), free(br.data);
    }
}

/* auto_pad SAME_UPPER / SAME_LOWER equal the explicit pads they stand for. */
Test(conv, conv_auto_pad_same) {
    AmpBuf x = fbuf(4, I64(1, 2, 4, 5)), w = fbuf(4, I64(3, 2, 2, 3));
    const AmpBuf *in[] = {&x, &w};
    /* H: in 4, k 2, s 1 -> out 4, total 1; W: in 5, k 3, s 2 -> out 3, total 2. */
    const char *modes[2] = {"SAME_UPPER", "SAME_LOWER"};
    const int64_t pads[2][4] = {{0, 1, 1, 1}, {1, 1, 0, 1}};
    for (int t = 0; t < 2; t++) {
        AmpNode *a = mknode("", "Conv"), *e = mknode("", "Conv");
        attr_str(a, "auto_pad", modes[t]);
        attr_ints(a, "strides", 2, I64(1, 2)), attr_ints(e, "strides", 2, I64(1, 2));
        attr_ints(e, "pads", 4, pads[t]);
        Outs oa, oe;
        AmpStatus st;
        cr_assert_eq(run(a, 2, in, 1, &oa, &st), AMP_OK, "%s", st.msg);
        cr_assert_eq(run(e, 2, in, 1, &oe, &st), AMP_OK, "%s", st.msg);
        expect_shape(&oa.b[0], 4, I64(1, 3, 4, 3));
        cr_assert_eq(memcmp(oa.b[0].data, oe.b[0].data, oa.b[0].nelem * sizeof(float)), 0, "%s", modes[t]);
        outs_free(&oa), outs_free(&oe);
    }
    free(x.data), free(w.data);
}

/* ConvTranspose of x = (1, 2, 3), w = (0.5, 1) [, 1.5] with output_shape: the pads
 * attribute is ignored and the total padding (natural size - output_shape) splits with
 * the larger half first, but for SAME_UPPER (the spec; values from onnxruntime 1.32,
 * which agrees). The natural outputs are (0.5, 2, 3.5, 3) at stride 1 and
 * (0.5, 1, 2.5, 2, 4.5, 3, 4.5) for the 3-wide kernel at stride 2. */
static void convt_os(int64_t kw, const char *auto_pad, int64_t stride, int64_t opad, const int64_t *pads, int64_t os,
                     const float *want) {
    static const float x3[3] = {1, 2, 3}, w3[3] = {0.5f, 1, 1.5f};
    AmpBuf x = {.dtype = AMP_DT_FLOAT, .rank = 3, .dims = {1, 1, 3}, .nelem = 3, .data = (void *)x3};
    AmpBuf w = {.dtype = AMP_DT_FLOAT, .rank = 3, .dims = {1, 1, kw}, .nelem = (uint64_t)kw, .data = (void *)w3};
    AmpNode *n = mknode("", "ConvTranspose");
    if (auto_pad) attr_str(n, "auto_pad", auto_pad);
    if (pads) attr_ints(n, "pads", 2, pads);
    attr_ints(n, "strides", 1, I64(stride));
    if (opad) attr_ints(n, "output_padding", 1, I64(opad));
    attr_ints(n, "output_shape", 1, I64(os));
    Outs o;
    AmpStatus st;
    cr_assert_eq(run(n, 2, (const AmpBuf *[]){&x, &w}, 1, &o, &st), AMP_OK, "%s", st.msg);
    expect_shape(&o.b[0], 3, I64(1, 1, os));
    for (int64_t i = 0; i < os; i++)
        cr_expect_float_eq(((float *)o.b[0].data)[i], want[i], 1e-6f, "%s, stride %lld, output_shape %lld: y[%lld]",
                           auto_pad ? auto_pad : "NOTSET", (long long)stride, (long long)os, (long long)i);
    outs_free(&o);
}

Test(conv, conv_transpose_output_shape_computes_pads) {
    /* the case: 4x4 ones, 2x2 ones, output_shape (1, 1): the centre, 4 */
    float ones[16];
    for (int i = 0; i < 16; i++) ones[i] = 1;
    AmpBuf x = {.dtype = AMP_DT_FLOAT, .rank = 4, .dims = {1, 1, 4, 4}, .nelem = 16, .data = ones};
    AmpBuf w = {.dtype = AMP_DT_FLOAT, .rank = 4, .dims = {1, 1, 2, 2}, .nelem = 4, .data = ones};
    AmpNode *n = mknode("", "ConvTranspose");
    attr_ints(n, "output_shape", 2, I64(1, 1));
    Outs o;
    AmpStatus st;
    cr_assert_eq(run(n, 2, (const AmpBuf *[]){&x, &w}, 1, &o, &st), AMP_OK, "%s", st.msg);
    expect_shape(&o.b[0], 4, I64(1, 1, 1, 1));
    cr_expect_float_eq(((float *)o.b[0].data)[0], 4.0f, 1e-6f, "got %g", ((float *)o.b[0].data)[0]);
    outs_free(&o);
    convt_os(2, NULL, 1, 0, NULL, 3, (const float[]){2, 3.5f, 3});
    convt_os(2, NULL, 1, 0, NULL, 2, (const float[]){2, 3.5f});
    convt_os(2, NULL, 1, 0, I64(0, 1), 3, (const float[]){2, 3.5f, 3}); /* pads ignored */
    convt_os(2, "VALID", 1, 0, NULL, 3, (const float[]){2, 3.5f, 3});
    convt_os(2, "SAME_LOWER", 1, 0, NULL, 3, (const float[]){2, 3.5f, 3});
    convt_os(2, "SAME_UPPER", 1, 0, NULL, 3, (const float[]){0.5f, 2, 3.5f});
    convt_os(2, "SAME_UPPER", 1, 0, NULL, 2, (const float[]){2, 3.5f});
    convt_os(2, NULL, 2, 0, NULL, 5, (const float[]){1, 1, 2, 1.5f, 3});
    convt_os(3, NULL, 2, 0, NULL, 6, (const float[]){1, 2.5f, 2, 4.5f, 3, 4.5f});
    convt_os(3, NULL, 2, 1, NULL, 5, (const float[]){2.5f, 2, 4.5f, 3, 4.5f});
}

Test(conv, conv_errors) {
    AmpBuf x = fbuf(4, I64(1, 4, 5, 5)), w = fbuf(4, I64(2, 3, 3, 3)), w2 = fbuf(4, I64(2, 4, 3, 3));
    Outs o;
    AmpStatus st;
    AmpNode *n = mknode("", "Conv");
    const AmpBuf *bad_c[] = {&x, &w};
    cr_expect_eq(run(n, 2, bad_c, 1, &o, &st), AMP_ERR_INPUT);
    cr_expect(strstr(st.msg, "Conv") != NULL, "%s", st.msg);
    AmpNode *n2 = mknode("", "Conv");
    attr_ints(n2, "pads", 2, I64(1, 1));
    const AmpBuf *ok[] = {&x, &w2};
    cr_expect_eq(run(n2, 2, ok, 1, &o, &st), AMP_ERR_INPUT, "pads of the wrong length");
    AmpNode *n3 = mknode("", "Conv");
    attr_str(n3, "auto_pad", "SOMETIMES");
    cr_expect_eq(run(n3, 2, ok, 1, &o, &st), AMP_ERR_INPUT);
    AmpNode *n4 = mknode("", "Conv");
    attr_ints(n4, "kernel_shape", 2, I64(2, 2));
    cr_expect_eq(run(n4, 2, ok, 1, &o, &st), AMP_ERR_INPUT, "kernel_shape disagrees with W");
    double dx[4] = {0}, dw[1] = {0};
    AmpBuf xd = {.dtype = AMP_DT_DOUBLE, .rank = 3, .dims = {1, 1, 4}, .nelem = 4, .data = dx};
    AmpBuf wd = {.dtype = AMP_DT_DOUBLE, .rank = 3, .dims = {1, 1, 1}, .nelem = 1, .data = dw};
    const AmpBuf *dbl[] = {&xd, &wd};
    cr_expect_eq(run(n, 2, dbl, 1, &o, &st), AMP_ERR_UNSUPPORTED);
    outs_free(&o);
    free(x.data), free(w.data), free(w2.data);
}

/* ---- pooling --------------------------------------------------------------------- */

/* x (1, 1, 3, 4), the value 7 twice. */
static AmpBuf pool_input(void) {
    AmpBuf x = fbuf(4, I64(1, 1, 3, 4));
    float v[12] = {1, 5, 2, 0, 7, 3, 7, 4, 6, 9, 8, 2};
    memcpy(x.data, v, sizeof v);
    return x;
}

Test(conv, maxpool_indices_both_storage_orders) {
    AmpBuf x = pool_input();
    const AmpBuf *in[] = {&x};
    for (int order = 0; order < 2; order++) {
        AmpNode *n = mknode("", "MaxPool");
        attr_ints(n, "kernel_shape", 2, I64(2, 2));
        attr_ints(n, "strides", 2, I64(1, 2));
        attr_int(n, "storage_order", order);
        Outs o;
        AmpStatus st;
        cr_assert_eq(run(n, 1, in, 2, &o, &st), AMP_OK, "%s", st.msg);
        expect_shape(&o.b[0], 4, I64(1, 1, 2, 2));
        expect_shape(&o.b[1], 4, I64(1, 1, 2, 2));
        cr_assert_eq(o.b[1].dtype, AMP_DT_INT64);
        const float *y = o.b[0].data;
        const int64_t *ix = o.b[1].data;
        float wy[4] = {7, 7, 9, 8};
        /* (row, col) of each maximum: (1,0) (1,2) (2,1) (2,2). */
        int64_t rows[4] = {1, 1, 2, 2}, cols[4] = {0, 2, 1, 2};
        for (int i = 0; i < 4; i++) {
            cr_expect_eq(y[i], wy[i]);
            cr_expect_eq(ix[i], order ? cols[i] * 3 + rows[i] : rows[i] * 4 + cols[i], "order %d, output %d", order, i);
        }
        outs_free(&o);
    }
    free(x.data);
}

Test(conv, maxpool_ceil_mode_and_float16_exact) {
    AmpBuf x = fbuf(4, I64(1, 2, 5, 5));
    AmpBuf xh = to16(&x, AMP_DT_FLOAT16);
    AmpNode *n = mknode("", "MaxPool");
    attr_ints(n, "kernel_shape", 2, I64(2, 2));
    attr_ints(n, "strides", 2, I64(2, 2));
    attr_int(n, "ceil_mode", 1);
    Outs o;
    AmpStatus st;
    const AmpBuf *in[] = {&xh};
    cr_assert_eq(run(n, 1, in, 1, &o, &st), AMP_OK, "%s", st.msg);
    expect_shape(&o.b[0], 4, I64(1, 2, 3, 3));
    const uint16_t *X = xh.data, *Y = o.b[0].data;
    for (int c = 0; c < 2; c++)
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++) {
                float best = -INFINITY;
                uint16_t bits = 0;
                for (int a = 2 * i; a < 2 * i + 2 && a < 5; a++)
                    for (int b = 2 * j; b < 2 * j + 2 && b < 5; b++) {
                        uint16_t h = X[(c * 5 + a) * 5 + b];
                        if (amp_f16_to_f32(h) > best) best = amp_f16_to_f32(h), bits = h;
                    }
                cr_expect_eq(Y[(c * 3 + i) * 3 + j], bits);
            }
    outs_free(&o);
    free(x.data), free(xh.data);
}

/* A random 2-D pooling window (kh x kw, pads p) and an input (2, 3, h, w) it fits. */
static AmpBuf random_pool_input(int64_t *h, int64_t *w, int64_t *kh, int64_t *kw, int64_t *p) {
    *h = irand(1, 9), *w = irand(1, 9), *kh = irand(1, 3), *kw = irand(1, 3);
    p[0] = irand(0, *kh - 1), p[1] = irand(0, *kw - 1), p[2] = irand(0, *kh - 1), p[3] = irand(0, *kw - 1);
    if (*h + p[0] + p[2] < *kh) *h = *kh;
    if (*w + p[1] + p[3] < *kw) *w = *kw;
    return fbuf(4, I64(2, 3, *h, *w));
}

/* MaxPool without Indices (the 2-D fast path) gives, byte for byte, the Y that MaxPool
 * with Indices (the general path) gives: random 2-D geometries with pads, strides and
 * ceil_mode, float32, float16 and bfloat16 data with NaNs and infinities planted. */
Test(conv, maxpool_fast_path_matches_the_general_one) {
    for (int t = 0; t < 60; t++) {
        int64_t h, w, kh, kw, p[4];
        AmpBuf x = random_pool_input(&h, &w, &kh, &kw, p);
        float *xf = x.data;
        for (uint64_t i = 0; i < x.nelem; i++)
            if (irand(0, 9) == 0) xf[i] = irand(0, 2) == 0 ? NAN : irand(0, 1) ? INFINITY : -INFINITY;
        int dts[3] = {AMP_DT_FLOAT, AMP_DT_FLOAT16, AMP_DT_BFLOAT16};
        for (int d = 0; d < 3; d++) {
            AmpBuf xd = d ? to16(&x, dts[d]) : x;
            AmpNode *n = mknode("", "MaxPool");
            attr_ints(n, "kernel_shape", 2, I64(kh, kw));
            attr_ints(n, "strides", 2, I64(irand(1, 3), irand(1, 3)));
            attr_ints(n, "pads", 4, p);
            attr_int(n, "ceil_mode", irand(0, 1));
            Outs fast, general;
            AmpStatus st;
            const AmpBuf *in[] = {&xd};
            cr_assert_eq(run(n, 1, in, 1, &fast, &st), AMP_OK, "%s", st.msg);
            cr_assert_eq(run(n, 1, in, 2, &general, &st), AMP_OK, "%s", st.msg);
            cr_assert(amp_buf_same_shape(&fast.b[0], &general.b[0]));
            cr_assert(memcmp(fast.b[0].data, general.b[0].data, amp_buf_bytes(&fast.b[0])) == 0,
                      "case %d, dtype %d: the two paths differ", t, dts[d]);
            outs_free(&fast), outs_free(&general);
            if (d) free(xd.data);
        }
        free(x.data);
    }
}

/* MaxPool with row-major Indices (the 2-D fast path, which `ampc grad`'s MaxPool backward
 * runs) gives, byte for byte, the Y and the indices of the general path (reached through
 * storage_order 1, whose column-major indices are mapped back): random 2-D geometries
 * with pads, strides and ceil_mode, float32, float16 and bfloat16 data with NaNs (quiet
 * and signalling) and infinities planted, ties included (values from a few levels). */
Test(conv, maxpool_indices_fast_path_matches_the_general_one) {
    for (int t = 0; t < 60; t++) {
        int64_t h, w, kh, kw, p[4];
        AmpBuf x = random_pool_input(&h, &w, &kh, &kw, p);
        float *xf = x.data;
        for (uint64_t i = 0; i < x.nelem; i++) {
            xf[i] = (float)irand(-2, 2);
            if (irand(0, 9) == 0) xf[i] = irand(0, 2) == 0 ? NAN : irand(0, 1) ? INFINITY : -INFINITY;
            if (irand(0, 29) == 0) {
                uint32_t snan = UINT32_C(0x7f800001) | (uint32_t)irand(0, 1) << 31;
                memcpy(&xf[i], &snan, sizeof snan);
            }
        }
        int dts[3] = {AMP_DT_FLOAT, AMP_DT_FLOAT16, AMP_DT_BFLOAT16};
        int64_t strides[2] = {irand(1, 3), irand(1, 3)}, ceil = irand(0, 1);
        for (int d = 0; d < 3; d++) {
            AmpBuf xd = d ? to16(&x, dts[d]) : x;
            Outs o[2];
            for (int order = 0; order < 2; order++) {
                AmpNode *n = mknode("", "MaxPool");
                attr_ints(n, "kernel_shape", 2, I64(kh, kw));
                attr_ints(n, "strides", 2, strides);
                attr_ints(n, "pads", 4, p);
                attr_int(n, "ceil_mode", ceil);
                attr_int(n, "storage_order", order);
                AmpStatus st;
                const AmpBuf *in[] = {&xd};
                cr_assert_eq(run(n, 1, in, 2, &o[order], &st), AMP_OK, "%s", st.msg);
            }
            cr_assert(memcmp(o[0].b[0].data, o[1].b[0].data, amp_buf_bytes(&o[0].b[0])) == 0,
                      "case %d, dtype %d: Y differs", t, dts[d]);
            const int64_t *fast = o[0].b[1].data, *general = o[1].b[1].data;
            for (uint64_t i = 0; i < o[0].b[1].nelem; i++) {
                int64_t plane = general[i] < 0 ? 0 : general[i] / (h * w), at = general[i] - plane * h * w;
                int64_t want = general[i] < 0 ? -1 : plane * h * w + (at % h) * w + at / h;
                cr_assert_eq(fast[i], want, "case %d, dtype %d, output %llu", t, dts[d], (unsigned long long)i);
            }
            outs_free(&o[0]), outs_free(&o[1]);
            if (d) free(xd.data);
        }
        free(x.data);
    }
}

Test(conv, averagepool_count_include_pad) {
    AmpBuf x = pool_input();
    const AmpBuf *in[] = {&x};
    const float *X = x.data;
    for (int inc = 0; inc < 2; inc++) {
        AmpNode *n = mknode("", "AveragePool");
        attr_ints(n, "kernel_shape", 2, I64(2, 2));
        attr_ints(n, "pads", 4, I64(1, 1, 0, 0));
        attr_int(n, "count_include_pad", inc);
        Outs o;
        AmpStatus st;
        cr_assert_eq(run(n, 1, in, 1, &o, &st), AMP_OK, "%s", st.msg);
        expect_shape(&o.b[0], 4, I64(1, 1, 3, 4));
        double want[12];
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++) {
                double s = 0;
                int cnt = 0;
                for (int a = i - 1; a <= i; a++)
                    for (int b = j - 1; b <= j; b++)
                        if (a >= 0 && b >= 0) s += X[a * 4 + b], cnt++;
                want[i * 4 + j] = s / (inc ? 4 : cnt);
            }
        expect_close(o.b[0].data, want, 12, 1e-6);
        outs_free(&o);
    }
    free(x.data);
}

Test(conv, global_pools_and_errors) {
    AmpBuf x = fbuf(5, I64(2, 3, 2, 3, 2));
    const AmpBuf *in[] = {&x};
    const float *X = x.data;
    AmpNode *ga = mknode("", "GlobalAveragePool"), *gm = mknode("", "GlobalMaxPool");
    Outs oa, om;
    AmpStatus st;
    cr_assert_eq(run(ga, 1, in, 1, &oa, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(run(gm, 1, in, 1, &om, &st), AMP_OK, "%s", st.msg);
    expect_shape(&oa.b[0], 5, I64(2, 3, 1, 1, 1));
    double mean[6], mx[6];
    for (int p = 0; p < 6; p++) {
        mean[p] = 0, mx[p] = -INFINITY;
        for (int i = 0; i < 12; i++) mean[p] += X[p * 12 + i] / 12.0, mx[p] = fmax(mx[p], X[p * 12 + i]);
    }
    expect_close(oa.b[0].data, mean, 6, 1e-6);
    expect_close(om.b[0].data, mx, 6, 0);
    outs_free(&oa), outs_free(&om);
    AmpNode *nk = mknode("", "MaxPool");
    cr_expect_eq(run(nk, 1, in, 1, &oa, &st), AMP_ERR_INPUT, "kernel_shape is required");
    AmpNode *big = mknode("", "AveragePool");
    attr_ints(big, "kernel_shape", 3, I64(3, 3, 3));
    cr_expect_eq(run(big, 1, in, 1, &oa, &st), AMP_ERR_INPUT, "window larger than the input");
    int32_t q[4] = {0};
    AmpBuf xi = {.dtype = AMP_DT_INT32, .rank = 3, .dims = {1, 1, 4}, .nelem = 4, .data = q};
    const AmpBuf *ini[] = {&xi};
    AmpNode *ap = mknode("", "AveragePool");
    attr_ints(ap, "kernel_shape", 1, I64(2));
    cr_expect_eq(run(ap, 1, ini, 1, &oa, &st), AMP_ERR_UNSUPPORTED);
    outs_free(&oa);
    free(x.data);
}
