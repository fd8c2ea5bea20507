/* What the CPU and CUDA kernels of the fused nodes (kernels/cpu/fused.c,
 * kernels/cuda/fused.c) share beyond the interpreter (ops/fused_eval.h): FusedElementwise's
 * program parsed and checked once at prepare, and the checks of a run's inputs and outputs
 * (ops/fused_check.c), so both backends take and refuse the same things. */
#ifndef AMP_OPS_FUSED_CHECK_H
#define AMP_OPS_FUSED_CHECK_H

#include <stdbool.h>

#include "ir/fused_prog.h"
#include "ir/ir.h"
#include "ir/kernel.h"
#include "ir/tensor.h"

/* FusedElementwise's prepare function (AmpKernelPrepareFn) on every backend: the program,
 * its operands' classes checked, into an AmpFusedProg. */
AmpCode amp_fused_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);

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
