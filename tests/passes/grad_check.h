/* The finite-difference check the gradient-rule tests share (test_grad*.c): a model's
 * parameters' gradients from the built backward against central differences of its loss. */
#ifndef AMP_TEST_GRAD_CHECK_H
#define AMP_TEST_GRAD_CHECK_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/grad.h"
#include "tests/runtime/rt_util.h"

#define EPS 1e-2f
#define ATOL 3e-4
#define RTOL 3e-3

static uint64_t rng = 0x9E3779B97F4A7C15ull;

/* Uniform in [lo, hi). */
static inline float uni(float lo, float hi) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * (float)((rng >> 40) / 16777216.0);
}

/* A float32 parameter `name` [dims] with values in [lo, hi). */
static inline void param(AmpGraph *g, const char *name, int rank, const int64_t *dims, float lo, float hi) {
    float v[256];
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= dims[i];
    cr_assert(n <= 256);
    for (int64_t i = 0; i < n; i++) v[i] = uni(lo, hi);
    rt_init(g, name, AMP_DT_FLOAT, rank, dims, v);
}

#define P(g, name, lo, hi, ...) param(g, name, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__}, lo, hi)

static inline void ints_init(AmpGraph *g, const char *name, int rank, const int64_t *dims, const int64_t *v) {
    rt_init(g, name, AMP_DT_INT64, rank, dims, v);
}

static inline void attr_i(AmpNode *n, const char *name, int64_t v) {
    AmpAttr *a = amp_node_add_attr(n, name, AMP_ATTR_INT);
    a->i = v;
    a->has |= AMP_ATTR_HAS_I;
}

static inline void attr_f(AmpNode *n, const char *name, float v) {
    AmpAttr *a = amp_node_add_attr(n, name, AMP_ATTR_FLOAT);
    a->f = v;
    a->has |= AMP_ATTR_HAS_F;
}

static inline void attr_ints(AmpGraph *g, AmpNode *n, const char *name, size_t count, const int64_t *v) {
    AmpAttr *a = amp_node_add_attr(n, name, AMP_ATTR_INTS);
    a->ints = amp_arena_memdup(&g->model->arena, v, count * sizeof *v);
    a->n_ints = count;
}

/* The loss and the float parameters' gradients of `m` (loss mse against a fixed target,
 * or cross-entropy over labels), checked against central differences; returns the worst
 * |analytic - numeric| seen. The model is consumed. */
static inline double check(AmpModel *m, AmpGradLoss loss, const char *what) {
    AmpStatus st = {0};
    AmpGradOptions o = {.loss = loss, .optimizer = AMP_GRAD_OPT_NONE};
    AmpGradSummary sum;
    cr_assert_eq(amp_grad_model(m, &o, &sum, &st), AMP_OK, "%s: %s", what, st.msg);
    cr_assert_eq(amp_verify_model(m, &st), AMP_OK, "%s: %s", what, st.msg);
    cr_assert_gt(sum.n_params, 0);
    /* The parameters (name, size), and the feed: a target or labels. */
    enum { MAXP = 8 };
    const char *pname[MAXP], *gname[MAXP + 1];
    size_t pn[MAXP], np = 0;
    AmpGraph *g = m->graph;
    for (size_t i = 0; i < g->outputs.n; i++) {
        const char *nm = g->outputs.items[i].value->name;
        size_t len = strlen(nm);
        if (len < 6 || strcmp(nm + len - 5, "_grad") != 0) continue;
        char base[128];
        snprintf(base, sizeof base, "%.*s", (int)(len - 5), nm);
        AmpValue *p = amp_graph_lookup(g, base);
        cr_assert(p && p->initializer && np < MAXP);
        pname[np] = strdup(p->name); /* the model is freed once the session holds it */
        gname[np] = strdup(nm);
        pn[np++] = (size_t)p->initializer->nelem;
    }
    cr_assert_eq(np, sum.n_params);
    AmpValue *feed = amp_graph_lookup(g, loss == AMP_GRAD_LOSS_MSE ? "target" : "labels");
    int64_t fdims[8], fn = 1;
    for (int i = 0; i < feed->type.rank; i++) fn *= fdims[i] = feed->type.dims[i].value;
    float fdata[512];
    int64_t ldata[512]; /* written for every feed element, read for labels */
    cr_assert(fn <= 64 || (loss == AMP_GRAD_LOSS_MSE && fn <= 512));
    for (int64_t i = 0; i < fn; i++) {
        fdata[i] = uni(-1, 1);
        ldata[i] = (int64_t)(i * 7 + 3) % 3;
    }
    char feed_name[32];
    snprintf(feed_name, sizeof feed_name, "%s", feed->name);
    AmpTensorView in = rt_view(feed_name, feed->type.dtype, loss == AMP_GRAD_LOSS_MSE ? (void *)fdata : (void *)ldata,
                               feed->type.rank, fdims);
    gname[np] = "loss";
    AmpSession *s = NULL;
    cr_assert_eq(rt_open(m, NULL, &s, &st), AMP_OK, "%s: %s", what, st.msg);
    AmpTensorView out[MAXP + 1];
    cr_assert_eq(amp_session_run(s, &in, 1, gname, np + 1, out, &st), AMP_OK, "%s: %s", what, st.msg);
    double worst = 0;
    for (size_t p = 0; p < np; p++) {
        AmpTensorView w;
        cr_assert(rt_state_find(s, pname[p], &w));
        AmpTensorView cur = w;
        float *vals = malloc(pn[p] * sizeof *vals);
        memcpy(vals, w.data, pn[p] * sizeof *vals);
        cur.data = vals;
        const float *an = out[p].data;
        for (size_t j = 0; j < pn[p]; j++) {
            double l[2];
            for (int k = 0; k < 2; k++) {
                float keep = vals[j];
                vals[j] = keep + (k ? -EPS : EPS);
                cr_assert_eq(amp_session_state_set(s, &cur, &st), AMP_OK, "%s", st.msg);
                AmpTensorView lo;
                const char *ln = "loss";
                cr_assert_eq(amp_session_run(s, &in, 1, &ln, 1, &lo, &st), AMP_OK, "%s", st.msg);
                l[k] = *(const float *)lo.data;
                amp_tensor_view_free(&lo);
                vals[j] = keep;
            }
            double num = (l[0] - l[1]) / (2.0 * EPS), err = fabs(num - an[j]);
            cr_assert(err <= ATOL + RTOL * fabs(num), "%s: d loss / d %s[%zu]: backward %g, finite differences %g", what,
                      pname[p], j, an[j], num);
            if (err > worst) worst = err;
        }
        cr_assert_eq(amp_session_state_set(s, &cur, &st), AMP_OK, "%s", st.msg);
        free(vals);
    }
    for (size_t p = 0; p <= np; p++) amp_tensor_view_free(&out[p]);
    for (size_t p = 0; p < np; p++) free((char *)pname[p]), free((char *)gname[p]);
    amp_session_close(s);
    printf("grad check %-28s max |backward - finite differences| = %.2e (tolerance %.0e + %.0e * |fd|)\n", what,
           worst, ATOL, RTOL);
    return worst;
}

static inline AmpModel *model(void) { return rt_model(17); }

static inline AmpNode *op(AmpModel *m, const char *type, const char *ins, const char *outs) {
    return rt_node(m->graph, "", type, ins, outs);
}

static inline void out_y(AmpModel *m) { rt_output(m->graph, "y", AMP_DT_FLOAT, NULL); }

#endif
