/* CPU kernel of ai.ampc SubScaled (runtime/fuse_update.c): Y = A - S * B, float32, S one
 * element, A and B (and Y) of one shape; each product rounded to float32 before the
 * difference, as the Mul and Sub it stands for round them (the build contracts no
 * floating-point expressions: ISO C, -ffp-contract=off). Y may be A (an update in place). */
#include <string.h>

#include "ir/parallel.h"
#include "kernels/cpu/kernels.h"
#include "ops/ew_common.h"
#include "ops/geom.h"

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
    AmpSubScaledGeom own;
    const AmpSubScaledGeom *g; /* amp_sub_scaled_geom (ops/ew_common.h): the inputs' shapes, Y checked */
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&g);
    if (rc) return rc;
    const AmpBuf *a = k->in[0], *s = k->in[1], *b = k->in[2];
    if (a->dtype != AMP_DT_FLOAT || s->dtype != AMP_DT_FLOAT || b->dtype != AMP_DT_FLOAT)
        return amp_kernel_bad_dtype(k, a->dtype != AMP_DT_FLOAT ? a->dtype : s->dtype != AMP_DT_FLOAT ? s->dtype : b->dtype);
    AmpBuf *y;
    if ((rc = amp_kernel_outputs(k, 1, &y)) || !y) return rc;
    Job j = {.A = a->data, .B = b->data, .s = *(const float *)s->data, .Y = y->data};
    amp_parallel_for((int64_t)g->n, 1 << 15, 1, slice, &j); /* sliced over the CPU's threads */
    return AMP_OK;
}
