/* CPU kernels: Add, Mul, Relu, Sigmoid, ... (elementwise arithmetic, comparisons, logic, activations).
 * Placeholder table until the family's kernels are written. */
#include "kernels.h"

const AmpCpuKernelEntry amp_cpu_elementwise_kernels[] = {
    {AMP_OP_UNKNOWN, NULL},
};
