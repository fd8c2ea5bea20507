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

#define MAXD 5

typedef struct TKey {
    int dtype, rank, tf32, group;
    int x[MAXD], w[MAXD], y[MAXD]; /* X (cuDNN's dy), W, Y (cuDNN's dx) */
    int pad[3], stride[3], dil[3];
} TKey;

typedef struct TPlan {
    cudnnTensorDescriptor_t xd, yd, bd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    cudnnConvolutionBwdDataAlgo_t algo;
    size_t ws;
} TPlan;

static void plan_free(void *p) {
    TPlan *x = p;
    if (!x) return;
    if (x->xd) cudnnDestroyTensorDescriptor(x->xd);
    if (x->yd) cudnnDestroyTensorDescriptor(x->yd);
    if (x->bd) cudnnDestroyTensorDescriptor(x->bd);
    if (x->wd) cudnnDestroyFilterDescriptor(x->wd);
    if (x->cd) cudnnDestroyConvolutionDescriptor(x->cd);
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
static AmpCode make_plan(AmpKernelCtx *k, const TKey *key, void *const *io, TPlan **out) {
    AmpCudaCtx *c = amp_cuda_ctx(k);
    TPlan *p = calloc(1, sizeof *p);
    if (!p) return amp_fail(k->st, AMP_ERR_INTERNAL, "out of memory");
    cudnnDataType_t t = amp_cuda_dnn_type(key->dtype);
    int bdims[MAXD] = {1, key->y[1], 1, 1, 1};
    const char *what = "describing the tensors";
    cudnnStatus_t s = amp_cuda_dnn_packed(&p->xd, t, key->rank, key->x);
    if (!s) s = amp_cuda_dnn_packed(&p->yd, t, key->rank, key->y);
    if (!s) s = amp_cuda_dnn_packed(&p->bd, t, key->rank, bdims);
    if (!s) s = cudnnCreateFilterDescriptor(&p->wd);
    if (!s) s = cudnnSetFilterNdDescriptor(p->wd, t, CUDNN_TENSOR_NCHW, key->rank, key->w);
    if (!s) s = cudnnCreateConvolutionDescriptor(&p->cd);
    if (!s) s = cudnnSetConvolutionNdDescriptor(p->cd, key->rank - 2, key->pad, key->stride, key->dil,
                                                CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT);
    if (!s) s = cudnnSetConvolutionGroupCount(p->cd, key->group);
    bool strict = key->dtype == AMP_DT_FLOAT && !key->tf32;
    if (!s) s = cudnnSetConvolutionMathType(p->cd, strict ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH);
    int xdims[MAXD]; /* the forward convolution of Y must give X's shape */
    if (!s) s = cudnnGetConvolutionNdForwardOutputDim(p->cd, p->yd, p->wd, key->rank, xdims);
    if (!s && memcmp(xdims, key->x, (size_t)key->rank * sizeof *xdims)) s = CUDNN_STATUS_BAD_PARAM;
    cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    int n = 0;
    if (!s) { /* every algorithm timed once, fastest first; the heuristic's order when that fails */
        what = "choosing the algorithm";
        s = cudnnFindConvolutionBackwardDataAlgorithmEx(c->dnn, p->wd, io[1], p->xd, io[0], p->cd, p->yd, io[2],
                                                        CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, perf, c->workspace,
                                                        c->workspace_bytes);
        if (s) s = cudnnGetConvolutionBackwardDataAlgorithm_v7(c->dnn, p->wd, p->xd, p->cd, p->yd,
                                                               CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, perf);
    }
    int pick = -1;
    for (int i = 0; !s && i < n && pick < 0; i++) {
        bool tc = perf[i].mathType == CUDNN_TENSOR_OP_MATH || perf[i].mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
        if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= c->workspace_bytes && !(strict && tc)) pick = i;
    }
    if (!s && pick < 0) s = CUDNN_STATUS_NOT_SUPPORTED;
    if (!s) {
        p->algo = perf[pick].algo;
        p->ws = perf[pick].memory;
        s = cudnnSetConvolutionMathType(p->cd, perf[pick].mathType);
    }
    if (s) {
        plan_free(p);
        return amp_cuda_check_dnn_geometry(k, s, what);
    }
    *out = p;
    return AMP_OK;
}

