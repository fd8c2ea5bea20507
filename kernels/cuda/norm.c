/* CUDA node-level kernels: Softmax and LogSoftmax, LayerNormalization,
 * BatchNormalization (inference and training), InstanceNormalization and
 * GroupNormalization, for float32, float16 and bfloat16 data with every float input of X's
 * type. Attributes (the prepare functions both backends share, ops/norm_attrs.h), layouts,
 * checks and empty tensors as kernels/cpu/softmax.c and norm.c. */
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/norm.h"
#include "ops/geom.h"

_Static_assert(AMP_CUDA_NORM_MAX_RANK == AMP_MAX_RANK, "norm.h's rank bound is AMP_MAX_RANK");

/* ---- Softmax / LogSoftmax ------------------------------------------------------------ */

/* The attributes and the row layout are every backend's (amp_softmax_prepare,
 * amp_softmax_layout: ops/norm_attrs.h). */


static AmpCode softmax_run(AmpKernelCtx *k, bool log_out) {
    AmpSoftmaxGeom own;
    const AmpSoftmaxGeom *g; /* amp_softmax_geom (ops/norm_attrs.h) */
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&g);
    if (rc) return rc;
    const AmpBuf *x = k->in[0];
    if (!amp_cuda_is_float(x->dtype)) return amp_kernel_bad_dtype(k, x->dtype);
    uint64_t outer = g->outer, d = g->d, inner = g->inner;
    AmpBuf *y;
    if ((rc = amp_kernel_outputs(k, 1, &y)) || !y) return rc;
    if (!x->nelem) return AMP_OK; /* no element, however many empty rows */
    int err = amp_cuda_softmax_launch(x->dtype, log_out, x->data, y->data, (int64_t)outer, (int64_t)d,
                                      (int64_t)inner, amp_cuda_ctx(k)->stream);
    return amp_cuda_check(k, err, "softmax kernel");
}

AmpCode amp_cuda_softmax(AmpKernelCtx *k) { return softmax_run(k, false); }
AmpCode amp_cuda_log_softmax(AmpKernelCtx *k) { return softmax_run(k, true); }

/* ---- attributes of the normalisations ---------------------------------------------------- */

/* The attributes are every backend's (amp_norm_prepare: AmpNormAttrs, ops/norm_attrs.h). */

/* Every float input of one type, and float32 statistics (stash_type 1). */
bool amp_cuda_supports_layernorm(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    return amp_cuda_supports_float(n, opset, in_dtypes) && amp_node_attr_int(n, "stash_type", AMP_DT_FLOAT) == AMP_DT_FLOAT;
}

/* Five inputs of one float type, spatial statistics; inference or training (batch
 * statistics, the running-statistics outputs typed as the inputs). */
bool amp_cuda_supports_batchnorm(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    if (!amp_cuda_supports_float(n, opset, in_dtypes) || n->n_inputs != 5) return false;
    for (int i = 0; i < 5; i++)
        if (!n->inputs[i]) return false;
    return !(opset < 9 && amp_node_attr_int(n, "spatial", 1) == 0);
}

/* ---- LayerNormalization ------------------------------------------------------------- */

/* A parameter p that is, past its leading 1s, exactly X's last q <= rank - axis dims:
 * it repeats every *n columns. */
static bool param_trailing(const AmpBuf *p, const AmpBuf *x, int axis, int64_t *n) {
    int lead = 0;
    while (lead < p->rank && p->dims[lead] == 1) lead++;
    int q = p->rank - lead;
    if (p->rank > x->rank || q > x->rank - axis) return false;
    int64_t e = 1;
    for (int i = 0; i < q; i++) {
        if (p->dims[lead + i] != x->dims[x->rank - q + i]) return false;
        e *= p->dims[lead + i];
    }
    *n = e > 0 ? e : 1;
    return true;
}

