/* CPU kernels: MatMul, Gemm, Einsum.
 * Placeholder table until the family's kernels are written. */
#include "kernels.h"

const AmpCpuKernelEntry amp_cpu_gemm_kernels[] = {
    {AMP_OP_UNKNOWN, NULL},
};
