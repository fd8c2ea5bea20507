/* Gemm's and FusedMatMul's attributes and the matrix products' geometry, every backend's
 * (ops/gemm_attrs.h). */
#include <stdlib.h>
#include <string.h>

#include "ir/kernel.h" /* amp_node_fail */
#include "ops/gemm_attrs.h"
#include "ops/kernel_out.h"

/* Gemm's attributes (AmpGemmAttrs) serve FusedMatMul too, whose beta goes unused. */
AmpGemmAttrs amp_gemm_attrs(const AmpNode *n) {
    return (AmpGemmAttrs){.ta = amp_node_attr_int(n, "transA", 0) != 0,
                          .tb = amp_node_attr_int(n, "transB", 0) != 0,
                          .alpha = amp_node_attr_float(n, "alpha", 1.0f),
                          .beta = amp_node_attr_float(n, "beta", 1.0f)};
}

static AmpCode mm_attrs_out(const AmpNode *n, void **attrs, AmpStatus *st) {
    AmpGemmAttrs *a = malloc(sizeof *a);
    if (!a) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    *a = amp_gemm_attrs(n);
    *attrs = a;
    return AMP_OK;
}

AmpCode amp_gemm_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    (void)opset;
    return mm_attrs_out(n, attrs, st);
}

/* transBatchA/B (batch axes moved into the matrix) are not implemented. */
AmpCode amp_fused_matmul_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    (void)opset;
    if (amp_node_attr_int(n, "transBatchA", 0) || amp_node_attr_int(n, "transBatchB", 0))
        return amp_node_fail(n, st, AMP_ERR_UNSUPPORTED, "transBatchA / transBatchB are not implemented");
    return mm_attrs_out(n, attrs, st);
}

AmpCode amp_matmul_geom(AmpKernelCtx *k, void *geom, bool *made) {
    (void)made;
    AmpMatmulGeom *s = geom;
    memset(s, 0, sizeof *s);
    const AmpGemmAttrs *at = k->attrs; /* NULL for MatMul */
    s->ta = at && at->ta, s->tb = at && at->tb;
    if (k->n_in < 2 || !k->in[0] || !k->in[1]) return amp_kernel_fail(k, AMP_ERR_INPUT, "needs two inputs");
    const AmpBuf *a = k->in[0], *b = k->in[1];
    if (a->dtype != b->dtype)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "inputs have different types (%s and %s)", amp_dtype_name(a->dtype),
                               amp_dtype_name(b->dtype));
    if (a->rank < 1 || b->rank < 1)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "inputs must have rank >= 1 (got %d and %d)", a->rank, b->rank);
    int ra = a->rank, rb = b->rank;
    int64_t ar = ra == 1 ? 1 : a->dims[ra - 2], ac = a->dims[ra - 1];
    int64_t br = rb == 1 ? b->dims[0] : b->dims[rb - 2], bc = rb == 1 ? 1 : b->dims[rb - 1];
    bool tA = s->ta && ra >= 2, tB = s->tb && rb >= 2;
    s->m = tA ? ac : ar;
    int64_t ka = tA ? ar : ac, kb = tB ? bc : br;
    s->n = tB ? br : bc;
    if (ka != kb)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "inner dimensions differ (%lld and %lld)", (long long)ka,
                               (long long)kb);
    s->kk = ka;
    s->nba = ra > 2 ? ra - 2 : 0, s->nbb = rb > 2 ? rb - 2 : 0;
    if (!amp_broadcast_shape(s->nba, a->dims, s->nbb, b->dims, &s->nb, s->batch))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "batch dimensions do not broadcast");
    amp_broadcast_strides(s->nba, a->dims, s->nb, s->batch, s->sa);
    amp_broadcast_strides(s->nbb, b->dims, s->nb, s->batch, s->sb);
    s->nbatch = amp_shape_nelem(s->nb, s->batch);
    s->na = amp_shape_nelem(s->nba, a->dims);
    s->nbm = amp_shape_nelem(s->nbb, b->dims);
    int yr = 0;
    int64_t yd[AMP_MAX_RANK];
    for (int i = 0; i < s->nb; i++) yd[yr++] = s->batch[i];
    if (ra > 1) yd[yr++] = s->m;
    if (rb > 1) yd[yr++] = s->n;
    return amp_geom_check(k, 0, a->dtype, yr, yd);
}

AmpCode amp_gemm_geom(AmpKernelCtx *k, void *geom, bool *made) {
    (void)made;
    AmpGemmGeom *g = geom;
    memset(g, 0, sizeof *g);
    const AmpGemmAttrs *at = k->attrs;
    if (k->n_in < 2 || !k->in[0] || !k->in[1]) return amp_kernel_fail(k, AMP_ERR_INPUT, "needs inputs A and B");
    const AmpBuf *a = k->in[0], *b = k->in[1], *c = k->n_in > 2 ? k->in[2] : NULL;
    if (b->dtype != a->dtype || (c && c->dtype != a->dtype))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "inputs have different types");
    if (a->rank != 2 || b->rank != 2)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "A and B must be 2-D (got rank %d and %d)", a->rank, b->rank);
    g->m = at->ta ? a->dims[1] : a->dims[0], g->ka = at->ta ? a->dims[0] : a->dims[1];
    int64_t kb = at->tb ? b->dims[1] : b->dims[0];
    g->n = at->tb ? b->dims[0] : b->dims[1];
    if (g->ka != kb)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "inner dimensions differ (%lld and %lld)", (long long)g->ka,
                               (long long)kb);
    int64_t ydims[2] = {g->m, g->n};
    if (c) {
        if (c->rank > 2) return amp_kernel_fail(k, AMP_ERR_INPUT, "C has rank %d; at most 2", c->rank);
        for (int i = 0; i < c->rank; i++) {
            int64_t want = ydims[2 - c->rank + i];
            if (c->dims[i] != 1 && c->dims[i] != want)
                return amp_kernel_fail(k, AMP_ERR_INPUT, "C does not broadcast to (%lld, %lld)", (long long)g->m,
                                       (long long)g->n);
        }
        /* C as (cm, cn): a row-major C repeats along an axis where it has one element */
        int64_t cm = c->rank == 2 ? c->dims[0] : 1, cn = c->rank >= 1 ? c->dims[c->rank - 1] : 1;
        g->has_c = true;
        g->c_rs = cm == 1 ? 0 : cn;
        g->c_cs = cn == 1 ? 0 : 1;
    }
    return amp_geom_check(k, 0, a->dtype, 2, ydims);
}
