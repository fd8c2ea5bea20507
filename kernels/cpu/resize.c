/* CPU kernel: Resize (opset 10 to 19): nearest (any dtype, byte copies), linear and
 * cubic (float32/float16/bfloat16/double, weights and sums in double, rounded on store)
 * over any set of axes, every coordinate_transformation_mode, scales or sizes, and
 * keep_aspect_ratio_policy. Follows the ONNX reference implementation's arithmetic. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/shape_impl.h"
#include "ops/resize_geom.h" /* the attributes, geometry and tables every backend shares */

/* Nearest: a byte copy per element (the extrapolation value outside a crop box). */
static AmpCode resize_nearest(AmpKernelCtx *k, const AmpResizeAttrs *ra, const AmpBuf *x, AmpBuf *y, const AmpResizeAxis *ax,
                              const int64_t *out, size_t es) {
    int r = x->rank, dt = x->dtype;
    int64_t strides[AMP_MAX_RANK], c[AMP_MAX_RANK] = {0};
    amp_sh_strides(r, x->dims, strides);
    AmpCode rc = AMP_OK;
    uint8_t ev[16] = {0}; /* the extrapolation value in x's dtype */
    if (ra->ct == AMP_RS_CT_CROP && ra->extrap != 0 && amp_sh_convertible(dt))
        rc = amp_sh_convert(k, &ra->extrap, AMP_DT_FLOAT, ev, dt, 1);
    const char *src = x->data;
    char *dst = y->data;
    for (uint64_t i = 0; !rc && i < y->nelem; i++, dst += es) {
        int64_t off = 0;
        bool outside = false;
        for (int d = 0; d < r; d++) {
            int64_t s = ax[d].idx[c[d]];
            if (s < 0) outside = true;
            off += s * strides[d];
        }
        memcpy(dst, outside ? (const char *)ev : src + (size_t)off * es, es);
        for (int d = r - 1; d >= 0; d--) {
            if (++c[d] < out[d]) break;
            c[d] = 0;
        }
    }
    return rc;
}

/* Linear and cubic: the weighted sum over every combination of taps, in double. */
static AmpCode resize_interp(AmpKernelCtx *k, const AmpResizeAttrs *ra, const AmpBuf *x, AmpBuf *y, const AmpResizeAxis *ax,
                             const int64_t *out) {
    int r = x->rank;
    bool is_double = x->dtype == AMP_DT_DOUBLE;
    int64_t strides[AMP_MAX_RANK], c[AMP_MAX_RANK] = {0};
    amp_sh_strides(r, x->dims, strides);
    float *ftmp = NULL, *otmp = NULL;
    const float *xf = is_double ? NULL : amp_buf_f32_in(x, &ftmp);
    float *yf = is_double ? NULL : amp_buf_f32_out(y, &otmp);
    const double *xd = is_double ? x->data : NULL;
    double *yd = is_double ? y->data : NULL;
    if (!is_double && (!xf || !yf)) {
        free(ftmp), free(otmp);
        return amp_fail(k->st, AMP_ERR_INTERNAL, "out of memory");
    }
    uint64_t combos = 1;
    for (int d = 0; d < r; d++) combos *= (uint64_t)ax[d].taps;
    for (uint64_t i = 0; i < y->nelem; i++) {
        double acc = 0;
        bool outside = false;
        for (uint64_t t = 0; t < combos && !outside; t++) {
            /* Tap t: one choice per axis, the last axis varying fastest. */
            uint64_t rem = t;
            double w = 1;
            int64_t off = 0;
            for (int d = r - 1; d >= 0; d--) {
                int nt = ax[d].taps, j = (int)(rem % (uint64_t)nt);
                rem /= (uint64_t)nt;
                int64_t s = ax[d].idx[c[d] * nt + j];
                if (s < 0) outside = true;
                w *= ax[d].w[c[d] * nt + j];
                off += s * strides[d];
            }
            if (!outside && w != 0) acc += w * (is_double ? xd[off] : (double)xf[off]);
        }
        if (outside) acc = ra->extrap;
        if (is_double) yd[i] = acc;
        else yf[i] = (float)acc;
        for (int d = r - 1; d >= 0; d--) {
            if (++c[d] < out[d]) break;
            c[d] = 0;
        }
    }
    free(ftmp);
    if (!is_double) amp_buf_f32_commit(y, otmp);
    return AMP_OK;
}

AmpCode amp_sh_resize(AmpKernelCtx *k) {
    const AmpResizeAttrs *ra = k->attrs;
    const AmpBuf *x = k->n_in > 0 ? k->in[0] : NULL;
    if (!x) return amp_kernel_fail(k, AMP_ERR_INPUT, "no input X");
    const AmpBuf *roi, *scales, *sizes;
    AmpResizeGeom g;
    AmpCode rc = amp_resize_inputs(k, &roi, &scales, &sizes);
    if (rc || (rc = amp_resize_geom(k, ra, x, roi, scales, sizes, &g))) return rc;
    /* Interpolating modes compute in floating point. */
    int dt = x->dtype;
    if (ra->mode != AMP_RS_NEAREST && !amp_is_f32_family(dt) && dt != AMP_DT_DOUBLE) return amp_kernel_bad_dtype(k, dt);
    size_t es = amp_sh_esize(k, dt);
    if (!es) return k->st->code;
    AmpBuf *y;
    if ((rc = amp_sh_out(k, dt, x->rank, g.out, &y)) || !y) return rc;
    if (y->nelem == 0) return AMP_OK;
    AmpResizeAxis ax[AMP_MAX_RANK];
    void *mem;
    if ((rc = amp_resize_tables(k, ra, x, &g, ax, &mem))) return rc;
    rc = ra->mode == AMP_RS_NEAREST ? resize_nearest(k, ra, x, y, ax, g.out, es) : resize_interp(k, ra, x, y, ax, g.out);
    free(mem);
    return rc;
}
