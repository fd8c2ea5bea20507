/* The data-movement family's helpers and attributes, every backend's (ops/sh_common.h). */
#include <stdlib.h>
#include <string.h>

#include "ops/kernel_out.h"
#include "ops/sh_common.h"

/* ---- element sizes, placed outputs, integer inputs, strides --------------------------- */

size_t amp_sh_esize(AmpKernelCtx *k, int dtype) {
    size_t bits = amp_dtype_bits(dtype);
    if (bits == 0 || bits % 8 != 0) {
        amp_kernel_bad_dtype(k, dtype);
        return 0;
    }
    return bits / 8;
}

AmpCode amp_sh_out(AmpKernelCtx *k, int dtype, int rank, const int64_t *dims, AmpBuf **y) {
    AmpCode rc = amp_kernel_outputs(k, 1, y);
    if (rc || !*y) return rc;
    if ((rc = amp_kernel_check_out(k, *y, dtype, rank, dims))) *y = NULL;
    return rc;
}

AmpCode amp_sh_out_placed(AmpKernelCtx *k, int dtype, int rank, AmpBuf **y) {
    AmpCode rc = amp_kernel_outputs(k, 1, y);
    if (rc || !*y) return rc;
    if ((*y)->dtype == dtype && (rank < 0 || (*y)->rank == rank)) return AMP_OK;
    char got[160];
    amp_buf_describe(*y, got, sizeof got);
    *y = NULL;
    if (rank < 0)
        return amp_kernel_fail(k, AMP_ERR_INTERNAL, "the output placed is %s, the kernel expects %s", got,
                               amp_dtype_name(dtype));
    return amp_kernel_fail(k, AMP_ERR_INTERNAL, "the output placed is %s, the kernel expects %s of rank %d", got,
                           amp_dtype_name(dtype), rank);
}

AmpCode amp_expand_out(AmpKernelCtx *k, const AmpBuf *x, const int64_t *shape, int n, int *r, int64_t *dims,
                       int64_t *strides, AmpBuf **y) {
    AmpCode rc;
    if (shape) {
        if (!amp_broadcast_shape(x->rank, x->dims, n, shape, r, dims))
            return amp_kernel_fail(k, AMP_ERR_INPUT, "input shape does not broadcast to the given shape");
        amp_broadcast_strides(x->rank, x->dims, *r, dims, strides);
        return amp_sh_out(k, x->dtype, *r, dims, y);
    }
    if ((rc = amp_sh_out_placed(k, x->dtype, -1, y)) || !*y) return rc;
    if (!amp_broadcast_shape(x->rank, x->dims, (*y)->rank, (*y)->dims, r, dims) ||
        (rc = amp_kernel_check_out(k, *y, x->dtype, *r, dims))) {
        *y = NULL;
        return rc ? rc : amp_kernel_fail(k, AMP_ERR_INTERNAL, "the placed output does not broadcast from the input");
    }
    amp_broadcast_strides(x->rank, x->dims, *r, dims, strides);
    return AMP_OK;
}

AmpCode amp_sh_out_count(AmpKernelCtx *k, int dtype, uint64_t nelem, AmpBuf **y) {
    AmpCode rc = amp_kernel_outputs(k, 1, y);
    if (rc || !*y) return rc;
    if ((*y)->dtype == dtype && (*y)->nelem == nelem) return AMP_OK;
    char got[160];
    amp_buf_describe(*y, got, sizeof got);
    *y = NULL;
    return amp_kernel_fail(k, AMP_ERR_INTERNAL, "the output placed is %s, the kernel expects %llu elements of %s", got,
                       (unsigned long long)nelem, amp_dtype_name(dtype));
}

