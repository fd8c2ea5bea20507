/* CPU kernels: data movement that only re-views or re-orders bytes (Reshape, Flatten,
 * Squeeze, Unsqueeze, Identity, Transpose, Concat, Split, Expand, Tile, DepthToSpace,
 * SpaceToDepth, and Trilu, which zeroes what it drops) and the helpers the family shares. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/parallel.h"
#include "kernels/cpu/shape_impl.h"
#include "ops/geom.h"

/* ---- shared helpers ---------------------------------------------------------------- */


/* Copies `n` elements of size es from src (element stride `is`) to dense dst. */
static void copy_row(char *dst, const char *src, size_t es, int64_t n, int64_t is) {
    if (is == 1) {
        memcpy(dst, src, (size_t)n * es);
        return;
    }
    switch (es) {
    case 1:
        for (int64_t i = 0; i < n; i++) dst[i] = src[i * is];
        break;
    case 2:
        for (int64_t i = 0; i < n; i++) memcpy(dst + 2 * i, src + 2 * i * is, 2);
        break;
    case 4:
        for (int64_t i = 0; i < n; i++) memcpy(dst + 4 * i, src + 4 * i * is, 4);
        break;
    case 8:
        for (int64_t i = 0; i < n; i++) memcpy(dst + 8 * i, src + 8 * i * is, 8);
        break;
    default:
        for (int64_t i = 0; i < n; i++) memcpy(dst + (size_t)i * es, src + (i * is) * (int64_t)es, es);
    }
}

/* A strided copy with its axes merged (amp_sh_strided_copy): rows of dims[rank - 1]. */
typedef struct CopyJob {
    char *d;
    const char *s;
    size_t es;
    int rank;
    int64_t dims[AMP_SH_MAX_VIEW], strides[AMP_SH_MAX_VIEW];
    int64_t offset;
} CopyJob;

/* Rows [from, to): the odometer set at row `from`, then walked. */
static void copy_rows(void *ctx, int64_t from, int64_t to) {
    const CopyJob *j = ctx;
    const int64_t *dims = j->dims, *strides = j->strides;
    int rank = j->rank;
    int64_t inner = dims[rank - 1], is = strides[rank - 1];
    int64_t idx[AMP_SH_MAX_VIEW] = {0};
    int64_t base = j->offset;
    for (int64_t ax = rank - 2, r = from; ax >= 0; ax--) {
        idx[ax] = r % dims[ax], r /= dims[ax];
        base += idx[ax] * strides[ax];
    }
    char *d = j->d + (size_t)from * (size_t)inner * j->es;
    for (int64_t row = from; row < to; row++) {
        copy_row(d, j->s + base * (int64_t)j->es, j->es, inner, is);
        d += (size_t)inner * j->es;
        /* Odometer over the outer axes. */
        for (int ax = rank - 2; ax >= 0; ax--) {
            base += strides[ax];
            if (++idx[ax] < dims[ax]) break;
            base -= strides[ax] * dims[ax];
            idx[ax] = 0;
        }
    }
}

void amp_sh_strided_copy(void *dst, const void *src, size_t es, int rank, const int64_t *dims,
                         const int64_t *strides, int64_t offset) {
    const char *s = (const char *)src;
    char *d = dst;
    if (rank == 0) {
        memcpy(d, s + offset * (int64_t)es, es);
        return;
    }
    uint64_t n = amp_shape_nelem(rank, dims);
    if (n == 0) return;
    /* Adjacent axes the source walks as one (stride of the outer = the inner's extent)
     * merge, which leaves the order alone and makes the rows longer: a batch-channel swap
     * of (N, C, H, W) copies rows of H*W, not of W. */
    int64_t md[AMP_SH_MAX_VIEW], ms[AMP_SH_MAX_VIEW];
    int mr = 0;
    for (int ax = 0; ax < rank; ax++) {
        if (dims[ax] == 1) continue;
        if (mr && ms[mr - 1] == dims[ax] * strides[ax]) {
            md[mr - 1] *= dims[ax], ms[mr - 1] = strides[ax];
        } else {
            md[mr] = dims[ax], ms[mr] = strides[ax], mr++;
        }
    }
    if (mr == 0) md[0] = 1, ms[0] = 1, mr = 1;
    CopyJob j = {.d = d, .s = s, .es = es, .rank = mr, .offset = offset};
    memcpy(j.dims, md, sizeof md), memcpy(j.strides, ms, sizeof ms);
    /* rows sliced over the CPU's threads, at least ~64 KiB each */
    int64_t row_bytes = md[mr - 1] * (int64_t)es;
    amp_parallel_for((int64_t)(n / (uint64_t)md[mr - 1]), row_bytes >= (1 << 16) ? 1 : (1 << 16) / row_bytes, 1,
                     copy_rows, &j);
}

