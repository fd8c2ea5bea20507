/* The CUDA loss kernels' arithmetic (kernels/cuda/loss_elem.h: labels, per-sample losses
 * and weights, the gradient element) run on the host in the kernels' order (fp32
 * log-softmax per sample, sums in double) against the CPU kernels (kernels/cpu/loss.c):
 * reductions none / sum / mean, weights, ignore_index (the mean's denominator: the weights
 * of the samples not ignored), N x C x d1.. layouts, and SoftmaxCrossEntropyLossGrad. No
 * GPU needed; the kernels themselves are checked by test_cuda_ops.c's loss_train table. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/loss_elem.h"
#include "tests/kernels/kernel_test_util.h"

static AmpModel *model;

static void setup(void) {
    model = amp_model_new();
    cr_assert_not_null(model);
}

static void teardown(void) {
    amp_model_free(model);
}

TestSuite(cuda_loss_elem, .init = setup, .fini = teardown);

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static double urand(void) {
    rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
    return (double)((rng * 0x2545f4914f6cdd1dull) >> 11) * 0x1p-53;
}

typedef struct LCase {
    int64_t n, c, dk;
    const char *red;
    int64_t ii; /* -1000: no ignore_index */
    bool weights, softmax;
} LCase;

/* The data of a case: scores (n, c, dk), labels (n, dk) in [0, c), weights (c). */
typedef struct LData {
    float *x, *w;
    int64_t *lab;
} LData;

static LData make_data(const LCase *c) {
    LData d;
    uint64_t nx = (uint64_t)(c->n * c->c * c->dk), ns = (uint64_t)(c->n * c->dk);
    d.x = malloc(nx * sizeof *d.x);
    d.lab = malloc(ns * sizeof *d.lab);
    d.w = malloc((size_t)c->c * sizeof *d.w);
    for (uint64_t i = 0; i < nx; i++) d.x[i] = (float)(6 * urand() - 3);
    for (uint64_t i = 0; i < ns; i++) d.lab[i] = (int64_t)(urand() * (double)c->c);
    for (int64_t i = 0; i < c->c; i++) d.w[i] = (float)(0.1 + 2.9 * urand());
    return d;
}

static void free_data(LData *d) {
    free(d->x), free(d->lab), free(d->w);
}

/* The kernel's order on the host: per sample the fp32 log-softmax and loss_elem's loss and
 * weight; sums in double. out: per-sample losses (none) or the one value; lp: log_prob. */
static void emulate(const LCase *c, const LData *d, float *out, float *lp) {
    double sl = 0.0, sw = 0.0;
    for (int64_t s = 0; s < c->n * c->dk; s++) {
        int64_t n = s / c->dk, dd = s % c->dk, base = n * c->c * c->dk + dd;
        int64_t l = amp_cuda_loss_label(d->lab[s], c->c, c->ii != -1000, c->ii);
        float m = 0.0f, ls = 0.0f;
        if (c->softmax) {
            m = -INFINITY;
            float sum = 0.0f;
            for (int64_t j = 0; j < c->c; j++) m = fmaxf(m, d->x[base + j * c->dk]);
            for (int64_t j = 0; j < c->c; j++) sum += expf(d->x[base + j * c->dk] - m);
            ls = logf(sum);
            for (int64_t j = 0; j < c->c; j++) lp[base + j * c->dk] = d->x[base + j * c->dk] - m - ls;
        }
        float li, wl;
        float logp = l >= 0 ? d->x[base + l * c->dk] - m - ls : 0.0f;
        amp_cuda_loss_sample(l, logp, c->weights && l >= 0 ? d->w[l] : 1.0f, &li, &wl);
        if (!strcmp(c->red, "none")) out[s] = li;
        sl += li, sw += wl;
    }
    if (!strcmp(c->red, "sum")) out[0] = (float)sl;
    if (!strcmp(c->red, "mean")) out[0] = (float)(sl / sw);
}

static AmpNode *loss_node(const char *op, const char *domain, const LCase *c) {
    AmpNode *n = amp_node_new(model->graph, domain, op, "n", 0, 0);
    cr_assert_not_null(n);
    attr_str(n, "reduction", c->red);
    if (c->ii != -1000) attr_int(n, "ignore_index", c->ii);
    return n;
}

