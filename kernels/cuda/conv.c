/* Conv, MaxPool and AveragePool on CUDA through cuDNN (NCHW, fully packed). 16-bit data
 * is convolved with fp32 accumulation (cuDNN's pseudo-half / pseudo-bfloat16
 * configurations); float32 with FMA math (no TF32) unless the session allows TF32. The
 * descriptors and the algorithm of each shape are made once and cached: the algorithm is
 * the fastest of cuDNN's, each timed once on the first run's buffers.
 *
 * The window geometry (strides, dilations, pads, auto_pad, output sizes) is every
 * backend's (ops/conv_geom.h: amp_conv_geom_attrs). cuDNN pads both ends of an axis alike: a geometry with more
 * padding at one end than the other (auto_pad SAME with an odd total, asymmetric pads,
 * ceil_mode windows that run past the end) is AMP_ERR_UNSUPPORTED here, and the
 * interpreter runs that node on the CPU instead. 1-D windows run as 2-D ones of width 1. */
#include <cuda_runtime.h>
#include <cudnn.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/conv.h"
#include "kernels/cuda/conv_dnn.h"
#include "kernels/cuda/grad_ops.h" /* MaxPool with Indices */
#include "kernels/cuda/cuda_libs.h" /* last: cuBLASLt and cuDNN through dlopen */
#include "ops/conv_geom.h" /* the attributes and window geometry every backend reads */
#include "ops/geom.h"

typedef struct ConvKey {
    int op; /* 0 conv, 1 max pool, 2 average pool including pads, 3 average pool excluding them */
    int dtype, rank, tf32;
    int x[AMP_CUDA_DNN_MAXD], w[AMP_CUDA_DNN_MAXD], y[AMP_CUDA_DNN_MAXD];
    int pad[3], stride[3], dil[3], group;
} ConvKey;

typedef struct ConvPlan {
    AmpCudaDnnDescs d; /* pools: xd and yd only */
    cudnnPoolingDescriptor_t pd;
    cudnnConvolutionFwdAlgo_t algo;
    size_t ws;
} ConvPlan;

static void plan_free(void *p) {
    ConvPlan *x = p;
    if (!x) return;
    amp_cuda_dnn_descs_free(&x->d);
    if (x->pd) cudnnDestroyPoolingDescriptor(x->pd);
    free(x);
}

/* io: the convolution's X, W and Y (device), for timing the algorithms; NULL for pools. */
static AmpCode make_plan(AmpKernelCtx *k, const void *key_bytes, void *const *io, void **out) {
    const ConvKey *key = key_bytes;
    AmpCudaCtx *c = amp_cuda_ctx(k);
    ConvPlan *p = calloc(1, sizeof *p);
    if (!p) return amp_fail(k->st, AMP_ERR_INTERNAL, "out of memory");
    cudnnDataType_t t = amp_cuda_dnn_type(key->dtype);
    int nsp = key->rank - 2;
    cudnnStatus_t s = amp_cuda_dnn_packed(&p->d.xd, t, key->rank, key->x);
    if (!s) s = amp_cuda_dnn_packed(&p->d.yd, t, key->rank, key->y);
    const char *what = "describing the tensors";
    if (!s && key->op == 0) {
        int bdims[AMP_CUDA_DNN_MAXD] = {1, key->y[1], 1, 1, 1};
        s = amp_cuda_dnn_packed(&p->d.bd, t, key->rank, bdims);
        if (!s) s = amp_cuda_dnn_filter(&p->d.wd, t, key->rank, key->w);
        bool strict = key->dtype == AMP_DT_FLOAT && !key->tf32;
        if (!s) s = amp_cuda_dnn_conv(&p->d.cd, nsp, key->pad, key->stride, key->dil, key->group, strict);
        if (!s) s = amp_cuda_dnn_check_out(p->d.cd, p->d.xd, p->d.wd, key->rank, key->y);
        cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        int n = 0;
        if (!s) { /* every algorithm run once on the node's own buffers, fastest first (as
                     PyTorch's cudnn.benchmark); the heuristic's order when that fails */
            what = "choosing the algorithm";
            s = io && io[0] ? cudnnFindConvolutionForwardAlgorithmEx(c->dnn, p->d.xd, io[0], p->d.wd, io[1], p->d.cd,
                                                                     p->d.yd, io[2], CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                                     &n, perf, c->workspace, c->workspace_bytes)
                            : CUDNN_STATUS_NOT_SUPPORTED;
            if (s) s = cudnnGetConvolutionForwardAlgorithm_v7(c->dnn, p->d.xd, p->d.wd, p->d.cd, p->d.yd,
                                                              CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, perf);
        }
        int pick = -1;
        if (!s) AMP_CUDA_DNN_PICK(perf, n, strict, c->workspace_bytes, pick);
        if (!s && pick < 0) s = CUDNN_STATUS_NOT_SUPPORTED;
        if (!s) {
            p->algo = perf[pick].algo;
            p->ws = perf[pick].memory;
            s = cudnnSetConvolutionMathType(p->d.cd, perf[pick].mathType);
        }
    } else if (!s) {
        cudnnPoolingMode_t mode = key->op == 1   ? CUDNN_POOLING_MAX_DETERMINISTIC
                                  : key->op == 2 ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                                 : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
        s = cudnnCreatePoolingDescriptor(&p->pd);
        if (!s) s = cudnnSetPoolingNdDescriptor(p->pd, mode, CUDNN_PROPAGATE_NAN, nsp, key->w + 2, key->pad, key->stride);
        int ydims[AMP_CUDA_DNN_MAXD];
        if (!s) s = cudnnGetPoolingNdForwardOutputDim(p->pd, p->d.xd, key->rank, ydims);
        if (!s && memcmp(ydims, key->y, (size_t)key->rank * sizeof *ydims)) s = CUDNN_STATUS_BAD_PARAM;
    }
    if (s) {
        plan_free(p);
        return amp_cuda_check_dnn_geometry(k, s, what);
    }
    *out = p;
    return AMP_OK;
}

