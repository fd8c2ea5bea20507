/* CPU kernels: Slice (ONNX clamping, negative steps; the geometry is ops/slice.c's) and Pad (constant, reflect,
 * edge, wrap; negative pads crop). Both are dtype-generic byte copies; the attribute
 * forms of the old opsets (Slice-1, Pad-1/2) are read as well as the input forms. */
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/shape_impl.h"
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

enum { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP };

/* Source index along an axis of size dim for padded coordinate c (= out index - pad
 * before), or -1 for the constant. */
static int64_t pad_src(int mode, int64_t c, int64_t dim) {
    if (c >= 0 && c < dim) return c;
    switch (mode) {
    case PAD_EDGE: return c < 0 ? 0 : dim - 1;
    case PAD_WRAP: return ((c % dim) + dim) % dim;
    case PAD_REFLECT: {
        if (dim == 1) return 0;
        int64_t p = 2 * (dim - 1); /* numpy's reflect: period 2 (dim - 1) */
        int64_t m = ((c % p) + p) % p;
        return m < dim ? m : p - m;
    }
    default: return -1;
    }
}

static const char *const pad_modes[] = {"constant", "reflect", "edge", "wrap"};

/* Pad: the mode; before opset 11 also the pads (Pad-1 'paddings', Pad-2 'pads') and the
 * constant ('value', a float). */
typedef struct PadAttrs {
    int mode;
    const char *pads_name;
    size_t np;                     /* values the attribute holds */
    int64_t pads[2 * AMP_MAX_RANK]; /* its first 2 * AMP_MAX_RANK */
    float value;
} PadAttrs;

AmpCode amp_sh_pad_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    PadAttrs a = {0};
    const char *ms = amp_node_attr_string(n, "mode", "constant");
    a.mode = -1;
    for (int i = 0; i < 4; i++)
        if (strcmp(ms, pad_modes[i]) == 0) a.mode = i;
    if (a.mode < 0) return amp_node_fail(n, st, AMP_ERR_INPUT, "unknown mode '%s'", ms);
    if (opset < 11) {
        a.pads_name = amp_node_attr(n, "pads") ? "pads" : "paddings";
        const AmpAttr *pa = amp_node_attr(n, a.pads_name);
        a.np = pa ? pa->n_ints : 0;
        for (size_t i = 0; i < a.np && i < 2 * AMP_MAX_RANK; i++) a.pads[i] = pa->ints[i];
        a.value = amp_node_attr_float(n, "value", 0.0f);
    }
    return amp_prep_out(&a, sizeof a, attrs, st);
}

/* The padding of each axis (before[d], after[d]; negative crops) from the attributes
 * (Pad-1, Pad-2) or the pads / axes inputs, and the constant, one element of x's dtype. */
