/* CPU kernels: MaxPool (with its optional int64 Indices output), AveragePool,
 * GlobalAveragePool and GlobalMaxPool over N-D windows (geometry: ops/conv_geom.h). Values are
 * widened to double: exact for float32, 16-bit floats, int8 and uint8, and double comes
 * for free; sums accumulate in double and round once on store. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/kernels.h"
#include "ops/conv_geom.h"
#include "ops/geom.h"
#include "ir/half.h"
#include "ir/parallel.h"

static bool pool_dtype(int dt, bool is_max) {
    return amp_is_f32_family(dt) || dt == AMP_DT_DOUBLE || (is_max && (dt == AMP_DT_INT8 || dt == AMP_DT_UINT8));
}

/* A double copy of b (free() it); NULL on OOM. */
static double *load(const AmpBuf *b) {
    double *d = malloc((b->nelem ? b->nelem : 1) * sizeof *d);
    if (!d) return NULL;
    for (uint64_t i = 0; i < b->nelem; i++) {
        switch (b->dtype) {
        case AMP_DT_FLOAT: d[i] = ((const float *)b->data)[i]; break;
        case AMP_DT_DOUBLE: d[i] = ((const double *)b->data)[i]; break;
        case AMP_DT_FLOAT16: d[i] = amp_f16_to_f32(((const uint16_t *)b->data)[i]); break;
        case AMP_DT_BFLOAT16: d[i] = amp_bf16_to_f32(((const uint16_t *)b->data)[i]); break;
        case AMP_DT_INT8: d[i] = ((const int8_t *)b->data)[i]; break;
        default: d[i] = ((const uint8_t *)b->data)[i]; break;
        }
    }
    return d;
}