/* ---- kernels ------------------------------------------------------------------------ */

static const AmpBuf *need_in(AmpKernelCtx *k, int i, const char *what) {
    if (i < k->n_in && k->in[i]) return k->in[i];
    amp_kernel_fail(k, AMP_ERR_INPUT, "input %d (%s) is missing", i, what);
    return NULL;
}

/* Output 0 = the bytes of x, under the shape the executor placed (no reordering: any
 * dtype but string); the counts must agree. */
static AmpCode copy_as(AmpKernelCtx *k, const AmpBuf *x) {
    if (amp_dtype_bits(x->dtype) == 0) return amp_kernel_bad_dtype(k, x->dtype);
    AmpBuf *y;
    AmpCode rc = amp_sh_out_count(k, x->dtype, x->nelem, &y);
    if (rc || !y) return rc;
    size_t bytes = amp_buf_bytes(x);
    if (bytes) memcpy(y->data, x->data, bytes);
    return AMP_OK;
}

AmpCode amp_cpu_identity(AmpKernelCtx *k) {
    const AmpBuf *x = need_in(k, 0, "input");
    return x ? copy_as(k, x) : k->st->code;
}

/* Reshape: the target given as an attribute (Reshape-1) and allowzero. */
typedef struct ReshapeAttrs {
    bool allowzero;
    size_t n; /* Reshape-1's target length */
    int64_t shape[AMP_MAX_RANK];
} ReshapeAttrs;

AmpCode amp_cpu_reshape_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    ReshapeAttrs a = {.allowzero = amp_node_attr_int(n, "allowzero", 0) != 0};
    if (opset < 5) { /* Reshape-1: the shape was an attribute */
        const AmpAttr *sa = amp_node_attr(n, "shape");
        if (!sa) return amp_node_fail(n, st, AMP_ERR_INPUT, "no shape attribute");
        if (sa->n_ints > AMP_MAX_RANK)
            return amp_node_fail(n, st, AMP_ERR_UNSUPPORTED, "target rank %zu is over %d", sa->n_ints, AMP_MAX_RANK);
        a.n = sa->n_ints;
        for (size_t i = 0; i < a.n; i++) a.shape[i] = sa->ints[i];
    }
    return amp_prep_out(&a, sizeof a, attrs, st);
}

/* The target is checked against the input here although the executor sized the output
 * from it: the copy relies on the element counts agreeing, and a bad target is the
 * model's error (AMP_ERR_INPUT), not the executor's. */
