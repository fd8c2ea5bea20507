/* The CPU kernels: the reference executor's compute, one file per op family. A kernel
 * reads its input buffers and the node's attributes, works out its output shapes, asks
 * the runtime for the output buffers (ctx->alloc) and fills them. 16-bit float tensors
 * are stored in 16 bits, computed in fp32 and rounded (to nearest even) on store. */
#ifndef AMP_CPU_KERNELS_H
#define AMP_CPU_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir.h"
#include "kernel.h" /* AmpKernelCtx, AmpKernelFn */
#include "tensor.h" /* AmpBuf and its shape helpers */

/* One family's registrations: {op, kernel}, ended by {AMP_OP_UNKNOWN, NULL}. */
typedef struct AmpCpuKernelEntry {
    AmpOpId op;
    AmpKernelFn run;
} AmpCpuKernelEntry;

/* The kernel for an op, or NULL when the CPU backend has none (the executor's error
 * then names the op). Chosen once per node when the session is prepared. */
AmpKernelFn amp_cpu_kernel(AmpOpId op);

/* The CPU backend's prepare_node (backend_cpu.c), shared with the device simulator. */
struct AmpBackendKernel;
AmpCode amp_cpu_prepare_node(const AmpNode *n, struct AmpBackendKernel *out, AmpStatus *st);

/* ---- helpers shared by the families (common.c) ----------------------------------- */

/* A float32 view of a float-family input: the buffer itself when it is float32, else a
 * converted copy in *tmp (free() it; NULL when no copy was made). NULL on OOM. */
const float *amp_buf_f32_in(const AmpBuf *b, float **tmp);
/* A float32 array to compute an output into: the buffer itself when float32, else a
 * scratch array; amp_buf_f32_commit rounds it into the buffer and frees it. */
float *amp_buf_f32_out(AmpBuf *b, float **tmp);
void amp_buf_f32_commit(AmpBuf *b, float *tmp);

/* AMP_ERR_UNSUPPORTED naming the node, op and dtype. */
AmpCode amp_kernel_bad_dtype(AmpKernelCtx *k, int dtype);

/* ---- the families (each file defines its table) ---------------------------------- */

extern const AmpCpuKernelEntry amp_cpu_elementwise_kernels[]; /* elementwise.c, activation.c */
extern const AmpCpuKernelEntry amp_cpu_gemm_kernels[];        /* gemm.c: MatMul, Gemm, Einsum */
extern const AmpCpuKernelEntry amp_cpu_conv_kernels[];        /* conv.c, pool.c */
extern const AmpCpuKernelEntry amp_cpu_reduce_kernels[];      /* reduce.c, softmax.c, loss.c */
extern const AmpCpuKernelEntry amp_cpu_norm_kernels[];        /* norm.c: Layer/Batch/Instance/GroupNorm, LpNorm, LRN */
extern const AmpCpuKernelEntry amp_cpu_train_kernels[];       /* optim.c: Adam, Momentum, Adagrad */
extern const AmpCpuKernelEntry amp_cpu_shape_kernels[];       /* shape.c, gather.c, ...: data movement */
extern const AmpCpuKernelEntry amp_cpu_tensor_kernels[];      /* tensor.c: Cast, Constant, Shape, Range, ... */
extern const AmpCpuKernelEntry amp_cpu_rnn_kernels[];         /* rnn.c: RNN, GRU, LSTM */
extern const AmpCpuKernelEntry amp_cpu_attention_kernels[];   /* attention.c: Attention, com.microsoft Attention/MHA/FusedGemm/ConvGrad/AdamW */

#endif
