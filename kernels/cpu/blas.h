/* OpenBLAS, loaded on first use. The CPU kernels' matrix products go through
 * amp_sgemm / amp_dgemm (cblas_sgemm / cblas_dgemm's arguments). The library is opened
 * with dlopen the first time a session prepares a kernel, not when the process starts:
 * linking it would make every `ampc` conversion pay for OpenBLAS's start-up (its
 * thread pool, libgfortran's relocations: about 6 ms here) though converting never
 * multiplies a matrix. With AMP_THREADS set, OpenBLAS runs that many threads.
 * MatMul and Gemm in float32 and bfloat16 go through oneDNN where it is there (dnnl.h). */
#ifndef AMP_CPU_BLAS_H
#define AMP_CPU_BLAS_H

#include <cblas.h>

#include "ir/fail.h"

/* Opens the library once (thread-safe); AMP_ERR_UNSUPPORTED naming what was tried when
 * it can't be found. Sessions call it before running; the wrappers below call it too. */
AmpCode amp_blas_load(AmpStatus *st);

void amp_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, blasint m, blasint n,
               blasint k, float alpha, const float *a, blasint lda, const float *b, blasint ldb, float beta,
               float *c, blasint ldc);
void amp_dgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, blasint m, blasint n,
               blasint k, double alpha, const double *a, blasint lda, const double *b, blasint ldb, double beta,
               double *c, blasint ldc);

#endif