AmpCode amp_cpu_reshape(AmpKernelCtx *k) {
    const ReshapeAttrs *a = k->attrs;
    const AmpBuf *x = need_in(k, 0, "data");
    if (!x) return k->st->code;
    int64_t shape[AMP_MAX_RANK];
    size_t n = 0;
    if (k->opset < 5) {
        n = a->n;
        memcpy(shape, a->shape, sizeof shape);
    } else {
        const AmpBuf *s = need_in(k, 1, "shape");
        if (!s) return k->st->code;
        if (s->nelem > AMP_MAX_RANK)
            return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "target rank %llu is over %d", (unsigned long long)s->nelem,
                               AMP_MAX_RANK);
        AmpCode rc = amp_sh_ints(k, s, "shape", shape, AMP_MAX_RANK, &n);
        if (rc) return rc;
    }
    int infer = -1;
    bool has_zero = false;
    int64_t known = 1;
    for (size_t i = 0; i < n; i++) {
        int64_t v = shape[i];
        if (v == -1) {
            if (infer >= 0) return amp_kernel_fail(k, AMP_ERR_INPUT, "shape has more than one -1");
            infer = (int)i;
            continue;
        }
        if (v < -1) return amp_kernel_fail(k, AMP_ERR_INPUT, "shape[%zu] is %lld", i, (long long)v);
        if (v == 0 && !a->allowzero) {
            if ((int)i >= x->rank)
                return amp_kernel_fail(k, AMP_ERR_INPUT, "shape[%zu] is 0 (copy) but the input has rank %d", i, x->rank);
            v = shape[i] = x->dims[i];
        }
        if (v == 0) has_zero = true;
        if (!amp_sh_mul(known, v, &known)) return amp_kernel_fail(k, AMP_ERR_INPUT, "shape is too large");
    }
    if (infer >= 0) {
        if (has_zero && a->allowzero) return amp_kernel_fail(k, AMP_ERR_INPUT, "allowzero shape has both 0 and -1");
        if (known == 0 || x->nelem % (uint64_t)known)
            return amp_kernel_fail(k, AMP_ERR_INPUT, "cannot infer the -1 dimension for %llu elements",
                               (unsigned long long)x->nelem);
        shape[infer] = (int64_t)(x->nelem / (uint64_t)known);
    } else if ((uint64_t)known != x->nelem) {
        return amp_kernel_fail(k, AMP_ERR_INPUT, "shape holds %lld elements, the input %llu", (long long)known,
                           (unsigned long long)x->nelem);
    }
    if (amp_dtype_bits(x->dtype) == 0) return amp_kernel_bad_dtype(k, x->dtype);
    AmpBuf *y;
    AmpCode rc = amp_sh_out(k, x->dtype, (int)n, shape, &y);
    if (rc || !y) return rc;
    size_t bytes = amp_buf_bytes(x);
    if (bytes) memcpy(y->data, x->data, bytes);
    return AMP_OK;
}

/* Flatten, Squeeze and Unsqueeze re-view the bytes: their shape function (the same
 * attributes and axes) sized the output, and checked what this copy does not rely on. */
AmpCode amp_cpu_flatten(AmpKernelCtx *k) {
    const AmpBuf *x = need_in(k, 0, "input");
    return x ? copy_as(k, x) : k->st->code;
}

AmpCode amp_cpu_squeeze(AmpKernelCtx *k) {
    const AmpBuf *x = need_in(k, 0, "data");
    return x ? copy_as(k, x) : k->st->code;
}

/* Unsqueeze's axes are required: an attribute before opset 13, input 1 since. A node
 * without them (an opset-11 attribute at opset 13, say) has no output shape, and this
 * copy relies on one: refused when prepared, naming the node. */
AmpCode amp_cpu_unsqueeze_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    *attrs = NULL;
    if (opset <= 0) return AMP_OK;
    if (opset >= 13 && !(n->n_inputs > 1 && n->inputs[1]))
        return amp_node_fail(n, st, AMP_ERR_INPUT, "no axes input (Unsqueeze takes its axes as input 1 since opset 13)");
    if (opset < 13 && !amp_node_attr(n, "axes"))
        return amp_node_fail(n, st, AMP_ERR_INPUT, "no axes attribute (Unsqueeze takes its axes as input 1 only since opset 13)");
    return AMP_OK;
}

AmpCode amp_cpu_unsqueeze(AmpKernelCtx *k) {
    const AmpBuf *x = need_in(k, 0, "data");
    return x ? copy_as(k, x) : k->st->code;
}

