/* CPU kernels: data movement that only re-views or re-orders bytes (Reshape, Flatten,
 * Squeeze, Unsqueeze, Identity, Transpose, Concat, Split, Expand, Tile, DepthToSpace,
 * SpaceToDepth, and Trilu, which zeroes what it drops) and the helpers the family shares. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shape_impl.h"

/* ---- shared helpers ---------------------------------------------------------------- */

AmpCode amp_sh_fail(AmpKernelCtx *k, AmpCode code, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return amp_fail(k->st, code, "node '%s' (%s): %s", k->node->name ? k->node->name : "",
                    k->node->op_type ? k->node->op_type : "", msg);
}

size_t amp_sh_esize(AmpKernelCtx *k, int dtype) {
    size_t bits = amp_dtype_bits(dtype);
    if (bits == 0 || bits % 8 != 0) {
        amp_kernel_bad_dtype(k, dtype);
        return 0;
    }
    return bits / 8;
}

AmpBuf *amp_sh_alloc(AmpKernelCtx *k, int index, int dtype, int rank, const int64_t *dims) {
    if (rank < 0 || rank > AMP_MAX_RANK) {
        amp_sh_fail(k, AMP_ERR_UNSUPPORTED, "output rank %d is over %d", rank, AMP_MAX_RANK);
        return NULL;
    }
    for (int i = 0; i < rank; i++)
        if (dims[i] < 0) {
            amp_sh_fail(k, AMP_ERR_INPUT, "output %d has a negative dimension", index);
            return NULL;
        }
    /* The size: the executor's allocator refuses shapes that overflow and outputs over its
     * cap, with the node and the size (runtime/exec.c), for every kernel alike. */
    return k->alloc(k->alloc_ctx, index, dtype, rank, dims, k->st);
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
        return amp_sh_fail(k, AMP_ERR_INPUT, "%s must be an integer tensor, not %s", what, amp_dtype_name(b->dtype));
    }
    if (b->rank > 1) return amp_sh_fail(k, AMP_ERR_INPUT, "%s must be 1-D (it has rank %d)", what, b->rank);
    if (b->nelem > max) return amp_sh_fail(k, AMP_ERR_INPUT, "%s has %llu values, at most %zu allowed", what,
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
    int64_t inner = dims[rank - 1], is = strides[rank - 1];
    int64_t idx[AMP_SH_MAX_VIEW] = {0};
    int64_t base = offset;
    for (uint64_t row = n / (uint64_t)inner; row > 0; row--) {
        copy_row(d, s + base * (int64_t)es, es, inner, is);
        d += (size_t)inner * es;
        /* Odometer over the outer axes. */
        for (int ax = rank - 2; ax >= 0; ax--) {
            base += strides[ax];
            if (++idx[ax] < dims[ax]) break;
            base -= strides[ax] * dims[ax];
            idx[ax] = 0;
        }
    }
}

/* ---- kernels ------------------------------------------------------------------------ */

static const AmpBuf *need_in(AmpKernelCtx *k, int i, const char *what) {
    if (i < k->n_in && k->in[i]) return k->in[i];
    amp_sh_fail(k, AMP_ERR_INPUT, "input %d (%s) is missing", i, what);
    return NULL;
}

/* Output 0 = the bytes of x under a new shape (no reordering: any dtype but string). */
static AmpCode copy_as(AmpKernelCtx *k, const AmpBuf *x, int rank, const int64_t *dims) {
    if (amp_dtype_bits(x->dtype) == 0) return amp_kernel_bad_dtype(k, x->dtype);
    AmpBuf *y = amp_sh_alloc(k, 0, x->dtype, rank, dims);
    if (!y) return k->st->code;
    size_t bytes = amp_buf_bytes(x);
    if (bytes) memcpy(y->data, x->data, bytes);
    return AMP_OK;
}

AmpCode amp_cpu_identity(AmpKernelCtx *k) {
    const AmpBuf *x = need_in(k, 0, "input");
    return x ? copy_as(k, x, x->rank, x->dims) : k->st->code;
}

