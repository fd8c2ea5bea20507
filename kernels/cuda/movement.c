/* CUDA node-level kernels of the data-movement family (the CPU's shape.c, slice.c,
 * gather.c, tensor.c): each checks what the CPU kernel checks that its host can see,
 * sizes nothing (the outputs are placed) and launches movement.cu's kernels on the
 * session's stream. Where the CPU reads a small integer input (Slice bounds, Pad pads)
 * this reads it with amp_cuda_read_ints; Split, Tile and Expand read theirs from the
 * placed outputs' dims instead (no sync). Index values (Gather) live on the device: an
 * index outside the axis is clamped, where the CPU reports it. */
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/movement.h"
#include "ops/cast_engine.h"
#include "ops/sh_common.h"
#include "ops/slice.h"

static void *stream_of(AmpKernelCtx *k) {
    return amp_cuda_ctx(k)->stream;
}

static const AmpBuf *in_or_null(AmpKernelCtx *k, int i) {
    return i < k->n_in ? k->in[i] : NULL;
}

static const AmpBuf *need_in(AmpKernelCtx *k, int i, const char *what) {
    const AmpBuf *b = in_or_null(k, i);
    if (!b) amp_kernel_fail(k, AMP_ERR_INPUT, "input %d (%s) is missing", i, what);
    return b;
}

/* A view of `rank` dims whose destination is dense (row-major) and source strided. */
static void dense_view(AmpCudaView *v, int rank, const int64_t *dims, const int64_t *src) {
    v->rank = rank;
    int64_t s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        v->dims[d] = dims[d], v->src[d] = src[d], v->dst[d] = s;
        s *= dims[d];
    }
}

static AmpCode copy_view(AmpKernelCtx *k, void *dst, int64_t doff, const void *src, int64_t soff, size_t es,
                         const AmpCudaView *v) {
    return amp_cuda_check(k, amp_cuda_strided_copy(dst, doff, src, soff, es, v, stream_of(k)), "strided copy");
}

/* Reads integer input i (int32/int64, at most max values) into out; *n its count. */
static AmpCode read_ints(AmpKernelCtx *k, int i, int64_t *out, int max, size_t *n) {
    int c = amp_cuda_read_ints(k, i, out, max);
    if (c < 0) return k->st->code ? k->st->code : amp_kernel_fail(k, AMP_ERR_INPUT, "cannot read input %d", i);
    *n = (size_t)c;
    return AMP_OK;
}

/* ---- Identity, Reshape, Flatten, Squeeze, Unsqueeze: the bytes under the placed shape -- */

AmpCode amp_cuda_identity(AmpKernelCtx *k) {
    const AmpBuf *x = need_in(k, 0, "data");
    if (!x || !amp_cuda_mv_esize(k, x->dtype)) return k->st->code;
    AmpBuf *y;
    AmpCode rc = amp_sh_out_count(k, x->dtype, x->nelem, &y);
    if (rc || !y) return rc;
    size_t bytes = amp_buf_bytes(x);
    if (!bytes || y->data == x->data) return AMP_OK;
    return amp_cuda_copy(k, y->data, x->data, bytes);
}

/* ---- Transpose ------------------------------------------------------------------------ */

/* Transpose's and Concat's attributes are every backend's (TransposeAttrs, AxisAttrs in
 * ops/sh_common.h), parsed by amp_transpose_prepare and amp_concat_prepare (table.c). */

