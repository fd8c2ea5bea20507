/* The optimizers' attributes, every backend's (ops/optim_math.h). */
#include <string.h>

#include "ir/kernel.h" /* amp_node_fail */
#include "ops/kernel_out.h"
#include "ops/optim_math.h"

static AmpCode req_float(const AmpNode *n, AmpStatus *st, const char *name, double *out) {
    const AmpAttr *a = amp_node_attr(n, name);
    if (!a || a->type != AMP_ATTR_FLOAT)
        return amp_node_fail(n, st, AMP_ERR_INPUT, "float attribute '%s' is required", name);
    *out = a->f;
    return AMP_OK;
}

static AmpCode opt_attrs(const AmpNode *n, AmpStatus *st, AmpOptAttrs *a) {
    memset(a, 0, sizeof *a);
    a->kind = n->op == AMP_OP_Adam ? AMP_OPT_ADAM : n->op == AMP_OP_Momentum ? AMP_OPT_MOMENTUM : AMP_OPT_ADAGRAD;
    if (a->kind == AMP_OPT_ADAM) {
        a->alpha = amp_node_attr_float(n, "alpha", 0.9f);
        a->beta = amp_node_attr_float(n, "beta", 0.999f);
        a->eps = amp_node_attr_float(n, "epsilon", 1e-6f);
        a->norm = amp_node_attr_float(n, "norm_coefficient", 0.0f);
        a->norm_post = amp_node_attr_float(n, "norm_coefficient_post", 0.0f);
        return AMP_OK;
    }
    if (a->kind == AMP_OPT_ADAGRAD) {
        a->decay = amp_node_attr_float(n, "decay_factor", 0.0f);
        a->eps = amp_node_attr_float(n, "epsilon", 1e-6f);
        a->norm = amp_node_attr_float(n, "norm_coefficient", 0.0f);
        return AMP_OK;
    }
    /* Momentum: every attribute is required. */
    AmpCode rc = req_float(n, st, "alpha", &a->alpha);
    if (!rc) rc = req_float(n, st, "beta", &a->beta);
    if (!rc) rc = req_float(n, st, "norm_coefficient", &a->norm);
    if (rc) return rc;
    const char *mode = amp_node_attr_string(n, "mode", NULL);
    if (!mode) return amp_node_fail(n, st, AMP_ERR_INPUT, "attribute 'mode' is required");
    if (strcmp(mode, "nesterov") == 0) a->nesterov = 1;
    else if (strcmp(mode, "standard") != 0)
        return amp_node_fail(n, st, AMP_ERR_INPUT, "mode '%s' is neither 'standard' nor 'nesterov'", mode);
    return AMP_OK;
}

/* Adam, Momentum and Adagrad (by the node's op): an AmpOptAttrs (ops/optim_math.h), which
 * both backends' kernels read. */
AmpCode amp_optimizer_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    (void)opset;
    AmpOptAttrs a;
    AmpCode rc = opt_attrs(n, st, &a);
    return rc ? rc : amp_prep_out(&a, sizeof a, attrs, st);
}

/* An optimizer node's layout: R, T, then `groups` groups of *N inputs (X, G, the states),
 * and at most groups - 1 groups of N outputs (X_new, the new states); AMP_ERR_INPUT where
 * not. */
static AmpCode opt_layout(AmpKernelCtx *k, int groups, int *N) {
    int tensors = k->n_in - 2;
    if (tensors <= 0 || tensors % groups)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "expects R, T and %d inputs per optimised tensor, has %d inputs",
                               groups, k->n_in);
    *N = tensors / groups;
    if (k->n_out > (groups - 1) * *N)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "%d outputs for %d optimised tensors", k->n_out, *N);
    return AMP_OK;
}

AmpCode amp_optimizer_geom(AmpKernelCtx *k, void *geom, bool *made) {
    (void)made;
    AmpOptGeom *g = geom;
    const AmpOptAttrs *a = k->attrs;
    int n_state = a->kind == AMP_OPT_ADAM ? 2 : 1;
    g->groups = 2 + n_state;
    AmpCode rc = opt_layout(k, g->groups, &g->N);
    for (int i = 0; !rc && i < g->N; i++) {
        const AmpBuf *in[4];
        for (int j = 0; j < g->groups; j++) {
            in[j] = k->in[2 + j * g->N + i];
            if (!in[j]) return amp_kernel_fail(k, AMP_ERR_INPUT, "an optimizer input is missing");
            bool same = in[j]->rank == in[0]->rank;
            for (int d = 0; same && d < in[0]->rank; d++) same = in[j]->dims[d] == in[0]->dims[d];
            if (!same)
                return amp_kernel_fail(k, AMP_ERR_INPUT, "X, its gradient and its state must have the same shape");
        }
        for (int j = 0; !rc && j < 1 + n_state; j++) { /* X_new like X, each new state like its state */
            const AmpBuf *src = in[j == 0 ? 0 : 1 + j];
            rc = amp_geom_check(k, j * g->N + i, src->dtype, src->rank, src->dims);
        }
    }
    return rc;
}

void amp_opt_tensor_io(const AmpKernelCtx *k, int groups, int N, AmpBuf *const *outs, int i, const AmpBuf **in,
                       AmpBuf **out) {
    for (int g = 0; g < groups; g++) in[g] = k->in[2 + g * N + i];
    for (int g = 0; g < groups - 1; g++) out[g] = g * N + i < k->n_out ? outs[g * N + i] : NULL;
}

AmpCode amp_accumulator_outs(AmpKernelCtx *k, const AmpBuf *buf, AmpBuf **flag, AmpBuf **out) {
    const int64_t one = 1;
    AmpBuf *outs[2];
    AmpCode rc = amp_kernel_outputs(k, 2, outs);
    if (rc) return rc;
    *flag = outs[0], *out = outs[1];
    if (*flag && (rc = amp_kernel_check_out(k, *flag, AMP_DT_BOOL, 1, &one))) return rc;
    return *out ? amp_kernel_check_out(k, *out, buf->dtype, buf->rank, buf->dims) : AMP_OK;
}
