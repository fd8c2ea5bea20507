/* Slice's attributes and geometry, every backend's (ops/slice.h). */
#include <stdlib.h>
#include <string.h>

#include "ops/slice.h"

static void int_list(const AmpNode *n, const char *name, AmpSliceInts *out) {
    const AmpAttr *a = amp_node_attr(n, name);
    out->n = a ? a->n_ints : 0;
    for (size_t i = 0; i < out->n && i < AMP_MAX_RANK; i++) out->v[i] = a->ints[i];
}

AmpCode amp_axis_once(AmpKernelCtx *k, int64_t axis, int r, bool *seen, int *a) {
    if (!amp_norm_axis(axis, r, a))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "axis %lld is out of range for rank %d", (long long)axis, r);
    if (seen[*a]) return amp_kernel_fail(k, AMP_ERR_INPUT, "axis %d is repeated", *a);
    seen[*a] = true;
    return AMP_OK;
}

AmpCode amp_slice_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    AmpSliceAttrs a = {0};
    if (opset < 10) {
        if (!amp_node_attr(n, "starts") || !amp_node_attr(n, "ends"))
            return amp_node_fail(n, st, AMP_ERR_INPUT, "starts and ends attributes are required");
        int_list(n, "starts", &a.starts);
        int_list(n, "ends", &a.ends);
        int_list(n, "axes", &a.axes);
    }
    AmpSliceAttrs *p = malloc(sizeof *p);
    if (!p) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    *p = a;
    *attrs = p;
    return AMP_OK;
}

/* An attribute list into out[] (at most max values, else AMP_ERR_INPUT). */
static AmpCode list_ints(AmpKernelCtx *k, const char *name, const AmpSliceInts *l, int64_t *out, size_t max,
                         size_t *n) {
    if (l->n > max) return amp_kernel_fail(k, AMP_ERR_INPUT, "%s has %zu values, at most %zu allowed", name, l->n, max);
    memcpy(out, l->v, l->n * sizeof *out);
    *n = l->n;
    return AMP_OK;
}

AmpCode amp_slice_attr_bounds(AmpKernelCtx *k, const AmpSliceAttrs *a, int r, int64_t *starts, size_t *ns,
                              int64_t *ends, size_t *ne, int64_t *axes, size_t *na) {
    AmpCode rc;
    if ((rc = list_ints(k, "starts", &a->starts, starts, (size_t)r, ns)) ||
        (rc = list_ints(k, "ends", &a->ends, ends, (size_t)r, ne)) ||
        (rc = list_ints(k, "axes", &a->axes, axes, (size_t)r, na)))
        return rc;
    return AMP_OK;
}

AmpCode amp_slice_geom(AmpKernelCtx *k, int r, const int64_t *x_dims, const int64_t *starts, size_t ns,
                       const int64_t *ends, size_t ne, int64_t *axes, size_t na, bool has_axes, int64_t *steps,
                       size_t nst, bool has_steps, AmpSliceGeom *g) {
    if ((has_axes && na != ns) || (has_steps && nst != ns) || ne != ns || (na && na != ns))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "starts, ends, axes and steps differ in length");
    if (!na)
        for (size_t i = 0; i < ns; i++) axes[i] = (int64_t)i;
    if (!nst)
        for (size_t i = 0; i < ns; i++) steps[i] = 1;

    /* Per axis: first element, element count, step (defaults: the whole axis). */
    memset(g, 0, sizeof *g);
    g->rank = r;
    bool seen[AMP_MAX_RANK] = {false};
    for (int d = 0; d < r; d++) g->count[d] = x_dims[d], g->step[d] = 1;
    for (size_t i = 0; i < ns; i++) {
        int a;
        AmpCode rc = amp_axis_once(k, axes[i], r, seen, &a);
        if (rc) return rc;
        if (steps[i] == 0) return amp_kernel_fail(k, AMP_ERR_INPUT, "step on axis %d is 0", a);
        amp_slice_range(x_dims[a], starts[i], ends[i], steps[i], &g->first[a], &g->count[a]);
        g->step[a] = g->count[a] > 1 ? steps[i] : 1; /* with 2 or more, |step| < dim: no overflow below */
    }
    int64_t contig[AMP_MAX_RANK], s = 1; /* row-major strides of X */
    for (int d = r - 1; d >= 0; d--) {
        contig[d] = s;
        s *= x_dims[d];
    }
    for (int d = 0; d < r; d++) {
        g->strides[d] = contig[d] * g->step[d];
        g->offset += g->first[d] * contig[d];
    }
    return AMP_OK;
}
