/* MaxPool with its Indices output on CUDA (launcher in grad_ops.cu): cuDNN's pooling has
 * no argmax, so a node that lists Indices (the forward `ampc grad`'s MaxPool backward
 * reads) runs this kernel, which computes Y and Indices together as kernels/cpu/pool.c
 * does. The window geometry is every backend's (ops/conv_geom.h: amp_conv_geom_attrs,
 * from amp_conv_prepare's attributes), so ceil_mode, auto_pad, dilations and storage_order read alike. */
#include <string.h>

#include "ops/conv_geom.h"
#include "ops/geom.h"
#include "kernels/cuda/grad_ops.h"

_Static_assert(AMP_CUDA_POOL_SPATIAL == AMP_MAX_SPATIAL, "grad_ops.h's spatial rank is AMP_MAX_SPATIAL");

bool amp_cuda_pool_wants_indices(const AmpNode *n) {
    return n->n_outputs > 1 && n->outputs[1];
}

AmpCode amp_cuda_maxpool_plan(AmpKernelCtx *k, const AmpBuf *x, AmpCudaPoolIdx *p, int64_t *ydims) {
    AmpWindowGeom own;
    const AmpWindowGeom *wg; /* amp_pool_geom (ops/conv_geom.h): the window, Y and Indices checked */
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&wg);
    if (rc) return rc;
    const AmpConvAttrs *a = k->attrs;
    const AmpConvGeom g = wg->g;
    int nsp = g.nsp;
    memset(p, 0, sizeof *p);
    p->nsp = nsp;
    p->col_major = a->col_major;
    p->planes = (uint64_t)x->dims[0] * (uint64_t)x->dims[1];
    ydims[0] = x->dims[0], ydims[1] = x->dims[1];
    for (int d = 0; d < nsp; d++) {
        p->in[d] = g.in[d], p->out[d] = g.out[d], p->kern[d] = g.kern[d];
        p->stride[d] = g.stride[d], p->dil[d] = g.dil[d], p->pad0[d] = g.pad0[d];
        ydims[d + 2] = g.out[d];
    }
    return AMP_OK;
}

AmpCode amp_cuda_maxpool_with_indices(AmpKernelCtx *k) {
    const AmpBuf *x = k->n_in > 0 ? k->in[0] : NULL;
    if (!x) return amp_kernel_fail(k, AMP_ERR_INPUT, "needs input X");
    if (!amp_cuda_is_float(x->dtype)) return amp_kernel_bad_dtype(k, x->dtype);
    AmpCudaPoolIdx p;
    int64_t ydims[AMP_MAX_RANK];
    AmpCode rc = amp_cuda_maxpool_plan(k, x, &p, ydims);
    if (rc) return rc;
    AmpBuf *out[2];
    if ((rc = amp_kernel_outputs(k, 2, out))) return rc;
    AmpBuf *y = out[0], *yi = out[1]; /* checked by amp_pool_geom */
    if (!yi) return amp_kernel_fail(k, AMP_ERR_INTERNAL, "the Indices output is not placed");
    if (!yi->nelem) return AMP_OK;
    return amp_cuda_check(k, amp_cuda_maxpool_indices(x->dtype, y ? y->data : NULL, yi->data, x->data, &p,
                                                      amp_cuda_ctx(k)->stream),
                          "MaxPool");
}

bool amp_cuda_supports_maxpool_indices(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    return amp_cuda_supports_float(n, opset, in_dtypes);
}
