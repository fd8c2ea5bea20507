/* com.microsoft ConvGrad (dY, X, W) -> (dX, dW, dB) on CUDA: dX by
 * cudnnConvolutionBackwardData, dW by cudnnConvolutionBackwardFilter (each only where the
 * node lists it), dB by an own reduction (conv_grad.cu). The attributes and the window
 * geometry are every backend's (ops/conv_geom.h: amp_conv_grad_prepare's group,
 * amp_conv_grad_check on the node), and so are the checks. NCHW packed, 1-D as 2-D; 16-bit data
 * with fp32 accumulation; float32 with FMA math (no TF32) unless the session allows TF32.
 * The descriptors and both algorithms of each shape are made once and cached, each
 * algorithm the fastest of cuDNN's timed once on the first run's buffers. A geometry cuDNN
 * cannot do (asymmetric pads: auto_pad SAME with an odd total; sizes past int32) is
 * AMP_ERR_UNSUPPORTED (amp_cuda_conv_grad_refusal) and runs on the CPU. */
#include <cuda_runtime.h>
#include <cudnn.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/conv_grad.h"
#include "kernels/cuda/conv_dnn.h"
#include "kernels/cuda/cuda_libs.h" /* last: cuBLASLt and cuDNN through dlopen */

typedef struct GKey {
    int dtype, rank, tf32, group, want_dx, want_dw;
    int x[AMP_CUDA_DNN_MAXD], w[AMP_CUDA_DNN_MAXD], y[AMP_CUDA_DNN_MAXD]; /* X, W, dY */
    int pad[3], stride[3], dil[3];
} GKey;

typedef struct GPlan {
    AmpCudaDnnDescs d; /* xd X, yd dY, wd W (no bd; cd unused: the two below) */
    cudnnConvolutionDescriptor_t cd_data, cd_filter; /* each carries its algorithm's math type */
    cudnnConvolutionBwdDataAlgo_t data_algo;
    cudnnConvolutionBwdFilterAlgo_t filter_algo;
    size_t data_ws, filter_ws;
} GPlan;

static void plan_free(void *p) {
    GPlan *x = p;
    if (!x) return;
    amp_cuda_dnn_descs_free(&x->d);
    if (x->cd_data) cudnnDestroyConvolutionDescriptor(x->cd_data);
    if (x->cd_filter) cudnnDestroyConvolutionDescriptor(x->cd_filter);
    free(x);
}

const char *amp_cuda_conv_grad_refusal(const AmpConvGeom *g) {
    if (g->nsp < 1 || g->nsp > 3) return "cuDNN takes 1 to 3 spatial axes here";
    for (int i = 0; i < g->nsp; i++) {
        if (g->pad0[i] != g->pad1[i]) return "asymmetric padding (cuDNN pads both ends alike)";
        if (g->in[i] > INT32_MAX || g->out[i] > INT32_MAX || g->pad0[i] > INT32_MAX || g->stride[i] > INT32_MAX ||
            g->dil[i] > INT32_MAX || g->kern[i] > INT32_MAX)
            return "too large for cuDNN";
    }
    return NULL;
}

/* A convolution descriptor of the key, with the math type strict or tensor-op. */
static cudnnStatus_t conv_desc(const GKey *key, cudnnConvolutionDescriptor_t *cd) {
    return amp_cuda_dnn_conv(cd, key->rank - 2, key->pad, key->stride, key->dil, key->group,
                             key->dtype == AMP_DT_FLOAT && !key->tf32);
}

/* Backward data's algorithm, timed on io (dY, X, W, dX) when it can be. */
static cudnnStatus_t find_data(AmpCudaCtx *c, const GKey *key, GPlan *p, void *const *io) {
    cudnnStatus_t s = conv_desc(key, &p->cd_data);
    return s ? s
             : amp_cuda_dnn_bwd_data_algo(c, key->dtype == AMP_DT_FLOAT && !key->tf32, p->d.wd, io[2], p->d.yd, io[0],
                                          p->cd_data, p->d.xd, io[3], &p->data_algo, &p->data_ws);
}

