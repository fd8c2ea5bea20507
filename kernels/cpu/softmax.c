/* CPU kernels: Softmax, LogSoftmax and Hardmax (opset < 13: the input flattened to 2-D at
 * `axis`; opset >= 13: along the one axis), and com.microsoft SoftmaxGrad_13. Each row's
 * max is subtracted before exp, and sums are kept in double. */
#include <math.h>
#include <stdatomic.h>

#include "ir/half.h"
#include "ir/parallel.h"
#include "kernels/cpu/simd.h"
#include "ops/vmath.h"

#include "ops/geom.h"
#include "ops/norm_attrs.h"
#include "kernels/cpu/reduce_impl.h"

/* The (outer, D, inner) layout the op normalises over is every backend's
 * (amp_softmax_layout, ops/norm_attrs.h). */

typedef enum SoftmaxKind { SOFTMAX, LOG_SOFTMAX, HARDMAX } SoftmaxKind;

/* Hardmax of one row: 1 at the first largest element (the first NaN, as numpy's argmax
 * and ONNX's reference), 0 elsewhere. */
static void hardmax_row(const AmpFv *v, AmpFo *o, uint64_t base, uint64_t d, uint64_t inner) {
    uint64_t best = 0;
    double m = amp_fv_get(v, base);
    for (uint64_t j = 1; j < d && !isnan(m); j++) {
        double a = amp_fv_get(v, base + j * inner);
        if (a > m || isnan(a)) m = a, best = j;
    }
    for (uint64_t j = 0; j < d; j++) amp_fo_set(o, base + j * inner, j == best ? 1.0 : 0.0);
}

/* sum + e, with e's NaN when both are NaN: the sum loop of softmax_run as GCC compiles
 * it for x86-64 (ADDSD into the exp result), so a row holding NaNs of either sign gives
 * the NaN it always gave. */
static inline double add_to_sum(double sum, double e) {
#if defined(__GNUC__) && defined(__x86_64__)
    __asm__("addsd %1, %0" : "+x"(e) : "x"(sum));
    return e;
#else
    return e + sum;
#endif
}

/* Softmax and LogSoftmax of contiguous rows (inner == 1) of a float-family x: the loop
 * below, row by row (a 16-bit row widened into a float row, the results rounded to
 * float32 and then narrowed, as the whole-tensor views do) with each exp(z) computed
 * once and kept in double; the same operations in the same order, so the same bits,
 * without whole-tensor copies. The rows are independent: slices of them run on the CPU's
 * threads (ir/parallel.h), each with its own scratch rows. */
typedef struct RowsJob {
    const AmpBuf *x;
    AmpBuf *y;
    uint64_t D;
    SoftmaxKind kind;
    atomic_bool oom;
} RowsJob;

static void softmax_slice(void *ctx, int64_t from, int64_t to) {
    RowsJob *j = ctx;
    const AmpBuf *x = j->x;
    AmpBuf *y = j->y;
    uint64_t D = j->D;
    bool f32 = x->dtype == AMP_DT_FLOAT;
    double *e = malloc(D * sizeof *e);
    float *rx = f32 ? NULL : malloc(D * sizeof *rx), *ry = f32 ? NULL : malloc(D * sizeof *ry);
    if (!e || (!f32 && (!rx || !ry))) {
        free(e), free(rx), free(ry);
        atomic_store(&j->oom, true);
        return;
    }
    for (uint64_t p = (uint64_t)from; p < (uint64_t)to; p++) {
        const float *a = f32 ? (const float *)x->data + p * D : rx;
        float *o = f32 ? (float *)y->data + p * D : ry;
        if (x->dtype == AMP_DT_FLOAT16) amp_f16_to_f32_n(rx, (const uint16_t *)x->data + p * D, D);
        else if (x->dtype == AMP_DT_BFLOAT16) amp_bf16_to_f32_n(rx, (const uint16_t *)x->data + p * D, D);
        double m = -INFINITY, sum = 0.0;
        for (uint64_t q = 0; q < D; q++)
            if ((double)a[q] > m) m = a[q];
        if (j->kind == LOG_SOFTMAX) {
            for (uint64_t q = 0; q < D; q++) sum = add_to_sum(sum, exp((double)a[q] - m));
            double lsum = log(sum);
            for (uint64_t q = 0; q < D; q++) o[q] = (float)(((double)a[q] - m) - lsum);
        } else {
            /* exp by libmvec's vector exp where there is one (within 4 ulp of double: the
             * float32 results those of exp's but in the rarest ties), else exp */
            for (uint64_t q = 0; q < D; q++) e[q] = (double)a[q] - m;
            if (!amp_vmath_exp_f64(e, e, D))
                for (uint64_t q = 0; q < D; q++) e[q] = exp(e[q]);
            for (uint64_t q = 0; q < D; q++) sum = add_to_sum(sum, e[q]);
            if (!amp_simd_div_f64_to_f32(o, e, sum, D))
                for (uint64_t q = 0; q < D; q++) o[q] = (float)(e[q] / sum);
        }
        if (y->dtype == AMP_DT_FLOAT16) amp_f32_to_f16_n((uint16_t *)y->data + p * D, ry, D);
        else if (y->dtype == AMP_DT_BFLOAT16) amp_f32_to_bf16_n((uint16_t *)y->data + p * D, ry, D);
    }
    free(e), free(rx), free(ry);
}

