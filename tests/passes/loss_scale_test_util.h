/* Shared by the loss-scaling pass's tests (test_loss_scale.c: what the pass inserts and how
 * a step then runs; test_loss_scale_contract.c: the layouts and shapes of training graphs
 * it takes or refuses): a tiny training graph, running the pass, and looking at the result. */
#ifndef AMP_TESTS_LOSS_SCALE_TEST_UTIL_H
#define AMP_TESTS_LOSS_SCALE_TEST_UTIL_H

#include "tests/passes/amp_test_util.h"

static AmpStatus st;

/* ---- a tiny training graph ----------------------------------------------------------------
 * x[2] (input), W[2] (parameter), V[2] (optimizer state), lr, seed loss_grad = 1:
 *   p = x * W;  loss = ReduceSum(p)                       (forward, loss)
 *   W_grad = x * loss_grad                                (backward: d loss / d W)
 * algorithm: V_new = V + W_grad;  W_new = W - lr * V_new  (SGD with a momentum-like
 * buffer); update W <- W_new, V <- V_new.
 * A non-finite x makes W_grad non-finite: that is how the tests draw found_inf. */
static inline AmpModel *tiny(bool algorithm, bool seed_is_input) {
    AmpModel *m = model();
    AmpGraph *g = m->graph;
    rt_input(g, "x", AMP_DT_FLOAT, "2");
    static const int64_t d2[1] = {2};
    const float w[2] = {0.5f, -0.25f}, v[2] = {0, 0};
    rt_init(g, "W", AMP_DT_FLOAT, 1, d2, w);
    if (seed_is_input)
        rt_input(g, "loss_grad", AMP_DT_FLOAT, "");
    else
        rt_scalar_f(g, "loss_grad", 1.0f);
    nd(g, "Mul", "fwd/mul", "x,W", "p");
    AmpNode *r = nd(g, "ReduceSum", "loss/sum", "p", "loss");
    attr_i(r, "keepdims", 0);
    nd(g, "Mul", "bwd/mul", "x,loss_grad", "W_grad");
    rt_output(g, "loss", AMP_DT_FLOAT, "");
    if (!algorithm) {
        rt_output(g, "W_grad", AMP_DT_FLOAT, "2");
        return m;
    }
    rt_init(g, "V", AMP_DT_FLOAT, 1, d2, v);
    rt_scalar_f(g, "lr", 0.125f);
    AmpGraph *a = rt_training(m);
    nd(a, "Add", "opt/v", "V,W_grad", "V_new");
    nd(a, "Mul", "opt/step", "lr,V_new", "W_step");
    nd(a, "Sub", "opt/w", "W,W_step", "W_new");
    rt_output(a, "V_new", AMP_DT_FLOAT, "2");
    rt_output(a, "W_new", AMP_DT_FLOAT, "2");
    rt_bindings(m, false, "W=W_new,V=V_new");
    return m;
}

static inline AmpCode scale_it(AmpModel *m, const AmpPassOptions *po) {
    amp_status_clear(&st);
    AmpPipelineOptions o = {.verify_each = true, .pass = po};
    return amp_run_pipeline(m, "infer,loss_scale,infer", &o, &st);
}

static inline void scaled(AmpModel *m, const AmpPassOptions *po) {
    cr_assert_eq(scale_it(m, po), AMP_OK, "%s", st.msg);
}

static inline const AmpTensor *init_of(const AmpModel *m, const char *name) {
    AmpValue *v = val_of(m->graph, name);
    cr_assert_not_null(v->initializer, "'%s' has no initial value", name);
    return v->initializer;
}

static inline bool is_input(const AmpGraph *g, const char *name) {
    for (size_t i = 0; i < g->inputs.n; i++)
        if (strcmp(g->inputs.items[i].value->name, name) == 0) return true;
    return false;
}

static inline bool is_output(const AmpGraph *g, const char *name) {
    for (size_t i = 0; i < g->outputs.n; i++)
        if (strcmp(g->outputs.items[i].value->name, name) == 0) return true;
    return false;
}

static inline const char *bound_to(const AmpModel *m, const char *key) {
    const char *v = NULL;
    for (size_t i = 0; i < m->n_training; i++)
        for (size_t k = 0; k < m->training[i].n_update_bindings; k++)
            if (strcmp(m->training[i].update_bindings[k].key, key) == 0) v = m->training[i].update_bindings[k].value;
    return v;
}

#endif
