/* Helpers every CPU kernel family uses: float32 views of 16-bit buffers and integer
 * stores (the output and dtype checks are every backend's: ops/kernel_out.c). */
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