static AmpCode softmax_rows(AmpKernelCtx *k, const AmpBuf *x, AmpBuf *y, uint64_t outer, uint64_t D,
                            SoftmaxKind kind) {
    RowsJob j = {.x = x, .y = y, .D = D, .kind = kind};
    atomic_init(&j.oom, false);
    /* a slice of at least ~16K elements: the team's start costs microseconds */
    int64_t grain = D >= (1 << 14) ? 1 : (int64_t)((1 << 14) / D);
    amp_parallel_for((int64_t)outer, grain, 1, softmax_slice, &j);
    return atomic_load(&j.oom) ? amp_red_oom(k) : AMP_OK;
}

static AmpCode softmax_run(AmpKernelCtx *k, SoftmaxKind kind) {
    AmpSoftmaxGeom own;
    const AmpSoftmaxGeom *g; /* amp_softmax_geom (ops/norm_attrs.h) */
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&g);
    if (rc) return rc;
    const AmpBuf *x = k->in[0];
    if (!amp_red_is_float(x->dtype)) return amp_kernel_bad_dtype(k, x->dtype);
    uint64_t outer = g->outer, D = g->d, inner = g->inner;
    AmpBuf *y;
    if ((rc = amp_kernel_outputs(k, 1, &y)) || !y) return rc;
    /* No element, however many empty rows ([2^40, 0]): nothing to do, in O(1). */
    if (!x->nelem) return AMP_OK;
    if (kind != HARDMAX && inner == 1 && amp_is_f32_family(x->dtype)) return softmax_rows(k, x, y, outer, D, kind);
    AmpFv v;
    AmpFo o;
    if ((rc = amp_fv_open(k, x, &v))) return rc;
    if ((rc = amp_fo_open(k, y, &o))) {
        amp_fv_close(&v);
        return rc;
    }
    for (uint64_t p = 0; p < outer; p++)
        for (uint64_t i = 0; i < inner; i++) {
            uint64_t base = p * D * inner + i;
            if (kind == HARDMAX) {
                hardmax_row(&v, &o, base, D, inner);
                continue;
            }
            double m = -INFINITY, sum = 0.0;
            for (uint64_t j = 0; j < D; j++) {
                double a = amp_fv_get(&v, base + j * inner);
                if (a > m) m = a;
            }
            for (uint64_t j = 0; j < D; j++) sum += exp(amp_fv_get(&v, base + j * inner) - m);
            double lsum = log(sum);
            for (uint64_t j = 0; j < D; j++) {
                uint64_t at = base + j * inner;
                double z = amp_fv_get(&v, at) - m;
                amp_fo_set(&o, at, kind == LOG_SOFTMAX ? z - lsum : exp(z) / sum);
            }
        }
    amp_fo_commit(&o);
    amp_fv_close(&v);
    return AMP_OK;
}

AmpCode amp_cpu_softmax(AmpKernelCtx *k) {
    return softmax_run(k, SOFTMAX);
}

AmpCode amp_cpu_log_softmax(AmpKernelCtx *k) {
    return softmax_run(k, LOG_SOFTMAX);
}

AmpCode amp_cpu_hardmax(AmpKernelCtx *k) {
    return softmax_run(k, HARDMAX);
}

/* com.microsoft SoftmaxGrad_13 (dY, Y) -> dX = Y * (dY - sum(dY * Y)) along `axis`
 * (default -1, opset 13 per-axis semantics). */
AmpCode amp_cpu_ms_softmax_grad(AmpKernelCtx *k) {
    AmpSoftmaxGeom own;
    const AmpSoftmaxGeom *g; /* amp_softmax_geom: dY and Y of one shape, its rows */
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&g);
    if (rc) return rc;
    const AmpBuf *dy = k->in[0], *y = k->in[1];
    if (!amp_red_is_float(dy->dtype)) return amp_kernel_bad_dtype(k, dy->dtype);
    if (!amp_red_is_float(y->dtype)) return amp_kernel_bad_dtype(k, y->dtype);
    uint64_t outer = g->outer, D = g->d, inner = g->inner;
    AmpBuf *dx;
    if ((rc = amp_kernel_outputs(k, 1, &dx)) || !dx) return rc;
    if (!dy->nelem) return AMP_OK; /* no element, however many empty rows */
    AmpFv vd, vy;
    AmpFo o;
    if ((rc = amp_fv_open(k, dy, &vd))) return rc;
    if ((rc = amp_fv_open(k, y, &vy))) {
        amp_fv_close(&vd);
        return rc;
    }
    if ((rc = amp_fo_open(k, dx, &o))) {
        amp_fv_close(&vd), amp_fv_close(&vy);
        return rc;
    }
    for (uint64_t p = 0; p < outer; p++)
        for (uint64_t i = 0; i < inner; i++) {
            uint64_t base = p * D * inner + i;
            double dot = 0.0;
            for (uint64_t j = 0; j < D; j++) dot += amp_fv_get(&vd, base + j * inner) * amp_fv_get(&vy, base + j * inner);
            for (uint64_t j = 0; j < D; j++) {
                uint64_t at = base + j * inner;
                amp_fo_set(&o, at, amp_fv_get(&vy, at) * (amp_fv_get(&vd, at) - dot));
            }
        }
    amp_fo_commit(&o);
    amp_fv_close(&vd), amp_fv_close(&vy);
    return AMP_OK;
}