AmpCode amp_cuda_transpose(AmpKernelCtx *k) {
    const TransposeAttrs *a = k->attrs;
    const AmpBuf *x = need_in(k, 0, "data");
    if (!x) return k->st->code;
    size_t es = amp_cuda_mv_esize(k, x->dtype);
    if (!es) return k->st->code;
    int r = x->rank;
    int64_t perm[AMP_MAX_RANK];
    if (a->n) {
        if (a->n != (size_t)r) return amp_kernel_fail(k, AMP_ERR_INPUT, "perm has %zu entries for rank %d", a->n, r);
        memcpy(perm, a->perm, sizeof perm);
    } else {
        for (int i = 0; i < r; i++) perm[i] = r - 1 - i;
    }
    int64_t in_strides[AMP_MAX_RANK], dims[AMP_MAX_RANK], strides[AMP_MAX_RANK];
    amp_sh_strides(r, x->dims, in_strides);
    for (int i = 0; i < r; i++) dims[i] = x->dims[perm[i]], strides[i] = in_strides[perm[i]];
    AmpBuf *y;
    AmpCode rc = amp_sh_out(k, x->dtype, r, dims, &y);
    if (rc || !y || !y->nelem) return rc;
    AmpCudaView v;
    dense_view(&v, r, dims, strides);
    return copy_view(k, y->data, 0, x->data, 0, es, &v);
}

/* ---- Concat, Split ----------------------------------------------------------------------- */

AmpCode amp_cuda_concat(AmpKernelCtx *k) {
    const AxisAttrs *aa = k->attrs;
    if (k->n_in < 1) return amp_kernel_fail(k, AMP_ERR_INPUT, "no inputs");
    for (int i = 0; i < k->n_in; i++)
        if (!k->in[i]) return amp_kernel_fail(k, AMP_ERR_INPUT, "input %d is missing", i);
    const AmpBuf *x0 = k->in[0];
    size_t es = amp_cuda_mv_esize(k, x0->dtype);
    if (!es) return k->st->code;
    int axis;
    if (!amp_norm_axis(aa->axis, x0->rank, &axis))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "axis %lld is out of range for rank %d", (long long)aa->axis, x0->rank);
    int64_t dims[AMP_MAX_RANK];
    memcpy(dims, x0->dims, sizeof dims);
    dims[axis] = 0;
    for (int i = 0; i < k->n_in; i++) {
        const AmpBuf *x = k->in[i];
        if (x->dtype != x0->dtype || x->rank != x0->rank)
            return amp_kernel_fail(k, AMP_ERR_INPUT, "input %d differs in type or rank from input 0", i);
        for (int d = 0; d < x->rank; d++)
            if (d != axis && x->dims[d] != x0->dims[d])
                return amp_kernel_fail(k, AMP_ERR_INPUT, "input %d differs in shape from input 0 off the axis", i);
        if (x->dims[axis] > INT64_MAX - dims[axis])
            return amp_kernel_fail(k, AMP_ERR_INPUT, "the axis dims overflow int64 at input %d", i);
        dims[axis] += x->dims[axis];
    }
    AmpBuf *y;
    AmpCode rc = amp_sh_out(k, x0->dtype, x0->rank, dims, &y);
    if (rc || !y || !y->nelem) return rc;
    int64_t outer = (int64_t)amp_shape_nelem(axis, dims);
    int64_t inner = (int64_t)amp_shape_nelem(x0->rank - axis - 1, dims + axis + 1);
    int64_t start = 0;
    /* Each input is the (outer, d_i * inner) block at column start * inner of y's rows. */
    for (int i = 0; i < k->n_in; i++) {
        const AmpBuf *x = k->in[i];
        int64_t w = x->dims[axis] * inner;
        if (x->nelem) {
            AmpCudaView v = {.rank = 2, .dims = {outer, w}, .src = {w, 1}, .dst = {dims[axis] * inner, 1}};
            if ((rc = copy_view(k, y->data, start * inner, x->data, 0, es, &v))) return rc;
        }
        start += x->dims[axis];
    }
    return AMP_OK;
}

/* Split: axis (raw), and the split attribute's sizes (before opset 13) when the node has
 * no split input. */
typedef struct SplitAttrs {
    int64_t axis;
    bool has_split;
    size_t n;
    int64_t split[];
} SplitAttrs;