/* The plan of key, cached (conv_dnn.h); io as make_plan's. */
static AmpCode get_plan(AmpKernelCtx *k, const ConvKey *key, void *const *io, ConvPlan **p) {
    void *plan;
    AmpCode rc = amp_cuda_dnn_plan(k, AMP_CUDA_CACHE_CONV, key, sizeof *key, make_plan, plan_free, io, &plan);
    *p = plan;
    return rc;
}

/* Fills the key's geometry from g: symmetric pads only; a 1-D window becomes 2-D. */
static AmpCode key_geometry(AmpKernelCtx *k, ConvKey *key, const AmpBuf *x, const AmpConvGeom *g,
                            const int64_t *kern, const AmpBuf *y) {
    int nsp = g->nsp;
    if (nsp < 1 || nsp > 3) return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "cuDNN takes 1 to 3 spatial axes here");
    int extra = nsp == 1; /* 1-D as 2-D */
    key->rank = nsp + 2 + extra;
    for (int i = 0; i < nsp; i++) {
        if (g->pad0[i] != g->pad1[i])
            return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "asymmetric padding on axis %d (cuDNN pads both ends alike)",
                                 i + 2);
        if (g->pad0[i] > INT32_MAX || g->stride[i] > INT32_MAX || g->dil[i] > INT32_MAX)
            return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "window too large for cuDNN");
        key->pad[i] = (int)g->pad0[i];
        key->stride[i] = (int)g->stride[i];
        key->dil[i] = (int)g->dil[i];
        key->w[i + 2] = (int)kern[i];
    }
    if (extra) key->pad[1] = 0, key->stride[1] = 1, key->dil[1] = 1, key->w[3] = 1;
    for (int i = 0; i < key->rank; i++) {
        int64_t xv = i < x->rank ? x->dims[i] : 1, yv = i < y->rank ? y->dims[i] : 1;
        if (xv > INT32_MAX || yv > INT32_MAX) return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "tensor too large for cuDNN");
        key->x[i] = (int)xv;
        key->y[i] = (int)yv;
    }
    return AMP_OK;
}

