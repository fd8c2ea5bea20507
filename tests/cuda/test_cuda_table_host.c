/* The CUDA op table as linked (kernels/cuda/table.c), on the CPU (no GPU needed): the CPU
 * is the reference, so every op with a CUDA kernel has a CPU kernel, and an entry's
 * prepare and supports come with a kernel. tests/kernels/test_op_tables.c reads the same
 * table as text in every build, and holds the ops without an entry to a stated reason. */
#include <criterion/criterion.h>

#include "kernels/cpu/kernels.h"
#include "ops/ew_common.h" /* the prepares ops/unary.def names */
#include "kernels/cuda/cuda_impl.h"
#include "kernels/cuda/elementwise.h"

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

/* The rows ops/unary.def's lines make: the generic kernel with the line's prepare where
 * its CUDA column is 1, no row where 0 (tests/kernels/test_op_tables.c holds the reasons). */
Test(cuda_table, the_unary_rows_are_the_lists) {
    static const struct {
        AmpOpId op;
        AmpKernelPrepareFn prepare;
        bool cuda, ints;
    } lines[] = {
#define AMP_UNARY(Id, FEXPR, DEXPR, PREPARE, TYPES, LUT, CUDA, FUSE) {AMP_OP_##Id, PREPARE, CUDA, AMP_UNARY_INT_##TYPES},
#include "ops/unary.def"
#undef AMP_UNARY
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        const AmpCudaOp *c = &amp_cuda_ops[lines[i].op];
        const char *name = amp_op_info(lines[i].op)->name;
        if (!lines[i].cuda) {
            cr_expect(!c->fn, "%s: CUDA 0 in ops/unary.def, but a CUDA row", name);
            continue;
        }
        cr_expect_eq(c->fn, amp_cuda_unary, "%s", name);
        cr_expect_eq(c->prepare, lines[i].prepare, "%s", name);
        cr_expect_eq(c->supports, lines[i].ints ? amp_cuda_supports_float_or_int : amp_cuda_supports_float, "%s",
                     name);
    }
}
