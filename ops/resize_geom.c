/* Resize's attributes, geometry and per-axis tables, every backend's (ops/resize_geom.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cast_engine.h" /* amp_sh_convert */
#include "ops/kernel_out.h"  /* amp_prep_out */
#include "ops/resize_geom.h"
#include "ops/sh_common.h"   /* amp_sh_ints */

/* ---- attributes, parsed once at prepare ---------------------------------------------- */

static int lookup(const char *s, const char *const *names, int n) {
    for (int i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0) return i;
    return -1;
}

AmpCode amp_sh_resize_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    static const char *const modes[] = {"nearest", "linear", "cubic"};
    static const char *const nmodes[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    static const char *const cts[] = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                                      "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"};
    static const char *const policies[] = {"stretch", "not_larger", "not_smaller"};
    AmpResizeAttrs a = {0};
    const char *ms = amp_node_attr_string(n, "mode", "nearest");
    a.mode = lookup(ms, modes, 3);
    if (a.mode < 0 && strcmp(ms, "bilinear") == 0) a.mode = AMP_RS_LINEAR;
    if (a.mode < 0) return amp_node_fail(n, st, AMP_ERR_INPUT, "unknown mode '%s'", ms);
    if (opset < 11) { /* Resize-10: (X, scales); the Upsample semantics */
        a.ct = AMP_RS_CT_ASYM, a.nr = AMP_RS_NR_FLOOR;
    } else {
        const char *cs = amp_node_attr_string(n, "coordinate_transformation_mode", "half_pixel");
        const char *ns = amp_node_attr_string(n, "nearest_mode", "round_prefer_floor");
        if ((a.ct = lookup(cs, cts, 7)) < 0)
            return amp_node_fail(n, st, AMP_ERR_INPUT, "unknown coordinate_transformation_mode '%s'", cs);
        if ((a.nr = lookup(ns, nmodes, 4)) < 0) return amp_node_fail(n, st, AMP_ERR_INPUT, "unknown nearest_mode '%s'", ns);
    }
    a.A = amp_node_attr_float(n, "cubic_coeff_a", -0.75f);
    a.exclude = amp_node_attr_int(n, "exclude_outside", 0) != 0;
    a.extrap = amp_node_attr_float(n, "extrapolation_value", 0.0f);
    a.antialias = amp_node_attr_int(n, "antialias", 0) != 0;
    const char *policy = amp_node_attr_string(n, "keep_aspect_ratio_policy", "stretch");
    if ((a.policy = lookup(policy, policies, 3)) < 0)
        return amp_node_fail(n, st, AMP_ERR_INPUT, "unknown keep_aspect_ratio_policy '%s'", policy);
    const AmpAttr *aa = amp_node_attr(n, "axes");
    if (aa && aa->n_ints) {
        if (aa->n_ints > AMP_MAX_RANK) return amp_node_fail(n, st, AMP_ERR_INPUT, "more axes than the rank");
        a.na = aa->n_ints;
        for (size_t i = 0; i < a.na; i++) a.axes[i] = aa->ints[i];
    }
    return amp_prep_out(&a, sizeof a, attrs, st);
}

/* ---- the geometry: what the inputs ask for -------------------------------------------- */

/* Reads the float-typed scales / roi input into out[] (n values expected). */
static AmpCode read_floats(AmpKernelCtx *k, const AmpBuf *b, const char *what, double *out, size_t n) {
    if (b->nelem != n)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "%s has %llu values, expected %zu", what, (unsigned long long)b->nelem, n);
    if (!amp_dtype_is_float(b->dtype) || !amp_sh_convertible(b->dtype))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "%s must be a float tensor, not %s", what, amp_dtype_name(b->dtype));
    return amp_sh_convert(k, b->data, b->dtype, out, AMP_DT_DOUBLE, n);
}