AmpCode amp_cuda_mv_split_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    int no = n->n_outputs;
    bool split_input = n->n_inputs > 1 && n->inputs[1];
    const AmpAttr *sa = amp_node_attr(n, "split");
    bool has_split = !split_input && opset < 13 && sa && sa->n_ints;
    if (has_split && sa->n_ints != (size_t)no)
        return amp_node_fail(n, st, AMP_ERR_INPUT, "split has %zu entries for %d outputs", sa->n_ints, no);
    if (!split_input && !has_split) {
        int64_t num = amp_node_attr_int(n, "num_outputs", no);
        if (num != no)
            return amp_node_fail(n, st, AMP_ERR_INPUT, "num_outputs is %lld but the node has %d outputs", (long long)num, no);
    }
    size_t cnt = has_split ? (size_t)no : 0;
    SplitAttrs *a = malloc(sizeof *a + cnt * sizeof a->split[0]);
    if (!a) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    a->axis = amp_node_attr_int(n, "axis", 0);
    a->has_split = has_split;
    a->n = cnt;
    for (size_t i = 0; i < cnt; i++) a->split[i] = sa->ints[i];
    *attrs = a;
    return AMP_OK;
}

/* The part sizes as the CPU computes them; the split input is read from the device only
 * when an output the node does not list leaves its size unknown. */
static AmpCode split_sizes(AmpKernelCtx *k, const SplitAttrs *a, int64_t dim, int axis, AmpBuf **outs,
                           int64_t *sizes) {
    int no = k->n_out;
    bool all = true;
    for (int i = 0; i < no; i++) all = all && outs[i];
    if (k->n_in > 1 && k->in[1]) {
        if (all) {
            for (int i = 0; i < no; i++) sizes[i] = outs[i]->rank > axis ? outs[i]->dims[axis] : -1;
        } else {
            size_t n = 0;
            AmpCode rc = read_ints(k, 1, sizes, no, &n);
            if (rc) return rc;
            if (n != (size_t)no) return amp_kernel_fail(k, AMP_ERR_INPUT, "split has %zu entries for %d outputs", n, no);
        }
    } else if (a->has_split) {
        if (a->n != (size_t)no)
            return amp_kernel_fail(k, AMP_ERR_INPUT, "split has %zu entries for %d outputs", a->n, no);
        for (int i = 0; i < no; i++) sizes[i] = a->split[i];
    } else if (k->opset >= 18) { /* uneven: ceil-sized chunks, the last smaller */
        int64_t chunk = dim / no + (dim % no != 0);
        for (int i = 0; i < no; i++) {
            int64_t left = dim - chunk * i;
            sizes[i] = left < 0 ? 0 : left < chunk ? left : chunk;
        }
    } else if (dim % no) {
        return amp_kernel_fail(k, AMP_ERR_INPUT, "axis of size %lld does not split into %d equal parts", (long long)dim,
                           no);
    } else {
        for (int i = 0; i < no; i++) sizes[i] = dim / no;
    }
    int64_t total = 0;
    for (int i = 0; i < no; i++) {
        if (sizes[i] < 0 || sizes[i] > dim - total)
            return amp_kernel_fail(k, AMP_ERR_INPUT, "split[%d] is %lld (negative or past the axis)", i,
                               (long long)sizes[i]);
        total += sizes[i];
    }
    if (total != dim)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "split sums to %lld, the axis has %lld", (long long)total, (long long)dim);
    return AMP_OK;
}

