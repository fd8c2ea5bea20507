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

#define MAXD 5 /* tensors of rank 4 or 5: 1-D and 2-D windows as 2-D, 3-D as 3-D */

typedef struct ConvKey {
    int op; /* 0 conv, 1 max pool, 2 average pool including pads, 3 average pool excluding them */
    int dtype, rank, tf32;
    int x[MAXD], w[MAXD], y[MAXD];
    int pad[3], stride[3], dil[3], group;
} ConvKey;

typedef struct ConvPlan {
    cudnnTensorDescriptor_t xd, yd, bd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    cudnnPoolingDescriptor_t pd;
    cudnnConvolutionFwdAlgo_t algo;
    size_t ws;
} ConvPlan;

static void plan_free(void *p) {
    ConvPlan *x = p;
    if (!x) return;
    if (x->xd) cudnnDestroyTensorDescriptor(x->xd);
    if (x->yd) cudnnDestroyTensorDescriptor(x->yd);
    if (x->bd) cudnnDestroyTensorDescriptor(x->bd);
    if (x->wd) cudnnDestroyFilterDescriptor(x->wd);
    if (x->cd) cudnnDestroyConvolutionDescriptor(x->cd);
    if (x->pd) cudnnDestroyPoolingDescriptor(x->pd);
    free(x);
}

cudnnDataType_t amp_cuda_dnn_type(int dtype) {
    return dtype == AMP_DT_FLOAT16 ? CUDNN_DATA_HALF : dtype == AMP_DT_BFLOAT16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
}

cudnnStatus_t amp_cuda_dnn_packed(cudnnTensorDescriptor_t *d, cudnnDataType_t t, int rank, const int *dims) {
    int strides[MAXD];
    strides[rank - 1] = 1;
    for (int i = rank - 2; i >= 0; i--) strides[i] = strides[i + 1] * dims[i + 1];
    cudnnStatus_t s = cudnnCreateTensorDescriptor(d);
    return s ? s : cudnnSetTensorNdDescriptor(*d, t, rank, dims, strides);
}

/* io: the convolution's X, W and Y (device), for timing the algorithms; NULL for pools. */
static AmpCode make_plan(AmpKernelCtx *k, const ConvKey *key, void *const *io, ConvPlan **out) {
    AmpCudaCtx *c = amp_cuda_ctx(k);
    ConvPlan *p = calloc(1, sizeof *p);
    if (!p) return amp_fail(k->st, AMP_ERR_INTERNAL, "out of memory");
    cudnnDataType_t t = amp_cuda_dnn_type(key->dtype);
    int nsp = key->rank - 2;
    cudnnStatus_t s = amp_cuda_dnn_packed(&p->xd, t, key->rank, key->x);
    if (!s) s = amp_cuda_dnn_packed(&p->yd, t, key->rank, key->y);
    const char *what = "describing the tensors";
    if (!s && key->op == 0) {
        int bdims[MAXD] = {1, key->y[1], 1, 1, 1};
        s = amp_cuda_dnn_packed(&p->bd, t, key->rank, bdims);
        if (!s) s = cudnnCreateFilterDescriptor(&p->wd);
        if (!s) s = cudnnSetFilterNdDescriptor(p->wd, t, CUDNN_TENSOR_NCHW, key->rank, key->w);
        if (!s) s = cudnnCreateConvolutionDescriptor(&p->cd);
        if (!s) s = cudnnSetConvolutionNdDescriptor(p->cd, nsp, key->pad, key->stride, key->dil, CUDNN_CROSS_CORRELATION,
                                                    CUDNN_DATA_FLOAT);
        if (!s) s = cudnnSetConvolutionGroupCount(p->cd, key->group);
        bool strict = key->dtype == AMP_DT_FLOAT && !key->tf32;
        if (!s) s = cudnnSetConvolutionMathType(p->cd, strict ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH);
        /* the output shape cuDNN computes must be the one the executor placed */
        int ydims[MAXD];
        if (!s) s = cudnnGetConvolutionNdForwardOutputDim(p->cd, p->xd, p->wd, key->rank, ydims);
        if (!s && memcmp(ydims, key->y, (size_t)key->rank * sizeof *ydims)) s = CUDNN_STATUS_BAD_PARAM;
        cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        int n = 0;
        if (!s) { /* every algorithm run once on the node's own buffers, fastest first (as
                     PyTorch's cudnn.benchmark); the heuristic's order when that fails */
            what = "choosing the algorithm";
            s = io && io[0] ? cudnnFindConvolutionForwardAlgorithmEx(c->dnn, p->xd, io[0], p->wd, io[1], p->cd, p->yd,
                                                                     io[2], CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, perf,
                                                                     c->workspace, c->workspace_bytes)
                            : CUDNN_STATUS_NOT_SUPPORTED;
            if (s) s = cudnnGetConvolutionForwardAlgorithm_v7(c->dnn, p->xd, p->wd, p->cd, p->yd,
                                                              CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, perf);
        }
        int pick = -1;
        for (int i = 0; !s && i < n && pick < 0; i++) {
            bool tc = perf[i].mathType == CUDNN_TENSOR_OP_MATH || perf[i].mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
            if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= c->workspace_bytes && !(strict && tc))
                pick = i;
        }
        if (!s && pick < 0) s = CUDNN_STATUS_NOT_SUPPORTED;
        if (!s) {
            p->algo = perf[pick].algo;
            p->ws = perf[pick].memory;
            s = cudnnSetConvolutionMathType(p->cd, perf[pick].mathType);
        }
    } else if (!s) {
        cudnnPoolingMode_t mode = key->op == 1   ? CUDNN_POOLING_MAX_DETERMINISTIC
                                  : key->op == 2 ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                                 : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
        s = cudnnCreatePoolingDescriptor(&p->pd);
        if (!s) s = cudnnSetPoolingNdDescriptor(p->pd, mode, CUDNN_PROPAGATE_NAN, nsp, key->w + 2, key->pad, key->stride);
        int ydims[MAXD];
        if (!s) s = cudnnGetPoolingNdForwardOutputDim(p->pd, p->xd, key->rank, ydims);
        if (!s && memcmp(ydims, key->y, (size_t)key->rank * sizeof *ydims)) s = CUDNN_STATUS_BAD_PARAM;
    }
    if (s) {
        plan_free(p);
        return amp_cuda_check_dnn_geometry(k, s, what);
    }
    *out = p;
    return AMP_OK;
}