/* The resized axes (attribute since opset 18, else all). */
static AmpCode resize_axes(AmpKernelCtx *k, const AmpResizeAttrs *ra, AmpResizeGeom *g) {
    g->na = (size_t)g->r;
    if (!ra->na) {
        for (int d = 0; d < g->r; d++) g->axes[d] = d;
        return AMP_OK;
    }
    if (ra->na > (size_t)g->r) return amp_kernel_fail(k, AMP_ERR_INPUT, "more axes than the rank");
    g->na = ra->na;
    bool seen[AMP_MAX_RANK] = {false};
    for (size_t i = 0; i < g->na; i++) {
        int a;
        if (!amp_norm_axis(ra->axes[i], g->r, &a) || seen[a])
            return amp_kernel_fail(k, AMP_ERR_INPUT, "axes are out of range or repeated");
        seen[a] = true;
        g->axes[i] = a;
    }
    return AMP_OK;
}

/* Output sizes from sizes (with keep_aspect_ratio_policy). */
static AmpCode resize_sizes(AmpKernelCtx *k, const AmpResizeAttrs *ra, const AmpBuf *x, const AmpBuf *sizes,
                            AmpResizeGeom *g) {
    int64_t sz[AMP_MAX_RANK];
    size_t n, na = g->na;
    AmpCode rc;
    if ((rc = amp_sh_ints(k, sizes, "sizes", sz, AMP_MAX_RANK, &n))) return rc;
    if (n != na) return amp_kernel_fail(k, AMP_ERR_INPUT, "sizes has %zu values, expected %zu", n, na);
    for (size_t i = 0; i < na; i++) {
        int64_t d = g->axes[i];
        if (sz[i] < 0) return amp_kernel_fail(k, AMP_ERR_INPUT, "sizes[%zu] is %lld", i, (long long)sz[i]);
        if (x->dims[d] == 0 && sz[i] != 0) return amp_kernel_fail(k, AMP_ERR_INPUT, "cannot resize an empty axis");
        g->out[d] = sz[i];
        g->scale[d] = x->dims[d] ? (double)sz[i] / (double)x->dims[d] : 1.0;
    }
    bool larger = ra->policy == AMP_RS_KA_NOT_LARGER, smaller = ra->policy == AMP_RS_KA_NOT_SMALLER;
    if (!larger && !smaller) return AMP_OK;
    double s = g->scale[g->axes[0]];
    for (size_t i = 1; i < na; i++) s = larger ? fmin(s, g->scale[g->axes[i]]) : fmax(s, g->scale[g->axes[i]]);
    for (size_t i = 0; i < na; i++) {
        double o = floor(s * (double)x->dims[g->axes[i]] + 0.5); /* round half up, as the reference */
        if (!(o <= 9.0e15)) return amp_kernel_fail(k, AMP_ERR_INPUT, "output is too large");
        g->scale[g->axes[i]] = s, g->out[g->axes[i]] = (int64_t)o;
    }
    return AMP_OK;
}

/* The geometry from exactly one of scales and sizes, and roi for tf_crop_and_resize. */
AmpCode amp_resize_geom(AmpKernelCtx *k, const AmpResizeAttrs *ra, const AmpBuf *x, const AmpBuf *roi,
                        const AmpBuf *scales, const AmpBuf *sizes, AmpResizeGeom *g) {
    g->r = x->rank;
    AmpCode rc = resize_axes(k, ra, g);
    if (rc) return rc;
    double v[2 * AMP_MAX_RANK];
    size_t na = g->na;
    for (int d = 0; d < g->r; d++) g->scale[d] = 1, g->out[d] = x->dims[d], g->r0[d] = 0, g->r1[d] = 1;
    if (scales) {
        if ((rc = read_floats(k, scales, "scales", v, na))) return rc;
        for (size_t i = 0; i < na; i++) {
            int64_t d = g->axes[i];
            if (!(v[i] > 0) || !isfinite(v[i])) return amp_kernel_fail(k, AMP_ERR_INPUT, "scales[%zu] is %g", i, v[i]);
            double o = floor(v[i] * (double)x->dims[d]);
            if (o > 9.0e15) return amp_kernel_fail(k, AMP_ERR_INPUT, "output is too large");
            g->scale[d] = v[i], g->out[d] = (int64_t)o;
        }
    } else if ((rc = resize_sizes(k, ra, x, sizes, g))) {
        return rc;
    }
    if (ra->ct == AMP_RS_CT_CROP) {
        if (!roi) return amp_kernel_fail(k, AMP_ERR_INPUT, "tf_crop_and_resize needs the roi input");
        if ((rc = read_floats(k, roi, "roi", v, 2 * na))) return rc;
        for (size_t i = 0; i < na; i++) g->r0[g->axes[i]] = v[i], g->r1[g->axes[i]] = v[na + i];
    }
    for (int d = 0; d < g->r; d++)
        if (ra->antialias && ra->mode != AMP_RS_NEAREST && g->scale[d] < 1)
            return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "antialiased downsampling is not supported");
    return AMP_OK;
}