AmpCode amp_cuda_split(AmpKernelCtx *k) {
    const SplitAttrs *a = k->attrs;
    const AmpBuf *x = need_in(k, 0, "input");
    if (!x) return k->st->code;
    size_t es = amp_cuda_mv_esize(k, x->dtype);
    if (!es) return k->st->code;
    int axis;
    if (!amp_norm_axis(a->axis, x->rank, &axis))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "axis %lld is out of range for rank %d", (long long)a->axis, x->rank);
    int no = k->n_out;
    if (no < 1) return amp_kernel_fail(k, AMP_ERR_INPUT, "no outputs");
    int64_t dim = x->dims[axis];
    int64_t *sizes = malloc((size_t)no * sizeof *sizes);
    AmpBuf **outs = malloc((size_t)no * sizeof *outs);
    AmpCode rc = AMP_OK;
    if (!sizes || !outs) rc = amp_fail(k->st, AMP_ERR_INTERNAL, "out of memory");
    if (!rc) rc = amp_kernel_outputs(k, no, outs);
    if (!rc) rc = split_sizes(k, a, dim, axis, outs, sizes);
    int64_t outer = (int64_t)amp_shape_nelem(axis, x->dims);
    int64_t inner = (int64_t)amp_shape_nelem(x->rank - axis - 1, x->dims + axis + 1);
    int64_t start = 0;
    for (int i = 0; !rc && i < no; i++) {
        int64_t dims[AMP_MAX_RANK];
        memcpy(dims, x->dims, sizeof dims);
        dims[axis] = sizes[i];
        if (outs[i] && !(rc = amp_kernel_check_out(k, outs[i], x->dtype, x->rank, dims)) && outs[i]->nelem) {
            /* Output i: the (outer, sizes[i] * inner) block at column start * inner of x's rows. */
            int64_t w = sizes[i] * inner;
            AmpCudaView v = {.rank = 2, .dims = {outer, w}, .src = {dim * inner, 1}, .dst = {w, 1}};
            rc = copy_view(k, outs[i]->data, 0, x->data, start * inner, es, &v);
        }
        start += sizes[i];
    }
    free(sizes), free(outs);
    return rc;
}

/* ---- Slice ---------------------------------------------------------------------------------- */

AmpCode amp_cuda_slice(AmpKernelCtx *k) {
    const AmpSliceAttrs *at = k->attrs;
    const AmpBuf *x = need_in(k, 0, "data");
    if (!x) return k->st->code;
    size_t es = amp_cuda_mv_esize(k, x->dtype);
    if (!es) return k->st->code;
    int r = x->rank;
    int64_t starts[AMP_MAX_RANK], ends[AMP_MAX_RANK], axes[AMP_MAX_RANK], steps[AMP_MAX_RANK];
    size_t ns = 0, ne = 0, na = 0, nst = 0;
    bool ba = false, bst = false;
    AmpCode rc;
    if (k->opset < 10) {
        if ((rc = amp_slice_attr_bounds(k, at, r, starts, &ns, ends, &ne, axes, &na))) return rc;
    } else {
        ba = in_or_null(k, 3), bst = in_or_null(k, 4);
        if (!in_or_null(k, 1) || !in_or_null(k, 2))
            return amp_kernel_fail(k, AMP_ERR_INPUT, "starts and ends inputs are required");
        if ((rc = read_ints(k, 1, starts, r, &ns)) || (rc = read_ints(k, 2, ends, r, &ne)) ||
            (ba && (rc = read_ints(k, 3, axes, r, &na))) || (bst && (rc = read_ints(k, 4, steps, r, &nst))))
            return rc;
    }
    /* Per axis: first element, count and step, clamped as on every backend (ops/slice.c). */
    AmpSliceGeom g;
    if ((rc = amp_slice_geom(k, r, x->dims, starts, ns, ends, ne, axes, na, ba, steps, nst, bst, &g))) return rc;
    AmpBuf *y;
    if ((rc = amp_sh_out(k, x->dtype, r, g.count, &y)) || !y || !y->nelem) return rc;
    AmpCudaView v;
    dense_view(&v, r, g.count, g.strides);
    return copy_view(k, y->data, 0, x->data, g.offset, es, &v);
}

/* ---- Expand, Tile: the target read from the placed output ------------------------------ */

