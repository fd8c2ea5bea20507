/* CPU kernels: Conv, ConvTranspose, pooling.
 * Placeholder table until the family's kernels are written. */
#include "kernels.h"

const AmpCpuKernelEntry amp_cpu_conv_kernels[] = {
    {AMP_OP_UNKNOWN, NULL},
};