AmpCode amp_sh_ints(AmpKernelCtx *k, const AmpBuf *b, const char *what, int64_t *out, size_t max, size_t *n) {
    switch (b->dtype) {
    case AMP_DT_INT64:
    case AMP_DT_INT32:
    case AMP_DT_INT16:
    case AMP_DT_INT8:
    case AMP_DT_UINT64:
    case AMP_DT_UINT32:
    case AMP_DT_UINT16:
    case AMP_DT_UINT8: break;
    default:
        return amp_kernel_fail(k, AMP_ERR_INPUT, "%s must be an integer tensor, not %s", what, amp_dtype_name(b->dtype));
    }
    if (b->rank > 1) return amp_kernel_fail(k, AMP_ERR_INPUT, "%s must be 1-D (it has rank %d)", what, b->rank);
    if (b->nelem > max) return amp_kernel_fail(k, AMP_ERR_INPUT, "%s has %llu values, at most %zu allowed", what,
                                           (unsigned long long)b->nelem, max);
    for (uint64_t i = 0; i < b->nelem; i++) out[i] = amp_buf_get_i64(b, i);
    *n = (size_t)b->nelem;
    return AMP_OK;
}

void amp_sh_strides(int rank, const int64_t *dims, int64_t *strides) {
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        strides[i] = s;
        s *= dims[i];
    }
}

/* ---- attributes, parsed once at prepare ---------------------------------------------- */

AmpCode amp_transpose_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    (void)opset;
    TransposeAttrs t = {0};
    const AmpAttr *a = amp_node_attr(n, "perm");
    if (a && a->n_ints) {
        t.n = a->n_ints; /* over AMP_MAX_RANK: fits no input, the kernel says so */
        bool seen[AMP_MAX_RANK] = {false};
        for (size_t i = 0; i < t.n && t.n <= AMP_MAX_RANK; i++) {
            int64_t p = a->ints[i];
            if (p < 0 || p >= (int64_t)t.n || seen[p]) return amp_node_fail(n, st, AMP_ERR_INPUT, "perm is not a permutation");
            seen[p] = true;
            t.perm[i] = p;
        }
    }
    return amp_prep_out(&t, sizeof t, attrs, st);
}

AmpCode amp_concat_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    const AmpAttr *aa = amp_node_attr(n, "axis");
    if (!aa && opset >= 4) return amp_node_fail(n, st, AMP_ERR_INPUT, "no axis attribute");
    AxisAttrs a = {aa ? aa->i : 1}; /* Concat-1: axis 1 by default */
    return amp_prep_out(&a, sizeof a, attrs, st);
}

/* Input i, or AMP_ERR_INPUT naming it (what) where missing. */
static AmpCode geom_in(AmpKernelCtx *k, int i, const char *what, const AmpBuf **x) {
    *x = i < k->n_in ? k->in[i] : NULL;
    return *x ? AMP_OK : amp_kernel_fail(k, AMP_ERR_INPUT, "input %d (%s) is missing", i, what);
}

AmpCode amp_transpose_geom(AmpKernelCtx *k, void *geom, bool *made) {
    (void)made;
    AmpTransposeGeom *g = geom;
    const TransposeAttrs *a = k->attrs;
    const AmpBuf *x;
    AmpCode rc = geom_in(k, 0, "data", &x);
    if (rc) return rc;
    int r = g->rank = x->rank;
    int64_t *dims = g->dims, *strides = g->strides;
    int64_t perm[AMP_MAX_RANK], in_strides[AMP_MAX_RANK];
    if (a->n) {
        if (a->n != (size_t)r) return amp_kernel_fail(k, AMP_ERR_INPUT, "perm has %zu entries for rank %d", a->n, r);
        memcpy(perm, a->perm, sizeof perm);
    } else {
        for (int i = 0; i < r; i++) perm[i] = r - 1 - i; /* reversed */
    }
    amp_sh_strides(r, x->dims, in_strides);
    for (int i = 0; i < r; i++) dims[i] = x->dims[perm[i]], strides[i] = in_strides[perm[i]];
    return amp_geom_check(k, 0, x->dtype, r, dims);
}