static AmpCode pad_amounts(AmpKernelCtx *k, const PadAttrs *at, const AmpBuf *x, size_t es, int64_t *before,
                           int64_t *after, uint8_t *cval) {
    int r = x->rank;
    int64_t pads[2 * AMP_MAX_RANK], axes[AMP_MAX_RANK];
    size_t np = 0, na = 0;
    AmpCode rc;
    if (k->opset < 11) { /* Pad-1 'paddings', Pad-2 'pads'; 'value' a float attribute */
        if (at->np > 2 * (size_t)r)
            return amp_kernel_fail(k, AMP_ERR_INPUT, "%s has %zu values, at most %zu allowed", at->pads_name, at->np,
                               2 * (size_t)r);
        np = at->np;
        memcpy(pads, at->pads, np * sizeof *pads);
        float v = at->value;
        if (v != 0.0f && at->mode == PAD_CONSTANT) {
            if (!amp_sh_convertible(x->dtype)) return amp_kernel_bad_dtype(k, x->dtype);
            if ((rc = amp_sh_convert(k, &v, AMP_DT_FLOAT, cval, x->dtype, 1))) return rc;
        }
    } else {
        const AmpBuf *bp = in_or_null(k, 1), *bc = in_or_null(k, 2), *ba = in_or_null(k, 3);
        if (!bp) return amp_kernel_fail(k, AMP_ERR_INPUT, "no pads input");
        if ((rc = amp_sh_ints(k, bp, "pads", pads, 2 * (size_t)r, &np))) return rc;
        if (ba && (rc = amp_sh_ints(k, ba, "axes", axes, (size_t)r, &na))) return rc;
        if (bc && bc->nelem > 0) {
            if (bc->dtype != x->dtype)
                return amp_kernel_fail(k, AMP_ERR_INPUT, "constant_value is %s, data %s", amp_dtype_name(bc->dtype),
                                   amp_dtype_name(x->dtype));
            memcpy(cval, bc->data, es);
        }
        if (!ba) na = 0;
        else if (na == 0) ba = NULL; /* an empty axes list means none given */
        if (ba) {
            if (np != 2 * na) return amp_kernel_fail(k, AMP_ERR_INPUT, "pads has %zu values for %zu axes", np, na);
        }
    }
    if (!na) {
        if (np != 2 * (size_t)r) return amp_kernel_fail(k, AMP_ERR_INPUT, "pads has %zu values for rank %d", np, r);
        na = (size_t)r;
        for (int d = 0; d < r; d++) axes[d] = d;
    }
    bool seen[AMP_MAX_RANK] = {false};
    for (size_t i = 0; i < na; i++) {
        int a;
        if (!amp_norm_axis(axes[i], r, &a))
            return amp_kernel_fail(k, AMP_ERR_INPUT, "axis %lld is out of range for rank %d", (long long)axes[i], r);
        if (seen[a]) return amp_kernel_fail(k, AMP_ERR_INPUT, "axis %d is repeated", a);
        seen[a] = true;
        before[a] = pads[i], after[a] = pads[i + na];
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
    const PadAttrs *at = k->attrs;
    const AmpBuf *x = in_or_null(k, 0);
    if (!x) return amp_kernel_fail(k, AMP_ERR_INPUT, "no data input");
    size_t es = amp_sh_esize(k, x->dtype);
    if (!es) return k->st->code;
    int r = x->rank;
    int mode = at->mode;
    const char *ms = pad_modes[mode];

    int64_t before[AMP_MAX_RANK] = {0}, after[AMP_MAX_RANK] = {0}, dims[AMP_MAX_RANK];
    uint8_t cval[16] = {0}; /* the constant, one element of x's dtype */
    AmpCode rc = pad_amounts(k, at, x, es, before, after, cval);
    if (rc) return rc;
    const int64_t lim = INT64_C(1) << 61;
    for (int d = 0; d < r; d++) {
        if (before[d] > lim || before[d] < -lim || after[d] > lim || after[d] < -lim)
            return amp_kernel_fail(k, AMP_ERR_INPUT, "pads on axis %d are too large", d);
        /* |before + after| <= 2^62, but the axis itself may be up to INT64_MAX (empty) */
        int64_t grow = before[d] + after[d];
        if (grow > 0 && x->dims[d] > INT64_MAX - grow)
            return amp_kernel_fail(k, AMP_ERR_INPUT, "pads on axis %d overflow int64 (%lld + %lld)", d,
                               (long long)x->dims[d], (long long)grow);
        dims[d] = x->dims[d] + grow;
        if (dims[d] < 0) return amp_kernel_fail(k, AMP_ERR_INPUT, "pads on axis %d crop more than the axis holds", d);
        if (dims[d] > 0 && x->dims[d] == 0 && mode != PAD_CONSTANT)
            return amp_kernel_fail(k, AMP_ERR_INPUT, "cannot %s-pad the empty axis %d", ms, d);
    }
    AmpBuf *y;
    if ((rc = amp_sh_out(k, x->dtype, r, dims, &y)) || !y) return rc;
    if (y->nelem == 0) return AMP_OK;
    if (r == 0) {
        memcpy(y->data, x->data, es);
        return AMP_OK;
    }
    return pad_copy(k, mode, x, y, dims, before, cval, es);
}