/* Backward filter's algorithm, timed on io (dY, X, W, dX, dW). */
static cudnnStatus_t find_filter(AmpCudaCtx *c, const GKey *key, GPlan *p, void *const *io) {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    int n = 0, pick;
    cudnnStatus_t s = conv_desc(key, &p->cd_filter);
    if (s) return s;
    s = cudnnFindConvolutionBackwardFilterAlgorithmEx(c->dnn, p->d.xd, io[1], p->d.yd, io[0], p->cd_filter, p->d.wd,
                                                      io[4], CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, perf,
                                                      c->workspace, c->workspace_bytes);
    if (s) s = cudnnGetConvolutionBackwardFilterAlgorithm_v7(c->dnn, p->d.xd, p->d.yd, p->cd_filter, p->d.wd,
                                                             CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, perf);
    if (s) return s;
    AMP_CUDA_DNN_PICK(perf, n, key->dtype == AMP_DT_FLOAT && !key->tf32, c->workspace_bytes, pick);
    if (pick < 0) return CUDNN_STATUS_NOT_SUPPORTED;
    p->filter_algo = perf[pick].algo;
    p->filter_ws = perf[pick].memory;
    return cudnnSetConvolutionMathType(p->cd_filter, perf[pick].mathType);
}

static AmpCode make_plan(AmpKernelCtx *k, const void *key_bytes, void *const *io, void **out) {
    const GKey *key = key_bytes;
    AmpCudaCtx *c = amp_cuda_ctx(k);
    GPlan *p = calloc(1, sizeof *p);
    if (!p) return amp_fail(k->st, AMP_ERR_INTERNAL, "out of memory");
    cudnnDataType_t t = amp_cuda_dnn_type(key->dtype);
    const char *what = "describing the tensors";
    cudnnStatus_t s = amp_cuda_dnn_packed(&p->d.xd, t, key->rank, key->x);
    if (!s) s = amp_cuda_dnn_packed(&p->d.yd, t, key->rank, key->y);
    if (!s) s = amp_cuda_dnn_filter(&p->d.wd, t, key->rank, key->w);
    cudnnConvolutionDescriptor_t probe = NULL;
    if (!s) s = conv_desc(key, &probe);
    /* the forward convolution of X must give dY's shape */
    if (!s) s = amp_cuda_dnn_check_out(probe, p->d.xd, p->d.wd, key->rank, key->y);
    if (probe) cudnnDestroyConvolutionDescriptor(probe);
    if (!s) what = "choosing the algorithms";
    if (!s && key->want_dx) s = find_data(c, key, p, io);
    if (!s && key->want_dw) s = find_filter(c, key, p, io);
    if (s) {
        plan_free(p);
        return amp_cuda_check_dnn_geometry(k, s, what);
    }
    *out = p;
    return AMP_OK;
}


/* The key of a geometry cuDNN takes (refusal checked); 1-D as 2-D. */
static void fill_key(GKey *key, const AmpBuf *x, const AmpBuf *w, const AmpBuf *dy, const AmpConvGeom *g) {
    amp_cuda_dnn_window(g, &key->rank, key->pad, key->stride, key->dil);
    amp_cuda_dnn_dims(x, key->rank, key->x);
    amp_cuda_dnn_dims(w, key->rank, key->w);
    amp_cuda_dnn_dims(dy, key->rank, key->y);
}

bool amp_cuda_supports_conv_grad(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    return n->n_inputs == 3 && n->n_outputs <= 3 && amp_cuda_supports_float(n, opset, in_dtypes);
}

/* Its dtype, then the CPU kernel's checks (amp_conv_grad_check: ranks, group, kernel_shape,
 * dY's shape); *g the geometry. */
static AmpCode check_inputs(AmpKernelCtx *k, const AmpBuf *dy, const AmpBuf *x, const AmpBuf *w, AmpConvGeom *g) {
    const AmpConvGradAttrs *a = k->attrs;
    if (!a) return amp_kernel_fail(k, AMP_ERR_INTERNAL, "the node's attributes were not prepared");
    int dt = x->dtype;
    if (!amp_cuda_is_float(dt)) return amp_kernel_bad_dtype(k, dt);
    int64_t kern[AMP_MAX_SPATIAL];
    return amp_conv_grad_check(k, dy, x, w, kern, g);
}