AmpCode amp_cpu_reshape(AmpKernelCtx *k) {
    const AmpBuf *x = need_in(k, 0, "data");
    if (!x) return k->st->code;
    int64_t shape[AMP_MAX_RANK];
    size_t n = 0;
    if (k->opset < 5) { /* Reshape-1: the shape was an attribute */
        const AmpAttr *a = amp_node_attr(k->node, "shape");
        if (!a) return amp_sh_fail(k, AMP_ERR_INPUT, "no shape attribute");
        if (a->n_ints > AMP_MAX_RANK)
            return amp_sh_fail(k, AMP_ERR_UNSUPPORTED, "target rank %zu is over %d", a->n_ints, AMP_MAX_RANK);
        n = a->n_ints;
        for (size_t i = 0; i < n; i++) shape[i] = a->ints[i];
    } else {
        const AmpBuf *s = need_in(k, 1, "shape");
        if (!s) return k->st->code;
        if (s->nelem > AMP_MAX_RANK)
            return amp_sh_fail(k, AMP_ERR_UNSUPPORTED, "target rank %llu is over %d", (unsigned long long)s->nelem,
                               AMP_MAX_RANK);
        AmpCode rc = amp_sh_ints(k, s, "shape", shape, AMP_MAX_RANK, &n);
        if (rc) return rc;
    }
    bool allowzero = amp_node_attr_int(k->node, "allowzero", 0) != 0;
    int infer = -1;
    bool has_zero = false;
    int64_t known = 1;
    for (size_t i = 0; i < n; i++) {
        int64_t v = shape[i];
        if (v == -1) {
            if (infer >= 0) return amp_sh_fail(k, AMP_ERR_INPUT, "shape has more than one -1");
            infer = (int)i;
            continue;
        }
        if (v < -1) return amp_sh_fail(k, AMP_ERR_INPUT, "shape[%zu] is %lld", i, (long long)v);
        if (v == 0 && !allowzero) {
            if ((int)i >= x->rank)
                return amp_sh_fail(k, AMP_ERR_INPUT, "shape[%zu] is 0 (copy) but the input has rank %d", i, x->rank);
            v = shape[i] = x->dims[i];
        }
        if (v == 0) has_zero = true;
        if (!amp_sh_mul(known, v, &known)) return amp_sh_fail(k, AMP_ERR_INPUT, "shape is too large");
    }
    if (infer >= 0) {
        if (has_zero && allowzero) return amp_sh_fail(k, AMP_ERR_INPUT, "allowzero shape has both 0 and -1");
        if (known == 0 || x->nelem % (uint64_t)known)
            return amp_sh_fail(k, AMP_ERR_INPUT, "cannot infer the -1 dimension for %llu elements",
                               (unsigned long long)x->nelem);
        shape[infer] = (int64_t)(x->nelem / (uint64_t)known);
    } else if ((uint64_t)known != x->nelem) {
        return amp_sh_fail(k, AMP_ERR_INPUT, "shape holds %lld elements, the input %llu", (long long)known,
                           (unsigned long long)x->nelem);
    }
    return copy_as(k, x, (int)n, shape);
}

AmpCode amp_cpu_flatten(AmpKernelCtx *k) {
    const AmpBuf *x = need_in(k, 0, "input");
    if (!x) return k->st->code;
    int64_t axis = amp_node_attr_int(k->node, "axis", 1);
    if (axis < -x->rank || axis > x->rank)
        return amp_sh_fail(k, AMP_ERR_INPUT, "axis %lld is out of range for rank %d", (long long)axis, x->rank);
    if (axis < 0) axis += x->rank;
    int64_t dims[2] = {1, 1};
    for (int i = 0; i < x->rank; i++) dims[i >= axis] *= x->dims[i];
    return copy_as(k, x, 2, dims);
}

/* Axes from the attribute (before opset 13) or input 1 (since), normalised against
 * `rank`; *n = 0 and no error when none are given. */
