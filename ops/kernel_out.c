/* The output and dtype checks of every backend's kernels, and the prepare functions'
 * hand-over (ops/kernel_out.h). */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ops/kernel_out.h"

AmpCode amp_kernel_bad_dtype(AmpKernelCtx *k, int dtype) {
    return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "the CPU kernel does not take %s", amp_dtype_name(dtype));
}

AmpCode amp_kernel_outputs(AmpKernelCtx *k, int n, AmpBuf **out) {
    for (int i = 0; i < n; i++) {
        out[i] = NULL;
        if (i >= k->n_out || i >= k->node->n_outputs || !k->node->outputs[i]) continue;
        if (!k->out || !k->out[i].data)
            return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED,
                                   "ampc cannot size output %d from these inputs (its shape function does not "
                                   "take them)", i);
        out[i] = &k->out[i];
    }
    return AMP_OK;
}

AmpCode amp_kernel_check_out(AmpKernelCtx *k, const AmpBuf *y, int dtype, int rank, const int64_t *dims) {
    bool same = y->dtype == dtype && y->rank == rank;
    for (int i = 0; same && i < rank; i++) same = y->dims[i] == dims[i];
    if (same) return AMP_OK;
    AmpBuf want = {.dtype = dtype, .rank = rank < 0 ? 0 : rank > AMP_MAX_RANK ? AMP_MAX_RANK : rank};
    for (int i = 0; i < want.rank; i++) want.dims[i] = dims[i];
    char got[160], exp[160];
    amp_buf_describe(y, got, sizeof got);
    amp_buf_describe(&want, exp, sizeof exp);
    return amp_kernel_fail(k, AMP_ERR_INTERNAL, "the output placed is %s, the kernel expects %s", got, exp);
}

AmpCode amp_geom_check(AmpKernelCtx *k, int i, int dtype, int rank, const int64_t *dims) {
    if (i >= k->n_out || i >= k->node->n_outputs || !k->node->outputs[i] || !k->out || !k->out[i].data) return AMP_OK;
    return amp_kernel_check_out(k, &k->out[i], dtype, rank, dims);
}

AmpCode amp_prep_out(const void *p, size_t size, void **attrs, AmpStatus *st) {
    void *q = malloc(size);
    if (!q) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    memcpy(q, p, size);
    *attrs = q;
    return AMP_OK;
}
