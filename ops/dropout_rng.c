/* Dropout's attributes and geometry, every backend's (ops/dropout_rng.h). */
#include <stdlib.h>
#include <string.h>

#include "ops/dropout_rng.h"
#include "ops/ew_common.h" /* amp_ew_need */
#include "ops/kernel_out.h"

AmpCode amp_ew_prepare_dropout(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    AmpDropoutAttrs *a = malloc(sizeof *a);
    if (!a) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    a->ratio = opset < 12 ? amp_node_attr_float(n, "ratio", 0.5f) : 0.5;
    const AmpAttr *seed = amp_node_attr(n, "seed");
    a->has_seed = seed && seed->type == AMP_ATTR_INT;
    a->seed = a->has_seed ? seed->i : 0;
    *attrs = a;
    return AMP_OK;
}

AmpCode amp_dropout_geom(AmpKernelCtx *k, void *geom, bool *made) {
    (void)made;
    AmpDropoutGeom *g = geom;
    AmpCode rc = amp_ew_need(k, 1);
    if (rc) return rc;
    const AmpBuf *x = k->in[0];
    g->mask_dtype = k->opset >= 10 ? AMP_DT_BOOL : x->dtype;
    rc = amp_geom_check(k, 0, x->dtype, x->rank, x->dims);
    return rc ? rc : amp_geom_check(k, 1, g->mask_dtype, x->rank, x->dims);
}

AmpCode amp_dropout_grad_geom(AmpKernelCtx *k, void *geom, bool *made) {
    (void)made;
    AmpDropoutGradGeom *g = geom;
    AmpCode rc = amp_ew_need(k, 2);
    if (rc) return rc;
    const AmpBuf *dy = k->in[0], *mask = k->in[1];
    if (mask->dtype != AMP_DT_BOOL || mask->rank != dy->rank ||
        (dy->rank && memcmp(mask->dims, dy->dims, (size_t)dy->rank * sizeof *dy->dims)))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "mask must be bool with dY's shape");
    g->n = dy->nelem;
    return amp_geom_check(k, 0, dy->dtype, dy->rank, dy->dims);
}
