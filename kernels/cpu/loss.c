/* CPU kernels: SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss and com.microsoft
 * SoftmaxCrossEntropyLossGrad. Scores are (N, C, d1..dk), labels (N, d1..dk) integers
 * in [0, C) or ignore_index; log-softmax subtracts the max, sums are in double. */
#include <math.h>

#include "kernels/cpu/reduce_impl.h"
#include "ops/geom.h"
#include "ops/norm_attrs.h" /* AmpLossAttrs (amp_loss_prepare), AmpLossGeom (amp_loss_geom) */

/* What every loss kernel reads first: the geometry's sizes (amp_loss_geom), the dtypes
 * checked, and its attributes. */
typedef struct LossArgs {
    const AmpBuf *x;      /* (N, C, d1..dk): scores or log-probabilities */
    const AmpBuf *labels; /* (N, d1..dk) */
    const AmpBuf *w;      /* (C) or NULL */
    uint64_t n, c, dk;    /* dk: the product of d1..dk (1 when k = 0) */
    AmpLossReduction red;
    bool has_ii;
    int64_t ii; /* ignore_index */
} LossArgs;

static AmpCode loss_args(AmpKernelCtx *k, const AmpBuf *x, const AmpBuf *labels, const AmpBuf *w, LossArgs *a) {
    memset(a, 0, sizeof *a);
    AmpLossGeom own;
    const AmpLossGeom *g; /* amp_loss_geom (ops/norm_attrs.h) */
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&g);
    if (rc) return rc;
    const AmpLossAttrs *attr = k->attrs;
    a->x = x, a->labels = labels, a->w = w;
    if (!amp_red_is_float(x->dtype)) return amp_kernel_bad_dtype(k, x->dtype);
    if (!amp_dtype_is_int(labels->dtype))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "labels must be integers, not %s", amp_dtype_name(labels->dtype));
    a->n = g->n, a->c = g->c, a->dk = g->dk;
    if (w && !amp_red_is_float(w->dtype)) return amp_kernel_bad_dtype(k, w->dtype);
    a->red = attr->red;
    a->has_ii = attr->has_ii;
    a->ii = attr->ii;
    return AMP_OK;
}

/* Label of sample (n, d) checked against [0, C); -1 when ignored. */
static AmpCode loss_label(AmpKernelCtx *k, const LossArgs *a, uint64_t at, int64_t *out) {
    int64_t l = amp_buf_get_i64(a->labels, at);
    if (a->has_ii && l == a->ii) {
        *out = -1;
        return AMP_OK;
    }
    if (l < 0 || (uint64_t)l >= a->c)
        return amp_kernel_fail(k, AMP_ERR_INPUT, "label %lld (element %llu) is outside [0, %llu)", (long long)l,
                            (unsigned long long)at, (unsigned long long)a->c);
    *out = l;
    return AMP_OK;
}

/* SoftmaxCrossEntropyLoss (softmax) or NegativeLogLikelihoodLoss: loss per sample
 * -w[label] * logp[n, label, d], then none / sum / mean (mean divides by the sum of the
 * weights of the samples not ignored, as the ONNX reference does). */
static AmpCode loss_run(AmpKernelCtx *k, bool softmax) {
    const AmpBuf *x = k->n_in > 0 ? k->in[0] : NULL;
    const AmpBuf *labels = k->n_in > 1 ? k->in[1] : NULL;
    const AmpBuf *w = k->n_in > 2 ? k->in[2] : NULL;
    LossArgs a;
    AmpCode rc = loss_args(k, x, labels, w, &a); /* the geometry first: x and labels present */
    if (rc) return rc;
    /* loss: per sample (labels' shape) for reduction none, else a scalar; log_prob
     * (SoftmaxCrossEntropyLoss only): the scores' shape */
    AmpBuf *outs[2];
    if ((rc = amp_kernel_outputs(k, softmax ? 2 : 1, outs))) return rc;
    AmpBuf *loss = outs[0], *lp = softmax ? outs[1] : NULL;
    AmpFv vx, vw = {0};
    AmpFo ol = {0}, op = {0};
    if ((rc = amp_fv_open(k, x, &vx))) return rc;
    if (w && (rc = amp_fv_open(k, w, &vw))) {
        amp_fv_close(&vx);
        return rc;
    }
    if (loss && (rc = amp_fo_open(k, loss, &ol))) goto out;
    if (lp && (rc = amp_fo_open(k, lp, &op))) {
        amp_fo_discard(&ol);
        goto out;
    }
    double sum = 0.0, wsum = 0.0;
    uint64_t C = a.c, dk = a.dk;
    for (uint64_t n = 0; n < a.n && !rc; n++)
        for (uint64_t d = 0; d < dk; d++) {
            uint64_t s = n * dk + d, base = n * C * dk + d; /* (n, 0, d) */
            int64_t l = 0;
            if ((rc = loss_label(k, &a, s, &l))) break;
            double m = 0.0, lse = 0.0; /* log-softmax: x - m - lse */
            if (softmax) {
                m = -INFINITY;
                for (uint64_t c = 0; c < C; c++) {
                    double e = amp_fv_get(&vx, base + c * dk);
                    if (e > m) m = e;
                }
                for (uint64_t c = 0; c < C; c++) lse += exp(amp_fv_get(&vx, base + c * dk) - m);
                lse = log(lse);
                if (lp)
                    for (uint64_t c = 0; c < C; c++)
                        amp_fo_set(&op, base + c * dk, amp_fv_get(&vx, base + c * dk) - m - lse);
            }
            double li = 0.0;
            if (l >= 0) {
                double wl = w ? amp_fv_get(&vw, (uint64_t)l) : 1.0;
                li = -wl * (amp_fv_get(&vx, base + (uint64_t)l * dk) - m - lse);
                wsum += wl;
                sum += li;
            }
            if (loss && a.red == AMP_LOSS_NONE) amp_fo_set(&ol, s, li);
        }
    if (rc) {
        amp_fo_discard(&ol), amp_fo_discard(&op);
        goto out;
    }
    if (loss && a.red == AMP_LOSS_SUM) amp_fo_set(&ol, 0, sum);
    else if (loss && a.red == AMP_LOSS_MEAN) amp_fo_set(&ol, 0, sum / wsum); /* NaN when every sample is ignored */
    if (loss) amp_fo_commit(&ol);
    if (lp) amp_fo_commit(&op);
out:
    amp_fv_close(&vx), amp_fv_close(&vw);
    return rc;
}