/* p's strides in X's index space, after checking it broadcasts to X (the CPU's param_map). */
static AmpCode param_strides(AmpKernelCtx *k, const AmpBuf *p, const AmpBuf *x, const char *what, int64_t *str) {
    int r = 0;
    int64_t bd[AMP_MAX_RANK];
    bool ok = p->rank <= x->rank && amp_broadcast_shape(x->rank, x->dims, p->rank, p->dims, &r, bd) && r == x->rank;
    for (int i = 0; ok && i < r; i++) ok = bd[i] == x->dims[i];
    if (!ok) return amp_kernel_fail(k, AMP_ERR_INPUT, "%s does not broadcast to X's shape", what);
    amp_broadcast_strides(p->rank, p->dims, x->rank, x->dims, str);
    return AMP_OK;
}

/* Y = (X - mean) * inv_std * Scale + B over the axes from `axis` on; Mean and InvStdDev
 * (X's dims before `axis`, then 1s) float32, where listed. */
AmpCode amp_cuda_layernorm(AmpKernelCtx *k) {
    AmpLayerNormGeom own;
    const AmpLayerNormGeom *g; /* amp_layernorm_geom (ops/norm_attrs.h) */
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&g);
    if (rc) return rc;
    const AmpBuf *x = k->in[0], *sc = k->in[1], *bi = k->n_in > 2 ? k->in[2] : NULL;
    if (!amp_cuda_is_float(x->dtype)) return amp_kernel_bad_dtype(k, x->dtype);
    if (sc->dtype != x->dtype) return amp_kernel_bad_dtype(k, sc->dtype);
    if (bi && bi->dtype != x->dtype) return amp_kernel_bad_dtype(k, bi->dtype);
    const AmpNormAttrs *na = k->attrs;
    int axis = g->axis;
    int64_t rows = (int64_t)g->rows, cols = (int64_t)g->cols;
    AmpCudaNormParam p;
    memset(&p, 0, sizeof p);
    p.n_b = 1;
    bool fast = param_trailing(sc, x, axis, &p.n_s) && (!bi || param_trailing(bi, x, axis, &p.n_b));
    if (!fast) {
        p.mode = AMP_CUDA_NP_GENERAL;
        p.rank = x->rank;
        memcpy(p.dims, x->dims, sizeof p.dims);
        rc = param_strides(k, sc, x, "Scale", p.sstr);
        if (!rc && bi) rc = param_strides(k, bi, x, "B", p.bstr);
    }
    AmpBuf *out[3] = {NULL};
    if (!rc) rc = amp_kernel_outputs(k, 3, out);
    if (rc) return rc;
    /* y only where it has elements; Mean and InvStdDev (one per row, NaN for an empty
     * row) wherever listed */
    void *y = out[0] && x->nelem ? out[0]->data : NULL;
    float *mean = out[1] ? out[1]->data : NULL, *inv = out[2] ? out[2]->data : NULL;
    int err = amp_cuda_rownorm_launch(x->dtype, x->data, sc->data, bi ? bi->data : NULL, y, mean, inv, rows, cols, &p,
                                      (float)na->eps, amp_cuda_ctx(k)->stream);
    return amp_cuda_check(k, err, "layernorm kernel");
}

/* ---- per-channel parameters: Batch/Instance/Group ------------------------------------ */

/* (X, scale, B, mean, var) -> Y, then running mean and var and (before opset 14) saved
 * mean and var where listed: the CPU's amp_cpu_batchnorm. Training (amp_batchnorm_trains)
 * takes the batch's statistics (population variance) and running = input * momentum +
 * batch * (1 - momentum); inference the given ones, which the extra outputs repeat. */
