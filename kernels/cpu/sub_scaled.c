/* CPU kernel of ai.ampc SubScaled (runtime/fuse_update.c): Y = A - S * B, float32, S one
 * element, A and B (and Y) of one shape; each product rounded to float32 before the
 * difference, as the Mul and Sub it stands for round them (the build contracts no
 * floating-point expressions: ISO C, -ffp-contract=off). Y may be A (an update in place). */
#include <string.h>

#include "kernels/cpu/kernels.h"
#include "ops/ew_common.h"
#include "ops/geom.h"

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
    const float *A = a->data, *B = b->data, sv = *(const float *)s->data;
    float *Y = y->data;
    for (uint64_t i = 0; i < g->n; i++) {
        float t = sv * B[i];
        Y[i] = A[i] - t;
    }
    return AMP_OK;
}
