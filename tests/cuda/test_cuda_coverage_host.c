/* What the CUDA backend takes, on the CPU (no GPU needed): amp_backend_kind_takes (what
 * `ampc verify` lists) reads a node's input dtypes as the model types them; the variadic
 * ops (Sum, Mean, Max, Min) take any number of inputs, past one launch's
 * AMP_CUDA_EW_MAX_VAR (the loss-scaling check sums one value per gradient), and the fp32
 * accumulator their chained launches need. */
#include <criterion/criterion.h>

#include "backend/backend.h"
#include "kernels/cuda/cuda_impl.h"
#include "kernels/cuda/elementwise.h"
#include "tests/runtime/rt_util.h"

/* A node `op` of m reading n fresh values of dtype dt (AMP_DT_UNDEFINED: untyped). */
static AmpNode *node_of(AmpModel *m, const char *op, int n, int dt) {
    AmpNode *node = amp_node_new(m->graph, "", op, "n", n, 1);
    cr_assert_not_null(node);
    for (int i = 0; i < n; i++) {
        AmpValue *v = amp_graph_new_value(m->graph, "x");
        cr_assert_not_null(v);
        if (dt != AMP_DT_UNDEFINED) {
            v->type.kind = AMP_TYPE_TENSOR;
            v->type.dtype = dt;
        }
        cr_assert_eq(amp_node_set_input(node, i, v), AMP_OK);
    }
    amp_node_set_output(node, 0, amp_graph_new_value(m->graph, "y"));
    amp_node_append(m->graph, node);
    return node;
}

Test(cuda_coverage, variadic_any_arity) {
    AmpModel *m = rt_model(18);
    static const int counts[] = {1, 8, 9, 11, 16, 300};
    static const int floats[] = {AMP_DT_FLOAT, AMP_DT_FLOAT16, AMP_DT_BFLOAT16};
    for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
        for (size_t f = 0; f < 3; f++) {
            cr_assert(amp_backend_kind_takes(AMP_BACKEND_CUDA, m, node_of(m, "Sum", counts[c], floats[f])), "Sum of %d", counts[c]);
            cr_assert(amp_backend_kind_takes(AMP_BACKEND_CUDA, m, node_of(m, "Mean", counts[c], floats[f])), "Mean of %d", counts[c]);
            cr_assert(amp_backend_kind_takes(AMP_BACKEND_CUDA, m, node_of(m, "Max", counts[c], floats[f])), "Max of %d", counts[c]);
        }
        cr_assert(amp_backend_kind_takes(AMP_BACKEND_CUDA, m, node_of(m, "Min", counts[c], AMP_DT_INT64)), "int Min of %d", counts[c]);
        /* an integer Sum stays on the CPU (the CPU refuses it too), as do untyped inputs */
        cr_assert_not(amp_backend_kind_takes(AMP_BACKEND_CUDA, m, node_of(m, "Sum", counts[c], AMP_DT_INT32)));
        cr_assert_not(amp_backend_kind_takes(AMP_BACKEND_CUDA, m, node_of(m, "Sum", counts[c], AMP_DT_UNDEFINED)));
    }
    /* inputs of two dtypes: no kernel (the model is invalid; the CPU refuses it when it runs) */
    AmpNode *mixed = node_of(m, "Sum", 11, AMP_DT_FLOAT16);
    mixed->inputs[10]->type.dtype = AMP_DT_FLOAT;
    cr_assert_not(amp_backend_kind_takes(AMP_BACKEND_CUDA, m, mixed));
    amp_model_free(m);
}

Test(cuda_coverage, no_kernel) {
    AmpModel *m = rt_model(18);
    cr_assert(amp_backend_kind_takes(AMP_BACKEND_CUDA, m, node_of(m, "Add", 2, AMP_DT_FLOAT16)));
    cr_assert_not(amp_backend_kind_takes(AMP_BACKEND_CUDA, m, node_of(m, "NonZero", 1, AMP_DT_FLOAT)), "NonZero has no CUDA kernel");
    AmpNode *odd = node_of(m, "NoSuchOp", 1, AMP_DT_FLOAT);
    cr_assert_not(amp_backend_kind_takes(AMP_BACKEND_CUDA, m, odd));
    amp_model_free(m);
}

/* One launch needs nothing; past it a 16-bit output keeps fp32 sums (nelem floats), while
 * float32 and integers accumulate in the output itself. */
Test(cuda_coverage, variadic_scratch) {
    cr_assert_eq(amp_cuda_ew_variadic_scratch(AMP_DT_FLOAT16, AMP_CUDA_EW_MAX_VAR, 1000), 0);
    cr_assert_eq(amp_cuda_ew_variadic_scratch(AMP_DT_FLOAT16, AMP_CUDA_EW_MAX_VAR + 1, 1000), 4000);
    cr_assert_eq(amp_cuda_ew_variadic_scratch(AMP_DT_BFLOAT16, 300, 1), 4);
    cr_assert_eq(amp_cuda_ew_variadic_scratch(AMP_DT_FLOAT, 300, 1000), 0);
    cr_assert_eq(amp_cuda_ew_variadic_scratch(AMP_DT_INT64, 300, 1000), 0);
}