/* The placed output 0, of x's dtype and rank `rank` (-1: any). */
static AmpCode placed_out(AmpKernelCtx *k, const AmpBuf *x, int rank, AmpBuf **y) {
    AmpCode rc = amp_kernel_outputs(k, 1, y);
    if (rc || !*y) return rc;
    if ((*y)->dtype != x->dtype || (rank >= 0 && (*y)->rank != rank)) {
        char got[160];
        amp_buf_describe(*y, got, sizeof got);
        *y = NULL;
        return amp_kernel_fail(k, AMP_ERR_INTERNAL, "the output placed is %s, the kernel expects %s of rank %d", got,
                           amp_dtype_name(x->dtype), rank);
    }
    return AMP_OK;
}

AmpCode amp_cuda_expand(AmpKernelCtx *k) {
    const AmpBuf *x = need_in(k, 0, "input");
    if (!x) return k->st->code;
    size_t es = amp_cuda_mv_esize(k, x->dtype);
    if (!es) return k->st->code;
    AmpBuf *y;
    AmpCode rc = placed_out(k, x, -1, &y);
    if (rc || !y) return rc;
    /* y's shape is broadcast(x, shape): x must broadcast to it unchanged. */
    int r;
    int64_t dims[AMP_MAX_RANK], strides[AMP_MAX_RANK];
    if (!amp_broadcast_shape(x->rank, x->dims, y->rank, y->dims, &r, dims) ||
        (rc = amp_kernel_check_out(k, y, x->dtype, r, dims)))
        return rc ? rc : amp_kernel_fail(k, AMP_ERR_INTERNAL, "the placed output does not broadcast from the input");
    if (!y->nelem) return AMP_OK;
    amp_broadcast_strides(x->rank, x->dims, r, dims, strides);
    AmpCudaView v;
    dense_view(&v, r, dims, strides);
    return copy_view(k, y->data, 0, x->data, 0, es, &v);
}

AmpCode amp_cuda_tile(AmpKernelCtx *k) {
    const AmpBuf *x = need_in(k, 0, "input");
    if (!x) return k->st->code;
    size_t es = amp_cuda_mv_esize(k, x->dtype);
    if (!es) return k->st->code;
    int r = x->rank;
    AmpBuf *y;
    AmpCode rc = placed_out(k, x, r, &y);
    if (rc || !y || !y->nelem) return rc;
    /* View y as (rep0, d0, rep1, d1, ...), the repeats read with stride 0; rep = y / x. */
    int64_t vd[AMP_CUDA_VIEW_RANK], vs[AMP_CUDA_VIEW_RANK], in_strides[AMP_MAX_RANK];
    amp_sh_strides(r, x->dims, in_strides);
    for (int i = 0; i < r; i++) {
        if (x->dims[i] == 0 || y->dims[i] % x->dims[i])
            return amp_kernel_fail(k, AMP_ERR_INTERNAL, "the placed output's axis %d (%lld) is no multiple of the input's (%lld)",
                               i, (long long)y->dims[i], (long long)x->dims[i]);
        vd[2 * i] = y->dims[i] / x->dims[i], vs[2 * i] = 0;
        vd[2 * i + 1] = x->dims[i], vs[2 * i + 1] = in_strides[i];
    }
    AmpCudaView v;
    dense_view(&v, 2 * r, vd, vs);
    return copy_view(k, y->data, 0, x->data, 0, es, &v);
}

/* ---- Pad ------------------------------------------------------------------------------------ */

enum { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP };
static const char *const pad_modes[] = {"constant", "reflect", "edge", "wrap"};

/* Pad: the mode; before opset 11 also the pads attribute (Pad-1 'paddings', Pad-2 'pads')
 * and the constant ('value', a float). */
typedef struct PadAttrs {
    int mode;
    const char *pads_name;
    size_t np;
    int64_t pads[2 * AMP_MAX_RANK];
    float value;
} PadAttrs;

