/* Gemm's and FusedMatMul's attributes, every backend's (ops/gemm_attrs.h). */
#include <stdlib.h>

#include "ir/kernel.h" /* amp_node_fail */
#include "ops/gemm_attrs.h"

/* Gemm's attributes (AmpGemmAttrs) serve FusedMatMul too, whose beta goes unused. */
AmpGemmAttrs amp_gemm_attrs(const AmpNode *n) {
    return (AmpGemmAttrs){.ta = amp_node_attr_int(n, "transA", 0) != 0,
                          .tb = amp_node_attr_int(n, "transB", 0) != 0,
                          .alpha = amp_node_attr_float(n, "alpha", 1.0f),
                          .beta = amp_node_attr_float(n, "beta", 1.0f)};
}

static AmpCode mm_attrs_out(const AmpNode *n, void **attrs, AmpStatus *st) {
    AmpGemmAttrs *a = malloc(sizeof *a);
    if (!a) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    *a = amp_gemm_attrs(n);
    *attrs = a;
    return AMP_OK;
}

AmpCode amp_gemm_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    (void)opset;
    return mm_attrs_out(n, attrs, st);
}

/* transBatchA/B (batch axes moved into the matrix) are not implemented. */
AmpCode amp_fused_matmul_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    (void)opset;
    if (amp_node_attr_int(n, "transBatchA", 0) || amp_node_attr_int(n, "transBatchB", 0))
        return amp_node_fail(n, st, AMP_ERR_UNSUPPORTED, "transBatchA / transBatchB are not implemented");
    return mm_attrs_out(n, attrs, st);
}
