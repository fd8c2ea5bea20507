/* Helpers every CPU kernel family uses: float32 views of 16-bit buffers, the dtype
 * error, and the kernel lookup (op -> kernel, from table.c). */
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "kernels.h"

const float *amp_buf_f32_in(const AmpBuf *b, float **tmp) {
    *tmp = NULL;
    if (b->dtype == AMP_DT_FLOAT) return b->data;
    float *f = malloc((b->nelem ? b->nelem : 1) * sizeof *f);
    if (!f) return NULL;
    if (b->dtype == AMP_DT_FLOAT16) amp_f16_to_f32_n(f, b->data, b->nelem);
    else amp_bf16_to_f32_n(f, b->data, b->nelem);
    *tmp = f;
    return f;
}

float *amp_buf_f32_out(AmpBuf *b, float **tmp) {
    *tmp = NULL;
    if (b->dtype == AMP_DT_FLOAT) return b->data;
    *tmp = malloc((b->nelem ? b->nelem : 1) * sizeof **tmp);
    return *tmp;
}

void amp_buf_f32_commit(AmpBuf *b, float *tmp) {
    if (!tmp) return;
    if (b->dtype == AMP_DT_FLOAT16) amp_f32_to_f16_n(b->data, tmp, b->nelem);
    else if (b->dtype == AMP_DT_BFLOAT16) amp_f32_to_bf16_n(b->data, tmp, b->nelem);
    free(tmp);
}

AmpCode amp_kernel_bad_dtype(AmpKernelCtx *k, int dtype) {
    return amp_fail(k->st, AMP_ERR_UNSUPPORTED, "node '%s' (%s): the CPU kernel does not take %s",
                    k->node->name ? k->node->name : "", k->node->op_type, amp_dtype_name(dtype));
}

AmpCode amp_kernel_outputs(AmpKernelCtx *k, int n, AmpBuf **out) {
    for (int i = 0; i < n; i++) {
        out[i] = NULL;
        if (i >= k->n_out || i >= k->node->n_outputs || !k->node->outputs[i]) continue;
        if (!k->out || !k->out[i].data)
            return amp_fail(k->st, AMP_ERR_UNSUPPORTED,
                            "node '%s' (%s): ampc cannot size output %d from these inputs (its shape function "
                            "does not take them)",
                            k->node->name ? k->node->name : "", k->node->op_type, i);
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
    return amp_fail(k->st, AMP_ERR_INTERNAL, "node '%s' (%s): the output placed is %s, the kernel expects %s",
                    k->node->name ? k->node->name : "", k->node->op_type, got, exp);
}

AmpKernelFn amp_cpu_kernel(AmpOpId op) {
    return (unsigned)op < AMP_OP__COUNT ? amp_cpu_kernels[op] : NULL;
}

AmpKernelPrepareFn amp_cpu_kernel_prepare(AmpOpId op) {
    return (unsigned)op < AMP_OP__COUNT ? amp_cpu_kernel_prepares[op] : NULL;
}
