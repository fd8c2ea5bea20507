/* CPU kernel of ai.ampc SubScaled (runtime/fuse_update.c): Y = A - S * B, float32, S one
 * element, A and B (and Y) of one shape; each product rounded to float32 before the
 * difference, as the Mul and Sub it stands for round them (the build contracts no
 * floating-point expressions: ISO C, -ffp-contract=off). Y may be A (an update in place). */
#include <string.h>

#include "ir/parallel.h"
#include "kernels/cpu/kernels.h"

typedef struct Job {
    const float *A, *B;
    float s;
    float *Y;
} Job;

static void slice(void *ctx, int64_t from, int64_t to) {
    const Job *j = ctx;
    for (int64_t i = from; i < to; i++) {
        float t = j->s * j->B[i];
        j->Y[i] = j->A[i] - t;
    }
}

AmpCode amp_cpu_sub_scaled(AmpKernelCtx *k) {
    const AmpBuf *a = k->n_in > 0 ? k->in[0] : NULL, *s = k->n_in > 1 ? k->in[1] : NULL;
    const AmpBuf *b = k->n_in > 2 ? k->in[2] : NULL;
    if (!a || !s || !b) return amp_kernel_fail(k, AMP_ERR_INPUT, "needs inputs A, S and B");
    if (a->dtype != AMP_DT_FLOAT || s->dtype != AMP_DT_FLOAT || b->dtype != AMP_DT_FLOAT)
        return amp_kernel_bad_dtype(k, a->dtype != AMP_DT_FLOAT ? a->dtype : s->dtype != AMP_DT_FLOAT ? s->dtype : b->dtype);
    if (s->nelem != 1 || !amp_buf_same_shape(a, b))
        return amp_kernel_fail(k, AMP_ERR_INPUT, "S must hold one element and B have A's shape");
    AmpBuf *y;
    AmpCode rc = amp_kernel_outputs(k, 1, &y);
    if (rc || !y || (rc = amp_kernel_check_out(k, y, AMP_DT_FLOAT, a->rank, a->dims))) return rc;
    Job j = {.A = a->data, .B = b->data, .s = *(const float *)s->data, .Y = y->data};
    amp_parallel_for((int64_t)y->nelem, 1 << 15, 1, slice, &j); /* sliced over the CPU's threads */
    return AMP_OK;
}