static AmpCode axes_of(AmpKernelCtx *k, int rank, int64_t *axes, size_t *n) {
    *n = 0;
    if (k->opset < 13) {
        const AmpAttr *a = amp_node_attr(k->node, "axes");
        if (a) {
            if (a->n_ints > AMP_MAX_RANK) return amp_sh_fail(k, AMP_ERR_INPUT, "too many axes");
            for (size_t i = 0; i < a->n_ints; i++) axes[i] = a->ints[i];
            *n = a->n_ints;
        }
    } else if (k->n_in > 1 && k->in[1]) {
        AmpCode rc = amp_sh_ints(k, k->in[1], "axes", axes, AMP_MAX_RANK, n);
        if (rc) return rc;
    }
    for (size_t i = 0; i < *n; i++) {
        int a;
        if (!amp_norm_axis(axes[i], rank, &a))
            return amp_sh_fail(k, AMP_ERR_INPUT, "axis %lld is out of range for rank %d", (long long)axes[i], rank);
        axes[i] = a;
        for (size_t j = 0; j < i; j++)
            if (axes[j] == a) return amp_sh_fail(k, AMP_ERR_INPUT, "axis %d is repeated", a);
    }
    return AMP_OK;
}

AmpCode amp_cpu_squeeze(AmpKernelCtx *k) {
    const AmpBuf *x = need_in(k, 0, "data");
    if (!x) return k->st->code;
    int64_t axes[AMP_MAX_RANK];
    size_t n;
    AmpCode rc = axes_of(k, x->rank, axes, &n);
    if (rc) return rc;
    bool drop[AMP_MAX_RANK] = {false};
    for (size_t i = 0; i < n; i++) {
        if (x->dims[axes[i]] != 1)
            return amp_sh_fail(k, AMP_ERR_INPUT, "axis %lld has size %lld, not 1", (long long)axes[i],
                               (long long)x->dims[axes[i]]);
        drop[axes[i]] = true;
    }
    int64_t dims[AMP_MAX_RANK];
    int r = 0;
    for (int i = 0; i < x->rank; i++)
        if (!(n ? drop[i] : x->dims[i] == 1)) dims[r++] = x->dims[i];
    return copy_as(k, x, r, dims);
}

AmpCode amp_cpu_unsqueeze(AmpKernelCtx *k) {
    const AmpBuf *x = need_in(k, 0, "data");
    if (!x) return k->st->code;
    /* The axes count is needed before normalising: read them raw first. */
    size_t n = 0;
    if (k->opset < 13) {
        const AmpAttr *a = amp_node_attr(k->node, "axes");
        n = a ? a->n_ints : 0;
    } else if (k->n_in > 1 && k->in[1]) {
        n = (size_t)k->in[1]->nelem;
    }
    if (n == 0) return amp_sh_fail(k, AMP_ERR_INPUT, "no axes given");
    if ((size_t)x->rank + n > AMP_MAX_RANK)
        return amp_sh_fail(k, AMP_ERR_UNSUPPORTED, "output rank %zu is over %d", (size_t)x->rank + n, AMP_MAX_RANK);
    int rank = x->rank + (int)n;
    int64_t axes[AMP_MAX_RANK];
    AmpCode rc = axes_of(k, rank, axes, &n);
    if (rc) return rc;
    bool ins[AMP_MAX_RANK] = {false};
    for (size_t i = 0; i < n; i++) ins[axes[i]] = true;
    int64_t dims[AMP_MAX_RANK];
    for (int i = 0, j = 0; i < rank; i++) dims[i] = ins[i] ? 1 : x->dims[j++];
    return copy_as(k, x, rank, dims);
}

