/* Internals shared by the gemm family's files (gemm.c, einsum.c, and ms_train.c's
 * FusedGemm): the prepared-attributes check and Gemm into a placed output. Gemm's
 * attributes are every backend's (ops/gemm_attrs.h). */
#ifndef AMP_CPU_GEMM_IMPL_H
#define AMP_CPU_GEMM_IMPL_H

#include "kernels/cpu/kernels.h"
#include "ops/gemm_attrs.h"

/* k->attrs, or NULL with AMP_ERR_INTERNAL in k->st when the node was not prepared. */
const void *amp_gemm_prepared(AmpKernelCtx *k);
/* Gemm of k's inputs (A, B, C?) with attributes a into y, an output already placed: of
 * the output's dtype and shape, or float32 standing in for a 16-bit output (the caller
 * rounds it; FusedGemm applies its activation first). Checks the inputs as Gemm does. */
AmpCode amp_gemm_into(AmpKernelCtx *k, const AmpGemmAttrs *a, AmpBuf *y);

#endif