static double clamp(double v, double lo, double hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

/* Rounds v into b's storage (integers: clamped, so an all-padding window is the lowest). */
static void store(AmpBuf *b, const double *v) {
    for (uint64_t i = 0; i < b->nelem; i++) {
        switch (b->dtype) {
        case AMP_DT_FLOAT: ((float *)b->data)[i] = (float)v[i]; break;
        case AMP_DT_DOUBLE: ((double *)b->data)[i] = v[i]; break;
        case AMP_DT_FLOAT16: ((uint16_t *)b->data)[i] = amp_f32_to_f16((float)v[i]); break;
        case AMP_DT_BFLOAT16: ((uint16_t *)b->data)[i] = amp_f32_to_bf16((float)v[i]); break;
        case AMP_DT_INT8: ((int8_t *)b->data)[i] = (int8_t)clamp(v[i], -128, 127); break;
        default: ((uint8_t *)b->data)[i] = (uint8_t)clamp(v[i], 0, 255); break;
        }
    }
}

static AmpCode oom(AmpKernelCtx *k) {
    return amp_kernel_fail(k, AMP_ERR_INTERNAL, "out of memory");
}

/* ---- windowed pools -------------------------------------------------------------- */

typedef enum PoolKind { POOL_MAX, POOL_AVG } PoolKind;

typedef struct PoolOpts {
    PoolKind kind;
    bool count_include_pad; /* AveragePool: divide by the window size within the pads */
    bool col_major;         /* MaxPool storage_order 1: indices run along the first axis */
} PoolOpts;

/* The kernel offsets j in [lo, hi) whose input position start + j * dil lies in
 * [0, limit); an empty range when none does. */
static void window_range(int64_t start, int64_t dil, int64_t kern, int64_t limit, int64_t *lo, int64_t *hi) {
    if (dil == 1) { /* the common case, without divisions */
        *lo = start >= 0 ? 0 : -start;
        *hi = limit - start;
    } else {
        *lo = start >= 0 ? 0 : (-start + dil - 1) / dil;
        *hi = start >= limit ? 0 : (limit - 1 - start) / dil + 1;
    }
    if (*hi > kern) *hi = kern;
    if (*hi < *lo) *hi = *lo;
}

/* Pools every (n, c) plane of x (planes, in...) into y (planes, out...); idx (same shape
 * as y, may be NULL) gets MaxPool's flat input index of each maximum. Each window is
 * clipped to the box of valid input positions first, so the inner loop runs along the
 * last axis without bounds checks. */
static void pool_planes(const AmpConvGeom *g, const PoolOpts *o, uint64_t planes, const double *x, double *y,
                        int64_t *idx) {
    int n = g->nsp;
    int64_t NI = 1, O = 1, rstride[AMP_MAX_SPATIAL], cstride[AMP_MAX_SPATIAL];
    for (int d = n - 1; d >= 0; d--) rstride[d] = NI, NI *= g->in[d];
    for (int d = 0; d < n; d++) cstride[d] = d ? cstride[d - 1] * g->in[d - 1] : 1; /* column-major */
    for (int d = 0; d < n; d++) O *= g->out[d];
    int64_t dl = g->dil[n - 1];
    for (uint64_t p = 0; p < planes; p++) {
        const double *xp = x + p * (uint64_t)NI;
        int64_t op[AMP_MAX_SPATIAL] = {0};
        for (int64_t q = 0; q < O; q++) {
            /* start: input position of kernel offset 0; [lo, hi): valid offsets per axis. */
            int64_t start[AMP_MAX_SPATIAL], lo[AMP_MAX_SPATIAL], hi[AMP_MAX_SPATIAL], j[AMP_MAX_SPATIAL];
            int64_t valid = 1, in_pads = 1;
            for (int d = 0; d < n; d++) {
                start[d] = op[d] * g->stride[d] - g->pad0[d];
                window_range(start[d], g->dil[d], g->kern[d], g->in[d], &lo[d], &hi[d]);
                valid *= hi[d] - lo[d];
                j[d] = lo[d];
                if (!o->count_include_pad) continue;
                int64_t plo, phi; /* offsets inside the padded input */
                window_range(start[d] + g->pad0[d], g->dil[d], g->kern[d], g->in[d] + g->pad0[d] + g->pad1[d], &plo,
                             &phi);
                in_pads *= phi - plo;
            }
            double best = -INFINITY, sum = 0.0;
            int64_t arg = -1, rows = valid ? 1 : 0;
            bool has_nan = false;
            for (int d = 0; d < n - 1; d++) rows *= hi[d] - lo[d];
            for (; rows > 0; rows--) {
                int64_t off = 0, coff = 0;
                for (int d = 0; d < n - 1; d++) {
                    int64_t ip = start[d] + j[d] * g->dil[d];
                    off += ip * rstride[d];
                    coff += ip * cstride[d];
                }
                const double *xr = xp + off + start[n - 1];
                if (o->kind == POOL_AVG) {
                    for (int64_t jl = lo[n - 1]; jl < hi[n - 1]; jl++) sum += xr[jl * dl];
                } else if (!idx) {
                    /* Branch-free max; a NaN anywhere makes the result NaN. */
                    for (int64_t jl = lo[n - 1]; jl < hi[n - 1]; jl++) {
                        double v = xr[jl * dl];
                        best = v > best ? v : best;
                        has_nan |= v != v;
                    }
                } else {
                    for (int64_t jl = lo[n - 1]; jl < hi[n - 1]; jl++) {
                        double v = xr[jl * dl];
                        /* First maximum wins; a NaN wins over numbers and sticks. */
                        if (arg < 0 || v > best || (isnan(v) && !isnan(best))) {
                            best = v;
                            int64_t il = start[n - 1] + jl * dl;
                            arg = o->col_major ? coff + il * cstride[n - 1] : off + il;
                        }
                    }
                }
                for (int d = n - 2; d >= 0; d--) {
                    if (++j[d] < hi[d]) break;
                    j[d] = lo[d];
                }
            }
            uint64_t yi = p * (uint64_t)O + (uint64_t)q;
            if (o->kind == POOL_MAX) {
                y[yi] = has_nan ? NAN : best;
                if (idx) idx[yi] = arg < 0 ? -1 : (int64_t)(p * (uint64_t)NI) + arg;
            } else {
                int64_t div = o->count_include_pad ? in_pads : valid;
                y[yi] = div ? sum / (double)div : 0.0;
            }
            for (int d = n - 1; d >= 0; d--) {
                if (++op[d] < g->out[d]) break;
                op[d] = 0;
            }
        }
    }
}

/* MaxPool without Indices over 2-D planes of float32 or 16-bit floats, undilated: the
 * same values as pool_planes (the maximum of the window's valid positions, NaN where one
 * is NaN, -inf for a window of padding only), without widening the whole input to double
 * first. Per output row the kernel rows are folded into one row by a NaN-keeping maximum
 * (vector code), then each window of that row is read. The planes are sliced over the
 * CPU's threads (ir/parallel.h). False where it does not apply. */
typedef struct PlanesJob {
    const AmpBuf *x;
    AmpBuf *y, *yi;
    const AmpConvGeom *g;
    atomic_bool failed; /* a slice lacked memory: the caller falls back to pool_planes */
} PlanesJob;

/* The planes [from, to) of maxpool_2d, with their own rows. */
static void maxpool_2d_slice(void *ctx, int64_t from, int64_t to) {
    PlanesJob *jb = ctx;
    const AmpBuf *x = jb->x;
    AmpBuf *y = jb->y;
    const AmpConvGeom *g = jb->g;
    int64_t H = g->in[0], W = g->in[1], OH = g->out[0], OW = g->out[1];
    float *rows = malloc((size_t)(W * (g->kern[0] + 1)) * sizeof *rows), *fold = rows + W * g->kern[0];
    if (!rows) {
        atomic_store(&jb->failed, true);
        return;
    }
    for (uint64_t p = (uint64_t)from; p < (uint64_t)to; p++) {
        for (int64_t oh = 0; oh < OH; oh++) {
            int64_t start = oh * g->stride[0] - g->pad0[0], lo, hi;
            window_range(start, 1, g->kern[0], H, &lo, &hi);
            for (int64_t w = 0; w < W; w++) fold[w] = -INFINITY;
            for (int64_t j = lo; j < hi; j++) {
                uint64_t at = (p * (uint64_t)H + (uint64_t)(start + j)) * (uint64_t)W;
                const float *r = rows + j * W;
                if (x->dtype == AMP_DT_FLOAT) r = (const float *)x->data + at;
                else if (x->dtype == AMP_DT_BFLOAT16)
                    amp_bf16_to_f32_n(rows + j * W, (const uint16_t *)x->data + at, (size_t)W);
                else
                    amp_f16_to_f32_n(rows + j * W, (const uint16_t *)x->data + at, (size_t)W);
                for (int64_t w = 0; w < W; w++) fold[w] = r[w] > fold[w] || r[w] != r[w] ? r[w] : fold[w];
            }
            for (int64_t ow = 0; ow < OW; ow++) {
                int64_t s = ow * g->stride[1] - g->pad0[1], wl, wh;
                window_range(s, 1, g->kern[1], W, &wl, &wh);
                float best = -INFINITY;
                for (int64_t j = wl; j < wh; j++) {
                    float v = fold[s + j];
                    best = v > best || v != v ? v : best;
                }
                if (best != best) best = NAN; /* pool_planes' NaN, whatever the input's was */
                uint64_t yi = (p * (uint64_t)OH + (uint64_t)oh) * (uint64_t)OW + (uint64_t)ow;
                if (y->dtype == AMP_DT_FLOAT) ((float *)y->data)[yi] = best;
                else if (y->dtype == AMP_DT_BFLOAT16) ((uint16_t *)y->data)[yi] = amp_f32_to_bf16(best);
                else ((uint16_t *)y->data)[yi] = amp_f32_to_f16(best);
            }
        }
    }
    free(rows);
}

/* Planes per slice: at least ~32K input elements each. */
static int64_t plane_grain(const AmpConvGeom *g) {
    int64_t per = g->in[0] * g->in[1];
    return per >= (1 << 15) ? 1 : (1 << 15) / (per ? per : 1);
}

static bool maxpool_2d(const AmpBuf *x, AmpBuf *y, const AmpConvGeom *g) {
    if (g->nsp != 2 || g->dil[0] != 1 || g->dil[1] != 1 || !amp_is_f32_family(x->dtype)) return false;
    PlanesJob jb = {.x = x, .y = y, .g = g};
    atomic_init(&jb.failed, false);
    amp_parallel_for(x->dims[0] * x->dims[1], plane_grain(g), 1, maxpool_2d_slice, &jb);
    return !atomic_load(&jb.failed);
}

/* MaxPool with Indices (row-major) over 2-D planes of float32 or 16-bit floats, undilated:
 * pool_planes' values and indices (the first maximum of the window's valid positions, a
 * NaN winning over numbers and sticking, its bits as the double round trip leaves them:
 * quieted; -inf and -1 for a window of padding only) read in float, one window at a time,
 * without widening the whole input to double. `ampc grad`'s MaxPool backward makes one
 * (maxpool_arg). False where it does not apply. */
static void maxpool_2d_indices_slice(void *ctx, int64_t from, int64_t to) {
    PlanesJob *jb = ctx;
    const AmpBuf *x = jb->x;
    AmpBuf *y = jb->y;
    const AmpConvGeom *g = jb->g;
    int64_t H = g->in[0], W = g->in[1], OH = g->out[0], OW = g->out[1];
    float *plane = x->dtype == AMP_DT_FLOAT ? NULL : malloc((size_t)(H * W) * sizeof *plane);
    if (x->dtype != AMP_DT_FLOAT && !plane) {
        atomic_store(&jb->failed, true);
        return;
    }
    int64_t *idx = jb->yi->data;
    for (uint64_t p = (uint64_t)from; p < (uint64_t)to; p++) {
        const float *xp = (const float *)x->data + p * (uint64_t)(H * W);
        if (x->dtype == AMP_DT_BFLOAT16)
            amp_bf16_to_f32_n(plane, (const uint16_t *)x->data + p * (uint64_t)(H * W), (size_t)(H * W)), xp = plane;
        else if (x->dtype == AMP_DT_FLOAT16)
            amp_f16_to_f32_n(plane, (const uint16_t *)x->data + p * (uint64_t)(H * W), (size_t)(H * W)), xp = plane;
        for (int64_t oh = 0; oh < OH; oh++) {
            int64_t sh = oh * g->stride[0] - g->pad0[0], hl, hh;
            window_range(sh, 1, g->kern[0], H, &hl, &hh);
            for (int64_t ow = 0; ow < OW; ow++) {
                int64_t sw = ow * g->stride[1] - g->pad0[1], wl, wh;
                window_range(sw, 1, g->kern[1], W, &wl, &wh);
                float best = -INFINITY;
                int64_t arg = -1;
                for (int64_t j = hl; j < hh; j++)
                    for (int64_t i = wl; i < wh; i++) {
                        int64_t at = (sh + j) * W + sw + i;
                        float v = xp[at];
                        if (arg < 0 || v > best || (v != v && best == best)) best = v, arg = at;
                    }
                if (best != best) { /* as (float)(double)best: the quiet bit set */
                    uint32_t b;
                    memcpy(&b, &best, sizeof b);
                    b |= UINT32_C(0x00400000);
                    memcpy(&best, &b, sizeof b);
                }
                uint64_t o = (p * (uint64_t)OH + (uint64_t)oh) * (uint64_t)OW + (uint64_t)ow;
                idx[o] = arg < 0 ? -1 : (int64_t)(p * (uint64_t)(H * W)) + arg;
                if (!y) continue;
                if (y->dtype == AMP_DT_FLOAT) ((float *)y->data)[o] = best;
                else if (y->dtype == AMP_DT_BFLOAT16) ((uint16_t *)y->data)[o] = amp_f32_to_bf16(best);
                else ((uint16_t *)y->data)[o] = amp_f32_to_f16(best);
            }
        }
    }
    free(plane);
}

static bool maxpool_2d_indices(const AmpBuf *x, AmpBuf *y, AmpBuf *yi, const AmpConvGeom *g) {
    if (g->nsp != 2 || g->dil[0] != 1 || g->dil[1] != 1 || !amp_is_f32_family(x->dtype)) return false;
    PlanesJob jb = {.x = x, .y = y, .yi = yi, .g = g};
    atomic_init(&jb.failed, false);
    amp_parallel_for(x->dims[0] * x->dims[1], plane_grain(g), 1, maxpool_2d_indices_slice, &jb);
    return !atomic_load(&jb.failed);
}

static AmpCode pool(AmpKernelCtx *k, PoolKind kind) {
    AmpWindowGeom own;
    const AmpWindowGeom *wg; /* amp_pool_geom (ops/conv_geom.h): the window, Y and Indices checked */
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&wg);
    if (rc) return rc;
    const AmpBuf *x = k->in[0];
    if (!pool_dtype(x->dtype, kind == POOL_MAX)) return amp_kernel_bad_dtype(k, x->dtype);
    const AmpConvAttrs *a = k->attrs;
    int nsp = x->rank - 2;
    PoolOpts o = {kind, a->count_include_pad, a->col_major};
    const AmpConvGeom g = wg->g;
    /* Y, and MaxPool's Indices where the node lists them (AveragePool has no output 1). */
    AmpBuf *out[2];
    if ((rc = amp_kernel_outputs(k, kind == POOL_MAX ? 2 : 1, out))) return rc;
    AmpBuf *y = out[0], *yi = kind == POOL_MAX ? out[1] : NULL;
    const AmpBuf *shaped = y ? y : yi; /* both (N, C, g.out...) */
    int64_t ni;
    if (!shaped || !shaped->nelem) return AMP_OK;
    if (!amp_conv_size(nsp, g.in, &ni))
        return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "input too large for the CPU kernel");
    if (kind == POOL_MAX && y && !yi && maxpool_2d(x, y, &g)) return AMP_OK;
    if (kind == POOL_MAX && yi && !o.col_major && maxpool_2d_indices(x, y, yi, &g)) return AMP_OK;
    double *xd = load(x), *yd = malloc(shaped->nelem * sizeof *yd);
    if (!xd || !yd) {
        free(xd), free(yd);
        return oom(k);
    }
    pool_planes(&g, &o, (uint64_t)x->dims[0] * (uint64_t)x->dims[1], xd, yd, yi ? yi->data : NULL);
    if (y) store(y, yd);
    free(xd), free(yd);
    return AMP_OK;
}