AmpCode amp_cpu_transpose(AmpKernelCtx *k) {
    const AmpBuf *x = need_in(k, 0, "data");
    if (!x) return k->st->code;
    size_t es = amp_sh_esize(k, x->dtype);
    if (!es) return k->st->code;
    int r = x->rank;
    int64_t perm[AMP_MAX_RANK];
    const AmpAttr *a = amp_node_attr(k->node, "perm");
    if (a && a->n_ints) {
        if (a->n_ints != (size_t)r)
            return amp_sh_fail(k, AMP_ERR_INPUT, "perm has %zu entries for rank %d", a->n_ints, r);
        bool seen[AMP_MAX_RANK] = {false};
        for (int i = 0; i < r; i++) {
            int64_t p = a->ints[i];
            if (p < 0 || p >= r || seen[p]) return amp_sh_fail(k, AMP_ERR_INPUT, "perm is not a permutation");
            seen[p] = true;
            perm[i] = p;
        }
    } else {
        for (int i = 0; i < r; i++) perm[i] = r - 1 - i;
    }
    int64_t in_strides[AMP_MAX_RANK], dims[AMP_MAX_RANK], strides[AMP_MAX_RANK];
    amp_sh_strides(r, x->dims, in_strides);
    for (int i = 0; i < r; i++) {
        dims[i] = x->dims[perm[i]];
        strides[i] = in_strides[perm[i]];
    }
    AmpBuf *y = amp_sh_alloc(k, 0, x->dtype, r, dims);
    if (!y) return k->st->code;
    amp_sh_strided_copy(y->data, x->data, es, r, dims, strides, 0);
    return AMP_OK;
}

AmpCode amp_cpu_concat(AmpKernelCtx *k) {
    if (k->n_in < 1) return amp_sh_fail(k, AMP_ERR_INPUT, "no inputs");
    for (int i = 0; i < k->n_in; i++)
        if (!k->in[i]) return amp_sh_fail(k, AMP_ERR_INPUT, "input %d is missing", i);
    const AmpBuf *x0 = k->in[0];
    size_t es = amp_sh_esize(k, x0->dtype);
    if (!es) return k->st->code;
    const AmpAttr *aa = amp_node_attr(k->node, "axis");
    if (!aa && k->opset >= 4) return amp_sh_fail(k, AMP_ERR_INPUT, "no axis attribute");
    int axis;
    if (!amp_norm_axis(aa ? aa->i : 1, x0->rank, &axis))
        return amp_sh_fail(k, AMP_ERR_INPUT, "axis %lld is out of range for rank %d", (long long)(aa ? aa->i : 1),
                           x0->rank);
    int64_t dims[AMP_MAX_RANK];
    memcpy(dims, x0->dims, sizeof dims);
    dims[axis] = 0;
    for (int i = 0; i < k->n_in; i++) {
        const AmpBuf *x = k->in[i];
        if (x->dtype != x0->dtype || x->rank != x0->rank)
            return amp_sh_fail(k, AMP_ERR_INPUT, "input %d differs in type or rank from input 0", i);
        for (int d = 0; d < x->rank; d++)
            if (d != axis && x->dims[d] != x0->dims[d])
                return amp_sh_fail(k, AMP_ERR_INPUT, "input %d differs in shape from input 0 off the axis", i);
        dims[axis] += x->dims[axis];
    }
    AmpBuf *y = amp_sh_alloc(k, 0, x0->dtype, x0->rank, dims);
    if (!y) return k->st->code;
    uint64_t outer = amp_shape_nelem(axis, dims);
    uint64_t inner = amp_shape_nelem(x0->rank - axis - 1, dims + axis + 1);
    char *d = y->data;
    for (uint64_t o = 0; o < outer; o++)
        for (int i = 0; i < k->n_in; i++) {
            size_t chunk = (size_t)(k->in[i]->dims[axis] * inner) * es; // one (dim_i, inner) block
            if (chunk) memcpy(d, (const char *)k->in[i]->data + o * chunk, chunk);
            d += chunk;
        }
    return AMP_OK;
}

