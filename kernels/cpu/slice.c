/* CPU kernels: Slice (numpy-style clamping, negative steps) and Pad (constant, reflect,
 * edge, wrap; negative pads crop). Both are dtype-generic byte copies; the attribute
 * forms of the old opsets (Slice-1, Pad-1/2) are read as well as the input forms. */
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/shape_impl.h"

static const AmpBuf *in_or_null(AmpKernelCtx *k, int i) {
    return i < k->n_in ? k->in[i] : NULL;
}

/* An int list attribute as given: its length n, and its first AMP_MAX_RANK values (a
 * longer list fits no input; the kernel says so). */
typedef struct IntList {
    size_t n;
    int64_t v[AMP_MAX_RANK];
} IntList;

static void int_list(const AmpNode *n, const char *name, IntList *out) {
    const AmpAttr *a = amp_node_attr(n, name);
    out->n = a ? a->n_ints : 0;
    for (size_t i = 0; i < out->n && i < AMP_MAX_RANK; i++) out->v[i] = a->ints[i];
}

/* An attribute list into out[] (at most max values, else AMP_ERR_INPUT). */
static AmpCode list_ints(AmpKernelCtx *k, const char *name, const IntList *l, int64_t *out, size_t max, size_t *n) {
    if (l->n > max) return amp_kernel_fail(k, AMP_ERR_INPUT, "%s has %zu values, at most %zu allowed", name, l->n, max);
    memcpy(out, l->v, l->n * sizeof *out);
    *n = l->n;
    return AMP_OK;
}

/* Slice-1 (before opset 10): the starts, ends and axes attributes. */
typedef struct SliceAttrs {
    IntList starts, ends, axes;
} SliceAttrs;

AmpCode amp_sh_slice_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    SliceAttrs a = {0};
    if (opset < 10) {
        if (!amp_node_attr(n, "starts") || !amp_node_attr(n, "ends"))
            return amp_node_fail(n, st, AMP_ERR_INPUT, "starts and ends attributes are required");
        int_list(n, "starts", &a.starts);
        int_list(n, "ends", &a.ends);
        int_list(n, "axes", &a.axes);
    }
    return amp_sh_prep_out(&a, sizeof a, attrs, st);
}

AmpCode amp_sh_slice(AmpKernelCtx *k) {
    const SliceAttrs *at = k->attrs;
    const AmpBuf *x = in_or_null(k, 0);
    if (!x) return amp_kernel_fail(k, AMP_ERR_INPUT, "no data input");
    size_t es = amp_sh_esize(k, x->dtype);
    if (!es) return k->st->code;
    int r = x->rank;
    int64_t starts[AMP_MAX_RANK], ends[AMP_MAX_RANK], axes[AMP_MAX_RANK], steps[AMP_MAX_RANK];
    size_t ns = 0, ne = 0, na = 0, nst = 0;
    AmpCode rc;
    if (k->opset < 10) { /* Slice-1: starts, ends, axes attributes */
        if ((rc = list_ints(k, "starts", &at->starts, starts, (size_t)r, &ns)) ||
            (rc = list_ints(k, "ends", &at->ends, ends, (size_t)r, &ne)) ||
            (rc = list_ints(k, "axes", &at->axes, axes, (size_t)r, &na)))
            return rc;
    } else {
        const AmpBuf *bs = in_or_null(k, 1), *be = in_or_null(k, 2), *ba = in_or_null(k, 3), *bst = in_or_null(k, 4);
        if (!bs || !be) return amp_kernel_fail(k, AMP_ERR_INPUT, "starts and ends inputs are required");
        if ((rc = amp_sh_ints(k, bs, "starts", starts, (size_t)r, &ns)) ||
            (rc = amp_sh_ints(k, be, "ends", ends, (size_t)r, &ne)) ||
            (ba && (rc = amp_sh_ints(k, ba, "axes", axes, (size_t)r, &na))) ||
            (bst && (rc = amp_sh_ints(k, bst, "steps", steps, (size_t)r, &nst))))
            return rc;
        if (!ba) na = 0;
        if (!bst) nst = 0;
        if ((ba && na != ns) || (bst && nst != ns))
            return amp_kernel_fail(k, AMP_ERR_INPUT, "starts, ends, axes and steps differ in length");
    }
    if (ne != ns || (na && na != ns))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "starts, ends, axes and steps differ in length");
    if (!na)
        for (size_t i = 0; i < ns; i++) axes[i] = (int64_t)i;
    if (!nst)
        for (size_t i = 0; i < ns; i++) steps[i] = 1;

    /* Per axis: first element, element count, step (defaults: the whole axis). */
    int64_t first[AMP_MAX_RANK] = {0}, count[AMP_MAX_RANK], step[AMP_MAX_RANK];
    bool seen[AMP_MAX_RANK] = {false};
    for (int d = 0; d < r; d++) count[d] = x->dims[d], step[d] = 1;
    for (size_t i = 0; i < ns; i++) {
        int a;
        if (!amp_norm_axis(axes[i], r, &a))
            return amp_kernel_fail(k, AMP_ERR_INPUT, "axis %lld is out of range for rank %d", (long long)axes[i], r);
        if (seen[a]) return amp_kernel_fail(k, AMP_ERR_INPUT, "axis %d is repeated", a);
        seen[a] = true;
        int64_t dim = x->dims[a], s = starts[i], e = ends[i], st = steps[i], n;
        if (st == 0) return amp_kernel_fail(k, AMP_ERR_INPUT, "step on axis %d is 0", a);
        if (s < 0) s += dim;
        if (e < 0) e += dim;
        if (st > 0) {
            s = s < 0 ? 0 : s > dim ? dim : s;
            e = e < 0 ? 0 : e > dim ? dim : e;
            n = e > s ? 1 + (e - s - 1) / st : 0;
        } else {
            s = s < 0 ? 0 : s > dim - 1 ? dim - 1 : s;
            e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
            uint64_t ast = (uint64_t)0 - (uint64_t)st; /* |st| without overflow at INT64_MIN */
            n = s > e ? 1 + (int64_t)((uint64_t)(s - e - 1) / ast) : 0;
        }
        first[a] = n ? s : 0;
        count[a] = n;
        step[a] = n > 1 ? st : 1; /* with n >= 2, |st| < dim: no overflow below */
    }
    int64_t contig[AMP_MAX_RANK], strides[AMP_MAX_RANK], offset = 0;
    amp_sh_strides(r, x->dims, contig);
    for (int d = 0; d < r; d++) {
        strides[d] = contig[d] * step[d];
        offset += first[d] * contig[d];
    }
    AmpBuf *y;
    if ((rc = amp_sh_out(k, x->dtype, r, count, &y)) || !y) return rc;
    amp_sh_strided_copy(y->data, x->data, es, r, count, strides, offset);
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
    return amp_sh_prep_out(&a, sizeof a, attrs, st);
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
