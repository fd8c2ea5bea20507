/* The supports predicates the CUDA kernels share (declared in cuda_impl.h): a leaf below
 * the kernel files and the op table (table.c), which both name them. */
#include "kernels/cuda/cuda_impl.h"

bool amp_cuda_is_float(int dtype) {
    return dtype == AMP_DT_FLOAT || dtype == AMP_DT_FLOAT16 || dtype == AMP_DT_BFLOAT16;
}

bool amp_cuda_supports_float(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    (void)opset;
    int dt = AMP_DT_UNDEFINED;
    for (int i = 0; i < n->n_inputs; i++) {
        if (!n->inputs[i]) continue;
        if (!amp_cuda_is_float(in_dtypes[i]) || (dt && in_dtypes[i] != dt)) return false;
        dt = in_dtypes[i];
    }
    return dt != AMP_DT_UNDEFINED;
}