static void expect_close(const float *got, const AmpBuf *ref, uint64_t n, const char *what) {
    for (uint64_t i = 0; i < n; i++) {
        double r = getf(ref, i), g = got[i];
        if (isnan(r)) cr_expect(isnan(g), "%s[%llu]: %g, expected NaN", what, (unsigned long long)i, g);
        else cr_expect_leq(fabs(g - r), 1e-5 * fabs(r) + 1e-5, "%s[%llu]: %.9g, expected %.9g", what,
                           (unsigned long long)i, g, r);
    }
}

static const LCase cases[] = {
    {8, 5, 1, "mean", -1000, false, true},  {8, 5, 1, "mean", 1, true, true},  {8, 5, 1, "sum", 2, true, true},
    {8, 5, 1, "none", 0, true, true},       {2, 4, 15, "mean", 3, true, true}, {2, 4, 15, "none", -1000, false, true},
    {300, 7, 1, "mean", 4, true, false},    {3, 6, 5, "sum", 1, true, false},  {4, 3, 2, "none", 2, false, false},
};

Test(cuda_loss_elem, losses_match_the_cpu) {
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const LCase *c = &cases[ci];
        LData d = make_data(c);
        int64_t xd[3] = {c->n, c->c, c->dk}, ld_[2] = {c->n, c->dk}, wd[1] = {c->c};
        int rank = c->dk > 1 ? 3 : 2;
        AmpBuf x = mkbuf(AMP_DT_FLOAT, rank, xd, d.x), lab = mkbuf(AMP_DT_INT64, rank - 1, ld_, d.lab);
        AmpBuf w = mkbuf(AMP_DT_FLOAT, 1, wd, d.w);
        const AmpBuf *in[3] = {&x, &lab, c->weights ? &w : NULL};
        AmpNode *n = loss_node(c->softmax ? "SoftmaxCrossEntropyLoss" : "NegativeLogLikelihoodLoss", "", c);
        Outs o;
        AmpStatus st = {0};
        int nout = c->softmax ? 2 : 1;
        cr_assert_eq(kt_run(n, 13, c->weights ? 3 : 2, in, nout, &o, &st), AMP_OK, "case %zu: %s", ci, st.msg);
        float *out = calloc((size_t)(c->n * c->dk), sizeof *out), *lp = calloc(x.nelem, sizeof *lp);
        emulate(c, &d, out, lp);
        char what[64];
        snprintf(what, sizeof what, "case %zu loss", ci);
        expect_close(out, &o.b[0], o.b[0].nelem, what);
        snprintf(what, sizeof what, "case %zu log_prob", ci);
        if (c->softmax) expect_close(lp, &o.b[1], x.nelem, what);
        free(out), free(lp);
        outs_free(&o);
        free_data(&d);
    }
}

/* SoftmaxCrossEntropyLossGrad: the kernel's weight sum (mean) and loss_elem's element. */
Test(cuda_loss_elem, loss_grad_matches_the_cpu) {
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const LCase *c = &cases[ci];
        LData d = make_data(c);
        bool none = !strcmp(c->red, "none");
        int64_t ns = c->n * c->dk, nx = ns * c->c;
        float *dy = malloc((size_t)ns * sizeof *dy), *bias = malloc((size_t)nx * sizeof *bias);
        for (int64_t i = 0; i < ns; i++) dy[i] = (float)(urand() - 0.5);
        for (int64_t i = 0; i < nx; i++) bias[i] = (float)(urand() - 0.5), d.x[i] = (float)(-3 * urand());
        int64_t xd[3] = {c->n, c->c, c->dk}, ld_[2] = {c->n, c->dk}, wd[1] = {c->c}, dyd[2] = {c->n, c->dk};
        int rank = c->dk > 1 ? 3 : 2;
        AmpBuf dyb = mkbuf(AMP_DT_FLOAT, none ? rank - 1 : 0, dyd, dy), lp = mkbuf(AMP_DT_FLOAT, rank, xd, d.x);
        AmpBuf lab = mkbuf(AMP_DT_INT64, rank - 1, ld_, d.lab), w = mkbuf(AMP_DT_FLOAT, 1, wd, d.w);
        AmpBuf bb = mkbuf(AMP_DT_FLOAT, rank, xd, bias);
        bool with_bias = ci % 2;
        const AmpBuf *in[5] = {&dyb, &lp, &lab, c->weights ? &w : NULL, with_bias ? &bb : NULL};
        AmpNode *n = loss_node("SoftmaxCrossEntropyLossGrad", "com.microsoft", c);
        Outs o;
        AmpStatus st = {0};
        cr_assert_eq(kt_run(n, 1, with_bias ? 5 : c->weights ? 4 : 3, in, 1, &o, &st), AMP_OK, "case %zu: %s", ci,
                     st.msg);
        /* the weight sum as weight_sum_kernel adds it, then each element */
        double wsum = 0.0;
        for (int64_t s = 0; s < ns; s++) {
            int64_t l = amp_cuda_loss_label(d.lab[s], c->c, c->ii != -1000, c->ii);
            wsum += l == AMP_CUDA_LOSS_IGNORED ? 0.0 : c->weights ? d.w[l] : 1.0;
        }
        float *got = malloc((size_t)nx * sizeof *got);
        for (int64_t i = 0; i < nx; i++) {
            int64_t nn = i / (c->c * c->dk), j = i % (c->c * c->dk) / c->dk, dd = i % c->dk, s = nn * c->dk + dd;
            int64_t l = amp_cuda_loss_label(d.lab[s], c->c, c->ii != -1000, c->ii);
            float w_l = c->weights && l >= 0 ? d.w[l] : 1.0f;
            got[i] = amp_cuda_loss_grad_elem(l, j, none ? dy[s] : dy[0], w_l, !strcmp(c->red, "mean") ? &wsum : NULL,
                                             d.x[i]);
            if (with_bias) got[i] += bias[i];
        }
        char what[64];
        snprintf(what, sizeof what, "case %zu d_logits", ci);
        expect_close(got, &o.b[0], (uint64_t)nx, what);
        free(got), free(dy), free(bias);
        outs_free(&o);
        free_data(&d);
    }
}

