/* CPU kernels that make or retype tensors: Cast, CastLike, Constant, ConstantOfShape,
 * Shape, Size, Range, OneHot, NonZero. Cast converts with the cast engine every backend
 * shares (ops/cast_engine.c), which Pad and the rest use too. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/half.h"
#include "ir/range.h"
#include "kernels/cpu/shape_impl.h"

/* ---- Cast, CastLike --------------------------------------------------------------------- */

static const AmpBuf *input(AmpKernelCtx *k, int i, const char *what) {
    if (i < k->n_in && k->in[i]) return k->in[i];
    amp_kernel_fail(k, AMP_ERR_INPUT, "input %d (%s) is missing", i, what);
    return NULL;
}

static AmpCode cast_to(AmpKernelCtx *k, const AmpBuf *x, int to) {
    AmpBuf *y;
    AmpCode rc;
    if (to == x->dtype && to != AMP_DT_STRING && amp_dtype_bits(to)) {
        if ((rc = amp_sh_out(k, to, x->rank, x->dims, &y)) || !y) return rc;
        size_t bytes = amp_buf_bytes(x);
        if (bytes) memcpy(y->data, x->data, bytes);
        return AMP_OK;
    }
    if (!amp_sh_convertible(x->dtype)) return amp_kernel_bad_dtype(k, x->dtype);
    if (!amp_sh_convertible(to)) return amp_kernel_bad_dtype(k, to);
    if ((rc = amp_sh_out(k, to, x->rank, x->dims, &y)) || !y) return rc;
    return amp_sh_convert(k, x->data, x->dtype, y->data, to, x->nelem);
}

AmpCode amp_cpu_cast(AmpKernelCtx *k) {
    const AmpBuf *x = input(k, 0, "input");
    return x ? cast_to(k, x, ((const CastAttrs *)k->attrs)->to) : k->st->code;
}

AmpCode amp_cpu_cast_like(AmpKernelCtx *k) {
    const AmpBuf *x = input(k, 0, "input"), *t = x ? input(k, 1, "target_type") : NULL;
    return t ? cast_to(k, x, t->dtype) : k->st->code;
}

/* ---- Constant, ConstantOfShape ------------------------------------------------------- */

/* The attributes (AmpConstantAttrs, AmpFillAttrs) and the value Constant makes are every
 * backend's (ops/sh_common.h). */
AmpCode amp_cpu_constant(AmpKernelCtx *k) {
    const void *bytes;
    AmpBuf *y;
    AmpCode rc = amp_constant_out(k, &y, &bytes);
    if (rc || !y) return rc;
    size_t len = amp_buf_bytes(y);
    if (len) memcpy(y->data, bytes, len);
    return AMP_OK;
}

AmpCode amp_cpu_constant_of_shape(AmpKernelCtx *k) {
    const AmpFillAttrs *f = k->attrs;
    const AmpBuf *s = input(k, 0, "shape");
    if (!s) return k->st->code;
    if (s->nelem > AMP_MAX_RANK)
        return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "output rank %llu is over %d", (unsigned long long)s->nelem,
                           AMP_MAX_RANK);
    int64_t dims[AMP_MAX_RANK];
    size_t n;
    AmpCode rc = amp_sh_ints(k, s, "shape", dims, AMP_MAX_RANK, &n);
    if (rc) return rc;
    for (size_t i = 0; i < n; i++)
        if (dims[i] < 0) return amp_kernel_fail(k, AMP_ERR_INPUT, "shape[%zu] is %lld", i, (long long)dims[i]);
    size_t es = amp_sh_esize(k, f->dtype);
    if (!es) return k->st->code;
    AmpBuf *y;
    if ((rc = amp_sh_out(k, f->dtype, (int)n, dims, &y)) || !y) return rc;
    size_t total = (size_t)y->nelem * es;
    if (!total) return AMP_OK;
    /* Fill by doubling copies of the first element. */
    memcpy(y->data, f->value, es);
    for (size_t done = es; done < total;) {
        size_t c = done < total - done ? done : total - done;
        memcpy((char *)y->data + done, y->data, c);
        done += c;
    }
    return AMP_OK;
}

/* ---- Shape, Size ---------------------------------------------------------------------- */

