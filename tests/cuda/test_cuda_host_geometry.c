/* The host side of the CUDA ConvTranspose and Resize kernels, on the CPU (no GPU needed):
 * which ConvTranspose geometries (the CPU's amp_convtranspose_geom) cuDNN is given and
 * which fall back with AMP_ERR_UNSUPPORTED; Resize's table layout in the workspace; the
 * supports predicates of both ops; the Resize geometry and tables the CUDA kernel takes
 * from the CPU's code; and the Resize kernel's per-element arithmetic (resize_elem.h) run
 * on the host against the CPU kernel. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/conv_geom.h"
#include "ops/resize_geom.h"
#include "kernels/cuda/conv.h"
#include "kernels/cuda/resize.h"
#include "kernels/cuda/resize_elem.h"
#include "tests/kernels/kernel_test_util.h"

static AmpModel *model;
static AmpStatus st;

static void setup(void) {
    model = amp_model_new();
    cr_assert_not_null(model);
}

static void teardown(void) {
    amp_model_free(model);
}

TestSuite(cuda_host, .init = setup, .fini = teardown);

static AmpNode *mknode(const char *op, int n_in) {
    AmpNode *n = amp_node_new(model->graph, "", op, "n", n_in, 1);
    cr_assert_not_null(n);
    return n;
}

/* ---- ConvTranspose: the CPU's geometry, and whether cuDNN takes it ----------------- */

typedef struct CtCase {
    const char *what;
    int64_t x[6], w[6]; /* rank = nsp + 2 */
    int rank;
    const char *attrs; /* "strides=2,2 pads=1,1,1,1 ..." (ints) and "auto_pad=NAME" */
    const char *refusal; /* NULL: cuDNN takes it; else a word of the reason */
} CtCase;

static void set_attrs(AmpNode *n, const char *spec) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", spec);
    for (char *save = NULL, *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
        char *eq = strchr(t, '=');
        cr_assert_not_null(eq);
        *eq = 0;
        if (!strcmp(t, "auto_pad") || !strcmp(t, "mode") || !strcmp(t, "coordinate_transformation_mode") ||
            !strcmp(t, "nearest_mode")) {
            attr_str(n, t, eq + 1);
            continue;
        }
        if (!strcmp(t, "extrapolation_value") || !strcmp(t, "cubic_coeff_a")) {
            attr_float(n, t, (float)atof(eq + 1));
            continue;
        }
        if (!strcmp(t, "group") || !strcmp(t, "antialias") || !strcmp(t, "exclude_outside")) {
            attr_int(n, t, atoll(eq + 1));
            continue;
        }
        int64_t v[16];
        int cnt = 0;
        for (char *s2 = NULL, *u = strtok_r(eq + 1, ",", &s2); u; u = strtok_r(NULL, ",", &s2)) v[cnt++] = atoll(u);
        attr_ints(n, t, cnt, v);
    }
}

static const char *ct_refusal(const CtCase *c, AmpConvGeom *g) {
    AmpNode *n = mknode("ConvTranspose", 2);
    set_attrs(n, c->attrs);
    void *attrs = NULL;
    cr_assert_eq(amp_conv_prepare(n, 17, &attrs, &st), AMP_OK, "%s: %s", c->what, st.msg);
    AmpBuf x = {.dtype = AMP_DT_FLOAT, .rank = c->rank}, w = {.dtype = AMP_DT_FLOAT, .rank = c->rank};
    memcpy(x.dims, c->x, sizeof c->x);
    memcpy(w.dims, c->w, sizeof c->w);
    AmpKernelCtx k = {.node = n, .opset = 17, .attrs = attrs, .st = &st};
    int64_t kern[AMP_MAX_SPATIAL];
    cr_assert_eq(amp_conv_kernel_from_w(&k, attrs, &w, c->rank - 2, kern), AMP_OK, "%s", st.msg);
    cr_assert_eq(amp_convtranspose_geom(&k, attrs, &x, kern, g), AMP_OK, "%s: %s", c->what, st.msg);
    free(attrs);
    return amp_cuda_convtranspose_refusal(g);
}

