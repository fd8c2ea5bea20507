/* The CUDA backend's kernels: what they share (backend_cuda.c holds the instance). Each op
 * family is two files, as in llm.c: FAMILY.cu holds the CUDA kernels and their `extern
 * "C"` launchers (raw device pointers, sizes and the stream; they return the cudaError_t
 * of the launch as an int, 0 when fine), and FAMILY.c the node-level kernel
 * (AmpKernelFn): it reads the node's inputs, attributes and placed outputs, checks what
 * keeps memory safe as the CPU kernels do, and calls the launchers on the session's
 * stream. Nothing here synchronises, allocates or frees device memory while a step runs,
 * except amp_cuda_read_ints (the small host values a few ops need; counted).
 *
 * The CPU kernels (kernels/cpu) are the reference every CUDA kernel is tested against;
 * what both backends share lies below them in ops/: the attribute parsing (prepare
 * functions), the shape checks and geometry, and the output helpers (ops/kernel_out.h:
 * amp_kernel_outputs, amp_kernel_check_out, amp_kernel_bad_dtype). No CUDA file includes
 * a kernels/cpu header. */
#ifndef AMP_CUDA_IMPL_H
#define AMP_CUDA_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"
#include "ir/kernel.h"
#include "ops/kernel_out.h" /* amp_kernel_outputs, amp_kernel_check_out, amp_kernel_bad_dtype */
#include "ir/tensor.h"

/* What a CUDA kernel receives as AmpKernelCtx.dev: the session's stream, library handles
 * and scratch, made once when the session opens. */
typedef struct AmpCudaCtx {
    void *stream;           /* cudaStream_t: every launch and copy of the session */
    void *lt;               /* cublasLtHandle_t */
    void *dnn;              /* cudnnHandle_t, bound to stream */
    void *workspace;        /* device scratch for cuBLASLt / cuDNN: workspace_bytes */
    size_t workspace_bytes;
    bool tf32;              /* float32 GEMMs and convolutions may use TF32 (the session's
                               tf32 option, AMP_TF32=1); default: a true FP32 baseline */
    struct AmpCudaCache *cache; /* per-session caches: cuBLASLt algorithms, cuDNN algorithms */
    size_t syncs;           /* amp_cuda_read_ints calls in this session */
    struct AmpNccl *nccl;   /* the ranks' device collective (nccl_comm.h); NULL outside a
                               data-parallel job or where NCCL is not used */
} AmpCudaCtx;

/* k->dev as the CUDA context. */
static inline AmpCudaCtx *amp_cuda_ctx(const AmpKernelCtx *k) {
    return (AmpCudaCtx *)k->dev;
}

/* AMP_OK when err (a cudaError_t) is 0; else AMP_ERR_INTERNAL naming the node, the op,
 * `what` and CUDA's own message. */
AmpCode amp_cuda_check(AmpKernelCtx *k, int err, const char *what);
/* The same for a cublasStatus_t and a cudnnStatus_t. */
AmpCode amp_cuda_check_blas(AmpKernelCtx *k, int status, const char *what);
AmpCode amp_cuda_check_dnn(AmpKernelCtx *k, int status, const char *what);
/* The same, but a status saying cuDNN does not take the parameters (BAD_PARAM,
 * NOT_SUPPORTED) is AMP_ERR_UNSUPPORTED: the executor then runs the node on the CPU. */
AmpCode amp_cuda_check_dnn_geometry(AmpKernelCtx *k, int status, const char *what);

/* The elements of integer input `index` (int32 or int64; a small tensor: Slice bounds,
 * Pad pads, a Tile's repeats) on the host: copied out of the device, waiting on the
 * stream. Returns the count, or -1 with k->st set (absent input, another dtype, more than
 * max elements). */
int amp_cuda_read_ints(AmpKernelCtx *k, int index, int64_t *out, int max);

/* A device-to-device copy of `bytes` on the session's stream (Identity, Reshape ...). */
AmpCode amp_cuda_copy(AmpKernelCtx *k, void *dst, const void *src, size_t bytes);

/* ---- per-session caches (cache.c): library plans and algorithms by shape ---------- */

/* The value cached under (family, key bytes), or NULL. A family is a small constant of
 * the file that caches (the GEMM plans, the convolution plans). */
void *amp_cuda_cache_get(AmpCudaCtx *c, int family, const void *key, size_t key_len);
/* Caches value under the key; free_value frees it when the session ends. false on OOM
 * (then the caller frees value itself). */
bool amp_cuda_cache_put(AmpCudaCtx *c, int family, const void *key, size_t key_len, void *value,
                        void (*free_value)(void *));
void amp_cuda_cache_free(struct AmpCudaCache *cache);

enum { AMP_CUDA_CACHE_GEMM = 1, AMP_CUDA_CACHE_CONV = 2, AMP_CUDA_CACHE_POOL = 3, AMP_CUDA_CACHE_CONVT = 4 };
enum { AMP_CUDA_CACHE_CONV_GRAD = 5 }; /* conv_grad.c: ConvGrad's descriptors and algorithms */

/* The alignment of a device address in bytes, a power of two at most 256. */
static inline unsigned amp_cuda_align(const void *p) {
    uintptr_t a = (uintptr_t)p;
    unsigned r = 256;
    while (r > 1 && (a & (r - 1))) r >>= 1;
    return r;
}

/* ---- shapes passed to kernels by value (no device metadata to allocate) ----------- */

#define AMP_CUDA_MAX_RANK AMP_MAX_RANK

/* An output index space and, per operand, its element strides at those indices (0 on
 * broadcast axes): kernels decompose a linear output index with dims[] and sum
 * index * stride[] per operand. */
typedef struct AmpCudaBcast {
    int rank;
    int64_t dims[AMP_CUDA_MAX_RANK];
    int64_t stride[3][AMP_CUDA_MAX_RANK]; /* up to three operands (Where) */
} AmpCudaBcast;

/* dtype ids as the launchers take them: the AmpDType numbers (AMP_DT_FLOAT,
 * AMP_DT_FLOAT16, AMP_DT_BFLOAT16, AMP_DT_INT32, AMP_DT_INT64, AMP_DT_BOOL, ...). */

/* ---- the op table (table.c) ---------------------------------------------------------- */

/* Whether the CUDA kernel of node n takes these input dtypes (in_dtypes[i] as the model
 * types input i; AMP_DT_UNDEFINED when absent or unknown) and attributes. A node the CUDA
 * backend does not take runs on the CPU fallback, so a supports function says false for
 * anything its kernel would refuse. */
typedef bool (*AmpCudaSupportsFn)(const AmpNode *n, int64_t opset, const int *in_dtypes);

typedef struct AmpCudaOp {
    AmpKernelFn fn;
    AmpKernelPrepareFn prepare; /* NULL: the kernel has no parsed attributes */
    AmpCudaSupportsFn supports; /* NULL: never taken */
} AmpCudaOp;

extern const AmpCudaOp amp_cuda_ops[AMP_OP__COUNT];

/* Common supports predicates (supports.c). */
bool amp_cuda_is_float(int dtype);     /* float32, float16, bfloat16 */
/* Every present input is a float32/float16/bfloat16 of one dtype. */
bool amp_cuda_supports_float(const AmpNode *n, int64_t opset, const int *in_dtypes);

#endif