/* Zeroes the listed outputs (the gradients of a convolution with no output position). */
static AmpCode zero_outputs(AmpKernelCtx *k, AmpBuf *const *out) {
    for (int i = 0; i < 3; i++)
        if (out[i] && out[i]->nelem) {
            int err = cudaMemsetAsync(out[i]->data, 0, amp_buf_bytes(out[i]), amp_cuda_ctx(k)->stream);
            if (err) return amp_cuda_check(k, err, "zeroing a gradient");
        }
    return AMP_OK;
}

AmpCode amp_cuda_ms_conv_grad(AmpKernelCtx *k) {
    const AmpBuf *dy = k->n_in > 0 ? k->in[0] : NULL, *x = k->n_in > 1 ? k->in[1] : NULL;
    const AmpBuf *w = k->n_in > 2 ? k->in[2] : NULL;
    if (!dy || !x || !w) return amp_kernel_fail(k, AMP_ERR_INPUT, "needs inputs dY, X and W");
    AmpConvGeom g;
    AmpCode rc = check_inputs(k, dy, x, w, &g);
    if (rc) return rc;
    AmpBuf *out[3];
    if ((rc = amp_conv_grad_outs(k, x, w, out))) return rc;
    if (!dy->nelem) return zero_outputs(k, out); /* no output position: every gradient is 0 */
    if (!x->nelem || !w->nelem) return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "an empty X or W (cuDNN)");
    const char *why = amp_cuda_conv_grad_refusal(&g);
    if (why) return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "%s", why);
    for (int i = 0; i < 2; i++)
        if (x->dims[i] > INT32_MAX || w->dims[i] > INT32_MAX || dy->dims[i] > INT32_MAX)
            return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "tensor too large for cuDNN");
    AmpCudaCtx *c = amp_cuda_ctx(k);
    int err = 0;
    if (out[2]) { /* dB: the sum of dY over every axis but the channel */
        int64_t O = (int64_t)amp_shape_nelem(dy->rank - 2, dy->dims + 2);
        err = amp_cuda_conv_bias_grad_launch(dy->dtype, dy->data, out[2]->data, dy->dims[0], dy->dims[1], O, c->stream);
        if (err) return amp_cuda_check(k, err, "bias gradient kernel");
    }
    if (!out[0] && !out[1]) return AMP_OK;
    GKey key;
    memset(&key, 0, sizeof key); /* compared bytewise */
    key.dtype = x->dtype;
    key.tf32 = c->tf32;
    key.group = (int)((const AmpConvGradAttrs *)k->attrs)->group;
    key.want_dx = out[0] != NULL, key.want_dw = out[1] != NULL;
    fill_key(&key, x, w, dy, &g);
    void *io[5] = {(void *)dy->data, (void *)x->data, (void *)w->data, out[0] ? out[0]->data : NULL,
                   out[1] ? out[1]->data : NULL};
    void *plan;
    if ((rc = amp_cuda_dnn_plan(k, AMP_CUDA_CACHE_CONV_GRAD, &key, sizeof key, make_plan, plan_free, io, &plan)))
        return rc;
    const GPlan *p = plan;
    float one = 1.f, zero = 0.f;
    cudnnStatus_t s = CUDNN_STATUS_SUCCESS;
    if (out[0])
        s = cudnnConvolutionBackwardData(c->dnn, &one, p->d.wd, w->data, p->d.yd, dy->data, p->cd_data, p->data_algo,
                                         c->workspace, p->data_ws, &zero, p->d.xd, out[0]->data);
    if (!s && out[1])
        s = cudnnConvolutionBackwardFilter(c->dnn, &one, p->d.xd, x->data, p->d.yd, dy->data, p->cd_filter,
                                           p->filter_algo, c->workspace, p->filter_ws, &zero, p->d.wd, out[1]->data);
    return amp_cuda_check_dnn(k, s, "the convolution's gradients");
}
