/* Helpers every CPU kernel family uses: sizes, float32 views of 16-bit buffers,
 * broadcasting, integer reads, and the kernel registry (op -> kernel). */
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