static int pad_mode(const AmpNode *n) {
    const char *ms = amp_node_attr_string(n, "mode", "constant");
    for (int i = 0; i < 4; i++)
        if (strcmp(ms, pad_modes[i]) == 0) return i;
    return -1;
}

AmpCode amp_cuda_mv_pad_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    PadAttrs a = {.mode = pad_mode(n)};
    if (a.mode < 0) return amp_node_fail(n, st, AMP_ERR_INPUT, "unknown mode '%s'", amp_node_attr_string(n, "mode", ""));
    if (opset < 11) {
        a.pads_name = amp_node_attr(n, "pads") ? "pads" : "paddings";
        const AmpAttr *pa = amp_node_attr(n, a.pads_name);
        a.np = pa ? pa->n_ints : 0;
        for (size_t i = 0; i < a.np && i < 2 * AMP_MAX_RANK; i++) a.pads[i] = pa->ints[i];
        a.value = amp_node_attr_float(n, "value", 0.0f);
    }
    return amp_prep_out(&a, sizeof a, attrs, st);
}

AmpCode amp_cuda_pad(AmpKernelCtx *k) {
    const PadAttrs *at = k->attrs;
    const AmpBuf *x = need_in(k, 0, "data");
    if (!x) return k->st->code;
    size_t es = amp_cuda_mv_esize(k, x->dtype);
    if (!es) return k->st->code;
    int r = x->rank, mode = at->mode;
    int64_t pads[2 * AMP_MAX_RANK], axes[AMP_MAX_RANK];
    size_t np = 0, na = 0;
    uint64_t cbits = 0;      /* the constant, by value (Pad-1/2) */
    const void *cval = NULL; /* or on the device (constant_value) */
    AmpCode rc;
    if (k->opset < 11) {
        if (at->np > 2 * (size_t)r)
            return amp_kernel_fail(k, AMP_ERR_INPUT, "%s has %zu values, at most %zu allowed", at->pads_name, at->np,
                               2 * (size_t)r);
        np = at->np;
        memcpy(pads, at->pads, np * sizeof *pads);
        float v = at->value;
        if (v != 0.0f && mode == PAD_CONSTANT) {
            if (!amp_sh_convertible(x->dtype)) return amp_kernel_bad_dtype(k, x->dtype);
            if ((rc = amp_sh_convert(k, &v, AMP_DT_FLOAT, &cbits, x->dtype, 1))) return rc;
        }
    } else {
        const AmpBuf *bc = in_or_null(k, 2);
        bool ba = in_or_null(k, 3);
        if (!in_or_null(k, 1)) return amp_kernel_fail(k, AMP_ERR_INPUT, "no pads input");
        if ((rc = read_ints(k, 1, pads, 2 * r, &np))) return rc;
        if (ba && (rc = read_ints(k, 3, axes, r, &na))) return rc;
        if (bc && bc->nelem > 0) {
            if (bc->dtype != x->dtype)
                return amp_kernel_fail(k, AMP_ERR_INPUT, "constant_value is %s, data %s", amp_dtype_name(bc->dtype),
                                   amp_dtype_name(x->dtype));
            cval = bc->data;
        }
        if (ba && na == 0) ba = false; /* an empty axes list means none given */
        if (ba && np != 2 * na) return amp_kernel_fail(k, AMP_ERR_INPUT, "pads has %zu values for %zu axes", np, na);
    }
    if (!na) {
        if (np != 2 * (size_t)r) return amp_kernel_fail(k, AMP_ERR_INPUT, "pads has %zu values for rank %d", np, r);
        na = (size_t)r;
        for (int d = 0; d < r; d++) axes[d] = d;
    }
    AmpCudaPad p = {.rank = r, .mode = mode};
    bool seen[AMP_MAX_RANK] = {false};
    int64_t after[AMP_MAX_RANK] = {0};
    for (size_t i = 0; i < na; i++) {
        int a;
        if (!amp_norm_axis(axes[i], r, &a))
            return amp_kernel_fail(k, AMP_ERR_INPUT, "axis %lld is out of range for rank %d", (long long)axes[i], r);
        if (seen[a]) return amp_kernel_fail(k, AMP_ERR_INPUT, "axis %d is repeated", a);
        seen[a] = true;
        p.before[a] = pads[i], after[a] = pads[i + na];
    }
    const int64_t lim = INT64_C(1) << 61;
    for (int d = 0; d < r; d++) {
        if (p.before[d] > lim || p.before[d] < -lim || after[d] > lim || after[d] < -lim)
            return amp_kernel_fail(k, AMP_ERR_INPUT, "pads on axis %d are too large", d);
        int64_t grow = p.before[d] + after[d];
        if (grow > 0 && x->dims[d] > INT64_MAX - grow)
            return amp_kernel_fail(k, AMP_ERR_INPUT, "pads on axis %d overflow int64 (%lld + %lld)", d,
                               (long long)x->dims[d], (long long)grow);
        p.xdims[d] = x->dims[d];
        p.odims[d] = x->dims[d] + grow;
        if (p.odims[d] < 0)
            return amp_kernel_fail(k, AMP_ERR_INPUT, "pads on axis %d crop more than the axis holds", d);
        if (p.odims[d] > 0 && x->dims[d] == 0 && mode != PAD_CONSTANT)
            return amp_kernel_fail(k, AMP_ERR_INPUT, "cannot %s-pad the empty axis %d", pad_modes[mode], d);
    }
    AmpBuf *y;
    if ((rc = amp_sh_out(k, x->dtype, r, p.odims, &y)) || !y || !y->nelem) return rc;
    return amp_cuda_check(k, amp_cuda_pad_copy(y->data, x->data, es, &p, cval, cbits, stream_of(k)), "Pad");
}