static AmpCode get_plan(AmpKernelCtx *k, const ConvKey *key, void *const *io, ConvPlan **p) {
    AmpCudaCtx *c = amp_cuda_ctx(k);
    if ((*p = amp_cuda_cache_get(c, AMP_CUDA_CACHE_CONV, key, sizeof *key))) return AMP_OK;
    AmpCode rc = make_plan(k, key, io, p);
    if (rc) return rc;
    if (!amp_cuda_cache_put(c, AMP_CUDA_CACHE_CONV, key, sizeof *key, *p, plan_free)) {
        plan_free(*p);
        return amp_fail(k->st, AMP_ERR_INTERNAL, "out of memory");
    }
    return AMP_OK;
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
    const AmpBuf *x = k->n_in > 0 ? k->in[0] : NULL, *w = k->n_in > 1 ? k->in[1] : NULL;
    const AmpBuf *b = k->n_in > 2 ? k->in[2] : NULL;
    if (!x || !w) return amp_kernel_fail(k, AMP_ERR_INPUT, "needs inputs X and W");
    int dt = x->dtype;
    if (w->dtype != dt || (b && b->dtype != dt) || !amp_cuda_is_float(dt)) return amp_kernel_bad_dtype(k, dt);
    const AmpConvAttrs *at;
    int64_t M;
    AmpCode rc = amp_conv_check(k, x, w, b, false, &at, &M);
    if (rc) return rc;
    int nsp = x->rank - 2;
    int64_t group = at->group;
    int64_t kern[AMP_MAX_SPATIAL];
    for (int i = 0; i < nsp; i++) kern[i] = w->dims[i + 2];
    AmpConvGeom g;
    rc = amp_conv_geom_attrs(k, at, x, kern, &g);
    if (rc) return rc;
    AmpBuf *y;
    if ((rc = amp_conv_out(k, dt, x->dims[0], M, &g, &y)) || !y) return rc;
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
    cudnnStatus_t s = cudnnConvolutionForward(c->dnn, &one, p->xd, x->data, p->wd, w->data, p->cd, p->algo,
                                              c->workspace, p->ws, &zero, p->yd, y->data);
    if (!s && b) s = cudnnAddTensor(c->dnn, &one, p->bd, b->data, &one, p->yd, y->data);
    return amp_cuda_check_dnn(k, s, "the convolution");
}

static AmpCode pool(AmpKernelCtx *k, bool max) {
    const AmpBuf *x = k->n_in > 0 ? k->in[0] : NULL;
    if (!x) return amp_kernel_fail(k, AMP_ERR_INPUT, "needs input X");
    int dt = x->dtype;
    if (!amp_cuda_is_float(dt)) return amp_kernel_bad_dtype(k, dt);
    const AmpConvAttrs *at = amp_conv_prepared(k);
    if (!at) return k->st->code;
    if (x->rank < 3) return amp_kernel_fail(k, AMP_ERR_INPUT, "X must have rank >= 3");
    int nsp = x->rank - 2;
    int64_t kern[AMP_MAX_SPATIAL];
    AmpCode rc = amp_conv_ints_of(k, &at->kernel_shape, "kernel_shape", nsp, -1, kern);
    if (rc) return rc;
    AmpConvGeom g;
    if ((rc = amp_conv_geom_attrs(k, at, x, kern, &g))) return rc;
    for (int i = 0; i < nsp; i++)
        if (g.dil[i] != 1) return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "dilated pooling (cuDNN)");
    AmpBuf *y;
    if ((rc = amp_conv_out(k, dt, x->dims[0], x->dims[1], &g, &y)) || !y) return rc;
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
    return amp_cuda_check_dnn(k, cudnnPoolingForward(c->dnn, p->pd, &one, p->xd, x->data, &zero, p->yd, y->data),
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
