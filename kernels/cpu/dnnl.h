/* oneDNN under the CPU backend's matrix products (MatMul, FusedMatMul, Gemm): float32 and
 * bfloat16 inputs, float32 accumulation, float32 or bfloat16 output. Like OpenBLAS
 * (blas.h) the library is opened with dlopen on first use, so that commands which never
 * multiply a matrix do not pay for its start-up; built without oneDNN's header
 * (AMPC_HAVE_DNNL undefined), or where libdnnl cannot be opened, every call here answers
 * false and the kernels use OpenBLAS as before.
 *
 * Primitives are made once per problem (types, shapes, transposes, alpha, bias, the
 * thread count) and kept in a process-wide cache. Threads: Debian's oneDNN runs on
 * OpenMP (libgomp); with AMP_THREADS set, each call sets the calling thread's OpenMP
 * thread count to it (omp_set_num_threads) before making or running a primitive;
 * without it, OpenMP's own default applies (OMP_NUM_THREADS, else every CPU the process
 * may use). AMP_DNNL=0 turns oneDNN off (OpenBLAS for everything, as before). */
#ifndef AMP_CPU_DNNL_H
#define AMP_CPU_DNNL_H

#include <stdbool.h>
#include <stdint.h>

/* One matrix product: dst = alpha * op(A) @ op(B) (+ bias) (+ dst), batched.
 * A is (batch_a..., m, k) after op, stored row-major as (m, k), or (k, m) where ta;
 * B (batch_b..., k, n), stored (k, n), or (n, k) where tb; dst (batch..., m, n)
 * row-major. Each batch dim of A and B is the output's or 1 (broadcast). */
typedef struct AmpDnnlMatmul {
    int dt_ab;  /* AMP_DT_FLOAT or AMP_DT_BFLOAT16: A's and B's type */
    int dt_dst; /* AMP_DT_FLOAT or AMP_DT_BFLOAT16 */
    int nb;     /* batch rank, at most AMP_DNNL_MAX_BATCH */
    int64_t batch_a[10], batch_b[10];
    int64_t m, n, k;
    bool ta, tb;
    float alpha;
    /* A bias of dt_ab, (1, n) (only where nb is 0; oneDNN's optimized kernels take no
     * other broadcast of it); added after alpha's scaling, so only with alpha 1. */
    bool bias;
    bool accumulate; /* dst += the product (dst float32) */
} AmpDnnlMatmul;

enum { AMP_DNNL_MAX_BATCH = 10 };

/* Whether oneDNN is there and on (built with it, the library opens, AMP_DNNL is not 0). */
bool amp_dnnl_enabled(void);

/* Computes p into dst; false (dst untouched) where oneDNN is off or has no primitive for
 * the problem on this CPU (bf16 without AVX-512, say): the caller then computes it. */
bool amp_dnnl_matmul(const AmpDnnlMatmul *p, const void *a, const void *b, const void *bias, void *dst);

/* Whether oneDNN is the faster choice for an m x n x k product of dtype (float32 or
 * bfloat16) on this machine: below a measured size OpenBLAS's sgemm wins for float32. */
bool amp_dnnl_wins(int dtype, int64_t m, int64_t n, int64_t k);

#endif