AmpCode amp_cpu_transpose(AmpKernelCtx *k) {
    AmpTransposeGeom own;
    const AmpTransposeGeom *g; /* amp_transpose_geom (ops/sh_common.h) */
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&g);
    if (rc) return rc;
    const AmpBuf *x = k->in[0];
    size_t es = amp_sh_esize(k, x->dtype);
    if (!es) return k->st->code;
    AmpBuf *y;
    if ((rc = amp_kernel_outputs(k, 1, &y)) || !y) return rc;
    amp_sh_strided_copy(y->data, x->data, es, g->rank, g->dims, g->strides, 0);
    return AMP_OK;
}

/* com.microsoft ConcatTraining: Concat, and (output 1, when wanted) each input's length
 * along the axis, int64. */
AmpCode amp_ms_concat_training(AmpKernelCtx *k) {
    AmpConcatGeom own;
    const AmpConcatGeom *g; /* amp_concat_geom (ops/sh_common.h), the lengths' output checked too */
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&g);
    if (rc) return rc;
    AmpKernelCtx one = *k;
    one.n_out = 1;
    one.geom = g;
    rc = amp_cpu_concat(&one);
    if (rc || k->n_out < 2 || !k->out || !k->out[1].data) return rc;
    AmpBuf *len = &k->out[1];
    const AmpBuf *x0 = k->in[0];
    int axis;
    if (!x0 || !amp_norm_axis(amp_node_attr_int(k->node, "axis", 0), x0->rank, &axis))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "axis out of range");
    for (int i = 0; i < k->n_in; i++) ((int64_t *)len->data)[i] = k->in[i] ? k->in[i]->dims[axis] : 0;
    return AMP_OK;
}

AmpCode amp_cpu_concat(AmpKernelCtx *k) {
    AmpConcatGeom own;
    const AmpConcatGeom *g; /* amp_concat_geom (ops/sh_common.h): the checks and the shape */
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&g);
    if (rc) return rc;
    const AmpBuf *x0 = k->in[0];
    size_t es = amp_sh_esize(k, x0->dtype);
    if (!es) return k->st->code;
    int axis = g->axis;
    AmpBuf *y;
    if ((rc = amp_kernel_outputs(k, 1, &y)) || !y) return rc;
    if (!y->nelem) return AMP_OK; /* no element, however many empty rows ([2^40, 0]) */
    uint64_t outer = (uint64_t)g->outer, inner = (uint64_t)g->inner;
    char *d = y->data;
    for (uint64_t o = 0; o < outer; o++)
        for (int i = 0; i < k->n_in; i++) {
            size_t chunk = (size_t)(k->in[i]->dims[axis] * inner) * es; // one (dim_i, inner) block
            if (chunk) memcpy(d, (const char *)k->in[i]->data + o * chunk, chunk);
            d += chunk;
        }
    return AMP_OK;
}

/* Part of a split (AmpSplitCopyFn): a view (outer, w) of x's rows. */
static AmpCode split_copy(AmpKernelCtx *k, AmpBuf *y, const AmpBuf *x, size_t es, int64_t outer, int64_t w, int64_t row,
                          int64_t off) {
    (void)k;
    int64_t vd[2] = {outer, w}, vs[2] = {row, 1};
    amp_sh_strided_copy(y->data, x->data, es, 2, vd, vs, off);
    return AMP_OK;
}

