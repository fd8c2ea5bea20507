/* CPU kernels: Cast, Constant, ConstantOfShape, Shape, Range, OneHot, Identity.
 * Placeholder table until the family's kernels are written. */
#include "kernels.h"

const AmpCpuKernelEntry amp_cpu_tensor_kernels[] = {
    {AMP_OP_UNKNOWN, NULL},
};