AmpCode amp_cuda_conv(AmpKernelCtx *k) {
    const AmpBuf *x, *w, *b;
    AmpWindowGeom own;
    const AmpWindowGeom *wg; /* amp_conv_node_geom (ops/conv_geom.h): the window, M, Y checked */
    AmpCode rc = amp_cuda_conv_inputs(k, &own, &wg, &x, &w, &b);
    if (rc) return rc;
    const AmpConvAttrs *at = k->attrs;
    int dt = x->dtype;
    int64_t M = wg->M, group = at->group;
    const int64_t *kern = wg->g.kern;
    AmpConvGeom g = wg->g;
    AmpBuf *y;
    if ((rc = amp_kernel_outputs(k, 1, &y)) || !y) return rc;
    if (!y->nelem) return AMP_OK;
    if (!x->nelem || !w->nelem) return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "an empty X or W (cuDNN)");
    ConvKey key;
    memset(&key, 0, sizeof key); /* the key is compared bytewise */
    key.op = 0;
    key.dtype = dt;
    key.tf32 = amp_cuda_ctx(k)->tf32;
    key.group = (int)group;
    if ((rc = key_geometry(k, &key, x, &g, kern, y))) return rc;
    key.w[0] = (int)M;
    key.w[1] = (int)w->dims[1];
    ConvPlan *p;
    void *io[3] = {(void *)x->data, (void *)w->data, y->data};
    if ((rc = get_plan(k, &key, io, &p))) return rc;
    AmpCudaCtx *c = amp_cuda_ctx(k);
    float one = 1.f, zero = 0.f;
    cudnnStatus_t s = cudnnConvolutionForward(c->dnn, &one, p->d.xd, x->data, p->d.wd, w->data, p->d.cd, p->algo,
                                              c->workspace, p->ws, &zero, p->d.yd, y->data);
    if (!s && b) s = cudnnAddTensor(c->dnn, &one, p->d.bd, b->data, &one, p->d.yd, y->data);
    return amp_cuda_check_dnn(k, s, "the convolution");
}

static AmpCode pool(AmpKernelCtx *k, bool max) {
    AmpWindowGeom own;
    const AmpWindowGeom *wg; /* amp_pool_geom (ops/conv_geom.h): the window, Y checked */
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&wg);
    if (rc) return rc;
    const AmpBuf *x = k->in[0];
    int dt = x->dtype;
    if (!amp_cuda_is_float(dt)) return amp_kernel_bad_dtype(k, dt);
    const AmpConvAttrs *at = k->attrs;
    int nsp = x->rank - 2;
    const AmpConvGeom g = wg->g;
    const int64_t *kern = g.kern;
    for (int i = 0; i < nsp; i++)
        if (g.dil[i] != 1) return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "dilated pooling (cuDNN)");
    AmpBuf *y;
    if ((rc = amp_kernel_outputs(k, 1, &y)) || !y) return rc;
    if (!y->nelem) return AMP_OK;
    ConvKey key;
    memset(&key, 0, sizeof key);
    key.op = max ? 1 : at->count_include_pad ? 2 : 3;
    key.dtype = dt;
    if ((rc = key_geometry(k, &key, x, &g, kern, y))) return rc;
    ConvPlan *p;
    if ((rc = get_plan(k, &key, NULL, &p))) return rc;
    AmpCudaCtx *c = amp_cuda_ctx(k);
    float one = 1.f, zero = 0.f;
    return amp_cuda_check_dnn(k, cudnnPoolingForward(c->dnn, p->pd, &one, p->d.xd, x->data, &zero, p->d.yd, y->data),
                              "the pooling");
}

/* With its Indices output listed, MaxPool runs grad_ops_pool.c's own kernel (cuDNN's
 * pooling gives no argmax). */
AmpCode amp_cuda_maxpool(AmpKernelCtx *k) {
    if (amp_cuda_pool_wants_indices(k->node)) return amp_cuda_maxpool_with_indices(k);
    return pool(k, true);
}

AmpCode amp_cuda_averagepool(AmpKernelCtx *k) {
    return pool(k, false);
}

/* X, W and B of one float dtype; 1 to 3 spatial axes. */
bool amp_cuda_supports_conv(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    return n->n_inputs >= 2 && amp_cuda_supports_float(n, opset, in_dtypes);
}

/* cuDNN: no dilations, no storage order to honour. MaxPool with its Indices output
 * (own kernel, grad_ops_pool.c): float data, any window. */
bool amp_cuda_supports_pool(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    if (amp_cuda_pool_wants_indices(n))
        return n->op == AMP_OP_MaxPool && amp_cuda_supports_maxpool_indices(n, opset, in_dtypes);
    const AmpAttr *d = amp_node_attr(n, "dilations");
    if (d) {
        for (size_t i = 0; i < d->n_ints; i++)
            if (d->ints[i] != 1) return false;
    }
    return amp_cuda_supports_float(n, opset, in_dtypes);
}