AmpCode amp_cpu_split(AmpKernelCtx *k) {
    const AmpBuf *x = need_in(k, 0, "input");
    if (!x) return k->st->code;
    size_t es = amp_sh_esize(k, x->dtype);
    if (!es) return k->st->code;
    int axis;
    int64_t a = amp_node_attr_int(k->node, "axis", 0);
    if (!amp_norm_axis(a, x->rank, &axis))
        return amp_sh_fail(k, AMP_ERR_INPUT, "axis %lld is out of range for rank %d", (long long)a, x->rank);
    int no = k->n_out;
    if (no < 1) return amp_sh_fail(k, AMP_ERR_INPUT, "no outputs");
    int64_t dim = x->dims[axis];
    int64_t *sizes = malloc((size_t)no * sizeof *sizes);
    if (!sizes) return amp_fail(k->st, AMP_ERR_INTERNAL, "out of memory");
    AmpCode rc = AMP_OK;
    const AmpAttr *sa = amp_node_attr(k->node, "split");
    size_t n = 0;
    if (k->n_in > 1 && k->in[1]) {
        rc = amp_sh_ints(k, k->in[1], "split", sizes, (size_t)no, &n);
        if (!rc && n != (size_t)no)
            rc = amp_sh_fail(k, AMP_ERR_INPUT, "split has %zu entries for %d outputs", n, no);
    } else if (k->opset < 13 && sa && sa->n_ints) {
        if (sa->n_ints != (size_t)no)
            rc = amp_sh_fail(k, AMP_ERR_INPUT, "split has %zu entries for %d outputs", sa->n_ints, no);
        for (int i = 0; !rc && i < no; i++) sizes[i] = sa->ints[i];
    } else {
        int64_t num = amp_node_attr_int(k->node, "num_outputs", no);
        if (num != no) {
            rc = amp_sh_fail(k, AMP_ERR_INPUT, "num_outputs is %lld but the node has %d outputs", (long long)num, no);
        } else if (k->opset >= 18) { /* uneven: ceil-sized chunks, the last smaller */
            int64_t chunk = dim / no + (dim % no != 0);
            for (int i = 0; i < no; i++) {
                int64_t left = dim - chunk * i;
                sizes[i] = left < 0 ? 0 : left < chunk ? left : chunk;
            }
        } else if (dim % no) {
            rc = amp_sh_fail(k, AMP_ERR_INPUT, "axis of size %lld does not split into %d equal parts", (long long)dim,
                             no);
        } else {
            for (int i = 0; i < no; i++) sizes[i] = dim / no;
        }
    }
    int64_t total = 0;
    for (int i = 0; !rc && i < no; i++) {
        if (sizes[i] < 0 || sizes[i] > dim - total)
            rc = amp_sh_fail(k, AMP_ERR_INPUT, "split[%d] is %lld (negative or past the axis)", i, (long long)sizes[i]);
        else total += sizes[i];
    }
    if (!rc && total != dim)
        rc = amp_sh_fail(k, AMP_ERR_INPUT, "split sums to %lld, the axis has %lld", (long long)total, (long long)dim);
    int64_t outer = (int64_t)amp_shape_nelem(axis, x->dims);
    int64_t inner = (int64_t)amp_shape_nelem(x->rank - axis - 1, x->dims + axis + 1);
    int64_t start = 0;
    for (int i = 0; !rc && i < no; i++) {
        int64_t dims[AMP_MAX_RANK];
        memcpy(dims, x->dims, sizeof dims);
        dims[axis] = sizes[i];
        AmpBuf *y = amp_sh_alloc(k, i, x->dtype, x->rank, dims);
        if (!y) {
            rc = k->st->code;
            break;
        }
        /* View (outer, sizes[i] * inner) of the input rows (outer, dim * inner). */
        int64_t vd[2] = {outer, sizes[i] * inner}, vs[2] = {dim * inner, 1};
        amp_sh_strided_copy(y->data, x->data, es, 2, vd, vs, start * inner);
        start += sizes[i];
    }
    free(sizes);
    return rc;
}

