/* Internals shared by the gemm family's files (gemm.c, einsum.c): the error helper and
 * the kernels defined outside gemm.c. */
#ifndef AMP_CPU_GEMM_IMPL_H
#define AMP_CPU_GEMM_IMPL_H

#include "kernels.h"

/* amp_fail with "node 'NAME' (OP): " in front of the message. */
AmpCode amp_gemm_fail(AmpKernelCtx *k, AmpCode code, const char *fmt, ...) AMP_PRINTF(3, 4);

AmpCode amp_cpu_einsum(AmpKernelCtx *k); /* einsum.c */
/* Gemm (gemm.c); com.microsoft FusedGemm (attention family, ms_train.c) runs it. */
AmpCode amp_cpu_gemm(AmpKernelCtx *k);

#endif
