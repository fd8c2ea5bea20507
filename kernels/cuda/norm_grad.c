/* CUDA node-level kernels: com.microsoft SoftmaxGrad_13 and LayerNormalizationGrad, read as
 * the CPU reads them (kernels/cpu/softmax.c, norm.c: their prepare functions, layouts and
 * checks). The workspace plan of LayerNormalizationGrad (amp_cuda_lngrad_chunks) depends
 * on the sizes alone, so its column sums add in one order on every run. */
#include "kernels/cuda/norm_grad.h"
#include "kernels/cuda/norm.h"
#include "ops/geom.h"

/* ---- SoftmaxGrad_13 -------------------------------------------------------------------- */

/* (dY, Y) -> dX = Y * (dY - sum(dY * Y)) along `axis`. */
AmpCode amp_cuda_ms_softmax_grad(AmpKernelCtx *k) {
    AmpSoftmaxGeom own;
    const AmpSoftmaxGeom *g; /* amp_softmax_geom (ops/norm_attrs.h): dY and Y of one shape, its rows */
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&g);
    if (rc) return rc;
    const AmpBuf *dy = k->in[0], *y = k->in[1];
    if (!amp_cuda_is_float(dy->dtype)) return amp_kernel_bad_dtype(k, dy->dtype);
    if (y->dtype != dy->dtype) return amp_kernel_bad_dtype(k, y->dtype);
    uint64_t outer = g->outer, d = g->d, inner = g->inner;
    AmpBuf *dx;
    if ((rc = amp_kernel_outputs(k, 1, &dx)) || !dx) return rc;
    if (!dy->nelem) return AMP_OK; /* no element, however many empty rows */
    int err = amp_cuda_softmax_grad_launch(dy->dtype, dy->data, y->data, dx->data, (int64_t)outer, (int64_t)d,
                                           (int64_t)inner, amp_cuda_ctx(k)->stream);
    return amp_cuda_check(k, err, "softmax gradient kernel");
}

/* ---- LayerNormalizationGrad -------------------------------------------------------------- */

size_t amp_cuda_lngrad_ws_floats(int64_t rows, int64_t cols, int64_t chunks) {
    return 2 * (size_t)rows + 2 * (size_t)chunks * (size_t)cols;
}

int64_t amp_cuda_lngrad_chunks(int64_t rows, int64_t cols, size_t ws_bytes) {
    int64_t ch = (rows + 31) / 32;
    if (ch < 1) ch = 1;
    if (ch > 512) ch = 512;
    size_t cap = ws_bytes / sizeof(float);
    while (ch > 1 && amp_cuda_lngrad_ws_floats(rows, cols, ch) > cap) ch /= 2;
    return amp_cuda_lngrad_ws_floats(rows, cols, ch) > cap ? 0 : ch;
}

bool amp_cuda_supports_layernorm_grad(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    (void)opset;
    if (n->n_inputs < 3 || n->n_inputs > 5) return false;
    int dt = in_dtypes[1];
    if (!amp_cuda_is_float(dt)) return false;
    for (int i = 0; i < n->n_inputs; i++) {
        if (!n->inputs[i]) {
            if (i < 3) return false;
            continue;
        }
        if (in_dtypes[i] != dt && !(i >= 3 && in_dtypes[i] == AMP_DT_FLOAT)) return false;
    }
    /* both statistics or neither (the CPU recomputes them when one is missing), of one type */
    bool m = n->n_inputs > 3 && n->inputs[3], v = n->n_inputs > 4 && n->inputs[4];
    return !(m && v) || in_dtypes[3] == in_dtypes[4];
}

/* (Y_grad, X, scale, mean?, inv_std_dev?) -> (X_grad, scale_grad?, bias_grad?), rows split at
 * `axis`; the CPU's checks (amp_cpu_ms_layernorm_grad). */
AmpCode amp_cuda_ms_layernorm_grad(AmpKernelCtx *k) {
    AmpLayerNormGeom own;
    const AmpLayerNormGeom *g; /* amp_layernorm_grad_geom (ops/norm_attrs.h) */
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&g);
    if (rc) return rc;
    const AmpBuf *in[5];
    for (int i = 0; i < 5; i++) in[i] = i < k->n_in ? k->in[i] : NULL;
    const AmpBuf *x = in[1];
    if (!amp_cuda_is_float(x->dtype)) return amp_kernel_bad_dtype(k, x->dtype);
    for (int i = 0; i < 3; i++)
        if (in[i]->dtype != x->dtype) return amp_kernel_bad_dtype(k, in[i]->dtype);
    bool stats = in[3] && in[4];
    if (stats && (in[3]->dtype != in[4]->dtype || (in[3]->dtype != x->dtype && in[3]->dtype != AMP_DT_FLOAT)))
        return amp_kernel_bad_dtype(k, in[3]->dtype);
    const AmpNormAttrs *na = k->attrs;
    int64_t rows = (int64_t)g->rows, cols = (int64_t)g->cols;
    AmpBuf *out[3];
    if ((rc = amp_kernel_outputs(k, 3, out))) return rc;
    AmpCudaCtx *c = amp_cuda_ctx(k);
    int64_t chunks = amp_cuda_lngrad_chunks(rows, cols, c->workspace_bytes);
    if (!chunks) return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "the rows' statistics do not fit the workspace");
    int err = amp_cuda_lngrad_launch(x->dtype, in[0]->data, x->data, in[2]->data, stats ? in[3]->data : NULL,
                                     stats ? in[4]->data : NULL, stats && in[3]->dtype == AMP_DT_FLOAT,
                                     out[0] && x->nelem ? out[0]->data : NULL, out[1] ? out[1]->data : NULL,
                                     out[2] ? out[2]->data : NULL, rows, cols, (float)na->eps, chunks,
                                     c->workspace, c->stream);
    return amp_cuda_check(k, err, "layer norm gradient kernel");
}