AmpCode amp_cpu_sce_loss(AmpKernelCtx *k) {
    return loss_run(k, true);
}

AmpCode amp_cpu_nll_loss(AmpKernelCtx *k) {
    return loss_run(k, false);
}

/* com.microsoft SoftmaxCrossEntropyLossGrad (dY, log_prob, label, weight?, bias?) ->
 * d_logits = g * (softmax - onehot(label)) (+ bias), g = dY (per sample for reduction
 * none, else the scalar) * w[label], divided by the weight sum for mean; 0 when ignored. */
AmpCode amp_cpu_ms_sce_loss_grad(AmpKernelCtx *k) {
    const AmpBuf *dy = k->n_in > 0 ? k->in[0] : NULL;
    const AmpBuf *lpb = k->n_in > 1 ? k->in[1] : NULL;
    const AmpBuf *labels = k->n_in > 2 ? k->in[2] : NULL;
    const AmpBuf *w = k->n_in > 3 ? k->in[3] : NULL;
    const AmpBuf *bias = k->n_in > 4 ? k->in[4] : NULL;
    LossArgs a;
    AmpCode rc = loss_args(k, lpb, labels, w, &a); /* the geometry first: dY, log_prob and label present */
    if (rc) return rc;
    if (!amp_red_is_float(dy->dtype)) return amp_kernel_bad_dtype(k, dy->dtype);
    if (bias && !amp_red_is_float(bias->dtype)) return amp_kernel_bad_dtype(k, bias->dtype);
    AmpBuf *dx;
    if ((rc = amp_kernel_outputs(k, 1, &dx)) || !dx) return rc;
    AmpFv vd = {0}, vp = {0}, vw = {0}, vb = {0};
    AmpFo o;
    if ((rc = amp_fv_open(k, dy, &vd))) return rc;
    if ((rc = amp_fv_open(k, lpb, &vp))) goto out;
    if (w && (rc = amp_fv_open(k, w, &vw))) goto out;
    if (bias && (rc = amp_fv_open(k, bias, &vb))) goto out;
    uint64_t C = a.c, dk = a.dk, ns = a.n * dk;
    double wsum = 0.0;
    for (uint64_t s = 0; s < ns; s++) { /* validates every label before writing */
        int64_t l = 0;
        if ((rc = loss_label(k, &a, s, &l))) goto out;
        if (l >= 0) wsum += w ? amp_fv_get(&vw, (uint64_t)l) : 1.0;
    }
    if ((rc = amp_fo_open(k, dx, &o))) goto out;
    for (uint64_t s = 0; s < ns; s++) {
        uint64_t n = s / dk, d = s % dk, base = n * C * dk + d;
        int64_t l = amp_buf_get_i64(labels, s);
        bool ignored = a.has_ii && l == a.ii;
        double g = 0.0;
        if (!ignored) {
            g = amp_fv_get(&vd, a.red == AMP_LOSS_NONE ? s : 0) * (w ? amp_fv_get(&vw, (uint64_t)l) : 1.0);
            if (a.red == AMP_LOSS_MEAN) g /= wsum;
        }
        for (uint64_t c = 0; c < C; c++) {
            uint64_t at = base + c * dk;
            double r = ignored ? 0.0 : g * (exp(amp_fv_get(&vp, at)) - ((int64_t)c == l ? 1.0 : 0.0));
            if (bias) r += amp_fv_get(&vb, at);
            amp_fo_set(&o, at, r);
        }
    }
    amp_fo_commit(&o);
out:
    amp_fv_close(&vd), amp_fv_close(&vp), amp_fv_close(&vw), amp_fv_close(&vb);
    return rc;
}