AmpCode amp_cpu_maxpool(AmpKernelCtx *k) {
    return pool(k, POOL_MAX);
}

AmpCode amp_cpu_averagepool(AmpKernelCtx *k) {
    return pool(k, POOL_AVG);
}

/* ---- global pools: one value per (n, c) plane ------------------------------------ */

static bool global_pool_dtype(int dt) {
    return pool_dtype(dt, false);
}

static AmpCode global_pool(AmpKernelCtx *k, PoolKind kind) {
    const AmpBuf *x;
    AmpBuf *y;
    AmpCode rc = amp_global_pool_out(k, global_pool_dtype, &x, &y); /* the checks: ops/conv_geom.h */
    if (rc || !y) return rc;
    uint64_t planes = y->nelem, I = amp_shape_nelem(x->rank - 2, x->dims + 2);
    double *xd = load(x), *yd = malloc((planes ? planes : 1) * sizeof *yd);
    if (!xd || !yd) {
        free(xd), free(yd);
        return oom(k);
    }
    for (uint64_t p = 0; p < planes; p++) {
        const double *xp = xd + p * I;
        double acc = kind == POOL_MAX ? -INFINITY : 0.0;
        for (uint64_t i = 0; i < I; i++) {
            if (kind == POOL_AVG) acc += xp[i];
            else if (xp[i] > acc || isnan(xp[i])) acc = isnan(acc) ? acc : xp[i];
        }
        yd[p] = kind == POOL_MAX ? acc : I ? acc / (double)I : NAN;
    }
    store(y, yd);
    free(xd), free(yd);
    return AMP_OK;
}

AmpCode amp_cpu_global_averagepool(AmpKernelCtx *k) {
    return global_pool(k, POOL_AVG);
}

AmpCode amp_cpu_global_maxpool(AmpKernelCtx *k) {
    return global_pool(k, POOL_MAX);
}
