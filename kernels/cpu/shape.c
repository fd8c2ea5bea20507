/* CPU kernels: data movement: Reshape, Transpose, Concat, Split, Slice, Gather, ....
 * Placeholder table until the family's kernels are written. */
#include "kernels.h"

const AmpCpuKernelEntry amp_cpu_shape_kernels[] = {
    {AMP_OP_UNKNOWN, NULL},
};