Test(cuda_host, convtranspose_geometries_cudnn_takes_or_refuses) {
    static const CtCase cases[] = {
        {"plain 3x3", {1, 3, 5, 5}, {3, 4, 3, 3}, 4, "strides=1,1", NULL},
        {"stride 2, pads 1, output_padding 1", {1, 4, 7, 7}, {4, 2, 3, 3}, 4,
         "strides=2,2 pads=1,1,1,1 output_padding=1,1", NULL},
        {"groups and dilations", {1, 4, 6, 6}, {4, 3, 3, 3}, 4, "group=2 strides=2,2 dilations=2,1", NULL},
        {"1-D", {2, 3, 33}, {3, 5, 4}, 3, "strides=3", NULL},
        {"3-D", {1, 2, 3, 4, 5}, {2, 3, 2, 2, 2}, 5, "strides=2,2,2", NULL},
        {"SAME_UPPER, even total", {1, 3, 5, 5}, {3, 4, 4, 4}, 4, "strides=2,2 auto_pad=SAME_UPPER", NULL},
        {"SAME_UPPER, odd total", {1, 3, 5, 5}, {3, 4, 3, 3}, 4, "strides=2,2 auto_pad=SAME_UPPER", "asymmetric"},
        {"SAME_LOWER, odd total", {1, 3, 5, 5}, {3, 4, 3, 3}, 4, "strides=2,2 auto_pad=SAME_LOWER", "asymmetric"},
        {"output_shape, natural size", {1, 3, 5, 5}, {3, 4, 3, 3}, 4, "strides=2,2 output_shape=11,11", NULL},
        {"output_shape one short", {1, 3, 5, 5}, {3, 4, 3, 3}, 4, "strides=2,2 output_shape=10,10", "asymmetric"},
        {"output_shape two short", {1, 3, 5, 5}, {3, 4, 3, 3}, 4, "strides=2,2 output_shape=9,9", NULL},
        {"output_shape two long", {1, 3, 5, 5}, {3, 4, 3, 3}, 4, "strides=2,2 output_shape=13,13", "negative"},
        {"asymmetric pads", {1, 3, 5, 6}, {3, 4, 3, 3}, 4, "pads=0,1,1,0", "asymmetric"},
        {"output_padding above the stride", {1, 2, 5, 5}, {2, 2, 3, 3}, 4, "dilations=3,3 output_padding=2,2",
         "output_padding"},
        {"four spatial axes", {1, 1, 2, 2, 2, 2}, {1, 1, 1, 1, 1, 1}, 6, "strides=1,1,1,1", "spatial"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const CtCase *c = &cases[i];
        AmpConvGeom g;
        const char *why = ct_refusal(c, &g);
        if (!c->refusal) {
            cr_expect_null(why, "%s: refused (%s)", c->what, why ? why : "");
            /* what cuDNN will check: a forward convolution of Y gives X's size, pads alike */
            for (int d = 0; d < g.nsp; d++) {
                int64_t eff = (g.kern[d] - 1) * g.dil[d] + 1;
                cr_expect_eq(g.pad0[d], g.pad1[d], "%s", c->what);
                cr_expect_eq((g.out[d] + 2 * g.pad0[d] - eff) / g.stride[d] + 1, g.in[d], "%s", c->what);
            }
        } else {
            cr_expect_not_null(why, "%s: taken", c->what);
            if (why) cr_expect_not_null(strstr(why, c->refusal), "%s: '%s'", c->what, why);
        }
    }
}

/* ---- Resize: the tables' layout ------------------------------------------------------ */

Test(cuda_host, resize_layout) {
    AmpCudaResize p;
    memset(&p, 0, sizeof p);
    const int64_t x[4] = {2, 3, 5, 7}, out[4] = {2, 3, 10, 14};
    const int taps[4] = {1, 1, 2, 2};
    cr_assert_eq(amp_cuda_resize_layout(4, x, out, taps, 1000, &p), 2 + 3 + 20 + 28);
    cr_expect_eq(p.rank, 4);
    const int64_t strides[4] = {105, 35, 7, 1}, tab[4] = {0, 2, 5, 25};
    for (int d = 0; d < 4; d++) {
        cr_expect_eq(p.stride[d], strides[d], "axis %d", d);
        cr_expect_eq(p.tab[d], tab[d], "axis %d", d);
        cr_expect_eq(p.out[d], out[d]);
        cr_expect_eq(p.taps[d], taps[d]);
    }
    /* too many entries for the workspace, a source index past int32, rank over 8: refused */
    cr_expect_eq(amp_cuda_resize_layout(4, x, out, taps, 52, &p), 0);
    const int64_t big[1] = {(int64_t)INT32_MAX + 1}, one[1] = {1};
    const int t1[1] = {1};
    cr_expect_eq(amp_cuda_resize_layout(1, big, one, t1, 1000, &p), 0);
    int64_t d9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    int t9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    cr_expect_eq(amp_cuda_resize_layout(9, d9, d9, t9, 1000, &p), 0);
    cr_expect_eq(amp_cuda_resize_layout(0, d9, d9, t9, 1000, &p), 1); /* a scalar: one unused entry */
}

/* ---- the supports predicates ------------------------------------------------------- */

Test(cuda_host, supports) {
    cr_assert_not_null(amp_cuda_ops[AMP_OP_ConvTranspose].fn);
    cr_assert_not_null(amp_cuda_ops[AMP_OP_Resize].fn);
    AmpNode *ct = mknode("ConvTranspose", 3);
    amp_node_set_input(ct, 0, amp_graph_value(model->graph, "X"));
    amp_node_set_input(ct, 1, amp_graph_value(model->graph, "W"));
    AmpCudaSupportsFn cs = amp_cuda_ops[AMP_OP_ConvTranspose].supports;
    int f32[3] = {AMP_DT_FLOAT, AMP_DT_FLOAT, 0}, f16[3] = {AMP_DT_FLOAT16, AMP_DT_FLOAT16, 0};
    int mixed[3] = {AMP_DT_FLOAT, AMP_DT_FLOAT16, 0}, f64[3] = {AMP_DT_DOUBLE, AMP_DT_DOUBLE, 0};
    cr_expect(cs(ct, 17, f32) && cs(ct, 17, f16));
    cr_expect(!cs(ct, 17, mixed) && !cs(ct, 17, f64));

    AmpCudaSupportsFn rs = amp_cuda_ops[AMP_OP_Resize].supports;
    static const struct {
        const char *mode;
        int dt;
        bool taken;
    } rows[] = {
        {"nearest", AMP_DT_FLOAT, true},   {"nearest", AMP_DT_BFLOAT16, true}, {"nearest", AMP_DT_INT64, true},
        {"nearest", AMP_DT_BOOL, true},    {"nearest", AMP_DT_UINT8, true},    {"nearest", AMP_DT_DOUBLE, false},
        {"nearest", AMP_DT_STRING, false}, {"linear", AMP_DT_FLOAT16, true},   {"linear", AMP_DT_INT32, false},
        {"cubic", AMP_DT_BFLOAT16, true},  {"cubic", AMP_DT_UINT8, false},     {"linear", AMP_DT_DOUBLE, false},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        AmpNode *n = mknode("Resize", 3);
        amp_node_set_input(n, 0, amp_graph_value(model->graph, "X"));
        attr_str(n, "mode", rows[i].mode);
        int dts[3] = {rows[i].dt, AMP_DT_UNDEFINED, AMP_DT_FLOAT};
        cr_expect_eq(rs(n, 18, dts), rows[i].taken, "%s %s", rows[i].mode, amp_dtype_name(rows[i].dt));
    }
}

/* ---- Resize: the CPU's geometry and tables, as the CUDA kernel takes them ------------ */

/* Prepares a Resize of X (dims) with scales (host) and builds its geometry and tables. */
static AmpCode resize_plan(const char *attrs, int rank, const int64_t *dims, const float *scales, AmpResizeGeom *g,
                           AmpResizeAxis *ax, void **mem) {
    AmpNode *n = mknode("Resize", 3);
    set_attrs(n, attrs);
    void *ra = NULL;
    cr_assert_eq(amp_sh_resize_prepare(n, 18, &ra, &st), AMP_OK, "%s", st.msg);
    AmpBuf x = {.dtype = AMP_DT_FLOAT, .rank = rank};
    memcpy(x.dims, dims, (size_t)rank * sizeof *dims);
    x.nelem = amp_shape_nelem(rank, dims);
    int64_t sd[1] = {rank};
    AmpBuf s = mkbuf(AMP_DT_FLOAT, 1, sd, scales);
    const AmpBuf *in[3] = {&x, NULL, &s};
    AmpKernelCtx k = {.node = n, .opset = 18, .n_in = 3, .in = in, .attrs = ra, .st = &st};
    const AmpBuf *roi, *sc, *sz;
    AmpCode rc = amp_resize_inputs(&k, &roi, &sc, &sz);
    cr_assert_eq(rc, AMP_OK, "%s", st.msg);
    cr_assert(sc == &s && !roi && !sz);
    rc = amp_resize_geom(&k, ra, &x, roi, sc, sz, g);
    if (!rc) rc = amp_resize_tables(&k, ra, &x, g, ax, mem);
    free(ra);
    return rc;
}

Test(cuda_host, resize_tables_from_the_cpu) {
    AmpResizeGeom g;
    AmpResizeAxis ax[AMP_MAX_RANK];
    void *mem = NULL;
    /* linear, half_pixel, 2 -> 4 on the last axis: sources at -0.25, 0.25, 0.75, 1.25 */
    cr_assert_eq(resize_plan("mode=linear", 2, I64(3, 2), (const float[]){1, 2}, &g, ax, &mem), AMP_OK, "%s",
                 st.msg);
    cr_expect_eq(g.out[0], 3);
    cr_expect_eq(g.out[1], 4);
    cr_expect_eq(ax[0].taps, 1); /* an axis left as it is */
    cr_assert_eq(ax[1].taps, 2);
    const int64_t idx[8] = {0, 0, 0, 1, 0, 1, 1, 1};
    const double w[8] = {0.25, 0.75, 0.75, 0.25, 0.25, 0.75, 0.75, 0.25}; /* both taps clamp to 0 at first */
    for (int e = 0; e < 8; e++) {
        cr_expect_eq(ax[1].idx[e], idx[e], "entry %d", e);
        cr_expect_float_eq(ax[1].w[e], w[e], 1e-12, "entry %d", e);
    }
    AmpCudaResize p;
    int taps[2] = {ax[0].taps, ax[1].taps};
    cr_expect_eq(amp_cuda_resize_layout(2, I64(3, 2), g.out, taps, 1000, &p), 3 + 8);
    free(mem);
    /* nearest, asymmetric, round_prefer_floor: 5 -> 2 picks 0 and 2 (2.5 rounds down) */
    cr_assert_eq(resize_plan("mode=nearest coordinate_transformation_mode=asymmetric", 1, I64(5),
                             (const float[]){0.4f}, &g, ax, &mem),
                 AMP_OK, "%s", st.msg);
    cr_expect_eq(g.out[0], 2);
    cr_expect_eq(ax[0].idx[0], 0);
    cr_expect_eq(ax[0].idx[1], 2);
    free(mem);
    /* antialiased downsampling: refused, the CPU does not do it either */
    cr_expect_eq(resize_plan("mode=linear antialias=1", 1, I64(8), (const float[]){0.5f}, &g, ax, &mem),
                 AMP_ERR_UNSUPPORTED);
}

/* ---- Resize: the CUDA kernel's arithmetic, run on the host, against the CPU kernel --- */

/* resize.cu's two kernels over the packed tables, with resize_elem.h's functions, for
 * float32 data (the kernels' own loops, a few lines, are the only part left to the GPU). */
static void emulate(const AmpCudaResize *p, const char *tables, size_t woff, const float *x, float *y, uint64_t n) {
    const int32_t *idx = (const int32_t *)tables;
    const float *w = p->interp ? (const float *)(tables + woff) : NULL;
    int combos = amp_cuda_resize_combos(p);
    for (uint64_t i = 0; i < n; i++) {
        int64_t c[AMP_CUDA_RESIZE_RANK], off;
        float wt, acc = 0.f, ev;
        memcpy(&ev, &p->ev, sizeof ev);
        amp_cuda_resize_coords(i, p, c);
        if (!p->interp) {
            y[i] = amp_cuda_resize_tap(p, idx, NULL, c, 0, &off, &wt) ? x[off] : ev;
            continue;
        }
        bool inside = true;
        for (int t = 0; t < combos && inside; t++) {
            inside = amp_cuda_resize_tap(p, idx, w, c, t, &off, &wt);
            if (inside && wt != 0.f) acc += wt * x[off];
        }
        y[i] = inside ? acc : p->extrap;
    }
}

typedef struct RsCase {
    const char *attrs;
    int rank;
    int64_t x[4];
    float scales[4], roi[8]; /* roi: only with tf_crop_and_resize */
} RsCase;

Test(cuda_host, resize_kernel_arithmetic_matches_the_cpu) {
    static const RsCase cases[] = {
        {"mode=linear", 4, {2, 3, 5, 7}, {1, 1, 2, 0.6f}, {0}},
        {"mode=linear coordinate_transformation_mode=align_corners", 2, {1, 9}, {3, 0.5f}, {0}},
        {"mode=cubic", 4, {2, 3, 5, 7}, {1, 1, 2, 0.6f}, {0}},
        {"mode=cubic exclude_outside=1 cubic_coeff_a=-0.5", 4, {1, 1, 9, 4}, {1, 1, 0.5f, 2.5f}, {0}},
        {"mode=nearest nearest_mode=ceil coordinate_transformation_mode=pytorch_half_pixel", 3, {3, 5, 1},
         {2.4f, 0.6f, 3}, {0}},
        {"mode=nearest coordinate_transformation_mode=tf_half_pixel_for_nn", 1, {17}, {1.7f}, {0}},
        {"mode=linear coordinate_transformation_mode=tf_crop_and_resize extrapolation_value=2.5", 2, {5, 5},
         {1.4f, 1.2f}, {-0.2f, 0.3f, 1.4f, 1.2f}},
        {"mode=nearest coordinate_transformation_mode=tf_crop_and_resize extrapolation_value=-7", 2, {5, 6},
         {1.4f, 0.5f}, {-0.2f, 0.3f, 1.4f, 1.2f}},
        {"mode=cubic coordinate_transformation_mode=half_pixel_symmetric", 2, {4, 6}, {2.5f, 0.7f}, {0}},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const RsCase *rc = &cases[ci];
        AmpNode *n = mknode("Resize", 3);
        set_attrs(n, rc->attrs);
        bool crop = strstr(rc->attrs, "tf_crop_and_resize") != NULL;
        float xs[4096];
        uint64_t nx = amp_shape_nelem(rc->rank, rc->x);
        cr_assert_leq(nx, 4096);
        for (uint64_t i = 0; i < nx; i++) xs[i] = (float)((int)(i * 7919 % 61) - 30) / 10.0f;
        int64_t sd[1] = {rc->rank}, rd[1] = {2 * rc->rank};
        AmpBuf x = mkbuf(AMP_DT_FLOAT, rc->rank, rc->x, xs), sc = mkbuf(AMP_DT_FLOAT, 1, sd, rc->scales);
        AmpBuf roi = mkbuf(AMP_DT_FLOAT, 1, rd, rc->roi);
        const AmpBuf *in[3] = {&x, crop ? &roi : NULL, &sc};
        Outs outs;
        cr_assert_eq(kt_run(n, 19, 3, in, 1, &outs, &st), AMP_OK, "%s: %s", rc->attrs, st.msg);
        /* the CUDA kernel's host side: the CPU's geometry and tables, packed */
        void *ra = NULL;
        cr_assert_eq(amp_sh_resize_prepare(n, 19, &ra, &st), AMP_OK);
        AmpKernelCtx k = {.node = n, .opset = 19, .n_in = 3, .in = in, .attrs = ra, .st = &st};
        AmpResizeGeom g;
        AmpResizeAxis ax[AMP_MAX_RANK];
        void *mem;
        cr_assert_eq(amp_resize_geom(&k, ra, &x, crop ? &roi : NULL, &sc, NULL, &g), AMP_OK, "%s", st.msg);
        cr_assert_eq(amp_resize_tables(&k, ra, &x, &g, ax, &mem), AMP_OK);
        AmpCudaResize p;
        memset(&p, 0, sizeof p);
        size_t bytes, woff = 0;
        bool interp = ((const AmpResizeAttrs *)ra)->mode != AMP_RS_NEAREST;
        char *h = amp_cuda_resize_pack(rc->rank, rc->x, g.out, ax, interp, 1 << 20, &p, &bytes, &woff);
        cr_assert_not_null(h, "%s", rc->attrs);
        p.interp = interp;
        p.extrap = ((const AmpResizeAttrs *)ra)->extrap;
        if (!interp && crop) memcpy(&p.ev, &p.extrap, sizeof p.extrap); /* float32's bytes */
        const AmpBuf *ref = &outs.b[0];
        cr_assert_eq(ref->rank, rc->rank);
        for (int d = 0; d < rc->rank; d++) cr_assert_eq(ref->dims[d], g.out[d], "%s: axis %d", rc->attrs, d);
        float *y = calloc(ref->nelem ? ref->nelem : 1, sizeof *y);
        emulate(&p, h, woff, xs, y, ref->nelem);
        for (uint64_t i = 0; i < ref->nelem; i++) {
            float r = ((const float *)ref->data)[i];
            cr_expect(fabsf(y[i] - r) <= 1e-5f * (1 + fabsf(r)), "%s: element %llu: %g, the CPU %g", rc->attrs,
                      (unsigned long long)i, y[i], r);
        }
        free(y), free(h), free(mem), free(ra);
        outs_free(&outs);
    }
}