/* ---- supports ------------------------------------------------------------------------------- */

static bool present(const AmpNode *n, int i) {
    return i < n->n_inputs && n->inputs[i];
}

bool amp_cuda_supports_move(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    (void)opset;
    return present(n, 0) && amp_cuda_mv_movable(in_dtypes[0]);
}

bool amp_cuda_supports_concat(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    (void)opset;
    if (n->n_inputs < 1) return false;
    for (int i = 0; i < n->n_inputs; i++)
        if (!present(n, i) || !amp_cuda_mv_movable(in_dtypes[i]) || in_dtypes[i] != in_dtypes[0]) return false;
    return true;
}

bool amp_cuda_supports_split(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    (void)opset;
    return present(n, 0) && amp_cuda_mv_movable(in_dtypes[0]) && (!present(n, 1) || amp_cuda_mv_int(in_dtypes[1]));
}

bool amp_cuda_supports_slice(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    if (!present(n, 0) || !amp_cuda_mv_movable(in_dtypes[0])) return false;
    if (opset >= 10)
        for (int i = 1; i < 5; i++)
            if (present(n, i) && !amp_cuda_mv_int(in_dtypes[i])) return false;
    return true;
}

bool amp_cuda_supports_pad(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    if (!present(n, 0) || !amp_cuda_mv_movable(in_dtypes[0]) || pad_mode(n) < 0) return false;
    if (opset >= 11)
        return present(n, 1) && amp_cuda_mv_int(in_dtypes[1]) && (!present(n, 2) || in_dtypes[2] == in_dtypes[0]) &&
               (!present(n, 3) || amp_cuda_mv_int(in_dtypes[3]));
    /* Pad-1/2: a non-zero constant is converted to the data's dtype on the host. */
    return amp_node_attr_float(n, "value", 0.0f) == 0.0f || pad_mode(n) != PAD_CONSTANT ||
           amp_sh_convertible(in_dtypes[0]);
}