static AmpCode get_plan(AmpKernelCtx *k, const TKey *key, void *const *io, TPlan **p) {
    AmpCudaCtx *c = amp_cuda_ctx(k);
    if ((*p = amp_cuda_cache_get(c, AMP_CUDA_CACHE_CONVT, key, sizeof *key))) return AMP_OK;
    AmpCode rc = make_plan(k, key, io, p);
    if (rc) return rc;
    if (!amp_cuda_cache_put(c, AMP_CUDA_CACHE_CONVT, key, sizeof *key, *p, plan_free)) {
        plan_free(*p);
        return amp_fail(k->st, AMP_ERR_INTERNAL, "out of memory");
    }
    return AMP_OK;
}

/* The key of a geometry cuDNN takes (refusal checked); 1-D as 2-D. */
static void fill_key(TKey *key, const AmpBuf *x, const AmpBuf *w, const AmpBuf *y, const AmpConvGeom *g) {
    int nsp = g->nsp, extra = nsp == 1;
    key->rank = nsp + 2 + extra;
    for (int i = 0; i < nsp; i++) {
        key->pad[i] = (int)g->pad0[i];
        key->stride[i] = (int)g->stride[i];
        key->dil[i] = (int)g->dil[i];
    }
    if (extra) key->pad[1] = 0, key->stride[1] = 1, key->dil[1] = 1;
    for (int i = 0; i < key->rank; i++) {
        key->x[i] = i < x->rank ? (int)x->dims[i] : 1;
        key->w[i] = i < w->rank ? (int)w->dims[i] : 1;
        key->y[i] = i < y->rank ? (int)y->dims[i] : 1;
    }
}

/* Y (N, M, out...) from X (N, C, in...), W (C, M / group, k...), B (M); checks as the CPU's. */
AmpCode amp_cuda_conv_transpose(AmpKernelCtx *k) {
    const AmpBuf *x = k->n_in > 0 ? k->in[0] : NULL, *w = k->n_in > 1 ? k->in[1] : NULL;
    const AmpBuf *b = k->n_in > 2 ? k->in[2] : NULL;
    if (!x || !w) return amp_kernel_fail(k, AMP_ERR_INPUT, "needs inputs X and W");
    int dt = x->dtype;
    if (w->dtype != dt || (b && b->dtype != dt) || !amp_cuda_is_float(dt)) return amp_kernel_bad_dtype(k, dt);
    const AmpConvAttrs *at;
    int64_t M;
    AmpCode rc = amp_conv_check(k, x, w, b, true, &at, &M);
    if (rc) return rc;
    int nsp = x->rank - 2;
    int64_t group = at->group;
    int64_t kern[AMP_MAX_SPATIAL];
    AmpConvGeom g;
    rc = amp_conv_kernel_from_w(k, at, w, nsp, kern);
    if (rc || (rc = amp_convtranspose_geom(k, at, x, kern, &g))) return rc;
    AmpBuf *y;
    if ((rc = amp_conv_out(k, dt, x->dims[0], M, &g, &y)) || !y) return rc;
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
    TPlan *p;
    void *io[3] = {(void *)x->data, (void *)w->data, y->data};
    if ((rc = get_plan(k, &key, io, &p))) return rc;
    AmpCudaCtx *c = amp_cuda_ctx(k);
    float one = 1.f, zero = 0.f;
    cudnnStatus_t s = cudnnConvolutionBackwardData(c->dnn, &one, p->wd, w->data, p->xd, x->data, p->cd, p->algo,
                                                   c->workspace, p->ws, &zero, p->yd, y->data);
    if (!s && b) s = cudnnAddTensor(c->dnn, &one, p->bd, b->data, &one, p->yd, y->data);
    return amp_cuda_check_dnn(k, s, "the transposed convolution");
}