AmpCode amp_concat_geom(AmpKernelCtx *k, void *geom, bool *made) {
    (void)made;
    AmpConcatGeom *g = geom;
    if (k->n_in < 1) return amp_kernel_fail(k, AMP_ERR_INPUT, "no inputs");
    for (int i = 0; i < k->n_in; i++)
        if (!k->in[i]) return amp_kernel_fail(k, AMP_ERR_INPUT, "input %d is missing", i);
    const AxisAttrs *aa = k->attrs;
    const AmpBuf *x0 = k->in[0];
    if (!amp_norm_axis(aa->axis, x0->rank, &g->axis))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "axis %lld is out of range for rank %d", (long long)aa->axis,
                               x0->rank);
    int a = g->axis;
    int64_t *dims = g->dims;
    memcpy(dims, x0->dims, AMP_MAX_RANK * sizeof *dims);
    dims[a] = 0;
    for (int i = 0; i < k->n_in; i++) {
        const AmpBuf *x = k->in[i];
        if (x->dtype != x0->dtype || x->rank != x0->rank)
            return amp_kernel_fail(k, AMP_ERR_INPUT, "input %d differs in type or rank from input 0", i);
        for (int d = 0; d < x->rank; d++)
            if (d != a && x->dims[d] != x0->dims[d])
                return amp_kernel_fail(k, AMP_ERR_INPUT, "input %d differs in shape from input 0 off the axis", i);
        if (x->dims[a] > INT64_MAX - dims[a]) /* empty inputs may have any dims */
            return amp_kernel_fail(k, AMP_ERR_INPUT, "the axis dims overflow int64 at input %d", i);
        dims[a] += x->dims[a];
    }
    g->outer = (int64_t)amp_shape_nelem(a, dims);
    g->inner = (int64_t)amp_shape_nelem(x0->rank - a - 1, dims + a + 1);
    int64_t n = k->n_in; /* ConcatTraining's lengths */
    AmpCode rc = amp_geom_check(k, 0, x0->dtype, x0->rank, dims);
    if (!rc && k->node->op == AMP_OP_Ms_ConcatTraining) rc = amp_geom_check(k, 1, AMP_DT_INT64, 1, &n);
    return rc;
}

AmpCode amp_sh_gather_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    (void)opset;
    AxisAttrs a = {amp_node_attr_int(n, "axis", 0)};
    return amp_prep_out(&a, sizeof a, attrs, st);
}

AmpCode amp_sh_scatter_nd_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    (void)opset;
    const char *rs = amp_node_attr_string(n, "reduction", "none");
    ScatterAttrs a;
    if (strcmp(rs, "none") == 0) a.op = AMP_SCATTER_NONE;
    else if (strcmp(rs, "add") == 0) a.op = AMP_SCATTER_ADD;
    else if (strcmp(rs, "mul") == 0) a.op = AMP_SCATTER_MUL;
    else if (strcmp(rs, "max") == 0) a.op = AMP_SCATTER_MAX;
    else if (strcmp(rs, "min") == 0) a.op = AMP_SCATTER_MIN;
    else return amp_node_fail(n, st, AMP_ERR_INPUT, "unknown reduction '%s'", rs);
    return amp_prep_out(&a, sizeof a, attrs, st);
}

AmpCode amp_gather_shape(AmpKernelCtx *k, const AmpBuf *x, const AmpBuf *idx, int *axis, int *rank, int64_t *dims) {
    int64_t a = ((const AxisAttrs *)k->attrs)->axis;
    if (!amp_norm_axis(a, x->rank, axis))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "axis %lld is out of range for rank %d", (long long)a, x->rank);
    *rank = x->rank - 1 + idx->rank;
    if (*rank > AMP_MAX_RANK)
        return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "output rank %d is over %d", *rank, AMP_MAX_RANK);
    int r = 0;
    for (int d = 0; d < *axis; d++) dims[r++] = x->dims[d];
    for (int d = 0; d < idx->rank; d++) dims[r++] = idx->dims[d];
    for (int d = *axis + 1; d < x->rank; d++) dims[r++] = x->dims[d];
    return AMP_OK;
}