AmpCode amp_cpu_split(AmpKernelCtx *k) {
    AmpSplitGeom own;
    const AmpSplitGeom *g; /* amp_split_geom (ops/sh_common.h) */
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&g);
    if (rc) return rc;
    const AmpBuf *x = k->in[0];
    size_t es = amp_sh_esize(k, x->dtype);
    if (!es) return k->st->code;
    int no = k->n_out;
    int64_t *sizes;
    AmpBuf **outs;
    if ((rc = amp_split_start(k, g, &sizes, &outs))) return rc;
    /* the sizes where the geometry has none: the split input's values (read here), or the
     * attribute's, or equal parts (ops/sh_common.h, every backend's) */
    size_t n = 0;
    bool given = k->n_in > 1 && k->in[1];
    if (!g->sized && given) rc = amp_sh_ints(k, k->in[1], "split", sizes, (size_t)no, &n);
    if (!rc && !g->sized) rc = amp_split_sizes(k, k->attrs, g->dim, no, given, n, sizes);
    if (!rc) rc = amp_kernel_outputs(k, no, outs);
    if (!rc) rc = amp_split_parts(k, x, g, es, sizes, outs, split_copy);
    free(sizes), free(outs);
    return rc;
}

AmpCode amp_cpu_expand(AmpKernelCtx *k) {
    const AmpBuf *x = need_in(k, 0, "input"), *s = x ? need_in(k, 1, "shape") : NULL;
    if (!s) return k->st->code;
    size_t es = amp_sh_esize(k, x->dtype);
    if (!es) return k->st->code;
    if (s->nelem > AMP_MAX_RANK)
        return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "shape of rank %llu is over %d", (unsigned long long)s->nelem,
                           AMP_MAX_RANK);
    int64_t shape[AMP_MAX_RANK], dims[AMP_MAX_RANK], strides[AMP_MAX_RANK];
    size_t n;
    AmpCode rc = amp_sh_ints(k, s, "shape", shape, AMP_MAX_RANK, &n);
    if (rc) return rc;
    for (size_t i = 0; i < n; i++)
        if (shape[i] < 0) return amp_kernel_fail(k, AMP_ERR_INPUT, "shape[%zu] is %lld", i, (long long)shape[i]);
    int r;
    AmpBuf *y;
    if ((rc = amp_expand_out(k, x, shape, (int)n, &r, dims, strides, &y)) || !y) return rc;
    amp_sh_strided_copy(y->data, x->data, es, r, dims, strides, 0);
    return AMP_OK;
}

AmpCode amp_cpu_tile(AmpKernelCtx *k) {
    const AmpBuf *x = need_in(k, 0, "input"), *rb = x ? need_in(k, 1, "repeats") : NULL;
    if (!rb) return k->st->code;
    size_t es = amp_sh_esize(k, x->dtype);
    if (!es) return k->st->code;
    int r = x->rank;
    int64_t rep[AMP_MAX_RANK];
    size_t n;
    AmpCode rc;
    if (k->opset < 6 && k->n_in > 2 && k->in[2]) { /* Tile-1: (input, tiles, axis) scalars */
        int64_t t, ax;
        if ((rc = amp_sh_ints(k, rb, "tiles", &t, 1, &n)) || n != 1)
            return rc ? rc : amp_kernel_fail(k, AMP_ERR_INPUT, "tiles must hold one value");
        if ((rc = amp_sh_ints(k, k->in[2], "axis", &ax, 1, &n)) || n != 1)
            return rc ? rc : amp_kernel_fail(k, AMP_ERR_INPUT, "axis must hold one value");
        int a;
        if (!amp_norm_axis(ax, r, &a)) return amp_kernel_fail(k, AMP_ERR_INPUT, "axis %lld is out of range", (long long)ax);
        for (int i = 0; i < r; i++) rep[i] = i == a ? t : 1;
        n = (size_t)r;
    } else if ((rc = amp_sh_ints(k, rb, "repeats", rep, AMP_MAX_RANK, &n))) {
        return rc;
    }
    if (n != (size_t)r) return amp_kernel_fail(k, AMP_ERR_INPUT, "repeats has %zu entries for rank %d", n, r);
    /* View the output as (rep0, d0, rep1, d1, ...): repeats read with stride 0. */
    int64_t dims[AMP_MAX_RANK], vd[AMP_SH_MAX_VIEW], vs[AMP_SH_MAX_VIEW], in_strides[AMP_MAX_RANK];
    amp_sh_strides(r, x->dims, in_strides);
    for (int i = 0; i < r; i++) {
        if (rep[i] < 0) return amp_kernel_fail(k, AMP_ERR_INPUT, "repeats[%d] is %lld", i, (long long)rep[i]);
        if (!amp_sh_mul(x->dims[i], rep[i], &dims[i])) return amp_kernel_fail(k, AMP_ERR_INPUT, "output is too large");
        vd[2 * i] = rep[i], vs[2 * i] = 0;
        vd[2 * i + 1] = x->dims[i], vs[2 * i + 1] = in_strides[i];
    }
    AmpBuf *y;
    if ((rc = amp_sh_out(k, x->dtype, r, dims, &y)) || !y) return rc;
    amp_sh_strided_copy(y->data, x->data, es, 2 * r, vd, vs, 0);
    return AMP_OK;
}