AmpCode amp_cpu_expand(AmpKernelCtx *k) {
    const AmpBuf *x = need_in(k, 0, "input"), *s = x ? need_in(k, 1, "shape") : NULL;
    if (!s) return k->st->code;
    size_t es = amp_sh_esize(k, x->dtype);
    if (!es) return k->st->code;
    if (s->nelem > AMP_MAX_RANK)
        return amp_sh_fail(k, AMP_ERR_UNSUPPORTED, "shape of rank %llu is over %d", (unsigned long long)s->nelem,
                           AMP_MAX_RANK);
    int64_t shape[AMP_MAX_RANK], dims[AMP_MAX_RANK], strides[AMP_MAX_RANK];
    size_t n;
    AmpCode rc = amp_sh_ints(k, s, "shape", shape, AMP_MAX_RANK, &n);
    if (rc) return rc;
    for (size_t i = 0; i < n; i++)
        if (shape[i] < 0) return amp_sh_fail(k, AMP_ERR_INPUT, "shape[%zu] is %lld", i, (long long)shape[i]);
    int r;
    if (!amp_broadcast_shape(x->rank, x->dims, (int)n, shape, &r, dims))
        return amp_sh_fail(k, AMP_ERR_INPUT, "input shape does not broadcast to the given shape");
    amp_broadcast_strides(x->rank, x->dims, r, dims, strides);
    AmpBuf *y = amp_sh_alloc(k, 0, x->dtype, r, dims);
    if (!y) return k->st->code;
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
            return rc ? rc : amp_sh_fail(k, AMP_ERR_INPUT, "tiles must hold one value");
        if ((rc = amp_sh_ints(k, k->in[2], "axis", &ax, 1, &n)) || n != 1)
            return rc ? rc : amp_sh_fail(k, AMP_ERR_INPUT, "axis must hold one value");
        int a;
        if (!amp_norm_axis(ax, r, &a)) return amp_sh_fail(k, AMP_ERR_INPUT, "axis %lld is out of range", (long long)ax);
        for (int i = 0; i < r; i++) rep[i] = i == a ? t : 1;
        n = (size_t)r;
    } else if ((rc = amp_sh_ints(k, rb, "repeats", rep, AMP_MAX_RANK, &n))) {
        return rc;
    }
    if (n != (size_t)r) return amp_sh_fail(k, AMP_ERR_INPUT, "repeats has %zu entries for rank %d", n, r);
    /* View the output as (rep0, d0, rep1, d1, ...): repeats read with stride 0. */
    int64_t dims[AMP_MAX_RANK], vd[AMP_SH_MAX_VIEW], vs[AMP_SH_MAX_VIEW], in_strides[AMP_MAX_RANK];
    amp_sh_strides(r, x->dims, in_strides);
    for (int i = 0; i < r; i++) {
        if (rep[i] < 0) return amp_sh_fail(k, AMP_ERR_INPUT, "repeats[%d] is %lld", i, (long long)rep[i]);
        if (!amp_sh_mul(x->dims[i], rep[i], &dims[i])) return amp_sh_fail(k, AMP_ERR_INPUT, "output is too large");
        vd[2 * i] = rep[i], vs[2 * i] = 0;
        vd[2 * i + 1] = x->dims[i], vs[2 * i + 1] = in_strides[i];
    }
    AmpBuf *y = amp_sh_alloc(k, 0, x->dtype, r, dims);
    if (!y) return k->st->code;
    amp_sh_strided_copy(y->data, x->data, es, 2 * r, vd, vs, 0);
    return AMP_OK;
}