/* start and end as every backend clamps them (amp_shape_range, ops/sh_common.h) */
AmpCode amp_cpu_shape(AmpKernelCtx *k) {
    const AmpBuf *x = input(k, 0, "data");
    if (!x) return k->st->code;
    int64_t start, n;
    amp_shape_range(k->attrs, x->rank, &start, &n);
    AmpBuf *y;
    AmpCode rc = amp_sh_out(k, AMP_DT_INT64, 1, &n, &y);
    if (rc || !y) return rc;
    for (int64_t i = 0; i < n; i++) ((int64_t *)y->data)[i] = x->dims[start + i];
    return AMP_OK;
}

AmpCode amp_cpu_size(AmpKernelCtx *k) {
    const AmpBuf *x = input(k, 0, "data");
    if (!x) return k->st->code;
    AmpBuf *y;
    AmpCode rc = amp_sh_out(k, AMP_DT_INT64, 0, NULL, &y);
    if (rc || !y) return rc;
    *(int64_t *)y->data = (int64_t)x->nelem;
    return AMP_OK;
}

/* ---- Range ------------------------------------------------------------------------------ */

AmpCode amp_cpu_range(AmpKernelCtx *k) {
    const AmpBuf *b[3];
    static const char *const what[3] = {"start", "limit", "delta"};
    for (int i = 0; i < 3; i++) {
        if (!(b[i] = input(k, i, what[i]))) return k->st->code;
        if (b[i]->nelem != 1) return amp_kernel_fail(k, AMP_ERR_INPUT, "%s must hold one element", what[i]);
        if (b[i]->dtype != b[0]->dtype) return amp_kernel_fail(k, AMP_ERR_INPUT, "start, limit and delta differ in type");
    }
    int dt = b[0]->dtype;
    if (!amp_sh_convertible(dt) || dt == AMP_DT_BOOL) return amp_kernel_bad_dtype(k, dt);
    AmpCastVal v[3];
    for (int i = 0; i < 3; i++) v[i] = amp_cast_load(dt, b[i]->data, 0);
    int64_t n;
    if (v[0].kind == AMP_CV_FLOAT) {
        double s = v[0].f, l = v[1].f, d = v[2].f;
        if (d == 0 || !isfinite(s) || !isfinite(l) || !isfinite(d))
            return amp_kernel_fail(k, AMP_ERR_INPUT, "start, limit and delta must be finite and delta non-zero");
        if ((n = amp_range_count_float(s, l, d)) < 0) return amp_kernel_fail(k, AMP_ERR_INPUT, "range is too long");
    } else {
        bool sg = v[0].kind == AMP_CV_INT;
        if (sg ? v[2].i == 0 : v[2].u == 0) return amp_kernel_fail(k, AMP_ERR_INPUT, "delta is 0");
        uint64_t c = sg ? amp_range_count_signed(v[0].i, v[1].i, v[2].i) : amp_range_count_unsigned(v[0].u, v[1].u, v[2].u);
        if (c > (UINT64_C(1) << 50)) return amp_kernel_fail(k, AMP_ERR_INPUT, "range is too long");
        n = (int64_t)c;
    }
    AmpBuf *y;
    AmpCode rc = amp_sh_out(k, dt, 1, &n, &y);
    if (rc || !y) return rc;
    for (int64_t i = 0; i < n; i++) {
        AmpCastVal e = v[0];
        if (e.kind == AMP_CV_FLOAT) e.f = v[0].f + (double)i * v[2].f;
        else if (e.kind == AMP_CV_INT) e.i = (int64_t)((uint64_t)v[0].i + (uint64_t)i * (uint64_t)v[2].i);
        else e.u = v[0].u + (uint64_t)i * v[2].u;
        amp_cast_store(dt, y->data, (uint64_t)i, &e);
    }
    return AMP_OK;
}

/* ---- OneHot ----------------------------------------------------------------------------- */