AmpCode amp_gather_grad_check(AmpKernelCtx *k, const AmpBuf *idx, const AmpBuf *dy, const AmpBuf *dx, int *axis) {
    int64_t a = ((const AxisAttrs *)k->attrs)->axis;
    if (!amp_norm_axis(a, dx->rank, axis))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "axis %lld is out of range for rank %d", (long long)a, dx->rank);
    /* dY is Gather's output: (dX[:axis], indices, dX[axis+1:]) */
    int64_t dims[AMP_MAX_RANK];
    int r = 0;
    for (int d = 0; d < *axis; d++) dims[r++] = dx->dims[d];
    if (r + idx->rank + dx->rank - *axis - 1 > AMP_MAX_RANK)
        return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "dY's rank is over %d", AMP_MAX_RANK);
    for (int d = 0; d < idx->rank; d++) dims[r++] = idx->dims[d];
    for (int d = *axis + 1; d < dx->rank; d++) dims[r++] = dx->dims[d];
    if (dy->dtype != dx->dtype || dy->rank != r || (r && memcmp(dy->dims, dims, (size_t)r * sizeof *dims)))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "dY does not have the shape Gather gives for this shape and indices");
    return AMP_OK;
}

AmpCode amp_gather_elements_check(AmpKernelCtx *k, const AmpBuf *x, const AmpBuf *idx, int *axis) {
    int r = x->rank;
    int64_t a = ((const AxisAttrs *)k->attrs)->axis;
    if (!amp_norm_axis(a, r, axis))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "axis %lld is out of range for rank %d", (long long)a, r);
    if (idx->rank != r) return amp_kernel_fail(k, AMP_ERR_INPUT, "indices have rank %d, data %d", idx->rank, r);
    for (int d = 0; d < r; d++)
        if (d != *axis && idx->dims[d] > x->dims[d])
            return amp_kernel_fail(k, AMP_ERR_INPUT, "indices dimension %d (%lld) exceeds the data's (%lld)", d,
                                   (long long)idx->dims[d], (long long)x->dims[d]);
    return AMP_OK;
}

AmpCode amp_scatter_nd_check(AmpKernelCtx *k, const AmpBuf *x, const AmpBuf *idx, const AmpBuf *u, int64_t *m) {
    int r = x->rank, q = idx->rank;
    if (q < 1 || r < 1) return amp_kernel_fail(k, AMP_ERR_INPUT, "data and indices must have rank >= 1");
    *m = idx->dims[q - 1];
    if (*m < 1 || *m > r)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "index tuples of length %lld do not fit rank %d", (long long)*m, r);
    bool ok = u->rank == q - 1 + r - (int)*m;
    for (int d = 0; ok && d < q - 1; d++) ok = u->dims[d] == idx->dims[d];
    for (int d = (int)*m; ok && d < r; d++) ok = u->dims[q - 1 + d - *m] == x->dims[d];
    if (!ok) return amp_kernel_fail(k, AMP_ERR_INPUT, "updates shape is not indices.shape[:-1] + data.shape[m:]");
    return AMP_OK;
}

AmpCode amp_one_hot_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    (void)opset;
    OneHotAttrs a = {amp_node_attr_int(n, "axis", -1)};
    return amp_prep_out(&a, sizeof a, attrs, st);
}