/* DepthToSpace and SpaceToDepth: blocksize, and DepthToSpace's mode. */
typedef struct BlockAttrs {
    int64_t b;
    bool crd; /* DepthToSpace mode CRD (else DCR) */
} BlockAttrs;

AmpCode amp_cpu_depth_space_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    (void)opset;
    BlockAttrs a = {.b = amp_node_attr_int(n, "blocksize", 0)};
    if (a.b < 1 || a.b > (INT64_C(1) << 31))
        return amp_node_fail(n, st, AMP_ERR_INPUT, "blocksize %lld is invalid", (long long)a.b);
    if (n->op == AMP_OP_DepthToSpace) {
        const char *mode = amp_node_attr_string(n, "mode", "DCR");
        a.crd = strcmp(mode, "CRD") == 0;
        if (!a.crd && strcmp(mode, "DCR") != 0) return amp_node_fail(n, st, AMP_ERR_INPUT, "unknown mode '%s'", mode);
    }
    return amp_prep_out(&a, sizeof a, attrs, st);
}

/* DepthToSpace (to_space) and SpaceToDepth on (N, C, H, W) as one 6-D strided copy. */
static AmpCode depth_space(AmpKernelCtx *k, bool to_space) {
    const BlockAttrs *a = k->attrs;
    const AmpBuf *x = need_in(k, 0, "input");
    if (!x) return k->st->code;
    size_t es = amp_sh_esize(k, x->dtype);
    if (!es) return k->st->code;
    if (x->rank != 4) return amp_kernel_fail(k, AMP_ERR_INPUT, "input must be 4-D (N, C, H, W), not rank %d", x->rank);
    int64_t b = a->b;
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3], dims[4], vd[6], vs[6];
    if (to_space) {
        if (C % (b * b))
            return amp_kernel_fail(k, AMP_ERR_INPUT, "channels %lld are not a multiple of blocksize^2", (long long)C);
        int64_t c = C / (b * b);
        dims[0] = N, dims[1] = c;
        if (!amp_sh_mul(H, b, &dims[2]) || !amp_sh_mul(W, b, &dims[3]))
            return amp_kernel_fail(k, AMP_ERR_INPUT, "output is too large");
        /* Output walked as (N, c, H, b1, W, b2); the input channel is
         * DCR: (b1, b2, c), CRD: (c, b1, b2). */
        bool crd = a->crd;
        int64_t hw = H * W;
        int64_t sc = crd ? b * b * hw : hw, sb1 = crd ? b * hw : b * c * hw, sb2 = crd ? hw : c * hw;
        int64_t d6[6] = {N, c, H, b, W, b}, s6[6] = {C * hw, sc, W, sb1, 1, sb2};
        memcpy(vd, d6, sizeof vd), memcpy(vs, s6, sizeof vs);
    } else {
        if (H % b || W % b) return amp_kernel_fail(k, AMP_ERR_INPUT, "height and width must be multiples of blocksize");
        int64_t h = H / b, w = W / b;
        dims[0] = N, dims[2] = h, dims[3] = w;
        if (!amp_sh_mul(C, b * b, &dims[1])) return amp_kernel_fail(k, AMP_ERR_INPUT, "output is too large");
        /* Output walked as (N, b1, b2, C, h, w), reading x[n, c, h*b + b1, w*b + b2]. */
        int64_t d6[6] = {N, b, b, C, h, w}, s6[6] = {C * H * W, W, 1, H * W, b * W, b};
        memcpy(vd, d6, sizeof vd), memcpy(vs, s6, sizeof vs);
    }
    AmpBuf *y;
    AmpCode rc = amp_sh_out(k, x->dtype, 4, dims, &y);
    if (rc || !y) return rc;
    amp_sh_strided_copy(y->data, x->data, es, 6, vd, vs, 0);
    return AMP_OK;
}