AmpCode amp_cpu_one_hot(AmpKernelCtx *k) {
    const AmpBuf *idx = input(k, 0, "indices"), *db = idx ? input(k, 1, "depth") : NULL;
    const AmpBuf *vb = db ? input(k, 2, "values") : NULL;
    if (!vb) return k->st->code;
    if (!amp_sh_convertible(idx->dtype)) return amp_kernel_bad_dtype(k, idx->dtype);
    if (!amp_sh_convertible(db->dtype)) return amp_kernel_bad_dtype(k, db->dtype);
    if (db->nelem != 1) return amp_kernel_fail(k, AMP_ERR_INPUT, "depth must hold one element");
    if (vb->nelem != 2) return amp_kernel_fail(k, AMP_ERR_INPUT, "values must hold two elements (off, on)");
    size_t es = amp_sh_esize(k, vb->dtype);
    if (!es) return k->st->code;
    AmpCastVal dv = amp_cast_load(db->dtype, db->data, 0);
    double depth_d = amp_cast_as_double(&dv);
    if (!(depth_d >= 1 && depth_d < 9.0e15)) return amp_kernel_fail(k, AMP_ERR_INPUT, "depth %g is invalid", depth_d);
    int64_t depth = (int64_t)depth_d;
    int axis;
    /* y: indices.shape with depth inserted at axis (ops/sh_common.h), viewed as (outer, depth, inner). */
    AmpBuf *y;
    AmpCode rc = amp_one_hot_out(k, idx, vb->dtype, &depth, &axis, &y);
    if (rc || !y) return rc;
    if (!y->nelem) return AMP_OK;
    int64_t *iv = malloc((idx->nelem ? (size_t)idx->nelem : 1) * sizeof *iv);
    if (!iv) return amp_fail(k->st, AMP_ERR_INTERNAL, "out of memory");
    rc = amp_sh_convert(k, idx->data, idx->dtype, iv, AMP_DT_INT64, idx->nelem); /* floats truncate */
    if (rc) {
        free(iv);
        return rc;
    }
    const char *off = vb->data, *on = off + es;
    char *dst = y->data;
    for (uint64_t i = 0; i < y->nelem; i++) memcpy(dst + i * es, off, es);
    uint64_t inner = amp_shape_nelem(idx->rank - axis, idx->dims + axis);
    for (uint64_t j = 0; j < idx->nelem; j++) {
        int64_t v = iv[j];
        if (v < 0) v += depth;
        if (v < 0 || v >= depth) continue; /* out of range: all "off" */
        uint64_t o = j / inner, i = j % inner;
        memcpy(dst + ((o * (uint64_t)depth + (uint64_t)v) * inner + i) * es, on, es);
    }
    free(iv);
    return AMP_OK;
}

/* ---- NonZero ---------------------------------------------------------------------------- */

AmpCode amp_cpu_non_zero(AmpKernelCtx *k) {
    const AmpBuf *x = input(k, 0, "X");
    if (!x) return k->st->code;
    int dt = x->dtype;
    if (dt == AMP_DT_COMPLEX64 || dt == AMP_DT_COMPLEX128) return amp_kernel_bad_dtype(k, dt);
    size_t es = amp_sh_esize(k, dt);
    if (!es) return k->st->code;
    /* An element is non-zero when any byte is, ignoring the sign bit of floats (-0.0 is
     * zero); the FNUZ float8 types have no negative zero (0x80 is their NaN). */
    uint8_t top = amp_dtype_is_float(dt) && dt != AMP_DT_FLOAT8E4M3FNUZ && dt != AMP_DT_FLOAT8E5M2FNUZ ? 0x7f : 0xff;
    const uint8_t *p = x->data;
    uint64_t nnz = 0;
    for (uint64_t i = 0; i < x->nelem; i++) {
        const uint8_t *e = p + i * es;
        bool nz = (e[es - 1] & top) != 0;
        for (size_t b = 0; !nz && b + 1 < es; b++) nz = e[b] != 0;
        nnz += nz;
    }
    int r = x->rank ? x->rank : 1; /* a scalar reads as one element of a 1-D tensor */
    int64_t dims[2] = {r, (int64_t)nnz};
    /* The one shape only the data tells: the kernel asks for its output. */
    AmpBuf *y = k->alloc(k->alloc_ctx, 0, AMP_DT_INT64, 2, dims, k->st);
    if (!y) return k->st->code;
    int64_t *out = y->data; /* (rank, nnz): row d holds the d-th coordinates */
    int64_t c[AMP_MAX_RANK] = {0};
    uint64_t col = 0;
    for (uint64_t i = 0; i < x->nelem; i++) {
        const uint8_t *e = p + i * es;
        bool nz = (e[es - 1] & top) != 0;
        for (size_t b = 0; !nz && b + 1 < es; b++) nz = e[b] != 0;
        if (nz) {
            for (int d = 0; d < r; d++) out[(uint64_t)d * nnz + col] = x->rank ? c[d] : 0;
            col++;
        }
        for (int d = x->rank - 1; d >= 0; d--) {
            if (++c[d] < x->dims[d]) break;
            c[d] = 0;
        }
    }
    return AMP_OK;
}
