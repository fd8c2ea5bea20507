/* ConvTranspose on CUDA through cuDNN: the transposed convolution is the data gradient of
 * the convolution that maps Y back to X (cudnnConvolutionBackwardData with dy = X, the
 * filter W as it is, (C, M / group, k...), and dx = Y). NCHW, fully packed; 16-bit data
 * with fp32 accumulation; float32 with FMA math (no TF32) unless the session allows TF32.
 * The descriptors and the algorithm of each shape are made once and cached; the algorithm
 * is the fastest of cuDNN's, each timed once on the first run's buffers.
 *
 * The output shape and pads are every backend's (ops/conv_geom.h:
 * amp_convtranspose_geom). cuDNN pads both ends
 * alike, never negatively, and derives X's size from Y's as a forward convolution would:
 * asymmetric pads (auto_pad SAME with an odd total, output_shape), negative pads
 * (output_shape beyond the natural size) and output_padding at or above the stride are
 * AMP_ERR_UNSUPPORTED (amp_cuda_convtranspose_refusal), and the interpreter runs that node
 * on the CPU instead. 1-D runs as 2-D with width 1. */
#include <cuda_runtime.h>
#include <cudnn.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/conv.h"
#include "kernels/cuda/conv_dnn.h"
#include "kernels/cuda/cuda_libs.h" /* last: cuBLASLt and cuDNN through dlopen */
#include "ops/conv_geom.h" /* the attributes and geometry every backend reads */
#include "ops/geom.h"

typedef struct TKey {
    int dtype, rank, tf32, group;
    int x[AMP_CUDA_DNN_MAXD], w[AMP_CUDA_DNN_MAXD], y[AMP_CUDA_DNN_MAXD]; /* X (cuDNN's dy), W, Y (cuDNN's dx) */
    int pad[3], stride[3], dil[3];
} TKey;

typedef struct TPlan {
    AmpCudaDnnDescs d;
    cudnnConvolutionBwdDataAlgo_t algo;
    size_t ws;
} TPlan;

static void plan_free(void *p) {
    TPlan *x = p;
    if (!x) return;
    amp_cuda_dnn_descs_free(&x->d);
    free(x);
}

const char *amp_cuda_convtranspose_refusal(const AmpConvGeom *g) {
    if (g->nsp < 1 || g->nsp > 3) return "cuDNN takes 1 to 3 spatial axes here";
    for (int i = 0; i < g->nsp; i++) {
        if (g->pad0[i] != g->pad1[i]) return "asymmetric padding (cuDNN pads both ends alike)";
        if (g->pad0[i] < 0) return "negative padding (output_shape beyond the natural size)";
        if (g->in[i] > INT32_MAX || g->out[i] > INT32_MAX || g->pad0[i] > INT32_MAX || g->stride[i] > INT32_MAX ||
            g->dil[i] > INT32_MAX || g->kern[i] > INT32_MAX)
            return "too large for cuDNN";
        /* cuDNN checks that a forward convolution of Y gives X's size: that holds
         * exactly when output_padding is below the stride */
        int64_t span = g->out[i] + 2 * g->pad0[i] - ((g->kern[i] - 1) * g->dil[i] + 1);
        if (span < 0 || span / g->stride[i] + 1 != g->in[i])
            return "output_padding at or above the stride (cuDNN derives X's size from Y's)";
    }
    return NULL;
}

