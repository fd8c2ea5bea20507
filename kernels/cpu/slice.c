/* CPU kernels: Slice (ONNX clamping, negative steps; the geometry is ops/slice.c's) and Pad
 * (constant, reflect, edge, wrap; negative pads crop; the geometry is ops/pad.c's). Both
 * are dtype-generic byte copies; the attribute forms of the old opsets (Slice-1, Pad-1/2)
 * are read as well as the input forms. */
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/shape_impl.h"
#include "ops/pad.h"
#include "ops/slice.h"

static const AmpBuf *in_or_null(AmpKernelCtx *k, int i) {
    return i < k->n_in ? k->in[i] : NULL;
}

AmpCode amp_sh_slice(AmpKernelCtx *k) {
    const AmpSliceAttrs *at = k->attrs;
    const AmpBuf *x = in_or_null(k, 0);
    if (!x) return amp_kernel_fail(k, AMP_ERR_INPUT, "no data input");
    size_t es = amp_sh_esize(k, x->dtype);
    if (!es) return k->st->code;
    int r = x->rank;
    int64_t starts[AMP_MAX_RANK], ends[AMP_MAX_RANK], axes[AMP_MAX_RANK], steps[AMP_MAX_RANK];
    size_t ns = 0, ne = 0, na = 0, nst = 0;
    const AmpBuf *ba = NULL, *bst = NULL;
    AmpCode rc;
    if (k->opset < 10) { /* Slice-1: starts, ends, axes attributes */
        if ((rc = amp_slice_attr_bounds(k, at, r, starts, &ns, ends, &ne, axes, &na))) return rc;
    } else {
        const AmpBuf *bs = in_or_null(k, 1), *be = in_or_null(k, 2);
        ba = in_or_null(k, 3), bst = in_or_null(k, 4);
        if (!bs || !be) return amp_kernel_fail(k, AMP_ERR_INPUT, "starts and ends inputs are required");
        if ((rc = amp_sh_ints(k, bs, "starts", starts, (size_t)r, &ns)) ||
            (rc = amp_sh_ints(k, be, "ends", ends, (size_t)r, &ne)) ||
            (ba && (rc = amp_sh_ints(k, ba, "axes", axes, (size_t)r, &na))) ||
            (bst && (rc = amp_sh_ints(k, bst, "steps", steps, (size_t)r, &nst))))
            return rc;
    }
    AmpSliceGeom g;
    if ((rc = amp_slice_geom(k, r, x->dims, starts, ns, ends, ne, axes, na, ba != NULL, steps, nst, bst != NULL, &g)))
        return rc;
    AmpBuf *y;
    if ((rc = amp_sh_out(k, x->dtype, r, g.count, &y)) || !y) return rc;
    amp_sh_strided_copy(y->data, x->data, es, r, g.count, g.strides, g.offset);
    return AMP_OK;
}

/* ---- Pad ------------------------------------------------------------------------------ */

/* Source index along an axis of size dim for padded coordinate c (= out index - pad
 * before), or -1 for the constant. */
static int64_t pad_src(int mode, int64_t c, int64_t dim) {
    if (c >= 0 && c < dim) return c;
    switch (mode) {
    case AMP_PAD_EDGE: return c < 0 ? 0 : dim - 1;
    case AMP_PAD_WRAP: return ((c % dim) + dim) % dim;
    case AMP_PAD_REFLECT: {
        if (dim == 1) return 0;
        int64_t p = 2 * (dim - 1); /* numpy's reflect: period 2 (dim - 1) */
        int64_t m = ((c % p) + p) % p;
        return m < dim ? m : p - m;
    }
    default: return -1;
    }
}

/* Opset 11+: the pads and axes inputs (an empty axes list means none given: na 0) and
 * the constant_value input, one element of x's dtype, into cval where given. The
 * attributes and the geometry are every backend's (ops/pad.h). */