Test(cuda_loss_elem, labels_and_samples) {
    cr_expect_eq(amp_cuda_loss_label(3, 5, false, 0), 3);
    cr_expect_eq(amp_cuda_loss_label(3, 5, true, 3), AMP_CUDA_LOSS_IGNORED);
    cr_expect_eq(amp_cuda_loss_label(-100, 5, true, -100), AMP_CUDA_LOSS_IGNORED, "ignore_index outside [0, C)");
    cr_expect_eq(amp_cuda_loss_label(5, 5, false, 0), AMP_CUDA_LOSS_BAD);
    cr_expect_eq(amp_cuda_loss_label(-1, 5, true, 2), AMP_CUDA_LOSS_BAD);
    float li, wl;
    amp_cuda_loss_sample(AMP_CUDA_LOSS_IGNORED, 0.0f, 1.0f, &li, &wl);
    cr_expect(li == 0.0f && wl == 0.0f, "an ignored sample adds nothing to the mean's denominator");
    amp_cuda_loss_sample(AMP_CUDA_LOSS_BAD, 0.0f, 1.0f, &li, &wl);
    cr_expect(isnan(li) && isnan(wl), "a bad label: NaN where the CPU reports an error");
    amp_cuda_loss_sample(2, -1.5f, 2.0f, &li, &wl);
    cr_expect(li == 3.0f && wl == 2.0f);
    cr_expect(isnan(amp_cuda_loss_grad_elem(AMP_CUDA_LOSS_BAD, 0, 1.0f, 1.0f, NULL, 0.0f)));
    cr_expect_eq(amp_cuda_loss_grad_elem(AMP_CUDA_LOSS_IGNORED, 0, 1.0f, 1.0f, NULL, 0.0f), 0.0f);
}

/* Every sample ignored: a mean of 0 / 0 on both. */
Test(cuda_loss_elem, mean_of_no_sample_is_nan) {
    LCase c = {4, 3, 1, "mean", 0, true, true};
    LData d = make_data(&c);
    for (int i = 0; i < 4; i++) d.lab[i] = 0;
    int64_t xd[2] = {4, 3}, ld_[1] = {4}, wd[1] = {3};
    AmpBuf x = mkbuf(AMP_DT_FLOAT, 2, xd, d.x), lab = mkbuf(AMP_DT_INT64, 1, ld_, d.lab);
    AmpBuf w = mkbuf(AMP_DT_FLOAT, 1, wd, d.w);
    const AmpBuf *in[3] = {&x, &lab, &w};
    Outs o;
    AmpStatus st = {0};
    cr_assert_eq(kt_run(loss_node("SoftmaxCrossEntropyLoss", "", &c), 13, 3, in, 1, &o, &st), AMP_OK, "%s", st.msg);
    float out[1], lp[12];
    emulate(&c, &d, out, lp);
    cr_expect(isnan(out[0]) && isnan(getf(&o.b[0], 0)));
    outs_free(&o);
    free_data(&d);
}