AmpCode amp_one_hot_out(AmpKernelCtx *k, const AmpBuf *idx, int dtype, int64_t *depth, int *axis, AmpBuf **y) {
    *y = NULL;
    int r = idx->rank + 1;
    if (r > AMP_MAX_RANK) return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "output rank %d is over %d", r, AMP_MAX_RANK);
    int64_t a = ((const OneHotAttrs *)k->attrs)->axis;
    if (!amp_norm_axis(a, r, axis))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "axis %lld is out of range for rank %d", (long long)a, r);
    if (*depth < 0) {
        AmpCode rc = amp_kernel_outputs(k, 1, y);
        if (rc || !*y) return rc;
        *depth = (*y)->rank == r ? (*y)->dims[*axis] : 0;
        if (*depth < 1) {
            *y = NULL;
            return amp_kernel_fail(k, AMP_ERR_INPUT, "depth %lld is invalid", (long long)*depth);
        }
    }
    int64_t dims[AMP_MAX_RANK];
    for (int d = 0, j = 0; d < r; d++) dims[d] = d == *axis ? *depth : idx->dims[j++];
    return amp_sh_out(k, dtype, r, dims, y);
}

/* ---- Split ------------------------------------------------------------------------------ */

AmpCode amp_split_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    int no = n->n_outputs;
    bool split_input = n->n_inputs > 1 && n->inputs[1];
    const AmpAttr *sa = amp_node_attr(n, "split");
    bool has_split = !split_input && opset < 13 && sa && sa->n_ints;
    if (has_split && sa->n_ints != (size_t)no)
        return amp_node_fail(n, st, AMP_ERR_INPUT, "split has %zu entries for %d outputs", sa->n_ints, no);
    if (!split_input && !has_split) {
        int64_t num = amp_node_attr_int(n, "num_outputs", no);
        if (num != no)
            return amp_node_fail(n, st, AMP_ERR_INPUT, "num_outputs is %lld but the node has %d outputs",
                                 (long long)num, no);
    }
    size_t cnt = has_split ? (size_t)no : 0;
    AmpSplitAttrs *a = malloc(sizeof *a + cnt * sizeof a->split[0]);
    if (!a) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    a->axis = amp_node_attr_int(n, "axis", 0);
    a->has_split = has_split;
    a->n = cnt;
    for (size_t i = 0; i < cnt; i++) a->split[i] = sa->ints[i];
    *attrs = a;
    return AMP_OK;
}

AmpCode amp_split_sizes(AmpKernelCtx *k, const AmpSplitAttrs *a, int64_t dim, int no, bool given, size_t n,
                        int64_t *sizes) {
    if (given) {
        if (n != (size_t)no) return amp_kernel_fail(k, AMP_ERR_INPUT, "split has %zu entries for %d outputs", n, no);
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
        return amp_kernel_fail(k, AMP_ERR_INPUT, "axis of size %lld does not split into %d equal parts",
                               (long long)dim, no);
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
        return amp_kernel_fail(k, AMP_ERR_INPUT, "split sums to %lld, the axis has %lld", (long long)total,
                               (long long)dim);
    return AMP_OK;
}

AmpCode amp_split_geom(AmpKernelCtx *k, void *geom, bool *made) {
    (void)made;
    AmpSplitGeom *g = geom;
    const AmpSplitAttrs *a = k->attrs;
    const AmpBuf *x;
    AmpCode rc = geom_in(k, 0, "input", &x);
    if (rc) return rc;
    if (!amp_norm_axis(a->axis, x->rank, &g->axis))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "axis %lld is out of range for rank %d", (long long)a->axis, x->rank);
    int no = k->n_out, axis = g->axis;
    if (no < 1) return amp_kernel_fail(k, AMP_ERR_INPUT, "no outputs");
    g->outer = (int64_t)amp_shape_nelem(axis, x->dims);
    g->dim = x->dims[axis];
    g->inner = (int64_t)amp_shape_nelem(x->rank - axis - 1, x->dims + axis + 1);
    /* the split input's values are read per run (the kernel) */
    g->sized = !(k->n_in > 1 && k->in[1]) && no <= AMP_SPLIT_GEOM_MAX;
    if (!g->sized) return AMP_OK;
    if ((rc = amp_split_sizes(k, a, g->dim, no, false, 0, g->sizes))) return rc;
    int64_t dims[AMP_MAX_RANK];
    memcpy(dims, x->dims, sizeof dims);
    for (int i = 0; !rc && i < no; i++) {
        dims[axis] = g->sizes[i];
        rc = amp_geom_check(k, i, x->dtype, x->rank, dims);
    }
    return rc;
}

