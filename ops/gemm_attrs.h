/* Gemm's and com.microsoft FusedMatMul's attributes below every backend
 * (ops/gemm_attrs.c), parsed once at prepare, and the geometry of MatMul, FusedMatMul,
 * Gemm and com.microsoft FusedGemm (ops/geom.h): the CPU kernels (kernels/cpu/gemm.c with
 * its oneDNN path, and ms_train.c's FusedGemm) and the CUDA ones (kernels/cuda/gemm.c) read
 * the same structs. */
#ifndef AMP_OPS_GEMM_ATTRS_H
#define AMP_OPS_GEMM_ATTRS_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/ir.h"
#include "ir/kernel.h"

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

/* MatMul's and FusedMatMul's geometry: Y = alpha * op(A) @ op(B) after numpy's 1-D
 * promotion (a 1-D A is a row (1, K), a 1-D B a column (K, 1); the transposes apply to rank
 * >= 2), batched over an output batch both inputs' batch dims broadcast to. */
typedef struct AmpMatmulGeom {
    bool ta, tb;                 /* FusedMatMul's transA / transB as given (MatMul: false) */
    int64_t m, n, kk;            /* Y's matrices (m, n) = op(A)'s (m, kk) @ op(B)'s (kk, n) */
    int nb;                      /* the output's batch rank */
    int nba, nbb;                /* A's and B's batch ranks */
    int64_t batch[AMP_MAX_RANK]; /* the output's batch dims */
    int64_t sa[AMP_MAX_RANK];    /* A's batch strides, in matrices (0 = broadcast) */
    int64_t sb[AMP_MAX_RANK];    /* B's */
    uint64_t nbatch, na, nbm;    /* matrices in the output, in A, in B */
} AmpMatmulGeom;
/* Their AmpKernelGeomFn (MatMul's row is bare; FusedMatMul's attributes are an
 * AmpGemmAttrs): A and B present, of one dtype, of rank >= 1, their inner dims equal and
 * batch dims broadcasting (AMP_ERR_INPUT if not); Y checked: A's dtype, the batch dims,
 * then m unless A is 1-D, then n unless B is 1-D. The dtypes and sizes each backend takes
 * stay its kernel's checks. */
AmpCode amp_matmul_geom(AmpKernelCtx *k, void *geom, bool *made);

/* Gemm's (and FusedGemm's, whose attributes begin with an AmpGemmAttrs) geometry: Y (m, n)
 * = alpha * op(A) @ op(B) + beta * C, C broadcast to (m, n) unidirectionally. */
typedef struct AmpGemmGeom {
    int64_t m, n, ka;
    bool has_c;
    int64_t c_rs, c_cs; /* C's element strides over Y's rows and columns; 0 where C has one */
} AmpGemmGeom;
/* Their AmpKernelGeomFn: A and B present and 2-D, A, B and C of one dtype, the inner dims
 * equal, C of rank <= 2 broadcasting to (m, n) (AMP_ERR_INPUT if not); Y checked: A's
 * dtype, (m, n). */
AmpCode amp_gemm_geom(AmpKernelCtx *k, void *geom, bool *made);

#endif
