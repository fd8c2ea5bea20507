/* Helpers every CPU kernel family uses: float32 views of 16-bit buffers, the dtype
 * error, and the kernel lookup (op -> kernel, from table.c). */
#include <stdlib.h>
#include <string.h>

#include "ir/half.h"
#include "kernels/cpu/kernels.h"

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
    return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "the CPU kernel does not take %s", amp_dtype_name(dtype));
}

void amp_buf_set_i64(AmpBuf *b, uint64_t i, int64_t v) {
    switch (b->dtype) {
    case AMP_DT_INT64: ((int64_t *)b->data)[i] = v; break;
    case AMP_DT_INT32: ((int32_t *)b->data)[i] = (int32_t)v; break;
    case AMP_DT_INT16: ((int16_t *)b->data)[i] = (int16_t)v; break;
    case AMP_DT_INT8: ((int8_t *)b->data)[i] = (int8_t)v; break;
    case AMP_DT_UINT64: ((uint64_t *)b->data)[i] = (uint64_t)v; break;
    case AMP_DT_UINT32: ((uint32_t *)b->data)[i] = (uint32_t)v; break;
    case AMP_DT_UINT16: ((uint16_t *)b->data)[i] = (uint16_t)v; break;
    case AMP_DT_UINT8: ((uint8_t *)b->data)[i] = (uint8_t)v; break;
    case AMP_DT_BOOL: ((uint8_t *)b->data)[i] = v != 0; break;
    default: break;
    }
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