AmpCode amp_cuda_batchnorm(AmpKernelCtx *k) {
    AmpBatchNormGeom own;
    const AmpBatchNormGeom *g; /* amp_batchnorm_geom (ops/norm_attrs.h): X (N, C, S), the parameters 1-D of C */
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&g);
    if (rc) return rc;
    const AmpBuf *const *in = k->in;
    const AmpBuf *x = in[0];
    if (!amp_cuda_is_float(x->dtype)) return amp_kernel_bad_dtype(k, x->dtype);
    for (int i = 1; i < 5; i++)
        if (in[i]->dtype != x->dtype) return amp_kernel_bad_dtype(k, in[i]->dtype);
    int64_t N = (int64_t)g->n, C = (int64_t)g->c, S = (int64_t)g->s;
    const AmpNormAttrs *na = k->attrs;
    AmpBuf *out[5];
    if ((rc = amp_kernel_outputs(k, 5, out))) return rc;
    void *y = out[0] && x->nelem ? out[0]->data : NULL;
    void *stats[4];
    for (int i = 0; i < 4; i++) stats[i] = out[i + 1] ? out[i + 1]->data : NULL;
    int err;
    if (amp_batchnorm_trains(na, k->training))
        err = amp_cuda_batchnorm_train_launch(x->dtype, x->data, in[1]->data, in[2]->data, in[3]->data, in[4]->data, y,
                                              stats, N, C, S, (float)na->eps, (float)na->momentum,
                                              amp_cuda_ctx(k)->stream);
    else {
        err = y ? amp_cuda_batchnorm_launch(x->dtype, x->data, in[1]->data, in[2]->data, in[3]->data, in[4]->data, y, N,
                                            C, S, (float)na->eps, amp_cuda_ctx(k)->stream)
                : 0;
        /* the extra outputs of an inference node repeat the given statistics */
        for (int i = 0; !err && i < 4; i++)
            if (stats[i] && C) {
                const AmpBuf *src = in[i % 2 ? 4 : 3];
                AmpCode c2 = amp_cuda_copy(k, stats[i], src->data, amp_buf_bytes(src));
                if (c2) return c2;
            }
    }
    return amp_cuda_check(k, err, "batchnorm kernel");
}

/* InstanceNormalization and GroupNormalization: statistics per (n, group) over
 * (C / groups) * S contiguous elements; scale and bias per channel or per group as
 * amp_groupnorm_geom (ops/norm_attrs.h) says (the CPU's group_norm). */
static AmpCode group_norm(AmpKernelCtx *k) {
    AmpGroupNormGeom own;
    const AmpGroupNormGeom *gm; /* amp_groupnorm_geom (ops/norm_attrs.h) */
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&gm);
    if (rc) return rc;
    const AmpBuf *const *in = k->in;
    const AmpBuf *x = in[0];
    if (!amp_cuda_is_float(x->dtype)) return amp_kernel_bad_dtype(k, x->dtype);
    for (int i = 1; i < 3; i++)
        if (in[i]->dtype != x->dtype) return amp_kernel_bad_dtype(k, in[i]->dtype);
    int64_t N = (int64_t)gm->n, S = (int64_t)gm->s, groups = (int64_t)gm->groups;
    bool per_group = gm->per_group;
    const AmpNormAttrs *na = k->attrs;
    AmpBuf *y;
    if ((rc = amp_kernel_outputs(k, 1, &y)) || !y) return rc;
    if (!x->nelem) return AMP_OK; /* no element, however many empty rows */
    int64_t cpg = (int64_t)(gm->c / gm->groups);
    AmpCudaNormParam p;
    memset(&p, 0, sizeof p);
    if (per_group || cpg == 1) { /* one parameter per row */
        p.mode = AMP_CUDA_NP_ROW;
        p.n_s = p.n_b = groups;
    } else {
        p.mode = AMP_CUDA_NP_GROUP;
        p.groups = groups, p.cpg = cpg, p.s = S;
    }
    int err = amp_cuda_rownorm_launch(x->dtype, x->data, in[1]->data, in[2]->data, y->data, NULL, NULL, N * groups,
                                      cpg * S, &p, (float)na->eps, amp_cuda_ctx(k)->stream);
    return amp_cuda_check(k, err, "group norm kernel");
}

AmpCode amp_cuda_instancenorm(AmpKernelCtx *k) { return group_norm(k); }

AmpCode amp_cuda_groupnorm(AmpKernelCtx *k) { return group_norm(k); }
