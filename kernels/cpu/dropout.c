/* CPU kernel: Dropout. Inference copies X and reports a mask of ones; training (the
 * executor's training step, or opset 12+'s training_mode input) keeps each element with
 * probability 1 - ratio, scales the kept ones by 1 / (1 - ratio) and zeroes the rest. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/dropout_rng.h"
#include "ops/geom.h"
#include "kernels/cpu/elementwise_impl.h"

/* Which random stream draws the mask:
 * - in the executor's training step (or with a training_mode input and no seed), the
 *   counter-based generator of dropout_rng.h: one key per call drawn from k->rng (so masks
 *   differ from step to step and follow the session's seed and checkpoints), element i
 *   decided by a hash of (key, i), which the CUDA kernel computes alike in parallel;
 * - when the model itself asks for training (training_mode = true) and gives a `seed`
 *   attribute, MT19937 seeded as numpy's RandomState(seed) with the same uniform draws,
 *   so the mask is the ONNX reference implementation's, and the same on every run.
 * Opsets 1-6's is_test attribute is not read: outside a training step (and without
 * training_mode) Dropout is the identity, which is what inference wants. */

typedef struct Mt19937 {
    uint32_t mt[624];
    int pos;
} Mt19937;

static void mt_seed(Mt19937 *s, uint32_t seed) {
    s->mt[0] = seed;
    for (uint32_t i = 1; i < 624; i++) s->mt[i] = 1812433253u * (s->mt[i - 1] ^ (s->mt[i - 1] >> 30)) + i;
    s->pos = 624;
}

static uint32_t mt_next(Mt19937 *s) {
    if (s->pos >= 624) {
        for (int i = 0; i < 624; i++) {
            uint32_t y = (s->mt[i] & 0x80000000u) | (s->mt[(i + 1) % 624] & 0x7fffffffu);
            s->mt[i] = s->mt[(i + 397) % 624] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
        }
        s->pos = 0;
    }
    uint32_t y = s->mt[s->pos++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    return y ^ (y >> 18);
}

/* numpy's random_sample: 53 random bits from two draws, in [0, 1). */
static double mt_double(Mt19937 *s) {
    uint32_t a = mt_next(s) >> 5, b = mt_next(s) >> 6;
    return (a * 67108864.0 + b) / 9007199254740992.0;
}

/* com.microsoft DropoutGrad (dY, mask, ratio?, training_mode?) -> dX: in training,
 * dY * mask / (1 - ratio) (ratio 0.5 when absent), else dY unchanged; onnxruntime's
 * semantics. */
AmpCode amp_ms_dropout_grad(AmpKernelCtx *k) {
    AmpDropoutGradGeom own;
    const AmpDropoutGradGeom *g; /* amp_dropout_grad_geom (ops/dropout_rng.h): the mask's shape, dX checked */
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&g);
    if (rc) return rc;
    const AmpBuf *dy = k->in[0], *mask = k->in[1], *r = amp_ew_in(k, 2), *t = amp_ew_in(k, 3);
    if (!amp_ew_is_float(dy->dtype)) return amp_kernel_bad_dtype(k, dy->dtype);
    double ratio = 0.5;
    if (r) {
        if (!amp_ew_is_float(r->dtype) || r->nelem != 1)
            return amp_kernel_fail(k, AMP_ERR_INPUT, "ratio must be one float value");
        ratio = amp_ew_get_f64(r, 0);
    }
    if (t && (t->dtype != AMP_DT_BOOL || t->nelem != 1))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "training_mode must be one bool value");
    bool train = !t || amp_buf_get_i64(t, 0) != 0;
    if (train && !(ratio >= 0 && ratio < 1)) return amp_kernel_fail(k, AMP_ERR_INPUT, "ratio %g is outside [0, 1)", ratio);
    AmpBuf *dx;
    if ((rc = amp_kernel_outputs(k, 1, &dx)) || !dx || !g->n) return rc;
    if (!train) {
        memcpy(dx->data, dy->data, amp_buf_bytes(dy));
        return AMP_OK;
    }
    double scale = 1.0 / (1.0 - ratio);
    const uint8_t *m = mask->data;
    for (uint64_t i = 0; i < g->n; i++) amp_ew_set_f64(dx, i, m[i] ? amp_ew_get_f64(dy, i) * scale : 0.0);
    return AMP_OK;
}

