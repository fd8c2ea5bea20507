/* Gemm's and com.microsoft FusedMatMul's attributes below every backend
 * (ops/gemm_attrs.c), parsed once at prepare: the CPU kernels (kernels/cpu/gemm.c, and
 * ms_train.c's FusedGemm) and the CUDA ones (kernels/cuda/gemm.c) read the same struct. */
#ifndef AMP_OPS_GEMM_ATTRS_H
#define AMP_OPS_GEMM_ATTRS_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/ir.h"

/* Gemm's attributes (transA, transB, alpha, beta), as its prepare function parses them. */
typedef struct AmpGemmAttrs {
    bool ta, tb;
    float alpha, beta;
} AmpGemmAttrs;
AmpGemmAttrs amp_gemm_attrs(const AmpNode *n);

/* The prepare functions (AmpKernelPrepareFn) of Gemm and FusedMatMul on every backend:
 * an AmpGemmAttrs. */
AmpCode amp_gemm_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
AmpCode amp_fused_matmul_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);

#endif
