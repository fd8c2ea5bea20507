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

#define AMP_MAX_RANK 8

/* A runtime tensor. */
typedef struct AmpBuf {
    int dtype; /* AmpDType */
    int rank;
    int64_t dims[AMP_MAX_RANK];
    uint64_t nelem;
    void *data; /* nelem elements in ONNX raw layout; may be NULL when nelem == 0 */
} AmpBuf;

/* Gives output `index` of the running node its type and shape and returns the buffer
 * to fill (data allocated, contents undefined), or NULL with st set. Rank must be
 * <= AMP_MAX_RANK. */
typedef AmpBuf *(*AmpAllocFn)(void *alloc_ctx, int index, int dtype, int rank, const int64_t *dims,
                              AmpStatus *st);

typedef struct AmpKernelCtx {
    const AmpNode *node; /* attributes (amp_node_attr*), names for messages */
    int64_t opset;       /* version imported for the node's domain */
    int n_in;
    const AmpBuf *const *in; /* n_in entries; NULL = optional input left out */
    int n_out;               /* outputs the node lists; node->outputs[i] NULL = not wanted */
    AmpAllocFn alloc;
    void *alloc_ctx;
    uint64_t *rng; /* state for ops that draw random numbers (Dropout in training mode) */
    bool training; /* a training step is running (Dropout masks, BatchNorm statistics) */
    AmpStatus *st;
} AmpKernelCtx;

typedef AmpCode (*AmpKernelFn)(AmpKernelCtx *k);

/* One family's registrations: {op, kernel}, ended by {AMP_OP_UNKNOWN, NULL}. */
typedef struct AmpCpuKernelEntry {
    AmpOpId op;
    AmpKernelFn run;
} AmpCpuKernelEntry;

/* The kernel for an op, or NULL when the CPU backend has none (the executor's error
 * then names the op). Chosen once per node when the session is prepared. */
AmpKernelFn amp_cpu_kernel(AmpOpId op);

/* ---- helpers shared by the families (common.c) ----------------------------------- */

uint64_t amp_shape_nelem(int rank, const int64_t *dims);
size_t amp_buf_bytes(const AmpBuf *b);
/* float32, float16 or bfloat16: the storage types the float kernels take. */
bool amp_is_f32_family(int dtype);

/* A float32 view of a float-family input: the buffer itself when it is float32, else a
 * converted copy in *tmp (free() it; NULL when no copy was made). NULL on OOM. */
const float *amp_buf_f32_in(const AmpBuf *b, float **tmp);
/* A float32 array to compute an output into: the buffer itself when float32, else a
 * scratch array; amp_buf_f32_commit rounds it into the buffer and frees it. */
float *amp_buf_f32_out(AmpBuf *b, float **tmp);
void amp_buf_f32_commit(AmpBuf *b, float *tmp);

/* Numpy-style broadcast of two shapes; false when they do not broadcast. */
bool amp_broadcast_shape(int ra, const int64_t *a, int rb, const int64_t *b, int *rank, int64_t *out);
/* Element strides of an input of shape (rin, din) read at the indices of an output of
 * shape (rout, dout): 0 along broadcast axes. */
void amp_broadcast_strides(int rin, const int64_t *din, int rout, const int64_t *dout, int64_t *strides);

/* Reads element i of an integer buffer (int8..int64, uint8..uint64, bool) as int64. */
int64_t amp_buf_get_i64(const AmpBuf *b, uint64_t i);

/* Normalises a possibly negative axis into [0, rank); false when out of range. */
bool amp_norm_axis(int64_t axis, int rank, int *out);

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
