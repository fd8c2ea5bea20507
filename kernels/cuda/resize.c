/* Resize on CUDA, opsets 10 to 19: the node-level kernel. The small inputs (scales or
 * sizes, roi) are read back to the host (one wait on the stream, counted as
 * amp_cuda_read_ints' are); the code both backends share then computes the output
 * geometry and every axis' source indices and weights (ops/resize_geom.h), so both backends
 * agree on shapes and samples: every mode (nearest with each nearest_mode, linear,
 * cubic), every coordinate_transformation_mode (tf_crop_and_resize too), scales or sizes,
 * axes and keep_aspect_ratio_policy. The tables go to the session's workspace (one
 * host-to-device copy on the stream) and resize.cu's kernel reads them. Antialiased
 * downsampling, which the CPU does not do either, is AMP_ERR_UNSUPPORTED. */
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/resize.h"
#include "ops/cast_engine.h" /* amp_sh_convert */
#include "ops/sh_common.h"   /* amp_sh_out, amp_sh_esize */

#define SMALL (2 * AMP_MAX_RANK) /* the most values roi, scales or sizes may hold */

size_t amp_cuda_resize_layout(int rank, const int64_t *xdims, const int64_t *out, const int *taps,
                              size_t max_entries, AmpCudaResize *p) {
    if (rank < 0 || rank > AMP_CUDA_RESIZE_RANK) return 0;
    p->rank = rank;
    uint64_t total = 0, stride = 1;
    for (int d = rank - 1; d >= 0; d--) {
        if (xdims[d] > INT32_MAX || out[d] < 0) return 0; /* source indices are int32 */
        p->stride[d] = (int64_t)stride;
        stride *= (uint64_t)xdims[d];
    }
    for (int d = 0; d < rank; d++) {
        p->out[d] = out[d];
        p->taps[d] = taps[d];
        p->tab[d] = (int64_t)total;
        total += (uint64_t)out[d] * (uint64_t)taps[d];
        if (total > max_entries) return 0;
    }
    return total ? (size_t)total : 1; /* rank 0: one (unused) entry */
}

/* Copies the small inputs roi, scales and sizes (each NULL when absent) into host memory
 * (hb: the same buffers with data in host, in vals) with one wait on the stream. */
static AmpCode read_back(AmpKernelCtx *k, const AmpBuf *const *b, AmpBuf *hb, int64_t (*vals)[SMALL]) {
    AmpCudaCtx *c = amp_cuda_ctx(k);
    int err = 0;
    bool any = false;
    for (int i = 0; i < 3 && !err; i++) {
        if (!b[i]) continue;
        size_t bytes = amp_buf_bytes(b[i]);
        if (b[i]->nelem > SMALL || !bytes || bytes > sizeof vals[i])
            return amp_kernel_fail(k, AMP_ERR_INPUT, "input %s has %llu values of %s (at most %d numbers)",
                                   i == 0 ? "roi" : i == 1 ? "scales" : "sizes", (unsigned long long)b[i]->nelem,
                                   amp_dtype_name(b[i]->dtype), SMALL);
        hb[i] = *b[i];
        hb[i].data = vals[i];
        err = cudaMemcpyAsync(vals[i], b[i]->data, bytes, cudaMemcpyDeviceToHost, (cudaStream_t)c->stream);
        any = true;
    }
    if (!err && any) {
        err = cudaStreamSynchronize((cudaStream_t)c->stream);
        c->syncs++;
    }
    return amp_cuda_check(k, err, "reading Resize's scales, sizes or roi back");
}

char *amp_cuda_resize_pack(int rank, const int64_t *xdims, const int64_t *out, const AmpResizeAxis *ax,
                           bool interp, size_t max_entries, AmpCudaResize *p, size_t *bytes, size_t *woff) {
    int taps[AMP_CUDA_RESIZE_RANK];
    *bytes = 0;
    for (int d = 0; d < rank && d < AMP_CUDA_RESIZE_RANK; d++) taps[d] = ax[d].taps;
    size_t n = amp_cuda_resize_layout(rank, xdims, out, taps, max_entries, p);
    if (!n) return NULL;
    *woff = (n * sizeof(int32_t) + 255) & ~(size_t)255;
    size_t total = interp ? *woff + n * sizeof(float) : n * sizeof(int32_t);
    char *h = calloc(1, total);
    if (!h) {
        *bytes = 1;
        return NULL;
    }
    int32_t *hi = (int32_t *)h;
    float *hw = (float *)(h + *woff);
    for (int d = 0; d < rank; d++)
        for (int64_t e = 0; e < out[d] * ax[d].taps; e++) {
            hi[p->tab[d] + e] = (int32_t)ax[d].idx[e]; /* in [-1, xdims[d]): the layout checked int32 */
            if (interp) hw[p->tab[d] + e] = (float)ax[d].w[e];
        }
    *bytes = total;
    return h;
}