AmpCode amp_cpu_depth_to_space(AmpKernelCtx *k) {
    return depth_space(k, true);
}

AmpCode amp_cpu_space_to_depth(AmpKernelCtx *k) {
    return depth_space(k, false);
}

/* Trilu's upper attribute. */
typedef struct TriluAttrs {
    bool upper;
} TriluAttrs;

AmpCode amp_cpu_trilu_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    (void)opset;
    TriluAttrs a = {amp_node_attr_int(n, "upper", 1) != 0};
    return amp_prep_out(&a, sizeof a, attrs, st);
}

/* Trilu: each matrix of the last two axes keeps its upper (upper = 1, the default) or
 * lower triangle, k diagonals above the main one (input 1, default 0; negative: below),
 * and the rest becomes zero. Any dtype but string. */
AmpCode amp_cpu_trilu(AmpKernelCtx *k) {
    const TriluAttrs *a = k->attrs;
    const AmpBuf *x = need_in(k, 0, "input");
    if (!x) return k->st->code;
    if (x->rank < 2) return amp_kernel_fail(k, AMP_ERR_INPUT, "the input must have rank 2 or more, not %d", x->rank);
    int64_t diag = 0;
    if (k->n_in > 1 && k->in[1]) {
        size_t n = 0;
        AmpCode rc = amp_sh_ints(k, k->in[1], "k", &diag, 1, &n);
        if (rc) return rc;
        if (n != 1) return amp_kernel_fail(k, AMP_ERR_INPUT, "k must hold one value, not %zu", n);
    }
    bool upper = a->upper;
    if (amp_dtype_bits(x->dtype) == 0 || amp_dtype_bits(x->dtype) % 8) return amp_kernel_bad_dtype(k, x->dtype);
    AmpBuf *y;
    AmpCode rc = amp_sh_out(k, x->dtype, x->rank, x->dims, &y);
    if (rc || !y) return rc;
    size_t es = amp_dtype_bits(x->dtype) / 8, bytes = amp_buf_bytes(x);
    if (bytes) memcpy(y->data, x->data, bytes);
    int64_t rows = x->dims[x->rank - 2], cols = x->dims[x->rank - 1];
    /* Past either corner every row keeps or drops all: clamping keeps i + diag defined. */
    diag = diag < -rows ? -rows : diag > cols ? cols : diag;
    uint64_t mats = rows && cols ? x->nelem / (uint64_t)(rows * cols) : 0;
    char *d = y->data;
    for (uint64_t m = 0; m < mats; m++)
        for (int64_t i = 0; i < rows; i++) {
            /* Row i keeps columns from i + diag on (upper) or up to i + diag (lower): the
             * rest, [lo, hi), becomes zero. */
            int64_t edge = i + diag, lo = upper ? 0 : edge + 1, hi = upper ? edge : cols;
            if (lo < 0) lo = 0;
            if (hi > cols) hi = cols;
            if (lo < hi)
                memset(d + ((m * (uint64_t)rows + (uint64_t)i) * (uint64_t)cols + (uint64_t)lo) * es, 0,
                       (size_t)(hi - lo) * es);
        }
    return AMP_OK;
}
