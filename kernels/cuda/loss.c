/* CUDA node-level kernels: SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss and
 * com.microsoft SoftmaxCrossEntropyLossGrad, read as the CPU reads them (amp_loss_prepare's
 * AmpLossAttrs, ops/norm_attrs.h; kernels/cpu/loss.c's shape checks). The launch plan
 * (amp_cuda_loss_plan) depends on the sizes alone, so the reductions add in the same order
 * on every run; their partial sums live in the session workspace. One difference: a label
 * outside [0, C) that is not ignore_index makes its loss (and so a sum or mean) NaN, and
 * its gradient row NaN, where the CPU reports an error (checking it would wait on the
 * device). */
#include "kernels/cuda/loss.h"
#include "ops/geom.h"
#include "ops/norm_attrs.h" /* AmpLossAttrs (amp_loss_prepare), AmpLossGeom (amp_loss_geom) */

void amp_cuda_loss_plan(AmpCudaLoss *p) {
    int64_t ns = p->n * p->dk, g;
    if (p->dk > 1) {
        p->mode = AMP_CUDA_LOSS_THREAD, p->threads = 256;
        g = (ns + 255) / 256;
    } else if (p->c <= 1024) {
        p->mode = AMP_CUDA_LOSS_WARP, p->threads = 256;
        g = (ns + 7) / 8;
    } else {
        p->mode = AMP_CUDA_LOSS_BLOCK, p->threads = 512;
        g = ns;
    }
    p->blocks = (unsigned)(g < 1 ? 1 : g > AMP_CUDA_LOSS_MAX_BLOCKS ? AMP_CUDA_LOSS_MAX_BLOCKS : g);
}

size_t amp_cuda_loss_workspace(const AmpCudaLoss *p) {
    return (2 * (size_t)p->blocks + 1) * sizeof(double);
}

static bool is_label(int dt) {
    return dt == AMP_DT_INT32 || dt == AMP_DT_INT64;
}

/* Inputs (scores, labels, weights?): the float ones of one type. */
bool amp_cuda_supports_loss(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    (void)opset;
    if (n->n_inputs < 2 || !n->inputs[0] || !n->inputs[1] || !is_label(in_dtypes[1])) return false;
    if (!amp_cuda_is_float(in_dtypes[0])) return false;
    return n->n_inputs < 3 || !n->inputs[2] || in_dtypes[2] == in_dtypes[0];
}

/* Inputs (dY, log_prob, label, weight?, bias?): the float ones of one type. */
bool amp_cuda_supports_loss_grad(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    (void)opset;
    if (n->n_inputs < 3 || n->n_inputs > 5 || !n->inputs[0] || !n->inputs[1] || !n->inputs[2]) return false;
    if (!amp_cuda_is_float(in_dtypes[1]) || !is_label(in_dtypes[2])) return false;
    for (int i = 0; i < n->n_inputs; i++)
        if (i != 2 && n->inputs[i] && in_dtypes[i] != in_dtypes[1]) return false;
    return true;
}

/* The CPU's loss_args: the geometry's sizes (amp_loss_geom, ops/norm_attrs.h), labels of
 * int32/int64, w of x's type; p gets the sizes, the attributes and the plan. */
static AmpCode loss_args(AmpKernelCtx *k, const AmpBuf *x, const AmpBuf *labels, const AmpBuf *w, AmpCudaLoss *p) {
    AmpLossGeom own;
    const AmpLossGeom *g;
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&g);
    if (rc) return rc;
    const AmpLossAttrs *a = k->attrs;
    if (!amp_cuda_is_float(x->dtype)) return amp_kernel_bad_dtype(k, x->dtype);
    if (!is_label(labels->dtype))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "labels must be int32 or int64, not %s",
                               amp_dtype_name(labels->dtype));
    if (w && w->dtype != x->dtype) return amp_kernel_bad_dtype(k, w->dtype);
    *p = (AmpCudaLoss){.n = (int64_t)g->n, .c = (int64_t)g->c, .dk = (int64_t)g->dk,
                       .red = (int)a->red, .has_ii = a->has_ii, .ii = a->ii};
    amp_cuda_loss_plan(p);
    if (amp_cuda_loss_workspace(p) > amp_cuda_ctx(k)->workspace_bytes)
        return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "the loss's partial sums do not fit the workspace");
    return AMP_OK;
}

/* SoftmaxCrossEntropyLoss (softmax, with log_prob) or NegativeLogLikelihoodLoss. */
static AmpCode loss_run(AmpKernelCtx *k, bool softmax) {
    const AmpBuf *x = k->n_in > 0 ? k->in[0] : NULL, *labels = k->n_in > 1 ? k->in[1] : NULL;
    const AmpBuf *w = k->n_in > 2 ? k->in[2] : NULL;
    AmpCudaLoss p;
    AmpCode rc = loss_args(k, x, labels, w, &p); /* the geometry first: x and labels present */
    if (rc) return rc;
    AmpBuf *outs[2] = {NULL, NULL};
    if ((rc = amp_kernel_outputs(k, softmax ? 2 : 1, outs))) return rc;
    AmpBuf *loss = outs[0], *lp = outs[1];
    /* log_prob alone needs no reduction; a none loss of no sample has no element */
    if (!loss && !lp) return AMP_OK;
    AmpCudaCtx *c = amp_cuda_ctx(k);
    int err = amp_cuda_loss_launch(x->dtype, labels->dtype, softmax, x->data, labels->data, w ? w->data : NULL,
                                   loss ? loss->data : NULL, lp && lp->nelem ? lp->data : NULL, c->workspace, &p,
                                   c->stream);
    return amp_cuda_check(k, err, "loss kernel");
}

AmpCode amp_cuda_sce_loss(AmpKernelCtx *k) {
    return loss_run(k, true);
}

AmpCode amp_cuda_nll_loss(AmpKernelCtx *k) {
    return loss_run(k, false);
}

/* (dY, log_prob, label, weight?, bias?) -> d_logits, the CPU's checks. */
AmpCode amp_cuda_ms_sce_loss_grad(AmpKernelCtx *k) {
    const AmpBuf *in[5];
    for (int i = 0; i < 5; i++) in[i] = i < k->n_in ? k->in[i] : NULL;
    const AmpBuf *dy = in[0], *lpb = in[1], *labels = in[2], *w = in[3], *bias = in[4];
    AmpCudaLoss p;
    AmpCode rc = loss_args(k, lpb, labels, w, &p); /* the geometry first: dY, log_prob and label present */
    if (rc) return rc;
    if (dy->dtype != lpb->dtype) return amp_kernel_bad_dtype(k, dy->dtype);
    if (bias && bias->dtype != lpb->dtype) return amp_kernel_bad_dtype(k, bias->dtype);
    AmpBuf *dx;
    if ((rc = amp_kernel_outputs(k, 1, &dx)) || !dx) return rc;
    AmpCudaCtx *c = amp_cuda_ctx(k);
    int err = amp_cuda_loss_grad_launch(lpb->dtype, labels->dtype, dy->data, lpb->data, labels->data,
                                        w ? w->data : NULL, bias ? bias->data : NULL, dx->data, c->workspace, &p,
                                        c->stream);
    return amp_cuda_check(k, err, "loss gradient kernel");
}