static AmpCode pad_inputs(AmpKernelCtx *k, const AmpBuf *x, size_t es, int64_t *pads, size_t *np, int64_t *axes,
                          size_t *na, uint8_t *cval) {
    int r = x->rank;
    const AmpBuf *bp = in_or_null(k, 1), *bc = in_or_null(k, 2), *ba = in_or_null(k, 3);
    AmpCode rc;
    if (!bp) return amp_kernel_fail(k, AMP_ERR_INPUT, "no pads input");
    if ((rc = amp_sh_ints(k, bp, "pads", pads, 2 * (size_t)r, np))) return rc;
    if (ba && (rc = amp_sh_ints(k, ba, "axes", axes, (size_t)r, na))) return rc;
    if (bc && bc->nelem > 0) {
        if (bc->dtype != x->dtype)
            return amp_kernel_fail(k, AMP_ERR_INPUT, "constant_value is %s, data %s", amp_dtype_name(bc->dtype),
                                   amp_dtype_name(x->dtype));
        memcpy(cval, bc->data, es);
    }
    return AMP_OK;
}

/* y (dims) from x: a row of the last axis at a time, each element from its source index
 * per axis (pad_src), or the constant. */
static AmpCode pad_copy(AmpKernelCtx *k, int mode, const AmpBuf *x, AmpBuf *y, const int64_t *dims,
                        const int64_t *before, const uint8_t *cval, size_t es) {
    int r = x->rank;
    /* map[d] (dims[d] entries): the source index along axis d for each output index,
     * -1 where the constant goes. */
    size_t total = 0;
    for (int d = 0; d < r; d++) total += (size_t)dims[d];
    int64_t *map = malloc(total * sizeof *map), *maps[AMP_MAX_RANK];
    if (!map) return amp_fail(k->st, AMP_ERR_INTERNAL, "out of memory");
    for (int d = 0; d < r; d++) {
        maps[d] = d ? maps[d - 1] + dims[d - 1] : map;
        for (int64_t o = 0; o < dims[d]; o++) maps[d][o] = pad_src(mode, o - before[d], x->dims[d]);
    }
    int64_t strides[AMP_MAX_RANK], idx[AMP_MAX_RANK] = {0};
    amp_sh_strides(r, x->dims, strides);
    const char *src = x->data;
    char *dst = y->data;
    int64_t inner = dims[r - 1];
    const int64_t *last = maps[r - 1];
    for (uint64_t row = y->nelem / (uint64_t)inner; row > 0; row--) {
        int64_t base = 0;
        bool outside = false;
        for (int d = 0; d < r - 1; d++) {
            int64_t s = maps[d][idx[d]];
            if (s < 0) outside = true;
            else base += s * strides[d];
        }
        for (int64_t o = 0; o < inner; o++, dst += es) {
            if (outside || last[o] < 0) memcpy(dst, cval, es);
            else memcpy(dst, src + (size_t)(base + last[o]) * es, es);
        }
        for (int d = r - 2; d >= 0; d--) {
            if (++idx[d] < dims[d]) break;
            idx[d] = 0;
        }
    }
    free(map);
    return AMP_OK;
}

AmpCode amp_sh_pad(AmpKernelCtx *k) {
    const AmpPadAttrs *at = k->attrs; /* amp_pad_prepare */
    const AmpBuf *x = in_or_null(k, 0);
    if (!x) return amp_kernel_fail(k, AMP_ERR_INPUT, "no data input");
    size_t es = amp_sh_esize(k, x->dtype);
    if (!es) return k->st->code;
    int r = x->rank;
    int mode = at->mode;
    int64_t pads[2 * AMP_MAX_RANK], axes[AMP_MAX_RANK], before[AMP_MAX_RANK], dims[AMP_MAX_RANK];
    size_t np = 0, na = 0;
    uint8_t cval[16] = {0}; /* the constant, one element of x's dtype */
    AmpCode rc = k->opset < 11 ? amp_pad_attr_values(k, at, x, pads, &np, cval)
                               : pad_inputs(k, x, es, pads, &np, axes, &na, cval);
    if (rc || (rc = amp_pad_geom(k, mode, x, pads, np, axes, na, before, dims))) return rc;
    AmpBuf *y;
    if ((rc = amp_sh_out(k, x->dtype, r, dims, &y)) || !y) return rc;
    if (y->nelem == 0) return AMP_OK;
    if (r == 0) {
        memcpy(y->data, x->data, es);
        return AMP_OK;
    }
    return pad_copy(k, mode, x, y, dims, before, cval, es);
}