/* The descriptors and the algorithm: io = X, W, Y on the device, to time the algorithms. */
static AmpCode make_plan(AmpKernelCtx *k, const void *key_bytes, void *const *io, void **out) {
    const TKey *key = key_bytes;
    AmpCudaCtx *c = amp_cuda_ctx(k);
    TPlan *p = calloc(1, sizeof *p);
    if (!p) return amp_fail(k->st, AMP_ERR_INTERNAL, "out of memory");
    cudnnDataType_t t = amp_cuda_dnn_type(key->dtype);
    int bdims[AMP_CUDA_DNN_MAXD] = {1, key->y[1], 1, 1, 1};
    const char *what = "describing the tensors";
    bool strict = key->dtype == AMP_DT_FLOAT && !key->tf32;
    cudnnStatus_t s = amp_cuda_dnn_packed(&p->d.xd, t, key->rank, key->x);
    if (!s) s = amp_cuda_dnn_packed(&p->d.yd, t, key->rank, key->y);
    if (!s) s = amp_cuda_dnn_packed(&p->d.bd, t, key->rank, bdims);
    if (!s) s = amp_cuda_dnn_filter(&p->d.wd, t, key->rank, key->w);
    if (!s) s = amp_cuda_dnn_conv(&p->d.cd, key->rank - 2, key->pad, key->stride, key->dil, key->group, strict);
    /* the forward convolution of Y must give X's shape */
    if (!s) s = amp_cuda_dnn_check_out(p->d.cd, p->d.yd, p->d.wd, key->rank, key->x);
    if (!s) { /* X is cuDNN's dy, Y its dx */
        what = "choosing the algorithm";
        s = amp_cuda_dnn_bwd_data_algo(c, strict, p->d.wd, io[1], p->d.xd, io[0], p->d.cd, p->d.yd, io[2], &p->algo,
                                       &p->ws);
    }
    if (s) {
        plan_free(p);
        return amp_cuda_check_dnn_geometry(k, s, what);
    }
    *out = p;
    return AMP_OK;
}


/* The key of a geometry cuDNN takes (refusal checked); 1-D as 2-D. */
static void fill_key(TKey *key, const AmpBuf *x, const AmpBuf *w, const AmpBuf *y, const AmpConvGeom *g) {
    amp_cuda_dnn_window(g, &key->rank, key->pad, key->stride, key->dil);
    amp_cuda_dnn_dims(x, key->rank, key->x);
    amp_cuda_dnn_dims(w, key->rank, key->w);
    amp_cuda_dnn_dims(y, key->rank, key->y);
}

/* Y (N, M, out...) from X (N, C, in...), W (C, M / group, k...), B (M); checks as the CPU's. */
AmpCode amp_cuda_conv_transpose(AmpKernelCtx *k) {
    const AmpBuf *x, *w, *b;
    AmpWindowGeom own;
    const AmpWindowGeom *wg; /* amp_conv_node_geom (ops/conv_geom.h): the window, M, Y checked */
    AmpCode rc = amp_cuda_conv_inputs(k, &own, &wg, &x, &w, &b);
    if (rc) return rc;
    const AmpConvAttrs *at = k->attrs;
    int dt = x->dtype;
    int64_t group = at->group;
    AmpConvGeom g = wg->g;
    AmpBuf *y;
    if ((rc = amp_kernel_outputs(k, 1, &y)) || !y) return rc;
    if (!y->nelem) return AMP_OK;
    if (!x->nelem || !w->nelem) return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "an empty X or W (cuDNN)");
    const char *why = amp_cuda_convtranspose_refusal(&g);
    if (why) return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "%s", why);
    for (int i = 0; i < 2; i++)
        if (x->dims[i] > INT32_MAX || w->dims[i] > INT32_MAX || y->dims[i] > INT32_MAX)
            return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "tensor too large for cuDNN");
    TKey key;
    memset(&key, 0, sizeof key); /* compared bytewise */
    key.dtype = dt;
    key.tf32 = amp_cuda_ctx(k)->tf32;
    key.group = (int)group;
    fill_key(&key, x, w, y, &g);
    void *io[3] = {(void *)x->data, (void *)w->data, y->data}, *plan;
    if ((rc = amp_cuda_dnn_plan(k, AMP_CUDA_CACHE_CONVT, &key, sizeof key, make_plan, plan_free, io, &plan))) return rc;
    const TPlan *p = plan;
    AmpCudaCtx *c = amp_cuda_ctx(k);
    float one = 1.f, zero = 0.f;
    cudnnStatus_t s = cudnnConvolutionBackwardData(c->dnn, &one, p->d.wd, w->data, p->d.xd, x->data, p->d.cd, p->algo,
                                                   c->workspace, p->ws, &zero, p->d.yd, y->data);
    if (!s && b) s = cudnnAddTensor(c->dnn, &one, p->d.bd, b->data, &one, p->d.yd, y->data);
    return amp_cuda_check_dnn(k, s, "the transposed convolution");
}
