/* Internals shared by the gemm family's files (gemm.c, einsum.c, and ms_train.c's
 * FusedGemm): the prepared-attributes check and Gemm into a placed output. Gemm's
 * attributes are every backend's (ops/gemm_attrs.h). */
#ifndef AMP_CPU_GEMM_IMPL_H
#define AMP_CPU_GEMM_IMPL_H

#include "kernels/cpu/kernels.h"
#include "ops/gemm_attrs.h"
#include "ops/geom.h" /* amp_kernel_geom */

/* k->attrs, or NULL with AMP_ERR_INTERNAL in k->st when the node was not prepared. */
const void *amp_gemm_prepared(AmpKernelCtx *k);
/* Gemm of k's inputs (A, B, C?) with attributes a and geometry g (amp_gemm_geom, which
 * checked the inputs and the placed output) into y: the placed output, or a float32
 * stand-in of its shape for a 16-bit one (the caller rounds it; FusedGemm applies its
 * activation first). */
AmpCode amp_gemm_into(AmpKernelCtx *k, const AmpGemmAttrs *a, const AmpGemmGeom *g, AmpBuf *y);

#endif