AmpCode amp_split_start(AmpKernelCtx *k, const AmpSplitGeom *g, int64_t **sizes, AmpBuf ***outs) {
    int no = k->n_out;
    *sizes = malloc((size_t)no * sizeof **sizes);
    *outs = malloc((size_t)no * sizeof **outs);
    if (*sizes && *outs) {
        if (g->sized) memcpy(*sizes, g->sizes, (size_t)no * sizeof **sizes);
        return AMP_OK;
    }
    free(*sizes), free(*outs);
    *sizes = NULL, *outs = NULL;
    return amp_fail(k->st, AMP_ERR_INTERNAL, "out of memory");
}

AmpCode amp_split_parts(AmpKernelCtx *k, const AmpBuf *x, const AmpSplitGeom *g, size_t es, const int64_t *sizes,
                        AmpBuf **outs, AmpSplitCopyFn copy) {
    int64_t outer = g->outer, inner = g->inner, start = 0;
    AmpCode rc = AMP_OK;
    for (int i = 0; !rc && i < k->n_out; i++) {
        int64_t dims[AMP_MAX_RANK];
        memcpy(dims, x->dims, sizeof dims);
        dims[g->axis] = sizes[i];
        if (outs[i] && (g->sized || !(rc = amp_kernel_check_out(k, outs[i], x->dtype, x->rank, dims))))
            rc = copy(k, outs[i], x, es, outer, sizes[i] * inner, g->dim * inner, start * inner);
        start += sizes[i];
    }
    return rc;
}

/* ---- Shape, Constant, ConstantOfShape --------------------------------------------------- */

AmpCode amp_shape_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    (void)opset;
    const AmpAttr *e = amp_node_attr(n, "end");
    AmpShapeAttrs a = {amp_node_attr_int(n, "start", 0), amp_node_attr_int(n, "end", 0),
                       e && e->type == AMP_ATTR_INT};
    return amp_prep_out(&a, sizeof a, attrs, st);
}

void amp_shape_range(const AmpShapeAttrs *a, int rank, int64_t *start, int64_t *count) {
    int64_t r = rank;
    int64_t s = a->start, e = a->has_end ? a->end : r;
    if (s < 0) s += r;
    if (e < 0) e += r;
    s = s < 0 ? 0 : s > r ? r : s;
    e = e < 0 ? 0 : e > r ? r : e;
    *start = s;
    *count = e > s ? e - s : 0;
}

const char *const amp_constant_names[8] = {"value",      "value_float",  "value_floats",  "value_int",
                                           "value_ints", "value_string", "value_strings", "sparse_value"};

/* The element bytes of node n's tensor attribute t (at least its expected size). */
static AmpCode tensor_attr_bytes(const AmpNode *n, AmpTensor *t, AmpBytes *out, AmpStatus *st) {
    if (amp_dtype_bits(t->dtype) == 0 || amp_dtype_bits(t->dtype) % 8)
        return amp_node_fail(n, st, AMP_ERR_UNSUPPORTED, "the CPU kernel does not take %s", amp_dtype_name(t->dtype));
    AmpModel *m = n->graph ? n->graph->model : NULL;
    if (!m) return amp_node_fail(n, st, AMP_ERR_INTERNAL, "node has no model");
    AmpCode rc = amp_tensor_bytes(m, t, out, st);
    if (rc) return rc;
    size_t need;
    if (!amp_tensor_expected_bytes(t->dtype, t->nelem, &need) || out->len < need || (need && !out->data))
        return amp_node_fail(n, st, AMP_ERR_INPUT, "tensor attribute holds %zu bytes, fewer than its shape needs",
                             out->len);
    return AMP_OK;
}

