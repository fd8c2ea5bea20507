/* CPU kernels: LayerNormalization, BatchNormalization, Instance/GroupNormalization.
 * Placeholder table until the family's kernels are written. */
#include "kernels.h"

const AmpCpuKernelEntry amp_cpu_norm_kernels[] = {
    {AMP_OP_UNKNOWN, NULL},
};
