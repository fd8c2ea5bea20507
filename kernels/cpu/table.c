/* The CPU backend's kernels by op id, built from ops.def's CPU column: CPU(kernel) or
 * CPU(kernel, prepare) in the op's row (kernels.h declares them). An op with NO_CPU has
 * no CPU kernel; the executor then names it at prepare. */
#include "kernels/cpu/kernels.h"

#define NO_CPU NULL
#define AMP_OP(id, domain, name, fp16_class, bf16_class, opsets, inputs, outputs, float_inputs, \
               infer, cpu, ...)                                                                \
    [AMP_OP_##id] = cpu,

/* The kernel: the column's first function. */
#define CPU(...) AMP_CPU_ARG1_(__VA_ARGS__, -)
const AmpKernelFn amp_cpu_kernels[AMP_OP__COUNT] = {
#include "ir/ops.def"
};
#undef CPU

/* The kernels that parse their attributes once, at prepare (AmpKernelPrepareFn): the
 * column's second function, NULL where it names none. */
#define CPU(...) AMP_CPU_ARG2_(__VA_ARGS__, NULL, -)
const AmpKernelPrepareFn amp_cpu_kernel_prepares[AMP_OP__COUNT] = {
#include "ir/ops.def"
};
#undef CPU
#undef AMP_OP
#undef NO_CPU