AmpCode amp_constant_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    (void)opset;
    AmpConstantAttrs c = {.which = -1};
    int count = 0;
    for (int i = 0; i < 8; i++) {
        const AmpAttr *t = amp_node_attr(n, amp_constant_names[i]);
        if (t) c.a = t, c.which = i, count++;
    }
    if (count != 1)
        return amp_node_fail(n, st, AMP_ERR_INPUT, "exactly one value attribute is required (%d given)", count);
    if (c.which == 0 && c.a->t) {
        AmpCode rc = tensor_attr_bytes(n, c.a->t, &c.bytes, st);
        if (rc) return rc;
    }
    return amp_prep_out(&c, sizeof c, attrs, st);
}

AmpCode amp_constant_out(AmpKernelCtx *k, AmpBuf **y, const void **bytes) {
    int dtype = 0, rank = 0; /* set by amp_constant_value where it succeeds (GCC cannot tell at -O3) */
    int64_t dims[AMP_MAX_RANK];
    *y = NULL;
    AmpCode rc = amp_constant_value(k, k->attrs, &dtype, &rank, dims, bytes);
    return rc ? rc : amp_sh_out(k, dtype, rank, dims, y);
}

AmpCode amp_constant_value(AmpKernelCtx *k, const AmpConstantAttrs *c, int *dtype, int *rank, int64_t *dims,
                           const void **bytes) {
    const AmpAttr *a = c->a;
    switch (c->which) {
    case 0: {
        const AmpTensor *t = a->t;
        if (!t) return amp_kernel_fail(k, AMP_ERR_INPUT, "'value' holds no tensor");
        if (t->ndims > AMP_MAX_RANK)
            return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "constant of rank %zu is over %d", t->ndims, AMP_MAX_RANK);
        bool neg = false;
        for (size_t i = 0; i < t->ndims; i++) dims[i] = t->dims[i], neg |= dims[i] < 0;
        if (neg || amp_shape_nelem((int)t->ndims, dims) != t->nelem)
            return amp_kernel_fail(k, AMP_ERR_INPUT, "tensor dims and element count differ");
        *dtype = t->dtype, *rank = (int)t->ndims, *bytes = c->bytes.data;
        return AMP_OK;
    }
    case 1: *dtype = AMP_DT_FLOAT, *rank = 0, *bytes = &a->f; return AMP_OK;
    case 2: *dtype = AMP_DT_FLOAT, *rank = 1, dims[0] = (int64_t)a->n_floats, *bytes = a->floats; return AMP_OK;
    case 3: *dtype = AMP_DT_INT64, *rank = 0, *bytes = &a->i; return AMP_OK;
    case 4: *dtype = AMP_DT_INT64, *rank = 1, dims[0] = (int64_t)a->n_ints, *bytes = a->ints; return AMP_OK;
    default:
        return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "'%s' constants are not supported", amp_constant_names[c->which]);
    }
}

AmpCode amp_constant_of_shape_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    (void)opset;
    AmpFillAttrs f = {.dtype = AMP_DT_FLOAT};
    const AmpAttr *a = amp_node_attr(n, "value");
    if (a && a->t) {
        AmpBytes bytes;
        AmpCode rc = tensor_attr_bytes(n, a->t, &bytes, st);
        if (rc) return rc;
        if (a->t->nelem != 1) return amp_node_fail(n, st, AMP_ERR_INPUT, "'value' must hold one element");
        f.dtype = a->t->dtype;
        size_t es = amp_dtype_bits(f.dtype) / 8;
        if (es > sizeof f.value)
            return amp_node_fail(n, st, AMP_ERR_UNSUPPORTED, "the CPU kernel does not take %s", amp_dtype_name(f.dtype));
        memcpy(f.value, bytes.data, es);
    }
    return amp_prep_out(&f, sizeof f, attrs, st);
}
