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
#include "ops/geom.h"
#include "ops/pad.h"
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

/* Transpose's and Concat's attributes, checks and shapes are every backend's
 * (ops/sh_common.h: amp_transpose_prepare, amp_transpose_geom, amp_concat_prepare,
 * amp_concat_geom). */

AmpCode amp_cuda_transpose(AmpKernelCtx *k) {
    AmpTransposeGeom own;
    const AmpTransposeGeom *g; /* amp_transpose_geom (ops/sh_common.h) */
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&g);
    if (rc) return rc;
    const AmpBuf *x = k->in[0];
    size_t es = amp_cuda_mv_esize(k, x->dtype);
    if (!es) return k->st->code;
    AmpBuf *y;
    if ((rc = amp_kernel_outputs(k, 1, &y)) || !y || !y->nelem) return rc;
    AmpCudaView v;
    dense_view(&v, g->rank, g->dims, g->strides);
    return copy_view(k, y->data, 0, x->data, 0, es, &v);
}

/* ---- Concat, Split ----------------------------------------------------------------------- */

AmpCode amp_cuda_concat(AmpKernelCtx *k) {
    AmpConcatGeom own;
    const AmpConcatGeom *g; /* amp_concat_geom (ops/sh_common.h): the checks and the shape */
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&g);
    if (rc) return rc;
    const AmpBuf *x0 = k->in[0];
    size_t es = amp_cuda_mv_esize(k, x0->dtype);
    if (!es) return k->st->code;
    int axis = g->axis;
    const int64_t *dims = g->dims;
    AmpBuf *y;
    if ((rc = amp_kernel_outputs(k, 1, &y)) || !y || !y->nelem) return rc;
    int64_t outer = g->outer, inner = g->inner;
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

/* The part sizes as every backend computes them (amp_split_sizes, ops/sh_common.h): the
 * split input, where the node has one, is read from the placed outputs' dims when every
 * output is listed (no wait on the stream), else read back from the device. */
static AmpCode split_sizes(AmpKernelCtx *k, const AmpSplitAttrs *a, int64_t dim, int axis, AmpBuf **outs,
                           int64_t *sizes) {
    int no = k->n_out;
    bool given = k->n_in > 1 && k->in[1], all = true;
    size_t n = 0;
    for (int i = 0; i < no; i++) all = all && outs[i];
    if (given && all) {
        for (int i = 0; i < no; i++) sizes[i] = outs[i]->rank > axis ? outs[i]->dims[axis] : -1;
        n = (size_t)no;
    } else if (given) {
        AmpCode rc = read_ints(k, 1, sizes, no, &n);
        if (rc) return rc;
    }
    return amp_split_sizes(k, a, dim, no, given, n, sizes);
}

/* Part of a split (AmpSplitCopyFn): the (outer, w) block at column off of x's rows. */
static AmpCode split_copy(AmpKernelCtx *k, AmpBuf *y, const AmpBuf *x, size_t es, int64_t outer, int64_t w, int64_t row,
                          int64_t off) {
    if (!y->nelem) return AMP_OK;
    AmpCudaView v = {.rank = 2, .dims = {outer, w}, .src = {row, 1}, .dst = {w, 1}};
    return copy_view(k, y->data, 0, x->data, off, es, &v);
}

AmpCode amp_cuda_split(AmpKernelCtx *k) {
    AmpSplitGeom own;
    const AmpSplitGeom *g; /* amp_split_geom (ops/sh_common.h) */
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&g);
    if (rc) return rc;
    const AmpBuf *x = k->in[0];
    size_t es = amp_cuda_mv_esize(k, x->dtype);
    if (!es) return k->st->code;
    int64_t *sizes;
    AmpBuf **outs;
    if ((rc = amp_split_start(k, g, &sizes, &outs))) return rc;
    rc = amp_kernel_outputs(k, k->n_out, outs);
    if (!rc && !g->sized) rc = split_sizes(k, k->attrs, g->dim, g->axis, outs, sizes);
    if (!rc) rc = amp_split_parts(k, x, g, es, sizes, outs, split_copy);
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

AmpCode amp_cuda_expand(AmpKernelCtx *k) {
    const AmpBuf *x = need_in(k, 0, "input");
    if (!x) return k->st->code;
    size_t es = amp_cuda_mv_esize(k, x->dtype);
    if (!es) return k->st->code;
    /* y's shape is broadcast(x, shape), the placed output's: x must broadcast to it unchanged. */
    AmpBuf *y;
    int r;
    int64_t dims[AMP_MAX_RANK], strides[AMP_MAX_RANK];
    AmpCode rc = amp_expand_out(k, x, NULL, 0, &r, dims, strides, &y);
    if (rc || !y || !y->nelem) return rc;
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
    AmpCode rc = amp_sh_out_placed(k, x->dtype, r, &y);
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

/* The attributes and the geometry are every backend's (ops/pad.h); the pads and axes
 * inputs are read back from the device, the constant_value input stays there. */
AmpCode amp_cuda_pad(AmpKernelCtx *k) {
    const AmpPadAttrs *at = k->attrs; /* amp_pad_prepare */
    const AmpBuf *x = need_in(k, 0, "data");
    if (!x) return k->st->code;
    size_t es = amp_cuda_mv_esize(k, x->dtype);
    if (!es) return k->st->code;
    int r = x->rank;
    int64_t pads[2 * AMP_MAX_RANK], axes[AMP_MAX_RANK];
    size_t np = 0, na = 0;
    uint64_t cbits = 0;      /* the constant, by value (Pad-1/2) */
    const void *cval = NULL; /* or on the device (constant_value) */
    AmpCode rc;
    if (k->opset < 11) {
        if ((rc = amp_pad_attr_values(k, at, x, pads, &np, &cbits))) return rc;
    } else {
        const AmpBuf *bc = in_or_null(k, 2);
        if (!in_or_null(k, 1)) return amp_kernel_fail(k, AMP_ERR_INPUT, "no pads input");
        if ((rc = read_ints(k, 1, pads, 2 * r, &np))) return rc;
        if (in_or_null(k, 3) && (rc = read_ints(k, 3, axes, r, &na))) return rc;
        if (bc && bc->nelem > 0) {
            if (bc->dtype != x->dtype)
                return amp_kernel_fail(k, AMP_ERR_INPUT, "constant_value is %s, data %s", amp_dtype_name(bc->dtype),
                                       amp_dtype_name(x->dtype));
            cval = bc->data;
        }
    }
    AmpCudaPad p = {.rank = r, .mode = at->mode};
    if ((rc = amp_pad_geom(k, at->mode, x, pads, np, axes, na, p.before, p.odims))) return rc;
    memcpy(p.xdims, x->dims, (size_t)r * sizeof p.xdims[0]);
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
    if (!present(n, 0) || !amp_cuda_mv_movable(in_dtypes[0]) || amp_pad_mode(n) < 0) return false;
    if (opset >= 11)
        return present(n, 1) && amp_cuda_mv_int(in_dtypes[1]) && (!present(n, 2) || in_dtypes[2] == in_dtypes[0]) &&
               (!present(n, 3) || amp_cuda_mv_int(in_dtypes[3]));
    /* Pad-1/2: a non-zero constant is converted to the data's dtype on the host. */
    return amp_node_attr_float(n, "value", 0.0f) == 0.0f || amp_pad_mode(n) != AMP_PAD_CONSTANT ||
           amp_sh_convertible(in_dtypes[0]);
}
