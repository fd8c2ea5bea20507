/* The CUDA op table as linked (kernels/cuda/table.c), on the CPU (no GPU needed): the CPU
 * is the reference, so every op with a CUDA kernel has a CPU kernel, and an entry's
 * prepare and supports come with a kernel. tests/kernels/test_op_tables.c reads the same
 * table as text in every build, and holds the ops without an entry to a stated reason. */
#include <criterion/criterion.h>

#include "kernels/cpu/kernels.h"
#include "kernels/cuda/cuda_impl.h"

Test(cuda_table, every_cuda_op_has_a_cpu_kernel) {
    int n = 0;
    for (int op = 0; op < AMP_OP__COUNT; op++) {
        const AmpCudaOp *c = &amp_cuda_ops[op];
        if (!c->fn) {
            cr_expect(!c->prepare && !c->supports, "%s: a prepare or supports without a kernel",
                      amp_op_info((AmpOpId)op)->name);
            continue;
        }
        n++;
        cr_expect(amp_cpu_kernel((AmpOpId)op) != NULL, "%s has a CUDA kernel but no CPU kernel",
                  amp_op_info((AmpOpId)op)->name);
        cr_expect(c->supports != NULL, "%s: a CUDA kernel that is never taken (no supports)",
                  amp_op_info((AmpOpId)op)->name);
    }
    cr_expect_gt(n, 100);
}