/* The tables into the workspace and the launch; ax and g from the CPU's code. */
static AmpCode launch(AmpKernelCtx *k, const AmpResizeAttrs *ra, const AmpBuf *x, AmpBuf *y, const AmpResizeGeom *g,
                      const AmpResizeAxis *ax, size_t es) {
    AmpCudaCtx *c = amp_cuda_ctx(k);
    AmpCudaResize p;
    memset(&p, 0, sizeof p);
    bool interp = ra->mode != AMP_RS_NEAREST;
    size_t bytes, woff = 0;
    char *h = amp_cuda_resize_pack(x->rank, x->dims, g->out, ax, interp, c->workspace_bytes / 16, &p, &bytes, &woff);
    if (!h && bytes) return amp_fail(k->st, AMP_ERR_INTERNAL, "out of memory");
    if (!h) return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "Resize's tables do not fit the CUDA workspace");
    p.interp = interp;
    p.esize = (int)es;
    p.fkind = x->dtype == AMP_DT_FLOAT16 ? 1 : x->dtype == AMP_DT_BFLOAT16 ? 2 : 0;
    p.extrap = ra->extrap;
    AmpCode rc = AMP_OK;
    if (!interp && ra->ct == AMP_RS_CT_CROP && ra->extrap != 0 && amp_sh_convertible(x->dtype))
        rc = amp_sh_convert(k, &ra->extrap, AMP_DT_FLOAT, &p.ev, x->dtype, 1); /* as the CPU's bytes */
    /* from pageable memory: the call returns once it has read h */
    int err = rc ? 0 : cudaMemcpyAsync(c->workspace, h, bytes, cudaMemcpyHostToDevice, (cudaStream_t)c->stream);
    free(h);
    if (rc || (rc = amp_cuda_check(k, err, "copying Resize's tables"))) return rc;
    const int32_t *di = c->workspace;
    const float *dw = interp ? (const float *)((const char *)c->workspace + woff) : NULL;
    return amp_cuda_check(k, amp_cuda_resize_launch(y->data, x->data, di, dw, &p, y->nelem, c->stream), "Resize");
}

AmpCode amp_cuda_resize(AmpKernelCtx *k) {
    const AmpResizeAttrs *ra = k->attrs;
    const AmpBuf *x = k->n_in > 0 ? k->in[0] : NULL;
    if (!ra) return amp_kernel_fail(k, AMP_ERR_INTERNAL, "the node's attributes were not prepared");
    if (!x) return amp_kernel_fail(k, AMP_ERR_INPUT, "no input X");
    int dt = x->dtype;
    if (ra->mode != AMP_RS_NEAREST && !amp_cuda_is_float(dt)) return amp_kernel_bad_dtype(k, dt);
    size_t es = amp_sh_esize(k, dt);
    if (!es) return k->st->code;
    if (es != 1 && es != 2 && es != 4 && es != 8) return amp_kernel_bad_dtype(k, dt);
    if (x->rank > AMP_CUDA_RESIZE_RANK) return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "rank over 8");
    const AmpBuf *dev[3];
    AmpCode rc = amp_resize_inputs(k, &dev[0], &dev[1], &dev[2]);
    if (rc) return rc;
    if (ra->ct != AMP_RS_CT_CROP) dev[0] = NULL; /* roi is read only to crop */
    AmpBuf host[3];
    int64_t vals[3][SMALL];
    if ((rc = read_back(k, dev, host, vals))) return rc;
    AmpResizeGeom g;
    rc = amp_resize_geom(k, ra, x, dev[0] ? &host[0] : NULL, dev[1] ? &host[1] : NULL, dev[2] ? &host[2] : NULL, &g);
    AmpBuf *y;
    if (rc || (rc = amp_sh_out(k, dt, x->rank, g.out, &y)) || !y) return rc;
    if (y->nelem == 0) return AMP_OK;
    AmpResizeAxis ax[AMP_MAX_RANK];
    void *mem;
    if ((rc = amp_resize_tables(k, ra, x, &g, ax, &mem))) return rc;
    rc = launch(k, ra, x, y, &g, ax, es);
    free(mem);
    return rc;
}

/* X of a float dtype in every mode; nearest also moves int8, uint8, int32, int64 and bool. */
bool amp_cuda_supports_resize(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    if (opset < 10 || n->n_inputs < 1 || !n->inputs[0]) return false;
    int dt = in_dtypes[0];
    const char *mode = amp_node_attr_string(n, "mode", "nearest");
    if (amp_cuda_is_float(dt)) return true;
    bool moves = dt == AMP_DT_INT8 || dt == AMP_DT_UINT8 || dt == AMP_DT_INT32 || dt == AMP_DT_INT64 || dt == AMP_DT_BOOL;
    return moves && strcmp(mode, "nearest") == 0;
}
