/* CPU kernels: ai.onnx.preview.training Adam, Momentum, Adagrad.
 * Placeholder table until the family's kernels are written. */
#include "kernels.h"

const AmpCpuKernelEntry amp_cpu_train_kernels[] = {
    {AMP_OP_UNKNOWN, NULL},
};