AmpCode amp_ew_dropout(AmpKernelCtx *k) {
    AmpDropoutGeom own;
    const AmpDropoutGeom *g; /* amp_dropout_geom (ops/dropout_rng.h): x present, y and the mask checked */
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&g);
    if (rc) return rc;
    const AmpDropoutAttrs *a = k->attrs;
    const AmpBuf *x = k->in[0];
    if (!amp_ew_is_float(x->dtype)) return amp_kernel_bad_dtype(k, x->dtype);

    double ratio = a->ratio;
    const AmpBuf *r = k->opset >= 12 ? amp_ew_in(k, 1) : NULL, *t = k->opset >= 12 ? amp_ew_in(k, 2) : NULL;
    if (r) {
        if (!amp_ew_is_float(r->dtype) || r->nelem != 1)
            return amp_kernel_fail(k, AMP_ERR_INPUT, "ratio must be one float value (%s with %llu elements)",
                              amp_dtype_name(r->dtype), (unsigned long long)r->nelem);
        ratio = amp_ew_get_f64(r, 0);
    }
    if (t && (t->dtype != AMP_DT_BOOL || t->nelem != 1))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "training_mode must be one bool value");
    bool model_training = t && amp_buf_get_i64(t, 0) != 0;
    bool train = (k->training || model_training) && ratio != 0;
    if (train && !(ratio > 0 && ratio < 1))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "ratio %g is outside [0, 1)", ratio);

    /* y: x's dtype and shape; the mask: x's shape, g->mask_dtype. Either may be left out
     * of the node. The key is drawn by amp_dropout_draws' rule, which reads only
     * host-known facts (not ratio's or training_mode's values), so the session's stream
     * advances alike on every backend. */
    AmpBuf *out[2];
    if ((rc = amp_kernel_outputs(k, 2, out))) return rc;
    AmpBuf *y = out[0], *mask = out[1];

    bool use_mt = !k->training && a->has_seed;
    uint64_t local = AMP_DROPOUT_GOLDEN, *xs = k->rng ? k->rng : &local, key = 0;
    if (amp_dropout_draws(k->training, t != NULL, a->has_seed, x->nelem)) key = amp_dropout_key(xs);
    if (!train || !x->nelem) {
        if (y && x->nelem) memcpy(y->data, x->data, amp_buf_bytes(x));
        for (uint64_t i = 0; mask && i < mask->nelem; i++) amp_ew_set_f64(mask, i, 1.0);
        return AMP_OK;
    }

    Mt19937 *mt = NULL;
    if (use_mt) {
        if (!(mt = malloc(sizeof *mt))) return amp_kernel_fail(k, AMP_ERR_INTERNAL, "out of memory");
        mt_seed(mt, (uint32_t)a->seed);
    }
    double scale = 1.0 / (1.0 - ratio);
    float *tx = NULL, *ty = NULL;
    const float *xf = NULL;
    float *yf = NULL;
    if (y && x->dtype != AMP_DT_DOUBLE) {
        xf = amp_buf_f32_in(x, &tx);
        yf = amp_buf_f32_out(y, &ty);
        if (!xf || !yf) {
            free(tx), free(ty), free(mt);
            return amp_kernel_fail(k, AMP_ERR_INTERNAL, "out of memory");
        }
    }
    const double *xd = x->data;
    double *yd = y ? y->data : NULL;
    uint64_t thr = amp_dropout_threshold(ratio);
    for (uint64_t i = 0; i < x->nelem; i++) {
        bool keep = use_mt ? mt_double(mt) >= ratio : amp_dropout_keep(key, i, thr);
        if (yf) yf[i] = keep ? xf[i] * (float)scale : 0.0f;
        else if (yd) yd[i] = keep ? xd[i] * scale : 0.0;
        if (mask) amp_ew_set_f64(mask, i, keep);
    }
    free(tx), free(mt);
    if (yf) amp_buf_f32_commit(y, ty);
    return AMP_OK;
}
