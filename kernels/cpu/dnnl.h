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

#include "ir/kernel.h"

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

/* ---- convolutions (conv.c's Conv and ConvTranspose, ms_train.c's ConvGrad) ---------- */

enum {
    AMP_DNNL_CONV_FWD,         /* dst = conv(src, wei) (+ bias): Conv */
    AMP_DNNL_DECONV_FWD,       /* dst = deconv(src, wei) (+ bias): ConvTranspose */
    AMP_DNNL_CONV_BWD_DATA,    /* diff_src = Conv's data gradient of diff_dst through wei */
    AMP_DNNL_CONV_BWD_WEIGHTS, /* diff_wei (and diff_bias) from src and diff_dst */
};
enum { AMP_DNNL_MAX_SPATIAL = 3 };

/* One convolution, every tensor in ONNX's plain layout (N, C, D1...), 1 to 3 spatial
 * dims. The geometry is always the forward convolution's: src (n, ic, in...), weights
 * (oc, ic / group, kern...), dst (n, oc, out...), output position o reading input
 * positions o * stride - pad0 + j * dil (dil 1-based as in ONNX; pad1 the end pad, which
 * may be negative). For AMP_DNNL_DECONV_FWD (ConvTranspose) src is X (n, ic, in...) and
 * dst Y (n, oc, out...), weights ONNX's (ic, oc / group, kern...), and position i of X
 * lands on i * stride - pad0 + j * dil of Y. */
typedef struct AmpDnnlConv {
    int kind;   /* AMP_DNNL_CONV_* */
    int dt;     /* AMP_DT_FLOAT or AMP_DT_BFLOAT16: the inputs' type (bias included) */
    int dt_out; /* the output's (every output's, for the backward weights) */
    int nsp;
    int64_t n, ic, oc, group;
    int64_t in[AMP_DNNL_MAX_SPATIAL], kern[AMP_DNNL_MAX_SPATIAL], out[AMP_DNNL_MAX_SPATIAL];
    int64_t stride[AMP_DNNL_MAX_SPATIAL], dil[AMP_DNNL_MAX_SPATIAL];
    int64_t pad0[AMP_DNNL_MAX_SPATIAL], pad1[AMP_DNNL_MAX_SPATIAL];
    bool bias; /* forward: a bias (oc) of dt; backward weights: diff_bias wanted */
    /* AMP_DNNL_CONV_BWD_WEIGHTS only: the tensors are stored with their first two axes
     * swapped: src as (ic, n, in...), diff_dst as (oc, n, out...), diff_wei as (ic, oc,
     * kern...). That is how a weight gradient reads when written as a plain Conv (`ampc
     * grad`'s: Conv of the batch-transposed input by the batch-transposed output
     * gradient, whose result is the transposed weight gradient), which the CPU's Conv
     * hands to oneDNN's backward-weights this way. */
    bool swapped;
    /* AMP_DNNL_CONV_FWD only, oneDNN post-ops on the float32 accumulator, after the bias,
     * in this order (ai.ampc ConvEpilogue): sum adds AmpDnnlConvIO.sum_src (dst's type
     * and shape; its layout sum_nhwc), relu then takes max(., 0). */
    bool sum, relu;
    /* AMP_DNNL_CONV_FWD only: src / dst stored channels-last (N, spatial..., C), the
     * layout oneDNN's convolutions run in on AVX-512 CPUs, rather than ONNX's (N, C,
     * spatial...): a tensor passed from one convolution to the next without a reorder out of
     * the one and into the other. */
    bool src_nhwc, dst_nhwc;
    /* AMP_DNNL_CONV_FWD with sum only: the summand stored channels-last (else ONNX's
     * layout), whatever dst's layout: each is reordered into the other where they differ. */
    bool sum_nhwc;
} AmpDnnlConv;

/* The buffers of one call; the ones p's kind does not use are ignored. wei_pack, where
 * the weights are a constant of the session (AmpKernelCtx.const_in), keeps them in the
 * layout the primitive wants, reordered on the first call only; NULL: every call
 * reorders them. */
typedef struct AmpDnnlConvIO {
    const void *src, *wei, *bias, *diff_dst;
    void *dst, *diff_src, *diff_wei, *diff_bias;
    AmpKernelPack *wei_pack;
    const void *sum_src; /* AmpDnnlConv.sum: the tensor added to the convolution's result */
} AmpDnnlConvIO;

/* Computes p; false (outputs untouched, or partly written: the caller recomputes them all)
 * where oneDNN is off or would run it with its reference implementation, which is slower
 * than the im2col path the caller then takes. */
bool amp_dnnl_conv(const AmpDnnlConv *p, const AmpDnnlConvIO *io);

#endif
