/* Helpers every CPU kernel family uses: sizes, float32 views of 16-bit buffers,
 * broadcasting, integer reads, and the kernel registry (op -> kernel). */
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "kernels.h"

uint64_t amp_shape_nelem(int rank, const int64_t *dims) {
    uint64_t n = 1;
    for (int i = 0; i < rank; i++) n *= (uint64_t)dims[i];
    return n;
}

size_t amp_buf_bytes(const AmpBuf *b) {
    size_t n = 0;
    amp_tensor_expected_bytes(b->dtype, b->nelem, &n);
    return n;
}

bool amp_is_f32_family(int dtype) {
    return dtype == AMP_DT_FLOAT || dtype == AMP_DT_FLOAT16 || dtype == AMP_DT_BFLOAT16;
}

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

bool amp_broadcast_shape(int ra, const int64_t *a, int rb, const int64_t *b, int *rank, int64_t *out) {
    int r = ra > rb ? ra : rb;
    if (r > AMP_MAX_RANK) return false;
    for (int i = 0; i < r; i++) {
        int64_t da = i < r - ra ? 1 : a[i - (r - ra)];
        int64_t db = i < r - rb ? 1 : b[i - (r - rb)];
        if (da != db && da != 1 && db != 1) return false;
        out[i] = da == 1 ? db : da;
    }
    *rank = r;
    return true;
}

void amp_broadcast_strides(int rin, const int64_t *din, int rout, const int64_t *dout, int64_t *strides) {
    int64_t s = 1;
    for (int i = rout - 1; i >= 0; i--) {
        int j = i - (rout - rin);
        if (j < 0) {
            strides[i] = 0;
            continue;
        }
        strides[i] = din[j] == 1 && dout[i] != 1 ? 0 : s;
        s *= din[j];
    }
}

int64_t amp_buf_get_i64(const AmpBuf *b, uint64_t i) {
    switch (b->dtype) {
    case AMP_DT_INT64: return ((const int64_t *)b->data)[i];
    case AMP_DT_INT32: return ((const int32_t *)b->data)[i];
    case AMP_DT_INT16: return ((const int16_t *)b->data)[i];
    case AMP_DT_INT8: return ((const int8_t *)b->data)[i];
    case AMP_DT_UINT64: return (int64_t)((const uint64_t *)b->data)[i];
    case AMP_DT_UINT32: return ((const uint32_t *)b->data)[i];
    case AMP_DT_UINT16: return ((const uint16_t *)b->data)[i];
    case AMP_DT_UINT8:
    case AMP_DT_BOOL: return ((const uint8_t *)b->data)[i];
    default: return 0;
    }
}

bool amp_norm_axis(int64_t axis, int rank, int *out) {
    if (axis < -rank || axis >= rank) return false;
    *out = (int)(axis < 0 ? axis + rank : axis);
    return true;
}

AmpCode amp_kernel_bad_dtype(AmpKernelCtx *k, int dtype) {
    return amp_fail(k->st, AMP_ERR_UNSUPPORTED, "node '%s' (%s): the CPU kernel does not take %s",
                    k->node->name ? k->node->name : "", k->node->op_type, amp_dtype_name(dtype));
}

/* ---- registry -------------------------------------------------------------------- */

static const AmpCpuKernelEntry *const FAMILIES[] = {
    amp_cpu_elementwise_kernels, amp_cpu_gemm_kernels,  amp_cpu_conv_kernels,  amp_cpu_reduce_kernels,
    amp_cpu_norm_kernels,        amp_cpu_train_kernels, amp_cpu_shape_kernels, amp_cpu_tensor_kernels,
    amp_cpu_rnn_kernels,         amp_cpu_attention_kernels,
};

AmpKernelFn amp_cpu_kernel(AmpOpId op) {
    /* A few hundred entries at most, scanned once per node at prepare time. */
    for (size_t f = 0; f < sizeof FAMILIES / sizeof *FAMILIES; f++)
        for (const AmpCpuKernelEntry *e = FAMILIES[f]; e->run; e++)
            if (e->op == op) return e->run;
    return NULL;
}
