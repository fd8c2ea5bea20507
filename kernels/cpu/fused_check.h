/* What the CPU and CUDA kernels of the fused nodes share beyond fused_impl.h: the checks
 * of a run's inputs and outputs (kernels/cpu/fused.c), so both refuse the same things. */
#ifndef AMP_CPU_FUSED_CHECK_H
#define AMP_CPU_FUSED_CHECK_H

#include "ir/fused_prog.h"
#include "kernels/cpu/kernels.h"

/* FusedElementwise: every input present, of its dtype, holding the shape input's element
 * count or one; out[0..n_out) the placed outputs (NULL where not wanted), of their dtypes
 * and the shape input's shape. */
AmpCode amp_fused_check(AmpKernelCtx *k, const AmpFusedProg *p, AmpBuf **out);

/* Whether b's elements, repeated, make shape's (b is shape's trailing dims, leading 1s
 * aside): element e of shape reads element e % |b| of b. */
bool amp_fused_repeats(const AmpBuf *b, const AmpBuf *shape);

/* UnscaleCheck: (inv_scale, found_before?, X[N]) checked, out[0..N] (G[N], found) placed
 * with their shapes; out must hold N + 1 entries. */
AmpCode amp_unscale_check_io(AmpKernelCtx *k, AmpBuf **out);

#endif