AmpCode amp_resize_inputs(AmpKernelCtx *k, const AmpBuf **roi, const AmpBuf **scales, const AmpBuf **sizes) {
    *roi = *sizes = NULL;
    if (k->opset < 11) { /* Resize-10: (X, scales) */
        *scales = k->n_in > 1 ? k->in[1] : NULL;
    } else {
        *roi = k->n_in > 1 ? k->in[1] : NULL;
        *scales = k->n_in > 2 ? k->in[2] : NULL;
        *sizes = k->n_in > 3 ? k->in[3] : NULL;
    }
    if (*scales && (*scales)->nelem == 0) *scales = NULL; /* empty placeholders (opset 11-12) */
    if (*sizes && (*sizes)->nelem == 0) *sizes = NULL;
    if (*roi && (*roi)->nelem == 0) *roi = NULL;
    if (!*scales == !*sizes) return amp_kernel_fail(k, AMP_ERR_INPUT, "exactly one of scales and sizes must be given");
    return AMP_OK;
}

/* ---- the per-axis tables: source indices and weights ---------------------------------- */

/* Source coordinate of output index o along an axis (ONNX reference formulas; `ow` is
 * scale * in, which need not be an integer). */
static double source_coord(int ct, double o, double scale, int64_t in, int64_t out, double r0, double r1) {
    double ow = scale * (double)in;
    switch (ct) {
    case AMP_RS_CT_ALIGN: return ow == 1 ? 0.0 : o * (double)(in - 1) / (ow - 1);
    case AMP_RS_CT_ASYM: return o / scale;
    case AMP_RS_CT_CROP:
        if (ow == 1) return (r1 - r0) * (double)(in - 1) / 2 + r0 * (double)(in - 1);
        return o * (r1 - r0) * (double)(in - 1) / (ow - 1) + r0 * (double)(in - 1);
    case AMP_RS_CT_PYTORCH: return ow == 1 ? -0.5 : (o + 0.5) / scale - 0.5;
    case AMP_RS_CT_TF_NN: return (o + 0.5) / scale;
    case AMP_RS_CT_HALF_PIXEL_SYM: {
        double adj = (double)out / ow, center = (double)in / 2;
        return center * (1 - adj) + (o + 0.5) / scale - 0.5;
    }
    default: return (o + 0.5) / scale - 0.5;
    }
}

static int64_t clampi(int64_t v, int64_t n) {
    return v < 0 ? 0 : v >= n ? n - 1 : v;
}

