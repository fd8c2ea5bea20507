/* CPU kernels: reductions, Softmax, LogSoftmax, losses.
 * Placeholder table until the family's kernels are written. */
#include "kernels.h"

const AmpCpuKernelEntry amp_cpu_reduce_kernels[] = {
    {AMP_OP_UNKNOWN, NULL},
};