/* DepthToSpace (to_space) and SpaceToDepth on (N, C, H, W) as one 6-D strided copy. */
static AmpCode depth_space(AmpKernelCtx *k, bool to_space) {
    const AmpBuf *x = need_in(k, 0, "input");
    if (!x) return k->st->code;
    size_t es = amp_sh_esize(k, x->dtype);
    if (!es) return k->st->code;
    if (x->rank != 4) return amp_sh_fail(k, AMP_ERR_INPUT, "input must be 4-D (N, C, H, W), not rank %d", x->rank);
    int64_t b = amp_node_attr_int(k->node, "blocksize", 0);
    if (b < 1 || b > (INT64_C(1) << 31))
        return amp_sh_fail(k, AMP_ERR_INPUT, "blocksize %lld is invalid", (long long)b);
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3], dims[4], vd[6], vs[6];
    if (to_space) {
        const char *mode = amp_node_attr_string(k->node, "mode", "DCR");
        bool crd = strcmp(mode, "CRD") == 0;
        if (!crd && strcmp(mode, "DCR") != 0) return amp_sh_fail(k, AMP_ERR_INPUT, "unknown mode '%s'", mode);
        if (C % (b * b))
            return amp_sh_fail(k, AMP_ERR_INPUT, "channels %lld are not a multiple of blocksize^2", (long long)C);
        int64_t c = C / (b * b);
        dims[0] = N, dims[1] = c;
        if (!amp_sh_mul(H, b, &dims[2]) || !amp_sh_mul(W, b, &dims[3]))
            return amp_sh_fail(k, AMP_ERR_INPUT, "output is too large");
        /* Output walked as (N, c, H, b1, W, b2); the input channel is
         * DCR: (b1, b2, c), CRD: (c, b1, b2). */
        int64_t hw = H * W;
        int64_t sc = crd ? b * b * hw : hw, sb1 = crd ? b * hw : b * c * hw, sb2 = crd ? hw : c * hw;
        int64_t d6[6] = {N, c, H, b, W, b}, s6[6] = {C * hw, sc, W, sb1, 1, sb2};
        memcpy(vd, d6, sizeof vd), memcpy(vs, s6, sizeof vs);
    } else {
        if (H % b || W % b) return amp_sh_fail(k, AMP_ERR_INPUT, "height and width must be multiples of blocksize");
        int64_t h = H / b, w = W / b;
        dims[0] = N, dims[2] = h, dims[3] = w;
        if (!amp_sh_mul(C, b * b, &dims[1])) return amp_sh_fail(k, AMP_ERR_INPUT, "output is too large");
        /* Output walked as (N, b1, b2, C, h, w), reading x[n, c, h*b + b1, w*b + b2]. */
        int64_t d6[6] = {N, b, b, C, h, w}, s6[6] = {C * H * W, W, 1, H * W, b * W, b};
        memcpy(vd, d6, sizeof vd), memcpy(vs, s6, sizeof vs);
    }
    AmpBuf *y = amp_sh_alloc(k, 0, x->dtype, 4, dims);
    if (!y) return k->st->code;
    amp_sh_strided_copy(y->data, x->data, es, 6, vd, vs, 0);
    return AMP_OK;
}

AmpCode amp_cpu_depth_to_space(AmpKernelCtx *k) {
    return depth_space(k, true);
}

AmpCode amp_cpu_space_to_depth(AmpKernelCtx *k) {
    return depth_space(k, false);
}

/* Trilu: each matrix of the last two axes keeps its upper (upper = 1, the default) or
 * lower triangle, k diagonals above the main one (input 1, default 0; negative: below),
 * and the rest becomes zero. Any dtype but string. */
AmpCode amp_cpu_trilu(AmpKernelCtx *k) {
    const AmpBuf *x = need_in(k, 0, "input");
    if (!x) return k->st->code;
    if (x->rank < 2) return amp_sh_fail(k, AMP_ERR_INPUT, "the input must have rank 2 or more, not %d", x->rank);
    int64_t diag = 0;
    if (k->n_in > 1 && k->in[1]) {
        size_t n = 0;
        AmpCode rc = amp_sh_ints(k, k->in[1], "k", &diag, 1, &n);
        if (rc) return rc;
        if (n != 1) return amp_sh_fail(k, AMP_ERR_INPUT, "k must hold one value, not %zu", n);
    }
    bool upper = amp_node_attr_int(k->node, "upper", 1) != 0;
    if (amp_dtype_bits(x->dtype) == 0 || amp_dtype_bits(x->dtype) % 8) return amp_kernel_bad_dtype(k, x->dtype);
    AmpBuf *y = amp_sh_alloc(k, 0, x->dtype, x->rank, x->dims);
    if (!y) return k->st->code;
    size_t es = amp_dtype_bits(x->dtype) / 8, bytes = amp_buf_bytes(x);
    if (bytes) memcpy(y->data, x->data, bytes);
    int64_t rows = x->dims[x->rank - 2], cols = x->dims[x->rank - 1];
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