/* Fills one axis' taps and weights. */
static void build_axis(AmpResizeAxis *a, int mode, int nr, int ct, double scale, int64_t in, int64_t out, double r0,
                       double r1, double A, bool exclude) {
    for (int64_t o = 0; o < out; o++) {
        int64_t *ix = a->idx + o * a->taps;
        double *w = a->w + o * a->taps;
        double x = source_coord(ct, (double)o, scale, in, out, r0, r1);
        if (ct == AMP_RS_CT_CROP && (x < 0 || x > (double)(in - 1))) {
            for (int t = 0; t < a->taps; t++) ix[t] = -1, w[t] = 0;
            continue;
        }
        /* Far outside the axis every tap clamps to an end anyway; bounding x keeps the
         * integer conversion below defined for hostile scales. */
        x = fmax(-2.0, fmin(x, (double)in + 1));
        double fl = floor(x), ratio = x - fl;
        int64_t i0 = (int64_t)fl;
        if (mode == AMP_RS_NEAREST) {
            int64_t n = i0;
            if (ratio != 0) {
                bool up =
                    nr == AMP_RS_NR_CEIL || (nr == AMP_RS_NR_PREFER_FLOOR && ratio > 0.5) || (nr == AMP_RS_NR_PREFER_CEIL && ratio >= 0.5);
                n = up ? i0 + 1 : i0;
            }
            ix[0] = clampi(n, in), w[0] = 1;
        } else if (mode == AMP_RS_LINEAR) {
            ix[0] = clampi(i0, in), ix[1] = clampi(i0 + 1, in);
            w[0] = 1 - ratio, w[1] = ratio;
        } else {
            double t = ratio;
            double c[4] = {
                ((A * (t + 1) - 5 * A) * (t + 1) + 8 * A) * (t + 1) - 4 * A,
                ((A + 2) * t - (A + 3)) * t * t + 1,
                ((A + 2) * (1 - t) - (A + 3)) * (1 - t) * (1 - t) + 1,
                ((A * (2 - t) - 5 * A) * (2 - t) + 8 * A) * (2 - t) - 4 * A,
            };
            double sum = 0;
            for (int j = 0; j < 4; j++) {
                int64_t s = i0 - 1 + j;
                if (exclude && (s < 0 || s >= in)) c[j] = 0;
                sum += c[j];
                ix[j] = clampi(s, in);
            }
            for (int j = 0; j < 4; j++) w[j] = exclude && sum != 0 ? c[j] / sum : c[j];
        }
    }
}

/* Axes left as they are (scale 1, same size, no crop) get one tap. */
AmpCode amp_resize_tables(AmpKernelCtx *k, const AmpResizeAttrs *ra, const AmpBuf *x, const AmpResizeGeom *g,
                          AmpResizeAxis *ax, void **mem) {
    int r = x->rank, mode = ra->mode, ct = ra->ct;
    bool same[AMP_MAX_RANK];
    int taps = mode == AMP_RS_NEAREST ? 1 : mode == AMP_RS_LINEAR ? 2 : 4;
    size_t total = 1; /* never a zero-byte allocation */
    for (int d = 0; d < r; d++) {
        same[d] = fabs(g->scale[d] - 1) <= 1e-9 && g->out[d] == x->dims[d] &&
                  (ct != AMP_RS_CT_CROP || (fabs(g->r0[d]) <= 1e-9 && fabs(g->r1[d] - 1) <= 1e-9));
        ax[d].taps = same[d] ? 1 : taps;
        total += (size_t)g->out[d] * (size_t)ax[d].taps;
    }
    char *buf = malloc(total * (sizeof(int64_t) + sizeof(double)));
    if (!buf) return amp_fail(k->st, AMP_ERR_INTERNAL, "out of memory");
    int64_t *ibuf = (int64_t *)buf;
    double *wbuf = (double *)(buf + total * sizeof(int64_t));
    size_t at = 0;
    for (int d = 0; d < r; d++) {
        ax[d].idx = ibuf + at, ax[d].w = wbuf + at;
        at += (size_t)g->out[d] * (size_t)ax[d].taps;
        if (same[d]) {
            for (int64_t o = 0; o < g->out[d]; o++) ax[d].idx[o] = o, ax[d].w[o] = 1;
        } else {
            build_axis(&ax[d], mode, ra->nr, ct, g->scale[d], x->dims[d], g->out[d], g->r0[d], g->r1[d], ra->A,
                       ra->exclude);
        }
    }
    *mem = buf;
    return AMP_OK;
}
